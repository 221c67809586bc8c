"""The CPU-bound half of a designer's submission: a canvas value to a prepared coloring.

`prepare_canvas` reads top to bottom: the sketch's pixels, the canvas PNG checked from
its header, the decoded color layer, the painted mask and the paint check
(`check_painted_area`), the stored image (`coloring_image`), then
`annotation.coloring.store.prepare_coloring` (the distribution and the two PNGs). It works
on plain data and writes nothing, so `annotation.coloring.pool` runs it in worker
processes; `annotation.coloring.tasks.submit_canvas` does the database half.

Stored images
-------------
`coloring_image` stores the paint colors exactly: each painted pixel holds its color as
painted (not darkened by the anti-aliased line under it, as the canvas shows it), every
other pixel the sketch's grey. The extraction pipeline therefore measures the exact
paint, both in `annotation.coloring.store.store_coloring` and when P_H(x|c) is recomputed
from the stored files; the line art stays visible for people looking at it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math

import numpy as np

from annotation.coloring.fill import RawCanvas, border_region, decode_canvas, line_mask, painted_mask
from annotation.coloring.store import PreparedColoring, prepare_coloring
from annotation.errors import InvalidInput, shown
from annotation.files import check_rgba_png
from annotation.sketches.library import sketch_file_pixels
from storage.shown import counted

MIN_PAINTED_FRACTION = 0.005
"""Default share of a sketch's non-line pixels that must be painted before a submit."""
BACKGROUND_MIN_SHARE = 0.25
"""The area around a drawing counts as its background from this share of its non-line pixels:
below it, the drawing fills the sketch (a scene whose edge regions are part of the concept)."""
BACKGROUND_PAINTED = 0.9
"""From this share of it painted, a background is told to the designer (`painted_background`)."""


def coloring_image(
    color_layer: np.ndarray, sketch: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The image and mask a coloring is stored as (see the module docstring).

    Parameters
    ----------
    color_layer : ndarray, shape (H, W, 4), uint8
        The canvas's color layer (`annotation.coloring.fill`).
    sketch : ndarray, shape (H, W), uint8
        The line art, luminance [0, 255].
    mask : ndarray, shape (H, W), bool, optional
        `annotation.coloring.fill.painted_mask` of the two, when the caller has it.

    Returns
    -------
    image : ndarray, shape (H, W, 3), uint8
        sRGB [0, 255]: the exact paint color on painted pixels, the sketch elsewhere.
    mask : ndarray, shape (H, W), bool
        `annotation.coloring.fill.painted_mask`: painted and not line art.
    """
    if mask is None:
        mask = painted_mask(color_layer, sketch)
    lines = np.asarray(sketch, dtype=np.uint8)[..., None]
    return np.where(mask[..., None], color_layer[..., :3], lines), mask


def painted_share(color_layer: np.ndarray, sketch: np.ndarray) -> tuple[int, int]:
    """``(painted, colorable)`` pixels: painted non-line pixels, and all non-line pixels."""
    return int(painted_mask(color_layer, sketch).sum()), int((~line_mask(sketch)).sum())


def painted_background(mask: np.ndarray, sketch: np.ndarray) -> float:
    """The share of the area around the drawing that is painted, when that area is large.

    The paper's designers left "unrelated areas uncolored"; a fill of the white around the
    drawing, or one that ran out through a gap in the outline, paints it all.

    Parameters
    ----------
    mask : ndarray, shape (H, W), bool
        `annotation.coloring.fill.painted_mask`.
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8

    Returns
    -------
    float
        In [0, 1]: painted pixels of `annotation.coloring.fill.border_region` over its size;
        0.0 when that region is under `BACKGROUND_MIN_SHARE` of the non-line pixels.
    """
    around = border_region(sketch)
    size, colorable = int(around.sum()), int((~line_mask(sketch)).sum())
    if size == 0 or size < BACKGROUND_MIN_SHARE * colorable:
        return 0.0
    return int((mask & around).sum()) / size


def check_painted_area(
    color_layer: np.ndarray,
    sketch: np.ndarray,
    min_fraction: float = MIN_PAINTED_FRACTION,
    *,
    mask: np.ndarray | None = None,
) -> None:
    """Raise unless at least `min_fraction` of the sketch's non-line pixels are painted.

    Parameters
    ----------
    mask : ndarray, shape (H, W), bool, optional
        `annotation.coloring.fill.painted_mask` of the layer and sketch, when the caller
        has it.

    Raises
    ------
    InvalidInput
        Saying how much is painted and how much is needed.
    """
    if not isinstance(min_fraction, (int, float)) or not 0 < min_fraction <= 1:
        raise InvalidInput(f"`min_fraction` must be in (0, 1], got {shown(min_fraction)}")
    if mask is None:
        mask = painted_mask(color_layer, sketch)
    painted, colorable = int(mask.sum()), int((~line_mask(sketch)).sum())
    needed = math.ceil(min_fraction * colorable)
    if painted == 0:
        raise InvalidInput(
            f"Nothing is colored yet: fill at least {min_fraction:.1%} of the "
            f"drawing (about {needed:,} pixels) with the concept's colors, "
            "then submit."
        )
    if painted < needed:
        raise InvalidInput(
            f"Only {painted:,} pixels ({painted / colorable:.2%} of the drawing) "
            f"are colored; at least {min_fraction:.1%} ({needed:,} pixels) is "
            "needed. Fill the regions that belong to the concept."
        )


def prepare_canvas(raw: RawCanvas, sketch_file: str, min_painted_fraction: float) -> PreparedColoring:
    """Decode a canvas value for a sketch, check its paint and prepare the coloring.

    The CPU-bound half of `submit_canvas`, on plain data so that a process pool can run
    it (`annotation.coloring.pool`).

    Parameters
    ----------
    raw : RawCanvas
        From `annotation.coloring.fill.read_canvas`.
    sketch_file : str
        Absolute path of the sketch PNG (content-addressed, so it is read once per process).
    min_painted_fraction : float
        See `check_painted_area`.

    Raises
    ------
    InvalidInput
        A layer that is not a single-frame 8-bit RGBA PNG of the sketch's size, or is
        undecodable, has half-transparent pixels, or too little paint.

    Notes
    -----
    The result's ``background`` is `painted_background`: told, not refused, since a scene's
    edge regions may belong to the concept.
    """
    lines = sketch_file_pixels(sketch_file)
    _check_canvas_png(raw, lines.shape)
    try:
        value = decode_canvas(raw, lines.shape)
    except ValueError as error:
        raise InvalidInput(f"{error}; reload the page") from None
    _check_opaque(value.color_layer)
    mask = painted_mask(value.color_layer, lines)
    check_painted_area(value.color_layer, lines, min_painted_fraction, mask=mask)
    background = painted_background(mask, lines)
    image, mask = coloring_image(value.color_layer, lines, mask)
    return dataclasses.replace(prepare_coloring(image, mask), background=background)


def _check_opaque(color_layer: np.ndarray) -> None:
    # The canvas paints a pixel whole (alpha 255) or not at all (0); a half-transparent one,
    # sent past the page, was stored as its color at full weight (outside probe 192).
    alpha = color_layer[..., 3]
    if partial := int(np.count_nonzero((alpha > 0) & (alpha < 255))):
        raise InvalidInput(
            f"`color_layer` has {counted(partial, 'half-transparent pixel')} (alpha 1 to 254); the coloring "
            "canvas paints a pixel fully or not at all, so nothing was saved: reload the page"
        )


def _check_canvas_png(raw: RawCanvas, shape: tuple[int, ...]) -> None:
    # The decoder converts any PNG to RGBA, so a 16-bit, palette or animated PNG would be
    # stored as a coloring; only what the page's canvas sends passes (issue 25).
    head, _, body = raw.color_layer.partition(",")
    if head != "data:image/png;base64":
        return  # nothing painted (""), or a prefix `decode_canvas` refuses by name
    try:
        png = base64.b64decode(body, validate=True)
    except binascii.Error:
        return  # `decode_canvas` refuses it by name
    check_rgba_png(png, shape[1], shape[0], name="canvas")
