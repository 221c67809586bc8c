"""A designer's colorization work: batches, the next task, submitting a canvas, redoing.

Words
-----
- A *batch* is ``batch_size`` main-task colorings a designer does in one go (`start_batch`;
  its size is a ``batches`` row, its tasks share their ``tasks.created`` stamp). Only
  `RESERVE_AHEAD` of its tasks are reserved at a time; `top_up` reserves the next ones
  as they are done, so a room of designers never holds the pool's slots merely reserved
  while others wait (issue 13). A new batch starts only when the designer asks for it
  after the last one has no open task left, so the current batch is the designer's
  latest one until then.
- A *round task* is a ``coloring`` task with ``coloring_id`` set: it redoes that coloring
  as the next round (`annotation.coloring.store`). Experts create them with a note
  (`annotation.qc.review.request_recolor`); designers create them with `request_redo`.
- *Assignment mode*: fixed `k` designers per concept (default, the paper's protocol) or
  adaptive (`annotation.coloring.stability`): ``min_k`` designers, then more for concepts
  whose P_H is still unstable, up to a cap; set by the admin, read at every reservation.
- *Redo window* (the paper is silent): a designer may redo their latest round of a concept
  of their current batch while it is still ``submitted`` (not yet reviewed), until they
  start the next batch. Every round is kept.

Submitting a canvas
-------------------
`submit_canvas` reads top to bottom: the canvas value and its key, the designer's task
and sketch, the CPU half (`annotation.coloring.canvas.prepare_canvas`, in the coloring
pool when there is one), then `annotation.coloring.store.store_prepared` (two files, one
transaction). The stored image is `annotation.coloring.canvas.coloring_image`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.assignment import Task, expire, open_tasks, reserve
from annotation.coloring import stability
from annotation.coloring.canvas import MIN_PAINTED_FRACTION, prepare_canvas
from annotation.coloring.fill import blank_color_layer, composite, flood_fill, read_canvas
from annotation.coloring.pool import ColoringPool
from annotation.coloring.store import get_coloring, recolor_note, store_prepared
from annotation.concepts import get_concept
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied, TaskEnded, shown
from annotation.files import resolve
from annotation.sketches.library import get_sketch, selected_sketch
from storage import audit, insert_row, iso, transaction, utcnow
from storage.shown import in_words

RESERVE_AHEAD = 3
"""Open tasks of a batch reserved at once: the one on the canvas and two ready after it.
With 30 designers that holds 90 slots, whatever the batch size (the paper is silent)."""


@dataclass(frozen=True)
class WorkItem:
    """The task a designer works on, with what the screen needs.

    Attributes
    ----------
    task : Task
    concept : dict
        Its ``concepts`` row (``key``, ``base``, ``category``, ``modifier_type``, ``modifier``).
    sketch : dict
        The ``sketches`` row to color.
    kind : {'practice', 'batch', 'recolor', 'redo'}
    note : str
        An expert's recolor note ('' otherwise); user text, escape it.
    previous : dict or None
        The coloring a round task redoes.
    """

    task: Task
    concept: dict
    sketch: dict
    kind: str
    note: str
    previous: dict | None


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` tasks of batch number ``batch`` (1-based) are submitted."""

    batch: int
    done: int
    total: int

    @property
    def open(self) -> int:
        return self.total - self.done


def canvas_key(instance: str, task_id: int, sketch_id: int) -> str:
    """The coloring canvas's task id for a task on a sketch: ``"<instance>:<task>:<sketch>"``.

    The browser keeps work in progress under this text, so it names the database
    (`instance`), the task and the sketch: none of them can be mixed up with another's.
    """
    return f"{instance}:{int(task_id)}:{int(sketch_id)}"


def parse_canvas_key(text: str, instance: str) -> tuple[int, int]:
    """``(task_id, sketch_id)`` of a `canvas_key`.

    Raises
    ------
    InvalidInput
        If `text` is not a canvas key of this `instance`.
    """
    parts = str(text).split(":")
    if len(parts) != 3 or parts[0] != instance or not all(p.isdigit() and len(p) <= 18 for p in parts[1:]):
        raise InvalidInput(
            f"the canvas names task {shown(str(text), 60)}, which is not a task of this study; reload the page"
        )
    return int(parts[1]), int(parts[2])


def next_item(
    db: sqlite_utils.Database, annotator_id: int, *, practice: bool, now: dt.datetime | None = None
) -> WorkItem | None:
    """The designer's next open task: practice tasks, or round tasks first then the batch.

    Returns None when nothing is open (see `start_batch` and
    `annotation.assignment.reserve_practice`).
    """
    tasks = open_tasks(db, "coloring", annotator_id, practice=practice, now=now)
    tasks.sort(key=lambda t: (t.coloring_id is None, t.id))
    return work_item(db, tasks[0]) if tasks else None


def work_item(db: sqlite_utils.Database, task: Task) -> WorkItem:
    """The `WorkItem` of a coloring task: its concept, sketch, kind and note."""
    concept = get_concept(db, task.concept_key)
    if task.coloring_id is None:
        kind = "practice" if task.practice else "batch"
        return WorkItem(task, concept, selected_sketch(db, concept["base"]), kind, "", None)
    previous = get_coloring(db, task.coloring_id)
    sketch = (
        get_sketch(db, previous["sketch_id"])
        if previous["sketch_id"] is not None
        else selected_sketch(db, concept["base"])
    )
    note = recolor_note(db, previous["id"]) if previous["status"] == "recolor_requested" else ""
    return WorkItem(task, concept, sketch, "recolor" if note else "redo", note, previous)


def batch_progress(
    db: sqlite_utils.Database, annotator_id: int, *, now: dt.datetime | None = None
) -> Progress | None:
    """Progress in the designer's current batch; None before their first batch.

    ``total`` is the batch's size (for a batch from before sizes were stored: its tasks
    submitted or still open).
    """
    stamps = _batch_stamps(db, annotator_id)
    if not stamps:
        return None
    done, held = _batch_counts(db, annotator_id, stamps[-1], now)
    size = _batch_size(db, annotator_id, stamps[-1])
    return Progress(len(stamps), done, done + held if size is None else size)


def start_batch(
    db: sqlite_utils.Database,
    annotator_id: int,
    rng: np.random.Generator,
    batch_size: int,
    *,
    ahead: int = RESERVE_AHEAD,
    k: int = 5,
    minutes: float = 120.0,
    now: dt.datetime | None = None,
) -> list[Task]:
    """Start a new batch of `batch_size` concepts for the designer, reserving the first
    `ahead` of them (`top_up` reserves the rest as they are done).

    Open round tasks do not take batch places. Returns the tasks reserved now (fewer, or
    none, when the pool runs dry; with none, no batch is started).

    Raises
    ------
    Conflict
        If the current batch still has open tasks.
    """
    _check_ahead(ahead)
    now = utcnow() if now is None else now
    with transaction(db):
        held = open_tasks(db, "coloring", annotator_id, now=now)
        if any(t.coloring_id is None for t in held):
            raise Conflict("your current batch still has open tasks; finish them first")
        rounds = sum(t.coloring_id is not None for t in held)
        wanted = min(ahead, batch_size)
        tasks = _reserve(db, annotator_id, rng, wanted + rounds, k=k, minutes=minutes, now=now)
        fresh = [t for t in tasks if t.coloring_id is None]
        if fresh:
            insert_row(
                db, "batches", {"annotator_id": annotator_id, "created": fresh[0].created, "size": batch_size}
            )
        return fresh


def top_up(
    db: sqlite_utils.Database,
    annotator_id: int,
    rng: np.random.Generator,
    *,
    ahead: int = RESERVE_AHEAD,
    k: int = 5,
    minutes: float = 120.0,
    now: dt.datetime | None = None,
) -> int:
    """Reserve tasks of the designer's current batch until `ahead` are open (or the batch
    is all done or reserved); how many were reserved.

    Cheap when nothing is needed: the counts are read first, and the write transaction
    (where they are read again) runs only when a task is missing. Also refills a batch
    whose reservations expired while the designer was away.
    """
    _check_ahead(ahead)
    now = utcnow() if now is None else now
    if _top_up_wanted(db, annotator_id, ahead, now) <= 0:
        return 0
    with transaction(db):
        wanted = _top_up_wanted(db, annotator_id, ahead, now)
        if wanted <= 0:
            return 0
        expire(db, now=now)
        stamp = _batch_stamps(db, annotator_id)[-1]
        held = len(open_tasks(db, "coloring", annotator_id, now=now))
        tasks = _reserve(db, annotator_id, rng, held + wanted, k=k, minutes=minutes, now=now, created=stamp)
        return len(tasks) - held


def _reserve(
    db, annotator_id: int, rng, total: int, *, k: int, minutes: float, now: dt.datetime, created=None
) -> list[Task]:
    """`annotation.assignment.reserve` of coloring tasks under the stored assignment mode:
    `k` designers per concept (fixed), or ``min_k`` then extra designers for unstable
    concepts (adaptive, `annotation.coloring.stability`). Runs in the caller's transaction."""
    mode = stability.read_mode(db)
    options = {"minutes": minutes, "now": now, "created": created}
    if not mode.adaptive:
        return reserve(db, "coloring", annotator_id, rng, total, k=k, **options)
    tasks = reserve(db, "coloring", annotator_id, rng, total, k=mode.min_k, **options)
    extra = stability.extra_targets(db, annotator_id, mode, rng, total - len(tasks))
    for concept in extra:
        insert_row(
            db,
            "tasks",
            {
                "kind": "coloring",
                "annotator_id": annotator_id,
                "concept_key": concept,
                "practice": 0,
                "status": "reserved",
                "created": iso(now) if created is None else created,
                "expires": iso(now + dt.timedelta(minutes=minutes)),
            },
        )
    return open_tasks(db, "coloring", annotator_id, now=now) if extra else tasks


def slot_quota(db: sqlite_utils.Database, k: int) -> int:
    """The designers a concept may have when a coloring is submitted: `k` (fixed mode), or
    the adaptive mode's ``cap`` (who may take a concept is decided when it is reserved)."""
    mode = stability.read_mode(db)
    return mode.cap if mode.adaptive else k


def _top_up_wanted(db, annotator_id: int, ahead: int, now: dt.datetime) -> int:
    stamps = _batch_stamps(db, annotator_id)
    if not stamps:
        return 0
    size = _batch_size(db, annotator_id, stamps[-1])
    if size is None:
        return 0
    done, held = _batch_counts(db, annotator_id, stamps[-1], now)
    return min(ahead - held, size - done - held)


def _batch_counts(db, annotator_id: int, stamp: str, now: dt.datetime | None) -> tuple[int, int]:
    """Tasks of the batch `stamp` submitted (their coloring not withdrawn: a designer back
    after a withdrawal fills those places again, as the Admin tab and the coverage count
    them), and reserved and not expired."""
    done, held = db.execute(
        "select sum(status = 'submitted' and not exists (select 1 from colorings c "
        "where c.id = tasks.result_id and c.status = 'withdrawn')), "
        "sum(status = 'reserved' and expires > ?) from tasks "
        f"where {_REGULAR} and created = ?",
        [iso(now), annotator_id, stamp],
    ).fetchone()
    return done or 0, held or 0


def _batch_size(db, annotator_id: int, stamp: str) -> int | None:
    row = db.execute(
        "select size from batches where annotator_id = ? and created = ?", [annotator_id, stamp]
    ).fetchone()
    return None if row is None else row[0]


def _check_ahead(ahead: int) -> None:
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 1:
        raise InvalidInput(f"`ahead` must be a whole number >= 1, got {shown(ahead)}")


def layer_of_coloring(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The color layer ``(H, W, 4)`` uint8 of a stored coloring, to reopen it in the canvas."""
    layer = blank_color_layer(mask.shape)
    layer[mask, :3] = image[mask]
    layer[mask, 3] = 255
    return layer


@dataclass(frozen=True)
class Submitted:
    """What `submit_canvas` stored: the coloring, the task it completed, the canvas key, and
    the share of the area around the drawing that is painted
    (`annotation.coloring.canvas.painted_background`)."""

    coloring_id: int
    task: Task
    canvas_key: str
    background: float = 0.0


def submit_canvas(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    annotator_id: int,
    canvas_text: str,
    *,
    instance: str,
    main_open: bool,
    min_painted_fraction: float = MIN_PAINTED_FRACTION,
    k: int = 5,
    pool: ColoringPool | None = None,
    reservation_minutes: float | None = None,
    rng: np.random.Generator | None = None,
    now: dt.datetime | None = None,
) -> Submitted:
    """Store the coloring the canvas sends for one of the designer's tasks.

    Parameters
    ----------
    canvas_text : str
        The canvas value (`annotation.coloring.fill.parse_canvas_value`) whose ``task_id`` is
        a `canvas_key` of `instance`.
    main_open : bool
        Whether the designer may submit main-task colorings (onboarding finished).
    min_painted_fraction : float
        See `check_painted_area`.
    k : int
        Colorings per concept (fixed mode; adaptive: the mode's cap, see `slot_quota`).
    pool : ColoringPool, optional
        Where the decoding, paint check, extraction and PNG encoding run
        (`prepare_canvas`); by default in this thread.
    reservation_minutes : float, optional
        When given, the designer's batch is topped up (`top_up`, reservations of this
        length) in the same transaction as the coloring: one commit instead of two.
    rng : numpy.random.Generator, optional
        The draw of that top-up's concepts (`top_up`); needed with `reservation_minutes`.

    Returns
    -------
    Submitted

    Raises
    ------
    InvalidInput
        A malformed value, a key of another study, a sketch of another concept, or too
        little paint; nothing is stored.
    NotFound, PermissionDenied, Conflict, ReservationExpired
        An unknown task, someone else's, one already submitted, one whose slot is gone,
        or a main task before onboarding is done.
    TaskEnded
        A redo whose round went to the experts' vote meanwhile: the task is released, and
        the error's ``canvas_key`` is its draft's.
    TypeError
        If `reservation_minutes` is given without `rng`.
    """
    if reservation_minutes is not None and rng is None:
        raise TypeError(
            "`rng` is needed with `reservation_minutes`: the top-up draws the concepts it reserves"
        )
    try:
        raw = read_canvas(canvas_text)
    except ValueError as error:
        raise InvalidInput(f"{error}; reload the page") from None
    task_id, sketch_id = parse_canvas_key(raw.task_id, instance)
    task = _own_task(db, task_id, annotator_id)
    if not task.practice and not main_open:
        raise PermissionDenied("the main task opens once your practice colorings are approved")
    item = work_item(db, task)
    sketch = item.sketch
    if sketch_id != sketch["id"]:
        sketch = get_sketch(db, sketch_id)
        if sketch["base"] != item.concept["base"]:
            raise InvalidInput(
                f"sketch {sketch_id} is a sketch of {sketch['base']!r}, not of "
                f"{item.concept['base']!r}; reload the page"
            )
    sketch_file = str(resolve(data_dir, sketch["path"]))
    if pool is None:
        prepared = prepare_canvas(raw, sketch_file, min_painted_fraction)
    else:
        prepared = pool.run(prepare_canvas, raw, sketch_file, min_painted_fraction)
    try:
        coloring_id = store_prepared(
            db,
            data_dir,
            annotator_id,
            task.concept_key,
            prepared,
            practice=task.practice,
            seconds_spent=raw.elapsed_s,
            task=task,
            sketch_id=sketch["id"],
            k=slot_quota(db, k),
            then=None
            if reservation_minutes is None
            else lambda db_: top_up(db_, annotator_id, rng, k=k, minutes=reservation_minutes, now=now),
            now=now,
        )
    except TaskEnded as ended:
        ended.canvas_key = raw.task_id  # the draft of a task that can never be stored
        raise
    return Submitted(coloring_id, task, raw.task_id, prepared.background)


def my_colorings(
    db: sqlite_utils.Database, annotator_id: int, *, now: dt.datetime | None = None
) -> list[dict]:
    """The designer's colorings, newest first, each with ``redo`` ('' if it may be redone,
    else why not) and ``note`` (an expert's recolor note, user text)."""
    rows = list(db["colorings"].rows_where("annotator_id = ?", [annotator_id], order_by="id desc"))
    return [
        {**row, "redo": redo_refusal(db, annotator_id, row, now=now), "note": recolor_note(db, row["id"])}
        for row in rows
    ]


def redo_refusal(
    db: sqlite_utils.Database, annotator_id: int, coloring: dict, *, now: dt.datetime | None = None
) -> str:
    """Why the designer may not redo `coloring` now ('' when they may); the redo window."""
    if coloring["annotator_id"] != annotator_id:
        return "it is someone else's coloring"
    if coloring["practice"]:
        # After "it is approved" (`--auto-approve-practice`, or the admin), "reviewed by the
        # study admin" read as a contradiction (outside probe 159).
        approved = db.execute(
            "select practice_approved from annotators where id = ?", [annotator_id]
        ).fetchone()
        if approved and approved[0]:
            return "practice colorings are not redone, and your practice is approved"
        return "practice colorings are reviewed by the study admin"
    if coloring["status"] == "recolor_requested":  # "it is recolor requested" puzzled (outside probe 117)
        done = db.execute(
            "select c.id, c.round from tasks t join colorings c on c.id = t.result_id where t.kind = 'coloring' "
            "and t.coloring_id = ? and t.status = 'submitted' order by t.id desc limit 1",
            [coloring["id"]],
        ).fetchone()
        if done:  # it said the request's time had run out (outside probe 155)
            return f"an expert asked you to color it again, and you did: coloring {done[0]} (round {done[1]}) replaces it"
        waiting = db["tasks"].count_where(
            "kind = 'coloring' and coloring_id = ? and status = 'reserved' and expires > ?",
            [coloring["id"], iso(now)],
        )
        return (
            "an expert asked you to color it again: that task, with their note, is in your queue"
            if waiting
            else "an expert asked for it again and that task's time ran out: ask the study organisers"
        )
    if coloring["status"] != "submitted":
        return f"it is {in_words(coloring['status'])}"
    if db.execute(
        "select 1 from reviews where coloring_id = ? and status = 'open'", [coloring["id"]]
    ).fetchone():
        # The vote decides this round: a next one would count unreviewed beside it (outside probe 125).
        return "it is in the experts' blind vote: wait for its decision"
    latest = db.execute(
        "select max(round) from colorings where annotator_id = ? and concept_key = ? and practice = 0",
        [annotator_id, coloring["concept_key"]],
    ).fetchone()[0]
    if coloring["round"] != latest:
        return f"you already made round {latest}"
    if db["tasks"].count_where(
        "kind = 'coloring' and coloring_id = ? and status = 'reserved' and expires > ?",
        [coloring["id"], iso(now)],
    ):
        return "its redo is already waiting in your queue"
    stamps = _batch_stamps(db, annotator_id)
    if not stamps or not db["tasks"].count_where(
        f"{_REGULAR} and created = ? and concept_key = ?", [annotator_id, stamps[-1], coloring["concept_key"]]
    ):
        return "its batch is closed"
    return ""


def request_redo(
    db: sqlite_utils.Database,
    annotator_id: int,
    coloring_id: int,
    *,
    minutes: float = 120.0,
    now: dt.datetime | None = None,
) -> int:
    """Queue a redo of the designer's own coloring as its next round; the new task's id.

    Raises
    ------
    NotFound
        If the designer has no such coloring (someone else's is refused alike).
    Conflict
        If it is outside the redo window (see the module docstring); the message says why.
    """
    if not isinstance(minutes, (int, float)) or not minutes > 0:
        raise InvalidInput(f"`minutes` must be a positive number, got {shown(minutes)}")
    now = utcnow() if now is None else now
    with transaction(db):
        # Someone else's coloring is refused as an id nobody has: "someone else's" against
        # "unknown" told a designer which ids exist (outside probe 117).
        mine = db["colorings"].count_where("id = ? and annotator_id = ?", [coloring_id, annotator_id])
        if not mine:
            raise NotFound(f"you have no coloring with the id {shown(coloring_id)}")
        coloring = get_coloring(db, coloring_id)
        why = redo_refusal(db, annotator_id, coloring, now=now)
        if why:
            raise Conflict(f"coloring {coloring_id} cannot be redone: {why}")
        task_id = insert_row(
            db,
            "tasks",
            {
                "kind": "coloring",
                "annotator_id": annotator_id,
                "concept_key": coloring["concept_key"],
                "coloring_id": coloring_id,
                "practice": 0,
                "status": "reserved",
                "created": iso(now),
                "expires": iso(now + dt.timedelta(minutes=minutes)),
            },
        )
        audit.record(
            db,
            f"annotator:{annotator_id}",
            "request_redo",
            "coloring",
            coloring_id,
            details={"task_id": task_id},
            now=now,
        )
    return task_id


def colored_example(
    sketch: np.ndarray, fills: Sequence[tuple[tuple[int, int], tuple[int, int, int]]]
) -> np.ndarray:
    """A sketch colored by bucket fills, as the canvas shows it (for reference examples).

    Parameters
    ----------
    sketch : ndarray, shape (H, W), uint8
    fills : sequence of ((x, y), (r, g, b))
        Fill points (pixel column, row) and sRGB colors [0, 255], applied in order.

    Returns
    -------
    ndarray, shape (H, W, 3), uint8
        `annotation.coloring.fill.composite` of the filled layer.
    """
    layer = blank_color_layer(sketch.shape)
    for point, rgb in fills:
        layer = flood_fill(layer, sketch, point, rgb)
    return composite(layer, sketch)


_REGULAR = "kind = 'coloring' and practice = 0 and coloring_id is null and annotator_id = ?"


def _batch_stamps(db, annotator_id: int) -> list[str]:
    """The ``created`` stamps of the designer's batches, oldest first."""
    return [
        r[0]
        for r in db.execute(
            f"select distinct created from tasks where {_REGULAR} order by created", [annotator_id]
        ).fetchall()
    ]


def _own_task(db, task_id: int, annotator_id: int) -> Task:
    try:
        task = Task.from_row(db["tasks"].get(task_id))
    except sqlite_utils.db.NotFoundError:
        raise NotFound(f"unknown task id {shown(task_id)}") from None
    if task.annotator_id != annotator_id:
        raise PermissionDenied(f"task {task_id} was handed to someone else")
    if task.kind != "coloring":
        raise InvalidInput(f"task {task_id} is a {task.kind} task, not a coloring")
    return task
