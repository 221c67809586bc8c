"""Annotators, invite links, sessions and the role check every handler starts with.

An admin creates annotators in bulk for one role and hands each person their invite link
(``/?invite=TOKEN``). Opening the link signs the person in: it creates a session whose
token the browser keeps. Invite and session tokens are random (`secrets.token_urlsafe`)
and only their sha256 is stored. An invite stays usable until it expires or is revoked,
so a person can sign in again from another device with the same link (choice: the study
runs over days; the paper is silent).

A session records the invite that opened it. A new link for a person (`new_invite`) and
revoking the person (`revoke_annotator`) end every session opened with an earlier link,
so whoever found a lost link is signed out with it; revoking also gives the tasks the
person holds back to the pool. A person holds at most `MAX_LIVE_SESSIONS` live sessions:
opening one more ends their oldest. `require` tells the holder of an ended session why it
ended (`END_REASONS`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from dataclasses import dataclass

import sqlite_utils

from annotation import assignment
from annotation.errors import (
    Conflict,
    InvalidInput,
    InvalidToken,
    NotFound,
    PermissionDenied,
    StaleToken,
    blank,
    check_text,
    shown,
)
from storage import audit, insert_row, iso, select, transaction, update_rows, utcnow

ROLES = ("designer", "expert", "participant", "researcher", "admin")
INVITABLE_ROLES = ROLES[:-1]
_PSEUDONYM_PREFIX = {"designer": "D", "expert": "E", "participant": "P", "researcher": "R"}
INVITE_DAYS = 30
MIN_LINK_DAYS, MAX_LINK_DAYS = 1 / 24, 3650
LINK_DAYS_RANGE = "[1/24, 3650] days (one hour to ten years)"
"""How long an invite link (or an open study link) may stay valid: a shorter one would be
dead on arrival, after replacing a person's old link had already ended their sessions."""
SESSION_DAYS = 14
MAX_BULK = 500
MAX_TOKEN_LENGTH = 256
"""The longest session or invite token a request may carry (characters): longer text is no token."""
MAX_LIVE_SESSIONS = 5
"""Live sessions one annotator may hold at once (a phone, a laptop, a second browser...);
opening one more ends the oldest. The admin's sessions are not capped: each needs the
password and lasts a day."""

_ENDED = "your session is not valid any more"
_REOPEN = "; ask them if you should go on: only they can reopen it"
"""What a person whose account was closed can do (the admin's *Reopen account*, then a link)."""
END_REASONS = {
    "new_invite": f"{_ENDED}: it was opened with an invite link that has since been replaced; "
    "open the newest link the study admin gave you",
    "revoked": f"{_ENDED}: the study admin closed your account{_REOPEN}",
    "too_many": f"{_ENDED}: you signed in on more than {MAX_LIVE_SESSIONS} devices or browsers "
    "and this was the oldest session; open your invite link again",
    "logout": f"{_ENDED}: you signed out; open your invite link again",
    "resumed": f"{_ENDED}: the study link was opened again in another tab, browser or device; go on "
    "there, or open the study link again here",
    "password_changed": f"{_ENDED}: the admin password was changed; reload the page and sign in with the new one "
    "on the Start tab",
}
"""Why a session ended (the ``sessions.end_reason`` values), as `require` says it."""
UNKNOWN_SESSION = (
    f"{_ENDED}: this server has no record of it (one opened after the backup that a restore of "
    "the study brought back, say); open your invite link again, or, as the admin, sign in with "
    "the password on the Start tab"
)
"""What `require` says of a session token that no session has."""


@dataclass(frozen=True)
class Actor:
    """Who is calling: an annotator (``annotator_id`` set) or the admin (``None``)."""

    annotator_id: int | None
    pseudonym: str
    roles: frozenset[str]

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


@dataclass(frozen=True)
class Session:
    """A new sign-in: the raw `token` (give it to the browser, never store it)."""

    token: str
    annotator_id: int | None
    pseudonym: str
    roles: tuple[str, ...]
    expires: str


def hash_token(token: str) -> str:
    """The stored form of an invite or session token (sha256 hex)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def invite_url(base_url: str, token: str) -> str:
    """The link a person opens to sign in, e.g. ``http://host:7860/?invite=TOKEN``."""
    return f"{base_url.rstrip('/')}/?invite={token}"


def create_annotators(
    db: sqlite_utils.Database,
    n: int,
    role: str,
    *,
    design_background: bool | None = None,
    expires_days: float = INVITE_DAYS,
    created_by: str = "admin",
    now: dt.datetime | None = None,
) -> list[tuple[dict, str]]:
    """Create `n` annotators with one `role`, each with an invite token.

    Parameters
    ----------
    n : int
        How many, 1 to `MAX_BULK`.
    role : str
        One of `INVITABLE_ROLES`.
    design_background : bool, optional
        Whether these people have a design or visual-arts background (Appendix D reports
        26 of 36 participants did); ``None`` if unknown.
    expires_days : float
        Days the invite links stay valid, > 0.

    Returns
    -------
    list of (dict, str)
        Each annotator row and its raw invite token (shown once; only its hash is kept).
    """
    _check_bulk(n, role, expires_days)
    now = utcnow() if now is None else now
    created = []
    with transaction(db):
        for _ in range(n):
            annotator_id = insert_row(
                db,
                "annotators",
                {
                    "pseudonym": f"new-{secrets.token_hex(8)}",
                    "roles": json.dumps([role]),
                    "design_background": None if design_background is None else int(design_background),
                    "status": "active",
                    "created": iso(now),
                    "created_by": created_by,
                },
            )
            pseudonym = f"{_PSEUDONYM_PREFIX[role]}{annotator_id:04d}"
            update_rows(db, "annotators", {"id": annotator_id}, {"pseudonym": pseudonym})
            token = _insert_invite(db, annotator_id, role, expires_days, now)
            created.append((db["annotators"].get(annotator_id), token))
        audit.record(
            db,
            created_by,
            "create_annotators",
            "annotator_role",
            role,
            details={"n": n, "ids": [a["id"] for a, _ in created]},
            now=now,
        )
    return created


def new_invite(
    db: sqlite_utils.Database,
    annotator_id: int,
    *,
    expires_days: float = INVITE_DAYS,
    created_by: str = "admin",
    end_reason: str = "new_invite",
    now: dt.datetime | None = None,
) -> str:
    """Issue a fresh invite token for an existing annotator (e.g. a lost link); the
    annotator's earlier invites are revoked and every session they opened is ended (with
    `end_reason`, one of `END_REASONS`: what `require` tells that session), so a finder of
    the lost link can neither sign in with it nor stay signed in.

    Raises
    ------
    NotFound
        An unknown annotator.
    Conflict
        The annotator's account is closed.
    """
    if end_reason not in END_REASONS:
        raise InvalidInput(f"`end_reason` must be one of {sorted(END_REASONS)}, got {shown(end_reason)}")
    annotator = get_annotator(db, annotator_id)
    if annotator["status"] != "active":
        # Named as the admin typed it, with the way on (outside probe 123).
        raise Conflict(
            f"the account of {named(annotator)} is closed: reopen it first "
            "(Admin tab, Reopen account); no new link was made"
        )
    _check_bulk(1, json.loads(annotator["roles"])[0], expires_days)
    now = utcnow() if now is None else now
    with transaction(db):
        revoked = update_rows(
            db, "invites", {"annotator_id": annotator_id, "revoked": None}, {"revoked": iso(now)}
        )
        ended = _end_sessions(db, annotator_id, end_reason, now)
        token = _insert_invite(db, annotator_id, json.loads(annotator["roles"])[0], expires_days, now)
        audit.record(
            db,
            created_by,
            "new_invite",
            "annotator",
            annotator_id,
            details={"revoked_invites": revoked, "ended_sessions": ended},
            now=now,
        )
    return token


def _check_bulk(n: int, role: str, expires_days: float) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_BULK:
        raise InvalidInput(f"`n` must be a whole number from 1 to {MAX_BULK}, got {shown(n)}")
    if role not in INVITABLE_ROLES:
        raise InvalidInput(f"`role` must be one of {INVITABLE_ROLES}, got {shown(role)}")
    if not isinstance(expires_days, (int, float)) or not MIN_LINK_DAYS <= expires_days <= MAX_LINK_DAYS:
        raise InvalidInput(f"`expires_days` must be in {LINK_DAYS_RANGE}, got {shown(expires_days)}")


def _insert_invite(db, annotator_id: int, role: str, expires_days: float, now: dt.datetime) -> str:
    token = secrets.token_urlsafe(32)
    insert_row(
        db,
        "invites",
        {
            "token_hash": hash_token(token),
            "annotator_id": annotator_id,
            "role": role,
            "created": iso(now),
            "expires": iso(now + dt.timedelta(days=expires_days)),
            "uses": 0,
        },
    )
    return token


def login_with_invite(
    db: sqlite_utils.Database,
    token: str,
    *,
    session_days: float = SESSION_DAYS,
    now: dt.datetime | None = None,
) -> Session:
    """Sign in with an invite token and open a session.

    The annotator's oldest live sessions end (reason ``too_many``) so that, with this one,
    they hold at most `MAX_LIVE_SESSIONS`.

    Raises
    ------
    InvalidToken
        If the token is malformed or unknown (forged); `StaleToken` (a subclass) if it is
        revoked or expired, or its annotator was revoked. Nothing is written then.
    """
    now = utcnow() if now is None else now
    token_hash = _hash_checked(token, "invite")
    with transaction(db):
        rows = list(db["invites"].rows_where("token_hash = ?", [token_hash]))
        if not rows:
            raise InvalidToken(
                "this invite link is not valid (unknown or mistyped); ask the study admin for a new one"
            )
        invite = rows[0]
        # A closed account first: its links were revoked with it, and no new one can be made.
        _active_annotator(db, invite["annotator_id"])
        if invite["revoked"]:
            raise StaleToken(
                "this invite link was replaced (by a newer link, or when the account was closed); open the "
                "newest link you were sent, or ask the study admin for one"
            )
        if invite["expires"] <= iso(now):
            raise StaleToken(
                f"this invite link expired on {invite['expires'][:10]}; ask the study admin for a new one"
            )
        annotator = _active_annotator(db, invite["annotator_id"])
        update_rows(
            db,
            "invites",
            {"token_hash": token_hash},
            {
                "uses": invite["uses"] + 1,
                "last_used": iso(now),
                "first_used": invite["first_used"] or iso(now),
            },
        )
        _end_sessions(db, annotator["id"], "too_many", now, keep=MAX_LIVE_SESSIONS - 1)
        return _open_session(
            db,
            annotator["id"],
            annotator["pseudonym"],
            tuple(json.loads(annotator["roles"])),
            session_days,
            now,
            invite_hash=token_hash,
        )


def open_admin_session(
    db: sqlite_utils.Database, *, session_days: float = 1, now: dt.datetime | None = None
) -> Session:
    """Open an admin session; call only after checking the admin password."""
    now = utcnow() if now is None else now
    with transaction(db):
        return _open_session(db, None, "admin", ("admin",), session_days, now)


def _open_session(
    db,
    annotator_id: int | None,
    pseudonym: str,
    roles: tuple[str, ...],
    session_days: float,
    now: dt.datetime,
    *,
    invite_hash: str | None = None,
) -> Session:
    token = secrets.token_urlsafe(32)
    expires = iso(now + dt.timedelta(days=session_days))
    insert_row(
        db,
        "sessions",
        {
            "token_hash": hash_token(token),
            "annotator_id": annotator_id,
            "roles": json.dumps(list(roles)),
            "created": iso(now),
            "expires": expires,
            "last_seen": iso(now),
            "invite_hash": invite_hash,
        },
    )
    return Session(token, annotator_id, pseudonym, roles, expires)


def end_admin_sessions(db: sqlite_utils.Database, reason: str, now: dt.datetime) -> int:
    """End every live admin session, giving `reason` (an `END_REASONS` key); how many ended.
    Call inside the transaction that changes the admin password: a session opened with a
    leaked password must not outlive it."""
    return _end_sessions(db, None, reason, now)


def _end_sessions(db, annotator_id: int | None, reason: str, now: dt.datetime, *, keep: int = 0) -> int:
    """End `annotator_id`'s live sessions (None: the admin's) but the newest `keep`, giving
    `reason`; how many ended."""
    ended = select(
        db,
        # `is` matches a null too: the admin's sessions have no annotator.
        "select token_hash from sessions where annotator_id is ? and revoked is null and expires > ? "
        "order by created desc, rowid desc limit -1 offset ?",
        [annotator_id, iso(now), keep],
    )
    if not ended:
        return 0
    hashes = [row["token_hash"] for row in ended]
    return update_rows(db, "sessions", {"token_hash in": hashes}, {"revoked": iso(now), "end_reason": reason})


def require(
    db: sqlite_utils.Database, session_token: str | None, *roles: str, now: dt.datetime | None = None
) -> Actor:
    """Check the caller's session and role; the first line of every app handler.

    Parameters
    ----------
    session_token : str or None
        The raw session token the browser holds.
    *roles : str
        Roles allowed to act (any one suffices); none means any signed-in person. The
        admin role is not implied: list ``"admin"`` where the admin may act.

    Returns
    -------
    Actor

    Raises
    ------
    PermissionDenied
        If nobody is signed in or the person lacks every listed role.
    InvalidToken
        If the session is unknown, ended (the message says why: `END_REASONS`) or
        expired, or its annotator was revoked.
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"`roles` must be among {ROLES}, got {unknown}")
    if not session_token:
        raise PermissionDenied(
            "you are not signed in: open your invite link, or sign in as admin on the Start tab"
        )
    actor = _session_actor(db, _hash_checked(session_token, "session"), utcnow() if now is None else now)
    if roles and not actor.roles & set(roles):
        raise PermissionDenied(
            f"this action needs the role {' or '.join(roles)}; you are signed in as "
            f"{actor.pseudonym} with role {', '.join(sorted(actor.roles))}"
        )
    return actor


def _erased(db, annotator_id: int) -> bool:
    """Whether `annotator_id` is a crowd participant whose platform ids were erased at their
    request (`annotation.study.crowd.erase_platform_ids`): their account cannot be reopened."""
    return bool(
        db.execute(
            "select 1 from crowd_participants where annotator_id = ? and external_id like '(erased %)'",
            [annotator_id],
        ).fetchone()
    )


def _session_actor(db, token_hash: str, now: dt.datetime) -> Actor:
    rows = list(db["sessions"].rows_where("token_hash = ?", [token_hash]))
    if not rows:
        # The admin read "open your invite link again" after a restore (outside probe 200)
        raise InvalidToken(UNKNOWN_SESSION)
    session = rows[0]
    if session["revoked"]:
        if session["annotator_id"] is None:  # the admin has a password, not an invite link
            if session["end_reason"] == "password_changed":
                raise InvalidToken(END_REASONS["password_changed"])
            raise InvalidToken(
                f"{_ENDED}: reload the page and sign in again with the admin password on the Start tab"
            )
        if (
            session["end_reason"] == "revoked"
            and get_annotator(db, session["annotator_id"])["status"] == "active"
        ):
            # It said "only they can reopen it" of an account reopened since (outside probe 221).
            raise InvalidToken(
                f"{_ENDED}: the study admin closed your account, and has opened it again since: open the "
                "new invite link they give you"
            )
        if session["end_reason"] == "revoked" and _erased(db, session["annotator_id"]):
            # It said "only they can reopen it", which nobody can (outside probe 225).
            raise InvalidToken(
                f"{_ENDED}: your platform id was erased and your account closed, as you asked; this study "
                "has ended for you"
            )
        # Sessions ended before they recorded why (schema version 12) give no reason.
        raise InvalidToken(END_REASONS.get(session["end_reason"], f"{_ENDED}; open your invite link again"))
    if session["expires"] <= iso(now):
        # The Start tab still says who was signed in until a reload (outside probe 123).
        raise InvalidToken(
            "your session expired; open your invite link again (the admin: reload the page and sign in with "
            "the password)"
        )
    if session["annotator_id"] is None:
        return Actor(None, "admin", frozenset(json.loads(session["roles"])))
    annotator = _active_annotator(db, session["annotator_id"])
    return Actor(annotator["id"], annotator["pseudonym"], frozenset(json.loads(session["roles"])))


def logout(db: sqlite_utils.Database, session_token: str, *, now: dt.datetime | None = None) -> None:
    """Revoke a session (signing out); unknown tokens are ignored."""
    token_hash = _hash_checked(session_token, "session")
    with transaction(db):
        update_rows(
            db,
            "sessions",
            {"token_hash": token_hash, "revoked": None},
            {"revoked": iso(now), "end_reason": "logout"},
        )


def revoke_annotator(
    db: sqlite_utils.Database, annotator_id: int, actor: Actor, why: str, *, now: dt.datetime | None = None
) -> None:
    """Revoke an annotator with their invites and sessions; their data stays.

    The tasks they hold go back to the pool (`assignment.release_all`): held until they
    expired, a study's places stayed taken by someone who can never answer. The audit row's
    details count the invites revoked, the sessions ended and the tasks released.
    """
    check_text(why, "why")
    now = utcnow() if now is None else now
    with transaction(db):
        if (annotator := get_annotator(db, annotator_id))["status"] == "revoked":
            raise Conflict(f"the account of {named(annotator)} is closed already; nothing changed")
        update_rows(db, "annotators", {"id": annotator_id}, {"status": "revoked"})
        revoked = update_rows(
            db, "invites", {"annotator_id": annotator_id, "revoked": None}, {"revoked": iso(now)}
        )
        ended = _end_sessions(db, annotator_id, "revoked", now)
        released = assignment.release_all(db, annotator_id, now=now)
        from annotation.study import crowd  # imports this module

        crowd.close_account(db, annotator_id, now=now)
        audit.record(
            db,
            actor.pseudonym,
            "revoke_annotator",
            "annotator",
            annotator_id,
            why,
            details={"revoked_invites": revoked, "ended_sessions": ended, "released_tasks": released},
            now=now,
        )


def reopen_annotator(
    db: sqlite_utils.Database, annotator_id: int, actor: Actor, why: str, *, now: dt.datetime | None = None
) -> None:
    """Reopen a closed account (one closed by mistake, or someone back after a break), with an
    audit row: the person keeps their pseudonym, work and history, and signs in with a
    `new_invite` (their earlier links stay revoked).

    Raises
    ------
    InvalidInput
        If `why` is empty.
    NotFound
        An unknown annotator.
    Conflict
        The account is open, or it came through a crowd study link (such a participant comes
        back through the link, as a new place).
    """
    check_text(why, "why")
    if blank(why):
        raise InvalidInput("`why` must say why the account is reopened; got an empty text")
    now = utcnow() if now is None else now
    with transaction(db):
        if (annotator := get_annotator(db, annotator_id))["status"] != "revoked":
            raise Conflict(f"the account of {named(annotator)} is open; nothing changed")
        if db["crowd_participants"].count_where("annotator_id = ?", [annotator_id]):
            from annotation.study.crowd import ERASED_ID  # here: crowd imports this module

            if db["crowd_participants"].count_where(
                "annotator_id = ? and external_id = ?",
                [annotator_id, ERASED_ID.format(annotator_id=annotator_id)],
            ):
                raise Conflict(
                    f"{named(annotator)} asked to be erased: their platform id is gone, and the "
                    "same person joining through the link again is someone new; nothing changed"
                )
            raise Conflict(
                f"{named(annotator)} came through a crowd study link: they come back through "
                "the link, not a reopened account; nothing changed"
            )
        update_rows(db, "annotators", {"id": annotator_id}, {"status": "active"})
        audit.record(db, actor.pseudonym, "reopen_annotator", "annotator", annotator_id, why, now=now)


def annotator_id_of(db: sqlite_utils.Database, pseudonym: str) -> int | None:
    """The id of the annotator called `pseudonym` (``D0003``; case and blanks around it
    ignored), or None."""
    rows = list(db["annotators"].rows_where("pseudonym = ?", [str(pseudonym).strip().upper()], select="id"))
    return rows[0]["id"] if rows else None


def named(annotator: dict) -> str:
    """How a message names the person of the ``annotators`` row `annotator`: ``annotator 3
    (D0003)``, the id the Admin tab lists and the pseudonym the person knows."""
    return f"annotator {annotator['id']} ({annotator['pseudonym']})"


def get_annotator(db: sqlite_utils.Database, annotator_id: int) -> dict:
    """The ``annotators`` row of `annotator_id`; raises `NotFound`."""
    rows = list(db["annotators"].rows_where("id = ?", [annotator_id]))
    if not rows:
        raise NotFound(f"unknown annotator id {shown(annotator_id)}")
    return rows[0]


def list_annotators(db: sqlite_utils.Database, role: str | None = None) -> list[dict]:
    """Every annotator (optionally of one role) with their number of invites used
    (``sign_ins``), what they did and when they were last seen.

    What they did: ``colorings`` (main-task colorings not withdrawn, every round),
    ``practice`` (practice colorings not withdrawn), ``withdrawn`` and ``practice_withdrawn``
    (main-task and practice colorings withdrawn at their request: apart, as the Admin tab's
    coloring counts leave practice out), ``votes``, ``judgments``, ``runs`` (evaluation runs started or imported
    in the app) and ``studies`` (pairwise studies created). ``last_active`` (an ISO time or
    None) is the latest of their work, their own audited actions and their sessions' last
    request, so a researcher or a designer whose colorings were withdrawn still has one. One
    pass over each table, whatever the number of people.
    """
    rows = db.query(
        "select a.id, a.pseudonym, a.roles, a.design_background, a.status, a.created, "
        "a.practice_approved, a.practice_approved_by, coalesce(i.n, 0) as sign_ins, "
        "coalesce(c.n, 0) as colorings, coalesce(c.practice, 0) as practice, "
        "coalesce(c.withdrawn, 0) as withdrawn, coalesce(c.practice_withdrawn, 0) as practice_withdrawn, "
        "coalesce(v.n, 0) as votes, "
        "coalesce(j.n, 0) as judgments, coalesce(d.runs, 0) as runs, coalesce(d.studies, 0) as studies, "
        "nullif(max(coalesce(c.last, ''), coalesce(v.last, ''), coalesce(j.last, ''), "
        "coalesce(d.last, ''), coalesce(s.last, '')), '') as last_active "
        "from annotators a "
        "left join (select annotator_id, sum(uses) as n from invites group by annotator_id) i "
        "on i.annotator_id = a.id "
        "left join (select annotator_id, "
        "sum(practice = 0 and status != 'withdrawn') as n, sum(practice = 1 and status != 'withdrawn') as practice, "
        "sum(practice = 0 and status = 'withdrawn') as withdrawn, "
        "sum(practice = 1 and status = 'withdrawn') as practice_withdrawn, max(created) as last from colorings "
        "group by annotator_id) c on c.annotator_id = a.id "
        "left join (select expert_id, count(*) as n, max(created) as last from qc_votes "
        "group by expert_id) v on v.expert_id = a.id "
        "left join (select participant_id, count(*) as n, max(created) as last from judgments "
        "group by participant_id) j on j.participant_id = a.id "
        "left join (select actor, sum(action in ('start_evaluation', 'import_run')) as runs, "
        "sum(action = 'create_study') as studies, max(created) as last from audit "
        "group by actor) d on d.actor = a.pseudonym "
        "left join (select annotator_id, max(coalesce(last_seen, created)) as last from sessions "
        "group by annotator_id) s on s.annotator_id = a.id "
        "order by a.id"
    )
    return [r for r in rows if role is None or role in json.loads(r["roles"])]


def _active_annotator(db, annotator_id: int) -> dict:
    annotator = get_annotator(db, annotator_id)
    if annotator["status"] != "active":
        raise StaleToken(f"the account {annotator['pseudonym']} was closed by the study admin{_REOPEN}")
    return annotator


def _hash_checked(token: object, kind: str) -> str:
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
        raise InvalidToken(
            f"this {kind} token is malformed: expected the text from your "
            f"link, got {type(token).__name__} of length "
            f"{len(token) if isinstance(token, str) else '?'}"
        )
    return hash_token(token)
