import datetime as dt

import numpy as np
import pytest
from numpy.testing import assert_allclose
from skimage.color import deltaE_ciede2000, rgb2lab

from annotation import assignment, overview
from annotation.coloring.store import (
    concept_colorings,
    get_coloring,
    load_pixels,
    prepare_coloring,
    set_status,
    store_coloring,
)
from annotation.concepts import sync_concepts
from annotation.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from annotation.files import resolve
from annotation.qc.review import request_recolor
from evaluation.color import extraction
from evaluation.color.palette import load_uw71
from storage import human as human_rows
from storage import iso
from tests.qc_data import ADMIN, add_coloring, add_handmade, hex_rgb, one_hot, painted, people

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def store(db, tmp_path):
    sync_concepts(db)
    return db, tmp_path / "data"


def _a_sketch(db):
    """A selected sketch of apple: what a coloring task is reserved on."""
    db["sketches"].insert(
        {
            "base": "apple",
            "path": "sketches/apple.png",
            "sha256": "0" * 64,
            "source": "test",
            "selected": 1,
            "created": iso(T0),
        }
    )


def _tables(db):
    return {t: list(db[t].rows) for t in ("colorings", "coloring_distributions", "tasks", "audit")}


def test_a_coloring_in_a_palette_color_has_all_its_mass_in_that_bin(store):
    db, data = store
    (designer,) = people(db, 1, "designer")
    palette = load_uw71()
    coloring_id = add_coloring(db, data, designer, "apple", hex_rgb(palette.hex[0]))
    row = get_coloring(db, coloring_id)
    assert_allclose(row["p"], one_hot(0), atol=1e-12)
    assert (row["round"], row["status"], row["practice"]) == (1, "submitted", 0)
    image, mask = load_pixels(data, row)
    expected_image, expected_mask = painted(hex_rgb(palette.hex[0]))
    np.testing.assert_array_equal(image, expected_image)
    np.testing.assert_array_equal(mask, expected_mask)
    assert resolve(data, row["image_path"]).is_file()


def test_the_stored_distribution_is_the_extraction_of_the_painted_pixels_only(store):
    db, data = store
    (designer,) = people(db, 1, "designer")
    image, mask = painted((200, 30, 40), size=40)
    image[10:20, 10:30] = (20, 120, 220)
    image[:, :2] = (255, 255, 0)  # outside the mask: must not count
    mask[:, :2] = False
    coloring_id = store_coloring(db, data, designer, "apple", image, mask, seconds_spent=12.5)
    expected = extraction.image_distribution(image, mask).p
    assert_allclose(get_coloring(db, coloring_id)["p"], expected, rtol=1e-12)
    assert get_coloring(db, coloring_id)["seconds_spent"] == 12.5


@pytest.mark.parametrize(
    "change, message",
    [
        ({"painted_mask": np.zeros((24, 24), dtype=bool)}, "no painted pixel"),
        ({"painted_mask": np.ones((24, 24), dtype=np.uint8)}, "`painted_mask` must be bool"),
        ({"color_image": np.zeros((24, 24), dtype=np.uint8)}, "`color_image` must be uint8"),
        ({"seconds_spent": -1.0}, "`seconds_spent`"),
        ({"concept_key": "no such concept"}, "unknown concept"),
        ({"round": 2}, "`round` must be 1"),
    ],
)
def test_bad_coloring_input_is_refused_and_nothing_is_written(store, change, message):
    db, data = store
    (designer,) = people(db, 1, "designer")
    image, mask = painted((10, 200, 10))
    arguments = {
        "concept_key": "apple",
        "color_image": image,
        "painted_mask": mask,
        "seconds_spent": 5.0,
        **change,
    }
    before = _tables(db)
    with pytest.raises((InvalidInput, NotFound), match=message):
        store_coloring(db, data, designer, **arguments)
    assert _tables(db) == before


def test_a_reserved_task_is_completed_by_storing_its_coloring(store):
    db, data = store
    (designer,) = people(db, 1, "designer")
    _a_sketch(db)
    tasks = assignment.reserve(db, "coloring", designer, np.random.default_rng(0), 1)
    task = tasks[0]
    coloring_id = add_coloring(db, data, designer, task.concept_key, (90, 60, 30), task_id=task.id)
    assert db["tasks"].get(task.id)["status"] == "submitted"
    assert db["tasks"].get(task.id)["result_id"] == coloring_id
    other = "banana" if task.concept_key != "banana" else "apple"
    with pytest.raises(InvalidInput, match="not a coloring of"):
        add_coloring(db, data, designer, other, (90, 60, 30), task_id=task.id)


def test_a_second_submission_refused_inside_its_transaction_leaves_no_file(store):
    """An outside tester's two sessions of one designer submitted one task at the same moment:
    both passed the checks made before writing, the second was refused in its transaction
    ("already submitted"), and its image and mask stayed in the data folder, named by no row."""
    db, data = store
    (designer,) = people(db, 1, "designer")
    # A practice task, whose checks before writing pass for the second submission (a main
    # task's quota check reads the first's row; two at the very same moment both pass it).
    [task] = assignment.reserve_practice(db, designer, ("apple",))  # read by both sessions
    options = {"seconds_spent": 3.0, "task": task, "practice": True}
    first = store_coloring(db, data, designer, "apple", *painted((90, 60, 30)), **options)
    kept = {get_coloring(db, first)[k] for k in ("image_path", "mask_path")}
    files = sorted(p.relative_to(data).as_posix() for p in (data / "colorings").rglob("*.png"))
    assert sorted(kept) == files
    for color in ((20, 120, 220), (90, 60, 30)):  # other bytes; then the very bytes of the first
        with pytest.raises(Conflict, match="already submitted"):
            store_coloring(db, data, designer, "apple", *painted(color), **options)
        assert sorted(p.relative_to(data).as_posix() for p in (data / "colorings").rglob("*.png")) == files
    assert db["colorings"].count == 1 and all(resolve(data, path).is_file() for path in kept)


def test_a_recolor_is_the_next_round_and_the_designer_counts_once_towards_the_quota(store):
    db, data = store
    designers = people(db, 6, "designer")
    db["sketches"].insert(
        {
            "base": "apple",
            "path": "s.png",
            "sha256": "0" * 64,
            "source": "test",
            "selected": 1,
            "created": iso(T0),
        }
    )
    first = [add_coloring(db, data, d, "rotten apple", (120, 80, 20)) for d in designers[:4]]
    task_id = request_recolor(db, ADMIN, first[0], "Rotten, not ripe: try browner tones.", now=T0)
    assert get_coloring(db, first[0])["status"] == "recolor_requested"
    figures = overview.coverage(db, 5)
    assert (figures["colorings_by_status"]["recolor_requested"], figures["replaced_rounds"]) == (1, 0)
    held = assignment.open_tasks(db, "coloring", designers[0], now=T0)
    assert [(t.id, t.concept_key, t.coloring_id) for t in held] == [(task_id, "rotten apple", first[0])]
    second = add_coloring(
        db, data, designers[0], "rotten apple", (90, 60, 20), task_id=task_id, now=T0 + dt.timedelta(hours=1)
    )
    assert get_coloring(db, second)["round"] == 2
    assert db["tasks"].get(task_id)["status"] == "submitted"
    rounds = [(r["annotator_id"], r["round"], r["status"]) for r in concept_colorings(db, "rotten apple")]
    assert rounds[:2] == [(designers[0], 1, "recolor_requested"), (designers[0], 2, "submitted")]
    figures = overview.coverage(db, 5)
    assert figures["histogram"][4] == 1
    # The redone round is no longer a pending recolor request: it is counted as replaced.
    assert figures["colorings_by_status"]["recolor_requested"] == 0
    assert (figures["colorings_by_status"]["submitted"], figures["replaced_rounds"]) == (4, 1)
    rng = np.random.default_rng(1)
    offered = assignment.reserve(db, "coloring", designers[4], rng, 50)
    fifth = next(t for t in offered if t.concept_key == "rotten apple")
    last = add_coloring(db, data, designers[4], "rotten apple", (100, 70, 20), task_id=fifth.id)
    assert overview.coverage(db, 5)["histogram"][5] == 1
    offered = assignment.reserve(db, "coloring", designers[5], rng, 50)
    assert "rotten apple" not in {t.concept_key for t in offered}
    truth = human_rows.counted_colorings(db, "rotten apple")
    assert [r["id"] for r in truth] == sorted([second, *first[1:], last])


def test_a_recolor_task_cannot_be_used_twice_or_by_someone_else(store):
    db, data = store
    designers = people(db, 2, "designer")
    coloring_id = add_coloring(db, data, designers[0], "apple", (200, 0, 0))
    task_id = request_recolor(db, ADMIN, coloring_id, "again please", now=T0)
    with pytest.raises(PermissionDenied):
        add_coloring(db, data, designers[1], "apple", (150, 0, 0), task_id=task_id, now=T0)
    add_coloring(db, data, designers[0], "apple", (150, 0, 0), task_id=task_id, now=T0)
    with pytest.raises(Conflict, match="submitted"):
        add_coloring(db, data, designers[0], "apple", (150, 0, 0), task_id=task_id, now=T0)


def _stored_p_h(db, concept):
    return human_rows.read(db, human_rows.DESIGNERS, [concept]).get(concept)


def test_stored_human_distribution_rests_on_the_latest_standing_round_of_each_designer(store):
    db, data = store
    designers = people(db, 3, "designer")
    palette = load_uw71()
    red, blue, grey = (hex_rgb(palette.hex[i]) for i in (0, 50, 26))
    ids = [add_coloring(db, data, d, "apple", rgb) for d, rgb in zip(designers, (red, blue, grey))]
    add_handmade(db, data, designers[0], "apple", one_hot(5), practice=True)
    truth = _stored_p_h(db, "apple")
    assert (truth.n_colorings, truth.coloring_ids) == (3, tuple(ids))
    assert_allclose(truth.p[[0, 50, 26]], [1 / 3] * 3, rtol=1e-12)
    set_status(db, get_coloring(db, ids[2]), "excluded")
    truth = _stored_p_h(db, "apple")
    assert truth.n_colorings == 2 and truth.p[26] == 0.0
    assert _stored_p_h(db, "banana") is None
    with pytest.raises(InvalidInput, match="`status` must be one of"):
        set_status(db, get_coloring(db, ids[0]), "lost")
    assert _stored_p_h(db, "apple").coloring_ids == tuple(ids[:2])


def test_a_submission_does_not_check_its_extracted_distribution_again(store, monkeypatch):
    from annotation.coloring import store as coloring_store
    from storage.distributions import check_distribution

    db, data = store
    (designer,) = people(db, 1, "designer")
    image, mask = painted((200, 30, 40), size=40)
    image[10:20, 10:30] = (20, 120, 220)
    prepared = coloring_store.prepare_coloring(image, mask)
    calls = []
    monkeypatch.setattr(
        coloring_store, "check_distribution", lambda p: calls.append(p) or check_distribution(p)
    )
    coloring_id = coloring_store.store_prepared(db, data, designer, "apple", prepared, seconds_spent=3.0)
    assert calls == []  # checked once where it is stored (`storage.distributions.encode`)
    row = get_coloring(db, coloring_id)
    np.testing.assert_array_equal(row["p"], check_distribution(prepared.p))
    again = coloring_store.record_coloring(
        db,
        coloring_store.StoredFile(row["image_path"], row["image_sha256"]),
        coloring_store.StoredFile(row["mask_path"], row["mask_sha256"]),
        prepared.p,
        prepared.sample,
        annotator_id=designer,
        concept_key="apple",
    )
    assert len(calls) == 1  # the public edge checks what it is given
    assert get_coloring(db, again)["p"].tolist() == row["p"].tolist()


MERGED_UW71_PAIRS = [
    ("#b8509e", "#db1f9d"),
    ("#c34f74", "#e31b73"),
    ("#d0b85a", "#d5b811"),
    ("#f7db7c", "#fcdb42"),
]


def _two_color_share(first: str, second: str) -> dict[str, float]:
    """The stored distribution's nonzero bins of a coloring painted 60 % `first`, 40 % `second`."""
    palette = load_uw71()
    image = np.zeros((20, 20, 3), np.uint8)
    image[:12], image[12:] = hex_rgb(first), hex_rgb(second)
    p = prepare_coloring(image, np.ones((20, 20), bool)).p
    return {palette.hex[i]: round(float(p[i]), 6) for i in np.flatnonzero(p)}


def test_two_palette_colors_painted_on_purpose_are_kept_apart_unless_the_paper_merges_them():
    """§3.2's "Refined Merging" combines colors indistinguishable to the eye (ΔE00 <= 7, Appendix
    C.3): of the UW-71 colors, four pairs are that close (skimage's CIEDE2000, not ours), as
    README and docs/research.md list; a coloring painted in both of such a pair is counted in
    the one covering more (an outside designer met #f7db7c merged into #fcdb42). Every other
    color, painted beside its nearest neighbour over 7, keeps its 40 %."""
    palette = load_uw71()
    lab = rgb2lab(np.array([hex_rgb(h) for h in palette.hex], np.uint8)[None])[0]
    distance = deltaE_ciede2000(lab[:, None, :], lab[None, :, :])
    close = {(palette.hex[i], palette.hex[j]) for i, j in zip(*np.triu_indices(71, 1)) if distance[i, j] <= 7}
    assert close == set(MERGED_UW71_PAIRS)  # the pairs README and docs/research.md name
    for a, b in close:
        assert _two_color_share(a, b) == {a: 1.0} and _two_color_share(b, a) == {b: 1.0}
    np.fill_diagonal(distance, np.inf)
    for i in range(71):
        j = int(np.argmin(np.where(distance[i] > 7, distance[i], np.inf)))
        assert _two_color_share(palette.hex[i], palette.hex[j]) == {palette.hex[i]: 0.6, palette.hex[j]: 0.4}
