"""The admin in a real browser: sign in with the password, create invite links."""

from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from app.guard import COOKIE
from storage import open_db
from tests.annotation.test_pilot import PILOT, color_as_assigned
from tests.browser import expect, live_app, page, settled, sign_in_admin, table_rows  # noqa: F401
from tests.qc_data import add_coloring

SHOTS = Path("/tmp/shots")

pytestmark = pytest.mark.browser


def test_admin_signs_in_and_creates_invite_links_that_work(live_app, page):
    _sign_in_admin(page, live_app)
    page.locator("#admin_role input").click()
    page.get_by_role("option", name="expert").click()
    page.locator("#admin_count input").fill("3")
    page.get_by_text("yes", exact=True).click()
    # One group, one name, after the choice changed twice: Gradio names each radio again on
    # a change, and arrow keys stopped choosing (outsider 83).
    background = page.locator("#admin_background")
    background.get_by_text("no", exact=True).click()
    background.get_by_text("yes", exact=True).click()
    page.wait_for_function(
        "() => new Set([...document.querySelectorAll('#admin_background input')].map((r) => r.name)).size === 1"
    )
    background.get_by_label("yes", exact=True).press("ArrowRight")
    expect(background.get_by_label("no", exact=True)).to_be_checked()
    background.get_by_label("no", exact=True).press("ArrowLeft")
    expect(background.get_by_label("yes", exact=True)).to_be_checked()
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
    assert csv[0] == "annotator_id,pseudonym,role,invite_link,expires"
    assert [line.split(",")[3] for line in csv[1:]] == links
    assert [line.split(",")[4] for line in csv[1:]] == [row[4] for row in rows]  # when each stops working
    # A refused batch writes no file: the batch before's links were written again (outside probe 123).
    written = sorted((live_app.config.data_dir / "downloads").rglob("invites-*.csv"))
    page.locator("#admin_count input").fill("0")
    page.get_by_role("button", name="Create invite links").click()
    expect(page.locator("#admin_create_note")).to_contain_text("How many")
    page.get_by_role("button", name="Refresh lists").click()  # its chain ran after the refusal's
    expect(page.locator("#admin_annotators [role=row][data-index]")).to_have_count(3)
    assert sorted((live_app.config.data_dir / "downloads").rglob("invites-*.csv")) == written
    assert len(written) == 1 and table_rows(page, "admin_invites") == rows
    token, message = live_app.client.predict(links[1], api_name="/login_invite")
    assert token and message == "Signed in as **E0002**."
    # A lost link: a new one for E0003 (by the pseudonym, as *Reopen account* takes it:
    # outsider 83), and the old one stops working.
    page.locator("#admin_lost input").fill("e0003")
    page.get_by_role("button", name="New invite link").click()
    renewed = page.locator("#admin_new_link_message")
    expect(renewed).to_contain_text("New link for annotator 3 (E0003)")
    new_link = renewed.locator("code").inner_text()
    [newest] = live_app.query("select expires from invites where annotator_id = 3 and revoked is null")
    expect(renewed).to_contain_text(f"valid until {newest['expires'][:16].replace('T', ' ')} UTC")
    assert new_link.startswith(live_app.config.public_url + "/?invite=") and new_link != links[2]
    with pytest.raises(AppError, match="this invite link was replaced"):
        live_app.client.predict(links[2], api_name="/login_invite")
    assert live_app.client.predict(new_link, api_name="/login_invite")[1] == "Signed in as **E0003**."
    page.get_by_role("button", name="Refresh lists").click()
    expect(page.locator("#admin_annotators [role=row][data-index]")).to_have_count(3)
    # The list already showed (it follows new links): wait for the refresh, not its count.
    for index, sign_ins in enumerate(("0", "1", "1")):
        cells = page.locator(f"#admin_annotators [role=row][data-index='{index}'] [role=gridcell]")
        expect(cells.nth(7)).to_have_text(sign_ins)
    people = table_rows(page, "admin_annotators")
    assert [(r[1], r[2], r[3], r[4], r[7]) for r in people] == [
        ("E0001", "expert", "yes", "active", "0"),
        ("E0002", "expert", "yes", "active", "1"),
        ("E0003", "expert", "yes", "active", "1"),
    ]

    # Another tab of this browser signs in as E0001: this tab, still the admin's, downloads
    # its CSV as the admin (the cookie is the browser's; each tab puts its session back).
    def session_cookie():
        return next(c for c in page.context.cookies() if c["name"] == COOKIE)

    admin_cookie = session_cookie()
    # No script reads it (a page on another port of this host would, cookies being the host's).
    assert admin_cookie["httpOnly"] and page.evaluate("document.cookie").find(admin_cookie["value"]) == -1
    other = page.context.new_page()
    other.goto(links[0].replace(live_app.config.public_url + "/", live_app.url.rstrip("/") + "/"))
    expect(other.locator("#start_status")).to_contain_text("Signed in as E0001")
    # Once that tab has put its session (it marks the cookie its own), the cookie is E0001's.
    other.wait_for_function("() => document.cookie.split('; ').includes('cc_tab=' + window.ccTab)")
    assert session_cookie()["value"] != admin_cookie["value"]
    page.bring_to_front()
    # The tab is used (a key), so it puts its own session back, before the key's handlers
    # run on (the request is synchronous), and marks the cookie as its own.
    page.keyboard.press("Shift")
    page.wait_for_function("() => document.cookie.split('; ').includes('cc_tab=' + window.ccTab)")
    assert session_cookie()["value"] == admin_cookie["value"]
    with page.expect_download() as fetched:
        download.click()
    assert Path(fetched.value.path()).read_text().splitlines() == csv
    other.close()
    assert page.js_errors == []


def _sign_in_admin(page, live_app) -> None:
    page.goto(live_app.url)
    sign_in_admin(page)
    page.get_by_role("tab", name="Admin").click()


def test_invites_fill_the_people_list_and_a_refused_new_link_clears_the_earlier_one(live_app, page):
    _sign_in_admin(page, live_app)
    expect(page.locator("#admin_annotators_empty")).to_be_visible()
    page.locator("#admin_count input").fill("2")
    page.get_by_role("button", name="Create invite links").click()
    # The people list follows the new links without "Refresh lists".
    expect(page.locator("#admin_annotators [role=row][data-index]")).to_have_count(2)
    expect(page.locator("#admin_annotators_empty")).to_be_hidden()
    expect(page.locator("#admin_coverage")).to_contain_text("Active people by role: 2 designer")
    page.locator("#admin_lost input").fill("2")
    page.get_by_role("button", name="New invite link").click()
    renewed = page.locator("#admin_new_link_message")
    expect(renewed).to_contain_text("New link for annotator 2 (D0002)")
    page.locator("#admin_lost input").fill("999")
    page.get_by_role("button", name="New invite link").click()
    expect(page.locator("#admin_new_link_note")).to_contain_text(
        "Annotator id or pseudonym: nobody has the id 999 (the people table lists every id)"
    )
    expect(renewed).not_to_contain_text("New link")
    expect(renewed.locator(".error")).to_have_count(0)
    # Still usable: the next request makes a link again.
    page.locator("#admin_lost input").fill("1")
    page.get_by_role("button", name="New invite link").click()
    expect(renewed).to_contain_text("New link for annotator 1 (D0001)")
    expect(page.locator("#admin_new_link_note")).to_have_text("")
    assert page.js_errors == []


def test_the_admin_sets_a_pilot_and_the_coverage_says_what_opens_the_vote(live_app, page):
    designers = [annotator for annotator, _ in live_app.invite("designer", 3)]
    db = open_db(live_app.config.db_path)
    try:
        # A practice coloring counts towards no concept, and the coverage says so.
        add_coloring(db, live_app.config.data_dir, designers[0], "cat", (200, 180, 40), practice=True)
    finally:
        db.close()
    _sign_in_admin(page, live_app)
    coverage = page.locator("#admin_coverage")
    expect(coverage).to_contain_text("0 submitted (1 practice coloring is not counted), 0 accepted")
    expect(coverage).to_contain_text("No pilot: designers get the least covered concepts")
    page.locator("#admin_pilot_concepts textarea").fill("apple, forbidding castle\nrotten apple")
    page.get_by_role("button", name="Set pilot from these names").click()
    message = page.locator("#admin_pilot_message")
    expect(message).to_have_text("Pilot set: “apple”, “forbidding castle”, “rotten apple”.")
    expect(coverage).to_contain_text("Pilot: designers get these 3 concepts before any other")
    expect(coverage).to_contain_text(
        "No pilot concept has yet the 5 colorings from different designers that “Colorings needed per concept” asks: "
        "5 more colorings of 'apple' open its vote"
    )
    assert [r["concept_key"] for r in live_app.query("select concept_key from pilot_concepts")] == PILOT
    # Three designers color two concepts each, as assignment hands them out.
    db = open_db(live_app.config.db_path)
    try:
        for i, designer in enumerate(designers):
            color_as_assigned(db, live_app.config.data_dir, designer, (40 * i, 90, 200), seed=i, now=None)
    finally:
        db.close()
    page.get_by_role("button", name="Refresh lists").click()
    # The Expert tab's number (5 until the vote queue is opened with another).
    expect(coverage).to_contain_text(
        "3 concepts have 2 or more: set “Colorings needed per concept” to 2 and press “Open the vote queue” to open their vote now."
    )
    expect(coverage).to_contain_text("6 submitted (1 practice coloring is not counted)")
    # A refused draw replaces the earlier message and leaves the pilot as it was.
    page.locator("#admin_pilot_size input").fill("50")
    page.get_by_role("button", name="Draw a pilot").click()
    # ... naming its field (outside probe 190: it named none)
    expect(message).to_have_text(
        "⚠️ Or draw this many at random: a pilot needs 1 to 20 concepts (5-20 suggested), got 50"
    )
    expect(message.locator(".error")).to_have_count(0)
    expect(coverage).to_contain_text("Pilot: designers get these 3 concepts")
    coverage.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "admin-pilot-coverage.png"), full_page=True)
    page.get_by_role("button", name="End pilot").click()
    expect(message).to_have_text(
        "The pilot of 3 concepts ended: designers get the least covered concepts of the whole study first."
    )
    expect(coverage).to_contain_text("No pilot: designers get the least covered concepts")
    assert live_app.query("select concept_key from pilot_concepts") == []
    assert page.js_errors == []


def test_build_export_returns_at_once_and_the_page_shows_the_zip_when_it_is_built(live_app, page):
    _sign_in_admin(page, live_app)
    page.get_by_role("button", name="Build export").click()
    # The timer polls the background export until its zip is ready, then shows the file.
    expect(page.locator("#admin_export_status")).to_contain_text("is ready below.", timeout=120_000)
    link = page.locator("#admin_export_file a").first
    expect(link).to_be_visible()
    answer = page.request.get(link.get_attribute("href"))
    assert answer.status == 200 and answer.body()[:2] == b"PK"
    expect(page.locator("#admin_export_note")).to_have_text("")


def test_the_admin_withdraws_a_designers_colorings_and_no_count_holds_them(live_app, page):
    """The consent text promises withdrawal on request; an outside tester (77) found no way
    to do it. The admin's press withdraws them all, and the coverage says so."""
    leaving, staying = (annotator for annotator, _ in live_app.invite("designer", 2))
    db = open_db(live_app.config.db_path)
    try:
        data = live_app.config.data_dir
        withdrawn = [
            add_coloring(db, data, leaving, "apple", (200, 20, 30)),
            add_coloring(db, data, leaving, "banana", (240, 220, 40)),
        ]
        kept = add_coloring(db, data, staying, "apple", (30, 160, 40))
    finally:
        db.close()
    _sign_in_admin(page, live_app)
    coverage = page.locator("#admin_coverage")
    expect(coverage).to_contain_text("3 submitted, 0 accepted")
    # By the pseudonym the designer knows themselves by (the number alone was taken: outsider 78)
    [person] = live_app.query(f"select pseudonym from annotators where id = {leaving}")
    page.locator("#admin_revoked textarea, #admin_revoked input").first.fill(person["pseudonym"].lower())
    page.locator("#admin_revoke_why textarea, #admin_revoke_why input").first.fill("asked by email")
    page.get_by_role("button", name="Withdraw their colorings").click()
    expect(page.locator("#admin_revoke_message")).to_have_text(
        f"Withdrew 2 colorings of annotator {leaving} ({person['pseudonym']}): the P_H of 2 concepts recomputed without them. "
        "No ground truth, leaderboard or new study counts them from now on (votes experts cast on them "
        "before stay in the agreement statistics, which measure the experts); their account stays open (close it too if they leave the study)."
    )
    # The coverage follows without *Refresh lists* (outside probe 232).
    expect(coverage).to_contain_text("1 submitted, 0 accepted, 0 recolor requested, 0 excluded, 2 withdrawn")
    statuses = {r["id"]: r["status"] for r in live_app.query("select id, status from colorings")}
    assert statuses == {withdrawn[0]: "withdrawn", withdrawn[1]: "withdrawn", kept: "submitted"}
    # A second press is refused beside the button, and changes nothing.
    page.get_by_role("button", name="Withdraw their colorings").click()
    expect(page.locator("#admin_revoke_message")).to_contain_text(
        f"the 2 colorings of annotator {leaving} ({person['pseudonym']}) are withdrawn already; nothing changed"
    )
    # Closed by mistake: reopened, with the same id and why (closing was for good: outsider 77).
    page.get_by_role("button", name="Close account").click()
    expect(page.locator("#admin_revoke_message")).to_have_text(
        f"Closed the account of annotator {leaving} ({person['pseudonym']})."
    )
    page.get_by_role("button", name="Reopen account").click()
    expect(page.locator("#admin_revoke_message")).to_have_text(
        f"Reopened the account of annotator {leaving} ({person['pseudonym']}): give them a New invite link (their earlier links "
        "stay revoked)."
    )
    [row] = live_app.query(f"select status from annotators where id = {leaving}")
    assert row["status"] == "active"
    # Withdrawn after the account is closed: the message said it "stays open" (outside probe 145).
    db = open_db(live_app.config.db_path)
    try:
        add_coloring(db, live_app.config.data_dir, leaving, "lemon", (240, 230, 60))
    finally:
        db.close()
    page.get_by_role("button", name="Close account").click()
    expect(page.locator("#admin_revoke_message")).to_have_text(
        f"Closed the account of annotator {leaving} ({person['pseudonym']})."
    )
    page.get_by_role("button", name="Withdraw their colorings").click()
    expect(page.locator("#admin_revoke_message")).to_have_text(
        f"Withdrew 1 coloring of annotator {leaving} ({person['pseudonym']}): the P_H of 1 concept recomputed without them. "
        "No ground truth, leaderboard or new study counts them from now on (votes experts cast on them "
        "before stay in the agreement statistics, which measure the experts); their account is closed already."
    )
    # The people table says "closed", as the buttons do (outside probe 221 read `revoked`), with
    # no *Refresh lists* (it said "active" until then: outside probe 232).
    expect(page.locator("#admin_annotators")).to_contain_text("closed")
    [row] = [r for r in table_rows(page, "admin_annotators") if r[1] == person["pseudonym"]]
    assert row[4] == "closed"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "admin-withdraw.png"), full_page=True)
    assert page.js_errors == []


def test_the_mode_form_shows_the_stored_mode_so_saving_after_a_reload_keeps_it(live_app, page):
    """The form showed the fixed mode's defaults after every reload, and *Save mode* then put an
    adaptive study back to fixed without a word (outside probe 136)."""
    _sign_in_admin(page, live_app)
    settled(page)  # the tab's opening fills the form
    page.locator("#admin_mode").get_by_text("adaptive", exact=True).click()
    _field(page, "admin_min_k").fill("3")
    _field(page, "admin_cap").fill("7")
    _field(page, "admin_threshold").fill("12.5")
    page.get_by_role("button", name="Save mode").click()
    expect(page.locator("#admin_stability_note")).to_contain_text("Saved. adaptive: 3 designers")
    page.reload()  # still signed in (the session cookie)
    page.get_by_role("tab", name="Admin").click()
    expect(page.locator("#admin_mode").get_by_label("adaptive", exact=True)).to_be_checked()
    expect(_field(page, "admin_cap")).to_have_value("7")
    expect(_field(page, "admin_min_k")).to_have_value("3")
    expect(_field(page, "admin_threshold")).to_have_value("12.5")
    page.get_by_role("button", name="Save mode").click()
    expect(page.locator("#admin_stability_note")).to_contain_text("Saved. adaptive: 3 designers")
    [row] = live_app.query("select value from settings where key = 'assignment_mode'")
    assert '"adaptive": true' in row["value"] and '"cap": 7' in row["value"]
    assert page.js_errors == []


def _field(page, elem_id: str):
    """A textbox's text field (one line or more)."""
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first
