"""Analysis of the pairwise human-judgment study (§4.5, Appendix D, Table 3).

Votes come as a DataFrame with one row per trial and the columns of `VOTE_COLUMNS`:

======================  ==========================================================
``pair_id``             identifier of the (concept, unordered model pair)
``concept``             concept key
``model_a, model_b``    the two candidates (any order; placement is irrelevant here)
``chosen``              the model the participant picked
``participant_id``      participant identifier
``design_background``   bool: the participant has a design or art background
``attention_check``     bool: the trial was an attention check (one side is the
                        ground truth); such rows are not study votes
``attention_passed``    bool for attention checks, ignored otherwise
======================  ==========================================================

Metric values come as a DataFrame with columns ``concept, model`` and the metric
columns (``pcc, emd, ed, dca, hue_diff``, see `evaluation.analysis.tables.METRICS`), one row per
(concept, model) at the study's style and guidance scale. A frame with
``dominant_model``/``dominant_human`` instead of ``dca`` gets ``dca`` derived.
"""

from __future__ import annotations

import warnings

import choix
import numpy as np
import pandas as pd
from scipy import stats

from evaluation.analysis.tables import METRICS, dca_column, require_columns

VOTE_COLUMNS = (
    "pair_id",
    "concept",
    "model_a",
    "model_b",
    "chosen",
    "participant_id",
    "design_background",
    "attention_check",
    "attention_passed",
)
METRIC_TYPES = {
    "pcc": "Probabilistic",
    "emd": "Probabilistic",
    "ed": "Probabilistic",
    "dca": "Deterministic",
    "hue_diff": "Deterministic",
}
BT_ALPHA = 0.01
MAX_BOOT = 10_000
"""The most bootstrap resamples an analysis takes. A 95 % percentile interval settles to its
second digit well before that; each Bradley–Terry resample is a fit, so 10**9 of them would
hold the server for days."""
_BOOT_BLOCK = 2_000_000
"""Resampled pair indices held at once (16 MB): the pair bootstrap draws its resamples in
blocks of this many indices, so a study of 26,838 pairs takes no more memory at 10,000
resamples than at 74. Drawn block by block, the resamples are the same as drawn at once."""


def participant_flags(votes: pd.DataFrame, *, max_failures: int = 0) -> pd.DataFrame:
    """Attention-check record per participant.

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes (module docstring).
    max_failures : int
        A participant with more failed attention checks than this is flagged.

    Returns
    -------
    pandas.DataFrame
        Index ``participant_id``; columns ``participant`` (the pseudonym, first, where
        `votes` has it: the crowd's payment table names people by it, not by the app's
        id, outside probe 225), ``design_background``, ``n_votes`` (study votes),
        ``n_checks``, ``n_failed`` and ``flagged`` (bool).
    """
    require_columns(votes, VOTE_COLUMNS, "votes")
    check = votes["attention_check"].astype(bool)
    failed = check & ~votes["attention_passed"].fillna(False).astype(bool)
    grouped = pd.DataFrame(
        {
            "participant_id": votes["participant_id"],
            "design_background": votes["design_background"].astype(bool),
            "vote": ~check,
            "check": check,
            "failed": failed,
        }
    ).groupby("participant_id")
    out = pd.DataFrame(
        {
            "design_background": grouped["design_background"].first(),
            "n_votes": grouped["vote"].sum(),
            "n_checks": grouped["check"].sum(),
            "n_failed": grouped["failed"].sum(),
        }
    )
    out["flagged"] = out["n_failed"] > max_failures
    if "participant" in votes:
        out.insert(0, "participant", votes.groupby("participant_id")["participant"].first())
    return out


def study_votes(votes: pd.DataFrame, *, exclude_flagged: bool = False, max_failures: int = 0) -> pd.DataFrame:
    """The study's votes (attention checks removed) with a ``participant_flagged`` column.

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes (module docstring).
    exclude_flagged : bool
        Drop the votes of flagged participants (see `participant_flags`).
    max_failures : int
        See `participant_flags`.

    Returns
    -------
    pandas.DataFrame
        Columns of `votes` plus ``participant_flagged``; ``model_a < model_b`` in every
        row (sorted names).

    Raises
    ------
    ValueError
        If ``chosen`` is not one of the pair's models or a pair mixes concepts or models.
    """
    flags = participant_flags(votes, max_failures=max_failures)["flagged"]
    out = votes[~votes["attention_check"].astype(bool)].copy()
    out["participant_flagged"] = out["participant_id"].map(flags).astype(bool)
    lo = np.minimum(out["model_a"].astype(str), out["model_b"].astype(str))
    hi = np.maximum(out["model_a"].astype(str), out["model_b"].astype(str))
    out["model_a"], out["model_b"] = lo, hi
    bad = ~((out["chosen"] == out["model_a"]) | (out["chosen"] == out["model_b"]))
    if bad.any():
        row = out[bad].iloc[0]
        raise ValueError(
            f"pair {row['pair_id']!r}: `chosen` {row['chosen']!r} is neither {row['model_a']!r} nor {row['model_b']!r}"
        )
    mixed = out.groupby("pair_id")[["concept", "model_a", "model_b"]].nunique().max(axis=1) > 1
    if mixed.any():
        raise ValueError(f"pair {mixed[mixed].index[0]!r} mixes concepts or models across its votes")
    return out[~out["participant_flagged"]] if exclude_flagged else out


def pair_preferences(
    votes: pd.DataFrame, *, exclude_flagged: bool = False, max_failures: int = 0
) -> pd.DataFrame:
    """Share of votes per pair (Appendix D).

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes (module docstring).
    exclude_flagged, max_failures
        See `study_votes`.

    Returns
    -------
    pandas.DataFrame
        Columns ``pair_id, concept, model_a, model_b`` (sorted names), ``n_votes``,
        ``votes_a`` and ``share_a`` (votes for model_a ÷ n_votes, in [0, 1]).
    """
    data = study_votes(votes, exclude_flagged=exclude_flagged, max_failures=max_failures)
    data = data.assign(for_a=(data["chosen"] == data["model_a"]).astype(int))
    grouped = data.groupby(["pair_id", "concept", "model_a", "model_b"], sort=True)
    out = grouped["for_a"].agg(n_votes="size", votes_a="sum").reset_index()
    out["share_a"] = out["votes_a"] / out["n_votes"]
    return out


def _metric_table(metric_values: pd.DataFrame, names) -> pd.DataFrame:
    require_columns(metric_values, ("concept", "model"), "metric_values")
    frame = metric_values.copy()
    if "dca" not in frame and {"dominant_model", "dominant_human"} <= set(frame.columns):
        frame["dca"] = dca_column(frame)
    require_columns(frame, names, "metric_values")
    if frame.duplicated(["concept", "model"]).any():
        raise ValueError("`metric_values` must hold one row per (concept, model); select style and cfg first")
    return frame.set_index(["concept", "model"])[list(names)]


def _pair_differences(prefs: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Metric difference a − b per pair, signed so that positive favours model_a."""
    keys_a = pd.MultiIndex.from_arrays([prefs["concept"], prefs["model_a"]])
    keys_b = pd.MultiIndex.from_arrays([prefs["concept"], prefs["model_b"]])
    missing = keys_a.append(keys_b).difference(table.index)
    if len(missing):
        raise ValueError(f"`metric_values` has no row for (concept, model) {missing[0]!r}")
    diff = table.loc[keys_a].to_numpy(float) - table.loc[keys_b].to_numpy(float)
    sign = np.array([1.0 if METRICS[m][1] else -1.0 for m in table.columns])
    return pd.DataFrame(diff * sign, columns=table.columns, index=prefs.index)


def _coefficients(d: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson and Spearman per row of (B, n) arrays, each pair in both orientations."""
    d2 = np.concatenate([d, -d], axis=1)
    s2 = np.concatenate([s, 1.0 - s], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pearson = stats.pearsonr(d2, s2, axis=1).statistic
        spearman = stats.pearsonr(stats.rankdata(d2, axis=1), stats.rankdata(s2, axis=1), axis=1).statistic
    return np.atleast_1d(pearson), np.atleast_1d(spearman)


def _agreement(d: np.ndarray, s: np.ndarray, exclude_ties: bool) -> np.ndarray:
    """Agreement per row of (B, n) arrays (the last axis: pairs). A resample of only tied
    pairs scores as the rule says (0 when ties count as disagreements), like any other:
    only the data's own even split on every pair blanks the row (`_validated`)."""
    metric_pick, human_pick = np.sign(d), np.sign(s - 0.5)
    hit = ((metric_pick == human_pick) & (metric_pick != 0)).astype(float)
    if exclude_ties:
        hit[(metric_pick == 0) | (human_pick == 0)] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.nanmean(hit, axis=-1)


def _interval(samples: np.ndarray, ci: float) -> tuple[float, float]:
    if np.all(np.isnan(samples)):
        return np.nan, np.nan
    lo, hi = np.nanpercentile(samples, [50 * (1 - ci), 50 * (1 + ci)])
    return float(lo), float(hi)


def metric_validation(
    votes: pd.DataFrame,
    metric_values: pd.DataFrame,
    *,
    rng: np.random.Generator,
    metric_names=tuple(METRIC_TYPES),
    n_boot: int = 1000,
    ci: float = 0.95,
    exclude_ties: bool = False,
    exclude_flagged: bool = False,
    max_failures: int = 0,
) -> pd.DataFrame:
    """Correlation and agreement of each metric with human preference (Table 3).

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes (module docstring).
    metric_values : pandas.DataFrame
        Per-(concept, model) metric values (module docstring).
    rng : numpy.random.Generator
        Source of the bootstrap resamples.
    metric_names : sequence of str
        Metric columns to validate, keys of `evaluation.analysis.tables.METRICS`.
    n_boot : int
        Bootstrap resamples of the pairs, 1 to `MAX_BOOT`.
    ci : float
        Confidence level of the percentile intervals, in (0, 1).
    exclude_ties : bool
        False (default, the paper's 13.56 % for DCA implies it): a pair where the metric
        or the human majority ties counts as a disagreement. True: such pairs leave the
        agreement's denominator.
    exclude_flagged, max_failures
        See `study_votes`.

    Returns
    -------
    pandas.DataFrame
        One row per metric: ``metric, label, type``, ``n_pairs`` (pairs where the metric
        is defined for both models), ``n_undefined`` (pairs left out because a value is
        NaN: ΔHue of an achromatic dominant bin), ``pearson``, ``spearman``,
        ``agreement`` each with ``_lo``/``_hi`` bounds (NaN with fewer than 2 defined
        pairs; the agreement NaN too where people split evenly on every pair), ``metric_ties`` (pairs where the two models score equal) and
        ``human_ties`` (pairs split evenly).

    Notes
    -----
    For a pair (a, b) the metric difference is d = m(a) − m(b), negated for metrics
    where lower is better, so d > 0 means the metric prefers a; the human response is
    the share of votes for a. Each pair enters the correlations in both orientations,
    (d, s) and (−d, 1 − s), so the coefficients do not depend on which model is called
    a. The metric's pick is sign(d), the majority's sign(s − 0.5); agreement is the
    share of pairs where both are defined and equal. A pair whose metric value is NaN
    for either model is left out of that metric only, and counted in ``n_undefined``
    (``python -m evaluation judgments`` reports the same). Intervals are bootstrap
    percentiles over the metric's defined pairs resampled with replacement, drawn from
    `rng` metric by metric.
    """
    _check_bootstrap(n_boot, ci)
    prefs = pair_preferences(votes, exclude_flagged=exclude_flagged, max_failures=max_failures)
    if len(prefs) < 2:
        raise ValueError(f"`votes` must cover at least 2 pairs, got {len(prefs)}")
    diffs = _pair_differences(prefs, _metric_table(metric_values, metric_names))
    shares = prefs["share_a"].to_numpy(float)
    rows = []
    for name in metric_names:
        d_all = diffs[name].to_numpy(float)
        defined = ~np.isnan(d_all)
        d, s = d_all[defined], shares[defined]
        row = {
            "metric": name,
            "label": METRICS[name][0],
            "type": METRIC_TYPES.get(name, ""),
            "n_pairs": int(defined.sum()),
            "n_undefined": int((~defined).sum()),
        }
        if len(d) >= 2:
            row.update(_validated(d, s, rng, n_boot, ci, exclude_ties))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=list(VALIDATION_COLUMNS))


#: The columns of `metric_validation`'s result, in order.
VALIDATION_COLUMNS = (
    "metric",
    "label",
    "type",
    "n_pairs",
    "n_undefined",
    *(f"{k}{end}" for k in ("pearson", "spearman", "agreement") for end in ("", "_lo", "_hi")),
    "metric_ties",
    "human_ties",
)


def _check_bootstrap(n_boot: int, ci: float) -> None:
    if not 1 <= n_boot <= MAX_BOOT or not 0 < ci < 1:
        raise ValueError(f"`n_boot` must be from 1 to {MAX_BOOT:,} and `ci` in (0, 1), got {n_boot} and {ci}")


def _validated(
    d: np.ndarray, s: np.ndarray, rng: np.random.Generator, n_boot: int, ci: float, exclude_ties: bool
) -> dict:
    """Coefficients, agreement and their bootstrap intervals for defined pairs (d, s), from
    `n_boot` resamples of the pairs drawn from `rng` (in blocks of `_BOOT_BLOCK` indices)."""
    pearson, spearman = _coefficients(d[None], s[None])
    rows = max(1, _BOOT_BLOCK // len(d))
    boot_p, boot_s, boot_a = [], [], []
    for start in range(0, n_boot, rows):
        idx = rng.integers(0, len(d), size=(min(rows, n_boot - start), len(d)))
        d_boot, s_boot = d[idx], s[idx]
        block_p, block_s = _coefficients(d_boot, s_boot)
        boot_p.append(block_p)
        boot_s.append(block_s)
        boot_a.append(_agreement(d_boot, s_boot, exclude_ties))
    row = {"pearson": pearson[0], "spearman": spearman[0], "agreement": float(_agreement(d, s, exclude_ties))}
    for key, samples in (
        ("pearson", np.concatenate(boot_p)),
        ("spearman", np.concatenate(boot_s)),
        ("agreement", np.concatenate(boot_a)),
    ):
        row[f"{key}_lo"], row[f"{key}_hi"] = _interval(samples, ci)
    if np.all(s == 0.5):
        # People split evenly on every pair: there is no preference to agree with (counting
        # each tie as a disagreement would report 0 %, as if the metric always disagreed).
        row["agreement"] = row["agreement_lo"] = row["agreement_hi"] = np.nan
    row["metric_ties"] = int(np.sum(d == 0))
    row["human_ties"] = int(np.sum(s == 0.5))
    return row


def table3(validation: pd.DataFrame) -> pd.DataFrame:
    """Table 3 layout of `metric_validation`'s result.

    Returns
    -------
    pandas.DataFrame
        Index (Type, Metric); columns Pearson, Spearman, Agreement (%), their CI bounds,
        the tie counts, Pairs (pairs where the metric is defined), Undefined pairs, and a
        Note that says why a row is blank or pairs were left out (`UNDEFINED_REASONS`).
    """
    out = validation.rename(
        columns={
            "type": "Type",
            "label": "Metric",
            "pearson": "Pearson",
            "spearman": "Spearman",
            "metric_ties": "Metric ties",
            "human_ties": "Human ties",
        }
    )
    for key in ("agreement", "agreement_lo", "agreement_hi"):
        out[key] = 100.0 * out[key]
    out = out.rename(
        columns={
            "agreement": "Agreement (%)",
            "agreement_lo": "Agreement lo (%)",
            "agreement_hi": "Agreement hi (%)",
            "pearson_lo": "Pearson lo",
            "pearson_hi": "Pearson hi",
            "spearman_lo": "Spearman lo",
            "spearman_hi": "Spearman hi",
        }
    )
    columns = [
        "Pearson",
        "Pearson lo",
        "Pearson hi",
        "Spearman",
        "Spearman lo",
        "Spearman hi",
        "Agreement (%)",
        "Agreement lo (%)",
        "Agreement hi (%)",
        "Metric ties",
        "Human ties",
        "Pairs",
        "Undefined pairs",
        "Note",
    ]
    out["Pairs"], out["Undefined pairs"] = out["n_pairs"], out["n_undefined"]
    # Counts stay whole numbers where a row is blank (NaN made them 3.0 in the CSV).
    counts = ["Metric ties", "Human ties", "Pairs", "Undefined pairs"]
    out[counts] = out[counts].astype("Int64")
    out["Note"] = [
        _table3_note(*row)
        for row in out[
            ["metric", "n_pairs", "n_undefined", "Pearson", "Metric ties", "Human ties"]
        ].itertuples(index=False)
    ]
    return out.set_index(["Type", "Metric"])[columns]


# Why a metric can be undefined on a pair, by metric name; others are named generically.
UNDEFINED_REASONS = {"hue_diff": "ΔHue is undefined where a dominant color is grey"}
MIN_INTERVAL_PAIRS = 5
"""Under this many pairs a Table 3 row's note says its intervals say little: a percentile
bootstrap over 3 pairs has 10 distinct resamples (an outside check read EMD's Pearson
-0.942 [-1, 1] on 3 pairs with nothing said). Tables 1-2 rank models from as many concepts
(`evaluation.analysis.bootstrap.MIN_RANK_CONCEPTS`)."""


def _table3_note(
    metric: str, n_pairs: int, n_undefined: int, pearson: float, metric_ties: int, human_ties: int
) -> str:
    """Why a Table 3 row is blank (fewer than 2 defined pairs, or a side that never varies,
    which leaves the correlations undefined; people split on every pair, which leaves the
    agreement undefined) or covers fewer pairs."""
    total = n_pairs + n_undefined
    reason = UNDEFINED_REASONS.get(metric, "the metric is undefined on some pairs")
    if n_pairs < 2:
        why = reason if n_undefined else f"only {total} voted"
        return f"Blank: defined on {n_pairs} of {total} pairs, at least 2 needed ({why})."
    said = f"{n_undefined} of {total} pairs left out ({reason})." if n_undefined else ""
    if human_ties == n_pairs:
        return (
            f"{said} Blank: people split their votes evenly on all {n_pairs} pairs, so there is "
            "no preference to correlate or agree with."
        ).strip()
    if np.isnan(pearson):
        why = (
            f"the metric ties on all {n_pairs} pairs (its difference is 0 on each)"
            if metric_ties == n_pairs
            else "one side is the same on every pair"
        )
        said = f"{said} Correlations blank: {why}, so none is defined.".strip()
    if n_pairs < MIN_INTERVAL_PAIRS:
        said = (
            f"{said} Only {n_pairs} pairs: a bootstrap over so few has few distinct resamples, "
            f"so the intervals (and Bradley–Terry's) say little; {MIN_INTERVAL_PAIRS} or more are needed "
            "for them to mean something (the paper had 450)."
        ).strip()
    return said


def _bt_group(
    data: pd.DataFrame, models: list, rng: np.random.Generator, n_boot: int, ci: float, alpha: float
) -> list[dict]:
    index = {m: i for i, m in enumerate(models)}
    winner = data["chosen"].map(index).to_numpy()
    loser = pd.Series(np.where(data["chosen"] == data["model_a"], data["model_b"], data["model_a"])).map(
        index
    )
    pair_codes, pairs = pd.factorize(data["pair_id"])
    # wins[k, i, j]: votes in pair k where model i beat model j
    wins = np.zeros((len(pairs), len(models), len(models)))
    np.add.at(wins, (pair_codes, winner, loser.to_numpy()), 1.0)
    strength = choix.ilsr_pairwise_dense(wins.sum(axis=0), alpha=alpha)
    boot = np.empty((n_boot, len(models)))
    for b in range(n_boot):
        weight = np.bincount(rng.integers(0, len(pairs), size=len(pairs)), minlength=len(pairs))
        boot[b] = choix.ilsr_pairwise_dense(np.tensordot(weight, wins, axes=1), alpha=alpha)
    counts = wins.sum(axis=(0, 1)) + wins.sum(axis=(0, 2))
    rows = []
    for i, model in enumerate(models):
        lo, hi = _interval(boot[:, i], ci)
        rows.append(
            {
                "model": model,
                "strength": float(strength[i]),
                "strength_lo": lo,
                "strength_hi": hi,
                "n_votes": int(counts[i]),
            }
        )
    return rows


def bradley_terry(
    votes: pd.DataFrame,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    ci: float = 0.95,
    alpha: float = BT_ALPHA,
    exclude_flagged: bool = False,
    max_failures: int = 0,
) -> pd.DataFrame:
    """Bradley–Terry strength per model from the votes, overall and by background.

    Parameters
    ----------
    votes : pandas.DataFrame
        Votes (module docstring).
    rng : numpy.random.Generator
        Source of the bootstrap resamples.
    n_boot : int
        Bootstrap resamples (pairs with all their votes, with replacement), 1 to `MAX_BOOT`.
    ci : float
        Confidence level of the percentile intervals, in (0, 1).
    alpha : float
        Regularisation of `choix.ilsr_pairwise_dense`; keeps the estimate finite when a
        model wins every comparison of a resample.
    exclude_flagged, max_failures
        See `study_votes`.

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` (``"all"``, ``"design"``, ``"non_design"``; a group without
        votes is left out), ``model``, ``strength`` (log-strength, mean zero within a
        group; P(i beats j) = 1 / (1 + exp(θ_j − θ_i))), ``strength_lo``,
        ``strength_hi`` and ``n_votes`` (comparisons the model took part in).

    References
    ----------
    .. [1] L. Maystre and M. Grossglauser, "Fast and accurate inference of
       Plackett–Luce models", NeurIPS 2015 (the ILSR algorithm of choix).
    """
    _check_bootstrap(n_boot, ci)
    data = study_votes(votes, exclude_flagged=exclude_flagged, max_failures=max_failures)
    if data.empty:
        raise ValueError("`votes` holds no study votes")
    models = sorted(set(data["model_a"]) | set(data["model_b"]))
    background = data["design_background"].astype(bool)
    rows = []
    for group, mask in (
        ("all", np.ones(len(data), bool)),
        ("design", background),
        ("non_design", ~background),
    ):
        if mask.any():
            rows += [{"group": group, **r} for r in _bt_group(data[mask], models, rng, n_boot, ci, alpha)]
    return pd.DataFrame(rows)
