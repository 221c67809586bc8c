"""Who is using a database: a lock file beside it that servers share and restore takes alone.

Every process that writes the database for a long time (the web app, the long-running
``python -m evaluation`` commands) holds a *shared* `fcntl.flock` on ``<database>.lock``
for its whole life (`hold_shared`); short commands hold it for their block (`shared`).
`exclusive` takes the lock alone without waiting, so a restore refuses while anything
holds it (`DatabaseInUse`), and a server refuses to start while a restore runs
(`RestoreRunning`). `alone` is the same for a process that holds the lock shared itself
(an app or a command migrating the database to a newer schema at its start: a process of
the earlier code still using it would go on writing a schema it does not know).

The kernel releases a flock when the last descriptor of its open file is closed, which
includes the death of the process by any signal: a crashed or SIGKILLed app never blocks
a restore, and nothing needs to be cleaned up. The lock file itself stays; it is empty.
Processes that do not take the lock (a ``sqlite3`` shell) are not seen, and deleting the
lock file while a process holds it defeats the check (the next one locks a new file).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from storage.db import make_private_parents

LOCK_SUFFIX = ".lock"

# Shared locks held for the life of this process, one per lock file (`hold_shared`);
# kept here so the open files are never garbage collected (closing one drops the lock).
_HELD: dict[str, BinaryIO] = {}


def gone_here(host: str, pid: str) -> bool:
    """Whether `host` and `pid` (as text) name a process of this machine that no longer
    runs: what a job or a staging folder of a killed process left needs no wait then.
    Another machine's process, one alive (another user's too) or a `pid` that is no number:
    False."""
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


class LockRefused(RuntimeError):
    """The database's lock could not be taken; the message says why and what to do. Callers
    that start work (the app, the commands) catch this, and say it in one line."""


class DatabaseInUse(LockRefused):
    """The database is served or written by another process; the message names who, as
    does ``holders`` (e.g. ``"process 12 (python app.py)"``)."""

    def __init__(self, message: str, holders: str = "another process"):
        super().__init__(message)
        self.holders = holders


class RestoreRunning(LockRefused):
    """A restore holds the database alone; start again when it has finished."""


class FolderUnwritable(LockRefused):
    """The database's folder cannot be written (a read-only disk, say), so its lock file
    cannot be made or opened for writing: nothing can use the database there."""


def lock_path(db_path: str | Path) -> Path:
    """The lock file of the database at `db_path`: ``<db_path>.lock`` beside it; made
    readable by its owner alone (0600), in new folders likewise (0700), as the database.
    A link's target's: the app started on a link and a restore given the file itself (or the
    other way round) take one lock (outside probe 123)."""
    return Path(f"{os.path.realpath(db_path)}{LOCK_SUFFIX}")


def hold_shared(db_path: str | Path) -> BinaryIO | None:
    """Hold a shared lock on `db_path`'s lock file until this process ends.

    Idempotent: calling it again for the same file (building the app many times in one
    process) returns the lock already held.

    Parameters
    ----------
    db_path : str or Path
        The database file; ``":memory:"`` needs no lock (None is returned).

    Returns
    -------
    file or None
        The open lock file; it is kept open by this module, so callers may drop it.

    Raises
    ------
    RestoreRunning
        If a restore holds the lock alone.
    FolderUnwritable
        If the lock file cannot be made or opened for writing (a read-only disk).
    """
    if str(db_path) == ":memory:":
        return None
    key = os.path.realpath(lock_path(db_path))
    if key not in _HELD:
        _HELD[key] = _locked(db_path, fcntl.LOCK_SH)
    return _HELD[key]


def let_go(db_path: str | Path) -> None:
    """Give up the shared lock `hold_shared` holds on `db_path` (nothing if none is held): a
    command that removes the database it made, having refused to go on, removes its lock
    file too, and a later `hold_shared` in the same process locks the new file."""
    if str(db_path) == ":memory:":
        return
    handle = _HELD.pop(os.path.realpath(lock_path(db_path)), None)
    if handle is not None:
        handle.close()


@contextlib.contextmanager
def shared(db_path: str | Path) -> Iterator[None]:
    """Hold a shared lock on `db_path`'s lock file for the block (a short command).

    Raises
    ------
    RestoreRunning
        If a restore holds the lock alone.
    FolderUnwritable
        If the lock file cannot be made or opened for writing (a read-only disk).
    """
    key = os.path.realpath(lock_path(db_path)) if str(db_path) != ":memory:" else None
    if key is None or key in _HELD:
        yield
        return
    with _locked(db_path, fcntl.LOCK_SH) as handle:
        _HELD[key] = handle  # for `alone`, while the block runs
        try:
            yield
        finally:
            _HELD.pop(key, None)


@contextlib.contextmanager
def exclusive(db_path: str | Path) -> Iterator[None]:
    """Hold `db_path`'s lock file alone for the block, or refuse at once.

    Raises
    ------
    DatabaseInUse
        If any process, this one included, holds a shared lock: the message names the
        lock file, the processes holding it where the system says (Linux ``/proc/locks``),
        and what to do.
    FolderUnwritable
        If the lock file cannot be made or opened for writing (a read-only disk).
    """
    with _locked(db_path, fcntl.LOCK_EX):
        yield


@contextlib.contextmanager
def alone(db_path: str | Path) -> Iterator[None]:
    """Hold `db_path`'s lock alone for the block, or refuse at once; a shared lock this
    process holds on it (`hold_shared`, `shared`) is made exclusive for the block and shared
    again after it.

    Raises
    ------
    DatabaseInUse
        If another process holds the lock: the message and ``holders`` name them.
    RestoreRunning
        If this process's shared lock could not be taken back after a refusal (a restore
        took the lock alone in between).
    FolderUnwritable
        If the lock file cannot be made or opened for writing (a read-only disk).
    """
    if str(db_path) == ":memory:":
        yield
        return
    key = os.path.realpath(lock_path(db_path))
    own = _HELD.get(key)
    if own is None:
        with _locked(db_path, fcntl.LOCK_EX):
            yield
        return
    try:
        fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holders = _holders(own, exclude=os.getpid())
        try:
            # Linux drops the shared lock before it tries the exclusive one: take it back.
            fcntl.flock(own, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            _HELD.pop(key, None)
            own.close()
            raise RestoreRunning(
                f"the database {str(db_path)!r} is held alone by {_holders_of(db_path)}; "
                "start again when it has finished"
            ) from None
        raise DatabaseInUse(
            f"the database {str(db_path)!r} is in use (its lock {lock_path(db_path).name} is held by "
            f"{holders})",
            holders,
        ) from None
    try:
        yield
    finally:
        fcntl.flock(own, fcntl.LOCK_SH)


def _holders_of(db_path: str | Path) -> str:
    with open(lock_path(db_path), "rb") as handle:
        return _holders(handle)


def _locked(db_path: str | Path, kind: int) -> BinaryIO:
    path = lock_path(db_path)
    try:
        make_private_parents(path)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            handle = os.fdopen(descriptor, "a+b")  # kept open for as long as the lock is held
        except BaseException:
            os.close(descriptor)
            raise
    except OSError as error:
        raise FolderUnwritable(
            f"the database's folder {str(path.parent)!r} cannot be written ({error.strerror}), so its "
            f"lock {path.name} cannot be made or opened, and the app and every command write beside the "
            "database; if its disk was made read-only, copy the database (with any -wal file "
            "beside it) to a writable disk and give that path"
        ) from None
    try:
        fcntl.flock(handle, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        holders = _holders(handle)
        handle.close()
        if kind == fcntl.LOCK_SH:
            raise RestoreRunning(
                f"the database {str(db_path)!r} is held alone by {holders} (a restore, or a start "
                "migrating it to a newer schema); start again when it has finished"
            ) from None
        raise DatabaseInUse(
            f"the database {str(db_path)!r} is in use (its lock {path.name} is held by {holders}); "
            "stop the app (and any evaluation run) first",
            holders,
        ) from None
    return handle


def _holders(handle: BinaryIO, exclude: int | None = None) -> str:
    """The processes holding a flock on `handle`'s file, e.g. ``process 12 (python -m app)``,
    less process `exclude`."""
    info = os.fstat(handle.fileno())
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
                pids.append(fields[4])
    pids = [pid for pid in pids if pid != str(exclude)]
    if not pids:
        return "another process"
    return ", ".join(f"process {pid}{_command(pid)}" for pid in sorted(set(pids), key=int))


def _command(pid: str) -> str:
    with contextlib.suppress(OSError):
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        text = " ".join(" ".join(w.decode(errors="replace").split()) for w in words if w)
        if len(text) > 80:  # cut between words, said so (it stopped inside a path: "/tmp/outs")
            text = text[:80].rsplit(" ", 1)[0] + " …"
        return f" ({text})" if text else ""
    return ""
