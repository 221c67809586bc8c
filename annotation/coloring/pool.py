"""A process pool for the CPU-bound half of a designer's submission.

Decoding the canvas, the paint check, the composite, the extraction and the PNG encodes
(`annotation.coloring.canvas.prepare_canvas`) hold the GIL: in the app's request threads
they run one at a time and make every other request (sign-in, the task view, votes)
wait behind them. In a pool of processes they use every core, and the server thread
keeps only what must stay there: the database reads before, the two file writes and the
one short write transaction after (`annotation.coloring.store.store_prepared`).

The workers write nothing, so a SIGKILL of the app while they are busy cannot leave a
partial row or file. They are spawned (not forked: the app has threads) and each
watches its parent through a pidfd, exiting as soon as the app is gone, however it
ended (`multiprocessing`'s own queues keep a dead parent's workers waiting forever, and a
fork server outlives its parent; measured in ``tests/app/test_faults.py``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

# Imported here so that each spawned worker, which imports this module to start, has the
# submit path loaded before the first submission reaches it.
from annotation.coloring import canvas  # noqa: F401
from storage.shown import shown

_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
ENV_WORKERS = "COLORCONCEPT_WORKERS"


def default_workers() -> int:
    """Worker processes for this machine: `ENV_WORKERS` if set, else one per core."""
    text = os.environ.get(ENV_WORKERS, "").strip()
    if text:
        if not text.isdigit():
            raise ValueError(f"${ENV_WORKERS} must be a whole number >= 0 (0: no pool), got {shown(text)}")
        return int(text)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _worker_start(app_pid: int) -> None:
    """In each worker: exit when the app process ends (the submit path is imported with this module).

    A terminal's Ctrl-C reaches every process of the app's group; the workers ignore it and
    the app closes them (each printed a KeyboardInterrupt traceback and died).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        watched = os.pidfd_open(app_pid)
    except ProcessLookupError:
        os._exit(0)

    def watch() -> None:
        select.select([watched], [], [])  # readable once the process has ended
        os._exit(0)

    threading.Thread(target=watch, name="watch-app", daemon=True).start()


def _pid_after(seconds: float) -> int:
    """This worker's process id, after `seconds` (keeps it busy so that others start)."""
    time.sleep(seconds)
    return os.getpid()


class ColoringPool:
    """`workers` processes that run `prepare_canvas` (or any picklable function).

    Parameters
    ----------
    workers : int
        Processes, >= 1.
    """

    def __init__(self, workers: int):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"`workers` must be a whole number >= 1, got {shown(workers)}")
        self.workers = workers
        self._lock = threading.Lock()
        self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_start,
            initargs=(os.getpid(),),
        )

    def warm(self) -> None:
        """Start every worker now rather than on the first submissions.

        The executor starts a worker for a call only when none is idle, so a call that
        ends at once can leave the others unstarted; each round keeps every worker busy
        for a moment, until all of them have answered one (a few rounds at most). A worker
        that dies meanwhile (outside probe 107 saw one at a start on a busy machine) costs
        a warning and a new pool, as in `run`; a pool that breaks three times is raised.
        """
        answered: set[int] = set()
        breaks = 0
        for _ in range(20):
            executor, pids = self._executor, self.pids()
            # A worker counts once it has answered: its start (`_worker_start`) has run.
            if len(pids) >= self.workers and answered >= set(pids):
                return
            try:
                futures = [executor.submit(_pid_after, 0.05) for _ in range(self.workers)]
                answered |= {future.result() for future in futures}
            except BrokenProcessPool:
                breaks += 1
                if breaks == 3:
                    raise
                self._replace(executor)
                answered = set()

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A new executor in place of `broken`, unless another thread replaced it first."""
        with self._lock:
            if self._executor is broken:
                _LOG.warning("a coloring worker died; starting a new pool")
                self._executor = self._new_executor()

    def pids(self) -> list[int]:
        """Process ids of the current workers (for tests and the fault benchmark)."""
        return sorted(getattr(self._executor, "_processes", {}) or {})

    def run(self, fn: Callable[..., _T], *args) -> _T:
        """``fn(*args)`` in a worker; its exceptions are raised here.

        If a worker died (the pool is broken), the pool is replaced and this call runs
        ``fn`` in the calling thread, so no request fails for it.
        """
        executor = self._executor
        try:
            return executor.submit(fn, *args).result()
        except BrokenProcessPool:
            self._replace(executor)
            return fn(*args)

    def close(self) -> None:
        """Stop the workers (queued calls are cancelled)."""
        self._executor.shutdown(wait=True, cancel_futures=True)
