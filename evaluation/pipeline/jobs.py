"""Evaluation jobs: a run's three stages in a background thread owned by the server.

`run_pipeline` takes a stored run through generate -> segment -> extract, each stage
resumable (see `evaluation.pipeline.stages`): what is recorded stays recorded, so a cancelled,
crashed or restarted job continues where it stopped. `JobManager` runs one job at a
time in a worker thread (one model in GPU memory at a time) and queues the others. A
job's progress lives in the run's rows, so any session, and a reload, reads it from
the database; the manager itself only knows which run is queued or running, whether a
cancel was asked for, and the last outcome of each job it ran since the server started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

import storage
from evaluation.concepts import load_concepts
from evaluation.models.availability import weights_refusal
from evaluation.models.registry import spec_from_dict, spec_to_dict, tiny_in
from evaluation.models.segmentation import BOX_THRESHOLD, DEFAULT_DETECTOR, DEFAULT_SAM, TEXT_THRESHOLD
from evaluation.pipeline import runs
from evaluation.pipeline.executors import Executor
from evaluation.pipeline.ray_storage import is_uri, location
from evaluation.pipeline.scoring import score_every_source
from evaluation.pipeline.stages import GenerationWork, SegmentationWork, extract, lost_files, run_stage
from storage.shown import shown

Connect = Callable[[], contextlib.AbstractContextManager[sqlite_utils.Database]]
#: Items per recorded segmentation batch (each batch is one transaction).
SEGMENT_BATCH = 8
#: Segmenter presets: the paper's models, or tiny random ones the project builds (tests, demos).
SEGMENTER_PRESETS = ("paper", "tiny-random")
JOB_STATES = ("queued", "running", "cancelling", "finished", "cancelled", "failed", "idle")
#: Why a run has nothing to cancel, by its job state ("idle" read as if work were left).
_NOT_ACTIVE = {
    "finished": "its job finished",
    "cancelled": "its job was cancelled",
    "failed": "its job failed",
    "idle": "no job of it has run since this server started",
}
#: Where a job's stages can run (see `ExecutorChoice`).
EXECUTORS = ("in-process", "ray")

_LOG = logging.getLogger(__name__)


class JobError(ValueError):
    """A job cannot be started or cancelled as asked (already queued, not running...)."""


class Cancelled(Exception):
    """Raised inside a stage's progress callback to stop it after the current batch."""


@dataclass(frozen=True)
class SegmenterSpec:
    """Which GroundingDINO and SAM mask a run's images, and their thresholds.

    Attributes
    ----------
    detector, sam : str
        Hub ids or local directories (loaded with `evaluation.models.segmentation.load_detector`
        and `load_sam`).
    box_threshold, text_threshold : float
        In [0, 1]; see `evaluation.models.segmentation.segment`.
    tiny_dir : str
        For the ``tiny-random`` preset: the folder where the tiny detector and SAM are
        built if missing; ``""`` otherwise.
    sam_checkpoint, sam_type : str
        A ``segment-anything`` ``.pth`` checkpoint and its architecture, used instead of
        `sam` when `sam_checkpoint` is set.
    """

    detector: str = DEFAULT_DETECTOR
    sam: str = DEFAULT_SAM
    box_threshold: float = BOX_THRESHOLD
    text_threshold: float = TEXT_THRESHOLD
    tiny_dir: str = ""
    sam_checkpoint: str = ""
    sam_type: str = "vit_h"

    def __post_init__(self) -> None:
        # Checked where the masking is described, before a run stores it: a threshold given with
        # --detector/--sam was refused only at the segment stage, after every image was made.
        for label, value in (("box_threshold", self.box_threshold), ("text_threshold", self.text_threshold)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"`{label}` must be in [0, 1], got {value}")


def masking_of(segmenter: SegmenterSpec) -> dict:
    """What makes a run's masks what they are (`runs.claim_masking`): the detector and SAM
    (``preset: tiny-random`` for the project's tiny models, wherever they are built) and
    the two thresholds."""
    record: dict = {
        "box_threshold": float(segmenter.box_threshold),  # 0 from a form is 0.0 from a command line
        "text_threshold": float(segmenter.text_threshold),
    }
    if segmenter.tiny_dir:
        record["preset"] = "tiny-random"
    elif segmenter.sam_checkpoint:
        record.update(
            detector=segmenter.detector, sam_checkpoint=segmenter.sam_checkpoint, sam_type=segmenter.sam_type
        )
    else:
        record.update(detector=segmenter.detector, sam=segmenter.sam)
    return record


def segmenter_of_masking(masking: dict, models_dir: str | Path) -> SegmenterSpec:
    """The `SegmenterSpec` that a run's recorded masking (`masking_of`) describes: what a
    resume given no masking option masks with (``masking_of`` of it gives `masking` back)."""
    box, text = masking["box_threshold"], masking["text_threshold"]
    if masking.get("preset") == "tiny-random":
        return segmenter_preset("tiny-random", models_dir, box, text)
    if masking.get("sam_checkpoint"):
        return SegmenterSpec(
            masking["detector"],
            box_threshold=box,
            text_threshold=text,
            sam_checkpoint=masking["sam_checkpoint"],
            sam_type=masking["sam_type"],
        )
    return SegmenterSpec(masking["detector"], masking["sam"], box, text)


def segmenter_preset(
    name: str,
    models_dir: str | Path,
    box_threshold: float = BOX_THRESHOLD,
    text_threshold: float = TEXT_THRESHOLD,
) -> SegmenterSpec:
    """The `SegmenterSpec` of preset `name` (one of `SEGMENTER_PRESETS`).

    ``tiny-random`` uses ``models_dir/tiny-grounding-dino`` and ``models_dir/tiny-sam``,
    built on first use (random weights: masks are meaningless, for tests and demos).
    """
    if name not in SEGMENTER_PRESETS:
        raise ValueError(f"`segmenter` must be one of {SEGMENTER_PRESETS}, got {shown(name)}")
    if name == "paper":
        return SegmenterSpec(box_threshold=box_threshold, text_threshold=text_threshold)
    models_dir = Path(models_dir).resolve()
    return SegmenterSpec(
        str(models_dir / "tiny-grounding-dino"),
        str(models_dir / "tiny-sam"),
        box_threshold,
        text_threshold,
        tiny_dir=str(models_dir),
    )


def build_tiny_segmenter(segmenter: SegmenterSpec) -> None:
    if segmenter.tiny_dir:
        from evaluation.models.tiny import build_tiny_grounding_dino, build_tiny_sam

        for path, build in ((segmenter.detector, build_tiny_grounding_dino), (segmenter.sam, build_tiny_sam)):
            if not (Path(path) / "config.json").exists():
                build(path)


def segmentation_work(segmenter: SegmenterSpec, data_dir, device: str) -> SegmentationWork:
    """Load `segmenter`'s detector and SAM on `device` and return the segment stage's work.

    The tiny preset's models are built first when missing (`SegmenterSpec.tiny_dir`).

    Parameters
    ----------
    segmenter : SegmenterSpec
    data_dir : str, Path or Location
        Where the run's images are read and masks and pixel summaries written.
    device : str
        ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (`evaluation.pipeline.stages.resolve_device`).

    Returns
    -------
    evaluation.pipeline.stages.SegmentationWork
    """
    from evaluation.models.segmentation import load_detector, load_sam, load_segment_anything
    from evaluation.pipeline.stages import resolve_device

    build_tiny_segmenter(segmenter)
    device = resolve_device(device)
    detector = load_detector(segmenter.detector, device=device)
    if segmenter.sam_checkpoint:
        sam = load_segment_anything(segmenter.sam_checkpoint, segmenter.sam_type, device=device)
    else:
        sam = load_sam(segmenter.sam, device=device)
    return SegmentationWork(detector, sam, data_dir, segmenter.box_threshold, segmenter.text_threshold)


class LazySegmentationWork:
    """`SegmentationWork` whose detector and SAM load on the first batch, where it runs.

    Pickles as its `SegmenterSpec` alone, so a distributed executor ships it to workers
    that each load the models once (device ``"auto"``: the GPU Ray gave the worker).
    """

    def __init__(self, segmenter: SegmenterSpec, data_dir: str | Path, device: str = "auto"):
        self.segmenter, self.data_dir, self.device = segmenter, location(data_dir), device
        self._work: SegmentationWork | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_work": None}

    def __call__(self, batch: list[dict]) -> list[dict]:
        if self._work is None:
            self._work = segmentation_work(self.segmenter, self.data_dir, self.device)
        return self._work(batch)


@dataclass(frozen=True)
class ExecutorChoice:
    """Where a job's stages run.

    Attributes
    ----------
    kind : str
        One of `EXECUTORS`: ``in-process`` (this process, the default) or ``ray``.
    address : str
        For ``ray``: the cluster's ``host:port``; ``""`` means ``$RAY_ADDRESS``, else a
        local cluster (`evaluation.pipeline.ray_executor.connect`).
    workers : int, optional
        For ``ray``: workers per stage (default: one per GPU, or per CPU without GPUs, and
        more as nodes join).
    capacity_wait_s : float
        For ``ray``: how long a stage with no live worker waits for one before it stops
        (`evaluation.pipeline.ray_executor.RayStageFailed`).
    resume : str
        For ``ray``: the command that resumes the run, named if a stage has to stop.
    """

    kind: str = "in-process"
    address: str = ""
    workers: int | None = None
    capacity_wait_s: float = 600.0
    resume: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"`executor` must be one of {EXECUTORS}, got {shown(self.kind)}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"`workers` must be a positive integer, got {self.workers}")


def stage_executor(choice: ExecutorChoice, cluster, stage: str, on_executor) -> Executor | None:
    if cluster is None:
        return None
    from evaluation.pipeline.ray_executor import RayExecutor

    executor = RayExecutor.for_stage(
        stage, cluster, choice.workers, capacity_wait_s=choice.capacity_wait_s, resume=choice.resume
    )
    if on_executor is not None:
        on_executor(stage, executor)
    return executor


def weights_request(
    config: Mapping[str, Any] | None, segmenter: SegmenterSpec | None, models_dir: str | Path | None = None
) -> tuple[list[dict], tuple[str, str, str] | None]:
    """The weights a job needs, as plain values for `evaluation.models.availability.weights_refusal`:
    the run's model entries (none when `config` is None: nothing is generated) and
    ``(detector, sam, sam_checkpoint)`` (None when nothing is masked; the tiny masking's
    folders only once built, as it builds them where they are empty)."""
    models = [] if config is None else [dict(fields) for fields in config.get("models", {}).values()]
    if models_dir is not None:  # a tiny model in the data folder's models/, where it is built
        models = [spec_to_dict(tiny_in(spec_from_dict(fields), models_dir)) for fields in models]
    if segmenter is None:
        return models, None
    if segmenter.tiny_dir:
        built = [
            p if (Path(p) / "config.json").is_file() else None for p in (segmenter.detector, segmenter.sam)
        ]
        return models, (*built, "") if any(built) else None
    return models, (segmenter.detector, segmenter.sam, segmenter.sam_checkpoint)


def check_weights(
    config: Mapping[str, Any] | None, segmenter: SegmenterSpec | None, models_dir: str | Path | None = None
) -> None:
    """Refuse a job whose weights are not on this machine, before it is queued.

    Parameters
    ----------
    config : mapping or None
        A run configuration (`evaluation.pipeline.planning`); None when nothing is
        generated (an imported run).
    segmenter : SegmenterSpec or None
        None when nothing is masked.
    models_dir : str or Path, optional
        The data folder's ``models``: a tiny model recorded there (``models/<key>``) is
        checked once built (None: tiny models are not checked).

    Raises
    ------
    JobError
        Naming each missing model and how to get it (`evaluation.models.availability`).
    """
    refusal = weights_refusal(*weights_request(config, segmenter, models_dir))
    if refusal:
        raise JobError(f"The run was not started: {refusal}.")


def check_before_storing(
    executor: ExecutorChoice,
    config: Mapping[str, Any] | None,
    segmenter: SegmenterSpec | None,
    models_dir: str | Path | None,
    data_dir,
) -> None:
    """Refuse a run before it is stored for what it needs: its weights on this machine
    (`check_weights`), or, on a Ray cluster, on every node, with the data folder
    (`evaluation.pipeline.ray_preflight.preflight`, which `run_pipeline` runs again as the
    job starts). A run refused on Ray only once its job started was left stored, with every
    item, and took its name (outside probe 228).

    Raises
    ------
    JobError, evaluation.pipeline.ray_preflight.PreflightFailed
        Naming what is missing, and where.
    evaluation.pipeline.ray_executor.RayUnavailable
        If no cluster answers.
    """
    if executor.kind != "ray":
        check_weights(config, segmenter, models_dir)
        return
    from evaluation.pipeline.ray_preflight import preflight

    cluster_of(executor)
    preflight(_for_workers(data_dir), config, segmenter)


def _for_workers(data_dir):
    """`data_dir` as Ray workers, whose working folder differs, find it: a URI as it is, a
    path made absolute."""
    data_dir = location(data_dir)
    return data_dir if is_uri(data_dir) else data_dir.resolve()


def _build_tiny_pipelines(work: GenerationWork) -> None:
    """Build missing tiny models here once, not in several workers at the same time."""
    from evaluation.models.tiny import build_tiny_pipeline

    for spec in work.specs.values():
        if spec.build == "tiny" and spec.is_local and not (spec.local_path() / "model_index.json").exists():
            build_tiny_pipeline(spec.local_path(), seed=spec.build_seed)


def run_pipeline(
    db: sqlite_utils.Database,
    run: str,
    data_dir: str | Path,
    segmenter: SegmenterSpec,
    *,
    device: str,
    should_stop: Callable[[], bool] = lambda: False,
    on_stage: Callable[[str], None] | None = None,
    executor: ExecutorChoice = ExecutorChoice(),
    on_executor: Callable[[str, Executor], None] | None = None,
) -> None:
    """Take run `run` through its pending work: generate, segment, extract.

    Parameters
    ----------
    db : sqlite_utils.Database
        Open in the calling thread, with the evaluation schema.
    data_dir : str or Path
        The folder holding ``runs/<run>/`` (on a Ray cluster: at the same path on every node,
        or a URI of an object store, see `evaluation.pipeline.ray_storage`).
    segmenter : SegmenterSpec
        Masking models and thresholds.
    device : str
        ``"cuda"``, ``"cpu"``... for the in-process executor; Ray workers use the GPU
        Ray gives them, else their CPU.
    should_stop : callable
        Checked after every recorded batch; True stops the job with `Cancelled` (what was
        recorded stays).
    on_stage : callable, optional
        Called with ``"generate"``, ``"segment"`` or ``"extract"`` as each stage starts.
    executor : ExecutorChoice
        In-process (default) or a Ray cluster.
    on_executor : callable, optional
        ``on_executor(stage, executor)`` with each stage's Ray executor (per-worker progress).

    Raises
    ------
    Cancelled
        If `should_stop` returned True.
    evaluation.pipeline.ray_executor.RayUnavailable
        If Ray is chosen but not installed or no cluster answers.
    """
    data_dir = location(data_dir)
    # An unknown run, or one masked another way, fails here, before a cluster is joined.
    runs.claim_masking(db, run, masking_of(segmenter))
    cluster = cluster_of(executor)
    with job_lease(db, run), ray_connection_held(cluster):
        if cluster is not None:
            data_dir = _for_workers(data_dir)
            from evaluation.pipeline.ray_preflight import preflight

            needs_masks = runs.pending_items(db, run, "generate") or runs.pending_items(db, run, "segment")
            preflight(data_dir, runs.run_config(db, run), segmenter if needs_masks else None)
        _run_stages(
            db, run, data_dir, segmenter, device, cluster, executor, should_stop, on_stage, on_executor
        )


def process_owner() -> str:
    """This process as a job's owner: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@contextlib.contextmanager
def job_lease(db: sqlite_utils.Database, run: str) -> Iterator[str]:
    """Hold run `run` for this process while the block runs (`runs.claim_job`).

    A thread with its own connection renews the lease every quarter of `runs.LEASE_S`, so a
    long step (loading a model, a slow batch) does not let it lapse (a database in memory,
    which no other process sees, is not renewed); the lease is released at the end. Inside a lease this process holds already (a stage of a whole run), it adds
    nothing. Yields the owner.

    Raises
    ------
    RunError
        If another process's job holds the run.
    """
    owner = process_owner()
    if runs.job_holder(db, run)[0] == owner:
        yield owner
        return
    runs.claim_job(db, run, owner)
    stop, path = threading.Event(), storage.db_path(db)

    def beat() -> None:
        beat_db = storage.open_db(path)
        try:
            while not stop.wait(runs.LEASE_S / 4):
                with contextlib.suppress(sqlite3.OperationalError):  # busy: the next beat renews
                    runs.renew_job(beat_db, run, owner)
        finally:
            beat_db.close()

    thread = threading.Thread(target=beat, name=f"lease {run}", daemon=True)
    if path:
        thread.start()
    try:
        yield owner
    finally:
        stop.set()
        if path:
            thread.join()
        runs.release_job(db, run, owner)


def ray_connection_held(cluster) -> contextlib.AbstractContextManager:
    """While a job runs on `cluster`, this process's Ray connection is not given up for
    another address (`evaluation.pipeline.ray_executor.holding`); nothing in-process."""
    if cluster is None:
        return contextlib.nullcontext()
    from evaluation.pipeline.ray_executor import holding

    return holding()


def _run_stages(
    db, run, data_dir, segmenter, device, cluster, executor, should_stop, on_stage, on_executor
) -> None:
    check = stop_check(run, should_stop)
    # 1. Generate the pending (or failed) images; an imported run has none.
    generate_pending(db, run, data_dir, device, cluster, executor, check, on_stage, on_executor)
    # 2. Mask every generated image (and again where a mask or summary was lost).
    if runs.pending_items(db, run, "segment") or lost_files(db, run, "segment", data_dir):
        announce(on_stage, "segment")
        if cluster is None:
            work = segmentation_work(segmenter, data_dir, device)
        else:
            build_tiny_segmenter(segmenter)
            work = LazySegmentationWork(segmenter, data_dir)
        run_stage(
            db,
            run,
            "segment",
            work,
            SEGMENT_BATCH,
            progress=check,
            data_dir=data_dir,
            executor=stage_executor(executor, cluster, "segment", on_executor),
        )
        del work
        _free_memory(device)
    check(0, 0)
    # 3. One distribution per fully segmented (model, concept, style, cfg).
    announce(on_stage, "extract")
    if extract(
        db, run, data_dir, progress=check, executor=stage_executor(executor, cluster, "extract", on_executor)
    ):
        # 4. Score the new distributions against every human source now, not at the first view.
        score_every_source(db, load_concepts())


def work_left(db: sqlite_utils.Database, run: str, data_dir) -> bool:
    """Whether a job of `run` would find work: an item to generate (pending or failed) or to
    mask or score, a file the local data folder lost (`lost_files`), or a cell of a concept
    run without its distribution. A resume of a run with none queued a job that did nothing
    (outside probe 194)."""
    if runs.pending_items(db, run, "generate") or runs.pending_items(db, run, "segment"):
        return True
    if lost_files(db, run, "generate", data_dir) or lost_files(db, run, "segment", data_dir):
        return True
    return not runs.is_explicit(runs.run_config(db, run)) and not runs.run_progress(db, run).complete


def cluster_of(executor: ExecutorChoice):
    """The Ray cluster `executor` names (joined or started), or None for the in-process executor."""
    if executor.kind != "ray":
        return None
    from evaluation.pipeline.ray_executor import connect

    return connect(executor.address, switch=True)


def stop_check(run: str, should_stop: Callable[[], bool]) -> Callable[[int, int], None]:
    """A stage's ``progress`` callback that raises `Cancelled` once `should_stop()` is True."""

    def check(done: int, total: int) -> None:
        if should_stop():
            raise Cancelled(f"run {run!r} cancelled")

    return check


def generate_pending(
    db: sqlite_utils.Database,
    run: str,
    data_dir,
    device: str,
    cluster,
    executor: ExecutorChoice,
    check: Callable[[int, int], None],
    on_stage: Callable[[str], None] | None,
    on_executor: Callable[[str, Executor], None] | None,
) -> None:
    """The generate stage of `run` for its pending (or failed) items and lost images, as every kind of run
    has it (`run_pipeline`, `evaluation.explicit.jobs.run_explicit_pipeline`); arguments as
    `run_pipeline`, with `cluster` from `cluster_of` and `check` from `stop_check`."""
    if runs.pending_items(db, run, "generate") or lost_files(db, run, "generate", data_dir):
        announce(on_stage, "generate")
        config = runs.run_config(db, run)
        work = GenerationWork.from_run(config, data_dir, device=device if cluster is None else "auto")
        on_gpu = device.startswith("cuda") if cluster is None else cluster.gpus > 0
        batch = min(spec.batch_size for spec in work.specs.values()) if on_gpu else 1
        if cluster is not None:
            _build_tiny_pipelines(work)
        run_stage(
            db,
            run,
            "generate",
            work,
            batch,
            progress=check,
            data_dir=data_dir,
            executor=stage_executor(executor, cluster, "generate", on_executor),
        )
        del work
        _free_memory(device)
    check(0, 0)


def announce(on_stage: Callable[[str], None] | None, stage: str) -> None:
    """Tell `on_stage` (if any) that `stage` starts."""
    if on_stage is not None:
        on_stage(stage)


def _free_memory(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


@dataclass(frozen=True)
class JobState:
    """What the manager knows of a run's job.

    Attributes
    ----------
    state : str
        One of `JOB_STATES`: ``idle`` when this server has not run it.
    stage : str
        The stage in progress (``generate``, ``segment``, ``extract``) or ``""``.
    message : str
        The outcome (error text of a failed job), or ``""``.
    """

    state: str
    stage: str = ""
    message: str = ""

    @property
    def active(self) -> bool:
        """Queued, running or being cancelled."""
        return self.state in ("queued", "running", "cancelling")

    def run_state(self, complete: bool, elsewhere: tuple[str, float] | None = None) -> str:
        """The state of this job's run, as the Evaluate tab's runs table and the Explicit colors
        tab say it.

        Parameters
        ----------
        complete : bool
            Whether every item of the run is done.
        elsewhere : (str, float), optional
            The holder and time of a job of another process holding the run
            (`evaluation.pipeline.runs.job_elsewhere`).

        Returns
        -------
        str
            This job's state while it is active; ``running in another process (<holder>)``
            while another process's job holds the run; ``complete`` for a run with every item
            done whose job here ended finished or cancelled (a Cancel that raced a Resume of a
            finished run left "cancelled" at 100 %: outside probe 92), or that no job here ran;
            else the ended job's state, or ``stopped``.
        """
        if self.active:
            return self.state
        if elsewhere is not None:  # a job here may have ended; another process's runs now
            return f"running in another process ({elsewhere[0]})"
        if self.state != "idle":
            return "complete" if self.state in ("finished", "cancelled") and complete else self.state
        return "complete" if complete else "stopped"


class JobManager:
    """Runs evaluation jobs one after another in a worker thread of the server.

    Parameters
    ----------
    connect : callable
        Returns a context manager yielding a new database connection (the worker opens
        its own: connections are not shared between threads).
    data_dir : str or Path
        The app's data folder.
    device : str
        Where jobs run, e.g. ``"cuda"`` or ``"cpu"``.
    """

    def __init__(self, connect: Connect, data_dir: str | Path, *, device: str):
        self.connect, self.data_dir, self.device = connect, Path(data_dir), device
        self._lock = threading.Lock()
        self._queue: deque[tuple[str, SegmenterSpec, ExecutorChoice]] = deque()
        self._states: dict[str, JobState] = {}
        self._executors: dict[str, Executor] = {}
        self._stop: dict[str, threading.Event] = {}
        self._worker: threading.Thread | None = None
        self._closed = False
        self._deleting: set[str] = set()
        # When each queued run was stored: a run deleted (from the command line, which does not
        # see this queue) and made again under its name is another run (outside probe 237).
        self._created: dict[str, str | None] = {}

    def submit(
        self, run: str, segmenter: SegmenterSpec, executor: ExecutorChoice = ExecutorChoice()
    ) -> JobState:
        """Queue run `run` (stored already) on `executor`; raises JobError if it is queued or running."""
        with self.connect() as db:
            created = runs.run_created(db, run)
        with self._lock:
            if self._closed:
                raise JobError(f"run {run!r} cannot start: the server is shutting down")
            if self._states.get(run, JobState("idle")).active:
                raise JobError(f"run {run!r} is already {self._states[run].state}")
            if run in self._deleting:
                raise JobError(f"run {run!r} is being deleted")
            self._states[run] = JobState("queued")
            self._created[run] = created
            self._stop[run] = threading.Event()
            self._queue.append((run, segmenter, executor))
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="evaluation-jobs", daemon=True)
                self._worker.start()
            return self._states[run]

    def cancel(self, run: str) -> JobState:
        """Ask the job of `run` to stop after its current batch; raises JobError if none is active."""
        with self._lock:
            state = self._states.get(run, JobState("idle"))
            if not state.active:
                raise JobError(
                    f"run {run!r} has no queued or running job to cancel ({_NOT_ACTIVE[state.state]})"
                )
            self._stop[run].set()
            self._states[run] = JobState("cancelling", state.stage)
            return self._states[run]

    @contextlib.contextmanager
    def deleting(self, run: str) -> Iterator[str]:
        """Hold off jobs of `run` while it is deleted: yields ``""``, or the state of its job
        queued or running here (the deletion must refuse then, as no lease says so yet); a
        `submit` of `run` meanwhile is refused."""
        with self._lock:
            state = self._states.get(run, JobState("idle"))
            busy = state.state if state.active else ""
            if not busy:
                self._deleting.add(run)
        try:
            yield busy
        finally:
            with self._lock:
                self._deleting.discard(run)

    def forget(self, run: str) -> None:
        """Drop what this server knows of the ended job of `run` (deleted: a new run of that
        name must not show its state); an active job is kept."""
        with self._lock:
            if not self._states.get(run, JobState("idle")).active:
                for kept in (self._states, self._executors, self._stop, self._created):
                    kept.pop(run, None)

    def state(self, run: str, created: str | None = None) -> JobState:
        """The job state of `run` (``idle`` if this server never ran it); given when the run
        was stored (`created`), ``idle`` too for a job of an earlier run of that name."""
        with self._lock:
            if created is not None and self._created.get(run, created) != created:
                return JobState("idle")
            return self._states.get(run, JobState("idle"))

    def _set(self, run: str, state: str, stage: str = "", message: str = "") -> None:
        with self._lock:
            if self._stop[run].is_set() and state == "running":
                state = "cancelling"
            self._states[run] = JobState(state, stage, message)
        if state == "failed":  # the operator's log says so too, not only the Evaluate tab
            _LOG.warning("the evaluation job of run %r failed: %s", run, message)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None
                    return
                run, segmenter, executor = self._queue.popleft()
            self._run_one(run, segmenter, executor)

    def workers(self, run: str) -> dict:
        """Per-worker progress of `run`'s current (or last) Ray stage: name -> `WorkerProgress`.

        Empty for in-process jobs and runs this server has not run on Ray.
        """
        with self._lock:
            executor = self._executors.get(run)
        return executor.progress() if executor is not None else {}

    def _set_executor(self, run: str, executor: Executor) -> None:
        with self._lock:
            self._executors[run] = executor

    def _run_one(self, run: str, segmenter: SegmenterSpec, executor: ExecutorChoice) -> None:
        stop = self._stop[run]
        if stop.is_set():
            self._set(run, "cancelled", message="before it started; resume to run it")
            return
        with self.connect() as db:
            created = runs.run_created(db, run)
        if created != self._created.get(run):  # deleted while queued: never run another one
            again = "" if created is None else " and made again (resume the new one to run it)"
            self._set(run, "cancelled", message=f"the run was deleted{again} before its job started")
            return
        self._set(run, "running")
        try:
            with self.connect() as db:
                self.pipeline_for(db, run)(
                    db,
                    run,
                    self.data_dir,
                    segmenter,
                    device=self.device,
                    should_stop=stop.is_set,
                    on_stage=lambda stage: self._set(run, "running", stage),
                    executor=executor,
                    on_executor=lambda stage, ex: self._set_executor(run, ex),
                )
        except Cancelled:
            self._set(run, "cancelled", message="resume to continue")
        except Exception as error:  # noqa: BLE001 - any failure ends this job, not the worker
            condition = storage.storage_condition(error)
            if condition is None:
                self._set(run, "failed", message=f"{type(error).__name__}: {error}")
            else:  # the machine's condition, not the run's: it passes
                what, then = storage.OPERATOR_WORDS[condition]
                self._set(
                    run, "failed", message=f"{what} ({error}); what was recorded stays: {then}, then resume"
                )
        else:
            self._set(run, "finished")

    def pipeline_for(self, db: sqlite_utils.Database, run: str) -> Callable[..., None]:
        """The function that takes `run` through its stages (`run_pipeline`'s arguments)."""
        return run_pipeline

    def close(self, timeout: float) -> bool:
        """Refuse new jobs, ask every queued or running one to stop (a running one ends after
        its current batch, as `cancel`), and wait at most `timeout` seconds for the worker
        thread to end. True if it has (a job still in its batch keeps it alive)."""
        with self._lock:
            self._closed = True
            for stop in self._stop.values():
                stop.set()
        return self.wait_idle(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Block until no job is queued or running, at most `timeout` seconds; True if idle."""
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join(timeout)
        with self._lock:
            return self._worker is None
