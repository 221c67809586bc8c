"""The Judge tab: pairwise trials of the human-judgment study (paper Appendix D, Figure 13).

Each trial shows the human ground truth (its UW-71 distribution in the palette's colors,
its dominant colors with sample counts, a few designers' colorings) and two candidates,
left and right as the task recorded, each with its images and distribution. The
participant picks the side whose color distribution matches better, with the buttons or
the keys ← / 1 and → / 2. Model names are never shown.

A participant who came through an open study link (`annotation.study.crowd`) first sees
the link's consent text (as typed: never as HTML or Markdown), their pseudonym and short
instructions; **I agree** lets them judge (``participant_consent``), **I do not agree**
ends their part as returned and shows the platform's link without a code.

The tab is a `ParticipantTab` (the shape of `app.tabs`): its handlers are methods that
name who may call them and return ``{part: update}``; every view is built by
`ParticipantTab.show`, which names each part; `EVENTS` is the tab's wiring. *Start* works
once the sign-in's blank view has landed.

A chart is serialised once per trial content and kept (`TrialCharts`), and made without
building a plotly figure (`chart_data`): a vote's answer costs no figure work. (Leaving
out the charts that did not change was measured and not done: consecutive trials share a
concept in 2 % of votes, and the API's answer would change.)
"""

from __future__ import annotations

import base64
import functools
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import gradio as gr
import numpy as np
from gradio.components.plot import PlotData

from annotation.errors import AlreadyDone, Conflict
from annotation.files import neutral_copy, resolve
from annotation.study import crowd, judging
from app.common import (
    CHART_WAIT,
    CHART_WAIT_MS,
    ONE_CLICK,
    PLUMBING,
    AppContext,
    answers,
    answers_js,
    compact_js,
    escape,
    focus_next,
    live,
    markdown_link,
    note_area,
    own_session,
    refused_with,
    role,
    shown_mark,
    whole_number,
)
from app.landing import back_to_platform, crowd_study_closed, current_actor
from app.tabs import SESSION_CHANGE, On, Tab
from evaluation.analysis.figures import distribution_bar, dominant_strip
from evaluation.color.palette import N_BINS
from storage import iso, parse_iso, shown_time, utcnow
from storage.shown import counted, shown

NAME = "participant"
TITLE = "Judge"
ROLES = ("participant",)
_BACKGROUND = {"yes": True, "no": False}
ANSWERED_ELSEWHERE = (
    "*That trial was answered already (a second press, or another tab or window); the first "
    "answer is kept. This is where you are now:* "
)
CHART_PX, STRIP_PX = 300, 150
CHARTS_KEPT = 4096
_CONSENT_HIDDEN = (gr.Column(visible=False), gr.skip(), gr.skip())
"""The consent panel hidden (its who-line and text left as they are)."""
SIDES_ROW = "participant-sides"
"""The class of a row of three: the ground truth's part, then the left's, then the right's."""
# A row of `SIDES_ROW` is laid out from the right and wraps upwards, the right's part first: too
# narrow for three, it shows the ground truth's part alone over left | right (on a phone held
# upright too, at half width each: `PHONE_MAX_PX`). A plain row wrapped as ground truth | left
# over right: a phone in landscape showed "Left" on the right half, "Right" under it. What a
# screen reader reads, and the Tab order, follow the document: ground truth, left, right. A
# row of unequal heights keeps its parts at their tops (its "flex-start" is now the bottom).
HEADING = "participant-heading"
"""The class of the charts' headings: on a phone they are read out but take no room (each chart
has its title)."""
PHONE_MAX_PX = 640
"""Up to this width (a phone held upright) left and right stand side by side at half width
each under the ground truth, so that the three charts and the answers fit one screen (stacked,
they took 1,100 px and no scroll position showed a chart beside an answer: outside probe 230)."""
CSS = f"""
.row.{SIDES_ROW} {{ flex-direction: row-reverse; flex-wrap: wrap-reverse; }}
.row.{SIDES_ROW} > :first-child {{ order: 1; }}
.row.{SIDES_ROW} > :last-child {{ order: -1; }}
.row.{SIDES_ROW}.unequal-height {{ align-items: start; }}
@media (max-width: {PHONE_MAX_PX}px) {{
  .row.{SIDES_ROW} > .column {{ min-width: 0 !important; flex: 1 1 40% !important; }}
  .row.{SIDES_ROW} > :first-child {{ flex-basis: 100% !important; }}
  .{HEADING} {{ position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }}
  .row.{SIDES_ROW} button {{ padding: 6px 8px !important; }}
}}
"""

INSTRUCTIONS = """\
## Which model matches people's colors better?

First you see the **human ground truth** for a concept: how people colored or rated it,
as a bar chart over 71 colors; with it two models' results, **left** and **right**, each
as its own color chart. **Each chart has its own vertical scale**, so that small bars
still show: compare where the colors are and their proportions, not the bars' heights
across charts. Under the charts: when the ground truth comes from designers' colorings,
its dominant colors with the number of colorings behind each and a few of the colorings;
and each model's images.

- **Judge by the color distribution**: pick the side whose chart matches the ground
  truth's chart better.
- **Ignore composition, aesthetic appeal and generation artefacts.** The images are
  there for reference only.
- Answer with the buttons (tap them on a phone), or on a keyboard with the keys **← or 1**
  (left) and **→ or 2** (right).
- Some studies mix in attention checks: there one side is the ground truth itself.
"""

CROWD_INSTRUCTIONS = """\
**How it works.** Each trial shows the human ground truth's color chart and two models'
charts, left and right. Pick the side whose colors match the ground truth better, with the
buttons (or, on a keyboard, the keys **← or 1** and **→ or 2**); judge the colors only, not the images. Some
trials may check attention. When you are done you get your completion code and are sent back to
the platform. Full instructions are at the top of this tab.
"""

GO_BACK_DELAY_S = 5
"""Seconds between the line with a crowd participant's code and the move to the platform: at
once, a screen reader said nothing between the last answer and the platform's page."""
_TRIAL_INTO_VIEW_JS = "() => window.ccTrialIntoView && ccTrialIntoView()"
"""Each new trial into view (``ccTrialIntoView``, `_KEYS_JS`)."""
# No *Download All* over a trial's images: a participant has no use for it, and each gallery's
# was one more Tab stop named as the other's (outside probe 211).
_GALLERY_BUTTONS = ["download", "fullscreen"]
_GO_BACK_JS = (
    f"(url) => {{ if (url) setTimeout(() => window.location.assign(url), {GO_BACK_DELAY_S * 1000}); }}"
)
_PANELS_JS = """(strip, colorings) => {
  const show = (id, on) => { const el = document.getElementById(id); if (el) el.style.display = on ? '' : 'none'; };
  show('participant_truth_strip', strip != null);
  show('participant_colorings', Array.isArray(colorings) && colorings.length > 0);
}"""
# Keyboard shortcuts, in the capture phase. An arrow key answers only where it has no use of its
# own: on the page, the answer buttons or a part that takes no keys; on another control (an image
# gallery's thumbnail, a tab, a link) it is that control's (it answered trials while a keyboard
# user browsed the model images: outsider 95). *Start / continue*, pressed before the first
# trial and focused after it, has no use for them (they answered nothing there: probe 137).
_KEYS_JS = (
    """
if (!window.__participantKeys) {
  window.__participantKeys = true;
  window.ccTrialIntoView = """
    + """() => { const since = performance.now(); const place = () => {
  const waiting = [...document.querySelectorAll('.CHART_WAIT')].some((c) => c.offsetParent && !c.querySelector('.main-svg'));
  if (waiting && performance.now() - since < CHART_WAIT_MS) return requestAnimationFrame(place);
  const line = document.getElementById('participant_progress');
  const truth = document.getElementById('participant_truth_plot');
  const answer = document.getElementById('participant_right');
  if (!line || !truth || !answer || !answer.offsetParent) return;
  const top = line.getBoundingClientRect().top, end = answer.getBoundingClientRect().bottom;
  if (top >= 0 && end <= innerHeight) return;
  if (end - top <= innerHeight || end - truth.getBoundingClientRect().top > innerHeight) {
    line.scrollIntoView({ block: 'start' });
  } else {
    scrollBy(0, end - innerHeight);
  }
}; requestAnimationFrame(place); }""".replace("CHART_WAIT_MS", str(CHART_WAIT_MS)).replace(
        "CHART_WAIT", CHART_WAIT
    )
    + """;
  const keys = {ArrowLeft: 'participant_left', '1': 'participant_left',
                ArrowRight: 'participant_right', '2': 'participant_right'};
  const controls = 'button, a[href], summary, [tabindex]:not([tabindex="-1"]), [role]';
  document.addEventListener('keydown', (event) => {
    const id = keys[event.key];
    const target = event.target;
    if (!id || event.repeat || event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.isContentEditable ||
                   ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName))) return;
    if (event.key.startsWith('Arrow') && target && target !== document.body && target.matches(controls) &&
        !target.closest('#participant_left, #participant_right, #participant_start')) return;
    const button = document.getElementById(id);
    if (!button || button.disabled || button.offsetParent === null) return;
    event.preventDefault();
    event.stopPropagation();
    button.click();
  }, true);
}
"""
)
"""The Judge tab's keys (← or 1, → or 2 answer), and ``ccTrialIntoView``: after Start and after
a vote, once the charts the answers rest on are drawn (they set the trial's height), the trial
comes into view when part of it is off the screen: from its line (trial, concept) down to the
answers where that fits, else its three charts and the answers (a 360x740 phone: the line over
the charts left the answers 173 px below the screen at every trial, outside probe 233), else from
its line. A phone's page stayed at the answer buttons after a vote, with the new trial's concept
and first charts above (outsider 71); a returning participant's Start left the trial under the
instructions (outside probe 233). Defined once here, not in each event's code: the page's size."""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Judge tab inside the current `gr.Tab`."""
    ParticipantTab(ctx, {"session_token": session_token, **_layout()}).wire()


VIEW = (
    "progress",
    "background",
    "truth_chart",
    "truth_strip",
    "colorings",
    "left_images",
    "left_chart",
    "right_images",
    "right_chart",
    "task_id",
    "shown_at",
    "left",
    "right",
    "return_url",
    "background_ok",
)
"""The parts every view updates (`ParticipantTab.show`), in the order API clients receive them."""
CONSENT = ("consent_box", "consent_who", "consent_text")
"""The consent panel: it changes only on Start, the background answer and the consent answer
(a vote's answer leaves it out); API clients receive it after `VIEW`."""
WITH_CONSENT = (*VIEW, *CONSENT)

_TOKEN = ("session_token",)
EVENTS = (
    On(SESSION_CHANGE, "on_sign_in", _TOKEN, (*WITH_CONSENT, "start")),
    On("start.click", "next_trial", _TOKEN, WITH_CONSENT, "progress", "participant_next"),
    On("then", None, (), (), js=_TRIAL_INTO_VIEW_JS),
    # Chosen, then sent with *Continue*: choosing at once sent the answer of a Space, or of an
    # arrow key looking through, with no look back (outsiders 83 and 95).
    On(
        "background_ok.click",
        "set_background",
        (*_TOKEN, "background"),
        WITH_CONSENT,
        "progress",
        "participant_set_background",
    ),
    On("then", None, (), (), js=focus_next("#participant_left")),  # Continue hides itself
    # The focus scrolled to the answer buttons: on a phone the first trial's concept and
    # ground truth were above the screen (outside probe 119).
    On("then", None, (), (), js=_TRIAL_INTO_VIEW_JS),
    On("agree.click", "consent", (*_TOKEN, "agreed"), WITH_CONSENT, "consent_note", "participant_consent"),
    # The pressed button hides: the focus goes to the next step (the background question, or
    # Start), not to the page's top, whence the next Tab went to the footer.
    On("then", None, (), (), js=focus_next("#participant_background input, #participant_start")),
    On("decline.click", "consent", (*_TOKEN, "declined"), WITH_CONSENT, "consent_note"),
    # Each vote answers the trial on screen when it was clicked (`app.common.ANSWERS`).
    On(
        "left.click",
        "vote",
        (*_TOKEN, "task_id", "left_side", "shown_at"),
        VIEW,
        "vote_note",
        "participant_vote",
        js=answers_js("participant_left"),
    ),
    On("then", None, (), (), js=_TRIAL_INTO_VIEW_JS),
    On(
        "right.click",
        "vote",
        (*_TOKEN, "task_id", "right_side", "shown_at"),
        VIEW,
        "vote_note",
        js=answers_js("participant_right"),
    ),
    On("then", None, (), (), js=_TRIAL_INTO_VIEW_JS),
    # A crowd participant who finished is sent back to their platform (in the browser).
    On("return_url.change", None, ("return_url",), (), js=_GO_BACK_JS),
    # A reference set of ratings has no colorings and no dominant colors: no blank panels then.
    # In the browser: a server event would get the gallery's files sent back, and a browser
    # whose session ended (the link opened elsewhere) would be refused them, with an error
    # sheet over the gallery.
    On(("truth_strip.change", "colorings.change"), None, ("truth_strip", "colorings"), (), js=_PANELS_JS),
)
"""The tab's wiring, in the order Gradio registers it (`ParticipantTab.wire`)."""


def _no_trial(db, actor, state: crowd.CrowdState | None = None) -> str:
    """Why no trial comes: all judged; the study closed (`state`: the `crowd.state` of
    someone from a study link, who is told how to return it); pairs others hold, which may
    still come; no study open yet; or (someone from an invite) the votes kept for a link's
    people now, or every other pair has its votes, so nothing is left to wait for."""
    done, total = judging.progress(db, actor)
    if done >= total > 0:
        return _all_done(db, actor, done, total)
    if state is not None and (closed_line := crowd_study_closed(db, actor, state)):
        return closed_line
    closed = judging.closed_for(db, actor)
    if closed is not None:
        return (
            f"**This study is closed**: its organisers closed it on {shown_time(closed['closed'])}; you "
            f"judged {counted(closed['done'], 'trial')} in it. Thank you!"
        )
    if not judging.judges_open_study(db, actor):  # it said every pair had its votes
        return (
            "**No study is open yet**: the organisers have not opened a study to judge. Please come "
            "back when they tell you it is open."
        )
    held, until = judging.held_by_others(db, actor)
    if held:
        return (
            f"**No pair is waiting for you right now** ({done} of {total} judged): the pairs left "
            f"({held}) are with other participants; one comes back to you if its participant has "
            f"not answered it by {shown_time(until)} at the latest (press **Start / continue** then)."
        )
    if state is not None:  # their place was counted on pairs for them: the study's researcher must look
        return f"**No pair is waiting for you right now** ({done} of {total} judged). Please come back later."
    until = judging.kept_for_links(db, actor) if done < total else None
    if until is not None:
        return (
            f"**No pair is waiting for you right now** ({done} of {total} judged): the votes still "
            "needed are kept for participants who came through the study's link and are taking it "
            f"now; what they leave comes back to you when their time ends, by {shown_time(until)} at "
            "the latest (press **Start / continue** then)."
        )
    # Their trials in a study closed since count too ("you judged 0 trials" after 5 there).
    earlier = judging.last_closed_judged(db, actor)
    return (
        f"**All done: you judged {counted(judging.judged(db, actor), 'trial')}**, and "
        "every other pair already has all the votes the study needs. Thank you!"
        + (
            f" ({escape(earlier['name'])} was closed by its organisers on {shown_time(earlier['closed'])}; "
            "what you judged in it is kept.)"
            if earlier
            else ""
        )
    )


class ParticipantTab(Tab):
    """The Judge tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`) and ``session_token``.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, parts: dict) -> None:
        super().__init__(ctx, parts)
        self.charts = TrialCharts()

    def show(
        self,
        progress: str,
        *,
        background: bool | None = None,
        trial: dict | None = None,
        return_url: str = "",
        consent: tuple | None = _CONSENT_HIDDEN,
    ) -> dict:
        """A view: every part of `VIEW` (and of `CONSENT` unless `consent` is None) updated.

        Parameters
        ----------
        progress : str
            The line above the trial (Markdown).
        background : bool or None
            Whether the background question (and its *Continue*) is shown, its choice
            cleared; None leaves them as they are.
        trial : dict or None
            The trial's parts by name (charts, images, ``task_id``, ``shown_at``); None shows
            no trial, and its answer buttons do not work.
        return_url : str
            Where a crowd participant who finished is sent ("" for nowhere).
        consent : tuple or None
            The consent panel's box, who-line and text updates; None leaves it out.
        """
        updates = {
            "progress": progress,
            "background": gr.Radio() if background is None else gr.Radio(value=None, visible=background),
            "truth_chart": None,
            "truth_strip": None,
            "colorings": [],
            "left_images": [],
            "left_chart": None,
            "right_images": [],
            "right_chart": None,
            "task_id": None,
            "shown_at": "",
            **(trial or {}),
            "left": gr.Button(interactive=trial is not None),
            "right": gr.Button(interactive=trial is not None),
            "return_url": return_url,
            # Beside the question, shown and hidden with it.
            "background_ok": gr.Button() if background is None else gr.Button(visible=background),
        }
        view = {self.parts[name]: updates[name] for name in VIEW}
        if consent is not None:
            view.update(zip((self.parts[name] for name in CONSENT), consent))
        return view

    @own_session
    def on_sign_in(self, session_token: str) -> dict:
        """Whoever signs in next starts from a blank view, not the previous person's trial,
        and *Start* works while someone is signed in (the two events run side by side on
        the server: a Start usable before the blank view lands could lose its trial). A crowd
        participant reads there who they are and when their time ends: a link lands on this
        tab, and the Start tab's welcome saying so was never seen."""
        # The background question waits for Start too: a crowd participant answering it first
        # would be refused for a consent text that only Start shows.
        blank = self.show(_greeting(self.ctx, session_token) or _START, background=False)
        return {**blank, self.parts["start"]: gr.Button(interactive=bool(session_token))}

    @role(*ROLES)
    def next_trial(self, db, actor) -> dict:
        """The next trial (or why there is none), with the progress count; a crowd
        participant who has not consented yet gets the consent panel instead."""
        return self._page(db, actor)

    @role(*ROLES)
    def set_background(self, db, actor, answer: str) -> dict:
        """Record the design/art background answer ('yes' or 'no'), then show a trial."""
        if answer in (None, ""):
            raise ValueError("choose yes or no above, then press Continue")
        if answer not in _BACKGROUND:
            raise ValueError(f"`answer` must be one of {list(_BACKGROUND)}, got {shown(answer)}")
        crowd.check_active(db, actor)
        try:
            judging.set_background(db, actor, _BACKGROUND[answer])
        except Conflict as other:
            # Another tab answered first, the other way: the first answer stays (an API client
            # is refused), and on the page the trial follows under the refusal. The question
            # stayed, every Continue refused again, and only Start went on (outside probe 146).
            page = self._page(db, actor)
            progress = self.parts["progress"]
            page[progress] = f"**Not changed:** {escape(str(other))}.  \n{page[progress]}"
            raise refused_with(other, page) from other
        return self._page(db, actor)

    @role(*ROLES)
    def consent(self, db, actor, agree: bool) -> dict:
        """A crowd participant's answer to the consent text: ``true`` (I agree) shows the
        first step of the study; ``false`` (I do not agree) ends their part as returned.
        Someone no longer judging (their time ran out while they read, say) is shown where
        they stand, the form closed, instead of a refusal beside a form that stays."""
        current = crowd.state(db, actor)
        if current is None or current.status == "active":
            crowd.consent(db, actor, agree)
        return self._page(db, actor)

    @role(*ROLES)
    def vote(self, db, actor, task_id: float | str, side: str, shown_at: str) -> dict:
        """Record 'left' or 'right' for the held trial, then show the next trial.

        API: ``participant_vote(session_token, task_id, side, shown_at)``. ``task_id`` is
        the trial's task id as ``participant_next`` returns it (a number, or its digits as
        text: ``4``, ``4.0`` and ``"4"`` are the same trial); ``side`` is ``"left"`` or
        ``"right"`` (which of the two images, as shown); ``shown_at`` is the time
        ``participant_next`` returned with the trial, unchanged (ISO 8601, UTC), from which
        the seconds spent are counted (from no earlier than the server first showed the
        trial: `judging.seconds_on_trial`).
        """
        if task_id is None or task_id == "":
            raise ValueError("`task_id` is empty: press Start to see a trial first")
        trial = whole_number(task_id, "task_id")
        current = crowd.state(db, actor)
        if current is not None and current.status != "active":
            # Their part ended (the time ran out, or another tab finished it): the tab shows
            # where they stand and the way back, as Start does, instead of refusing each
            # press beside a trial that stayed on screen.
            return self._view(db, actor, current, consent=None)
        crowd.check_active(db, actor)
        try:
            seconds = judging.seconds_on_trial(db, actor, trial, shown_at)
            judging.record_judgment(db, actor, trial, side, seconds)
        except judging.StudyClosed as closed:
            # The trial's answer buttons stayed usable beside the refusal (outside probe 137):
            # the tab shows the study closed, as Start does, its buttons off; or, for someone
            # who judges another open study, says why this answer was dropped before the next.
            view = self._view(db, actor, current, consent=None)
            if judging.closed_for(db, actor) is None:
                view[self.parts["progress"]] = f"**Not stored:** {closed} · " + view[self.parts["progress"]]
            return view
        except AlreadyDone:
            # Answered in another tab or by a second press: this tab moves on to the trial
            # that is current (it stayed on the answered one, and said "go on with the
            # trial shown", whose every press was refused again).
            view = self._view(db, actor, current, consent=None)
            view[self.parts["progress"]] = ANSWERED_ELSEWHERE + view[self.parts["progress"]]
            return view
        return self._view(db, actor, crowd.settle(db, actor), consent=None)

    def _page(self, db, actor) -> dict:
        """`_view` and the consent panel (shown to a crowd participant who has not agreed yet)."""
        current = crowd.state(db, actor)
        if (
            current is not None
            and current.status == "active"
            and not current.consented
            and judging.closed_for(db, actor) is None  # a closed study asks no consent
        ):
            link, _ = crowd.crowd_person(db, actor)
            who = (
                f"You take part as **{escape(actor.pseudonym)}**; your time for this study ends at "
                f"{shown_time(current.deadline)}. Please read the text below and choose."
            )
            return self.show(
                "**Before your first trial:** please read the consent text below.",
                background=False,
                consent=(gr.Column(visible=True), who, crowd.consent_text(link)),
            )
        return self._view(db, actor, current)

    def _view(self, db, actor, finished=False, consent: tuple | None = _CONSENT_HIDDEN) -> dict:
        """The trial or why there is none (`finished`: the actor's `crowd.state` when the
        caller has it, None for someone not from an open link)."""
        finished = crowd.state(db, actor) if finished is False else finished
        if finished is not None and finished.status == "study_closed":
            return self.show(crowd_study_closed(db, actor, finished), background=False, consent=consent)
        if finished is not None and finished.status != "active":
            return self.show(
                _crowd_message(finished),
                background=False,
                return_url=finished.return_url,
                consent=consent,
            )
        background = judging.design_background(db, actor)
        asked = background is None
        why_none = functools.partial(_no_trial, db, actor, finished)
        if background is None:
            # No question for a closed study, nor where no pair needs a vote any more (they
            # answered it, then read "All done: you judged 0 trials": outside probe 138).
            if judging.closed_for(db, actor) is not None or judging.progress(db, actor)[1] == 0:
                return self.show(why_none(), background=False, consent=consent)
            return self.show(_WAIT_FOR_BACKGROUND, background=asked, consent=consent)
        trial = judging.next_trial(db, actor, self.ctx.rng)
        if trial is None:
            return self.show(why_none(), background=asked, consent=consent)
        based_on = (
            counted(trial.truth.n_colorings, "coloring")
            if trial.truth.n_colorings
            else "a reference set of people's ratings (no colorings to show)"
        )
        over = f" (over {trial.studies} open studies)" if trial.studies > 1 else ""
        # A crowd participant keeps their deadline in sight on every trial (a reload or a
        # return by the link lands here, not on the line that said it first).
        ends = "" if finished is None else f" · your time ends at {shown_time(finished.deadline)}"
        return self.show(
            f"**Trial {trial.number} of {trial.total}**{over} · concept: **{escape(trial.concept)}**"
            f" · ground truth from {based_on} · each chart has its own scale{ends}{shown_mark(trial.task_id)}",
            background=asked,
            trial=self._trial_parts(trial),
            consent=consent,
        )

    def _trial_parts(self, trial) -> dict:
        """A trial's charts (kept in `charts`), images, task id and the time it is shown."""
        truth, charts = trial.truth, self.charts
        strip = (
            charts.get(
                (trial.study_id, trial.concept, "dominant colors"),
                lambda: _plot_data(
                    dominant_strip(
                        [h for h, _ in truth.dominant], [n for _, n in truth.dominant], unit="colorings"
                    ).update_layout(height=STRIP_PX, **AS_DRAWN)
                ),
            )
            if truth.dominant
            else None
        )
        parts = {
            "truth_chart": charts.chart(
                (trial.study_id, trial.concept, "ground truth"), truth.p, "Ground truth"
            ),
            "truth_strip": strip,
            "colorings": self._gallery(truth.colorings),
            "task_id": trial.task_id,
            "shown_at": iso(),
        }
        for side, title in ((trial.left, "Left"), (trial.right, "Right")):
            parts[f"{title.lower()}_images"] = self._gallery(side.images, neutral=True)
            parts[f"{title.lower()}_chart"] = charts.chart(
                (trial.study_id, trial.concept, side.item), side.p, title
            )
        return parts

    def _gallery(self, paths, *, neutral: bool = False) -> list[str]:
        """The absolute paths of stored files `paths`; with `neutral`, of their copies named
        by content alone (`neutral_copy`), for model images, whose paths name their runs."""
        data_dir = self.ctx.config.data_dir
        if neutral:
            paths = [neutral_copy(data_dir, path) for path in paths]
        return [str(resolve(data_dir, path)) for path in paths]


def _layout() -> dict:
    """The tab's components, by the names `EVENTS` and `ParticipantTab.show` use."""
    gr.Markdown(INSTRUCTIONS)
    background = gr.Radio(
        list(_BACKGROUND),
        label="Do you have a design or art background?",
        visible=False,  # asked after Start, when the answer is needed (`ParticipantTab._view`)
        elem_id="participant_background",
    )
    background_ok = gr.Button("Continue", visible=False, elem_id="participant_background_ok", scale=0)
    with gr.Row():
        progress = live(
            gr.Markdown("Press **Start** to see your first trial.", elem_id="participant_progress")
        )
        # Usable once the sign-in's blank view is on screen (`ParticipantTab.on_sign_in`).
        start = gr.Button("Start / continue", interactive=False, elem_id="participant_start", scale=0)
    with gr.Column(visible=False, elem_id="participant_consent") as consent_box:
        gr.Markdown("## Before you start: consent")
        consent_who = gr.Markdown(elem_id="participant_consent_who")
        # A Textbox, not Markdown: the researcher's text is shown as typed, never rendered. It
        # grows to its whole text (up to 1,000 lines; `crowd.MAX_CONSENT_CHARS` caps it), which the page
        # scrolls: a read-only box that scrolls itself takes no focus, and a keyboard could
        # not read past its first 40 lines (outside probe 119).
        consent_text = gr.Textbox(
            label="Consent", interactive=False, lines=10, max_lines=1000, elem_id="participant_consent_text"
        )
        gr.Markdown(CROWD_INSTRUCTIONS)
        with gr.Row():
            agree = gr.Button("I agree", variant="primary", elem_id="participant_agree")
            decline = gr.Button("I do not agree", elem_id="participant_decline")
        consent_note = note_area("participant_consent_note")
    # The three charts side by side, where one look compares them, and the answer right
    # under them; the images, for reference only, below: the trial fits one screen. Each row
    # keeps left and right on their sides when it wraps (`SIDES_ROW`).
    parts = {}
    with gr.Row(equal_height=True, elem_classes=[SIDES_ROW]):
        for side, heading in (("truth", "Human ground truth"), *((s, s.capitalize()) for s in judging.SIDES)):
            with gr.Column(min_width=300):
                gr.Markdown(f"### {heading}", elem_classes=[HEADING])
                label = "Ground truth distribution" if side == "truth" else f"{heading} distribution"
                parts[f"{side}_chart"] = gr.Plot(
                    label=label, elem_id=f"participant_{side}_plot", elem_classes=[CHART_WAIT]
                )
    # Each answer under the chart it names, the note under the ground truth: with the note
    # last, "Left" stood under the ground truth and "Right" under the left chart. The note's
    # column is the row's first of three, so the row wraps as the charts' does.
    with gr.Row(equal_height=True, elem_classes=[SIDES_ROW]):
        with gr.Column(min_width=300):
            vote_note = note_area("participant_vote_note")
        for side, key in zip(judging.SIDES, ("← or 1", "→ or 2")):
            with gr.Column(min_width=300):
                parts[side] = gr.Button(
                    f"{side.capitalize()} matches better ({key})",
                    variant="primary",
                    interactive=False,
                    elem_id=f"participant_{side}",
                    elem_classes=[ONE_CLICK, *answers("participant_progress")],
                )
    with gr.Row(equal_height=False, elem_classes=[SIDES_ROW]):
        with gr.Column(min_width=300):
            truth_strip = gr.Plot(
                label="Dominant colors, with the colorings behind each", elem_id="participant_truth_strip"
            )
            # Read by a page script, so Gradio would make it take uploads and deletions.
            colorings = gr.Gallery(
                label="Designers' colorings",
                columns=4,
                height=130,
                interactive=False,
                buttons=_GALLERY_BUTTONS,
                elem_id="participant_colorings",
            )
        for side in judging.SIDES:
            # In a column as wide as the charts', so the row wraps where theirs does and
            # each side's images stay under its chart (alone they fitted one row in landscape).
            with gr.Column(min_width=300):
                parts[f"{side}_images"] = gr.Gallery(
                    label=f"{side.capitalize()} images",
                    columns=4,
                    height=130,
                    buttons=_GALLERY_BUTTONS,
                    elem_id=f"participant_{side}_images",
                )
    gr.HTML("", js_on_load=compact_js(_KEYS_JS), elem_id="participant_keys")
    return {
        **parts,
        "progress": progress,
        "start": start,
        "background": background,
        "background_ok": background_ok,
        "consent_box": consent_box,
        "consent_who": consent_who,
        "consent_text": consent_text,
        "agree": agree,
        "decline": decline,
        "agreed": gr.Checkbox(True, visible="hidden", elem_classes=PLUMBING, label="agree"),
        "declined": gr.Checkbox(False, visible="hidden", elem_classes=PLUMBING, label="agree"),
        "consent_note": consent_note,
        "vote_note": vote_note,
        "truth_strip": truth_strip,
        "colorings": colorings,
        "task_id": gr.Number(
            visible="hidden", elem_classes=PLUMBING, label="task_id", elem_id="participant_task"
        ),
        "shown_at": gr.Textbox(
            visible="hidden", elem_classes=PLUMBING, label="shown_at", elem_id="participant_shown_at"
        ),
        **{
            f"{side}_side": gr.Textbox(side, visible="hidden", elem_classes=PLUMBING, label="side")
            for side in judging.SIDES
        },
        # A crowd participant who finished is sent back to their platform with their code.
        "return_url": gr.Textbox(
            visible="hidden", elem_classes=PLUMBING, label="return_url", elem_id="participant_return_url"
        ),
    }


_WAIT_FOR_BACKGROUND = "**Before your first trial:** do you have a design or art background? Answer above."


_START = "Press **Start** to see your next trial."


def _all_done(db, actor, done: int, total: int) -> str:
    """All asked of them judged (`done` of `total` in the open studies they judge), with the
    trials they judged in studies closed since, which the count leaves out ("7 of 7" for
    10 judged, 3 of them in a study closed part-way: outside probe 139)."""
    before = judging.judged(db, actor) - done
    return f"**All done: you judged {done} of {total} trials. Thank you!**" + (
        f" You also judged {counted(before, 'trial')} in studies their organisers closed since; they are kept."
        if before > 0
        else ""
    )


def _greeting(ctx: AppContext, session_token: str) -> str:
    """The line a participant signing in reads: for a crowd participant whose time runs, their
    pseudonym and when it ends (in UTC and in minutes from now, for someone in any time
    zone), then `_START`, or that their study was closed; for an invited participant who
    judged every trial asked of them, that, and for one with no open study, why (a reload
    said "Press Start to see your next trial" to all, and Start said otherwise: outside
    probes 137 and 139); else ""."""
    actor = current_actor(ctx, session_token) if session_token else None
    if actor is None or "participant" not in actor.roles:
        return ""
    with ctx.db() as db:
        state = crowd.stored_state(db, actor)
        if state is None:
            done, total = judging.progress(db, actor)
            if done >= total > 0:
                return _all_done(db, actor, done, total)
            # A reload said "Press Start" with every study closed (outside probe 139).
            if judging.closed_for(db, actor) is not None or not judging.judges_open_study(db, actor):
                return _no_trial(db, actor)
            return ""
        if state.status not in ("active", "study_closed"):
            return ""
        if judging.closed_for(db, actor) is not None:
            return _no_trial(db, actor, state)
    left = (parse_iso(state.deadline) - utcnow()).total_seconds() / 60
    if left <= 0:
        return ""
    return (
        f"You take part as **{escape(actor.pseudonym)}**; your time for this study ends at "
        f"{shown_time(state.deadline)} (in {math.ceil(left)} min). {_START}"
    )


def _crowd_message(state: crowd.CrowdState) -> str:
    """What a crowd participant who is no longer judging reads, with their code."""
    if state.status == "completed":
        head = "**All done, thank you!**"
    elif state.status == "screened_out":
        head = "**This study has ended for you**: some answers did not pass the attention checks."
    elif state.status == "timed_out":
        return (
            "**Your time for this study ran out.** No more votes are taken; please return it on the "
            f"platform. {back_to_platform(state)}"
        )
    elif state.status == "account_closed":
        return (
            "**The organisers closed your account for this study.** No more votes are taken; please "
            f"return it on the platform. {back_to_platform(state)}"
        )
    elif not state.consented:
        return (
            "**You did not agree, so you do not take part.** Nothing of yours is used and you get no "
            "code: please return the study on the platform (no submission). "
            f"{back_to_platform(state)}"
        )
    else:
        return "**You returned this study.** No more votes are taken."
    return (
        f"{head} Your code is **{escape(state.code)}**. You are sent back to the study platform in "
        f"{GO_BACK_DELAY_S} s; if nothing happens, {markdown_link('continue here', state.return_url)}."
    )


class TrialCharts:
    """The charts of trials, serialised once and kept (the `CHARTS_KEPT` most recently shown).

    A trial's content is copied when its study is set up and frozen when it opens
    (`annotation.study.design`), so a chart keyed by (study, concept, item, title) never
    goes stale. Building a distribution chart through plotly cost about 30 ms of server CPU
    (70 ms under load), three per trial shown, which bounded the votes per second
    (BENCHMARKS.md, "Crowd"); `chart_data` patches one built figure instead (under 1 ms).
    One per app (`build`).
    """

    def __init__(self, kept: int = CHARTS_KEPT):
        self._kept = kept
        self._charts: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], object]):
        """The figure kept under `key`, made by ``make()`` the first time (figures are only
        read afterwards: Gradio serialises them per answer)."""
        with self._lock:
            if key in self._charts:
                self._charts.move_to_end(key)
                return self._charts[key]
        figure = make()
        with self._lock:
            self._charts[key] = figure
            while len(self._charts) > self._kept:
                self._charts.popitem(last=False)
        return figure

    def chart(self, key: tuple, p, title: str) -> PlotData:
        """`chart_data` of `p` titled `title`, kept under ``(*key, title)``."""
        return self.get((*key, title), lambda: chart_data(p, title))


#: A trial's charts stay as drawn: on a phone a swipe over one (they fill most of the screen)
#: zoomed its y axis to the tallest bars instead of scrolling the page, and a participant
#: judged the distorted chart, with no double tap to undo it (outside probe 130).
AS_DRAWN = {"dragmode": False, "xaxis_fixedrange": True, "yaxis_fixedrange": True}


def _chart(p, title: str):
    """A distribution chart on its own scale (its highest bar 5 % under the top), at the
    height that keeps a trial on one screen."""
    y_max = 1.05 * float(np.max(p))
    figure = distribution_bar(p, y_max=y_max, title=f"{title} (own scale)")
    return figure.update_layout(height=CHART_PX, **AS_DRAWN)


_BASES: dict[str, dict] = {}


def chart_data(p, title: str) -> PlotData:
    """`_chart` of `p`, serialised as `gr.Plot` sends it, without building a plotly figure.

    The figure of a title differs between distributions only in the bars' heights
    (``data[0].y``, float64 as plotly encodes arrays) and the y range; both are patched
    into the serialised figure of one built chart per title.

    Parameters
    ----------
    p : array_like, shape (71,)
        Probabilities in ``color_index`` order, each in [0, 1].

    Raises
    ------
    ValueError
        As `distribution_bar`: a wrong shape or a value outside [0, 1].
    """
    values = np.asarray(p, dtype=float)
    if values.shape != (N_BINS,) or not np.all((values >= 0) & (values <= 1)):
        raise ValueError(f"`p` must have shape ({N_BINS},) with values in [0, 1], got shape {values.shape}")
    base = _BASES.get(title)
    if base is None:
        base = _BASES.setdefault(title, json.loads(_chart(np.full(N_BINS, 1 / N_BINS), title).to_json()))
    heights = base64.b64encode(values.astype("<f8").tobytes()).decode("ascii")
    trace = {**base["data"][0], "y": {"dtype": "f8", "bdata": heights}}
    layout = base["layout"]
    layout = {**layout, "yaxis": {**layout["yaxis"], "range": [0, 1.05 * float(values.max())]}}
    return PlotData(type="plotly", plot=json.dumps({"data": [trace], "layout": layout}))


def _plot_data(figure) -> PlotData:
    """A plotly figure serialised once, as `gr.Plot` sends it."""
    return PlotData(type="plotly", plot=figure.to_json())
