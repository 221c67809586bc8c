"""Stored human distributions P_H(x|c): the rows, the sources and the counting rule.

Every human distribution the app shows or scores with is a ``human_distributions`` row,
keyed by (source, concept):

- source ``designers`` (kind ``designers``): the extraction pipeline over the concept's
  *counted colorings* (`COUNTING_RULE`), kept current by `annotation.coloring.ground_truth.refresh`
  in the same transaction as every change to which colorings count;
- any other source is an imported reference set (kind ``reference``), e.g.
  ``uw71-ratings``, Schloss et al.'s mean ratings shipped in ``assets/reference/``.

Sources are never mixed, and every distribution carries its source and a label saying
where it comes from. Nothing here computes a distribution: `annotation.coloring.ground_truth` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import sqlite_utils

from storage.db import iso, select, transaction, upsert_row
from storage.distributions import decode, decode_groups, encode, encode_groups
from storage.shown import shown

DESIGNERS = "designers"
REFERENCE = "reference"
#: The coloring statuses that count, for the designer's latest round only.
COUNTED_STATUSES = ("submitted", "accepted")
#: A source's mean entropy at or above this share of ln 71 nats is nearly flat (`flatness_note`).
FLAT_ENTROPY_SHARE = 0.9
#: Which colorings make up the designers' P_H, in words (shown next to every P_H).
COUNTING_RULE = (
    "Each designer's latest round of the concept (main tasks, not practice) counts while "
    "it is submitted or accepted: a new submission counts at once, before expert review; "
    "an excluded coloring, or one whose designer was asked to recolor it, does not count "
    "until it is reinstated or its next round arrives."
)


#: The colorings `COUNTING_RULE` counts (``colorings c`` with ``coloring_distributions d``), its
#: parameters `COUNTED_STATUSES`.
_COUNTED = (
    "from colorings c join coloring_distributions d on d.coloring_id = c.id where c.practice = 0 "
    f"and c.status in ({', '.join('?' * len(COUNTED_STATUSES))}) and c.round = (select max(l.round) "
    "from colorings l where l.practice = 0 and l.annotator_id = c.annotator_id and l.concept_key = "
    "c.concept_key)"
)


class UnknownSource(ValueError):
    """A human source label that is neither ``designers`` nor a stored reference set."""


@dataclass(frozen=True)
class HumanDistribution:
    """One concept's human distribution and where it comes from.

    Attributes
    ----------
    concept, source : str
    p : ndarray, shape (71,), float64
        Sums to 1, UW-71 ``color_index`` order.
    n_colorings : int or None
        Colorings behind `p` (designers only).
    coloring_ids : tuple of int
        Those colorings, ascending (designers only).
    groups : list of dict
        The extraction groups of the designers' colorings (``image_indices`` index
        `coloring_ids`; ``rgb`` heaviest first), for the dominant-color strip; empty for
        a reference set.
    provenance : str
        A reference set's stored provenance; for designers the extraction method.
    """

    concept: str
    source: str
    p: np.ndarray
    n_colorings: int | None = None
    coloring_ids: tuple[int, ...] = ()
    groups: list = ()
    provenance: str = ""

    @property
    def label(self) -> str:
        """E.g. ``"designer colorings (n = 5)"`` or ``"reference set 'uw71-ratings'"``."""
        if self.source == DESIGNERS:
            return f"designer colorings (n = {self.n_colorings})"
        return f"reference set '{self.source}'"


def counted_colorings(db: sqlite_utils.Database, concept_key: str | None = None) -> list[dict]:
    """The colorings `COUNTING_RULE` counts, with their stored distribution ``p`` (text).

    Parameters
    ----------
    concept_key : str, optional
        One concept; default every concept.

    Returns
    -------
    list of dict
        ``colorings`` rows plus their own distribution ``p`` ((71,) float64), ordered by
        concept then id.
    """
    where, params = ("and c.concept_key = ?", [concept_key]) if concept_key else ("", [])
    return [
        {**row, "p": decode(row["p"])}
        for row in select(
            db,
            f"select c.*, d.p {_COUNTED} {where} order by c.concept_key, c.id",
            [*COUNTED_STATUSES, *params],
        )
    ]


def counted_per_concept(db: sqlite_utils.Database) -> dict[str, int]:
    """Per concept with any, its counted colorings under `COUNTING_RULE` (the ones the
    consistency ranking uses and `counted_colorings` reads), counted in the database."""
    return dict(
        db.execute(
            f"select c.concept_key, count(*) {_COUNTED} group by c.concept_key", COUNTED_STATUSES
        ).fetchall()
    )


def write_designers(
    db: sqlite_utils.Database,
    concept_key: str,
    p: np.ndarray | None,
    coloring_ids: Iterable[int] = (),
    groups=(),
    method: str = "",
) -> None:
    """Store (or, with `p` None, remove) the designers' P_H of one concept.

    Called by `annotation.coloring.ground_truth.refresh` inside the transaction that changed the
    concept's counted colorings; `method` names the extraction that computed `p` (kept as
    the row's ``provenance``).
    """
    with transaction(db):
        if p is None:
            db.execute(
                "delete from human_distributions where source = ? and concept_key = ?",
                [DESIGNERS, concept_key],
            )
            return
        ids = sorted(int(i) for i in coloring_ids)
        upsert_row(
            db,
            "human_distributions",
            {
                "source": DESIGNERS,
                "concept_key": concept_key,
                "kind": DESIGNERS,
                "p": encode(p),
                "n_colorings": len(ids),
                "colorings": json.dumps(ids),
                "groups": encode_groups(groups),
                "provenance": method,
                "updated": iso(),
            },
            pk=("source", "concept_key"),
        )


def store_reference(
    db: sqlite_utils.Database,
    source: str,
    distributions: Mapping[str, np.ndarray],
    provenance: str,
    *,
    update: bool = False,
) -> int:
    """Store a labelled reference set of human distributions, at once.

    A label names one set: storing the same set again changes nothing, and a different set
    under a label already taken is refused (written concept by concept over the old one, it
    left a mix of two sources under one name, the shipped ``uw71-ratings`` too), unless
    `update` asks for exactly that: these concepts' vectors written over the set's (a lab's
    corrected ratings), the others kept.

    Returns
    -------
    int
        The number of concepts stored.

    Raises
    ------
    ValueError
        If `source` is empty or ``designers``, taken by another set, or a vector is not a
        distribution (the message names the concept); nothing is stored then.
    """
    if not source or source == DESIGNERS:
        raise ValueError(f"`source` must be a non-empty label other than {DESIGNERS!r}, got {shown(source)}")
    now = iso()
    rows = [
        {
            "source": source,
            "concept_key": concept,
            "kind": REFERENCE,
            "p": _encode_named(p, f"{source}/{concept}"),
            "n_colorings": None,
            "colorings": "[]",
            "groups": "[]",
            "provenance": provenance,
            "updated": now,
        }
        for concept, p in distributions.items()
    ]
    with transaction(db):
        stored = dict(
            db.execute("select concept_key, p from human_distributions where source = ?", [source]).fetchall()
        )
        if update:
            db["human_distributions"].upsert_all(rows, pk=("source", "concept_key"))
            return len(rows)
        if stored and stored != {row["concept_key"]: row["p"] for row in rows}:
            kept = db.execute(
                "select provenance from human_distributions where source = ? limit 1", [source]
            ).fetchone()[0]
            raise ValueError(
                f"the reference set {source!r} exists already ({len(stored)} concepts, {shown(kept)}) and "
                "holds other distributions; store the new set under another label"
            )
        if not stored:
            db["human_distributions"].insert_all(rows, pk=("source", "concept_key"))
    return len(rows)


def _encode_named(p, what: str) -> str:
    try:
        return encode(p)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None


def reference_sources(db: sqlite_utils.Database) -> list[str]:
    """The labels of the stored reference sets, sorted."""
    return [
        r[0]
        for r in db.execute(
            "select distinct source from human_distributions where kind = ? order by source", [REFERENCE]
        )
    ]


def sources(db: sqlite_utils.Database) -> list[str]:
    """Every source one can compare models with: ``designers`` first, then reference sets."""
    return [DESIGNERS, *reference_sources(db)]


def check_source(db: sqlite_utils.Database, source: str) -> None:
    """Raise `UnknownSource` (listing the known ones) unless `source` is one of `sources`."""
    known = sources(db)
    if source not in known:
        raise UnknownSource(f"`source` must be one of {known}, got {shown(source)}")


def coloring_counts(db: sqlite_utils.Database) -> dict[str, int]:
    """How many counted colorings each concept's stored designers' P_H rests on."""
    return {
        key: int(n)
        for key, n in db.execute(
            "select concept_key, n_colorings from human_distributions where source = ?", [DESIGNERS]
        )
    }


def describe(db: sqlite_utils.Database, source: str) -> str:
    """One line on where `source`'s distributions come from."""
    check_source(db, source)
    if source == DESIGNERS:
        return (
            "Designer colorings of this project (Appendix C.3 extraction), counted per "
            f"concept. {COUNTING_RULE}"
        )
    row = db.execute(
        "select provenance from human_distributions where source = ? limit 1", [source]
    ).fetchone()
    text = f"Reference set '{source}', imported: {row[0]}"
    flat = flatness_note(db, source)
    return f"{text.rstrip('.')}. {flat}" if flat else text


def flatness_note(db: sqlite_utils.Database, source: str) -> str:
    """A warning when `source`'s distributions are nearly flat; else "".

    Nearly flat: their mean entropy is at least `FLAT_ENTROPY_SHARE` of ln 71 nats, the
    entropy of the uniform distribution over UW-71. Association ratings divided by their sums
    are so (the shipped ``uw71-ratings``: 4.15 of 4.26 nats, the top color 3.2 % of the mass on average),
    unlike the few colors a designer paints; against them EMD and ED are smallest for a model
    that spreads its mass over every color, while PCC, DCA and ΔHue compare the ratings'
    shape and their top color.
    """
    ps = list(vectors(db, source).values())
    if not ps:
        return ""
    from scipy.stats import entropy as entropies  # nats

    P = np.stack(ps)
    entropy = entropies(P, axis=1)
    most = np.log(P.shape[1])
    if entropy.mean() < FLAT_ENTROPY_SHARE * most:
        return ""
    return (
        f"Its distributions are nearly flat (over its {len(ps)} concepts, mean entropy {entropy.mean():.2f} of "
        f"at most {most:.2f} nats; the top color holds {P.max(axis=1).mean():.1%} of the mass on average), "
        "unlike the few colors "
        "a designer paints: against them EMD and ED favour a model that spreads its colors evenly over one "
        "that paints the concept's top colors. PCC, DCA and ΔHue compare the shape and the top color."
    )


def read(
    db: sqlite_utils.Database, source: str, concepts: Iterable[str] | None = None
) -> dict[str, HumanDistribution]:
    """The stored distributions of `source`, by concept key.

    Parameters
    ----------
    source : str
        One of `sources(db)`.
    concepts : iterable of str, optional
        Concept keys, in the order wanted; keys the source does not cover are left out.
        Default: every concept the source covers, sorted.

    Raises
    ------
    UnknownSource
        If `source` is unknown.
    """
    check_source(db, source)
    sql, params = "select * from human_distributions where source = ?", [source]
    if concepts is not None:
        concepts = list(dict.fromkeys(concepts))
        if len(concepts) <= 500:  # one concept's view reads one row, not every row
            sql += f" and concept_key in ({', '.join('?' * len(concepts))})"
            params += concepts
    rows = {row["concept_key"]: row for row in select(db, sql, params)}
    keys = sorted(rows) if concepts is None else [k for k in concepts if k in rows]
    return {key: _distribution(rows[key]) for key in keys}


def _distribution(row: dict) -> HumanDistribution:
    return HumanDistribution(
        concept=row["concept_key"],
        source=row["source"],
        p=decode(row["p"]),
        n_colorings=row["n_colorings"],
        coloring_ids=tuple(json.loads(row["colorings"] or "[]")),
        groups=decode_groups(row["groups"]),
        provenance=row["provenance"] or "",
    )


def concept_keys(db: sqlite_utils.Database, source: str) -> set[str]:
    """The concepts `source` holds a distribution of (nothing decoded)."""
    check_source(db, source)
    return {
        row[0] for row in db.execute("select concept_key from human_distributions where source = ?", [source])
    }


def vectors(
    db: sqlite_utils.Database, source: str, concepts: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """Just the (71,) vectors of `read`, for `evaluation.pipeline.scoring.score` (only ``p`` is
    read and decoded: the groups behind 1,278 distributions cost 0.2 s)."""
    check_source(db, source)
    rows = dict(
        db.execute("select concept_key, p from human_distributions where source = ?", [source]).fetchall()
    )
    keys = sorted(rows) if concepts is None else [k for k in dict.fromkeys(concepts) if k in rows]
    return {key: decode(rows[key]) for key in keys}
