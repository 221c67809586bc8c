"""From masked images of one concept to its color distribution over the UW-71 bins.

The paper's Appendix C.3 pipeline (with §3.3), in five steps:

1. per image, `image_pixels`: crop the mask's bounding box, downsample the masked
   foreground to 100×100 and keep the masked pixels (RGBA: fully opaque ones only);
2. per image, the dominant color: centre of the most populated bin of a 16×16×16 RGB
   histogram;
3. group the images: two images share a group when their dominant colors are within
   ΔE00 <= 12 (connected components, so grouping is transitive);
4. per group: pool the pixels, quantise to 8×8×8 RGB bins, keep the 20 most populated,
   represent each by the mean of its pixels, and merge those within ΔE00 <= 7 (heaviest
   first, weighted mean in CIELAB);
5. map each merged color's mass to its nearest UW-71 color (CIELAB Euclidean) and sum
   the group distributions weighted by their share of the images.

Choices where the paper is silent (each one line to change):

- Step 4 represents a bin by the mean of its pixels: the paper says "quantize", and the
  bin *centre* splits a flat color whose pixel noise straddles a bin boundary (a red
  (200, 30, 30) with noise σ = 4 lands in two bins whose centres are over ΔE00 7 apart,
  so its mass split 37 % / 35 % over two UW-71 bins). ``bin_color="centre"`` keeps the
  centres.

- Downsampling uses nearest-neighbour sampling at pixel centres, which creates no new
  colors; the crop is stretched to 100×100 whatever its aspect ratio (a crop smaller than
  100 pixels is repeated, not interpolated). If a very thin mask keeps no pixel after
  sampling, all masked pixels of the crop are used instead.
- No lightness or saturation filter is applied: masks already remove the background,
  and black, white and greys are UW-71 colors (``pixel_filter="gencolor"`` drops
  L* <= 5 and L* > 99 as GenColor does).
- Step 3 links images by single linkage (connected components), the transitive reading
  of "group"; ``linkage="average"`` cuts an average-linkage tree at the threshold instead.
- Pixels outside a group's 20 most populated bins are dropped, and the group's
  distribution is normalised over the 20 kept bins.
- A merge candidate joins the nearest existing merged color (by ΔE00 to its current
  weighted-mean centre) when that is <= 7, else starts a new one.
- Ties: the lowest bin index wins for dominant colors and the top-20 cut; groups are
  ordered by image count, largest first, then by their first image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster import hierarchy
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform

from evaluation.color.colorspace import delta_e_2000, lab_to_srgb_uint8, srgb_to_lab
from evaluation.color.palette import N_BINS, nearest_uw71
from storage.shown import shown

#: Names the pipeline's defaults; stored with distributions computed by it, so a stored
#: distribution made under other defaults is known to be stale. Change it with them.
METHOD = "appendix-c3 v2 (bin means)"
#: How step 4 represents each of a group's top 8x8x8 bins: the mean of the pixels in it
#: (default), or the bin's centre (``"centre"``, the literal reading of Appendix C.3).
BIN_COLORS = ("mean", "centre")
#: How step 3 links images into groups: ``"single"`` (default, connected components: a
#: chain of close images joins images far more than the threshold apart) or
#: ``"average"`` (average linkage cut at the threshold: no such chains).
LINKAGES = ("single", "average")
#: Pixels dropped before step 2: none (default: masks already remove the background, and
#: black, white and greys are UW-71 colors), or ``"gencolor"``: L* <= 5 or L* > 99, as
#: GenColor (by the paper's authors) filters model images.
PIXEL_FILTERS = ("none", "gencolor")
GENCOLOR_LIGHTNESS = (5.0, 99.0)


@dataclass(frozen=True)
class ColorGroup:
    """One visual group of a concept's images and its merged palette.

    Attributes
    ----------
    image_indices : tuple of int
        Positions of the group's images in the input list.
    lab : ndarray, shape (k, 3), float64
        Merged colors in CIELAB (L* in [0, 100]), heaviest first; k <= 20.
    rgb : ndarray, shape (k, 3), uint8
        The same colors in sRGB [0, 255] (gamut-clipped).
    weights : ndarray, shape (k,), float64
        Each merged color's share of the group's kept pixels; sums to 1.
    p : ndarray, shape (71,), float64
        The group's distribution over the UW-71 bins; sums to 1.
    """

    image_indices: tuple[int, ...]
    lab: np.ndarray
    rgb: np.ndarray
    weights: np.ndarray
    p: np.ndarray

    @property
    def n_images(self) -> int:
        return len(self.image_indices)


@dataclass(frozen=True)
class ConceptDistribution:
    """A concept's color distribution with the groups it was built from.

    Attributes
    ----------
    p : ndarray, shape (71,), float64
        Probability over the UW-71 bins in ``color_index`` order; sums to 1.
    groups : tuple of ColorGroup
        Largest group (most images) first.
    n_images : int
        Number of images the distribution was built from.
    """

    p: np.ndarray
    groups: tuple[ColorGroup, ...]
    n_images: int


def _check_image_and_mask(image, mask, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    image, mask = np.asarray(image), np.asarray(mask)
    image_name, mask_name = names
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(
            f"`{image_name}` must be an (H, W, 3) or (H, W, 4) uint8 array, "
            f"got shape {image.shape} dtype {image.dtype}"
        )
    if mask.dtype != bool or mask.ndim != 2:
        raise ValueError(
            f"`{mask_name}` must be an (H, W) boolean array, got shape {mask.shape} dtype {mask.dtype}"
        )
    if mask.shape != image.shape[:2]:
        raise ValueError(f"`{mask_name}` has size {mask.shape} but `{image_name}` has {image.shape[:2]}")
    if image.shape[2] == 4:
        mask = mask & (image[:, :, 3] == 255)
    if not mask.any():
        raise ValueError(f"`{mask_name}` is empty (no masked, fully opaque pixel)")
    return image[:, :, :3], mask


def _centre_samples(length: int, size: int) -> np.ndarray:
    """Indices of the source pixels under `size` output pixel centres (nearest)."""
    return ((np.arange(size) + 0.5) * (length / size)).astype(np.int64)


def image_pixels(image: np.ndarray, mask: np.ndarray, *, size: int = 100) -> np.ndarray:
    """Step 1: the masked foreground of one image, downsampled to ``size × size``.

    Parameters
    ----------
    image : array_like, shape (H, W, 3) or (H, W, 4), uint8
        sRGB in [0, 255]; with an alpha channel only fully opaque pixels (alpha 255)
        count as masked.
    mask : array_like, shape (H, W), bool
        True on the concept's pixels.
    size : int
        Side of the downsampled square (paper: 100).

    Returns
    -------
    ndarray, shape (N, 3), uint8
        The kept sRGB pixels in row-major order, 1 <= N <= size² (more only in the
        thin-mask fallback, which returns every masked pixel of the crop).

    Raises
    ------
    ValueError
        On a wrong dtype or shape, mismatched sizes, or an empty mask.
    """
    return _masked_pixels(image, mask, size, ("image", "mask"))


def _masked_pixels(image, mask, size: int, names: tuple[str, str]) -> np.ndarray:
    if not (isinstance(size, (int, np.integer)) and size >= 1):
        raise ValueError(f"`size` must be a positive integer, got {shown(size)}")
    rgb, mask = _check_image_and_mask(image, mask, names)
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    top, bottom, left, right = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    ys = top + _centre_samples(bottom - top, size)
    xs = left + _centre_samples(right - left, size)
    keep = mask[ys[:, None], xs]
    if not keep.any():
        return rgb[mask]
    return rgb[ys[:, None], xs][keep]


def bin_index(pixels: np.ndarray, bins: int) -> np.ndarray:
    """The flat index of each pixel's ``bins³`` RGB bin (step 2's and step 4's quantization).

    Channel value v falls in bin ``v * bins // 256``; the flat index is
    ``(r_bin * bins + g_bin) * bins + b_bin``, so red varies slowest.

    Parameters
    ----------
    pixels : ndarray, shape (N, 3), uint8
        sRGB in [0, 255].
    bins : int
        Bins per channel, 1 to 256 (the paper: 16 for the dominant color, 8 for the
        palette step).

    Returns
    -------
    ndarray, shape (N,), int64
        In [0, bins³).

    Examples
    --------
    >>> bin_index(np.array([[0, 0, 0], [255, 0, 31], [32, 0, 0]], dtype=np.uint8), 8).tolist()
    [0, 448, 64]
    """
    q = (pixels.astype(np.int64) * bins) >> 8
    return (q[:, 0] * bins + q[:, 1]) * bins + q[:, 2]


def _bin_centres(index: np.ndarray, bins: int) -> np.ndarray:
    """sRGB float [0, 1] centres of flat RGB bin indices (mean of the bin's 8-bit codes)."""
    k = np.stack([index // (bins * bins), (index // bins) % bins, index % bins], axis=-1)
    lo = -((-k * 256) // bins)
    hi = -((-(k + 1) * 256) // bins) - 1
    return (lo + hi) / 2.0 / 255.0


def dominant_color(pixels: np.ndarray, *, bins: int = 16) -> np.ndarray:
    """Step 2: CIELAB centre of the most populated ``bins³`` RGB bin (ties: lowest bin).

    Parameters
    ----------
    pixels : ndarray, shape (N, 3), uint8
        sRGB in [0, 255], N >= 1.
    bins : int
        Bins per channel (paper: 16).

    Returns
    -------
    ndarray, shape (3,), float64
        CIELAB; L* in [0, 100].
    """
    top = np.argmax(np.bincount(bin_index(pixels, bins), minlength=bins**3))
    return srgb_to_lab(_bin_centres(np.array(top), bins))


def group_images(
    dominant_lab: np.ndarray, *, threshold: float = 12.0, linkage: str = "single"
) -> list[list[int]]:
    """Step 3: group images whose dominant colors are within ΔE00.

    Parameters
    ----------
    dominant_lab : ndarray, shape (n, 3)
        CIELAB dominant color per image.
    threshold : float
        Largest ΔE00 that links two images (paper: 12).
    linkage : {'single', 'average'}
        ``single``: connected components of the pairs within `threshold`; ``average``:
        clusters whose mean pairwise ΔE00 stays within `threshold` (average linkage).

    Returns
    -------
    list of list of int
        Image indices per group (ascending), largest group first, then by first image.
    """
    distance = delta_e_2000(dominant_lab[:, None, :], dominant_lab[None, :, :])
    if linkage == "average" and len(dominant_lab) > 1:
        tree = hierarchy.linkage(squareform(distance, checks=False), method="average")
        labels = hierarchy.fcluster(tree, t=threshold, criterion="distance") - 1
    else:
        _, labels = connected_components(distance <= threshold, directed=False)
    groups = [np.flatnonzero(labels == g).tolist() for g in range(labels.max() + 1)]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def merge_colors(
    lab: np.ndarray, weights: np.ndarray, *, threshold: float = 7.0
) -> tuple[np.ndarray, np.ndarray]:
    """Step 4's merge: greedily combine colors within ΔE00, heaviest first.

    Parameters
    ----------
    lab : ndarray, shape (k, 3)
        CIELAB colors.
    weights : ndarray, shape (k,)
        Positive masses.
    threshold : float
        Largest ΔE00 at which a color joins a merged one (paper: 7).

    Returns
    -------
    lab : ndarray, shape (m, 3)
        Weighted-mean CIELAB of each merged color, heaviest first; m <= k.
    weights : ndarray, shape (m,)
        Summed masses.
    """
    order = np.argsort(-weights, kind="stable")
    centres: list[np.ndarray] = []
    masses: list[float] = []
    for i in order:
        if centres:
            d = delta_e_2000(np.array(centres), lab[i])
            j = int(np.argmin(d))
            if d[j] <= threshold:
                total = masses[j] + weights[i]
                centres[j] = (centres[j] * masses[j] + lab[i] * weights[i]) / total
                masses[j] = total
                continue
        centres.append(lab[i].astype(np.float64))
        masses.append(float(weights[i]))
    masses_arr = np.array(masses)
    resort = np.argsort(-masses_arr, kind="stable")
    return np.array(centres)[resort], masses_arr[resort]


def _bin_means(
    pixels: np.ndarray, index: np.ndarray, kept: np.ndarray, counts: np.ndarray, bins: int
) -> np.ndarray:
    """sRGB float [0, 1] mean of the pixels in each of the `kept` bins."""
    sums = np.stack(
        [np.bincount(index, weights=pixels[:, c], minlength=bins**3)[kept] for c in range(3)], axis=-1
    )
    return sums / counts[kept, None] / 255.0


def _group_palette(
    pixels: np.ndarray, image_indices, *, bins: int, top: int, merge_threshold: float, bin_color: str
) -> ColorGroup:
    """Step 4 and the first half of step 5 for one group's pooled pixels."""
    index = bin_index(pixels, bins)
    counts = np.bincount(index, minlength=bins**3)
    kept = np.argsort(-counts, kind="stable")[:top]
    kept = kept[counts[kept] > 0]
    colors = (
        _bin_means(pixels, index, kept, counts, bins) if bin_color == "mean" else _bin_centres(kept, bins)
    )
    lab, mass = merge_colors(srgb_to_lab(colors), counts[kept].astype(float), threshold=merge_threshold)
    weights = mass / mass.sum()
    p = np.bincount(nearest_uw71(lab), weights=weights, minlength=N_BINS)
    return ColorGroup(
        image_indices=tuple(image_indices),
        lab=lab,
        rgb=lab_to_srgb_uint8(lab),
        weights=weights,
        p=p / p.sum(),
    )


def distribution_from_pixels(
    pixels: Sequence[np.ndarray],
    *,
    dominant_bins: int = 16,
    group_threshold: float = 12.0,
    palette_bins: int = 8,
    top_colors: int = 20,
    merge_threshold: float = 7.0,
    bin_color: str = "mean",
    linkage: str = "single",
    pixel_filter: str = "none",
) -> ConceptDistribution:
    """Steps 2-5 on per-image pixel sets (the output of `image_pixels`).

    Parameters
    ----------
    pixels : sequence of ndarray, each shape (N_i, 3), uint8
        Kept sRGB pixels per image, N_i >= 1.
    dominant_bins : int
        Bins per RGB channel for the dominant color (paper: 16).
    group_threshold : float
        ΔE00 linking two images' dominant colors (paper: 12).
    palette_bins : int
        Bins per RGB channel for a group's palette (paper: 8).
    top_colors : int
        Most populated palette bins kept per group (paper: 20).
    merge_threshold : float
        ΔE00 under which palette colors merge (paper: 7).
    bin_color : {'mean', 'centre'}
        What stands for each kept palette bin: the mean of its pixels (default), or its
        centre. A flat color whose pixel noise straddles a bin boundary keeps one color
        with ``"mean"``; with ``"centre"`` it becomes two bin centres up to ~9 ΔE00 apart,
        too far to merge, and its mass splits over two UW-71 bins.
    linkage : {'single', 'average'}
        Step 3's grouping, see `group_images`.
    pixel_filter : {'none', 'gencolor'}
        ``gencolor`` drops pixels with L* <= 5 or L* > 99 first (`PIXEL_FILTERS`); an
        image left with no pixel is left out.

    Returns
    -------
    ConceptDistribution

    Raises
    ------
    ValueError
        If `pixels` is empty, an entry is not a non-empty (N, 3) uint8 array, an option
        is unknown, or the filter leaves no pixel.
    """
    if len(pixels) == 0:
        raise ValueError("`pixels` is empty: a distribution needs at least one image")
    for name, value, allowed in (
        ("bin_color", bin_color, BIN_COLORS),
        ("linkage", linkage, LINKAGES),
        ("pixel_filter", pixel_filter, PIXEL_FILTERS),
    ):
        if value not in allowed:
            raise ValueError(f"`{name}` must be one of {allowed}, got {shown(value)}")
    for i, px in enumerate(pixels):
        if not (
            isinstance(px, np.ndarray)
            and px.dtype == np.uint8
            and px.ndim == 2
            and px.shape[1] == 3
            and len(px) > 0
        ):
            raise ValueError(
                f"`pixels[{i}]` must be a non-empty (N, 3) uint8 array, got "
                f"{getattr(px, 'shape', type(px))} {getattr(px, 'dtype', '')}"
            )
    if pixel_filter == "gencolor":
        pixels = [kept for kept in (_lightness_filtered(px) for px in pixels) if len(kept)]
        if not pixels:
            raise ValueError("`pixel_filter` 'gencolor' left no pixel (every L* <= 5 or > 99)")
    dominants = np.array([dominant_color(px, bins=dominant_bins) for px in pixels])
    groups = tuple(
        _group_palette(
            np.concatenate([pixels[i] for i in members]),
            members,
            bins=palette_bins,
            top=top_colors,
            merge_threshold=merge_threshold,
            bin_color=bin_color,
        )
        for members in group_images(dominants, threshold=group_threshold, linkage=linkage)
    )
    p = sum(g.n_images / len(pixels) * g.p for g in groups)
    return ConceptDistribution(p=p / p.sum(), groups=groups, n_images=len(pixels))


def _lightness_filtered(pixels: np.ndarray) -> np.ndarray:
    """The pixels with GenColor's lightness 5 < L* <= 99."""
    lightness = srgb_to_lab(pixels)[:, 0]
    low, high = GENCOLOR_LIGHTNESS
    return pixels[(lightness > low) & (lightness <= high)]


def concept_distribution(
    images: Sequence[np.ndarray], masks: Sequence[np.ndarray], *, size: int = 100, **tuning
) -> ConceptDistribution:
    """The full Appendix C.3 pipeline: images of one concept to its UW-71 distribution.

    Parameters
    ----------
    images : sequence of array_like, each (H_i, W_i, 3) or (H_i, W_i, 4), uint8
        sRGB [0, 255] (RGBA: only alpha 255 counts).
    masks : sequence of array_like, each (H_i, W_i), bool
        The concept's pixels in each image.
    size : int
        Downsampled side (paper: 100).
    **tuning
        The keyword options of `distribution_from_pixels`.

    Returns
    -------
    ConceptDistribution
        ``.p`` sums to 1; ``.groups`` carry each group's merged palette and image count.

    Raises
    ------
    ValueError
        If the lists are empty or differ in length, or an image/mask is malformed,
        mismatched or empty (the message names its index).
    """
    if len(images) == 0:
        raise ValueError("`images` is empty: a distribution needs at least one image")
    if len(masks) != len(images):
        raise ValueError(f"`masks` has {len(masks)} entries but `images` has {len(images)}")
    pixels = [
        _masked_pixels(im, m, size, (f"images[{i}]", f"masks[{i}]"))
        for i, (im, m) in enumerate(zip(images, masks))
    ]
    return distribution_from_pixels(pixels, **tuning)


def image_distribution(
    image: np.ndarray, mask: np.ndarray, *, size: int = 100, **tuning
) -> ConceptDistribution:
    """The pipeline on a single image, e.g. one designer's coloring (one group).

    Same parameters as `concept_distribution` for one image and mask.
    """
    return distribution_from_pixels([image_pixels(image, mask, size=size)], **tuning)
