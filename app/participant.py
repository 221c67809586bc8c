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

A chart is serialised once per trial content and kept (`TrialCharts`), and made without
building a plotly figure (`chart_data`): a vote's answer costs no figure work. (Leaving
out the charts that did not change was measured and not done: consecutive trials share a
concept in 2 % of votes, and the API's answer would change.)
"""

from __future__ import annotations

import base64
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import gradio as gr
import numpy as np
from gradio.components.plot import PlotData

from annotation.files import resolve
from annotation.study import crowd, judging
from app.common import AppContext, escape, handler, note_area, ui_only, whole_number, wire
from evaluation.analysis.figures import distribution_bar, dominant_strip
from evaluation.color.palette import N_BINS
from storage import iso

NAME = "participant"
TITLE = "Judge"
ROLES = ("participant",)
_BACKGROUND = {"yes": True, "no": False}
CHART_PX, STRIP_PX = 300, 150
CHARTS_KEPT = 4096

INSTRUCTIONS = """\
## Which model matches people's colors better?

First you see the **human ground truth** for a concept: how people colored or rated it,
as a bar chart over 71 colors; beside it two models' results, **left** and **right**, each
as its own color chart. **Each chart has its own vertical scale**, so that small bars
still show: compare where the colors are and their proportions, not the bars' heights
across charts. Under the charts: when the ground truth comes from designers' colorings,
its dominant colors with the number of colorings behind each and a few of the colorings;
and each model's images.

- **Judge by the color distribution**: pick the side whose chart matches the ground
  truth's chart better.
- **Ignore composition, aesthetic appeal and generation artefacts.** The images are
  there for reference only.
- Answer with the buttons or the keys **← or 1** (left) and **→ or 2** (right).
- Some trials check attention: there one side is the ground truth itself.
"""

CROWD_INSTRUCTIONS = """\
**How it works.** Each trial shows the human ground truth's color chart and two models'
charts, left and right. Pick the side whose colors match the ground truth better, with the
buttons or the keys **← or 1** and **→ or 2**; judge the colors only, not the images. Some
trials check attention. When you are done you get your completion code and are sent back to
the platform. Full instructions are at the top of this tab.
"""

_GO_BACK_JS = "(url) => { if (url) window.location.assign(url); }"
# Keyboard shortcuts; capture phase, so tab-list arrow keys do not also switch tabs.
_KEYS_JS = """
if (!window.__participantKeys) {
  window.__participantKeys = true;
  const keys = {ArrowLeft: 'participant_left', '1': 'participant_left',
                ArrowRight: 'participant_right', '2': 'participant_right'};
  document.addEventListener('keydown', (event) => {
    const id = keys[event.key];
    const target = event.target;
    if (!id || event.repeat || event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.isContentEditable ||
                   ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName))) return;
    const button = document.getElementById(id);
    if (!button || button.disabled || button.offsetParent === null) return;
    event.preventDefault();
    event.stopPropagation();
    button.click();
  }, true);
}
"""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Judge tab inside the current `gr.Tab`."""
    gr.Markdown(INSTRUCTIONS)
    kept_charts = TrialCharts()
    background = gr.Radio(
        list(_BACKGROUND), label="Do you have a design or art background?", elem_id="participant_background"
    )
    with gr.Row():
        progress = gr.Markdown("Press **Start** to see your first trial.", elem_id="participant_progress")
        # Usable once the sign-in's blank view is on screen: it must not land on the
        # first trial shown (the two events run side by side on the server).
        start = gr.Button("Start / continue", interactive=False, elem_id="participant_start", scale=0)
    with gr.Column(visible=False, elem_id="participant_consent") as consent_box:
        gr.Markdown("## Before you start: consent")
        consent_who = gr.Markdown(elem_id="participant_consent_who")
        # A Textbox, not Markdown: the researcher's text is shown as typed, never rendered.
        consent_text = gr.Textbox(
            label="Consent", interactive=False, lines=10, max_lines=40, elem_id="participant_consent_text"
        )
        gr.Markdown(CROWD_INSTRUCTIONS)
        with gr.Row():
            agree = gr.Button("I agree", variant="primary", elem_id="participant_agree")
            decline = gr.Button("I do not agree", elem_id="participant_decline")
        consent_note = note_area("participant_consent_note")
    # The three charts side by side, where one look compares them, and the answer right
    # under them; the images, for reference only, below: the trial fits one screen.
    with gr.Row(equal_height=True):
        charts = {}
        for side, heading in (("truth", "Human ground truth"), *((s, s.capitalize()) for s in judging.SIDES)):
            with gr.Column(min_width=300):
                gr.Markdown(f"### {heading}")
                label = "Ground truth distribution" if side == "truth" else f"{heading} distribution"
                charts[side] = gr.Plot(label=label, elem_id=f"participant_{side}_plot")
    with gr.Row():
        buttons = [
            gr.Button(
                f"{side.capitalize()} matches better ({key})",
                variant="primary",
                interactive=False,
                elem_id=f"participant_{side}",
            )
            for side, key in zip(judging.SIDES, ("← or 1", "→ or 2"))
        ]
        vote_note = note_area("participant_vote_note")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=300):
            truth_strip = gr.Plot(
                label="Dominant colors, with the colorings behind each", elem_id="participant_truth_strip"
            )
            colorings = gr.Gallery(
                label="Designers' colorings", columns=4, height=130, elem_id="participant_colorings"
            )
        images = {
            side: gr.Gallery(
                label=f"{side.capitalize()} images",
                columns=4,
                height=130,
                elem_id=f"participant_{side}_images",
            )
            for side in judging.SIDES
        }
    outputs = [progress, background, charts["truth"], truth_strip, colorings]
    for side in judging.SIDES:
        outputs += [images[side], charts[side]]
    task_id = gr.Number(visible="hidden", label="task_id", elem_id="participant_task")
    shown_at = gr.Textbox(visible="hidden", label="shown_at", elem_id="participant_shown_at")
    sides = [gr.Textbox(side, visible="hidden", label="side") for side in judging.SIDES]
    gr.HTML("", js_on_load=_KEYS_JS, elem_id="participant_keys")
    # A crowd participant who finished is sent back to their platform with their code.
    return_url = gr.Textbox(visible="hidden", label="return_url", elem_id="participant_return_url")
    outputs += [task_id, shown_at, *buttons, return_url]
    # The consent panel changes only on Start, the background answer and the consent
    # answer; a vote's answer leaves it out.
    with_consent = [*outputs, consent_box, consent_who, consent_text]

    session_token.change(_signed_in, session_token, [*with_consent, start], api_visibility="private")
    wire(
        start.click,
        handler(ctx, *ROLES)(_next(ctx, kept_charts)),
        session_token,
        with_consent,
        note=progress,
        api_name="participant_next",
    )
    wire(
        background.input,
        handler(ctx, *ROLES)(_set_background(ctx, kept_charts)),
        [session_token, background],
        with_consent,
        note=progress,
        api_name="participant_set_background",
    )
    for button, answer in ((agree, True), (decline, False)):
        wire(
            button.click,
            handler(ctx, *ROLES)(_consent(ctx, kept_charts)),
            [session_token, gr.Checkbox(answer, visible="hidden", label="agree")],
            with_consent,
            note=consent_note,
            api_name="participant_consent" if answer else None,
        )
    for button, side in zip(buttons, sides):
        wire(
            button.click,
            handler(ctx, *ROLES)(_vote(ctx, kept_charts)),
            [session_token, task_id, side, shown_at],
            outputs,
            note=vote_note,
            api_name="participant_vote" if side.value == "left" else None,
        )
    return_url.change(None, return_url, None, js=_GO_BACK_JS, api_visibility="private")
    # A reference set of ratings has no colorings and no dominant colors: no blank panels then.
    gr.on(
        [truth_strip.change, colorings.change],
        _truth_panels_shown,
        [truth_strip, colorings],
        [truth_strip, colorings],
        api_visibility="private",
    )


@ui_only
def _truth_panels_shown(strip, colorings) -> tuple:
    """Show the dominant-color strip and the colorings only when the trial has them."""
    return gr.Plot(visible=strip is not None), gr.Gallery(visible=bool(colorings))


def _next(ctx: AppContext, charts: TrialCharts):
    def next_trial(db, actor) -> tuple:
        """The next trial (or why there is none), with the progress count; a crowd
        participant who has not consented yet gets the consent panel instead."""
        return _page(ctx, db, actor, charts)

    return next_trial


def _set_background(ctx: AppContext, charts: TrialCharts):
    def set_background(db, actor, answer: str) -> tuple:
        """Record the design/art background answer ('yes' or 'no'), then show a trial."""
        if answer not in _BACKGROUND:
            raise ValueError(f"`answer` must be one of {list(_BACKGROUND)}, got {answer!r}")
        crowd.check_active(db, actor)
        judging.set_background(db, actor, _BACKGROUND[answer])
        return _page(ctx, db, actor, charts)

    return set_background


def _consent(ctx: AppContext, charts: TrialCharts):
    def consent(db, actor, agree: bool) -> tuple:
        """A crowd participant's answer to the consent text: ``true`` (I agree) shows the
        first step of the study; ``false`` (I do not agree) ends their part as returned."""
        crowd.consent(db, actor, agree)
        return _page(ctx, db, actor, charts)

    return consent


_CONSENT_HIDDEN = (gr.Column(visible=False), gr.skip(), gr.skip())


@ui_only
def _signed_in(session_token: str) -> tuple:
    """Whoever signs in next starts from a blank view, not the previous person's trial, and
    *Start* works while someone is signed in."""
    blank = ("Press **Start** to see your next trial.", gr.Radio(), *_empty(), *_CONSENT_HIDDEN)
    return (*blank, gr.Button(interactive=bool(session_token)))


def _page(ctx: AppContext, db, actor, charts: TrialCharts) -> tuple:
    """`_view` and the consent panel (shown to a crowd participant who has not agreed yet)."""
    current = crowd.state(db, actor)
    if current is not None and current.status == "active" and not current.consented:
        link, _ = crowd.crowd_person(db, actor)
        who = (
            f"You take part as **{escape(actor.pseudonym)}**; your time for this study ends at "
            f"{current.deadline[11:16]} UTC. Please read the text below and choose."
        )
        return (
            "**Before your first trial:** please read the consent text below.",
            gr.Radio(visible=False),
            *_empty(),
            gr.Column(visible=True),
            who,
            crowd.consent_text(link),
        )
    return (*_view(ctx, db, actor, charts, current), *_CONSENT_HIDDEN)


def _vote(ctx: AppContext, charts: TrialCharts):
    def vote(db, actor, task_id: float | str, side: str, shown_at: str) -> tuple:
        """Record 'left' or 'right' for the held trial, then show the next trial.

        API: ``participant_vote(session_token, task_id, side, shown_at)``. ``task_id`` is
        the trial's task id as ``participant_next`` returns it (a number, or its digits as
        text: ``4``, ``4.0`` and ``"4"`` are the same trial); ``side`` is ``"left"`` or
        ``"right"`` (which of the two images, as shown); ``shown_at`` is the time
        ``participant_next`` returned with the trial, unchanged (ISO 8601, UTC), from which
        the seconds spent are counted.
        """
        if task_id is None or task_id == "":
            raise ValueError("`task_id` is empty: press Start to see a trial first")
        trial = whole_number(task_id, "task_id")
        crowd.check_active(db, actor)
        judging.record_judgment(db, actor, trial, side, judging.seconds_since(shown_at))
        return _view(ctx, db, actor, charts, crowd.settle(db, actor))

    return vote


def _view(ctx: AppContext, db, actor, charts: TrialCharts, finished=False) -> tuple:
    """Every output of the tab, in the order `build` lists them (`finished`: the actor's
    `crowd.state` when the caller has it, None for someone not from an open link)."""
    finished = crowd.state(db, actor) if finished is False else finished
    if finished is not None and finished.status != "active":
        return (_crowd_message(finished), gr.Radio(visible=False), *_empty(finished.return_url))
    background = judging.design_background(db, actor)
    asked = gr.Radio(value=None, visible=background is None)
    if background is None:
        return (_WAIT_FOR_BACKGROUND, asked, *_empty())
    trial = judging.next_trial(db, actor, ctx.rng)
    if trial is None:
        done, total = judging.progress(db, actor)
        message = (
            f"**All done: you judged {done} of {total} trials. Thank you!**"
            if done >= total
            else f"**No pair is waiting for you right now** ({done} of {total} judged). "
            "Please come back later."
        )
        return (message, asked, *_empty())
    truth = trial.truth
    strip = (
        charts.get(
            (trial.study_id, trial.concept, "dominant colors"),
            lambda: _plot_data(
                dominant_strip(
                    [h for h, _ in truth.dominant], [n for _, n in truth.dominant], unit="colorings"
                ).update_layout(height=STRIP_PX)
            ),
        )
        if truth.dominant
        else None
    )
    based_on = (
        f"{truth.n_colorings} colorings"
        if truth.n_colorings
        else "a reference set of people's ratings (no colorings to show)"
    )
    sides = [
        (_gallery(ctx, side.images), charts.chart((trial.study_id, trial.concept, side.item), side.p, title))
        for side, title in ((trial.left, "Left"), (trial.right, "Right"))
    ]
    truth_panels = (
        charts.chart((trial.study_id, trial.concept, "ground truth"), truth.p, "Ground truth"),
        strip,
        _gallery(ctx, truth.colorings),
    )
    return (
        f"**Trial {trial.number} of {trial.total}** · concept: **{escape(trial.concept)}**"
        f" · ground truth from {based_on} · each chart has its own scale",
        asked,
        *truth_panels,
        *sides[0],
        *sides[1],
        trial.task_id,
        iso(),
        gr.Button(interactive=True),
        gr.Button(interactive=True),
        "",
    )


_WAIT_FOR_BACKGROUND = "**Before your first trial:** do you have a design or art background? Answer above."


def _crowd_message(state: crowd.CrowdState) -> str:
    """What a crowd participant who is no longer judging reads, with their code."""
    if state.status == "completed":
        head = "**All done, thank you!**"
    elif state.status == "screened_out":
        head = "**This study has ended for you**: some answers did not pass the attention checks."
    elif state.status == "timed_out":
        return (
            "**Your time for this study ran out.** No more votes are taken; please return it on the platform."
        )
    elif not state.consented:
        return (
            "**You did not agree, so you do not take part.** Nothing of yours is used and you get no "
            "code: please return the study on the platform (no submission). "
            f"[Back to the platform]({escape(state.platform_url)})"
        )
    else:
        return "**You returned this study.** No more votes are taken."
    return (
        f"{head} Your code is **{escape(state.code)}**. You are being sent back to the study platform; "
        f"if nothing happens, [continue here]({escape(state.return_url)})."
    )


def _empty(return_url: str = "") -> tuple:
    return (
        None,
        None,
        [],
        [],
        None,
        [],
        None,
        None,
        "",
        gr.Button(interactive=False),
        gr.Button(interactive=False),
        return_url,
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


def _chart(p, title: str):
    """A distribution chart on its own scale (its highest bar 5 % under the top), at the
    height that keeps a trial on one screen."""
    y_max = 1.05 * float(np.max(p))
    return distribution_bar(p, y_max=y_max, title=f"{title} (own scale)").update_layout(height=CHART_PX)


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


def _gallery(ctx: AppContext, paths) -> list[str]:
    return [str(resolve(ctx.config.data_dir, path)) for path in paths]
