"""Sign-in throttling: failed admin-password and invite attempts slow their sender down.

Every failed attempt is an audit row (``sign_in_failed``, on the client's address), so
the throttle holds across restarts and across app processes sharing one database, and
the admin sees the recent failures. Within `WINDOW_S`:

- an address has `FREE_FAILURES` failures free; after the n-th failure beyond them it
  waits ``2 ** n`` seconds (capped at `MAX_WAIT_S`) before its next attempt is heard.
  Admin passwords and links (invite and study links) are counted apart: people behind one
  address (a lab's network) mistyping or re-opening links keep no one from the admin
  password, nor a wrong password anyone from their links;
- when all addresses together fail the admin password `GLOBAL_FAILURES` times (a
  spread-out guessing attack), every admin-password attempt waits `GLOBAL_WAIT_S` after
  the latest such failure. Invite and study-link tokens carry 256 random bits: no number
  of addresses guesses one, so their sign-ins wait for their own address alone (a
  global wait over every sign-in let anyone keep everyone out, with a wrong code from a
  new address every 30 s: outside probe 96).

A refused (throttled) attempt is not checked at all, so it cannot succeed and does
not count as a failure. Nor does a real invite link that is out of date (expired, revoked,
of a closed account: `annotation.errors.StaleToken`): it is no guess, and a designer
re-opening an old link from the lab counted against everyone there (outside probe 99).

The address is the one uvicorn reports: behind a reverse proxy it comes from
``X-Forwarded-For`` only for proxies listed in ``FORWARDED_ALLOW_IPS`` (default loopback);
docs/security.md ("Sessions and invite links") says what an operator must set.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import threading
from collections.abc import Iterator

import sqlite_utils

from annotation.errors import AnnotationError
from storage import audit, iso, parse_iso, utcnow

ACTION = "sign_in_failed"
WINDOW_S = 15 * 60.0
FREE_FAILURES = 5
MAX_WAIT_S = 15 * 60.0
GLOBAL_FAILURES = 200
GLOBAL_WAIT_S = 30.0
ADMIN_PASSWORD = "admin password"
"""The kind of sign-in that the global wait slows (a guessable secret)."""


class Throttled(AnnotationError):
    """Too many failed sign-ins: the caller must wait before trying again."""


_ATTEMPT_LOCKS = tuple(threading.Lock() for _ in range(64))
_ADMIN_LOCK = threading.Lock()


@contextlib.contextmanager
def attempt(
    db: sqlite_utils.Database,
    address: str,
    kind: str,
    failures: tuple[type[BaseException], ...],
    *,
    no_guess: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """One sign-in attempt of `kind` from `address`, the block trying it: refused first
    (`Throttled`, `check`) while the address must wait; one of `failures` that the block
    raises is recorded (`record_failure`), unless it is one of `no_guess` (a real link out
    of date).

    Attempts from one address and group of kinds run one at a time, from the check to the
    record: sent at once they had all passed the check before any failure was recorded, and
    20 wrong passwords got 10 heard where 6 are (outside probe 145). Admin-password attempts
    run one at a time whatever their address, as the cap on everyone's failures
    (`GLOBAL_FAILURES`) is checked and counted across addresses: a burst from 300 addresses
    had 203 heard (outside probe 147). One lock per address for links (of 64, by hash), one
    for the admin password, in this process; app processes sharing a database each hold their own.
    """
    lock = _ADMIN_LOCK if kind == ADMIN_PASSWORD else _ATTEMPT_LOCKS[hash(address) % len(_ATTEMPT_LOCKS)]
    with lock:
        check(db, address, kind)
        try:
            yield
        except no_guess:
            raise
        except failures:
            record_failure(db, address, kind)
            raise


def wait_s(
    db: sqlite_utils.Database, address: str, kind: str = ADMIN_PASSWORD, *, now: dt.datetime | None = None
) -> float:
    """Seconds `address` must wait before its next sign-in attempt of `kind` is heard (0: none)."""
    return max(_waits(db, address, kind, utcnow() if now is None else now))


def _waits(db, address: str, kind: str, now: dt.datetime) -> tuple[float, float]:
    """Seconds to wait for `address`'s own failures of `kind`'s group (the admin password, or
    links), and for everyone's admin-password failures together (0 for another `kind`; each
    >= 0)."""
    since = iso(now - dt.timedelta(seconds=WINDOW_S))
    count, last = db.execute(
        "select count(*), max(created) from audit where action = ? and object_id = ? and created > ? "
        "and (json_extract(details, '$.kind') = ?) = ?",
        [ACTION, address, since, ADMIN_PASSWORD, kind == ADMIN_PASSWORD],
    ).fetchone()
    own = everyone = 0.0
    if count > FREE_FAILURES:
        backoff = min(MAX_WAIT_S, 2.0 ** (count - FREE_FAILURES))
        own = max(0.0, backoff - (now - parse_iso(last)).total_seconds())
    if kind != ADMIN_PASSWORD:
        return own, everyone
    total, latest = db.execute(
        "select count(*), max(created) from audit where action = ? and created > ? "
        "and json_extract(details, '$.kind') = ?",
        [ACTION, since, ADMIN_PASSWORD],
    ).fetchone()
    if total >= GLOBAL_FAILURES:
        everyone = max(0.0, GLOBAL_WAIT_S - (now - parse_iso(latest)).total_seconds())
    return own, everyone


def check(
    db: sqlite_utils.Database, address: str, kind: str = ADMIN_PASSWORD, *, now: dt.datetime | None = None
) -> None:
    """Raise `Throttled` while `address` must wait before a sign-in of `kind` (``"admin
    password"``, ``"invite"``, ``"study link"``); the message says whose failures it waits for."""
    own, everyone = _waits(db, address, kind, utcnow() if now is None else now)
    if own > 0 and own >= everyone:
        what = "wrong admin passwords" if kind == ADMIN_PASSWORD else "links that were not valid"
        raise Throttled(
            f"too many failed sign-ins from your address ({what}); try again in {math.ceil(own)} s"
        )
    if everyone > 0:
        raise Throttled(
            f"too many failed admin sign-ins on this server from many addresses (not only yours), so "
            f"every admin sign-in waits {GLOBAL_WAIT_S:.0f} s after the latest one; try again in "
            f"{math.ceil(everyone)} s"
        )


def record_failure(
    db: sqlite_utils.Database, address: str, kind: str, *, now: dt.datetime | None = None
) -> None:
    """Record a failed attempt of `kind` (``"admin password"`` or ``"invite"``)."""
    audit.record(db, "system", ACTION, "address", address, details={"kind": kind}, now=now)


def recent_failures(db: sqlite_utils.Database, limit: int = 50) -> list[dict]:
    """The latest failed sign-ins, newest first: ``created``, ``address``, ``kind``."""
    rows = db.execute(
        "select created, object_id, json_extract(details, '$.kind') from audit "
        "where action = ? order by id desc limit ?",
        [ACTION, limit],
    ).fetchall()
    return [{"created": c, "address": a, "kind": k} for c, a, k in rows]
