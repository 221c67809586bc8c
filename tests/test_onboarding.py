import pytest

from annotation.accounts import Actor, create_annotators
from annotation.concepts import sync_concepts
from annotation.db import iso
from annotation.errors import InvalidInput
from annotation.onboarding import (awaiting_approval, mark_instructions_read,
                                   onboarding_stage, read_text, record_consent,
                                   review_practice)

ADMIN = Actor(None, "admin", frozenset({"admin"}))


@pytest.fixture
def db(db):
    sync_concepts(db)
    return db


def _practice(db, annotator_id, key):
    return db["colorings"].insert({
        "annotator_id": annotator_id, "concept_key": key, "image_path": "images/x.png",
        "image_sha256": "0" * 64, "practice": 1, "round": 1, "status": "submitted",
        "created": iso()}).last_pk


def _designer_through_instructions(db):
    (designer, _), = create_annotators(db, 1, "designer")
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
    assert onboarding_stage(db, designer, auto_approve=True) == "main"
    assert [a["id"] for a in awaiting_approval(db)] == [designer]
    review_practice(db, designer, ADMIN, approve=True)
    assert onboarding_stage(db, designer) == "main"
    assert awaiting_approval(db) == []


def test_redo_sends_designer_back_to_practice_and_keeps_the_colorings(db):
    designer = _designer_through_instructions(db)
    ids = [_practice(db, designer, k) for k in ("banana", "rotten apple", "cozy cabin")]
    review_practice(db, designer, ADMIN, approve=False, why="colored the cup too")
    assert onboarding_stage(db, designer) == "practice"
    assert [db["colorings"].get(i)["status"] for i in ids] == ["recolor_requested"] * 3
    audit = list(db["audit"].rows_where("action = 'redo_practice'"))
    assert [(a["actor"], a["object_id"], a["why"]) for a in audit] == [
        ("admin", str(designer), "colored the cup too")]


def test_consent_needs_the_hash_of_the_shown_text(db):
    (designer, _), = create_annotators(db, 1, "designer")
    with pytest.raises(InvalidInput, match="`form_sha256` must be a 64-character"):
        record_consent(db, designer["id"], "abc", agreed=True)
    assert db["consents"].count == 0
    text, digest = read_text()
    assert "Consent" in text and len(digest) == 64
