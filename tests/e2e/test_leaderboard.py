"""A researcher computes the leaderboards (Tables 1, 2, 6-8, Figures 4 and 5) in a real browser."""

import re

import pytest

from app.leaderboard import TABLE1, TABLE2
from tests.app.test_leaderboard import COLORS, _store
from tests.browser import ARTIFACTS, expect, live_app, open_tab, page, pick, sign_in  # noqa: F401

pytestmark = pytest.mark.browser


def test_researcher_computes_the_leaderboards_and_sees_tables_and_figures(live_app, page):
    _store(live_app.config)
    page.set_viewport_size({"width": 1400, "height": 900})  # Tables 6-8 were cut at this width
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Leaderboards")
    pick(page, "leaderboard_source", "lab")
    page.click("#leaderboard_show")
    expect(page.locator("#leaderboard_note")).to_contain_text("four concepts rated by our lab")
    expect(page.locator("#leaderboard_intervals")).to_contain_text("1000 bootstrap resamples")
    expect(page.locator("#leaderboard_intervals")).to_contain_text("Adjacent models")
    expect(page.locator("#leaderboard_table1")).to_contain_text("[")
    for table in ("table1", "table2"):
        rows = page.locator(f"#leaderboard_{table} tbody tr")
        expect(rows.first).to_be_visible()
        assert {
            model for model in COLORS if model in page.locator(f"#leaderboard_{table}").inner_text()
        } == set(COLORS)
    for name in (TABLE1, TABLE2):  # named for a screen reader, as Tables 6-8 are
        expect(page.get_by_role("table", name=name)).to_be_visible()
    expect(page.get_by_role("grid", name="Table 6: sensitivity by style")).to_be_visible()
    for n in (6, 7, 8):  # every interval cell whole: nothing to scroll sideways to
        table = page.locator(f"#leaderboard_table{n}")
        expect(table).to_contain_text(re.compile(r"\[|no interval"))
        cut = table.evaluate(
            "el => [...el.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1 "
            "&& getComputedStyle(e).overflowX !== 'visible').map(e => e.className)"
        )
        assert cut == [], (n, cut)
    for chart in ("sweep", "sensitivity", "scatter"):
        expect(page.locator(f"#leaderboard_{chart} .js-plotly-plot")).to_be_visible()
    sweep = page.locator("#leaderboard_sweep .js-plotly-plot")
    assert sweep.locator(".xtitle").first.text_content() == "CFG scale"
    # A screen reader hears what each chart shows: title, axes, each model's values.
    said = sweep.get_attribute("aria-label")
    assert said.startswith("Figure 5: EMD and PCC against guidance scale; mean EMD (ΔE*ab) by CFG scale; "), (
        said
    )
    for model in COLORS:
        assert re.search(rf"; {model}: 2 [\d.]+, 4 [\d.]+, 6 [\d.]+;", said), said
        assert re.search(rf"; {model} \(mean PCC\): 2 -?[\d.]+, 4 -?[\d.]+, 6 -?[\d.]+(;|$)", said), said
    said = page.locator("#leaderboard_sensitivity .js-plotly-plot").get_attribute("aria-label")
    assert said.startswith(
        "Figure 4 (left): model shift ÷ human shift; model shift ÷ human shift by model"
    ), said
    assert page.js_errors == []


def test_after_a_first_evaluation_the_leaderboards_open_filled_from_the_reference_set(live_app, page):
    """README step 5: two models on apple, banana, lemon and carrot, no designer coloring: the tab
    opens on 'designers', computes against uw71-ratings and says so; Figure 4, which needs
    variants, says what fills it instead of showing bare axes."""
    from tests.e2e.test_researcher import store_run

    cells = {
        (model, concept, "natural", 7.5): [color, color]
        for model, color in COLORS.items()
        for concept in ("apple", "banana", "lemon", "carrot")
    }
    store_run(live_app, "first", cells)
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Leaderboards")
    note = page.locator("#leaderboard_note")
    expect(note).to_contain_text(
        "No designer coloring of 'apple', 'banana', 'carrot', 'lemon' counts yet, so the reference set "
        "'uw71-ratings' is the human ground truth here instead (it has all 4)."
    )
    expect(page.locator("#leaderboard_source input")).to_have_value("designers")
    for table in ("table1", "table2"):
        for model in COLORS:
            expect(page.locator(f"#leaderboard_{table} tbody")).to_contain_text(model)
    for chart in ("sensitivity", "scatter"):
        expect(
            page.locator(f"#leaderboard_{chart} .annotation-text").filter(
                has_text="Nothing to show: sensitivity"
            )
        ).to_contain_text("Nothing to show: sensitivity compares")
    expect(page.locator("#leaderboard_table6_empty")).to_contain_text(
        "the reference sets cover base concepts only"
    )
    page.screenshot(path=str(ARTIFACTS / "leaderboards-first-evaluation.png"), full_page=True)
    assert page.js_errors == []
