"""How long a stage start spends looking for a run's lost files (`stages.lost_files`) at
the full study's size.

A run of the paper's size has about 200,000 items (1,281 concepts x models x styles x
scales x samples); every generate and segment stage start (a resume, the app's *Resume*)
checks that each recorded image, mask and pixel summary is still in the data folder.
This builds a run of `items` segmented items with their three files (1-byte stand-ins:
only their presence is read) in a temporary folder, and times the check of each stage.

    python -m bench.bench_lost_files [--items 200000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from evaluation.pipeline.stages import lost_files
from storage import ensure_schema, insert_row, insert_rows, open_db, transaction

STAMP = "2026-12-02T00:00:00.000000Z"


def build(folder: Path, items: int):
    """A database with run ``big`` of `items` segmented items, and their files under `folder`/data."""
    data = folder / "data"
    for part in ("img", "mask"):
        (data / "runs" / "big" / part).mkdir(parents=True)
    db = open_db(folder / "db.sqlite")
    ensure_schema(db)
    with transaction(db):
        insert_row(db, "runs", {"name": "big", "created_at": STAMP, "config": "{}"})
    rows = []
    for i in range(items):
        paths = (f"runs/big/img/{i}.png", f"runs/big/mask/{i}.png", f"runs/big/mask/{i}.npz")
        for path in paths:
            (data / path).write_bytes(b"x")
        rows.append(
            dict(run="big", model="m", concept=f"c{i // 16}", noun="n", style="natural", cfg=5.0,
                 sample=i % 16, seed=i, prompt="p", status="segmented", image_path=paths[0],
                 mask_path=paths[1], summary_path=paths[2], updated_at=STAMP)
        )  # fmt: skip
    with transaction(db):
        insert_rows(db, "run_items", rows)
    return db, data


def run(items: int = 200_000) -> dict:
    """Seconds of `lost_files` per stage over a run of `items` items with none lost."""
    with tempfile.TemporaryDirectory() as folder:
        db, data = build(Path(folder), items)
        seconds = {}
        for stage in ("generate", "segment"):
            start = time.perf_counter()
            lost = lost_files(db, "big", stage, data)
            seconds[stage] = time.perf_counter() - start
            assert lost == [], lost
        db.close()
    return {"items": items, **seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    found = run(parser.parse_args().items)
    print(
        f"{found['items']:,} items: generate stage {found['generate']:.2f} s, "
        f"segment stage {found['segment']:.2f} s"
    )


if __name__ == "__main__":
    main()
