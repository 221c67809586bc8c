"""The Concept browser through gradio_client on a launched app, on runs with known colors."""

import pytest
from numpy.testing import assert_allclose

from evaluation.color import metrics
from evaluation.pipeline import runs
from storage import human as human_rows
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import assert_every_endpoint_refuses, figure, one_hot, sign_in, store_segmented_run

HUMAN = {"apple": one_hot(0, 0.5, 40), "rotten apple": one_hot(60, 0.7, 30)}
RED, GREEN, BROWN = (200, 30, 30), (40, 150, 50), (110, 70, 30)


def _store(config):
    db = open_db(config.db_path)
    try:
        human_rows.store_reference(db, "lab", HUMAN, "two concepts rated by our lab")
        cells = {}
        for model, colors in (("m-red", [RED, RED, GREEN]), ("m-green", [GREEN])):
            for cfg in (3.0, 6.0):
                cells[(model, "apple", "natural", cfg)] = colors
                cells[(model, "rotten apple", "natural", cfg)] = [BROWN] + colors[1:]
        store_segmented_run(db, config.data_dir, "known", cells)
        return {(r["model"], r["concept"], r["cfg"]): r["p"] for r in runs.model_distributions(db)}
    finally:
        db.close()


def test_the_browser_shows_people_and_each_model_side_by_side_with_their_metrics(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        stored = _store(config)
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        label, bars, strips, table, gallery, title, shifts, shift_plot = client.predict(
            researcher, "apple", "lab", "natural", "6", api_name="/browser_show"
        )
    assert label.startswith("## apple\n\nHuman ground truth: reference set &#x27;lab&#x27;")
    assert "two concepts rated by our lab" in label
    bars = figure(bars)
    assert [t.y.tolist() for t in bars.data] == [
        HUMAN["apple"].tolist(),
        stored[("m-green", "apple", 6.0)].tolist(),
        stored[("m-red", "apple", 6.0)].tolist(),
    ]
    top = 1.05 * max(
        HUMAN["apple"].max(), stored[("m-green", "apple", 6.0)].max(), stored[("m-red", "apple", 6.0)].max()
    )
    for name in (name for name in bars.layout if name.startswith("yaxis")):
        assert_allclose(bars.layout[name].range, (0, top))
    strips = figure(strips)
    # The human row (reference ratings, no samples) holds only an empty trace that anchors its note.
    assert [len(t.x) for t in strips.data] == [0, 1, 2]
    assert [list(t.text) for t in strips.data[1:]] == [["1"], ["2", "1"]]
    assert strips.layout.annotations[-1].text.replace("<br>", " ") == (  # wrapped to fit a phone
        "no per-sample colors stored (a set of ratings, or a distribution stored without its groups)"
    )
    rows = {row[0]: dict(zip(table["headers"], row)) for row in table["data"]}
    for model in ("m-red", "m-green"):
        p = stored[(model, "apple", 6.0)]
        assert rows[model]["cfg"] == 6.0 and rows[model]["n_images"] == (3 if model == "m-red" else 1)
        assert rows[model]["pcc"] == pytest.approx(metrics.pcc(HUMAN["apple"], p), abs=1e-4)
        assert rows[model]["emd"] == pytest.approx(metrics.emd(HUMAN["apple"], p), abs=1e-4)
    assert [item["caption"] for item in gallery] == ["m-green · natural · cfg 6 · seed 1000"] + [
        f"m-red · natural · cfg 6 · seed {s}" for s in (1000, 1001, 1002)
    ]
    assert title == "### Base concept **apple** and its variants"
    wide = {row[0]: dict(zip(shifts["headers"], row)) for row in shifts["data"]}
    assert wide["rotten apple"]["human"] == pytest.approx(
        metrics.shift(HUMAN["apple"], HUMAN["rotten apple"]), abs=1e-3
    )
    model_shift = metrics.shift(stored[("m-red", "apple", 6.0)], stored[("m-red", "rotten apple", 6.0)])
    assert wide["rotten apple"]["m-red · natural"] == pytest.approx(model_shift, abs=1e-3)
    by_source = {t.name: t for t in figure(shift_plot).data}
    assert_allclose(by_source["m-red · natural"].y, [model_shift])
    assert list(wide) == ["rotten apple"]


def test_browser_endpoints_refuse_other_roles_and_write_nothing(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        tokens = sign_in(client, ADMIN_PASSWORD, "designer", "expert", "participant")
        calls = {"/browser_show": ["apple", "uw71-ratings", "natural", "recommended"]}
        others = {who: tokens[who] for who in ("designer", "expert", "participant")}
        assert_every_endpoint_refuses(
            client, config, "/browser_", calls, {**others, "nobody": "", "forged": "f" * 43}
        )


def test_an_unknown_source_is_a_clear_error_and_the_admin_may_browse(tmp_path):
    from gradio_client.exceptions import AppError

    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        with pytest.raises(AppError, match="`source` must be one of .*, got 'mturk'"):
            client.predict(researcher, "apple", "mturk", "natural", "recommended", api_name="/browser_show")
        admin = sign_in(client, ADMIN_PASSWORD)["admin"]
        label, bars, *_ = client.predict(
            admin, "apple", "uw71-ratings", "natural", "recommended", api_name="/browser_show"
        )
        assert "\n\nHuman ground truth: reference set &#x27;uw71-ratings&#x27;" in label
        assert len(figure(bars).data) == 1
