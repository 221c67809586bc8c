"""Does the leaderboard survive the paper's open choices? (issue 19, item 2)

The paper leaves six choices open. Each has one documented default (what every table
uses) and named alternatives (`CHOICES`):

================  ===================  ==============================================
choice            default              alternatives
================  ===================  ==============================================
``pixel_filter``  ``none``             ``gencolor``: drop model pixels with L* <= 5 or
                                       L* > 99, as GenColor does (re-extraction)
``bin_color``     ``mean``             ``centre``: a palette bin is its centre
                                       (re-extraction, designers' P_H too)
``linkage``       ``single``           ``average``: average-linkage grouping
                                       (re-extraction, designers' P_H too)
``cfg``           ``recommended``      ``mean`` (each concept pooled over scales),
                                       ``lowest``, ``highest`` (scale per model)
``sensitivity``   ``ratio_of_means``   ``mean_of_ratios``
``grey_hue``      ``exclude``          ``atan2``: a grey bin's hue is atan2(0, 0) = 0°
                                       and every concept counts (Eq. 5 literally);
                                       ``match``: both grey 0°, one grey 180°
================  ===================  ==============================================

`robustness` recomputes the leaderboard under each alternative, changing that one
choice, and reports per (choice, alternative, metric) the largest change of any Table
1-2 cell or model mean, and Kendall's τ between the models' rankings by their mean over
every concept and style, with the pairs of models that swap. Sensitivity ranks by
closeness to the human shift (|log ratio|, smaller is better). A choice that moves one
metric (`MOVED`: sensitivity, grey_hue) reports that metric alone, and a metric with no
ranking to compare (no model with modifier concepts has a sensitivity; every dominant bin
grey under ``exclude``) is reported `NOT_COMPARED`, with NaN values, never as unchanged.

Re-extraction runs steps 2-5 of `evaluation.color.extraction` on the per-image pixel
summaries the runs store (step 1's output), for the cells at the recommended scale; the
default is recomputed the same way, so every comparison is like for like. It costs about
as much as the run's extract stage at one scale, so `sample_families` can restrict it to a
seeded sample of base concepts with all their variants (the report says which).

The explicit-color mode (GenColorBench) asks the same question of its scoring rule set with
`compare` and these report columns (`evaluation.explicit.views.explicit_robustness`); its
metric, `EXPLICIT_METRIC`, is one `compare` knows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from evaluation.analysis import results, tables
from evaluation.color.extraction import distribution_from_pixels
from evaluation.color.palette import load_uw71
from evaluation.concepts import Concept
from evaluation.pipeline import runs
from evaluation.pipeline.stages import read_pixels
from storage.shown import shown

# choice -> (default, alternatives)
CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "pixel_filter": ("none", ("gencolor",)),
    "bin_color": ("mean", ("centre",)),
    "linkage": ("single", ("average",)),
    "cfg": (results.RECOMMENDED, (tables.POOL_CFG, "lowest", "highest")),
    "sensitivity": (tables.RATIO_OF_MEANS, (tables.MEAN_OF_RATIOS,)),
    "grey_hue": ("exclude", ("atan2", "match")),
}
EXTRACTION_CHOICES = ("pixel_filter", "bin_color", "linkage")
#: Extraction choices that apply to the designers' paint as well (the filter is GenColor's
#: for model images only).
HUMAN_CHOICES = ("bin_color", "linkage")
SUMMARY_METRICS = ("pcc", "emd", "ed", "dca", "hue_diff", "sensitivity")
#: The metrics a choice can move, where fewer than `SUMMARY_METRICS`: the others are the same
#: under each of its alternatives, and a τ of 1 for them would say "no ranking changes" even
#: when the metric the choice moves was never compared.
MOVED = {"sensitivity": ("sensitivity",), "grey_hue": ("hue_diff",)}
#: What a report row with no ranking to compare says (in ``swapped``, and in `describe`).
NOT_COMPARED = "not compared (fewer than two models have a value under both)"
#: What a row says whose models all tie under one choice or the other (two models at 0 %
#: everywhere read "no ranking changes", τ = 1: outside probe 104).
TIED = "not compared (the models tie under one of them: no ranking)"
#: The explicit-color mode's metric: percent of scored images correct (higher is better;
#: `evaluation.explicit.views.explicit_summary` produces it).
EXPLICIT_METRIC = "accuracy"
REPORT_COLUMNS = (
    "choice",
    "default",
    "alternative",
    "metric",
    "largest_change",
    "where",
    "kendall_tau",
    "swapped",
    "recomputed",
)


def sample_families(concepts: Sequence[Concept], keys, n: int | None, seed: int) -> set[str]:
    """The keys of `keys` whose base concept is among `n` bases drawn with `seed` (all if None)."""
    keys = set(keys)
    if n is None:
        return keys
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`sample` must be a whole number >= 1, got {shown(n)}")
    bases = sorted({c.base for c in concepts if c.key in keys})
    chosen = set(np.random.default_rng(seed).choice(bases, size=min(n, len(bases)), replace=False).tolist())
    return {c.key for c in concepts if c.key in keys and c.base in chosen}


def hue_differences(frame: pd.DataFrame, mode: str) -> pd.Series:
    """ΔHue per row under a `grey_hue` mode (``exclude``, ``atan2`` or ``match``), degrees."""
    lab = load_uw71().lab
    hue = np.degrees(np.arctan2(lab[:, 2], lab[:, 1])) % 360.0
    grey = np.hypot(lab[:, 1], lab[:, 2]) == 0
    h, m = frame["dominant_human"].to_numpy(int), frame["dominant_model"].to_numpy(int)
    diff = np.abs(hue[h] - hue[m])
    diff = np.minimum(diff, 360.0 - diff)
    if mode == "exclude":
        diff = np.where(grey[h] | grey[m], np.nan, diff)
    elif mode == "match":
        diff = np.where(grey[h] & grey[m], 0.0, np.where(grey[h] ^ grey[m], 180.0, diff))
    elif mode != "atan2":
        raise ValueError(
            f"`grey_hue` must be one of {('exclude', *CHOICES['grey_hue'][1])}, got {shown(mode)}"
        )
    return pd.Series(diff, index=frame.index)


def summary(data: pd.DataFrame, shifts: pd.DataFrame, aggregate: str) -> pd.DataFrame:
    """Long form ``model, cell, metric, value``: Table 1-2 cells (``type/style``) and each
    model's mean over all its rows (cell ``all``); sensitivity per model (cell ``all``)."""
    names = [m for m in ("pcc", "emd", "ed", "dca", "hue_diff") if m in data]
    keys = ["model", "modifier_type", "style"]
    cells = data.groupby(keys)[names].mean().reset_index().melt(id_vars=keys, var_name="metric")
    cells["cell"] = cells["modifier_type"] + "/" + cells["style"]
    overall = data.groupby("model")[names].mean().reset_index().melt(id_vars="model", var_name="metric")
    parts = [cells, overall.assign(cell="all")]
    if not shifts.empty:
        sens = tables.sensitivity(shifts, ("model",), aggregate=aggregate)
        parts.append(sens[["model"]].assign(cell="all", metric="sensitivity", value=sens["ratio"]))
    return pd.concat(parts, ignore_index=True)[["model", "cell", "metric", "value"]]


def _ranking(values: pd.Series, metric: str) -> list:
    """Models best first by their overall value of `metric`."""
    if metric == "sensitivity":
        return _rank_key(values, metric).sort_values(kind="stable").index.tolist()
    if metric == EXPLICIT_METRIC:
        return values.sort_values(ascending=False, kind="stable").index.tolist()
    return values.sort_values(ascending=not tables.METRICS[metric][1], kind="stable").index.tolist()


def _rank_key(values: pd.Series, metric: str) -> pd.Series:
    """What `_ranking` orders the models by (up to direction): |log ratio| for sensitivity,
    the value for the others."""
    return np.abs(np.log(values.clip(lower=1e-12))) if metric == "sensitivity" else values


def compare(base: pd.DataFrame, alt: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per metric: largest |change| of any cell, Kendall τ of the overall rankings, swapped pairs.

    `base` and `alt` are long ``model, cell, metric, value`` frames (`summary`). One row per
    metric of `metrics` (default: each that both frames hold). A metric without two models
    valued under both (absent from either frame, or NaN) has NaN τ and `NOT_COMPARED` for
    ``swapped``, one whose models all tie under either frame NaN τ and `TIED`; its largest
    change is NaN unless some cell is valued under both.
    """
    merged = base.merge(alt, on=["model", "cell", "metric"], suffixes=("_base", "_alt"))
    merged["change"] = (merged["value_alt"] - merged["value_base"]).abs()
    if metrics is None:
        metrics = [m for m in (*SUMMARY_METRICS, EXPLICIT_METRIC) if m in set(merged["metric"])]
    rows = []
    for metric in metrics:
        part = merged[merged["metric"] == metric]
        defined = part.dropna(subset=["change"])
        top = defined.loc[defined["change"].idxmax()] if len(defined) else None
        moved = top is not None and top["change"] > 1e-12
        overall = part[part["cell"] == "all"].set_index("model")
        both = overall.dropna(subset=["value_base", "value_alt"])
        before, after = _ranking(both["value_base"], metric), _ranking(both["value_alt"], metric)
        # τ-b of the values themselves (the keys they are ranked by): undefined where every
        # model ties under a choice, which a τ of the ranked order read as 1.
        tau = (
            stats.kendalltau(
                _rank_key(both["value_base"], metric), _rank_key(both["value_alt"], metric)
            ).statistic
            if len(both) > 1
            else np.nan
        )
        swapped = [
            f"{a} ↔ {b}"
            for i, a in enumerate(before)
            for b in before[i + 1 :]
            if after.index(a) > after.index(b)
        ]
        rows.append(
            {
                "metric": metric,
                "largest_change": np.nan if top is None else float(top["change"]),
                "where": f"{top['model']} {top['cell']}" if moved else "",
                "kendall_tau": float(tau),
                "swapped": (NOT_COMPARED if len(both) < 2 else TIED) if np.isnan(tau) else "; ".join(swapped),
            }
        )
    return pd.DataFrame(rows)


def _frame_at(frame: pd.DataFrame, cfg: str) -> tuple[pd.DataFrame, dict]:
    """Rows at one scale per model (`cfg`: recommended, lowest, highest) or pooled (mean)."""
    data = tables.with_dca(frame)
    if cfg == tables.POOL_CFG:
        return tables.select_cfg(data, tables.POOL_CFG), results.recommended_cfg(frame)
    scales = frame.groupby("model")["cfg"]
    chosen = {
        results.RECOMMENDED: results.recommended_cfg(frame),
        "lowest": scales.min().astype(float).to_dict(),
        "highest": scales.max().astype(float).to_dict(),
    }[cfg]
    return tables.select_cfg(data, chosen), chosen


def _shifts(rows: Sequence[Mapping], human: Mapping[str, np.ndarray], concepts, chosen) -> pd.DataFrame:
    dists = results._at_cfg(rows, chosen)
    return tables.concept_shifts(human, dists, concepts=concepts).astype(
        {"human_shift": float, "model_shift": float}
    )


def _leaderboard(
    rows,
    human,
    concepts,
    *,
    frame=None,
    cfg=results.RECOMMENDED,
    aggregate=tables.RATIO_OF_MEANS,
    grey_hue="exclude",
):
    """`summary` of `rows` against `human` (scored here unless `frame` is given)."""
    frame = results.metrics_frame(rows, human, concepts) if frame is None else frame
    data, chosen = _frame_at(frame, cfg)
    if grey_hue != "exclude":
        data = data.assign(hue_diff=hue_differences(data, grey_hue))
    return summary(data, _shifts(results.latest_distributions(rows), human, concepts, chosen), aggregate)


def reextracted(
    rows: Sequence[Mapping],
    model_pixels: Mapping[tuple, Sequence[np.ndarray]],
    human: Mapping[str, np.ndarray],
    human_pixels: Mapping[str, Sequence[np.ndarray]] | None,
    options: Mapping[str, str],
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Model rows and P_H recomputed from pixel summaries with extraction `options`
    (empty: the defaults).

    Rows without pixels are dropped; P_H is recomputed for the concepts of `human_pixels`
    unless an option applies to model images only (the pixel filter), else kept as stored.
    """
    out = []
    for row in rows:
        key = (row["model"], row["concept"], row["style"], float(row["cfg"]))
        if key not in model_pixels:
            continue
        try:
            p = distribution_from_pixels(list(model_pixels[key]), **options).p
        except ValueError:  # the filter left no pixel: the cell has no distribution
            p = None
        out.append({**row, "p": p})
    humans = dict(human)
    if human_pixels and set(options) <= set(HUMAN_CHOICES):
        humans.update(
            {
                k: distribution_from_pixels(list(px), **options).p
                for k, px in human_pixels.items()
                if k in humans
            }
        )
    return out, humans


def robustness(
    model_rows: Sequence[Mapping],
    human: Mapping[str, np.ndarray],
    concepts: Sequence[Concept],
    *,
    model_pixels: Mapping[tuple, Sequence[np.ndarray]] | None = None,
    human_pixels: Mapping[str, Sequence[np.ndarray]] | None = None,
    keys: set[str] | None = None,
    frame: pd.DataFrame | None = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The leaderboard under every alternative of `CHOICES`, compared with the defaults.

    Parameters
    ----------
    model_rows : sequence of Mapping
        `evaluation.pipeline.runs.model_distributions` rows (every scale).
    human : Mapping of str to ndarray, shape (71,)
        P_H by concept key (one source).
    concepts : sequence of Concept
    model_pixels : Mapping of (model, concept, style, cfg) to list of (N, 3) uint8, optional
        Per-image pixel summaries of the cells at the recommended scale
        (`stored_pixels`); without them the extraction choices are skipped.
    human_pixels : Mapping of str to list of (N, 3) uint8, optional
        The designers' colorings' pixel samples per concept; without them P_H stays as
        stored under every extraction choice.
    keys : set of str, optional
        Concepts to use (`sample_families`); default every concept.
    frame : pandas.DataFrame, optional
        The metrics frame of `model_rows` when already known (stored scores,
        `evaluation.analysis.results.latest_scores`); default: scored here once.
    progress : callable, optional
        Called with each choice's name as it starts.

    Returns
    -------
    pandas.DataFrame
        `REPORT_COLUMNS` plus ``seconds`` (of that alternative; the first extraction
        alternative includes the one default re-extraction), one row per (choice,
        alternative, metric).
    """
    rows = results.latest_distributions(model_rows)
    if keys is not None:
        rows = [r for r in rows if r["concept"] in keys]
        human = {k: v for k, v in human.items() if k in keys}
    if not any(r["concept"] in human for r in rows):
        raise ValueError("no stored model distribution has a human distribution: nothing to compare")
    scope = (
        "every concept" if keys is None else f"{len({r['concept'] for r in rows})} concepts (seeded sample)"
    )
    if frame is None:
        frame = results.metrics_frame(rows, human, concepts)
    elif keys is not None:
        frame = frame[frame["concept"].isin(keys)]
    base = _leaderboard(rows, human, concepts, frame=frame)
    start = time.perf_counter()
    # every extraction choice is compared with the same default re-extraction
    extracted = (
        _leaderboard(*reextracted(rows, model_pixels, human, human_pixels, {}), concepts)
        if model_pixels
        else None
    )
    report = []
    for choice, (default, alternatives) in CHOICES.items():
        if progress is not None:
            progress(choice)
        if choice in EXTRACTION_CHOICES:
            if not model_pixels:
                continue
            reference = extracted
            how = f"re-extracted from pixel summaries, {scope}" + (
                ", P_H too" if human_pixels and choice in HUMAN_CHOICES else ""
            )
        else:
            reference, how = base, f"from the scores, {scope}"
        for alternative in alternatives:
            if choice in EXTRACTION_CHOICES:
                options = {choice: alternative}
                alt = _leaderboard(*reextracted(rows, model_pixels, human, human_pixels, options), concepts)
            else:
                alt = _leaderboard(rows, human, concepts, frame=frame, **{_KEYWORD[choice]: alternative})
            found = compare(reference, alt, MOVED.get(choice, SUMMARY_METRICS)).assign(
                choice=choice,
                default=default,
                alternative=alternative,
                recomputed=how,
                seconds=time.perf_counter() - start,
            )
            report.append(found)
            start = time.perf_counter()
    return pd.concat(report, ignore_index=True)[[*REPORT_COLUMNS, "seconds"]]


_KEYWORD = {"cfg": "cfg", "sensitivity": "aggregate", "grey_hue": "grey_hue"}


def stored_pixels(db, data_dir, model_rows: Sequence[Mapping]) -> dict[tuple, list[np.ndarray]]:
    """The per-image pixel summaries behind the newest distribution of each cell at its
    model's recommended scale: (model, concept, style, cfg) -> list of (N, 3) uint8.

    Parameters
    ----------
    db : sqlite_utils.Database
    data_dir : str or Path
        Where the runs' files are (a folder or an object-store URI).
    model_rows : sequence of Mapping
        `evaluation.pipeline.runs.model_distributions` rows.

    Raises
    ------
    evaluation.pipeline.stages.PixelSummaryError
        A summary that cannot be read, named with its item (`evaluation.pipeline.stages.read_pixels`).
    """
    rows = results.latest_distributions(model_rows)
    if not rows:
        return {}
    recommended = results.recommended_cfg(pd.DataFrame(rows, columns=["model", "cfg"]))
    wanted = {
        (r["model"], r["concept"], r["style"], float(r["cfg"])): r["run"]
        for r in rows
        if np.isclose(float(r["cfg"]), recommended[r["model"]])
    }
    out: dict[tuple, list[np.ndarray]] = {}
    for run in sorted(set(wanted.values())):
        for item in runs.items(db, run):
            key = (item["model"], item["concept"], item["style"], float(item["cfg"]))
            if wanted.get(key) == run and item["segment_status"] == "ok" and item["summary_path"]:
                out.setdefault(key, []).append(read_pixels(data_dir, item))
    return out


def label(metric: str) -> str:
    """A metric as the tables name it (ΔHue, PCC, ...); the report's own name for the others
    (sensitivity, accuracy)."""
    return tables.METRICS.get(metric, (metric,))[0]


def describe(report: pd.DataFrame) -> str:
    """The report in a few lines: per choice, the rankings that change (Markdown)."""
    lines = []
    for (choice, alternative), part in report.groupby(["choice", "alternative"], sort=False):
        # A metric without two models valued under both choices has no ranking to compare
        # (ΔHue with every dominant color grey under `exclude`): said so, not "no change".
        unranked = part[part["kendall_tau"].isna()]
        swaps = part[(part["swapped"] != "") & part["kendall_tau"].notna()]
        default = part["default"].iloc[0]
        said = []
        if len(unranked) < len(part):
            said.append(
                "**"
                + "; ".join(
                    f"{label(r.metric)}: {r.swapped} (τ = {r.kendall_tau:.2f})" for r in swaps.itertuples()
                )
                + "**"
                if len(swaps)
                else "no ranking changes"
            )
        for why, metrics in unranked.groupby("swapped", sort=False)["metric"]:
            said.append(f"{why}: " + ", ".join(map(label, metrics)))
        said = "; ".join(said)
        lines.append(f"- {choice} {default} → {alternative}: {said} ({part['recomputed'].iloc[0]})")
    return "\n".join(lines)
