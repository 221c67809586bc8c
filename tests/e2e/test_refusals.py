"""Expected refusals in Chromium: the message sits beside the action, nothing turns into
Gradio's error sheet, and every control stays visible and usable (issue 14.1)."""

import pytest

from tests.browser import ADMIN_PASSWORD, artifact_path, expect, live_app, open_tab, page, sign_in  # noqa: F401

pytestmark = pytest.mark.browser
# Gradio's status tracker shows this pill over each output of an event that raised.
ERROR_SHEET = "[data-testid='status-tracker'] .error"


def _no_error_sheet(page) -> None:
    expect(page.locator(ERROR_SHEET)).to_have_count(0)


def test_consent_without_the_tick_is_refused_beside_the_button(live_app, page):
    [(_, link)] = live_app.invite("designer")
    sign_in(page, link)
    # An invite opens the person's own tab, not Start.
    expect(page.get_by_role("tab", name="Coloring")).to_have_attribute("aria-selected", "true")
    agree = page.locator("#designer_agree")
    expect(agree).to_be_visible()
    # The organisers' note in the consent file is not shown to people.
    expect(page.locator("#designer_consent_text")).not_to_contain_text("Study organisers")
    agree.click()
    note = page.locator("#designer_agree_note")
    expect(note).to_contain_text("agree")
    page.screenshot(path=artifact_path("refusal_consent"))
    _no_error_sheet(page)
    expect(page.locator("#designer_consent_text")).to_be_visible()
    expect(agree).to_be_enabled()
    # The refusal left the form usable: ticking and pressing again goes on.
    page.locator("#designer_agreed input").check()
    agree.click()
    expect(page.locator("#designer_read")).to_be_visible()
    expect(page.locator("#designer_consent_box")).to_be_hidden()


def test_an_out_of_range_number_and_an_empty_vote_queue(live_app, page):
    page.goto(live_app.url)
    page.fill("#start_password input", ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in as admin").click()
    expect(page.locator("#start_status")).to_have_text("Signed in as admin.")
    open_tab(page, "Expert review")
    expect(page.locator("#expert_needs")).to_contain_text("What review waits for")  # the tab has opened
    minimum = page.locator("#expert_minimum input")
    minimum.fill("1")
    page.click("#expert_compute")
    message = page.locator("#expert_ranking_message")
    expect(message).to_contain_text(
        "Colorings needed per concept must be a whole number from 2 to 5, got 1: a concept's consistency "
        "compares its colorings in pairs, so it needs 2"
    )
    page.screenshot(path=artifact_path("refusal_minimum"))
    _no_error_sheet(page)
    for control in ("#expert_minimum input", "#expert_compute", "#expert_open", "#expert_ranking"):
        expect(page.locator(control)).to_be_visible()
    minimum.fill("2")
    page.click("#expert_compute")
    expect(message).not_to_contain_text("⚠")
    assert page.js_errors == []


def test_an_empty_vote_queue_says_what_fills_it_and_offers_no_verdict(live_app, page):
    [(_, link)] = live_app.invite("expert")
    sign_in(page, link)
    open_tab(page, "Expert review")
    expect(page.locator("#expert_consistent")).to_be_disabled()
    page.click("#expert_next")
    expect(page.locator("#expert_vote_concept")).to_contain_text("Open the vote queue")
    page.screenshot(path=artifact_path("refusal_empty_queue"))
    expect(page.locator("#expert_consistent")).to_be_disabled()
    expect(page.locator("#expert_inconsistent")).to_be_disabled()
    _no_error_sheet(page)
    assert page.js_errors == []


def test_a_wrong_password_leaves_the_sign_in_form_usable(live_app, page):
    page.goto(live_app.url)
    page.fill("#start_password input", "not the password")
    page.get_by_role("button", name="Sign in as admin").click()
    expect(page.locator("#start_status")).to_contain_text("⚠")
    _no_error_sheet(page)
    expect(page.locator("#start_password input")).to_have_value("")
    page.fill("#start_password input", ADMIN_PASSWORD)
    page.press("#start_password input", "Enter")  # Enter signs in as the button does
    expect(page.locator("#start_status")).to_have_text("Signed in as admin.")
