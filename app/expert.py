"""The Expert tab: quality control of colorings (paper Appendix B.4, Figure 10).

At the top, what each stage still waits for (`annotation.qc.readiness`). Sections: (1) a
concept's colorings in a grid with their distributions and the EMD between a designer's
rounds, and recolor requests; (2) the Eq. 6 consistency ranking and opening the blind vote
queue for high-variance concepts; (3) the blind vote queue, Consistent / Inconsistent;
(4) agreement statistics (Table 5) and the ground truth P_H(x|c) of a concept; (5) admin
only: excluded colorings and reinstating them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from annotation.concepts import get_concept
from annotation.files import resolve
from annotation.qc import review, votes
from annotation.qc import stats as qc
from annotation.qc.readiness import readiness
from app.common import (
    AppContext,
    choice_search,
    empty_note,
    escape,
    handler,
    id_field,
    note_area,
    on_open,
    own_session,
    same_access,
    ui_only,
    whole_number,
    wire,
)
from app.landing import current_actor
from evaluation.analysis.figures import LAYOUT, consistency_histogram, distribution_bar
from storage import human

NAME = "expert"
TITLE = "Expert review"
ROLES = ("expert",)
REVIEWERS = ("expert", "admin")
GRID_HEADERS = ["coloring_id", "designer", "round", "status", "emd_to_previous_round", "recolor_note"]
RANKING_HEADERS = ["rank", "concept", "n", "consistency_emd", "high_variance"]
RATER_HEADERS = ["expert", "votes", "agreement_with_majority"]
EXCLUDED_HEADERS = ["coloring_id", "concept", "designer", "round", "consistent", "inconsistent"]
VERDICTS = {"Consistent": True, "Inconsistent": False}
VOTE_IMAGE_PX = 360
NOTHING_TO_VOTE = (
    "Nothing to vote on right now. The queue holds the colorings of concepts opened for a "
    "vote in section 2 (“Open the vote queue”), once at least two designers have colored "
    "them; you never vote twice on one coloring, nor on your own."
)
# Gradio shows an image at most at its natural size; a coloring is scaled to fill its pane.
CSS = """
#expert_vote_image .image-frame { width: 100%; }
#expert_vote_image img { object-fit: contain; }
"""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Expert tab inside the current `gr.Tab`.

    Each section shows its messages next to its own buttons. The admin-only parts (the
    reveal checkbox, section 5) are shown to the admin alone; their handlers check the
    role on the server all the same.
    """
    needs = gr.Markdown(elem_id="expert_needs")
    grid = _build_grid_section()
    ranking = _build_ranking_section(ctx)
    queue = _build_vote_section()
    stats = _build_statistics_section()
    admin = _build_admin_section()
    pickers = [grid["concept"], stats["concept"]]
    session_token.change(
        _on_sign_in(ctx),
        session_token,
        [
            *pickers,
            queue["task"],
            queue["concept"],
            queue["image"],
            queue["plot"],
            queue["next"],
            grid["reveal"],
            admin["box"],
        ],
        api_visibility="private",
    )
    _wire_review(ctx, session_token, tab, grid, ranking, stats, needs)
    _wire_needs(ctx, session_token, tab, needs, ranking, stats)
    _wire_votes(ctx, session_token, queue)
    admin_only = handler(ctx, "admin")
    wire(
        admin["list"].click,
        admin_only(_excluded),
        session_token,
        admin["table"],
        note=admin["message"],
        api_name="expert_excluded",
    )
    wire(
        admin["reinstate"].click,
        admin_only(_reinstate),
        [session_token, admin["coloring"], admin["why"]],
        admin["message"],
        note=admin["message"],
        api_name="expert_reinstate",
    )


def _wire_review(
    ctx: AppContext,
    session_token: gr.Textbox,
    tab: gr.Tab,
    grid: dict,
    ranking: dict,
    stats: dict,
    needs: gr.Markdown,
) -> None:
    reviewer = handler(ctx, *REVIEWERS)
    # The concept lists and the statistics are read again whenever the tab is opened.
    wire(
        on_open(tab, grid["load"].click),
        reviewer(_concepts),
        session_token,
        [grid["concept"], stats["concept"]],
        note=grid["pick_note"],
        api_name="expert_concepts",
    )
    wire(
        grid["show"].click,
        reviewer(_grid(ctx)),
        [session_token, grid["concept"], grid["reveal"]],
        [grid["gallery"], grid["table"], grid["plot"]],
        note=grid["pick_note"],
        api_name="expert_grid",
    )
    wire(
        grid["recolor"].click,
        reviewer(_recolor),
        [session_token, grid["coloring"], grid["note"]],
        grid["message"],
        note=grid["message"],
        api_name="expert_recolor",
    )
    wire(
        grid["accept"].click,
        reviewer(_accept),
        [session_token, grid["coloring"], grid["note"]],
        grid["message"],
        note=grid["message"],
        api_name="expert_accept",
    )
    ranking_inputs = [session_token, ranking["fraction"], ranking["minimum"]]
    wire(
        ranking["compute"].click,
        reviewer(_ranking),
        ranking_inputs,
        [ranking["table"], ranking["histogram"]],
        note=ranking["message"],
        api_name="expert_consistency",
    )
    wire(
        ranking["open"].click,
        reviewer(_open_queue(ctx)),
        ranking_inputs,
        [ranking["message"], needs],
        note=ranking["message"],
        api_name="expert_open_queue",
    )
    wire(
        on_open(tab, stats["refresh"].click),
        reviewer(_statistics),
        session_token,
        [stats["table5"], stats["summary"], stats["raters"]],
        note=stats["refresh_note"],
        api_name="expert_statistics",
    )
    wire(
        stats["show"].click,
        reviewer(_ground_truth(ctx)),
        [session_token, stats["concept"]],
        [stats["plot"], stats["basis"]],
        note=stats["truth_note"],
        api_name="expert_ground_truth",
    )


def _wire_needs(
    ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab, needs: gr.Markdown, ranking: dict, stats: dict
) -> None:
    """What each stage waits for, for the "Colorings needed per concept" shown: read when the
    tab opens and on *Refresh statistics* (opening the vote queue shows it too)."""
    wire(
        on_open(tab, stats["refresh"].click),
        handler(ctx, *REVIEWERS)(_needs),
        [session_token, ranking["minimum"]],
        needs,
        note=stats["refresh_note"],
        api_name="expert_needs",
    )


def _wire_votes(ctx: AppContext, session_token: gr.Textbox, queue: dict) -> None:
    """``/expert_next`` and ``/expert_vote(session_token, task_id, verdict)``; each button
    casts its own verdict through the same handler, then shows the next coloring."""
    next_item = handler(ctx, "expert")(_next_item(ctx))
    vote = handler(ctx, "expert")(_vote)
    outputs = [queue["task"], queue["concept"], queue["image"], queue["plot"]]
    buttons = [queue[verdict] for verdict in VERDICTS]
    wire(
        queue["next"].click, next_item, session_token, outputs, note=queue["message"], api_name="expert_next"
    ).then(_voteable, queue["task"], buttons, api_visibility="private")
    gr.api(_vote_endpoint(vote), api_name="expert_vote")
    for verdict in VERDICTS:
        voted = wire(
            queue[verdict].click,
            _pressed(vote, verdict),
            [session_token, queue["task"]],
            queue["message"],
            note=queue["message"],
        )
        wire(voted.then, next_item, session_token, outputs, note=queue["message"], clear_note=False).then(
            _voteable, queue["task"], buttons, api_visibility="private"
        )


@ui_only
def _voteable(task) -> tuple:
    """The verdict buttons work only while a coloring is shown."""
    return (gr.Button(interactive=task not in (None, "")),) * len(VERDICTS)


def _vote_endpoint(vote: Callable[[str, float, str], str]) -> Callable[[str, float, str], str]:
    def expert_vote(session_token: str, task_id: float, verdict: str) -> str:
        """Cast a blind vote on one of your review tasks.

        Parameters
        ----------
        session_token : str
            From ``/login_invite``.
        task_id : float
            A whole number: the task ``/expert_next`` handed you.
        verdict : str
            ``"Consistent"`` or ``"Inconsistent"``.
        """
        return vote(session_token, task_id, verdict)

    return same_access(expert_vote, vote)


def _pressed(vote: Callable[[str, float, str], str], verdict: str) -> Callable[[str, float], str]:
    def press(session_token: str, task_id: float) -> str:
        return vote(session_token, task_id, verdict)

    return same_access(press, vote)


def _build_grid_section() -> dict:
    gr.Markdown(
        "## 1. Review colorings by concept\nDesigners are shown as *designer A, B…*; "
        "the EMD to a designer's previous round shows whether they are self-consistent."
    )
    with gr.Row():
        concept = choice_search([], label="Concept (type to search)", scale=3, elem_id="expert_concept")
        load = gr.Button("Load concepts", elem_id="expert_load")
        reveal = gr.Checkbox(False, label="Reveal designers (admin)", visible=False, elem_id="expert_reveal")
        show = gr.Button("Show colorings", variant="primary", elem_id="expert_show")
    pick_note = note_area("expert_grid_note")
    gallery = gr.Gallery(label="Colorings", columns=5, object_fit="contain", elem_id="expert_gallery")
    # "str" cells are shown as text, so the designer-facing note stays inert.
    with empty_note("Pick a concept and press *Show colorings*.", "expert_grid_table_empty"):
        table = gr.Dataframe(
            headers=GRID_HEADERS, datatype="str", interactive=False, elem_id="expert_grid_table"
        )
    plot = gr.Plot(label="UW-71 distributions", elem_id="expert_grid_plot")
    with gr.Row():
        coloring = id_field("Coloring id", "expert_coloring")
        note = gr.Textbox(label="Note to the designer", scale=3, elem_id="expert_note")
        recolor = gr.Button("Ask for a recolor", elem_id="expert_recolor_button")
        accept = gr.Button("Mark as fine", elem_id="expert_accept_button")
    message = gr.Markdown(elem_id="expert_grid_message")
    return {
        "concept": concept,
        "load": load,
        "reveal": reveal,
        "show": show,
        "gallery": gallery,
        "table": table,
        "plot": plot,
        "coloring": coloring,
        "note": note,
        "recolor": recolor,
        "accept": accept,
        "message": message,
        "pick_note": pick_note,
    }


def _build_ranking_section(ctx: AppContext) -> dict:
    gr.Markdown(
        "## 2. Consistency across designers (Eq. 6)\nMean pairwise EMD of each "
        "concept's colorings; the highest are high-variance and go to the blind vote."
    )
    with gr.Row():
        fraction = gr.Number(
            qc.HIGH_VARIANCE_FRACTION, label="High-variance share (top)", elem_id="expert_fraction"
        )
        minimum = gr.Number(
            ctx.config.colorings_per_concept, label="Colorings needed per concept", elem_id="expert_minimum"
        )
        compute = gr.Button("Rank concepts", elem_id="expert_compute")
        open_queue = gr.Button("Open the vote queue for high-variance concepts", elem_id="expert_open")
    with empty_note(
        "No ranking yet: *Rank concepts* ranks the concepts that have the colorings needed.",
        "expert_ranking_empty",
    ):
        table = gr.Dataframe(headers=RANKING_HEADERS, interactive=False, elem_id="expert_ranking")
    message = gr.Markdown(elem_id="expert_ranking_message")
    histogram = gr.Plot(label="Consistency scores", elem_id="expert_histogram")
    return {
        "fraction": fraction,
        "minimum": minimum,
        "compute": compute,
        "open": open_queue,
        "table": table,
        "histogram": histogram,
        "message": message,
    }


def _build_vote_section() -> dict:
    gr.Markdown(
        "## 3. Blind vote\nIs this coloring consistent with the meaning of the "
        "concept? Most suspicious colorings come first."
    )
    # Usable once the page knows who signed in: the sign-in's empty pane must not land on
    # the first coloring shown (the two events run side by side on the server).
    next_button = gr.Button("Next coloring", interactive=False, elem_id="expert_next")
    # The review task on screen: what a verdict answers (kept off screen: a vote is blind).
    task = gr.Number(label="Task", interactive=False, visible="hidden", elem_id="expert_task")
    concept = gr.Markdown(elem_id="expert_vote_concept")
    with gr.Row():
        image = gr.Image(
            label="Coloring",
            type="filepath",
            interactive=False,
            height=VOTE_IMAGE_PX,
            elem_id="expert_vote_image",
        )
        plot = gr.Plot(label="Its UW-71 distribution", elem_id="expert_vote_plot")
    with gr.Row(equal_height=True):
        consistent = gr.Button(
            "Consistent", variant="primary", interactive=False, elem_id="expert_consistent"
        )
        inconsistent = gr.Button(
            "Inconsistent", variant="stop", interactive=False, elem_id="expert_inconsistent"
        )
        message = gr.Markdown(elem_id="expert_vote_message")
    return {
        "next": next_button,
        "task": task,
        "concept": concept,
        "image": image,
        "plot": plot,
        "Consistent": consistent,
        "Inconsistent": inconsistent,
        "message": message,
    }


def _build_statistics_section() -> dict:
    gr.Markdown("## 4. Agreement and ground truth")
    refresh = gr.Button("Refresh statistics", elem_id="expert_refresh")
    refresh_note = note_area("expert_refresh_note")
    summary = gr.Markdown(elem_id="expert_summary")
    with empty_note("Table 5 fills in as reviews get all their votes.", "expert_table5_empty"):
        table5 = gr.Dataframe(
            headers=["expert_votes", "interpretation", "count"], interactive=False, elem_id="expert_table5"
        )
    with empty_note("No expert has voted yet.", "expert_raters_empty"):
        raters = gr.Dataframe(headers=RATER_HEADERS, interactive=False, elem_id="expert_raters")
    with gr.Row():
        concept = choice_search([], label="Concept (type to search)", scale=3, elem_id="expert_truth_concept")
        show = gr.Button("Show P_H(x|c)", elem_id="expert_truth")
    truth_note = note_area("expert_truth_note")
    basis = gr.Markdown(elem_id="expert_truth_basis")
    plot = gr.Plot(label="Ground truth", elem_id="expert_truth_plot")
    return {
        "refresh": refresh,
        "summary": summary,
        "table5": table5,
        "raters": raters,
        "concept": concept,
        "show": show,
        "basis": basis,
        "plot": plot,
        "refresh_note": refresh_note,
        "truth_note": truth_note,
    }


def _build_admin_section() -> dict:
    with gr.Column(visible=False) as box:
        gr.Markdown("## 5. Excluded colorings (admin)")
        list_button = gr.Button("List excluded colorings", elem_id="expert_list_excluded")
        with empty_note(
            "No excluded coloring listed: press *List excluded colorings*.", "expert_excluded_empty"
        ):
            table = gr.Dataframe(headers=EXCLUDED_HEADERS, interactive=False, elem_id="expert_excluded")
        with gr.Row():
            coloring = id_field("Coloring id", "expert_reinstated")
            why = gr.Textbox(label="Why reinstate", scale=3, elem_id="expert_reinstate_why")
            reinstate = gr.Button("Reinstate", elem_id="expert_reinstate_button")
        message = gr.Markdown(elem_id="expert_admin_message")
    return {
        "box": box,
        "list": list_button,
        "table": table,
        "coloring": coloring,
        "why": why,
        "reinstate": reinstate,
        "message": message,
    }


def _concepts(db, actor) -> tuple:
    """Concepts with colorings, for both concept pickers."""
    choices = [
        (f"{r['concept_key']} ({r['designers']} designers, {r['colorings']} colorings)", r["concept_key"])
        for r in review.reviewable_concepts(db)
    ]
    return gr.Dropdown(choices=choices), gr.Dropdown(choices=choices)


def _on_sign_in(ctx: AppContext):
    @own_session
    def on_sign_in(session_token: str) -> tuple:
        """After a sign-in or sign-out: the new person's concept lists, an empty vote pane
        whose *Next coloring* works for an expert (or the admin), and the admin-only parts
        shown to the admin alone."""
        actor = current_actor(ctx, session_token)
        if actor is None or not actor.roles & set(REVIEWERS):
            pickers = gr.Dropdown(choices=[], value=None), gr.Dropdown(choices=[], value=None)
        else:
            with ctx.db() as db:
                pickers = _concepts(db, actor)
        is_admin = actor is not None and actor.is_admin
        votes_here = is_admin or (actor is not None and "expert" in actor.roles)
        return (
            *pickers,
            None,
            "",
            None,
            None,
            gr.Button(interactive=votes_here),
            gr.Checkbox(value=False, visible=is_admin),
            gr.Column(visible=is_admin),
        )

    return on_sign_in


def _grid(ctx: AppContext):
    def grid(db, actor, concept: str, reveal: bool) -> tuple:
        """A concept's colorings: gallery, table and distribution charts."""
        items = review.coloring_grid(db, actor, concept, reveal=bool(reveal))
        gallery = [(str(resolve(ctx.config.data_dir, i.image_path)), _caption(i)) for i in items]
        rows = [
            [
                i.coloring_id,
                i.designer,
                i.round,
                i.status,
                None if i.round_emd is None else round(i.round_emd, 2),
                i.note,
            ]
            for i in items
        ]
        return gallery, rows, _stacked_distributions(items)

    return grid


def _caption(item: review.GridItem) -> str:
    emd = "" if item.round_emd is None else f" · EMD to round {item.round - 1}: {item.round_emd:.1f}"
    return f"#{item.coloring_id} · {item.designer} · round {item.round} · {item.status}{emd}"


def _stacked_distributions(items: list[review.GridItem]) -> go.Figure:
    if not items:
        return go.Figure(layout=LAYOUT)
    figure = make_subplots(
        rows=len(items), cols=1, shared_xaxes=True, subplot_titles=[_caption(i) for i in items]
    )
    top = max(float(np.max(i.p)) for i in items)
    for row, item in enumerate(items, start=1):
        figure.add_trace(distribution_bar(item.p).data[0], row=row, col=1)
        figure.update_yaxes(range=[0, top], row=row, col=1)
    figure.update_layout(height=180 * len(items), showlegend=False, **LAYOUT)
    return figure


def _recolor(db, actor, coloring_id: float, note: str) -> str:
    """Ask the designer of a coloring for a new round."""
    coloring_id = whole_number(coloring_id, "coloring id")
    task_id = review.request_recolor(db, actor, coloring_id, note or "")
    return f"Recolor requested for coloring {coloring_id} (designer task {task_id})."


def _accept(db, actor, coloring_id: float, note: str) -> str:
    """Mark a coloring as reviewed and fine."""
    coloring_id = whole_number(coloring_id, "coloring id")
    review.accept_coloring(db, actor, coloring_id, note or "")
    return f"Coloring {coloring_id} marked as fine."


def _ranking(db, actor, fraction: float, minimum: float) -> tuple:
    """The Eq. 6 ranking table and its histogram with the high-variance cutoff."""
    table = review.consistency_ranking(
        db, top_fraction=_fraction(fraction), min_colorings=_colorings_needed(minimum)
    )
    if table.empty:
        return table, go.Figure(layout=LAYOUT)
    scores = table.set_index("concept")["consistency_emd"]
    figure = consistency_histogram(scores, table.set_index("concept")["high_variance"])
    return table.round({"consistency_emd": 2}), figure


def _open_queue(ctx: AppContext):
    def open_queue(db, actor, fraction: float, minimum: float) -> tuple[str, str]:
        """Open blind reviews for every coloring of the high-variance concepts; how many, and
        what review waits for now."""
        opened = review.open_review_queue(
            db,
            actor,
            top_fraction=_fraction(fraction),
            min_colorings=_colorings_needed(minimum),
            votes_needed=ctx.config.votes_per_review,
        )
        return f"Opened {opened} new reviews.", _needs(db, actor, minimum)

    return open_queue


def _needs(db, actor, minimum: float) -> str:
    """What each stage of review waits for, with `minimum` colorings per ranked concept."""
    state = readiness(db, _colorings_needed(minimum))
    return "**What review waits for:**\n" + "\n".join(f"- {escape(line)}" for line in state.lines())


def _next_item(ctx: AppContext):
    def next_item(db, actor) -> tuple:
        """The expert's most suspicious open review task: id, concept, image, chart."""
        queue = votes.vote_queue(db, actor, ctx.rng)
        if not queue:
            state = readiness(db, ctx.config.colorings_per_concept)
            # Once reviews are open, what the votes wait for; before, what opens them.
            lines = state.lines()[1:] if state.reviews_open + state.reviews_decided else state.lines()
            return None, " ".join([NOTHING_TO_VOTE, *map(escape, lines)]), None, None
        item = queue[0]
        return (
            item.task_id,
            f"### {escape(item.concept_key)}\n{len(queue)} in your queue",
            str(resolve(ctx.config.data_dir, item.image_path)),
            distribution_bar(item.p, title="UW-71 distribution"),
        )

    return next_item


def _vote(db, actor, task_id: float, verdict: str) -> str:
    """Record a blind vote (Consistent or Inconsistent) on a review task."""
    if verdict not in VERDICTS:
        raise ValueError(f"`verdict` must be one of {list(VERDICTS)}, got {verdict!r}")
    decision = votes.cast_vote(db, actor, whole_number(task_id, "task"), VERDICTS[verdict])
    return "Vote recorded." + ("" if decision is None else " The coloring's review is complete.")


def _statistics(db, actor) -> tuple:
    """Table 5, P̄, Fleiss' kappa, Krippendorff's alpha and each expert's agreement."""
    summary = votes.agreement_panel(db)
    if summary is None:
        state = readiness(db)
        waiting = [line for line in state.lines() if line.startswith("No review has all")]
        return [], escape(waiting[0] if waiting else "No review has all its votes yet."), []
    text = (
        f"**{summary.n_colorings}** colorings reviewed, **{summary.n_discarded}** "
        f"discarded. Mean observed agreement P̄ = **{summary.mean_observed_agreement:.3f}**; "
        f"Fleiss' κ = {_number(summary.fleiss_kappa)}; Krippendorff's α = "
        f"{_number(summary.krippendorff_alpha)}."
    )
    raters = [[r.rater, r.n_votes, _number(r.agreement)] for r in summary.rater_agreement or ()]
    return summary.table5(), text, raters


def _ground_truth(ctx: AppContext):
    def ground_truth(db, actor, concept: str) -> tuple:
        """P_H(x|c) of a concept as stored, how many colorings it rests on, and which count."""
        get_concept(db, concept or "")
        truth = human.read(db, human.DESIGNERS, [concept]).get(concept)
        if truth is None:
            return go.Figure(layout=LAYOUT), (
                f"**{escape(concept)}** has no counted coloring yet. {human.COUNTING_RULE}"
            )
        figure = distribution_bar(truth.p, title=f"P_H(x | {concept})")
        return figure, (
            f"P_H(x | **{escape(concept)}**) rests on **{truth.n_colorings}** "
            f"colorings in {len(truth.groups)} visual groups. {human.COUNTING_RULE}"
        )

    return ground_truth


def _excluded(db, actor) -> list[list]:
    """Excluded colorings with their designers and votes (admin)."""
    return [
        [r["coloring_id"], r["concept_key"], r["pseudonym"], r["round"], r["consistent"], r["inconsistent"]]
        for r in votes.excluded_colorings(db)
    ]


def _reinstate(db, actor, coloring_id: float, why: str) -> str:
    """Reverse an exclusion (admin)."""
    coloring_id = whole_number(coloring_id, "coloring id")
    votes.reinstate(db, actor, coloring_id, why or "")
    return f"Coloring {coloring_id} is reinstated."


def _number(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def _fraction(value: float | None) -> float:
    if not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"`high-variance share` must be in (0, 1], got {value!r}")
    return float(value)


def _colorings_needed(value: float | None) -> int:
    """The "Colorings needed per concept" field as a whole number, 2 or more."""
    n = whole_number(value, "Colorings needed per concept")
    if n < review.MIN_COLORINGS:
        raise ValueError(
            f"Colorings needed per concept must be a whole number, {review.MIN_COLORINGS} or more, got {n}"
        )
    return n
