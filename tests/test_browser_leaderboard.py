"""A researcher computes the leaderboards (Tables 1, 2, 6-8, Figures 4 and 5) in a real browser."""

import pytest

from tests.browser import expect, live_app, open_tab, page, pick, sign_in  # noqa: F401
from tests.test_app_leaderboard import COLORS, _store

pytestmark = pytest.mark.browser


def test_researcher_computes_the_leaderboards_and_sees_tables_and_figures(live_app, page):
    _store(live_app.config)
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
    for chart in ("sweep", "sensitivity", "scatter"):
        expect(page.locator(f"#leaderboard_{chart} .js-plotly-plot")).to_be_visible()
    sweep = page.locator("#leaderboard_sweep .js-plotly-plot")
    assert sweep.locator(".xtitle").first.text_content() == "CFG scale"
    assert page.js_errors == []
