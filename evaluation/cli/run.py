"""Run all three stages of a run: generate, segment, extract (creating the run first, or resuming it).

Takes the options of `generate` (the grid) and of `segment` (the masking models), or
`--segmenter tiny-random` for the project's tiny test models. Running it again continues
where it stopped. With `--executor ray` every stage runs on a Ray cluster
(`--ray-address` or $RAY_ADDRESS, else a local one); only this process writes the database.

Example:
  python -m evaluation run --run demo --model tiny-random --concepts apple,banana --samples 2 \\
      --segmenter tiny-random --executor ray
"""

from __future__ import annotations

import argparse

from evaluation.cli import (
    generate,
    models_dir,
    open_db,
    print_workers,
    refuse_other_masking,
    resume_command,
    segment,
)
from storage.shown import shown

HELP = "generate, segment and extract a run in one go (resumable; --executor ray for a cluster)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `run`: those of `generate`, the masking ones of `segment`, and --segmenter."""
    generate.add_arguments(parser)
    segment.add_masking_arguments(parser)
    parser.add_argument(
        "--segmenter",
        choices=["paper", "tiny-random"],
        default=None,
        help="masking preset: tiny-random builds the test models under data/models "
        "(default: --detector/--sam)",
    )


def main(args: argparse.Namespace) -> int:
    """Create or resume the run, then take it through generate, segment and extract."""
    from evaluation.cli import check_data_dir, resolve_device
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import ExecutorChoice, check_before_storing, run_pipeline
    from evaluation.pipeline.ray_storage import is_uri

    choice = ExecutorChoice(
        args.executor,
        args.ray_address,
        args.workers,
        capacity_wait_s=args.ray_wait,
        resume=resume_command(args),
    )
    if choice.kind == "ray":  # before storing anything: no cluster, no run
        from evaluation.pipeline.ray_executor import connect

        print(f"Ray cluster: {connect(choice.address).describe()}")
    device = resolve_device(args.device) if choice.kind == "in-process" else args.device
    if is_uri(args.data_dir) and args.segmenter == "tiny-random":
        raise ValueError(
            "--segmenter tiny-random builds its models under --data-dir/models, which must be a "
            f"local folder, got {shown(args.data_dir)}; give --detector and --sam instead"
        )
    # A masking the options name is checked before anything is stored; a resume given none
    # takes the run's own.
    spec = segment.masking_for(args) if args.model or segment.masking_given(args) else None
    check_data_dir(args.data_dir)
    db = open_db(args, create=bool(args.model))
    spec = spec or segment.masking_for(args, db)
    # Checked before the run is stored (a run refused for them was left stored, and could not
    # be run): the weights here, or on a cluster on every node, which holds them.
    refuse_other_masking(db, args.run, spec)
    generate.create_or_resume(
        db, args, lambda config: check_before_storing(choice, config, spec, models_dir(args), args.data_dir)
    )
    executors = {}
    run_pipeline(
        db,
        args.run,
        args.data_dir,
        spec,
        device=device,
        executor=choice,
        on_stage=lambda stage: print(f"{stage} ...", flush=True),
        on_executor=executors.__setitem__,
    )
    for stage, executor in executors.items():
        print(f"{stage} on Ray:")
        print_workers(executor)
    progress = {row["model"]: row for row in runs.exclusion_counts(db, run=args.run)}
    stored = runs.model_distributions(db, run=args.run)
    print(
        f"run {args.run!r}: {len(runs.items(db, args.run))} item(s), {sum(r['n_ok'] for r in progress.values())} "
        f"usable mask(s), {len(stored)} distribution(s)"
    )
    return 0
