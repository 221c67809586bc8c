"""Foils of a matching description by the rules of the Rainbow probe (Bexte et al.).

A description mentions one or more objects' colors among the eleven basic terms
(`evaluation.color.naming.BASIC_TERMS`). Its foils differ only in color words:

* **replacement** foils: one color mention replaced by each of the other ten terms, in turn
  (ten foils per mention);
* a **swap** foil: when the description has exactly two color mentions of different terms,
  the two are exchanged ("a red cube and a blue ball" -> "a blue cube and a red ball").

Rules applied to every description and foil
-------------------------------------------
1. *grey* is normalised to *gray* (any case; capitalisation kept).
2. The article before a color word agrees with it: *an* before *orange*, *a* before the
   others. This is fixed in the matching description as well, so that an article is never
   a clue to which text is the foil.
3. A description giving one object two colors is refused (`RefusedDescription`): two color
   words next to each other, or joined only by *and*, *or*, a hyphen, a slash or a comma
   ("a green and white shirt", "a green white shirt", "a black-and-white cat").
4. *orange* the fruit is never a color mention. The paper screened these by hand; here a
   rule decides, from the neighbouring words: *orange* is a color when it follows a linking
   word (*is orange*, *dressed in orange*, *bright orange*); it is the fruit when a fruit
   word comes next or before (*orange juice*, *slice of orange*, *ripe orange*) or when no
   noun follows it (*an orange on the table*, *an orange.*), unless another color follows
   a joining word (*an orange and white cat*); otherwise it modifies the next word and is a
   color (*an orange car*). A color of the fruit is its one color (*a green orange*). Descriptions the rule gets wrong
   (*an orange sitting on a plate*) must be screened by the person who writes them.

A description without any color mention is refused too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluation.color.naming import BASIC_TERMS
from storage.shown import shown

KINDS = ("replacement", "swap")
SPELLINGS = {"grey": "gray"}
_COLOR_WORDS = frozenset(BASIC_TERMS) | frozenset(SPELLINGS)
_TOKEN = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
_JOINERS = frozenset({"and", "or", "-", "/", ","})
_ARTICLES = frozenset({"a", "an"})
# Rule 4: words around "orange" that decide between the color and the fruit.
_LINKING = frozenset(
    {"is", "are", "was", "were", "be", "been", "looks", "look", "appears", "seems", "painted", "colored"}
    | {"coloured", "in", "bright", "dark", "light", "pale", "deep", "all", "mostly", "very"}
)
_FRUIT_NEXT = frozenset(
    {"juice", "peel", "peels", "slice", "slices", "tree", "trees", "rind", "marmalade", "zest", "segment"}
    | {"segments", "wedge", "wedges", "half", "halves", "blossom", "blossoms", "pulp", "soda", "grove"}
)
_FRUIT_BEFORE = frozenset(
    {"of", "ripe", "peeled", "sliced", "cut", "juicy", "blood", "navel", "whole", "fresh", "halved", "rotten"}
)
_NOT_A_NOUN = frozenset(
    {"and", "or", "on", "in", "with", "from", "at", "to", "next", "beside", "near", "by", "under", "over"}
    | {"is", "are", "was", "were", "has", "have", "sits", "lies", "of", "for", "into", "onto", "behind"}
)


class RefusedDescription(ValueError):
    """A description that cannot be probed: no color mention, or one object given two colors."""


@dataclass(frozen=True)
class Mention:
    """One color mention in a (normalised) description.

    Attributes
    ----------
    start, end : int
        Character span of the color word.
    term : str
        Its basic term, one of `BASIC_TERMS`.
    noun : str
        The lower-case word right after it (the object it describes, when it modifies a
        noun), or ``""``.
    """

    start: int
    end: int
    term: str
    noun: str


@dataclass(frozen=True)
class Foil:
    """A foil of a matching description.

    Attributes
    ----------
    text : str
        The foil.
    kind : str
        ``"replacement"`` or ``"swap"``.
    true_term, foil_term : str
        The color the description gives at the changed place and the foil's color there
        (for a swap, at the first of the two mentions).
    """

    text: str
    kind: str
    true_term: str
    foil_term: str


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN.finditer(text))


def _word(tokens: list[re.Match], i: int) -> str:
    return tokens[i].group().lower() if 0 <= i < len(tokens) else ""


def _is_fruit(tokens: list[re.Match], i: int) -> bool:
    before, after = _word(tokens, i - 1), _word(tokens, i + 1)
    beside = i + 1
    while _word(tokens, beside) in _JOINERS:
        beside += 1
    if before in _LINKING or beside > i + 1 and _word(tokens, beside) in _COLOR_WORDS:
        return False  # "is orange"; "an orange and white cat", "an orange-and-white cat"
    if after in _FRUIT_NEXT or before in _FRUIT_BEFORE:
        return True
    return not after.isalpha() or after in _NOT_A_NOUN


def _cased(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _article_edit(tokens: list[re.Match], i: int, color: str) -> list[tuple[int, int, str]]:
    """The edit that makes the article before token `i` agree with `color` (rule 2)."""
    if i == 0 or _word(tokens, i - 1) not in _ARTICLES:
        return []
    article = tokens[i - 1]
    wanted = "an" if color[0] in "aeiou" else "a"
    return [(article.start(), article.end(), _cased(wanted, article.group()))]


def _check_text(description) -> str:
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"`description` must be a non-empty string, got {shown(description)}")
    return " ".join(description.split())


def _color_tokens(tokens: list[re.Match]) -> list[int]:
    return [i for i, token in enumerate(tokens) if token.group().lower() in _COLOR_WORDS]


def normalize(description: str) -> str:
    """`description` with single spaces, *grey* as *gray* and articles agreeing (rules 1-2).

    Raises
    ------
    ValueError
        If `description` is not a non-empty string.

    Examples
    --------
    >>> normalize("A orange cat on a  grey mat")
    'An orange cat on a gray mat'
    """
    text = _check_text(description)
    tokens = _tokens(text)
    edits = []
    for i in _color_tokens(tokens):
        word = tokens[i].group()
        if word.lower() in SPELLINGS:
            edits.append((tokens[i].start(), tokens[i].end(), _cased(SPELLINGS[word.lower()], word)))
        if word.lower() != "orange" or not _is_fruit(tokens, i):
            edits += _article_edit(tokens, i, SPELLINGS.get(word.lower(), word.lower()))
    return _apply(text, edits)


def color_mentions(description: str) -> tuple[Mention, ...]:
    """The color mentions of a description, after `normalize` (rule 4 applied).

    Returns
    -------
    tuple of Mention
        In text order; spans index ``normalize(description)``.

    Raises
    ------
    RefusedDescription
        If one object is given two colors (rule 3).
    """
    text = normalize(description)
    tokens = _tokens(text)
    # The fruit is no color (rule 4) before the two-colors check: "a green orange" was refused
    # as giving one object two colors (outside probe 220).
    found = [i for i in _color_tokens(tokens) if not (_word(tokens, i) == "orange" and _is_fruit(tokens, i))]
    for a, b in zip(found, found[1:]):
        between = {_word(tokens, k) for k in range(a + 1, b)}
        if between <= _JOINERS:
            raise RefusedDescription(
                f"`description` gives one object two colors ({text[tokens[a].start() : tokens[b].end()]!r}): {text!r}"
            )
    return tuple(
        Mention(tokens[i].start(), tokens[i].end(), tokens[i].group().lower(), _word(tokens, i + 1))
        for i in found
    )


def _replace(text: str, mentions: dict[Mention, str]) -> str:
    """`text` with each mention's word replaced by a term, articles fixed."""
    tokens = _tokens(text)
    starts = {token.start(): i for i, token in enumerate(tokens)}
    edits = []
    for mention, term in mentions.items():
        i = starts[mention.start]
        edits.append((mention.start, mention.end, _cased(term, tokens[i].group())))
        edits += _article_edit(tokens, i, term)
    return _apply(text, edits)


def replacement_foils(description: str) -> list[Foil]:
    """Ten foils per color mention: the mention replaced by each other basic term.

    Raises
    ------
    RefusedDescription
        If the description has no color mention or gives one object two colors.
    """
    text, mentions = _probe_text(description)
    return [
        Foil(_replace(text, {m: term}), "replacement", m.term, term)
        for m in mentions
        for term in BASIC_TERMS
        if term != m.term
    ]


def swap_foil(description: str) -> Foil | None:
    """The swap foil of a description with exactly two color mentions of different terms.

    Returns
    -------
    Foil or None
        None when the description has one mention, more than two, or two of one term.

    Raises
    ------
    RefusedDescription
        If the description has no color mention or gives one object two colors.
    """
    text, mentions = _probe_text(description)
    if len(mentions) != 2 or mentions[0].term == mentions[1].term:
        return None
    first, second = mentions
    return Foil(_replace(text, {first: second.term, second: first.term}), "swap", first.term, second.term)


def foils(description: str) -> list[Foil]:
    """All foils of a description: its replacement foils, then its swap foil if it has one."""
    swap = swap_foil(description)
    return replacement_foils(description) + ([swap] if swap else [])


def _probe_text(description: str) -> tuple[str, tuple[Mention, ...]]:
    mentions = color_mentions(description)
    if not mentions:
        raise RefusedDescription(f"`description` mentions none of the basic color terms: {description!r}")
    return normalize(description), mentions
