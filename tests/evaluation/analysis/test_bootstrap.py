import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from evaluation.analysis import bootstrap, uncertainty
from evaluation.analysis.judgment_report import analyse
from evaluation.analysis.judgments import metric_validation
from evaluation.analysis.tables import concept_shifts, select_cfg, sensitivity, table1, table2, with_dca
from evaluation.color.extraction import distribution_from_pixels
from evaluation.pipeline import scoring
from tests.evaluation.analysis.test_judgments import emd_driven, simulate_votes, synthetic_metrics

TYPES = ("original", "visual_state", "emotional")


def synthetic_frame(rng, truth, n_per_type=40, sd=0.2):
    """Metrics rows for models whose per-concept PCC is their true mean plus noise."""
    rows = []
    for t in TYPES:
        for c in range(n_per_type):
            shared = rng.normal(0, sd)  # concept difficulty, common to every model
            for model, mean in truth.items():
                value = mean + shared + rng.normal(0, sd)
                rows.append(
                    {
                        "model": model,
                        "concept": f"{t}-{c}",
                        "base": f"{t}-{c}",
                        "modifier_type": t,
                        "style": "natural",
                        "cfg": 4.0,
                        "pcc": value,
                        "emd": 20 - 10 * value,
                        "ed": abs(value),
                        "dominant_model": int(rng.random() < mean),
                        "dominant_human": 1,
                        "hue_diff": np.nan if rng.random() < 0.2 else 30 * (1 - value),
                    }
                )
    return pd.DataFrame(rows)


def test_intervals_cover_the_true_mean_at_about_the_nominal_rate():
    truth = {"a": 0.5, "b": 0.6}
    rng = np.random.default_rng(2024)
    trials, covered = 200, 0
    for trial in range(trials):
        frame = synthetic_frame(rng, truth)
        board = table1(frame)
        boot = bootstrap.draws(frame, bootstrap.Resampling(n_resamples=400, seed=trial))
        board, _ = uncertainty.leaderboard(board, select_cfg(with_dca(frame), None), boot, "table1")
        for t in TYPES:
            lo, hi = board.lo.at["a", (t, "natural", "pcc")], board.hi.at["a", (t, "natural", "pcc")]
            covered += lo <= truth["a"] <= hi
    n = trials * len(TYPES)
    low, high = stats.binom.ppf([0.0005, 0.9995], n, 0.95)
    # the percentile interval of a mean of 40 undercovers slightly (about 0.94)
    assert low - 0.015 * n <= covered <= high, covered / n
    print(f"coverage {covered / n:.3f} of {n} intervals")


def test_a_clear_gap_is_distinguishable_and_a_tie_is_not():
    rng = np.random.default_rng(5)
    frame = synthetic_frame(rng, {"strong": 0.9, "tied-1": 0.4, "tied-2": 0.4}, n_per_type=60, sd=0.1)
    boot = bootstrap.draws(frame, bootstrap.Resampling(n_resamples=500, seed=1))
    _, ranking = uncertainty.leaderboard(table1(frame), with_dca(frame), boot, "table1")
    pcc = ranking[(ranking["metric"] == "pcc") & (ranking["modifier_type"] == "original")]
    assert pcc["better"].iloc[0] == "strong" and bool(pcc["distinguishable"].iloc[0])
    assert not bool(pcc["distinguishable"].iloc[1])
    emd = ranking[(ranking["metric"] == "emd") & (ranking["modifier_type"] == "original")]
    assert emd["better"].iloc[0] == "strong" and (emd["difference"] >= 0).all()
    note = uncertainty.significance_note(ranking)
    assert "Original Natural PCC: strong > tied-" in note and " ≈ tied-" in note


def test_cells_say_how_many_concepts_they_average_and_few_concepts_rank_no_model():
    """An outside tester's study: a clear gap on 2 concepts was called distinguishable, 1 concept
    got the interval [v, v], and an undefined PCC (a uniform P_H) left a cell averaging 3 of
    4 concepts without a word."""
    rng = np.random.default_rng(5)
    frame = synthetic_frame(rng, {"strong": 0.9, "weak": 0.1}, n_per_type=4, sd=0.01)
    frame = frame[(frame["modifier_type"] != "visual_state") | frame["concept"].str.endswith(("-0", "-1"))]
    frame = frame[(frame["modifier_type"] != "emotional") | frame["concept"].str.endswith("-0")]
    frame.loc[(frame["concept"] == "original-3") & (frame["model"] == "weak"), "pcc"] = np.nan
    board, ranking = uncertainty.leaderboard(
        table1(frame), with_dca(frame), bootstrap.draws(frame, bootstrap.Resampling(200, seed=1)), "table1"
    )
    n = board.counts.xs("pcc", axis=1, level="metric")
    assert n.loc["strong"].tolist() == [4, 2, 1] and n.loc["weak"].tolist() == [3, 2, 1]
    assert board.counts.xs("emd", axis=1, level="metric").loc["weak"].tolist() == [4, 2, 1]
    assert np.isnan(board.lo.at["strong", ("emotional", "natural", "pcc")])  # one concept: no interval
    assert board.lo.at["strong", ("visual_state", "natural", "pcc")] > 0.85  # two: an interval, shown
    pcc = ranking[ranking["metric"] == "pcc"].set_index("modifier_type").loc[list(TYPES)]
    assert pcc["n_concepts"].tolist() == [3, 2, 1] and not pcc["distinguishable"].any()
    assert (pcc["difference_lo"].iloc[:2] > 0.7).all()  # the gap is clear: only the count withholds '>'
    assert np.isnan(pcc["difference_lo"].iloc[2])  # one concept: no interval, as its cells have none
    note = uncertainty.significance_note(ranking)
    assert "- Visual state Natural PCC: strong ≈ weak (n = 2 concepts: too few to tell models apart)" in note
    shown = board.to_html()
    assert "n = 3</small>" in shown and "· n = 2</small>" in shown and "<br><small>n = 1</small>" in shown
    strong = next(line for line in board.to_text(line_width=10_000).splitlines() if line.startswith("strong"))
    assert strong.split()[1:5] == [
        f"{board.values.at['strong', ('original', 'natural', 'pcc')]:.3f}",
        *strong.split()[2:4],
        "n=4",
    ]
    assert " n=1" in strong and "] n=1" not in strong  # one concept: no bounds
    assert set(board.to_csv_frame().query("model == 'weak' and metric == 'pcc'")["n_concepts"]) == {3, 2, 1}

    # From five concepts on, the same gap is told apart.
    wide = synthetic_frame(rng, {"strong": 0.9, "weak": 0.1}, n_per_type=5, sd=0.01)
    _, ranking = uncertainty.leaderboard(
        table1(wide), with_dca(wide), bootstrap.draws(wide, bootstrap.Resampling(200, seed=1)), "table1"
    )
    assert ranking[ranking["metric"] == "pcc"]["distinguishable"].all()
    assert "too few" not in uncertainty.significance_note(ranking)


def test_every_table_gets_intervals_that_hold_its_values():
    rng = np.random.default_rng(9)
    frame = synthetic_frame(rng, {"a": 0.5, "b": 0.7}, n_per_type=10)
    board1, board2 = table1(frame), table2(frame)
    shifts = pd.DataFrame(
        {
            "model": ["a", "a", "b", "b"] * 5,
            "style": "natural",
            "base": "x",
            "concept": [f"v{i // 2}" for i in range(20)],
            "modifier_type": ["visual_state", "emotional"] * 10,
            "human_shift": rng.uniform(1, 10, 20),
            "model_shift": rng.uniform(1, 10, 20),
        }
    )
    found = uncertainty.analyse(frame, board1, board2, None, shifts, bootstrap.Resampling(n_resamples=200))
    for board in (found.table1, found.table2):
        values = board.values.to_numpy(float)
        defined = ~np.isnan(values)
        assert (board.lo.to_numpy(float)[defined] <= values[defined] + 1e-12).all()
        assert (board.hi.to_numpy(float)[defined] >= values[defined] - 1e-12).all()
    assert {"pcc_lo", "pcc_hi", "emd_lo", "emd_hi", "n_concepts"} <= set(found.sweep.columns)
    assert (found.sweep["emd_lo"] <= found.sweep["emd"]).all()
    assert_allclose(found.table7["ratio"], sensitivity(shifts, ("model", "modifier_type"))["ratio"])
    assert (found.table7["ratio_lo"] <= found.table7["ratio"]).all()
    assert set(found.table8["style"]) == {"natural", "average"}
    html = found.table1.to_html()
    assert html.count("<small>[") == np.isfinite(found.table1.lo.to_numpy(float)).sum()
    assert {"lo", "hi"} <= set(found.table1.to_csv_frame().columns)
    shown = uncertainty.interval_table(found.table7, "model", "modifier_type")
    assert shown.loc["a", "emotional"].count("[") == 1


def test_resampling_options_are_checked_and_described():
    with pytest.raises(ValueError, match="`n_resamples` must be a whole number of at least 10, got 5"):
        bootstrap.Resampling(n_resamples=5)
    with pytest.raises(ValueError, match="`colorings` must be at most 200, got 5000"):
        bootstrap.Resampling(colorings=5000)
    with pytest.raises(ValueError, match=r"`ci` must be in \(0, 1\), got 1.5"):
        bootstrap.Resampling(ci=1.5)
    text = bootstrap.Resampling(n_resamples=200, seed=7, colorings=20).describe()
    assert text.startswith("95% percentile intervals from 200 bootstrap resamples") and "seed 7" in text
    assert "20 P_H replicates per concept" in text


def noisy_colorings(rng, n=5, size=3000):
    pixels = []
    for _ in range(n):
        palette = rng.integers(0, 256, (3, 3))
        px = palette[rng.integers(0, 3, size)] + rng.normal(0, 4, (size, 3))
        pixels.append(np.clip(px, 0, 255).astype(np.uint8))
    return pixels


def test_resampled_distributions_equal_the_extraction_of_each_drawn_list():
    pixels = noisy_colorings(np.random.default_rng(3))
    replicates = bootstrap.resampled_distributions(pixels, 6, np.random.default_rng(8))
    drawn = np.random.default_rng(8).integers(0, len(pixels), size=(6, len(pixels)))
    for replicate, idx in zip(replicates, drawn):
        assert_allclose(replicate, distribution_from_pixels([pixels[i] for i in idx]).p, atol=1e-12)
    full = distribution_from_pixels(pixels).p
    assert bootstrap.stability(np.stack([full, full]), full) == pytest.approx(0.0, abs=1e-9)


def test_two_stage_intervals_add_the_colorings_uncertainty():
    rng = np.random.default_rng(4)
    keys = [f"c{i}" for i in range(12)]
    truth = {k: rng.dirichlet(np.ones(71)) for k in keys}
    human = {k: np.stack([rng.dirichlet(200 * truth[k] + 0.01) for _ in range(40)]) for k in keys}
    model_p = {(m, k, "natural"): rng.dirichlet(np.ones(71)) for m in ("a", "b") for k in keys}
    rows = [
        {"run": "r", "model": m, "concept": k, "style": s, "cfg": 4.0, "p": p, "n_images": 1, "n_excluded": 0}
        for (m, k, s), p in model_p.items()
    ]
    concepts = [type("C", (), {"key": k, "base": k, "modifier_type": "original"})() for k in keys]
    frame = scoring.score(rows, truth, concepts)
    board1, board2 = table1(frame), table2(frame)
    no_shifts = pd.DataFrame(
        columns=["model", "style", "base", "concept", "modifier_type", "human_shift", "model_shift"]
    ).astype({"human_shift": float, "model_shift": float})
    one = uncertainty.analyse(frame, board1, board2, None, no_shifts, bootstrap.Resampling(n_resamples=400))
    two = uncertainty.analyse(
        frame,
        board1,
        board2,
        None,
        no_shifts,
        bootstrap.Resampling(n_resamples=400, colorings=40),
        model_p=model_p,
        human=human,
    )
    widths = [
        (b.hi - b.lo)[[("original", "natural", "emd")]].to_numpy(float) for b in (one.table1, two.table1)
    ]
    assert (widths[1] > widths[0]).all()
    assert_allclose(two.table1.values, board1.values)


def test_metric_validation_drops_undefined_hue_pairs_and_counts_them_as_the_cli_does():
    rng = np.random.default_rng(11)
    metrics = synthetic_metrics(rng, n_concepts=40)
    votes = simulate_votes(metrics, emd_driven(metrics), rng)
    grey = metrics["concept"].isin([f"concept{i}" for i in range(10)]) & (metrics["model"] == "sana")
    metrics.loc[grey, "hue_diff"] = np.nan
    direct = metric_validation(votes, metrics, rng=np.random.default_rng(0), n_boot=50).set_index("metric")
    cli = analyse(votes, metrics, rng=np.random.default_rng(0), n_boot=50)["validation"].set_index("metric")
    # 10 concepts lose the two pairs with sana: 20 of 120 pairs
    assert direct.loc["hue_diff", "n_pairs"] == 100 and direct.loc["hue_diff", "n_undefined"] == 20
    assert direct.loc["emd", "n_pairs"] == 120 and direct.loc["emd", "n_undefined"] == 0
    assert np.isfinite(direct.loc["hue_diff", ["pearson", "spearman", "agreement"]].astype(float)).all()
    pd.testing.assert_frame_equal(direct, cli)


def test_shift_intervals_resample_the_variants():
    human = {"apple": np.eye(71)[0], "rotten apple": np.eye(71)[5]}
    dists = pd.DataFrame(
        {"model": "m", "style": "natural", "concept": list(human), "p": list(human.values())}
    )
    concepts = [
        type("C", (), {"key": "apple", "base": "apple", "modifier_type": "original"})(),
        type("C", (), {"key": "rotten apple", "base": "apple", "modifier_type": "visual_state"})(),
    ]
    shifts = concept_shifts(human, dists, concepts=concepts)
    boot = bootstrap.draws(shifts, bootstrap.Resampling(n_resamples=50))
    out, reps = uncertainty.sensitivity(shifts, ("model",), boot)
    assert_allclose(out["ratio"], [1.0]) and assert_allclose(reps, 1.0)


def test_the_leaderboard_view_resamples_the_designers_colorings(db, tmp_path):
    from annotation.concepts import sync_concepts
    from annotation.research.views import colorings_pixels, leaderboard_analyses
    from evaluation.concepts import load_concepts
    from tests.qc_data import add_coloring, people
    from tests.research_data import store_segmented_run

    sync_concepts(db)
    red, blue, green = (200, 30, 30), (30, 60, 200), (40, 150, 50)
    for designer, other in zip(people(db, 3, "designer"), (red, blue, green)):
        add_coloring(db, tmp_path, designer, "apple", red)
        add_coloring(db, tmp_path, designer, "banana", other)
    cells = {
        (m, k, "natural", 5.0): [c]
        for m, c in (("m-red", red), ("m-blue", blue))
        for k in ("apple", "banana")
    }
    store_segmented_run(db, tmp_path, "grid", cells)
    assert {k: len(v) for k, v in colorings_pixels(db, {"apple", "banana", "cat"}).items()} == {
        "apple": 3,
        "banana": 3,
    }
    plain = leaderboard_analyses(
        db, load_concepts(), "designers", resampling=bootstrap.Resampling(n_resamples=50)
    )
    two = leaderboard_analyses(
        db, load_concepts(), "designers", resampling=bootstrap.Resampling(n_resamples=50, colorings=20)
    )
    assert two.resampling.colorings == 20 and "20 P_H replicates per concept" in two.resampling.describe()
    assert_allclose(two.table1.values, plain.table1.values)
    emd = ("original", "natural", "emd")
    # apple's colorings agree, banana's do not: only the second stage widens m-red's interval
    assert (two.table1.hi - two.table1.lo).loc["m-red", emd] > (plain.table1.hi - plain.table1.lo).loc[
        "m-red", emd
    ]
    from evaluation.analysis.results import analysis_figures

    trace = analysis_figures(plain)["cfg_sweep"].data[0]
    part = plain.sweep[plain.sweep["model"] == trace.name]
    assert_allclose(trace.error_y.array, part["emd_hi"] - part["emd"])
    assert_allclose(trace.error_y.arrayminus, part["emd"] - part["emd_lo"])


def test_without_colorings_to_resample_the_stated_scheme_is_concepts_only():
    rng = np.random.default_rng(2)
    frame = synthetic_frame(rng, {"a": 0.5, "b": 0.6}, n_per_type=5)
    no_shifts = pd.DataFrame(
        columns=["model", "style", "base", "concept", "modifier_type", "human_shift", "model_shift"]
    )
    found = uncertainty.analyse(
        frame,
        table1(frame),
        table2(frame),
        None,
        no_shifts.astype({"human_shift": float, "model_shift": float}),
        bootstrap.Resampling(n_resamples=20, colorings=5),
    )
    assert found.resampling.colorings == 0 and "colorings" not in found.resampling.describe()
    with pytest.raises(ValueError, match="`frame` names concepts the draws do not"):
        bootstrap.group_means(frame, ["model"], "pcc", bootstrap.draws(frame.iloc[:3], found.resampling))


def test_models_equal_up_to_rounding_are_not_distinguishable():
    groups = pd.DataFrame({"model": ["a", "b"], "value": [-0.02, -0.02 - 1e-17]})
    replicates = np.tile([-0.02, -0.02 - 1e-17], (50, 1))
    found = bootstrap.ranking_significance(groups, replicates, True, 0.95)
    assert not found["distinguishable"].iloc[0]


def _flat(rgb, n=400):
    return np.broadcast_to(np.asarray(rgb, dtype=np.uint8), (n, 3)).copy()


def test_people_s_shift_intervals_span_the_draws_of_each_concept_s_colorings():
    from evaluation.color.metrics import emd

    red, brown = (200, 30, 30), (110, 70, 30)
    pixels = {
        "apple": [_flat(red), _flat(red)],
        "rotten apple": [_flat(brown), _flat(brown), _flat(brown)],  # agree: no spread
        "unripe apple": [_flat(brown), _flat(red)],  # all red, mixed or all brown
        "ripe apple": [],
    }
    full = distribution_from_pixels([_flat(red)]).p
    d = emd(full, distribution_from_pixels([_flat(brown)]).p)
    resampling = bootstrap.Resampling(n_resamples=200, seed=3)
    found = bootstrap.shift_intervals(pixels, "apple", resampling)
    assert found.columns.tolist() == ["concept", "shift_lo", "shift_hi"]
    assert found["concept"].tolist() == ["rotten apple", "unripe apple"]
    assert_allclose(found[["shift_lo", "shift_hi"]].to_numpy(), [[d, d], [0.0, d]], atol=1e-9)
    pd.testing.assert_frame_equal(found, bootstrap.shift_intervals(pixels, "apple", resampling))
    assert bootstrap.shift_intervals({"rotten apple": pixels["rotten apple"]}, "apple", resampling).empty


def test_the_concept_browser_puts_intervals_on_the_designers_shifts_and_says_so(db, tmp_path):
    from annotation.concepts import sync_concepts
    from annotation.research.views import concept_view
    from evaluation.analysis.comparison import HUMAN
    from evaluation.concepts import load_concepts
    from tests.qc_data import add_coloring, people
    from tests.research_data import store_segmented_run

    sync_concepts(db)
    red, brown = (200, 30, 30), (110, 70, 30)
    for designer, rotten in zip(people(db, 3, "designer"), (brown, brown, red)):
        add_coloring(db, tmp_path, designer, "apple", red)
        add_coloring(db, tmp_path, designer, "rotten apple", rotten)
    cells = {("m", k, "natural", 5.0): [c] for k, c in (("apple", red), ("rotten apple", brown))}
    store_segmented_run(db, tmp_path, "grid", cells)
    concepts = load_concepts()
    resampling = bootstrap.Resampling(n_resamples=100, seed=1)
    view = concept_view(db, tmp_path, concepts, "apple", "designers", "natural", resampling=resampling)
    human_trace, model_trace = view.shift_figure.data
    assert (human_trace.name, model_trace.name) == (HUMAN, "m · natural")
    expected = bootstrap.shift_intervals(
        {"apple": [_flat(red)] * 3, "rotten apple": [_flat(brown)] * 2 + [_flat(red)]}, "apple", resampling
    )
    shift = human_trace.y[0]
    assert_allclose(human_trace.error_y.array, [expected["shift_hi"].iloc[0] - shift], atol=1e-6)
    assert_allclose(human_trace.error_y.arrayminus, [shift - expected["shift_lo"].iloc[0]], atol=1e-6)
    assert model_trace.error_y.array is None  # the models' shifts have no interval
    caption = (
        "Error bars on people's shifts: 95% percentile intervals from 100 bootstrap resamples of "
        "each concept's colorings, seed 1."
    )
    assert view.shift_figure.layout.title.text.endswith(f"<br><sup>{caption}</sup>")
    from storage import human

    human.store_reference(db, "lab", {"apple": np.eye(71)[0], "rotten apple": np.eye(71)[5]}, "ours")
    reference = concept_view(db, tmp_path, concepts, "apple", "lab", "natural", resampling=resampling)
    assert reference.shift_figure.data[0].error_y.array is None
    assert "No intervals: only the designers' P_H has colorings to resample." in (
        reference.shift_figure.layout.title.text
    )
    plain = concept_view(db, tmp_path, concepts, "apple", "designers", "natural")
    assert plain.shift_figure.data[0].error_y.array is None  # intervals only when asked for
    assert "not asked for" in plain.shift_figure.layout.title.text


def test_a_ranked_pair_over_a_one_concept_cell_has_no_interval_as_the_cell_has_none():
    """The ranking CSV gave [d, d] where Tables 1-2 leave a one-concept cell's bounds empty
    (outside probe 91)."""
    rng = np.random.default_rng(0)
    replicates = rng.normal(size=(200, 3))
    rows = bootstrap.adjacent_pairs(
        np.array(["a", "b", "c"], dtype=object),
        np.array([0.9, 0.5, 0.1]),
        replicates,
        True,
        0.95,
        np.array([1, 6, 6]),
    )
    assert [(r["better"], r["worse"], r["n_concepts"]) for r in rows] == [("a", "b", 1), ("b", "c", 6)]
    assert np.isnan([rows[0]["difference_lo"], rows[0]["difference_hi"]]).all()
    assert rows[1]["difference_lo"] < rows[1]["difference_hi"]
