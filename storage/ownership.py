"""Which database a data folder belongs to.

The database names the data folder's files (content-hash names, `storage.data_folder`), so
a data folder serves one database. A start with another database on it (a mistyped
``--db``, a forgotten one that fell back to the default) found every file of the real
study unnamed and moved them all into ``orphans/`` while that study's app went on serving
(outside probe 167). Now the folder's `OWNER_FILE` names the instance of the database
that uses it (`instance_name`, a digest of the database's instance secret, the same for
every copy and backup of it), where that database was last started from and the folder the
file was written for (one copied with a whole study names its first folder). The app's start
writes it and a restore rewrites it (`claim`); a start whose database is not the owner is
refused before anything is written (`foreign_refusal`), and so is a command of
``python -m annotation`` or ``python -m evaluation`` that reads or writes its files. A
folder from before the file (or with none) is the database's when the database names one
of its stored files, or when it holds none.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

from storage.data_folder import kept_copies, managed_files, referenced_in_file
from storage.db import read_only

OWNER_FILE = ".colorconcept-database.json"
INSTANCE_SECRET = "browser_state_secret"
"""The settings key of a database's instance secret (its name from when it keyed the
browser state); never sent to the page."""


def instance_name(secret: str) -> str:
    """A short public name of the database whose instance secret is `secret`: 10 hex digits."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:10]


def instance_of(db_file: str | Path) -> str | None:
    """`instance_name` of the database file `db_file`, read without writing; None when there
    is no such file yet or it has no instance secret (a database no app has started)."""
    path = Path(db_file)
    if not path.is_file():
        return None
    conn = read_only(path)
    try:
        row = conn.execute("select value from settings where key = ?", [INSTANCE_SECRET]).fetchone()
    except sqlite3.OperationalError:  # no settings table: a database no app has prepared
        return None
    finally:
        conn.close()
    return None if row is None else instance_name(row[0])


def owner(data_dir: str | Path) -> dict | None:
    """What `OWNER_FILE` of `data_dir` says (``instance``, ``database``, and ``folder`` in one
    written since the folder was recorded); None without one.

    Raises
    ------
    ValueError
        If the file is there but is not what `claim` writes.
    """
    path = Path(data_dir) / OWNER_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, dict) or not all(
        isinstance(found.get(k), str) for k in ("instance", "database")
    ):
        raise ValueError(
            f"{str(path)!r}, which says which database the data folder belongs to, cannot be read; "
            "remove it if this database is the folder's, and start again"
        )
    return found


def foreign_refusal(
    db_file: str | Path, data_dir: str | Path, command: str = "", *, writes: bool = False
) -> str | None:
    """Why a start of the database `db_file` (or `command`, e.g. ``backup``, on it; one that
    `writes` files there, e.g. ``python -m evaluation run``) may not use the data folder
    `data_dir`: the folder belongs to another database; None when it may. Reads only."""
    root = Path(data_dir)
    if not root.is_dir():
        return None
    try:
        found = owner(root)
    except ValueError as error:
        return str(error)
    mine = instance_of(db_file)
    kind = (
        "a new database"
        if not Path(db_file).is_file()
        else "a database no app has started"
        if mine is None
        else f"instance {mine}"
    )
    this = f"{str(db_file)!r} ({kind})"
    # What each use would do there: a start sets the other study's files aside; a command
    # given the wrong folder (no --data-dir: the default) read or replaced them as this
    # database's (outside probe 188); one that writes left files the other study's next
    # start set aside as unnamed (outside probe 189).
    does = "start" if not command else "writes" if writes else "reads"
    harm = {
        "start": "this start would set every file of that study aside as unnamed",
        "reads": f"`{command}` would take that study's files for this database's",
        "writes": f"`{command}` would write this database's files among that study's, "
        "where that study's app would set them aside as unnamed",
    }[does]
    fix = (
        "start with that database (--db), or give this one a data folder of its own (--data-dir)"
        if does == "start"
        else "give this database's data folder (--data-dir), or that database (--db)"
    ) + "; nothing was changed"
    if found is not None:
        if found["instance"] != mine:
            return f"{_held_by(root, found)}, not of {this}: {harm}; {fix}"
        if _another_copy(found, db_file, root):
            return f"{_held_by(root, found)}, a copy of {this} (restored or copied elsewhere): {harm}; {fix}"
        return None
    stored = [path.relative_to(root).as_posix() for path in managed_files(root, temporary=False)]
    if not stored:
        return None
    # A database made by the libraries has no instance secret yet, but names its files; or a
    # database kept beside it does (a run deleted while a way back still names its files).
    if Path(db_file).is_file() and any(
        _names_any(copy, stored) for copy in (Path(db_file), *kept_copies(db_file))
    ):
        return None
    return (
        f"the data folder {str(root)!r} holds {len(stored):,} stored files and {this} names none of "
        f"them: it is another database's folder, and {harm}; {fix} "
        "(if that database is gone for good, move the folder's files away first)"
    )


def _names_any(db_file: Path, stored: list[str]) -> bool:
    """Whether the database file `db_file` names one of the files `stored` (False when it
    cannot be read as a database)."""
    try:
        return not referenced_in_file(db_file).isdisjoint(stored)
    except sqlite3.DatabaseError:
        return False


def claimed_by_another(data_dir: str | Path, *db_files: str | Path) -> str | None:
    """Why the data folder `data_dir` is the folder of none of the databases `db_files`: its
    `OWNER_FILE` names another one (a restore over `db_files[0]` of a backup of `db_files[1]`
    may use the folder of either); None when it names one of them or is not there.

    Raises
    ------
    ValueError
        If `OWNER_FILE` cannot be read (`owner`).
    """
    found = owner(data_dir) if Path(data_dir).is_dir() else None
    if found is None or found["instance"] in {instance_of(f) for f in db_files}:
        return None
    return _held_by(data_dir, found)


def claimed_by_a_copy(data_dir: str | Path, db_file: str | Path) -> str | None:
    """Why the data folder `data_dir` is not `db_file`'s though its `OWNER_FILE` names the
    same instance: it is the folder of a copy (`_another_copy`; `db_file` need not be there
    yet); None when it is not. A restore over the original, given its restored copy's folder,
    made the folder the original's, and the copy could not start again (outside probe 200).

    Raises
    ------
    ValueError
        If `OWNER_FILE` cannot be read (`owner`).
    """
    found = owner(data_dir) if Path(data_dir).is_dir() else None
    if found is None or not _another_copy(found, db_file, Path(data_dir)):
        return None
    return (
        f"the data folder {str(data_dir)!r} holds the files of {found['database']!r}, another copy of the same "
        f"study (instance {found['instance']}, restored or copied from it), not of {str(db_file)!r}"
    )


def _another_copy(found: dict, db_file: str | Path, root: Path) -> bool:
    """Whether the database that `OWNER_FILE` of `root` names (`found`) is a file other than
    `db_file` that is still there with the same instance: a backup restored elsewhere shares
    the instance, and a command of the original on the copy's folder wrote files there that
    the copy's next start set aside (outside probe 196). A database moved away from the path
    recorded is still the folder's; an owner file that names another folder came with a copy
    of the folder (a study copied whole), and names no database of this one. A `db_file` not
    there yet (a restore into a new place) is not the recorded file."""
    if found.get("folder") != os.path.realpath(root):
        return False
    recorded = Path(found["database"])
    if not recorded.is_file():  # the recorded file is gone: moved
        return False
    # `db_file` not there yet (a restore into a new place): the recorded one is another file
    same = Path(db_file).exists() and os.path.samefile(recorded, db_file)
    return not same and instance_of(recorded) == found["instance"]


def _held_by(data_dir: str | Path, found: dict) -> str:
    """That `data_dir` holds the files of the database its `OWNER_FILE` names (`found`)."""
    return (
        f"the data folder {str(data_dir)!r} holds the files of another database (instance "
        f"{found['instance']}, last started from {found['database']!r})"
    )


def claim(data_dir: str | Path, db_file: str | Path, instance: str) -> None:
    """Write `OWNER_FILE` of `data_dir`: it belongs to the database `db_file` of `instance`
    (written to a temporary name and renamed into place; unchanged if it says so already)."""
    root = Path(data_dir)
    text = (
        json.dumps(
            {"instance": instance, "database": os.path.realpath(db_file), "folder": os.path.realpath(root)},
            indent=1,
        )
        + "\n"
    )
    path = root / OWNER_FILE
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    root.mkdir(parents=True, exist_ok=True)
    temporary = root / f".{OWNER_FILE}.{os.getpid()}.tmp"
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
