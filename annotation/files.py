"""Image files under the data folder, in the annotation library's own errors.

The store itself is `storage.files` (content-hash names sharded as
``colorings/ab/abcdef....png``, atomic writes, the one PNG encoder, guarded decoding);
this module gives it the annotation errors (`InvalidInput`, `InvalidImage`) that the app
shows, stores masks as 8-bit gray as every annotation mask so far, and checks a canvas
PNG from its header (`check_rgba_png`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from annotation.errors import InvalidImage, InvalidInput
from storage import files
from storage.files import MAX_BYTES, MAX_PIXELS, PNG_COMPRESS_LEVEL, StoredFile

__all__ = [
    "MAX_BYTES",
    "MAX_PIXELS",
    "PNG_COMPRESS_LEVEL",
    "StoredFile",
    "check_rgba_png",
    "decode_image",
    "neutral_copy",
    "png_bytes",
    "resolve",
    "store_bytes",
    "store_png",
]


@contextmanager
def _refusals() -> Iterator[None]:
    """Raise the store's refusals as the annotation errors, with the same message."""
    try:
        yield
    except files.ImageRefused as error:
        raise InvalidImage(str(error)) from None
    except files.FileRefused as error:
        raise InvalidInput(str(error)) from None


def store_bytes(
    data_dir: str | Path, data: bytes, *, suffix: str = ".png", folder: str = "images"
) -> StoredFile:
    """`storage.files.put_bytes`: store `data` under `data_dir`/`folder` by content hash.

    Raises
    ------
    InvalidInput
        If `data` is not non-empty bytes or `folder` leaves the data folder.
    """
    with _refusals():
        return files.put_bytes(data_dir, data, folder=folder, suffix=suffix)


TRIALS = "trials"
"""The folder of `neutral_copy`'s copies: made again when missing, never swept
(`storage.data_folder.SKIPPED_FOLDERS`), served to the participant whose trial showed each
(`app.guard.DATA_RULES`)."""


def neutral_copy(data_dir: str | Path, relative: str) -> str:
    """A copy of the stored file `relative` named by its content alone,
    ``trials/<sha[:2]>/<sha><suffix>``: what a participant's page names for a model image,
    whose own path names its run (``runs/<run>/images/...``), and a run is often named after
    its model (outside probe 171 told the two sides apart by it).

    Returns
    -------
    str
        The copy's path relative to `data_dir`; the same bytes give the same path, stored once.

    Raises
    ------
    InvalidInput
        If `relative` leaves the data folder.
    OSError
        If the file cannot be read or the copy written (a full disk).
    """
    source = resolve(data_dir, relative)
    return store_bytes(data_dir, source.read_bytes(), suffix=source.suffix, folder=TRIALS).path


def png_bytes(image: np.ndarray | Image.Image) -> bytes:
    """`image` as PNG (`storage.files.png_bytes`); a bool mask as 8-bit gray (0 / 255).

    Annotation masks have always been stored as 8-bit gray (a run's masks are 1-bit),
    so a mask's bytes, hash and path stay what they were.

    Raises
    ------
    InvalidInput
        For an array `storage.files.png_bytes` does not encode.
    """
    if isinstance(image, np.ndarray) and image.dtype == bool and image.ndim == 2:
        image = image.astype(np.uint8) * 255
    with _refusals():
        return files.png_bytes(image)


def store_png(data_dir: str | Path, image: np.ndarray | Image.Image, *, folder: str = "images") -> StoredFile:
    """Encode `image` with `png_bytes` and store it with `store_bytes`."""
    return store_bytes(data_dir, png_bytes(image), suffix=".png", folder=folder)


def resolve(data_dir: str | Path, relative: str) -> Path:
    """`storage.files.resolve`: the absolute path of `relative` inside `data_dir`.

    Raises
    ------
    InvalidInput
        If `relative` is empty, absolute, contains ``..`` or resolves (through links)
        outside `data_dir`.
    """
    with _refusals():
        return files.resolve(data_dir, relative)


def decode_image(
    source: bytes | str | Path,
    *,
    max_pixels: int = MAX_PIXELS,
    max_bytes: int = MAX_BYTES,
    name: str = "upload",
) -> Image.Image:
    """`storage.files.open_image`: decode an image file within the byte and pixel caps.

    Raises
    ------
    InvalidImage
        If the file is missing, empty, over a cap, not an image, truncated or corrupt.
    """
    with _refusals():
        return files.open_image(source, max_pixels=max_pixels, max_bytes=max_bytes, name=name)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOR_TYPES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}


@dataclass(frozen=True)
class _PngHeader:
    """What a PNG's chunks before its pixel data say about it.

    Attributes
    ----------
    width, height : int
        Pixels.
    bit_depth : int
        Bits per channel (per palette index for palette PNGs): 1, 2, 4, 8 or 16.
    color_type : int
        The IHDR color type, a key of ``_PNG_COLOR_TYPES`` (6 is RGBA).
    transparency : bool
        Whether a ``tRNS`` chunk gives transparency to a palette or a color key.
    frames : int
        Frames of an animated PNG (``acTL``), 1 for a still image.
    """

    width: int
    height: int
    bit_depth: int
    color_type: int
    transparency: bool
    frames: int

    def describe(self) -> str:
        """E.g. ``"a 16-bit grayscale PNG of 1024×1024"``, ``"an animated 8-bit RGBA PNG of
        1024×1024 with 2 frames"``."""
        kind = _PNG_COLOR_TYPES.get(self.color_type, f"color type {self.color_type}")
        text = f"{'animated ' if self.frames != 1 else ''}{self.bit_depth}-bit {kind} PNG"
        text += f" of {self.width}×{self.height}"
        text += f" with {self.frames} frames" if self.frames != 1 else ""
        text += " with transparency" if self.transparency else ""
        return f"{'an' if text.startswith(('8', 'a')) else 'a'} {text}"


def _png_header(data: bytes) -> _PngHeader:
    """Read a PNG's header chunks (up to its first ``IDAT``) without decoding any pixel.

    Raises
    ------
    InvalidImage
        If `data` is not a PNG or its chunks before the pixel data are cut short; the
        message says what arrived as a noun phrase, for `check_rgba_png`.
    """
    if not data.startswith(_PNG_SIGNATURE):
        raise InvalidImage("data that is not a PNG")
    chunks, offset = {}, len(_PNG_SIGNATURE)
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT" or kind == b"IEND":
            break
        chunks.setdefault(kind, data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    ihdr, actl = chunks.get(b"IHDR", b""), chunks.get(b"acTL", b"\0\0\0\1")
    if len(ihdr) != 13 or len(actl) < 4:
        raise InvalidImage("a PNG whose header is cut short or corrupt")
    width, height, bit_depth, color_type = struct.unpack(">IIBB", ihdr[:10])
    frames = struct.unpack(">I", actl[:4])[0]
    return _PngHeader(width, height, bit_depth, color_type, b"tRNS" in chunks, frames)


def check_rgba_png(data: bytes, width: int, height: int, *, name: str) -> None:
    """Refuse anything but a single-frame 8-bit RGBA PNG of `width` x `height` pixels.

    What a browser's canvas sends (``toDataURL("image/png")``). Checked from the header,
    before any pixel is decoded: an image of another size (a decompression bomb too) is
    refused without decoding it.

    Raises
    ------
    InvalidImage
        Naming `name`, what was expected and what arrived, e.g. "`canvas` must be an 8-bit
        RGBA PNG of 1024×1024 pixels, got a 16-bit grayscale PNG of 1024×1024".
    """
    expected = f"`{name}` must be an 8-bit RGBA PNG of {width}×{height} pixels"
    try:
        header = _png_header(data)
    except InvalidImage as error:
        raise InvalidImage(f"{expected}, got {error}") from None
    if header != _PngHeader(width, height, 8, 6, False, 1):
        raise InvalidImage(f"{expected}, got {header.describe()}")
