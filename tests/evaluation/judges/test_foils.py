"""Foils by the Rainbow rules, on hand-written descriptions, and the color-wheel relations."""

import pytest

from evaluation.color.naming import BASIC_TERMS
from evaluation.color.wheel import ADJACENT, COMPLEMENTARY, relation
from evaluation.judges.foils import (
    Foil,
    RefusedDescription,
    color_mentions,
    foils,
    normalize,
    replacement_foils,
    swap_foil,
)


def test_replacement_foils_replace_the_color_by_each_other_basic_term():
    result = replacement_foils("A woman in a green tank top looking at a drill.")
    assert [f.foil_term for f in result] == [t for t in BASIC_TERMS if t != "green"]
    assert {f.kind for f in result} == {"replacement"} and {f.true_term for f in result} == {"green"}
    assert result[0].text == "A woman in a white tank top looking at a drill."
    assert len(replacement_foils("a yellow wall and a white window")) == 20


def test_swap_foil_exchanges_the_two_colors():
    assert swap_foil("A red jacket and black pants") == Foil(
        "A black jacket and red pants", "swap", "red", "black"
    )
    assert swap_foil("a red jacket") is None
    assert swap_foil("a red car and a red bus") is None
    assert swap_foil("a red car, a blue bus and a white van") is None
    assert foils("A red jacket and black pants")[-1].kind == "swap"
    assert len(foils("A red jacket and black pants")) == 21


def test_grey_becomes_gray_keeping_capitals():
    assert normalize("A grey cat on a Grey mat") == "A gray cat on a Gray mat"
    assert normalize("GREY") == "Gray"
    assert [m.term for m in color_mentions("a grey cat")] == ["gray"]
    assert "grey" not in " ".join(f.text for f in foils("a grey cat"))


def test_articles_agree_after_replacement_and_in_the_original():
    assert normalize("a orange car") == "an orange car"
    assert normalize("An red car") == "A red car"
    texts = {f.foil_term: f.text for f in replacement_foils("A red car next to an orange bus")}
    assert texts["orange"] == "An orange car next to an orange bus"
    texts = {f.foil_term: f.text for f in replacement_foils("an orange car")}
    assert texts["blue"] == "a blue car" and texts["white"] == "a white car"
    assert swap_foil("an orange car and a blue bus").text == "a blue car and an orange bus"
    # Only the article of the changed word moves.
    assert texts["red"] == "a red car"
    assert replacement_foils("a man and a orange dog")[0].text == "a man and a white dog"


@pytest.mark.parametrize(
    "description",
    [
        "a green and white shirt",
        "A green white shirt.",
        "a black-and-white cat",
        "a red or blue car",
        "a red/blue flag",
        "an orange and white cat",
        "an orange-and-white cat",  # outside probe 223: read as the fruit and a white cat
        "A Grey and black dog",
    ],
)
def test_two_colors_on_one_object_are_refused(description):
    with pytest.raises(RefusedDescription, match="gives one object two colors"):
        color_mentions(description)
    with pytest.raises(RefusedDescription):
        foils(description)


@pytest.mark.parametrize(
    ("description", "terms"),
    [
        ("an orange on the table", []),
        ("An orange.", []),
        ("a glass of orange juice next to a red cup", ["red"]),
        ("a slice of orange on a white plate", ["white"]),
        ("a ripe orange in a blue bowl", ["blue"]),
        ("an orange and an apple", []),
        ("an orange car", ["orange"]),
        ("the car is orange", ["orange"]),
        ("a man dressed in orange", ["orange"]),
        ("a bright orange kite and a blue sky", ["orange", "blue"]),
        # A color of the fruit is one color, not two (outside probe 220: refused as two)
        ("a green orange", ["green"]),
        ("an orange orange", ["orange"]),
        ("a ripe green orange on a table", ["green"]),
    ],
)
def test_orange_the_fruit_is_never_a_color(description, terms):
    assert [m.term for m in color_mentions(description)] == terms


def test_fruit_orange_is_left_alone_by_foils_and_articles():
    result = replacement_foils("a slice of orange on a white plate")
    assert [f.true_term for f in result] == ["white"] * 10
    assert result[0].text == "a slice of orange on a black plate"
    assert normalize("a orange on the table") == "a orange on the table"


def test_descriptions_without_color_and_bad_input_are_refused():
    with pytest.raises(RefusedDescription, match="none of the basic color terms"):
        foils("a cat on a mat")
    with pytest.raises(RefusedDescription, match="none of the basic color terms"):
        foils("an orange on the table")
    with pytest.raises(ValueError, match="`description` must be a non-empty string"):
        foils("  ")
    with pytest.raises(ValueError, match="`description` must be a non-empty string"):
        normalize(None)


def test_mentions_know_their_spans_and_nouns():
    text = "A red jacket and black pants"
    mentions = color_mentions(text)
    assert [(text[m.start : m.end], m.term, m.noun) for m in mentions] == [
        ("red", "red", "jacket"),
        ("black", "black", "pants"),
    ]


def test_color_wheel_relations():
    assert relation("red", "orange") == relation("orange", "red") == "adjacent"
    assert relation("pink", "purple") == relation("pink", "red") == "adjacent"
    assert relation("brown", "orange") == relation("gray", "black") == "adjacent"
    assert relation("yellow", "blue") == relation("orange", "blue") == "complementary"
    assert relation("green", "purple") == relation("white", "black") == "complementary"
    assert relation("red", "blue") == relation("white", "red") == "other"
    assert not ADJACENT & COMPLEMENTARY
    assert len(ADJACENT) == 12 and len(COMPLEMENTARY) == 6
    with pytest.raises(ValueError, match="`b` must be one of"):
        relation("red", "cyan")
    with pytest.raises(ValueError, match="must differ"):
        relation("red", "red")
