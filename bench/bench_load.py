"""Load and faults: many designers submitting at once, killed writers, a killed run.

Every scenario ends in `bench.store_checks.check_store` (every acknowledged submission
present exactly once, quotas kept, no partial rows, no orphaned files, ``PRAGMA
integrity_check`` ok):

- `concurrent_designers`: designers in threads, each with its own connection, reserve
  and submit colorings at once; the submit call's latency is measured.
- `kill_designers`: designer *processes* (``python -m bench.bench_load designer``) are
  SIGKILLed in the middle of their submissions, one of them inside a write, after its
  files exist and before its row commits; the store then restarts (schema, start-up
  sweep of orphaned files, `bench.store_checks.restart_store`) and is checked.
- `bench.run_resume.kill_and_resume_run`: ``python -m evaluation generate`` SIGKILLed
  and resumed ends with the rows and files of an uninterrupted run.

Submissions go through the annotation library (`annotation.assignment.reserve` /
`submit`), files first and row second, as the colorings store does; they move to the
designer tab's endpoint through `gradio_client` once that tab exists. ``python -m bench``
calls `run` and writes `markdown` into BENCHMARKS.md; ``tests/test_faults.py`` runs the
same scenarios at small sizes and asserts correctness only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.accounts import create_annotators
from annotation.assignment import reserve
from annotation.colorings import store_coloring
from annotation.concepts import sync_concepts
from annotation.db import ensure_schema, iso, open_db, transaction
from annotation.errors import Conflict
from annotation.files import store_png
from bench.run_resume import build_tiny_models, kill_and_resume_run
from bench.store_checks import check_store, restart_store

ROOT = Path(__file__).resolve().parent.parent
SKETCH_SIDE = 64


@dataclass(frozen=True)
class Ack:
    """One acknowledged submission: the call returned the coloring's id."""

    designer: int
    task_id: int
    coloring_id: int
    concept_key: str
    seconds: float


@dataclass(frozen=True)
class Study:
    """A prepared store: its files, its designers and the size of the coloring pool."""

    db_path: Path
    data_dir: Path
    designers: tuple[int, ...]
    concepts: tuple[str, ...]
    k: int


def prepare_study(db_path: str | Path, data_dir: str | Path, n_designers: int,
                  n_concepts: int, *, k: int = 5) -> Study:
    """A fresh store with `n_designers` designers and sketches for about `n_concepts` concepts.

    Bases get a selected sketch in concept-file order until their variants number at
    least `n_concepts`; the pool then holds ``len(Study.concepts) * k`` coloring slots.
    """
    db = open_db(db_path)
    try:
        ensure_schema(db)
        sync_concepts(db)
        concepts = _sketch_bases(db, data_dir, n_concepts)
        designers = tuple(a["id"] for a, _ in create_annotators(db, n_designers, "designer"))
    finally:
        db.close()
    return Study(Path(db_path), Path(data_dir), designers, concepts, k)


def _sketch_bases(db: sqlite_utils.Database, data_dir: str | Path,
                  n_concepts: int) -> tuple[str, ...]:
    chosen: list[str] = []
    with transaction(db):
        for (base,) in db.execute("select base from concepts group by base order by min(rowid)"):
            if len(chosen) >= n_concepts:
                break
            line_art = np.full((SKETCH_SIDE, SKETCH_SIDE), 255, dtype=np.uint8)
            line_art[[0, -1], :] = line_art[:, [0, -1]] = 0
            line_art[SKETCH_SIDE // 2, : len(base) + 1] = 0
            stored = store_png(data_dir, line_art)
            db["sketches"].insert({"base": base, "path": stored.path, "sha256": stored.sha256,
                                   "source": "bench", "selected": 1, "width": SKETCH_SIDE,
                                   "height": SKETCH_SIDE, "created": iso()})
            chosen += [key for (key,) in db.execute(
                "select key from concepts where base = ? order by key", [base])]
    return tuple(chosen)


def random_coloring(rng: np.random.Generator, side: int) -> tuple[np.ndarray, np.ndarray]:
    """A colored sketch (side, side, 3) uint8 and its painted mask (side, side) bool."""
    image = np.full((side, side, 3), 255, dtype=np.uint8)
    mask = np.zeros((side, side), dtype=bool)
    for _ in range(3):
        top, left = rng.integers(0, side // 2, size=2)
        height, width = rng.integers(side // 8, side // 2, size=2)
        mask[top:top + height, left:left + width] = True
        image[top:top + height, left:left + width] = rng.integers(0, 256, size=3)
    return image, mask


def _die_at_coloring_insert(db: sqlite_utils.Database) -> None:
    """SIGKILL this process when its connection next inserts a coloring row.

    The colorings store writes the PNG files first and the row inside its transaction,
    so the process dies with the files on disk and the transaction uncommitted.
    """
    def trace(statement: str) -> None:
        if statement.lstrip().upper().startswith('INSERT INTO "COLORINGS"'):
            os.kill(os.getpid(), signal.SIGKILL)
    db.conn.set_trace_callback(trace)


def designer_session(study: Study, designer: int, count: int, *, seed: int,
                     side: int = 64, batch_size: int = 5, retry_every: int = 4,
                     on_ack=None, die_in_write_at: int | None = None) -> list[Ack]:
    """One designer: reserve a batch, submit each task, top up, until `count` or a dry pool.

    Submissions go through `annotation.colorings.store_coloring` (files, distribution,
    rows, task). Every `retry_every`-th submission is sent a second time, as a client
    retrying after a lost answer would; the store must refuse it (`Conflict`) and store
    nothing. `die_in_write_at` kills this process (SIGKILL) inside that submission's
    write, after its files are stored and before its row commits.
    """
    rng = np.random.default_rng(seed)
    db = open_db(study.db_path)
    acks: list[Ack] = []
    try:
        while len(acks) < count:
            tasks = reserve(db, "coloring", designer, rng, batch_size, k=study.k)
            if not tasks:
                break
            for task in tasks[: count - len(acks)]:
                image, mask = random_coloring(rng, side)
                if die_in_write_at is not None and len(acks) == die_in_write_at:
                    _die_at_coloring_insert(db)
                coloring = {"color_image": image, "painted_mask": mask, "task_id": task.id,
                            "seconds_spent": float(rng.uniform(30, 600)), "k": study.k}
                start = time.perf_counter()
                coloring_id = store_coloring(db, study.data_dir, designer, task.concept_key,
                                             **coloring)
                ack = Ack(designer, task.id, coloring_id, task.concept_key,
                          time.perf_counter() - start)
                acks.append(ack)
                if on_ack is not None:
                    on_ack(ack)
                if retry_every and len(acks) % retry_every == 0:
                    _check_retry_refused(db, study.data_dir, designer, task, coloring)
    finally:
        db.close()
    return acks


def _check_retry_refused(db, data_dir: Path, designer: int, task, coloring: dict) -> None:
    try:
        store_coloring(db, data_dir, designer, task.concept_key, **coloring)
    except Conflict:
        return
    raise AssertionError(f"task {task.id} was accepted twice")


def concurrent_designers(study: Study, count: int, *, side: int = 64, batch_size: int = 5,
                         seed: int = 0) -> list[Ack]:
    """Every designer of `study` at once, one thread and connection each; all their acks."""
    seeds = np.random.SeedSequence(seed).spawn(len(study.designers))
    with ThreadPoolExecutor(max_workers=len(study.designers)) as pool:
        futures = [pool.submit(designer_session, study, designer, count,
                               seed=int(s.generate_state(1)[0]), side=side,
                               batch_size=batch_size)
                   for designer, s in zip(study.designers, seeds)]
        return [ack for future in futures for ack in future.result()]


def kill_designers(study: Study, count: int, kill_after: int, *, side: int = 64,
                   batch_size: int = 5, seed: int = 0) -> list[Ack]:
    """Designer processes submitting at once, SIGKILLed after `kill_after` acks in all.

    One more process kills itself inside its second submission's write (files stored,
    row not committed), so the crash leaves an orphan whatever the timing. Returns the
    acknowledgements that reached the parent before the kill.
    """
    acks: list[Ack] = []
    enough = threading.Event()
    lock = threading.Lock()
    seeds = np.random.SeedSequence(seed).spawn(len(study.designers))
    procs = [_designer_process(study, d, count, int(s.generate_state(1)[0]), side, batch_size,
                               die_in_write_at=1 if i == 0 else None)
             for i, (d, s) in enumerate(zip(study.designers, seeds))]

    def collect(proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with lock:
                acks.append(Ack(**json.loads(line)))
                if len(acks) >= kill_after:
                    enough.set()

    readers = [threading.Thread(target=collect, args=(p,), daemon=True) for p in procs]
    for reader in readers:
        reader.start()
    if procs[0].wait(timeout=300) != -signal.SIGKILL:
        raise RuntimeError(f"the designer process meant to die in a write exited with "
                           f"{procs[0].returncode}")
    enough.wait(timeout=300)
    for proc in procs[1:]:
        proc.send_signal(signal.SIGKILL)
    for proc, reader in zip(procs, readers):
        proc.wait()
        reader.join()
    return acks


def _designer_process(study: Study, designer: int, count: int, seed: int, side: int,
                      batch_size: int, *, die_in_write_at: int | None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "bench.bench_load", "designer", "--db", str(study.db_path),
            "--data-dir", str(study.data_dir), "--designer", str(designer), "--count",
            str(count), "--seed", str(seed), "--k", str(study.k), "--side", str(side),
            "--batch-size", str(batch_size)]
    if die_in_write_at is not None:
        argv += ["--die-in-write-at", str(die_in_write_at)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, bufsize=1)


def run(*, designers: int = 30, submissions: int = 20, side: int = 512, k: int = 5,
        kill_processes: int = 8, seed: int = 0, resume: bool = True) -> dict:
    """The load and fault scenarios at full size; figures for BENCHMARKS.md.

    Latencies are of the submit call (task check, two PNG files, the row, the commit),
    measured while every designer submits at once.
    """
    figures: dict = {"designers": designers, "submissions_each": submissions,
                     "image_side": side, "k": k}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        study = prepare_study(tmp / "load.sqlite", tmp / "load", designers,
                              math.ceil(designers * submissions / k), k=k)
        start = time.perf_counter()
        acks = concurrent_designers(study, submissions, side=side, seed=seed)
        wall = time.perf_counter() - start
        latency = np.array([a.seconds for a in acks])
        figures |= {"stored": len(acks), "wall_s": wall, "submissions_per_s": len(acks) / wall,
                    "p50_ms": 1e3 * np.percentile(latency, 50),
                    "p95_ms": 1e3 * np.percentile(latency, 95), "max_ms": 1e3 * latency.max(),
                    "load_problems": check_store(study.db_path, study.data_dir, acks, k=k)}
        figures |= _kill_figures(tmp, kill_processes, submissions, side, k, seed)
        if resume:
            result = kill_and_resume_run(tmp / "resume", build_tiny_models(tmp / "models"))
            figures |= {"run_items": result.total,
                        "run_generated_at_kill": result.generated_at_kill,
                        "run_identical": result.rows == result.reference_rows
                        and result.files == result.reference_files and not result.orphans}
    return figures


def _kill_figures(tmp: Path, processes: int, submissions: int, side: int, k: int,
                  seed: int) -> dict:
    study = prepare_study(tmp / "kill.sqlite", tmp / "kill", processes,
                          math.ceil(processes * submissions / k), k=k)
    acks = kill_designers(study, submissions, processes * submissions // 2, side=side,
                          seed=seed)
    start = time.perf_counter()
    swept = restart_store(study.db_path, study.data_dir)
    return {"kill_processes": processes, "kill_acknowledged": len(acks),
            "kill_orphans_swept": len(swept), "kill_restart_s": time.perf_counter() - start,
            "kill_problems": check_store(study.db_path, study.data_dir, acks, k=k,
                                         all_acknowledged=False)}


def markdown(figures: dict) -> str:
    """The "Load and faults" section body for BENCHMARKS.md."""
    ok = {True: "yes", False: "NO"}
    lines = [
        f"{figures['designers']} designers at once (threads, one SQLite connection each), "
        f"{figures['submissions_each']} submissions each, {figures['image_side']}² colorings, "
        f"K = {figures['k']}; through the annotation library until the designer tab's "
        "endpoint exists. One submission is one `annotation.colorings.store_coloring` call: "
        "UW-71 extraction of the painted pixels, two PNG files, then the rows and the task in "
        "one `BEGIN IMMEDIATE` transaction; with more threads than cores, the tail is time "
        "spent waiting for a core or the write lock.", "",
        "| figure | value |", "|---|---:|",
        f"| submissions stored (exactly once, quotas kept, integrity ok) | {figures['stored']} "
        f"({ok[not figures['load_problems']]}) |",
        f"| submit latency p50 / p95 / max | {figures['p50_ms']:.0f} / {figures['p95_ms']:.0f}"
        f" / {figures['max_ms']:.0f} ms |",
        f"| throughput | {figures['submissions_per_s']:.1f} submissions/s |",
        f"| SIGKILL of {figures['kill_processes']} designer processes: acknowledged before "
        f"the kill, all present after restart | {figures['kill_acknowledged']} "
        f"({ok[not figures['kill_problems']]}) |",
        f"| orphaned files moved aside at restart | {figures['kill_orphans_swept']} "
        f"(in {figures['kill_restart_s']:.2f} s) |"]
    if "run_items" in figures:
        lines.append(f"| evaluation run SIGKILLed after {figures['run_generated_at_kill']} of "
                     f"{figures['run_items']} images, resumed: same rows and files as "
                     f"uninterrupted | {ok[figures['run_identical']]} |")
    return "\n".join(lines)


def _designer_main(args: argparse.Namespace) -> int:
    """Entry of a designer process: print one JSON line per acknowledged submission."""
    study = Study(Path(args.db), Path(args.data_dir), (args.designer,), (), args.k)

    def announce(ack: Ack) -> None:
        print(json.dumps(asdict(ack)), flush=True)

    designer_session(study, args.designer, args.count, seed=args.seed, side=args.side,
                     batch_size=args.batch_size, on_ack=announce,
                     die_in_write_at=args.die_in_write_at)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_load")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("designer", help="one designer process (used by kill_designers)")
    for name in ("db", "data-dir"):
        worker.add_argument(f"--{name}", required=True)
    for name in ("designer", "count", "seed", "k", "side", "batch-size"):
        worker.add_argument(f"--{name}", type=int, required=True)
    worker.add_argument("--die-in-write-at", type=int, default=None)
    return parser


if __name__ == "__main__":
    sys.exit(_designer_main(_parser().parse_args()))
