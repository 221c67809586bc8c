"""A researcher opens a concept in the Concept browser and sees people's colors next to
each model's, as charts, in a real browser."""

import re
import time
import zipfile

import pytest
from PIL import Image

from app.common import BROWSER_STATE_KEY
from app.evaluate import FORM_STORAGE_KEY
from evaluation.pipeline import runs
from evaluation.pipeline.planning import detect_device
from storage import open_db
from storage.human import COUNTING_RULE
from tests.browser import (  # noqa: F401
    ARTIFACTS,
    click_to_replace,
    expect,
    live_app,
    open_tab,
    page,
    pick,
    search,
    settled,
    sign_in,
    table_rows,
    until_stored,
)
from tests.qc_data import add_coloring
from tests.research_data import solid, store_segmented_run

pytestmark = pytest.mark.browser
RED, BROWN, GREEN = (200, 30, 40), (110, 70, 40), (60, 160, 60)


def kept(page, done) -> None:
    """Wait until the Evaluate form this browser keeps satisfies `done`."""
    until_stored(page, FORM_STORAGE_KEY, BROWSER_STATE_KEY, lambda form: form is not None and done(form))


def _two_models_on_apples(live_app) -> None:
    cells = {
        ("model-a", "apple", "natural", 7.5): [RED, RED, GREEN],
        ("model-b", "apple", "natural", 7.5): [GREEN, GREEN],
        ("model-a", "rotten apple", "natural", 7.5): [BROWN, BROWN],
    }
    store_run(live_app, "pilot", cells)


def store_run(live_app, run: str, cells: dict) -> None:
    """`tests.research_data.store_segmented_run` on the live app's database."""
    db = open_db(live_app.config.db_path)
    try:
        store_segmented_run(db, live_app.config.data_dir, run, cells)
    finally:
        db.close()


def test_researcher_opens_a_concept_and_sees_human_and_model_charts(live_app, page):
    _two_models_on_apples(live_app)
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Concept browser")
    pick(page, "browser_source", "uw71-ratings")
    search(page, "browser_concept", "apple")
    page.click("#browser_show")
    expect(page.locator("#browser_label")).to_contain_text("Human ground truth: reference set 'uw71-ratings'")
    expect(page.get_by_role("heading", level=2, name="apple", exact=True)).to_be_visible()
    for chart in ("distributions", "strips", "shift_plot"):
        expect(page.locator(f"#browser_{chart} .js-plotly-plot")).to_be_visible()
    panels = page.locator(
        "#browser_distributions .js-plotly-plot .gtitle, "
        "#browser_distributions .js-plotly-plot .annotation-text"
    )
    titles = " ".join(panels.all_text_contents())
    assert "model-a" in titles and "model-b" in titles
    # A screen reader hears each panel by its title, with its highest bars named.
    said = page.locator("#browser_distributions .js-plotly-plot").get_attribute("aria-label")
    assert said.startswith(
        "UW-71 distributions (same axis); probability; Human: reference set 'uw71-ratings': 71 bars, highest: "
    ), said
    for model in ("model-a", "model-b"):
        assert re.search(
            rf"; {model} · natural · cfg 7\.5 \(\d images, 0 excluded\): 71 bars, highest: \d+ [a-z]", said
        )
    assert "Click to enter" not in said and "object Object" not in said
    strips = page.locator("#browser_strips .js-plotly-plot").get_attribute("aria-label")
    assert "object Object" not in strips and "Click to enter" not in strips, strips
    assert re.search(
        r"model-a · natural · cfg 7\.5[^;]*: [a-z -]+ · [a-z -]+: \d+ (samples|images)", strips
    ), strips
    expect(page.locator("#browser_metrics [role=row][data-index]")).to_have_count(2)
    assert sorted(row[0] for row in table_rows(page, "browser_metrics")) == ["model-a", "model-b"]
    expect(page.locator("#browser_gallery img")).to_have_count(5)
    expect(page.locator("#browser_variants_title")).to_contain_text("Base concept apple")
    assert page.js_errors == []


def test_the_concept_box_starts_empty_and_typing_replaces_and_searches(live_app, page):
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Concept browser")
    field = page.locator("#browser_concept input")
    expect(field).to_have_value("")
    expect(page.locator("#browser_concept")).to_contain_text("type to search the 1,278")
    page.click("#browser_show")  # nothing chosen: a note beside the action, not an error sheet
    expect(page.locator("#browser_label")).to_contain_text("Pick a concept first")
    search(page, "browser_concept", "carrot", typed="carr")
    click_to_replace(page, "browser_concept")  # typing again replaces ("carrotrott" before) and filters
    page.keyboard.type("rotten ap")
    expect(field).to_have_value("rotten ap")
    options = page.get_by_role("option")
    expect(options.first).to_be_visible()
    # The list filters a moment after the keys (under load, after the assertion would run).
    expect(options.filter(has_not_text="rotten ap")).to_have_count(0)
    assert all("rotten ap" in text for text in options.all_inner_texts())
    page.screenshot(path=str(ARTIFACTS / "concept-search.png"))
    page.get_by_role("option", name="rotten apple", exact=True).click()
    expect(field).to_have_value("rotten apple")
    page.click("#browser_show")
    expect(page.locator("#browser_variants_title")).to_contain_text("Base concept apple")
    # A search that matches nothing says so in its list (an empty list, then the last choice
    # back without a word: outside probe 212), and its arrow is no unnamed image.
    click_to_replace(page, "browser_concept")
    page.keyboard.type("not a concept at all")
    expect(page.locator("#browser_concept").get_by_role("listbox")).to_match_aria_snapshot(
        '- listbox: "Nothing matches what is typed: type fewer letters, or check the spelling."'
    )
    expect(page.locator("#browser_concept").get_by_role("img")).to_have_count(0)
    page.keyboard.press("Escape")
    assert page.js_errors == []


def test_the_human_side_says_which_colorings_count_and_an_empty_shift_chart_is_a_note(live_app, page):
    designers = [annotator for annotator, _ in live_app.invite("designer", 2)]
    db = open_db(live_app.config.db_path)
    try:
        ids = [
            add_coloring(db, live_app.config.data_dir, d, "apple", rgb)
            for d, rgb in zip(designers, [RED, BROWN])
        ]
    finally:
        db.close()
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Concept browser")
    search(page, "browser_concept", "apple")
    page.click("#browser_show")
    label = page.locator("#browser_label")
    expect(label).to_contain_text(
        "Human ground truth: designer colorings (n = 2) of 'apple' that count now: "
        f"2 submitted and 0 accepted (#{ids[0]}, #{ids[1]})."
    )
    expect(label).to_contain_text(COUNTING_RULE)  # the rule, worded where it lives
    assert "Accepted colorings" not in label.inner_text()
    # Only the base concept has colorings: no shift to draw, so a note and no empty axes.
    expect(page.locator("#browser_variants_title")).to_contain_text("No shift to show")
    expect(page.locator("#browser_shift_plot")).to_be_hidden()
    expect(page.locator("#browser_shifts_empty")).to_be_visible()
    expect(page.locator("#browser_metrics_empty")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "browser-human-label.png"), full_page=True)
    search(page, "browser_concept", "rotten apple", typed="rotten ap")
    page.click("#browser_show")
    expect(label).to_contain_text("No designer coloring of 'rotten apple' counts yet")
    assert page.js_errors == []


def test_the_evaluate_form_survives_a_reload_and_no_untranslated_key_is_announced(live_app, page):
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Evaluate")
    # Found at sign-in, not at the app's start (it imports torch); on CI, no GPU.
    device = detect_device()
    expect(page.locator("#evaluate_device")).to_have_text(
        f"Device: {device.name}"
        + (" (no GPU: only tiny models run at a useful speed)" if device.kind == "cpu" else "")
    )
    page.get_by_label("Tiny random SD (test model) (tiny-random)").check()
    page.click("#evaluate_concepts input")
    page.keyboard.type("apple")
    page.get_by_role("option", name="apple", exact=True).click()
    page.keyboard.press("Escape")
    # A chosen concept's remove button names it (it said "Remove 40") and shows the focus ring.
    remove = page.get_by_role("button", name="Remove apple")
    remove.focus()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineWidth") == "3px"
    page.locator("#evaluate_seeds input").fill("2")
    page.locator("#evaluate_cfg textarea, #evaluate_cfg input").first.fill("7.5")
    settled(page)  # the events of opening the tab have ended
    # Gradio's live region says an event has ended; it must not read out an i18n key. Every
    # text any live region takes from the click on is recorded in the page.
    page.evaluate(
        """() => {
            window.announced = [];
            const record = () => document.querySelectorAll('[role=status]')
                .forEach((region) => window.announced.push(region.textContent));
            new MutationObserver(record).observe(document.body,
                {subtree: true, childList: true, characterData: true});
        }"""
    )
    settled(page, lambda: page.get_by_role("button", name="Count images and time").click())
    expect(page.locator("#evaluate_plan")).to_contain_text("images")
    # The live region says the event ended at most one announcement per 5 s, so it may come
    # seconds after the event: wait until it has, in the app's words or as the bare key.
    page.wait_for_function(
        "() => window.announced.some((text) => text.includes('Done') || text.includes('common.complete'))"
    )
    # ... and the count itself is read out (only "Loading" and "Done" were: outsider 67).
    page.wait_for_function("() => window.announced.some((text) => / images \\(1 model × /.test(text))")
    announced = page.evaluate("() => window.announced")
    assert announced, "the observer saw no live region change"
    assert "common.complete" not in " ".join(announced)
    assert "common.complete" not in page.locator("body").inner_text()
    kept(page, lambda form: form["evaluate_seeds"] == 2 and form["evaluate_cfg"] == "7.5")
    page.reload()
    expect(page.locator("#start_status")).to_contain_text("Signed in as")
    open_tab(page, "Evaluate")
    expect(page.locator("#evaluate_seeds input")).to_have_value("2")
    expect(page.locator("#evaluate_cfg textarea, #evaluate_cfg input").first).to_have_value("7.5")
    expect(page.get_by_label("Tiny random SD (test model) (tiny-random)")).to_be_checked()
    page.get_by_text("Masking (GroundingDINO + SAM)").click()
    expect(page.locator("#evaluate_segmenter").get_by_label("tiny-random")).to_be_checked()
    page.screenshot(path=str(ARTIFACTS / "evaluate-after-reload.png"))
    # 20 digits: the form's saving must not end the page's events, so the refusal arrives.
    page.locator("#evaluate_seeds input").fill("99999999999999999999")
    settled(page, lambda: page.get_by_role("button", name="Count images and time").click())
    expect(page.locator("#evaluate_plan")).to_contain_text(
        "Seeds per cell must be a whole number of at most 18 digits"
    )
    # The explicit mode's form is kept as well, and the 20 digits do not stop the form coming
    # back: the browser stores them as a JSON integer (probe 151 found the mode reset).
    page.locator("#evaluate_mode").get_by_label("explicit").check()
    expect(page.locator("#evaluate_x_samples input")).to_be_visible()
    page.locator("#evaluate_x_samples input").fill("3")
    page.locator("#evaluate_x_colors textarea, #evaluate_x_colors input").first.fill("red, blue")
    page.locator("#evaluate_x_tasks").get_by_label("numeric", exact=True).uncheck()
    # Saving shows no progress, so `settled` does not wait for it (a clean-clone run reloaded
    # before the untick was kept, and found it ticked).
    kept(
        page,
        lambda form: "numeric" not in form["evaluate_x_tasks"] and form["evaluate_x_colors"] == "red, blue",
    )
    page.reload()
    expect(page.locator("#start_status")).to_contain_text("Signed in as")
    open_tab(page, "Evaluate")
    expect(page.locator("#evaluate_mode").get_by_label("explicit")).to_be_checked()
    expect(page.locator("#evaluate_x_samples input")).to_have_value("3")
    expect(page.locator("#evaluate_x_colors textarea, #evaluate_x_colors input").first).to_have_value(
        "red, blue"
    )
    expect(page.locator("#evaluate_x_tasks").get_by_label("numeric", exact=True)).not_to_be_checked()
    expect(page.locator("#evaluate_concepts")).to_be_hidden()
    page.locator("#evaluate_mode").get_by_label("implicit").check()
    expect(page.locator("#evaluate_seeds input")).to_have_value("100000000000000000000")
    assert page.js_errors == []


MAGENTA = (255, 0, 255)


def test_after_a_first_evaluation_the_browser_shows_the_reference_set_and_images_at_their_own_size(
    live_app, page
):
    """README step 5: a model on apple and banana, no designer coloring; the browser opens on
    'designers', compares with the shipped uw71-ratings and says so; each 32-px image is drawn
    at 32 px with its mask's magenta outline, and a click does not blow it up."""
    import io

    import numpy as np
    from PIL import Image

    store_run(live_app, "first", {("model-a", c, "natural", 7.5): [RED, GREEN] for c in ("apple", "banana")})
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Concept browser")
    expect(page.locator("#browser_source input")).to_have_value("designers")
    search(page, "browser_concept", "apple")
    page.click("#browser_show")
    label = page.locator("#browser_label")
    expect(label).to_contain_text(
        "No designer coloring of 'apple' counts yet, so the reference set 'uw71-ratings' is the human "
        "ground truth here instead (it has it)."
    )
    expect(label).to_contain_text("Human ground truth: reference set 'uw71-ratings'")
    expect(page.locator("#browser_metrics [role=row][data-index]")).to_have_count(1)
    expect(page.locator("#browser_metrics_empty")).to_be_hidden()
    images = page.locator("#browser_gallery img")
    expect(images).to_have_count(2)
    # Under load the images may still be loading: wait until both are decoded.
    page.wait_for_function(
        "() => [...document.querySelectorAll('#browser_gallery img')].every((i) => i.complete && i.naturalWidth > 0)"
    )
    sizes = images.evaluate_all(
        "(imgs) => imgs.map((i) => [i.naturalWidth, i.getBoundingClientRect().width,"
        " getComputedStyle(i).objectFit])"
    )
    # scale-down: drawn at the natural size whenever the cell is larger, never enlarged.
    assert all(natural == 32 and box >= natural and fit == "scale-down" for natural, box, fit in sizes)
    first = images.first
    first.scroll_into_view_if_needed()
    box = first.bounding_box()
    shown = np.asarray(Image.open(io.BytesIO(first.screenshot())).convert("RGB")).reshape(-1, 3)
    is_magenta = np.all(np.abs(shown.astype(int) - MAGENTA) <= 40, axis=1)
    # The mask's outline (16 x 16 centre square: 60 pixels) at 1:1, and the tinted inside.
    assert 40 <= is_magenta.sum() <= 120
    first.click()
    settled(page)  # the click has been handled and drawn (and started no event)
    assert first.bounding_box()["width"] == pytest.approx(box["width"], abs=1)
    expect(page.locator("#browser_gallery .preview")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "browser-first-evaluation.png"), full_page=True)
    assert page.js_errors == []


def test_a_researcher_audits_a_judge_and_a_refused_audit_clears_the_last_results(live_app, page):
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Judge audit")
    headers = page.locator("#judge_audit_table [role=columnheader]")
    expected = ["judge", "split", "pairs", "pairwise_accuracy", "pairwise_macro", "accuracy", "chance"]

    def shown_headers():
        return [h.strip() for h in headers.all_inner_texts() if h.strip()]

    expect(headers.first).to_be_visible()
    assert shown_headers() == expected  # its own columns before any run, not "1 2 3"
    page.locator("#judge_audit_judges textarea").fill("pixel")
    page.locator("#judge_audit_items input").fill("20")
    page.click("#judge_audit_run")
    rows = page.locator("#judge_audit_table [role=row][data-index]")
    expect(rows.first).to_be_visible()
    assert {row[0] for row in table_rows(page, "judge_audit_table")} == {"pixel"}
    expect(page.locator("#judge_audit_heatmap .js-plotly-plot")).to_be_visible()
    page.locator("#judge_audit_judges textarea").fill("pixel\nclip:x")
    page.click("#judge_audit_run")
    expect(page.locator("#judge_audit_note")).to_contain_text("judge 'clip:x' must start with one of")
    expect(rows).to_have_count(0)
    assert shown_headers() == expected
    expect(page.locator("#judge_audit_heatmap .js-plotly-plot")).to_have_count(0)
    page.locator("#judge_audit_judges textarea").fill("random")
    page.click("#judge_audit_run")
    expect(rows.first).to_be_visible()
    assert {row[0] for row in table_rows(page, "judge_audit_table")} == {"random"}
    assert page.js_errors == []


def test_a_researcher_imports_a_folder_and_a_refused_import_leaves_no_old_list(live_app, page):
    """Last in the module: its run is one more the views above would list."""
    folder = live_app.config.data_dir / "imports" / "walk"
    folder.mkdir(parents=True)
    Image.fromarray(solid((200, 30, 30))).save(folder / "ext__apple__natural__5__1.png")
    (folder / "ext__banana__natural__5__1.png").write_bytes(b"not an image")
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Evaluate")
    page.get_by_text("Masking (GroundingDINO + SAM)").click()
    page.locator("#evaluate_segmenter").get_by_label("tiny-random").check()
    page.locator("#evaluate_box input").fill("0")
    page.locator("#evaluate_text input").fill("0")
    page.locator("#evaluate_folder textarea").fill("walk")
    page.locator("#evaluate_import_name textarea").fill("walk-import")
    page.click("#evaluate_import")
    report, rows = (
        page.locator("#evaluate_import_report"),
        page.locator("#evaluate_rejected [role=row][data-index]"),
    )
    expect(report).to_contain_text(
        "Run walk-import: 1 image imported, 1 left out; masking and scoring queued."
    )
    expect(rows).to_have_count(1)
    assert table_rows(page, "evaluate_rejected")[0][0] == "ext__banana__natural__5__1.png"
    # Refused imports: the reason beside the button, and the last import's list gone.
    page.click("#evaluate_import")
    expect(report).to_contain_text("run 'walk-import' exists already; choose another name for the import")
    expect(rows).to_have_count(0)
    page.locator("#evaluate_import_name textarea").fill("walk-2")
    page.locator("#evaluate_folder textarea").fill("../..")
    page.click("#evaluate_import")
    expect(report).to_contain_text("is outside the allowed import folders")
    expect(rows).to_have_count(0)
    # No usable image: the message names the first five, the table every one (outsider 100
    # fixed five, imported again, and only then met the next ones).
    bad = live_app.config.data_dir / "imports" / "bad"
    bad.mkdir()
    for n in range(7):
        Image.fromarray(solid((200, 30, 30))).save(bad / f"ext__unicorn{n}__natural__5__1.png")
    page.locator("#evaluate_folder textarea").fill("bad")
    page.click("#evaluate_import")
    expect(report).to_contain_text(
        "no usable image in 'bad': ext__unicorn0__natural__5__1.png: concept 'unicorn0'"
    )
    expect(report).to_contain_text("; and 2 more")
    expect(rows).to_have_count(7)
    assert sorted(row[0] for row in table_rows(page, "evaluate_rejected")) == [
        f"ext__unicorn{n}__natural__5__1.png" for n in range(7)
    ]
    # A zip, imported, leaves the field as it leaves the disk (a second press named a
    # temporary file the import had removed: outside probe 135).
    archive = live_app.config.data_dir.parent / "walk.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(folder / "ext__apple__natural__5__1.png", "ext__apple__natural__5__1.png")
    page.locator("#evaluate_folder textarea").fill("")
    page.locator("#evaluate_import_name textarea").fill("walk-zip")
    page.locator("#evaluate_upload input[type=file]").set_input_files(str(archive))
    listed = page.locator("#evaluate_upload td.filename")
    expect(listed).to_have_attribute("aria-label", "walk.zip")
    page.click("#evaluate_import")
    expect(report).to_contain_text("Run walk-zip: 1 image imported, 0 left out")
    expect(listed).to_have_count(0)
    # A run picked to resume brings back the masking it recorded (after a reload the form
    # had the default one, and a resume was refused until the researcher chose it again).
    db = open_db(live_app.config.db_path)
    try:
        deadline = time.monotonic() + 300  # a ceiling: the import's job records it as it starts
        while runs.run_masking(db, "walk-import") is None:
            assert time.monotonic() < deadline, "the import's job never recorded its masking"
            time.sleep(0.2)
    finally:
        db.close()
    page.reload()
    expect(page.locator("#start_status")).to_contain_text("Signed in as")
    open_tab(page, "Evaluate")
    page.get_by_text("Masking (GroundingDINO + SAM)").click()
    page.locator("#evaluate_segmenter").get_by_label("paper").check()
    page.locator("#evaluate_box input").fill("0.35")
    pick(page, "evaluate_run", "walk-import")
    expect(page.locator("#evaluate_segmenter").get_by_label("tiny-random")).to_be_checked()
    expect(page.locator("#evaluate_box input")).to_have_value("0")
    expect(page.locator("#evaluate_text input")).to_have_value("0")
    assert page.js_errors == []


def test_on_a_phone_the_runs_table_scrolls_sideways_to_its_last_column(live_app, page):
    """The Runs table ran off a page that does not scroll sideways: a researcher on a phone
    never saw its Counts and Job columns, so not whether the run had finished (outside
    probe 142)."""
    store_run(live_app, "phone", {("model-a", "apple", "natural", 7.5): [RED]})
    [(_, link)] = live_app.invite("researcher")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, link)
    open_tab(page, "Evaluate")
    page.click("#evaluate_refresh")
    table = page.locator("#evaluate_progress table.evaluate-runs")
    expect(table).to_contain_text("complete")
    job = table.locator("th").last
    expect(job).to_have_text("Job")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    table.evaluate("(t) => { t.scrollLeft = t.scrollWidth; }")
    box = job.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    page.screenshot(path=str(ARTIFACTS / "evaluate-runs-phone.png"), full_page=True)
    assert page.js_errors == []


def test_on_a_phone_the_concept_browsers_panel_titles_stay_apart_and_on_screen(live_app, page):
    """Side by side, two panel titles of one line each ran into each other on a phone, and a
    hub id ran off the page (outside probe 142): titles are wrapped to their column."""
    store_run(
        live_app,
        "phone-titles",
        {
            ("stabilityai/stable-diffusion-xl-base-1.0", "peach", "natural", 7.5): [GREEN, GREEN],
            ("black-forest-labs/FLUX.1-schnell", "peach", "natural", 7.5): [GREEN, BROWN],
            ("model-a", "peach", "natural", 7.5): [BROWN],
        },
    )
    [(_, link)] = live_app.invite("researcher")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, link)
    page.get_by_role("button", name="More tabs").click()  # a phone's tab bar holds few tabs
    page.locator(".overflow-dropdown button", has_text="Concept browser").click()
    pick(page, "browser_source", "uw71-ratings")
    search(page, "browser_concept", "peach")
    page.click("#browser_show")
    for chart in ("distributions", "strips"):
        titles = page.locator(f"#browser_{chart} .js-plotly-plot .annotation-text")
        expect(titles.filter(has_text="FLUX.1-schnell")).to_have_count(1)
        # Plotly's toolbar, shown on a touch or hover, keeps off the titles (it covered the
        # right panel's title: outside probe 151), and the axis titles stay on screen.
        page.locator(f"#browser_{chart} .js-plotly-plot .nsewdrag").first.hover()
        modebar = page.locator(f"#browser_{chart} .modebar")
        expect(modebar).to_be_visible()
        boxes = [titles.nth(i).bounding_box() for i in range(titles.count())]
        assert len(boxes) >= 4, (chart, titles.all_text_contents())  # people's panel, three models'
        boxes.append(modebar.bounding_box())
        axis_titles = page.locator(f"#browser_{chart} .js-plotly-plot text[class^='x'][class$='title']")
        assert axis_titles.count() >= 1, chart
        for axis_title in axis_titles.all():
            box = axis_title.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (chart, axis_title.text_content(), box)
        for i, a in enumerate(boxes):
            assert a["x"] >= 0 and a["x"] + a["width"] <= 390, (chart, i, a)
            for b in boxes[i + 1 :]:
                apart = (
                    a["x"] + a["width"] <= b["x"]
                    or b["x"] + b["width"] <= a["x"]
                    or a["y"] + a["height"] <= b["y"]
                    or b["y"] + b["height"] <= a["y"]
                )
                assert apart, (chart, a, b)
    page.locator("#browser_distributions").screenshot(path=str(ARTIFACTS / "browser-phone-titles.png"))
    assert page.js_errors == []


def test_a_researcher_deletes_a_run_started_by_mistake_in_two_presses(live_app, page):
    """A run started by mistake could not be taken back (outside probe 234: 1,000,000 items
    from one Start). The first press says what the chosen run holds, the second deletes it;
    a press refused after is said beside the buttons, which stay usable."""
    store_run(live_app, "mistake", {("model-a", "apple", "natural", 7.5): [RED, GREEN]})
    store_run(live_app, "wanted", {("model-b", "apple", "natural", 7.5): [RED]})
    folder = live_app.config.data_dir / "runs" / "mistake"
    assert folder.is_dir()
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Evaluate")
    note, table = (
        page.locator("#evaluate_progress_note"),
        page.locator("#evaluate_progress table.evaluate-runs"),
    )
    page.click("#evaluate_refresh")
    expect(table).to_contain_text("mistake")
    pick(page, "evaluate_run", "mistake")
    page.click("#evaluate_delete")
    expect(note).to_contain_text("Run mistake holds 2 items, 1 distribution and 6 files (")
    expect(note).to_contain_text("Click Delete run again to delete it for good")
    assert folder.is_dir()
    page.click("#evaluate_delete")
    expect(note).to_contain_text("Run mistake deleted: 2 items, 1 distribution; 6 files (")
    expect(table.locator("td", has_text="mistake")).to_have_count(0)
    expect(table).to_contain_text("wanted")
    assert not folder.exists()
    page.screenshot(path=str(ARTIFACTS / "evaluate-delete-run.png"), full_page=True)
    # The picker lost it; a press on a name typed in is refused beside the buttons.
    page.locator("#evaluate_run input").fill("mistake")
    page.click("#evaluate_delete")
    expect(note).to_contain_text("no run named 'mistake'; known runs, newest first:")
    for button in ("cancel", "resume", "refresh", "delete"):
        expect(page.locator(f"#evaluate_{button}")).to_be_enabled()
    page.click("#evaluate_refresh")
    expect(table).to_contain_text("wanted")
    assert page.js_errors == []
