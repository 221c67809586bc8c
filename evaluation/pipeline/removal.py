"""Deleting a run: its rows, then the files under its folder that nothing names any more.

A run started by mistake could not be taken back: one Start at the form's maximum stored
1,000,000 item rows (the database grew from 2 MB to 254 MB: outside probe 234). `delete_rows`
removes the run whole, in the caller's transaction: its ``runs`` row, items, model
distributions (which bumps the research views' change counter), scores against every
human source, and explicit prompts and verdicts. `delete_files` then removes the files under
``<data_dir>/runs/<run>/`` that no row names, neither of this database nor of a database
kept beside it (`storage.data_folder.named_by_any_copy`: the way back from a restore or a
schema upgrade keeps its images); folders left empty go too.

Refused (`RunError`, nothing written): an unknown run; a run whose job runs, in this process
or another, or is queued (`refuse_deletion`, with the caller's ``busy``); a run whose
distributions and images a study shows (copied when it was set up, its images by path).
Audit rows about the run stay: they are the history of who started, cancelled and deleted it.

Choices (the paper is silent): the rows go in one transaction, so a run is never half
deleted; files go after the commit (a file removed before a rollback could not come back),
and a file that could not be removed is left for the start-up sweep
(`annotation.integrity.sweep_orphans`), which moves unnamed files to ``orphans/``. A data
folder given as a URI (an object store) keeps the run's files: they are listed for the
store's own tools, as a copy kept beside the database cannot be checked there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from evaluation.pipeline.ray_storage import Location, is_uri
from evaluation.pipeline.runs import (
    LEASE_S,
    RunError,
    delete_run_rows,
    job_elsewhere,
    run_config,
    run_created,
    run_row_counts,
    studies_showing,
)
from storage import transaction
from storage.data_folder import UnreadableCopy, named_by_any_copy
from storage.shown import counted, shown

_ROW_NOUNS = {
    "run_items": "item",
    "model_distributions": "distribution",
    "scores": "score row",
    "explicit_prompts": "explicit prompt",
    "explicit_results": "explicit verdict",
}


@dataclasses.dataclass(frozen=True)
class RunFootprint:
    """What a run holds: rows per table of `runs.RUN_TABLES` (``runs`` left out) and its files.

    ``files`` and ``bytes`` count the regular files under ``runs/<run>/`` (0 for a data
    folder given as a URI, whose files are not listed here).
    """

    run: str
    rows: dict[str, int]
    files: int
    bytes: int
    created: str = ""
    """When the run was stored: a second press deletes this run, not a later one of its name."""

    def sentence(self) -> str:
        """``'1,000,000 items, 2 distributions and 12 files (3.4 MB)'``."""
        return f"{rows_sentence(self.rows)} and {counted(self.files, 'file')} ({_size(self.bytes)})"


@dataclasses.dataclass(frozen=True)
class FilesRemoved:
    """What `delete_files` did: files removed and their size, files kept because a
    database kept beside this one names them, and files it could not remove."""

    removed: int = 0
    bytes: int = 0
    kept: int = 0
    failed: tuple[str, ...] = ()
    left_at: str = ""
    """The run's folder on an object store, whose files were left (see the module docstring)."""

    def sentence(self) -> str:
        """What happened to the run's files, for a person."""
        if self.left_at:
            return f"its files at {self.left_at} were left: delete them with the object store's own tools"
        said = f"{counted(self.removed, 'file')} ({_size(self.bytes)}) deleted"
        if self.kept:
            said += (
                f"; {counted(self.kept, 'file')} kept, named by a database kept beside this one "
                "(the way back from a restore or an upgrade)"
            )
        if self.failed:
            said += (
                f"; {counted(len(self.failed), 'file')} could not be deleted (the next start "
                f"moves {'it' if len(self.failed) == 1 else 'them'} to orphans/): {', '.join(self.failed[:3])}"
            )
        return said


def rows_sentence(rows: dict[str, int]) -> str:
    """Rows per table of `runs.RUN_TABLES` in words, tables with none left out (``runs`` too)."""
    parts = [counted(rows[table], noun) for table, noun in _ROW_NOUNS.items() if rows.get(table)]
    return ", ".join(parts) or "no items"


def run_folder(data_dir: Location, run: str) -> Path:
    """The local folder of run `run` under `data_dir`: ``runs/<run>/`` (the name is checked:
    one path component, as `evaluation.pipeline.runs.check_run_name` allows)."""
    if not run or run in (".", "..") or "/" in run or "\\" in run or "\0" in run:
        raise RunError(f"`run` must be a run's name, got {shown(run)}")
    return Path(data_dir) / "runs" / run


def footprint(db: sqlite_utils.Database, run: str, data_dir: Location) -> RunFootprint:
    """The rows and files run `run` holds; raises `RunError` for an unknown run."""
    run_config(db, run)
    created = run_created(db, run) or ""
    rows = {table: n for table, n in run_row_counts(db, run).items() if table != "runs"}
    files = size = 0
    if not is_uri(data_dir):
        for path in _files_under(run_folder(data_dir, run)):
            files += 1
            size += path.lstat().st_size
    return RunFootprint(run, rows, files, size, created)


def refuse_deletion(
    db: sqlite_utils.Database, run: str, *, busy: str = "", created: str | None = None
) -> None:
    """Raise `RunError` unless run `run` may be deleted now.

    Parameters
    ----------
    db : sqlite_utils.Database
        The run database.
    run : str
        The run's name.
    busy : str
        The caller's own job state for the run when it is queued or running (an app's job
        manager): a job not yet started holds no lease, so only the caller knows of it.
    created : str, optional
        When the run the caller described was stored (`RunFootprint.created`): a run of that
        name stored since (the one described deleted meanwhile, another made) is refused.
    """
    run_config(db, run)  # an unknown run is named, with the known ones
    if created is not None and run_created(db, run) != created:
        raise RunError(
            f"run {run!r} is not the run described before: it was deleted and made again since "
            f"(stored {run_created(db, run)}); nothing deleted, press Delete run again to see what it holds"
        )
    if busy:
        raise RunError(f"run {run!r} is {busy} on this server: Cancel it, and delete it once it has stopped")
    if holder := job_elsewhere(db, run, owner=""):  # any live lease, this process's too
        other, age = holder
        raise RunError(
            f"run {run!r} has a job running in {other} (last heard from {age:.0f} s ago): stop it there "
            f"first, or, if that process has died, wait {max(1.0, LEASE_S - age):.0f} s"
        )
    studies = [f"{name!r} ({'opened' if is_open else 'draft'})" for name, is_open in studies_showing(db, run)]
    if studies:
        raise RunError(
            f"run {run!r} is shown in {'study' if len(studies) == 1 else 'studies'} {', '.join(studies)} (its "
            "distributions and images were copied there when the study was set up): a run a study shows is kept"
        )


def delete_rows(
    db: sqlite_utils.Database, run: str, *, busy: str = "", created: str | None = None
) -> dict[str, int]:
    """Delete every row of run `run` (`runs.RUN_TABLES`) after `refuse_deletion`; call it inside
    `storage.transaction` (the caller's audit row then commits with it).

    Returns
    -------
    dict of str to int
        Rows deleted per table.
    """
    if not db.conn.in_transaction:
        raise RuntimeError("delete_rows must run inside storage.transaction(db)")
    refuse_deletion(db, run, busy=busy, created=created)
    return delete_run_rows(db, run)


def delete_files(db: sqlite_utils.Database, run: str, data_dir: Location) -> FilesRemoved:
    """Remove the files under run `run`'s folder that no row names (call it after the rows
    are deleted and committed); folders left empty are removed as well.

    Nothing is removed while a database kept beside `db` cannot be read (it might name any
    of them): they are counted as kept.
    """
    if is_uri(data_dir):
        return FilesRemoved(left_at=f"{str(data_dir).rstrip('/')}/runs/{run}/")
    root, folder = Path(data_dir), run_folder(data_dir, run)
    files = list(_files_under(folder))
    try:
        named = named_by_any_copy(db)
    except UnreadableCopy:
        return FilesRemoved(kept=len(files))
    removed = size = kept = 0
    failed = []
    for path in files:
        relative = path.relative_to(root).as_posix()
        if relative in named:
            kept += 1
            continue
        try:
            length = path.lstat().st_size
            path.unlink()
        except OSError:
            failed.append(relative)
            continue
        removed, size = removed + 1, size + length
    for current, _, _ in sorted(os.walk(folder), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(OSError):  # not empty, or gone
            os.rmdir(current)
    return FilesRemoved(removed, size, kept, tuple(failed))


def audited(actor: str, run: str, **facts) -> Callable[[sqlite_utils.Database, dict[str, int]], None]:
    """The `delete_run` ``record`` that writes the deletion's audit row (`storage.audit`):
    ``delete_evaluation_run`` of run `run` by `actor`, with the rows deleted per table and
    `facts`."""
    from storage import audit

    def record(db: sqlite_utils.Database, rows: dict[str, int]) -> None:
        audit.record(db, actor, "delete_evaluation_run", "run", run, details={**rows, **facts})

    return record


def delete_run(
    db: sqlite_utils.Database,
    run: str,
    data_dir: Location,
    *,
    busy: str = "",
    created: str | None = None,
    record: Callable[[sqlite_utils.Database, dict[str, int]], None] | None = None,
) -> tuple[dict[str, int], FilesRemoved]:
    """Delete run `run`: its rows in one transaction (`delete_rows`, refused as
    `refuse_deletion` says, `busy` and `created` as there; `record` called inside it, e.g. to
    audit who deleted what), then its files (`delete_files`).

    Returns
    -------
    rows : dict of str to int
        Rows deleted per table.
    files : FilesRemoved
        What became of the files under its folder.
    """
    with transaction(db):
        rows = delete_rows(db, run, busy=busy, created=created)
        if record is not None:
            record(db, rows)
    return rows, delete_files(db, run, data_dir)


def _files_under(folder: Path):
    """Every file (links included, not followed) under `folder`; none for a missing folder."""
    for current, _, names in os.walk(folder):
        for name in names:
            yield Path(current) / name


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return counted(n, "byte")
