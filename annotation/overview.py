"""Progress figures for the admin page: coverage of concepts and who is where."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import sqlite_utils

from storage import iso
from storage.schema import COLORING_STATUSES

# Colorings that fill a concept's quota: excluded ones do not, so the concept returns to
# the pool; a recolor request is redone by the same designer, so it keeps its slot.
COUNTED_STATUSES = ("submitted", "accepted", "recolor_requested")


def coverage(db: sqlite_utils.Database, k: int) -> dict:
    """How far the colorization has come.

    Parameters
    ----------
    k : int
        Colorings wanted per concept variant.

    Returns
    -------
    dict
        ``concepts`` (total variants), ``complete`` (variants with >= k counted main-task
        colorings), ``histogram`` (``{n: variants with n counted colorings}`` for n in
        0..k, where n = k means k or more), ``colorings_by_status`` (main task, every
        status in `storage.schema.COLORING_STATUSES`), ``annotators_by_role`` and
        ``slots`` (`coloring_slots`).
    """
    counts = {
        row["key"]: row["n"]
        for row in db.query(
            "select c.key, count(distinct g.annotator_id) as n from concepts c left join colorings g "
            f"on g.concept_key = c.key and g.practice = 0 and g.status in "
            f"({', '.join('?' * len(COUNTED_STATUSES))}) group by c.key",
            COUNTED_STATUSES,
        )
    }
    histogram = Counter(min(n, k) for n in counts.values())
    statuses = Counter(dict.fromkeys(COLORING_STATUSES, 0))
    statuses.update(
        {
            row["status"]: row["n"]
            for row in db.query(
                "select status, count(*) as n from colorings where practice = 0 group by status"
            )
        }
    )
    roles = Counter()
    for row in db.query("select roles from annotators where status = 'active'"):
        roles.update(json.loads(row["roles"]))
    return {
        "concepts": len(counts),
        "complete": histogram[k],
        "histogram": {n: histogram[n] for n in range(k + 1)},
        "colorings_by_status": dict(statuses),
        "annotators_by_role": dict(roles),
        "slots": coloring_slots(db, k),
    }


def coloring_slots(db: sqlite_utils.Database, k: int, *, now: dt.datetime | None = None) -> dict:
    """The main task's coloring slots: k per concept whose base has a selected sketch.

    Returns
    -------
    dict
        ``total``; ``done`` (counted colorings, at most k per concept); ``reserved``
        (reservations of new colorings that have not expired; a redo or recolor round
        takes no new slot); ``free`` (the rest: what designers can be handed now).
    """
    placeholders = ", ".join("?" * len(COUNTED_STATUSES))
    total, done, reserved = db.execute(
        "select count(*) * ?, coalesce(sum(min(done, ?)), 0), coalesce(sum(held), 0) from ("
        "select c.key, (select count(distinct g.annotator_id) from colorings g where "
        f"g.concept_key = c.key and g.practice = 0 and g.status in ({placeholders})) as done, "
        "(select count(*) from tasks t where t.kind = 'coloring' and t.practice = 0 and "
        "t.coloring_id is null and t.status = 'reserved' and t.expires > ? and "
        "t.concept_key = c.key) as held from concepts c where exists (select 1 from sketches s "
        "where s.base = c.base and s.selected = 1))",
        [k, k, *COUNTED_STATUSES, iso(now)],
    ).fetchone()
    return {"total": total, "done": done, "reserved": reserved, "free": max(0, total - done - reserved)}
