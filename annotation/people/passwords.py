"""The admin password: salted scrypt hashes and the first-start bootstrap.

The admin password comes from, in order: the environment variable `ENV_PASSWORD`, a
password file (first line; path from `ENV_PASSWORD_FILE` or the app's config), or, when
neither is set and no password was stored before, a random one generated on first start
and shown once on the console (as Jupyter does with its token). Only the hash is stored,
in the ``settings`` table.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import os
import secrets
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import sqlite_utils

from annotation.errors import InvalidInput, PermissionDenied
from annotation.people.accounts import Session, end_admin_sessions, open_admin_session
from evaluation.models.registry import PROJECT_ROOT
from storage import audit, transaction, utcnow
from storage.settings import read_setting, write_setting
from storage.shown import counted

ENV_PASSWORD = "COLORCONCEPT_ADMIN_PASSWORD"
ENV_PASSWORD_FILE = "COLORCONCEPT_ADMIN_PASSWORD_FILE"
MIN_LENGTH = 8
MAX_LENGTH = 1000
"""The longest password sign-in takes (`app.landing`); a longer one could be set but never used."""
ADMIN_PASSWORD_SETTING = "admin_password_hash"
"""The setting holding the admin password's hash (read by a restore too: `annotation.denials`)."""
# scrypt cost: n=2**14, r=8, p=1 takes ~50 ms and 16 MiB, RFC 7914's interactive setting.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt_hex$hash_hex`` of `password` with a random 16-byte salt."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether `password` matches the `hash_password` string `encoded` (constant time)."""
    scheme, n, r, p, salt, digest = encoded.split("$")
    if scheme != "scrypt":
        raise ValueError(f"unknown password hash scheme {scheme!r}")
    candidate = hashlib.scrypt(
        password.encode("utf-8"), salt=bytes.fromhex(salt), dklen=32, n=int(n), r=int(r), p=int(p)
    )
    return hmac.compare_digest(candidate.hex(), digest)


def set_admin_password(
    db: sqlite_utils.Database, password: str, *, source: str = "manual", now: dt.datetime | None = None
) -> int:
    """Store the hash of a new admin password (`MIN_LENGTH` to `MAX_LENGTH` characters) and
    end every admin session opened before (`accounts.end_admin_sessions`): whoever signed in
    with the old password must sign in again. The audit row counts the sessions ended, and
    so does the number returned."""
    if not isinstance(password, str) or len(password.strip()) < MIN_LENGTH:
        raise InvalidInput(
            f"the admin password must have at least {MIN_LENGTH} characters, "
            f"got {len(password) if isinstance(password, str) else type(password).__name__}"
        )
    if len(password) > MAX_LENGTH:
        raise InvalidInput(
            f"the admin password may have at most {MAX_LENGTH} characters (sign-in takes no more), "
            f"got {len(password):,}"
        )
    now = utcnow() if now is None else now
    with transaction(db):
        write_setting(db, ADMIN_PASSWORD_SETTING, hash_password(password))
        ended = end_admin_sessions(db, "password_changed", now)
        audit.record(
            db,
            "system",
            "set_admin_password",
            "setting",
            ADMIN_PASSWORD_SETTING,
            details={"source": source, "sessions_ended": ended},
            now=now,
        )
    return ended


def ensure_admin_password(
    db: sqlite_utils.Database,
    *,
    password_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> str | None:
    """Make sure an admin password exists; call once at app start.

    Parameters
    ----------
    password_file : str or Path, optional
        A file whose first line is the password; `ENV_PASSWORD_FILE` overrides it.
    environ : mapping, optional
        Default ``os.environ``.
    echo : callable
        Where the one-time announcement of a generated password goes.

    Returns
    -------
    str or None
        The generated password when one was generated now (it was echoed), else None.
    """
    environ = os.environ if environ is None else environ
    chosen, source = _configured_password(environ, password_file)
    stored = _stored_hash(db)
    if chosen is not None:
        where = (
            ENV_PASSWORD
            if source == "env"
            else f"the first line of {environ.get(ENV_PASSWORD_FILE) or password_file}"
        )
        if stored is None or not verify_password(chosen, stored):
            try:
                ended = set_admin_password(db, chosen, source=source)
            except InvalidInput as error:
                raise InvalidInput(f"{error} (from {where})") from None
            if stored is not None:  # a password set otherwise (set-admin-password) undone: said
                echo(
                    f"The admin password is now the one in {where}: it differed from the stored one "
                    f"(set with `python -m annotation set-admin-password`, or an earlier value), and "
                    f"{counted(ended, 'admin session')} ended. While it is given, it is the admin "
                    "password at every start."
                )
        return None
    if stored is not None:
        return None
    generated = secrets.token_urlsafe(12)
    set_admin_password(db, generated, source="generated")
    path = db.execute("pragma database_list").fetchone()[2]  # "" for an in-memory database
    echo(_announcement(generated, path or "PATH"))
    return generated


def login_admin(db: sqlite_utils.Database, password: str, *, now: dt.datetime | None = None) -> Session:
    """Check the admin password and open an admin session.

    Raises
    ------
    PermissionDenied
        If the password is wrong or none was ever set.
    """
    stored = _stored_hash(db)
    if (
        not isinstance(password, str)
        or not password
        or stored is None
        or not verify_password(password, stored)
    ):
        raise PermissionDenied(
            f"wrong admin password (it was shown on the console at first start, or set with {ENV_PASSWORD}; "
            "forgotten: `python -m annotation set-admin-password` on the server chooses a new one)"
        )
    return open_admin_session(db, now=now)


def _configured_password(
    environ: Mapping[str, str], password_file: str | Path | None
) -> tuple[str | None, str]:
    if environ.get(ENV_PASSWORD):
        return environ[ENV_PASSWORD], "env"
    path = environ.get(ENV_PASSWORD_FILE) or password_file
    if path and Path(path).is_file():
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        if lines and lines[0].strip():
            return lines[0].strip(), "file"
    return None, ""


def _stored_hash(db: sqlite_utils.Database) -> str | None:
    return read_setting(db, ADMIN_PASSWORD_SETTING)


def _announcement(password: str, db_path: str) -> str:
    return "\n".join(
        [
            "",
            "=" * 72,
            "  ColorConcept Lab: no admin password was set, so one was generated.",
            f"  Admin password (shown only this once): {password}",
            "  Sign in on the Start tab with it. To choose your own instead, set",
            f"  {ENV_PASSWORD}=... (or {ENV_PASSWORD_FILE}=path/to/file) and restart,",
            "  or run (from any folder, with this app's own Python):",
            f"  cd {shlex.quote(str(PROJECT_ROOT))} && {shlex.quote(sys.executable)} -m annotation \\",
            f"      --db {shlex.quote(db_path)} set-admin-password",
            "=" * 72,
            "",
        ]
    )
