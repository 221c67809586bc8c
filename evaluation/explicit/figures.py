"""Plotly figures of the explicit-color mode (GenColorBench Figures 2, 3 and 5, and a confusion map).

Every builder takes a frame of :mod:`evaluation.explicit.tables` and returns a
``plotly.graph_objects.Figure``; nothing here reads files or a database, and the figure data
are the table's numbers unchanged, so exports match the tables.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from evaluation.analysis.figures import BAR_OUTLINE, LAYOUT, titled
from evaluation.color.systems import load_system
from storage.shown import shown


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
    figure = go.Figure(
        go.Heatmap(
            z=confusion.to_numpy(),
            x=[str(c) for c in confusion.columns],
            y=[str(r) for r in confusion.index],
            colorscale="Blues",
            hovertemplate="asked for %{y}, got %{x}: %{z}<extra></extra>",
        )
    )
    figure.update_layout(xaxis={"title": "got"}, yaxis={"title": "asked for"}, **LAYOUT, **titled(title))
    return figure
