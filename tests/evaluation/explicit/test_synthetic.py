"""Synthetic shape renders: shapes, determinism, exact masks, color fidelity, bad input."""

import numpy as np
import pytest

from evaluation.color.colorspace import delta_e_2000, srgb_to_lab
from evaluation.color.synthetic import BACKGROUNDS, SHAPES, render


@pytest.mark.parametrize("shape", SHAPES)
def test_render_returns_uint8_image_and_a_centred_object_mask(shape):
    image, mask = render([40, 160, 90], shape, size=96, seed=3)
    assert image.shape == (96, 96, 3) and image.dtype == np.uint8
    assert mask.shape == (96, 96) and mask.dtype == bool
    covered = mask.mean()
    assert 0.1 < covered < 0.6, f"{shape} covers {covered:.2f} of the image"
    rows, cols = np.nonzero(mask)
    assert 20 < rows.mean() < 76 and 20 < cols.mean() < 76


def test_render_is_deterministic_in_its_seed():
    first = render([200, 30, 40], "sphere", seed=5, size=64)
    again = render([200, 30, 40], "sphere", seed=5, size=64)
    other = render([200, 30, 40], "sphere", seed=6, size=64)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize("background", BACKGROUNDS)
def test_every_background_kind_renders_and_differs_from_the_object(background):
    image, mask = render([250, 250, 0], "box", size=64, background=background, seed=1)
    outside = image[~mask].astype(float)
    assert outside.std(axis=0).max() >= 0.0
    assert np.abs(outside.mean(axis=0) - image[mask].mean(axis=0)).max() > 1.0


@pytest.mark.parametrize("shape", SHAPES)
def test_masked_pixels_average_close_to_the_albedo(shape):
    """Exposure on the object keeps its mean color within a few ΔE00 of the albedo."""
    rgb = np.array([70, 110, 180], dtype=np.uint8)
    image, mask = render(rgb, shape, size=128, seed=2)
    mean_lab = srgb_to_lab(image[mask]).mean(axis=0)
    assert float(delta_e_2000(mean_lab, srgb_to_lab(rgb))) < 6.0


def test_mask_excludes_the_background_exactly():
    """A black sphere on a lighter plain background: masked pixels are dark but for the small
    highlight, and no pixel outside the mask is black."""
    image, mask = render([0, 0, 0], "sphere", size=64, background="plain", seed=4)
    assert np.percentile(image[mask], 75) < 20
    assert image[~mask].astype(int).sum(axis=-1).min() > 30


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rgb": [1, 2], "shape": "sphere"}, "`rgb`"),
        ({"rgb": [300, 0, 0], "shape": "sphere"}, "`rgb`"),
        ({"rgb": [1.5, 0, 0], "shape": "sphere"}, "`rgb`"),
        ({"rgb": [0, 0, 0], "shape": "pyramid"}, "`shape`"),
        ({"rgb": [0, 0, 0], "shape": "sphere", "size": 8}, "`size`"),
        ({"rgb": [0, 0, 0], "shape": "sphere", "background": "sky"}, "`background`"),
    ],
)
def test_bad_input_raises_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        render(**kwargs)
