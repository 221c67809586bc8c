"""Masks drawn over their images, for showing what the segmentation kept."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from scipy import ndimage

from evaluation.pipeline.stages import read_image

#: Tint of the kept pixels (sRGB uint8): magenta, rare in the concepts' own colors.
MASK_COLOR = (255, 0, 255)


def overlay_mask(
    image: np.ndarray,
    mask: np.ndarray,
    alpha: float = 0.35,
    *,
    color: Sequence[int] = MASK_COLOR,
    outline: bool = True,
) -> np.ndarray:
    """Tint the masked pixels of `image` and draw the mask's outline.

    Parameters
    ----------
    image : ndarray, shape (H, W, 3), uint8
        sRGB [0, 255].
    mask : ndarray, shape (H, W), bool
        True on the kept pixels.
    alpha : float
        Weight of `color` over masked pixels, in [0, 1].
    color : sequence of 3 int
        sRGB [0, 255] of the tint and outline.
    outline : bool
        Paint the mask's one-pixel inner border in `color` at full strength.

    Returns
    -------
    ndarray, shape (H, W, 3), uint8
        A new image; pixels outside the mask are unchanged.

    Raises
    ------
    ValueError
        If shapes or dtypes are wrong or `alpha` is outside [0, 1].
    """
    image, mask = np.asarray(image), np.asarray(mask)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"`image` must be an (H, W, 3) uint8 array, got {image.dtype} {image.shape}")
    if mask.shape != image.shape[:2] or mask.dtype != bool:
        raise ValueError(
            f"`mask` must be a bool array of shape {image.shape[:2]}, got {mask.dtype} {mask.shape}"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1], got {alpha}")
    tint = np.asarray(color, dtype=np.float64)
    out = image.astype(np.float64)
    out[mask] = (1.0 - alpha) * out[mask] + alpha * tint
    if outline:
        out[mask & ~ndimage.binary_erosion(mask, border_value=0)] = tint
    return np.rint(out).astype(np.uint8)


def item_overlays(
    data_dir: str | Path, items: Sequence[Mapping], alpha: float = 0.35
) -> list[tuple[np.ndarray, str]]:
    """Overlays of segmented run items, each with a caption.

    Parameters
    ----------
    data_dir : str or Path
        The folder holding the items' ``image_path`` and ``mask_path``.
    items : sequence of Mapping
        ``run_items`` rows with ``image_path``, ``mask_path``, ``model``, ``style``,
        ``cfg`` and ``seed``.
    alpha : float
        See `overlay_mask`.

    Returns
    -------
    list of (ndarray, str)
        (H, W, 3) uint8 overlays and captions ``"model · style · cfg 7.5 · seed 42"``.
    """
    out = []
    for item in items:
        image = read_image(data_dir, item["image_path"])[..., :3]
        mask = read_image(data_dir, item["mask_path"]).astype(bool)
        caption = f"{item['model']} · {item['style']} · cfg {item['cfg']:g} · seed {item['seed']}"
        out.append((overlay_mask(image, mask, alpha), caption))
    return out
