"""Validate the metrics against pairwise human judgments (Table 3), from exported files.

``python -m evaluation judgments EXPORT`` reads a study export: a folder with
``votes.csv``, ``metrics.csv`` and ``design.json`` (``annotation.study.judging.export_study``),
or a votes CSV (``annotation.study.judging.export_votes``) with ``--metrics``. A metrics CSV
with ``run``/``style``/``cfg`` columns (the ``score`` command's ``scores_long.csv``) is
narrowed to the study's model sources from ``design.json``, or to ``--style``, ``--cfg``
and ``--run``. Writes ``table3.csv``, ``validation.csv``, ``pairs.csv``,
``bradley_terry.csv`` and ``participants.csv`` and prints Table 3.

The evaluation package never reads the annotation database, so this command works on
files only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evaluation.analysis.judgment_report import (
    CI,
    analyse,
    method_note,
    read_metrics,
    read_votes,
    with_resampling,
    write_tables,
)
from evaluation.cli import decimal, whole
from storage.files import check_out_folder

HELP = "Table 3: metric agreement with pairwise human judgments, from exported votes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``judgments``."""
    parser.add_argument("export", type=Path, help="study export folder, or a votes CSV")
    parser.add_argument(
        "--metrics",
        type=Path,
        default=None,
        help="metric values per (concept, model) (default: EXPORT/metrics.csv)",
    )
    parser.add_argument("--style", default=None, help="keep metric rows of this style")
    parser.add_argument("--cfg", type=decimal, default=None, help="keep metric rows of this scale")
    parser.add_argument("--run", default=None, help="keep metric rows of this run")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the CSV tables (default: EXPORT/analysis or <votes stem>_analysis)",
    )
    parser.add_argument("--n-boot", type=whole, default=1000, help="bootstrap resamples (default: 1000)")
    parser.add_argument("--ci", type=decimal, default=CI, help=f"confidence level (default: {CI})")
    parser.add_argument("--seed", type=whole, default=0, help="seed of the bootstrap (default: 0)")
    parser.add_argument(
        "--exclude-flagged", action="store_true", help="leave out participants who failed attention checks"
    )
    parser.add_argument(
        "--max-failures",
        type=whole,
        default=0,
        help="failed checks a participant may have before being flagged (default: 0)",
    )
    parser.add_argument(
        "--exclude-ties",
        action="store_true",
        help="tied pairs leave the agreement's denominator (default: they count as disagreements)",
    )


def main(args: argparse.Namespace) -> int:
    """Read the export, compute and write the tables, print Table 3."""
    if not 0 <= args.seed <= 2**63 - 1:  # NumPy's own refusal names no option
        raise ValueError(f"--seed must be a whole number from 0 to 2**63 - 1, got {args.seed}")
    export = args.export
    if not export.exists():
        raise ValueError(
            f"`export` must be a study export folder or a votes CSV, and {export} does not exist"
        )
    check_out_folder(args.out)
    folder = export if export.is_dir() else None
    design_path = folder / "design.json" if folder else None
    design = (
        json.loads(design_path.read_text(encoding="utf-8")) if design_path and design_path.exists() else {}
    )
    votes = read_votes(folder / "votes.csv" if folder else export)
    metrics_path = args.metrics or (folder / "metrics.csv" if folder else None)
    metrics = (
        None
        if metrics_path is None
        else read_metrics(
            metrics_path,
            sources=design.get("sources"),
            style=args.style or design.get("style"),
            cfg=args.cfg,
            run=args.run,
        )
    )
    tables = analyse(
        votes,
        metrics,
        rng=np.random.default_rng(args.seed),
        n_boot=args.n_boot,
        ci=args.ci,
        exclude_flagged=args.exclude_flagged,
        exclude_ties=args.exclude_ties,
        max_failures=args.max_failures,
    )
    out = args.out or (folder / "analysis" if folder else export.with_name(export.stem + "_analysis"))
    paths = write_tables(with_resampling(tables, n_boot=args.n_boot, ci=args.ci, seed=args.seed), out)
    if "table3" in tables:
        print(tables["table3"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    settings = {"exclude_flagged": args.exclude_flagged, "exclude_ties": args.exclude_ties}
    print(method_note(tables, n_boot=args.n_boot, ci=args.ci, seed=args.seed, **settings))
    print(f"wrote {', '.join(p.name for p in paths.values())} to {out}")
    return 0
