"""The storage floor: a database built by earlier code migrates forward with nothing
lost; distributions have one check and one codec; stored P_H stays equal to what the
images give through any sequence of changes."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

import storage
from annotation.coloring import ground_truth
from annotation.coloring.store import get_coloring, load_pixels, set_status
from annotation.qc import votes
from annotation.qc.review import accept_coloring, request_recolor
from evaluation.color.extraction import METHOD, concept_distribution
from storage import human as human_rows
from storage.distributions import InvalidDistribution, check_distribution, decode, encode
from tests.disks import tmpfs
from tests.qc_data import ADMIN, add_coloring, people

LEGACY = Path(__file__).resolve().parents[1] / "legacy" / "legacy_v3"
ROOT = Path(__file__).resolve().parents[2]
LATEST = len(storage.schema.MIGRATIONS)  # this code's schema version


def _dump(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    tables = [
        r[0]
        for r in conn.execute(
            "select name from sqlite_master where type = 'table' and name not like 'sqlite_%'"
        )
    ]
    dump = {t: sorted(conn.execute(f"select * from {t}").fetchall(), key=repr) for t in tables}
    columns = {t: [c[1] for c in conn.execute(f"pragma table_info({t})")] for t in tables}
    conn.close()
    return {t: [dict(zip(columns[t], row)) for row in rows] for t, rows in dump.items()}


def _legacy_copy(tmp_path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(LEGACY, target)
    return target


def _expected_p(data: Path, db, concept: str) -> np.ndarray:
    pixels = [load_pixels(data, c) for c in human_rows.counted_colorings(db, concept)]
    return concept_distribution([i for i, _ in pixels], [m for _, m in pixels]).p


def test_a_database_from_the_previous_code_migrates_forward_with_every_row_kept(tmp_path):
    data = _legacy_copy(tmp_path)
    before = _dump(data / "colorconcept.sqlite")
    assert max(r["version"] for r in before["schema_version"]) == 3
    db = storage.open_db(data / "colorconcept.sqlite")
    assert storage.ensure_schema(db) == len(storage.schema.MIGRATIONS)
    assert ground_truth.backfill(db, data) == 3
    db.close()
    after = _dump(data / "colorconcept.sqlite")
    # The database as it was is kept beside it, one file, row for row.
    (kept,) = data.glob(f"colorconcept.sqlite.before-schema-{LATEST}-*")
    assert _dump(kept) == before and kept.stat().st_mode & 0o077 == 0
    # Version 18: a designer at work on the main task is recorded as approved when their first
    # main task was handed out (this code's builder made them so, as --auto-approve-practice
    # did before approvals were recorded), with an audit row; the others are unchanged.
    first_main = {}
    for task in before["tasks"]:
        if task["kind"] == "coloring" and not task["practice"]:
            first_main[task["annotator_id"]] = min(task["created"], first_main.get(task["annotator_id"], "~"))
    assert first_main
    for person in before["annotators"]:
        if person["id"] in first_main and person["practice_approved"] is None:
            person["practice_approved"], person["practice_approved_by"] = first_main[person["id"]], "upgrade"
    added = [r for r in after["audit"] if r["actor"] == "upgrade"]
    assert sorted(int(r["object_id"]) for r in added) == sorted(first_main)
    assert {r["action"] for r in added} == {"approve_practice"}
    before["audit"] += added
    for task in before["tasks"]:  # version 20: a review task held at the upgrade counts as shown
        task["shown"] = task["created"] if (task["kind"], task["status"]) == ("review", "reserved") else None
    for table, rows in before.items():
        if table in ("reference_distributions", "schema_version"):
            continue
        if table in ("runs", "run_items", "model_distributions"):
            stamp = {"runs": "created_at", "run_items": "updated_at", "model_distributions": "created_at"}[
                table
            ]
            for row in rows:
                assert row[stamp].endswith("+00:00")
                row[stamp] = row[stamp][:19] + ".000000Z"
                if table == "runs":
                    row["masking"] = None  # added by version 16: no masking given yet
                    row["job_owner"] = row["job_heartbeat"] = None  # version 17: no job running
            assert all(storage.parse_iso(r[stamp]) for r in after[table])
        assert sorted(after[table], key=repr) == sorted(rows, key=repr), table
    assert "reference_distributions" not in after
    moved = {
        (r["source"], r["concept_key"]): r for r in after["human_distributions"] if r["kind"] == "reference"
    }
    assert len(moved) == len(before["reference_distributions"]) == 70
    for old in before["reference_distributions"]:
        new = moved[(old["source"], old["concept"])]
        assert (new["p"], new["provenance"]) == (old["p"], old["provenance"])
        assert new["updated"] == old["created_at"][:19] + ".000000Z"


def test_a_session_opened_before_sessions_recorded_their_invite_survives_the_migration(tmp_path):
    """Schema version 12 adds ``sessions.invite_hash`` and ``end_reason``: an old session keeps
    working, and a new link for its person still ends it (it was opened with an earlier link)."""
    from annotation.errors import InvalidToken
    from annotation.people.accounts import hash_token, new_invite, require

    now = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    data = _legacy_copy(tmp_path)
    old = {
        "token_hash": hash_token("old-session"),
        "annotator_id": 1,
        "roles": '["designer"]',
        "created": "2026-10-30T12:00:00.000000Z",
        "expires": "2026-11-13T12:00:00.000000Z",
        "last_seen": "2026-10-30T12:00:00.000000Z",
        "revoked": None,
    }
    conn = sqlite3.connect(data / "colorconcept.sqlite")
    conn.execute("insert into sessions values (?, ?, ?, ?, ?, ?, ?)", list(old.values()))
    conn.commit()
    conn.close()
    db = storage.open_db(data / "colorconcept.sqlite")
    storage.ensure_schema(db)
    assert list(db["sessions"].rows) == [{**old, "invite_hash": None, "end_reason": None}]
    assert require(db, "old-session", "designer", now=now).pseudonym == "D0001"
    new_invite(db, 1, now=now)
    with pytest.raises(InvalidToken, match="opened with an invite link that has since been replaced"):
        require(db, "old-session", now=now)


def test_designers_p_h_of_a_migrated_database_equals_the_images_and_skips_the_recolor(tmp_path):
    data = _legacy_copy(tmp_path)
    db = storage.open_db(data / "colorconcept.sqlite")
    storage.ensure_schema(db)
    ground_truth.backfill(db, data)
    stored = human_rows.read(db, human_rows.DESIGNERS)
    assert sorted(stored) == ["apple", "banana", "rotten apple"]
    recolored = [r["id"] for r in db.query("select id from colorings where status = 'recolor_requested'")]
    assert stored["apple"].n_colorings == 2 and recolored[0] not in stored["apple"].coloring_ids
    for concept, truth in stored.items():
        assert_allclose(truth.p, _expected_p(data, db, concept), rtol=0, atol=1e-12)
    assert ground_truth.check(db, data) == []
    assert ground_truth.backfill(db, data) == 0
    # Rows computed under other extraction defaults are stale: start-up recomputes them.
    db.execute(
        "update human_distributions set provenance = 'appendix-c3 v0' where "
        "source = 'designers' and concept_key = 'banana'"
    )
    assert ground_truth.backfill(db, data) == 1
    assert human_rows.read(db, human_rows.DESIGNERS)["banana"].provenance == METHOD


def test_check_distributions_command_reports_a_tampered_row_and_repairs_it(tmp_path):
    data = _legacy_copy(tmp_path)
    db_path = data / "colorconcept.sqlite"
    command = [
        sys.executable,
        "-m",
        "annotation",
        "--db",
        str(db_path),
        "--data-dir",
        str(data),
        "check-distributions",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "3 differences found" in done.stdout and "no stored P_H" in done.stdout
    done = subprocess.run(command + ["--repair"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "3 differences repaired" in done.stdout
    db = storage.open_db(db_path)
    p = np.zeros(71)
    p[0] = 1.0
    db.execute(
        "update human_distributions set p = ? where source = 'designers' and concept_key = 'banana'",
        [json.dumps(p.tolist())],
    )
    db.conn.commit()
    db.close()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith("banana: stored P_H differs from the images'")
    assert "1 differences found; 3 stored designers' distributions" in done.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.full(70, 1 / 70), r"`p` must have shape \(71,\), got \(70,\)"),
        (np.r_[np.nan, np.full(70, 1 / 70)], "`p` must hold finite masses, got NaN or inf"),
        (np.r_[-0.5, np.full(70, 1.5 / 70)], "`p` must hold non-negative masses, got -0.5"),
        (np.full(71, 0.5), r"`p` must sum to 1 \(within 1e-06\), got 35.5"),
        (np.zeros(71), "`p` has zero total mass"),
    ],
)
def test_one_check_names_the_argument_and_the_problem(value, message):
    with pytest.raises(InvalidDistribution, match=message):
        check_distribution(value)
    with pytest.raises(InvalidDistribution):
        encode(value)


def test_the_codec_round_trips_exactly_and_keeps_none():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(71))
    assert np.array_equal(decode(encode(p)), p)
    assert encode(None) is None and decode(None) is None
    rows = check_distribution(np.stack([p, p]), "P")
    assert rows.shape == (2, 71)
    bad = np.stack([p, np.full(71, 0.5)])
    with pytest.raises(InvalidDistribution, match="in row 1"):
        check_distribution(bad, "P")


def test_stored_p_h_equals_the_images_after_a_long_random_sequence_of_changes(tmp_path):
    """Submissions, acceptances, recolor requests and new rounds, blind votes that exclude,
    reinstatements: after each step the stored P_H of every concept equals a recompute
    from the images (`ground_truth.check` finds nothing)."""
    from annotation.concepts import sync_concepts

    data = tmp_path / "data"
    db = storage.open_db(tmp_path / "s.sqlite")
    storage.ensure_schema(db)
    sync_concepts(db)
    rng = np.random.default_rng(7)
    concepts = ["apple", "rotten apple", "banana"]
    designers = people(db, 6, "designer")
    people(db, 3, "expert")
    palette = [(200, 30, 30), (30, 160, 40), (240, 200, 20), (90, 60, 30), (20, 40, 200)]
    stored: list[int] = []
    for step in range(40):
        move = rng.integers(5)
        candidates = [c for c in stored if get_coloring(db, c)["status"] in ("submitted", "accepted")]
        if move == 0 or not candidates:
            designer, concept = int(rng.choice(designers)), str(rng.choice(concepts))
            mine = db["colorings"].count_where(
                "annotator_id = ? and concept_key = ? and practice = 0", [designer, concept]
            )
            if mine:
                continue
            color = palette[int(rng.integers(len(palette)))]
            stored.append(add_coloring(db, data, designer, concept, color))
        elif move == 1:
            coloring = get_coloring(db, int(rng.choice(candidates)))
            if coloring["status"] == "submitted":
                accept_coloring(db, ADMIN, coloring["id"])
        elif move == 2:
            coloring = get_coloring(db, int(rng.choice(candidates)))
            try:
                task_id = request_recolor(db, ADMIN, coloring["id"], "again")
            except Exception:
                continue
            stored.append(
                add_coloring(
                    db,
                    data,
                    coloring["annotator_id"],
                    coloring["concept_key"],
                    palette[int(rng.integers(len(palette)))],
                    task_id=task_id,
                )
            )
        elif move == 3:
            set_status(db, get_coloring(db, int(rng.choice(candidates))), "excluded")
        else:
            excluded = [c for c in stored if get_coloring(db, c)["status"] == "excluded"]
            if excluded:
                votes.reinstate(db, ADMIN, int(rng.choice(excluded)), "on reflection")
        assert ground_truth.check(db, data) == [], f"step {step}"
    statuses = {r["status"] for r in db.query("select status from colorings")}
    assert {"submitted", "accepted", "excluded", "recolor_requested"} <= statuses
    assert len(human_rows.read(db, human_rows.DESIGNERS)) >= 2


def test_designers_at_work_before_approvals_were_recorded_are_approved_by_the_upgrade(tmp_path, monkeypatch):
    """Version 18: under ``--auto-approve-practice`` code before version 17 opened the main task
    without storing an approval; the upgrade records one for a designer with a main task, at
    the first one, and leaves alone a designer still in practice, one an admin approved and
    one whose practice an admin sent back after their main task began."""
    from annotation.concepts import sync_concepts
    from annotation.people.onboarding import onboarding_stage

    path = tmp_path / "colorconcept.sqlite"
    db = storage.open_db(path)
    monkeypatch.setattr(storage.schema, "MIGRATIONS", storage.schema.MIGRATIONS[:17])
    assert storage.ensure_schema(db) == 17
    sync_concepts(db)
    at_work, practising, approved, sent_back = people(db, 4, "designer")
    db.execute(
        "update annotators set practice_approved = '2026-11-02T00:00:00.000000Z', practice_approved_by = 'admin' where id = ?",
        [approved],
    )

    def task(person: int, practice: int, created: str) -> None:
        db.execute(
            "insert into tasks (kind, annotator_id, concept_key, practice, status, created, expires) "
            "values ('coloring', ?, 'apple', ?, 'submitted', ?, ?)",
            [person, practice, created, created],
        )

    for person in (at_work, practising, approved, sent_back):
        task(person, 1, "2026-11-01T00:00:00.000000Z")
    for person in (at_work, approved, sent_back):
        task(person, 0, "2026-11-03T00:00:00.000000Z")
        task(person, 0, "2026-11-04T00:00:00.000000Z")
    db.execute(
        "insert into audit (created, actor, action, object_type, object_id, why, details) "
        "values ('2026-11-05T00:00:00.000000Z', 'admin', 'redo_practice', 'annotator', ?, '', '{}')",
        [str(sent_back)],
    )
    db.execute(
        "insert into consents (annotator_id, form_sha256, agreed, created) values (?, 'f', 1, ?)",
        [at_work, "2026-11-01T00:00:00.000000Z"],
    )
    db.execute(
        "update annotators set instructions_read = '2026-11-01T00:00:00.000000Z' where id = ?", [at_work]
    )
    db.conn.commit()
    for concept in ("apple", "banana", "lemon"):
        add_coloring(db, tmp_path / "data", at_work, concept, (200, 30, 30), practice=True)
    assert onboarding_stage(db, at_work) == "awaiting_approval"  # what a start without the flag showed
    monkeypatch.undo()

    assert storage.ensure_schema(db) == LATEST
    approvals = {r["id"]: (r["practice_approved"], r["practice_approved_by"]) for r in db["annotators"].rows}
    assert approvals == {
        at_work: ("2026-11-03T00:00:00.000000Z", "upgrade"),
        practising: (None, None),
        approved: ("2026-11-02T00:00:00.000000Z", "admin"),
        sent_back: (None, None),
    }
    (row,) = db.execute("select actor, action, object_id, why from audit where actor = 'upgrade'").fetchall()
    assert row[:3] == ("upgrade", "approve_practice", str(at_work)) and "2026-11-03" in row[3]
    assert onboarding_stage(db, at_work) == "main"  # no longer sent back without the flag
    # The copy kept before the upgrade is the database at version 17, one file of its own.
    (kept,) = tmp_path.glob(f"colorconcept.sqlite.before-schema-{LATEST}-*")
    old = sqlite3.connect(kept)
    assert old.execute("select max(version) from schema_version").fetchone() == (17,)
    assert old.execute("select practice_approved from annotators where id = ?", [at_work]).fetchone() == (
        None,
    )
    old.close()
    assert not list(tmp_path.glob(f"*.before-schema-{LATEST}-*-wal"))
    storage.ensure_schema(db)  # up to date: no second copy
    assert len(list(tmp_path.glob("colorconcept.sqlite.before-schema-*"))) == 1


def test_a_migration_whose_copy_cannot_be_written_migrates_nothing(tmp_path, monkeypatch):
    """On a disk with room for the database but not for its copy, the upgrade refuses, naming
    the database and what to do, and the database stays at its version with no copy left."""
    source = tmp_path / "source.sqlite"
    db = storage.open_db(source)
    monkeypatch.setattr(storage.schema, "MIGRATIONS", storage.schema.MIGRATIONS[:17])
    storage.ensure_schema(db)
    monkeypatch.undo()
    db.close()
    size = source.stat().st_size
    # Room for the database, its -shm (32 kB) and a little WAL, not for a second copy.
    with tmpfs(tmp_path / "disk", size + 96 * 1024) as disk:
        path = disk / "colorconcept.sqlite"
        shutil.copyfile(source, path)
        db = storage.open_db(path)
        with pytest.raises(
            storage.CopyBeforeUpgradeFailed,
            match=rf"at schema version 17 and this code would migrate it to {LATEST}, but the copy kept before an "
            r"upgrade could not be written \(.*full.*\); nothing was migrated: free some space",
        ):
            storage.ensure_schema(db)
        assert storage.schema_version(db) == 17
        db.close()
        assert sorted(p.name for p in disk.iterdir() if "before-schema" in p.name) == []


OLDER_SERVER = """
import sys
from storage import serving
serving.hold_shared(sys.argv[1])  # as an app of the earlier code holds it while it serves
print("held", flush=True)
sys.stdin.read()
"""


def test_a_database_another_process_uses_is_not_migrated_until_it_stops(tmp_path, monkeypatch):
    """An app of the earlier code still serving the database would go on writing its old
    schema under the new one (an outside check: the new start migrated it and both served):
    the start refuses, naming that process, and migrates once it has stopped."""
    from storage import serving

    path = tmp_path / "colorconcept.sqlite"
    db = storage.open_db(path)
    monkeypatch.setattr(storage.schema, "MIGRATIONS", storage.schema.MIGRATIONS[:17])
    assert storage.ensure_schema(db) == 17
    monkeypatch.undo()
    older = subprocess.Popen(
        [sys.executable, "-c", OLDER_SERVER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert older.stdout.readline() == "held\n"
        with serving.shared(path):  # this process holds it too, as the app does from its start
            with pytest.raises(
                storage.MigrationRefused,
                match=rf"at schema version 17 and this code would migrate it to {LATEST}, but process {older.pid} "
                r"\(.*\) uses it \(the earlier code, if it was not stopped\): stop every app and evaluation "
                r"command on this database, then start again; nothing was migrated$",
            ):
                storage.ensure_schema(db)
            assert storage.schema_version(db) == 17
            assert not list(tmp_path.glob("*.before-schema-*"))
            older.communicate("")
            assert storage.ensure_schema(db) == LATEST
            assert len(list(tmp_path.glob(f"colorconcept.sqlite.before-schema-{LATEST}-*"))) == 1
            # This process holds its shared lock again: a restore is refused while it serves.
            with (
                pytest.raises(serving.DatabaseInUse, match=rf"is held by process {os.getpid()}"),
                serving.exclusive(path),
            ):
                pass
    finally:
        if older.poll() is None:
            older.kill()
            older.wait()
    with serving.exclusive(path):  # and lets it go at the end of its block
        pass
    db.close()
