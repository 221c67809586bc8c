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

import gradio as gr
import numpy as np

from annotation.coloring.stability import stability_view
from annotation.research.views import (
    NothingScored,
    SourceChoice,
    evaluated_concepts,
    lacking_note,
    leaderboard_analyses,
    pick_source,
    robustness_report,
    thin_note,
)
from app.browser import source_dropdown
from app.common import (
    AppContext,
    api_button,
    empty_note,
    escape,
    live,
    named_table,
    role,
    seed_number,
    whole_number,
)
from app.guard import exports_folder
from app.tabs import On, Tab
from evaluation.analysis.bootstrap import (
    MAX_COLORINGS,
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    N_RESAMPLES,
    SEED,
    Resampling,
)
from evaluation.analysis.results import NO_SHIFTS, RECOMMENDED, analysis_figures, export_analyses, pooled_cfg
from evaluation.analysis.robustness import CHOICES
from evaluation.analysis.robustness import label as robustness_label
from evaluation.analysis.tables import (
    MEAN_OF_RATIOS,
    MODIFIER_LABELS,
    NOT_DEFINED,
    POOL_CFG,
    RATIO_OF_MEANS,
    STYLE_LABELS,
    TABLE1_TITLE,
    TABLE2_TITLE,
)
from evaluation.analysis.uncertainty import interval_table, significance_note
from evaluation.concepts import load_concepts
from storage import human
from storage.shown import counted, shown

NAME = "leaderboard"
TITLE = "Leaderboards"
ROLES = ("researcher",)
TABLE1, TABLE2 = TABLE1_TITLE, TABLE2_TITLE
LEGEND = (
    "<p>Bold: best in the column; underlined: second best. ↑ higher is better, ↓ lower is better. "
    "EMD is in ΔE*ab (CIELAB distance), ED in nats, ΔHue in degrees (0 to 180); PCC is Pearson's r "
    "and DCA a share of concepts (0 to 1). "
    f"{NOT_DEFINED}: no value, either because the model has no distribution in that style "
    "(n = 0) or, under ΔHue alone, because every dominant color is grey. "
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
    LeaderboardTab(ctx, {"session_token": session_token, "tab": tab, **_layout(ctx, session_token)}).wire()


SETTINGS = ("session_token", "source", "cfg", "aggregate", "resamples", "seed", "colorings")
"""What every analysis reads: the caller, the human source and the settings typed in."""
VIEW = (
    "note",
    "table1",
    "table2",
    "sweep",
    "sensitivity",
    "scatter",
    "table6",
    "table7",
    "table8",
    "intervals",
)
"""The parts every view updates (`LeaderboardTab.show`), in the order API clients receive them."""
STEP = (*VIEW, "pending")
"""A page step's outputs: the view and whether the second step has work (`first_look`)."""

EVENTS = (
    # The page answers at once with what is kept or the point estimates (`first_look`), then
    # brings the view up to date; `pending` says whether that second step has work.
    On("show.click", "first_look", SETTINGS, STEP, "note"),
    On("then", "complete", (*SETTINGS, "pending"), STEP, "note", clear_note=False),
    # Opening the tab computes the same, and an empty study is a note, not a refusal.
    On("tab.select", "first_look_on_open", SETTINGS, STEP, "note"),
    On("then", "complete", (*SETTINGS, "pending"), STEP, "note", clear_note=False),
    On(
        "check.click",
        "robustness",
        ("session_token", "source", "sample", "sample_seed"),
        ("robust_note", "robust_table"),
        "robust_note",
        "leaderboard_robustness",
    ),
    On(
        "stable_show.click",
        "stability",
        ("session_token",),
        ("stable_note", "stable_histogram", "stable_table"),
        "stable_note",
        "leaderboard_stability",
    ),
    On("export.click", "export", SETTINGS, ("files",), "note", "leaderboard_export", clear_note=False),
)
"""The tab's wiring, in the order Gradio registers it (`LeaderboardTab.wire`)."""


class LeaderboardTab(Tab):
    """The Leaderboards tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and ``tab``.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, parts: dict) -> None:
        super().__init__(ctx, parts)
        self.concepts = load_concepts()

    def wire(self) -> None:
        """Register `EVENTS` with Gradio, then ``leaderboard_show``: API clients get the
        whole view in one call (an endpoint of its own, not a twin of a page event)."""
        super().wire()
        api_button("leaderboard_show").click(
            self.compute,
            [self.parts[name] for name in SETTINGS],
            [self.parts[name] for name in VIEW],
            api_name="leaderboard_show",
        )

    def show(
        self, db, choice: SourceChoice, result, state: str, asked: Resampling | None = None, *, colorings: int
    ) -> dict:
        """The view of `result` (`first_look`'s `state`); `asked`: the intervals being drawn
        when `result` has none yet; `colorings`: the P_H replicates per concept asked for."""
        figs = analysis_figures(result)  # Figure 4 says why it is empty (NO_SHIFTS)
        scales = ", ".join(f"{escape(m)} at {v:g}" for m, v in result.cfg.items())
        scales = (
            "Tables 1-2: each concept averaged over its guidance scales; the shifts (Tables 6-8, Figure 4) "
            f"at the recommended guidance scale per model: {scales}."
            if result.pooled
            else f"Guidance scale per model: {scales}."
        )
        earlier = EARLIER if state == "earlier" else ""
        evaluated = evaluated_concepts(db)
        unused = _unused_replicates(choice.source, result, colorings)
        note = (
            "  \n".join(
                escape(line)
                for line in (
                    earlier,
                    choice.note,
                    human.describe(db, choice.source),
                    lacking_note(db, choice.source, evaluated),
                    thin_note(db, choice.source, evaluated),
                    unused,
                )
                if line
            )
            + f"  \n{scales}"
        )
        # Each table says its scales itself: a refused change of settings replaces the note
        # (where the refusal shows) and leaves the tables as they were.
        legend = f"{LEGEND}<p>{scales}</p>"
        if result.resampling is None:
            tables = [_point_table(t) for t in (result.table6, result.table7, result.table8)]
            intervals = _drawing(result, asked, choice.source) if asked is not None else ""
        else:
            tables = [
                _shown(*args)
                for args in (
                    (result.table6_ci, "model", "style"),
                    (result.table7_ci, "model", "modifier_type"),
                    (result.table8_ci, "modifier_type", "style"),
                )
            ]
            intervals = (
                f"{escape(result.resampling.describe())}\n\n{escape(significance_note(result.ranking))}"
            )
        return self.named(
            note=note,
            table1=legend + _uneven(result.table1) + result.table1.to_html(label=TABLE1),
            table2=legend + _uneven(result.table2) + result.table2.to_html(label=TABLE2),
            sweep=figs["cfg_sweep"],
            sensitivity=figs["sensitivity"],
            scatter=figs["shift_scatter"],
            table6=tables[0],
            table7=tables[1],
            table8=tables[2],
            intervals=intervals,
        )

    @role(*ROLES, "admin")
    def compute(
        self, db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ) -> dict:
        """Tables 1, 2, 6-8 and Figures 4 and 5 against the human `source`, with
        bootstrap intervals and the significance of each ranking (10th output)."""
        choice, settings, result = self._analyses(db, source, cfg, aggregate, resamples, seed, colorings)
        return self.show(db, choice, result, "current", colorings=settings.colorings)

    @role(*ROLES, "admin")
    def first_look(
        self, db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ) -> dict:
        """The view at once: the kept result (even from before the latest change), or else
        the point estimates without intervals; `pending` says whether `complete` has work
        left (`annotation.research.views.LeaderboardCache.first_look`)."""
        return self._first(db, source, cfg, aggregate, resamples, seed, colorings)

    @role(*ROLES, "admin")
    def first_look_on_open(
        self, db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ) -> dict:
        """`first_look` as the tab opens, where an empty study is a note, not a refusal."""
        try:
            return self._first(db, source, cfg, aggregate, resamples, seed, colorings)
        except NothingScored as error:
            choice = _source(db, source)
            note = f"{escape(str(error))}  \n{escape(human.describe(db, choice.source))}"
            return {self.parts["note"]: note, self.parts["pending"]: False}

    @role(*ROLES, "admin")
    def complete(
        self,
        db,
        actor,
        source: str,
        cfg: str,
        aggregate: str,
        resamples: str,
        seed: str,
        colorings: str,
        pending: bool,
    ) -> dict:
        """After `first_look`: the view brought up to date, when it was not already."""
        if not pending:
            return {self.parts["pending"]: False}
        choice, settings, result = self._analyses(db, source, cfg, aggregate, resamples, seed, colorings)
        return {
            **self.show(db, choice, result, "current", colorings=settings.colorings),
            self.parts["pending"]: False,
        }

    @role(*ROLES, "admin")
    def robustness(self, db, actor, source: str, sample: str, seed: str) -> dict:
        """The leaderboard under each alternative: a summary and one row per (choice,
        alternative, metric) with the largest change, Kendall τ and swapped models."""
        choice = _source(db, source)
        report, text = robustness_report(
            db,
            self.ctx.config.data_dir,
            self.concepts,
            choice.source,
            sample=None
            if not str(sample).strip()
            else whole_number(sample, "Base concepts to sample", minimum=1),
            seed=seed_number(seed, "Sample seed"),
        )
        return self.named(
            robust_note="\n\n".join(escape(t) for t in (choice.note, text) if t),
            robust_table=report.assign(metric=report["metric"].map(robustness_label)).round(4),
        )

    @role(*ROLES, "admin")
    def stability(self, db, actor) -> dict:
        """Each concept's designers' P_H stability: summary, histogram and table."""
        view = stability_view(db)
        return self.named(
            stable_note=escape(view.text),
            stable_histogram=gr.Plot(view.figure, visible=view.figure is not None),
            stable_table=view.table,
        )

    @role(*ROLES, "admin")
    def export(
        self, db, actor, source: str, cfg: str, aggregate: str, resamples: str, seed: str, colorings: str
    ) -> dict:
        """Every table as CSV and every figure as HTML, under the data folder's exports/."""
        choice, _, result = self._analyses(db, source, cfg, aggregate, resamples, seed, colorings)
        paths = export_analyses(
            result,
            analysis_figures(result),
            exports_folder(self.ctx.config.data_dir, "research"),
            source=choice.source,
        )
        return self.named(files=[str(p) for p in paths])

    def _first(self, db, source, cfg, aggregate, resamples, seed, colorings) -> dict:
        _check_cfg(cfg)
        choice, settings = _source(db, source), resampling(resamples, seed, colorings)
        result, state = self.ctx.leaderboards.first_look(
            db, self.concepts, choice.source, cfg=cfg or RECOMMENDED, aggregate=aggregate, resampling=settings
        )
        shown = self.show(db, choice, result, state, settings, colorings=settings.colorings)
        return {**shown, self.parts["pending"]: state != "current"}

    def _analyses(self, db, source, cfg, aggregate, resamples, seed, colorings) -> tuple:
        """The chosen human source (`_source`), the whole analyses against it and the
        resampling asked for."""
        _check_cfg(cfg)
        choice, settings = _source(db, source), resampling(resamples, seed, colorings)
        # The app's cache, kept fresh by its refresher (`AppContext.start`).
        return (
            choice,
            settings,
            leaderboard_analyses(
                db,
                self.concepts,
                choice.source,
                cfg=cfg or RECOMMENDED,
                aggregate=aggregate,
                resampling=settings,
                cache=self.ctx.leaderboards,
            ),
        )


def _layout(ctx: AppContext, session_token: gr.Textbox) -> dict:
    """The tab's components, by the names `EVENTS` and `LeaderboardTab.show` use."""
    parts: dict = {}
    with gr.Row():
        parts["source"] = source_dropdown(ctx, session_token, "leaderboard_source")
        parts["cfg"] = gr.Textbox(
            RECOMMENDED,
            label="Guidance scale ('recommended', 'mean' over scales, or a number)",
            elem_id="leaderboard_cfg",
        )
        parts["aggregate"] = gr.Radio(
            [RATIO_OF_MEANS, MEAN_OF_RATIOS],
            value=RATIO_OF_MEANS,
            label="Sensitivity ratio",
            elem_id="leaderboard_aggregate",
        )
    with gr.Row():
        parts["resamples"] = gr.Textbox(
            str(N_RESAMPLES), label="Bootstrap resamples", elem_id="leaderboard_resamples"
        )
        parts["seed"] = gr.Textbox(str(SEED), label="Bootstrap seed", elem_id="leaderboard_seed")
        parts["colorings"] = gr.Textbox(
            "0",
            label="P_H replicates per concept from its colorings (designers; 0: resample concepts only)",
            elem_id="leaderboard_colorings",
        )
    with gr.Row():
        parts["show"] = gr.Button("Compute", variant="primary", elem_id="leaderboard_show")
        parts["export"] = gr.Button(
            "Export every table (CSV) and figure (HTML)", elem_id="leaderboard_export"
        )
    parts["note"] = live(gr.Markdown(elem_id="leaderboard_note"))
    gr.Markdown(f"### {TABLE1}")
    parts["table1"] = gr.HTML(elem_id="leaderboard_table1")
    gr.Markdown(f"### {TABLE2}")
    parts["table2"] = gr.HTML(elem_id="leaderboard_table2")
    parts["intervals"] = gr.Markdown(elem_id="leaderboard_intervals")
    parts["sweep"] = gr.Plot(
        label="Figure 5: EMD and PCC against guidance scale", elem_id="leaderboard_sweep"
    )
    parts["sensitivity"] = gr.Plot(
        label="Figure 4 (left): model shift ÷ human shift", elem_id="leaderboard_sensitivity"
    )
    parts["scatter"] = gr.Plot(
        label="Figure 4 (right): per-concept shift, model against human", elem_id="leaderboard_scatter"
    )
    # One above another: side by side, their interval cells were cut at a 1,400 px window.
    for n, label in (
        (6, "Table 6: sensitivity by style"),
        (7, "Table 7: by modifier type"),
        (8, "Table 8: type × style, mean over models"),
    ):
        parts[f"table{n}"] = _table(label, f"leaderboard_table{n}")
    parts["files"] = gr.File(
        label="Exports", file_count="multiple", interactive=False, height=140, elem_id="leaderboard_files"
    )
    with gr.Accordion("Robustness of the paper's open choices", open=False):
        gr.Markdown(ROBUSTNESS_LEGEND)
        with gr.Row():
            parts["sample"] = gr.Textbox(
                "", label="Base concepts to sample (empty: all)", elem_id="leaderboard_robust_sample"
            )
            parts["sample_seed"] = gr.Textbox("0", label="Sample seed", elem_id="leaderboard_robust_seed")
            parts["check"] = gr.Button("Check robustness", elem_id="leaderboard_robustness")
        parts["robust_note"] = live(gr.Markdown(elem_id="leaderboard_robust_note"))
        with empty_note("Nothing yet: press *Check robustness*.", "leaderboard_robust_table_empty"):
            parts["robust_table"] = named_table(
                "Robustness of the paper's open choices", "leaderboard_robust_table"
            )
    with gr.Accordion("Designers' P_H stability per concept", open=False):
        parts["stable_show"] = gr.Button("Show stability", elem_id="leaderboard_stability")
        parts["stable_note"] = live(gr.Markdown(elem_id="leaderboard_stability_note"))
        parts["stable_histogram"] = gr.Plot(
            label="Concepts by P_H stability", elem_id="leaderboard_stability_histogram"
        )
        with empty_note(
            "No concept listed: *Show stability* lists those with counted designer colorings.",
            "leaderboard_stability_table_empty",
        ):
            parts["stable_table"] = named_table(
                "Designers' P_H stability per concept", "leaderboard_stability_table"
            )
    parts["pending"] = gr.State(False)
    return parts


def _uneven(table) -> str:
    """`evaluation.analysis.tables.Leaderboard.uneven_note` as a paragraph above the table."""
    said = table.uneven_note()
    return f'<p class="leaderboard-uneven"><b>Different concept sets.</b> {escape(said)}</p>' if said else ""


def resampling(resamples, seed, colorings) -> Resampling:
    """The bootstrap settings typed into the tab (ValueError naming the field)."""
    return Resampling(
        n_resamples=whole_number(
            resamples, "Bootstrap resamples", minimum=MIN_RESAMPLES, maximum=MAX_RESAMPLES
        ),
        seed=seed_number(seed, "Bootstrap seed"),
        colorings=whole_number(colorings, "P_H replicates per concept", minimum=0, maximum=MAX_COLORINGS),
    )


def _check_cfg(cfg: str) -> None:
    """Refuse a guidance scale the tables cannot take, by the field's label (ValueError)."""
    try:
        pooled_cfg(cfg or RECOMMENDED)
    except ValueError:
        raise ValueError(
            f"`Guidance scale` must be {RECOMMENDED!r}, {POOL_CFG!r} (each concept averaged over "
            f"its scales) or a number of 0 or more, got {shown(cfg)}"
        ) from None


def _source(db, source: str) -> SourceChoice:
    """The chosen human source, or the reference set covering the evaluated concepts when the
    designers' has none of them (`annotation.research.views.pick_source`)."""
    return pick_source(db, source or "", evaluated_concepts(db))


#: What the intervals panel says while `complete` draws them.
DRAWING = "Being drawn: {how} The tables gain their intervals when they are."


def _drawing(result, asked: Resampling, source: str) -> str:
    """`DRAWING` for the point estimates `result` (without intervals) and the intervals
    `asked`, with their cost when P_H replicates rescore Tables 1-2: at the full study's
    size 20 of them took 85 s with nothing on the page saying why (outside probe 212)."""
    line = DRAWING.format(how=escape(asked.describe()))
    if asked.colorings and source == human.DESIGNERS and not result.pooled:
        frame = result.metrics
        rescored = int(
            np.isclose(frame["cfg"].astype(float), frame["model"].map(result.cfg).astype(float)).sum()
        )
        line += (
            f" Its {counted(asked.colorings, 'P_H replicate')} per concept rescore Tables 1–2 against "
            f"each: {asked.colorings * rescored:,} EMD solves for {counted(rescored, 'model distribution')}."
        )
    return line


def _unused_replicates(source: str, result, colorings: int) -> str:
    """Why the `colorings` P_H replicates per concept asked for are not drawn, or ``""``:
    against a reference set they were accepted and silently did nothing (outside probe 231)."""
    if not colorings:
        return ""
    asked = f"P_H replicates per concept: none drawn ({colorings} asked):"
    if source != human.DESIGNERS:
        return f"{asked} {source!r} is a reference set, with no colorings to resample."
    if result.pooled:
        return f"{asked} they rescore Tables 1-2 at one guidance scale per model, not averaged over scales."
    return ""


#: The line the note gains when the kept result predates the latest change.
EARLIER = "Shown as computed before the latest change to a distribution: being brought up to date."


SENSITIVITY_HEADERS = {
    "model": "Model",
    "modifier_type": "Modifier type",
    "average": "Average",
    **STYLE_LABELS,
    **MODIFIER_LABELS,
}
"""Tables 6-8's headers as shown, in Tables 1-2's words (their exports keep the keys)."""


def _labelled(table):
    """Tables 6-8 as shown: headers, and Table 8's modifier types, in words."""
    if "modifier_type" in table:
        table = table.assign(modifier_type=table["modifier_type"].map(MODIFIER_LABELS))
    return table.rename(columns=SENSITIVITY_HEADERS)


def _point_table(table):
    """A sensitivity table of point estimates (Tables 6-8 before their intervals are drawn)."""
    if table.empty:
        return table
    return _labelled(table.round(3).reset_index().rename_axis(columns=None))


def _table(label: str, elem_id: str) -> gr.Dataframe:
    with empty_note(NO_SHIFTS, f"{elem_id}_empty"):
        return gr.Dataframe(label=label, interactive=False, elem_id=elem_id)


def _shown(long, index: str, columns: str):
    """A sensitivity table with each cell ``value [lo, hi]``."""
    if long.empty:
        return long
    return _labelled(interval_table(long, index, columns).reset_index().rename_axis(columns=None))
