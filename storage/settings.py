"""The ``settings`` table: named values the app keeps (the admin password's hash, the
assignment mode, cached P_H stabilities, the instance secret). Its SQL lives here."""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from storage.db import transaction, upsert_row


def read_setting(db: sqlite_utils.Database, key: str) -> str | None:
    """The value stored under `key`, or None."""
    row = db.execute("select value from settings where key = ?", [key]).fetchone()
    return None if row is None else row[0]


def write_setting(db: sqlite_utils.Database, key: str, value: str) -> None:
    """Store `value` under `key` (replacing what was there); inside the caller's
    `storage.transaction` (`storage.OutsideTransaction` otherwise)."""
    upsert_row(db, "settings", {"key": key, "value": value}, pk=("key",))


def setting_once(db: sqlite_utils.Database, key: str, make: Callable[[], str]) -> str:
    """The value under `key`; when there is none, ``make()``'s, stored first. Read and
    write are one transaction, so two processes starting at once keep the same value."""
    with transaction(db):
        found = read_setting(db, key)
        if found is not None:
            return found
        value = make()
        write_setting(db, key, value)
        return value
