"""Probe items: images whose true colors are known from pixels, each with a matching
description and its foils.

Two sources:

* `synthetic_items`: one or two shapes rendered by `evaluation.color.synthetic.render`
  in a prototype color of a basic term (`PROTOTYPES`), side by side on one background
  kind; the description names each shape's color ("a red sphere and a blue box").
* `item_from_regions`: any image with object masks whose colors the project knows, such
  as a designer's coloring (exact paint per region) or a generated image whose masked
  pixels the pixel scorer verified. Each region's true term is the basic term of its
  per-channel median color, and an item is refused when fewer than ``min_share`` of the
  region's pixels carry that term (the region is not one color). `items_from_manifest`
  reads such items from PNG files listed in a CSV.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.color.naming import BASIC_TERMS, name_srgb
from evaluation.color.systems import load_system
from evaluation.judges.foils import Foil, foils, normalize
from storage.shown import shown

#: ISCC-NBS level 3 colors rendered for each basic term (each is named by that term).
PROTOTYPES = {
    "white": ("white",),
    "black": ("black",),
    "gray": ("medium gray", "light gray"),
    "red": ("vivid red", "strong red", "deep red"),
    "orange": ("vivid orange", "strong orange", "deep orange"),
    "yellow": ("vivid yellow", "brilliant yellow", "strong yellow"),
    "green": ("vivid green", "strong green", "vivid yellowish green"),
    "blue": ("vivid blue", "strong blue", "brilliant blue"),
    "purple": ("vivid purple", "strong purple", "vivid violet"),
    "pink": ("vivid pink", "strong pink", "light pink"),
    "brown": ("strong brown", "moderate brown", "deep brown"),
}


@dataclass(frozen=True)
class Region:
    """One object of a probe image.

    Attributes
    ----------
    noun : str
        What the description calls it (``"sphere"``, ``"apple"``).
    term : str
        Its true basic color term.
    mask : ndarray, shape (H, W), bool
        Its pixels.
    """

    noun: str
    term: str
    mask: np.ndarray


@dataclass(frozen=True)
class ProbeItem:
    """An image with its true colors, its matching description and the description's foils.

    Attributes
    ----------
    item_id : str
    image : ndarray, shape (H, W, 3), uint8
        sRGB in [0, 255].
    regions : tuple of Region
    description : str
        The matching description (normalised, `evaluation.judges.foils.normalize`).
    foils : tuple of Foil
    source : str
        ``"synthetic"``, ``"coloring"``, ``"generated"``...
    """

    item_id: str
    image: np.ndarray
    regions: tuple[Region, ...]
    description: str
    foils: tuple[Foil, ...]
    source: str


def _describe(regions: Sequence[Region]) -> str:
    return normalize(" and ".join(f"a {r.term} {r.noun}" for r in regions))


def prototype_rgb(term: str, rng: np.random.Generator) -> np.ndarray:
    """One of the term's `PROTOTYPES` as sRGB uint8, shape (3,), drawn with `rng`."""
    if term not in PROTOTYPES:
        raise ValueError(f"`term` must be one of {', '.join(BASIC_TERMS)}; got {shown(term)}")
    system = load_system("iscc-nbs-l3")
    names = PROTOTYPES[term]
    return system.rgb[system.index(names[int(rng.integers(len(names)))])]


def synthetic_items(
    n: int, *, rng: np.random.Generator, size: int = 64, two_objects: float = 0.5
) -> list[ProbeItem]:
    """`n` probe items rendered from prototype colors.

    Parameters
    ----------
    n : int
        Number of items (>= 1).
    rng : numpy.random.Generator
        Draws terms, prototypes, shapes, backgrounds and render seeds.
    size : int
        Side of each shape's render in pixels (>= 32); a two-object image is
        ``size x 2 size``.
    two_objects : float
        Share of items with two objects of two different terms (these get a swap foil),
        in [0, 1].

    Returns
    -------
    list of ProbeItem
        Item ids ``synthetic-0`` ...; source ``"synthetic"``.
    """
    from evaluation.color.synthetic import BACKGROUNDS, SHAPES, render

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be a positive integer, got {shown(n)}")
    if not 0.0 <= two_objects <= 1.0:
        raise ValueError(f"`two_objects` must lie in [0, 1], got {shown(two_objects)}")
    items = []
    for k in range(n):
        count = 2 if rng.random() < two_objects else 1
        terms = rng.choice(BASIC_TERMS, size=count, replace=False)
        shapes = rng.choice(SHAPES, size=count, replace=False)
        background = BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
        renders = [
            render(
                prototype_rgb(str(t), rng),
                str(s),
                size=size,
                background=background,
                seed=int(rng.integers(2**31)),
            )
            for t, s in zip(terms, shapes)
        ]
        image = np.concatenate([image for image, _ in renders], axis=1)
        regions = []
        for j, ((_, mask), term, shape) in enumerate(zip(renders, terms, shapes)):
            full = np.zeros(image.shape[:2], dtype=bool)
            full[:, j * size : (j + 1) * size] = mask
            regions.append(Region(str(shape), str(term), full))
        description = _describe(regions)
        items.append(
            ProbeItem(
                f"synthetic-{k}", image, tuple(regions), description, tuple(foils(description)), "synthetic"
            )
        )
    return items


def region_color(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-channel median sRGB of the masked pixels, uint8, shape (3,).

    The median ignores highlights and deep shade, so a shaded object measures near its
    albedo (`evaluation.color.synthetic` exposes renders on the object).
    """
    return np.median(image[mask], axis=0).round().astype(np.uint8)


def item_from_regions(
    item_id: str,
    image: np.ndarray,
    regions: Sequence[tuple[str, np.ndarray]],
    *,
    source: str,
    min_share: float = 0.8,
) -> ProbeItem:
    """A probe item from an image and its objects' masks, true terms measured from pixels.

    Parameters
    ----------
    item_id : str
    image : array_like, shape (H, W, 3), uint8
        sRGB in [0, 255].
    regions : sequence of (str, ndarray of bool, shape (H, W))
        One or two (noun, mask) pairs; the description is ``"a <term> <noun>"`` joined by
        *and*.
    source : str
        Where the image comes from (``"coloring"``, ``"generated"``).
    min_share : float
        Least share of a region's pixels whose basic term is the region's term, in (0, 1].

    Raises
    ------
    ValueError
        If the image or a mask has the wrong shape or type, a mask is empty, there are not
        one or two regions, or a region is not one color (``min_share``).
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
        raise ValueError(f"`image` must be uint8 of shape (H, W, 3), got {image.dtype} {image.shape}")
    if len(regions) not in (1, 2):
        raise ValueError(f"`regions` must hold one or two (noun, mask) pairs, got {len(regions)}")
    built = []
    for noun, mask in regions:
        mask = np.asarray(mask)
        if mask.shape != image.shape[:2] or mask.dtype != bool or not mask.any():
            raise ValueError(
                f"the mask of {noun!r} must be a non-empty bool array of shape {image.shape[:2]}"
            )
        term = str(name_srgb(region_color(image, mask)).basic)
        colors, counts = np.unique(image[mask], axis=0, return_counts=True)
        share = counts[name_srgb(colors).basic == term].sum() / counts.sum()
        if share < min_share:
            raise ValueError(
                f"region {noun!r} of item {item_id!r} is {share:.0%} {term}, below `min_share` {min_share}"
            )
        built.append(Region(noun, term, mask))
    description = _describe(built)
    return ProbeItem(item_id, image, tuple(built), description, tuple(foils(description)), source)


MANIFEST_COLUMNS = ("item_id", "image", "mask", "noun")


def items_from_manifest(
    path: str | Path, *, min_share: float = 0.8
) -> tuple[list[ProbeItem], list[tuple[str, str]]]:
    """Probe items from PNG images and masks listed in a CSV (see `item_from_regions`).

    Parameters
    ----------
    path : str or Path
        A CSV with columns `MANIFEST_COLUMNS` and optionally ``source`` (default
        ``"manifest"``): one row per object; the rows of one ``item_id`` (one or two) share
        an image. ``image`` (RGB) and ``mask`` (non-zero = the object) are PNG paths
        relative to the CSV's folder; ``noun`` names the object in the description.
    min_share : float
        See `item_from_regions`.

    Returns
    -------
    items : list of ProbeItem
        In the order of first appearance.
    refused : list of (str, str)
        ``(item_id, reason)`` of every item that could not be probed (region not one
        color, two regions of one image with the same noun, ...).

    Raises
    ------
    ValueError
        If the CSV lacks a column.
    """
    from PIL import Image

    path = Path(path)
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"manifest {str(path)!r} must have columns {', '.join(MANIFEST_COLUMNS)}; lacks {missing}"
            )
        rows: dict[str, list[dict]] = {}
        for row in reader:
            rows.setdefault(row["item_id"], []).append(row)
    items, refused = [], []
    for item_id, group in rows.items():
        try:
            image = np.asarray(Image.open(path.parent / group[0]["image"]).convert("RGB"))
            regions = [
                (r["noun"], np.asarray(Image.open(path.parent / r["mask"]).convert("L")) > 0) for r in group
            ]
            if len({noun for noun, _ in regions}) != len(regions):
                raise ValueError("two regions share a noun")
            source = group[0].get("source") or "manifest"
            items.append(item_from_regions(item_id, image, regions, source=source, min_share=min_share))
        except (OSError, ValueError) as error:  # RefusedDescription is a ValueError
            refused.append((item_id, str(error)))
    return items, refused
