import base64
import csv
import hashlib
import io
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from PIL import Image, ImageDraw
from scipy import ndimage
from skimage.draw import disk

from annotation.coloring.fill import line_mask
from annotation.sketches.importing import (
    LONG_SIDE,
    MAX_MIDTONE_FRACTION,
    NotLineArtError,
    check_line_art,
    concept_for_filename,
    encode_png,
    import_sketch_file,
    line_art_stats,
    load_manifest,
    load_sketch_png,
    normalize_sketch,
    png_data_url,
    rasterize_svg,
    sketch_prompt,
    slugify,
)
from evaluation.concepts import ASSETS, CATEGORIES

RATED = (
    "apple",
    "banana",
    "lemon",
    "strawberry",
    "carrot",
    "eggplant",
    "bear",
    "frog",
    "beach",
    "ocean",
    "sky",
    "sunset",
)

SQUARE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 100">'
    '<rect x="20" y="20" width="60" height="60" fill="#fff" stroke="#000" stroke-width="4"/>'
    '<circle cx="150" cy="50" r="30" fill="#fff" stroke="#000" stroke-width="4"/></svg>'
)


def _line_drawing(height=300, width=400, paper=255, ink=0):
    """A rectangle outline and a diagonal, as a uint8 (H, W) array."""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
        f'<rect x="60" y="50" width="200" height="150" fill="none" stroke="#000" stroke-width="5"/>'
        f'<path d="M60,50 L260,200" stroke="#000" stroke-width="5"/></svg>'
    )
    art = rasterize_svg(svg, max(height, width)).astype(np.float64) / 255
    return np.round(ink + art * (paper - ink)).astype(np.uint8)


def test_manifest_has_three_table9_concepts_per_category():
    entries = load_manifest()
    per_category = Counter(e.category for e in entries)
    assert set(per_category) == set(CATEGORIES)
    assert min(per_category.values()) >= 3
    assert len(entries) >= 21


def test_manifest_includes_the_concepts_with_reference_ratings():
    with open(ASSETS / "reference" / "uw71_concept_ratings.csv", newline="") as f:
        rated = {row[""] for row in csv.DictReader(f)}
    shipped = {e.concept for e in load_manifest()}
    assert set(RATED) <= shipped
    assert set(RATED) <= rated


def test_every_manifest_row_has_its_svg_and_png():
    for entry in load_manifest():
        assert entry.svg.is_file(), entry.svg
        assert entry.png.is_file(), entry.png


def test_shipped_png_is_the_rasterised_svg():
    for entry in load_manifest():
        shipped = load_sketch_png(entry.png)
        assert max(shipped.shape) == LONG_SIDE
        fresh = rasterize_svg(entry.svg.read_bytes())
        assert fresh.shape == shipped.shape
        assert np.abs(fresh.astype(int) - shipped).mean() < 0.5, entry.slug


def test_every_shipped_sketch_passes_the_line_art_check():
    for entry in load_manifest():
        stats = check_line_art(load_sketch_png(entry.png))
        assert stats.midtone_fraction < 0.03, entry.slug
        assert stats.colored_fraction == 0.0


def test_every_shipped_sketch_has_several_colorable_regions():
    cross = ndimage.generate_binary_structure(2, 1)
    for entry in load_manifest():
        sketch = load_sketch_png(entry.png)
        labels, _ = ndimage.label(~line_mask(sketch), structure=cross)
        sizes = np.bincount(labels.ravel())[1:]
        assert (sizes >= 1000).sum() >= 4, entry.slug


def test_rasterize_svg_scales_the_long_side_and_keeps_the_aspect():
    art = rasterize_svg(SQUARE_SVG, 1024)
    assert art.shape == (512, 1024)
    assert art.dtype == np.uint8
    assert art[0, 0] == 255
    assert art[256, 102] == 0  # left edge of the square: x=20 of 200
    assert art[256, 256] == 255  # inside the square


def test_an_svg_declaring_a_huge_canvas_is_drawn_at_the_long_side_only(tmp_path):
    """A 300-byte SVG of 40,000 x 40,000 px: drawn at its own size first (as it once was), it
    took 6.4 GB; fitted into the long side's square, a few MB. Measured in a child process,
    whose peak memory is its own."""
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="40000" height="40000">'
        '<rect x="4000" y="4000" width="32000" height="32000" fill="#fff" stroke="#000" stroke-width="200"/>'
        "</svg>"
    )
    (tmp_path / "huge.svg").write_text(svg)
    child = (
        "import resource, sys; from annotation.sketches.importing import rasterize_svg;"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "art = rasterize_svg(open(sys.argv[1]).read());"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "print(art.shape, art.min(), art.max(), (after - before) // 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "huge.svg")], capture_output=True, text=True, check=True
    )
    shape, low, high, grown_mb = done.stdout.strip().rsplit(" ", 3)[0], *done.stdout.split()[-3:]
    assert (shape, int(low), int(high)) == ("(1024, 1024)", 0, 255)
    assert int(grown_mb) < 200, done.stdout  # the declared canvas alone is 6,400 MB


def test_a_thin_strip_is_refused_with_its_size(tmp_path):
    strip = np.full((60, 1200), 255, np.uint8)
    strip[10:50, 20:1180] = 0
    strip[14:46, 24:1176] = 255  # an outlined box: line art, 29 times as wide as tall
    path = tmp_path / "snake.png"
    Image.fromarray(strip).save(path)
    with pytest.raises(NotLineArtError, match=r"is 1024 x \d+ px once cropped .* at most 4 times"):
        import_sketch_file(path)
    wide = np.full((300, 1000), 255, np.uint8)
    wide[20:280, 20:980] = 0
    wide[26:274, 26:974] = 255  # 3.3 times as wide: kept
    Image.fromarray(wide).save(path)
    assert import_sketch_file(path).width == LONG_SIDE


def test_rasterize_svg_rejects_markup_that_is_not_svg():
    with pytest.raises(ValueError):
        rasterize_svg("<html>not a drawing</html>")
    # A PNG named .svg: said in words, not as a codec's error (outside probe 218).
    with pytest.raises(
        ValueError, match=r"^it is not an SVG file: an SVG is text \(UTF-8\), and this file's bytes"
    ):
        rasterize_svg(b"\x89PNG\r\n\x1a\n" + bytes(32))


def test_check_line_art_rejects_a_photo_like_image():
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:300, 0:400]
    smooth = 60 + 120 * (xx / 400) + 50 * np.sin(yy / 40)
    photo = np.clip(smooth + rng.normal(0, 12, smooth.shape), 0, 255).astype(np.uint8)
    stats = line_art_stats(photo)
    assert stats.midtone_fraction > MAX_MIDTONE_FRACTION
    with pytest.raises(NotLineArtError, match="mid-grey"):
        check_line_art(photo)


def test_check_line_art_rejects_a_colored_image():
    rgb = np.repeat(_line_drawing()[..., None], 3, axis=2)
    rgb[80:180, 100:240] = (220, 40, 40)
    with pytest.raises(NotLineArtError, match="colored"):
        check_line_art(rgb)


def test_check_line_art_rejects_white_lines_on_black():
    with pytest.raises(NotLineArtError, match="background is dark"):
        check_line_art(255 - _line_drawing())


def test_check_line_art_rejects_a_filled_silhouette_and_a_blank_page():
    silhouette = np.full((300, 400), 255, np.uint8)
    silhouette[20:280, 40:360] = 0
    with pytest.raises(NotLineArtError, match="is dark"):
        check_line_art(silhouette)
    with pytest.raises(NotLineArtError, match="no drawing found"):
        check_line_art(np.full((300, 400), 250, np.uint8))


def test_check_line_art_refuses_specks_and_blobs_that_close_no_region():
    rng = np.random.default_rng(3)
    specks = np.where(rng.random((400, 400)) < 0.05, 0, 255).astype(np.uint8)
    blobs = np.full((400, 400), 255, np.uint8)
    for _ in range(40):
        rr, cc = disk(tuple(rng.integers(0, 400, 2)), rng.integers(3, 12), shape=blobs.shape)
        blobs[rr, cc] = 0
    for image in (specks, blobs):
        assert line_art_stats(image).regions == 1
        with pytest.raises(NotLineArtError, match="close no region to color"):
            check_line_art(image)


def test_check_line_art_accepts_outlines_another_renderer_drew():
    """Pillow's ImageDraw draws these (anti-aliased by supersampling), not resvg from our SVGs."""
    big = Image.new("L", (1600, 1200), 255)
    draw = ImageDraw.Draw(big)
    draw.polygon([(320, 960), (800, 960), (800, 560), (320, 560)], outline=0, width=12)
    draw.polygon([(290, 560), (560, 260), (830, 560)], outline=0, width=12)
    draw.ellipse((1000, 420, 1400, 820), outline=0, width=6)
    drawing = big.resize((400, 300), Image.Resampling.LANCZOS)
    stats = check_line_art(drawing)
    assert stats.regions == 4  # outside, the house's wall and roof, the circle's inside


def test_check_line_art_accepts_a_scan_on_grey_paper():
    stats = check_line_art(_line_drawing(paper=205, ink=40))
    assert stats.paper_level == 205


def test_normalize_sketch_whitens_paper_crops_and_resizes():
    scan = _line_drawing(paper=205, ink=40)
    out = normalize_sketch(scan)
    assert max(out.shape) == LONG_SIDE
    assert out[0, 0] == 255
    assert out.min() == 0
    # cropped to the 205 x 155 px drawing (200 x 150 plus the 5 px stroke) and an 8 px
    # (4 %) margin on each side, not to the 400 x 300 canvas
    np.testing.assert_allclose(out.shape[1] / out.shape[0], 221 / 171, rtol=0.02)
    midtones = np.mean((out > 40) & (out < 215))
    assert 0 < midtones < 0.05  # anti-aliasing kept, not binarised


def test_normalize_sketch_never_pads_lines_that_touch_the_frame():
    art = np.full((300, 400), 255, np.uint8)
    art[150:154, :] = 0  # a horizon from edge to edge
    out = normalize_sketch(art)
    assert out.shape == (768, 1024)
    assert (out[:, 0] < 128).any() and (out[:, -1] < 128).any()


def test_import_sketch_file_reads_png_and_svg(tmp_path):
    png_path = tmp_path / "Bell Pepper.png"
    Image.fromarray(_line_drawing(paper=230, ink=20)).save(png_path)
    imported = import_sketch_file(png_path)
    expected = normalize_sketch(Image.open(png_path))
    assert (imported.height, imported.width) == expected.shape
    np.testing.assert_array_equal(load_sketch_png(io.BytesIO(imported.png)), expected)
    assert imported.sha256 == hashlib.sha256(imported.png).hexdigest()
    assert Image.open(io.BytesIO(imported.png)).mode == "L"
    svg_path = tmp_path / "apple.svg"
    svg_path.write_text(SQUARE_SVG)
    assert import_sketch_file(svg_path).width == LONG_SIDE


def test_import_sketch_file_says_why_a_photo_is_rejected(tmp_path):
    rng = np.random.default_rng(3)
    photo = rng.integers(0, 256, (200, 300, 3), dtype=np.uint8)
    path = tmp_path / "photo.jpg"
    Image.fromarray(photo).save(path)
    with pytest.raises(NotLineArtError, match="not line art"):
        import_sketch_file(path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png"):
        import_sketch_file(broken)


def test_concept_for_filename_matches_slugs():
    bases = ["apple", "bell pepper", "palm tree"]
    assert concept_for_filename("Bell Pepper.PNG", bases) == "bell pepper"
    assert concept_for_filename("palm-tree.svg", bases) == "palm tree"
    assert concept_for_filename("pear.png", bases) is None
    assert concept_for_filename("___.png", bases) is None


def test_slugify_and_prompt():
    assert slugify("Brussels sprouts") == "brussels-sprouts"
    with pytest.raises(ValueError, match="concept"):
        slugify(" - ")
    assert sketch_prompt("rotten apple") == (
        "A simple cartoon black outline drawing of rotten apple, without coloring, "
        "without shadow, white background."
    )


def test_png_data_url_wraps_png_bytes_only():
    png = encode_png(np.full((4, 6), 255, np.uint8))
    url = png_data_url(png)
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png
    with pytest.raises(ValueError, match="PNG bytes"):
        png_data_url(b"GIF89a")


def test_an_svg_that_reaches_outside_itself_is_refused_before_resvg_reads_anything(tmp_path):
    black = tmp_path / "black.png"
    Image.new("L", (8, 8), 0).save(black)
    outline = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
        ' width="64" height="64"><defs><circle id="c" cx="32" cy="32" r="20"/></defs>'
        '<use href="#c" fill="none" stroke="black" stroke-width="3"/>{}</svg>'
    )
    assert rasterize_svg(outline.format('<g clip-path="url(#c)"/>'), 64).min() == 0
    refused = {
        f'<image href="{black}" width="64" height="64"/>': "contains an <image> element",
        # The reference is quoted cut to a bounded length (a temporary path can be long).
        f'<use xlink:href="{black}#c"/>': r"refers to something outside the file \('.*' in <use>\)",
        '<rect fill="url(http://example.org/p#x)" width="4" height="4"/>': "outside the file \\('http://example.org/p#x' in <rect>\\)",
        "<style>@import 'x.css';</style>": "'@import' in <style>",
        "<script>alert(1)</script>": "contains a <script> element",
        "<foreignObject/>": "contains a <foreignObject> element",
    }
    for extra, message in refused.items():
        with pytest.raises(ValueError, match=message):
            rasterize_svg(outline.format(extra), 64)
    with pytest.raises(ValueError, match="declares XML entities"):
        rasterize_svg('<!DOCTYPE svg [<!ENTITY x "y">]><svg xmlns="http://www.w3.org/2000/svg"/>')
