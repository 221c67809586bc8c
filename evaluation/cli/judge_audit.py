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

from evaluation.cli import DEFAULT_DATA_DIR, add_device_arguments

HELP = "audit color judges (CLIP-like, yes/no VLMs) with Rainbow foils on synthetic renders"
KINDS = ("pixel", "random", "contrastive", "yesno")
DTYPES = ("float32", "float16", "bfloat16")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `judge-audit`."""
    parser.add_argument(
        "--judge",
        action="append",
        required=True,
        help="pixel, random, contrastive:MODEL or yesno:MODEL (repeat for several)",
    )
    parser.add_argument("--items", type=int, default=200, help="probe items to render (default: 200)")
    parser.add_argument(
        "--items-from",
        type=Path,
        default=None,
        help="also probe the images and masks listed in this CSV (item_id, image, mask, noun[, source]): "
        "designer colorings, verified generated images",
    )
    parser.add_argument("--size", type=int, default=64, help="render side per shape in pixels (default: 64)")
    parser.add_argument(
        "--two-objects",
        type=float,
        default=0.5,
        help="share of two-object items, with swap foils (default: 0.5)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds items and the random judge (default: 0)")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_DATA_DIR / "judge-audit",
        help="output folder (default: data/judge-audit)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="model weights' dtype (default: float32)"
    )
    add_device_arguments(parser)


def parse_judge(spec: str) -> tuple[str, str]:
    """``"contrastive:openai/clip"`` -> ``("contrastive", "openai/clip")``; ``"pixel"`` -> ``("pixel", "")``.

    Raises
    ------
    ValueError
        If the kind is unknown or a model judge names no model.
    """
    kind, _, model = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"--judge must start with one of {', '.join(KINDS)}; got {spec!r}")
    if (kind in ("contrastive", "yesno")) != bool(model):
        raise ValueError(
            f"--judge {spec!r}: contrastive and yesno take :MODEL, pixel and random take nothing"
        )
    return kind, model


def _judge(kind: str, model: str, args: argparse.Namespace, rng):
    import torch

    from evaluation.cli import resolve_device
    from evaluation.judges.judges import ContrastiveJudge, PixelJudge, RandomJudge, YesNoJudge

    if kind == "pixel":
        return PixelJudge()
    if kind == "random":
        return RandomJudge(rng)
    loader = ContrastiveJudge if kind == "contrastive" else YesNoJudge
    dtype = getattr(torch, args.dtype)
    return loader.from_pretrained(
        model, device=resolve_device(args.device), dtype=dtype, name=f"{kind}:{model}"
    )


def main(args: argparse.Namespace) -> int:
    """Render the items, run every judge, print the summary and write the files."""
    import numpy as np
    import pandas as pd

    from evaluation.cli import progress_bar
    from evaluation.judges.audit import run_audit, summary
    from evaluation.judges.probes import items_from_manifest, synthetic_items
    from evaluation.judges.report import describe, write_audit

    specs = [parse_judge(spec) for spec in args.judge]
    if args.items < (0 if args.items_from else 1):
        raise ValueError(f"--items must be at least {0 if args.items_from else 1}, got {args.items}")
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
    frames, chance = [], {}
    for kind, model in specs:
        judge = _judge(kind, model, args, rng)
        update, close = progress_bar(judge.name)
        try:
            frames.append(run_audit(judge, items, progress=update))
        finally:
            close()
        chance[judge.name] = judge.chance
    pairs = pd.concat(frames, ignore_index=True)
    print(describe(summary(pairs, chance)))
    paths = write_audit(pairs, args.out, chance=chance)
    print(f"wrote {', '.join(p.name for p in paths)} to {args.out}")
    return 0
