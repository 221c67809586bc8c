"""Expert quality control, stage 3 (paper Appendix B.4): blind votes and their agreement.

Every coloring of a high-variance concept has an open ``reviews`` row
(`annotation.qc.review.open_review_queue`). Experts get review tasks from
`annotation.assignment` (kind ``review``: never their own colorings, never one they voted
on, each coloring to ``votes_needed`` different experts) and see them most suspicious
first (lowest SCD plausibility). An expert sees the coloring, its distribution and the
concept, never the designer or other votes.

When a coloring has all its votes (3), the majority decides in the same transaction as
the last vote: majority Inconsistent sets it ``excluded``, majority Consistent sets it
``accepted``, each with an audit row by ``system``. An admin can reinstate an excluded
coloring (`reinstate`, audit row).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlite_utils

from annotation.assignment import open_tasks, reserve, submit
from annotation.coloring.store import get_coloring, set_status
from annotation.errors import Conflict, InvalidInput, PermissionDenied, blank, check_text
from annotation.people.accounts import Actor
from annotation.qc import stats as qc
from annotation.qc.readiness import MISSING_VOTES, active_experts
from annotation.qc.review import require_role
from storage import audit, insert_row, iso, transaction, update_rows
from storage.shown import in_words, shown

# Review tasks an expert holds at once (the paper is silent); the queue is refilled
# after each vote. Fewer when the missing votes shared among the active experts come to
# fewer (`fair_batch`).
REVIEW_BATCH = 10


@dataclass(frozen=True)
class VoteItem:
    """One coloring to vote on, as an expert sees it (no designer, no other votes).

    Attributes
    ----------
    task_id, coloring_id : int
    concept_key : str
    image_path : str
        Relative to the data folder.
    p : numpy.ndarray, shape (71,)
        Its UW-71 distribution.
    plausibility : float or None
        SCD score in [0, 1] against the concept's other colorings (low = suspicious).
    """

    task_id: int
    coloring_id: int
    concept_key: str
    image_path: str
    p: np.ndarray
    plausibility: float | None


def vote_queue(
    db: sqlite_utils.Database,
    actor: Actor,
    rng: np.random.Generator,
    *,
    batch_size: int | None = None,
    now: dt.datetime | None = None,
) -> list[VoteItem]:
    """Reserve review tasks for an expert and list them, most suspicious first; the first is
    marked shown (``tasks.shown``), and only a shown task takes a vote (`cast_vote`).

    Parameters
    ----------
    actor : Actor
        An expert (with an annotator id).
    rng : numpy.random.Generator
        Breaks ties among equally covered colorings when reserving.
    batch_size : int, optional
        Tasks held at once, >= 1 (default: `fair_batch`).

    Returns
    -------
    list of VoteItem
        Ordered by plausibility ascending (unscored last), then task id.
    """
    expert_id = _expert_id(actor)
    reserve(db, "review", expert_id, rng, fair_batch(db) if batch_size is None else batch_size, now=now)
    items = []
    for task, score in _held_in_order(db, expert_id, now):
        coloring = get_coloring(db, task.coloring_id)
        items.append(
            VoteItem(
                task.id, coloring["id"], coloring["concept_key"], coloring["image_path"], coloring["p"], score
            )
        )
    if items:
        with transaction(db):
            update_rows(db, "tasks", {"id": items[0].task_id, "shown": None}, {"shown": iso(now)})
    return items


def _held_in_order(db, expert_id: int, now: dt.datetime | None) -> list[tuple]:
    """The expert's held review tasks with their reviews' plausibility, in `vote_queue`'s
    order: the Expert tab shows the first."""
    tasks = open_tasks(db, "review", expert_id, now=now)
    # One query for the batch: a lookup per task was most of a vote's time (~8 ms of it)
    ids = sorted({task.coloring_id for task in tasks})
    plausibility = dict(
        db.execute(
            f"select coloring_id, plausibility from reviews where coloring_id in ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()
    )
    held = [(task, plausibility[task.coloring_id]) for task in tasks]
    return sorted(held, key=lambda h: (h[1] is None, h[1] or 0.0, h[0].id))


def fair_batch(db: sqlite_utils.Database, most: int = REVIEW_BATCH) -> int:
    """Review tasks one expert may hold: the votes still missing on open reviews shared
    among the active experts, rounded up, from 1 to `most`.

    Ten each for everyone left a fifth expert with nothing to vote on for two hours while
    35 votes on 12 colorings were missing (an outside check): the first four held them."""
    missing = db.execute(
        f"select coalesce(sum({MISSING_VOTES}), 0) from reviews r where r.status = 'open'"
    ).fetchone()[0]
    return max(1, min(most, -(-missing // max(active_experts(db), 1))))


def open_to_vote(db: sqlite_utils.Database, actor: Actor) -> int:
    """Colorings the expert may still vote on, held by them or not: open reviews that miss
    votes, of colorings not their own, that they have not voted on. Their queue holds only
    their share (`fair_batch`) and is topped up after each vote, so its length stayed put
    while they voted (outside probe 205); this count goes down with each of their votes.
    Some of them may be held by other experts for now (`held_by_others`)."""
    return db.execute(
        f"select count(*) from reviews r join colorings g on g.id = r.coloring_id where r.status = 'open' "
        f"and {MISSING_VOTES} > 0 and g.annotator_id != :a and not exists (select 1 from qc_votes v "
        "where v.coloring_id = r.coloring_id and v.expert_id = :a)",
        {"a": _expert_id(actor)},
    ).fetchone()[0]


def held_by_others(
    db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None
) -> tuple[int, str | None]:
    """Open reviews the expert may still vote on (and does not hold) that other experts hold now, and when the
    last of those reservations ends (ISO 8601 UTC; None when there is none): one an expert
    leaves unvoted comes back to the queue then."""
    expert_id = _expert_id(actor)
    count, latest = db.execute(
        "select count(distinct t.coloring_id), max(t.expires) from tasks t join reviews r on "
        "r.coloring_id = t.coloring_id join colorings g on g.id = t.coloring_id where t.kind = "
        "'review' and t.status = 'reserved' and t.expires > :now and t.annotator_id != :a and "
        "r.status = 'open' and g.annotator_id != :a and not exists (select 1 from qc_votes v "
        "where v.coloring_id = t.coloring_id and v.expert_id = :a) and not exists (select 1 from "
        "tasks m where m.kind = 'review' and m.status = 'reserved' and m.annotator_id = :a and "
        "m.coloring_id = t.coloring_id)",
        {"a": expert_id, "now": iso(now)},
    ).fetchone()
    return int(count), latest


def cast_vote(
    db: sqlite_utils.Database,
    actor: Actor,
    task_id: int,
    consistent: bool,
    *,
    comment: str = "",
    now: dt.datetime | None = None,
) -> str | None:
    """Record an expert's blind vote; the last vote decides the coloring.

    Parameters
    ----------
    actor : Actor
        The expert holding `task_id`.
    task_id : int
        A reserved ``review`` task.
    consistent : bool
        Whether the coloring is consistent with the concept's meaning.
    comment : str
        Optional, stored as typed.

    Returns
    -------
    str or None
        ``"consistent"`` or ``"inconsistent"`` when this vote completed the review, else
        None.

    Raises
    ------
    PermissionDenied
        Not an expert, someone else's task, or the expert's own coloring.
    Conflict
        The task was already submitted, the expert already voted on this coloring, or it
        is a held task other than the one shown (the first of `vote_queue`), or one
        `vote_queue` has not shown yet.
    ReservationExpired
        The reservation lapsed and its slot went to someone else, or the review closed.
    """
    expert_id = _expert_id(actor)
    if not isinstance(consistent, (bool, np.bool_)):
        raise InvalidInput(f"`consistent` must be True or False, got {shown(consistent)}")
    decision = []
    # Before whose it is: a participant's trial was refused as "handed to someone else"
    # (outside probe 194), which said nothing of what was wrong.
    kind = db.execute("select kind from tasks where id = ?", [task_id]).fetchone()
    if kind is not None and kind[0] != "review":
        raise InvalidInput(
            f"task {task_id} is a {kind[0]} task, not a review: vote on the coloring shown to you"
        )

    def write(db_, task) -> int:
        coloring = get_coloring(db_, task.coloring_id)
        if coloring["annotator_id"] == expert_id:
            raise PermissionDenied(f"coloring {coloring['id']} is your own; you cannot vote on it")
        # The coloring on screen is the first of the queue (`vote_queue`): a vote naming another
        # held, never shown one (an API client's) was stored for a coloring the expert never saw.
        held = [t.id for t, _ in _held_in_order(db_, expert_id, now)]
        if task.id in held and held[0] != task.id:
            raise Conflict(
                f"`task_id` {task.id} is not the coloring shown to you now ({held[0]} is): vote on "
                "the coloring on screen"
            )
        # First of the queue after a vote, but never fetched: an API client's vote on a
        # guessed next id was stored, and decided a review (outside probe 143).
        if db_["tasks"].get(task.id)["shown"] is None:
            raise Conflict(
                f"`task_id` {task.id} was not shown to you yet: ask for your next coloring "
                "(*Next coloring*, or /expert_next) and vote on the one it shows"
            )
        vote_id = insert_row(
            db_,
            "qc_votes",
            {
                "coloring_id": coloring["id"],
                "expert_id": expert_id,
                "vote": qc.CONSISTENT if consistent else qc.INCONSISTENT,
                "comment": comment or None,
                "created": iso(now),
            },
        )
        decision.append(_decide(db_, coloring, now))
        return vote_id

    submit(db, task_id, expert_id, write, now=now)
    return decision[0]


def _decide(db, coloring: dict, now: dt.datetime | None) -> str | None:
    """Close the review once it has its votes; apply the majority. Inside the vote's
    transaction."""
    review = db["reviews"].get(coloring["id"])
    counts = _counts(db, coloring["id"])
    if sum(counts) < review["votes_needed"]:
        return None
    decision = qc.majority_decision(*counts)
    if decision == qc.UNDECIDED:
        raise Conflict(
            f"coloring {coloring['id']} has a tied vote {counts}; reviews need an odd number of votes"
        )
    update_rows(db, "reviews", {"coloring_id": coloring["id"]}, {"status": "decided"})
    status = "excluded" if decision == qc.INCONSISTENT else "accepted"
    if coloring["status"] != status:
        set_status(db, coloring, status)
        audit.record(
            db,
            "system",
            "exclude_coloring" if status == "excluded" else "accept_coloring",
            "coloring",
            coloring["id"],
            f"blind expert vote: {counts[0]} consistent, {counts[1]} inconsistent",
            details={
                "consistent": counts[0],
                "inconsistent": counts[1],
                "previous_status": coloring["status"],
            },
            now=now,
        )
    return decision


def reinstate(
    db: sqlite_utils.Database, actor: Actor, coloring_id: int, why: str, *, now: dt.datetime | None = None
) -> None:
    """Reverse an exclusion (admin only): the coloring becomes ``accepted`` again.

    Raises
    ------
    PermissionDenied
        If `actor` is not the admin.
    InvalidInput
        If `why` is empty.
    Conflict
        If the coloring is not excluded.
    """
    check_text(why, "why")
    if not actor.is_admin:
        raise PermissionDenied("only the admin may reinstate an excluded coloring")
    if blank(why):
        raise InvalidInput("`why` is empty: say why the coloring is reinstated")
    with transaction(db):
        coloring = get_coloring(db, coloring_id)
        if coloring["status"] != "excluded":
            raise Conflict(f"coloring {coloring_id} is {in_words(coloring['status'])}, not excluded")
        set_status(db, coloring, "accepted")
        audit.record(db, actor.pseudonym, "reinstate_coloring", "coloring", coloring_id, why, now=now)


def excluded_colorings(db: sqlite_utils.Database) -> list[dict]:
    """Excluded main-task colorings with their vote counts, newest exclusion first."""
    return list(
        db.query(
            "select c.id as coloring_id, c.concept_key, a.pseudonym, c.round, "
            "sum(v.vote = 'consistent') as consistent, sum(v.vote = 'inconsistent') as "
            "inconsistent from colorings c join annotators a on a.id = c.annotator_id "
            "left join qc_votes v on v.coloring_id = c.id where c.status = 'excluded' and "
            "c.practice = 0 group by c.id order by c.id desc"
        )
    )


def out_now(db: sqlite_utils.Database) -> tuple[int, bool]:
    """How many colorings whose review the votes decided are out of the data set now
    (``excluded``, or ``withdrawn`` by their designer since), and whether that set differs
    from the one the votes discarded (their majority Inconsistent): an admin's reinstatement
    or a withdrawal changed it. A coloring withdrawn after its review was decided was
    counted nowhere (outside probe 197)."""
    rows = db.execute(
        "select c.status in ('excluded', 'withdrawn'), sum(v.vote = 'inconsistent') > sum(v.vote = "
        "'consistent') from reviews r join colorings c on c.id = r.coloring_id join qc_votes v on "
        "v.coloring_id = r.coloring_id where r.status = 'decided' and c.practice = 0 group by r.coloring_id"
    ).fetchall()
    return sum(out for out, _ in rows), any(bool(out) != bool(discarded) for out, discarded in rows)


def votes_left_out(db: sqlite_utils.Database) -> int:
    """Votes on reviews a withdrawal closed while they were open
    (`annotation.coloring.withdrawal.mark_withdrawn`): `vote_matrix` takes decided reviews
    alone, each with all its votes, so these count nowhere in the agreement statistics."""
    return db.execute(
        "select count(*) from qc_votes v join reviews r on r.coloring_id = v.coloring_id "
        "where r.status = 'withdrawn'"
    ).fetchone()[0]


def vote_matrix(db: sqlite_utils.Database) -> tuple[np.ndarray, pd.DataFrame]:
    """The votes of every decided review.

    Returns
    -------
    votes : numpy.ndarray, shape (n, 2), int
        ``(consistent, inconsistent)`` per coloring, in coloring id order.
    ratings : pandas.DataFrame, shape (n, n_experts)
        Index coloring id, one column per expert pseudonym; 1 consistent, 0
        inconsistent, NaN did not vote.
    """
    rows = list(
        db.query(
            "select v.coloring_id, a.pseudonym, v.vote = 'consistent' as yes from qc_votes v "
            "join reviews r on r.coloring_id = v.coloring_id join annotators a on a.id = "
            "v.expert_id where r.status = 'decided' order by v.coloring_id, a.pseudonym"
        )
    )
    if not rows:
        return np.zeros((0, 2), dtype=np.int64), pd.DataFrame()
    ratings = pd.DataFrame(rows).pivot(index="coloring_id", columns="pseudonym", values="yes").astype(float)
    ratings.columns.name = None
    yes = (ratings == 1).sum(axis=1).to_numpy()
    no = (ratings == 0).sum(axis=1).to_numpy()
    return np.stack([yes, no], axis=1).astype(np.int64), ratings


def agreement_panel(db: sqlite_utils.Database) -> qc.AgreementSummary | None:
    """`annotation.qc.stats.agreement_summary` over every decided review, with per-expert
    agreement; None before the first decision."""
    votes, ratings = vote_matrix(db)
    if len(votes) == 0:
        return None
    return qc.agreement_summary(votes, ratings=ratings)


def _expert_id(actor: Actor) -> int:
    require_role(actor, "expert")
    if actor.annotator_id is None:
        raise PermissionDenied(f"{actor.pseudonym} has no annotator record and cannot vote")
    return actor.annotator_id


def _counts(db, coloring_id: int) -> tuple[int, int]:
    row = db.execute(
        "select coalesce(sum(vote = 'consistent'), 0), coalesce(sum(vote = "
        "'inconsistent'), 0) from qc_votes where coloring_id = ?",
        [coloring_id],
    ).fetchone()
    return int(row[0]), int(row[1])
