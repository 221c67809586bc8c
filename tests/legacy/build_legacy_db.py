"""Build the database fixture `legacy_v3/` with the code of main at 11261c7 (schema 3).

Run once, from a checkout of that commit:  python tests/legacy/build_legacy_db.py OUT
The result is committed under tests/legacy/legacy_v3/ so that later code can prove it
migrates a database made by the code people ran before the storage floor, row by row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from annotation.accounts import create_annotators
from annotation.colorings import store_coloring
from annotation.concepts import sync_concepts
from annotation.db import ensure_schema, open_db
from annotation.review import accept_coloring, request_recolor
from evaluation import runs
from evaluation.reference import UW71_RATINGS_PROVENANCE, UW71_RATINGS_SOURCE, load_reference_csv
from tests.qc_data import ADMIN, painted


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = open_db(out / "colorconcept.sqlite")
    ensure_schema(db)
    sync_concepts(db)
    designers = [a["id"] for a, _ in create_annotators(db, 3, "designer")]
    colors = [(200, 30, 30), (30, 160, 40), (240, 200, 20)]
    ids = []
    for concept in ("apple", "rotten apple", "banana"):
        for designer, rgb in zip(designers, colors):
            image, mask = painted(rgb, size=32)
            ids.append(store_coloring(db, out, designer, concept, image, mask, seconds_spent=42.5))
    accept_coloring(db, ADMIN, ids[0], "fine")
    request_recolor(db, ADMIN, ids[1], "please use a redder green")
    runs.create_run(db, "legacy-run", [
        {"model": "m", "concept": "apple", "noun": "apple", "style": "clipart", "cfg": 7.0,
         "sample": s, "seed": 100 + s, "prompt": "A clip-art cartoon of an apple"} for s in range(2)],
        {"models": ["m"], "concepts": ["apple"]})
    p = np.zeros(71)
    p[[3, 40]] = 0.25, 0.75
    runs.store_model_distribution(db, "legacy-run", "m", "apple", "clipart", 7.0, p, 2, 0,
                                  groups=[{"n": 2}])
    runs.store_reference_distributions(db, UW71_RATINGS_SOURCE, load_reference_csv(),
                                       UW71_RATINGS_PROVENANCE)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
