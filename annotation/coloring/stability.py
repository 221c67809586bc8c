"""How stable each concept's designers' P_H is, and the adaptive assignment mode (issue 19, item 4).

Stability
---------
A concept's P_H is resampled over its counted colorings (`storage.human.COUNTING_RULE`):
each replicate draws that many colorings with replacement and runs the extraction on
their stored pixel samples (`evaluation.analysis.bootstrap.resampled_distributions`).
Its **stability** is the `QUANTILE` (90th percentile) of the EMD between a replicate and
the full P_H, in CIELAB ΔE units: how far P_H could move if other designers of the same
kind had colored it. Fewer colorings or more disagreement give a larger value. Each
value is computed from `N_RESAMPLES` replicates with a generator seeded by `SEED` and
the concept key, and cached in the ``settings`` table (key ``ph_stability:<concept>``)
with the coloring ids it was computed from, so it is recomputed only when they change.

Adaptive mode
-------------
Off by default: every concept gets the fixed `k` designers of the paper's protocol
(`annotation.assignment`). When the admin turns it on (`set_mode`), a batch first
fills every concept to ``min_k`` designers exactly as before (least covered first, never
a concept the designer already colored, distinct designers); only when that pool is dry
for the designer are they given concepts that have ``min_k`` counted colorings and whose
stability is still above ``threshold`` (unstable), least covered first, up to ``cap``
designers; a concept at or under the threshold gets no new designer. A submission is
checked against ``cap`` (an extra reservation handed out before the concept became
stable may still be submitted; none is handed out after).
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import sqlite_utils

from annotation.assignment import pool_rows
from annotation.coloring import ground_truth
from annotation.errors import InvalidInput
from evaluation.analysis import bootstrap
from evaluation.analysis.figures import LAYOUT
from storage import audit, human, iso, transaction
from storage.settings import read_setting, write_setting
from storage.shown import counted, shown

N_RESAMPLES = 100
SEED = 0
QUANTILE = 0.9
PREFIX = "ph_stability:"
MODE_KEY = "assignment_mode"
#: Stability values (ΔE) above which a concept's P_H counts as unstable by default; see
#: BENCHMARKS.md, "Adaptive collection", for how it was chosen.
DEFAULT_THRESHOLD = 20.0
#: Stale stabilities `extra_targets` may compute in one reservation (~0.3 s each).
COMPUTE_BUDGET = 5
#: Stale stabilities one view computes (about 20 s); the next view continues.
VIEW_COMPUTE = 60


#: Most designers a concept may get in the adaptive mode: a cap of 10**18 was stored, and the
#: coverage's histogram of that many bins filled the server's memory (outside probe 190).
MAX_DESIGNERS = 100


@dataclass(frozen=True)
class Mode:
    """The assignment mode (``settings.assignment_mode``).

    Attributes
    ----------
    adaptive : bool
        False: the fixed protocol (`k` designers per concept).
    min_k : int
        Designers every concept gets first (adaptive only), 2 to `MAX_DESIGNERS`.
    cap : int
        Most designers an unstable concept gets, min_k to `MAX_DESIGNERS`.
    threshold : float
        Stability (ΔE, `QUANTILE` of the resampled EMD) above which a concept is unstable.
    """

    adaptive: bool = False
    min_k: int = 4
    cap: int = 10
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self):
        for name in ("min_k", "cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_DESIGNERS:
                raise InvalidInput(
                    f"`{name}` must be a whole number from 2 to {MAX_DESIGNERS} (designers per concept), "
                    f"got {shown(value)}"
                )
        if self.cap < self.min_k:
            raise InvalidInput(f"`cap` must be at least `min_k` ({self.min_k}), got {self.cap}")
        if (
            not isinstance(self.threshold, (int, float))
            or not np.isfinite(self.threshold)
            or self.threshold < 0
        ):
            raise InvalidInput(f"`threshold` must be a number >= 0 (ΔE), got {shown(self.threshold)}")

    def describe(self) -> str:
        if not self.adaptive:
            return "fixed: every concept gets the same number of designers (the paper's protocol)"
        return (
            f"adaptive: {self.min_k} designers per concept, then up to {self.cap} while the "
            f"concept's P_H stability is above {self.threshold:g} ΔE"
        )


def read_mode(db: sqlite_utils.Database) -> Mode:
    """The stored assignment mode (`Mode()`, fixed, when none is stored)."""
    value = read_setting(db, MODE_KEY)
    return Mode(**json.loads(value)) if value is not None else Mode()


def set_mode(db: sqlite_utils.Database, mode: Mode, *, actor: str, now: dt.datetime | None = None) -> None:
    """Store `mode` (and an audit row naming `actor`)."""
    with transaction(db):
        write_setting(db, MODE_KEY, json.dumps(asdict(mode)))
        audit.record(db, actor, "set_assignment_mode", "settings", MODE_KEY, details=asdict(mode), now=now)


@dataclass(frozen=True)
class Stability:
    """One concept's P_H stability (see the module docstring)."""

    concept: str
    n_colorings: int
    value: float
    coloring_ids: tuple[int, ...]


def _cached(db, concept: str, ids: list[int]) -> Stability | None:
    value = read_setting(db, PREFIX + concept)
    if value is None:
        return None
    stored = json.loads(value)
    if stored["ids"] != ids or stored["n_resamples"] != N_RESAMPLES or stored["seed"] != SEED:
        return None
    return Stability(concept, len(ids), stored["value"], tuple(ids))


def _compute(db, concept: str, ids: list[int]) -> Stability:
    pixels = ground_truth.samples(db, ids)
    missing = [i for i in ids if i not in pixels]
    if missing:
        raise LookupError(f"colorings {missing} of {concept!r} have no stored pixel sample")
    listed = [pixels[i] for i in ids]
    rng = np.random.default_rng([SEED, zlib.crc32(concept.encode("utf-8"))])
    replicates = bootstrap.resampled_distributions(listed, N_RESAMPLES, rng)
    stored = human.read(db, human.DESIGNERS, [concept]).get(concept)
    full = stored.p if stored is not None else replicates.mean(axis=0)
    value = bootstrap.stability(replicates, full, quantile=QUANTILE)
    with transaction(db):
        write_setting(
            db,
            PREFIX + concept,
            json.dumps(
                {"ids": ids, "value": value, "n_resamples": N_RESAMPLES, "seed": SEED, "computed": iso()}
            ),
        )
    return Stability(concept, len(ids), value, tuple(ids))


def stabilities(
    db: sqlite_utils.Database,
    keys: Iterable[str] | None = None,
    *,
    compute: bool = True,
    max_compute: int | None = None,
) -> list[Stability]:
    """The stability of each concept (of `keys`, default all) with counted colorings.

    Cached values are used while their colorings still count; others are computed (about
    0.3 s per concept with 5 colorings) and cached, at most `max_compute` of them (default
    no limit), or left out when `compute` is False.
    """
    counted = (
        human.counted_colorings(db)
        if keys is None
        else [c for key in dict.fromkeys(keys) for c in human.counted_colorings(db, key)]
    )
    by_concept: dict[str, list[int]] = {}
    for coloring in counted:
        by_concept.setdefault(coloring["concept_key"], []).append(coloring["id"])
    out, budget = [], np.inf if max_compute is None else max_compute
    for concept, ids in sorted(by_concept.items()):
        found = _cached(db, concept, ids)
        if found is None and compute and budget > 0:
            found, budget = _compute(db, concept, ids), budget - 1
        if found is not None:
            out.append(found)
    return out


def stability_table(
    db: sqlite_utils.Database, mode: Mode | None = None, *, max_compute: int | None = None
) -> pd.DataFrame:
    """Per concept: ``concept, colorings, stability`` (ΔE) and ``status`` (``unstable`` above
    the mode's threshold, else ``stable``), least stable first; see `stabilities` for
    `max_compute`."""
    mode = mode or read_mode(db)
    rows = [
        {
            "concept": s.concept,
            "colorings": s.n_colorings,
            "stability": round(s.value, 3),
            "status": "unstable" if s.value > mode.threshold else "stable",
        }
        for s in stabilities(db, max_compute=max_compute)
    ]
    frame = pd.DataFrame(rows, columns=["concept", "colorings", "stability", "status"])
    return frame.sort_values(["stability", "concept"], ascending=[False, True], ignore_index=True)


def stability_histogram(table: pd.DataFrame, threshold: float) -> go.Figure:
    """Histogram of the concepts' stability with the threshold marked."""
    fig = go.Figure(
        go.Histogram(
            x=table["stability"].to_numpy(float),
            nbinsx=30,
            hovertemplate="stability %{x} ΔE<br>%{y} concepts<extra></extra>",
        )
    )
    fig.add_vline(x=threshold, line_dash="dash", annotation_text=f"threshold {threshold:g}")
    fig.update_layout(
        xaxis_title=f"P_H stability: {QUANTILE:.0%} quantile of resampled EMD (ΔE)",
        yaxis_title="concepts",
        **LAYOUT,
    )
    return fig


def extra_targets(
    db: sqlite_utils.Database, annotator_id: int, mode: Mode, rng: np.random.Generator, n: int
) -> list[str]:
    """Up to `n` concepts past ``min_k`` the designer may take in adaptive mode.

    Candidates are the pool's concepts under ``cap`` (counted colorings and live
    reservations) that the designer has neither colored nor reserved
    (`annotation.assignment.pool_rows`), with at least ``min_k`` counted colorings and a
    stability above ``threshold``; least covered first, ties in random order. At most
    `COMPUTE_BUDGET` stale stabilities are computed per call (it runs inside the
    reservation's transaction); a concept left uncomputed is skipped this time.
    """
    if n <= 0:
        return []
    rows = pool_rows(db, "coloring", annotator_id, mode.cap)
    order = sorted(rng.permutation(len(rows)), key=lambda i: rows[i][1])
    picked, computed = [], 0
    for i in order:
        concept = rows[i][0]
        found = stabilities(db, [concept], compute=False)
        if not found and computed < COMPUTE_BUDGET:
            found, computed = stabilities(db, [concept]), computed + 1
        if found and found[0].n_colorings >= mode.min_k and found[0].value > mode.threshold:
            picked.append(concept)
            if len(picked) == n:
                break
    return picked


@dataclass(frozen=True)
class StabilityView:
    """What the admin and researcher see: a summary line, the per-concept table, the histogram."""

    text: str
    table: pd.DataFrame
    figure: go.Figure | None  # None when no concept has counted colorings


def stability_view(db: sqlite_utils.Database, *, max_compute: int = VIEW_COMPUTE) -> StabilityView:
    """`stability_table` (computing up to `max_compute` stale values, so a request stays
    short), its histogram and a summary under the stored mode that says how many are left."""
    mode = read_mode(db)
    table = stability_table(db, mode, max_compute=max_compute)
    unstable = int((table["status"] == "unstable").sum())
    left = len({c["concept_key"] for c in human.counted_colorings(db)}) - len(table)
    if table.empty and not left:
        # Nothing to measure: said, and no empty histogram drawn under it.
        text = f"Assignment mode: {mode.describe()}.  \nNo concept has counted designer colorings yet: nothing to measure."
        return StabilityView(text, table, None)
    text = (
        f"Assignment mode: {mode.describe()}.  \n"
        + (f"{counted(left, 'concept')} not computed yet: show again to continue.  \n" if left else "")
        + f"{counted(len(table), 'concept')} with counted colorings; {unstable} above {mode.threshold:g} ΔE "
        f"(stability: the {QUANTILE:.0%} quantile of the EMD between P_H resampled over its "
        f"colorings and the full P_H; {N_RESAMPLES} resamples, seed {SEED} with the concept key)."
    )
    return StabilityView(text, table, stability_histogram(table, mode.threshold))
