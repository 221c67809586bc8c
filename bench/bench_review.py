"""Timings of the expert quality-control path on realistic sizes.

Run: ``python -m bench.bench_review [--concepts 4] [--colorings 562]``. Prints seconds per
operation: storing a 1024² coloring (files, extraction, rows), opening the vote queue
(plausibility of five 1024² colorings per concept), a blind vote (reserve + vote in a WAL
file database) and the agreement panel over `--colorings` decided reviews. `run()` returns
the figures (``python -m bench --only review`` puts them in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from annotation.coloring import ground_truth
from annotation.coloring.store import store_coloring
from annotation.concepts import sync_concepts
from annotation.qc import review, votes
from storage import ensure_schema, open_db
from tests.qc_data import ADMIN, actor, add_handmade, one_hot, people


def _coloring(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A sketch-like coloring: four painted regions of random colors, lines left out."""
    image = np.full((size, size, 3), 255, dtype=np.uint8)
    half = size // 2
    for y in (0, half):
        for x in (0, half):
            image[y : y + half, x : x + half] = rng.integers(0, 256, 3)
    mask = np.ones((size, size), dtype=bool)
    mask[half - 2 : half + 2] = mask[:, half - 2 : half + 2] = False
    image[~mask] = 0
    return image, mask


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def bench_colorings(db, data: Path, n_concepts: int, rng: np.random.Generator, *, side: int = 1024) -> dict:
    """Store five designers' colorings of `n_concepts` concepts, open their vote queue and
    recompute one stored P_H(x|c) from its colorings' samples; seconds per operation."""
    designers = people(db, 5, "designer")
    concepts = [r["key"] for r in db["concepts"].rows_where(order_by="key", limit=n_concepts)]
    seconds = []
    for concept in concepts:
        for d in designers:
            took, _ = _timed(store_coloring, db, data, d, concept, *_coloring(rng, side), seconds_spent=60.0)
            seconds.append(took)
    queue_s, opened = _timed(review.open_review_queue, db, ADMIN, top_fraction=1.0)
    truth_s, truth = _timed(ground_truth.refresh, db, concepts[0])
    return {
        "side": side,
        "store_coloring_s": float(np.median(seconds)),
        "stored_colorings": len(seconds),
        "open_review_queue_s": queue_s,
        "opened_reviews": opened,
        "concepts": n_concepts,
        "open_review_queue_s_per_concept": queue_s / n_concepts,
        "human_distribution_s": truth_s,
        "human_distribution_n": truth.n_colorings,
    }


def bench_votes(db, data: Path, n_colorings: int, rng: np.random.Generator) -> dict:
    """Three experts vote through `n_colorings` open reviews; then the agreement panel."""
    designers = people(db, 5, "designer")
    experts = [actor(db, e) for e in people(db, 3, "expert")]
    concepts = [r["key"] for r in db["concepts"].rows_where(order_by="key desc", limit=n_colorings // 5 + 1)]
    ids = [add_handmade(db, data, designers[i % 5], concepts[i // 5], one_hot(0)) for i in range(n_colorings)]
    review.open_reviews(db, ADMIN, ids, reason="bench")
    seconds = []
    for j, expert in enumerate(experts):
        while True:
            took, queue = _timed(votes.vote_queue, db, expert, rng)
            if not queue:
                break
            took_vote, _ = _timed(votes.cast_vote, db, expert, queue[0].task_id, j != 2)
            seconds.append(took + took_vote)
    panel_s, summary = _timed(votes.agreement_panel, db)
    return {
        "vote_ms": float(np.median(seconds)) * 1000,
        "votes": len(seconds),
        "vote_colorings": n_colorings,
        "agreement_panel_s": panel_s,
        "decided_reviews": summary.n_colorings,
    }


def run(concepts: int = 4, colorings: int = 562, *, side: int = 1024, seed: int = 0) -> dict:
    """Every figure of this benchmark, each part on a fresh WAL database in a temporary folder.

    Parameters
    ----------
    concepts : int
        Concepts with five `side`² colorings each (storing, queue, P_H).
    colorings : int
        Colorings that three experts vote on (paper: 562 reviewed).
    side : int
        Side of the stored colorings in pixels.
    seed : int
        Seeds the colorings and the queue order.

    Returns
    -------
    dict
        The union of `bench_colorings` and `bench_votes` (seconds ``*_s``, ``vote_ms``
        milliseconds, counts).
    """
    rng = np.random.default_rng(seed)
    figures = {}
    parts = (
        (lambda db, data: bench_colorings(db, data, concepts, rng, side=side)),
        (lambda db, data: bench_votes(db, data, colorings, rng)),
    )
    for part in parts:
        with tempfile.TemporaryDirectory() as folder:
            db = open_db(Path(folder) / "bench.sqlite")
            try:
                ensure_schema(db)
                sync_concepts(db)
                figures |= part(db, Path(folder) / "data")
            finally:
                db.close()
    return figures


def report(f: dict) -> str:
    """The figures as lines of text."""
    return "\n".join(
        [
            f"store_coloring {f['side']}x{f['side']}: {f['store_coloring_s']:.3f} s median of "
            f"{f['stored_colorings']}",
            f"open_review_queue: {f['open_review_queue_s']:.2f} s for {f['opened_reviews']} colorings "
            f"in {f['concepts']} concepts ({f['open_review_queue_s_per_concept']:.2f} s per concept)",
            f"refresh of a stored P_H from {f['human_distribution_n']} colorings' samples at {f['side']}x{f['side']}: "
            f"{f['human_distribution_s']:.3f} s",
            f"vote_queue + cast_vote: {f['vote_ms']:.1f} ms median of {f['votes']} votes on "
            f"{f['vote_colorings']} colorings",
            f"agreement_panel over {f['decided_reviews']} decided reviews: {f['agreement_panel_s']:.3f} s",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concepts", type=int, default=4)
    parser.add_argument("--colorings", type=int, default=562)
    args = parser.parse_args()
    print(report(run(args.concepts, args.colorings)))


if __name__ == "__main__":
    main()
