"""What stops the app or a command before it works says so in one line: a database written
by newer code (every entry point; nothing changed), an admin password sign-in could not take."""

from __future__ import annotations

import io

import pytest

import storage
from annotation.__main__ import main as annotation_main
from annotation.people.passwords import ENV_PASSWORD
from evaluation.__main__ import main as evaluation_main
from storage.schema import MIGRATIONS
from tests.app_server import app_script, free_port
from tests.disks import read_only, tmpfs

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
