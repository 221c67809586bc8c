"""The Concept browser: one concept, people's colors against each model's, side by side.

For the chosen concept, style and guidance scale: the human distribution (its source
named) and each model's as UW-71 bar charts on one axis, dominant-color strips with
sample counts, the masked images, the per-model metrics, and the shift from the base
concept to each of its variants for people and for each model.
"""

from __future__ import annotations

import gradio as gr

from annotation.research.views import concept_view
from app.common import (
    AppContext,
    choice_search,
    empty_note,
    escape,
    live,
    own_session,
    role,
    ui_only,
    visible_to,
)
from app.landing import current_actor
from app.tabs import On, SessionReactions, Tab
from evaluation.analysis.bootstrap import SHIFT_DEFAULT
from evaluation.analysis.results import RECOMMENDED
from evaluation.concepts import load_concepts
from evaluation.models.generation import STYLES
from storage import human

NAME = "browser"
TITLE = "Concept browser"
ROLES = ("researcher",)
NO_SHIFT = (
    "No shift to show: a shift compares **{base}** with one of its variants in the same "
    "source, and here no variant has a distribution beside the base concept's yet. Evaluate a "
    "variant ({variants}) with the same model, and give it a human "
    "distribution (the reference sets cover base concepts only: designer colorings do)."
)


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Concept browser inside the current `gr.Tab`."""
    concepts = load_concepts()
    parts = _layout(ctx, session_token, [c.key for c in concepts])
    BrowserTab(ctx, {"session_token": session_token, **parts}, concepts).wire()


VIEW = ("label", "distributions", "strips", "metrics", "gallery", "variants_title", "shifts", "shift_plot")
"""The parts a concept's view updates (`BrowserTab.show`), in the order API clients receive them."""
EVENTS = (
    On(
        "show.click",
        "show",
        ("session_token", "concept", "source", "style", "cfg", "intervals"),
        VIEW,
        "label",
        "browser_show",
    ),
    On("then", "plot_shown", ("shift_plot",), ("shift_plot",)),
)
"""The tab's wiring, in the order Gradio registers it (`BrowserTab.wire`)."""


class BrowserTab(Tab):
    """The Concept browser of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`) and ``session_token``;
    ``concepts``: `evaluation.concepts.load_concepts`, read once per app.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, parts: dict, concepts: list) -> None:
        super().__init__(ctx, parts)
        self.concepts = concepts

    @role(*ROLES, "admin")
    def show(
        self, db, actor, concept: str, source: str, style: str, cfg: str, intervals: bool = False
    ) -> dict:
        """Human and model distributions, strips, metrics, masked images and variant shifts of
        `concept`; with `intervals`, bootstrap intervals on the people's shifts."""
        if not concept:
            raise ValueError("Pick a concept first: type part of its name in the Concept box.")
        view = concept_view(
            db,
            self.ctx.config.data_dir,
            self.concepts,
            concept,
            source or "",
            style,
            cfg or RECOMMENDED,
            resampling=SHIFT_DEFAULT if intervals is True else None,
        )
        lines = [view.human_label, human.describe(db, view.source), view.metrics_note]
        updates = {
            # The concept is the view's heading, as the designer's is, for a screen reader's
            # list of headings.
            "label": f"## {escape(concept)}\n\n" + "  \n".join(escape(line) for line in lines if line),
            "distributions": view.distributions,
            "strips": view.strips,
            "metrics": view.metrics.round(4),
            "gallery": view.overlays,
            "variants_title": f"### Base concept **{escape(view.base)}** and its variants"
            + ("" if view.shift_figure else "\n" + _no_shift(self.concepts, view.base)),
            "shifts": view.shifts.round(3),
            "shift_plot": view.shift_figure,
        }
        return {self.parts[name]: updates[name] for name in VIEW}

    @staticmethod
    @ui_only
    def plot_shown(figure) -> gr.Plot:
        """An empty chart is hidden (the note above says why), never drawn as empty axes."""
        return gr.Plot(visible=figure is not None)


def _layout(ctx: AppContext, session_token: gr.Textbox, keys: list[str]) -> dict:
    """The tab's components, by the names `EVENTS` and `BrowserTab.show` use (`keys`: the
    concepts the picker offers)."""
    parts: dict = {}
    with gr.Row():
        parts["concept"] = choice_search(
            [],
            label=f"Concept (type to search the {len(keys):,})",
            elem_id="browser_concept",
            scale=2,
            interactive=False,
        )
        concept_choices(ctx, session_token, {parts["concept"]: keys}, ROLES)
        parts["source"] = source_dropdown(ctx, session_token, "browser_source")
        parts["style"] = gr.Radio(
            [(v, k) for k, v in STYLES.items()], value="natural", label="Style", elem_id="browser_style"
        )
        parts["cfg"] = gr.Textbox(
            RECOMMENDED, label="Guidance scale ('recommended' or a number)", elem_id="browser_cfg"
        )
    with gr.Row():
        parts["show"] = gr.Button("Show", variant="primary", elem_id="browser_show")
        parts["intervals"] = gr.Checkbox(
            False,
            label="Intervals on people's shifts (bootstrap over the designers' colorings; "
            "adds about 0.2 s per variant)",
            elem_id="browser_intervals",
        )
    parts["label"] = live(gr.Markdown(elem_id="browser_label"))
    parts["distributions"] = gr.Plot(label="UW-71 distributions (same axis)", elem_id="browser_distributions")
    parts["strips"] = gr.Plot(
        label="Dominant colors per visual group, with sample counts", elem_id="browser_strips"
    )
    with empty_note(
        "No metrics for this concept: the lines at the top say what is missing and what fills it.",
        "browser_metrics_empty",
    ):
        parts["metrics"] = gr.Dataframe(
            label="Metrics against the human distribution", interactive=False, elem_id="browser_metrics"
        )
    parts["gallery"] = gr.Gallery(
        label="Images with their masks (magenta: the pixels the mask kept; at most their own size)",
        columns=6,
        height="fit-content",
        object_fit="scale-down",
        # Lossless: WebP (Gradio's default) smears the mask's one-pixel outline away.
        format="png",
        allow_preview=False,
        elem_id="browser_gallery",
    )
    parts["variants_title"] = gr.Markdown(elem_id="browser_variants_title")
    with empty_note("No shift to show yet: the line above says what fills it.", "browser_shifts_empty"):
        parts["shifts"] = gr.Dataframe(
            label="Shift EMD from the base concept", interactive=False, elem_id="browser_shifts"
        )
    parts["shift_plot"] = gr.Plot(
        label="Shift EMD per variant (people's shifts with bootstrap intervals when P_H comes from "
        "designers; the caption says how they were drawn)",
        elem_id="browser_shift_plot",
    )
    return parts


def _no_shift(concepts, base: str) -> str:
    variants = [c.key for c in concepts if c.base == base and c.key != base]
    named = ", ".join(f"'{escape(v)}'" for v in variants[:3]) + (", …" if len(variants) > 3 else "")
    return NO_SHIFT.format(base=escape(base), variants=named or "none is listed")


def concept_choices(
    ctx: AppContext, session_token: gr.Textbox, choices: dict[gr.Dropdown, list[str]], roles: tuple[str, ...]
) -> None:
    """Fill each dropdown of `choices` with its concept keys at each sign-in of a person with
    one of `roles` (the admin too), and empty them for anyone else: one event for them all.

    The page is built without them: 1,278 choices, each listed once in the choices and once
    in the API schema, made a concept picker about 105 kB of the page (issue 28.1). Build
    each dropdown with ``interactive=False``: it takes typing once its choices are there, so
    what was typed before is never left unfiltered by their arrival.
    """

    @own_session
    def fill(token: str) -> dict:
        allowed = visible_to(current_actor(ctx, token), roles)
        return {
            dropdown: gr.Dropdown(choices=keys, interactive=True)
            if allowed
            else gr.Dropdown(choices=[], interactive=False)
            for dropdown, keys in choices.items()
        }

    SessionReactions.of(session_token).change(fill, session_token, list(choices))


def source_dropdown(ctx: AppContext, session_token: gr.Textbox, elem_id: str) -> gr.Dropdown:
    """The human-source picker; its choices are read again at every sign-in."""
    with ctx.db() as db:
        known = human.sources(db)
    dropdown = gr.Dropdown(
        known, value=known[0], allow_custom_value=True, label="Human ground truth", elem_id=elem_id
    )

    @own_session
    def refresh(token: str, current: str) -> gr.Dropdown:
        if not visible_to(current_actor(ctx, token), ROLES):
            return gr.Dropdown()
        with ctx.db() as db:
            names = human.sources(db)
        # Keep a choice the person already made while the refresh was on its way.
        return gr.Dropdown(choices=names, value=current if current in names else names[0])

    SessionReactions.of(session_token).change(refresh, [session_token, dropdown], dropdown)
    return dropdown
