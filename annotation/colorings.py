"""Colorings in the store: writing one (with its UW-71 distribution) and reading them back.

A coloring is a designer's colored sketch of one concept (``colorings`` row) with the
painted-pixel mask and its distribution (``coloring_distributions`` row, computed by the
extraction pipeline on the painted pixels only). Both image files live under the data
folder with content-hash names (`annotation.files`).

Rounds (paper Appendix B.4, stage 1)
------------------------------------
When an expert asks for a recolor (`annotation.review.request_recolor`), the coloring's
status becomes ``recolor_requested`` and its designer gets a *recolor task*: a ``tasks``
row of kind ``coloring`` for the same concept whose ``coloring_id`` names the coloring to
redo. Submitting it (`store_coloring` with that ``task_id``) stores round ``r + 1``;
every round is kept. A designer counts once towards a concept's quota whatever the
number of rounds (`annotation.assignment` counts distinct designers).

The ground truth of a concept rests on each designer's latest round when that round
stands (`GROUND_TRUTH_STATUSES`); see `ground_truth_colorings` and `human_distribution`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.assignment import Task, submit
from annotation.concepts import get_concept
from annotation.db import iso, transaction, utcnow
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from annotation.files import StoredFile, decode_image, resolve, store_png
from evaluation import extraction
from evaluation.palette import N_BINS

# Statuses whose colorings make up the ground truth: a pending recolor does not (its next
# round will), an excluded one does not.
GROUND_TRUTH_STATUSES = ("submitted", "accepted")
DISTRIBUTION_METHOD = "extraction.image_distribution"


@dataclass(frozen=True)
class HumanDistribution:
    """The human distribution P_H(x|c) of one concept.

    Attributes
    ----------
    concept_key : str
    p : numpy.ndarray, shape (71,)
        Float64 in UW-71 ``color_index`` order, summing to 1; all zeros when ``n`` is 0.
    n : int
        Colorings it rests on.
    groups : object
        The visual groups the extraction pipeline formed (its ``groups``); None when
        ``n`` is 0.
    coloring_ids : tuple of int
        The colorings used, ascending.
    """

    concept_key: str
    p: np.ndarray
    n: int
    groups: object
    coloring_ids: tuple[int, ...]


def coloring_distribution(color_image: np.ndarray, painted_mask: np.ndarray) -> np.ndarray:
    """The UW-71 distribution of one coloring's painted pixels.

    Parameters
    ----------
    color_image : numpy.ndarray, shape (H, W, 3), uint8
        sRGB in [0, 255].
    painted_mask : numpy.ndarray, shape (H, W), bool
        True where the designer painted (line art excluded).

    Returns
    -------
    numpy.ndarray, shape (71,)
        Float64 summing to 1 (`evaluation.extraction.image_distribution`).
    """
    image, mask = _check_pixels(color_image, painted_mask)
    return np.asarray(extraction.image_distribution(image, mask).p, dtype=np.float64)


def store_coloring(db: sqlite_utils.Database, data_dir: str | Path, annotator_id: int,
                   concept_key: str, color_image: np.ndarray, painted_mask: np.ndarray, *,
                   practice: bool = False, round: int | None = None, seconds_spent: float,
                   task_id: int | None = None, sketch_id: int | None = None, k: int = 5,
                   now: dt.datetime | None = None) -> int:
    """Store a coloring: image and mask files, its distribution, and the rows, at once.

    Parameters
    ----------
    data_dir : str or Path
        The app's data folder; the image and mask go under ``colorings/``.
    annotator_id : int
        The designer.
    concept_key : str
        The concept colored; must match the task's.
    color_image : numpy.ndarray, shape (H, W, 3), uint8
        The colored sketch as shown (line art included), sRGB [0, 255].
    painted_mask : numpy.ndarray, shape (H, W), bool
        True on painted pixels; only these enter the distribution.
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

    Returns
    -------
    int
        The new coloring id.

    Raises
    ------
    InvalidInput
        Malformed pixels, nothing painted, a bad `seconds_spent` or `round`, or a task
        for another concept.
    NotFound, PermissionDenied, Conflict, ReservationExpired
        From the task checks (see `annotation.assignment.submit`).
    """
    image, mask = _check_pixels(color_image, painted_mask)
    _check_seconds(seconds_spent)
    get_concept(db, concept_key)
    task = None if task_id is None else _coloring_task(db, task_id, concept_key, bool(practice))
    p = coloring_distribution(image, mask)
    files = (store_png(data_dir, image, folder="colorings"),
             store_png(data_dir, mask, folder="colorings"))
    fields = {"annotator_id": annotator_id, "concept_key": concept_key,
              "practice": int(bool(practice)), "seconds_spent": float(seconds_spent),
              "sketch_id": sketch_id}

    def write(db_, task: Task | None) -> int:
        expected = _expected_round(db_, task)
        if round is not None and round != expected:
            raise InvalidInput(f"`round` must be {expected} for this coloring, got {round!r}")
        return record_coloring(db_, files[0], files[1], p, **fields, round=expected, now=now)

    if task is None:
        with transaction(db):
            return write(db, None)
    if task.coloring_id is None:
        return submit(db, task_id, annotator_id, write, k=k, now=now)
    return _submit_recolor(db, task, annotator_id, write, now)


def record_coloring(db: sqlite_utils.Database, image: StoredFile, mask: StoredFile | None,
                    p: np.ndarray, *, annotator_id: int, concept_key: str,
                    practice: bool = False, round: int = 1, seconds_spent: float | None = None,
                    sketch_id: int | None = None, method: str = DISTRIBUTION_METHOD,
                    now: dt.datetime | None = None) -> int:
    """Write a ``colorings`` row and its ``coloring_distributions`` row in one transaction.

    The lower half of `store_coloring`, for files already stored and a distribution
    already computed (for instance imported colorings).

    Parameters
    ----------
    image, mask : StoredFile
        The stored coloring image and painted-pixel mask (mask may be None).
    p : array_like, shape (71,)
        Non-negative, summing to 1 within 1e-6 (stored renormalised).
    method : str
        How `p` was computed.

    Returns
    -------
    int
        The coloring id.
    """
    p = _check_distribution(p)
    if isinstance(round, bool) or not isinstance(round, int) or round < 1:
        raise InvalidInput(f"`round` must be a whole number >= 1, got {round!r}")
    stamp = iso(now)
    with transaction(db):
        coloring_id = db["colorings"].insert({
            "annotator_id": annotator_id, "concept_key": concept_key, "sketch_id": sketch_id,
            "image_path": image.path, "image_sha256": image.sha256,
            "mask_path": None if mask is None else mask.path,
            "mask_sha256": None if mask is None else mask.sha256,
            "practice": int(bool(practice)), "round": round, "status": "submitted",
            "seconds_spent": seconds_spent, "created": stamp}).last_pk
        db["coloring_distributions"].insert({"coloring_id": coloring_id,
                                             "p": json.dumps(p.tolist()), "method": method,
                                             "created": stamp})
    return coloring_id


def get_coloring(db: sqlite_utils.Database, coloring_id: int) -> dict:
    """The ``colorings`` row of `coloring_id` with its distribution ``p`` (ndarray or None).

    Raises
    ------
    NotFound
        If there is no such coloring.
    """
    rows = list(db.query("select c.*, d.p from colorings c left join coloring_distributions d "
                         "on d.coloring_id = c.id where c.id = ?", [coloring_id]))
    if not rows:
        raise NotFound(f"unknown coloring id {coloring_id!r}")
    return _with_p(rows[0])


def concept_colorings(db: sqlite_utils.Database, concept_key: str) -> list[dict]:
    """Every main-task coloring of a concept, all rounds and statuses, by designer and round.

    Returns
    -------
    list of dict
        ``colorings`` rows plus ``p`` (ndarray (71,) or None) and ``pseudonym``.
    """
    rows = db.query("select c.*, d.p, a.pseudonym from colorings c join annotators a on "
                    "a.id = c.annotator_id left join coloring_distributions d on "
                    "d.coloring_id = c.id where c.concept_key = ? and c.practice = 0 "
                    "order by c.annotator_id, c.round, c.id", [concept_key])
    return [_with_p(r) for r in rows]


def ground_truth_colorings(db: sqlite_utils.Database,
                           concept_key: str | None = None) -> list[dict]:
    """The colorings the ground truth rests on: each designer's latest main-task round,
    when it stands (status in `GROUND_TRUTH_STATUSES`).

    Parameters
    ----------
    concept_key : str, optional
        One concept; default every concept.

    Returns
    -------
    list of dict
        ``colorings`` rows with ``p`` (ndarray (71,)), ordered by concept then id.
    """
    where, params = ("and c.concept_key = ?", [concept_key]) if concept_key else ("", [])
    marks = ", ".join("?" * len(GROUND_TRUTH_STATUSES))
    rows = db.query(
        "select c.*, d.p from colorings c join coloring_distributions d on d.coloring_id = "
        f"c.id where c.practice = 0 and c.status in ({marks}) {where} and c.round = (select "
        "max(l.round) from colorings l where l.practice = 0 and l.annotator_id = "
        "c.annotator_id and l.concept_key = c.concept_key) order by c.concept_key, c.id",
        [*GROUND_TRUTH_STATUSES, *params])
    return [_with_p(r) for r in rows]


def load_pixels(data_dir: str | Path, coloring: dict) -> tuple[np.ndarray, np.ndarray]:
    """A stored coloring's image, shape (H, W, 3) uint8 sRGB, and painted mask (H, W) bool.

    A coloring stored without a mask counts every non-white pixel as painted.
    """
    image = np.asarray(decode_image(resolve(data_dir, coloring["image_path"]),
                                    name=f"coloring {coloring['id']}").convert("RGB"))
    if coloring["mask_path"]:
        mask = np.asarray(decode_image(resolve(data_dir, coloring["mask_path"]),
                                       name=f"mask of coloring {coloring['id']}").convert("L"))
        return image, mask > 127
    return image, np.any(image < 250, axis=-1)


def human_distribution(db: sqlite_utils.Database, data_dir: str | Path,
                       concept_key: str) -> HumanDistribution:
    """P_H(x|c): the extraction pipeline over the concept's ground-truth colorings.

    Parameters
    ----------
    data_dir : str or Path
        Where the coloring images are stored.
    concept_key : str

    Returns
    -------
    HumanDistribution
        Recomputed from the current `ground_truth_colorings` (so exclusions and
        reinstatements take effect at once); ``n`` = 0 and ``p`` all zeros when the
        concept has none.

    Raises
    ------
    NotFound
        If the concept does not exist.
    """
    get_concept(db, concept_key)
    rows = ground_truth_colorings(db, concept_key)
    if not rows:
        return HumanDistribution(concept_key, np.zeros(N_BINS), 0, None, ())
    pixels = [load_pixels(data_dir, row) for row in rows]
    result = extraction.concept_distribution([i for i, _ in pixels], [m for _, m in pixels])
    return HumanDistribution(concept_key, np.asarray(result.p, dtype=np.float64), len(rows),
                             result.groups, tuple(r["id"] for r in rows))


def _expected_round(db, task: Task | None) -> int:
    if task is None or task.coloring_id is None:
        return 1
    return get_coloring(db, task.coloring_id)["round"] + 1


def _coloring_task(db, task_id: int, concept_key: str, practice: bool) -> Task:
    rows = list(db["tasks"].rows_where("id = ?", [task_id]))
    if not rows:
        raise NotFound(f"unknown task id {task_id!r}")
    task = Task.from_row(rows[0])
    if task.kind != "coloring" or task.concept_key != concept_key or task.practice != practice:
        raise InvalidInput(f"task {task_id} is a {task.kind} task for {task.concept_key!r} "
                           f"(practice={task.practice}), not a coloring of {concept_key!r} "
                           f"(practice={practice})")
    return task


def _submit_recolor(db, task: Task, annotator_id: int, write, now: dt.datetime | None) -> int:
    """Store the next round for a recolor task (outside the quota: the designer is counted)."""
    now = utcnow() if now is None else now
    with transaction(db):
        row = db["tasks"].get(task.id)
        if row["annotator_id"] != annotator_id:
            raise PermissionDenied(f"task {task.id} was handed to someone else")
        if row["status"] != "reserved" or row["expires"] <= iso(now):
            raise Conflict(f"recolor task {task.id} is {row['status']}"
                           f"{' (expired)' if row['status'] == 'reserved' else ''}; "
                           "nothing was stored")
        coloring_id = write(db, task)
        db["tasks"].update(task.id, {"status": "submitted", "finished": iso(now),
                                     "result_id": coloring_id})
        return coloring_id


def _with_p(row: dict) -> dict:
    return {**row, "p": None if row.get("p") is None else np.asarray(json.loads(row["p"]))}


def _check_pixels(color_image, painted_mask) -> tuple[np.ndarray, np.ndarray]:
    image, mask = np.asarray(color_image), np.asarray(painted_mask)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise InvalidInput("`color_image` must be uint8 sRGB of shape (H, W, 3), got "
                           f"{image.dtype} {image.shape}")
    if mask.dtype != bool or mask.shape != image.shape[:2]:
        raise InvalidInput(f"`painted_mask` must be bool of shape {image.shape[:2]}, got "
                           f"{mask.dtype} {mask.shape}")
    if not mask.any():
        raise InvalidInput("`painted_mask` marks no painted pixel: nothing was colored")
    return image, mask


def _check_seconds(seconds_spent) -> None:
    if isinstance(seconds_spent, bool) or not isinstance(seconds_spent, (int, float)) or \
            not math.isfinite(seconds_spent) or seconds_spent < 0:
        raise InvalidInput(f"`seconds_spent` must be a finite number >= 0, got {seconds_spent!r}")


def _check_distribution(p) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if arr.shape != (N_BINS,) or not np.all(np.isfinite(arr)) or arr.min() < 0 or \
            abs(arr.sum() - 1.0) > 1e-6:
        raise InvalidInput(f"`p` must be {N_BINS} non-negative values summing to 1, got shape "
                           f"{arr.shape} and sum {arr.sum() if arr.size else 0.0:.6g}")
    return arr / arr.sum()
