"""Free text a person types: bounded, and free of characters that change how it is shown."""

import pytest

from annotation.errors import InvalidInput, blank, check_text


def test_tabs_line_breaks_and_right_to_left_marks_are_text():
    check_text("Too bright:\n\tbrowner, please. \u200fשלום\u200e ok", "note")
    check_text(None, "note")  # no text is a type matter for the caller


@pytest.mark.parametrize(
    "char", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\u202a", "\u202e", "\u2066", "\u2069"]
)
def test_each_control_character_is_refused_by_its_code_point(char):
    with pytest.raises(
        InvalidInput, match=rf"`why` holds a control character \(U\+{ord(char):04X}\) at character 3"
    ):
        check_text(f"ab{char}c", "why")


@pytest.mark.parametrize(
    ("value", "is_blank"),
    [
        ("", True),
        (" \n\t", True),
        ("\u200b\u200d\u2060\ufeff", True),  # zero-width characters show nothing
        (None, True),
        (3, True),
        ("ok", False),
        ("\u200bx", False),
        ("\u0627", False),  # a letter of another script
    ],
)
def test_blank_is_text_that_shows_nothing(value, is_blank):
    assert blank(value) is is_blank
