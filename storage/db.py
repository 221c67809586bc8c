"""Opening the SQLite database, transactions and timestamps: one of each for the project.

Threads
-------
An `sqlite3.Connection` must not be shared between threads that may use it at the same
time (``check_same_thread=False`` only silences the check; it makes nothing safe). The
app therefore opens one short-lived connection per request with `open_db` and closes it
when the handler returns; see `app.common`. Concurrent writers are serialised by SQLite
itself: `transaction` takes the write lock up front (``BEGIN IMMEDIATE``) and waits up to
`BUSY_TIMEOUT_MS` for it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEFAULT_DB_PATH = DEFAULT_DATA_DIR / "colorconcept.sqlite"
ENV_DB = "COLORCONCEPT_DB"
ENV_DATA_DIR = "COLORCONCEPT_DATA_DIR"
BUSY_TIMEOUT_MS = 30_000
_ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

_WRITERS = threading.RLock()  # see `transaction`


def open_db(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) the SQLite file at `path` for this thread.

    Parameters
    ----------
    path : str or Path
        The database file; its parent folder is created. ``":memory:"`` opens a private
        in-memory database (no WAL).

    Returns
    -------
    sqlite_utils.Database
        With WAL journaling, ``foreign_keys=ON``, ``synchronous=FULL`` (an acknowledged
        commit survives a crash) and a busy timeout of `BUSY_TIMEOUT_MS`. The connection
        belongs to the calling thread; close it with ``db.close()``.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite_utils.Database(str(path))
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    if str(path) != ":memory:":
        db.enable_wal()
    db.execute("PRAGMA synchronous = FULL")
    return db


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
    project opens a write transaction; tests/test_transactions.py refuses ``.atomic(``
    outside `storage`.
    """
    if db.conn.in_transaction:
        with db.atomic():
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


def insert_row(db: sqlite_utils.Database, table: str, row: dict) -> int:
    """Insert `row` (column -> value) into `table` with one statement; its rowid.

    For the submit path's writes, which run under the write lock: sqlite-utils' ``insert``
    and ``upsert`` read ``sqlite_master`` and ``PRAGMA table_info`` on every call (40-odd
    extra statements per submission), and each statement is one more time the writer
    gives up the GIL and waits to get it back while other requests run. Values must be
    what SQLite stores as they are (int, float, str, bytes, None); `table` and the column
    names are the code's own, never user input.
    """
    return db.execute(_insert_sql(table, row), list(row.values())).lastrowid


def _insert_sql(table: str, row: dict) -> str:
    names = ", ".join(f'"{name}"' for name in row)
    return f'insert into "{table}" ({names}) values ({", ".join("?" * len(row))})'


def select(db: sqlite_utils.Database, sql: str, params=()) -> list[dict]:
    """The rows of one ``select`` as dicts, read with one statement: like ``db.query``
    without the savepoint sqlite-utils 4 wraps around every query (two more statements
    each; see `insert_row` for why that counts on the submit path)."""
    cursor = db.conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def upsert_row(db: sqlite_utils.Database, table: str, row: dict, pk: tuple[str, ...]) -> None:
    """Insert `row` into `table`, or update the row with its primary key `pk` (column
    names); one statement, as `insert_row`."""
    keys = ", ".join(f'"{name}"' for name in pk)
    updates = ", ".join(f'"{name}" = excluded."{name}"' for name in row if name not in pk)
    db.execute(f"{_insert_sql(table, row)} on conflict ({keys}) do update set {updates}", list(row.values()))


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


def parse_iso(text: str) -> dt.datetime:
    """Inverse of `iso`."""
    return dt.datetime.strptime(text, _ISO_FORMAT).replace(tzinfo=dt.UTC)
