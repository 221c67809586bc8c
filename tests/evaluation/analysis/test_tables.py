import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from evaluation.analysis import bootstrap, uncertainty
from evaluation.analysis.tables import (
    METRICS_FRAME_COLUMNS,
    NO_HUMAN_SHIFT,
    NOT_DEFINED,
    cfg_sweep,
    concept_shifts,
    select_cfg,
    sensitivity,
    table1,
    table2,
    table6,
    table7,
    table8,
    with_dca,
)
from evaluation.color.palette import load_uw71
from evaluation.concepts import load_concepts

CONCEPTS = {
    "apple": "original",
    "rotten apple": "visual_state",
    "cabin": "original",
    "lonely cabin": "emotional",
}
BASES = {"apple": "apple", "rotten apple": "apple", "cabin": "cabin", "lonely cabin": "cabin"}


def metrics_frame(rng, models=("flux", "sana", "sdxl"), cfgs=(5.0,)):
    rows = []
    for model in models:
        for cfg in cfgs:
            for style in ("natural", "clipart"):
                for concept, mtype in CONCEPTS.items():
                    rows.append(
                        {
                            "model": model,
                            "concept": concept,
                            "base": BASES[concept],
                            "modifier_type": mtype,
                            "style": style,
                            "cfg": cfg,
                            "pcc": rng.uniform(0.3, 0.9),
                            "emd": rng.uniform(20, 40),
                            "ed": rng.uniform(0, 1),
                            "dominant_model": int(rng.integers(0, 3)),
                            "dominant_human": 1,
                            "hue_diff": rng.uniform(0, 90),
                        }
                    )
    return pd.DataFrame(rows, columns=list(METRICS_FRAME_COLUMNS))


def test_table1_cells_are_means_over_concepts_with_best_and_second_marked():
    frame = metrics_frame(np.random.default_rng(0))
    t1 = table1(frame)
    assert t1.values.columns.tolist()[:3] == [("original", "natural", m) for m in ("pcc", "emd", "ed")]
    assert t1.values.shape == (3, 18)
    sel = frame[
        (frame["model"] == "flux") & (frame["modifier_type"] == "original") & (frame["style"] == "natural")
    ]
    assert len(sel) == 2
    assert_allclose(t1.values.loc["flux", ("original", "natural", "emd")], sel["emd"].mean())
    for col in t1.values.columns:
        column = t1.values[col]
        best = column.idxmax() if col[2] == "pcc" else column.idxmin()
        assert t1.marks.loc[best, col] == "best"
        second = column.drop(best).idxmax() if col[2] == "pcc" else column.drop(best).idxmin()
        assert t1.marks.loc[second, col] == "second"
        assert (t1.marks[col] == "").sum() == 1


def test_table2_dca_is_share_of_matching_dominant_bins_and_hue_skips_nan():
    frame = metrics_frame(np.random.default_rng(1), models=("flux", "sana"))
    frame["dominant_human"] = 1
    frame["dominant_model"] = 0
    hit = (frame["model"] == "sana") & (frame["style"] == "clipart") & (frame["concept"] == "apple")
    frame.loc[hit, "dominant_model"] = 1
    frame.loc[(frame["model"] == "flux") & (frame["concept"] == "cabin"), "hue_diff"] = np.nan
    t2 = table2(frame)
    assert t2.values.loc["sana", ("original", "clipart", "dca")] == 0.5
    assert t2.values.loc["flux", ("original", "clipart", "dca")] == 0.0
    apple = frame[(frame["model"] == "flux") & (frame["concept"] == "apple") & (frame["style"] == "natural")]
    assert_allclose(t2.values.loc["flux", ("original", "natural", "hue_diff")], apple["hue_diff"].iloc[0])
    assert t2.marks.loc["sana", ("original", "clipart", "dca")] == "best"
    t2.values.loc["sana", ("original", "clipart", "hue_diff")] = np.nan
    assert t2.to_html().count(f">{NOT_DEFINED}<") == 1 and "nan" not in t2.to_html()


def test_ties_share_a_mark():
    frame = metrics_frame(np.random.default_rng(2))
    frame["pcc"] = np.where(frame["model"] == "sdxl", 0.5, 0.7)
    marks = table1(frame).marks
    assert marks[("original", "natural", "pcc")].to_dict() == {
        "flux": "best",
        "sana": "best",
        "sdxl": "second",
    }


def test_leaderboard_exports_csv_rows_and_escaped_html():
    frame = metrics_frame(np.random.default_rng(3), models=("<b>evil</b>", "sana"))
    board = table1(frame)
    long = board.to_csv_frame()
    assert len(long) == 2 * 18
    assert list(long.columns) == [
        "model",
        "modifier_type",
        "style",
        "metric",
        "unit",
        "value",
        "mark",
        "n_concepts",
    ]
    # Each row says its metric's unit: EMD's ground distance is CIELAB's, entropy in nats.
    units = long.drop_duplicates("metric").set_index("metric")["unit"].to_dict()
    assert units == {"pcc": "Pearson r (-1 to 1)", "emd": "ΔE*ab", "ed": "nats"}
    page = board.to_html()
    assert "&lt;b&gt;evil&lt;/b&gt;" in page and "<b>evil</b>" not in page
    assert page.count("<b>") == 18 and page.count("<u>") == 18
    # Each mark is said in words too (hidden from sight by the app's CSS).
    assert page.count("> (best)</span></b>") == 18 and page.count("> (second best)</span></u>") == 18


def test_a_value_that_rounds_to_zero_shows_no_minus_sign():
    frame = metrics_frame(np.random.default_rng(3), models=("a", "b"))
    frame["pcc"] = np.where(frame["model"] == "a", -0.0002, 0.4)
    board = table1(frame)
    assert "-0.000" not in board.to_html() and "-0.000" not in board.to_text()
    assert ">0.000<" in board.to_html()


def test_several_cfgs_need_a_choice():
    frame = metrics_frame(np.random.default_rng(4), cfgs=(3.0, 7.0))
    with pytest.raises(ValueError, match="`cfg` must be given"):
        table1(frame)
    by_model = select_cfg(with_dca(frame), {"flux": 3.0, "sana": 7.0, "sdxl": 7.0})
    assert by_model.groupby("model")["cfg"].unique().map(list).to_dict() == {
        "flux": [3.0],
        "sana": [7.0],
        "sdxl": [7.0],
    }
    with pytest.raises(ValueError, match=r"no rows at `cfg`=4.0"):
        table1(frame, cfg=4.0)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda f: f.drop(columns="hue_diff"), r"`frame` lacks columns \['hue_diff'\]"),
        (lambda f: f.assign(style="watercolor"), "unknown values \\['watercolor'\\]"),
        (lambda f: pd.concat([f, f.iloc[:1]]), "duplicate rows"),
    ],
)
def test_metrics_frame_is_validated(mutate, match):
    with pytest.raises(ValueError, match=match):
        table1(mutate(metrics_frame(np.random.default_rng(5))))


def test_cfg_sweep_averages_per_model_style_and_scale():
    frame = metrics_frame(np.random.default_rng(6), cfgs=(3.0, 7.0))
    sweep = cfg_sweep(frame)
    assert len(sweep) == 3 * 2 * 2
    row = sweep[(sweep["model"] == "sana") & (sweep["style"] == "clipart") & (sweep["cfg"] == 7.0)].iloc[0]
    sel = frame[(frame["model"] == "sana") & (frame["style"] == "clipart") & (frame["cfg"] == 7.0)]
    assert_allclose([row["emd"], row["pcc"]], [sel["emd"].mean(), sel["pcc"].mean()])
    assert row["n_concepts"] == 4


UNIT = np.eye(71)  # UNIT[i]: all mass in bin i


def test_concept_shifts_are_emd_between_base_and_variant_for_people_and_models():
    gd = load_uw71().ground_distance
    human = {"apple": UNIT[0], "rotten apple": UNIT[5], "cabin": UNIT[30], "lonely cabin": UNIT[24]}
    model = pd.DataFrame(
        [
            {"model": "sana", "style": "clipart", "concept": "apple", "p": UNIT[0]},
            {"model": "sana", "style": "clipart", "concept": "rotten apple", "p": UNIT[1]},
            {
                "model": "sana",
                "style": "clipart",
                "concept": "lonely cabin",
                "p": UNIT[24],
            },  # no base: left out
        ]
    )
    shifts = concept_shifts(human, model, concepts=load_concepts())
    assert shifts[["model", "style", "base", "concept", "modifier_type"]].values.tolist() == [
        ["sana", "clipart", "apple", "rotten apple", "visual_state"]
    ]
    assert_allclose(shifts[["human_shift", "model_shift"]].iloc[0], [gd[0, 5], gd[0, 1]], rtol=1e-6)


def shifts_frame():
    rows = [
        # model, style, concept, modifier_type, human, model
        ("a", "clipart", "rotten apple", "visual_state", 10.0, 5.0),
        ("a", "clipart", "lonely cabin", "emotional", 2.0, 4.0),
        ("a", "natural", "rotten apple", "visual_state", 10.0, 8.0),
        ("a", "natural", "lonely cabin", "emotional", 2.0, 1.0),
        ("b", "clipart", "rotten apple", "visual_state", 10.0, 10.0),
        ("b", "clipart", "lonely cabin", "emotional", 2.0, 2.0),
        ("b", "natural", "rotten apple", "visual_state", 10.0, 6.0),
        ("b", "natural", "lonely cabin", "emotional", 2.0, 0.5),
    ]
    frame = pd.DataFrame(
        rows, columns=["model", "style", "concept", "modifier_type", "human_shift", "model_shift"]
    )
    frame["base"] = frame["concept"].str.split().str[-1]
    return frame


def test_sensitivity_ratio_of_means_versus_mean_of_ratios():
    shifts = shifts_frame()
    pooled = sensitivity(shifts, ("model", "style")).set_index(["model", "style"])
    assert_allclose(pooled.loc[("a", "clipart"), "ratio"], (5 + 4) / (10 + 2))
    assert pooled.loc[("a", "clipart"), "n_concepts"] == 2
    per_concept = sensitivity(shifts, ("model", "style"), aggregate="mean_of_ratios").set_index(
        ["model", "style"]
    )
    assert_allclose(per_concept.loc[("a", "clipart"), "ratio"], (0.5 + 2.0) / 2)
    with pytest.raises(ValueError, match="aggregate"):
        sensitivity(shifts, aggregate="median")


def test_tables_6_7_8_layouts():
    shifts = shifts_frame()
    t6 = table6(shifts)
    assert t6.index.tolist() == ["a", "b"] and sorted(t6.columns) == ["clipart", "natural"]
    assert_allclose(t6.loc["b", "natural"], 6.5 / 12)
    t7 = table7(shifts)
    assert_allclose(t7.loc["a", "emotional"], (4 + 1) / (2 + 2))
    t8 = table8(shifts)
    # per model, per modifier and style, then averaged over models
    assert_allclose(t8.loc["emotional", "clipart"], (4 / 2 + 2 / 2) / 2)
    assert_allclose(t8.loc["visual_state", "natural"], (8 / 10 + 6 / 10) / 2)
    assert_allclose(t8["average"], t8[["clipart", "natural"]].mean(axis=1))


def _unmoved_visual_states():
    """`shifts_frame` with people's shift 0 for every visual-state variant (designers colored
    'rotten apple' as 'apple'), and two variants per modifier type so that cells have intervals."""
    one = shifts_frame()
    two = one.assign(concept=one["concept"].map({"rotten apple": "ripe apple", "lonely cabin": "cozy cabin"}))
    shifts = pd.concat([one, two], ignore_index=True)
    return shifts.assign(
        human_shift=shifts["human_shift"].where(shifts["modifier_type"] != "visual_state", 0.0)
    )


@pytest.mark.parametrize("aggregate", ["ratio_of_means", "mean_of_ratios"])
def test_a_ratio_is_nan_not_inf_where_people_did_not_shift_and_numpy_does_not_warn(aggregate):
    shifts = _unmoved_visual_states()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t6, t7, t8 = (table(shifts, aggregate=aggregate) for table in (table6, table7, table8))
        by_type = sensitivity(shifts, ("model", "modifier_type"), aggregate=aggregate).set_index(
            ["model", "modifier_type"]
        )
    assert t7["visual_state"].isna().all() and t8.loc["visual_state"].isna().all()
    assert_allclose(
        by_type.loc[("a", "visual_state"), ["human_shift", "ratio"]].to_numpy(float), [0.0, np.nan]
    )
    # The emotional variants are unaffected: (4 + 1) / (2 + 2) or the mean of 4/2 and 1/2.
    assert_allclose(t7.loc["a", "emotional"], 1.25)
    # Table 6 pools both types: the unmoved variants add 0 to the human mean (ratio of means)
    # or are left out (mean of ratios).
    expected = (5 + 4 + 5 + 4) / (0 + 2 + 0 + 2) if aggregate == "ratio_of_means" else 4 / 2
    assert_allclose(t6.loc["a", "clipart"], expected)
    assert t6.dtypes.eq(float).all() and t8.dtypes.eq(float).all()


@pytest.mark.parametrize("aggregate", ["ratio_of_means", "mean_of_ratios"])
def test_tables_6_to_8_with_intervals_say_in_words_that_people_did_not_shift(aggregate):
    shifts = _unmoved_visual_states()
    boot = bootstrap.draws(shifts[["concept", "modifier_type"]], bootstrap.Resampling(n_resamples=50, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        long7, _ = uncertainty.sensitivity(shifts, ("model", "modifier_type"), boot, aggregate=aggregate)
        long8 = uncertainty.table8(shifts, boot, aggregate=aggregate)
    shown7 = uncertainty.interval_table(long7, "model", "modifier_type")
    shown8 = uncertainty.interval_table(long8, "modifier_type", "style")
    assert shown7["visual_state"].tolist() == [NO_HUMAN_SHIFT, NO_HUMAN_SHIFT]
    assert shown8.loc["visual_state"].tolist() == [NO_HUMAN_SHIFT] * 3
    assert shown7.loc["a", "emotional"].startswith("1.250 [")
    assert all("[" in cell for cell in shown8.loc["emotional"])
    # The long forms stay numeric: NaN ratio and bounds, and the human shift that is 0.
    visual = long8[long8["modifier_type"] == "visual_state"]
    assert visual[["ratio", "ratio_lo", "ratio_hi"]].isna().all().all()
    assert visual["human_shift"].tolist() == [0.0, 0.0, 0.0]
    assert long8.drop(columns=["modifier_type", "style"]).dtypes.eq(float).all()


def test_pooled_cfg_averages_each_concept_over_its_scales_before_the_concepts():
    frame = metrics_frame(np.random.default_rng(11), cfgs=(2.0, 5.0, 8.0))
    # Give one concept an extra scale: pooling per concept first keeps its weight at one.
    extra = frame[(frame.concept == "apple") & (frame.cfg == 8.0)].assign(cfg=11.0, emd=1000.0)
    frame = pd.concat([frame, extra], ignore_index=True)
    board = table1(frame, cfg="mean")
    data = with_dca(frame)
    sel = data[(data.model == "sana") & (data["style"] == "natural") & (data.modifier_type == "original")]
    expected = sel.groupby("concept")["emd"].mean().mean()
    assert_allclose(board.values.loc["sana", ("original", "natural", "emd")], expected, rtol=1e-12)
    dca = sel.groupby("concept")["dca"].mean().mean()
    assert_allclose(
        table2(frame, cfg="mean").values.loc["sana", ("original", "natural", "dca")], dca, rtol=1e-12
    )
    with pytest.raises(ValueError, match="`cfg` must be a number, a mapping or 'mean', got 'max'"):
        select_cfg(data, "max")


def test_leaderboard_text_shows_the_full_paper_layout_with_dashes_for_empty_cells():
    frame = metrics_frame(np.random.default_rng(12))
    frame = frame[frame.modifier_type == "original"]
    text = table1(frame).to_text().splitlines()
    assert text[0].split() == ["type", "Original", "Visual", "state", "Emotional"]
    assert text[2].split() == ["metric"] + ["PCC", "EMD", "ED"] * 6
    assert text[-1].split()[0] == "sdxl" and text[-1].split()[-1] == "-"


def test_leaderboard_text_with_intervals_shows_value_and_bounds_in_each_cell():
    from dataclasses import replace

    frame = metrics_frame(np.random.default_rng(12))
    frame = frame[frame.modifier_type == "original"]
    board = table1(frame)
    board = replace(board, lo=board.values - 0.25, hi=board.values + 0.5)
    text = board.to_text(digits=2, line_width=10_000).splitlines()
    model = board.values.index[0]
    pcc = board.values.at[model, ("original", "natural", "pcc")]
    row = next(line for line in text if line.startswith(model))
    assert row.split()[1:4] == [f"{pcc:.2f}", f"[{pcc - 0.25:.2f},", f"{pcc + 0.5:.2f}]"]
    assert row.split()[-1] == "-"  # an empty cell stays a dash, without bounds


def test_a_column_whose_models_average_different_concept_sets_is_named_with_each_count():
    """The marks ranked 10 concepts' mean against 4's without a word (outside probe 144)."""
    frame = metrics_frame(np.random.default_rng(3), models=("flux", "sana"))
    assert table1(frame).uneven_note() == table2(frame).uneven_note() == ""
    # sana lacks the cabins in its natural style: 1 original concept against flux's 2.
    frame = frame[~((frame["model"] == "sana") & (frame["style"] == "natural") & (frame["base"] == "cabin"))]
    board = table1(frame)
    assert board.counts.loc[["flux", "sana"], ("original", "natural", "pcc")].tolist() == [2, 1]
    assert board.uneven_note() == (
        "Models average different concept sets in Original Natural (flux 2, sana 1): the marks rank "
        "those averages as they are, not the models on one set of concepts. Evaluate each model on "
        "the same concepts to compare like with like."
    )
    # Table 2's emotional column lost sana's lonely cabin: 0 concepts is no average, not named.
    assert "Emotional" not in table2(frame).uneven_note()
