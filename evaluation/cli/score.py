"""Score model distributions against human ones; print Table 1 and Table 2 and write CSVs.

Human distributions come from a stored source (`storage.human`): `designers` (the
project's colorings, kept current by the app) or a reference set. `--reference-csv` first
loads a CSV over UW-71 under the label `--reference`; the shipped `uw71-ratings` set
(Schloss et al.'s mean ratings in assets/reference/) is stored when missing. Writes scores_long.csv, table1.csv, table2.csv and exclusions.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import add_storage_arguments, open_db

HELP = "score distributions, print Table 1 / Table 2, write CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `score`."""
    from evaluation.analysis.reference import UW71_RATINGS_SOURCE

    parser.add_argument("--run", default=None, help="score this run only (default: every stored run)")
    parser.add_argument("--model", default=None, help="score this model only")
    parser.add_argument(
        "--reference",
        default=UW71_RATINGS_SOURCE,
        help=f"human source: 'designers' or a reference label (default: {UW71_RATINGS_SOURCE})",
    )
    parser.add_argument(
        "--reference-csv", type=Path, default=None, help="load this CSV over UW-71 as --reference first"
    )
    parser.add_argument("--provenance", default=None, help="provenance text stored with --reference-csv")
    parser.add_argument(
        "--cfg",
        type=float,
        default=None,
        help="tables for one guidance scale (default: each concept's mean over scales)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="CSV folder (default: data/scores/<run or all>)"
    )
    add_storage_arguments(parser)


def _human(db, args: argparse.Namespace) -> dict:
    from evaluation.analysis.reference import ensure_shipped_reference, load_reference_csv
    from storage import human

    if args.reference_csv is not None:
        provenance = args.provenance or f"loaded from {args.reference_csv}"
        n = human.store_reference(db, args.reference, load_reference_csv(args.reference_csv), provenance)
        print(f"stored {n} reference distributions as {args.reference!r}")
    ensure_shipped_reference(db)
    return human.vectors(db, args.reference)


def main(args: argparse.Namespace) -> int:
    """Compute, print and write the scores."""
    import pandas as pd

    from evaluation.analysis import scoring, tables
    from evaluation.color.naming import DOMINANT_COLUMNS, with_bin_names
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs

    db = open_db(args)
    human = _human(db, args)
    rows = runs.model_distributions(db, run=args.run, model=args.model)
    if not rows:
        raise ValueError(
            f"no model distributions stored for run={args.run!r}, model={args.model!r}; run `extract` first"
        )
    long = scoring.score(rows, human, load_concepts())
    exclusions = pd.DataFrame(runs.exclusion_counts(db, run=args.run))
    out = args.out or args.data_dir / "scores" / (args.run or "all")
    out.mkdir(parents=True, exist_ok=True)
    cfg = tables.POOL_CFG if args.cfg is None else args.cfg
    boards = {
        "table1": ("Table 1: probabilistic distribution alignment", tables.table1(long, cfg=cfg)),
        "table2": ("Table 2: deterministic feature alignment", tables.table2(long, cfg=cfg)),
    }
    print(
        f"{len(long)} distribution(s) scored against {args.reference!r} "
        f"({len({r['concept'] for r in rows} & set(human))} concept(s) with a human distribution)"
    )
    for name, (title, board) in boards.items():
        print(f"\n{title}\n{board.to_text()}")
        board.values.to_csv(out / f"{name}.csv")
    print(f"\nExcluded images (no detection / empty mask) per model\n{exclusions.to_string(index=False)}")
    with_bin_names(long, DOMINANT_COLUMNS).to_csv(out / "scores_long.csv", index=False)
    exclusions.to_csv(out / "exclusions.csv", index=False)
    print(f"\nwrote {out}/scores_long.csv, table1.csv, table2.csv, exclusions.csv")
    return 0
