"""The sketch library: shipped line art, rasterising SVG, importing and vetting images.

A sketch is the line art of a base concept: black lines on white, ``(H, W)`` uint8
luminance, 1024 px on its long side (`LONG_SIDE`). The shipped library lives in
``assets/sketches/``: one hand-drawn SVG per base concept, its PNG rasterised by
`rasterize_svg`, and ``manifest.csv`` mapping file slugs to Table 9 base concepts.

Imported images go through `check_line_art` (rejects photos, colored pictures, blank
or mostly-dark images with the reason) and `normalize_sketch` (grayscale, white paper,
cropped to the drawing, resized); `import_sketch_file` does both for a file. Nothing
here touches the database.

Run ``python -m annotation.sketches.importing`` to re-rasterise the shipped PNGs from their SVGs.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import resvg_py
from PIL import Image, ImageOps
from scipy import ndimage
from skimage.color import rgb2gray

from evaluation.concepts import ASSETS, load_concepts
from storage.shown import shown

SKETCH_DIR = ASSETS / "sketches"
MANIFEST_CSV = SKETCH_DIR / "manifest.csv"
LONG_SIDE = 1024
"""Pixels on the long side of every sketch."""

SKETCH_PROMPT = (
    "A simple cartoon black outline drawing of {concept}, without coloring, without shadow, white background."
)
"""The paper's sketch-generation prompt (Appendix B.2)."""

MIN_PAPER_LEVEL = 128
"""The paper (median luminance, 0-255) must be at least this light."""
MAX_INK_FRACTION = 0.35
"""Line art covers at most this share of the picture with dark (< 128) pixels."""
MIN_INK_FRACTION = 0.002
"""Below this share of dark pixels there is no drawing to color."""
MAX_MIDTONE_FRACTION = 0.12
"""Share of mid-grey pixels (64-191) allowed: anti-aliasing along lines only; a photo or
a shaded drawing has far more. Our own sketches stay under 0.03."""
MAX_COLORED_FRACTION = 0.01
"""Share of colored pixels allowed (`COLORED_CHROMA` or more): stray JPEG fringes only."""
COLORED_CHROMA = 40
"""A pixel whose max minus min sRGB channel (0-255) reaches this counts as colored."""
MIN_REGION_FRACTION = 0.005
"""A region to color is a 4-connected white area of at least this share of the drawing's
extent (the bounding box of its dark pixels). Line art splits the paper into two or more:
the outside and what its lines close (the frame closes regions too). Specks and blobs
leave the paper in one piece. Measured: our 24 sketches have 4-26 such regions; outlines
drawn by Pillow pass (tests); salt-and-pepper noise (1-10 %) and scattered disks have
1; Canny edge maps of 12 scikit-image sample images have 1, except brick (25), text (3)
and astronaut (2), whose edges do close regions."""
CROP_MARGIN = 0.04
"""White margin kept around the drawing when cropping, as a share of its long side."""
MAX_ASPECT = 4.0
"""A sketch's long side is at most this many times its short side, after cropping (ours are
at most 4:3); a thin strip leaves nothing to color."""

_SLUG = re.compile(r"[^a-z0-9]+")
# SVG parts that could reach outside the file (resvg reads an <image>'s local path) or
# that line art never needs; an SVG with any of them is refused (`check_svg_self_contained`).
_SVG_REFUSED_ELEMENTS = ("script", "foreignObject", "image", "iframe", "audio", "video")
_SVG_URL = re.compile(r"url\(\s*['\"]?\s*([^'\")\s]*)", re.IGNORECASE)


class NotLineArtError(ValueError):
    """An image was rejected as a sketch; the message says why."""


@dataclass(frozen=True)
class SketchEntry:
    """One row of the shipped manifest.

    Attributes
    ----------
    slug : str
        File stem, e.g. ``"bell-pepper"``.
    concept : str
        The Table 9 base concept, e.g. ``"bell pepper"``.
    category : str
        Its Table 9 category.
    svg : Path
        The editable source.
    png : Path
        The rasterised sketch, `LONG_SIDE` px on the long side.
    """

    slug: str
    concept: str
    category: str
    svg: Path
    png: Path


@dataclass(frozen=True)
class LineArtStats:
    """Measures `check_line_art` bases its verdict on (shares of all pixels, in [0, 1])."""

    ink_fraction: float
    midtone_fraction: float
    colored_fraction: float
    paper_level: float
    regions: int = 0
    """White regions of `MIN_REGION_FRACTION` or more of the drawing's extent (a count)."""


@dataclass(frozen=True)
class ImportedSketch:
    """A normalised sketch ready to store.

    Attributes
    ----------
    png : bytes
        8-bit grayscale PNG.
    sha256 : str
        Hex digest of `png`.
    width, height : int
        Pixels; the long side is `LONG_SIDE`.
    stats : LineArtStats
        Of the image as imported.
    source_long_side : int or None
        Pixels on the long side of a raster file as it came (None for SVG, drawn at size).
    """

    png: bytes
    sha256: str
    width: int
    height: int
    stats: LineArtStats
    source_long_side: int | None = None


def slugify(concept: str) -> str:
    """File stem for a concept name: ``"bell pepper"`` -> ``"bell-pepper"``."""
    slug = _SLUG.sub("-", concept.strip().lower()).strip("-")
    if not slug:
        raise ValueError(f"`concept` must contain a letter or digit, got {shown(concept)}")
    return slug


def sketch_prompt(concept: str) -> str:
    """The paper's text-to-image prompt for a sketch of `concept`."""
    return SKETCH_PROMPT.format(concept=concept)


def load_manifest(path: str | Path = MANIFEST_CSV) -> list[SketchEntry]:
    """Read the sketch manifest and check it against Table 9.

    Parameters
    ----------
    path : str or Path
        CSV with columns ``slug, concept, category``; files sit beside it as
        ``<slug>.svg`` and ``<slug>.png``.

    Returns
    -------
    list of SketchEntry
        In file order.

    Raises
    ------
    ValueError
        If a concept is not a Table 9 base concept, its category disagrees, a slug is
        not `slugify` of its concept, or a concept appears twice.
    """
    path = Path(path)
    bases = {c.base: c.category for c in load_concepts()}
    entries: list[SketchEntry] = []
    with open(path, newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            slug, concept, category = row["slug"], row["concept"], row["category"]
            if bases.get(concept) != category:
                raise ValueError(
                    f"{path.name} line {line}: ({concept!r}, {category!r}) is not a Table 9 "
                    f"base concept with its category"
                )
            if slug != slugify(concept):
                raise ValueError(
                    f"{path.name} line {line}: slug must be {slugify(concept)!r}, got {shown(slug)}"
                )
            entries.append(
                SketchEntry(slug, concept, category, path.parent / f"{slug}.svg", path.parent / f"{slug}.png")
            )
    concepts = [e.concept for e in entries]
    if len(set(concepts)) != len(concepts):
        raise ValueError(f"{path.name} lists a concept twice")
    return entries


def concept_for_filename(name: str, base_concepts: list[str]) -> str | None:
    """Match a file name (``"Bell Pepper.png"``, ``"bell-pepper.svg"``) to a base concept.

    Returns the concept whose `slugify` equals the slug of the file's stem, else None.
    """
    stem = Path(name).stem
    by_slug = {slugify(c): c for c in base_concepts}
    return by_slug.get(slugify(stem)) if _SLUG.sub("", stem.lower()) else None


def check_svg_self_contained(svg: str) -> None:
    """Refuse SVG markup that refers to anything outside itself or embeds pictures or code.

    resvg renders an ``<image href="/any/local/file.png">`` from the server's disk, so an
    imported SVG could copy a server file into a sketch; scripts and embedded HTML are
    never run by resvg but have no place in line art either. Refused (the paper is
    silent; sketches are vector outlines): entity declarations, the elements of
    `_SVG_REFUSED_ELEMENTS` (pictures, embedded or linked, included: import a picture as
    PNG instead), ``href`` attributes and ``url(...)`` references that do not point inside
    the file (``#id``), and ``@import`` in style sheets.

    Raises
    ------
    ValueError
        Naming what was found.
    """
    if re.search(r"<!ENTITY", svg, re.IGNORECASE):
        raise ValueError("the SVG declares XML entities; sketches must be plain SVG")
    try:
        root = ElementTree.fromstring(svg)
    except ElementTree.ParseError as error:
        raise ValueError(f"the SVG is not well-formed XML: {error}") from None
    for element in root.iter():
        name = str(element.tag).rsplit("}", 1)[-1]
        if name in _SVG_REFUSED_ELEMENTS:
            raise ValueError(
                f"the SVG contains {'an' if name[:1] in 'aeiou' else 'a'} <{name}> element; sketches are outlines "
                "only, with no pictures, scripts or embedded documents"
            )
        texts = [(key.rsplit("}", 1)[-1], value) for key, value in element.attrib.items()]
        texts.append(("text", element.text or ""))
        for key, value in texts:
            targets = [value.strip()] if key == "href" else _SVG_URL.findall(value)
            outside = [t for t in targets if not t.startswith("#")]
            if outside or "@import" in value:
                shown = outside[0] if outside else "@import"
                raise ValueError(
                    f"the SVG refers to something outside the file "
                    f"({shown[:80]!r} in <{name}>); only references to its "
                    "own elements (#id) are allowed"
                )


def rasterize_svg(svg: str | bytes, long_side: int = LONG_SIDE) -> np.ndarray:
    """Render SVG line art to grayscale with resvg.

    Parameters
    ----------
    svg : str or bytes
        SVG markup (UTF-8).
    long_side : int
        Pixels on the long side of the result; the aspect ratio is kept.

    Returns
    -------
    ndarray, shape (H, W), uint8
        Luminance in [0, 255] on a white background, anti-aliased.

    Raises
    ------
    ValueError
        If resvg cannot parse or render `svg`, or it is not self-contained
        (`check_svg_self_contained`).
    """
    try:
        text = svg.decode("utf-8") if isinstance(svg, bytes) else svg
    except UnicodeDecodeError:  # it read "'utf-8' codec can't decode byte 0x89…" (outside probe 218)
        raise ValueError(
            "it is not an SVG file: an SVG is text (UTF-8), and this file's bytes are not"
        ) from None
    if long_side < 16:
        raise ValueError(f"`long_side` must be >= 16 px, got {long_side}")
    check_svg_self_contained(text)
    # Fitted into a long_side square (resvg keeps the aspect ratio): never drawn at the size
    # the file declares, which costs 4 bytes a pixel (a 223-byte SVG of 50,000 x 50,000).
    png = resvg_py.svg_to_bytes(svg_string=text, background="#ffffff", width=long_side, height=long_side)
    return np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.uint8).copy()


def encode_png(sketch: np.ndarray) -> bytes:
    """Encode a ``(H, W)`` uint8 sketch as an 8-bit grayscale PNG."""
    sketch = np.asarray(sketch)
    if sketch.dtype != np.uint8 or sketch.ndim != 2:
        raise ValueError(f"`sketch` must be (H, W) uint8, got {sketch.shape} {sketch.dtype}")
    buf = io.BytesIO()
    Image.fromarray(sketch, "L").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def png_data_url(png: bytes) -> str:
    """``data:image/png;base64,...`` for PNG bytes, as the coloring canvas loads sketches."""
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"`png` must be PNG bytes, got {shown(png[:8])}")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def load_sketch_png(path: str | Path) -> np.ndarray:
    """Read a stored sketch PNG as ``(H, W)`` uint8 luminance."""
    with Image.open(path) as image:
        return np.asarray(image.convert("L"), dtype=np.uint8).copy()


def line_art_stats(image: Image.Image | np.ndarray) -> LineArtStats:
    """Measure ink, mid-grey and colored shares of an image (see `check_line_art`).

    Parameters
    ----------
    image : PIL.Image or ndarray, shape (H, W) or (H, W, 3|4), uint8
        Transparency is composited onto white first.
    """
    rgb = _to_rgb(image)
    spread = rgb.max(axis=2).astype(np.int16) - rgb.min(axis=2)
    raw = _gray(rgb)
    gray = _stretch_levels(raw)
    return LineArtStats(
        ink_fraction=float(np.mean(gray < 128)),
        midtone_fraction=float(np.mean((gray >= 64) & (gray < 192))),
        colored_fraction=float(np.mean(spread >= COLORED_CHROMA)),
        paper_level=float(np.median(raw)),
        regions=_regions(gray),
    )


def _regions(gray: np.ndarray) -> int:
    """White 4-connected regions of at least `MIN_REGION_FRACTION` of the bounding box of
    the dark (< 128) pixels of `gray` ``(H, W)`` uint8; 0 without dark pixels."""
    ink = gray < 128
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not rows.size:
        return 0
    extent = (rows[-1] - rows[0] + 1) * (cols[-1] - cols[0] + 1)
    labels = np.empty(gray.shape, np.int32)  # half of the default int64 on a 16 Mpx import
    count = ndimage.label(~ink, output=labels)
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    return int(np.count_nonzero(sizes >= MIN_REGION_FRACTION * extent))


def check_line_art(image: Image.Image | np.ndarray) -> LineArtStats:
    """Accept an image as line art or say why not.

    Thresholds are the module constants `MAX_COLORED_FRACTION`, `MAX_MIDTONE_FRACTION`,
    `MIN_PAPER_LEVEL`, `MAX_INK_FRACTION`, `MIN_INK_FRACTION` and `MIN_REGION_FRACTION`
    (at least two regions), checked in that order and
    measured after the paper and ink levels
    are stretched to white and black as `normalize_sketch` does.

    Returns
    -------
    LineArtStats
        When the image passes.

    Raises
    ------
    NotLineArtError
        Naming the failed measure, its value and the limit.
    """
    s = line_art_stats(image)
    verdicts = (
        (
            s.colored_fraction > MAX_COLORED_FRACTION,
            f"not line art: {s.colored_fraction:.1%} of the pixels are colored (at most "
            f"{MAX_COLORED_FRACTION:.0%} allowed); sketches are black outlines on white",
        ),
        (
            s.midtone_fraction > MAX_MIDTONE_FRACTION,
            f"not line art: {s.midtone_fraction:.1%} of the pixels are mid-grey (at most "
            f"{MAX_MIDTONE_FRACTION:.0%} allowed); this looks like a photo or a shaded drawing",
        ),
        (
            s.paper_level < MIN_PAPER_LEVEL,
            f"not line art: the background is dark (median luminance {s.paper_level:.0f} < "
            f"{MIN_PAPER_LEVEL}); sketches are dark outlines on a light background",
        ),
        (
            s.ink_fraction > MAX_INK_FRACTION,
            f"not line art: {s.ink_fraction:.1%} of the picture is dark (at most "
            f"{MAX_INK_FRACTION:.0%} allowed); outlines should leave regions white to color",
        ),
        (
            s.ink_fraction < MIN_INK_FRACTION,
            f"no drawing found: only {s.ink_fraction:.2%} of the pixels are dark (at least "
            f"{MIN_INK_FRACTION:.1%} needed)",
        ),
        (
            s.regions < 2,
            "not line art: its dark marks close no region to color (specks or blobs on "
            "white, say); sketches are outlines that split the paper into regions, each at "
            f"least {MIN_REGION_FRACTION:.1%} of the drawing's extent",
        ),
    )
    for failed, reason in verdicts:
        if failed:
            raise NotLineArtError(reason)
    return s


def normalize_sketch(image: Image.Image | np.ndarray, long_side: int = LONG_SIDE) -> np.ndarray:
    """Turn an imported picture into a library sketch.

    Steps: composite transparency onto white; convert to luminance; stretch the levels so
    the paper becomes 255 and the ink 0 (values between are kept, so anti-aliasing
    survives); crop to the drawing plus `CROP_MARGIN` (never beyond the original frame),
    unless the drawing reaches the frame: then the frame is part of the picture (a
    landscape's horizon closes the sky and the sea) and the image is kept whole; resize with Lanczos so the
    long side is `long_side`.

    Parameters
    ----------
    image : PIL.Image or ndarray, shape (H, W) or (H, W, 3|4), uint8
    long_side : int
        Pixels on the long side of the result.

    Returns
    -------
    ndarray, shape (H', W'), uint8
        ``max(H', W') == long_side``.
    """
    if long_side < 16:
        raise ValueError(f"`long_side` must be >= 16 px, got {long_side}")
    gray = _stretch_levels(_gray(_to_rgb(image)))
    ink = gray < 250
    touches_frame = ink[0].any() or ink[-1].any() or ink[:, 0].any() or ink[:, -1].any()
    rows, cols = np.nonzero(ink)
    if rows.size and not touches_frame:
        pad = int(round(CROP_MARGIN * max(np.ptp(rows), np.ptp(cols), 1)))
        top, bottom = max(rows.min() - pad, 0), min(rows.max() + pad + 1, gray.shape[0])
        left, right = max(cols.min() - pad, 0), min(cols.max() + pad + 1, gray.shape[1])
        gray = gray[top:bottom, left:right]
    scale = long_side / max(gray.shape)
    size = (max(1, round(gray.shape[1] * scale)), max(1, round(gray.shape[0] * scale)))
    resized = Image.fromarray(gray, "L").resize(size, Image.Resampling.LANCZOS)
    return np.asarray(resized, dtype=np.uint8).copy()


def import_sketch_file(path: str | Path, long_side: int = LONG_SIDE) -> ImportedSketch:
    """Read, vet and normalise a sketch file (``.svg``, ``.png``, ``.jpg``, ``.webp``).

    Raises
    ------
    NotLineArtError
        If the picture is not line art (see `check_line_art`), or is a strip: once cropped,
        its long side is over `MAX_ASPECT` times its short side.
    ValueError
        If the file cannot be read as an image.
    """
    path = Path(path)
    source = None
    if path.suffix.lower() in (".svg", ".svgz"):
        image: Image.Image | np.ndarray = rasterize_svg(path.read_bytes(), long_side)
    else:
        try:
            with Image.open(path) as opened:
                image = ImageOps.exif_transpose(opened).copy()
        except (OSError, Image.DecompressionBombError) as exc:
            raise ValueError(f"`path` {path.name} is not a readable image: {exc}") from None
        source = max(image.size)
    stats = check_line_art(image)
    sketch = normalize_sketch(image, long_side)
    if max(sketch.shape) > MAX_ASPECT * min(sketch.shape):
        raise NotLineArtError(
            f"the drawing is {sketch.shape[1]} x {sketch.shape[0]} px once cropped to its lines; its long "
            f"side may be at most {MAX_ASPECT:g} times its short side (a thin strip leaves nothing to color)"
        )
    png = encode_png(sketch)
    return ImportedSketch(
        png, hashlib.sha256(png).hexdigest(), sketch.shape[1], sketch.shape[0], stats, source
    )


def _to_rgb(image: Image.Image | np.ndarray) -> np.ndarray:
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim not in (2, 3):
            raise ValueError(f"`image` must be uint8 (H, W) or (H, W, C), got {image.shape} {image.dtype}")
        image = Image.fromarray(image)
    if not isinstance(image, Image.Image):
        raise ValueError(f"`image` must be a PIL image or a uint8 array, got {type(image).__name__}")
    rgba = image.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"), dtype=np.uint8)


def _gray(rgb: np.ndarray) -> np.ndarray:
    return np.round(rgb2gray(rgb) * 255).astype(np.uint8)


def _stretch_levels(gray: np.ndarray) -> np.ndarray:
    """Map the paper level (median) to 255 and the ink level (0.1th percentile) to 0."""
    paper = float(np.median(gray))
    ink = min(float(np.percentile(gray, 0.1)), paper - 1.0)
    out = (gray.astype(np.float64) - ink) * (255.0 / (paper - ink))
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _rebuild_shipped_pngs() -> None:
    for entry in load_manifest():
        entry.png.write_bytes(encode_png(rasterize_svg(entry.svg.read_bytes())))
        print(f"{entry.png.name}: rasterised from {entry.svg.name}")


if __name__ == "__main__":
    _rebuild_shipped_pngs()
