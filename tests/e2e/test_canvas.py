"""The coloring canvas in headless Chromium, against the real Gradio demo server."""

import base64
import io
import json
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from PIL import Image

from annotation.coloring.fill import (
    blank_color_layer,
    composite,
    fill_region,
    flood_fill,
    line_mask,
    painted_color_counts,
    parse_canvas_value,
)
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png, png_data_url
from app.coloring_canvas import (
    build_demo,
    canvas_update,
    color_names,
    coloring_canvas,
    flush_js,
    inspect_canvas_value,
    served_files,
)
from app.common import compact_js
from tests.browser import TIMEOUT_MS, playwright_api

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WEB = Path(__file__).resolve().parents[2] / "assets" / "web"
APPLE = load_sketch_png(SKETCH_DIR / "apple.png")
BODY = (512, 600)
RED, BLUE = (0xD6, 0x28, 0x28), (0x1D, 0x4E, 0xD8)  # the default color and one typed in
API = "document.querySelector('#demo_canvas .cc-root').parentElement.coloringCanvas"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def demo_url():
    demo = build_demo("apple")
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


@pytest.fixture
def page(module_chromium, demo_url):
    context = module_chromium.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    _open(page, demo_url)
    yield page
    context.close()
    assert not errors, errors


def _open(page, url):
    page.goto(url)
    page.wait_for_selector("#demo_canvas .cc-root[data-ready=true]", timeout=TIMEOUT_MS)
    # The rest of the page (fonts, Gradio's late components) may still move the canvas on a
    # busy machine; a click aimed before that lands beside the point and commits nothing.
    page.wait_for_load_state("networkidle")


def _to_client(page, x, y):
    """Window coordinates of sketch point (x, y), once the scrolled-in canvas stops moving."""
    return tuple(
        page.evaluate(
            """async ([x, y]) => {
            document.querySelector('#demo_canvas .cc-root').scrollIntoView();
            const api = document.querySelector('#demo_canvas .cc-root').parentElement.coloringCanvas;
            const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
            let previous = null;
            for (let i = 0; i < 60; i++) {
                await frame();
                const c = api.imageToClient(x, y);
                if (previous && previous.x === c.x && previous.y === c.y) return [c.x, c.y];
                previous = c;
            }
            return [previous.x, previous.y];
        }""",
            [x, y],
        )
    )


def _click_image(page, x, y):
    """Click the centre of sketch pixel (x, y) and wait for the value to reach Gradio."""
    with _committing(page):
        page.mouse.click(*_to_client(page, x + 0.5, y + 0.5))


def _drag(page, start, end):
    """Drag the mouse between two sketch points with the current tool."""
    with _committing(page):
        page.mouse.move(*_to_client(page, *start))
        page.mouse.down()
        page.mouse.move(*_to_client(page, *end), steps=15)
        page.mouse.up()


class _committing:
    """Wait until the canvas has pushed a new value after the block's actions."""

    def __init__(self, page):
        self.page = page

    def __enter__(self):
        self.before = self.page.get_attribute("#demo_canvas .cc-root", "data-committed")

    def __exit__(self, *exc):
        if exc[0] is None:
            self.page.wait_for_function(
                "b => document.querySelector('#demo_canvas .cc-root').dataset.committed !== b",
                arg=self.before,
                timeout=TIMEOUT_MS,
            )


def _server_view(page):
    """Press the demo's check button; return its report and the decoded color layer."""
    old = page.input_value("#demo_report textarea")
    page.click("#demo_check")
    page.wait_for_function(
        "old => { const v = document.querySelector('#demo_report textarea').value; return v && v !== old; }",
        arg=old,
        timeout=TIMEOUT_MS,
    )
    report = json.loads(page.input_value("#demo_report textarea"))
    layer = parse_canvas_value(json.dumps(report), APPLE.shape).color_layer
    return report, layer


def _displayed(page):
    url = page.evaluate("() => document.querySelector('#demo_canvas .cc-canvas').toDataURL()")
    png = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _distance_to_segment(a, b):
    yy, xx = np.mgrid[0 : APPLE.shape[0], 0 : APPLE.shape[1]] + 0.5
    (ax, ay), (bx, by) = a, b
    t = np.clip(((xx - ax) * (bx - ax) + (yy - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2), 0, 1)
    return np.hypot(xx - ax - t * (bx - ax), yy - ay - t * (by - ay))


def _choose(page, hex_color, tolerance):
    page.fill("#demo_canvas .cc-hex", hex_color)
    page.press("#demo_canvas .cc-hex", "Enter")
    page.locator("#demo_canvas .cc-tol").evaluate(
        "(el, t) => { el.value = t; el.dispatchEvent(new Event('input')); }", tolerance
    )


def test_browser_fills_match_the_python_twin_at_any_tolerance(page):
    fills = [  # (point, tolerance, color): white, grey anti-aliased and repainted seeds
        ((30, 30), 0, "#8ecae6"),
        ((700, 204), 127, "#2a9d8f"),  # an anti-aliased pixel (luminance 160) above the leaf
        ((512, 600), 10, "#e63946"),
        ((700, 230), 64, "#52b788"),
        ((512, 600), 127, "#f4a261"),
    ]
    expected = blank_color_layer(APPLE.shape)
    for point, tolerance, color in fills:
        _choose(page, color, tolerance)
        _click_image(page, *point)
        rgb = tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
        expected = flood_fill(expected, APPLE, point, rgb, tolerance=tolerance)
    _, layer = _server_view(page)
    np.testing.assert_array_equal(layer, expected)


def test_fill_and_brush_reach_the_server_with_the_lines_untouched(page):
    _click_image(page, *BODY)
    page.fill("#demo_canvas .cc-hex", "#1D4ED8")
    page.press("#demo_canvas .cc-hex", "Enter")
    page.click("#demo_canvas [data-tool=brush]")
    start, end = (600, 140), (780, 250)  # across the background and the leaf's outline
    _drag(page, start, end)
    report, layer = _server_view(page)

    region = fill_region(APPLE, BODY)
    red = np.all(layer == (*RED, 255), axis=2)
    blue = np.all(layer == (*BLUE, 255), axis=2)
    np.testing.assert_array_equal(red, region)  # the browser's fill is the Python twin's
    distance = _distance_to_segment(start, end)
    assert blue[distance <= 10].all()  # a 24 px brush
    assert not blue[distance > 13].any()
    assert not (layer[..., 3] > 0)[~(red | blue)].any()
    assert report["task_id"] == "demo-apple"
    assert report["colors"] == painted_color_counts(layer, APPLE)
    assert report["colors"]["#d62828"] == region.sum()

    shown = _displayed(page)
    lines = line_mask(APPLE)
    assert (blue & lines).sum() > 100  # the stroke crossed the leaf's outline...
    np.testing.assert_array_equal(shown[lines], np.repeat(APPLE[lines][:, None], 3, axis=1))
    np.testing.assert_array_equal(shown, composite(layer, APPLE))  # ...which stays black
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#demo_canvas").screenshot(path=str(ARTIFACTS / "coloring_canvas.png"))


def test_a_click_on_a_line_fills_nothing_and_says_so(page):
    dark = np.nonzero(APPLE[600] < 40)[0]
    x = int(dark[dark < 512].mean())  # the middle of the body's left outline on row 600
    page.mouse.click(*_to_client(page, x + 0.5, 600.5))
    assert "on a line" in page.inner_text("#demo_canvas .cc-status")
    assert page.evaluate(f"() => {API}.state().undo") == 0
    report, layer = _server_view(page)
    assert report["color_layer"] == "" and report["painted_px"] == 0
    assert not layer.any()


def test_work_survives_a_reload_and_undo_redo_round_trip(page, demo_url):
    page.fill("#demo_canvas .cc-hex", "#705420")
    page.press("#demo_canvas .cc-hex", "Enter")
    _click_image(page, *BODY)
    page.reload()
    page.wait_for_selector("#demo_canvas .cc-root[data-ready=true]", timeout=TIMEOUT_MS)
    page.wait_for_load_state("networkidle")
    assert "Restored" in page.inner_text("#demo_canvas .cc-status")
    # The color painted with is the color in hand again (it went back to the default red, and
    # the next fill painted red: outside probe 132).
    assert page.evaluate(f"() => {API}.state().color") == "#705420"
    assert page.input_value("#demo_canvas .cc-hex") == "#705420"
    _, layer = _server_view(page)
    np.testing.assert_array_equal(layer[..., 3] > 0, fill_region(APPLE, BODY))

    _click_image(page, 30, 30)  # the background
    with _committing(page):
        page.click("#demo_canvas [data-action=undo]")
    _, undone = _server_view(page)
    np.testing.assert_array_equal(undone, layer)
    with _committing(page):
        page.click("#demo_canvas [data-action=redo]")
    _, redone = _server_view(page)
    assert redone[30, 30, 3] == 255 and redone[600, 512, 3] == 255
    with _committing(page):
        page.click("#demo_canvas [data-action=reset]")
    report, cleared = _server_view(page)
    assert report["color_layer"] == "" and not cleared.any()
    # Undo pressed with the keyboard until it disables itself hands the focus to Redo (it fell
    # to the page's top: outsider 95).
    undo = page.locator("#demo_canvas [data-action=undo]")
    for _ in range(10):
        if not undo.is_enabled():
            break
        with _committing(page):
            undo.focus()
            undo.press("Enter")
    assert not undo.is_enabled()
    playwright_api.expect(page.locator("#demo_canvas [data-action=redo]")).to_be_focused()


def test_zoomed_in_fills_land_on_the_clicked_pixel(page):
    leaf_half = (700, 200)  # a small region: the upper half of the leaf
    page.mouse.move(*_to_client(page, *leaf_half))
    for _ in range(3):
        page.mouse.wheel(0, -400)  # zooms about the pointer
    page.click("#demo_canvas [data-action=zoom-in]")
    assert page.evaluate(f"() => {API}.state().scale") > 2
    _click_image(page, *leaf_half)
    _, layer = _server_view(page)
    np.testing.assert_array_equal(layer[..., 3] > 0, fill_region(APPLE, leaf_half))


def test_switching_sketches_keeps_each_tasks_work(page):
    _click_image(page, *BODY)
    page.click("#demo_sketch input")
    page.get_by_role("option", name="cabin").click()
    page.wait_for_function(
        f"() => {API}.state().taskId === 'demo-cabin' && {API}.state().ready", timeout=TIMEOUT_MS
    )
    assert page.evaluate(f"() => {API}.state().width") == 1024
    page.click("#demo_sketch input")
    page.get_by_role("option", name="apple").click()
    page.wait_for_function(
        f"() => {API}.state().taskId === 'demo-apple' && {API}.state().ready", timeout=TIMEOUT_MS
    )
    _, layer = _server_view(page)
    np.testing.assert_array_equal(layer[..., 3] > 0, fill_region(APPLE, BODY))


def test_eraser_picker_and_hex_entry(page):
    _click_image(page, *BODY)
    page.click("#demo_canvas [data-tool=eraser]")
    start, end = (400, 600), (620, 600)
    _drag(page, start, end)
    _, layer = _server_view(page)
    distance = _distance_to_segment(start, end)
    region = fill_region(APPLE, BODY)
    assert not layer[distance <= 10, 3].any()  # a 24 px eraser
    assert (layer[region & (distance > 13), 3] == 255).all()
    assert not layer[~region, 3].any()
    # A reload gives back the tool of the last edit (it gave the fill, and the next click
    # filled where the designer meant to erase: outside probe 227).
    page.reload()
    page.wait_for_selector("#demo_canvas .cc-root[data-ready=true]", timeout=TIMEOUT_MS)
    page.wait_for_load_state("networkidle")
    assert "Your work is restored" in page.inner_text("#demo_canvas .cc-status")
    assert page.evaluate(f"() => {API}.state().tool") == "eraser"
    assert page.get_attribute("#demo_canvas button[data-tool=eraser]", "aria-pressed") == "true"

    page.fill("#demo_canvas .cc-hex", "not a color")
    page.press("#demo_canvas .cc-hex", "Enter")
    assert "is not a hex color" in page.inner_text("#demo_canvas .cc-status")
    page.fill("#demo_canvas .cc-hex", "#0a0")
    page.press("#demo_canvas .cc-hex", "Enter")
    assert page.evaluate(f"() => {API}.state().color") == "#00aa00"
    page.click("#demo_canvas [data-tool=picker]")
    page.mouse.click(*_to_client(page, 512.5, 700.5))
    assert page.evaluate(f"() => {API}.state().color") == "#d62828"
    assert page.input_value("#demo_canvas .cc-hex") == "#d62828"


def test_canvas_update_sends_every_prop_the_script_reads():
    update = canvas_update("task-2", "data:image/png;base64,AAAA", forget_task_id="task-1")
    assert update == {
        "__type__": "update",
        "value": "",
        "task_id": "task-2",
        "sketch_src": "data:image/png;base64,AAAA",
        "forget_task_id": "task-1",
        "line_threshold": 128,
        "edge_grow": 2,
    }
    canvas = coloring_canvas(task_id="task-1", elem_id="c")
    assert canvas.props == {"task_id": "task-1", "sketch_src": "", "line_threshold": 128, "edge_grow": 2}
    with pytest.raises(ValueError, match="tolerance"):
        coloring_canvas(tolerance=200)


def test_the_settings_read_once_travel_in_the_loader_and_the_script_and_names_are_fetched():
    # A canvas first shown by an update gets that update's props only (the Coloring tab's):
    # the settings it reads once come with its loader, which no update replaces. The script
    # and the names table are files the loader fetches (`served_files`), not in the page.
    canvas = coloring_canvas(tolerance=12, swatches=("#123456",))
    first, rest = canvas.js_on_load.split("\n", 1)
    assert first.startswith("const CANVAS = ") and first.endswith(";")
    spec = json.loads(first.removeprefix("const CANVAS = ").removesuffix(";"))
    files = served_files()
    assert spec == {
        "settings": {"tolerance": 12, "swatches": ["#123456"]},
        "script": str(files["script"]),
        "color_names": str(files["color_names"]),
    }
    assert rest == compact_js((WEB / "coloring_loader.js").read_text(encoding="utf-8"))
    assert files["script"].read_bytes() == (WEB / "coloring.js").read_bytes()
    assert json.loads(files["color_names"].read_bytes()) == color_names()
    assert len(canvas.js_on_load) < 3_000


def test_inspect_canvas_value_reports_bad_values_to_the_user():
    with pytest.raises(gr.Error, match="data:image/png;base64"):
        inspect_canvas_value(
            APPLE, json.dumps({"task_id": "t", "color_layer": "data:image/jpeg;base64,AAAA", "elapsed_s": 0})
        )


def test_flush_js_sends_the_flushed_value_in_the_canvas_place_and_refuses_bad_arguments():
    script = flush_js("designer_canvas", 1, 2)
    assert "args.slice(0, 2)" in script and "values[1] = api.flush()" in script
    assert 'document.querySelector("#designer_canvas .cc-root")' in script
    with pytest.raises(ValueError, match=r"`elem_id` must be letters.*got 'a\"\)'"):
        flush_js('a")', 0, 1)
    with pytest.raises(ValueError, match=r"`position` must be in \[0, 2\), got 2"):
        flush_js("c", 2, 2)


def _palette_state(page, elem_id="demo_canvas"):
    return page.evaluate(
        """id => {
            const root = document.querySelector('#' + id + ' .cc-root');
            const value = (c) => root.querySelector('.cc-' + c).value;
            return {color: root.parentElement.coloringCanvas.state().color, hex: value('hex'),
                    rgb: [value('r'), value('g'), value('b')]};
        }""",
        elem_id,
    )


def _click_fraction(page, selector, fx, fy):
    box = page.locator(selector).bounding_box()
    page.mouse.click(box["x"] + fx * (box["width"] - 1), box["y"] + fy * (box["height"] - 1))


def test_the_picker_sets_colors_from_the_square_the_hue_bar_rgb_and_hex(page):
    palette = page.locator("#demo_canvas .cc-palette")
    expect = playwright_api.expect
    expect(palette).to_be_visible()
    expect(page.locator("#demo_canvas .cc-presets-box")).to_be_hidden()  # no preset swatches by default
    square, hue = page.locator("#demo_canvas .cc-sv"), page.locator("#demo_canvas .cc-hue")
    for _ in range(10):  # keys move the square's knob to full saturation and brightness
        square.press("Shift+ArrowRight")
        square.press("Shift+ArrowUp")
    assert _palette_state(page) == {"color": "#ff0000", "hex": "#ff0000", "rgb": ["255", "0", "0"]}
    hue.press("ArrowRight")  # one degree on: a touch of green
    assert _palette_state(page)["color"] == "#ff0400"
    # Each slider reads out the color's name, not a number alone (outsider 95).
    name = page.inner_text("#demo_canvas .cc-current-name")
    assert name and hue.get_attribute("aria-valuetext") == f"hue 1°: {name}"
    assert square.get_attribute("aria-valuetext") == f"saturation 100%, brightness 100%: {name}"
    hue.press("PageUp")  # a large step: 30 degrees
    assert hue.get_attribute("aria-valuenow") == "31"
    hue.press("PageDown")
    assert _palette_state(page)["color"] == "#ff0400"
    _click_fraction(page, "#demo_canvas .cc-hue", 0.5, 0.5)  # the middle of the bar: cyan
    r, g, b = (int(v) for v in _palette_state(page)["rgb"])
    assert (r, g) == (0, 255) and b > 240
    _click_fraction(page, "#demo_canvas .cc-sv", 0.5, 0.5)  # half saturation, half brightness
    r, g, b = (int(v) for v in _palette_state(page)["rgb"])
    assert abs(r - 64) <= 2 and abs(g - 128) <= 2 and abs(b - 128) <= 3
    for channel, number in zip("rgb", (10, 20, 30)):
        page.fill(f"#demo_canvas .cc-{channel}", str(number))
        page.press(f"#demo_canvas .cc-{channel}", "Enter")
    assert _palette_state(page) == {"color": "#0a141e", "hex": "#0a141e", "rgb": ["10", "20", "30"]}
    page.fill("#demo_canvas .cc-g", "300")
    page.press("#demo_canvas .cc-g", "Enter")
    assert "from 0 to 255" in page.inner_text("#demo_canvas .cc-status")
    assert _palette_state(page)["color"] == "#0a141e"
    _click_image(page, *BODY)  # a fill puts the color among the recent ones
    recent = page.locator("#demo_canvas .cc-recent .cc-swatch").first
    assert recent.get_attribute("data-color") == "#0a141e"
    page.fill("#demo_canvas .cc-hex", "#1d4ed8")
    page.press("#demo_canvas .cc-hex", "Enter")
    recent.click()
    assert _palette_state(page)["color"] == "#0a141e"
    palette.screenshot(path=str(ARTIFACTS / "canvas-color-picker.png"))
    _, layer = _server_view(page)
    assert tuple(layer[BODY[1], BODY[0], :3]) == (10, 20, 30)


def test_the_current_and_recent_colors_show_their_names(page):
    expect = playwright_api.expect
    name = page.locator("#demo_canvas .cc-current-name")
    expect(name).to_have_text("vivid red · red")  # the default #d62828
    page.fill("#demo_canvas .cc-hex", "#705420")
    page.press("#demo_canvas .cc-hex", "Enter")
    expect(name).to_have_text("moderate olive brown · brown")
    assert page.get_attribute("#demo_canvas .cc-current-swatch", "title") == "moderate olive brown · brown"
    _click_image(page, *BODY)  # the fill puts the color among the recent ones, named on hover
    recent = page.locator("#demo_canvas .cc-recent .cc-swatch").first
    expect(recent).to_have_attribute("title", "moderate olive brown · brown (#705420)")
    assert recent.get_attribute("aria-label") == "Use moderate olive brown · brown, #705420"
    # Greys are named without a tint (naming's rule 4; the nearest centroid alone says
    # "greenish white", "greenish gray"), a name that is its own basic term once.
    page.fill("#demo_canvas .cc-hex", "#ffffff")
    page.press("#demo_canvas .cc-hex", "Enter")
    expect(name).to_have_text("white")
    page.fill("#demo_canvas .cc-hex", "#777777")
    page.press("#demo_canvas .cc-hex", "Enter")
    expect(name).to_have_text("medium gray · gray")
    # Greys at a border between two neutrals, named exactly, not as their table cell's centre
    # (#404040 read "dark gray", #cccccc "white": outsider 84).
    for grey, said in (("#404040", "black"), ("#cccccc", "light gray · gray")):
        page.fill("#demo_canvas .cc-hex", grey)
        page.press("#demo_canvas .cc-hex", "Enter")
        expect(name).to_have_text(said)
    page.fill("#demo_canvas .cc-hex", "#fffff8")  # a grey cell holds #fcfcfc-#ffffff only
    page.press("#demo_canvas .cc-hex", "Enter")
    expect(name).to_have_text("greenish white · white")


def test_organisers_preset_swatches_show_in_the_picker(module_chromium):
    with gr.Blocks() as demo:
        coloring_canvas(
            task_id="presets",
            sketch_src=png_data_url((SKETCH_DIR / "apple.png").read_bytes()),
            swatches=("#123456", "#abcdef"),
            elem_id="demo_canvas",
        )
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    context = module_chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        _open(page, url)
        presets = page.locator("#demo_canvas .cc-presets .cc-swatch")
        playwright_api.expect(presets).to_have_count(2)
        assert presets.evaluate_all("els => els.map((e) => e.dataset.color)") == ["#123456", "#abcdef"]
        playwright_api.expect(presets.nth(0)).to_have_attribute("title", "dark blue · blue (#123456)")
        assert presets.nth(1).get_attribute("title") == "very light blue · blue (#abcdef)"
        presets.nth(1).click()
        assert _palette_state(page)["color"] == "#abcdef"
        page.locator("#demo_canvas .cc-palette").screenshot(
            path=str(ARTIFACTS / "canvas-preset-swatches.png")
        )
    finally:
        context.close()
        demo.close()


def test_a_canvas_first_shown_by_an_update_names_colors_and_offers_the_presets(module_chromium):
    # The Coloring tab's canvas sits in a box hidden until a handler shows it with a task.
    src = png_data_url((SKETCH_DIR / "apple.png").read_bytes())
    with gr.Blocks() as demo:
        with gr.Column(visible=False) as box:
            canvas = coloring_canvas(swatches=("#123456",), elem_id="demo_canvas")
        show = gr.Button("Show", elem_id="demo_show")
        show.click(lambda: (gr.Column(visible=True), canvas_update("shown", src)), None, [box, canvas])
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    context = module_chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(url)
        page.click("#demo_show")
        page.wait_for_selector("#demo_canvas .cc-root[data-ready=true]")
        playwright_api.expect(page.locator("#demo_canvas .cc-current-name")).to_have_text("vivid red · red")
        preset = page.locator("#demo_canvas .cc-presets .cc-swatch")
        playwright_api.expect(preset).to_have_attribute("title", "dark blue · blue (#123456)")
    finally:
        context.close()
        demo.close()


def test_a_canvas_says_when_its_script_did_not_load_and_works_unnamed_without_the_table(
    module_chromium, tmp_path
):
    src = png_data_url((SKETCH_DIR / "apple.png").read_bytes())
    files = served_files()
    with gr.Blocks() as demo:
        for elem_id, key in (("no_script", "script"), ("no_names", "color_names")):
            canvas = coloring_canvas(task_id=elem_id, sketch_src=src, elem_id=elem_id)
            missing = tmp_path / f"missing-{files[key].name}"  # never written: Gradio answers 403
            canvas.js_on_load = canvas.js_on_load.replace(
                json.dumps(str(files[key])), json.dumps(str(missing)), 1
            )
            assert str(missing) in canvas.js_on_load
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    context = module_chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(url)
        page.wait_for_selector("#no_names .cc-root[data-ready=true]")
        playwright_api.expect(page.locator("#no_script .cc-status")).to_contain_text(
            "The coloring tool did not load (HTTP 403"
        )
        assert page.get_attribute("#no_script .cc-root", "data-ready") == "false"
        assert page.inner_text("#no_names .cc-current-name") == ""  # unnamed, but it loaded its sketch
        assert (
            page.evaluate(
                "() => document.querySelector('#no_names .cc-root').parentElement.coloringCanvas.state().width"
            )
            == 1024
        )
        assert errors == []
    finally:
        context.close()
        demo.close()


def test_two_fingers_zoom_and_pan_and_leave_the_drawing_as_it_was(module_chromium, demo_url):
    """On a phone a pinch painted: the first finger's brush stroke stayed (one Undo left a dot
    that was submitted) and with the fill tool the first finger filled a region (outsider 71).
    Real touches through Chromium's DevTools protocol: one finger paints, a second one makes it
    a pinch, which zooms about the fingers and takes the stroke back; a tap still fills."""
    context = module_chromium.new_context(viewport={"width": 1280, "height": 1000}, has_touch=True)
    try:
        page = context.new_page()
        _open(page, demo_url)
        touch = context.new_cdp_session(page)

        def fingers(kind, *points):
            touch.send(
                "Input.dispatchTouchEvent",
                {"type": kind, "touchPoints": [{"x": x, "y": y, "id": i} for i, (x, y) in enumerate(points)]},
            )

        page.click("#demo_canvas [data-tool=brush]")
        touch_action = (
            "() => getComputedStyle(document.querySelector('#demo_canvas .cc-viewport')).touchAction"
        )
        assert page.evaluate(touch_action) == "none"  # a finger draws
        a = _to_client(page, *BODY)
        shown = _displayed(page)
        fingers("touchStart", a)
        fingers("touchMove", (a[0] + 20, a[1] + 5))
        assert page.evaluate(f"() => {API}.state().undo") == 0  # a stroke under way
        b = (a[0] + 60, a[1] + 60)
        fingers("touchStart", a, b)  # the second finger: a pinch
        scale = page.evaluate(f"() => {API}.state().scale")
        for step in range(1, 11):
            fingers("touchMove", (a[0] - 8 * step, a[1] - 8 * step), (b[0] + 8 * step, b[1] + 8 * step))
        fingers("touchEnd")
        state = page.evaluate(f"() => {API}.state()")
        assert state["scale"] > 1.5 * scale, (scale, state)
        assert state["undo"] == 0 and (_displayed(page) == shown).all()  # the stroke taken back

        page.click("#demo_canvas [data-action=fit]")
        page.click("#demo_canvas [data-tool=fill]")
        a = _to_client(page, *BODY)
        fingers("touchStart", a)
        fingers("touchStart", a, (a[0] + 80, a[1]))  # a pinch begun on the fill tool: no fill
        fingers("touchMove", (a[0] - 30, a[1]), (a[0] + 110, a[1]))
        fingers("touchEnd")
        assert page.evaluate(f"() => {API}.state().undo") == 0 and (_displayed(page) == shown).all()
        # A one-finger swipe on the fill tool scrolls the page, and fills nothing: it filled where
        # it started, and the drawing held the page still (outsider 117).
        assert page.evaluate(touch_action) == "pan-x pan-y"
        fingers("touchStart", a)
        for step in range(1, 8):
            fingers("touchMove", (a[0] + 3 * step, a[1] + 40 * step))
        fingers("touchEnd")
        assert page.evaluate(f"() => {API}.state().undo") == 0 and (_displayed(page) == shown).all()
        page.click("#demo_canvas [data-action=fit]")
        with _committing(page):  # a tap fills, once the finger lifts
            fingers("touchStart", _to_client(page, *BODY))
            fingers("touchEnd")
        _, layer = _server_view(page)
        assert tuple(layer[BODY[1], BODY[0], :3]) == RED
    finally:
        context.close()


def test_on_a_touch_screen_the_hue_bar_and_sliders_are_touch_targets(module_chromium, demo_url):
    """A phone showed the hue bar 14 px tall and the sliders 16 (outside probe 155): at least
    24 px where the pointer is a finger, as on a 390x844 touch screen; a mouse keeps them slim."""
    heights = (
        "() => [...document.querySelectorAll('#demo_canvas .cc-hue, #demo_canvas .cc-toolbar input[type=range]')]"
        ".map((e) => e.getBoundingClientRect().height)"
    )
    for touch, least in ((True, 24), (False, 0)):
        context = module_chromium.new_context(viewport={"width": 390, "height": 844}, has_touch=touch)
        try:
            page = context.new_page()
            _open(page, demo_url)
            assert page.evaluate("matchMedia('(pointer: coarse)').matches") is touch
            found = page.evaluate(heights)
            assert len(found) == 3 and min(found) >= least, found
            if not touch:
                assert page.evaluate(heights)[0] < 24  # the bar as it was
        finally:
            context.close()
