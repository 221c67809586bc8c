"""Open study links for crowd platforms (Prolific, MTurk, CloudResearch, SONA).

A researcher makes an open link for a frozen study (`create_link`): a quota of places, a
time limit per person, an end date, the completion and screen-out codes, the query
parameter that carries the platform's participant id (``PROLIFIC_PID`` by default) and
the URL people are sent back to (``{code}`` is replaced by their code). Only the sha256 of
the link's token is stored.

Whoever opens the link (`join`) with an external id gets a fresh participant account and
a session, never another role; the same id on the same link resumes its account. Before
the first trial the person reads the link's consent text (`consent_text`, the researcher's
or `DEFAULT_CONSENT`) and agrees or not (`consent`): agreeing stores the time and lets them
judge; not agreeing ends their part as ``returned``. `check_active` refuses a vote from
anyone who has not agreed. Places,
time, end date and the closed flag are checked on the server, in the one write
transaction that creates the account:

- a place is taken by a person who is ``active`` or ``completed``; a person who times
  out (`expire_overdue`), returns (`mark_returned`) or is screened out frees it, and
  their reserved trials go back to the pool (their votes stay, tagged by the payment
  table's status); one who returned or timed out and whom the organisers let start
  again (`let_start_again`) takes a place again on their next visit, as a newcomer would;
- new people per client address are limited to the link's ``joins_per_address`` per
  hour (`JOIN_WINDOW_S`);
- after each vote `settle` screens a person out once they have failed more than
  ``max_failed_checks`` attention checks, or marks them completed when every trial
  asked of them is judged.

`payment_rows` is the approval table (one row per external id), `payment_csv` its CSV,
`approval_ids` and `bonus_csv` the two files Prolific's bulk approval and bulk bonus take,
`live_counts` the figures the Admin tab refreshes.

The external ids are personal data (docs/security.md): they are kept here only, shown to
researchers and admins in the payment table, and never in the votes export.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import sqlite_utils

from annotation import assignment
from annotation.errors import (
    Conflict,
    InvalidInput,
    InvalidToken,
    NotFound,
    QuotaExceeded,
    blank,
    check_text,
    shown,
)
from annotation.people.accounts import (
    Actor,
    Session,
    annotator_id_of,
    create_annotators,
    get_annotator,
    hash_token,
    login_with_invite,
    new_invite,
    revoke_annotator,
)
from annotation.study.design import GROUND_TRUTH, closed_studies, get_study
from annotation.study.judging import progress
from storage import audit, insert_row, iso, parse_iso, shown_time, transaction, update_rows, utcnow
from storage.spreadsheet import csv_text

STATUSES = (
    "active",
    "completed",
    "screened_out",
    "timed_out",
    "returned",
    "account_closed",
    "may_restart",
    "study_closed",
)
FINISHED = ("completed", "screened_out")
HOLDS_PLACE = ("active", "completed")
DEFAULT_ID_PARAM = "PROLIFIC_PID"
STUDY_PARAM, SESSION_PARAM = "STUDY_ID", "SESSION_ID"
MTURK_ID_PARAM = "workerId"
PLATFORM_PARAMS = {MTURK_ID_PARAM: ("hitId", "assignmentId")}
"""The study and session id parameters by a link's id parameter, where they are not
``STUDY_ID``/``SESSION_ID``: MTurk appends ``hitId`` and ``assignmentId`` (with ``workerId``)
to an external HIT's URL, and approves and pays by the assignment."""
NOT_ID_PARAMS = (
    "study",
    "invite",
    STUDY_PARAM,
    SESSION_PARAM,
    *(p for ps in PLATFORM_PARAMS.values() for p in ps),
)
"""Parameters no link may take as its person's id: the app's own (``study``, ``invite``) and
those a platform gives for the study or the attempt ("invite" and Prolific's STUDY_ID, the
same for everyone, were taken: outside probe 162)."""
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
"""MTurk's ``assignmentId`` while a worker previews a HIT they have not accepted."""
PROLIFIC_RETURN_URL = "https://app.prolific.com/submissions/complete?cc={code}"
DEFAULT_MINUTES = 30.0
DEFAULT_JOINS_PER_ADDRESS = 10
JOIN_WINDOW_S = 3600.0
MAX_QUOTA = 10_000
MAX_EXTERNAL_ID = 64
MAX_CONSENT_CHARS = 5000
DEFAULT_CONSENT = "\n\n".join(
    # One line per paragraph: a text box shows the line breaks it is given (a phone broke
    # the sentences where the source did: outside probe 119).
    (
        (
            "You are invited to take part in a research study on how people associate colors with "
            "concepts. In each trial you compare two color charts with a chart of people's colors and"
            " say which of the two matches it better. It takes at most the time the study page on the"
            " platform states."
        ),
        (
            "Taking part is voluntary. You may stop at any time without giving a reason: close this "
            "page and return the study on the platform."
        ),
        (
            "What is kept: your answers, how long each took, and whether you have a design or art "
            "background, under the pseudonym shown here; and your platform ids (participant, study, "
            "session), only to pay you or mark you as returned, kept apart from your answers. Your "
            "network address is kept for an hour only, to limit how many people join from one place. "
            "The answers are analysed and published under pseudonyms only; your platform ids are "
            "never published. If you do not agree, nothing but that you declined is kept, with your "
            "platform ids."
        ),
        "Questions about the study go to the researcher named on the study page on the platform.",
        (
            'By choosing "I agree" you confirm that you are 18 or older, have read this text and '
            "agree to take part."
        ),
    )
)
_ID_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")  # no formula start in a CSV
_CODE_CHARS = re.compile(r"[A-Za-z0-9_\-]{1,40}")
_PARAM_CHARS = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
_URL = re.compile(r"https?://[A-Za-z0-9][A-Za-z0-9\-._~:/?#@$&+,;=%{}]*")
"""A return URL: letters, digits and the marks a platform's address uses; any other
character percent-encoded; its host (or user) starts with a letter or digit (``https:///`` was
taken: probe 208). Parentheses, brackets and ``!`` closed the Markdown link the
participant's page builds and opened an image of another host after it (outside probe 206)."""
PAYMENT_COLUMNS = (
    "participant_id",
    "pseudonym",
    "status",
    "study_id",
    "session_id",
    "started",
    "finished",
    "minutes",
    "trials",
    "checks_passed",
    "checks_failed",
    "code",
)


class HitPreview(InvalidInput):
    """An MTurk HIT opened in its preview, before the worker accepted it: nothing is stored."""


class LinkClosed(Conflict):
    """The open link takes nobody now: closed, past its end date or full."""


class TooManyJoins(QuotaExceeded):
    """Too many new people joined from one address within `JOIN_WINDOW_S`."""


@dataclass(frozen=True)
class CrowdState:
    """Where a crowd participant stands.

    Attributes
    ----------
    status : str
        One of `STATUSES`.
    code : str
        The completion code when completed, the screen-out code when screened out, else "".
    return_url : str
        Where to send the person with their code ("" until they finished).
    deadline : str
        When their time runs out (`storage.iso` text, UTC).
    external_id : str
    consented : str
        When they agreed to the consent text (`storage.iso` text, UTC); "" until then.
    platform_url : str
        The return URL without a code, for someone who leaves without one (did not agree,
        `consent`; timed out; closed); "" on MTurk, whose return URL, its external submit,
        would submit the assignment with no code: a worker returns the HIT with MTurk's own
        *Return* button (outside probe 171).
    """

    status: str
    code: str
    return_url: str
    deadline: str
    external_id: str
    consented: str = ""
    platform_url: str = ""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class Joined:
    """A `join`: the new `session`, whether it `resumed` an account, and its `state`."""

    session: Session
    resumed: bool
    state: CrowdState


def create_link(
    db: sqlite_utils.Database,
    study_id: int,
    actor: Actor,
    *,
    quota: int,
    completion_code: str,
    screenout_code: str,
    minutes: float = DEFAULT_MINUTES,
    ends: dt.datetime | None = None,
    id_param: str = DEFAULT_ID_PARAM,
    return_url: str = PROLIFIC_RETURN_URL,
    max_failed_checks: int = 0,
    joins_per_address: int = DEFAULT_JOINS_PER_ADDRESS,
    label: str = "",
    consent_text: str = "",
    now: dt.datetime | None = None,
) -> tuple[dict, str]:
    """Make an open link for the frozen study `study_id`.

    Parameters
    ----------
    quota : int
        Places, 1 to `MAX_QUOTA`.
    completion_code, screenout_code : str
        Codes shown to people who finish or are screened out: 1-40 ASCII letters (a-z,
        A-Z), digits, ``_`` or ``-``, different from each other.
    minutes : float
        Time per person from joining, in (0, 1440].
    ends : datetime, optional
        When the link stops taking people (UTC); default 30 days from `now`.
    id_param : str
        The query parameter with the platform's participant id (``PROLIFIC_PID``,
        ``workerId``, ``id``...).
    return_url : str
        An ``http(s)://`` URL holding ``{code}``, replaced by the person's code, and
        ``{assignmentId}`` by their platform session id (`return_address`).
    max_failed_checks : int
        Attention checks a person may fail before being screened out, >= 0.
    joins_per_address : int
        New people per client address per hour, 1 to `MAX_QUOTA`.
    consent_text : str
        What people read and agree to before their first trial, plain text (shown as
        typed, never as HTML or Markdown), at most `MAX_CONSENT_CHARS`; "" or blanks:
        `DEFAULT_CONSENT`.

    Returns
    -------
    (dict, str)
        The ``crowd_links`` row and the raw token (shown once; only its hash is kept).

    Raises
    ------
    InvalidInput
        A bad setting, named; or the study is still a draft. Nothing is written then.
    """
    now = utcnow() if now is None else now
    ends = now + dt.timedelta(days=30) if ends is None else ends
    _check_whole("quota", quota, 1, MAX_QUOTA)
    _check_whole("max_failed_checks", max_failed_checks, 0, 1000)
    _check_whole("joins_per_address", joins_per_address, 1, MAX_QUOTA)
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes <= 1440:
        raise InvalidInput(f"`minutes` must be a number in (0, 1440], got {shown(minutes)}")
    for name, code in (("completion_code", completion_code), ("screenout_code", screenout_code)):
        if not isinstance(code, str) or not _CODE_CHARS.fullmatch(code):
            raise InvalidInput(
                f"`{name}` must be 1-40 letters, digits, _ or - "
                f"(ASCII letters a-z, A-Z and digits 0-9 only), got {shown(code)}"
            )
    if completion_code == screenout_code:
        raise InvalidInput("`screenout_code` must differ from `completion_code`")
    if id_param in NOT_ID_PARAMS:
        raise InvalidInput(
            f"`id_param` must name the parameter of the person's id, not one the app or the platform "
            f"gives for something else ({', '.join(NOT_ID_PARAMS)}), got {shown(id_param)}"
        )
    if not isinstance(id_param, str) or not _PARAM_CHARS.fullmatch(id_param):
        raise InvalidInput(
            f"`id_param` must be a query parameter name such as PROLIFIC_PID, got {shown(id_param)}"
        )
    check_text(return_url, "return_url", 500)
    if not _URL.fullmatch(return_url or ""):
        raise InvalidInput(
            "`return_url` must be an http:// or https:// URL of letters, digits and - . _ ~ : / ? # @ "
            "$ & + , ; = % { } (any other character percent-encoded, ( as %28), its host first, got "
            f"{shown(return_url)}"
        )
    if "{code}" not in return_url:  # everyone was sent back with no code (outside probe 156)
        raise InvalidInput(
            "`return_url` must hold {code} where each person's code goes (their completion or "
            f"screen-out code), as {PROLIFIC_RETURN_URL}; got {shown(return_url)}"
        )
    if not isinstance(ends, dt.datetime) or ends <= now:
        raise InvalidInput(f"`ends` must be a time after now, got {shown(ends)}")
    check_text(label, "label", 200)
    if not isinstance(consent_text, str):
        raise InvalidInput(f"`consent_text` must be text, got {shown(consent_text)}")
    check_text(consent_text, "consent_text", MAX_CONSENT_CHARS)
    study = get_study(db, study_id)
    if not study["frozen"]:
        raise InvalidInput(f"study {study['name']!r} is a draft; open (freeze) it before making a link")
    # A link everyone would be turned away from was made without a word (outside probe 222).
    if closed := closed_studies(db).get(str(study_id)):
        raise InvalidInput(
            f"study {study['name']!r} was closed on {shown_time(closed['closed'])}, so a link to it would "
            "turn everyone away; set up a new study for more votes"
        )
    if votes_left(db, study_id, now=now).needed <= 0:
        raise InvalidInput(
            f"study {study['name']!r} has all the votes its model pairs need ({study['votes_per_pair']} "
            "each), so a link to it would turn everyone away"
        )
    token = secrets.token_urlsafe(32)
    with transaction(db):
        link_id = insert_row(
            db,
            "crowd_links",
            {
                "token_hash": hash_token(token),
                "study_id": study_id,
                "label": label,
                "quota": quota,
                "minutes": float(minutes),
                "ends": iso(ends),
                "closed": None,
                "completion_code": completion_code,
                "screenout_code": screenout_code,
                "id_param": id_param,
                "return_url": return_url,
                "max_failed_checks": max_failed_checks,
                "joins_per_address": joins_per_address,
                "created": iso(now),
                "created_by": actor.pseudonym,
                "consent_text": consent_text.strip() or None,
            },
        )
        audit.record(db, actor.pseudonym, "create_crowd_link", "crowd_link", link_id, now=now)
    return db["crowd_links"].get(link_id), token


def link_url(base_url: str, token: str, id_param: str = DEFAULT_ID_PARAM) -> str:
    """The URL to paste into the platform, with Prolific's placeholders for its ids.

    For Prolific: ``BASE/?study=TOKEN&PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID=...``; for
    MTurk (`MTURK_ID_PARAM`) ``BASE/?study=TOKEN`` alone: MTurk appends ``workerId``,
    ``assignmentId`` and ``hitId`` to an external HIT's URL itself (a placeholder left in
    would give ``workerId`` twice, which is refused); for another `id_param` only that
    parameter, with the placeholder ``{{%NAME%}}`` to be replaced by the platform's own
    syntax (docs/crowd.md).
    """
    if id_param == MTURK_ID_PARAM:
        return f"{base_url.rstrip('/')}/?study={token}"
    url = f"{base_url.rstrip('/')}/?study={token}&{id_param}={{{{%{id_param}%}}}}"
    if id_param == DEFAULT_ID_PARAM:
        url += f"&{STUDY_PARAM}={{{{%{STUDY_PARAM}%}}}}&{SESSION_PARAM}={{{{%{SESSION_PARAM}%}}}}"
    return url


def close_link(
    db: sqlite_utils.Database, link_id: int, actor: Actor, *, now: dt.datetime | None = None
) -> dict:
    """Close a link: nobody new joins; people already in may finish. Returns the row.

    Raises
    ------
    NotFound
        An unknown link.
    Conflict
        It is closed already.
    """
    with transaction(db):
        link = get_link(db, link_id)
        if link["closed"]:
            raise Conflict(f"open link {link_id} was closed on {shown_time(link['closed'])} already")
        update_rows(db, "crowd_links", {"id": link["id"]}, {"closed": iso(now)})
        audit.record(db, actor.pseudonym, "close_crowd_link", "crowd_link", link["id"], now=now)
    return get_link(db, link_id)


def get_link(db: sqlite_utils.Database, link_id: int) -> dict:
    """The ``crowd_links`` row of `link_id`; raises `NotFound`."""
    _check_whole("link_id", link_id, 1, 10**18)
    rows = list(db["crowd_links"].rows_where("id = ?", [int(link_id)]))
    if not rows:
        raise NotFound(f"unknown open link id {shown(link_id)}")
    return rows[0]


def list_links(db: sqlite_utils.Database) -> list[dict]:
    """Every link (newest first) with its study name and places taken."""
    return [
        dict(row)
        for row in db.query(
            "select l.id, l.label, s.name as study, l.quota, l.minutes, l.ends, l.closed, l.id_param, "
            "(select count(*) from crowd_participants c where c.link_id = l.id and c.status in "
            "('active', 'completed')) as taken from crowd_links l join studies s on s.id = l.study_id "
            "order by l.id desc"
        )
    ]


def other_open_links(
    db: sqlite_utils.Database, link: Mapping, *, now: dt.datetime | None = None
) -> list[tuple[int, int]]:
    """``(link id, places not taken)`` of the other links of `link`'s study that take people
    now (not closed, not ended, a place free), oldest first: the study's remaining votes are
    shared by all of them (outside probe 229: each link's note said "ask the platform for
    4" of a study that takes 4 in all)."""
    return [
        (row[0], row[1])
        for row in db.execute(
            "select l.id, l.quota - (select count(*) from crowd_participants c where c.link_id = l.id "
            "and c.status in ('active', 'completed')) as free from crowd_links l where l.study_id = ? "
            "and l.id != ? and l.closed is null and l.ends > ? and free > 0 order by l.id",
            [link["study_id"], link["id"], iso(utcnow() if now is None else now)],
        )
    ]


def link_state(link: Mapping, *, now: dt.datetime | None = None) -> str:
    """Whether a link (a ``crowd_links`` or `list_links` row) takes new people, in words:
    "open until ...", "closed on ..." or "ended on ..." (`storage.shown_time`)."""
    if link["closed"]:
        return f"closed on {shown_time(link['closed'])}"
    if link["ends"] <= iso(utcnow() if now is None else now):
        return f"ended on {shown_time(link['ends'])}"
    return f"open until {shown_time(link['ends'])}"


def forget_addresses(db: sqlite_utils.Database, now: dt.datetime | None = None) -> int:
    """Erase the client address of every crowd participant who joined more than
    `JOIN_WINDOW_S` ago; how many. The address serves the per-address join limit alone, so it
    is kept for that hour (each join, and the app's start, forget the older ones)."""
    now = utcnow() if now is None else now
    where = {"address !=": None, "started <=": iso(now - dt.timedelta(seconds=JOIN_WINDOW_S))}
    with transaction(db):  # a savepoint inside `join`'s
        return update_rows(db, "crowd_participants", where, {"address": None})


def join(
    db: sqlite_utils.Database,
    token: str,
    params: Mapping[str, str],
    *,
    address: str,
    session_days: float = 1.0,
    now: dt.datetime | None = None,
) -> Joined:
    """Take a person in through an open link, or resume their account.

    Parameters
    ----------
    token : str
        The link's ``study`` parameter.
    params : mapping of str to str or list of str
        The page's query parameters: the link's ``id_param`` (required), ``STUDY_ID`` and
        ``SESSION_ID`` (kept when present; ``hitId`` and ``assignmentId`` for a ``workerId``
        link, `platform_params`); a parameter given more than once is a list of
        its values, and refused.
    address : str
        The client's address, for the per-address limit.

    Raises
    ------
    InvalidToken
        A malformed or unknown link token.
    InvalidInput
        The id parameter is missing, or it, ``STUDY_ID`` or ``SESSION_ID`` is not 1-64
        ASCII letters (a-z, A-Z), digits, ``.``, ``_`` or ``-``, or is given twice.
    LinkClosed
        The link is closed, past its end date, or all its places are taken.
    Conflict
        This id timed out or returned the study before, or took part with another
        ``STUDY_ID`` or ``SESSION_ID`` than the one given (one recorded is asked for again;
        one given where none was recorded is recorded).
    TooManyJoins
        The address has reached the link's ``joins_per_address`` this hour.

    Nothing is written when it raises.
    """
    now = utcnow() if now is None else now
    if not isinstance(token, str) or not 1 <= len(token) <= 256:
        raise InvalidToken("this study link is malformed; open the link from the study page again")
    with transaction(db):
        forget_addresses(db, now)
        rows = list(db["crowd_links"].rows_where("token_hash = ?", [hash_token(token)]))
        if not rows:
            raise InvalidToken(
                "this study link is not valid (unknown or mistyped); open it from the study page"
            )
        link = rows[0]
        study_param, session_param = platform_params(link["id_param"])
        if link["id_param"] == MTURK_ID_PARAM and one_param(params, session_param) == MTURK_PREVIEW:
            raise HitPreview("accept the HIT on MTurk to start the study; the trials follow here")
        external_id = _external_id(params, link["id_param"])
        platform_ids = {
            "platform_study_id": _optional_id(params, study_param),
            "platform_session_id": _optional_id(params, session_param),
        }
        # One id, one participant of the study, through whichever of its links (a second
        # link of a study, a top-up, took the same person in again for the same pairs).
        previous = next(
            db.query(
                "select c.* from crowd_participants c join crowd_links l on l.id = c.link_id "
                "where l.study_id = ? and l.id_param = ? and c.external_id = ? "
                "order by c.link_id = ? desc, c.started limit 1",
                [link["study_id"], link["id_param"], external_id, link["id"]],
            ),
            None,
        )
        if previous is not None:
            held = link if previous["link_id"] == link["id"] else get_link(db, previous["link_id"])
            return _resume(db, held, previous, platform_ids, session_days, now)
        _check_open(db, link, now)
        recent = db.execute(
            "select count(*) from crowd_participants where address = ? and link_id = ? and started > ?",
            [address, link["id"], iso(now - dt.timedelta(seconds=JOIN_WINDOW_S))],
        ).fetchone()[0]
        if recent >= link["joins_per_address"]:
            raise TooManyJoins(
                f"{recent} {'person' if recent == 1 else 'people'} joined through this study link from your "
                "address within the hour, its limit; try again in an hour, or return the study on the platform"
            )
        ((annotator, invite),) = create_annotators(
            db, 1, "participant", expires_days=1, created_by=f"open link {link['id']}", now=now
        )
        session = login_with_invite(db, invite, session_days=session_days, now=now)
        insert_row(
            db,
            "crowd_participants",
            {
                "annotator_id": annotator["id"],
                "link_id": link["id"],
                "external_id": external_id,
                **platform_ids,
                "address": address,
                "started": iso(now),
                "finished": None,
                "status": "active",
            },
        )
        audit.record(
            db,
            "system",
            "crowd_join",
            "crowd_link",
            link["id"],
            details={"annotator": annotator["id"]},
            now=now,
        )
        return Joined(session, False, _state(link, db["crowd_participants"].get(annotator["id"])))


def _resume(
    db, link: dict, person: dict, platform_ids: dict, session_days: float, now: dt.datetime
) -> Joined:
    # The platform's study and session ids are what ties an id to the person who holds it:
    # a participant id alone (a Prolific PID is no secret: it is in screenshots and
    # payment mails) resumed anyone's place, ended their session, or showed their
    # completion code (outside probe 108). One recorded is asked for again.
    if person["status"] == "may_restart":
        return _restart(db, link, person, platform_ids, session_days, now)
    for column, param in zip(("platform_study_id", "platform_session_id"), platform_params(link["id_param"])):
        if person[column] is not None and platform_ids[column] != person[column]:
            if person["status"] in FINISHED:  # a second HIT or place of a study they finished
                raise Conflict(
                    f"this {link['id_param']} has finished this study already, with another {param}: each "
                    "person takes part once, so return this one on the platform"
                )
            raise Conflict(
                f"this {link['id_param']} took part in this study with another {param}: open the study from "
                "your own page on the platform; if you did not start it before, or returned it and took "
                "it again, write to the organisers (they can let you start again)"
            )
    if missing := {k: v for k, v in platform_ids.items() if v is not None and person[k] is None}:
        update_rows(db, "crowd_participants", {"annotator_id": person["annotator_id"]}, missing)
        person = {**person, **missing}
    person = _timed_out_if_overdue(db, link, person, now)
    if person["status"] == "timed_out":
        raise Conflict(
            "your time for this study ran out; it cannot be taken again (return it on the platform, or "
            "write to the organisers: they can let you start again)"
        )
    if person["status"] == "returned":
        raise Conflict(
            "you returned this study; it cannot be taken again (if that was a mistake, write to the "
            "organisers: they can let you start again)"
        )
    if person["status"] == "account_closed":
        raise Conflict(
            "the organisers closed your account for this study; it cannot be taken again (return it on "
            "the platform)"
        )
    return _signed_in_again(db, link, person, session_days, now)


def _restart(
    db, link: dict, person: dict, platform_ids: dict, session_days: float, now: dt.datetime
) -> Joined:
    """Take back a person the organisers let start again (`let_start_again`), as a newcomer
    is taken: the link open and a place free; with the platform ids of this visit."""
    _check_open(db, link, now, person=person["annotator_id"])
    update_rows(
        db,
        "crowd_participants",
        {"annotator_id": person["annotator_id"]},
        {**platform_ids, "status": "active", "started": iso(now), "finished": None},
    )
    # The visit that ended stays in their minutes (`payment_rows`): the new start replaced it,
    # and the payment table paid the last visit alone (outside probes 223 and 225).
    ended = parse_iso(person["finished"]) if person["finished"] else now
    details = {"started": person["started"], "finished": iso(ended)}
    audit.record(db, "system", "crowd_restart", "annotator", person["annotator_id"], details=details, now=now)
    person = db["crowd_participants"].get(person["annotator_id"])
    return _signed_in_again(db, link, person, session_days, now)


def _signed_in_again(db, link: dict, person: dict, session_days: float, now: dt.datetime) -> Joined:
    """A new session for a person who came back (their other sessions end: ``resumed``)."""
    invite = new_invite(
        db,
        person["annotator_id"],
        expires_days=1,
        created_by=f"open link {link['id']}",
        end_reason="resumed",
        now=now,
    )
    session = login_with_invite(db, invite, session_days=session_days, now=now)
    return Joined(session, True, _state(link, person))


def _check_open(db, link: dict, now: dt.datetime, person: int | None = None) -> None:
    """Refuse a newcomer to `link` when it is closed, ended or full (`newcomer_refusal`);
    `person`: the annotator id of a person taken back (`_restart`), who is not asked again
    for what they judged."""
    # Every link of the study: people of a top-up link whose time ran out were counted as in
    # and turned newcomers away as "full" until someone opened that link's payments (outside
    # probe 224).
    if not link["closed"] and link["ends"] > iso(now):
        expire_overdue(db, now=now, study_id=link["study_id"])
    why = newcomer_refusal(db, link, now, person)
    if why is not None:
        raise LinkClosed(f"{why}; please return it on the platform")


def newcomer_refusal(
    db: sqlite_utils.Database,
    link: Mapping,
    now: dt.datetime | None = None,
    person: int | None = None,
    *,
    exact: bool = True,
    room: Room | None = None,
) -> str | None:
    """Why `link` turns a newcomer away now, in the words they read, or None when it lets
    one in. Reads only: people whose time ran out count as in until `expire_overdue` (a
    join runs it first, and so does every payment table).

    The Admin tab's counts say it too (`live_counts`): a link "open until" its end whose
    study could take nobody more showed places left (outside probe 225). They leave out,
    with `exact` False, the one check that is a maximum flow over every pair each person
    in may still judge (`everyone_fits`: 1.8 s for 50 people on 26,838 pairs), which the
    counts would run every few seconds for every link; a join runs it. `room`: the study's
    `votes_left` for `person`, where the caller has read it already.
    """
    now = utcnow() if now is None else now
    if link["closed"]:
        # A link closed alone said "this study is closed" while the study's other links took
        # people (outside probe 162).
        what = "study" if str(link["study_id"]) in closed_studies(db) else "study link"
        return f"this {what} is closed and takes no new participants"
    if link["ends"] <= iso(now):
        return f"this study ended on {link['ends'][:10]} and takes no new participants"
    taken = db.execute(
        "select count(*) from crowd_participants where link_id = ? and status in ('active', 'completed')",
        [link["id"]],
    ).fetchone()[0]
    if taken >= link["quota"]:
        return "this study is full: " + (
            "its one place is taken" if link["quota"] == 1 else f"all {link['quota']} places are taken"
        )
    room = votes_left(db, link["study_id"], now=now, person=person) if room is None else room
    pairs = open_pairs(db, link["study_id"], now=now, person=person)
    if (
        exact
        and room.left >= room.asked
        and pairs >= room.asked
        and not everyone_fits(db, link["study_id"], room, person)
    ):
        return (
            "this study cannot give one more person all their trials: the votes its pairs still need "
            "are on too few pairs for the people already in it and one more, and each person judges a "
            "pair once"
        )
    if room.left >= room.asked and pairs < room.asked:
        # The votes were there but on too few pairs: each person judges a pair once, so a
        # newcomer judged every pair offered and was never done (outside probe 216).
        return (
            f"this study has fewer model pairs still open to a vote ({pairs}) than one person takes "
            f"({room.asked}{', not counting attention checks' if room.share > 0 else ''}), and each "
            "person judges a pair once"
        )
    if room.left < room.asked:
        # It said "its pairs have all the votes they need" with votes still open (an outside
        # check): the last few are fewer than one person's trials, for an invited participant.
        beside = ", not counting attention checks" if room.share > 0 else ""
        return (
            "this study is full: its pairs have all the votes they need"
            if room.needed <= 0
            else "this study is full: the votes its pairs still need are owed to the people already in it"
            if room.left <= 0
            else f"this study has fewer trials left ({room.left}) than one person takes ({room.asked}{beside})"
        )
    return None


class Room(NamedTuple):
    """What a study's model pairs can still take (`votes_left`)."""

    left: int
    """Votes its model pairs still need beyond those owed to the people already in it."""
    asked: int
    """Model-pair trials one more person is asked for (their trials less the attention checks
    they meet at the fewest)."""
    needed: int
    """Votes its model pairs still need."""
    share: float
    """The share of a person's trials that are attention checks."""
    owed_each: tuple[int, ...] = ()
    """The model-pair trials each person already in is still owed (those owed some)."""
    owed_to: tuple[int, ...] = ()
    """The annotator ids of those people, in the order of ``owed_each``."""


def votes_left(
    db: sqlite_utils.Database, study_id: int, *, now: dt.datetime | None = None, person: int | None = None
) -> Room:
    """What the study's model pairs can still take; one more person may join while
    ``left`` covers ``asked``.

    The votes its model pairs still need (``votes_per_pair`` less the votes cast, per pair)
    less those owed to the people already in (the model-pair trials they were asked, their
    ``trials_per_participant`` at most its pairs less the attention checks due in them, and
    have not judged) must cover one more person's model-pair trials; otherwise a newcomer
    would agree, start the clock and find no trial. Attention checks take any number of
    answers and are counted on neither side: counting them as pairs of ``votes_per_pair``
    turned a newcomer away, with every model pair's votes cast, for "fewer trials left (2)"
    (outside probe 198). A newcomer meets the fewest checks their trials can hold
    (`annotation.assignment.fewest_checks`), so that no place is given that could fall one
    trial short; `person`, taken back (`_restart`), is asked for what they have not judged.

    The people already in are those of its links who are active and the invited
    participants who hold trials now, of any study (they judge every open study; an outside
    check's five newcomers took the trials of two invitees part-way, whose "Trial 2 of 20"
    became "of 10"); an invitee whose held trials ran out
    (`annotation.assignment.RESERVATION_MINUTES` after they were handed out) no longer holds a
    share. The last votes, fewer than one person's trials, are for an invited participant
    (docs/crowd.md).
    """
    study = db["studies"].get(study_id)
    share, asked = assignment.trials_asked(db, study_id)
    (needed,) = db.execute(
        "select coalesce(sum(max(0, ? - (select count(*) from judgments j where j.pair_id = p.id))), 0) "
        f"from study_pairs p where p.study_id = ? and not {assignment.IS_CHECK}",
        [study["votes_per_pair"], study_id],
    ).fetchone()
    judged = (
        "(select count(*) from judgments j join study_pairs p on p.id = j.pair_id where p.study_id = :s "
        f"and j.participant_id = a.id and not {assignment.IS_CHECK})"
    )
    people = db.execute(
        f"select a.id, {judged} from (select c.annotator_id as id from crowd_participants c join crowd_links l "
        "on l.id = c.link_id where l.study_id = :s and c.status = 'active' union select t.annotator_id from "
        "tasks t where t.kind = 'judgment' and t.status = 'reserved' and t.expires > :now and not exists "
        "(select 1 from crowd_participants c where c.annotator_id = t.annotator_id)) a",
        {"s": study_id, "now": iso(utcnow() if now is None else now)},
    ).fetchall()

    def model_trials(annotator_id: int) -> int:
        return asked - assignment.checks_due(share, asked, annotator_id, study_id)

    owed = {who: n for who, done in people if (n := model_trials(who) - done) > 0}
    owed_each = tuple(owed.values())
    if person is None:
        mine = asked - assignment.fewest_checks(share, asked)
    else:
        done = db.execute(
            f"select {judged} from (select :a as id) a", {"s": study_id, "a": person}
        ).fetchone()[0]
        mine = max(0, model_trials(person) - done)
    return Room(int(needed - sum(owed_each)), int(mine), int(needed), share, owed_each, tuple(owed))


def everyone_fits(db: sqlite_utils.Database, study_id: int, room: Room, person: int | None = None) -> bool:
    """Whether the people already in and one more can each be given their model-pair
    trials on distinct pairs they have not judged, within the votes each pair still needs.

    A maximum flow from the people (``room.owed_each``, and ``room.asked`` for the newcomer,
    `person` where one is taken back) through the pairs each may still judge (one vote a
    pair) to the pairs' votes still needed: everyone fits when it carries every trial owed.
    Outside probe 218: two newcomers joined before either started, each let in on their own,
    and the second was never done. A count of pairs alone (Gale–Ryser's test, before) took
    every open pair as open to everyone, so it let a newcomer in while the people already in
    could judge only a pair whose last vote the newcomer would take.
    """
    study = db["studies"].get(study_id)
    needs = dict(
        db.execute(
            "select p.id, ? - (select count(*) from judgments j where j.pair_id = p.id) from study_pairs p "
            f"where p.study_id = ? and not {assignment.IS_CHECK}",
            [study["votes_per_pair"], study_id],
        ).fetchall()
    )
    people = [*room.owed_to, person]  # None: a newcomer, who judged nothing
    judged = db.execute(
        "select j.participant_id, j.pair_id from judgments j join study_pairs p on p.id = j.pair_id "
        "where p.study_id = ?",
        [study_id],
    ).fetchall()
    index = {who: i for i, who in enumerate(people) if who is not None}
    barred = {(index[who], pair) for who, pair in judged if who in index}
    return assignment.placement([*room.owed_each, room.asked], needs, barred)[0]


def open_pairs(
    db: sqlite_utils.Database, study_id: int, *, now: dt.datetime | None = None, person: int | None = None
) -> int:
    """How many of the study's model pairs one more person could still vote on: pairs whose
    ``votes_per_pair`` are not all cast or held by others' unexpired trials, and that
    `person` (taken back, `_restart`) has not judged. Each person votes on a pair once, so
    ``votes_left``'s total can cover a newcomer's trials while too few pairs take them."""
    study = db["studies"].get(study_id)
    (count,) = db.execute(
        "select count(*) from study_pairs p where p.study_id = :s and not "
        f"{assignment.IS_CHECK} and :v - (select count(*) from judgments j where j.pair_id = p.id) "
        "- (select count(*) from tasks t where t.kind = 'judgment' and t.pair_id = p.id and "
        "t.status = 'reserved' and t.expires > :now and t.annotator_id is not :a) >= 1 and not exists "
        "(select 1 from judgments j where j.pair_id = p.id and j.participant_id is :a)",
        {
            "s": study_id,
            "v": study["votes_per_pair"],
            "now": iso(utcnow() if now is None else now),
            "a": person,
        },
    ).fetchone()
    return int(count)


def one_param(params: Mapping[str, str | list[str]], name: str) -> str | None:
    """The value of parameter `name` of a study link; a parameter given twice (a list of
    values) is refused rather than one of them taken."""
    value = params.get(name)
    if isinstance(value, list):
        raise InvalidInput(
            f"the study link gives `{name}` {len(value)} times, so it is not clear which is yours; "
            "open it from the study page"
        )
    return value


def _external_id(params: Mapping[str, str | list[str]], name: str) -> str:
    value = one_param(params, name)
    if not value:
        raise InvalidInput(
            f"the study link needs your participant id in `{name}`; open it from the study page"
        )
    if len(value) > MAX_EXTERNAL_ID or not _ID_CHARS.fullmatch(value):
        raise InvalidInput(
            f"`{name}` must be 1-{MAX_EXTERNAL_ID} letters, digits, '.', '_' or '-' "
            "(ASCII letters a-z, A-Z and digits 0-9 only, a letter or digit first), "
            f"got {shown(value)}"
        )
    return value


def platform_params(id_param: str) -> tuple[str, str]:
    """The names of the platform's study and session id parameters for a link whose id
    parameter is `id_param` (`PLATFORM_PARAMS`; ``STUDY_ID`` and ``SESSION_ID`` otherwise)."""
    return PLATFORM_PARAMS.get(id_param, (STUDY_PARAM, SESSION_PARAM))


def _optional_id(params: Mapping[str, str | list[str]], name: str) -> str | None:
    """The platform's study or session id, None where the link has none (MTurk's); a value
    that is not an id, or an empty one (the platform filled in nothing), is refused, naming
    the parameter, rather than dropped unsaid."""
    value = one_param(params, name)
    if value is None:
        return None
    if not value:
        raise InvalidInput(
            f"`{name}` is in the study link but empty, so the platform did not fill it in; "
            "open the study from the platform's page"
        )
    if len(value) > MAX_EXTERNAL_ID or not _ID_CHARS.fullmatch(value):
        raise InvalidInput(
            f"`{name}` must be 1-{MAX_EXTERNAL_ID} letters, digits, '.', '_' or '-' "
            "(ASCII letters a-z, A-Z and digits 0-9 only, a letter or digit first), "
            f"got {shown(value)}; open the study from the platform's page"
        )
    return value


def crowd_person(db: sqlite_utils.Database, actor: Actor) -> tuple[dict, dict] | None:
    """``(link, crowd_participants row)`` of the actor, or None if no open link made them."""
    if actor.annotator_id is None:
        return None
    rows = list(db["crowd_participants"].rows_where("annotator_id = ?", [actor.annotator_id]))
    if not rows:
        return None
    return get_link(db, rows[0]["link_id"]), rows[0]


def state(db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None) -> CrowdState | None:
    """The actor's `CrowdState` (timing them out when their time ran out), or None."""
    found = crowd_person(db, actor)
    if found is None:
        return None
    link, person = found
    return _state(link, _timed_out_if_overdue(db, link, person, utcnow() if now is None else now))


def stored_state(db: sqlite_utils.Database, actor: Actor) -> CrowdState | None:
    """The actor's `CrowdState` as stored (one whose time ran out keeps its status until
    `state` times it out), or None: for a view that writes nothing."""
    found = crowd_person(db, actor)
    return None if found is None else _state(*found)


def check_active(db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None) -> None:
    """Refuse a crowd participant who may not judge: one who has not agreed to the consent
    text yet, or is no longer judging (finished, timed out, returned).

    Raises
    ------
    Conflict
        Saying why; people not from an open link pass.
    """
    current = state(db, actor, now=now)
    if current is None:
        return
    if current.status != "active":
        raise Conflict(_NOT_JUDGING[current.status].format(code=current.code))
    if not current.consented:
        raise Conflict("please read the consent text and choose I agree before your first trial")


_NOT_JUDGING = {
    "completed": "you completed this study; your completion code is {code}",
    "screened_out": "this study has ended for you; your code is {code}",
    "timed_out": "your time for this study ran out; no more votes are taken",
    "returned": "you returned this study; no more votes are taken",
    "may_restart": "the organisers let you start this study again: open it again from the platform to go on",
    "study_closed": "the organisers closed this study; no more votes are taken",
}


def consent_text(link: dict) -> str:
    """The consent text people of `link` (a ``crowd_links`` row) read: the researcher's,
    else `DEFAULT_CONSENT`. Plain text: show it inert (escaped), never as HTML or Markdown."""
    return link.get("consent_text") or DEFAULT_CONSENT


def consent(
    db: sqlite_utils.Database, actor: Actor, agree: bool, *, now: dt.datetime | None = None
) -> CrowdState:
    """Record a crowd participant's answer to the consent text.

    Agreeing stores the time (``crowd_participants.consented``) and lets them judge; not
    agreeing ends their part as ``returned``: their place and reserved trials are freed and
    they get no code (`CrowdState.platform_url` is where to send them back).

    Raises
    ------
    NotFound
        The actor did not come through an open link.
    Conflict
        They are no longer judging (finished, timed out, returned), or they agreed already
        and now decline (they return the study on the platform instead).
    InvalidInput
        `agree` is not a bool.
    """
    if not isinstance(agree, bool):
        raise InvalidInput(f"`agree` must be true or false, got {shown(agree)}")
    now = utcnow() if now is None else now
    with transaction(db):
        found = crowd_person(db, actor)
        if found is None:
            raise NotFound("consent is asked of people who came through an open study link only")
        link, person = found
        person = _timed_out_if_overdue(db, link, person, now)
        if person["status"] != "active":
            raise Conflict(_NOT_JUDGING[person["status"]].format(code=_code(link, person["status"])))
        if agree:
            if not person.get("consented"):
                update_rows(
                    db,
                    "crowd_participants",
                    {"annotator_id": person["annotator_id"]},
                    {"consented": iso(now)},
                )
                audit.record(
                    db, actor.pseudonym, "crowd_consent", "annotator", person["annotator_id"], now=now
                )
            person = db["crowd_participants"].get(person["annotator_id"])
        else:
            if person.get("consented"):
                raise Conflict(
                    "you agreed already; to stop, close this page and return the study on the platform"
                )
            person = _finish(db, person, "returned", now)
            audit.record(db, actor.pseudonym, "crowd_declined", "annotator", person["annotator_id"], now=now)
    return _state(link, person)


def settle(db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None) -> CrowdState | None:
    """After a vote: screen the person out or mark them completed when due; their state."""
    found = crowd_person(db, actor)
    if found is None:
        return None
    link, person = found
    now = utcnow() if now is None else now
    if person["status"] != "active":
        return _state(link, person)
    _, failed = _checks(db, person["annotator_id"])
    done, total = progress(db, actor)
    status = "screened_out" if failed > link["max_failed_checks"] else "completed" if done >= total else None
    if status is not None:
        person = _finish(db, person, status, now)
    return _state(link, person)


def mark_returned(
    db: sqlite_utils.Database, link_id: int, external_id: str, actor: Actor, *, now: dt.datetime | None = None
) -> dict:
    """Record that `external_id` returned the study on the platform: their place and
    reserved trials are freed. Returns their row.

    Raises
    ------
    InvalidInput
        The id is empty, or an erased person's placeholder (`ERASED_ID`).
    NotFound
        Nobody with that id joined this link.
    Conflict
        They completed, were screened out or returned already, their account was closed, or
        the study was closed.
    """
    link = get_link(db, link_id)
    _check_external_id(external_id, "mark returned")
    with transaction(db):
        person = _person(db, link, external_id)
        if person["status"] == "returned":
            raise Conflict(f"{shown(external_id)} is marked returned already; nothing changed")
        if person["status"] in (*FINISHED, "account_closed", "study_closed"):
            # A closed account marked returned could then be let start again, and its record
            # was lost (outside probe 224).
            raise Conflict(
                f"{shown(external_id)} has status {person['status']}; it is not changed to returned"
            )
        person = _finish(db, person, "returned", _stop_time(link, person, utcnow() if now is None else now))
        audit.record(db, actor.pseudonym, "crowd_returned", "annotator", person["annotator_id"], now=now)
    return person


def let_start_again(
    db: sqlite_utils.Database, link_id: int, external_id: str, actor: Actor, *, now: dt.datetime | None = None
) -> dict:
    """Let `external_id` start the study again: a person who returned it (or whose time ran
    out) and took it again on the platform, such as an MTurk worker who returned the HIT and
    accepted it again, who comes with a new assignment and is refused (outside probe 112).
    Returns their row, status ``may_restart``.

    One still active is first ended as by `mark_returned` (their place and reserved trials
    freed). Their next visit with this id is taken as a newcomer's would be (the link open, a
    place free) with the study and session ids it brings, recorded in place of the old: the
    same participant, whose votes so far count and whose time limit starts again.

    Raises
    ------
    InvalidInput
        The id is empty, or an erased person's placeholder (`ERASED_ID`).
    NotFound
        Nobody with that id joined this link.
    Conflict
        They finished (completed or screened out), their account was closed, or they may
        start again already.
    """
    link = get_link(db, link_id)
    _check_external_id(external_id, "let start again")
    now = utcnow() if now is None else now
    with transaction(db):
        person = _person(db, link, external_id)
        if person["status"] == "may_restart":
            raise Conflict(f"{shown(external_id)} may start again already; nothing changed")
        if person["status"] in (*FINISHED, "account_closed", "study_closed"):
            raise Conflict(
                f"{shown(external_id)} has status {person['status']}: their part is over and they do not "
                "start again; nothing changed"
            )
        if person["status"] == "active":
            person = _finish(db, person, "returned", _stop_time(link, person, now))
        update_rows(
            db, "crowd_participants", {"annotator_id": person["annotator_id"]}, {"status": "may_restart"}
        )
        audit.record(db, actor.pseudonym, "crowd_may_restart", "annotator", person["annotator_id"], now=now)
    return db["crowd_participants"].get(person["annotator_id"])


def _stop_time(link: dict, person: dict, now: dt.datetime) -> dt.datetime:
    """When an admin's action ends `person`'s time: `now`, or their deadline if it came first, or
    the end already recorded (a time-out). Marked returned past their deadline, a person unseen
    since read 1.3 minutes of a 1-minute limit, depending on whether anyone had looked at the
    payment table first (outside probe 146)."""
    if person["status"] != "active" and person["finished"]:
        return parse_iso(person["finished"])
    return min(now, _deadline(person["started"], link["minutes"]))


def _check_external_id(external_id, action: str) -> None:
    """Refuse an empty or erased `external_id` typed to `action` a person."""
    if not external_id:
        raise InvalidInput(f"`External id` is empty: type the platform id of the person to {action}")
    if isinstance(external_id, str) and _ERASED.fullmatch(external_id):
        raise InvalidInput(
            f"`External id` {shown(external_id)} is what an erased person's id reads, not a platform id: "
            "their part is over; nothing changed"
        )


def _person(db, link: dict, external_id: str) -> dict:
    """The ``crowd_participants`` row of `external_id` on `link`; `NotFound` if none."""
    rows = list(
        db["crowd_participants"].rows_where("link_id = ? and external_id = ?", [link["id"], external_id])
    )
    if not rows:
        raise NotFound(f"nobody with the id {shown(external_id)} joined open link {link['id']}")
    return rows[0]


#: What an erased participant's ``external_id`` reads (unique per link, as the column must be).
ERASED_ID = "(erased {annotator_id})"
_ERASED = re.compile(re.escape(ERASED_ID).replace(re.escape("{annotator_id}"), r"\d+"))
"""`ERASED_ID` of any annotator."""


def erase_platform_ids(
    db: sqlite_utils.Database,
    who: str,
    actor: Actor,
    why: str,
    *,
    link_id: int | None = None,
    by: str | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """Erase a crowd participant's platform ids at their request, and close their account.

    `who` is their pseudonym (``P0016``) or their platform id (with `link_id` when more
    than one link has it); `by` (``"pseudonym"`` or ``"platform id"``) says which when
    `who` could be either. In one transaction: the account is closed as *Close account*
    closes it (sessions and link ended, their place freed), and their ``crowd_participants``
    row keeps status, times and consent but loses the platform id (`ERASED_ID`), the
    platform's study and session ids and the address. Their votes stay, under the pseudonym.
    The same platform id joining again is someone new to the app. Returns the row.

    Raises
    ------
    InvalidInput
        `who` or `why` is empty.
    NotFound
        Nobody with that pseudonym or platform id came through a link.
    Conflict
        The platform id is on more than one link and `link_id` is not given, `who` names
        one person by pseudonym and another by platform id and `by` is not given, or their
        ids are erased already.
    """
    if by not in (None, "pseudonym", "platform id"):
        raise InvalidInput(f"`by` must be 'pseudonym' or 'platform id', got {shown(by)}")
    check_text(why, "why")
    if blank(why or ""):
        raise InvalidInput("`why` is empty: say whose request this is (it goes to the audit log)")
    who = (who or "").strip()
    if not who:
        raise InvalidInput("`who` is empty: give the participant's pseudonym (P0016) or platform id")
    now = utcnow() if now is None else now
    with transaction(db):
        found = annotator_id_of(db, who) if by != "platform id" else None
        where, values = "external_id = ?", [who]
        if link_id is not None:
            where, values = where + " and link_id = ?", [who, link_id]
        by_id = list(db["crowd_participants"].rows_where(where, values)) if by != "pseudonym" else []
        by_name = list(db["crowd_participants"].rows_where("annotator_id = ?", [found])) if found else []
        if by_name and by_id and {r["annotator_id"] for r in by_id} != {found}:
            # A short platform id can be someone else's pseudonym (outside probe 98: the wrong
            # person was erased, for good).
            raise Conflict(
                f"{shown(who)} is the pseudonym of annotator {found} and the platform id of annotator "
                f"{by_id[0]['annotator_id']}: say which (--pseudonym or --platform-id); nothing changed"
            )
        rows = by_name or by_id
        if not rows:
            on = "" if link_id is None else f" on link {link_id}"
            raise NotFound(f"no crowd participant is called or has the platform id {shown(who)}{on}")
        if len(rows) > 1:
            links = ", ".join(str(r["link_id"]) for r in rows)
            raise Conflict(f"the platform id {shown(who)} joined links {links}: give --link; nothing changed")
        person = rows[0]
        annotator_id = person["annotator_id"]
        if person["external_id"] == ERASED_ID.format(annotator_id=annotator_id):
            raise Conflict(
                f"the platform ids of annotator {annotator_id} are erased already; nothing changed"
            )
        if get_annotator(db, annotator_id)["status"] != "revoked":
            revoke_annotator(db, annotator_id, actor, why, now=now)
        update_rows(
            db,
            "crowd_participants",
            {"annotator_id": annotator_id},
            {
                "external_id": ERASED_ID.format(annotator_id=annotator_id),
                "platform_study_id": None,
                "platform_session_id": None,
                "address": None,
            },
        )
        audit.record(db, actor.pseudonym, "erase_platform_ids", "annotator", annotator_id, why, now=now)
    return db["crowd_participants"].get(annotator_id)


def expire_overdue(
    db: sqlite_utils.Database,
    *,
    now: dt.datetime | None = None,
    link_id: int | None = None,
    study_id: int | None = None,
) -> int:
    """Time out every active person past their time limit (of link `link_id`, or of every link
    of study `study_id`, when given); returns how many."""
    now = utcnow() if now is None else now
    where, params = "c.status = 'active'", []
    for column, value in (("c.link_id", link_id), ("l.study_id", study_id)):
        if value is not None:
            where += f" and {column} = ?"
            params.append(value)
    rows = db.query(
        f"select c.*, l.minutes from crowd_participants c join crowd_links l on l.id = c.link_id where {where}",
        params,
    )
    overdue = [dict(r) for r in rows if _deadline(r["started"], r["minutes"]) <= now]
    if overdue:
        with transaction(db):
            for person in overdue:
                _finish(db, person, "timed_out", _deadline(person["started"], person["minutes"]))
    return len(overdue)


def _timed_out_if_overdue(db, link: dict, person: dict, now: dt.datetime) -> dict:
    if person["status"] == "active" and _deadline(person["started"], link["minutes"]) <= now:
        with transaction(db):
            return _finish(db, person, "timed_out", _deadline(person["started"], link["minutes"]))
    return person


def _finish(db, person: dict, status: str, when: dt.datetime) -> dict:
    """Set a person's final status; free their reserved trials unless they completed."""
    with transaction(db):
        update_rows(
            db,
            "crowd_participants",
            {"annotator_id": person["annotator_id"]},
            {"status": status, "finished": iso(when)},
        )
        update_rows(
            db,
            "tasks",
            {"annotator_id": person["annotator_id"], "kind": "judgment", "status": "reserved"},
            {"status": "released", "finished": iso(when)},
        )
    return db["crowd_participants"].get(person["annotator_id"])


def close_account(db: sqlite_utils.Database, annotator_id: int, *, now: dt.datetime | None = None) -> bool:
    """Mark an active crowd participant (or one let start again, `let_start_again`) whose
    account the admin closes ``account_closed``: their
    place is free at once, as after *Mark returned* (it stayed taken, and the link "full",
    until their time ran out). Whether they were one; in the caller's transaction."""
    rows = list(
        db["crowd_participants"].rows_where(
            "annotator_id = ? and status in ('active', 'may_restart')", [annotator_id]
        )
    )
    if not rows:
        return False
    _finish(db, rows[0], "account_closed", utcnow() if now is None else now)
    return True


def _deadline(started: str, minutes: float) -> dt.datetime:
    return parse_iso(started) + dt.timedelta(minutes=minutes)


def _code(link: dict, status: str) -> str:
    return {"completed": link["completion_code"], "screened_out": link["screenout_code"]}.get(status, "")


def return_address(link: Mapping, person: Mapping, code: str) -> str:
    """`link`'s return URL for `person`: ``{code}`` replaced by `code`, ``{assignmentId}`` by
    the platform's session id they came with ("" when none): MTurk's external submit
    (``https://www.mturk.com/mturk/externalSubmit?assignmentId={assignmentId}&code={code}``)
    takes the assignment back, which one code for everyone cannot name. Both are ids of
    letters, digits, ``.``, ``_`` and ``-`` (`_ID_CHARS`), safe in a URL as they are."""
    session = person.get("platform_session_id") or ""
    return link["return_url"].replace("{assignmentId}", session).replace("{code}", code)


def _state(link: dict, person: dict) -> CrowdState:
    code = _code(link, person["status"])
    return CrowdState(
        person["status"],
        code,
        return_address(link, person, code) if code else "",
        iso(_deadline(person["started"], link["minutes"])),
        person["external_id"],
        person.get("consented") or "",
        "" if link["id_param"] == MTURK_ID_PARAM else return_address(link, person, ""),
    )


def _checks(db, annotator_id: int) -> tuple[int, int]:
    passed, failed = db.execute(
        "select coalesce(sum(j.winner = 'b'), 0), coalesce(sum(j.winner != 'b'), 0) from judgments j "
        "join study_pairs p on p.id = j.pair_id where j.participant_id = ? and p.b = ?",
        [annotator_id, GROUND_TRUTH],
    ).fetchone()
    return passed, failed


def payment_rows(
    db: sqlite_utils.Database, link_id: int, *, now: dt.datetime | None = None, exact: bool = False
) -> pd.DataFrame:
    """The approval table of a link: one row per external id, in joining order (``minutes``
    unrounded with `exact`, for statistics over them).

    Returns
    -------
    pandas.DataFrame
        Columns `PAYMENT_COLUMNS`: the platform's ``participant_id``, ``study_id`` and
        ``session_id``; the app's ``pseudonym`` (``participant`` in the study's votes, whose
        ``participant_id`` and ``study_id`` are the app's numbers); ``status`` (one of `STATUSES`, after timing out the overdue);
        ``started``/``finished`` (UTC); ``minutes`` spent (to now while active, 0.1
        precision); ``trials`` judged; attention ``checks_passed``/``checks_failed``;
        the ``code`` they were given ("" unless completed or screened out).
    """
    link = get_link(db, link_id)
    now = utcnow() if now is None else now
    expire_overdue(db, now=now, link_id=link["id"])
    rows = db.execute(
        "select c.annotator_id, c.external_id, a.pseudonym, c.status, c.platform_study_id, c.platform_session_id, "
        "c.started, c.finished, "
        "count(j.id), coalesce(sum(p.b = ? and j.winner = 'b'), 0), coalesce(sum(p.b = ? and j.winner != 'b'), 0) "
        "from crowd_participants c join annotators a on a.id = c.annotator_id "
        "left join judgments j on j.participant_id = c.annotator_id "
        "left join study_pairs p on p.id = j.pair_id where c.link_id = ? "
        "group by c.annotator_id order by c.started, c.annotator_id",
        [GROUND_TRUTH, GROUND_TRUTH, link["id"]],
    ).fetchall()
    codes = {"completed": link["completion_code"], "screened_out": link["screenout_code"]}
    earlier = _earlier_visits(db, link["id"])
    records = [
        {
            "participant_id": pid,
            "pseudonym": pseudonym,
            "status": status,
            "study_id": study or "",
            "session_id": session or "",
            "started": earlier.get(annotator_id, (started, 0.0))[0],
            "finished": finished or "",
            "minutes": ((parse_iso(finished) if finished else now) - parse_iso(started)).total_seconds() / 60
            + earlier.get(annotator_id, (started, 0.0))[1],
            "trials": trials,
            "checks_passed": passed,
            "checks_failed": failed,
            "code": codes.get(status, ""),
        }
        for annotator_id, pid, pseudonym, status, study, session, started, finished, trials, passed, failed in rows
    ]
    if not exact:
        for record in records:
            record["minutes"] = round(record["minutes"], 1)
    return pd.DataFrame(records, columns=list(PAYMENT_COLUMNS))


def _earlier_visits(db: sqlite_utils.Database, link_id: int) -> dict[int, tuple[str, float]]:
    """Per person of `link_id` taken back after *Let start again* (`_restart`): when their
    first visit started and the minutes of the visits before the last, from the
    ``crowd_restart`` audit rows (restarts recorded before those said when are left out)."""
    rows = db.execute(
        "select c.annotator_id, u.details from audit u join crowd_participants c "
        "on u.object_type = 'annotator' and c.annotator_id = cast(u.object_id as integer) "
        "where u.action = 'crowd_restart' and c.link_id = ? order by u.id",
        [link_id],
    ).fetchall()
    found: dict[int, tuple[str, float]] = {}
    for annotator_id, details in rows:
        visit = json.loads(details or "{}")
        if not {"started", "finished"} <= set(visit):
            continue
        minutes = (parse_iso(visit["finished"]) - parse_iso(visit["started"])).total_seconds() / 60
        first, before = found.get(annotator_id, (visit["started"], 0.0))
        found[annotator_id] = (min(first, visit["started"]), before + minutes)
    return found


def payment_csv(table: pd.DataFrame) -> str:
    """The approval table as CSV text (header first, spreadsheet-safe)."""
    return csv_text(table, index=False)


def _payable(table: pd.DataFrame, statuses: tuple[str, ...], id_param: str) -> pd.DataFrame:
    """The rows of `statuses` with a platform id: an erased one (`ERASED_ID`) is no id the
    platform takes (outside probe 98), and such a person is approved or paid on the platform;
    on MTurk (`MTURK_ID_PARAM`), which pays by the assignment, only rows with an assignment id."""
    erased = table["participant_id"].astype(str).str.fullmatch(_ERASED.pattern)
    payable = table["status"].isin(statuses) & ~erased
    if id_param == MTURK_ID_PARAM:
        payable &= table["session_id"] != ""
    return table[payable]


def approval_ids(
    table: pd.DataFrame, statuses: tuple[str, ...] = ("completed",), id_param: str = DEFAULT_ID_PARAM
) -> str:
    """The ids to approve, one a line: what Prolific's "bulk approve" box takes (erased ids
    left out); for an MTurk link (`id_param` `MTURK_ID_PARAM`) the assignment ids, which
    MTurk approves (``aws mturk approve-assignment --assignment-id``), a row without one left out."""
    chosen = _payable(table, statuses, id_param)
    return "".join(f"{i}\n" for i in chosen["session_id" if id_param == MTURK_ID_PARAM else "participant_id"])


def bonus_csv(
    table: pd.DataFrame,
    per_trial: float,
    statuses: tuple[str, ...] = ("completed",),
    id_param: str = DEFAULT_ID_PARAM,
) -> str:
    """``participant_id,amount`` lines, no header, amount = `per_trial` x trials in the
    platform's currency with 2 decimals: the form Prolific's bulk bonus takes. For an MTurk
    link ``workerId,assignmentId,amount``: MTurk's bonus names both
    (``aws mturk send-bonus``), a row without an assignment id left out."""
    if isinstance(per_trial, bool) or not isinstance(per_trial, (int, float)) or not 0 < per_trial <= 100:
        raise InvalidInput(f"`per_trial` must be a number in (0, 100], got {shown(per_trial)}")
    chosen = _payable(table, statuses, id_param)
    ids = chosen["participant_id"]
    if id_param == MTURK_ID_PARAM:
        ids = ids + "," + chosen["session_id"]
    return "".join(f"{pid},{per_trial * n:.2f}\n" for pid, n in zip(ids, chosen["trials"]))


EXTERNAL_ID_COLUMNS = (
    "participant",
    "link_id",
    "external_id",
    "platform_study_id",
    "platform_session_id",
    "status",
)


def external_ids(db: sqlite_utils.Database) -> pd.DataFrame:
    """Pseudonym to external id of every crowd participant, for an export that asks for
    them (personal data: docs/security.md); the votes export names pseudonyms only.

    Returns
    -------
    pandas.DataFrame
        Columns `EXTERNAL_ID_COLUMNS` (``participant`` is the pseudonym, as in the votes
        export), in joining order.
    """
    rows = db.execute(
        "select a.pseudonym, c.link_id, c.external_id, c.platform_study_id, c.platform_session_id, c.status "
        "from crowd_participants c join annotators a on a.id = c.annotator_id order by c.started, c.annotator_id"
    ).fetchall()
    return pd.DataFrame(rows, columns=list(EXTERNAL_ID_COLUMNS))


def live_counts(db: sqlite_utils.Database, link_id: int, *, now: dt.datetime | None = None) -> dict:
    """Started, each status, places left, why the link takes nobody now (``takes_nobody``:
    `newcomer_refusal`, None while it takes people), how many more people the votes the
    study's pairs still need give trials to (``study_people``, shared by every open link
    of the study; 0 while the link takes nobody), median minutes of the completed and
    the attention failure rate (failed / answered checks; None before any), for a link.

    Places left are the link's places not taken, at most as many people as the votes the
    study's pairs still need, beyond those owed to the people in, give their trials
    (`votes_left`; an upper bound, as each person judges a pair once); none while the link
    takes nobody (closed, ended, or its study full: it said "places left 4" beside a study
    that turned every newcomer away, outside probe 225), as far as a check without the
    join's maximum flow tells (`newcomer_refusal` with ``exact`` False).
    """
    now = utcnow() if now is None else now
    link = get_link(db, link_id)
    table = payment_rows(db, link_id, now=now, exact=True)  # times out whoever ran out of time first
    room = None
    if not link["closed"] and link["ends"] > iso(now):
        expire_overdue(db, now=now, study_id=link["study_id"])  # as a newcomer's join does
        room = votes_left(db, link["study_id"], now=now)
    why = newcomer_refusal(db, link, now, exact=False, room=room)
    counts = {status: int((table["status"] == status).sum()) for status in STATUSES}
    answered = int(table["checks_passed"].sum() + table["checks_failed"].sum())
    completed = table.loc[table["status"] == "completed", "minutes"].tolist()
    places = study_people = 0
    if why is None:
        places = max(0, link["quota"] - counts["active"] - counts["completed"])
        study_people = room.left // room.asked if room.asked else places
        places = min(places, study_people)
    return {
        "started": len(table),
        **counts,
        "places_left": places,
        "takes_nobody": why,
        "study_people": study_people,
        "median_minutes": statistics.median(completed) if completed else None,
        "attention_failure_rate": None if not answered else int(table["checks_failed"].sum()) / answered,
    }


def _check_whole(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"`{name}` must be a whole number from {low} to {high}, got {shown(value)}")
