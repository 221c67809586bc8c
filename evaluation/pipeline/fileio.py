"""Crash-safe file writes, shared by the runs, imports, exports and the annotation store."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder, fsync, and a rename.

    A reader (or a process restarted after a crash) sees either no file or the whole
    file, never a partial one; the temporary file is removed if the write fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_temporaries(folder: str | Path) -> list[Path]:
    """Delete the temporary files that a killed `write_atomic` left under `folder`.

    Call it only where no other process writes into `folder` at the same time (a run
    is processed by one process). Returns the paths removed.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [p for p in folder.rglob(".*.tmp") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
