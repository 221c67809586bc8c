"""The extract stage and a damaged pixel summary (a real run's files and rows; no models)."""

import io

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import storage
from evaluation.__main__ import main
from evaluation.pipeline import runs
from evaluation.pipeline.stages import PixelSummaryError, read_pixels
from tests.research_data import store_segmented_run

RED = (200, 30, 30)
WHAT_TO_DO = (
    "put the file back from a copy of the data folder, or make the run again under a new name: the "
    "segment stage wrote it, and `python -m evaluation segment --run grid` skips an item already segmented"
)


@pytest.fixture
def grid(tmp_path):
    """A segmented and extracted run ``grid`` of one cell, two images: the database file, the
    data folder and the run's items."""
    db = storage.open_db(tmp_path / "db.sqlite")
    storage.ensure_schema(db)
    store_segmented_run(db, tmp_path / "data", "grid", {("m", "apple", "natural", 5.0): [RED, RED]})
    items = runs.items(db, "grid")
    db.close()
    return tmp_path / "db.sqlite", tmp_path / "data", items


def _distributions(db) -> list[dict]:
    """The stored distributions of the run, each P_M as a list (comparable with ``==``)."""
    return [{**row, "p": row["p"].tolist()} for row in runs.model_distributions(db)]


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((4, 3), np.uint8))
    return buffer.getvalue()


def test_extract_refuses_a_damaged_pixel_summary_naming_the_file_the_item_and_what_to_do(grid, capsys):
    """It said numpy's own words ("load it unsafely using allow_pickle="), naming neither."""
    db_path, data_dir, items = grid
    with storage.open_db(db_path) as db:
        before = _distributions(db)
    damaged = items[1]
    (data_dir / damaged["summary_path"]).write_text("not a pixel summary\n")
    argv = ["extract", "--run", "grid", "--force", "--db", str(db_path), "--data-dir", str(data_dir)]
    assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # not the bar
    assert errors == [
        "python -m evaluation extract: error: runs/grid/pixels/m-apple-natural-5.0-1.npz: the pixel "
        f"summary of item {damaged['id']} of run 'grid' (m, apple, natural, cfg 5, sample 1) cannot be "
        f"read (it is not a readable .npz archive); {WHAT_TO_DO}"
    ]
    with storage.open_db(db_path) as db:
        assert _distributions(db) == before


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "it is not a readable .npz archive"),
        (b"PK\x03\x04 cut short", "it is not a readable .npz archive"),
        (_npz(pixels=np.zeros((4, 3), np.uint8))[:-40], "it is not a readable .npz archive"),
        (_npy(), "it is not a readable .npz archive"),
        (_npz(n_pixels=np.int64(4)), "it holds no `pixels` array"),
    ],
    ids=["empty", "zip-header-only", "truncated", "bare-npy", "no-pixels"],
)
def test_every_kind_of_damage_is_one_pixel_summary_error(grid, content, why):
    _, data_dir, items = grid
    item = items[0]
    assert_array_equal(np.unique(read_pixels(data_dir, item), axis=0), [RED])
    (data_dir / item["summary_path"]).write_bytes(content)
    with pytest.raises(PixelSummaryError) as refused:
        read_pixels(data_dir, item)
    assert str(refused.value) == (
        f"runs/grid/pixels/m-apple-natural-5.0-0.npz: the pixel summary of item {item['id']} of run "
        f"'grid' (m, apple, natural, cfg 5, sample 0) cannot be read ({why}); {WHAT_TO_DO}"
    )


def test_a_lost_file_is_made_again_in_the_batch_an_uninterrupted_stage_made_it_in(tmp_path):
    """On some CPUs an image made alone differs from the same image made beside its
    batch-mate (this project's CI machine, 2026-12-03): the batch is what was made, cut as
    the stage cuts its work, in grid order (models, then guidance scales)."""
    from evaluation.pipeline.stages import original_batches

    db = storage.open_db(tmp_path / "db.sqlite")
    storage.ensure_schema(db)
    cells = [("b", 5.0), ("a", 7.5), ("a", 5.0)]
    items = [
        {"model": m, "concept": "apple", "noun": "apple", "style": "natural", "cfg": cfg}
        | {"sample": i, "seed": i, "prompt": "an apple"}
        for m, cfg in cells
        for i in range(3)
    ]
    runs.create_run(db, "r", items, {"test": "r"})
    ids = {(r["model"], r["cfg"], r["sample"]): r["id"] for r in runs.items(db, "r")}

    def batches_of(*keys, stage="generate"):
        made = original_batches(db, "r", stage, {ids[k] for k in keys}, 2)
        return [[(i["model"], i["cfg"], i["sample"]) for i in batch] for batch in made]

    assert batches_of(("a", 5.0, 1)) == [[("a", 5.0, 0), ("a", 5.0, 1)]]
    assert batches_of(("a", 5.0, 2), ("b", 5.0, 0)) == [[("a", 5.0, 2)], [("b", 5.0, 0), ("b", 5.0, 1)]]
    assert original_batches(db, "r", "generate", set(), 2) == []
    # The segment stage took the images there were: none here
    assert batches_of(("a", 5.0, 1), stage="segment") == []
    db.close()
