"""The orphan sweep spares the files that a database kept beside the live one names (the way
back from a restore or a schema upgrade), and sweeps nothing while such a copy is unreadable."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

import storage
from annotation import backup
from annotation.concepts import sync_concepts
from annotation.files import store_png
from annotation.integrity import orphaned_files, sweep_orphans
from storage.data_folder import QUARANTINE, kept_copies


def _study(tmp_path: Path):
    db = storage.open_db(tmp_path / "study.sqlite")
    storage.ensure_schema(db)
    sync_concepts(db)
    return db, tmp_path / "data"


def _stored(data: Path, shade: int) -> str:
    """A content-hash PNG file under ``data/colorings/``; its relative path."""
    return store_png(data, np.full((4, 4), shade, dtype=np.uint8), folder="colorings").path


def _name(db, path: str) -> int:
    """A sketch row naming `path`; its id."""
    with storage.transaction(db):
        return storage.insert_row(
            db,
            "sketches",
            {"base": "apple", "path": path, "sha256": Path(path).stem, "source": "test", "created": "2026"},
        )


def _forget(db, sketch_id: int) -> None:
    with storage.transaction(db):
        storage.delete_rows(db, "sketches", {"id": sketch_id})


def test_files_named_only_by_a_kept_copy_stay_and_only_unnamed_ones_are_swept(tmp_path):
    db, data = _study(tmp_path)
    live, before_restore, before_schema, nobody = (_stored(data, shade) for shade in (1, 2, 3, 4))
    _name(db, live)
    restored_away = _name(db, before_restore)
    db.execute("VACUUM INTO ?", [str(tmp_path / "study.sqlite.before-restore-20260101T000000")])
    _forget(db, restored_away)
    upgraded_away = _name(db, before_schema)
    db.execute("VACUUM INTO ?", [str(tmp_path / "study.sqlite.before-schema-19-20260101T000000")])
    _forget(db, upgraded_away)
    # Companions of a kept copy and a copy still being written are no databases to read.
    for leftover in (
        "study.sqlite.before-restore-20260101T000000-shm",
        "study.sqlite.before-schema-19-20260101T000000-wal",
        ".study.sqlite.before-restore-20260101T000001.partial",
    ):
        (tmp_path / leftover).write_bytes(b"not a database")

    assert [p.name for p in kept_copies(tmp_path / "study.sqlite")] == [
        "study.sqlite.before-restore-20260101T000000",
        "study.sqlite.before-schema-19-20260101T000000",
    ]
    assert sweep_orphans(db, data) == [nobody]
    for kept in (live, before_restore, before_schema):
        assert (data / kept).is_file()
    assert not (data / nobody).exists() and (data / QUARANTINE / nobody).is_file()
    db.close()


def test_going_back_from_a_restore_finds_the_files_stored_after_the_backup(tmp_path):
    db, data = _study(tmp_path)
    _name(db, _stored(data, 1))
    backup.backup(db, data, tmp_path / "backup")
    newer = _stored(data, 2)
    _name(db, newer)  # work the backup does not hold
    db.close()

    done = backup.restore(tmp_path / "backup", tmp_path / "study.sqlite", data)
    db = storage.open_db(tmp_path / "study.sqlite", create=False)
    assert sweep_orphans(db, data) == []  # the next start
    db.close()

    done["previous"].replace(tmp_path / "study.sqlite")  # the way back the README gives
    db = storage.open_db(tmp_path / "study.sqlite", create=False)
    assert newer in {r["path"] for r in db["sketches"].rows}
    assert (data / newer).is_file()
    db.close()


def test_an_unreadable_kept_copy_stops_the_sweep_and_is_named(tmp_path, caplog):
    db, data = _study(tmp_path)
    nobody = _stored(data, 4)
    garbage = tmp_path / "study.sqlite.before-restore-20260101T000000"
    garbage.write_bytes(b"\x00garbage, not an SQLite database" * 64)

    with caplog.at_level(logging.WARNING, logger="annotation.integrity"):
        assert orphaned_files(db, data) == []
        assert sweep_orphans(db, data) == []
    assert (data / nobody).is_file() and not (data / QUARANTINE).exists()
    assert db["audit"].count == 0
    assert [str(garbage) in r.getMessage() for r in caplog.records] == [True, True]

    garbage.unlink()
    assert sweep_orphans(db, data) == [nobody]
    db.close()


def test_a_database_in_memory_has_no_kept_copies(tmp_path):
    db = storage.open_db(":memory:")
    storage.ensure_schema(db)
    nobody = _stored(tmp_path / "data", 4)
    assert orphaned_files(db, tmp_path / "data") == [nobody]
    db.close()
