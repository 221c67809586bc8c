"""A designer's first visit in a real browser: the invite link signs them in."""

import pytest

from tests.browser import expect, live_app, page  # noqa: F401

pytestmark = pytest.mark.browser


def test_designer_opens_invite_link_and_sees_only_their_tabs(live_app, page):
    [(_, link)] = live_app.invite("designer", background="yes")
    page.goto(link)
    expect(page.locator("#start_status")).to_have_text("Signed in as D0001.")
    expect(page).to_have_url(live_app.url)
    tabs = page.get_by_role("tab")
    expect(tabs.filter(has_text="Admin")).to_have_count(0)
    assert "Start" in tabs.all_inner_texts()
    page.reload()
    expect(page.locator("#start_status")).to_have_text("Signed in as D0001.")
    assert page.js_errors == []
