"""Backup while people keep submitting, restore after every hash is checked."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import storage
from annotation import backup
from annotation.concepts import sync_concepts
from tests.qc_data import add_coloring, people

ROOT = Path(__file__).resolve().parent.parent


def _store(tmp_path):
    data = tmp_path / "data"
    db = storage.open_db(data / "colorconcept.sqlite")
    storage.ensure_schema(db)
    sync_concepts(db)
    return db, data


def test_a_backup_during_a_stream_of_submissions_restores_everything_acknowledged_before_it(tmp_path):
    db, data = _store(tmp_path)
    designers = people(db, 4, "designer")
    concepts = [r["key"] for r in db["concepts"].rows_where(order_by="key", limit=30)]
    acknowledged: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def designer(index: int) -> None:
        conn = storage.open_db(data / "colorconcept.sqlite")
        rng = np.random.default_rng(index)
        for concept in concepts:
            if stop.is_set():
                break
            coloring_id = add_coloring(
                conn, data, designers[index], concept, tuple(int(v) for v in rng.integers(0, 256, 3))
            )
            with lock:
                acknowledged.append(coloring_id)
        conn.close()

    threads = [threading.Thread(target=designer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < 12:
        threading.Event().wait(0.01)
    with lock:
        before = list(acknowledged)
    summary = backup.backup(db, data, tmp_path / "backup")
    stop.set()
    for thread in threads:
        thread.join()
    assert len(acknowledged) > len(before)  # submissions went on around the backup
    restored_db, restored_data = tmp_path / "restored" / "db.sqlite", tmp_path / "restored" / "data"
    done = backup.restore(tmp_path / "backup", restored_db, restored_data)
    assert done["previous"] is None and done["copied"] == summary.files
    conn = sqlite3.connect(restored_db)
    assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    kept = {r[0] for r in conn.execute("select id from colorings")}
    assert set(before) <= kept
    paths = [
        r[0]
        for r in conn.execute(
            "select image_path from colorings union "
            "select mask_path from colorings where mask_path is not null"
        )
    ]
    conn.close()
    assert paths and all((restored_data / p).is_file() for p in paths)
    # The restored database is a working store: its P_H agrees with its images.
    from annotation.coloring import human

    restored = storage.open_db(restored_db)
    storage.ensure_schema(restored)
    assert human.check(restored, restored_data) == []


def test_a_tampered_backup_is_refused_naming_the_file_and_nothing_is_replaced(tmp_path):
    db, data = _store(tmp_path)
    designer = people(db, 1, "designer")[0]
    add_coloring(db, data, designer, "apple", (200, 30, 30))
    backup.backup(db, data, tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / backup.MANIFEST).read_text())
    victim = tmp_path / "backup" / "files" / manifest["files"][0]["path"]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x00")
    target_db = tmp_path / "live" / "db.sqlite"
    target_db.parent.mkdir()
    target_db.write_bytes(b"the live database")
    with pytest.raises(
        backup.BackupError,
        match=rf"backup file 'files/{manifest['files'][0]['path']}' "
        "does not match its sha256",
    ):
        backup.restore(tmp_path / "backup", target_db, tmp_path / "live" / "data")
    assert target_db.read_bytes() == b"the live database"
    assert not (tmp_path / "live" / "data").exists()
    with pytest.raises(backup.BackupError, match="must be new or empty"):
        backup.backup(db, data, tmp_path / "backup")


def test_backup_and_restore_commands(tmp_path):
    db, data = _store(tmp_path)
    add_coloring(db, data, people(db, 1, "designer")[0], "banana", (240, 200, 20))
    db.close()
    base = [
        sys.executable,
        "-m",
        "annotation",
        "--db",
        str(data / "colorconcept.sqlite"),
        "--data-dir",
        str(data),
    ]
    done = subprocess.run(
        base + ["backup", str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "and 2 files" in done.stdout
    done = subprocess.run(
        base + ["restore", str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "previous database kept as" in done.stdout and "0 copied" in done.stdout
    done = subprocess.run(
        base + ["restore", str(tmp_path / "nothing")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and "holds no readable manifest.json" in done.stderr
