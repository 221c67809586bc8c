"""The UW-71 palette against references computed here from the shipped CSV's CIELAB
columns (scikit-image conversions, SciPy distances, brute-force search), not against
numbers taken from the palette code's own output."""

import csv

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.spatial.distance import cdist
from skimage.color import lab2lch, lab2rgb

from evaluation.color.palette import UW71_CSV, load_uw71, nearest_uw71


def _csv_rows():
    with open(UW71_CSV, newline="", encoding="utf-8") as f:
        return sorted(csv.DictReader(f), key=lambda r: int(r["color_index"]))


def _csv_lab() -> np.ndarray:
    """The CSV's L, a, b columns, shape (71, 3), in ``color_index`` order."""
    return np.array([[float(r[k]) for k in ("L", "a", "b")] for r in _csv_rows()])


def test_uw71_has_71_bins_in_color_index_order():
    pal = load_uw71()
    rows = _csv_rows()
    assert pal.lab.shape == (71, 3) and pal.lch.shape == (71, 3) and pal.rgb.shape == (71, 3)
    assert len(pal) == 71 and len(pal.hex) == 71
    assert pal.rgb.dtype == np.uint8 and pal.lab.dtype == np.float64
    assert_array_equal(pal.lab, _csv_lab())
    assert pal.hex == tuple(r["color_hex"] for r in rows)
    # Every bin is inside sRGB: scikit-image's CIELAB -> sRGB (D65, 2 degrees) of the CSV's
    # coordinates, rounded to 0-255, is exactly the shipped color.
    assert_array_equal(pal.rgb, np.round(lab2rgb(_csv_lab()) * 255).astype(np.uint8))
    assert pal.hex == tuple("#{:02x}{:02x}{:02x}".format(*rgb) for rgb in pal.rgb)


def test_rgb_matches_the_csv_0_255_columns_rounded():
    cols = np.array([[float(r[k]) for k in ("r255", "g255", "b255")] for r in _csv_rows()])
    assert_array_equal(load_uw71().rgb, np.round(cols).astype(np.uint8))


def test_achromatic_bins_are_the_six_greys_with_nan_hue():
    pal = load_uw71()
    lab = _csv_lab()
    greys = np.flatnonzero((lab[:, 1] == 0) & (lab[:, 2] == 0))  # a* = b* = 0 in the CSV
    assert len(greys) == 6
    assert_array_equal(np.flatnonzero(pal.achromatic), greys)
    assert np.all(np.isnan(pal.hue_deg[pal.achromatic]))
    assert not np.any(np.isnan(pal.hue_deg[~pal.achromatic]))
    # The CSV's hue column (7 decimals) against scikit-image's hue of its a*, b*: they agree
    # to 5e-8 degrees, so 1e-7 is the rounding of the column, no more.
    hue = np.degrees(lab2lch(lab)[:, 2])
    assert_allclose(pal.hue_deg[~pal.achromatic], hue[~pal.achromatic], rtol=0, atol=1e-7)
    assert np.all((pal.hue_deg[~pal.achromatic] >= 0) & (pal.hue_deg[~pal.achromatic] < 360))


def test_lch_agrees_with_lab():
    pal = load_uw71()
    chroma = np.hypot(pal.lab[:, 1], pal.lab[:, 2])
    assert_allclose(pal.lch[:, 1], chroma, atol=1e-4)
    hue = np.degrees(np.arctan2(pal.lab[:, 2], pal.lab[:, 1])) % 360
    chromatic = ~pal.achromatic
    diff = np.abs(pal.lch[chromatic, 2] - hue[chromatic])
    assert_allclose(np.minimum(diff, 360 - diff), 0, atol=1e-3)


def test_ground_distance_is_cielab_euclidean_and_a_metric():
    pal = load_uw71()
    d = pal.ground_distance
    assert d.shape == (71, 71)
    assert_allclose(d, cdist(_csv_lab(), _csv_lab()), rtol=1e-15, atol=0)
    # Black to white: L* runs from 0 to 100 by CIELAB's definition, a* = b* = 0 for both.
    black, white = (int(np.flatnonzero(np.all(pal.lab == c, axis=1))[0]) for c in ([0, 0, 0], [100, 0, 0]))
    assert d[black, white] == 100.0
    assert_array_equal(d, d.T)
    assert_array_equal(np.diag(d), 0)
    assert np.all(d[:, :, None] <= d[:, None, :] + d.T[None, :, :] + 1e-9)


def test_palette_is_cached_and_read_only():
    pal = load_uw71()
    assert load_uw71() is pal
    with pytest.raises(ValueError):
        pal.lab[0, 0] = 1.0


def test_nearest_uw71_maps_each_bin_to_itself_over_any_leading_shape():
    pal = load_uw71()
    assert_array_equal(nearest_uw71(pal.lab), np.arange(71))
    grid = pal.lab[::-1].reshape(71, 1, 3) + np.array([0.5, -0.5, 0.3])
    assert_array_equal(nearest_uw71(grid), np.arange(71)[::-1].reshape(71, 1))
    near_white = np.array([99.0, 0.1, -0.2])
    assert nearest_uw71(near_white) == np.argmin(cdist(near_white[None], _csv_lab())[0])


def test_nearest_uw71_handles_more_rows_than_one_chunk():
    pal = load_uw71()
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 71, size=20_000)
    assert_array_equal(nearest_uw71(pal.lab[idx] + rng.uniform(-0.5, 0.5, (20_000, 3))), idx)


@pytest.mark.parametrize(
    "lab, message",
    [
        (np.zeros((4, 2)), r"`lab` must have shape \(..., 3\), got \(4, 2\)"),
        (np.array([np.nan, 0, 0]), "`lab` must hold finite values"),
    ],
)
def test_nearest_uw71_rejects_bad_input(lab, message):
    with pytest.raises(ValueError, match=message):
        nearest_uw71(lab)
