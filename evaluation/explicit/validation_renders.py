"""Validation renders for the explicit-color scorer, written apart from it: named conditions, no exposure fix.

An object of known albedo on a simple set (a wall and a floor), rendered under conditions that
a generated image may show, each one a named axis of :data:`AXES` so that a table can say where
a rule set breaks. Unlike the exposure-normalised renders of :mod:`evaluation.color.synthetic`
(whose shading is scaled so that its mean over the object is 1, the one condition under which the
plain mean of the pixels recovers the albedo), nothing here is scaled to suit a scorer: this
module knows the scene, not the scorer, and imports nothing from it.

Rendering model
---------------
Linear RGB (IEC 61966-2-1 transfer function), one white light source or two:

- irradiance ``E(n) = a + (1 - a) * sum_k w_k * max(0, n . l_k)``, with ``a`` the ambient share
  (axis ``ambient``), the key light of weight 1 (one light) or 0.65 with a fill light of 0.35
  from the other side (axis ``lights``); a soft light is an area source (the mean over 9
  directions within 20 degrees of its centre), a hard one a point (axis ``shadow``: the
  terminator and the cast shadow on the floor are sharp or graded);
- the camera is metered on the key light (as an incident-light meter is): at exposure 0 a
  surface facing the key light is recorded at its albedo, every other surface darker; the
  exposure axis then scales everything by ``2 ** stops``;
- pixel = ``albedo * texture * E(n) / E(l_key) * 2 ** stops + specular * 2 ** stops``, with a
  white Blinn-Phong highlight of the key light (axis ``specular``: matte, satin, glossy) and a
  smooth multiplicative texture uniform in ``[1 - t, 1 + t]`` (axis ``texture``);
- encoded to 8-bit sRGB (clipped), plus Gaussian sensor noise of the stated standard deviation in
  8-bit levels per channel (axis ``noise``), and optionally a JPEG round trip with 4:2:0 chroma
  subsampling through Pillow (axis ``jpeg``).

The mask is exact (a pixel is the object's when the object covers its centre; no
anti-aliasing), so background can reach masked pixels only through JPEG's 8 x 8 blocks and
subsampled chroma, as it does in a real JPEG. :attr:`ValidationRender.irradiance` records the
factor that multiplied the albedo at each pixel (before clipping, noise and JPEG): its mean over
the mask is how far the object's mean is from its albedo in linear light.

References
----------
.. [1] IEC 61966-2-1:1999, sRGB transfer function.
.. [2] J. F. Blinn, "Models of light reflection for computer synthesized pictures", SIGGRAPH 1977.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image

from evaluation.color.synthetic import linear_to_srgb, srgb_to_linear, unit
from storage.shown import shown

SHAPES = ("sphere", "egg", "cylinder", "cube", "torus")

#: axis -> its levels; every render takes one level of each.
AXES: dict[str, tuple] = {
    "lights": ("one", "two"),
    "ambient": (0.2, 0.5, 0.8),
    "exposure": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "shadow": ("soft", "hard"),
    "specular": ("matte", "satin", "glossy"),
    "texture": (0.0, 0.05),
    "noise": (0.0, 2.0, 4.0),
    "jpeg": ("none", "q90", "q70"),
}
# specular level -> (strength, Blinn-Phong exponent)
_SPECULAR = {"matte": (0.0, 1.0), "satin": (0.12, 20.0), "glossy": (0.5, 150.0)}
_JPEG_QUALITY = {"q90": 90, "q70": 70}
_KEY = np.array([-0.45, 0.55, 0.70])
_FILL = np.array([0.75, 0.15, 0.65])
_FILL_WEIGHT = 0.35
_SOFT_HALF_ANGLE = np.radians(20.0)


@dataclass(frozen=True)
class Conditions:
    """One level of every axis of :data:`AXES`.

    Attributes
    ----------
    lights : {"one", "two"}
        A key light alone, or a key (weight 0.65) and a fill (0.35) from the other side.
    ambient : float in [0, 1]
        Share of the irradiance that reaches every surface whatever its orientation.
    exposure : float
        Stops from the key-light metering (0: a surface facing the key light shows its albedo).
    shadow : {"soft", "hard"}
        Area or point lights.
    specular : {"matte", "satin", "glossy"}
    texture : float in [0, 0.5]
        Relative amplitude of the albedo texture (0.05: albedo varies by +/- 5 %).
    noise : float >= 0
        Standard deviation of the sensor noise, 8-bit levels.
    jpeg : {"none", "q90", "q70"}
        JPEG round trip at that quality with 4:2:0 chroma subsampling.

    Raises
    ------
    ValueError
        If a level is out of range; the message names the axis.
    """

    lights: str = "one"
    ambient: float = 0.5
    exposure: float = 0.0
    shadow: str = "soft"
    specular: str = "satin"
    texture: float = 0.0
    noise: float = 0.0
    jpeg: str = "none"

    def __post_init__(self) -> None:
        for axis, allowed in (("lights", AXES["lights"]), ("shadow", AXES["shadow"])):
            if getattr(self, axis) not in allowed:
                raise ValueError(f"`{axis}` must be one of {allowed}, got {shown(getattr(self, axis))}")
        if self.specular not in _SPECULAR:
            raise ValueError(f"`specular` must be one of {tuple(_SPECULAR)}, got {shown(self.specular)}")
        if self.jpeg != "none" and self.jpeg not in _JPEG_QUALITY:
            raise ValueError(
                f"`jpeg` must be 'none' or one of {tuple(_JPEG_QUALITY)}, got {shown(self.jpeg)}"
            )
        for axis, low, high in (("ambient", 0.0, 1.0), ("texture", 0.0, 0.5), ("noise", 0.0, 64.0)):
            if not low <= getattr(self, axis) <= high:
                raise ValueError(f"`{axis}` must lie in [{low}, {high}], got {shown(getattr(self, axis))}")
        if not -4.0 <= self.exposure <= 4.0:
            raise ValueError(f"`exposure` must lie in [-4, 4] stops, got {shown(self.exposure)}")


@dataclass(frozen=True)
class ValidationRender:
    """One render and what is true about it.

    Attributes
    ----------
    image : ndarray, shape (H, W, 3), uint8
        sRGB in [0, 255].
    mask : ndarray, shape (H, W), bool
        Exactly the pixels whose centre the object covers.
    albedo : ndarray, shape (3,), uint8
        The object's true color, sRGB in [0, 255] (the texture varies around it).
    irradiance : ndarray, shape (H, W), float64
        What multiplied the albedo at each object pixel in linear light, exposure included
        (0 outside the mask); 1 is the albedo itself.
    shape : str
        One of :data:`SHAPES`.
    conditions : Conditions
    """

    image: np.ndarray
    mask: np.ndarray
    albedo: np.ndarray
    irradiance: np.ndarray
    shape: str
    conditions: Conditions


# Shapes: pixel coordinates (x right, y up, in units of the object's radius) -> (mask, normals).


def _sphere(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r2 = x**2 + y**2
    return r2 <= 1.0, np.stack([x, y, np.sqrt(np.clip(1.0 - r2, 0.0, None))], axis=-1)


def _egg(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # An ellipsoid of semi-axes 0.7 (x), 1 (y), 0.7 (z): normal = gradient of the implicit form.
    u, v = x / 0.7, y
    r2 = u**2 + v**2
    w = np.sqrt(np.clip(1.0 - r2, 0.0, None))
    return r2 <= 1.0, np.stack([u / 0.7, v, w / 0.7], axis=-1)


def _cylinder(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Lying on its side, seen from the front: normals turn around the horizontal axis.
    mask = (np.abs(x) <= 1.0) & (np.abs(y) <= 0.6)
    v = np.clip(y / 0.6, -1.0, 1.0)
    return mask, np.stack([np.zeros_like(v), v, np.sqrt(1.0 - v**2)], axis=-1)


def _convex(x: np.ndarray, y: np.ndarray, corners: list[tuple[float, float]]) -> np.ndarray:
    """Pixels inside the convex polygon ``corners`` (counter-clockwise)."""
    inside = np.ones(x.shape, dtype=bool)
    for (x0, y0), (x1, y1) in zip(corners, corners[1:] + corners[:1]):
        inside &= (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0) >= 0
    return inside


def _cube(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Turned about the vertical and seen from slightly above: two sides and the top.
    left = _convex(x, y, [(-0.9, -0.6), (0.1, -0.95), (0.1, 0.35), (-0.9, 0.7)])
    right = _convex(x, y, [(0.1, -0.95), (0.9, -0.65), (0.9, 0.6), (0.1, 0.35)]) & ~left
    top = _convex(x, y, [(-0.9, 0.7), (0.1, 0.35), (0.9, 0.6), (-0.1, 0.95)]) & ~(left | right)
    normals = np.zeros(x.shape + (3,))
    normals[left] = unit(np.array([-0.6, -0.1, 0.8]))
    normals[right] = unit(np.array([0.55, -0.1, 0.83]))
    normals[top] = unit(np.array([0.0, 1.0, 0.4]))
    return left | right | top, normals


def _torus(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ring, tube = 0.66, 0.34
    rho = np.sqrt(x**2 + y**2)
    t = (rho - ring) / tube
    safe = np.where(rho > 0, rho, 1.0)
    normals = np.stack([t * x / safe, t * y / safe, np.sqrt(np.clip(1.0 - t**2, 0.0, None))], axis=-1)
    return np.abs(t) <= 1.0, normals


_SHAPES: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = dict(
    zip(SHAPES, (_sphere, _egg, _cylinder, _cube, _torus))
)


def _light_directions(centre: np.ndarray, soft: bool, rng: np.random.Generator) -> np.ndarray:
    """Unit directions of one light, shape (M, 3): its centre, or 9 spread over a disc."""
    centre = unit(centre)
    if not soft:
        return centre[None]
    side = unit(np.cross(centre, [0.0, 0.0, 1.0]))
    up = np.cross(centre, side)
    angles = np.linspace(0.0, 2 * np.pi, 8, endpoint=False) + rng.uniform(0, np.pi / 4)
    ring = np.tan(_SOFT_HALF_ANGLE) * (np.cos(angles)[:, None] * side + np.sin(angles)[:, None] * up)
    return unit(np.vstack([centre, centre + ring]))


def _irradiance(normals: np.ndarray, lights: list[tuple[float, np.ndarray]], ambient: float) -> np.ndarray:
    """``a + (1 - a) sum_k w_k mean_j max(0, n . l_kj)`` for normals (..., 3)."""
    direct = sum(weight * np.clip(normals @ dirs.T, 0.0, None).mean(axis=-1) for weight, dirs in lights)
    return ambient + (1.0 - ambient) * direct


def _texture(shape: tuple[int, int], amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """Smooth field uniform-ish in [1 - amplitude, 1 + amplitude], shape (H, W)."""
    coarse = rng.uniform(-1.0, 1.0, size=(shape[0] // 8 + 2, shape[1] // 8 + 2))
    field = np.asarray(Image.fromarray(coarse.astype(np.float32)).resize(shape[::-1], Image.BICUBIC))
    field = 2.0 * (field - field.min()) / max(float(np.ptp(field)), 1e-12) - 1.0
    return 1.0 + amplitude * field


def _set(size: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A wall and a floor in two random colors, linear RGB (size, size, 3); the horizon row."""
    wall, floor = srgb_to_linear(rng.uniform(0.1, 0.9, size=(2, 3)))
    horizon = int(size * rng.uniform(0.55, 0.7))
    scene = np.empty((size, size, 3))
    scene[:horizon], scene[horizon:] = wall, floor
    return scene, horizon


def _jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality, subsampling=2)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))


def render(
    albedo: np.ndarray,
    shape: str,
    conditions: Conditions = Conditions(),  # noqa: B008 - frozen, so a safe default
    *,
    size: int = 96,
    rng: np.random.Generator,
) -> ValidationRender:
    """Render an object of albedo ``albedo`` under ``conditions``, with its exact mask.

    Parameters
    ----------
    albedo : array_like, shape (3,), uint8
        The object's color, sRGB in [0, 255].
    shape : str
        One of :data:`SHAPES`.
    conditions : Conditions
        One level per axis.
    size : int
        Width and height in pixels, >= 32.
    rng : numpy.random.Generator
        Draws the light's jitter, the object's place and size, the set's colors, the texture
        and the noise.

    Returns
    -------
    ValidationRender

    Raises
    ------
    ValueError
        If ``albedo`` is not one uint8 color, or ``shape`` or ``size`` is out of range.

    Examples
    --------
    >>> out = render([200, 30, 40], "sphere", size=64, rng=np.random.default_rng(0))
    >>> out.image.shape, out.mask.dtype, out.albedo.tolist()
    ((64, 64, 3), dtype('bool'), [200, 30, 40])
    """
    albedo = np.asarray(albedo)
    if albedo.shape != (3,) or albedo.dtype.kind not in "iu" or albedo.min() < 0 or albedo.max() > 255:
        raise ValueError(f"`albedo` must be one sRGB color of 3 integers in [0, 255], got {albedo.tolist()}")
    if shape not in _SHAPES:
        raise ValueError(f"`shape` must be one of {', '.join(SHAPES)}; got {shown(shape)}")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 32:
        raise ValueError(f"`size` must be an integer >= 32 (pixels), got {shown(size)}")
    albedo = albedo.astype(np.uint8)
    c = conditions

    # 1. Geometry: pixel centres in units of the object's radius.
    radius = size * rng.uniform(0.27, 0.33)
    cx, cy = size * (0.5 + rng.uniform(-0.05, 0.05, size=2))
    rows, cols = np.indices((size, size)) + 0.5
    x, y = (cols - cx) / radius, (cy - rows) / radius
    mask, normals = _SHAPES[shape](x, y)
    normals = unit(np.where(mask[..., None], normals, (0.0, 0.0, 1.0)))

    # 2. Lights, metered on the key light, then the exposure.
    key = unit(_KEY + rng.uniform(-0.12, 0.12, size=3))
    soft = c.shadow == "soft"
    lights = [(1.0, _light_directions(key, soft, rng))]
    if c.lights == "two":
        lights = [(1.0 - _FILL_WEIGHT, lights[0][1]), (_FILL_WEIGHT, _light_directions(_FILL, soft, rng))]
    gain = 2.0**c.exposure / _irradiance(key, lights, c.ambient)
    irradiance = np.where(mask, _irradiance(normals, lights, c.ambient) * gain, 0.0)
    strength, exponent = _SPECULAR[c.specular]
    halfway = unit(key + np.array([0.0, 0.0, 1.0]))
    specular = strength * lights[0][0] * np.clip(normals @ halfway, 0.0, None) ** exponent * 2.0**c.exposure

    # 3. The set: wall and floor lit by the same light, the object's shadow on the floor.
    scene, horizon = _set(size, rng)
    shadow_x = cx - key[0] / max(key[1], 0.2) * radius * 0.6
    shadow_y = max(cy + radius * 0.9, horizon + 2)
    reach = ((cols - shadow_x) / (radius * 1.2)) ** 2 + ((rows - shadow_y) / (radius * 0.3)) ** 2
    cast = np.clip(1.6 - reach, 0.0, 1.0) if soft else (reach <= 1.0).astype(float)
    lit_floor = c.ambient + (1.0 - c.ambient) * (1.0 - cast * (rows >= horizon))
    scene = scene * (lit_floor * 2.0**c.exposure)[..., None]

    # 4. Compose, encode to 8-bit sRGB, sensor noise, JPEG.
    surface = srgb_to_linear(albedo / 255.0) * _texture((size, size), c.texture, rng)[..., None]
    linear = np.where(mask[..., None], surface * irradiance[..., None] + specular[..., None], scene)
    encoded = linear_to_srgb(linear) * 255.0 + rng.normal(0.0, 1.0, size=linear.shape) * c.noise
    image = np.clip(np.round(encoded), 0, 255).astype(np.uint8)
    if c.jpeg != "none":
        image = _jpeg(image, _JPEG_QUALITY[c.jpeg])
    return ValidationRender(image, mask, albedo, irradiance, shape, c)


def draw_conditions(rng: np.random.Generator, **fixed) -> Conditions:
    """One level of every axis of :data:`AXES`, each uniform over its levels, but ``fixed``.

    Every axis is drawn (fixed or not), so fixing one leaves the others' draws unchanged.
    """
    drawn = {axis: AXES[axis][int(rng.integers(len(AXES[axis])))] for axis in AXES}
    return Conditions(**(drawn | fixed))


def validation_set(
    colors: np.ndarray, *, rng: np.random.Generator, size: int = 96, **fixed
) -> Iterator[tuple[int, ValidationRender]]:
    """Every color on every shape, each render under conditions drawn from :data:`AXES`.

    Parameters
    ----------
    colors : array_like, shape (n, 3), uint8
        Albedos, sRGB in [0, 255].
    rng : numpy.random.Generator
        Draws the conditions and everything random in each render, in order.
    size : int
        Pixels per side.
    **fixed
        Axes held at one level (``exposure=0.0``); the others are drawn.

    Yields
    ------
    (int, ValidationRender)
        The color's row and its render; ``n * len(SHAPES)`` of them, color by color.
    """
    for row, color in enumerate(np.asarray(colors)):
        for shape in SHAPES:
            yield row, render(color, shape, draw_conditions(rng, **fixed), size=size, rng=rng)
