"""Accuracy tables of the explicit-color mode (GenColorBench Table 4 layout, Figure 2).

Input is the list of per-object verdict rows of `evaluation.pipeline.runs.explicit_results`
(one per image, object and rule set). An *image* is the unit: it is **scored** when every
object of its prompt passed the presence check and has a usable mask, and **correct** when it
is scored and every object is correct. Accuracy is correct / generated images, in percent: the
paper "compute[s] the average score across all the generated images" (§4.1), and "the image is
validated only if all the objects in text prompts are present" (§3.4), so an image failing
presence or masking counts as wrong (``of="scored"``: of the scored images alone, which
rewards a model whose objects the masker often misses).

Table 4 averages over color systems: here each system's accuracy weighs the same (the mean of
the per-system accuracies, not the pooled images), so that CSS3/X11's and ISCC-NBS L3's many
colors do not swamp L2's 29.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluation.explicit.objects import load_objects
from evaluation.explicit.prompts import TASKS
from evaluation.explicit.rules import get_rules
from evaluation.pipeline.fileio import write_atomic
from storage.shown import folded, shown
from storage.spreadsheet import csv_text

IMAGE_COLUMNS = ("run", "item_id", "model", "prompt_id", "task", "level", "system", "category", "notation")
AVERAGE = "average"


def image_verdicts(rows: Iterable[Mapping[str, Any]], *, scoring: str = "paper") -> pd.DataFrame:
    """One row per image under rule set `scoring`: its fields, ``objects``, ``scored``, ``correct``.

    Parameters
    ----------
    rows : iterable of Mapping
        `evaluation.pipeline.runs.explicit_results` rows.
    scoring : str
        Which rule set's verdicts (:data:`evaluation.explicit.rules.SCORINGS`).

    Returns
    -------
    DataFrame
        Columns :data:`IMAGE_COLUMNS` and ``objects`` (int), ``scored`` and ``correct`` (bool),
        one row per image, in item order.
    """
    get_rules(scoring)
    frame = pd.DataFrame([dict(r) for r in rows if r["scoring"] == scoring])
    if frame.empty:
        return pd.DataFrame(columns=[*IMAGE_COLUMNS, "objects", "scored", "correct"])
    frame["usable"] = (frame["present"] == 1) & (frame["segment_status"] == "ok")
    frame["right"] = frame["usable"] & (frame["correct"].fillna(0) == 1)
    grouped = frame.groupby(["run", "item_id"], sort=False)
    fields = {name: (name, "first") for name in IMAGE_COLUMNS if name not in ("run", "item_id")}
    images = grouped.agg(
        **fields, objects=("object", "size"), scored=("usable", "all"), correct=("right", "all")
    )
    return images.reset_index()


def accuracy_table(
    images: pd.DataFrame,
    *,
    index: str | Sequence[str] = "model",
    columns: str = "task",
    systems: Sequence[str] | None = None,
    of: str = "generated",
) -> pd.DataFrame:
    """Accuracy (%) of the images, `index` x `columns`, each system weighing the same.

    Parameters
    ----------
    images : DataFrame
        From :func:`image_verdicts`.
    index : str or sequence of str
        Row fields (default ``"model"``).
    columns : str
        Column field: ``"task"`` (Table 4: tasks in :data:`evaluation.explicit.prompts.TASKS`
        order, then ``"average"`` over them), ``"category"`` (Figure 2), ``"system"``...
    systems : sequence of str, optional
        Only these color systems (default: all present).
    of : {"generated", "scored"}
        The denominator: every generated image (the paper's; one failing presence or
        masking is wrong) or the scored images alone.

    Returns
    -------
    DataFrame
        Percent in [0, 100]; NaN where a cell has no image (with ``of="scored"``: no
        scored image).

    Raises
    ------
    ValueError
        If `index` or `columns` names a field the frame lacks, or `of` is neither.
    """
    index = [index] if isinstance(index, str) else list(index)
    missing = [field for field in [*index, columns] if field not in images.columns]
    if missing:
        raise ValueError(f"`index`/`columns` must be fields of the image frame, got unknown {missing}")
    scored = _counted(images, of)
    if systems is not None:
        scored = scored[scored["system"].isin(list(systems))]
    keys = list(dict.fromkeys([*index, columns, "system"]))
    per_system = scored.groupby(keys)["correct"].mean().mul(100.0)
    table = per_system.groupby(level=list(dict.fromkeys([*index, columns]))).mean().unstack(columns)
    if columns == "task":
        table = table.reindex(columns=[t for t in TASKS if t in table.columns])
        table[AVERAGE] = table.mean(axis=1)
    table.columns.name = columns
    return table


def category_accuracy(images: pd.DataFrame, *, of: str = "generated") -> pd.DataFrame:
    """Figure 2: accuracy (%) per model and object category of the ``color_name`` images
    alone, as the paper grounds "color names across seven semantic object categories" (§4.2):
    numeric codes and the other tasks' prompts would pool other questions into a category.
    A two-object image's category is its first object's (the template's subject).

    Returns
    -------
    DataFrame
        Models x categories, percent; empty when the run has no color_name image.
    """
    named = images[images["task"] == "color_name"]
    if named.empty:
        return pd.DataFrame()
    return accuracy_table(named, columns="category", of=of)


def _counted(images: pd.DataFrame, of: str) -> pd.DataFrame:
    """The images an accuracy is taken over (`accuracy_table`'s `of`)."""
    if of == "generated":
        return images
    if of == "scored":
        return images[images["scored"].astype(bool)]
    raise ValueError(f"`of` must be 'generated' or 'scored', got {shown(of)}")


def coverage_table(images: pd.DataFrame, *, index: str | Sequence[str] = "model") -> pd.DataFrame:
    """Images, scored images and those failing presence or masking (counted, not scored)."""
    index = [index] if isinstance(index, str) else list(index)
    grouped = images.groupby(index)
    return pd.DataFrame(
        {
            "images": grouped.size(),
            "scored": grouped["scored"].sum().astype(int),
            "not_scored": grouped["scored"].apply(lambda s: int((~s.astype(bool)).sum())),
            "correct": grouped["correct"].sum().astype(int),
        }
    )


def write_csv(table: pd.DataFrame, path: str | Path) -> Path:
    """Write `table` (with its index) as CSV, atomically; return the path."""
    path = Path(path)
    write_atomic(path, csv_text(table, float_format="%.2f").encode("utf-8"))
    return path


def to_html(table: pd.DataFrame, *, digits: int = 2, caption: str = "") -> str:
    """`table` as an HTML table (labels escaped, NaN shown as "-"), with `caption` (escaped:
    what its numbers count, say) as its ``<caption>``, and no row numbers where its index is
    pandas' unnamed default."""
    shown = table.to_html(
        float_format=lambda v: f"{v:.{digits}f}", na_rep="-", escape=True, index=not plain_index(table)
    )
    if not caption:
        return shown
    head, rest = shown.split(">", 1)
    return f"{head}>\n  <caption>{html.escape(caption)}</caption>{rest}"


def plain_index(table: pd.DataFrame) -> bool:
    """Whether `table`'s index is pandas' unnamed 0, 1, 2, ... (row numbers, no data)."""
    return isinstance(table.index, pd.RangeIndex) and table.index.name is None and table.index.start == 0


def write_html(table: pd.DataFrame, path: str | Path, *, digits: int = 2) -> Path:
    """Write :func:`to_html` of `table` to `path`, atomically; return the path."""
    path = Path(path)
    write_atomic(path, to_html(table, digits=digits).encode("utf-8"))
    return path


# Color groups of Figure 5: basic vs intermediate (ISCC-NBS L2), and L3 modifiers.

PERCENT_OF_IMAGES = "% of generated images"
"""The unit of every accuracy table (Table 4, Figures 2 and 5): a failed image counts as wrong."""
MODIFIERS = ("light", "dark", "ish")


def color_group(name: str) -> str:
    """``"basic"`` for an ISCC-NBS L2 name that is also a level 1 name (one hue word: red,
    yellow green, white...), else ``"intermediate"`` (reddish orange, olive brown...).

    The paper (§4.4) lists the basic colors in words; the 13 level 1 names are that list.
    """
    from evaluation.color.systems import load_system

    return "basic" if folded(name) in load_system("iscc-nbs-l1").names else "intermediate"


def color_modifiers(name: str) -> tuple[str, ...]:
    """The Figure 5 (right) modifier groups of an ISCC-NBS L3 name, in :data:`MODIFIERS` order.

    ``light`` when a word is "light", ``dark`` when a word is "dark", ``ish`` when a word ends
    in "ish" ("light bluish green" is in ``light`` and ``ish``; named without the paper's dash,
    which a spreadsheet reads as a formula's start); a name may be in none
    ("vivid red"). Counting a color in each of its groups is our choice; the paper only says it
    groups L3 colors by the three modifiers.
    """
    words = name.lower().split()
    found = {
        "light": "light" in words,
        "dark": "dark" in words,
        "ish": any(w.endswith("ish") for w in words),
    }
    return tuple(m for m in MODIFIERS if found[m])


def group_accuracy(
    images: pd.DataFrame, rows: Iterable[Mapping[str, Any]], *, grouping: str, of: str = "generated"
) -> pd.DataFrame:
    """Accuracy (%) of single-object color_name images per model and color group (over the
    images `of` names, as `accuracy_table`).

    Parameters
    ----------
    images : DataFrame
        From :func:`image_verdicts`.
    rows : iterable of Mapping
        The verdict rows the images came from (for each image's target).
    grouping : {"basic", "modifier"}
        ``"basic"``: ISCC-NBS L2 targets as basic / intermediate (Figure 5 left);
        ``"modifier"``: ISCC-NBS L3 targets by :func:`color_modifiers` (Figure 5 right).

    Returns
    -------
    DataFrame
        Models x groups, percent; NaN where a group has no image.
    """
    if grouping not in ("basic", "modifier"):
        raise ValueError(f"`grouping` must be 'basic' or 'modifier', got {shown(grouping)}")
    system = "iscc-nbs-l2" if grouping == "basic" else "iscc-nbs-l3"
    targets = {r["item_id"]: r["target"] for r in rows if r["object_index"] == 0}
    counted = _counted(images, of)
    chosen = counted[(counted["task"] == "color_name") & (counted["system"] == system)]
    records = []
    for item, model, correct in zip(chosen["item_id"], chosen["model"], chosen["correct"]):
        name = targets[item]
        groups = (color_group(name),) if grouping == "basic" else color_modifiers(name)
        records.extend({"model": model, "group": g, "correct": bool(correct)} for g in groups)
    if not records:
        return pd.DataFrame()
    table = pd.DataFrame(records).groupby(["model", "group"])["correct"].mean().mul(100.0).unstack("group")
    order = ("basic", "intermediate") if grouping == "basic" else MODIFIERS
    return table.reindex(columns=[g for g in order if g in table.columns])


def _named_dominants(rows: Iterable[Mapping[str, Any]], system: str | None) -> pd.DataFrame:
    """Scored objects with the name of their dominant color's nearest color (CIEDE2000) in
    `system`, or in each target's own system when None."""
    from evaluation.color.systems import load_system

    frame = pd.DataFrame([dict(r) for r in rows if r.get("dominant_l") is not None])
    if frame.empty:
        return frame
    lab = frame[["dominant_l", "dominant_a", "dominant_b"]].to_numpy(dtype=float)
    keys = frame["system"].to_numpy() if system is None else np.full(len(frame), system)
    names = np.empty(len(frame), dtype=object)
    for key in np.unique(keys):
        table, rows_of_key = load_system(key), keys == key
        names[rows_of_key] = [table.names[i] for i in table.nearest(lab[rows_of_key])]
    return frame.assign(got=names)


def dominant_color_bias(
    rows: Iterable[Mapping[str, Any]], *, scoring: str = "paper", system: str = "iscc-nbs-l2", top: int = 10
) -> pd.DataFrame:
    """The `top` most frequent dominant colors per model and object category (Figure 3).

    Each scored object's dominant color is named by its nearest `system` color (CIEDE2000),
    and counted under its own object's category (`evaluation.explicit.objects`): a prompt's
    category is its first object's, and the car of "an apple and a car" was counted among
    the fruits (outside probe 220).

    Returns
    -------
    DataFrame
        Columns ``model, category, rank (1..top), color, share`` (fraction of that model's
        scored objects of that category), sorted.
    """
    named = _named_dominants([r for r in rows if r["scoring"] == scoring], system)
    if named.empty:
        return pd.DataFrame(columns=["model", "category", "rank", "color", "share"])
    own = {o.name: o.category for o in load_objects()}
    named = named.assign(category=[own.get(o, c) for o, c in zip(named["object"], named["category"])])
    counts = (
        named.groupby(["model", "category"])["got"].value_counts(normalize=True).rename("share").reset_index()
    )
    counts = counts.sort_values(["model", "category", "share", "got"], ascending=[True, True, False, True])
    counts["rank"] = counts.groupby(["model", "category"]).cumcount() + 1
    counts = counts[counts["rank"] <= top].rename(columns={"got": "color"})
    return counts[["model", "category", "rank", "color", "share"]].reset_index(drop=True)


def confusion(
    rows: Iterable[Mapping[str, Any]], *, scoring: str = "paper", system: str | None = None
) -> pd.DataFrame:
    """ "Asked for X, got Y": counts of target names (rows) by the nearest name of the dominant
    color (columns), in the target's own system (or in `system`)."""
    named = _named_dominants([r for r in rows if r["scoring"] == scoring], system)
    if named.empty:
        return pd.DataFrame()
    return pd.crosstab(named["target"], named["got"]).rename_axis(index="asked for", columns="got")
