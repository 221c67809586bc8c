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

import contextlib
import functools
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evaluation.pipeline.executors import Batch, OnResult, Work
from storage.shown import shown

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
    """Items one worker returned, where it runs, its state and Ray's count of its restarts.

    Attributes
    ----------
    node : str
        Where it last ran, by Ray node id and IP (`describe_node`), not the host name:
        two nodes on one machine differ.
    node_id : str
        Ray's full node id.
    pids : list of int
        Its processes, in the order seen.
    items, batches : int
        What it returned (a batch lost with a dead process is counted where it was redone).
    state : str
        ``up``, ``down`` (died; Ray restarts it) or ``lost`` (Ray gave it up).
    ray_restarts : int
        Restarts in Ray's actor table (``NumRestarts``).
    deaths : int
        Times the head saw its process (or node) die: its calls failed.
    lost_batches, lost_items : int
        Batches (and their items) that were in flight when it died, sent again to a worker.
    """

    node: str = ""
    node_id: str = ""
    pids: list[int] = field(default_factory=list)
    items: int = 0
    batches: int = 0
    state: str = "up"
    ray_restarts: int = 0
    deaths: int = 0
    lost_batches: int = 0
    lost_items: int = 0

    @property
    def restarts(self) -> int:
        """Restarts of this worker: Ray's count, or the deaths or process changes the head
        saw if more (Ray counts a node's death only once it has declared the node dead)."""
        return max(self.ray_restarts, self.deaths, len(self.pids) - 1, 0)


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
            f"`ray_address` must be host:port (e.g. 10.0.0.1:6379), 'auto' or 'local', got {shown(address)}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailable(
            f"no Ray cluster reachable at {address!r} ({exc.strerror or exc}); start one with "
            f"`ray start --head` there, or leave the address empty for a local cluster"
        ) from None
    if not _speaks_grpc(address, timeout_s):
        raise RayUnavailable(
            f"{address!r} answers but is no Ray cluster's head (no gRPC within {timeout_s:g} s): give the "
            "GCS port `ray start --head` printed (6379 unless --port said otherwise), not the dashboard's "
            "or another service's"
        )


def _speaks_grpc(address: str, timeout_s: float) -> bool:
    """Whether `address` completes a gRPC (HTTP/2) handshake within `timeout_s` seconds.

    Ray's GCS client and ``ray.init`` retry a port that accepts connections but speaks
    something else (the dashboard's HTTP, a web app) for minutes: a researcher's *Check
    cluster* on such a port hung (outside probe 147). Ray's own channel factory, so that
    ``RAY_USE_TLS`` is honoured; the token is checked after (`_check_auth`)."""
    import grpc
    from ray._private.grpc_utils import init_grpc_channel

    channel = init_grpc_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def _same_address(a: str, b: str) -> bool:
    """Whether two ``host:port`` name the same head (Ray reports the node IP for 127.0.0.1)."""
    (host_a, _, port_a), (host_b, _, port_b) = a.rpartition(":"), b.rpartition(":")
    loopback = {"127.0.0.1", "localhost"}
    return port_a == port_b and (host_a == host_b or bool({host_a, host_b} & loopback))


class _Holds:
    """How many jobs use this process's Ray connection now (the connection is per process)."""

    def __init__(self) -> None:
        self.lock, self.count = threading.Lock(), 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            self.count += 1
        try:
            yield
        finally:
            with self.lock:
                self.count -= 1


#: ``with holding():`` marks this process's Ray connection as in use by a job: `connect` to
#: another address then describes that cluster from a child process instead of leaving this one.
holding = _Holds()

AUTH_HINT = (
    "set RAY_AUTH_MODE=token in this process's environment and give it the head's token "
    "(~/.ray/auth_token, $RAY_AUTH_TOKEN or $RAY_AUTH_TOKEN_PATH), see docs/scale-out.md"
)


def _check_auth(address: str) -> None:
    """Ask the head's GCS for the cluster id: a missing or wrong token is refused at once
    (``ray.init`` would retry for 20 s and then say only that it could not connect)."""
    import ray

    if "://" in address or address in ("auto", "local"):
        return
    try:
        from ray._raylet import GcsClient

        GcsClient(address=address)
    except ray.exceptions.AuthenticationError:
        mode = os.environ.get("RAY_AUTH_MODE", "") or "unset"
        raise RayUnavailable(
            f"the Ray cluster at {address!r} answered but refused this process: token authentication "
            f"failed (RAY_AUTH_MODE is {mode}); {AUTH_HINT}"
        ) from None
    except Exception:  # anything else: ray.init below says what it is
        return


def connect(
    address: str | None = None, *, num_cpus: int | None = None, timeout_s: float = 5.0, switch: bool = False
) -> ClusterInfo:
    """Connect this process to a Ray cluster (later calls for the same cluster reuse it).

    A process holds one Ray connection. While a job uses it (`holding`), asking for
    another address does not leave it: that cluster is described from a child process,
    or, with `switch`, refused.

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
    switch : bool
        The caller will run work on the cluster (not only describe it): refuse, rather
        than describe, while a job holds a connection to another cluster.

    Raises
    ------
    RayUnavailable
        Ray is not installed, nothing answers at `address`, the head refused this
        process's token, or (with `switch`) a job holds a connection to another cluster.
    """
    # Ray's crash handler, which the connection installs, also takes SIGTERM: a supervisor's
    # stop of the app or a command printed a stack dump and ended in glibc's "corrupted size
    # vs. prev_size" abort (an outside check). Ray reads this when first imported; a local
    # cluster's workers inherit it (their Python tracebacks stay).
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"the Ray executor needs Ray, which is not installed: {INSTALL_HINT}") from None
    address = resolve_address(address)
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address in (None, "auto", "local") or _same_address(address, current):
            return cluster_info()
        if holding.count:
            if switch:
                raise RayUnavailable(
                    f"a job of this process runs on the Ray cluster at {current!r}; a process joins one "
                    f"cluster at a time, so {address or 'a local cluster'!r} waits until that job ends"
                )
            return _describe_elsewhere(address, num_cpus, timeout_s)
    if address is not None:
        _check_reachable(address, timeout_s)
        _check_auth(address)
    if ray.is_initialized():  # another cluster than the one this process is connected to
        _on_a_lasting_thread(ray.shutdown)
    local = address in (None, "local")
    try:
        _on_a_lasting_thread(
            functools.partial(
                ray.init,
                address=address,
                num_cpus=num_cpus if local else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        )
    except ray.exceptions.AuthenticationError:
        raise RayUnavailable(
            f"the Ray cluster at {address!r} refused this process: token authentication failed; {AUTH_HINT}"
        ) from None
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise RayUnavailable(f"no Ray cluster reachable at {address or 'this machine'!r}: {exc}") from None
    return cluster_info()


_lasting: list[ThreadPoolExecutor] = []
_lasting_lock = threading.Lock()


def _on_a_lasting_thread(call: Callable[[], Any]) -> Any:
    """``call()`` in the main thread, or else on this module's one thread, which lasts as
    long as the process.

    The local cluster ``ray.init`` starts dies with the thread that started it (its GCS and
    raylet get SIGKILL when that thread ends: Linux's parent-death signal). The app connects
    from a request's thread, which the server's pool ends when it trims idle threads or
    stops: the cluster went with it, and its agents outlived the app (an outside check).
    """
    if threading.current_thread() is threading.main_thread():
        # ``ray.init`` here sets its own SIGTERM handler (``sys.exit``): the command's (a one
        # line stop, status 143, `evaluation.__main__`) comes back after it.
        before = signal.getsignal(signal.SIGTERM)
        try:
            return call()
        finally:
            if callable(before):
                signal.signal(signal.SIGTERM, before)
    with _lasting_lock:
        if not _lasting:
            _lasting.append(ThreadPoolExecutor(1, thread_name_prefix="ray-connection"))
    return _lasting[0].submit(call).result()


def _describe_elsewhere(address: str | None, num_cpus: int | None, timeout_s: float) -> ClusterInfo:
    """`connect`'s answer for `address` from a child process, leaving this one's connection."""
    import json
    import subprocess

    code = (
        "import dataclasses, json, sys\n"
        "from evaluation.pipeline.ray_executor import RayUnavailable, connect\n"
        "try:\n"
        "    info = connect(sys.argv[1] or None, num_cpus=int(sys.argv[2]) or None, timeout_s=float(sys.argv[3]))\n"
        "except RayUnavailable as exc:\n"
        "    print(json.dumps({'error': str(exc)})); sys.exit(0)\n"
        "print(json.dumps(dataclasses.asdict(info)))\n"
    )
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, address or "", str(num_cpus or 0), str(timeout_s)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        raise RayUnavailable(f"no Ray cluster reachable at {address or 'this machine'!r}") from None
    if "error" in answer:
        raise RayUnavailable(answer["error"])
    return ClusterInfo(**answer)


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


def connected() -> bool:
    """Whether this process holds a Ray connection (Ray is not imported to find out)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def shutdown() -> None:
    """Disconnect (and stop a local cluster this process started); a no-op without Ray."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        _on_a_lasting_thread(ray.shutdown)


def _where() -> tuple[str, str, int]:
    """(Ray node id, node IP, pid) of the calling worker process."""
    import ray

    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), os.getpid()


def describe_node(node_id: str, ip: str) -> str:
    """How a node is named in messages: ``node 1a2b3c4d at 10.0.0.5`` (Ray's node id, cut to 8)."""
    return f"node {node_id[:8]} at {ip}"


class _StageWorker:
    """Holds one stage's work (its models load on the first call) and applies it to batches."""

    def __init__(self, work: Work):
        self.work = work

    def where(self) -> tuple[str, str, int]:
        return _where()

    def process(self, batch: Batch) -> tuple[tuple[str, str, int], Batch]:
        return _where(), self.work(batch)


def _apply(work: Work, batch: Batch) -> tuple[tuple[str, str, int], Batch]:
    return _where(), work(batch)


class RayStageFailed(ValueError):
    """A stage could not go on (no worker left within the wait, or a batch lost too often);
    what was recorded stays and the run is resumable. A ValueError, so the CLI prints one line."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class _Slot:
    """One worker of a stage: an actor (or, for stateless work, a task slot) and its state.

    ``state`` is ``starting`` (created, not heard from), ``up``, ``down`` (a call failed; a
    ping waits for Ray to restart it) or ``lost`` (Ray gave it up)."""

    name: str
    actor: Any = None
    state: str = "starting"
    in_flight: int = 0
    pinging: bool = False


class RayExecutor:
    """Runs a stage's batches on the connected Ray cluster (see `connect`).

    Parameters
    ----------
    workers : int, optional
        Actors (or concurrent tasks) for the stage. Default: one per free GPU share when
        `gpus_per_worker` > 0, else one per free CPU of the cluster (at least one), and
        more while the stage runs as nodes join.
    gpus_per_worker : float
        GPUs each worker reserves (Ray sets its ``CUDA_VISIBLE_DEVICES``); 0 on a CPU cluster.
    cpus_per_worker : float
        CPUs each worker reserves.
    in_flight : int
        Batches queued per worker, so that a worker never waits for the head.
    max_retries : int
        Restarts of a dead actor (by Ray), and times one batch is sent again after the
        worker holding it died, before the stage fails.
    capacity_wait_s : float
        How long, in seconds, a stage with batches left and no live worker waits for one
        (a restarted actor, a joining node) before it fails with `RayStageFailed`.
    resume : str
        How to resume, named in the one-line failure (the CLI gives its command).
    notify : callable, optional
        Receives one line per event (a worker lost, back, joined; waiting for capacity).
        Default: printed to stderr.

    Notes
    -----
    `work` must pickle cheaply (the stage works load their models on first use) and must
    only write files and return rows. A batch whose worker dies (its process, or its
    node) goes back to the queue and is run by the next free worker; work is
    deterministic and files are named by their content, so the redone batch gives the
    same files and rows, and the head records each batch once, when its result arrives.
    ``progress()`` gives the per-worker counts of the stage in progress, from any thread;
    ``redone_batches`` and ``redone_items`` count what was sent again.
    """

    #: Seconds between looks at the cluster for new capacity and restarted workers.
    POLL_S = 1.0

    def __init__(
        self,
        workers: int | None = None,
        *,
        gpus_per_worker: float = 0.0,
        cpus_per_worker: float = 1.0,
        in_flight: int = 2,
        max_retries: int = MAX_RETRIES,
        capacity_wait_s: float = 600.0,
        resume: str = "",
        notify: Callable[[str], None] | None = None,
    ):
        if workers is not None and workers < 1:
            raise ValueError(f"`workers` must be a positive integer, got {workers}")
        if in_flight < 1:
            raise ValueError(f"`in_flight` must be a positive integer, got {in_flight}")
        if not capacity_wait_s >= 0:  # nan too: no wait is ever over it
            raise ValueError(f"`capacity_wait_s` must be >= 0 seconds, got {capacity_wait_s}")
        self.workers, self.gpus, self.cpus = workers, float(gpus_per_worker), float(cpus_per_worker)
        self.in_flight, self.max_retries = in_flight, max_retries
        self.capacity_wait_s, self.resume = float(capacity_wait_s), resume
        self.notify = notify or _stderr
        self._lock = threading.Lock()
        self._progress: dict[str, WorkerProgress] = {}
        self.actors: list[Any] = []
        self._by_process = False
        self.redone_batches = self.redone_items = 0

    @classmethod
    def for_stage(
        cls, stage: str, cluster: ClusterInfo, workers: int | None = None, **options: Any
    ) -> RayExecutor:
        """The executor of `stage` (``generate``, ``segment``, ``extract``): a GPU share
        per worker from `GPU_SHARE` when the cluster has GPUs, else one CPU; `options` as
        the constructor's."""
        if stage not in GPU_SHARE:
            raise ValueError(f"`stage` must be one of {sorted(GPU_SHARE)}, got {shown(stage)}")
        return cls(workers, gpus_per_worker=GPU_SHARE[stage] if cluster.gpus > 0 else 0.0, **options)

    def progress(self) -> dict[str, WorkerProgress]:
        """Worker name -> its progress in the current (or last) stage; a copy."""
        with self._lock:
            return {name: replace(p, pids=list(p.pids)) for name, p in self._progress.items()}

    def fail_message(self, cause: str) -> str:
        """The one line a failed stage ends with: the cause, then how to resume."""
        resume = self.resume or "run the same command again (or press Resume on the Evaluate tab)"
        return f"the stage stopped on Ray: {cause}; what was recorded stays, resume with: {resume}"

    def _worker_count(self) -> int:
        # What is free now, not the cluster's total: an actor that cannot be placed would
        # hold its queued batches until resources free up (e.g. a killed head's workers).
        if self.workers is not None:
            return self.workers
        return max(self._free_workers(), 1)

    def _fits_cluster(self) -> bool:
        """Whether the alive nodes together have room for one worker (busy or not)."""
        import ray

        total = ray.cluster_resources()
        if self.gpus > 0:
            return total.get("GPU", 0) + 1e-9 >= self.gpus
        return total.get("CPU", 0) + 1e-9 >= self.cpus

    def _free_workers(self) -> int:
        import ray

        free = ray.available_resources()
        if self.gpus > 0:
            return int(free.get("GPU", 0) / self.gpus + 1e-9)
        return int(free.get("CPU", 0) / self.cpus + 1e-9)

    def _note(self, name: str, where: tuple[str, str, int], n_items: int | None) -> None:
        """Record where worker `name` runs and, unless `n_items` is None, one batch it returned."""
        node_id, ip, pid = where
        with self._lock:
            entry = self._progress.setdefault(name, WorkerProgress())
            entry.node, entry.node_id, entry.state = describe_node(node_id, ip), node_id, "up"
            if not entry.pids or entry.pids[-1] != pid:
                entry.pids.append(pid)
            if n_items is not None:
                entry.items += n_items
                entry.batches += 1

    def _set_state(self, name: str, state: str) -> None:
        with self._lock:
            entry = self._progress.setdefault(name, WorkerProgress())
            entry.deaths += entry.state == "up" and state in ("down", "lost")
            entry.state = state

    def _lost(self, name: str, n_items: int) -> None:
        """Count one batch of `n_items` that worker `name` held when it died (it is redone)."""
        with self._lock:
            entry = self._progress.setdefault(name, WorkerProgress())
            entry.lost_batches += 1
            entry.lost_items += n_items
            self.redone_batches += 1
            self.redone_items += n_items

    def _count_restarts(self, slots: list[_Slot]) -> None:
        """Each actor's restarts as Ray's actor table counts them (a process Ray restarted
        counts even if it never returned a batch)."""
        for slot in slots:
            restarts = _ray_restarts(slot.actor)
            if restarts is not None:
                with self._lock:
                    entry = self._progress.setdefault(slot.name, WorkerProgress())
                    entry.ray_restarts = max(entry.ray_restarts, restarts)

    def run(self, work: Work, batches: Iterable[Batch], on_result: OnResult) -> None:
        """See `evaluation.pipeline.executors.Executor.run`: results reach `on_result` as they finish."""
        import ray

        pending = deque(enumerate(batches))
        with self._lock:
            self._progress = {}
        self.redone_batches = self.redone_items = 0
        if not pending:
            return
        self._by_process = bool(getattr(work, "stateless", False))
        if self._by_process:
            task = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0)(_apply)
            work_ref = ray.put(work)
            self._start = lambda slot: None
            self._submit = lambda slot, batch: task.remote(work_ref, batch)
        else:
            actor_class = ray.remote(
                num_cpus=self.cpus,
                num_gpus=self.gpus,
                max_restarts=self.max_retries,
                max_task_retries=0,  # a dead worker's batches go back to the queue, to any worker
            )(_StageWorker)

            def start(slot: _Slot) -> Any:
                slot.actor = actor_class.remote(work)
                self.actors.append(slot.actor)
                return slot.actor.where.remote()

            self._start = start
            self._submit = lambda slot, batch: slot.actor.process.remote(batch)
        try:
            with holding():
                _Dispatch(self, pending, on_result).loop(min(self._worker_count(), len(pending)))
        finally:
            for actor in self.actors:
                with contextlib.suppress(Exception):  # an actor whose node is gone
                    ray.kill(actor, no_restart=True)
            self.actors = []


def _ray_restarts(actor: Any) -> int | None:
    """``NumRestarts`` of `actor` in Ray's actor table (None without an actor or a table)."""
    if actor is None:
        return None
    try:
        from ray._private.state import state

        return int(state.actor_table(actor._actor_id.hex()).get("NumRestarts", 0))
    except Exception:  # a private API: the counts degrade to process changes seen
        return None


def _ray_state(actor: Any) -> str:
    """The actor's state in Ray's table (``ALIVE``, ``RESTARTING``, ``DEAD``...), or ``""``."""
    try:
        from ray._private.state import state

        return str(state.actor_table(actor._actor_id.hex()).get("State", ""))
    except Exception:
        return ""


class _Dispatch:
    """One stage's loop: keeps every live worker fed, requeues a dead worker's batches,
    adds workers as capacity appears, and gives up only after the capacity wait."""

    def __init__(self, executor: RayExecutor, pending: deque, on_result: OnResult):
        self.x, self.pending, self.on_result = executor, pending, on_result
        self.slots: list[_Slot] = []
        self.calls: dict[Any, tuple[_Slot, tuple[int, Batch] | None]] = {}  # ref -> (slot, batch or ping)
        self.attempts: dict[int, int] = {}
        self.waiting_since: float | None = None
        self.waiting_for = ""
        self.announced = False
        self.next_look = 0.0

    def add_worker(self) -> _Slot:
        prefix = "task" if self.x._by_process else "worker"
        slot = _Slot(f"{prefix} {len(self.slots)}")
        self.slots.append(slot)
        ping = self.x._start(slot)
        if ping is not None:
            self.calls[ping] = (slot, None)
        else:
            slot.state = "up"
        return slot

    def feed(self) -> None:
        for slot in self.slots:
            while self.pending and slot.state in ("starting", "up") and slot.in_flight < self.x.in_flight:
                entry = self.pending.popleft()
                self.calls[self.x._submit(slot, entry[1])] = (slot, entry)
                slot.in_flight += 1

    def live(self) -> int:
        return sum(slot.state in ("starting", "up") for slot in self.slots)

    def loop(self, n_workers: int) -> None:
        import ray

        for _ in range(n_workers):
            self.add_worker()
        self.feed()
        while self.pending or any(entry is not None for _, entry in self.calls.values()):
            ready, _ = (
                ray.wait(list(self.calls), num_returns=1, timeout=self.x.POLL_S) if self.calls else ([], [])
            )
            for ref in ready:
                self.settle(ref)
            now = time.monotonic()
            if now >= self.next_look or not ready:
                self.next_look = now + self.x.POLL_S
                self.ping_down_workers()
                self.look_for_capacity()
            self.feed()
            self.check_waiting()
        self.x._count_restarts([s for s in self.slots if s.actor is not None])

    def settle(self, ref: Any) -> None:
        import ray

        slot, entry = self.calls.pop(ref)
        if entry is not None:
            slot.in_flight -= 1
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError:
            raise  # the work itself failed (a bug, a bad input): the same batch would fail again
        except ray.exceptions.RayError as exc:
            self.worker_failed(slot, entry, exc)
            return
        if entry is None:  # a ping: the worker is (back) up
            slot.pinging = False
            if slot.state == "down":
                self.x.notify(f"Ray: {slot.name} is back on {describe_node(*result[:2])}")
            slot.state = "up"
            self.x._note(slot.name, result, None)
            self.x._count_restarts([slot])
            return
        where, rows = result
        name = f"task pid {where[2]}" if self.x._by_process else slot.name
        self.x._note(name, where, len(rows))
        if slot.state == "starting":
            slot.state = "up"
        self.on_result(rows)

    def worker_failed(self, slot: _Slot, entry: tuple[int, Batch] | None, exc: BaseException) -> None:
        """A call failed for a system reason (process or node died): requeue its batch."""
        if entry is not None:
            index, batch = entry
            self.attempts[index] = self.attempts.get(index, 0) + 1
            if self.attempts[index] > self.x.max_retries:
                raise RayStageFailed(
                    self.x.fail_message(
                        f"a batch of {len(batch)} item(s) was lost with its worker "
                        f"{self.attempts[index]} times (last: {_first_line(exc)})"
                    )
                )
            self.pending.appendleft(entry)
            self.x._lost(slot.name, len(batch))
        if self.x._by_process or slot.state == "lost":
            return
        if entry is None:
            slot.pinging = False
        was_down = slot.state == "down"
        at = self.x.progress().get(slot.name)
        at = f" on {at.node}" if at and at.node else ""
        if _ray_state(slot.actor) == "DEAD":
            slot.state = "lost"
            self.x._set_state(slot.name, "lost")
            self.x.notify(f"Ray: {slot.name}{at} is gone ({_first_line(exc)}); its batches go to the others")
        elif not was_down:
            slot.state = "down"
            self.x._set_state(slot.name, "down")
            self.x.notify(
                f"Ray: {slot.name}{at} died ({_first_line(exc)}); its batches go to the others "
                "while Ray restarts it"
            )
        self.x._count_restarts([slot])

    def ping_down_workers(self) -> None:
        """Ask each down worker where it runs: the answer comes once Ray has restarted it."""
        for slot in self.slots:
            if slot.state == "down" and not slot.pinging:
                if _ray_state(slot.actor) == "DEAD":
                    slot.state = "lost"
                    self.x._set_state(slot.name, "lost")
                    self.x.notify(f"Ray: {slot.name} is gone (Ray gave up restarting it)")
                    continue
                slot.pinging = True
                self.calls[slot.actor.where.remote()] = (slot, None)

    def look_for_capacity(self) -> None:
        """Add a worker per free share of the cluster (a node that joined, a freed GPU),
        while batches wait and no worker is still starting or restarting."""
        if not self.pending or any(s.state in ("starting", "down") for s in self.slots):
            return
        cap = self.x.workers
        if self.x._by_process:  # tasks queue in Ray: one slot per share of the whole cluster
            import ray

            total = ray.cluster_resources().get("GPU" if self.x.gpus > 0 else "CPU", 0)
            share = self.x.gpus if self.x.gpus > 0 else self.x.cpus
            while self.pending and len(self.slots) < (cap or int(total / share + 1e-9)):
                self.add_worker()
            return
        if (cap is None or self.live() < cap) and self.x._free_workers() > 0:
            slot = self.add_worker()  # one at a time: its placement shows at the next look
            self.x.notify(f"Ray: free capacity on the cluster (a node joined?), {slot.name} added")

    #: Seconds the workers of a stage may take to start where the cluster seems to have room.
    START_WAIT_S = 600.0
    #: Seconds of start-up without a worker up before the wait is announced.
    QUIET_START_S = 30.0

    def batches_left(self) -> int:
        """Batches waiting, with those still out on a worker that is down or lost (their calls
        fail one by one, each putting its batch back): what the stage still has to do."""
        held = sum(
            entry is not None and slot.state in ("down", "lost") for slot, entry in self.calls.values()
        )
        return len(self.pending) + held

    def check_waiting(self) -> None:
        """No worker up while batches wait: after a worker died, or with no room for one on
        the cluster, wait ``capacity_wait_s``; while workers start where there is room, at
        least `START_WAIT_S`. Say so on the way, then fail with `RayStageFailed`."""
        if not self.pending or any(slot.state == "up" for slot in self.slots):
            self.waiting_since, self.waiting_for, self.announced = None, "", False
            return
        died = any(slot.state in ("down", "lost") for slot in self.slots)
        reason = "capacity" if died or not self.x._fits_cluster() else "start"
        now = time.monotonic()
        if self.waiting_for != reason:
            self.waiting_since, self.waiting_for, self.announced = now, reason, False
        limit = (
            self.x.capacity_wait_s if reason == "capacity" else max(self.x.capacity_wait_s, self.START_WAIT_S)
        )
        if not self.announced and (reason == "capacity" or now - self.waiting_since >= self.QUIET_START_S):
            self.announced = True
            self.x.notify(
                f"Ray: no worker up and {self.batches_left()} batch(es) left; waiting up to "
                f"{limit:g} s for a worker to (re)start or a node to join"
            )
        if now - self.waiting_since >= limit:
            lost = [s.name for s in self.slots if s.state in ("down", "lost")]
            raise RayStageFailed(
                self.x.fail_message(
                    f"no Ray worker came up within {limit:g} s "
                    f"({', '.join(lost) + ' lost' if lost else 'no worker could start'}, "
                    f"{self.batches_left()} batch(es) left)"
                )
            )
