"""Human ground truth P_H(x|c) for the research tabs, always with the name of its source.

A source is either

- ``designers``: the ground-truth colorings of the project's own designers, through
  ``annotation.colorings.human_distribution(db, data_dir, concept_key)``, labelled with the number of colorings; or
- an imported reference set stored in ``reference_distributions`` under its label, e.g.
  ``uw71-ratings`` (Schloss et al.'s mean ratings). The shipped ``uw71-ratings`` set is
  offered even before anyone stored it: it is then read from ``assets/reference/``.

Sources are never mixed: every distribution carries its source and a label saying where
it comes from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation import colorings
from evaluation import runs
from evaluation.reference import UW71_RATINGS_PROVENANCE, UW71_RATINGS_SOURCE, load_reference_csv

DESIGNERS = "designers"


@dataclass(frozen=True)
class HumanDistribution:
    """One concept's human distribution and where it comes from.

    Attributes
    ----------
    concept, source : str
    p : ndarray, shape (71,), float64
        Sums to 1, UW-71 ``color_index`` order.
    label : str
        E.g. ``"designer colorings (n = 5)"`` or ``"reference set 'uw71-ratings'"``.
    n_colorings : int or None
        Colorings behind `p` (designers only).
    groups : tuple or None
        The extraction groups (``evaluation.extraction.ColorGroup``) of the designers'
        colorings, for the dominant-color strip; None for a reference set.
    """

    concept: str
    source: str
    p: np.ndarray
    label: str
    n_colorings: int | None = None
    groups: tuple | None = None


def human_sources(db: sqlite_utils.Database) -> list[str]:
    """The sources one can compare models with: designers first, then reference sets."""
    stored = runs.reference_sources(db)
    shipped = [] if UW71_RATINGS_SOURCE in stored else [UW71_RATINGS_SOURCE]
    return [DESIGNERS, *stored, *shipped]


def _check_source(db: sqlite_utils.Database, source: str) -> None:
    known = human_sources(db)
    if source not in known:
        raise ValueError(f"`source` must be one of {known}, got {source!r}")


def describe_source(db: sqlite_utils.Database, source: str) -> str:
    """One line on where `source`'s distributions come from (its stored provenance)."""
    _check_source(db, source)
    if source == DESIGNERS:
        return "Accepted colorings of this project's designers (Appendix C.3 extraction); counts per concept."
    row = db.execute("SELECT provenance FROM reference_distributions WHERE source = ? LIMIT 1", [source]).fetchone()
    provenance = row[0] if row is not None else f"{UW71_RATINGS_PROVENANCE} (shipped file, not imported yet)"
    return f"Imported reference set '{source}': {provenance}"


def _designer(db: sqlite_utils.Database, data_dir: str | Path, concept: str) -> HumanDistribution | None:
    found = colorings.human_distribution(db, data_dir, concept)
    if not found.n:
        return None
    return HumanDistribution(concept, DESIGNERS, np.asarray(found.p, dtype=np.float64),
                             f"designer colorings (n = {found.n})", found.n, tuple(found.groups or ()))


def _reference(db: sqlite_utils.Database, source: str) -> dict[str, np.ndarray]:
    if source in runs.reference_sources(db):
        return runs.reference_distributions(db, source)
    return load_reference_csv()


def human_distributions(db: sqlite_utils.Database, source: str, concepts: Iterable[str], *,
                        data_dir: str | Path) -> dict[str, HumanDistribution]:
    """The human distributions of `source` for the concept keys `concepts` that it covers.

    Parameters
    ----------
    source : str
        One of `human_sources(db)`.
    concepts : iterable of str
        Concept keys; keys without a distribution in `source` are left out (for
        designers: concepts with no ground-truth coloring).
    data_dir : str or Path
        Where the colorings' images are stored (used for ``designers`` only).

    Returns
    -------
    dict of str to HumanDistribution
        By concept key, in the order of `concepts`.

    Raises
    ------
    ValueError
        If `source` is unknown (the message lists the known ones).
    """
    _check_source(db, source)
    keys = list(dict.fromkeys(concepts))
    if source == DESIGNERS:
        found = {key: _designer(db, data_dir, key) for key in keys}
        return {key: h for key, h in found.items() if h is not None}
    reference = _reference(db, source)
    label = f"reference set '{source}'"
    return {key: HumanDistribution(key, source, reference[key], label) for key in keys if key in reference}


def human_distribution(db: sqlite_utils.Database, source: str, concept: str, *,
                       data_dir: str | Path) -> HumanDistribution | None:
    """`concept`'s distribution in `source`, or None if the source does not cover it."""
    return human_distributions(db, source, [concept], data_dir=data_dir).get(concept)


def human_vectors(db: sqlite_utils.Database, source: str, concepts: Iterable[str], *,
                  data_dir: str | Path) -> dict[str, np.ndarray]:
    """Just the (71,) vectors of `human_distributions`, for `evaluation.scoring.score`."""
    return {key: h.p for key, h in human_distributions(db, source, concepts, data_dir=data_dir).items()}
