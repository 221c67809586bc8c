"""Leaderboards and analyses: Tables 1, 2 and 6-8, Figures 4 and 5, all exportable.

Every stored model distribution is scored against the chosen human source. Tables 1
and 2 mark the best value of each column in bold and the second underlined; tables are
exported as CSV and figures as standalone HTML (`evaluation.analysis.results.export_analyses`).
Every table and plotted mean carries a bootstrap interval, with the adjacent models that
are distinguishable (`evaluation.analysis.uncertainty`); two panels below check the
leaderboard under the paper's open choices (`evaluation.analysis.robustness`) and show
each concept's P_H stability (`annotation.coloring.stability`).
"""

from __future__ import annotations

import textwrap

import gradio as gr

from annotation.coloring.stability import stability_view
from annotation.research.views import (
    NothingScored,
    SourceChoice,
    evaluated_concepts,
    leaderboard_analyses,
    pick_source,
    robustness_report,
)
from app.browser import source_dropdown
from app.common import AppContext, empty_note, escape, handler, whole_number, wire
from evaluation.analysis.bootstrap import N_RESAMPLES, SEED, Resampling
from evaluation.analysis.results import RECOMMENDED, analysis_figures, export_analyses
from evaluation.analysis.robustness import CHOICES
from evaluation.analysis.tables import MEAN_OF_RATIOS, NOT_DEFINED, RATIO_OF_MEANS
from evaluation.analysis.uncertainty import interval_table, significance_note
from evaluation.concepts import load_concepts
from storage import human

NAME = "leaderboard"
TITLE = "Leaderboards"
ROLES = ("researcher",)
NO_SHIFTS = (
    "Nothing to show yet: sensitivity compares a model's shift from a base concept to its "
    "variants (apple → rotten apple) with people's. It fills once a model has evaluated a base "
    "concept and a variant that both have a human distribution in this source (designer "
    "colorings; the reference sets cover base concepts only)."
)
LEGEND = (
    "<p>Bold: best in the column; underlined: second best. ↑ higher is better, ↓ lower is better. "
    f"{NOT_DEFINED}: ΔHue is undefined when every dominant color is grey. "
    "[lo, hi]: bootstrap interval (under Table 2: how it was drawn).</p>"
)
ROBUSTNESS_LEGEND = (
    "Each open choice has one default (used by every table above) and named alternatives; "
    "this recomputes the leaderboard under each alternative, one choice at a time, and "
    "reports per metric the largest change of any cell and Kendall's τ between the model "
    "rankings with the pairs that swap. Extraction choices are re-extracted from the runs' "
    "pixel summaries (and, for the designers, from the colorings). Defaults: "
    + "; ".join(f"{name} = {default} (else {', '.join(alt)})" for name, (default, alt) in CHOICES.items())
    + "."
)


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Leaderboards tab inside the current `gr.Tab`."""
    allowed = handler(ctx, *ROLES, "admin")
    concepts = load_concepts()
    with gr.Row():
        source = source_dropdown(ctx, session_token, "leaderboard_source")
        cfg = gr.Textbox(
            RECOMMENDED,
            label="Guidance scale ('recommended', 'mean' over scales, or a number)",
            elem_id="leaderboard_cfg",
        )
        aggregate = gr.Radio(
            [RATIO_OF_MEANS, MEAN_OF_RATIOS],
            value=RATIO_OF_MEANS,
            label="Sensitivity ratio",
            elem_id="leaderboard_aggregate",
        )
    with gr.Row():
        resamples = gr.Textbox(str(N_RESAMPLES), label="Bootstrap resamples", elem_id="leaderboard_resamples")
        seed = gr.Textbox(str(SEED), label="Bootstrap seed", elem_id="leaderboard_seed")
        colorings = gr.Textbox(
            "0",
            label="P_H replicates per concept from its colorings (designers; 0: resample concepts only)",
            elem_id="leaderboard_colorings",
        )
    with gr.Row():
        show = gr.Button("Compute", variant="primary", elem_id="leaderboard_show")
        export = gr.Button("Export every table (CSV) and figure (HTML)", elem_id="leaderboard_export")
    note = gr.Markdown(elem_id="leaderboard_note")
    gr.Markdown("### Table 1: probabilistic distribution alignment")
    table1 = gr.HTML(elem_id="leaderboard_table1")
    gr.Markdown("### Table 2: dominant color alignment")
    table2 = gr.HTML(elem_id="leaderboard_table2")
    intervals = gr.Markdown(elem_id="leaderboard_intervals")
    sweep = gr.Plot(label="Figure 5: EMD and PCC against guidance scale", elem_id="leaderboard_sweep")
    sensitivity = gr.Plot(
        label="Figure 4 (left): model shift ÷ human shift", elem_id="leaderboard_sensitivity"
    )
    scatter = gr.Plot(
        label="Figure 4 (right): per-concept shift, model against human", elem_id="leaderboard_scatter"
    )
    with gr.Row():
        table6, table7, table8 = (
            _table(label, f"leaderboard_table{n}")
            for n, label in (
                (6, "Table 6: sensitivity by style"),
                (7, "Table 7: by modifier type"),
                (8, "Table 8: type × style, mean over models"),
            )
        )
    files = gr.File(
        label="Exports", file_count="multiple", interactive=False, height=140, elem_id="leaderboard_files"
    )
    with gr.Accordion("Robustness of the paper's open choices", open=False):
        gr.Markdown(ROBUSTNESS_LEGEND)
        with gr.Row():
            sample = gr.Textbox(
                "", label="Base concepts to sample (empty: all)", elem_id="leaderboard_robust_sample"
            )
            sample_seed = gr.Textbox("0", label="Sample seed", elem_id="leaderboard_robust_seed")
            check = gr.Button("Check robustness", elem_id="leaderboard_robustness")
        robust_note = gr.Markdown(elem_id="leaderboard_robust_note")
        with empty_note("Nothing yet: press *Check robustness*.", "leaderboard_robust_table_empty"):
            robust_table = gr.Dataframe(interactive=False, elem_id="leaderboard_robust_table")
    with gr.Accordion("Designers' P_H stability per concept", open=False):
        stable_show = gr.Button("Show stability", elem_id="leaderboard_stability")
        stable_note = gr.Markdown(elem_id="leaderboard_stability_note")
        stable_histogram = gr.Plot(
            label="Concepts by P_H stability", elem_id="leaderboard_stability_histogram"
        )
        with empty_note("Nothing yet: press *Show stability*.", "leaderboard_stability_table_empty"):
            stable_table = gr.Dataframe(interactive=False, elem_id="leaderboard_stability_table")

    inputs = [session_token, source, cfg, aggregate, resamples, seed, colorings]
    shown = [note, table1, table2, sweep, sensitivity, scatter, table6, table7, table8, intervals]
    # The page answers at once with what is kept or the point estimates (`first_look`), then
    # brings the view up to date; `pending` says whether that second step has work.
    pending = gr.State(False)
    complete = allowed(_complete(ctx, concepts))
    for listener, opened in ((show.click, False), (tab.select, True)):
        # Opening the tab computes the same, and an empty study is a note, not a refusal.
        first = wire(
            listener, allowed(_first(ctx, concepts, opened=opened)), inputs, [*shown, pending], note=note
        )
        wire(first.then, complete, [*inputs, pending], [*shown, pending], note=note, clear_note=False)
    # API clients get the whole view in one call.
    gr.Button(visible=False, elem_id="api_leaderboard_show").click(
        allowed(_show(ctx, concepts)), inputs, shown, api_name="leaderboard_show"
    )
    wire(
        check.click,
        allowed(_robustness(ctx, concepts)),
        [session_token, source, sample, sample_seed],
        [robust_note, robust_table],
        note=robust_note,
        api_name="leaderboard_robustness",
    )
    wire(
        stable_show.click,
        allowed(_stability),
        session_token,
        [stable_note, stable_histogram, stable_table],
        note=stable_note,
        api_name="leaderboard_stability",
    )
    wire(
        export.click,
        allowed(_export(ctx, concepts)),
        inputs,
        files,
        note=note,
        clear_note=False,
        api_name="leaderboard_export",
    )


def _robustness(ctx: AppContext, concepts):
    def check(db, actor, source: str, sample: str, seed: str):
        """The leaderboard under each alternative: a summary and one row per (choice,
        alternative, metric) with the largest change, Kendall τ and swapped models."""
        choice = _source(db, source)
        report, text = robustness_report(
            db,
            ctx.config.data_dir,
            concepts,
            choice.source,
            sample=None if not str(sample).strip() else whole_number(sample, "Base concepts to sample"),
            seed=whole_number(seed, "Sample seed"),
        )
        return "\n\n".join(escape(t) for t in (choice.note, text) if t), report.round(4)

    return check


def _stability(db, actor):
    """Each concept's designers' P_H stability: summary, histogram and table."""
    view = stability_view(db)
    return escape(view.text), view.figure, view.table


def resampling(resamples, seed, colorings) -> Resampling:
    """The bootstrap settings typed into the tab (ValueError naming the field)."""
    return Resampling(
        n_resamples=whole_number(resamples, "Bootstrap resamples"),
        seed=whole_number(seed, "Bootstrap seed"),
        colorings=whole_number(colorings, "P_H replicates per concept"),
    )


def _source(db, source: str) -> SourceChoice:
    """The chosen human source, or the reference set covering the evaluated concepts when the
    designers' has none of them (`annotation.research.views.pick_source`)."""
    return pick_source(db, source or "", evaluated_concepts(db))


def _analyses(ctx: AppContext, concepts, db, source, cfg, aggregate, resamples, seed, colorings):
    settings = resampling(resamples, seed, colorings)
    # The app's cache, kept fresh by its refresher (`AppContext.start`).
    return leaderboard_analyses(
        db,
        concepts,
        source,
        cfg=cfg or RECOMMENDED,
        aggregate=aggregate,
        resampling=settings,
        cache=ctx.leaderboards,
    )


def _show(ctx: AppContext, concepts):
    def show(db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str):
        """Tables 1, 2, 6-8 and Figures 4 and 5 against the human `source`, with
        bootstrap intervals and the significance of each ranking (10th output)."""
        choice = _source(db, source)
        result = _analyses(ctx, concepts, db, choice.source, cfg, aggregate, resamples, seed, colorings)
        return _view(db, choice, result, "current")

    return show


def _first(ctx: AppContext, concepts, *, opened: bool = False):
    def first_look(
        db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ):
        """The view at once: the kept result (even from before the latest change), or else
        the point estimates without intervals; the 11th output says whether `complete` has
        work left (`annotation.research.views.LeaderboardCache.first_look`)."""
        choice, settings = _source(db, source), resampling(resamples, seed, colorings)
        try:
            result, state = ctx.leaderboards.first_look(
                db, concepts, choice.source, cfg=cfg or RECOMMENDED, aggregate=aggregate, resampling=settings
            )
        except NothingScored as error:
            if not opened:
                raise
            note = f"{escape(str(error))}  \n{escape(human.describe(db, choice.source))}"
            return note, *(gr.skip(),) * 9, False
        return *_view(db, choice, result, state, settings), state != "current"

    return first_look


def _complete(ctx: AppContext, concepts):
    def complete(
        db,
        actor,
        source: str,
        cfg: str,
        aggregate: str,
        resamples: str,
        seed: str,
        colorings: str,
        pending: bool,
    ):
        """After `first_look`: the view brought up to date, when it was not already."""
        if not pending:
            return *(gr.skip(),) * 10, False
        choice = _source(db, source)
        result = _analyses(ctx, concepts, db, choice.source, cfg, aggregate, resamples, seed, colorings)
        return *_view(db, choice, result, "current"), False

    return complete


#: What the intervals panel says while `complete` draws them.
DRAWING = "Being drawn: {how} The tables gain their intervals in a moment."
#: The line the note gains when the kept result predates the latest change.
EARLIER = "Shown as computed before the latest change to a distribution: being brought up to date."


def _view(db, choice: SourceChoice, result, state: str, asked: Resampling | None = None) -> tuple:
    """The 10 outputs of the view of `result` (`first_look`'s `state`); `asked`: the
    intervals being drawn when `result` has none yet."""
    figs = analysis_figures(result)
    if result.shifts.empty:
        for name in ("sensitivity", "shift_scatter"):
            figs[name] = _noted(figs[name], NO_SHIFTS)
    scales = ", ".join(f"{escape(m)} at {v:g}" for m, v in result.cfg.items())
    pooled = "Tables 1-2: each concept averaged over its scales; shifts: " if result.pooled else ""
    earlier = EARLIER if state == "earlier" else ""
    note = (
        "  \n".join(
            escape(line) for line in (earlier, choice.note, human.describe(db, choice.source)) if line
        )
        + f"  \n{pooled}Guidance scale per model: {scales}."
    )
    if result.resampling is None:
        tables = (_point_table(t) for t in (result.table6, result.table7, result.table8))
        intervals = DRAWING.format(how=escape(asked.describe())) if asked is not None else ""
    else:
        tables = (
            _shown(*args)
            for args in (
                (result.table6_ci, "model", "style"),
                (result.table7_ci, "model", "modifier_type"),
                (result.table8_ci, "modifier_type", "style"),
            )
        )
        intervals = f"{escape(result.resampling.describe())}\n\n{escape(significance_note(result.ranking))}"
    return (
        note,
        LEGEND + result.table1.to_html(),
        LEGEND + result.table2.to_html(),
        figs["cfg_sweep"],
        figs["sensitivity"],
        figs["shift_scatter"],
        *tables,
        intervals,
    )


def _point_table(table):
    """A sensitivity table of point estimates (Tables 6-8 before their intervals are drawn)."""
    if table.empty:
        return table
    return table.round(3).reset_index().rename_axis(columns=None)


def _noted(figure, text: str):
    """`figure` with `text` written across its empty plot area (what would fill it)."""
    wrapped = "<br>".join(textwrap.wrap(text, 90))
    return figure.add_annotation(
        text=wrapped,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 13},
        bgcolor="rgba(255, 255, 255, 0.9)",
    )


def _table(label: str, elem_id: str) -> gr.Dataframe:
    with empty_note(NO_SHIFTS, f"{elem_id}_empty"):
        return gr.Dataframe(label=label, interactive=False, elem_id=elem_id)


def _shown(long, index: str, columns: str):
    """A sensitivity table with each cell ``value [lo, hi]``."""
    if long.empty:
        return long
    return interval_table(long, index, columns).reset_index().rename_axis(columns=None)


def _export(ctx: AppContext, concepts):
    def export(
        db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ) -> list[str]:
        """Every table as CSV and every figure as HTML, under the data folder's exports/."""
        choice = _source(db, source)
        result = _analyses(ctx, concepts, db, choice.source, cfg, aggregate, resamples, seed, colorings)
        paths = export_analyses(
            result, analysis_figures(result), ctx.config.data_dir / "exports" / "research"
        )
        return [str(p) for p in paths]

    return export
