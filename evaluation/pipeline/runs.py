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

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlite_utils

import storage
from storage import delete_rows, insert_row, insert_rows, transaction, update_rows, upsert_row, upsert_rows
from storage import iso as _now
from storage.distributions import decode, decode_groups, encode, encode_groups
from storage.shown import folded, shown

ITEM_STATUSES = ("pending", "generated", "segmented", "failed")
SEGMENT_STATUSES = ("ok", "no_detection", "empty_mask")
#: Which item statuses each stage picks up.
STAGE_INPUT = {"generate": ("pending", "failed"), "segment": ("generated",)}
_ITEM_KEY = ("run", "model", "concept", "style", "cfg", "sample")
MAX_RUN_NAME = 80
COMMAND_LINE = "command line"
"""Who acted, for what ``python -m evaluation`` does: its audit rows and the Runs table say so."""
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]*$")


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


def check_run_name(name: str) -> str:
    """Return `name` if it can name a run (and its folder ``runs/<name>/``), else raise ValueError.

    ASCII letters (a-z, A-Z), ASCII digits, ``.``, ``_``, ``-`` and spaces, starting with a
    letter or digit, at most `MAX_RUN_NAME` characters, so that a name is a safe folder name
    on every system (and in a URL); accented and non-Latin letters are refused.
    The one rule for run names: `create_run` applies it too.

    Raises
    ------
    RunError
        A ValueError naming the argument and what it got.
    """
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name) or len(name) > MAX_RUN_NAME:
        raise RunError(
            f"`run` name must be 1-{MAX_RUN_NAME} letters, digits, '.', '_', '-' or spaces "
            "(ASCII letters a-z, A-Z and digits 0-9 only), starting with a letter or digit, "
            f"got {shown(name)}"
        )
    return name


def refuse_near_name(db: sqlite_utils.Database, name: str) -> None:
    """Raise `RunError` when a run other than `name` has its name apart from case and spacing:
    "probe run" beside "Probe Run" was a second run that no list could tell apart (outside
    probe 193), and on a system whose file names ignore case, one folder for both."""
    for (other,) in db.execute("SELECT name FROM runs WHERE name != ?", [name]).fetchall():
        if folded(other) == folded(name):
            raise RunError(
                f"run {name!r} is run {other!r} apart from case and spacing; resume {other!r}, or "
                "choose another name"
            )


def create_run(
    db: sqlite_utils.Database, name: str, items: Sequence[Mapping[str, Any]], config: Mapping[str, Any]
) -> int:
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
        If `name` breaks `check_run_name`, or the run exists with another config.
    """
    check_run_name(name)
    config_json = json.dumps(config, sort_keys=True)
    existing = db.execute("SELECT config FROM runs WHERE name = ?", [name]).fetchone()
    if existing is not None:
        if existing[0] != config_json:
            stored = json.loads(existing[0])
            if (clash := kind_clash(name, stored, config)) is not None:
                raise RunError(clash)
            diff = "; ".join(_differences(stored, json.loads(config_json), most=8))
            raise RunError(
                f"run {name!r} exists with a different configuration ({diff}); choose another name, "
                "or resume it with --run alone"
            )
        return db.execute("SELECT count(*) FROM run_items WHERE run = ?", [name]).fetchone()[0]
    refuse_near_name(db, name)
    now = _now()
    rows = [{**dict(item), "run": name, "status": "pending", "updated_at": now} for item in items]
    with transaction(db):
        insert_row(db, "runs", {"name": name, "created_at": now, "config": config_json})
        insert_rows(db, "run_items", rows)
    return len(rows)


#: The ``mode`` of an explicit-color run's configuration (GenColorBench); a concept run has none.
EXPLICIT = "explicit"


def is_explicit(config: Mapping) -> bool:
    """Whether a run configuration (`run_config`) is an explicit-color run's, not a concept run's."""
    return config.get("mode") == EXPLICIT


def _kind(config: Mapping) -> str:
    return "an explicit-color run" if is_explicit(config) else "a concept run"


def kind_clash(name: str, stored: Mapping, given: Mapping) -> str | None:
    """Why run `name`, stored with configuration `stored`, cannot take a run configured as
    `given` of the other kind (explicit-color or concept), or None where both are of one kind.
    A clash was told as a configuration diff, or as "resume it", which cannot make it the
    other kind (outside probe 182)."""
    if _kind(stored) == _kind(given):
        return None
    return f"run {name!r} is {_kind(stored)}, so it cannot hold {_kind(given)}: choose another name"


def _differences(stored: Any, given: Any, where: str = "", most: int = 4) -> list[str]:
    """``"key.path: stored → given"`` for each leaf where two configurations differ (the
    first `most`; lists compared whole): what a refusal of a changed run names."""
    if isinstance(stored, dict) and isinstance(given, dict):
        found: list[str] = []
        for key in sorted(set(stored) | set(given)):
            if stored.get(key) != given.get(key):
                found += _differences(stored.get(key), given.get(key), f"{where}{key}.", most)
        return found[:most] + ([f"and {len(found) - most} more"] if len(found) > most else [])
    return [f"{where.rstrip('.')}: {shown(stored)} → {shown(given)}"]


#: Runs a refusal of an unknown run name lists (newest first).
KNOWN_RUNS_LISTED = 10


def run_config(db: sqlite_utils.Database, name: str) -> dict:
    """The stored configuration of run `name`."""
    row = db.execute("SELECT config FROM runs WHERE name = ?", [name]).fetchone()
    if row is None:
        known = [r[0] for r in db.execute("SELECT name FROM runs ORDER BY created_at DESC, rowid DESC")]
        listed = ", ".join(known[:KNOWN_RUNS_LISTED]) or "none"
        more = f" and {len(known) - KNOWN_RUNS_LISTED} older" if len(known) > KNOWN_RUNS_LISTED else ""
        raise RunError(f"no run named {shown(name)}; known runs, newest first: {listed}{more}")
    return json.loads(row[0])


def run_created(db: sqlite_utils.Database, name: str) -> str | None:
    """When run `name` was stored (`storage.iso` text), None for no such run: with the name,
    what tells a run from an earlier one of that name that was deleted."""
    row = db.execute("SELECT created_at FROM runs WHERE name = ?", [name]).fetchone()
    return row[0] if row else None


def claim_masking(db: sqlite_utils.Database, run: str, masking: Mapping[str, Any]) -> None:
    """Record `masking` as the one that masks run `run`'s images, or refuse another.

    A run's distributions must come from one masking: masks of two detectors or two
    thresholds would be mixed in one table without a trace. Until an image of the run is
    masked, the masking given last is kept; once one is, only the recorded masking may go on.
    A run masked before the masking was recorded (schema 15 or older) takes the first one
    given from then on.

    Parameters
    ----------
    masking : Mapping
        JSON-able description of the masking (`evaluation.pipeline.jobs.masking_of`).

    Raises
    ------
    RunError
        If the run is unknown, or its images were masked with another masking (the message
        names the fields that differ and the recorded values).
    """
    masking = dict(masking)
    with transaction(db):
        if run_masking(db, run) != masking:
            refuse_other_masking(db, run, masking)
            update_rows(db, "runs", {"name": run}, {"masking": json.dumps(masking, sort_keys=True)})


def refuse_other_masking(db: sqlite_utils.Database, run: str, masking: Mapping[str, Any]) -> None:
    """Raise `RunError` when run `run` has masked images and `masking` is not the one that
    masked them (`claim_masking`'s rule), recording nothing; an unknown run passes (a new run
    is given its masking when it is made). A resume checks this before the weights of the
    masking it was given: a masking the run may not take is refused for what it is, not for
    weights missing on this machine."""
    masking = dict(masking)
    try:
        before = run_masking(db, run)
    except RunError:
        return
    masked = db.execute(
        "SELECT 1 FROM run_items WHERE run = ? AND status = 'segmented' LIMIT 1", [run]
    ).fetchone()
    if before is not None and before != masking and masked is not None:
        diff = sorted(k for k in set(before) | set(masking) if before.get(k) != masking.get(k))
        described = ", ".join(f"{k}={v}" for k, v in sorted(before.items()))
        raise RunError(
            f"run {run!r} is masked with {described}; the masking given now differs in "
            f"{diff}: give the run's own masking to go on (one run's distributions come "
            "from one masking), or start another run"
        )


#: A job's lease on its run lasts this long past its last heartbeat (`claim_job`); the
#: job renews it four times as often (`evaluation.pipeline.jobs.job_lease`).
LEASE_S = 60.0


def claim_job(db: sqlite_utils.Database, run: str, owner: str, *, now: dt.datetime | None = None) -> None:
    """Record that `owner` (a process: ``host:pid``) runs a job on run `run`.

    Two processes on one database (two app servers, the app and the CLI) would otherwise
    both work on one run: each sees the other's job as stopped. A lease another owner
    renewed within `LEASE_S` refuses the claim; an older one is a process that died.

    Raises
    ------
    RunError
        If the run is unknown or another process's job holds it (the message names the
        process and how long to wait if it has died).
    """
    now = storage.utcnow() if now is None else now
    with transaction(db):
        run_config(db, run)  # an unknown run fails here
        refuse_job_elsewhere(db, run, owner, now=now)
        update_rows(db, "runs", {"name": run}, {"job_owner": owner, "job_heartbeat": _now(now)})


def refuse_job_elsewhere(
    db: sqlite_utils.Database, run: str, owner: str, *, now: dt.datetime | None = None
) -> None:
    """Raise `RunError` when another process's job holds run `run` (`job_elsewhere`)."""
    holder = job_elsewhere(db, run, owner, now=now)
    if holder is not None:
        other, age = holder
        raise RunError(
            f"run {run!r} has a job running in another process ({other}, last heard from "
            f"{age:.0f} s ago): stop it there, or, if that process has died, wait "
            f"{max(1.0, LEASE_S - age):.0f} s"
        )


def renew_job(db: sqlite_utils.Database, run: str, owner: str, *, now: dt.datetime | None = None) -> None:
    """Renew `owner`'s lease on run `run` (nothing if another owner holds it)."""
    with transaction(db):
        if job_holder(db, run)[0] == owner:
            update_rows(db, "runs", {"name": run}, {"job_heartbeat": _now(now)})


def release_job(db: sqlite_utils.Database, run: str, owner: str) -> None:
    """End `owner`'s lease on run `run` (nothing if another owner holds it)."""
    with transaction(db):
        if job_holder(db, run)[0] == owner:
            update_rows(db, "runs", {"name": run}, {"job_owner": None, "job_heartbeat": None})


def job_holder(db: sqlite_utils.Database, run: str) -> tuple[str | None, str | None]:
    """``(owner, heartbeat)`` of the lease on run `run`, ``(None, None)`` without one."""
    row = db.execute("SELECT job_owner, job_heartbeat FROM runs WHERE name = ?", [run]).fetchone()
    return (row[0], row[1]) if row else (None, None)


def job_elsewhere(
    db: sqlite_utils.Database, run: str, owner: str, *, now: dt.datetime | None = None
) -> tuple[str, float] | None:
    """``(other owner, seconds since its heartbeat)`` when another process's job holds run
    `run` (renewed within `LEASE_S`), else None."""
    other, heartbeat = job_holder(db, run)
    if other is None or other == owner or heartbeat is None or _died_here(other):
        return None
    age = ((storage.utcnow() if now is None else now) - storage.parse_iso(heartbeat)).total_seconds()
    return (other, max(0.0, age)) if age < LEASE_S else None


def _died_here(owner: str) -> bool:
    """Whether `owner` (``host:pid``) is a process of this machine that no longer runs: its
    lease need not lapse first (a run killed here resumes at once)."""
    host, _, pid = owner.rpartition(":")
    return storage.serving.gone_here(host, pid)


#: Tables holding a run's rows, children first; ``runs`` names it in ``name``, the others in ``run``.
RUN_TABLES = ("scores", "explicit_results", "explicit_prompts", "model_distributions", "run_items", "runs")


def _run_column(table: str) -> str:
    return "name" if table == "runs" else "run"


def run_row_counts(db: sqlite_utils.Database, run: str) -> dict[str, int]:
    """Rows of run `run` per table of `RUN_TABLES`."""
    return {
        table: db.execute(f"select count(*) from {table} where {_run_column(table)} = ?", [run]).fetchone()[0]
        for table in RUN_TABLES
    }


def delete_run_rows(db: sqlite_utils.Database, run: str) -> dict[str, int]:
    """Delete every row of run `run` (`RUN_TABLES`) inside the caller's `storage.transaction`;
    rows deleted per table (`evaluation.pipeline.removal` checks first that it may)."""
    return {table: delete_rows(db, table, {_run_column(table): run}) for table in RUN_TABLES}


def studies_showing(db: sqlite_utils.Database, run: str) -> list[tuple[str, bool]]:
    """``(name, open)`` of each pairwise study whose candidates come from run `run` (their
    distributions and images were copied when the study was set up), by name."""
    return [
        (name, frozen is not None)
        for name, frozen in db.execute(
            "select distinct s.name, s.frozen from study_candidates c join studies s on s.id = c.study_id "
            "where json_extract(c.source, '$.run') = ? order by s.name",
            [run],
        )
    ]


def run_masking(db: sqlite_utils.Database, run: str) -> dict | None:
    """The masking recorded for run `run` (`claim_masking`), or None before one is given;
    raises `RunError` for an unknown run, naming the known ones (`run_config`)."""
    run_config(db, run)
    [recorded] = db.execute("SELECT masking FROM runs WHERE name = ?", [run]).fetchone()
    return None if recorded is None else json.loads(recorded)


GRID_ORDER = "model, cfg, id"
"""The order a stage takes a run's items in (`batches` then groups model and cfg): the
batches a stage makes follow from it, and a lost file is made again in its batch."""


def pending_items(db: sqlite_utils.Database, run: str, stage: str) -> list[dict]:
    """The items that `stage` (``"generate"`` or ``"segment"``) still has to do, in grid order."""
    if stage not in STAGE_INPUT:
        raise ValueError(f"`stage` must be one of {sorted(STAGE_INPUT)}, got {shown(stage)}")
    run_config(db, run)
    statuses = STAGE_INPUT[stage]
    marks = ", ".join("?" for _ in statuses)
    sql = f"SELECT * FROM run_items WHERE run = ? AND status IN ({marks}) ORDER BY {GRID_ORDER}"
    return [dict(row) for row in db.query(sql, [run, *statuses])]


def batches(
    items: Sequence[Mapping[str, Any]], size: int, *, by: Sequence[str] = ("model", "cfg")
) -> Iterator[list[dict]]:
    """Split items into lists of at most `size` that agree on the fields `by`."""
    if size < 1:
        raise ValueError(f"`size` must be a positive integer, got {size}")
    for _, group in groupby(items, key=lambda item: tuple(item[k] for k in by)):
        group = [dict(item) for item in group]
        for start in range(0, len(group), size):
            yield group[start : start + size]


def record_items(db: sqlite_utils.Database, updates: Iterable[Mapping[str, Any]]) -> None:
    """Apply item updates (each with its ``id``) in one transaction."""
    now = _now()
    with transaction(db):
        for update in updates:
            fields = {k: v for k, v in update.items() if k != "id"}
            if fields.get("status", "pending") not in ITEM_STATUSES:
                raise ValueError(f"item status must be one of {ITEM_STATUSES}, got {shown(fields['status'])}")
            if not update_rows(db, "run_items", {"id": update["id"]}, {**fields, "updated_at": now}):
                raise sqlite_utils.db.NotFoundError(f"no run item with id {update['id']!r}")


def items(
    db: sqlite_utils.Database,
    run: str,
    *,
    model: str | None = None,
    style: str | None = None,
    cfg: float | None = None,
) -> list[dict]:
    """The items of `run`, in id order: all, or one model's, style's and/or guidance scale's."""
    where, params = ["run = ?"], [run]
    for column, value in (("model", model), ("style", style)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if cfg is not None:
        where.append("abs(cfg - ?) < 1e-9")
        params.append(float(cfg))
    return list(db.query(f"SELECT * FROM run_items WHERE {' AND '.join(where)} ORDER BY id", params))


def items_by_id(db: sqlite_utils.Database, ids: Sequence[int]) -> list[dict]:
    """The run items whose ids are `ids`, in that order (an id with no row is left out)."""
    rows = {}
    for start in range(0, len(ids), 500):  # SQLite's bound on a statement's parameters
        chunk = list(ids[start : start + 500])
        sql = f"SELECT * FROM run_items WHERE id IN ({', '.join('?' * len(chunk))})"
        rows.update((row["id"], row) for row in db.query(sql, chunk))
    return [rows[i] for i in ids if i in rows]


def segmented_groups(db: sqlite_utils.Database, run: str) -> Iterator[tuple[tuple, list[dict]]]:
    """Items of `run` grouped by (model, concept, style, cfg), for groups fully segmented."""
    sql = "SELECT * FROM run_items WHERE run = ? ORDER BY model, concept, style, cfg, sample"
    for key, group in groupby(
        db.query(sql, [run]), key=lambda r: (r["model"], r["concept"], r["style"], r["cfg"])
    ):
        group = [dict(row) for row in group]
        if all(row["status"] == "segmented" for row in group):
            yield key, group


def has_model_distribution(
    db: sqlite_utils.Database, run: str, model: str, concept: str, style: str, cfg: float
) -> bool:
    """Whether the distribution of this (run, model, concept, style, cfg) is stored."""
    sql = "SELECT 1 FROM model_distributions WHERE run=? AND model=? AND concept=? AND style=? AND cfg=?"
    return db.execute(sql, [run, model, concept, style, cfg]).fetchone() is not None


def store_model_distribution(
    db: sqlite_utils.Database,
    run: str,
    model: str,
    concept: str,
    style: str,
    cfg: float,
    p: np.ndarray | None,
    n_images: int,
    n_excluded: int,
    groups: Any = None,
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
        "run": run,
        "model": model,
        "concept": concept,
        "style": style,
        "cfg": float(cfg),
        "p": p_json,
        "n_images": int(n_images),
        "n_excluded": int(n_excluded),
        "groups": encode_groups(groups),
        "created_at": _now(),
    }
    with transaction(db):
        upsert_row(db, "model_distributions", row, pk=("run", "model", "concept", "style", "cfg"))


def model_distributions(
    db: sqlite_utils.Database,
    *,
    run: str | None = None,
    model: str | None = None,
    concepts: Sequence[str] | None = None,
    cfgs: Mapping[str, float] | None = None,
    groups: bool = True,
) -> list[dict]:
    """Stored model distributions, optionally of one run, one model, some concept keys and/or
    one guidance scale per model (`cfgs`: model -> scale; other models left out).

    ``p`` is decoded to a (71,) float64 array or None, ``groups`` to dicts or None (not read
    at all with ``groups=False``: the tables need only ``p``); with `concepts` only those
    concepts' rows are read (an index search, not a scan).
    """
    where, params = [], []
    for column, value in (("run", run), ("model", model)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if concepts is not None:
        keys = list(dict.fromkeys(concepts))
        if not keys:
            return []
        where.append(f"concept IN ({', '.join('?' for _ in keys)})")
        params.extend(keys)
    if cfgs is not None:
        if not cfgs:
            return []
        where.append("(" + " OR ".join("(model = ? AND abs(cfg - ?) < 1e-9)" for _ in cfgs) + ")")
        params.extend(x for pair in cfgs.items() for x in (pair[0], float(pair[1])))
    columns = "*" if groups else ", ".join(c for c in db["model_distributions"].columns_dict if c != "groups")
    sql = f"SELECT {columns} FROM model_distributions" + (" WHERE " + " AND ".join(where) if where else "")
    rows = []
    for row in db.query(sql + " ORDER BY run, model, concept, style, cfg", params):
        row["p"] = decode(row["p"])
        if groups:
            row["groups"] = decode_groups(row["groups"]) or None
        rows.append(row)
    return rows


SCORE_COLUMNS = ("pcc", "emd", "ed", "dominant_human", "dominant_model", "hue_diff")


def scored_distributions(db: sqlite_utils.Database, source: str) -> pd.DataFrame:
    """Every stored model distribution with a human distribution of `source`, and its score.

    One row per model row that has a ``p`` and whose concept `source` covers: the model
    row's keys, ``n_images, n_excluded, created_at``, the human row's ``human_updated``,
    ``scored`` (0/1) and the `SCORE_COLUMNS` of the stored score when it was computed from
    these very two rows (else None). No distribution is decoded; the rows go straight into
    a frame (at the full study's size, 54,000 rows, dicts per row cost 0.3 s).
    """
    sql = """
        SELECT m.run, m.model, m.concept, m.style, m.cfg, m.n_images, m.n_excluded,
               m.created_at, h.updated AS human_updated, s.emd IS NOT NULL AS scored,
               s.pcc, s.emd, s.ed, s.dominant_human, s.dominant_model, s.hue_diff
        FROM model_distributions m
        JOIN human_distributions h ON h.source = :source AND h.concept_key = m.concept
        LEFT JOIN scores s ON s.source = :source AND s.run = m.run AND s.model = m.model
             AND s.concept = m.concept AND s.style = m.style AND s.cfg = m.cfg
             AND s.model_created = m.created_at AND s.human_updated = h.updated
        WHERE m.p IS NOT NULL
    """
    cursor = db.execute(sql, {"source": source})
    return pd.DataFrame.from_records(cursor.fetchall(), columns=[d[0] for d in cursor.description])


def unscored_distributions(db: sqlite_utils.Database, source: str) -> list[dict]:
    """The rows of `scored_distributions` that have no valid score, with both ``p`` decoded:
    ``p`` (model) and ``human_p``, each (71,) float64."""
    sql = """
        SELECT m.run, m.model, m.concept, m.style, m.cfg, m.created_at, m.p,
               h.updated AS human_updated, h.p AS human_p
        FROM model_distributions m
        JOIN human_distributions h ON h.source = :source AND h.concept_key = m.concept
        WHERE m.p IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM scores s WHERE s.source = :source AND s.run = m.run
            AND s.model = m.model AND s.concept = m.concept AND s.style = m.style
            AND s.cfg = m.cfg AND s.model_created = m.created_at
            AND s.human_updated = h.updated)
    """
    return [
        {**row, "p": decode(row["p"]), "human_p": decode(row["human_p"])}
        for row in db.query(sql, {"source": source})
    ]


def store_scores(db: sqlite_utils.Database, source: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Insert or replace scores of `source` (each row: the model row's keys, `SCORE_COLUMNS`,
    ``created_at`` of the model row and ``human_updated``), in one transaction."""
    records = [
        {
            "source": source,
            "run": r["run"],
            "model": r["model"],
            "concept": r["concept"],
            "style": r["style"],
            "cfg": float(r["cfg"]),
            **{k: r[k] for k in SCORE_COLUMNS},
            "model_created": r["created_at"],
            "human_updated": r["human_updated"],
        }
        for r in rows
    ]
    with transaction(db):
        upsert_rows(db, "scores", records, pk=("source", "run", "model", "concept", "style", "cfg"))


def exclusion_counts(
    db: sqlite_utils.Database,
    *,
    run: str | None = None,
    model: str | None = None,
    concepts_only: bool = False,
) -> list[dict]:
    """Per model: segmented images, usable ones, and those excluded by reason; of `run`
    (every run when None) and `model` (every model when None), and with `concepts_only` of
    concept runs alone (the images the concept tables rest on: an explicit-color run, whose
    prompts are stored, is left out)."""
    where, params = ["status = 'segmented'"], []
    for column, value in (("run", run), ("model", model)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if concepts_only:
        where.append("run NOT IN (SELECT run FROM explicit_prompts)")
    sql = f"""
        SELECT model, count(*) AS n_segmented,
               sum(segment_status = 'ok') AS n_ok,
               sum(segment_status = 'no_detection') AS n_no_detection,
               sum(segment_status = 'empty_mask') AS n_empty_mask
        FROM run_items WHERE {" AND ".join(where)} GROUP BY model ORDER BY model
    """
    return [dict(row) for row in db.query(sql, params)]


def all_excluded(
    db: sqlite_utils.Database, *, run: str | None = None, model: str | None = None
) -> str | None:
    """Why nothing of `run` (every run when None) and `model` (every model when None) can be
    scored, when model distributions are stored but every one is empty because the masking
    excluded each of its images; None otherwise.

    Scoring such a run had blamed the human source ("pick a source that covers its
    concepts") or said no model had run (outside probe 148)."""
    given = {column: value for column, value in (("run", run), ("model", model)) if value is not None}
    where = " AND ".join(f"{column} = ?" for column in given)
    stored, usable = db.execute(
        f"SELECT count(*), count(p) FROM model_distributions {f'WHERE {where}' if where else ''}",
        list(given.values()),
    ).fetchone()
    if not stored or usable:
        return None
    counts = exclusion_counts(db, run=run, model=model)
    undetected = sum(r["n_no_detection"] or 0 for r in counts)
    empty = sum(r["n_empty_mask"] or 0 for r in counts)
    of = f"run {run!r}" if run is not None else "the stored runs"
    if model is not None:
        of = f"model {model!r} in {of}"
    return (
        f"every image of {of} was excluded by the "
        f"masking ({undetected:,} without a detection, {empty:,} with an empty mask), so no model "
        "distribution has a color to score: segment again with a lower box threshold, or another segmenter"
    )


@dataclass(frozen=True)
class RunProgress:
    """Where a run stands, counted from its rows.

    Attributes
    ----------
    run : str
    items : int
        Images of the run.
    generated : int
        Items with an image (status ``generated`` or ``segmented``).
    segmented : int
        Items masked (status ``segmented``), of which ``usable`` have a non-empty mask.
    failed : int
        Items whose generation failed (retried on resume).
    groups : int
        (model, concept, style, cfg) cells of the run.
    extracted : int
        Cells whose distribution is stored.
    failure : str
        The reason failed items gave most often, with how many gave it (``"3 × ..."``), cut
        to `FAILURE_CHARS` characters; ``""`` when none failed.
    """

    run: str
    items: int
    generated: int
    segmented: int
    usable: int
    failed: int
    groups: int
    extracted: int
    failure: str = ""

    @property
    def fraction(self) -> float:
        """Share of the work done in [0, 1]: the three stages weigh the same."""
        if not self.items:
            return 0.0
        return (self.generated / self.items + self.segmented / self.items + self.extracted / self.groups) / 3

    @property
    def complete(self) -> bool:
        """Every cell has its distribution."""
        return self.groups > 0 and self.extracted == self.groups


# Each count is one index search: statuses through the (run, status) index, cells through
# the unique (run, model, concept, style, cfg, sample) index.
FAILURE_CHARS = 300
_PROGRESS_SQL = {
    "statuses": "SELECT status, count(*) AS n FROM run_items WHERE run = ? GROUP BY status",
    "usable": "SELECT count(*) FROM run_items WHERE run = ? AND status = 'segmented' AND segment_status = 'ok'",
    "groups": "SELECT count(*) FROM (SELECT DISTINCT model, concept, style, cfg FROM run_items WHERE run = ?)",
    "extracted": "SELECT count(*) FROM model_distributions WHERE run = ?",
    "failure": "SELECT error, count(*) AS n FROM run_items WHERE run = ? AND status = 'failed' "
    "GROUP BY error ORDER BY n DESC, error LIMIT 1",
}


def run_progress(db: sqlite_utils.Database, run: str) -> RunProgress:
    """Counts of run `run`'s items by stage (all zero for an unknown run)."""
    statuses = {row["status"]: row["n"] for row in db.query(_PROGRESS_SQL["statuses"], [run])}
    usable, groups, extracted = (
        db.execute(_PROGRESS_SQL[name], [run]).fetchone()[0] for name in ("usable", "groups", "extracted")
    )
    failure = db.execute(_PROGRESS_SQL["failure"], [run]).fetchone()
    return RunProgress(
        run=run,
        items=sum(statuses.values()),
        generated=statuses.get("generated", 0) + statuses.get("segmented", 0),
        segmented=statuses.get("segmented", 0),
        usable=usable,
        failed=statuses.get("failed", 0),
        groups=groups,
        extracted=extracted,
        failure=""
        if failure is None
        else f"{failure[1]} × {failure[0] or 'no reason recorded'}"[:FAILURE_CHARS],
    )


def list_runs(db: sqlite_utils.Database) -> list[dict]:
    """Every stored run, newest first.

    Returns
    -------
    list of dict
        ``name, created_at, kind`` (``"generated"``, or ``"imported"`` for a run made by
        `evaluation.pipeline.imports`), ``models`` (sorted keys) and ``items``.
    """
    sql = """
        SELECT r.name, r.created_at, r.config, count(i.id) AS items,
               group_concat(DISTINCT i.model) AS models
        FROM runs r LEFT JOIN run_items i ON i.run = r.name
        GROUP BY r.name ORDER BY r.created_at DESC, r.name
    """
    out = []
    for row in db.query(sql):
        config = json.loads(row["config"])
        out.append(
            {
                "name": row["name"],
                "created_at": row["created_at"],
                "kind": "imported" if "imported" in config else "generated",
                "models": sorted((row["models"] or "").split(",")) if row["models"] else [],
                "items": row["items"],
            }
        )
    return out


def measured_seconds(db: sqlite_utils.Database) -> dict[str, float]:
    """Mean generation + masking seconds per image, per model, over items that have both."""
    sql = """
        SELECT model, avg(gen_seconds + seg_seconds) AS seconds FROM run_items
        WHERE gen_seconds IS NOT NULL AND seg_seconds IS NOT NULL GROUP BY model
    """
    return {row["model"]: float(row["seconds"]) for row in db.query(sql)}


def concept_items(
    db: sqlite_utils.Database, concept: str, *, style: str | None = None, limit: int = 200
) -> list[dict]:
    """Masked items of `concept` (any run), newest run first, at most `limit`.

    Returns
    -------
    list of dict
        Rows of ``run_items`` with status ``segmented`` and a mask, ordered by run
        creation (newest first), model, cfg and sample.
    """
    if limit < 1:
        raise ValueError(f"`limit` must be a positive integer, got {limit}")
    where = "i.concept = :concept AND i.status = 'segmented' AND i.mask_path IS NOT NULL"
    if style is not None:
        where += " AND i.style = :style"
    sql = f"""
        SELECT i.* FROM run_items i JOIN runs r ON r.name = i.run WHERE {where}
        ORDER BY r.created_at DESC, i.run, i.model, i.style, i.cfg, i.sample LIMIT :limit
    """
    return [dict(row) for row in db.query(sql, {"concept": concept, "style": style, "limit": limit})]


# Explicit-color mode (issue 17): a run's prompts and its per-object verdicts (schema v9).

EXPLICIT_PROMPT_FIELDS = (
    "task",
    "level",
    "system",
    "template",
    "text",
    "objects",
    "targets",
    "notation",
    "category",
)


def store_explicit_prompts(db: sqlite_utils.Database, run: str, prompts: Iterable[Any]) -> int:
    """Store the prompts of explicit run `run` (kept as they are if already stored).

    Parameters
    ----------
    prompts : iterable of `evaluation.explicit.prompts.Prompt`
        Anything with ``id`` and the attributes of `EXPLICIT_PROMPT_FIELDS`.

    Returns
    -------
    int
        The number of prompts given.
    """
    rows = [
        {
            "run": run,
            "prompt_id": p.id,
            **{k: getattr(p, k) for k in EXPLICIT_PROMPT_FIELDS if k not in ("objects", "targets")},
            "objects": json.dumps(list(p.objects)),
            "targets": json.dumps(list(p.targets)),
        }
        for p in prompts
    ]
    with transaction(db):
        insert_rows(db, "explicit_prompts", rows, ignore=True)
    return len(rows)


def explicit_prompts(db: sqlite_utils.Database, run: str) -> list[dict]:
    """The stored prompts of `run` in prompt-id order, ``objects`` and ``targets`` decoded to lists."""
    sql = "SELECT * FROM explicit_prompts WHERE run = ? ORDER BY prompt_id"
    return [
        {**row, "objects": json.loads(row["objects"]), "targets": json.loads(row["targets"])}
        for row in db.query(sql, [run])
    ]


def store_explicit_results(db: sqlite_utils.Database, rows: Iterable[Mapping[str, Any]]) -> None:
    """Insert or replace per-object verdicts (keys: the ``explicit_results`` columns), in one
    transaction; ``created_at`` is set here."""
    now = _now()
    records = [{**dict(row), "created_at": now} for row in rows]
    with transaction(db):
        upsert_rows(db, "explicit_results", records, pk=("item_id", "object_index", "scoring"))


def explicit_results(
    db: sqlite_utils.Database,
    *,
    run: str | None = None,
    scoring: str | None = None,
    prompt_id: str | None = None,
) -> list[dict]:
    """Per-object verdicts with their image's and prompt's fields, in item and object order,
    optionally of one run, one rule set and/or one prompt.

    Each row: the ``explicit_results`` columns plus ``model, cfg, sample, image_path`` of the
    image and ``prompt_id, task, level, system, category, notation, text`` of its prompt.
    """
    where, params = [], []
    for column, value in (("e.run", run), ("e.scoring", scoring), ("i.concept", prompt_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"""
        SELECT e.*, i.model, i.cfg, i.sample, i.image_path, p.prompt_id, p.task, p.level,
               p.system, p.category, p.notation, p.text
        FROM explicit_results e
        JOIN run_items i ON i.id = e.item_id
        JOIN explicit_prompts p ON p.run = e.run AND p.prompt_id = i.concept
        {"WHERE " + " AND ".join(where) if where else ""}
        ORDER BY e.item_id, e.object_index, e.scoring
    """
    return [dict(row) for row in db.query(sql, params)]
