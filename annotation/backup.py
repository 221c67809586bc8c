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

`restore` refuses while anything serves or writes the database: the app and the
long-running evaluation commands hold a shared lock on ``<database>.lock`` for their
life, and restore takes it alone without waiting (`storage.serving`). It checks every
hash of the manifest, and that the database is this app's at a schema version this code
knows (its tables, indexes, triggers and views exactly those of that version: deny by
default), before it replaces anything; a backup that fails a check changes nothing. Files
are copied into the data folder where they are missing (they are content-addressed, so an
existing file of the same name and hash is the same file); one there with other bytes
refuses the restore before anything is copied: a file of the data folder is never replaced. The
previous database is kept beside it as ``<name>.before-restore-<time>``, its ``-wal``
checkpointed into it first, so a transaction committed before an unclean stop is in the
kept copy; the restored database then takes its place in one rename, so the database path
never lies empty, even for a restore killed half-way (`_swap_in`). The restored database
is checked after it is in place: its sha256 against the manifest and SQLite's
``integrity_check``.

A backup or export that cannot be written (a full disk) raises `WriteFailed`, one line
naming the folder, and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import sqlite_utils

from annotation.denials import carry_denials
from annotation.errors import InvalidInput, shown
from annotation.export import (
    archive_workspace,
    file_columns,
    reported_write_errors,
    staged_folder,
    write_refusal,
)
from annotation.files import resolve
from storage import create_private, file_stamp, iso, ownership, read_only, read_only_uri, serving, unused_path
from storage import db_path as database_path
from storage.db import BACKUP_MANIFEST
from storage.files import leaves_archive
from storage.schema import MIGRATIONS, schema_shape, shape_at, tables_at

DB_NAME = "colorconcept.sqlite"
MANIFEST = BACKUP_MANIFEST
RESTORED_KINDS = {"colorings": (".png",), "sketches": (".png",), "runs": (".png", ".npz")}
"""The folders of the data folder a restore writes into, and the kinds of file the app
stores in each (what `app.guard.DATA_RULES` serves there); a backup naming any other file
is refused whole."""
KEPT_SUFFIX = "before-restore"
"""What the name of a database a restore replaced adds to it (``<name>.before-restore-<time>``)."""
_SAFE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]*")


class BackupError(InvalidInput):
    """A backup cannot be made or restored; the message names the file and the problem."""


@dataclass(frozen=True)
class BackupSummary:
    """What a backup holds: its folder, schema version, files and bytes."""

    folder: Path
    schema_version: int
    files: int
    bytes: int
    missing: tuple[str, ...] = ()
    """Files the database names that the data folder lacked (``allow_missing``), sorted."""


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


def backup(
    db: sqlite_utils.Database, data_dir: str | Path, folder: str | Path, *, allow_missing: bool = False
) -> BackupSummary:
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
    allow_missing : bool
        Back up without the files the snapshot names that the data folder lacks, listing
        them in the manifest's ``missing`` (a restore accepts exactly those as absent),
        instead of refusing: one lost image must not stop every later backup of a study.

    Raises
    ------
    BackupError
        If `folder` holds files, or a file the snapshot names is missing (unless
        `allow_missing`).
    annotation.export.WriteFailed
        If the backup cannot be written (a full disk); nothing is left behind.
    """
    folder = Path(folder)
    with reported_write_errors(folder, "backup"):
        return _backup(db, data_dir, folder, allow_missing)


def _backup(
    db: sqlite_utils.Database, data_dir: str | Path, folder: Path, allow_missing: bool
) -> BackupSummary:
    with staged_folder(folder, "backup", refusal=BackupError) as staging:
        snapshot = staging / DB_NAME
        create_private(snapshot)  # VACUUM INTO fills an empty file and keeps its mode
        db.execute("VACUUM INTO ?", [str(snapshot)])
        named = _named_files(snapshot)
        missing = [relative for relative in named if not resolve(data_dir, relative).is_file()]
        if missing and not allow_missing:
            raise BackupError(_missing_files(missing, database_path(db), data_dir))
        entries, total = [], 0
        for relative in (p for p in named if p not in set(missing)):
            source = resolve(data_dir, relative)
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
            **({"missing": missing} if missing else {}),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return BackupSummary(folder, version, len(entries), total, tuple(missing))


def _missing_files(missing: list[str], db: str, data_dir: str | Path) -> str:
    """Why a backup was refused: the files the database names that the data folder lacks,
    and how to get them back (the command names this database and data folder: one given
    without them opens the default ones)."""
    more = f" and {len(missing) - 1} other file(s)" if len(missing) > 1 else ""
    runs = sorted({p.split("/")[1] for p in missing if p.startswith("runs/")})
    where = f"--db {shlex.quote(db)} --data-dir {shlex.quote(str(data_dir))}"
    again = (
        " An evaluation run makes its lost images, masks and pixel summaries again: `python -m evaluation "
        f"run --run NAME {where}` (`explicit` for an explicit-color run), for {', '.join(map(repr, runs))}."
        if runs
        else ""
    )
    return (
        f"the database names {missing[0]!r}{more}, missing from the data folder; nothing was backed up."
        f"{again} Any file can be copied back from an earlier backup's files/ folder, or from the data "
        "folder's orphans/, where a start moves files that no row names (same path under it); or back up "
        f"everything else, listing the missing ones: `python -m annotation {where} backup --allow-missing DIR`"
    )


def verify(folder: str | Path) -> dict:
    """Check every hash and size of the backup in `folder`; its manifest if all hold.

    Raises
    ------
    BackupError
        Naming the first file that is missing or whose content differs from the manifest.
    """
    folder = Path(folder)
    where = repr(str(folder))
    if why := _not_a_backup(folder):
        raise BackupError(f"{where} {why}; nothing was restored")
    if (folder / MANIFEST).is_symlink():  # a link out of the folder was read (outside probe 141)
        raise BackupError(
            f"backup file {MANIFEST!r} is a link; a backup holds files only; nothing was restored"
        )
    try:
        size = (folder / MANIFEST).stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise BackupError(
                f"{where} holds a {MANIFEST} of {size:,} bytes, more than a backup's "
                f"({MAX_MANIFEST_BYTES:,} at most); nothing was restored"
            )
        text = (folder / MANIFEST).read_bytes()
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise BackupError(f"{where} holds no readable {MANIFEST} ({reason}); nothing was restored") from None
    manifest = _load_manifest(text, where)
    entries = [(manifest["database"]["path"], manifest["database"])] + [
        (f"files/{e['path']}", e) for e in manifest["files"]
    ]
    if entries[0][0] != DB_NAME:
        raise BackupError(
            f"the backup's database must be {DB_NAME!r}, got {shown(entries[0][0])}; nothing was restored"
        )
    for name, entry in entries[1:]:
        problem = restorable_problem(entry.get("path"))
        if problem:
            raise BackupError(f"backup file {name!r} {problem}; nothing was restored")
    _check_folder_listed(folder, {name for name, _ in entries})
    root = folder.resolve()
    for name, entry in entries:
        path = folder / name
        if not path.is_file():
            raise BackupError(f"backup file {name!r} is missing; nothing was restored")
        if path.resolve() != root / name:
            raise BackupError(
                f"backup file {name!r} is a link; a backup holds files only; nothing was restored"
            )
        _check_copy(path, entry, f"backup file {name!r}", "nothing was restored")
        problem = _content_problem(path, entry) if name != DB_NAME else None
        if problem:
            raise BackupError(f"backup file {name!r} {problem}; nothing was restored")
    return manifest


_SIGNATURES = {".png": (b"\x89PNG\r\n\x1a\n",), ".npz": (b"PK\x03\x04", b"PK\x05\x06")}
"""How each kind of file the app stores (`RESTORED_KINDS`) begins: a PNG, and NumPy's
``.npz`` (a zip; an empty one is its end record alone)."""
_DIGEST_NAME = re.compile(r"[0-9a-f]{64}")


def _content_problem(path: Path, entry: dict) -> str | None:
    """Why the backup's file at `path` is not what its name says, or None: it must begin as
    its kind does (`_SIGNATURES`: a name ending in ``.png`` said nothing of the bytes, an
    HTML page with a database after it was written into ``colorings/``), and a file named
    by a sha256 (``<sha256>.png``, `storage.files.content_path`) must hold the bytes of that
    hash, or it would take the name of other content (outside probe 115)."""
    name = PurePosixPath(entry["path"])
    with open(path, "rb") as f:
        head = f.read(8)
    if not head.startswith(_SIGNATURES[name.suffix.lower()]):
        return f"is not a {name.suffix.lower()} file (its first bytes are not that kind's)"
    if _DIGEST_NAME.fullmatch(name.stem) and name.stem != entry["sha256"]:
        return "is named by a sha256 that is not its content's (the app names each file by its bytes' sha256)"
    return None


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _load_manifest(text: bytes, where: str) -> dict:
    """The manifest whose JSON is `text`, of the backup `where` names (for messages), once
    it has every field a restore reads, each of its type (`_manifest_problem`)."""
    try:
        manifest = json.loads(text)
    except ValueError as error:
        raise BackupError(
            f"{where} holds no readable {MANIFEST}: it is not JSON ({error}); nothing was restored"
        ) from None
    except RecursionError:  # Python's own traceback (outside probe 138)
        raise BackupError(
            f"{where} holds no readable {MANIFEST}: its JSON is nested too deeply to read (a backup's "
            "is three levels deep); nothing was restored"
        ) from None
    problem = _layout_problem(manifest)
    if problem is None:
        problem = _manifest_problem(manifest, [manifest["database"], *manifest["files"]])
    if problem:
        raise BackupError(f"{where} holds a {MANIFEST} that {problem}; nothing was restored")
    return manifest


def _layout_problem(manifest: object) -> str | None:
    """What of the manifest's layout is not a backup's (an object with a ``database`` entry
    and a ``files`` list of entries, each an object with a ``path``), or None: ``"database":
    null`` was answered with Python's "'NoneType' object is not subscriptable" (outside probe 135)."""
    if not isinstance(manifest, dict):
        return f"is not a JSON object (got {type(manifest).__name__})"
    if not isinstance(manifest.get("database"), dict):
        return (
            f"has no `database` entry (an object: path, sha256, bytes; got {shown(manifest.get('database'))})"
        )
    if not isinstance(manifest.get("files"), list):
        return f"has no `files` list (got {shown(manifest.get('files'))})"
    seen = set()
    for number, entry in enumerate((manifest["database"], *manifest["files"])):
        if not isinstance(entry, dict):
            return f"lists {shown(entry)} in `files`, not a file's entry (an object: path, sha256, bytes)"
        which = "the `database` entry" if number == 0 else f"entry {number} of `files`"
        if not isinstance(entry.get("path"), str):
            return f"gives {which} no `path` (got {shown(entry.get('path'))})"
        if entry["path"] in seen:  # it was restored once and counted twice (outside probe 138)
            return f"lists {shown(entry['path'])} twice (a backup lists each file once)"
        seen.add(entry["path"])
    return None


def _manifest_problem(manifest: dict, entries: list) -> str | None:
    """What a manifest lacks that a restore reads (a schema version, and for each file a
    path, a sha256 and a size), or None: a missing ``bytes`` ended in a traceback (outside
    probe 118)."""
    if isinstance(manifest.get("schema_version"), bool) or not isinstance(
        manifest.get("schema_version"), int
    ):
        return f"states no schema version (got {shown(manifest.get('schema_version'))})"
    missing = manifest.get("missing", [])
    if not isinstance(missing, list) or not all(
        isinstance(path, str) and restorable_problem(path) is None for path in missing
    ):
        return f"lists as missing {shown(missing)}, not paths of files the app stores"
    held = {e.get("path") for e in entries if isinstance(e, dict)}
    if len(set(missing)) != len(missing) or held & set(missing):
        return "lists a file as missing twice, or as missing and held (a backup lists each file once)"
    for entry in entries:
        if not isinstance(entry, dict):
            return f"lists {shown(entry)}, not a file's entry"
        name = shown(entry.get("path"))
        if not isinstance(entry.get("sha256"), str) or not _SHA256.fullmatch(entry["sha256"]):
            return f"gives {name} no sha256 (64 lower-case hex digits)"
        if (
            isinstance(entry.get("bytes"), bool)
            or not isinstance(entry.get("bytes"), int)
            or entry["bytes"] < 0
        ):
            return (
                f"gives {name} no size in bytes (a whole number, 0 or more; got {shown(entry.get('bytes'))})"
            )
    return None


def restorable_problem(path: object) -> str | None:
    """Why a backup's file `path` (relative to the data folder) may not be restored, or None:
    it must be a file of a kind the app stores, in a folder it stores it in (`RESTORED_KINDS`),
    named by plain parts (letters, digits, spaces, ``. _ -``, none starting with a dot)."""
    if not isinstance(path, str):
        return f"has no path (got {type(path).__name__})"
    parts = path.split("/")
    kinds = RESTORED_KINDS.get(parts[0])
    if kinds is None or len(parts) < 2 or not all(_SAFE_PART.fullmatch(part) for part in parts):
        return f"is not a file the app stores (it stores files under {', '.join(f'{k}/' for k in RESTORED_KINDS)})"
    if not path.lower().endswith(kinds):
        return f"is not a kind of file the app stores in {parts[0]}/ ({', '.join(kinds)})"
    return None


def _check_copy(path: Path, entry: dict, name: str, consequence: str) -> None:
    if path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
        raise BackupError(f"{name} does not match its sha256 in the manifest; {consequence}")


def restore(folder: str | Path, db_path: str | Path, data_dir: str | Path) -> dict:
    """Restore the backup in `folder` as the database `db_path` and its files.

    Steps: refuse unless no process holds `db_path`'s lock (`storage.serving.exclusive`);
    check every hash (`verify`); stage the database copy beside `db_path` and check it
    (sha256, ``integrity_check``, and that it is this app's database at a schema version
    this code knows, `_schema_problem`); copy the missing files into `data_dir`; keep the
    previous database and rename the copy over it (`_swap_in`); check it there again.
    A refusal leaves no folder and no lock file that the restore made
    (`_left_as_found_if_refused`); files it copied into the data folder stay.

    Returns
    -------
    dict
        The manifest, plus ``previous`` (where the replaced database was kept, or None),
        ``copied`` (files written into the data folder), ``kept`` (one line per kind of
        denial made after the backup that the restored database keeps, `carry_denials`) and
        ``other_study``: ``(replaced, restored)`` in words (their instance names, or when their
        databases were made, `_other_study`) when the backup is of another study than the
        database it replaced, else None.

    `folder` is a backup folder or the Admin tab's backup zip (unpacked into a private
    temporary folder first).

    Raises
    ------
    BackupError
        If the app or an evaluation run holds the database (nothing is changed), a file
        of the backup differs from its manifest, is a link or is not a file the app stores
        (`restorable_problem`), its database is not this app's or is
        newer than this code (nothing is changed either way), the database's folder or the
        data folder takes no write (a full disk: the database is not replaced), or the
        restored database fails its check (the message says where the previous one is kept).
    """
    # A link's target is the database (the app's lock is beside it, `storage.serving.lock_path`):
    # it is replaced, and the link stays.
    folder, db_path, data_dir = Path(folder), Path(os.path.realpath(db_path)), Path(data_dir)
    made = [p for p in (db_path.parent, *db_path.parent.parents) if not p.exists()]
    lock = serving.lock_path(db_path)
    lock_made = not lock.exists()
    try:
        with (
            serving.exclusive(db_path),
            _left_as_found_if_refused(lock if lock_made else None, made),
            _unpacked(folder, db_path.parent) as folder,
        ):
            if db_path.exists() and (names := _other_names(db_path)) > 1:
                # The lock is a name's (`storage.serving.lock_path`): an app on another name of
                # this file would go on serving the old one (outside probe 126).
                raise BackupError(
                    f"the database {str(db_path)!r} has {names} names (hard links): a restore replaces this "
                    f"one alone, and an app started on another would go on with the old file; remove the "
                    f"others first (find / -samefile {shlex.quote(str(db_path))}); nothing was restored"
                )
            manifest = verify(folder)
            with _unwritable_refused("the backup's database", db_path.parent):
                staged = _stage_database(folder, manifest, db_path)
            try:
                _check_named(staged, manifest, data_dir)
                _check_folder_owner(data_dir, db_path, staged)
                with _unwritable_refused("the backup's files", data_dir):
                    copied = _restore_files(folder, manifest, data_dir)
            except BaseException:
                _discard(staged)
                raise
            replaced = _study_of(db_path)
            # What was revoked or closed after the backup stays so (`annotation.denials`).
            kept = carry_denials(db_path, staged, earlier=_kept_copies(db_path)) if db_path.exists() else []
            expected = {"sha256": _sha256(staged), "bytes": staged.stat().st_size}
            previous = _swap_in(staged, db_path)
            where = (
                f"the previous database is kept as {str(previous)!r}"
                if previous
                else "no database was replaced"
            )
            _check_copy(db_path, expected, f"the restored database {str(db_path)!r}", where)
            # The data folder is the restored database's now: its next start sweeps, not refuses.
            if (instance := ownership.instance_of(db_path)) is not None:
                ownership.claim(data_dir, db_path, instance)
            restored = _study_of(db_path)
    except serving.LockRefused as error:  # in use, or its folder takes no file
        raise BackupError(f"{error}; nothing was restored") from None
    dropped = fewer_rows(previous, db_path) if previous else {}
    changed = changed_tables(previous, db_path, leaving_out=dropped or ()) if previous else []
    return {
        **manifest,
        "previous": previous,
        "copied": copied,
        "kept": kept,
        "dropped": dropped,
        "changed": changed,
        "other_study": _other_study(replaced, restored),
    }


def _study_of(db_file: Path) -> tuple[str | None, str | None]:
    """What tells a study's databases from another's: ``(instance, made)``, the instance name
    (`storage.ownership.instance_of`: set when an app first starts on it) and when its
    schema's first migration was applied (every copy and backup keeps both); None for what
    it lacks, both for a file that is no database."""
    try:
        instance = ownership.instance_of(db_file)
        with contextlib.closing(read_only(db_file)) as conn:
            row = conn.execute("select applied from schema_version where version = 1").fetchone()
    except sqlite3.DatabaseError:  # no database, or no schema_version table
        return None, None
    return instance, None if row is None else row[0]


def _other_study(replaced: tuple, restored: tuple) -> tuple[str, str] | None:
    """``(replaced, restored)`` in words when `_study_of` tells them apart, else None. A
    database no app has started has no instance yet (outside probe 213: a study built with
    the library alone was restored over an app's without a word): its schema's date tells it."""
    for index, said in ((0, "instance {}"), (1, "its database made {}")):
        if replaced[index] and restored[index]:
            return (
                None
                if replaced[index] == restored[index]
                else tuple(said.format(study[index]) for study in (replaced, restored))
            )
    return None


@contextlib.contextmanager
def _unwritable_refused(what: str, where: Path):
    """A write of `what` into the folder `where` that fails (a full disk, a read-only
    folder) as one `BackupError` line; the block runs before the database is replaced and
    leaves no half-written file."""
    try:
        yield
    except OSError as error:
        raise BackupError(
            write_refusal(
                error,
                f"could not write {what} into {str(where)!r}",
                "the database was not replaced (files copied before stay: each is named by its content)",
                again="restore again",
            )
        ) from error


def fewer_rows(previous: str | Path, restored: str | Path) -> dict[str, tuple[int, int]] | None:
    """The tables of both databases whose rows the restore took back: ``{table: (rows in
    `previous`, rows in `restored`)}`` where `previous` (the replaced database) held more;
    None when `previous` cannot be read as a database (a damaged one is replaced too).

    A count, not a comparison of rows: what was made after the backup and what was deleted
    since may cancel out. A restore said "accounts and invite links made after the backup"
    were not kept whether or not there were any, and nothing of the studies and runs it took
    back (outside probe 161)."""
    listed = "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name"
    found = {}
    try:
        with (
            contextlib.closing(read_only(previous)) as old,
            contextlib.closing(read_only(restored)) as new,
        ):
            kept = {name for (name,) in old.execute(listed)}
            for (name,) in new.execute(listed).fetchall():
                if name in kept:
                    count = f'select count(*) from "{name}"'
                    before, after = old.execute(count).fetchone()[0], new.execute(count).fetchone()[0]
                    if before > after:
                        found[name] = (before, after)
    except sqlite3.Error:
        return None
    return found


def changed_tables(previous: str | Path, restored: str | Path, leaving_out=()) -> list[str] | None:
    """The tables of both databases, other than those in `leaving_out` (`fewer_rows`'s), in
    which `previous` (the replaced database) holds a row the restored one lacks, compared
    on their shared columns: a change made after the backup that replaced rows rather than
    adding them (a new pilot set in ``settings``) was said nowhere (outside probe 179).
    None when either cannot be read as a database."""
    listed = (
        "select name from {}.sqlite_master where type = 'table' and name not like 'sqlite_%' order by name"
    )
    found = []
    try:
        with contextlib.closing(read_only(previous)) as old:
            old.execute("attach database ? as new", (read_only_uri(restored),))
            kept = {name for (name,) in old.execute(listed.format("main"))}
            for (name,) in old.execute(listed.format("new")).fetchall():
                if name not in kept or name in leaving_out:
                    continue
                before = [row[1] for row in old.execute(f'pragma main.table_info("{name}")')]
                after = {row[1] for row in old.execute(f'pragma new.table_info("{name}")')}
                columns = ", ".join(f'"{c}"' for c in before if c in after)
                differs = f'select exists (select {columns} from main."{name}" except select {columns} from new."{name}")'
                if columns and old.execute(differs).fetchone()[0]:
                    found.append(name)
    except sqlite3.Error:
        return None
    return found


def _check_folder_owner(data_dir: Path, db_path: Path, staged: Path) -> None:
    """Refuse a data folder that belongs neither to the database restored over nor to the
    backup's: a restore without --data-dir took the default folder of a running app's other
    study, and made it this database's, so that app could not start again (outside probe 188);
    nor one of a copy of the same study (outside probe 200)."""
    try:
        other = ownership.claimed_by_another(data_dir, db_path, staged)
        copy = ownership.claimed_by_a_copy(data_dir, db_path)
    except ValueError as error:
        raise BackupError(f"{error}; nothing was restored") from None
    if other is not None:
        raise BackupError(
            f"{other}, neither the database restored over ({str(db_path)!r}) nor the backup's: give "
            "the data folder of this study (--data-dir); nothing was restored"
        )
    if copy is not None:
        raise BackupError(
            f"{copy}: the restore would make it this database's folder, and that copy could not start "
            "again; give this database's own data folder (--data-dir); nothing was restored"
        )


def _other_names(db_path: Path) -> int:
    """How many names the database file at `db_path` has (hard links), leaving out the kept
    copies of restores beside it: a restore killed between keeping the previous database
    (a hard link) and its swap leaves one, and the next restore finishes it."""
    found = db_path.stat()
    kept = [p.stat() for p in _kept_copies(db_path)]
    return found.st_nlink - sum(1 for k in kept if (k.st_ino, k.st_dev) == (found.st_ino, found.st_dev))


def _kept_copies(db_path: Path) -> list[Path]:
    """The databases earlier restores replaced, kept beside `db_path` (`_swap_in`), oldest
    first; not their ``-wal``/``-shm``."""
    return sorted(
        p
        for p in db_path.parent.glob(f"{db_path.name}.{KEPT_SUFFIX}-*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    )


@contextlib.contextmanager
def _left_as_found_if_refused(lock: Path | None, made: list[Path]):
    """On a refusal, remove the lock file `lock` (None: it was there before) and the folders
    in `made` (deepest first) that the restore created and left empty, so that a refused
    restore into a new place leaves nothing. The lock file goes while the restore still
    holds it alone: a process that opened it meanwhile cannot lock it and refuses to start."""
    try:
        yield
    except BaseException:
        if lock is not None:
            lock.unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: something of the restore stays there
                folder.rmdir()
        raise


@contextlib.contextmanager
def _unpacked(source: Path, beside: Path):
    """`source` itself when it is a folder; a backup zip (the Admin tab's download) unpacked
    into a private temporary folder in `beside` (the database's folder: the files go to that
    disk anyway), removed afterwards. A zip entry that would land outside
    that folder, or that is a link, refuses the whole zip, as do a file that is no readable
    zip, a zip without a manifest and an entry the manifest does not list or sizes otherwise
    (`_check_listed`), all before anything is unpacked; what a killed restore unpacked
    there is removed first (the caller holds the database's lock alone)."""
    if not source.is_file():
        yield source
        return
    if not zipfile.is_zipfile(source):
        with open(source, "rb") as f:
            database = f.read(16) == b"SQLite format 3\x00"
        raise BackupError(
            f"{str(source)!r} is a SQLite database, not a backup: give the backup folder that holds it "
            f"(with its {MANIFEST} and files/), or the Admin tab's backup zip; nothing was restored"
            if database
            else f"{str(source)!r} is a file but not a readable zip (it may be truncated or damaged): give "
            "a backup folder or the Admin tab's backup zip; nothing was restored"
        )
    for stale in beside.glob(".restore-*"):  # what a killed restore unpacked (we hold the lock alone)
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".restore-", dir=beside) as temp:
        try:
            with zipfile.ZipFile(source) as archive:
                for entry in archive.infolist():
                    if leaves_archive(entry.filename):
                        raise BackupError(
                            f"the zip {source.name!r} holds {shown(entry.filename)}, which would land "
                            "outside the backup; nothing was restored"
                        )
                    # extractall writes a link's target as a file; a backup holds no links.
                    if stat.S_ISLNK(entry.external_attr >> 16):
                        raise BackupError(
                            f"the zip {source.name!r} holds {shown(entry.filename)} as a link; a "
                            "backup holds files only; nothing was restored"
                        )
                top = _backup_top(archive.namelist())
                if top is None:
                    raise BackupError(
                        f"the zip {source.name!r} holds no {MANIFEST} at its top or in one folder "
                        "holding everything: it is not a backup (the Admin tab's backup zip, or a "
                        "backup folder zipped whole); nothing was restored"
                    )
                unpacked = _check_listed(archive, top, source.name)
                free = shutil.disk_usage(temp).free
                if unpacked > free:  # checked before, not found by ENOSPC after a disk filled
                    raise BackupError(
                        f"the disk beside the database ({str(beside)!r}) is full: the zip {source.name!r} "
                        f"unpacks there first ({unpacked:,} bytes; {free:,} free); free some space there and "
                        "run this again; nothing was restored"
                    )
                archive.extractall(temp)
        except (zipfile.BadZipFile, OSError) as error:
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
                # The zip is fine: the disk it unpacks onto, the database's, is what is full.
                raise BackupError(
                    f"the disk beside the database ({str(beside)!r}) is full: the zip {source.name!r} "
                    "unpacks there first; free some space there and run this again; nothing was restored"
                ) from None
            raise BackupError(
                f"the zip {source.name!r} cannot be read: {error}; nothing was restored"
            ) from None
        yield Path(temp, top)


MAX_MANIFEST_BYTES = 64 << 20
"""The largest manifest a zip's restore reads (a study of a million files lists ~150 MB of
names less: 64 MB is far beyond the full study's)."""


GIVE_A_BACKUP = f"give a backup folder (its {MANIFEST} and files/) or the Admin tab's backup zip"


def _not_a_backup(folder: Path) -> str:
    """Why `folder` is plainly no backup folder (nothing there; an export; no manifest at
    all), or "". A missing path was told as a manifest the restore could not read, with
    Python's ``FileNotFoundError(2, ...)`` (outside probe 154)."""
    if not folder.exists() and not folder.is_symlink():
        return f"does not exist: {GIVE_A_BACKUP}"
    if not folder.is_dir() or (folder / MANIFEST).exists() or (folder / MANIFEST).is_symlink():
        return ""
    if (folder / "images.zip").is_file() or (folder / "csv").is_dir():
        return (
            "is an export (csv/, parquet/, images.zip), not a backup: an export leaves secrets and "
            f"derived tables out and cannot be restored; {GIVE_A_BACKUP}"
        )
    return f"holds no {MANIFEST}: it is not a backup folder; {GIVE_A_BACKUP}"


def _check_folder_listed(folder: Path, listed: set[str]) -> None:
    """Refuse a backup folder holding a file or link its manifest does not list (`listed`:
    paths relative to `folder`, its manifest aside), as a zip with one is refused
    (`_check_listed`): a folder's was passed over without a word (outside probe 141)."""
    for top, folders, files in os.walk(folder):
        here = Path(top)
        links = [name for name in folders if (here / name).is_symlink()]
        for name in sorted(files) + sorted(links):
            relative = (here / name).relative_to(folder).as_posix()
            if relative != MANIFEST and relative not in listed:
                raise BackupError(
                    f"the backup folder {str(folder)!r} holds {shown(relative)}, which its {MANIFEST} does "
                    "not list; nothing was restored"
                )


def _check_listed(archive: zipfile.ZipFile, top: str, name: str) -> int:
    """Refuse a zip holding an entry its manifest does not list, or one of another size
    than listed, before anything is unpacked: the whole zip was unpacked first, a 3.2 GB
    file it did not list included (outside probe 115). Returns the bytes it unpacks to,
    which the caller weighs against the disk's free space (a listed 1 GB entry of zeros
    filled it before its hash was checked: outside probe 118)."""
    prefix = f"{top}/" if top else ""
    info = archive.getinfo(prefix + MANIFEST)
    if info.file_size > MAX_MANIFEST_BYTES:
        raise BackupError(
            f"the zip {name!r} holds a {MANIFEST} of {info.file_size:,} bytes, more than a backup's "
            f"({MAX_MANIFEST_BYTES:,} at most); nothing was restored"
        )
    manifest = _load_manifest(archive.read(info), f"the zip {name!r}")
    listed = {prefix + DB_NAME: manifest["database"]["bytes"]}
    listed.update({f"{prefix}files/{e['path']}": e["bytes"] for e in manifest["files"]})
    listed[prefix + MANIFEST] = info.file_size
    for entry in archive.infolist():
        if entry.is_dir():
            continue
        if entry.filename not in listed:
            raise BackupError(
                f"the zip {name!r} holds {shown(entry.filename)}, which its {MANIFEST} does not list; "
                "nothing was restored"
            )
        if entry.file_size != listed[entry.filename]:
            raise BackupError(
                f"the zip {name!r} holds {shown(entry.filename)} of {entry.file_size:,} bytes, where its "
                f"{MANIFEST} says {listed[entry.filename]!r}; nothing was restored"
            )
    return sum(entry.file_size for entry in archive.infolist())


def _backup_top(names: list[str]) -> str | None:
    """Where in a zip with entries `names` the backup lies: ``""`` when its manifest is at
    the top (the Admin tab's zip, or a folder's contents zipped), the folder's name when one
    folder holds every entry and the manifest (``zip -r backup.zip backup``); else None."""
    if MANIFEST in names:
        return ""
    folders = {name.split("/", 1)[0] for name in names}
    if len(folders) == 1 and f"{next(iter(folders))}/{MANIFEST}" in names:
        return next(iter(folders))
    return None


def _check_named(staged: Path, manifest: dict, data_dir: Path) -> None:
    """Refuse a backup whose database names a file that neither the backup nor the data folder
    holds: one whose manifest listed no file restored a study of broken images, which no start
    warned of (outside probe 118), as a backup of such a database is refused."""
    listed = {entry["path"] for entry in manifest["files"]} | set(manifest.get("missing", ()))
    missing = [p for p in _named_files(staged) if p not in listed and not resolve(data_dir, p).is_file()]
    if missing:
        more = f" and {len(missing) - 1} other file(s)" if len(missing) > 1 else ""
        raise BackupError(
            f"the backup's database names {missing[0]!r}{more}, which neither the backup nor the data "
            "folder holds (a backup holds every file its database names); the database was not replaced"
        )


def _restore_files(folder: Path, manifest: dict, data_dir: Path) -> int:
    """Copy the backup's files missing from `data_dir` into it, each checked; how many.

    A file of the data folder is never replaced: files are named by their content, so one
    there under a backup file's name with other bytes means that one of the two is not what
    its name says, and the restore is refused before it copies anything (a crafted backup
    overwrote a coloring that the kept previous database still named: outside probe 115).
    """
    missing = []
    for entry in manifest["files"]:
        target = resolve(data_dir, entry["path"])
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise BackupError(
                f"{str(target)!r} in the data folder is not a plain file, where the backup has "
                f"{entry['path']!r}; nothing was restored"
            )
        if not target.is_file():
            missing.append((entry, target))
        elif _sha256(target) != entry["sha256"]:
            raise BackupError(
                f"the data folder's {entry['path']!r} holds other bytes than the backup's file of that "
                "name; files are named by their content, so one of the two is not what its name says, and "
                "a restore never replaces a file of the data folder (if the backup's is the right one, move "
                "that file aside and restore again); nothing was restored"
            )
    copied = 0
    for entry, target in missing:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.restoring")
        try:
            shutil.copyfile(folder / "files" / entry["path"], temp)
            _check_copy(temp, entry, f"the copy of {entry['path']!r}", "the database was not replaced")
            os.replace(temp, target)
        except BaseException:  # a refused copy, a full disk, Ctrl-C: no half-copied file stays
            temp.unlink(missing_ok=True)
            raise
        copied += 1
    return copied


def _stage_database(folder: Path, manifest: dict, db_path: Path) -> Path:
    """The backup's database copied beside `db_path`, its hash and integrity checked."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    staged = db_path.with_name(f".{db_path.name}.restoring")
    try:
        _discard(staged)
        create_private(staged)  # copyfile writes into it and keeps its mode
        shutil.copyfile(folder / manifest["database"]["path"], staged)
        _check_copy(staged, manifest["database"], "the copied database", "the database was not replaced")
        problem = _integrity_problem(staged)
        if problem:
            raise BackupError(
                f"the backup's database fails SQLite's integrity_check ({problem}); the database was not replaced"
            )
        problem = _schema_problem(staged, manifest["schema_version"])
        if problem:
            raise BackupError(f"the backup's database {problem}; the database was not replaced")
    except BaseException:
        _discard(staged)
        raise
    return staged


def _discard(staged: Path) -> None:
    """Remove a staged database and what SQLite made beside it: a backup whose file is in
    WAL mode left its ``-wal`` and ``-shm`` after a refusal (outside probe 226)."""
    for path in (staged, *(staged.with_name(staged.name + end) for end in ("-wal", "-shm", "-journal"))):
        path.unlink(missing_ok=True)


def leftovers(db_path: str | Path) -> list[str]:
    """What an operator should know about `db_path` at a start, one line each: a staged
    copy that an interrupted restore left (it was never put in place), and a database that
    other accounts of the machine may read (copied or made by earlier code with the default
    mode)."""
    db_path = Path(db_path)
    said = []
    staged = db_path.with_name(f".{db_path.name}.restoring")
    if staged.exists():
        said.append(
            f"{str(staged)!r} is what an interrupted restore left: it was never put in place, and "
            f"{str(db_path)!r} is the database in use; run the restore again, or delete that file"
        )
    for unpacked in sorted(db_path.parent.glob(".restore-*")):
        said.append(
            f"{str(unpacked)!r} is a backup zip that an interrupted restore unpacked; the next restore "
            "removes it, or delete it"
        )
    if db_path.exists() and db_path.stat().st_mode & 0o077:
        said.append(
            f"the database {str(db_path)!r} may be read by other accounts of this machine (mode "
            f"{db_path.stat().st_mode & 0o777:o}: it holds every account and hash); run: chmod 600 {db_path}"
        )
    return said


def _integrity_problem(path: Path) -> str | None:
    """What SQLite's ``integrity_check`` finds wrong with the database at `path`, or None."""
    try:
        conn = read_only(path)
        try:
            found = conn.execute("pragma integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        return str(error)
    return None if found == [("ok",)] else " ".join(str(found[0][0]).split())


def _schema_problem(path: Path, stated: object) -> str | None:
    """Why the database at `path` is not one this code may take as its own, or None.

    It must record a schema version from 1 to this code's (a newer one would stop every
    later start), the version its manifest states, and every table a database of that
    version has (`storage.schema.tables_at`): a SQLite file of some other program passes
    ``integrity_check`` and its hash, and would leave the app an empty database.
    """
    conn = read_only(path)
    try:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
        if "schema_version" not in tables:
            return "has no schema_version table: it is not a ColorConcept Lab database"
        version = conn.execute("select coalesce(max(version), 0) from schema_version").fetchone()[0]
    finally:
        conn.close()
    if not isinstance(version, int) or not 1 <= version <= len(MIGRATIONS):
        newer = isinstance(version, int) and version > len(MIGRATIONS)
        return f"records schema version {version!r}, " + (
            f"newer than this code's {len(MIGRATIONS)}: update the code first"
            if newer
            else "which no code wrote"
        )
    if version != stated:
        return f"records schema version {version}, but its manifest states {stated!r}"
    missing = sorted(tables_at(version) - tables)
    if missing:
        return f"lacks tables of schema version {version}: {', '.join(missing)}"
    return _shape_problem(path, version)


def _shape_problem(path: Path, version: int) -> str | None:
    """What the database at `path` holds beyond, or unlike, a database of schema `version`
    (`storage.schema.shape_at`), or None. Deny by default: a trigger, view, table or index
    that the app never made runs or is read at every later start, where nobody inspects it
    (outside probe 115: a trigger made every new session an admin's), and a table with
    other columns stops the app at its start, blaming the disk."""
    conn = read_only(path)
    try:
        found = schema_shape(conn)
    finally:
        conn.close()
    expected = shape_at(version)
    extra = sorted(set(found) - set(expected))
    if extra:
        listed = ", ".join(f"{kind} {shown(name)}" for kind, name in extra[:3])
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        return (
            f"holds {listed}{more}, which a database of schema version {version} does not have "
            "(a backup holds the app's own tables, indexes and triggers only)"
        )
    for key in sorted(expected):
        kind, name = key
        if key not in found:
            return f"lacks {kind} {shown(name)} of schema version {version}"
        if found[key] != expected[key]:
            return f"has {kind} {shown(name)} unlike schema version {version}'s{_columns_said(found[key], expected[key])}"
    return None


def _columns_said(found: tuple, expected: tuple) -> str:
    """For two table shapes (`storage.schema.schema_shape`) whose column names differ,
    `` (columns: ...; expected: ...)``; whose SQL has a CHECK or COLLATE the other has not,
    `` (its SQL has CHECK)``; else ""."""
    if not (isinstance(found[0], tuple) and isinstance(expected[0], tuple)):
        return ""
    names = [[column[0] for column in shape[0] if isinstance(column, tuple)] for shape in (found, expected)]
    if names[0] != names[1]:
        return f" (columns: {', '.join(names[0])}; expected: {', '.join(names[1])})"
    if found[2:] != expected[2:]:
        return f" (its SQL has {', '.join(found[2]) or 'no CHECK or COLLATE'})"
    return ""


def _swap_in(staged: Path, db_path: Path) -> Path | None:
    """Put the checked copy `staged` at `db_path` in one rename, keeping the database it
    replaces as ``<name>.before-restore-<time>``; where that went (None if there was none).

    `db_path` holds a whole database at every moment, so a restore killed on the way leaves
    either the previous database or the restored one there, never none (an empty path would
    make the next start create a new, empty study). The previous database is first made one
    self-contained file in place: its ``-wal`` checkpointed into it (a transaction committed
    before an unclean stop is kept) and journaling set to rollback, which removes the
    ``-wal``; then it gets its second name (a hard link, or a copy where links are not
    possible), and `staged` is renamed over `db_path`. A previous database SQLite cannot open
    keeps its ``-wal`` and ``-shm`` under the kept name, where SQLite finds them.
    """
    if not db_path.exists():
        os.replace(staged, db_path)
        return None
    with contextlib.suppress(sqlite3.Error):
        conn = sqlite3.connect(db_path)
        try:
            conn.execute("pragma journal_mode = delete").fetchone()
        finally:
            conn.close()
    previous = unused_path(db_path.with_name(f"{db_path.name}.{KEPT_SUFFIX}-{file_stamp()}"))
    try:
        os.link(db_path, previous)
    except OSError:
        partial = previous.with_name(f".{previous.name}.partial")
        create_private(partial)
        shutil.copyfile(db_path, partial)
        os.replace(partial, previous)
    for journal in ("-wal", "-shm"):  # left only where SQLite could not open the database
        if Path(f"{db_path}{journal}").exists():
            os.replace(f"{db_path}{journal}", f"{previous}{journal}")
    os.replace(staged, db_path)
    return previous


def backup_archive(db: sqlite_utils.Database, data_dir: str | Path, archive: str | Path) -> Path:
    """Write a backup as one zip file `archive` (for the Admin tab's download); returns it.

    Raises
    ------
    annotation.export.WriteFailed
        If it cannot be written (a full disk), naming `archive`'s folder; nothing is left.
    """
    archive = Path(archive)
    with reported_write_errors(archive.parent, "backup"):
        archive.parent.mkdir(parents=True, exist_ok=True)
        with archive_workspace(archive) as temp:
            summary = _backup(db, data_dir, Path(temp) / "backup", False)
            built = Path(temp) / "archive.zip"
            with zipfile.ZipFile(built, "w", compression=zipfile.ZIP_STORED) as out:
                for path in sorted(summary.folder.rglob("*")):
                    if path.is_file():
                        out.write(path, path.relative_to(summary.folder).as_posix())
            os.replace(built, archive)
    return archive
