"""A researcher analyses a finished pairwise study in the Study tab of a real browser."""

import pytest

from tests.app.test_study import _choices, _prepare, _vote_everything
from tests.browser import ARTIFACTS, expect, live_app, open_tab, page, pick, settled, sign_in, table_rows  # noqa: F401

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
    # A refused analysis says why beside the button, where it stays after the toast has gone
    # (an outside tester looked under the studies, found nothing there and took the toast
    # for all there was: probe 156). The next analysis replaces it.
    page.fill("#study_n_boot input", "0")
    page.click("#study_analyse")
    expect(page.locator("#study_analyse_note")).to_contain_text(
        "Bootstrap resamples must be a whole number from 1 to 10,000, got 0"
    )
    page.fill("#study_n_boot input", "200")
    page.click("#study_analyse")
    expect(page.locator("#study_table3 [role=row][data-index]")).to_have_count(len(METRICS))
    expect(page.locator("#study_analyse_note")).to_contain_text(
        "Intervals: 95% bootstrap percentile intervals"
    )
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


def _outputs(live_app, models):
    """`models` evaluated on four concepts with a uw71-ratings reference, natural style only."""
    from tests.e2e.test_researcher import store_run

    cells = {
        (model, concept, "natural", 7.5): [(200, 30, 30), (60, 160, 60)]
        for model in models
        for concept in ("apple", "banana", "lemon", "carrot")
    }
    store_run(live_app, "-".join(models), cells)


def test_the_study_set_up_after_the_readme_run_picks_its_style_keeps_choices_and_explains(live_app, page):
    """README step 5 in the Study tab: one model says to run a second; with two, opening the
    tab moves the style to natural (clip-art, the default, has no outputs), Load choices keeps
    the ground truth chosen, and a design smaller than asked says so."""
    _outputs(live_app, ["tiny-random"])
    [(_, link)] = live_app.invite("researcher")
    sign_in(page, link)
    open_tab(page, "Study")
    note = page.locator("#study_choices_note")
    expect(note).to_contain_text(
        "Only one model (tiny-random) has natural photo outputs: run a second model (e.g. tiny-random-b)"
    )
    _outputs(live_app, ["tiny-random-b"])
    open_tab(page, "Evaluate")
    open_tab(page, "Study")  # opening the tab again offers what arrived since
    expect(page.locator("#study_sources")).to_contain_text("tiny-random · tiny-random · CFG 7.5 (4 concepts)")
    expect(page.locator("#study_sources")).to_contain_text(
        "tiny-random-b · tiny-random-b · CFG 7.5 (4 concepts)"
    )
    expect(note).not_to_contain_text("Only one model")
    expect(page.locator("#study_style").get_by_label("natural photo")).to_be_checked()
    expect(page.locator("#study_ground_truth input")).to_have_value("uw71-ratings")
    pick(page, "study_ground_truth", "designers")
    settled(page, lambda: page.click("#study_load"))  # Load choices has set its outputs
    expect(page.locator("#study_ground_truth input")).to_have_value("designers")
    pick(page, "study_ground_truth", "uw71-ratings")
    page.locator("#study_name textarea, #study_name input").first.fill("pilot")
    page.locator("#study_n_concepts input").fill("4")
    page.locator("#study_trials input").fill("10")
    page.click("#study_create")
    message = page.locator("#study_message")
    expect(message).to_contain_text("Draft study 1 stored: 4 pairs and 0 attention checks.")
    expect(message).to_contain_text("Each participant sees at most 4 trials, not the 10 asked for")
    expect(message).to_contain_text("No attention check: 10% of 4 pairs rounds to none.")
    page.screenshot(path=str(ARTIFACTS / "study-after-readme-run.png"), full_page=True)
    assert page.js_errors == []
