"""Exposure-normalised renders of simple shapes in a known color, with exact object masks.

Test images for the explicit-color mode, the tiny models, color naming and the judge audit's
probe items: a sphere, box, cylinder, cone or torus whose albedo is a given sRGB color, lit by
one directional light (Lambertian diffuse plus an ambient term), with a Blinn-Phong specular
highlight, casting a soft shadow on a seeded background. Everything is plain NumPy on the CPU;
a 256 x 256 render takes a few milliseconds.

Rendering model
---------------
Shading is computed in linear RGB: ``albedo * shade + specular``, where
``shade = AMBIENT + DIFFUSE * max(0, n . l)`` per pixel. The shade is then scaled so that its
mean over the object is 1 (the object is "correctly exposed", as a photographer meters on the
subject), so the albedo is the object's average color up to highlights, clipping and noise.
A light Gaussian sensor noise (``NOISE`` in 8-bit levels) is added after encoding to sRGB.
That scaling is the one condition under which the plain mean of the object's pixels is the
albedo, so these renders are no validation of a scorer;
:mod:`evaluation.explicit.validation_renders` is (it uses the sRGB transfer functions and
`unit` defined here). The mask is exact: a pixel is the object's when the object's surface covers the pixel centre,
and pixels are not anti-aliased, so no background leaks into masked pixels.

The cast shadow falls on the background only (it darkens the background, never the mask).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evaluation.color.colorspace import srgb_as_float
from storage.shown import shown

SHAPES = ("sphere", "box", "cylinder", "cone", "torus")
BACKGROUNDS = ("plain", "gradient", "floor", "checker", "noise")

AMBIENT = 0.55
DIFFUSE = 0.55
SPECULAR = 0.5
SHININESS = 250.0
NOISE = 1.0
SHADOW_DARKENING = 0.55


def srgb_to_linear(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] to linear RGB in [0, 1] (IEC 61966-2-1), any shape."""
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    """Linear RGB to sRGB in [0, 1], clipping to [0, 1] first (IEC 61966-2-1), any shape."""
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)


def unit(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (..., 3) scaled to unit length along the last axis."""
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


# Each shape maps pixel coordinates (x right, y up, in units of the shape's radius, centred on
# the shape) to (mask (H, W) bool, normals (H, W, 3) unit vectors; z towards the viewer).


def _sphere(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r2 = x**2 + y**2
    mask = r2 <= 1.0
    z = np.sqrt(np.clip(1.0 - r2, 0.0, None))
    return mask, np.stack([x, y, z], axis=-1)


def _box(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # A cube seen from above-right in oblique projection: front square, top and right faces.
    side, depth = 1.4, 0.55
    x0, y0 = -0.95, -0.95
    front = (x >= x0) & (x <= x0 + side) & (y >= y0) & (y <= y0 + side)
    u = x - x0
    top = (y > y0 + side) & (y <= y0 + side + depth) & (u >= y - (y0 + side)) & (u <= side + y - (y0 + side))
    v = y - y0
    right = (
        (x > x0 + side) & (x <= x0 + side + depth) & (v >= x - (x0 + side)) & (v <= side + x - (x0 + side))
    )
    normals = np.zeros(x.shape + (3,))
    normals[front] = (0.0, 0.0, 1.0)
    normals[top] = unit(np.array([0.0, 1.0, 0.45]))
    normals[right] = unit(np.array([1.0, 0.0, 0.45]))
    return front | top | right, normals


def _cylinder(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half_width, top, bottom, squash = 0.75, 0.95, -0.95, 0.3
    u = x / half_width
    inside_width = np.abs(u) <= 1.0
    rim = squash * np.sqrt(np.clip(1.0 - u**2, 0.0, None))
    side = inside_width & (y <= top) & (y >= bottom - rim)
    cap = (u**2 + ((y - top) / squash) ** 2) <= 1.0
    cap &= inside_width
    normals = np.zeros(x.shape + (3,))
    side_normals = np.stack([u, np.zeros_like(u), np.sqrt(np.clip(1.0 - u**2, 0.0, None))], axis=-1)
    normals[side] = side_normals[side]
    normals[cap] = unit(np.array([0.0, 1.0, 0.3]))
    return side | cap, normals


def _cone(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    apex, base, base_half, squash = 1.0, -0.8, 0.85, 0.25
    height = apex - base
    half = base_half * (apex - y) / height
    u = np.where(half > 0, x / np.where(half > 0, half, 1.0), 2.0)
    inside = (np.abs(u) <= 1.0) & (y <= apex)
    rim = squash * np.sqrt(np.clip(1.0 - (x / base_half) ** 2, 0.0, None))
    mask = inside & (y >= base) | ((np.abs(x) <= base_half) & (y < base) & (y >= base - rim))
    slope = np.arctan2(base_half, height)
    u_all = np.clip(np.where(y >= base, u, x / base_half), -1.0, 1.0)
    normals = np.stack(
        [u_all * np.cos(slope), np.full_like(u_all, np.sin(slope)), np.sqrt(1.0 - u_all**2) * np.cos(slope)],
        axis=-1,
    )
    return mask, normals


def _torus(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Seen along its axis: an annulus whose cross-section is a circle of radius ``tube``.
    ring, tube = 0.68, 0.32
    rho = np.sqrt(x**2 + y**2)
    t = (rho - ring) / tube
    mask = np.abs(t) <= 1.0
    safe = np.where(rho > 0, rho, 1.0)
    normals = np.stack([t * x / safe, t * y / safe, np.sqrt(np.clip(1.0 - t**2, 0.0, None))], axis=-1)
    return mask, normals


_SHAPE_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "sphere": _sphere,
    "box": _box,
    "cylinder": _cylinder,
    "cone": _cone,
    "torus": _torus,
}


def _random_color(rng: np.random.Generator) -> np.ndarray:
    """A background color in linear RGB: mostly muted, sometimes saturated."""
    base = rng.uniform(0.15, 0.85)
    spread = rng.choice([0.05, 0.15, 0.35])
    return srgb_to_linear(np.clip(base + rng.uniform(-spread, spread, size=3), 0.0, 1.0))


def _background(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """Background in linear RGB, shape (size, size, 3)."""
    first, second = _random_color(rng), _random_color(rng)
    ramp = np.linspace(0.0, 1.0, size)[:, None, None]
    if kind == "plain":
        return np.broadcast_to(first, (size, size, 3)).copy()
    if kind == "gradient":
        return np.broadcast_to(first * (1 - ramp) + second * ramp, (size, size, 3)).copy()
    if kind == "floor":
        horizon = int(size * rng.uniform(0.55, 0.75))
        image = np.broadcast_to(first, (size, size, 3)).copy()
        image[horizon:] = second
        return image
    if kind == "checker":
        cell = int(rng.integers(12, 40))
        rows, cols = np.indices((size, size)) // cell
        return np.where(((rows + cols) % 2 == 0)[..., None], first, second)
    coarse = rng.uniform(0.0, 1.0, size=(size // 16 + 1, size // 16 + 1, 1))
    blend = np.kron(coarse, np.ones((16, 16, 1)))[:size, :size]
    return first * (1 - blend) + second * blend


def _check_inputs(rgb: np.ndarray, shape: str, size: int, background: str | None) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.shape != (3,):
        raise ValueError(f"`rgb` must be one sRGB color of shape (3,), got shape {rgb.shape}")
    if np.issubdtype(rgb.dtype, np.integer):
        if rgb.min() < 0 or rgb.max() > 255:
            raise ValueError(f"integer `rgb` must lie in [0, 255], got {rgb.tolist()}")
        rgb = rgb.astype(np.uint8)
    if shape not in _SHAPE_FUNCTIONS:
        raise ValueError(f"`shape` must be one of {', '.join(SHAPES)}; got {shown(shape)}")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 32:
        raise ValueError(f"`size` must be an integer >= 32 (pixels), got {shown(size)}")
    if background is not None and background not in BACKGROUNDS:
        raise ValueError(
            f"`background` must be None or one of {', '.join(BACKGROUNDS)}; got {shown(background)}"
        )
    return srgb_as_float(rgb, "rgb")


def render(
    rgb: np.ndarray,
    shape: str,
    *,
    size: int = 256,
    background: str | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Render one shape whose albedo is ``rgb``, with its exact mask.

    Parameters
    ----------
    rgb : array_like, shape (3,)
        The object's sRGB color: integers in [0, 255] or floats in [0, 1].
    shape : str
        One of :data:`SHAPES`.
    size : int
        Width and height of the image in pixels (>= 32).
    background : str or None
        One of :data:`BACKGROUNDS`; None picks one from ``seed``.
    seed : int
        Seeds everything random: background kind and colors, the light direction (jittered
        around upper left front), the shape's position and scale, and the sensor noise. The
        same arguments give the same image.

    Returns
    -------
    image : ndarray, shape (size, size, 3), uint8
        sRGB in [0, 255].
    mask : ndarray, shape (size, size), bool
        True where the object covers the pixel centre (exact; shadows are not in it).

    Raises
    ------
    ValueError
        If ``rgb`` is not one sRGB color, or ``shape``, ``size`` or ``background`` is unknown
        or out of range.

    Examples
    --------
    >>> image, mask = render([200, 30, 40], "sphere", size=64, seed=1)
    >>> image.shape, image.dtype, mask.dtype
    ((64, 64, 3), dtype('uint8'), dtype('bool'))
    """
    albedo = srgb_to_linear(_check_inputs(rgb, shape, size, background))
    rng = np.random.default_rng(seed)
    kind = background if background is not None else BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
    scene = _background(kind, size, rng)

    # 1. Geometry: pixel centres in units of the shape's radius.
    radius = size * rng.uniform(0.28, 0.36)
    cx, cy = size * (0.5 + rng.uniform(-0.06, 0.06, size=2))
    rows, cols = np.indices((size, size)) + 0.5
    x, y = (cols - cx) / radius, (cy - rows) / radius
    mask, normals = _SHAPE_FUNCTIONS[shape](x, y)
    normals = unit(np.where(mask[..., None], normals, (0.0, 0.0, 1.0)))

    # 2. Light from the upper left front, jittered; Lambert + ambient, exposed on the object.
    light = unit(np.array([-0.45, 0.55, 0.7]) + rng.uniform(-0.15, 0.15, size=3))
    shade = AMBIENT + DIFFUSE * np.clip(normals @ light, 0.0, None)
    shade = shade / shade[mask].mean()
    halfway = unit(light + np.array([0.0, 0.0, 1.0]))
    specular = SPECULAR * np.clip(normals @ halfway, 0.0, None) ** SHININESS

    # 3. Soft cast shadow on the background, away from the light.
    sx, sy = cx - light[0] * radius * 0.5, cy + radius * 0.95
    distance = ((cols - sx) / (radius * 1.1)) ** 2 + ((rows - sy) / (radius * 0.3)) ** 2
    shadow = 1.0 - SHADOW_DARKENING * np.clip(1.5 - distance, 0.0, 1.0)
    scene = scene * shadow[..., None]

    # 4. Compose, encode to sRGB, add sensor noise.
    lit = albedo * shade[..., None] + specular[..., None]
    linear = np.where(mask[..., None], lit, scene)
    image = linear_to_srgb(linear) * 255.0 + rng.normal(0.0, NOISE, size=linear.shape)
    return np.clip(np.round(image), 0, 255).astype(np.uint8), mask
