"""Closing an account gives the tasks its holder reserved back to the pool."""

import datetime as dt
import json

import numpy as np
import pytest

from annotation.assignment import reserve, reserve_practice, submit
from annotation.concepts import sync_concepts
from annotation.errors import Conflict, InvalidInput, InvalidToken
from annotation.people.accounts import (
    Actor,
    create_annotators,
    login_with_invite,
    new_invite,
    reopen_annotator,
    require,
    revoke_annotator,
)
from annotation.study.crowd import votes_left
from evaluation.concepts import load_concepts
from storage import iso

ADMIN = Actor(None, "admin", frozenset({"admin"}))
T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=5)
KEYS = ("apple", "banana")
ROLE = {"coloring": "designer", "review": "expert", "judgment": "participant"}


def _people(db, n, role):
    return [a["id"] for a, _ in create_annotators(db, n, role, now=T0)]


def _concepts(db):
    """The concepts apple and banana, each with a selected sketch."""
    sync_concepts(db, [c for c in load_concepts() if c.key in KEYS])
    for base in KEYS:
        row = {"base": base, "path": f"sketches/{base}.png", "sha256": "0" * 64, "source": "test"}
        db["sketches"].insert({**row, "selected": 1, "created": iso(T0)})


def _coloring(db, designer, key):
    row = {
        "annotator_id": designer,
        "concept_key": key,
        "image_path": "images/x.png",
        "image_sha256": "0" * 64,
    }
    return db["colorings"].insert({**row, "status": "submitted", "created": iso(T0)}).last_pk


def _study(db, models, trials=None):
    """A frozen study of one vote per pair: a pair of each of `models` for each of `KEYS`."""
    meta = {} if trials is None else {"trials_per_participant": trials}
    study = (
        db["studies"]
        .insert(
            {
                "name": "small",
                "votes_per_pair": 1,
                "meta": json.dumps(meta),
                "created": iso(T0),
            }
        )
        .last_pk
    )
    for key in KEYS:
        for a, b in models:
            db["study_pairs"].insert({"study_id": study, "concept_key": key, "a": a, "b": b})
    db["studies"].update(study, {"frozen": iso(T0)})
    return study


def _write(db, task):
    """Store the result of `task` (a coloring, a QC vote or a judgment); its id."""
    if task.kind == "coloring":
        return _coloring(db, task.annotator_id, task.concept_key)
    if task.kind == "review":
        row = {"coloring_id": task.coloring_id, "expert_id": task.annotator_id, "vote": "consistent"}
        return db["qc_votes"].insert({**row, "created": iso(T0)}).last_pk
    row = {"pair_id": task.pair_id, "participant_id": task.annotator_id, "left_item": task.left_item}
    return (
        db["judgments"]
        .insert({**row, "choice": "left", "winner": task.left_item, "created": iso(T0)})
        .last_pk
    )


def _targets(db, kind):
    """Two targets of `kind` that each take one result."""
    _concepts(db)
    if kind == "review":
        (designer,) = _people(db, 1, "designer")
        for key in KEYS:
            coloring = _coloring(db, designer, key)
            db["reviews"].insert(
                {"coloring_id": coloring, "reason": "test", "votes_needed": 1, "created": iso(T0)}
            )
    if kind == "judgment":
        _study(db, [("sdxl", "sana")])


@pytest.mark.parametrize("kind", ["coloring", "review", "judgment"])
def test_revoking_a_person_releases_their_reserved_tasks_for_others_and_keeps_submitted_ones(db, kind):
    _targets(db, kind)
    holder, other = _people(db, 2, ROLE[kind])
    rng = np.random.default_rng(0)
    done, held = reserve(db, kind, holder, rng, 2, k=1, now=T0)
    submit(db, done.id, holder, _write, k=1, now=T0)
    assert reserve(db, kind, other, rng, 2, k=1, now=T0) == []

    revoke_annotator(db, holder, ADMIN, "left the study", now=LATER)

    tasks = {
        r["id"]: (r["status"], r["finished"]) for r in db["tasks"].rows_where("annotator_id = ?", [holder])
    }
    assert tasks == {done.id: ("submitted", iso(T0)), held.id: ("released", iso(LATER))}
    assert [t.target for t in reserve(db, kind, other, rng, 2, k=1, now=LATER)] == [held.target]
    (row,) = db["audit"].rows_where("action = 'revoke_annotator'")
    assert json.loads(row["details"]) == {"revoked_invites": 1, "ended_sessions": 0, "released_tasks": 1}


def test_revoking_a_designer_releases_their_practice_tasks_too(db):
    _concepts(db)
    (designer,) = _people(db, 1, "designer")
    assert len(reserve_practice(db, designer, KEYS, now=T0)) == 2
    revoke_annotator(db, designer, ADMIN, "left the study", now=LATER)
    assert [r["status"] for r in db["tasks"].rows] == ["released", "released"]


def test_a_revoked_participants_trials_no_longer_fill_the_study(db):
    # An outside check: an invited participant held all 4 trials of a small study and was
    # revoked; a newcomer through the study's link was told the study was full.
    _concepts(db)
    study = _study(db, [("sdxl", "sana"), ("sana", "omnigen")], trials=4)
    (participant,) = _people(db, 1, "participant")
    assert len(reserve(db, "judgment", participant, np.random.default_rng(0), 4, now=T0)) == 4
    assert votes_left(db, study, now=T0)[:4] == (0, 4, 4, 0.0)
    revoke_annotator(db, participant, ADMIN, "left the study", now=LATER)
    assert votes_left(db, study, now=LATER)[:4] == (4, 4, 4, 0.0)


def test_a_closed_account_reopens_with_a_new_link_and_its_old_links_stay_dead(db):
    """Closing was for good (outsider 77: a wrong id closed, no way back but a new pseudonym)."""
    [(person, link)] = create_annotators(db, 1, "designer", now=T0)
    session = login_with_invite(db, link, now=T0)
    revoke_annotator(db, person["id"], ADMIN, "wrong row", now=LATER)
    with pytest.raises(
        InvalidToken, match="the study admin closed your account; ask them if you should go on"
    ):
        require(db, session.token, now=LATER)
    with pytest.raises(
        Conflict,
        match=r"^the account of annotator 1 \(D0001\) is closed: reopen it first \(Admin tab, Reopen account\); no new link was made$",
    ):
        new_invite(db, person["id"], now=LATER)
    before = list(db["annotators"].rows)
    with pytest.raises(InvalidInput, match="`why` must say why the account is reopened"):
        reopen_annotator(db, person["id"], ADMIN, " ")
    assert list(db["annotators"].rows) == before
    reopen_annotator(db, person["id"], ADMIN, "closed by mistake", now=LATER)
    assert db["annotators"].get(person["id"])["status"] == "active"
    # The old session's page said "only they can reopen it" of the account reopened (probe 221).
    with pytest.raises(
        InvalidToken,
        match="^your session is not valid any more: the study admin closed your account, and has opened it "
        "again since: open the new invite link they give you$",
    ):
        require(db, session.token, now=LATER)
    [row] = db["audit"].rows_where("action = 'reopen_annotator'")
    assert (row["object_id"], row["why"]) == (str(person["id"]), "closed by mistake")
    with pytest.raises(InvalidToken, match=r"replaced \(by a newer link, or when the account was closed\)"):
        login_with_invite(db, link, now=LATER)
    fresh = new_invite(db, person["id"], now=LATER)
    assert login_with_invite(db, fresh, now=LATER).annotator_id == person["id"]
    with pytest.raises(
        Conflict,
        match=rf"the account of annotator {person['id']} \({person['pseudonym']}\) is open; nothing changed",
    ):
        reopen_annotator(db, person["id"], ADMIN, "again", now=LATER)
