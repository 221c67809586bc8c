"""The Evaluate tab: plan a run, start it in the background, watch it, cancel, resume, import.

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
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path

import gradio as gr

from annotation.research import records as research
from app.browser import concept_choices
from app.common import (
    BROWSER_STATE_KEY,
    AppContext,
    escape,
    handler,
    note_area,
    own_session,
    ui_only,
    uploaded,
    visible_to,
    whole_number,
    wire,
)
from app.landing import current_actor
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
from evaluation.pipeline import jobs, planning, runs
from storage import transaction

NAME = "evaluate"
TITLE = "Evaluate"
ROLES = ("researcher",)
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
    allowed = handler(ctx, *ROLES, "admin")
    # The app's job manager (one queue for both modes), made and stopped by `AppContext`.
    device, manager = ctx.device, ctx.jobs
    registry, concepts = load_registry(), load_concepts()
    gr.Markdown(
        f"**Device:** {escape(device.name)}"
        + (" (no GPU: only tiny models run at a useful speed)" if device.kind == "cpu" else "")
    )
    mode = gr.Radio(list(MODES), value="implicit", label="Mode", elem_id="evaluate_mode")
    selection, implicit_only = _selection_inputs(registry)
    concept_choices(ctx, session_token, selection[1], [c.key for c in concepts], ROLES)
    explicit_box, explicit = _explicit_inputs()
    segmenter = _segmenter_inputs()
    executor, check_cluster, cluster = _executor_inputs()
    with gr.Row():
        run_name = gr.Textbox(label="Run name (empty: a dated name)", elem_id="evaluate_run_name")
        preview = gr.Button("Count images and time", elem_id="evaluate_preview")
        start = gr.Button("Start", variant="primary", elem_id="evaluate_start")
    plan = gr.Markdown(elem_id="evaluate_plan")
    progress, run_pick, cancel, resume, refresh, timer = _progress_section()
    upload, folder, import_name, import_button, report, rejected = _import_section()

    wire(
        preview.click,
        allowed(_preview(registry, concepts, ctx, device)),
        [session_token, *selection, mode, *explicit],
        plan,
        note=plan,
        api_name="evaluate_preview",
    )
    wire(
        check_cluster.click,
        allowed(_cluster),
        [session_token, *executor],
        cluster,
        note=cluster,
        api_name="evaluate_cluster",
    )
    # A tiny test model is masked by tiny test models: the paper's need downloaded weights.
    tiny = {key for key, spec in registry.items() if spec.build == "tiny"}
    selection[0].input(
        ui_only(lambda chosen: gr.Radio(value="tiny-random" if chosen and set(chosen) <= tiny else "paper")),
        selection[0],
        segmenter[0],
        api_visibility="private",
    )
    wire(
        start.click,
        allowed(_start(registry, concepts, ctx, manager)),
        [session_token, run_name, *selection, *segmenter, *executor, mode, *explicit],
        [plan, run_pick],
        note=plan,
        api_name="evaluate_start",
    )
    progress_note = note_area("evaluate_progress_note")
    wire(
        refresh.click,
        allowed(_progress(manager)),
        session_token,
        progress,
        note=progress_note,
        api_name="evaluate_progress",
    )
    wire(timer.tick, allowed(_progress(manager)), session_token, progress, note=progress_note)
    wire(
        cancel.click,
        allowed(_cancel(manager)),
        [session_token, run_pick],
        plan,
        note=plan,
        api_name="evaluate_cancel",
    )
    wire(
        resume.click,
        allowed(_resume(ctx, manager)),
        [session_token, run_pick, *segmenter, *executor],
        plan,
        note=plan,
        api_name="evaluate_resume",
    )
    wire(
        import_button.click,
        allowed(_import(ctx, concepts, manager)),
        [session_token, import_name, upload, folder, *segmenter, *executor],
        [report, rejected, run_pick],
        note=report,
        api_name="evaluate_import",
    )
    session_token.change(_on_session(ctx), session_token, [timer, run_pick], api_visibility="private")
    mode.change(
        ui_only(
            lambda chosen: (
                [gr.update(visible=chosen != "explicit")] * len(implicit_only)
                + [gr.update(visible=chosen == "explicit")]
            )
        ),
        mode,
        [*implicit_only, explicit_box],
        api_visibility="private",
    )
    _kept_over_reload(ctx, tab, [run_name, *selection, *segmenter, *executor, mode, *explicit])


def _kept_over_reload(ctx: AppContext, tab: gr.Tab, fields: list[gr.components.Component]) -> None:
    """Keep the form's values in this browser (`gr.BrowserState`, i.e. local storage): each
    change is saved, and opening the tab puts the saved values back, after a reload too."""
    saved = gr.BrowserState({}, storage_key=FORM_STORAGE_KEY, secret=BROWSER_STATE_KEY)
    names = [field.elem_id for field in fields]

    @ui_only
    def save(*values) -> dict:
        return dict(zip(names, values))

    @ui_only
    def restore(stored: dict | None) -> tuple:
        stored = stored if isinstance(stored, dict) else {}
        return tuple(stored[name] if name in stored else gr.skip() for name in names)

    gr.on([field.change for field in fields], save, fields, saved, api_visibility="private")
    tab.select(restore, saved, fields, api_visibility="private")


def _selection_inputs(registry) -> tuple[list[gr.components.Component], list[gr.components.Component]]:
    """The implicit mode's inputs, and the parts of the layout that only it shows."""
    intro = gr.Markdown(
        "## New evaluation\nModels × concepts × styles × guidance scales × seeds; every cell is one image."
    )
    with gr.Row():
        models = gr.CheckboxGroup(
            [(f"{s.name} ({key})", key) for key, s in registry.items()],
            label="Models",
            elem_id="evaluate_models",
        )
        styles = gr.CheckboxGroup(
            [(v, k) for k, v in STYLES.items()], value=list(STYLES), label="Styles", elem_id="evaluate_styles"
        )
    with gr.Column() as concept_box:
        keys, categories, types, search, sample, sample_seed, cfg, seeds = _concept_inputs()
    return [models, keys, categories, types, search, sample, sample_seed, styles, cfg, seeds], [
        intro,
        styles,
        concept_box,
    ]


def _concept_inputs() -> list[gr.components.Component]:
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
    with gr.Row():
        categories = gr.CheckboxGroup(list(CATEGORIES), label="Categories", elem_id="evaluate_categories")
        types = gr.CheckboxGroup(list(MODIFIER_TYPES), label="Modifier types", elem_id="evaluate_types")
        search = gr.Textbox(label="Concept text contains", elem_id="evaluate_search")
    with gr.Row():
        sample = gr.Number(0, label="Random sample of N concepts (0: all)", elem_id="evaluate_sample")
        sample_seed = gr.Number(0, label="Sample seed", elem_id="evaluate_sample_seed")
        cfg = gr.Textbox(
            label="Guidance scales (comma-separated; empty: each model's 7)", elem_id="evaluate_cfg"
        )
        seeds = gr.Number(5, label="Seeds per cell", elem_id="evaluate_seeds")
    return [keys, categories, types, search, sample, sample_seed, cfg, seeds]


def _explicit_inputs() -> tuple[gr.Column, list[gr.components.Component]]:
    """The explicit mode's inputs (shown in that mode), in `_explicit_request`'s order."""
    with gr.Column(visible=False) as box:
        gr.Markdown(
            "## New explicit-color evaluation\nModels × prompts (color systems × tasks × subset) × images "
            "per prompt, at each model's default guidance; each object is masked and its dominant color "
            "scored against the target's candidate set (docs/explicit.md)."
        )
        with gr.Row():
            systems = gr.CheckboxGroup(
                list(SYSTEMS),
                value=list(DEFAULT_SYSTEMS),
                label="Color systems",
                elem_id="evaluate_x_systems",
            )
            tasks = gr.CheckboxGroup(
                list(TASKS), value=list(TASKS), label="Tasks", elem_id="evaluate_x_tasks"
            )
        with gr.Row():
            size = gr.Textbox(
                "compact",
                label="Subset: compact (< 10K prompts), full (44K) or rounds per color",
                elem_id="evaluate_x_size",
            )
            samples = gr.Number(SAMPLES, label="Images per prompt", elem_id="evaluate_x_samples")
            seed = gr.Number(0, label="Prompt seed", elem_id="evaluate_x_seed")
            cfg = gr.Textbox(
                "", label="Guidance scales (empty: each model's own default)", elem_id="evaluate_x_cfg"
            )
        with gr.Row():
            colors = gr.Textbox(
                "", label="Only these colors (comma-separated names; empty: all)", elem_id="evaluate_x_colors"
            )
            objects = gr.Dropdown(
                [o.name for o in load_objects()],
                value=[],
                multiselect=True,
                filterable=True,
                label="Only these objects (empty: all 100)",
                elem_id="evaluate_x_objects",
            )
            presence = gr.Number(
                PRESENCE_THRESHOLD, label="Presence: detection score at least", elem_id="evaluate_x_presence"
            )
    return box, [tasks, systems, size, samples, seed, cfg, colors, objects, presence]


def _explicit_request(models, tasks, systems, size, samples, seed, cfg, colors, objects, presence):
    """The explicit run the form describes (ValueError naming a field)."""
    size = (size or "").strip()
    return explicit_jobs.ExplicitRequest(
        models=tuple(models or ()),
        tasks=tuple(tasks or ()),
        systems=tuple(systems or ()),
        size=whole_number(size, "subset") if size[:1].isdigit() else size,
        seed=whole_number(seed, "prompt seed"),
        samples=whole_number(samples, "images per prompt"),
        cfg_scales=planning.parse_scales(cfg),
        colors=tuple(c.strip() for c in (colors or "").split(",") if c.strip()),
        objects=tuple(objects or ()),
        presence_threshold=_fraction(presence, "presence threshold"),
    )


def _fraction(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number in [0, 1], got {value!r}")
    return float(value)


def _segmenter_inputs() -> list[gr.components.Component]:
    with gr.Accordion("Masking (GroundingDINO + SAM)", open=False), gr.Row():
        preset = gr.Radio(
            list(jobs.SEGMENTER_PRESETS),
            value="paper",
            label="Models",
            info="paper: grounding-dino-base + sam-vit-huge; tiny-random: test models",
            elem_id="evaluate_segmenter",
        )
        box = gr.Number(BOX_THRESHOLD, label="Box threshold", elem_id="evaluate_box")
        text = gr.Number(TEXT_THRESHOLD, label="Text threshold", elem_id="evaluate_text")
    return [preset, box, text]


def _executor_inputs() -> tuple[list[gr.components.Component], gr.Button, gr.Markdown]:
    with gr.Accordion("Where it runs (executor)", open=False):
        with gr.Row():
            kind = gr.Radio(
                list(jobs.EXECUTORS),
                value="in-process",
                label="Executor",
                info="in-process: this server's job thread; ray: a Ray cluster (docs/scale-out.md)",
                elem_id="evaluate_executor",
            )
            address = gr.Textbox(
                label="Ray cluster address (host:port; empty: $RAY_ADDRESS or a local cluster)",
                elem_id="evaluate_ray_address",
            )
            check = gr.Button("Check cluster", elem_id="evaluate_check_cluster")
        cluster = gr.Markdown(elem_id="evaluate_cluster")
    return [kind, address], check, cluster


def _executor_choice(kind: str, address: str) -> tuple[jobs.ExecutorChoice, str]:
    """The job's executor and a line on where it runs; connects to the cluster for ``ray``
    (raising `RayUnavailable`, a ValueError, when Ray is missing or unreachable)."""
    choice = jobs.ExecutorChoice(kind or "in-process", (address or "").strip())
    if choice.kind != "ray":
        return choice, ""
    from evaluation.pipeline.ray_executor import connect

    return choice, f"Ray cluster: {escape(connect(choice.address).describe())}."


def _cluster(db, actor, kind: str, address: str) -> str:
    """The resources of the Ray cluster at `address` (nodes, CPUs, GPUs), before a run starts."""
    if (kind or "in-process") != "ray":
        return "In-process: jobs run in this server's job thread, one at a time."
    return _executor_choice(kind, address)[1]


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


def _progress_section():
    gr.Markdown("## Runs\nProgress is read from the database: jobs keep running when this page closes.")
    progress = gr.HTML(elem_id="evaluate_progress")
    with gr.Row():
        run_pick = gr.Dropdown([], label="Run", allow_custom_value=True, elem_id="evaluate_run")
        cancel = gr.Button("Cancel", variant="stop", elem_id="evaluate_cancel")
        resume = gr.Button("Resume", elem_id="evaluate_resume")
        refresh = gr.Button("Refresh", elem_id="evaluate_refresh")
    timer = gr.Timer(POLL_SECONDS, active=False)
    return progress, run_pick, cancel, resume, refresh, timer


def _import_section():
    gr.Markdown(
        "## Import images made elsewhere\nName files `model__concept__style__cfg__seed.png` or "
        "list them in a `manifest.csv` (columns file, model, concept, style, cfg, seed). Upload a zip, "
        "or name a folder under the server's `imports/` data folder."
    )
    with gr.Row():
        upload = gr.File(label="Zip of images", file_types=[".zip"], elem_id="evaluate_upload")
        folder = gr.Textbox(label="…or folder under imports/", elem_id="evaluate_folder")
        name = gr.Textbox(label="Run name (empty: a dated name)", elem_id="evaluate_import_name")
    button = gr.Button("Import, mask and score", elem_id="evaluate_import")
    report = gr.Markdown(elem_id="evaluate_import_report")
    rejected = gr.Dataframe(headers=REJECTED_HEADERS, interactive=False, elem_id="evaluate_rejected")
    return upload, folder, name, button, report, rejected


def _request(
    models, keys, categories, types, search, sample, sample_seed, styles, cfg, seeds
) -> planning.EvaluationRequest:
    query = planning.ConceptQuery(
        tuple(keys or ()),
        tuple(categories or ()),
        tuple(types or ()),
        search or "",
        whole_number(sample, "sample size"),
        whole_number(sample_seed, "sample seed"),
    )
    return planning.EvaluationRequest(
        tuple(models or ()),
        query,
        tuple(styles or ()),
        planning.parse_scales(cfg),
        whole_number(seeds, "seeds per cell"),
    )


def _run_name(name: str | None, prefix: str) -> str:
    name = (name or "").strip()
    return runs.check_run_name(name or f"{prefix}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}")


def _preview(registry, concepts, ctx: AppContext, device: planning.DeviceInfo):
    def preview(
        db,
        actor,
        models,
        keys,
        categories,
        types,
        search,
        sample,
        sample_seed,
        styles,
        cfg,
        seeds,
        mode="implicit",
        x_tasks=TASKS,
        x_systems=DEFAULT_SYSTEMS,
        x_size="compact",
        x_samples=SAMPLES,
        x_seed=0,
        x_cfg=None,
        x_colors=None,
        x_objects=None,
        x_presence=PRESENCE_THRESHOLD,
    ) -> str:
        """The number of images the selection implies and the time they should take here."""
        explicit = (x_tasks, x_systems, x_size, x_samples, x_seed, x_cfg, x_colors, x_objects, x_presence)
        if _mode(mode) == "explicit":
            return _explicit_plan(db, registry, ctx, device, models, explicit)
        request = _request(models, keys, categories, types, search, sample, sample_seed, styles, cfg, seeds)
        items, config = planning.plan_request(request, registry, concepts, ctx.config.data_dir / "models")
        estimate = planning.estimate_seconds(items, device.kind, planning.measured_seconds(db))
        return _plan_markdown(items, config, estimate, planning.cpu_warning(device, request.models), device)

    return preview


def _mode(mode: str) -> str:
    """The form's mode, checked."""
    if mode not in dict(map(reversed, MODES)):
        raise ValueError(f"`mode` must be one of {[m for _, m in MODES]}, got {mode!r}")
    return mode


def _explicit_items(registry, ctx: AppContext, models, explicit):
    """The explicit run the form describes: request, items, configuration and prompts."""
    request = _explicit_request(models, *explicit)
    planned = explicit_jobs.plan_explicit_request(request, registry, ctx.config.data_dir / "models")
    return (request, *planned)


def _explicit_plan(db, registry, ctx: AppContext, device: planning.DeviceInfo, models, explicit) -> str:
    """The explicit run's size and time on `device`, as Markdown."""
    request, items, config, prompts = _explicit_items(registry, ctx, models, explicit)
    plan = plan_summary(items, prompts, device.kind, planning.measured_seconds(db))
    scales = len({item["cfg"] for item in items})
    lines = [
        f"**{plan.images} images** ({len(config['models'])} models × {plan.prompts} prompts × {scales} "
        f"guidance scales × {config['samples']} images per prompt), {plan.objects} objects to mask and score, "
        f"about **{planning.format_duration(plan.estimate.seconds)}** on {escape(device.name)}."
    ]
    lines += _model_lines(plan.estimate)
    if not (request.colors or request.objects):
        lines.append(f"\n{QUICK_TRY}")
    warning = planning.cpu_warning(device, request.models)
    if warning:
        lines.append(f"\n⚠️ {escape(warning)}")
    return "\n".join(lines)


#: Under an explicit plan that uses every color and object.
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
}


def _model_lines(estimate) -> list[str]:
    return [
        f"- {escape(model)}: {n} images × {each:.2g} s ({ORIGINS.get(origin, origin)})"
        for model, (n, each, origin) in estimate.per_model.items()
    ]


def _plan_markdown(items, config, estimate, warning: str, device: planning.DeviceInfo) -> str:
    scales = len({item["cfg"] for item in items})
    lines = [
        f"**{len(items)} images** ({len(config['models'])} models × {len(config['concepts'])} concepts × "
        f"{len(config['styles'])} styles × {scales} guidance scales × {config['samples']} seeds), "
        f"about **{planning.format_duration(estimate.seconds)}** on {escape(device.name)}."
    ]
    lines += _model_lines(estimate)
    if warning:
        lines.append(f"\n⚠️ {escape(warning)}")
    return "\n".join(lines)


def _segmenter(ctx: AppContext, preset: str, box: float, text: float) -> jobs.SegmenterSpec:
    return jobs.segmenter_preset(preset, ctx.config.data_dir / "models", float(box), float(text))


def _start(registry, concepts, ctx: AppContext, manager: jobs.JobManager):
    def start(
        db,
        actor,
        name,
        models,
        keys,
        categories,
        types,
        search,
        sample,
        sample_seed,
        styles,
        cfg,
        seeds,
        preset,
        box,
        text,
        kind="in-process",
        address=None,
        mode="implicit",
        x_tasks=TASKS,
        x_systems=DEFAULT_SYSTEMS,
        x_size="compact",
        x_samples=SAMPLES,
        x_seed=0,
        x_cfg=None,
        x_colors=None,
        x_objects=None,
        x_presence=PRESENCE_THRESHOLD,
    ):
        """Store the run and queue its job; returns a message and the run picker."""
        selection = (models, keys, categories, types, search, sample, sample_seed, styles, cfg, seeds)
        explicit = (x_tasks, x_systems, x_size, x_samples, x_seed, x_cfg, x_colors, x_objects, x_presence)
        explicit_mode = _mode(mode) == "explicit"
        run = _run_name(name, "explicit" if explicit_mode else "eval")
        if explicit_mode:
            _, items, config, prompts = _explicit_items(registry, ctx, models, explicit)
        else:
            items, config = planning.plan_request(
                _request(*selection), registry, concepts, ctx.config.data_dir / "models"
            )
        segmenter = _segmenter(ctx, preset, box, text)
        executor, where = _executor_choice(kind, address)
        if executor.kind == "in-process":  # on a cluster the workers hold the weights
            jobs.check_weights(config, segmenter)
        with transaction(db):
            n = research.create_evaluation_run(db, actor.pseudonym, run, items, config)
            if explicit_mode:
                runs.store_explicit_prompts(db, run, prompts)
        state = manager.submit(run, segmenter, executor)
        return f"Run **{escape(run)}**: {n} images, job {state.state}." + (
            f" {where}" if where else ""
        ), _run_choices(db, run)

    return start


def _run_choices(db, selected: str | None = None) -> gr.Dropdown:
    names = [r["name"] for r in runs.list_runs(db)]
    return gr.Dropdown(choices=names, value=selected if selected in names else None)


def _progress(manager: jobs.JobManager):
    def progress(db, actor) -> str:
        """Progress bars of the newest runs, with the job state on this server."""
        rows = [
            (
                r,
                runs.run_progress(db, r["name"]),
                manager.state(r["name"]),
                manager.workers(r["name"]),
                explicit_jobs.is_explicit(runs.run_config(db, r["name"])),
            )
            for r in runs.list_runs(db)[:RUNS_SHOWN]
        ]
        return _progress_html(rows)

    return progress


def _progress_html(rows) -> str:
    if not rows:
        return "<p>No runs yet.</p>"
    body = []
    for run, done, job, workers, explicit in rows:
        fraction, complete = (
            explicit_jobs.explicit_progress(done) if explicit else (done.fraction, done.complete)
        )
        state = (
            job.state if job.state != "idle" else ("complete" if complete else "stopped (resume to continue)")
        )
        note = (f" · {job.stage}" if job.stage else "") + (f" — {job.message}" if job.message else "")
        counts = (
            f"{done.generated}/{done.items} images, {done.segmented} scored ({done.usable} masked), "
            f"{done.failed} failed"
            if explicit
            else f"{done.generated}/{done.items} images, {done.segmented} masked ({done.usable} usable), "
            f"{done.failed} failed, {done.extracted}/{done.groups} distributions"
        )
        kind = "explicit" if explicit else run["kind"]
        body.append(
            f"<tr><td>{html.escape(run['name'])}</td><td>{html.escape(kind)}</td>"
            f"<td><progress max='1' value='{fraction:.4f}'></progress> {100 * fraction:.0f}%</td>"
            f"<td>{counts}{_worker_lines(workers)}</td>"
            f"<td data-state='{html.escape(state)}'>{html.escape(state + note)}</td></tr>"
        )
    head = "<tr><th>Run</th><th>Kind</th><th>Progress</th><th>Counts</th><th>Job</th></tr>"
    return f"<table class='evaluate-runs'>{head}{''.join(body)}</table>"


def _cancel(manager: jobs.JobManager):
    def cancel(db, actor, run: str) -> str:
        """Ask the run's job to stop after its current batch (what is done stays)."""
        state = manager.cancel(run or "")
        research.record_job_action(db, actor.pseudonym, "cancel_evaluation", run)
        return f"Run **{escape(run)}**: {state.state}."

    return cancel


def _resume(ctx: AppContext, manager: jobs.JobManager):
    def resume(
        db,
        actor,
        run: str,
        preset: str,
        box: float,
        text: float,
        kind: str = "in-process",
        address: str | None = None,
    ) -> str:
        """Queue a stopped run again; it continues where it stopped."""
        executor, where = _executor_choice(kind, address)
        segmenter = _segmenter(ctx, preset, box, text)
        if executor.kind == "in-process":
            jobs.check_weights(runs.run_config(db, run) if run else None, segmenter)
        research.record_job_action(db, actor.pseudonym, "resume_evaluation", run or "")
        state = manager.submit(run, segmenter, executor)
        return f"Run **{escape(run)}**: job {state.state}." + (f" {where}" if where else "")

    return resume


def _import(ctx: AppContext, concepts, manager: jobs.JobManager):
    def import_images(db, actor, name, upload, folder, preset, box, text, kind="in-process", address=None):
        """Import a zip or folder of labelled images as a run and queue its masking and scoring."""
        run, segmenter = _run_name(name, "import"), _segmenter(ctx, preset, box, text)
        executor, _ = _executor_choice(kind, address)
        if executor.kind == "in-process":
            jobs.check_weights(None, segmenter)
        source, roots = _import_source(ctx, upload, folder)
        report = research.import_run(
            db, actor.pseudonym, run, source, ctx.config.data_dir, concepts, allowed_roots=roots
        )
        manager.submit(run, segmenter, executor)
        message = (
            f"Run **{escape(run)}**: {report.imported} images imported, {len(report.rejected)} left out; "
            "masking and scoring queued."
        )
        return message, [list(r) for r in report.rejected], _run_choices(db, run)

    return import_images


def _import_source(ctx: AppContext, upload, folder) -> tuple[str, list[Path]]:
    if upload and (folder or "").strip():
        raise ValueError("give either a zip upload or a folder, not both")
    if upload:
        return uploaded(str(upload), "upload"), [Path(gr.utils.get_upload_folder())]
    if not (folder or "").strip():
        raise ValueError("`folder` must name a folder under imports/ (or upload a zip), got nothing")
    root = ctx.config.data_dir / "imports"
    return str(root / folder.strip()), [root]


def _on_session(ctx: AppContext):
    @own_session
    def on_session(token: str) -> tuple[gr.Timer, gr.Dropdown]:
        """Poll progress and list the runs only for people who may see them."""
        if not visible_to(current_actor(ctx, token), ROLES):
            return gr.Timer(active=False), gr.Dropdown(choices=[], value=None)
        with ctx.db() as db:
            return gr.Timer(active=True), _run_choices(db)

    return on_session
