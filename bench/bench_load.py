"""Load and faults through the real app: many designers at once, the app SIGKILLed, a killed run.

The designer scenarios run a real ``python app.py`` process (`bench.app_process`) and
talk to it only through `gradio_client`, as pages do (`bench.designer_client`): invite
link, consent, instructions, three practice colorings, then main-task colorings through
``/designer_submit``, each a canvas value of bucket fills. Every scenario ends in
`bench.store_checks.check_store` (every acknowledged submission present exactly once,
quotas kept, no partial rows, no orphaned files, ``PRAGMA integrity_check`` ok):

- `concurrent_designers`: designers in threads, one client each, all at once; the
  latency of each submit call is measured.
- `kill_app`: the same, and after some acknowledgements the app process is SIGKILLed in
  the middle of a write. To make "the middle" certain rather than lucky, the harness
  takes the database's write lock (``BEGIN IMMEDIATE``) and waits until a submission has
  stored its image files and is waiting for the lock; the kill then leaves files that no
  row names. The app restarts on the same database and data folder; its own start-up
  sweep (`app.common.AppContext.prepare`) moves the orphans aside. That sweep spares
  files younger than ``ORPHAN_MIN_AGE_S`` (5 minutes: files a concurrent CLI writer may
  be about to commit), so before the restart the harness dates every file in the data
  folder back by twice that margin, as if the restart came ten minutes after the crash.
- `bench.run_resume.kill_and_resume_run`: ``python -m evaluation generate`` SIGKILLed
  and resumed ends with the rows and files of an uninterrupted run.
- `light_during_burst`: designers submitting as fast as they can while three more people
  sign in, open the task view, the vote queue and a trial; ``python -m bench.bench_load
  burst`` compares it with the code before issue 13, and ``python -m bench.bench_load
  concurrency --limits 1,2,4,8`` runs it once per submissions-at-once limit with the app's
  write lock timed (`concurrency_sweep`). With ``--light-clients`` their designers and
  prober use light clients (`bench.designer_client.HttpClient`, canvas values encoded
  before the clock), so that the load generator costs the machine's cores little.

``python -m bench --only load`` calls `run` and writes `markdown` into BENCHMARKS.md;
``tests/app/test_faults.py`` runs the same scenarios at small sizes and asserts correctness.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils
from gradio_client.exceptions import AppError

from annotation.concepts import get_concept, sync_concepts
from annotation.integrity import orphaned_files
from annotation.people.accounts import create_annotators
from annotation.sketches.importing import encode_png
from annotation.sketches.library import add_sketch, sync_shipped_sketches
from app.common import ORPHAN_MIN_AGE_S
from app.config import AppConfig
from bench.app_process import ROOT, AppProcess, descendants
from bench.client_processes import ClientProcesses
from bench.designer_client import (
    TRANSPORTS,
    Ack,
    PreparedValues,
    SketchLayers,
    designer_session,
    designers_in_threads,
    layer_counts,
    new_client,
)
from bench.run_resume import build_tiny_models, kill_and_resume_run
from bench.store_checks import check_store
from storage import BUSY_TIMEOUT_MS, ensure_schema, open_db, transaction

LOCK_WAIT_S = 120.0


@dataclass(frozen=True)
class Study:
    """A prepared store: its files, its designers ``(annotator id, invite token)`` and pool."""

    db_path: Path
    data_dir: Path
    designers: tuple[tuple[int, str], ...]
    concepts: tuple[str, ...]
    k: int


@dataclass(frozen=True)
class KillResult:
    """What `kill_app` saw: acknowledgements before the kill and after the restart, the
    files the interrupted write left, what the start-up sweep moved, the restart time,
    the store's problems, and worker processes that outlived the app."""

    acks: list[Ack]
    acks_after_restart: list[Ack]
    interrupted_files: list[str]
    swept: list[str]
    restart_s: float
    problems: list[str]
    stray_workers: list[int]


def prepare_study(
    db_path: str | Path, data_dir: str | Path, n_designers: int, n_concepts: int, *, side: int = 512
) -> Study:
    """A fresh store with `n_designers` designers and a pool of about `n_concepts` concepts.

    The bases of the practice concepts, then bases in concept-file order, get a
    synthetic `side` x `side` sketch (`synthetic_sketch`) until their variants number at
    least `n_concepts`; every other base's sketch is deselected, so the pool holds
    ``len(Study.concepts) * k`` coloring slots, with K the app's default.
    """
    db = open_db(db_path)
    try:
        ensure_schema(db)
        sync_concepts(db)
        sync_shipped_sketches(db, data_dir)
        concepts = _bench_sketches(db, data_dir, n_concepts, side)
        designers = tuple(
            (row["id"], invite) for row, invite in create_annotators(db, n_designers, "designer")
        )
    finally:
        db.close()
    return Study(Path(db_path), Path(data_dir), designers, concepts, AppConfig().colorings_per_concept)


def synthetic_sketch(base: str, side: int) -> np.ndarray:
    """Line art (side, side) uint8: a frame cut into four regions of unequal size, and a
    short stroke whose length depends on `base` (so every base's sketch differs)."""
    sketch = np.full((side, side), 255, dtype=np.uint8)
    w = max(2, side // 128)
    sketch[:w], sketch[-w:], sketch[:, :w], sketch[:, -w:] = 0, 0, 0, 0
    sketch[side // 2 : side // 2 + w] = 0
    sketch[:, side // 3 : side // 3 + w] = 0
    sketch[w : w + 4 + sum(base.encode()) % (side // 8), 2 * side // 3 : 2 * side // 3 + w] = 0
    return sketch


def _bench_sketches(
    db: sqlite_utils.Database, data_dir: str | Path, n_concepts: int, side: int
) -> tuple[str, ...]:
    practice = list(dict.fromkeys(get_concept(db, key)["base"] for key in AppConfig().practice_concepts))
    ordered = [base for (base,) in db.execute("select base from concepts group by base order by min(rowid)")]
    chosen: list[str] = []
    concepts: list[str] = []
    for base in dict.fromkeys(practice + ordered):
        if len(chosen) >= len(practice) and len(concepts) >= n_concepts:
            break
        add_sketch(
            db,
            data_dir,
            base,
            encode_png(synthetic_sketch(base, side)),
            source="imported",
            select=True,
            meta={"bench": "bench_load"},
        )
        chosen.append(base)
        concepts += [
            key for (key,) in db.execute("select key from concepts where base = ? order by key", [base])
        ]
    with transaction(db):
        db.execute(
            f"update sketches set selected = 0 where base not in ({', '.join('?' * len(chosen))})", chosen
        )
    return tuple(concepts)


def concurrent_designers(
    url: str,
    study: Study,
    count: int,
    *,
    seed: int = 0,
    on_ack=None,
    stop: threading.Event | None = None,
    pace: tuple[float, float] | None = None,
    until: float | None = None,
    clients: ClientProcesses | None = None,
    transport: str = "gradio_client",
    prepared: PreparedValues | None = None,
) -> list[Ack]:
    """Every designer of `study` at once against the app at `url`; all their acks.

    Each designer runs `bench.designer_client.designer_session` in its own thread with
    its own client (`transport`: ``"gradio_client"`` or ``"http"``), up to `count`
    main-task submissions: threads of this process, or, given `clients`, threads of those
    processes (the same seeds; `on_ack` and `stop` then cannot be used). Given
    `prepared` (`prepare_values`), canvas values take their color layers from there.
    """
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(len(study.designers))]
    options = {"pace": pace, "until": until, "transport": transport}
    if clients is not None:
        if on_ack is not None or stop is not None:
            raise ValueError("`on_ack` and `stop` work only in this process, not with `clients`")
        return clients.run(
            url, study.db_path, study.data_dir, study.designers, seeds, count, prepared=prepared, **options
        )
    layers = SketchLayers(study.db_path, study.data_dir, prepared)
    return designers_in_threads(
        url, study.designers, seeds, layers, count, on_ack=on_ack, stop=stop, **options
    )


def prepare_values(study: Study, seed: int = 0) -> PreparedValues:
    """Color layers of `study`'s selected sketches encoded ahead of the clock, enough for
    every submission its pool and its designers' practice can take
    (`bench.designer_client.layer_counts`), each distinct."""
    counts = layer_counts(study.db_path, len(study.designers), study.k, AppConfig().practice_concepts)
    return SketchLayers(study.db_path, study.data_dir).prepare(counts, seed)


def kill_app(
    study: Study,
    count: int,
    kill_after: int,
    *,
    seed: int = 0,
    log_path: str | Path | None = None,
    moment: str = "write",
) -> KillResult:
    """Designers submit at once; the app is SIGKILLed after `kill_after` acks, restarted
    on the same store, and one designer submits again; then the store is checked (see
    the module docstring).

    `moment` is when: ``"write"`` inside a write (files stored, rows not yet), or
    ``"pool"`` while a coloring worker process is running a submission's preparation
    (`annotation.coloring.pool`); then `KillResult.interrupted_files` lists nothing and
    `KillResult.stray_workers` the app's worker processes still alive 10 s after the kill.
    """
    acks: list[Ack] = []
    enough, stop, lock = threading.Event(), threading.Event(), threading.Lock()

    def collect(ack: Ack) -> None:
        with lock:
            acks.append(ack)
            if len(acks) >= kill_after:
                enough.set()

    with (
        AppProcess(study.db_path, study.data_dir, log_path=log_path) as app,
        ThreadPoolExecutor(max_workers=1) as runner,
    ):
        load = runner.submit(
            concurrent_designers, app.url, study, count, seed=seed, on_ack=collect, stop=stop
        )
        while not enough.wait(0.2):
            if load.done():
                load.result()
                raise RuntimeError(f"the designers finished before {kill_after} acks")
        workers: list[int] = []
        if moment == "write":
            interrupted = _kill_inside_a_write(study, app, stop, load)
        elif moment == "pool":
            interrupted, workers = [], _kill_while_a_worker_runs(app, stop)
        else:
            raise ValueError(f"`moment` must be 'write' or 'pool', got {moment!r}")
        load.result()
    stray = _alive_after(workers, 10.0)
    _date_back(study.data_dir, 2 * ORPHAN_MIN_AGE_S)
    with AppProcess(study.db_path, study.data_dir, log_path=log_path) as app:
        designer, invite = study.designers[0]
        after = designer_session(
            app.url,
            designer,
            invite,
            SketchLayers(study.db_path, study.data_dir),
            2,
            seed=seed + 1,
            onboard=False,
        )
        restart_s = app.ready_s
    return KillResult(
        acks,
        after,
        interrupted,
        _swept(study.db_path),
        restart_s,
        check_store(study.db_path, study.data_dir, acks + after, k=study.k, all_acknowledged=False),
        stray,
    )


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _kill_while_a_worker_runs(app: AppProcess, stop: threading.Event) -> list[int]:
    """SIGKILL the app at a moment when one of its worker processes is running (state R);
    returns the worker pids (the fork server and its children)."""
    deadline = time.perf_counter() + LOCK_WAIT_S
    while time.perf_counter() < deadline:
        workers = descendants(app.process.pid)
        if any(_state(pid) == "R" for pid in workers):
            stop.set()
            app.kill()
            return workers
        time.sleep(0.001)
    raise RuntimeError("no coloring worker was seen running")


def _alive_after(pids: list[int], seconds: float) -> list[int]:
    """Those of `pids` still running (not zombies) after up to `seconds`."""
    deadline = time.perf_counter() + seconds
    while True:
        alive = [pid for pid in pids if _state(pid) not in ("gone", "Z")]
        if not alive or time.perf_counter() > deadline:
            return alive
        time.sleep(0.1)


def _kill_inside_a_write(study: Study, app: AppProcess, stop: threading.Event, load) -> list[str]:
    """Hold the write lock until a submission's file is on disk, then SIGKILL the app.

    While the lock is held no row can be committed, so any stored file no row names is
    one of a submission caught between its files and its rows; whether it was written
    before or during this hold does not matter (a submission whose last write before its
    files came in a gap between holds writes them then: counting only files new since
    the hold began missed every one on a fast machine). A file whose bytes another row
    already names (two identical masks, say) is not an orphan, so one file suffices.

    The app may need the lock for something else first (a submission's answer starts
    the designer's next batch); held past the app's busy timeout, that write would fail.
    So the lock is held at most a third of `storage.db.BUSY_TIMEOUT_MS` at a time, then
    let go briefly, until `LOCK_WAIT_S` in all or until `load` (the designers' future)
    is done.

    Returns the relative paths of the files no row named at the kill.
    """
    deadline = time.perf_counter() + LOCK_WAIT_S
    db = open_db(study.db_path)
    holds = 0
    try:
        while time.perf_counter() < deadline and not load.done():
            db.execute("BEGIN IMMEDIATE")
            holds += 1
            release = min(deadline, time.perf_counter() + BUSY_TIMEOUT_MS / 3000)
            while time.perf_counter() < release and not load.done():
                written = [p for p in orphaned_files(db, study.data_dir) if not Path(p).name.startswith(".")]
                if written:
                    stop.set()
                    app.kill()
                    db.execute("ROLLBACK")
                    return written
                time.sleep(0.05)
            db.execute("ROLLBACK")
            time.sleep(0.5)
    finally:
        db.close()
    if load.done():
        load.result()  # a designer's error, if one ended the load, says more than ours
    ended = "the designers had finished" if load.done() else f"{LOCK_WAIT_S:.0f} s went by"
    raise RuntimeError(f"no submission wrote its files while the lock was held ({holds} holds; {ended})")


def _date_back(data_dir: Path, seconds: float) -> None:
    """Set every file's modification time `seconds` into the past."""
    for path in Path(data_dir).rglob("*"):
        if path.is_file():
            stat = path.stat()
            os.utime(path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def _swept(db_path: Path) -> list[str]:
    """Paths the start-up sweeps recorded in the audit trail."""
    db = open_db(db_path)
    try:
        return [
            path
            for row in db["audit"].rows_where("action = 'sweep_orphans'")
            for path in json.loads(row["details"])["paths"]
        ]
    finally:
        db.close()


def run(
    *,
    designers: int = 30,
    submissions: int = 20,
    side: int = 512,
    kill_designers: int = 8,
    seed: int = 0,
    resume: bool = True,
) -> dict:
    """The load and fault scenarios at full size; figures for BENCHMARKS.md.

    Latency is that of the ``/designer_submit`` call as the client sees it (request,
    queue, decoding the canvas, the paint check, extraction, two PNG files, the rows and
    the task in one transaction, then the next task's view), with every designer
    submitting at once. The pool has room for every designer's whole batch.
    """
    figures: dict = {
        "designers": designers,
        "submissions_each": submissions,
        "image_side": side,
        "batch_size": AppConfig().batch_size,
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        study = prepare_study(tmp / "load.sqlite", tmp / "load", designers, _pool_size(designers), side=side)
        figures["k"] = study.k
        with AppProcess(study.db_path, study.data_dir, log_path=tmp / "load.log") as app:
            figures["app_start_s"] = app.ready_s
            start = time.perf_counter()
            acks = concurrent_designers(app.url, study, submissions, seed=seed)
            wall = time.perf_counter() - start
        figures |= _latency_figures(acks, wall)
        figures["load_problems"] = check_store(study.db_path, study.data_dir, acks, k=study.k)
        figures["solo_p50_ms"] = _solo_p50_ms(tmp, submissions, side, seed)
        figures |= _kill_figures(tmp, kill_designers, submissions, side, seed)
        if resume:
            result = kill_and_resume_run(tmp / "resume", build_tiny_models(tmp / "models"))
            figures |= {
                "run_items": result.total,
                "run_generated_at_kill": result.generated_at_kill,
                "run_identical": result.rows == result.reference_rows
                and result.files == result.reference_files
                and not result.orphans,
            }
    return figures


BASELINE_REV = "7ec3e9c"
"""main before any change for issue 13 (the code its 5.7 submissions/s were measured on)."""
VARIANTS = ("baseline", "no_pool", "pool")
LIGHT_CALLS = ("/login_invite", "/designer_state", "/expert_next", "/participant_next")


def light_during_burst(
    *,
    designers: int = 30,
    submissions: int = 20,
    side: int = 512,
    seed: int = 0,
    root: str | Path | None = None,
    env: dict[str, str] | None = None,
    server_cpus: Iterable[int] | None = None,
    client_processes: int = 0,
    transport: str = "gradio_client",
    prepared: bool = False,
) -> dict:
    """Designers submitting as fast as answers come, and meanwhile three more people in
    turn, every 0.25 s: a designer signing in (``/login_invite``) and reloading the task
    view (``/designer_state``), an expert opening the vote queue (``/expert_next``) and a
    participant asking for a trial (``/participant_next``). The latency of those light
    calls while submissions queue, and the burst's throughput (issue 13).

    `root` and `env` go to `bench.app_process.AppProcess` (an older checkout, a worker
    count), and so does `server_cpus` (the app pinned to those CPUs; the designers and
    the prober then run on the others). `client_processes` > 0 spreads the designers over
    that many `bench.client_processes.ClientProcesses`, started before the clock; 0 runs
    them as threads of this process. `transport` is the designers' and the prober's client
    (``"gradio_client"`` or ``"http"``, `bench.designer_client.new_client`); `prepared`
    encodes the designers' color layers before the clock (`prepare_values`). A light call
    that the app refuses (an empty queue) counts as answered.
    """
    client_cpus = None if server_cpus is None else sorted(os.sched_getaffinity(0) - set(server_cpus))
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp = Path(tmp)
        study, expert_invite, participant_invite = _prepare_light_study(
            Path(root or ROOT), tmp, designers + 1, _pool_size(designers), side
        )
        (_, probe_invite), crowd = (
            study.designers[-1],
            Study(**{**study.__dict__, "designers": study.designers[:-1]}),
        )
        clients = (
            stack.enter_context(ClientProcesses(client_processes, cpus=client_cpus))
            if client_processes
            else None
        )
        values = prepare_values(crowd, seed) if prepared else None
        options = {"root": root} if root is not None else {}
        app = stack.enter_context(
            AppProcess(
                study.db_path,
                study.data_dir,
                log_path=tmp / "light.log",
                env=env,
                cpus=server_cpus,
                **options,
            )
        )
        stop = threading.Event()
        timings: dict[str, list[float]] = {api: [] for api in LIGHT_CALLS}
        invites = {"/login_invite": probe_invite, "expert": expert_invite, "participant": participant_invite}
        prober = threading.Thread(
            target=_probe_light_calls, args=(app.url, invites, stop, timings, client_cpus, transport)
        )
        start = time.perf_counter()
        prober.start()
        try:
            acks = concurrent_designers(
                app.url, crowd, submissions, seed=seed, clients=clients, transport=transport, prepared=values
            )
            wall = time.perf_counter() - start
        finally:
            stop.set()
            prober.join()
        stack.close()
        problems = check_store(study.db_path, study.data_dir, acks, k=study.k)
    figures = {f"light_{k}": v for k, v in _latency_figures(acks, wall).items()}
    for api, seconds in timings.items():
        name = api.strip("/")
        figures[f"light_{name}_n"] = len(seconds)
        figures[f"light_{name}_p95_ms"] = 1e3 * float(np.percentile(seconds, 95)) if seconds else math.nan
        figures[f"light_{name}_max_ms"] = 1e3 * max(seconds) if seconds else math.nan
    setup = {
        "light_server_cpus": None if server_cpus is None else sorted(server_cpus),
        "light_client_processes": client_processes,
        "light_client_cpus": len(client_cpus) if client_cpus is not None else None,
        "light_client_transport": transport,
        "light_values_prepared": values.prepared if values is not None else 0,
        "light_values_encoded_at_submit": values.fallbacks if values is not None else None,
    }
    return figures | setup | {"light_designers": designers, "light_problems": problems}


def _probe_light_calls(
    url: str,
    invites: dict[str, str],
    stop: threading.Event,
    timings: dict[str, list[float]],
    cpus,
    transport: str = "gradio_client",
) -> None:
    """Until `stop`: each of `LIGHT_CALLS` in turn, 0.25 s apart, timed into `timings`.

    `invites` holds the probing designer's (under ``"/login_invite"``), the expert's and
    the participant's; `cpus`, if given, pins this thread; `transport` picks the client
    (`bench.designer_client.new_client`)."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    client = new_client(url, transport)
    tokens = {
        role: client.predict(invites[role], api_name="/login_invite")[0] for role in ("expert", "participant")
    }
    while not stop.is_set():
        for api in LIGHT_CALLS:
            args = {
                "/login_invite": (invites["/login_invite"],),
                "/designer_state": (tokens.get("designer", ""),),
                "/expert_next": (tokens["expert"],),
                "/participant_next": (tokens["participant"],),
            }[api]
            start = time.perf_counter()
            try:
                result = client.predict(*args, api_name=api)
            except AppError:  # an expected refusal (nothing to vote on) is an answer too
                result = None
            timings[api].append(time.perf_counter() - start)
            if api == "/login_invite" and result:
                tokens["designer"] = result[0]
            time.sleep(0.25)


_PREPARE = """
import json, sys
from annotation.people.accounts import create_annotators
from bench.bench_load import prepare_study
from storage import open_db
db_path, data_dir, n, pool, side = sys.argv[1:6]
study = prepare_study(db_path, data_dir, int(n), int(pool), side=int(side))
db = open_db(db_path)
extra = [create_annotators(db, 1, role)[0][1] for role in ("expert", "participant")]
db.close()
print(json.dumps({"designers": study.designers, "concepts": study.concepts, "k": study.k, "extra": extra}))
"""


def _prepare_light_study(root: Path, tmp: Path, n_designers: int, n_concepts: int, side: int):
    """`prepare_study` plus an expert and a participant, made by the code of the checkout
    at `root` (an older checkout's app refuses a database of a newer schema)."""
    db_path, data_dir = tmp / "light.sqlite", tmp / "light"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PREPARE,
            str(db_path),
            str(data_dir),
            str(n_designers),
            str(n_concepts),
            str(side),
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    made = json.loads(done.stdout.strip().splitlines()[-1])
    study = Study(db_path, data_dir, tuple(map(tuple, made["designers"])), tuple(made["concepts"]), made["k"])
    return study, *made["extra"]


def burst_comparison(
    *,
    designers: int = 30,
    submissions: int = 20,
    side: int = 512,
    seed: int = 0,
    baseline_dir: str | Path | None = None,
    server_cpus: Iterable[int] | None = None,
    client_processes: int = 0,
    variants: Iterable[str] = VARIANTS,
    transport: str = "gradio_client",
    prepared: bool = False,
) -> dict:
    """`light_during_burst` three times in one run: main before issue 13 (`BASELINE_REV`,
    checked out into a temporary git worktree, or the checkout at `baseline_dir`), today's
    code with the coloring pool off (``COLORCONCEPT_WORKERS=0``), and today's code as it
    starts by default (one worker per core it may use). `server_cpus`,
    `client_processes`, `transport` and `prepared` go to each run; `variants` picks some of
    `VARIANTS`. Returns ``{"baseline": figures, "no_pool": figures, "pool": figures}``."""
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"`variants` must be among {VARIANTS}, got {sorted(unknown)}")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        if "baseline" in variants and baseline_dir is None:
            baseline_dir = stack.enter_context(_baseline_worktree(Path(tmp) / "baseline"))
        runs = {
            "baseline": {"root": baseline_dir},
            "no_pool": {"env": {"COLORCONCEPT_WORKERS": "0"}},
            "pool": {},
        }
        for name in VARIANTS:
            if name in variants:
                results[name] = light_during_burst(
                    designers=designers,
                    submissions=submissions,
                    side=side,
                    seed=seed,
                    server_cpus=server_cpus,
                    client_processes=client_processes,
                    transport=transport,
                    prepared=prepared,
                    **runs[name],
                )
    return results


@contextmanager
def _baseline_worktree(path: Path) -> Iterator[Path]:
    """`BASELINE_REV` checked out at `path` (a git worktree of this checkout) meanwhile."""
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), BASELINE_REV],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


LOCK_TRACER = Path(__file__).parent / "write_lock"
"""A ``sitecustomize`` that times the app's write lock (see its docstring)."""


def concurrency_sweep(
    limits: Iterable[int] = (1, 2, 4, 8),
    *,
    designers: int = 30,
    submissions: int = 20,
    side: int = 512,
    seed: int = 0,
    server_cpus: Iterable[int] | None = None,
    client_processes: int = 0,
    transport: str = "gradio_client",
    prepared: bool = False,
) -> dict[int, dict]:
    """`light_during_burst` of today's code once per submissions-at-once limit
    (``COLORCONCEPT_SUBMIT_CONCURRENCY``), one after the other, with the app's write lock
    timed (`LOCK_TRACER`; `server_cpus`, `client_processes`, `transport` and `prepared` go
    to each run): per limit the burst's figures plus ``lock_n`` (write
    transactions), ``lock_wait_p50_ms`` / ``lock_wait_p90_ms``, ``lock_hold_p50_ms`` /
    ``lock_hold_p90_ms`` and ``lock_held_share`` (the lock's total hold over the burst's
    wall time)."""
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for limit in limits:
            trace = Path(tmp) / f"lock-{limit}.json"
            env = {
                "COLORCONCEPT_SUBMIT_CONCURRENCY": str(limit),
                "COLORCONCEPT_BENCH_LOCK_TRACE": str(trace),
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(LOCK_TRACER), str(ROOT), os.environ.get("PYTHONPATH")])
                ),
            }
            figures = light_during_burst(
                designers=designers,
                submissions=submissions,
                side=side,
                seed=seed,
                env=env,
                server_cpus=server_cpus,
                client_processes=client_processes,
                transport=transport,
                prepared=prepared,
            )
            lock = json.loads(trace.read_text())
            waits, holds = 1e3 * np.array(lock["waits"]), 1e3 * np.array(lock["holds"])
            results[limit] = figures | {
                "lock_n": len(holds),
                "lock_wait_p50_ms": float(np.median(waits)),
                "lock_wait_p90_ms": float(np.percentile(waits, 90)),
                "lock_hold_p50_ms": float(np.median(holds)),
                "lock_hold_p90_ms": float(np.percentile(holds, 90)),
                "lock_held_share": float(holds.sum() / 1e3 / figures["light_wall_s"]),
            }
    return results


def _light_cell(name: str):
    return lambda f: f"{f[f'light_{name}_p95_ms']:.0f} ({f[f'light_{name}_n']})"


def concurrency_markdown(results: dict[int, dict]) -> str:
    """A table of `concurrency_sweep`'s figures, one column per limit."""
    limits = sorted(results)
    rows = [
        (
            "submissions/s (store checks pass)",
            lambda f: f"{f['light_submissions_per_s']:.1f} ({'no' if f['light_problems'] else 'yes'})",
        ),
        ("submit p50 / p95 (ms)", lambda f: f"{f['light_p50_ms']:.0f} / {f['light_p95_ms']:.0f}"),
    ]
    rows += [(f"`{api}` p95 (ms; calls)", _light_cell(api.strip("/"))) for api in LIGHT_CALLS]
    rows += [
        (
            "write lock: wait p50 / p90 (ms)",
            lambda f: f"{f['lock_wait_p50_ms']:.1f} / {f['lock_wait_p90_ms']:.1f}",
        ),
        (
            "write lock: hold p50 / p90 (ms)",
            lambda f: f"{f['lock_hold_p50_ms']:.1f} / {f['lock_hold_p90_ms']:.1f}",
        ),
        (
            "write lock held (share of the burst; transactions)",
            lambda f: f"{f['lock_held_share']:.0%} ({f['lock_n']})",
        ),
    ]
    header = "| figure | " + " | ".join(f"{n} at once" for n in limits) + " |"
    lines = [header, "|---|" + "---:|" * len(limits)]
    lines += [f"| {name} | " + " | ".join(cell(results[n]) for n in limits) + " |" for name, cell in rows]
    return "\n".join(lines)


def light_markdown(f: dict) -> str:
    """The "Light endpoints during a burst" section body for BENCHMARKS.md, from
    `burst_comparison`'s figures (the last column needs both "baseline" and "pool")."""
    names = {
        "baseline": f"main before issue 13 ({BASELINE_REV})",
        "no_pool": "today, pool off",
        "pool": "today",
    }
    ok = {k: "yes" if not v["light_problems"] else "NO" for k, v in f.items()}
    pool, base = f.get("pool"), f.get("baseline")
    first = next(iter(f.values()))

    def ratio(key: str, what: str = "") -> str:
        return f"{pool[key] / base[key]:.2f}x{what}" if pool and base else "–"

    lines = [
        f"A real `python app.py` process; {first['light_designers']} designers submit "
        f"{first['light_stored'] // first['light_designers']} main-task "
        "colorings each as fast as answers come (512² sketches), and meanwhile three more people "
        f"take turns every 0.25 s through their own {_client_name(first)}: a designer signing in "
        "(`/login_invite`) and reloading the task view (`/designer_state`), an expert opening "
        "the vote queue (`/expert_next`), a participant asking for a trial (`/participant_next`). "
        f"{_setup_sentence(first)} Variants in one run, one after the other: "
        + "; ".join(f"**{names[k]}**" for k in f)
        + ".",
        "",
        "| figure | " + " | ".join(names[k] for k in f) + " | today / before |",
        "|---|" + "---:|" * (len(f) + 1),
        "| submissions/s (store checks pass) | "
        + " | ".join(f"{v['light_submissions_per_s']:.1f} ({ok[k]})" for k, v in f.items())
        + f" | {ratio('light_submissions_per_s')} |",
        "| submit p50 / p95 (ms) | "
        + " | ".join(f"{v['light_p50_ms']:.0f} / {v['light_p95_ms']:.0f}" for v in f.values())
        + f" | {ratio('light_p95_ms', ' (p95)')} |",
    ]
    for api in LIGHT_CALLS:
        name = api.strip("/")
        lines.append(
            f"| `{api}` p95 / max (ms) | "
            + " | ".join(
                f"{v[f'light_{name}_p95_ms']:.0f} / {v[f'light_{name}_max_ms']:.0f}" for v in f.values()
            )
            + f" | {ratio(f'light_{name}_p95_ms', ' (p95)')} |"
        )
    return "\n".join(lines)


def _setup_sentence(f: dict) -> str:
    if f.get("light_server_cpus") is None:
        where = "Clients and server share the machine's cores."
    else:
        where = (
            f"The server (and its coloring workers) is pinned to CPUs {f['light_server_cpus']}; "
            f"the clients run on the other {f['light_client_cpus']}."
        )
    if f.get("light_client_processes"):
        where += f" The designers are threads of {f['light_client_processes']} client processes."
    return f"{where} {_clients_sentence(f)}"


def _client_name(f: dict) -> str:
    return "HTTP client" if f.get("light_client_transport") == "http" else "`gradio_client`"


def _clients_sentence(f: dict) -> str:
    """How the clients talk and encode (older figures lack the keys: `gradio_client`)."""
    if f.get("light_client_transport") == "http":
        talk = (
            "The clients are light: each speaks Gradio's queue protocol over one keep-alive "
            "connection (`bench.designer_client.HttpClient`) instead of `gradio_client`"
        )
    else:
        talk = "Each client is a `gradio_client.Client`"
    if f.get("light_values_prepared"):
        encode = (
            f"the designers' color layers were encoded before the clock "
            f"({f['light_values_prepared']} prepared; {f['light_values_encoded_at_submit']} "
            "encoded at submit time because their sketch's had run out)"
        )
    else:
        encode = "each designer encodes its canvas's PNG at submit time"
    return f"{talk}; {encode}."


def working_pace(
    *,
    designers: int = 30,
    minutes: float = 5.0,
    pace: tuple[float, float] = (20.0, 60.0),
    side: int = 512,
    seed: int = 0,
) -> dict:
    """Designers at a working pace, all starting together (issue 13): each signs in, agrees,
    reads the instructions, then colors (`pace` seconds per coloring, seeded) and submits,
    practice included, for `minutes`. Figures: submit latency over the whole run (start
    included) and in its first 30 s, what was stored, and the store's checks."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        study = prepare_study(tmp / "pace.sqlite", tmp / "pace", designers, _pool_size(designers), side=side)
        with AppProcess(study.db_path, study.data_dir, log_path=tmp / "pace.log") as app:
            start = time.perf_counter()
            stamped: list[tuple[float, Ack]] = []
            lock = threading.Lock()

            def on_ack(ack: Ack) -> None:
                with lock:
                    stamped.append((time.perf_counter() - start, ack))

            acks = concurrent_designers(
                app.url, study, 10**6, seed=seed, on_ack=on_ack, pace=pace, until=start + 60 * minutes
            )
            wall = time.perf_counter() - start
        problems = check_store(study.db_path, study.data_dir, acks, k=study.k)
    seconds = np.array([a.seconds for a in acks])
    early = np.array([a.seconds for at, a in stamped if at - a.seconds < 30.0])
    return {
        "pace_designers": designers,
        "pace_minutes": minutes,
        "pace_range_s": pace,
        "pace_submissions": int(seconds.size),
        "pace_wall_s": wall,
        "pace_p50_ms": 1e3 * np.percentile(seconds, 50),
        "pace_p95_ms": 1e3 * np.percentile(seconds, 95),
        "pace_max_ms": 1e3 * seconds.max(),
        "pace_first_30s": int(early.size),
        "pace_first_30s_p95_ms": 1e3 * np.percentile(early, 95) if early.size else float("nan"),
        "pace_duplicates": len(acks) - len({a.coloring_id for a in acks}),
        "pace_problems": problems,
    }


def pace_markdown(f: dict) -> str:
    """The "Working pace" section body for BENCHMARKS.md."""
    lo, hi = f["pace_range_s"]
    return "\n".join(
        [
            f"A real `python app.py` process and {f['pace_designers']} designers starting together, "
            f"one thread and `gradio_client` each: invite link, consent, instructions, then "
            f"{lo:.0f}-{hi:.0f} s of coloring (uniform, seeded) before each submission, practice "
            f"included, for {f['pace_minutes']:g} minutes; 512² sketches. Latency is the "
            "`/designer_submit` call as the client sees it, over the whole run, start included.",
            "",
            "| figure | value |",
            "|---|---:|",
            f"| submissions stored (every check of `bench.store_checks`: "
            f"{'yes' if not f['pace_problems'] else 'NO'}); duplicated | "
            f"{f['pace_submissions']}; {f['pace_duplicates']} |",
            f"| submit latency p50 / p95 / max | {f['pace_p50_ms']:.0f} / {f['pace_p95_ms']:.0f} / "
            f"{f['pace_max_ms']:.0f} ms |",
            f"| submissions started in the first 30 s; their p95 | {f['pace_first_30s']}; "
            f"{f['pace_first_30s_p95_ms']:.0f} ms |",
        ]
    )


def _solo_p50_ms(tmp: Path, submissions: int, side: int, seed: int) -> float:
    """Median submit latency of one designer alone (no queueing behind others), ms."""
    study = prepare_study(tmp / "solo.sqlite", tmp / "solo", 1, _pool_size(1), side=side)
    with AppProcess(study.db_path, study.data_dir, log_path=tmp / "solo.log") as app:
        acks = concurrent_designers(app.url, study, submissions, seed=seed)
    return 1e3 * float(np.median([a.seconds for a in acks if not a.practice]))


def _pool_size(designers: int) -> int:
    """Concepts enough for every designer's whole first batch, with 10 % to spare."""
    config = AppConfig()
    return math.ceil(1.1 * designers * config.batch_size / config.colorings_per_concept)


def _latency_figures(acks: list[Ack], wall: float) -> dict:
    main = np.array([a.seconds for a in acks if not a.practice])
    practice = np.array([a.seconds for a in acks if a.practice])
    return {
        "stored": int(main.size),
        "practice_stored": int(practice.size),
        "wall_s": wall,
        "submissions_per_s": len(acks) / wall,
        "p50_ms": 1e3 * np.percentile(main, 50),
        "p95_ms": 1e3 * np.percentile(main, 95),
        "max_ms": 1e3 * main.max(),
        "practice_p50_ms": 1e3 * np.percentile(practice, 50),
    }


def _kill_figures(tmp: Path, designers: int, submissions: int, side: int, seed: int) -> dict:
    study = prepare_study(tmp / "kill.sqlite", tmp / "kill", designers, _pool_size(designers), side=side)
    result = kill_app(study, submissions, designers * submissions // 2, seed=seed, log_path=tmp / "kill.log")
    return {
        "kill_designers": designers,
        "kill_acknowledged": len(result.acks),
        "kill_interrupted_files": len(result.interrupted_files),
        "kill_orphans_swept": len(result.swept),
        "kill_all_interrupted_swept": set(result.interrupted_files) <= set(result.swept),
        "kill_after_restart": len(result.acks_after_restart),
        "kill_restart_s": result.restart_s,
        "kill_problems": result.problems,
    }


def markdown(figures: dict) -> str:
    """The "Load and faults" section body for BENCHMARKS.md."""
    ok = {True: "yes", False: "NO"}
    lines = [
        f"A real `python app.py` process (queue concurrency 8) and {figures['designers']} "
        f"designers at once, one thread and `gradio_client` each: invite link, consent, "
        f"instructions, 3 practice colorings, then {figures['submissions_each']} main-task "
        f"colorings each through `/designer_submit` (batches of {figures['batch_size']}, "
        f"K = {figures['k']}, {figures['image_side']}² sketches, 1-3 bucket fills per "
        "canvas value). Latency is the submit call as the client sees it: queue, decoding "
        "the canvas value, the paint check, UW-71 extraction, two PNG files, the rows and "
        "the task in one `BEGIN IMMEDIATE` transaction, then the next task's view. Clients "
        "and server share this machine's cores. With every designer waiting on an answer, "
        "latency under load is mostly queueing (designers / throughput, Little's law); the "
        "one-designer row gives the service time itself.",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| main-task submissions stored (exactly once, quotas kept, integrity ok) | "
        f"{figures['stored']} + {figures['practice_stored']} practice "
        f"({ok[not figures['load_problems']]}) |",
        f"| submit latency p50 / p95 / max | {figures['p50_ms']:.0f} / {figures['p95_ms']:.0f}"
        f" / {figures['max_ms']:.0f} ms |",
        f"| throughput | {figures['submissions_per_s']:.1f} submissions/s |",
        f"| one designer alone, submit latency p50 (service time without queueing) | "
        f"{figures['solo_p50_ms']:.0f} ms |",
        f"| app start-up (fresh store) | {figures['app_start_s']:.1f} s |",
        f"| app SIGKILLed inside a write, {figures['kill_designers']} designers submitting: "
        f"acknowledged before the kill, all present after restart | "
        f"{figures['kill_acknowledged']} ({ok[not figures['kill_problems']]}) |",
        f"| files the interrupted write left / moved aside by the start-up sweep | "
        f"{figures['kill_interrupted_files']} / {figures['kill_orphans_swept']} "
        f"(all: {ok[figures['kill_all_interrupted_swept']]}) |",
        f"| restart until serving; submissions accepted after it | "
        f"{figures['kill_restart_s']:.1f} s; {figures['kill_after_restart']} |",
    ]
    if "run_items" in figures:
        lines.append(
            f"| evaluation run SIGKILLed after {figures['run_generated_at_kill']} of "
            f"{figures['run_items']} images, resumed: same rows and files as "
            f"uninterrupted | {ok[figures['run_identical']]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.bench_load burst|concurrency [options]``: `burst_comparison` or
    `concurrency_sweep`, its figures as JSON and its markdown (``--light-clients``: light
    clients, see `light_during_burst`)."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_load", description=main.__doc__)
    parser.add_argument("scenario", choices=["burst", "concurrency"])
    parser.add_argument("--designers", type=int, default=30)
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--server-cpus", type=_cpu_list, help="e.g. 0,1 (default: not pinned)")
    parser.add_argument("--client-processes", type=int, default=0, help="0: designer threads in this process")
    parser.add_argument(
        "--transport", choices=TRANSPORTS, default="gradio_client", help="the clients' protocol"
    )
    parser.add_argument(
        "--prepared-values", action="store_true", help="encode the canvas values' layers before the clock"
    )
    parser.add_argument(
        "--light-clients", action="store_true", help="both: --transport http --prepared-values"
    )
    parser.add_argument(
        "--baseline-dir", type=Path, help=f"a checkout of {BASELINE_REV} (default: a git worktree)"
    )
    parser.add_argument("--variants", type=lambda s: s.split(","), default=list(VARIANTS))
    parser.add_argument("--json", type=Path, help="also write the figures there")
    parser.add_argument(
        "--limits",
        type=_cpu_list,
        default=[1, 2, 4, 8],
        help="concurrency: submissions at once, e.g. 1,2,4,8",
    )
    args = parser.parse_args(argv)
    clients = {
        "transport": "http" if args.light_clients else args.transport,
        "prepared": args.light_clients or args.prepared_values,
    }
    if args.scenario == "concurrency":
        results = concurrency_sweep(
            args.limits,
            designers=args.designers,
            submissions=args.submissions,
            side=args.side,
            server_cpus=args.server_cpus,
            client_processes=args.client_processes,
            **clients,
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str))
        print(concurrency_markdown(results), flush=True)
        return
    figures = {}
    for name in args.variants:  # one at a time, each printed as it ends
        figures |= burst_comparison(
            designers=args.designers,
            submissions=args.submissions,
            side=args.side,
            baseline_dir=args.baseline_dir.resolve() if args.baseline_dir else None,
            server_cpus=args.server_cpus,
            client_processes=args.client_processes,
            variants=[name],
            **clients,
        )
        print(json.dumps({name: figures[name]}, default=str), flush=True)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
    print(light_markdown(figures), flush=True)


def _cpu_list(text: str) -> list[int]:  # also the --limits list
    return [int(cpu) for cpu in text.split(",")]


if __name__ == "__main__":
    main()
