"""Building blocks for the coloring and expert-QC tests: people, actors and colorings."""

from __future__ import annotations

import json

import numpy as np

from annotation.coloring.ground_truth import sample_pixels
from annotation.coloring.store import record_coloring, store_coloring
from annotation.files import store_png
from annotation.people.accounts import Actor, create_annotators

ADMIN = Actor(None, "admin", frozenset({"admin"}))


def people(db, n: int, role: str) -> list[int]:
    """Create `n` annotators with `role`; their ids."""
    return [a["id"] for a, _ in create_annotators(db, n, role)]


def actor(db, annotator_id: int) -> Actor:
    """The `Actor` of an annotator, with the roles stored for them."""
    row = db["annotators"].get(annotator_id)
    return Actor(row["id"], row["pseudonym"], frozenset(json.loads(row["roles"])))


def painted(rgb, size: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """A sketch colored with one sRGB color inside a one-pixel black outline.

    Returns the (size, size, 3) uint8 image and its (size, size) bool painted mask
    (everything inside the outline).
    """
    image = np.zeros((size, size, 3), dtype=np.uint8)
    image[1:-1, 1:-1] = np.asarray(rgb, dtype=np.uint8)
    mask = np.zeros((size, size), dtype=bool)
    mask[1:-1, 1:-1] = True
    return image, mask


def hex_rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))


def add_coloring(db, data_dir, designer: int, concept: str, rgb, **options) -> int:
    """Store a one-color coloring through `store_coloring`; its id."""
    image, mask = painted(rgb)
    return store_coloring(
        db,
        data_dir,
        designer,
        concept,
        image,
        mask,
        seconds_spent=options.pop("seconds_spent", 60.0),
        **options,
    )


def add_handmade(db, data_dir, designer: int, concept: str, p, **options) -> int:
    """Store a coloring whose distribution is the hand-made `p` (71,); its id."""
    image, mask = painted((128, 128, 128), size=4)
    files = store_png(data_dir, image, folder="colorings"), store_png(data_dir, mask, folder="colorings")
    return record_coloring(
        db,
        *files,
        p,
        sample_pixels(image, mask),
        annotator_id=designer,
        concept_key=concept,
        method="hand-made",
        **options,
    )


def one_hot(index: int) -> np.ndarray:
    p = np.zeros(71)
    p[index] = 1.0
    return p
