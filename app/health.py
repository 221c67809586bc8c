"""Whether a serving app can take work: what ``/healthz`` checks once the app is ready.

A supervisor or load balancer asks ``/healthz`` (`app.guard.HEALTH`) to learn whether to send
people to this app. Serving pages is not enough: on a full disk, or while another process
holds the database's write lock, every sign-in and submission fails. `Health.problem` says so
in one line, or None: the disks of the database and of the data folder have at least
`MIN_FREE_BYTES` free, and the database takes a write (``BEGIN IMMEDIATE``, rolled back at
once, waiting at most `LOCK_WAIT_S` for another writer: a health check's own timeout is
often 1 s). One check serves every request of `CHECK_EVERY_S`, so asking often (or a visitor
asking in a loop) adds at most one brief write lock a second. Anyone may ask, so the answer
names no path; the log does.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from storage.db import write_refused

MIN_FREE_BYTES = 16 * 2**20
"""Free space below which the app reports it cannot take work (a coloring is ~0.1-0.5 MB)."""
LOCK_WAIT_S = 0.5
CHECK_EVERY_S = 1.0
log = logging.getLogger(__name__)


class Health:
    """The write-readiness check of one app's database and data folder.

    Parameters
    ----------
    db_path : str or Path
        The database file (``":memory:"``: no file to check).
    data_dir : str or Path
        The data folder.
    """

    def __init__(self, db_path: str | Path, data_dir: str | Path) -> None:
        self.db_path, self.data_dir = str(db_path), Path(data_dir)
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._last: str | None = None

    def problem(self) -> str | None:
        """Why the app cannot take work now, in one line, or None (checked at most once per
        `CHECK_EVERY_S`; callers in between get the last answer)."""
        with self._lock:
            if time.monotonic() - self._checked >= CHECK_EVERY_S:
                problem = self._probe()
                if problem and problem != self._last:  # the operator's log names the paths
                    log.warning(
                        "cannot take work: %s (database %s, data folder %s)",
                        problem,
                        self.db_path,
                        self.data_dir,
                    )
                self._last, self._checked = problem, time.monotonic()
            return self._last

    def _probe(self) -> str | None:
        # The answer goes to anyone who asks (a load balancer has no session): it names the
        # folder by its role, never its path, as the page names no server path either.
        folders = [("data folder", self.data_dir)]
        if self.db_path != ":memory:":
            folders.insert(0, ("database", Path(self.db_path).resolve().parent))
        for what, folder in folders:
            try:
                free = shutil.disk_usage(folder).free
            except OSError as error:
                return f"the {what}'s folder cannot be read ({error.strerror or type(error).__name__})"
            if free < MIN_FREE_BYTES:
                return (
                    f"the disk of the {what} is (nearly) full: {free / 2**20:.1f} MB free, under the "
                    f"{MIN_FREE_BYTES // 2**20} MB the app keeps free to take work"
                )
        if self.db_path == ":memory:":
            return None
        if not Path(self.db_path).exists():
            return "the database file is not there any more (moved or deleted while the app runs)"
        refused = write_refused(self.db_path, LOCK_WAIT_S)
        if refused:
            return f"the database takes no write ({refused}; waited {LOCK_WAIT_S:g} s)"
        return None
