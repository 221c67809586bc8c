"""Plotly figure builders for the QC, study and research tabs.

Every builder takes plain arrays or the frames of `evaluation.analysis.tables`,
`evaluation.analysis.judgments` and `annotation.qc.stats` and returns a `plotly.graph_objects.Figure`;
nothing here reads files or touches a database. Hover texts show the underlying
numbers, and the figure data are the inputs unchanged, so exports match the tables.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from evaluation.analysis.tables import AXIS_UNITS, METRICS, MODIFIER_LABELS, SHIFT_COLUMNS, require_columns
from evaluation.color.naming import name_lab, name_srgb, names_of_uw71
from evaluation.color.palette import N_BINS, Palette, load_uw71
from evaluation.color.wheel import relation

BAR_OUTLINE = "#9e9e9e"  # keeps white and very light bars visible on a white background
LAYOUT = {"template": "plotly_white", "margin": {"l": 50, "r": 20, "t": 50, "b": 40}}
STRIP_SWATCH_PX = 110  # swatch height of a dominant-color strip, in CSS pixels
STRIP_FONT = {"size": 15}  # sample counts on the swatches
STRIP_MIN_FONT = 12  # counts never shrink below this (px), even with ~20 narrow swatches
WEBGL_POINTS = 1000
SWEEP_PANEL_PX = 260  # height of one Figure 5 panel, CSS pixels
SWEEP_GAP_PX = 90  # between its panels: tick labels, the x title and the next panel's title
NOTE_CHARS = 44  # a note across an empty plot is wrapped to this: it fits a 390-px phone
"""From this many points a scatter is drawn with WebGL (``Scattergl``), one canvas, instead of
one SVG element per point: at the full study's size Figure 4 (right) has 6,384 points, three
quarters of the Leaderboards tab's page, and rendering them as SVG held the browser for ~1 s."""


def titled(title: str) -> dict:
    """Layout keywords for `title`: none at all when it is empty.

    Gradio's ``gr.Plot`` raises the top margin of any figure whose layout has a
    ``title`` key to 100 px, even an empty one, which squashes short figures.
    """
    return {"title": title} if title else {}


def wrapped(text: str, width: int) -> str:
    """`text` in lines of at most `width` characters, joined by ``<br>`` (plotly's line break).

    Lines break at spaces, and inside a longer word after a ``/`` or ``-`` (a hub id such as
    ``stabilityai/stable-diffusion-xl-base-1.0``); a piece longer than `width` stays whole.
    Plotly does not wrap titles itself: on a phone, side-by-side panel titles ran into each other.
    """
    lines = [""]
    for word in text.split():
        pieces = [p for p in re.split(r"(?<=[/-])", word) if p] if len(word) > width else [word]
        for i, piece in enumerate(pieces):
            joined = lines[-1] + (" " if i == 0 and lines[-1] else "") + piece
            if len(joined) <= width or not lines[-1]:
                lines[-1] = joined
            else:
                lines.append(piece)
    return "<br>".join(lines)


def line_count(text: str) -> int:
    """How many lines plotly draws `text` on (its ``<br>`` breaks plus one)."""
    return text.count("<br>") + 1


def distribution_bar(
    p, *, palette: Palette | None = None, title: str = "", y_max: float | None = None
) -> go.Figure:
    """A UW-71 distribution as bars drawn in the palette's own colors.

    Parameters
    ----------
    p : array_like, shape (71,)
        Probabilities in ``color_index`` order, each in [0, 1].
    palette : Palette, optional
        Defaults to `evaluation.color.palette.load_uw71()`.
    title : str
        Figure title.
    y_max : float, optional
        Fix the y-axis to [0, y_max] so that several charts share one scale.

    Returns
    -------
    plotly.graph_objects.Figure
        One `go.Bar` trace: x = color index 0..70, y = `p`, marker colors = palette hex;
        hover shows index, hex, the color's names (ISCC-NBS level 3 and basic term, from
        `evaluation.color.naming`), L*a*b* and probability. ``customdata`` rows are
        ``[hex, L*, a*, b*, level 3 name, basic term]``.

    Raises
    ------
    ValueError
        If `p` does not have shape (71,) or holds values outside [0, 1].
    """
    values = np.asarray(p, dtype=float)
    if values.shape != (N_BINS,) or not np.all((values >= 0) & (values <= 1)):
        raise ValueError(f"`p` must have shape ({N_BINS},) with values in [0, 1], got shape {values.shape}")
    pal = palette or load_uw71()
    if palette is None:  # UW-71's own names (its greys named without a tint)
        uw71 = names_of_uw71()
        l3, basic = uw71["iscc_nbs_l3"].to_numpy(), uw71["basic_term"].to_numpy()
    else:
        names = name_lab(pal.lab)
        l3, basic = names.l3, names.basic
    custom = [[h, *np.round(lab, 1), n, b] for h, lab, n, b in zip(pal.hex, pal.lab, l3, basic)]
    fig = go.Figure(
        go.Bar(
            x=np.arange(N_BINS),
            y=values,
            marker={"color": list(pal.hex), "line": {"color": BAR_OUTLINE, "width": 0.5}},
            customdata=custom,
            hovertemplate="color %{x} %{customdata[0]}<br>%{customdata[4]} (%{customdata[5]})"
            "<br>L*a*b* (%{customdata[1]}, %{customdata[2]}, %{customdata[3]})"
            "<br>p = %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(bargap=0.05, showlegend=False, **titled(title), **LAYOUT)
    fig.update_xaxes(title="UW-71 color index", range=[-0.5, N_BINS - 0.5])
    fig.update_yaxes(title="probability", range=None if y_max is None else [0, y_max])
    return fig


def _to_hex(colors) -> list[str]:
    if len(colors) and isinstance(colors[0], str):
        return [c.lower() for c in colors]
    arr = np.asarray(colors)
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.dtype != np.uint8:
        raise ValueError(
            f"`colors` must be hex strings or uint8 sRGB of shape (n, 3), got {arr.dtype} {arr.shape}"
        )
    return ["#{:02x}{:02x}{:02x}".format(*row) for row in arr]


def dominant_strip(colors, counts, *, title: str = "", unit: str = "samples") -> go.Figure:
    """Dominant colors as swatches labelled with their sample counts (Figure 3).

    Parameters
    ----------
    colors : sequence of str or array_like of uint8, shape (n, 3)
        One dominant color per visual group, as ``"#rrggbb"`` or sRGB [0, 255].
    counts : sequence of int, length n
        Images (or colorings) in each group.
    title : str
        Figure title.
    unit : str
        What the counts count (``"colorings"``, ``"images"``); names the x axis and
        the hover text.

    Returns
    -------
    plotly.graph_objects.Figure
        One `go.Bar` trace of unit-height swatches; marker colors = the colors as hex,
        text = the counts in `STRIP_FONT` type (never below `STRIP_MIN_FONT` px, in a
        color that contrasts with the swatch); the height leaves the swatches
        `STRIP_SWATCH_PX` pixels tall whatever the title. Hover shows hex, the color's
        ISCC-NBS level 3 name and basic term, and the count (``customdata`` rows
        ``[hex, count, level 3 name, basic term]``).
    """
    hexes = _to_hex(colors)
    counts = [int(c) for c in counts]
    if len(hexes) != len(counts):
        raise ValueError(f"`colors` and `counts` must have equal lengths, got {len(hexes)} and {len(counts)}")
    rgb = np.array([[int(h[i : i + 2], 16) for i in (1, 3, 5)] for h in hexes], dtype=np.uint8).reshape(-1, 3)
    names = name_srgb(rgb)
    fig = go.Figure(
        go.Bar(
            x=[str(i) for i in range(len(hexes))],
            y=[1] * len(hexes),
            text=[str(c) for c in counts],
            textposition="inside",
            insidetextanchor="middle",
            textangle=0,
            textfont=STRIP_FONT,
            marker={"color": hexes, "line": {"color": BAR_OUTLINE, "width": 0.5}},
            customdata=[[h, c, n, b] for h, c, n, b in zip(hexes, counts, names.l3, names.basic)],
            hovertemplate=f"%{{customdata[0]}} %{{customdata[2]}} (%{{customdata[3]}})"
            f"<br>%{{customdata[1]}} {unit}<extra></extra>",
            # what a screen reader says of the swatches (`app.common.JS` reads ``meta.alt``)
            meta={
                "alt": ", ".join(f"{n} · {b}: {c} {unit}" for c, n, b in zip(counts, names.l3, names.basic))
            },
        )
    )
    margin = {"l": 10, "r": 10, "t": 50 if title else 30, "b": 30}  # 30: room for gr.Plot's label
    fig.update_layout(
        bargap=0.04,
        showlegend=False,
        template=LAYOUT["template"],
        margin=margin,
        **titled(title),
        height=STRIP_SWATCH_PX + margin["t"] + margin["b"],
        uniformtext={"minsize": STRIP_MIN_FONT, "mode": "show"},
    )
    fig.update_xaxes(showticklabels=False, title={"text": f"number on each color: {unit}", "standoff": 4})
    fig.update_yaxes(visible=False, range=[0, 1], fixedrange=True)
    return fig


def group_strip(groups, *, title: str = "", unit: str = "images") -> go.Figure:
    """Figure 3's strip from extraction groups: each group's heaviest color and its size.

    Parameters
    ----------
    groups : sequence of evaluation.color.extraction.ColorGroup
        ``ConceptDistribution.groups``: each with ``rgb`` (k, 3) uint8, heaviest first,
        and ``n_images``.
    title : str
        Figure title.
    unit : str
        What ``n_images`` counts, see `dominant_strip`.

    Returns
    -------
    plotly.graph_objects.Figure
        See `dominant_strip`; swatch i is ``groups[i].rgb[0]`` labelled
        ``groups[i].n_images``.
    """
    if len(groups) == 0:
        raise ValueError("`groups` is empty")
    colors = np.stack([np.asarray(g.rgb, dtype=np.uint8)[0] for g in groups])
    return dominant_strip(colors, [g.n_images for g in groups], title=title, unit=unit)


def error_bars(part: pd.DataFrame, column: str) -> dict | None:
    """Plotly ``error_y`` of `column` from its ``_lo``/``_hi`` columns (None without them)."""
    if f"{column}_lo" not in part:
        return None
    y = part[column].to_numpy(float)
    return {
        "type": "data",
        "symmetric": False,
        "array": part[f"{column}_hi"].to_numpy(float) - y,
        "arrayminus": y - part[f"{column}_lo"].to_numpy(float),
    }


def cfg_sweep_figure(sweep: pd.DataFrame, metric_names=("emd", "pcc")) -> go.Figure:
    """Metric against guidance scale, one line per model (Figure 5).

    Parameters
    ----------
    sweep : pandas.DataFrame
        Output of `evaluation.analysis.tables.cfg_sweep` (columns ``model, style, cfg`` and the
        metrics, and ``n_concepts``), possibly filtered to one style.
    metric_names : sequence of str
        One panel per metric.

    Returns
    -------
    plotly.graph_objects.Figure
        Per panel one scatter-line trace per (model, style), x = cfg, y = metric mean,
        with error bars from ``<metric>_lo``/``<metric>_hi`` where `sweep` has them
        (`evaluation.analysis.uncertainty.sweep`). With ``n_concepts``, each point's hover
        text gives its concept count, and where the points of one line average different
        numbers of concepts, the title says so (`_note_uneven_concepts`): such a line
        mixes concept sets, not only guidance scales.
    """
    require_columns(sweep, ("model", "style", "cfg", *metric_names), "sweep")
    several_styles = sweep["style"].nunique() > 1
    counted = "n_concepts" in sweep
    titles = [f"{METRICS[m][0]} {'↑' if METRICS[m][1] else '↓'}" for m in metric_names]
    # One panel above the other, the legend under them: side by side on a phone, the second
    # panel's axis title ran into the first panel and the legend covered the lines (probe 144).
    n = len(metric_names)
    plot_px = n * SWEEP_PANEL_PX + (n - 1) * SWEEP_GAP_PX
    fig = make_subplots(
        rows=n, cols=1, subplot_titles=titles, vertical_spacing=SWEEP_GAP_PX / plot_px if n > 1 else 0
    )
    # One color per line in every panel, as the legend (drawn from the first) says: left to
    # Plotly, each panel's traces would take the next colors of the cycle.
    colorway = pio.templates[LAYOUT["template"]].layout.colorway
    lines = list(sweep.sort_values("cfg").groupby(["model", "style"], sort=True))
    names = [f"{model} · {style}" if several_styles else str(model) for (model, style), _ in lines]
    count = "<br>%{customdata} concepts" if counted else ""
    for col, metric in enumerate(metric_names, start=1):
        for i, (name, (_, part)) in enumerate(zip(names, lines)):
            color = colorway[i % len(colorway)]
            fig.add_trace(
                go.Scatter(
                    x=part["cfg"],
                    y=part[metric],
                    mode="lines+markers",
                    line={"color": color},
                    marker={"color": color},
                    error_y=error_bars(part, metric),
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    customdata=part["n_concepts"].to_numpy() if counted else None,
                    hovertemplate=f"{name}<br>cfg %{{x}}<br>{METRICS[metric][0]} %{{y:.3f}}{count}<extra></extra>",
                ),
                row=col,
                col=1,
            )
        fig.update_xaxes(title={"text": "CFG scale", "standoff": 4}, row=col, col=1)
        unit = f" ({AXIS_UNITS[metric]})" if metric in AXIS_UNITS else ""
        fig.update_yaxes(title=f"mean {METRICS[metric][0]}{unit}", row=col, col=1)
    legend_px = 24 * math.ceil(len(lines) / 2)  # two names a row on a phone, more on a wide screen
    margin = {**LAYOUT["margin"], "b": 60 + legend_px}
    fig.update_layout(
        template=LAYOUT["template"],
        margin=margin,
        height=plot_px + margin["t"] + margin["b"],
        legend={"orientation": "h", "yanchor": "top", "y": -(54 / plot_px), "x": 0},
    )
    if counted:
        _note_uneven_concepts(fig, names, [part for _, part in lines])
    return fig


def _note_uneven_concepts(fig: go.Figure, names: list[str], parts: list[pd.DataFrame]) -> None:
    """Title `fig` with the lines whose points average different numbers of concepts, e.g.
    "Points average different concept sets: m (n = 4 at 2, 6 at 7.5)", one line of text per
    such line of the plot; nothing when none do."""
    uneven = [
        f"{name} (n = {', '.join(f'{n} at {cfg:g}' for cfg, n in zip(part['cfg'], part['n_concepts']))})"
        for name, part in zip(names, parts)
        if part["n_concepts"].nunique() > 1
    ]
    if uneven:
        text = (
            "Points average different concept sets:"
            + ("<br>" if len(uneven) > 1 else " ")
            + "<br>".join(wrapped(line, NOTE_CHARS) for line in uneven)
        )
        # From the top of the figure down, above the first panel's title (24 px).
        top = 14 + 18 * line_count(text) + 30
        grown = top - fig.layout.margin.t
        fig.update_layout(
            title={
                "text": text,
                "font": {"size": 13},
                "y": 1,
                "yref": "container",
                "yanchor": "top",
                "pad": {"t": 10},
            },
            margin={"t": top},
            height=fig.layout.height + grown if fig.layout.height else None,
        )


def sensitivity_bars(sensitivity: pd.DataFrame, *, group: str = "modifier_type") -> go.Figure:
    """Model shift ÷ human shift per model, grouped bars (Figure 4, left).

    Parameters
    ----------
    sensitivity : pandas.DataFrame
        Output of `evaluation.analysis.tables.sensitivity` with ``by=("model", group)``.
    group : str
        The second grouping column: one bar trace per value (``modifier_type`` or
        ``style``).

    Returns
    -------
    plotly.graph_objects.Figure
        One `go.Bar` trace per group value, x = model, y = ratio (error bars from
        ``ratio_lo``/``ratio_hi`` where present), and a dashed line at 1 (the human
        baseline). Where a ratio is undefined because people's shift is 0 (no bar), an
        annotation says so: across the plot when no bar is left, else above it, naming
        the groups and models.
    """
    require_columns(sensitivity, ("model", group, "ratio", "model_shift", "human_shift"), "sensitivity")
    fig = go.Figure()
    for value, part in sensitivity.groupby(group, sort=True):
        fig.add_trace(
            go.Bar(
                x=part["model"],
                y=part["ratio"],
                error_y=error_bars(part, "ratio"),
                name=MODIFIER_LABELS.get(value, str(value)),
                customdata=part[["model_shift", "human_shift"]].to_numpy(),
                hovertemplate="%{x}<br>ratio %{y:.3f}<br>model shift %{customdata[0]:.2f}"
                "<br>human shift %{customdata[1]:.2f}<extra></extra>",
            )
        )
    fig.add_hline(y=1.0, line_dash="dash", annotation_text="human baseline")
    fig.update_layout(
        barmode="group",
        xaxis_title="model",
        yaxis_title="model shift ÷ human shift",
        legend_title_text="modifier",
        **LAYOUT,
    )
    undefined = sensitivity[sensitivity["ratio"].isna() & (sensitivity["human_shift"] == 0)]
    if len(undefined):
        _note_no_human_shift(fig, undefined, group, every=len(undefined) == len(sensitivity))
    return fig


def noted(fig: go.Figure, text: str) -> go.Figure:
    """`fig` with `text` written across its (empty) plot area, `wrapped` at `NOTE_CHARS` characters."""
    return fig.add_annotation(
        text=wrapped(text, NOTE_CHARS),
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 13},
        bgcolor="rgba(255, 255, 255, 0.9)",
    )


def _note_no_human_shift(fig: go.Figure, undefined: pd.DataFrame, group: str, *, every: bool) -> None:
    """Say on `fig` which bars are missing because people's shift is 0: across the plot area
    when no bar is left (`every`), else above it."""
    if every:
        text = (
            "No bars: people's shift is 0 (every variant was colored as its base),"
            "<br>so model shift ÷ human shift is undefined."
        )
        position = {"y": 0.5, "yanchor": "middle"}
    else:
        parts = [
            f"{MODIFIER_LABELS.get(value, str(value))} ({', '.join(map(str, part['model']))})"
            for value, part in undefined.groupby(group, sort=True)
        ]
        text = "No bar where people's shift is 0 (ratio undefined): " + "; ".join(parts)
        position = {"y": 1.0, "yanchor": "bottom"}
    fig.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=0.5,
        showarrow=False,
        bgcolor="rgba(255, 255, 255, 0.9)",
        **position,
    )


def shift_scatter(shifts: pd.DataFrame) -> go.Figure:
    """Per-concept model shift against human shift, one trace per model (Figure 4, right).

    Parameters
    ----------
    shifts : pandas.DataFrame
        Output of `evaluation.analysis.tables.concept_shifts`, possibly filtered.

    Returns
    -------
    plotly.graph_objects.Figure
        Per (model, style) a marker trace, x = human shift, y = model shift, hover
        shows the concept and both values; a dotted y = x line. From `WEBGL_POINTS`
        points on, the marker traces are ``Scattergl``.
    """
    require_columns(shifts, SHIFT_COLUMNS, "shifts")
    several_styles = shifts["style"].nunique() > 1
    points = go.Scattergl if len(shifts) >= WEBGL_POINTS else go.Scatter
    fig = go.Figure()
    for (model, style), part in shifts.groupby(["model", "style"], sort=True):
        name = f"{model} · {style}" if several_styles else str(model)
        fig.add_trace(
            points(
                x=part["human_shift"],
                y=part["model_shift"],
                mode="markers",
                name=name,
                customdata=part[["concept", "modifier_type"]].to_numpy(),
                hovertemplate="%{customdata[0]} (%{customdata[1]})<br>human %{x:.2f}<br>"
                f"{name} %{{y:.2f}}<extra></extra>",
            )
        )
    top = float(np.nanmax(shifts[["human_shift", "model_shift"]].to_numpy())) if len(shifts) else 1.0
    fig.add_trace(
        go.Scatter(
            x=[0, top],
            y=[0, top],
            mode="lines",
            name="y = x",
            line={"dash": "dot", "color": BAR_OUTLINE},
            hoverinfo="skip",
        )
    )
    fig.update_layout(xaxis_title="human shift (EMD)", yaxis_title="model shift (EMD)", **LAYOUT)
    return fig


def consistency_histogram(scores: pd.Series, flags: pd.Series | None = None, *, nbins: int = 30) -> go.Figure:
    """Histogram of per-concept consistency scores with the high-variance cutoff.

    Parameters
    ----------
    scores : pandas.Series
        Output of `annotation.qc.stats.consistency_scores`.
    flags : pandas.Series of bool, optional
        Output of `annotation.qc.stats.high_variance`; a dashed line marks the lowest flagged
        score.
    nbins : int
        Approximate number of bins.

    Returns
    -------
    plotly.graph_objects.Figure
        One `go.Histogram` trace whose x are the scores.
    """
    values = scores.to_numpy(float)
    marked_any = flags is not None and bool(flags.any())
    cutoff = float(scores[flags.reindex(scores.index, fill_value=False)].min()) if marked_any else None
    edges = _bin_edges(values, nbins, cutoff)
    fig = go.Figure(
        go.Histogram(
            x=values,
            xbins={"start": edges[0], "end": edges[-1], "size": edges[1] - edges[0]},
            autobinx=False,
            name="concepts",
            hovertemplate="EMD %{x}<br>%{y} concepts<extra></extra>",
        )
    )
    counts, _ = np.histogram(values, edges)
    if len(values) and counts.max() <= 10:  # whole concepts: no ticks at 0.2, 0.4, …
        fig.update_yaxes(tick0=0, dtick=1)
    if len(values) and values.min() == values.max():  # one bar would fill the whole plot
        fig.update_xaxes(range=[edges[0] - 4 * (edges[1] - edges[0]), edges[-1] + 4 * (edges[1] - edges[0])])
    if marked_any:
        # Counts, not a share: with few concepts ranked, a share of 10 % still marks one of
        # two, and "top 50 %" read as a contradiction of the 0.1 typed beside the chart.
        marked = int(flags.sum())
        # Concepts of the cutoff's score left unmarked: "1 of 3, EMD ≥ 79.77" with all three
        # at 79.77 read as a contradiction (outside probe 142).
        tied = int((scores.to_numpy(float) >= cutoff).sum()) - marked
        # In lines, left of the line (the marked concepts are the right tail): in one line
        # right of it, a phone showed "high variance: 128 of" and cut the rest (outside probe 136).
        fig.add_vline(
            x=cutoff,
            line_dash="dash",
            annotation_text=f"high variance:<br>{marked:,} of {len(flags):,} concepts,<br>EMD ≥ {cutoff:.2f}"
            + (f"<br>({tied:,} more at it: ties<br>go by concept name)" if tied else ""),
            annotation_position="top left",
            annotation_align="right",
            annotation_bgcolor="rgba(255, 255, 255, 0.8)",  # over the bars it crosses
        )
    fig.update_layout(xaxis_title="mean pairwise EMD (Eq. 6)", yaxis_title="concepts", **LAYOUT)
    return fig


def _bin_edges(values: np.ndarray, nbins: int, cutoff: float | None) -> np.ndarray:
    """About `nbins` equal bins over `values`, one of which starts at `cutoff` (a hair
    below it, so that a score equal to it counts in that bin): a bar never straddles the
    high-variance line (outside probe 215: the cutoff's own concept drew mostly left of it).

    Returns
    -------
    ndarray, shape (n + 1,)
        Bin edges, increasing, evenly spaced (EMD units).
    """
    if not len(values):
        return np.array([0.0, 1.0])
    low, high = float(values.min()), float(values.max())
    width = (high - low) / nbins if high > low else max(abs(high) * 0.02, 0.01)
    anchor = low if cutoff is None else cutoff - width * 1e-6
    start = anchor - np.ceil((anchor - low) / width + 1e-9) * width if anchor > low else anchor
    count = int(np.floor((high - start) / width)) + 1
    return start + width * np.arange(count + 1)


def table3_figure(validation: pd.DataFrame) -> go.Figure:
    """Pearson, Spearman and agreement per metric with bootstrap intervals (Table 3).

    Parameters
    ----------
    validation : pandas.DataFrame
        Output of `evaluation.analysis.judgments.metric_validation`.

    Returns
    -------
    plotly.graph_objects.Figure
        Three `go.Bar` traces (Pearson, Spearman, Agreement as a fraction), x = metric
        label, error bars from the ``_lo``/``_hi`` columns.
    """
    fig = go.Figure()
    for key, name in (
        ("pearson", "Pearson r"),
        ("spearman", "Spearman ρ"),
        ("agreement", "Agreement (fraction)"),
    ):
        require_columns(validation, ("label", key, f"{key}_lo", f"{key}_hi"), "validation")
        y = validation[key].to_numpy(float)
        fig.add_trace(
            go.Bar(
                x=validation["label"],
                y=y,
                name=name,
                error_y={
                    "type": "data",
                    "array": validation[f"{key}_hi"].to_numpy(float) - y,
                    "arrayminus": y - validation[f"{key}_lo"].to_numpy(float),
                },
                hovertemplate=f"%{{x}}<br>{name} %{{y:.3f}}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group", xaxis_title="metric", yaxis_title="alignment with human judgment", **LAYOUT
    )
    return fig


def judge_failure_heatmap(matrix: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Where a color judge fails: a true term x foil term heatmap of failure rates.

    Parameters
    ----------
    matrix : pandas.DataFrame
        Output of `evaluation.judges.accuracy.failure_matrix`: index ``true_term``, columns
        ``foil_term``, values 1 - pair-wise accuracy in [0, 1] (NaN without pairs).
    title : str
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        One `go.Heatmap`: z = `matrix` (unchanged), x = foil terms, y = true terms (top to
        bottom in the matrix's order), color scale fixed to [0, 1]; each cell is marked
        ``~`` (adjacent) or ``⚡`` (complementary) on the color wheel
        (`evaluation.color.wheel`), and its hover shows both terms, the relation and the
        failure rate.
    """
    if list(matrix.index) == [] or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"`matrix` must be a square true term x foil term frame, got shape {matrix.shape}")
    marks = {"adjacent": "~", "complementary": "⚡", "other": ""}
    relations = [[relation(t, f) if t != f else "" for f in matrix.columns] for t in matrix.index]
    fig = go.Figure(
        go.Heatmap(
            z=matrix.to_numpy(float),
            x=list(matrix.columns),
            y=list(matrix.index),
            zmin=0.0,
            zmax=1.0,
            colorscale="Reds",
            colorbar={"title": "failure rate"},
            text=[[marks.get(r, "") for r in row] for row in relations],
            texttemplate="%{text}",
            customdata=relations,
            hovertemplate="%{y} described as %{x}<br>%{customdata}<br>failure rate %{z:.2f}<extra></extra>",
        )
    )
    fig.update_layout(**titled(title), **LAYOUT)
    fig.update_xaxes(title="foil color")
    fig.update_yaxes(title="true color", autorange="reversed")
    return fig
