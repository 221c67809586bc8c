import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from evaluation.analysis.comparison import (
    CHART_TICKS_PX,
    CHART_TITLE_CHARS,
    HUMAN,
    HUMAN_COLOR,
    NO_SAMPLES_NOTE,
    STRIP_ROW_PX,
    STRIP_TITLE_CHARS,
    TITLE_LINE_PX,
    concept_metrics,
    distributions_figure,
    human_panel,
    model_panels,
    rows_at_cfg,
    strip_of,
    strips_figure,
    variant_shift_figure,
    variant_shift_table,
    variant_shifts,
)
from evaluation.analysis.figures import line_count, wrapped
from evaluation.color import metrics
from evaluation.color.extraction import concept_distribution
from evaluation.color.naming import names_of_uw71
from evaluation.color.palette import load_uw71
from evaluation.concepts import load_concepts
from tests.research_data import centre_mask, one_hot, solid

CONCEPTS = load_concepts()


def _row(model, concept, cfg, p, *, style="natural", created="2025-01-01", groups=None):
    return {
        "run": "r",
        "model": model,
        "concept": concept,
        "style": style,
        "cfg": cfg,
        "p": p,
        "n_images": 2,
        "n_excluded": 1,
        "groups": groups,
        "created_at": created,
    }


def test_distribution_panels_share_one_axis_and_draw_each_distribution_in_palette_colors():
    human = human_panel("reference set 'x'", one_hot(3, 0.6, 9))
    models = model_panels(
        [_row("b", "apple", 5.0, one_hot(40)), _row("a", "apple", 2.0, one_hot(12, 0.2, 13))]
    )
    assert human.title == "Human: reference set 'x'"
    assert [p.title for p in models] == [
        "a · natural · cfg 2 (2 images, 1 excluded)",
        "b · natural · cfg 5 (2 images, 1 excluded)",
    ]
    fig = distributions_figure([human, *models])
    assert len(fig.data) == 3
    for trace, panel in zip(fig.data, [human, *models]):
        assert_allclose(trace.y, panel.p)
        assert list(trace.marker.color) == list(load_uw71().hex)
    ranges = [fig.layout[name].range for name in fig.layout if name.startswith("yaxis")]
    assert len(ranges) == 4
    for low_high in ranges:
        assert_allclose(low_high, (0, 1.05))
    x_titles = {name: fig.layout[name].title.text for name in fig.layout if name.startswith("xaxis")}
    assert x_titles == {
        "xaxis": None,
        "xaxis2": "UW-71 color index",
        "xaxis3": "UW-71 color index",
        "xaxis4": None,
    }
    assert [fig.layout[f"yaxis{i}"].title.text for i in ("", 2, 3, 4)] == [
        "probability",
        None,
        "probability",
        None,
    ]
    with pytest.raises(ValueError, match="`panels` is empty"):
        distributions_figure([])


def test_strips_come_from_extraction_groups_stored_or_live_with_their_counts():
    images = [solid(c) for c in ((200, 30, 30), (200, 30, 30), (30, 140, 50))]
    groups = concept_distribution(images, [centre_mask()] * 3).groups
    live = strip_of(groups)
    stored = strip_of([{"rgb": g.rgb.tolist(), "image_indices": list(g.image_indices)} for g in groups])
    assert live[1] == stored[1] == (2, 1)
    assert_allclose(live[0], stored[0]) and live[0].dtype == np.uint8
    assert strip_of(None) == (None, None)
    fig = strips_figure(
        [
            human_panel("reference", one_hot(1)),
            model_panels([_row("m", "apple", 1.0, one_hot(1), groups=groups)])[0],
        ]
    )
    assert list(fig.data[1].text) == ["2", "1"] and len(fig.data[0].x) == 0
    assert fig.layout.annotations[-1].text.replace("<br>", " ") == NO_SAMPLES_NOTE


@pytest.mark.parametrize("missing", [0, 1, 2])
def test_strip_note_sits_on_its_own_panels_axes(missing):
    groups = concept_distribution([solid((200, 30, 30)), solid((30, 140, 50))], [centre_mask()] * 2).groups
    panels = [human_panel("reference", one_hot(1))] + model_panels(
        [_row(m, "apple", 1.0, one_hot(1), groups=groups) for m in ("a", "b")]
    )
    panels.insert(missing, panels.pop(0))
    fig = strips_figure(panels)
    [note] = [a for a in fig.layout.annotations if a.text.replace("<br>", " ") == NO_SAMPLES_NOTE]
    subplot = fig.get_subplot(missing + 1, 1)
    own_x, own_y = (
        subplot.xaxis.plotly_name.replace("axis", ""),
        subplot.yaxis.plotly_name.replace("axis", ""),
    )
    assert (note.xref, note.yref) == (f"{own_x} domain", f"{own_y} domain")
    # plotly.js only creates axes that carry a trace: without one the note lands on another row.
    assert [(t.xaxis, t.yaxis) for t in fig.data].count((own_x, own_y)) == 1
    assert len({(t.xaxis, t.yaxis) for t in fig.data}) == 3
    titles = [
        a for a in fig.layout.annotations if a.text == wrapped(panels[missing].title, STRIP_TITLE_CHARS)
    ]
    assert titles[0].y == pytest.approx(subplot.yaxis.domain[1])
    assert fig.layout.height >= 3 * STRIP_ROW_PX


def test_rows_at_cfg_keep_the_newest_row_at_each_models_chosen_scale():
    rows = [_row("a", "apple", s, one_hot(i)) for i, s in enumerate((2.0, 5.0, 7.5))]
    rows += [_row("a", "apple", 5.0, one_hot(9), created="2026-01-01"), _row("a", "apple", 9.0, None)]
    chosen = rows_at_cfg(rows, "recommended")
    assert [(r["cfg"], r["p"].argmax()) for r in chosen] == [(5.0, 9)]
    assert [r["cfg"] for r in rows_at_cfg(rows, 7.5)] == [7.5]
    assert rows_at_cfg([], "recommended") == []
    # The store's scales set the recommended one, as on the Leaderboards: a concept stored at
    # 2 and 7.5 of a model stored at 2, 3.5, 5 and 7.5 shows none (it showed 2: outside probe 124).
    scales = pd.DataFrame({"model": ["a", "a", "a", "a", "b"], "cfg": [2.0, 3.5, 5.0, 7.5, 1.0]})
    two = [_row("a", "apple", 2.0, one_hot(1)), _row("a", "apple", 7.5, one_hot(2))]
    assert [r["cfg"] for r in rows_at_cfg(two, "recommended")] == [2.0]
    assert rows_at_cfg(two, "recommended", scales=scales) == []
    assert [
        r["cfg"]
        for r in rows_at_cfg([*two, _row("a", "apple", 3.5, one_hot(3))], "recommended", scales=scales)
    ] == [3.5]
    assert [r["cfg"] for r in rows_at_cfg(two, 7.5, scales=scales)] == [7.5]  # a number is taken as given


@pytest.mark.parametrize("cfg", ["lots", "", None, True, float("nan"), "inf", -1.0])
def test_rows_at_cfg_rejects_a_bad_scale_even_without_rows(cfg):
    with pytest.raises(ValueError, match=r"`cfg` must be 'recommended' or a guidance scale, got "):
        rows_at_cfg([], cfg)
    with pytest.raises(ValueError, match=r"`cfg` must be 'recommended' or a guidance scale, got "):
        rows_at_cfg([_row("a", "apple", 2.0, one_hot(3))], cfg)


def test_concept_metrics_are_the_metrics_of_each_model_against_the_human_distribution():
    human = one_hot(3, 0.6, 9)
    rows = [
        _row("a", "apple", 2.0, one_hot(3)),
        _row("b", "apple", 2.0, one_hot(40, 0.5, 41)),
        _row("c", "banana", 2.0, one_hot(3)),
    ]
    table = concept_metrics("apple", human, rows, CONCEPTS)
    assert table["model"].tolist() == ["a", "b"]
    assert_allclose(table["pcc"], [metrics.pcc(human, r["p"]) for r in rows[:2]])
    assert_allclose(table["emd"], [metrics.emd(human, r["p"]) for r in rows[:2]])
    assert table["dca"].tolist() == [1.0, 0.0]
    names = names_of_uw71()
    assert table["dominant_model"].tolist() == [3, 40] and table["dominant_human"].tolist() == [3, 3]
    assert table["dominant_model_name"].tolist() == names["iscc_nbs_l3"][[3, 40]].tolist()
    assert table["dominant_human_basic"].tolist() == [names["basic_term"][3]] * 2


def test_variant_shifts_compare_the_base_with_each_variant_for_people_and_models():
    human = {"apple": one_hot(0), "rotten apple": one_hot(60), "unripe apple": one_hot(5)}
    rows = [
        _row("m", "apple", 5.0, one_hot(0)),
        _row("m", "rotten apple", 5.0, one_hot(2)),
        _row("m", "banana", 5.0, one_hot(50)),
    ]
    shifts = variant_shifts("apple", CONCEPTS, human, rows)
    got = {(r.concept, r.source): r.shift for r in shifts.itertuples()}
    assert got == {
        ("rotten apple", HUMAN): pytest.approx(metrics.shift(one_hot(0), one_hot(60))),
        ("unripe apple", HUMAN): pytest.approx(metrics.shift(one_hot(0), one_hot(5))),
        ("rotten apple", "m · natural"): pytest.approx(metrics.shift(one_hot(0), one_hot(2))),
    }
    table = variant_shift_table(shifts)
    assert list(table.columns) == ["concept", "modifier_type", HUMAN, "m · natural"]
    assert np.isnan(table.set_index("concept").loc["unripe apple", "m · natural"])
    fig = variant_shift_figure(shifts)
    assert [t.name for t in fig.data] == [HUMAN, "m · natural"]
    assert fig.data[0].marker.color == HUMAN_COLOR and fig.layout.showlegend
    assert fig.layout.xaxis.title.text == "variant"
    assert_allclose(fig.data[1].y, [got[("rotten apple", "m · natural")]])
    with pytest.raises(ValueError, match="`base` must be a base concept key"):
        variant_shifts("rotten apple", CONCEPTS, human, rows)
    assert variant_shift_table(variant_shifts("apple", CONCEPTS, {}, [])).empty


@pytest.mark.parametrize("n_models", [1, 2, 3, 5])
def test_distribution_panel_titles_have_room_above_their_row(n_models):
    """Titles are wrapped to fit a phone's column, and each row leaves room for its tallest
    one: on a 390-px phone, one-line titles side by side had run into each other."""
    rows = [
        _row(m, "apple", 7.5, one_hot(i))
        for i, m in enumerate(
            ["stabilityai/stable-diffusion-xl-base-1.0", "black-forest-labs/FLUX.1-schnell", "a", "b", "c"][
                :n_models
            ]
        )
    ]
    panels = [human_panel("designer colorings (n = 5)", one_hot(1))] + model_panels(rows)
    fig = distributions_figure(panels)
    titles = [
        a for a in fig.layout.annotations if a.text in {wrapped(p.title, CHART_TITLE_CHARS) for p in panels}
    ]
    assert len(titles) == len(panels) and max(line_count(t.text) for t in titles) >= 3
    for title in titles:
        assert all(len(line) <= CHART_TITLE_CHARS for line in title.text.split("<br>"))
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    for i, title in enumerate(titles):
        above = 1 - fig.get_subplot(i // 2 + 1, i % 2 + 1).yaxis.domain[1]
        if i >= 2:  # the row above ends its tick labels this far above this row's axes
            above = fig.get_subplot(i // 2, i % 2 + 1).yaxis.domain[0] - (1 - above)
            room = above * plot_px - CHART_TICKS_PX
        else:
            room = above * plot_px + fig.layout.margin.t
        assert room + 1e-6 >= line_count(title.text) * TITLE_LINE_PX, (i, title.text)
