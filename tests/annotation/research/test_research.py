"""annotation.research.records, storage.human and annotation.research.views on a real database."""

import concurrent.futures
import contextlib
import functools
import logging
import os
import threading
import time

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose
from pandas.testing import assert_frame_equal

from annotation.concepts import sync_concepts
from annotation.errors import NotFound
from annotation.research import records as research
from annotation.research import views
from annotation.research.views import concept_view, leaderboard_analyses
from evaluation.analysis.bootstrap import Resampling
from evaluation.analysis.comparison import strip_of
from evaluation.analysis.reference import (
    UW71_RATINGS_CSV,
    UW71_RATINGS_SOURCE,
    ensure_shipped_reference,
    load_reference_csv,
)
from evaluation.analysis.results import analyses
from evaluation.color import metrics
from evaluation.color.extraction import concept_distribution
from evaluation.concepts import load_concepts
from evaluation.models.registry import load_registry
from evaluation.pipeline import runs, scoring
from evaluation.pipeline.planning import ConceptQuery, EvaluationRequest, plan_request
from storage import human as human_rows
from storage import open_db
from storage.schema import change_count
from tests.qc_data import add_coloring, painted, people
from tests.research_data import one_hot, store_segmented_run

CONCEPTS = load_concepts()
HUMAN = {"apple": one_hot(0, 0.5, 40), "rotten apple": one_hot(60, 0.7, 30), "overripe apple": one_hot(35)}


def _audit(db):
    return [(r["actor"], r["action"], r["object_id"]) for r in db["audit"].rows]


def _plan(tmp_path, seeds=2):
    request = EvaluationRequest(
        ("tiny-random",), ConceptQuery(keys=("apple", "banana")), ("natural",), (7.5,), seeds
    )
    return plan_request(request, load_registry(), CONCEPTS)


def test_creating_a_run_is_audited_and_a_taken_name_writes_nothing(db, tmp_path):
    items, config = _plan(tmp_path)
    assert research.create_evaluation_run(db, "R0001", "first", items, config) == 4
    assert _audit(db) == [("R0001", "start_evaluation", "first")]
    before = list(db.conn.iterdump())
    with pytest.raises(runs.RunError, match="run 'first' exists already; resume it"):
        research.create_evaluation_run(db, "R0002", "first", items, config)
    # "resume it" cannot make a concept run an explicit-color one (outside probe 182).
    with pytest.raises(runs.RunError) as clash:
        research.create_evaluation_run(db, "R0002", "first", items, {**config, "mode": "explicit"})
    assert str(clash.value) == (
        "run 'first' is a concept run, so it cannot hold an explicit-color run: choose another name"
    )
    with pytest.raises(ValueError, match="`run` name"):
        research.create_evaluation_run(db, "R0002", "a/b", items, config)
    assert list(db.conn.iterdump()) == before
    research.record_job_action(db, "R0001", "cancel_evaluation", "first")
    assert _audit(db)[-1] == ("R0001", "cancel_evaluation", "first")
    with pytest.raises(runs.RunError, match="no run named 'ghost'"):
        research.record_job_action(db, "R0001", "resume_evaluation", "ghost")
    with pytest.raises(ValueError, match="`action`"):
        research.record_job_action(db, "R0001", "delete", "first")


def test_progress_counts_each_stage_and_lists_runs_newest_first(db, tmp_path):
    items, config = _plan(tmp_path)
    research.create_evaluation_run(db, "R0001", "planned", items, config)
    planned = runs.run_progress(db, "planned")
    assert (planned.items, planned.generated, planned.segmented, planned.groups, planned.extracted) == (
        4,
        0,
        0,
        2,
        0,
    )
    assert planned.fraction == 0.0 and not planned.complete
    store_segmented_run(
        db,
        tmp_path / "data",
        "done",
        {
            ("m", "apple", "natural", 5.0): [(200, 0, 0), (0, 0, 200)],
            ("m", "banana", "clipart", 5.0): [(230, 220, 0)],
        },
    )
    done = runs.run_progress(db, "done")
    assert (done.items, done.generated, done.segmented, done.usable, done.groups, done.extracted) == (
        3,
        3,
        3,
        3,
        2,
        2,
    )
    assert done.complete and done.fraction == 1.0
    assert runs.run_progress(db, "ghost").items == 0
    listed = runs.list_runs(db)
    assert [(r["name"], r["items"], r["models"]) for r in sorted(listed, key=lambda r: r["name"])] == [
        ("done", 3, ["m"]),
        ("planned", 4, ["tiny-random"]),
    ]
    assert runs.measured_seconds(db) == {"m": pytest.approx(0.75)}
    items = runs.concept_items(db, "apple")
    assert [(i["run"], i["sample"]) for i in items] == [("done", 0), ("done", 1)]
    assert runs.concept_items(db, "banana", style="natural") == []
    rows = runs.model_distributions(db, concepts=["banana"])
    assert [(r["concept"], r["style"], r["n_images"]) for r in rows] == [("banana", "clipart", 1)]
    assert rows[0]["p"].shape == (71,) and rows[0]["groups"][0]["image_indices"] == [0]


def test_reference_sources_are_labelled_and_the_shipped_set_is_stored_once(db, tmp_path):
    assert human_rows.sources(db) == [human_rows.DESIGNERS]
    assert ensure_shipped_reference(db) and not ensure_shipped_reference(db)
    assert "Schloss" in human_rows.describe(db, UW71_RATINGS_SOURCE)
    shipped = human_rows.read(db, UW71_RATINGS_SOURCE, ["apple"])["apple"]
    assert shipped.label == "reference set 'uw71-ratings'" and shipped.n_colorings is None
    assert_allclose(shipped.p, load_reference_csv()["apple"], rtol=1e-15)
    human_rows.store_reference(db, "lab-2025", HUMAN, "our lab's ratings, 2025")
    assert human_rows.sources(db) == [human_rows.DESIGNERS, "lab-2025", UW71_RATINGS_SOURCE]
    assert (
        human_rows.describe(db, "lab-2025") == "Reference set 'lab-2025', imported: our lab's ratings, 2025"
    )
    # Peaked rows are not called flat; the shipped ratings, divided by their sums, are
    # (scipy's entropy of the shipped file's rows, independent of the stored ones).
    rows = np.genfromtxt(UW71_RATINGS_CSV, delimiter=",", skip_header=1, usecols=range(1, 72))
    rows = rows / rows.sum(axis=1, keepdims=True)
    assert human_rows.flatness_note(db, "lab-2025") == ""
    assert (
        f"Its distributions are nearly flat (over its {len(rows)} concepts, mean entropy "
        f"{scipy.stats.entropy(rows, axis=1).mean():.2f} of at most {np.log(71):.2f} nats; the top color holds "
        f"{rows.max(axis=1).mean():.1%} of the mass" in human_rows.describe(db, UW71_RATINGS_SOURCE)
    )
    found = human_rows.read(db, "lab-2025", ["banana", "rotten apple", "apple"])
    assert list(found) == ["rotten apple", "apple"]
    assert {h.label for h in found.values()} == {"reference set 'lab-2025'"}
    with pytest.raises(ValueError, match=r"`source` must be one of \[.*'lab-2025'.*\], got 'mturk'"):
        human_rows.vectors(db, "mturk", ["apple"])


def test_designer_colorings_are_a_source_labelled_with_their_count(db, tmp_path):
    sync_concepts(db)
    assert human_rows.sources(db)[0] == human_rows.DESIGNERS
    assert human_rows.COUNTING_RULE in human_rows.describe(db, human_rows.DESIGNERS)
    data_dir = tmp_path / "data"
    assert human_rows.read(db, human_rows.DESIGNERS, ["apple"]) == {}
    red, green = people(db, 2, "designer")
    images = [painted(rgb) for rgb in ((200, 30, 30), (40, 150, 50))]
    for designer, rgb in zip((red, green), ((200, 30, 30), (40, 150, 50))):
        add_coloring(db, data_dir, designer, "apple", rgb)
    found = human_rows.read(db, human_rows.DESIGNERS, ["apple"])["apple"]
    assert found.label == "designer colorings (n = 2)" and found.n_colorings == 2
    assert_allclose(
        found.p, concept_distribution([i for i, _ in images], [m for _, m in images]).p, rtol=1e-12
    )
    colors, counts = strip_of(found.groups)
    assert counts == (1, 1) and colors.shape == (2, 3)


def test_concept_view_puts_the_labelled_human_distribution_beside_each_model(db, tmp_path):
    data_dir = tmp_path / "data"
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {
        ("m-red", c, "natural", cfg): [(200, 30, 30), (180, 40, 30)]
        for c in ("apple", "rotten apple")
        for cfg in (2.0, 5.0, 7.5)
    }
    cells[("m-blue", "apple", "natural", 5.0)] = [(30, 30, 200)]
    store_segmented_run(db, data_dir, "view", cells)
    view = concept_view(db, data_dir, CONCEPTS, "apple", "lab", "natural")
    assert view.human_label == "Human ground truth: reference set 'lab'"
    stored = {(r["model"], r["concept"], r["cfg"]): r["p"] for r in runs.model_distributions(db, run="view")}
    traces = view.distributions.data
    assert_allclose(traces[0].y, HUMAN["apple"])
    assert_allclose(traces[1].y, stored[("m-blue", "apple", 5.0)])
    assert_allclose(traces[2].y, stored[("m-red", "apple", 5.0)])
    # The reference set has no samples: its row holds only an empty trace (for its note).
    assert [t.text for t in view.strips.data] == [None, ("1",), ("2",)]
    assert [caption for _, caption in view.overlays] == [
        "m-blue · natural · cfg 5 · seed 1000",
        "m-red · natural · cfg 5 · seed 1000",
        "m-red · natural · cfg 5 · seed 1001",
    ]
    assert view.metrics["model"].tolist() == ["m-blue", "m-red"]
    shifts = view.shifts.set_index("concept")
    assert list(shifts.index) == ["overripe apple", "rotten apple"]
    assert shifts.loc["rotten apple", "m-red · natural"] == pytest.approx(
        metrics.shift(stored[("m-red", "apple", 5.0)], stored[("m-red", "rotten apple", 5.0)])
    )
    assert shifts.loc["rotten apple", "human"] == pytest.approx(
        metrics.shift(HUMAN["apple"], HUMAN["rotten apple"])
    )
    missing = concept_view(db, data_dir, CONCEPTS, "banana", "lab", "natural")
    assert missing.human_label == (
        "The source 'lab' has no human distribution for 'banana': choose another Human ground truth "
        "('designers' once it is colored)."
    )
    assert missing.distributions is None and missing.metrics.empty
    assert missing.metrics_note == (
        "No metrics: no model has a natural distribution of 'banana' at guidance scale 'recommended' "
        "yet: run a model on it on the Evaluate tab (or import a run), or pick another style or scale; "
        "and there is no human distribution to compare with (see the line at the top)."
    )
    assert view.metrics_note == ""
    with pytest.raises(ValueError, match="`style` must be one of"):
        concept_view(db, data_dir, CONCEPTS, "apple", "lab", "oil")
    with pytest.raises(NotFound, match="unknown concept 'unicorn'; expected a key such as"):
        concept_view(db, data_dir, CONCEPTS, "unicorn", "lab", "natural")
    board = leaderboard_analyses(db, CONCEPTS, "lab")
    direct = analyses(runs.model_distributions(db), HUMAN, CONCEPTS)
    assert board.table1.values.equals(direct.table1.values) and board.cfg == {"m-blue": 5.0, "m-red": 5.0}


def test_stored_scores_equal_fresh_scores_and_follow_every_change_of_either_side(db, tmp_path):
    data_dir = tmp_path / "data"
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {
        ("m-red", c, "natural", cfg): [(200, 30, 30), (180, 40, 30)]
        for c in ("apple", "rotten apple")
        for cfg in (2.0, 5.0)
    }
    store_segmented_run(db, data_dir, "scored", cells)
    stored = scoring.stored_scores(db, "lab", CONCEPTS)
    fresh = scoring.score(runs.model_distributions(db), HUMAN, CONCEPTS)
    key = ["model", "concept", "style", "cfg"]
    assert_frame_equal(
        stored.drop(columns="created_at").sort_values(key, ignore_index=True),
        fresh.sort_values(key, ignore_index=True),
        check_dtype=False,
    )
    assert db["scores"].count == 4
    # A new human distribution for one concept: only its rows are rescored.
    changed = dict(HUMAN, apple=one_hot(3))
    human_rows.store_reference(db, "lab", {"apple": changed["apple"]}, "test ratings", update=True)
    assert len(runs.unscored_distributions(db, "lab")) == 2
    again = scoring.stored_scores(db, "lab", CONCEPTS)
    refreshed = scoring.score(runs.model_distributions(db), changed, CONCEPTS)
    assert_frame_equal(
        again.drop(columns="created_at").sort_values(key, ignore_index=True),
        refreshed.sort_values(key, ignore_index=True),
        check_dtype=False,
    )
    # A re-extracted model distribution (a newer row) is rescored too.
    runs.store_model_distribution(db, "scored", "m-red", "apple", "natural", 5.0, one_hot(3), 2, 0)
    assert [(r["concept"], r["cfg"]) for r in runs.unscored_distributions(db, "lab")] == [("apple", 5.0)]
    row = scoring.stored_scores(db, "lab", CONCEPTS).set_index(key).loc[("m-red", "apple", "natural", 5.0)]
    assert (row["emd"], row["dominant_model"], row["dominant_human"]) == (0.0, 3, 3)
    assert runs.unscored_distributions(db, "lab") == [] and db["scores"].count == 4


def test_leaderboards_are_kept_until_a_distribution_changes_and_each_caller_gets_a_copy(db, tmp_path):
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "rotten apple")}
    store_segmented_run(db, tmp_path / "data", "kept", cells)
    before = change_count(db)
    first = leaderboard_analyses(db, CONCEPTS, "lab", resampling=None)
    assert change_count(db) == before  # scoring on the first view changes no distribution
    first.table1.values.iloc[:, :] = -1.0  # a caller's edit stays with that caller
    again = leaderboard_analyses(db, CONCEPTS, "lab", resampling=None)
    assert_frame_equal(
        again.table1.values, leaderboard_analyses(db, CONCEPTS, "lab", resampling=None).table1.values
    )
    assert (again.table1.values.to_numpy() != -1.0).any()
    emd = again.table1.values.xs("emd", axis=1, level=-1).iloc[0, 0]
    # Every kind of change to a distribution is counted by the triggers, and the next view
    # is computed afresh: a new model row, a changed human row, a deleted row.
    runs.store_model_distribution(db, "kept", "m-red", "apple", "natural", 5.0, HUMAN["apple"], 1, 0)
    assert change_count(db) == before + 1
    closer = leaderboard_analyses(db, CONCEPTS, "lab", resampling=None)
    assert closer.table1.values.xs("emd", axis=1, level=-1).iloc[0, 0] < emd
    human_rows.store_reference(db, "lab", {"apple": one_hot(60)}, "test ratings", update=True)
    db.execute("delete from model_distributions where concept = 'rotten apple'")
    assert change_count(db) >= before + 3


def _emd(result):
    return result.table1.values.xs("emd", axis=1, level=-1).iloc[0, 0]


def test_kept_leaderboards_are_refreshed_after_a_change_and_computed_once_for_callers_at_once(
    db, tmp_path, monkeypatch
):
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "rotten apple")}
    store_segmented_run(db, tmp_path / "data", "fresh", cells)
    computed = []
    real = views._leaderboard_analyses
    monkeypatch.setattr(views, "_leaderboard_analyses", lambda *a, **k: computed.append(1) or real(*a, **k))
    # Nothing asked for yet: nothing is kept, nothing refreshed.
    assert views.kept_leaderboards(views.db_path(db)) == 0
    assert views.refresh_leaderboards(db, CONCEPTS) == 0
    before = _emd(leaderboard_analyses(db, CONCEPTS, "lab", resampling=None))
    assert views.kept_leaderboards(views.db_path(db)) == 1 and len(computed) == 1
    assert views.refresh_leaderboards(db, CONCEPTS) == 0  # still current
    runs.store_model_distribution(db, "fresh", "m-red", "apple", "natural", 5.0, HUMAN["apple"], 1, 0)
    assert views.refresh_leaderboards(db, CONCEPTS) == 1 and len(computed) == 2
    # The view after the refresh is served as kept, and shows the change.
    after = leaderboard_analyses(db, CONCEPTS, "lab", resampling=None)
    assert len(computed) == 2 and _emd(after) < before
    # Four callers at once after a change: one computes, the others wait for its result.
    runs.store_model_distribution(db, "fresh", "m-red", "rotten apple", "natural", 5.0, HUMAN["apple"], 1, 0)
    path = views.db_path(db)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:

        def view(_):
            own = open_db(path)
            try:
                return _emd(leaderboard_analyses(own, CONCEPTS, "lab", resampling=None))
            finally:
                own.close()

        emds = list(pool.map(view, range(4)))
    assert len(computed) == 3 and len(set(emds)) == 1
    # A scale typed three ways is one result, computed once (each was computed anew, 4 to 5 s
    # at the full study's size: outside probe 212).
    for typed in ("5", " 5.0 ", 5.0):
        leaderboard_analyses(db, CONCEPTS, "lab", cfg=typed, resampling=None)
    assert len(computed) == 4 and views.kept_leaderboards(path) == 2


def _same(a, b) -> bool:
    """The two `Analyses` hold equal frames, field by field."""
    for name in (
        "metrics",
        "sweep",
        "shifts",
        "sensitivity",
        "table6_ci",
        "table7_ci",
        "table8_ci",
        "ranking",
    ):
        assert_frame_equal(getattr(a, name), getattr(b, name), check_dtype=False)
    for name in ("table1", "table2"):
        assert_frame_equal(getattr(a, name).values, getattr(b, name).values)
    return (a.cfg, a.pooled, a.resampling) == (b.cfg, b.pooled, b.resampling)


def test_a_first_look_shows_point_estimates_at_once_and_the_intervals_follow_without_recomputing(
    db, tmp_path, monkeypatch
):
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "rotten apple")}
    cells |= {("m-blue", c, "natural", 5.0): [(30, 30, 200)] for c in ("apple", "rotten apple")}
    store_segmented_run(db, tmp_path / "data", "look", cells)
    resampling = Resampling(n_resamples=40, seed=3, colorings=0)
    # The reference: the full result and the point estimates, from caches of their own.
    whole = views.LeaderboardCache().analyses(db, CONCEPTS, "lab", resampling=resampling)
    plain = views.LeaderboardCache().analyses(db, CONCEPTS, "lab", resampling=None)
    assert whole.resampling == resampling and not whole.table6_ci.empty
    cache, computed = views.LeaderboardCache(), []
    real = views._leaderboard_analyses
    monkeypatch.setattr(views, "_leaderboard_analyses", lambda *a, **k: computed.append(1) or real(*a, **k))
    points, state = cache.first_look(db, CONCEPTS, "lab", resampling=resampling)
    assert state == "points" and _same(points, plain) and points.table6_ci.empty
    assert cache.kept(views.db_path(db)) == 0  # point estimates are not a kept result
    # The full view of the same options draws only the intervals, and equals the reference.
    full = cache.analyses(db, CONCEPTS, "lab", resampling=resampling)
    assert computed == [] and _same(full, whole)
    assert cache.first_look(db, CONCEPTS, "lab", resampling=resampling)[1] == "current"
    # After a change the kept result is shown as it was, marked earlier, until recomputed.
    runs.store_model_distribution(db, "look", "m-red", "apple", "natural", 5.0, HUMAN["apple"], 1, 0)
    earlier, state = cache.first_look(db, CONCEPTS, "lab", resampling=resampling)
    assert state == "earlier" and _same(earlier, whole)
    fresh = cache.analyses(db, CONCEPTS, "lab", resampling=resampling)
    emds = [r.table1.values.xs("emd", axis=1, level=-1).to_numpy().sum() for r in (fresh, whole)]
    assert len(computed) == 1 and emds[0] < emds[1]  # m-red's apple now matches people's exactly
    assert cache.first_look(db, CONCEPTS, "lab", resampling=resampling)[1] == "current"
    # Without intervals asked for, the first look is the result itself.
    assert cache.first_look(db, CONCEPTS, "lab", resampling=None)[1] == "current"


def test_the_background_refresher_brings_a_kept_leaderboard_up_to_date_once_changes_settle(
    db, tmp_path, caplog
):
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "rotten apple")}
    store_segmented_run(db, tmp_path / "data", "quiet", cells)
    path = views.db_path(db)
    leaderboard_analyses(db, CONCEPTS, "lab", resampling=None)
    stop = threading.Event()
    thread = views.keep_leaderboards_fresh(
        path, _connector(path), CONCEPTS, period_s=0.05, quiet_s=0.2, stop=stop
    )
    try:
        runs.store_model_distribution(db, "quiet", "m-red", "apple", "natural", 5.0, HUMAN["apple"], 1, 0)
        count = change_count(db)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with views._LEADERBOARDS_LOCK:
                kept = [c for o, (c, _) in views._LEADERBOARDS.items() if o[0] == path]
            if kept == [count]:
                break
            time.sleep(0.05)
        assert kept == [count]
        # The file moved away and back (outside probe 89's operator): the thread waits, then goes on.
        with caplog.at_level(logging.WARNING, logger=views.__name__):
            os.replace(path, f"{path}.away")
            _wait_for(lambda: any("is not there" in r.getMessage() for r in caplog.records))
            runs.store_model_distribution(
                db, "quiet", "m-red", "rotten apple", "natural", 5.0, HUMAN["apple"], 1, 0
            )
            os.replace(f"{path}.away", path)
        assert thread.is_alive()
        count = change_count(db)
        _wait_for(lambda: _kept_counts(path) == [count])
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_the_leaderboard_the_tab_opens_on_is_kept_before_anyone_asks_and_left_alone_until_read(db, tmp_path):
    """The first open after a start was computed cold: 2.6 s at the full study's size."""
    human_rows.store_reference(db, "lab", HUMAN, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "rotten apple")}
    store_segmented_run(db, tmp_path / "data", "quiet", cells)
    path, cache, stop = views.db_path(db), views.LeaderboardCache(), threading.Event()
    first = functools.partial(views.warm_first_leaderboard, concepts=CONCEPTS, cache=cache)
    thread = views.keep_leaderboards_fresh(
        path, _connector(path), CONCEPTS, period_s=0.05, quiet_s=0.2, stop=stop, cache=cache, first=first
    )
    try:
        _wait_for(lambda: cache.kept(path) == 1)
    finally:
        stop.set()
        thread.join(10)
    # No designer colored these: the tab falls back to the reference set, and so did the warm-up.
    assert views.pick_source(db, human_rows.DESIGNERS, views.evaluated_concepts(db)).source == "lab"
    assert views.warm_first_leaderboard(db, CONCEPTS, cache) is False  # kept already
    # Nobody has read it: a change does not have it recomputed in the background.
    runs.store_model_distribution(db, "quiet", "m-red", "apple", "natural", 5.0, HUMAN["apple"], 1, 0)
    assert cache.refresh(db, CONCEPTS) == 0
    assert cache.first_look(db, CONCEPTS, "lab")[1] == "earlier"
    # Read once, it is brought up to date like any table someone opened.
    assert cache.refresh(db, CONCEPTS) == 1
    kept, state = cache.first_look(db, CONCEPTS, "lab")
    assert state == "current"
    anew = views.LeaderboardCache().analyses(db, CONCEPTS, "lab")
    assert_frame_equal(kept.table1.values, anew.table1.values)


def _connector(path: str):
    """A `keep_leaderboards_fresh` ``connect``: a connection of its own to `path`."""

    @contextlib.contextmanager
    def connect():
        own = open_db(path)
        try:
            yield own
        finally:
            own.close()

    return connect


def _kept_counts(path: str) -> list[int]:
    with views._LEADERBOARDS_LOCK:
        return [c for o, (c, _) in views._LEADERBOARDS.items() if o[0] == path]


def _wait_for(condition, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition was not met"
        time.sleep(0.05)


def test_views_fall_back_from_empty_designers_to_the_reference_set_that_covers_the_concepts(db, tmp_path):
    """README step 5: a model evaluated on concepts no designer has colored yet."""
    data_dir = tmp_path / "data"
    sync_concepts(db)
    ensure_shipped_reference(db)
    human_rows.store_reference(db, "lab", {"apple": HUMAN["apple"]}, "test ratings")
    cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in ("apple", "banana")}
    store_segmented_run(db, data_dir, "first", cells)
    assert views.evaluated_concepts(db) == ["apple", "banana"]
    choice = views.pick_source(db, human_rows.DESIGNERS, ["apple", "banana"])
    assert choice == views.SourceChoice(
        UW71_RATINGS_SOURCE,
        "No designer coloring of 'apple', 'banana' counts yet, so the reference set 'uw71-ratings' is "
        "the human ground truth here instead (it has both). Choose 'designers' again once designers "
        "have colored them.",
    )
    # A set of equal cover is not chosen over the shipped one, which `score` compares with by
    # default (outside probe 110: 'a-lab' came first by label, and tab and CLI differed).
    a_lab = {
        "apple": HUMAN["apple"],
        "banana": HUMAN["overripe apple"],
        "rotten apple": HUMAN["rotten apple"],
    }
    human_rows.store_reference(db, "a-lab", a_lab, "test ratings")
    assert views.pick_source(db, human_rows.DESIGNERS, ["apple", "banana"]) == choice
    # A set that covers more of the concepts is ('uw71-ratings' has no modifier concept).
    assert views.pick_source(db, human_rows.DESIGNERS, ["apple", "banana", "rotten apple"]).source == "a-lab"
    # A reference set chosen is kept, and so is the designers' source once it covers a concept.
    assert views.pick_source(db, "lab", ["banana"]) == views.SourceChoice("lab")
    assert views.pick_source(db, human_rows.DESIGNERS, ["unicorn"]) == views.SourceChoice(
        human_rows.DESIGNERS
    )
    view = concept_view(db, data_dir, CONCEPTS, "banana", human_rows.DESIGNERS, "natural")
    assert view.source == UW71_RATINGS_SOURCE
    assert view.human_label.startswith("No designer coloring of 'banana' counts yet, so the reference set")
    assert view.human_label.endswith("Human ground truth: reference set 'uw71-ratings'")
    assert view.metrics["model"].tolist() == ["m-red"] and view.metrics_note == ""
    assert "m-red" in leaderboard_analyses(db, CONCEPTS, choice.source).table1.to_html()
    assert views.lacking_note(db, human_rows.DESIGNERS, ["apple", "banana"]) == ""  # none: the view says so
    (red,) = people(db, 1, "designer")
    add_coloring(db, data_dir, red, "apple", (200, 30, 30))
    assert views.pick_source(db, human_rows.DESIGNERS, ["apple", "banana"]) == views.SourceChoice(
        human_rows.DESIGNERS
    )
    # The leaderboards then score apple alone, and say which evaluated concept they leave out.
    assert views.lacking_note(db, human_rows.DESIGNERS, ["apple", "banana"]) == (
        "'designers' has 1 of the 2 evaluated concepts: 'banana' is left out of every table below "
        "(no human distribution to compare with)."
    )
    assert views.lacking_note(db, UW71_RATINGS_SOURCE, ["apple", "banana"]) == ""
    # ... and that apple's P_H rests on one coloring, not the paper's five designers.
    assert views.thin_note(db, human_rows.DESIGNERS, ["apple", "banana"]) == (
        "1 of the 1 concepts scored rests on fewer than 5 designer colorings (the paper's study has 5 "
        "per concept): 'apple' (1); their P_H changes as colorings come in."
    )
    for d in people(db, 4, "designer"):
        add_coloring(db, data_dir, d, "apple", (190, 40, 30))
    assert views.thin_note(db, human_rows.DESIGNERS, ["apple", "banana"]) == ""  # five now
    assert views.thin_note(db, UW71_RATINGS_SOURCE, ["apple", "banana"]) == ""


def test_an_empty_leaderboard_says_which_source_covers_the_evaluated_concepts(db, tmp_path):
    ensure_shipped_reference(db)
    with pytest.raises(views.NothingScored, match="^There is no stored model distribution yet: run a model"):
        leaderboard_analyses(db, CONCEPTS, human_rows.DESIGNERS)
    # A run whose every image the masking excluded: said so, not "no distribution yet" (probe 148)
    store_segmented_run(db, tmp_path / "data", "blind", {("m", "apple", "natural", 5.0): [None]})
    with pytest.raises(views.NothingScored) as nothing:
        leaderboard_analyses(db, CONCEPTS, human_rows.DESIGNERS)
    assert str(nothing.value) == (
        "Nothing to score: every image of the stored runs was excluded by the masking (1 without a detection, "
        "0 with an empty mask), so no model distribution has a color to score: segment again with a lower box "
        "threshold, or another segmenter (Evaluate tab, *Box threshold*)."
    )
    store_segmented_run(db, tmp_path / "data", "first", {("m", "banana", "natural", 5.0): [(230, 220, 0)]})
    human_rows.store_reference(db, "lab", {"apple": HUMAN["apple"]}, "test ratings")
    with pytest.raises(views.NothingScored) as nothing:
        leaderboard_analyses(db, CONCEPTS, "lab")
    assert str(nothing.value) == (
        "None of the evaluated concepts ('banana') has a human distribution in 'lab' yet: choose "
        "'uw71-ratings' (1 of them) as Human ground truth."
    )
