"""A designer's work in the store: stored images, paint checks, batches, submits, redos."""

import base64
import datetime as dt
import json
import re
import shutil

import numpy as np
import pytest
from numpy.testing import assert_allclose

from annotation import overview
from annotation.assignment import open_tasks
from annotation.coloring import canvas
from annotation.coloring import tasks as work
from annotation.coloring.fill import blank_color_layer, canvas_value, composite, flood_fill
from annotation.coloring.store import get_coloring
from annotation.coloring.withdrawal import withdraw_colorings
from annotation.concepts import sync_concepts
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied, TaskEnded
from annotation.qc.review import open_reviews, request_recolor
from annotation.qc.votes import cast_vote, vote_queue
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png
from annotation.sketches.library import load_sketch, sync_shipped_sketches
from evaluation.color.colorspace import srgb_to_lab
from evaluation.color.extraction import image_distribution
from evaluation.color.palette import nearest_uw71
from tests.png_modes import WRONG_PNGS, rgba_png, wrong_png
from tests.qc_data import ADMIN, actor, people

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)
INSTANCE = "abc123"
RED, GREEN = (208, 48, 48), (80, 144, 48)
# Points inside regions of the shipped drawings: apple body and leaf, coffee drink and cup.
POINTS = {"apple": [(500, 600), (660, 200)], "coffee": [(510, 450), (500, 600)]}
APPLE = load_sketch_png(SKETCH_DIR / "apple.png")


@pytest.fixture
def store(db, tmp_path):
    """Concepts, and the shipped apple and coffee sketches only (a small pool)."""
    sync_concepts(db)
    library = tmp_path / "library"
    library.mkdir()
    for slug in POINTS:
        shutil.copy(SKETCH_DIR / f"{slug}.png", library / f"{slug}.png")
    (library / "manifest.csv").write_text(
        "slug,concept,category\napple,apple,fruit\ncoffee,coffee,food\n", encoding="utf-8"
    )
    data = tmp_path / "data"
    sync_shipped_sketches(db, data, manifest=library / "manifest.csv")
    return db, data


def _designer(db):
    (designer,) = people(db, 1, "designer")
    return designer


def _two_color_layer(sketch, base):
    layer = blank_color_layer(sketch.shape)
    for point, rgb in zip(POINTS[base], (RED, GREEN)):
        layer = flood_fill(layer, sketch, point, rgb)
    return layer


def _submit(db, data, designer, item, **options):
    sketch = load_sketch(data, item.sketch)
    key = work.canvas_key(INSTANCE, item.task.id, item.sketch["id"])
    value = canvas_value(key, _two_color_layer(sketch, item.concept["base"]), 30.0)
    submitted = work.submit_canvas(db, data, designer, value, instance=INSTANCE, main_open=True, **options)
    assert submitted.canvas_key == key  # the draft the app tells the browser to forget
    return submitted.coloring_id, submitted.task


def _two_submitted(db, data) -> tuple[int, int, int, int]:
    """A designer with a batch of two colorings submitted at `T0`, and an expert: their ids,
    then the two colorings'."""
    designer = _designer(db)
    (expert,) = people(db, 1, "expert")
    work.start_batch(db, designer, np.random.default_rng(0), 2, now=T0)
    first, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    second, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    return designer, expert, first, second


def _coloring_files(data):
    return sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file())


def _counts(db):
    return {t: db[t].count for t in ("colorings", "coloring_distributions", "tasks", "audit")}


def test_the_stored_image_holds_the_exact_paint_where_the_canvas_darkens_edges():
    layer = _two_color_layer(APPLE, "apple")
    image, mask = canvas.coloring_image(layer, APPLE)
    np.testing.assert_array_equal(image[mask], layer[mask][:, :3])
    np.testing.assert_array_equal(image[~mask], np.repeat(APPLE[~mask][:, None], 3, axis=1))
    shown = composite(layer, APPLE)
    assert (shown[mask] != image[mask]).any(axis=1).sum() > 500  # the anti-aliased fringe
    bins = nearest_uw71(srgb_to_lab(np.array([RED, GREEN]) / 255.0))
    p = image_distribution(image, mask).p
    assert set(np.flatnonzero(p)) == set(bins.tolist())
    leaked = image_distribution(shown, mask).p
    assert set(np.flatnonzero(leaked)) > set(bins.tolist())


def test_a_stored_coloring_reopens_as_the_same_layer():
    layer = _two_color_layer(APPLE, "apple")
    image, mask = canvas.coloring_image(layer, APPLE)
    reopened = work.layer_of_coloring(image, mask)
    np.testing.assert_array_equal(reopened[mask], layer[mask])
    assert not reopened[~mask].any()


def test_the_painted_area_check_says_what_is_missing():
    colorable = int((APPLE >= 128).sum())
    with pytest.raises(InvalidInput, match=r"Nothing is colored yet: fill at least 0\.5% "):
        canvas.check_painted_area(blank_color_layer(APPLE.shape), APPLE)
    few = blank_color_layer(APPLE.shape)
    few[600:610, 500:510] = (*RED, 255)
    with pytest.raises(
        InvalidInput,
        match=rf"Only 100 pixels .* at least 0\.5% "
        rf"\({int(np.ceil(0.005 * colorable)):,} pixels\)",
    ):
        canvas.check_painted_area(few, APPLE)
    canvas.check_painted_area(few, APPLE, 100 / colorable)
    with pytest.raises(InvalidInput, match="min_fraction"):
        canvas.check_painted_area(few, APPLE, 0.0)


def test_canvas_keys_name_their_study_task_and_sketch():
    key = work.canvas_key(INSTANCE, 12, 3)
    assert key == "abc123:12:3" and work.parse_canvas_key(key, INSTANCE) == (12, 3)
    for forged in ("other:12:3", "abc123:12", "abc123:x:3", "", "abc123:12:3:4"):
        with pytest.raises(InvalidInput, match="not a task of this study"):
            work.parse_canvas_key(forged, INSTANCE)


def test_a_batch_is_reserved_at_once_and_its_progress_counts_submits(store):
    db, data = store
    designer = _designer(db)
    assert work.batch_progress(db, designer) is None
    tasks = work.start_batch(db, designer, np.random.default_rng(0), 3, now=T0)
    assert len(tasks) == 3 and len({t.created for t in tasks}) == 1
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 0, 3)
    with pytest.raises(Conflict, match="current batch still has open tasks"):
        work.start_batch(db, designer, np.random.default_rng(0), 3, now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)
    assert item.task.id == tasks[0].id and item.kind == "batch"
    assert item.sketch["base"] == item.concept["base"] and item.sketch["selected"] == 1
    coloring_id, task = _submit(db, data, designer, item, now=T0)
    assert task.id == tasks[0].id
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 1, 3)
    row = get_coloring(db, coloring_id)
    assert (row["sketch_id"], row["seconds_spent"], row["round"]) == (item.sketch["id"], 30.0, 1)
    bins = nearest_uw71(srgb_to_lab(np.array([RED, GREEN]) / 255.0))
    assert set(np.flatnonzero(row["p"])) == set(bins.tolist())


def test_a_submit_is_refused_for_foreign_forged_or_closed_tasks_and_writes_nothing(store):
    db, data = store
    designer, other = people(db, 2, "designer")
    work.start_batch(db, designer, np.random.default_rng(0), 2)
    work.start_batch(db, other, np.random.default_rng(1), 2)
    mine = work.next_item(db, designer, practice=False)
    theirs = work.next_item(db, other, practice=False)
    layer = _two_color_layer(load_sketch(data, mine.sketch), mine.concept["base"])
    before = _counts(db)
    cases = [
        (
            work.canvas_key(INSTANCE, theirs.task.id, theirs.sketch["id"]),
            PermissionDenied,
            "handed to someone else",
        ),
        (work.canvas_key(INSTANCE, 9999, mine.sketch["id"]), NotFound, "unknown task id 9999"),
        (
            work.canvas_key("elsewhere", mine.task.id, mine.sketch["id"]),
            InvalidInput,
            "not a task of this study",
        ),
    ]
    other_base = db.execute("select id from sketches where base != ?", [mine.concept["base"]]).fetchone()[0]
    cases.append((work.canvas_key(INSTANCE, mine.task.id, other_base), InvalidInput, "is a sketch of"))
    for key, error, message in cases:
        with pytest.raises(error, match=message):
            work.submit_canvas(
                db, data, designer, canvas_value(key, layer), instance=INSTANCE, main_open=True
            )
    key = work.canvas_key(INSTANCE, mine.task.id, mine.sketch["id"])
    with pytest.raises(PermissionDenied, match="opens once your practice"):
        work.submit_canvas(db, data, designer, canvas_value(key, layer), instance=INSTANCE, main_open=False)
    with pytest.raises(InvalidInput, match="Nothing is colored yet"):
        work.submit_canvas(db, data, designer, canvas_value(key, None), instance=INSTANCE, main_open=True)
    assert _counts(db) == before


def test_a_finished_task_sent_again_is_refused_before_any_file_is_written(store):
    db, data = store
    designer = people(db, 1, "designer")[0]
    work.start_batch(db, designer, np.random.default_rng(0), 2)
    item = work.next_item(db, designer, practice=False)
    _submit(db, data, designer, item)
    files = sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file())
    before = _counts(db)
    sketch = load_sketch(data, item.sketch)
    for shade in range(3):  # a different image each time: each would be a new file
        layer = _two_color_layer(sketch, item.concept["base"])
        layer[..., 0] = np.where(layer[..., 3] > 0, 10 + shade, layer[..., 0])
        value = canvas_value(work.canvas_key(INSTANCE, item.task.id, item.sketch["id"]), layer)
        with pytest.raises(Conflict, match="already submitted"):
            work.submit_canvas(db, data, designer, value, instance=INSTANCE, main_open=True)
    assert sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file()) == files
    assert _counts(db) == before


def test_a_practice_coloring_is_not_redone_and_says_whether_the_practice_is_approved(store):
    db, _ = store
    designer = _designer(db)
    practice = {"id": 1, "annotator_id": designer, "practice": 1, "status": "submitted"}
    assert (
        work.redo_refusal(db, designer, practice, now=T0)
        == "practice colorings are reviewed by the study admin"
    )
    db.execute("update annotators set practice_approved = ? where id = ?", [T0.isoformat(), designer])
    assert work.redo_refusal(db, designer, practice, now=T0) == (
        "practice colorings are not redone, and your practice is approved"
    )


def test_a_redo_is_a_new_round_until_the_next_batch_starts(store):
    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 2, now=T0)
    first, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    assert work.redo_refusal(db, designer, get_coloring(db, first), now=T0) == ""
    redo_task = work.request_redo(db, designer, first, now=T0)
    with pytest.raises(Conflict, match="already waiting in your queue"):
        work.request_redo(db, designer, first, now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)
    assert (item.task.id, item.kind, item.note, item.previous["id"]) == (redo_task, "redo", "", first)
    assert item.sketch["id"] == get_coloring(db, first)["sketch_id"]
    second, _ = _submit(db, data, designer, item, now=T0)
    old, new = get_coloring(db, first), get_coloring(db, second)
    assert (old["round"], old["status"], new["round"], new["concept_key"]) == (
        1,
        "submitted",
        2,
        old["concept_key"],
    )
    assert work.redo_refusal(db, designer, old, now=T0) == "you already made round 2"
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 1, 2)
    _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    assert work.redo_refusal(db, designer, new, now=T0) == ""
    later = T0 + dt.timedelta(hours=1)
    work.start_batch(db, designer, np.random.default_rng(1), 2, now=later)
    assert work.redo_refusal(db, designer, new, now=later) == "its batch is closed"
    with pytest.raises(Conflict, match="cannot be redone: its batch is closed"):
        work.request_redo(db, designer, second, now=later)
    (other,) = people(db, 1, "designer")
    # Refused as an id nobody has: "someone else's" told which ids exist (outside probe 117).
    with pytest.raises(NotFound, match=rf"^you have no coloring with the id {second}$"):
        work.request_redo(db, other, second, now=T0)
    with pytest.raises(NotFound, match=r"^you have no coloring with the id 99999$"):
        work.request_redo(db, other, 99999, now=T0)


def test_a_coloring_under_the_blind_vote_is_not_redone_and_a_redo_asked_before_it_opened_is_not_stored(store):
    db, data = store
    designer, expert, first, second = _two_submitted(db, data)
    # A redo asked for, then the vote opens on that round before the designer submits it.
    redo_task = work.request_redo(db, designer, first, now=T0)
    open_reviews(db, actor(db, expert), [first, second], reason="high variance", now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)
    assert item.task.id == redo_task
    files = sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file())
    before = _counts(db)
    with pytest.raises(
        TaskEnded, match=rf"^coloring {first} went to the experts' blind vote after you asked"
    ) as ended:
        _submit(db, data, designer, item, now=T0)
    # The app drops that task's draft from the browser and shows the next task.
    assert ended.value.canvas_key == work.canvas_key(INSTANCE, redo_task, item.sketch["id"])
    # No round 2 counts beside the round under the vote; the redo task has ended.
    assert sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file()) == files
    assert {k: v for k, v in _counts(db).items() if k != "tasks"} == {
        k: v for k, v in before.items() if k != "tasks"
    }
    assert db["tasks"].get(redo_task)["status"] == "released"
    assert work.next_item(db, designer, practice=False, now=T0) is None
    # A round under the vote is not offered for a redo (it was, outside probe 125).
    refusal = "it is in the experts' blind vote: wait for its decision"
    assert [work.redo_refusal(db, designer, get_coloring(db, c), now=T0) for c in (first, second)] == [
        refusal
    ] * 2
    with pytest.raises(Conflict, match=f"cannot be redone: {refusal}"):
        work.request_redo(db, designer, second, now=T0)
    # Nor once the vote has decided: a redo asked before it opened was stored then (outside probe 126).
    later = T0 + dt.timedelta(minutes=1)
    work.start_batch(db, designer, np.random.default_rng(1), 1, now=later)
    third, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=later), now=later)
    redo_task = work.request_redo(db, designer, third, now=later)
    open_reviews(db, actor(db, expert), [third], reason="high variance", votes_needed=1, now=later)
    [vote] = [
        v
        for v in vote_queue(db, actor(db, expert), np.random.default_rng(0), now=later)
        if v.coloring_id == third
    ]
    cast_vote(db, actor(db, expert), vote.task_id, False, now=later)
    assert get_coloring(db, third)["status"] == "excluded"
    item = work.next_item(db, designer, practice=False, now=later)
    assert (item.task.id, item.kind) == (redo_task, "redo"), item
    with pytest.raises(Conflict, match=rf"^coloring {third} went to the experts' blind vote after you asked"):
        _submit(db, data, designer, work.next_item(db, designer, practice=False, now=later), now=later)
    assert db["tasks"].get(redo_task)["status"] == "released"


def test_a_withdrawal_ends_the_recolor_and_the_redo_a_designer_holds_and_stores_no_draft_of_them(store):
    """Outside probe 168: the recolor task of a withdrawn coloring stayed in the designer's
    queue as a plain redo, without the expert's note, and its submission stored a standing
    next round of the withdrawn coloring."""
    db, data = store
    designer, expert, first, second = _two_submitted(db, data)
    recolor = request_recolor(db, actor(db, expert), first, "browner please", now=T0)
    redo = work.request_redo(db, designer, second, now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)  # on screen when the admin withdraws
    assert (item.task.id, item.kind) == (recolor, "recolor")

    done = withdraw_colorings(db, designer, ADMIN, "asked by email", now=T0)

    assert (done.colorings, done.redos) == (2, 2)
    assert [db["tasks"].get(t)["status"] for t in (recolor, redo)] == ["released", "released"]
    assert work.next_item(db, designer, practice=False, now=T0) is None
    files = sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file())
    before = _counts(db)
    with pytest.raises(
        TaskEnded,
        match=rf"^the organisers withdrew coloring {first} from the data set while you redid it; this redo "
        "was not stored$",
    ) as ended:
        _submit(db, data, designer, item, now=T0)
    assert ended.value.canvas_key == work.canvas_key(INSTANCE, recolor, item.sketch["id"])
    assert sorted(p.relative_to(data) for p in (data / "colorings").rglob("*") if p.is_file()) == files
    assert _counts(db) == before
    [row] = db["audit"].rows_where("action = 'withdraw_colorings'")
    assert json.loads(row["details"])["ended_redos"] == 2


def test_a_withdrawal_gives_back_the_concept_on_the_designers_screen_and_its_submit_says_why(store):
    """Outside probe 221: a withdrawn designer pressed Submit on the concept already on their
    screen; it was stored and counted in P_H at once, and their page said nothing."""
    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 2, now=T0)
    first, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)  # on screen when the admin withdraws

    done = withdraw_colorings(db, designer, ADMIN, "asked in person", now=T0 + dt.timedelta(minutes=1))

    assert (done.colorings, done.held, done.ids) == (1, 1, (first,))
    assert db["tasks"].get(item.task.id)["status"] == "released"
    before = (_coloring_files(data), _counts(db))
    with pytest.raises(
        Conflict,
        match=r"^the study organisers withdrew your colorings from the data set \(as you asked\) while this "
        "concept was shown, so this one was not stored; reload the page to go on$",
    ):
        _submit(db, data, designer, item, now=T0 + dt.timedelta(minutes=2))
    assert (_coloring_files(data), _counts(db)) == before
    [row] = db["audit"].rows_where("action = 'withdraw_colorings'")
    assert json.loads(row["details"])["released_own_tasks"] == 1


def test_an_experts_recolor_request_comes_first_with_its_note(store):
    db, data = store
    designer = _designer(db)
    (expert,) = people(db, 1, "expert")
    work.start_batch(db, designer, np.random.default_rng(0), 3, now=T0)
    coloring_id, _ = _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    task_id = request_recolor(db, actor(db, expert), coloring_id, "<b>browner</b> please", now=T0)
    item = work.next_item(db, designer, practice=False, now=T0)
    assert (item.task.id, item.kind, item.note) == (task_id, "recolor", "<b>browner</b> please")
    assert work.redo_refusal(db, designer, get_coloring(db, coloring_id), now=T0) == (
        "an expert asked you to color it again: that task, with their note, is in your queue"
    )
    later = T0 + dt.timedelta(days=30)  # its task's time ran out
    assert work.redo_refusal(db, designer, get_coloring(db, coloring_id), now=later) == (
        "an expert asked for it again and that task's time ran out: ask the study organisers"
    )
    assert len(open_tasks(db, "coloring", designer, now=T0)) == 3
    recolored, _ = _submit(db, data, designer, item, now=T0)
    assert get_coloring(db, recolored)["round"] == 2
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 1, 3)
    # Done, it is said to be done, whenever asked (it read "that task's time ran out").
    for when in (T0, later):
        assert work.redo_refusal(db, designer, get_coloring(db, coloring_id), now=when) == (
            f"an expert asked you to color it again, and you did: coloring {recolored} (round 2) replaces it"
        )


def test_colored_example_fills_regions_as_the_canvas_shows_them():
    example = work.colored_example(APPLE, [((500, 600), RED)])
    layer = flood_fill(blank_color_layer(APPLE.shape), APPLE, (500, 600), RED)
    np.testing.assert_array_equal(example, composite(layer, APPLE))
    assert_allclose(example[600, 500], RED)


def test_a_batch_holds_only_a_few_reservations_and_tops_up_as_they_are_done(store):
    db, data = store
    designer = _designer(db)
    rng = np.random.default_rng(0)
    first = work.start_batch(db, designer, rng, 5, ahead=2, now=T0)
    assert len(first) == 2 and work.batch_progress(db, designer, now=T0) == work.Progress(1, 0, 5)
    assert work.top_up(db, designer, rng, ahead=2, now=T0) == 0
    done = []
    for n in range(1, 6):
        item = work.next_item(db, designer, practice=False, now=T0)
        done.append(_submit(db, data, designer, item, now=T0)[1].concept_key)
        reserved = work.top_up(db, designer, rng, ahead=2, now=T0)
        # One more while the batch has room; none once all five are done or reserved.
        assert reserved == (1 if n <= 3 else 0)
        assert work.batch_progress(db, designer, now=T0) == work.Progress(1, n, 5)
    assert len(set(done)) == 5 and work.next_item(db, designer, practice=False, now=T0) is None
    second = work.start_batch(db, designer, rng, 5, ahead=2, now=T0 + dt.timedelta(minutes=1))
    assert work.batch_progress(db, designer, now=T0) == work.Progress(2, 0, 5)
    assert not {t.concept_key for t in second} & set(done)


def test_a_submission_reads_its_concept_once_and_tops_up_its_batch_in_the_same_commit(store):
    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 5, now=T0)
    assert len(open_tasks(db, "coloring", designer, now=T0)) == work.RESERVE_AHEAD
    item = work.next_item(db, designer, practice=False, now=T0)
    before = _counts(db)
    with pytest.raises(TypeError, match="^`rng` is needed with `reservation_minutes`"):
        _submit(db, data, designer, item, reservation_minutes=120, now=T0)
    assert _counts(db) == before and not (data / "colorings").exists()
    statements = []
    db.conn.set_trace_callback(statements.append)
    try:
        _submit(db, data, designer, item, reservation_minutes=120, rng=np.random.default_rng(2), now=T0)
    finally:
        db.conn.set_trace_callback(None)
    assert sum(s.strip().upper() == "COMMIT" for s in statements) == 1
    # Under the write lock only the work itself: no schema look-ups, no query savepoints
    # (each statement is a wait for the GIL when other requests run; BENCHMARKS.md).
    begin = next(i for i, s in enumerate(statements) if s.startswith("BEGIN IMMEDIATE"))
    locked = statements[begin:]
    assert not [s for s in locked if "sqlite_master" in s or "PRAGMA" in s or "sqlite_utils_query" in s]
    # The concept and its sketch are read once on the way in (issue 12: each thing once).
    assert sum('from "concepts"' in s for s in statements) == 1
    assert sum('from "sketches"' in s for s in statements) == 1
    assert len(open_tasks(db, "coloring", designer, now=T0)) == work.RESERVE_AHEAD
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 1, 5)
    assert work.top_up(db, designer, np.random.default_rng(1), now=T0) == 0


def test_a_batch_whose_reservations_expired_is_refilled_when_the_designer_returns(store):
    db, data = store
    designer = _designer(db)
    rng = np.random.default_rng(0)
    work.start_batch(db, designer, rng, 6, ahead=3, minutes=30, now=T0)
    _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    later = T0 + dt.timedelta(hours=1)
    assert work.next_item(db, designer, practice=False, now=later) is None
    assert work.batch_progress(db, designer, now=later) == work.Progress(1, 1, 6)
    assert work.top_up(db, designer, rng, ahead=3, minutes=30, now=later) == 3
    assert len(open_tasks(db, "coloring", designer, now=later)) == 3
    with pytest.raises(InvalidInput, match="`ahead` must be a whole number >= 1, got 0"):
        work.top_up(db, designer, rng, ahead=0, now=later)


def test_sixty_designers_in_two_waves_all_get_work_while_free_slots_exist(db, tmp_path):
    """Issue 13: on the shipped sketches (1,095 slots at K = 5), 30 designers' batches of
    40 no longer hold every slot while the next 30 wait."""
    sync_concepts(db)
    sync_shipped_sketches(db, tmp_path / "data")
    slots = overview.coloring_slots(db, 5, now=T0)
    assert slots == {"total": 1095, "done": 0, "reserved": 0, "free": 1095}

    def wave(designers, ahead):
        return [
            len(work.start_batch(db, d, np.random.default_rng(d), 40, ahead=ahead, now=T0)) for d in designers
        ]

    # Reserving whole batches (the old rule) leaves the second wave with nothing to do.
    whole = people(db, 60, "designer")
    assert sum(wave(whole[:30], 40)) == 1095 and sum(wave(whole[30:], 40)) == 0
    db.execute("update tasks set status = 'released'")
    db.conn.commit()

    designers = people(db, 60, "designer")
    assert wave(designers[:30], work.RESERVE_AHEAD) == [work.RESERVE_AHEAD] * 30
    assert wave(designers[30:], work.RESERVE_AHEAD) == [work.RESERVE_AHEAD] * 30
    held = 60 * work.RESERVE_AHEAD
    assert overview.coloring_slots(db, 5, now=T0) == {
        "total": 1095,
        "done": 0,
        "reserved": held,
        "free": 1095 - held,
    }
    rows = db.execute(
        "select concept_key, count(*), count(distinct annotator_id) from tasks where status = 'reserved' "
        "group by concept_key"
    ).fetchall()
    assert all(n == distinct <= 5 for _, n, distinct in rows)


def _png_value(key, png):
    layer = "data:image/png;base64," + base64.b64encode(png).decode()
    return json.dumps({"task_id": key, "color_layer": layer, "elapsed_s": 5.0})


def _files(data):
    return sorted(p.relative_to(data) for p in data.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", sorted(WRONG_PNGS))
def test_a_canvas_png_of_another_kind_is_refused_by_name_before_anything_is_written(store, name):
    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 2)
    item = work.next_item(db, designer, practice=False)
    height, width = load_sketch(data, item.sketch).shape
    png, message = wrong_png(name, width, height)
    key = work.canvas_key(INSTANCE, item.task.id, item.sketch["id"])
    before = (list(db.conn.iterdump()), _files(data))
    with pytest.raises(InvalidInput) as raised:
        work.submit_canvas(db, data, designer, _png_value(key, png), instance=INSTANCE, main_open=True)
    assert re.fullmatch(message, str(raised.value)), str(raised.value)
    assert (list(db.conn.iterdump()), _files(data)) == before


def test_a_uniform_8_bit_rgba_canvas_png_is_still_stored(store):
    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 2)
    item = work.next_item(db, designer, practice=False)
    height, width = load_sketch(data, item.sketch).shape
    key = work.canvas_key(INSTANCE, item.task.id, item.sketch["id"])
    value = _png_value(key, rgba_png(width, height))
    submitted = work.submit_canvas(db, data, designer, value, instance=INSTANCE, main_open=True)
    bins = nearest_uw71(srgb_to_lab(np.array([RED]) / 255.0))
    assert np.flatnonzero(get_coloring(db, submitted.coloring_id)["p"]).tolist() == bins.tolist()


def test_a_designer_back_after_a_withdrawal_counts_and_fills_those_places_again(store):
    """Their batch said "3 of 40 done" for withdrawn colorings, which the Admin tab and the
    coverage no longer count (outsider 83): the places are open again, and filled."""
    from annotation.coloring.withdrawal import withdraw_colorings
    from tests.qc_data import ADMIN

    db, data = store
    designer = _designer(db)
    work.start_batch(db, designer, np.random.default_rng(0), 4, ahead=2, now=T0)
    for _ in range(2):
        _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    work.top_up(db, designer, np.random.default_rng(1), ahead=2, now=T0)
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 2, 4)
    withdraw_colorings(db, designer, ADMIN, "asked by email", now=T0)
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 0, 4)
    # The two held went back with the withdrawal (their page reloads to a top-up); the
    # batch's four places take two, then two more once those are done.
    assert work.next_item(db, designer, practice=False, now=T0) is None
    assert work.top_up(db, designer, np.random.default_rng(2), ahead=2, now=T0) == 2
    for _ in range(2):
        _submit(db, data, designer, work.next_item(db, designer, practice=False, now=T0), now=T0)
    assert work.top_up(db, designer, np.random.default_rng(3), ahead=2, now=T0) == 2
    assert work.batch_progress(db, designer, now=T0) == work.Progress(1, 2, 4)
