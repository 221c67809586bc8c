"""Plotly figures of the explicit-color mode (GenColorBench Figures 2, 3 and 5, and a confusion map).

Every builder takes a frame of :mod:`evaluation.explicit.tables` and returns a
``plotly.graph_objects.Figure``; nothing here reads files or a database, and the figure data
are the table's numbers unchanged, so exports match the tables.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from evaluation.analysis.figures import BAR_OUTLINE, LAYOUT, line_count, titled, wrapped
from evaluation.color.systems import load_system
from storage.shown import shown

NAME_CHARS = 18  # a color name on the confusion map's y axis is wrapped to this (a 390-px phone)
NAME_LINE_PX = 16  # height of one line of such a name, CSS pixels (plotly's 12-px tick font)
NAME_CHAR_PX = 7  # width of one character of an x label standing on end, CSS pixels


def accuracy_bars(table: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Grouped bars of an accuracy table: one bar group per column, one bar per model.

    Parameters
    ----------
    table : DataFrame
        Models x columns in percent, as :func:`evaluation.explicit.tables.accuracy_table`
        (tasks, or ``columns="category"`` for Figure 2) or ``group_accuracy`` (Figure 5).
    """
    figure = go.Figure(
        [
            go.Bar(
                name=str(model),
                x=[str(c) for c in table.columns],
                y=table.loc[model].tolist(),
                hovertemplate="%{x}: %{y:.2f}%<extra>" + str(model) + "</extra>",
            )
            for model in table.index
        ]
    )
    figure.update_layout(
        barmode="group", yaxis={"title": "accuracy (%)", "range": [0, 100]}, **LAYOUT, **titled(title)
    )
    return figure


def bias_bars(bias: pd.DataFrame, model: str, *, system: str = "iscc-nbs-l2", title: str = "") -> go.Figure:
    """Figure 3 for one model: per category, its top dominant colors stacked by share, each
    segment drawn in that color.

    Parameters
    ----------
    bias : DataFrame
        From :func:`evaluation.explicit.tables.dominant_color_bias` (with the same `system`).
    model : str

    Raises
    ------
    ValueError
        If `bias` has no row of `model`.
    """
    rows = bias[bias["model"] == model]
    if rows.empty:
        raise ValueError(f"`model` must be one of {sorted(set(bias['model']))}, got {shown(model)}")
    colors = load_system(system)
    figure = go.Figure()
    for rank, group in rows.groupby("rank", sort=True):
        figure.add_bar(
            name=f"color ranked {rank}",  # what a screen reader hears ("#1" said nothing)
            x=group["category"].tolist(),
            y=group["share"].mul(100.0).tolist(),
            text=group["color"].tolist(),
            marker={
                "color": [colors.hex[colors.index(c)] for c in group["color"]],
                "line": {"color": BAR_OUTLINE, "width": 1},
            },
            hovertemplate="%{x}: %{text}, %{y:.1f}%<extra></extra>",
            showlegend=False,
        )
    figure.update_layout(
        barmode="stack", yaxis={"title": "share of scored objects (%)"}, **LAYOUT, **titled(title)
    )
    return figure


def confusion_heatmap(confusion: pd.DataFrame, *, title: str = "") -> go.Figure:
    """ "Asked for X, got Y" counts as a heatmap (rows: target names, columns: named dominant
    colors), from :func:`evaluation.explicit.tables.confusion`."""
    x, y = [str(c) for c in confusion.columns], [str(r) for r in confusion.index]
    figure = go.Figure(
        go.Heatmap(
            z=confusion.to_numpy(),
            x=x,
            y=y,
            colorscale="Blues",
            hovertemplate="asked for %{y}, got %{x}: %{z}<extra></extra>",
        )
    )
    # Level-3 names with their coarser names ("vivid yellow green (vivid yellow green, green)")
    # ran off a phone's screen at the left: wrapped, and the margins made to fit them.
    # The x labels stand on end when they do not fit, so they are kept whole (wrapped, their
    # lines stood side by side across the next label's); the figure grows with its rows and
    # with the room those labels take, so the wrapped y labels keep apart.
    ticktext = [wrapped(name, NAME_CHARS) for name in y]
    row_px = NAME_LINE_PX * max(map(line_count, ticktext), default=1) + 8
    label_px = NAME_CHAR_PX * max(map(len, x), default=0)
    figure.update_layout(
        xaxis={"title": "got", "automargin": True},
        yaxis={
            "title": "asked for",
            "tickmode": "array",
            "tickvals": y,
            "ticktext": ticktext,
            "automargin": True,
        },
        height=max(360, row_px * len(y) + label_px + 120),
        **LAYOUT,
        **titled(title),
    )
    return figure
