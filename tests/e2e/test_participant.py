"""A participant judges pairs with the keyboard in a real browser."""

import contextlib
import re

import pytest

from tests.app.test_participant import _open_study
from tests.browser import ARTIFACTS, answerable, expect, live_app, open_tab, page, sign_in  # noqa: F401

pytestmark = pytest.mark.browser


def test_participant_judges_pairs_with_arrow_and_number_keys(live_app, page):
    n_pairs = _open_study(live_app.config)
    [(participant, link)] = live_app.invite("participant")
    sign_in(page, link)
    open_tab(page, "Judge")
    page.click("#participant_start")
    # The yes/no is read out with its question (it was an unnamed group: outsider 67).
    question = page.get_by_role("radiogroup", name="Do you have a design or art background?")
    # Arrow keys look through the choices and nothing is sent before Continue (choosing sent
    # the answer at once: outsiders 83 and 95). Continue with no choice says what to do.
    progress = page.locator("#participant_progress")
    page.click("#participant_background_ok")
    expect(progress).to_contain_text("choose yes or no above, then press Continue")
    question.get_by_text("yes").click()
    question.get_by_label("yes").press("ArrowDown")
    expect(question.get_by_label("no")).to_be_checked()
    expect(question.get_by_label("no")).to_be_focused()
    assert live_app.query("select design_background from annotators where id = ?", [participant]) == [
        {"design_background": None}
    ]
    page.click("#participant_background_ok")
    expect(progress).to_contain_text(f"Trial 1 of {n_pairs}")
    # The two sides' images are told apart by name, with no *Download All* and no unnamed
    # image (the label's icon) read out (outside probe 211: "Thumbnail 1 of 2" in both).
    for side in ("Left", "Right"):
        gallery = page.locator(f"#participant_{side.lower()}_images")
        expect(
            gallery.get_by_role("button", name=re.compile(rf"^{side} images: image 1 of \d+$"))
        ).to_be_visible()
        expect(gallery.get_by_role("button", name="Download All")).to_have_count(0)
        expect(gallery.get_by_role("img")).to_have_count(0)
    # The trial line is a polite live region: a screen reader reads each new trial's line.
    expect(page.get_by_role("status").filter(has_text=f"Trial 1 of {n_pairs}")).to_have_attribute(
        "aria-live", "polite"
    )
    page.locator("body").click(position={"x": 5, "y": 5})
    tasks = []
    for number, key in ((2, "ArrowLeft"), (3, "2")):
        tasks.append(int(page.locator("#participant_task input").input_value()))
        answerable(page, "#participant_progress")
        page.keyboard.press(key)
        expect(progress).to_contain_text(f"Trial {number} of {n_pairs}")
        expect(page.get_by_role("status").filter(has_text=f"Trial {number} of {n_pairs}")).to_have_count(1)
    # Arrow keys on a model image's thumbnail are the gallery's: they answered trials unseen
    # (outsider 95). The next answer, from the page, is the third one stored, not the fifth.
    answerable(page, "#participant_progress")
    page.locator("#participant_left_images").get_by_role(
        "button", name=re.compile("^Left images: image 1 of")
    ).focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    tasks.append(int(page.locator("#participant_task input").input_value()))
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowLeft")
    expect(progress).to_contain_text(f"Trial 4 of {n_pairs}")
    for chart in ("truth_plot", "truth_strip", "left_plot", "right_plot"):
        expect(page.locator(f"#participant_{chart} .js-plotly-plot")).to_be_visible()
    # The charts' tool buttons are out of the Tab order, so Tab reaches the vote buttons.
    tools = page.locator("#participant_left_plot .modebar-btn")
    expect(tools.first).to_have_attribute("tabindex", "-1")
    expect(page.locator(".modebar-btn:not([tabindex='-1'])")).to_have_count(0)
    for plumbing in ("task", "shown_at", "return_url"):
        expect(page.locator(f"#participant_{plumbing}")).to_be_hidden()
    judged = live_app.query(
        "select t.id as task, j.choice, j.winner, j.left_item, j.participant_id from judgments j "
        "join tasks t on t.result_id = j.id and t.kind = 'judgment' order by j.id"
    )
    assert [(r["task"], r["choice"]) for r in judged] == list(zip(tasks, ["left", "right", "left"]))
    assert all(r["participant_id"] == participant for r in judged)
    assert all((r["winner"] == r["left_item"]) == (r["choice"] == "left") for r in judged)
    assert page.js_errors == []


def test_arrow_keys_answer_beside_start_and_a_reload_after_the_last_trial_says_all_done(live_app, page):
    """With the focus on *Start / continue* (after pressing it) the arrow keys answered nothing;
    and an invited participant who judged everything read "Press Start to see your next
    trial" after a reload (outside probe 137)."""
    n_pairs = _open_study(live_app.config, n_concepts=1, attention_rate=0.0)
    [(_, link)] = live_app.invite("participant", background="yes")
    sign_in(page, link)
    open_tab(page, "Judge")
    progress = page.locator("#participant_progress")
    page.click("#participant_start")
    expect(progress).to_contain_text(f"Trial 1 of {n_pairs}")
    for number in range(2, n_pairs + 2):
        expect(page.locator("#participant_start")).to_be_focused()
        answerable(page, "#participant_progress")
        page.keyboard.press("ArrowLeft")
        expect(progress).to_contain_text(
            f"Trial {number} of {n_pairs}"
            if number <= n_pairs
            else f"All done: you judged {n_pairs} of {n_pairs}"
        )
    page.reload()
    open_tab(page, "Judge")
    expect(progress).to_have_text(f"All done: you judged {n_pairs} of {n_pairs} trials. Thank you!")
    assert page.js_errors == []


_PROGRESS_IN_VIEW = (
    "() => { const r = document.getElementById('participant_progress').getBoundingClientRect();"
    " return r.top > -1 && r.bottom < innerHeight + 1; }"
)


def test_on_a_phone_each_new_trial_opens_at_its_top(live_app, page):
    """On a phone the charts stack and the page stayed at the answer buttons after a vote,
    the new trial's concept and first charts above the screen (outsider 71); the first trial,
    after the background question's Continue, too (outside probe 119)."""
    n_pairs = _open_study(live_app.config)
    [(_, link)] = live_app.invite("participant")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, link)
    open_tab(page, "Judge")
    page.click("#participant_start")
    page.locator("#participant_background").get_by_label("no").check()
    page.click("#participant_background_ok")
    progress = page.locator("#participant_progress")
    expect(progress).to_contain_text(f"Trial 1 of {n_pairs}")
    expect(page.locator("#participant_left")).to_be_focused()
    page.wait_for_function(_PROGRESS_IN_VIEW)
    answerable(page, "#participant_progress")
    # One scroll position shows the three charts and both answers (stacked, they took 1,100 px
    # of an 844 px screen: outside probe 230).
    boxes = page.evaluate(_BOXES, list(_PARTS))
    assert max(boxes["left"][3], boxes["right"][3]) - boxes["truth_plot"][1] <= 844, boxes
    page.click("#participant_left")  # scrolled down to it, under the three charts
    expect(progress).to_contain_text(f"Trial 2 of {n_pairs}")
    page.wait_for_function(_PROGRESS_IN_VIEW)
    assert page.js_errors == []


def test_a_trial_against_ratings_hides_the_colorings_and_each_chart_has_its_own_scale(live_app, page):
    _open_study(live_app.config, reference=True)
    [(_, link)] = live_app.invite("participant", background="no")
    sign_in(page, link)
    open_tab(page, "Judge")
    page.click("#participant_start")
    progress = page.locator("#participant_progress")
    expect(progress).to_contain_text(
        "ground truth from a reference set of people's ratings (no colorings to show)"
    )
    expect(page.locator("#participant_colorings")).to_be_hidden()
    expect(page.locator("#participant_truth_strip")).to_be_hidden()
    for side in ("truth", "left", "right"):
        expect(page.locator(f"#participant_{side}_plot .js-plotly-plot")).to_be_visible()
        top, highest = page.locator(f"#participant_{side}_plot .js-plotly-plot").evaluate(
            "(plot) => [plot._fullLayout.yaxis.range[1], Math.max(...Array.from(plot._fullData[0].y))]"
        )
        assert top == pytest.approx(1.05 * highest)
        # A screen reader hears what the chart shows: its title, axes and highest bars, named.
        chart = page.locator(f"#participant_{side}_plot .js-plotly-plot")
        expect(chart).to_have_attribute("role", "img")
        title, first = chart.evaluate(
            "(plot) => { const y = Array.from(plot._fullData[0].y); const i = y.indexOf(Math.max(...y));"
            " return [plot._fullLayout.title.text, `${i} ${plot._fullData[0].customdata[i][4]}`]; }"
        )
        expect(chart).to_have_attribute(
            "aria-label",
            re.compile(
                rf"^{re.escape(title)}; probability by UW-71 color index; 71 bars, highest: {re.escape(first)} 0\.\d+, "
            ),
        )
    expect(page.locator("#participant_truth_plot .gtitle")).to_have_text("Ground truth (own scale)")
    page.screenshot(path=str(ARTIFACTS / "judge-reference-trial.png"), full_page=True)
    assert page.js_errors == []


# The trial's parts, and each part's box in CSS pixels as (left, top, right, bottom).
_PARTS = ("truth_plot", "left_plot", "right_plot", "left", "right", "left_images", "right_images")
_BOXES = """(parts) => Object.fromEntries(parts.map((id) => {
  const r = document.getElementById(`participant_${id}`).getBoundingClientRect();
  return [id, [r.left, r.top, r.right, r.bottom]];
}))"""


def _beside(first, second) -> bool:
    """Whether box `second` stands right of box `first`, in the same row."""
    return abs(first[1] - second[1]) < 1 and first[2] <= second[0]


def _under(first, second, *, same_column: bool = True) -> bool:
    """Whether box `second` stands below box `first` (in the same column, when asked)."""
    column = abs(first[0] - second[0]) < 1 and abs(first[2] - second[2]) < 1
    return first[3] <= second[1] and (column or not same_column)


def _arrangement(boxes: dict) -> str:
    """How the three charts stand: in one row, the ground truth over left | right, or in one
    column; else the boxes, for the failure's message."""
    truth, left, right = boxes["truth_plot"], boxes["left_plot"], boxes["right_plot"]
    if _beside(truth, left) and _beside(left, right):
        return "one row"
    spans = truth[0] <= left[0] and right[2] <= truth[2]
    if spans and _under(truth, left, same_column=False) and _beside(left, right):
        return "ground truth over left | right"
    if _under(truth, left) and _under(left, right):
        return "one column"
    return f"mixed: {boxes}"


def test_left_and_right_are_the_sides_on_screen_at_any_width(live_app, module_chromium):
    """A phone in landscape wrapped the charts as ground truth | Left over Right, full width,
    and the buttons as "Left" on the right half over "Right" (the vote note's column came
    first in their row): a participant going by the screen answered the wrong side. Too
    narrow for three, the ground truth goes on its own row; on a phone held upright too, left
    and right at half width (stacked, no scroll position showed a chart beside an answer:
    outside probe 230)."""
    with _phone_on_trial_1(live_app, module_chromium, {"width": 844, "height": 390}) as (phone, errors):
        # Turned to portrait and back mid-trial, and on a desktop screen.
        for (width, height), expected in (
            ((844, 390), "ground truth over left | right"),
            ((390, 844), "ground truth over left | right"),
            ((1400, 900), "one row"),
            ((844, 390), "ground truth over left | right"),
        ):
            phone.set_viewport_size({"width": width, "height": height})
            # Nothing scrolls sideways, once the charts have taken the new width.
            phone.wait_for_function(
                "(width) => innerWidth === width && document.documentElement.scrollWidth <= width", arg=width
            )
            boxes = phone.evaluate(_BOXES, list(_PARTS))
            assert _arrangement(boxes) == expected, (width, height)
            left, right = boxes["left"], boxes["right"]
            assert _under(left, right) if expected == "one column" else _beside(left, right), (width, boxes)
            for side in ("left", "right"):  # each answer, and each side's images, under its chart
                for below in (side, f"{side}_images"):
                    part, chart = boxes[below], boxes[f"{side}_plot"]
                    middle = (part[0] + part[2]) / 2
                    assert chart[0] < middle < chart[2] and chart[3] <= part[1], (width, below, boxes)
        ARTIFACTS.mkdir(exist_ok=True)
        phone.screenshot(path=str(ARTIFACTS / "judge-phone-landscape-trial.png"), full_page=True)
    assert errors == []


_CHARTS_AND_ANSWERS_IN_VIEW = """() => {
  const top = document.getElementById('participant_truth_plot').getBoundingClientRect().top;
  const end = document.getElementById('participant_right').getBoundingClientRect().bottom;
  return top > -1 && end < innerHeight + 1;
}"""


def test_on_a_small_phone_each_trial_opens_with_its_charts_and_answers_on_screen(live_app, module_chromium):
    """A 360x740 phone: the trial's line at the screen's top left both answers 173 px below it
    at every trial, and a Start left the trial under the instructions (outside probe 233)."""
    with _phone_on_trial_1(live_app, module_chromium, {"width": 360, "height": 740}) as (phone, errors):
        phone.wait_for_function(_CHARTS_AND_ANSWERS_IN_VIEW)
        progress = phone.locator("#participant_progress")
        text = progress.inner_text()
        phone.locator("#participant_left").tap()
        expect(progress).not_to_have_text(text)
        answerable(phone, "#participant_progress")
        phone.wait_for_function(_CHARTS_AND_ANSWERS_IN_VIEW)
    assert errors == []


_RANGES = """() => [...document.querySelectorAll('.js-plotly-plot')].map((chart) =>
  JSON.stringify([chart._fullLayout.xaxis.range, chart._fullLayout.yaxis.range]))"""


def test_a_swipe_over_a_chart_on_a_phone_scrolls_the_page_and_leaves_the_chart_as_drawn(
    live_app, module_chromium
):
    """A thumb's swipe over a chart (they fill most of a phone's screen) zoomed its y axis to
    the tallest bars and left the page where it was: the participant judged a distorted chart,
    with no double tap to undo it (outside probe 130)."""
    with _phone_on_trial_1(live_app, module_chromium, {"width": 390, "height": 844}) as (phone, errors):
        phone.locator("#participant_truth_plot").scroll_into_view_if_needed()
        phone.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3")
        drawn, top = phone.evaluate(_RANGES), phone.evaluate("scrollY")
        box = phone.locator("#participant_truth_plot .js-plotly-plot").bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        touch = phone.context.new_cdp_session(phone)
        touch.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
        for step in range(1, 11):  # a finger's move, upward by 200 px
            touch.send(
                "Input.dispatchTouchEvent",
                {"type": "touchMove", "touchPoints": [{"x": x, "y": y - 20 * step}]},
            )
        touch.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
        phone.wait_for_function("(top) => scrollY > top + 100", arg=top)
        assert phone.evaluate(_RANGES) == drawn
    assert errors == []


@contextlib.contextmanager
def _phone_on_trial_1(live_app, chromium, viewport: dict):
    """A touch phone's page of `viewport` on trial 1 of an open study, and the page errors
    it meets; closed after."""
    n_pairs = _open_study(live_app.config)
    [(_, link)] = live_app.invite("participant", background="no")
    context = chromium.new_context(viewport=viewport, is_mobile=True, has_touch=True)
    phone = context.new_page()
    errors: list[str] = []
    phone.on("pageerror", lambda error: errors.append(str(error)))
    try:
        sign_in(phone, link)
        open_tab(phone, "Judge")
        phone.click("#participant_start")
        expect(phone.locator("#participant_progress")).to_contain_text(f"Trial 1 of {n_pairs}")
        answerable(phone, "#participant_progress")
        yield phone, errors
    finally:
        context.close()


def test_a_second_tab_answering_the_background_question_the_other_way_goes_on_to_the_trial(live_app, page):
    """The first answer stays; the second tab stayed on the question, every Continue refused
    again and only Start went on (outside probe 146). Now the refusal stands above the trial."""
    n_pairs = _open_study(live_app.config)
    [(participant, link)] = live_app.invite("participant")
    sign_in(page, link)
    other = page.context.new_page()
    other.goto(live_app.url)
    for tab in (page, other):
        open_tab(tab, "Judge")
        tab.click("#participant_start")
        expect(tab.get_by_role("radiogroup", name="Do you have a design or art background?")).to_be_visible()
    page.get_by_role("radiogroup").get_by_text("yes").click()
    page.click("#participant_background_ok")
    expect(page.locator("#participant_progress")).to_contain_text(f"Trial 1 of {n_pairs}")
    other.get_by_role("radiogroup").get_by_text("no").click()
    other.click("#participant_background_ok")
    progress = other.locator("#participant_progress")
    expect(progress).to_contain_text(
        "Not changed: your answer to the background question (yes) is already recorded"
    )
    expect(progress).to_contain_text(f"Trial 1 of {n_pairs}")
    expect(other.locator("#participant_background_ok")).to_be_hidden()
    expect(other.locator("#participant_left")).to_be_enabled()
    assert live_app.query("select design_background from annotators where id = ?", [participant]) == [
        {"design_background": 1}
    ]
    other.close()
