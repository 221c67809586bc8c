"""The Sketches tab (admin): which base concepts lack a sketch, importing, generating, choosing.

Sections: (1) coverage: base concepts without a selected sketch; (2) import PNG, JPEG,
WebP or SVG files (several at once, e.g. a whole folder selected in the file dialog),
each vetted as line art and normalised, or refused with the reason
(`annotation.sketches.library.import_sketches`); (3) a concept's sketches and choosing the
one designers color; (4) where a text-to-image model of ``evaluation/models/models.toml`` can be
loaded, five candidates from the paper's sketch prompt (Appendix B.2), of which the line
art ones are stored for (3).

Endpoints (admin only): ``sketches_missing``, ``sketches_import(files, base, select)``,
``sketches_list(base)``, ``sketches_select(base, sketch_id, why)`` and
``sketches_generate(model, base)`` (``base``: a base concept).

The tab is a `SketchesTab` (the shape of `app.tabs`): its handlers are methods marked
`app.common.role` (the admin alone) that return ``{part: update}``; `EVENTS` is its wiring.
"""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr

from annotation.files import resolve
from annotation.sketches import library as sketch_store
from app.browser import concept_choices
from app.common import (
    NO_ROW,
    AppContext,
    checked_by_handler,
    discard_uploads,
    id_field,
    id_in_row,
    live,
    named_table,
    note_area,
    role,
    ui_only,
    uploaded,
    whole_number,
)
from app.tabs import On, Tab
from storage import shown_time
from storage.shown import printable

NAME = "sketches"
TITLE = "Sketches"
ROLES = ("admin",)
MISSING_HEADERS = ["base_concept", "category"]
IMPORT_HEADERS = ["file", "concept", "result"]
SKETCH_HEADERS = ["sketch_id", "source", "selected", "size", "created", "details"]
_FROM_NAMES = "(from the file names)"


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Sketches tab inside the current `gr.Tab`."""
    with ctx.db() as db:
        bases = sketch_store.base_concepts(db)
    parts = {
        **_coverage_section(),
        **_import_section(),
        **_browse_section(),
        **_generate_section(),
    }
    # The concept pickers get their choices at an admin's sign-in, as the Browser's do
    # (~13 kB of the page otherwise, issue 28.1).
    concept_choices(
        ctx,
        session_token,
        {parts["import_base"]: [_FROM_NAMES, *bases], parts["base"]: bases, parts["generate_base"]: bases},
        ROLES,
    )
    SketchesTab(ctx, {"session_token": session_token, "tab": tab, **parts}).wire()


_TOKEN = ("session_token",)
EVENTS = (
    # Filled as the tab opens, as the Leaderboards and Study tabs are; Refresh after an import.
    On(
        ("tab.select", "refresh.click"),
        "missing",
        _TOKEN,
        ("coverage", "missing"),
        "coverage",
        "sketches_missing",
    ),
    On(
        "import.click",
        "import_files",
        (*_TOKEN, "files", "import_base", "select"),
        ("results", "files"),
        "import_note",
        "sketches_import",
    ),
    # An import may select sketches: the list of concepts without one follows.
    On("then", "missing", _TOKEN, ("coverage", "missing"), "coverage"),
    On("show.click", "list_sketches", (*_TOKEN, "base"), ("gallery", "table"), "message", "sketches_list"),
    On("gallery.select", "pick", ("table",), ("sketch_id",)),
    On(
        "use.click",
        "select",
        (*_TOKEN, "base", "sketch_id", "why"),
        ("message", "gallery", "table"),
        "message",
        "sketches_select",
    ),
    # The candidates stored show under "A concept's sketches", where one is chosen.
    On(
        "generate.click",
        "generate",
        (*_TOKEN, "model", "generate_base"),
        ("generated", "candidates", "base", "gallery", "table"),
        "generate_note",
        "sketches_generate",
    ),
)
"""The tab's wiring, in the order Gradio registers it (`SketchesTab.wire`)."""


class SketchesTab(Tab):
    """The Sketches tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (the ``_*_section`` functions, the two notes) and
    ``session_token``.
    """

    EVENTS = EVENTS

    @role(*ROLES)
    def missing(self, db, actor) -> dict:
        """How many base concepts have a sketch, and those that lack one."""
        missing = sketch_store.bases_without_sketch(db)
        total = len(sketch_store.base_concepts(db))
        return self.named(
            coverage=f"**{total - len(missing)} of {total}** base concepts have a sketch.",
            missing=[[r["base"], r["category"]] for r in missing],
        )

    @role(*ROLES)
    def import_files(self, db, actor, files: list | None, base: str, select: bool) -> dict:
        """Vet, normalise and store uploaded sketch files; one result row per file. The
        files imported leave the upload list (a refusal keeps them there), so the next
        import is of the files added next."""
        if not files:
            raise ValueError(
                "no sketch file is chosen: add one or more PNG, JPEG, WebP or SVG files under Sketch files"
            )
        paths = [uploaded(f if isinstance(f, str) else f.name, "files") for f in files]
        target = None if base in (None, "", _FROM_NAMES) else base
        if target is not None and len(paths) > 1:
            names = ", ".join(repr(Path(p).name) for p in paths[:4]) + (", ..." if len(paths) > 4 else "")
            raise ValueError(
                f"`Concept` {target!r} is for a single file, and {len(paths)} are chosen ({names}): "
                "import one file for that concept, or set Concept to the one in each file's name"
            )
        config = self.ctx.config
        selected = sketch_store.selected_ids(db)
        results = sketch_store.import_sketches(
            db,
            config.data_dir,
            paths,
            base=target,
            select=bool(select),
            actor=actor.pseudonym,
            max_pixels=config.max_upload_pixels,
            max_bytes=config.max_upload_bytes,
        )
        discard_uploads(paths)  # each stored under the data folder or refused: they leave the list
        return self.named(
            results=[
                [
                    printable(r.name),  # a file's name is not refused for a control character
                    r.base or "",
                    _import_outcome(r, db if select and r.sketch_id not in selected else None),
                ]
                for r in results
            ],
            files=None,
        )

    @role(*ROLES)
    def list_sketches(self, db, actor, base: str) -> dict:
        """A base concept's sketches: images and a table."""
        if not base:
            raise ValueError("`concept` is empty: pick a base concept")
        return self.named(**self._sketches_of(db, base))

    def _sketches_of(self, db, base: str) -> dict:
        """The ``gallery`` and ``table`` updates of a base concept's sketches."""
        rows = sketch_store.sketches_of(db, base)
        gallery = [
            (
                str(resolve(self.ctx.config.data_dir, r["path"])),
                f"#{r['id']} {r['source']}{' · selected' if r['selected'] else ''}",
            )
            for r in rows
        ]
        table = [
            [
                str(r["id"]),
                r["source"],
                "yes" if r["selected"] else "",
                f"{r['width']}x{r['height']}",
                shown_time(r["created"]),
                ", ".join(f"{k}: {v}" for k, v in json.loads(r["meta"]).items()),
            ]
            for r in rows
        ]
        return {"gallery": gallery, "table": table}

    @ui_only
    def pick(self, table, evt: gr.SelectData) -> dict:
        """*Sketch id* set to the clicked picture's, read from the table's row in the same
        place (the gallery and the table list one concept's sketches in one order): outside
        probe 222 clicked a picture, pressed *Use this sketch* and read "`sketch id` must be
        a whole number, got nothing". A click from a gallery the table no longer matches
        changes nothing."""
        number = id_in_row(table, evt.index)
        return self.named(sketch_id=gr.skip() if number in (NO_ROW, None) else str(number))

    @role(*ROLES)
    def select(self, db, actor, base: str, sketch_id: str, why: str) -> dict:
        """Make a sketch of the concept on screen that concept's sketch for new tasks."""
        if not base:
            raise ValueError(
                "`Base concept` is empty: pick the concept, Show sketches, then give the id of one of them"
            )
        sketch_store.check_base(db, base)
        sketch_id = whole_number(sketch_id, "sketch id")
        was_selected = sketch_store.get_sketch(db, sketch_id)["selected"]
        sketch_store.select_sketch(db, sketch_id, actor=actor.pseudonym, why=why or "", base=base)
        return self.named(
            message=f"Sketch {sketch_id} is now the sketch of **{base}**."
            + ("" if was_selected else _drawing_changed(db, base)),
            **self._sketches_of(db, base),
        )

    @role(*ROLES)
    def generate(self, db, actor, model: str, base: str) -> dict:
        """Generate five candidates for a base concept with a registry model."""
        from evaluation.models.availability import missing_weights
        from evaluation.models.registry import load_pipeline, load_registry, tiny_in
        from evaluation.pipeline.planning import resolve_models

        if not model or not base:
            raise ValueError("pick a model and a base concept first")
        # A tiny test model is the data folder's, as the Evaluate tab's is (built on first use).
        [spec] = resolve_models(load_registry(), [model])
        spec = tiny_in(spec, self.ctx.config.data_dir / "models")
        sketch_store.check_base(db, base)  # before the model loads
        missing = missing_weights([spec])
        if missing:
            raise ValueError("; ".join(missing))
        # The paper gives no guidance scale for sketches: the middle of the model's sweep.
        pipeline = load_pipeline(spec, device=_device())
        candidates = sketch_store.generate_candidates(
            db,
            self.ctx.config.data_dir,
            base,
            pipeline,
            self.ctx.rng,
            guidance_scale=spec.cfg_scales[len(spec.cfg_scales) // 2],
            steps=spec.steps,
            resolution=spec.resolution,
            guidance_param=spec.guidance_param,
            model=spec.key,
            call_kwargs=dict(spec.call_kwargs),
            actor=actor.pseudonym,
        )
        return self.named(
            generated=_generated(candidates, base),
            candidates=[
                (
                    c.image,
                    f"stored as sketch {c.sketch_id}" if c.sketch_id is not None else f"refused: {c.reason}",
                )
                for c in candidates
            ],
            base=base,
            **self._sketches_of(db, base),
        )


def _generated(candidates: list, base: str) -> str:
    """What a generation stored, in a line: the candidates' captions are cut on the page."""
    stored = [c.sketch_id for c in candidates if c.sketch_id is not None]
    refused = sorted({c.reason.split(":")[0] for c in candidates if c.sketch_id is None})
    if stored:
        said = (
            f"**{len(stored)} of {len(candidates)}** candidates for **{base}** are line art, stored "
            f"unselected as sketch{'es' if len(stored) > 1 else ''} {', '.join(map(str, stored))}: "
            "choose one under *A concept's sketches* above."
        )
    else:
        said = f"**None of the {len(candidates)}** candidates for **{base}** is line art; nothing is stored."
    if refused:
        said += (
            f" Refused: {len(candidates) - len(stored)} ({'; '.join(refused)}; an image opened shows "
            "its caption in full)."
        )
    return said


def _drawing_changed(db, base: str) -> str:
    """What a new selected sketch of `base` does to the tasks designers hold, in words; ""
    when none holds one. Their unsaved work on the earlier drawing stays in their browsers
    (outside probe 217: it vanished from a designer's page without a word)."""
    held = sketch_store.held_tasks(db, base)
    if not held:
        return ""
    return (
        f" Designers hold {held} task{'' if held == 1 else 's'} on {base}: their pages show this drawing "
        "from their next load; unsaved work on the earlier drawing is not carried over to this one (their page "
        "says so) and comes back only if the concept goes back to that drawing."
    )


def _import_outcome(result: sketch_store.ImportResult, selected_in=None) -> str:
    """One file's line in the import results: stored, already there, or why it was refused;
    with `selected_in` (the database it was made its concept's sketch in, having been
    another) that it now is, and what that does to the tasks designers hold (outside probe
    218: a drawing already in the library switched the concept's sketch without a word)."""
    if not result.ok:
        return f"refused: {result.reason}"
    if result.known:
        said = f"already in the library as sketch {result.sketch_id} (the same drawing): nothing new stored"
        if selected_in is not None:
            said += f"; it is now the sketch of {result.base}"
    else:
        said = f"imported as sketch {result.sketch_id}" + (f" ({result.note})" if result.note else "")
    changed = "" if selected_in is None else _drawing_changed(selected_in, result.base)
    return said + ("." + changed if changed else "")


def _coverage_section() -> dict:
    gr.Markdown(
        "## Base concepts without a sketch\nOnly concepts whose base concept has a "
        "selected sketch are handed to designers."
    )
    refresh = gr.Button("Refresh", elem_id="sketches_refresh")
    coverage = gr.Markdown(elem_id="sketches_coverage")
    missing = named_table(
        "Concepts without a sketch",
        "sketches_missing",
        headers=MISSING_HEADERS,
        datatype="str",
        max_height=320,
    )
    return {"refresh": refresh, "coverage": coverage, "missing": missing}


def _import_section() -> dict:
    gr.Markdown(
        "## Import sketches\nBlack outlines on white with closed regions. Each file "
        "is named after its base concept (`bell pepper.png`), or pick the concept "
        "for a single file. Photos and colored or shaded pictures are refused."
    )
    files = gr.File(
        file_count="multiple",
        file_types=list(sketch_store.IMPORT_SUFFIXES),
        label="Sketch files",
        elem_id="sketches_files",
    )
    with gr.Row():
        base = checked_by_handler(
            gr.Dropdown(
                [_FROM_NAMES],
                value=_FROM_NAMES,
                label="Concept",
                elem_id="sketches_import_base",
                interactive=False,
            )
        )
        select = gr.Checkbox(True, label="Use as the concept's sketch", elem_id="sketches_select")
        run = gr.Button("Import", variant="primary", elem_id="sketches_import")
    note = note_area("sketches_import_note")
    results = named_table(
        "Imported sketches", "sketches_results", headers=IMPORT_HEADERS, datatype="str", wrap=True
    )
    return {
        "files": files,
        "import_base": base,
        "select": select,
        "import": run,
        "import_note": note,
        "results": results,
    }


def _browse_section() -> dict:
    gr.Markdown(
        "## A concept's sketches\nDesigners color the selected one; colorings keep "
        "the sketch they were made on."
    )
    with gr.Row():
        base = checked_by_handler(
            gr.Dropdown([], value=None, label="Base concept", elem_id="sketches_base", interactive=False)
        )
        show = gr.Button("Show sketches", elem_id="sketches_show")
    gallery = gr.Gallery(
        label="Sketches",
        columns=5,
        height=280,
        object_fit="contain",
        preview=False,
        elem_id="sketches_gallery",
    )
    table = named_table(
        "Sketches of the concept", "sketches_table", headers=SKETCH_HEADERS, datatype="str", wrap=True
    )
    with gr.Row():
        sketch_id = id_field("Sketch id", "sketches_sketch_id")
        why = gr.Textbox(label="Why (kept in the audit trail)", scale=2, elem_id="sketches_why")
        use = gr.Button("Use this sketch", elem_id="sketches_use")
    message = live(gr.Markdown(elem_id="sketches_message"))
    return {
        "base": base,
        "show": show,
        "gallery": gallery,
        "table": table,
        "sketch_id": sketch_id,
        "why": why,
        "use": use,
        "message": message,
    }


def _generate_section() -> dict:
    gr.Markdown(
        "## Generate candidates\nFive images from the paper's prompt (\"A simple "
        "cartoon black outline drawing of [concept], without coloring, without "
        'shadow, white background."). Candidates that are line art are stored '
        "unselected: choose one above. The model loads on the GPU when there is one; "
        "full-size models on a CPU take many minutes."
    )
    with gr.Row():
        model = gr.Dropdown(
            _models(),
            value=None,
            label="Text-to-image model (evaluation/models/models.toml)",
            elem_id="sketches_model",
        )
        base = checked_by_handler(
            gr.Dropdown(
                [], value=None, label="Base concept", elem_id="sketches_generate_base", interactive=False
            )
        )
        generate = gr.Button("Generate 5 candidates", elem_id="sketches_generate")
    note = note_area("sketches_generate_note")
    generated = live(gr.Markdown(elem_id="sketches_generated"))
    candidates = gr.Gallery(
        label="Candidates",
        columns=5,
        height=280,
        object_fit="contain",
        preview=False,
        elem_id="sketches_candidates",
    )
    return {
        "model": model,
        "generate_base": base,
        "generate": generate,
        "generate_note": note,
        "generated": generated,
        "candidates": candidates,
    }


def _models() -> list[tuple[str, str]]:
    """Registry models as dropdown choices; none when the registry is not installed."""
    try:
        from evaluation.models.registry import load_registry
    except ModuleNotFoundError:
        return []
    return [(f"{spec.name} ({key})", key) for key, spec in load_registry().items()]


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
