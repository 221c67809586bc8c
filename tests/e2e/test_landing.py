"""The sign-in flow in a real browser: invite link, reload, sign out, admin."""

from pathlib import Path

import pytest

from annotation.people.accounts import Actor, revoke_annotator
from app.landing import RECENT_COLORS_KEY
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.browser import ARTIFACTS, contrast, focused

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")


def _expect_signed_in(page, expect, signed_in: bool) -> None:
    """Sign-in boxes while nobody is signed in; Sign out (on the Start tab) while someone is."""
    if signed_in:
        page.get_by_role("tab", name="Start").click()
    for box in ("#start_invite", "#start_password"):
        (expect(page.locator(box)).to_be_hidden if signed_in else expect(page.locator(box)).to_be_visible)(
            timeout=20_000
        )
    sign_out = page.get_by_role("button", name="Sign out")
    (expect(sign_out).to_be_visible if signed_in else expect(sign_out).to_be_hidden)(timeout=20_000)


def test_invite_link_signs_in_and_a_reload_keeps_the_session(tmp_path, module_chromium):
    config = make_config(tmp_path)
    expect = playwright.expect
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        link = client.predict(admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")["data"][0][3]
        page = module_chromium.new_page()
        page.goto(client.src)
        _expect_signed_in(page, expect, False)
        # Enter in the invite box signs in, as in the password box (it did nothing: outsider 95).
        page.locator("#start_invite textarea").fill("not-an-invite")
        page.locator("#start_invite textarea").press("Enter")
        expect(page.locator("#start_status")).to_contain_text("not valid", timeout=20_000)
        page.goto(link.replace(config.public_url + "/", client.src))
        status = page.locator("#start_status")
        expect(status).to_have_text("Signed in as D0001.", timeout=20_000)
        expect(page).to_have_url(client.src, timeout=20_000)
        # A designer's invite opens their own tab, not the Start tab.
        expect(page.get_by_role("tab", name="Coloring")).to_have_attribute(
            "aria-selected", "true", timeout=20_000
        )
        _expect_signed_in(page, expect, True)
        page.reload()
        expect(status).to_have_text("Signed in as D0001.", timeout=20_000)
        _expect_signed_in(page, expect, True)
        expect(page.get_by_role("tab", name="Admin")).to_have_count(0)
        # A bad link opened while signed in: the page lands where its refusal is shown, the
        # Start tab (not the designer's own tab), and the session stays.
        page.goto(client.src + "?invite=forged-token")
        expect(status).to_contain_text("Your invite link did not work", timeout=20_000)
        expect(status).to_be_visible()
        expect(page.get_by_role("tab", name="Start")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_role("tab", name="Coloring")).to_be_visible()
        _expect_signed_in(page, expect, True)
        page.evaluate(f"localStorage.setItem('{RECENT_COLORS_KEY}', '[\"#705420\"]')")
        page.get_by_role("button", name="Sign out").click()
        expect(status).to_have_text("You are signed out.", timeout=20_000)
        _expect_signed_in(page, expect, False)
        # The next person at this computer does not see the designer's recent colors.
        assert page.evaluate(f"localStorage.getItem('{RECENT_COLORS_KEY}')") is None
        page.reload()
        expect(status).to_have_text(  # the browser still holds the ended session: why it ended
            "You are not signed in. (your session is not valid any more: you signed out; open your invite link again)",
            timeout=20_000,
        )
        page.fill("#start_password input", ADMIN_PASSWORD)
        page.get_by_role("button", name="Sign in as admin").click()
        expect(status).to_have_text("Signed in as admin.", timeout=20_000)
        expect(page.get_by_role("tab", name="Admin")).to_be_visible(timeout=20_000)
        _expect_signed_in(page, expect, True)
        page.get_by_role("button", name="Sign out").click()
        _expect_signed_in(page, expect, False)
        expect(page.locator("#start_password input")).to_have_value("", timeout=20_000)
        # The admin signs in again from the keyboard, then the designer's link opens in this
        # browser: it says whom it replaced here.
        page.fill("#start_password input", ADMIN_PASSWORD)
        page.press("#start_password input", "Enter")
        expect(status).to_have_text("Signed in as admin.", timeout=20_000)
        # The box that had the focus hides: the focus goes to what the page says, not to the
        # page's top (outsider 103).
        assert focused(page, away_from="#start_password") == "start_status: Signed in as admin."
        # The step that shows the Admin tab is the one that stores the session in the browser.
        expect(page.get_by_role("tab", name="Admin")).to_be_visible(timeout=20_000)
        page.evaluate(f"localStorage.setItem('{RECENT_COLORS_KEY}', '[\"#705420\"]')")
        page.goto(link.replace(config.public_url + "/", client.src))
        expect(status).to_have_text(
            "Signed in as D0001. This browser was signed in as admin before; to go back, sign in as admin again.",
            timeout=20_000,
        )
        assert page.evaluate(f"localStorage.getItem('{RECENT_COLORS_KEY}')") is None  # a link: someone else
        # The account is closed meanwhile: a reload says why nobody is signed in.
        db = open_db(config.db_path)
        try:
            revoke_annotator(db, 1, Actor(None, "admin", frozenset({"admin"})), "left the study")
        finally:
            db.close()
        page.reload()
        expect(status).to_have_text(
            "You are not signed in. (your session is not valid any more: the study admin closed your account; "
            "ask them if you should go on: only they can reopen it)",
            timeout=20_000,
        )


def test_forged_invite_link_shows_why_and_signs_nobody_in(tmp_path, module_chromium):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        page = module_chromium.new_page()
        page.goto(client.src + "?invite=forged-token")
        playwright.expect(page.locator("#start_status")).to_contain_text(
            "Your invite link did not work: this invite link is not valid", timeout=20_000
        )


def test_a_reload_reopens_the_last_tab_unless_a_link_or_a_sign_out_came_between(tmp_path, module_chromium):
    """The tab a person opened comes back after a reload (as Gradio's page reloads itself when
    the server returns after a restart), loaded as if clicked, in the tab bar and in its
    overflow menu; a link opened since, or a sign-out, starts from the server's choice again."""
    config = make_config(tmp_path)
    expect = playwright.expect
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        made = client.predict(admin, "researcher", 1, "yes", 7, api_name="/admin_create_invites")
        link = made["data"][0][3]
        page = module_chromium.new_page(viewport={"width": 1280, "height": 900})
        page.goto(client.src)
        page.fill("#start_password input", ADMIN_PASSWORD)
        page.get_by_role("button", name="Sign in as admin").click()
        expect(page.locator("#start_status")).to_have_text("Signed in as admin.", timeout=20_000)
        page.get_by_role("tab", name="Leaderboards").click()
        note = page.locator("#leaderboard_note")
        expect(note).to_contain_text("There is no stored model distribution yet", timeout=20_000)
        page.reload()
        # Opened again by the page, and loaded: the note comes from the tab's own opening step.
        expect(page.get_by_role("tab", name="Leaderboards")).to_have_attribute("aria-selected", "true")
        expect(note).to_contain_text("There is no stored model distribution yet")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "reload-reopens-leaderboards.png"))
        # White on the primary buttons' orange, and the selected tab's label, pass WCAG AA (4.5:1).
        assert contrast(page.locator("#leaderboard_show")) >= 4.5
        assert contrast(page.get_by_role("tab", name="Leaderboards")) >= 4.5
        page.get_by_role("tab", name="Admin").click()  # and on the red ones (3.8:1 before)
        assert contrast(page.locator("#admin_revoke")) >= 4.5
        page.get_by_role("tab", name="Leaderboards").click()
        # A narrow window puts the admin's last tabs in Gradio's overflow menu; one opened
        # from there comes back too.
        page.set_viewport_size({"width": 800, "height": 900})
        page.get_by_role("button", name="More tabs").click()
        page.locator(".overflow-dropdown button", has_text="Admin").click()
        expect(page.locator("#admin_refresh")).to_be_visible()
        page.reload()
        expect(page.locator("#admin_refresh")).to_be_visible()
        expect(page.get_by_role("tab", name="Start")).to_have_attribute("aria-selected", "false")
        # An invite link lands the new person on their own first tab, whatever was open.
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(link.replace(config.public_url + "/", client.src))
        expect(page.locator("#start_status")).to_contain_text("Signed in as R0001.")
        expect(page.get_by_role("tab", name="Study")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_role("tab", name="Admin")).to_have_count(0)
        page.get_by_role("tab", name="Concept browser").click()
        expect(page.locator("#browser_show")).to_be_visible()
        page.reload()
        expect(page.get_by_role("tab", name="Concept browser")).to_have_attribute("aria-selected", "true")
        # After a sign-out the next person starts where the server puts them.
        page.get_by_role("tab", name="Start").click()
        page.get_by_role("button", name="Sign out").click()
        expect(page.locator("#start_status")).to_have_text("You are signed out.")
        page.fill("#start_password input", ADMIN_PASSWORD)
        page.get_by_role("button", name="Sign in as admin").click()
        expect(page.get_by_role("tab", name="Admin")).to_be_visible()
        page.reload()
        expect(page.get_by_role("tab", name="Admin")).to_be_visible()
        expect(page.get_by_role("tab", name="Start")).to_have_attribute("aria-selected", "true")
        assert page.evaluate("() => sessionStorage.getItem('cc-open-tab')") is None


def test_the_key_forgotten_at_sign_out_is_the_canvas_s_recent_colors():
    script = (Path(__file__).parents[2] / "assets" / "web" / "coloring.js").read_text()
    assert f'const RECENT_KEY = "{RECENT_COLORS_KEY}";' in script
