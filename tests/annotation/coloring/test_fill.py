import base64
import io
import json

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from annotation.coloring.fill import (
    LINE_THRESHOLD,
    FillOnLineError,
    blank_color_layer,
    canvas_value,
    color_layer_to_png,
    composite,
    fill_region,
    flood_fill,
    line_mask,
    painted_colors,
    painted_mask,
    parse_canvas_value,
)
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png, rasterize_svg

RED = (220, 30, 40)
BLUE = (30, 60, 200)

# A square frame holding a circle, with a light grey (not line) disc beside the circle:
# anti-aliased by resvg like the shipped sketches.
SKETCH = rasterize_svg(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 300">'
    '<rect width="400" height="300" fill="#fff"/>'
    '<rect x="20.5" y="20.3" width="360" height="260" fill="none" stroke="#000" stroke-width="5"/>'
    '<circle cx="130.4" cy="150.2" r="80" fill="#fff" stroke="#000" stroke-width="4.3"/>'
    '<circle cx="300" cy="150" r="40" fill="#c8c8c8"/></svg>',
    400,
)
CIRCLE_CENTER = (130, 150)
FRAME_POINT = (300, 40)
GREY_POINT = (300, 150)


def _component(sketch, point):
    """The 4-connected non-line component holding `point` (x, y)."""
    labels, _ = ndimage.label(~line_mask(sketch), structure=ndimage.generate_binary_structure(2, 1))
    return labels == labels[point[1], point[0]]


def _inside_circle(radius):
    yy, xx = np.mgrid[0 : SKETCH.shape[0], 0 : SKETCH.shape[1]]
    return (xx + 0.5 - 130.4) ** 2 + (yy + 0.5 - 150.2) ** 2 < radius**2


def test_fill_stays_inside_its_closed_region():
    layer = flood_fill(blank_color_layer(SKETCH.shape), SKETCH, CIRCLE_CENTER, RED)
    painted = painted_mask(layer, SKETCH)
    assert painted[150, 130]
    assert not (painted & ~_inside_circle(80)).any()  # nothing beyond the stroke's centre
    assert painted[_inside_circle(75)].all()  # everything well inside


def test_fill_leaves_line_pixels_untouched_in_the_composite():
    layer = flood_fill(blank_color_layer(SKETCH.shape), SKETCH, CIRCLE_CENTER, RED)
    layer = flood_fill(layer, SKETCH, FRAME_POINT, BLUE)
    out = composite(layer, SKETCH)
    lines = line_mask(SKETCH)
    assert lines.sum() > 1000
    np.testing.assert_array_equal(out[lines], np.repeat(SKETCH[lines][:, None], 3, axis=1))


def test_fill_reaches_the_line_without_a_white_halo():
    region = fill_region(SKETCH, CIRCLE_CENTER)
    np.testing.assert_array_equal(region, _component(SKETCH, CIRCLE_CENTER))
    layer = flood_fill(blank_color_layer(SKETCH.shape), SKETCH, CIRCLE_CENTER, RED)
    out = composite(layer, SKETCH).astype(int)
    # every pixel from the fill up to and including the line's inner half: no near-white
    band = ndimage.binary_dilation(region, iterations=3) & _inside_circle(80)
    assert not (out[band].min(axis=1) > 200).any()


def test_fill_without_growing_under_the_edge_would_leave_a_halo():
    naive = fill_region(SKETCH, CIRCLE_CENTER, edge_grow=0)
    halo = _component(SKETCH, CIRCLE_CENTER) & ~naive
    assert halo.sum() > 100
    assert (SKETCH[halo] > 200).any()  # light anti-aliased pixels a naive fill leaves white


def test_tolerance_decides_whether_grey_areas_join_the_fill():
    grey_disc = SKETCH == 200
    strict = fill_region(SKETCH, FRAME_POINT, tolerance=32)
    assert not strict[grey_disc & ndimage.binary_erosion(grey_disc, iterations=3)].any()
    loose = fill_region(SKETCH, FRAME_POINT, tolerance=60)
    assert loose[grey_disc].all()
    only_grey = fill_region(SKETCH, GREY_POINT, tolerance=10, edge_grow=0)
    assert only_grey[grey_disc].all()
    assert not only_grey[~ndimage.binary_dilation(grey_disc)].any()  # at most its AA rim


def test_no_tolerance_lets_a_fill_cross_a_line():
    sketch = np.full((5, 9), 150, np.uint8)
    sketch[:, 4] = 60  # a dark grey line between two grey areas
    region = fill_region(sketch, (0, 2), tolerance=255)
    assert region[:, :4].all()
    assert not region[:, 4:].any()


def test_a_point_on_a_line_fills_nothing_and_says_so():
    layer = blank_color_layer(SKETCH.shape)
    on_line = (22, 150)  # the frame's left stroke
    assert SKETCH[150, 22] < LINE_THRESHOLD
    with pytest.raises(FillOnLineError, match=r"\(x=22, y=150\) is on the line art"):
        flood_fill(layer, SKETCH, on_line, RED)
    assert not layer.any()


def test_fill_rejects_points_outside_and_bad_colors():
    layer = blank_color_layer(SKETCH.shape)
    with pytest.raises(ValueError, match="outside the sketch of width 400 and height 300"):
        flood_fill(layer, SKETCH, (400, 10), RED)
    with pytest.raises(ValueError, match="rgb"):
        flood_fill(layer, SKETCH, CIRCLE_CENTER, (300, 0, 0))
    with pytest.raises(ValueError, match="color_layer"):
        flood_fill(layer[:10], SKETCH, CIRCLE_CENTER, RED)


def test_fill_repaints_a_region_over_earlier_paint_and_copies_the_layer():
    first = flood_fill(blank_color_layer(SKETCH.shape), SKETCH, CIRCLE_CENTER, RED)
    second = flood_fill(first, SKETCH, CIRCLE_CENTER, BLUE)
    assert set(map(tuple, painted_colors(second, SKETCH))) == {BLUE}
    assert set(map(tuple, painted_colors(first, SKETCH))) == {RED}


def test_line_mask_threshold_is_the_middle_grey():
    ramp = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert line_mask(ramp).sum() == LINE_THRESHOLD == 128
    rgb = np.stack([ramp] * 3, axis=2)
    np.testing.assert_array_equal(line_mask(rgb), line_mask(ramp))


def test_painted_mask_never_counts_line_art():
    everywhere = np.full((*SKETCH.shape, 4), 255, np.uint8)
    np.testing.assert_array_equal(painted_mask(everywhere, SKETCH), ~line_mask(SKETCH))


def test_composite_multiplies_color_by_the_sketch_luminance():
    sketch = np.array([[255, 128, 100]], np.uint8)
    layer = np.array([[[200, 100, 50, 255], [200, 100, 50, 255], [0, 0, 0, 0]]], np.uint8)
    out = composite(layer, sketch)
    np.testing.assert_array_equal(out, [[[200, 100, 50], [100, 50, 25], [100, 100, 100]]])


def test_fill_on_a_shipped_sketch_colors_one_part():
    apple = load_sketch_png(SKETCH_DIR / "apple.png")
    layer = flood_fill(blank_color_layer(apple.shape), apple, (512, 600), RED)
    painted = painted_mask(layer, apple)
    np.testing.assert_array_equal(painted, _component(apple, (512, 600)))
    assert 0.15 < painted.mean() < 0.4  # the body, not the stem, leaf or background
    assert not painted[0, 0] and not painted[250, 527]


def test_canvas_value_round_trips_the_color_layer_losslessly():
    layer = flood_fill(blank_color_layer(SKETCH.shape), SKETCH, CIRCLE_CENTER, RED)
    text = canvas_value("task-7", layer, elapsed_s=12.5)
    parsed = parse_canvas_value(text, SKETCH.shape)
    assert (parsed.task_id, parsed.elapsed_s) == ("task-7", 12.5)
    np.testing.assert_array_equal(parsed.color_layer, layer)
    blank = parse_canvas_value(canvas_value("task-7", blank_color_layer(SKETCH.shape)), SKETCH.shape)
    assert json.loads(canvas_value("task-7", None))["color_layer"] == ""
    assert not blank.color_layer.any()


def test_parse_canvas_value_rejects_lossy_images_and_wrong_sizes():
    layer = blank_color_layer(SKETCH.shape)
    layer[10:20, 10:20] = (*RED, 255)
    buf = io.BytesIO()
    Image.fromarray(layer, "RGBA").save(buf, format="WEBP")
    webp = "data:image/webp;base64," + base64.b64encode(buf.getvalue()).decode()
    with pytest.raises(ValueError, match="data:image/png;base64"):
        parse_canvas_value(json.dumps({"task_id": "t", "color_layer": webp, "elapsed_s": 1}), SKETCH.shape)
    with pytest.raises(ValueError, match="the sketch is 200x100"):
        parse_canvas_value(canvas_value("t", layer), (100, 200))
    with pytest.raises(ValueError, match="JSON"):
        parse_canvas_value("{not json", SKETCH.shape)
    with pytest.raises(ValueError, match="elapsed_s"):
        parse_canvas_value(json.dumps({"task_id": "t", "color_layer": "", "elapsed_s": -1}), SKETCH.shape)
    with pytest.raises(ValueError, match="empty"):
        parse_canvas_value("", SKETCH.shape)
    assert color_layer_to_png(layer)[:8] == b"\x89PNG\r\n\x1a\n"
