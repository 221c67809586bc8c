"""Withdrawing a designer's colorings, as the consent text promises ("You may ask the study
organisers to withdraw your colorings from the data set until it is published; withdrawn
colorings are excluded from all analyses").

`withdraw_colorings` sets every coloring of one person to ``withdrawn`` in one transaction:
no P_H counts it (`storage.human.COUNTED_STATUSES`), so the concepts it covered are
recomputed and handed to designers again as the least covered; its open expert review
closes (``withdrawn``) and the review tasks experts hold on it go back, so no vote lands on
it and no decision overwrites the status; a recolor or redo of it that its designer holds
ends (released), so no next round of a withdrawn coloring is stored. The files and rows stay, marked, for the audit
trail; an export carries the status. A withdrawal is not undone in the app.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlite_utils

from annotation.coloring import ground_truth
from annotation.errors import Conflict, InvalidInput, PermissionDenied, blank, check_text
from annotation.people.accounts import Actor, get_annotator, named
from storage import audit, iso, transaction, update_rows, utcnow
from storage.shown import counted

WITHDRAWN = "withdrawn"


@dataclass(frozen=True)
class Withdrawal:
    """What `withdraw_colorings` changed: ``colorings`` withdrawn (``practice`` of them
    practice colorings, which count in no P_H), ``concepts`` whose P_H was recomputed,
    ``reviews`` closed, ``released`` review tasks, ``redos`` (recolor or redo tasks of
    the designer's, ended), ``held`` (the new concepts they held, given back) and ``ids``
    (the colorings withdrawn)."""

    colorings: int
    practice: int
    concepts: int
    reviews: int
    released: int
    redos: int
    held: int = 0
    ids: tuple[int, ...] = ()


def withdraw_colorings(
    db: sqlite_utils.Database, annotator_id: int, actor: Actor, why: str, *, now: dt.datetime | None = None
) -> Withdrawal:
    """Withdraw every coloring of `annotator_id` (admin only), with an audit row.

    Raises
    ------
    PermissionDenied
        If `actor` is not the admin.
    InvalidInput
        If `why` is empty.
    NotFound
        If there is no such annotator.
    Conflict
        If they have no coloring left to withdraw; nothing changes.
    """
    check_text(why, "why")
    if not actor.is_admin:
        raise PermissionDenied("only the admin may withdraw colorings")
    if blank(why):
        raise InvalidInput("`why` is empty: say why the colorings are withdrawn (the person's request)")
    now = utcnow() if now is None else now
    with transaction(db):
        who = named(get_annotator(db, annotator_id))
        rows = list(
            db.query(
                "select id, concept_key, practice from colorings where annotator_id = ? and status != ?",
                [annotator_id, WITHDRAWN],
            )
        )
        if not rows:
            (withdrawn,) = db.execute(
                "select count(*) from colorings where annotator_id = ? and status = ?",
                [annotator_id, WITHDRAWN],
            ).fetchone()
            if withdrawn:  # "no coloring" read as none made, of a designer with 6 (outside probe 175)
                raise Conflict(
                    f"the {counted(withdrawn, 'coloring')} of {who} "
                    f"{'is' if withdrawn == 1 else 'are'} withdrawn already; nothing changed"
                )
            raise Conflict(f"{who} has no coloring to withdraw; nothing changed")
        ids = [r["id"] for r in rows]
        reviews, released, redos = mark_withdrawn(db, ids, iso(now))
        # A concept on their screen was stored on Submit and counted at once, unsaid (outside
        # probe 221): it goes back, and a Submit says why (`annotation.assignment`).
        held = update_rows(
            db,
            "tasks",
            {"kind": "coloring", "status": "reserved", "annotator_id": annotator_id, "coloring_id": None},
            {"status": "released", "finished": iso(now)},
        )
        concepts = sorted({r["concept_key"] for r in rows if not r["practice"]})
        for concept in concepts:
            ground_truth.refresh(db, concept)
        practice = sum(1 for r in rows if r["practice"])
        withdrawal = Withdrawal(len(ids), practice, len(concepts), reviews, released, redos, held, tuple(ids))
        audit.record(
            db,
            actor.pseudonym,
            "withdraw_colorings",
            "annotator",
            annotator_id,
            why,
            details={
                "colorings": withdrawal.colorings,
                "practice": practice,
                "concepts": withdrawal.concepts,
                "closed_reviews": reviews,
                "released_tasks": released,
                "ended_redos": redos,
                "released_own_tasks": held,
            },
            now=now,
        )
    return withdrawal


def withdrawn_count(db: sqlite_utils.Database, annotator_id: int, *, practice: bool) -> int:
    """How many of `annotator_id`'s practice (or main-task) colorings are withdrawn."""
    return db.execute(
        "select count(*) from colorings where annotator_id = ? and practice = ? and status = ?",
        [annotator_id, int(practice), WITHDRAWN],
    ).fetchone()[0]


def mark_withdrawn(db: sqlite_utils.Database, ids: list[int], now: str) -> tuple[int, int, int]:
    """Set the colorings `ids` to ``withdrawn``, close their open reviews and release the
    review tasks and the recolor or redo tasks held on them (finished at `now`, an ISO
    time), in the caller's transaction; the P_H of their concepts is the caller's to
    recompute.

    Returns
    -------
    tuple of int
        Reviews closed, review tasks released, recolor or redo tasks released.
    """
    update_rows(db, "colorings", {"id in": ids}, {"status": WITHDRAWN})
    reviews = update_rows(db, "reviews", {"coloring_id in": ids, "status": "open"}, {"status": WITHDRAWN})
    released = update_rows(
        db,
        "tasks",
        {"kind": "review", "status": "reserved", "coloring_id in": ids},
        {"status": "released", "finished": now},
    )
    redos = update_rows(  # a next round of a withdrawn coloring would stand (outside probe 168)
        db,
        "tasks",
        {"kind": "coloring", "status": "reserved", "coloring_id in": ids},
        {"status": "released", "finished": now},
    )
    return reviews, released, redos
