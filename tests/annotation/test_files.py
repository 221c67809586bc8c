import hashlib
import io
import re
import zlib

import numpy as np
import pytest
from PIL import Image

from annotation.errors import InvalidImage, InvalidInput
from annotation.files import check_rgba_png, decode_image, resolve, store_bytes, store_png
from tests.png_modes import WRONG_PNGS, raw_png, rgba_png, wrong_png


def _png_bytes(array):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _png_header_only(width, height):
    """A PNG whose header claims width x height pixels but holds almost no data."""
    return raw_png(width, height, 8, 2, zlib.compress(b"\x00" * 16))


def test_store_bytes_names_file_by_content_hash_and_stores_it_once(tmp_path):
    data = b"not really a png"
    first = store_bytes(tmp_path, data)
    second = store_bytes(tmp_path, data)
    digest = hashlib.sha256(data).hexdigest()
    assert first == second
    assert first.sha256 == digest
    assert first.path == f"images/{digest[:2]}/{digest}.png"
    assert (tmp_path / first.path).read_bytes() == data
    assert [p.name for p in (tmp_path / "images" / digest[:2]).iterdir()] == [f"{digest}.png"]


def test_store_png_round_trips_pixels(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(8, 9, 3), dtype=np.uint8)
    stored = store_png(tmp_path, image)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / stored.path)), image)
    mask = store_png(tmp_path, image[..., 0] > 127, folder="masks")
    assert mask.path.startswith("masks/")
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / mask.path)) > 0, image[..., 0] > 127)


@pytest.mark.parametrize(
    "bad", ["../secret", "/etc/passwd", "images/../../x", "", "   ", "C:\\windows", "a/../../b", "..\\..\\x"]
)
def test_resolve_refuses_paths_leaving_the_data_folder(tmp_path, bad):
    with pytest.raises(InvalidInput, match="file path"):
        resolve(tmp_path, bad)


def test_resolve_refuses_symlink_out_of_the_data_folder(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "link").symlink_to(tmp_path)
    with pytest.raises(InvalidInput, match="inside the data folder"):
        resolve(tmp_path / "data", "link/secret.txt")
    assert (
        resolve(tmp_path / "data", "images/ab/x.png")
        == (tmp_path / "data" / "images" / "ab" / "x.png").resolve()
    )


def test_decode_image_reads_a_valid_png():
    image = np.zeros((4, 5, 3), dtype=np.uint8)
    image[1, 2] = (255, 0, 10)
    decoded = decode_image(_png_bytes(image))
    np.testing.assert_array_equal(np.asarray(decoded), image)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"hello, this is text", "not an image"),
        (_png_bytes(np.zeros((64, 64, 3), np.uint8))[:60], "corrupt or truncated"),
        (_png_header_only(5000, 5000), "25,000,000 pixels"),
        (_png_header_only(100_000, 100_000), "too large|pixels"),
    ],
)
def test_decode_image_refuses_bad_files_with_a_clear_message(data, message):
    with pytest.raises(InvalidImage, match=message):
        decode_image(data, name="upload")


def test_decode_image_refuses_missing_and_oversized_files(tmp_path):
    with pytest.raises(InvalidImage, match="was not received"):
        decode_image(tmp_path / "missing.png")
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * 2048)
    with pytest.raises(InvalidImage, match="2048 bytes; at most 1024"):
        decode_image(big, max_bytes=1024)


@pytest.mark.parametrize("name", sorted(WRONG_PNGS))
def test_check_rgba_png_refuses_every_other_kind_and_names_what_arrived(name):
    png, message = wrong_png(name, 64, 48)
    with pytest.raises(InvalidImage) as raised:
        check_rgba_png(png, 64, 48, name="canvas")
    assert re.fullmatch(message, str(raised.value)), str(raised.value)


def test_check_rgba_png_passes_a_single_frame_8_bit_rgba_png_of_the_size():
    check_rgba_png(rgba_png(64, 48), 64, 48, name="canvas")


@pytest.mark.parametrize(
    "data, arrived",
    [
        (b"GIF89a" + bytes(64), "data that is not a PNG"),
        (rgba_png(64, 48)[:20], "a PNG whose header is cut short or corrupt"),
    ],
)
def test_check_rgba_png_refuses_what_is_not_a_png(data, arrived):
    with pytest.raises(
        InvalidImage, match=f"^`canvas` must be an 8-bit RGBA PNG of 64×48 pixels, got {arrived}$"
    ):
        check_rgba_png(data, 64, 48, name="canvas")


def test_check_rgba_png_refuses_a_bomb_from_its_header_alone():
    with pytest.raises(InvalidImage, match="got an 8-bit RGB PNG of 100000×100000$"):
        check_rgba_png(_png_header_only(100_000, 100_000), 64, 48, name="canvas")
