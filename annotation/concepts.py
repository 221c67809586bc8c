"""The concept variants of Table 9 in the ``concepts`` table."""

from __future__ import annotations

import dataclasses

import sqlite_utils

from annotation.errors import NotFound, shown
from evaluation.concepts import Concept, load_concepts
from storage import transaction, upsert_rows


def sync_concepts(db: sqlite_utils.Database, concepts: list[Concept] | None = None) -> int:
    """Insert or update every concept variant; idempotent.

    Parameters
    ----------
    db : sqlite_utils.Database
        A database with the current schema.
    concepts : list of Concept, optional
        Default `evaluation.concepts.load_concepts()` (the shipped Table 9, 1,278 variants).

    Returns
    -------
    int
        The number of rows in ``concepts`` afterwards. Concepts no longer listed are kept,
        since colorings may refer to them.
    """
    concepts = load_concepts() if concepts is None else concepts
    with transaction(db):
        upsert_rows(db, "concepts", (dataclasses.asdict(c) for c in concepts), pk=("key",))
    return db["concepts"].count


def get_concept(db: sqlite_utils.Database, key: str) -> dict:
    """The ``concepts`` row of `key`.

    Raises
    ------
    NotFound
        If no concept has that key.
    """
    rows = list(db["concepts"].rows_where("key = ?", [key]))
    if not rows:
        raise NotFound(unknown_concept(key))
    return rows[0]


def unknown_concept(key) -> str:
    """The one message for a concept key that names no concept."""
    return f"unknown concept {shown(key)}; expected a key such as 'rotten apple'"
