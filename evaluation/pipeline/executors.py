"""How a run's work is carried out: one small interface and an in-process implementation.

A stage hands the executor a *work* callable and batches of item rows (plain dicts). The
executor applies the work to every batch and passes each batch's result rows to
``on_result`` **in the calling process**, which records them in the database and reports
progress. Work only reads its batch and writes files; it never touches the database, so
a distributed executor (workers on other machines sharing the data directory, results
shipped back) needs only a new class with the same ``run`` method:
`evaluation.pipeline.ray_executor.RayExecutor` is one. For it, work must also pickle cheaply (load
models on first use, not in ``__init__``) and be deterministic, since a batch whose worker
died is run again; work marked ``stateless = True`` holds no model and may run as plain
tasks instead of long-lived workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

Batch = list[dict]
Work = Callable[[Batch], Batch]
OnResult = Callable[[Batch], None]


class Executor(Protocol):
    """Runs work over batches of items."""

    def run(self, work: Work, batches: Iterable[Batch], on_result: OnResult) -> None:
        """Apply `work` to every batch and call `on_result` with each batch's results.

        `on_result` is called in the caller's process, once per batch, in any order; an
        exception it raises stops the run (the batches already passed to it are kept).
        """


class InProcessExecutor:
    """Runs the batches one after another in this process (the work's models load once)."""

    def run(self, work: Work, batches: Iterable[Batch], on_result: OnResult) -> None:
        """See `Executor.run`."""
        for batch in batches:
            on_result(work(batch))
