"""A researcher analyses a finished pairwise study in the Study tab of a real browser."""

import pytest

from tests.browser import expect, live_app, open_tab, page, sign_in, table_rows  # noqa: F401
from tests.test_app_study import _choices, _prepare, _vote_everything

pytestmark = pytest.mark.browser
METRICS = ["PCC", "EMD", "ED", "DCA", "ΔHue"]


def test_researcher_analyses_a_study_and_sees_table3_its_figure_and_the_votes(live_app, page):
    _prepare(live_app.config)
    admin = live_app.admin_token()
    truth, chosen = _choices(live_app.client, admin)
    live_app.client.predict(
        admin, "pilot", truth, "clipart", chosen, 8, 6, 0.1, 75, 0, api_name="/study_create"
    )
    live_app.client.predict(admin, 1, api_name="/study_open")
    _vote_everything(live_app.config)
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Study")
    expect(page.locator("#study_list [role=row][data-index]")).to_have_count(1)
    assert table_rows(page, "study_list")[0][:3] == ["1", "pilot", "open"]
    page.fill("#study_id input", "1")
    page.fill("#study_n_boot input", "200")
    page.click("#study_analyse")
    expect(page.locator("#study_table3 [role=row][data-index]")).to_have_count(len(METRICS))
    assert [row[1] for row in table_rows(page, "study_table3")] == METRICS
    figure = page.locator("#study_figure .js-plotly-plot")
    expect(figure).to_be_visible()
    assert figure.locator(".ytitle").text_content() == "alignment with human judgment"
    assert sorted(figure.locator(".legendtext").all_text_contents()) == [
        "Agreement (fraction)",
        "Pearson r",
        "Spearman ρ",
    ]
    expect(page.locator("#study_pairs [role=row][data-index]").first).to_be_visible()
    assert page.js_errors == []
