"""Simulated designers spread over several client processes, each pinned to given CPUs.

One Python process of designer threads (`bench.designer_client.designers_in_threads`)
is bound by its GIL at about 14 submissions/s (about 72 ms of client CPU each,
`bench.bench_cpu`), so on its own it cannot show a server faster than that. (Light
clients, ``transport="http"`` with canvas values prepared before, cost about 5 ms each.)
`ClientProcesses` starts `processes` spawned processes before anything is timed; each
imports the client code, then waits. `ClientProcesses.run` hands each a contiguous share
of the designers (threads inside it, as in one process), and of the canvas values prepared
before the clock if any, and gathers their acks back in the order of the designers::

    with ClientProcesses(6, cpus=range(2, 16)) as clients:
        acks = clients.run(url, db_path, data_dir, designers, seeds, count=20)
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from bench.designer_client import Ack, PreparedValues, SketchLayers, designers_in_threads

START_TIMEOUT_S = 120.0


class ClientProcesses:
    """`processes` client processes, started and ready; ``with`` ends them.

    Parameters
    ----------
    processes : int
        How many processes (at least 1).
    cpus : iterable of int, optional
        CPU numbers the processes may run on (Linux affinity); default: all.
    """

    def __init__(self, processes: int, *, cpus: Iterable[int] | None = None):
        if processes < 1:
            raise ValueError(f"`processes` must be at least 1, got {processes}")
        context = multiprocessing.get_context("spawn")
        self._results = context.Queue()
        self._jobs = [context.Queue() for _ in range(processes)]
        cpus = None if cpus is None else sorted(set(cpus))
        self._processes = [
            context.Process(target=_serve, args=(i, cpus, jobs, self._results), daemon=True)
            for i, jobs in enumerate(self._jobs)
        ]
        for process in self._processes:
            process.start()
        for _ in self._processes:
            self._receive("ready")

    def run(
        self,
        url: str,
        db_path: str | Path,
        data_dir: str | Path,
        designers: Sequence[tuple[int, str]],
        seeds: Sequence[int],
        count: int,
        *,
        prepared: PreparedValues | None = None,
        **options,
    ) -> list[Ack]:
        """Every designer at once against `url`, shared out over the processes; all acks.

        `designers` are ``(annotator id, invite token)``, `seeds` one per designer;
        `prepared`, if given, is shared out too (each process gets a disjoint share, in
        proportion to its designers) and its `PreparedValues.fallbacks` grows by the
        processes' own; `options` (``pace``, ``until``, ``transport``) go to every
        `bench.designer_client.designer_session`.
        """
        shares = np.array_split(np.arange(len(designers)), len(self._processes))
        values = (
            prepared.share_out([len(s) for s in shares]) if prepared is not None else [None] * len(shares)
        )
        for jobs, share, own in zip(self._jobs, shares, values, strict=True):
            chosen = [tuple(designers[j]) for j in share]
            seeded = [int(seeds[j]) for j in share]
            jobs.put((url, str(db_path), str(data_dir), chosen, seeded, count, own, options))
        done = dict(self._receive("acks") for _ in shares)
        if prepared is not None:
            prepared.fallbacks += sum(fallbacks for _, fallbacks in done.values())
        return [ack for i in range(len(shares)) for ack in done[i][0]]

    def _receive(self, kind: str):
        """The next ``(process index, payload)`` of `kind` (``"ready"``, ``"acks"``: the
        acks and how many canvas values were encoded on the spot)."""
        waited = 0.0
        while True:
            try:
                index, got, payload = self._results.get(timeout=1.0)
                break
            except queue.Empty:
                waited += 1.0
                dead = [i for i, p in enumerate(self._processes) if not p.is_alive()]
                if dead or (kind == "ready" and waited > START_TIMEOUT_S):
                    raise RuntimeError(f"client processes {dead} ended, or none was ready") from None
        if got != kind:
            raise RuntimeError(f"client process {index} failed:\n{payload}")
        return index, payload

    def close(self) -> None:
        """Ask every process to end; kill those still running after 10 s."""
        for jobs in self._jobs:
            jobs.put(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()

    def __enter__(self) -> ClientProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(index: int, cpus: list[int] | None, jobs, results) -> None:
    """A client process: pin, say ready, then run each job's designers until told to end."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    results.put((index, "ready", os.getpid()))
    while (job := jobs.get()) is not None:
        url, db_path, data_dir, designers, seeds, count, own, options = job
        try:
            prepared = PreparedValues(own) if own is not None else None
            layers = SketchLayers(db_path, data_dir, prepared)
            acks = designers_in_threads(url, designers, seeds, layers, count, **options)
            results.put((index, "acks", (acks, prepared.fallbacks if prepared is not None else 0)))
        except Exception:
            results.put((index, "error", traceback.format_exc()))
