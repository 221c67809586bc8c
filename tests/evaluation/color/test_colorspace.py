import numpy as np
import pytest
from numpy.testing import assert_allclose

from evaluation.color.colorspace import delta_e_2000, lab_to_srgb, lab_to_srgb_uint8, srgb_to_lab
from evaluation.color.palette import load_uw71

# Sharma, Wu & Dalal (2005), Table 1: the 34 CIEDE2000 test pairs, L1 a1 b1 L2 a2 b2 ΔE00.
SHARMA_2005 = np.array(
    [
        [50.0000, 2.6772, -79.7751, 50.0000, 0.0000, -82.7485, 2.0425],
        [50.0000, 3.1571, -77.2803, 50.0000, 0.0000, -82.7485, 2.8615],
        [50.0000, 2.8361, -74.0200, 50.0000, 0.0000, -82.7485, 3.4412],
        [50.0000, -1.3802, -84.2814, 50.0000, 0.0000, -82.7485, 1.0000],
        [50.0000, -1.1848, -84.8006, 50.0000, 0.0000, -82.7485, 1.0000],
        [50.0000, -0.9009, -85.5211, 50.0000, 0.0000, -82.7485, 1.0000],
        [50.0000, 0.0000, 0.0000, 50.0000, -1.0000, 2.0000, 2.3669],
        [50.0000, -1.0000, 2.0000, 50.0000, 0.0000, 0.0000, 2.3669],
        [50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0009, 7.1792],
        [50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0010, 7.1792],
        [50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0011, 7.2195],
        [50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0012, 7.2195],
        [50.0000, -0.0010, 2.4900, 50.0000, 0.0009, -2.4900, 4.8045],
        [50.0000, -0.0010, 2.4900, 50.0000, 0.0010, -2.4900, 4.8045],
        [50.0000, -0.0010, 2.4900, 50.0000, 0.0011, -2.4900, 4.7461],
        [50.0000, 2.5000, 0.0000, 50.0000, 0.0000, -2.5000, 4.3065],
        [50.0000, 2.5000, 0.0000, 73.0000, 25.0000, -18.0000, 27.1492],
        [50.0000, 2.5000, 0.0000, 61.0000, -5.0000, 29.0000, 22.8977],
        [50.0000, 2.5000, 0.0000, 56.0000, -27.0000, -3.0000, 31.9030],
        [50.0000, 2.5000, 0.0000, 58.0000, 24.0000, 15.0000, 19.4535],
        [50.0000, 2.5000, 0.0000, 50.0000, 3.1736, 0.5854, 1.0000],
        [50.0000, 2.5000, 0.0000, 50.0000, 3.2972, 0.0000, 1.0000],
        [50.0000, 2.5000, 0.0000, 50.0000, 1.8634, 0.5757, 1.0000],
        [50.0000, 2.5000, 0.0000, 50.0000, 3.2592, 0.3350, 1.0000],
        [60.2574, -34.0099, 36.2677, 60.4626, -34.1751, 39.4387, 1.2644],
        [63.0109, -31.0961, -5.8663, 62.8187, -29.7946, -4.0864, 1.2630],
        [61.2901, 3.7196, -5.3901, 61.4292, 2.2480, -4.9620, 1.8731],
        [35.0831, -44.1164, 3.7933, 35.0232, -40.0716, 1.5901, 1.8645],
        [22.7233, 20.0904, -46.6940, 23.0331, 14.9730, -42.5619, 2.0373],
        [36.4612, 47.8580, 18.3852, 36.2715, 50.5065, 21.2231, 1.4146],
        [90.8027, -2.0831, 1.4410, 91.1528, -1.6435, 0.0447, 1.4441],
        [90.9257, -0.5406, -0.9208, 88.6381, -0.8985, -0.7239, 1.5381],
        [6.7747, -0.2908, -2.4247, 5.8714, -0.0985, -2.2286, 0.6377],
        [2.0776, 0.0795, -1.1350, 0.9033, -0.0636, -0.5514, 0.9082],
    ]
)


def test_delta_e_2000_matches_sharma_2005_reference_pairs():
    d = delta_e_2000(SHARMA_2005[:, 0:3], SHARMA_2005[:, 3:6])
    assert d.shape == (34,)
    assert_allclose(d, SHARMA_2005[:, 6], atol=5e-5)


def test_delta_e_2000_is_symmetric_and_broadcasts():
    lab1, lab2 = SHARMA_2005[:, 0:3], SHARMA_2005[:, 3:6]
    assert_allclose(delta_e_2000(lab2, lab1), SHARMA_2005[:, 6], atol=5e-5)
    grid = delta_e_2000(lab1[:, None, :], lab2[None, :5, :])
    assert grid.shape == (34, 5)
    assert_allclose(grid[:, 0], delta_e_2000(lab1, lab2[0]), rtol=1e-12)
    assert float(delta_e_2000(lab1[0], lab1[0])) == 0.0


def test_delta_e_2000_weighting_factor_scales_lightness_term():
    pair = np.array([50.0, 0, 0]), np.array([60.0, 0, 0])
    # Pure lightness difference: ΔE00 = ΔL / (kL·SL), so doubling kL halves it.
    assert_allclose(delta_e_2000(*pair, kL=2), delta_e_2000(*pair) / 2, rtol=1e-12)


def test_uw71_srgb_round_trips_to_the_csv_lab():
    pal = load_uw71()
    lab = srgb_to_lab(pal.rgb)
    # hex values are rounded to 8 bits, which moves colors by at most ~0.5 ΔE*ab.
    assert_allclose(lab, pal.lab, atol=0.8)
    assert np.max(delta_e_2000(lab, pal.lab)) < 0.6
    back = lab_to_srgb_uint8(pal.lab)
    assert np.abs(back.astype(int) - pal.rgb.astype(int)).max() <= 1


def test_srgb_to_lab_accepts_uint8_and_unit_floats_alike():
    rgb8 = np.array([[[255, 0, 0], [0, 0, 0], [255, 255, 255]]], dtype=np.uint8)
    lab = srgb_to_lab(rgb8)
    assert lab.shape == (1, 3, 3)
    assert_allclose(lab[0, 0], [53.2406, 80.0923, 67.2028], atol=1e-3)  # sRGB red, D65
    assert_allclose(lab[0, 1], [0, 0, 0], atol=1e-9)
    assert_allclose(lab[0, 2], [100, 0, 0], atol=1e-2)
    assert_allclose(srgb_to_lab(rgb8.astype(np.float32) / 255), lab, atol=1e-4)
    assert_allclose(lab_to_srgb(lab), rgb8 / 255, atol=1e-6)


@pytest.mark.parametrize(
    "fn, args, message",
    [
        (srgb_to_lab, (np.zeros((2, 4), dtype=np.uint8),), r"`rgb` must have shape \(..., 3\)"),
        (srgb_to_lab, (np.zeros((2, 3), dtype=np.int64),), "got dtype int64"),
        (srgb_to_lab, (np.full((2, 3), 2.0),), r"must lie in \[0, 1\], got range \[2, 2\]"),
        (srgb_to_lab, (np.array([np.nan, 0, 0]),), "`rgb` must hold finite values"),
        (lab_to_srgb, (np.zeros(4),), r"`lab` must have shape \(..., 3\), got \(4,\)"),
        (delta_e_2000, (np.zeros((2, 3)), np.zeros((3, 3))), "do not broadcast"),
        (delta_e_2000, (np.zeros(3), np.array([0, np.inf, 0])), "`lab2` must hold finite"),
    ],
)
def test_colorspace_rejects_bad_input(fn, args, message):
    with pytest.raises(ValueError, match=message):
        fn(*args)
