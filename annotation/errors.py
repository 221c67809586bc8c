"""Domain errors of the annotation store.

Every error a person can cause derives from `AnnotationError`; the app turns it (and
`ValueError`) into a message on screen. Messages name the object, what was expected
and what arrived.
"""

from __future__ import annotations

import re
import unicodedata

from storage.shown import SHOWN_CHARS, shown  # noqa: F401 - re-exported: this library's refusals quote with them


class AnnotationError(Exception):
    """Base class of every error the annotation library raises on purpose."""


class InvalidInput(AnnotationError, ValueError):
    """An argument has the wrong type, range or form."""


class InvalidImage(InvalidInput):
    """An uploaded file is not a decodable image within the configured limits."""


class InvalidToken(AnnotationError):
    """An invite or session token is unknown, forged, revoked or expired."""


class StaleToken(InvalidToken):
    """An invite token that names a stored invite, out of date: expired, revoked or of a
    closed account. Someone holding a real link is no guess: the sign-in throttle does not
    count it."""


class PermissionDenied(AnnotationError):
    """The signed-in person lacks the role an action needs."""


class NotFound(AnnotationError, LookupError):
    """A referenced row (concept, task, coloring, annotator...) does not exist."""


class QuotaExceeded(AnnotationError):
    """The action would exceed a quota (colorings per concept, votes per item...)."""


class ReservationExpired(QuotaExceeded):
    """A reserved task ran past its deadline and its slot was given to someone else."""


class Conflict(AnnotationError):
    """The action conflicts with the stored state (already voted, already submitted...)."""


class TaskEnded(Conflict):
    """The task ended while it was worked on, for a reason its holder did not cause (a redo
    whose round went to the experts' vote meanwhile): it can never be submitted.
    ``canvas_key`` names its canvas draft where the caller knows it ("" otherwise)."""

    canvas_key = ""


class AlreadyDone(Conflict):
    """The task was submitted already: a second click, or another tab or window."""


MAX_TEXT_CHARS = 2000
"""The most characters a free-text field takes (notes, reasons, names): a few paragraphs."""


def check_length(value: object, name: str, limit: int = MAX_TEXT_CHARS) -> None:
    """Raise `InvalidInput` naming field `name` when text `value` is longer than `limit`.

    For what is read, not stored (a pasted link, a password); free text that is stored
    passes `check_text`.
    """
    if isinstance(value, str) and len(value) > limit:
        raise InvalidInput(f"`{name}` may hold at most {limit} characters, got {len(value)}; shorten it")


# C0 controls but tab, line feed and carriage return; DEL and C1; the bidirectional
# embeddings, overrides and isolates, which make a note read backwards where it is shown
# (left-to-right and right-to-left marks stay: languages written right to left use them).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def blank(value: object) -> bool:
    """Whether `value` is not text, or text that shows nothing: only spaces, line breaks and
    format characters (a zero-width space or joiner). A recolor note of two zero-width
    spaces passed ``.strip()`` and reached a designer blank (outside probe 143)."""
    return not isinstance(value, str) or all(c.isspace() or unicodedata.category(c) == "Cf" for c in value)


def check_text(value: object, name: str, limit: int = MAX_TEXT_CHARS) -> None:
    """`check_length`, and `InvalidInput` naming field `name` when text `value` holds a
    control character (an escape that colors a terminal reading an export, a NUL, a
    right-to-left override).

    Every free-text field a person fills in passes this before anything is stored.
    """
    check_length(value, name, limit)
    found = _CONTROL.search(value) if isinstance(value, str) else None
    if found:
        raise InvalidInput(
            f"`{name}` holds a control character (U+{ord(found.group()):04X}) at character "
            f"{found.start() + 1}; remove it (free text takes letters, digits, punctuation, "
            "tabs and line breaks)"
        )
