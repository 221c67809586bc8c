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

The browser names colors with a lookup table made here (`lookup_table`), not with a
second CIEDE2000 of its own: sRGB quantised to `LOOKUP_BITS` = 6 bits per channel
(262,144 cells), each cell holding the level 3 row of its centre's name. The table ships
as ``assets/gencolorbench/iscc_nbs_l3_srgb6.zlib`` (zlib-compressed little-endian uint16,
30 kB; 41 kB in base64) because building it takes ~11 s of CIEDE2000, too slow for each
server start; ``python -m evaluation.color.naming --write-lookup`` rebuilds it and a test
checks it against `name_srgb`. On 20,000 seeded uniform random sRGB colors the table
disagrees with exact naming for 5.8% at level 3 (colors near a border between two level 3
names), 1.9% at level 1 and 1.6% for the basic term; every level 3 centroid still names
itself. A 5-bit table (32,768 cells, 10 kB in base64) disagreed twice as often (11.6%,
3.1% for the basic term), and a 7-bit one would weigh ~160 kB on every page.

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
4. An sRGB grey (r = g = b) is named among the five untinted neutrals (`NEUTRALS`), by
   `name_srgb` and so by the lookup table. ISCC-NBS's neutral centroids are not exactly
   neutral, so by the nearest centroid alone ``#000000`` would be "olive black",
   ``#777777`` "greenish gray" and ``#ffffff`` "greenish white": tints a grey does not have
   (the UW-71 greys are named the same way, `names_of_uw71`). `name_lab` names what it is
   given by the nearest centroid.

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
(['white', 'deep violet'], ['white', 'purple'])
"""

from __future__ import annotations

import argparse
import functools
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evaluation.color.colorspace import delta_e_2000, srgb_as_float, srgb_to_lab
from evaluation.color.palette import load_uw71
from evaluation.color.systems import TABLES, load_system
from storage.shown import shown

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
#: Bits per sRGB channel of the shipped lookup table (`lookup_table`).
LOOKUP_BITS = 6
#: The shipped lookup table: zlib-compressed little-endian uint16, one level 3 row per cell.
LOOKUP_FILE = TABLES / "iscc_nbs_l3_srgb6.zlib"


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
        raise ValueError(f"`l3_name` must end in an ISCC-NBS hue or neutral noun, got {shown(l3_name)}")
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


def name_lab(lab, *, candidates=None) -> ColorNames:
    """Name CIELAB colors: nearest ISCC-NBS level 3 centroid (CIEDE2000), level 1, basic term.

    Parameters
    ----------
    lab : array_like, shape (..., 3)
        CIELAB (D65, 2° observer); L* in [0, 100].
    candidates : array_like of int, optional
        The level 3 rows to choose from (default: all), e.g. `neutral_rows()`.

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
    rows = np.arange(len(centroids)) if candidates is None else np.asarray(candidates, dtype=np.int64)
    chosen = centroids[rows][None, :, :]
    flat = lab.reshape(-1, 3)
    index = np.empty(len(flat), dtype=np.int64)
    distance = np.empty(len(flat), dtype=np.float64)
    for start in range(0, len(flat), _CHUNK):
        d = delta_e_2000(flat[start : start + _CHUNK, None, :], chosen)
        index[start : start + len(d)] = rows[d.argmin(axis=1)]
        distance[start : start + len(d)] = d.min(axis=1)
    l3, l1, basic = (table[index].reshape(lab.shape[:-1]) for table in _l3_tables())
    shape = lab.shape[:-1]
    return ColorNames(
        l3=l3, l1=l1, basic=basic, l3_index=index.reshape(shape), delta_e=distance.reshape(shape)
    )


def name_srgb(rgb) -> ColorNames:
    """Name sRGB colors as `name_lab` does, a grey (r = g = b) among `NEUTRALS` (rule 4).

    Parameters
    ----------
    rgb : array_like, shape (..., 3)
        sRGB as uint8 in [0, 255] or float in [0, 1].

    Raises
    ------
    ValueError
        If `rgb` is not sRGB of shape (..., 3) in one of those ranges.
    """
    rgb = srgb_as_float(rgb, "rgb")
    lab = srgb_to_lab(rgb)
    return _untinted(name_lab(lab), lab, (rgb[..., 0] == rgb[..., 1]) & (rgb[..., 1] == rgb[..., 2]))


def _untinted(names: ColorNames, lab: np.ndarray, grey: np.ndarray) -> ColorNames:
    """`names` of the CIELAB colors `lab` ``(..., 3)``, those where the boolean `grey`
    ``(...)`` holds named among `NEUTRALS` instead (rule 4)."""
    if not grey.any():
        return names
    neutral = name_lab(lab[grey], candidates=neutral_rows())
    fields = {}
    for field in ("l3", "l1", "basic", "l3_index", "delta_e"):
        values = getattr(names, field).copy()
        values[grey] = getattr(neutral, field)
        fields[field] = values
    return ColorNames(**fields)


def names_of_uw71() -> pd.DataFrame:
    """The names of the 71 UW-71 bins.

    Returns
    -------
    pandas.DataFrame
        71 rows in ``color_index`` order, columns ``color_index, hex, iscc_nbs_l3,
        iscc_nbs_l1, basic_term, delta_e`` (CIEDE2000 to the level 3 centroid); a new copy
        on every call (the names are computed once per process). The six grey bins
        (chroma 0) are named among `NEUTRALS` only.
    """
    return _uw71_names().copy()


@functools.cache
def _uw71_names() -> pd.DataFrame:
    palette = load_uw71()
    # The six greys (chroma 0, the bins ΔHue treats as hueless), by the palette's own CIELAB.
    names = _untinted(name_lab(palette.lab), palette.lab, np.asarray(palette.achromatic, dtype=bool))
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


NEUTRALS = ("white", "light gray", "medium gray", "dark gray", "black")
"""ISCC-NBS level 3's untinted neutrals (rows 263-267)."""


@functools.cache
def neutral_rows() -> np.ndarray:
    """The level 3 rows of `NEUTRALS`, in that order."""
    names = [str(n).lower() for n in _l3_tables()[0]]
    return np.array([names.index(n) for n in NEUTRALS], dtype=np.int64)


DOMINANT_COLUMNS = ("dominant_human", "dominant_model")
"""The bin-index columns of metric tables (`evaluation.pipeline.scoring`) that exports name."""


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


def build_lookup_table(bits: int = LOOKUP_BITS) -> np.ndarray:
    """Name every cell of sRGB quantised to `bits` bits per channel (slow: see Notes).

    Parameters
    ----------
    bits : int
        Bits kept per channel, in [1, 8]; a cell holds the ``2 ** (8 - bits)`` levels per
        channel that share their top `bits` bits.

    Returns
    -------
    ndarray of uint16, shape (2 ** (3 * bits),)
        The level 3 row (``ColorNames.l3_index``) of each cell's centre, in the order of
        `lookup_cell`.

    Notes
    -----
    6 bits name 262,144 colors against 260 centroids, ~11 s; the app reads the shipped
    `LOOKUP_FILE` through `lookup_table` instead.
    """
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"`bits` must be an integer in [1, 8], got {shown(bits)}")
    width = 1 << (8 - bits)
    centre = (np.arange(1 << bits) * width + (width - 1) / 2) / 255
    grid = np.stack(np.meshgrid(centre, centre, centre, indexing="ij"), axis=-1)
    return name_srgb(grid.reshape(-1, 3)).l3_index.astype(np.uint16)


def lookup_cell(rgb, bits: int = LOOKUP_BITS) -> np.ndarray:
    """The lookup-table cell of sRGB colors: ``(r >> s) << 2b | (g >> s) << b | (b >> s)``.

    Parameters
    ----------
    rgb : array_like of int, shape (..., 3)
        sRGB in [0, 255].
    bits : int
        Bits per channel of the table; ``s = 8 - bits``.

    Returns
    -------
    ndarray of int64, shape (...)
    """
    q = np.asarray(rgb, dtype=np.int64) >> (8 - bits)
    return (q[..., 0] << (2 * bits)) | (q[..., 1] << bits) | q[..., 2]


@functools.cache
def lookup_table_bytes() -> bytes:
    """The shipped lookup table as stored: zlib-compressed little-endian uint16.

    Raises
    ------
    ValueError
        If `LOOKUP_FILE` does not hold ``2 ** (3 * LOOKUP_BITS)`` level 3 rows.
    """
    data = LOOKUP_FILE.read_bytes()
    table = np.frombuffer(zlib.decompress(data), dtype="<u2")
    n_names = len(load_system("iscc-nbs-l3"))
    if len(table) != 1 << (3 * LOOKUP_BITS) or table.max() >= n_names:
        raise ValueError(
            f"{LOOKUP_FILE} must hold {1 << (3 * LOOKUP_BITS)} level 3 rows below {n_names}, "
            f"got {len(table)} up to {table.max()}; rebuild it (module docstring)"
        )
    return data


def lookup_table() -> np.ndarray:
    """The shipped lookup table (`build_lookup_table` at `LOOKUP_BITS`), read-only.

    Returns
    -------
    ndarray of uint16, shape (2 ** (3 * LOOKUP_BITS),)
    """
    return np.frombuffer(zlib.decompress(lookup_table_bytes()), dtype="<u2")


def level3_names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The level 3 names with their level 1 and basic terms, in level 3 row order.

    Returns
    -------
    l3, l1, basic : tuple of str, each of length 260
    """
    return tuple(tuple(str(v) for v in table) for table in _l3_tables())


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-lookup", action="store_true", help=f"rebuild {LOOKUP_FILE}")
    args = parser.parse_args()
    if args.write_lookup:
        table = build_lookup_table(LOOKUP_BITS)
        LOOKUP_FILE.write_bytes(zlib.compress(table.astype("<u2").tobytes(), 9))
        print(f"wrote {LOOKUP_FILE} ({LOOKUP_FILE.stat().st_size} bytes)")


if __name__ == "__main__":
    _main()
