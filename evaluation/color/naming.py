"""Color naming: ISCC-NBS level 3 and level 1 names and the eleven basic color terms.

Every color gets three names, from fine to coarse:

``l3``
    The nearest ISCC-NBS level 3 centroid by CIEDE2000 (260 centroids inside sRGB, from
    `evaluation.color.systems`), e.g. ``"moderate olive brown"``.
``l1``
    Its ISCC-NBS level 1 term (13: pink, red, orange, brown, yellow, olive, yellow green,
    green, blue, purple, white, gray, black), read off the level 3 name by `l1_of`.
``basic``
    Its basic color term among Berlin & Kay's eleven (`BASIC_TERMS`), from the level 1
    term by `L1_TO_BASIC`.

Rules (the names are words, so the rules are about words)
---------------------------------------------------------
1. A level 3 name is modifiers followed by a hue name: ``"very dark" + "bluish green"``,
   ``"grayish" + "reddish brown"``. Neutrals put a tint before the neutral noun:
   ``"pinkish white"``, ``"olive gray"``, ``"brownish black"``.
2. Level 1 is the name's last word, its noun: ``"reddish orange"`` is an orange,
   ``"olive brown"`` a brown, ``"grayish red"`` a red, ``"pinkish white"`` a white. Two
   exceptions: the hue name ``"yellow green"`` is a level 1 term of its own, and the noun
   ``"violet"`` is a purple (ISCC-NBS has no level 1 violet).
3. Basic terms: each level 1 term is its own basic term except ``olive`` and
   ``yellow green``, which are not among Berlin & Kay's eleven; both map to ``green`` (the
   term English speakers give these yellowish greens, as in "olive green").

Notes
-----
Naming by the nearest centroid is an approximation of the ISCC-NBS blocks (which are
regions of the Munsell solid). Near the sRGB gamut corners it can surprise: the sRGB red
primary ``#ff0000`` is nearest to *vivid reddish orange* (ΔE00 3.9; *vivid red*
``#d51c3c`` is 14.4 away), so its level 1 and basic terms are ``orange``; the seven level 3
centroids outside sRGB are not candidates.

References
----------
.. [1] K. L. Kelly and D. B. Judd, "Color: Universal Language and Dictionary of Names",
   NBS Special Publication 440, 1976.
.. [2] B. Berlin and P. Kay, "Basic Color Terms: Their Universality and Evolution",
   University of California Press, 1969.

Examples
--------
>>> names = name_srgb(np.array([[255, 255, 255], [0, 0, 128]], dtype=np.uint8))
>>> names.l3.tolist(), names.basic.tolist()
(['greenish white', 'deep violet'], ['white', 'purple'])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evaluation.color.colorspace import delta_e_2000, srgb_as_float, srgb_to_lab
from evaluation.color.palette import load_uw71
from evaluation.color.systems import load_system

#: Berlin & Kay's eleven basic color terms of English.
BASIC_TERMS = (
    "white",
    "black",
    "gray",
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
)
#: ISCC-NBS level 1 terms (the order of ``iscc_nbs_l1.csv``).
L1_TERMS = (
    "pink",
    "red",
    "orange",
    "brown",
    "yellow",
    "olive",
    "yellow green",
    "green",
    "blue",
    "purple",
    "white",
    "gray",
    "black",
)
#: Level 1 term -> basic term (rule 3 of the module docstring).
L1_TO_BASIC = {term: term for term in L1_TERMS} | {"olive": "green", "yellow green": "green"}
_NOUN_TO_L1 = {"violet": "purple"}
# Colors compared to the 260 centroids at once; bounds the CIEDE2000 temporaries to ~20 MB.
_CHUNK = 2048


@dataclass(frozen=True)
class ColorNames:
    """Names of colors; every array has the colors' leading shape ``(...)``.

    Attributes
    ----------
    l3 : ndarray of str, shape (...)
        Nearest ISCC-NBS level 3 name, e.g. ``"moderate olive brown"``.
    l1 : ndarray of str, shape (...)
        Its level 1 term, one of `L1_TERMS`.
    basic : ndarray of str, shape (...)
        Its basic term, one of `BASIC_TERMS`.
    l3_index : ndarray of int64, shape (...)
        Row of the level 3 name in ``load_system("iscc-nbs-l3")``.
    delta_e : ndarray of float64, shape (...)
        CIEDE2000 distance to that centroid.
    """

    l3: np.ndarray
    l1: np.ndarray
    basic: np.ndarray
    l3_index: np.ndarray
    delta_e: np.ndarray


def l1_of(l3_name: str) -> str:
    """The ISCC-NBS level 1 term of a level 3 name (rule 2 of the module docstring).

    Parameters
    ----------
    l3_name : str
        A level 3 name such as ``"dark grayish reddish brown"`` (case ignored).

    Returns
    -------
    str
        One of `L1_TERMS`.

    Raises
    ------
    ValueError
        If the name's noun is not a level 1 term.

    Examples
    --------
    >>> l1_of("moderate olive brown"), l1_of("vivid yellow green"), l1_of("pale violet")
    ('brown', 'yellow green', 'purple')
    """
    words = str(l3_name).lower().split() or [""]
    if words[-2:] == ["yellow", "green"]:
        return "yellow green"
    noun = _NOUN_TO_L1.get(words[-1], words[-1])
    if noun not in L1_TERMS:
        raise ValueError(f"`l3_name` must end in an ISCC-NBS hue or neutral noun, got {l3_name!r}")
    return noun


@functools.cache
def _l3_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    names = load_system("iscc-nbs-l3").names
    l1 = [l1_of(name) for name in names]
    return (
        np.array(names, dtype=object),
        np.array(l1, dtype=object),
        np.array([L1_TO_BASIC[t] for t in l1], dtype=object),
    )


def _check_lab(lab) -> np.ndarray:
    lab = np.asarray(lab, dtype=np.float64)
    if lab.ndim == 0 or lab.shape[-1] != 3:
        raise ValueError(f"`lab` must have shape (..., 3), got {lab.shape}")
    if not np.all(np.isfinite(lab)):
        raise ValueError("`lab` must hold finite values, got NaN or inf")
    return lab


def name_lab(lab) -> ColorNames:
    """Name CIELAB colors: nearest ISCC-NBS level 3 centroid (CIEDE2000), level 1, basic term.

    Parameters
    ----------
    lab : array_like, shape (..., 3)
        CIELAB (D65, 2° observer); L* in [0, 100].

    Returns
    -------
    ColorNames
        Arrays of shape ``lab.shape[:-1]``. On an exact tie the earlier level 3 row wins.

    Raises
    ------
    ValueError
        If `lab` does not end in a length-3 axis or holds non-finite values.
    """
    lab = _check_lab(lab)
    centroids = load_system("iscc-nbs-l3").lab
    flat = lab.reshape(-1, 3)
    index = np.empty(len(flat), dtype=np.int64)
    distance = np.empty(len(flat), dtype=np.float64)
    for start in range(0, len(flat), _CHUNK):
        d = delta_e_2000(flat[start : start + _CHUNK, None, :], centroids[None, :, :])
        index[start : start + len(d)] = d.argmin(axis=1)
        distance[start : start + len(d)] = d.min(axis=1)
    l3, l1, basic = (table[index].reshape(lab.shape[:-1]) for table in _l3_tables())
    shape = lab.shape[:-1]
    return ColorNames(
        l3=l3, l1=l1, basic=basic, l3_index=index.reshape(shape), delta_e=distance.reshape(shape)
    )


def name_srgb(rgb) -> ColorNames:
    """Name sRGB colors; see `name_lab`.

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB as uint8 in [0, 255] or float in [0, 1].

    Raises
    ------
    ValueError
        If `rgb` is not sRGB of shape (..., 3) in one of those ranges.
    """
    return name_lab(srgb_to_lab(srgb_as_float(rgb, "rgb")))


def names_of_uw71() -> pd.DataFrame:
    """The names of the 71 UW-71 bins.

    Returns
    -------
    pandas.DataFrame
        71 rows in ``color_index`` order, columns ``color_index, hex, iscc_nbs_l3,
        iscc_nbs_l1, basic_term, delta_e`` (CIEDE2000 to the level 3 centroid); a new copy
        on every call (the names are computed once per process).
    """
    return _uw71_names().copy()


@functools.cache
def _uw71_names() -> pd.DataFrame:
    palette = load_uw71()
    names = name_lab(palette.lab)
    return pd.DataFrame(
        {
            "color_index": np.arange(len(palette)),
            "hex": list(palette.hex),
            "iscc_nbs_l3": names.l3.astype(str),
            "iscc_nbs_l1": names.l1.astype(str),
            "basic_term": names.basic.astype(str),
            "delta_e": names.delta_e,
        }
    )


DOMINANT_COLUMNS = ("dominant_human", "dominant_model")
"""The bin-index columns of metric tables (`evaluation.analysis.scoring`) that exports name."""


def with_bin_names(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """A copy of `frame` with each UW-71 bin column followed by its names.

    Parameters
    ----------
    frame : pandas.DataFrame
        Holds the bin-index columns (integers 0-70; missing values allowed).
    columns : sequence of str
        Bin-index columns, e.g. ``("dominant_model", "dominant_human")``.

    Returns
    -------
    pandas.DataFrame
        Right after each column ``c``: ``c_name`` (level 3 name) and ``c_basic`` (basic
        term); empty where the index is missing.

    Raises
    ------
    ValueError
        If a column is absent or holds an index outside 0-70.
    """
    table = _uw71_names()
    out = frame.copy()
    for column in columns:
        if column not in out.columns:
            raise ValueError(f"`columns` names {column!r}, which `frame` does not have")
        index = pd.to_numeric(out[column], errors="coerce")
        known = index.dropna()
        if len(known) and (~known.isin(table["color_index"])).any():
            raise ValueError(
                f"column {column!r} must hold UW-71 bins 0-{len(table) - 1}, got {sorted(set(known))}"
            )
        position = out.columns.get_loc(column) + 1
        lookup = index.astype("Int64")
        for suffix, field in (("_name", "iscc_nbs_l3"), ("_basic", "basic_term")):
            values = (
                lookup.map(dict(zip(table["color_index"], table[field])))
                .astype(object)
                .where(lookup.notna(), "")
            )
            out.insert(position, f"{column}{suffix}", values.to_numpy())
            position += 1
    return out
