"""Render an independent colour-naming validation set with Mitsuba 3.

Each render is a physically based product shot of one object (sphere, cube,
capped cylinder, torus or vase) whose albedo is a named colour from the
ISCC-NBS level 2, ISCC-NBS level 3 or CSS3/X11 colour table.  The object stands
on a seamless paper sweep (floor and backdrop), is lit by a key light plus an
environment and sometimes a fill light, and is photographed with a perspective
camera.  The exposure follows incident-light metering (see ``meter``), the
linear render is encoded with the standard sRGB OETF and clipped to 8 bits.
The object mask is the renderer's own coverage of the object.

The generator imports nothing from the project.  It needs Mitsuba 3.9.1,
NumPy and Pillow, for example in a virtual environment of its own::

    python3 -m venv /tmp/mi && /tmp/mi/bin/pip install mitsuba==3.9.1 numpy pillow
    /tmp/mi/bin/python render_mitsuba.py --out OUTDIR --seed 20250611

It writes ``renders.npz`` (``images`` uint8 (N, 96, 96, 3), ``masks`` bool
(N, 96, 96)) and ``renders.csv`` (one row per render, same order) into OUTDIR.
All conditions are drawn from the condition grid with ``numpy.random`` seeded
by ``--seed``, and every render's sampler has its own recorded seed; scenes are
loaded serially so emitter order is fixed.  With the same seed, Mitsuba
version and machine type the output is bit-identical (checked across runs and
thread counts).  ``--quick`` renders every 40th planned render at 36 spp.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import resource
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import drjit as dr
import mitsuba as mi
import numpy as np
from PIL import Image

mi.set_variant("scalar_rgb")

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "gencolorbench"
RES = 96  # output width and height in pixels
FOV_DEG = 30.0  # horizontal field of view: a 67 mm lens on 36 x 24 mm film
SPP = 49  # samples per pixel of the beauty render (7 x 7 multi-jittered strata)
MASK_SPP = 16  # samples per pixel of the coverage render (4 x 4 strata)
METER_SPP = 64  # samples per pixel of the metering render
METER_RES = 16  # the metering camera sees only the card: 16 x 16 pixels
MAX_DEPTH = 6  # path length: enough for floor-object-floor interreflection
BACKDROP_Z = -3.0  # where the floor starts to curve up into the backdrop
COVE_RADIUS = 1.5  # radius of the sweep's curve

SHAPES = ("sphere", "cube", "cylinder", "torus", "vase")
MATERIALS = ("diffuse", "roughplastic", "principled")
PLASTIC_ALPHAS = (0.05, 0.15, 0.30)
PRINCIPLED_ROUGHNESS = (0.3, 0.5, 0.7)
KEYS = ("sun", "small", "softbox")  # directional; 0.8 and 2.4 unit squares 6 units away
ENVS = ("constant", "gradient")
KEY_SHARES = (0.5, 0.7, 0.85)
FILL_RATIO = 0.3  # fill irradiance / key irradiance on the metering card
NEUTRAL_FLOORS = ("#505050", "#808080", "#b4b4b4")
COLOURED_FLOORS = ("#c8b496", "#8fa98f", "#8c9bb4", "#b4735a")
P_COLOURED_FLOOR = 0.4  # otherwise one of the neutral floors
P_FILL = 0.5
JPEG_SHARE = {90: 0.1, 75: 0.1}  # share of the main set per JPEG quality
EXPOSURE_OFFSETS = (-1.0, -0.5, 0.5, 1.0)
GRADIENT_BOTTOM = 0.3  # nadir radiance of the gradient dome relative to the zenith


# --------------------------------------------------------------------------- colour


def srgb_to_linear(c: np.ndarray) -> np.ndarray:
    """Apply the sRGB EOTF (IEC 61966-2-1).

    Parameters
    ----------
    c : numpy.ndarray
        Encoded sRGB values in [0, 1].

    Returns
    -------
    numpy.ndarray
        Linear-light values in [0, 1].
    """
    c = np.asarray(c, dtype=np.float64)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb8(x: np.ndarray) -> np.ndarray:
    """Clip linear values to [0, 1], apply the sRGB OETF and quantise to 8 bits.

    Parameters
    ----------
    x : numpy.ndarray
        Linear-light values (any range).

    Returns
    -------
    numpy.ndarray
        uint8 sRGB code values.
    """
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    v = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1.0 / 2.4) - 0.055)
    return np.clip(np.round(v * 255.0), 0, 255).astype(np.uint8)


def hex_to_linear(hex_code: str) -> list[float]:
    """Convert ``#rrggbb`` to linear RGB.

    Parameters
    ----------
    hex_code : str
        Colour as ``#rrggbb``.

    Returns
    -------
    list of float
        Linear RGB triple.
    """
    rgb = np.array([int(hex_code[i : i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return [float(v) for v in srgb_to_linear(rgb)]


def load_colours() -> list[tuple[str, int, str, str]]:
    """Read the three colour tables.

    Returns
    -------
    list of tuple
        ``(system, row, colour_name, hex)`` for every table row, in table order
        (ISCC-NBS L2, ISCC-NBS L3, CSS3).
    """
    out = []
    for system, name in (
        ("iscc-nbs-l2", "iscc_nbs_l2.csv"),
        ("iscc-nbs-l3", "iscc_nbs_l3.csv"),
        ("css3", "css3_x11_colors.csv"),
    ):
        with open(ASSETS / name, newline="", encoding="utf-8") as fh:
            for row_idx, row in enumerate(csv.DictReader(fh)):
                r, g, b = int(row["r"]), int(row["g"]), int(row["b"])
                out.append((system, row_idx, row["color_name"], f"#{r:02x}{g:02x}{b:02x}"))
    return out


# --------------------------------------------------------------------------- meshes


def write_ply(path: Path, verts: np.ndarray, normals: np.ndarray, faces: np.ndarray) -> None:
    """Write a binary little-endian PLY triangle mesh with vertex normals.

    Triangles whose winding disagrees with their vertex normals are flipped, so
    the geometric and shading normals point the same way.

    Parameters
    ----------
    path : pathlib.Path
        File to write.
    verts : numpy.ndarray
        (V, 3) positions.
    normals : numpy.ndarray
        (V, 3) unit normals.
    faces : numpy.ndarray
        (F, 3) vertex indices.
    """
    faces = np.asarray(faces, dtype=np.int64).copy()
    a, b, c = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    geo = np.cross(b - a, c - a)
    shade = normals[faces].sum(axis=1)
    flip = (geo * shade).sum(axis=1) < 0
    faces[flip] = faces[flip][:, ::-1]
    header = (
        "ply\nformat binary_little_endian 1.0\n"
        f"element vertex {len(verts)}\n"
        "property float x\nproperty float y\nproperty float z\n"
        "property float nx\nproperty float ny\nproperty float nz\n"
        f"element face {len(faces)}\n"
        "property list uchar int vertex_indices\nend_header\n"
    )
    vdata = np.hstack([verts, normals]).astype("<f4")
    fdata = np.zeros(len(faces), dtype=[("n", "u1"), ("i", "<i4", (3,))])
    fdata["n"] = 3
    fdata["i"] = faces
    with open(path, "wb") as fh:
        fh.write(header.encode("ascii"))
        fh.write(vdata.tobytes())
        fh.write(fdata.tobytes())


def grid_faces(nu: int, nv: int, offset: int = 0) -> np.ndarray:
    """Triangulate an (nu, nv) vertex grid stored row-major.

    Parameters
    ----------
    nu, nv : int
        Grid size (rows, columns).
    offset : int
        Index of the grid's first vertex.

    Returns
    -------
    numpy.ndarray
        (2 (nu-1) (nv-1), 3) triangle indices.
    """
    i, j = np.meshgrid(np.arange(nu - 1), np.arange(nv - 1), indexing="ij")
    v00 = (i * nv + j).ravel() + offset
    v01, v10, v11 = v00 + 1, v00 + nv, v00 + nv + 1
    return np.concatenate([np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)])


def revolve(radius: np.ndarray, height: np.ndarray, n_seg: int = 96) -> tuple[np.ndarray, ...]:
    """Revolve a profile ``(r(t), y(t))`` about the y axis with smooth normals.

    Parameters
    ----------
    radius, height : numpy.ndarray
        Profile samples, ordered from bottom to top.
    n_seg : int
        Segments around the axis.

    Returns
    -------
    tuple of numpy.ndarray
        Vertices (V, 3), normals (V, 3), faces (F, 3).
    """
    phi = np.linspace(0.0, 2.0 * np.pi, n_seg + 1)
    dr = np.gradient(radius)
    dy = np.gradient(height)
    # outward normal of the profile curve in the (r, y) plane
    nr, ny = dy, -dr
    norm = np.hypot(nr, ny)
    nr, ny = nr / norm, ny / norm
    r2, p2 = np.meshgrid(radius, phi, indexing="ij")
    verts = np.stack([r2 * np.cos(p2), np.repeat(height[:, None], len(phi), 1), r2 * np.sin(p2)], -1)
    nr2, _ = np.meshgrid(nr, phi, indexing="ij")
    ny2 = np.repeat(ny[:, None], len(phi), 1)
    normals = np.stack([nr2 * np.cos(p2), ny2, nr2 * np.sin(p2)], -1)
    return verts.reshape(-1, 3), normals.reshape(-1, 3), grid_faces(len(radius), len(phi))


def disc(radius: float, y: float, up: bool, n_seg: int = 96) -> tuple[np.ndarray, ...]:
    """Flat horizontal disc (a cap) as a triangle fan.

    Parameters
    ----------
    radius : float
        Disc radius.
    y : float
        Height of the disc.
    up : bool
        Whether the normal points up (+y) or down.
    n_seg : int
        Segments around the rim.

    Returns
    -------
    tuple of numpy.ndarray
        Vertices, normals, faces.
    """
    phi = np.linspace(0.0, 2.0 * np.pi, n_seg, endpoint=False)
    rim = np.stack([radius * np.cos(phi), np.full_like(phi, y), radius * np.sin(phi)], 1)
    verts = np.vstack([[0.0, y, 0.0], rim])
    normals = np.tile([0.0, 1.0 if up else -1.0, 0.0], (len(verts), 1))
    k = np.arange(n_seg)
    faces = np.stack([np.zeros(n_seg, int), 1 + k, 1 + (k + 1) % n_seg], 1)
    return verts, normals, faces


def merge(*parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Concatenate meshes.

    Parameters
    ----------
    *parts : tuple of numpy.ndarray
        ``(verts, normals, faces)`` triples.

    Returns
    -------
    tuple of numpy.ndarray
        The merged ``(verts, normals, faces)``.
    """
    vs, ns, fs, off = [], [], [], 0
    for v, n, f in parts:
        vs.append(v)
        ns.append(n)
        fs.append(np.asarray(f) + off)
        off += len(v)
    return np.vstack(vs), np.vstack(ns), np.vstack(fs)


def make_meshes(folder: Path) -> dict[str, Path]:
    """Write the mesh shapes and the paper sweep as PLY files.

    All objects stand on the floor (y = 0) and are centred on the y axis.

    Parameters
    ----------
    folder : pathlib.Path
        Where to write the PLY files.

    Returns
    -------
    dict
        Name to file path for ``cylinder``, ``torus``, ``vase`` and ``sweep``.
    """
    paths = {}
    # capped cylinder: radius 0.7, height 1.6
    t = np.linspace(0.0, 1.6, 2)
    side = revolve(np.full_like(t, 0.7), t)
    side = (side[0], side[1] * np.array([1.0, 0.0, 1.0]), side[2])
    cyl = merge(side, disc(0.7, 0.0, up=False), disc(0.7, 1.6, up=True))
    # torus lying flat: major radius 0.8, minor radius 0.35
    big, small = 0.8, 0.35
    u = np.linspace(0.0, 2.0 * np.pi, 97)
    v = np.linspace(0.0, 2.0 * np.pi, 49)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    nrm = np.stack([np.cos(vv) * np.cos(uu), np.sin(vv), np.cos(vv) * np.sin(uu)], -1)
    ring = np.stack([big * np.cos(uu), np.full_like(uu, small), big * np.sin(uu)], -1)
    tor = ((ring + small * nrm).reshape(-1, 3), nrm.reshape(-1, 3), grid_faces(len(u), len(v)))
    # vase: a smooth revolved profile, closed at the top like a bottle
    h = np.linspace(0.0, 2.2, 89)
    r = 0.30 + 0.50 * np.exp(-(((h - 0.75) / 0.70) ** 2)) + 0.08 * np.exp(-(((h - 2.2) / 0.15) ** 2))
    vase = merge(revolve(r, h), disc(r[0], 0.0, up=False), disc(r[-1], 2.2, up=True))
    # seamless paper sweep: floor (y = 0) from z = +40 to BACKDROP_Z, a quarter
    # cylinder of COVE_RADIUS, then a vertical wall up to y = 30; x in [-40, 40]
    ang = np.linspace(0.0, np.pi / 2.0, 24)
    zs = np.concatenate([[40.0], BACKDROP_Z - COVE_RADIUS * np.sin(ang), [BACKDROP_Z - COVE_RADIUS]])
    ys = np.concatenate([[0.0], COVE_RADIUS * (1.0 - np.cos(ang)), [30.0]])
    nz = np.concatenate([[0.0], np.sin(ang), [1.0]])
    ny = np.concatenate([[1.0], np.cos(ang), [0.0]])
    xs = np.array([-40.0, 40.0])
    zz, xx = np.meshgrid(zs, xs, indexing="ij")
    yy, _ = np.meshgrid(ys, xs, indexing="ij")
    nzz, _ = np.meshgrid(nz, xs, indexing="ij")
    nyy, _ = np.meshgrid(ny, xs, indexing="ij")
    sweep = (
        np.stack([xx, yy, zz], -1).reshape(-1, 3),
        np.stack([np.zeros_like(nzz), nyy, nzz], -1).reshape(-1, 3),
        grid_faces(len(zs), 2),
    )
    for name, mesh in (("cylinder", cyl), ("torus", tor), ("vase", vase), ("sweep", sweep)):
        paths[name] = folder / f"{name}.ply"
        write_ply(paths[name], *mesh)
    return paths


# --------------------------------------------------------------------------- scene


@dataclass
class Condition:
    """One render's conditions (a row of renders.csv without the bookkeeping)."""

    shape: str
    material: str
    roughness: float | None
    key: str
    env: str
    key_share: float
    fill: bool
    key_azimuth_deg: float
    key_elevation_deg: float
    fill_azimuth_deg: float
    camera_elevation_deg: float
    object_yaw_deg: float
    target_fill: float
    floor: str
    exposure_stops: float
    jpeg_quality: int


def draw_condition(rng: np.random.Generator, exposure_stops: float, allow_jpeg: bool) -> Condition:
    """Draw one render's conditions from the condition grid.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random source.
    exposure_stops : float
        Offset from the metered exposure, in stops.
    allow_jpeg : bool
        Whether the render may be JPEG-compressed (main set only).

    Returns
    -------
    Condition
        The drawn conditions.
    """
    shape = SHAPES[rng.integers(len(SHAPES))]
    material = MATERIALS[rng.integers(len(MATERIALS))]
    if material == "roughplastic":
        roughness = float(PLASTIC_ALPHAS[rng.integers(3)])
    elif material == "principled":
        roughness = float(PRINCIPLED_ROUGHNESS[rng.integers(3)])
    else:
        roughness = None
    side = 1.0 if rng.random() < 0.5 else -1.0
    if rng.random() < P_COLOURED_FLOOR:
        floor = COLOURED_FLOORS[rng.integers(len(COLOURED_FLOORS))]
    else:
        floor = NEUTRAL_FLOORS[rng.integers(len(NEUTRAL_FLOORS))]
    if shape == "cube":  # three faces in view: avoid facing the camera square on
        yaw = float(rng.uniform(25.0, 65.0))
    else:
        yaw = float(rng.uniform(0.0, 360.0))
    jpeg = 0
    u = rng.random()
    if allow_jpeg:
        acc = 0.0
        for quality, share in JPEG_SHARE.items():
            acc += share
            if u < acc:
                jpeg = quality
                break
    return Condition(
        shape=shape,
        material=material,
        roughness=roughness,
        key=KEYS[rng.integers(len(KEYS))],
        env=ENVS[rng.integers(len(ENVS))],
        key_share=float(KEY_SHARES[rng.integers(len(KEY_SHARES))]),
        fill=bool(rng.random() < P_FILL),
        key_azimuth_deg=side * float(rng.uniform(35.0, 65.0)),
        key_elevation_deg=float(rng.uniform(30.0, 55.0)),
        fill_azimuth_deg=-side * float(rng.uniform(30.0, 50.0)),
        camera_elevation_deg=float(rng.uniform(12.0, 35.0)),
        object_yaw_deg=yaw,
        target_fill=float(rng.uniform(0.35, 0.60)),
        floor=floor,
        exposure_stops=exposure_stops,
        jpeg_quality=jpeg,
    )


def direction(azimuth_deg: float, elevation_deg: float) -> np.ndarray:
    """Unit vector from the object towards a point at the given angles.

    Azimuth 0 is the camera side (+z), positive azimuth towards +x.

    Parameters
    ----------
    azimuth_deg, elevation_deg : float
        Angles in degrees.

    Returns
    -------
    numpy.ndarray
        Unit 3-vector.
    """
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return np.array([math.sin(az) * math.cos(el), math.sin(el), math.cos(az) * math.cos(el)])


def object_centre(shape: str) -> np.ndarray:
    """Centre of the object's bounding box (the camera's aim point)."""
    heights = {"sphere": 2.0, "cube": 1.6, "cylinder": 1.6, "torus": 0.7, "vase": 2.2}
    return np.array([0.0, heights[shape] / 2.0, 0.0])


def object_dict(shape: str, yaw: float, meshes: dict[str, Path], bsdf: dict) -> dict:
    """Mitsuba description of the object.

    Parameters
    ----------
    shape : str
        One of SHAPES.
    yaw : float
        Rotation about the vertical axis, degrees.
    meshes : dict
        PLY paths from ``make_meshes``.
    bsdf : dict
        Material (or ``None`` fields replaced by the caller).

    Returns
    -------
    dict
        Shape dictionary for ``mi.load_dict``.
    """
    T = mi.ScalarTransform4f
    if shape == "sphere":
        d = {"type": "sphere", "center": [0.0, 1.0, 0.0], "radius": 1.0}
    elif shape == "cube":
        d = {
            "type": "cube",
            "to_world": T().translate([0.0, 0.8, 0.0]) @ T().rotate([0, 1, 0], yaw) @ T().scale(0.8),
        }
    else:
        d = {
            "type": "ply",
            "filename": str(meshes[shape]),
            "face_normals": False,
            "to_world": T().rotate([0, 1, 0], yaw),
        }
    d["bsdf"] = bsdf
    return d


def ggx_alpha(cond: Condition) -> float | str:
    """GGX alpha of the object's specular lobe (principled: roughness squared).

    Parameters
    ----------
    cond : Condition
        Render conditions.

    Returns
    -------
    float or str
        The alpha, or ``""`` for the diffuse material.
    """
    if cond.material == "roughplastic":
        return cond.roughness
    if cond.material == "principled":
        return round(cond.roughness**2, 4)
    return ""


def material_dict(material: str, roughness: float | None, albedo: list[float]) -> dict:
    """Mitsuba BSDF for the object.

    Parameters
    ----------
    material : str
        ``diffuse``, ``roughplastic`` or ``principled``.
    roughness : float or None
        GGX alpha (roughplastic) or principled roughness.
    albedo : list of float
        Linear RGB albedo.

    Returns
    -------
    dict
        BSDF dictionary.
    """
    rgb = {"type": "rgb", "value": albedo}
    if material == "diffuse":
        return {"type": "diffuse", "reflectance": rgb}
    if material == "roughplastic":
        return {
            "type": "roughplastic",
            "distribution": "ggx",
            "alpha": roughness,
            "int_ior": 1.49,
            "ext_ior": 1.000277,
            "nonlinear": False,
            "diffuse_reflectance": rgb,
        }
    return {
        "type": "principled",
        "base_color": rgb,
        "roughness": roughness,
        "metallic": 0.0,
        "specular": 0.5,
    }


def rect_irradiance(centre: np.ndarray, normal: np.ndarray, light_pos: np.ndarray, half: float) -> float:
    """Irradiance at a point from a unit-radiance square light facing the point.

    Parameters
    ----------
    centre : numpy.ndarray
        Receiving point.
    normal : numpy.ndarray
        Receiver normal.
    light_pos : numpy.ndarray
        Centre of the square light.
    half : float
        Half side of the square.

    Returns
    -------
    float
        Irradiance for radiance 1 (numerical quadrature, 24 x 24 points).
    """
    axis = centre - light_pos
    axis = axis / np.linalg.norm(axis)
    helper = np.array([0.0, 1.0, 0.0]) if abs(axis[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    e1 = np.cross(axis, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(axis, e1)
    n = 24
    s = (np.arange(n) + 0.5) / n * 2.0 - 1.0
    a, b = np.meshgrid(s * half, s * half)
    pts = light_pos + a[..., None] * e1 + b[..., None] * e2
    d = centre - pts
    r2 = (d**2).sum(-1)
    dn = d / np.sqrt(r2)[..., None]
    cos_l = np.clip(dn @ axis, 0.0, None)
    cos_r = np.clip(-(dn @ normal), 0.0, None)
    area = (2.0 * half / n) ** 2
    return float((cos_l * cos_r / r2).sum() * area)


def env_dict(env: str, radiance_scale: float) -> dict:
    """Environment emitter: uniform sky or a two-tone (top bright, bottom dark) dome.

    Parameters
    ----------
    env : str
        ``constant`` or ``gradient``.
    radiance_scale : float
        Radiance of the constant sky, or of the gradient dome's zenith.

    Returns
    -------
    dict
        Emitter dictionary.
    """
    if env == "constant":
        return {"type": "constant", "radiance": {"type": "rgb", "value": radiance_scale}}
    rows = 64
    theta = (np.arange(rows) + 0.5) / rows * np.pi  # 0 at the zenith (+y)
    t = (np.cos(theta) + 1.0) / 2.0
    value = GRADIENT_BOTTOM + (1.0 - GRADIENT_BOTTOM) * t
    img = np.repeat(value[:, None], 2 * rows, 1)[..., None].repeat(3, -1) * radiance_scale
    return {"type": "envmap", "bitmap": mi.Bitmap(img.astype(np.float32))}


def env_irradiance(env: str, normal: np.ndarray) -> float:
    """Unoccluded irradiance on a surface from the environment at zenith radiance 1.

    Parameters
    ----------
    env : str
        ``constant`` or ``gradient``.
    normal : numpy.ndarray
        Surface normal.

    Returns
    -------
    float
        Irradiance.
    """
    if env == "constant":
        return math.pi
    top, bottom = 1.0, GRADIENT_BOTTOM
    # L(d) = bottom + (top - bottom) (d_y + 1) / 2, integrated against the cosine
    return math.pi * (top + bottom) / 2.0 + (top - bottom) * math.pi * normal[1] / 3.0


def lights(cond: Condition, centre: np.ndarray, card_normal: np.ndarray) -> dict:
    """Key, fill and environment emitters, balanced on the metering card.

    Parameters
    ----------
    cond : Condition
        Render conditions.
    centre : numpy.ndarray
        Object centre (where the metering card sits).
    card_normal : numpy.ndarray
        Normal of the metering card (towards the camera).

    Returns
    -------
    dict
        Emitter entries for the scene dictionary.
    """
    out = {}
    key_dir = direction(cond.key_azimuth_deg, cond.key_elevation_deg)
    cos_key = max(float(key_dir @ card_normal), 0.05)
    key_e = cond.key_share  # key irradiance on the card
    env_e = 1.0 - cond.key_share  # unoccluded environment irradiance on the card
    if cond.key == "sun":
        out["key"] = {
            "type": "directional",
            "direction": [float(v) for v in -key_dir],
            "irradiance": {"type": "rgb", "value": key_e / cos_key},
        }
    else:
        half, dist = (0.4, 6.0) if cond.key == "small" else (1.2, 6.0)
        pos = centre + dist * key_dir
        e_unit = rect_irradiance(centre, card_normal, pos, half)
        out["key"] = rect_light(pos, centre, half, key_e / e_unit)
    if cond.fill:
        fill_dir = direction(cond.fill_azimuth_deg, 15.0)
        pos = centre + 6.0 * fill_dir
        e_unit = rect_irradiance(centre, card_normal, pos, 1.5)
        out["fill"] = rect_light(pos, centre, 1.5, FILL_RATIO * key_e / e_unit)
    out["env"] = env_dict(cond.env, env_e / env_irradiance(cond.env, card_normal))
    return out


def rect_light(pos: np.ndarray, target: np.ndarray, half: float, radiance: float) -> dict:
    """A square area light at ``pos`` facing ``target``.

    Parameters
    ----------
    pos, target : numpy.ndarray
        Light centre and aim point.
    half : float
        Half side of the square.
    radiance : float
        Emitted (neutral) radiance.

    Returns
    -------
    dict
        Rectangle shape with an area emitter.
    """
    T = mi.ScalarTransform4f
    fwd = target - pos
    up = [0.0, 1.0, 0.0] if abs(fwd[1]) < 0.9 * np.linalg.norm(fwd) else [1.0, 0.0, 0.0]
    to_world = T().look_at(origin=list(pos), target=list(target), up=up) @ T().scale([half, half, 1.0])
    return {
        "type": "rectangle",
        "to_world": to_world,
        "emitter": {"type": "area", "radiance": {"type": "rgb", "value": radiance}},
        "bsdf": {"type": "diffuse", "reflectance": {"type": "rgb", "value": 0.0}},
    }


def camera_dict(centre: np.ndarray, elevation: float, dist: float, res: int, spp: int, fov: float) -> dict:
    """Perspective camera on the +z side aimed at ``centre``.

    Parameters
    ----------
    centre : numpy.ndarray
        Aim point.
    elevation : float
        Camera elevation, degrees.
    dist : float
        Distance from the aim point.
    res : int
        Film width and height.
    spp : int
        Samples per pixel.
    fov : float
        Horizontal field of view in degrees.

    Returns
    -------
    dict
        Sensor dictionary (box pixel filter, linear RGB film).
    """
    T = mi.ScalarTransform4f
    pos = centre + dist * direction(0.0, elevation)
    return {
        "type": "perspective",
        "fov": fov,
        "fov_axis": "x",
        "near_clip": 0.01,
        "far_clip": 200.0,
        "to_world": T().look_at(origin=list(pos), target=list(centre), up=[0, 1, 0]),
        "sampler": {"type": "multijitter", "sample_count": spp},
        "film": {
            "type": "hdrfilm",
            "width": res,
            "height": res,
            "rfilter": {"type": "box"},
            "pixel_format": "rgb",
        },
    }


def floor_dict(meshes: dict[str, Path], floor_hex: str | None) -> dict:
    """The paper sweep (floor + backdrop); black when ``floor_hex`` is None."""
    value = hex_to_linear(floor_hex) if floor_hex else [0.0, 0.0, 0.0]
    return {
        "type": "ply",
        "filename": str(meshes["sweep"]),
        "face_normals": False,
        "bsdf": {"type": "diffuse", "reflectance": {"type": "rgb", "value": value}},
    }


def render(scene_dict: dict, spp: int, seed: int) -> np.ndarray:
    """Render a scene dictionary and return the linear RGB image as float64."""
    # serial loading without object merging keeps the dictionary order of shapes and
    # emitters, which the sampler streams depend on: renders are reproducible
    scene = mi.load_dict(scene_dict, parallel=False, optimize=False)
    img = mi.render(scene, spp=spp, seed=seed)
    return np.array(img, dtype=np.float64)[..., :3]


def coverage(
    cond: Condition, meshes: dict[str, Path], dist: float, res: int, spp: int, seed: int
) -> np.ndarray:
    """Fraction of each pixel covered by the object.

    The object is made a unit emitter and everything else black; a path length
    of 1 records only directly visible emission, so with a box pixel filter
    the pixel value is the object's coverage (occlusion by the floor included).

    Returns
    -------
    numpy.ndarray
        (res, res) coverage in [0, 1].
    """
    centre = object_centre(cond.shape)
    obj = object_dict(cond.shape, cond.object_yaw_deg, meshes, {"type": "diffuse"})
    obj["emitter"] = {"type": "area", "radiance": {"type": "rgb", "value": 1.0}}
    scene = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 1},
        "sensor": camera_dict(centre, cond.camera_elevation_deg, dist, res, spp, FOV_DEG),
        "object": obj,
        "sweep": floor_dict(meshes, None),
    }
    return render(scene, spp, seed).mean(-1)


def frame(cond: Condition, meshes: dict[str, Path], seed: int) -> float:
    """Camera distance at which the object covers ``cond.target_fill`` of the frame.

    The distance is refined on three 32 x 32 coverage renders (projected area
    goes as 1 / distance^2); if the object then touches the outermost 32-pixel
    row or column (3 pixels of the final frame), the camera moves back in 5 %
    steps until it does not.

    Returns
    -------
    float
        Camera distance.
    """
    dist = 4.5
    small = RES // 3
    for _ in range(3):
        cov = coverage(cond, meshes, dist, small, 16, seed) >= 0.5
        frac = max(cov.mean(), 1e-3)
        dist *= math.sqrt(frac / cond.target_fill)
    for _ in range(20):
        cov = coverage(cond, meshes, dist, small, 16, seed) >= 0.5
        rows, cols = np.any(cov, 1), np.any(cov, 0)
        if not (rows[0] or rows[-1] or cols[0] or cols[-1]):
            break
        dist *= 1.05
    return dist


def meter(cond: Condition, meshes: dict[str, Path], dist: float, seed: int) -> float:
    """Incident-light metering: luminance of a white card at the object.

    A perfectly white (albedo 1) Lambertian card, 0.2 x 0.2 units, is placed at
    the object's centre facing the camera, with the object removed; its mean
    luminance (Rec. 709 weights of linear sRGB) is measured with a narrow camera
    that sees only the card.  Dividing the render by this value makes the
    card read exactly 1.0, i.e. the metered exposure.

    Returns
    -------
    float
        Linear luminance of the white card.
    """
    T = mi.ScalarTransform4f
    centre = object_centre(cond.shape)
    to_cam = direction(0.0, cond.camera_elevation_deg)
    card = {
        "type": "rectangle",
        "to_world": T().look_at(origin=list(centre), target=list(centre + to_cam), up=[0, 1, 0])
        @ T().scale([0.1, 0.1, 1.0]),
        "bsdf": {"type": "diffuse", "reflectance": {"type": "rgb", "value": 1.0}},
    }
    scene = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": MAX_DEPTH},
        "sensor": camera_dict(
            centre,
            cond.camera_elevation_deg,
            dist,
            METER_RES,
            METER_SPP,
            2.0 * math.degrees(math.atan(0.08 / dist)),
        ),
        "card": card,
        "sweep": floor_dict(meshes, cond.floor),
        **lights(cond, centre, to_cam),
    }
    img = render(scene, METER_SPP, seed)
    return float((img @ np.array([0.2126, 0.7152, 0.0722])).mean())


def beauty(
    cond: Condition, albedo: list[float], meshes: dict[str, Path], dist: float, spp: int, seed: int
) -> np.ndarray:
    """The linear RGB product shot before exposure.

    Returns
    -------
    numpy.ndarray
        (RES, RES, 3) linear RGB.
    """
    centre = object_centre(cond.shape)
    to_cam = direction(0.0, cond.camera_elevation_deg)
    scene = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": MAX_DEPTH},
        "sensor": camera_dict(centre, cond.camera_elevation_deg, dist, RES, spp, FOV_DEG),
        "object": object_dict(
            cond.shape, cond.object_yaw_deg, meshes, material_dict(cond.material, cond.roughness, albedo)
        ),
        "sweep": floor_dict(meshes, cond.floor),
        **lights(cond, centre, to_cam),
    }
    return render(scene, spp, seed)


def despeckle(linear: np.ndarray, cov: np.ndarray, white: float) -> np.ndarray:
    """Remove fireflies from pixels the object does not touch.

    Diffuse floor points that see a small light reflected in a glossy object
    (a caustic) are sampled rarely by a path tracer and show up as isolated
    bright pixels.  A background pixel (object coverage exactly 0) is a
    firefly when its luminance is the maximum of its 3 x 3 neighbourhood, more
    than 1.3 times the median of its 8 neighbours, and more than 2 % of the white
    card's luminance above that median; it is replaced by the per-channel
    median of its neighbours.  Two passes (pairs of fireflies).  Object and
    object-edge pixels are never changed.

    Parameters
    ----------
    linear : numpy.ndarray
        (H, W, 3) linear render.
    cov : numpy.ndarray
        (H, W) object coverage.
    white : float
        Luminance of the metering card in the same render units.

    Returns
    -------
    numpy.ndarray
        The cleaned render (a copy).
    """
    out = linear.copy()
    h, w = linear.shape[:2]
    shifts = [(dy, dx) for dy in range(3) for dx in range(3) if (dy, dx) != (1, 1)]
    lum_w = np.array([0.2126, 0.7152, 0.0722])
    for _ in range(2):
        pad = np.pad(out, ((1, 1), (1, 1), (0, 0)), mode="edge")
        neigh = np.stack([pad[dy : dy + h, dx : dx + w] for dy, dx in shifts])
        lum, nlum = out @ lum_w, neigh @ lum_w
        med = np.median(nlum, axis=0)
        spike = (lum >= nlum.max(0)) & (lum > 1.3 * med) & (lum - med > 0.02 * white) & (cov == 0.0)
        out[spike] = np.median(neigh, axis=0)[spike]
    return out


def jpeg_roundtrip(img: np.ndarray, quality: int) -> np.ndarray:
    """Encode with Pillow JPEG (4:2:0 chroma subsampling) and decode again."""
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality, subsampling=2)
    buf.seek(0)
    return np.array(Image.open(buf).convert("RGB"))


# --------------------------------------------------------------------------- main


def render_one(job: dict, meshes: dict[str, Path], spp: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Frame, meter, render and encode one planned render.

    Parameters
    ----------
    job : dict
        One entry of ``plan``.
    meshes : dict
        PLY paths from ``make_meshes``.
    spp : int
        Samples per pixel of the beauty render.

    Returns
    -------
    image : numpy.ndarray
        (RES, RES, 3) uint8 sRGB.
    mask : numpy.ndarray
        (RES, RES) bool, object coverage >= 0.5.
    row : dict
        The render's renders.csv fields (without ``index``).
    """
    cond: Condition = job["cond"]
    seed = job["seed"]
    dist = frame(cond, meshes, seed)
    card = meter(cond, meshes, dist, seed)
    cov = coverage(cond, meshes, dist, RES, MASK_SPP, seed)
    mask = cov >= 0.5
    if not mask.any():
        raise RuntimeError(f"empty mask in planned render {job['plan_index']}")
    linear = beauty(cond, hex_to_linear(job["hex"]), meshes, dist, spp, seed)
    cleaned = despeckle(linear, cov, card)
    n_spikes = int((cleaned != linear).any(-1).sum())
    img = linear_to_srgb8(cleaned * (2.0**cond.exposure_stops) / card)
    if cond.jpeg_quality:
        img = jpeg_roundtrip(img, cond.jpeg_quality)
    row = {k: job[k] for k in ("set", "system", "color_row", "color_name", "hex")}
    c = asdict(cond)
    row.update(
        shape=c["shape"],
        material=c["material"],
        roughness="" if c["roughness"] is None else c["roughness"],
        ggx_alpha=ggx_alpha(cond),
        lighting=f"{cond.key}+{cond.env}" + ("+fill" if cond.fill else ""),
        key=cond.key,
        env=cond.env,
        key_share=cond.key_share,
        fill_ratio=FILL_RATIO if cond.fill else 0.0,
        floor=cond.floor,
        exposure_stops=cond.exposure_stops,
        jpeg_quality=cond.jpeg_quality,
        spp=spp,
        seed=seed,
        key_azimuth_deg=round(cond.key_azimuth_deg, 2),
        key_elevation_deg=round(cond.key_elevation_deg, 2),
        fill_azimuth_deg=round(cond.fill_azimuth_deg, 2) if cond.fill else "",
        camera_elevation_deg=round(cond.camera_elevation_deg, 2),
        camera_distance=round(dist, 4),
        object_yaw_deg=round(cond.object_yaw_deg, 2),
        target_fill=round(cond.target_fill, 4),
        mask_fill=round(float(mask.mean()), 4),
        white_card_luminance=round(card, 6),
        despeckled_pixels=n_spikes,
        clipped_object_share=round(float((img[mask] == 255).any(-1).mean()), 4),
        plan_index=job["plan_index"],
    )
    return img, mask, row


def plan(seed: int, quick: bool) -> list[dict]:
    """List every render with its colour and drawn conditions.

    Main set: every ISCC-NBS L2 colour 8 times, every L3 and CSS3 colour twice.
    Exposure set: every L2 colour at each offset in EXPOSURE_OFFSETS.

    Parameters
    ----------
    seed : int
        Seed of the condition draws.
    quick : bool
        Keep only every 40th render.

    Returns
    -------
    list of dict
        One entry per render.
    """
    rng = np.random.default_rng(seed)
    colours = load_colours()
    repeats = {"iscc-nbs-l2": 8, "iscc-nbs-l3": 2, "css3": 2}
    jobs = []
    for system, row, name, hex_code in colours:
        for _ in range(repeats[system]):
            jobs.append(("main", system, row, name, hex_code, draw_condition(rng, 0.0, True)))
    for system, row, name, hex_code in colours:
        if system != "iscc-nbs-l2":
            continue
        for stops in EXPOSURE_OFFSETS:
            jobs.append(("exposure", system, row, name, hex_code, draw_condition(rng, stops, False)))
    out = []
    for i, (set_name, system, row, name, hex_code, cond) in enumerate(jobs):
        out.append(
            {
                "set": set_name,
                "system": system,
                "color_row": row,
                "color_name": name,
                "hex": hex_code,
                "seed": int(rng.integers(2**31 - 1)),
                "cond": cond,
                "plan_index": i,
            }
        )
    if quick:
        out = out[::40]
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=20250611, help="seed of all random draws")
    parser.add_argument("--quick", action="store_true", help="every 40th render at 36 spp")
    parser.add_argument("--threads", type=int, default=0, help="render threads (0: Mitsuba's default)")
    args = parser.parse_args(argv)
    if args.threads:
        dr.set_thread_count(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    spp = 36 if args.quick else SPP
    jobs = plan(args.seed, args.quick)
    images = np.zeros((len(jobs), RES, RES, 3), np.uint8)
    masks = np.zeros((len(jobs), RES, RES), bool)
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        meshes = make_meshes(Path(tmp))
        for n, job in enumerate(jobs):
            images[n], masks[n], row = render_one(job, meshes, spp)
            rows.append({"index": n, **row})
            if n % 25 == 0:
                print(f"{n}/{len(jobs)} {time.time() - t0:.1f}s", file=sys.stderr, flush=True)
    np.savez_compressed(args.out / "renders.npz", images=images, masks=masks)
    with open(args.out / "renders.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"{len(jobs)} renders, wall {time.time() - t0:.1f} s, "
        f"cpu {usage.ru_utime + usage.ru_stime:.1f} s, "
        f"npz {os.path.getsize(args.out / 'renders.npz') / 1e6:.2f} MB",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
