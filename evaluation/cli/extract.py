"""Turn a run's masked images into model distributions P_M(x|c), one per (model, concept, style, cfg).

Uses the same extraction pipeline as the human colorings (evaluation.color.extraction). Groups
are extracted once all their images are segmented; stored groups are skipped unless --force.
"""

from __future__ import annotations

import argparse

from evaluation.cli import (
    add_executor_arguments,
    add_storage_arguments,
    concept_run_config,
    open_db,
    print_workers,
    progress_bar,
    stage_executor,
)

HELP = "extract model color distributions of a run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `extract`."""
    parser.add_argument("--run", required=True, help="run name")
    parser.add_argument("--force", action="store_true", help="recompute distributions already stored")
    add_executor_arguments(parser)
    add_storage_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Extract and store the run's distributions."""
    from evaluation.pipeline.jobs import job_lease
    from evaluation.pipeline.stages import extract

    db = open_db(args)
    concept_run_config(db, args.run)
    executor = stage_executor(args, "extract")
    update, close = progress_bar("extract")
    try:
        with job_lease(db, args.run):  # one process at a time works on a run
            written = extract(
                db, args.run, args.data_dir, force=args.force, progress=update, executor=executor
            )
    finally:
        close()
    print(f"{written} distribution(s) written for run {args.run!r}")
    print_workers(executor)
    if written:
        from evaluation.concepts import load_concepts
        from evaluation.pipeline.scoring import score_every_source

        score_every_source(db, load_concepts())
        print("scored against every stored human source")
    return 0
