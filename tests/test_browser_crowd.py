"""Crowd participants come in through an open study link with Prolific's parameters, in Chromium."""

import http.server
import threading

import pytest

from annotation.people.accounts import Actor
from annotation.study import crowd
from annotation.study.design import GROUND_TRUTH
from storage import open_db
from tests.browser import expect, live_app, open_tab, page  # noqa: F401
from tests.test_app_participant import _open_study

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


def _link(config, return_url: str, quota: int) -> str:
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
        )
        return token
    finally:
        db.close()


def _open(page, live_app, token: str, pid: str) -> None:
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
    page.click(f"#participant_{other if check and fail_check else truth_side}")
    return check


def test_a_prolific_participant_judges_resumes_gets_the_codes_and_the_quota_refuses(live_app, page, platform):
    total = _open_study(live_app.config, n_concepts=2)
    token = _link(live_app.config, f"{platform}/done?cc={{code}}", quota=3)
    progress = page.locator("#participant_progress")

    # A: joins, judges every trial, lands on the platform with the completion code.
    _open(page, live_app, token, "pidA")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    open_tab(page, "Judge")
    page.click("#participant_start")
    page.locator("#participant_background").get_by_text("no").click()
    for number in range(1, total):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        _vote(page, live_app)
    expect(progress).to_contain_text(f"Trial {total} of {total}")
    _vote(page, live_app)
    page.wait_for_url(f"{platform}/done?cc=DONE42")
    expect(page.locator("#stub")).to_be_visible()

    # B: judges two trials, opens the link again and goes on where they were.
    _open(page, live_app, token, "pidB")
    open_tab(page, "Judge")
    page.click("#participant_start")
    page.locator("#participant_background").get_by_text("yes").click()
    for number in (1, 2):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        _vote(page, live_app)
    expect(progress).to_contain_text(f"Trial 3 of {total}")
    _open(page, live_app, token, "pidB")
    expect(page.locator("#start_status")).to_contain_text("Welcome back, you take part as")
    open_tab(page, "Judge")
    page.click("#participant_start")
    expect(progress).to_contain_text(f"Trial 3 of {total}")

    # C: fails the attention check and lands on the platform with the screen-out code.
    _open(page, live_app, token, "pidC")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    open_tab(page, "Judge")
    page.click("#participant_start")
    page.locator("#participant_background").get_by_text("no").click()
    for number in range(1, total + 1):
        expect(progress).to_contain_text(f"Trial {number} of {total}")
        if _vote(page, live_app, fail_check=True):
            break
    page.wait_for_url(f"{platform}/done?cc=SCREENED7")

    # D takes the place C's screen-out freed; then all three are taken (A, B, D) and E is refused.
    _open(page, live_app, token, "pidD")
    expect(page.locator("#start_status")).to_contain_text("Welcome, you take part as")
    _open(page, live_app, token, "pidE")
    expect(page.locator("#start_status")).to_contain_text("this study is full: all 3 places are taken")
    people = live_app.query(
        "select c.external_id, c.status, c.platform_session_id, a.roles from crowd_participants c "
        "join annotators a on a.id = c.annotator_id order by c.started"
    )
    assert [(p["external_id"], p["status"], p["platform_session_id"], p["roles"]) for p in people] == [
        ("pidA", "completed", "se-pidA", '["participant"]'),
        ("pidB", "active", "se-pidB", '["participant"]'),
        ("pidC", "screened_out", "se-pidC", '["participant"]'),
        ("pidD", "active", "se-pidD", '["participant"]'),
    ]
    assert page.js_errors == []
