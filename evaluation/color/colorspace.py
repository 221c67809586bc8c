"""sRGB <-> CIELAB conversion and the CIEDE2000 color difference.

Thin, validated wrappers over scikit-image (`skimage.color.rgb2lab`, `lab2rgb`,
`deltaE_ciede2000`). Everything is D65 white point, CIE 1931 2° observer, and works on
arrays of any leading shape with the color on the last axis.
"""

from __future__ import annotations

import numpy as np
from skimage.color import deltaE_ciede2000, lab2rgb, rgb2lab


def _check_last_axis(name: str, array: np.ndarray) -> None:
    if array.ndim == 0 or array.shape[-1] != 3:
        raise ValueError(f"`{name}` must have shape (..., 3), got {array.shape}")


def srgb_as_float(rgb: np.ndarray, name: str = "rgb") -> np.ndarray:
    """Validate sRGB and return it as float64 in [0, 1].

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB as uint8 in [0, 255] or float in [0, 1].
    name : str
        The argument name used in error messages.

    Returns
    -------
    ndarray, shape (..., 3), float64
        Values in [0, 1].

    Raises
    ------
    ValueError
        If the last axis is not 3, the dtype is neither uint8 nor floating, or float
        values are non-finite or outside [0, 1].
    """
    rgb = np.asarray(rgb)
    _check_last_axis(name, rgb)
    if rgb.dtype == np.uint8:
        return rgb.astype(np.float64) / 255.0
    if not np.issubdtype(rgb.dtype, np.floating):
        raise ValueError(f"`{name}` must be uint8 in [0, 255] or float in [0, 1], got dtype {rgb.dtype}")
    rgb = rgb.astype(np.float64, copy=False)
    if not np.all(np.isfinite(rgb)):
        raise ValueError(f"`{name}` must hold finite values, got NaN or inf")
    if rgb.size and (rgb.min() < 0.0 or rgb.max() > 1.0):
        raise ValueError(f"float `{name}` must lie in [0, 1], got range [{rgb.min():g}, {rgb.max():g}]")
    return rgb


def _lab_as_float(lab: np.ndarray, name: str) -> np.ndarray:
    lab = np.asarray(lab, dtype=np.float64)
    _check_last_axis(name, lab)
    if not np.all(np.isfinite(lab)):
        raise ValueError(f"`{name}` must hold finite values, got NaN or inf")
    return lab


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """Convert sRGB to CIELAB (D65, 2° observer).

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB as uint8 in [0, 255] or float in [0, 1].

    Returns
    -------
    ndarray, shape (..., 3), float64
        L* in [0, 100]; a*, b* roughly in [-128, 127].

    Raises
    ------
    ValueError
        See `srgb_as_float`.

    References
    ----------
    .. [1] IEC 61966-2-1:1999, sRGB; CIE 15:2004, Colorimetry.

    Examples
    --------
    >>> srgb_to_lab(np.array([255, 0, 0], dtype=np.uint8)).round(2)
    array([53.24, 80.09, 67.2 ])
    """
    return rgb2lab(srgb_as_float(rgb), illuminant="D65", observer="2", channel_axis=-1)


def lab_to_srgb(lab: np.ndarray) -> np.ndarray:
    """Convert CIELAB (D65, 2° observer) to sRGB.

    Parameters
    ----------
    lab : array_like, shape (..., 3)
        L* in [0, 100].

    Returns
    -------
    ndarray, shape (..., 3), float64
        sRGB in [0, 1]; colors outside the sRGB gamut are clipped per channel
        (scikit-image's behaviour).

    Raises
    ------
    ValueError
        If the last axis is not 3 or values are non-finite.
    """
    lab = _lab_as_float(lab, "lab")
    return lab2rgb(lab, illuminant="D65", observer="2", channel_axis=-1)


def lab_to_srgb_uint8(lab: np.ndarray) -> np.ndarray:
    """Convert CIELAB to sRGB uint8 in [0, 255] (rounded, gamut-clipped); see `lab_to_srgb`."""
    return np.round(lab_to_srgb(lab) * 255.0).astype(np.uint8)


def delta_e_2000(
    lab1: np.ndarray, lab2: np.ndarray, kL: float = 1, kC: float = 1, kH: float = 1
) -> np.ndarray:
    """CIEDE2000 color difference ΔE00 between CIELAB colors.

    Parameters
    ----------
    lab1, lab2 : array_like, shape (..., 3)
        CIELAB colors (D65, 2° observer); the leading shapes must broadcast.
    kL, kC, kH : float
        Parametric weighting factors for lightness, chroma and hue (published default 1).

    Returns
    -------
    ndarray, shape (...), float64
        ΔE00 >= 0, over the broadcast leading shape (a 0-d array for single colors).

    Raises
    ------
    ValueError
        If an input does not end in a length-3 axis, holds non-finite values, or the
        leading shapes do not broadcast.

    References
    ----------
    .. [1] G. Sharma, W. Wu, E. N. Dalal, "The CIEDE2000 color-difference formula:
       Implementation notes, supplementary test data, and mathematical observations",
       Color Research & Application 30(1), 21-30, 2005.
    """
    lab1, lab2 = _lab_as_float(lab1, "lab1"), _lab_as_float(lab2, "lab2")
    try:
        lab1, lab2 = np.broadcast_arrays(lab1, lab2)
    except ValueError:
        raise ValueError(f"`lab1` {lab1.shape} and `lab2` {lab2.shape} do not broadcast") from None
    return np.asarray(deltaE_ciede2000(lab1, lab2, kL=kL, kC=kC, kH=kH, channel_axis=-1))
