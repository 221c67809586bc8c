"""A designer's first session in Chromium: invite, consent, fill and brush, submit, reload;
and a submit clicked right after the last fill keeps that fill."""

import json

import pytest

from annotation.coloring.fill import fill_region, painted_color_counts, parse_canvas_value
from annotation.coloring.store import load_pixels
from annotation.coloring.tasks import layer_of_coloring
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png
from tests.browser import ARTIFACTS, expect, live_app, open_tab, page, sign_in  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
CANVAS = "#designer_canvas .cc-root"
BANANA = load_sketch_png(SKETCH_DIR / "banana.png")
PEEL, STEM = (705, 615), (825, 221)  # inside the outer stripe and the stem of banana.png
YELLOW, GREEN = "#f0d030", "#508f30"


def _to_client(page, x, y):
    """Window coordinates of sketch point (x, y) once the canvas stops moving."""
    return tuple(
        page.evaluate(
            """async ([x, y]) => {
            const root = document.querySelector('#designer_canvas .cc-root');
            root.scrollIntoView({block: 'center'});
            const api = root.parentElement.coloringCanvas;
            let previous = null;
            for (let i = 0; i < 60; i++) {
                await new Promise((resolve) => requestAnimationFrame(resolve));
                const c = api.imageToClient(x, y);
                if (previous && previous.x === c.x && previous.y === c.y) return [c.x, c.y];
                previous = c;
            }
            return [previous.x, previous.y];
        }""",
            [x, y],
        )
    )


def _committed(page, action):
    """Run `action`, then wait until the canvas has pushed its new value."""
    before = page.get_attribute(CANVAS, "data-committed")
    action()
    page.wait_for_function(
        "b => document.querySelector('#designer_canvas .cc-root').dataset.committed !== b", arg=before
    )


def _color(page, hex_color):
    page.fill("#designer_canvas .cc-hex", hex_color)
    page.press("#designer_canvas .cc-hex", "Enter")


def _tool(page, tool):
    page.click(f"#designer_canvas button[data-tool={tool}]")


def _fill(page, point, hex_color):
    _color(page, hex_color)
    _tool(page, "fill")
    _committed(page, lambda: page.mouse.click(*_to_client(page, point[0] + 0.5, point[1] + 0.5)))


def _brush(page, start, end, hex_color):
    _color(page, hex_color)
    _tool(page, "brush")

    def stroke():
        page.mouse.move(*_to_client(page, *start))
        page.mouse.down()
        page.mouse.move(*_to_client(page, *end), steps=10)
        page.mouse.up()

    _committed(page, stroke)


def test_a_designer_colors_submits_and_a_reload_keeps_progress_and_work(live_app, page):
    [(_, link)] = live_app.invite("designer", background="yes")
    assert sign_in(page, link) == "D0001"
    open_tab(page, "Coloring")
    expect(page.locator("#designer_consent_text")).to_contain_text("Consent to take part")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "designer-consent.png"), full_page=True)
    page.get_by_label("I have read this information").check()
    page.get_by_role("button", name="I agree: continue").click()
    expect(page.locator("#designer_instructions_text")).to_contain_text("How to color")
    expect(page.locator("#designer_examples img")).to_have_count(3)
    page.screenshot(path=str(ARTIFACTS / "designer-instructions.png"), full_page=True)
    page.get_by_role("button", name="I have read the instructions").click()

    header = page.locator("#designer_header")
    expect(header.locator(".dz-concept")).to_have_text("banana")
    expect(header.locator(".dz-progress")).to_have_text("Practice · 0 of 3 done")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    _fill(page, PEEL, YELLOW)
    _brush(page, (STEM[0] - 6, STEM[1] - 20), (STEM[0] + 4, STEM[1] + 20), GREEN)
    page.screenshot(path=str(ARTIFACTS / "designer-task-view.png"), full_page=True)
    key = json.loads(page.input_value("#designer_task textarea"))["canvas_key"]

    page.get_by_role("button", name="Submit this coloring").click()
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of banana")
    expect(header.locator(".dz-concept")).to_have_text("rotten apple")
    expect(header.locator(".dz-progress")).to_have_text("Practice · 1 of 3 done")
    assert page.evaluate("k => localStorage.getItem('colorconcept:wip:' + k)", key) is None
    # "My submissions" is built when it opens (not after each submission while closed).
    page.locator("#designer_submissions_box").get_by_text("My submissions").first.click()
    expect(page.locator("#designer_table [role=row][data-index]")).to_have_count(1)
    expect(page.locator("#designer_gallery img")).to_have_count(1)

    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    _fill(page, (500, 600), "#704a28")  # work in progress on the rotten apple
    page.reload()
    open_tab(page, "Coloring")
    expect(header.locator(".dz-progress")).to_have_text("Practice · 1 of 3 done")
    expect(header.locator(".dz-concept")).to_have_text("rotten apple")
    expect(page.locator("#designer_canvas .cc-status")).to_have_text(
        "Restored your unsaved work for this sketch."
    )
    assert page.js_errors == []

    [coloring] = live_app.query("select * from colorings")
    image, mask = load_pixels(live_app.config.data_dir, coloring)
    counts = painted_color_counts(layer_of_coloring(image, mask), BANANA)
    assert list(counts) == [YELLOW, GREEN]
    assert counts[YELLOW] == fill_region(BANANA, PEEL).sum()
    assert (coloring["concept_key"], coloring["practice"]) == ("banana", 1)
    assert coloring["seconds_spent"] > 0


def _start_practice(live_app, page) -> None:
    """A new designer signs in, agrees, reads the instructions: the first practice task."""
    [(_, link)] = live_app.invite("designer", background="yes")
    sign_in(page, link)
    open_tab(page, "Coloring")
    page.get_by_label("I have read this information").check()
    page.get_by_role("button", name="I agree: continue").click()
    page.get_by_role("button", name="I have read the instructions").click()
    expect(page.locator("#designer_header .dz-concept")).to_have_text("banana")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")


def test_a_submit_clicked_right_after_the_last_fill_stores_that_fill(live_app, page):
    _start_practice(live_app, page)
    _fill(page, PEEL, YELLOW)
    _color(page, GREEN)
    _tool(page, "fill")
    stem = _to_client(page, STEM[0] + 0.5, STEM[1] + 0.5)
    committed = page.get_attribute(CANVAS, "data-committed")
    # The click reaches the button a few ms after the fill, well inside the canvas's
    # 250 ms write delay: without the flush the stem's fill would be lost.
    page.mouse.click(*stem)
    unflushed = page.evaluate(
        """b => {
            const before = document.querySelector('#designer_canvas .cc-root').dataset.committed;
            document.querySelector('#designer_submit').click();
            return before === b;
        }""",
        committed,
    )
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of banana")
    [coloring] = live_app.query("select * from colorings")
    image, mask = load_pixels(live_app.config.data_dir, coloring)
    counts = painted_color_counts(layer_of_coloring(image, mask), BANANA)
    assert counts == {YELLOW: fill_region(BANANA, PEEL).sum(), GREEN: fill_region(BANANA, STEM).sum()}
    assert unflushed, "the fill was written before the click: the race was not exercised"
    assert page.js_errors == []


def _fits(page) -> dict:
    """Where the canvas, its last line and Submit end, with the page scrolled to its top."""
    return page.evaluate(
        """() => {
            window.scrollTo(0, 0);
            const bottom = (sel) => document.querySelector(sel).getBoundingClientRect().bottom;
            const api = document.querySelector('#designer_canvas .cc-root').parentElement.coloringCanvas;
            return {
                window: window.innerHeight,
                canvas: bottom('#designer_canvas .cc-viewport'),
                help: bottom('#designer_canvas .cc-help'),
                submit: bottom('#designer_submit'),
                scale: api.state().scale,
                fit: api.state().fit,
                label: document.querySelector('#designer_canvas .cc-zoom-level').textContent,
            };
        }"""
    )


def test_the_task_fits_the_window_shows_the_true_zoom_and_undo_survives_a_reload(live_app, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    _start_practice(live_app, page)
    for width, height in ((1400, 1000), (1366, 768)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_function(
            "h => document.querySelector('#designer_canvas .cc-help').getBoundingClientRect().bottom"
            " <= h && document.querySelector('#designer_canvas .cc-viewport').clientHeight > 320",
            arg=height,
        )
        fit = _fits(page)
        page.screenshot(path=str(ARTIFACTS / f"designer-fit-{width}x{height}.png"))
        assert max(fit["canvas"], fit["help"], fit["submit"]) <= fit["window"], fit
        # The fit view of the 1024 px sketch is smaller than life, and the label says how much.
        assert fit["scale"] == pytest.approx(fit["fit"]) and fit["scale"] < 1
        assert fit["label"] == f"{round(fit['scale'] * 100)}%"
    _fill(page, PEEL, YELLOW)
    _fill(page, STEM, GREEN)
    page.reload()
    open_tab(page, "Coloring")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    undo = page.locator("#designer_canvas [data-action=undo]")
    expect(undo).to_be_enabled()  # the history came back with the work
    api = "document.querySelector('#designer_canvas .cc-root').parentElement.coloringCanvas"
    assert page.evaluate(f"() => {api}.state().undo") == 2
    _committed(page, undo.click)
    value = json.loads(page.evaluate(f"() => {api}.flush()"))
    layer = parse_canvas_value(json.dumps(value), BANANA.shape).color_layer
    assert layer[PEEL[1], PEEL[0], 3] == 255 and layer[STEM[1], STEM[0], 3] == 0
    expect(page.locator("#designer_canvas [data-action=redo]")).to_be_enabled()
    assert page.js_errors == []
