"""The research tabs' analyses: stored model distributions against one human source.

`analyses` scores the latest stored P_M(x|c) of every (model, concept, style, cfg)
against P_H(x|c) (`evaluation.pipeline.scoring.score`) and derives the paper's Tables 1, 2 and
6-8, the CFG sweep of Figure 5 and the shifts of Figure 4 (`evaluation.analysis.tables`);
`analysis_figures` draws them (`evaluation.analysis.figures`) and `export_analyses` writes every
table as CSV and every figure as HTML.

Choices where the paper is silent:

- The same cell may be stored by several runs; the most recently created distribution
  is used.
- Tables 1, 2 and 6-8 use one guidance scale per model. By default that is the model's
  *recommended* scale: the middle of the scales stored for it (the lower middle for an
  even count), since the registry centres each sweep on the model's recommended value.
  Any one scale can be chosen instead, or ``"mean"`` for Tables 1 and 2 (each concept
  averaged over its scales, `evaluation.analysis.tables.POOL_CFG`); Figure 5 always shows them all.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from evaluation.analysis import bootstrap, figures, tables, uncertainty
from evaluation.color.naming import DOMINANT_COLUMNS, with_bin_names
from evaluation.concepts import Concept
from evaluation.pipeline import scoring
from evaluation.pipeline.fileio import write_atomic
from storage.shown import shown
from storage.spreadsheet import csv_text, number_cell

RECOMMENDED = "recommended"


def latest_distributions(model_rows: Sequence[Mapping]) -> list[dict]:
    """Rows of `evaluation.pipeline.runs.model_distributions` with a ``p``, one per (model, concept, style, cfg): the newest."""
    latest: dict[tuple, dict] = {}
    for row in sorted((r for r in model_rows if r["p"] is not None), key=lambda r: r["created_at"]):
        latest[(row["model"], row["concept"], row["style"], float(row["cfg"]))] = dict(row)
    return list(latest.values())


def metrics_frame(
    model_rows: Sequence[Mapping], human: Mapping[str, np.ndarray], concepts: Sequence[Concept]
) -> pd.DataFrame:
    """Per-concept metrics (`evaluation.pipeline.scoring.score`) of the newest distribution of each cell.

    Parameters
    ----------
    model_rows : sequence of Mapping
        `evaluation.pipeline.runs.model_distributions` rows (any runs).
    human : Mapping of str to ndarray, shape (71,)
        P_H(x|c) by concept key.
    concepts : sequence of Concept

    Returns
    -------
    pandas.DataFrame
        `evaluation.pipeline.scoring.LONG_COLUMNS`: the metrics frame of `evaluation.analysis.tables`.
    """
    return scoring.score(latest_distributions(model_rows), human, concepts)


def latest_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """`evaluation.pipeline.scoring.stored_scores` rows reduced to the newest of each (model,
    concept, style, cfg), as `latest_distributions` does for distributions: the metrics
    frame (`evaluation.pipeline.scoring.LONG_COLUMNS`)."""
    newest = frame.sort_values("created_at", kind="stable").drop_duplicates(
        ["model", "concept", "style", "cfg"], keep="last"
    )
    return newest.sort_index()[scoring.LONG_COLUMNS].reset_index(drop=True)


def recommended_cfg(frame: pd.DataFrame) -> dict[str, float]:
    """Per model the middle of its stored guidance scales (lower middle for an even count)."""
    out = {}
    for model, scales in frame.groupby("model")["cfg"]:
        ordered = np.sort(scales.unique())
        out[model] = float(ordered[(len(ordered) - 1) // 2])
    return out


def parse_cfg(choice: str | float) -> str | float:
    """`choice` as `RECOMMENDED` or one guidance scale (a finite number >= 0).

    Raises
    ------
    ValueError
        If `choice` is neither, e.g. ``"lots"``, ``True`` or ``nan``.
    """
    if isinstance(choice, str) and choice.strip() == RECOMMENDED:
        return RECOMMENDED
    if isinstance(choice, str):
        try:
            value = number_cell(choice)  # ASCII digits: ``float`` read "٥" as 5
        except ValueError:
            value = np.nan
    else:
        value = float(choice) if isinstance(choice, (int, float)) and not isinstance(choice, bool) else np.nan
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"`cfg` must be {RECOMMENDED!r} or a guidance scale, got {shown(choice)}")
    return value


def pooled_cfg(choice: str | float) -> bool:
    """Whether the tables' `choice` is the mean over scales (`tables.POOL_CFG`); else it must
    be what `parse_cfg` takes.

    Raises
    ------
    ValueError
        If `choice` is none of the three, naming all three (the tables' field offers them).
    """
    if isinstance(choice, str) and choice.strip() == tables.POOL_CFG:
        return True
    try:
        parse_cfg(choice)
    except ValueError:
        raise ValueError(
            f"`cfg` must be {RECOMMENDED!r}, {tables.POOL_CFG!r} (over every scale) or a guidance "
            f"scale, got {shown(choice)}"
        ) from None
    return False


def resolve_cfg(frame: pd.DataFrame, choice: str | float) -> dict[str, float]:
    """`choice` (`RECOMMENDED` or one scale, see `parse_cfg`) as one guidance scale per model
    of `frame`: the stored scale nearest the number, within `numpy.isclose`'s tolerance (a
    typed 2.0000001 is the stored 2; taken as typed, the tables were labelled 2.0000001 and the
    leaderboard's merge of them failed with a pandas message, outside probe 199)."""
    value = parse_cfg(choice)
    if value == RECOMMENDED:
        return recommended_cfg(frame)
    chosen, missing = {}, {}
    for model, stored in frame.groupby("model")["cfg"].unique().items():
        scales = np.sort(stored.astype(float))
        near = scales[np.isclose(scales, value)]
        if near.size:
            chosen[model] = float(near[np.argmin(np.abs(near - value))])
        else:
            missing[model] = scales.tolist()
    if missing:
        raise ValueError(
            f"`cfg` {value:g} is not a stored guidance scale of every model; stored scales: {missing}"
        )
    return chosen


@dataclass(frozen=True)
class Analyses:
    """Every table of the leaderboard tab (pandas frames, `tables.Leaderboard` for 1 and 2).

    ``cfg`` is the scale per model of the shifts and sensitivity tables, and of Tables 1
    and 2 unless ``pooled`` (then these average each concept over all its scales).

    With ``resampling`` (the default), Tables 1-2 carry bootstrap intervals (``lo``,
    ``hi``), ``sweep`` and ``sensitivity`` carry ``<metric>_lo``/``_hi`` columns,
    ``table6_ci`` to ``table8_ci`` hold Tables 6-8 in long form with ``ratio_lo`` and
    ``ratio_hi``, and ``ranking`` says which adjacent models are distinguishable
    (`evaluation.analysis.uncertainty`); without, those frames are empty.
    """

    metrics: pd.DataFrame
    cfg: dict[str, float]
    pooled: bool
    table1: tables.Leaderboard
    table2: tables.Leaderboard
    sweep: pd.DataFrame
    shifts: pd.DataFrame
    sensitivity: pd.DataFrame
    table6: pd.DataFrame
    table7: pd.DataFrame
    table8: pd.DataFrame
    table6_ci: pd.DataFrame
    table7_ci: pd.DataFrame
    table8_ci: pd.DataFrame
    ranking: pd.DataFrame
    resampling: bootstrap.Resampling | None
    #: The sensitivity ratio of ``sensitivity`` and Tables 6-8 (`tables.sensitivity`).
    aggregate: str = tables.RATIO_OF_MEANS


def _at_cfg(rows: Sequence[Mapping], cfg: Mapping[str, float]) -> pd.DataFrame:
    kept = [
        r
        for r in rows
        if r["model"] in cfg and math.isclose(float(r["cfg"]), cfg[r["model"]], rel_tol=1e-5, abs_tol=1e-8)
    ]
    return pd.DataFrame(
        {
            "model": [r["model"] for r in kept],
            "style": [r["style"] for r in kept],
            "concept": [r["concept"] for r in kept],
            "p": [r["p"] for r in kept],
        }
    )


def analyses(
    model_rows: Sequence[Mapping],
    human: Mapping[str, np.ndarray],
    concepts: Sequence[Concept],
    *,
    cfg: str | float = RECOMMENDED,
    aggregate: str = tables.RATIO_OF_MEANS,
    frame: pd.DataFrame | None = None,
    resampling: bootstrap.Resampling | None = bootstrap.DEFAULT,
    human_replicates: Mapping[str, np.ndarray] | None = None,
) -> Analyses:
    """Score and tabulate.

    Parameters
    ----------
    model_rows : sequence of Mapping
        `evaluation.pipeline.runs.model_distributions` rows (any runs); with `frame` given, only
        those at the scales the tables use are needed (for the shifts).
    human : Mapping of str to ndarray, shape (71,)
        P_H(x|c) by concept key, one source.
    concepts : sequence of Concept
    cfg : str or float
        `RECOMMENDED`, one guidance scale, or ``"mean"`` (`evaluation.analysis.tables.POOL_CFG`):
        Tables 1 and 2 average each concept over its scales, and the shifts use the
        recommended scales (a shift compares two distributions of one scale).
    aggregate : str
        The sensitivity ratio, see `evaluation.analysis.tables.sensitivity`.
    frame : pandas.DataFrame, optional
        The metrics frame when it is already known (`latest_scores` of the stored
        scores); default: scored here from `model_rows`.
    resampling : bootstrap.Resampling or None
        How the intervals are drawn (default: `bootstrap.N_RESAMPLES` resamples of the
        concepts, seed `bootstrap.SEED`); None leaves them out.
    human_replicates : Mapping of str to ndarray, shape (R, 71), optional
        P_H replicates per concept from its resampled colorings
        (`bootstrap.human_replicates`), for ``resampling.colorings``.

    Raises
    ------
    ValueError
        If no stored model distribution has a human counterpart, or a chosen scale is
        missing for a model.
    """
    if frame is None:
        frame = metrics_frame(model_rows, human, concepts)
    if frame.empty:
        raise ValueError(
            "no stored model distribution has a human distribution in this source: "
            "finish an evaluation, or pick a source that covers its concepts"
        )
    pooled = pooled_cfg(cfg)
    chosen = resolve_cfg(frame, RECOMMENDED if pooled else cfg)
    table_cfg = tables.POOL_CFG if pooled else chosen
    checked = tables.with_dca(frame)
    selected = tables.select_cfg(checked, table_cfg)
    table1 = tables.checked_leaderboard(selected, tables.TABLE1_METRICS)
    table2 = tables.checked_leaderboard(selected, tables.TABLE2_METRICS)
    shifts = tables.concept_shifts(
        human, _at_cfg(latest_distributions(model_rows), chosen), concepts=concepts
    )
    # An empty result (no variant pair in the source) comes back with text-typed shift columns.
    shifts = shifts.astype({"human_shift": float, "model_shift": float})
    result = Analyses(
        metrics=frame,
        cfg=chosen,
        pooled=pooled,
        table1=table1,
        table2=table2,
        sweep=tables.checked_cfg_sweep(checked, ("emd", "pcc")),
        shifts=shifts,
        sensitivity=tables.sensitivity(shifts, ("model", "modifier_type"), aggregate=aggregate),
        table6=tables.table6(shifts, aggregate=aggregate),
        table7=tables.table7(shifts, aggregate=aggregate),
        table8=tables.table8(shifts, aggregate=aggregate),
        table6_ci=pd.DataFrame(),
        table7_ci=pd.DataFrame(),
        table8_ci=pd.DataFrame(),
        ranking=pd.DataFrame(columns=list(uncertainty.RANKING_COLUMNS)),
        resampling=None,
        aggregate=aggregate,
    )
    if resampling is None:
        return result
    return with_intervals(
        result, model_rows, resampling, aggregate=aggregate, human_replicates=human_replicates
    )


def with_intervals(
    result: Analyses,
    model_rows: Sequence[Mapping],
    resampling: bootstrap.Resampling,
    *,
    aggregate: str = tables.RATIO_OF_MEANS,
    human_replicates: Mapping[str, np.ndarray] | None = None,
) -> Analyses:
    """`result` (`analyses` without intervals) with its bootstrap intervals drawn.

    ``analyses(..., resampling=r)`` is ``with_intervals(analyses(..., resampling=None), ...,
    r)``: a view can show the point estimates first and the intervals once drawn, without
    computing the tables twice.

    Parameters
    ----------
    result : Analyses
        Computed with ``resampling=None`` and the same `aggregate`.
    model_rows : sequence of Mapping
        The model rows `result` was computed from (at least those at ``result.cfg``).
    resampling : bootstrap.Resampling
    aggregate : str
        The sensitivity ratio `result` was computed with.
    human_replicates : Mapping of str to ndarray, shape (R, 71), optional
        As in `analyses`.
    """
    if result.resampling is not None:
        raise ValueError("`result` already has intervals: pass one computed with resampling=None")
    chosen = result.cfg
    model_p = None  # only the colorings scheme scores the model distributions again
    if resampling.colorings and human_replicates and not result.pooled:
        model_p = {
            (r["model"], r["concept"], r["style"]): r["p"]
            for r in latest_distributions(model_rows)
            if r["model"] in chosen
            and math.isclose(float(r["cfg"]), chosen[r["model"]], rel_tol=1e-5, abs_tol=1e-8)
        }
    found = uncertainty.analyse(
        result.metrics,
        result.table1,
        result.table2,
        tables.POOL_CFG if result.pooled else chosen,
        result.shifts,
        resampling,
        aggregate=aggregate,
        model_p=model_p,
        human=human_replicates,
    )
    return replace(
        result,
        table1=found.table1,
        table2=found.table2,
        sweep=found.sweep,
        sensitivity=found.sensitivity,
        table6_ci=found.table6,
        table7_ci=found.table7,
        table8_ci=found.table8,
        ranking=found.ranking,
        resampling=found.resampling,
    )


#: Why Tables 6-8 and Figure 4 are empty: said on the figures, in the empty CSVs and in the app.
NO_SHIFTS = (
    "Nothing to show: sensitivity compares a model's shift from a base concept to its "
    "variants (apple → rotten apple) with people's. It fills once a model has evaluated a base "
    "concept and a variant that both have a human distribution in this source (designer "
    "colorings; the reference sets cover base concepts only)."
)
#: The tables that come from the concept shifts (`NO_SHIFTS` when there are none).
SHIFT_TABLES = ("shifts", "sensitivity", "table6", "table7", "table8")
#: The tables whose ratio `Analyses.aggregate` chooses: their CSV says which (`export_analyses`).
RATIO_TABLES = ("sensitivity", "table6", "table7", "table8", "table6_ci", "table7_ci", "table8_ci")


def analysis_figures(result: Analyses) -> dict[str, go.Figure]:
    """Figure 5 (CFG sweep), Figure 4 left (sensitivity bars) and right (shift scatter);
    the sweep and the bars carry error bars where `result` has intervals. Without concept
    shifts, Figure 4's plots say why they are empty (`NO_SHIFTS`)."""
    figs = {
        "cfg_sweep": figures.cfg_sweep_figure(result.sweep),
        "sensitivity": figures.sensitivity_bars(result.sensitivity, group="modifier_type"),
        "shift_scatter": figures.shift_scatter(result.shifts),
    }
    if result.shifts.empty:
        for name in ("sensitivity", "shift_scatter"):
            figures.noted(figs[name], NO_SHIFTS)
    return figs


def _write(directory: Path, name: str, suffix: str, data: bytes) -> Path:
    path = directory / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    write_atomic(path, data)
    return path


def with_resampling(frame: pd.DataFrame, resampling: bootstrap.Resampling | None) -> pd.DataFrame:
    """`frame` with the level, resample count and seed of its intervals as the columns ``ci``,
    ``n_resamples`` and ``seed`` (empty without intervals)."""
    if resampling is None:
        return frame.assign(ci=None, n_resamples=None, seed=None)
    return frame.assign(ci=resampling.ci, n_resamples=resampling.n_resamples, seed=resampling.seed)


#: What a Table 1-2 CSV row says of where its numbers come from (`with_provenance`).
PROVENANCE_COLUMNS = ("source", "cfg", "runs", "resampled_concepts")


def with_provenance(frame: pd.DataFrame, result: Analyses, source: str) -> pd.DataFrame:
    """Table 1 or 2 in long form (`tables.Leaderboard.to_csv_frame`) with what its numbers
    come from, per row: the human ``source``; the model's guidance scale ``cfg`` (``mean``
    when each concept is averaged over its scales); the ``runs`` the distributions of its cell
    (model, modifier type and style) come from (space-separated, the newest distribution of
    each concept counting); and
    ``resampled_concepts``, how many concepts each bootstrap replicate draws from: every
    model's at every scale together (the draws are paired), so a run that adds concepts
    changes the other cells' intervals, never their values."""
    metrics = result.metrics
    if not result.pooled:
        metrics = metrics[[c == result.cfg.get(m) for m, c in zip(metrics["model"], metrics["cfg"])]]
    # Per cell: every cell of a model named the runs of all of them (outside probe 187).
    cell = ["model", "modifier_type", "style"]
    runs = metrics.groupby(cell)["run"].agg(lambda r: " ".join(sorted(set(r))))
    drawn = len(set(result.metrics["concept"]) | set(result.shifts.get("concept", ())))
    return frame.assign(
        source=source,
        cfg=[tables.POOL_CFG if result.pooled else result.cfg.get(m) for m in frame["model"]],
        runs=[runs.get(key) for key in zip(*(frame[c] for c in cell), strict=True)],
        resampled_concepts=drawn if result.resampling is not None else None,
    )


def metrics_csv_frame(metrics: pd.DataFrame, source: str) -> pd.DataFrame:
    """The per-concept scores as their CSVs hold them (``scores_long.csv``, the Export's
    ``metrics``): the dominant bins by name, each row's ``dca`` (1.0 where the dominant
    colors agree, else 0.0: Table 2's DCA is its mean; the Concept browser showed it and
    these files did not, outside probe 226) and the human `source`."""
    return with_bin_names(metrics, DOMINANT_COLUMNS).assign(dca=tables.dca_column(metrics), source=source)


def export_analyses(
    result: Analyses, figs: Mapping[str, go.Figure], directory: str | Path, source: str
) -> list[Path]:
    """Write every table as CSV and every figure as a standalone HTML file.

    Files are named ``<name>-<first 12 hex of their SHA-256>.<csv|html>`` under
    `directory`, so exports never overwrite one another. Tables 1 and 2 are written in
    long form with their best/second marks (`tables.Leaderboard.to_csv_frame`).

    Returns
    -------
    list of Path
        Tables first (metrics, table1, table2, cfg_sweep, shifts, sensitivity, table6-8,
        then, with intervals, table6_ci-table8_ci and ranking), then figures. Tables 1-2,
        the sweep and the sensitivity carry their interval columns; Tables 1-2 and the
        ranking also the level, resample count and seed (`with_resampling`), Tables 1-2
        what their numbers come from (`with_provenance`, `source` the human source's name),
        the sensitivity and Tables 6-8 their ratio (``sensitivity_ratio``: `Analyses.aggregate`).
        Without concept shifts, the shift tables hold one ``note`` saying why (`NO_SHIFTS`).
    """
    directory = Path(directory)
    paths = []
    for field in fields(result):
        value = getattr(result, field.name)
        if isinstance(value, tables.Leaderboard):
            value = with_resampling(with_provenance(value.to_csv_frame(), result, source), result.resampling)
        elif field.name == "ranking":
            value = with_resampling(value, result.resampling)
        elif field.name == "metrics":  # as the command line's scores_long.csv
            value = metrics_csv_frame(value, source)
        elif field.name in RATIO_TABLES:  # the choice changes their numbers (outside probe 187)
            value = value.assign(sensitivity_ratio=result.aggregate)
        if isinstance(value, pd.DataFrame):
            index = field.name in ("table6", "table7", "table8")
            if value.empty and field.name.endswith(("_ci", "ranking")):
                continue
            if field.name in SHIFT_TABLES and result.shifts.empty:
                value, index = pd.DataFrame({"note": [NO_SHIFTS]}), False  # a bare header said nothing
            paths.append(_write(directory, field.name, ".csv", csv_text(value, index=index).encode("utf-8")))
    for name, fig in figs.items():
        page = fig.to_html(include_plotlyjs=True, full_html=True, div_id=name)
        paths.append(_write(directory, name, ".html", page.encode("utf-8")))
    return paths
