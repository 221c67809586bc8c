"""Run bookkeeping in SQLite: runs, their work items and model distributions.

This is the only module of `evaluation/` that holds SQL. Every function takes an open
``sqlite_utils.Database`` first; the tables are created by the project's one migration
list (`storage.schema`), multi-row writes are one `storage.transaction`, timestamps are
`storage.iso` text, and distributions go through `storage.distributions`' codec.
Human distributions (reference sets included) are `storage.human`'s.

An item moves ``pending`` -> ``generated`` -> ``segmented``; an item whose generation
failed is ``failed`` (with ``error``) and is tried again by the next run of the stage.
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import sqlite_utils

import storage
from storage import iso as _now
from storage import transaction
from storage.distributions import decode, decode_groups, encode, encode_groups

ITEM_STATUSES = ("pending", "generated", "segmented", "failed")
SEGMENT_STATUSES = ("ok", "no_detection", "empty_mask")
#: Which item statuses each stage picks up.
STAGE_INPUT = {"generate": ("pending", "failed"), "segment": ("generated",)}
_ITEM_KEY = ("run", "model", "concept", "style", "cfg", "sample")


class RunError(ValueError):
    """A run is named or configured inconsistently with what is stored."""


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) a database file with the project's schema.

    For the evaluation CLI on its own: `storage.open_db` plus `storage.ensure_schema`,
    the same opener and migrations the app uses.
    """
    db = storage.open_db(path)
    storage.ensure_schema(db)
    return db


def create_run(db: sqlite_utils.Database, name: str, items: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> int:
    """Store a run and its pending items, or check that an existing run matches.

    Parameters
    ----------
    name : str
        The run's name (also its folder, ``data/runs/<name>/``).
    items : sequence of Mapping
        One per image, with keys ``model, concept, noun, style, cfg, sample, seed, prompt``.
    config : Mapping
        JSON-able description of the grid; a run created again must have the same config.

    Returns
    -------
    int
        The number of items of the run.

    Raises
    ------
    RunError
        If `name` is empty or has a path separator, or the run exists with another config.
    """
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise RunError(f"run name must be a non-empty folder name without '/', '\\' or a leading '.', got {name!r}")
    config_json = json.dumps(config, sort_keys=True)
    existing = db.execute("SELECT config FROM runs WHERE name = ?", [name]).fetchone()
    if existing is not None:
        if existing[0] != config_json:
            stored = json.loads(existing[0])
            diff = sorted(k for k in set(stored) | set(config) if stored.get(k) != config.get(k))
            raise RunError(f"run {name!r} exists with a different configuration (differs in {diff}); choose another name")
        return db.execute("SELECT count(*) FROM run_items WHERE run = ?", [name]).fetchone()[0]
    now = _now()
    rows = [{**dict(item), "run": name, "status": "pending", "updated_at": now} for item in items]
    with transaction(db):
        db["runs"].insert({"name": name, "created_at": now, "config": config_json})
        db["run_items"].insert_all(rows, batch_size=500)
    return len(rows)


def run_config(db: sqlite_utils.Database, name: str) -> dict:
    """The stored configuration of run `name`."""
    row = db.execute("SELECT config FROM runs WHERE name = ?", [name]).fetchone()
    if row is None:
        known = [r[0] for r in db.execute("SELECT name FROM runs ORDER BY name")]
        raise RunError(f"no run named {name!r}; known runs: {known}")
    return json.loads(row[0])


def pending_items(db: sqlite_utils.Database, run: str, stage: str) -> list[dict]:
    """The items that `stage` (``"generate"`` or ``"segment"``) still has to do, in grid order."""
    if stage not in STAGE_INPUT:
        raise ValueError(f"`stage` must be one of {sorted(STAGE_INPUT)}, got {stage!r}")
    run_config(db, run)
    statuses = STAGE_INPUT[stage]
    marks = ", ".join("?" for _ in statuses)
    sql = f"SELECT * FROM run_items WHERE run = ? AND status IN ({marks}) ORDER BY model, cfg, id"
    return [dict(row) for row in db.query(sql, [run, *statuses])]


def batches(items: Sequence[Mapping[str, Any]], size: int, *, by: Sequence[str] = ("model", "cfg")) -> Iterator[list[dict]]:
    """Split items into lists of at most `size` that agree on the fields `by`."""
    if size < 1:
        raise ValueError(f"`size` must be a positive integer, got {size}")
    for _, group in groupby(items, key=lambda item: tuple(item[k] for k in by)):
        group = [dict(item) for item in group]
        for start in range(0, len(group), size):
            yield group[start:start + size]


def record_items(db: sqlite_utils.Database, updates: Iterable[Mapping[str, Any]]) -> None:
    """Apply item updates (each with its ``id``) in one transaction."""
    now = _now()
    with transaction(db):
        for update in updates:
            fields = {k: v for k, v in update.items() if k != "id"}
            if fields.get("status", "pending") not in ITEM_STATUSES:
                raise ValueError(f"item status must be one of {ITEM_STATUSES}, got {fields['status']!r}")
            db["run_items"].update(update["id"], {**fields, "updated_at": now})


def items(db: sqlite_utils.Database, run: str) -> list[dict]:
    """All items of `run`, in id order."""
    return [dict(row) for row in db.query("SELECT * FROM run_items WHERE run = ? ORDER BY id", [run])]


def segmented_groups(db: sqlite_utils.Database, run: str) -> Iterator[tuple[tuple, list[dict]]]:
    """Items of `run` grouped by (model, concept, style, cfg), for groups fully segmented."""
    sql = "SELECT * FROM run_items WHERE run = ? ORDER BY model, concept, style, cfg, sample"
    for key, group in groupby(db.query(sql, [run]), key=lambda r: (r["model"], r["concept"], r["style"], r["cfg"])):
        group = [dict(row) for row in group]
        if all(row["status"] == "segmented" for row in group):
            yield key, group


def has_model_distribution(db: sqlite_utils.Database, run: str, model: str, concept: str, style: str, cfg: float) -> bool:
    """Whether the distribution of this (run, model, concept, style, cfg) is stored."""
    sql = "SELECT 1 FROM model_distributions WHERE run=? AND model=? AND concept=? AND style=? AND cfg=?"
    return db.execute(sql, [run, model, concept, style, cfg]).fetchone() is not None


def store_model_distribution(
    db: sqlite_utils.Database, run: str, model: str, concept: str, style: str, cfg: float,
    p: np.ndarray | None, n_images: int, n_excluded: int, groups: Any = None,
) -> None:
    """Insert or replace one P_M(x|c) for (run, model, concept, style, cfg).

    `p` is None when every image of the group was excluded (nothing detected); the row
    still records the counts.
    """
    try:
        p_json = encode(p)
    except ValueError as error:
        raise ValueError(f"distribution of {model}/{concept}/{style}/cfg={cfg}: {error}") from None
    row = {
        "run": run, "model": model, "concept": concept, "style": style, "cfg": float(cfg), "p": p_json,
        "n_images": int(n_images), "n_excluded": int(n_excluded),
        "groups": encode_groups(groups), "created_at": _now(),
    }
    with transaction(db):
        db["model_distributions"].upsert(row, pk=("run", "model", "concept", "style", "cfg"))


def model_distributions(db: sqlite_utils.Database, *, run: str | None = None, model: str | None = None) -> list[dict]:
    """Stored model distributions, optionally of one run and/or model; ``p`` decoded to (71,) float64 or None."""
    where, params = [], []
    for column, value in (("run", run), ("model", model)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = "SELECT * FROM model_distributions" + (" WHERE " + " AND ".join(where) if where else "")
    rows = []
    for row in db.query(sql + " ORDER BY run, model, concept, style, cfg", params):
        row = dict(row)
        row["p"] = decode(row["p"])
        row["groups"] = decode_groups(row["groups"]) or None
        rows.append(row)
    return rows


def exclusion_counts(db: sqlite_utils.Database, *, run: str | None = None) -> list[dict]:
    """Per model: segmented images, usable ones, and those excluded by reason."""
    sql = """
        SELECT model, count(*) AS n_segmented,
               sum(segment_status = 'ok') AS n_ok,
               sum(segment_status = 'no_detection') AS n_no_detection,
               sum(segment_status = 'empty_mask') AS n_empty_mask
        FROM run_items WHERE status = 'segmented' {} GROUP BY model ORDER BY model
    """.format("AND run = ?" if run is not None else "")
    return [dict(row) for row in db.query(sql, [run] if run is not None else [])]
