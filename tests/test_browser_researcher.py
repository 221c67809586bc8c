"""A researcher opens a concept in the Concept browser and sees people's colors next to
each model's, as charts, in a real browser."""

import pytest

from storage import open_db
from tests.browser import expect, live_app, open_tab, page, pick, sign_in, table_rows  # noqa: F401
from tests.research_data import store_segmented_run

pytestmark = pytest.mark.browser
RED, BROWN, GREEN = (200, 30, 40), (110, 70, 40), (60, 160, 60)


def _two_models_on_apples(live_app) -> None:
    cells = {
        ("model-a", "apple", "natural", 7.5): [RED, RED, GREEN],
        ("model-b", "apple", "natural", 7.5): [GREEN, GREEN],
        ("model-a", "rotten apple", "natural", 7.5): [BROWN, BROWN],
    }
    db = open_db(live_app.config.db_path)
    try:
        store_segmented_run(db, live_app.config.data_dir, "pilot", cells)
    finally:
        db.close()


def test_researcher_opens_a_concept_and_sees_human_and_model_charts(live_app, page):
    _two_models_on_apples(live_app)
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Concept browser")
    pick(page, "browser_source", "uw71-ratings")
    page.click("#browser_show")
    expect(page.locator("#browser_label")).to_contain_text("Human ground truth: reference set 'uw71-ratings'")
    for chart in ("distributions", "strips", "shift_plot"):
        expect(page.locator(f"#browser_{chart} .js-plotly-plot")).to_be_visible()
    panels = page.locator(
        "#browser_distributions .js-plotly-plot .gtitle, "
        "#browser_distributions .js-plotly-plot .annotation-text"
    )
    titles = " ".join(panels.all_text_contents())
    assert "model-a" in titles and "model-b" in titles
    expect(page.locator("#browser_metrics [role=row][data-index]")).to_have_count(2)
    assert sorted(row[0] for row in table_rows(page, "browser_metrics")) == ["model-a", "model-b"]
    expect(page.locator("#browser_gallery img")).to_have_count(5)
    expect(page.locator("#browser_variants_title")).to_contain_text("Base concept apple")
    assert page.js_errors == []
