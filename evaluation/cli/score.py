"""Score model distributions against human ones; print Table 1 and Table 2 and write CSVs.

Human distributions come from a stored source (`storage.human`): `designers` (the
project's colorings, kept current by the app) or a reference set. `--reference-csv` first
loads a CSV over UW-71 under the label `--reference`; the shipped `uw71-ratings` set
(Schloss et al.'s mean ratings in assets/reference/) is stored when missing.

The tables are the Leaderboards tab's (`evaluation.analysis.results.analyses`), from the
scores the app keeps (`evaluation.pipeline.scoring.stored_scores`: computed once, stored, in
the export's ``scores`` table): by default each model's recommended guidance scale
(`--cfg`), and every cell with a bootstrap interval over the concepts (`--resamples`,
`--seed`; `evaluation.analysis.bootstrap`), stated under the tables and in the CSVs. Writes scores_long.csv, table1.csv and
table2.csv (long form: value, mark, lo, hi and the resampling), ranking.csv (which
adjacent models are distinguishable) and exclusions.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.cli import add_storage_arguments, concept_run_config, open_db, seed, whole
from storage.files import check_out_folder
from storage.shown import shown, shown_path

HELP = "score distributions, print Table 1 / Table 2 with intervals, write CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `score`."""
    from evaluation.analysis.bootstrap import N_RESAMPLES, SEED
    from evaluation.analysis.reference import UW71_RATINGS_SOURCE
    from evaluation.analysis.results import RECOMMENDED
    from evaluation.analysis.tables import POOL_CFG

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
        default=RECOMMENDED,
        help=f"guidance scale of the tables: {RECOMMENDED!r} (each model's middle stored scale, as "
        f"the Leaderboards tab; default), {POOL_CFG!r} (each concept averaged over its scales) "
        "or one scale",
    )
    parser.add_argument(
        "--resamples",
        type=whole,
        default=N_RESAMPLES,
        help=f"bootstrap resamples of the concepts for the intervals (default: {N_RESAMPLES}; 0: none)",
    )
    parser.add_argument("--seed", type=seed, default=SEED, help=f"bootstrap seed (default: {SEED})")
    parser.add_argument(
        "--out", type=Path, default=None, help="CSV folder (default: data/scores/<run or all>)"
    )
    add_storage_arguments(parser)


def _human(db, args: argparse.Namespace) -> dict:
    from evaluation.analysis.reference import ensure_shipped_reference, load_reference_csv
    from evaluation.concepts import load_concepts
    from storage import human

    # The CSV is read (and checked) before anything is written; the shipped set is stored
    # before it, so that a CSV loaded under the shipped set's label is refused, not taken for it.
    known = {concept.key for concept in load_concepts()}
    loaded = None
    if args.reference_csv is not None:
        try:
            loaded = load_reference_csv(args.reference_csv, known)
        except OSError as error:  # it said "No such file or directory: PATH", naming no option
            reason = (error.strerror or str(error)).lower()
            raise ValueError(f"--reference-csv {shown_path(args.reference_csv)}: {reason}") from None
    ensure_shipped_reference(db)
    if loaded is not None:
        provenance = args.provenance or f"loaded from {args.reference_csv}"
        already = args.reference in human.reference_sources(db)
        n = human.store_reference(db, args.reference, loaded, provenance)
        if already:  # the same set again (another one under the label is refused)
            print(
                f"the reference set {args.reference!r} holds these {n} distributions already: nothing changed"
            )
        else:
            print(f"stored {n} reference distributions as {args.reference!r}")
        if others := [concept for concept in loaded if concept not in known]:
            listed = ", ".join(repr(c) for c in others[:10]) + (", ..." if len(others) > 10 else "")
            print(f"{len(others)} of them name no concept of the benchmark and are never compared: {listed}")
    if args.reference not in (known_sources := human.sources(db)):  # named as the option, not `source`
        raise ValueError(f"--reference must be one of {known_sources}, got {shown(args.reference)}")
    vectors = human.vectors(db, args.reference)
    print(human.describe(db, args.reference))
    return vectors


def _resampling(args: argparse.Namespace):
    """The intervals asked for (None for ``--resamples 0``); checked before any work."""
    from evaluation.analysis.bootstrap import Resampling

    if args.resamples == 0:
        return None
    try:
        return Resampling(n_resamples=args.resamples, seed=args.seed)
    except ValueError as exc:
        raise ValueError(f"--resamples/--seed: {exc} (--resamples 0 leaves the intervals out)") from None


def _check_cfg(choice: str) -> None:
    from evaluation.analysis.results import parse_cfg
    from evaluation.analysis.tables import POOL_CFG

    if choice.strip() != POOL_CFG:
        try:
            parse_cfg(choice)
        except ValueError:
            raise ValueError(
                f"--cfg must be 'recommended', {POOL_CFG!r} or a guidance scale, got {shown(choice)}"
            ) from None


def _scale_note(found, choice: str) -> str:
    """Which guidance scales Tables 1-2 use (`found`: `results.Analyses`), in words."""
    from evaluation.analysis.results import RECOMMENDED

    scales = ", ".join(f"{model} {cfg:g}" for model, cfg in sorted(found.cfg.items()))
    if found.pooled:
        return f"Tables 1-2 average each concept over its guidance scales (--cfg {choice})."
    if choice.strip() == RECOMMENDED:
        return f"Tables 1-2 at each model's recommended guidance scale (its middle stored one): {scales}."
    return f"Tables 1-2 at guidance scale {next(iter(found.cfg.values())):g} for every model."


EXCLUDED_TITLE = "Excluded images (no detection / empty mask) per model"


def _out(args: argparse.Namespace):
    """The folder the scores go to (made)."""
    out = args.out or args.data_dir / "scores" / (args.run or "all")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _replacing(out, source: str) -> str:
    """A note when `out` holds a ``table1.csv`` scored against another human source than
    `source`, whose tables this score replaces; "" otherwise. (Scoring a run against a
    second reference set replaced the first's tables without a word.)"""
    import csv

    try:
        with open(out / "table1.csv", newline="", encoding="utf-8") as f:
            before = sorted({row.get("source") or "" for row in csv.DictReader(f)} - {""})
    except (OSError, UnicodeDecodeError, csv.Error):
        return ""
    if not before or before == [source]:
        return ""
    return (
        f"note: {out} held the tables scored against {', '.join(map(repr, before))}; they are replaced "
        f"by those against {source!r} (give another --out to keep both)"
    )


def _exclusions(db, args: argparse.Namespace, out) -> str:
    """Print the exclusion counts of what is scored (the run and model asked for, one row
    per model) and write them to `out`; the file's name."""
    import pandas as pd

    from evaluation.pipeline import runs
    from storage.spreadsheet import write_csv

    counts = runs.exclusion_counts(db, run=args.run, model=args.model, concepts_only=True)
    exclusions = pd.DataFrame(counts)
    print(f"\n{EXCLUDED_TITLE}\n{exclusions.to_string(index=False)}")
    write_csv(exclusions, out / "exclusions.csv", index=False)
    return "exclusions.csv"


def main(args: argparse.Namespace) -> int:
    """Compute, print and write the scores."""

    from evaluation.analysis import results, uncertainty
    from evaluation.analysis.tables import TABLE1_TITLE, TABLE2_TITLE
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs, scoring
    from storage.spreadsheet import write_csv

    resampling = _resampling(args)
    _check_cfg(args.cfg)
    check_out_folder(args.out)
    db = open_db(args)
    if args.run is not None:
        concept_run_config(db, args.run)  # an explicit-color run has verdicts, not distributions
    human = _human(db, args)
    rows = runs.model_distributions(db, run=args.run, model=args.model)
    if not rows and args.model is not None:
        models = sorted({r["model"] for r in runs.model_distributions(db, run=args.run)})
        if args.model not in models:
            where = f"run {args.run!r}" if args.run else "any run"
            raise ValueError(
                f"--model {args.model!r} has no distribution in {where}; stored models: {models or 'none'}"
            )
    if not rows:
        raise ValueError(
            f"no model distributions stored for run={args.run!r}, model={args.model!r}; run `extract` first"
        )
    if excluded := runs.all_excluded(db, run=args.run, model=args.model):
        out = _out(args)
        print(f"wrote {out}/{_exclusions(db, args, out)}")
        raise ValueError(excluded)
    concepts = load_concepts()
    # Through the store, as the app scores: what is scored here is kept (an export's scores
    # table holds it), and a score already there is not computed again.
    frame = scoring.stored_scores(db, args.reference, concepts)
    if args.run is not None:
        frame = frame[frame["run"] == args.run]
    if args.model is not None:
        frame = frame[frame["model"] == args.model]
    found = results.analyses(
        rows, human, concepts, cfg=args.cfg, resampling=resampling, frame=results.latest_scores(frame)
    )
    out = _out(args)
    if note := _replacing(out, args.reference):
        print(note)
    print(
        f"{len(found.metrics)} distribution(s) scored against {args.reference!r} "
        f"({found.metrics['concept'].nunique()} concept(s) with a human distribution)\n"
        f"{_scale_note(found, args.cfg)}"
    )
    stated = found.resampling.describe() if found.resampling else "No intervals (--resamples 0)."
    boards = {
        "table1": (TABLE1_TITLE, found.table1),
        "table2": (TABLE2_TITLE, found.table2),
    }
    for name, (title, board) in boards.items():
        print(f"\n{title}\n{board.to_text()}")
        if uneven := board.uneven_note():
            print(uneven)
        frame = results.with_provenance(board.to_csv_frame(), found, args.reference)
        write_csv(results.with_resampling(frame, found.resampling), out / f"{name}.csv", index=False)
    written = ["scores_long.csv", "table1.csv", "table2.csv"]
    print(f"\n{stated}")
    if found.resampling:
        print(uncertainty.significance_note(found.ranking))
        write_csv(results.with_resampling(found.ranking, found.resampling), out / "ranking.csv", index=False)
        written.append("ranking.csv")
    written.append(_exclusions(db, args, out))
    write_csv(results.metrics_csv_frame(found.metrics, args.reference), out / "scores_long.csv", index=False)
    print(f"\nwrote {', '.join(f'{out}/{name}' for name in written)}")
    return 0
