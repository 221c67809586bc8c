from collections import Counter

import pytest

from annotation.concepts import get_concept, sync_concepts
from annotation.errors import NotFound
from storage import ensure_schema, open_db


def test_sync_concepts_stores_all_1278_variants_once(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    assert sync_concepts(db) == 1278
    assert sync_concepts(db) == 1278
    rows = list(db["concepts"].rows)
    assert len(rows) == 1278 and len({r["key"] for r in rows}) == 1278
    assert Counter(r["modifier_type"] for r in rows)["original"] == 214
    assert get_concept(db, "rotten apple") == {
        "key": "rotten apple",
        "base": "apple",
        "base_id": 41,
        "category": "fruit",
        "modifier_type": "visual_state",
        "modifier": "rotten",
    }


def test_every_variant_has_its_base_concept_as_an_original_row(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    sync_concepts(db)
    orphans = db.execute(
        "select c.key from concepts c left join concepts o on o.key = c.base "
        "and o.modifier_type = 'original' where o.key is null"
    ).fetchall()
    assert orphans == []


def test_unknown_concept_is_not_found(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    sync_concepts(db)
    with pytest.raises(NotFound, match="'purple unicorn'"):
        get_concept(db, "purple unicorn")
