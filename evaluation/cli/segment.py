"""Mask the concept in each generated image of a run: GroundingDINO box, then SAM.

Images where nothing is detected are recorded as such and later excluded (and counted).
Running again skips images already segmented.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import (
    add_device_arguments,
    add_executor_arguments,
    add_storage_arguments,
    concept_run_config,
    leased_stage,
    open_db,
    print_workers,
    refuse_other_masking,
    resolve_device,
    share,
    stage_executor,
    whole,
)
from evaluation.models.segmentation import (
    BOX_THRESHOLD,
    DEFAULT_DETECTOR,
    DEFAULT_SAM,
    SEGMENT_ANYTHING_TYPES,
    TEXT_THRESHOLD,
)

HELP = "segment a run's images with GroundingDINO + SAM (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `segment`."""
    parser.add_argument("--run", required=True, help="run name")
    add_masking_arguments(parser)
    parser.add_argument("--batch-size", type=whole, default=8, help="images per recorded batch (default: 8)")
    add_device_arguments(parser)
    add_executor_arguments(parser)
    add_storage_arguments(parser)


#: The masking options whose defaults `masking_for` fills in, and those defaults.
MASKING_OPTIONS = {
    "detector": DEFAULT_DETECTOR,
    "sam": DEFAULT_SAM,
    "box_threshold": BOX_THRESHOLD,
    "text_threshold": TEXT_THRESHOLD,
}


def add_masking_arguments(parser: argparse.ArgumentParser) -> None:
    """The detector, SAM and threshold options (shared with `run` and `explicit`), unset until
    `masking_for` reads them: a resume given none of them masks as the run was masked."""
    parser.add_argument(
        "--detector",
        default=DEFAULT_DETECTOR,
        help=f"GroundingDINO hub id or directory (default: {DEFAULT_DETECTOR})",
    )
    parser.add_argument(
        "--sam", default=DEFAULT_SAM, help=f"transformers SAM hub id or directory (default: {DEFAULT_SAM})"
    )
    parser.add_argument(
        "--sam-checkpoint",
        default=None,
        help="use the segment-anything package with this .pth instead of --sam",
    )
    parser.add_argument(
        "--sam-type", default="vit_h", choices=SEGMENT_ANYTHING_TYPES, help="architecture of --sam-checkpoint"
    )
    parser.add_argument(
        "--box-threshold",
        type=share,
        default=BOX_THRESHOLD,
        help=f"detection score threshold (default: {BOX_THRESHOLD})",
    )
    parser.add_argument(
        "--text-threshold",
        type=share,
        default=TEXT_THRESHOLD,
        help=f"text-token threshold (default: {TEXT_THRESHOLD})",
    )
    parser.set_defaults(**dict.fromkeys(MASKING_OPTIONS))


def masking_given(args: argparse.Namespace) -> bool:
    """Whether the command line names a masking (a preset, a checkpoint or any masking option)."""
    return bool(
        getattr(args, "segmenter", None)
        or args.sam_checkpoint
        or any(getattr(args, k) is not None for k in MASKING_OPTIONS)
    )


def masking_for(args: argparse.Namespace, db=None):
    """The masking of the run (a `evaluation.pipeline.jobs.SegmenterSpec`): the options'
    (their defaults for those not given; ``--segmenter`` a preset), or, for a resume (no
    ``--model``) given no masking option, the run's recorded one: ``--run NAME`` alone resumes
    a run as it was masked, as it resumes its grid as it was made."""
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import segmenter_of_masking, segmenter_preset
    from evaluation.pipeline.ray_storage import is_uri

    preset = getattr(args, "segmenter", None)
    models_dir = Path("models") if is_uri(args.data_dir) else Path(args.data_dir) / "models"
    if db is not None and not masking_given(args) and not getattr(args, "model", None):
        try:
            recorded = runs.run_masking(db, args.run)
        except runs.RunError:
            recorded = None  # no such run: `create_or_resume` says so, and what a new one needs
        if recorded is not None:
            return segmenter_of_masking(recorded, models_dir)
    for name, default in MASKING_OPTIONS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if preset:
        return segmenter_preset(preset, models_dir, args.box_threshold, args.text_threshold)
    return segmenter_spec(args)


def segmenter_spec(args: argparse.Namespace):
    """The `evaluation.pipeline.jobs.SegmenterSpec` the masking options describe."""
    from evaluation.pipeline.jobs import SegmenterSpec

    return SegmenterSpec(
        args.detector,
        args.sam,
        args.box_threshold,
        args.text_threshold,
        sam_checkpoint=args.sam_checkpoint or "",
        sam_type=args.sam_type,
    )


def main(args: argparse.Namespace) -> int:
    """Load the detector and SAM once (per worker), then segment the run's generated images."""
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import LazySegmentationWork, check_weights, masking_of

    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be a whole number, 1 or more, got {args.batch_size}")
    db = open_db(args)
    concept_run_config(db, args.run)
    executor = stage_executor(args, "segment")
    device = resolve_device(args.device) if executor is None else args.device
    spec = masking_for(args, db)
    refuse_other_masking(db, args.run, spec)
    if executor is None:  # on a cluster the workers hold the weights, not this machine
        check_weights(None, spec)
    else:  # every node: the data folder and the weights, before the first batch
        from evaluation.pipeline.ray_preflight import preflight
        from evaluation.pipeline.ray_storage import is_uri

        if not is_uri(args.data_dir):  # a worker's working folder is not this one's
            args.data_dir = Path(args.data_dir).resolve()
        preflight(args.data_dir, None, spec)
    # Recorded once the command can work: a refused one (weights missing) left its masking
    # as the run's, which then refused the masking that had really made its masks.
    runs.claim_masking(db, args.run, masking_of(spec))
    work = LazySegmentationWork(spec, args.data_dir, device)
    done = leased_stage(db, args, "segment", work, args.batch_size, executor)
    print(f"{done} image(s) segmented")
    for row in runs.exclusion_counts(db, run=args.run):
        print(
            f"  {row['model']}: {row['n_ok']} usable, {row['n_no_detection']} without detection, "
            f"{row['n_empty_mask']} with an empty mask (of {row['n_segmented']})"
        )
    print_workers(executor)
    return 0
