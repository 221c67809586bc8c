"""Image files under the data folder: content-hash storage, safe paths, guarded decoding.

Files are named after the sha256 of their bytes (``images/ab/abcdef....png``), so the same
content is stored once and a row's ``sha256`` column names its file. A file is written to
a temporary name in the target folder and renamed into place, so a crash never leaves a
half-written file under a final name.
"""

from __future__ import annotations

import hashlib
import io
import struct
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image, UnidentifiedImageError

from annotation.errors import InvalidImage, InvalidInput, shown
from evaluation.pipeline.fileio import write_atomic

# A 4096 x 4096 image; sketches and colorings are 1024 x 1024 or smaller.
MAX_PIXELS = 4096 * 4096
MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class StoredFile:
    """A stored file: `path` relative to the data folder (POSIX form) and its `sha256`."""

    path: str
    sha256: str


def store_bytes(
    data_dir: str | Path, data: bytes, *, suffix: str = ".png", folder: str = "images"
) -> StoredFile:
    """Store `data` under `data_dir`/`folder` with its content hash as name.

    Parameters
    ----------
    data_dir : str or Path
        The app's data folder.
    data : bytes
        The file content; must not be empty.
    suffix : str
        File name suffix, e.g. ``".png"``.
    folder : str
        A relative folder under `data_dir` (no ``..``).

    Returns
    -------
    StoredFile
        Storing the same bytes twice returns the same path and writes nothing new.
    """
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise InvalidInput(
            f"`data` must be non-empty bytes, got {type(data).__name__} "
            f"of length {len(data) if hasattr(data, '__len__') else '?'}"
        )
    digest = hashlib.sha256(data).hexdigest()
    relative = f"{folder}/{digest[:2]}/{digest}{suffix}"
    target = resolve(data_dir, relative)
    if not target.exists():
        write_atomic(target, data)
    return StoredFile(relative, digest)


PNG_COMPRESS_LEVEL = 6
"""zlib level of the PNGs the app writes: level 1 encodes a 1024² coloring in 8 ms into 17 kB,
level 6 in 12 ms into 5 kB, level 9 in 17 ms into 5 kB (bench/bench_designer.py notes)."""


def png_bytes(image: np.ndarray | Image.Image) -> bytes:
    """Encode `image` as PNG (`PNG_COMPRESS_LEVEL`).

    Parameters
    ----------
    image : ndarray or PIL.Image
        ``(H, W)`` bool/uint8 (a mask or gray image), ``(H, W, 3)`` or ``(H, W, 4)``
        uint8 sRGB(A) in [0, 255], or a PIL image.

    Raises
    ------
    InvalidInput
        For any other array.
    """
    if isinstance(image, np.ndarray):
        if image.dtype == bool:
            image = image.astype(np.uint8) * 255
        if (
            image.dtype != np.uint8
            or image.ndim not in (2, 3)
            or (image.ndim == 3 and image.shape[2] not in (3, 4))
        ):
            raise InvalidInput(
                f"`image` must be uint8 (H, W), (H, W, 3) or (H, W, 4), got {image.dtype} {image.shape}"
            )
        image = Image.fromarray(image)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def store_png(data_dir: str | Path, image: np.ndarray | Image.Image, *, folder: str = "images") -> StoredFile:
    """Encode `image` with `png_bytes` and store it with `store_bytes`."""
    return store_bytes(data_dir, png_bytes(image), suffix=".png", folder=folder)


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


def resolve(data_dir: str | Path, relative: str) -> Path:
    """The absolute path of `relative` inside `data_dir`, refusing to leave it.

    Raises
    ------
    InvalidInput
        If `relative` is empty, absolute, contains ``..`` or resolves (through links)
        outside `data_dir`.
    """
    if not isinstance(relative, str) or not relative.strip():
        raise InvalidInput(f"file path must be a non-empty relative path, got {shown(relative)}")
    parts = PurePosixPath(relative.replace("\\", "/"))
    if parts.is_absolute() or ".." in parts.parts or ":" in relative:
        raise InvalidInput(f"file path must stay inside the data folder, got {shown(relative)}")
    root = Path(data_dir).resolve()
    target = (root / parts).resolve()
    if not target.is_relative_to(root):
        raise InvalidInput(f"file path must stay inside the data folder, got {shown(relative)}")
    return target


def decode_image(
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
        Refuse files larger than this.
    name : str
        What to call the file in error messages.

    Returns
    -------
    PIL.Image.Image
        The decoded (loaded) image, in its own mode.

    Raises
    ------
    InvalidImage
        If the file is empty, too large, not an image, truncated or corrupt.
    """
    data = _read_limited(source, max_bytes, name)
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > max_pixels:
            raise InvalidImage(
                f"{name} is {width}x{height} = {width * height} pixels; at most {max_pixels} are allowed"
            )
        image.load()
    except Image.DecompressionBombError as error:
        raise InvalidImage(f"{name} is too large to decode safely: {error}") from None
    except UnidentifiedImageError:
        raise InvalidImage(f"{name} is not an image file (PNG, JPEG or WebP expected)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        raise InvalidImage(f"{name} is a corrupt or truncated image: {error}") from None
    return image


def _read_limited(source: bytes | str | Path, max_bytes: int, name: str) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise InvalidImage(f"{name} was not received (no file at {str(path)!r})")
        if path.stat().st_size > max_bytes:
            raise InvalidImage(f"{name} is {path.stat().st_size} bytes; at most {max_bytes} are allowed")
        data = path.read_bytes()
    else:
        raise InvalidImage(f"{name} must be bytes or a file path, got {type(source).__name__}")
    if not data:
        raise InvalidImage(f"{name} is empty (0 bytes)")
    if len(data) > max_bytes:
        raise InvalidImage(f"{name} is {len(data)} bytes; at most {max_bytes} are allowed")
    return data
