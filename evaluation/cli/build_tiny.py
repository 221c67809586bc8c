"""Build the tiny random-weight models (Stable Diffusion pipeline, GroundingDINO, SAM) locally.

No download: weights are random and the tokenizer vocabularies are written by the code.
For tests, benchmarks and offline demos (`--model tiny-random`, `segment --detector
data/models/tiny-grounding-dino --sam data/models/tiny-sam`); their images are noise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import default_data_dir, seed

HELP = "build the tiny random test models under the data folder's models/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `build-tiny`."""
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=default_data_dir() / "models",
        help="output folder (default: models/ in $COLORCONCEPT_DATA_DIR, else data/models)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="weight initialisation seed (default: 0)")


def main(args: argparse.Namespace) -> int:
    """Build all three tiny models."""
    from evaluation.models.tiny import build_all

    for name, path in build_all(args.models_dir, seed=args.seed).items():
        print(f"{name}: {path}")
    return 0
