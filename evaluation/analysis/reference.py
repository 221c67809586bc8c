"""Reference human distributions P_H(x|c) read from a CSV over the UW-71 palette.

Scoring can then run before the project's own designer study is complete: e.g. the mean
color-concept association ratings of Schloss et al. (``assets/reference/``), normalised per
concept into a probability vector. Such a set is stored with a source label (see
`storage.human.store_reference`) and never mixed with the designers' data.
"""

from __future__ import annotations

import csv
import io
import math
import unicodedata
from collections.abc import Collection
from pathlib import Path

import numpy as np
import sqlite_utils

from evaluation.concepts import ASSETS, key_meant
from storage import human
from storage.distributions import N_BINS
from storage.shown import shown
from storage.spreadsheet import decoded_csv, number_cell, separator_refusal

UW71_RATINGS_CSV = ASSETS / "reference" / "uw71_concept_ratings.csv"
UW71_RATINGS_SOURCE = "uw71-ratings"
UW71_RATINGS_PROVENANCE = (
    "Schloss Visual Reasoning Lab, SchlossVRL/gpt-cca data/uw71_all_concept_ratings.csv (MIT): "
    "mean human color-concept association ratings (0-1) over UW-71, each concept's row divided by its sum"
)


class ReferenceError(ValueError):
    """A reference CSV is malformed; the message names the file, row and column."""


def _parse_row(path: Path, line: int, row: list[str]) -> tuple[str, np.ndarray]:
    concept = row[0]
    where = f"{path.name} row {line} ({concept!r})"
    if not concept.strip():
        raise ReferenceError(f"{where}: the first column must name the concept, got {shown(concept)}")
    if len(row) != N_BINS + 1:
        raise ReferenceError(f"{where}: expected {N_BINS} values after the concept, got {len(row) - 1}")
    values = []
    for column, cell in enumerate(row[1:]):
        try:
            value = number_cell(cell)
        except ValueError:
            raise ReferenceError(f"{where}: color {column} is not a number, got {shown(cell)}") from None
        if math.isnan(value) or math.isinf(value):
            raise ReferenceError(f"{where}: color {column} is {cell.strip()}, expected a finite number")
        if value < 0:
            raise ReferenceError(f"{where}: color {column} is negative ({value}); ratings must be >= 0")
        values.append(value)
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        total = values.sum()
    if not math.isfinite(total):
        raise ReferenceError(
            f"{where}: the values sum past the largest number a float holds (about 1.8e308); "
            "divide the row by a common factor"
        )
    if total <= 0:
        raise ReferenceError(f"{where}: all {N_BINS} values are zero, so the row has no distribution")
    if np.ptp(values) == 0:
        raise ReferenceError(
            f"{where}: all {N_BINS} values are equal ({values[0]:g}), so the row prefers no color: "
            "its correlation (PCC), dominant color (DCA) and hue (ΔHue) would be undefined"
        )
    return concept, values / total


def load_reference_csv(
    path: str | Path = UW71_RATINGS_CSV, known: Collection[str] | None = None
) -> dict[str, np.ndarray]:
    """Read per-concept weights over UW-71 and normalise each row to a distribution.

    Parameters
    ----------
    path : str or Path
        CSV whose header is an empty (or label) cell followed by the color indices
        ``0, 1, ..., 70``, and whose rows are a concept name then 71 non-negative weights
        (ratings in [0, 1] for the shipped file).
    known : collection of str, optional
        The concept keys a model is scored on (`evaluation.concepts.load_concepts`). When
        given, a row naming one of them in other capitals or spacing (``"Apple"``, full-width
        letters, a zero-width space: `evaluation.concepts.key_meant`) is refused with the
        key it meant, as is a file naming none of them; other names are
        kept (a published set rates more concepts than the benchmark has: the shipped one
        holds "angry" and "above") and are never compared.

    Returns
    -------
    dict of str to ndarray
        Concept name to a (71,) float64 vector in ``color_index`` order summing to 1.

    Raises
    ------
    ReferenceError
        For a file with no concept row, a header that is not ``0..70``, and for a row with a missing, non-numeric, NaN,
        infinite or negative value, with zero mass, with blanks around its name, or naming a
        concept twice (also in another Unicode form of the same text); with `known`, also as
        said there.
    """
    path = Path(path)
    try:
        rows = list(csv.reader(io.StringIO(decoded_csv(path.read_bytes(), path.name), newline="")))
    except ValueError as error:
        raise ReferenceError(str(error)) from None
    if not rows:
        raise ReferenceError(f"{path.name} is empty; expected a header and one row per concept")
    if why := separator_refusal(rows[0], path.name):
        raise ReferenceError(why)
    # Columns empty in every row after the last (a spreadsheet keeps a cleared column's) are dropped.
    width = max(len(row) for row in rows)
    while width > 1 and not any(cell.strip() for row in rows for cell in row[width - 1 : width]):
        width -= 1
    rows = [row[:width] for row in rows]
    header = [cell.strip() for cell in rows[0][1:]]
    if header != [str(i) for i in range(N_BINS)]:
        wrong = next((i for i, cell in enumerate(header) if i >= N_BINS or cell != str(i)), len(header))
        if wrong >= N_BINS:
            why = f"column {wrong + 2} comes after color {N_BINS - 1} and is not empty in every row"
        else:
            found = repr(header[wrong]) if wrong < len(header) else "nothing"
            why = f"column {wrong + 2} holds {found} where {str(wrong)!r} belongs"
        raise ReferenceError(
            f"{path.name} header must list color indices 0..{N_BINS - 1} after the first cell: {why}"
        )
    distributions: dict[str, np.ndarray] = {}
    rows_of: dict[str, tuple[int, str]] = {}  # a name in Unicode's composed form: its row and text
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        concept, p = _parse_row(path, line, row)
        if known is not None and (meant := key_meant(concept, known)) is not None:
            raise ReferenceError(
                f"{path.name} row {line}: no concept is named {concept!r}; write {meant!r} "
                "(concept keys are written as in the concept list: plain lowercase letters, one space "
                "between words, nothing around them)"
            )
        if concept != concept.strip():  # stored as given: trimmed, it would be another name
            raise ReferenceError(
                f"{path.name} row {line}: {concept!r} has blanks before or after it; write {concept.strip()!r}"
            )
        if concept in distributions:
            raise ReferenceError(f"{path.name} row {line}: concept {concept!r} appears twice")
        first, spelled = rows_of.setdefault(unicodedata.normalize("NFC", concept), (line, concept))
        if spelled != concept:  # printed alike: ascii() shows how they differ
            raise ReferenceError(
                f"{path.name} rows {first} and {line}: {ascii(spelled)} and {ascii(concept)} are "
                f"one name, {concept!r}, written with other Unicode characters (composed and "
                "combining accents); keep one row"
            )
        distributions[concept] = p
    if not distributions:  # a header alone was "stored" as 0 distributions, then not found
        raise ReferenceError(f"{path.name} has a header but no concept row; expected one row per concept")
    if known is not None and not set(distributions) & set(known):
        named = ", ".join(repr(c) for c in list(distributions)[:5])
        raise ReferenceError(
            f"{path.name} names no concept of the benchmark ({named}"
            f"{', ...' if len(distributions) > 5 else ''}): name each row by a concept key, such "
            "as 'apple' or 'rotten apple'; a model is compared only on those"
        )
    return distributions


def ensure_shipped_reference(db: sqlite_utils.Database) -> bool:
    """Store the shipped ``uw71-ratings`` set when it is missing; whether it stored it."""
    if UW71_RATINGS_SOURCE in human.reference_sources(db):
        return False
    human.store_reference(db, UW71_RATINGS_SOURCE, load_reference_csv(), UW71_RATINGS_PROVENANCE)
    return True
