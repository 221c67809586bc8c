"""The UW-71 palette: the 71 color bins every distribution is defined over.

The palette ships as ``assets/palette/uw71_coordinates.csv`` (Schloss Visual Reasoning
Lab, MIT licence, see ``assets/PROVENANCE.md``). Its ``color_index`` column (0-70) is the
bin order of every distribution in the project.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.concepts import ASSETS
from storage.distributions import N_BINS  # noqa: F401  (re-exported: defined once, in the floor)

UW71_CSV = ASSETS / "palette" / "uw71_coordinates.csv"

# Rows of the nearest-bin search processed at once; bounds memory to ~15 MB.
_NEAREST_CHUNK = 8192


@dataclass(frozen=True)
class Palette:
    """The UW-71 colors in ``color_index`` order; all arrays are read-only.

    Attributes
    ----------
    lab : ndarray, shape (71, 3), float64
        CIELAB (D65, 2° observer); L* in [0, 100].
    lch : ndarray, shape (71, 3), float64
        CIELCh: L* in [0, 100], chroma C* >= 0, hue angle h in degrees [0, 360).
    rgb : ndarray, shape (71, 3), uint8
        sRGB in [0, 255], from the CSV's ``color_hex``.
    hex : tuple of str, length 71
        ``"#rrggbb"`` strings.
    ground_distance : ndarray, shape (71, 71), float64
        CIELAB Euclidean distance between bins (ΔE*ab); the EMD ground distance.
    achromatic : ndarray, shape (71,), bool
        True where chroma is 0 (the six greys, ``color_index`` 24-29).
    hue_deg : ndarray, shape (71,), float64
        Hue angle in degrees [0, 360); NaN for achromatic bins.
    """

    lab: np.ndarray
    lch: np.ndarray
    rgb: np.ndarray
    hex: tuple[str, ...]
    ground_distance: np.ndarray
    achromatic: np.ndarray
    hue_deg: np.ndarray

    def __len__(self) -> int:
        return len(self.hex)


def _read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["color_index"]))
    indices = [int(r["color_index"]) for r in rows]
    if indices != list(range(N_BINS)):
        raise ValueError(f"{path}: expected color_index 0..{N_BINS - 1} once each, got {len(rows)} rows")
    return rows


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@functools.lru_cache(maxsize=4)
def load_uw71(path: str | Path = UW71_CSV) -> Palette:
    """Load the UW-71 palette (cached per path).

    Parameters
    ----------
    path : str or Path
        A CSV with columns ``color_index, L, a, b, C, H, color_hex``.

    Returns
    -------
    Palette
        Read-only arrays in ``color_index`` order.

    Raises
    ------
    ValueError
        If ``color_index`` is not exactly 0..70.

    Examples
    --------
    >>> pal = load_uw71()
    >>> pal.lab.shape, pal.hex[24]
    ((71, 3), '#000000')
    """
    rows = _read_rows(Path(path))
    lab = np.array([[float(r["L"]), float(r["a"]), float(r["b"])] for r in rows])
    chroma = np.array([float(r["C"]) for r in rows])
    hue = np.array([float(r["H"]) for r in rows]) % 360.0
    hexes = tuple(r["color_hex"].strip().lower() for r in rows)
    rgb = np.array([[int(h[i : i + 2], 16) for i in (1, 3, 5)] for h in hexes], dtype=np.uint8)
    achromatic = chroma == 0.0
    ground = np.sqrt(((lab[:, None, :] - lab[None, :, :]) ** 2).sum(axis=-1))
    return Palette(
        lab=_frozen(lab),
        lch=_frozen(np.column_stack([lab[:, 0], chroma, hue])),
        rgb=_frozen(rgb),
        hex=hexes,
        ground_distance=_frozen(np.ascontiguousarray(ground)),
        achromatic=_frozen(achromatic),
        hue_deg=_frozen(np.where(achromatic, np.nan, hue)),
    )


def nearest_uw71(lab: np.ndarray, palette: Palette | None = None) -> np.ndarray:
    """Map CIELAB colors to their nearest UW-71 bin (CIELAB Euclidean distance).

    Parameters
    ----------
    lab : array_like, shape (..., 3)
        CIELAB colors; L* in [0, 100].
    palette : Palette, optional
        Defaults to `load_uw71()`.

    Returns
    -------
    ndarray, shape (...), int64
        Bin indices in [0, 70]. On an exact tie the lower ``color_index`` wins.

    Raises
    ------
    ValueError
        If `lab` does not end in a length-3 axis or holds non-finite values.
    """
    lab = np.asarray(lab, dtype=np.float64)
    if lab.ndim == 0 or lab.shape[-1] != 3:
        raise ValueError(f"`lab` must have shape (..., 3), got {lab.shape}")
    if not np.all(np.isfinite(lab)):
        raise ValueError("`lab` must hold finite values, got NaN or inf")
    centres = (palette or load_uw71()).lab
    flat = lab.reshape(-1, 3)
    out = np.empty(len(flat), dtype=np.int64)
    for start in range(0, len(flat), _NEAREST_CHUNK):
        chunk = flat[start : start + _NEAREST_CHUNK]
        sq = ((chunk[:, None, :] - centres[None, :, :]) ** 2).sum(axis=-1)
        out[start : start + len(chunk)] = sq.argmin(axis=1)
    return out.reshape(lab.shape[:-1])
