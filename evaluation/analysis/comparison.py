"""One concept, people against each model, for the Concept browser.

`Panel` holds what one source (the human ground truth or one model at one style and
guidance scale) shows: its distribution and its visual groups' dominant colors with
sample counts (Figure 3). The figure builders put panels side by side on one shared
probability axis; `variant_shifts` compares a base concept with its modified variants
(shift EMD, §5.1) for people and for each model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evaluation.analysis import bootstrap, figures
from evaluation.analysis.results import RECOMMENDED, latest_distributions, parse_cfg, resolve_cfg
from evaluation.analysis.tables import with_dca
from evaluation.color import metrics
from evaluation.color.naming import DOMINANT_COLUMNS, with_bin_names
from evaluation.concepts import Concept
from evaluation.pipeline.scoring import score
from storage.shown import counted, shown

HUMAN = "human"
HUMAN_COLOR = "#555555"
NO_SAMPLES_NOTE = (
    "no per-sample colors stored (a set of ratings, or a distribution stored without its groups)"
)
CHART_ROW_PX = 220  # plot height per row of distribution charts, CSS pixels
CHART_TICKS_PX = 34  # below a chart row: its tick labels, and room before the next row's titles
STRIP_ROW_PX = 80  # swatch height per strip row, CSS pixels
TITLE_FONT = {"size": 12}  # panel titles, CSS pixels
TITLE_LINE_PX = 16  # one line of a panel title
# Plotly's toolbar (shown on hover, or after a tap on a phone) sits at the figure's top right:
# the top margin leaves it this much room above the first row's titles (it covered the right
# panel's title on a phone: outside probe 151).
MODEBAR_PX = 28
STRIP_AXIS_TITLE = "number on each color: images, or colorings for people"
# Panel titles are wrapped to fit a 390-px phone: two chart columns of about 150 px each, one
# strip column of about 370 px.
CHART_TITLE_CHARS = 22
STRIP_TITLE_CHARS = 48
# Each dominant bin is followed by its names (`evaluation.color.naming.with_bin_names`).
METRIC_COLUMNS = (
    ["model", "style", "cfg", "n_images", "n_excluded", "pcc", "emd", "ed", "dca"]
    + [
        f"{column}{suffix}"
        for column in ("dominant_model", "dominant_human")
        for suffix in ("", "_name", "_basic")
    ]
    + ["hue_diff"]
)


@dataclass(frozen=True)
class Panel:
    """What one source shows for one concept.

    Attributes
    ----------
    title : str
        E.g. ``"Human: designer colorings (n = 5)"`` or ``"sdxl · cfg 6 (5 images)"``.
    p : ndarray, shape (71,)
        The distribution.
    colors : ndarray, shape (k, 3), uint8, or None
        The dominant color of each visual group (sRGB), largest group first.
    counts : tuple of int or None
        Images (or colorings) per group.
    """

    title: str
    p: np.ndarray
    colors: np.ndarray | None = None
    counts: tuple[int, ...] | None = None


def strip_of(groups: Sequence | None) -> tuple[np.ndarray, tuple[int, ...]] | tuple[None, None]:
    """Dominant colors and sizes of extraction groups.

    `groups` holds `evaluation.color.extraction.ColorGroup` objects or their stored JSON form
    (dicts with ``rgb``, heaviest first, and ``image_indices``); empty or None gives
    ``(None, None)``.
    """
    if not groups:
        return None, None
    as_dicts = [
        g if isinstance(g, Mapping) else {"rgb": g.rgb, "image_indices": g.image_indices} for g in groups
    ]
    colors = np.stack([np.asarray(g["rgb"], dtype=np.uint8).reshape(-1, 3)[0] for g in as_dicts])
    return colors, tuple(len(g["image_indices"]) for g in as_dicts)


def human_panel(label: str, p: np.ndarray, groups: Sequence | None = None) -> Panel:
    """The panel of a human distribution; `label` says its source."""
    colors, counts = strip_of(groups)
    return Panel(f"Human: {label}", np.asarray(p, dtype=np.float64), colors, counts)


def rows_at_cfg(
    rows: Sequence[Mapping], cfg: str | float, *, scales: pd.DataFrame | None = None
) -> list[dict]:
    """The newest distribution per (model, style, concept) at the chosen scale per model.

    `cfg` is ``"recommended"`` or one scale (see `evaluation.analysis.results.resolve_cfg`); it is
    checked even when `rows` is empty. `scales` (``model, cfg`` columns) are the scales each
    model's recommended one is the middle of (default: those of `rows`); a model none of
    whose rows is at its scale shows none.

    Raises
    ------
    ValueError
        If `cfg` is neither (`evaluation.analysis.results.parse_cfg`), or a scale some model lacks.
    """
    cfg = parse_cfg(cfg)
    latest = latest_distributions(rows)
    if not latest:
        return []
    own = pd.DataFrame({"model": [r["model"] for r in latest], "cfg": [r["cfg"] for r in latest]})
    if scales is not None and parse_cfg(cfg) == RECOMMENDED:
        chosen = resolve_cfg(scales[scales["model"].isin(own["model"])], cfg)
    else:
        chosen = resolve_cfg(own, cfg)
    return [r for r in latest if np.isclose(float(r["cfg"]), chosen[r["model"]])]


def model_panels(rows: Sequence[Mapping]) -> list[Panel]:
    """One panel per model distribution row (``model, style, cfg, p, n_images, n_excluded, groups``)."""
    panels = []
    for row in sorted(rows, key=lambda r: (r["model"], r["style"], r["cfg"])):
        colors, counts = strip_of(row.get("groups"))
        title = (
            f"{row['model']} · {row['style']} · cfg {float(row['cfg']):g} "
            f"({counted(row['n_images'], 'image')}, {row['n_excluded']} excluded)"
        )
        panels.append(Panel(title, np.asarray(row["p"], dtype=np.float64), colors, counts))
    return panels


def distributions_figure(panels: Sequence[Panel], *, columns: int = 2) -> go.Figure:
    """UW-71 bar charts of every panel in a grid, all on the same probability axis.

    Returns
    -------
    plotly.graph_objects.Figure
        Trace i is `evaluation.analysis.figures.distribution_bar` of ``panels[i].p`` (palette
        colors, hover with index, hex, L*a*b* and probability); every y axis spans
        [0, 1.05 x the largest probability of all panels]; ticks every 10 color indices;
        the left column's y axes and each column's lowest x axis are titled; panel titles are
        wrapped to `CHART_TITLE_CHARS` characters, with room above each row for its tallest.
    """
    if not panels:
        raise ValueError("`panels` is empty: nothing to draw")
    rows = math.ceil(len(panels) / columns)
    titles = [figures.wrapped(p.title, CHART_TITLE_CHARS) for p in panels]
    title_px = [
        TITLE_LINE_PX * max(map(figures.line_count, titles[r * columns : (r + 1) * columns]))
        for r in range(rows)
    ]
    # Every gap is as tall as the tallest row's titles: plotly spaces all rows evenly.
    gap_px = CHART_TICKS_PX + max([*title_px[1:], TITLE_LINE_PX])
    plot_px = rows * CHART_ROW_PX + (rows - 1) * gap_px
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=titles,
        vertical_spacing=gap_px / plot_px if rows > 1 else 0,
        horizontal_spacing=0.08,
    )
    fig.update_annotations(font=TITLE_FONT)
    top = 1.05 * max(float(p.p.max()) for p in panels)
    for i, panel in enumerate(panels):
        row, col = i // columns + 1, i % columns + 1
        bars = figures.distribution_bar(panel.p).data[0]
        bars.name = panel.title  # what a screen reader calls the panel (no legend is shown)
        fig.add_trace(bars, row=row, col=col)
        if i + columns >= len(panels):  # nothing below: this panel carries its column's x title
            fig.update_xaxes(title={"text": "UW-71 color index", "standoff": 4}, row=row, col=col)
    fig.update_yaxes(range=[0, top])
    fig.update_yaxes(title="probability", col=1)
    fig.update_xaxes(range=[-0.5, 70.5], dtick=10)
    margin = {**figures.LAYOUT["margin"], "t": title_px[0] + 14 + MODEBAR_PX, "b": 50}
    fig.update_layout(
        height=plot_px + margin["t"] + margin["b"],
        showlegend=False,
        bargap=0.05,
        template=figures.LAYOUT["template"],
        margin=margin,
    )
    return fig


def strips_figure(panels: Sequence[Panel]) -> go.Figure:
    """The dominant-color strip (Figure 3) of every panel that has groups, one row each.

    Swatches are labelled with their sample counts; a panel without groups (a reference
    set of ratings, or a distribution imported or stored without them) gets a row that says so, anchored to that row's own
    axes (an empty, invisible bar trace makes the renderer create them: plotly.js drops
    axes without traces and would place the note on another row).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per panel, on row i's axes; swatches `STRIP_ROW_PX` pixels tall, with
        room between rows for the panel titles, wrapped to `STRIP_TITLE_CHARS` characters.
    """
    if not panels:
        raise ValueError("`panels` is empty: nothing to draw")
    n = len(panels)
    titles = [figures.wrapped(p.title, STRIP_TITLE_CHARS) for p in panels]
    gap_px = TITLE_LINE_PX * max(map(figures.line_count, titles)) + 14
    plot_px = n * STRIP_ROW_PX + (n - 1) * gap_px
    fig = make_subplots(
        rows=n,
        cols=1,
        subplot_titles=titles,
        vertical_spacing=gap_px / plot_px if n > 1 else 0,
    )
    fig.update_annotations(font=TITLE_FONT)
    for i, panel in enumerate(panels, start=1):
        if panel.colors is None:
            fig.add_trace(go.Bar(x=[], y=[], hoverinfo="skip", name=panel.title), row=i, col=1)
            fig.add_annotation(
                text=figures.wrapped(NO_SAMPLES_NOTE, STRIP_TITLE_CHARS),
                showarrow=False,
                font=TITLE_FONT,
                xref="x domain",
                yref="y domain",
                x=0.5,
                y=0.5,
                row=i,
                col=1,
            )
        else:
            strip = figures.dominant_strip(panel.colors, panel.counts).data[0]
            strip.name = panel.title
            fig.add_trace(strip, row=i, col=1)
    fig.update_xaxes(showticklabels=False, showgrid=False)
    fig.update_yaxes(visible=False, range=[0, 1], fixedrange=True)
    # The x title is wrapped as the panel titles are (it was cut at the left on a phone).
    axis_title = figures.wrapped(STRIP_AXIS_TITLE, STRIP_TITLE_CHARS)
    margin = {
        "l": 10,
        "r": 10,
        "t": gap_px + MODEBAR_PX,
        "b": 30 + TITLE_LINE_PX * (figures.line_count(axis_title) - 1),
    }
    fig.update_layout(
        height=plot_px + margin["t"] + margin["b"],
        margin=margin,
        showlegend=False,
        bargap=0.04,
        template=figures.LAYOUT["template"],
        uniformtext={"minsize": figures.STRIP_MIN_FONT, "mode": "show"},
    )
    fig.update_xaxes(title={"text": axis_title, "standoff": 4}, row=n, col=1)
    return fig


def concept_metrics(
    concept: str, human_p: np.ndarray, rows: Sequence[Mapping], concepts: Sequence[Concept]
) -> pd.DataFrame:
    """PCC, EMD, ED, DCA, the dominant colors and ΔHue of each model row of `concept` against `human_p`.

    Returns
    -------
    pandas.DataFrame
        Columns `METRIC_COLUMNS`, one row per model row with a distribution; each dominant
        UW-71 bin is followed by its level 3 name and basic term
        (`evaluation.color.naming.with_bin_names`).
    """
    long = score([r for r in rows if r["concept"] == concept], {concept: human_p}, concepts)
    return with_bin_names(with_dca(long), DOMINANT_COLUMNS)[METRIC_COLUMNS].reset_index(drop=True)


def variant_shifts(
    base: str, concepts: Sequence[Concept], human: Mapping[str, np.ndarray], rows: Sequence[Mapping]
) -> pd.DataFrame:
    """Shift EMD from base concept `base` to each of its variants, for people and models.

    Parameters
    ----------
    base : str
        A base concept key, e.g. ``"apple"``.
    human : Mapping of str to ndarray
        Human distributions by concept key (the base and variants it covers).
    rows : sequence of Mapping
        Model distribution rows at one scale per model (`rows_at_cfg`).

    Returns
    -------
    pandas.DataFrame
        Columns ``concept, modifier_type, source, shift``: source ``"human"`` or
        ``"<model> · <style>"``; shift in CIELAB units, for every variant whose base and
        variant distributions both exist for that source.
    """
    if not any(c.key == base and c.modifier_type == "original" for c in concepts):
        raise ValueError(f"`base` must be a base concept key such as 'apple', got {shown(base)}")
    variants = [c for c in concepts if c.base == base and c.modifier_type != "original"]
    out = [
        (c.key, c.modifier_type, HUMAN, metrics.shift(human[base], human[c.key]))
        for c in variants
        if base in human and c.key in human
    ]
    by_source: dict[str, dict[str, np.ndarray]] = {}
    for row in rows:
        by_source.setdefault(f"{row['model']} · {row['style']}", {})[row["concept"]] = row["p"]
    for source, ps in sorted(by_source.items()):
        out += [
            (c.key, c.modifier_type, source, metrics.shift(ps[base], ps[c.key]))
            for c in variants
            if base in ps and c.key in ps
        ]
    return pd.DataFrame(out, columns=["concept", "modifier_type", "source", "shift"])


def variant_shift_table(shifts: pd.DataFrame) -> pd.DataFrame:
    """`variant_shifts` as one row per variant and one column per source (human first)."""
    if shifts.empty:
        return pd.DataFrame(columns=["concept", "modifier_type", HUMAN])
    wide = shifts.pivot_table(
        index=["concept", "modifier_type"], columns="source", values="shift", sort=False
    )
    ordered = [HUMAN] * (HUMAN in wide.columns) + sorted(c for c in wide.columns if c != HUMAN)
    return wide[ordered].reset_index().rename_axis(columns=None)


def shift_caption(resampling: bootstrap.Resampling | None) -> str:
    """What the error bars of `variant_shift_figure` are, for its caption (None: no intervals)."""
    if resampling is None:
        return "No intervals: only the designers' P_H has colorings to resample."
    return (
        f"Error bars on people's shifts: {resampling.ci:.0%} percentile intervals from "
        f"{resampling.n_resamples} bootstrap resamples of each concept's colorings, seed {resampling.seed}."
    )


def with_human_intervals(shifts: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """`shifts` with ``shift_lo``/``shift_hi`` on the people's rows from `intervals`
    (`evaluation.analysis.bootstrap.shift_intervals`); NaN on the models' rows and on
    variants without an interval."""
    human = intervals.set_index("concept")
    is_human = shifts["source"] == HUMAN
    return shifts.assign(
        shift_lo=shifts["concept"].map(human["shift_lo"]).where(is_human).astype(float),
        shift_hi=shifts["concept"].map(human["shift_hi"]).where(is_human).astype(float),
    )


def variant_shift_figure(shifts: pd.DataFrame, *, title: str = "", caption: str = "") -> go.Figure:
    """Grouped bars: x = variant, one bar trace per source, y = shift EMD (hover: concept, source, value).

    The legend names the sources even when there is only one, and people's bars are grey
    (`HUMAN_COLOR`) so that they read as the baseline next to the models' colors. Where
    `shifts` has ``shift_lo``/``shift_hi`` (`with_human_intervals`), the bars with an
    interval get error bars; `caption`, which should say how they were drawn, is written
    under the title.
    """
    fig = go.Figure()
    for source, part in shifts.groupby("source", sort=False):
        has_interval = "shift_lo" in part and part["shift_lo"].notna().any()
        fig.add_trace(
            go.Bar(
                x=part["concept"],
                y=part["shift"],
                name=source,
                customdata=part[["modifier_type"]].to_numpy(),
                marker_color=HUMAN_COLOR if source == HUMAN else None,
                error_y=figures.error_bars(part, "shift") if has_interval else None,
                hovertemplate=f"%{{x}} (%{{customdata[0]}})<br>{source}<br>shift EMD %{{y:.2f}}<extra></extra>",
            )
        )
    heading = f"{title}<br><sup>{caption}</sup>" if caption else title
    fig.update_layout(
        **figures.titled(heading),
        barmode="group",
        yaxis_title="shift EMD from the base concept",
        xaxis_title="variant",
        showlegend=True,
        legend_title_text="source",
        **figures.LAYOUT,
    )
    return fig
