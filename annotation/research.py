"""What the research tabs record and read about evaluation runs.

Writes: `create_evaluation_run` and `import_run` store a run (through `evaluation.runs`
and `evaluation.imports`) and add an audit row saying who did it; `record_job_action`
audits a cancel or resume.

Reads: `evaluation.runs` keeps the run tables; it has no summary reads, and `evaluation/`
holds SQL only there. These aggregate reads (one query each, so that a progress poll
every few seconds stays cheap on a run of 600,000 items) live here, in the package that
owns the database, until `evaluation.runs` offers them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation import audit
from storage import transaction
from evaluation import runs
from evaluation.concepts import Concept
from evaluation.imports import ImportReport, import_images
from evaluation.planning import check_run_name, run_exists


def create_evaluation_run(db: sqlite_utils.Database, actor: str, run: str, items: Sequence[dict],
                          config: dict) -> int:
    """Store a new run (`evaluation.planning.plan_request` output) and audit who started it.

    Returns the number of items. Raises `evaluation.runs.RunError` if the name is taken
    (resume that run instead) and ValueError for a malformed name; nothing is written then.
    """
    check_run_name(run)
    with transaction(db):
        if run_exists(db, run):
            raise runs.RunError(f"run {run!r} exists already; resume it, or choose another name")
        n = runs.create_run(db, run, items, config)
        audit.record(db, actor, "start_evaluation", "run", run, details={"items": n})
    return n


def import_run(db: sqlite_utils.Database, actor: str, run: str, source: str | Path, data_dir: str | Path,
               concepts: Sequence[Concept], *, allowed_roots: Sequence[str | Path]) -> ImportReport:
    """`evaluation.imports.import_images`, then an audit row with the counts."""
    report = import_images(db, run, source, data_dir, concepts, allowed_roots=allowed_roots)
    with transaction(db):
        audit.record(db, actor, "import_run", "run", run,
                     details={"imported": report.imported, "rejected": len(report.rejected)})
    return report


def record_job_action(db: sqlite_utils.Database, actor: str, action: str, run: str) -> None:
    """Audit a ``cancel_evaluation`` or ``resume_evaluation`` of an existing run."""
    if action not in ("cancel_evaluation", "resume_evaluation"):
        raise ValueError(f"`action` must be 'cancel_evaluation' or 'resume_evaluation', got {action!r}")
    runs.run_config(db, run)
    with transaction(db):
        audit.record(db, actor, action, "run", run)


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
    """

    run: str
    items: int
    generated: int
    segmented: int
    usable: int
    failed: int
    groups: int
    extracted: int

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
_PROGRESS_SQL = {
    "statuses": "SELECT status, count(*) AS n FROM run_items WHERE run = ? GROUP BY status",
    "usable": "SELECT count(*) FROM run_items WHERE run = ? AND status = 'segmented' AND segment_status = 'ok'",
    "groups": "SELECT count(*) FROM (SELECT DISTINCT model, concept, style, cfg FROM run_items WHERE run = ?)",
    "extracted": "SELECT count(*) FROM model_distributions WHERE run = ?",
}


def run_progress(db: sqlite_utils.Database, run: str) -> RunProgress:
    """Counts of run `run`'s items by stage (all zero for an unknown run)."""
    statuses = {row["status"]: row["n"] for row in db.query(_PROGRESS_SQL["statuses"], [run])}
    usable, groups, extracted = (db.execute(_PROGRESS_SQL[name], [run]).fetchone()[0]
                                 for name in ("usable", "groups", "extracted"))
    return RunProgress(run=run, items=sum(statuses.values()),
                       generated=statuses.get("generated", 0) + statuses.get("segmented", 0),
                       segmented=statuses.get("segmented", 0), usable=usable, failed=statuses.get("failed", 0),
                       groups=groups, extracted=extracted)


def list_runs(db: sqlite_utils.Database) -> list[dict]:
    """Every stored run, newest first.

    Returns
    -------
    list of dict
        ``name, created_at, kind`` (``"generated"``, or ``"imported"`` for a run made by
        `evaluation.imports`), ``models`` (sorted keys) and ``items``.
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
        out.append({"name": row["name"], "created_at": row["created_at"],
                    "kind": "imported" if "imported" in config else "generated",
                    "models": sorted((row["models"] or "").split(",")) if row["models"] else [],
                    "items": row["items"]})
    return out


def measured_seconds(db: sqlite_utils.Database) -> dict[str, float]:
    """Mean generation + masking seconds per image, per model, over items that have both."""
    sql = """
        SELECT model, avg(gen_seconds + seg_seconds) AS seconds FROM run_items
        WHERE gen_seconds IS NOT NULL AND seg_seconds IS NOT NULL GROUP BY model
    """
    return {row["model"]: float(row["seconds"]) for row in db.query(sql)}


def concept_items(db: sqlite_utils.Database, concept: str, *, style: str | None = None,
                  limit: int = 200) -> list[dict]:
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


def concept_distributions(db: sqlite_utils.Database, concepts: Sequence[str]) -> list[dict]:
    """Stored model distributions of the concept keys `concepts` (any run).

    Rows as `evaluation.runs.model_distributions` returns them (``p`` a (71,) float64
    array or None, ``groups`` decoded), without reading the other concepts' rows.
    """
    keys = list(dict.fromkeys(concepts))
    if not keys:
        return []
    marks = ", ".join("?" for _ in keys)
    sql = f"SELECT * FROM model_distributions WHERE concept IN ({marks}) ORDER BY run, model, concept, style, cfg"
    rows = []
    for row in db.query(sql, keys):
        row = dict(row)
        row["p"] = None if row["p"] is None else np.asarray(json.loads(row["p"]), dtype=np.float64)
        row["groups"] = json.loads(row["groups"]) if row["groups"] else None
        rows.append(row)
    return rows
