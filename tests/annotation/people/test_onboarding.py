import datetime as dt

import pytest

from annotation.concepts import sync_concepts
from annotation.errors import Conflict, InvalidInput
from annotation.people.accounts import Actor, create_annotators, revoke_annotator
from annotation.people.onboarding import (
    AUTO_APPROVER,
    awaiting_approval,
    mark_instructions_read,
    onboarding_stage,
    practice_redo_reason,
    read_text,
    record_consent,
    review_practice,
)
from storage import iso

ADMIN = Actor(None, "admin", frozenset({"admin"}))


@pytest.fixture
def db(db):
    sync_concepts(db)
    return db


def _practice(db, annotator_id, key):
    return (
        db["colorings"]
        .insert(
            {
                "annotator_id": annotator_id,
                "concept_key": key,
                "image_path": "images/x.png",
                "image_sha256": "0" * 64,
                "practice": 1,
                "round": 1,
                "status": "submitted",
                "created": iso(),
            }
        )
        .last_pk
    )


def _designer_through_instructions(db):
    ((designer, _),) = create_annotators(db, 1, "designer")
    assert onboarding_stage(db, designer["id"]) == "consent"
    _, form = read_text()
    record_consent(db, designer["id"], form, agreed=False)
    assert onboarding_stage(db, designer["id"]) == "consent"
    record_consent(db, designer["id"], form, agreed=True)
    assert onboarding_stage(db, designer["id"]) == "instructions"
    mark_instructions_read(db, designer["id"])
    return designer["id"]


def test_designer_goes_consent_instructions_practice_approval_main(db):
    designer = _designer_through_instructions(db)
    for key in ("banana", "rotten apple"):
        _practice(db, designer, key)
        assert onboarding_stage(db, designer) == "practice"
    _practice(db, designer, "cozy cabin")
    assert onboarding_stage(db, designer) == "awaiting_approval"
    assert [a["id"] for a in awaiting_approval(db)] == [designer]
    review_practice(db, designer, ADMIN, approve=True)
    assert onboarding_stage(db, designer) == "main"
    assert awaiting_approval(db) == []


def test_the_instructions_keep_the_time_they_were_first_read(db):
    ((designer, _),) = create_annotators(db, 1, "designer")
    first, later = (dt.datetime(2026, 12, 3, 7, h, tzinfo=dt.UTC) for h in (32, 35))
    mark_instructions_read(db, designer["id"], now=first)
    mark_instructions_read(db, designer["id"], now=later)  # a second press, another tab, the API
    assert db["annotators"].get(designer["id"])["instructions_read"] == iso(first)


def test_an_automatic_approval_is_recorded_and_outlives_the_setting(db):
    designer = _designer_through_instructions(db)
    for key in ("banana", "rotten apple", "cozy cabin"):
        _practice(db, designer, key)
    assert onboarding_stage(db, designer, auto_approve=True) == "main"
    assert onboarding_stage(db, designer, auto_approve=True) == "main"  # recorded once
    # A later start without the setting keeps the designer at work, and no admin is asked.
    assert onboarding_stage(db, designer) == "main"
    assert awaiting_approval(db) == []
    assert db["annotators"].get(designer)["practice_approved_by"] == AUTO_APPROVER
    audit = list(db["audit"].rows_where("action = 'approve_practice'"))
    assert [(a["actor"], a["object_id"], a["why"]) for a in audit] == [
        (AUTO_APPROVER, str(designer), "approved automatically")
    ]
    # An admin's approval now would replace who approved, and when (outside probe 194).
    before = {t.name: list(t.rows) for t in db.tables}
    approved = db["annotators"].get(designer)["practice_approved"]
    with pytest.raises(
        Conflict,
        match=rf"^annotator {designer} \(D\d{{4}}\) was approved already, on "
        rf"{approved[:10]} {approved[11:16]} UTC automatically; nothing changed$",
    ):
        review_practice(db, designer, ADMIN, True, "looks fine")
    assert {t.name: list(t.rows) for t in db.tables} == before


def test_redo_sends_designer_back_to_practice_and_keeps_the_colorings(db):
    designer = _designer_through_instructions(db)
    ids = [_practice(db, designer, k) for k in ("banana", "rotten apple", "cozy cabin")]
    assert practice_redo_reason(db, designer) is None
    review_practice(db, designer, ADMIN, approve=False, why="colored the cup too")
    assert onboarding_stage(db, designer) == "practice"
    assert practice_redo_reason(db, designer) == "colored the cup too"
    assert [db["colorings"].get(i)["status"] for i in ids] == ["recolor_requested"] * 3
    audit = list(db["audit"].rows_where("action = 'redo_practice'"))
    assert [(a["actor"], a["object_id"], a["why"]) for a in audit] == [
        ("admin", str(designer), "colored the cup too")
    ]


def test_consent_needs_the_hash_of_the_shown_text(db):
    ((designer, _),) = create_annotators(db, 1, "designer")
    with pytest.raises(InvalidInput, match="`form_sha256` must be a 64-character"):
        record_consent(db, designer["id"], "abc", agreed=True)
    assert db["consents"].count == 0
    text, digest = read_text()
    assert "Consent" in text and len(digest) == 64


def _rows(db):
    return (list(db["annotators"].rows), list(db["colorings"].rows), list(db["audit"].rows))


@pytest.mark.parametrize("approve", [True, False])
def test_practice_review_refuses_someone_who_is_not_a_designer(db, approve):
    ((expert, _),) = create_annotators(db, 1, "expert")
    before = _rows(db)
    with pytest.raises(
        Conflict,
        match=rf"annotator {expert['id']} \(E0001\) is not a designer "
        r"\(roles: expert\)",
    ):
        review_practice(db, expert["id"], ADMIN, approve=approve)
    assert _rows(db) == before


@pytest.mark.parametrize("approve", [True, False])
def test_practice_review_refuses_a_designer_without_practice_colorings(db, approve):
    designer = _designer_through_instructions(db)
    before = _rows(db)
    with pytest.raises(Conflict, match="has no practice colorings submitted"):
        review_practice(db, designer, ADMIN, approve=approve)
    assert _rows(db) == before
    assert onboarding_stage(db, designer) == "practice"


def test_practice_approval_needs_every_practice_coloring(db):
    designer = _designer_through_instructions(db)
    _practice(db, designer, "banana")
    _practice(db, designer, "rotten apple")
    before = _rows(db)
    with pytest.raises(Conflict, match="has submitted 2 of the 3 practice colorings needed"):
        review_practice(db, designer, ADMIN, approve=True)
    assert _rows(db) == before
    review_practice(db, designer, ADMIN, approve=False, why="start again")
    assert onboarding_stage(db, designer) == "practice"


def test_practice_review_refuses_a_closed_account(db):
    designer = _designer_through_instructions(db)
    for key in ("banana", "rotten apple", "cozy cabin"):
        _practice(db, designer, key)
    revoke_annotator(db, designer, ADMIN, "left the study")
    before = _rows(db)
    with pytest.raises(Conflict, match="has a closed account"):
        review_practice(db, designer, ADMIN, approve=True)
    assert _rows(db) == before


def test_an_approved_designer_goes_back_to_practice_only_before_main_work_and_gives_back_their_places(db):
    """A redo after an approval sent a designer with three main-task colorings back to
    "Practice · 0 of 3", their reserved places kept until they expired, and the admin read
    "Recorded: redo" (outside probe 145)."""
    designer = _designer_through_instructions(db)
    for key in ("banana", "rotten apple", "cozy cabin"):
        _practice(db, designer, key)
    review_practice(db, designer, ADMIN, approve=True)
    for key in ("apple", "lemon"):
        db.execute(
            "insert into tasks (kind, annotator_id, concept_key, practice, status, created, expires) "
            "values ('coloring', ?, ?, 0, 'reserved', ?, '2999-01-01T00:00:00.000000Z')",
            [designer, key, iso()],
        )
    db.conn.commit()
    assert review_practice(db, designer, ADMIN, approve=False, why="approved by mistake") == 2
    assert onboarding_stage(db, designer) == "practice"
    assert {r["status"] for r in db["tasks"].rows_where("practice = 0")} == {"released"}
    [row] = db["audit"].rows_where("action = 'redo_practice'")
    assert row["details"] == '{"released_tasks": 2}'
    # Approved again, with main-task work: that work stands.
    for key in ("banana", "rotten apple", "cozy cabin"):
        _practice(db, designer, key)
    review_practice(db, designer, ADMIN, approve=True)
    main = _practice(db, designer, "apple")
    db.execute("update colorings set practice = 0 where id = ?", [main])
    db.conn.commit()
    before = [list(db[t].rows) for t in ("annotators", "colorings", "tasks", "audit")]
    with pytest.raises(Conflict, match=r"has made 1 main-task coloring since: their work stands"):
        review_practice(db, designer, ADMIN, approve=False, why="too late")
    assert [list(db[t].rows) for t in ("annotators", "colorings", "tasks", "audit")] == before
    assert onboarding_stage(db, designer) == "main"
