import datetime as dt
import re
import threading
from collections import Counter

import numpy as np
import pytest

from annotation import assignment
from annotation.assignment import ALREADY_DONE, expire, open_tasks, release, reserve, reserve_practice, submit
from annotation.concepts import sync_concepts
from annotation.errors import (
    AlreadyDone,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ReservationExpired,
)
from annotation.people.accounts import create_annotators
from evaluation.concepts import load_concepts
from storage import ensure_schema, iso, open_db

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)


def _setup(db, n_bases=None, keys=None):
    concepts = load_concepts()
    if keys is not None:
        bases = {c.base for c in concepts if c.key in keys}
        concepts = [c for c in concepts if c.key in keys or (c.key in bases)]
    sync_concepts(db, concepts)
    for base in sorted({c.base for c in concepts})[:n_bases]:
        db["sketches"].insert(
            {
                "base": base,
                "path": f"sketches/{base}.png",
                "sha256": "0" * 64,
                "source": "test",
                "selected": 1,
                "created": iso(T0),
            }
        )


def _people(db, n, role):
    return [a["id"] for a, _ in create_annotators(db, n, role, now=T0)]


def _write_coloring(db, task):
    return (
        db["colorings"]
        .insert(
            {
                "annotator_id": task.annotator_id,
                "concept_key": task.concept_key,
                "image_path": "images/x.png",
                "image_sha256": "0" * 64,
                "practice": int(task.practice),
                "round": 1,
                "status": "submitted",
                "created": iso(T0),
            }
        )
        .last_pk
    )


def _write_vote(db, task):
    return (
        db["qc_votes"]
        .insert(
            {
                "coloring_id": task.coloring_id,
                "expert_id": task.annotator_id,
                "vote": "consistent",
                "created": iso(T0),
            }
        )
        .last_pk
    )


def _write_judgment(db, task):
    return (
        db["judgments"]
        .insert(
            {
                "pair_id": task.pair_id,
                "participant_id": task.annotator_id,
                "left_item": task.left_item,
                "choice": "left",
                "winner": task.left_item,
                "created": iso(T0),
            }
        )
        .last_pk
    )


def test_designer_never_gets_a_concept_twice_and_least_covered_come_first(db):
    _setup(db)
    designers = _people(db, 2, "designer")
    rng = np.random.default_rng(0)
    first = reserve(db, "coloring", designers[0], rng, 40, now=T0)
    assert len(first) == 40 and len({t.concept_key for t in first}) == 40
    for task in first[:30]:
        submit(db, task.id, designers[0], _write_coloring, now=T0)
    again = reserve(db, "coloring", designers[0], rng, 40, now=T0)
    assert [t.id for t in again[:10]] == [t.id for t in first[30:]]
    assert len(again) == 40 and len({t.concept_key for t in again}) == 40
    assert not {t.concept_key for t in again} & {t.concept_key for t in first[:30]}
    other = reserve(db, "coloring", designers[1], rng, 50, now=T0)
    held = {t.concept_key for t in again} | {t.concept_key for t in first[:30]}
    assert not {t.concept_key for t in other} & held


@pytest.mark.parametrize("kind", ["coloring", "review", "judgment"])
def test_the_pool_counts_each_targets_reservations_through_an_index_not_a_scan(db, kind):
    # The pool is read inside the write transaction of every submission (the next task is
    # reserved there); a scan of every reservation per target held the lock 30 ms at the
    # full study's size.
    plan = [
        row[3]
        for row in db.execute(
            "explain query plan " + assignment._pool_sql(kind), {"kind": kind, "a": 1, "k": 5}
        ).fetchall()
    ]
    column = assignment._TARGET[kind]
    assert any(f"USING INDEX idx_tasks_{column}_kind_status ({column}=?" in step for step in plan), plan
    assert not any("idx_tasks_kind_status_expires" in step for step in plan), plan


def test_ties_are_broken_by_the_generator_passed_in(tmp_path):
    picks = []
    for run, seed in enumerate([1, 1, 2]):
        database = open_db(tmp_path / f"{run}.sqlite")
        ensure_schema(database)
        _setup(database)
        (designer,) = _people(database, 1, "designer")
        picks.append(
            [
                t.concept_key
                for t in reserve(database, "coloring", designer, np.random.default_rng(seed), 40, now=T0)
            ]
        )
        database.close()
    assert picks[0] == picks[1] and picks[0] != picks[2]


def test_only_concepts_with_a_selected_sketch_are_handed_out(db):
    _setup(db, n_bases=2)
    (designer,) = _people(db, 1, "designer")
    tasks = reserve(db, "coloring", designer, np.random.default_rng(0), 50, now=T0)
    bases = {db["concepts"].get(t.concept_key)["base"] for t in tasks}
    assert len(bases) == 2
    expected = db["concepts"].count_where(f"base in ({', '.join('?' * 2)})", sorted(bases))
    assert len(tasks) == min(50, expected)


def _ten_concepts(tmp_path):
    """A database file with ten concepts (and their sketches): path, connection, keys."""
    path = tmp_path / "a.sqlite"
    db = open_db(path)
    ensure_schema(db)
    keys = [
        "apple",
        "rotten apple",
        "fresh apple",
        "banana",
        "cabin",
        "lonely cabin",
        "cozy cabin",
        "dog",
        "grassland",
        "coffee",
    ]
    _setup(db, keys=keys)
    return path, db, keys


def _run_at_once(jobs):
    barrier = threading.Barrier(len(jobs))

    def run(job):
        barrier.wait()
        job()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_twenty_designers_submitting_at_once_fill_every_quota_exactly(tmp_path):
    path, db, keys = _ten_concepts(tmp_path)
    designers = _people(db, 20, "designer")
    db.close()
    acknowledged, errors = [], []

    def job(designer):
        def go():
            conn = open_db(path)
            try:
                tasks = reserve(conn, "coloring", designer, np.random.default_rng(designer), 10, k=5, now=T0)
                for task in tasks:
                    acknowledged.append(submit(conn, task.id, designer, _write_coloring, k=5, now=T0))
            except Exception as error:  # noqa: BLE001 - asserted on below
                errors.append(error)
            finally:
                conn.close()

        return go

    _run_at_once([job(d) for d in designers])
    assert errors == []
    db = open_db(path)
    rows = list(db["colorings"].rows)
    assert sorted(r["id"] for r in rows) == sorted(acknowledged)
    assert Counter(r["concept_key"] for r in rows) == dict.fromkeys(keys, 5)
    assert len({(r["concept_key"], r["annotator_id"]) for r in rows}) == 50
    assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert db["tasks"].count_where("status = 'submitted'") == 50


def test_late_submits_racing_new_reservations_never_exceed_or_starve_a_quota(tmp_path):
    path, db, keys = _ten_concepts(tmp_path)
    late, fresh = _people(db, 10, "designer"), _people(db, 10, "designer")
    held = {d: reserve(db, "coloring", d, np.random.default_rng(d), 2, k=2, minutes=30, now=T0) for d in late}
    assert Counter(t.concept_key for ts in held.values() for t in ts) == dict.fromkeys(keys, 2)
    db.close()
    after = T0 + dt.timedelta(minutes=31)
    acknowledged, refused, errors = [], [], []

    def job(designer):
        def go():
            conn = open_db(path)
            try:
                tasks = held.get(designer) or reserve(
                    conn, "coloring", designer, np.random.default_rng(designer), 2, k=2, minutes=30, now=after
                )
                for task in tasks:
                    try:
                        acknowledged.append(submit(conn, task.id, designer, _write_coloring, k=2, now=after))
                    except ReservationExpired:
                        refused.append(task.id)
            except Exception as error:  # noqa: BLE001 - asserted on below
                errors.append(error)
            finally:
                conn.close()

        return go

    _run_at_once([job(d) for d in late + fresh])
    assert errors == []
    db = open_db(path)
    rows = list(db["colorings"].rows)
    assert sorted(r["id"] for r in rows) == sorted(acknowledged)
    assert Counter(r["concept_key"] for r in rows) == dict.fromkeys(keys, 2)
    assert len({(r["concept_key"], r["annotator_id"]) for r in rows}) == 20
    assert len(acknowledged) + len(refused) >= 20
    assert db.execute("pragma integrity_check").fetchone()[0] == "ok"


def test_expired_reservation_returns_to_the_pool_and_a_late_submit_is_refused(db):
    _setup(db, keys=["apple"])
    late, early = _people(db, 2, "designer")
    rng = np.random.default_rng(0)
    (task,) = reserve(db, "coloring", late, rng, 5, k=1, minutes=30, now=T0)
    assert reserve(db, "coloring", early, rng, 5, k=1, minutes=30, now=T0) == []
    after = T0 + dt.timedelta(minutes=31)
    assert open_tasks(db, "coloring", late, now=after) == []
    (taken,) = reserve(db, "coloring", early, rng, 5, k=1, minutes=30, now=after)
    assert db["tasks"].get(task.id)["status"] == "expired"
    with pytest.raises(ReservationExpired, match="ran out at 2025-03-01T09:30"):
        submit(db, task.id, late, _write_coloring, k=1, now=after)
    assert db["colorings"].count == 0
    submit(db, taken.id, early, _write_coloring, k=1, now=after)
    assert [r["annotator_id"] for r in db["colorings"].rows] == [early]


def test_late_submit_is_kept_when_the_slot_is_still_free(db):
    _setup(db, keys=["apple"])
    (designer,) = _people(db, 1, "designer")
    (task,) = reserve(db, "coloring", designer, np.random.default_rng(0), 5, k=1, minutes=30, now=T0)
    later = T0 + dt.timedelta(hours=5)
    assert expire(db, now=later) == 1
    coloring = submit(db, task.id, designer, _write_coloring, k=1, now=later)
    assert db["tasks"].get(task.id)["result_id"] == coloring


def test_submit_checks_holder_state_and_rolls_back_a_failing_write(db):
    _setup(db, keys=["apple", "banana"])
    owner, other = _people(db, 2, "designer")
    rng = np.random.default_rng(0)
    task, second = reserve(db, "coloring", owner, rng, 5, now=T0)
    with pytest.raises(PermissionDenied, match="someone else"):
        submit(db, task.id, other, _write_coloring, now=T0)
    with pytest.raises(NotFound, match="unknown task id 999"):
        submit(db, 999, owner, _write_coloring, now=T0)

    def broken(database, t):
        _write_coloring(database, t)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        submit(db, task.id, owner, broken, now=T0)
    assert db["colorings"].count == 0 and db["tasks"].get(task.id)["status"] == "reserved"
    submit(db, task.id, owner, _write_coloring, now=T0)
    with pytest.raises(Conflict, match="already submitted"):
        submit(db, task.id, owner, _write_coloring, now=T0)
    release(db, second.id, owner, now=T0)
    with pytest.raises(Conflict, match="already given back; nothing was stored"):
        submit(db, second.id, owner, _write_coloring, now=T0)
    assert db["colorings"].count == 1


def test_excluded_coloring_reopens_the_slot_for_another_designer(db):
    _setup(db, keys=["apple"])
    first, second = _people(db, 2, "designer")
    rng = np.random.default_rng(0)
    (task,) = reserve(db, "coloring", first, rng, 5, k=1, now=T0)
    coloring = submit(db, task.id, first, _write_coloring, k=1, now=T0)
    assert reserve(db, "coloring", second, rng, 5, k=1, now=T0) == []
    db["colorings"].update(coloring, {"status": "excluded"})
    assert reserve(db, "coloring", first, rng, 5, k=1, now=T0) == []
    assert [t.concept_key for t in reserve(db, "coloring", second, rng, 5, k=1, now=T0)] == ["apple"]


def test_review_gets_three_different_experts_never_the_coloring_designer(db):
    _setup(db, keys=["apple"])
    (designer,) = _people(db, 1, "designer")
    (task,) = reserve(db, "coloring", designer, np.random.default_rng(0), 1, now=T0)
    coloring = submit(db, task.id, designer, _write_coloring, now=T0)
    db["reviews"].insert({"coloring_id": coloring, "reason": "top 10% EMD", "created": iso(T0)})
    db["annotators"].update(designer, {"roles": '["designer", "expert"]'})
    assert reserve(db, "review", designer, np.random.default_rng(0), 5, now=T0) == []
    experts = _people(db, 5, "expert")
    voters = []
    for expert in experts:
        for t in reserve(db, "review", expert, np.random.default_rng(expert), 5, now=T0):
            submit(db, t.id, expert, _write_vote, now=T0)
            voters.append(expert)
        assert reserve(db, "review", expert, np.random.default_rng(0), 5, now=T0) == []
    assert voters == experts[:3]
    assert db["qc_votes"].count == 3


def test_pairs_get_six_participants_each_once_with_recorded_random_sides(db):
    _setup(db, keys=["apple", "banana"])
    study = db["studies"].insert({"name": "pilot", "votes_per_pair": 6, "created": iso(T0)}).last_pk
    pairs = [
        db["study_pairs"].insert({"study_id": study, "concept_key": key, "a": a, "b": b}).last_pk
        for key in ("apple", "banana")
        for a, b in [("sdxl", "sana"), ("sana", "omnigen")]
    ]
    participants = _people(db, 9, "participant")
    rng = np.random.default_rng(7)
    assert reserve(db, "judgment", participants[0], rng, 10, now=T0) == []
    db["studies"].update(study, {"frozen": iso(T0)})
    for person in participants:
        tasks = reserve(db, "judgment", person, rng, 10, now=T0)
        for t in tasks:
            submit(db, t.id, person, _write_judgment, now=T0)
        assert reserve(db, "judgment", person, rng, 10, now=T0) == []
    rows = list(db["judgments"].rows)
    assert Counter(r["pair_id"] for r in rows) == dict.fromkeys(pairs, 6)
    assert len({(r["pair_id"], r["participant_id"]) for r in rows}) == len(rows) == 24
    sides = Counter(r["left_item"] for r in rows)
    assert set(sides) == {"a", "b"}
    tasks = {r["result_id"]: r["left_item"] for r in db["tasks"].rows}
    assert all(tasks[r["id"]] == r["left_item"] for r in rows)


def test_practice_tasks_count_towards_no_quota(db):
    _setup(db, keys=["banana", "rotten apple", "cozy cabin"])
    (designer,) = _people(db, 1, "designer")
    keys = ("banana", "rotten apple", "cozy cabin")
    tasks = reserve_practice(db, designer, keys, now=T0)
    assert [t.concept_key for t in tasks] == list(keys) and all(t.practice for t in tasks)
    assert reserve_practice(db, designer, keys, now=T0) == tasks
    for t in tasks:
        submit(db, t.id, designer, _write_coloring, k=1, now=T0)
    assert reserve_practice(db, designer, keys, now=T0) == []
    pool = db["concepts"].count
    assert pool == 5
    assert len(reserve(db, "coloring", designer, np.random.default_rng(0), 9, k=1, now=T0)) == pool
    with pytest.raises(NotFound, match="unicorn"):
        reserve_practice(db, designer, ("unicorn",), now=T0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "painting"}, "`kind` must be one of"),
        ({"batch_size": 0}, "`batch_size` must be a whole number >= 1, got 0"),
        ({"k": 2.5}, "`k` must be a whole number >= 1, got 2.5"),
        ({"minutes": -1}, "`minutes` must be a positive number, got -1"),
    ],
)
def test_reserve_rejects_bad_arguments_and_writes_nothing(db, kwargs, message):
    _setup(db, keys=["apple"])
    (designer,) = _people(db, 1, "designer")
    args = {"kind": "coloring", "batch_size": 5, "k": 5, "minutes": 10} | kwargs
    with pytest.raises(InvalidInput, match=message):
        reserve(
            db, args.pop("kind"), designer, np.random.default_rng(0), args.pop("batch_size"), now=T0, **args
        )
    assert db["tasks"].count == 0


def test_only_active_people_with_the_role_get_work(db):
    _setup(db, keys=["apple"])
    (expert,) = _people(db, 1, "expert")
    with pytest.raises(PermissionDenied, match="E0001 is not an active designer"):
        reserve(db, "coloring", expert, np.random.default_rng(0), 5, now=T0)
    with pytest.raises(NotFound, match="unknown annotator id 77"):
        reserve(db, "coloring", 77, np.random.default_rng(0), 5, now=T0)
    assert db["tasks"].count == 0
    assert assignment.submitted_count(db, "coloring", expert) == 0


def test_a_stale_tab_whose_concept_was_colored_since_is_told_so_in_the_designers_words(db):
    """A second tab held an older task of the concept the first tab had just submitted: it
    read "task 40: you already submitted coloring 'sky'" (outside probe 92)."""
    _setup(db, keys=["apple"])
    (designer,) = _people(db, 1, "designer")
    rng = np.random.default_rng(0)
    (stale,) = reserve(db, "coloring", designer, rng, 5, k=5, minutes=30, now=T0)
    later = T0 + dt.timedelta(minutes=31)
    assert expire(db, now=later) == 1
    (fresh,) = reserve(db, "coloring", designer, rng, 5, k=5, minutes=30, now=later)
    assert fresh.id != stale.id and fresh.concept_key == stale.concept_key == "apple"
    submit(db, fresh.id, designer, _write_coloring, k=5, now=later)
    with pytest.raises(AlreadyDone, match=f"^{re.escape(ALREADY_DONE['coloring'])}$"):
        submit(db, stale.id, designer, _write_coloring, k=5, now=later)
    assert db["colorings"].count == 1


@pytest.mark.parametrize("seed", range(6))
def test_a_placement_is_a_maximum_flow_of_the_trials_onto_the_pairs_people_may_take(seed):
    """`placement`, built as arrays (its list of tuples took 1.8 s a hand-out at 50 people on
    26,838 pairs), against networkx's maximum flow on the same network."""
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(seed)
    capacity = {int(p): int(rng.integers(0, 4)) for p in rng.choice(1000, size=40, replace=False)}
    demands = [int(n) for n in rng.integers(-1, 12, size=7)]
    barred = {(int(rng.integers(0, 8)), int(rng.choice(list(capacity)))) for _ in range(60)}
    whole, placed, slack = assignment.placement(demands, capacity, barred)
    graph = nx.DiGraph()
    for i, n in enumerate(demands):
        if n > 0:
            graph.add_edge("source", i, capacity=n)
            for pair, free in capacity.items():
                if free > 0 and (i, pair) not in barred:
                    graph.add_edge(i, ("pair", pair), capacity=1)
    for pair, free in capacity.items():
        if free > 0:
            graph.add_edge(("pair", pair), "sink", capacity=free)
    best = nx.maximum_flow_value(graph, "source", "sink") if "source" in graph else 0
    assert sum(len(pairs) for pairs in placed) == best
    assert whole == (best == sum(demands))
    for i, pairs in enumerate(placed):
        assert len(pairs) <= max(0, demands[i]) and not {(i, p) for p in pairs} & barred
    for pair, free in capacity.items():
        taken = sum(pair in pairs for pairs in placed)
        assert taken <= free and (free <= 0 or slack[pair] == free - taken)
