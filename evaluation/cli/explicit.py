"""Explicit-color evaluation (GenColorBench): prompts, images, masks, dominant colors, scores, tables.

A new run needs --model and a prompt selection (tasks, color systems, subset size, seed, and
optionally colors, objects and categories); `--run NAME` resumes a stored run as it was made
(options that describe a run are refused without --model), with the masking options given
again: once an image is masked the run keeps that masking and refuses another. Every
generated image is masked per object (GroundingDINO + SAM minus the object's negative labels),
checked for presence (the detection score, or a VQA model with --presence), and its dominant
color scored against the target's candidate set under the paper's rules and the released
code's pixel filters (paper, the default: the object's lit side or mean color, the nearer;
paper-mean, the plain mean; released, released-closest: not the release's evaluators,
docs/explicit.md); the accuracy table (model x task, each color system
weighing the same) is printed for --scoring and written as CSV with --table. Running again
continues where it stopped; with --executor ray the generate and score stages run on a Ray
cluster (only this process writes the database).

Example:
  python -m evaluation explicit --run demo --model tiny-random --tasks color_name,numeric \\
      --systems iscc-nbs-l2 --size 1 --objects car,apple --samples 1 --segmenter tiny-random
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path

from evaluation.cli import (
    add_device_arguments,
    add_executor_arguments,
    add_storage_arguments,
    check_data_dir,
    count,
    leased_stage,
    models_dir,
    open_db,
    print_workers,
    progress_bar,
    refuse_other_masking,
    resolve_device,
    resumed_run,
    seed,
    share,
    stage_executor,
    unwritable_folder,
    whole,
)
from evaluation.cli import generate as generate_cli
from evaluation.cli import segment as segment_cli
from storage.shown import shown

HELP = "explicit-color evaluation (GenColorBench): prompts to accuracy tables (resumable)"


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def _size(text: str) -> str | int:
    """An argparse ``type`` for ``--size``: ``full``, ``compact`` or prompts per color, 1 or more."""
    from evaluation.explicit.prompts import PER_COLOR

    if text in PER_COLOR:
        return text
    try:
        return count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be 'full', 'compact' or a whole number of prompts per color, 1 or more, got {shown(text)}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `explicit`: the run and its models, the prompt selection, masking, scoring."""
    from evaluation.explicit.prompts import DEFAULT_SYSTEMS, TASKS
    from evaluation.explicit.rules import DEFAULT_SCORING, SCORINGS

    parser.add_argument("--run", required=True, help="run name (folder data/runs/<run>/)")
    parser.add_argument(
        "--model", action="append", default=[], help="registry key; repeat for several models"
    )
    parser.add_argument(
        "--registry", default=None, help="registry TOML (default: evaluation/models/models.toml)"
    )
    parser.add_argument(
        "--source", default=None, help="load the (single) model from this hub id or directory"
    )
    parser.add_argument(
        "--cfg",
        default=None,
        help="comma-separated guidance scales (default: the pipeline's own default, one)",
    )
    parser.add_argument("--steps", type=whole, default=None, help="denoising steps (default: the model's)")
    parser.add_argument(
        "--resolution", type=whole, default=None, help="image side in pixels (default: the model's)"
    )
    parser.add_argument("--batch-size", type=whole, default=None, help="images per pipeline call")
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default=None)
    parser.add_argument(
        "--tasks", default=None, help=f"comma-separated subset of {', '.join(TASKS)} (default: all)"
    )
    parser.add_argument(
        "--systems",
        default=None,
        help=f"comma-separated color systems (default: {','.join(DEFAULT_SYSTEMS)})",
    )
    parser.add_argument(
        "--size",
        type=_size,
        default="compact",
        help="compact (default, < 10K prompts), full (44K), or N rounds per color",
    )
    parser.add_argument("--prompt-seed", type=seed, default=0, help="seed of the prompt set (default: 0)")
    parser.add_argument(
        "--colors",
        default=None,
        help="comma-separated asked-for color names (default: all); a multi-object prompt's second "
        "color is drawn from the whole system",
    )
    parser.add_argument("--objects", default=None, help="comma-separated object names (default: all 100)")
    parser.add_argument(
        "--categories", default=None, help="comma-separated object categories (default: all 7)"
    )
    parser.add_argument("--samples", type=count, default=4, help="images per (prompt, cfg) (default: 4)")
    segment_cli.add_masking_arguments(parser)
    parser.add_argument(
        "--segmenter",
        choices=["paper", "tiny-random"],
        default=None,
        help="masking preset (default: --detector/--sam)",
    )
    parser.add_argument(
        "--presence",
        default="detection",
        help="'detection' (default: detection score) or a VQA model's hub id or folder",
    )
    parser.add_argument(
        "--presence-threshold", type=share, default=None, help="detection score for presence (default: 0.35)"
    )
    parser.add_argument(
        "--scoring",
        choices=SCORINGS,
        default=DEFAULT_SCORING,
        help=f"rule set of the printed table (default: {DEFAULT_SCORING}; every rule set is stored)",
    )
    parser.add_argument("--table", type=Path, default=None, help="write the accuracy table to this CSV file")
    add_device_arguments(parser)
    add_executor_arguments(parser)
    add_storage_arguments(parser)
    parser.set_defaults(styles="natural")  # for the shared model options of `generate`


RUN_OPTIONS = (
    "registry", "source", "cfg", "steps", "resolution", "tasks", "systems", "size", "prompt_seed", "colors",
    "objects", "categories", "samples",
)  # fmt: skip
"""The options that describe an explicit-color run (refused on a resume)."""


def create_or_resume(
    db, args: argparse.Namespace, prompts: list | None, check: Callable[[dict], None] | None = None
) -> dict:
    """Store the run that the options describe (with --model, and its `prompts`, `_prompts`),
    then return its configuration.

    `check` sees the configuration first (a missing model, say): a refused run is not stored.
    """
    from evaluation.explicit.mode import at_default_guidance, create_explicit_run, plan_explicit_run
    from evaluation.pipeline import runs

    if args.model:
        specs, _ = generate_cli.model_specs(args)
        if not args.cfg:  # the model's default guidance, no sweep (the paper's setting)
            specs = at_default_guidance(specs)
        selection = _selection(args)
        if check is not None:
            check(plan_explicit_run(specs, prompts, args.samples, {"prompts": selection})[1])
        n = create_explicit_run(
            db, args.run, specs, prompts, samples=args.samples, settings={"prompts": selection}
        )
        print(f"run {args.run!r}: {n} images over {len(specs)} model(s), {len(prompts)} prompt(s)")
        config = runs.run_config(db, args.run)
    else:
        config = resumed_run(db, args, add_arguments, RUN_OPTIONS)
    if not runs.is_explicit(config):
        raise ValueError(f"run {args.run!r} is not an explicit-color run; use `python -m evaluation run`")
    if check is not None and not args.model:
        check(config)
    return config


def _prompts(args: argparse.Namespace) -> list | None:
    """The prompts of the run the options describe (None without --model: a resume); a bad
    choice (a mistyped color) is refused here, before the database is made."""
    from evaluation.explicit.prompts import build_prompts

    return build_prompts(**_selection(args)) if args.model else None


def _selection(args: argparse.Namespace) -> dict:
    """The prompt selection the options give (`build_prompts`'s keywords)."""
    return {
        "tasks": _names(args.tasks),
        "systems": _names(args.systems),
        "size": args.size,
        "seed": args.prompt_seed,
        "colors": _names(args.colors),
        "objects": _names(args.objects),
        "categories": _names(args.categories),
    }


def _generate(db, args: argparse.Namespace, config: dict, device: str, executor) -> None:
    from evaluation.pipeline.stages import GenerationWork

    dtype = None
    if args.dtype:
        import torch

        dtype = getattr(torch, args.dtype)
    work = GenerationWork.from_run(config, args.data_dir, device=device, dtype=dtype)
    batch_size = args.batch_size or min(spec.batch_size for spec in work.specs.values())
    try:
        leased_stage(db, args, "generate", work, batch_size, executor)
    finally:
        print_workers(executor)


def _score(db, args: argparse.Namespace, segmenter, device: str, executor) -> int:
    from evaluation.explicit.mode import LazyExplicitWork, score_explicit
    from evaluation.explicit.presence import PRESENCE_THRESHOLD
    from evaluation.pipeline import runs

    threshold = PRESENCE_THRESHOLD if args.presence_threshold is None else args.presence_threshold
    prompts = {row["prompt_id"]: row for row in runs.explicit_prompts(db, args.run)}
    work = LazyExplicitWork(
        segmenter, args.data_dir, prompts, device=device, presence=args.presence, presence_threshold=threshold
    )
    update, close = progress_bar("score")
    try:
        return score_explicit(db, args.run, work, executor=executor, progress=update)
    finally:
        close()
        print_workers(executor)


def _unwritable_table(path: Path) -> str:
    """Why the accuracy table cannot be written to `path`, or "" (checked before the run,
    which would otherwise end in the error after all its images): a probe file is made in
    its folder and removed."""
    if path.is_dir():
        return "is a folder; give a file name"
    if not path.parent.is_dir():
        return f"its folder {str(path.parent)!r} does not exist (or is not a folder)"
    if why := unwritable_folder(path.parent):
        return f"nothing can be written in its folder {str(path.parent)!r} ({why})"
    return ""


def main(args: argparse.Namespace) -> int:
    """Create or resume the run, generate its images, score them, print the tables."""
    import pandas as pd

    from evaluation.explicit.standing import judged_coverage
    from evaluation.explicit.tables import (
        PERCENT_OF_IMAGES,
        accuracy_table,
        category_accuracy,
        image_verdicts,
        write_csv,
    )
    from evaluation.explicit.views import run_standing
    from evaluation.models.availability import missing_transformers_model, wrong_model_kind
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import check_weights, job_lease, masking_of
    from evaluation.pipeline.stages import lost_files

    generate_on = stage_executor(args, "generate")  # before storing anything: no cluster, no run
    # Every option is checked before the run is stored: one refused later left a stored run.
    device = resolve_device(args.device) if generate_on is None else args.device
    if args.presence != "detection" and (
        problem := missing_transformers_model(args.presence, what="the --presence VQA model")
        or wrong_model_kind(args.presence, "image-text-to-text", what="the --presence model")
    ):
        raise ValueError(f"{problem}; or give --presence detection")
    if args.table is not None and (why := _unwritable_table(args.table)):
        raise ValueError(f"--table {str(args.table)!r}: {why}")
    check_data_dir(args.data_dir)
    prompts = _prompts(args)
    segmenter = segment_cli.masking_for(args) if args.model else None  # a resume may take the run's own
    db = open_db(args, create=bool(args.model))
    segmenter = segmenter or segment_cli.masking_for(args, db)
    refuse_other_masking(db, args.run, segmenter)
    # On a cluster the workers hold the weights, not this machine.
    config = create_or_resume(
        db,
        args,
        prompts,
        (lambda c: check_weights(c, segmenter, models_dir(args))) if generate_on is None else None,
    )
    runs.claim_masking(db, args.run, masking_of(segmenter))  # before any image is made
    done = 0
    with job_lease(db, args.run):  # one process at a time works on a run
        if runs.pending_items(db, args.run, "generate") or lost_files(
            db, args.run, "generate", args.data_dir
        ):
            _generate(db, args, config, device, generate_on)
        if runs.pending_items(db, args.run, "segment"):
            done = _score(db, args, segmenter, device, stage_executor(args, "segment"))
    images = image_verdicts(runs.explicit_results(db, run=args.run), scoring=args.scoring)
    print(f"{done} new image(s) judged; {len(images)} in run {args.run!r}")
    # A run left unfinished (images failed, or another process judging it) says what the
    # tables cover, as the app's Explicit colors tab does.
    standing = run_standing(db, args.run)
    note = standing.note(resume=f"(python -m evaluation explicit --run {shlex.quote(args.run)})")
    if note:
        print(note)
    with pd.option_context(
        "display.width", 160, "display.max_columns", 20, "display.float_format", "{:.2f}".format
    ):
        print("images scored (the others failed the presence check or masking: they count as wrong):")
        print(judged_coverage(images, standing).to_string())
        print(f"accuracy (%) per task, {args.scoring} rules, color systems averaged:")
        table = accuracy_table(images)
        print(table.to_string())
        print(f"accuracy (%) per object category (color_name prompts), {args.scoring} rules:")
        print(category_accuracy(images).to_string())
    if args.table is not None:
        # What its numbers are, as the printed heading says: a CSV alone did not.
        described = table.assign(unit=PERCENT_OF_IMAGES, rules=args.scoring, run=args.run)
        if note:
            described = described.assign(note=note)
        print(f"table written to {write_csv(described, args.table)}")
    return 0
