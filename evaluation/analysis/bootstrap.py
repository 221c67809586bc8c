"""Bootstrap confidence intervals for the leaderboard's tables (issue 19, item 3).

Every table of `evaluation.analysis.tables` is a mean (or a ratio of means) over
concepts, so its uncertainty comes from which concepts were asked about and, for the
designers' P_H, from which designers colored them. Two resampling schemes:

- **Concepts** (always): each replicate draws the concepts with replacement, separately
  within each modifier type (the design fixes how many concepts each type has), and the
  same draw serves every model, style and scale of the replicate, so differences between
  models are paired. A concept's weight in a replicate is how often it was drawn
  (`concept_weights`); every statistic is then a weighted mean of the per-concept
  values, computed for all replicates at once (`group_means`).
- **Colorings** (optional, designers' P_H only): before scoring, each concept's P_H is
  replaced by one of ``R`` replicates computed from its colorings drawn with replacement
  (`resampled_distributions`); a bootstrap replicate picks one P_H replicate per concept
  at random. This adds the designers' sampling error to the concepts' (a two-stage
  bootstrap).

Intervals are percentile intervals of the replicates (`percentile_interval`); the
resample count, seed and level travel with them (`Resampling.describe`). The coverage
is checked on synthetic data with a known mean in ``tests/evaluation/analysis/test_bootstrap.py``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evaluation.color.colorspace import srgb_to_lab
from evaluation.color.extraction import bin_index, dominant_color, group_images, merge_colors
from evaluation.color.palette import N_BINS, nearest_uw71
from storage.shown import shown

#: Default resamples, seed and confidence level of every interval in the app and CLI.
N_RESAMPLES = 1000
SEED = 0
CI = 0.95
#: Upper bounds that keep one request of the web app to seconds (memory grows with both).
MAX_RESAMPLES = 20_000
#: Fewer resamples give no interval worth printing.
MIN_RESAMPLES = 10
MAX_COLORINGS = 200
#: Resamples of the Concept browser's intervals on people's shifts (`shift_intervals`): each
#: distinct draw of a concept's colorings costs one extraction (~4 ms), and with more than
#: 5 colorings (adaptive mode) nearly every resample is distinct.
SHIFT_RESAMPLES = 200
#: Differences within this of 0 are ties (two models equal up to rounding), never distinguishable.
TIE = 1e-9
#: A cell over fewer concepts has no interval: resampling one concept gives back its value.
MIN_INTERVAL_CONCEPTS = 2
#: Two models are called distinguishable only where both cells average at least this many
#: concepts. From n concepts a percentile bootstrap has C(2n - 1, n) distinct resamples (3
#: at n = 2, 35 at 4, 126 at 5): below 5 its 2.5th and 97.5th percentiles are hardly more
#: than the extremes, and a "distinguishable" would rest on a handful of concepts.
MIN_RANK_CONCEPTS = 5


@dataclass(frozen=True)
class Resampling:
    """How intervals are drawn: resample count, seed, level and whether colorings are resampled.

    Attributes
    ----------
    n_resamples : int
        Bootstrap replicates, 10 to `MAX_RESAMPLES`.
    seed : int
        Seed of the `numpy.random.Generator` (>= 0).
    ci : float
        Confidence level in (0, 1).
    colorings : int
        P_H replicates per concept for the two-stage scheme (0: concepts only), at most
        `MAX_COLORINGS`.
    """

    n_resamples: int = N_RESAMPLES
    seed: int = SEED
    ci: float = CI
    colorings: int = 0

    def __post_init__(self):
        for name, low, high in (
            ("n_resamples", MIN_RESAMPLES, MAX_RESAMPLES),
            ("seed", 0, 2**63 - 1),
            ("colorings", 0, MAX_COLORINGS),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"`{name}` must be a whole number of at least {low}, got {shown(value)}")
            if value > high:
                raise ValueError(f"`{name}` must be at most {high}, got {shown(value)}")
        if not (isinstance(self.ci, (int, float)) and 0 < self.ci < 1):
            raise ValueError(f"`ci` must be in (0, 1), got {shown(self.ci)}")

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def describe(self) -> str:
        """One line for under a table, e.g. ``95% intervals: 1000 bootstrap resamples ...``."""
        what = "concepts (within each modifier type)"
        if self.colorings:
            what += f" and each concept's colorings ({self.colorings} P_H replicates per concept)"
        return f"{self.ci:.0%} percentile intervals from {self.n_resamples} bootstrap resamples of {what}, seed {self.seed}."


#: The intervals every view shows unless asked otherwise.
DEFAULT = Resampling()
#: The Concept browser's intervals on people's shifts.
SHIFT_DEFAULT = Resampling(n_resamples=SHIFT_RESAMPLES)


def concept_weights(strata: Sequence[str], n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each concept is drawn in each replicate, drawing within strata.

    Parameters
    ----------
    strata : sequence of str, length n
        Each concept's stratum (its modifier type); a stratum of m concepts gets m draws.
    n_resamples : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n_resamples, n), float64
        Counts; every row sums to n.
    """
    strata = np.asarray(strata, dtype=object)
    weights = np.zeros((n_resamples, len(strata)))
    for stratum in sorted(set(strata.tolist())):
        members = np.flatnonzero(strata == stratum)
        m = len(members)
        draws = rng.integers(0, m, size=(n_resamples, m))
        cells = (np.arange(n_resamples)[:, None] * m + draws).ravel()  # (replicate, member)
        weights[:, members] = np.bincount(cells, minlength=n_resamples * m).reshape(n_resamples, m)
    return weights


@dataclass(frozen=True)
class Draws:
    """One set of replicates shared by every table: concept weights and P_H picks.

    Attributes
    ----------
    keys : list of str
        Concept keys, the columns of `weights`.
    weights : ndarray, shape (B, n)
        `concept_weights`.
    picks : ndarray of int, shape (B, n), or None
        Which P_H replicate each concept uses in each bootstrap replicate (colorings
        scheme); None for concepts only.
    resampling : Resampling
    """

    keys: list
    weights: np.ndarray
    picks: np.ndarray | None
    resampling: Resampling


def draws(concepts: pd.DataFrame, resampling: Resampling) -> Draws:
    """The replicates for the concepts of `concepts` (columns ``concept, modifier_type``)."""
    unique = concepts.drop_duplicates("concept").sort_values("concept")
    rng = resampling.rng()
    weights = concept_weights(unique["modifier_type"].tolist(), resampling.n_resamples, rng)
    picks = rng.integers(0, resampling.colorings, size=weights.shape) if resampling.colorings else None
    return Draws(unique["concept"].tolist(), weights, picks, resampling)


def group_means(
    frame: pd.DataFrame, by: Sequence[str], column: str, boot: Draws
) -> tuple[pd.DataFrame, np.ndarray]:
    """Per group the mean of `column` over its rows (NaN skipped), and its replicates.

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows with ``concept``, the `by` columns and `column`; with the colorings scheme
        `column` may hold, instead of numbers, arrays of shape (R,): the value under each
        P_H replicate.
    by : sequence of str
    column : str
    boot : Draws

    Returns
    -------
    groups : pandas.DataFrame
        The `by` values of each group and ``value``, the plain mean.
    replicates : ndarray, shape (B, G)
        The weighted means of each replicate (NaN where a replicate draws no row of the
        group with a value).
    """
    groups = group_rows(frame, by, boot)
    point, reps = groups.means(frame[column])
    return groups.groups.assign(value=point), reps


@dataclass
class Groups:
    """The rows of one frame in groups (`group_rows`), for the means of several of its
    columns (`means`) without grouping it again.

    ``codes`` (N,) is each row's group, ``groups`` the `by` values of each group (sorted),
    ``j`` (N,) each row's concept as a column of ``boot.weights``; ``counted`` keeps the
    replicated row counts of a column without NaN, the same for every such column.
    """

    codes: np.ndarray
    groups: pd.DataFrame
    j: np.ndarray
    boot: Draws
    counted: tuple[np.ndarray, np.ndarray] | None = None

    def means(self, column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        """Point means (G,) and replicate means (B, G) of `column` (numbers, or (R,) arrays
        under the colorings scheme; NaN skipped), as `group_means` gives them."""
        values = _values(column)
        n, g = len(self.boot.keys), len(self.groups)
        if values.ndim > 1:
            return _picked_means(values, self.j, self.codes, n, g, self.boot)
        sums, counts = _accumulate(values, self.j, self.codes, n, g)
        complete = not np.isnan(values).any()
        if complete and self.counted is not None:
            total, replicated = self.counted
        else:
            total, replicated = counts.sum(0), self.boot.weights @ counts
            if complete:
                self.counted = (total, replicated)
        # A group with no defined value (ΔHue where every dominant color is grey) is NaN.
        with np.errstate(invalid="ignore", divide="ignore"):
            point = sums.sum(0) / total if g else np.empty(0)
            reps = (self.boot.weights @ sums) / replicated
        return point, reps


def group_rows(frame: pd.DataFrame, by: Sequence[str], boot: Draws) -> Groups:
    """`frame`'s rows (with ``concept`` and the `by` columns) in groups by `by`, each row
    tied to its concept's column of `boot`'s weights (ValueError for a concept `boot` lacks)."""
    codes, groups = _codes(frame, by)
    j = pd.Index(boot.keys).get_indexer(frame["concept"])
    if (j < 0).any():
        raise ValueError(
            f"`frame` names concepts the draws do not: {sorted(set(frame['concept'][j < 0]))[:5]}"
        )
    return Groups(codes, groups, j, boot)


def _values(column: pd.Series) -> np.ndarray:
    """A metric column as (N,) floats, or (N, R) where it holds (R,) arrays."""
    if column.dtype == object and len(column):
        return np.stack(column.to_numpy()).astype(float)
    return column.to_numpy(float)


def _codes(frame: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    grouped = frame.groupby(list(by), sort=True)
    codes = grouped.ngroup().to_numpy()
    groups = grouped.size().reset_index()[list(by)]
    return codes, groups


def _accumulate(values, j, codes, n, g) -> tuple[np.ndarray, np.ndarray]:
    defined = ~np.isnan(values)
    cell = j[defined] * g + codes[defined]
    sums = np.bincount(cell, weights=values[defined], minlength=n * g).reshape(n, g)
    counts = np.bincount(cell, minlength=n * g).astype(float).reshape(n, g)
    return sums, counts


def _picked_means(values, j, codes, n, g, boot: Draws) -> tuple[np.ndarray, np.ndarray]:
    """Group means when each row's value depends on its concept's P_H replicate."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a group with no defined value: NaN
        point = np.array([np.nanmean(values[codes == c].mean(axis=1)) for c in range(g)])
        reps = np.empty((len(boot.weights), g))
        rows = np.arange(len(values))
        for b, (weights, pick) in enumerate(zip(boot.weights, boot.picks)):
            sums, counts = _accumulate(values[rows, pick[j] % values.shape[1]], j, codes, n, g)
            reps[b] = (weights @ sums) / (weights @ counts)
    return point, reps


def percentile_interval(replicates: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper percentile bounds of (B, ...) replicates along axis 0 (NaN skipped;
    NaN where every replicate is NaN)."""
    q = [50 * (1 - ci), 50 * (1 + ci)]
    values = np.asarray(replicates)
    if values.dtype != np.float64 or values.ndim < 2 or values.size == 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = np.nanpercentile(values, q, axis=0)
        return lo, hi
    # `nanpercentile` handles a column at a time; a column without NaN gets the same
    # bounds from `percentile` (the same order statistics and interpolation), all at once.
    flat = values.reshape(len(values), -1)
    gaps = np.isnan(flat).any(axis=0)
    bounds = np.empty((2, flat.shape[1]))
    bounds[:, ~gaps] = np.percentile(flat[:, ~gaps], q, axis=0)
    if gaps.any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            bounds[:, gaps] = np.nanpercentile(flat[:, gaps], q, axis=0)
    lo, hi = bounds.reshape((2, *values.shape[1:]))
    return lo, hi


def mean_intervals(
    frame: pd.DataFrame, by: Sequence[str], metric_names: Sequence[str], boot: Draws
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """`group_means` of several metrics: one frame with ``<m>``, ``<m>_lo``, ``<m>_hi``.

    Returns the frame (sorted by `by`) and each metric's replicates (B, G).
    """
    grouped = group_rows(frame, by, boot)
    out, reps = None, {}
    for name in metric_names:
        point, replicates = grouped.means(frame[name])
        lo, hi = percentile_interval(replicates, boot.resampling.ci)
        part = grouped.groups.assign(**{name: point, f"{name}_lo": lo, f"{name}_hi": hi})
        out = part if out is None else out.merge(part, on=list(by), how="outer")
        reps[name] = replicates
    return out, reps


#: The columns of `ranking_significance`.
PAIR_COLUMNS = ("better", "worse", "difference", "difference_lo", "difference_hi", "distinguishable")


def ranking_significance(
    groups: pd.DataFrame, replicates: np.ndarray, higher_is_better: bool, ci: float
) -> pd.DataFrame:
    """Which adjacent models of one column are distinguishable.

    Parameters
    ----------
    groups : pandas.DataFrame
        One row per model (column ``model``) with ``value``.
    replicates : ndarray, shape (B, len(groups))
        Paired replicates of the models' values (one concept draw per row).
    higher_is_better : bool
    ci : float

    Returns
    -------
    pandas.DataFrame
        One row per adjacent pair in rank order: ``better, worse, difference`` (better −
        worse in the metric's better direction, >= 0), ``difference_lo``,
        ``difference_hi`` and ``distinguishable`` (the interval excludes 0 by more than
        `TIE`).
    """
    rows = adjacent_pairs(
        groups["model"].tolist(), groups["value"].to_numpy(float), replicates, higher_is_better, ci
    )
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def adjacent_pairs(models, values, replicates, higher_is_better, ci, counts=None) -> list[dict]:
    """The rows of `ranking_significance` as dicts (`PAIR_COLUMNS`), for callers that rank
    many groups at once: `models` (G,), `values` (G,), `replicates` (B, G).

    With `counts` (G,), the concepts each value averages, each row also has ``n_concepts``
    (the smaller count of the two) and is distinguishable only from `MIN_RANK_CONCEPTS`
    concepts on."""
    order = [
        i
        for i in np.argsort(-values if higher_is_better else values, kind="stable")
        if np.isfinite(values[i])
    ]
    if len(order) < 2:
        return []
    sign = 1.0 if higher_is_better else -1.0
    better, worse = np.array(order[:-1]), np.array(order[1:])
    lows, highs = percentile_interval(sign * (replicates[:, better] - replicates[:, worse]), ci)
    rows = [
        {
            "better": models[a],
            "worse": models[b],
            "difference": sign * (values[a] - values[b]),
            "difference_lo": float(lo),
            "difference_hi": float(hi),
            "distinguishable": bool(lo > TIE or hi < -TIE),
        }
        for a, b, lo, hi in zip(better, worse, lows, highs)
    ]
    if counts is not None:
        for row, a, b in zip(rows, better, worse):
            row["n_concepts"] = int(min(counts[a], counts[b]))
            row["distinguishable"] &= row["n_concepts"] >= MIN_RANK_CONCEPTS
            if row["n_concepts"] < MIN_INTERVAL_CONCEPTS:  # as its cells: no interval, not [d, d]
                row["difference_lo"] = row["difference_hi"] = math.nan
    return rows


def resampled_distributions(
    pixels: Sequence[np.ndarray],
    n_resamples: int,
    rng: np.random.Generator,
    *,
    group_threshold: float = 12.0,
    top_colors: int = 20,
    merge_threshold: float = 7.0,
) -> np.ndarray:
    """P_H replicates of one concept: the extraction over its colorings drawn with replacement.

    Equal to `evaluation.color.extraction.distribution_from_pixels` (default options) on
    the drawn list, but each image's dominant color and 8×8×8 bin counts and sums are
    computed once, and a drawn multiset is extracted once however often it is drawn:
    pooling an image twice doubles its bin counts and sums, and a repeated image joins its
    own group.

    Parameters
    ----------
    pixels : sequence of ndarray, each (N_i, 3) uint8
        Each coloring's sampled pixels (sRGB [0, 255]), n >= 1.
    n_resamples : int
    rng : numpy.random.Generator
    group_threshold, top_colors, merge_threshold : float, int, float
        As `distribution_from_pixels`.

    Returns
    -------
    ndarray, shape (n_resamples, 71)
        Replicate distributions (rows sum to 1).
    """
    if len(pixels) == 0:
        raise ValueError("`pixels` is empty: a distribution needs at least one coloring")
    n = len(pixels)
    dominants = np.array([dominant_color(px) for px in pixels])
    counts = np.stack([np.bincount(bin_index(px, 8), minlength=512) for px in pixels]).astype(float)
    sums = np.stack(
        [
            np.stack([np.bincount(bin_index(px, 8), weights=px[:, c], minlength=512) for c in range(3)], -1)
            for px in pixels
        ]
    )
    cache: dict[tuple, np.ndarray] = {}
    out = np.empty((n_resamples, N_BINS))
    for r, drawn in enumerate(rng.integers(0, n, size=(n_resamples, n))):
        multiplicity = np.bincount(drawn, minlength=n)
        key = tuple(multiplicity.tolist())
        if key not in cache:
            cache[key] = _multiset_distribution(
                multiplicity, dominants, counts, sums, group_threshold, top_colors, merge_threshold
            )
        out[r] = cache[key]
    return out


def _multiset_distribution(multiplicity, dominants, counts, sums, group_threshold, top, merge_threshold):
    chosen = np.flatnonzero(multiplicity)
    p = np.zeros(N_BINS)
    for members in group_images(dominants[chosen], threshold=group_threshold):
        images = chosen[members]
        weight = multiplicity[images].astype(float)
        pooled = weight @ counts[images]
        kept = np.argsort(-pooled, kind="stable")[:top]
        kept = kept[pooled[kept] > 0]
        colors = np.einsum("i,ikc->kc", weight, sums[images][:, kept]) / pooled[kept, None] / 255.0
        lab, mass = merge_colors(srgb_to_lab(colors), pooled[kept], threshold=merge_threshold)
        group = np.bincount(nearest_uw71(lab), weights=mass / mass.sum(), minlength=N_BINS)
        p += weight.sum() / multiplicity.sum() * group / group.sum()
    return p / p.sum()


def stability(replicates: np.ndarray, full: np.ndarray, *, quantile: float = 0.9) -> float:
    """The `quantile` of EMD between each replicate P_H and the full one (CIELAB ΔE units)."""
    from evaluation.color.metrics import emd_rows

    distances = emd_rows(replicates, np.broadcast_to(full, replicates.shape), workers=1)
    return float(np.quantile(distances, quantile))


def shift_intervals(
    pixels_by_concept: Mapping[str, Sequence[np.ndarray]], base: str, resampling: Resampling
) -> pd.DataFrame:
    """Intervals of the human shift from `base` to each variant, resampling each concept's colorings.

    Each concept's P_H is replaced by ``resampling.n_resamples`` replicates
    (`resampled_distributions`: its colorings drawn with replacement, independently per
    concept, since different designers colored them); replicate b of a variant's shift is
    EMD(base replicate b, variant replicate b). Concepts are drawn in key order from one
    generator seeded with ``[resampling.seed, 2]``.

    Parameters
    ----------
    pixels_by_concept : Mapping of str to sequence of ndarray, each (N_i, 3) uint8
        Each concept's colorings' sampled pixels (sRGB [0, 255]): the base and any of its
        variants; concepts with no coloring are left out.
    base : str
        The base concept's key.
    resampling : Resampling
        Resample count, seed and level (``colorings`` is not used).

    Returns
    -------
    pandas.DataFrame
        ``concept, shift_lo, shift_hi`` (CIELAB ΔE units), one row per variant of
        `pixels_by_concept` in key order; empty when the base has no colorings.
    """
    from evaluation.color.metrics import emd_rows

    columns = ["concept", "shift_lo", "shift_hi"]
    keys = sorted(k for k, v in pixels_by_concept.items() if len(v))
    if base not in keys:
        return pd.DataFrame(columns=columns)
    rng = np.random.default_rng([resampling.seed, 2])
    reps = {k: resampled_distributions(pixels_by_concept[k], resampling.n_resamples, rng) for k in keys}
    rows = []
    for key in keys:
        if key != base:
            lo, hi = percentile_interval(emd_rows(reps[base], reps[key], workers=1), resampling.ci)
            rows.append({"concept": key, "shift_lo": float(lo), "shift_hi": float(hi)})
    return pd.DataFrame(rows, columns=columns)


def human_replicates(
    pixels_by_concept: Mapping[str, Sequence[np.ndarray]], resampling: Resampling
) -> dict[str, np.ndarray]:
    """`resampled_distributions` of each concept (``resampling.colorings`` each), seeded in key order."""
    rng = np.random.default_rng([resampling.seed, 1])
    return {
        key: resampled_distributions(pixels_by_concept[key], resampling.colorings, rng)
        for key in sorted(pixels_by_concept)
    }
