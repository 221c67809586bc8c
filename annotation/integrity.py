"""The data folder against the database: files no row names, and moving them aside.

Writers store a file first (content-hash name, written to a temporary name and renamed
into place) and commit the row that names it afterwards (`annotation.files`,
`annotation.coloring.store`, `evaluation.pipeline.stages`). A process killed between the two leaves a
complete file that no row names, an *orphan*; one killed during the write leaves a
temporary file. Neither is ever read, but both make the data folder disagree with the
database (exports, disk use, audits). `sweep_orphans` moves them into ``orphans/`` at
start-up, when no writer runs.

Which files are checked, and which a database names: `storage.data_folder`.

The databases kept beside the live one are ways back to an earlier state: the one a
restore replaced (``<name>.before-restore-<time>``, `annotation.backup`) and the one
before a schema upgrade (``<name>.before-schema-<version>-<time>``, `storage.schema`).
Files that only such a copy names (work stored after the backup that was restored) are
referenced too, so moving the copy back into place finds its images where it left them.
A kept copy that cannot be read as a database might name any file: then nothing is swept
at that start, and a warning names the copy.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import time
from pathlib import Path

import sqlite_utils

from storage import audit, transaction
from storage.data_folder import (
    QUARANTINE,
    UnreadableCopy,
    managed_files,
    named_by_any_copy,
    referenced_paths,
)
from storage.shown import shown

_LOG = logging.getLogger(__name__)


def orphaned_files(db: sqlite_utils.Database, data_dir: str | Path, *, min_age_s: float = 0.0) -> list[str]:
    """Content-hash and temporary files under `data_dir` that no row names, neither of `db`
    nor of a database kept beside it (`kept_copies`).

    Parameters
    ----------
    db : sqlite_utils.Database
        The database whose rows name the files; the copies kept beside its file (none for
        a database in memory) are read too, read-only.
    data_dir : str or Path
        The app's data folder (a missing folder has no orphans).
    min_age_s : float
        Ignore files modified less than this many seconds ago (>= 0): with a margin
        longer than any write transaction the check is safe while writers run.

    Returns
    -------
    list of str
        Relative POSIX paths, sorted; empty, with a warning logged that names the file,
        when a kept copy cannot be read as a database (it might name any of them).
    """
    if not isinstance(min_age_s, (int, float)) or not min_age_s >= 0:
        raise ValueError(f"`min_age_s` must be a number >= 0, got {shown(min_age_s)}")
    root = Path(data_dir)
    if not root.is_dir():
        return []
    newest = time.time() - min_age_s
    candidates = [path for path in managed_files(root) if _mtime(path) <= newest]
    # Read the references after listing: a row committed meanwhile then still counts.
    try:
        referenced = named_by_any_copy(db)
    except UnreadableCopy as unreadable:
        _LOG.warning(
            "%s, a database kept beside the database, cannot be read (%s): files only it names "
            "would look unnamed, so no file was moved to %s/ at this start; if it is no longer "
            "a way back, move it away from beside the database",
            unreadable.path,
            unreadable.error,
            QUARANTINE,
        )
        return []
    return sorted(
        relative
        for relative in (p.relative_to(root).as_posix() for p in candidates)
        if relative not in referenced
    )


def discard_unnamed(db: sqlite_utils.Database, data_dir: str | Path, paths) -> list[str]:
    """Delete those of `paths` (relative to `data_dir`) that no row names.

    For a writer whose transaction was refused after it stored its files: two submissions
    of one task at the same moment both pass the checks made before writing, and the
    second is refused inside the transaction. A content-hash file another row names (the
    same bytes stored for an accepted coloring) is kept.

    Returns
    -------
    list of str
        The relative paths deleted.
    """
    named = referenced_paths(db)
    gone = []
    for relative in dict.fromkeys(paths):
        if relative not in named:
            (Path(data_dir) / relative).unlink(missing_ok=True)
            gone.append(relative)
    return gone


def sweep_orphans(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    *,
    actor: str = "system",
    min_age_s: float = 0.0,
    now: dt.datetime | None = None,
) -> list[str]:
    """Move every orphaned file into ``<data_dir>/orphans/`` and record it in the audit.

    Call it at start-up, before the app serves (or with a `min_age_s` margin). Nothing is
    deleted: a file moved by mistake can be moved back, and its path under ``orphans/``
    is its old relative path. A file that a database kept beside `db`'s file names
    (`kept_copies`: the way back from a restore or a schema upgrade) stays in place.

    Returns
    -------
    list of str
        The relative paths moved (as they were before the move), sorted; empty when the
        folder was consistent, or when a kept copy could not be read (`orphaned_files`
        logs a warning naming it); then nothing is written.
    """
    orphans = orphaned_files(db, data_dir, min_age_s=min_age_s)
    if not orphans:
        return []
    root = Path(data_dir)
    for relative in orphans:
        target = root / QUARANTINE / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(root / relative, target)
    with transaction(db):
        audit.record(
            db,
            actor,
            "sweep_orphans",
            "data_dir",
            None,
            "files that no row names (a writer stopped before its commit)",
            details={"n": len(orphans), "paths": orphans[:100]},
            now=now,
        )
    return orphans


def _mtime(path: Path) -> float:
    """Modification time; +inf for a file gone since it was listed (a writer renamed its
    temporary file meanwhile) or a dangling link, so neither counts as old enough."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return math.inf
