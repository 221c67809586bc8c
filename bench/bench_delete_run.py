"""How long deleting a run takes (`evaluation.pipeline.removal`) at the sizes that matter.

Two runs: the mistaken Start of outside probe 234, the form's maximum of 1,000,000 items
stored and none generated (rows alone); and a run of the paper's size, `items` segmented
items with their three files each (`bench.bench_lost_files.build`: 1-byte stand-ins).
Each is timed for `removal.footprint` (what the first press of *Delete run* says) and
`removal.delete_run` (the rows in one transaction, then the files).

    python -m bench.bench_delete_run [--items 200000] [--mistaken 1000000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.bench_lost_files import build
from evaluation.pipeline import removal, runs
from storage import ensure_schema, open_db


def _timed(db, run: str, data: Path) -> dict:
    start = time.perf_counter()
    held = removal.footprint(db, run, data)
    middle = time.perf_counter()
    rows, files = removal.delete_run(db, run, data)
    end = time.perf_counter()
    assert rows["run_items"] == held.rows["run_items"]
    assert files.removed == held.files and not any(runs.run_row_counts(db, run).values())
    return {
        "items": rows["run_items"],
        "files": files.removed,
        "footprint": middle - start,
        "delete": end - middle,
    }


def run(items: int = 200_000, mistaken: int = 1_000_000) -> dict:
    """Seconds of the footprint and the deletion of each run."""
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "db.sqlite")
        ensure_schema(db)
        grid = [
            {"model": "m", "concept": f"c{i % 1000}", "noun": "n", "style": "natural", "cfg": 7.5,
             "sample": i // 1000, "seed": i, "prompt": "p"}
            for i in range(mistaken)
        ]  # fmt: skip
        runs.create_run(db, "mistaken", grid, {"bench": "mistaken"})
        found["mistaken"] = _timed(db, "mistaken", Path(folder) / "data")
        db.close()
    with tempfile.TemporaryDirectory() as folder:
        db, data = build(Path(folder), items)
        found["paper"] = _timed(db, "big", data)
        db.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--mistaken", type=int, default=1_000_000)
    options = parser.parse_args()
    for name, figures in run(options.items, options.mistaken).items():
        print(
            f"{name}: {figures['items']:,} items, {figures['files']:,} files: first press (footprint) "
            f"{figures['footprint']:.2f} s, deletion {figures['delete']:.2f} s"
        )


if __name__ == "__main__":
    main()
