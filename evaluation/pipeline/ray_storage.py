"""The run folder as a local path or a URI (``s3://``, ``gs://``, ``file://``...), for Ray workers.

A run's stages write and read item files relative to a data folder (`evaluation.pipeline.stages`).
On one machine or a shared file system that folder is a path; on a cluster without one it
may be an object store, named by a URI that `pyarrow.fs.FileSystem.from_uri` understands.
Writes are whole-file: locally a temporary name and an atomic rename
(`evaluation.pipeline.fileio.write_atomic`); on an object store one PUT, which makes the object
appear whole or not at all. Credentials come from the environment, as pyarrow reads them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from evaluation.pipeline.fileio import remove_temporaries, write_atomic
from storage.files import file_in_the_way

Location = str | Path


def is_uri(location: Location) -> bool:
    """Whether `location` is a URI (``scheme://...``) rather than a local path."""
    return isinstance(location, str) and "://" in location


def refuse_file_in_the_way(location: Location) -> None:
    """Refuse a ``--data-dir`` that is, or lies under, a plain file (every evaluation command,
    before it reads or writes: one met the OS's "Not a directory" in the middle of its work,
    another found every image missing). A URI is not checked.

    Raises
    ------
    ValueError
        Naming ``--data-dir`` and the file.
    """
    if not is_uri(location) and (in_the_way := file_in_the_way(location)):
        raise ValueError(f"--data-dir {str(location)!r} {in_the_way}; give a folder")


def location(value: Location) -> Location:
    """A data folder as given: a URI stays a string (a Path would fold its ``//``), a path becomes a Path."""
    return value if is_uri(value) else Path(value)


@functools.lru_cache(maxsize=16)
def _filesystem(uri: str):
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as exc:
        raise ValueError(f"`data_dir` {uri!r} is not a URI pyarrow can open: {exc}") from None


def write_file(folder: Location, relative: str, data: bytes) -> None:
    """Write `data` to `folder`/`relative` whole (see the module docstring)."""
    if not is_uri(folder):
        write_atomic(Path(folder) / relative, data)
        return
    from pyarrow import fs

    filesystem, root = _filesystem(folder)
    path = f"{root.rstrip('/')}/{relative}"
    if isinstance(filesystem, fs.LocalFileSystem):
        write_atomic(path, data)
        return
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as stream:
        stream.write(data)


def read_file(folder: Location, relative: str) -> bytes:
    """The bytes of `folder`/`relative`."""
    if not is_uri(folder):
        return (Path(folder) / relative).read_bytes()
    filesystem, root = _filesystem(folder)
    with filesystem.open_input_stream(f"{root.rstrip('/')}/{relative}") as stream:
        return stream.read()


def remove_run_temporaries(folder: Location, run: str) -> None:
    """Remove the temporaries a killed local write left in the run's folder (object stores have none)."""
    if not is_uri(folder):
        remove_temporaries(Path(folder) / "runs" / run)
        return
    from pyarrow import fs

    filesystem, root = _filesystem(folder)
    if isinstance(filesystem, fs.LocalFileSystem):
        remove_temporaries(os.path.join(root, "runs", run))
