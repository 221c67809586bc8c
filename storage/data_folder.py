"""What a data folder holds, and which of its files a database names.

A data folder serves one database: both libraries store files in it under content-hash
names (`storage.files`), and the rows of the database name them by relative path. These
are the two lists compared by the start-up sweep (`annotation.integrity`) and by the check
that a folder is the database's own (`storage.ownership`).

Which files count (choice; the paper is silent): files whose name starts with a sha256 hex
digest (``images/ab/<sha>.png``, ``runs/r/pixels/<sha>-<mask>.npz``), and temporary names
(``.tmp-*`` from older versions, ``.<name>.*.tmp`` from `storage.files.write_atomic`),
outside `SKIPPED_FOLDERS`. A database names a file when any column named ``path`` or ending
in ``_path`` in any of its tables holds the file's relative path, so new tables that follow
that naming are covered without a change here.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import sqlite_utils

from storage.db import db_path, read_only

QUARANTINE = "orphans"
# Top-level folders never swept: the quarantine itself, export archives (named by no row),
# locally built models (their files are named by their library, not by us) and the neutral
# copies of model images that participants' trials show (`annotation.files.neutral_copy`).
SKIPPED_FOLDERS = (QUARANTINE, "exports", "models", "trials")

# The copies kept beside the database (`annotation.backup._swap_in`,
# `storage.schema._keep_before_upgrade`), and the companions SQLite may leave beside one.
_KEPT_KINDS = (".before-restore-", ".before-schema-")
_COMPANIONS = ("-wal", "-shm", "-journal")


def kept_copies(path: str | Path) -> list[Path]:
    """The databases kept beside the database file at `path`: ``<name>.before-restore-*``
    and ``<name>.before-schema-*`` in its folder, less their ``-wal``, ``-shm`` and
    ``-journal`` files; sorted. A copy still being written (``.<name>.before-restore-*``)
    does not match.
    """
    path = Path(path)
    prefixes = tuple(f"{path.name}{kind}" for kind in _KEPT_KINDS)
    try:
        entries = list(path.parent.iterdir())
    except FileNotFoundError:
        return []
    return sorted(
        entry
        for entry in entries
        if entry.name.startswith(prefixes) and not entry.name.endswith(_COMPANIONS) and entry.is_file()
    )


_FILE_COLUMN = re.compile(r"(^|_)path$")
_HASH_NAME = re.compile(r"^[0-9a-f]{64}")
_TEMP_NAME = re.compile(r"^\.tmp-|^\..+\.tmp$")


def referenced_paths(db: sqlite_utils.Database) -> set[str]:
    """Every relative file path named by a ``path`` / ``*_path`` column of any table.

    Returns
    -------
    set of str
        POSIX paths relative to the data folder, as stored.
    """
    paths: set[str] = set()
    for table in db.tables:
        for column in table.columns:
            if _FILE_COLUMN.search(column.name):
                rows = db.execute(
                    f'select distinct "{column.name}" from "{table.name}" where "{column.name}" is not null'
                )
                paths.update(value for (value,) in rows if isinstance(value, str))
    return paths


def referenced_in_file(path: Path) -> set[str]:
    """`referenced_paths` of the database file at `path`, opened read-only.

    Raises
    ------
    sqlite3.DatabaseError
        If it cannot be opened or read as a database.
    """
    conn = read_only(path)
    try:
        return referenced_paths(sqlite_utils.Database(conn, execute_plugins=False))
    finally:
        conn.close()


class UnreadableCopy(Exception):
    """A database kept beside the live one (`kept_copies`) that cannot be read: it might
    name any file, so no file may be treated as unnamed."""

    def __init__(self, path: Path, error: Exception):
        super().__init__(f"{path} cannot be read as a database ({error})")
        self.path, self.error = path, error


def named_by_any_copy(db: sqlite_utils.Database) -> set[str]:
    """`referenced_paths` of `db` and of every database kept beside its file
    (`kept_copies`, read-only; none for a database in memory): the files a way back still needs.

    Raises
    ------
    UnreadableCopy
        If a kept copy cannot be read as a database.
    """
    named = referenced_paths(db)
    live = db_path(db)
    for copy in kept_copies(live) if live else []:
        try:
            named |= referenced_in_file(copy)
        except sqlite3.DatabaseError as error:
            raise UnreadableCopy(copy, error) from None
    return named


def managed_files(root: Path, *, temporary: bool = True) -> list[Path]:
    """The content-hash files under the data folder `root` outside `SKIPPED_FOLDERS`, and
    the temporary ones unless `temporary` is False (unsorted)."""
    found = []
    for folder, subfolders, names in os.walk(root):
        if Path(folder) == root:
            subfolders[:] = [s for s in subfolders if s not in SKIPPED_FOLDERS]
        found.extend(
            Path(folder) / name
            for name in names
            if _HASH_NAME.match(name) or (temporary and _TEMP_NAME.match(name))
        )
    return found
