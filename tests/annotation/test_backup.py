"""Backup while people keep submitting, restore after every hash is checked; restore
refused while the database is served, keeping a crashed writer's WAL; full disks."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import storage
from annotation import backup, export
from annotation.concepts import sync_concepts
from annotation.export import WriteFailed
from storage import iso, unused_path
from storage.files import png_bytes
from tests.disks import fill, read_only, tmpfs
from tests.qc_data import add_coloring, people

VERSION = len(storage.schema.MIGRATIONS)

ROOT = Path(__file__).resolve().parents[2]


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
    from annotation.coloring import ground_truth

    restored = storage.open_db(restored_db)
    storage.ensure_schema(restored)
    assert ground_truth.check(restored, restored_data) == []


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
    # The copy of every account and hash is readable by its owner alone, as the database is.
    assert stat.S_IMODE((tmp_path / "b" / backup.DB_NAME).stat().st_mode) == 0o600
    (data / "colorconcept.sqlite").chmod(0o644)  # an older install's database
    # The storage options after the command's name too, winning over those before it (an
    # operator's `restore --db ...` was refused).
    after = [*base[:3], "--db", str(tmp_path / "elsewhere.sqlite"), "restore", *base[3:]]
    done = subprocess.run(
        [*after, str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "previous database kept as" in done.stdout and "0 copied" in done.stdout
    assert stat.S_IMODE((data / "colorconcept.sqlite").stat().st_mode) == 0o600
    # What is no backup is named as such (a missing path was "holds no readable manifest.json:
    # FileNotFoundError(2, ...)", an export the same: outside probe 154), and nothing changes.
    done = subprocess.run(base + ["export", str(tmp_path / "ex")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (tmp_path / "empty").mkdir()
    give = "give a backup folder (its manifest.json and files/) or the Admin tab's backup zip; nothing was restored"
    before = (data / "colorconcept.sqlite").read_bytes()
    for name, code, said in (
        ("nothing", 2, "does not exist: "),
        (
            "ex",
            1,
            "is an export (csv/, parquet/, images.zip), not a backup: an export leaves secrets and "
            "derived tables out and cannot be restored; ",
        ),
        ("empty", 1, "holds no manifest.json: it is not a backup folder; "),
    ):
        done = subprocess.run(
            base + ["restore", str(tmp_path / name)], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert (done.returncode, done.stderr) == (code, f"error: '{tmp_path / name}' {said}{give}\n")
    assert (data / "colorconcept.sqlite").read_bytes() == before


def _cli(db_path: Path, data: Path, *command: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "annotation", "--db", str(db_path), "--data-dir", str(data), *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        **options,
    )


def _zip_plus(archive: Path, target: Path, entry: str | zipfile.ZipInfo, data: bytes) -> Path:
    """A copy of the zip `archive` at `target` with one more entry (a name or a
    `zipfile.ZipInfo`, holding `data`), as anyone could make by hand; `target`."""
    with zipfile.ZipFile(archive) as good, zipfile.ZipFile(target, "w") as bad:
        for name in good.namelist():
            bad.writestr(name, good.read(name))
        bad.writestr(entry, data)
    return target


def _start_app(db_path: Path, data: Path) -> subprocess.CompletedProcess:
    """``python app.py`` on `db_path`, run until it exits (a start these tests expect refused)."""
    return subprocess.run(
        [sys.executable, "app.py", "--db", str(db_path), "--data-dir", str(data), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "COLORCONCEPT_ADMIN_PASSWORD": "a-long-enough-password-1",
            "COLORCONCEPT_WORKERS": "0",
        },
    )


def _start(code: str, ready: Path, *args: str) -> subprocess.Popen:
    """A Python process running `code` (argv: `ready`, `args`), once it has written `ready`.

    The code writes `ready` when it holds what the test needs, then blocks reading stdin; a
    `ready` the test reads is written beside it and renamed (read between its creation and
    its write, it was empty once in a clean-clone run).
    """
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(ready), *args], cwd=ROOT, stdin=subprocess.PIPE, text=True
    )
    while not ready.exists():
        assert process.poll() is None, (
            f"the helper process ended with {process.returncode} before it was ready"
        )
        threading.Event().wait(0.05)
    return process


def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by relative path."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _rows(db_path: Path) -> dict[str, list[tuple]]:
    """Every row of every table of the database at `db_path`, read without writing to it."""
    conn = storage.read_only(db_path)
    try:
        names = [
            r[0] for r in conn.execute("select name from sqlite_master where type = 'table' order by name")
        ]
        return {name: conn.execute(f'select * from "{name}" order by rowid').fetchall() for name in names}
    finally:
        conn.close()


SERVING_APP = """
import sys
from pathlib import Path
from app.common import AppContext
from tests.app_server import make_config
AppContext.prepare(make_config(Path(sys.argv[2]), workers=0))
Path(sys.argv[1]).write_text("serving")
sys.stdin.read()
"""


def _served_beside_a_backup(tmp_path) -> tuple[Path, subprocess.Popen]:
    """A backup (``tmp_path/backup``) of a store holding one coloring, and an app process
    serving another database, ``<folder>/study.sqlite``; the folder and the process."""
    db, data = _store(tmp_path / "source")
    add_coloring(db, data, people(db, 1, "designer")[0], "banana", (240, 200, 20))
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    live = tmp_path / "live"
    live.mkdir()
    return live, _start(SERVING_APP, tmp_path / "ready", str(live))


def test_restore_is_refused_while_the_app_serves_the_database_and_changes_nothing(tmp_path):
    live, app = _served_beside_a_backup(tmp_path)
    try:
        rows, files = _rows(live / "study.sqlite"), _files(live)
        done = _cli(live / "study.sqlite", live / "data", "restore", str(tmp_path / "backup"))
        assert (_files(live), _rows(live / "study.sqlite")) == (files, rows)
    finally:
        app.communicate("")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"process {app.pid} (" in done.stderr
    assert " …)); stop the app" in done.stderr  # its long command line cut between words
    assert done.stderr.rstrip().endswith("stop the app (and any evaluation run) first; nothing was restored")
    assert {"study.sqlite", "study.sqlite.lock"} <= set(files) and len(rows["concepts"]) > 1000


def test_an_evaluation_command_holds_the_database_against_restore(tmp_path):
    from evaluation.cli import open_db

    db, data = _store(tmp_path / "source")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    live = tmp_path / "live" / "db.sqlite"
    open_db(
        argparse.Namespace(db=live, data_dir=live.parent / "data", command="generate"), create=True
    ).close()
    before = _files(live.parent)
    with pytest.raises(
        backup.BackupError, match=r"is in use .*stop the app \(and any evaluation run\) first"
    ):
        backup.restore(tmp_path / "backup", live, tmp_path / "live" / "data")
    assert _files(live.parent) == before


UNCLEAN_WRITER = """
import json, sys
from pathlib import Path
import storage
from storage import serving
from tests.qc_data import add_coloring
ready, db_path, data = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
serving.hold_shared(db_path)
db = storage.open_db(db_path)
db.execute("PRAGMA wal_autocheckpoint = 0")
ids = [add_coloring(db, data, 1, concept, (90, 140, 30)) for concept in ("apple", "banana", "lime")]
rows = [list(r) for r in db.execute("select * from colorings order by id").fetchall()]
Path(ready + ".part").write_text(json.dumps(rows))
Path(ready + ".part").rename(ready)  # whole: the test reads it as soon as it is there
sys.stdin.read()
"""


def _unclean_stop(tmp_path) -> tuple[Path, Path, list[tuple]]:
    """A backup of an empty study in ``backup/``, and a live database whose writer was
    SIGKILLed after three commits that are in its WAL alone: ``(database, data folder,
    committed coloring rows)``."""
    db, data = _store(tmp_path / "source")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    live_db, live_data = _store(tmp_path / "live")
    people(live_db, 1, "designer")
    live_db.close()
    live = tmp_path / "live" / "data" / "colorconcept.sqlite"
    ready = tmp_path / "ready"
    writer = _start(UNCLEAN_WRITER, ready, str(live), str(live_data))
    committed = [tuple(row) for row in json.loads(ready.read_text())]
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert writer.returncode == -signal.SIGKILL and len(committed) == 3
    assert Path(f"{live}-wal").stat().st_size > 0
    return live, live_data, committed


def test_restore_after_an_unclean_stop_keeps_the_wal_transactions_in_the_previous_database(tmp_path):
    live, live_data, committed = _unclean_stop(tmp_path)
    # The commits are in the WAL only: the database file alone does not hold them.
    alone = tmp_path / "alone.sqlite"
    alone.write_bytes(live.read_bytes())
    assert _rows(alone)["colorings"] == []

    done = backup.restore(tmp_path / "backup", live, live_data)

    previous = done["previous"]
    assert previous.name.startswith("colorconcept.sqlite.before-restore-")
    assert _rows(previous)["colorings"] == committed
    assert not Path(f"{previous}-wal").exists()  # checkpointed: one self-contained file
    assert not Path(f"{live}-wal").exists() or Path(f"{live}-wal").stat().st_size == 0
    assert _rows(live)["colorings"] == []  # the backup's, which has none


def test_a_restore_stopped_just_before_its_swap_leaves_the_previous_database_whole_at_its_path(
    tmp_path, monkeypatch
):
    """The previous database (with commits only in its WAL, as an unclean stop leaves them) is
    kept and checkpointed before the restored one is renamed over it: a restore that dies just
    before that rename leaves the previous database, with those commits, at its path (a start
    then serves it, instead of making a new empty study), and the next restore finishes."""
    live, live_data, committed = _unclean_stop(tmp_path)
    replace = os.replace

    def killed_at_the_swap(source, target):
        if Path(target) == live:
            raise KeyboardInterrupt  # the process dies here
        replace(source, target)

    monkeypatch.setattr(backup.os, "replace", killed_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        backup.restore(tmp_path / "backup", live, live_data)
    monkeypatch.undo()
    assert _rows(live)["colorings"] == committed  # whole, with what the WAL held
    assert not Path(f"{live}-wal").exists()
    (kept,) = live.parent.glob("colorconcept.sqlite.before-restore-*")
    assert _rows(kept)["colorings"] == committed

    done = backup.restore(tmp_path / "backup", live, live_data)
    assert _rows(done["previous"])["colorings"] == committed
    assert _rows(live)["colorings"] == []  # the backup's, which has none


def test_a_backup_database_that_fails_integrity_check_is_not_restored(tmp_path):
    db, data = _store(tmp_path / "source")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    copy = tmp_path / "backup" / backup.DB_NAME
    broken = bytearray(copy.read_bytes())
    broken[4096 : 4096 * 3] = bytes(4096 * 2)  # the first table pages, zeroed
    copy.write_bytes(bytes(broken))
    manifest = json.loads((tmp_path / "backup" / backup.MANIFEST).read_text())
    manifest["database"]["sha256"] = hashlib.sha256(broken).hexdigest()
    (tmp_path / "backup" / backup.MANIFEST).write_text(json.dumps(manifest))
    live = tmp_path / "live" / "db.sqlite"
    live.parent.mkdir()
    live.write_bytes(b"the live database")
    with pytest.raises(
        backup.BackupError, match="fails SQLite's integrity_check .*; the database was not replaced"
    ):
        backup.restore(tmp_path / "backup", live, tmp_path / "live" / "data")
    assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite"]  # no lock file left either
    assert live.read_bytes() == b"the live database"


def _one_coloring_backup(tmp_path) -> tuple[Path, Path]:
    """A backup (folder ``tmp_path/backup``) of a store holding one coloring, and a live
    database path holding placeholder bytes that a refused restore must leave."""
    db, data = _store(tmp_path / "source")
    add_coloring(db, data, people(db, 1, "designer")[0], "apple", (200, 30, 30))
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    live = tmp_path / "live" / "db.sqlite"
    live.parent.mkdir()
    live.write_bytes(b"the live database")
    return tmp_path / "backup", live


def _replace_database(folder: Path, change) -> None:
    """Apply `change` (SQL, or a callable on the path) to the backup's database and set the
    manifest's hash and size to the result, as anyone preparing a backup by hand could."""
    copy = folder / backup.DB_NAME
    if callable(change):
        change(copy)
    else:
        with contextlib.closing(sqlite3.connect(copy)) as conn, conn:
            conn.executescript(change)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    manifest["database"].update(
        sha256=hashlib.sha256(copy.read_bytes()).hexdigest(), bytes=copy.stat().st_size
    )
    (folder / backup.MANIFEST).write_text(json.dumps(manifest))


def _foreign(path: Path) -> None:
    path.unlink()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("create table foo (x)")


@pytest.mark.parametrize(
    "change, problem",
    [
        (_foreign, "has no schema_version table: it is not a ColorConcept Lab database"),
        (
            "insert into schema_version values (999, 'future', 'x')",
            f"records schema version 999, newer than this code's {len(storage.schema.MIGRATIONS)}: update the code first",
        ),
        (
            "delete from schema_version where version > 3",
            rf"records schema version 3, but its manifest states {len(storage.schema.MIGRATIONS)}",
        ),
        (
            "drop table qc_votes; drop table sessions",
            f"lacks tables of schema version {len(storage.schema.MIGRATIONS)}: qc_votes, sessions",
        ),
        ("delete from schema_version", "records schema version 0, which no code wrote"),
        # Outside probe 115: each was restored, and the trigger made every new session an admin's.
        (
            "create trigger evil_admin after insert on sessions begin update sessions set roles = "
            "'[\"admin\"]' where token_hash = new.token_hash; end",
            rf"holds trigger 'evil_admin', which a database of schema version {VERSION} does not have "
            r"\(a backup holds the app's own tables, indexes and triggers only\)",
        ),
        (
            "create view v as select * from sessions",
            rf"holds view 'v', which a database of schema version {VERSION} does not have .*",
        ),
        (
            "create table evil (x)",
            rf"holds table 'evil', which a database of schema version {VERSION} does not have .*",
        ),
        # A file in WAL mode: reading it made "-wal" and "-shm" beside the staged copy, which
        # the refusal left (outside probe 226).
        (
            "pragma journal_mode = wal; create table evil (x)",
            rf"holds table 'evil', which a database of schema version {VERSION} does not have .*",
        ),
        (
            "create index evil on colorings (status)",
            rf"holds index 'evil', which a database of schema version {VERSION} does not have .*",
        ),
        (
            "drop trigger studies_frozen_update; create trigger studies_frozen_update after update on "
            "studies begin select 1; end",
            rf"has trigger 'studies_frozen_update' unlike schema version {VERSION}'s",
        ),
        (
            "alter table audit drop column why",
            rf"has table 'audit' unlike schema version {VERSION}'s \(columns: action, actor, created, "
            r"details, id, object_id, object_type; expected: action, actor, created, details, id, "
            r"object_id, object_type, why\)",
        ),
        (
            # Outside probe 118: it passed, and no one could sign in (every session write refused).
            "pragma writable_schema = on; update sqlite_master set sql = substr(sql, 1, length(sql) - 1) "
            "|| ', CHECK (0))' where name = 'sessions'; pragma writable_schema = off",
            rf"has table 'sessions' unlike schema version {VERSION}'s \(its SQL has CHECK\)",
        ),
        (
            "drop index idx_audit_action_object_id_created",
            rf"lacks index 'idx_audit_action_object_id_created' of schema version {VERSION}",
        ),
    ],
    ids=[
        "another-programs-database",
        "newer-schema",
        "version-not-the-manifests",
        "tables-missing",
        "no-version",
        "a-trigger",
        "a-view",
        "a-table",
        "a-table-in-wal-mode",
        "an-index",
        "a-trigger-rewritten",
        "a-column-missing",
        "a-check-constraint",
        "an-index-missing",
    ],
)
def test_restore_takes_only_this_apps_database_at_a_version_this_code_knows(tmp_path, change, problem):
    # Each passes integrity_check and its manifest's hash: a restore used to put it in place
    # and report success, leaving the app an empty database or one no command could open.
    folder, live = _one_coloring_backup(tmp_path)
    _replace_database(folder, change)
    with pytest.raises(
        backup.BackupError, match=rf"^the backup's database {problem}; the database was not replaced$"
    ):
        backup.restore(tmp_path / "backup", live, tmp_path / "live" / "data")
    assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite"]  # no lock file left either
    assert live.read_bytes() == b"the live database"


def test_the_same_database_migrated_from_each_earlier_version_is_restored(tmp_path, monkeypatch):
    """The schema check compares with a database built at the backup's version: one made by
    earlier code and migrated since must pass it (its tables were altered, not made anew)."""
    full = storage.schema.MIGRATIONS
    for version in (1, 9, len(full) - 1):
        monkeypatch.setattr(storage.schema, "MIGRATIONS", full[:version])
        db, data = _store(tmp_path / f"v{version}")
        db.close()
        monkeypatch.undo()
        db = storage.open_db(tmp_path / f"v{version}" / "colorconcept.sqlite")
        storage.ensure_schema(db)
        backup.backup(db, data, tmp_path / f"backup{version}")
        db.close()
        live = tmp_path / f"live{version}" / "db.sqlite"
        assert backup.restore(tmp_path / f"backup{version}", live, live.parent / "data")[
            "schema_version"
        ] == len(full)


def _file_size_limit() -> None:
    # Any file grown past 40 kB fails with EFBIG (Python ignores SIGXFSZ); the source
    # database is only read, and its -shm is 32 kB.
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))


@pytest.mark.parametrize("command", ["backup", "export"])
@pytest.mark.parametrize("disk", ["full tmpfs", "file size limit"])
def test_backup_and_export_onto_a_full_disk_say_so_in_one_line_and_leave_nothing(tmp_path, command, disk):
    db, data = _store(tmp_path)
    add_coloring(db, data, people(db, 1, "designer")[0], "banana", (240, 200, 20))
    db.close()
    with contextlib.ExitStack() as stack:
        if disk == "full tmpfs":
            target, options = stack.enter_context(tmpfs(tmp_path / "disk", "64k")) / command, {}
        else:
            target, options = tmp_path / "disk" / command, {"preexec_fn": _file_size_limit}
        done = _cli(data / "colorconcept.sqlite", data, command, str(target), **options)
        left = sorted(target.parent.iterdir())
    assert done.returncode == 1 and done.stdout == "" and left == []
    assert done.stderr.startswith(f"error: could not write the {command} to {str(target)!r}: ")
    said = (
        "its disk is full; nothing was left there; free some space on that disk and try again\n"
        if disk == "full tmpfs"
        else "; nothing was left there\n"  # a file over the size limit: the OS's reason
    )
    assert done.stderr.endswith(said) and done.stderr.count("\n") == 1


def test_the_admin_backup_download_onto_a_full_disk_names_its_folder_and_leaves_nothing(tmp_path):
    db, data = _store(tmp_path)
    with tmpfs(tmp_path / "disk", "64k") as disk:
        with pytest.raises(
            WriteFailed,
            match=rf"^could not write the backup to {str(disk)!r}: its disk is full; nothing was left there; free",
        ):
            backup.backup_archive(db, data, disk / "backup.zip")
        assert list(disk.iterdir()) == []


def _with_extra_file(folder: Path, relative: str, data: bytes) -> None:
    """Add `relative` to a backup, with its true hash in the manifest, as anyone preparing
    a backup by hand could (an HTML page there would be served on the app's origin)."""
    path = folder / "files" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    manifest["files"].append(
        {"path": relative, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    )
    (folder / backup.MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "relative, problem",
    [
        ("sketches/zz/x.html", r"is not a kind of file the app stores in sketches/ \(\.png\)"),
        ("colorings/ab/x.npz", r"is not a kind of file the app stores in colorings/ \(\.png\)"),
        ("exports/x.png", "is not a file the app stores"),
        ("sketches/.hidden/x.png", "is not a file the app stores"),
        ("password.png", "is not a file the app stores"),
    ],
)
def test_a_backup_naming_a_file_the_app_never_stores_is_refused_whole(tmp_path, relative, problem):
    folder, live = _one_coloring_backup(tmp_path)
    _with_extra_file(folder, relative, b"<script>alert(1)</script>")
    with pytest.raises(
        backup.BackupError, match=rf"^backup file 'files/{relative}' {problem}.*; nothing was restored$"
    ):
        backup.restore(tmp_path / "backup", live, tmp_path / "live" / "data")
    assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()


def test_a_backup_file_that_is_not_what_its_name_says_is_refused_whole(tmp_path):
    """Outside probe 115: an HTML page with a database after it was written into colorings/
    as a .png, and a file named by another content's sha256 replaced that content's file."""
    folder, live = _one_coloring_backup(tmp_path)
    _with_extra_file(folder, "colorings/ab/page.png", b"<html><script>alert(1)</script>SQLite format 3")
    with pytest.raises(
        backup.BackupError,
        match=r"^backup file 'files/colorings/ab/page.png' is not a \.png file \(its first bytes are not "
        r"that kind's\); nothing was restored$",
    ):
        backup.restore(folder, live, tmp_path / "live" / "data")
    folder, live = _one_coloring_backup(tmp_path / "named")
    other = png_bytes(np.zeros((4, 4, 4), np.uint8))
    _with_extra_file(folder, f"colorings/ab/{'ab' * 32}.png", other)
    with pytest.raises(
        backup.BackupError, match=r"is named by a sha256 that is not its content's .*; nothing was restored$"
    ):
        backup.restore(folder, live, tmp_path / "named" / "live" / "data")
    for place in (tmp_path, tmp_path / "named"):
        assert (place / "live" / "db.sqlite").read_bytes() == b"the live database"
        assert not (place / "live" / "data").exists()


def test_a_manifest_that_lists_too_little_or_lacks_a_field_is_refused_in_one_line(tmp_path):
    """Outside probe 118: a manifest listing no file restored a study of broken images, and
    one lacking a file's size ended in a traceback."""
    folder, live = _one_coloring_backup(tmp_path)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    for change, problem in (
        (
            {"files": []},
            r"the backup's database names 'colorings/.*' and 1 other file\(s\), which neither the backup nor "
            r"the data folder holds \(a backup holds every file its database names\); the database was not "
            r"replaced",
        ),
        (
            {"files": [{k: v for k, v in e.items() if k != "bytes"} for e in manifest["files"]]},
            r"holds a manifest\.json that gives 'colorings/.* no size in bytes \(a whole number, 0 or more; "
            r"got None\); nothing was restored",
        ),
        ({"schema_version": None}, r"holds a manifest\.json that states no schema version \(got None\)"),
    ):
        (folder / backup.MANIFEST).write_text(json.dumps({**manifest, **change}))
        if not change.get("files", True):  # its files gone too (a folder's unlisted file is refused)
            (folder / "files").rename(tmp_path / "files")
        with pytest.raises(backup.BackupError, match=f"^.*{problem}"):
            backup.restore(folder, live, tmp_path / "live" / "data")
        if not change.get("files", True):
            (tmp_path / "files").rename(folder / "files")
        assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()
        assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite"]


def test_a_backup_folder_holding_what_its_manifest_does_not_list_is_refused(tmp_path):
    """A zip with an unlisted entry is refused; a folder's unlisted file was passed over, and
    its manifest read through a link to a file outside it (outside probe 141)."""
    folder, live = _one_coloring_backup(tmp_path)
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes((folder / backup.MANIFEST).read_bytes())
    extra = folder / "files" / "colorings" / "evil.html"
    extra.write_text("<script>alert(1)</script>")
    link = folder / "files" / "linked"
    link.symlink_to(tmp_path, target_is_directory=True)
    for refusal in (
        f"the backup folder {str(folder)!r} holds 'files/linked', which its manifest.json does not list; "
        "nothing was restored",
        f"the backup folder {str(folder)!r} holds 'files/colorings/evil.html', which its manifest.json "
        "does not list; nothing was restored",
        "backup file 'manifest.json' is a link; a backup holds files only; nothing was restored",
    ):
        with pytest.raises(backup.BackupError) as refused:
            backup.restore(folder, live, tmp_path / "live" / "data")
        assert str(refused.value) == refusal
        assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()
        if "linked" in refusal:
            link.unlink()
        elif "evil" in refusal:
            extra.unlink()
            (folder / backup.MANIFEST).unlink()
            (folder / backup.MANIFEST).symlink_to(outside)
    (folder / backup.MANIFEST).unlink()
    outside.rename(folder / backup.MANIFEST)
    assert backup.restore(folder, live, tmp_path / "live" / "data")  # the folder as made restores


@pytest.mark.parametrize(
    ("manifest", "problem"),
    [
        ('{"database": null}', "has no `database` entry (an object: path, sha256, bytes; got None)"),
        ('{"files": "oops"}', "has no `files` list (got 'oops')"),
        ('{"files": [5]}', "lists 5 in `files`, not a file's entry (an object: path, sha256, bytes)"),
        ('{"files": [{"path": "a"}, {"sha256": "0"}]}', "gives entry 2 of `files` no `path` (got None)"),
        ('{"database": {"bytes": 1}}', "gives the `database` entry no `path` (got None)"),
        (
            '{"files": [{"path": "colorings/a.png"}, {"path": "colorings/a.png"}]}',
            "lists 'colorings/a.png' twice (a backup lists each file once)",
        ),
        ("[1, 2]", "is not a JSON object (got list)"),
    ],
    ids=[
        "database-null",
        "files-a-string",
        "an-entry-a-number",
        "an-entry-without-path",
        "a-database-without-path",
        "a-file-twice",
        "a-list",
    ],
)
def test_a_manifest_of_another_layout_is_refused_naming_the_field_as_folder_and_as_zip(
    tmp_path, manifest, problem
):
    """A manifest with ``"database": null`` or ``"files": "oops"`` was answered with Python's
    own words ("'NoneType' object is not subscriptable": outside probe 135)."""
    folder, live = _one_coloring_backup(tmp_path)
    original = json.loads((folder / backup.MANIFEST).read_text())
    changed = json.loads(manifest)
    (folder / backup.MANIFEST).write_text(
        json.dumps({**original, **changed} if isinstance(changed, dict) else changed)
    )
    archive = tmp_path / "backup.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in folder.rglob("*"):
            if path.is_file():
                out.write(path, path.relative_to(folder).as_posix())
    for source, where in ((folder, repr(str(folder))), (archive, f"the zip {archive.name!r}")):
        with pytest.raises(backup.BackupError) as refused:
            backup.restore(source, live, tmp_path / "live" / "data")
        assert str(refused.value) == f"{where} holds a manifest.json that {problem}; nothing was restored"
        assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()
        assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite"]


def test_a_manifest_nested_too_deeply_for_python_is_refused_in_words(tmp_path):
    """Python's json reader gives up on deep nesting with a RecursionError: a traceback
    (outside probe 138)."""
    folder, live = _one_coloring_backup(tmp_path)
    (folder / backup.MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(backup.BackupError) as refused:
        backup.restore(folder, live, tmp_path / "live" / "data")
    assert str(refused.value) == (
        f"{str(folder)!r} holds no readable manifest.json: its JSON is nested too deeply to read (a "
        "backup's is three levels deep); nothing was restored"
    )
    assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()


def test_a_restore_never_replaces_a_file_of_the_data_folder(tmp_path):
    folder, live = _one_coloring_backup(tmp_path)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    data = tmp_path / "live" / "data"
    first, second = (data / e["path"] for e in manifest["files"])
    first.parent.mkdir(parents=True)
    first.write_bytes(b"bytes of another content under that name")
    with pytest.raises(
        backup.BackupError,
        match=rf"^the data folder's {re.escape(repr(manifest['files'][0]['path']))} holds other bytes than the "
        r"backup's file of that name; .* \(if the backup's is the right one, move that file aside and restore "
        r"again\); nothing was restored$",
    ):
        backup.restore(folder, live, data)
    assert first.read_bytes() == b"bytes of another content under that name"
    assert not second.exists()  # nothing was copied before the refusal
    assert live.read_bytes() == b"the live database"
    assert sorted(p.name for p in live.parent.iterdir()) == ["data", "db.sqlite"]


def test_a_restore_onto_a_full_data_disk_leaves_no_half_copied_file_and_the_database_as_it_was(
    tmp_path, capsys
):
    from annotation.__main__ import main

    folder, live = _one_coloring_backup(tmp_path)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    with tmpfs(tmp_path / "live" / "data", "256k") as data:
        filler = fill(data)  # a file can be made, but takes no byte
        said = (
            f"could not write the backup's files into {str(data)!r}: its disk is full; the database was not "
            "replaced (files copied before stay: each is named by its content); free some space on that "
            "disk and restore again"
        )
        with pytest.raises(backup.BackupError, match=f"^{re.escape(said)}$"):
            backup.restore(folder, live, data)
        # The command says so in one line (it printed a traceback)
        assert main(["--db", str(live), "--data-dir", str(data), "restore", str(folder)]) == 1
        assert capsys.readouterr().err == f"error: {said}\n"
        left = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    assert manifest["files"] and min(e["bytes"] for e in manifest["files"]) > 0
    assert left == [filler.name]  # a half-written ".NAME.restoring" stayed beside its folder
    assert live.read_bytes() == b"the live database"
    assert sorted(p.name for p in live.parent.iterdir()) == ["data", "db.sqlite"]


def test_a_backup_file_that_is_a_link_is_refused(tmp_path):
    folder, live = _one_coloring_backup(tmp_path)
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"a file of the server's, not of the backup")
    _with_extra_file(tmp_path / "backup", "sketches/zz/host.png", outside.read_bytes())
    link = tmp_path / "backup" / "files" / "sketches" / "zz" / "host.png"
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(
        backup.BackupError, match=r"'files/sketches/zz/host.png' is a link; .*nothing was restored"
    ):
        backup.restore(folder, live, tmp_path / "live" / "data")
    assert live.read_bytes() == b"the live database" and not (tmp_path / "live" / "data").exists()


def test_the_admin_tabs_backup_zip_restores_as_its_folder_would(tmp_path):
    db, data = _store(tmp_path / "source")
    add_coloring(db, data, people(db, 1, "designer")[0], "apple", (200, 30, 30))
    # What a killed backup of this machine left beside the zip (every hash in it) goes with
    # the next one; a live writer's stays. The zip was built in a folder named for no process,
    # which nothing swept for an hour.
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = {
        pid: tmp_path / "download" / f".backup.zip-partial-{export._host_in_names()}-{pid}-ab12cd34"
        for pid in (gone.pid, os.getpid())
    }
    for folder in left.values():
        (folder / "backup").mkdir(parents=True)
        (folder / "backup" / backup.DB_NAME).write_bytes(b"half a copy")
    archive = backup.backup_archive(db, data, tmp_path / "download" / "backup.zip")
    assert sorted(p.name for p in archive.parent.iterdir()) == sorted([archive.name, left[os.getpid()].name])
    live = tmp_path / "live" / "db.sqlite"
    live.parent.mkdir()
    done = backup.restore(archive, live, tmp_path / "live" / "data")
    assert done["copied"] == len(done["files"]) == 2  # the coloring and its mask
    for entry in done["files"]:
        restored = tmp_path / "live" / "data" / entry["path"]
        assert hashlib.sha256(restored.read_bytes()).hexdigest() == entry["sha256"]
    assert sorted(p.name for p in live.parent.iterdir()) == [
        "data",
        "db.sqlite",
        "db.sqlite.lock",
    ]  # unpacked copy gone
    slip = _zip_plus(archive, tmp_path / "slip.zip", "../outside.png", b"x")
    with pytest.raises(backup.BackupError, match=r"holds '\.\./outside\.png', which would land outside"):
        backup.restore(slip, live, tmp_path / "live" / "data")
    assert not (tmp_path / "outside.png").exists()


def test_a_zip_that_cannot_unpack_on_the_databases_full_disk_blames_the_disk_not_the_zip(tmp_path):
    """It said "the zip cannot be read: [Errno 28] No space left on device" (outside probe 89)."""
    db, data = _store(tmp_path / "source")
    add_coloring(db, data, people(db, 1, "designer")[0], "apple", (200, 30, 30))
    archive = backup.backup_archive(db, data, tmp_path / "download" / "backup.zip")
    with tmpfs(tmp_path / "disk", "1m") as disk:
        filler = fill(disk, leave=16_384)
        with pytest.raises(backup.BackupError) as refused:
            backup.restore(archive, disk / "db.sqlite", disk / "data")
        # Weighed before it is unpacked: a listed 1 GB entry filled the disk before its hash
        # was checked (outside probe 118).
        assert re.fullmatch(
            rf"the disk beside the database \({re.escape(repr(str(disk)))}\) is full: the zip 'backup\.zip' "
            r"unpacks there first \([\d,]+ bytes; [\d,]+ free\); free some space there and run this again; "
            r"nothing was restored",
            str(refused.value),
        ), str(refused.value)
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
        filler.unlink()
        assert backup.restore(archive, disk / "db.sqlite", disk / "data")["copied"] == 2


def test_a_backup_folder_zipped_whole_restores_and_two_folders_are_refused(tmp_path):
    """``zip -r backup.zip backup`` puts every entry under ``backup/``: the refusal of a zip
    without a manifest told an outside tester to zip the folder whole, then refused it."""
    folder, live = _one_coloring_backup(tmp_path)
    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, path.relative_to(tmp_path))  # the folder's name first, as zip -r
    done = backup.restore(whole, live, tmp_path / "live" / "data")
    assert done["copied"] == len(done["files"]) == 2
    assert live.read_bytes().startswith(b"SQLite format 3\x00")
    assert done["previous"].read_bytes() == b"the live database"
    assert not [p for p in live.parent.iterdir() if p.name.startswith(".restore-")]  # unpacked copy gone
    two = _zip_plus(whole, tmp_path / "two.zip", "other/notes.txt", b"x")
    with pytest.raises(
        backup.BackupError,
        match=r"^the zip 'two\.zip' holds no manifest\.json at its top or in one folder holding "
        r"everything: it is not a backup \(the Admin tab's backup zip, or a backup folder zipped "
        r"whole\); nothing was restored$",
    ):
        backup.restore(two, live, tmp_path / "live" / "data")


def test_a_zip_with_a_link_or_a_zip_cut_short_is_refused_and_changes_nothing(tmp_path):
    db, data = _store(tmp_path / "source")
    add_coloring(db, data, people(db, 1, "designer")[0], "apple", (200, 30, 30))
    archive = backup.backup_archive(db, data, tmp_path / "download" / "backup.zip")
    live = tmp_path / "live" / "db.sqlite"
    live.parent.mkdir()
    live.write_bytes(b"the live database")
    link = zipfile.ZipInfo("files/colorings/aa/link.png")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16  # as `zip --symlinks` stores one
    linked = _zip_plus(archive, tmp_path / "linked.zip", link, b"/etc/passwd")
    with pytest.raises(
        backup.BackupError,
        match=r"^the zip 'linked\.zip' holds 'files/colorings/aa/link\.png' as a link; a backup "
        r"holds files only; nothing was restored$",
    ):
        backup.restore(linked, live, tmp_path / "live" / "data")
    cut = tmp_path / "cut.zip"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    for damaged in (cut, tmp_path / "empty.zip"):
        damaged.touch()
        with pytest.raises(
            backup.BackupError,
            match=rf"^{re.escape(repr(str(damaged)))} is a file but not a readable zip \(it may be "
            r"truncated or damaged\): give a backup folder or the Admin tab's backup zip; nothing was restored$",
        ):
            backup.restore(damaged, live, tmp_path / "live" / "data")
    # Outside probe 115: a 3.2 GB entry the manifest did not list was unpacked in full first.
    padded = _zip_plus(archive, tmp_path / "padded.zip", "padding.bin", b"\0" * 100_000)
    with pytest.raises(
        backup.BackupError,
        match=r"^the zip 'padded\.zip' holds 'padding\.bin', which its manifest\.json does not list; "
        r"nothing was restored$",
    ):
        backup.restore(padded, live, tmp_path / "live" / "data")
    with zipfile.ZipFile(archive) as good, zipfile.ZipFile(tmp_path / "grown.zip", "w") as bad:
        for name in good.namelist():
            bad.writestr(name, good.read(name) + (b"\0" * 1000 if name.startswith("files/") else b""))
    with pytest.raises(
        backup.BackupError,
        match=r"^the zip 'grown\.zip' holds 'files/.* of [\d,]+ bytes, where its manifest",
    ):
        backup.restore(tmp_path / "grown.zip", live, tmp_path / "live" / "data")
    # The database itself given: named as such (it said "not a readable zip").
    database = Path(storage.db_path(db))
    with pytest.raises(
        backup.BackupError,
        match=rf"^{re.escape(repr(str(database)))} is a SQLite database, not a backup: give",
    ):
        backup.restore(database, live, tmp_path / "live" / "data")
    # What a killed restore unpacked is said at a start and removed by the next restore.
    (live.parent / ".restore-killed").mkdir()
    assert any(".restore-killed" in line for line in backup.leftovers(live))
    empty = tmp_path / "no-entries.zip"
    zipfile.ZipFile(empty, "w").close()
    with pytest.raises(
        backup.BackupError,
        match=r"^the zip 'no-entries\.zip' holds no manifest\.json at its top or in one folder ",
    ):
        backup.restore(empty, live, tmp_path / "live" / "data")
    assert live.read_bytes() == b"the live database"
    assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite"]  # its lock file gone too


REFUSED_FILE = "does not match its sha256 in the manifest; nothing was restored"


def test_a_refused_restore_into_a_new_place_leaves_no_folder_and_no_lock_file(tmp_path):
    """A refusal leaves the place as it found it: the folders the restore would have made and
    the lock file it took are gone; a lock file that was there before stays."""
    folder, live = _one_coloring_backup(tmp_path)
    manifest = json.loads((folder / backup.MANIFEST).read_text())
    (folder / "files" / manifest["files"][0]["path"]).write_bytes(b"tampered")
    new = tmp_path / "new" / "deeper" / "db.sqlite"
    done = _cli(new, tmp_path / "new" / "deeper" / "data", "restore", str(folder))
    assert done.returncode == 1 and REFUSED_FILE in done.stderr, done.stderr
    assert not (tmp_path / "new").exists()
    storage.serving.lock_path(live).touch()  # as a start of the app leaves it
    done = _cli(live, live.parent / "data", "restore", str(folder))
    assert done.returncode == 1 and REFUSED_FILE in done.stderr, done.stderr
    assert sorted(p.name for p in live.parent.iterdir()) == ["db.sqlite", "db.sqlite.lock"]


def test_a_restore_writes_only_what_the_app_serves_in_each_folder():
    from app.guard import DATA_RULES

    for folder, kinds in backup.RESTORED_KINDS.items():
        assert set(kinds) == DATA_RULES[folder].suffixes, folder


def test_a_kept_database_is_never_overwritten_by_a_later_restore(tmp_path):
    """Two restores within one second name their kept copies with the same time: the second
    takes the next free name instead of replacing the first (an outside tester's decoys)."""
    kept = tmp_path / "colorconcept.sqlite.before-restore-20261130T174015"
    assert unused_path(kept) == kept
    kept.write_bytes(b"DECOY 1")
    Path(f"{kept}-3-wal").write_bytes(b"a kept copy's journal")
    assert unused_path(kept) == kept.with_name(kept.name + "-2")
    kept.with_name(kept.name + "-2").write_bytes(b"DECOY 2")
    assert unused_path(kept) == kept.with_name(kept.name + "-4")
    assert kept.read_bytes() == b"DECOY 1"

    db, data = _store(tmp_path / "source")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    live_db, live_data = _store(tmp_path / "live")
    live_db.close()
    live = tmp_path / "live" / "data" / "colorconcept.sqlite"
    first = backup.restore(tmp_path / "backup", live, live_data)["previous"]
    second = backup.restore(tmp_path / "backup", live, live_data)["previous"]
    assert first != second and first.is_file() and second.is_file()


def test_a_database_on_a_read_only_disk_is_refused_in_one_line_that_says_what_to_do(tmp_path):
    """A disk the kernel remounted read-only after errors: no lock file can be made beside the
    database, so the app's start, a backup and a restore there each say so in one line (they
    ended in a traceback) and change nothing."""
    db, data = _store(tmp_path / "source")
    db.close()
    with tmpfs(tmp_path / "disk", "2m") as disk:
        live = disk / "colorconcept.sqlite"
        live.write_bytes((data / "colorconcept.sqlite").read_bytes())
        said = (
            f"the database's folder {str(disk)!r} cannot be written (Read-only file system), so its lock "
            "colorconcept.sqlite.lock cannot be made or opened, and the app and every command write beside "
            "the database; if its disk was made read-only, copy the database (with any -wal file beside it) "
            "to a writable disk and give that path"
        )
        # Without a lock file, and with the one an earlier start left (an outside tester's
        # message said it "cannot be made" while it was there).
        for lock_there in (False, True):
            if lock_there:
                storage.serving.lock_path(live).touch()
            files = sorted(p.name for p in disk.iterdir())
            with read_only(disk):
                done = _cli(live, data, "backup", str(tmp_path / "backup"))
                assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {said}\n")
                assert not (tmp_path / "backup").exists()
                with pytest.raises(backup.BackupError, match=f"^{re.escape(said)}; nothing was restored$"):
                    backup.restore(tmp_path / "nothing", live, tmp_path / "restored-data")
                started = _start_app(live, tmp_path / "app-data")
                assert started.returncode == 1 and "Traceback" not in started.stderr, started.stderr[-2000:]
                assert started.stderr.strip().splitlines()[-1] == f"Refusing to start: {said}."
                assert sorted(p.name for p in disk.iterdir()) == files


def test_a_backup_from_a_database_on_a_full_disk_says_so_in_one_line(tmp_path):
    """Opening a WAL database writes its -shm beside it, so on a full disk even a backup to
    another disk cannot open it: the command says so in one line (it ended in a traceback),
    as does a start of the app."""
    db, data = _store(tmp_path / "source")
    db.close()
    with tmpfs(tmp_path / "disk", "2m") as disk:
        live = disk / "colorconcept.sqlite"
        live.write_bytes((data / "colorconcept.sqlite").read_bytes())
        fill(disk)
        done = _cli(live, data, "backup", str(tmp_path / "backup"))
        assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"error: the database {str(live)!r} could not be opened or written (")
        assert done.stderr.endswith(
            "if its disk is full, free some space beside it first (even a backup must open it), then run this again\n"
        )
        assert not (tmp_path / "backup").exists()
        started = _start_app(live, tmp_path / "app-data")
        assert started.returncode == 1, started.stderr[-2000:]
        assert (
            started.stderr.strip()
            .splitlines()[-1]
            .startswith(f"Refusing to start: the database {str(live)!r} could not be opened or written (")
        ), started.stderr[-2000:]
        assert "Traceback" not in started.stderr


def test_a_restored_backup_of_an_earlier_schema_says_the_next_start_migrates_it(
    tmp_path, monkeypatch, capsys
):
    from annotation.__main__ import main

    monkeypatch.setattr(storage.schema, "MIGRATIONS", storage.schema.MIGRATIONS[:17])
    db, data = _store(tmp_path / "old")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    monkeypatch.undo()
    live = tmp_path / "live"
    argv = ["--db", str(live / "study.sqlite"), "--data-dir", str(live / "data"), "restore"]
    assert main([*argv, str(tmp_path / "backup")]) == 0
    said = capsys.readouterr().out
    assert said.startswith("restored schema version 17 with ")
    assert said.rstrip().endswith(
        f"; this code's schema is {len(storage.schema.MIGRATIONS)}: the next start of the app or of a command "
        "migrates it, keeping a "
        "copy as it was"
    )
    assert (
        storage.schema_version(storage.open_db(live / "study.sqlite")) == 17
    )  # the restore migrates nothing
    # A backup of this code's schema says nothing of it.
    db = storage.open_db(live / "study.sqlite")
    storage.ensure_schema(db)
    backup.backup(db, live / "data", tmp_path / "backup-latest")
    db.close()
    assert main([*argv, str(tmp_path / "backup-latest")]) == 0
    assert "this code's schema" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "command", [["export", "out"], ["backup", "out"], ["check-distributions"], ["restore", "bk"]]
)
def test_a_data_folder_that_is_a_plain_file_is_refused_naming_it_and_nothing_is_written(
    tmp_path, capsys, command
):
    """An export onto such a folder reported every image missing, unsaid."""
    from annotation.__main__ import main

    db, data = _store(tmp_path)
    db.close()
    plain = tmp_path / "plain"
    plain.write_text("x")
    before = sorted(tmp_path.rglob("*"))
    for data_dir, why in [
        (plain, "is a plain file, not a folder"),
        (plain / "d", f"lies under the plain file {str(plain)!r}"),
    ]:
        argv = ["--db", str(data / "colorconcept.sqlite"), "--data-dir", str(data_dir)]
        assert main([*argv, command[0], *[str(tmp_path / c) for c in command[1:]]]) == 2
        assert capsys.readouterr().err == f"error: --data-dir {str(data_dir)!r} {why}; give the data folder\n"
    assert sorted(tmp_path.rglob("*")) == before


def test_a_restore_right_after_its_backup_says_it_took_nothing_back(tmp_path):
    db, data = _store(tmp_path)
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert "no table of the replaced database held more rows than the backup" in done.stdout
    assert "not kept" not in done.stdout and "accounts and invite links" not in done.stdout
    assert "changed after the backup" not in done.stdout


def test_a_restore_names_the_tables_whose_rows_changed_after_the_backup(tmp_path):
    # A new pilot set after the backup replaced a settings row: the restore undid it and
    # said only that an audit row was gone (outside probe 179). Here the expert's
    # "Colorings needed per concept", set again after the backup.
    from annotation.qc.review import MIN_COLORINGS_SETTING
    from storage.settings import read_setting, write_setting

    db, data = _store(tmp_path)
    with storage.transaction(db):
        write_setting(db, MIN_COLORINGS_SETTING, "3")
    backup.backup(db, data, tmp_path / "backup")
    with storage.transaction(db):
        write_setting(db, MIN_COLORINGS_SETTING, "5")
    db.close()
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert "no table of the replaced database held more rows than the backup" in done.stdout
    previous = next(data.glob("colorconcept.sqlite.before-restore-*"))
    [changed] = [line for line in done.stdout.splitlines() if line.startswith("changed after the backup")]
    assert changed == (
        "changed after the backup, not kept: rows of the replaced database that the backup holds otherwise, "
        f"in settings; they stay in {previous}"
    )
    db = storage.open_db(data / "colorconcept.sqlite")
    try:
        assert read_setting(db, MIN_COLORINGS_SETTING) == "3"
    finally:
        db.close()


# A folder whose name a URI would read otherwise: the replaced database was opened as
# "file:<path>?mode=ro", so '#' cut its path short, and the revoked links came back unsaid.
@pytest.mark.parametrize("folder", ["study", "study #2 at 100%?"])
def test_a_restore_keeps_the_links_sessions_accounts_and_password_ended_after_the_backup(tmp_path, folder):
    from annotation.errors import AnnotationError
    from annotation.people import accounts, passwords

    tmp_path = tmp_path / folder
    db, data = _store(tmp_path)
    (designer, link), (other, other_link) = accounts.create_annotators(db, 2, "designer")
    passwords.set_admin_password(db, "the-old-admin-password")
    session = accounts.login_with_invite(db, link)
    other_session = accounts.login_with_invite(db, other_link)
    admin = passwords.login_admin(db, "the-old-admin-password")
    held = _held_concepts(db, data, designer["id"], 3)
    backup.backup(db, data, tmp_path / "backup")
    # After the backup, what an operator does when a password or a link has leaked.
    actor = accounts.require(db, admin.token, "admin")
    accounts.revoke_annotator(db, designer["id"], actor, "left the lab")
    passwords.set_admin_password(db, "the-new-admin-password")
    accounts.logout(db, other_session.token)
    accounts.create_annotators(db, 1, "expert")
    since = passwords.login_admin(db, "the-new-admin-password")  # unknown to the backup
    counts = {t: db[t].count for t in ("annotators", "invites")}
    db.close()

    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    kept = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("kept from the replaced database and the copies earlier restores kept: ")
    ]
    assert len(kept) == 4, done.stdout
    assert "3 session(s) ended after the backup stay so" in kept[0]
    assert "1 sign-in link(s) revoked after the backup stay so" in kept[1]
    assert f"1 account(s) closed after the backup stay closed ({designer['pseudonym']};" in kept[2]
    # The closed account's concepts held their places again (outside probe 226).
    assert kept[2].endswith(f"; the {len(held)} task(s) they held again go back to the pool")
    assert "the admin password in use before the restore stays" in kept[3]
    # What is not carried over is said too, as it was: the rows the restore took back, by
    # table (a fixed line named accounts whether or not any were made: outside probe 161),
    # and a link made since reads as mistyped (outside probe 145).
    [taken] = [line for line in done.stdout.splitlines() if line.startswith("not kept: ")]
    assert (
        f"annotators {counts['annotators']} (now {counts['annotators'] - 1})" in taken
        and f"invites {counts['invites']} (now {counts['invites'] - 1})" in taken
        and "sessions 4 (now 3)" in taken  # the admin's since alone: the others ended, not removed
    ), taken
    assert taken.endswith(f"; they stay in {next(data.glob('colorconcept.sqlite.before-restore-*'))}")
    assert (
        "accounts and invite links made after the backup are gone: give anyone sent one since" in done.stdout
    )

    db = storage.open_db(data / "colorconcept.sqlite")
    for token in (session.token, other_session.token, admin.token):
        with pytest.raises(AnnotationError):
            accounts.require(db, token, "designer", "admin")
    # A session the backup does not know: the admin was told to open an invite link (outside probe 200)
    with pytest.raises(AnnotationError) as unknown:
        accounts.require(db, since.token, "admin")
    assert str(unknown.value) == (
        "your session is not valid any more: this server has no record of it (one opened after the backup "
        "that a restore of the study brought back, say); open your invite link again, or, as the admin, "
        "sign in with the password on the Start tab"
    )
    with pytest.raises(AnnotationError):
        accounts.login_with_invite(db, link)
    with pytest.raises(AnnotationError):
        passwords.login_admin(db, "the-old-admin-password")
    passwords.login_admin(db, "the-new-admin-password")
    # What was not ended stays as the backup held it: the other designer's link signs in.
    assert accounts.login_with_invite(db, other_link).pseudonym == other["pseudonym"]
    assert accounts.get_annotator(db, designer["id"])["status"] == "revoked"
    audit = db.execute("select details from audit where action = 'restore_kept_denials'").fetchall()
    assert len(audit) == 1 and json.loads(audit[0][0])["kept"] == [line.split(": ", 1)[1] for line in kept]


def _held_concepts(db, data: Path, designer: int, n: int) -> list[str]:
    """`n` concepts of banana's sketch (a real file) that `designer` now holds to color."""
    from annotation.assignment import reserve

    sketch = data / "sketches" / "banana.png"
    if not sketch.exists():
        sketch.parent.mkdir(parents=True, exist_ok=True)
        Image.new("L", (8, 8), 255).save(sketch)
        values = {"base": "banana", "path": "sketches/banana.png", "source": "test", "selected": 1}
        digest = hashlib.sha256(sketch.read_bytes()).hexdigest()
        db["sketches"].insert({**values, "sha256": digest, "created": iso()})
    concepts = [t.concept_key for t in reserve(db, "coloring", designer, np.random.default_rng(0), n)]
    assert len(concepts) == n
    return concepts


def test_a_restore_keeps_the_colorings_withdrawn_after_the_backup_withdrawn(tmp_path):
    """A restore of an older backup brought a designer's withdrawn colorings back into every
    P_H, unsaid (outside probe 150); the consent text promises no analysis counts them."""
    from annotation.coloring.withdrawal import withdraw_colorings
    from annotation.qc import review, votes
    from storage import human
    from tests.qc_data import ADMIN, actor

    db, data = _store(tmp_path)
    leaving, staying = people(db, 2, "designer")
    expert = actor(db, people(db, 1, "expert")[0])
    red = add_coloring(db, data, leaving, "apple", (200, 20, 30))
    green = add_coloring(db, data, staying, "apple", (30, 160, 40))
    practice = add_coloring(db, data, leaving, "cat", (90, 90, 90), practice=True)
    review.open_reviews(db, ADMIN, [red], reason="test")
    [held] = votes.vote_queue(db, expert, np.random.default_rng(0), batch_size=5)
    assert held.coloring_id == red
    concepts = _held_concepts(db, data, leaving, 2)  # the withdrawal gives them back
    backup.backup(db, data, tmp_path / "backup")
    withdraw_colorings(db, leaving, ADMIN, "asked by email")
    pseudonym = db["annotators"].get(leaving)["pseudonym"]
    db.close()

    said = (
        "kept from the replaced database and the copies earlier restores kept: 2 coloring(s) withdrawn "
        f"after the backup stay withdrawn ({pseudonym} (2); the P_H of 1 concept(s) recomputed without "
        "them){}\n"
    )
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert said.format(f"; the {len(concepts)} task(s) they held again go back to the pool") in done.stdout
    # Restored again: the replaced database and the copy the first restore kept both hold the
    # withdrawal, which is one (outside probe 226: counted per copy, 6 became 72).
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert said.format(f"; the {len(concepts)} task(s) they held again go back to the pool") in done.stdout
    db = storage.open_db(data / "colorconcept.sqlite")
    [kept] = db.execute(
        "select details from audit where action = 'restore_kept_denials' order by id desc limit 1"
    ).fetchall()
    assert json.loads(kept[0])["kept"][0].startswith("2 coloring(s) withdrawn")
    assert [
        r["status"]
        for r in db.query("select status from tasks where kind = 'coloring' and annotator_id = ?", [leaving])
    ] == ["released"] * len(concepts)
    statuses = {r["id"]: r["status"] for r in db["colorings"].rows}
    assert statuses == {red: "withdrawn", green: "submitted", practice: "withdrawn"}
    assert human.read(db, human.DESIGNERS)["apple"].coloring_ids == (green,)
    assert db["reviews"].get(red)["status"] == "withdrawn"
    [task] = db.query("select status from tasks where kind = 'review' and coloring_id = ?", [red])
    assert task["status"] == "released"  # the expert's held vote goes back, as a withdrawal does
    db.close()


def test_a_restore_keeps_the_audit_rows_of_the_denials_it_carries_once_each(tmp_path):
    """Who asked and why: the withdrawal's, the closure's and the erasure's audit rows made
    after the backup stayed only in the kept copy, which the README says to delete (outside
    tester); the restore carries each once, with the denial, however often it is repeated."""
    import datetime as dt

    from annotation.coloring.withdrawal import withdraw_colorings
    from annotation.people import accounts, passwords
    from annotation.study import crowd
    from annotation.study import design as study
    from tests.qc_data import ADMIN
    from tests.study_data import populate, sources, truth_source

    db, data = _store(tmp_path)
    path = data / "colorconcept.sqlite"
    leaving, closing, staying = people(db, 3, "designer")
    add_coloring(db, data, leaving, "apple", (200, 20, 30))
    add_coloring(db, data, staying, "apple", (30, 160, 40))
    passwords.set_admin_password(db, "the-old-admin-password")
    truths, _ = populate(db, data, 6, np.random.default_rng(0))
    study_id = study.create_study(db, "crowd", sources(), truth_source(data, truths), seed=1, n_concepts=3)
    study.open_study(db, study_id, ADMIN)
    codes = {"completion_code": "C0MPLETE", "screenout_code": "SCREEN-1", "quota": 10, "minutes": 30}
    _, token = crowd.create_link(db, study_id, ADMIN, **codes)
    other_link, _ = crowd.create_link(db, study_id, ADMIN, **codes)
    query = {"PROLIFIC_PID": "PIDerase1", "STUDY_ID": "S1", "SESSION_ID": "sess-PIDerase1"}
    erased = crowd.join(db, token, query, address="1.2.3.4").session
    backup.backup(db, data, tmp_path / "backup")
    # After the backup, three requests, each with its own reason (and a link closed and a
    # new admin password, whose rows go with them too).
    withdraw_colorings(db, leaving, ADMIN, "withdrawn: her e-mail of 3 March")
    accounts.revoke_annotator(db, closing, ADMIN, "closed: left the lab on 4 March")
    pseudonym = db["annotators"].get(erased.annotator_id)["pseudonym"]
    crowd.erase_platform_ids(db, pseudonym, ADMIN, "erased: their message of 5 March")
    crowd.close_link(db, other_link["id"], ADMIN)
    passwords.set_admin_password(db, "the-new-admin-password", now=storage.utcnow() + dt.timedelta(seconds=1))
    actions = ("withdraw_colorings", "revoke_annotator", "erase_platform_ids", "close_crowd_link")
    audited = (
        "select created, actor, action, object_type, object_id, why, details from audit where action in "
    )
    denied = db.execute(f"{audited} (?, ?, ?, ?, 'set_admin_password') order by id", actions).fetchall()
    assert [(r[1], r[2], r[4], r[5]) for r in denied if r[2] in actions] == [
        ("admin", "withdraw_colorings", str(leaving), "withdrawn: her e-mail of 3 March"),
        ("admin", "revoke_annotator", str(closing), "closed: left the lab on 4 March"),
        ("admin", "revoke_annotator", str(erased.annotator_id), "erased: their message of 5 March"),
        ("admin", "erase_platform_ids", str(erased.annotator_id), "erased: their message of 5 March"),
        ("admin", "close_crowd_link", str(other_link["id"]), ""),
    ]
    db.close()

    for _ in range(2):  # restored again: the replaced database and the kept copy both hold each row
        kept = backup.restore(tmp_path / "backup", path, data)["kept"]
        assert len(kept) == 7, kept  # sessions, links, accounts, study links, ids, colorings, password
        conn = storage.read_only(path)
        try:
            # The backup's own set_admin_password row, and each row made after it, once.
            found = conn.execute(
                f"{audited} (?, ?, ?, ?, 'set_admin_password') order by id", actions
            ).fetchall()
            [summary] = conn.execute(
                "select actor, details from audit where action = 'restore_kept_denials' order by id desc limit 1"
            ).fetchall()
        finally:
            conn.close()
        assert sorted(found) == sorted(denied)
        assert summary == ("system", json.dumps({"kept": kept}, sort_keys=True))
    # A refused restore writes nothing: a second name of the database refuses it.
    before = _rows(path)
    os.link(path, tmp_path / "second-name.sqlite")
    with pytest.raises(backup.BackupError, match=r"has 2 names \(hard links\)"):
        backup.restore(tmp_path / "backup", path, data)
    assert _rows(path) == before


def test_a_restore_carries_the_audit_row_of_each_denial_in_force_and_no_other(tmp_path):
    """Of an account closed, reopened and closed again after the backup, the closure in force;
    of one reopened since, none (its closure is not carried); of a designer withdrawn twice,
    the first withdrawal, whose colorings the backup holds (the second's were made after it)."""
    from annotation.coloring.withdrawal import withdraw_colorings
    from annotation.people import accounts
    from tests.qc_data import ADMIN

    db, data = _store(tmp_path)
    path = data / "colorconcept.sqlite"
    twice, reopened, designer = people(db, 3, "designer")
    add_coloring(db, data, designer, "apple", (200, 20, 30))
    backup.backup(db, data, tmp_path / "backup")
    accounts.revoke_annotator(db, twice, ADMIN, "first closure")
    accounts.reopen_annotator(db, twice, ADMIN, "closed by mistake")
    accounts.revoke_annotator(db, twice, ADMIN, "second closure")
    accounts.revoke_annotator(db, reopened, ADMIN, "a closure undone")
    accounts.reopen_annotator(db, reopened, ADMIN, "back after a break")
    withdraw_colorings(db, designer, ADMIN, "first request")
    add_coloring(db, data, designer, "apple", (20, 20, 200))
    withdraw_colorings(db, designer, ADMIN, "second request")
    db.close()

    backup.restore(tmp_path / "backup", path, data)
    conn = storage.read_only(path)
    try:
        rows = conn.execute(
            "select action, object_id, why from audit where action != 'restore_kept_denials' order by id"
        ).fetchall()
    finally:
        conn.close()
    assert rows == [
        ("create_annotators", "designer", ""),
        ("revoke_annotator", str(twice), "second closure"),
        ("withdraw_colorings", str(designer), "first request"),
    ]


def test_a_withdrawal_carried_into_a_backup_of_an_earlier_schema_leaves_its_p_h_to_the_repair(
    tmp_path, monkeypatch
):
    """The restore migrates nothing, and this code's P_H needs this code's schema: the
    colorings are withdrawn at once, and the line names the command that recomputes P_H."""
    from annotation.__main__ import main
    from annotation.coloring.withdrawal import withdraw_colorings
    from storage import human
    from tests.qc_data import ADMIN

    monkeypatch.setattr(storage.schema, "MIGRATIONS", storage.schema.MIGRATIONS[:17])
    db, data = _store(tmp_path)
    leaving, staying = people(db, 2, "designer")
    red = add_coloring(db, data, leaving, "apple", (200, 20, 30))
    green = add_coloring(db, data, staying, "apple", (30, 160, 40))
    backup.backup(db, data, tmp_path / "backup")
    monkeypatch.undo()
    storage.ensure_schema(db)
    withdraw_colorings(db, leaving, ADMIN, "asked by email")
    db.close()
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert (
        "kept from the replaced database and the copies earlier restores kept: 1 coloring(s) withdrawn after the backup stay withdrawn (D0001 (1); "
        "run python -m annotation check-distributions --repair after the next start migrates the database, "
        "to recompute the P_H of their concepts)\n"
    ) in done.stdout
    argv = ["--db", str(data / "colorconcept.sqlite"), "--data-dir", str(data)]
    assert main([*argv, "check-distributions", "--repair"]) == 0  # migrates, then repairs
    db = storage.open_db(data / "colorconcept.sqlite")
    assert {r["id"]: r["status"] for r in db["colorings"].rows} == {red: "withdrawn", green: "submitted"}
    assert human.read(db, human.DESIGNERS)["apple"].coloring_ids == (green,)
    db.close()


def test_a_restore_into_a_database_that_denied_nothing_since_says_nothing_more(tmp_path):
    db, data = _store(tmp_path)
    people(db, 1, "designer")
    backup.backup(db, data, tmp_path / "backup")
    db.close()
    done = _cli(data / "colorconcept.sqlite", data, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0 and "kept from the replaced database" not in done.stdout
    # The restored database is the backup's, byte for byte, when nothing was carried.
    manifest = json.loads((tmp_path / "backup" / backup.MANIFEST).read_text())
    digest = hashlib.sha256((data / "colorconcept.sqlite").read_bytes()).hexdigest()
    assert digest == manifest["database"]["sha256"]


def test_a_database_reached_through_a_link_takes_the_same_lock_and_a_restore_replaces_its_target(tmp_path):
    live, app = _served_beside_a_backup(tmp_path)
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "study.sqlite"
    link.symlink_to(live / "study.sqlite")
    try:
        rows = _rows(live / "study.sqlite")
        done = _cli(link, live / "data", "restore", str(tmp_path / "backup"))
        assert done.returncode == 1 and "stop the app" in done.stderr
        assert (
            _rows(live / "study.sqlite") == rows and not (tmp_path / "links" / "study.sqlite.lock").exists()
        )
    finally:
        app.communicate("")
    done = _cli(link, live / "data", "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    # The link still leads to the database, now the restored one; the kept copy is the real file's.
    assert (
        link.is_symlink()
        and _rows(link)["colorings"]
        == _rows(tmp_path / "source" / "data" / "colorconcept.sqlite")["colorings"]
    )
    assert list(live.glob("study.sqlite.before-restore-*")) and not list(
        link.parent.glob("*.before-restore-*")
    )


def test_a_lost_file_blocks_a_backup_unless_allowed_and_such_a_backup_restores_saying_what_it_lacks(tmp_path):
    db, data = _store(tmp_path)
    designer = people(db, 1, "designer")[0]
    for concept, rgb in (("banana", (240, 200, 20)), ("apple", (200, 30, 30))):
        add_coloring(db, data, designer, concept, rgb)
    lost = db.execute("select image_path from colorings order by id limit 1").fetchone()[0]
    named = {p for row in db.execute("select image_path, mask_path from colorings") for p in row}
    db.close()
    (data / lost).unlink()
    refused = _cli(data / "colorconcept.sqlite", data, "backup", str(tmp_path / "refused"))
    assert refused.returncode == 1 and "backup --allow-missing DIR" in refused.stderr
    # Each sentence starts with a capital: "... backed up. any file can ..." (outside probe 179).
    assert "nothing was backed up. Any file can be copied back from an earlier backup's" in refused.stderr
    assert not (tmp_path / "refused").exists()
    done = _cli(data / "colorconcept.sqlite", data, "backup", "--allow-missing", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    assert (
        f"warning: 1 file(s) the database names were missing from the data folder ({lost!r})" in done.stderr
    )
    manifest = json.loads((tmp_path / "b" / backup.MANIFEST).read_text())
    assert manifest["missing"] == [lost] and lost not in {e["path"] for e in manifest["files"]}
    assert {e["path"] for e in manifest["files"]} == named - {lost}
    # Into a new place: the restore accepts exactly the listed file as absent, and says so.
    elsewhere = tmp_path / "elsewhere"
    done = _cli(elsewhere / "db.sqlite", elsewhere / "data", "restore", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    assert (
        f"warning: 1 file(s) the database names were missing from the data folder ({lost!r}) when"
        in done.stdout
    )
    assert (elsewhere / "data").is_dir() and not (elsewhere / "data" / lost).exists()
    # A file listed as missing twice, or as missing and held, is refused (outside probe 126).
    for listed in ([lost, lost], [lost, next(iter(named - {lost}))]):
        (tmp_path / "b" / backup.MANIFEST).write_text(json.dumps({**manifest, "missing": listed}))
        done = _cli(tmp_path / "t" / "db.sqlite", tmp_path / "t" / "data", "restore", str(tmp_path / "b"))
        assert done.returncode == 1 and "lists a file as missing twice, or as missing and held" in done.stderr
    # A manifest that lists as missing what the app never stores is refused whole.
    manifest["missing"] = ["../colorconcept.sqlite"]
    (tmp_path / "b" / backup.MANIFEST).write_text(json.dumps(manifest))
    done = _cli(tmp_path / "third" / "db.sqlite", tmp_path / "third" / "data", "restore", str(tmp_path / "b"))
    assert done.returncode == 1 and "lists as missing ['../colorconcept.sqlite']" in done.stderr
    assert not (tmp_path / "third").exists()


def test_an_older_backup_restored_before_a_newer_one_brings_back_no_denial_and_hard_links_are_refused(
    tmp_path,
):
    from annotation.errors import AnnotationError
    from annotation.people import accounts

    db, data = _store(tmp_path)
    path = data / "colorconcept.sqlite"
    backup.backup(db, data, tmp_path / "older")
    [(designer, link)] = accounts.create_annotators(db, 1, "designer")
    session = accounts.login_with_invite(db, link)
    backup.backup(db, data, tmp_path / "newer")
    admin = accounts.open_admin_session(db)
    accounts.revoke_annotator(db, designer["id"], accounts.require(db, admin.token, "admin"), "left")
    db.close()
    # The older backup replaces the database holding the closure; the newer one replaces the
    # older's, which never had it: it comes from the copy the first restore kept (outside probe 126).
    assert backup.restore(tmp_path / "older", path, data)["kept"] == []
    kept = backup.restore(tmp_path / "newer", path, data)["kept"]
    assert f"1 account(s) closed after the backup stay closed ({designer['pseudonym']};" in " ".join(kept)
    db = storage.open_db(path)
    try:
        with pytest.raises(AnnotationError):
            accounts.require(db, session.token, "designer")
    finally:
        db.close()
    # A second name of the file: an app started on it would go on with the old file.
    os.link(path, tmp_path / "second-name.sqlite")
    before = _rows(path)
    with pytest.raises(
        backup.BackupError, match=r"has 2 names \(hard links\): a restore replaces this one alone"
    ):
        backup.restore(tmp_path / "newer", path, data)
    assert _rows(path) == before


def _two_studies(tmp_path) -> dict[str, tuple[Path, Path, str]]:
    """Studies ``a`` and ``b``, one coloring each, each data folder claimed by its database
    as an app's start claims it: ``(database file, data folder, instance)`` by name."""
    from storage import ownership
    from storage.settings import setting_once

    stores = {}
    for name in ("a", "b"):
        db, data = _store(tmp_path / name)
        add_coloring(db, data, people(db, 1, "designer")[0], "banana", (240, 200, 20 if name == "a" else 90))
        instance = ownership.instance_name(setting_once(db, ownership.INSTANCE_SECRET, lambda n=name: n * 8))
        ownership.claim(data, data / "colorconcept.sqlite", instance)
        db.close()
        stores[name] = (data / "colorconcept.sqlite", data, instance)
    return stores


def test_a_restore_makes_the_data_folder_the_restored_databases(tmp_path, capsys):
    """A data folder names the database it belongs to (`storage.ownership`, outside probe
    167); a restore of another study's backup over this database makes the folder that
    study's, so the next start takes it (and sets this one's files aside) rather than refuse."""
    from annotation.__main__ import main
    from storage import ownership

    (a_file, a_data, a_instance), (b_file, b_data, b_instance) = _two_studies(tmp_path).values()
    a_db = storage.open_db(a_file)
    try:
        backup.backup(a_db, a_data, tmp_path / "a-backup")
    finally:
        a_db.close()
    assert ownership.foreign_refusal(b_file, b_data) is None
    b_db = storage.open_db(b_file)
    people(b_db, 1, "designer")  # B has two accounts, A one
    b_db.close()
    assert main(["--db", str(b_file), "--data-dir", str(b_data), "restore", str(tmp_path / "a-backup")]) == 0
    # Said as it is (outside probe 210): not "accounts made after the backup", which B's never were.
    out = capsys.readouterr().out
    kept = next(b_data.glob("colorconcept.sqlite.before-restore-*"))
    assert (
        f"note: the backup is of another study (instance {a_instance}) than the database it replaced "
        f"(instance {b_instance}): that study is not carried over; it stays whole in {kept}\n"
    ) in out
    assert "annotators 2 (now 1)" in out and "made after the backup are gone" not in out
    assert "the replaced study's accounts and invite links are gone with it" in out
    # Studies no app has started (no instance yet) are told apart by when their databases were
    # made (outside probe 213: no note, and "made after the backup" again); a backup of the same
    # study, taken before its first start, is the same study.
    (c_db, c_data), (d_db, d_data) = _store(tmp_path / "c"), _store(tmp_path / "d")
    people(d_db, 2, "designer")
    backup.backup(c_db, c_data, tmp_path / "c-backup")
    backup.backup(d_db, d_data, tmp_path / "d-backup")
    made = {
        name: db.execute("select applied from schema_version where version = 1").fetchone()[0]
        for name, db in (("c", c_db), ("d", d_db))
    }
    c_db.close()
    d_db.close()
    d_file = d_data / "colorconcept.sqlite"
    assert main(["--db", str(d_file), "--data-dir", str(d_data), "restore", str(tmp_path / "c-backup")]) == 0
    out = capsys.readouterr().out
    assert (
        f"note: the backup is of another study (its database made {made['c']}) than the database it "
        f"replaced (its database made {made['d']}): that study is not carried over"
    ) in out
    assert "the replaced study's accounts and invite links are gone with it" in out
    assert main(["--db", str(d_file), "--data-dir", str(d_data), "restore", str(tmp_path / "d-backup")]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "made after the backup are gone" not in out  # d over c's: another study
    assert main(["--db", str(d_file), "--data-dir", str(d_data), "restore", str(tmp_path / "d-backup")]) == 0
    assert "note:" not in capsys.readouterr().out  # d over d
    assert ownership.instance_of(b_file) == a_instance != b_instance
    assert ownership.owner(b_data) == {
        "instance": a_instance,
        "database": str(b_file.resolve()),
        "folder": str(b_data.resolve()),
    }
    assert ownership.foreign_refusal(b_file, b_data) is None


def test_a_command_on_another_studys_data_folder_is_refused_and_a_restore_takes_none_of_it(tmp_path, capsys):
    """Outside probe 188: ``backup`` and ``restore`` of database B without --data-dir took the
    default folder, study A's, while A's app served it: the backup held A's files, and the
    restore made the folder B's, so A's app could not start again."""
    from annotation.__main__ import main
    from storage import ownership

    (a_file, a_data, a_instance), (b_file, b_data, b_instance) = _two_studies(tmp_path).values()
    a_owner, b_rows = (a_data / ownership.OWNER_FILE).read_bytes(), _rows(b_file)
    for command in ("backup", "export"):
        assert main(["--db", str(b_file), "--data-dir", str(a_data), command, str(tmp_path / command)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: the data folder {str(a_data)!r} holds the files of another database (instance {a_instance}, "
            f"last started from {str(a_file.resolve())!r}), not of {str(b_file)!r} (instance {b_instance}): "
            f"`{command}` would take that study's files for this database's; give this database's data folder "
            "(--data-dir), or that database (--db); nothing was changed\n"
        )
        assert not (tmp_path / command).exists()
    assert main(["--db", str(b_file), "--data-dir", str(b_data), "backup", str(tmp_path / "b-backup")]) == 0
    for target in (b_file, tmp_path / "new.sqlite"):  # over B, and where there is no database yet
        with pytest.raises(
            backup.BackupError,
            match=rf"^the data folder '{re.escape(str(a_data))}' holds the files of another database \(instance "
            rf"{a_instance}, .*\), neither the database restored over \(.*\) nor the backup's: give the data "
            r"folder of this study \(--data-dir\); nothing was restored$",
        ):
            backup.restore(tmp_path / "b-backup", target, a_data)
    assert (a_data / ownership.OWNER_FILE).read_bytes() == a_owner and _rows(b_file) == b_rows
    assert not (tmp_path / "new.sqlite").exists()
    # Into its own folder, and into a new one, the restore goes on as before.
    backup.restore(tmp_path / "b-backup", b_file, b_data)
    backup.restore(tmp_path / "b-backup", tmp_path / "c.sqlite", tmp_path / "c-data")
    assert ownership.owner(tmp_path / "c-data")["instance"] == b_instance
    # The restored copy shares B's instance; its folder is the copy's all the same (outside
    # probe 196: B's evaluation run wrote there, and the copy's next start set it aside).
    c_file, c_data = tmp_path / "c.sqlite", tmp_path / "c-data"
    assert ownership.foreign_refusal(c_file, c_data) is None
    assert ownership.foreign_refusal(b_file, c_data, "python -m evaluation run", writes=True) == (
        f"the data folder {str(c_data)!r} holds the files of another database (instance {b_instance}, "
        f"last started from {str(c_file.resolve())!r}), a copy of {str(b_file)!r} (instance {b_instance}) "
        "(restored or copied elsewhere): `python -m evaluation run` would write this database's files among "
        "that study's, where that study's app would set them aside as unnamed; give this database's data "
        "folder (--data-dir), or that database (--db); nothing was changed"
    )
    assert ownership.foreign_refusal(b_file, b_data) is None
    # Nor does a restore over B take the copy's folder, or a restore into a new place B's: the
    # copy could not start again (outside probe 200).
    owners = {folder: (folder / ownership.OWNER_FILE).read_bytes() for folder in (b_data, c_data)}
    for target, folder, holder in ((b_file, c_data, c_file), (tmp_path / "d.sqlite", b_data, b_file)):
        with pytest.raises(backup.BackupError) as refused:
            backup.restore(tmp_path / "b-backup", target, folder)
        assert str(refused.value) == (
            f"the data folder {str(folder)!r} holds the files of {str(holder.resolve())!r}, another copy of the "
            f"same study (instance {b_instance}, restored or copied from it), not of {str(target.resolve())!r}: the "
            "restore "
            "would make it this database's folder, and that copy could not start again; give this database's own "
            "data folder (--data-dir); nothing was restored"
        )
    assert {folder: (folder / ownership.OWNER_FILE).read_bytes() for folder in owners} == owners
    assert not (tmp_path / "d.sqlite").exists() and ownership.foreign_refusal(c_file, c_data) is None
    # Moved from where it was restored, the copy's folder is still its own.
    c_file.rename(tmp_path / "c-moved.sqlite")
    assert ownership.foreign_refusal(tmp_path / "c-moved.sqlite", c_data) is None
    # A study copied whole, database and folder: the owner file that came with it names the
    # first folder, so no database of the copy's, and the copy is a study of its own.
    shutil.copytree(b_data, tmp_path / "b-copy")
    assert ownership.foreign_refusal(tmp_path / "b-copy" / "colorconcept.sqlite", tmp_path / "b-copy") is None


def test_a_command_on_a_backups_own_database_is_refused_and_the_backup_stays_restorable(tmp_path, capsys):
    """Outside probe 196: `python -m evaluation score` on a backup's database switched it to
    WAL and left a lock beside it, and the backup could no longer be restored."""
    from annotation.__main__ import main as annotation_main
    from evaluation.__main__ import main as evaluation_main

    db, data = _store(tmp_path)
    backup.backup(db, data, tmp_path / "bk")
    db.close()
    before = _files(tmp_path / "bk")
    inside = tmp_path / "bk" / "colorconcept.sqlite"
    expected = (
        f"--db {str(inside)!r} is the database of a backup (its folder's manifest.json lists it), and opening "
        "it would change its bytes, so that the backup could not be restored: restore it (`python -m "
        "annotation restore FOLDER --db NEW.sqlite --data-dir NEW_DATA`), or copy it out of the backup's "
        "folder first"
    )
    assert evaluation_main(["score", "--db", str(inside), "--data-dir", str(tmp_path / "bk" / "files")]) == 2
    assert capsys.readouterr().err == f"python -m evaluation score: error: {expected}\n"
    assert (
        annotation_main(["--db", str(inside), "--data-dir", str(data), "export", str(tmp_path / "ex")]) == 2
    )
    assert capsys.readouterr().err == f"error: {expected}\n"
    assert _files(tmp_path / "bk") == before
    backup.restore(tmp_path / "bk", tmp_path / "new.sqlite", tmp_path / "new-data")
