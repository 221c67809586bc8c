"""PNGs of every kind a canvas must not send, written by PIL (and one by hand), by name.

Each is painted one uniform red over the whole image, the case issue 25 found stored as a
coloring. `WRONG_PNGS` maps a name to ``(make(width, height) -> bytes, what arrived)``,
where *what arrived* is how the refusal must describe it.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable

from PIL import Image

RED = (208, 48, 48)


def pil_png(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def rgba_png(width: int, height: int) -> bytes:
    """The good kind: a single-frame 8-bit RGBA PNG."""
    return pil_png(Image.new("RGBA", (width, height), (*RED, 255)))


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def raw_png(width: int, height: int, bit_depth: int, color_type: int, idat: bytes) -> bytes:
    """A PNG written by the specification: its header and `idat` (compressed rows) as given."""
    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def rgba16_png(width: int, height: int) -> bytes:
    """A 16-bit RGBA PNG (PIL cannot write one)."""
    pixel = b"".join(struct.pack(">H", v * 257) for v in (*RED, 255))
    return raw_png(width, height, 16, 6, zlib.compress((b"\x00" + pixel * width) * height))


def _palette(width: int, height: int) -> bytes:
    image = Image.new("P", (width, height), 1)
    image.putpalette([0, 0, 0, *RED])
    return pil_png(image, transparency=0)


def _animated(width: int, height: int) -> bytes:
    frames = [Image.new("RGBA", (width, height), (*rgb, 255)) for rgb in (RED, (40, 40, 200))]
    return pil_png(frames[0], save_all=True, append_images=frames[1:])


WRONG_PNGS: dict[str, tuple[Callable[[int, int], bytes], str]] = {
    "gray16": (lambda w, h: pil_png(Image.new("I;16", (w, h), 40000)), "a 16-bit grayscale PNG of {w}×{h}"),
    "palette-transparent": (_palette, r"a \d-bit palette PNG of {w}×{h} with transparency"),
    "gray-alpha": (
        lambda w, h: pil_png(Image.new("LA", (w, h), (90, 255))),
        "an 8-bit grayscale\\+alpha PNG of {w}×{h}",
    ),
    "rgba16": (rgba16_png, "a 16-bit RGBA PNG of {w}×{h}"),
    "animated": (_animated, "an animated 8-bit RGBA PNG of {w}×{h} with 2 frames"),
    "rgb": (lambda w, h: pil_png(Image.new("RGB", (w, h), RED)), "an 8-bit RGB PNG of {w}×{h}"),
    "other-size": (lambda w, h: rgba_png(w + 1, h), "an 8-bit RGBA PNG of {w1}×{h}"),
}


def wrong_png(name: str, width: int, height: int) -> tuple[bytes, str]:
    """The PNG `name` for a sketch of `width` x `height` and the pattern of its refusal."""
    make, arrived = WRONG_PNGS[name]
    expected = f"`canvas` must be an 8-bit RGBA PNG of {width}×{height} pixels, got "
    return make(width, height), expected + arrived.format(w=width, h=height, w1=width + 1)
