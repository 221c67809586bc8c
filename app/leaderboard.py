"""Leaderboards and analyses: Tables 1, 2 and 6-8, Figures 4 and 5, all exportable.

Every stored model distribution is scored against the chosen human source. Tables 1
and 2 mark the best value of each column in bold and the second underlined; tables are
exported as CSV and figures as standalone HTML (`evaluation.analysis.results.export_analyses`).
"""

from __future__ import annotations

import gradio as gr

from annotation.research.views import NothingScored, leaderboard_analyses
from app.browser import source_dropdown
from app.common import AppContext, empty_note, escape, handler, wire
from evaluation.analysis.results import RECOMMENDED, analysis_figures, export_analyses
from evaluation.analysis.tables import MEAN_OF_RATIOS, NOT_DEFINED, RATIO_OF_MEANS
from evaluation.concepts import load_concepts
from storage import human

NAME = "leaderboard"
TITLE = "Leaderboards"
ROLES = ("researcher",)
NOTHING_YET = (
    "No model distribution is scored yet, so there is nothing to rank. Run a model on the "
    "Evaluate tab (or import a run); its scores show here when its extraction ends."
)
LEGEND = (
    "<p>Bold: best in the column; underlined: second best. ↑ higher is better, ↓ lower is better. "
    f"{NOT_DEFINED}: ΔHue is undefined when every dominant color is grey.</p>"
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
        show = gr.Button("Compute", variant="primary", elem_id="leaderboard_show")
        export = gr.Button("Export every table (CSV) and figure (HTML)", elem_id="leaderboard_export")
    note = gr.Markdown(elem_id="leaderboard_note")
    gr.Markdown("### Table 1: probabilistic distribution alignment")
    table1 = gr.HTML(elem_id="leaderboard_table1")
    gr.Markdown("### Table 2: dominant color alignment")
    table2 = gr.HTML(elem_id="leaderboard_table2")
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

    inputs = [session_token, source, cfg, aggregate]
    shown = [note, table1, table2, sweep, sensitivity, scatter, table6, table7, table8]
    wire(show.click, allowed(_show(ctx, concepts)), inputs, shown, note=note, api_name="leaderboard_show")
    # Opening the tab computes the same, and an empty study is a note, not a refusal.
    wire(tab.select, allowed(_show(ctx, concepts, opened=True)), inputs, shown, note=note)
    wire(
        export.click,
        allowed(_export(ctx, concepts)),
        inputs,
        files,
        note=note,
        clear_note=False,
        api_name="leaderboard_export",
    )


def _analyses(ctx: AppContext, concepts, db, source: str, cfg: str, aggregate: str):
    return leaderboard_analyses(db, concepts, source or "", cfg=cfg or RECOMMENDED, aggregate=aggregate)


def _show(ctx: AppContext, concepts, *, opened: bool = False):
    def show(db, actor, source: str, cfg: str, aggregate: str):
        """Tables 1, 2, 6-8 and Figures 4 and 5 against the human `source`."""
        try:
            result = _analyses(ctx, concepts, db, source, cfg, aggregate)
        except NothingScored:
            if not opened:
                raise
            return f"{NOTHING_YET}  \n{escape(human.describe(db, source))}", *(gr.skip(),) * 8
        figs = analysis_figures(result)
        scales = ", ".join(f"{escape(m)} at {v:g}" for m, v in result.cfg.items())
        pooled = "Tables 1-2: each concept averaged over its scales; shifts: " if result.pooled else ""
        note = f"{escape(human.describe(db, source))}  \n{pooled}Guidance scale per model: {scales}."
        tables = (_shown(t) for t in (result.table6, result.table7, result.table8))
        return (
            note,
            LEGEND + result.table1.to_html(),
            LEGEND + result.table2.to_html(),
            figs["cfg_sweep"],
            figs["sensitivity"],
            figs["shift_scatter"],
            *tables,
        )

    return show


def _table(label: str, elem_id: str) -> gr.Dataframe:
    with empty_note("Nothing to show yet.", f"{elem_id}_empty"):
        return gr.Dataframe(label=label, interactive=False, elem_id=elem_id)


def _shown(table):
    return table.round(3).reset_index()


def _export(ctx: AppContext, concepts):
    def export(db, actor, source: str, cfg: str, aggregate: str) -> list[str]:
        """Every table as CSV and every figure as HTML, under the data folder's exports/."""
        result = _analyses(ctx, concepts, db, source, cfg, aggregate)
        paths = export_analyses(
            result, analysis_figures(result), ctx.config.data_dir / "exports" / "research"
        )
        return [str(p) for p in paths]

    return export
