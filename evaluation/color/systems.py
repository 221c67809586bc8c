"""Named color systems: ISCC-NBS levels 1-3 and the CSS3/X11 named colors.

The tables ship under ``assets/gencolorbench/`` (see ``assets/PROVENANCE.md``). This module is
the one reader of them; the explicit-color mode (targets and candidate sets) and color naming
both build on it.

=================  =====  ==================================================================
system             size   what
=================  =====  ==================================================================
``iscc-nbs-l1``    13     ISCC-NBS level 1 (Pink, Red, ..., White, Gray, Black)
``iscc-nbs-l2``    29     ISCC-NBS level 2 (adds the intermediate hues: "Reddish orange", ...)
``iscc-nbs-l3``    260    ISCC-NBS level 3 centroids inside sRGB (of 267)
``css3``           148    CSS3 / X11 named colors
=================  =====  ==================================================================
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

import numpy as np

from evaluation.color.colorspace import delta_e_2000, srgb_to_lab
from evaluation.concepts import ASSETS
from storage.shown import folded, shown

TABLES = ASSETS / "gencolorbench"
SYSTEMS = ("iscc-nbs-l1", "iscc-nbs-l2", "iscc-nbs-l3", "css3")
_FILES = {
    "iscc-nbs-l1": "iscc_nbs_l1.csv",
    "iscc-nbs-l2": "iscc_nbs_l2.csv",
    "iscc-nbs-l3": "iscc_nbs_l3.csv",
    "css3": "css3_x11_colors.csv",
}


@dataclass(frozen=True)
class ColorSystem:
    """One named color system; arrays are read-only and share the row order of ``names``.

    Attributes
    ----------
    key : str
        One of :data:`SYSTEMS`.
    names : tuple of str, length n
        Lower-case color names as they read in a prompt: ``"vivid pink"``, ``"alice blue"``.
    rgb : ndarray, shape (n, 3), uint8
        sRGB in [0, 255].
    lab : ndarray, shape (n, 3), float64
        CIELAB (D65, 2° observer) of ``rgb``.
    """

    key: str
    names: tuple[str, ...]
    rgb: np.ndarray
    lab: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    @property
    def hex(self) -> tuple[str, ...]:
        """``"#rrggbb"`` of every color, in row order."""
        return tuple("#{:02x}{:02x}{:02x}".format(*map(int, row)) for row in self.rgb)

    def index(self, name: str) -> int:
        """Row of a color name (case and surrounding space ignored).

        Raises
        ------
        KeyError
            If the system has no such name.
        """
        wanted = folded(name)
        try:
            return self.names.index(wanted)
        except ValueError:
            raise KeyError(f"color system {self.key!r} has no color named {name!r}") from None

    def nearest(self, lab: np.ndarray) -> np.ndarray:
        """Row of the nearest color (CIEDE2000) for each CIELAB color.

        Parameters
        ----------
        lab : array_like, shape (..., 3)
            CIELAB colors.

        Returns
        -------
        ndarray, shape (...), int64
        """
        lab = np.asarray(lab, dtype=np.float64)
        flat = lab.reshape(-1, 3)
        distance = delta_e_2000(flat[:, None, :], self.lab[None, :, :])
        return distance.argmin(axis=1).reshape(lab.shape[:-1])


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@functools.cache
def load_system(key: str) -> ColorSystem:
    """The color system ``key`` (one of :data:`SYSTEMS`), read once per process.

    Raises
    ------
    ValueError
        If ``key`` is not a known system.
    """
    if key not in _FILES:
        raise ValueError(f"`system` must be one of {', '.join(SYSTEMS)}; got {shown(key)}")
    with open(TABLES / _FILES[key], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    names = tuple(folded(row["color_name"]) for row in rows)
    rgb = np.array([[int(row["r"]), int(row["g"]), int(row["b"])] for row in rows], dtype=np.uint8)
    return ColorSystem(key=key, names=names, rgb=_readonly(rgb), lab=_readonly(srgb_to_lab(rgb)))
