"""Color plausibility of a coloring against the other colorings of its concept.

An adaptation of SCD (Lyu et al., "SCD: Statistical Color Distribution-based Objective
Image Colorization Quality Assessment") from semantic classes to concepts: the prior is a
hue × saturation histogram of the *other* colorings of the same concept instead of
ADE20K regions of one class, and a coloring's score is the mean plausibility of its
painted pixels. The expert QC queue is ordered by this score, lowest (most suspicious)
first.

Binning (HSV, S and V in percent [0, 100], H in degrees [0, 360)):

- one achromatic bin for S <= 10 spanning all hues (B_s = 10, B_h = 360);
- chromatic bins of 10° hue × 10 saturation points for S in (10, 100]: 36 × 9 bins.

A bin's probability density is PD = F / (B_s · B_h) (SCD Eq. 5), F its pixel share. The
bins are laid out as a grid of saturation rows × hue columns whose row 0 is the
achromatic bin repeated in every column, and each bin's unnormalised score S is the
weighted sum of PD over a 3 × 3 window (Eq. 2), circular in hue and zero beyond the
saturation range, with weights W = 1 − D / D_max, D = sqrt((E_s C_s)² + (E_h C_h)²)
(Eqs. 3–4), E_s and E_h the offsets in bin steps, C_s : C_h = 1 : 1.2, and D_max the
largest D in the window (so the four corner cells weigh 0). The achromatic bin's S is the
mean of its row. Scores are normalised by the largest bin score of the prior
(Eq. 1, p = S / S_max), so pixel scores lie in [0, 1].

Readings of the SCD paper where it is terse (each one line to change):

- E_h is written in degrees and E_s as a saturation difference; we use bin steps for
  both. With 10-unit bins on both axes the two readings give identical weights, since
  W depends only on D / D_max.
- Eq. 2 is a weighted *sum* as printed (the text says "weighted average"); the two differ
  only at the saturation edge, where part of the window falls outside the table.
- D_max is the largest distance of the full window, also at the saturation edge.
- V plays no part (as in SCD): a dark pixel with a strong hue is chromatic.
- The prior averages the other colorings' histograms with equal weight per coloring
  (`plausibility_ranking`), rather than pooling their pixels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from skimage.color import rgb2hsv

from evaluation.color.colorspace import srgb_as_float


@dataclass(frozen=True)
class SCDConfig:
    """Binning and smoothing of the SCD prior; defaults are the SCD paper's.

    Attributes
    ----------
    hue_bin_deg : float
        Hue bin width in degrees; must divide 360.
    sat_bin_pct : float
        Saturation bin width in percent points; must divide ``100 - achromatic_max_pct``.
    achromatic_max_pct : float
        Pixels with saturation <= this (percent) fall in the single achromatic bin.
    window : tuple of int
        ``(Q, H)``: odd window sizes in bins along saturation and hue.
    change_rates : tuple of float
        ``(C_s, C_h)``: change rates of Eq. 3 along saturation and hue.
    """

    hue_bin_deg: float = 10.0
    sat_bin_pct: float = 10.0
    achromatic_max_pct: float = 10.0
    window: tuple[int, int] = (3, 3)
    change_rates: tuple[float, float] = (1.0, 1.2)

    def __post_init__(self):
        if self.hue_bin_deg <= 0 or (360.0 / self.hue_bin_deg) % 1:
            raise ValueError(f"`hue_bin_deg` must divide 360, got {self.hue_bin_deg}")
        span = 100.0 - self.achromatic_max_pct
        if not 0 < self.achromatic_max_pct < 100 or self.sat_bin_pct <= 0 or (span / self.sat_bin_pct) % 1:
            raise ValueError(
                "`sat_bin_pct` must divide 100 - `achromatic_max_pct`, got "
                f"{self.sat_bin_pct} and {self.achromatic_max_pct}"
            )
        if len(self.window) != 2 or any(w < 1 or w % 2 == 0 for w in self.window):
            raise ValueError(f"`window` must be two odd sizes >= 1, got {self.window}")

    @property
    def n_hue(self) -> int:
        """Number of hue columns."""
        return round(360.0 / self.hue_bin_deg)

    @property
    def n_rows(self) -> int:
        """Number of saturation rows, the achromatic row 0 included."""
        return 1 + round((100.0 - self.achromatic_max_pct) / self.sat_bin_pct)

    @property
    def n_bins(self) -> int:
        """Number of bins: 1 achromatic + chromatic rows × hue columns."""
        return 1 + (self.n_rows - 1) * self.n_hue


SCD = SCDConfig()


def hs_bin_index(rgb, *, config: SCDConfig = SCD) -> np.ndarray:
    """The SCD bin of every pixel.

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB pixels, uint8 [0, 255] or float [0, 1].
    config : SCDConfig
        Binning.

    Returns
    -------
    numpy.ndarray of int, shape (...)
        0 for the achromatic bin, else ``1 + (row - 1) * n_hue + hue_column`` with
        saturation row 1 .. n_rows - 1 and hue column 0 .. n_hue - 1.
    """
    unit = srgb_as_float(rgb, "rgb")
    rgb = np.asarray(rgb)
    if rgb.dtype == np.uint8:
        colors, inverse, _ = _distinct(rgb)
        return _bins(colors, config)[inverse].reshape(unit.shape[:-1])
    return _bins(unit.reshape(-1, 3), config).reshape(unit.shape[:-1])


def _distinct(rgb: np.ndarray, inverse: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Distinct colors of uint8 pixels as floats in [0, 1], shape (k, 3), with each pixel's
    color (flat inverse index; None unless `inverse`) and each color's pixel count. A
    coloring holds a few flat paints, so binning its k colors instead of its ~10^4 pixels
    gives the same bins."""
    flat = rgb.reshape(-1, 3).astype(np.uint32)
    codes = (flat[:, 0] << 16) | (flat[:, 1] << 8) | flat[:, 2]
    if inverse:
        codes, where, counts = np.unique(codes, return_inverse=True, return_counts=True)
        where = where.reshape(-1)
    else:
        codes, counts = np.unique(codes, return_counts=True)
        where = None
    colors = np.stack([codes >> 16, (codes >> 8) & 255, codes & 255], axis=-1)
    return colors.astype(np.float64) / 255.0, where, counts


def _bins(unit: np.ndarray, config: SCDConfig) -> np.ndarray:
    """SCD bins of float sRGB colors, shape (n, 3) -> (n,)."""
    hsv = rgb2hsv(unit)
    hue = hsv[:, 0] * 360.0
    # rounding keeps S = 10 % from landing above the achromatic cut by float noise
    sat = np.round(hsv[:, 1] * 100.0, 9)
    row = np.ceil((sat - config.achromatic_max_pct) / config.sat_bin_pct).astype(int)
    row = np.clip(row, 0, config.n_rows - 1)
    col = np.floor(hue / config.hue_bin_deg).astype(int) % config.n_hue
    return np.where(row == 0, 0, 1 + (row - 1) * config.n_hue + col)


def hs_histogram(rgb, *, config: SCDConfig = SCD) -> np.ndarray:
    """Pixel shares per SCD bin.

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        The painted pixels of one coloring, uint8 [0, 255] or float [0, 1]; at least one.
    config : SCDConfig
        Binning.

    Returns
    -------
    numpy.ndarray, shape (config.n_bins,)
        Shares summing to 1, bin order of `hs_bin_index`.

    Raises
    ------
    ValueError
        If there are no pixels or they are not sRGB.
    """
    pixels = np.asarray(rgb)
    if pixels.dtype == np.uint8 and pixels.size:
        srgb_as_float(pixels, "rgb")
        colors, _, counts = _distinct(pixels, inverse=False)
        return np.bincount(_bins(colors, config), weights=counts, minlength=config.n_bins) / counts.sum()
    idx = hs_bin_index(rgb, config=config).ravel()
    if idx.size == 0:
        raise ValueError("`rgb` holds no pixels")
    return np.bincount(idx, minlength=config.n_bins) / idx.size


def _window_weights(config: SCDConfig) -> np.ndarray:
    q, h = config.window
    c_s, c_h = config.change_rates
    e_s = np.abs(np.arange(q) - (q - 1) // 2)[:, None]
    e_h = np.abs(np.arange(h) - (h - 1) // 2)[None, :]
    d = np.sqrt((e_s * c_s) ** 2 + (e_h * c_h) ** 2)
    return 1.0 - d / d.max() if d.max() > 0 else np.ones_like(d)


def bin_plausibility(prior_histogram, *, config: SCDConfig = SCD) -> np.ndarray:
    """Normalised SCD score of every bin under a prior (Eqs. 1–5).

    Parameters
    ----------
    prior_histogram : array_like, shape (config.n_bins,)
        Pixel shares of the prior colorings (e.g. the mean of their `hs_histogram`),
        non-negative with a positive sum.
    config : SCDConfig
        Binning and window.

    Returns
    -------
    numpy.ndarray, shape (config.n_bins,)
        p = S / S_max per bin, in [0, 1]; a pixel's score is the value of its bin.

    Raises
    ------
    ValueError
        If the histogram has the wrong length, negative entries or no mass.
    """
    f = np.asarray(prior_histogram, dtype=float)
    if f.shape != (config.n_bins,) or f.min() < 0 or f.sum() <= 0:
        raise ValueError(
            f"`prior_histogram` must be non-negative with positive mass and shape "
            f"({config.n_bins},), got shape {f.shape}"
        )
    grid = np.empty((config.n_rows, config.n_hue))
    grid[0] = f[0] / (config.achromatic_max_pct * 360.0)
    grid[1:] = f[1:].reshape(config.n_rows - 1, config.n_hue) / (config.sat_bin_pct * config.hue_bin_deg)
    weights = _window_weights(config)
    pad_s, pad_h = (weights.shape[0] - 1) // 2, (weights.shape[1] - 1) // 2
    padded = np.pad(grid, ((pad_s, pad_s), (0, 0)))
    padded = np.pad(padded, ((0, 0), (pad_h, pad_h)), mode="wrap")
    smoothed = np.einsum("rhij,ij->rh", sliding_window_view(padded, weights.shape), weights)
    scores = np.concatenate([[smoothed[0].mean()], smoothed[1:].ravel()])
    return scores / scores.max()


def pixel_plausibility(rgb, prior_histogram, *, config: SCDConfig = SCD) -> np.ndarray:
    """Per-pixel SCD score, for showing where a coloring departs from its prior.

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB pixels, uint8 [0, 255] or float [0, 1].
    prior_histogram : array_like, shape (config.n_bins,)
        See `bin_plausibility`.
    config : SCDConfig
        Binning and window.

    Returns
    -------
    numpy.ndarray, shape (...)
        Scores in [0, 1].
    """
    return bin_plausibility(prior_histogram, config=config)[hs_bin_index(rgb, config=config)]


def _histograms(colorings_pixels, config: SCDConfig) -> tuple[list, np.ndarray]:
    if isinstance(colorings_pixels, Mapping):
        ids, pixels = list(colorings_pixels.keys()), list(colorings_pixels.values())
    elif isinstance(colorings_pixels, Sequence):
        ids, pixels = list(range(len(colorings_pixels))), list(colorings_pixels)
    else:
        raise ValueError(
            f"`colorings_pixels` must be a mapping or sequence of pixel arrays, got {type(colorings_pixels).__name__}"
        )
    if len(pixels) < 2:
        raise ValueError(f"`colorings_pixels` needs at least 2 colorings, got {len(pixels)}")
    hists = []
    for cid, px in zip(ids, pixels):
        try:
            hists.append(hs_histogram(px, config=config))
        except ValueError as err:
            raise ValueError(f"coloring {cid!r}: {err}") from err
    return ids, np.stack(hists)


def plausibility_ranking(colorings_pixels, *, config: SCDConfig = SCD) -> pd.DataFrame:
    """Leave-one-out SCD score of each coloring of one concept, most suspicious first.

    Parameters
    ----------
    colorings_pixels : mapping of id to array_like, or sequence of array_like
        The painted pixels of each coloring of one concept, shape (..., 3), uint8
        [0, 255] or float [0, 1]; a sequence is identified by position. At least two.
    config : SCDConfig
        Binning and window.

    Returns
    -------
    pandas.DataFrame
        Columns ``coloring`` (id), ``score`` (mean pixel score in [0, 1] against the
        prior of all *other* colorings) and ``rank`` (1 = lowest score), sorted by
        score ascending, ties by input order.

    Raises
    ------
    ValueError
        If fewer than two colorings are given or one has no valid pixels.

    Notes
    -----
    The prior of coloring k is the unweighted mean of the other colorings' bin
    histograms, so each designer counts once however large the painted area. Since the
    score is a mean over pixels, it equals the coloring's histogram dotted with the
    prior's `bin_plausibility`.
    """
    ids, hists = _histograms(colorings_pixels, config)
    n = hists.shape[0]
    scores = np.empty(n)
    for k in range(n):
        prior = (hists.sum(axis=0) - hists[k]) / (n - 1)
        scores[k] = float(hists[k] @ bin_plausibility(prior, config=config))
    order = np.argsort(scores, kind="stable")
    return pd.DataFrame(
        {"coloring": [ids[i] for i in order], "score": scores[order], "rank": np.arange(1, n + 1)}
    )
