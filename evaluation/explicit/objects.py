"""The 100 objects of the explicit-color mode, their semantic category and negative labels.

Read from ``assets/gencolorbench/objects.csv`` (object and dataset category) and
``obj_neg.csv`` (the GroundingDINO captions of each object's parts that are not its color:
a car's windows, wheels, lights...). This module is the one reader of both files.

The seven categories are the paper's (§3.3), named from the file's dataset category without
its source prefix (``COCO_`` / ``ImageNet_``) and with its spelling mended
(``cloths_Accesorries`` -> clothing and accessories). The two files disagree on the category
of eight objects (``lipstick`` is household in one, clothing in the other); ``objects.csv``
decides.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from evaluation.color.systems import TABLES
from storage.shown import shown

CATEGORIES = {
    "fruit_veg": "fruits and vegetables",
    "tools_misc": "tools and miscellaneous",
    "vehicle": "vehicles",
    "animals": "animals",
    "cloths_accessories": "clothing and accessories",
    "cloths_accesorries": "clothing and accessories",
    "furniture_household": "furniture and household",
    "sports_toys": "sports and toys",
}


@dataclass(frozen=True)
class ExplicitObject:
    """One object of the benchmark.

    Attributes
    ----------
    name : str
        As it reads in a prompt and in the detector's caption: ``"car"``, ``"T-shirt"``.
    category : str
        One of the seven values of :data:`CATEGORIES`.
    source : str
        ``"COCO"`` or ``"ImageNet"``.
    negatives : tuple of str
        Captions of the parts to subtract from its mask (may be empty).
    """

    name: str
    category: str
    source: str
    negatives: tuple[str, ...]


def _read(name: str) -> list[dict[str, str]]:
    with open(TABLES / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@functools.cache
def load_objects() -> tuple[ExplicitObject, ...]:
    """All objects in file order, read once per process."""
    negatives = {
        row["Class_Name"]: tuple(part.strip() for part in row["Negative_Labels"].split(".") if part.strip())
        for row in _read("obj_neg.csv")
    }
    objects = []
    for row in _read("objects.csv"):
        source, _, kind = row["Dataset_Category"].partition("_")
        objects.append(
            ExplicitObject(
                name=row["Class_Name"],
                category=CATEGORIES[kind.lower()],
                source=source,
                negatives=negatives.get(row["Class_Name"], ()),
            )
        )
    return tuple(objects)


def object_named(name: str) -> ExplicitObject:
    """The object called ``name`` (exact).

    Raises
    ------
    ValueError
        If there is no such object.
    """
    for candidate in load_objects():
        if candidate.name == name:
            return candidate
    raise ValueError(
        f"`object` must be one of the {len(load_objects())} benchmark objects, got {shown(name)}"
    )
