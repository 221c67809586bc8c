"""Designer onboarding (Appendix B.3): consent, instructions, three practice colorings,
approval, then the main task.

The stage is derived from stored facts each time it is asked for, so it can never
disagree with the data: a consent row, the ``instructions_read`` time, the number of
practice colorings that stand (``submitted`` or ``accepted``) and ``practice_approved``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import sqlite_utils

from annotation.errors import Conflict, InvalidInput, check_text
from annotation.people.accounts import Actor, get_annotator, named
from evaluation.concepts import ASSETS
from storage import audit, insert_row, iso, transaction, update_rows
from storage.shown import shown

TEXTS = ASSETS / "texts"
CONSENT_FILE = TEXTS / "consent.md"
INSTRUCTIONS_FILE = TEXTS / "instructions.md"
PRACTICE_COUNT = 3
STAGES = ("consent", "instructions", "practice", "awaiting_approval", "main")
_STANDING = ("submitted", "accepted")
AUTO_APPROVER = "auto-approve-practice"
"""Who the approvals made under ``--auto-approve-practice`` are recorded as."""


def read_text(path: str | Path = CONSENT_FILE) -> tuple[str, str]:
    """The Markdown text of an assets file as people see it, and its sha256.

    HTML comments (``<!-- ... -->``) are notes for the study organisers: they are left
    out of the text and of the hash, which is the hash of what was shown.
    """
    text = re.sub(r"<!--.*?-->\s*", "", Path(path).read_text(encoding="utf-8"), flags=re.S)
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_consent(
    db: sqlite_utils.Database,
    annotator_id: int,
    form_sha256: str,
    agreed: bool,
    *,
    now: dt.datetime | None = None,
) -> int:
    """Record that an annotator agreed to (or declined) the consent text with `form_sha256`.

    Raises
    ------
    InvalidInput
        If `form_sha256` is not a sha256 hex digest.
    """
    if not isinstance(form_sha256, str) or len(form_sha256) != 64:
        raise InvalidInput(f"`form_sha256` must be a 64-character hex digest, got {shown(form_sha256)}")
    get_annotator(db, annotator_id)
    with transaction(db):
        return insert_row(
            db,
            "consents",
            {
                "annotator_id": annotator_id,
                "form_sha256": form_sha256,
                "agreed": int(bool(agreed)),
                "created": iso(now),
            },
        )


def mark_instructions_read(
    db: sqlite_utils.Database, annotator_id: int, *, now: dt.datetime | None = None
) -> None:
    """Record when the annotator first finished reading the instructions (a later call,
    a second press or another tab, keeps that first time: outside probe 105's call moved it
    after the designer's practice colorings)."""
    with transaction(db):
        if not get_annotator(db, annotator_id)["instructions_read"]:
            update_rows(db, "annotators", {"id": annotator_id}, {"instructions_read": iso(now)})


def practice_colorings(db: sqlite_utils.Database, annotator_id: int) -> list[dict]:
    """The annotator's practice colorings that stand (submitted or accepted), oldest first."""
    return list(
        db["colorings"].rows_where(
            "annotator_id = ? and practice = 1 and status in (?, ?)",
            [annotator_id, *_STANDING],
            order_by="id",
        )
    )


def practice_redo_reason(db: sqlite_utils.Database, annotator_id: int) -> str | None:
    """Why the admin asked the designer to do the practice again (the reason typed, maybe "";
    user text), while that is the latest decision on their practice; None otherwise. The
    designer was sent back to the practice told nothing (outside probe 117)."""
    row = next(
        db.query(
            "select action, why from audit where object_type = 'annotator' and object_id = ? and action in "
            "('approve_practice', 'redo_practice') order by id desc limit 1",
            [str(annotator_id)],
        ),
        None,
    )
    return row["why"] or "" if row is not None and row["action"] == "redo_practice" else None


def onboarding_stage(
    db: sqlite_utils.Database,
    annotator_id: int,
    *,
    auto_approve: bool = False,
    practice_count: int = PRACTICE_COUNT,
) -> str:
    """Where a designer stands: one of `STAGES`.

    Parameters
    ----------
    auto_approve : bool
        If True, the main task opens as soon as `practice_count` practice colorings stand,
        without an admin's approval; the approval is then recorded (by `AUTO_APPROVER`,
        with an audit row), so that it outlives the setting: a later start without it
        does not send the designer back, and the Admin tab does not list them as waiting.
    """
    annotator = get_annotator(db, annotator_id)
    consents = list(
        db["consents"].rows_where("annotator_id = ?", [annotator_id], order_by="id desc", limit=1)
    )
    if not consents or not consents[0]["agreed"]:
        return "consent"
    if not annotator["instructions_read"]:
        return "instructions"
    if annotator["practice_approved"]:
        return "main"
    if len(practice_colorings(db, annotator_id)) < practice_count:
        return "practice"
    if not auto_approve:
        return "awaiting_approval"
    with transaction(db):
        if not get_annotator(db, annotator_id)["practice_approved"]:  # once, if two requests race
            update_rows(
                db,
                "annotators",
                {"id": annotator_id},
                {"practice_approved": iso(), "practice_approved_by": AUTO_APPROVER},
            )
            audit.record(
                db, AUTO_APPROVER, "approve_practice", "annotator", annotator_id, "approved automatically"
            )
    return "main"


def review_practice(
    db: sqlite_utils.Database,
    annotator_id: int,
    actor: Actor,
    approve: bool,
    why: str = "",
    *,
    practice_count: int = PRACTICE_COUNT,
    now: dt.datetime | None = None,
) -> int:
    """An admin approves a designer's practice colorings, or asks for them again; how many
    main-task places a designer sent back held and gave back (0 for an approval).

    Declining sets the standing practice colorings to ``recolor_requested`` (nothing is
    deleted), so the designer is back at the ``practice`` stage. A designer approved already
    is sent back only before their first main-task coloring, and the main-task places they
    hold are released: they could not reach them, and the coverage counted them reserved
    (outside probe 145). After it, their work stands: the admin closes the account or
    withdraws the colorings instead.

    Parameters
    ----------
    practice_count : int
        Standing practice colorings a designer needs before approval (Appendix B.3: 3).

    Raises
    ------
    NotFound
        If there is no such annotator.
    Conflict
        If the account is closed, the annotator is not a designer, or has fewer than
        `practice_count` standing practice colorings to approve (none to redo), or (an
        approval) is approved already, or (a redo) has main-task colorings; nothing is written
        then.
    """
    check_text(why, "why")
    released = 0
    with transaction(db):
        annotator = get_annotator(db, annotator_id)
        standing = practice_colorings(db, annotator_id)
        _check_reviewable(annotator, len(standing), practice_count if approve else 1)
        if approve and annotator["practice_approved"]:  # it replaced who approved, and when (probe 194)
            by = annotator["practice_approved_by"]
            raise Conflict(
                f"{named(annotator)} was approved already, on "
                f"{annotator['practice_approved'][:16].replace('T', ' ')} UTC "
                f"{'automatically' if by == AUTO_APPROVER else f'by {by}'}; nothing changed"
            )
        if not approve and annotator["practice_approved"]:
            main = db["colorings"].count_where("annotator_id = ? and practice = 0", [annotator_id])
            if main:
                raise Conflict(
                    f"{named(annotator)} was approved on "
                    f"{annotator['practice_approved'][:16].replace('T', ' ')} UTC and has made "
                    f"{main:,} main-task coloring{'' if main == 1 else 's'} since: their work stands, so "
                    "their practice is not sent back; close their account to stop them, or withdraw "
                    "their colorings to take their work out of the study"
                )
            released = update_rows(
                db,
                "tasks",
                {"annotator_id": annotator_id, "kind": "coloring", "practice": 0, "status": "reserved"},
                {"status": "released", "finished": iso(now)},
            )
        if approve:
            update_rows(
                db,
                "annotators",
                {"id": annotator_id},
                {"practice_approved": iso(now), "practice_approved_by": actor.pseudonym},
            )
        else:
            update_rows(
                db,
                "annotators",
                {"id": annotator_id},
                {"practice_approved": None, "practice_approved_by": None},
            )
            for row in standing:
                update_rows(db, "colorings", {"id": row["id"]}, {"status": "recolor_requested"})
        audit.record(
            db,
            actor.pseudonym,
            "approve_practice" if approve else "redo_practice",
            "annotator",
            annotator["id"],
            why,
            details={"released_tasks": released} if released else None,
            now=now,
        )
    return released


def _check_reviewable(annotator: dict, standing: int, needed: int) -> None:
    who = named(annotator)
    if annotator["status"] != "active":
        raise Conflict(f"{who} has a closed account; their practice is not reviewed")
    roles = json.loads(annotator["roles"])
    if "designer" not in roles:
        raise Conflict(
            f"{who} is not a designer (roles: {', '.join(roles)}); only designers do practice colorings"
        )
    if standing == 0:
        raise Conflict(f"{who} has no practice colorings submitted")
    if standing < needed:
        raise Conflict(
            f"{who} has submitted {standing} of the {needed} practice colorings needed before approval"
        )


def awaiting_approval(db: sqlite_utils.Database, *, practice_count: int = PRACTICE_COUNT) -> list[dict]:
    """Designers whose practice colorings wait for an admin, with those colorings."""
    pending = []
    for annotator in db["annotators"].rows_where(
        "status = 'active' and practice_approved is null and roles like '%designer%'", order_by="id"
    ):
        rows = practice_colorings(db, annotator["id"])
        if len(rows) >= practice_count:
            pending.append({**annotator, "colorings": rows})
    return pending
