import io

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

from evaluation.pipeline.overlay import MASK_COLOR, item_overlays, overlay_mask
from tests.research_data import centre_mask, solid


def test_overlay_tints_the_mask_outlines_it_and_leaves_the_rest():
    image, mask = solid((100, 120, 140), 8), centre_mask(8, 2)
    out = overlay_mask(image, mask, 0.5)
    assert out.dtype == np.uint8 and out.shape == image.shape
    assert_array_equal(out[~mask], image[~mask])
    assert_array_equal(out[2, 2], MASK_COLOR)
    assert_array_equal(out[3, 3], np.rint(0.5 * np.array([100, 120, 140]) + 0.5 * np.array(MASK_COLOR)))
    plain = overlay_mask(image, mask, 0.0, outline=False)
    assert_array_equal(plain, image)
    assert_array_equal(overlay_mask(image, np.zeros((8, 8), bool)), image)


@pytest.mark.parametrize(
    "image, mask, alpha, message",
    [
        (np.zeros((8, 8, 3), np.float32), np.ones((8, 8), bool), 0.5, "`image` must be an"),
        (np.zeros((8, 8, 3), np.uint8), np.ones((8, 7), bool), 0.5, "`mask` must be a bool array of shape"),
        (np.zeros((8, 8, 3), np.uint8), np.ones((8, 8), np.uint8), 0.5, "`mask` must be a bool array"),
        (np.zeros((8, 8, 3), np.uint8), np.ones((8, 8), bool), 1.5, r"`alpha` must be in \[0, 1\]"),
    ],
)
def test_overlay_rejects_bad_inputs(image, mask, alpha, message):
    with pytest.raises(ValueError, match=message):
        overlay_mask(image, mask, alpha)


def test_item_overlays_read_stored_images_and_masks(tmp_path):
    for name, array in (("i.png", solid((10, 200, 10), 8)), ("m.png", centre_mask(8, 2))):
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        (tmp_path / name).write_bytes(buffer.getvalue())
    item = {
        "image_path": "i.png",
        "mask_path": "m.png",
        "model": "sdxl",
        "style": "natural",
        "cfg": 7.5,
        "seed": 3,
    }
    ((overlay, caption),) = item_overlays(tmp_path, [item])
    assert caption == "sdxl · natural · cfg 7.5 · seed 3"
    assert_array_equal(overlay, overlay_mask(solid((10, 200, 10), 8), centre_mask(8, 2)))
