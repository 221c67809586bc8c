"""Timings of the expert quality-control path on realistic sizes.

Run: ``python -m bench.bench_review [--concepts 4] [--colorings 562]``. Prints seconds per
operation: storing a 1024² coloring (files, extraction, rows), opening the vote queue
(plausibility of five 1024² colorings per concept), a blind vote (reserve + vote in a WAL
file database) and the agreement panel over `--colorings` decided reviews.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from annotation import review, votes
from annotation.colorings import human_distribution, store_coloring
from annotation.concepts import sync_concepts
from annotation.db import ensure_schema, open_db
from tests.qc_data import ADMIN, actor, add_handmade, one_hot, people


def _coloring(rng: np.random.Generator, size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """A sketch-like coloring: four painted regions of random colors, lines left out."""
    image = np.full((size, size, 3), 255, dtype=np.uint8)
    half = size // 2
    for y in (0, half):
        for x in (0, half):
            image[y:y + half, x:x + half] = rng.integers(0, 256, 3)
    mask = np.ones((size, size), dtype=bool)
    mask[half - 2:half + 2] = mask[:, half - 2:half + 2] = False
    image[~mask] = 0
    return image, mask


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def bench_colorings(db, data: Path, n_concepts: int, rng: np.random.Generator) -> None:
    designers = people(db, 5, "designer")
    concepts = [r["key"] for r in db["concepts"].rows_where(order_by="key", limit=n_concepts)]
    seconds = []
    for concept in concepts:
        for d in designers:
            took, _ = _timed(store_coloring, db, data, d, concept, *_coloring(rng),
                             seconds_spent=60.0)
            seconds.append(took)
    print(f"store_coloring 1024x1024: {np.median(seconds):.3f} s median of {len(seconds)}")
    took, opened = _timed(review.open_review_queue, db, ADMIN, data, top_fraction=1.0)
    print(f"open_review_queue: {took:.2f} s for {opened} colorings in {n_concepts} concepts "
          f"({took / n_concepts:.2f} s per concept)")
    took, truth = _timed(human_distribution, db, data, concepts[0])
    print(f"human_distribution of 5 colorings at 1024x1024: {took:.3f} s (n = {truth.n})")


def bench_votes(db, data: Path, n_colorings: int, rng: np.random.Generator) -> None:
    designers = people(db, 5, "designer")
    experts = [actor(db, e) for e in people(db, 3, "expert")]
    concepts = [r["key"] for r in db["concepts"].rows_where(order_by="key desc",
                                                              limit=n_colorings // 5 + 1)]
    ids = [add_handmade(db, data, designers[i % 5], concepts[i // 5], one_hot(0))
           for i in range(n_colorings)]
    review.open_reviews(db, ADMIN, ids, reason="bench")
    seconds = []
    for j, expert in enumerate(experts):
        while True:
            took, queue = _timed(votes.vote_queue, db, expert, rng)
            if not queue:
                break
            took_vote, _ = _timed(votes.cast_vote, db, expert, queue[0].task_id, j != 2)
            seconds.append(took + took_vote)
    print(f"vote_queue + cast_vote: {np.median(seconds) * 1000:.1f} ms median of "
          f"{len(seconds)} votes on {n_colorings} colorings")
    took, summary = _timed(votes.agreement_panel, db)
    print(f"agreement_panel over {summary.n_colorings} decided reviews: {took:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concepts", type=int, default=4)
    parser.add_argument("--colorings", type=int, default=562)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for part, size in ((bench_colorings, args.concepts), (bench_votes, args.colorings)):
        with tempfile.TemporaryDirectory() as folder:
            db = open_db(Path(folder) / "bench.sqlite")
            ensure_schema(db)
            sync_concepts(db)
            part(db, Path(folder) / "data", size, rng)
            db.close()

if __name__ == "__main__":
    main()
