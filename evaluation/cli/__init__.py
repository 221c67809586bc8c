"""Sub-commands of ``python -m evaluation`` and the options they share."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from storage import (
    DEFAULT_DATA_DIR,
    DEFAULT_DB_PATH,
    ENV_DATA_DIR,
    ENV_DB,
    db_path_refusal,
    ownership,
    serving,
)
from storage.files import nearest_existing_folder, unwritable_folder
from storage.shown import shown
from storage.spreadsheet import number_cell, whole_cell

WRITES_FILES = ("generate", "segment", "extract", "run", "explicit", "delete-run")
"""The commands that write (or delete) a run's files in ``--data-dir``; the others read it."""


def default_db() -> Path:
    """``$COLORCONCEPT_DB``, else ``data/colorconcept.sqlite`` under the project root."""
    return Path(os.environ.get(ENV_DB, DEFAULT_DB_PATH))


def default_data_dir() -> Path:
    """``$COLORCONCEPT_DATA_DIR``, else ``data/`` under the project root: the folder the app
    and ``python -m annotation`` read, so that a run's rows and its files stay together."""
    return Path(os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR)


def seed(text: str) -> int:
    """An argparse ``type`` for a random seed: a whole number from 0 to 2**63 - 1 (argparse
    then names the option in its refusal; NumPy's own "expected non-negative integer" named
    none)."""
    try:
        value = whole_cell(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, got {shown(text)}") from None
    if not 0 <= value <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 2**63 - 1, got {value}")
    return value


def count(text: str) -> int:
    """An argparse ``type`` for a number of things (samples, workers, concepts): a whole
    number, 1 or more. Refused here, argparse names the option typed (``--samples``); the
    library functions the value reaches name their own parameter (``samples``)."""
    try:
        value = whole_cell(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, 1 or more, got {shown(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number, 1 or more, got {value:,}")
    return value


def whole(text: str) -> int:
    """An argparse ``type`` for a whole number written with ASCII digits (``int`` read ``١٢``
    as 12); its range is checked where it is used."""
    try:
        return whole_cell(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {shown(text)}") from None


def decimal(text: str) -> float:
    """An argparse ``type`` for a number written with ASCII digits, a point and an exponent
    (``float`` read ``٣`` as 3); ``nan`` and ``inf`` pass, for the range check where it is
    used to name."""
    try:
        return number_cell(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {shown(text)}") from None


def _decimal(text: str) -> float:
    """`text` as `share` and `seconds` read it, `storage.spreadsheet.number_cell` (digits, a
    point, an exponent; Python's ``float`` also read ``1_000`` and ``٣``), else nan."""
    try:
        return number_cell(text)
    except ValueError:
        return math.nan


def share(text: str) -> float:
    """An argparse ``type`` for a score or share in [0, 1] (a detection threshold)."""
    value = _decimal(text)
    if not 0 <= value <= 1:  # nan fails too
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {shown(text)}")
    return value


def seconds(text: str) -> float:
    """An argparse ``type`` for a wait in seconds: a finite number, 0 or more (``nan`` never
    compared as over, so a run waited forever for a node)."""
    value = _decimal(text)
    if not 0 <= value < math.inf:  # 1e999 reads as inf
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {shown(text)}")
    return value


def add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--data-dir``."""
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        help="SQLite file (default: $COLORCONCEPT_DB or data/colorconcept.sqlite)",
    )
    from evaluation.pipeline.ray_storage import location

    parser.add_argument(
        "--data-dir",
        type=location,
        default=default_data_dir(),
        help="folder for runs/ and models/ (default: $COLORCONCEPT_DATA_DIR or data/); generate, "
        "segment and extract also take an object-store URI (s3://bucket/prefix) for the run files",
    )


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device``."""
    parser.add_argument(
        "--device", default="auto", help="cuda, cuda:N, cpu, or auto (cuda if available; default)"
    )


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--ray-address`` and ``--workers``."""
    parser.add_argument(
        "--executor",
        choices=["in-process", "ray"],
        default="in-process",
        help="where the work runs: this process (default) or a Ray cluster",
    )
    parser.add_argument(
        "--ray-address", default="", help="Ray head host:port (default: $RAY_ADDRESS, else a local cluster)"
    )
    parser.add_argument(
        "--workers",
        type=count,
        default=None,
        help="Ray workers per stage (default: one per GPU, or per CPU without GPUs, and more as nodes join)",
    )
    parser.add_argument(
        "--ray-wait",
        type=seconds,
        default=600.0,
        metavar="SECONDS",
        help="how long a Ray stage with no live worker (its nodes died) waits for one to come back "
        "or a node to join before it stops, resumably (default: 600)",
    )


def resume_command(args: argparse.Namespace) -> str:
    """The command that resumes this one: the command line itself when it ran as ``python -m evaluation``."""
    argv = sys.argv[1:] if Path(sys.argv[0]).parent.name == "evaluation" else []
    if argv and argv[0] == getattr(args, "command", None):
        return "python -m evaluation " + shlex.join(argv)
    return f"python -m evaluation {getattr(args, 'command', 'run')} --run {getattr(args, 'run', 'NAME')} with the same options"


def resumed_run(
    db,
    args: argparse.Namespace,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    names: tuple[str, ...],
) -> dict:
    """The configuration of the run a resume (no ``--model``) names, as it was made.

    Refuses options describing a new run (`names`, as `add_arguments` defines them): they
    were ignored without a word (`evaluation.pipeline.runs.create_run` refuses a changed run
    given with --model); and a run that does not exist, saying that a new one needs --model.
    """
    from evaluation.pipeline import runs

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    defaults = vars(parser.parse_args(["--run", args.run]))
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name) != defaults[name]]
    if given:
        raise ValueError(
            f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} a new run, but without --model "
            f"run {args.run!r} is resumed as it was made; leave {'it' if len(given) == 1 else 'them'} out to "
            "resume, or give --model and a new --run name"
        )
    try:
        return runs.run_config(db, args.run)
    except runs.RunError as error:
        raise ValueError(f"{error}; a new run needs --model") from None


def stage_executor(args: argparse.Namespace, stage: str):
    """The executor of `stage` that ``--executor`` asks for: None (in-process) or a RayExecutor.

    Connects to the cluster first and prints its resources; raises
    `evaluation.pipeline.ray_executor.RayUnavailable` (a ValueError) if Ray is missing or unreachable.
    """
    if args.executor != "ray":
        return None
    from evaluation.pipeline.ray_executor import RayExecutor, connect

    cluster = connect(args.ray_address)
    print(f"Ray cluster: {cluster.describe()}")
    options = {"capacity_wait_s": args.ray_wait, "resume": resume_command(args)}
    if getattr(args, "device", "auto") == "cpu":
        return RayExecutor(args.workers, **options)
    return RayExecutor.for_stage(stage, cluster, args.workers, **options)


def print_workers(executor) -> None:
    """One line per Ray worker: items, node (Ray node id and IP), restarts as Ray counts them,
    and whether it was lost; then the batches sent again (nothing for the in-process executor)."""
    if executor is None:
        return
    for name, worker in sorted(executor.progress().items()):
        state = {"down": ", down at the end", "lost": ", lost"}.get(worker.state, "")
        if worker.lost_batches:
            state += f", {worker.lost_batches} batch(es) lost with it"
        print(
            f"  {name} on {worker.node or 'no node'}: {worker.items} item(s) in {worker.batches} batch(es), "
            f"{worker.restarts} restart(s){state}"
        )
    if executor.redone_batches:
        print(
            f"  {executor.redone_batches} batch(es), {executor.redone_items} item(s), sent again after their "
            "worker died"
        )


def open_db(args: argparse.Namespace, *, create: bool = False):
    """The run database named by ``--db``, with the evaluation schema ensured.

    Only a command that stores a new run (`create`: ``--model`` given) makes a new database:
    a mistyped ``--db`` made a new empty one and then said there was nothing to score (and a
    resume refused for want of ``--model`` left one behind). A file that is not an
    SQLite database is refused before anything is written beside it, and so is a local
    ``--data-dir`` of another database (`storage.ownership.foreign_refusal`: a run's files
    written there were set aside as unnamed at that study's next start). The command holds the
    database's shared lock until it exits, so ``python -m annotation restore`` refuses to run
    under it (`storage.serving`).
    """
    from evaluation.pipeline.ray_storage import is_uri
    from evaluation.pipeline.runs import connect

    path = Path(args.db or default_db())
    if refusal := db_path_refusal(path):
        raise ValueError(refusal)
    if not is_uri(args.data_dir) and (
        refusal := ownership.foreign_refusal(
            path,
            args.data_dir,
            f"python -m evaluation {args.command}",
            writes=args.command in WRITES_FILES,
        )
    ):
        raise ValueError(refusal)
    if not path.exists() and not create:
        raise ValueError(
            f"no database at {str(path)!r} (give --db PATH; `generate`, `run` or `explicit` with --model "
            "make one)"
        )
    # What this command makes, by the real path (a --db link's target, never the link): the
    # database, its lock file and the folders above it that are not there yet.
    real = Path(os.path.realpath(path))
    made = not real.exists()
    lock_made = not serving.lock_path(path).exists()
    folders = [folder for folder in real.parents if not folder.exists()]
    serving.hold_shared(path)
    db = connect(path)
    if made:
        args.made_database = (db, real, lock_made, folders)
    return db


def models_dir(args) -> Path:
    """Where the tiny models of ``--data-dir`` are built and loaded from
    (`evaluation.pipeline.stages.models_dir_of`)."""
    from evaluation.pipeline.stages import models_dir_of

    return models_dir_of(args.data_dir)


def check_data_dir(path) -> None:
    """Refuse a ``--data-dir`` nothing can be written in, before a run is stored (a read-only
    or mistyped folder was found after the run and its items were, in an error naming a
    sub-folder). The folder, or the nearest one above it while it does not exist yet (it is
    not made here), gets a probe file, removed at once. An object store's URI is not checked.

    Raises
    ------
    ValueError
        Naming ``--data-dir`` and why.
    """
    from evaluation.pipeline.ray_storage import is_uri, refuse_file_in_the_way

    if is_uri(path):
        return
    refuse_file_in_the_way(path)
    folder = nearest_existing_folder(path)
    if why := unwritable_folder(folder):
        raise ValueError(
            f"--data-dir {str(path)!r}: nothing can be written in {str(folder)!r} ({why}); give a "
            "folder this user may write in"
        )


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; other names unchanged
    (ValueError for a name torch would not take, or a device this machine lacks)."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", name or ""):
        raise ValueError(f"--device must be auto, cpu, cuda, cuda:N or mps, got {shown(name)}")
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    # Checked before any model loads: torch would say so only when the first one moves there.
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"--device {name}: torch sees no CUDA device on this machine; use --device cpu or auto"
        )
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("--device mps: torch sees no MPS device on this machine; use --device cpu or auto")
    return name


def concept_run_config(db, run: str) -> dict:
    """The stored configuration of `run`, a concept run (ValueError for an explicit-color run:
    the concept stages would read prompts it does not have)."""
    from evaluation.pipeline import runs

    config = runs.run_config(db, run)
    if runs.is_explicit(config):
        raise ValueError(
            f"run {run!r} is an explicit-color run; its stages run with `python -m evaluation explicit`"
        )
    return config


def leased_stage(db, args, stage: str, work, batch_size: int, executor) -> int:
    """Run `stage` of run ``args.run`` with a progress bar, holding the run for this process
    (`evaluation.pipeline.jobs.job_lease`); returns `run_stage`'s count."""
    from evaluation.pipeline.jobs import job_lease
    from evaluation.pipeline.stages import run_stage

    update, close = progress_bar(stage)
    try:
        with job_lease(db, args.run):  # one process at a time works on a run
            return run_stage(
                db,
                args.run,
                stage,
                work,
                batch_size,
                progress=update,
                data_dir=args.data_dir,
                executor=executor,
            )
    finally:
        close()


def progress_bar(description: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A tqdm bar (with rate and ETA) as a ``progress(done, total)`` callback, and its close."""
    from tqdm import tqdm

    bar = tqdm(desc=description, unit="item", dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        bar.update(done - bar.n)

    return update, bar.close


def refuse_other_masking(db, run: str, segmenter) -> None:
    """`runs.refuse_other_masking` for `segmenter` (a `SegmenterSpec`), its refusal ending
    with the options of `run` and `explicit` that give the run's own masking: it named the
    recorded fields (``preset=tiny-random``), not what to type."""
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import masking_of

    try:
        runs.refuse_other_masking(db, run, masking_of(segmenter))
    except runs.RunError as refused:
        raise runs.RunError(f"{refused}; its options: {masking_options(runs.run_masking(db, run))}") from None


def masking_options(masking: dict) -> str:
    """The command-line options (of `run` and `explicit`) that give a run's recorded masking
    (`evaluation.pipeline.jobs.masking_of`)."""
    if masking.get("preset"):
        given = ["--segmenter", masking["preset"]]
    elif masking.get("sam_checkpoint"):
        given = ["--detector", masking["detector"], "--sam-checkpoint", masking["sam_checkpoint"]]
        given += ["--sam-type", masking["sam_type"]]
    else:
        given = ["--detector", masking["detector"], "--sam", masking["sam"]]
    given += [
        "--box-threshold",
        f"{masking['box_threshold']:g}",
        "--text-threshold",
        f"{masking['text_threshold']:g}",
    ]
    return shlex.join(given)
