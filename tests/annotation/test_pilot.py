"""The pilot study (issue 26): designers overlap on a few concepts, so expert review opens
after a handful of colorings, and the numbers say what each stage still waits for."""

import re

import numpy as np
import pytest

from annotation import assignment, pilot
from annotation.assignment import reserve
from annotation.errors import InvalidInput, NotFound
from annotation.qc import review, votes
from annotation.qc.readiness import readiness
from storage import ensure_schema, open_db
from tests.annotation.test_assignment import T0, _setup
from tests.qc_data import ADMIN, actor, add_coloring, people

PILOT = ["apple", "forbidding castle", "rotten apple"]
# One color per designer: the castle's and apples' colorings differ, so one concept is the
# most disputed and goes to the vote.
COLORS = [(200, 20, 30), (60, 60, 70), (255, 105, 180)]


def color_as_assigned(db, data_dir, designer, rgb, n=2, seed=0, now=T0):
    """The designer reserves `n` concepts (`reserve`, as the Coloring tab does) and colors
    each with `rgb`; the keys colored. Also used by the browser tests."""
    tasks = reserve(db, "coloring", designer, np.random.default_rng(seed), n, now=now)
    for task in tasks:
        add_coloring(db, data_dir, designer, task.concept_key, rgb, task_id=task.id, now=now)
    return [t.concept_key for t in tasks]


def _counts(db):
    return dict(
        db.execute(
            "select concept_key, count(distinct annotator_id) from colorings where practice = 0 "
            "group by concept_key"
        ).fetchall()
    )


def _audit(db):
    return [dict(r) for r in db.query("select actor, action, object_id, details from audit order by id")]


def test_three_designers_on_a_three_concept_pilot_give_each_concept_two_colorings_and_a_vote(db, tmp_path):
    _setup(db)
    assert pilot.set_pilot(db, [PILOT[2], PILOT[0], PILOT[1], PILOT[0]], actor="admin") == PILOT
    designers = people(db, 3, "designer")
    for i, (designer, rgb) in enumerate(zip(designers, COLORS)):
        color_as_assigned(db, tmp_path, designer, rgb, seed=i)
    assert _counts(db) == dict.fromkeys(PILOT, 2)
    opened = review.open_review_queue(db, ADMIN, min_colorings=2, now=T0)
    assert opened == 2
    (expert,) = people(db, 1, "expert")
    queue = votes.vote_queue(db, actor(db, expert), np.random.default_rng(0), now=T0)
    assert len(queue) == 2 and {item.concept_key for item in queue} < set(PILOT)


def test_without_a_pilot_the_same_designers_leave_every_concept_one_coloring(db, tmp_path):
    # The starting point: least covered first spreads six colorings over six concepts.
    _setup(db)
    for i, (designer, rgb) in enumerate(zip(people(db, 3, "designer"), COLORS)):
        color_as_assigned(db, tmp_path, designer, rgb, seed=i)
    assert sorted(_counts(db).values()) == [1] * 6
    assert review.consistency_ranking(db, min_colorings=2).empty


def test_the_full_studys_order_is_unchanged_without_a_pilot_and_after_one_ends(tmp_path):
    picks = []
    for run in range(2):
        db = open_db(tmp_path / f"{run}.sqlite")
        ensure_schema(db)
        _setup(db)
        if run:
            pilot.set_pilot(db, PILOT, actor="admin")
            assert pilot.clear_pilot(db, actor="admin") == 3
        (designer,) = people(db, 1, "designer")
        # The order before pilots existed: targets by key, shuffled by the generator, then
        # least filled first (a stable sort).
        rows = assignment.pool_rows(db, "coloring", designer, 5)
        order = np.random.default_rng(7).permutation(len(rows))
        expected = [rows[i][0] for i in sorted(order, key=lambda i: rows[i][1])][:12]
        tasks = reserve(db, "coloring", designer, np.random.default_rng(7), 12, now=T0)
        assert [t.concept_key for t in tasks] == expected
        picks.append(expected)
        db.close()
    assert picks[0] == picks[1]


def test_pilot_concepts_come_before_less_covered_ones_least_covered_first_among_them(db, tmp_path):
    _setup(db)
    pilot.set_pilot(db, PILOT[:2], actor="admin")
    first, second = people(db, 2, "designer")
    assert color_as_assigned(db, tmp_path, first, COLORS[0], n=1) in ([PILOT[0]], [PILOT[1]])
    colored = set(_counts(db))
    picked = [t.concept_key for t in reserve(db, "coloring", second, np.random.default_rng(0), 3, now=T0)]
    # The pilot concept nobody has colored, then the one colored once (over 1,000 concepts
    # with none), then the rest of the study.
    assert picked[:2] == [*(set(PILOT[:2]) - colored), *colored]
    assert picked[2] not in PILOT
    # Once a pilot concept has its k designers, it leaves the pool like any other.
    assert PILOT[0] not in [
        t.concept_key
        for t in reserve(
            db, "coloring", people(db, 1, "designer")[0], np.random.default_rng(0), 3, k=1, now=T0
        )
    ]


def test_the_pool_looks_each_concept_up_in_the_pilot_by_its_primary_key(db):
    plan = [
        row[3]
        for row in db.execute(
            "explain query plan " + assignment._pool_sql("coloring"), {"kind": "coloring", "a": 1, "k": 5}
        ).fetchall()
    ]
    assert any("sqlite_autoindex_pilot_concepts_1 (concept_key=?)" in step for step in plan), plan
    assert not any(step.startswith("SCAN l") for step in plan), plan


def test_a_pilot_is_stored_and_survives_reopening_the_database(tmp_path):
    path = tmp_path / "a.sqlite"
    db = open_db(path)
    ensure_schema(db)
    _setup(db)
    pilot.set_pilot(db, PILOT, actor="admin", now=T0)
    db.close()
    db = open_db(path)
    assert pilot.read_pilot(db) == PILOT
    assert _audit(db) == [
        {
            "actor": "admin",
            "action": "set_pilot",
            "object_id": "pilot",
            "details": '{"concepts": ["apple", "forbidding castle", "rotten apple"], "picked": true}',
        }
    ]
    db.close()


def test_a_drawn_pilot_repeats_with_its_seed_and_holds_only_colorable_concepts(db):
    _setup(db, n_bases=30)
    drawn = pilot.draw_pilot(db, 8, np.random.default_rng(42), actor="admin")
    assert len(drawn) == 8 and set(drawn) <= set(pilot.colorable_concepts(db))
    assert pilot.read_pilot(db) == drawn
    assert pilot.draw_pilot(db, 8, np.random.default_rng(42), actor="admin") == drawn
    assert pilot.draw_pilot(db, 8, np.random.default_rng(43), actor="admin") != drawn


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda db: pilot.set_pilot(db, [], actor="a"), InvalidInput, "a pilot needs 1 to 20 concepts"),
        (
            lambda db: pilot.set_pilot(db, [f"c{i}" for i in range(21)], actor="a"),
            InvalidInput,
            "(5-20 suggested), got 21",
        ),
        (
            lambda db: pilot.set_pilot(db, ["apple", "no such"], actor="a"),
            NotFound,
            "no concept is called 'no such'",
        ),
        (  # the key meant, as the reference CSV's refusal names it (outsider 65)
            lambda db: pilot.set_pilot(db, ["Apple", "ROTTEN  apple", "no such"], actor="a"),
            NotFound,
            "no concept is called 'Apple' (write 'apple'), 'ROTTEN  apple' (write 'rotten apple'), 'no such'",
        ),
        (  # quoted cut to 80 characters (an outside check's 100,000-character name: 935 quoted)
            lambda db: pilot.set_pilot(db, ["apple", "x" * 100_000], actor="a"),
            NotFound,
            "no concept is called '" + "x" * 80 + "'… (100000 characters)",
        ),
        (
            lambda db: pilot.set_pilot(db, ["apple", "dog"], actor="a"),
            InvalidInput,
            "'dog' cannot be colored yet: choose a sketch of its base concept first",
        ),
        (lambda db: pilot.draw_pilot(db, 2.5, np.random.default_rng(0), actor="a"), InvalidInput, "got 2.5"),
        (
            lambda db: pilot.draw_pilot(db, 20, np.random.default_rng(0), actor="a"),
            InvalidInput,
            "only 6 concepts have a chosen sketch, so a pilot of 20 cannot be drawn",
        ),
    ],
)
def test_a_refused_pilot_leaves_the_stored_one_alone(db, call, error, message):
    _setup(db, keys={"apple", "rotten apple"}, n_bases=1)
    sync_all_concepts(db)
    pilot.set_pilot(db, ["apple"], actor="admin")
    before = (pilot.read_pilot(db), _audit(db))
    with pytest.raises(error, match=re.escape(message)):
        call(db)
    assert (pilot.read_pilot(db), _audit(db)) == before


def sync_all_concepts(db):
    """Every concept known, only the sketches `_setup` chose."""
    from annotation.concepts import sync_concepts
    from evaluation.concepts import load_concepts

    sync_concepts(db, load_concepts())


# --- what each stage waits for ------------------------------------------------------------


def test_the_numbers_say_how_many_colorings_open_each_pilot_concepts_vote(db, tmp_path):
    _setup(db)
    assert readiness(db).lines() == [
        "No concept has a coloring yet: a concept's vote opens once 2 designers have colored it."
    ]
    pilot.set_pilot(db, PILOT, actor="admin")
    first, second = people(db, 2, "designer")
    add_coloring(db, tmp_path, first, "apple", COLORS[0])
    assert readiness(db).lines() == [
        "No pilot concept has yet the 2 colorings from different designers that “Colorings needed per concept” asks: "
        "1 more coloring of 'apple' opens its vote; 2 more of 'forbidding castle' open its "
        "vote; 2 more of 'rotten apple' open its vote."
    ]
    add_coloring(db, tmp_path, second, "apple", COLORS[1])
    add_coloring(db, tmp_path, second, "rotten apple", COLORS[1])
    # An expert asking for 5 colorings per concept is told that 2 would rank one now.
    assert readiness(db, 5).lines() == [
        "No pilot concept has yet the 5 colorings from different designers that “Colorings needed per concept” asks: "
        "3 more colorings of 'apple' open its vote; 4 more of 'rotten apple' open its vote; "
        "5 more of 'forbidding castle' open its vote. 1 concept has 2 or more: set "
        "“Colorings needed per concept” to 2 and press “Open the vote queue” to open their vote now."
    ]
    assert readiness(db).lines() == [
        "1 concept has the 2 colorings that “Colorings needed per concept” asks; 1 more coloring of 'rotten apple' opens "
        "its vote; 2 more of 'forbidding castle' open its vote.",
        "No coloring is open for a vote yet: an expert ranks the concepts and opens the vote "
        "queue (Expert review, section 2); the most disputed concepts go to the vote.",
    ]
    # A fourth pilot concept waiting is counted, not left out unsaid.
    pilot.set_pilot(db, [*PILOT, "lemon"], actor="admin")
    assert (
        readiness(db, 5)
        .lines()[0]
        .startswith(
            "No pilot concept has yet the 5 colorings from different designers that “Colorings needed per "
            "concept” asks: 3 more colorings of 'apple' open its vote; 4 more of 'rotten apple' open its "
            "vote; 5 more of 'forbidding castle' open its vote; and 1 more concept. "
        )
    )


def test_an_expert_asking_too_many_is_told_the_most_that_ranks_every_ready_concept(db, tmp_path):
    _setup(db)
    pilot.set_pilot(db, PILOT, actor="admin")
    designers = people(db, 3, "designer")
    for designer, rgb in zip(designers, COLORS):
        add_coloring(db, tmp_path, designer, "apple", rgb)
        add_coloring(db, tmp_path, designer, "rotten apple", rgb)
    # Both have 3: setting 3 ranks both, as 2 would, on more colorings each.
    assert (
        readiness(db, 5)
        .lines()[0]
        .endswith(
            "2 concepts have 3 or more: set “Colorings needed per concept” to 3 and press “Open the vote queue” to open their vote now."
        )
    )
    for designer, rgb in zip(designers[:2], COLORS):
        add_coloring(db, tmp_path, designer, "forbidding castle", rgb)
    # The castle has 2: 3 would leave it out.
    assert (
        readiness(db, 5)
        .lines()[0]
        .endswith(
            "3 concepts have 2 or more: set “Colorings needed per concept” to 2 and press “Open the vote queue” to open their vote now."
        )
    )


def test_a_concept_whose_vote_is_open_is_not_said_to_wait_for_colorings(db, tmp_path):
    """Asked for 3 colorings after a vote opened on 2 (or a withdrawal took one), the line
    said "1 more coloring of 'apple' opens its vote" and to set 2 to rank it (probe 170)."""
    _setup(db)
    pilot.set_pilot(db, PILOT, actor="admin")
    designers = people(db, 2, "designer")
    for designer, rgb in zip(designers, COLORS):
        add_coloring(db, tmp_path, designer, "apple", rgb)
        add_coloring(db, tmp_path, designer, "rotten apple", rgb)
    review.open_review_queue(db, ADMIN, top_fraction=0.5, min_colorings=2, now=T0)
    (voted,) = review.concepts_in_vote(db, T0)  # what this opening put to the vote
    waiting = next(key for key in ("apple", "rotten apple") if key != voted)
    assert readiness(db, 3).lines()[0] == (
        "No pilot concept has yet the 3 colorings from different designers that “Colorings needed per "
        f"concept” asks: 1 more coloring of '{waiting}' opens its vote; 3 more of 'forbidding castle' "
        f"open its vote; '{voted}' is in the vote. 1 concept has 2 or more: set “Colorings "
        "needed per concept” to 2 and press “Open the vote queue” to open their vote now."
    )


def test_the_numbers_count_the_votes_each_review_still_misses(db, tmp_path):
    _setup(db)
    designers = people(db, 2, "designer")
    for designer, rgb in zip(designers, COLORS):
        add_coloring(db, tmp_path, designer, "apple", rgb)
    review.open_review_queue(db, ADMIN, min_colorings=2, now=T0)
    (expert,) = people(db, 1, "expert")
    state = readiness(db)
    assert (state.reviews_open, state.votes_missing, state.votes_needed, state.experts) == (2, 6, 3, 1)
    assert state.lines()[1:] == [
        "No review has all its votes yet: 6 votes on 2 colorings are missing.",
        "Only 1 expert can vote and each coloring needs 3 votes from different experts: invite 2 more.",
    ]
    experts = [expert, *people(db, 2, "expert")]
    for who in experts:
        queue = votes.vote_queue(db, actor(db, who), np.random.default_rng(0), now=T0)
        votes.cast_vote(db, actor(db, who), queue[0].task_id, True, now=T0)
    assert readiness(db).lines()[1:] == [
        "1 review decided; 3 votes on 1 coloring are missing.",
    ]


def test_a_pilot_set_mid_batch_comes_after_the_tasks_a_designer_holds(db, tmp_path):
    """What the coverage line says (an outside tester read "before any other" as at once): the
    up to `RESERVE_AHEAD` tasks a designer holds stay theirs and come first; the next task
    reserved is a pilot concept."""
    from annotation.coloring import tasks as work

    _setup(db)
    [designer] = people(db, 1, "designer")
    held = work.start_batch(db, designer, np.random.default_rng(0), 10, now=T0)
    assert len(held) == work.RESERVE_AHEAD and not {t.concept_key for t in held} & set(PILOT)
    pilot.set_pilot(db, PILOT, actor="admin")
    assert [t.id for t in assignment.open_tasks(db, "coloring", designer, now=T0)] == [t.id for t in held]
    # The admin is told how many such tasks there are (outside probe 143: "Pilot set" alone).
    assert pilot.held_elsewhere(db, now=T0) == (len(held), 1)
    add_coloring(db, tmp_path, designer, held[0].concept_key, COLORS[0], task_id=held[0].id, now=T0)
    assert pilot.held_elsewhere(db, now=T0) == (len(held) - 1, 1)
    assert work.top_up(db, designer, np.random.default_rng(1), now=T0) == 1
    assert pilot.held_elsewhere(db, now=T0) == (len(held) - 1, 1)  # the new one is a pilot concept's
    [fresh] = [
        t for t in assignment.open_tasks(db, "coloring", designer, now=T0) if t.id not in {h.id for h in held}
    ]
    assert fresh.concept_key in PILOT
