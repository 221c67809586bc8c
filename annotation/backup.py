"""Backup and restore: a consistent copy of the database and every file it names.

A backup folder holds::

    colorconcept.sqlite   the database, copied with ``VACUUM INTO`` (one consistent
                          snapshot, taken while the app keeps serving: writers are not
                          blocked, and the copy holds exactly the transactions committed
                          before it started)
    files/<path>          every file a row of that snapshot names (columns ``path`` /
                          ``*_path``, as the export finds them), under its data-folder path
    manifest.json         schema version, time, and the sha256 and size of the database
                          copy and of every file

`restore` checks every hash of the manifest before it replaces anything; a backup that
fails a check changes nothing. Restore into a stopped app: the database file is replaced
(the previous one is kept beside it as ``<name>.before-restore-<time>``), and files are
copied into the data folder where they are missing (they are content-addressed, so an
existing file of the same name and hash is the same file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from annotation.errors import InvalidInput
from annotation.export import file_columns
from annotation.files import resolve
from storage import iso

DB_NAME = "colorconcept.sqlite"
MANIFEST = "manifest.json"


class BackupError(InvalidInput):
    """A backup cannot be made or restored; the message names the file and the problem."""


@dataclass(frozen=True)
class BackupSummary:
    """What a backup holds: its folder, schema version, files and bytes."""

    folder: Path
    schema_version: int
    files: int
    bytes: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _named_files(snapshot: Path) -> list[str]:
    """Every data-folder path that a row of the database at `snapshot` names, sorted."""
    conn = sqlite3.connect(snapshot)
    try:
        found = set()
        tables = [
            r[0]
            for r in conn.execute(
                "select name from sqlite_master where type = 'table' and name not like 'sqlite_%'"
            )
        ]
        for table in tables:
            columns = [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
            for column, _ in file_columns(columns):
                found.update(
                    r[0]
                    for r in conn.execute(
                        f'select distinct "{column}" from "{table}" where "{column}" is not null'
                    )
                )
        return sorted(found)
    finally:
        conn.close()


def backup(db: sqlite_utils.Database, data_dir: str | Path, folder: str | Path) -> BackupSummary:
    """Copy the database and the files it names into `folder`, with a manifest of hashes.

    Parameters
    ----------
    db : sqlite_utils.Database
        An open connection to the database to back up (others may keep writing).
    data_dir : str or Path
        The data folder the rows' paths are relative to.
    folder : str or Path
        A new or empty folder; the backup is assembled beside it and renamed into place,
        so `folder` never holds half a backup.

    Raises
    ------
    BackupError
        If `folder` holds files, or a file the snapshot names is missing.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BackupError(f"backup folder must be new or empty, got {str(folder)!r}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-partial-"))
    try:
        snapshot = staging / DB_NAME
        db.execute("VACUUM INTO ?", [str(snapshot)])
        entries, total = [], 0
        for relative in _named_files(snapshot):
            source = resolve(data_dir, relative)
            if not source.is_file():
                raise BackupError(
                    f"the database names {relative!r}, which is missing from "
                    f"the data folder; nothing was backed up"
                )
            target = staging / "files" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            size = target.stat().st_size
            entries.append({"path": relative, "sha256": _sha256(target), "bytes": size})
            total += size
        conn = sqlite3.connect(snapshot)
        version = conn.execute("select coalesce(max(version), 0) from schema_version").fetchone()[0]
        conn.close()
        manifest = {
            "created": iso(),
            "schema_version": version,
            "database": {"path": DB_NAME, "sha256": _sha256(snapshot), "bytes": snapshot.stat().st_size},
            "files": entries,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        if folder.exists():
            folder.rmdir()
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return BackupSummary(folder, version, len(entries), total)


def verify(folder: str | Path) -> dict:
    """Check every hash and size of the backup in `folder`; its manifest if all hold.

    Raises
    ------
    BackupError
        Naming the first file that is missing or whose content differs from the manifest.
    """
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise BackupError(f"{str(folder)!r} holds no readable {MANIFEST}: {error}") from None
    entries = [(manifest["database"]["path"], manifest["database"])] + [
        (f"files/{e['path']}", e) for e in manifest["files"]
    ]
    for name, entry in entries:
        path = folder / name
        if ".." in Path(name).parts or not path.is_file():
            raise BackupError(f"backup file {name!r} is missing; nothing was restored")
        if path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
            raise BackupError(
                f"backup file {name!r} does not match its sha256 in the manifest; nothing was restored"
            )
    return manifest


def restore(folder: str | Path, db_path: str | Path, data_dir: str | Path) -> dict:
    """Restore the backup in `folder` as the database `db_path` and its files.

    Every hash is checked first (`verify`); only then are the files copied into
    `data_dir` (those missing) and the database file replaced. Run it with the app stopped.

    Returns
    -------
    dict
        The manifest, plus ``previous`` (where the replaced database was kept, or None)
        and ``copied`` (files written into the data folder).
    """
    folder, db_path, data_dir = Path(folder), Path(db_path), Path(data_dir)
    manifest = verify(folder)
    copied = 0
    for entry in manifest["files"]:
        target = resolve(data_dir, entry["path"])
        if target.is_file() and _sha256(target) == entry["sha256"]:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.restoring")
        shutil.copyfile(folder / "files" / entry["path"], temp)
        os.replace(temp, target)
        copied += 1
    db_path.parent.mkdir(parents=True, exist_ok=True)
    temp = db_path.with_name(f".{db_path.name}.restoring")
    shutil.copyfile(folder / manifest["database"]["path"], temp)
    previous = None
    if db_path.exists():
        previous = db_path.with_name(
            f"{db_path.name}.before-restore-{iso().replace(':', '').replace('-', '')[:15]}"
        )
        os.replace(db_path, previous)
    for journal in ("-wal", "-shm"):
        Path(f"{db_path}{journal}").unlink(missing_ok=True)
    os.replace(temp, db_path)
    return {**manifest, "previous": previous, "copied": copied}


def backup_archive(db: sqlite_utils.Database, data_dir: str | Path, archive: str | Path) -> Path:
    """Write a backup as one zip file `archive` (for the Admin tab's download); returns it."""
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive.parent) as temp:
        summary = backup(db, data_dir, Path(temp) / "backup")
        built = Path(temp) / "archive.zip"
        with zipfile.ZipFile(built, "w", compression=zipfile.ZIP_STORED) as out:
            for path in sorted(summary.folder.rglob("*")):
                if path.is_file():
                    out.write(path, path.relative_to(summary.folder).as_posix())
        os.replace(built, archive)
    return archive
