"""Colorings in the store: writing one (with its UW-71 distribution) and reading them back.

A coloring is a designer's colored sketch of one concept (``colorings`` row) with the
painted-pixel mask and its distribution (``coloring_distributions`` row, computed by the
extraction pipeline on the painted pixels only). Both image files live under the data
folder with content-hash names (`annotation.files`).

Rounds (paper Appendix B.4, stage 1)
------------------------------------
When an expert asks for a recolor (`annotation.qc.review.request_recolor`), the coloring's
status becomes ``recolor_requested`` and its designer gets a *recolor task*: a ``tasks``
row of kind ``coloring`` for the same concept whose ``coloring_id`` names the coloring to
redo. Submitting it (`store_coloring` with that ``task_id``) stores round ``r + 1``;
every round is kept. A designer counts once towards a concept's quota whatever the
number of rounds (`annotation.assignment` counts distinct designers).

Which colorings make up a concept's human distribution P_H is said once, in
`storage.human.COUNTING_RULE`; writing a coloring stores its sampled pixels and
refreshes the concept's stored P_H in the same transaction (`annotation.coloring.ground_truth`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.assignment import Task, check_submittable, submit
from annotation.coloring import ground_truth
from annotation.coloring.fill import MAX_SECONDS_SPENT
from annotation.coloring.ground_truth import load_pixels  # noqa: F401  (app.designer reads it from here)
from annotation.coloring.withdrawal import WITHDRAWN
from annotation.concepts import get_concept
from annotation.errors import (
    AnnotationError,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    TaskEnded,
    shown,
)
from annotation.files import StoredFile, png_bytes, store_bytes
from annotation.integrity import discard_unnamed
from evaluation.color import extraction
from storage import insert_row, iso, transaction, update_rows, utcnow
from storage.distributions import check_distribution, decode, encode
from storage.schema import COLORING_STATUSES

DISTRIBUTION_METHOD = "extraction.image_distribution"


@dataclass(frozen=True)
class PreparedColoring:
    """What a coloring stores, derived from its pixels without the database.

    `prepare_coloring` makes it; it is plain data, so a process pool can make it while
    the server thread keeps only the files and the one short transaction
    (`store_prepared`).

    Attributes
    ----------
    image_png, mask_png : bytes
        The coloring image and its painted-pixel mask as PNG.
    p : ndarray, shape (71,), float64
        The coloring's UW-71 distribution (`evaluation.color.extraction`).
    sample : ndarray, shape (N, 3), uint8
        Its sampled painted pixels (`annotation.coloring.ground_truth.sample_pixels`).
    background : float
        Share of the area around the drawing that is painted, in [0, 1]
        (`annotation.coloring.canvas.painted_background`); not stored.
    """

    image_png: bytes
    mask_png: bytes
    p: np.ndarray
    sample: np.ndarray
    background: float = 0.0


def prepare_coloring(color_image: np.ndarray, painted_mask: np.ndarray) -> PreparedColoring:
    """Check a coloring's pixels and derive what `store_prepared` writes.

    Parameters
    ----------
    color_image : numpy.ndarray, shape (H, W, 3), uint8
        The colored sketch as shown (line art included), sRGB [0, 255].
    painted_mask : numpy.ndarray, shape (H, W), bool
        True on painted pixels; only these enter the distribution.

    Raises
    ------
    InvalidInput
        Malformed pixels or nothing painted.
    """
    image, mask = _check_pixels(color_image, painted_mask)
    sample = ground_truth.sample_pixels(image, mask)
    p = extraction.distribution_from_pixels([sample]).p
    return PreparedColoring(png_bytes(image), png_bytes(mask), p, sample)


def store_coloring(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    annotator_id: int,
    concept_key: str,
    color_image: np.ndarray,
    painted_mask: np.ndarray,
    **options,
) -> int:
    """Store a coloring: image and mask files, its distribution, and the rows, at once.

    `prepare_coloring` (`color_image`, `painted_mask`) then `store_prepared` (whose
    parameters `options` are).

    Returns
    -------
    int
        The new coloring id.
    """
    return store_prepared(
        db, data_dir, annotator_id, concept_key, prepare_coloring(color_image, painted_mask), **options
    )


def store_prepared(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    annotator_id: int,
    concept_key: str,
    prepared: PreparedColoring,
    *,
    practice: bool = False,
    round: int | None = None,
    seconds_spent: float,
    task_id: int | None = None,
    task: Task | None = None,
    sketch_id: int | None = None,
    k: int = 5,
    then: Callable[[sqlite_utils.Database], object] | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Store a prepared coloring: its two files, then its rows in one transaction.

    Parameters
    ----------
    data_dir : str or Path
        The app's data folder; the image and mask go under ``colorings/``.
    annotator_id : int
        The designer.
    concept_key : str
        The concept colored; must match the task's.
    prepared : PreparedColoring
        From `prepare_coloring`.
    practice : bool
        A practice coloring (counts towards no quota); must match the task's.
    round : int, optional
        Defaults to 1, or for a recolor task to the redone coloring's round + 1; a
        different value is refused.
    seconds_spent : float
        Time the designer spent, >= 0.
    task_id : int, optional
        The reserved ``coloring`` task this completes (see `annotation.assignment`); a
        recolor task stores the next round. Without it the coloring is stored as given
        (imports, tests).
    sketch_id : int, optional
        The ``sketches`` row colored.
    k : int
        Colorings per concept (the quota checked on submission).
    task : Task, optional
        Instead of `task_id`: the task the caller has just read for this designer (the
        submit path), so that neither it nor the concept is read again before the
        transaction, which checks the task once more.
    then : callable, optional
        ``then(db)`` runs in the same transaction after the rows are written (a designer's
        next reservation, say), so one commit does both.

    Returns
    -------
    int
        The new coloring id.

    Raises
    ------
    InvalidInput
        A bad `seconds_spent` or `round`, or a task for another concept.
    NotFound, PermissionDenied, Conflict, ReservationExpired
        From the task checks (see `annotation.assignment.submit`).
    """
    _check_seconds(seconds_spent)
    if task is None:
        get_concept(db, concept_key)
        task = None if task_id is None else _coloring_task(db, task_id, concept_key, bool(practice))
    elif (
        task_id is not None
        or task.kind != "coloring"
        or (task.concept_key, task.practice)
        != (
            concept_key,
            bool(practice),
        )
    ):
        raise InvalidInput(f"`task` must be a coloring task of {concept_key!r} given without `task_id`")
    # Refuse before writing any file: a refused submission leaves no file and no row.
    if task is not None and task.coloring_id is None:
        check_submittable(db, task, annotator_id, k=k, now=now)
    elif task is not None:
        if (ended := _round_ended(db, task)) is not None:  # the redo task ends: it can never be stored
            with transaction(db):
                update_rows(
                    db,
                    "tasks",
                    {"id": task.id, "status": "reserved"},
                    {"status": "released", "finished": iso(utcnow() if now is None else now)},
                )
            raise ended
        _check_recolor((task.annotator_id, task.status, task.expires), task, annotator_id, now)
    files = (
        store_bytes(data_dir, prepared.image_png, folder="colorings"),
        store_bytes(data_dir, prepared.mask_png, folder="colorings"),
    )
    fields = {
        "annotator_id": annotator_id,
        "concept_key": concept_key,
        "practice": int(bool(practice)),
        "seconds_spent": float(seconds_spent),
        "sketch_id": sketch_id,
    }

    def write(db_, task: Task | None) -> int:
        expected = _expected_round(db_, task)
        if round is not None and round != expected:
            raise InvalidInput(f"`round` must be {expected} for this coloring, got {shown(round)}")
        # `prepared` comes from `prepare_coloring`: its p and sample are trusted, not re-checked.
        return _insert_coloring(
            db_, files[0], files[1], prepared.p, prepared.sample, **fields, round=expected, now=now
        )

    try:
        with transaction(db):
            if task is None:
                coloring_id = write(db, None)
            elif task.coloring_id is None:
                coloring_id = submit(db, task.id, annotator_id, write, k=k, now=now)
            else:
                coloring_id = _submit_recolor(db, task, annotator_id, write, now)
            if then is not None:
                then(db)
            return coloring_id
    except AnnotationError:
        # Refused inside the transaction (a second submission of the task at the same
        # moment): the refusal leaves no file either.
        discard_unnamed(db, data_dir, [f.path for f in files])
        raise


def record_coloring(
    db: sqlite_utils.Database,
    image: StoredFile,
    mask: StoredFile | None,
    p: np.ndarray,
    sample: np.ndarray,
    *,
    annotator_id: int,
    concept_key: str,
    practice: bool = False,
    round: int = 1,
    seconds_spent: float | None = None,
    sketch_id: int | None = None,
    method: str = DISTRIBUTION_METHOD,
    now: dt.datetime | None = None,
) -> int:
    """Write a coloring's rows and refresh its concept's stored P_H, in one transaction.

    The lower half of `store_coloring`, for files already stored and a distribution
    already computed (for instance imported colorings): the ``colorings`` row, its
    ``coloring_distributions`` row, its pixel sample, and the concept's P_H
    (`annotation.coloring.ground_truth.refresh`; a practice coloring changes no P_H).

    Parameters
    ----------
    image, mask : StoredFile
        The stored coloring image and painted-pixel mask (mask may be None).
    p : array_like, shape (71,)
        Non-negative, summing to 1 within 1e-6 (stored renormalised).
    sample : ndarray, shape (N, 3), uint8
        The coloring's sampled painted pixels (`annotation.coloring.ground_truth.sample_pixels`).
    method : str
        How `p` was computed.

    Returns
    -------
    int
        The coloring id.
    """
    p = _check_distribution(p)
    sample = np.asarray(sample)
    if sample.dtype != np.uint8 or sample.ndim != 2 or sample.shape[1:] != (3,) or not len(sample):
        raise InvalidInput(
            f"`sample` must be a non-empty (N, 3) uint8 array, got {sample.dtype} {sample.shape}"
        )
    if isinstance(round, bool) or not isinstance(round, int) or round < 1:
        raise InvalidInput(f"`round` must be a whole number >= 1, got {shown(round)}")
    return _insert_coloring(
        db,
        image,
        mask,
        p,
        sample,
        annotator_id=annotator_id,
        concept_key=concept_key,
        practice=practice,
        round=round,
        seconds_spent=seconds_spent,
        sketch_id=sketch_id,
        method=method,
        now=now,
    )


def _insert_coloring(
    db: sqlite_utils.Database,
    image: StoredFile,
    mask: StoredFile | None,
    p: np.ndarray,
    sample: np.ndarray,
    *,
    annotator_id: int,
    concept_key: str,
    practice: bool,
    round: int,
    seconds_spent: float | None,
    sketch_id: int | None,
    method: str = DISTRIBUTION_METHOD,
    now: dt.datetime | None,
) -> int:
    """The kernel of `record_coloring`: its rows, for a `p`, `sample` and `round` it checked
    (or `prepare_coloring` made and `store_prepared` computed)."""
    stamp = iso(now)
    with transaction(db):
        coloring_id = insert_row(
            db,
            "colorings",
            {
                "annotator_id": annotator_id,
                "concept_key": concept_key,
                "sketch_id": sketch_id,
                "image_path": image.path,
                "image_sha256": image.sha256,
                "mask_path": None if mask is None else mask.path,
                "mask_sha256": None if mask is None else mask.sha256,
                "practice": int(bool(practice)),
                "round": round,
                "status": "submitted",
                "seconds_spent": seconds_spent,
                "created": stamp,
            },
        )
        insert_row(
            db,
            "coloring_distributions",
            {"coloring_id": coloring_id, "p": encode(p), "method": method, "created": stamp},
        )
        ground_truth.store_sample(db, coloring_id, sample)
        if not practice:
            ground_truth.refresh(db, concept_key)
    return coloring_id


def set_status(db: sqlite_utils.Database, coloring: dict, status: str) -> None:
    """Change a coloring's ``status`` and refresh its concept's stored P_H, at once.

    The one way a coloring's status changes after it is stored (acceptance, exclusion,
    reinstatement, a recolor request), so the stored P_H never lags behind it.
    Runs in the caller's transaction when there is one.

    Parameters
    ----------
    coloring : dict
        Its row (`get_coloring`): ``id``, ``concept_key`` and ``practice`` are used.
    status : str
        One of `storage.schema.COLORING_STATUSES`.
    """
    if status not in COLORING_STATUSES:
        raise InvalidInput(f"`status` must be one of {COLORING_STATUSES}, got {shown(status)}")
    with transaction(db):
        update_rows(db, "colorings", {"id": coloring["id"]}, {"status": status})
        if not coloring["practice"]:
            ground_truth.refresh(db, coloring["concept_key"])


def get_coloring(db: sqlite_utils.Database, coloring_id: int) -> dict:
    """The ``colorings`` row of `coloring_id` with its distribution ``p`` (ndarray or None).

    Raises
    ------
    NotFound
        If there is no such coloring.
    """
    rows = list(
        db.query(
            "select c.*, d.p from colorings c left join coloring_distributions d "
            "on d.coloring_id = c.id where c.id = ?",
            [coloring_id],
        )
    )
    if not rows:
        raise NotFound(f"unknown coloring id {shown(coloring_id)}")
    return _with_p(rows[0])


def last_coloring(db: sqlite_utils.Database, annotator_id: int) -> dict | None:
    """The designer's latest stored coloring not withdrawn (``id, concept_key, created``), or
    None."""
    rows = list(
        db.query(
            "select id, concept_key, created from colorings where annotator_id = ? and status != 'withdrawn' "
            "order by id desc limit 1",
            [annotator_id],
        )
    )
    return rows[0] if rows else None


def concept_colorings(db: sqlite_utils.Database, concept_key: str) -> list[dict]:
    """Every main-task coloring of a concept, all rounds and statuses, by designer and round.

    Returns
    -------
    list of dict
        ``colorings`` rows plus ``p`` (ndarray (71,) or None) and ``pseudonym``.
    """
    rows = db.query(
        "select c.*, d.p, a.pseudonym from colorings c join annotators a on "
        "a.id = c.annotator_id left join coloring_distributions d on "
        "d.coloring_id = c.id where c.concept_key = ? and c.practice = 0 "
        "order by c.annotator_id, c.round, c.id",
        [concept_key],
    )
    return [_with_p(r) for r in rows]


def check_submission_rate(
    db: sqlite_utils.Database, annotator_id: int, per_minute: int, *, now: dt.datetime | None = None
) -> None:
    """Refuse a designer's submission beyond `per_minute` colorings in the minute before
    `now` (checked before anything is decoded or written).

    Raises
    ------
    Conflict
        If `annotator_id` stored `per_minute` colorings or more in that minute.
    """
    since = iso((utcnow() if now is None else now) - dt.timedelta(minutes=1))
    recent = db.execute(
        "select count(*) from colorings where annotator_id = ? and created > ?", [annotator_id, since]
    ).fetchone()[0]
    if recent >= per_minute:
        raise Conflict(
            f"you submitted {recent} colorings in the last minute, the most this "
            "study takes; wait a moment and submit again (your work stays on the "
            "canvas)"
        )


def owns_coloring_file(db: sqlite_utils.Database, annotator_id: int, relative: str) -> bool:
    """Whether `relative` (a path under the data folder, POSIX) is the image or mask of one
    of `annotator_id`'s colorings."""
    rows = db.execute(
        "select 1 from colorings where annotator_id = ? and (image_path = ? or mask_path = ?) limit 1",
        [annotator_id, relative, relative],
    ).fetchall()
    return bool(rows)


def withdrawn_files(db: sqlite_utils.Database, paths: Iterable[str]) -> set[str]:
    """Those of `paths` (under the data folder, POSIX) that are the image or mask of
    colorings that are all withdrawn (their designers asked): a file a standing coloring
    has too stays out of it."""
    wanted = set(paths)
    if not wanted:
        return set()
    marks = ",".join("?" * len(wanted))
    only_withdrawn: dict[str, bool] = {}
    for image, mask, status in db.execute(
        f"select image_path, mask_path, status from colorings where image_path in ({marks}) or mask_path in ({marks})",
        [*wanted, *wanted],
    ):
        for path in {image, mask} & wanted:
            only_withdrawn[path] = only_withdrawn.get(path, True) and status == "withdrawn"
    return {path for path, withdrawn in only_withdrawn.items() if withdrawn}


def recolor_note(db: sqlite_utils.Database, coloring_id: int) -> str:
    """The note of the latest recolor request on `coloring_id` ("" if none); it is user
    text: escape it before display."""
    rows = list(
        db["audit"].rows_where(
            "action = 'request_recolor' and object_type = 'coloring' and object_id = ?",
            [str(coloring_id)],
            order_by="id desc",
            limit=1,
        )
    )
    return rows[0]["why"] if rows else ""


def _expected_round(db, task: Task | None) -> int:
    if task is None or task.coloring_id is None:
        return 1
    return get_coloring(db, task.coloring_id)["round"] + 1


def _coloring_task(db, task_id: int, concept_key: str, practice: bool) -> Task:
    rows = list(db["tasks"].rows_where("id = ?", [task_id]))
    if not rows:
        raise NotFound(f"unknown task id {shown(task_id)}")
    task = Task.from_row(rows[0])
    if task.kind != "coloring" or task.concept_key != concept_key or task.practice != practice:
        raise InvalidInput(
            f"task {task_id} is a {task.kind} task for {task.concept_key!r} "
            f"(practice={task.practice}), not a coloring of {concept_key!r} "
            f"(practice={practice})"
        )
    return task


def _check_recolor(row: tuple, task: Task, annotator_id: int, now: dt.datetime | None) -> None:
    """Raise unless the recolor task (``annotator_id, status, expires`` of its row) is open
    for `annotator_id`."""
    holder, status, expires = row
    if holder != annotator_id:
        raise PermissionDenied(f"task {task.id} was handed to someone else")
    if status != "reserved" or expires <= iso(utcnow() if now is None else now):
        raise Conflict(
            f"task {task.id}, a new round of coloring {task.coloring_id}, is {status}"
            f"{' (expired)' if status == 'reserved' else ''}; nothing was stored"
        )


def _submit_recolor(db, task: Task, annotator_id: int, write, now: dt.datetime | None) -> int:
    """Store the next round for a recolor task (outside the quota: the designer is counted)."""
    now = utcnow() if now is None else now
    with transaction(db):
        if (ended := _round_ended(db, task)) is not None:  # since the check before the files were written
            raise ended
        row = db["tasks"].get(task.id)
        _check_recolor((row["annotator_id"], row["status"], row["expires"]), task, annotator_id, now)
        coloring_id = write(db, task)
        update_rows(
            db,
            "tasks",
            {"id": task.id},
            {"status": "submitted", "finished": iso(now), "result_id": coloring_id},
        )
        return coloring_id


def _round_ended(db, task: Task) -> TaskEnded | None:
    """Why the redo `task` can never be stored, if it cannot: the round it replaces was
    withdrawn from the data set (outside probe 168: the redo of a withdrawn coloring was
    stored as a standing next round), or the experts' blind vote opened on it (open, or
    decided since), which decides that round, so no next round may stand beside it (outside
    probe 125: it counted unreviewed while the panel voted on the round it replaced; outside
    probe 126: once the panel had excluded it, too)."""
    if db.execute("select status from colorings where id = ?", [task.coloring_id]).fetchone() == (WITHDRAWN,):
        return TaskEnded(
            f"the organisers withdrew coloring {task.coloring_id} from the data set while you redid it; "
            "this redo was not stored"
        )
    if db.execute("select 1 from reviews where coloring_id = ?", [task.coloring_id]).fetchone() is not None:
        return TaskEnded(
            f"coloring {task.coloring_id} went to the experts' blind vote after you asked to redo it: the vote "
            "decides it as you first colored it, and this redo was not stored"
        )
    return None


def _with_p(row: dict) -> dict:
    return {**row, "p": decode(row.get("p"))}


def _check_pixels(color_image, painted_mask) -> tuple[np.ndarray, np.ndarray]:
    image, mask = np.asarray(color_image), np.asarray(painted_mask)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise InvalidInput(
            f"`color_image` must be uint8 sRGB of shape (H, W, 3), got {image.dtype} {image.shape}"
        )
    if mask.dtype != bool or mask.shape != image.shape[:2]:
        raise InvalidInput(
            f"`painted_mask` must be bool of shape {image.shape[:2]}, got {mask.dtype} {mask.shape}"
        )
    if not mask.any():
        raise InvalidInput("`painted_mask` marks no painted pixel: nothing was colored")
    return image, mask


def _check_seconds(seconds_spent) -> None:
    if (
        isinstance(seconds_spent, bool)
        or not isinstance(seconds_spent, (int, float))
        or not math.isfinite(seconds_spent)
        or not 0 <= seconds_spent <= MAX_SECONDS_SPENT
    ):
        raise InvalidInput(
            f"`seconds_spent` must be from 0 to {MAX_SECONDS_SPENT:.0f} seconds "
            f"(7 days), got {shown(seconds_spent)}"
        )


def _check_distribution(p) -> np.ndarray:
    try:
        return check_distribution(p)
    except ValueError as error:
        raise InvalidInput(str(error)) from None
