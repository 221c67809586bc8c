"""Coloring a line-art sketch: the server-side twin of the in-browser tool.

A *sketch* is line art, ``(H, W)`` uint8 luminance (or ``(H, W, 3)`` sRGB uint8,
reduced to luminance with `skimage.color.rgb2gray`'s weights), black lines on white.
A *color layer* is ``(H, W, 4)`` sRGB uint8 RGBA of the same size: alpha 255 where the
designer painted, alpha 0 where nothing is painted (its RGB is then ignored). The line
art is never part of the color layer: `composite` draws it on top, unchanged, and
`painted_mask` leaves it out, so line pixels never count as color.

`fill_region` is the algorithm of the bucket tool; ``assets/web/coloring.js`` implements
the same steps on the same luminance, so a fill at one point gives the same pixels in
the browser and here:

1. ``skimage.segmentation.flood`` on the luminance from the seed, 4-connected, taking
   pixels within ``tolerance`` of the seed's luminance and never entering line art;
2. grow that region by ``edge_grow`` 4-connected steps into pixels that are not line art,
   so that the light anti-aliased pixels along a line are colored too and no white halo
   is left between the fill and the line; a step never enters line art, so the region
   never crosses a line.

Fills follow the line art only, never earlier paint: a bucket on a painted region
repaints the whole closed region, as in coloring-book tools.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from PIL import Image
from scipy import ndimage
from skimage.color import rgb2gray
from skimage.segmentation import flood

from storage.files import png_data_problem
from storage.shown import shown

LINE_THRESHOLD = 128
"""Luminance (0-255) below which a sketch pixel is line art: the middle of the range,
so an anti-aliased pixel counts as line when the line covers more than half of it."""

DEFAULT_TOLERANCE = 32
"""Default bucket tolerance: luminance levels (0-255) a pixel may differ from the seed."""

EDGE_GROW = 2
"""Steps (pixels) a fill grows under the anti-aliased fringe of the lines (1-2 px wide
for our rasteriser); see the module docstring."""

MAX_CANVAS_VALUE_CHARS = 32_000_000
MAX_SECONDS_SPENT = 7 * 24 * 3600.0
"""The longest plausible time on one coloring (s); longer is a forged or broken clock."""
"""Largest canvas value accepted (characters): a 1024 x 1024 RGBA PNG of noise is ~5.6 MB."""

_CROSS = ndimage.generate_binary_structure(2, 1)
_PNG_DATA_URL = "data:image/png;base64,"


class FillOnLineError(ValueError):
    """The fill point lies on the line art, so there is no region to fill."""


def sketch_luminance(sketch: np.ndarray) -> np.ndarray:
    """Luminance of a sketch as uint8.

    Parameters
    ----------
    sketch : ndarray, shape (H, W) or (H, W, 3) or (H, W, 4), uint8
        Grayscale or sRGB line art in [0, 255]; an alpha channel is ignored.

    Returns
    -------
    ndarray, shape (H, W), uint8
        Luminance in [0, 255]; the input itself for a 2-D uint8 sketch.

    Raises
    ------
    ValueError
        If `sketch` is not uint8 or has another shape.
    """
    sketch = np.asarray(sketch)
    if sketch.dtype != np.uint8:
        raise ValueError(f"`sketch` must be uint8 in [0, 255], got dtype {sketch.dtype}")
    if sketch.ndim == 2:
        return sketch
    if sketch.ndim == 3 and sketch.shape[2] in (3, 4):
        return np.round(rgb2gray(sketch[..., :3]) * 255).astype(np.uint8)
    raise ValueError(f"`sketch` must have shape (H, W), (H, W, 3) or (H, W, 4), got {sketch.shape}")


def line_mask(sketch: np.ndarray, threshold: int = LINE_THRESHOLD) -> np.ndarray:
    """Which pixels are line art.

    Parameters
    ----------
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8
        The line art (see `sketch_luminance`).
    threshold : int
        Luminance in [1, 255]; pixels darker than this are line art.

    Returns
    -------
    ndarray, shape (H, W), bool
        True on line pixels.
    """
    if not 1 <= threshold <= 255:
        raise ValueError(f"`threshold` must be in [1, 255], got {threshold}")
    return sketch_luminance(sketch) < threshold


def blank_color_layer(shape: tuple[int, ...]) -> np.ndarray:
    """An unpainted color layer, shape ``(H, W, 4)`` uint8 of zeros, for a sketch of `shape`."""
    return np.zeros((shape[0], shape[1], 4), dtype=np.uint8)


def fill_region(
    sketch: np.ndarray,
    point: tuple[int, int],
    tolerance: int = DEFAULT_TOLERANCE,
    edge_grow: int = EDGE_GROW,
    *,
    line_threshold: int = LINE_THRESHOLD,
) -> np.ndarray:
    """The pixels a bucket fill at `point` colors.

    Parameters
    ----------
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8
        The line art.
    point : tuple of int
        ``(x, y)``: pixel column and row of the click, 0-based.
    tolerance : int
        Luminance levels in [0, 255] a pixel may differ from the seed's and still join
        the first flood (step 1 of the module docstring).
    edge_grow : int
        Steps >= 0 the region then grows into non-line pixels (step 2).
    line_threshold : int
        See `line_mask`.

    Returns
    -------
    ndarray, shape (H, W), bool
        The region; it never contains a line pixel.

    Raises
    ------
    FillOnLineError
        If `point` is on the line art.
    ValueError
        If `point` is outside the sketch or a tuning factor is out of range.
    """
    lum = sketch_luminance(sketch)
    x, y = _check_point(point, lum.shape)
    if not 0 <= tolerance <= 255:
        raise ValueError(f"`tolerance` must be in [0, 255], got {tolerance}")
    if edge_grow < 0:
        raise ValueError(f"`edge_grow` must be >= 0, got {edge_grow}")
    lines = line_mask(lum, line_threshold)
    if lines[y, x]:
        raise FillOnLineError(
            f"`point` (x={x}, y={y}) is on the line art (luminance {lum[y, x]} < "
            f"{line_threshold}); nothing was filled: pick a point inside a region"
        )
    # Line pixels get a value no tolerance reaches, so the flood stops at them instead
    # of passing through dark anti-aliasing to the next region.
    work = lum.astype(np.int16)
    work[lines] = -512
    region = flood(work, (y, x), connectivity=1, tolerance=tolerance)
    if edge_grow:
        region = ndimage.binary_dilation(region, structure=_CROSS, iterations=edge_grow, mask=~lines)
    return region


def flood_fill(
    color_layer: np.ndarray,
    line_art: np.ndarray,
    point: tuple[int, int],
    rgb: tuple[int, int, int],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
) -> np.ndarray:
    """Bucket-fill the closed region of `line_art` at `point` with `rgb`.

    Parameters
    ----------
    color_layer : ndarray, shape (H, W, 4), uint8
        The current color layer (not modified).
    line_art : ndarray, shape (H, W) or (H, W, 3), uint8
        The sketch.
    point : tuple of int
        ``(x, y)`` pixel column and row.
    rgb : tuple of int
        The sRGB color, three ints in [0, 255].
    tolerance : int
        See `fill_region`.

    Returns
    -------
    ndarray, shape (H, W, 4), uint8
        A new color layer with the region set to ``(*rgb, 255)``.

    Raises
    ------
    FillOnLineError
        If `point` is on the line art; nothing is filled.

    Examples
    --------
    >>> sketch = np.full((5, 7), 255, np.uint8); sketch[:, 3] = 0
    >>> layer = flood_fill(blank_color_layer(sketch.shape), sketch, (1, 2), (255, 0, 0))
    >>> painted_mask(layer, sketch).sum(axis=0).tolist()
    [5, 5, 5, 0, 0, 0, 0]
    """
    _check_layer(color_layer, line_art)
    color = _check_rgb(rgb)
    region = fill_region(line_art, point, tolerance)
    out = color_layer.copy()
    out[region] = (*color, 255)
    return out


def painted_mask(color_layer: np.ndarray, sketch: np.ndarray) -> np.ndarray:
    """Pixels that carry the designer's color: painted and not line art.

    Parameters
    ----------
    color_layer : ndarray, shape (H, W, 4), uint8
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8

    Returns
    -------
    ndarray, shape (H, W), bool
    """
    _check_layer(color_layer, sketch)
    return (color_layer[..., 3] > 0) & ~line_mask(sketch)


def border_region(sketch: np.ndarray) -> np.ndarray:
    """The area around the drawing: non-line pixels 4-connected to the sketch's edge.

    Where an outline is open, the object's inside joins it, as a fill there would.

    Parameters
    ----------
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8

    Returns
    -------
    ndarray, shape (H, W), bool
    """
    labels, _ = ndimage.label(~line_mask(sketch), structure=_CROSS)
    edge = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    return np.isin(labels, edge[edge > 0])


def painted_colors(color_layer: np.ndarray, sketch: np.ndarray) -> np.ndarray:
    """The painted pixels' colors, shape ``(N, 3)`` sRGB uint8, in row-major order."""
    return color_layer[painted_mask(color_layer, sketch)][:, :3]


def painted_color_counts(color_layer: np.ndarray, sketch: np.ndarray) -> dict[str, int]:
    """Painted pixels per color, ``{"#rrggbb": count}``, most used first."""
    colors, counts = np.unique(painted_colors(color_layer, sketch), axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return {"#{:02x}{:02x}{:02x}".format(*colors[i]): int(counts[i]) for i in order}


def composite(color_layer: np.ndarray, sketch: np.ndarray) -> np.ndarray:
    """The colored sketch as designers see it.

    Painted non-line pixels show their color multiplied by the sketch's luminance (so an
    anti-aliased edge darkens the color toward the line instead of lightening it);
    line pixels and unpainted pixels show the sketch unchanged.

    Parameters
    ----------
    color_layer : ndarray, shape (H, W, 4), uint8
    sketch : ndarray, shape (H, W) or (H, W, 3), uint8

    Returns
    -------
    ndarray, shape (H, W, 3), uint8
        sRGB in [0, 255].
    """
    lum = sketch_luminance(sketch)
    painted = painted_mask(color_layer, lum)
    out = np.repeat(lum[..., None], 3, axis=2)
    shaded = color_layer[..., :3].astype(np.uint16) * lum[..., None] + 127
    out[painted] = (shaded[painted] // 255).astype(np.uint8)
    return out


@dataclass(frozen=True)
class CanvasValue:
    """What the coloring canvas sends to the server.

    Attributes
    ----------
    task_id : str
        The task the coloring belongs to, as the server gave it to the canvas.
    color_layer : ndarray, shape (H, W, 4), uint8
        The color layer (all zeros when nothing is painted).
    elapsed_s : float
        Seconds since the canvas first opened this task in this browser (>= 0).
    """

    task_id: str
    color_layer: np.ndarray
    elapsed_s: float


def color_layer_to_png(color_layer: np.ndarray) -> bytes:
    """Encode a color layer ``(H, W, 4)`` uint8 as a lossless RGBA PNG."""
    layer = np.asarray(color_layer)
    if layer.dtype != np.uint8 or layer.ndim != 3 or layer.shape[2] != 4:
        raise ValueError(f"`color_layer` must be (H, W, 4) uint8, got {layer.shape} {layer.dtype}")
    buf = io.BytesIO()
    Image.fromarray(layer, "RGBA").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def color_layer_from_png(png: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """Decode a PNG into a color layer for a sketch of `shape` ``(H, W, ...)``.

    Any PNG mode is accepted; one without alpha counts as painted everywhere.

    Raises
    ------
    ValueError
        If `png` is not a PNG or its size differs from the sketch's.
    """
    try:
        image = Image.open(io.BytesIO(png))
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"`png` is not a readable image: {exc}") from None
    if image.format != "PNG":
        raise ValueError(f"`png` must be a PNG (lossless), got {image.format}")
    if (image.height, image.width) != tuple(shape[:2]):
        raise ValueError(
            f"the color layer is {image.width}x{image.height} but the sketch is "
            f"{shape[1]}x{shape[0]} (width x height)"
        )
    try:  # PIL decodes lazily: a truncated or corrupt image fails here, not at open.
        layer = np.asarray(image.convert("RGBA"), dtype=np.uint8).copy()
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"`png` is truncated or corrupt: {exc}") from None
    problem = png_data_problem(png)  # rows PIL would leave blank
    if problem:
        raise ValueError(f"`png` is truncated or corrupt: {problem}")
    return layer


def canvas_value(task_id: str, color_layer: np.ndarray | None, elapsed_s: float = 0.0) -> str:
    """Build the canvas value text the browser would send (for API clients and tests).

    Parameters
    ----------
    task_id : str
    color_layer : ndarray, shape (H, W, 4), uint8, or None
        None or an all-unpainted layer gives an empty ``color_layer`` field, as the
        browser sends before anything is painted.
    elapsed_s : float
        Seconds spent, >= 0.

    Returns
    -------
    str
        JSON ``{"task_id", "color_layer" (PNG data URL or ""), "elapsed_s"}``.
    """
    url = ""
    if color_layer is not None and np.any(np.asarray(color_layer)[..., 3]):
        url = _PNG_DATA_URL + base64.b64encode(color_layer_to_png(color_layer)).decode("ascii")
    return canvas_text(task_id, url, elapsed_s)


def canvas_text(task_id: str, color_layer_url: str, elapsed_s: float = 0.0) -> str:
    """The canvas value text around a color layer already encoded (`canvas_value`'s
    ``color_layer`` field: a PNG data URL, or "" for nothing painted)."""
    return json.dumps(
        {"task_id": str(task_id), "color_layer": color_layer_url, "elapsed_s": float(elapsed_s)}
    )


def parse_canvas_value(text: str | None, shape: tuple[int, ...]) -> CanvasValue:
    """Read the canvas value for a sketch of `shape` ``(H, W, ...)``.

    Raises
    ------
    ValueError
        If `text` is not the canvas's JSON, its image is not a PNG data URL (a lossy
        format would change the colors) or its size differs from the sketch's.
    """
    return decode_canvas(read_canvas(text), shape)


class RawCanvas(NamedTuple):
    """A canvas value read but not yet decoded: ``task_id``, ``color_layer`` (a PNG data
    URL or ""), ``elapsed_s``."""

    task_id: str
    color_layer: str
    elapsed_s: float


def read_canvas(text: str | None) -> RawCanvas:
    """The canvas JSON read and checked, without decoding its image (see `decode_canvas`).

    Raises
    ------
    ValueError
        If `text` is not the canvas's JSON or its elapsed time is implausible.
    """
    if not isinstance(text, str) or not text:
        raise ValueError("the canvas value is empty: the coloring tool has not loaded a task")
    if len(text) > MAX_CANVAS_VALUE_CHARS:
        raise ValueError(f"the canvas value has {len(text)} characters, more than {MAX_CANVAS_VALUE_CHARS}")
    try:
        data = json.loads(text)
        task_id, url, elapsed = str(data["task_id"]), data["color_layer"], float(data["elapsed_s"])
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise ValueError(
            f"the canvas value must be JSON with task_id, color_layer and elapsed_s: {exc}"
        ) from None
    if not isinstance(url, str):
        raise ValueError(f"`color_layer` must be a PNG data URL or '', got {type(url).__name__}")
    if not math.isfinite(elapsed) or not 0 <= elapsed <= MAX_SECONDS_SPENT:
        raise ValueError(
            f"`elapsed_s` must be from 0 to {MAX_SECONDS_SPENT:.0f} seconds (7 days), got {elapsed:g}"
        )
    return RawCanvas(task_id, url, elapsed)


def decode_canvas(raw: RawCanvas, shape: tuple[int, ...]) -> CanvasValue:
    """Decode the color layer of a `read_canvas` result for a sketch of `shape` ``(H, W, ...)``.

    Raises
    ------
    ValueError
        If the image is not a lossless PNG data URL of the sketch's size.
    """
    url = raw.color_layer
    if not url:
        return CanvasValue(raw.task_id, blank_color_layer(shape), raw.elapsed_s)
    if not url.startswith(_PNG_DATA_URL):
        raise ValueError(f"`color_layer` must start with {_PNG_DATA_URL!r}, got {shown(url[:40])}")
    try:
        png = base64.b64decode(url[len(_PNG_DATA_URL) :], validate=True)
    except binascii.Error as exc:
        raise ValueError(f"`color_layer` is not valid base64: {exc}") from None
    return CanvasValue(raw.task_id, color_layer_from_png(png, shape), raw.elapsed_s)


def _check_point(point: tuple[int, int], shape: tuple[int, int]) -> tuple[int, int]:
    try:
        x, y = (int(v) for v in point)
    except (TypeError, ValueError):
        raise ValueError(f"`point` must be (x, y) integers, got {shown(point)}") from None
    if not (0 <= x < shape[1] and 0 <= y < shape[0]):
        raise ValueError(
            f"`point` (x={x}, y={y}) is outside the sketch of width {shape[1]} and height {shape[0]}"
        )
    return x, y


def _check_rgb(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    values = tuple(int(v) for v in rgb)
    if len(values) != 3 or not all(0 <= v <= 255 for v in values):
        raise ValueError(f"`rgb` must be three ints in [0, 255], got {shown(rgb)}")
    return values  # type: ignore[return-value]


def _check_layer(color_layer: np.ndarray, sketch: np.ndarray) -> None:
    layer = np.asarray(color_layer)
    if layer.dtype != np.uint8 or layer.ndim != 3 or layer.shape[2] != 4:
        raise ValueError(f"`color_layer` must be (H, W, 4) uint8 RGBA, got {layer.shape} {layer.dtype}")
    if layer.shape[:2] != np.shape(sketch)[:2]:
        raise ValueError(
            f"`color_layer` is {layer.shape[1]}x{layer.shape[0]} but the sketch is "
            f"{np.shape(sketch)[1]}x{np.shape(sketch)[0]} (width x height)"
        )
