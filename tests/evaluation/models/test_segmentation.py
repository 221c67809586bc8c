"""Segmentation: tiny random GroundingDINO and SAM saved to disk and loaded back (CPU, offline)."""

import numpy as np
import pytest
import transformers
from segment_anything import SamPredictor

from evaluation.models.segmentation import (
    SegmentAnythingSam,
    Segmentation,
    TransformersSam,
    detect,
    load_detector,
    load_sam,
    load_segment_anything,
    segment,
)
from evaluation.models.tiny import build_tiny_grounding_dino, build_tiny_sam, tiny_segment_anything_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    detector = load_detector(build_tiny_grounding_dino(root / "gdino"), device="cpu")
    sam = load_sam(build_tiny_sam(root / "sam"), device="cpu")
    return detector, sam


@pytest.fixture
def image():
    return np.random.default_rng(0).integers(0, 256, size=(48, 80, 3), dtype=np.uint8)


def test_tiny_models_load_back_through_the_auto_classes(models):
    detector, sam = models
    assert isinstance(detector.model, transformers.GroundingDinoForObjectDetection)
    assert isinstance(detector.processor, transformers.GroundingDinoProcessor)
    assert detector.processor.tokenizer.tokenize("apple.") == ["a", "##p", "##p", "##l", "##e", "."]
    assert isinstance(sam, TransformersSam) and isinstance(sam.model, transformers.SamModel)


def test_zero_thresholds_give_a_mask_of_the_image_size_from_the_best_box(models, image):
    detector, sam = models
    boxes, scores = detect(image, "apple", detector, 0.0, 0.0)
    result = segment(image, "apple", 0.0, 0.0, detector=detector, sam=sam)
    assert result.status == "ok" and result.detected
    assert result.mask.shape == (48, 80) and result.mask.dtype == bool and result.mask.any()
    assert scores.tolist() == sorted(scores.tolist(), reverse=True)
    np.testing.assert_allclose(result.box, boxes[0], rtol=1e-6)
    assert result.score == pytest.approx(float(scores[0]))
    x0, y0, x1, y1 = result.box
    assert 0 <= x0 < x1 <= 80 and 0 <= y0 < y1 <= 48


def test_the_detector_is_case_insensitive_about_the_noun(models, image):
    detector, sam = models
    lower = segment(image, "apple", 0.0, 0.0, detector=detector, sam=sam)
    upper = segment(image, "Apple", 0.0, 0.0, detector=detector, sam=sam)
    np.testing.assert_array_equal(lower.mask, upper.mask)


def test_no_box_above_the_threshold_is_reported_as_no_detection(models, image):
    detector, sam = models
    result = segment(image, "apple", 1.0, 1.0, detector=detector, sam=sam)
    assert result == Segmentation(status="no_detection", mask=None, box=None, score=None)
    assert not result.detected


def test_segment_anything_backend_masks_the_same_box(models, image):
    detector, _ = models
    backend = SegmentAnythingSam(SamPredictor(tiny_segment_anything_model()))
    result = segment(image, "cabin", 0.0, 0.0, detector=detector, sam=backend)
    assert result.detected and result.mask.shape == (48, 80) and result.mask.dtype == bool
    direct = backend.mask_from_box(image, result.box)
    np.testing.assert_array_equal(result.mask, direct)


def test_segment_rejects_bad_inputs_with_named_arguments(models, image):
    detector, sam = models
    cases = [
        (
            dict(image=image[..., 0], noun="apple"),
            r"`image` must be an \(H, W, 3\) uint8 array, got ndarray \(48, 80\) uint8",
        ),
        (dict(image=image.astype(float), noun="apple"), "`image` must be an"),
        (dict(image=image, noun=" "), "`noun` must be a non-empty string, got ' '"),
        (dict(image=image, noun="apple", box_threshold=1.5), r"`box_threshold` must be in \[0, 1\], got 1.5"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            segment(**kwargs, detector=detector, sam=sam)


def test_load_segment_anything_checks_type_and_checkpoint(tmp_path):
    with pytest.raises(
        ValueError, match=r"`model_type` must be one of \('vit_h', 'vit_l', 'vit_b'\), got 'vit_x'"
    ):
        load_segment_anything(tmp_path / "sam.pth", "vit_x", device="cpu")
    # However long the folder, the message keeps the file's name (a long path is cut at its start).
    with pytest.raises(
        ValueError, match=r"`checkpoint` must be an existing .pth file, got …'.*/missing.pth' \("
    ):
        load_segment_anything(tmp_path / ("d" * 100) / "missing.pth", device="cpu")
