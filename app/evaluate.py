"""The Evaluate tab: plan a run, start it in the background, watch it, cancel, resume, delete, import.

Two modes: implicit concepts (ColorConceptBench: models x concepts x styles x guidance
scales x seeds) and explicit colors (GenColorBench: models x prompts from color systems,
tasks and a subset size x images per prompt; `evaluation.explicit.jobs`). Both plan with the
same image count and time estimate, check the weights before a job starts and run on the
same job queue.

A run is generated, masked and scored by the app's job manager (`app.common.AppContext.jobs`,
an `evaluation.explicit.jobs.ExplicitJobManager`: one per app, one job at a time, stopped
when the app closes); closing the browser does not stop it, and its progress is
read from the database, so any researcher sees it, after a reload too. Images made
elsewhere can be imported as a run instead (`evaluation.pipeline.imports`): an uploaded zip, or a
folder under ``<data_dir>/imports/``.

The tab is an `EvaluateTab` (the shape of `app.tabs`): its handlers are methods that name
who may call them and return ``{part: update}``; `EVENTS` is the tab's wiring. The run
form's fields arrive as one `RunForm`, used by the plan and the start alike; API clients
still call ``evaluate_preview`` and ``evaluate_start`` with the fields by position
(`_form_fields` gives the methods that signature).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import html
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from annotation.research import records as research
from app.browser import concept_choices
from app.common import (
    BROWSER_STATE_KEY,
    AppContext,
    discard_uploads,
    escape,
    given,
    live,
    named_table,
    note_area,
    own_session,
    refused_with,
    role,
    seed_number,
    ui_only,
    uploaded,
    visible_to,
    whole_number,
)
from app.landing import current_actor
from app.tabs import SESSION_CHANGE, On, Tab, wire_events
from evaluation.color.systems import SYSTEMS
from evaluation.concepts import CATEGORIES, MODIFIER_TYPES, load_concepts
from evaluation.explicit import jobs as explicit_jobs
from evaluation.explicit.mode import SAMPLES, plan_summary
from evaluation.explicit.objects import load_objects
from evaluation.explicit.presence import PRESENCE_THRESHOLD
from evaluation.explicit.prompts import DEFAULT_SYSTEMS, TASKS
from evaluation.models.generation import STYLES
from evaluation.models.registry import load_registry
from evaluation.models.segmentation import BOX_THRESHOLD, TEXT_THRESHOLD
from evaluation.pipeline import jobs, planning, removal, runs
from evaluation.pipeline.imports import ImportSourceError
from storage import transaction
from storage.shown import counted, shown

NAME = "evaluate"
TITLE = "Evaluate"
ROLES = ("researcher",)
ALLOWED = (*ROLES, "admin")
"""Who may call the tab's handlers (the admin as well, as the tab was always wired)."""
#: Progress refresh period; a poll costs about 75 ms per 100,000 items (bench/bench_research.py).
POLL_SECONDS = 5.0
RUNS_SHOWN = 20
REJECTED_HEADERS = ["file", "reason"]
FORM_STORAGE_KEY = "colorconcept_evaluate_form"
MODES = (
    ("Implicit concepts (ColorConceptBench)", "implicit"),
    ("Explicit colors (GenColorBench)", "explicit"),
)


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Evaluate tab inside the current `gr.Tab`."""
    registry, concepts = load_registry(), load_concepts()
    parts = _layout(registry)
    EvaluateTab(ctx, registry, concepts, {"session_token": session_token, "tab": tab, **parts}).wire()


@dataclasses.dataclass(frozen=True)
class RunForm:
    """The run form as the page holds it: one field per part, named as the part is in
    `EVENTS` and as API clients name the parameter; values unchecked until a method reads
    them (a bad one raises a ValueError naming the field by its label).

    The defaults are the API's for the parameters it lets clients leave out (from ``kind``
    on), and the page's initial values for the parts `PREVIEW` does not read.
    """

    name: str | None = None
    models: list[str] | None = None
    keys: list[str] | None = None
    categories: list[str] | None = None
    types: list[str] | None = None
    search: str | None = None
    sample: float | None = None
    sample_seed: float | None = None
    styles: list[str] | None = None
    cfg: str | None = None
    seeds: float | None = None
    preset: str = "paper"
    box: float = BOX_THRESHOLD
    text: float = TEXT_THRESHOLD
    kind: str = "in-process"
    address: str | None = None
    mode: str = "implicit"
    x_tasks: tuple[str, ...] | list[str] = TASKS
    x_systems: tuple[str, ...] | list[str] = DEFAULT_SYSTEMS
    x_size: str = "compact"
    x_samples: float = SAMPLES
    x_seed: float = 0
    x_cfg: str | None = None
    x_colors: str | None = None
    x_objects: list[str] | None = None
    x_presence: float = PRESENCE_THRESHOLD

    @property
    def explicit(self) -> bool:
        """Whether the form asks for an explicit-color run (ValueError for an unknown mode)."""
        if self.mode not in dict(map(reversed, MODES)):
            raise ValueError(f"`mode` must be one of {[m for _, m in MODES]}, got {shown(self.mode)}")
        return self.mode == "explicit"

    def request(self) -> planning.EvaluationRequest:
        """The implicit run the form describes."""
        # "apple, banana" typed in the box is two concepts, as the pilot field and the CLI read it.
        keys = (key.strip() for entry in self.keys or () for key in str(entry).split(","))
        query = planning.ConceptQuery(
            tuple(key for key in keys if key),
            tuple(self.categories or ()),
            tuple(self.types or ()),
            self.search or "",
            whole_number(self.sample, "Random sample of N concepts"),
            seed_number(self.sample_seed, "Sample seed"),
        )
        return planning.EvaluationRequest(
            tuple(self.models or ()),
            query,
            tuple(self.styles or ()),
            planning.parse_scales(self.cfg),
            whole_number(self.seeds, "Seeds per cell"),
        )

    def explicit_request(self) -> explicit_jobs.ExplicitRequest:
        """The explicit run the form describes."""
        size = (self.x_size or "").strip()
        return explicit_jobs.ExplicitRequest(
            models=tuple(self.models or ()),
            # None ticked is no selection, refused by the prompt library (by the tab's labels).
            tasks=tuple(self.x_tasks or ()),
            systems=tuple(self.x_systems or ()),
            size=whole_number(size, "Subset") if size.lstrip("+-")[:1].isdigit() else size,
            seed=seed_number(self.x_seed, "Prompt seed"),
            samples=whole_number(self.x_samples, "Images per prompt"),
            cfg_scales=planning.parse_scales(self.x_cfg),
            colors=_named_colors(self.x_colors),
            objects=tuple(self.x_objects or ()),
            presence_threshold=_fraction(self.x_presence, "Presence: detection score at least"),
        )


def _named_colors(text: str | None) -> tuple[str, ...]:
    """The colors the *Only these colors* box names; ``()`` (all) for a blank box. A box of
    commas alone names none, refused as the command line refuses ``--colors ","`` (the tab
    had queued every color of the systems)."""
    names = tuple(c.strip() for c in (text or "").split(",") if c.strip())
    if not names and (text or "").strip():
        raise ValueError(
            "`colors` must name at least one color; none is chosen (leave the box empty for all)"
        )
    return names


FORM = tuple(field.name for field in dataclasses.fields(RunForm))
"""The form's parts, in the order of ``evaluate_start``'s parameters (and of the saved form)."""
_MASKING = ("preset", "box", "text", "kind", "address")
"""The masking models and thresholds, and the executor: a start's, a resume's and an import's."""
PREVIEW = tuple(name for name in FORM if name not in ("name", *_MASKING))
"""The parts the plan reads (no run name, masking or executor), in ``evaluate_preview``'s order."""


FORM_LABELS = {
    "keys": "Concepts",
    "categories": "Categories",
    "modifier_types": "Modifier types",
    "sample_size": "Random sample of N concepts",
    "models": "Models",
    "styles": "Styles",
    "cfg_scales": "Guidance scales",
    "seeds": "Seeds per cell",
    "tasks": "Tasks",
    "systems": "Color systems",
    "size": "Subset",
    "samples": "Images per prompt",
    "colors": "Only these colors",
    "objects": "Only these objects",
    "presence threshold": "Presence: detection score at least",
}
"""The planning libraries' names of the form's fields, and the labels the tab shows them by
(the form's own checks name the labels themselves)."""


def _in_form_labels(method: Callable) -> Callable:
    """`method` with every field its ValueError names (in backticks) given its label on the
    tab (`FORM_LABELS`): the refusals come from the planning libraries, which name their
    parameters."""

    @functools.wraps(method)
    def labelled(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except ValueError as error:
            text = re.sub(r"`([^`]+)`", lambda m: f"`{FORM_LABELS.get(m.group(1), m.group(1))}`", str(error))
            if text == str(error):
                raise
            raise ValueError(text) from error

    return labelled


def _form_fields(fields: tuple[str, ...], optional_from: str) -> Callable[[Callable], Callable]:
    """Decorate ``method(self, db, actor, form: RunForm)`` into a handler called with the
    form's `fields` one by one, by position or name, as API clients always called it: the
    fields before `optional_from` have no default, it and those after it `RunForm`'s.

    So the endpoint keeps its parameters (names, order, defaults) while the method reads
    one form; `app.common.role` takes the signature made here.
    """
    defaults = {field.name: field.default for field in dataclasses.fields(RunForm)}
    required = fields.index(optional_from)
    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
    signature = inspect.Signature(
        [
            *(inspect.Parameter(name, plain) for name in ("self", "db", "actor")),
            *(
                inspect.Parameter(
                    name, plain, default=inspect.Parameter.empty if i < required else defaults[name]
                )
                for i, name in enumerate(fields)
            ),
        ]
    )

    def decorate(method: Callable) -> Callable:
        def edge(self, db, actor, *values, **named):
            bound = signature.bind(self, db, actor, *values, **named)
            bound.apply_defaults()
            return method(self, db, actor, RunForm(**{name: bound.arguments[name] for name in fields}))

        edge.__signature__ = signature
        edge.__name__, edge.__qualname__, edge.__doc__ = method.__name__, method.__qualname__, method.__doc__
        return edge

    return decorate


_TOKEN = ("session_token",)
RUN_ACTION = ("progress_note", "progress")
"""What *Cancel* and *Resume* answer, in this order for API clients: a line, the Runs table."""
IMPLICIT_ONLY = ("intro", "styles", "concept_box")
"""The parts only the implicit mode shows (`EvaluateTab.show_mode`)."""
EVENTS = (
    On("preview.click", "preview", (*_TOKEN, *PREVIEW), ("plan",), "plan", "evaluate_preview"),
    On(
        "check_cluster.click",
        "cluster",
        (*_TOKEN, "kind", "address"),
        ("cluster",),
        "cluster",
        "evaluate_cluster",
    ),
    On("models.input", "masking_for", ("models",), ("preset",)),
    On("start.click", "start", (*_TOKEN, *FORM), ("plan", "run"), "plan", "evaluate_start"),
    On("refresh.click", "progress", _TOKEN, ("progress",), "progress_note", "evaluate_progress"),
    # The poll leaves the line under the Run row alone: it cleared what Cancel and Resume said
    # within seconds (outside probe 220 read no answer to either).
    On("timer.tick", "progress", _TOKEN, ("progress",), "progress_note", clear_note=False),
    # Said under the Run row they act on, with the Runs table as they left it (under Start,
    # with the table between, a refusal read as Start's, and a resumed run's row still said
    # "cancelled": outside probe 173).
    On("cancel.click", "cancel", (*_TOKEN, "run"), RUN_ACTION, "progress_note", "evaluate_cancel"),
    On("resume.click", "resume", (*_TOKEN, "run", *_MASKING), RUN_ACTION, "progress_note", "evaluate_resume"),
    # Twice: the first click says what the run holds, a second one with it still chosen deletes it.
    On(
        "delete.click",
        "delete",
        (*_TOKEN, "run", "pending_delete"),
        (*RUN_ACTION, "run", "pending_delete"),
        "progress_note",
        "evaluate_delete",
    ),
    # A run picked to resume brings back the masking it recorded, which a resume must use.
    On(
        "run.input",
        "masking_of_run",
        (*_TOKEN, "run"),
        ("preset", "box", "text"),
        "progress_note",
        clear_note=False,
    ),
    # The last import's list goes first: a refused import must not show it as its own.
    On("import_button.click", "import_cleared", (), ("rejected",)),
    On(
        "then",
        "import_images",
        (*_TOKEN, "import_name", "upload", "folder", *_MASKING),
        ("report", "rejected", "run", "upload"),
        "report",
        "evaluate_import",
    ),
    On(SESSION_CHANGE, "on_session", _TOKEN, ("timer", "run", "device")),
    On("mode.change", "show_mode", ("mode",), (*IMPLICIT_ONLY, "explicit_box")),
    # The form is kept in this browser (`gr.BrowserState`, i.e. local storage): each change
    # is saved (`EvaluateTab.wire`), and opening the tab puts the saved values back, after a
    # reload too.
    On("tab.select", "restore_form", ("saved",), FORM),
)
"""The tab's wiring, in the order Gradio registers it (`EvaluateTab.wire`)."""


class EvaluateTab(Tab):
    """The Evaluate tab of one app: its parts by name, and the handlers `EVENTS` wires.

    The job manager and the device are the app's (`AppContext.jobs`, `AppContext.device`).
    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and
    ``tab``; ``registry``: the model registry (`evaluation.models.registry.load_registry`);
    ``concepts``: `evaluation.concepts.load_concepts`.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, registry: dict, concepts: list, parts: dict) -> None:
        super().__init__(ctx, parts)
        self.registry, self.concepts = registry, concepts
        self.models_dir = ctx.config.data_dir / "models"
        # A tiny test model is masked by tiny test models: the paper's need downloaded weights.
        self.tiny = {key for key, spec in registry.items() if spec.build == "tiny"}

    def wire(self) -> None:
        """Fill the concept picker at sign-in (`app.browser.concept_choices`), then register
        `EVENTS` with Gradio (inside the Blocks that hold the parts)."""
        concept_choices(
            self.ctx, self.parts["session_token"], {self.parts["keys"]: [c.key for c in self.concepts]}, ROLES
        )
        super().wire()
        # Saved in the browser alone, by element id: saved by the server, a change reached the
        # storage a round trip later, and a loaded clean-clone run found an untick never kept
        # (the page's re-run of a change event that came while one was pending was lost).
        ids = json.dumps([self.parts[name].elem_id for name in FORM])
        save = f"(...values) => Object.fromEntries({ids}.map((id, i) => [id, values[i]]))"
        wire_events(self, (On(tuple(f"{name}.change" for name in FORM), None, FORM, ("saved",), js=save),))

    @role(*ALLOWED)
    @_form_fields(PREVIEW, optional_from="mode")
    @_in_form_labels
    def preview(self, db, actor, form: RunForm) -> dict:
        """The number of images the selection implies and the time they should take here."""
        device = self.ctx.device
        if form.explicit:
            return {self.parts["plan"]: _explicit_plan(db, self.registry, device, form)}
        request = form.request()
        items, config = planning.plan_request(request, self.registry, self.concepts)
        estimate = planning.estimate_seconds(items, device.kind, planning.measured_seconds(db), self.registry)
        warning = planning.cpu_warning(device, request.models, self.registry)
        return {self.parts["plan"]: _plan_markdown(items, config, estimate, warning, device)}

    @role(*ALLOWED)
    def cluster(self, db, actor, kind: str, address: str) -> dict:
        """The resources of the Ray cluster at `address` (nodes, CPUs, GPUs), before a run starts."""
        if (kind or "in-process") != "ray":
            shown = "In-process: jobs run in this server's job thread, one at a time."
        else:
            shown = _executor_choice(kind, address)[1]
        return {self.parts["cluster"]: shown}

    @role(*ALLOWED)
    def masking_of_run(self, db, actor, run: str | None) -> dict:
        """The masking `run` recorded (`runs.run_masking`) put in the form: its preset, where
        one of `jobs.SEGMENTER_PRESETS` gives it, and its thresholds; nothing changes for a
        run not masked yet (or not known)."""
        unchanged = {self.parts[name]: gr.skip() for name in ("preset", "box", "text")}
        try:
            recorded = runs.run_masking(db, run) if run else None
        except runs.RunError:
            return unchanged
        if recorded is None:
            return unchanged
        box, text = recorded["box_threshold"], recorded["text_threshold"]
        preset = next(
            (
                name
                for name in jobs.SEGMENTER_PRESETS
                if jobs.masking_of(_segmenter(self.models_dir, name, box, text)) == recorded
            ),
            None,
        )
        return {
            self.parts["preset"]: gr.skip() if preset is None else preset,
            self.parts["box"]: box,
            self.parts["text"]: text,
        }

    @ui_only
    def masking_for(self, chosen: list[str] | None) -> dict:
        """Tiny test models are masked by the tiny test masking models, others by the paper's."""
        preset = "tiny-random" if chosen and set(chosen) <= self.tiny else "paper"
        return {self.parts["preset"]: gr.Radio(value=preset)}

    @role(*ALLOWED)
    @_form_fields(FORM, optional_from="kind")
    @_in_form_labels
    def start(self, db, actor, form: RunForm) -> dict:
        """Store the run and queue its job; returns a message and the run picker."""
        explicit_mode = form.explicit
        run = _run_name(form.name, "explicit" if explicit_mode else "eval")
        if explicit_mode:
            _, items, config, prompts = _explicit_items(self.registry, form)
        else:
            items, config = planning.plan_request(form.request(), self.registry, self.concepts)
        segmenter = _segmenter(self.models_dir, form.preset, form.box, form.text)
        executor, where = _executor_choice(form.kind, form.address)
        # Before the run is stored: the weights here, or on a cluster on every node (it was
        # stored and queued, then failed: outside probe 228).
        jobs.check_before_storing(executor, config, segmenter, self.models_dir, self.ctx.config.data_dir)
        with transaction(db):
            n = research.create_evaluation_run(db, actor.pseudonym, run, items, config)
            if explicit_mode:
                runs.store_explicit_prompts(db, run, prompts)
        state = self.ctx.jobs.submit(run, segmenter, executor)
        images = f"{n} image" + ("" if n == 1 else "s")
        message = f"Run **{escape(run)}**: {images}, job {state.state}." + (f" {where}" if where else "")
        return {self.parts["plan"]: message, self.parts["run"]: _run_choices(db, run)}

    @role(*ALLOWED)
    def progress(self, db, actor) -> dict:
        """Progress bars of the newest runs, with the job state on this server (or that a
        job of another process on the same database runs it)."""
        return {self.parts["progress"]: self._progress_html(db)}

    def _progress_html(self, db) -> str:
        manager = self.ctx.jobs
        shown = runs.list_runs(db)[:RUNS_SHOWN]
        starters = research.run_starters(db, [r["name"] for r in shown])
        rows = [
            (
                r,
                runs.run_progress(db, r["name"]),
                manager.state(r["name"], r["created_at"]),
                manager.workers(r["name"]),
                runs.is_explicit(runs.run_config(db, r["name"])),
                runs.job_elsewhere(db, r["name"], jobs.process_owner()),
                starters[r["name"]],
            )
            for r in shown
        ]
        return _progress_html(rows)

    @role(*ALLOWED)
    def cancel(self, db, actor, run: str) -> dict:
        """Ask the run's job to stop after its current batch (what is done stays)."""
        runs.run_config(db, run or "")  # an unknown run is named as such, with the known ones
        holder = runs.job_elsewhere(db, run or "", jobs.process_owner())
        if holder is not None and not self.ctx.jobs.state(run or "").active:  # it said "idle"
            raise jobs.JobError(
                f"run {run!r} runs in another process ({holder[0]}), not in this app: stop it there "
                "(Ctrl-C or SIGTERM; what it recorded stays)"
            )
        self.ctx.jobs.cancel(run or "")
        research.record_job_action(db, actor.pseudonym, "cancel_evaluation", run)
        # Not the state: this line stays while the Runs table moves on, and "cancelling" read
        # as still running long after the run had stopped (outside probe 144).
        return {
            self.parts["progress_note"]: f"Run **{escape(run)}**: asked to stop after its current batch; "
            "what is done stays. The Runs table says *cancelled* once it has stopped.",
            self.parts["progress"]: self._progress_html(db),
        }

    @role(*ALLOWED)
    def resume(
        self,
        db,
        actor,
        run: str,
        preset: str,
        box: float,
        text: float,
        kind: str = "in-process",
        address: str | None = None,
    ) -> dict:
        """Queue a stopped run again; it continues where it stopped."""
        state = self.ctx.jobs.state(run or "")
        if state.active:  # refused before the masking given is recorded or the resume audited
            raise jobs.JobError(
                f"run {run!r} is already {state.state} on this server: nothing to resume. It goes on "
                "with the masking it started with; Cancel stops it after its current batch"
            )
        # The run first: with none chosen, the missing-weights refusal was the answer (outside probe 181).
        config = runs.run_config(db, run or "")
        runs.refuse_job_elsewhere(db, run or "", jobs.process_owner())
        # Before the masking and its weights: a job would load neither.
        if not jobs.work_left(db, run or "", self.ctx.config.data_dir):
            raise jobs.JobError(
                f"run {run!r} is complete, every file in its place: nothing to resume, and nothing changed"
            )
        executor, where = _executor_choice(kind, address)
        segmenter = _segmenter(self.models_dir, preset, box, text)
        if executor.kind == "in-process":
            jobs.check_weights(config, segmenter, self.models_dir)
        runs.claim_masking(db, run or "", jobs.masking_of(segmenter))
        research.record_job_action(db, actor.pseudonym, "resume_evaluation", run or "")
        state = self.ctx.jobs.submit(run, segmenter, executor)
        return {
            self.parts["progress_note"]: f"Run **{escape(run)}**: job {state.state}."
            + (f" {where}" if where else ""),
            self.parts["progress"]: self._progress_html(db),
        }

    @role(*ALLOWED)
    def delete(self, db, actor, run: str, pending: list | None = None) -> dict:
        """Say what run `run` holds; called again with it `pending` (the first call's answer:
        its name and when it was stored), delete it: its rows, then its files
        (`annotation.research.records.delete_evaluation_run`). A run of that name stored
        since the first call (the one described deleted elsewhere, another made) is described
        in its turn, not deleted: the second press deleted whatever then had the name (outside
        probe 237)."""
        run = run or ""
        data_dir = self.ctx.config.data_dir
        second = bool(pending) and pending[0] == run
        remade = second and pending[1] != runs.run_created(db, run)
        try:
            with self.ctx.jobs.deleting(run) as busy:
                if not second or remade:
                    held = removal.footprint(db, run, data_dir)
                    removal.refuse_deletion(db, run, busy=busy)
                    since = " was deleted and made again since the last press: it now" if remade else ""
                    return self.named(
                        progress_note=f"Run **{escape(run)}**{since} holds {escape(held.sentence())}. Click "
                        "*Delete run* again to delete it for good (the audit trail keeps who did).",
                        progress=gr.skip(),
                        run=gr.skip(),
                        pending_delete=[run, held.created],
                    )
                rows, files = research.delete_evaluation_run(
                    db, actor.pseudonym, run, data_dir, busy=busy, created=pending[1]
                )
                self.ctx.jobs.forget(run)
        except ValueError as error:  # a second click must ask again once the refusal is gone
            raise refused_with(error, {self.parts["pending_delete"]: None}) from error
        return self.named(
            progress_note=f"Run **{escape(run)}** deleted: {escape(removal.rows_sentence(rows))}; "
            f"{escape(files.sentence())}.",
            progress=self._progress_html(db),
            run=_run_choices(db),
            pending_delete=None,
        )

    @ui_only
    def import_cleared(self) -> dict:
        """No list of files left out while an import is checked and run."""
        return self.named(rejected=None)

    @role(*ALLOWED)
    def import_images(
        self, db, actor, name, upload, folder, preset, box, text, kind="in-process", address=None
    ) -> dict:
        """Import a zip or folder of labelled images as a run and queue its masking and scoring."""
        run, segmenter = _run_name(name, "import"), _segmenter(self.models_dir, preset, box, text)
        executor, _ = _executor_choice(kind, address)
        data_dir = self.ctx.config.data_dir
        # What to import before the weights: with nothing given, the missing-weights refusal
        # was the answer (outside probe 181).
        source, roots = _import_source(data_dir, upload, folder)
        jobs.check_before_storing(executor, None, segmenter, None, data_dir)
        try:
            report = research.import_run(
                db, actor.pseudonym, run, source, data_dir, self.concepts, allowed_roots=roots
            )
        except ImportSourceError as error:  # what it holds is refused: the upload is of no more use
            discard_uploads([source] if upload else [])
            # The message names the first few refused; the table every one. The zip leaves the
            # field, as it left the disk (a second press named a temporary file: probe 135).
            raise refused_with(
                error,
                {self.parts["rejected"]: [list(r) for r in error.rejected]} | _cleared(self.parts, upload),
            ) from None
        discard_uploads([source] if upload else [])  # its images are under the data folder now
        self.ctx.jobs.submit(run, segmenter, executor)
        message = (
            f"Run **{escape(run)}**: {counted(report.imported, 'image')} imported, {len(report.rejected)} left out; "
            "masking and scoring queued."
        )
        return {
            self.parts["report"]: message,
            self.parts["rejected"]: [list(r) for r in report.rejected],
            self.parts["run"]: _run_choices(db, run),
            **_cleared(self.parts, upload),
        }

    @own_session
    def on_session(self, token: str) -> dict:
        """Poll progress, list the runs and say the device only for people who may see them."""
        timer, run, device = self.parts["timer"], self.parts["run"], self.parts["device"]
        if not visible_to(current_actor(self.ctx, token), ROLES):
            return {timer: gr.Timer(active=False), run: gr.Dropdown(choices=[], value=None), device: ""}
        with self.ctx.db() as db:
            return {
                timer: gr.Timer(active=True),
                run: _run_choices(db),
                device: _device_line(self.ctx.device),
            }

    @ui_only
    def show_mode(self, mode: str) -> dict:
        """The implicit mode's parts, or the explicit mode's box."""
        shown = dict.fromkeys(IMPLICIT_ONLY, mode != "explicit") | {"explicit_box": mode == "explicit"}
        return {self.parts[name]: gr.update(visible=visible) for name, visible in shown.items()}

    @ui_only
    def restore_form(self, stored: dict | None) -> dict:
        """The saved values put back; a part with none saved is left as it is.

        The browser keeps a saved 1e20 as the JSON integer it writes for it, so a number past
        64 bits comes back an int: made a float again, or sending the form back failed, and
        after every reload nothing of it came back (outside probe 151 saw the mode lost)."""
        stored = stored if isinstance(stored, dict) else {}
        parts = (self.parts[name] for name in FORM)
        return {
            part: _sendable(stored[part.elem_id]) if part.elem_id in stored else gr.skip() for part in parts
        }


def _sendable(value):
    """`value`, with a whole number past 64 bits as a float (Gradio's JSON encoder refuses it:
    sending one back failed, and the page's events with it)."""
    return float(value) if isinstance(value, int) and not -(2**63) <= value < 2**63 else value


def _device_line(device: planning.DeviceInfo) -> str:
    """Where runs go, as Markdown (the first line of the tab)."""
    return f"**Device:** {escape(device.name)}" + (
        " (no GPU: only tiny models run at a useful speed)" if device.kind == "cpu" else ""
    )


def _layout(registry: dict) -> dict:
    """The tab's components, by the names `EVENTS` and `RunForm` use. The device line is
    filled at sign-in (`EvaluateTab.on_session`): finding the device imports torch."""
    device = gr.Markdown(elem_id="evaluate_device")
    mode = gr.Radio(list(MODES), value="implicit", label="Mode", elem_id="evaluate_mode")
    parts = {"device": device, "mode": mode, **_selection_inputs(registry), **_explicit_inputs()}
    parts |= _segmenter_inputs() | _executor_inputs()
    with gr.Row():
        parts["name"] = gr.Textbox(label="Run name (empty: a dated name)", elem_id="evaluate_run_name")
        parts["preview"] = gr.Button("Count images and time", elem_id="evaluate_preview")
        parts["start"] = gr.Button("Start", variant="primary", elem_id="evaluate_start")
    parts["plan"] = live(gr.Markdown(elem_id="evaluate_plan"))
    parts |= _progress_section() | _import_section()
    parts["saved"] = gr.BrowserState({}, storage_key=FORM_STORAGE_KEY, secret=BROWSER_STATE_KEY)
    return parts


def _selection_inputs(registry) -> dict:
    """The implicit mode's inputs, and the parts of the layout that only it shows (`IMPLICIT_ONLY`)."""
    parts = {
        "intro": gr.Markdown(
            "## New evaluation\nModels × concepts × styles × guidance scales × seeds; every cell is one image."
        )
    }
    with gr.Row():
        parts["models"] = gr.CheckboxGroup(
            [(f"{s.name} ({key})", key) for key, s in registry.items()],
            label="Models",
            elem_id="evaluate_models",
        )
        parts["styles"] = gr.CheckboxGroup(
            [(v, k) for k, v in STYLES.items()], value=list(STYLES), label="Styles", elem_id="evaluate_styles"
        )
    with gr.Column() as parts["concept_box"]:
        parts |= _concept_inputs()
    return parts


def _concept_inputs() -> dict:
    # allow_custom_value: `planning.select_concepts` names unknown keys briefly; Gradio's own
    # check would echo them and list all 1,278 concepts.
    keys = gr.Dropdown(
        [],
        multiselect=True,
        filterable=True,
        allow_custom_value=True,
        label="Concepts (empty: all, then the filters below)",
        elem_id="evaluate_concepts",
        interactive=False,
    )
    # Its choices come at sign-in (`concept_choices`), and with them typing: the API takes any keys.
    keys.api_info = lambda: {"type": "array", "items": {"type": "string"}}
    parts = {"keys": keys}
    with gr.Row():
        parts["categories"] = gr.CheckboxGroup(
            list(CATEGORIES), label="Categories", elem_id="evaluate_categories"
        )
        parts["types"] = gr.CheckboxGroup(
            list(MODIFIER_TYPES), label="Modifier types", elem_id="evaluate_types"
        )
        parts["search"] = gr.Textbox(label="Concept text contains", elem_id="evaluate_search")
    with gr.Row():
        parts["sample"] = gr.Number(
            0, label="Random sample of N concepts (0: all)", elem_id="evaluate_sample"
        )
        parts["sample_seed"] = gr.Number(0, label="Sample seed", elem_id="evaluate_sample_seed")
        parts["cfg"] = gr.Textbox(
            label="Guidance scales (comma-separated; empty: each model's 7)", elem_id="evaluate_cfg"
        )
        parts["seeds"] = gr.Number(5, label="Seeds per cell", elem_id="evaluate_seeds")
    return parts


def _explicit_inputs() -> dict:
    """The explicit mode's inputs (``x_*``, shown in that mode) and their box."""
    parts = {}
    with gr.Column(visible=False) as parts["explicit_box"]:
        gr.Markdown(
            "## New explicit-color evaluation\nModels × prompts (color systems × tasks × subset) × images "
            "per prompt, at each model's default guidance; each object is masked and its dominant color "
            "scored against the target's candidate set (docs/explicit.md)."
        )
        with gr.Row():
            parts["x_systems"] = gr.CheckboxGroup(
                list(SYSTEMS),
                value=list(DEFAULT_SYSTEMS),
                label="Color systems",
                elem_id="evaluate_x_systems",
            )
            parts["x_tasks"] = gr.CheckboxGroup(
                list(TASKS), value=list(TASKS), label="Tasks", elem_id="evaluate_x_tasks"
            )
        with gr.Row():
            parts["x_size"] = gr.Textbox(
                "compact",
                label="Subset: compact (< 10K prompts), full (44K) or rounds per color",
                elem_id="evaluate_x_size",
            )
            parts["x_samples"] = gr.Number(SAMPLES, label="Images per prompt", elem_id="evaluate_x_samples")
            parts["x_seed"] = gr.Number(0, label="Prompt seed", elem_id="evaluate_x_seed")
            parts["x_cfg"] = gr.Textbox(
                "", label="Guidance scales (empty: each model's own default)", elem_id="evaluate_x_cfg"
            )
        with gr.Row():
            parts["x_colors"] = gr.Textbox(
                "", label="Only these colors (comma-separated names; empty: all)", elem_id="evaluate_x_colors"
            )
            parts["x_objects"] = gr.Dropdown(
                [o.name for o in load_objects()],
                value=[],
                multiselect=True,
                filterable=True,
                # A name typed and not picked is kept (on leaving the box) and checked by
                # `build_prompts`; Gradio's default dropped it, and Start then took all 100.
                allow_custom_value=True,
                label="Only these objects (empty: all 100)",
                elem_id="evaluate_x_objects",
            )
            parts["x_presence"] = gr.Number(
                PRESENCE_THRESHOLD, label="Presence: detection score at least", elem_id="evaluate_x_presence"
            )
    return parts


def _fraction(value, name: str) -> float:
    """`value` as a number from 0 to 1; a ValueError naming the field `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"`{name}` must be a number in [0, 1], got {given(value)}")
    return float(value)


def _segmenter_inputs() -> dict:
    parts = {}
    with gr.Accordion("Masking (GroundingDINO + SAM)", open=False), gr.Row():
        parts["preset"] = gr.Radio(
            list(jobs.SEGMENTER_PRESETS),
            value="paper",
            label="Models",
            info="paper: grounding-dino-base + sam-vit-huge; tiny-random: test models",
            elem_id="evaluate_segmenter",
        )
        parts["box"] = gr.Number(BOX_THRESHOLD, label="Box threshold", elem_id="evaluate_box")
        parts["text"] = gr.Number(TEXT_THRESHOLD, label="Text threshold", elem_id="evaluate_text")
    return parts


def _executor_inputs() -> dict:
    parts = {}
    with gr.Accordion("Where it runs (executor)", open=False):
        with gr.Row():
            parts["kind"] = gr.Radio(
                list(jobs.EXECUTORS),
                value="in-process",
                label="Executor",
                info="in-process: this server's job thread; ray: a Ray cluster (docs/scale-out.md)",
                elem_id="evaluate_executor",
            )
            parts["address"] = gr.Textbox(
                label="Ray cluster address (host:port; empty: $RAY_ADDRESS or a local cluster)",
                elem_id="evaluate_ray_address",
            )
            parts["check_cluster"] = gr.Button("Check cluster", elem_id="evaluate_check_cluster")
        parts["cluster"] = live(gr.Markdown(elem_id="evaluate_cluster"))
    return parts


def _executor_choice(kind: str, address: str) -> tuple[jobs.ExecutorChoice, str]:
    """The job's executor and a line on where it runs; connects to the cluster for ``ray``
    (raising `RayUnavailable`, a ValueError, when Ray is missing or unreachable)."""
    choice = jobs.ExecutorChoice(kind or "in-process", (address or "").strip())
    if choice.kind != "ray":
        return choice, ""
    from evaluation.pipeline.ray_executor import connect

    return choice, f"Ray cluster: {escape(connect(choice.address).describe())}."


def _progress_section() -> dict:
    gr.Markdown("## Runs\nProgress is read from the database: jobs keep running when this page closes.")
    parts = {"progress": gr.HTML(elem_id="evaluate_progress")}
    with gr.Row():
        parts["run"] = gr.Dropdown([], label="Run", allow_custom_value=True, elem_id="evaluate_run")
        parts["cancel"] = gr.Button("Cancel", variant="stop", elem_id="evaluate_cancel")
        parts["resume"] = gr.Button("Resume", elem_id="evaluate_resume")
        parts["refresh"] = gr.Button("Refresh", elem_id="evaluate_refresh")
        parts["delete"] = gr.Button("Delete run", variant="stop", elem_id="evaluate_delete")
    parts["pending_delete"] = gr.State(None)
    parts["progress_note"] = live(note_area("evaluate_progress_note"))
    parts["timer"] = gr.Timer(POLL_SECONDS, active=False)
    return parts


def _import_section() -> dict:
    gr.Markdown(
        "## Import images made elsewhere\nName files `model__concept__style__cfg__seed.png` or "
        "list them in a `manifest.csv` (columns file, model, concept, style, cfg, seed). Upload a zip, "
        "or name a folder under the server's `imports/` data folder."
    )
    parts = {}
    with gr.Row():
        parts["upload"] = gr.File(label="Zip of images", file_types=[".zip"], elem_id="evaluate_upload")
        parts["folder"] = gr.Textbox(label="…or folder under imports/", elem_id="evaluate_folder")
        parts["import_name"] = gr.Textbox(
            label="Run name (empty: a dated name)", elem_id="evaluate_import_name"
        )
    parts["import_button"] = gr.Button("Import, mask and score", elem_id="evaluate_import")
    parts["report"] = live(gr.Markdown(elem_id="evaluate_import_report"))
    parts["rejected"] = named_table(
        "Images not imported, and why", "evaluate_rejected", headers=REJECTED_HEADERS
    )
    return parts


def _explicit_items(registry, form: RunForm):
    """The explicit run the form describes: request, items, configuration and prompts."""
    request = form.explicit_request()
    planned = explicit_jobs.plan_explicit_request(request, registry)
    return (request, *planned)


def _explicit_plan(db, registry, device: planning.DeviceInfo, form: RunForm) -> str:
    """The explicit run's size and time on `device`, as Markdown."""
    request, items, config, prompts = _explicit_items(registry, form)
    plan = plan_summary(
        items, prompts, device.kind, planning.measured_seconds(db), registry, planning.explicit_seconds(db)
    )
    lines = [
        f"**{plan.images} images** ({counted(len(config['models']), 'model')} × {plan.prompts} prompts × {_scales(items)} "
        f"× {counted(config['samples'], 'image')} per prompt), {plan.objects} objects to mask and score, "
        f"about **{planning.format_duration(plan.seconds)}** on {escape(device.name)}."
    ]
    lines += _model_lines(plan.estimate, " to generate")
    each, origin = plan.scoring
    lines.append(
        f"- scoring: {plan.objects:,} objects × {each:.2g} s ({SCORING_ORIGINS.get(origin, origin)})"
    )
    if isinstance(request.size, int) and request.objects and len(request.objects) < request.size:
        lines.append(
            f"\nRounds are limited by the {len(request.objects)} objects chosen: each color gets at most "
            f"{len(request.objects)} prompts per task, not {request.size}."
        )
    if not (request.colors or request.objects):
        lines.append(f"\n{QUICK_TRY}")
    warning = planning.cpu_warning(device, request.models, registry)
    if warning:
        lines.append(f"\n⚠️ {escape(warning)}")
    return "\n".join(lines)


def _segmenter(models_dir: Path, preset: str, box: float, text: float) -> jobs.SegmenterSpec:
    # An emptied box arrives as None: it was a TypeError, "Something went wrong" (outside probe 219).
    box, text = _fraction(box, "Box threshold"), _fraction(text, "Text threshold")
    return jobs.segmenter_preset(preset, models_dir, box, text)


WORKER_STATES = {"down": "died, Ray is restarting it", "lost": "gone, Ray gave it up"}


def _worker_lines(workers: dict) -> str:
    """One line per Ray worker: where it runs, items done, and what it lost (HTML, escaped)."""
    lines = []
    for name, w in sorted(workers.items()):
        line = f"<br>{html.escape(name)} on {html.escape(w.node)}: {w.items} items"
        line += f", {w.restarts} restart{'s' * (w.restarts != 1)}" if w.restarts else ""
        if w.lost_batches:
            line += (
                f", {w.lost_batches} batch{'es' * (w.lost_batches != 1)} ({w.lost_items} items) "
                "lost with it and redone"
            )
        if w.state in WORKER_STATES:
            line += f" ({WORKER_STATES[w.state]})"
        lines.append(line)
    return "".join(lines)


def _run_name(name: str | None, prefix: str) -> str:
    name = (name or "").strip()
    return runs.check_run_name(name or f"{prefix}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}")


QUICK_TRY = (
    "For a quick try-out, narrow the subset with **Only these colors** (say `red, navy`) and "
    "**Only these objects** (say car, apple): only their prompts are kept, tens of images "
    "instead of thousands."
)
#: How each origin of a per-image time reads under a plan.
ORIGINS = {
    "measured": "measured here: median per image, without loading the model or a run's first image",
    "default": "default for this device",
    "unknown model": "no figure for this model: a guess",
    "as small as tiny-random": "tiny-random's figure: its entry is as small",
    "measured in concept runs": (  # evaluation.explicit.mode.IMPLICIT_MEASURED
        "measured here in concept runs, one masking included: median per image, without loading "
        "the model or a run's first image"
    ),
}
#: How each origin of an explicit run's seconds per scored object reads under its plan.
SCORING_ORIGINS = {
    "measured": "measured here: median per object, without a run's first image",
    "default": "default for this device, see docs/explicit.md",
}


def _model_lines(estimate, what: str = "") -> list[str]:
    """One line per model: images × seconds per image (`what` they are spent on), and where
    that figure comes from."""
    return [
        f"- {escape(model)}: {n} images × {each:.2g} s{what} ({ORIGINS.get(origin, origin)})"
        for model, (n, each, origin) in estimate.per_model.items()
    ]


def _scales(items) -> str:
    """E.g. "2 guidance scales (5, 7)": which ones, since "7,5" typed is two (a German lab's
    7.5 was read as 7 and 5, and the count alone did not show it)."""
    scales = {item["cfg"] for item in items}
    shown = sorted(scale for scale in scales if scale is not None)
    listed = f" ({', '.join(f'{scale:g}' for scale in shown)})" if shown else ""
    return counted(len(scales), "guidance scale") + listed


def _plan_markdown(items, config, estimate, warning: str, device: planning.DeviceInfo) -> str:
    lines = [
        f"**{counted(len(items), 'image')}** ({counted(len(config['models']), 'model')} × "
        f"{counted(len(config['concepts']), 'concept')} × {counted(len(config['styles']), 'style')} × "
        f"{_scales(items)} × {counted(config['samples'], 'seed')}), "
        f"about **{planning.format_duration(estimate.seconds)}** on {escape(device.name)}."
    ]
    lines += _model_lines(estimate)
    if warning:
        lines.append(f"\n⚠️ {escape(warning)}")
    return "\n".join(lines)


def _run_choices(db, selected: str | None = None) -> gr.Dropdown:
    """The run picker: every run, newest first, with `selected` chosen (else the newest)."""
    names = [r["name"] for r in runs.list_runs(db)]
    return gr.Dropdown(choices=names, value=selected if selected in names else (names[0] if names else None))


def _progress_html(rows) -> str:
    if not rows:
        return "<p>No runs yet.</p>"
    body = []
    for run, done, job, workers, explicit, elsewhere, starter in rows:
        fraction, complete = (
            explicit_jobs.explicit_progress(done) if explicit else (done.fraction, done.complete)
        )
        state = job.run_state(complete, elsewhere)
        if state == "stopped":
            state = "stopped (resume to continue)"
        note = (f" · {job.stage}" if job.stage else "") + (f" — {job.message}" if job.message else "")
        if state == "complete":
            note = ""
        counts = (
            f"{done.generated}/{done.items} images, {done.segmented} judged ({done.usable} masked), "
            f"{done.failed} failed"
            if explicit
            else f"{done.generated}/{done.items} images, {done.segmented} masked ({done.usable} usable), "
            f"{done.failed} failed, {done.extracted}/{done.groups} distributions"
        )
        if done.failure:  # stored text: escaped
            counts += f"<br><small>failed: {html.escape(done.failure)}</small>"
        kind = "explicit" if explicit else run["kind"]
        body.append(
            f"<tr><td>{html.escape(run['name'])}</td><td>{html.escape(kind)}</td>"
            f"<td>{html.escape(starter)}</td>"
            f"<td><progress max='1' value='{fraction:.4f}' aria-label='{100 * fraction:.0f}% done'></progress>"
            f" {100 * fraction:.0f}%</td>"
            f"<td>{counts}{_worker_lines(workers)}</td>"
            f"<td data-state='{html.escape(state)}'>{html.escape(state + note)}</td></tr>"
        )
    head = "<tr><th>Run</th><th>Kind</th><th>Started by</th><th>Progress</th><th>Counts</th><th>Job</th></tr>"
    return f"<table class='evaluate-runs' aria-label='Evaluation runs'>{head}{''.join(body)}</table>"


def _cleared(parts: dict, upload) -> dict:
    """The zip field emptied when the import took (and removed) its `upload`; else no update."""
    return {parts["upload"]: None} if upload else {}


def _import_source(data_dir: Path, upload, folder) -> tuple[str, list[Path]]:
    if upload and (folder or "").strip():
        raise ValueError("give either a zip upload or a folder, not both")
    if upload:
        return uploaded(str(upload), "upload"), [Path(gr.utils.get_upload_folder())]
    if not (folder or "").strip():
        raise ValueError(
            "`…or folder under imports/` is empty: name a folder under imports/, or upload a zip"
        )
    root = data_dir / "imports"
    return str(root / folder.strip()), [root]
