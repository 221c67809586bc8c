from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from evaluation.analysis.judgments import (
    MAX_BOOT,
    VOTE_COLUMNS,
    bradley_terry,
    metric_validation,
    pair_preferences,
    participant_flags,
    study_votes,
    table3,
)

MODELS = ("omnigen", "sana", "sdxl")


def synthetic_metrics(rng, n_concepts=150):
    rows = []
    for c in range(n_concepts):
        for m in MODELS:
            rows.append(
                {
                    "concept": f"concept{c}",
                    "model": m,
                    "pcc": rng.uniform(0.3, 0.9),
                    "emd": rng.normal(30, 4),
                    "ed": rng.uniform(0, 1),
                    "dca": float(rng.random() < 0.15),
                    "hue_diff": rng.uniform(0, 90),
                }
            )
    return pd.DataFrame(rows)


def simulate_votes(metrics, p_first, rng, *, votes_per_pair=6, n_participants=36):
    """Votes for every concept × model pair; `p_first(concept, a, b)` = P(choose a)."""
    rows = []
    for concept in metrics["concept"].unique():
        for a, b in combinations(MODELS, 2):
            p = p_first(concept, a, b)
            for voter in rng.choice(n_participants, size=votes_per_pair, replace=False):
                left, right = (a, b) if rng.random() < 0.5 else (b, a)
                rows.append(
                    {
                        "pair_id": f"{concept}|{a}|{b}",
                        "concept": concept,
                        "model_a": left,
                        "model_b": right,
                        "chosen": a if rng.random() < p else b,
                        "participant_id": f"p{voter}",
                        "design_background": voter < 26,
                        "attention_check": False,
                        "attention_passed": None,
                    }
                )
    return pd.DataFrame(rows, columns=list(VOTE_COLUMNS))


def emd_driven(metrics, noise_scale=2.0):
    emd = metrics.set_index(["concept", "model"])["emd"]

    def p_first(concept, a, b):
        return 1.0 / (1.0 + np.exp(-(emd[concept, b] - emd[concept, a]) / noise_scale))

    return p_first


def test_votes_generated_from_emd_give_emd_the_highest_agreement_and_correlation():
    rng = np.random.default_rng(11)
    metrics = synthetic_metrics(rng)
    votes = simulate_votes(metrics, emd_driven(metrics), rng)
    result = metric_validation(votes, metrics, rng=np.random.default_rng(0), n_boot=300).set_index("metric")
    assert result["n_pairs"].eq(450).all()
    assert result["agreement"].idxmax() == "emd"
    assert result["pearson"].idxmax() == "emd" and result["spearman"].idxmax() == "emd"
    assert result.loc["emd", "pearson_lo"] > 0.5
    others = result.drop(index="emd")
    assert (result.loc["emd", "agreement_lo"] > others["agreement_hi"]).all()


def test_bootstrap_drawn_in_blocks_gives_the_intervals_of_one_draw():
    # 10,000 resamples of 450 pairs are drawn in three blocks; the values are those of the
    # earlier code, which drew all 4.5 million indices at once (same seeds).
    rng = np.random.default_rng(11)
    metrics = synthetic_metrics(rng)
    votes = simulate_votes(metrics, emd_driven(metrics), rng)
    result = metric_validation(votes, metrics, rng=np.random.default_rng(5), n_boot=MAX_BOOT).set_index(
        "metric"
    )
    emd = result.loc["emd", ["pearson_lo", "pearson_hi", "spearman_lo", "spearman_hi", "agreement_lo"]]
    assert_allclose(
        emd.to_numpy(float), [0.8739584759, 0.9019616169, 0.9171174652, 0.9382579478, 0.7977777778]
    )


@pytest.mark.parametrize("n_boot", [0, MAX_BOOT + 1, 10**12])
def test_bootstrap_resamples_are_bounded(n_boot):
    votes = tiny_votes([("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 2, 4)])
    metrics = tiny_metrics({"c1": {"x": 1, "y": 0}, "c2": {"x": 0, "y": 1}})
    message = rf"^`n_boot` must be from 1 to 10,000 and `ci` in \(0, 1\), got {n_boot} and 0.95$"
    with pytest.raises(ValueError, match=message):
        metric_validation(votes, metrics, rng=np.random.default_rng(0), n_boot=n_boot)
    with pytest.raises(ValueError, match=message):
        bradley_terry(votes, rng=np.random.default_rng(0), n_boot=n_boot)


def test_coin_flip_votes_give_correlations_near_zero():
    rng = np.random.default_rng(5)
    metrics = synthetic_metrics(rng)
    votes = simulate_votes(metrics, lambda *_: 0.5, rng)
    # 10 intervals: at 99 % each, all covering zero is likely; |r| < 0.15 is ~3 standard errors at 450 pairs
    result = metric_validation(votes, metrics, rng=np.random.default_rng(1), n_boot=400, ci=0.99)
    for key in ("pearson", "spearman"):
        assert (result[f"{key}_lo"] <= 0).all() and (result[f"{key}_hi"] >= 0).all(), result
        assert (result[key].abs() < 0.15).all()


def tiny_votes(rows):
    """rows: (pair, concept, a, b, votes for a, votes for b)."""
    out = []
    for pair, concept, a, b, n_a, n_b in rows:
        for k in range(n_a + n_b):
            out.append(
                {
                    "pair_id": pair,
                    "concept": concept,
                    "model_a": a,
                    "model_b": b,
                    "chosen": a if k < n_a else b,
                    "participant_id": f"p{k}",
                    "design_background": k % 2 == 0,
                    "attention_check": False,
                    "attention_passed": None,
                }
            )
    return pd.DataFrame(out, columns=list(VOTE_COLUMNS))


def tiny_metrics(dca):
    rows = [
        {
            "concept": c,
            "model": m,
            "pcc": 0.5,
            "emd": 30.0 + i + 3 * j,
            "ed": 0.5,
            "dca": dca[c][m],
            "hue_diff": 10.0,
        }
        for j, c in enumerate(dca)
        for i, m in enumerate(dca[c])
    ]
    return pd.DataFrame(rows)


def test_ties_count_as_disagreement_and_are_reported():
    votes = tiny_votes(
        [
            ("1", "c1", "x", "y", 5, 1),
            ("2", "c2", "x", "y", 4, 2),
            ("3", "c3", "x", "y", 1, 5),
            ("4", "c4", "x", "y", 3, 3),
        ]
    )
    dca = {"c1": {"x": 1, "y": 0}, "c2": {"x": 0, "y": 0}, "c3": {"x": 1, "y": 1}, "c4": {"x": 1, "y": 0}}
    metrics = tiny_metrics(dca)
    rng = np.random.default_rng(0)
    strict = metric_validation(votes, metrics, rng=rng, metric_names=("dca",), n_boot=50).iloc[0]
    assert strict["agreement"] == 0.25
    assert strict["metric_ties"] == 2 and strict["human_ties"] == 1
    lenient = metric_validation(
        votes, metrics, rng=rng, metric_names=("dca",), n_boot=50, exclude_ties=True
    ).iloc[0]
    assert lenient["agreement"] == 1.0


def test_when_people_split_on_every_pair_agreement_is_blank_not_zero():
    """One vote each way on every pair: no human preference, so no agreement (counting each
    tie as a disagreement read "0 %" with the interval [0, 0])."""
    votes = tiny_votes(
        [("1", "c1", "x", "y", 1, 1), ("2", "c2", "x", "y", 2, 2), ("3", "c3", "x", "y", 1, 1)]
    )
    metrics = tiny_metrics({"c1": {"x": 1, "y": 0}, "c2": {"x": 0, "y": 1}, "c3": {"x": 1, "y": 1}})
    t3 = table3(
        metric_validation(votes, metrics, rng=np.random.default_rng(0), metric_names=("dca",), n_boot=20)
    )
    dca = t3.xs("DCA", level="Metric").iloc[0]
    assert np.isnan([dca["Agreement (%)"], dca["Agreement lo (%)"], dca["Agreement hi (%)"]]).all()
    assert dca["Human ties"] == 3
    assert dca["Note"] == (
        "Blank: people split their votes evenly on all 3 pairs, so there is no preference to correlate or agree with."
    )


def test_a_resample_of_only_tied_pairs_counts_in_the_agreement_interval():
    """The metric picks x on 3 pairs; people pick x on two and split on the third: 2 of 3
    agree. A resample drawing the split pair 3 times (1 in 27, over the 2.5 % tail) agrees
    on none, so the interval is [0, 1]; it read [1/3, 1] when such resamples were left out
    as if they had no preference to agree with (an outside tester saw 0 become 33.3)."""
    votes = tiny_votes(
        [("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 4, 2), ("3", "c3", "x", "y", 3, 3)]
    )
    metrics = tiny_metrics({c: {"x": 1, "y": 0} for c in ("c1", "c2", "c3")})
    row = metric_validation(
        votes, metrics, rng=np.random.default_rng(0), metric_names=("dca",), n_boot=2000
    ).iloc[0]
    assert row["agreement"] == 2 / 3
    assert (row["agreement_lo"], row["agreement_hi"]) == (0.0, 1.0)


def test_a_row_whose_metric_ties_on_every_pair_says_why_its_correlations_are_blank():
    """Both models miss the dominant color on every pair: DCA's difference is 0 on each, so
    Pearson and Spearman are undefined; the Note said nothing."""
    votes = tiny_votes(
        [("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 4, 2), ("3", "c3", "x", "y", 1, 5)]
    )
    metrics = tiny_metrics({c: {"x": 0, "y": 0} for c in ("c1", "c2", "c3")})
    rng = np.random.default_rng(0)
    t3 = table3(metric_validation(votes, metrics, rng=rng, metric_names=("dca", "emd"), n_boot=20))
    dca = t3.xs("DCA", level="Metric").iloc[0]
    assert np.isnan(dca["Pearson"]) and dca["Metric ties"] == 3
    few = (
        "Only 3 pairs: a bootstrap over so few has few distinct resamples, so the intervals (and "
        "Bradley–Terry's) say little; 5 or more are needed for them to mean something (the paper had 450)."
    )
    assert dca["Note"] == (
        f"Correlations blank: the metric ties on all 3 pairs (its difference is 0 on each), so none is defined. {few}"
    )
    assert t3.xs("EMD", level="Metric").iloc[0]["Note"] == few


@pytest.mark.parametrize("n_pairs", [4, 5])
def test_a_row_on_fewer_than_five_pairs_says_its_intervals_say_little(n_pairs):
    """An outside check read EMD's Pearson -0.942 [-1, 1] on 3 pairs with nothing said."""
    rows = [(str(i), f"c{i}", "x", "y", 1 + i, 6 - i) for i in range(n_pairs)]
    metrics = tiny_metrics({f"c{i}": {"x": i, "y": n_pairs - i} for i in range(n_pairs)})
    t3 = table3(
        metric_validation(
            tiny_votes(rows), metrics, rng=np.random.default_rng(0), metric_names=("emd",), n_boot=20
        )
    )
    note = t3.xs("EMD", level="Metric").iloc[0]["Note"]
    assert note.startswith(f"Only {n_pairs} pairs: ") if n_pairs < 5 else note == ""


def test_correlation_is_symmetric_in_pair_orientation_and_lower_emd_counts_as_better():
    votes = tiny_votes(
        [("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 2, 4), ("3", "c3", "x", "y", 4, 2)]
    )
    emd = {"c1": (20.0, 30.0), "c2": (35.0, 31.0), "c3": (25.0, 28.0)}
    metrics = pd.DataFrame(
        [{"concept": c, "model": m, "emd": v[i]} for c, v in emd.items() for i, m in enumerate("xy")]
    )
    result = metric_validation(
        votes, metrics, rng=np.random.default_rng(0), metric_names=("emd",), n_boot=20
    ).iloc[0]
    d = np.array([10.0, -4.0, 3.0])  # m(y) - m(x): positive favours x
    s = np.array([5 / 6, 2 / 6, 4 / 6])
    expected = np.sum(d * (s - 0.5)) / np.sqrt(np.sum(d**2) * np.sum((s - 0.5) ** 2))
    assert_allclose(result["pearson"], expected, rtol=1e-12)
    assert result["agreement"] == 1.0
    flipped = votes.assign(model_a=votes["model_b"], model_b=votes["model_a"])
    again = metric_validation(
        flipped, metrics, rng=np.random.default_rng(0), metric_names=("emd",), n_boot=20
    )
    assert_allclose(again.iloc[0]["pearson"], expected, rtol=1e-12)


def test_pair_preferences_are_vote_shares_in_sorted_model_order():
    votes = tiny_votes([("1", "c1", "sdxl", "sana", 4, 2)])
    prefs = pair_preferences(votes)
    assert prefs[["model_a", "model_b", "n_votes", "votes_a"]].iloc[0].tolist() == ["sana", "sdxl", 6, 2]
    assert_allclose(prefs["share_a"], [2 / 6])


def with_attention_checks(votes):
    checks = pd.DataFrame(
        [
            {
                "pair_id": "check1",
                "concept": "c1",
                "model_a": "x",
                "model_b": "ground_truth",
                "chosen": "x",
                "participant_id": "p1",
                "design_background": False,
                "attention_check": True,
                "attention_passed": False,
            },
            {
                "pair_id": "check2",
                "concept": "c1",
                "model_a": "x",
                "model_b": "ground_truth",
                "chosen": "ground_truth",
                "participant_id": "p0",
                "design_background": True,
                "attention_check": True,
                "attention_passed": True,
            },
        ]
    )
    return pd.concat([votes, checks], ignore_index=True)


def test_failed_attention_checks_flag_participants_and_can_exclude_their_votes():
    votes = with_attention_checks(tiny_votes([("1", "c1", "x", "y", 3, 3)]))
    flags = participant_flags(votes)
    assert flags.loc["p1", "flagged"] and not flags.loc["p0", "flagged"]
    assert flags.loc["p1", ["n_votes", "n_checks", "n_failed"]].tolist() == [1, 1, 1]
    kept = study_votes(votes)
    assert len(kept) == 6 and kept.loc[kept["participant_id"] == "p1", "participant_flagged"].all()
    dropped = study_votes(votes, exclude_flagged=True)
    assert len(dropped) == 5 and "p1" not in set(dropped["participant_id"])
    assert pair_preferences(votes, exclude_flagged=True)["n_votes"].tolist() == [5]
    assert not participant_flags(votes, max_failures=1)["flagged"].any()


def test_bradley_terry_recovers_the_order_of_known_strengths():
    rng = np.random.default_rng(21)
    theta = {"omnigen": -0.8, "sana": 0.9, "sdxl": -0.1}
    metrics = synthetic_metrics(rng, n_concepts=120)
    votes = simulate_votes(metrics, lambda c, a, b: 1 / (1 + np.exp(theta[b] - theta[a])), rng)
    bt = bradley_terry(votes, rng=np.random.default_rng(2), n_boot=100)
    overall = bt[bt["group"] == "all"].set_index("model")
    assert overall["strength"].sort_values().index.tolist() == ["omnigen", "sdxl", "sana"]
    assert_allclose(overall["strength"].sum(), 0.0, atol=1e-8)
    for model, value in theta.items():
        assert overall.loc[model, "strength_lo"] <= value <= overall.loc[model, "strength_hi"]
    assert set(bt["group"]) == {"all", "design", "non_design"}
    assert overall["n_votes"].tolist() == [120 * 2 * 6] * 3


def test_bradley_terry_splits_by_background():
    rng = np.random.default_rng(4)
    theta = {"omnigen": -1.0, "sana": 1.0, "sdxl": 0.0}
    metrics = synthetic_metrics(rng, n_concepts=100)
    votes = simulate_votes(metrics, lambda c, a, b: 1 / (1 + np.exp(theta[b] - theta[a])), rng)
    # non-designers vote at random
    lay = ~votes["design_background"]
    pair = votes.loc[lay, ["model_a", "model_b"]].to_numpy()
    votes.loc[lay, "chosen"] = np.where(rng.random(lay.sum()) < 0.5, pair[:, 0], pair[:, 1])
    bt = bradley_terry(votes, rng=np.random.default_rng(3), n_boot=100).set_index(["group", "model"])
    design = bt.loc["design", "strength"]
    assert design.sort_values().index.tolist() == ["omnigen", "sdxl", "sana"]
    lay_bt = bt.loc["non_design"]
    assert ((lay_bt["strength_lo"] <= 0) & (lay_bt["strength_hi"] >= 0)).all()


def test_table3_layout():
    rng = np.random.default_rng(11)
    metrics = synthetic_metrics(rng, n_concepts=30)
    votes = simulate_votes(metrics, emd_driven(metrics), rng)
    validation = metric_validation(votes, metrics, rng=rng, n_boot=50)
    t3 = table3(validation)
    assert t3.index.tolist() == [
        ("Probabilistic", "PCC"),
        ("Probabilistic", "EMD"),
        ("Probabilistic", "ED"),
        ("Deterministic", "DCA"),
        ("Deterministic", "ΔHue"),
    ]
    assert_allclose(t3["Agreement (%)"].to_numpy(), 100 * validation["agreement"].to_numpy())
    assert_allclose(t3["Pearson"].to_numpy(), validation["pearson"].to_numpy())
    assert t3["Pairs"].tolist() == validation["n_pairs"].tolist()
    assert (t3["Undefined pairs"] == 0).all() and (t3["Note"] == "").all()


def test_dca_is_derived_from_dominant_bins_when_absent():
    votes = tiny_votes([("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 1, 5)])
    metrics = pd.DataFrame(
        {
            "concept": ["c1", "c1", "c2", "c2"],
            "model": ["x", "y", "x", "y"],
            "dominant_model": [3, 4, 3, 4],
            "dominant_human": [3, 3, 4, 4],
        }
    )
    result = metric_validation(votes, metrics, rng=np.random.default_rng(0), metric_names=("dca",), n_boot=10)
    assert result.iloc[0]["agreement"] == 1.0


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda v, m: (v.assign(chosen="nobody"), m), "`chosen` 'nobody'"),
        (lambda v, m: (v, m[m["concept"] != "c2"]), r"no row for \(concept, model\)"),
        (lambda v, m: (v.drop(columns="participant_id"), m), r"`votes` lacks columns \['participant_id'\]"),
        (lambda v, m: (v, pd.concat([m, m])), "one row per"),
        (lambda v, m: (v.assign(concept=np.where(v.index == 0, "c2", v["concept"])), m), "mixes concepts"),
    ],
)
def test_metric_validation_rejects_inconsistent_inputs(mutate, match):
    votes = tiny_votes([("1", "c1", "x", "y", 5, 1), ("2", "c2", "x", "y", 2, 4)])
    metrics = tiny_metrics({"c1": {"x": 1, "y": 0}, "c2": {"x": 0, "y": 1}})
    votes, metrics = mutate(votes, metrics)
    with pytest.raises(ValueError, match=match):
        metric_validation(votes, metrics, rng=np.random.default_rng(0), n_boot=5)


def test_a_study_voted_on_one_pair_gives_blank_rows_that_say_why():
    """One voted pair analysed ended in a KeyError ("Something went wrong" on the Study tab)."""
    from evaluation.analysis.judgment_report import analyse

    votes = tiny_votes([("1", "c1", "x", "y", 4, 2)])
    metrics = tiny_metrics({"c1": {"x": 1, "y": 0}})
    t3 = analyse(votes, metrics, rng=np.random.default_rng(0), n_boot=20)["table3"].set_index("Metric")
    assert t3.loc["EMD", "Note"] == "Blank: defined on 1 of 1 pairs, at least 2 needed (only 1 voted)."
    assert t3["Pearson"].isna().all() and t3.loc["EMD", "Pairs"] == 1
