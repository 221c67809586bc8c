"""Domain errors of the annotation store.

Every error a person can cause derives from `AnnotationError`; the app turns it (and
`ValueError`) into a message on screen. Messages name the object, what was expected
and what arrived.
"""

from __future__ import annotations


class AnnotationError(Exception):
    """Base class of every error the annotation library raises on purpose."""


class InvalidInput(AnnotationError, ValueError):
    """An argument has the wrong type, range or form."""


class InvalidImage(InvalidInput):
    """An uploaded file is not a decodable image within the configured limits."""


class InvalidToken(AnnotationError):
    """An invite or session token is unknown, forged, revoked or expired."""


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


MAX_TEXT_CHARS = 2000
"""The most characters a free-text field takes (notes, reasons, names): a few paragraphs."""


def check_length(value: object, name: str, limit: int = MAX_TEXT_CHARS) -> None:
    """Raise `InvalidInput` naming field `name` when text `value` is longer than `limit`.

    Every free-text field a person fills in passes this before anything is stored.
    """
    if isinstance(value, str) and len(value) > limit:
        raise InvalidInput(f"`{name}` may hold at most {limit} characters, got {len(value)}; shorten it")


SHOWN_CHARS = 80
"""The most characters of a refused value that a message quotes back (see `shown`)."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`value` as a refusal quotes it: its ``repr``, cut to `limit` characters when longer.

    A message names what arrived, but must not send a megabyte of input back (or into a
    log): a longer text keeps its first `limit` characters and says how long it was.

    Parameters
    ----------
    value : object
        What arrived; text is measured in characters, anything else by its ``repr``.
    limit : int
        Characters of the value kept, >= 1.

    Returns
    -------
    str

    Examples
    --------
    >>> shown("unicorn")
    "'unicorn'"
    >>> shown("x" * 1000, limit=3)
    "'xxx'… (1000 characters)"
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
