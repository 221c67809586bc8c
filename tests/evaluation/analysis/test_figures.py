import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from numpy.testing import assert_allclose

from evaluation.analysis.figures import (
    NOTE_CHARS,
    STRIP_MIN_FONT,
    STRIP_SWATCH_PX,
    WEBGL_POINTS,
    cfg_sweep_figure,
    consistency_histogram,
    distribution_bar,
    dominant_strip,
    group_strip,
    noted,
    sensitivity_bars,
    shift_scatter,
    table3_figure,
    wrapped,
)
from evaluation.color.extraction import concept_distribution
from evaluation.color.palette import load_uw71


def test_distribution_bar_heights_are_p_and_colors_are_the_palette():
    p = np.random.default_rng(0).dirichlet(np.ones(71))
    fig = distribution_bar(p, y_max=0.5, title="apple")
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    bar = fig.data[0]
    assert_allclose(bar.y, p)
    assert list(bar.x) == list(range(71))
    assert list(bar.marker.color) == list(load_uw71().hex)
    assert tuple(fig.layout.yaxis.range) == (0, 0.5)
    lab = load_uw71().lab
    assert bar.customdata[24][0] == load_uw71().hex[24]
    assert_allclose(np.asarray(bar.customdata[10][1:4], float), np.round(lab[10], 1))
    assert "L*a*b*" in bar.hovertemplate


def test_distribution_bar_rejects_wrong_length():
    with pytest.raises(ValueError, match=r"`p` must have shape \(71,\)"):
        distribution_bar(np.ones(70) / 70)


def test_dominant_strip_shows_each_group_color_and_count():
    fig = dominant_strip(np.array([[200, 30, 30], [20, 120, 40]], dtype=np.uint8), [3, 2])
    bar = fig.data[0]
    assert list(bar.marker.color) == ["#c81e1e", "#147828"]
    assert list(bar.text) == ["3", "2"]
    assert list(dominant_strip(["#AABBCC"], [5]).data[0].marker.color) == ["#aabbcc"]
    with pytest.raises(ValueError, match="equal lengths"):
        dominant_strip(["#aabbcc"], [1, 2])


@pytest.mark.parametrize("n, title", [(1, ""), (7, "apple"), (20, "")])
def test_dominant_strip_leaves_tall_swatches_and_readable_counts_for_1_to_20_colors(n, title):
    colors = np.random.default_rng(n).integers(0, 256, (n, 3)).astype(np.uint8)
    fig = dominant_strip(colors, range(100, 100 + n), title=title, unit="colorings")
    margin = fig.layout.margin
    assert fig.layout.height - margin.t - margin.b == STRIP_SWATCH_PX >= 100
    assert fig.data[0].textfont.size >= STRIP_MIN_FONT >= 12
    assert fig.layout.uniformtext.minsize == STRIP_MIN_FONT and fig.layout.uniformtext.mode == "show"
    assert fig.data[0].textangle == 0
    assert "colorings" in fig.layout.xaxis.title.text and "colorings" in fig.data[0].hovertemplate
    # An empty title must leave no `title` key: gr.Plot gives any titled figure a 100 px top margin.
    assert ("title" in json.loads(fig.to_json())["layout"]) == bool(title)


def test_group_strip_shows_each_extraction_group_with_its_image_count():
    red, green = (200, 30, 30), (30, 140, 50)
    images = [np.full((20, 20, 3), c, dtype=np.uint8) for c in (red, red, green)]
    masks = [np.ones((20, 20), bool)] * 3
    groups = concept_distribution(images, masks).groups
    fig = group_strip(groups)
    assert list(fig.data[0].text) == ["2", "1"]
    assert list(fig.data[0].marker.color) == ["#{:02x}{:02x}{:02x}".format(*g.rgb[0]) for g in groups]
    with pytest.raises(ValueError, match="`groups` is empty"):
        group_strip(())


def test_a_sweep_line_over_different_concept_sets_says_so_in_its_title_and_hover_text():
    """sana's points average 4 concepts at cfg 2 and 6 at 7.5: one line read as the effect of
    the scale alone; sdxl's equal counts need no word."""
    sweep = pd.DataFrame(
        {
            "model": ["sana"] * 2 + ["sdxl"] * 2,
            "style": "clipart",
            "cfg": [2.0, 7.5] * 2,
            "emd": [30.0, 31.0, 28.0, 28.5],
            "pcc": [0.7, 0.68, 0.72, 0.71],
            "n_concepts": [4, 6, 6, 6],
        }
    )
    fig = cfg_sweep_figure(sweep)
    assert fig.layout.title.text == "Points average different concept sets: sana (n = 4 at 2, 6 at 7.5)"
    hover = {(t.name, t.xaxis): (list(t.customdata), t.hovertemplate) for t in fig.data}
    assert hover["sana", "x"] == (
        [4, 6],
        "sana<br>cfg %{x}<br>EMD %{y:.3f}<br>%{customdata} concepts<extra></extra>",
    )
    assert hover["sdxl", "x2"] == (
        [6, 6],
        "sdxl<br>cfg %{x}<br>PCC %{y:.3f}<br>%{customdata} concepts<extra></extra>",
    )
    two = cfg_sweep_figure(sweep.assign(n_concepts=[4, 6, 6, 5]))
    assert two.layout.title.text == (
        "Points average different concept sets:<br>sana (n = 4 at 2, 6 at 7.5)<br>sdxl (n = 6 at 2, 5 at 7.5)"
    )
    even = cfg_sweep_figure(sweep.assign(n_concepts=6))
    assert even.layout.title.text is None and even.layout.margin.t == 50


def test_cfg_sweep_figure_has_one_line_per_model_per_metric():
    sweep = pd.DataFrame(
        {
            "model": ["sana"] * 3 + ["sdxl"] * 3,
            "style": "clipart",
            "cfg": [3.0, 5.0, 7.0] * 2,
            "emd": [30.0, 31.0, 32.0, 28.0, 28.5, 28.2],
            "pcc": [0.7, 0.68, 0.65, 0.72, 0.71, 0.72],
        }
    )
    fig = cfg_sweep_figure(sweep)
    assert len(fig.data) == 4
    emd_sana = [t for t in fig.data if t.name == "sana" and t.xaxis == "x"][0]
    assert_allclose(emd_sana.x, [3.0, 5.0, 7.0])
    assert_allclose(emd_sana.y, [30.0, 31.0, 32.0])
    pcc_sdxl = [t for t in fig.data if t.name == "sdxl" and t.xaxis == "x2"][0]
    assert_allclose(pcc_sdxl.y, [0.72, 0.71, 0.72])
    # Each model keeps its color in both panels: the legend is drawn from the first alone.
    colors = {(t.name, t.xaxis): (t.line.color, t.marker.color) for t in fig.data}
    for model in ("sana", "sdxl"):
        assert colors[model, "x"] == colors[model, "x2"] and colors[model, "x"][0] == colors[model, "x"][1]
    assert colors["sana", "x"] != colors["sdxl", "x"]
    assert [fig.layout[a].title.text for a in ("xaxis", "xaxis2", "yaxis", "yaxis2")] == [
        "CFG scale",
        "CFG scale",
        "mean EMD (ΔE*ab)",  # the unit, as the CSVs' (outside probe 173)
        "mean PCC",
    ]
    # One panel above the other, each as wide as the figure, the legend under them: side by
    # side on a phone, the PCC panel's axis title ran into the EMD panel (outside probe 144).
    assert list(fig.layout.xaxis.domain) == list(fig.layout.xaxis2.domain) == [0.0, 1.0]
    assert fig.layout.yaxis2.domain[1] < fig.layout.yaxis.domain[0]
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0


def test_sensitivity_bars_plot_ratios_per_modifier_type():
    sens = pd.DataFrame(
        {
            "model": ["a", "b", "a", "b"],
            "modifier_type": ["emotional", "emotional", "visual_state", "visual_state"],
            "human_shift": [2.0, 2.0, 10.0, 10.0],
            "model_shift": [1.0, 1.5, 8.0, 9.0],
            "ratio": [0.5, 0.75, 0.8, 0.9],
        }
    )
    fig = sensitivity_bars(sens)
    assert [t.name for t in fig.data] == ["Emotional", "Visual state"]
    assert_allclose(fig.data[1].y, [0.8, 0.9])
    assert list(fig.data[1].x) == ["a", "b"]
    assert fig.layout.shapes[0].y0 == 1.0


def test_sensitivity_bars_say_when_no_bar_is_left_because_people_did_not_shift():
    sens = pd.DataFrame(
        {
            "model": ["a", "a"],
            "modifier_type": ["emotional", "visual_state"],
            "human_shift": [0.0, 0.0],
            "model_shift": [1.0, 3.0],
            "ratio": [np.nan, np.nan],
        }
    )
    fig = sensitivity_bars(sens)
    notes = [a.text for a in fig.layout.annotations if a.text != "human baseline"]
    assert notes == [
        "No bars: people's shift is 0 (every variant was colored as its base),"
        "<br>so model shift ÷ human shift is undefined."
    ]


def test_sensitivity_bars_name_the_missing_bars_where_people_did_not_shift():
    sens = pd.DataFrame(
        {
            "model": ["a", "b", "a", "b"],
            "modifier_type": ["emotional", "emotional", "visual_state", "visual_state"],
            "human_shift": [2.0, 2.0, 0.0, 0.0],
            "model_shift": [1.0, 1.5, 8.0, 9.0],
            "ratio": [0.5, 0.75, np.nan, np.nan],
        }
    )
    fig = sensitivity_bars(sens)
    notes = [a.text for a in fig.layout.annotations if a.text != "human baseline"]
    assert notes == ["No bar where people's shift is 0 (ratio undefined): Visual state (a, b)"]
    assert_allclose(fig.data[0].y, [0.5, 0.75])


def test_shift_scatter_points_are_the_shifts_with_concepts_in_hover():
    shifts = pd.DataFrame(
        {
            "model": ["sana", "sana", "sdxl"],
            "style": "clipart",
            "base": ["apple", "cabin", "apple"],
            "concept": ["rotten apple", "lonely cabin", "rotten apple"],
            "modifier_type": ["visual_state", "emotional", "visual_state"],
            "human_shift": [10.0, 4.0, 10.0],
            "model_shift": [7.0, 1.0, 3.0],
        }
    )
    fig = shift_scatter(shifts)
    sana = [t for t in fig.data if t.name == "sana"][0]
    assert_allclose(sana.x, [10.0, 4.0])
    assert_allclose(sana.y, [7.0, 1.0])
    assert [row[0] for row in sana.customdata] == ["rotten apple", "lonely cabin"]
    assert "customdata[0]" in sana.hovertemplate


def test_a_shift_scatter_of_many_points_is_drawn_with_webgl_and_the_same_points():
    """From `WEBGL_POINTS` points (Figure 4, right, has 6,384 at the full study's size) the
    markers are one WebGL canvas per trace, not one SVG element per point; below, SVG."""
    rng = np.random.default_rng(0)
    n = WEBGL_POINTS
    shifts = pd.DataFrame(
        {
            "model": np.where(np.arange(n) % 2, "sana", "sdxl"),
            "style": "natural",
            "base": "apple",
            "concept": [f"c{i}" for i in range(n)],
            "modifier_type": "emotional",
            "human_shift": rng.uniform(0, 100, n),
            "model_shift": rng.uniform(0, 100, n),
        }
    )
    many = shift_scatter(shifts)
    few = shift_scatter(shifts.iloc[: n - 1])
    assert [t.type for t in many.data] == ["scattergl", "scattergl", "scatter"]  # the y = x line stays SVG
    assert [t.type for t in few.data] == ["scatter", "scatter", "scatter"]
    sana = shifts[shifts["model"] == "sana"]
    (drawn,) = [t for t in many.data if t.name == "sana"]
    assert_allclose(drawn.x, sana["human_shift"])
    assert_allclose(drawn.y, sana["model_shift"])
    assert [row[0] for row in drawn.customdata] == list(sana["concept"])


def test_consistency_histogram_marks_the_high_variance_cutoff():
    scores = pd.Series([1.0, 2.0, 3.0, 9.0], index=list("abcd"))
    flags = pd.Series([False, False, False, True], index=list("abcd"))
    fig = consistency_histogram(scores, flags)
    assert_allclose(fig.data[0].x, scores.to_numpy())
    assert fig.layout.shapes[0].x0 == 9.0
    # In three short lines left of the line, which a phone's width shows whole (outside probe 136)
    assert fig.layout.annotations[0].text == "high variance:<br>1 of 4 concepts,<br>EMD ≥ 9.00"
    assert fig.layout.annotations[0].xanchor == "right" and fig.layout.annotations[0].x == 9.0
    # Ties at the cutoff, of which the marked share takes the first by name, are said so.
    tied = consistency_histogram(
        pd.Series([79.77] * 3, index=list("abc")), pd.Series([True, False, False], index=list("abc"))
    )
    assert tied.layout.annotations[0].text == (
        "high variance:<br>1 of 3 concepts,<br>EMD ≥ 79.77<br>(2 more at it: ties<br>go by concept name)"
    )


def test_consistency_histogram_starts_a_bin_at_the_cutoff_and_counts_whole_concepts():
    """Outside probe 215: the cutoff's own concept (57.86) drew as a bar from about 57.5 to
    58, mostly left of the "EMD ≥ 57.86" line, under count ticks of 0.2, 0.4, …"""
    scores = pd.Series([68.35, 57.86, 54.26], index=["banana", "lemon", "apple"])
    flags = pd.Series([True, True, False], index=scores.index)
    fig = consistency_histogram(scores, flags)
    bins = fig.data[0].xbins
    edges = bins.start + bins.size * np.arange(round((bins.end - bins.start) / bins.size) + 1)
    [at] = np.flatnonzero(np.isclose(edges, 57.86, rtol=0, atol=1e-4 * bins.size))
    # Plotly's bins take their left edge: the flagged scores fall in bins at or right of the line.
    assert edges[at] <= 57.86 < edges[at + 1] and edges[0] <= 54.26 and edges[-1] > 68.35
    assert fig.data[0].autobinx is False and 20 <= len(edges) - 1 <= 40
    assert (fig.layout.yaxis.tick0, fig.layout.yaxis.dtick) == (0, 1)
    # One concept: a bar in a plot wider than it, beside its line.
    one = consistency_histogram(pd.Series([40.0], index=["apple"]), pd.Series([True], index=["apple"]))
    low, high = one.layout.xaxis.range
    assert low < 40.0 < high and high - low > 5 * one.data[0].xbins.size
    assert one.layout.shapes[0].x0 == 40.0


def test_table3_figure_bars_and_error_bars_match_the_validation():
    validation = pd.DataFrame(
        {
            "label": ["PCC", "EMD"],
            "pearson": [0.4, 0.5],
            "pearson_lo": [0.3, 0.45],
            "pearson_hi": [0.5, 0.6],
            "spearman": [0.41, 0.55],
            "spearman_lo": [0.3, 0.5],
            "spearman_hi": [0.5, 0.6],
            "agreement": [0.55, 0.62],
            "agreement_lo": [0.5, 0.6],
            "agreement_hi": [0.6, 0.7],
        }
    )
    fig = table3_figure(validation)
    assert [t.name for t in fig.data] == ["Pearson r", "Spearman ρ", "Agreement (fraction)"]
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == (
        "metric",
        "alignment with human judgment",
    )
    assert_allclose(fig.data[1].y, [0.41, 0.55])
    assert_allclose(fig.data[0].error_y.array, [0.1, 0.1])
    assert_allclose(fig.data[2].error_y.arrayminus, [0.05, 0.02])


def test_distribution_bar_and_strip_hover_name_each_color():
    bar = distribution_bar(np.full(71, 1 / 71)).data[0]
    assert list(bar.customdata[24][4:]) == ["black", "black"]
    assert list(bar.customdata[49][4:]) == ["vivid red", "red"]
    assert "%{customdata[4]} (%{customdata[5]})" in bar.hovertemplate
    strip = dominant_strip(np.array([[213, 28, 60], [23, 52, 89]], dtype=np.uint8), [3, 2]).data[0]
    assert [list(row[2:]) for row in strip.customdata] == [["vivid red", "red"], ["dark blue", "blue"]]
    assert "%{customdata[2]} (%{customdata[3]})" in strip.hovertemplate


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("sd-tiny · plain · cfg 7.5", 40, ["sd-tiny · plain · cfg 7.5"]),
        ("sd-tiny · plain · cfg 7.5", 16, ["sd-tiny · plain", "· cfg 7.5"]),
        # A hub id breaks after its slash and hyphens, and its pieces keep no added space.
        (
            "stabilityai/stable-diffusion-xl-base-1.0 · plain",
            22,
            ["stabilityai/stable-", "diffusion-xl-base-1.0", "· plain"],
        ),
        ("averyveryverylongword here", 8, ["averyveryverylongword", "here"]),  # cannot break: whole
        ("  spaced   out  ", 40, ["spaced out"]),
    ],
)
def test_wrapped_breaks_at_spaces_then_after_slashes_and_hyphens(text, width, lines):
    assert wrapped(text, width) == "<br>".join(lines)
    assert all(len(line) <= width for line in lines if " " in line or "-" in line[:-1])


def test_a_note_across_an_empty_plot_is_wrapped_to_fit_a_phone():
    text = "Nothing to show: sensitivity compares each variant's shift from its base concept with people's."
    [note] = noted(go.Figure(), text).layout.annotations
    lines = note.text.split("<br>")
    assert " ".join(lines) == text and len(lines) > 1
    assert all(len(line) <= NOTE_CHARS for line in lines)


def test_a_note_breaks_a_long_hub_id_after_its_slash_as_titles_do():
    hub_id = "university-lab-of-color/sdxl_finetuned_on_rotten_fruit_v2_release"
    [note] = noted(go.Figure(), f"No image of {hub_id} was masked.").layout.annotations
    assert note.text.split("<br>") == [
        "No image of university-lab-of-color/",
        "sdxl_finetuned_on_rotten_fruit_v2_release",
        "was masked.",
    ]
