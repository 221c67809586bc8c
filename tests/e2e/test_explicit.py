"""A researcher opens the Explicit colors tab in a real browser: Table 4, the charts and a prompt."""

import re

import pytest

from evaluation.explicit.prompts import TASKS
from tests.app.test_explicit import RUN, build_run
from tests.browser import expect, live_app, open_tab, page, pick, sign_in, table_rows  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def test_researcher_sees_table4_the_charts_and_a_prompts_images_and_swatches(live_app, page):
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Explicit colors")
    expect(page.locator("#explicit_note")).to_contain_text("No explicit-color run yet: start one")
    build_run(live_app.config.db_path, live_app.config.data_dir)  # after sign-in: listed on opening
    pick(page, "explicit_run", RUN)
    page.click("#explicit_show")
    expect(page.locator("#explicit_note")).to_contain_text("16 scored images in iscc-nbs-l2")
    # The note says how far the scorer's numbers hold, not only the docs (outsider 104).
    expect(page.locator("#explicit_note")).to_contain_text("How far these numbers hold:")
    expect(page.locator("#explicit_table4 [role=row][data-index]").first).to_be_visible()
    rows = table_rows(page, "explicit_table4")
    assert rows == [
        [system, model, *[value] * 3]
        for system in ("all systems", "iscc-nbs-l2")
        for model, value in (("right", "100"), ("wrong", "0"))
    ]
    for chart in ("category", "basic", "bias", "confusion"):
        expect(page.locator(f"#explicit_{chart} .js-plotly-plot")).to_be_visible()
    # What a screen reader hears of Figure 3 and the heatmap (outsider 75: "#1: 2 bars" and
    # "a grid of 16 rows", nothing more)
    said = page.locator("#explicit_bias .js-plotly-plot").get_attribute("aria-label")
    assert "; color ranked 1: " in said and "#1" not in said, said
    said = page.locator("#explicit_confusion .js-plotly-plot").get_attribute("aria-label")
    assert "; a grid of 4 rows, largest: blue (strong blue, blue) by blue (strong blue, blue) 2, " in said, (
        said
    )
    # "Got" names the system's nearest color, and the diagonal is no verdict (outside probe 144).
    expect(page.get_by_text("A pair on the diagonal is not a correct verdict")).to_be_visible()
    expect(page.locator("#explicit_groups_note")).to_contain_text("Light / dark / ish needs")
    expect(page.locator("#explicit_prompt input")).to_have_value(re.compile(r"blue car.* — 1/2 correct$"))
    page.click("#explicit_open_prompt")
    expect(page.locator("#explicit_prompt_note")).to_contain_text("a blue car")
    expect(page.locator("#explicit_swatches")).to_contain_text("target: blue")
    expect(page.locator("#explicit_swatches")).to_contain_text("strong blue, blue")
    expect(page.locator("#explicit_gallery img")).to_have_count(2)
    # choosing another prompt shows it at once
    page.locator("#explicit_prompt input").click()
    page.get_by_role("option", name=re.compile(r"^a red car · color_name ")).click()
    expect(page.locator("#explicit_swatches")).to_contain_text("target: red")
    expect(page.locator("#explicit_prompt_note")).to_contain_text("targets: red")
    page.locator("#explicit_swatches").scroll_into_view_if_needed()
    assert page.js_errors == []


def test_the_evaluate_tab_switches_to_the_explicit_mode_and_counts_its_images(live_app, page):
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Evaluate")
    expect(page.locator("#evaluate_concepts")).to_be_visible()
    expect(page.locator("#evaluate_x_systems")).to_be_hidden()
    # The mode is one radio group: one Tab stop, and an arrow key chooses (each radio was its
    # own Tab stop and arrows did nothing: outsider 75).
    concepts = page.get_by_label("Implicit concepts (ColorConceptBench)")
    concepts.focus()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Explicit colors (GenColorBench)")).to_be_checked()
    expect(page.get_by_label("Explicit colors (GenColorBench)")).to_be_focused()
    expect(page.locator("#evaluate_x_systems")).to_be_visible()
    expect(page.locator("#evaluate_concepts")).to_be_hidden()
    expect(page.locator("#evaluate_styles")).to_be_hidden()
    page.get_by_label("Tiny random SD (test model) (tiny-random)").check()
    page.locator("#evaluate_x_size textarea, #evaluate_x_size input").first.fill("2")
    page.click("#evaluate_preview")
    expect(page.locator("#evaluate_plan")).to_contain_text("images per prompt")
    # default systems (L2 29 + L3 260 + CSS 148 colors) x five tasks x 2 rounds, 4 images each;
    # multi-object and implicit prompts have two objects each
    expect(page.locator("#evaluate_plan")).to_contain_text(
        re.compile(
            r"17480 images \(1 model × 4370 prompts × 1 guidance scale \([\d.]+\) × 4 images per prompt\), "
            r"24472 objects to mask and score, about"
        )
    )
    # An object typed and not picked from the list counts (outside probe 182: it was dropped on
    # leaving the box, and Start took all 100 objects); a misspelt one is refused by name.
    objects = page.locator("#evaluate_x_objects input")
    objects.fill("Car")
    page.click("#evaluate_preview")
    expect(page.locator("#evaluate_plan")).to_contain_text(
        re.compile(
            r"8740 images \(1 model × 2185 prompts × 1 guidance scale \([\d.]+\) × 4 images per prompt\)"
        )
    )
    page.locator("#evaluate_x_objects").get_by_role("button", name="Remove Car").click()
    objects.fill("carr")
    page.click("#evaluate_preview")
    expect(page.locator("#evaluate_plan")).to_contain_text(
        "Only these objects: 'carr' is not among the 100 objects (nearest to 'carr': 'car')"
    )
    page.locator("#evaluate_plan").scroll_into_view_if_needed()
    assert page.js_errors == []


def test_table4_of_a_two_system_run_fits_a_1400_px_window_with_the_averages_first(live_app, page):
    """Outsider F9: Table 4 of a 2-system run was a 3,597 px grid in a 1,214 px view; only the
    model and the first five L2 columns showed, the averages and the css3 and all-systems
    blocks were off-screen."""
    page.set_viewport_size({"width": 1400, "height": 900})
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    build_run(live_app.config.db_path, live_app.config.data_dir, tasks=TASKS, systems=("iscc-nbs-l2", "css3"))
    open_tab(page, "Explicit colors")
    pick(page, "explicit_run", RUN)
    page.click("#explicit_show")
    expect(page.locator("#explicit_note")).to_contain_text("scored images in iscc-nbs-l2, css3")
    table = page.locator("#explicit_table4")
    expect(table.locator("[role=row][data-index]").first).to_be_visible()
    cut = table.evaluate(
        "el => [...el.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1 "
        "&& getComputedStyle(e).overflowX !== 'visible').map(e => e.className)"
    )
    assert cut == []
    headers = [h.strip() for h in table.locator("[role=columnheader]").all_inner_texts()]
    assert headers == ["color system", "model", "average", *TASKS]
    box = table.locator("[role=columnheader]").last.bounding_box()
    assert box["x"] + box["width"] <= 1400
    rows = table_rows(page, "explicit_table4")
    assert [row[:2] for row in rows] == [
        [system, model] for system in ("all systems", "iscc-nbs-l2", "css3") for model in ("right", "wrong")
    ]
    assert page.js_errors == []
