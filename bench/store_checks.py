"""What must hold of the annotation store after load or a crash, as a list of problems.

Used by ``bench/bench_load.py`` and ``tests/app/test_faults.py``: an empty list means every
acknowledged submission is stored exactly once, within its quota, with its files, and
nothing else is left behind.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from annotation.files import resolve
from annotation.integrity import orphaned_files
from storage import open_db


def check_store(
    db_path: str | Path, data_dir: str | Path, acks: list, *, k: int, all_acknowledged: bool = True
) -> list[str]:
    """Everything wrong with the store after load or a crash (empty when all is well).

    Checks ``PRAGMA integrity_check`` and ``foreign_key_check``; every acknowledged
    submission (practice or main) present, with its designer, concept and task pointing
    at it; colorings and submitted tasks one to one (nothing stored twice, no row without its task); no designer with two
    colorings of a concept in one round; no concept colored by more than `k` designers;
    every coloring with its distribution row and its files, matching their hashes; no
    orphaned files. With `all_acknowledged` every stored
    coloring must also be among `acks` (false after a crash: a commit may have happened
    whose answer never arrived).
    """
    db = open_db(db_path)
    try:
        problems = _sqlite_problems(db) + _row_problems(db, acks, k)
        if all_acknowledged:
            unacknowledged = db["colorings"].count - len({a.coloring_id for a in acks})
            problems += (
                [f"{unacknowledged} stored colorings were never acknowledged"] if unacknowledged else []
            )
        problems += _file_problems(db, Path(data_dir))
    finally:
        db.close()
    return problems


def _sqlite_problems(db) -> list[str]:
    integrity = [row[0] for row in db.execute("pragma integrity_check")]
    foreign = list(db.execute("pragma foreign_key_check"))
    return ([] if integrity == ["ok"] else [f"integrity_check: {integrity[:5]}"]) + (
        [f"foreign_key_check: {foreign[:5]}"] if foreign else []
    )


def _row_problems(db, acks: list, k: int) -> list[str]:
    colorings = {r["id"]: r for r in db["colorings"].rows}
    tasks = {r["result_id"]: r for r in db["tasks"].rows_where("kind = 'coloring' and status = 'submitted'")}
    problems = [
        f"acknowledged coloring {a.coloring_id} (task {a.task_id}) is missing"
        for a in acks
        if a.coloring_id not in colorings or tasks.get(a.coloring_id, {}).get("id") != a.task_id
    ]
    problems += [
        f"acknowledged coloring {a.coloring_id} is stored as another designer's or concept's"
        for a in acks
        if a.coloring_id in colorings
        and (colorings[a.coloring_id]["annotator_id"], colorings[a.coloring_id]["concept_key"])
        != (a.designer, a.concept_key)
    ]
    if len(tasks) != db["tasks"].count_where("kind = 'coloring' and status = 'submitted'"):
        problems.append("two submitted tasks name the same coloring")
    problems += [f"coloring {cid} has no submitted task" for cid in colorings.keys() - tasks.keys()]
    problems += [
        f"task {t['id']} names missing coloring {cid}" for cid, t in tasks.items() if cid not in colorings
    ]
    problems += [
        f"designer {a} colored {c!r} {n} times in round {r}"
        for a, c, r, n in db.execute(
            "select annotator_id, concept_key, round, count(*) from colorings where practice = 0 "
            "group by 1, 2, 3 having count(*) > 1"
        )
    ]
    problems += [
        f"concept {c!r} has {n} designers, over its quota {k}"
        for c, n in db.execute(
            "select concept_key, count(distinct annotator_id) from colorings where practice = 0 "
            "group by 1 having count(distinct annotator_id) > ?",
            [k],
        )
    ]
    problems += [
        f"coloring {cid} has no distribution"
        for (cid,) in db.execute(
            "select id from colorings where id not in (select coloring_id from coloring_distributions)"
        )
    ]
    return problems


def _file_problems(db, data_dir: Path) -> list[str]:
    problems = []
    for row in db["colorings"].rows:
        for kind in ("image", "mask"):
            path = resolve(data_dir, row[f"{kind}_path"])
            if not path.is_file():
                problems.append(f"coloring {row['id']}: {kind} {row[f'{kind}_path']} is missing")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != row[f"{kind}_sha256"]:
                problems.append(f"coloring {row['id']}: {kind} file does not match its hash")
    return problems + [f"orphaned file {p}" for p in orphaned_files(db, data_dir)]
