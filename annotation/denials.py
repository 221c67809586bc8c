"""What a restore keeps of the database it replaces: the denials made after the backup.

A restore brings the study back as the backup holds it, with one exception: it never
grants again what was taken away since. A sign-in link revoked, a session ended, an account
closed or an admin password changed after the backup was made would otherwise come back
with it (outside probe 123: the old admin password signed in again, a closed designer's
cookie worked again), and these are exactly what an operator does when a password or a link
has leaked. So would a designer's colorings withdrawn at their request, which the consent
text promises no analysis counts (outside probe 150). `carry_denials` copies them from the database in use into the restored copy
before it takes its place, and says each one; what it carries is undone as usual (the Admin
tab's *Reopen account*, ``python -m annotation set-admin-password``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import sqlite_utils

from annotation import audit
from annotation.coloring import ground_truth
from annotation.coloring.withdrawal import mark_withdrawn
from annotation.people.passwords import ADMIN_PASSWORD_SETTING
from storage import iso, read_only, schema_version, transaction, update_rows
from storage.schema import MIGRATIONS

END_REASON = "ended_before_restore"
"""``sessions.end_reason`` of a session the restored database had live and the replaced one
had ended (its own reason is kept where the replaced database gives one)."""


def carry_denials(previous: Path, restored: Path, *, earlier: Sequence[Path] = ()) -> list[str]:
    """Copy into `restored` every denial `previous` and `earlier` hold that `restored` lacks.

    Parameters
    ----------
    previous : Path
        The database in use before the restore (read only; it may have a ``-wal``).
    restored : Path
        The backup's copy, before it takes `previous`' place (written, one transaction).
    earlier : sequence of Path
        The databases earlier restores replaced (``<name>.before-restore-<time>``): a
        restore of an older backup, then of a newer one, replaced no database that held
        the denials made after the newer one (outside probe 126), so every kept copy is
        read too; their admin password is not (the one in use is `previous`').

    Returns
    -------
    list of str
        One line per kind of denial carried (sessions ended, links revoked, accounts closed,
        open study links closed, platform ids erased, colorings withdrawn, the admin password
        kept), empty when there was none, and one line per database that could not be read.

    Sessions, invite and open study links are matched by their token's hash, accounts by
    id, pseudonym and creation time alike (another study's D0001 is someone else), colorings
    by id, image hash and their designer; a table or column the restored database's schema
    lacks is left alone. A withdrawn coloring's open review closes, the review tasks held on
    it go back (`annotation.coloring.withdrawal.mark_withdrawn`), and the P_H of its concept
    is recomputed; in a database of an
    earlier schema the P_H is left to ``check-distributions --repair`` after the next start
    migrates it, and the line says so.
    """
    found: dict = {
        "sessions": [],
        "invites": [],
        "closed": [],
        "links": [],
        "erased": [],
        "withdrawn": [],
        "password": None,
    }
    unread = []
    for index, path in enumerate([previous, *earlier]):
        try:
            old = read_only(path)
            try:
                for kind, rows in _denials(old).items():
                    if kind != "password":
                        found[kind] += rows
                    elif index == 0:
                        found[kind] = rows
            finally:
                old.close()
        except sqlite3.Error as error:
            unread.append(
                f"{str(path)!r} could not be read ({error}): no revoked link, ended session, closed "
                "account or newer admin password of it was carried into the restored database; check them "
                "on the Admin tab"
            )
    # A denial in the replaced database and in the copies earlier restores kept is one denial:
    # counted once per copy, 6 withdrawn colorings were said as 72 (outside probe 226).
    found = {
        kind: rows if kind == "password" else list(dict.fromkeys(map(tuple, rows)))
        for kind, rows in found.items()
    }
    new = sqlite_utils.Database(sqlite3.connect(restored))
    try:
        with transaction(new):
            said = _apply(new, found)
    finally:
        new.close()
    return said + unread


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f'pragma table_info("{table}")')}


def _denials(conn: sqlite3.Connection) -> dict:
    found = {"sessions": [], "invites": [], "closed": [], "password": None}
    for table in ("sessions", "invites"):
        columns = _columns(conn, table)
        if {"token_hash", "revoked"} <= columns:
            reason = "end_reason" if "end_reason" in columns else "null"
            found[table] = conn.execute(
                f"select token_hash, revoked, {reason} from {table} where revoked is not null"
            ).fetchall()
    if {"id", "pseudonym", "status", "created"} <= _columns(conn, "annotators"):
        found["closed"] = conn.execute(
            "select id, pseudonym, created from annotators where status = 'revoked'"
        ).fetchall()
    if {"token_hash", "closed"} <= _columns(conn, "crowd_links"):
        found["links"] = conn.execute(
            "select token_hash, closed from crowd_links where closed is not null"
        ).fetchall()
    if {"annotator_id", "external_id"} <= _columns(conn, "crowd_participants"):
        found["erased"] = conn.execute(
            "select c.annotator_id, a.pseudonym, a.created, c.external_id from crowd_participants c "
            "join annotators a on a.id = c.annotator_id where c.external_id like '(erased %)'"
        ).fetchall()
    if {"id", "annotator_id", "image_sha256", "status"} <= _columns(conn, "colorings"):
        found["withdrawn"] = conn.execute(
            "select c.id, c.image_sha256, a.id, a.pseudonym, a.created from colorings c "
            "join annotators a on a.id = c.annotator_id where c.status = 'withdrawn'"
        ).fetchall()
    if {"key", "value"} <= _columns(conn, "settings"):
        row = conn.execute("select value from settings where key = ?", [ADMIN_PASSWORD_SETTING]).fetchone()
        found["password"] = None if row is None else row[0]
    return found


def _apply(db: sqlite_utils.Database, found: dict) -> list[str]:
    said = []
    now = iso()
    for table, what in (("sessions", "session(s) ended"), ("invites", "sign-in link(s) revoked")):
        columns = _columns(db.conn, table)
        if not {"token_hash", "revoked"} <= columns:
            continue
        carried = 0
        for token_hash, revoked, reason in found[table]:
            values = {"revoked": revoked}
            if table == "sessions" and "end_reason" in columns:
                values["end_reason"] = reason or END_REASON
            carried += update_rows(db, table, {"token_hash": token_hash, "revoked": None}, values)
        if carried:
            said.append(f"{carried} {what} after the backup stay so")
    if found["closed"] and {"id", "pseudonym", "status", "created"} <= _columns(db.conn, "annotators"):
        closed, released = [], 0
        for annotator_id, pseudonym, created in found["closed"]:
            where = {"id": annotator_id, "pseudonym": pseudonym, "created": created, "status !=": "revoked"}
            if update_rows(db, "annotators", where, {"status": "revoked"}):
                closed.append(pseudonym)
                # What the backup held of theirs that was still live ends with the account.
                for table in ("invites", "sessions"):
                    if {"annotator_id", "revoked"} <= _columns(db.conn, table):
                        update_rows(
                            db, table, {"annotator_id": annotator_id, "revoked": None}, {"revoked": now}
                        )
                # and the tasks they held go back, as closing the account gave them back
                # (`assignment.release_all`; they held their places again: outside probe 226).
                released += _release(db, {"annotator_id": annotator_id}, now)
        if closed:
            said.append(
                f"{len(closed)} account(s) closed after the backup stay closed ({', '.join(closed)}; the Admin "
                "tab's Reopen account opens one again)" + _released(released)
            )
    if found["links"] and {"token_hash", "closed"} <= _columns(db.conn, "crowd_links"):
        closed_links = sum(
            update_rows(db, "crowd_links", {"token_hash": token_hash, "closed": None}, {"closed": closed})
            for token_hash, closed in found["links"]
        )
        if closed_links:
            said.append(f"{closed_links} open study link(s) closed after the backup stay closed")
    erased = 0
    for annotator_id, pseudonym, created, external_id in found["erased"]:
        same = db.execute(
            "select 1 from annotators where id = ? and pseudonym = ? and created = ?",
            [annotator_id, pseudonym, created],
        ).fetchone()
        if same and {"platform_study_id", "platform_session_id", "address"} <= _columns(
            db.conn, "crowd_participants"
        ):
            erased += update_rows(
                db,
                "crowd_participants",
                {"annotator_id": annotator_id, "external_id !=": external_id},
                {
                    "external_id": external_id,
                    "platform_study_id": None,
                    "platform_session_id": None,
                    "address": None,
                },
            )
    if erased:
        said.append(f"the platform ids of {erased} crowd participant(s) erased after the backup stay erased")
    if found["withdrawn"] and {"id", "annotator_id", "image_sha256", "status"} <= _columns(
        db.conn, "colorings"
    ):
        said += _withdrawn(db, found["withdrawn"], now)
    if found["password"] is not None and {"key", "value"} <= _columns(db.conn, "settings"):
        where = {"key": ADMIN_PASSWORD_SETTING, "value !=": found["password"]}
        if update_rows(db, "settings", where, {"value": found["password"]}):
            said.append(
                "the admin password in use before the restore stays (the backup's was set apart from "
                "it, maybe to the same password: each is stored salted; python -m annotation "
                "set-admin-password sets a new one)"
            )
    if said and {"created", "actor", "action", "object_type", "details"} <= _columns(db.conn, "audit"):
        audit.record(db, "system", "restore_kept_denials", "database", None, details={"kept": said})
    return said


def _withdrawn(db: sqlite_utils.Database, found: list, now: str) -> list[str]:
    """Withdraw again in `db` the colorings of `found` (id, image hash, annotator id,
    pseudonym, creation time) that it holds unwithdrawn; the line saying so, if any."""
    carried: dict[str, list[tuple[int, str, bool]]] = {}
    designers: set[int] = set()
    for coloring_id, image_sha256, annotator_id, pseudonym, created in found:
        row = db.execute(
            "select c.concept_key, c.practice from colorings c join annotators a on a.id = c.annotator_id "
            "where c.id = ? and c.image_sha256 = ? and c.status != 'withdrawn' "
            "and a.id = ? and a.pseudonym = ? and a.created = ?",
            [coloring_id, image_sha256, annotator_id, pseudonym, created],
        ).fetchone()
        if row:
            carried.setdefault(pseudonym, []).append((coloring_id, row[0], bool(row[1])))
            designers.add(annotator_id)
    if not carried:
        return []
    ids = [coloring_id for rows in carried.values() for coloring_id, _, _ in rows]
    mark_withdrawn(db, ids, now)
    # The concepts a withdrawn designer held go back, as the withdrawal gave them back
    # (`annotation.coloring.withdrawal.withdraw_colorings`).
    held = sum(
        _release(db, {"annotator_id": who, "kind": "coloring", "coloring_id": None}, now)
        for who in sorted(designers)
    )
    concepts = sorted({concept for rows in carried.values() for _, concept, practice in rows if not practice})
    current = schema_version(db) == len(MIGRATIONS)
    if current:
        for concept in concepts:
            ground_truth.refresh(db, concept)
    whose = ", ".join(f"{pseudonym} ({len(rows)})" for pseudonym, rows in carried.items())
    p_h = (
        f"the P_H of {len(concepts)} concept(s) recomputed without them"
        if current
        else "run python -m annotation check-distributions --repair after the next start migrates the "
        "database, to recompute the P_H of their concepts"
    )
    return [
        f"{len(ids)} coloring(s) withdrawn after the backup stay withdrawn ({whose}; {p_h}){_released(held)}"
    ]


def _release(db: sqlite_utils.Database, where: dict, now: str) -> int:
    """Give back to the pool the reserved tasks `where` picks (released, as closing an
    account or a withdrawal does); how many. Nothing in a schema without those columns."""
    if not {"annotator_id", "kind", "status", "coloring_id", "finished"} <= _columns(db.conn, "tasks"):
        return 0
    return update_rows(db, "tasks", {**where, "status": "reserved"}, {"status": "released", "finished": now})


def _released(count: int) -> str:
    return f"; the {count} task(s) they held again go back to the pool" if count else ""
