import numpy as np
import pytest
from numpy.testing import assert_allclose

from evaluation.color.plausibility import (
    SCD,
    SCDConfig,
    bin_plausibility,
    hs_bin_index,
    hs_histogram,
    pixel_plausibility,
    plausibility_ranking,
)

W_S = 1 - 1.0 / np.hypot(1.0, 1.2)  # saturation neighbour weight (C_s = 1)
W_H = 1 - 1.2 / np.hypot(1.0, 1.2)  # hue neighbour weight (C_h = 1.2)


def chromatic_bin(row, col):
    return 1 + (row - 1) * 36 + col


def patch(rgb, n, rng, jitter=6):
    noise = rng.integers(-jitter, jitter + 1, size=(n, 3))
    return np.clip(np.asarray(rgb)[None] + noise, 0, 255).astype(np.uint8)


def test_bins_follow_hsv_with_one_achromatic_bin_up_to_ten_percent_saturation():
    pixels = np.array(
        [
            [255, 0, 0],
            [128, 128, 128],
            [0, 0, 0],
            [250, 225, 225],
            [250, 224, 224],
            [255, 0, 22],
            [0, 255, 0],
        ],
        dtype=np.uint8,
    )
    # red: S 100 %, H 0° ; grey and black: achromatic ; S = 10 % exactly: achromatic ;
    # S = 10.4 %: lowest chromatic row ; H = 354.8°: last hue column ; green: H 120°
    expected = [chromatic_bin(9, 0), 0, 0, 0, chromatic_bin(1, 0), chromatic_bin(9, 35), chromatic_bin(9, 12)]
    assert hs_bin_index(pixels).tolist() == expected
    assert SCD.n_bins == 1 + 9 * 36


def test_bin_index_keeps_leading_shape_and_accepts_unit_floats():
    img = np.zeros((4, 5, 3))
    img[..., 2] = 1.0
    idx = hs_bin_index(img)
    assert idx.shape == (4, 5)
    assert np.all(idx == chromatic_bin(9, 24))


def test_histogram_is_pixel_shares():
    pixels = np.array([[255, 0, 0]] * 3 + [[128, 128, 128]], dtype=np.uint8)
    h = hs_histogram(pixels)
    assert h.shape == (325,)
    assert_allclose(h.sum(), 1.0)
    assert h[0] == 0.25 and h[chromatic_bin(9, 0)] == 0.75


def test_window_weights_follow_scd_eqs_2_to_4():
    prior = np.zeros(SCD.n_bins)
    prior[chromatic_bin(5, 10)] = 1.0
    p = bin_plausibility(prior)
    expected = np.zeros(SCD.n_bins)
    expected[chromatic_bin(5, 10)] = 1.0
    expected[[chromatic_bin(4, 10), chromatic_bin(6, 10)]] = W_S
    expected[[chromatic_bin(5, 9), chromatic_bin(5, 11)]] = W_H
    assert_allclose(p, expected, atol=1e-12)


def test_window_wraps_around_the_hue_circle():
    prior = np.zeros(SCD.n_bins)
    prior[chromatic_bin(3, 0)] = 1.0
    p = bin_plausibility(prior)
    assert_allclose(p[chromatic_bin(3, 35)], W_H)
    assert_allclose(p[chromatic_bin(3, 1)], W_H)


def test_probability_density_divides_the_achromatic_bin_by_its_360_degree_width():
    prior = np.zeros(SCD.n_bins)
    prior[0] = 0.5
    prior[chromatic_bin(6, 20)] = 0.5
    p = bin_plausibility(prior)
    # achromatic row cell: itself plus its two hue neighbours (the same bin); PD = F / (10 × 360)
    assert_allclose(p[chromatic_bin(6, 20)], 1.0)
    assert_allclose(p[0], (1 + 2 * W_H) / 36, rtol=1e-12)


def test_pink_forbidding_castle_ranks_first_among_grey_and_brown_ones():
    rng = np.random.default_rng(7)
    castles = {
        f"designer{i}": np.concatenate(
            [
                patch((118, 118, 120), 400, rng),
                patch((84, 80, 78), 300, rng),
                patch((104, 80, 58), 150 + 40 * i, rng),
            ]
        )
        for i in range(4)
    }
    castles["pastel"] = np.concatenate([patch((255, 105, 180), 500, rng), patch((255, 182, 193), 200, rng)])
    ranking = plausibility_ranking(castles)
    assert ranking["coloring"].iloc[0] == "pastel"
    assert ranking["rank"].tolist() == [1, 2, 3, 4, 5]
    assert ranking["score"].is_monotonic_increasing
    assert ranking["score"].iloc[0] < 0.5 * ranking["score"].iloc[1]
    assert ranking["score"].between(0, 1).all()


def test_ranking_score_is_the_mean_pixel_score_against_the_other_colorings():
    rng = np.random.default_rng(3)
    colorings = [patch((200, 40, 30), 50, rng), patch((180, 60, 40), 80, rng), patch((40, 90, 200), 30, rng)]
    ranking = plausibility_ranking(colorings).set_index("coloring")
    prior = (hs_histogram(colorings[1]) + hs_histogram(colorings[2])) / 2
    assert_allclose(ranking.loc[0, "score"], pixel_plausibility(colorings[0], prior).mean(), rtol=1e-12)


def test_pixel_plausibility_keeps_the_image_shape():
    prior = hs_histogram(np.array([[255, 0, 0]], dtype=np.uint8))
    img = np.zeros((3, 4, 3), dtype=np.uint8)
    img[0, 0] = (255, 0, 0)
    scores = pixel_plausibility(img, prior)
    assert scores.shape == (3, 4)
    assert scores[0, 0] == 1.0 and scores[1, 1] == 0.0


@pytest.mark.parametrize(
    "colorings, match",
    [
        ([np.zeros((3, 3), np.uint8)], "at least 2 colorings"),
        ({"a": np.zeros((3, 3), np.uint8), "b": np.zeros((0, 3), np.uint8)}, "coloring 'b'.*no pixels"),
        ([np.zeros((3, 3), np.int16), np.zeros((3, 3), np.uint8)], "coloring 0.*dtype int16"),
        ([np.full((2, 3), 1.5), np.zeros((3, 3))], r"coloring 0.*\[0, 1\]"),
        ([np.zeros((3, 4), np.uint8), np.zeros((3, 3), np.uint8)], r"coloring 0.*\(\.\.\., 3\)"),
    ],
)
def test_ranking_rejects_bad_colorings_by_name(colorings, match):
    with pytest.raises(ValueError, match=match):
        plausibility_ranking(colorings)


def test_prior_must_have_mass_and_the_right_length():
    with pytest.raises(ValueError, match="prior_histogram"):
        bin_plausibility(np.zeros(SCD.n_bins))
    with pytest.raises(ValueError, match=r"shape \(325,\)"):
        bin_plausibility(np.ones(10))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hue_bin_deg": 7}, "hue_bin_deg"),
        ({"sat_bin_pct": 7}, "sat_bin_pct"),
        ({"window": (2, 3)}, "window"),
        ({"achromatic_max_pct": 0}, "achromatic_max_pct"),
    ],
)
def test_config_rejects_bins_that_do_not_tile_the_space(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SCDConfig(**kwargs)


def test_coarser_config_changes_the_bin_count():
    cfg = SCDConfig(hue_bin_deg=20, sat_bin_pct=30)
    assert cfg.n_bins == 1 + 3 * 18
    assert hs_histogram(np.array([[255, 0, 0]], np.uint8), config=cfg).shape == (cfg.n_bins,)


def test_uint8_pixels_bin_and_histogram_as_their_float_values_do():
    """The uint8 path bins each distinct color once; it must agree with binning every pixel."""
    rng = np.random.default_rng(3)
    pixels = np.concatenate(
        [
            rng.integers(0, 256, (500, 3)),
            np.repeat([[200, 30, 30]], 300, 0),
            np.repeat([[128, 128, 128]], 200, 0),
        ]
    ).astype(np.uint8)
    as_float = pixels / 255.0
    np.testing.assert_array_equal(hs_bin_index(pixels), hs_bin_index(as_float))
    np.testing.assert_array_equal(
        hs_bin_index(pixels.reshape(10, 100, 3)), hs_bin_index(as_float).reshape(10, 100)
    )
    np.testing.assert_allclose(hs_histogram(pixels), hs_histogram(as_float), rtol=0, atol=1e-15)
