"""Times the app's write lock (`storage.db._WRITERS`) for `bench.bench_load`'s sweep.

Python imports this module at start-up when this folder is on ``PYTHONPATH``; it acts only
when ``COLORCONCEPT_BENCH_LOCK_TRACE`` names a file, and then replaces the lock with one
that records, per write transaction, the seconds spent waiting for it and holding it. The
file gets ``{"waits": [...], "holds": [...]}`` every second and when the process is
terminated. Benchmarks only: nothing in the app imports it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

PATH = os.environ.get("COLORCONCEPT_BENCH_LOCK_TRACE")


class TimedLock:
    """A context manager around `lock` that records wait and hold times, in seconds."""

    def __init__(self, lock) -> None:
        self.lock, self.local = lock, threading.local()
        self.waits: list[float] = []
        self.holds: list[float] = []

    def __enter__(self) -> None:
        start = time.perf_counter()
        self.lock.acquire()
        self.local.acquired = time.perf_counter()
        self.waits.append(self.local.acquired - start)

    def __exit__(self, *exc) -> None:
        self.holds.append(time.perf_counter() - self.local.acquired)
        self.lock.release()

    def dump(self, path: str) -> None:
        temporary = (
            f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # the timer and the handler may both write
        )
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump({"waits": list(self.waits), "holds": list(self.holds)}, file)
        os.replace(temporary, path)


def _install(path: str) -> None:
    import storage.db  # the checkout is on PYTHONPATH after this folder

    timed = storage.db._WRITERS = TimedLock(storage.db._WRITERS)

    def every_second() -> None:
        # SIGTERM must reach the main thread, where Python runs its handler: a signal the
        # kernel hands to this thread would wait until the main thread next runs bytecode.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        while True:
            time.sleep(1.0)
            timed.dump(path)

    def on_term(signum, frame) -> None:
        timed.dump(path)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=every_second, daemon=True).start()
    signal.signal(signal.SIGTERM, on_term)


# Only the process started with the variable traces: the app's coloring workers inherit
# it, and their empty records would overwrite the main process's file.
_OWNER = "COLORCONCEPT_BENCH_LOCK_TRACE_OWNER"
if PATH and os.environ.setdefault(_OWNER, str(os.getpid())) == str(os.getpid()):
    _install(PATH)
