"""P_H stability per concept and the adaptive assignment mode, with an injected clock and generator."""

import datetime as dt
import json

import numpy as np
import pytest

from annotation import assignment
from annotation.coloring import stability
from annotation.coloring import tasks as work
from annotation.errors import InvalidInput, QuotaExceeded
from storage import iso
from tests.annotation.coloring.test_tasks import store  # noqa: F401
from tests.annotation.test_assignment import _setup
from tests.qc_data import add_coloring, people

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)
KEYS = ("dog", "cat", "cow")
RED, GREEN, BLUE, YELLOW = (200, 30, 30), (40, 150, 50), (30, 60, 200), (235, 210, 50)
ADAPTIVE = stability.Mode(adaptive=True, min_k=2, cap=4, threshold=1.0)


@pytest.fixture
def pool(db, tmp_path):
    """Three concepts with selected sketches; dog colored twice alike, cat twice apart."""
    _setup(db, keys=KEYS)
    designers = people(db, 8, "designer")
    for designer, cat in zip(designers[:2], (RED, BLUE)):
        add_coloring(db, tmp_path, designer, "dog", RED)
        add_coloring(db, tmp_path, designer, "cat", cat)
    return db, tmp_path, designers


def _keys(tasks):
    return sorted(t.concept_key for t in tasks)


def test_stability_is_zero_for_agreeing_colorings_and_large_for_disagreeing_ones(pool):
    db, data_dir, designers = pool
    found = {s.concept: s for s in stability.stabilities(db)}
    assert set(found) == {"dog", "cat"} and found["dog"].n_colorings == 2
    assert found["dog"].value == pytest.approx(0.0, abs=1e-9)
    assert found["cat"].value > 20.0  # half the replicates are all red or all blue
    cached = json.loads(db["settings"].get(stability.PREFIX + "cat")["value"])
    assert cached["ids"] == list(found["cat"].coloring_ids) and cached["n_resamples"] == stability.N_RESAMPLES
    assert stability.stabilities(db, ["cat"], compute=False)[0].value == found["cat"].value
    add_coloring(db, data_dir, designers[2], "cat", RED)  # a new coloring makes the cache stale
    assert stability.stabilities(db, ["cat"], compute=False) == []
    assert stability.stabilities(db, ["cat"])[0].n_colorings == 3
    table = stability.stability_table(db, ADAPTIVE)
    assert table.columns.tolist() == ["concept", "colorings", "stability", "status"]
    assert table["concept"].tolist() == ["cat", "dog"] and table["status"].tolist() == ["unstable", "stable"]
    hist = stability.stability_histogram(table, ADAPTIVE.threshold)
    assert sorted(hist.data[0].x) == sorted(table["stability"])


def test_the_fixed_protocol_is_the_default(pool):
    db, _, designers = pool
    assert stability.read_mode(db) == stability.Mode() and not stability.Mode().adaptive
    tasks = work.start_batch(db, designers[2], np.random.default_rng(0), 3, now=T0)
    assert _keys(tasks) == ["cat", "cow", "dog"]
    assert work.slot_quota(db, 5) == 5


def test_adaptive_fills_min_k_first_then_only_unstable_concepts_up_to_the_cap(pool):
    db, _, designers = pool
    stability.set_mode(db, ADAPTIVE, actor="admin", now=T0)
    assert db["audit"].count_where("action = 'set_assignment_mode'") == 1
    rng = np.random.default_rng(3)
    # cow has no coloring: it is filled to min_k first; then cat (unstable); never dog (stable)
    assert _keys(work.start_batch(db, designers[2], rng, 3, now=T0)) == ["cat", "cow"]
    assert _keys(work.start_batch(db, designers[3], rng, 3, now=T0)) == ["cat", "cow"]
    # cat now holds 2 colorings + 2 reservations = its cap of 4: nothing is left to hand out
    assert work.start_batch(db, designers[4], rng, 3, now=T0) == []
    # designers who colored both concepts get nothing whatever the fill
    assert work.start_batch(db, designers[0], rng, 3, now=T0) == []
    # an expired reservation returns its slot (injected clock)
    later = T0 + dt.timedelta(minutes=121)
    assert _keys(work.start_batch(db, designers[4], rng, 3, now=later)) == ["cat", "cow"]


def test_an_extra_designer_may_submit_past_min_k_but_not_past_the_cap(pool):
    db, _, designers = pool
    stability.set_mode(db, ADAPTIVE, actor="admin", now=T0)
    rng = np.random.default_rng(0)
    (task,) = [t for t in work.start_batch(db, designers[2], rng, 3, now=T0) if t.concept_key == "cat"]
    write = _coloring_writer(task)
    with pytest.raises(QuotaExceeded):
        assignment.submit(db, task.id, designers[2], write, k=ADAPTIVE.min_k, now=T0)
    assert db["colorings"].count == 4  # nothing was stored
    assert work.slot_quota(db, 5) == ADAPTIVE.cap
    assignment.submit(db, task.id, designers[2], write, k=work.slot_quota(db, 5), now=T0)
    assert db["colorings"].count == 5


def _coloring_writer(task):
    def write(db, task_):
        row = {
            "annotator_id": task_.annotator_id,
            "concept_key": task_.concept_key,
            "image_path": "colorings/x.png",
            "image_sha256": "0" * 64,
            "practice": 0,
            "round": 1,
            "status": "submitted",
            "created": iso(T0),
        }
        return db["colorings"].insert(row).last_pk

    return write


def test_a_mode_names_the_field_it_refuses():
    with pytest.raises(
        InvalidInput, match=r"`min_k` must be a whole number from 2 to 100 \(designers per concept\), got 1"
    ):
        stability.Mode(adaptive=True, min_k=1)
    with pytest.raises(InvalidInput, match=r"`cap` must be at least `min_k` \(5\), got 4"):
        stability.Mode(adaptive=True, min_k=5, cap=4)
    with pytest.raises(InvalidInput, match="`threshold` must be a number >= 0"):
        stability.Mode(threshold=float("nan"))
    assert "then up to 10 while" in stability.Mode(adaptive=True).describe()


def test_a_view_of_nothing_says_so_and_draws_no_chart(db):
    """It said "0 concepts ..." over empty axes, under a note asking to press the button."""
    view = stability.stability_view(db)
    assert view.table.empty and view.figure is None
    assert view.text.endswith("No concept has counted designer colorings yet: nothing to measure.")


def test_a_view_computes_a_bounded_number_and_says_how_many_are_left(pool):
    db, _, _ = pool
    first = stability.stability_view(db, max_compute=1)
    assert len(first.table) == 1 and "1 concept not computed yet: show again to continue." in first.text
    second = stability.stability_view(db, max_compute=1)
    assert second.table["concept"].tolist() == ["cat", "dog"] and "not computed yet" not in second.text


def test_a_designer_submits_an_extra_coloring_through_the_canvas_in_adaptive_mode(store):  # noqa: F811
    from annotation.coloring.store import get_coloring
    from tests.annotation.coloring.test_tasks import _submit

    db, data = store
    first, second, third = people(db, 3, "designer")
    add_coloring(db, data, first, "apple", RED)
    add_coloring(db, data, second, "apple", BLUE)
    stability.set_mode(
        db, stability.Mode(adaptive=True, min_k=2, cap=3, threshold=1.0), actor="admin", now=T0
    )
    rng = np.random.default_rng(0)
    tasks = work.start_batch(db, third, rng, 60, ahead=60, k=2, now=T0)  # the whole pool
    assert "apple" in _keys(tasks)  # past min K = 2 but unstable: an extra designer
    apple = next(t for t in tasks if t.concept_key == "apple")
    item = work.work_item(db, apple)
    coloring_id, task = _submit(db, data, third, item, k=2, now=T0)
    assert task.id == apple.id and get_coloring(db, coloring_id)["concept_key"] == "apple"
    # the cap is reached: nobody else is handed apple
    (fourth,) = people(db, 1, "designer")
    assert "apple" not in _keys(work.start_batch(db, fourth, rng, 60, ahead=60, k=2, now=T0))


def test_coverage_follows_the_mode_min_k_and_stable_or_the_cap(pool):
    from annotation import overview
    from app.admin import coverage_markdown

    db, data_dir, designers = pool
    fixed = overview.coverage(db, 2)
    assert (fixed["adaptive"], fixed["complete"], fixed["needing"]) == (False, 2, 1)
    assert fixed["states"] == {"below k": 1, "complete": 2}
    assert fixed["rule"] == "Fixed mode (the paper's protocol): a concept is complete with 2 colorings."
    assert fixed["slots"] == {"total": 6, "done": 4, "reserved": 0, "free": 2}

    stability.set_mode(db, ADAPTIVE, actor="admin", now=T0)
    # dog and cat have min K colorings but no stability yet: they still need designers
    unmeasured = overview.coverage(db, 2)
    assert (unmeasured["complete"], unmeasured["needing"]) == (0, 3)
    assert unmeasured["states"] == {
        "below min K": 1,
        "not measured yet": 2,
        "unstable": 0,
        "stable": 0,
        "at the cap": 0,
    }
    stability.stabilities(db)  # dog's colorings agree (stable), cat's do not (unstable)
    measured = overview.coverage(db, 2)
    assert (measured["complete"], measured["needing"]) == (1, 2)
    assert measured["states"]["stable"] == 1 and measured["states"]["unstable"] == 1
    # slots: cow 2 (min K), dog 2 (stable, done), cat up to its cap of 4
    assert measured["slots"] == {"total": 8, "done": 4, "reserved": 0, "free": 4}
    for designer in designers[2:4]:
        add_coloring(db, data_dir, designer, "cat", YELLOW)
    capped = overview.coverage(db, 2)
    assert (capped["complete"], capped["needing"]) == (2, 1)
    assert capped["states"]["at the cap"] == 1
    assert capped["histogram"] == {0: 1, 1: 0, 2: 1, 3: 0, 4: 1}

    text = coverage_markdown(db, 5)
    assert text.splitlines()[:3] == [
        "**2 of 3** concepts are complete; **1** need designers.",
        "- Adaptive mode: a concept is complete with at least 2 colorings and a P_H stability at or "
        "under 1 ΔE, or with 4 colorings (the cap).",
        "- Concepts by state: 1 below min K, 0 not measured yet, 0 unstable, 1 stable, 1 at the cap",
    ]
    assert (
        "(a coloring that stands or awaits its recolor; P_H counts the standing ones): 0: 1, 1: 0, 2: 1, 3: 0, 4+: 1"
        in text
    )
