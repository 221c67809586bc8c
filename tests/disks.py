"""Small disks for tests of a full disk: a tmpfs of a given size mounted in a test's folder."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(folder: Path, size: int | str, *, lazy: bool = False) -> Iterator[Path]:
    """A tmpfs of `size` (bytes, or mount's ``24m``) mounted at `folder` (made here), unmounted
    after; skips the test where mounting is not allowed (it needs root). `lazy` unmounts
    even while this process still holds files there (a server's threads, a lock file)."""
    folder.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", *(["--lazy"] if lazy else []), str(folder)], check=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the disk of `folder` with one file, leaving about `leave` bytes free (none: written
    until the disk refuses); return the file."""
    filler = folder / "filler"
    if leave:
        with open(filler, "wb") as out:
            stat = os.statvfs(folder)
            os.posix_fallocate(out.fileno(), 0, stat.f_bavail * stat.f_frsize - leave)
        return filler
    with contextlib.suppress(OSError), open(filler, "wb") as out:  # closing it may fail too
        while True:
            out.write(b"\0" * 4096)
            out.flush()
    return filler


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder`, a mount point (`tmpfs`), remounted read-only for the block: even root may
    write nothing there (file modes do not stop root)."""
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
