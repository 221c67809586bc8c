"""Known values for the explicit-color mode: metrics, dominant color, candidate sets."""

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose

from evaluation.color.colorspace import delta_e_2000
from evaluation.color.systems import load_system
from evaluation.explicit.candidates import K_NEIGHBOURS, NEUTRAL_CHROMA, candidate_indices, candidate_lab
from evaluation.explicit.dominant import dominant_color, masked_lab
from evaluation.explicit.rules import RULES, get_rules
from evaluation.explicit.scoring import delta_chroma, hue_difference, score

# ---------------------------------------------------------------- metrics


def test_delta_chroma_is_euclidean_in_ab_and_ignores_lightness():
    assert_allclose(delta_chroma([50.0, 3.0, 4.0], [90.0, 0.0, 0.0]), 5.0, rtol=1e-12)
    assert_allclose(
        delta_chroma([[0.0, -6.0, 1.0], [20.0, 1.0, 1.0]], [70.0, 6.0, 1.0]), [12.0, 5.0], rtol=1e-12
    )


def test_hue_difference_in_degrees_wraps_around_zero():
    red_ish = [50.0, 10 * np.cos(np.radians(350)), 10 * np.sin(np.radians(350))]
    orange_ish = [50.0, 10 * np.cos(np.radians(10)), 10 * np.sin(np.radians(10))]
    assert_allclose(hue_difference(red_ish, orange_ish), 20.0, rtol=1e-9)
    assert_allclose(hue_difference([50.0, 10.0, 0.0], [50.0, -10.0, 0.0]), 180.0, rtol=1e-12)
    assert_allclose(hue_difference([50.0, 10.0, 0.0], [50.0, 0.0, 10.0]), 90.0, rtol=1e-12)


def test_hue_difference_is_gated_below_the_chroma_threshold():
    faint, vivid = [50.0, 0.0, 4.9], [50.0, 30.0, 0.0]
    assert float(hue_difference(faint, vivid, gate_chroma=5.0)) == 0.0
    assert_allclose(hue_difference(faint, vivid, gate_chroma=4.0), 90.0, rtol=1e-12)


@pytest.mark.parametrize(
    ("lab1", "lab2", "expected"),
    [  # Sharma, Wu & Dalal (2005), Table 1, pairs 1, 7 and 17
        ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
        ([50.0, 0.0, 0.0], [50.0, -1.0, 2.0], 2.3669),
        ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
    ],
)
def test_ciede2000_matches_the_published_test_pairs(lab1, lab2, expected):
    assert_allclose(delta_e_2000(lab1, lab2), expected, atol=1e-4)


def test_score_takes_each_metric_minimum_over_the_candidates():
    """ΔChroma is smallest to one candidate, CIEDE2000 to another; each is its own minimum."""
    dominant = np.array([50.0, 20.0, 0.0])
    candidates = np.array([[90.0, 20.0, 0.0], [50.0, 26.0, 0.0]])
    result = score(dominant, candidates)
    assert result.delta_chroma == 0.0
    assert_allclose(result.delta_e00, float(delta_e_2000(dominant, candidates[1])), rtol=1e-12)
    assert result.hue_error == 0.0
    assert (result.chroma_pass, result.e00_pass, result.hue_pass) == (True, result.delta_e00 < 5.0, True)


def test_score_passes_strictly_below_the_jnd_and_correct_needs_all_three():
    target = np.array([[60.0, 40.0, 0.0]])
    inside = score([60.0, 44.9, 0.0], target)
    assert inside.chroma_pass and inside.e00_pass and inside.hue_pass and inside.correct
    at_jnd = score([60.0, 45.0, 0.0], target)
    assert not at_jnd.chroma_pass and not at_jnd.correct
    turned = [60.0, 40 * np.cos(np.radians(6)), 40 * np.sin(np.radians(6))]
    verdict = score(turned, target)
    assert verdict.chroma_pass and not verdict.hue_pass and not verdict.correct
    assert score(turned, target, scoring="released").correct


def test_score_of_a_gray_against_a_gray_ignores_hue():
    verdict = score([50.0, 1.0, 1.0], [[52.0, -1.0, -1.0]])
    assert verdict.hue_error == 0.0 and verdict.correct


def test_rules_paper_and_released_differ_where_the_issue_says():
    paper, released = RULES["paper"], RULES["released"]
    assert (paper.jnd, paper.hue_threshold, paper.hue_gate_chroma) == (5.0, 5.0, 5.0)
    assert (released.jnd, released.hue_threshold, released.hue_gate_chroma) == (5.0, 30.0, 5.0)
    assert (released.achromatic_chroma, released.achromatic_keep_chroma) == (10.0, 15.0)
    assert (released.axis_iqr, released.chroma_percentile) == (1.5, 50.0)
    closest = RULES["released-closest"]
    assert closest == dataclasses.replace(released, name="released-closest", closest_fraction=0.05)
    assert (paper.closest_fraction, released.closest_fraction) == (None, None)
    assert get_rules(paper) is paper
    with pytest.raises(ValueError, match="`scoring`"):
        get_rules("blender")
    with pytest.raises(ValueError, match="`closest_fraction`"):
        dataclasses.replace(paper, closest_fraction=0.0)
    with pytest.raises(ValueError, match="`projection`"):
        dataclasses.replace(paper, projection="median")


@pytest.mark.parametrize(
    ("dominant", "candidates", "field"),
    [([50.0, 0.0], [[50.0, 0.0, 0.0]], "`dominant`"), ([50.0, 0.0, 0.0], np.zeros((0, 3)), "`candidates`")],
)
def test_score_bad_shapes_raise_value_error_naming_the_field(dominant, candidates, field):
    with pytest.raises(ValueError, match=field):
        score(dominant, candidates)


# ---------------------------------------------------------------- dominant color


def test_dominant_color_of_a_shaded_hue_line_is_its_mean_on_that_hue():
    """Pixels along one hue (a shaded object): the first axis is that hue, the plain mean's
    result the mean."""
    chroma = np.linspace(20.0, 60.0, 41)
    hue = np.radians(40.0)
    lab = np.stack([np.linspace(30.0, 70.0, 41), chroma * np.cos(hue), chroma * np.sin(hue)], axis=-1)
    result = dominant_color(lab, scoring="paper-mean")
    assert_allclose(result.lab, [50.0, 40 * np.cos(hue), 40 * np.sin(hue)], atol=1e-9)
    assert_allclose(np.abs(result.axis), [np.cos(hue), np.sin(hue)], atol=1e-9)
    assert not result.achromatic and result.pixels == 41


def test_default_rules_read_the_lit_side_and_the_body_without_the_highlight():
    """A shaded surface (L* + 16, a*, b* in proportion, as scaling its XYZ does) plus a white
    highlight: the default rules drop the highlight (low C* / (L* + 16)) and take two readings
    of the rest, the lit side (L* between its 75th and 95th percentiles) and the body (below
    its 95th); without a target the dominant color is the lit one, with a target the nearer."""
    steps = np.arange(32.0, 65.0)  # L* + 16 from 32 to 64, C* half of it: the ratio is 1/2 exactly
    body = np.column_stack([steps - 16.0, steps / 2, np.zeros_like(steps)])
    highlight = np.column_stack([np.linspace(50.0, 95.0, 10), np.linspace(20.0, 2.0, 10), np.zeros(10)])
    lab = np.vstack([body, highlight])
    low, lit_high = np.percentile(body[:, 0], [75, 95], method="nearest")
    lit = body[(body[:, 0] >= low) & (body[:, 0] <= lit_high)]
    whole = body[body[:, 0] <= lit_high]
    result = dominant_color(lab)
    assert_allclose(result.lab, lit.mean(axis=0), atol=1e-9)
    assert_allclose(result.readings, [lit.mean(axis=0), whole.mean(axis=0)], atol=1e-9)
    assert result.reading == "lit" and result.pixels == len(lit) and not result.achromatic
    darker = dominant_color(lab, target=whole.mean(axis=0) - [1.0, 0.0, 0.0])
    assert darker.reading == "body" and darker.pixels == len(whole)
    assert_allclose(darker.lab, whole.mean(axis=0), atol=1e-9)
    assert dominant_color(lab, target=lit.mean(axis=0) + [1.0, 0.0, 0.0]).reading == "lit"
    assert_allclose(dominant_color(body, scoring="paper-mean").lab, body.mean(axis=0), atol=1e-12)
    assert dominant_color(body, scoring="paper-mean").readings.shape == (1, 3)
    for field in ("lit_band", "body_band"):
        with pytest.raises(ValueError, match=f"`{field}`"):
            dataclasses.replace(RULES["paper"], **{field: (90.0, 50.0)})
    with pytest.raises(ValueError, match="`lit_ratio_percentile`"):
        dataclasses.replace(RULES["paper"], lit_ratio_percentile=100.0)


def test_dominant_color_projects_through_the_mean_or_through_the_origin():
    """Chromaticities (10, 10) and (30, 10): first axis a*. Centred projection keeps the mean
    (20, 10); the origin projection drops the b* offset across the axis: (20, 0)."""
    lab = np.array([[40.0, 10.0, 10.0], [60.0, 30.0, 10.0]])
    assert_allclose(dominant_color(lab, scoring="paper-mean").lab, [50.0, 20.0, 10.0], atol=1e-12)
    origin = dataclasses.replace(RULES["paper-mean"], projection="origin")
    assert_allclose(dominant_color(lab, scoring=origin).lab, [50.0, 20.0, 0.0], atol=1e-12)


def test_dominant_color_of_one_flat_color_is_that_color():
    lab = np.tile([45.0, -12.0, 30.0], (10, 1))
    result = dominant_color(lab)
    assert_allclose(result.lab, [45.0, -12.0, 30.0], atol=1e-12)
    assert_allclose(result.axis, np.array([-12.0, 30.0]) / np.hypot(12.0, 30.0), atol=1e-12)


def test_achromatic_object_is_the_plain_mean_without_an_axis():
    rng = np.random.default_rng(0)
    lab = np.column_stack([rng.uniform(20, 80, 200), rng.normal(0, 1.5, 200), rng.normal(1.0, 1.5, 200)])
    result = dominant_color(lab, scoring="paper-mean")
    assert result.achromatic and result.pixels == 200
    assert_allclose(result.lab, lab.mean(axis=0), atol=1e-12)
    assert_allclose(result.axis, [0.0, 0.0])


def test_released_rules_call_a_chroma_8_object_achromatic_and_keep_chroma_below_15():
    lab = np.array([[50.0, 8.0, 0.0]] * 6 + [[50.0, 0.0, 7.0]] * 3 + [[90.0, 40.0, 0.0]] * 2)
    paper = dominant_color(lab)
    released = dominant_color(lab, scoring="released")
    assert not paper.achromatic
    assert released.achromatic and released.pixels == 9
    assert_allclose(released.lab, [50.0, 48.0 / 9, 21.0 / 9], atol=1e-12)


def test_released_rules_drop_outliers_across_the_axis_and_the_less_chromatic_half():
    """Twenty pixels on the a* axis at chroma 21..40 and one off the axis at b* = 15: the
    outlier goes (1.5 IQR on the second axis), then the ten most chromatic stay."""
    on_axis = np.column_stack([np.full(20, 50.0), np.arange(21.0, 41.0), np.zeros(20)])
    lab = np.vstack([on_axis, [[50.0, 30.0, 15.0]]])
    result = dominant_color(lab, scoring="released")
    assert result.pixels == 10
    assert_allclose(result.lab[0], 50.0)
    assert_allclose(result.lab, [50.0, 35.5, 0.0], atol=1e-12)


def test_released_closest_rules_average_the_pixels_nearest_the_target():
    """The released-closest rules on a chroma ramp keep the 5% of pixels nearest the target."""
    lab = np.column_stack([np.full(100, 50.0), np.arange(1.0, 101.0), np.zeros(100)])
    result = dominant_color(lab, scoring="released-closest", target=[50.0, 90.0, 0.0])
    assert result.pixels == 3  # the chroma filter keeps 50 pixels, 5% of them is 3 (rounded up)
    assert_allclose(result.lab, [50.0, 90.0, 0.0], atol=1e-9)


def test_closest_fraction_averages_the_pixels_nearest_the_target():
    lab = np.column_stack([np.full(100, 50.0), np.arange(1.0, 101.0), np.zeros(100)])
    closest = dataclasses.replace(RULES["paper-mean"], closest_fraction=0.05)
    result = dominant_color(lab, scoring=closest, target=[50.0, 3.0, 0.0])
    assert result.pixels == 5
    assert_allclose(result.lab, [50.0, 3.0, 0.0], atol=1e-9)


def test_masked_lab_takes_the_masked_pixels_only():
    image = np.zeros((2, 2, 3), dtype=np.uint8)
    image[0, 1] = (255, 0, 0)
    mask = np.array([[False, True], [False, False]])
    assert_allclose(masked_lab(image, mask), [[53.2408, 80.0925, 67.2032]], atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"lab": np.zeros((0, 3))}, "`lab`"),
        ({"lab": np.zeros((4, 2))}, "`lab`"),
        ({"lab": [[50.0, np.nan, 0.0]]}, "`lab`"),
        ({"lab": np.zeros((4, 3)), "scoring": "released-closest"}, "`target`"),
        ({"lab": np.zeros((4, 3)), "target": [0.0, 0.0]}, "`target`"),
        ({"lab": np.zeros((4, 3)), "scoring": "blender"}, "`scoring`"),
    ],
)
def test_dominant_color_bad_input_raises_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        dominant_color(**kwargs)


def test_masked_lab_bad_mask_raises_value_error():
    with pytest.raises(ValueError, match="`mask`"):
        masked_lab(np.zeros((2, 2, 3), dtype=np.uint8), np.ones((2, 3), dtype=bool))


# ---------------------------------------------------------------- candidate sets


@pytest.mark.parametrize("key", ["iscc-nbs-l1", "iscc-nbs-l2", "iscc-nbs-l3", "css3"])
def test_candidate_set_is_the_target_and_its_k_nearest_of_its_kind_by_ciede2000(key):
    system = load_system(key)
    neutral = np.hypot(system.lab[:, 1], system.lab[:, 2]) < NEUTRAL_CHROMA
    for row in range(len(system)):
        rows = candidate_indices(system, row)
        kind = np.flatnonzero(neutral == neutral[row])
        assert rows[0] == row and len(rows) == min(K_NEIGHBOURS + 1, len(kind))
        assert np.all(neutral[rows] == neutral[row])
        distance = delta_e_2000(system.lab[row], system.lab)
        others = np.setdiff1d(kind, [row])
        farthest_kept = distance[rows[1:]].max()
        assert np.all(np.diff(distance[rows[1:]]) >= 0)
        assert np.sum(distance[others] < farthest_kept) <= K_NEIGHBOURS - 1


def test_neutral_chroma_is_every_rule_sets_hue_gate():
    assert {get_rules(name).hue_gate_chroma for name in RULES} == {NEUTRAL_CHROMA}


@pytest.mark.parametrize(
    ("key", "shown", "target"),
    [
        ("iscc-nbs-l1", "gray", "green"),
        ("iscc-nbs-l1", "gray", "blue"),
        ("iscc-nbs-l1", "gray", "purple"),
        ("iscc-nbs-l1", "white", "pink"),
        ("iscc-nbs-l1", "black", "blue"),
        ("iscc-nbs-l2", "gray", "pink"),
        ("iscc-nbs-l2", "black", "olive green"),
        ("css3", "ghost white", "lavender"),
        ("iscc-nbs-l2", "yellowish pink", "white"),
        ("iscc-nbs-l1", "pink", "gray"),
        ("iscc-nbs-l2", "pink", "gray"),
        ("css3", "slate gray", "gray"),
    ],
)
def test_a_flat_object_of_the_other_kind_passes_under_no_rule_set(key, shown, target):
    """Outside probe 121: with a neutral color among a chromatic target's nearest (or the
    reverse) the gated hue test was vacuous, and each of these flat squares passed under every
    rule set (a gray one as L1 green)."""
    system = load_system(key)
    candidates = candidate_lab(system, target)
    image = np.full((20, 20, 3), system.rgb[system.index(shown)], dtype=np.uint8)
    lab = masked_lab(image, np.ones((20, 20), dtype=bool))
    for name in RULES:
        dominant = dominant_color(lab, scoring=name, target=candidates[0])
        assert not score(dominant.lab, candidates, scoring=name).correct, name


def test_candidate_sets_on_the_tables():
    l1, l2, css = load_system("iscc-nbs-l1"), load_system("iscc-nbs-l2"), load_system("css3")
    assert [l1.names[i] for i in candidate_indices(l1, "red", k=2)] == ["red", "brown", "pink"]
    assert [l2.names[i] for i in candidate_indices(l2, "Red")] == [
        "red",
        "reddish brown",
        "purplish red",
        "reddish orange",
    ]
    assert [css.names[i] for i in candidate_indices(css, "aqua")] == [
        "aqua",
        "cyan",
        "turquoise",
        "medium turquoise",
    ]
    assert [l2.names[i] for i in candidate_indices(l2, "white", k=0)] == ["white"]
    assert [l1.names[i] for i in candidate_indices(l1, "pink")] == ["pink", "red", "purple", "orange"]
    assert [l1.names[i] for i in candidate_indices(l1, "gray")] == ["gray", "white", "black"]
    assert_allclose(candidate_lab(l2, "blue", k=1), l2.lab[[l2.index("blue"), l2.index("purplish blue")]])


@pytest.mark.parametrize(
    ("target", "k", "field"),
    [
        ("ultramarine", 3, "`target`"),
        (29, 3, "`target`"),
        (True, 3, "`target`"),
        ("red", 29, "`k`"),
        ("red", -1, "`k`"),
    ],
)
def test_candidate_bad_input_raises_value_error_naming_the_field(target, k, field):
    with pytest.raises(ValueError, match=field):
        candidate_indices(load_system("iscc-nbs-l2"), target, k)
