"""Object masks minus negative labels, and the detection presence check (tiny models, CPU)."""

import numpy as np
import pytest
from segment_anything import SamPredictor

from evaluation.explicit.presence import PRESENCE_THRESHOLD, Presence, presence_from_detection
from evaluation.models import segmentation
from evaluation.models.segmentation import (
    NEGATIVE_MAX_IOU,
    SegmentAnythingSam,
    Segmentation,
    detect,
    load_detector,
    load_sam,
    segment,
    segment_object,
)
from evaluation.models.tiny import build_tiny_grounding_dino, build_tiny_sam, tiny_segment_anything_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class BoxSam:
    """A SAM stand-in whose mask is exactly the box: makes the subtraction checkable."""

    def mask_from_box(self, image, box):
        mask = np.zeros(image.shape[:2], dtype=bool)
        x0, y0, x1, y1 = (int(round(v)) for v in box)
        mask[y0:y1, x0:x1] = True
        return mask


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    return load_detector(build_tiny_grounding_dino(tmp_path_factory.mktemp("gdino") / "g"), device="cpu")


@pytest.fixture
def image():
    return np.random.default_rng(1).integers(0, 256, size=(48, 64, 3), dtype=np.uint8)


def test_negative_parts_are_subtracted_where_they_overlap_the_object(detector, image):
    sam = BoxSam()
    plain = segment(image, "car", 0.0, 0.0, detector=detector, sam=sam)
    result = segment_object(image, "car", ["window", "wheel"], 0.0, 0.0, detector=detector, sam=sam)
    boxes, _ = detect(image, "window. wheel", detector, 0.0, 0.0)
    expected = plain.mask.copy()
    kept = 0
    for box in boxes:
        x0, y0, x1, y1 = plain.box
        if not (
            box[2] > box[0]
            and box[3] > box[1]
            and box[0] < x1
            and box[2] > x0
            and box[1] < y1
            and box[3] > y0
        ):
            continue
        if kept == segmentation.MAX_NEGATIVE_BOXES:
            break
        kept += 1
        part = sam.mask_from_box(image, box)
        if (part & plain.mask).sum() / (part | plain.mask).sum() < NEGATIVE_MAX_IOU:
            expected &= ~part
    assert kept > 0
    np.testing.assert_array_equal(result.mask, expected)
    assert (result.box, result.score) == (plain.box, plain.score)
    assert result.status == ("ok" if expected.any() else "empty_mask")


def test_parts_inside_across_outside_and_equal_to_the_object(detector, image, monkeypatch):
    """Object box x 10-40, y 10-30. Parts: a window inside (removed), a wheel across the lower
    edge (its overlap removed), a mirror outside (ignored: no overlap), the chassis equal to the
    object (IoU 1: the object found again, kept)."""
    boxes = {
        "car": [10.0, 10.0, 40.0, 30.0],
        "vehicle chassis": [10.0, 10.0, 40.0, 30.0],
        "window": [15.0, 12.0, 20.0, 16.0],
        "wheel": [30.0, 25.0, 36.0, 40.0],
        "mirror": [50.0, 0.0, 60.0, 8.0],
    }
    captions = []

    def fake_detect(image, noun, detector, box_threshold, text_threshold):
        captions.append(noun)
        found = np.array([boxes[label] for label in noun.split(". ")])
        return found, np.full(len(found), 0.9)

    monkeypatch.setattr(segmentation, "detect", fake_detect)
    result = segment_object(
        image,
        "car",
        ["window", "wheel", "mirror", "vehicle chassis"],
        0.3,
        0.2,
        detector=detector,
        sam=BoxSam(),
    )
    expected = np.zeros((48, 64), dtype=bool)
    expected[10:30, 10:40] = True
    expected[12:16, 15:20] = False
    expected[25:30, 30:36] = False
    np.testing.assert_array_equal(result.mask, expected)
    assert (result.status, result.box, result.score) == ("ok", (10.0, 10.0, 40.0, 30.0), 0.9)
    # the tiny detector reads 32 character tokens: the four labels take two captions
    assert captions == ["car", "window. wheel. mirror", "vehicle chassis"]


def test_without_negatives_or_detection_segment_object_is_segment(detector, image):
    sam = BoxSam()
    bare = segment_object(image, "car", (), 0.0, 0.0, detector=detector, sam=sam)
    plain = segment(image, "car", 0.0, 0.0, detector=detector, sam=sam)
    assert (bare.status, bare.box, bare.score) == (plain.status, plain.box, plain.score)
    np.testing.assert_array_equal(bare.mask, plain.mask)
    missing = segment_object(image, "car", ["wheel"], 1.0, 1.0, detector=detector, sam=sam)
    assert missing == Segmentation(status="no_detection", mask=None, box=None, score=None)


@pytest.fixture(scope="module")
def sams(tmp_path_factory):
    transformers_sam = load_sam(build_tiny_sam(tmp_path_factory.mktemp("sam") / "s"), device="cpu")
    return {
        "transformers": transformers_sam,
        "segment-anything": SegmentAnythingSam(SamPredictor(tiny_segment_anything_model())),
    }


@pytest.mark.parametrize("backend", ["transformers", "segment-anything"])
def test_masks_from_boxes_is_mask_from_box_for_each_box(detector, image, sams, backend):
    sam = sams[backend]
    boxes, _ = detect(image, "window. wheel", detector, 0.0, 0.0)
    masks = sam.masks_from_boxes(image, boxes[:5])
    assert masks.shape == (5, 48, 64) and masks.dtype == bool
    for box, mask in zip(boxes[:5], masks):
        np.testing.assert_array_equal(mask, sam.mask_from_box(image, tuple(float(v) for v in box)))


def test_segment_object_with_the_tiny_sam_keeps_a_subset_of_the_plain_mask(detector, image, sams):
    sam = sams["transformers"]
    plain = segment(image, "car", 0.0, 0.0, detector=detector, sam=sam)
    result = segment_object(image, "car", ["window", "wheel", "tyre"], 0.0, 0.0, detector=detector, sam=sam)
    assert result.mask.shape == (48, 64) and not (result.mask & ~plain.mask).any()


@pytest.mark.parametrize("negatives", ["window.wheel", ["window", " "], [3]])
def test_bad_negatives_raise_value_error(detector, image, negatives):
    with pytest.raises(ValueError, match="`negatives`"):
        segment_object(image, "car", negatives, detector=detector, sam=BoxSam())


def test_presence_from_detection_thresholds_the_box_score():
    found = Segmentation(status="ok", mask=np.ones((2, 2), bool), box=(0.0, 0.0, 1.0, 1.0), score=0.5)
    weak = Segmentation(status="ok", mask=np.ones((2, 2), bool), box=(0.0, 0.0, 1.0, 1.0), score=0.2)
    none = Segmentation(status="no_detection", mask=None, box=None, score=None)
    assert PRESENCE_THRESHOLD == 0.35
    assert presence_from_detection(found) == Presence(present=True, score=0.5)
    assert presence_from_detection(weak) == Presence(present=False, score=0.2)
    assert presence_from_detection(weak, threshold=0.2) == Presence(present=True, score=0.2)
    assert presence_from_detection(none) == Presence(present=False)
    with pytest.raises(ValueError, match="`threshold`"):
        presence_from_detection(found, threshold=1.5)
