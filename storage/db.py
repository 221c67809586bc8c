"""Opening the SQLite database, transactions and timestamps: one of each for the project.

Threads
-------
An `sqlite3.Connection` must not be shared between threads that may use it at the same
time (``check_same_thread=False`` only silences the check; it makes nothing safe). The
app therefore opens one short-lived connection per request with `open_db` and closes it
when the handler returns; see `app.common`. Concurrent writers are serialised by SQLite
itself: `transaction` takes the write lock up front (``BEGIN IMMEDIATE``) and waits up to
`BUSY_TIMEOUT_MS` for it.

Writing a row
-------------
One write API: `insert_row`, `insert_rows`, `upsert_row`, `upsert_rows`, `update_rows`,
`delete_rows`. Each runs inside ``with transaction(db):`` (else `OutsideTransaction`),
is one statement (one prepared statement for the batches), binds every value as a
parameter, and takes table and column names only as plain identifiers (checked, then
quoted), so nothing can be injected; SQLite checks them against the live schema when it
prepares the statement, before any row changes ("no such table", "has no column named").
Looking the schema up ourselves would cost statements under the lock, which this API
exists to save.

Why not sqlite-utils' table methods: each call reads the schema first, under the write
lock (sqlite-utils 4.2, counted with a trace callback inside `transaction`): ``insert``
and ``delete_where`` three ``sqlite_master`` reads and a savepoint around the write (6
statements); ``upsert`` five ``sqlite_master`` reads and two ``PRAGMA table_info`` (11),
and on a connection's first upsert a probe table created, filled and dropped (17);
``update`` seven reads including a ``select`` of the row (11). Each statement is one
more time the writer gives up the GIL and waits to get it back while other requests
run. Values are stored as they are (int, float, str, bytes, None): unlike sqlite-utils,
nothing is turned into JSON or a date text behind the caller's back (a dict, list or
date is refused).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from storage.shown import shown

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEFAULT_DB_PATH = DEFAULT_DATA_DIR / "colorconcept.sqlite"
ENV_DB = "COLORCONCEPT_DB"
ENV_DATA_DIR = "COLORCONCEPT_DATA_DIR"
BUSY_TIMEOUT_MS = 30_000
_ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

_WRITERS = threading.RLock()  # see `transaction`


def db_path(db: sqlite_utils.Database) -> str:
    """The file behind `db`, resolved (a cache key; what another thread opens); "" for a
    database in memory."""
    file = db.execute("pragma database_list").fetchone()[2]
    return os.path.realpath(file) if file else ""


class DatabaseMissing(FileNotFoundError):
    """The database file is not at its path: moved or deleted while a process that made or
    opened it there goes on (`open_db` with ``create=False``)."""


def open_db(path: str | Path, *, create: bool = True) -> sqlite_utils.Database:
    """Open (creating if needed) the SQLite file at `path` for this thread.

    Parameters
    ----------
    path : str or Path
        The database file; a new one is created readable by its owner alone
        (`create_private`), and the folders made for it likewise (mode 0700,
        `make_private_parents`). ``":memory:"``
        opens a private in-memory database (no WAL).
    create : bool
        False where the file must be there already (the app's requests, after its start
        made it): a missing one raises `DatabaseMissing` rather than starting an empty
        database in its place, which every session then failed on.

    Returns
    -------
    sqlite_utils.Database
        With WAL journaling, ``foreign_keys=ON``, ``synchronous=FULL`` (an acknowledged
        commit survives a crash) and a busy timeout of `BUSY_TIMEOUT_MS`. The connection
        belongs to the calling thread; close it with ``db.close()``.
    """
    if str(path) == ":memory:":
        db = sqlite_utils.Database(str(path))
    elif create:
        make_private_parents(path)
        create_private(path)
        db = sqlite_utils.Database(str(path))
    else:
        db = sqlite_utils.Database(existing_connection(path))
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    if str(path) != ":memory:":
        db.enable_wal()
    db.execute("PRAGMA synchronous = FULL")
    return db


def read_only_uri(path: str | Path) -> str:
    """The URI that opens the database file `path` read-only (``sqlite3.connect(uri,
    uri=True)``, or ``attach database``): its absolute path percent-encoded. Written as
    ``file:<path>?mode=ro``, a '#' in a folder's name cut the path short and a '%' was read as
    an escape, so a restore read another, empty file for the replaced database and carried
    none of its revoked links into the restored one, unsaid."""
    return _uri(path, "ro")


def _uri(path: str | Path, mode: str) -> str:
    return f"{Path(path).absolute().as_uri()}?mode={mode}"


def read_only(path: str | Path, timeout: float = 5.0) -> sqlite3.Connection:
    """An `sqlite3.Connection` that only reads the database file at `path` (`read_only_uri`);
    a missing file is not created (`sqlite3.OperationalError`)."""
    return sqlite3.connect(read_only_uri(path), uri=True, timeout=timeout)


def existing_connection(path: str | Path, timeout: float = 5.0) -> sqlite3.Connection:
    """An `sqlite3.Connection` to the database file at `path`, which must exist (SQLite's
    ``mode=rw``: a missing file is not created).

    Raises
    ------
    DatabaseMissing
        If there is no file at `path`.
    """
    try:
        return sqlite3.connect(_uri(path, "rw"), uri=True, timeout=timeout)
    except sqlite3.OperationalError as error:
        if not Path(path).exists():
            raise DatabaseMissing(
                errno.ENOENT,
                "the database file is not there any more (moved or deleted while in use)",
                str(path),
            ) from error
        raise


def write_refused(path: str | Path, wait_s: float) -> str | None:
    """Why the database at `path` takes no write now (SQLite's message), or None: a write
    lock taken (``BEGIN IMMEDIATE``, waiting at most `wait_s` s for another writer) and given
    back at once, writing nothing."""
    try:
        conn = existing_connection(path, timeout=wait_s)
    except DatabaseMissing as missing:
        return missing.strerror
    try:
        conn.execute("begin immediate")
        conn.execute("rollback")
    except sqlite3.Error as error:
        return str(error)
    finally:
        conn.close()
    return None


#: What `storage_condition` calls an ``OSError`` of each errno.
_ERRNO_CONDITIONS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EIO: "io"}
#: What `storage_condition` calls an SQLite ``OperationalError`` whose message holds each.
_SQLITE_CONDITIONS = {
    "database or disk is full": "full",
    "disk I/O error": "io",  # what SQLite reports when its WAL cannot grow, too
    "database is locked": "locked",
}


def storage_condition(error: BaseException) -> str | None:
    """``"full"``, ``"io"``, ``"locked"`` or ``"missing"`` when `error` (or an exception it was
    raised from) is a full disk, a failed write, a database locked past the busy timeout or
    a database file gone from its path; else None.

    A condition of the machine, not of the request or the code: it passes once space is
    freed or the other writer is done, and what was committed before it stays. The app
    (`app.common.server_condition`) and the command lines say each in their own words.
    """
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, DatabaseMissing):
            return "missing"
        if isinstance(error, OSError) and error.errno in _ERRNO_CONDITIONS:
            return _ERRNO_CONDITIONS[error.errno]
        if isinstance(error, sqlite3.OperationalError):
            for words, condition in _SQLITE_CONDITIONS.items():
                if words in str(error):
                    return condition
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


#: What an operator (a command line, an evaluation job) is told of each `storage_condition`:
#: what happened, and what to do before the same work is resumed.
OPERATOR_WORDS = {
    "full": ("a disk it writes to is full", "free some space beside the database and the data folder"),
    "io": (
        "it could not write to its disk (it may be full)",
        "free some space beside the database and the data folder",
    ),
    "locked": (
        "the database stayed locked by another process",
        "let the other writer (a backup, a restore, another run) finish",
    ),
    "missing": (
        "the database file is not there any more (moved or deleted while in use)",
        "put it back (or restore a backup) and restart",
    ),
}


def unwritable(path: str | Path, error: Exception) -> str:
    """What to tell an operator whose database at `path` could not be opened or written
    (`error`, SQLite's): opening one writes beside it (its ``-shm``, its journal mode), so a
    full disk stops even a command that only reads it, a backup included."""
    return (
        f"the database {str(path)!r} could not be opened or written ({error}); if its disk is "
        "full, free some space beside it first (even a backup must open it), then run this again"
    )


def not_sqlite(path: str | Path) -> bool:
    """Whether `path` is a non-empty file that is not an SQLite database (a mistyped ``--db``
    naming an image, say): checked before a lock file is written beside it."""
    path = Path(path)
    if not path.is_file() or not path.stat().st_size:
        return False
    with open(path, "rb") as head:
        return head.read(16) != b"SQLite format 3\x00"


def db_path_refusal(path: str | Path) -> str | None:
    """Why `path` cannot be the database a ``--db`` names, or None.

    A folder (SQLite said "unable to open database file", as a traceback or after a chmod
    hint, and wrote a lock file beside it) or a non-empty file that is not SQLite (a mistyped
    ``--db`` naming an image). Every entry point asks this before anything is written.
    """
    if Path(path).is_dir():
        return f"--db {str(path)!r} is a folder; give the path of a database file in it"
    if not_sqlite(path):
        return f"--db {str(path)!r} is not an SQLite database"
    if in_a_backup(path):
        # Opening it switched it to WAL and left a lock beside it: the backup no longer
        # matched its manifest, and could not be restored (outside probe 196).
        return (
            f"--db {str(path)!r} is the database of a backup (its folder's {BACKUP_MANIFEST} lists it), "
            "and opening it would change its bytes, so that the backup could not be restored: restore it "
            "(`python -m annotation restore FOLDER --db NEW.sqlite --data-dir NEW_DATA`), or copy it out "
            "of the backup's folder first"
        )
    return None


BACKUP_MANIFEST = "manifest.json"
"""The file of a backup's folder that lists its database and files (`annotation.backup`)."""


def in_a_backup(path: str | Path) -> bool:
    """Whether the database file `path` is a backup's: the ``manifest.json`` beside it names
    it as the backup's database."""
    manifest = Path(path).parent / BACKUP_MANIFEST
    try:
        found = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    database = found.get("database") if isinstance(found, dict) else None
    return isinstance(database, dict) and database.get("path") == Path(path).name


def create_private(path: str | Path) -> None:
    """Create `path` as an empty file that only its owner may read and write (mode 0600),
    unless it exists (then it is left as it is).

    The database and its copies hold every account, hash and vote: on a shared server other
    local accounts must not read them. SQLite gives a database's ``-wal`` and ``-shm`` files
    the database's own mode, so they follow.
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def make_private_parents(path: str | Path) -> None:
    """Make the missing folders above the file `path` (its folder and any missing ancestors)
    that only their owner may open (mode 0700), the outermost first; folders that exist are
    left as they are.

    One ``mkdir(parents=True, mode=0o700)`` would not do: it gives the mode to the deepest
    folder alone, the others the default (0755 under the usual umask). Used for the database
    and its lock file (`storage.serving`), whichever is made first.

    Raises
    ------
    OSError
        If a folder cannot be made (FileExistsError where a file stands in its place).
    """
    missing = []
    folder = Path(path).parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)  # another process may make it meanwhile


def private_folder(path: str | Path) -> Path:
    """`path` as a folder that only its owner may open (mode 0700; made if missing, closed if
    older code made it open). Returns it as a Path.

    What is written inside (an export's CSV of platform ids, a study's tables) is then out
    of other local accounts' reach whatever the files' own modes.
    """
    folder = Path(path)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run a block as one write transaction that holds the write lock from its start.

    ``BEGIN IMMEDIATE`` makes read-then-write logic (quota checks, reservations) safe
    against other connections: no one else can write between the read and the write.
    sqlite-utils writes inside the block become savepoints of this transaction. Inside
    an open transaction this nests as a savepoint.

    Note that ``with db.conn:`` is not enough: if the block's first write is a
    sqlite-utils call, that call opens and commits its own transaction. Nor is sqlite-utils'
    ``db.atomic()``: its deferred ``BEGIN`` reads first, and a commit by another connection
    before its first write fails that write at once with "database is locked"
    (SQLITE_BUSY_SNAPSHOT, which the busy timeout does not cover). This is the one way the
    project opens a write transaction; tests/evaluation/pipeline/test_transactions.py refuses ``.atomic(``
    outside `storage`.
    """
    if db.conn.in_transaction:
        with db.atomic(), _marked(db):
            yield db
        return
    # Writers of this process take turns here: a thread waiting for SQLite's write lock
    # polls with growing sleeps (up to 100 ms each) and may lose every round to newer
    # writers, so a sign-in could wait seconds behind a stream of submissions. Waiting on
    # a Python lock, it wakes as soon as the writer before it commits. Other processes
    # (the CLI) still meet the busy timeout.
    with _WRITERS:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            with _marked(db):
                yield db
        except BaseException:
            db.rollback()
            raise
        else:
            try:
                db.conn.execute("COMMIT")
            except BaseException:
                db.rollback()
                raise


class OutsideTransaction(RuntimeError):
    """A write API call ran outside ``with storage.transaction(db):``."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in")
_NOT_STORED = (dict, list, tuple, set, dt.date, dt.time, dt.timedelta)
_OPEN = threading.local()  # id(connection) -> depth of `transaction` blocks on it


def _depths() -> dict[int, int]:
    try:
        return _OPEN.depths
    except AttributeError:
        _OPEN.depths = {}
        return _OPEN.depths


@contextlib.contextmanager
def _marked(db: sqlite_utils.Database) -> Iterator[None]:
    depths, key = _depths(), id(db.conn)
    depths[key] = depths.get(key, 0) + 1
    try:
        yield
    finally:
        depths[key] -= 1
        if not depths[key]:
            del depths[key]


def _check_write(db: sqlite_utils.Database, table: str, names) -> None:
    """Refuse a write outside `transaction` and names that are not plain identifiers."""
    if not (db.conn.in_transaction and id(db.conn) in _depths()):
        raise OutsideTransaction(
            f"a write to {table!r} must run inside `with storage.transaction(db):` "
            "(it takes the write lock with BEGIN IMMEDIATE)"
        )
    for name in (table, *names):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"table and column names must be plain identifiers, got {shown(name)} (table {table!r})"
            )


def _values(table: str, row: dict) -> list:
    for name, value in row.items():
        if isinstance(value, _NOT_STORED):
            raise TypeError(
                f"column {name!r} of {table!r} got a {type(value).__name__}; store what SQLite keeps "
                "as it is (int, float, str, bytes, None): JSON text from json.dumps, a time from iso()"
            )
    return list(row.values())


def _insert_sql(table: str, names, verb: str = "insert") -> str:
    columns = ", ".join(f'"{name}"' for name in names)
    return f'{verb} into "{table}" ({columns}) values ({", ".join("?" * len(names))})'


def _upsert_sql(table: str, names, pk: tuple[str, ...]) -> str:
    keys = ", ".join(f'"{name}"' for name in pk)
    updates = ", ".join(f'"{name}" = excluded."{name}"' for name in names if name not in pk)
    action = f"do update set {updates}" if updates else "do nothing"
    return f"{_insert_sql(table, names)} on conflict ({keys}) {action}"


def insert_row(db: sqlite_utils.Database, table: str, row: dict) -> int:
    """Insert `row` (column -> value) into `table` with one statement; its rowid.

    Raises
    ------
    OutsideTransaction
        Not inside ``with storage.transaction(db):``.
    ValueError, TypeError
        A name that is not a plain identifier; a value SQLite would not store as it is.
    sqlite3.OperationalError, sqlite3.IntegrityError
        From SQLite: an unknown table or column, a broken constraint.
    """
    _check_write(db, table, row)
    return db.conn.execute(_insert_sql(table, row), _values(table, row)).lastrowid


def _batch(rows) -> tuple[list[str], list[dict]]:
    """The columns of `rows` (every key any row has, in first-seen order) and the rows, each
    with None where it lacks a column (NULL, as sqlite-utils' ``insert_all`` stores it)."""
    rows = list(rows)
    names = list(dict.fromkeys(name for row in rows for name in row))
    return names, [row if len(row) == len(names) else {n: row.get(n) for n in names} for row in rows]


def insert_rows(db: sqlite_utils.Database, table: str, rows, *, ignore: bool = False) -> int:
    """Insert `rows` (dicts; a column a row lacks is NULL) into `table` with one prepared
    statement; how many were inserted. ``ignore=True`` skips a row that breaks a uniqueness
    constraint (``insert or ignore``)."""
    names, rows = _batch(rows)
    if not rows:
        return 0
    _check_write(db, table, names)
    sql = _insert_sql(table, names, "insert or ignore" if ignore else "insert")
    return db.conn.executemany(sql, [_values(table, {n: row[n] for n in names}) for row in rows]).rowcount


def upsert_row(db: sqlite_utils.Database, table: str, row: dict, pk: tuple[str, ...]) -> None:
    """Insert `row` into `table`, or update the row with its primary key `pk` (column
    names; the columns not in `row` keep their values); one statement, as `insert_row`."""
    upsert_rows(db, table, [row], pk)


def upsert_rows(db: sqlite_utils.Database, table: str, rows, pk: tuple[str, ...]) -> None:
    """`upsert_row` for each of `rows` with one prepared statement; a column that some rows
    have and a row lacks is set to NULL on that row (as sqlite-utils' ``upsert_all``)."""
    names, rows = _batch(rows)
    if not rows:
        return
    _check_write(db, table, (*names, *pk))
    sql = _upsert_sql(table, names, tuple(pk))
    db.conn.executemany(sql, [_values(table, {n: row[n] for n in names}) for row in rows])


def _where_sql(table: str, where: dict) -> tuple[str, list, list]:
    """``where`` as SQL: each key is a column (``=``; None means ``is null``) or a column and
    an operator (``"expires <="``, ``"id !="``, ``"token_hash in"`` with a sequence)."""
    if not where:
        raise ValueError(f"`where` must name at least one column of {table!r}, got {shown(where)}")
    parts, params, names = [], [], []
    for key, value in where.items():
        name, _, operator = key.strip().partition(" ")
        operator = " ".join(operator.split()) or "="
        if operator not in _OPERATORS:
            raise ValueError(
                f"`where` operator must be one of {_OPERATORS}, got {shown(key)} (table {table!r})"
            )
        names.append(name)
        if operator in ("in", "not in"):
            values = list(value)
            parts.append(f'"{name}" {operator} ({", ".join("?" * len(values))})')
            params.extend(values)
        elif value is None and operator in ("=", "!="):
            parts.append(f'"{name}" is {"not " if operator == "!=" else ""}null')
        else:
            parts.append(f'"{name}" {operator} ?')
            params.append(value)
    return " and ".join(parts), params, names


def update_rows(db: sqlite_utils.Database, table: str, where: dict, values: dict) -> int:
    """Set `values` (column -> value) on the rows of `table` that match `where` (see
    `_where_sql`); how many rows matched. One statement."""
    condition, params, names = _where_sql(table, where)
    _check_write(db, table, (*values, *names))
    sets = ", ".join(f'"{name}" = ?' for name in values)
    sql = f'update "{table}" set {sets} where {condition}'
    return db.conn.execute(sql, [*_values(table, values), *params]).rowcount


def delete_rows(db: sqlite_utils.Database, table: str, where: dict) -> int:
    """Delete the rows of `table` that match `where` (see `_where_sql`); how many. One statement."""
    condition, params, names = _where_sql(table, where)
    _check_write(db, table, names)
    return db.conn.execute(f'delete from "{table}" where {condition}', params).rowcount


def select(db: sqlite_utils.Database, sql: str, params=()) -> list[dict]:
    """The rows of one ``select`` as dicts, read with one statement: like ``db.query``
    without the savepoint sqlite-utils 4 wraps around every query (two more statements
    each; see `insert_row` for why that counts on the submit path)."""
    cursor = db.conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def utcnow() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime | None = None) -> str:
    """`moment` (default now) as sortable UTC text, e.g. ``2025-01-31T12:00:00.000000Z``.

    Raises
    ------
    ValueError
        If `moment` is naive (no time zone).
    """
    moment = utcnow() if moment is None else moment
    if moment.tzinfo is None:
        raise ValueError(f"`moment` must be time-zone aware, got naive {moment!r}")
    return moment.astimezone(dt.UTC).strftime(_ISO_FORMAT)


def file_stamp(text: str | None = None) -> str:
    """A time for a file name: `text` (an `iso` stamp; now if None) as ``20261130T174015``
    (UTC, to the second, sorting as the time does)."""
    return (text or iso()).replace(":", "").replace("-", "")[:15]


def unused_path(path: str | Path) -> Path:
    """`path`, or the first of ``<path>-2``, ``<path>-3``, ... that names no file (nor its
    ``-wal``): a kept copy named by `file_stamp` is never overwritten by another made within
    the same second."""
    path = Path(path)
    candidate, number = path, 1
    while candidate.exists() or Path(f"{candidate}-wal").exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def parse_iso(text: str) -> dt.datetime:
    """Inverse of `iso`."""
    return dt.datetime.strptime(text, _ISO_FORMAT).replace(tzinfo=dt.UTC)


def shown_time(stamp: str | dt.datetime) -> str:
    """A stored time (`iso` text or a UTC datetime) as people read it: date, minutes and zone.

    >>> shown_time("2026-12-01T09:39:40.679784Z")
    '2026-12-01 09:39 UTC'
    """
    when = parse_iso(stamp) if isinstance(stamp, str) else stamp.astimezone(dt.UTC)
    return f"{when:%Y-%m-%d %H:%M} UTC"
