"""The audit trail: one row per consequential action (who, when, what, why, on what)."""

from __future__ import annotations

import datetime as dt
import json

import sqlite_utils

from storage import insert_row, iso, transaction


def record(
    db: sqlite_utils.Database,
    actor: str,
    action: str,
    object_type: str,
    object_id: str | int | None,
    why: str = "",
    *,
    details: dict | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Append an audit row and return its id.

    Parameters
    ----------
    actor : str
        Who acted: ``"admin"``, a pseudonym, or ``"system"``.
    action : str
        What was done, e.g. ``"exclude_coloring"``.
    object_type, object_id : str
        What it was done to, e.g. ``"coloring"``, ``17``.
    why : str
        The reason given, stored as typed (escape it when showing it).
    details : dict, optional
        Extra JSON-serialisable facts.
    """
    row = {
        "created": iso(now),
        "actor": actor,
        "action": action,
        "object_type": object_type,
        "object_id": None if object_id is None else str(object_id),
        "why": why,
        "details": json.dumps(details or {}, sort_keys=True),
    }
    if db.conn.in_transaction:  # the caller's `storage.transaction`: one statement in it
        return insert_row(db, "audit", row)
    with transaction(db):
        return insert_row(db, "audit", row)
