"""Withdrawing a designer's colorings (the consent text's promise): nothing counts them any
more, their review closes, and a vote on it is refused; a refusal changes nothing."""

import numpy as np
import pytest

from annotation.coloring.withdrawal import withdraw_colorings
from annotation.concepts import sync_concepts
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from annotation.qc import review, votes
from storage import human
from tests.qc_data import ADMIN, actor, add_coloring, people


@pytest.fixture
def store(db, tmp_path):
    sync_concepts(db)
    return db, tmp_path / "data"


def _rows(db):
    return {
        t: list(db[t].rows)
        for t in ("colorings", "reviews", "qc_votes", "tasks", "audit", "human_distributions")
    }


def test_a_withdrawal_leaves_every_analysis_without_the_colorings_and_closes_their_review(store):
    db, data = store
    leaving, staying = people(db, 2, "designer")
    expert = actor(db, people(db, 1, "expert")[0])
    red = add_coloring(db, data, leaving, "apple", (200, 20, 30))
    green = add_coloring(db, data, staying, "apple", (30, 160, 40))
    add_coloring(db, data, leaving, "banana", (240, 220, 40))
    practice = add_coloring(db, data, leaving, "cat", (90, 90, 90), practice=True)
    review.open_reviews(db, ADMIN, [red], reason="test")
    [held] = votes.vote_queue(db, expert, np.random.default_rng(0), batch_size=5)
    assert held.coloring_id == red
    assert human.read(db, human.DESIGNERS)["apple"].coloring_ids == (red, green)

    done = withdraw_colorings(db, leaving, ADMIN, "asked by email on 2 Dec")

    assert (done.colorings, done.practice, done.concepts, done.reviews, done.released) == (3, 1, 2, 1, 1)
    statuses = {r["id"]: r["status"] for r in db["colorings"].rows}
    assert statuses == {red: "withdrawn", green: "submitted", red + 2: "withdrawn", practice: "withdrawn"}
    stored = human.read(db, human.DESIGNERS)
    assert stored["apple"].coloring_ids == (green,) and "banana" not in stored
    assert db["reviews"].get(red)["status"] == "withdrawn"
    assert db["tasks"].get(held.task_id)["status"] == "released"
    [row] = db["audit"].rows_where("action = 'withdraw_colorings'")
    assert (row["object_id"], row["why"]) == (str(leaving), "asked by email on 2 Dec")
    # The expert's held vote cannot land on it, nor can a decision overwrite the status; the
    # refusal says why (it said "task N was already given back": outside probe 164).
    with pytest.raises(
        Conflict,
        match=f"^coloring {red} was withdrawn from the data set \\(its designer asked\\) while it was shown; "
        "nothing was stored$",
    ):
        votes.cast_vote(db, expert, held.task_id, True)
    assert votes.vote_queue(db, expert, np.random.default_rng(1), batch_size=5) == []
    # Nor may an expert mark it as fine (it was said to be decided by the blind vote)
    with pytest.raises(
        Conflict, match=f"^coloring {red} is withdrawn; only standing colorings can be marked"
    ):
        review.accept_coloring(db, expert, red)
    with pytest.raises(
        Conflict, match=f"^coloring {red + 2} is withdrawn; only standing colorings can be marked"
    ):
        review.accept_coloring(db, expert, red + 2)  # withdrawn before any review
    assert db["colorings"].get(red)["status"] == "withdrawn"
    # The Expert tab neither counts nor shows it (outside probe 221: "apple (2 designers, 2
    # colorings)" on a P_H of one, and the grid served it captioned "withdrawn"); the admin,
    # who withdrew it, sees it marked.
    assert [(r["concept_key"], r["designers"], r["colorings"]) for r in review.reviewable_concepts(db)] == [
        ("apple", 1, 1)
    ]
    assert [i.coloring_id for i in review.coloring_grid(db, expert, "apple")] == [green]
    assert [(i.coloring_id, i.status) for i in review.coloring_grid(db, ADMIN, "apple")] == [
        (red, "withdrawn"),
        (green, "submitted"),
    ]


@pytest.mark.parametrize(
    ("who", "why", "error", "message"),
    [
        ("admin", "", InvalidInput, "`why` is empty"),
        ("designer", "please", PermissionDenied, "only the admin may withdraw colorings"),
        # "no coloring" read as none made, of a designer whose colorings were withdrawn (probe 175)
        (
            "admin",
            "again",
            Conflict,
            r"^the 1 coloring of annotator \d+ \(D\d{4}\) is withdrawn already; nothing changed$",
        ),
        (
            "admin",
            "none made",
            Conflict,
            r"^annotator \d+ \(D\d{4}\) has no coloring to withdraw; nothing changed$",
        ),
        ("unknown", "please", NotFound, "unknown annotator id 999"),
    ],
)
def test_a_refused_withdrawal_changes_nothing(store, who, why, error, message):
    db, data = store
    [designer, idle] = people(db, 2, "designer")
    add_coloring(db, data, designer, "apple", (200, 20, 30))
    target = 999 if who == "unknown" else idle if why == "none made" else designer
    caller = actor(db, designer) if who == "designer" else ADMIN
    if why == "again":
        withdraw_colorings(db, designer, ADMIN, "first time")
    before = _rows(db)
    with pytest.raises(error, match=message):
        withdraw_colorings(db, target, caller, why)
    assert _rows(db) == before


def test_a_coloring_withdrawn_after_its_vote_decided_counts_as_out_of_the_data_set_now(store):
    """The Statistics line's "excluded now" counted excluded colorings alone: one withdrawn
    after the votes kept it left the line as before (outside probe 197)."""
    db, data = store
    leaving, staying = people(db, 2, "designer")
    kept = add_coloring(db, data, leaving, "apple", (200, 20, 30))
    dropped = add_coloring(db, data, staying, "apple", (30, 160, 40))
    review.open_reviews(db, ADMIN, [kept, dropped], reason="test")
    verdicts = {kept: [True, True, False], dropped: [False, False, True]}
    for n, expert in enumerate(actor(db, e) for e in people(db, 3, "expert")):
        while items := votes.vote_queue(db, expert, np.random.default_rng(n), batch_size=5):
            votes.cast_vote(db, expert, items[0].task_id, verdicts[items[0].coloring_id][n])
    assert {r["coloring_id"]: r["status"] for r in db["reviews"].rows} == {
        kept: "decided",
        dropped: "decided",
    }
    assert votes.out_now(db) == (1, False)  # the one the votes discarded
    withdraw_colorings(db, leaving, ADMIN, "asked by email")
    assert votes.out_now(db) == (2, True)
    withdraw_colorings(db, staying, ADMIN, "asked by email")
    assert votes.out_now(db) == (2, True)
