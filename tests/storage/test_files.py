import hashlib
import io
import re
import zlib

import numpy as np
import pytest
from PIL import Image

from storage import files
from storage.files import (
    FileRefused,
    ImageRefused,
    StoredFile,
    content_path,
    open_image,
    png_bytes,
    put_bytes,
    put_png,
    remove_temporaries,
    resolve,
    write_atomic,
)
from tests.png_modes import raw_png


def _tree(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_same_bytes_get_the_same_sharded_path_and_are_stored_once(tmp_path):
    data = b"\x89PNG not really"
    digest = hashlib.sha256(data).hexdigest()
    first = put_bytes(tmp_path, data, folder="colorings")
    second = put_bytes(tmp_path, data, folder="colorings")
    assert first == second == StoredFile(f"colorings/{digest[:2]}/{digest}.png", digest)
    assert content_path(data, folder="colorings", suffix=".png") == first
    assert _tree(tmp_path) == [first.path]
    assert (tmp_path / first.path).read_bytes() == data


def test_put_bytes_hands_the_file_to_a_given_writer_whole(tmp_path):
    written = []
    stored = put_bytes("s3://bucket/data", b"abc", folder="runs/r/masks", write=lambda *a: written.append(a))
    assert written == [("s3://bucket/data", stored.path, b"abc")]
    assert stored.path.startswith("runs/r/masks/") and _tree(tmp_path) == []


@pytest.mark.parametrize("data", [b"", "text", None, bytearray()])
def test_put_bytes_refuses_what_is_not_non_empty_bytes_and_writes_nothing(tmp_path, data):
    with pytest.raises(FileRefused, match="`data` must be non-empty bytes"):
        put_bytes(tmp_path, data)
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("folder", ["../up", "/abs", "a/../../b", "C:\\x", ""])
def test_put_bytes_refuses_a_folder_leaving_the_data_folder_and_writes_nothing(tmp_path, folder):
    with pytest.raises(FileRefused, match="file path"):
        put_bytes(tmp_path / "data", b"abc", folder=folder)
    assert _tree(tmp_path) == []


def test_stored_paths_of_the_older_flat_layout_still_resolve(tmp_path):
    flat = "runs/r/images/" + "a" * 64 + ".png"
    write_atomic(tmp_path / flat, b"old")
    assert resolve(tmp_path, flat).read_bytes() == b"old"
    with pytest.raises(FileRefused, match="inside the data folder"):
        resolve(tmp_path, "runs/../../x.png")


@pytest.mark.parametrize(
    "image",
    [
        np.random.default_rng(0).integers(0, 256, (7, 9, 3), dtype=np.uint8),
        np.random.default_rng(1).integers(0, 256, (7, 9, 4), dtype=np.uint8),
        np.random.default_rng(2).integers(0, 256, (7, 9), dtype=np.uint8),
    ],
    ids=["rgb", "rgba", "gray"],
)
def test_put_png_and_open_image_round_trip_the_pixels(tmp_path, image):
    stored = put_png(tmp_path, image, folder="images")
    assert stored.sha256 == hashlib.sha256((tmp_path / stored.path).read_bytes()).hexdigest()
    np.testing.assert_array_equal(np.asarray(open_image(tmp_path / stored.path)), image)
    np.testing.assert_array_equal(np.asarray(open_image(png_bytes(image))), image)


def test_a_bool_mask_round_trips_as_a_1_bit_png():
    mask = np.random.default_rng(3).integers(0, 2, (11, 13)).astype(bool)
    image = open_image(png_bytes(mask))
    assert image.mode == "1"
    np.testing.assert_array_equal(np.array(image, dtype=bool), mask)


def test_png_bytes_is_pillows_default_png_at_level_6():
    image = np.random.default_rng(4).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    assert png_bytes(image) == buffer.getvalue() == png_bytes(Image.fromarray(image))


@pytest.mark.parametrize(
    "array", [np.zeros((4, 4), np.float32), np.zeros((4, 4, 2), np.uint8), np.zeros((2, 4, 4, 3), np.uint8)]
)
def test_png_bytes_refuses_other_arrays_naming_what_arrived(array):
    with pytest.raises(
        FileRefused, match="`image` must be .*" + re.escape(f"got {array.dtype} {array.shape}")
    ):
        png_bytes(array)


def test_open_image_refuses_over_the_pixel_cap_from_the_header_naming_the_cap():
    header_only = raw_png(5000, 5000, 8, 2, zlib.compress(b"\x00" * 16))
    with pytest.raises(
        ImageRefused, match=r"^upload is 5000x5000 = 25,000,000 pixels; at most 16,777,216 are allowed$"
    ):
        open_image(header_only)


def test_open_image_refuses_over_the_byte_cap_naming_the_cap(tmp_path):
    data = png_bytes(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(ImageRefused, match=rf"^sketch is {len(data)} bytes; at most 10 are allowed$"):
        open_image(data, max_bytes=10, name="sketch")
    (tmp_path / "big.png").write_bytes(data)
    with pytest.raises(ImageRefused, match=rf"is {len(data)} bytes; at most 10 are allowed$"):
        open_image(tmp_path / "big.png", max_bytes=10)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "is empty"),
        (b"text", "is not an image file"),
        (png_bytes(np.zeros((64, 64, 3), np.uint8))[:60], "corrupt"),
    ],
)
def test_open_image_refuses_what_is_not_an_image(data, message):
    with pytest.raises(ImageRefused, match=message):
        open_image(data)


@pytest.mark.parametrize("kind", ["GIF", "BMP", "TIFF", "PPM"])
def test_open_image_refuses_a_format_other_than_png_jpeg_or_webp_whatever_its_name(kind, tmp_path):
    """Outside probe 217 imported a GIF, a BMP, a TIFF and a PPM named .png as sketches."""
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(buffer, format=kind)
    (tmp_path / "cherry.png").write_bytes(buffer.getvalue())
    with pytest.raises(ImageRefused, match=rf"^cherry.png is in the {kind} format, not PNG, JPEG or WebP$"):
        open_image(tmp_path / "cherry.png", name="cherry.png")


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "WEBP"])
def test_open_image_takes_png_jpeg_and_webp_whatever_their_name(kind):
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(buffer, format=kind)
    assert open_image(buffer.getvalue(), name="sketch.png").size == (16, 16)


def test_open_image_refuses_a_png_whose_data_ends_before_its_last_row():
    # A whole zlib stream of 400 of the 1024 rows its header declares: PIL decodes it with
    # the other rows blank, so a coloring would be stored with most of it erased.
    rows = b"".join(b"\x00" + bytes([208, 48, 48, 255]) * 1024 for _ in range(400))
    short = raw_png(1024, 1024, 8, 6, zlib.compress(rows))
    Image.open(io.BytesIO(short)).load()
    with pytest.raises(
        ImageRefused,
        match=r"^upload is a corrupt or truncated image: its pixel data holds 1,638,800 of the 4,195,328 bytes "
        r"its 1024x1024 header implies$",
    ):
        open_image(short)


@pytest.mark.parametrize("mode", ["RGBA", "RGB", "LA", "L", "P", "1", "I;16"])
@pytest.mark.parametrize("interlace", [0, 1], ids=["plain", "adam7"])
def test_every_whole_png_passes_the_row_check(mode, interlace):
    layer = (np.random.default_rng(0).random((37, 53, 4)) * 255).astype(np.uint8)
    image = Image.fromarray(layer, "RGBA")
    image = Image.fromarray(layer[..., 0].astype(np.uint16) * 257) if mode == "I;16" else image.convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", interlace=interlace)
    assert files.png_data_problem(buffer.getvalue()) is None
    assert open_image(buffer.getvalue()).size == (53, 37)


def test_write_atomic_leaves_no_partial_file_when_the_write_fails(tmp_path, monkeypatch):
    target = tmp_path / "runs" / "r" / "x.png"
    write_atomic(target, b"old and whole")

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, b"new")
    with pytest.raises(OSError, match="disk full"):
        write_atomic(tmp_path / "runs" / "r" / "y.png", b"new")
    assert _tree(tmp_path) == ["runs/r/x.png"]
    assert target.read_bytes() == b"old and whole"


def test_remove_temporaries_removes_only_what_a_killed_write_left(tmp_path):
    write_atomic(tmp_path / "a" / "kept.png", b"whole")
    (tmp_path / "a" / ".kept.png.x1.tmp").write_bytes(b"par")
    assert remove_temporaries(tmp_path) == [tmp_path / "a" / ".kept.png.x1.tmp"]
    assert _tree(tmp_path) == ["a/kept.png"]
    assert remove_temporaries(tmp_path / "missing") == []


def test_is_stored_says_whether_a_file_is_there_and_refuses_what_resolve_refuses(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.png").write_bytes(b"x")
    root = tmp_path.resolve()
    assert files.is_stored(root, "runs/a.png") and files.is_stored(root, "runs\\a.png")
    assert not files.is_stored(root, "runs/b.png")
    assert not files.is_stored(root, "runs")  # a folder is no file
    for text in ("../a.png", "/etc/passwd", "c:/a.png", ""):
        with pytest.raises(files.FileRefused):
            files.is_stored(root, text)
