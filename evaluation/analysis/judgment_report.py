"""Validate the metrics against pairwise human judgments (Table 3), from exported files:
read a study export's votes and metrics (`read_votes`, `read_metrics`), compute the tables
(`analyse`) and write them (`write_tables`). ``python -m evaluation judgments`` is its
command (`evaluation.cli.judgments`); the app's Study tab calls it through
``annotation.study.judging``.

The evaluation package never reads the annotation database, so this works on files only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evaluation.analysis import judgments
from evaluation.analysis.tables import METRICS
from storage.shown import shown
from storage.spreadsheet import write_csv

TABLES = ("table3", "validation", "pairs", "bradley_terry", "participants")
#: The level of the intervals unless ``--ci`` says otherwise (the app's, always).
CI = 0.95
_BOOLEAN_COLUMNS = ("design_background", "attention_check", "attention_passed")
_TRUTH = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}


def read_votes(path: str | Path) -> pd.DataFrame:
    """A votes CSV as `evaluation.analysis.judgments` wants it (boolean columns as bool/None).

    Raises
    ------
    ValueError
        If columns are missing or a boolean cell is neither true nor false.
    """
    votes = pd.read_csv(path)
    judgments.require_columns(votes, judgments.VOTE_COLUMNS, f"votes file {path}")
    for column in _BOOLEAN_COLUMNS:
        votes[column] = [_boolean(value, column, path) for value in votes[column]]
    return votes


def _boolean(value, column: str, path) -> bool | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    text = str(value).strip().lower()
    if text not in _TRUTH:
        raise ValueError(f"votes file {path}: column {column!r} must hold True/False, got {shown(value)}")
    return _TRUTH[text]


def read_metrics(
    path: str | Path,
    *,
    sources: list[dict] | None = None,
    style: str | None = None,
    cfg: float | None = None,
    run: str | None = None,
) -> pd.DataFrame:
    """Per-(concept, model) metric values from a CSV, narrowed to one study's outputs.

    Parameters
    ----------
    path : str or Path
        Columns ``concept, model`` and metric columns (as `evaluation.analysis.tables.METRICS`).
    sources : list of dict, optional
        The design's ``sources`` (``model, run, cfg``): keeps each model's rows of its
        run and scale, where the file has those columns.
    style, cfg, run : optional
        Keep rows with these values, where the file has the column.

    Raises
    ------
    ValueError
        When no row is left (the analysis would have nothing to validate).
    """
    metrics = pd.read_csv(path)
    judgments.require_columns(metrics, ("concept", "model"), f"metrics file {path}")
    for column, value in (("style", style), ("cfg", cfg), ("run", run)):
        if value is not None and column in metrics:
            metrics = metrics[
                np.isclose(metrics[column], value) if column == "cfg" else metrics[column] == value
            ]
    if sources and {"run", "cfg"} <= set(metrics.columns):
        keep = np.zeros(len(metrics), bool)
        for source in sources:
            keep |= (
                (metrics["model"] == source["model"])
                & (metrics["run"] == source["run"])
                & np.isclose(metrics["cfg"], source["cfg"])
            ).to_numpy()
        metrics = metrics[keep]
    if metrics.empty:
        narrowed = ", ".join(
            f"{k} {v!r}" for k, v in (("style", style), ("cfg", cfg), ("run", run)) if v is not None
        )
        raise ValueError(
            f"metrics file {path}: no row is left for the study's model outputs"
            + (f" with {narrowed}" if narrowed else "")
            + "; check --style, --cfg and --run against the file's rows"
        )
    return metrics.reset_index(drop=True)


def analyse(
    votes: pd.DataFrame,
    metrics: pd.DataFrame | None,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    ci: float = CI,
    exclude_flagged: bool = False,
    exclude_ties: bool = False,
    max_failures: int = 0,
) -> dict[str, pd.DataFrame]:
    """Every table of the study's analysis.

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes as `evaluation.analysis.judgments` reads them.
    metrics : pandas.DataFrame or None
        Metric values per (concept, model); None leaves out the metric tables.
    rng : numpy.random.Generator
        Source of the bootstrap resamples.
    n_boot, ci, exclude_ties
        See `evaluation.analysis.judgments.metric_validation`.
    exclude_flagged, max_failures
        See `evaluation.analysis.judgments.study_votes`.

    Returns
    -------
    dict of str to pandas.DataFrame
        ``table3`` (Table 3 layout, flat columns), ``validation`` (one row per metric),
        ``pairs`` (vote shares per pair), ``bradley_terry`` (per group and model) and
        ``participants`` (attention-check flags); without `metrics` only the last three.

    Notes
    -----
    A pair enters the metric tables only where the metrics file has a row for both
    models; a pair enters one metric's correlations and agreement only where that
    metric is defined for both models (ΔHue is NaN when a dominant bin is achromatic),
    and is counted in that metric's ``n_undefined`` otherwise, exactly as a direct call
    of `evaluation.analysis.judgments.metric_validation` does.
    """
    options = {"exclude_flagged": exclude_flagged, "max_failures": max_failures}
    tables = {}
    if metrics is not None:
        names = tuple(
            m for m in judgments.METRIC_TYPES if m in metrics or (m == "dca" and "dominant_model" in metrics)
        )
        validation = _validate(votes, metrics, names, rng, n_boot, ci, exclude_ties, options)
        tables["table3"] = judgments.table3(validation).reset_index()
        tables["validation"] = validation
    tables["pairs"] = judgments.pair_preferences(votes, **options)
    tables["bradley_terry"] = judgments.bradley_terry(votes, rng=rng, n_boot=n_boot, ci=ci, **options)
    tables["participants"] = judgments.participant_flags(votes, max_failures=max_failures).reset_index()
    return tables


def _validate(votes, metrics, names, rng, n_boot, ci, exclude_ties, options) -> pd.DataFrame:
    """`metric_validation` over the pairs whose two models have a row in `metrics`."""
    present = set(zip(metrics["concept"], metrics["model"]))
    check = votes["attention_check"].astype(bool).to_numpy()
    keep = check | np.array(
        [
            (c, a) in present and (c, b) in present
            for c, a, b in zip(votes["concept"], votes["model_a"], votes["model_b"])
        ],
        bool,
    )
    n_pairs = votes.loc[keep & ~check, "pair_id"].nunique()
    if n_pairs < 2:  # each row blank, saying why (Table 3 of the bare rows failed, KeyError)
        rows = [
            {"metric": n, "label": METRICS[n][0], "type": judgments.METRIC_TYPES[n], "n_pairs": n_pairs}
            for n in names
        ]
        return pd.DataFrame(rows).reindex(columns=list(judgments.VALIDATION_COLUMNS)).assign(n_undefined=0)
    return judgments.metric_validation(
        votes[keep],
        metrics,
        rng=rng,
        metric_names=names,
        n_boot=n_boot,
        ci=ci,
        exclude_ties=exclude_ties,
        **options,
    )


#: The tables with bootstrap intervals, which `with_resampling` gives the resampling's columns.
RESAMPLED = ("table3", "validation", "bradley_terry")


def with_resampling(tables: dict[str, pd.DataFrame], *, n_boot: int, ci: float, seed: int) -> dict:
    """`tables` (`analyse`) with the level, resample count and seed of their intervals as
    the columns ``ci``, ``n_resamples`` and ``seed`` (those in `RESAMPLED`), as Tables 1-2's
    CSVs carry them: a CSV alone says how its intervals were drawn."""
    return {
        name: table.assign(ci=ci, n_resamples=n_boot, seed=seed) if name in RESAMPLED else table
        for name, table in tables.items()
    }


def method_note(
    tables: dict[str, pd.DataFrame],
    *,
    n_boot: int,
    ci: float,
    seed: int,
    exclude_flagged: bool = False,
    exclude_ties: bool = False,
) -> str:
    """What the numbers of `tables` (`analyse`) are, in a few sentences: how the intervals
    were drawn, how Pearson, Spearman and Agreement are defined here (docs/research.md,
    "Table 3"), the Bradley-Terry scale, and whether flagged participants count."""
    flagged = int(tables["participants"]["flagged"].sum()) if "flagged" in tables["participants"] else 0
    ties = (
        "pairs the votes split evenly are left out"
        if exclude_ties
        else "a pair the votes split evenly, or the metric ties on, counts as a disagreement"
    )
    who = "left out" if exclude_flagged else "counted"
    parts = [
        f"Intervals: {ci:.0%} bootstrap percentile intervals from {n_boot} resamples of the pairs, seed {seed}.",
        "Pearson and Spearman are over the pairs entered in both orientations, (d, share) and "
        "(−d, 1 − share), d the metric's difference (negated where lower is better): not a plain "
        f"correlation over the pairs as shown. Agreement is the share of pairs where the metric "
        f"picks the model most votes went to; {ties}.",
        f"Bradley–Terry: natural-log strengths, mean 0 in each group (choix, α = {judgments.BT_ALPHA:g}).",
        f"Participants who failed an attention check: {flagged}, {who}.",
    ]
    return " ".join(parts)


def write_tables(tables: dict[str, pd.DataFrame], folder: str | Path) -> dict[str, Path]:
    """Write each table as ``<name>.csv`` into `folder`; returns the paths by name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, table in tables.items():
        paths[name] = folder / f"{name}.csv"
        write_csv(table, paths[name], index=False)
    return paths
