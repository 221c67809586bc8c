"""Concept masks: GroundingDINO finds the object noun's box, SAM turns the box into a mask.

Both models run through transformers (``AutoModelForZeroShotObjectDetection`` and
``SamModel``). The original ``segment-anything`` package is a second SAM backend, for the
published ``.pth`` checkpoints. Models are loaded once by the caller and passed in.

The detector is prompted with the base concept's noun ("apple" for "rotten apple"):
modifiers describe a state or mood, not a different object to find.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from storage.shown import shown, shown_path

DEFAULT_DETECTOR = "IDEA-Research/grounding-dino-base"
DEFAULT_SAM = "facebook/sam-vit-huge"
#: GroundingDINO's published demo thresholds (box score, and text-token score for the label).
#: GenColor used 0.4 / 0.4; both are options of `segment` and of the CLI.
BOX_THRESHOLD = 0.35
TEXT_THRESHOLD = 0.25
SEGMENT_ANYTHING_TYPES = ("vit_h", "vit_l", "vit_b")


class SamBackend(Protocol):
    """Anything that turns one box into one mask."""

    def mask_from_box(self, image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
        """(H, W, 3) uint8 image and (x0, y0, x1, y1) pixel box -> (H, W) bool mask."""


@dataclass(frozen=True)
class Detector:
    """A loaded GroundingDINO: model (eval mode, on `device`) and its processor."""

    model: Any
    processor: Any
    device: str


@dataclass(frozen=True)
class TransformersSam:
    """SAM through transformers (``SamModel`` + ``SamProcessor``)."""

    model: Any
    processor: Any
    device: str

    def mask_from_box(self, image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
        """Single-mask SAM prediction for one box; returns an (H, W) bool mask."""
        import torch

        inputs = self.processor(images=image, input_boxes=[[list(map(float, box))]], return_tensors="pt")
        dtype = next(self.model.parameters()).dtype
        pixel_values = inputs["pixel_values"].to(self.device, dtype)
        with torch.inference_mode():
            out = self.model(
                pixel_values=pixel_values,
                input_boxes=inputs["input_boxes"].to(self.device, dtype),
                multimask_output=False,
            )
        masks = self.processor.image_processor.post_process_masks(
            out.pred_masks.float().cpu(), inputs["original_sizes"], inputs["reshaped_input_sizes"]
        )
        return masks[0][0, 0].numpy().astype(bool)

    def masks_from_boxes(self, image: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """Single-mask SAM predictions for K boxes in one forward pass (the image is encoded
        once): (H, W, 3) uint8 and (K, 4) pixel boxes -> (K, H, W) bool, K >= 1."""
        import torch

        inputs = self.processor(
            images=image, input_boxes=[[list(map(float, b)) for b in boxes]], return_tensors="pt"
        )
        dtype = next(self.model.parameters()).dtype
        with torch.inference_mode():
            out = self.model(
                pixel_values=inputs["pixel_values"].to(self.device, dtype),
                input_boxes=inputs["input_boxes"].to(self.device, dtype),
                multimask_output=False,
            )
        masks = self.processor.image_processor.post_process_masks(
            out.pred_masks.float().cpu(), inputs["original_sizes"], inputs["reshaped_input_sizes"]
        )
        return masks[0][:, 0].numpy().astype(bool)


@dataclass(frozen=True)
class SegmentAnythingSam:
    """SAM through the ``segment-anything`` package's ``SamPredictor``."""

    predictor: Any

    def mask_from_box(self, image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
        """Single-mask SAM prediction for one box; returns an (H, W) bool mask."""
        self.predictor.set_image(np.ascontiguousarray(image), image_format="RGB")
        masks, _, _ = self.predictor.predict(box=np.asarray(box, dtype=np.float32), multimask_output=False)
        return masks[0].astype(bool)

    def masks_from_boxes(self, image: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """Single-mask predictions for K boxes, the image embedded once; (K, H, W) bool."""
        self.predictor.set_image(np.ascontiguousarray(image), image_format="RGB")
        return np.stack(
            [
                self.predictor.predict(box=np.asarray(box, dtype=np.float32), multimask_output=False)[0][0]
                for box in boxes
            ]
        ).astype(bool)


@dataclass(frozen=True)
class Segmentation:
    """The mask of one image.

    Attributes
    ----------
    status : str
        ``"ok"``; ``"no_detection"`` (no box above the thresholds); or ``"empty_mask"``
        (SAM kept no pixel of the box). Only ``"ok"`` images enter a distribution.
    mask : ndarray or None
        (H, W) bool, True on the concept; None without a detection.
    box : tuple of float or None
        (x0, y0, x1, y1) in pixels of the best box.
    score : float or None
        The best box's detection score in [0, 1].
    """

    status: str
    mask: np.ndarray | None
    box: tuple[float, float, float, float] | None
    score: float | None

    @property
    def detected(self) -> bool:
        """Whether the detector found a box."""
        return self.status != "no_detection"


def load_detector(source: str | Path = DEFAULT_DETECTOR, *, device: str, dtype: Any = None) -> Detector:
    """Load GroundingDINO (hub id or local directory) with ``AutoModelForZeroShotObjectDetection``.

    `dtype` defaults to float32: detection is cheap beside generation, and its deformable
    attention is most robust in full precision.
    """
    import torch
    from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

    dtype = torch.float32 if dtype is None else dtype
    model = AutoModelForZeroShotObjectDetection.from_pretrained(str(source), dtype=dtype).to(device).eval()
    return Detector(model=model, processor=AutoProcessor.from_pretrained(str(source)), device=str(device))


def load_sam(source: str | Path = DEFAULT_SAM, *, device: str, dtype: Any = None) -> TransformersSam:
    """Load SAM (hub id or local directory) with transformers' ``SamModel`` and ``SamProcessor``."""
    import torch
    from transformers import SamModel, SamProcessor

    dtype = torch.float32 if dtype is None else dtype
    model = SamModel.from_pretrained(str(source), dtype=dtype).to(device).eval()
    return TransformersSam(
        model=model, processor=SamProcessor.from_pretrained(str(source)), device=str(device)
    )


def load_segment_anything(
    checkpoint: str | Path, model_type: str = "vit_h", *, device: str
) -> SegmentAnythingSam:
    """Load an original SAM ``.pth`` checkpoint through the ``segment-anything`` package.

    Parameters
    ----------
    checkpoint : str or Path
        E.g. ``sam_vit_h_4b8939.pth``.
    model_type : str
        One of `SEGMENT_ANYTHING_TYPES`, matching the checkpoint.
    """
    if model_type not in SEGMENT_ANYTHING_TYPES:
        raise ValueError(f"`model_type` must be one of {SEGMENT_ANYTHING_TYPES}, got {shown(model_type)}")
    if not Path(checkpoint).is_file():
        raise ValueError(f"`checkpoint` must be an existing .pth file, got {shown_path(checkpoint)}")
    from segment_anything import SamPredictor, sam_model_registry

    model = sam_model_registry[model_type](checkpoint=str(checkpoint)).to(device).eval()
    return SegmentAnythingSam(predictor=SamPredictor(model))


def detect(
    image: np.ndarray,
    noun: str,
    detector: Detector,
    box_threshold: float = BOX_THRESHOLD,
    text_threshold: float = TEXT_THRESHOLD,
) -> tuple[np.ndarray, np.ndarray]:
    """All GroundingDINO boxes for `noun` above the thresholds.

    Returns
    -------
    boxes : ndarray, shape (K, 4)
        (x0, y0, x1, y1) in pixels, clipped to the image, sorted by descending score.
    scores : ndarray, shape (K,)
        Detection scores in [0, 1].
    """
    import torch

    height, width = image.shape[:2]
    # GroundingDINO expects lower-case phrases, each ended by a period.
    inputs = detector.processor(images=image, text=f"{noun.lower().strip()}.", return_tensors="pt").to(
        detector.device
    )
    inputs["pixel_values"] = inputs["pixel_values"].to(next(detector.model.parameters()).dtype)
    with torch.inference_mode():
        outputs = detector.model(**inputs)
    result = detector.processor.post_process_grounded_object_detection(
        outputs,
        inputs["input_ids"],
        threshold=box_threshold,
        text_threshold=text_threshold,
        target_sizes=[(height, width)],
    )[0]
    scores = result["scores"].float().cpu().numpy()
    boxes = result["boxes"].float().cpu().numpy().reshape(-1, 4)
    boxes = np.clip(boxes, 0, [width, height, width, height])
    order = np.argsort(-scores, kind="stable")
    return boxes[order], scores[order]


def _check_inputs(image: Any, noun: Any, box_threshold: float, text_threshold: float) -> None:
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        got = f"{type(image).__name__} {getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}"
        raise ValueError(f"`image` must be an (H, W, 3) uint8 array, got {got}")
    if not isinstance(noun, str) or not noun.strip():
        raise ValueError(f"`noun` must be a non-empty string, got {shown(noun)}")
    for name, value in (("box_threshold", box_threshold), ("text_threshold", text_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"`{name}` must be in [0, 1], got {value}")


def segment(
    image: np.ndarray,
    noun: str,
    box_threshold: float = BOX_THRESHOLD,
    text_threshold: float = TEXT_THRESHOLD,
    *,
    detector: Detector,
    sam: SamBackend,
) -> Segmentation:
    """Mask the object `noun` in `image`: best GroundingDINO box, then SAM.

    Parameters
    ----------
    image : ndarray, shape (H, W, 3)
        sRGB uint8 [0, 255].
    noun : str
        The base concept ("apple"), not the modified concept.
    box_threshold, text_threshold : float
        In [0, 1]; a box is kept if its score exceeds `box_threshold`. Setting both to 0
        keeps every query (useful with random-weight test models).
    detector : Detector
        From `load_detector`.
    sam : SamBackend
        `TransformersSam` (from `load_sam`) or `SegmentAnythingSam`.

    Returns
    -------
    Segmentation
        ``status="no_detection"`` when no box passes; otherwise the mask of the
        highest-scoring box (one instance: the paper takes "the bounding box").
    """
    # 1. Check inputs.
    _check_inputs(image, noun, box_threshold, text_threshold)

    # 2. Detect boxes for the noun.
    boxes, scores = detect(image, noun, detector, box_threshold, text_threshold)
    boxes_ok = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    if not boxes_ok.any():
        return Segmentation(status="no_detection", mask=None, box=None, score=None)

    # 3. Keep the best box with a positive area.
    best = int(np.flatnonzero(boxes_ok)[0])
    box = tuple(float(v) for v in boxes[best])

    # 4. SAM: box -> mask.
    mask = sam.mask_from_box(image, box)
    status = "ok" if mask.any() else "empty_mask"
    return Segmentation(status=status, mask=mask, box=box, score=float(scores[best]))


#: Negative labels: at most this many of their boxes (the best-scoring that overlap the
#: object's box) are masked and subtracted per object.
MAX_NEGATIVE_BOXES = 8
#: A negative label's mask is subtracted only when its IoU with the object's mask is below
#: this: a "part" covering most of the object is the object found again, not a part of it.
NEGATIVE_MAX_IOU = 0.5


def _check_negatives(negatives: Any) -> tuple[str, ...]:
    if isinstance(negatives, str) or not all(isinstance(n, str) and n.strip() for n in negatives):
        raise ValueError(f"`negatives` must be a sequence of non-empty captions, got {shown(negatives)}")
    return tuple(n.lower().strip() for n in negatives)


def _caption_chunks(negatives: tuple[str, ...], detector: Detector) -> list[str]:
    """Captions of consecutive negative labels, each within the detector's text length.

    GroundingDINO reads at most ``config.max_text_len`` tokens (256 for the published models):
    longer captions are split; a label too long on its own is left out.
    """
    limit = getattr(detector.model.config, "max_text_len", 256)

    def fits(labels: list[str]) -> bool:
        return len(detector.processor.tokenizer(". ".join(labels) + ".")["input_ids"]) <= limit

    chunks: list[list[str]] = []
    for label in negatives:
        if chunks and fits([*chunks[-1], label]):
            chunks[-1].append(label)
        elif fits([label]):
            chunks.append([label])
    return [". ".join(chunk) for chunk in chunks]


def _overlapping(boxes: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """Which of `boxes` (K, 4) have a positive area and overlap `box`."""
    x0, y0, x1, y1 = box
    positive = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    overlap = (boxes[:, 0] < x1) & (boxes[:, 2] > x0) & (boxes[:, 1] < y1) & (boxes[:, 3] > y0)
    return positive & overlap


def segment_object(
    image: np.ndarray,
    noun: str,
    negatives: tuple[str, ...] | list[str] = (),
    box_threshold: float = BOX_THRESHOLD,
    text_threshold: float = TEXT_THRESHOLD,
    *,
    detector: Detector,
    sam: SamBackend,
) -> Segmentation:
    """Mask the object `noun`, minus the parts named by its negative labels (GenColorBench §3.4).

    Parameters
    ----------
    image : ndarray, shape (H, W, 3)
        sRGB uint8 [0, 255].
    noun : str
        The object ("car").
    negatives : sequence of str
        Captions of its parts that do not carry its color ("window", "wheel", ...; see
        `evaluation.explicit.objects`). Empty: the plain `segment`.
    box_threshold, text_threshold : float
        In [0, 1], for the object and its negative labels alike.
    detector, sam
        As for `segment`.

    Returns
    -------
    Segmentation
        The object's `segment` result with the negative parts removed from its mask:
        GroundingDINO is asked for the negative captions (in as few calls as its text length
        allows: 256 tokens for the published models); each of the best
        `MAX_NEGATIVE_BOXES` boxes overlapping the object's box is masked by SAM, and its
        mask is subtracted where it overlaps the object's unless its IoU with the object's
        mask reaches `NEGATIVE_MAX_IOU`. ``"empty_mask"`` when nothing is left.

    Raises
    ------
    ValueError
        For the inputs `segment` rejects, or `negatives` not a sequence of non-empty strings.
    """
    # 1. Check inputs; mask the object.
    negatives = _check_negatives(negatives)
    result = segment(image, noun, box_threshold, text_threshold, detector=detector, sam=sam)
    if result.status != "ok" or not negatives:
        return result

    # 2. Boxes of the negative labels (one detection call per caption that fits the detector's
    #    text length), best first, those overlapping the object.
    found = [
        detect(image, caption, detector, box_threshold, text_threshold)
        for caption in _caption_chunks(negatives, detector)
    ]
    boxes = np.concatenate([b for b, _ in found]) if found else np.zeros((0, 4))
    scores = np.concatenate([s for _, s in found]) if found else np.zeros(0)
    boxes = boxes[np.argsort(-scores, kind="stable")]
    boxes = boxes[_overlapping(boxes, result.box)][:MAX_NEGATIVE_BOXES]

    # 3. Subtract each part's mask unless it is the object again (one SAM pass for all parts
    #    where the backend has `masks_from_boxes`).
    if not len(boxes):
        return result
    mask = result.mask.copy()
    if hasattr(sam, "masks_from_boxes"):
        parts = sam.masks_from_boxes(image, boxes)
    else:
        parts = [sam.mask_from_box(image, tuple(float(v) for v in box)) for box in boxes]
    for part in parts:
        union = np.logical_or(part, result.mask).sum()
        if union and np.logical_and(part, result.mask).sum() / union < NEGATIVE_MAX_IOU:
            mask &= ~part
    status = "ok" if mask.any() else "empty_mask"
    return Segmentation(status=status, mask=mask, box=result.box, score=result.score)
