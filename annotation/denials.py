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

A denial carried keeps its own audit row (`AUDITED`): who asked and why stayed only in the
kept copy, which the README says to delete (outside probe 232: a withdrawal's reason was gone
from the live database and its export).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import sqlite_utils

from annotation.coloring import ground_truth
from annotation.coloring.withdrawal import mark_withdrawn
from annotation.people.passwords import ADMIN_PASSWORD_SETTING
from storage import audit, insert_rows, iso, read_only, schema_version, transaction, update_rows
from storage.schema import MIGRATIONS

END_REASON = "ended_before_restore"
"""``sessions.end_reason`` of a session the restored database had live and the replaced one
had ended (its own reason is kept where the replaced database gives one)."""
AUDITED = {
    "closed": ("revoke_annotator", "annotator"),
    "links": ("close_crowd_link", "crowd_link"),
    "erased": ("erase_platform_ids", "annotator"),
    "withdrawn": ("withdraw_colorings", "annotator"),
    "password": ("set_admin_password", "setting"),
}
"""The audit action and object type of the row each kind of denial is made with, which a
restore carrying it carries too. Sessions ended and sign-in links revoked have none of
their own: signing out writes none, and the rest end with an action carried here (closing
an account, a new admin password) or with a new invite link, a grant the restore does not
carry."""
_AUDIT_COLUMNS = ("created", "actor", "action", "object_type", "object_id", "why", "details")


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

    Each denial carried brings its audit row (`AUDITED`: same time, actor, object, reason
    and details) where the restored database lacks it: an account's latest closure (an
    earlier one was undone by a reopen), a designer's first withdrawal after the backup (a
    later one withdrew colorings the backup does not hold), a link's closure, an erasure,
    and the setting of the admin password kept. A row found in several databases is one row.
    """
    found: dict = {
        "sessions": [],
        "invites": [],
        "closed": [],
        "links": [],
        "erased": [],
        "withdrawn": [],
        "password": None,
        "audit": [],
    }
    unread = []
    for index, path in enumerate([previous, *earlier]):
        try:
            old = read_only(path)
            try:
                for kind, rows in _denials(old).items():
                    if kind == "audit":  # the admin password is the one in use alone
                        found[kind] += [row for row in rows if index == 0 or row[0] != "password"]
                    elif kind != "password":
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
    found: dict = {"sessions": [], "invites": [], "closed": [], "password": None}
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
    found["audit"] = _audit_rows(conn, found)
    return found


def _audit_rows(conn: sqlite3.Connection, found: dict) -> list[tuple]:
    """The audit rows of the denials `found` in `conn` (`AUDITED`), each as ``(kind, key,
    *row)``: the key is the denial's as `_apply` matches it (an account's id, pseudonym and
    creation time, a link's token hash, None for the admin password), the row its
    `_AUDIT_COLUMNS`; none where `conn` has no audit table of those columns."""
    if not set(_AUDIT_COLUMNS) <= _columns(conn, "audit"):
        return []
    objects: dict[str, dict[str, object]] = {
        "closed": {str(row[0]): tuple(row) for row in found["closed"]},
        "erased": {str(row[0]): tuple(row[:3]) for row in found.get("erased", [])},
        "withdrawn": {str(row[2]): tuple(row[2:]) for row in found.get("withdrawn", [])},
        "password": {ADMIN_PASSWORD_SETTING: None} if found["password"] is not None else {},
        "links": {},
    }
    if found.get("links"):
        objects["links"] = {
            str(link_id): token_hash
            for link_id, token_hash in conn.execute(
                "select id, token_hash from crowd_links where closed is not null"
            )
        }
    rows = []
    for kind, keys in objects.items():
        action, object_type = AUDITED[kind]
        if keys:
            rows += [
                (kind, keys[row[4]], *row)
                for row in conn.execute(
                    f"select {', '.join(_AUDIT_COLUMNS)} from audit where action = ? and object_type = ? "
                    "order by created, id",
                    [action, object_type],
                )
                if row[4] in keys
            ]
    return rows


def _apply(db: sqlite_utils.Database, found: dict) -> list[str]:
    said = []
    now = iso()
    denied: dict[str, set] = {kind: set() for kind in AUDITED}
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
                denied["closed"].add((annotator_id, pseudonym, created))
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
        for token_hash, closed in found["links"]:
            if update_rows(db, "crowd_links", {"token_hash": token_hash, "closed": None}, {"closed": closed}):
                denied["links"].add(token_hash)
        if denied["links"]:
            said.append(f"{len(denied['links'])} open study link(s) closed after the backup stay closed")
    erased = 0
    for annotator_id, pseudonym, created, external_id in found["erased"]:
        same = db.execute(
            "select 1 from annotators where id = ? and pseudonym = ? and created = ?",
            [annotator_id, pseudonym, created],
        ).fetchone()
        if same and {"platform_study_id", "platform_session_id", "address"} <= _columns(
            db.conn, "crowd_participants"
        ):
            done = update_rows(
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
            if done:
                erased += done
                denied["erased"].add((annotator_id, pseudonym, created))
    if erased:
        said.append(f"the platform ids of {erased} crowd participant(s) erased after the backup stay erased")
    if found["withdrawn"] and {"id", "annotator_id", "image_sha256", "status"} <= _columns(
        db.conn, "colorings"
    ):
        lines, denied["withdrawn"] = _withdrawn(db, found["withdrawn"], now)
        said += lines
    if found["password"] is not None and {"key", "value"} <= _columns(db.conn, "settings"):
        where = {"key": ADMIN_PASSWORD_SETTING, "value !=": found["password"]}
        if update_rows(db, "settings", where, {"value": found["password"]}):
            denied["password"].add(None)
            said.append(
                "the admin password in use before the restore stays (the backup's was set apart from "
                "it, maybe to the same password: each is stored salted; python -m annotation "
                "set-admin-password sets a new one)"
            )
    _carry_audit(db, found["audit"], denied)
    if said and {"created", "actor", "action", "object_type", "details"} <= _columns(db.conn, "audit"):
        audit.record(db, "system", "restore_kept_denials", "database", None, details={"kept": said})
    return said


def _carry_audit(db: sqlite_utils.Database, found: list[tuple], denied: dict[str, set]) -> int:
    """Copy into `db` the audit rows of `found` (`_audit_rows`, from every database read)
    that belong to a denial carried (`denied`: kind -> keys) and that `db` lacks, oldest first; how
    many. Of an account's closures, the latest alone (one before it was undone by a reopen);
    of a designer's withdrawals that `db` lacks, the first (the colorings of a later one were
    made after it, so `db` holds none of them)."""
    if not set(_AUDIT_COLUMNS) <= _columns(db.conn, "audit"):
        return 0
    actions = sorted({action for action, _ in AUDITED.values()})
    held = set(
        db.execute(
            f"select {', '.join(_AUDIT_COLUMNS)} from audit where action in ({', '.join('?' * len(actions))})",
            actions,
        ).fetchall()
    )
    rows: dict[tuple, list[tuple]] = {}
    for kind, key, *row in dict.fromkeys(found):
        if key in denied[kind]:
            rows.setdefault((kind, key), []).append(tuple(row))
    chosen: dict[tuple, None] = {}
    for (kind, _), theirs in rows.items():
        theirs.sort(key=lambda row: row[0])  # by time; each database's own order among equals
        if kind in ("closed", "password"):
            theirs = theirs[-1:]
        theirs = [row for row in theirs if row not in held]
        chosen.update(dict.fromkeys(theirs[:1] if kind == "withdrawn" else theirs))
    ordered = sorted(chosen, key=lambda row: row[0])
    return insert_rows(db, "audit", [dict(zip(_AUDIT_COLUMNS, row)) for row in ordered])


def _withdrawn(db: sqlite_utils.Database, found: list, now: str) -> tuple[list[str], set[tuple]]:
    """Withdraw again in `db` the colorings of `found` (id, image hash, annotator id,
    pseudonym, creation time) that it holds unwithdrawn; the line saying so, if any, and
    the designers whose colorings were withdrawn again (annotator id, pseudonym, creation
    time)."""
    carried: dict[str, list[tuple[int, str, bool]]] = {}
    designers: set[int] = set()
    whom: set[tuple] = set()
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
            whom.add((annotator_id, pseudonym, created))
    if not carried:
        return [], whom
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
    ], whom


def _release(db: sqlite_utils.Database, where: dict, now: str) -> int:
    """Give back to the pool the reserved tasks `where` picks (released, as closing an
    account or a withdrawal does); how many. Nothing in a schema without those columns."""
    if not {"annotator_id", "kind", "status", "coloring_id", "finished"} <= _columns(db.conn, "tasks"):
        return 0
    return update_rows(db, "tasks", {**where, "status": "reserved"}, {"status": "released", "finished": now})


def _released(count: int) -> str:
    return f"; the {count} task(s) they held again go back to the pool" if count else ""
