"""What the Concept browser and the Leaderboards tab show, assembled from the database.

Each function reads the stored model distributions and one human source
(`storage.human`) and hands them to the pure builders of `evaluation`
(`comparison`, `results`, `overlay`), so that the app's handlers stay one call long.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import sqlite_utils

from annotation.concepts import unknown_concept
from annotation.errors import NotFound
from evaluation.analysis import comparison, results, scoring, tables
from evaluation.concepts import Concept
from evaluation.pipeline import runs
from evaluation.pipeline.overlay import item_overlays
from storage import human

#: Masked images shown per concept in the browser (newest runs first).
GALLERY_LIMIT = 24


@dataclass(frozen=True)
class ConceptView:
    """Everything the browser shows for one concept, style and guidance scale.

    Attributes
    ----------
    human_label : str
        Where the human distribution comes from, or why there is none.
    distributions, strips : plotly Figure or None
        Bar charts on one axis and dominant-color strips: human first, then each model.
    overlays : list of (ndarray, str)
        Masked images (H, W, 3) uint8 with captions.
    metrics : pandas.DataFrame
        `evaluation.analysis.comparison.METRIC_COLUMNS`, one row per model.
    base : str
        The concept's base concept.
    shifts : pandas.DataFrame
        Shift EMD from the base to each variant: one row per variant, a column per source.
    shift_figure : plotly Figure or None
        None when no variant has a shift to show (`shifts` is empty).
    """

    human_label: str
    distributions: go.Figure | None
    strips: go.Figure | None
    overlays: list[tuple[np.ndarray, str]]
    metrics: pd.DataFrame
    base: str
    shifts: pd.DataFrame
    shift_figure: go.Figure | None


def _concept(concepts: Sequence[Concept], key: str) -> Concept:
    for concept in concepts:
        if concept.key == key:
            return concept
    raise NotFound(unknown_concept(key))


def _rows(db: sqlite_utils.Database, keys: Sequence[str], style: str, cfg: str | float) -> list[dict]:
    if style not in tables.STYLES:
        raise ValueError(f"`style` must be one of {tables.STYLES}, got {style!r}")
    return comparison.rows_at_cfg(
        [r for r in runs.model_distributions(db, concepts=keys) if r["style"] == style], cfg
    )


def concept_view(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    concepts: Sequence[Concept],
    concept: str,
    source: str,
    style: str,
    cfg: str | float = results.RECOMMENDED,
) -> ConceptView:
    """Human ground truth (from `source`) and every model side by side for `concept`.

    Parameters
    ----------
    data_dir : str or Path
        Where run images and masks are stored.
    source : str
        A human source of `storage.human.sources`.
    style : str
        ``natural`` or ``clipart``.
    cfg : str or float
        ``"recommended"`` or one guidance scale (see `evaluation.analysis.results`).

    Raises
    ------
    NotFound
        If `concept` is not a key of `concepts` (the message is short: no list of keys).
    """
    found = _concept(concepts, concept)
    family = [c.key for c in concepts if c.base == found.base]
    humans = human.read(db, source, family)
    truth = humans.get(concept)
    family_rows = _rows(db, family, style, cfg)
    rows = [r for r in family_rows if r["concept"] == concept]
    panels = [comparison.human_panel(truth.label, truth.p, truth.groups)] if truth else []
    panels += comparison.model_panels(rows)
    shown = {(r["run"], r["model"], float(r["cfg"])) for r in rows}
    items = [
        i
        for i in runs.concept_items(db, concept, style=style, limit=10 * GALLERY_LIMIT)
        if (i["run"], i["model"], float(i["cfg"])) in shown
    ][:GALLERY_LIMIT]
    shifts = comparison.variant_shifts(found.base, concepts, {k: h.p for k, h in humans.items()}, family_rows)
    metrics = (
        comparison.concept_metrics(concept, truth.p, rows, concepts)
        if truth
        else pd.DataFrame(columns=comparison.METRIC_COLUMNS)
    )
    shift_table = comparison.variant_shift_table(shifts)
    return ConceptView(
        human_label=_human_label(db, source, concept, truth),
        distributions=comparison.distributions_figure(panels) if panels else None,
        strips=comparison.strips_figure(panels) if panels else None,
        overlays=item_overlays(data_dir, items),
        metrics=metrics,
        base=found.base,
        shifts=shift_table,
        shift_figure=None
        if shift_table.empty
        else comparison.variant_shift_figure(
            shifts, title=f"Shift from '{found.base}' to its variants ({style})"
        ),
    )


def _human_label(
    db: sqlite_utils.Database, source: str, concept: str, truth: human.HumanDistribution | None
) -> str:
    """Which human distribution the view compares with; for the designers, how many colorings
    it rests on, by status, and which (the rule itself is `storage.human.COUNTING_RULE`)."""
    if truth is None:
        if source == human.DESIGNERS:
            return f"No designer coloring of '{concept}' counts yet, so it has no human distribution."
        return f"The source '{source}' has no human distribution for '{concept}'."
    if source != human.DESIGNERS:
        return f"Human ground truth: {truth.label}"
    statuses = Counter(row["status"] for row in human.counted_colorings(db, concept))
    counted = " and ".join(f"{statuses[status]} {status}" for status in human.COUNTED_STATUSES)
    ids = ", ".join(f"#{i}" for i in truth.coloring_ids)
    return f"Human ground truth: {truth.label} of '{concept}' that count now: {counted} ({ids})."


class NothingScored(NotFound):
    """No model distribution is scored against the source yet: the leaderboards are empty."""


def leaderboard_analyses(
    db: sqlite_utils.Database,
    concepts: Sequence[Concept],
    source: str,
    *,
    cfg: str | float = results.RECOMMENDED,
    aggregate: str = tables.RATIO_OF_MEANS,
) -> results.Analyses:
    """`evaluation.analysis.results.analyses` of every stored model distribution against `source`.

    Human distributions are read as stored (`storage.human`), and so are the metrics
    (`evaluation.analysis.scoring.stored_scores`, rescoring only what changed); only the model
    distributions at the scales the tables use are decoded, for the shifts.

    Raises
    ------
    NothingScored
        If no model distribution is scored against `source` yet.
    """
    human.check_source(db, source)
    frame = results.latest_scores(scoring.stored_scores(db, source, concepts))
    if frame.empty:
        raise NothingScored(
            "no stored model distribution has a human distribution in this source: "
            "finish an evaluation, or pick a source that covers its concepts"
        )
    pooled = isinstance(cfg, str) and cfg.strip() == tables.POOL_CFG
    chosen = results.resolve_cfg(frame, results.RECOMMENDED if pooled else cfg)
    rows = runs.model_distributions(db, cfgs=chosen)
    return results.analyses(
        rows, human.vectors(db, source), concepts, cfg=cfg, aggregate=aggregate, frame=frame
    )
