"""A run's stages on a Ray cluster: model-holding actors, stateless tasks, results to the head.

`RayExecutor` implements `evaluation.pipeline.executors.Executor` with Ray Core. Work that holds
models (`GenerationWork`, `SegmentationWork`) runs in long-lived actors, one per GPU (or
per CPU when the cluster has none), so each worker loads its pipeline once; stateless work
(`ExtractionWork`, marked ``stateless = True``) runs as Ray tasks. Workers write the
items' files into the run folder and return result rows; `on_result` runs in the calling
process, the only one that writes SQLite. An actor whose process dies is restarted by Ray
and its unfinished calls are retried (``max_restarts`` / ``max_task_retries``); a task is
retried (``max_retries``). Work is deterministic and files are named by their content, so
a retried batch writes the same files and returns the same rows.

Ray is optional: importing this module does not import Ray; `connect` raises
`RayUnavailable` with what to do when Ray is missing or no cluster answers.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluation.pipeline.executors import Batch, OnResult, Work

INSTALL_HINT = "pip install 'ray[default]>=2.60' (requirements.txt lists it)"
#: Ray resources asked per worker of each stage when the cluster has GPUs: a generation
#: actor holds a whole pipeline; GroundingDINO + SAM fit twice on one GPU.
GPU_SHARE = {"generate": 1.0, "segment": 0.5, "extract": 0.0}
#: Times Ray restarts a dead actor or retries a failed call before the run fails.
MAX_RETRIES = 3


class RayUnavailable(ValueError):
    """Ray is not installed, or no Ray cluster answers at the address given."""


@dataclass(frozen=True)
class ClusterInfo:
    """What a Ray cluster offers.

    Attributes
    ----------
    address : str
        The GCS address the driver is connected to.
    nodes : int
        Alive nodes.
    cpus, gpus : float
        Total logical CPUs and GPUs over the alive nodes.
    """

    address: str
    nodes: int
    cpus: float
    gpus: float

    def describe(self) -> str:
        """One line, e.g. ``3 node(s), 48 CPU(s), 8 GPU(s) at 10.0.0.1:6379``."""
        return f"{self.nodes} node(s), {self.cpus:g} CPU(s), {self.gpus:g} GPU(s) at {self.address}"


@dataclass
class WorkerProgress:
    """Items one worker returned, where it runs, and how often its process changed (restarts)."""

    node: str = ""
    pids: list[int] = field(default_factory=list)
    items: int = 0
    batches: int = 0

    @property
    def restarts(self) -> int:
        """Process changes seen, i.e. restarts of this actor that returned results."""
        return max(len(self.pids) - 1, 0)


def resolve_address(address: str | None) -> str | None:
    """`address`, else ``$RAY_ADDRESS``, else None (start or find a local cluster)."""
    address = (address or "").strip() or os.environ.get("RAY_ADDRESS", "").strip()
    return address or None


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast on a ``host:port`` nobody listens on (``ray.init`` would retry for a minute)."""
    if "://" in address or address in ("auto", "local"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailable(
            f"`ray_address` must be host:port (e.g. 10.0.0.1:6379), 'auto' or 'local', got {address!r}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailable(
            f"no Ray cluster reachable at {address!r} ({exc.strerror or exc}); start one with "
            f"`ray start --head` there, or leave the address empty for a local cluster"
        ) from None


def _same_address(a: str, b: str) -> bool:
    """Whether two ``host:port`` name the same head (Ray reports the node IP for 127.0.0.1)."""
    (host_a, _, port_a), (host_b, _, port_b) = a.rpartition(":"), b.rpartition(":")
    loopback = {"127.0.0.1", "localhost"}
    return port_a == port_b and (host_a == host_b or bool({host_a, host_b} & loopback))


def connect(
    address: str | None = None, *, num_cpus: int | None = None, timeout_s: float = 5.0
) -> ClusterInfo:
    """Connect this process to a Ray cluster (later calls for the same cluster reuse it).

    Parameters
    ----------
    address : str, optional
        ``host:port`` of a running cluster's head (``ray start --head`` prints it),
        ``"auto"`` (the cluster started on this machine), or ``"local"`` (always a new
        local cluster). Empty or None: ``$RAY_ADDRESS``, else Ray's default (the cluster
        started on this machine, else a new local one).
    num_cpus : int, optional
        CPUs of a new local cluster (ignored when joining one).
    timeout_s : float
        How long to wait for the head's port to answer, in seconds.

    Raises
    ------
    RayUnavailable
        Ray is not installed, or nothing answers at `address`.
    """
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"the Ray executor needs Ray, which is not installed: {INSTALL_HINT}") from None
    address = resolve_address(address)
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address in (None, "auto", "local") or _same_address(address, current):
            return cluster_info()
    if address is not None:
        _check_reachable(address, timeout_s)
    if ray.is_initialized():  # another cluster than the one this process is connected to
        ray.shutdown()
    local = address in (None, "local")
    try:
        ray.init(
            address=address,
            num_cpus=num_cpus if local else None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise RayUnavailable(f"no Ray cluster reachable at {address or 'this machine'!r}: {exc}") from None
    return cluster_info()


def cluster_info() -> ClusterInfo:
    """Nodes, CPUs and GPUs of the cluster this process is connected to."""
    import ray

    alive = [node for node in ray.nodes() if node.get("Alive")]
    resources = ray.cluster_resources()
    return ClusterInfo(
        ray.get_runtime_context().gcs_address,
        len(alive),
        float(resources.get("CPU", 0)),
        float(resources.get("GPU", 0)),
    )


def shutdown() -> None:
    """Disconnect (and stop a local cluster this process started); a no-op without Ray."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()


class _StageWorker:
    """Holds one stage's work (its models load on the first call) and applies it to batches."""

    def __init__(self, work: Work):
        self.work = work

    def pid(self) -> int:
        return os.getpid()

    def process(self, batch: Batch) -> tuple[str, int, Batch]:
        return socket.gethostname(), os.getpid(), self.work(batch)


def _apply(work: Work, batch: Batch) -> tuple[str, int, Batch]:
    return socket.gethostname(), os.getpid(), work(batch)


class RayExecutor:
    """Runs a stage's batches on the connected Ray cluster (see `connect`).

    Parameters
    ----------
    workers : int, optional
        Actors (or concurrent tasks) for the stage. Default: one per free GPU share when
        `gpus_per_worker` > 0, else one per free CPU of the cluster (at least one).
    gpus_per_worker : float
        GPUs each worker reserves (Ray sets its ``CUDA_VISIBLE_DEVICES``); 0 on a CPU cluster.
    cpus_per_worker : float
        CPUs each worker reserves.
    in_flight : int
        Batches queued per worker, so that a worker never waits for the head.
    max_retries : int
        Restarts of a dead actor, and retries of its unfinished calls or of a failed task.

    Notes
    -----
    `work` must pickle cheaply (the stage works load their models on first use) and must
    only write files and return rows. ``progress()`` gives the per-worker counts of the
    stage in progress, from any thread.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        gpus_per_worker: float = 0.0,
        cpus_per_worker: float = 1.0,
        in_flight: int = 2,
        max_retries: int = MAX_RETRIES,
    ):
        if workers is not None and workers < 1:
            raise ValueError(f"`workers` must be a positive integer, got {workers}")
        if in_flight < 1:
            raise ValueError(f"`in_flight` must be a positive integer, got {in_flight}")
        self.workers, self.gpus, self.cpus = workers, float(gpus_per_worker), float(cpus_per_worker)
        self.in_flight, self.max_retries = in_flight, max_retries
        self._lock = threading.Lock()
        self._progress: dict[str, WorkerProgress] = {}
        self.actors: list[Any] = []
        self._by_process = False

    @classmethod
    def for_stage(cls, stage: str, cluster: ClusterInfo, workers: int | None = None) -> RayExecutor:
        """The executor of `stage` (``generate``, ``segment``, ``extract``): a GPU share
        per worker from `GPU_SHARE` when the cluster has GPUs, else one CPU."""
        if stage not in GPU_SHARE:
            raise ValueError(f"`stage` must be one of {sorted(GPU_SHARE)}, got {stage!r}")
        return cls(workers, gpus_per_worker=GPU_SHARE[stage] if cluster.gpus > 0 else 0.0)

    def progress(self) -> dict[str, WorkerProgress]:
        """Worker name -> its progress in the current (or last) stage; a copy."""
        with self._lock:
            return {
                name: WorkerProgress(p.node, list(p.pids), p.items, p.batches)
                for name, p in self._progress.items()
            }

    def _worker_count(self) -> int:
        # What is free now, not the cluster's total: an actor that cannot be placed would
        # hold its queued batches until resources free up (e.g. a killed head's workers).
        if self.workers is not None:
            return self.workers
        import ray

        free = ray.available_resources()
        if self.gpus > 0:
            return max(int(free.get("GPU", 0) / self.gpus), 1)
        return max(int(free.get("CPU", 0) / self.cpus), 1)

    def _note(self, name: str, node: str, pid: int, n_items: int) -> None:
        with self._lock:
            entry = self._progress.setdefault(name, WorkerProgress())
            entry.node = node
            if not entry.pids or entry.pids[-1] != pid:
                entry.pids.append(pid)
            entry.items += n_items
            entry.batches += 1

    def run(self, work: Work, batches: Iterable[Batch], on_result: OnResult) -> None:
        """See `evaluation.pipeline.executors.Executor.run`: results reach `on_result` as they finish."""
        import ray

        pending = deque(batches)
        with self._lock:
            self._progress = {}
        if not pending:
            return
        n = min(self._worker_count(), len(pending))
        self._by_process = bool(getattr(work, "stateless", False))
        if self._by_process:
            task = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=self.max_retries)(_apply)
            work_ref = ray.put(work)
            submitters = [lambda batch: task.remote(work_ref, batch)] * n
        else:
            actor_class = ray.remote(
                num_cpus=self.cpus,
                num_gpus=self.gpus,
                max_restarts=self.max_retries,
                max_task_retries=self.max_retries,
            )(_StageWorker)
            self.actors = [actor_class.remote(work) for _ in range(n)]
            submitters = [actor.process.remote for actor in self.actors]
        try:
            self._dispatch(submitters, pending, on_result)
        finally:
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
            self.actors = []

    def _dispatch(self, submitters: list, pending: deque, on_result: OnResult) -> None:
        import ray

        running: dict[Any, int] = {}

        def submit(worker: int) -> None:
            if pending:
                running[submitters[worker](pending.popleft())] = worker

        for _ in range(self.in_flight):
            for worker in range(len(submitters)):
                submit(worker)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            worker = running.pop(ready[0])
            node, pid, results = ray.get(ready[0])
            name = f"{node} pid {pid}" if self._by_process else f"worker {worker}"
            self._note(name, node, pid, len(results))
            on_result(results)
            submit(worker)
