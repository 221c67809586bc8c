"""The one file store under both libraries: content-addressed files, PNG, guarded decoding.

Layout
------
A stored file is named after the sha256 of its bytes and sharded by the hash's first two
hex digits: ``<folder>/<sha[:2]>/<sha><suffix>``, e.g. ``colorings/ab/abcdef....png`` or
``runs/r/images/ab/abcdef....png`` (`content_path`). The same bytes always get the same
path, so a file is stored once and a row's ``sha256`` column names its file. Rows hold the
relative path as written, so a path of an older layout (a run's flat
``runs/r/images/<sha>.png``) still resolves (`resolve`); nothing rewrites stored rows.

Writes
------
`write_atomic` writes to a temporary name in the target folder, fsyncs and renames into
place: a reader, or a process restarted after a crash, sees no file or the whole file.
`remove_temporaries` removes what a killed write left. A file is written before the row
that names it is committed.

Reads
-----
`open_image` decodes an untrusted file with a byte cap (checked before reading a path)
and a pixel cap (checked from the header, before any pixel is decoded).

This module imports nothing of `annotation/` or `evaluation/`; its refusals are
`FileRefused` and `ImageRefused` (both `ValueError`), which a library may translate into
its own error classes.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image, UnidentifiedImageError

from storage.shown import shown, shown_path

MAX_PIXELS = 4096 * 4096
"""The most pixels `open_image` decodes: 4096 x 4096 (sketches and colorings are 1024 x 1024
or smaller, generated images 1024 x 1024)."""
MAX_BYTES = 32 * 1024 * 1024
"""The most bytes `open_image` reads: 32 MiB."""
IMAGE_FORMATS = frozenset({"PNG", "JPEG", "MPO", "WEBP"})
"""The formats `open_image` decodes, as Pillow names them (MPO: a JPEG with a second picture,
as cameras write), whatever the file's name."""
PNG_COMPRESS_LEVEL = 6
"""zlib level of every PNG written (Pillow's default): level 1 encodes a 1024² coloring in 8 ms
into 17 kB, level 6 in 12 ms into 5 kB, level 9 in 17 ms into 5 kB (bench/bench_designer.py notes)."""


Writer = Callable[[object, str, bytes], None]
"""``write(root, relative, data)``: puts `data` at `relative` under `root` whole."""


class FileRefused(ValueError):
    """A file, its content or its path is refused by the store."""


class ImageRefused(FileRefused):
    """A file is not a decodable image within the byte and pixel caps."""


@dataclass(frozen=True)
class StoredFile:
    """A stored file: `path` relative to the data folder (POSIX form) and its `sha256`."""

    path: str
    sha256: str


def leaves_archive(name: str) -> bool:
    """Whether a zip entry `name` would land outside the folder it is unpacked into: an
    absolute name, a ``..`` part, a backslash or a drive colon (zip names are ``/``-separated;
    the two last mean another system's path, refused rather than guessed)."""
    return name.startswith("/") or "\\" in name or ":" in name or ".." in PurePosixPath(name).parts


def _check_relative(relative: object) -> PurePosixPath:
    """`relative` as a POSIX path that cannot leave its root by its text alone."""
    if not isinstance(relative, str) or not relative.strip():
        raise FileRefused(f"file path must be a non-empty relative path, got {shown(relative)}")
    parts = PurePosixPath(relative.replace("\\", "/"))
    if parts.is_absolute() or ".." in parts.parts or ":" in relative:
        raise FileRefused(f"file path must stay inside the data folder, got {shown(relative)}")
    return parts


def resolve(data_dir: str | Path, relative: str) -> Path:
    """The absolute path of `relative` inside `data_dir`, refusing to leave it.

    Any stored path resolves, whatever layout wrote it.

    Raises
    ------
    FileRefused
        If `relative` is empty, absolute, contains ``..`` or ``:``, or resolves (through
        links) outside `data_dir`.
    """
    parts = _check_relative(relative)
    root = Path(data_dir).resolve()
    target = (root / parts).resolve()
    if not target.is_relative_to(root):
        raise FileRefused(f"file path must stay inside the data folder, got {shown(relative)}")
    return target


def is_stored(root: Path, relative: str) -> bool:
    """Whether the file `relative` is in the data folder whose resolved path is `root`.

    Checks the text as `resolve` does (`FileRefused`) but not where links lead: about 15
    times cheaper, for checking every file of a run (200,000 items at full size). A link
    out of the data folder counts as there; `resolve` refuses it when the file is read.
    """
    return os.path.isfile(os.path.join(root, _check_relative(relative)))


def content_path(data: bytes, *, folder: str, suffix: str) -> StoredFile:
    """Where the store keeps `data`: ``<folder>/<sha[:2]>/<sha><suffix>`` and the sha256.

    Parameters
    ----------
    data : bytes
        The file content; must not be empty.
    folder : str
        A relative folder, POSIX separators, no ``..``.
    suffix : str
        File name suffix with its dot, e.g. ``".png"``.

    Raises
    ------
    FileRefused
        If `data` is not non-empty bytes or `folder` would leave the data folder.
    """
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise FileRefused(
            f"`data` must be non-empty bytes, got {type(data).__name__} "
            f"of length {len(data) if hasattr(data, '__len__') else '?'}"
        )
    folder = _check_relative(str(folder)).as_posix()
    digest = hashlib.sha256(data).hexdigest()
    return StoredFile(f"{folder}/{digest[:2]}/{digest}{suffix}", digest)


def nearest_existing_folder(path: str | Path) -> Path:
    """`path` made absolute, or, while it does not exist yet, the nearest folder above it
    that does: where a probe (`unwritable_folder`) says whether it could be made and written."""
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def file_in_the_way(path: str | Path) -> str:
    """Why `path` cannot be a folder because of a plain file, or "": it is one ("is a plain
    file"), or one lies on its way ("lies under the plain file '…'")."""
    folder = nearest_existing_folder(path)
    if folder.is_dir():
        return ""
    if folder == Path(path).absolute():
        return "is a plain file, not a folder"
    return f"lies under the plain file {str(folder)!r}"


def unwritable_folder(folder: Path) -> str:
    """Why nothing can be written in the existing `folder` (the OS's reason), or "": a probe
    file is made in it and removed at once."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe.", suffix=".probe"):
            return ""
    except OSError as error:
        return str(error.strerror or error)


def check_out_folder(path: Path | None, option: str = "--out") -> None:
    """Refuse an output folder option that cannot be a folder, or that nothing can be written
    in, before anything is stored or computed (``score --out FILE`` said "File exists: FILE"
    after storing the reference CSV given with it). None (the default folder) passes.

    Raises
    ------
    ValueError
        Naming `option`, the path and why.
    """
    if path is None:
        return
    if why := file_in_the_way(path):
        raise ValueError(f"{option} {shown_path(path)} {why}; give a folder (new, or one to add to)")
    folder = nearest_existing_folder(path)
    if why := unwritable_folder(folder):
        raise ValueError(
            f"{option} {shown_path(path)}: nothing can be written in {shown_path(folder)} ({why})"
        )


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder, fsync, and a rename.

    A reader (or a process restarted after a crash) sees either no file or the whole
    file, never a partial one; the temporary file (``.<name>.*.tmp``) is removed if the
    write fails.
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


def _write_local(data_dir: str | Path, relative: str, data: bytes) -> None:
    target = resolve(data_dir, relative)
    if not target.exists():  # same name, same bytes: stored already
        write_atomic(target, data)


def put_bytes(
    data_dir: str | Path,
    data: bytes,
    *,
    folder: str = "images",
    suffix: str = ".png",
    write: Writer | None = None,
) -> StoredFile:
    """Store `data` under `data_dir` at its `content_path`.

    Parameters
    ----------
    data_dir : str or Path
        The data folder (or, with `write`, whatever root `write` understands, e.g. a URI).
    data : bytes
        The file content; must not be empty.
    folder : str
        A relative folder under `data_dir` (no ``..``).
    suffix : str
        File name suffix with its dot.
    write : callable, optional
        ``write(data_dir, relative, data)`` that puts the file whole (an object store's
        writer); by default a local `write_atomic`, skipped when the file exists.

    Returns
    -------
    StoredFile
        Storing the same bytes twice returns the same path and writes nothing new.

    Raises
    ------
    FileRefused
        See `content_path` and `resolve`.
    """
    stored = content_path(data, folder=folder, suffix=suffix)
    (write or _write_local)(data_dir, stored.path, bytes(data))
    return stored


def png_bytes(image: np.ndarray | Image.Image) -> bytes:
    """`image` encoded as PNG (`PNG_COMPRESS_LEVEL`): the one PNG encoder of the project.

    Parameters
    ----------
    image : ndarray or PIL.Image
        ``(H, W)`` bool (a mask, written as a 1-bit PNG that `open_image` reads back in
        mode ``"1"``), ``(H, W)`` uint8 gray, ``(H, W, 3)`` or ``(H, W, 4)`` uint8 sRGB(A)
        in [0, 255], or a PIL image.

    Raises
    ------
    FileRefused
        For any other array.
    """
    if isinstance(image, np.ndarray):
        if not (
            (image.dtype == bool and image.ndim == 2)
            or (
                image.dtype == np.uint8
                and (image.ndim == 2 or (image.ndim == 3 and image.shape[2] in (3, 4)))
            )
        ):
            raise FileRefused(
                "`image` must be bool (H, W) or uint8 (H, W), (H, W, 3) or (H, W, 4), "
                f"got {image.dtype} {image.shape}"
            )
        image = Image.fromarray(image)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def put_png(
    data_dir: str | Path,
    image: np.ndarray | Image.Image,
    *,
    folder: str = "images",
    write: Writer | None = None,
) -> StoredFile:
    """Encode `image` with `png_bytes` and store it with `put_bytes` (suffix ``.png``)."""
    return put_bytes(data_dir, png_bytes(image), folder=folder, suffix=".png", write=write)


def _read_limited(source: bytes | str | Path, max_bytes: int, name: str) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ImageRefused(f"{name} was not received (no file at {str(path)!r})")
        if path.stat().st_size > max_bytes:
            raise ImageRefused(f"{name} is {path.stat().st_size} bytes; at most {max_bytes} are allowed")
        data = path.read_bytes()
    else:
        raise ImageRefused(f"{name} must be bytes or a file path, got {type(source).__name__}")
    if not data:
        raise ImageRefused(f"{name} is empty (0 bytes)")
    if len(data) > max_bytes:
        raise ImageRefused(f"{name} is {len(data)} bytes; at most {max_bytes} are allowed")
    return data


_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG color type -> samples per pixel
# Adam7 passes: (first row, row step, first column, column step).
_ADAM7 = ((0, 8, 0, 8), (0, 8, 4, 8), (4, 8, 0, 4), (0, 4, 2, 4), (2, 4, 0, 2), (0, 2, 1, 2), (1, 2, 0, 1))


def png_data_problem(data: bytes) -> str | None:
    """What is wrong with the pixel data of the PNG file `data`, or None when it is whole.

    PIL takes a PNG whose compressed stream ends, cleanly, before the last row: the rows
    it lacks come out blank, and a coloring would be stored with part of it erased. Here the
    ``IDAT`` stream is inflated (never past the size the header implies) and must hold
    exactly one filter byte and the samples of every row, of every pass when interlaced.
    Call it after the header's size has been checked against the pixel cap.
    """
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "it is not a PNG file"
    pos, header, idat = 8, None, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR" and len(body) == 13:
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None or header[3] not in _CHANNELS:
        return "its header (IHDR) is missing or unreadable"
    width, height, depth, color, _, _, interlace = header
    bits = depth * _CHANNELS[color]
    passes = _ADAM7 if interlace else ((0, 1, 0, 1),)
    expected = 0
    for row0, row_step, col0, col_step in passes:
        rows, cols = -(-max(height - row0, 0) // row_step), -(-max(width - col0, 0) // col_step)
        if rows and cols:
            expected += rows * (1 + -(-cols * bits // 8))
    inflate = zlib.decompressobj()
    try:
        got = len(inflate.decompress(b"".join(idat), expected + 1))
    except zlib.error as error:
        return f"its pixel data does not inflate ({error})"
    if got != expected or not inflate.eof:
        return f"its pixel data holds {got:,} of the {expected:,} bytes its {width}x{height} header implies"
    return None


def open_image(
    source: bytes | str | Path,
    *,
    max_pixels: int = MAX_PIXELS,
    max_bytes: int = MAX_BYTES,
    name: str = "upload",
) -> Image.Image:
    """Decode an image file defensively.

    Parameters
    ----------
    source : bytes, str or Path
        The file content or a path to it.
    max_pixels : int
        Refuse images with more pixels than this (decompression-bomb guard), checked from
        the header before any pixel is decoded.
    max_bytes : int
        Refuse files larger than this (a path's size is checked before reading it).
    name : str
        What to call the file in error messages.

    Returns
    -------
    PIL.Image.Image
        The decoded (loaded) image, in its own mode (``"1"`` for a `png_bytes` mask).

    Raises
    ------
    ImageRefused
        If the file is missing, empty, over a cap (the message names the cap), not an
        image, truncated or corrupt.
    """
    data = _read_limited(source, max_bytes, name)
    try:
        image = Image.open(io.BytesIO(data))
        # Pillow opens GIF, BMP, TIFF, PPM…: a file named .png is taken only if it is one of ours
        # (outside probe 217 imported a GIF as a sketch). MPO is how Pillow names a camera's JPEG.
        if image.format not in IMAGE_FORMATS:
            raise ImageRefused(f"{name} is in the {image.format} format, not PNG, JPEG or WebP")
        width, height = image.size
        if width * height > max_pixels:
            raise ImageRefused(
                f"{name} is {width}x{height} = {width * height:,} pixels; at most {max_pixels:,} are allowed"
            )
        image.load()
        problem = png_data_problem(data) if image.format == "PNG" else None
        if problem:
            raise ImageRefused(f"{name} is a corrupt or truncated image: {problem}")
    except Image.DecompressionBombError as error:  # Pillow refuses it before our own check
        found = re.search(r"\((\d+) pixels\)", str(error))
        size = f"{int(found[1]):,} pixels" if found else "more pixels than can be decoded safely"
        raise ImageRefused(
            f"{name} has {size}; at most {max_pixels:,} are allowed (decoding it could exhaust the server's memory)"
        ) from None
    except UnidentifiedImageError:
        raise ImageRefused(f"{name} is not an image file (PNG, JPEG or WebP expected)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        if isinstance(error, ImageRefused):
            raise
        raise ImageRefused(f"{name} is a corrupt or truncated image: {error}") from None
    return image
