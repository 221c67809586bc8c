"""Judge audit: how far to trust a vision-language model that judges colors (issue 18).

A researcher lists judges (``pixel``, ``random``, ``contrastive:MODEL``, ``yesno:MODEL``),
the number of synthetic probe items and a seed. The tab runs the audit
(`evaluation.judges.report.audit`, Rainbow foils on synthetic renders) and shows the
accuracy table, the failure heatmap of the first judge listed other than the pixel
reference, and the files it wrote (CSV
and an HTML report) under the data folder's ``exports/judge-audit/``. Model judges load on
the server, on its GPU when it has one (a large model takes minutes), by hub id from the
Hugging Face cache or by the name of a folder in the data folder's ``models/``; any other
path is refused (`evaluation.models.availability.served_judge_source`).

The tab is a `JudgeAuditTab` (the shape of `app.tabs`): its handler is a method that names
who may call it (`app.common.role`) and returns ``{part: update}``; `EVENTS` is its wiring.
"""

from __future__ import annotations

import secrets

import gradio as gr
import numpy as np
import pandas as pd

from app.common import AppContext, note_area, role, seed_number, ui_only, whole_number
from app.guard import exports_folder
from app.tabs import On, Tab
from evaluation.analysis.figures import judge_failure_heatmap
from evaluation.judges.accuracy import SUMMARY_COLUMNS
from evaluation.judges.judges import parse_judge
from evaluation.judges.probes import synthetic_items
from evaluation.judges.report import audit
from evaluation.models.availability import judge_model_refusal, served_judge_source
from storage import iso
from storage.shown import shown

NAME = "judge_audit"
TITLE = "Judge audit"
ROLES = ("researcher",)
MAX_ITEMS = 2000
JUDGES_HELP = (
    "Judges, one per line: pixel (the reference), random (chance), contrastive:MODEL (CLIP-like) "
    "or yesno:MODEL (image-text-to-text), MODEL a hub id in the server's Hugging Face cache or the "
    "name of a folder in the data folder's models/"
)


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Judge audit tab inside the current `gr.Tab`."""
    JudgeAuditTab(ctx, {"session_token": session_token, **_layout()}).wire()


RESULTS = ("table", "heatmap", "files")
"""What an audit shows (`JudgeAuditTab.run`), in the order API clients receive it."""
EVENTS = (
    # The last audit's results go first: a refused run must not leave them looking like its own.
    On("run.click", "cleared", (), RESULTS),
    On(
        "then",
        "run",
        ("session_token", "judges", "items", "seed"),
        RESULTS,
        "note",
        "judge_audit_run",
    ),
)
"""The tab's wiring (`JudgeAuditTab.wire`)."""


class JudgeAuditTab(Tab):
    """The Judge audit tab of one app: its parts by name, and the handler `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`) and ``session_token``.
    """

    EVENTS = EVENTS

    @ui_only
    def cleared(self) -> dict:
        """No results on the page while an audit is checked and run."""
        return self.named(table=_empty_table(), heatmap=None, files=None)

    @role(*ROLES, "admin")
    def run(self, db, actor, judges: str, items, seed) -> dict:
        """Audit the listed judges on synthetic items; the table, a heatmap and the file paths."""
        specs = [line.strip() for line in (judges or "").splitlines() if line.strip()]
        if not specs:  # it said "`specs` is empty", a name the page does not show (outside probe 220)
            raise ValueError(
                "`Judges` is empty: name at least one judge, one per line (pixel, random, contrastive:MODEL "
                "or yesno:MODEL)"
            )
        if twice := sorted({spec for spec in specs if specs.count(spec) > 1}):
            # It ran them twice and pooled their pairs under one name (outside probe 223)
            raise ValueError(
                f"`Judges` lists {', '.join(map(shown, twice))} more than once: list each judge once"
            )
        n = whole_number(items, "items", minimum=1, maximum=MAX_ITEMS)
        seed = seed_number(seed, "seed")
        sources = {spec: self._source(spec) for spec in specs}
        rng = np.random.default_rng(seed)
        folder = exports_folder(
            self.ctx.config.data_dir, "judge-audit", f"{iso()[:19].replace(':', '')}-{secrets.token_hex(16)}"
        )
        report = audit(specs, synthetic_items(n, rng=rng), folder, rng=rng, device=_device(), sources=sources)
        first, matrix = _shown_matrix(report.matrices)
        fig = judge_failure_heatmap(matrix, title=f"{first}: failure rate of replacement foils")
        results = {"table": report.summary.round(3), "heatmap": fig, "files": [str(p) for p in report.paths]}
        return {self.parts[name]: results[name] for name in RESULTS}

    def _source(self, spec: str) -> str | None:
        """Where the app loads `spec`'s model from (`served_judge_source`), checked before any
        judge loads; None for pixel and random. A ValueError names a path outside the models
        folder, or weights not on this machine."""
        kind, model = parse_judge(spec)
        if not model:
            return None
        source = served_judge_source(model, self.ctx.config.data_dir / "models")
        problem = judge_model_refusal(kind, source, what=f"judge {shown(spec)}: the model")
        if problem:
            raise ValueError(problem.replace(source, model))  # the model as typed, no server path
        return source


def _shown_matrix(matrices: dict[str, pd.DataFrame]) -> tuple[str, pd.DataFrame]:
    """The judge whose failures the heatmap shows, with its matrix: the first listed other
    than ``pixel``, the reference, whose map is all zeros by construction (outside probe 220:
    with the docs' order, pixel first, the heatmap never showed a model's failures); pixel
    when it is alone."""
    return next(((spec, m) for spec, m in matrices.items() if spec != "pixel"), next(iter(matrices.items())))


def _empty_table() -> pd.DataFrame:
    """The summary table's columns and no row (Gradio's default reads "1 2 3")."""
    return pd.DataFrame(columns=list(SUMMARY_COLUMNS))


def _layout() -> dict:
    """The tab's components, by the names `EVENTS` uses."""
    parts = {}
    with gr.Row():
        parts["judges"] = gr.Textbox(
            "pixel\nrandom", lines=4, label=JUDGES_HELP, elem_id="judge_audit_judges"
        )
        with gr.Column():
            parts["items"] = gr.Number(
                200, label=f"Synthetic probe items (1-{MAX_ITEMS})", elem_id="judge_audit_items"
            )
            parts["seed"] = gr.Number(0, label="Seed", elem_id="judge_audit_seed")
    parts["run"] = gr.Button("Run the audit", variant="primary", elem_id="judge_audit_run")
    parts["note"] = note_area("judge_audit_note")
    parts["table"] = gr.Dataframe(
        _empty_table(),
        label="Pair-wise accuracy (match accepted and foil rejected) and plain accuracy per split",
        interactive=False,
        elem_id="judge_audit_table",
    )
    parts["heatmap"] = gr.Plot(
        label="Where the first judge listed other than pixel (the reference) fails (~ adjacent, ⚡ complementary)",
        elem_id="judge_audit_heatmap",
    )
    parts["files"] = gr.File(
        label="Exports", file_count="multiple", interactive=False, height=140, elem_id="judge_audit_files"
    )
    return parts


def _device() -> str:
    from evaluation.cli import resolve_device

    return resolve_device("auto")
