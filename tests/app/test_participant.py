"""The Judge tab against a real launched app: gradio_client session, keyboard in Chromium."""

import hashlib
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client.exceptions import AppError
from numpy.testing import assert_allclose

from annotation.people.accounts import Actor
from annotation.study import design as study
from app.common import shown_mark
from app.guard import COOKIE
from app.participant import ANSWERED_ELSEWHERE
from storage import ensure_schema, open_db
from storage import human as human_rows
from tests.app_server import ADMIN_PASSWORD, SessionClient, make_config, running_app
from tests.research_data import figure
from tests.study_data import populate, sources, truth_source

# Output positions of the participant endpoints (see app.participant.build).
(
    PROGRESS,
    BACKGROUND,
    TRUTH_PLOT,
    STRIP,
    COLORINGS,
    LEFT_IMAGES,
    LEFT_PLOT,
    RIGHT_IMAGES,
    RIGHT_PLOT,
    TASK,
    SHOWN_AT,
) = range(11)


def _open_study(config, n_concepts=4, reference=False, studies=1, **design):
    """Prepare the app's database with an open study (or `studies` of them); returns the pair
    count of the first. With `reference`, the ground truth is a reference set of ratings (no
    colorings)."""
    db = open_db(config.db_path)
    try:
        ensure_schema(db)
        truths, _ = populate(db, config.data_dir, 8, np.random.default_rng(0))
        if reference:
            human_rows.store_reference(db, "lab", truths, "ratings, for tests")
        sizes = []
        for number in range(studies):
            study_id = study.create_study(
                db,
                "pilot" if number == 0 else f"pilot {number + 1}",
                sources(),
                study.reference_ground_truth(db, "lab")
                if reference
                else truth_source(config.data_dir, truths),
                seed=number,
                n_concepts=n_concepts,
                **{"attention_rate": 0.1, **design},
            )
            study.open_study(db, study_id, Actor(None, "admin", frozenset({"admin"})))
            sizes.append(sum(study.study_size(db, study_id).values()))
        return sizes[0]
    finally:
        db.close()


def _rows(config, sql):
    db = open_db(config.db_path)
    try:
        return [dict(r) for r in db.query(sql)]
    finally:
        db.close()


def _invite(client, role, background="unknown"):
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    return client.predict(admin, role, 1, background, 7, api_name="/admin_create_invites")["data"][0][3]


def test_a_participant_without_a_pair_is_told_whether_one_may_still_come(tmp_path):
    """An outside tester was told to come back later when the pairs left all had their votes."""
    config = make_config(tmp_path)
    n_pairs = _open_study(config, n_concepts=2, votes_per_pair=1, attention_rate=0.0)
    with running_app(config) as (client, _):
        first, second = (
            client.predict(_invite(client, "participant"), api_name="/login_invite")[0] for _ in range(2)
        )
        views = [
            client.predict(token, "yes", api_name="/participant_set_background") for token in (first, second)
        ]
        assert views[0][PROGRESS].startswith(f"**Trial 1 of {n_pairs}**")  # the first holds every pair
        assert views[1][PROGRESS].startswith("**No pair is waiting for you right now** (0 of ")
        assert "with other participants" in views[1][PROGRESS] and views[1][TASK] is None
        # ... and until when at the latest (it said "come back later" with no time, an outside check)
        assert re.search(
            r"not answered it by \d{4}-\d\d-\d\d \d\d:\d\d UTC at the latest \(press \*\*Start / continue\*\* then\)\.$",
            views[1][PROGRESS],
        ), views[1][PROGRESS]
        view = views[0]
        for _ in range(n_pairs):
            view = client.predict(first, view[TASK], "left", view[SHOWN_AT], api_name="/participant_vote")
        assert view[PROGRESS].startswith(f"**All done: you judged {n_pairs} of {n_pairs}")
        view = client.predict(second, api_name="/participant_next")
        assert view[PROGRESS] == (
            "**All done: you judged 0 trials**, and every other pair already has all the votes the "
            "study needs. Thank you!"
        )
        # Someone arriving now is told so at once, not asked their background first.
        third, _ = client.predict(_invite(client, "participant"), api_name="/login_invite")
        arriving = client.predict(third, api_name="/participant_next")
        assert arriving[PROGRESS] == view[PROGRESS] and arriving[BACKGROUND]["visible"] is False
        # Closed, the study says so to both (it said every pair had its votes: outside probe 129).
        db = open_db(config.db_path)
        try:
            study.close_study(db, 1, Actor(None, "admin", frozenset({"admin"})), "enough votes")
        finally:
            db.close()
        for token, done in ((first, f"{n_pairs} trials"), (second, "0 trials")):
            view = client.predict(token, api_name="/participant_next")
            assert re.fullmatch(
                r"\*\*This study is closed\*\*: its organisers closed it on 20\d\d-\d\d-\d\d \d\d:\d\d UTC; "
                f"you judged {done} in it\\. Thank you!",
                view[PROGRESS],
            ), view[PROGRESS]


def test_an_invited_participant_is_told_the_count_runs_over_every_open_study(tmp_path):
    """An outside tester read "Trial 4 of 150" for a study of 75 trials: an invited participant
    judges every open study, and the count is their sum, which the line now says."""
    config = make_config(tmp_path)
    n_pairs = _open_study(config, n_concepts=2, attention_rate=0.0, studies=2)
    with running_app(config) as (client, _):
        token, _ = client.predict(_invite(client, "participant"), api_name="/login_invite")
        view = client.predict(token, "yes", api_name="/participant_set_background")
        assert view[PROGRESS].startswith(f"**Trial 1 of {2 * n_pairs}** (over 2 open studies) · concept: **")
        # A second tab still showing trial 1, answered in the first: its press stores nothing
        # and the tab moves on to trial 2, saying why (it stayed on trial 1 and told the
        # person to "go on with the trial shown", whose every press was refused again).
        answered = client.predict(token, view[TASK], "left", view[SHOWN_AT], api_name="/participant_vote")
        stale = client.predict(token, view[TASK], "right", view[SHOWN_AT], api_name="/participant_vote")
        assert answered[PROGRESS].startswith(f"**Trial 2 of {2 * n_pairs}**")
        assert stale[PROGRESS] == ANSWERED_ELSEWHERE + answered[PROGRESS]
        assert stale[TASK] == answered[TASK] != view[TASK]
        # The study of the trial on screen, one they judged in already, closed: the press goes
        # on to the other study's next trial, saying why its answer was not stored (it moved
        # on without a word).
        while True:
            [held] = _rows(
                config,
                "select p.study_id, (select count(*) from judgments j join study_pairs q on q.id = j.pair_id "
                "where q.study_id = p.study_id) as judged from tasks t join study_pairs p on p.id = t.pair_id "
                f"where t.id = {int(answered[TASK])}",
            )
            if held["judged"]:
                break
            answered = client.predict(
                token, answered[TASK], "left", answered[SHOWN_AT], api_name="/participant_vote"
            )
        db = open_db(config.db_path)
        try:
            study.close_study(db, held["study_id"], Actor(None, "admin", frozenset({"admin"})), "enough")
        finally:
            db.close()
        dropped = client.predict(
            token, answered[TASK], "left", answered[SHOWN_AT], api_name="/participant_vote"
        )
        assert re.match(
            r"\*\*Not stored:\*\* this study was closed by its organisers on 20\d\d-\d\d-\d\d \d\d:\d\d UTC; "
            r"this answer was not stored, and those you gave before are kept · \*\*Trial \d+ of \d+\*\* · ",
            dropped[PROGRESS],
        ), dropped[PROGRESS]
        assert dropped[TASK] is not None
        # All done counts the trial judged in the closed study too (it said "7 of 7" for 10).
        view = dropped
        while view[TASK] is not None:
            view = client.predict(token, view[TASK], "left", view[SHOWN_AT], api_name="/participant_vote")
        [closed] = _rows(
            config,
            "select count(*) as n from judgments j join study_pairs p on p.id = j.pair_id where p.study_id = "
            f"{held['study_id']}",
        )
        assert closed["n"] > 0
        assert view[PROGRESS] == (
            f"**All done: you judged {n_pairs} of {n_pairs} trials. Thank you!** You also judged "
            f"{closed['n']} trial{'s' if closed['n'] > 1 else ''} in studies their organisers closed "
            "since; they are kept."
        )
    assert len(_rows(config, "select choice from judgments")) == n_pairs + closed["n"]


def test_an_invitee_without_a_trial_is_told_why_and_counts_their_trials_in_a_closed_study(tmp_path):
    """An invitee read "All done: you judged 0 trials" while the study's votes were kept for
    people from its link (who come back to them if unused), and after judging in a study
    closed since while another study had every vote it needs (outside probe 138)."""
    from annotation.people.accounts import create_annotators, require
    from annotation.study import crowd, judging
    from app.participant import _no_trial
    from storage import shown_time

    admin = Actor(None, "admin", frozenset({"admin"}))

    def invitees(db, n):
        rows = create_annotators(db, n, "participant")
        return [Actor(row["id"], row["pseudonym"], frozenset({"participant"})) for row, _ in rows]

    def judge(db, person, n=None):
        judging.set_background(db, person, True)
        done = 0
        while (n is None or done < n) and (
            trial := judging.next_trial(db, person, np.random.default_rng(done), batch_size=1)
        ):
            judging.record_judgment(db, person, trial.task_id, "left", 2.0)
            done += 1
        return done

    (tmp_path / "none").mkdir()
    config = make_config(tmp_path / "none")
    db = open_db(config.db_path)
    try:
        ensure_schema(db)
        [early] = invitees(db, 1)
        assert _no_trial(db, early) == (  # it said every pair had its votes
            "**No study is open yet**: the organisers have not opened a study to judge. Please come back "
            "when they tell you it is open."
        )
    finally:
        db.close()

    (tmp_path / "kept").mkdir()
    config = make_config(tmp_path / "kept")
    n_pairs = _open_study(config, n_concepts=1, votes_per_pair=1, attention_rate=0.0)
    db = open_db(config.db_path)
    try:
        _, link = crowd.create_link(
            db, 1, admin, quota=5, minutes=30, completion_code="C1", screenout_code="S1"
        )
        joined = crowd.join(db, link, {"PROLIFIC_PID": "pidA"}, address="10.0.0.1")
        waiting = require(db, joined.session.token)
        [late] = invitees(db, 1)
        assert judge(db, late) == 0  # every vote is owed to the person at the consent text
        deadline = joined.state.deadline
        assert _no_trial(db, late) == (
            f"**No pair is waiting for you right now** (0 of {n_pairs} judged): the votes still needed "
            "are kept for participants who came through the study's link and are taking it now; what "
            f"they leave comes back to you when their time ends, by {shown_time(deadline)} at the latest "
            "(press **Start / continue** then)."
        )
        crowd.consent(db, waiting, True)
        assert judge(db, waiting) == n_pairs
        assert _no_trial(db, late).startswith("**All done: you judged 0 trials**, and every")
    finally:
        db.close()

    (tmp_path / "closed").mkdir()
    config = make_config(tmp_path / "closed")
    _open_study(config, n_concepts=1, votes_per_pair=1, attention_rate=0.0, studies=2)
    db = open_db(config.db_path)
    try:
        first, other = invitees(db, 2)
        assert judge(db, first, 1) == 1
        assert judge(db, other) > 0  # every pair left has its one vote now
        [(closed,)] = db.execute(
            "select p.study_id from judgments j join study_pairs p on p.id = j.pair_id where j.participant_id = ?",
            [first.annotator_id],
        ).fetchall()
        study.close_study(db, closed, admin, "enough votes")
        when = study.closed_studies(db)[str(closed)]["closed"]
        name = db["studies"].get(closed)["name"]
        assert _no_trial(db, first) == (
            "**All done: you judged 1 trial**, and every other pair already has all the votes the study "
            f"needs. Thank you! ({name} was closed by its organisers on {shown_time(when)}; what you "
            "judged in it is kept.)"
        )
    finally:
        db.close()


def test_a_participant_judges_every_pair_through_the_api(tmp_path):
    config = make_config(tmp_path)
    n_pairs = _open_study(config)
    with running_app(config) as (client, _):
        token, _ = client.predict(_invite(client, "participant"), api_name="/login_invite")
        view = client.predict(token, api_name="/participant_next")
        assert "design or art background" in view[PROGRESS] and view[TASK] is None
        with pytest.raises(AppError, match="design or art background"):
            client.predict(token, 1, "left", "2025-01-01T00:00:00.000000Z", api_name="/participant_vote")
        view = client.predict(token, "yes", api_name="/participant_set_background")
        sides = []
        for number in range(1, n_pairs + 1):
            assert view[PROGRESS].startswith(f"**Trial {number} of {n_pairs}** · concept: **")
            assert len(view[COLORINGS]) == study.COLORINGS_SHOWN
            # Two images per model output; an attention check's truth side shows colorings.
            assert {len(view[LEFT_IMAGES]), len(view[RIGHT_IMAGES])} <= {2, study.COLORINGS_SHOWN}
            assert all(
                plot["type"] == "plotly"
                for plot in (view[TRUTH_PLOT], view[STRIP], view[LEFT_PLOT], view[RIGHT_PLOT])
            )
            side = ("left", "right")[number % 2]
            sides.append((int(view[TASK]), side))
            # The trial id as returned, or its digits as text: the same trial either way.
            trial = view[TASK] if number % 2 else str(int(view[TASK]))
            view = client.predict(token, trial, side, view[SHOWN_AT], api_name="/participant_vote")
        assert view[PROGRESS].startswith(f"**All done: you judged {n_pairs} of {n_pairs}")
        assert view[TASK] is None
    rows = _rows(
        config,
        "select t.id as task, t.left_item as task_left, j.left_item, j.choice, "
        "j.winner, a.design_background from judgments j join tasks t on "
        "t.result_id = j.id and t.kind = 'judgment' join annotators a on "
        "a.id = j.participant_id order by j.id",
    )
    assert [(r["task"], r["choice"]) for r in rows] == sides
    assert all(r["left_item"] == r["task_left"] and r["design_background"] == 1 for r in rows)
    assert all((r["winner"] == r["left_item"]) == (r["choice"] == "left") for r in rows)


def test_a_trial_names_model_images_by_their_content_alone_and_serves_them_to_its_participant(tmp_path):
    """A model image's path names its run (``runs/<run>/images/...``): with runs named after
    their models, a participant told the two sides apart by the paths (outside probe 171)."""
    config = make_config(tmp_path)
    _open_study(config, attention_rate=0.0)
    data_dir = Path(config.data_dir).resolve()
    with running_app(config) as (client, _):
        tokens = [
            client.predict(_invite(client, "participant", "no"), api_name="/login_invite")[0]
            for _ in range(2)
        ]
        # The paths as the server answers them (a client that downloads names its own copies).
        raw = SessionClient(client.src, verbose=False, download_files=False)
        view = raw.predict(tokens[0], api_name="/participant_next")
        shown = [Path(image["image"]["path"]) for side in (LEFT_IMAGES, RIGHT_IMAGES) for image in view[side]]
        assert len(shown) == 4
        run_images = {
            hashlib.sha256((data_dir / r["image_path"]).read_bytes()).hexdigest(): r["image_path"]
            for r in _rows(config, "select image_path from run_items")
        }
        for path in shown:
            relative = path.relative_to(data_dir).as_posix()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            assert relative == f"trials/{digest[:2]}/{digest}.png"  # and it is a run's image
            assert digest in run_images
            # Served to the participant whose trial showed it, to no other; the run's own
            # path to neither.
            assert [_fetch(client, path, token).status_code for token in tokens] == [200, 403]
            run_image = data_dir / run_images[digest]
            assert _fetch(client, run_image, tokens[0]).status_code == 403
        page = str(view)
        assert "runs/" not in page and "/run" not in page


def _fetch(client, path, token):
    return httpx.get(f"{client.src}gradio_api/file={path}", cookies={COOKIE: token})


def test_a_vote_for_someone_elses_task_is_refused_and_stores_nothing(tmp_path):
    config = make_config(tmp_path)
    _open_study(config)
    with running_app(config) as (client, _):
        first, _ = client.predict(_invite(client, "participant", "no"), api_name="/login_invite")
        second, _ = client.predict(_invite(client, "participant", "yes"), api_name="/login_invite")
        view = client.predict(first, api_name="/participant_next")
        for token, task, side, message in [
            (second, view[TASK], "left", "not a pair handed to you"),
            (first, view[TASK], "middle", "`side` must be one of"),
            (first, view[TASK], "left", "`shown_at` must be the time participant_next gave"),
        ]:
            shown = (
                view[SHOWN_AT]
                if message != "`shown_at` must be the time participant_next gave"
                else "yesterday"
            )
            with pytest.raises(AppError, match=message):
                client.predict(token, task, side, shown, api_name="/participant_vote")
        # The trial's colorings and model images are served to whom it showed them, not to
        # another participant who learns their names (an outside tester, as a crowd worker
        # who had not consented, fetched a coloring of no study by its path).
        # A solid swatch may lie in several folders: the same bytes, two paths. A model image
        # is shown as its copy in trials/, served to this participant alone; its runs/ path is
        # served to no participant (it names its run).
        on_server = {}
        for folder in ("colorings", "runs", "trials"):
            for path in (config.data_dir / folder).rglob("*.png"):
                on_server.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), []).append(path)
        shown = [
            on_server[hashlib.sha256(Path(item["image"]).read_bytes()).hexdigest()]
            for item in [*view[COLORINGS], *view[LEFT_IMAGES]]
        ]
        assert len(shown) > 2

        def fetched(paths, token):
            cookies = {COOKIE: token}
            return {httpx.get(f"{client.src}gradio_api/file={p}", cookies=cookies).status_code for p in paths}

        for paths in shown:
            assert 200 in fetched(paths, first), paths
            assert fetched(paths, second) == {403}, paths
    assert _rows(config, "select * from judgments") == []


def test_the_time_a_vote_reports_is_bounded_by_when_the_server_handed_the_trial_out(tmp_path):
    """A participant's API call sent a ``shown_at`` of 2000 and the study's ``votes.csv``
    said 26.9 years (outside probe 108); one of 2030 was stored as 0 s. The time is counted
    from no earlier than the trial was handed out, and a time later than now is refused."""
    config = make_config(tmp_path)
    _open_study(config)
    with running_app(config) as (client, _):
        token, _ = client.predict(_invite(client, "participant", "no"), api_name="/login_invite")
        view = client.predict(token, api_name="/participant_next")
        with pytest.raises(AppError, match="is later than now"):
            client.predict(
                token, view[TASK], "left", "2030-01-01T00:00:00.000000Z", api_name="/participant_vote"
            )
        client.predict(token, view[TASK], "left", "2000-01-01T00:00:00.000000Z", api_name="/participant_vote")
        [row] = _rows(
            config,
            "select j.seconds_spent, (julianday(j.created) - julianday(t.created)) * 86400 as held "
            "from judgments j join tasks t on t.result_id = j.id and t.kind = 'judgment'",
        )
    assert 0 <= row["seconds_spent"] <= row["held"] + 1e-3


@pytest.mark.browser
def test_arrow_and_number_keys_vote_in_a_real_browser(tmp_path):
    from tests.browser import answerable, chromium_browser, expect

    config = make_config(tmp_path)
    _open_study(config)
    with running_app(config) as (client, _), chromium_browser() as browser:
        link = _invite(client, "participant")
        page = browser.new_page()
        # Plotly loads with the first chart (2.7 s after the trial's text on an outside
        # tester's busy machine): held here until the test lets it through.
        held = []
        page.route("**/PlotlyPlot-*.js", lambda route: held.append(route))
        page.goto(link.replace(config.public_url + "/", client.src))
        expect(page.locator("#start_status")).to_contain_text("Signed in")
        page.get_by_role("tab", name="Judge").click()
        page.locator("#participant_start").click()
        page.locator("#participant_background").get_by_text("yes").click()
        page.locator("#participant_background_ok").click()
        progress = page.locator("#participant_progress")
        expect(progress).to_contain_text("Trial 1 of")
        # Past the 0.6 s with the charts not drawn, the buttons stay dimmed and a press is
        # dropped (it was taken, an answer given with no chart seen); drawn, they take one.
        expect(progress.locator("[id^='cc-shown-'][data-cc-dwelt]")).to_have_count(1)
        assert held and page.locator("#participant_left_plot .main-svg").count() == 0
        expect(page.locator("#participant_left")).to_have_attribute("aria-disabled", "true")
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("ArrowLeft")
        for route in held:
            route.continue_()
        page.unroute("**/PlotlyPlot-*.js")
        answerable(page, "#participant_progress")
        expect(page.locator("#participant_left_plot .main-svg").first).to_be_attached()
        # The trial's images load: the server serves them to whom the trial showed them.
        page.wait_for_function(
            """() => {
              const shown = [...document.querySelectorAll('#participant_left_images img')];
              return shown.length > 0 && shown.every((i) => i.complete && i.naturalWidth > 0);
            }"""
        )
        # Each answer stands under the chart it names (they stood one column to the left).
        for width in (1024, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            for side in ("left", "right"):
                button = page.locator(f"#participant_{side}").bounding_box()
                chart = page.locator(f"#participant_{side}_plot").bounding_box()
                middle = button["x"] + button["width"] / 2
                assert chart["x"] < middle < chart["x"] + chart["width"], (width, side, button, chart)
        page.locator("body").click(position={"x": 5, "y": 5})
        for number, key in enumerate(["ArrowLeft", "2", "1", "ArrowRight"], start=2):
            answerable(page, "#participant_progress")
            page.keyboard.press(key)
            expect(progress).to_contain_text(f"Trial {number} of")
        # A change of mind at once, trial 5 still on screen: the second key answers trial 5
        # (refused: answered), not trial 6, which Gradio's state held when it sent the vote.
        answerable(page, "#participant_progress")
        shown = progress.locator('[id^="cc-shown-"]').get_attribute("id")
        # Both keys in one task of the page, so trial 5 is on screen for both whatever the load
        # (0.6 s between two presses is a considered answer to the trial then shown); which
        # answer reaches the server first is then not fixed, and that one is kept.
        page.evaluate(
            """() => ["ArrowLeft", "ArrowRight"].forEach((key) =>
                document.body.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true })))"""
        )
        expect(progress).to_contain_text("Trial 6 of")
        # Both answers are back (no timer over the note): the second was refused ("this trial
        # was already answered"), a note the first answer's view clears if it comes back last.
        expect(page.locator("#participant_vote_note [data-testid='status-tracker']")).to_have_class(
            re.compile(r"\bhide\b")
        )
        # A press as trial 7 appears (0.3-0.6 s after the last one, an outside tester's was
        # stored as trial 7's answer) is dropped: trial 7 waits for a considered answer.
        answerable(page, "#participant_progress")
        sixth = progress.locator('[id^="cc-shown-"]').get_attribute("id")
        page.keyboard.press("ArrowLeft")
        seventh = page.wait_for_function(
            """(sixth) => {
              const shown = document.querySelector('#participant_progress [id^="cc-shown-"]');
              if (!shown || shown.id === sixth || shown.hasAttribute("data-cc-ready")) return null;
              const right = document.getElementById("participant_right");
              right.click();
              return [shown.id, right.getAttribute("aria-disabled")];
            }""",
            arg=sixth,
        ).json_value()
        seventh, dimmed = seventh
        answerable(page, "#participant_progress")
        expect(progress).to_contain_text("Trial 7 of")
        assert progress.locator('[id^="cc-shown-"]').get_attribute("id") == seventh
        # The buttons said they took no answer then (dimmed, "unavailable" to a screen
        # reader: a dropped press looked taken), and take one now.
        assert dimmed == "true"
        for side in ("left", "right"):
            expect(page.locator(f"#participant_{side}")).not_to_have_attribute(
                "aria-disabled", re.compile(".*")
            )
    choices = [r["choice"] for r in _rows(config, "select choice from judgments order by id")]
    assert choices[:4] + choices[5:] == ["left", "right", "left", "right", "left"]  # none for trial 7
    assert len(choices) == 6 and choices[4] in ("left", "right")  # trial 5's: one of the two keys
    tasks = "select t.id from judgments j join tasks t on t.result_id = j.id and t.kind = 'judgment'"
    answered = [f"cc-shown-{r['id']}" for r in _rows(config, tasks + " order by j.id")]
    assert answered[4:] == [shown, sixth] and seventh not in answered


def test_each_chart_has_its_own_scale_and_a_reference_trial_has_no_blank_panels(tmp_path):
    config = make_config(tmp_path)
    _open_study(config, reference=True)
    with running_app(config) as (client, _):
        token, _ = client.predict(_invite(client, "participant", "no"), api_name="/login_invite")
        view = client.predict(token, api_name="/participant_next")
    assert view[PROGRESS].endswith(
        "ground truth from a reference set of people's ratings (no colorings to show) · each chart has "
        f"its own scale{shown_mark(view[TASK])}"  # what a click answers (app.common.ANSWERS)
    )
    assert view[COLORINGS] == [] and view[STRIP] is None
    for position, title in ((TRUTH_PLOT, "Ground truth"), (LEFT_PLOT, "Left"), (RIGHT_PLOT, "Right")):
        chart = figure(view[position])
        assert chart.layout.title.text == f"{title} (own scale)"
        assert_allclose(chart.layout.yaxis.range, (0, 1.05 * max(chart.data[0].y)))
