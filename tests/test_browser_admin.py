"""The admin in a real browser: sign in with the password, create invite links."""

import pytest
from gradio_client.exceptions import AppError

from tests.browser import ADMIN_PASSWORD, expect, live_app, page, table_rows  # noqa: F401

pytestmark = pytest.mark.browser


def test_admin_signs_in_and_creates_invite_links_that_work(live_app, page):
    page.goto(live_app.url)
    page.fill("#start_password input", ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in as admin").click()
    expect(page.locator("#start_status")).to_have_text("Signed in as admin.")
    page.get_by_role("tab", name="Admin").click()
    page.locator("#admin_role input").click()
    page.get_by_role("option", name="expert").click()
    page.locator("#admin_count input").fill("3")
    page.get_by_text("yes", exact=True).click()
    page.get_by_role("button", name="Create invite links").click()
    expect(page.locator("#admin_invites [role=row][data-index]")).to_have_count(3)
    rows = table_rows(page, "admin_invites")
    assert [row[:3] for row in rows] == [
        ["1", "E0001", "expert"],
        ["2", "E0002", "expert"],
        ["3", "E0003", "expert"],
    ]
    links = [row[3] for row in rows]
    assert all(link.startswith(live_app.config.public_url + "/?invite=") for link in links)
    assert len(set(links)) == 3
    # The batch's links as a CSV to keep: the table above is the only other time they show.
    download = page.locator("#admin_invites_csv a").first
    expect(download).to_be_visible()
    csv = page.request.get(download.get_attribute("href")).text().splitlines()
    assert csv[0] == "annotator_id,pseudonym,role,invite_link"
    assert [line.split(",")[3] for line in csv[1:]] == links
    token, message = live_app.client.predict(links[1], api_name="/login_invite")
    assert token and message == "Signed in as **E0002**."
    # A lost link: a new one for E0003, and the old one stops working.
    page.locator("#admin_lost input").fill("3")
    page.get_by_role("button", name="New invite link").click()
    renewed = page.locator("#admin_new_link_message")
    expect(renewed).to_contain_text("New link for annotator 3")
    new_link = renewed.locator("code").inner_text()
    assert new_link.startswith(live_app.config.public_url + "/?invite=") and new_link != links[2]
    with pytest.raises(AppError, match="this invite link was revoked"):
        live_app.client.predict(links[2], api_name="/login_invite")
    assert live_app.client.predict(new_link, api_name="/login_invite")[1] == "Signed in as **E0003**."
    page.get_by_role("button", name="Refresh lists").click()
    expect(page.locator("#admin_annotators [role=row][data-index]")).to_have_count(3)
    people = table_rows(page, "admin_annotators")
    assert [(r[1], r[2], r[3], r[4], r[7]) for r in people] == [
        ("E0001", "expert", "yes", "active", "0"),
        ("E0002", "expert", "yes", "active", "1"),
        ("E0003", "expert", "yes", "active", "1"),
    ]
    assert page.js_errors == []
