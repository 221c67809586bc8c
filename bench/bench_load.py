"""Load and faults: many designers submitting at once, a killed writer, a killed run.

Three scenarios, each ending in `check_store` (every acknowledged submission present
exactly once, quotas kept, no partial rows, no orphaned files, ``PRAGMA integrity_check``
ok):

- `concurrent_designers`: designers in threads, each with its own connection, reserve
  and submit colorings at once; submit latency is measured per call.
- `kill_designers`: designer *processes* (``python -m bench.bench_load designer``) are
  killed with SIGKILL in the middle of their submissions, one of them inside a write,
  after its files exist and before its row commits; then the store restarts (schema,
  start-up sweep of orphaned files) and is checked.
- `kill_evaluation_run` (in `bench.bench_faults_eval`) kills ``python -m evaluation
  generate`` and resumes it.

Submissions go through the annotation library (`annotation.assignment.reserve` /
`submit`), files first and row second, as the colorings store does; they move to the
designer tab's endpoint through `gradio_client` once that tab exists. ``python -m bench``
calls `run` for the figures in BENCHMARKS.md; ``tests/test_faults.py`` runs the same
scenarios at small sizes and asserts correctness only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.accounts import create_annotators
from annotation.assignment import reserve, submit
from annotation.concepts import sync_concepts
from annotation.db import ensure_schema, iso, open_db, transaction
from annotation.errors import Conflict
from annotation.files import resolve, store_png
from annotation.integrity import orphaned_files, sweep_orphans

ROOT = Path(__file__).resolve().parent.parent
SKETCH_SIDE = 64


@dataclass(frozen=True)
class Ack:
    """One acknowledged submission: the call returned the coloring's id."""

    designer: int
    task_id: int
    coloring_id: int
    concept_key: str
    seconds: float


@dataclass(frozen=True)
class Study:
    """A prepared store: its files, its designers and the size of the coloring pool."""

    db_path: Path
    data_dir: Path
    designers: tuple[int, ...]
    concepts: tuple[str, ...]
    k: int


def prepare_study(db_path: str | Path, data_dir: str | Path, n_designers: int,
                  n_concepts: int, *, k: int = 5) -> Study:
    """A fresh store with `n_designers` designers and sketches for about `n_concepts` concepts.

    Bases get a selected sketch in concept-file order until their variants number at
    least `n_concepts`; the pool then holds ``len(Study.concepts) * k`` coloring slots.
    """
    db = open_db(db_path)
    try:
        ensure_schema(db)
        sync_concepts(db)
        concepts = _sketch_bases(db, data_dir, n_concepts)
        designers = tuple(a["id"] for a, _ in create_annotators(db, n_designers, "designer"))
    finally:
        db.close()
    return Study(Path(db_path), Path(data_dir), designers, concepts, k)


def _sketch_bases(db: sqlite_utils.Database, data_dir: str | Path,
                  n_concepts: int) -> tuple[str, ...]:
    chosen: list[str] = []
    with transaction(db):
        for (base,) in db.execute("select base from concepts group by base order by min(rowid)"):
            if len(chosen) >= n_concepts:
                break
            line_art = np.full((SKETCH_SIDE, SKETCH_SIDE), 255, dtype=np.uint8)
            line_art[[0, -1], :] = line_art[:, [0, -1]] = 0
            line_art[SKETCH_SIDE // 2, : len(base) + 1] = 0
            stored = store_png(data_dir, line_art)
            db["sketches"].insert({"base": base, "path": stored.path, "sha256": stored.sha256,
                                   "source": "bench", "selected": 1, "width": SKETCH_SIDE,
                                   "height": SKETCH_SIDE, "created": iso()})
            chosen += [key for (key,) in db.execute(
                "select key from concepts where base = ? order by key", [base])]
    return tuple(chosen)


def random_coloring(rng: np.random.Generator, side: int) -> tuple[np.ndarray, np.ndarray]:
    """A colored sketch (side, side, 3) uint8 and its painted mask (side, side) bool."""
    image = np.full((side, side, 3), 255, dtype=np.uint8)
    mask = np.zeros((side, side), dtype=bool)
    for _ in range(3):
        top, left = rng.integers(0, side // 2, size=2)
        height, width = rng.integers(side // 8, side // 2, size=2)
        mask[top:top + height, left:left + width] = True
        image[top:top + height, left:left + width] = rng.integers(0, 256, size=3)
    return image, mask


def _coloring_writer(data_dir: Path, image: np.ndarray, mask: np.ndarray, seconds: float,
                     *, die_after_files: bool = False):
    """``write(db, task)`` for `annotation.assignment.submit`: files first, then the row."""
    def write(db: sqlite_utils.Database, task) -> int:
        stored_image = store_png(data_dir, image, folder="colorings")
        stored_mask = store_png(data_dir, mask, folder="colorings")
        if die_after_files:
            os.kill(os.getpid(), signal.SIGKILL)
        return db["colorings"].insert({
            "annotator_id": task.annotator_id, "concept_key": task.concept_key,
            "image_path": stored_image.path, "image_sha256": stored_image.sha256,
            "mask_path": stored_mask.path, "mask_sha256": stored_mask.sha256,
            "practice": 0, "round": 1, "status": "submitted", "seconds_spent": seconds,
            "created": iso()}).last_pk
    return write


def designer_session(study: Study, designer: int, count: int, *, seed: int,
                     side: int = 64, batch_size: int = 5, retry_every: int = 4,
                     on_ack=None, die_in_write_at: int | None = None) -> list[Ack]:
    """One designer: reserve a batch, submit each task, top up, until `count` or a dry pool.

    Every `retry_every`-th submission is sent a second time, as a client retrying after
    a lost answer would; the store must refuse it (`Conflict`) and store nothing.
    `die_in_write_at` kills this process (SIGKILL) inside that submission's write, after
    its files are stored and before its row commits.
    """
    rng = np.random.default_rng(seed)
    db = open_db(study.db_path)
    acks: list[Ack] = []
    try:
        while len(acks) < count:
            tasks = reserve(db, "coloring", designer, rng, batch_size, k=study.k)
            if not tasks:
                break
            for task in tasks[: count - len(acks)]:
                image, mask = random_coloring(rng, side)
                die = die_in_write_at is not None and len(acks) == die_in_write_at
                writer = _coloring_writer(study.data_dir, image, mask, float(rng.uniform(30, 600)),
                                          die_after_files=die)
                start = time.perf_counter()
                coloring_id = submit(db, task.id, designer, writer, k=study.k)
                ack = Ack(designer, task.id, coloring_id, task.concept_key,
                          time.perf_counter() - start)
                acks.append(ack)
                if on_ack is not None:
                    on_ack(ack)
                if retry_every and len(acks) % retry_every == 0:
                    _check_retry_refused(db, task, designer, writer, study.k)
    finally:
        db.close()
    return acks


def _check_retry_refused(db, task, designer: int, writer, k: int) -> None:
    try:
        submit(db, task.id, designer, writer, k=k)
    except Conflict:
        return
    raise AssertionError(f"task {task.id} was accepted twice")


def concurrent_designers(study: Study, count: int, *, side: int = 64, batch_size: int = 5,
                         seed: int = 0) -> list[Ack]:
    """Every designer of `study` at once, one thread and connection each; all their acks."""
    seeds = np.random.SeedSequence(seed).spawn(len(study.designers))
    with ThreadPoolExecutor(max_workers=len(study.designers)) as pool:
        futures = [pool.submit(designer_session, study, designer, count,
                               seed=int(s.generate_state(1)[0]), side=side,
                               batch_size=batch_size)
                   for designer, s in zip(study.designers, seeds)]
        return [ack for future in futures for ack in future.result()]


def check_store(db_path: str | Path, data_dir: str | Path, acks: list[Ack], *, k: int,
                all_acknowledged: bool = True) -> list[str]:
    """Everything wrong with the store after load or a crash (empty when all is well).

    Checks ``PRAGMA integrity_check`` and ``foreign_key_check``; every acknowledged
    submission present, with its task pointing at it; colorings and submitted tasks one
    to one (nothing stored twice, no row without its task); no designer with two
    colorings of a concept; no concept over its quota `k`; every coloring's files present
    and matching their hash; no orphaned files. With `all_acknowledged` every stored
    coloring must also be among `acks` (false after a crash: a commit may have happened
    whose answer never arrived).
    """
    db = open_db(db_path)
    try:
        problems = _sqlite_problems(db) + _row_problems(db, acks, k)
        if all_acknowledged:
            unacknowledged = db["colorings"].count - len({a.coloring_id for a in acks})
            problems += [f"{unacknowledged} stored colorings were never acknowledged"
                         ] if unacknowledged else []
        problems += _file_problems(db, Path(data_dir))
    finally:
        db.close()
    return problems


def _sqlite_problems(db) -> list[str]:
    integrity = [row[0] for row in db.execute("pragma integrity_check")]
    foreign = list(db.execute("pragma foreign_key_check"))
    return ([] if integrity == ["ok"] else [f"integrity_check: {integrity[:5]}"]) + (
        [f"foreign_key_check: {foreign[:5]}"] if foreign else [])


def _row_problems(db, acks: list[Ack], k: int) -> list[str]:
    colorings = {r["id"]: r for r in db["colorings"].rows_where("practice = 0")}
    tasks = {r["result_id"]: r for r in db["tasks"].rows_where(
        "kind = 'coloring' and practice = 0 and status = 'submitted'")}
    problems = [f"acknowledged coloring {a.coloring_id} (task {a.task_id}) is missing"
                for a in acks if a.coloring_id not in colorings
                or tasks.get(a.coloring_id, {}).get("id") != a.task_id]
    if len(tasks) != db["tasks"].count_where("kind = 'coloring' and status = 'submitted'"):
        problems.append("two submitted tasks name the same coloring")
    problems += [f"coloring {cid} has no submitted task" for cid in colorings.keys() - tasks.keys()]
    problems += [f"task {t['id']} names missing coloring {cid}"
                 for cid, t in tasks.items() if cid not in colorings]
    problems += [f"designer {a} colored {c!r} {n} times" for a, c, n in db.execute(
        "select annotator_id, concept_key, count(*) from colorings where practice = 0 "
        "group by 1, 2 having count(*) > 1")]
    problems += [f"concept {c!r} has {n} colorings, over its quota {k}" for c, n in db.execute(
        "select concept_key, count(*) from colorings where practice = 0 group by 1 "
        "having count(*) > ?", [k])]
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


def restart_store(db_path: str | Path, data_dir: str | Path) -> list[str]:
    """What the app does at start-up after a crash: schema, then the orphan sweep."""
    db = open_db(db_path)
    try:
        ensure_schema(db)
        return sweep_orphans(db, data_dir)
    finally:
        db.close()


def kill_designers(study: Study, count: int, kill_after: int, *, side: int = 64,
                   batch_size: int = 5, seed: int = 0) -> list[Ack]:
    """Designer processes submitting at once, SIGKILLed after `kill_after` acks in all.

    One more process kills itself inside its second submission's write (files stored,
    row not committed), so the crash leaves an orphan whatever the timing. Returns the
    acknowledgements that reached the parent before the kill.
    """
    acks: list[Ack] = []
    enough = threading.Event()
    lock = threading.Lock()
    seeds = np.random.SeedSequence(seed).spawn(len(study.designers))
    procs = [_designer_process(study, d, count, int(s.generate_state(1)[0]), side, batch_size,
                               die_in_write_at=1 if i == 0 else None)
             for i, (d, s) in enumerate(zip(study.designers, seeds))]

    def collect(proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with lock:
                acks.append(Ack(**json.loads(line)))
                if len(acks) >= kill_after:
                    enough.set()

    readers = [threading.Thread(target=collect, args=(p,), daemon=True) for p in procs]
    for reader in readers:
        reader.start()
    if procs[0].wait(timeout=300) != -signal.SIGKILL:
        raise RuntimeError(f"the designer process meant to die in a write exited with "
                           f"{procs[0].returncode}")
    enough.wait(timeout=300)
    for proc in procs[1:]:
        proc.send_signal(signal.SIGKILL)
    for proc, reader in zip(procs, readers):
        proc.wait()
        reader.join()
    return acks


def _designer_process(study: Study, designer: int, count: int, seed: int, side: int,
                      batch_size: int, *, die_in_write_at: int | None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "bench.bench_load", "designer", "--db", str(study.db_path),
            "--data-dir", str(study.data_dir), "--designer", str(designer), "--count",
            str(count), "--seed", str(seed), "--k", str(study.k), "--side", str(side),
            "--batch-size", str(batch_size)]
    if die_in_write_at is not None:
        argv += ["--die-in-write-at", str(die_in_write_at)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, bufsize=1)


def _designer_main(args: argparse.Namespace) -> int:
    """Entry of a designer process: print one JSON line per acknowledged submission."""
    study = Study(Path(args.db), Path(args.data_dir), (args.designer,), (), args.k)

    def announce(ack: Ack) -> None:
        print(json.dumps(asdict(ack)), flush=True)

    designer_session(study, args.designer, args.count, seed=args.seed, side=args.side,
                     batch_size=args.batch_size, on_ack=announce,
                     die_in_write_at=args.die_in_write_at)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_load")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("designer", help="one designer process (used by kill_designers)")
    for name in ("db", "data-dir"):
        worker.add_argument(f"--{name}", required=True)
    for name in ("designer", "count", "seed", "k", "side", "batch-size"):
        worker.add_argument(f"--{name}", type=int, required=True)
    worker.add_argument("--die-in-write-at", type=int, default=None)
    return parser


if __name__ == "__main__":
    sys.exit(_designer_main(_parser().parse_args()))
