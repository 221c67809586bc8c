"""Quality-control statistics: expert vote agreement and designer consistency.

Pure functions on arrays and pandas objects (Appendix B.4 of ColorConceptBench); the
database side of quality control lives elsewhere and calls these.

Vote counts are ``(consistent, inconsistent)`` pairs per coloring. From the counts alone
one can compute the vote patterns (Table 5), the majority decisions, the mean observed
agreement P̄ (Eq. 7), Fleiss' kappa and Krippendorff's alpha: both chance-corrected
coefficients depend only on how many raters chose each category per item. Which expert
cast which vote is needed only for each expert's agreement with the majority; pass it as
a rater-level matrix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import krippendorff
import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import fleiss_kappa

from evaluation.color import metrics
from storage.shown import shown

CONSISTENT = "consistent"
INCONSISTENT = "inconsistent"
UNDECIDED = "undecided"
HIGH_VARIANCE_FRACTION = 0.10


@dataclass(frozen=True)
class RaterAgreement:
    """One expert's agreement with the majority decision.

    Attributes
    ----------
    rater : str
        The rater's label (column label of the rater-level matrix).
    n_votes : int
        Colorings this rater voted on that have a majority decision.
    agreement : float
        Share of those votes equal to the majority decision, in [0, 1]; NaN if
        ``n_votes`` is 0. The majority includes the rater's own vote: of three votes, a
        rater agrees with it whenever one other does.
    with_others : float
        Share of the other raters' votes on the colorings this rater voted on that equal
        this rater's vote (pairwise agreement, pooled over colorings), in [0, 1]; NaN when
        no other rater voted on them.
    """

    rater: str
    n_votes: int
    agreement: float
    with_others: float = math.nan


@dataclass(frozen=True)
class AgreementSummary:
    """The numbers behind the expert-agreement panel.

    Attributes
    ----------
    n_colorings : int
        Colorings with votes.
    patterns : tuple of (int, int, int)
        ``(consistent, inconsistent, count)`` for every split of each vote total that
        occurs, most consistent first; zero counts included (Table 5).
    n_discarded : int
        Colorings whose majority is Inconsistent.
    n_undecided : int
        Colorings with as many Consistent as Inconsistent votes (impossible with three).
    mean_observed_agreement : float
        P̄ of Eq. 7: the mean over colorings of Fleiss' P_i, in [0, 1].
    fleiss_kappa : float
        Fleiss' kappa (statsmodels); NaN when colorings have different numbers of
        votes or all votes fall in one category.
    krippendorff_alpha : float
        Krippendorff's alpha, nominal level (krippendorff package); NaN when all votes
        fall in one category.
    rater_agreement : tuple of RaterAgreement or None
        Per expert, only when a rater-level matrix was given.
    """

    n_colorings: int
    patterns: tuple[tuple[int, int, int], ...]
    n_discarded: int
    n_undecided: int
    mean_observed_agreement: float
    fleiss_kappa: float
    krippendorff_alpha: float
    rater_agreement: tuple[RaterAgreement, ...] | None = None

    def table5(self) -> pd.DataFrame:
        """Table 5 layout: one row per vote pattern plus a total.

        Returns
        -------
        pandas.DataFrame
            Columns ``expert_votes`` (e.g. ``"2 Yes / 1 No"``), ``interpretation`` and
            ``count``.
        """
        rows = [
            {
                "expert_votes": f"{c} Yes / {i} No",
                "interpretation": _interpretation(c, i),
                "count": n,
            }
            for c, i, n in self.patterns
        ]
        rows.append({"expert_votes": "Total", "interpretation": "", "count": self.n_colorings})
        return pd.DataFrame(rows)


def _interpretation(consistent: int, inconsistent: int) -> str:
    decision = majority_decision(consistent, inconsistent)
    if decision == UNDECIDED:
        return "Tie"
    unanimous = consistent == 0 or inconsistent == 0
    return f"{'Unanimous' if unanimous else 'Majority'} {decision.capitalize()}"


def majority_decision(consistent: int, inconsistent: int) -> str:
    """The majority rule for one coloring.

    Parameters
    ----------
    consistent, inconsistent : int
        Vote counts, each >= 0.

    Returns
    -------
    str
        ``"consistent"`` or ``"inconsistent"`` for a strict majority, ``"undecided"``
        for a tie (including no votes), which the caller keeps pending.

    Raises
    ------
    ValueError
        If a count is negative or not an integer.

    Examples
    --------
    >>> majority_decision(1, 2)
    'inconsistent'
    """
    for name, value in (("consistent", consistent), ("inconsistent", inconsistent)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative integer, got {shown(value)}")
    if consistent > inconsistent:
        return CONSISTENT
    if inconsistent > consistent:
        return INCONSISTENT
    return UNDECIDED


def _check_votes(votes) -> np.ndarray:
    arr = np.asarray(votes)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
        raise ValueError(f"`votes` must have shape (n, 2) with n >= 1, got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer) and not np.all(np.mod(arr, 1) == 0):
        raise ValueError("`votes` must hold integer counts")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        raise ValueError(f"`votes` must be non-negative, got minimum {arr.min()}")
    if arr.sum(axis=1).min() < 2:
        raise ValueError("every coloring in `votes` needs at least 2 votes for agreement")
    return arr


def _observed_agreement(votes: np.ndarray) -> np.ndarray:
    """Fleiss' P_i per row: matching rater pairs over all rater pairs."""
    n = votes.sum(axis=1)
    return (votes * (votes - 1)).sum(axis=1) / (n * (n - 1))


def _patterns(votes: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    out = []
    for total in sorted(set(votes.sum(axis=1).tolist())):
        for c in range(total, -1, -1):
            count = int(np.sum((votes[:, 0] == c) & (votes[:, 1] == total - c)))
            out.append((c, total - c, count))
    return tuple(out)


def _chance_corrected(votes: np.ndarray) -> tuple[float, float]:
    with np.errstate(invalid="ignore", divide="ignore"):
        equal_n = np.unique(votes.sum(axis=1)).size == 1
        kappa = float(fleiss_kappa(votes)) if equal_n else math.nan
        alpha = float(krippendorff.alpha(value_counts=votes, level_of_measurement="nominal"))
    return kappa, alpha


def _rater_agreement(ratings: pd.DataFrame, votes: np.ndarray) -> tuple[RaterAgreement, ...]:
    if not isinstance(ratings, pd.DataFrame):
        raise ValueError(
            f"`ratings` must be a pandas DataFrame (one column per expert), got {type(ratings).__name__}"
        )
    values = ratings.to_numpy(dtype=float)
    if values.shape[0] != votes.shape[0]:
        raise ValueError(
            f"`ratings` must have one row per coloring ({votes.shape[0]}), got {values.shape[0]}"
        )
    known = ~np.isnan(values)
    if not np.all(np.isin(values[known], (0.0, 1.0))):
        raise ValueError("`ratings` must hold 1 (consistent), 0 (inconsistent) or NaN")
    counted = np.stack([(values == 1).sum(axis=1), (values == 0).sum(axis=1)], axis=1)
    if not np.array_equal(counted, votes):
        bad = int(np.flatnonzero((counted != votes).any(axis=1))[0])
        raise ValueError(
            f"`ratings` row {bad} gives counts {counted[bad].tolist()}, "
            f"but `votes` says {votes[bad].tolist()}"
        )
    majority = np.where(votes[:, 0] > votes[:, 1], 1.0, np.where(votes[:, 1] > votes[:, 0], 0.0, np.nan))
    out = []
    for j, rater in enumerate(ratings.columns):
        mask = known[:, j] & ~np.isnan(majority)
        n = int(mask.sum())
        share = float(np.mean(values[mask, j] == majority[mask])) if n else math.nan
        mine = known[:, j]
        # The others' votes equal to this rater's: the count of that verdict, less their own.
        same = np.where(values[mine, j] == 1, votes[mine, 0], votes[mine, 1]) - 1
        others = votes[mine].sum(axis=1) - 1
        with_others = float(same.sum() / others.sum()) if others.sum() else math.nan
        out.append(RaterAgreement(str(rater), n, share, with_others))
    return tuple(out)


def agreement_summary(votes, *, ratings: pd.DataFrame | None = None) -> AgreementSummary:
    """Agreement statistics of the blind expert votes (Table 5, Eq. 7).

    Parameters
    ----------
    votes : array_like of int, shape (n, 2)
        ``(consistent, inconsistent)`` vote counts per coloring; each row sums to >= 2.
    ratings : pandas.DataFrame, optional
        Rater-level votes, shape (n, n_raters): one row per coloring in the order of
        `votes`, one column per expert (the column label names the expert), values 1
        (consistent), 0 (inconsistent) or NaN (did not vote). Its per-row counts must
        equal `votes`. Needed only for `AgreementSummary.rater_agreement`.

    Returns
    -------
    AgreementSummary

    Raises
    ------
    ValueError
        If `votes` is not an (n, 2) array of non-negative integer counts with at least
        two votes per row, or `ratings` does not match it.

    Notes
    -----
    Fleiss' observed agreement of coloring i with n_i votes, n_ij of them in category j, is

    .. math:: P_i = \\frac{1}{n_i (n_i - 1)} \\sum_j n_{ij} (n_{ij} - 1),

    so a 3/0 split gives 1 and a 2/1 split gives 1/3; P̄ is their mean (Eq. 7). With the
    paper's counts (399, 127, 32, 4 for 3/0, 2/1, 1/2, 0/3) P̄ = 456/562 = 0.811 and
    36 colorings are discarded.

    References
    ----------
    .. [1] J. L. Fleiss, "Measuring nominal scale agreement among many raters",
       Psychological Bulletin 76(5), 1971.
    .. [2] K. Krippendorff, "Computing Krippendorff's alpha-reliability", 2011.

    Examples
    --------
    >>> s = agreement_summary([[3, 0], [2, 1]])
    >>> round(s.mean_observed_agreement, 4)
    0.6667
    """
    arr = _check_votes(votes)
    kappa, alpha = _chance_corrected(arr)
    return AgreementSummary(
        n_colorings=int(arr.shape[0]),
        patterns=_patterns(arr),
        n_discarded=int(np.sum(arr[:, 1] > arr[:, 0])),
        n_undecided=int(np.sum(arr[:, 1] == arr[:, 0])),
        mean_observed_agreement=float(_observed_agreement(arr).mean()),
        fleiss_kappa=kappa,
        krippendorff_alpha=alpha,
        rater_agreement=None if ratings is None else _rater_agreement(ratings, arr),
    )


def consistency_scores(distributions_by_concept: Mapping[str, np.ndarray]) -> pd.Series:
    """Mean pairwise EMD among the designers' distributions of each concept (Eq. 6).

    Parameters
    ----------
    distributions_by_concept : mapping of str to array_like, shape (n_c, 71)
        Per concept key, one UW-71 distribution per designer (rows sum to 1), n_c >= 2.

    Returns
    -------
    pandas.Series
        Float, indexed by concept key in input order, named ``"consistency_emd"``: the
        mean of EMD(p_i, p_j) over the n_c (n_c - 1) / 2 unordered pairs, in CIELAB
        ΔE units. Higher means less consensus.

    Raises
    ------
    ValueError
        If a concept has fewer than two distributions or a distribution is malformed
        (the latter raised by `evaluation.color.metrics.emd_rows`).
    """
    firsts, seconds, pairs = [], [], []
    for concept, dists in distributions_by_concept.items():
        arr = np.asarray(dists, dtype=float)
        if arr.ndim != 2 or arr.shape[0] < 2:
            raise ValueError(
                f"concept {concept!r} needs an (n >= 2, 71) array of distributions, got shape {arr.shape}"
            )
        i, j = np.array(list(combinations(range(arr.shape[0]), 2))).T
        firsts.append(arr[i])
        seconds.append(arr[j])
        pairs.append(len(i))
    if not pairs:
        return pd.Series({}, name="consistency_emd", dtype=float)
    # Every pair of every concept in one batch (each pair is solved on its own, so the
    # values are those of one call per concept, without 1,278 calls' overhead).
    emds = np.split(metrics.emd_rows(np.concatenate(firsts), np.concatenate(seconds)), np.cumsum(pairs)[:-1])
    scores = {concept: float(np.mean(e)) for concept, e in zip(distributions_by_concept, emds)}
    return pd.Series(scores, name="consistency_emd", dtype=float)


def high_variance(scores: pd.Series, top_fraction: float = HIGH_VARIANCE_FRACTION) -> pd.Series:
    """Mark the concepts with the highest consistency scores (lowest consensus).

    Parameters
    ----------
    scores : pandas.Series
        Consistency scores indexed by concept key (see `consistency_scores`).
    top_fraction : float
        Share of concepts to mark, in (0, 1]; the paper uses 0.10.

    Returns
    -------
    pandas.Series
        Bool, same index and order as `scores`, named ``"high_variance"``. The
        ``ceil(top_fraction * n)`` highest scores are marked (at least one); equal scores
        at the cutoff are broken by concept key, ascending, so the result is
        deterministic. A score of 0 (every designer gave the same distribution) is never
        marked: there is no disagreement to review, whatever its rank.

    Raises
    ------
    ValueError
        If `top_fraction` is outside (0, 1], `scores` is empty or holds NaN.
    """
    if not 0 < top_fraction <= 1:
        raise ValueError(f"`top_fraction` must be in (0, 1], got {shown(top_fraction)}")
    if len(scores) == 0 or scores.isna().any():
        raise ValueError("`scores` must be non-empty and free of NaN")
    k = math.ceil(top_fraction * len(scores))
    values = dict(zip(scores.index, scores.to_numpy()))
    order = sorted(values, key=lambda key: (-values[key], str(key)))
    flagged = {key for key in order[:k] if values[key] > 0}
    return pd.Series([key in flagged for key in scores.index], index=scores.index, name="high_variance")
