import re

import gradio as gr
import numpy as np
import pandas as pd
import pytest
from gradio_client.exceptions import AppError
from PIL import Image

from app.expert import BLIND_PICK, ExpertTab
from storage import open_db
from tests.app.test_admin import _dump
from tests.app.test_participant import _rows
from tests.app_server import ADMIN_PASSWORD, make_config, running_app, session_event
from tests.browser import answerable
from tests.e2e.test_landing import playwright
from tests.qc_data import add_coloring, add_handmade, one_hot

GREYS = [(70, 70, 75), (110, 110, 110), (50, 52, 60), (130, 128, 125)]
PINK = (255, 105, 180)
REDS = [(200, 20, 30), (190, 30, 40), (205, 25, 35)]


def _sign_in(client, admin, role, n):
    table = client.predict(admin, role, n, "yes", 7, api_name="/admin_create_invites")
    people = [(row[0], client.predict(row[3], api_name="/login_invite")[0]) for row in table["data"]]
    return [p for p, _ in people], [t for _, t in people]


def _colorings(config, designers):
    db = open_db(config.db_path)
    try:
        castle = [
            add_coloring(db, config.data_dir, d, "forbidding castle", rgb)
            for d, rgb in zip(designers, [*GREYS, PINK])
        ]
        apples = [add_coloring(db, config.data_dir, d, "apple", rgb) for d, rgb in zip(designers, REDS)]
    finally:
        db.close()
    return castle, apples


def _center_rgb(path):
    image = np.asarray(Image.open(path).convert("RGB"))
    return tuple(int(v) for v in image[image.shape[0] // 2, image.shape[1] // 2])


@pytest.fixture
def study(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, demo):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        designers, designer_tokens = _sign_in(client, admin, "designer", 5)
        expert_names, experts = _sign_in(client, admin, "expert", 3)
        castle, apples = _colorings(config, designers)
        yield {
            "client": client,
            "demo": demo,
            "config": config,
            "admin": admin,
            "experts": experts,
            "expert_names": expert_names,
            "designer": designer_tokens[0],
            "castle": castle,
            "apples": apples,
        }


def test_an_expert_reviews_ranks_votes_and_the_admin_reinstates(study):
    client, admin, experts = study["client"], study["admin"], study["experts"]
    castle, apples = study["castle"], study["apples"]
    update = client.predict(experts[0], api_name="/expert_concepts")[0]
    assert [c[1] for c in update["choices"]] == ["apple", "forbidding castle"]
    gallery, table, _ = client.predict(experts[0], "forbidding castle", False, api_name="/expert_grid")
    assert len(gallery) == 5
    assert [r[:4] for r in table["data"]] == [
        [c, f"designer {x}", 1, "submitted"] for c, x in zip(castle, "ABCDE")
    ]
    with pytest.raises(AppError, match="only the admin"):
        client.predict(experts[0], "forbidding castle", True, api_name="/expert_grid")
    # A recolor asked for after another expert marked the coloring as fine says it replaces
    # that mark (outside probe 168: silently).
    assert client.predict(experts[1], apples[0], "", api_name="/expert_accept") == (
        f"Coloring {apples[0]} marked as fine."
    )
    message = client.predict(experts[0], apples[0], "<b>browner</b>", api_name="/expert_recolor")
    assert message == (
        f"Recolor requested for coloring {apples[0]}: its designer sees your note and has 14 days to color it "
        f"again. It was marked as fine by E{study['expert_names'][1]:04d}; this request replaces that mark."
    )
    table = client.predict(experts[0], "apple", False, api_name="/expert_grid")[1]
    assert table["data"][0][3:] == ["recolor_requested", None, "<b>browner</b>"]
    # The designer's round 2: round 1 stays in the grid, marked as no longer the one that counts.
    [row] = _rows(study["config"], f"select annotator_id from colorings where id = {apples[0]}")
    db = open_db(study["config"].db_path)
    try:
        again = add_handmade(db, study["config"].data_dir, row["annotator_id"], "apple", one_hot(62), round=2)
    finally:
        db.close()
    rounds = {
        r[0]: r[2:4] for r in client.predict(experts[0], "apple", False, api_name="/expert_grid")[1]["data"]
    }
    assert rounds[apples[0]] == [1, "recolor_requested (replaced by round 2)"]
    assert rounds[again] == [2, "submitted"] and rounds[apples[1]] == [1, "submitted"]

    ranking, _ = client.predict(experts[0], 0.5, 2, api_name="/expert_consistency")
    assert [r[1] for r in ranking["data"]] == ["forbidding castle", "apple"]
    assert [r[4] for r in ranking["data"]] == [True, False]
    # The Admin tab counts against the Expert tab's number: the configured 5 until the
    # vote queue is opened, then the number it was opened with.
    coverage = client.predict(admin, api_name="/admin_coverage")
    assert "- 1 concept has the 5 colorings that “Colorings needed per concept” asks." in coverage
    assert (
        "**What expert review waits for** (5 colorings per concept: the default until the vote queue is opened"
        in coverage
    )
    opened, needs = client.predict(experts[0], 0.5, 2, api_name="/expert_open_queue")
    assert opened == "Opened 5 new reviews of 'forbidding castle'."
    assert "No review has all its votes yet: 15 votes on 5 colorings are missing." in needs
    again, _ = client.predict(experts[0], 0.5, 2, api_name="/expert_open_queue")
    assert again.startswith("Opened 0 new reviews. No high-variance concept has a coloring without")
    coverage = client.predict(admin, api_name="/admin_coverage")
    # Of which the one whose vote opened (outside probe 227: "Open the vote queue" opened none)
    assert (
        "- 2 concepts have the 2 colorings that “Colorings needed per concept” asks (1 is in the vote or "
        "voted on already)." in coverage
    )
    assert "(2 colorings per concept: as the vote queue was last opened; an expert sets it" in coverage

    said = []
    for token in experts:
        task, concept, image, _ = client.predict(token, api_name="/expert_next")
        assert "forbidding castle" in concept and _center_rgb(image) == PINK
        said.append(client.predict(token, task, "Inconsistent", api_name="/expert_vote"))
    # The third vote completes the review, and points at the statistics below, which said
    # no review was complete until refreshed (outsider 78).
    assert said == ["Vote recorded: Inconsistent."] * 2 + [
        "Vote recorded: Inconsistent. That coloring's review is complete: *Refresh statistics* "
        "(section 4) counts it."
    ]
    table5, summary, raters = client.predict(experts[0], api_name="/expert_statistics")
    assert [r[2] for r in table5["data"]] == [0, 0, 0, 1, 1]
    assert "**1** coloring reviewed, **1** discarded by the votes. " in summary and "**1.000**" in summary
    # Every vote Inconsistent: κ and α are 0/0, and the panel says why ("n/a" alone read
    # like a fault to an outside methodologist), and how many votes a coloring takes.
    assert (
        "Fleiss' κ = n/a; Krippendorff's α = n/a. κ and α are undefined while every vote is the same"
        in summary
    )
    assert "Each coloring takes 3 votes from different experts" in summary
    # The votes column counts decided reviews' votes and says so (its header said "votes",
    # and an expert with votes on open reviews read fewer than they gave: outside probe 136).
    assert raters["headers"][1] == "votes_on_decided" and "*votes_on_decided* counts" in summary
    # The three hold the castle's four other colorings (their share of the missing votes): a
    # fourth expert is told so and until when (an outside check's late expert read only
    # "Nothing to vote on right now" while 35 votes were missing).
    _, (late,) = _sign_in(client, admin, "expert", 1)
    task, concept, _, _ = client.predict(late, api_name="/expert_next")
    assert task is None and re.search(
        r"4 colorings you may still vote on are held by other experts; one comes back to your queue "
        r"if its expert has not voted on it by \d{4}-\d\d-\d\d \d\d:\d\d UTC at the latest",
        concept,
    ), concept
    assert all(r[2:] == ["1.000", "1.000"] for r in raters["data"])  # every vote the same
    _, basis = client.predict(experts[0], "forbidding castle", api_name="/expert_ground_truth")
    assert "rests on **4** colorings" in basis

    excluded = client.predict(admin, api_name="/expert_excluded")
    assert [r[0] for r in excluded["data"]] == [castle[4]]
    with pytest.raises(AppError, match="needs the role admin"):
        client.predict(experts[0], castle[4], "pink can forbid", api_name="/expert_reinstate")
    client.predict(admin, castle[4], "pink can forbid", api_name="/expert_reinstate")
    _, basis = client.predict(admin, "forbidding castle", api_name="/expert_ground_truth")
    assert "rests on **5** colorings" in basis
    # The votes' count stays Table 5's, and says what is excluded now (it read "1 discarded"
    # after the reinstatement: outsider 79).
    _, summary, _ = client.predict(experts[0], api_name="/expert_statistics")
    assert (
        "**1** coloring reviewed, **1** discarded by the votes (**0** excluded now: reinstated by the "
        "admin or withdrawn since)." in summary
    )
    assert "left out" not in summary
    # A vote on an open review whose coloring is then withdrawn counts nowhere, and both the
    # withdrawal and the statistics say so (the withdrawal said such votes stay: outside probe 185).
    task, _, _, _ = client.predict(experts[0], api_name="/expert_next")
    client.predict(experts[0], task, "Consistent", api_name="/expert_vote")
    [voted] = _rows(
        study["config"],
        "select c.annotator_id from qc_votes v join reviews r on r.coloring_id = v.coloring_id "
        "join colorings c on c.id = v.coloring_id where r.status = 'open'",
    )
    withdrawn = client.predict(admin, voted["annotator_id"], "asked by email", api_name="/admin_withdraw")
    assert ", 1 open review closed. " in withdrawn and (
        "stay in the agreement statistics, which measure the experts, except those on the open reviews closed)"
        in withdrawn
    )
    _, summary, raters = client.predict(experts[0], api_name="/expert_statistics")
    assert "**1** coloring reviewed" in summary
    assert (
        " 1 vote on colorings withdrawn while their review was open is left out: a review counts here "
        "with all its votes." in summary
    )
    assert sorted(r[1] for r in raters["data"]) == [1, 1, 1]  # the decided review's votes alone
    # The reinstated coloring withdrawn by its designer is out again, as the votes left it: the
    # line counted excluded colorings alone and said "0 excluded now" (outside probe 197).
    [maker] = _rows(study["config"], f"select annotator_id from colorings where id = {castle[4]}")
    client.predict(admin, maker["annotator_id"], "asked by email", api_name="/admin_withdraw")
    _, summary, _ = client.predict(experts[0], api_name="/expert_statistics")
    assert "**1** coloring reviewed, **1** discarded by the votes. Mean" in summary, summary


def test_expert_endpoints_refuse_a_designer_and_write_nothing(study):
    client, config = study["client"], study["config"]
    endpoints = {
        name: info
        for name, info in client.view_api(return_format="dict", print_info=False)["named_endpoints"].items()
        if name.startswith("/expert_")
    }
    assert set(endpoints) == {
        "/expert_concepts",
        "/expert_grid",
        "/expert_recolor",
        "/expert_accept",
        "/expert_consistency",
        "/expert_open_queue",
        "/expert_next",
        "/expert_vote",
        "/expert_statistics",
        "/expert_ground_truth",
        "/expert_excluded",
        "/expert_reinstate",
        "/expert_needs",
    }
    inputs = {
        "/expert_grid": ["forbidding castle", False],
        "/expert_recolor": [study["castle"][0], "note"],
        "/expert_accept": [study["castle"][0], "note"],
        "/expert_consistency": [1.0, 2],
        "/expert_open_queue": [1.0, 2],
        "/expert_vote": [1, "Inconsistent"],
        "/expert_ground_truth": ["apple"],
        "/expert_reinstate": [study["castle"][0], "why"],
        "/expert_needs": [2],
    }
    before = _dump(config)
    for name in endpoints:
        for token in (study["designer"], "", "f" * 43):
            with pytest.raises(AppError, match="needs the role|not signed in|not valid"):
                client.predict(token, *inputs.get(name, []), api_name=name)
    assert _dump(config) == before


def test_expert_vote_is_documented_with_its_three_inputs_and_checks_the_verdict(study):
    client, config, expert = study["client"], study["config"], study["experts"][0]
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert [(p["parameter_name"], p["python_type"]["type"]) for p in info["/expert_vote"]["parameters"]] == [
        ("session_token", "str"),
        ("task_id", "float"),
        ("verdict", "str"),
    ]
    client.predict(study["admin"], 0.5, 2, api_name="/expert_open_queue")
    task = client.predict(expert, api_name="/expert_next")[0]
    before = _dump(config)
    with pytest.raises(TypeError, match="No value provided for required argument: verdict"):
        client.predict(expert, task, api_name="/expert_vote")
    for verdict in ("consistent", "Yes", None):
        with pytest.raises(
            AppError,
            match=r"`verdict` must be one of \['Consistent', "
            r"'Inconsistent'\]",
        ):
            client.predict(expert, task, verdict, api_name="/expert_vote")
    assert _dump(config) == before
    assert client.predict(expert, task, "Consistent", api_name="/expert_vote") == "Vote recorded: Consistent."
    # The next held task is first in the queue now, but /expert_next has not shown it: an API
    # client's vote on a guessed next id was stored and decided a review (outside probe 143).
    db = open_db(config.db_path)
    try:
        held = [
            r[0]
            for r in db.execute(
                "select id from tasks where kind = 'review' and status = 'reserved' and annotator_id = "
                "(select annotator_id from tasks where id = ?)",
                [int(task)],
            )
        ]
    finally:
        db.close()
    assert len(held) >= 2
    before = _dump(config)
    said = []
    for guess in held:
        with pytest.raises(AppError) as refused:
            client.predict(expert, guess, "Inconsistent", api_name="/expert_vote")
        said.append(str(refused.value))
    assert _dump(config) == before
    [unshown] = [g for g, m in zip(held, said) if "was not shown to you yet: ask for your next coloring" in m]
    assert all("is not the coloring shown to you now" in m for g, m in zip(held, said) if g != unshown)
    assert client.predict(expert, api_name="/expert_next")[0] == unshown
    assert client.predict(expert, unshown, "Inconsistent", api_name="/expert_vote") == (
        "Vote recorded: Inconsistent."
    )


@pytest.mark.browser
def test_in_the_browser_a_recolor_note_stays_text_and_the_vote_buttons_work(study, module_chromium):
    client, config, expect = study["client"], study["config"], playwright.expect
    note = "<img src=x onerror=alert(1)> browner"
    client.predict(study["admin"], study["apples"][0], note, api_name="/expert_recolor")
    client.predict(study["admin"], 0.5, 2, api_name="/expert_open_queue")
    link = client.predict(study["admin"], "expert", 1, "yes", 7, api_name="/admin_create_invites")["data"][0][
        3
    ]
    page = module_chromium.new_page()
    page.goto(link.replace(config.public_url + "/", client.src))
    page.get_by_role("tab", name="Expert review").click()
    page.locator("#expert_concept input").click()
    expect(page.get_by_role("option", name="apple (3 designers, 3 colorings)")).to_be_visible(timeout=20_000)
    page.get_by_role("option", name="apple (3 designers, 3 colorings)").click()
    page.click("#expert_show")
    grid = page.locator("#expert_grid_table").get_by_role("grid")
    expect(grid.get_by_role("row").nth(1)).to_contain_text(note)
    expect(grid.locator("img")).to_have_count(0)
    # Marking one fine shows its new status in the grid at once (no second Show).
    page.fill("#expert_coloring input", str(study["apples"][1]))
    page.click("#expert_accept_button")
    expect(page.locator("#expert_grid_message")).to_have_text(
        f"Coloring {study['apples'][1]} marked as fine."
    )
    expect(grid.get_by_role("row").filter(has_text="accepted")).to_have_count(1)
    page.click("#expert_next")
    # The expert holds their share of the 15 missing votes (`annotation.qc.votes.fair_batch`:
    # it depends on how many experts this module's tests made) and, after a vote, the next one.
    concept = page.locator("#expert_vote_concept")
    expect(concept).to_contain_text(re.compile(r"[1-5] in your queue"))
    answerable(page, "#expert_vote_concept")
    first = concept.locator('[id^="cc-shown-"]').get_attribute("id")
    page.click("#expert_inconsistent")
    expect(page.locator("#expert_vote_message")).to_have_text("Vote recorded: Inconsistent.")
    expect(concept.locator('[id^="cc-shown-"]')).not_to_have_id(first)
    expect(concept).to_contain_text(re.compile(r"[1-5] in your queue"))


def test_the_expert_reads_what_review_waits_for_and_a_too_small_count_is_refused(study):
    client, config, expert = study["client"], study["config"], study["experts"][0]
    # Five designers colored the castle and three the apple; three experts are active.
    assert client.predict(expert, 5, api_name="/expert_needs") == (
        "**What review waits for:**\n"
        "- 1 concept has the 5 colorings that “Colorings needed per concept” asks.\n"
        "- No coloring is open for a vote yet: an expert ranks the concepts and opens the vote "
        "queue (Expert review, section 2); the most disputed concepts go to the vote."
    )
    assert client.predict(expert, 2, api_name="/expert_needs").splitlines()[1] == (
        "- 2 concepts have the 2 colorings that “Colorings needed per concept” asks."
    )
    task, concept, _, _ = client.predict(expert, api_name="/expert_next")
    assert task is None and concept.startswith("Nothing to vote on right now.")
    assert concept.endswith(
        "1 concept has the 5 colorings that “Colorings needed per concept” asks. No coloring is open for a vote yet: an "
        "expert ranks the concepts and opens the vote queue (Expert review, section 2); the most "
        "disputed concepts go to the vote."
    )
    before = _dump(config)
    for api_name, inputs in (
        ("/expert_needs", [1]),
        ("/expert_consistency", [0.5, 1]),
        ("/expert_open_queue", [0.5, 1]),
    ):
        for minimum, why in (  # 100 where a concept is complete at 5 (outside probe 132)
            (1, "a concept's consistency compares its colorings in pairs, so it needs 2"),
            (100, "no concept has or can get more than 5 colorings"),
        ):
            with pytest.raises(
                AppError,
                match=rf"^Colorings needed per concept must be a whole number from 2 to 5, got {minimum}: {why}$",
            ):
                client.predict(
                    expert, *[minimum if value == 1 else value for value in inputs], api_name=api_name
                )
    with pytest.raises(AppError, match="`Colorings needed per concept` must be a whole number, got 2.5"):
        client.predict(expert, 0.5, 2.5, api_name="/expert_open_queue")
    assert _dump(config) == before


def _sign_in_update(demo, elem_id: str):
    """What the page's one sign-in event (`app.tabs.SessionReactions`) sets `elem_id` to, as a
    function of the session token."""
    react = session_event(demo)
    [output] = [output for output in react.block_fn.outputs if output.elem_id == elem_id]
    return lambda token: react(token)[output]


def test_next_coloring_and_start_work_only_once_the_page_knows_who_signed_in(study):
    # The sign-in's empty pane and the first coloring shown are two events running side by
    # side on the server; a button usable before the sign-in lands let the empty pane win.
    demo = study["demo"]
    initial = {c["props"].get("elem_id"): c["props"] for c in demo.config["components"]}
    assert initial["expert_next"]["interactive"] is False
    assert initial["participant_start"]["interactive"] is False
    expert_next = _sign_in_update(demo, "expert_next")
    tokens = ("", study["designer"], study["experts"][0], study["admin"])
    served = []
    for token in tokens:
        try:
            study["client"].predict(token, api_name="/expert_next")
            served.append(True)
        except AppError:
            served.append(False)
    # Usable exactly for whom the server serves the next coloring: an expert, not the admin.
    assert served == [False, False, True, False]
    assert [expert_next(t).interactive for t in tokens] == served
    start = _sign_in_update(demo, "participant_start")
    assert [start(t).interactive for t in ("", study["experts"][0])] == [False, True]


def test_a_kappa_of_exactly_zero_is_shown_without_a_minus_sign():
    """Votes 3-0, 2-1 and 1-2 on three colorings: observed and chance agreement are both 5/9,
    so κ is 0; computed as -2.5e-16, the panel read "Fleiss' κ = -0.000" (outside probe 155)."""
    from statsmodels.stats.inter_rater import fleiss_kappa

    from app.expert import _number

    kappa = fleiss_kappa(np.array([[3, 0], [2, 1], [1, 2]]))
    assert kappa == pytest.approx(0.0, abs=1e-12)
    assert _number(kappa) == "0.000" and _number(-0.0004) == "0.000" and _number(-0.0006) == "-0.001"


@pytest.mark.parametrize(
    "cells, index, expected",
    [
        (["4", "7"], 1, ("7", "")),
        ([4.0, None], 0, ("4", "")),  # a column with an empty cell comes as floats
        # Under the blind vote: no id to give, and the id clicked before is not left in the
        # field (outside probe 215: a recolor went to that other coloring).
        ([4.0, None], 1, ("", BLIND_PICK)),
        (["4", ""], 1, ("", BLIND_PICK)),
        (["4"], 3, (gr.skip(), gr.skip())),  # a click from a gallery the table no longer matches
    ],
)
def test_a_picture_clicked_gives_its_rows_coloring_id_or_empties_the_field_with_why(cells, index, expected):
    tab = ExpertTab(None, {"coloring": "field", "grid_message": "message"})
    update = tab.pick(
        pd.DataFrame({"coloring_id": cells}), gr.SelectData(None, {"index": index, "value": None})
    )
    assert update == dict(zip(("field", "message"), expected))
