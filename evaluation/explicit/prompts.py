"""Prompts of the explicit-color mode: five tasks, four difficulty levels, seeded sets.

Our own templates, written from the paper's description (§3.1, §3.3, Table 3); none is copied
from GenColorBench's prompt files.

======================  =====  ===============================================================
task                    level  what is asked, what is scored
======================  =====  ===============================================================
``color_name``          1, 2   one object in a named color (a share ``CONTEXTUAL_SHARE`` in a
                               contextual scene): the object
``color_object``        2      the colored object in an uncolored scene (the color must not
                               leak onto the context): the object
``multi_object``        3      two objects, each with its own color (the second outside the
                               first's candidate set and its 3 nearest colors): both objects
``implicit``            4      an object in a color and a second "of the same color": both
                               objects, against the one color
``numeric``             1      one object in a hex code (``#7fffd4``) or an RGB triple
                               (``RGB (127, 255, 212)``), drawn half and half: the object
======================  =====  ===============================================================

An image is correct when every scored object is (the tables count images).

Sets. For each task and color system the colors take turns: round r gives every color of the
system one more object, drawn without repetition from a seeded permutation of the objects;
``per_color`` rounds make the set. Every seeded draw (object order, template, partner object,
second color, notation) is made for the whole grid first, so a set with fewer rounds is a
subset of one with more, and the same seed always gives the same prompts. The full set and the
compact subset are ``PER_COLOR["full"]`` and ``PER_COLOR["compact"]`` rounds: on the default
systems (ISCC-NBS L2, L3 and CSS3/X11: 437 colors) 44,137 and 8,740 prompts, close to the
paper's 44K+ (18K object-focused, 11.5K numeric, 8.7K contextual, 2.2K scene, 4.5K implicit)
and its < 10K compact set. Users choose subsets by task, system, color, object, category and
``per_color``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.color.systems import SYSTEMS, load_system
from evaluation.explicit.candidates import candidate_indices, nearest_indices
from evaluation.explicit.objects import CATEGORIES, ExplicitObject, load_objects
from storage.shown import folded, shown

TASKS = ("color_name", "color_object", "multi_object", "implicit", "numeric")
LEVELS = {1: "object-focused", 2: "contextual", 3: "scene-descriptive", 4: "implicit"}
DEFAULT_SYSTEMS = ("iscc-nbs-l2", "iscc-nbs-l3", "css3")
PER_COLOR = {
    "full": {"color_name": 40, "color_object": 20, "multi_object": 5, "implicit": 10, "numeric": 26},
    "compact": {"color_name": 8, "color_object": 4, "multi_object": 1, "implicit": 2, "numeric": 5},
}
#: Share of color_name prompts drawn from the contextual (level 2) templates.
CONTEXTUAL_SHARE = 0.25
#: Objects that read as a pair in a sentence; the detector still gets the bare noun.
PAIRS = {"jeans", "pants", "socks", "skis"}

OBJECT_FOCUSED = (
    "a {color} {object}",
    "a photo of a {color} {object}",
    "a studio photograph of a {color} {object}",
    "a close-up picture of a {color} {object}",
    "a {object} painted {color}",
    "a {object} in {color}",
    "a {object} that is {color} all over",
    "a {color}-colored {object}",
    "one {color} {object}, centered in the frame",
    "the {object} is {color}",
)
CONTEXTUAL = (
    "a {color} {object} on a wooden table",
    "a {color} {object} in a sunny park",
    "a {color} {object} on a busy city street",
    "a {color} {object} in a living room",
    "a {color} {object} lying on the grass",
    "a {color} {object} by a window",
    "a {color} {object} on a shelf in a shop",
    "a {color} {object} in the snow",
    "a {color} {object} on a sandy beach",
    "a {color} {object} in a garage",
    "a {color} {object} on a kitchen counter",
    "a {color} {object} in a museum display case",
    "a {color} {object} under a tree",
    "a {color} {object} in front of a brick building",
    "a photo of a {color} {object} at a market stall",
    "a {color} {object} on a desk in an office",
)
SCENE = (
    "a {color} {object} and a {color2} {object2} on a wooden table",
    "a {color} {object} next to a {color2} {object2}",
    "a {color} {object} beside a {color2} {object2} in a bright room",
    "a {color2} {object2} behind a {color} {object} in a park",
    "a photo of a {color} {object} and a {color2} {object2} on a shelf",
    "a {color} {object} in front of a {color2} {object2} on a city street",
    "a {color} {object} near a {color2} {object2} on the floor of a workshop",
    "a still life with a {color} {object} and a {color2} {object2}",
    "a {color} {object} and a {color2} {object2} side by side in a garden",
    "a shop window showing a {color} {object} and a {color2} {object2}",
)
IMPLICIT = (
    "a {color} {object} next to a {object2}. The {object2} is the same color as the {object}.",
    "a {color} {object} and a {object2} on a table; the {object2} has the same color as the {object}",
    "a {object2} painted to match the {color} {object} beside it",
    "a {color} {object} in a room, with a {object2} of the same color next to it",
    "a {object2} whose color matches the {color} {object} near it",
    "a {color} {object} and a matching {object2} in the same color, in a park",
    "a {color} {object} on a shelf. Next to it is a {object2} in exactly the same color.",
    "a street scene with a {color} {object}; a {object2} nearby shares its color",
    "a {object2} colored like the {color} {object} in front of it",
    "a photo of a {color} {object} and a {object2}, both in the same color",
)
NUMERIC = (
    "a {object} in the color {color}",
    "a {object} colored {color}",
    "a photo of a {object} whose color is {color}",
    "a {object} painted in {color}",
    "a {object} with the color {color}",
    "a {object} in the exact color {color}",
    "a single {object} in {color}",
    "a studio photo of a {object}, color {color}",
)
TEMPLATES = {1: OBJECT_FOCUSED, 2: CONTEXTUAL, 3: SCENE, 4: IMPLICIT}
_ARTICLE = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")


@dataclass(frozen=True)
class Prompt:
    """One prompt and what its images are scored against.

    Attributes
    ----------
    id : str
        ``"<task>/<system>/<color>/<object>"``, unique within a set (a run's concept key).
    task : str
        One of :data:`TASKS`.
    level : int
        Template level, a key of :data:`LEVELS`.
    system : str
        The color system of the targets (:data:`evaluation.color.systems.SYSTEMS`).
    template : int
        Row of the template in its list (:data:`NUMERIC` for the numeric task, else
        ``TEMPLATES[level]``).
    text : str
        The prompt.
    objects : tuple of str
        The scored objects, as the detector is asked for them.
    targets : tuple of str
        The target color name of each scored object (names of ``system``).
    notation : str
        How the color is written: ``"name"``, ``"hex"`` or ``"rgb"``.
    category : str
        The first object's category.
    """

    id: str
    task: str
    level: int
    system: str
    template: int
    text: str
    objects: tuple[str, ...]
    targets: tuple[str, ...]
    notation: str
    category: str


def _noun(name: str) -> str:
    return f"pair of {name}" if name in PAIRS else name


def _written(system, row: int, notation: str) -> str:
    r, g, b = (int(v) for v in system.rgb[row])
    if notation == "hex":
        return f"#{r:02x}{g:02x}{b:02x}"
    if notation == "rgb":
        return f"RGB ({r}, {g}, {b})"
    return system.names[row]


def _draws(rng: np.random.Generator, colors: int, objects: int) -> dict[str, np.ndarray]:
    """Every random choice of a (task, system) grid, made up front: (colors, objects) arrays."""
    return {
        "order": np.argsort(rng.random((colors, objects)), axis=1, kind="stable"),
        "template": rng.random((colors, objects)),
        "level": rng.random((colors, objects)),
        "partner": rng.random((colors, objects)),
        "color2": rng.random((colors, objects)),
        "notation": rng.random((colors, objects)),
    }


def _pick(options: Sequence, draw: float):
    return options[min(int(draw * len(options)), len(options) - 1)]


def _cell_prompt(task, system, row, first, partners, draw) -> Prompt:
    """The prompt for one (task, system, color, object) cell, given its draws."""
    level = {"color_object": 2, "multi_object": 3, "implicit": 4}.get(task, 1)
    if task == "color_name" and draw["level"] < CONTEXTUAL_SHARE:
        level = 2
    templates = NUMERIC if task == "numeric" else TEMPLATES[level]
    template = min(int(draw["template"] * len(templates)), len(templates) - 1)
    notation = ("hex" if draw["notation"] < 0.5 else "rgb") if task == "numeric" else "name"
    fields = {"color": _written(system, row, notation), "object": _noun(first.name)}
    objects, targets = (first.name,), (system.names[row],)
    if task in ("multi_object", "implicit"):
        second = _pick([o for o in partners if o.name != first.name], draw["partner"])
        fields["object2"] = _noun(second.name)
        color2 = row
        if task == "multi_object":
            taken = set(nearest_indices(system, row).tolist()) | set(candidate_indices(system, row).tolist())
            color2 = _pick([r for r in range(len(system)) if r not in taken], draw["color2"])
            fields["color2"] = system.names[color2]
        objects, targets = (first.name, second.name), (system.names[row], system.names[color2])
    text = _ARTICLE.sub(r"\1n ", templates[template].format(**fields))
    return Prompt(
        id=f"{task}/{system.key}/{system.names[row]}/{first.name}",
        task=task,
        level=level,
        system=system.key,
        template=template,
        text=text,
        objects=objects,
        targets=targets,
        notation=notation,
        category=first.category,
    )


def _choose(label: str, chosen: Sequence[str] | None, allowed: Sequence[str]) -> tuple[str, ...]:
    if chosen is None:
        return tuple(allowed)
    if isinstance(chosen, str):
        raise ValueError(f"`{label}` must be a list, got {shown(chosen)}")
    if not chosen:
        raise ValueError(f"`{label}` must name at least one of {', '.join(allowed)}; none is chosen")
    # Case and spacing aside, as a typed object name ("Teddy bear") reaches the tab.
    canonical = {folded(value): value for value in allowed}
    picked = [canonical.get(folded(value)) for value in chosen]
    unknown = [value for value, known in zip(chosen, picked, strict=True) if known is None]
    if unknown:
        near = difflib.get_close_matches(folded(unknown[0]), list(canonical), n=1, cutoff=0)
        among = (
            ", ".join(allowed)
            if len(allowed) <= 12
            else f"the {len(allowed)} {label} (nearest to {shown(unknown[0])}: {shown(canonical[near[0]])})"
        )
        raise ValueError(
            f"`{label}`: {', '.join(shown(value) for value in unknown[:10])} "
            f"{'is' if len(unknown) == 1 else 'are'} not among {among}"
        )
    return tuple(dict.fromkeys(picked))


def _per_color(size: str | int, task: str) -> int:
    if isinstance(size, str):
        if size not in PER_COLOR:
            raise ValueError(f"`size` must be 'full', 'compact' or a positive integer, got {shown(size)}")
        return PER_COLOR[size][task]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"`size` must be 'full', 'compact' or a positive integer, got {shown(size)}")
    return size


def _color_rows(system, colors: Sequence[str] | None) -> list[int]:
    if colors is None:
        return list(range(len(system)))
    wanted = {folded(name) for name in colors}
    return [row for row, name in enumerate(system.names) if name in wanted]


def build_prompts(
    *,
    tasks: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    size: str | int = "compact",
    seed: int = 0,
    colors: Sequence[str] | None = None,
    objects: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> list[Prompt]:
    """A seeded prompt set: every (task, system), colors taking turns over objects.

    Parameters
    ----------
    tasks : sequence of str, optional
        Subset of :data:`TASKS` (default all five).
    systems : sequence of str, optional
        Color systems (default :data:`DEFAULT_SYSTEMS`; ``iscc-nbs-l1`` may be added).
    size : {"compact", "full"} or int
        ``"compact"`` (default) and ``"full"`` take :data:`PER_COLOR` rounds per task; an
        integer n takes n rounds for every task (at most one per object).
    seed : int
        Seeds every draw; the same arguments give the same prompts in the same order.
    colors : sequence of str, optional
        Only these color names (in whichever chosen systems have them).
    objects, categories : sequence of str, optional
        Only these objects (names in :func:`evaluation.explicit.objects.load_objects`) and/or
        categories (values of :data:`evaluation.explicit.objects.CATEGORIES`).

    Returns
    -------
    list of Prompt
        Ordered by task, system, round, color.

    Raises
    ------
    ValueError
        If a choice names an unknown task, system, object or category, ``size`` is invalid, or
        the choices leave no prompt (no chosen color is in a chosen system, no object left).

    Examples
    --------
    >>> prompts = build_prompts(tasks=["color_name"], systems=["iscc-nbs-l1"], size=1, seed=3)
    >>> len(prompts), prompts[0].task, prompts[0].targets
    (13, 'color_name', ('pink',))
    """
    tasks = _choose("tasks", tasks, TASKS)
    systems = _choose("systems", systems if systems is not None else DEFAULT_SYSTEMS, SYSTEMS)
    every = load_objects()
    names = _choose("objects", objects, [o.name for o in every])
    kinds = _choose("categories", categories, sorted(set(CATEGORIES.values())))
    pool = [o for o in every if o.name in names and o.category in kinds]
    if not pool:
        raise ValueError(f"`objects` and `categories` leave no object: {list(names)} in {list(kinds)}")
    partners: Sequence[ExplicitObject] = pool if len(pool) > 1 else every
    if colors is not None:
        named = {name for key in systems for name in load_system(key).names}
        unknown = [c for c in colors if folded(c) not in named]
        if unknown:  # a mistyped one among known ones was dropped without a word
            # The example is a name of the chosen systems ('dark red' is in none of L2's).
            near = difflib.get_close_matches(str(unknown[0]).lower(), sorted(named), n=1, cutoff=0) or sorted(
                named
            )
            raise ValueError(
                f"`colors`: {', '.join(shown(c) for c in unknown[:10])} "
                f"{'is' if len(unknown) == 1 else 'are'} in none of the systems {list(systems)}: "
                f"check the spelling (names as the systems write them, e.g. {shown(near[0])})"
            )
    prompts = []
    for task in tasks:
        rounds = min(_per_color(size, task), len(pool))
        for system_key in systems:
            system = load_system(system_key)
            rows = _color_rows(system, colors)
            rng = np.random.default_rng([seed, TASKS.index(task), SYSTEMS.index(system_key)])
            draws = _draws(rng, len(system), len(pool))
            for round_ in range(rounds):
                for row in rows:
                    column = draws["order"][row, round_]
                    draw = {key: value[row, column] for key, value in draws.items() if key != "order"}
                    prompts.append(_cell_prompt(task, system, row, pool[column], partners, draw))
    if not prompts:
        raise ValueError("`colors` must name at least one color; none is chosen")
    return prompts
