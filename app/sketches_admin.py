"""The Sketches tab (admin): which base concepts lack a sketch, importing, generating, choosing.

Sections: (1) coverage: base concepts without a selected sketch; (2) import PNG, JPEG,
WebP or SVG files (several at once, e.g. a whole folder selected in the file dialog),
each vetted as line art and normalised, or refused with the reason
(`annotation.sketches.library.import_sketches`); (3) a concept's sketches and choosing the
one designers color; (4) where a text-to-image model of ``evaluation/models.toml`` can be
loaded, five candidates from the paper's sketch prompt (Appendix B.2), of which the line
art ones are stored for (3).

Endpoints (admin only): ``sketches_missing``, ``sketches_import(files, concept, select)``,
``sketches_list(concept)``, ``sketches_select(sketch_id, why)`` and
``sketches_generate(model, concept)``.
"""

from __future__ import annotations

import json

import gradio as gr
import numpy as np

from annotation.files import resolve
from annotation.sketches import library as sketch_store
from app.common import AppContext, handler, id_field, note_area, uploaded, whole_number, wire

NAME = "sketches"
TITLE = "Sketches"
ROLES = ("admin",)
MISSING_HEADERS = ["base_concept", "category"]
IMPORT_HEADERS = ["file", "concept", "result"]
SKETCH_HEADERS = ["sketch_id", "source", "selected", "size", "created", "details"]
_FROM_NAMES = "(from the file names)"


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Sketches tab inside the current `gr.Tab`."""
    admin = handler(ctx, *ROLES)
    with ctx.db() as db:
        bases = sketch_store.base_concepts(db)
    parts = {
        **_coverage_section(),
        **_import_section(bases),
        **_browse_section(bases),
        **_generate_section(bases),
    }
    wire(
        parts["refresh"].click,
        admin(_missing),
        session_token,
        [parts["coverage"], parts["missing"]],
        note=parts["coverage"],
        api_name="sketches_missing",
    )
    wire(
        parts["import"].click,
        admin(_import(ctx)),
        [session_token, parts["files"], parts["import_base"], parts["select"]],
        parts["results"],
        note=note_area("sketches_import_note"),
        api_name="sketches_import",
    )
    wire(
        parts["show"].click,
        admin(_list(ctx)),
        [session_token, parts["base"]],
        [parts["gallery"], parts["table"]],
        note=parts["message"],
        api_name="sketches_list",
    )
    wire(
        parts["use"].click,
        admin(_select),
        [session_token, parts["sketch_id"], parts["why"]],
        parts["message"],
        note=parts["message"],
        api_name="sketches_select",
    )
    wire(
        parts["generate"].click,
        admin(_generate(ctx)),
        [session_token, parts["model"], parts["generate_base"]],
        parts["candidates"],
        note=note_area("sketches_generate_note"),
        api_name="sketches_generate",
    )


def _coverage_section() -> dict:
    gr.Markdown(
        "## Base concepts without a sketch\nOnly concepts whose base concept has a "
        "selected sketch are handed to designers."
    )
    refresh = gr.Button("Refresh", elem_id="sketches_refresh")
    coverage = gr.Markdown(elem_id="sketches_coverage")
    missing = gr.Dataframe(
        headers=MISSING_HEADERS, datatype="str", interactive=False, max_height=320, elem_id="sketches_missing"
    )
    return {"refresh": refresh, "coverage": coverage, "missing": missing}


def _import_section(bases: list[str]) -> dict:
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
        base = gr.Dropdown(
            [_FROM_NAMES, *bases], value=_FROM_NAMES, label="Concept", elem_id="sketches_import_base"
        )
        select = gr.Checkbox(True, label="Use as the concept's sketch", elem_id="sketches_select")
        run = gr.Button("Import", variant="primary", elem_id="sketches_import")
    results = gr.Dataframe(
        headers=IMPORT_HEADERS, datatype="str", interactive=False, wrap=True, elem_id="sketches_results"
    )
    return {"files": files, "import_base": base, "select": select, "import": run, "results": results}


def _browse_section(bases: list[str]) -> dict:
    gr.Markdown(
        "## A concept's sketches\nDesigners color the selected one; colorings keep "
        "the sketch they were made on."
    )
    with gr.Row():
        base = gr.Dropdown(bases, value=None, label="Base concept", elem_id="sketches_base")
        show = gr.Button("Show sketches", elem_id="sketches_show")
    gallery = gr.Gallery(
        label="Sketches",
        columns=5,
        height=280,
        object_fit="contain",
        preview=False,
        elem_id="sketches_gallery",
    )
    table = gr.Dataframe(
        headers=SKETCH_HEADERS, datatype="str", interactive=False, wrap=True, elem_id="sketches_table"
    )
    with gr.Row():
        sketch_id = id_field("Sketch id", "sketches_sketch_id")
        why = gr.Textbox(label="Why (kept in the audit trail)", scale=2, elem_id="sketches_why")
        use = gr.Button("Use this sketch", elem_id="sketches_use")
    message = gr.Markdown(elem_id="sketches_message")
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


def _generate_section(bases: list[str]) -> dict:
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
            label="Text-to-image model (evaluation/models.toml)",
            elem_id="sketches_model",
        )
        base = gr.Dropdown(bases, value=None, label="Base concept", elem_id="sketches_generate_base")
        generate = gr.Button("Generate 5 candidates", elem_id="sketches_generate")
    candidates = gr.Gallery(
        label="Candidates",
        columns=5,
        height=280,
        object_fit="contain",
        preview=False,
        elem_id="sketches_candidates",
    )
    return {"model": model, "generate_base": base, "generate": generate, "candidates": candidates}


def _models() -> list[tuple[str, str]]:
    """Registry models as dropdown choices; none when the registry is not installed."""
    try:
        from evaluation.models.registry import load_registry
    except ModuleNotFoundError:
        return []
    return [(f"{spec.name} ({key})", key) for key, spec in load_registry().items()]


def _missing(db, actor) -> tuple[str, list[list]]:
    """How many base concepts have a sketch, and those that lack one."""
    missing = sketch_store.bases_without_sketch(db)
    total = len(sketch_store.base_concepts(db))
    summary = f"**{total - len(missing)} of {total}** base concepts have a sketch."
    return summary, [[r["base"], r["category"]] for r in missing]


def _import(ctx: AppContext):
    def import_files(db, actor, files: list | None, base: str, select: bool) -> list[list]:
        """Vet, normalise and store uploaded sketch files; one result row per file."""
        if not files:
            raise ValueError("`files` is empty: choose one or more PNG, JPEG, WebP or SVG files")
        paths = [uploaded(f if isinstance(f, str) else f.name, "files") for f in files]
        target = None if base in (None, "", _FROM_NAMES) else base
        results = sketch_store.import_sketches(
            db,
            ctx.config.data_dir,
            paths,
            base=target,
            select=bool(select),
            actor=actor.pseudonym,
            max_pixels=ctx.config.max_upload_pixels,
            max_bytes=ctx.config.max_upload_bytes,
        )
        return [
            [r.name, r.base or "", f"imported as sketch {r.sketch_id}" if r.ok else f"refused: {r.reason}"]
            for r in results
        ]

    return import_files


def _list(ctx: AppContext):
    def list_sketches(db, actor, base: str) -> tuple[list[tuple[str, str]], list[list]]:
        """A base concept's sketches: images and a table."""
        if not base:
            raise ValueError("`concept` is empty: pick a base concept")
        rows = sketch_store.sketches_of(db, base)
        gallery = [
            (
                str(resolve(ctx.config.data_dir, r["path"])),
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
                r["created"][:16].replace("T", " "),
                ", ".join(f"{k}: {v}" for k, v in json.loads(r["meta"]).items()),
            ]
            for r in rows
        ]
        return gallery, table

    return list_sketches


def _select(db, actor, sketch_id: str, why: str) -> str:
    """Make a sketch its base concept's sketch for new tasks."""
    sketch_id = whole_number(sketch_id, "sketch id")
    sketch_store.select_sketch(db, sketch_id, actor=actor.pseudonym, why=why or "")
    row = sketch_store.get_sketch(db, sketch_id)
    return f"Sketch {row['id']} is now the sketch of **{row['base']}**."


def _generate(ctx: AppContext):
    def generate(db, actor, model: str, base: str) -> list[tuple[np.ndarray, str]]:
        """Generate five candidates for a base concept with a registry model."""
        from evaluation.models.registry import get_model, load_pipeline

        if not model or not base:
            raise ValueError("pick a model and a base concept first")
        spec = get_model(model)
        # The paper gives no guidance scale for sketches: the middle of the model's sweep.
        pipeline = load_pipeline(spec, device=_device())
        candidates = sketch_store.generate_candidates(
            db,
            ctx.config.data_dir,
            base,
            pipeline,
            ctx.rng,
            guidance_scale=spec.cfg_scales[len(spec.cfg_scales) // 2],
            steps=spec.steps,
            resolution=spec.resolution,
            guidance_param=spec.guidance_param,
            model=spec.key,
            call_kwargs=dict(spec.call_kwargs),
            actor=actor.pseudonym,
        )
        return [
            (
                c.image,
                f"stored as sketch {c.sketch_id}" if c.sketch_id is not None else f"refused: {c.reason}",
            )
            for c in candidates
        ]

    return generate


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
