"""Keeping the designers' P_H(x|c) current, and checking it against the images.

The rows, the sources and the rule for which colorings count live in `storage.human`;
this module computes the designers' rows. Each coloring keeps its sampled painted pixels
(the extraction's step 1, `evaluation.color.extraction.image_pixels`) in ``coloring_samples``
when it is stored, so `refresh` recomputes a concept's P_H from a few kilobytes per
coloring, without decoding any PNG. Every change to which colorings count (submission,
acceptance, exclusion, reinstatement, a recolor request, a new round) calls `refresh` in
its own transaction. `check` recomputes everything from the image files and reports
every stored row that differs; `backfill` brings a database from older code up to date.
Both read a coloring's files with `load_pixels`, which lives here so that
`annotation.coloring.store` (which calls `refresh`) and this module import in one direction.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils

from annotation.files import decode_image, resolve
from evaluation.color import extraction
from storage import human as rows
from storage import select, transaction, upsert_row

#: Largest difference between a stored and a recomputed P_H entry that `check` accepts.
CHECK_TOLERANCE = 1e-9


def sample_pixels(color_image: np.ndarray, painted_mask: np.ndarray) -> np.ndarray:
    """A coloring's sampled painted pixels: shape (N, 3) uint8 sRGB, N <= 100²."""
    return extraction.image_pixels(color_image, painted_mask)


def store_sample(db: sqlite_utils.Database, coloring_id: int, pixels: np.ndarray) -> None:
    """Keep `pixels` (from `sample_pixels`) for `coloring_id`, zlib-compressed."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    upsert_row(
        db,
        "coloring_samples",
        {
            "coloring_id": int(coloring_id),
            "n_pixels": len(pixels),
            "pixels": zlib.compress(pixels.tobytes(), 6),
        },
        pk=("coloring_id",),
    )


def samples(db: sqlite_utils.Database, coloring_ids: list[int]) -> dict[int, np.ndarray]:
    """The stored pixel samples of `coloring_ids`: id -> (N, 3) uint8 sRGB (missing ids absent)."""
    marks = ", ".join("?" * len(coloring_ids))
    found = select(db, f"select * from coloring_samples where coloring_id in ({marks})", coloring_ids)
    return {
        r["coloring_id"]: np.frombuffer(zlib.decompress(r["pixels"]), dtype=np.uint8).reshape(
            r["n_pixels"], 3
        )
        for r in found
    }


def refresh(db: sqlite_utils.Database, concept_key: str) -> rows.HumanDistribution | None:
    """Recompute and store the designers' P_H of `concept_key` from its counted colorings.

    Runs in the caller's transaction when there is one (it nests), so the stored P_H
    changes together with the change that caused it. A concept with no counted coloring
    has no row.

    Returns
    -------
    storage.human.HumanDistribution or None
        What is now stored.

    Raises
    ------
    LookupError
        If a counted coloring has no stored sample (run `backfill` first).
    """
    counted = rows.counted_colorings(db, concept_key)
    ids = [r["id"] for r in counted]
    with transaction(db):
        if not ids:
            rows.write_designers(db, concept_key, None)
            return None
        samples_ = samples(db, ids)
        missing = [i for i in ids if i not in samples_]
        if missing:
            raise LookupError(
                f"colorings {missing} of {concept_key!r} have no stored pixel "
                "sample; run `python -m annotation check-distributions "
                "--repair`"
            )
        result = extraction.distribution_from_pixels([samples_[i] for i in ids])
        rows.write_designers(db, concept_key, result.p, ids, result.groups, extraction.METHOD)
    return rows.read(db, rows.DESIGNERS, [concept_key])[concept_key]


def load_pixels(data_dir: str | Path, coloring: dict) -> tuple[np.ndarray, np.ndarray]:
    """A stored coloring's image, shape (H, W, 3) uint8 sRGB, and painted mask (H, W) bool.

    A coloring stored without a mask counts every non-white pixel as painted.
    """
    image = np.asarray(
        decode_image(resolve(data_dir, coloring["image_path"]), name=f"coloring {coloring['id']}").convert(
            "RGB"
        )
    )
    if coloring["mask_path"]:
        mask = np.asarray(
            decode_image(
                resolve(data_dir, coloring["mask_path"]), name=f"mask of coloring {coloring['id']}"
            ).convert("L")
        )
        return image, mask > 127
    return image, np.any(image < 250, axis=-1)


@dataclass(frozen=True)
class Difference:
    """One stored P_H that differs from what the images give."""

    concept: str
    problem: str


def check(db: sqlite_utils.Database, data_dir: str | Path, *, repair: bool = False) -> list[Difference]:
    """Recompute every designers' P_H from the coloring images and compare with the store.

    Parameters
    ----------
    data_dir : str or Path
        Where the coloring images are stored.
    repair : bool
        Also rewrite each coloring's sample and each concept's row from the images
        (used to bring a database from older code up to date).

    Returns
    -------
    list of Difference
        One per concept whose stored row is missing, stale, different by more than
        `CHECK_TOLERANCE`, or present without any counted coloring; empty when all agree.
    """
    counted = rows.counted_colorings(db)
    by_concept: dict[str, list[dict]] = {}
    for coloring in counted:
        by_concept.setdefault(coloring["concept_key"], []).append(coloring)
    stored = rows.read(db, rows.DESIGNERS)
    found = []
    for concept in sorted(set(by_concept) | set(stored)):
        colorings = by_concept.get(concept, [])
        expected = _from_images(data_dir, colorings) if colorings else None
        problem = _compare(stored.get(concept), expected, [c["id"] for c in colorings])
        if problem:
            found.append(Difference(concept, problem))
        if repair and (problem or colorings):
            with transaction(db):
                for coloring in colorings:
                    store_sample(db, coloring["id"], sample_pixels(*load_pixels(data_dir, coloring)))
                refresh(db, concept)
    return found


def _from_images(data_dir, colorings: list[dict]) -> np.ndarray:
    pixels = [sample_pixels(*load_pixels(data_dir, c)) for c in colorings]
    return extraction.distribution_from_pixels(pixels).p


def _compare(stored, expected: np.ndarray | None, ids: list[int]) -> str:
    if stored is None and expected is None:
        return ""
    if stored is None:
        return f"no stored P_H, but {len(ids)} counted colorings"
    if expected is None:
        return f"a stored P_H from {stored.n_colorings} colorings, but none counts now"
    if list(stored.coloring_ids) != ids:
        return f"stored from colorings {list(stored.coloring_ids)}, but {ids} count now"
    gap = float(np.max(np.abs(stored.p - expected)))
    if gap > CHECK_TOLERANCE:
        return f"stored P_H differs from the images' by up to {gap:.3g}"
    return ""


def backfill(db: sqlite_utils.Database, data_dir: str | Path) -> int:
    """Give every coloring without a sample one (from its images) and refresh the concepts
    whose stored P_H is missing or stale (other colorings, or computed by another
    `evaluation.color.extraction.METHOD`); called at start-up. Returns concepts refreshed."""
    missing = [
        dict(r)
        for r in db.query(
            "select c.* from colorings c left join coloring_samples s on s.coloring_id = c.id "
            "where s.coloring_id is null"
        )
    ]
    for coloring in missing:
        with transaction(db):
            store_sample(db, coloring["id"], sample_pixels(*load_pixels(data_dir, coloring)))
    counted = rows.counted_colorings(db)
    wanted: dict[str, list[int]] = {}
    for coloring in counted:
        wanted.setdefault(coloring["concept_key"], []).append(coloring["id"])
    stored = {k: (list(v.coloring_ids), v.provenance) for k, v in rows.read(db, rows.DESIGNERS).items()}
    stale = sorted(
        k
        for k in set(wanted) | set(stored)
        if (wanted.get(k), extraction.METHOD) != stored.get(k, (None, None))
    )
    for concept in stale:
        refresh(db, concept)
    return len(stale)
