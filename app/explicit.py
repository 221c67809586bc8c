"""Explicit colors: the GenColorBench views of an explicit-color run (issue 17).

A researcher chooses an explicit run (started on the Evaluate tab, or by ``python -m
evaluation explicit``) and a rule set, and sees the paper's Table 4 (accuracy per color
system and task, per model), accuracy per object category (Figure 2), basic vs intermediate
colors and the light / dark / ish modifiers (Figure 5), each model's top-10 dominant colors
per category (Figure 3) and the "asked for X, got Y" confusion; below, the per-prompt browser
shows each image with its objects' masks, the dominant color's swatch beside the target and
its candidates (each named: ISCC-NBS level 3 name and basic term), each metric and its
verdict. Every table and figure exports as CSV and HTML under the data folder's
``exports/explicit/``. The data come from `evaluation.explicit.views`.

The tab is an `ExplicitTab` (the shape of `app.tabs`): its handlers are methods that name
who may call them (`app.common.role`) and return ``{part: update}``; the report's view is
built by `ExplicitTab.show`, which names each part; `EVENTS` is the tab's wiring.
"""

from __future__ import annotations

import gradio as gr

from app.common import (
    AppContext,
    empty_note,
    escape,
    live,
    named_table,
    note_area,
    own_session,
    role,
    visible_to,
)
from app.guard import exports_folder
from app.landing import current_actor
from app.tabs import SESSION_CHANGE, On, Tab, wire_events
from evaluation.color.systems import SYSTEMS
from evaluation.explicit import views
from evaluation.explicit.rules import DEFAULT_SCORING, DESCRIPTIONS, SCORINGS
from evaluation.pipeline import runs

NAME = "explicit"
TITLE = "Explicit colors"
ROLES = ("researcher",)
EMPTY_RUNS = (
    "No explicit-color run yet: start one on the **Evaluate** tab (mode *Explicit colors*) or "
    "with `python -m evaluation explicit`; its tables fill here as its images are scored."
)
NOTHING_SCORED = (
    "Run **{run}** has no scored image yet under the {scoring} rules: the tables fill as its "
    "job generates and scores images (progress on the Evaluate tab). Images whose object is "
    "absent or unmasked are counted below, and count as wrong in the accuracy (as the paper's)."
)
ALL_FAILED = (
    "Run **{run}** has no scored image: all {n} of its images failed ({failure}). Fix the cause, "
    "then resume the run on the Evaluate tab: failed images are tried again."
)
GROUPS_HELP = {
    "basic": "Basic vs intermediate colors needs color_name prompts in ISCC-NBS L2.",
    "modifier": "Light / dark / ish needs color_name prompts in ISCC-NBS L3.",
}
CSS = """
.explicit-swatches { display: flex; flex-wrap: wrap; gap: 6px; align-items: flex-start; }
.explicit-swatch { width: 118px; font-size: 0.8em; line-height: 1.2; }
.explicit-swatch span { display: block; height: 40px; border: 1px solid #8888; border-radius: 4px; }
.explicit-swatch.dominant span { height: 64px; }
.explicit-object { margin: 0.4em 0 0.8em; }
"""


CONFUSION_NOTE = (
    "*Got*: the color of the target's own system nearest (CIEDE2000) to the object's dominant "
    "color. The words in brackets name that system color, not the color measured: the per-prompt "
    "browser below shows the measured one. A pair on the diagonal is not a correct verdict: a "
    "verdict also needs the rules' distance, chroma and hue tests (Table 4 counts those)."
)
"""What the confusion heatmap and its list count (an outside probe read "got brilliant green" as
the color measured, and the diagonal as correct verdicts: probe 144)."""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab | None = None) -> None:
    """Lay out and wire the Explicit colors tab inside the current `gr.Tab` (`tab`, when
    given, lists the runs again each time it is opened)."""
    parts = {"session_token": session_token, **_layout()}
    if tab is not None:
        parts["tab"] = tab
    ExplicitTab(ctx, parts).wire()


REPORT = (
    "table4",
    "coverage",
    "category",
    "basic",
    "modifier",
    "groups_note",
    "bias_model",
    "bias",
    "confusion",
    "pairs",
)
"""The report's tables and figures (`ExplicitTab.show`), in the order API clients receive them."""
VIEW = ("note", *REPORT, "prompt")
"""What *Show* updates: the note above the report, the report and the prompt picker."""
BROWSER = ("prompt_note", "gallery", "swatches", "metrics")
"""The per-prompt browser (`ExplicitTab.prompt`), in the order API clients receive it."""
_TOKEN = ("session_token",)
_REPORT_INPUTS = (*_TOKEN, "run", "scoring", "system")
_PROMPT_INPUTS = (*_TOKEN, "run", "scoring", "prompt")
_CLEARED = ("table4", "coverage", "category", "bias")
"""The report's tables and figures that `ExplicitTab.show` empties and hides when not named;
the other figures and the pairs it only hides, their values left as they are (what API clients
have always received)."""
_HIDDEN = ("basic", "modifier", "confusion", "pairs")
EVENTS = (
    On("show.click", "report", _REPORT_INPUTS, VIEW, "note", "explicit_show"),
    On(
        "bias_model.input",
        "bias",
        (*_TOKEN, "run", "scoring", "bias_model"),
        ("bias",),
        "note",
        "explicit_bias",
    ),
    On("export.click", "export", _REPORT_INPUTS, ("files",), "note", "explicit_export", clear_note=False),
    On(
        "robust.click",
        "robustness",
        (*_TOKEN, "run"),
        ("robust_note", "robust_table"),
        "robust_note",
        "explicit_robustness",
    ),
    # The button (and API) shows a prompt; so does choosing one in the picker.
    On("open_prompt.click", "prompt", _PROMPT_INPUTS, BROWSER, "prompt_note", "explicit_prompt"),
    On("prompt.input", "prompt", _PROMPT_INPUTS, BROWSER, "prompt_note"),
    On(SESSION_CHANGE, "on_sign_in", _TOKEN, ("run", "note")),
    # Runs started after sign-in: listed again when the picker (or, given, the tab) is opened.
    On("run.focus", "runs", (*_TOKEN, "run"), ("run",)),
    On("tab.select", "runs", (*_TOKEN, "run"), ("run",)),
)
"""The tab's wiring, in the order Gradio registers it (`ExplicitTab.wire`)."""


class ExplicitTab(Tab):
    """The Explicit colors tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and, when the tab
    is given, ``tab``.
    """

    EVENTS = EVENTS

    def wire(self) -> None:
        """Register `EVENTS` with Gradio (inside the Blocks that hold the parts); without a
        ``tab`` part, its row (the runs listed again when the tab is opened) is left out."""
        opened = "tab" in self.parts
        wire_events(self, tuple(on for on in self.EVENTS if opened or on.trigger != "tab.select"))

    def show(self, note: str, *, prompts: list | None = None, **report) -> dict:
        """A view: the note, every part of `REPORT` and the prompt picker, hidden or empty
        unless named.

        Parameters
        ----------
        note : str
            The note above the report (Markdown).
        prompts : list or None
            The prompt picker's choices, (label, id) pairs; the first is chosen.
        **report
            Updates of parts of `REPORT` by name; a table or figure left out is hidden
            (emptied too if in `_CLEARED`), the groups note empty and the bias model picker
            without choices.
        """
        prompts = prompts or []
        updates = {
            **{name: _shown(None, False) for name in _CLEARED},
            **{name: gr.update(visible=False) for name in _HIDDEN},
            "groups_note": "",
            "bias_model": gr.Dropdown(choices=[], value=None),
            **report,
        }
        view = {self.parts["note"]: note}
        view.update((self.parts[name], updates[name]) for name in REPORT)
        view[self.parts["prompt"]] = gr.Dropdown(choices=prompts, value=prompts[0][1] if prompts else None)
        return view

    @role(*ROLES, "admin")
    def report(self, db, actor, run: str, scoring: str, system: str) -> dict:
        """Table 4, coverage, Figures 2, 5 and 3, the confusion and the run's prompt list; of a
        run not complete, first what they cover (`evaluation.explicit.standing.RunStanding.note`)."""
        report = self._report(db, run, scoring, system)
        found, figs = report.tables, report.figures
        prompts = views.prompt_choices(db, report)
        coverage = found["coverage"]
        unfinished = "" if report.complete else f"⚠️ {escape(report.standing.note())}  \n"
        if "table4" not in found:
            done = runs.run_progress(db, report.run)
            note = (
                ALL_FAILED.format(run=escape(report.run), n=done.items, failure=escape(done.failure))
                if done.items and done.failed == done.items
                else unfinished + NOTHING_SCORED.format(run=escape(report.run), scoring=escape(scoring))
            )
            return self.show(
                note, prompts=prompts, coverage=_shown(coverage.reset_index(), not coverage.empty)
            )
        models = sorted(set(found["bias"]["model"]))
        missing = [GROUPS_HELP[g] for g in ("basic", "modifier") if found[g].empty]
        return self.show(
            f"{unfinished}Run **{escape(report.run)}**, {escape(scoring)} rules: {int(report.images['scored'].sum())} scored "
            f"images in {', '.join(map(escape, report.systems))}; each system weighs the same in *all systems*.  \n"
            f"{_rules_in_words(scoring)}",
            prompts=prompts,
            table4=gr.update(
                value=views.stacked_systems(found["table4"]),
                visible=True,
                label=f"Table 4, rule set {scoring}",
            ),
            coverage=_shown(coverage.reset_index(), True),
            category=_shown(figs.get("category"), "category" in figs),
            basic=_shown(figs.get("basic"), "basic" in figs),
            modifier=_shown(figs.get("modifier"), "modifier" in figs),
            groups_note=" ".join(missing),
            bias_model=gr.Dropdown(choices=models, value=models[0] if models else None),
            bias=_shown(figs.get(f"bias {models[0]}") if models else None, bool(models)),
            confusion=_shown(figs.get("confusion"), "confusion" in figs),
            pairs=_shown(views.confusion_pairs(found["confusion"]), not found["confusion"].empty),
        )

    def _report(self, db, run: str, scoring: str, system: str) -> views.ExplicitReport:
        """The run's report, with the state of its job on this server."""
        name = _text(run)
        return views.explicit_report(
            db, name, scoring=scoring, confusion_system=system or None, job=self._job(db, name)
        )

    def _job(self, db, run: str):
        """The state of run `run`'s job on this server (not an earlier run's of its name)."""
        return self.ctx.jobs.state(run, runs.run_created(db, run))

    @role(*ROLES, "admin")
    def bias(self, db, actor, run: str, scoring: str, model: str) -> dict:
        """Figure 3 of one model of the run: its top-10 dominant colors per category."""
        figure = views.bias_view(db, _text(run), model or "", scoring=scoring)
        return {self.parts["bias"]: _shown(figure, True)}

    @role(*ROLES, "admin")
    def export(self, db, actor, run: str, scoring: str, system: str) -> dict:
        """Every table as CSV and HTML and every figure as HTML, under exports/explicit/ (named
        ``-unfinished`` and saying what they cover, of a run not complete)."""
        report = self._report(db, run, scoring, system)
        if "table4" not in report.tables:
            raise ValueError(f"run {report.run!r} has no scored image yet: nothing to export")
        paths = views.export_report(report, exports_folder(self.ctx.config.data_dir, "explicit"))
        return {self.parts["files"]: [str(p) for p in paths]}

    @role(*ROLES, "admin")
    def robustness(self, db, actor, run: str) -> dict:
        """Each rule set against the default: largest change of an accuracy cell, Kendall's τ
        between the models' rankings and the models that swap."""
        report, text = views.rule_set_robustness(db, _text(run), job=self._job(db, _text(run)))
        return {self.parts["robust_note"]: escape(text), self.parts["robust_table"]: report.round(4)}

    @role(*ROLES, "admin")
    def prompt(self, db, actor, run: str, scoring: str, prompt_id: str) -> dict:
        """One prompt: its text, its images with masks, the swatches and the metrics."""
        view = views.browser_view(db, self.ctx.config.data_dir, _text(run), prompt_id or "", scoring=scoring)
        text = view.prompt
        head = (
            f"**{escape(text['text'])}**  \n{escape(text['task'])} · level {text['level']} · "
            f"{escape(text['system'])} · {escape(text['category'])} · targets: "
            + ", ".join(escape(t) for t in text["targets"])
        )
        if not view.images:
            head += "  \nNo image of this prompt is judged yet: it fills as the run's job scores it."
        updates = {
            "prompt_note": head,
            "gallery": _shown(view.overlays, bool(view.overlays)),
            "swatches": _swatches_html(view.images),
            "metrics": _shown(view.metrics, not view.metrics.empty),
        }
        return {self.parts[name]: updates[name] for name in BROWSER}

    @own_session
    def on_sign_in(self, session_token: str) -> dict:
        """List the explicit runs only for people who may see them."""
        run, note = self.parts["run"], self.parts["note"]
        if not visible_to(current_actor(self.ctx, session_token), ROLES):
            return {run: gr.Dropdown(choices=[], value=None), note: EMPTY_RUNS}
        with self.ctx.db() as db:
            names = views.explicit_runs(db)
        listed = f"{len(names)} explicit run(s): choose one and press **Show**." if names else EMPTY_RUNS
        return {run: gr.Dropdown(choices=names, value=names[0] if names else None), note: listed}

    @own_session
    def runs(self, session_token: str, current: str) -> dict:
        """The explicit runs again, keeping the one chosen."""
        run = self.parts["run"]
        if not visible_to(current_actor(self.ctx, session_token), ROLES):
            return {run: gr.Dropdown()}
        with self.ctx.db() as db:
            names = views.explicit_runs(db)
        return {
            run: gr.Dropdown(
                choices=names, value=current if current in names else (names[0] if names else None)
            )
        }


def _layout() -> dict:
    """The tab's components, by the names `EVENTS` and `ExplicitTab.show` use."""
    parts = {}
    with gr.Row():
        parts["run"] = gr.Dropdown([], label="Explicit run", allow_custom_value=True, elem_id="explicit_run")
        parts["scoring"] = gr.Radio(
            list(SCORINGS),
            value=DEFAULT_SCORING,
            label="Rule set",
            info="Every table below uses this one; the note above them says what it is.",
            elem_id="explicit_scoring",
        )
        parts["system"] = gr.Dropdown(
            ["", *SYSTEMS],
            value="",
            label="Confusion: color system (empty: the first scored)",
            elem_id="explicit_confusion_system",
        )
    with gr.Row():
        parts["show"] = gr.Button("Show", variant="primary", elem_id="explicit_show")
        parts["export"] = gr.Button(
            "Export every table (CSV, HTML) and figure (HTML)", elem_id="explicit_export"
        )
    parts["note"] = live(gr.Markdown(EMPTY_RUNS, elem_id="explicit_note"))
    # The report (`REPORT`).
    gr.Markdown("### Table 4: accuracy (%) per color system and task")
    parts["table4"] = named_table(
        "Table 4: accuracy (%) per color system and task", "explicit_table4", visible=False
    )
    parts["coverage"] = gr.Dataframe(
        label="Images scored (the others failed presence or masking: they count as wrong)",
        interactive=False,
        visible=False,
        elem_id="explicit_coverage",
    )
    parts["category"] = gr.Plot(
        label="Figure 2: accuracy per object category", visible=False, elem_id="explicit_category"
    )
    with gr.Row():
        parts["basic"] = gr.Plot(
            label="Figure 5 (left): basic vs intermediate", visible=False, elem_id="explicit_basic"
        )
        parts["modifier"] = gr.Plot(
            label="Figure 5 (right): light, dark, ish", visible=False, elem_id="explicit_modifier"
        )
    parts["groups_note"] = gr.Markdown(elem_id="explicit_groups_note")
    gr.Markdown("### Figure 3: top-10 dominant colors per category (named in ISCC-NBS L2)")
    parts["bias_model"] = gr.Dropdown(
        [], label="Model", allow_custom_value=True, elem_id="explicit_bias_model"
    )
    parts["bias"] = gr.Plot(visible=False, elem_id="explicit_bias")
    gr.Markdown("### Asked for X, got Y (colors named: ISCC-NBS level 3, basic term)\n" + CONFUSION_NOTE)
    parts["confusion"] = gr.Plot(visible=False, elem_id="explicit_confusion")
    parts["pairs"] = gr.Dataframe(
        label="Most frequent (asked for, got) pairs",
        interactive=False,
        visible=False,
        elem_id="explicit_pairs",
    )
    parts["files"] = gr.File(
        label="Exports", file_count="multiple", interactive=False, height=140, elem_id="explicit_files"
    )
    # The per-prompt browser: the picker, its button and `BROWSER`.
    gr.Markdown("### Per-prompt browser")
    with gr.Row():
        parts["prompt"] = gr.Dropdown(
            [],
            label="Prompt (type to search its text; correct / scored images)",
            allow_custom_value=True,
            filterable=True,
            elem_id="explicit_prompt",
            scale=3,
        )
        parts["open_prompt"] = gr.Button("Show prompt", elem_id="explicit_open_prompt")
    parts["prompt_note"] = live(note_area("explicit_prompt_note"))
    parts["gallery"] = gr.Gallery(
        label="Images with each object's mask outlined (magenta)",
        columns=4,
        height="fit-content",
        visible=False,
        # Lossless: WebP (Gradio's default) smears the one-pixel outline away.
        format="png",
        elem_id="explicit_gallery",
    )
    parts["swatches"] = gr.HTML(elem_id="explicit_swatches")
    parts["metrics"] = gr.Dataframe(
        label="Metrics and verdicts (minimum over the candidate set)",
        interactive=False,
        visible=False,
        elem_id="explicit_metrics",
    )
    with gr.Accordion("Does the ranking of models survive the rule set?", open=False):
        parts["robust"] = gr.Button("Compare the rule sets", elem_id="explicit_robustness")
        parts["robust_note"] = live(gr.Markdown(elem_id="explicit_robust_note"))
        with empty_note("Nothing yet: press *Compare the rule sets*.", "explicit_robust_table_empty"):
            parts["robust_table"] = named_table("Accuracy under each rule set", "explicit_robust_table")
    return parts


def _shown(value, ok: bool):
    """An output filled with `value`, or hidden when there is nothing to show."""
    return gr.update(value=value, visible=True) if ok else gr.update(value=None, visible=False)


TRUST = (
    "How far these numbers hold: on renders made apart from the scorer the default rule set "
    "called 52.6-68.2 % of right colors right, and passed a slightly lighter, darker or duller "
    "neighbour of the named color in up to 14.9 %; compare models with each other under one rule "
    "set, not with numbers from elsewhere (docs/explicit.md, “Independent renders”)."
)
"""What every run's note says of the scorer's accuracy (outside probe 104: only the docs said it);
its figures are the docs' (a test holds them to the section it names: outside probe 131 found
them left behind)."""


def _rules_in_words(scoring: str) -> str:
    """Which rule set the tables use, in words (an unknown name is refused before this), and
    how far its numbers hold (`TRUST`)."""
    return f"Rule set *{escape(scoring)}*: {escape(DESCRIPTIONS.get(scoring, scoring))}.  \n{TRUST}"


def _swatch(hex_color: str, title: str, kind: str = "") -> str:
    return (
        f"<div class='explicit-swatch {kind}'><span style='background:{escape(hex_color)}'></span>"
        f"<b>{escape(title)}</b><br>{escape(hex_color)}<br>{escape(views.hex_label(hex_color))}</div>"
    )


def _mark(passed) -> str:
    return "–" if passed is None else ("✓" if passed else "✗")


def _swatches_html(images) -> str:
    """Per image and object: the dominant color beside the target and its candidates."""
    parts = []
    for number, image in enumerate(images, start=1):
        for view in image.objects:
            m, v = view.metrics, view.verdicts
            metrics = (
                f"ΔChroma {m['delta_chroma']:.2f} {_mark(v['chroma_pass'])} · ΔE00 {m['delta_e00']:.2f} "
                f"{_mark(v['e00_pass'])} · Δhue {m['hue_error']:.1f}° {_mark(v['hue_pass'])} · "
                f"{'correct' if v['correct'] else 'wrong'}"
                if view.dominant_hex
                else "not scored (" + ("absent" if not view.present else escape(view.segment_status)) + ")"
            )
            swatches = [_swatch(view.dominant_hex, "dominant", "dominant")] if view.dominant_hex else []
            swatches += [
                _swatch(hex_color, ("target: " if i == 0 else "") + name)
                for i, (name, hex_color) in enumerate(view.candidates)
            ]
            parts.append(
                f"<div class='explicit-object'><b>#{number} {escape(image.model)} · sample {image.sample} · "
                f"{escape(view.object)}</b>: {metrics}<div class='explicit-swatches'>{''.join(swatches)}</div></div>"
            )
    return "".join(parts)


def _text(value: object) -> str:
    """A picked or typed value as text: an API client may send a number where the page sends
    text (a run id of 5 ended in an AttributeError, not the run's refusal: outside probe 116)."""
    return value.strip() if isinstance(value, str) else "" if value is None else str(value)
