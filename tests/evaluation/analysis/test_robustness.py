import numpy as np
import pandas as pd
import pytest
import sqlite_utils
from numpy.testing import assert_allclose

import storage
from evaluation.analysis import robustness
from evaluation.color.colorspace import srgb_to_lab
from evaluation.color.extraction import distribution_from_pixels, group_images
from evaluation.color.palette import nearest_uw71
from evaluation.concepts import load_concepts
from evaluation.explicit.views import EXPLICIT_CHOICES, explicit_robustness
from evaluation.pipeline import runs
from tests.research_data import one_hot, store_segmented_run

CONCEPTS = load_concepts()
RED, ORANGE, BLACK, BROWN = (200, 30, 30), (225, 120, 40), (3, 3, 3), (110, 70, 30)


def bin_of(rgb) -> int:
    return int(nearest_uw71(srgb_to_lab(np.array(rgb, dtype=np.uint8))))


HUMAN = {
    "apple": one_hot(bin_of(RED), 0.9, bin_of(BROWN)),
    "rotten apple": one_hot(bin_of(BROWN), 0.9, bin_of(RED)),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """m-dark paints apples mostly near-black (L* < 5); m-orange adds an orange image."""
    data_dir = tmp_path_factory.mktemp("robust")
    db = sqlite_utils.Database(data_dir / "db.sqlite")
    storage.ensure_schema(db)
    cells = {
        ("m-dark", "apple", "natural", 5.0): [BLACK, BLACK, RED],
        ("m-orange", "apple", "natural", 5.0): [ORANGE, RED, RED],
        ("m-dark", "rotten apple", "natural", 5.0): [BROWN, BROWN],
        ("m-orange", "rotten apple", "natural", 5.0): [BROWN, BROWN],
    }
    store_segmented_run(db, data_dir, "grid", cells)
    return db, data_dir


def test_the_gencolor_filter_swaps_two_models_and_the_report_says_so(stored):
    db, data_dir = stored
    rows = runs.model_distributions(db)
    pixels = robustness.stored_pixels(db, data_dir, rows)
    assert sorted(len(v) for v in pixels.values()) == [2, 2, 3, 3]
    report = robustness.robustness(rows, HUMAN, CONCEPTS, model_pixels=pixels)
    emd = report[(report["choice"] == "pixel_filter") & (report["metric"] == "emd")].iloc[0]
    assert emd["alternative"] == "gencolor" and emd["swapped"] == "m-orange ↔ m-dark"
    assert emd["kendall_tau"] == pytest.approx(-1.0)
    # under the filter m-dark's apple is pure red: its EMD falls to 0 (from 2/3 of black→red)
    assert emd["where"] == "m-dark original/natural"
    assert emd["recomputed"] == "re-extracted from pixel summaries, every concept"
    unchanged = report[(report["choice"] == "linkage") & (report["metric"] == "emd")].iloc[0]
    assert unchanged["swapped"] == "" and unchanged["largest_change"] == pytest.approx(0.0, abs=1e-9)
    assert unchanged["where"] == ""
    assert set(report["choice"]) == set(robustness.CHOICES)
    text = robustness.describe(report)
    assert (
        "- pixel_filter none → gencolor: **PCC: m-orange ↔ m-dark (τ = -1.00); EMD: m-orange ↔ m-dark" in text
    )
    assert "- linkage single → average: no ranking changes" in text


def test_a_metric_no_two_models_have_under_both_choices_is_said_not_compared():
    """ΔHue with every dominant color grey under `exclude` has no ranking: it read "no ranking
    changes", as if the choice did not matter."""
    base = pd.DataFrame({"model": ["a", "b"], "cell": "all", "metric": "hue_diff", "value": [np.nan, np.nan]})
    compared = robustness.compare(base, base.assign(value=[10.0, 20.0]))
    assert np.isnan(compared.loc[0, "kendall_tau"]) and np.isnan(compared.loc[0, "largest_change"])
    assert compared.loc[0, "swapped"] == "not compared (fewer than two models have a value under both)"
    report = compared.assign(
        choice="grey_hue", default="exclude", alternative="atan2", recomputed="from the scores, every concept"
    )
    assert robustness.describe(report) == (
        "- grey_hue exclude → atan2: not compared (fewer than two models have a value under both): "
        "ΔHue (from the scores, every concept)"
    )
    both = pd.concat(
        [report, report.assign(metric="pcc", largest_change=0.0, kendall_tau=1.0, swapped="")],
        ignore_index=True,
    )
    assert robustness.describe(both).startswith(
        "- grey_hue exclude → atan2: no ranking changes; not compared"
    )


def test_without_pixel_summaries_only_the_score_choices_are_compared(stored):
    db, _ = stored
    report = robustness.robustness(runs.model_distributions(db), HUMAN, CONCEPTS)
    assert set(report["choice"]) == {"cfg", "sensitivity", "grey_hue"}
    assert list(report.columns) == [*robustness.REPORT_COLUMNS, "seconds"]
    with pytest.raises(ValueError, match="no stored model distribution has a human distribution"):
        robustness.robustness(runs.model_distributions(db), {"banana": one_hot(3)}, CONCEPTS)


def test_grey_hue_modes_give_known_differences():
    grey, red_bin, other = 24, bin_of(RED), bin_of((40, 150, 50))
    frame = pd.DataFrame({"dominant_human": [grey, grey, red_bin], "dominant_model": [grey, red_bin, other]})
    exclude = robustness.hue_differences(frame, "exclude")
    assert np.isnan(exclude[0]) and np.isnan(exclude[1]) and exclude[2] > 0
    assert_allclose(robustness.hue_differences(frame, "match")[:2], [0.0, 180.0])
    atan2 = robustness.hue_differences(frame, "atan2")
    assert atan2[0] == 0.0 and atan2[2] == pytest.approx(exclude[2])
    with pytest.raises(ValueError, match="`grey_hue` must be one of"):
        robustness.hue_differences(frame, "zero")


def test_a_seeded_sample_keeps_whole_families():
    keys = {c.key for c in CONCEPTS}
    picked = robustness.sample_families(CONCEPTS, keys, 5, 7)
    assert picked == robustness.sample_families(CONCEPTS, keys, 5, 7)
    bases = {c.base for c in CONCEPTS if c.key in picked}
    assert len(bases) == 5 and picked == {c.key for c in CONCEPTS if c.base in bases}
    with pytest.raises(ValueError, match="`sample` must be a whole number >= 1, got 0"):
        robustness.sample_families(CONCEPTS, keys, 0, 7)


def test_extraction_options_filter_dark_pixels_and_link_by_average():
    dark = np.full((50, 3), 2, np.uint8)
    red = np.tile(np.array(RED, np.uint8), (50, 1))
    filtered = distribution_from_pixels([dark, red], pixel_filter="gencolor").p
    assert filtered[bin_of(RED)] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="`pixel_filter` 'gencolor' left no pixel"):
        distribution_from_pixels([dark], pixel_filter="gencolor")
    with pytest.raises(ValueError, match="`linkage` must be one of"):
        distribution_from_pixels([red], linkage="complete")
    # a chain: 0-1 and 1-2 within 12 ΔE00, 0-2 far apart
    lab = np.array([[50.0, 0, 0], [50.0, 0, 12], [50.0, 0, 24]])  # ΔE00 9.4, 6.6; ends 15.6
    assert group_images(lab, linkage="single") == [[0, 1, 2]]
    assert group_images(lab, linkage="average") == [[1, 2], [0]]


def test_the_command_prints_the_swap_and_writes_the_report(stored, tmp_path, capsys):
    from evaluation.__main__ import main
    from storage import human

    db, data_dir = stored
    human.store_reference(db, "lab", HUMAN, "two concepts rated by our lab")
    db_path = db.conn.execute("pragma database_list").fetchone()[2]
    code = main(
        [
            "robustness",
            "--db",
            db_path,
            "--data-dir",
            str(data_dir),
            "--reference",
            "lab",
            "--out",
            str(tmp_path),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "pixel_filter none → gencolor: **PCC: m-orange ↔ m-dark" in printed
    written = pd.read_csv(tmp_path / "robustness.csv")
    assert set(written["choice"]) == set(robustness.CHOICES)
    assert main(["robustness", "--db", db_path, "--reference", "nobody"]) == 2
    assert "nobody" in capsys.readouterr().err


def test_a_choice_whose_metric_no_model_has_is_reported_not_compared_rather_than_unchanged(
    db, tmp_path, capsys
):
    """No modifier concept, no sensitivity: the sensitivity choice read "no ranking changes",
    from five rows of metrics it cannot move (0.000, τ 1.000), as if it did not matter."""
    from evaluation.__main__ import main
    from storage import human

    cells = {(m, "apple", "natural", 5.0): [rgb, rgb] for m, rgb in (("m-red", RED), ("m-orange", ORANGE))}
    store_segmented_run(db, tmp_path, "grid", cells)
    human.store_reference(db, "lab", {"apple": HUMAN["apple"]}, "one concept rated by our lab")
    db_path = db.conn.execute("pragma database_list").fetchone()[2]
    argv = ["robustness", "--db", db_path, "--data-dir", str(tmp_path), "--reference", "lab"]
    assert main([*argv, "--no-reextract", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert (
        "- sensitivity ratio_of_means → mean_of_ratios: not compared (fewer than two models have a "
        "value under both): sensitivity (from the scores, every concept)\n" in printed
    )
    # Both models paint one color each: their entropy differences tie, no ranking (was τ = 1).
    assert (
        "- cfg recommended → mean: no ranking changes; not compared (the models tie under one of them: "
        "no ranking): ED; not compared (fewer than two models" in printed
    )
    written = pd.read_csv(tmp_path / "out" / "robustness.csv")
    written["swapped"] = written["swapped"].fillna("")  # an empty cell: no pair swaps
    moved = written[written["choice"].isin(["sensitivity", "grey_hue"])]
    assert moved[["choice", "metric", "swapped"]].to_dict("records") == [
        {"choice": "sensitivity", "metric": "sensitivity", "swapped": robustness.NOT_COMPARED},
        {"choice": "grey_hue", "metric": "hue_diff", "swapped": ""},
        {"choice": "grey_hue", "metric": "hue_diff", "swapped": ""},
    ]
    unvalued = written[written["metric"] == "sensitivity"]
    assert len(unvalued) == 4 and set(unvalued["swapped"]) == {robustness.NOT_COMPARED}
    assert unvalued["largest_change"].isna().all() and unvalued["kendall_tau"].isna().all()


def test_a_damaged_pixel_summary_is_refused_naming_its_file_and_item(db, tmp_path):
    """numpy's own words said neither which file nor which item (and to load it unsafely)."""
    store_segmented_run(db, tmp_path, "grid", {("m-red", "apple", "natural", 5.0): [RED, RED]})
    damaged = runs.items(db, "grid")[1]
    (tmp_path / damaged["summary_path"]).write_text("not a pixel summary\n")
    with pytest.raises(ValueError) as refused:
        robustness.stored_pixels(db, tmp_path, runs.model_distributions(db))
    assert str(refused.value).startswith(
        f"runs/grid/pixels/m-red-apple-natural-5.0-1.npz: the pixel summary of item {damaged['id']} of "
        "run 'grid' (m-red, apple, natural, cfg 5, sample 1) cannot be read (it is not a readable .npz "
        "archive); put the file back from a copy of the data folder"
    )


def test_the_robustness_report_re_extracts_the_designers_p_h_too(db, tmp_path):
    from annotation.concepts import sync_concepts
    from annotation.research.views import robustness_report
    from evaluation.concepts import load_concepts
    from tests.qc_data import add_coloring, people
    from tests.research_data import store_segmented_run

    sync_concepts(db)
    red, blue = (200, 30, 30), (30, 60, 200)
    for designer in people(db, 2, "designer"):
        add_coloring(db, tmp_path, designer, "apple", red)
    cells = {(m, "apple", "natural", 5.0): [c, red] for m, c in (("m-red", red), ("m-blue", blue))}
    store_segmented_run(db, tmp_path, "grid", cells)
    report, text = robustness_report(db, tmp_path, load_concepts(), "designers")
    how = report.drop_duplicates("choice").set_index("choice")["recomputed"]
    assert how["bin_color"] == "re-extracted from pixel summaries, every concept, P_H too"
    assert how["pixel_filter"] == "re-extracted from pixel summaries, every concept"
    assert how["cfg"] == "from the scores, every concept"
    assert "- bin_color mean → centre:" in text


def _verdict(item: int, model: str, scoring: str, correct: int, system: str = "iscc-nbs-l2") -> dict:
    """One object's verdict row as `runs.explicit_results` gives it (the fields the tables read)."""
    return {
        "run": "x",
        "item_id": item,
        "model": model,
        "prompt_id": f"p{item}",
        "task": "color_name",
        "level": 1,
        "system": system,
        "category": "vehicles",
        "notation": "name",
        "scoring": scoring,
        "object": "car",
        "present": 1,
        "segment_status": "ok",
        "correct": correct,
    }


def test_explicit_rule_sets_are_an_open_choice_whose_swaps_are_reported():
    """m-lit is right on 3 of 4 images under the default rules and m-flat on 1; under the
    plain mean it is the other way round; the released rules keep the order."""
    outcomes = {  # model -> rule set -> verdicts of its 4 images
        "m-lit": {"paper": [1, 1, 1, 0], "paper-mean": [0, 0, 0, 1], "released": [1, 1, 0, 0]},
        "m-flat": {"paper": [1, 0, 0, 0], "paper-mean": [1, 1, 0, 0], "released": [1, 0, 0, 0]},
    }
    rows = [
        _verdict(10 * i + j, model, scoring, correct)
        for i, (model, by_rules) in enumerate(outcomes.items())
        for scoring, verdicts in [*by_rules.items(), ("released-closest", by_rules["released"])]
        for j, correct in enumerate(verdicts)
    ]
    report = explicit_robustness(rows).set_index("alternative")
    assert list(report.index) == ["paper-mean", "released", "released-closest"]
    assert set(report["choice"]) == set(EXPLICIT_CHOICES) and set(report["default"]) == {"paper"}
    assert set(report["metric"]) == {"accuracy"}
    assert report.loc["paper-mean", "swapped"] == "m-lit ↔ m-flat"
    assert report.loc["paper-mean", "kendall_tau"] == pytest.approx(-1.0)
    assert report.loc["paper-mean", "largest_change"] == pytest.approx(50.0)
    assert report.loc["released", "swapped"] == "" and report.loc["released", "kendall_tau"] == pytest.approx(
        1.0
    )
    assert report.loc["released", "largest_change"] == pytest.approx(25.0)
    assert report.loc["released", "where"] == "m-lit iscc-nbs-l2/color_name"
    with pytest.raises(ValueError, match="'paper' rules"):
        explicit_robustness([r for r in rows if r["scoring"] != "paper"])


def test_models_that_all_tie_have_no_ranking_to_compare():
    """Two explicit-color models at 0 % under every rule set read "no ranking changes", τ = 1
    (outside probe 104); a partial tie still ranks."""
    from evaluation.analysis import robustness

    def frame(values):
        return pd.DataFrame(
            {"model": list(values), "cell": "all", "metric": "accuracy", "value": list(values.values())}
        )

    tied = robustness.compare(frame({"a": 0.0, "b": 0.0}), frame({"a": 0.0, "b": 0.0}))
    assert np.isnan(tied["kendall_tau"].iloc[0]) and tied["swapped"].iloc[0] == robustness.TIED
    swapped = robustness.compare(
        frame({"a": 10.0, "b": 5.0, "c": 5.0}), frame({"a": 1.0, "b": 5.0, "c": 5.0})
    )
    assert swapped["kendall_tau"].iloc[0] < 0 and swapped["swapped"].iloc[0] == "a ↔ b; a ↔ c"
