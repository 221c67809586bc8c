"""The paper's tables from per-concept metric values (Tables 1, 2, 6–8, Figures 4–5).

Input is the long-form metrics frame that `evaluation.pipeline.scoring` produces, one row per
(model, concept, style, cfg), with the columns of `METRICS_FRAME_COLUMNS`:

========================  ======================================================
``model``                 model name
``concept``               concept key, e.g. ``"rotten apple"``
``base``                  base concept, e.g. ``"apple"``
``modifier_type``         ``original``, ``visual_state`` or ``emotional``
``style``                 ``natural`` or ``clipart``
``cfg``                   guidance scale (float)
``pcc``, ``emd``, ``ed``  PCC, EMD (CIELAB ΔE units) and entropy difference (nats)
``dominant_model``        index of the model's dominant UW-71 bin (0–70)
``dominant_human``        index of the human dominant bin (0–70)
``hue_diff``              ΔHue of the dominant bins in degrees [0, 180]; NaN where a
                          dominant bin is achromatic (skipped in means)
========================  ======================================================

DCA per concept is ``dominant_model == dominant_human`` (0 or 1); its mean over
concepts is Eq. 4.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evaluation.color import metrics
from evaluation.concepts import MODIFIER_TYPES, load_concepts
from evaluation.models.generation import STYLES as GENERATION_STYLES
from storage.shown import shown

METRICS_FRAME_COLUMNS = (
    "model",
    "concept",
    "base",
    "modifier_type",
    "style",
    "cfg",
    "pcc",
    "emd",
    "ed",
    "dominant_model",
    "dominant_human",
    "hue_diff",
)
STYLES = tuple(GENERATION_STYLES)
# metric column -> (label, higher is better)
METRICS = {
    "pcc": ("PCC", True),
    "emd": ("EMD", False),
    "ed": ("ED", False),
    "dca": ("DCA", True),
    "hue_diff": ("ΔHue", False),
}
#: Each metric's unit, as the long-form CSVs' ``unit`` column says it (EMD's ground distance
#: is CIELAB Euclidean, entropy is natural-log, DCA is the share of concepts whose dominant
#: colors agree, ΔHue the CIELAB hue angle's difference).
METRIC_UNITS = {
    "pcc": "Pearson r (-1 to 1)",
    "emd": "ΔE*ab",
    "ed": "nats",
    "dca": "fraction of concepts (0 to 1)",
    "hue_diff": "degrees (0 to 180)",
}
#: The unit Figure 5's axis titles name beside a metric, a short form of `METRIC_UNITS` (PCC's
#: r and DCA's share have none to name; the Leaderboards legend says all five in words).
AXIS_UNITS = {"emd": "ΔE*ab", "ed": "nats", "hue_diff": "degrees"}
TABLE1_METRICS = ("pcc", "emd", "ed")
TABLE2_METRICS = ("dca", "hue_diff")
#: The two tables' titles, in the paper's words (Table 2's metrics are the dominant color's).
TABLE1_TITLE = "Table 1: probabilistic distribution alignment"
TABLE2_TITLE = "Table 2: deterministic feature alignment (dominant color)"
MODIFIER_LABELS = {"original": "Original", "visual_state": "Visual state", "emotional": "Emotional"}
STYLE_LABELS = {"natural": "Natural", "clipart": "Clipart"}
NOT_DEFINED = "n/a"  # shown for an undefined cell: ΔHue where every dominant color is grey
VISUALLY_HIDDEN = "visually-hidden"
"""The class of words in `Leaderboard.to_html` meant for screen readers alone (the app's CSS hides
them from sight; a page without that rule shows them)."""
POOL_CFG = "mean"
RATIO_OF_MEANS = "ratio_of_means"
MEAN_OF_RATIOS = "mean_of_ratios"
NO_HUMAN_SHIFT = "undefined: people's shift is 0"
"""Shown for a sensitivity ratio that is undefined because people's shift is 0: every designer
colored each variant as its base (`shift_ratio`)."""


def require_columns(frame: pd.DataFrame, columns, name: str) -> None:
    """Raise ValueError naming `name` and the missing columns, if any."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"`{name}` must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"`{name}` lacks columns {missing}; it has {list(frame.columns)}")


def dca_column(frame: pd.DataFrame) -> pd.Series:
    """Per-row DCA: 1.0 where ``dominant_model`` equals ``dominant_human``, else 0.0.

    The one place DCA is derived from dominant bins (Eq. 4 before the mean over concepts).
    """
    return (frame["dominant_model"] == frame["dominant_human"]).astype(float)


def with_dca(frame: pd.DataFrame) -> pd.DataFrame:
    """Check a metrics frame and add the per-concept ``dca`` column (0.0 or 1.0).

    Parameters
    ----------
    frame : pandas.DataFrame
        The long-form metrics frame (module docstring).

    Returns
    -------
    pandas.DataFrame
        A copy with ``dca`` added.

    Raises
    ------
    ValueError
        If columns are missing, a modifier type or style is unknown, or a
        (model, concept, style, cfg) appears twice.
    """
    require_columns(frame, METRICS_FRAME_COLUMNS, "frame")
    for column, allowed in (("modifier_type", MODIFIER_TYPES), ("style", STYLES)):
        unknown = sorted(set(frame[column].unique()) - set(allowed))
        if unknown:
            raise ValueError(f"`frame` column {column!r} has unknown values {unknown}; expected {allowed}")
    keys = ["model", "concept", "style", "cfg"]
    dup = frame.duplicated(keys)
    if dup.any():
        raise ValueError(f"`frame` has duplicate rows for {frame.loc[dup, keys].iloc[0].to_dict()}")
    out = frame.copy()
    out["dca"] = dca_column(out)
    return out


def select_cfg(frame: pd.DataFrame, cfg=None) -> pd.DataFrame:
    """Keep one guidance scale per model, or pool the scales.

    Parameters
    ----------
    frame : pandas.DataFrame
        Metrics frame (with ``dca`` when pooling, see `with_dca`).
    cfg : float, mapping of str to float, ``"mean"``, optional
        One scale for all models, or one per model. ``"mean"`` (`POOL_CFG`) averages
        each concept's metrics over its scales first, so every concept weighs the same
        whatever its number of scales (the paper pools its CFG sweep in Tables 1-2
        without saying how); the dominant-bin columns are dropped then, and ``cfg`` is
        NaN. None requires that the frame already holds a single scale per model and
        style.

    Returns
    -------
    pandas.DataFrame
        The selected (or pooled) rows.

    Raises
    ------
    ValueError
        If `cfg` is None and a model has several scales, or a model has no rows at
        the requested scale.
    """
    if isinstance(cfg, str):
        if cfg != POOL_CFG:
            raise ValueError(f"`cfg` must be a number, a mapping or {POOL_CFG!r}, got {shown(cfg)}")
        keys = ["model", "concept", "base", "modifier_type", "style"]
        pooled = frame.groupby(keys, as_index=False)[[m for m in METRICS if m in frame]].mean()
        return pooled.assign(cfg=np.nan)
    if cfg is None:
        n = frame.groupby(["model", "style"])["cfg"].nunique()
        if (n > 1).any():
            raise ValueError(
                f"`cfg` must be given: models {sorted(set(n[n > 1].index.get_level_values(0)))} "
                "have several guidance scales"
            )
        return frame
    wanted = frame["model"].map(cfg) if isinstance(cfg, Mapping) else pd.Series(cfg, index=frame.index)
    out = frame[np.isclose(frame["cfg"].astype(float), wanted.astype(float))]
    absent = sorted(set(frame["model"].unique()) - set(out["model"].unique()))
    if absent:
        raise ValueError(f"no rows at `cfg`={cfg!r} for models {absent}")
    return out


@dataclass(frozen=True)
class Leaderboard:
    """A model × (modifier type, style, metric) table with best and second best marked.

    Attributes
    ----------
    values : pandas.DataFrame
        Index ``model``; columns a MultiIndex (modifier_type, style, metric) holding the
        mean over concepts (NaN skipped).
    marks : pandas.DataFrame
        Same shape: ``"best"``, ``"second"`` or ``""``. Ties share a mark (dense ranks
        in the metric's better direction).
    lo, hi : pandas.DataFrame or None
        Same shape: bootstrap interval bounds of each cell
        (`evaluation.analysis.bootstrap`), or None when not computed.
    counts : pandas.DataFrame or None
        Same shape, int: the concepts each cell's mean is over (those where the metric is
        defined: PCC is undefined for a uniform distribution, ΔHue for a grey dominant
        color), or None when not known.
    """

    values: pd.DataFrame
    marks: pd.DataFrame
    lo: pd.DataFrame | None = None
    hi: pd.DataFrame | None = None
    counts: pd.DataFrame | None = None

    def to_csv_frame(self) -> pd.DataFrame:
        """Long form for CSV export: model, modifier_type, style, metric, unit (`METRIC_UNITS`),
        value, mark (and ``lo``, ``hi`` when the intervals are known, ``n_concepts`` when the
        counts are)."""
        named = {
            "value": self.values,
            "mark": self.marks,
            "lo": self.lo,
            "hi": self.hi,
            "n_concepts": self.counts,
        }
        parts = [
            frame.stack(list(range(3)), future_stack=True).rename(name)
            for name, frame in named.items()
            if frame is not None
        ]
        long = pd.concat(parts, axis=1).reset_index()
        long.insert(long.columns.get_loc("metric") + 1, "unit", long["metric"].map(METRIC_UNITS))
        return long

    def to_text(self, *, digits: int = 3, line_width: int = 160) -> str:
        """A plain-text rendering for the terminal in the paper's full layout.

        Every modifier type × style cell is shown, ``-`` where no concept falls in it;
        labels as in the paper; marks omitted. With intervals each cell reads
        ``value [lo, hi]``, with counts it ends in ``n=<concepts>``, and the columns wrap at
        `line_width` characters.
        """
        metric_names = list(dict.fromkeys(k for _, _, k in self.values.columns))
        full = pd.MultiIndex.from_tuples(
            [(t, s, k) for t in MODIFIER_TYPES for s in STYLES for k in metric_names]
        )
        labels = pd.MultiIndex.from_tuples(
            [(MODIFIER_LABELS[t], STYLE_LABELS[s], METRICS[k][0]) for t, s, k in full],
            names=["type", "style", "metric"],
        )
        labelled = self.values.reindex(columns=full).set_axis(labels, axis=1)
        if self.lo is None and self.counts is None:
            return labelled.to_string(float_format=lambda v: _fixed(v, digits), na_rep="-")
        nan = pd.DataFrame(np.nan, index=self.values.index, columns=self.values.columns)
        lo, hi, n = (
            (nan if frame is None else frame).reindex(columns=full).set_axis(labels, axis=1)
            for frame in (self.lo, self.hi, self.counts)
        )
        shown = labelled.copy().astype(object)
        for col in labels:
            shown[col] = [
                "-"
                if pd.isna(v)
                else _fixed(v, digits)
                + ("" if pd.isna(a) else f" [{_fixed(a, digits)}, {_fixed(b, digits)}]")
                + ("" if pd.isna(k) else f" n={int(k)}")
                for v, a, b, k in zip(labelled[col], lo[col], hi[col], n[col])
            ]
        return shown.to_string(line_width=line_width)

    def to_html(self, *, digits: int = 3, label: str = "") -> str:
        """An HTML table with the best value bold and the second underlined (escaped), each
        followed by its rank in words for screen readers ("(best)", "(second best)"), named
        `label` for them (``aria-label``) when given.

        An undefined value (ΔHue where every dominant color is grey) shows as `NOT_DEFINED`;
        with intervals each value is followed by ``[lo, hi]`` in small type, with counts by
        ``n = <concepts>``.
        """
        head = "".join(
            f"<th>{html.escape(f'{MODIFIER_LABELS[t]} {STYLE_LABELS[s]} {METRICS[k][0]}')}"
            f"{'↑' if METRICS[k][1] else '↓'}</th>"
            for t, s, k in self.values.columns
        )
        # Bold and underline are not read out: a screen reader hears the words, which the
        # app's page hides from sight (`VISUALLY_HIDDEN`); an exported page shows them.
        tags = {
            "best": ("<b>", f'<span class="{VISUALLY_HIDDEN}"> (best)</span></b>'),
            "second": ("<u>", f'<span class="{VISUALLY_HIDDEN}"> (second best)</span></u>'),
            "": ("", ""),
        }
        rows = []
        for model in self.values.index:
            cells = []
            for col in self.values.columns:
                start, end = tags[self.marks.at[model, col]]
                value = self.values.at[model, col]
                shown = NOT_DEFINED if pd.isna(value) else _fixed(value, digits)
                cells.append(f"<td>{start}{html.escape(shown)}{end}{self._interval(model, col, digits)}</td>")
            rows.append(f"<tr><td>{html.escape(str(model))}</td>{''.join(cells)}</tr>")
        named = f' aria-label="{html.escape(label)}"' if label else ""
        return f"<table{named}><tr><th>Model</th>{head}</tr>{''.join(rows)}</table>"

    def uneven_note(self) -> str:
        """A sentence naming each modifier type × style whose models average different
        numbers of concepts ("" when none, or the counts are not known).

        The marks rank the averages as they are: a model with 10 concepts against one with 4
        is ranked over different concept sets (outside probe 144 read it as a like-for-like
        ranking). A cell's count is its largest over the metrics (a metric undefined on a
        concept counts it less).
        """
        if self.counts is None:
            return ""
        cells = self.counts.T.groupby(level=[0, 1], sort=False).max().T
        uneven = []
        for t, s in cells.columns:
            n = cells[(t, s)]
            n = n[n > 0]
            if n.nunique() > 1:
                each = ", ".join(f"{model} {int(k)}" for model, k in n.items())
                uneven.append(f"{MODIFIER_LABELS[t]} {STYLE_LABELS[s]} ({each})")
        if not uneven:
            return ""
        return (
            "Models average different concept sets in "
            + "; ".join(uneven)
            + ": the marks rank those averages as they are, not the models on one set of concepts. "
            "Evaluate each model on the same concepts to compare like with like."
        )

    def _interval(self, model, col, digits: int) -> str:
        parts = []
        if self.lo is not None and not pd.isna(self.lo.at[model, col]):
            parts.append(
                f"[{_fixed(self.lo.at[model, col], digits)}, {_fixed(self.hi.at[model, col], digits)}]"
            )
        if self.counts is not None:
            parts.append(f"n = {int(self.counts.at[model, col])}")
        return f"<br><small>{' · '.join(parts)}</small>" if parts else ""


def _fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals, and no minus sign on a value that rounds to zero
    (a PCC of -0.0002 read "-0.000")."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _marks(values: pd.DataFrame) -> pd.DataFrame:
    # Dense ranks in each column's better direction: negating a column reverses its order
    # and keeps its ties.
    better_first = np.array([-1.0 if METRICS[k][1] else 1.0 for _, _, k in values.columns])
    rank = (values * better_first).rank(method="dense").to_numpy()
    marks = np.where(rank == 1, "best", np.where(rank == 2, "second", ""))
    return pd.DataFrame(marks, index=values.index, columns=values.columns)


def leaderboard(frame: pd.DataFrame, metric_names=TABLE1_METRICS, *, cfg=None) -> Leaderboard:
    """Mean metric per model by modifier type × style (Tables 1 and 2).

    Parameters
    ----------
    frame : pandas.DataFrame
        Metrics frame (module docstring).
    metric_names : sequence of str
        Keys of `METRICS`; `TABLE1_METRICS` or `TABLE2_METRICS` for the paper's tables.
    cfg : float or mapping of str to float, optional
        See `select_cfg`.

    Returns
    -------
    Leaderboard
        Columns ordered original, visual state, emotional × natural, clipart × metrics.
    """
    unknown = [m for m in metric_names if m not in METRICS]
    if unknown:
        raise ValueError(f"`metric_names` has unknown metrics {unknown}; expected some of {list(METRICS)}")
    return checked_leaderboard(select_cfg(with_dca(frame), cfg), metric_names)


def checked_leaderboard(data: pd.DataFrame, metric_names) -> Leaderboard:
    """`leaderboard` of rows already checked (`with_dca`) and selected (`select_cfg`), for a
    caller that builds several tables from the same rows (`results.analyses`)."""
    grouped = data.groupby(["model", "modifier_type", "style"])[list(metric_names)]
    values = grouped.mean().unstack(["modifier_type", "style"])
    values.columns = values.columns.reorder_levels([1, 2, 0])
    order = [
        (t, s, m) for t in MODIFIER_TYPES for s in STYLES for m in metric_names if (t, s, m) in values.columns
    ]
    values = values[order]
    values.columns = pd.MultiIndex.from_tuples(order, names=["modifier_type", "style", "metric"])
    counts = grouped.count().unstack(["modifier_type", "style"])
    counts.columns = counts.columns.reorder_levels([1, 2, 0])
    counts = counts.reindex(index=values.index, columns=values.columns).fillna(0).astype(int)
    return Leaderboard(values, _marks(values), counts=counts)


def table1(frame: pd.DataFrame, *, cfg=None) -> Leaderboard:
    """Table 1: PCC, EMD and ED by modifier type × style. See `leaderboard`."""
    return leaderboard(frame, TABLE1_METRICS, cfg=cfg)


def table2(frame: pd.DataFrame, *, cfg=None) -> Leaderboard:
    """Table 2: DCA and ΔHue by modifier type × style. See `leaderboard`."""
    return leaderboard(frame, TABLE2_METRICS, cfg=cfg)


def cfg_sweep(frame: pd.DataFrame, metric_names=("emd", "pcc")) -> pd.DataFrame:
    """Mean metrics per model, style and guidance scale (Figure 5).

    Parameters
    ----------
    frame : pandas.DataFrame
        Metrics frame with several ``cfg`` values per model.
    metric_names : sequence of str
        Keys of `METRICS`.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, style, cfg``, one per metric (mean over concepts, NaN skipped)
        and ``n_concepts``; sorted by model, style, cfg.
    """
    return checked_cfg_sweep(with_dca(frame), metric_names)


def checked_cfg_sweep(data: pd.DataFrame, metric_names) -> pd.DataFrame:
    """`cfg_sweep` of a frame already checked by `with_dca` (its caller checked it once for
    several tables)."""
    grouped = data.groupby(["model", "style", "cfg"])
    out = grouped[list(metric_names)].mean()
    out["n_concepts"] = grouped["concept"].nunique()
    return out.reset_index().sort_values(["model", "style", "cfg"], ignore_index=True)


SHIFT_COLUMNS = ("model", "style", "base", "concept", "modifier_type", "human_shift", "model_shift")


def _variant_bases(concepts) -> pd.DataFrame:
    rows = [
        {"concept": c.key, "base": c.base, "modifier_type": c.modifier_type}
        for c in concepts
        if c.modifier_type != "original"
    ]
    return pd.DataFrame(rows, columns=["concept", "base", "modifier_type"])


def _stack(ps, name: str) -> np.ndarray:
    arr = np.stack([np.asarray(p, dtype=float) for p in ps]) if len(ps) else np.empty((0, 71))
    if arr.ndim != 2:
        raise ValueError(f"`{name}` distributions must be 1-D vectors, got stacked shape {arr.shape}")
    return arr


def concept_shifts(
    human: Mapping[str, np.ndarray], model_dists: pd.DataFrame, *, concepts=None
) -> pd.DataFrame:
    """Shift EMD between each base concept and its modified variants, humans vs models.

    Parameters
    ----------
    human : mapping of str to array_like, shape (71,)
        P_H(x|c) per concept key.
    model_dists : pandas.DataFrame
        Columns ``model, style, concept, p``; ``p`` holds one UW-71 distribution
        (shape (71,)) per row, at one guidance scale per model (select beforehand).
    concepts : sequence of evaluation.concepts.Concept, optional
        The concept list relating variants to bases; default `load_concepts()`.

    Returns
    -------
    pandas.DataFrame
        Columns `SHIFT_COLUMNS`, one row per (model, style, variant) for which the
        base and the variant exist both for humans and for that model and style;
        ``human_shift`` = EMD(P_H(base), P_H(variant)) and ``model_shift`` the same for
        the model, in CIELAB ΔE units. This is also the data of Figure 4 (right).

    Raises
    ------
    ValueError
        If `model_dists` lacks columns or repeats a (model, style, concept).
    """
    require_columns(model_dists, ("model", "style", "concept", "p"), "model_dists")
    if model_dists.duplicated(["model", "style", "concept"]).any():
        raise ValueError("`model_dists` repeats a (model, style, concept); select one cfg first")
    variants = _variant_bases(load_concepts() if concepts is None else concepts)
    variants = variants[variants["concept"].isin(human.keys()) & variants["base"].isin(human.keys())]
    model_p = _stack(list(model_dists["p"]), "model_dists")
    # Rows of model_dists by position: each variant row, then its base's row.
    at = model_dists[["model", "style", "concept"]].assign(row=np.arange(len(model_dists)))
    rows = at.merge(variants, on="concept")
    bases = at.rename(columns={"concept": "base", "row": "base_row"})
    rows = rows.merge(bases, on=["model", "style", "base"])
    rows["model_shift"] = metrics.emd_rows(
        model_p[rows["base_row"].to_numpy()], model_p[rows["row"].to_numpy()]
    )
    h_base = _stack([human[k] for k in variants["base"]], "human")
    h_var = _stack([human[k] for k in variants["concept"]], "human")
    human_shift = pd.Series(metrics.emd_rows(h_base, h_var), index=variants["concept"].to_numpy())
    rows["human_shift"] = rows["concept"].map(human_shift)
    return rows[list(SHIFT_COLUMNS)].sort_values(["model", "style", "concept"], ignore_index=True)


def shift_ratio(model_shift, human_shift) -> np.ndarray:
    """Model shift ÷ human shift, NaN where the human shift is not above 0.

    Parameters
    ----------
    model_shift, human_shift : array_like
        Shifts (EMD, CIELAB ΔE units, >= 0) of broadcastable shapes.

    Returns
    -------
    ndarray
        The ratio; NaN where `human_shift` is 0 (people colored the variant as its base, so
        no ratio measures a model against them) or NaN. Nothing is divided by zero, so no
        infinity, and no numpy warning, comes out of a degenerate group.
    """
    model = np.asarray(model_shift, dtype=float)
    human = np.asarray(human_shift, dtype=float)
    out = np.full(np.broadcast_shapes(model.shape, human.shape), np.nan)
    return np.divide(model, human, out=out, where=human > 0)


def sensitivity(
    shifts: pd.DataFrame, by=("model", "style"), *, aggregate: str = RATIO_OF_MEANS
) -> pd.DataFrame:
    """Model shift ÷ human shift per group (Tables 6–8).

    Parameters
    ----------
    shifts : pandas.DataFrame
        Output of `concept_shifts`.
    by : sequence of str
        Grouping columns among ``model, style, modifier_type, base``.
    aggregate : {"ratio_of_means", "mean_of_ratios"}
        ``ratio_of_means`` (default): mean model shift ÷ mean human shift over the
        group's rows, which stays finite when a modifier barely moves people's colors.
        ``mean_of_ratios``: mean of per-concept ratios over rows with human shift > 0.

    Returns
    -------
    pandas.DataFrame
        The `by` columns, ``human_shift`` and ``model_shift`` (means), ``ratio`` and
        ``n_concepts``. A ratio below 1 means the model is under-sensitive. Under either
        aggregate the ratio is NaN exactly where the group's mean human shift is 0 (people
        colored every variant of the group as its base; `NO_HUMAN_SHIFT` says so in words).
    """
    require_columns(shifts, SHIFT_COLUMNS, "shifts")
    if aggregate not in (RATIO_OF_MEANS, MEAN_OF_RATIOS):
        raise ValueError(
            f"`aggregate` must be {RATIO_OF_MEANS!r} or {MEAN_OF_RATIOS!r}, got {shown(aggregate)}"
        )
    data = shifts.assign(ratio=shift_ratio(shifts["model_shift"], shifts["human_shift"]))
    grouped = data.groupby(list(by))
    out = grouped[["human_shift", "model_shift"]].mean()
    out["ratio"] = (
        shift_ratio(out["model_shift"], out["human_shift"])
        if aggregate == RATIO_OF_MEANS
        else grouped["ratio"].mean()
    )
    out["n_concepts"] = grouped["concept"].nunique()
    return out.reset_index()


def table6(shifts: pd.DataFrame, *, aggregate: str = RATIO_OF_MEANS) -> pd.DataFrame:
    """Table 6: sensitivity ratio, model × style (index model, columns styles); NaN where
    people's shift is 0 (`sensitivity`)."""
    return sensitivity(shifts, ("model", "style"), aggregate=aggregate).pivot(
        index="model", columns="style", values="ratio"
    )


def table7(shifts: pd.DataFrame, *, aggregate: str = RATIO_OF_MEANS) -> pd.DataFrame:
    """Table 7: sensitivity ratio, model × modifier type (index model); NaN where people's
    shift is 0 (`sensitivity`)."""
    return sensitivity(shifts, ("model", "modifier_type"), aggregate=aggregate).pivot(
        index="model", columns="modifier_type", values="ratio"
    )


def table8(shifts: pd.DataFrame, *, aggregate: str = RATIO_OF_MEANS) -> pd.DataFrame:
    """Table 8: sensitivity ratio, modifier type × style, averaged over models.

    Each cell is the unweighted mean over models of the per-model ratio of that modifier
    type and style (as the paper's Average column equals the mean of Table 7 over
    models); ``average`` is the mean of the style columns. Undefined ratios (NaN, people's
    shift 0) are skipped, so a cell is NaN only where every model's ratio is.
    """
    per_model = sensitivity(shifts, ("model", "modifier_type", "style"), aggregate=aggregate)
    out = per_model.groupby(["modifier_type", "style"])["ratio"].mean().unstack("style")
    out["average"] = out.mean(axis=1)
    return out
