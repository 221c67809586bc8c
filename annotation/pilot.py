"""A pilot study: a few concepts on which designers overlap, so every stage opens early.

In the full study each designer is handed the least covered concepts first
(`annotation.assignment`), so with a handful of designers every concept has one coloring
and expert review, which needs two or more colorings of a concept, never opens. A pilot
names a small set of concepts (`MIN_SIZE` to `MAX_SIZE`, picked by name with `set_pilot` or
drawn with `draw_pilot`) that every designer is handed before any other concept, least
covered first among them. With a pilot no larger than a batch, each designer colors every
pilot concept, so k designers give each pilot concept k colorings. Once a pilot concept
has its quota it leaves the pool as any concept does, and designers go on with the rest
of the study.

The set is stored in the ``pilot_concepts`` table (schema v13), so it survives a restart;
`clear_pilot` ends it and the full study's order returns. Every change leaves an audit row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import numpy as np
import sqlite_utils

from annotation.errors import InvalidInput, NotFound, shown
from evaluation.concepts import key_meant
from storage import audit, insert_rows, iso, transaction

MIN_SIZE = 1
MAX_SIZE = 20
#: Pilot sizes an organiser is advised to choose (the issue's "5-20").
SUGGESTED = (5, 20)


def read_pilot(db: sqlite_utils.Database) -> list[str]:
    """The pilot's concept keys, in key order ([] when no pilot is set)."""
    return [row[0] for row in db.execute("select concept_key from pilot_concepts order by concept_key")]


def colorable_concepts(db: sqlite_utils.Database) -> list[str]:
    """Concepts designers can be handed: those whose base concept has a chosen sketch."""
    return [
        row[0]
        for row in db.execute(
            "select c.key from concepts c where exists (select 1 from sketches s where "
            "s.base = c.base and s.selected = 1) order by c.key"
        )
    ]


def set_pilot(
    db: sqlite_utils.Database, keys: Iterable[str], *, actor: str, now: dt.datetime | None = None
) -> list[str]:
    """Make `keys` the pilot's concepts, replacing any earlier pilot.

    Parameters
    ----------
    keys : iterable of str
        Concept keys, `MIN_SIZE` to `MAX_SIZE` different ones, each of a base concept with
        a chosen sketch (others could never be handed out). Repeats count once.
    actor : str
        Who sets it (the audit row's actor).

    Returns
    -------
    list of str
        The pilot's concepts, in key order.

    Raises
    ------
    InvalidInput
        Too few or too many concepts, or one without a chosen sketch.
    NotFound
        A key that is no concept.
    """
    wanted = list(dict.fromkeys(str(key).strip() for key in keys if str(key).strip()))
    _check_size(len(wanted))
    with transaction(db):
        known = {row[0] for row in db.execute("select key from concepts")}
        unknown = [key for key in wanted if key not in known]
        if unknown:
            meant = {key: key_meant(key, known) for key in unknown[:5]}
            raise NotFound(
                "no concept is called "
                + ", ".join(shown(k) + (f" (write {shown(m)})" if m else "") for k, m in meant.items())
            )
        colorable = set(colorable_concepts(db))
        bare = [key for key in wanted if key not in colorable]
        if bare:
            raise InvalidInput(
                f"{', '.join(map(shown, bare[:5]))} cannot be colored yet: choose a sketch "
                "of its base concept first (Sketches tab)"
            )
        _replace(db, wanted, actor, {"picked": True}, now)
    return sorted(wanted)


def draw_pilot(
    db: sqlite_utils.Database,
    n: int,
    rng: np.random.Generator,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> list[str]:
    """Draw `n` concepts at random among those with a chosen sketch and make them the pilot.

    Parameters
    ----------
    n : int
        How many, `MIN_SIZE` to `MAX_SIZE`.
    rng : numpy.random.Generator
        The draw (``np.random.default_rng(seed)`` repeats a pilot).

    Returns
    -------
    list of str
        The pilot's concepts, in key order.

    Raises
    ------
    InvalidInput
        `n` out of range, or more than the concepts that can be colored.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInput(f"the pilot's size must be a whole number, got {shown(n)}")
    _check_size(n)
    with transaction(db):
        pool = colorable_concepts(db)
        if n > len(pool):
            raise InvalidInput(
                f"only {len(pool)} concepts have a chosen sketch, so a pilot of {n} cannot be drawn"
            )
        drawn = [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]
        _replace(db, drawn, actor, {"drawn": n}, now)
    return sorted(drawn)


def clear_pilot(db: sqlite_utils.Database, *, actor: str, now: dt.datetime | None = None) -> int:
    """End the pilot: the full study's order returns. How many concepts it had."""
    with transaction(db):
        before = read_pilot(db)
        db.execute("delete from pilot_concepts")
        if before:
            audit.record(db, actor, "clear_pilot", "settings", "pilot", details={"concepts": before}, now=now)
    return len(before)


def held_elsewhere(db: sqlite_utils.Database, *, now: dt.datetime | None = None) -> tuple[int, int]:
    """``(tasks, designers)``: main-task colorings reserved now for concepts outside the pilot.

    A pilot orders what designers are handed next; what they already hold stays theirs and
    comes first (an outside check's designer colored three other concepts after a pilot was
    set, told nothing: probe 143).
    """
    row = db.execute(
        "select count(*), count(distinct annotator_id) from tasks where kind = 'coloring' and practice = 0 "
        "and coloring_id is null and status = 'reserved' and expires > ? "
        "and concept_key not in (select concept_key from pilot_concepts)",
        [iso(now)],
    ).fetchone()
    return int(row[0]), int(row[1])


def _replace(db, keys: list[str], actor: str, details: dict, now: dt.datetime | None) -> None:
    """Store `keys` as the whole pilot; inside the caller's transaction."""
    db.execute("delete from pilot_concepts")
    insert_rows(db, "pilot_concepts", ({"concept_key": key, "added": iso(now)} for key in keys))
    audit.record(
        db, actor, "set_pilot", "settings", "pilot", details={"concepts": sorted(keys), **details}, now=now
    )


def _check_size(n: int) -> None:
    if not MIN_SIZE <= n <= MAX_SIZE:
        raise InvalidInput(
            f"a pilot needs {MIN_SIZE} to {MAX_SIZE} concepts "
            f"({SUGGESTED[0]}-{SUGGESTED[1]} suggested), got {n}"
        )
