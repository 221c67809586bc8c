"""The Expert tab: quality control of colorings (paper Appendix B.4, Figure 10).

At the top, what each stage still waits for (`annotation.qc.readiness`). Sections: (1) a
concept's colorings in a grid with their distributions and the EMD between a designer's
rounds, and recolor requests; (2) the Eq. 6 consistency ranking and opening the blind vote
queue for high-variance concepts; (3) the blind vote queue, Consistent / Inconsistent;
(4) agreement statistics (Table 5) and the ground truth P_H(x|c) of a concept; (5) admin
only: excluded colorings and reinstating them.

The tab is an `ExpertTab`: its handlers are methods that name who may call them
(`app.common.role`) and return ``{part: update}``; `EVENTS` is the tab's whole wiring.

Endpoints (each takes the session token first). For an expert or the admin:
``expert_concepts``, ``expert_grid(concept, reveal)``, ``expert_recolor(coloring_id, note)``,
``expert_accept(coloring_id, note)``, ``expert_consistency(fraction, minimum)``,
``expert_open_queue(fraction, minimum)``, ``expert_statistics``,
``expert_ground_truth(concept)`` and ``expert_needs(minimum)``; for an expert:
``expert_next`` and ``expert_vote(task_id, verdict)``; for the admin: ``expert_excluded``
and ``expert_reinstate(coloring_id, why)``.
"""

from __future__ import annotations

import math

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
    NO_ROW,
    ONE_CLICK,
    PLUMBING,
    AppContext,
    answers,
    answers_js,
    choice_search,
    empty_note,
    escape,
    given,
    id_field,
    id_in_row,
    live,
    named_table,
    note_area,
    own_session,
    role,
    same_access,
    shown_mark,
    ui_only,
    whole_number,
)
from app.landing import current_actor
from app.tabs import SESSION_CHANGE, On, Tab
from evaluation.analysis.comparison import STRIP_TITLE_CHARS, TITLE_FONT
from evaluation.analysis.figures import LAYOUT, consistency_histogram, distribution_bar, wrapped
from storage import human, shown_time, utcnow
from storage.shown import counted, shown

NAME = "expert"
TITLE = "Expert review"
ROLES = ("expert",)
REVIEWERS = ("expert", "admin")
GRID_HEADERS = ["coloring_id", "designer", "round", "status", "emd_to_previous_round", "recolor_note"]
RANKING_HEADERS = ["rank", "concept", "n", "consistency_emd", "high_variance"]
RATER_HEADERS = ["expert", "votes_on_decided", "agreement_with_majority", "agreement_with_others"]
EXCLUDED_HEADERS = ["coloring_id", "concept", "designer", "round", "consistent", "inconsistent"]
PICK_A_COLORING = (
    "click a picture of the concept's colorings, or type its coloring_id (the first column of the "
    "table that the Show colorings button fills above)"
)
"""Where an expert finds the id *Ask for a recolor* and *Mark as fine* take (outside probe 149
read "must be a whole number, got nothing" after clicking a gallery picture)."""
BLIND_PICK = (
    "That coloring is under the blind vote: no recolor and no *Mark as fine* on it until the vote "
    "decides, so *Coloring id* is emptied."
)
VERDICTS = {"Consistent": True, "Inconsistent": False}
VOTE_IMAGE_PX = 360
NOTHING_TO_VOTE = (
    "Nothing to vote on right now. The queue holds the colorings of concepts opened for a "
    "vote in section 2 (“Open the vote queue”) with the colorings per concept it asked; "
    "you never vote twice on one coloring, nor on your own."
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
    parts = _layout(ctx.config.colorings_per_concept)
    ExpertTab(ctx, {"session_token": session_token, "tab": tab, **parts}).wire()


PICKERS = ("concept", "truth_concept")
"""The two concept pickers (sections 1 and 4), filled together (`ExpertTab.concepts`)."""
PANE = ("task", "vote_concept", "vote_image", "vote_plot")
"""The vote pane (`ExpertTab.pane`), in the order API clients receive it from ``expert_next``."""
VERDICT_BUTTONS = ("consistent", "inconsistent")
_TOKEN = ("session_token",)
_RANKING = (*_TOKEN, "fraction", "minimum")
# The concept lists and the statistics are read again whenever the tab is opened.
_OPENED = "tab.select"
GRID = ("gallery", "grid_table", "grid_plot")
"""The parts of stage 1's grid of a concept's colorings."""
EVENTS = (
    On(SESSION_CHANGE, "on_sign_in", _TOKEN, (*PICKERS, *PANE, "next", "reveal", "admin_box")),
    On((_OPENED, "load.click"), "concepts", _TOKEN, PICKERS, "grid_note", "expert_concepts"),
    # Another concept's grid: the id picked in the last one is not on screen any more
    # (outside probe 218: a recolor went to a coloring of the concept shown before). Its own
    # event, at once: one after the grid could empty a picture clicked meanwhile.
    On("show.click", "forget_pick", (), ("coloring",)),
    On(
        "show.click",
        "grid",
        (*_TOKEN, "concept", "reveal"),
        GRID,
        "grid_note",
        "expert_grid",
    ),
    On("gallery.select", "pick", ("grid_table",), ("coloring", "grid_message")),
    On(
        "recolor.click",
        "recolor",
        (*_TOKEN, "coloring", "note"),
        ("grid_message",),
        "grid_message",
        "expert_recolor",
    ),
    On("then", "regrid", (*_TOKEN, "concept", "reveal"), GRID, "grid_note", clear_note=False),
    On(
        "accept.click",
        "accept",
        (*_TOKEN, "coloring", "note"),
        ("grid_message",),
        "grid_message",
        "expert_accept",
    ),
    On("then", "regrid", (*_TOKEN, "concept", "reveal"), GRID, "grid_note", clear_note=False),
    On(
        "rank.click",
        "consistency",
        _RANKING,
        ("ranking", "histogram"),
        "ranking_message",
        "expert_consistency",
    ),
    # What review waits for, with the number just ranked at (outside probe 215: it still said
    # "set … to 3" after a ranking at 3).
    On("then", "needs", (*_TOKEN, "minimum"), ("needs",), "refresh_note", clear_note=False),
    On(
        "open_queue.click",
        "open_queue",
        _RANKING,
        ("ranking_message", "needs"),
        "ranking_message",
        "expert_open_queue",
    ),
    # The ranking that chose them, shown whether or not *Rank concepts* was pressed first.
    On("then", "consistency", _RANKING, ("ranking", "histogram"), "ranking_message", clear_note=False),
    On(
        (_OPENED, "refresh.click"),
        "statistics",
        _TOKEN,
        ("table5", "summary", "raters"),
        "refresh_note",
        "expert_statistics",
    ),
    On(
        "truth.click",
        "ground_truth",
        (*_TOKEN, "truth_concept"),
        ("truth_plot", "truth_basis"),
        "truth_note",
        "expert_ground_truth",
    ),
    # What each stage waits for, for the "Colorings needed per concept" shown (opening the
    # vote queue shows it too).
    # Opening the tab shows the number the vote queue was last opened with.
    On(_OPENED, "needs_as_kept", _TOKEN, ("minimum", "needs"), "refresh_note"),
    On("refresh.click", "needs", (*_TOKEN, "minimum"), ("needs",), "refresh_note", "expert_needs"),
    On("next.click", "next_item", _TOKEN, PANE, "vote_message", "expert_next"),
    On("then", "voteable", ("task",), VERDICT_BUTTONS),
    # API clients name the verdict; on the page each button casts its own, then shows the
    # next coloring.
    On("api", "vote_endpoint", (), (), api_name="expert_vote"),
    On(
        "consistent.click",
        "consistent",
        (*_TOKEN, "task"),
        ("vote_message",),
        "vote_message",
        js=answers_js("expert_consistent"),
    ),
    On("then", "next_item", _TOKEN, PANE, "vote_message", clear_note=False),
    On("then", "voteable", ("task",), VERDICT_BUTTONS),
    On(
        "inconsistent.click",
        "inconsistent",
        (*_TOKEN, "task"),
        ("vote_message",),
        "vote_message",
        js=answers_js("expert_inconsistent"),
    ),
    On("then", "next_item", _TOKEN, PANE, "vote_message", clear_note=False),
    On("then", "voteable", ("task",), VERDICT_BUTTONS),
    On("list_excluded.click", "excluded", _TOKEN, ("excluded",), "admin_message", "expert_excluded"),
    On(
        "reinstate.click",
        "reinstate",
        (*_TOKEN, "reinstated", "reinstate_why"),
        ("admin_message",),
        "admin_message",
        "expert_reinstate",
    ),
)
"""The tab's wiring, in the order Gradio registers it (`ExpertTab.wire`)."""


class ExpertTab(Tab):
    """The Expert tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and ``tab``.
    """

    EVENTS = EVENTS

    def pane(
        self,
        *,
        task: int | None = None,
        concept: str = "",
        image: str | None = None,
        plot: go.Figure | None = None,
    ) -> dict:
        """The vote pane, empty unless named: the review task on screen (what a verdict
        answers; kept off screen, a vote is blind), its concept (Markdown), the coloring (a
        path) and its chart."""
        values = {"task": task, "vote_concept": concept, "vote_image": image, "vote_plot": plot}
        return {self.parts[name]: values[name] for name in PANE}

    @own_session
    def on_sign_in(self, session_token: str) -> dict:
        """After a sign-in or sign-out: the new person's concept lists, an empty vote pane
        whose *Next coloring* works for whoever `next_item` serves (an expert), and the
        admin-only parts shown to the admin alone."""
        ctx = self.ctx
        actor = current_actor(ctx, session_token)
        if actor is None or not actor.roles & set(REVIEWERS):
            pickers = self._pickers(choices=[], value=None)
        else:
            with ctx.db() as db:
                pickers = self._pickers(choices=_concept_choices(db))
        is_admin = actor is not None and actor.is_admin
        votes_here = actor is not None and "expert" in actor.roles
        parts = self.parts
        return {
            **pickers,
            **self.pane(),
            parts["next"]: gr.Button(interactive=votes_here),
            parts["reveal"]: gr.Checkbox(value=False, visible=is_admin),
            parts["admin_box"]: gr.Column(visible=is_admin),
        }

    @role(*REVIEWERS)
    def concepts(self, db, actor) -> dict:
        """Concepts with colorings, for both concept pickers."""
        return self._pickers(choices=_concept_choices(db))

    @role(*REVIEWERS)
    def grid(self, db, actor, concept: str, reveal: bool) -> dict:
        """A concept's colorings: gallery, table and distribution charts."""
        if not concept:
            raise ValueError(_PICK)
        return self._grid(db, actor, concept, reveal)

    @role(*REVIEWERS)
    def regrid(self, db, actor, concept: str, reveal: bool) -> dict:
        """The grid again after a recolor request or an acceptance (its statuses and notes
        changed), when a concept is picked; else nothing changes."""
        if not concept:
            return self.named(**dict.fromkeys(GRID, gr.skip()))
        return self._grid(db, actor, concept, reveal)

    def _grid(self, db, actor, concept: str, reveal: bool) -> dict:
        items = review.coloring_grid(db, actor, concept, reveal=bool(reveal))
        data_dir = self.ctx.config.data_dir
        # An earlier round is no longer counted (the ground truth takes each designer's
        # latest): said beside its status, which alone read like any other submission.
        latest = {}
        for i in items:
            if i.round is not None:  # not one under the blind vote (`review.UNDER_VOTE`)
                latest[i.designer] = max(latest.get(i.designer, 0), i.round)
        status = [
            i.status
            if i.round is None or i.round == latest[i.designer]
            else f"{i.status} (replaced by round {latest[i.designer]})"
            for i in items
        ]
        rows = [
            [
                i.coloring_id,
                "" if i.round is None else i.designer,
                i.round,
                said,
                None if i.round_emd is None else round(i.round_emd, 2),
                i.note,
            ]
            for i, said in zip(items, status)
        ]
        return self.named(
            gallery=[
                (str(resolve(data_dir, i.image_path)), _caption(i, said)) for i, said in zip(items, status)
            ],
            grid_table=rows,
            grid_plot=_stacked_distributions(items, status),
        )

    @role(*REVIEWERS)
    def recolor(self, db, actor, coloring_id: float, note: str) -> dict:
        """Ask the designer of a coloring for a new round."""
        coloring_id = whole_number(coloring_id, "Coloring id", empty=PICK_A_COLORING)
        marked = review.marked_fine_by(db, coloring_id)
        review.request_recolor(db, actor, coloring_id, note or "")
        # Said, not silently replaced (outside probe 168)
        replaces = (
            f" It was marked as fine by {escape(marked)}; this request replaces that mark." if marked else ""
        )
        return self.named(
            grid_message=f"Recolor requested for coloring {coloring_id}: its designer sees your note "
            f"and has {review.RECOLOR_DAYS:g} days to color it again.{replaces}"
        )

    @role(*REVIEWERS)
    def accept(self, db, actor, coloring_id: float, note: str) -> dict:
        """Mark a coloring as reviewed and fine."""
        coloring_id = whole_number(coloring_id, "Coloring id", empty=PICK_A_COLORING)
        review.accept_coloring(db, actor, coloring_id, note or "")
        return self.named(grid_message=f"Coloring {coloring_id} marked as fine.")

    @role(*REVIEWERS)
    def consistency(self, db, actor, fraction: float, minimum: float) -> dict:
        """The Eq. 6 ranking table and its histogram with the high-variance cutoff."""
        table = review.consistency_ranking(
            db,
            top_fraction=_fraction(fraction),
            min_colorings=_colorings_needed(minimum, db, self.ctx.config.colorings_per_concept),
        )
        if table.empty:
            return self.named(ranking=table, histogram=go.Figure(layout=LAYOUT))
        scores = table.set_index("concept")["consistency_emd"]
        figure = consistency_histogram(scores, table.set_index("concept")["high_variance"])
        return self.named(ranking=table.round({"consistency_emd": 2}), histogram=figure)

    @role(*REVIEWERS)
    def open_queue(self, db, actor, fraction: float, minimum: float) -> dict:
        """Open blind reviews for every coloring of the high-variance concepts; how many, and
        what review waits for now."""
        now = utcnow()
        needed = _colorings_needed(minimum, db, self.ctx.config.colorings_per_concept)
        opened = review.open_review_queue(
            db,
            actor,
            top_fraction=_fraction(fraction),
            min_colorings=needed,
            votes_needed=self.ctx.config.votes_per_review,
            now=now,
        )
        message = f"Opened {counted(opened, 'new review')}{_of_concepts(db, now)}."
        if not opened and (most := review.most_counted(db)) < needed:
            message += f" No concept has {needed} colorings yet (the most any has is {most})."
        elif not opened:
            message += (
                " No high-variance concept has a coloring without a review (a concept whose "
                "designers agree exactly, spread 0, is never high-variance)."
            )
        return self.named(ranking_message=message, needs=_needs(db, needed))

    @role(*REVIEWERS)
    def needs_as_kept(self, db, actor) -> dict:
        """ "Colorings needed per concept" as the vote queue was last opened with (else the
        configured number), and what each stage of review waits for with it."""
        k = self.ctx.config.colorings_per_concept
        minimum = review.review_min_colorings(db, k)
        return self.named(minimum=minimum, needs=_needs(db, _colorings_needed(minimum, db, k)))

    @role(*REVIEWERS)
    def needs(self, db, actor, minimum: float) -> dict:
        """What each stage of review waits for, with `minimum` colorings per ranked concept."""
        k = self.ctx.config.colorings_per_concept
        return self.named(needs=_needs(db, _colorings_needed(minimum, db, k)))

    @role(*REVIEWERS)
    def statistics(self, db, actor) -> dict:
        """Table 5, P̄, Fleiss' kappa, Krippendorff's alpha and each expert's agreement."""
        summary = votes.agreement_panel(db)
        if summary is None:
            state = readiness(db)
            waiting = [line for line in state.lines() if line.startswith("No review has all")]
            text = escape(waiting[0] if waiting else "No review has all its votes yet.")
            return self.named(table5=[], summary=text, raters=[])
        # Discarded by the votes, as the paper's Table 5 counts; an admin's reinstatement (or a
        # withdrawal) since changes what is out of the data set now.
        out, changed = votes.out_now(db)
        now = f" (**{out}** excluded now: reinstated by the admin or withdrawn since)" if changed else ""
        text = (
            f"**{summary.n_colorings}** {'coloring' if summary.n_colorings == 1 else 'colorings'} "
            f"reviewed, **{summary.n_discarded}** discarded by the votes{now}. Mean observed agreement P̄ = **{summary.mean_observed_agreement:.3f}**; "
            f"Fleiss' κ = {_number(summary.fleiss_kappa)}; Krippendorff's α = "
            f"{_number(summary.krippendorff_alpha)}."
        )
        if left_out := votes.votes_left_out(db):  # the withdrawal said they stay (outside probe 185)
            text += (
                f" {counted(left_out, 'vote')} on colorings withdrawn while their review was open "
                f"{'is' if left_out == 1 else 'are'} left out: a review counts here with all its votes."
            )
        if "n/a" in (_number(summary.fleiss_kappa), _number(summary.krippendorff_alpha)):
            text += (
                " κ and α are undefined while every vote is the same verdict: the agreement "
                "expected by chance is then 1, and both are 0/0."
            )
        text += (
            f" Each coloring takes {review.VOTES_PER_REVIEW} votes from different experts, as in "
            "the paper (its majority decides; no tie), whoever of the experts comes to it first."
        )
        text += (
            " Per expert: *votes_on_decided* counts their votes on the colorings decided (all their"
            " votes in), which the agreement is measured on; votes on open reviews count once"
            " those are decided. *agreement_with_majority* counts their own vote in the majority (of three"
            " votes, they agree with it whenever one other does); *agreement_with_others* is the"
            " share of the other experts' votes on the same colorings that match theirs."
        )
        raters = [
            [r.rater, r.n_votes, _number(r.agreement), _number(r.with_others)]
            for r in summary.rater_agreement or ()
        ]
        return self.named(table5=summary.table5(), summary=text, raters=raters)

    @role(*REVIEWERS)
    def ground_truth(self, db, actor, concept: str) -> dict:
        """P_H(x|c) of a concept as stored, how many colorings it rests on, and which count."""
        if not concept:
            raise ValueError(_PICK)
        get_concept(db, concept)
        truth = human.read(db, human.DESIGNERS, [concept]).get(concept)
        if truth is None:
            return self.named(
                truth_plot=go.Figure(layout=LAYOUT),
                truth_basis=f"**{escape(concept)}** has no counted coloring yet. {human.COUNTING_RULE}",
            )
        return self.named(
            truth_plot=distribution_bar(truth.p, title=f"P_H(x | {concept})"),
            truth_basis=f"P_H(x | **{escape(concept)}**) rests on **{truth.n_colorings}** "
            f"colorings in {counted(len(truth.groups), 'visual group')} (their pixels are grouped "
            "by color before they are binned, Appendix C.3, so its bars need not be the mean of "
            f"the colorings' own bars). {human.COUNTING_RULE}",
        )

    @role("expert")
    def next_item(self, db, actor) -> dict:
        """The expert's most suspicious open review task: id, concept, image, chart."""
        return self.pane(**_next_review(self.ctx, db, actor))

    @role("expert")
    def vote(self, db, actor, task_id: float, verdict: str) -> str:
        """Record a blind vote (Consistent or Inconsistent) on a review task."""
        if not isinstance(verdict, str) or verdict not in VERDICTS:  # a list is no key
            raise ValueError(f"`verdict` must be one of {list(VERDICTS)}, got {shown(verdict)}")
        decision = votes.cast_vote(db, actor, whole_number(task_id, "task"), VERDICTS[verdict])
        complete = (  # section 4 is as it was when shown: it said no review was complete (outsider 78)
            ""
            if decision is None
            else " That coloring's review is complete: *Refresh statistics* (section 4) counts it."
        )
        return f"Vote recorded: {verdict}.{complete}"

    def vote_endpoint(self, session_token: str, task_id: float, verdict: str) -> str:
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
        return self.vote(session_token, task_id, verdict)

    def consistent(self, session_token: str, task_id: float) -> dict:
        """The *Consistent* button: `vote` with that verdict."""
        return self.named(vote_message=self.vote(session_token, task_id, "Consistent"))

    def inconsistent(self, session_token: str, task_id: float) -> dict:
        """The *Inconsistent* button: `vote` with that verdict."""
        return self.named(vote_message=self.vote(session_token, task_id, "Inconsistent"))

    # Thin wrappers: `vote` checks the caller.
    vote_endpoint = same_access(vote_endpoint, vote)
    consistent = same_access(consistent, vote)
    inconsistent = same_access(inconsistent, vote)

    @ui_only
    def pick(self, table, evt: gr.SelectData) -> dict:
        """*Coloring id* set to the clicked picture's, read from the table's row in the same
        place (the gallery and the table list one concept's colorings in one order), so that
        *Ask for a recolor* and *Mark as fine* act on it (outside probe 168 clicked a picture
        and the field stayed empty). A coloring under the blind vote has no id to give: the
        field is emptied and the message says why (outside probe 215: it kept the id clicked
        before, and a recolor went to that other coloring). A click from a gallery the table
        no longer matches changes nothing."""
        number = id_in_row(table, evt.index)
        if number is NO_ROW:
            return self.named(coloring=gr.skip(), grid_message=gr.skip())
        if number is not None:
            return self.named(coloring=str(number), grid_message="")
        return self.named(coloring="", grid_message=BLIND_PICK)

    @ui_only
    def forget_pick(self) -> dict:
        """*Coloring id* emptied once *Show colorings* has shown a concept's grid."""
        return self.named(coloring="")

    @ui_only
    def voteable(self, task) -> dict:
        """The verdict buttons work only while a coloring is shown."""
        usable = gr.Button(interactive=task not in (None, ""))
        return {self.parts[name]: usable for name in VERDICT_BUTTONS}

    @role("admin")
    def excluded(self, db, actor) -> dict:
        """Excluded colorings with their designers and votes (admin)."""
        return self.named(
            excluded=[
                [
                    r["coloring_id"],
                    r["concept_key"],
                    r["pseudonym"],
                    r["round"],
                    r["consistent"],
                    r["inconsistent"],
                ]
                for r in votes.excluded_colorings(db)
            ]
        )

    @role("admin")
    def reinstate(self, db, actor, coloring_id: float, why: str) -> dict:
        """Reverse an exclusion (admin)."""
        coloring_id = whole_number(coloring_id, "Coloring id")
        votes.reinstate(db, actor, coloring_id, why or "")
        return self.named(admin_message=f"Coloring {coloring_id} is reinstated.")

    def _pickers(self, **update) -> dict:
        return {self.parts[name]: gr.Dropdown(**update) for name in PICKERS}


def _layout(colorings_per_concept: int) -> dict:
    parts = {"needs": gr.Markdown(elem_id="expert_needs")}
    parts.update(_grid_section())
    parts.update(_ranking_section(colorings_per_concept))
    parts.update(_vote_section())
    parts.update(_statistics_section())
    parts.update(_admin_section())
    return parts


def _grid_section() -> dict:
    gr.Markdown(
        "## 1. Review colorings by concept\nDesigners are shown as *designer A, B…*; "
        "the EMD to a designer's previous round shows whether they are self-consistent."
    )
    parts: dict = {}
    with gr.Row():
        parts["concept"] = choice_search(
            [], label="Concept (type to search)", scale=3, elem_id="expert_concept"
        )
        parts["load"] = gr.Button("Load concepts", elem_id="expert_load")
        parts["reveal"] = gr.Checkbox(
            False, label="Reveal designers (admin)", visible=False, elem_id="expert_reveal"
        )
        parts["show"] = gr.Button("Show colorings", variant="primary", elem_id="expert_show")
    parts["grid_note"] = note_area("expert_grid_note")
    parts["gallery"] = gr.Gallery(
        label="Colorings", columns=5, object_fit="contain", elem_id="expert_gallery"
    )
    # "str" cells are shown as text, so the designer-facing note stays inert.
    with empty_note("Pick a concept and press *Show colorings*.", "expert_grid_table_empty"):
        parts["grid_table"] = named_table(
            "Colorings of the concept", "expert_grid_table", headers=GRID_HEADERS, datatype="str"
        )
    parts["grid_plot"] = gr.Plot(label="UW-71 distributions", elem_id="expert_grid_plot")
    with gr.Row():
        parts["coloring"] = id_field(
            "Coloring id", "expert_coloring", placeholder="click a picture above, or type from the table"
        )
        parts["note"] = gr.Textbox(label="Note to the designer", scale=3, elem_id="expert_note")
        parts["recolor"] = gr.Button("Ask for a recolor", elem_id="expert_recolor_button")
        parts["accept"] = gr.Button("Mark as fine", elem_id="expert_accept_button")
    parts["grid_message"] = live(gr.Markdown(elem_id="expert_grid_message"))
    return parts


def _ranking_section(colorings_per_concept: int) -> dict:
    gr.Markdown(
        "## 2. Consistency across designers (Eq. 6)\nMean pairwise EMD of each "
        "concept's colorings; the highest are high-variance and go to the blind vote."
    )
    parts: dict = {}
    with gr.Row():
        parts["fraction"] = gr.Number(
            qc.HIGH_VARIANCE_FRACTION, label="High-variance share (top)", elem_id="expert_fraction"
        )
        parts["minimum"] = gr.Number(
            colorings_per_concept, label="Colorings needed per concept", elem_id="expert_minimum"
        )
        parts["rank"] = gr.Button("Rank concepts", elem_id="expert_compute")
        parts["open_queue"] = gr.Button(
            "Open the vote queue for high-variance concepts", elem_id="expert_open"
        )
    with empty_note(
        # Per page: "No ranking yet" read, to an expert voting on a queue another's ranking
        # opened, as if there were none (outside probe 230).
        "Not ranked on this page yet: *Rank concepts* ranks the concepts that have the colorings "
        "needed. The blind vote (section 3) takes the reviews open already, whoever opened them.",
        "expert_ranking_empty",
    ):
        parts["ranking"] = named_table(
            "Concepts ranked by consistency", "expert_ranking", headers=RANKING_HEADERS
        )
    parts["ranking_message"] = live(gr.Markdown(elem_id="expert_ranking_message"))
    parts["histogram"] = gr.Plot(label="Consistency scores", elem_id="expert_histogram")
    return parts


def _of_concepts(db, now) -> str:
    """The concepts whose reviews were opened at `now`, as " of 'apple', 'banana'" (the
    first ten named); "" for none."""
    keys = review.concepts_in_vote(db, now)
    if not keys:
        return ""
    named = ", ".join(f"'{escape(k)}'" for k in keys[:10])
    return f" of {named}" + (f" and {len(keys) - 10:,} more concepts" if len(keys) > 10 else "")


VOTE_IMAGE_ALT = (
    "The coloring to judge, of the concept named above it; the chart beside it names its main colors."
)
"""The coloring's text alternative: without one (alt="") a screen reader passed over the picture
the vote is about. One text for every coloring, so the API's ``expert_next`` still answers a
file path; the concept above is read out as it changes, the chart is described (`app.common`)."""


def _vote_section() -> dict:
    gr.Markdown(
        "## 3. Blind vote\nIs this coloring consistent with the meaning of the "
        "concept? Most suspicious colorings come first."
    )
    parts: dict = {}
    # Usable once the page knows who signed in: the sign-in's empty pane must not land on
    # the first coloring shown (the two events run side by side on the server).
    parts["next"] = gr.Button("Next coloring", interactive=False, elem_id="expert_next")
    parts["task"] = gr.Number(
        label="Task", interactive=False, visible="hidden", elem_classes=PLUMBING, elem_id="expert_task"
    )
    parts["vote_concept"] = live(gr.Markdown(elem_id="expert_vote_concept"))
    with gr.Row():
        parts["vote_image"] = gr.Image(
            label="Coloring",
            type="filepath",
            interactive=False,
            height=VOTE_IMAGE_PX,
            elem_id="expert_vote_image",
            alt_text=VOTE_IMAGE_ALT,
        )
        parts["vote_plot"] = gr.Plot(label="Its UW-71 distribution", elem_id="expert_vote_plot")
    # One box for the buttons and their message: the focus a last vote leaves goes to the
    # nearest message, this one (`app.common.JS`), not to another section's.
    with gr.Column():
        with gr.Row(equal_height=True):
            parts["consistent"] = _verdict_button("Consistent", "primary")
            parts["inconsistent"] = _verdict_button("Inconsistent", "stop")
        # Under both buttons, which share a phone's line (outside probes 125, 128: beside them
        # it halved Inconsistent's width, and a Markdown's min_width did not wrap it).
        parts["vote_message"] = live(gr.Markdown(elem_id="expert_vote_message"))
    return parts


def _verdict_button(verdict: str, variant: str) -> gr.Button:
    """A vote button (``expert_consistent``, ``expert_inconsistent``), off until a coloring is
    shown and its answer dwelt on; two share a phone's line."""
    return gr.Button(
        verdict,
        variant=variant,
        interactive=False,
        elem_id=f"expert_{verdict.lower()}",
        min_width=120,
        elem_classes=[ONE_CLICK, *answers("expert_vote_concept")],
    )


def _statistics_section() -> dict:
    gr.Markdown("## 4. Agreement and ground truth")
    parts: dict = {}
    parts["refresh"] = gr.Button("Refresh statistics", elem_id="expert_refresh")
    parts["refresh_note"] = note_area("expert_refresh_note")
    parts["summary"] = gr.Markdown(elem_id="expert_summary")
    with empty_note("Table 5 fills in as reviews get all their votes.", "expert_table5_empty"):
        parts["table5"] = named_table(
            "Table 5: expert votes per review",
            "expert_table5",
            headers=["expert_votes", "interpretation", "count"],
            wrap=True,  # the count column stays in sight on a phone (outside probe 125)
            show_label=True,  # the README's "Table 5" by its name (outside probe 127)
        )
    # Per-expert agreement needs a review with all its votes: votes cast before then do
    # not show here, so the note must not say nobody voted.
    with empty_note(
        "Each expert's votes and agreement show here once a review has all its votes.",
        "expert_raters_empty",
    ):
        parts["raters"] = named_table("Votes per expert", "expert_raters", headers=RATER_HEADERS)
    with gr.Row():
        parts["truth_concept"] = choice_search(
            [], label="Concept (type to search)", scale=3, elem_id="expert_truth_concept"
        )
        parts["truth"] = gr.Button("Show P_H(x|c)", elem_id="expert_truth")
    parts["truth_note"] = note_area("expert_truth_note")
    parts["truth_basis"] = gr.Markdown(elem_id="expert_truth_basis")
    parts["truth_plot"] = gr.Plot(label="Ground truth", elem_id="expert_truth_plot")
    return parts


def _admin_section() -> dict:
    parts: dict = {}
    with gr.Column(visible=False) as parts["admin_box"]:
        gr.Markdown("## 5. Excluded colorings (admin)")
        parts["list_excluded"] = gr.Button("List excluded colorings", elem_id="expert_list_excluded")
        with empty_note(
            "No excluded coloring listed: press *List excluded colorings*.", "expert_excluded_empty"
        ):
            parts["excluded"] = named_table("Excluded colorings", "expert_excluded", headers=EXCLUDED_HEADERS)
        with gr.Row():
            parts["reinstated"] = id_field("Coloring id", "expert_reinstated")
            parts["reinstate_why"] = gr.Textbox(
                label="Why reinstate", scale=3, elem_id="expert_reinstate_why"
            )
            parts["reinstate"] = gr.Button("Reinstate", elem_id="expert_reinstate_button")
        parts["admin_message"] = live(gr.Markdown(elem_id="expert_admin_message"))
    return parts


_PICK = "Pick a concept first: type part of its name in the Concept box and choose it."


def _concept_choices(db) -> list[tuple[str, str]]:
    """The concepts with colorings as ``(label, key)`` choices for the concept pickers."""
    return [
        (
            f"{r['concept_key']} ({counted(r['designers'], 'designer')}, {counted(r['colorings'], 'coloring')})",
            r["concept_key"],
        )
        for r in review.reviewable_concepts(db)
    ]


def _next_review(ctx: AppContext, db, actor) -> dict:
    """What the vote pane shows the expert next (`ExpertTab.pane`'s keywords): their most
    suspicious open review task, drawn with ``ctx.rng``, or what the votes wait for."""
    queue = votes.vote_queue(db, actor, ctx.rng)
    if not queue:
        state = readiness(db, review.review_min_colorings(db, ctx.config.colorings_per_concept))
        # Once reviews are open, what the votes wait for; before, what opens them.
        lines = state.lines()[1:] if state.reviews_open + state.reviews_decided else state.lines()
        held, until = votes.held_by_others(db, actor)
        if held:
            lines.append(
                f"{counted(held, 'coloring')} you may still vote on {'is' if held == 1 else 'are'} "
                "held by other experts; one comes back to your queue if its expert has not voted "
                f"on it by {shown_time(until)} at the latest (press Next coloring then)."
            )
        return {"concept": " ".join([NOTHING_TO_VOTE, *map(escape, lines)])}
    item = queue[0]
    return {
        "task": item.task_id,
        "concept": f"### {escape(item.concept_key)}\n{len(queue)} in your queue, "
        f"{votes.open_to_vote(db, actor)} open to your vote in all{shown_mark(item.task_id)}",
        "image": str(resolve(ctx.config.data_dir, item.image_path)),
        "plot": distribution_bar(item.p, title="UW-71 distribution"),
    }


def _needs(db, needed: int) -> str:
    """What each stage of review waits for, with `needed` colorings per ranked concept (the
    field's number as `_colorings_needed` checked it)."""
    state = readiness(db, needed)
    return "**What review waits for:**\n" + "\n".join(f"- {escape(line)}" for line in state.lines())


def _caption(item: review.GridItem, status: str) -> str:
    """A coloring's caption: id, designer, round, `status` (as the table says it); of one
    under the blind vote, that alone."""
    if item.coloring_id is None:
        return f"{review.UNDER_VOTE}: who made it is shown once the vote decides"
    emd = "" if item.round_emd is None else f" · EMD to round {item.round - 1}: {item.round_emd:.1f}"
    return f"#{item.coloring_id} · {item.designer} · round {item.round} · {status}{emd}"


def _stacked_distributions(items: list[review.GridItem], status: list[str]) -> go.Figure:
    """`items`' distributions one above the other on one scale, each titled as its caption
    (`status`: each item's, in order)."""
    if not items:
        return go.Figure(layout=LAYOUT)
    figure = make_subplots(
        rows=len(items),
        cols=1,
        shared_xaxes=True,
        # Wrapped to fit a 390-px phone (`evaluation.analysis.comparison.STRIP_TITLE_CHARS`).
        subplot_titles=[wrapped(_caption(i, said), STRIP_TITLE_CHARS) for i, said in zip(items, status)],
    )
    figure.update_annotations(font=TITLE_FONT)
    top = max(float(np.max(i.p)) for i in items)
    for row, item in enumerate(items, start=1):
        figure.add_trace(distribution_bar(item.p).data[0], row=row, col=1)
        figure.update_yaxes(range=[0, top], row=row, col=1)
    figure.update_layout(height=180 * len(items), showlegend=False, **LAYOUT)
    return figure


def _number(value: float) -> str:
    # "z": a κ of exactly 0 computed as -2.5e-16 read "-0.000" (outside probe 155)
    return "n/a" if value is None or math.isnan(value) else f"{value:z.3f}"


def _fraction(value: float | None) -> float:
    if not isinstance(value, (int, float)) or not 0 < value <= 1:  # an empty box read "got None"
        raise ValueError(f"`high-variance share` must be in (0, 1], got {given(value)}")
    return float(value)


def _colorings_needed(value: float | None, db, k: int) -> int:
    """The "Colorings needed per concept" field as a whole number from 2 to the most
    colorings a concept can have (`review.most_colorings` with `k` colorings per concept)."""
    n = whole_number(value, "Colorings needed per concept")
    most = review.most_colorings(db, k)
    if not review.MIN_COLORINGS <= n <= max(most, review.MIN_COLORINGS):
        why = (  # the reason for the bound it crosses (outside probe 166)
            f"a concept's consistency compares its colorings in pairs, so it needs {review.MIN_COLORINGS}"
            if n < review.MIN_COLORINGS
            else f"no concept has or can get more than {most} colorings"
        )
        raise ValueError(
            f"Colorings needed per concept must be a whole number from {review.MIN_COLORINGS} to {most}, got {n}: {why}"
        )
    return n
