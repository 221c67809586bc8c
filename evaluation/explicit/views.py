"""What the app's Explicit colors tab shows, one call per view, so that its handlers stay short.

`explicit_report` gathers a run's tables (the paper's Table 4, Figures 2, 3 and 5, the
"asked for X, got Y" confusion, the coverage) from `evaluation.explicit.tables` and their
figures from `evaluation.explicit.figures`, with `run_standing`: how far the run has got (its
job's state, its images judged per model), so that the tables of a run not complete say they
cover its judged images alone; `export_report` writes them as CSV and HTML;
`browser_view` gives the per-prompt browser its overlays, swatches and metric rows. Colors are
named wherever they are shown with `evaluation.color.naming` (ISCC-NBS level 3 name and basic
term). `explicit_robustness` asks whether the ranking of models survives the scoring rule set
(`EXPLICIT_CHOICES`: the default ``paper`` reading against ``paper-mean``, ``released`` and
``released-closest``, `evaluation.explicit.rules`), comparing the models' accuracy (Table 4
cells: color system x task, and each model's mean) with `evaluation.analysis.robustness.compare`;
every rule set's verdicts are stored per object, so nothing is rescored. Nothing here imports
Gradio.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import sqlite_utils

from evaluation.analysis import robustness
from evaluation.color.naming import name_srgb
from evaluation.color.systems import load_system
from evaluation.explicit import figures, tables
from evaluation.explicit.browser import ImageView, prompt_view
from evaluation.explicit.prompts import TASKS
from evaluation.explicit.rules import DEFAULT_SCORING, SCORINGS, get_rules
from evaluation.explicit.standing import RunStanding, judged_coverage, standing_of, systems_in_order
from evaluation.pipeline import runs
from evaluation.pipeline.fileio import write_atomic
from evaluation.pipeline.overlay import overlay_mask
from evaluation.pipeline.stages import read_image
from storage.shown import in_words, shown
from storage.spreadsheet import csv_text

#: Column group of Table 4 holding the mean over color systems.
ALL_SYSTEMS = "all systems"
#: Dominant colors of Figure 3 are named in this system (the paper's 29 ISCC-NBS L2 names).
BIAS_SYSTEM = "iscc-nbs-l2"
#: The browser outlines each mask without tinting it: a tint would change the colors judged.
MASK_ALPHA = 0.0
METRIC_COLUMNS = (
    "image",
    "model",
    "sample",
    "object",
    "target",
    "dominant",
    "dominant name",
    "ΔChroma",
    "ΔChroma pass",
    "ΔE00",
    "ΔE00 pass",
    "Δhue (°)",
    "Δhue pass",
    "correct",
)


class NoExplicitRun(ValueError):
    """A name that is not an explicit-color run."""


def explicit_runs(db: sqlite_utils.Database) -> list[str]:
    """Names of the stored explicit-color runs, newest first."""
    return [r["name"] for r in runs.list_runs(db) if runs.is_explicit(runs.run_config(db, r["name"]))]


def check_run(db: sqlite_utils.Database, run: str) -> str:
    """`run` if it names an explicit-color run, else `NoExplicitRun` naming the field `run`."""
    known = explicit_runs(db)
    if not known:
        raise NoExplicitRun(
            "No explicit-color run yet: start one on the Evaluate tab (mode Explicit colors), then pick it here"
        )
    if run not in known:
        listed = ", ".join(repr(k) for k in known[:10]) + (" ..." if len(known) > 10 else "")
        raise NoExplicitRun(f"Pick an explicit-color run ({listed}); got {shown(str(run)[:80])}")
    return run


#: The explicit-color mode's choice -> (default, alternatives); see `explicit_robustness`.
EXPLICIT_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "explicit_rules": (DEFAULT_SCORING, tuple(s for s in SCORINGS if s != DEFAULT_SCORING)),
}


def explicit_summary(rows: Sequence[Mapping], scoring: str) -> pd.DataFrame:
    """Long form ``model, cell, metric, value`` of explicit-color accuracy under `scoring`:
    Table 4's cells (``system/task``, percent) and each model's mean over systems and tasks
    (cell ``all``, each system weighing the same)."""
    images = tables.image_verdicts(rows, scoring=scoring)
    cells = tables.accuracy_table(images, index=["model", "system"], columns="task")
    overall = tables.accuracy_table(images, index="model", columns="task")[tables.AVERAGE]
    cells = cells.drop(columns=tables.AVERAGE).stack().rename("value").reset_index()
    cells["cell"] = cells["system"] + "/" + cells["task"]
    parts = [cells[["model", "cell", "value"]], overall.rename("value").reset_index().assign(cell="all")]
    return pd.concat(parts, ignore_index=True).assign(metric=robustness.EXPLICIT_METRIC)[
        ["model", "cell", "metric", "value"]
    ]


def explicit_robustness(rows: Sequence[Mapping]) -> pd.DataFrame:
    """Does the ranking of models by explicit-color accuracy survive the rule set?

    Parameters
    ----------
    rows : sequence of Mapping
        `evaluation.pipeline.runs.explicit_results` rows of one or more runs (every rule set).

    Returns
    -------
    pandas.DataFrame
        `evaluation.analysis.robustness.REPORT_COLUMNS`, one row per alternative rule set of
        `EXPLICIT_CHOICES`: the largest change of any accuracy cell (percentage points),
        Kendall's τ between the models' rankings by mean accuracy, and the pairs that swap.

    Raises
    ------
    ValueError
        If `rows` hold no verdict of the default rule set.
    """
    ((choice, (default, alternatives)),) = EXPLICIT_CHOICES.items()
    base = explicit_summary(rows, default)
    if base.empty:
        raise ValueError(f"no explicit-color verdicts under the {default!r} rules: nothing to compare")
    report = [
        robustness.compare(base, explicit_summary(rows, alternative)).assign(
            choice=choice, default=default, alternative=alternative, recomputed="from the stored verdicts"
        )
        for alternative in alternatives
    ]
    return pd.concat(report, ignore_index=True)[list(robustness.REPORT_COLUMNS)]


def rule_set_robustness(
    db: sqlite_utils.Database, run: str, *, job=None, resume: str = "on the Evaluate tab"
) -> tuple[pd.DataFrame, str]:
    """Does the ranking of the run's models survive the rule set?

    Parameters
    ----------
    job : `evaluation.pipeline.jobs.JobState`, optional
        As `run_standing`: of a run not complete, the text begins with what its verdicts
        cover (`RunStanding.note`, `resume` saying where it is resumed): the comparison read
        as the whole run's (outside probe 231).

    Returns
    -------
    report : pandas.DataFrame
        `explicit_robustness` of the run's stored verdicts.
    text : str
        `evaluation.analysis.robustness.describe` of it (Markdown).

    Raises
    ------
    NoExplicitRun
        If `run` is not an explicit-color run.
    ValueError
        If it has no verdict under the default rules yet.
    """
    report = explicit_robustness(runs.explicit_results(db, run=check_run(db, run)))
    text = robustness.describe(report)
    if note := standing_of(db, run, job).note(resume=resume):
        text = f"{note}\n\n{text}"
    return report, text


def color_label(rgb) -> str:
    """``"level 3 name, basic term"`` of one sRGB uint8 color, e.g. ``"vivid red, red"``."""
    names = name_srgb(np.asarray(rgb, dtype=np.uint8).reshape(1, 3))
    return f"{names.l3[0]}, {names.basic[0]}"


def system_color_label(system: str, name: str) -> str:
    """A color name of `system` with its naming: ``"aquamarine (very light bluish green, green)"``;
    an ISCC-NBS level 3 name shows only its basic term."""
    table = load_system(system)
    l3, basic = color_label(table.rgb[table.index(name)]).split(", ")
    return f"{name} ({basic})" if l3 == name else f"{name} ({l3}, {basic})"


def table4(images: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 4: models x (color system, task) accuracy (%), each system's tasks and
    their average, then the mean over systems (`ALL_SYSTEMS`, each system weighing the same)."""
    blocks = {system: tables.accuracy_table(images, systems=[system]) for system in _systems(images)}
    blocks[ALL_SYSTEMS] = tables.accuracy_table(images)
    table = pd.concat(blocks, axis=1, names=["system", "task"])
    return table


def _systems(images: pd.DataFrame) -> list[str]:
    return systems_in_order(images.loc[images["scored"].astype(bool), "system"].unique())


#: Table 4's first column as the tab shows it (`stacked_systems`).
SYSTEM_COLUMN = "color system"


def stacked_systems(table: pd.DataFrame) -> pd.DataFrame:
    """Table 4 (`table4`) as the tab shows it: the color systems' blocks stacked, not side by side.

    Parameters
    ----------
    table : pandas.DataFrame
        `table4`: index ``model``, columns (system, task) with each system's ``average``.

    Returns
    -------
    pandas.DataFrame
        Columns `SYSTEM_COLUMN`, ``model``, ``average``, then the tasks in
        `evaluation.explicit.prompts.TASKS` order; one row per (system, model), the
        `ALL_SYSTEMS` block first, then the systems in `table`'s order; percent rounded to 2
        decimals, NaN where a system has no prompt of a task.
    """
    # Side by side, each system takes six columns: a two-system run was 19 columns, three
    # widths of a 1,400 px window, with the averages off-screen. Stacked, the width stays
    # eight columns whatever the number of systems and models, and the headline numbers (the
    # mean over systems, each block's average) come first.
    systems = list(dict.fromkeys(table.columns.get_level_values("system")))
    order = [ALL_SYSTEMS, *(s for s in systems if s != ALL_SYSTEMS)]
    stacked = pd.concat([table[s].assign(**{SYSTEM_COLUMN: s}) for s in order if s in systems])
    tasks = [t for t in TASKS if t in stacked.columns]
    shown = stacked.rename_axis("model").reset_index()
    return shown[[SYSTEM_COLUMN, "model", tables.AVERAGE, *tasks]].round(2).reset_index(drop=True)


def named_confusion(rows: list[dict], system: str, *, scoring: str = "paper") -> pd.DataFrame:
    """ "Asked for X, got Y" counts among `system`'s targets (dominant colors named in `system`),
    both axes labelled by `system_color_label`."""
    chosen = [r for r in rows if r["system"] == system]
    table = tables.confusion(chosen, scoring=scoring, system=system)
    if table.empty:
        return table
    table.index = [system_color_label(system, n) for n in table.index]
    table.columns = [system_color_label(system, n) for n in table.columns]
    return table.rename_axis(index="asked for", columns="got")


def run_standing(db: sqlite_utils.Database, run: str, *, job=None, owner: str | None = None) -> RunStanding:
    """How far explicit run `run` has got, with its job's state as the Evaluate tab shows it.

    Parameters
    ----------
    job : `evaluation.pipeline.jobs.JobState`, optional
        The state of the run's job in this process (`JobManager.state`); None when there is
        no job manager (the command line).
    owner : str, optional
        This process as a job's owner (default: `evaluation.pipeline.jobs.process_owner`): a
        job of another process holding the run reads as ``running in another process``.

    Raises
    ------
    NoExplicitRun
        If `run` is not an explicit-color run.
    """
    return standing_of(db, check_run(db, run), job, owner)


@dataclass(frozen=True)
class ExplicitReport:
    """Every table of one explicit run under one rule set, with its figures.

    Attributes
    ----------
    run, scoring : str
    rows : list of dict
        The run's verdict rows (`evaluation.pipeline.runs.explicit_results`) of `scoring`.
    images : DataFrame
        `tables.image_verdicts`.
    tables : dict of str to DataFrame
        ``table4`` (columns (system, task)), ``category`` (Figure 2), ``basic`` and
        ``modifier`` (Figure 5), ``bias`` (Figure 3, long), ``confusion`` (of `systems`' first),
        ``coverage`` (`judged_coverage`); an empty frame where nothing is scored.
    figures : dict of str to go.Figure
        ``category``, ``basic``, ``modifier``, ``confusion`` and ``bias <model>`` per model.
    systems : list of str
        Color systems with scored images.
    standing : RunStanding or None
        How far the run has got: the tables cover its judged images alone.
    """

    run: str
    scoring: str
    rows: list[dict]
    images: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, go.Figure] = field(default_factory=dict)
    systems: list[str] = field(default_factory=list)
    standing: RunStanding | None = None

    @property
    def complete(self) -> bool:
        """Whether the tables cover every image of the run (without a `standing`, assumed)."""
        return self.standing is None or self.standing.complete


def explicit_report(
    db: sqlite_utils.Database,
    run: str,
    *,
    scoring: str = "paper",
    confusion_system: str | None = None,
    job=None,
) -> ExplicitReport:
    """The tables and figures of explicit run `run` under rule set `scoring`, and how far the
    run has got (`run_standing`): of an unfinished run they cover the judged images alone.

    Parameters
    ----------
    confusion_system : str, optional
        Color system of the confusion view (default: the first with scored images).
    job : `evaluation.pipeline.jobs.JobState`, optional
        The state of the run's job in this process (`run_standing`).

    Raises
    ------
    NoExplicitRun
        If `run` is not an explicit run.
    ValueError
        If `scoring` is unknown or `confusion_system` has no scored image.
    """
    get_rules(scoring)
    check_run(db, run)
    rows = runs.explicit_results(db, run=run, scoring=scoring)
    images = tables.image_verdicts(rows, scoring=scoring)
    standing = standing_of(db, run, job)
    coverage = judged_coverage(images, standing)
    systems = _systems(images)
    if confusion_system and confusion_system not in systems:
        raise ValueError(
            f"`confusion system` must be one with scored images {systems}, got {shown(confusion_system)}"
        )
    if not systems:
        return ExplicitReport(run, scoring, rows, images, tables={"coverage": coverage}, standing=standing)
    chosen = confusion_system or systems[0]
    found = {
        "table4": table4(images),
        "category": tables.category_accuracy(images),
        "basic": tables.group_accuracy(images, rows, grouping="basic"),
        "modifier": tables.group_accuracy(images, rows, grouping="modifier"),
        "bias": tables.dominant_color_bias(rows, scoring=scoring, system=BIAS_SYSTEM),
        "confusion": named_confusion(rows, chosen, scoring=scoring),
        "coverage": coverage,
    }
    return ExplicitReport(run, scoring, rows, images, found, _figures(found, chosen), systems, standing)


def _figures(found: dict[str, pd.DataFrame], system: str) -> dict[str, go.Figure]:
    out = {}
    if not found["category"].empty:
        out["category"] = figures.accuracy_bars(
            found["category"], title="Accuracy per object category (color names)"
        )
    for name, title in (("basic", "Basic and intermediate colors"), ("modifier", "Light, dark and ish")):
        if not found[name].empty:
            out[name] = figures.accuracy_bars(found[name], title=title)
    if not found["confusion"].empty:
        out["confusion"] = figures.confusion_heatmap(
            found["confusion"], title=f"Asked for X, got Y ({system})"
        )
    for model in sorted(set(found["bias"]["model"])):
        title = f"{model}: top-10 dominant colors per category"
        out[f"bias {model}"] = figures.bias_bars(found["bias"], model, system=BIAS_SYSTEM, title=title)
    return out


TABLE_UNITS = {
    "table4": tables.PERCENT_OF_IMAGES,
    "category": tables.PERCENT_OF_IMAGES,
    "basic": tables.PERCENT_OF_IMAGES,
    "modifier": tables.PERCENT_OF_IMAGES,
    "bias": "fraction (0-1) of the model's scored objects of the category",
    "confusion": "objects",
    "coverage": "images",
}
"""What the numbers of each table of `ExplicitReport.tables` count, for its export."""


def export_report(report: ExplicitReport, folder: str | Path) -> list[Path]:
    """Every table of `report` as CSV and HTML, its per-image and per-object verdicts as CSV
    (``images``, ``objects``: the rows every table is computed from, to check them with
    one's own code), and every figure as a standalone HTML page.

    Files are named ``<run>-<scoring>-<table>-<12 hex of their SHA-256>.<csv|html>`` under
    `folder`, so exports never overwrite one another, and the same content exported again
    is the same file. Each table's CSV names in every row its ``unit`` (`TABLE_UNITS`),
    ``rules`` and ``run``, and its HTML page says them in its caption. Of a run not complete
    (`ExplicitReport.standing`) every name ends ``-unfinished`` before its hash, each table's
    CSV has a ``note`` column and each page a line with `RunStanding.note`. Returns the paths,
    tables first.
    """
    folder, note = Path(folder), "" if report.complete else report.standing.note()
    paths = []
    for name, table in report.tables.items():
        if table.empty:
            continue
        # Each row says what it is, as the command line's --table CSV does: the file alone
        # (its name lost) did not say which rules or run (outside probe 116).
        described = table.copy()
        said = (("unit", TABLE_UNITS[name]), ("rules", report.scoring), ("run", report.run))
        for column, value in said + ((("note", note),) if note else ()):
            # A full key: a table with two header rows takes ("unit", ""), as pandas asks.
            described[(column, "") if described.columns.nlevels == 2 else column] = value
        rows = not tables.plain_index(table)  # pandas' row numbers are no data (outside probe 131)
        text = csv_text(described, float_format="%.2f", index=rows)
        paths.append(_write(folder, _stem(report, name), ".csv", text))
        # The page says it too: a bare table of "0.00" cells did not (outside probe 131).
        caption = f"{TABLE_UNITS[name]} · rules {report.scoring} · run {report.run}" + (
            f" · {note}" if note else ""
        )
        paths.append(_write(folder, _stem(report, name), ".html", tables.to_html(table, caption=caption)))
    for name, frame in (("images", report.images), ("objects", pd.DataFrame(report.rows))):
        if not frame.empty:
            paths.append(_write(folder, _stem(report, name), ".csv", csv_text(frame, index=False)))
    for name, figure in report.figures.items():
        # A fixed element id: Plotly draws a random one, so each export of the same figure
        # was a new 4.6 MB file (outside probe 116); with it, the same figure, the same name.
        page = figure.to_html(
            include_plotlyjs=True, full_html=True, div_id=f"figure-{name.replace(' ', '-')}"
        )
        if note:
            page = page.replace("<body>", f"<body>\n<p>{html.escape(note)}</p>", 1)
        paths.append(_write(folder, _stem(report, name), ".html", page))
    return paths


def _stem(report: ExplicitReport, name: str) -> str:
    """``<run>-<scoring>-<name>``, and ``-unfinished`` of a run not complete."""
    return f"{report.run}-{report.scoring}-{name.replace(' ', '-')}" + (
        "" if report.complete else "-unfinished"
    )


def _write(folder: Path, stem: str, suffix: str, text: str) -> Path:
    data = text.encode("utf-8")
    path = folder / f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    write_atomic(path, data)
    return path


@dataclass(frozen=True)
class BrowserView:
    """One prompt of a run, for the per-prompt browser.

    Attributes
    ----------
    prompt : dict
        The stored prompt (`evaluation.pipeline.runs.explicit_prompts` row).
    images : list of ImageView
        `evaluation.explicit.browser.prompt_view`.
    overlays : list of (ndarray, str)
        Each judged image with each object's mask outlined (`evaluation.pipeline.overlay`), and a
        caption: model, sample, object and verdict.
    metrics : DataFrame
        One row per image and object, columns `METRIC_COLUMNS`.
    """

    prompt: dict
    images: list[ImageView]
    overlays: list[tuple[np.ndarray, str]]
    metrics: pd.DataFrame


def browser_view(
    db: sqlite_utils.Database, data_dir: str | Path, run: str, prompt_id: str, *, scoring: str = "paper"
) -> BrowserView:
    """Images, masks, swatches' data and metrics of prompt `prompt_id` of explicit run `run`.

    Raises
    ------
    NoExplicitRun
        If `run` is not an explicit run.
    ValueError
        If `prompt_id` is not one of its prompts, or `scoring` is unknown.
    """
    check_run(db, run)
    prompts = {row["prompt_id"]: row for row in runs.explicit_prompts(db, run)}
    if prompt_id not in prompts:
        raise ValueError(
            f"`prompt` must be a prompt id of run {run!r} (e.g. {next(iter(prompts), 'none')!r}), got {shown(prompt_id)}"
        )
    images = prompt_view(db, run, prompt_id, scoring=scoring)
    overlays, records = [], []
    for number, image in enumerate(images, start=1):
        picture = read_image(data_dir, image.image_path)[..., :3]
        for view in image.objects:
            verdict = _verdict(view.verdicts["correct"], view.present, view.segment_status)
            caption = f"#{number} {image.model} · sample {image.sample} · {view.object}: {verdict}"
            if view.mask_path:
                mask = read_image(data_dir, view.mask_path).astype(bool)
                overlays.append((overlay_mask(picture, mask, MASK_ALPHA), caption))
            else:
                overlays.append((picture, caption))
            records.append(_metric_row(number, image, view))
    metrics = pd.DataFrame(records, columns=list(METRIC_COLUMNS))
    return BrowserView(prompts[prompt_id], images, overlays, metrics)


def _verdict(correct: bool | None, present: bool, status: str) -> str:
    if not present:
        return "absent (not scored)"
    if status != "ok":
        return f"{in_words(status)} (not scored)"
    return "correct" if correct else "wrong"


def _metric_row(number: int, image: ImageView, view) -> list:
    metrics, verdicts = view.metrics, view.verdicts

    def rounded(value):
        return None if value is None else round(float(value), 2)

    return [
        number,
        image.model,
        image.sample,
        view.object,
        view.target,
        view.dominant_hex,
        hex_label(view.dominant_hex) if view.dominant_hex else None,
        rounded(metrics["delta_chroma"]),
        verdicts["chroma_pass"],
        rounded(metrics["delta_e00"]),
        verdicts["e00_pass"],
        rounded(metrics["hue_error"]),
        verdicts["hue_pass"],
        verdicts["correct"],
    ]


def hex_label(hex_color: str) -> str:
    """`color_label` of a ``#rrggbb`` color."""
    return color_label([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)])


def prompt_choices(db: sqlite_utils.Database, report: ExplicitReport) -> list[tuple[str, str]]:
    """(label, prompt id) of every prompt of `report`'s run, in prompt-id order, for a picker:
    the label is the prompt's text, task and system, and its correct / scored images
    (``"a red car · color_name · iscc-nbs-l2 — 1/2 correct"``; "not judged yet" when none is)."""
    images = report.images
    counts = images.groupby("prompt_id").agg(
        judged=("scored", "size"), scored=("scored", "sum"), correct=("correct", "sum")
    )
    choices = []
    for prompt in runs.explicit_prompts(db, report.run):
        label = f"{prompt['text']} · {prompt['task']} · {prompt['system']}"
        if prompt["prompt_id"] in counts.index:
            row = counts.loc[prompt["prompt_id"]]
            label += f" — {int(row['correct'])}/{int(row['scored'])} correct"
        else:
            label += " — not judged yet"
        choices.append((label, prompt["prompt_id"]))
    return choices


def confusion_pairs(confusion: pd.DataFrame) -> pd.DataFrame:
    """The cells of a confusion table as rows ``asked for, got, objects`` (a two-object
    image counts each object), the most frequent first (ties by name); empty cells are
    left out."""
    if confusion.empty:
        return pd.DataFrame(columns=["asked for", "got", "objects"])
    long = confusion.rename_axis(index="asked for", columns="got").stack().rename("objects").reset_index()
    long = long[long["objects"] > 0].sort_values(
        ["objects", "asked for", "got"], ascending=[False, True, True]
    )
    return long.reset_index(drop=True)


def bias_view(db: sqlite_utils.Database, run: str, model: str, *, scoring: str = "paper") -> go.Figure:
    """Figure 3 of `model` in explicit run `run`: its top-10 dominant colors per category.

    Raises
    ------
    ValueError
        If `model` has no scored object in the run (the message lists those that have).
    """
    get_rules(scoring)
    check_run(db, run)
    bias = tables.dominant_color_bias(runs.explicit_results(db, run=run, scoring=scoring), scoring=scoring)
    if model not in set(bias["model"]):
        raise ValueError(
            f"`model` must be one with scored objects {sorted(set(bias['model']))}, got {shown(model)}"
        )
    title = f"{model}: top-10 dominant colors per category"
    return figures.bias_bars(bias, model, system=BIAS_SYSTEM, title=title)
