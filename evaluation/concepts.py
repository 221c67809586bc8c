"""The benchmark's concept list: Table 9 expanded into concept variants.

A *base concept* is one row of Table 9 (``apple``, category ``fruit``). A *concept*
(variant) is the base concept alone (modifier type ``original``), with a visual-state
modifier (``rotten apple``) or with an emotional modifier (``lonely cabin``). The
concept's ``key`` is its text, which is unique over all 1,278 variants and is the
identifier shared by the annotation store and the evaluation runs.
"""

from __future__ import annotations

import csv
import functools
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
CONCEPTS_CSV = ASSETS / "concepts" / "concepts_table9.csv"

MODIFIER_TYPES = ("original", "visual_state", "emotional")
CATEGORIES = ("animal", "fruit", "vegetables", "plant", "food", "landscape", "building")


@dataclass(frozen=True)
class Concept:
    """One concept variant.

    Attributes
    ----------
    key : str
        The concept's text, e.g. ``"rotten apple"``; unique.
    base : str
        The base concept (the object noun), e.g. ``"apple"``.
    base_id : int
        The row id of the base concept in Table 9 (1-214).
    category : str
        One of `CATEGORIES`.
    modifier_type : str
        One of `MODIFIER_TYPES`.
    modifier : str
        The adjective, ``""`` for an original concept.
    """

    key: str
    base: str
    base_id: int
    category: str
    modifier_type: str
    modifier: str


def _split(cell: str) -> list[str]:
    return [m.strip() for m in cell.split(";") if m.strip()]


def load_concepts(path: str | Path = CONCEPTS_CSV) -> list[Concept]:
    """Read Table 9 and expand every base concept into its variants.

    Parameters
    ----------
    path : str or Path
        A CSV with columns ``id, category, concept, visual_state_modifiers,
        emotional_modifiers``; modifiers are ``;``-separated.

    Returns
    -------
    list of Concept
        Per base concept in file order: the original, then its visual-state
        variants, then its emotional variants, each in file order.

    Raises
    ------
    ValueError
        If a category is unknown or two variants share a key.
    """
    concepts: list[Concept] = []
    seen: set[str] = set()
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            base, category = row["concept"].strip(), row["category"].strip()
            if category not in CATEGORIES:
                raise ValueError(
                    f"concept {base!r} has unknown category {category!r}; expected one of {CATEGORIES}"
                )
            variants = [("original", "")]
            variants += [("visual_state", m) for m in _split(row["visual_state_modifiers"])]
            variants += [("emotional", m) for m in _split(row["emotional_modifiers"])]
            for modifier_type, modifier in variants:
                key = f"{modifier} {base}".strip()
                if key in seen:
                    raise ValueError(f"concept {key!r} appears twice in {path}")
                seen.add(key)
                concepts.append(Concept(key, base, int(row["id"]), category, modifier_type, modifier))
    return concepts


def _folded(name: str) -> str:
    """`name` as a reader sees it: compatibility forms (full-width letters) as their plain
    letters, invisible format characters (a zero-width space) gone, runs of spaces (a
    no-break space too) as one, without spaces around it, in no particular case."""
    name = unicodedata.normalize("NFKC", name)
    name = "".join(c for c in name if unicodedata.category(c) != "Cf")
    return " ".join(name.split()).casefold()


def key_meant(name: str, keys: Collection[str]) -> str | None:
    """The concept key among `keys` that `name` spells otherwise (other capitals, spaces
    around or inside it, full-width letters, a zero-width character: ``"Apple "``,
    ``"ａｐｐｌｅ"``), or None when `name` is a key itself or reads as none of them."""
    if name in keys:
        return None
    return _by_folded(frozenset(keys)).get(_folded(name))


@functools.lru_cache(maxsize=4)
def _by_folded(keys: frozenset[str]) -> dict[str, str]:
    """`keys` by their `_folded` form (the first in sorted order where two fold alike): built
    once per key set, not per name asked (an import refuses names file by file)."""
    index: dict[str, str] = {}
    for key in sorted(keys):
        index.setdefault(_folded(key), key)
    return index
