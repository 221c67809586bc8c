"""One transaction discipline: every multi-step write goes through `storage.transaction`.

sqlite-utils' ``db.atomic()`` opens a deferred ``BEGIN``: its first read takes a snapshot,
and if another connection commits before its first write, that write fails at once with
"database is locked" (SQLITE_BUSY_SNAPSHOT; the busy timeout does not apply).
`storage.transaction` takes the write lock up front (``BEGIN IMMEDIATE``) instead.
"""

import re
import sqlite3
import threading

import numpy as np
import pytest

import storage
from evaluation.pipeline import runs
from evaluation.pipeline.stages import extract
from tests.source_scan import matching_lines

SCANNED = ("annotation", "evaluation", "app", "bench")
ATOMIC = re.compile(r"\.atomic\(")


def atomic_calls(roots=SCANNED) -> list[str]:
    """``path:line`` of every ``.atomic(`` in the Python files under `roots`."""
    return matching_lines(ATOMIC, roots)


def test_only_the_storage_floor_opens_transactions():
    assert atomic_calls() == [], "use `with storage.transaction(db):` (BEGIN IMMEDIATE), not `db.atomic()`"


def test_the_scan_sees_the_storage_floors_own_call():
    assert {call.split(":")[0] for call in atomic_calls(("storage",))} == {"storage/db.py"}


@pytest.fixture
def segmented_run(db, tmp_path):
    """Run ``r`` of 6 fully segmented groups (one image each), its pixel summaries on disk."""
    items = [
        {
            "model": "m",
            "concept": f"c{i}",
            "noun": f"c{i}",
            "style": "natural",
            "cfg": 7.5,
            "sample": 0,
            "seed": i,
            "prompt": f"a c{i}",
        }
        for i in range(6)
    ]
    runs.create_run(db, "r", items, {"groups": 6})
    rng = np.random.default_rng(0)
    updates = []
    for row in runs.items(db, "r"):
        path = f"runs/r/pixels/{row['id']}.npz"
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp_path / path, pixels=rng.integers(0, 256, (40, 3), dtype=np.uint8))
        updates.append({"id": row["id"], "status": "segmented", "segment_status": "ok", "summary_path": path})
    runs.record_items(db, updates)
    db.execute("CREATE TABLE beside (n INTEGER)")
    return tmp_path


def _stored(db):
    return sorted((r["concept"], r["n_images"]) for r in runs.model_distributions(db, run="r"))


def test_a_commit_between_the_stages_read_and_its_write_loses_nothing(db, segmented_run):
    """Another connection commits just before each write of the extract stage (a trace hook,
    so the interleaving is the same on every run): under a deferred BEGIN the write found its
    snapshot stale and failed with "database is locked"."""
    other = sqlite3.connect(db.conn.execute("PRAGMA database_list").fetchone()[2], timeout=0)
    outcomes = []

    def commit_from_the_other_connection(sql):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")) and "model_distributions" in sql:
            try:
                with other:
                    other.execute("INSERT INTO beside VALUES (?)", [len(outcomes)])
                outcomes.append("committed")
            except sqlite3.OperationalError as error:
                outcomes.append(str(error))

    db.conn.set_trace_callback(commit_from_the_other_connection)
    try:
        written = extract(db, "r", segmented_run, batch_size=2)
    finally:
        db.conn.set_trace_callback(None)
        other.close()
    assert written == 6
    assert _stored(db) == [(f"c{i}", 1) for i in range(6)]
    assert outcomes and set(outcomes) == {"database is locked"}, (
        "the stage's writes did not hold the write lock"
    )


def test_extracting_beside_a_connection_that_commits_in_a_loop_loses_no_row(db, segmented_run):
    """A second connection (another thread, as a designer's submission in the app) commits
    in a loop for the whole stage, at least once between each two of its batches."""
    path = db.conn.execute("PRAGMA database_list").fetchone()[2]
    done = threading.Event()
    committed = threading.Condition()
    counts = {"commits": 0}
    errors = []

    def commit_in_a_loop():
        other = storage.open_db(path)
        try:
            while not done.is_set():
                with storage.transaction(other):
                    storage.insert_row(other, "beside", {"n": counts["commits"]})
                with committed:
                    counts["commits"] += 1
                    committed.notify_all()
        except Exception as error:  # reported by the test, not lost in the thread
            errors.append(error)
        finally:
            other.close()

    def wait_for_another_commit(stored, total):
        with committed:
            seen = counts["commits"]
            assert committed.wait_for(lambda: counts["commits"] > seen or errors, timeout=60)

    writer = threading.Thread(target=commit_in_a_loop)
    writer.start()
    try:
        written = extract(db, "r", segmented_run, batch_size=1, progress=wait_for_another_commit)
    finally:
        done.set()
        writer.join()
    assert errors == []
    assert written == 6
    assert _stored(db) == [(f"c{i}", 1) for i in range(6)]
    assert db.execute("SELECT count(*) FROM beside").fetchone()[0] == counts["commits"] >= 6
