"""Adjacent and complementary pairs of basic color terms on the RGB color wheel.

The Rainbow probe splits its color replacements into pairs of terms that are *adjacent* on
the RGB color wheel (where a hue may fairly be named either way, *red* / *orange*) and pairs
that are *complementary* (where it may not, *yellow* / *blue*). Its matrix of those pairs is
a figure (its Figure 7), not a table, so the relations are defined here by rule:

* Each chromatic term sits at the HSV hue of its prototype on the RGB wheel (`WHEEL_DEG`):
  red 0°, orange 30°, yellow 60°, green 120°, blue 240°, purple 280°, pink 330°. Brown is
  dark orange: it sits at orange's angle.
* **Adjacent**: neighbours around the wheel (red-orange, orange-yellow, yellow-green,
  green-blue, blue-purple, purple-pink, pink-red); brown is adjacent to orange and to
  orange's neighbours (red, yellow). On the achromatic axis, white-gray and gray-black.
* **Complementary**: chromatic terms at least `COMPLEMENT_DEG` (150°) apart on the wheel
  (yellow-blue, orange-blue, brown-blue, green-purple, green-pink), and the two ends of the
  achromatic axis, white-black. Red has no complement among the eleven: its RGB
  complement, cyan, is not a basic term.
* Every other pair is ``"other"``.
"""

from __future__ import annotations

import itertools

from evaluation.color.naming import BASIC_TERMS
from storage.shown import shown

WHEEL_DEG = {
    "red": 0,
    "orange": 30,
    "brown": 30,
    "yellow": 60,
    "green": 120,
    "blue": 240,
    "purple": 280,
    "pink": 330,
}
COMPLEMENT_DEG = 150
RELATIONS = ("adjacent", "complementary", "other")
ACHROMATIC = ("white", "gray", "black")


def _angle(a: str, b: str) -> int:
    d = abs(WHEEL_DEG[a] - WHEEL_DEG[b]) % 360
    return min(d, 360 - d)


def _adjacent_pairs() -> frozenset[frozenset[str]]:
    circle = sorted({deg: term for term, deg in WHEEL_DEG.items() if term != "brown"}.items())
    terms = [term for _, term in circle]
    pairs = {frozenset(pair) for pair in zip(terms, terms[1:] + terms[:1])}
    pairs |= {frozenset(("brown", t)) for t in ("orange", "red", "yellow")}
    return frozenset(pairs | {frozenset(("white", "gray")), frozenset(("gray", "black"))})


ADJACENT = _adjacent_pairs()
COMPLEMENTARY = frozenset(
    {frozenset((a, b)) for a, b in itertools.combinations(WHEEL_DEG, 2) if _angle(a, b) >= COMPLEMENT_DEG}
    | {frozenset(("white", "black"))}
)


def relation(a: str, b: str) -> str:
    """``"adjacent"``, ``"complementary"`` or ``"other"`` for two different basic terms.

    Raises
    ------
    ValueError
        If a term is not one of `BASIC_TERMS`, or the two are equal.

    Examples
    --------
    >>> relation("red", "orange"), relation("blue", "yellow"), relation("red", "blue")
    ('adjacent', 'complementary', 'other')
    """
    for name, term in (("a", a), ("b", b)):
        if term not in BASIC_TERMS:
            raise ValueError(f"`{name}` must be one of {', '.join(BASIC_TERMS)}; got {shown(term)}")
    if a == b:
        raise ValueError(f"`a` and `b` must differ, got {shown(a)} twice")
    pair = frozenset((a, b))
    return "adjacent" if pair in ADJACENT else "complementary" if pair in COMPLEMENTARY else "other"
