"""Recompute the leaderboard under each alternative of the paper's open choices.

For every choice of `evaluation.analysis.robustness.CHOICES` (pixel filter, bin colour,
image linkage, guidance scale, sensitivity ratio, ΔHue of grey bins) prints, per metric,
the largest change of any Table 1-2 cell or model mean and Kendall's τ between the model
rankings with the pairs that swap, and writes robustness.csv. The extraction choices are
re-extracted from the runs' per-image pixel summaries (`--sample N` restricts them, and
everything else, to N base concepts drawn with `--seed`); the designers' P_H stays as
stored here (the Leaderboards tab re-extracts it from the colorings too).

With ``--explicit-run RUN`` it answers the same question for an explicit-color (GenColorBench)
run instead: does the ranking of its models by accuracy survive the scoring rule set (the
default ``paper`` against ``paper-mean``, ``released``, ``released-closest``;
`evaluation.explicit.views.explicit_robustness`), and writes explicit-robustness.csv.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from evaluation.cli import add_storage_arguments, count, open_db, seed
from storage.files import check_out_folder

HELP = "the leaderboard under each alternative of the open choices (Kendall τ, swaps)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `robustness`."""
    from evaluation.analysis.reference import UW71_RATINGS_SOURCE

    parser.add_argument(
        "--reference",
        default=UW71_RATINGS_SOURCE,
        help=f"human source: 'designers' or a reference label (default: {UW71_RATINGS_SOURCE})",
    )
    parser.add_argument("--sample", type=count, default=None, help="use N base concepts (default: all)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of --sample (default: 0)")
    parser.add_argument(
        "--no-reextract", action="store_true", help="skip the choices that need re-extraction"
    )
    parser.add_argument(
        "--explicit-run",
        default=None,
        metavar="RUN",
        help="an explicit-color run: compare its models' rankings under each scoring rule set instead",
    )
    parser.add_argument("--out", type=Path, default=None, help="CSV folder (default: data/robustness)")
    add_storage_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Compute, print and write the report."""
    from evaluation.analysis import robustness
    from evaluation.analysis.reference import ensure_shipped_reference
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs
    from storage import human
    from storage.spreadsheet import write_csv

    check_out_folder(args.out)
    db = open_db(args)
    if args.explicit_run is not None:
        return _explicit(db, args)
    ensure_shipped_reference(db)
    human.check_source(db, args.reference)
    concepts = load_concepts()
    rows = runs.model_distributions(db)
    if not rows:
        raise ValueError("no model distributions stored; run `extract` first")
    truth = human.vectors(db, args.reference)
    keys = robustness.sample_families(concepts, {r["concept"] for r in rows}, args.sample, args.seed)
    rows = [r for r in rows if r["concept"] in keys]
    start = time.perf_counter()
    pixels = None if args.no_reextract else robustness.stored_pixels(db, args.data_dir, rows)
    if pixels is not None:
        print(f"read {sum(map(len, pixels.values()))} pixel summaries in {time.perf_counter() - start:.1f} s")
    report = robustness.robustness(
        rows,
        truth,
        concepts,
        model_pixels=pixels,
        keys=None if args.sample is None else keys,
        progress=lambda choice: print(f"  {choice} ...", flush=True),
    )
    print(robustness.describe(report))
    print(report.drop(columns=["recomputed"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    out = args.out or args.data_dir / "robustness"
    out.mkdir(parents=True, exist_ok=True)
    write_csv(report, out / "robustness.csv", index=False)
    print(f"wrote {out / 'robustness.csv'}")
    return 0


def _explicit(db, args: argparse.Namespace) -> int:
    """The rule-set choice of one explicit-color run: print and write explicit-robustness.csv."""
    from evaluation.explicit.views import rule_set_robustness
    from storage.spreadsheet import write_csv

    resume = f"(python -m evaluation explicit --run {shlex.quote(args.explicit_run)})"
    report, text = rule_set_robustness(db, args.explicit_run, resume=resume)
    print(text)
    print(report.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    out = args.out or args.data_dir / "robustness"
    out.mkdir(parents=True, exist_ok=True)
    # Which run, and what its largest change counts: the file alone said neither (outside probe 131).
    described = report.assign(largest_change_unit="percentage points", run=args.explicit_run)
    write_csv(described, out / "explicit-robustness.csv", index=False)
    print(f"wrote {out / 'explicit-robustness.csv'}")
    return 0
