"""The Leaderboards tab through gradio_client: tables, figures and exports against the stored metrics."""

import html
import warnings
from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from annotation.research import views
from app.leaderboard import TABLE1, TABLE2, _drawing
from evaluation.analysis.bootstrap import Resampling
from evaluation.analysis.results import analyses
from evaluation.concepts import load_concepts
from evaluation.pipeline import runs
from storage import ensure_schema, open_db
from storage import human as human_rows
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import assert_every_endpoint_refuses, figure, one_hot, sign_in, store_segmented_run

HUMAN = {
    "apple": one_hot(0, 0.5, 40),
    "rotten apple": one_hot(60, 0.7, 30),
    "lonely cabin": one_hot(25, 0.6, 5),
    "cabin": one_hot(8, 0.5, 30),
}
COLORS = {"m-red": (200, 30, 30), "m-grey": (120, 120, 120)}
BOOT = ("200", "3", "0")  # bootstrap resamples, seed, P_H replicates per concept


def _store(config, human=HUMAN):
    db = open_db(config.db_path)
    try:
        human_rows.store_reference(db, "lab", human, "four concepts rated by our lab")
        cells = {}
        for model, color in COLORS.items():
            for cfg in (2.0, 4.0, 6.0):
                for concept in human:
                    shade = tuple(min(255, c + int(10 * cfg) * ("rotten" in concept)) for c in color)
                    cells[(model, concept, "natural", cfg)] = [shade, color]
        store_segmented_run(db, config.data_dir, "grid", cells)
        return analyses(
            runs.model_distributions(db),
            human,
            load_concepts(),
            resampling=Resampling(n_resamples=200, seed=3),
        )
    finally:
        db.close()


def test_leaderboards_figures_and_exports_match_the_stored_metrics(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        expected = _store(config)
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        note, table1, table2, sweep, sensitivity, scatter, table6, table7, table8, intervals = client.predict(
            researcher, "lab", "recommended", "ratio_of_means", *BOOT, api_name="/leaderboard_show"
        )
        files = client.predict(
            researcher, "lab", "recommended", "ratio_of_means", *BOOT, api_name="/leaderboard_export"
        )
        pooled_note, pooled_table1, *_ = client.predict(
            researcher, "lab", "mean", "ratio_of_means", "200", "3", "2", api_name="/leaderboard_show"
        )
    # With every scale averaged, the note says which scale the other views take in a sentence
    # (it read "…its scales; shifts: Guidance scale per model: …": outside probe 231).
    pooled = (
        "Tables 1-2: each concept averaged over its guidance scales; the shifts (Tables 6-8, Figure 4) "
        "at the recommended guidance scale per model: m-grey at 4, m-red at 4."
    )
    assert pooled in pooled_note and f"<p>{pooled}</p>" in pooled_table1
    # P_H replicates asked against a reference set are said to be unused (they were accepted
    # and silently did nothing: outside probe 231); none asked, no line.
    unused = "P_H replicates per concept: none drawn (2 asked): 'lab' is a reference set, with no colorings to resample."
    assert html.escape(unused) in pooled_note and "P_H replicates" not in note
    assert (
        "Guidance scale per model: m-grey at 4, m-red at 4." in note
        and "four concepts rated by our lab" in note
    )
    # The tables name their scales too: a refused change replaces the note and keeps them.
    assert all("<p>Guidance scale per model: m-grey at 4, m-red at 4.</p>" in t for t in (table1, table2))
    assert "Different concept sets" not in table1 + table2  # both models average the same concepts
    # The units, as the CSVs' `unit` column says them (outside probe 173 found none on the page).
    assert all(
        "EMD is in ΔE*ab (CIELAB distance), ED in nats, ΔHue in degrees" in t for t in (table1, table2)
    )
    assert table1.endswith(expected.table1.to_html(label=TABLE1)) and table2.endswith(
        expected.table2.to_html(label=TABLE2)
    )
    assert table1.count("<b>") == expected.table1.marks.eq("best").sum().sum()
    sweep_traces = {(t.name, t.xaxis): t for t in figure(sweep).data}
    for model in COLORS:
        part = expected.sweep[expected.sweep["model"] == model]
        assert_allclose(sweep_traces[(model, "x")].y, part["emd"]) and assert_allclose(
            sweep_traces[(model, "x2")].y, part["pcc"]
        )
        assert_allclose(sweep_traces[(model, "x")].x, [2.0, 4.0, 6.0])
    points = {t.name: t for t in figure(scatter).data}
    for model in COLORS:
        part = expected.shifts[expected.shifts["model"] == model]
        assert_allclose(points[model].x, part["human_shift"]) and assert_allclose(
            points[model].y, part["model_shift"]
        )
        assert [row[0] for row in points[model].customdata] == part["concept"].tolist()
    bars = {t.name: t for t in figure(sensitivity).data}
    assert set(bars) == {"Visual state", "Emotional"}
    assert_allclose(bars["Emotional"].y, expected.sensitivity.query("modifier_type == 'emotional'")["ratio"])
    # Tables 6-8 speak as Tables 1-2 do ("Visual state"); their CSVs keep the keys
    assert table7["headers"] == ["Model", "Emotional", "Visual state"]
    shown = [[float(cell.split(" ")[0]) for cell in row[1:]] for row in table7["data"]]
    assert_allclose(shown, expected.table7[["emotional", "visual_state"]].round(3).to_numpy())
    # one variant per modifier type: its resamples are its own ratio, so no [v, v] interval
    assert all(cell.endswith(" (one variant: no interval)") for row in table7["data"] for cell in row[1:])
    assert intervals.startswith("95% percentile intervals from 200 bootstrap resamples of concepts")
    assert "seed 3" in intervals and "Adjacent models:" in intervals
    assert table1.count("<small>[") == np.isfinite(expected.table1.lo.to_numpy(float)).sum()
    assert table6["headers"] == ["Model", "Natural"] and table8["headers"] == [
        "Modifier type",
        "Natural",
        "Average",
    ]
    assert sorted(row[0] for row in table8["data"]) == ["Emotional", "Visual state"]
    exported = {Path(f).name.rsplit("-", 1)[0] + Path(f).suffix: f for f in files}
    assert set(exported) == {
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
    }
    long = pd.read_csv(exported["table1.csv"])
    # what the CLI's table1.csv says too: how the intervals were drawn, and each cell's concepts
    assert set(long["ci"]) == {0.95} and set(long["n_resamples"]) == {200} and set(long["seed"]) == {3}
    assert set(long["source"]) == {"lab"} and set(long["runs"]) == {"grid"} and set(long["cfg"]) == {4.0}
    assert_allclose(
        long.set_index(["model", "modifier_type", "style", "metric"])["n_concepts"].sort_index(),
        expected.table1.to_csv_frame()
        .set_index(["model", "modifier_type", "style", "metric"])["n_concepts"]
        .sort_index(),
    )
    assert set(pd.read_csv(exported["ranking.csv"])["n_resamples"]) == {200}
    assert_allclose(
        long.set_index(["model", "modifier_type", "style", "metric"])["value"].sort_index(),
        expected.table1.to_csv_frame()
        .set_index(["model", "modifier_type", "style", "metric"])["value"]
        .sort_index(),
    )
    assert "shift_scatter" in Path(exported["shift_scatter.html"]).read_text(encoding="utf-8")
    assert len(list((config.data_dir / "exports" / "research").iterdir())) == 16


def test_where_people_colored_each_variant_as_its_base_tables_6_to_8_and_figure_4_say_so(tmp_path):
    unmoved = {**HUMAN, "rotten apple": HUMAN["apple"], "lonely cabin": HUMAN["cabin"]}
    config = make_config(tmp_path)
    with running_app(config) as (client, _), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _store(config, unmoved)
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        views = {
            aggregate: client.predict(
                researcher, "lab", "recommended", aggregate, *BOOT, api_name="/leaderboard_show"
            )
            for aggregate in ("ratio_of_means", "mean_of_ratios")
        }
        files = client.predict(
            researcher, "lab", "recommended", "ratio_of_means", *BOOT, api_name="/leaderboard_export"
        )
    for _, _, _, _, sensitivity, _, table6, table7, table8, _ in views.values():
        assert [row[1:] for row in table6["data"]] == [["undefined: people's shift is 0"]] * 2
        assert [row[1:] for row in table7["data"]] == [["undefined: people's shift is 0"] * 2] * 2
        assert [row[1:] for row in table8["data"]] == [["undefined: people's shift is 0"] * 2] * 2
        notes = [a.text for a in figure(sensitivity).layout.annotations]
        assert notes == [
            "human baseline",
            "No bars: people's shift is 0 (every variant was colored as its base),"
            "<br>so model shift ÷ human shift is undefined.",
        ]
    numpy_warnings = [w for w in caught if "encountered in" in str(w.message)]
    assert numpy_warnings == []
    exported = {Path(f).name.rsplit("-", 1)[0]: f for f in files}
    table7_csv = pd.read_csv(exported["table7"])
    assert table7_csv.columns.tolist() == ["model", "emotional", "visual_state", "sensitivity_ratio"]
    assert table7_csv[["emotional", "visual_state"]].isna().all().all()
    assert pd.read_csv(exported["table8_ci"])["human_shift"].tolist() == [0.0] * 4


def _page(demo, name: str):
    """The page function `name` of the Leaderboards tab (the first of its registrations)."""
    return next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == f"page_{name}")


def _named(step: dict) -> dict:
    """A page step's ``{component: update}`` by the part's name (its elem_id without the
    tab's prefix; ``pending``: the step's gr.State)."""
    return {
        "pending" if isinstance(part, gr.State) else part.elem_id.removeprefix("leaderboard_"): update
        for part, update in step.items()
    }


def test_the_page_shows_point_estimates_at_once_then_the_intervals_and_then_keeps_the_whole_view(
    tmp_path,
):
    config = make_config(tmp_path)
    with running_app(config) as (client, demo):
        expected = _store(config)
        db = open_db(config.db_path)
        try:
            plain = analyses(runs.model_distributions(db), HUMAN, load_concepts(), resampling=None)
        finally:
            db.close()
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        asked = (researcher, "lab", "recommended", "ratio_of_means", *BOOT)
        first, complete = _page(demo, "first_look"), _page(demo, "complete")
        shown = _named(first(*asked))
        # Nothing kept yet: the point estimates, the intervals announced, Tables 6-8 as numbers.
        assert shown["pending"] is True and shown["table1"].endswith(plain.table1.to_html(label=TABLE1))
        assert shown["intervals"].startswith(
            "Being drawn: 95% percentile intervals from 200 bootstrap resamples"
        )
        assert (
            shown["table6"].set_index("Model").to_dict()
            == plain.table6.round(3).rename(columns={"natural": "Natural"}).to_dict()
        )
        whole = _named(complete(*asked, True))
        assert whole["pending"] is False and whole["table1"].endswith(expected.table1.to_html(label=TABLE1))
        assert "200 bootstrap resamples" in whole["intervals"] and not whole["intervals"].startswith(
            "Being drawn"
        )
        assert all("[" in cell for cell in whole["table6"]["Natural"])
        # The next look is the whole view, kept: nothing left for the second step, which
        # leaves the view as it is.
        again = _named(first(*asked))
        assert again["pending"] is False and again["table1"] == whole["table1"]
        assert again["intervals"] == whole["intervals"]
        assert _named(complete(*asked, False)) == {"pending": False}
        # API clients get the whole view in one call.
        assert client.predict(*asked, api_name="/leaderboard_show")[1] == whole["table1"]


def test_the_leaderboard_the_app_warms_is_the_one_the_tab_opens_on(tmp_path):
    """`annotation.research.views.warm_first_leaderboard`, run by the app's refresher once the
    data is quiet, keeps the view the tab's own default settings ask for: its first open
    after a start is then served whole from memory (it was computed cold: 2.6 s at the full
    study's size)."""
    config = make_config(tmp_path)
    with running_app(config) as (client, demo):
        _store(config)
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        db = open_db(config.db_path)
        try:
            assert views.warm_first_leaderboard(db, load_concepts(), demo.colorconcept_ctx.leaderboards)
        finally:
            db.close()
        defaults = [
            next(
                b.value for b in demo.blocks.values() if getattr(b, "elem_id", None) == f"leaderboard_{name}"
            )
            for name in ("source", "cfg", "aggregate", "resamples", "seed", "colorings")
        ]
        shown = _named(_page(demo, "first_look_on_open")(researcher, *defaults))
        assert shown["pending"] is False and "[" in shown["table1"]
        assert not shown["intervals"].startswith("Being drawn")


def test_while_intervals_are_drawn_the_page_says_what_p_h_replicates_cost(tmp_path):
    """20 replicates took 85 s at the full study's size under "in a moment" (outside probe
    212): the line counts the EMD solves they take, here 5 x the 8 distributions at scale 4."""
    config = make_config(tmp_path)
    db = open_db(config.db_path)
    ensure_schema(db)
    db.close()
    _store(config)
    db = open_db(config.db_path)
    try:
        plain = analyses(runs.model_distributions(db), HUMAN, load_concepts(), resampling=None)
    finally:
        db.close()
    replicates = Resampling(n_resamples=200, seed=3, colorings=5)
    assert _drawing(plain, replicates, human_rows.DESIGNERS).endswith(
        "The tables gain their intervals when they are. Its 5 P_H replicates per concept rescore "
        "Tables 1–2 against each: 40 EMD solves for 8 model distributions."
    )
    assert _drawing(plain, Resampling(n_resamples=200, seed=3), human_rows.DESIGNERS).endswith(
        "when they are."
    )
    assert "EMD solves" not in _drawing(plain, replicates, "lab")  # a reference set has no colorings


def test_a_scale_no_model_has_is_a_clear_error(tmp_path):
    from gradio_client.exceptions import AppError

    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        _store(config)
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        with pytest.raises(
            AppError,
            match=r"`cfg` 3 is not a stored guidance scale of every model; stored scales: \{'m-grey': \[2.0, 4.0, 6.0\]",
        ):
            client.predict(researcher, "lab", "3", "ratio_of_means", *BOOT, api_name="/leaderboard_show")
        # A hair off a stored scale is that scale (it failed with a pandas merge message: outside probe 199)
        hair, exact = (
            client.predict(researcher, "lab", cfg, "ratio_of_means", *BOOT, api_name="/leaderboard_show")
            for cfg in ("4.0000001", "4")
        )
        assert hair[1] == exact[1] and "m-grey" in hair[1]
        with pytest.raises(AppError, match=r"must be one of .*, got 'median'; nothing was changed"):
            client.predict(researcher, "lab", "4", "median", *BOOT, api_name="/leaderboard_show")
        for cfg in ("abc", "-1", "nan"):
            with pytest.raises(
                AppError,
                match=rf"^`Guidance scale` must be 'recommended', 'mean' \(each concept averaged over its "
                rf"scales\) or a number of 0 or more, got '{cfg}'$",
            ):
                client.predict(researcher, "lab", cfg, "ratio_of_means", *BOOT, api_name="/leaderboard_show")
        with pytest.raises(AppError, match=r"`Bootstrap resamples` must be a whole number, got '1.5'"):
            client.predict(
                researcher, "lab", "4", "ratio_of_means", "1.5", "0", "0", api_name="/leaderboard_show"
            )
        # The tab's own labels, not the library's parameter names.
        for boot, message in (
            (("3", "0", "0"), r"`Bootstrap resamples` must be a whole number from 10 to 20,000, got 3$"),
            (("0", "0", "0"), r"`Bootstrap resamples` must be a whole number from 10 to 20,000, got 0$"),
            (
                ("200", "0", "201"),
                r"`P_H replicates per concept` must be a whole number from 0 to 200, got 201$",
            ),
        ):
            with pytest.raises(AppError, match=message):
                client.predict(researcher, "lab", "4", "ratio_of_means", *boot, api_name="/leaderboard_show")


def test_leaderboard_endpoints_refuse_other_roles_and_write_nothing(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        _store(config)
        tokens = sign_in(client, ADMIN_PASSWORD, "designer", "expert", "participant")
        args = ["lab", "recommended", "ratio_of_means", *BOOT]
        calls = {
            "/leaderboard_show": args,
            "/leaderboard_export": args,
            "/leaderboard_robustness": ["lab", "", "0"],
            "/leaderboard_stability": [],
        }
        others = {who: tokens[who] for who in ("designer", "expert", "participant")}
        assert_every_endpoint_refuses(
            client, config, "/leaderboard_", calls, {**others, "nobody": "", "forged": "f" * 43}
        )


def test_the_robustness_panel_reports_the_models_a_choice_swaps(tmp_path):
    from evaluation.color.colorspace import srgb_to_lab
    from evaluation.color.palette import nearest_uw71

    red, orange, black, brown = (200, 30, 30), (225, 120, 40), (3, 3, 3), (110, 70, 30)
    bins = {c: int(nearest_uw71(srgb_to_lab(np.array(c, dtype=np.uint8)))) for c in (red, brown)}
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        db = open_db(config.db_path)
        try:
            truth = {
                "apple": one_hot(bins[red], 0.9, bins[brown]),
                "rotten apple": one_hot(bins[brown], 0.9, bins[red]),
            }
            human_rows.store_reference(db, "lab", truth, "two concepts")
            cells = {
                ("m-dark", "apple", "natural", 5.0): [black, black, red],
                ("m-orange", "apple", "natural", 5.0): [orange, red, red],
                ("m-dark", "rotten apple", "natural", 5.0): [brown],
                ("m-orange", "rotten apple", "natural", 5.0): [brown],
            }
            store_segmented_run(db, config.data_dir, "grid", cells)
        finally:
            db.close()
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        note, table = client.predict(researcher, "lab", "", "0", api_name="/leaderboard_robustness")
        sampled, _ = client.predict(researcher, "lab", "1", "3", api_name="/leaderboard_robustness")
        from gradio_client.exceptions import AppError

        with pytest.raises(AppError, match="`Base concepts to sample` must be a whole number, got 'some'"):
            client.predict(researcher, "lab", "some", "0", api_name="/leaderboard_robustness")
    assert (
        "pixel_filter none → gencolor: **PCC: m-orange ↔ m-dark (τ = -1.00); EMD: m-orange ↔ m-dark" in note
    )
    rows = pd.DataFrame(table["data"], columns=table["headers"])
    # The metrics by the names the tables above give them (hue_diff and pcc read as code).
    assert {"PCC", "EMD", "ΔHue"} <= set(rows["metric"]) and "hue_diff" not in set(rows["metric"])
    swap = rows[(rows["choice"] == "pixel_filter") & (rows["metric"] == "EMD")].iloc[0]
    assert swap["swapped"] == "m-orange ↔ m-dark" and swap["kendall_tau"] == -1.0
    assert "2 concepts (seeded sample)" in sampled


def test_after_a_first_evaluation_the_research_views_use_the_reference_set_that_covers_it(tmp_path):
    """README step 5: a model on apple and banana, no designer coloring yet; the views open on
    the designers' source and show the shipped uw71-ratings instead, saying so."""
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        db = open_db(config.db_path)
        try:
            cells = {
                ("m-red", c, "natural", 7.5): [(200, 30, 30), (190, 40, 30)] for c in ("apple", "banana")
            }
            store_segmented_run(db, config.data_dir, "first", cells)
        finally:
            db.close()
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        note, table1, *_ = client.predict(
            researcher, "designers", "recommended", "ratio_of_means", *BOOT, api_name="/leaderboard_show"
        )
        label, bars, _, metrics, *_ = client.predict(
            researcher, "apple", "designers", "natural", "recommended", api_name="/browser_show"
        )
    fallback = (
        "No designer coloring of &#x27;apple&#x27;, &#x27;banana&#x27; counts yet, so the reference set "
        "&#x27;uw71-ratings&#x27; is the human ground truth here instead (it has both)."
    )
    assert note.startswith(fallback) and "Reference set &#x27;uw71-ratings&#x27;, imported" in note
    assert "m-red" in table1
    assert label.startswith(
        "## apple\n\nNo designer coloring of &#x27;apple&#x27; counts yet, so the reference set"
    )
    assert "Human ground truth: reference set &#x27;uw71-ratings&#x27;" in label
    assert [row[0] for row in metrics["data"]] == ["m-red"]
    assert len(figure(bars).data) == 2  # people's distribution, then the model's
