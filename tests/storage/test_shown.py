"""A refusal quotes at most `SHOWN_CHARS` characters of what arrived (docs/security.md,
"Refusals quote at most 80 characters"): every message that names a refused value writes it
with `storage.shown.shown`, not ``!r`` (outside probe 108: a participant's 100,000-character
side came back as 900 characters, cut only by the page's bound on a whole message)."""

import re

import pytest

from annotation.errors import InvalidInput
from annotation.study import judging
from storage.shown import SHOWN_CHARS, shown_path
from tests.source_scan import matching_lines

SCANNED = ("annotation", "app", "storage", "evaluation")
# "got {value!r}": a refused value quoted whole.
QUOTED_WHOLE = re.compile(r"got \{[^{}!]+!r\}")


def test_no_message_quotes_a_refused_value_whole():
    assert matching_lines(QUOTED_WHOLE, SCANNED) == [], "write the value with `shown(value)`, which cuts it"


def test_the_scan_finds_a_whole_quote():
    assert QUOTED_WHOLE.search('raise ValueError(f"`side` must be left or right, got {side!r}")')
    assert not QUOTED_WHOLE.search('raise ValueError(f"`side` must be left or right, got {shown(side)}")')


def test_a_long_refused_side_is_quoted_cut():
    with pytest.raises(InvalidInput) as refused:
        judging.record_judgment(None, None, 1, "y" * 100_000, 0.0)
    message = str(refused.value)
    assert message.endswith(f"got {'y' * SHOWN_CHARS!r}… (100000 characters)")
    assert len(message) < 200


def test_a_long_path_is_quoted_by_its_end_where_its_file_is():
    path = "/tmp/" + "d" * 200 + "/missing.pth"
    assert shown_path(path) == f"…{path[-SHOWN_CHARS:]!r} ({len(path)} characters)"
    assert shown_path(path).count("d") < SHOWN_CHARS and "missing.pth'" in shown_path(path)
    assert shown_path("/data/sam.pth") == "'/data/sam.pth'"
