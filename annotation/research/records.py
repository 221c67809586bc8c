"""What the research tabs record and read about evaluation runs.

Writes: `create_evaluation_run` and `import_run` store a run (through `evaluation.pipeline.runs`
and `evaluation.pipeline.imports`) and add an audit row saying who did it; `record_job_action`
audits a cancel or resume; `delete_evaluation_run` deletes a run and audits it; `run_starters`
reads who started each run.

Reads (progress, run lists, measured seconds, a concept's items and distributions) are
`evaluation.pipeline.runs`', which owns the run tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sqlite_utils

from evaluation.concepts import Concept
from evaluation.pipeline import removal, runs
from evaluation.pipeline.imports import ImportReport, import_images
from evaluation.pipeline.planning import run_exists
from evaluation.pipeline.runs import check_run_name
from storage import audit, transaction
from storage.shown import shown


def create_evaluation_run(
    db: sqlite_utils.Database, actor: str, run: str, items: Sequence[dict], config: dict
) -> int:
    """Store a new run (`evaluation.pipeline.planning.plan_request` output) and audit who started it.

    Returns the number of items. Raises `evaluation.pipeline.runs.RunError` if the name is taken
    (resume that run instead) and ValueError for a malformed name; nothing is written then.
    """
    check_run_name(run)
    with transaction(db):
        if run_exists(db, run):
            clash = runs.kind_clash(run, runs.run_config(db, run), config)
            raise runs.RunError(clash or f"run {run!r} exists already; resume it, or choose another name")
        n = runs.create_run(db, run, items, config)
        audit.record(db, actor, "start_evaluation", "run", run, details={"items": n})
    return n


def import_run(
    db: sqlite_utils.Database,
    actor: str,
    run: str,
    source: str | Path,
    data_dir: str | Path,
    concepts: Sequence[Concept],
    *,
    allowed_roots: Sequence[str | Path],
) -> ImportReport:
    """`evaluation.pipeline.imports.import_images`, then an audit row with the counts."""
    report = import_images(db, run, source, data_dir, concepts, allowed_roots=allowed_roots)
    with transaction(db):
        audit.record(
            db,
            actor,
            "import_run",
            "run",
            run,
            details={"imported": report.imported, "rejected": len(report.rejected)},
        )
    return report


def record_job_action(db: sqlite_utils.Database, actor: str, action: str, run: str) -> None:
    """Audit a ``cancel_evaluation`` or ``resume_evaluation`` of an existing run."""
    if action not in ("cancel_evaluation", "resume_evaluation"):
        raise ValueError(f"`action` must be 'cancel_evaluation' or 'resume_evaluation', got {shown(action)}")
    runs.run_config(db, run)
    with transaction(db):
        audit.record(db, actor, action, "run", run)


def delete_evaluation_run(
    db: sqlite_utils.Database,
    actor: str,
    run: str,
    data_dir: str | Path,
    *,
    busy: str = "",
    created: str | None = None,
) -> tuple[dict[str, int], removal.FilesRemoved]:
    """`evaluation.pipeline.removal.delete_run` (`busy` and `created` as there), with an audit
    row (``delete_evaluation_run``, the rows deleted per table) committed with the deletion."""
    return removal.delete_run(
        db, run, data_dir, busy=busy, created=created, record=removal.audited(actor, run)
    )


STARTED_ELSEWHERE = runs.COMMAND_LINE
"""Who started a run that no one started in the app (``python -m evaluation run``)."""


def run_starters(db: sqlite_utils.Database, names: Sequence[str]) -> dict[str, str]:
    """The pseudonym that started or imported each run in `names` in the app (from the audit
    rows since the run was stored: a run deleted and made again under its name showed who
    started the deleted one, outside probe 237), else `STARTED_ELSEWHERE`."""
    marks = ", ".join("?" * len(names))
    found = {
        row["object_id"]: row["actor"]
        # Rows of an earlier run of the name, deleted since, are older than this one.
        for row in db.query(
            "SELECT a.object_id, a.actor FROM audit a JOIN runs r ON r.name = a.object_id "
            "WHERE a.action IN ('start_evaluation', 'import_run') AND a.object_type = 'run' "
            f"AND a.created >= r.created_at AND a.object_id IN ({marks}) ORDER BY a.id",
            list(names),
        )
    }
    return {name: found.get(name, STARTED_ELSEWHERE) for name in names}
