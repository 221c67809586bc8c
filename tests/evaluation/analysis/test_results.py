import numpy as np
import pandas as pd
import pytest
import sqlite_utils
from numpy.testing import assert_allclose
from pandas.testing import assert_frame_equal

import storage
from evaluation.analysis.results import (
    NO_SHIFTS,
    RECOMMENDED,
    analyses,
    analysis_figures,
    export_analyses,
    latest_distributions,
    metrics_frame,
    parse_cfg,
    recommended_cfg,
    resolve_cfg,
    with_provenance,
)
from evaluation.color import metrics
from evaluation.concepts import load_concepts
from evaluation.pipeline import runs
from tests.research_data import one_hot, store_segmented_run

CONCEPTS = load_concepts()
RED, GREEN, BROWN, YELLOW = (200, 30, 30), (40, 150, 50), (110, 70, 30), (235, 210, 50)
HUMAN = {"apple": one_hot(0, 0.5, 40), "rotten apple": one_hot(60, 0.7, 30), "banana": one_hot(50, 0.9, 10)}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("results")
    db = sqlite_utils.Database(data_dir / "db.sqlite")
    storage.ensure_schema(db)
    cells = {}
    for model, apple in (("m-red", RED), ("m-green", GREEN)):
        for cfg in (2.0, 5.0, 7.5):
            cells[(model, "apple", "natural", cfg)] = [apple, apple]
            cells[(model, "rotten apple", "natural", cfg)] = [BROWN, apple]
            cells[(model, "banana", "natural", cfg)] = [YELLOW]
    store_segmented_run(db, data_dir, "grid", cells)
    return db, data_dir


def _p(db, model, concept, cfg):
    rows = [
        r
        for r in latest_distributions(runs.model_distributions(db))
        if (r["model"], r["concept"], r["cfg"]) == (model, concept, cfg)
    ]
    return rows[0]["p"]


def test_tables_1_and_2_are_means_of_the_per_concept_metrics_at_the_recommended_scale(stored):
    db, _ = stored
    result = analyses(runs.model_distributions(db), HUMAN, CONCEPTS)
    assert result.cfg == {"m-green": 5.0, "m-red": 5.0}
    for model in ("m-red", "m-green"):
        ps = {c: _p(db, model, c, 5.0) for c in HUMAN}
        assert result.table1.values.loc[model, ("original", "natural", "pcc")] == pytest.approx(
            np.mean([metrics.pcc(HUMAN[c], ps[c]) for c in ("apple", "banana")])
        )
        assert result.table1.values.loc[model, ("visual_state", "natural", "emd")] == pytest.approx(
            metrics.emd(HUMAN["rotten apple"], ps["rotten apple"])
        )
        assert result.table2.values.loc[model, ("original", "natural", "dca")] == pytest.approx(
            np.mean(
                [metrics.dominant_bins(HUMAN[c]) == metrics.dominant_bins(ps[c]) for c in ("apple", "banana")]
            )
        )
    emd = result.table1.values[("original", "natural", "emd")]
    assert result.table1.marks.loc[emd.idxmin(), ("original", "natural", "emd")] == "best"
    assert result.table1.marks.loc[emd.idxmax(), ("original", "natural", "emd")] == "second"


def test_the_cfg_sweep_figure_plots_the_mean_metrics_of_every_scale(stored):
    db, _ = stored
    result = analyses(runs.model_distributions(db), HUMAN, CONCEPTS)
    fig = analysis_figures(result)["cfg_sweep"]
    emd_traces = {t.name: t for t in fig.data if t.xaxis == "x"}
    for model in ("m-red", "m-green"):
        trace = emd_traces[model]
        assert list(trace.x) == [2.0, 5.0, 7.5]
        expected = [np.mean([metrics.emd(HUMAN[c], _p(db, model, c, cfg)) for c in HUMAN]) for cfg in trace.x]
        assert_allclose(trace.y, expected, rtol=1e-12)


def test_shift_scatter_and_sensitivity_use_emd_between_base_and_variant(stored):
    db, _ = stored
    result = analyses(runs.model_distributions(db), HUMAN, CONCEPTS, cfg=7.5)
    human_shift = metrics.shift(HUMAN["apple"], HUMAN["rotten apple"])
    scatter = {t.name: t for t in analysis_figures(result)["shift_scatter"].data}
    for model in ("m-red", "m-green"):
        model_shift = metrics.shift(_p(db, model, "apple", 7.5), _p(db, model, "rotten apple", 7.5))
        assert_allclose(scatter[model].x, [human_shift]) and assert_allclose(scatter[model].y, [model_shift])
        assert list(scatter[model].customdata[0]) == ["rotten apple", "visual_state"]
        row = result.sensitivity.set_index("model").loc[model]
        assert row["ratio"] == pytest.approx(model_shift / human_shift)
        assert result.table7.loc[model, "visual_state"] == pytest.approx(model_shift / human_shift)
    bars = analysis_figures(result)["sensitivity"].data
    assert [b.name for b in bars] == ["Visual state"]
    assert_allclose(bars[0].y, result.sensitivity["ratio"])


def test_exports_hold_the_tables_and_the_figures(stored, tmp_path):
    db, _ = stored
    result = analyses(runs.model_distributions(db), HUMAN, CONCEPTS)
    paths = export_analyses(result, analysis_figures(result), tmp_path, source="test-human")
    names = [p.name.rsplit("-", 1)[0] + p.suffix for p in paths]
    assert names == [
        "metrics.csv",
        "table1.csv",
        "table2.csv",
        "sweep.csv",
        "shifts.csv",
        "sensitivity.csv",
        "table6.csv",
        "table7.csv",
        "table8.csv",
        "table6_ci.csv",
        "table7_ci.csv",
        "table8_ci.csv",
        "ranking.csv",
        "cfg_sweep.html",
        "sensitivity.html",
        "shift_scatter.html",
    ]
    table1 = pd.read_csv(paths[1])
    best = table1[(table1["metric"] == "emd") & (table1["mark"] == "best")].set_index("modifier_type")
    for kind in ("original", "visual_state"):
        column = result.table1.values[(kind, "natural", "emd")]
        assert best.loc[kind, "model"] == column.idxmin()
        assert best.loc[kind, "value"] == pytest.approx(column.min())
    metrics = pd.read_csv(paths[0])
    assert_allclose(metrics["emd"], result.metrics["emd"])
    # As the command line's scores_long.csv: the source, and the dominant bins' names.
    assert set(metrics["source"]) == {"test-human"} and "dominant_human_name" in metrics
    # Each row's DCA, whose mean by cell is Table 2's (outside probe 226: the file had none).
    same = (metrics["dominant_human"] == metrics["dominant_model"]).astype(float)
    assert metrics["dca"].tolist() == same.tolist()
    for (model, kind, style), dca in (
        metrics.groupby(["model", "modifier_type", "style"])["dca"].mean().items()
    ):
        assert dca == pytest.approx(result.table2.values.loc[model, (kind, style, "dca")])
    assert "plotly" in paths[-1].read_text(encoding="utf-8")
    assert export_analyses(result, analysis_figures(result), tmp_path, source="test-human") == paths
    # Each row says what its numbers come from (outside probe 88: nothing did).
    assert set(table1["source"]) == {"test-human"} and set(table1["runs"]) == {"grid"}
    assert set(table1["cfg"]) == {5.0} and set(table1["resampled_concepts"]) == {3}
    assert set(table1["n_resamples"]) == {1000} and set(table1["seed"]) == {0}
    # The ratio of the sensitivity and Tables 6-8, which changes their numbers (outside probe 187)
    for name in ("sensitivity", "table6", "table7", "table8", "table6_ci", "table7_ci", "table8_ci"):
        frame = pd.read_csv(paths[names.index(f"{name}.csv")])
        assert len(frame) and set(frame["sensitivity_ratio"]) == {"ratio_of_means"}, name
    other = analyses(runs.model_distributions(db), HUMAN, CONCEPTS, aggregate="mean_of_ratios")
    exported = export_analyses(other, analysis_figures(other), tmp_path / "other", source="test-human")
    assert set(pd.read_csv(exported[names.index("table6.csv")])["sensitivity_ratio"]) == {"mean_of_ratios"}


def test_an_export_without_concept_shifts_says_why_its_shift_tables_and_figure_4_are_empty(stored, tmp_path):
    """Base concepts only (a reference set's): Tables 6-8 were a bare header row and Figure 4
    two blank plots in the export; the app's view said why, the files did not."""
    db, _ = stored
    base = {c: p for c, p in HUMAN.items() if c != "rotten apple"}
    result = analyses(runs.model_distributions(db), base, CONCEPTS)
    assert result.shifts.empty
    figs = analysis_figures(result)
    for name in ("sensitivity", "shift_scatter"):
        assert NO_SHIFTS in [a.text.replace("<br>", " ") for a in figs[name].layout.annotations]
    exported = export_analyses(result, figs, tmp_path, source="test-human")
    paths = {p.name.rsplit("-", 1)[0] + p.suffix: p for p in exported}
    for name in ("shifts", "sensitivity", "table6", "table7", "table8"):
        assert pd.read_csv(paths[f"{name}.csv"]).to_dict("list") == {"note": [NO_SHIFTS]}
    assert set(pd.read_csv(paths["table1.csv"])["model"]) == {"m-red", "m-green"}  # the rest as before


def test_a_csv_row_names_the_runs_at_its_scale_and_the_concepts_its_intervals_draw_from(stored, tmp_path):
    """Another run's concept leaves a cell's value as it was and joins the concepts the
    (paired) bootstrap draws from, which can move the cell's interval: the CSV says so."""
    db, data_dir = stored
    other = sqlite_utils.Database(memory=True)
    storage.ensure_schema(other)
    cells = {("m-red", "apple", "natural", 5.0): [GREEN], ("m-red", "lemon", "natural", 5.0): [YELLOW]}
    store_segmented_run(other, data_dir, "later", cells)
    both = runs.model_distributions(db) + runs.model_distributions(other)
    human = {**HUMAN, "lemon": one_hot(50, 0.9, 10)}
    alone, together = analyses(runs.model_distributions(db), human, CONCEPTS), analyses(both, human, CONCEPTS)
    frames = [
        with_provenance(r.table1.to_csv_frame(), r, "test-human").set_index(
            ["model", "modifier_type", "style", "metric"]
        )
        for r in (alone, together)
    ]
    cell = ("m-green", "original", "natural", "pcc")
    assert frames[1].loc[cell, "value"] == pytest.approx(frames[0].loc[cell, "value"])
    assert (frames[0].loc[cell, "resampled_concepts"], frames[1].loc[cell, "resampled_concepts"]) == (3, 4)
    assert frames[1].loc[cell, "runs"] == "grid"
    assert frames[1].loc[("m-red", "original", "natural", "pcc"), "runs"] == "grid later"  # the newest apple
    # A cell the later run has no concept of names its own runs, not the model's (outside probe 187)
    assert frames[1].loc[("m-red", "visual_state", "natural", "pcc"), "runs"] == "grid"


def test_the_newest_distribution_of_a_cell_wins(stored):
    db, data_dir = stored
    newer = sqlite_utils.Database(memory=True)
    storage.ensure_schema(newer)
    store_segmented_run(newer, data_dir, "again", {("m-red", "apple", "natural", 5.0): [GREEN]})
    rows = runs.model_distributions(db) + runs.model_distributions(newer)
    frame = metrics_frame(rows, HUMAN, CONCEPTS)
    cell = frame[(frame["model"] == "m-red") & (frame["concept"] == "apple") & (frame["cfg"] == 5.0)]
    assert cell["run"].tolist() == ["again"]
    assert len(frame) == 18


def test_recommended_scale_is_the_lower_middle_and_a_missing_scale_is_an_error(stored):
    frame = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 3, "cfg": [2.0, 7.5, 3.0, 4.0, 1.0, 9.0, 5.0]})
    assert recommended_cfg(frame) == {"a": 3.0, "b": 5.0}
    assert resolve_cfg(frame, RECOMMENDED) == {"a": 3.0, "b": 5.0}
    both = pd.DataFrame({"model": ["a", "a", "b"], "cfg": [4.0, 2.0, 4.0]})
    assert resolve_cfg(both, " 4 ") == {"a": 4.0, "b": 4.0}
    with pytest.raises(
        ValueError,
        match=r"`cfg` 2 is not a stored guidance scale of every model; stored scales: \{'b': \[4.0\]\}",
    ):
        resolve_cfg(both, 2)
    with pytest.raises(ValueError, match="`cfg` must be 'recommended' or a guidance scale"):
        resolve_cfg(frame, "strong")
    for foreign in ("\u0665", "\uff17.\uff15", "1_0"):  # float read an Arabic-Indic 5 and a full-width 7.5
        with pytest.raises(
            ValueError, match=f"`cfg` must be 'recommended' or a guidance scale, got '{foreign}'"
        ):
            parse_cfg(foreign)
    db, _ = stored
    with pytest.raises(ValueError, match="`cfg` 3 is not a stored guidance scale of every model"):
        analyses(runs.model_distributions(db), HUMAN, CONCEPTS, cfg=3.0)
    with pytest.raises(ValueError, match="no stored model distribution has a human distribution"):
        analyses(runs.model_distributions(db), {"sky": one_hot(3)}, CONCEPTS)
    # The tables take the mean over scales too, and say so.
    with pytest.raises(
        ValueError,
        match=r"^`cfg` must be 'recommended', 'mean' \(over every scale\) or a guidance scale, got 'abc'$",
    ):
        analyses(runs.model_distributions(db), HUMAN, CONCEPTS, cfg="abc")


def test_a_scale_typed_a_hair_off_a_stored_one_is_the_stored_one(stored):
    """A typed 2.0000001 was accepted as typed: the tables were labelled with it and the
    leaderboard failed with a pandas merge message (outside probe 199)."""
    db, _ = stored
    rows = runs.model_distributions(db)
    assert resolve_cfg(pd.DataFrame({"model": ["a", "a"], "cfg": [5.0, 7.5]}), "5.0000001") == {"a": 5.0}
    typed, exact = (analyses(rows, HUMAN, CONCEPTS, cfg=cfg, resampling=None) for cfg in ("5.0000001", 5.0))
    assert typed.cfg == exact.cfg == {"m-green": 5.0, "m-red": 5.0}
    assert_frame_equal(typed.table1.values, exact.table1.values)
    assert_frame_equal(typed.metrics, exact.metrics)
    # The CSVs say the scale used (python -m evaluation score wrote the typed 5.0000001)
    written = with_provenance(typed.table1.to_csv_frame(), typed, "lab")
    assert set(written["cfg"]) == {5.0} and set(written["runs"]) == {"grid"}


def test_mean_pools_each_concept_over_its_scales_for_tables_1_and_2(stored):
    db, _ = stored
    result = analyses(runs.model_distributions(db), HUMAN, CONCEPTS, cfg="mean")
    assert result.pooled and result.cfg == {"m-green": 5.0, "m-red": 5.0}
    for model in ("m-red", "m-green"):
        per_concept = [
            np.mean([metrics.emd(HUMAN[c], _p(db, model, c, cfg)) for cfg in (2.0, 5.0, 7.5)])
            for c in ("apple", "banana")
        ]
        assert result.table1.values.loc[model, ("original", "natural", "emd")] == pytest.approx(
            np.mean(per_concept)
        )
    at_recommended = analyses(runs.model_distributions(db), HUMAN, CONCEPTS)
    assert not at_recommended.pooled
    pd.testing.assert_frame_equal(result.shifts, at_recommended.shifts)
