"""Audit color judges on synthetic probe items: how far to trust a model that decides
whether "the sphere is red"?

Renders `--items` probe items (one or two shapes in prototype colors of the eleven basic
terms, `evaluation.judges.probes`), adds the items of `--items-from` (images with object
masks whose colors the pixels tell: designer colorings, verified generated images), builds each description's Rainbow foils (ten
replacements per color, a swap for two colors), asks every `--judge`, and writes
pairs.csv, summary.csv, failures-<judge>.csv and report.html (summary and heatmaps) to
`--out`. Judges:

  pixel               the project's pixel checker (the reference)
  random              accepts each description with probability 1/2 (chance)
  contrastive:MODEL   a CLIP-like model (AutoModel + AutoProcessor) by hub id or folder
  yesno:MODEL         an image-text-to-text model (AutoModelForImageTextToText) asked yes/no

Example: python -m evaluation judge-audit --judge pixel --judge contrastive:openai/clip-vit-base-patch32
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import add_device_arguments, decimal, default_data_dir, seed, whole

HELP = "audit color judges (CLIP-like, yes/no VLMs) with Rainbow foils on synthetic renders"
DTYPES = ("float32", "float16", "bfloat16")
MIN_SIZE, MAX_SIZE = 32, 1024
"""Render side per shape, in pixels: the probes' own floor, and a ceiling that keeps a
two-object render (2 x 1024 x 1024 x 3 float64, 50 MB) far from a machine's memory."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `judge-audit`."""
    parser.add_argument(
        "--judge",
        action="append",
        required=True,
        help="pixel, random, contrastive:MODEL or yesno:MODEL (repeat for several)",
    )
    parser.add_argument("--items", type=whole, default=200, help="probe items to render (default: 200)")
    parser.add_argument(
        "--items-from",
        type=Path,
        default=None,
        help="also probe the images and masks listed in this CSV (item_id, image, mask, noun[, source]): "
        "designer colorings, verified generated images",
    )
    parser.add_argument(
        "--size",
        type=whole,
        default=64,
        help=f"render side per shape in pixels, {MIN_SIZE}-{MAX_SIZE} (default: 64)",
    )
    parser.add_argument(
        "--two-objects",
        type=decimal,
        default=0.5,
        help="share of two-object items, with swap foils (default: 0.5)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seeds items and the random judge (default: 0)")
    parser.add_argument(
        "--out",
        type=Path,
        default=default_data_dir() / "judge-audit",
        help="output folder (default: judge-audit/ in $COLORCONCEPT_DATA_DIR, else data/judge-audit)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="model weights' dtype (default: float32)"
    )
    add_device_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Render the items, run every judge, print the summary and write the files."""
    import numpy as np
    import torch

    from evaluation.cli import progress_bar, resolve_device
    from evaluation.judges.judges import parse_judge
    from evaluation.judges.probes import items_from_manifest, synthetic_items
    from evaluation.judges.report import audit, describe
    from evaluation.models.availability import judge_model_refusal
    from storage.files import check_out_folder

    check_out_folder(args.out)
    twice = sorted({spec for spec in args.judge if args.judge.count(spec) > 1})
    if twice:
        raise ValueError(f"--judge {twice[0]!r} is given twice: each judge once (its rows would count twice)")
    for spec in args.judge:
        kind, model = parse_judge(spec)
        if model and (problem := judge_model_refusal(kind, model, what=f"--judge {kind}: the model")):
            raise ValueError(problem)
    if args.items < (0 if args.items_from else 1):
        raise ValueError(f"--items must be at least {0 if args.items_from else 1}, got {args.items}")
    if not MIN_SIZE <= args.size <= MAX_SIZE:
        raise ValueError(f"--size must be {MIN_SIZE} to {MAX_SIZE} pixels per shape, got {args.size}")
    if not 0 <= args.two_objects <= 1:
        raise ValueError(f"--two-objects must lie in [0, 1], got {args.two_objects}")
    device, dtype = resolve_device(args.device), getattr(torch, args.dtype)
    rng = np.random.default_rng(args.seed)
    items = (
        synthetic_items(args.items, rng=rng, size=args.size, two_objects=args.two_objects)
        if args.items
        else []
    )
    if args.items_from is not None:
        loaded, refused = items_from_manifest(args.items_from)
        print(f"{len(loaded)} item(s) from {args.items_from}, {len(refused)} refused")
        for item_id, reason in refused:
            print(f"  refused {item_id}: {reason}")
        items += loaded
    report = audit(args.judge, items, args.out, rng=rng, device=device, dtype=dtype, progress=progress_bar)
    print(describe(report.summary))
    print(f"wrote {', '.join(p.name for p in report.paths)} to {args.out}")
    return 0
