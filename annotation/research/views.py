"""What the Concept browser and the Leaderboards tab show, assembled from the database.

Each function reads the stored model distributions and one human source
(`storage.human`) and hands them to the pure builders of `evaluation`
(`comparison`, `results`, `overlay`), so that the app's handlers stay one call long.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import sqlite_utils

from annotation.coloring import ground_truth
from annotation.concepts import unknown_concept
from annotation.errors import NotFound
from evaluation.analysis import bootstrap, comparison, results, robustness, tables
from evaluation.analysis.reference import UW71_RATINGS_SOURCE
from evaluation.concepts import Concept
from evaluation.pipeline import runs, scoring
from evaluation.pipeline.overlay import item_overlays
from storage import db_path, human
from storage.schema import change_count
from storage.shown import shown

_LOG = logging.getLogger(__name__)

#: Masked images shown per concept in the browser (newest runs first).
GALLERY_LIMIT = 24


@dataclass(frozen=True)
class ConceptView:
    """Everything the browser shows for one concept, style and guidance scale.

    Attributes
    ----------
    human_label : str
        Where the human distribution comes from, or why there is none (and, when the view fell
        back from the designers to a reference set, that it did: `pick_source`).
    source : str
        The human source shown (`pick_source`).
    distributions, strips : plotly Figure or None
        Bar charts on one axis and dominant-color strips: human first, then each model.
    overlays : list of (ndarray, str)
        Masked images (H, W, 3) uint8 with captions.
    metrics : pandas.DataFrame
        `evaluation.analysis.comparison.METRIC_COLUMNS`, one row per model.
    metrics_note : str
        Empty when `metrics` has rows; else what is missing and which action fills it.
    base : str
        The concept's base concept.
    shifts : pandas.DataFrame
        Shift EMD from the base to each variant: one row per variant, a column per source.
    shift_figure : plotly Figure or None
        None when no variant has a shift to show (`shifts` is empty).
    """

    human_label: str
    source: str
    distributions: go.Figure | None
    strips: go.Figure | None
    overlays: list[tuple[np.ndarray, str]]
    metrics: pd.DataFrame
    metrics_note: str
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
        raise ValueError(f"`style` must be one of {tables.STYLES}, got {shown(style)}")
    return comparison.rows_at_cfg(
        [r for r in runs.model_distributions(db, concepts=keys) if r["style"] == style],
        cfg,
        scales=_stored_scales(db),
    )


def _stored_scales(db: sqlite_utils.Database) -> pd.DataFrame:
    """``model, cfg`` of every stored model distribution: a model's 'recommended' scale is the
    middle of them all, as on the Leaderboards, not of the scales one concept happens to have
    (outside probe 124: the browser showed a model at 2 where the Leaderboards said 3.5)."""
    rows = db.execute("select distinct model, cfg from model_distributions where p is not null").fetchall()
    return pd.DataFrame(rows, columns=["model", "cfg"])


def concept_view(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    concepts: Sequence[Concept],
    concept: str,
    source: str,
    style: str,
    cfg: str | float = results.RECOMMENDED,
    *,
    resampling: bootstrap.Resampling | None = None,
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
    resampling : bootstrap.Resampling, optional
        With the designers' source, the people's shifts get intervals from each family
        concept's counted colorings resampled (`bootstrap.shift_intervals`, e.g.
        `bootstrap.SHIFT_DEFAULT`), stated in the chart's caption; a reference set has none.
        Off by default: it re-extracts P_H per resample, about 0.2 s per family concept,
        while the rest of the view takes under a second at the full study's size.

    With the designers' source and no counted coloring of `concept`, the view falls back to
    a reference set that has it (`pick_source`) and says so in ``human_label``.

    Raises
    ------
    NotFound
        If `concept` is not a key of `concepts` (the message is short: no list of keys).
    """
    found = _concept(concepts, concept)
    choice = pick_source(db, source, [concept])
    source = choice.source
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
    shown_resampling = resampling if source == human.DESIGNERS else None
    if shown_resampling is not None:
        pixels = colorings_pixels(db, set(family))
        shifts = comparison.with_human_intervals(
            shifts, bootstrap.shift_intervals(pixels, found.base, shown_resampling)
        )
    metrics = (
        comparison.concept_metrics(concept, truth.p, rows, concepts)
        if truth
        else pd.DataFrame(columns=comparison.METRIC_COLUMNS)
    )
    shift_table = comparison.variant_shift_table(shifts)
    return ConceptView(
        human_label=" ".join(filter(None, [choice.note, _human_label(db, source, concept, truth)])),
        source=source,
        distributions=comparison.distributions_figure(panels) if panels else None,
        strips=comparison.strips_figure(panels) if panels else None,
        overlays=item_overlays(data_dir, items),
        metrics=metrics,
        metrics_note=_metrics_note(concept, style, cfg, truth is not None, bool(rows)),
        base=found.base,
        shifts=shift_table,
        shift_figure=None
        if shift_table.empty
        else comparison.variant_shift_figure(
            shifts,
            title=f"Shift from '{found.base}' to its variants ({style})",
            caption=comparison.shift_caption(shown_resampling)
            if resampling is not None
            else "No intervals on people's shifts (not asked for).",
        ),
    )


def _human_label(
    db: sqlite_utils.Database, source: str, concept: str, truth: human.HumanDistribution | None
) -> str:
    """Which human distribution the view compares with; for the designers, how many colorings
    it rests on, by status, and which (the rule itself is `storage.human.COUNTING_RULE`)."""
    if truth is None:
        if source == human.DESIGNERS:
            return (
                f"No designer coloring of '{concept}' counts yet, so it has no human distribution: "
                "it gets one once a designer's coloring of it is submitted (Coloring tab)."
            )
        return (
            f"The source '{source}' has no human distribution for '{concept}': choose another "
            "Human ground truth ('designers' once it is colored)."
        )
    if source != human.DESIGNERS:
        return f"Human ground truth: {truth.label}"
    statuses = Counter(row["status"] for row in human.counted_colorings(db, concept))
    counted = " and ".join(f"{statuses[status]} {status}" for status in human.COUNTED_STATUSES)
    ids = ", ".join(f"#{i}" for i in truth.coloring_ids)
    return f"Human ground truth: {truth.label} of '{concept}' that count now: {counted} ({ids})."


def _metrics_note(concept: str, style: str, cfg, has_truth: bool, has_models: bool) -> str:
    """Why a concept's metrics table is empty, and which action fills it."""
    if has_truth and has_models:
        return ""
    missing = []
    if not has_models:
        missing.append(
            f"no model has a {style} distribution of '{concept}' at guidance scale '{cfg}' yet: "
            "run a model on it on the Evaluate tab (or import a run), or pick another style or scale"
        )
    if not has_truth:
        missing.append("there is no human distribution to compare with (see the line at the top)")
    return "No metrics: " + "; and ".join(missing) + "."


@dataclass(frozen=True)
class SourceChoice:
    """Which human source a research view compares with, and why, in words.

    Attributes
    ----------
    source : str
        The source used: the one asked for, or the reference set `pick_source` fell back to.
    note : str
        Empty when `source` is the one asked for; else a sentence saying that the designers
        have no distribution of the evaluated concepts and which source is shown instead.
    """

    source: str
    note: str = ""


def evaluated_concepts(db: sqlite_utils.Database) -> list[str]:
    """Keys of the concepts that have a stored model distribution (any run), sorted."""
    return [
        row[0]
        for row in db.execute(
            "select distinct concept from model_distributions where p is not null order by 1"
        )
    ]


def pick_source(db: sqlite_utils.Database, source: str, keys: Sequence[str]) -> SourceChoice:
    """The human source to compare `keys` with: `source`, unless it is the designers' and they
    have no distribution of any of `keys` while a reference set has.

    A newcomer's first evaluation (README, step 5) runs a model on a few concepts before any
    designer has colored them; the research views then open on the designers' source with
    nothing in it. Here they fall back to the reference set covering most of `keys` and say
    so; of sets that cover as many, the shipped ``uw71-ratings``, which ``score`` compares with
    by default (the tab and the command line then give one Table 1), else the first label.
    A reference set the person chose is always kept.

    Raises
    ------
    storage.human.UnknownSource
        If `source` is not a known source.
    """
    human.check_source(db, source)
    keys = list(dict.fromkeys(keys))
    if source != human.DESIGNERS or not keys or human.vectors(db, source, keys):
        return SourceChoice(source)
    covered = {label: len(human.vectors(db, label, keys)) for label in human.reference_sources(db)}
    # The first of equals (sources are sorted), the shipped set before any.
    best = max(covered, key=lambda label: (covered[label], label == UW71_RATINGS_SOURCE), default=None)
    if best is None or not covered[best]:
        return SourceChoice(source)
    return SourceChoice(
        best,
        f"No designer coloring of {_listed(keys)} counts yet, so the reference set '{best}' is the human "
        f"ground truth here instead ({_covers(covered[best], len(keys))}). Choose 'designers' "
        "again once designers have colored " + ("it." if len(keys) == 1 else "them."),
    )


def _listed(keys: Sequence[str]) -> str:
    """Concept keys as a note names them: the first five quoted, then how many more."""
    return ", ".join(f"'{k}'" for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def lacking_note(db: sqlite_utils.Database, source: str, keys: Sequence[str]) -> str:
    """The sentence naming the evaluated concepts `keys` that `source` has no human
    distribution of (the leaderboards leave them out), or "" when it has them all."""
    keys = list(dict.fromkeys(keys))
    held = human.concept_keys(db, source)
    missing = [k for k in keys if k not in held]
    if not missing or len(missing) == len(keys):  # none at all: the empty leaderboard says so itself
        return ""
    return (
        f"'{source}' has {len(keys) - len(missing)} of the {len(keys)} evaluated concepts: {_listed(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} left out of every table below (no human "
        "distribution to compare with)."
    )


#: The designers per concept of the paper's study (Section 3): a P_H on fewer is named.
PAPER_DESIGNERS = 5


def thin_note(db: sqlite_utils.Database, source: str, keys: Sequence[str]) -> str:
    """For the designers' source: the sentence naming the evaluated concepts `keys` whose P_H
    rests on fewer than `PAPER_DESIGNERS` colorings (an outside tester found one resting on
    a single unreviewed coloring in the tables, unnamed), or "" when none does."""
    if source != human.DESIGNERS:
        return ""
    counts = human.coloring_counts(db)
    held = [k for k in dict.fromkeys(keys) if k in counts]
    thin = sorted((k for k in held if counts[k] < PAPER_DESIGNERS), key=lambda k: (counts[k], k))
    if not thin:
        return ""
    named = ", ".join(f"'{k}' ({counts[k]})" for k in thin[:5]) + (
        f" and {len(thin) - 5} more" if len(thin) > 5 else ""
    )
    return (
        f"{len(thin)} of the {len(held)} concepts scored {'rests' if len(thin) == 1 else 'rest'} on "
        f"fewer than {PAPER_DESIGNERS} designer "
        f"colorings (the paper's study has {PAPER_DESIGNERS} per concept): {named}; their P_H changes "
        "as colorings come in."
    )


class NothingScored(NotFound):
    """No model distribution is scored against the source yet: the leaderboards are empty."""


def leaderboard_analyses(
    db: sqlite_utils.Database,
    concepts: Sequence[Concept],
    source: str,
    *,
    cfg: str | float = results.RECOMMENDED,
    aggregate: str = tables.RATIO_OF_MEANS,
    resampling: bootstrap.Resampling | None = bootstrap.DEFAULT,
    cache: LeaderboardCache | None = None,
) -> results.Analyses:
    """`evaluation.analysis.results.analyses` of every stored model distribution against `source`.

    Human distributions are read as stored (`storage.human`), and so are the metrics
    (`evaluation.pipeline.scoring.stored_scores`, rescoring only what changed); only the model
    distributions at the scales the tables use are decoded, for the shifts. With
    ``resampling.colorings`` and the designers' source, each concept's P_H is also
    resampled over its counted colorings (their stored pixel samples), for Tables 1-2.

    The result is kept in `cache` (the app's own, `app.common.AppContext.leaderboards`;
    default `DEFAULT_CACHE`, for the CLI, benchmarks and scripts), see `LeaderboardCache`.
    Each call gets its own copy.

    Raises
    ------
    NothingScored
        If no model distribution is scored against `source` yet.
    """
    return (DEFAULT_CACHE if cache is None else cache).analyses(
        db, concepts, source, cfg=cfg, aggregate=aggregate, resampling=resampling
    )


#: How many `leaderboard_analyses` results a `LeaderboardCache` keeps by default.
LEADERBOARD_CACHE = 8


class LeaderboardCache:
    """Kept `leaderboard_analyses` results, per database, source and options.

    A result is kept (`size` of them, least recently used dropped first) until a model or
    human distribution changes (`storage.schema.change_count`, bumped by triggers whichever
    process writes): at the full study's size the tables and their bootstrap intervals take
    one to two seconds, and researchers reopen them far more often than the distributions
    change. A kept result whose data changed is brought up to date by `refresh` (the app's
    `keep_leaderboards_fresh` thread calls it once the data has been quiet a while), so the
    next view finds it ready; `warm` keeps a result before anyone asks (the view the app's
    Leaderboards tab opens on), left as it is after a change until someone reads it.
    Callers asking for the same options at once compute it once: the second
    waits for the first. A view that must answer at once asks `first_look` first: the kept
    result even if the data changed since, or else the point estimates without intervals,
    which the next `analyses` of those options completes with only the intervals to draw.

    Parameters
    ----------
    size : int
        How many results are kept at most.
    """

    def __init__(self, size: int = LEADERBOARD_CACHE):
        self.size = size
        self._lock = threading.Lock()
        #: options -> (change count it was computed at, result), least recently used first.
        self._kept: OrderedDict = OrderedDict()
        #: options -> lock held while that result is computed (one computation per options at once).
        self._flights: dict = {}
        #: options -> (change count, point estimates, their model rows) from `first_look`, for
        #: the next computation of the same options to draw only the intervals.
        self._points: dict = {}
        #: options computed by `warm` that nobody has read since: `refresh` leaves them be.
        self._unread: set = set()

    def analyses(
        self,
        db: sqlite_utils.Database,
        concepts: Sequence[Concept],
        source: str,
        *,
        cfg: str | float = results.RECOMMENDED,
        aggregate: str = tables.RATIO_OF_MEANS,
        resampling: bootstrap.Resampling | None = bootstrap.DEFAULT,
    ) -> results.Analyses:
        """`leaderboard_analyses` through this cache: a copy of the kept result, or a new one."""
        options = _options(db, concepts, source, cfg, aggregate, resampling)
        return copy.deepcopy(self._result(db, options, concepts))

    def first_look(
        self,
        db: sqlite_utils.Database,
        concepts: Sequence[Concept],
        source: str,
        *,
        cfg: str | float = results.RECOMMENDED,
        aggregate: str = tables.RATIO_OF_MEANS,
        resampling: bootstrap.Resampling | None = bootstrap.DEFAULT,
    ) -> tuple[results.Analyses, str]:
        """What a view can show at once, and whether it is final.

        Returns ``(result, state)``, `result` a copy:

        - ``"current"``: the kept result, and the data has not changed since;
        - ``"earlier"``: the kept result, computed before the latest change to a distribution
          (`analyses` brings it up to date);
        - ``"points"``: nothing kept: the point estimates, without intervals (``resampling``
          is None in them); `analyses` with the same options then draws only the intervals.

        With `resampling` None the point estimates are the result (``"current"``).

        Raises
        ------
        NothingScored
            If no model distribution is scored against `source` yet.
        """
        options = _options(db, concepts, source, cfg, aggregate, resampling)
        with self._lock:
            found = self._kept.get(options)
            self._unread.discard(options)
        if found is not None:
            state = "current" if found[0] == change_count(db) else "earlier"
            return copy.deepcopy(found[1]), state
        if resampling is None:
            return copy.deepcopy(self._result(db, options, concepts)), "current"
        with self._lock:
            flight = self._flights.setdefault(options, threading.Lock())
        with flight:
            count = change_count(db)
            with self._lock:
                stashed = self._points.get(options)
            if stashed is None or stashed[0] != count:
                points, rows = _points(db, concepts, source, cfg=cfg, aggregate=aggregate)
                stashed = (count, points, rows)
                with self._lock:
                    self._points[options] = stashed
                    while len(self._points) > self.size:
                        self._points.pop(next(iter(self._points)))
            return copy.deepcopy(stashed[1]), "points"

    def _result(
        self, db: sqlite_utils.Database, options: tuple, concepts: Sequence[Concept]
    ) -> results.Analyses:
        with self._lock:
            flight = self._flights.setdefault(options, threading.Lock())
        with flight:
            count = change_count(db)
            with self._lock:
                found = self._kept.get(options)
                self._unread.discard(options)
                if found is not None:
                    self._kept.move_to_end(options)
            if found is not None and found[0] == count:
                return found[1]
            _, source, cfg, aggregate, resampling, _ = options
            with self._lock:
                stashed = self._points.pop(options, None)
            try:
                if stashed is not None and stashed[0] == count:
                    result = _intervals(db, stashed[1], stashed[2], source, aggregate, resampling)
                else:
                    result = _leaderboard_analyses(
                        db, concepts, source, cfg=cfg, aggregate=aggregate, resampling=resampling
                    )
            except Exception:
                with self._lock:
                    self._kept.pop(options, None)
                raise
            with self._lock:
                self._kept[options] = (count, result)
                self._kept.move_to_end(options)
                while len(self._kept) > self.size:
                    dropped, _ = self._kept.popitem(last=False)
                    self._flights.pop(dropped, None)
                    self._points.pop(dropped, None)
                    self._unread.discard(dropped)
            return result

    def warm(
        self,
        db: sqlite_utils.Database,
        concepts: Sequence[Concept],
        source: str,
        *,
        cfg: str | float = results.RECOMMENDED,
        aggregate: str = tables.RATIO_OF_MEANS,
        resampling: bootstrap.Resampling | None = bootstrap.DEFAULT,
    ) -> bool:
        """Compute and keep these options' result before anyone asks, so that the first view
        of them is served from memory; until someone reads it, `refresh` does not recompute
        it after a change (the next view then shows it as ``"earlier"`` and brings it up to
        date). Returns whether it was computed now (False: it was kept already).

        Raises
        ------
        NothingScored
            If no model distribution is scored against `source` yet.
        """
        options = _options(db, concepts, source, cfg, aggregate, resampling)
        with self._lock:
            if options in self._kept:
                return False
        self._result(db, options, concepts)
        with self._lock:
            if options in self._kept:
                self._unread.add(options)
        return True

    def refresh(self, db: sqlite_utils.Database, concepts: Sequence[Concept]) -> int:
        """Recompute every kept result of this database whose data changed.

        Only option sets someone has asked for are kept, so this recomputes what people look
        at and nothing else; a result that can no longer be computed (say, its runs were
        deleted) is dropped. Returns how many were recomputed.
        """
        path, keys = db_path(db), tuple(c.key for c in concepts)
        count = change_count(db)
        with self._lock:
            stale = [
                o
                for o, (kept, _) in self._kept.items()
                if o[0] == path and o[5] == keys and kept != count and o not in self._unread
            ]
        refreshed = 0
        for options in stale:
            try:
                self._result(db, options, concepts)
            except (NothingScored, ValueError):
                continue
            refreshed += 1
        return refreshed

    def kept(self, path: str | Path) -> int:
        """How many results of the database file `path` are kept."""
        path = os.path.realpath(path)
        with self._lock:
            return sum(1 for o in self._kept if o[0] == path)


DEFAULT_CACHE = LeaderboardCache()
"""The cache of callers that bring none (the CLI, benchmarks, scripts); an app keeps its own
(`app.common.AppContext.leaderboards`), so two apps in one process share nothing."""
# The default cache's lock and results under their old names (a test watches them).
_LEADERBOARDS_LOCK, _LEADERBOARDS = DEFAULT_CACHE._lock, DEFAULT_CACHE._kept


def refresh_leaderboards(
    db: sqlite_utils.Database, concepts: Sequence[Concept], cache: LeaderboardCache | None = None
) -> int:
    """`LeaderboardCache.refresh` of `cache` (default `DEFAULT_CACHE`)."""
    return (DEFAULT_CACHE if cache is None else cache).refresh(db, concepts)


def warm_first_leaderboard(
    db: sqlite_utils.Database, concepts: Sequence[Concept], cache: LeaderboardCache | None = None
) -> bool:
    """Keep in `cache` (default `DEFAULT_CACHE`) the leaderboard the Leaderboards tab opens
    on: the designers against the evaluated concepts (or the reference set `pick_source`
    falls back to), the recommended scale, the ratio of means, the default intervals
    (`LeaderboardCache.warm`). Returns whether it was computed now.

    Raises
    ------
    NothingScored
        If no model distribution is scored against that source yet.
    """
    choice = pick_source(db, human.DESIGNERS, evaluated_concepts(db))
    return (DEFAULT_CACHE if cache is None else cache).warm(db, concepts, choice.source)


def kept_leaderboards(path: str | Path, cache: LeaderboardCache | None = None) -> int:
    """`LeaderboardCache.kept` of `cache` (default `DEFAULT_CACHE`)."""
    return (DEFAULT_CACHE if cache is None else cache).kept(path)


#: Seconds between two looks at the change count, and how long the distributions must stay
#: unchanged before kept leaderboards are recomputed: while a study runs, every submission
#: changes a P_H, and recomputing then would take the designers' CPU for tables nobody reads.
REFRESH_PERIOD_S = 5.0
REFRESH_QUIET_S = 15.0
#: Logged once when the refresher finds no database file at its path.
LEADERBOARDS_WAIT = "the database %s is not there: kept leaderboards are refreshed again once it is back"


def keep_leaderboards_fresh(
    path: str | Path,
    connect: Callable[[], AbstractContextManager[sqlite_utils.Database]],
    concepts: Sequence[Concept],
    *,
    period_s: float = REFRESH_PERIOD_S,
    quiet_s: float = REFRESH_QUIET_S,
    stop: threading.Event | None = None,
    cache: LeaderboardCache | None = None,
    first: Callable[[sqlite_utils.Database], object] | None = None,
) -> threading.Thread:
    """Start a daemon thread that refreshes `cache`'s results of `path` once the data is quiet.

    Every `period_s` it reads the change count of the database at `path` (opened with
    `connect`), but only while a leaderboard of it is kept in `cache` (default
    `DEFAULT_CACHE`); once the count has stayed the same for `quiet_s`, the kept results
    are recomputed (`LeaderboardCache.refresh`), so that the next view is served from
    memory. While the database file is not at `path` (moved away, say) it waits, said once
    in the log, and goes on when the file is back. The thread ends when `stop` is set (at
    its next look, or between two recomputed results); whoever starts it should keep `stop`
    to end it (`app.common.AppContext.close` does).

    With `first`, while nothing of the database is kept, ``first(db)`` is called once the
    data has been quiet for `quiet_s` (once per change count; `NothingScored` and ValueError
    are taken as nothing to compute yet): the app computes there the view a researcher opens
    first (`LeaderboardCache.warm`), so that even the first open after a start is served
    from memory.
    """
    stop = threading.Event() if stop is None else stop
    cache = DEFAULT_CACHE if cache is None else cache

    def loop() -> None:
        seen, since, missing, tried = None, time.monotonic(), False, None
        while not stop.wait(period_s):
            if not os.path.exists(path):
                if not missing:
                    _LOG.warning(LEADERBOARDS_WAIT, path)
                missing = True
                continue
            missing = False
            kept = cache.kept(path)
            if not kept and first is None:
                continue
            try:
                with connect() as db:
                    count, now = change_count(db), time.monotonic()
                    if count != seen:
                        seen, since = count, now
                    elif now - since < quiet_s:
                        pass
                    elif kept:
                        cache.refresh(db, concepts)
                    elif count != tried:
                        tried = count
                        with suppress(NothingScored, ValueError):
                            first(db)
            except Exception:
                _LOG.exception("refreshing the leaderboards of %s failed", path)

    thread = threading.Thread(target=loop, name="refresh-leaderboards", daemon=True)
    thread.start()
    return thread


def _options(db, concepts, source, cfg, aggregate, resampling) -> tuple:
    """The key of a `LeaderboardCache` result; a scale as read (`results.parse_cfg`), so
    "5", " 5" and "5.0" share one (each was computed anew, 4 to 5 s at the full study's
    size: outside probe 212)."""
    scale = tables.POOL_CFG if results.pooled_cfg(cfg) else results.parse_cfg(cfg)
    return (db_path(db), source, scale, aggregate, resampling, tuple(c.key for c in concepts))


def _leaderboard_analyses(
    db: sqlite_utils.Database,
    concepts: Sequence[Concept],
    source: str,
    *,
    cfg: str | float,
    aggregate: str,
    resampling: bootstrap.Resampling | None,
) -> results.Analyses:
    points, rows = _points(db, concepts, source, cfg=cfg, aggregate=aggregate)
    if resampling is None:
        return points
    return _intervals(db, points, rows, source, aggregate, resampling)


def _points(
    db: sqlite_utils.Database, concepts: Sequence[Concept], source: str, *, cfg: str | float, aggregate: str
) -> tuple[results.Analyses, list[dict]]:
    """The analyses without intervals, and the model rows they read (for `_intervals`)."""
    human.check_source(db, source)
    frame = results.latest_scores(scoring.stored_scores(db, source, concepts))
    if frame.empty:
        raise NothingScored(_nothing_scored(db, source))
    pooled = results.pooled_cfg(cfg)
    chosen = results.resolve_cfg(frame, results.RECOMMENDED if pooled else cfg)
    rows = runs.model_distributions(db, cfgs=chosen, groups=False)
    points = results.analyses(
        rows, human.vectors(db, source), concepts, cfg=cfg, aggregate=aggregate, frame=frame, resampling=None
    )
    return points, rows


def _intervals(
    db: sqlite_utils.Database,
    points: results.Analyses,
    rows: list[dict],
    source: str,
    aggregate: str,
    resampling: bootstrap.Resampling,
) -> results.Analyses:
    """`points` (from `_points`) with their bootstrap intervals."""
    replicates = None
    if resampling.colorings and source == human.DESIGNERS:
        replicates = bootstrap.human_replicates(
            colorings_pixels(db, set(points.metrics["concept"])), resampling
        )
    return results.with_intervals(points, rows, resampling, aggregate=aggregate, human_replicates=replicates)


def _covers(covered: int, asked: int) -> str:
    if covered == asked:
        return {1: "it has it", 2: "it has both"}.get(asked, f"it has all {asked}")
    return f"it has {covered} of the {asked}"


def _nothing_scored(db: sqlite_utils.Database, source: str) -> str:
    """Why no model distribution is scored against `source`, and which action fills the tables."""
    keys = evaluated_concepts(db)
    if not keys and (excluded := runs.all_excluded(db)):
        return f"Nothing to score: {excluded} (Evaluate tab, *Box threshold*)."
    if not keys:
        return (
            "There is no stored model distribution yet: run a model on the Evaluate tab (or import "
            "a run); its scores show here when its extraction ends."
        )
    shown = ", ".join(f"'{k}'" for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    covering = [
        f"'{label}' ({n} of them)"
        for label in human.sources(db)
        if label != source and (n := len(human.vectors(db, label, keys)))
    ]
    return (
        f"None of the evaluated concepts ({shown}) has a human distribution in '{source}' "
        "yet: "
        + (
            f"choose {' or '.join(covering)} as Human ground truth"
            if covering
            else "evaluate concepts that designers have colored, or that a reference set covers"
        )
        + "."
    )


def colorings_pixels(db: sqlite_utils.Database, keys: set[str]) -> dict[str, list[np.ndarray]]:
    """The stored pixel samples of each concept's counted colorings (`storage.human.COUNTING_RULE`),
    in coloring id order, for the concepts of `keys` that have any."""
    by_concept: dict[str, list[int]] = {}
    for coloring in human.counted_colorings(db):
        if coloring["concept_key"] in keys:
            by_concept.setdefault(coloring["concept_key"], []).append(coloring["id"])
    found = ground_truth.samples(db, [i for ids in by_concept.values() for i in ids]) if by_concept else {}
    return {k: [found[i] for i in ids if i in found] for k, ids in by_concept.items()}


def robustness_report(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    concepts: Sequence[Concept],
    source: str,
    *,
    sample: int | None = None,
    seed: int = 0,
) -> tuple[pd.DataFrame, str]:
    """`evaluation.analysis.robustness.robustness` of the stored runs against `source`.

    Model distributions are re-extracted from the runs' pixel summaries; with the
    designers' source, so is P_H from the counted colorings' pixel samples. `sample`
    restricts everything to that many base concepts drawn with `seed`.

    Returns
    -------
    report : pandas.DataFrame
        `evaluation.analysis.robustness.REPORT_COLUMNS` and ``seconds``.
    text : str
        `evaluation.analysis.robustness.describe` of it (Markdown).
    """
    human.check_source(db, source)
    rows = runs.model_distributions(db)
    keys = robustness.sample_families(concepts, {r["concept"] for r in rows}, sample, seed)
    rows = [r for r in rows if r["concept"] in keys]
    report = robustness.robustness(
        rows,
        human.vectors(db, source),
        concepts,
        frame=results.latest_scores(scoring.stored_scores(db, source, concepts)),
        model_pixels=robustness.stored_pixels(db, data_dir, rows),
        human_pixels=colorings_pixels(db, keys) if source == human.DESIGNERS else None,
        keys=None if sample is None else keys,
    )
    return report, robustness.describe(report)
