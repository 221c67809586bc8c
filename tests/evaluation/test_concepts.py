from collections import Counter

from evaluation.concepts import load_concepts


def test_table9_expands_to_1278_unique_variants():
    concepts = load_concepts()
    assert len(concepts) == 1278
    assert len({c.key for c in concepts}) == 1278
    assert len({c.base for c in concepts}) == 214
    assert Counter(c.modifier_type for c in concepts)["original"] == 214


def test_variants_carry_base_category_and_modifier():
    by_key = {c.key: c for c in load_concepts()}
    rotten = by_key["rotten apple"]
    assert (rotten.base, rotten.category, rotten.modifier_type, rotten.modifier) == (
        "apple",
        "fruit",
        "visual_state",
        "rotten",
    )
    lonely = by_key["lonely cabin"]
    assert (lonely.base, lonely.category, lonely.modifier_type) == ("cabin", "building", "emotional")
    assert by_key["dog"].modifier == "" and by_key["dog"].modifier_type == "original"


def test_emotional_modifiers_only_on_landscape_and_building():
    cats = {c.category for c in load_concepts() if c.modifier_type == "emotional"}
    assert cats == {"landscape", "building"}
