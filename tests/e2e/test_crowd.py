"""Crowd participants come in through an open study link with Prolific's parameters, in Chromium."""

import http.server
import re
import threading
from collections.abc import Iterator

import pytest

from annotation.people.accounts import Actor
from annotation.study import crowd
from annotation.study.design import GROUND_TRUTH
from app.guard import COOKIE
from storage import open_db
from tests.app.test_participant import _open_study
from tests.app_server import make_config, running_app, self_signed_certificate
from tests.browser import (  # noqa: F401
    LiveApp,
    answerable,
    expect,
    live_app,
    open_tab,
    page,
    sign_in_admin,
    table_rows,
)

pytestmark = pytest.mark.browser


class _Stub(http.server.BaseHTTPRequestHandler):
    """The platform's return page: answers every GET with a short page."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b"<html><body><p id='stub'>back on the platform</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def platform():
    """A local stand-in for the platform's return URL; yields its base address."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _link(config, return_url: str, quota: int, **options) -> str:
    db = open_db(config.db_path)
    try:
        study_id = db.execute("select id from studies").fetchone()[0]
        _, token = crowd.create_link(
            db,
            study_id,
            Actor(None, "admin", frozenset({"admin"})),
            quota=quota,
            completion_code="DONE42",
            screenout_code="SCREENED7",
            return_url=return_url,
            consent_text=CONSENT,
            **options,
        )
        return token
    finally:
        db.close()


# Long: the box shows all of it, for the page to scroll (a box of 40 lines took no focus and
# hid the rest from a keyboard: outside probe 119).
CONSENT = (
    "Our <b>study</b> of **colors**.\n<img src=x onerror=alert(1)> [link](javascript:alert(1))"
    + "".join(
        f"\n\nParagraph {n}: what is kept, and why, in words a participant reads to the end."
        for n in range(60)
    )
)


def _start(page) -> None:
    """Open the Judge tab and press Start once the page has settled on the new session (its
    reset of the tab, which hides the consent panel, has run: it would hide the panel that
    Start shows if it ran after)."""
    open_tab(page, "Judge")
    expect(page.locator("#participant_progress")).to_contain_text("to see your next trial")
    page.click("#participant_start")


def _consent(page, *, agree: bool = True) -> None:
    """The consent panel shows the text as typed and the pseudonym; answer it."""
    expect(page.locator("#participant_consent")).to_be_visible()
    expect(page.locator("#participant_consent_text textarea")).to_have_value(CONSENT)
    page.wait_for_function(  # its whole height shown (a 40-line box: 1,588 px of text in 802)
        "() => { const box = document.querySelector('#participant_consent_text textarea');"
        " return box.scrollHeight > 1000 && box.scrollHeight <= box.offsetHeight; }"
    )
    expect(page.locator("#participant_consent_who")).to_contain_text("You take part as ")
    expect(page.locator("#participant_consent img")).to_have_count(0)
    expect(page.locator("#participant_consent a[href^='javascript']")).to_have_count(0)
    page.click("#participant_agree" if agree else "#participant_decline")


def _open(page, live_app, token: str, pid: str) -> None:
    """Open the study link for `pid` in `page`, as a fresh tab of the same browser would
    (its stored session kept): from a blank page. A goto from the app's page to a new
    study link was once aborted by Chromium (``net::ERR_ABORTED``, CI beside the whole suite;
    not seen alone), so the link is not opened from the app's page."""
    page.goto("about:blank")
    page.goto(f"{live_app.url}?study={token}&PROLIFIC_PID={pid}&STUDY_ID=st1&SESSION_ID=se-{pid}")


def _vote(page, live_app, *, fail_check: bool = False) -> bool:
    """Answer the trial on screen (the check failed if asked); whether it was a check."""
    task = int(page.locator("#participant_task input").input_value())
    [row] = live_app.query(
        "select p.b, t.left_item from tasks t join study_pairs p on p.id = t.pair_id where t.id = ?", (task,)
    )
    check = row["b"] == GROUND_TRUTH
    truth_side = "left" if row["left_item"] == "b" else "right"
    other = "right" if truth_side == "left" else "left"
    answerable(page, "#participant_progress")
    page.click(f"#participant_{other if check and fail_check else truth_side}")
    return check


def test_a_prolific_participant_judges_resumes_gets_the_codes_and_the_quota_refuses(live_app, page, platform):
    total = _open_study(live_app.config, n_concepts=2)
    token = _link(live_app.config, f"{platform}/done?cc={{code}}", quota=3)
    progress = page.locator("#participant_progress")

    # A: joins, judges every trial, lands on the platform with the completion code.
    _open(page, live_app, token, "pidA")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    expect(page.locator("#start_status")).to_contain_text("first the consent text, then your trials")
    # Nothing to answer before Start: its consent text comes first. The link lands on the
    # Judge tab, which says who they are and when their time ends (only Start's said so).
    expect(page.locator("#participant_progress")).to_contain_text(
        re.compile(
            r"You take part as P\d+; your time for this study ends at .+ UTC \(in \d+ min\)\. Press Start"
        )
    )
    expect(page.locator("#participant_background")).to_be_hidden()
    _start(page)
    expect(progress).to_contain_text("read the consent text")
    expect(page.locator("#participant_background")).to_be_hidden()
    _consent(page)
    expect(page.locator("#participant_consent")).to_be_hidden()
    # The keyboard's focus is on the next step's question, not lost to the page (outsider 67:
    # the next Tab went to the footer): on "yes", an arrow key chooses "no", a Tab goes on to
    # Continue and Space sends it; the focus then waits on the Left button (outsider 95).
    page.wait_for_function(
        "() => document.activeElement?.matches('#participant_background input[value=yes]')"
    )
    page.wait_for_function(  # one group, as the page names it once drawn (`app.common.JS`)
        "() => new Set([...document.querySelectorAll('#participant_background input')].map((r) => r.name)).size === 1"
    )
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")
    expect(page.locator("#participant_background_ok")).to_be_focused()
    page.keyboard.press("Space")
    expect(progress).to_contain_text(f"Trial 1 of {total}")
    expect(page.locator("#participant_left")).to_be_focused()
    [answer] = live_app.query("select design_background from annotators order by id desc limit 1")
    assert answer["design_background"] == 0  # "no"
    for number in range(1, total):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        _vote(page, live_app)
    expect(progress).to_contain_text(f"Trial {total} of {total}")
    _vote(page, live_app)
    # The code is on screen (and read out) before the page goes: it went at once (outsider 67).
    expect(progress).to_contain_text("Your code is DONE42. You are sent back to the study platform in 5 s")
    page.wait_for_url(f"{platform}/done?cc=DONE42")
    expect(page.locator("#stub")).to_be_visible()
    # A comes back (the platform's page failed, say): the page lands where they read that
    # they finished, with their code and the way back, not on a Judge tab promising trials.
    _open(page, live_app, token, "pidA")
    status = page.locator("#start_status")
    expect(status).to_contain_text("you have finished this study. Your code is DONE42")
    expect(status).to_be_visible()
    expect(status.locator("a")).to_have_attribute("href", f"{platform}/done?cc=DONE42")

    # B: judges two trials, opens the link again and goes on where they were.
    _open(page, live_app, token, "pidB")
    _start(page)
    _consent(page)
    page.locator("#participant_background").get_by_text("yes").click()
    page.click("#participant_background_ok")
    for number in (1, 2):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        _vote(page, live_app)
    expect(progress).to_contain_text(f"Trial 3 of {total}")
    # The link opened in another browser ends this one's session: its next vote is refused
    # beside the buttons, and nothing else changes (no error sheet over the colorings).
    other = page.context.browser.new_context()
    elsewhere = other.new_page()
    _open(elsewhere, live_app, token, "pidB")
    expect(elsewhere.locator("#start_status")).to_contain_text("Welcome back, you take part as")
    other.close()
    answerable(page, "#participant_progress")
    page.click("#participant_left")
    expect(page.locator("#participant_vote_note")).to_contain_text("your session is not valid any more")
    expect(page.locator("[data-testid='status-tracker'] .error")).to_have_count(0)
    expect(progress).to_contain_text(f"Trial 3 of {total}")
    _open(page, live_app, token, "pidB")
    expect(page.locator("#start_status")).to_contain_text("Welcome back, you take part as")
    expect(page.locator("#start_status")).to_contain_text("your trials follow")
    _start(page)
    expect(progress).to_contain_text(f"Trial 3 of {total}")  # consented before: straight on
    expect(page.locator("#participant_consent")).to_be_hidden()
    # A reload keeps B's deadline in view, and the Judge tab open.
    page.reload()
    expect(page.locator("#start_status")).to_have_text(
        re.compile(r"Signed in as P\d+\. Your time for this study ends at \d{4}-\d\d-\d\d \d\d:\d\d UTC\.")
    )
    expect(page.get_by_role("tab", name="Judge")).to_have_attribute("aria-selected", "true")
    _start(page)
    expect(progress).to_contain_text(f"Trial 3 of {total}")
    expect(progress).to_contain_text(re.compile(r"your time ends at \d{4}-\d\d-\d\d \d\d:\d\d UTC"))

    # C: fails the attention check and lands on the platform with the screen-out code.
    _open(page, live_app, token, "pidC")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    _start(page)
    _consent(page)
    page.locator("#participant_background").get_by_text("no").click()
    page.click("#participant_background_ok")
    for number in range(1, total + 1):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        if _vote(page, live_app, fail_check=True):
            break
    page.wait_for_url(f"{platform}/done?cc=SCREENED7")

    # X takes the place C freed, does not agree: returned, no code, the place is free again.
    _open(page, live_app, token, "pidX")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    _start(page)
    _consent(page, agree=False)
    expect(progress).to_contain_text("You did not agree, so you do not take part")
    expect(progress.locator("a")).to_have_attribute("href", f"{platform}/done?cc=")
    expect(page.locator("#participant_consent")).to_be_hidden()
    expect(page.locator("#participant_left")).to_be_disabled()
    # The Start tab, opened now, says why no trial comes, as a reload does (it still told them
    # to press Start: outside probe 183).
    page.get_by_role("tab", name="Start").click()
    expect(page.locator("#start_status")).to_contain_text("you did not agree to the consent text")
    # A reload keeps X's session in this browser: the page lands where it says why no trial comes.
    page.reload()
    expect(page.locator("#start_status")).to_contain_text("you did not agree to the consent text")
    expect(page.locator("#start_status")).to_be_visible()
    # X opens the link again: the refusal is shown where the page lands, the Start tab.
    _open(page, live_app, token, "pidX")
    expect(page.locator("#start_status")).to_be_visible()
    expect(page.locator("#start_status")).to_contain_text(
        "This study link did not work: you returned this study; it cannot be taken again"
    )

    # D takes the place X freed; then all three are taken (A, B, D) and E is refused.
    _open(page, live_app, token, "pidD")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    _open(page, live_app, token, "pidE")
    expect(page.locator("#start_status")).to_contain_text("this study is full: all 3 places are taken")
    people = live_app.query(
        "select c.external_id, c.status, c.platform_session_id, a.roles, c.consented is not null as agreed "
        "from crowd_participants c join annotators a on a.id = c.annotator_id order by c.started"
    )
    assert [
        (p["external_id"], p["status"], p["platform_session_id"], p["roles"], p["agreed"]) for p in people
    ] == [
        ("pidA", "completed", "se-pidA", '["participant"]', 1),
        ("pidB", "active", "se-pidB", '["participant"]', 1),
        ("pidC", "screened_out", "se-pidC", '["participant"]', 1),
        ("pidX", "returned", "se-pidX", '["participant"]', 0),
        ("pidD", "active", "se-pidD", '["participant"]', 0),
    ]
    assert live_app.query(
        "select count(*) as n from judgments j join crowd_participants c on "
        "c.annotator_id = j.participant_id where c.external_id = 'pidX'"
    ) == [{"n": 0}]
    assert page.js_errors == []


def test_the_list_of_links_follows_the_payment_counts(live_app, page, platform):
    _open_study(live_app.config, n_concepts=2)
    token = _link(live_app.config, f"{platform}/done?cc={{code}}", quota=3)
    # A link that gives the id twice is refused where the page lands (it took the last one).
    page.goto(f"{live_app.url}?study={token}&PROLIFIC_PID=dupA&PROLIFIC_PID=dupB&STUDY_ID=s&SESSION_ID=x")
    expect(page.locator("#start_status")).to_contain_text(
        "This study link did not work: the study link gives PROLIFIC_PID 2 times"
    )
    page.goto(f"{live_app.url}?study={token}&study={token}&PROLIFIC_PID=dupC&STUDY_ID=s&SESSION_ID=x")
    expect(page.locator("#start_status")).to_contain_text(
        "This study link did not work: the study link gives study 2 times"
    )
    page.goto(live_app.url)
    sign_in_admin(page)
    open_tab(page, "Study")
    expect(page.locator("#crowd_links [role=row][data-index]")).to_have_count(1)
    assert table_rows(page, "crowd_links")[0][4] == "0"  # taken
    expect(page.locator("#crowd_payments_empty")).to_contain_text("type a link's id and press Show payments")
    db = open_db(live_app.config.db_path)  # someone joins while the list is on screen
    try:
        crowd.join(
            db, token, {"PROLIFIC_PID": "pidZ", "STUDY_ID": "s", "SESSION_ID": "z"}, address="203.0.113.5"
        )
        link_id = db.execute("select id from crowd_links").fetchone()[0]
    finally:
        db.close()
    page.fill("#crowd_link_id input", str(link_id))
    page.click("#crowd_show")
    expect(page.locator("#crowd_counts")).to_contain_text("Started 1")
    expect(page.locator("#crowd_links [role=row][data-index] [role=gridcell]").nth(4)).to_have_text("1")
    # What Mark returned and Close link say stays beside them while the counts refresh.
    page.fill("#crowd_external_id textarea", "nosuchpid")
    page.click("#crowd_returned")
    note = page.locator("#crowd_pay_note")
    expect(note).to_contain_text(f"nobody with the id 'nosuchpid' joined open link {link_id}")
    db = open_db(live_app.config.db_path)
    try:
        crowd.join(
            db, token, {"PROLIFIC_PID": "pidY", "STUDY_ID": "s", "SESSION_ID": "y"}, address="203.0.113.6"
        )
    finally:
        db.close()
    expect(page.locator("#crowd_counts")).to_contain_text("Started 2")  # the refresh ran
    expect(note).to_contain_text(f"nobody with the id 'nosuchpid' joined open link {link_id}")
    page.fill("#crowd_external_id textarea", "pidZ")
    page.click("#crowd_returned")
    expect(note).to_have_text(f"pidZ is marked returned on link {link_id}: their place is free again.")
    expect(page.locator("#crowd_counts")).to_contain_text("returned 1")
    page.click("#crowd_restart")  # a worker who took the HIT again (outside probe 112)
    expect(note).to_contain_text(f"pidZ may start again on link {link_id}: their next visit")
    expect(page.locator("#crowd_counts")).to_contain_text("returned 0 · account closed 0 · may start again 1")
    page.click("#crowd_restart")
    expect(note).to_contain_text("'pidZ' may start again already; nothing changed")
    expect(page.locator("#crowd_restart")).to_be_enabled()
    page.click("#crowd_close")
    expect(page.locator("#crowd_links_note")).to_have_text(
        f"Link {link_id} is closed: nobody new joins; whoever is in it may still finish."
    )
    # A second link made with the form: beside the button, its number and until when it takes people.
    study_id = live_app.query("select id from studies")[0]["id"]
    page.fill("#crowd_study_id input", str(study_id))
    page.fill("#crowd_completion_code textarea", "WAVE2DONE")
    page.fill("#crowd_screenout_code textarea", "WAVE2OUT")
    page.fill("#crowd_days input", "0.5")
    page.click("#crowd_make")
    made_note = page.locator("#crowd_make_note")
    expect(made_note).to_contain_text("is made, open until")  # the row is stored by then
    [made] = live_app.query("select id, ends from crowd_links where completion_code = 'WAVE2DONE'")
    ends = made["ends"][:16].replace("T", " ")
    # With more places than the study's votes give trials to, it says how many to ask for
    # (outside probe 225: the link took people the study turned away).
    db = open_db(live_app.config.db_path)
    try:
        room = crowd.votes_left(db, study_id)
    finally:
        db.close()
    people = room.left // room.asked
    expect(made_note).to_have_text(
        f"Link {made['id']} is made, open until {ends} UTC: paste the address below into the platform. "
        f"The votes this study's pairs still need give trials to {people} more people at most, fewer "
        f"than the link's 100 places: ask the platform for {people}, or whoever joins beyond them is "
        "turned away."
    )
    expect(page.locator("#crowd_url textarea")).to_have_value(re.compile(r"\?study=[^&]+&PROLIFIC_PID="))
    # A third, refused: the box no longer shows the second link, whose codes it carries
    # (outside probe 216 could have pasted it for the next study).
    page.fill("#crowd_completion_code textarea", "BAD CODE!")
    page.click("#crowd_make")
    expect(made_note).to_contain_text("completion_code must be")
    expect(page.locator("#crowd_url textarea")).to_have_value("")
    assert live_app.query("select count(*) as n from crowd_links")[0]["n"] == 2
    assert page.js_errors == []


def _loaded(frame, shown: str) -> None:
    """Wait until the images under element `shown` of `frame` have all loaded with pixels
    (scrolled into view: they load lazily)."""
    frame.locator(f"{shown} img").first.scroll_into_view_if_needed()
    frame.wait_for_function(
        "(shown) => [...document.querySelectorAll(shown + ' img')].every((i) => i.complete && i.naturalWidth > 0)",
        arg=shown,
    )


@pytest.fixture
def https_app(tmp_path) -> Iterator[LiveApp]:
    """A real app server over HTTPS (a self-signed certificate), as deployed for a crowd."""
    config = make_config(tmp_path)
    with running_app(config, tls=self_signed_certificate(tmp_path)) as (client, _):
        yield LiveApp(config, client)


@pytest.mark.browser_context(ignore_https_errors=True)  # the app's self-signed certificate
def test_an_mturk_worker_sees_the_trial_images_inside_the_hits_frame(https_app, page, platform):
    """Outside probe 107: inside the HIT's frame (top page on mturk.com) the page's
    ``SameSite=Strict`` session cookie was dropped, and every image of the trials was refused."""
    live_app = https_app
    _open_study(live_app.config, n_concepts=2)
    token = _link(live_app.config, f"{platform}/done?cc={{code}}", quota=3, id_param="workerId")
    # The HIT's preview is told to accept it, not that the link "did not work" (outside probe 112).
    page.goto(f"{live_app.url}?study={token}&assignmentId={crowd.MTURK_PREVIEW}&hitId=H1")
    status = page.locator("#start_status")
    expect(status).to_contain_text("This is the HIT's preview: accept the HIT on MTurk to start the study")
    expect(status).not_to_contain_text("did not work")
    assert live_app.query("select * from crowd_participants") == []
    link = f"{live_app.url}?study={token}&workerId=W1FRAMED&assignmentId=A1&hitId=H1"
    hit = f"<html><body><h1>HIT</h1><iframe id='hit' src='{link}' style='width:100%;height:800px'></iframe></body></html>"
    page.context.route(
        "https://www.mturk.com/**", lambda route: route.fulfill(content_type="text/html", body=hit)
    )
    page.goto("https://www.mturk.com/mturk/preview?groupId=G1")
    frame = page.locator("#hit").element_handle().content_frame()
    _start(frame)
    _consent(frame)
    frame.locator("#participant_background").get_by_text("no").click()
    frame.locator("#participant_background_ok").click()
    expect(frame.locator("#participant_progress")).to_contain_text("Trial 1 of")
    # The model images and the colorings behind the ground truth, as in a tab.
    for shown in ("#participant_left_images", "#participant_right_images", "#participant_colorings"):
        _loaded(frame, shown)
    [cookie] = [c for c in page.context.cookies() if c["name"] == COOKIE]
    assert (cookie["sameSite"], cookie["secure"], cookie["httpOnly"]) == ("None", True, True)
    [worker] = live_app.query(
        "select external_id, platform_study_id, platform_session_id, consented is not null as agreed "
        "from crowd_participants"
    )
    assert tuple(worker.values()) == ("W1FRAMED", "H1", "A1", 1)
    assert page.js_errors == []
