"""A pilot study from the README, every role in Chromium, from a fresh data folder (issue 26).

The admin signs in, invites 3 designers, 3 experts, a researcher and 2 participants on the
Admin tab and sets a pilot of apple, banana and lemon (concepts the shipped ``uw71-ratings``
reference also covers); the app runs with ``auto_approve_practice`` (the README's
``--auto-approve-practice``), so each designer goes from consent and instructions through
three practice drawings straight to the main task, and colors the three pilot concepts
with a bucket fill each. The experts rank the concepts at the 3 colorings the pilot
reached, open the vote queue and vote until P̄, Fleiss' κ and Krippendorff's α show; the
researcher evaluates tiny-random and tiny-random-b on the pilot concepts in the Evaluate
tab, sees both models in the Leaderboards and the Concept browser, and sets up and opens a
pairwise study; two participants judge every trial in the Judge tab; the researcher
analyses the study and sees Table 3. Each number the page shows is compared with the
library's on the same database. Screenshots of each role's final view go to
``/tmp/shots/pilot-*.png`` and the time of each step to ``/tmp/shots/pilot-times.txt``
(the README's "First hour" quotes them).
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from annotation.qc import votes
from annotation.qc.readiness import readiness
from annotation.research.views import evaluated_concepts, leaderboard_analyses, pick_source
from annotation.study.judging import study_metrics, votes_frame
from evaluation.analysis.bootstrap import Resampling
from evaluation.analysis.judgment_report import analyse
from evaluation.analysis.results import RECOMMENDED
from evaluation.analysis.tables import RATIO_OF_MEANS
from evaluation.concepts import load_concepts
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.browser import (
    LiveApp,
    answerable,
    chromium_browser,
    expect,
    focused,
    pick,
    search,
    settled,
    start_evaluation,
    table_rows,
)
from tests.e2e.test_scenario import _color_and_submit, _person
from tests.research_data import install_tiny, tiny_models  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
SHOTS = Path("/tmp/shots")
PILOT = ("apple", "banana", "lemon")
INVITES = (("designer", 3), ("expert", 3), ("researcher", 1), ("participant", 2))
# One color per designer, so the pilot concepts' colorings differ and one is ranked first.
DESIGNER_COLORS = ("#c83030", "#e0c020", "#3a8a3a")
PRACTICE_COLORS = ("#f0d030", "#704a28", "#8a5a3a")
MODELS = ("tiny-random", "tiny-random-b")
MODEL_LABELS = {
    "tiny-random": "Tiny random SD (test model) (tiny-random)",
    "tiny-random-b": "Tiny random SD, second seed (test model) (tiny-random-b)",
}
N_BOOT = 200


def _shot(page, name: str, focus: str | None = None) -> None:
    """``/tmp/shots/pilot-<name>.png``: the screen around the element `focus` (a CSS
    selector), or the whole page."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    if focus is not None:
        page.locator(focus).evaluate("(element) => element.scrollIntoView({block: 'center'})")
    page.screenshot(path=str(SHOTS / f"pilot-{name}.png"), full_page=focus is None)


def _shown_number(value: float) -> str:
    """A statistic as the Expert tab writes it."""
    return "n/a" if math.isnan(value) else f"{value:.3f}"


class Steps:
    """Wall time of each step of the walk, written to ``/tmp/shots/pilot-times.txt``."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self.start = time.monotonic()

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.times.append((step, now - self.start))
        self.start = now

    def write(self) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        lines = [f"{seconds:7.1f} s  {step}" for step, seconds in self.times]
        (SHOTS / "pilot-times.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print("\n".join(lines))


def _admin_invites_everyone(app: LiveApp, admin) -> dict[str, list[str]]:
    admin.fill("#start_password input", ADMIN_PASSWORD)
    admin.get_by_role("button", name="Sign in as admin").click()
    expect(admin.locator("#start_status")).to_have_text("Signed in as admin.")
    admin.get_by_role("tab", name="Admin").click()
    links = {}
    for role, n in INVITES:
        pick(admin, "admin_role", role)
        admin.locator("#admin_count input").fill(str(n))
        admin.get_by_role("button", name="Create invite links").click()
        rows = admin.locator("#admin_invites [role=row][data-index]")
        expect(rows).to_have_count(n)
        expect(rows.first).to_contain_text(role)
        shown = table_rows(admin, "admin_invites")
        assert [row[2] for row in shown] == [role] * n
        links[role] = [app.local(row[3]) for row in shown]
    coverage = admin.locator("#admin_coverage")
    for role, n in INVITES:
        expect(coverage).to_contain_text(re.compile(rf"Active people by role:[^\n]*\b{n} {role}"))
    return links


def _admin_sets_the_pilot(app: LiveApp, admin) -> None:
    admin.locator("#admin_pilot_concepts textarea").fill(", ".join(PILOT))
    admin.get_by_role("button", name="Set pilot from these names").click()
    expect(admin.locator("#admin_pilot_message")).to_have_text(
        "Pilot set: " + ", ".join(f"“{key}”" for key in PILOT) + "."
    )
    coverage = admin.locator("#admin_coverage")
    expect(coverage).to_contain_text("Pilot: designers get these 3 concepts before any other")
    assert [r["concept_key"] for r in app.query("select concept_key from pilot_concepts")] == list(PILOT)
    _shot(admin, "admin", "#admin_coverage")


def _designer_colors_the_pilot(app: LiveApp, browser, link: str, color: str) -> tuple[object, list[str]]:
    """Consent, instructions, three practice drawings, then the three pilot concepts; the
    designer's page and the concepts colored."""
    page = _person(browser, link)
    page.get_by_role("tab", name="Coloring").click()
    page.get_by_label("I have read this information").check()
    page.get_by_role("button", name="I agree: continue").click()
    page.get_by_role("button", name="I have read the instructions").click()
    progress = page.locator("#designer_header .dz-progress")
    for done, practice_color in enumerate(PRACTICE_COLORS):
        expect(progress).to_have_text(f"Practice · {done} of 3 done")
        _color_and_submit(app, page, practice_color)
    concepts = []
    for done in range(len(PILOT)):  # practice approved automatically: the main batch opens
        expect(progress).to_contain_text(f"Batch 1 · {done} of")
        concepts.append(_color_and_submit(app, page, color))
    expect(progress).to_contain_text(f"Batch 1 · {len(PILOT)} of")
    assert page.js_errors == []
    return page, concepts


def _experts_vote_until_the_statistics_show(app: LiveApp, browser, links: list[str]) -> None:
    opened = 0
    for n, link in enumerate(links):
        page = _person(browser, link)
        expect(page.get_by_role("tab", name="Expert review")).to_have_attribute("aria-selected", "true")
        if n == 0:
            needs = page.locator("#expert_needs")
            db = open_db(app.config.db_path)
            try:  # what review waits for at the form's 5 colorings per concept, as the library says
                waiting = readiness(db, app.config.colorings_per_concept).lines()
            finally:
                db.close()
            for line in waiting:
                expect(needs).to_contain_text(line)
            expect(needs).to_contain_text(
                "3 concepts have 3 or more: set “Colorings needed per concept” to 3"
            )
            page.locator("#expert_minimum input").fill("3")  # what the pilot reached
            page.get_by_role("button", name="Open the vote queue for high-variance concepts").click()
            # The default share (top 10 %) marks one of the three concepts (more on a tie):
            # its 3 colorings go to the vote.
            message = page.locator("#expert_ranking_message")
            expect(message).to_have_text(re.compile(r"Opened \d+ new reviews of '[a-z ',]+'\."))
            # The ranking that chose them follows; its progress timer shows over the message.
            settled(page)
            opened = int(re.search(r"Opened (\d+)", message.inner_text()).group(1))
            assert opened in (3, 6, 9)
            assert app.query("select count(*) as n from reviews where status = 'open'") == [{"n": opened}]
        # The tab has read what review waits for: the sign-in's own updates are in.
        expect(page.locator("#expert_needs")).to_contain_text("What review waits for")
        page.get_by_role("button", name="Next coloring").click()
        concept = page.locator("#expert_vote_concept")
        shown = None  # each vote shows the next coloring (an expert holds a share of the votes)
        for left in range(opened, 0, -1):
            expect(concept).to_contain_text(" in your queue")
            if shown is not None:
                expect(concept.locator('[id^="cc-shown-"]')).not_to_have_id(shown)
            shown = concept.locator('[id^="cc-shown-"]').get_attribute("id")
            expect(page.locator("#expert_vote_image img")).to_be_visible()
            verdict = "Inconsistent" if (n == 2 and left == opened) else "Consistent"
            button = page.get_by_role("button", name=verdict, exact=True)
            expect(button).to_be_enabled()
            answerable(page, "#expert_vote_concept")
            button.click()
        expect(concept).to_contain_text("Nothing to vote on right now")
        assert page.js_errors == []
        if n < len(links) - 1:
            page.context.close()
    page.get_by_role("button", name="Refresh statistics").click()
    summary = page.locator("#expert_summary")
    expect(summary).to_contain_text(f"{opened} colorings reviewed")
    db = open_db(app.config.db_path)
    try:
        panel = votes.agreement_panel(db)
    finally:
        db.close()
    shown = summary.inner_text()
    assert f"P̄ = {panel.mean_observed_agreement:.3f}" in shown, shown
    assert f"Fleiss' κ = {_shown_number(panel.fleiss_kappa)}" in shown, shown
    assert f"Krippendorff's α = {_shown_number(panel.krippendorff_alpha)}" in shown, shown
    # Unanimous reviews and one 2-1 split: every statistic is a number.
    assert not any(map(math.isnan, (panel.fleiss_kappa, panel.krippendorff_alpha)))
    expect(page.locator("#expert_raters [role=row][data-index]")).to_have_count(3)
    _shot(page, "expert", "#expert_summary")
    page.context.close()


def _researcher_evaluates_both_models(page) -> None:
    page.get_by_role("tab", name="Evaluate").click()
    start_evaluation(page, [MODEL_LABELS[model] for model in MODELS], PILOT, "pilot")
    expect(page.locator("#evaluate_plan")).to_contain_text("Run pilot: 6 images, job queued.")
    expect(page.locator("#evaluate_progress")).to_contain_text("6/6 distributions", timeout=400_000)
    _shot(page, "researcher-evaluate", "#evaluate_progress")


def _researcher_sees_leaderboard_and_concept(app: LiveApp, page) -> None:
    page.get_by_role("tab", name="Leaderboards").click()  # computed as the tab opens
    rows = page.locator("#leaderboard_table1 tr:has(td)")  # a header row, then one per model
    expect(rows).to_have_count(len(MODELS))
    shown = {
        cells[0]: [float(cell.split()[0]) for cell in cells[1:]]
        for cells in (row.locator("td").all_inner_texts() for row in rows.all())
    }
    db = open_db(app.config.db_path)
    try:  # the point values do not depend on the bootstrap settings
        source = pick_source(db, "designers", evaluated_concepts(db)).source
        result = leaderboard_analyses(
            db, load_concepts(), source, cfg=RECOMMENDED, aggregate=RATIO_OF_MEANS, resampling=Resampling(10)
        )
    finally:
        db.close()
    expected = result.table1.values
    assert sorted(shown) == sorted(expected.index) == list(MODELS)
    for model, values in shown.items():
        np.testing.assert_allclose(values, expected.loc[model].to_numpy(), atol=5e-4)
    _shot(page, "researcher-leaderboard", "#leaderboard_table1")
    page.get_by_role("tab", name="Concept browser").click()
    search(page, "browser_concept", "apple")
    page.click("#browser_show")
    expect(page.locator("#browser_metrics [role=row][data-index]")).to_have_count(len(MODELS))
    assert sorted(row[0] for row in table_rows(page, "browser_metrics")) == list(MODELS)
    expect(page.locator("#browser_distributions .js-plotly-plot")).to_be_visible()
    _shot(page, "researcher-concept-browser", "#browser_metrics")


def _researcher_opens_a_study(page) -> None:
    page.get_by_role("tab", name="Study").click()
    expect(page.locator("#study_style").get_by_label("natural photo")).to_be_checked()
    expect(page.locator("#study_sources .token")).to_have_count(len(MODELS))
    page.locator("#study_name textarea, #study_name input").first.fill("pilot")
    page.locator("#study_n_concepts input").fill(str(len(PILOT)))
    page.click("#study_create")
    message = page.locator("#study_message")
    expect(message).to_contain_text("Draft study 1 stored: 3 pairs and 0 attention checks.")
    page.fill("#study_id input", "1")
    page.get_by_role("button", name="Open (freeze the design)").click()
    expect(message).to_contain_text("Study 1 is open; its design is frozen.")
    assert table_rows(page, "study_list")[0][:3] == ["1", "pilot", "open"]
    _shot(page, "researcher-study", "#study_list")


def _participant_judges_every_trial(app: LiveApp, browser, link: str, n: int) -> None:
    page = _person(browser, link)
    page.get_by_role("tab", name="Judge").click()
    page.click("#participant_start")
    page.locator("#participant_background").get_by_text("no").click()
    page.click("#participant_background_ok")
    progress = page.locator("#participant_progress")
    expect(progress).to_contain_text(f"Trial 1 of {len(PILOT)}")
    for chart in ("truth_plot", "left_plot", "right_plot"):
        expect(page.locator(f"#participant_{chart} .js-plotly-plot")).to_be_visible()
    if n == 1:
        _shot(page, "participant-trial")
    page.locator("body").click(position={"x": 5, "y": 5})
    for number in range(1, len(PILOT) + 1):
        expect(progress).to_contain_text(f"Trial {number} of {len(PILOT)}")
        answerable(page, "#participant_progress")
        page.keyboard.press("ArrowLeft" if (number + n) % 2 else "ArrowRight")
    expect(progress).to_contain_text(f"All done: you judged {len(PILOT)} of {len(PILOT)} trials")
    where = focused(page)  # not the page's top, where the hidden answer buttons left it (outsider 95)
    assert where.startswith("participant_progress: All done"), where
    assert page.js_errors == []
    if n == 1:
        _shot(page, "participant-done")
    page.context.close()


def _researcher_sees_table3(app: LiveApp, page) -> None:
    page.get_by_role("tab", name="Study").click()
    page.fill("#study_id input", "1")
    page.fill("#study_n_boot input", str(N_BOOT))
    page.click("#study_analyse")
    rows = page.locator("#study_table3 [role=row][data-index]")
    expect(rows).to_have_count(5)
    db = open_db(app.config.db_path)
    try:
        tables = analyse(
            votes_frame(db, 1), study_metrics(db, 1), rng=np.random.default_rng(0), n_boot=N_BOOT
        )
    finally:
        db.close()
    expected = tables["table3"].round(4)  # as the tab rounds it
    shown = table_rows(page, "study_table3")
    assert [row[:2] for row in shown] == expected[["Type", "Metric"]].to_numpy().tolist()
    columns = list(expected.columns[2:])
    for row, (_, want) in zip(shown, expected.iterrows()):
        for cell, column in zip(row[2:], columns, strict=True):
            value = want[column]
            if column == "Note":  # why a row is blank, in words
                assert cell == value, (row[1], cell, value)
            elif pd.isna(value):  # a blank row's counts too (whole numbers, or none)
                assert cell.lower() in ("", "nan"), (row[1], column, cell)
            else:
                assert float(cell) == pytest.approx(value, abs=1e-4), (row[1], column, cell, value)
    # Every row in sight in the table's box: each note wrapped at 14em made a row ~200 px
    # tall, and only PCC and EMD showed (outside probe 132).
    heights = page.evaluate(
        """() => [...document.querySelectorAll('#study_table3 [role=row][data-index]')]
             .map((row) => row.getBoundingClientRect().height)"""
    )
    assert max(heights) < 90, heights
    expect(page.locator("#study_figure .js-plotly-plot")).to_be_visible()
    _shot(page, "researcher-table3", "#study_table3")


def test_a_pilot_walks_from_invites_to_table3_in_the_browser(tmp_path, tiny_models, one_torch_thread):  # noqa: F811
    config = make_config(tmp_path, auto_approve_practice=True)
    install_tiny(tiny_models, config.data_dir)
    steps = Steps()
    with running_app(config) as (client, _), chromium_browser() as browser:
        app = LiveApp(config, client)
        admin = _person(browser, url=app.url)
        links = _admin_invites_everyone(app, admin)
        steps.done("admin: sign in, 9 invite links in 4 batches")
        _admin_sets_the_pilot(app, admin)
        steps.done("admin: set the pilot")
        for n, (link, color) in enumerate(zip(links["designer"], DESIGNER_COLORS)):
            page, concepts = _designer_colors_the_pilot(app, browser, link, color)
            assert sorted(concepts) == list(PILOT)
            if n == 2:
                _shot(page, "designer")
            page.context.close()
            steps.done(f"designer {n + 1}: consent, instructions, 3 practice, 3 pilot colorings")
        counted = app.query(
            "select concept_key, count(distinct annotator_id) as n from colorings where practice = 0 "
            "group by concept_key order by concept_key"
        )
        assert [(r["concept_key"], r["n"]) for r in counted] == [(key, 3) for key in PILOT]
        admin.get_by_role("button", name="Refresh lists").click()
        expect(admin.locator("#admin_coverage")).to_contain_text("9 submitted")
        _experts_vote_until_the_statistics_show(app, browser, links["expert"])
        steps.done("3 experts: open the vote, 3 votes each, statistics")
        researcher = _person(browser, links["researcher"][0])
        _researcher_evaluates_both_models(researcher)
        steps.done("researcher: evaluate 2 models x 3 concepts (6 images)")
        _researcher_sees_leaderboard_and_concept(app, researcher)
        steps.done("researcher: leaderboards and concept browser")
        _researcher_opens_a_study(researcher)
        steps.done("researcher: set up and open the study")
        for n, link in enumerate(links["participant"]):
            _participant_judges_every_trial(app, browser, link, n)
            steps.done(f"participant {n + 1}: 3 trials")
        assert len(app.query("select id from judgments")) == 2 * len(PILOT)
        _researcher_sees_table3(app, researcher)
        steps.done("researcher: Table 3")
        assert researcher.js_errors == [] and admin.js_errors == []
    steps.write()
