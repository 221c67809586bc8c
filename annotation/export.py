"""Export: every table as CSV and Parquet, and the image files in a zip with a manifest.

Layout of an export folder::

    csv/<table>.csv          one file per table, header row, NULL as empty field; each UW-71
                             bin column (`DOMINANT_COLUMNS`) is followed by ``<column>_name``
                             (ISCC-NBS level 3) and ``<column>_basic`` (basic color term)
    parquet/<table>.parquet  the same rows with their SQLite types (no name columns)
    uw71_names.csv           the 71 bins: color_index, hex, ISCC-NBS level 3 and level 1
                             names, basic term (`evaluation.color.naming.names_of_uw71`), to
                             read the ``p`` vectors of the distribution tables by
    images.zip               every file a row names (columns ``path`` / ``*_path``), under
                             its data-folder path, plus ``manifest.csv``: table, row_id,
                             column, path, sha256 (stored), status (``ok``, ``missing`` or
                             ``sha256_mismatch``)

Every CSV is written by `storage.spreadsheet` (text that a spreadsheet would run as a
formula gets a leading ``'``); the Parquet files keep the raw values.

All tables are read in one read transaction, so the export is one consistent snapshot
even while people keep working. Secrets stay out: the ``settings`` table (admin password
hash), the ``token_hash`` columns of ``invites`` and ``sessions`` and ``sessions.invite_hash``
(the token hash of the invite a session was opened with) are not exported.
``coloring_samples`` (binary pixel samples derived from the exported images, rebuilt by
``python -m annotation check-distributions --repair``) is left out too; the stored human
distributions are in ``human_distributions``.

Personal data of crowd participants (docs/security.md) stays out unless asked for: the
``crowd_participants`` table is exported without its `PERSONAL_COLUMNS` (the platform's
participant, study and session ids and the client address), and the ``audit`` rows of
failed sign-ins, which are kept on the client's address, show `WITHHELD` in its place. With ``external_ids=True``
the export adds ``crowd_external_ids`` (`annotation.study.crowd.external_ids`: pseudonym,
link, platform ids, status), the one table that names them.

`BackgroundExport` builds `export_archive` on its own thread with its own connection, one
at a time, so the app's request only starts it and later polls for the zip.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import sqlite_utils

from annotation.errors import AnnotationError, Conflict, InvalidInput
from annotation.files import resolve
from evaluation.color.naming import DOMINANT_COLUMNS, names_of_uw71, with_bin_names
from storage import serving, storage_condition
from storage.shown import shown_path
from storage.spreadsheet import csv_text, write_csv

SKIPPED_TABLES = ("settings", "coloring_samples")
SECRET_COLUMNS = ("token_hash", "invite_hash")
PERSONAL_COLUMNS = {
    "crowd_participants": ("external_id", "platform_study_id", "platform_session_id", "address")
}
PERSONAL_OBJECT_TYPE = "address"
WITHHELD = "withheld"
"""The ``object_id`` an exported audit row shows in place of a client address (the audit
rows whose ``object_type`` is `PERSONAL_OBJECT_TYPE`: failed sign-ins)."""
EXTERNAL_IDS_TABLE = "crowd_external_ids"
MANIFEST_COLUMNS = ["table", "row_id", "column", "path", "sha256", "status"]
_LOG = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: an export reports each step ("tables", "images",
"archive") with how much of it is done."""


def _silent(step: str, done: int, total: int) -> None:
    """The `Progress` that reports nowhere."""


class WriteFailed(InvalidInput):
    """An export or backup could not be written (a full disk, a read-only folder); nothing
    of it was left behind. The message names the folder and the reason."""


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: rows per table, the tables' references to files per status
    (``ok``, ``missing``, ``sha256_mismatch``) and the files in ``images.zip`` (a file that
    several rows name is in it once)."""

    folder: Path
    rows: dict[str, int]
    images: dict[str, int]
    files: int = 0


def export(
    db: sqlite_utils.Database, data_dir: str | Path, folder: str | Path, *, external_ids: bool = False
) -> ExportSummary:
    """Write the export of `db` (and the files under `data_dir` it names) to `folder`.

    Parameters
    ----------
    folder : str or Path
        A folder that does not exist yet or is empty. The export is assembled next to it
        and renamed into place, so `folder` never holds half an export.
    external_ids : bool
        Add the table ``crowd_external_ids`` (personal data); without it no platform id
        of a crowd participant is written anywhere.

    Raises
    ------
    InvalidInput
        If `folder` exists and is not an empty folder.
    WriteFailed
        If writing fails (a full disk); nothing is left behind.
    """
    folder = Path(folder)
    with reported_write_errors(folder, "export"):
        return _export(db, data_dir, folder, external_ids=external_ids)


def _export(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    folder: Path,
    progress: Progress = _silent,
    *,
    external_ids: bool = False,
) -> ExportSummary:
    with staged_folder(folder, "export") as staging:
        with _snapshot(db):
            names = [name for name in db.table_names() if name not in SKIPPED_TABLES]
            tables = {}
            for name in names:
                progress("tables", len(tables), 2 * len(names))
                tables[name] = _table_frame(db, name)
            if external_ids and "crowd_participants" in tables:
                from annotation.study.crowd import external_ids as crowd_external_ids

                tables[EXTERNAL_IDS_TABLE] = crowd_external_ids(db)
                names.append(EXTERNAL_IDS_TABLE)
        rows = {}
        for name, frame in tables.items():
            progress("tables", len(names) + len(rows), 2 * len(names))
            rows[name] = _write_table(frame, staging, name)
        images = _write_images(tables, Path(data_dir), staging / "images.zip", progress)
        with zipfile.ZipFile(staging / "images.zip") as archive:
            files = len(archive.namelist()) - 1  # its manifest.csv aside
        write_csv(names_of_uw71().drop(columns="delta_e"), staging / "uw71_names.csv", index=False)
    return ExportSummary(folder, rows, images, files)


@contextlib.contextmanager
def staged_folder(folder: Path, what: str, *, refusal: type[InvalidInput] = InvalidInput) -> Iterator[Path]:
    """A hidden folder beside `folder` to assemble `what` in, renamed to `folder` at the end.

    `folder` never holds half of it: the block writes into the staging folder, which is
    removed if the block raises.

    Parameters
    ----------
    folder : Path
        A new or empty folder.
    what : str
        What is written (``"export"``, ``"backup"``), for the message.
    refusal : type
        The `InvalidInput` class raised for a folder that holds files.

    Raises
    ------
    InvalidInput
        (`refusal`) If `folder` exists and is not an empty folder.
    """
    if folder.exists() and not folder.is_dir():
        raise refusal(f"{what} folder must be new or empty, got {shown_path(folder)}, which is a file")
    if folder.exists() and any(folder.iterdir()):
        raise refusal(
            f"{what} folder must be new or empty, got {shown_path(folder)} which already holds files"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale_staging(folder)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f"{_staging_prefix(folder)}{os.getpid()}-"))
    try:
        yield staging
        if folder.exists():
            folder.rmdir()
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _staging_prefix(folder: Path) -> str:
    """The start of `staged_folder`'s staging names for `folder`; the writer's host and process
    id follow, so a later run knows a staging folder whose writer is gone."""
    return f".{folder.name}-partial-{_host_in_names()}-"


def _host_in_names() -> str:
    """This host's name as staging names carry it (made safe for a file name)."""
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:64]


def _sweep_stale_staging(folder: Path) -> None:
    """Remove the staging folders beside `folder` left by a writer of this host that is gone
    (a SIGKILL, a power cut): they hold a half-written copy of the study (a backup's holds
    every hash), and nothing else would ever remove them (outside probe 150)."""
    for stale in folder.parent.glob(f"{glob.escape(_staging_prefix(folder))}*"):
        if _writer_gone(stale):
            shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def archive_workspace(archive: Path) -> Iterator[Path]:
    """A temporary folder beside `archive` to build it in, named for this process as a
    staging folder is, so that what a kill leaves there (a whole export or backup, a
    half-made zip) is removed once the process is gone: by the next archive beside it
    (swept first here) or the app's start (`remove_gone_staging`)."""
    _sweep_stale_staging(archive)
    prefix = f"{_staging_prefix(archive)}{os.getpid()}-"
    with tempfile.TemporaryDirectory(dir=archive.parent, prefix=prefix) as temp:
        yield Path(temp)


_STAGING_NAME = re.compile(r"\..+-partial-(?P<host>\w+)-(?P<pid>\d+)-[^-]*")
"""A staging folder's name (`_staging_prefix`, then `tempfile`'s random part)."""


def _writer_gone(staging: Path) -> bool:
    """Whether `staging` is a staging folder whose writer, a process of this host, is gone."""
    found = _STAGING_NAME.fullmatch(staging.name)
    return (
        found is not None
        and found["host"] == _host_in_names()
        and serving.gone_here(socket.gethostname(), found["pid"])
        and staging.is_dir()
        and not staging.is_symlink()
    )


def remove_gone_staging(root: str | Path, *, depth: int = 0) -> list[Path]:
    """Remove the staging folders of exports and backups (`staged_folder`, `export_archive`)
    in `root` or up to `depth` folders below it whose writer, a process of this host, is gone
    (a SIGKILL, a power cut), then each folder between one and `root` that holds nothing else.

    A killed export of the app left its half-written copy of the study (every table) among
    the admin's downloads, one more per kill, until the download's hourly clean-up: the next
    export writes into a new folder, so `staged_folder`'s own sweep never saw it. A writer
    still at work (another app on the same data folder) keeps its folder, and so does one of
    another host, which cannot be asked.

    Parameters
    ----------
    root : str or Path
        The folder swept (the app's ``downloads/exports/``); it stays, even when emptied.
    depth : int
        How many folders deep below `root` a staging folder may lie (the app's exports: 2,
        ``<random>/<temporary folder>/``).

    Returns
    -------
    list of Path
        The staging folders removed.
    """
    root = Path(root)
    removed = []
    for level in range(depth + 1):
        for stale in root.glob("*/" * level + ".*-partial-*"):
            if not _writer_gone(stale):
                continue
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
            # Its temporary and download folders were made by the same writer for it alone.
            for parent in stale.parents[:level]:
                with contextlib.suppress(OSError):
                    parent.rmdir()  # only if empty
    return removed


@contextlib.contextmanager
def reported_write_errors(folder: Path, what: str) -> Iterator[None]:
    """Turn a failed write of `what` into `folder` (a full disk) into one `WriteFailed` line.

    The block must leave nothing partial behind when it raises (`staged_folder`).

    Raises
    ------
    WriteFailed
        For an `OSError` or an `sqlite3.Error` (``VACUUM INTO`` on a full disk says
        "database or disk is full") raised in the block, naming `folder` and the reason.
    """
    try:
        yield
    except (OSError, sqlite3.Error) as error:
        # SQLite says "database or disk is full" of the copy it writes: the database is untouched.
        raise WriteFailed(
            write_refusal(error, f"could not write the {what} to {str(folder)!r}", "nothing was left there")
        ) from error


def write_refusal(
    error: OSError | sqlite3.Error, failed: str, consequence: str, again: str = "try again"
) -> str:
    """One line for a write that raised `error`: `failed` (what could not be written where),
    the cause (a full disk in those words, else the system's reason), `consequence` (what
    was left as it was), and on a full disk what to do, ending with `again`."""
    full = storage_condition(error) == "full"
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return f"{failed}: {'its disk is full' if full else reason}; {consequence}" + (
        f"; free some space on that disk and {again}" if full else ""
    )


def export_archive(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    archive: str | Path,
    *,
    progress: Progress = _silent,
    external_ids: bool = False,
    counts: dict[str, int] | None = None,
) -> Path:
    """Write the export as one zip file `archive` (for a download button); returns it.

    Parameters
    ----------
    progress : callable, optional
        Called as ``progress(step, done, total)`` as the export goes (`Progress`).
    external_ids : bool
        Add the crowd participants' platform ids (`export`).
    counts : dict, optional
        Filled with the image files per status (``ok``, ``missing``, ``sha256_mismatch``:
        `ExportSummary.images`), for the caller to say what the zip lacks.
    """
    archive = Path(archive)
    with reported_write_errors(archive.parent, "export"):
        archive.parent.mkdir(parents=True, exist_ok=True)
        with archive_workspace(archive) as temp:
            summary = _export(db, data_dir, Path(temp) / "export", progress, external_ids=external_ids)
            if counts is not None:
                counts.update(summary.images)
            progress("archive", 0, 1)
            built = shutil.make_archive(str(Path(temp) / "archive"), "zip", summary.folder)
            os.replace(built, archive)
            progress("archive", 1, 1)
    return archive


class ExportRunning(Conflict):
    """An export is already being built; one runs at a time."""


class ExportFailed(AnnotationError):
    """A background export ended without its zip; the message says why."""


@dataclass(frozen=True)
class ExportState:
    """Where the background export stands (`BackgroundExport.state`).

    Attributes
    ----------
    status : str
        ``"idle"`` (none started), ``"running"``, ``"done"`` or ``"failed"``.
    started : str or None
        When the latest export started (`storage.iso` text).
    step : str
        The step running: ``"tables"``, ``"images"`` or ``"archive"`` ("" before the first).
    fraction : float
        Share of the export done, in [0, 1] (an estimate: tables count 10 %, the image
        files 70 %, zipping the whole 20 %).
    archive : Path or None
        The finished zip, once ``done``.
    error : str or None
        Why it failed, once ``failed`` (a message for the admin, no traceback).
    external_ids : bool
        Whether it holds the crowd participants' platform ids (personal data).
    images : dict
        Its image files per status once ``done`` (`ExportSummary.images`): a ``missing``
        or ``sha256_mismatch`` count is a file the zip lacks, which the page says.
    """

    status: str = "idle"
    started: str | None = None
    step: str = ""
    fraction: float = 0.0
    archive: Path | None = None
    error: str | None = None
    external_ids: bool = False
    images: dict[str, int] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        """Whether an export is being built now."""
        return self.status == "running"


# Each step's share of the whole, in order: what `ExportState.fraction` adds up.
_STEP_SHARES = {"tables": (0.0, 0.1), "images": (0.1, 0.7), "archive": (0.8, 0.2)}
UNEXPECTED_FAILURE = "the export failed unexpectedly ({kind}); it has been logged"


class BackgroundExport:
    """Builds `export_archive` on a thread of its own, one export at a time.

    Parameters
    ----------
    connect : callable
        ``connect()`` is a context manager giving the export thread its own connection
        (a connection belongs to one thread), e.g. `app.common.AppContext.db`.
    data_dir : str or Path
        The data folder the rows' files are under.
    target : callable
        ``target(now)``: where the zip of an export started at `now` goes (the app's: a new
        folder among the admin's downloads, `app.guard.download_path`).
    build : callable
        ``build(db, data_dir, archive, progress=..., external_ids=...)``, default
        `export_archive` (tests pass one that waits).

    Notes
    -----
    The state lives in this object (one per app), not in the database: an export that
    the app's end interrupts leaves no zip, and the admin starts another.
    """

    def __init__(
        self,
        connect: Callable[[], contextlib.AbstractContextManager[sqlite_utils.Database]],
        data_dir: str | Path,
        *,
        target: Callable[[str], Path],
        build: Callable[..., Path] = export_archive,
    ):
        self._connect = connect
        self._data_dir = Path(data_dir)
        self._target = target
        self._build = build
        self._lock = threading.Lock()
        self._state = ExportState()
        self._thread: threading.Thread | None = None

    def state(self) -> ExportState:
        """Where the latest export stands."""
        with self._lock:
            return self._state

    def start(self, *, now: str, external_ids: bool = False) -> ExportState:
        """Start an export now; returns at once with its state (``running``).

        Parameters
        ----------
        now : str
            The start time (`storage.iso` text): it names the zip and is shown.
        external_ids : bool
            Add the crowd participants' platform ids (`export`).

        Raises
        ------
        ExportRunning
            If an export is being built; nothing is started.
        """
        with self._lock:
            if self._state.running:
                raise ExportRunning(
                    f"an export is already being built (started {self._state.started}, "
                    f"{self._state.fraction:.0%} done); its file shows here when it is ready"
                )
            self._state = ExportState("running", now, external_ids=bool(external_ids))
            self._thread = threading.Thread(
                target=self._run, args=(now, bool(external_ids)), name="export", daemon=True
            )
            self._thread.start()
            return self._state

    def wait(self, timeout: float | None = None) -> ExportState:
        """Wait until the export running (if any) ends, at most `timeout` seconds; its state."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.state()

    def _progress(self, step: str, done: int, total: int) -> None:
        first, share = _STEP_SHARES.get(step, (0.0, 0.0))
        fraction = first + share * (done / total if total else 1.0)
        with self._lock:
            self._state = replace(self._state, step=step, fraction=min(1.0, fraction))

    def _run(self, now: str, external_ids: bool) -> None:
        counts: dict[str, int] = {}
        try:
            with self._connect() as db:
                archive = self._build(
                    db,
                    self._data_dir,
                    self._target(now),
                    progress=self._progress,
                    external_ids=external_ids,
                    counts=counts,
                )
        except AnnotationError as error:
            self._finish(error=str(error))
        except Exception as error:  # the thread is the last place to catch it: log, then say
            _LOG.exception("the background export failed")
            self._finish(error=UNEXPECTED_FAILURE.format(kind=type(error).__name__))
        else:
            self._finish(archive=Path(archive), images=counts)

    def _finish(
        self, *, archive: Path | None = None, error: str | None = None, images: dict[str, int] | None = None
    ) -> None:
        with self._lock:
            status = "failed" if error is not None else "done"
            fraction = 1.0 if error is None else self._state.fraction
            self._state = replace(
                self._state,
                status=status,
                fraction=fraction,
                archive=archive,
                error=error,
                images=images or {},
            )


@contextlib.contextmanager
def _snapshot(db: sqlite_utils.Database) -> Iterator[None]:
    if db.conn.in_transaction:
        yield
        return
    db.conn.execute("BEGIN")
    try:
        yield
    finally:
        db.conn.execute("COMMIT")


def _table_frame(db: sqlite_utils.Database, name: str) -> pd.DataFrame:
    frame = pd.read_sql_query(f'select * from "{name}"', db.conn, dtype_backend="numpy_nullable")
    left_out = (*SECRET_COLUMNS, *PERSONAL_COLUMNS.get(name, ()))
    frame = frame.drop(columns=[c for c in left_out if c in frame.columns])
    if name == "audit":
        # A failed sign-in is recorded on the client's address (the throttle counts by it).
        frame.loc[frame["object_type"] == PERSONAL_OBJECT_TYPE, "object_id"] = WITHHELD
    return frame


def _write_table(frame: pd.DataFrame, folder: Path, name: str) -> int:
    (folder / "csv").mkdir(exist_ok=True)
    (folder / "parquet").mkdir(exist_ok=True)
    named = with_bin_names(frame, [c for c in DOMINANT_COLUMNS if c in frame.columns])
    write_csv(named, folder / "csv" / f"{name}.csv", index=False)
    frame.to_parquet(folder / "parquet" / f"{name}.parquet", index=False)
    return len(frame)


def file_columns(columns) -> list[tuple[str, str | None]]:
    """``(path column, sha256 column or None)`` pairs among a table's `columns`, by the
    naming convention: a column ``path`` or ``*_path`` names a file under the data folder,
    and ``sha256`` / ``*_sha256`` beside it holds its hash."""
    columns = list(columns)
    pairs = []
    for column in columns:
        if column == "path" or column.endswith("_path"):
            sha = "sha256" if column == "path" else column[: -len("path")] + "sha256"
            pairs.append((column, sha if sha in columns else None))
    return pairs


def _write_images(
    tables: dict[str, pd.DataFrame], data_dir: Path, target: Path, progress: Progress = _silent
) -> dict[str, int]:
    manifest, written = [], set()
    files = [
        (name, column, sha_column)
        for name, frame in tables.items()
        for column, sha_column in file_columns(frame.columns)
    ]
    total = sum(int(tables[name][column].notna().sum()) for name, column, _ in files)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, column, sha_column in files:
            frame = tables[name]
            key = frame.columns[0]
            for _, row in frame[frame[column].notna()].iterrows():
                if len(manifest) % 100 == 0:
                    progress("images", len(manifest), total)
                expected = row[sha_column] if sha_column else None
                expected = None if pd.isna(expected) else expected  # a row may lack its hash
                status = _add_file(archive, data_dir, row[column], expected, written)
                manifest.append([name, row[key], column, row[column], expected, status])
        archive.writestr(
            "manifest.csv", csv_text(pd.DataFrame(manifest, columns=MANIFEST_COLUMNS), index=False)
        )
    counts: dict[str, int] = {}
    for entry in manifest:
        counts[entry[-1]] = counts.get(entry[-1], 0) + 1
    return counts


def _add_file(
    archive: zipfile.ZipFile, data_dir: Path, relative: str, expected: str | None, written: set[str]
) -> str:
    path = resolve(data_dir, relative)
    if not path.is_file():
        return "missing"
    data = path.read_bytes()
    if expected and hashlib.sha256(data).hexdigest() != expected:
        return "sha256_mismatch"
    if relative not in written:
        archive.writestr(relative, data)
        written.add(relative)
    return "ok"
