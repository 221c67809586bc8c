"""A designer's first session in Chromium: invite, consent, fill and brush, submit, reload;
a submit clicked right after the last fill keeps that fill; the canvas names colors, a
double click submits once, and each new sketch opens with the bucket fill, at the page's top."""

import io
import json
import re

import numpy as np
import pytest
from gradio_client import handle_file
from PIL import Image

from annotation.coloring.fill import fill_region, painted_color_counts, parse_canvas_value
from annotation.coloring.store import load_pixels
from annotation.coloring.tasks import layer_of_coloring
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png
from app.coloring_canvas import SERVED_FOLDER, served_files
from app.designer import reference_examples
from evaluation.color import naming
from storage import open_db
from tests.app_server import shared_app  # noqa: F401  (pytest fixture)
from tests.browser import (  # noqa: F401
    ARTIFACTS,
    LiveApp,
    expect,
    live_app,
    open_tab,
    page,
    second_click,
    settled,
    sign_in,
)
from tests.qc_data import add_coloring

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
    # The canvas's script and names table are not in the page: it fetches them (through the
    # guard) when the canvas first loads, once per page; a visitor's page has no canvas.
    fetched = []
    page.on("request", lambda request: fetched.append(request.url) if SERVED_FOLDER in request.url else None)
    page.goto(live_app.url)
    expect(page.locator("#start_status")).to_be_visible()
    settled(page)
    assert page.locator(CANVAS).count() == 0 and fetched == []
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
    assert sorted(url.rsplit("/", 1)[1] for url in fetched) == sorted(p.name for p in served_files().values())
    # An empty canvas is refused under the button pressed; the first edit clears it.
    submit_note = page.locator("#designer_submit_note")
    page.get_by_role("button", name="Submit this coloring").click()
    expect(submit_note).to_contain_text("Nothing is colored yet")
    submit_box, note_box = page.locator("#designer_submit").bounding_box(), submit_note.bounding_box()
    assert 0 <= note_box["y"] - (submit_box["y"] + submit_box["height"]) < 40
    page.screenshot(path=str(ARTIFACTS / "designer-empty-submit.png"))
    _fill(page, PEEL, YELLOW)
    expect(submit_note).to_have_text("")
    _brush(page, (STEM[0] - 6, STEM[1] - 20), (STEM[0] + 4, STEM[1] + 20), GREEN)
    page.screenshot(path=str(ARTIFACTS / "designer-task-view.png"), full_page=True)
    key = json.loads(page.input_value("#designer_task textarea"))["canvas_key"]
    # The task's JSON is the page's plumbing, kept in the DOM for the canvas and never shown.
    expect(page.locator("#designer_task")).to_be_hidden()

    page.get_by_role("button", name="Submit this coloring").click()
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of banana")
    expect(submit_note).to_have_text("")
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


def _start_practice(live_app, page) -> int:
    """A new designer signs in, agrees, reads the instructions: the first practice task.
    Returns the designer's annotator id."""
    annotator_id = _read_instructions(live_app, page)
    page.get_by_role("button", name="I have read the instructions").click()
    expect(page.locator("#designer_header .dz-concept")).to_have_text("banana")
    expect(page.get_by_role("heading", name="banana", exact=True)).to_be_visible()  # the concept, a heading
    expect(page.locator("#designer_header .dz-concept")).to_be_focused()  # not the page's top
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    return annotator_id


def _read_instructions(live_app, page) -> int:
    """A new designer signs in and agrees: the instructions show. Returns their annotator id."""
    [(annotator_id, link)] = live_app.invite("designer", background="yes")
    sign_in(page, link)
    open_tab(page, "Coloring")
    page.get_by_label("I have read this information").check()
    page.get_by_role("button", name="I agree: continue").click()
    expect(page.locator("#designer_instructions_text")).to_contain_text("How to color")
    expect(page.locator("#designer_read")).to_be_focused()  # the next step, not the page's top
    # The examples come with the instructions (not in every visitor's page) and show.
    examples = page.locator("#designer_examples img")
    expect(examples).to_have_count(len(reference_examples()))
    examples.first.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#designer_examples img')].every((i) => i.complete && i.naturalWidth > 0)"
    )
    # Served losslessly: the palette colors a designer is shown are the ones each was filled with.
    for source, (drawn, _) in zip(
        examples.evaluate_all("(images) => images.map((i) => i.src)"), reference_examples(), strict=True
    ):
        served = Image.open(io.BytesIO(page.request.get(source).body())).convert("RGB")
        np.testing.assert_array_equal(np.asarray(served), drawn)
    page.locator("#designer_read").focus()
    return annotator_id


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
    # The undo history is written to IndexedDB a moment after the work: wait for it (a reload
    # before then keeps the work without its history, slowly on a busy machine).
    page.wait_for_function(
        "() => { const r = document.querySelector('#designer_canvas .cc-root');"
        " return r.dataset.historySaved === String(r.parentElement.coloringCanvas.state().edit); }"
    )
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


def test_a_reload_says_when_the_undo_history_or_the_drawing_was_not_kept(live_app, page, tmp_path):
    """Outside probe 217: a reload right after an edit restored the work with no undo history,
    and a sketch the admin chose meanwhile showed a blank drawing, both without a word."""
    _start_practice(live_app, page)
    _fill(page, PEEL, YELLOW)
    status = page.locator("#designer_canvas .cc-status")
    api = "document.querySelector('#designer_canvas .cc-root').parentElement.coloringCanvas"
    page.wait_for_function(
        "() => { const r = document.querySelector('#designer_canvas .cc-root');"
        " return r.dataset.historySaved === String(r.parentElement.coloringCanvas.state().edit); }"
    )
    # The page left before its history was written: the work comes back, and says its history did not.
    page.evaluate(
        """() => new Promise((resolve, reject) => {
            const open = indexedDB.open('colorconcept-canvas');
            open.onsuccess = () => {
                const request = open.result.transaction('history', 'readwrite').objectStore('history').clear();
                request.onsuccess = () => { open.result.close(); resolve(); };
                request.onerror = reject;
            };
        })"""
    )
    page.reload()
    open_tab(page, "Coloring")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    expect(status).to_have_text(
        "Restored your unsaved work for this sketch; its undo history was not kept (the page was left "
        "while it was being saved), so Undo starts from here."
    )
    assert page.evaluate(f"() => {api}.state().undo") == 0
    # The admin gives banana another drawing while the task is held: the message counts the
    # task, and the page says why it starts blank.
    flipped = tmp_path / "banana.png"
    Image.fromarray(np.ascontiguousarray(BANANA[:, ::-1])).save(flipped)
    admin = live_app.admin_token()
    table, _ = live_app.client.predict(
        admin, [handle_file(flipped)], "(from the file names)", True, api_name="/sketches_import"
    )
    [[_, base, outcome]] = table["data"]
    assert base == "banana" and re.fullmatch(
        r"imported as sketch \d+\. Designers hold 1 task on banana: their pages show this drawing from "
        r"their next load; unsaved work on the earlier drawing is not carried over to this one \(their page "
        r"says so\) and comes back only if the concept goes back to that drawing\.",
        outcome,
    ), outcome
    page.reload()
    open_tab(page, "Coloring")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    expect(status).to_have_text(
        "This concept's drawing was changed since you last worked on it: your unsaved coloring of the "
        "earlier drawing does not fit this one, so this drawing starts blank (that coloring stays in this "
        "browser and comes back if the concept goes back to the earlier drawing)."
    )
    assert json.loads(page.evaluate(f"() => {api}.flush()"))["color_layer"] == ""
    # The first drawing chosen again: its work comes back.
    [shipped] = live_app.query("select id from sketches where base = 'banana' and source = 'shipped'")
    live_app.client.predict(admin, "banana", shipped["id"], "", api_name="/sketches_select")
    page.reload()
    open_tab(page, "Coloring")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    expect(status).to_have_text(re.compile("^Restored your unsaved work for this sketch"))
    layer = parse_canvas_value(page.evaluate(f"() => {api}.flush()"), BANANA.shape).color_layer
    assert layer[PEEL[1], PEEL[0], 3] == 255
    # The flipped drawing imported again, already in the library, is made the sketch again:
    # the line says so and counts the task (outside probe 218: it switched without a word).
    table, _ = live_app.client.predict(
        admin, [handle_file(flipped)], "(from the file names)", True, api_name="/sketches_import"
    )
    [[_, _, outcome]] = table["data"]
    assert re.fullmatch(
        r"already in the library as sketch \d+ \(the same drawing\): nothing new stored; it is now the sketch "
        r"of banana\. Designers hold 1 task on banana: .*",
        outcome,
    ), outcome
    assert page.js_errors == []


# ---------- one server for the tests below: each signs a new designer in ----------
SHOTS = ARTIFACTS / "designer-1366x768"
SMALL_SCREEN = {"width": 1366, "height": 768}


@pytest.fixture(scope="module")
def shared_live(shared_app):  # noqa: F811  (the imported fixture)
    client, config = shared_app
    return LiveApp(config, client)


def _named(hex_color: str) -> str:
    """The name `evaluation.color.naming` gives the color through its shipped lookup table
    (the precision the page promises), as the canvas writes it."""
    rgb = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
    row = naming.lookup_table()[naming.lookup_cell(rgb)]
    l3, _, basic = naming.level3_names()
    return f"{l3[row]} · {basic[row]}"


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_the_coloring_tab_names_the_current_color_and_the_recent_ones(shared_live, page):
    page.set_viewport_size(SMALL_SCREEN)
    _start_practice(shared_live, page)
    name = page.locator("#designer_canvas .cc-current-name")
    swatch = page.locator("#designer_canvas .cc-current-swatch")
    expect(name).to_have_text(_named("#d62828"))  # the color the canvas starts with
    _color(page, YELLOW)  # hex entry
    expect(name).to_have_text(_named(YELLOW))
    assert swatch.get_attribute("title") == _named(YELLOW)
    _fill(page, PEEL, YELLOW)
    expect(name).to_have_text(_named(YELLOW))
    recent = page.locator("#designer_canvas .cc-recent .cc-swatch").first
    recent.hover()
    expect(recent).to_have_attribute("title", f"{_named(YELLOW)} ({YELLOW})")

    box = page.locator("#designer_canvas .cc-sv").bounding_box()  # the picker's square
    page.mouse.click(box["x"] + 0.3 * box["width"], box["y"] + 0.4 * box["height"])
    picked = page.input_value("#designer_canvas .cc-hex")
    assert picked not in ("#d62828", YELLOW)
    expect(name).to_have_text(_named(picked))
    for channel, number in zip("rgb", (42, 111, 155)):  # the RGB fields
        page.fill(f"#designer_canvas .cc-{channel}", str(number))
        page.press(f"#designer_canvas .cc-{channel}", "Enter")
    expect(name).to_have_text(_named("#2a6f9b"))

    _tool(page, "picker")  # the eyedropper, on the yellow peel
    page.mouse.click(*_to_client(page, PEEL[0] + 0.5, PEEL[1] + 0.5))
    expect(page.locator("#designer_canvas .cc-hex")).to_have_value(YELLOW)
    expect(name).to_have_text(_named(YELLOW))
    page.evaluate("window.scrollTo(0, 0)")
    recent.hover()
    _shot(page, "names-beside-the-swatch")
    assert page.js_errors == []


def test_a_double_click_on_submit_submits_once_and_never_the_next_sketch(shared_live, page):
    page.set_viewport_size(SMALL_SCREEN)
    annotator_id = _start_practice(shared_live, page)
    sent = []  # the submissions the page sends: only the submit event carries the canvas
    page.on(
        "request",
        lambda r: sent.append(r) if "/queue/join" in r.url and "color_layer" in (r.post_data or "") else None,
    )
    page.evaluate(
        """() => {
            window.ccMessages = [];
            new MutationObserver(() => {
                window.ccMessages.push(document.querySelector('#designer_message').textContent);
            }).observe(document.querySelector('#designer_message'),
                       {childList: true, subtree: true, characterData: true});
        }"""
    )
    header, message = page.locator("#designer_header"), page.locator("#designer_message")
    submit = page.locator("#designer_submit")

    _fill(page, PEEL, YELLOW)
    submit.dblclick()  # both clicks before the answer
    expect(message).to_contain_text("Saved your coloring of banana")
    expect(header.locator(".dz-concept")).to_have_text("rotten apple")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")

    _fill(page, (500, 600), "#704a28")
    # A double click whose second click comes after the answer (a quick server): the
    # browser counts it as the second click (detail 2) of the same double click.
    submit.click()
    expect(message).to_contain_text("Saved your coloring of rotten apple")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    second_click(page, submit)
    _shot(page, "double-click-submit")

    # The next deliberate submit is answered with a save: had the stray click gone out, it
    # would have been sent and answered first (a click on a pending event is dropped).
    concept = header.locator(".dz-concept").text_content()
    _fill(page, (5, 5), "#2a6f9b")
    submit.click()
    expect(message).to_contain_text(f"Saved your coloring of {concept}")
    assert len(sent) == 3
    assert not [m for m in page.evaluate("window.ccMessages") if "Nothing is colored yet" in m]
    rows = shared_live.query(
        "select concept_key from colorings where annotator_id = ? order by id", (annotator_id,)
    )
    assert [r["concept_key"] for r in rows] == ["banana", "rotten apple", concept]
    assert page.js_errors == []


def test_a_submit_lost_with_the_connection_says_not_saved_after_the_reload_and_goes_again(shared_live, page):
    page.set_viewport_size(SMALL_SCREEN)
    annotator_id = _start_practice(shared_live, page)
    _fill(page, PEEL, YELLOW)
    page.context.set_offline(True)
    page.locator("#designer_submit").click()
    expect(page.get_by_text("Connection to the server was lost")).to_be_visible()
    page.context.set_offline(False)  # Gradio reloads the page once it reaches the server again
    status = page.locator(f"{CANVAS} .cc-status")
    expect(status).to_contain_text(
        "Not saved: the Submit you pressed did not save this sketch", timeout=60_000
    )
    expect(status).to_have_attribute("data-kind", "error")
    expect(page.locator("#designer_header .dz-concept")).to_have_text("banana")
    _shot(page, "submit-lost-with-the-connection")
    saved = "select concept_key from colorings where annotator_id = ?"
    assert shared_live.query(saved, (annotator_id,)) == []
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    page.locator("#designer_submit").click()
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of banana")
    assert shared_live.query(saved, (annotator_id,)) == [{"concept_key": "banana"}]
    # The next sketch opens as any does: the mark went with the saved work.
    expect(page.locator("#designer_header .dz-concept")).to_have_text("rotten apple")
    expect(status).to_have_text("Pick a color, then click inside a region to fill it.")


def test_each_new_sketch_opens_with_the_bucket_fill(shared_live, page):
    _start_practice(shared_live, page)
    fill, brush = (page.locator(f"#designer_canvas button[data-tool={t}]") for t in ("fill", "brush"))
    expect(fill).to_have_attribute("aria-pressed", "true")  # what the page starts with
    _fill(page, PEEL, YELLOW)
    _brush(page, (STEM[0] - 6, STEM[1] - 20), (STEM[0] + 4, STEM[1] + 20), GREEN)
    expect(brush).to_have_attribute("aria-pressed", "true")
    page.locator("#designer_submit").click()
    expect(page.locator("#designer_header .dz-concept")).to_have_text("rotten apple")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    expect(fill).to_have_attribute("aria-pressed", "true")
    expect(brush).to_have_attribute("aria-pressed", "false")
    api = "document.querySelector('#designer_canvas .cc-root').parentElement.coloringCanvas"
    assert page.evaluate(f"() => {api}.state().tool") == "fill"
    page.set_viewport_size(SMALL_SCREEN)
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "fill-on-the-next-sketch")
    assert page.js_errors == []


def _tab_bar_top(page) -> float:
    return page.get_by_role("tab", name="Coloring").bounding_box()["y"]


def test_each_sketch_opens_with_the_tab_bar_in_view_at_1366x768(shared_live, page):
    page.set_viewport_size(SMALL_SCREEN)
    _read_instructions(shared_live, page)
    start = page.get_by_role("button", name="I have read the instructions")
    start.scroll_into_view_if_needed()  # below the long instructions, as a reader meets it
    assert page.evaluate("window.scrollY") > 0
    start.click()
    expect(page.locator("#designer_header .dz-concept")).to_have_text("banana")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    assert _tab_bar_top(page) >= 0
    _shot(page, "practice-opens-at-the-top")

    _fill(page, PEEL, YELLOW)
    page.locator("#designer_submit").click()
    expect(page.locator("#designer_header .dz-concept")).to_have_text("rotten apple")
    page.locator("#designer_submissions_box").get_by_text("My submissions").first.click()
    expect(page.locator("#designer_gallery img")).to_have_count(1)  # the page is longer now
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    _fill(page, (500, 600), "#704a28")
    # Scrolled down a little, with Submit still in view: the next sketch opens at the top.
    page.evaluate("window.scrollTo(0, 150)")
    submit = page.locator("#designer_submit")
    assert _tab_bar_top(page) < 0 and submit.bounding_box()["y"] >= 0
    submit.click()
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of rotten apple")
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    assert _tab_bar_top(page) >= 0
    _shot(page, "next-sketch-opens-at-the-top")
    assert page.js_errors == []


def _focused(page, selector: str) -> bool:
    return page.evaluate("s => document.activeElement?.matches(s) ?? false", selector)


def _tab_to(page, selector: str, key: str = "Tab", presses: int = 60) -> None:
    """Press `key` until the element `selector` has the focus (a keyboard user's path); every
    stop on the way shows that it has the focus, as one 3 px blue ring (the canvas's toolbar
    was a stop with none; the picker's ring was another: outsider 103)."""
    unseen = []
    for _ in range(presses):
        if _focused(page, selector):
            assert not unseen, f"Tab stops with no visible focus: {unseen}"
            return
        page.keyboard.press(key)
        stop = page.evaluate(
            # After the button's own transitions (its outline fades in from its text's color).
            """async () => { const e = document.activeElement;
              await Promise.all(e.getAnimations().map((a) => a.finished.catch(() => null)));
              const s = getComputedStyle(e);
              return e !== document.body && `${s.outlineWidth} ${s.outlineStyle} ${s.outlineColor}` !== '3px solid rgb(9, 105, 218)'
                ? e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 40) + ' ' + s.outlineWidth + ' ' + s.outlineStyle + ' ' + s.outlineColor : null; }"""
        )
        if stop:
            unseen.append(stop)
    raise AssertionError(f"{presses} presses of {key} never reached {selector}")


def test_a_designer_colors_and_submits_with_the_keyboard_alone(shared_live, page):
    """An outside tester could not color without a mouse: the drawing was not in the Tab order
    and no key filled. The drawing now takes the focus; the arrow keys move a crosshair and
    Enter fills the region under it; Submit is reached by Shift+Tab."""
    annotator_id = _start_practice(shared_live, page)
    _color(page, YELLOW)  # the hex field: typed and entered
    viewport = f"{CANVAS} .cc-viewport"
    _tab_to(page, viewport)
    expect(page.locator(f"{CANVAS} .cc-kb")).to_be_visible()

    def at() -> tuple[int, int]:
        return tuple(int(v) for v in page.get_attribute(viewport, "data-crosshair").split())

    scale = page.evaluate(
        f"() => document.querySelector('{CANVAS}').parentElement.coloringCanvas.state().scale"
    )
    step = 4 / scale  # sketch pixels per press (40 with Shift)
    for axis, back, forth in ((0, "ArrowLeft", "ArrowRight"), (1, "ArrowUp", "ArrowDown")):
        for _ in range(200):
            gap = PEEL[axis] - at()[axis]
            if abs(gap) <= step / 2 + 1:
                break
            key = forth if gap > 0 else back
            page.keyboard.press(f"Shift+{key}" if abs(gap) > 10 * step else key)
    point = at()
    assert abs(point[0] - PEEL[0]) <= step / 2 + 1 and abs(point[1] - PEEL[1]) <= step / 2 + 1, point
    _committed(page, lambda: page.keyboard.press("Enter"))
    # The status line (read out) names the color, not only its code.
    expect(page.locator(f"{CANVAS} .cc-status")).to_have_text(
        re.compile(r"^Filled [\d,]+ px with [a-z -]+ · [a-z -]+ \(#[0-9a-f]{6}\)\.$")
    )
    _shot(page, "keyboard-fill")

    _tab_to(page, f"{CANVAS} .cc-hue")  # on to the picker, and back: its stops show the same ring
    _tab_to(page, "#designer_submit", "Shift+Tab")
    # the focused button shows it plainly (an outside tester found a 1 px grey outline on orange)
    assert page.evaluate("getComputedStyle(document.activeElement).outlineWidth") == "3px"
    page.keyboard.press("Enter")
    expect(page.locator("#designer_message")).to_contain_text("Saved your coloring of banana")
    [coloring] = shared_live.query(
        "select * from colorings where annotator_id = ? order by id", (annotator_id,)
    )
    image, mask = load_pixels(shared_live.config.data_dir, coloring)
    counts = painted_color_counts(layer_of_coloring(image, mask), BANANA)
    assert (fill_region(BANANA, point) == fill_region(BANANA, PEEL)).all()  # the peel's stripe
    assert counts == {YELLOW: fill_region(BANANA, PEEL).sum()}
    assert page.js_errors == []


_SUBMISSIONS_BOXES = """() => {
  const heads = [...document.querySelectorAll('#designer_table th')].map((th) => th.getBoundingClientRect().height);
  const grid = document.querySelector('#designer_gallery .grid-container');
  return {head: Math.max(...heads), wide: grid.scrollWidth, shown: grid.clientWidth};
}"""


def test_on_a_phone_my_submissions_keeps_its_column_names_whole_and_its_pictures_in_view(shared_live, page):
    """Outside probe 230: on a 390 px phone `coloring_id` broke letter by letter (350 px tall)
    and 2.5 of 7 thumbnails showed, the rest off the side."""
    page.set_viewport_size({"width": 390, "height": 844})
    annotator_id = _start_practice(shared_live, page)
    db = open_db(shared_live.config.db_path)
    try:
        for concept in ("apple", "banana", "lemon", "cherry", "tomato", "carrot", "rotten apple"):
            add_coloring(db, shared_live.config.data_dir, annotator_id, concept, (200, 20, 30))
    finally:
        db.close()
    page.locator("#designer_submissions_box").get_by_text("My submissions").first.click()
    expect(page.locator("#designer_gallery img")).to_have_count(7)
    boxes = page.evaluate(_SUBMISSIONS_BOXES)
    assert boxes["head"] < 60 and boxes["wide"] <= boxes["shown"], boxes
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(page, "phone-my-submissions")
    assert page.js_errors == []


def test_on_a_phone_the_drawing_takes_the_width_and_the_picker_goes_under_it(shared_live, page):
    """An outside tester's 390x844 phone showed the drawing 108 px wide beside the picker."""
    page.set_viewport_size({"width": 390, "height": 844})
    _start_practice(shared_live, page)
    drawing = page.locator(f"{CANVAS} .cc-viewport").bounding_box()
    picker = page.locator(f"{CANVAS} .cc-palette").bounding_box()
    assert drawing["width"] >= 300 and drawing["height"] >= 200, drawing
    assert picker["y"] >= drawing["y"] + drawing["height"] - 1, (drawing, picker)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
    _shot(page, "phone")
    _committed(page, lambda: page.mouse.click(*_to_client(page, PEEL[0] + 0.5, PEEL[1] + 0.5)))
    expect(page.locator(f"{CANVAS} .cc-status")).to_contain_text("Filled")
    # What the tap did shows right under the drawing, over the picker (outside probe 230).
    status = page.locator(f"{CANVAS} .cc-status").bounding_box()
    drawing = page.locator(f"{CANVAS} .cc-viewport").bounding_box()
    picker = page.locator(f"{CANVAS} .cc-palette").bounding_box()
    assert drawing["y"] + drawing["height"] <= status["y"] < picker["y"], (drawing, status, picker)
    assert page.js_errors == []
