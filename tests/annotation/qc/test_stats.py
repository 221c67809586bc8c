import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from annotation.qc.stats import (
    AgreementSummary,
    agreement_summary,
    consistency_scores,
    high_variance,
    majority_decision,
)
from evaluation.color.palette import load_uw71

PAPER_PATTERNS = [((3, 0), 399), ((0, 3), 4), ((2, 1), 127), ((1, 2), 32)]


def paper_votes():
    return np.array([row for row, n in PAPER_PATTERNS for _ in range(n)])


def test_paper_vote_counts_give_p_bar_0811_and_36_discarded():
    s = agreement_summary(paper_votes())
    assert round(s.mean_observed_agreement, 3) == 0.811
    assert_allclose(s.mean_observed_agreement, 456 / 562, rtol=1e-12)
    assert s.n_discarded == 36
    assert s.n_colorings == 562
    assert s.patterns == ((3, 0, 399), (2, 1, 127), (1, 2, 32), (0, 3, 4))


def test_table5_layout_matches_the_paper():
    table = agreement_summary(paper_votes()).table5()
    assert table["expert_votes"].tolist() == [
        "3 Yes / 0 No",
        "2 Yes / 1 No",
        "1 Yes / 2 No",
        "0 Yes / 3 No",
        "Total",
    ]
    assert table["interpretation"].tolist() == [
        "Unanimous Consistent",
        "Majority Consistent",
        "Majority Inconsistent",
        "Unanimous Inconsistent",
        "",
    ]
    assert table["count"].tolist() == [399, 127, 32, 4, 562]


def test_chance_corrected_coefficients_match_their_closed_forms_on_paper_counts():
    s = agreement_summary(paper_votes())
    n_yes, n_no = 399 * 3 + 127 * 2 + 32, 4 * 3 + 127 + 32 * 2
    total = n_yes + n_no
    p_e = (n_yes / total) ** 2 + (n_no / total) ** 2
    kappa = (456 / 562 - p_e) / (1 - p_e)
    d_observed = (127 + 32) * 2 / total
    d_expected = 2 * n_yes * n_no / (total * (total - 1))
    assert_allclose(s.fleiss_kappa, kappa, rtol=1e-9)
    assert_allclose(s.krippendorff_alpha, 1 - d_observed / d_expected, rtol=1e-9)


def test_unanimous_votes_in_one_category_give_nan_chance_corrected_coefficients():
    s = agreement_summary([[3, 0], [3, 0]])
    assert s.mean_observed_agreement == 1.0
    assert np.isnan(s.fleiss_kappa) and np.isnan(s.krippendorff_alpha)


def test_unequal_vote_totals_leave_fleiss_kappa_undefined_but_keep_alpha_and_p_bar():
    s = agreement_summary([[3, 0], [1, 1], [0, 4]])
    assert np.isnan(s.fleiss_kappa)
    assert np.isfinite(s.krippendorff_alpha)
    assert_allclose(s.mean_observed_agreement, (1 + 0 + 1) / 3)
    assert s.n_undecided == 1 and s.n_discarded == 1


def test_majority_decision_rules():
    assert majority_decision(3, 0) == "consistent"
    assert majority_decision(2, 1) == "consistent"
    assert majority_decision(1, 2) == "inconsistent"
    assert majority_decision(0, 3) == "inconsistent"
    assert majority_decision(2, 2) == "undecided"
    assert majority_decision(0, 0) == "undecided"


@pytest.mark.parametrize("bad", [(-1, 2), (1.5, 1), (True, 1)])
def test_majority_decision_rejects_non_counts(bad):
    with pytest.raises(ValueError, match="non-negative integer"):
        majority_decision(*bad)


@pytest.mark.parametrize(
    "votes, match",
    [
        (np.zeros((3, 3), int), r"shape \(n, 2\)"),
        ([[1, 0]], "at least 2 votes"),
        ([[3, -1]], "non-negative"),
        ([[1.5, 1.5]], "integer"),
        (np.zeros((0, 2), int), r"shape \(n, 2\)"),
    ],
)
def test_agreement_summary_rejects_malformed_votes(votes, match):
    with pytest.raises(ValueError, match=match):
        agreement_summary(votes)


def test_each_experts_agreement_with_the_majority_from_rater_level_votes():
    nan = np.nan
    ratings = pd.DataFrame(
        {"ann": [1, 1, 0, nan], "bo": [1, 0, nan, 1], "cy": [1, nan, 0, 1], "di": [nan, 1, 1, 0]}
    )
    votes = np.array([[3, 0], [2, 1], [1, 2], [2, 1]])
    s = agreement_summary(votes, ratings=ratings)
    by_rater = {r.rater: (r.n_votes, r.agreement) for r in s.rater_agreement}
    # majorities: consistent, consistent, inconsistent, consistent
    assert by_rater["ann"] == (3, 1.0)
    assert by_rater["bo"] == (3, pytest.approx(2 / 3))
    assert by_rater["cy"] == (3, 1.0)
    assert by_rater["di"] == (3, pytest.approx(1 / 3))
    # Each vote against the other voters' on the same coloring (own vote left out): ann's
    # 2 of 2, 1 of 2, 1 of 2; bo's 2/2, 0/2, 1/2; cy's 2/2, 1/2, 1/2; di's 1/2, 0/2, 0/2.
    with_others = {r.rater: r.with_others for r in s.rater_agreement}
    assert with_others == pytest.approx({"ann": 4 / 6, "bo": 3 / 6, "cy": 4 / 6, "di": 1 / 6})


def test_rater_level_votes_must_match_the_counts():
    ratings = pd.DataFrame({"a": [1.0], "b": [1.0], "c": [0.0]})
    with pytest.raises(ValueError, match=r"row 0 gives counts \[2, 1\]"):
        agreement_summary([[3, 0]], ratings=ratings)


def test_summary_is_frozen():
    s = agreement_summary([[3, 0], [2, 1]])
    assert isinstance(s, AgreementSummary)
    with pytest.raises(AttributeError):
        s.n_discarded = 0


UNIT = np.eye(71)  # UNIT[i]: all mass in bin i


def test_consistency_score_is_mean_pairwise_emd_over_all_designer_pairs():
    gd = load_uw71().ground_distance
    dists = {
        "lonely cabin": np.stack([UNIT[0], UNIT[5], UNIT[40]]),
        "apple": np.stack([UNIT[3]] * 5),
        "rotten apple": np.stack([UNIT[10], UNIT[20]]),
    }
    scores = consistency_scores(dists)
    assert scores.index.tolist() == ["lonely cabin", "apple", "rotten apple"]
    assert_allclose(scores["lonely cabin"], (gd[0, 5] + gd[0, 40] + gd[5, 40]) / 3, rtol=1e-6)
    assert_allclose(scores["apple"], 0.0, atol=1e-9)
    assert_allclose(scores["rotten apple"], gd[10, 20], rtol=1e-6)


def test_consistency_score_of_five_designers_averages_ten_pairs():
    gd = load_uw71().ground_distance
    bins = [0, 12, 24, 36, 48]
    expected = np.mean([gd[i, j] for a, i in enumerate(bins) for j in bins[a + 1 :]])
    score = consistency_scores({"c": np.stack([UNIT[b] for b in bins])})["c"]
    assert_allclose(score, expected, rtol=1e-6)


def test_consistency_scores_need_two_designers():
    with pytest.raises(ValueError, match="'solo'.*n >= 2"):
        consistency_scores({"solo": UNIT[3][None]})


def test_high_variance_marks_the_top_tenth_with_deterministic_ties():
    scores = pd.Series(np.arange(20, dtype=float), index=[f"c{i:02d}" for i in range(20)])
    flags = high_variance(scores)
    assert flags.index.tolist() == scores.index.tolist()
    assert flags[flags].index.tolist() == ["c18", "c19"]
    tied = pd.Series([5.0, 9.0, 9.0, 1.0], index=["d", "b", "a", "c"])
    assert high_variance(tied, 0.25).tolist() == [False, False, True, False]
    assert high_variance(tied, 0.01).sum() == 1
    # An outside tester's study: two concepts whose designers agreed exactly (Eq. 6 EMD 0),
    # one of them marked as the "top 10 %" by key order.
    agreed = pd.Series([0.0, 0.0], index=["apple", "banana"])
    assert not high_variance(agreed, 0.1).any() and not high_variance(agreed, 1.0).any()
    assert high_variance(pd.Series([0.0, 3.0], index=["apple", "banana"]), 1.0).tolist() == [False, True]


@pytest.mark.parametrize("fraction", [0, 1.5, -0.1])
def test_high_variance_rejects_fractions_outside_unit_interval(fraction):
    with pytest.raises(ValueError, match="top_fraction"):
        high_variance(pd.Series([1.0, 2.0]), fraction)
