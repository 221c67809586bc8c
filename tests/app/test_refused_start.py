"""What stops the app or a command before it works says so in one line: a database written
by newer code (every entry point; nothing changed), an admin password sign-in could not take."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import storage
from annotation.__main__ import main as annotation_main
from annotation.people.passwords import ENV_PASSWORD
from annotation.sketches.importing import load_manifest
from bench.app_process import ROOT, AppProcess
from evaluation.__main__ import main as evaluation_main
from storage.schema import MIGRATIONS
from tests.app_server import app_script, free_port
from tests.disks import fill, read_only, tmpfs

NEWER = f"database schema version 999 is newer than this code's {len(MIGRATIONS)}; update the code before opening it"


@pytest.fixture
def newer(tmp_path):
    """A database whose schema_version records a migration this code does not know; its bytes."""
    path = tmp_path / "db.sqlite"
    db = storage.open_db(path)
    storage.ensure_schema(db)
    with storage.transaction(db):
        db["schema_version"].insert({"version": 999, "name": "from the future", "applied": "2030-01-01"})
    db.execute("pragma wal_checkpoint(TRUNCATE)")
    db.close()
    (tmp_path / "data").mkdir()  # the commands refuse a data folder that is not there first
    return path, path.read_bytes()


@pytest.mark.parametrize(
    "command",
    [["export", "OUT"], ["check-distributions"], ["set-admin-password", "--stdin"], ["backup", "OUT"]],
)
def test_the_annotation_commands_refuse_it_in_one_line(newer, tmp_path, command, capsys, monkeypatch):
    path, before = newer
    monkeypatch.setattr("sys.stdin", io.StringIO("a new password\n"))
    argv = ["--db", str(path), "--data-dir", str(tmp_path / "data"), *command]
    assert annotation_main([str(tmp_path / "out") if a == "OUT" else a for a in argv]) == 1
    assert capsys.readouterr().err == f"error: {NEWER}\n"
    assert path.read_bytes() == before
    assert not (tmp_path / "out").exists()


def test_the_evaluation_commands_refuse_it_in_one_line(newer, tmp_path, capsys):
    path, before = newer
    assert evaluation_main(["score", "--db", str(path), "--data-dir", str(tmp_path / "data")]) == 2
    assert capsys.readouterr().err == f"python -m evaluation score: error: {NEWER}\n"
    assert path.read_bytes() == before


def test_the_refusal_names_the_copy_a_newer_codes_upgrade_kept_beside_it(newer, tmp_path, capsys):
    """The way back after an upgrade, where the earlier code is started again (outsider 82:
    only the newer code's start said where the copy was)."""
    path, before = newer
    older = tmp_path / "db.sqlite.before-schema-999-20261202T053000Z"
    older.write_bytes(b"")
    argv = ["--db", str(path), "--data-dir", str(tmp_path / "data"), "check-distributions"]
    assert annotation_main(argv) == 1
    assert capsys.readouterr().err == (
        f"error: {NEWER}, or go back to the database as it was before that upgrade, kept as "
        f"{older.name} beside it (README, Upgrading: what was stored since is not in it)\n"
    )
    assert path.read_bytes() == before


def test_the_app_refuses_to_start_on_it(newer, tmp_path):
    path, before = newer
    with pytest.raises(SystemExit) as raised:
        app_script().main(
            ["--db", str(path), "--data-dir", str(tmp_path / "data"), "--port", str(free_port())]
        )
    assert raised.value.code == f"Refusing to start: {NEWER}."
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "password, problem", [("abc", "at least 8 characters, got 3"), ("x" * 1001, "at most 1000")]
)
def test_the_app_refuses_an_admin_password_from_the_environment_that_sign_in_could_not_take(
    tmp_path, monkeypatch, password, problem
):
    monkeypatch.setenv(ENV_PASSWORD, password)
    with pytest.raises(SystemExit) as raised:
        app_script().main(
            [
                "--db",
                str(tmp_path / "db.sqlite"),
                "--data-dir",
                str(tmp_path / "data"),
                "--port",
                str(free_port()),
            ]
        )
    assert raised.value.code.startswith("Refusing to start: the admin password ")
    assert raised.value.code.endswith(f" (from {ENV_PASSWORD}).") and problem in raised.value.code


def test_the_app_refuses_a_data_folder_it_cannot_write_before_making_the_database(tmp_path):
    """A read-only data folder beside a writable database ended the start in a traceback from
    the sketch copy, leaving a database half set up (outside probe 89)."""
    with tmpfs(tmp_path / "disk", "4m") as disk:
        (disk / "data").mkdir()
        with read_only(disk), pytest.raises(SystemExit) as raised:
            app_script().main(
                [
                    "--db",
                    str(tmp_path / "db.sqlite"),
                    "--data-dir",
                    str(disk / "data"),
                    "--port",
                    str(free_port()),
                ]
            )
    assert raised.value.code == (
        f"Refusing to start: nothing can be written in the data folder {str(disk / 'data')!r} (Read-only file "
        "system); give --data-dir a folder this user may write in (nothing was written)."
    )
    assert not (tmp_path / "db.sqlite").exists()


def test_a_data_folder_that_is_or_lies_under_a_plain_file_is_named_as_such(tmp_path):
    """It read "(its nearest existing folder '…/file') is a file, not a folder" (outside probe 94)."""
    plain = tmp_path / "plain"
    plain.write_text("x")
    for data_dir, why in (
        (plain, "is a plain file, not a folder"),
        (plain / "data", f"lies under the plain file {str(plain)!r}"),
    ):
        with pytest.raises(SystemExit) as raised:
            app_script().main(
                ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(data_dir), "--port", str(free_port())]
            )
        assert (
            raised.value.code
            == f"Refusing to start: the data folder {str(data_dir)!r} {why}; give --data-dir a folder."
        )
    assert not (tmp_path / "db.sqlite").exists()


def _folder(tmp_path):
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs", "is a folder; give the path of a database file in it"


def _image(tmp_path):
    (tmp_path / "runs.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return tmp_path / "runs.png", "is not an SQLite database"


def _app(argv, capsys):
    with pytest.raises(SystemExit) as raised:
        app_script().main([*argv, "--port", str(free_port())])
    return f"{raised.value.code}\n"


def _annotation(argv, capsys):
    assert annotation_main([*argv, "set-admin-password", "--stdin"]) == 2
    return capsys.readouterr().err


def _evaluation(argv, capsys):
    assert evaluation_main(["score", *argv]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("made", [_folder, _image])
@pytest.mark.parametrize(
    "entry, says",
    [
        (_app, "Refusing to start: {}."),
        (_annotation, "error: {}"),
        (_evaluation, "python -m evaluation score: error: {}"),
    ],
)
def test_a_database_path_that_is_a_folder_or_no_database_is_named_as_such(
    tmp_path, monkeypatch, capsys, made, entry, says
):
    """Every entry point asks `storage.db_path_refusal` before it writes: the app said to chmod
    a folder and that the disk might be full, and left a lock file beside it (outside probe
    104); ``set-admin-password`` on a folder was unchecked."""
    monkeypatch.setattr("sys.stdin", io.StringIO("a new password\n"))
    path, why = made(tmp_path)
    argv = ["--db", str(path), "--data-dir", str(tmp_path / "data")]
    assert entry(argv, capsys) == says.format(f"--db {str(path)!r} {why}") + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def _start_refused(db_path: Path, data_dir: Path) -> subprocess.CompletedProcess:
    """``python app.py`` on `db_path` and `data_dir`, run until it exits (a refused start)."""
    return subprocess.run(
        [
            sys.executable,
            "app.py",
            "--db",
            str(db_path),
            "--data-dir",
            str(data_dir),
            "--port",
            str(free_port()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **START_ENV},
    )


START_ENV = {
    "COLORCONCEPT_ADMIN_PASSWORD": "a-long-enough-password-1",
    "COLORCONCEPT_WORKERS": "0",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_OFFLINE": "1",
}
LEGACY = Path(__file__).resolve().parents[1] / "legacy" / "legacy_v3"
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC WARNING \S+: .*")


@pytest.mark.parametrize("upgrade", [False, True], ids=["new database", "upgrade from schema 3"])
def test_a_start_on_a_nearly_full_disk_is_refused_in_one_line_and_the_next_start_with_room_carries_on(
    tmp_path, upgrade
):
    """A start on a disk with ~900 kB free ended in a traceback from the shipped sketches'
    copy, after an upgrade too, its database migrated without a word (an outside check). Now
    one line says the disk is full where, what stays (the migration and its kept copy) and
    what to do; nothing half-written is left, and the next start with room has every sketch."""
    with tmpfs(tmp_path / "disk", "24m") as disk:
        if upgrade:
            data = disk / "legacy"
            shutil.copytree(LEGACY, data)
            db_path = data / "colorconcept.sqlite"
        else:
            data, db_path = disk / "fresh" / "data", disk / "fresh" / "db.sqlite"
        filler = fill(disk, leave=900 * 1024)
        refused = _start_refused(db_path, data)
        *logged, said = refused.stderr.splitlines()
        assert refused.returncode == 1 and all(LOG_LINE.fullmatch(line) for line in logged), refused.stderr
        stays = "what was stored stays"
        if upgrade:
            (kept,) = data.glob(f"colorconcept.sqlite.before-schema-{len(MIGRATIONS)}-*")
            stays += (
                f", the database's migration from schema 3 to {len(MIGRATIONS)} included (the database as it "
                f"was before is kept in {str(kept)!r})"
            )
            with contextlib.closing(storage.open_db(db_path)) as db:
                assert storage.schema_version(db) == len(MIGRATIONS)
        where = {  # the shipped sketches' files fill it first here, else the database does
            f"No space left on device, writing in the data folder {str(data)!r}",
            f"database or disk is full, in the database {str(db_path)!r}",
        }
        assert said in {
            f"Refusing to start: a disk it writes to is full ({w}); {stays}: free some space beside the database "
            "and the data folder, then start again; the next start carries on where this one stopped."
            for w in where
        }, refused.stderr
        assert list(data.rglob(".*.tmp")) == []  # no file half-written
        filler.unlink()
        with AppProcess(db_path, data, env=START_ENV) as app:
            assert httpx.get(f"{app.url}healthz", timeout=60).text == "ready"
        with contextlib.closing(storage.open_db(db_path)) as db:
            stored = [row["path"] for row in db["sketches"].rows_where("source = 'shipped'")]
        assert len(stored) == len(load_manifest()) and all((data / path).is_file() for path in stored)


def test_a_start_the_database_stays_locked_for_is_refused_naming_the_lock_not_the_disk(tmp_path, monkeypatch):
    """Another process's long write held the database past the busy timeout: the start said
    the database "could not be opened or written" and to free space if the disk was full."""
    db_path = tmp_path / "db.sqlite"
    with contextlib.closing(storage.open_db(db_path)) as db:
        storage.ensure_schema(db)
    monkeypatch.setattr(storage.db, "BUSY_TIMEOUT_MS", 100)
    holder = sqlite3.connect(db_path)
    holder.execute("begin immediate")  # another process's long write
    try:
        with pytest.raises(SystemExit) as raised:
            app_script().main(
                ["--db", str(db_path), "--data-dir", str(tmp_path / "data"), "--port", str(free_port())]
            )
    finally:
        holder.rollback()
        holder.close()
    assert raised.value.code == (
        "Refusing to start: the database stayed locked by another process (database is locked, in the "
        f"database {str(db_path)!r}); what was stored stays: let the other writer (a backup, a restore, "
        "another run) finish, then start again; the next start carries on where this one stopped."
    )


@pytest.mark.parametrize("text", ["99999", "65536", "-5", "٣", "80.5"])
def test_a_port_out_of_range_is_refused_naming_the_flag(text, capsys):
    """--port 99999 ended in an OverflowError traceback (outside probe 167)."""
    with pytest.raises(SystemExit) as raised:
        app_script().parse_args(["--port", text])
    assert raised.value.code == 2
    assert f"argument --port: must be a whole number from 0 to 65535, got {text!r}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["COLORCONCEPT_SUBMIT_CONCURRENCY", "COLORCONCEPT_MAX_SUBMISSIONS_PER_MINUTE"]
)
@pytest.mark.parametrize("text", ["x", "0", "1.5", "٣"])
def test_a_bad_number_in_the_environment_is_refused_naming_the_variable(name, text, monkeypatch):
    """They said "invalid literal for int()" or named the field (outside probe 167)."""
    from app.config import AppConfig

    monkeypatch.setenv(name, text)
    with pytest.raises(ValueError) as raised:
        AppConfig.from_env()
    assert str(raised.value) == f"${name} must be a whole number >= 1, got {text!r}"


def test_a_host_name_that_does_not_resolve_is_said_as_such():
    """Every failure to listen asked "is another app on it?" (outside probe 167)."""
    with pytest.raises(SystemExit) as raised:
        app_script()._check_port("no.such.host.invalid", free_port())
    assert re.fullmatch(
        r"Could not start on no\.such\.host\.invalid:\d+: .+ \(no such host name: --host must be an address "
        r"or name of this machine, e\.g\. 127\.0\.0\.1 or 0\.0\.0\.0\)",
        str(raised.value.code),
    ), raised.value.code
