"""Intervals for every table of the leaderboard: Tables 1-2, the CFG sweep, Tables 6-8.

Each function takes the frame its table is built from (`evaluation.analysis.tables`)
and one `evaluation.analysis.bootstrap.Draws`, so every table of one view shares the
same replicates: the concepts drawn in replicate b are the same for every model, style
and scale. `analyse` runs them all and returns an `Uncertainty`; the significance of
each ranking (which adjacent models' difference has an interval excluding 0) is
`ranking` and, in words, `significance_note`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from evaluation.analysis import bootstrap, tables
from evaluation.pipeline.scoring import concept_metrics
from storage.shown import counted

RANKING_COLUMNS = (
    "table",
    "modifier_type",
    "style",
    "metric",
    "better",
    "worse",
    "difference",
    "difference_lo",
    "difference_hi",
    "distinguishable",
    "n_concepts",
)


@dataclass(frozen=True)
class Uncertainty:
    """The intervals of one leaderboard view.

    Attributes
    ----------
    resampling : bootstrap.Resampling
        Resample count, seed, level and scheme as applied (say them with ``.describe()``):
        ``colorings`` is 0 when there were no colorings to resample.
    table1, table2 : tables.Leaderboard
        With ``lo`` and ``hi``.
    ranking : pandas.DataFrame
        `RANKING_COLUMNS`: per Table 1-2 column each adjacent pair of models in rank order;
        ``n_concepts`` is the smaller of the two cells' concept counts, and a pair is
        distinguishable only from `bootstrap.MIN_RANK_CONCEPTS` concepts on.
    sweep : pandas.DataFrame
        `tables.cfg_sweep` with ``<metric>_lo`` and ``<metric>_hi``.
    sensitivity : pandas.DataFrame
        `tables.sensitivity` by model and modifier type with ``ratio_lo``, ``ratio_hi``.
    table6, table7, table8 : pandas.DataFrame
        Long form: the table's keys, ``ratio``, ``ratio_lo``, ``ratio_hi`` and
        ``human_shift`` (0 where the ratio is undefined, NaN).
    """

    resampling: bootstrap.Resampling
    table1: tables.Leaderboard
    table2: tables.Leaderboard
    ranking: pd.DataFrame
    sweep: pd.DataFrame
    sensitivity: pd.DataFrame
    table6: pd.DataFrame
    table7: pd.DataFrame
    table8: pd.DataFrame


#: The groups of Tables 1 and 2's cells: one per model in each (modifier type, style) column.
_BOARD_BY = ["modifier_type", "style", "model"]


def leaderboard(
    board: tables.Leaderboard, data: pd.DataFrame, boot: bootstrap.Draws, name: str
) -> tuple[tables.Leaderboard, pd.DataFrame]:
    """`board` with ``lo``/``hi`` filled, and the significance of each column's ranking.

    Parameters
    ----------
    board : tables.Leaderboard
        Table 1 or 2 as `tables.leaderboard` built it.
    data : pandas.DataFrame
        The rows it was built from: `tables.select_cfg` of `tables.with_dca` (metric
        columns may hold (R,) arrays, see `bootstrap.group_means`).
    boot : bootstrap.Draws
    name : str
        ``"table1"`` or ``"table2"``, for the ranking rows.
    """
    return _leaderboard(board, data, bootstrap.group_rows(data, _BOARD_BY, boot), name)


def _leaderboard(
    board: tables.Leaderboard, data: pd.DataFrame, grouped: bootstrap.Groups, name: str
) -> tuple[tables.Leaderboard, pd.DataFrame]:
    """`leaderboard` with `data` already grouped by `_BOARD_BY` (Tables 1 and 2 share it)."""
    values, ci = board.values, grouped.boot.resampling.ci
    lo, hi = np.full(values.shape, np.nan), np.full(values.shape, np.nan)
    types, styles = grouped.groups["modifier_type"].tolist(), grouped.groups["style"].tolist()
    models = np.array(grouped.groups["model"].tolist(), dtype=object)
    rows = values.index.get_indexer(models)
    cells: dict[tuple, list[int]] = {}  # (type, style) -> positions of its groups
    for i, cell in enumerate(zip(types, styles)):
        cells.setdefault(cell, []).append(i)
    ranking, parts, unranked = [], 0, 0
    for metric in dict.fromkeys(k for _, _, k in values.columns):
        _, reps = grouped.means(data[metric])
        columns = values.columns.get_indexer([(t, s, metric) for t, s in zip(types, styles)])
        if (rows < 0).any() or (columns < 0).any():
            raise ValueError(f"`data` has groups that `board` lacks ({name}, {metric})")
        # the table's own values (under the two-stage scheme `Groups.means` averages replicates)
        shown = values.to_numpy()[rows, columns]
        counts = board.counts.to_numpy()[rows, columns]
        bounds = np.array(bootstrap.percentile_interval(reps, ci))
        bounds[:, counts < bootstrap.MIN_INTERVAL_CONCEPTS] = np.nan
        lo[rows, columns], hi[rows, columns] = bounds
        for (t, s), idx in cells.items():
            pairs = bootstrap.adjacent_pairs(
                models[idx], shown[idx], reps[:, idx], tables.METRICS[metric][1], ci, counts[idx]
            )
            parts, unranked = parts + 1, unranked + (not pairs)
            ranking += [{**p, "table": name, "modifier_type": t, "style": s, "metric": metric} for p in pairs]
    frames = [pd.DataFrame(b, index=values.index, columns=values.columns) for b in (lo, hi)]
    return replace(board, lo=frames[0], hi=frames[1]), _ranking_frame(ranking, parts, unranked)


def _ranking_frame(rows: list[dict], parts: int, unranked: int) -> pd.DataFrame:
    """`RANKING_COLUMNS` of `rows`, typed as the per-column frames of
    `bootstrap.ranking_significance` concatenate: a column with fewer than two ranked
    models gives an empty frame, whose untyped columns make the pairs' columns objects."""
    if not parts:
        return pd.DataFrame().reindex(columns=list(RANKING_COLUMNS))
    frame = pd.DataFrame(rows, columns=list(RANKING_COLUMNS))
    if unranked:
        frame = frame.astype(dict.fromkeys((*bootstrap.PAIR_COLUMNS, "n_concepts"), object))
    if not rows:
        frame = frame.astype(dict.fromkeys(("table", "modifier_type", "style", "metric"), "str"))
    return frame


def sweep(frame: pd.DataFrame, boot: bootstrap.Draws, metric_names=("emd", "pcc")) -> pd.DataFrame:
    """`tables.cfg_sweep` with ``<metric>_lo``/``_hi`` per (model, style, cfg)."""
    return _sweep(tables.with_dca(frame), boot, metric_names)


def _sweep(data: pd.DataFrame, boot: bootstrap.Draws, metric_names) -> pd.DataFrame:
    """`sweep` of a frame already checked by `tables.with_dca`."""
    out, _ = bootstrap.mean_intervals(data, ["model", "style", "cfg"], metric_names, boot)
    counts = data.groupby(["model", "style", "cfg"])["concept"].nunique().rename("n_concepts")
    return out.merge(counts.reset_index(), on=["model", "style", "cfg"]).sort_values(
        ["model", "style", "cfg"], ignore_index=True
    )


def sensitivity(
    shifts: pd.DataFrame, by: Sequence[str], boot: bootstrap.Draws, *, aggregate: str = tables.RATIO_OF_MEANS
) -> tuple[pd.DataFrame, np.ndarray]:
    """`tables.sensitivity` per `by` with ``ratio_lo``/``ratio_hi``, and the ratio replicates.

    The concepts drawn are the variants (the rows of `shifts`); a replicate's ratio of
    means is its weighted mean model shift over its weighted mean human shift, its mean of
    ratios the weighted mean of the per-variant ratios (human shift > 0). A replicate whose
    drawn variants people did not move at all has no ratio (NaN, `tables.shift_ratio`) and
    is left out of the interval; a group whose human shift is 0 has neither ratio nor
    interval.
    """
    point = tables.sensitivity(shifts, by, aggregate=aggregate)
    if shifts.empty:
        return point.assign(ratio_lo=np.nan, ratio_hi=np.nan), np.empty((len(boot.weights), 0))
    data = shifts.assign(ratio=tables.shift_ratio(shifts["model_shift"], shifts["human_shift"]))
    grouped = bootstrap.group_rows(data, by, boot)
    if aggregate == tables.RATIO_OF_MEANS:
        _, model = grouped.means(data["model_shift"])
        _, human = grouped.means(data["human_shift"])
        reps = tables.shift_ratio(model, human)
    else:
        _, reps = grouped.means(data["ratio"])
    lo, hi = bootstrap.percentile_interval(reps, boot.resampling.ci)
    few = point["n_concepts"].to_numpy() < bootstrap.MIN_INTERVAL_CONCEPTS
    lo[few], hi[few] = np.nan, np.nan  # one variant's resamples are its own ratio
    return point.assign(ratio_lo=lo, ratio_hi=hi), reps


def table8(
    shifts: pd.DataFrame, boot: bootstrap.Draws, *, aggregate: str = tables.RATIO_OF_MEANS
) -> pd.DataFrame:
    """Table 8 in long form (``modifier_type, style`` and style ``average``) with intervals:
    each replicate averages the per-model ratios of the same concept draw. A cell whose
    models' ratios rest on one variant each has no interval. ``human_shift`` is the mean of
    the cell's per-model mean human shifts: 0 exactly where people did not move any of its
    variants, and the ratio (NaN) is undefined (`tables.NO_HUMAN_SHIFT`); undefined per-model
    ratios are skipped, as `tables.table8` skips them."""
    per_model, reps = sensitivity(shifts, ("model", "modifier_type", "style"), boot, aggregate=aggregate)
    cells = per_model.groupby(["modifier_type", "style"], sort=True).indices
    counts = per_model["n_concepts"].to_numpy()
    ratios, human = per_model["ratio"], per_model["human_shift"]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a cell no replicate draws: NaN
        by_cell = {key: np.nanmean(reps[:, idx], axis=1) for key, idx in cells.items()}
        for (t, s), idx in cells.items():
            rows.append(
                (t, s, ratios.iloc[idx].mean(), by_cell[(t, s)], counts[idx].max(), human.iloc[idx].mean())
            )
        for t in sorted({t for t, _ in cells}):
            keys = [key for key in cells if key[0] == t]
            point = pd.Series([ratios.iloc[cells[k]].mean() for k in keys]).mean()
            most = max(counts[cells[k]].max() for k in keys)
            shift = np.mean([human.iloc[cells[k]].mean() for k in keys])
            replicates = np.nanmean(np.stack([by_cell[k] for k in keys]), axis=0)
            rows.append((t, "average", point, replicates, most, shift))
    out = []
    for t, s, point, replicates, n, shift in rows:
        lo, hi = bootstrap.percentile_interval(replicates, boot.resampling.ci)
        if n < bootstrap.MIN_INTERVAL_CONCEPTS:
            lo, hi = np.nan, np.nan
        out.append(
            {
                "modifier_type": t,
                "style": s,
                "ratio": point,
                "ratio_lo": lo,
                "ratio_hi": hi,
                "human_shift": shift,
            }
        )
    return pd.DataFrame(
        out, columns=["modifier_type", "style", "ratio", "ratio_lo", "ratio_hi", "human_shift"]
    )


def replicate_metrics(
    data: pd.DataFrame, model_p: Mapping[tuple, np.ndarray], human: Mapping[str, np.ndarray]
) -> pd.DataFrame:
    """Metric columns of `data` as (R,) arrays: each row scored against every P_H replicate.

    Parameters
    ----------
    data : pandas.DataFrame
        Metrics rows at one scale per model (not pooled).
    model_p : Mapping of (model, concept, style) to ndarray, shape (71,)
        The model distribution behind each row.
    human : Mapping of str to ndarray, shape (R, 71)
        P_H replicates (`bootstrap.human_replicates`); rows of other concepts keep their
        value, repeated R times.
    """
    out = data.copy()
    r = len(next(iter(human.values()))) if human else 1
    names = ["pcc", "emd", "ed", "dca", "hue_diff"]
    columns = {m: [np.full(r, v) for v in out[m].to_numpy(float)] for m in names}
    for i, row in enumerate(out[["model", "concept", "style"]].itertuples(index=False)):
        if row.concept not in human or tuple(row) not in model_p:
            continue
        reps = human[row.concept]
        scored = concept_metrics(reps, np.broadcast_to(model_p[tuple(row)], reps.shape))
        scored["dca"] = (scored["dominant_model"] == scored["dominant_human"]).astype(float)
        for m in names:
            columns[m][i] = scored[m]
    for m in names:
        out[m] = pd.Series(columns[m], index=out.index, dtype=object)
    return out


def analyse(
    frame: pd.DataFrame,
    table1: tables.Leaderboard,
    table2: tables.Leaderboard,
    table_cfg,
    shifts: pd.DataFrame,
    resampling: bootstrap.Resampling,
    *,
    aggregate: str = tables.RATIO_OF_MEANS,
    model_p: Mapping[tuple, np.ndarray] | None = None,
    human: Mapping[str, np.ndarray] | None = None,
) -> Uncertainty:
    """Intervals for every table of `evaluation.analysis.results.analyses`.

    Parameters
    ----------
    frame : pandas.DataFrame
        The metrics frame (all scales).
    table1, table2 : tables.Leaderboard
    table_cfg
        The `cfg` argument Tables 1 and 2 were built with (`tables.select_cfg`).
    shifts : pandas.DataFrame
        `tables.concept_shifts`.
    resampling : bootstrap.Resampling
    aggregate : str
        The sensitivity ratio (`tables.sensitivity`).
    model_p, human : Mapping, optional
        For the colorings scheme (``resampling.colorings > 0``): the model distributions
        of the rows of Tables 1-2 and the P_H replicates (`replicate_metrics`); Tables
        1-2 are then resampled in two stages, the other tables over concepts only.
    """
    boot = bootstrap.draws(
        pd.concat([frame[["concept", "modifier_type"]], shifts[["concept", "modifier_type"]]]), resampling
    )
    checked = tables.with_dca(frame)
    data = tables.select_cfg(checked, table_cfg)
    if resampling.colorings and human and model_p is not None and not isinstance(table_cfg, str):
        data = replicate_metrics(data, model_p, human)
    else:  # no colorings to resample (a reference set, or scales pooled): concepts only
        resampling = replace(resampling, colorings=0)
        boot = replace(boot, picks=None, resampling=resampling)
    grouped = bootstrap.group_rows(data, _BOARD_BY, boot)
    board1, rank1 = _leaderboard(table1, data, grouped, "table1")
    board2, rank2 = _leaderboard(table2, data, grouped, "table2")
    plain = replace(boot, picks=None)
    sens, _ = sensitivity(shifts, ("model", "modifier_type"), plain, aggregate=aggregate)
    return Uncertainty(
        resampling=resampling,
        table1=board1,
        table2=board2,
        ranking=pd.concat([rank1, rank2], ignore_index=True),
        sweep=_sweep(checked, plain, ("emd", "pcc")),
        sensitivity=sens,
        table6=sensitivity(shifts, ("model", "style"), plain, aggregate=aggregate)[0],
        table7=sens.copy(),  # Table 7 is the sensitivity by model and modifier type
        table8=table8(shifts, plain, aggregate=aggregate),
    )


def significance_note(ranking: pd.DataFrame) -> str:
    """The rankings in words: ``A > B`` where the difference's interval excludes 0,
    ``A ≈ B`` where it does not, one line per table column (Markdown)."""
    if ranking.empty:
        return "No ranking: fewer than two models in every column."
    lines = []
    for (t, s, metric), part in ranking.groupby(["modifier_type", "style", "metric"], sort=False):
        chain = part["better"].iloc[0]
        for row in part.itertuples(index=False):
            chain += f" {'>' if row.distinguishable else '≈'} {row.worse}"
        label = f"{tables.MODIFIER_LABELS[t]} {tables.STYLE_LABELS[s]} {tables.METRICS[metric][0]}"
        few = part["n_concepts"].min() if "n_concepts" in part else np.nan
        if few < bootstrap.MIN_RANK_CONCEPTS:
            chain += f" (n = {counted(int(few), 'concept')}: too few to tell models apart)"
        lines.append(f"- {label}: {chain}")
    distinguishable = int(ranking["distinguishable"].sum())
    head = (
        f"Adjacent models: {distinguishable} of {len(ranking)} pairs distinguishable "
        "('>': the difference's interval excludes 0, both cells averaging at least "
        f"{bootstrap.MIN_RANK_CONCEPTS} concepts; '≈': it does not)."
    )
    return "\n".join([head, *lines])


def interval_table(long: pd.DataFrame, index: str, columns: str, *, digits: int = 3) -> pd.DataFrame:
    """A pivot of ``ratio`` with each cell written ``value [lo, hi]`` (for display),
    ``value (one variant: no interval)`` where the bounds are missing, and
    `tables.NO_HUMAN_SHIFT` where the ratio is undefined because ``human_shift`` (when `long`
    has it) is 0."""
    human = long["human_shift"] if "human_shift" in long else pd.Series(np.nan, index=long.index)
    text = [
        tables.NO_HUMAN_SHIFT
        if pd.isna(v) and h == 0
        else "n/a"
        if pd.isna(v)
        else f"{v:.{digits}f} (one variant: no interval)"
        if pd.isna(lo)
        else f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
        for v, lo, hi, h in zip(long["ratio"], long["ratio_lo"], long["ratio_hi"], human)
    ]
    table = long.assign(shown=text).pivot(index=index, columns=columns, values="shown")
    return table[list(dict.fromkeys(long[columns]))]
