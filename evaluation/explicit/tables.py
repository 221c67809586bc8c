"""Accuracy tables of the explicit-color mode (GenColorBench Table 4 layout, Figure 2).

Input is the list of per-object verdict rows of `evaluation.pipeline.runs.explicit_results`
(one per image, object and rule set). An *image* is the unit: it is **scored** when every
object of its prompt passed the presence check and has a usable mask (images failing are
counted, not scored), and **correct** when every scored object is correct. Accuracy is correct
/ scored images, in percent.

Table 4 averages over color systems: here each system's accuracy weighs the same (the mean of
the per-system accuracies, not the pooled images), so that CSS3/X11's and ISCC-NBS L3's many
colors do not swamp L2's 29.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evaluation.explicit.prompts import TASKS
from evaluation.explicit.rules import get_rules
from evaluation.pipeline.fileio import write_atomic

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
    grouped = frame.groupby(list(IMAGE_COLUMNS), sort=False, dropna=False)
    images = grouped.agg(objects=("object", "size"), scored=("usable", "all"), correct=("right", "all"))
    return images.reset_index()


def accuracy_table(
    images: pd.DataFrame,
    *,
    index: str | Sequence[str] = "model",
    columns: str = "task",
    systems: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Accuracy (%) of scored images, `index` x `columns`, each system weighing the same.

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

    Returns
    -------
    DataFrame
        Percent in [0, 100]; NaN where a cell has no scored image.

    Raises
    ------
    ValueError
        If `index` or `columns` names a field the frame lacks.
    """
    index = [index] if isinstance(index, str) else list(index)
    missing = [field for field in [*index, columns] if field not in images.columns]
    if missing:
        raise ValueError(f"`index`/`columns` must be fields of the image frame, got unknown {missing}")
    scored = images[images["scored"].astype(bool)]
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
    write_atomic(path, table.to_csv(float_format="%.2f").encode("utf-8"))
    return path
