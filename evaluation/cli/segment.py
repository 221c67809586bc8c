"""Mask the concept in each generated image of a run: GroundingDINO box, then SAM.

Images where nothing is detected are recorded as such and later excluded (and counted).
Running again skips images already segmented.
"""

from __future__ import annotations

import argparse

from evaluation.cli import add_device_arguments, add_storage_arguments, open_db, progress_bar, resolve_device
from evaluation.models.segmentation import BOX_THRESHOLD, DEFAULT_DETECTOR, DEFAULT_SAM, SEGMENT_ANYTHING_TYPES, TEXT_THRESHOLD

HELP = "segment a run's images with GroundingDINO + SAM (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `segment`."""
    parser.add_argument("--run", required=True, help="run name")
    parser.add_argument("--detector", default=DEFAULT_DETECTOR, help=f"GroundingDINO hub id or directory (default: {DEFAULT_DETECTOR})")
    parser.add_argument("--sam", default=DEFAULT_SAM, help=f"transformers SAM hub id or directory (default: {DEFAULT_SAM})")
    parser.add_argument("--sam-checkpoint", default=None, help="use the segment-anything package with this .pth instead of --sam")
    parser.add_argument("--sam-type", default="vit_h", choices=SEGMENT_ANYTHING_TYPES, help="architecture of --sam-checkpoint")
    parser.add_argument("--box-threshold", type=float, default=BOX_THRESHOLD, help=f"detection score threshold (default: {BOX_THRESHOLD})")
    parser.add_argument("--text-threshold", type=float, default=TEXT_THRESHOLD, help=f"text-token threshold (default: {TEXT_THRESHOLD})")
    parser.add_argument("--batch-size", type=int, default=8, help="images per recorded batch (default: 8)")
    add_device_arguments(parser)
    add_storage_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Load the detector and SAM once, then segment the run's generated images."""
    from evaluation.pipeline import runs
    from evaluation.models.segmentation import load_detector, load_sam, load_segment_anything
    from evaluation.pipeline.stages import SegmentationWork, run_stage

    db = open_db(args)
    runs.run_config(db, args.run)
    device = resolve_device(args.device)
    detector = load_detector(args.detector, device=device)
    if args.sam_checkpoint:
        sam = load_segment_anything(args.sam_checkpoint, args.sam_type, device=device)
    else:
        sam = load_sam(args.sam, device=device)
    work = SegmentationWork(detector, sam, args.data_dir, args.box_threshold, args.text_threshold)
    update, close = progress_bar("segment")
    try:
        done = run_stage(db, args.run, "segment", work, args.batch_size, progress=update,
                         data_dir=args.data_dir)
    finally:
        close()
    print(f"{done} image(s) segmented")
    for row in runs.exclusion_counts(db, run=args.run):
        print(f"  {row['model']}: {row['n_ok']} usable, {row['n_no_detection']} without detection, "
              f"{row['n_empty_mask']} with an empty mask (of {row['n_segmented']})")
    return 0
