"""Every role end to end in Chromium at 1400x1000, as the README's study runs (issue 14).

The admin invites a designer, who goes from the invite link through consent, instructions
and three practice drawings (approved by the admin) to the third sketch of the main batch;
two more designers color the same concepts (through the library, to keep the walk short);
three experts rank the concepts, open the vote queue and vote until P̄ is computed; a
researcher runs the tiny model on those concepts, sees the leaderboard and builds and opens
a study; a participant judges ten trials with the keyboard. Each step leaves a screenshot
under ``test-artifacts/scenario-*.png`` and asserts what is visible and usable after it.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy import ndimage

from annotation.coloring.fill import line_mask
from annotation.sketches.library import load_sketch
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.browser import (
    ARTIFACTS,
    TIMEOUT_MS,
    LiveApp,
    answerable,
    chromium_browser,
    expect,
    start_evaluation,
    table_rows,
)
from tests.qc_data import add_coloring
from tests.research_data import install_tiny, store_segmented_run, tiny_models  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]
VIEWPORT = {"width": 1400, "height": 1000}
CANVAS = "#designer_canvas .cc-root"
# Designer 1's color per concept comes from the page; designers 2 and 3 agree on one
# concept and not on the other, so the consistency ranking has something to rank.
OTHERS = [((200, 40, 40), (190, 50, 40)), ((40, 90, 200), (230, 200, 30))]
CANDIDATES = ("apple", "carrot", "lemon", "tomato", "grass")  # three not colored by designer 1
MODEL_COLORS = {"model-b": (210, 40, 40), "model-c": (60, 150, 60)}


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"scenario-{name}.png"))


def _person(browser, link: str | None = None, url: str = ""):
    """A fresh browser context (its own storage) on `link`, signed in when it is an invite."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.js_errors = []
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    page.goto(link or url)
    if link:
        expect(page.locator("#start_status")).to_contain_text("Signed in as")
    return page


def _inside(app: LiveApp, sketch_id: int) -> tuple[float, float]:
    """A point inside the largest closed region of a sketch (not the background)."""
    [row] = app.query("select * from sketches where id = ?", (sketch_id,))
    labels, n = ndimage.label(~line_mask(load_sketch(app.config.data_dir, row)))
    border = set(np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])))
    sizes = ndimage.sum(np.ones_like(labels), labels, range(1, n + 1))
    inner = [i for i in range(1, n + 1) if i not in border]
    biggest = max(inner, key=lambda i: sizes[i - 1])
    ys, xs = np.nonzero(labels == biggest)
    middle = len(ys) // 2
    return float(xs[middle]) + 0.5, float(ys[middle]) + 0.5


def _color_and_submit(app: LiveApp, page, hex_color: str) -> str:
    """Fill the current task's largest region with `hex_color` and submit it; its concept."""
    page.wait_for_selector(f"{CANVAS}[data-ready=true]")
    task = json.loads(page.input_value("#designer_task textarea"))
    x, y = _inside(app, task["sketch_id"])
    page.fill("#designer_canvas .cc-hex", hex_color)
    page.press("#designer_canvas .cc-hex", "Enter")
    point = page.evaluate(
        """async ([x, y]) => {
            const api = document.querySelector('#designer_canvas .cc-root').parentElement.coloringCanvas;
            window.scrollTo(0, 0);
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
            const c = api.imageToClient(x, y);
            return [c.x, c.y];
        }""",
        [x, y],
    )
    before = page.get_attribute(CANVAS, "data-committed")
    page.mouse.click(*point)
    page.wait_for_function(
        "b => document.querySelector('#designer_canvas .cc-root').dataset.committed !== b", arg=before
    )
    page.get_by_role("button", name="Submit this coloring").click()
    expect(page.locator("#designer_message")).to_contain_text(f"Saved your coloring of {task['concept']}")
    return task["concept"]


def _admin_invites_a_designer(app: LiveApp, admin) -> str:
    admin.fill("#start_password input", ADMIN_PASSWORD)
    admin.get_by_role("button", name="Sign in as admin").click()
    expect(admin.locator("#start_status")).to_have_text("Signed in as admin.")
    admin.get_by_role("tab", name="Admin").click()
    expect(admin.locator("#admin_coverage")).to_contain_text("concepts have 5 colorings")
    admin.locator("#admin_count input").fill("1")
    admin.get_by_text("yes", exact=True).click()
    admin.get_by_role("button", name="Create invite links").click()
    expect(admin.locator("#admin_invites [role=row][data-index]")).to_have_count(1)
    expect(admin.locator("#admin_invites_csv a").first).to_be_visible()
    _shot(admin, "1-admin-invites")
    return app.local(table_rows(admin, "admin_invites")[0][3])


def _designer_practises(app: LiveApp, designer) -> None:
    designer.get_by_role("tab", name="Coloring").click()
    designer.get_by_label("I have read this information").check()
    designer.get_by_role("button", name="I agree: continue").click()
    designer.get_by_role("button", name="I have read the instructions").click()
    header = designer.locator("#designer_header")
    for done, hex_color in enumerate(("#f0d030", "#704a28", "#8a5a3a")):
        expect(header.locator(".dz-progress")).to_have_text(f"Practice · {done} of 3 done")
        if done == 0:
            _shot(designer, "2-designer-practice")
        _color_and_submit(app, designer, hex_color)
    expect(designer.locator("#designer_notice")).to_contain_text("your three practice drawings are in")


def _admin_approves(admin, designer_id: int) -> None:
    admin.get_by_role("button", name="Refresh lists").click()
    expect(admin.locator("#admin_pending [role=row][data-index]")).to_have_count(1)
    expect(admin.locator("#admin_gallery img")).to_have_count(3)
    admin.locator("#admin_reviewed input").fill(str(designer_id))
    admin.get_by_role("button", name="Record decision").click()
    expect(admin.locator("#admin_review_message")).to_have_text(
        f"Recorded: approve for annotator {designer_id} (D0001)."
    )
    # Without another Refresh: the decision empties the waiting list.
    expect(admin.locator("#admin_pending [role=row][data-index]")).to_have_count(0)
    expect(admin.locator("#admin_gallery img")).to_have_count(0)
    _shot(admin, "3-admin-approved")


def _designer_reaches_the_third_main_sketch(app: LiveApp, designer) -> list[str]:
    designer.get_by_role("button", name="Check again").click()
    progress = designer.locator("#designer_header .dz-progress")
    concepts = []
    for done, hex_color in enumerate(("#c83030", "#3070c8")):
        expect(progress).to_contain_text(f"{done} of")
        concepts.append(_color_and_submit(app, designer, hex_color))
    expect(progress).to_contain_text("2 of")
    designer.wait_for_selector(f"{CANVAS}[data-ready=true]")
    fit = designer.evaluate(
        "() => [document.querySelector('#designer_submit').getBoundingClientRect().bottom,"
        " document.querySelector('#designer_canvas .cc-help').getBoundingClientRect().bottom]"
    )
    assert max(fit) <= VIEWPORT["height"], fit  # the third sketch and Submit on one screen
    _shot(designer, "4-designer-third-main-sketch")
    return concepts


def _extra(concepts: list[str]) -> list[str]:
    return [c for c in CANDIDATES if c not in concepts][:3]


def _two_more_designers(app: LiveApp, concepts: list[str]) -> None:
    others = [annotator for annotator, _ in app.invite("designer", 2)]
    db = open_db(app.config.db_path)
    try:
        for concept, colors in zip(concepts, OTHERS):
            for designer, rgb in zip(others, colors):
                add_coloring(db, app.config.data_dir, designer, concept, rgb)
        for concept in _extra(concepts):  # more concepts with a P_H, for the study
            for designer, rgb in zip(others, [(200, 60, 40), (180, 70, 50)]):
                add_coloring(db, app.config.data_dir, designer, concept, rgb)
    finally:
        db.close()


def _experts_vote_to_p_bar(app: LiveApp, browser) -> None:
    experts = app.invite("expert", 3)
    for n, (_, link) in enumerate(experts):
        page = _person(browser, link)
        expect(page.get_by_role("tab", name="Expert review")).to_have_attribute("aria-selected", "true")
        if n == 0:
            # Designer 1's two concepts have three colorings each; the more varied one opens.
            # The tab has opened (its number of colorings shown) before anything is typed.
            expect(page.locator("#expert_needs")).to_contain_text("What review waits for")
            page.locator("#expert_fraction input").fill("0.5")
            page.locator("#expert_minimum input").fill("3")
            page.get_by_role("button", name="Rank concepts").click()
            expect(page.locator("#expert_ranking [role=row][data-index]")).to_have_count(2)
            page.get_by_role("button", name="Open the vote queue for high-variance concepts").click()
            expect(page.locator("#expert_ranking_message")).to_have_text(
                re.compile(r"Opened 3 new reviews of '[a-z ]+'\.")
            )
            page.locator("#expert_histogram").scroll_into_view_if_needed()
            _shot(page, "5-expert-ranking")
        page.get_by_role("button", name="Next coloring").click()
        concept = page.locator("#expert_vote_concept")
        shown = None  # each vote shows the next coloring (an expert holds a share of the votes)
        for left in range(3, 0, -1):
            expect(concept).to_contain_text(" in your queue")
            if shown is not None:
                expect(concept.locator('[id^="cc-shown-"]')).not_to_have_id(shown)
            shown = concept.locator('[id^="cc-shown-"]').get_attribute("id")
            expect(page.locator("#expert_vote_image img")).to_be_visible()
            if n == 0 and left == 3:
                _shot(page, "6-expert-vote")
            verdict = "Inconsistent" if (n == 2 and left == 3) else "Consistent"
            answerable(page, "#expert_vote_concept")
            page.get_by_role("button", name=verdict, exact=True).click()
        expect(concept).to_contain_text("Nothing to vote on right now")
        expect(page.get_by_role("button", name="Consistent", exact=True)).to_be_disabled()
        assert page.js_errors == []
        if n == 2:
            page.get_by_role("button", name="Refresh statistics").click()
            summary = page.locator("#expert_summary")
            expect(summary).to_contain_text("3 colorings reviewed")
            assert re.search(r"P̄ = \d\.\d{3}", summary.inner_text())
            expect(page.locator("#expert_raters [role=row][data-index]")).to_have_count(3)
            _shot(page, "7-expert-p-bar")
        page.context.close()


def _researcher_runs_the_tiny_model_and_builds_a_study(app: LiveApp, browser, concepts: list[str]) -> int:
    keys = [*concepts, *_extra(concepts)]
    db = open_db(app.config.db_path)
    try:  # two more models, as if imported, so that a study has models to compare
        cells = {(m, c, "natural", 7.5): [rgb, rgb] for m, rgb in MODEL_COLORS.items() for c in keys}
        store_segmented_run(db, app.config.data_dir, "imported", cells)
    finally:
        db.close()
    [(_, link)] = app.invite("researcher")
    page = _person(browser, link)
    page.get_by_role("tab", name="Evaluate").click()
    start_evaluation(page, ["Tiny random SD (test model) (tiny-random)"], keys, "tiny")
    expect(page.locator("#evaluate_plan")).to_contain_text("Run tiny: 5 images, job queued.")
    progress = page.locator("#evaluate_progress")
    expect(progress).to_contain_text("5/5 distributions", timeout=120_000)
    _shot(page, "8-researcher-run")
    # Cancel on a finished run is refused under the Run row it acts on, not under Start with
    # the Runs table between (outside probe 173).
    expect(page.locator("#evaluate_run input")).to_have_value("tiny")
    page.click("#evaluate_cancel")
    note = page.locator("#evaluate_progress_note")
    expect(note).to_have_text("⚠️ run 'tiny' has no queued or running job to cancel (its job finished)")
    row, below = page.locator("#evaluate_run").bounding_box(), note.bounding_box()
    assert 0 <= below["y"] - (row["y"] + row["height"]) < 40, (row, below)
    _shot(page, "8-researcher-cancel-refused")
    page.get_by_role("tab", name="Leaderboards").click()  # computed as the tab opens
    expect(page.locator("#leaderboard_table1")).to_contain_text("tiny-random")
    _shot(page, "9-researcher-leaderboard")

    page.get_by_role("tab", name="Study").click()
    page.locator("#study_name textarea").fill("scenario")
    page.locator("#study_style").get_by_label("natural photo").check()
    page.get_by_role("button", name="Load choices").click()
    expect(page.locator("#study_ground_truth input")).to_have_value("designers")
    # One output per model is offered; what the researcher chose before stays chosen, so
    # make sure each of the three models is in.
    tokens = page.locator("#study_sources .token")
    expect(tokens.first).to_be_visible()
    for model in ("model-b", "model-c", "tiny-random"):
        if not any(text.startswith(f"{model} ·") for text in tokens.all_inner_texts()):
            page.locator("#study_sources input").click()
            page.get_by_role("option", name=re.compile(rf"^{re.escape(model)} ·")).first.click()
            page.keyboard.press("Escape")
    expect(tokens).to_have_count(3)
    page.locator("#study_n_concepts input").fill("5")
    page.locator("#study_trials input").fill("10")
    page.get_by_role("button", name="Create draft").click()
    expect(page.locator("#study_list [role=row][data-index]")).to_have_count(1)
    page.fill("#study_id input", "1")
    page.get_by_role("button", name="Open (freeze the design)").click()
    expect(page.locator("#study_message")).to_contain_text("open")
    row = table_rows(page, "study_list")[0]
    assert row[1:3] == ["scenario", "open"]
    _shot(page, "10-researcher-study")
    assert page.js_errors == []
    page.context.close()
    return int(row[3])


def _participant_judges_ten_trials(app: LiveApp, browser) -> None:
    [(participant, link)] = app.invite("participant")
    page = _person(browser, link)
    page.get_by_role("tab", name="Judge").click()
    page.click("#participant_start")
    page.locator("#participant_background").get_by_text("no").click()
    page.click("#participant_background_ok")
    progress = page.locator("#participant_progress")
    expect(progress).to_contain_text("Trial 1 of 10")
    for chart in ("truth_plot", "left_plot", "right_plot"):
        expect(page.locator(f"#participant_{chart} .js-plotly-plot")).to_be_visible()
    # The three charts side by side and both buttons, on one screen.
    bottoms = page.evaluate(
        """() => ['#participant_truth_plot', '#participant_left_plot', '#participant_right_plot',
                  '#participant_left', '#participant_right']
            .map((id) => document.querySelector(id).getBoundingClientRect().bottom)"""
    )
    assert max(bottoms) <= VIEWPORT["height"], bottoms
    _shot(page, "11-participant-trial")
    page.locator("body").click(position={"x": 5, "y": 5})
    for number in range(1, 11):
        expect(progress).to_contain_text(f"Trial {number} of 10")
        answerable(page, "#participant_progress")
        page.keyboard.press("ArrowLeft" if number % 2 else "2")
    expect(progress).to_contain_text("All done: you judged 10 of 10 trials")
    _shot(page, "12-participant-done")
    assert len(app.query("select id from judgments where participant_id = ?", (participant,))) == 10
    assert page.js_errors == []
    page.context.close()


def test_every_role_walks_its_flow_end_to_end(tmp_path, tiny_models):  # noqa: F811
    config = make_config(tmp_path)
    install_tiny(tiny_models, config.data_dir)
    with running_app(config) as (client, _), chromium_browser() as browser:
        app = LiveApp(config, client)
        admin = _person(browser, url=app.url)
        designer = _person(browser, _admin_invites_a_designer(app, admin))
        [designer_id] = [r["id"] for r in app.query("select id from annotators")]
        _designer_practises(app, designer)
        _admin_approves(admin, designer_id)
        concepts = _designer_reaches_the_third_main_sketch(app, designer)
        assert designer.js_errors == [] and admin.js_errors == []
        _two_more_designers(app, concepts)
        _experts_vote_to_p_bar(app, browser)
        pairs = _researcher_runs_the_tiny_model_and_builds_a_study(app, browser, concepts)
        assert pairs >= 10
        _participant_judges_ten_trials(app, browser)
