"""Open study links on the Study tab, through the launched app's API."""

import datetime as dt
import re
import stat
import time
import urllib.parse
import zipfile
from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from annotation.study import crowd, design
from app.crowd import SUMMARY_HEADERS, _counts_text, rounded_counts
from app.landing import back_to_platform, study_over
from app.participant import _crowd_message
from storage import open_db, parse_iso
from tests.app.test_participant import _invite, _open_study, _rows
from tests.app_server import ADMIN_PASSWORD, make_config, running_app


def _join(config, token: str, pid: str) -> None:
    db = open_db(config.db_path)
    try:
        crowd.join(db, token, {"PROLIFIC_PID": pid, "SESSION_ID": f"s-{pid}"}, address="10.0.0.1")
    finally:
        db.close()


def test_a_researcher_makes_follows_pays_and_closes_an_open_link(tmp_path):
    config = make_config(tmp_path)
    _open_study(config)
    exports = Path(config.data_dir) / "exports"
    exports.mkdir(mode=0o755)  # as older code made it: open to every local account
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        participant, _ = client.predict(_invite(client, "participant"), api_name="/login_invite")
        form = [
            1,
            "wave 1",
            2,
            30,
            7,
            "DONE1",
            "OUT1",
            0,
            10,
            "PROLIFIC_PID",
            crowd.PROLIFIC_RETURN_URL,
            "Ours <b>",
        ]
        refusals = [
            (admin, {2: 0}, "`quota` must be a whole number from 1 to 10000, got 0"),
            (admin, {4: -1}, r"`days open` must be in \[1/24, 3650\] days \(one hour to ten years\), got -1"),
            (admin, {6: "OUT 1"}, "`screenout_code` must be 1-40 letters"),
            (admin, {3: None}, "`minutes per person` must be a number, got nothing"),
            (admin, {0: 99}, "unknown study id 99"),
            (admin, {11: "x" * 5001}, "`consent_text` may hold at most 5000 characters"),
            (participant, {}, "needs the role researcher or admin"),
        ]
        for token, change, message in refusals:
            values = [change.get(i, v) for i, v in enumerate(form)]
            with pytest.raises(AppError, match=message):
                client.predict(token, *values, api_name="/crowd_make_link")
        assert _rows(config, "select * from crowd_links") == []

        made_at = dt.datetime.now(dt.UTC)
        url, links, made = client.predict(admin, *form, api_name="/crowd_make_link")
        # What was made and until when, beside the button (the table held a raw time stamp).
        [row] = _rows(config, "select ends from crowd_links")
        ends = parse_iso(row["ends"])
        assert dt.timedelta(days=7) <= ends - made_at < dt.timedelta(days=7, minutes=1)
        assert (
            made
            == f"Link 1 is made, open until {ends:%Y-%m-%d %H:%M} UTC: paste the address below into the platform."
        )
        assert links["data"][0][6] == f"{ends:%Y-%m-%d %H:%M} UTC"
        query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
        token = query["study"][0]
        assert query["PROLIFIC_PID"] == ["{{%PROLIFIC_PID%}}"]
        assert [row[:5] for row in links["data"]] == [[1, "wave 1", "pilot", 2, 0]]
        assert _rows(config, "select consent_text from crowd_links") == [{"consent_text": "Ours <b>"}]
        _join(config, token, "pidA")
        _join(config, token, "pidB")

        counts, table, _ = client.predict(admin, 1, api_name="/crowd_payments")
        assert counts.startswith("Started 2 · active 2 · completed 0")
        assert [[row[0], *row[2:4]] for row in table["data"]] == [
            ["pidA", "active", ""],
            ["pidB", "active", ""],
        ]
        assert all(re.fullmatch(r"P\d{4}", row[1]) for row in table["data"])
        started = table["headers"].index("started")  # read as every time on the page (outsider 102)
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", row[started]) for row in table["data"])
        counts, table, _, said = client.predict(admin, 1, "pidB", api_name="/crowd_returned")
        assert "returned 1 · account closed 0 · may start again 0 · study closed 0 · places left 1" in counts
        assert said == "**pidB** is marked returned on link 1: their place is free again."
        with pytest.raises(AppError, match="needs the role researcher or admin"):
            client.predict(participant, 1, "pidB", api_name="/crowd_restart")
        with pytest.raises(AppError, match="nobody with the id 'pidX' joined open link 1"):
            client.predict(admin, 1, "pidX", api_name="/crowd_restart")
        counts, table, _, said = client.predict(admin, 1, " pidB ", api_name="/crowd_restart")
        assert "returned 0 · account closed 0 · may start again 1 · study closed 0 · places left 1" in counts
        assert said.startswith(
            "**pidB** may start again on link 1: their next visit with this id takes a free place"
        )
        assert [row[2] for row in table["data"]] == ["active", "may_restart"]
        files = client.predict(admin, 1, 0.1, api_name="/crowd_download")
        texts = {Path(f).name: Path(f).read_text(encoding="utf-8") for f in files}
        assert sorted(texts) == ["approve.txt", "bonus.csv", "payments.csv"]
        # They name every worker's platform id: the server's account alone may open exports/.
        assert stat.S_IMODE(exports.stat().st_mode) == 0o700
        assert [p.parent.parent.name for p in exports.rglob("payments.csv")] == ["crowd-1"]
        assert texts["payments.csv"].splitlines()[0] == ",".join(crowd.PAYMENT_COLUMNS)
        assert [line.split(",")[0:3:2] for line in texts["payments.csv"].splitlines()[1:]] == [
            ["pidA", "active"],
            ["pidB", "may_restart"],
        ]
        assert texts["approve.txt"] == texts["bonus.csv"] == ""
        with pytest.raises(AppError, match="needs the role researcher or admin"):
            client.predict(participant, 1, api_name="/crowd_payments")
        summary, _ = client.predict(admin, api_name="/admin_crowd_counts")
        assert summary["headers"] == SUMMARY_HEADERS
        state = f"open until {ends:%Y-%m-%d %H:%M} UTC"
        assert summary["data"] == [[1, "wave 1", "pilot", 2, state, 2, 1, 0, 0, 0, 0, 0, 1, 0, 1, None, None]]
        with pytest.raises(AppError, match="needs the role admin"):
            client.predict(participant, api_name="/admin_crowd_counts")

        links, said = client.predict(admin, 1, api_name="/crowd_close_link")
        assert links["data"][0][7]  # closed
        # The Admin tab's counts say a closed link is closed (its places left looked open).
        [row] = _rows(config, "select closed from crowd_links")
        closed = f"closed on {parse_iso(row['closed']):%Y-%m-%d %H:%M} UTC"
        [row] = client.predict(admin, api_name="/admin_crowd_counts")[0]["data"]
        assert row[4] == closed
        assert row[SUMMARY_HEADERS.index("places_left")] == 0  # it said 1: nobody new joins now
        assert links["data"][0][7] == closed.removeprefix("closed on ")
        assert said == "Link 1 is closed: nobody new joins; whoever is in it may still finish."
        with pytest.raises(AppError, match="was closed on .* already"):
            client.predict(admin, 1, api_name="/crowd_close_link")
        # Let start again on a closed link: the note says the link takes nobody (it promised a
        # free place: outside probe 137).
        said = client.predict(admin, 1, "pidA", api_name="/crowd_restart")[3]
        assert said.endswith(
            f"But this link takes nobody now ({closed}), them included: their next visit is refused "
            "(a person stays with the link they first came through, whichever link they open)."
        )
        # More places than the study's votes give trials to: said as the link is made, and the
        # Admin tab's places left are those people (outside probe 225: it said the quota).
        form[2] = 10000
        *_, made = client.predict(admin, *form, api_name="/crowd_make_link")
        db = open_db(config.db_path)
        try:
            room = crowd.votes_left(db, 1)
        finally:
            db.close()
        people = room.left // room.asked
        assert 0 < people < 10000
        assert f"give trials to {people} more people at most, fewer than the link's 10000 places" in made
        [newest, _] = client.predict(admin, api_name="/admin_crowd_counts")[0]["data"]
        assert newest[SUMMARY_HEADERS.index("places_left")] == people
        # A third link shares those people with the second (outside probe 229: each link's
        # note said to ask the platform for all of them).
        form[2] = 3
        *_, made = client.predict(admin, *form, api_name="/crowd_make_link")
        assert (
            f"give trials to {people} more people at most, shared with its other open link 2 (10000 places "
            f"not taken)**: ask the platforms for {people} in all" in made
        )
    with pytest.raises(crowd.LinkClosed, match="this study link is closed"):
        _join(config, token, "pidC")


def test_trial_charts_are_built_once_per_key_and_the_oldest_shown_leave_first():
    from app.participant import TrialCharts

    charts, made = TrialCharts(kept=2), []

    def maker(name):
        def make():
            made.append(name)
            return {"figure": name}

        return make

    first = charts.get("a", maker("a"))
    assert charts.get("a", maker("a2")) is first
    charts.get("b", maker("b"))
    charts.get("a", maker("a3"))  # "a" shown again: "b" is now the oldest
    charts.get("c", maker("c"))
    assert charts.get("a", maker("a4")) is first
    charts.get("b", maker("b2"))
    assert made == ["a", "b", "c", "b2"]


def test_a_crowd_participant_must_consent_before_the_server_takes_a_trial_or_a_vote(tmp_path):
    from annotation.study.design import COLORINGS_SHOWN
    from tests.app.test_participant import PROGRESS, RIGHT_IMAGES, SHOWN_AT, TASK

    config = make_config(tmp_path)
    _open_study(config)
    db = open_db(config.db_path)
    try:
        study_id = db.execute("select id from studies").fetchone()[0]
        admin = crowd.Actor(None, "admin", frozenset({"admin"}))
        _, link = crowd.create_link(
            db,
            study_id,
            admin,
            quota=5,
            completion_code="C1",
            screenout_code="S1",
            consent_text="<i>ours</i>",
        )
        agreeing = crowd.join(db, link, {"PROLIFIC_PID": "pidA"}, address="10.0.0.1").session.token
        declining = crowd.join(db, link, {"PROLIFIC_PID": "pidB"}, address="10.0.0.1").session.token
        late = crowd.join(db, link, {"PROLIFIC_PID": "pidL"}, address="10.0.0.1").session.token
        # pidL's time ran out while the consent text was open.
        db.execute(
            "update crowd_participants set started = '2000-01-01T00:00:00.000000Z' where external_id = 'pidL'"
        )
        db.conn.commit()
    finally:
        db.close()
    with running_app(config) as (client, _):
        view = client.predict(agreeing, api_name="/participant_next")
        assert "read the consent text" in view[PROGRESS] and view[TASK] is None
        assert "<i>ours</i>" in view and any("You take part as **" in str(v) for v in view)
        assert any(re.search(r"ends at 20\d\d-\d\d-\d\d \d\d:\d\d UTC\.", str(v)) for v in view)
        refused = "consent text and choose I agree"
        with pytest.raises(AppError, match=refused):
            client.predict(agreeing, 1, "left", "2025-01-01T00:00:00.000000Z", api_name="/participant_vote")
        with pytest.raises(AppError, match=refused):
            client.predict(agreeing, "no", api_name="/participant_set_background")
        assert _rows(config, "select id from tasks where kind = 'judgment'") == []
        assert _rows(config, "select count(*) as n from judgments") == [{"n": 0}]

        view = client.predict(agreeing, True, api_name="/participant_consent")
        assert "design or art background" in view[PROGRESS]
        view = client.predict(agreeing, "no", api_name="/participant_set_background")
        assert view[PROGRESS].startswith("**Trial 1 of")
        # The first trial may be an attention check (the app's draws are unseeded): its truth
        # side, the one showing colorings, is the answer that keeps the participant in.
        side = "right" if len(view[RIGHT_IMAGES]) == COLORINGS_SHOWN else "left"
        view = client.predict(agreeing, view[TASK], side, view[SHOWN_AT], api_name="/participant_vote")
        assert view[PROGRESS].startswith("**Trial 2 of")

        view = client.predict(declining, False, api_name="/participant_consent")
        assert "You did not agree" in view[PROGRESS] and "cc=)" in view[PROGRESS]
        # An answer from a consent form still open shows where they stand, the form closed.
        view = client.predict(late, True, api_name="/participant_consent")
        assert (
            "Your time for this study ran out" in view[PROGRESS]
            and "[Back to the platform](" in view[PROGRESS]
        )
        # So does a press on a trial left on screen after the time ran out (it was refused,
        # the trial and its buttons kept, the way back shown only after Start).
        view = client.predict(late, 1, "left", "2025-01-01T00:00:00.000000Z", api_name="/participant_vote")
        assert (
            "Your time for this study ran out" in view[PROGRESS]
            and "[Back to the platform](" in view[PROGRESS]
        )
        assert view[TASK] is None
        view = client.predict(declining, True, api_name="/participant_consent")
        assert "You did not agree" in view[PROGRESS] and view[TASK] is None
        assert _rows(config, "select status from crowd_participants where external_id = 'pidB'") == [
            {"status": "returned"}
        ]

        # The study link pasted into the invite box joins, as opening it does; the "." of the
        # sentence it was copied from is no part of it. An invite link likewise.
        pasted = f"http://127.0.0.1:7860/?study={link}&PROLIFIC_PID=pidC."
        token, message = client.predict(pasted, api_name="/login_invite")
        assert token and message.startswith("Welcome, you take part as **P")
        # The end of their time with its date: a day-long limit read "ends at" the time it was then.
        [row] = _rows(
            config,
            "select c.started, l.minutes from crowd_participants c join crowd_links l "
            "on l.id = c.link_id where external_id = 'pidC'",
        )
        deadline = parse_iso(row["started"]) + dt.timedelta(minutes=row["minutes"])
        assert f"Your time for this study ends at {deadline:%Y-%m-%d %H:%M} UTC." in message
        token, message = client.predict(pasted, api_name="/login_invite")  # the first session ends
        assert message.startswith("Welcome back, you take part")
        invite = _invite(client, "participant")
        assert client.predict(f"({invite}).", api_name="/login_invite")[1].startswith("Signed in as **P")
        with pytest.raises(AppError, match="this study link is not valid"):
            client.predict(pasted.replace(link, "forged"), api_name="/login_invite")
        # An empty STUDY_ID or SESSION_ID is refused pasted as it is opened (the paste joined
        # with a blank study id in the payments: outsider 81); nobody joins.
        before = _rows(config, "select count(*) as n from crowd_participants")
        for blank in ("STUDY_ID=", "SESSION_ID="):
            with pytest.raises(AppError, match=f"^`{blank[:-1]}` is in the study link but empty"):
                client.predict(f"{pasted[:-1]}&{blank}", api_name="/login_invite")
        assert _rows(config, "select count(*) as n from crowd_participants") == before

        # The study is closed: one still judging is told so and sent back to return it (they
        # were told to come back later, an invited participant that every pair had its votes:
        # outside probe 129).
        held = client.predict(agreeing, api_name="/participant_next")
        assert held[TASK] is not None
        db = open_db(config.db_path)
        try:
            design.close_study(db, study_id, admin, "enough votes")
        finally:
            db.close()
        # The trial on screen, answered: the tab says the study closed, its buttons off (the
        # refusal went beside buttons that stayed usable: outside probe 137). Someone who had
        # not agreed yet is not asked to (they could agree to a closed study).
        answered = client.predict(agreeing, held[TASK], "left", held[SHOWN_AT], api_name="/participant_vote")
        waiting = client.predict(token, api_name="/participant_next")
        for view in (answered, waiting):
            assert (
                view[PROGRESS].startswith("**The organisers closed this study** on ") and view[TASK] is None
            )
        # Opening the link again says so too (it said "Welcome back … press Start").
        _, message = client.predict(pasted, api_name="/login_invite")
        assert re.fullmatch(
            r"Welcome back, \*\*P\d+\*\*\. \*\*The organisers closed this study\*\* on .+ UTC: no more votes "
            r"are taken, and what you judged \(0 trials\) is kept\. Please return the study on the platform, "
            r"and message its researcher there about your time\. \[Back to the platform\]\(.+\)",
            message,
        ), message
        view = client.predict(agreeing, api_name="/participant_next")
        assert re.fullmatch(
            r"\*\*The organisers closed this study\*\* on 20\d\d-\d\d-\d\d \d\d:\d\d UTC: no more votes are "
            r"taken, and what you judged \(1 trial\) is kept\. Please return the study on the platform, and "
            r"message its researcher there about your time\. \[Back to the platform\]\(.+\)",
            view[PROGRESS],
        ), view[PROGRESS]
        assert view[TASK] is None

        # The Admin tab's export names the external ids only when asked to.
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        for asked in (False, True):
            client.predict(admin, asked, api_name="/admin_export_start")
            for _ in range(1200):  # a condition, not a clock: the zip shows once it is built
                line, archive = client.predict(admin, api_name="/admin_export_poll")
                if archive is not None:
                    break
                time.sleep(0.1)
            assert line.endswith("It holds the crowd participants' external ids.") == asked
            with zipfile.ZipFile(archive) as export:
                names = export.namelist()
                text = "".join(export.read(n).decode("latin-1") for n in names if n.startswith("csv/"))
            assert ("csv/crowd_external_ids.csv" in names) == asked
            assert ("pidA" in text, "pidB" in text) == (asked, asked)
    people = _rows(config, "select external_id, status, consented from crowd_participants order by started")
    assert [(p["external_id"], p["status"], bool(p["consented"])) for p in people] == [
        ("pidL", "timed_out", False),  # its start was set back
        ("pidA", "study_closed", True),  # judging when the study closed (they stayed active)
        ("pidB", "returned", False),
        ("pidC", "study_closed", False),
    ]


def test_a_chart_made_without_plotly_is_the_figure_plotly_serialises():
    import json

    import numpy as np

    from app.participant import _chart, chart_data

    rng = np.random.default_rng(3)
    for title in ("Left", "Ground truth"):
        for p in (rng.dirichlet(np.ones(71)), np.eye(71)[5], rng.dirichlet(np.ones(71) * 0.1)):
            fast = chart_data(p, title)
            assert fast.type == "plotly"
            assert json.loads(fast.plot) == json.loads(_chart(p, title).to_json())
    with pytest.raises(ValueError, match=r"must have shape \(71,\)"):
        chart_data(np.ones(70) / 70, "Left")
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        chart_data(np.full(71, 2.0), "Left")


def test_who_comes_back_after_finishing_reads_how_it_ended_and_their_code():
    """A person screened out who opened the link again read "you have finished this study"
    (an outside check); the screen-out page had said "This study has ended for you"."""
    from app.landing import study_over

    def state(status, code):
        return crowd.CrowdState(status, code, f"https://p.example/done?cc={code}", "", "pid", "2026-12-01")

    assert study_over(state("completed", "DONE1")).startswith(
        "you have finished this study. Your code is **DONE1**"
    )
    assert study_over(state("screened_out", "OUT1")).startswith(
        "this study has ended for you. Your code is **OUT1**"
    )
    assert study_over(state("active", "")) == ""


def test_the_study_tab_and_the_admin_tab_show_the_same_median_and_rate():
    """Outside probe 107: the Admin tab's table said 1.25 median minutes where the Study
    tab's line said 1.2."""
    counts = dict.fromkeys(crowd.STATUSES, 0) | {"started": 3, "places_left": 1, "takes_nobody": None}
    counts |= {"median_minutes": 1.25, "attention_failure_rate": 1 / 3}
    table = rounded_counts(counts)
    assert (table["median_minutes"], table["attention_failure_rate"]) == (1.2, 0.333)
    line = _counts_text(counts)
    assert f"median minutes (completed) {table['median_minutes']} · attention failure rate 33%" in line
    assert (
        rounded_counts(counts | {"median_minutes": None, "attention_failure_rate": None})["median_minutes"]
        is None
    )


def test_the_line_a_participant_reads_on_signing_in_says_where_they_stand(tmp_path):
    """It said "Press Start to see your next trial" to a crowd participant whose study was
    closed and to an invited participant who had judged everything (outside probe 137)."""
    import numpy as np

    from annotation.people.accounts import Actor, create_annotators, login_with_invite
    from annotation.study import judging
    from app.common import AppContext
    from app.participant import _greeting

    config = make_config(tmp_path)
    _open_study(config, n_concepts=1, attention_rate=0.0)
    admin = Actor(None, "admin", frozenset({"admin"}))
    db = open_db(config.db_path)
    try:
        study_id = db.execute("select id from studies").fetchone()[0]
        _, link = crowd.create_link(db, study_id, admin, quota=5, completion_code="C1", screenout_code="S1")
        joined = crowd.join(db, link, {"PROLIFIC_PID": "pidA"}, address="10.0.0.1").session.token
        [(row, invite)] = create_annotators(db, 1, "participant")
        invited = login_with_invite(db, invite).token
        invitee = Actor(row["id"], row["pseudonym"], frozenset({"participant"}))
    finally:
        db.close()
    ctx = AppContext.prepare(config)
    try:
        assert _greeting(ctx, invited) == ""  # the caller says "Press Start"
        assert re.fullmatch(
            r"You take part as \*\*P\d+\*\*; your time for this study ends at .+ UTC \(in \d+ min\)\. "
            r"Press \*\*Start\*\* to see your next trial\.",
            _greeting(ctx, joined),
        ), _greeting(ctx, joined)
        with ctx.db() as db:
            judging.set_background(db, invitee, True)
            while trial := judging.next_trial(db, invitee, np.random.default_rng(0)):
                judging.record_judgment(db, invitee, trial.task_id, "left", 2.0)
            done, total = judging.progress(db, invitee)
        assert done == total > 0
        assert _greeting(ctx, invited) == f"**All done: you judged {done} of {total} trials. Thank you!**"
        with ctx.db() as db:
            design.close_study(db, study_id, admin, "enough votes")
        assert _greeting(ctx, joined).startswith("**The organisers closed this study** on ")
        # ... and the invitee is told it closed (a reload said "Press Start": outside probe 139)
        assert re.fullmatch(
            rf"\*\*This study is closed\*\*: its organisers closed it on .+ UTC; you judged {done} trials in "
            r"it\. Thank you!",
            _greeting(ctx, invited),
        ), _greeting(ctx, invited)
    finally:
        ctx.close()


@pytest.mark.parametrize("status", ["returned", "timed_out", "account_closed"])
def test_a_participant_leaving_without_a_code_on_mturk_is_sent_to_its_return_button(status):
    """MTurk's return URL, its external submit, with no code would submit the assignment
    empty (outside probe 171): `CrowdState.platform_url` is "" there, and the page says
    how MTurk returns a HIT instead of linking anywhere."""
    mturk = crowd.CrowdState(status, "", "", "2026-12-06T12:00:00.000000Z", "W1")
    said = [_crowd_message(mturk), study_over(mturk)]
    if status == "returned":  # not agreeing: the page and the landing say the same way back
        assert all("On MTurk, return the HIT with its *Return* button." in text for text in said), said
    else:
        assert "On MTurk, return the HIT with its *Return* button." in said[0], said
    assert not any("](" in text for text in said), said
    prolific = crowd.CrowdState(
        status, "", "", "2026-12-06T12:00:00.000000Z", "P1", platform_url="https://p/?cc="
    )
    assert back_to_platform(prolific) == "[Back to the platform](https://p/?cc=)"
    assert "[Back to the platform](https://p/?cc=)" in _crowd_message(prolific)


@pytest.mark.parametrize("status", ["completed", "screened_out", "returned", "timed_out", "account_closed"])
def test_a_return_url_cannot_close_its_link_and_add_markup_after_it(status):
    """A return URL with ``)![t](http://…)`` (taken before `crowd.create_link` refused such
    characters) closed the page's link early and loaded an image of that host in the
    participant's browser (outside probe 206): each message that links to it is one link to
    the whole URL, percent-encoded, whatever it holds (read here by markdown-it, CommonMark)."""
    from markdown_it import MarkdownIt

    url = "https://x.example/done?cc={code})![t](http://evil.example/t.png)[j](http://evil.example/j"
    code = "" if status in ("returned", "timed_out", "account_closed") else "C0DE"
    state = crowd.CrowdState(
        status,
        code,
        url.replace("{code}", code) if code else "",
        "2026-12-06T12:00:00.000000Z",
        "P1",
        consented="" if status == "returned" else "2026-12-06T11:00:00.000000Z",
        platform_url=url.replace("{code}", ""),
    )
    linked = []
    for text in filter(None, [_crowd_message(state), study_over(state)]):
        html = MarkdownIt("commonmark").render(text)
        assert "<img" not in html, html
        hrefs = re.findall(r'<a href="([^"]+)"', html)
        assert len(hrefs) <= 1 and html.count("<a ") == len(hrefs), html
        linked += [urllib.parse.unquote(h.replace("&amp;", "&")) for h in hrefs]
    assert linked and set(linked) == {url.replace("{code}", code)}
