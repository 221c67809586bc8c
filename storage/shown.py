"""How a message shows values: a refusal quotes what arrived cut to `SHOWN_CHARS` characters
(`shown`; `annotation.errors` re-exports it), a count says its noun in the singular or plural
(`counted`), a stored status in words (`in_words`), a name that came in with a file as it
can be shown (`printable`), a typed name as it is compared with the names shown (`folded`).
One place for every library."""

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


def shown_path(path: object, limit: int = SHOWN_CHARS) -> str:
    """A path as a refusal quotes it: like `shown`, but a longer one keeps its last `limit`
    characters, where its file's name is.

    Parameters
    ----------
    path : str or os.PathLike
        The path that arrived.
    limit : int
        Characters of the path kept, >= 1.

    Returns
    -------
    str

    Examples
    --------
    >>> shown_path("/data/sam.pth")
    "'/data/sam.pth'"
    >>> shown_path("/" + "d" * 100 + "/sam.pth", limit=8)
    "…'/sam.pth' (109 characters)"
    """
    text = str(path)
    if len(text) <= limit:
        return repr(text)
    return f"…{text[-limit:]!r} ({len(text)} characters)"


def folded(text: object) -> str:
    """`text` as a typed name is compared with a listed one: lower case, runs of blanks one
    space, none around ("Teddy  Bear " and "teddy bear" are one name).

    Examples
    --------
    >>> folded("  Sports   CAR ")
    'sports car'
    """
    return " ".join(str(text).lower().split())


def counted(count: int, noun: str) -> str:
    """`count` (thousands separated, as the app's other figures are) and `noun`, the noun plural
    (in s) unless there is one: how a message counts.

    >>> counted(1, "designer"), counted(3, "coloring"), counted(6390, "vote")
    ('1 designer', '3 colorings', '6,390 votes')
    """
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def in_words(name: str) -> str:
    """A stored status or field name as a message writes it: its underscores as spaces.

    >>> in_words("recolor_requested")
    'recolor requested'
    """
    return str(name).replace("_", " ")


def printable(text: str) -> str:
    r"""`text` with each character that does not print written as its escape (as ``repr``
    writes it): a control or format character, such as U+202E that shows what follows it
    reversed, in a file's name shown in a table.

    >>> print(printable("cat \u202egnp.exe"))
    cat \u202egnp.exe
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
