"""Expert quality control, stages 1 and 2 (paper Appendix B.4): review and consistency.

Stage 1, qualitative review: experts browse a concept's colorings in a grid (designers
shown as "designer A, B, ..." unless an admin reveals them) and ask for a recolor with a
note; the designer redoes the concept as a new round (see `annotation.coloring.store`), and
the grid shows the EMD between consecutive rounds of the same designer.

Stage 2, quantitative consistency: Eq. 6, the mean pairwise EMD among a concept's
ground-truth distributions (`annotation.qc.stats.consistency_scores`), ranked; the top 10 %
(configurable) are high-variance and all their colorings go to the blind vote queue
(`open_review_queue`; stage 3 is `annotation.qc.votes`), ordered by SCD plausibility
(`evaluation.color.plausibility`).
"""

from __future__ import annotations

import datetime as dt
import json
import string
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlite_utils

from annotation.coloring import ground_truth
from annotation.coloring.store import concept_colorings, get_coloring, recolor_note, set_status
from annotation.coloring.tasks import slot_quota
from annotation.concepts import get_concept
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied, blank, check_text
from annotation.people.accounts import Actor
from annotation.qc import stats as qc
from annotation.qc.plausibility import scores_by_concept as batch_scores
from evaluation.color import metrics
from evaluation.color.plausibility import plausibility_ranking
from storage import audit, insert_row, insert_rows, iso, transaction, utcnow
from storage.human import counted_colorings, counted_per_concept
from storage.settings import read_setting, write_setting
from storage.shown import in_words, shown

REVIEWER_ROLES = ("expert", "admin")
# How long a designer has to redo a coloring (the paper is silent).
RECOLOR_DAYS = 14.0
MIN_COLORINGS = 2
MIN_COLORINGS_SETTING = "review_min_colorings"
"""The setting under which `open_review_queue` keeps the colorings per concept it used."""
VOTES_PER_REVIEW = 3
HIGH_VARIANCE_REASON = "high-variance concept"
RECOLORABLE = ("submitted", "accepted", "recolor_requested")
UNDER_VOTE = "under the blind vote"
"""What an expert's grid says of a coloring whose blind vote is open (`coloring_grid`)."""


@dataclass(frozen=True)
class GridItem:
    """One coloring in the stage-1 grid.

    Attributes
    ----------
    coloring_id : int or None
        None for a coloring under the blind vote, in an expert's grid (`coloring_grid`).
    designer : str
        ``"designer A"``... per concept (stable: by first coloring), or the pseudonym
        when revealed; `UNDER_VOTE` for a coloring under the blind vote.
    round : int or None
        None for a coloring under the blind vote.
    status : str
    image_path : str
        Relative to the data folder.
    p : numpy.ndarray, shape (71,)
        Its UW-71 distribution.
    round_emd : float or None
        EMD (ΔE*ab) to the same designer's previous round; None in round 1.
    note : str
        The latest recolor request's note on it ("" if none); user text, escape it.
    """

    coloring_id: int | None
    designer: str
    round: int | None
    status: str
    image_path: str
    p: np.ndarray
    round_emd: float | None
    note: str


PRACTICE_IS_THE_ADMINS = "coloring {cid} is a practice coloring; the admin reviews those, and nothing changed"


def require_role(actor: Actor, *roles: str) -> None:
    """Raise `PermissionDenied` unless `actor` holds one of `roles` (library-side check)."""
    if not actor.roles & set(roles):
        raise PermissionDenied(
            f"this action needs the role {' or '.join(roles)}; "
            f"{actor.pseudonym} has {', '.join(sorted(actor.roles))}"
        )


def reviewable_concepts(db: sqlite_utils.Database) -> list[dict]:
    """Concepts with main-task colorings not withdrawn: ``concept_key``, ``designers``,
    ``colorings``, ``recolor_requested`` (pending), ordered by key. A withdrawn coloring is
    not counted (outside probe 221: "4 designers, 4 colorings" on a P_H of 2)."""
    return list(
        db.query(
            "select concept_key, count(distinct annotator_id) as designers, count(*) as colorings, "
            "sum(status = 'recolor_requested') as recolor_requested from colorings "
            "where practice = 0 and status != 'withdrawn' group by concept_key order by concept_key"
        )
    )


def coloring_grid(
    db: sqlite_utils.Database, actor: Actor, concept_key: str, *, reveal: bool = False
) -> list[GridItem]:
    """Every round of every designer's coloring of a concept, for the stage-1 grid.

    An expert's grid leaves out withdrawn colorings and keeps the blind vote blind (outside probe 114: the vote's image was the
    grid's, captioned with its designer, round and the recolor note before it): a coloring
    whose vote is open is shown last, in no telling order, without id, designer, round or
    note (`UNDER_VOTE`), and its designer's earlier rounds of the concept are left out
    until the vote decides. The admin, who does not vote, sees every coloring as it is.

    Parameters
    ----------
    actor : Actor
        An expert or the admin.
    reveal : bool
        Show pseudonyms instead of "designer A"...; only the admin may.

    Raises
    ------
    PermissionDenied
        If `actor` is neither expert nor admin, or asks to reveal without being admin.
    NotFound
        If `concept_key` is not a concept (a known concept without colorings gives []).
    """
    require_role(actor, *REVIEWER_ROLES)
    if reveal and not actor.is_admin:
        raise PermissionDenied("only the admin may reveal who made a coloring")
    get_concept(db, concept_key)
    rows = concept_colorings(db, concept_key)
    first = sorted({r["annotator_id"]: r["id"] for r in reversed(rows)}.items(), key=lambda item: item[1])
    labels = {a: f"designer {_letters(i)}" for i, (a, _) in enumerate(first)}
    previous: dict[int, dict] = {}
    items = []
    for row in rows:
        before = previous.get(row["annotator_id"])
        round_emd = (
            metrics.emd(before["p"], row["p"]) if before is not None and row["p"] is not None else None
        )
        items.append(
            GridItem(
                row["id"],
                row["pseudonym"] if reveal else labels[row["annotator_id"]],
                row["round"],
                row["status"],
                row["image_path"],
                row["p"],
                round_emd,
                recolor_note(db, row["id"]),
            )
        )
        previous[row["annotator_id"]] = row
    # An expert is not shown a withdrawn coloring (its designer asked; outside probe 221);
    # the admin, who withdrew it, sees it marked.
    return items if actor.is_admin else _blinded(db, [i for i in items if i.status != "withdrawn"])


def _blinded(db: sqlite_utils.Database, items: list[GridItem]) -> list[GridItem]:
    """`items` as an expert sees them while some are under the blind vote (`coloring_grid`)."""
    ids = [i.coloring_id for i in items]
    voting = {
        cid
        for (cid,) in db.execute(
            f"select coloring_id from reviews where status = 'open' and coloring_id in ({','.join('?' * len(ids))})",
            ids,
        )
    }
    if not voting:
        return items
    designers = {i.designer for i in items if i.coloring_id in voting}
    shown = [i for i in items if i.designer not in designers]
    hidden = [
        GridItem(None, UNDER_VOTE, None, UNDER_VOTE, i.image_path, i.p, None, "")
        for i in items
        if i.coloring_id in voting
    ]
    return shown + sorted(hidden, key=lambda i: i.image_path)  # the file names are content hashes


def request_recolor(
    db: sqlite_utils.Database,
    actor: Actor,
    coloring_id: int,
    note: str,
    *,
    days: float = RECOLOR_DAYS,
    now: dt.datetime | None = None,
) -> int:
    """Ask the designer of a coloring to color its concept again (stage 1).

    The coloring becomes ``recolor_requested`` (it stays stored) and its designer gets a
    recolor task: kind ``coloring``, same concept, ``coloring_id`` = this coloring, valid
    for `days`. The note is kept in the audit row (shown to the designer by
    `recolor_note`).

    Parameters
    ----------
    actor : Actor
        An expert or the admin.
    coloring_id : int
        A main-task coloring that is its designer's latest round and stands (or waits
        for a recolor whose task lapsed).
    note : str
        What to reconsider; non-empty, stored as typed.
    days : float
        How long the recolor task stays reserved, > 0.

    Returns
    -------
    int
        The recolor task id.

    Raises
    ------
    PermissionDenied, InvalidInput, NotFound
    Conflict
        If the coloring is a practice coloring, excluded, not the latest round, of a
        designer whose account is closed, under blind review or decided by it, or already
        has an open recolor task.
    """
    check_text(note, "note")
    require_role(actor, *REVIEWER_ROLES)
    if blank(note):
        raise InvalidInput("`note` is empty: say what the designer should reconsider")
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0:
        raise InvalidInput(f"`days` must be a positive number, got {shown(days)}")
    now = utcnow() if now is None else now
    with transaction(db):
        coloring = get_coloring(db, coloring_id)
        _check_recolorable(db, coloring, now)
        set_status(db, coloring, "recolor_requested")
        task_id = insert_row(
            db,
            "tasks",
            {
                "kind": "coloring",
                "annotator_id": coloring["annotator_id"],
                "concept_key": coloring["concept_key"],
                "coloring_id": coloring_id,
                "practice": 0,
                "status": "reserved",
                "created": iso(now),
                "expires": iso(now + dt.timedelta(days=days)),
            },
        )
        audit.record(
            db,
            actor.pseudonym,
            "request_recolor",
            "coloring",
            coloring_id,
            note,
            details={"task_id": task_id, "round": coloring["round"] + 1},
            now=now,
        )
    return task_id


def marked_fine_by(db: sqlite_utils.Database, coloring_id: int) -> str | None:
    """Who marked coloring `coloring_id` as fine (`accept_coloring`), while it stands so;
    else None."""
    if db.execute("select status from colorings where id = ?", [coloring_id]).fetchone() != ("accepted",):
        return None
    row = db.execute(
        "select actor from audit where action = 'accept_coloring' and object_type = 'coloring' "
        "and object_id = ? order by id desc limit 1",
        [str(coloring_id)],
    ).fetchone()
    return row[0] if row else "an expert"


def _check_recolorable(db, coloring: dict, now: dt.datetime) -> None:
    cid = coloring["id"]
    if coloring["practice"]:
        raise Conflict(PRACTICE_IS_THE_ADMINS.format(cid=cid))
    if coloring["status"] not in RECOLORABLE:
        raise Conflict(
            f"coloring {cid} is {in_words(coloring['status'])}; only standing colorings can be recolored"
        )
    latest = db.execute(
        "select max(round) from colorings where annotator_id = ? and concept_key = ? and practice = 0",
        [coloring["annotator_id"], coloring["concept_key"]],
    ).fetchone()[0]
    if coloring["round"] != latest:
        raise Conflict(
            f"coloring {cid} is round {coloring['round']}; its designer already made round {latest}"
        )
    if (
        db.execute("select status from annotators where id = ?", [coloring["annotator_id"]]).fetchone()[0]
        == "revoked"
    ):
        # A recolor task for someone who cannot sign in any more was promised to nobody
        # (outside probe 129: "its designer has 14 days to color it again").
        raise Conflict(
            f"coloring {cid}'s designer's account is closed, so nobody would color it again; "
            "the experts' blind vote can still exclude it"
        )
    _check_not_voted(db, cid)
    if db["tasks"].count_where(
        "kind = 'coloring' and coloring_id = ? and status = 'reserved' and expires > ?", [cid, iso(now)]
    ):
        raise Conflict(f"coloring {cid} already waits for its recolor")


def _check_not_voted(db, cid: int) -> None:
    """Stage-1 actions stop where stage 3 starts: a coloring under the blind vote waits for
    its decision, and a decided one stands as the panel decided (one expert's review must
    not undo or pre-empt it)."""
    status = db.execute("select status from reviews where coloring_id = ?", [cid]).fetchone()
    if status is None:
        return
    if status[0] == "open":
        raise Conflict(f"coloring {cid} is in the blind vote queue; wait for its decision")
    raise Conflict(
        f"coloring {cid} was decided by the experts' blind vote; it stands as the panel decided "
        "(the admin may reinstate an excluded coloring: Expert review, 5. Excluded colorings)"
    )


def accept_coloring(
    db: sqlite_utils.Database,
    actor: Actor,
    coloring_id: int,
    note: str = "",
    *,
    now: dt.datetime | None = None,
) -> None:
    """Mark a submitted coloring as reviewed and fine (stage 1), with an audit row.

    Raises
    ------
    Conflict
        If the coloring is a practice coloring (the admin's to review), is not ``submitted``,
        or is under (or decided by) the blind vote.
    """
    check_text(note, "note")
    require_role(actor, *REVIEWER_ROLES)
    with transaction(db):
        coloring = get_coloring(db, coloring_id)
        if coloring["practice"]:  # a call past the page marked one fine (outside probe 191)
            raise Conflict(PRACTICE_IS_THE_ADMINS.format(cid=coloring_id))
        if coloring["status"] == "withdrawn":  # it was said to be decided by the vote (probe 164)
            raise Conflict(
                f"coloring {coloring_id} is withdrawn; only standing colorings can be marked as fine"
            )
        _check_not_voted(db, coloring_id)
        if coloring["status"] != "submitted":
            raise Conflict(f"coloring {coloring_id} is {in_words(coloring['status'])}, not submitted")
        set_status(db, coloring, "accepted")
        audit.record(db, actor.pseudonym, "accept_coloring", "coloring", coloring_id, note or "", now=now)


def consistency_ranking(
    db: sqlite_utils.Database,
    *,
    top_fraction: float = qc.HIGH_VARIANCE_FRACTION,
    min_colorings: int = MIN_COLORINGS,
) -> pd.DataFrame:
    """Eq. 6 per concept over its ground-truth colorings, highest (least consensus) first.

    Parameters
    ----------
    top_fraction : float
        Share of ranked concepts marked high-variance, in (0, 1] (paper: 0.10).
    min_colorings : int
        Concepts with fewer ground-truth colorings are not ranked (>= 2; paper: 5).

    Returns
    -------
    pandas.DataFrame
        Columns ``rank`` (1 = least consensus), ``concept``, ``n`` (colorings),
        ``consistency_emd`` (mean pairwise EMD, ΔE*ab) and ``high_variance`` (bool);
        empty when no concept has `min_colorings`.
    """
    return _ranking(_counted_by_concept(db), top_fraction, min_colorings)


def _counted_by_concept(db: sqlite_utils.Database) -> dict[str, list[dict]]:
    by_concept: dict[str, list[dict]] = {}
    for row in counted_colorings(db):
        by_concept.setdefault(row["concept_key"], []).append(row)
    return by_concept


def _ranking(by_concept: dict[str, list[dict]], top_fraction: float, min_colorings: int) -> pd.DataFrame:
    if isinstance(min_colorings, bool) or not isinstance(min_colorings, int) or min_colorings < 2:
        raise InvalidInput(
            f"Colorings needed per concept must be a whole number, {MIN_COLORINGS} or more, "
            f"got {shown(min_colorings)}"
        )
    columns = ["rank", "concept", "n", "consistency_emd", "high_variance"]
    ranked = {k: np.stack([r["p"] for r in v]) for k, v in by_concept.items() if len(v) >= min_colorings}
    if not ranked:
        return pd.DataFrame(columns=columns)
    scores = qc.consistency_scores(ranked)
    flags = qc.high_variance(scores, top_fraction)
    table = pd.DataFrame(
        {
            "concept": scores.index,
            "n": [len(ranked[k]) for k in scores.index],
            "consistency_emd": scores.to_numpy(),
            "high_variance": flags.to_numpy(),
        }
    )
    table = table.sort_values(["consistency_emd", "concept"], ascending=[False, True], ignore_index=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table


def open_review_queue(
    db: sqlite_utils.Database,
    actor: Actor,
    *,
    top_fraction: float = qc.HIGH_VARIANCE_FRACTION,
    min_colorings: int = MIN_COLORINGS,
    votes_needed: int = VOTES_PER_REVIEW,
    now: dt.datetime | None = None,
) -> int:
    """Put every ground-truth coloring of every high-variance concept to the blind vote.

    Idempotent: colorings that already have a review are left alone. Each new review
    stores the coloring's SCD plausibility against the concept's other colorings, which
    orders the queue (lowest first). `min_colorings` is kept (`review_min_colorings`) when
    a review opens, so that every tab counts against the number the queue was opened with
    (one that opened nothing, 100 where a concept is complete at 5, had every tab count
    "97 more colorings" for good: outside probe 132).

    Returns
    -------
    int
        The number of reviews opened now.
    """
    require_role(actor, *REVIEWER_ROLES)
    by_concept = _counted_by_concept(db)
    table = _ranking(by_concept, top_fraction, min_colorings)
    concepts = [by_concept[c] for c in (table.loc[table["high_variance"], "concept"] if len(table) else [])]
    if concepts:
        _check_votes_needed(votes_needed)
    # A concept whose colorings all have a review opens nothing: it is not scored again.
    reviewed = _reviewed(db, [r["id"] for rows in concepts for r in rows])
    concepts = [rows for rows in concepts if any(r["id"] not in reviewed for r in rows)]
    # Score every concept in batches (`annotation.qc.plausibility`; the same scores as
    # `plausibility_scores`), then write every review in one short transaction.
    ids = [[r["id"] for r in rows] for rows in concepts]
    try:
        scores = batch_scores(db, ids)
    except LookupError:  # a coloring without its sample: the concept-by-concept path says which
        scores = [plausibility_scores(db, rows) for rows in concepts]
    with transaction(db):
        if concepts:  # what the queue was opened with; a press that opened nothing changes no one's count
            write_setting(db, MIN_COLORINGS_SETTING, str(min_colorings))
        return _open_groups(
            db,
            actor,
            ids,
            reason=HIGH_VARIANCE_REASON,
            votes_needed=votes_needed,
            plausibility={k: v for group in scores for k, v in group.items()},
            now=now,
        )


def concepts_in_vote(
    db: sqlite_utils.Database, opened_at: dt.datetime | None = None, *, open_only: bool = False
) -> list[str]:
    """The concepts with a coloring under the blind vote or decided by it, sorted; with
    `opened_at` (the `now` given to `open_review_queue`), those whose colorings got their
    review then: what that opening of the queue put to the vote; with `open_only`, those
    with a review still open (their vote goes on)."""
    conditions = [("r.created = ?", iso(opened_at))] if opened_at is not None else []
    conditions += [("r.status = ?", "open")] if open_only else []
    where = f"where {' and '.join(c for c, _ in conditions)} " if conditions else ""
    params = [value for _, value in conditions]
    return [
        row["concept_key"]
        for row in db.query(
            "select distinct c.concept_key from reviews r join colorings c on c.id = r.coloring_id "
            f"{where}order by c.concept_key",
            params,
        )
    ]


def most_colorings(db: sqlite_utils.Database, k: int) -> int:
    """The most colorings a concept can be counted with: the designers it may have (`k` in
    the fixed mode, the adaptive mode's cap: `annotation.coloring.tasks.slot_quota`), or the
    most any concept has now where more came (imported), whichever is larger."""
    return max(slot_quota(db, k), most_counted(db))


def most_counted(db: sqlite_utils.Database) -> int:
    """The most colorings any concept is counted with now (0 where none has one)."""
    return max(counted_per_concept(db).values(), default=0)


def review_min_colorings(db: sqlite_utils.Database, default: int) -> int:
    """The colorings per concept the vote queue was last opened with (`open_review_queue`
    keeps it), else `default`: what the Expert and Admin tabs count against."""
    stored = read_setting(db, MIN_COLORINGS_SETTING)
    # One no concept can reach (kept by an earlier version whatever the press opened) is no count.
    if stored is None or int(stored) > most_colorings(db, default):
        return default
    return int(stored)


def plausibility_scores(db: sqlite_utils.Database, colorings: list[dict]) -> dict[int, float]:
    """Leave-one-out SCD plausibility of each coloring of one concept, in [0, 1].

    Parameters
    ----------
    colorings : list of dict
        ``colorings`` rows of one concept, at least two (else the result is empty).

    Returns
    -------
    dict
        Coloring id -> mean pixel score of its painted pixels against the hue ×
        saturation prior of the others (`evaluation.color.plausibility.plausibility_ranking`).

    Notes
    -----
    The pixels are those the extraction pipeline sees (`evaluation.color.extraction.image_pixels`:
    the painted area sampled to 100 × 100), read from each coloring's stored sample
    (`annotation.coloring.ground_truth.samples`) rather than decoded from its PNG; a 1024² coloring costs
    10⁴ pixels, not 10⁶ (choice: the SCD paper scores every pixel of small images).
    """
    if len(colorings) < 2:
        return {}
    pixels = ground_truth.samples(db, [row["id"] for row in colorings])
    ranking = plausibility_ranking(pixels)
    return dict(zip(ranking["coloring"].astype(int), ranking["score"].astype(float)))


def open_reviews(
    db: sqlite_utils.Database,
    actor: Actor,
    coloring_ids: list[int],
    *,
    reason: str,
    votes_needed: int = VOTES_PER_REVIEW,
    plausibility: dict[int, float] | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Open a blind-vote review for each coloring that has none yet; one audit row.

    Parameters
    ----------
    coloring_ids : list of int
        Main-task colorings.
    reason : str
        Why they are reviewed.
    votes_needed : int
        Votes per coloring; odd, so a majority always exists (paper: 3).
    plausibility : dict, optional
        Coloring id -> SCD score (queue order; missing ones go last).

    Returns
    -------
    int
        Reviews opened now.
    """
    require_role(actor, *REVIEWER_ROLES)
    _check_votes_needed(votes_needed)
    with transaction(db):
        return _open_groups(
            db,
            actor,
            [list(dict.fromkeys(coloring_ids))],
            reason=reason,
            votes_needed=votes_needed,
            plausibility=plausibility or {},
            now=now,
        )


def _check_votes_needed(votes_needed: int) -> None:
    if (
        isinstance(votes_needed, bool)
        or not isinstance(votes_needed, int)
        or votes_needed < 1
        or votes_needed % 2 == 0
    ):
        raise InvalidInput(
            f"`votes_needed` must be an odd whole number >= 1 (no ties), got {shown(votes_needed)}"
        )


def _open_groups(
    db: sqlite_utils.Database,
    actor: Actor,
    groups: list[list[int]],
    *,
    reason: str,
    votes_needed: int,
    plausibility: dict[int, float],
    now: dt.datetime | None,
) -> int:
    """`open_reviews` for each group of distinct coloring ids in turn (one audit row per
    group that opens any), checked before anything is written; inside the caller's
    transaction."""
    wanted = [c for group in groups for c in group]
    practice = dict(_in_chunks(db, "select id, practice from colorings where id in ({marks})", wanted))
    reviewed = _reviewed(db, wanted)
    news = [[c for c in group if c not in reviewed] for group in groups]
    for coloring_id in (c for new in news for c in new):
        if coloring_id not in practice:
            raise NotFound(f"unknown coloring id {coloring_id!r}")
        if practice[coloring_id]:
            raise InvalidInput(f"coloring {coloring_id} is a practice coloring")
    # One prepared statement per table: sqlite-utils' insert costs ~0.1 ms a row in Python,
    # 0.9 s for the 6,390 reviews and 1,278 audit rows of the whole queue at the full study's size.
    created = iso(now)
    insert_rows(
        db,
        "reviews",
        (
            {
                "coloring_id": c,
                "reason": reason,
                "votes_needed": votes_needed,
                "status": "open",
                "created": created,
                "plausibility": plausibility.get(c),
            }
            for new in news
            for c in new
        ),
    )
    # The rows `storage.audit.record` writes, one per group that opened any.
    insert_rows(
        db,
        "audit",
        (
            {
                "created": created,
                "actor": actor.pseudonym,
                "action": "open_reviews",
                "object_type": "colorings",
                "object_id": None,
                "why": reason,
                "details": json.dumps({"coloring_ids": new, "votes_needed": votes_needed}, sort_keys=True),
            }
            for new in news
            if new
        ),
    )
    return sum(len(new) for new in news)


def _reviewed(db: sqlite_utils.Database, coloring_ids: list[int]) -> set[int]:
    """Those of `coloring_ids` that have a review (open or decided)."""
    return {
        r[0]
        for r in _in_chunks(
            db, "select coloring_id from reviews where coloring_id in ({marks})", coloring_ids
        )
    }


def _in_chunks(db: sqlite_utils.Database, sql: str, ids: list[int], size: int = 5000) -> list[tuple]:
    """The rows of `sql` (with ``{marks}`` for the ids' placeholders) over `ids`, a chunk
    of at most `size` ids per statement (SQLite limits the placeholders of one)."""
    found = []
    for first in range(0, len(ids), size):
        chunk = ids[first : first + size]
        found += db.execute(sql.format(marks=", ".join("?" * len(chunk))), chunk).fetchall()
    return found


def _letters(i: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, ..."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = string.ascii_uppercase[r] + out
    return out
