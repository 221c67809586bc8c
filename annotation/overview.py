"""Progress figures for the admin page: coverage of concepts and who is where.

Whether a concept is complete follows the assignment mode
(`annotation.coloring.stability.Mode`): in the fixed mode (the paper's protocol) when it
has `k` counted colorings; in the adaptive mode when it has at least ``min_k`` and its
P_H stability is at or under the threshold, or when it has ``cap``. Stabilities are read
as cached (`annotation.coloring.stability.stabilities` without computing), so a concept
past ``min_k`` whose value is not computed yet counts as needing designers until the
stability view or an assignment computes it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import sqlite_utils

from annotation.assignment import COUNTED_STATUSES
from annotation.coloring import stability
from annotation.pilot import colorable_concepts
from storage import iso
from storage.schema import COLORING_STATUSES

#: Per concept state under the adaptive rule, in the order the admin reads them.
ADAPTIVE_STATES = ("below min K", "not measured yet", "unstable", "stable", "at the cap")
FIXED_STATES = ("below k", "complete")
_COMPLETE = ("stable", "at the cap", "complete")


def coverage(db: sqlite_utils.Database, k: int, *, now: dt.datetime | None = None) -> dict:
    """How far the colorization has come, under the stored assignment mode.

    Parameters
    ----------
    k : int
        Colorings wanted per concept variant in the fixed mode.

    Returns
    -------
    dict
        ``concepts`` (total variants); ``adaptive`` (the mode); ``complete`` and ``needing`` (variants done and
        still needing designers under the mode's rule); ``needing_colorable`` (those of
        ``needing`` whose base concept has a chosen sketch: the rest wait for one, and no
        designer can be handed them); ``rule`` (that rule in words);
        ``states`` (variants per state: `FIXED_STATES` or `ADAPTIVE_STATES`);
        ``histogram`` (``{n: variants with n counted colorings}`` for n in 0..top, where
        n = top means top or more; top is `k`, or the cap in the adaptive mode);
        ``colorings_by_status`` (main task, each designer's latest round of a concept, by
        every status in `storage.schema.COLORING_STATUSES`); ``replaced_rounds`` (main-task
        rounds a later round of the same designer replaced: not counted, whatever their
        status); ``practice_colorings`` (practice colorings of any status: they count
        towards no concept); ``annotators_by_role`` and ``slots``
        (`coloring_slots` with the mode's quota per concept).
    """
    mode = stability.read_mode(db)
    counts = counted_per_concept(db)
    states = concept_states(db, counts, k, mode)
    top = mode.cap if mode.adaptive else k
    histogram = Counter(min(n, top) for n in counts.values())
    statuses = Counter(dict.fromkeys(COLORING_STATUSES, 0))
    rows = list(
        db.query(
            "select status, sum(round = latest) as n, sum(round < latest) as replaced from "
            "(select status, round, max(round) over (partition by annotator_id, concept_key) "
            "as latest from colorings where practice = 0) group by status"
        )
    )
    statuses.update({row["status"]: row["n"] for row in rows})
    roles = Counter()
    for row in db.query("select roles from annotators where status = 'active'"):
        roles.update(json.loads(row["roles"]))
    by_state = Counter(states.values())
    complete = sum(by_state[s] for s in _COMPLETE)
    quotas = {key: _quota(state, counts[key], k, mode) for key, state in states.items()}
    colorable = set(colorable_concepts(db))
    return {
        "concepts": len(counts),
        "complete": complete,
        "needing": len(counts) - complete,
        "needing_colorable": sum(key in colorable for key, state in states.items() if state not in _COMPLETE),
        "adaptive": mode.adaptive,
        "rule": rule(k, mode),
        "states": {s: by_state[s] for s in (ADAPTIVE_STATES if mode.adaptive else FIXED_STATES)},
        "histogram": {n: histogram[n] for n in range(top + 1)},
        "colorings_by_status": dict(statuses),
        "replaced_rounds": sum(row["replaced"] for row in rows),
        "practice_colorings": db["colorings"].count_where("practice = 1"),
        "annotators_by_role": dict(roles),
        "slots": coloring_slots(db, k, quotas=quotas, now=now),
    }


def rule(k: int, mode: stability.Mode) -> str:
    """When a concept is complete under `mode`, in words (Markdown-safe)."""
    if not mode.adaptive:
        return f"Fixed mode (the paper's protocol): a concept is complete with {k} colorings."
    return (
        f"Adaptive mode: a concept is complete with at least {mode.min_k} colorings and a P_H "
        f"stability at or under {mode.threshold:g} ΔE, or with {mode.cap} colorings (the cap)."
    )


def counted_per_concept(db: sqlite_utils.Database) -> dict[str, int]:
    """Per concept variant the designers of its counted main-task colorings (`COUNTED_STATUSES`)."""
    return {
        row["key"]: row["n"]
        for row in db.query(
            "select c.key, count(distinct g.annotator_id) as n from concepts c left join colorings g "
            f"on g.concept_key = c.key and g.practice = 0 and g.status in "
            f"({', '.join('?' * len(COUNTED_STATUSES))}) group by c.key",
            COUNTED_STATUSES,
        )
    }


def concept_states(
    db: sqlite_utils.Database, counts: dict[str, int], k: int, mode: stability.Mode
) -> dict[str, str]:
    """Each concept's state under `mode`: one of `FIXED_STATES` or `ADAPTIVE_STATES`.

    Parameters
    ----------
    counts : dict of str to int
        `counted_per_concept`.
    k : int
        Colorings per concept in the fixed mode.
    mode : annotation.coloring.stability.Mode
    """
    if not mode.adaptive:
        return {key: "complete" if n >= k else "below k" for key, n in counts.items()}
    past = [key for key, n in counts.items() if mode.min_k <= n < mode.cap]
    measured = {s.concept: s.value for s in stability.stabilities(db, past, compute=False)} if past else {}

    def state(key: str, n: int) -> str:
        if n >= mode.cap:
            return "at the cap"
        if n < mode.min_k:
            return "below min K"
        if key not in measured:
            return "not measured yet"
        return "unstable" if measured[key] > mode.threshold else "stable"

    return {key: state(key, n) for key, n in counts.items()}


def _quota(state: str, n: int, k: int, mode: stability.Mode) -> int:
    """Colorings a concept in `state` is wanted to reach now (its slots)."""
    if not mode.adaptive:
        return k
    if state in ("unstable", "not measured yet", "at the cap"):
        return mode.cap
    return mode.min_k if state == "below min K" else min(max(n, mode.min_k), mode.cap)


def coloring_slots(
    db: sqlite_utils.Database,
    k: int,
    *,
    quotas: dict[str, int] | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """The main task's coloring slots: k (or ``quotas[key]``) per concept whose base has a selected sketch.

    Returns
    -------
    dict
        ``total``; ``done`` (counted colorings, at most the quota per concept);
        ``reserved`` (reservations of new colorings that have not expired; a redo or
        recolor round takes no new slot); ``free`` (the rest: what designers can be
        handed now).
    """
    placeholders = ", ".join("?" * len(COUNTED_STATUSES))
    rows = db.execute(
        "select c.key, (select count(distinct g.annotator_id) from colorings g where "
        f"g.concept_key = c.key and g.practice = 0 and g.status in ({placeholders})) as done, "
        "(select count(*) from tasks t where t.kind = 'coloring' and t.practice = 0 and "
        "t.coloring_id is null and t.status = 'reserved' and t.expires > ? and "
        "t.concept_key = c.key) as held from concepts c where exists (select 1 from sketches s "
        "where s.base = c.base and s.selected = 1)",
        [*COUNTED_STATUSES, iso(now)],
    ).fetchall()
    quota = [k if quotas is None else quotas.get(key, k) for key, _, _ in rows]
    total = sum(quota)
    done = sum(min(n, q) for (_, n, _), q in zip(rows, quota))
    reserved = sum(held for _, _, held in rows)
    return {"total": total, "done": done, "reserved": reserved, "free": max(0, total - done - reserved)}
