"""Score model distributions against human ones; print Table 1 and Table 2 and write CSVs.

Human distributions come from a labelled source in the database. `--reference-csv` first
loads a CSV over UW-71 under the label `--reference`; the default source `uw71-ratings`
(Schloss et al.'s mean ratings shipped in assets/reference/) is loaded automatically when
it is not stored yet. Writes scores_long.csv, table1.csv, table2.csv and exclusions.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import add_storage_arguments, open_db

HELP = "score distributions, print Table 1 / Table 2, write CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `score`."""
    from evaluation.reference import UW71_RATINGS_SOURCE

    parser.add_argument("--run", default=None, help="score this run only (default: every stored run)")
    parser.add_argument("--model", default=None, help="score this model only")
    parser.add_argument("--reference", default=UW71_RATINGS_SOURCE, help=f"human source label (default: {UW71_RATINGS_SOURCE})")
    parser.add_argument("--reference-csv", type=Path, default=None, help="load this CSV over UW-71 as --reference first")
    parser.add_argument("--provenance", default=None, help="provenance text stored with --reference-csv")
    parser.add_argument("--cfg", type=float, default=None, help="tables for one guidance scale (default: mean over scales)")
    parser.add_argument("--out", type=Path, default=None, help="CSV folder (default: data/scores/<run or all>)")
    add_storage_arguments(parser)


def _human(db, args: argparse.Namespace) -> dict:
    from evaluation import runs
    from evaluation.reference import UW71_RATINGS_PROVENANCE, UW71_RATINGS_SOURCE, load_reference_csv

    if args.reference_csv is not None:
        provenance = args.provenance or f"loaded from {args.reference_csv}"
        n = runs.store_reference_distributions(db, args.reference, load_reference_csv(args.reference_csv), provenance)
        print(f"stored {n} reference distributions as {args.reference!r}")
    elif args.reference == UW71_RATINGS_SOURCE and UW71_RATINGS_SOURCE not in runs.reference_sources(db):
        runs.store_reference_distributions(db, UW71_RATINGS_SOURCE, load_reference_csv(), UW71_RATINGS_PROVENANCE)
    return runs.reference_distributions(db, args.reference)


def main(args: argparse.Namespace) -> int:
    """Compute, print and write the scores."""
    import pandas as pd

    from evaluation import runs, scoring
    from evaluation.concepts import load_concepts

    db = open_db(args)
    human = _human(db, args)
    rows = runs.model_distributions(db, run=args.run, model=args.model)
    if not rows:
        raise ValueError(f"no model distributions stored for run={args.run!r}, model={args.model!r}; run `extract` first")
    long = scoring.score(rows, human, load_concepts())
    exclusions = pd.DataFrame(runs.exclusion_counts(db, run=args.run))
    out = args.out or args.data_dir / "scores" / (args.run or "all")
    out.mkdir(parents=True, exist_ok=True)
    tables = {
        "table1": ("Table 1: probabilistic distribution alignment", scoring.table1(long, cfg=args.cfg)),
        "table2": ("Table 2: deterministic feature alignment", scoring.table2(long, cfg=args.cfg)),
    }
    print(f"{len(long)} distribution(s) scored against {args.reference!r} "
          f"({len({r['concept'] for r in rows} & set(human))} concept(s) with a human distribution)")
    for name, (title, table) in tables.items():
        print(f"\n{title}\n{scoring.format_table(table)}")
        table.to_csv(out / f"{name}.csv")
    print(f"\nExcluded images (no detection / empty mask) per model\n{exclusions.to_string(index=False)}")
    long.to_csv(out / "scores_long.csv", index=False)
    exclusions.to_csv(out / "exclusions.csv", index=False)
    print(f"\nwrote {out}/scores_long.csv, table1.csv, table2.csv, exclusions.csv")
    return 0
