"""Sketches in the store: the shipped library, imports, generated candidates, the admin tab."""

import hashlib
import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from annotation.assignment import reserve
from annotation.coloring.tasks import work_item
from annotation.concepts import get_concept, sync_concepts
from annotation.errors import InvalidInput, NotFound
from annotation.files import resolve
from annotation.people.accounts import create_annotators
from annotation.sketches import library as store
from annotation.sketches.importing import LONG_SIDE, SKETCH_DIR, load_manifest, load_sketch_png
from app.sketches_admin import _generated, _import_outcome
from evaluation.concepts import load_concepts
from evaluation.models.registry import load_registry
from storage import transaction, update_rows
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.evaluation.models.test_generation import tiny_pipe  # noqa: F401 (fixture)

SHIPPED = {e.concept for e in load_manifest()}
N_BASES = len({c.base for c in load_concepts()})
LINE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">'
    '<rect width="200" height="100" fill="white"/>'
    '<ellipse cx="100" cy="50" rx="80" ry="35" fill="none" stroke="black" '
    'stroke-width="3"/></svg>'
)


@pytest.fixture
def loaded(db, tmp_path):
    sync_concepts(db)
    data = tmp_path / "data"
    store.sync_shipped_sketches(db, data)
    return db, data


def _photo(path, seed=0):
    """A smooth colored picture, like a photo: not line art."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:256, 0:256] / 255.0
    rgb = np.stack([x, y, 1 - x * y], axis=-1) * 200 + rng.normal(0, 10, (256, 256, 3))
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(path)
    return path


def _audit_actions(db):
    return [r["action"] for r in db["audit"].rows_where(order_by="id")]


def test_the_shipped_library_loads_once_each_sketch_selected(loaded, tmp_path):
    db, data = loaded
    rows = list(db["sketches"].rows_where(order_by="id"))
    assert {r["base"] for r in rows} == SHIPPED and len(rows) == len(SHIPPED)
    assert {(r["source"], r["selected"], max(r["width"], r["height"])) for r in rows} == {
        ("shipped", 1, LONG_SIDE)
    }
    for row in rows:
        data_bytes = resolve(data, row["path"]).read_bytes()
        assert hashlib.sha256(data_bytes).hexdigest() == row["sha256"]
        shipped_file = SKETCH_DIR / json.loads(row["meta"])["file"].split("/")[-1]
        assert data_bytes == shipped_file.read_bytes()
    assert store.sync_shipped_sketches(db, data) == 0 and db["sketches"].count == len(SHIPPED)
    missing = store.bases_without_sketch(db)
    assert len(missing) == N_BASES - len(SHIPPED) and not SHIPPED & {m["base"] for m in missing}


def test_a_wiped_data_folder_gets_the_shipped_files_back(loaded):
    db, data = loaded
    apple = store.selected_sketch(db, "apple")
    resolve(data, apple["path"]).unlink()
    assert store.sync_shipped_sketches(db, data) == 0
    np.testing.assert_array_equal(store.load_sketch(data, apple), load_sketch_png(SKETCH_DIR / "apple.png"))


def test_an_imported_svg_is_normalised_and_becomes_the_concepts_sketch(loaded, tmp_path):
    db, data = loaded
    svg = tmp_path / "Bell Pepper.svg"
    svg.write_text(LINE_SVG, encoding="utf-8")
    [result] = store.import_sketches(db, data, [svg], actor="admin")
    assert (result.ok, result.base, result.reason) == (True, "bell pepper", "")
    row = store.selected_sketch(db, "bell pepper")
    assert (row["id"], row["source"], row["width"]) == (result.sketch_id, "imported", LONG_SIDE)
    pixels = store.load_sketch(data, row)
    assert pixels.shape == (row["height"], LONG_SIDE) and pixels.max() == 255 and pixels.min() < 64
    assert "bell pepper" not in {m["base"] for m in store.bases_without_sketch(db)}
    assert _audit_actions(db)[-2:] == ["add_sketch", "select_sketch"]
    [again] = store.import_sketches(db, data, [svg], actor="admin")
    assert (again.sketch_id, again.known, result.known) == (result.sketch_id, True, False)


def test_a_photo_is_refused_with_the_reason_and_nothing_changes(loaded, tmp_path):
    db, data = loaded
    before = store.selected_sketch(db, "lemon")
    count = db["sketches"].count
    results = store.import_sketches(
        db,
        data,
        [
            _photo(tmp_path / "lemon.png"),
            _photo(tmp_path / "not a concept.png"),
            _photo(tmp_path / "lemon.gif"),
        ],
    )
    assert [r.ok for r in results] == [False, False, False]
    assert results[0].reason.startswith("lemon.png: not line art:")
    assert "no base concept is named like this file" in results[1].reason
    assert results[2].reason == "lemon.gif: expected one of .png, .jpg, .jpeg, .webp, .svg, got .gif"
    assert db["sketches"].count == count and store.selected_sketch(db, "lemon") == before


def test_a_folder_imports_each_file_by_its_name(loaded, tmp_path):
    db, data = loaded
    folder = tmp_path / "drawings"
    folder.mkdir()
    (folder / "tulip.svg").write_text(LINE_SVG, encoding="utf-8")
    _photo(folder / "pumpkin.jpg")
    (folder / "notes.txt").write_text("not a sketch", encoding="utf-8")
    results = store.import_sketch_folder(db, data, folder, select=False)
    assert [(r.name, r.base, r.ok) for r in results] == [
        ("pumpkin.jpg", "pumpkin", False),
        ("tulip.svg", "tulip", True),
    ]
    assert store.sketches_of(db, "tulip")[0]["selected"] == 0
    with pytest.raises(InvalidInput, match="must be a folder"):
        store.import_sketch_folder(db, data, folder / "notes.txt")


def test_an_import_names_a_base_concept_not_a_variant(loaded, tmp_path):
    db, data = loaded
    svg = tmp_path / "x.svg"
    svg.write_text(LINE_SVG, encoding="utf-8")
    with pytest.raises(InvalidInput, match="`base` must be a base concept such as 'apple'"):
        store.import_sketches(db, data, [svg], base="rotten apple")
    with pytest.raises(NotFound, match="unknown concept 'applesauce'"):
        store.import_sketches(db, data, [svg], base="applesauce")


def test_selecting_a_sketch_deselects_the_others_of_its_base(loaded, tmp_path):
    db, data = loaded
    shipped = store.selected_sketch(db, "apple")
    svg = tmp_path / "apple.svg"
    svg.write_text(LINE_SVG, encoding="utf-8")
    [result] = store.import_sketches(db, data, [svg], select=False)
    assert store.selected_sketch(db, "apple")["id"] == shipped["id"]
    store.select_sketch(db, result.sketch_id, actor="admin", why="rounder")
    assert [(r["id"], r["selected"]) for r in store.sketches_of(db, "apple")] == [
        (result.sketch_id, 1),
        (shipped["id"], 0),
    ]
    assert store.sync_shipped_sketches(db, data) == 0
    assert store.selected_sketch(db, "apple")["id"] == result.sketch_id
    with pytest.raises(NotFound, match="unknown sketch id 999"):
        store.select_sketch(db, 999)


def test_generated_candidates_that_are_line_art_are_stored_unselected(loaded):
    db, data = loaded
    apple = np.repeat(load_sketch_png(SKETCH_DIR / "apple.png")[..., None], 3, axis=2)
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    candidates = store.store_candidates(
        db, data, "banana", [apple, noise], [11, 12], meta={"prompt": "p", "model": "m"}
    )
    assert [c.seed for c in candidates] == [11, 12]
    assert candidates[1].sketch_id is None and candidates[1].reason.startswith("not line art")
    row = store.get_sketch(db, candidates[0].sketch_id)
    assert (row["base"], row["source"], row["selected"]) == ("banana", "generated", 0)
    # The Sketches tab says in a line what was stored (the captions are cut on the page).
    assert _generated(candidates, "banana") == (
        f"**1 of 2** candidates for **banana** are line art, stored unselected as sketch "
        f"{candidates[0].sketch_id}: choose one under *A concept's sketches* above. "
        "Refused: 1 (not line art; an image opened shows its caption in full)."
    )
    assert json.loads(row["meta"]) == {"prompt": "p", "model": "m", "seed": 11}


def test_five_candidates_from_a_real_pipeline_are_vetted(loaded, tiny_pipe):
    db, data = loaded
    spec = load_registry()["tiny-random"]
    count = db["sketches"].count
    candidates = store.generate_candidates(
        db,
        data,
        "apple",
        tiny_pipe,
        np.random.default_rng(7),
        steps=spec.steps,
        resolution=spec.resolution,
        model=spec.key,
    )
    expected_seeds = np.random.default_rng(7).integers(0, 2**63 - 1, size=5).tolist()
    assert [c.seed for c in candidates] == expected_seeds
    assert {c.image.shape for c in candidates} == {(spec.resolution, spec.resolution, 3)}
    # Random weights draw colored noise: every candidate is refused, none is stored.
    assert all(c.sketch_id is None and c.reason.startswith("not line art") for c in candidates)
    assert db["sketches"].count == count


def test_the_sketches_tab_lists_imports_and_selects_for_the_admin_only(tmp_path):
    config = make_config(tmp_path)
    svg = tmp_path / "tulip.svg"
    svg.write_text(LINE_SVG, encoding="utf-8")
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        summary, missing = client.predict(admin, api_name="/sketches_missing")
        assert summary == f"**{len(SHIPPED)} of {N_BASES}** base concepts have a sketch."
        assert len(missing["data"]) == N_BASES - len(SHIPPED)
        photo = _photo(tmp_path / "rose.png")
        results, files = client.predict(
            admin,
            [handle_file(svg), handle_file(photo)],
            "(from the file names)",
            True,
            api_name="/sketches_import",
        )
        assert files is None  # the upload list is emptied: the next import is of the next files
        assert [r[:2] for r in results["data"]] == [["tulip.svg", "tulip"], ["rose.png", "rose"]]
        assert results["data"][0][2].startswith("imported as sketch ")
        assert results["data"][1][2].startswith("refused: rose.png: not line art")
        gallery, table = client.predict(admin, "rose", api_name="/sketches_list")
        assert [r[1:3] for r in table["data"]] == [["shipped", "yes"]] and len(gallery) == 1
        tulip = int(results["data"][0][2].rsplit(" ", 1)[1])
        # The id is taken as one of the concept on screen: another concept's is refused.
        with pytest.raises(AppError, match=rf"sketch {tulip} is a sketch of 'tulip', not of 'rose'"):
            client.predict(admin, "rose", tulip, "typo", api_name="/sketches_select")
        with pytest.raises(AppError, match="`Base concept` is empty"):
            client.predict(admin, "", tulip, "", api_name="/sketches_select")
        assert [r[1:3] for r in client.predict(admin, "rose", api_name="/sketches_list")[1]["data"]] == [
            ["shipped", "yes"]
        ]
        message, gallery, table = client.predict(
            admin, "tulip", tulip, "clean lines", api_name="/sketches_select"
        )
        assert message == f"Sketch {tulip} is now the sketch of **tulip**."
        # The list shows the choice at once (it kept the old one until Show sketches).
        assert [r[:3] for r in table["data"]] == [[str(tulip), "imported", "yes"]] and len(gallery) == 1
        # Five candidates from the tiny model (random weights draw noise: each is refused, and
        # says so); the concept's sketches show where one is chosen.
        generated, candidates, shown_base, gallery, table = client.predict(
            admin, "tiny-random", "tulip", api_name="/sketches_generate"
        )
        assert generated == (
            "**None of the 5** candidates for **tulip** is line art; nothing is stored. "
            "Refused: 5 (not line art; an image opened shows its caption in full)."
        )
        # The tiny model is the data folder's, as the Evaluate tab's is, never the checkout's.
        assert (Path(config.data_dir) / "models" / "tiny-random" / "model_index.json").is_file()
        assert len(candidates) == 5
        assert all(c["caption"].startswith("refused: not line art") for c in candidates)
        assert shown_base == "tulip"
        assert [r[:3] for r in table["data"]] == [[str(tulip), "imported", "yes"]] and len(gallery) == 1
        # A picked concept is for one file: for several it is refused, naming them.
        with pytest.raises(
            AppError,
            match=r"`Concept` 'daisy' is for a single file, and 2 are chosen \('tulip\.svg', 'rose\.png'\)",
        ):
            client.predict(
                admin, [handle_file(svg), handle_file(photo)], "daisy", True, api_name="/sketches_import"
            )
        table = client.predict(admin, [handle_file(svg)], "daisy", False, api_name="/sketches_import")[0][
            "data"
        ]
        assert table[0][1] == "daisy"
        # The same drawing again is no new sketch, and the result says so.
        again = client.predict(admin, [handle_file(svg)], "daisy", False, api_name="/sketches_import")[0][
            "data"
        ]
        assert again[0][2] == (
            f"already in the library as sketch {table[0][2].rsplit(' ', 1)[1]} (the same drawing): nothing new stored"
        )
        designer = client.predict(
            client.predict(admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")["data"][0][3],
            api_name="/login_invite",
        )[0]
        for api, args in (
            ("/sketches_missing", ()),
            ("/sketches_list", ("rose",)),
            ("/sketches_select", ("tulip", tulip, "")),
            ("/sketches_generate", ("tiny-random", "tulip")),
        ):
            with pytest.raises(AppError, match="needs the role admin"):
                client.predict(designer, *args, api_name=api)
        # A designer's upload is refused at the upload route, before the handler (app.guard).
        with pytest.raises(httpx.HTTPStatusError, match="403 Forbidden"):
            client.predict(designer, [handle_file(svg)], "tulip", True, api_name="/sketches_import")


def test_an_animated_png_is_refused_not_cut_to_its_first_frame(loaded, tmp_path):
    db, data = loaded
    count = db["sketches"].count
    frame = np.full((200, 200), 255, np.uint8)
    frame[40:160, 40:44] = frame[40:160, 156:160] = frame[40:44, 40:160] = frame[156:160, 40:160] = 0
    frames = [Image.fromarray(frame), Image.fromarray(255 - (255 - frame) // 2)]
    path = tmp_path / "lemon.png"
    frames[0].save(path, save_all=True, append_images=frames[1:])
    [result] = store.import_sketches(db, data, [path])
    assert result.reason == "lemon.png is animated (2 frames); a sketch is one still drawing"
    assert db["sketches"].count == count


def test_a_small_raster_sketch_is_stored_with_a_note_that_it_was_scaled_up(loaded, tmp_path):
    """A 40 x 40 px drawing becomes soft 1024 px lines a fill stops short of (outsider 80):
    the import says so; a drawing of 256 px or more, or an SVG, gets no note."""
    db, data = loaded
    results = []
    for side, name in ((40, "lemon.png"), (256, "mango.png")):
        frame = np.full((side, side), 255, np.uint8)
        edge, width = side // 5, max(1, side // 40)
        frame[edge:-edge, edge : edge + width] = frame[edge:-edge, -edge - width : -edge] = 0
        frame[edge : edge + width, edge:-edge] = frame[-edge - width : -edge, edge:-edge] = 0
        Image.fromarray(frame).save(tmp_path / name)
        [result] = store.import_sketches(db, data, [tmp_path / name])
        results.append(result)
    assert all(r.ok for r in results), [r.reason for r in results]
    assert results[0].note == (
        "scaled up from 40 px on its long side to 1024: its lines are soft and a fill may stop short of "
        "them; a larger original or an SVG colors cleanly"
    )
    assert results[1].note == ""


def test_a_line_drawing_in_another_format_named_png_is_refused_and_nothing_is_stored(loaded, tmp_path):
    """Outside probe 217 imported GIF, BMP, TIFF and PPM line drawings named .png as sketches;
    the same drawing saved as a PNG is taken."""
    db, data = loaded
    count = db["sketches"].count
    frame = np.full((400, 400), 255, np.uint8)
    frame[80:320, 80:88] = frame[80:320, 312:320] = frame[80:88, 80:320] = frame[312:320, 80:320] = 0
    Image.fromarray(frame).save(tmp_path / "lemon.png", format="GIF")
    [result] = store.import_sketches(db, data, [tmp_path / "lemon.png"])
    assert (result.ok, result.reason) == (False, "lemon.png is in the GIF format, not PNG, JPEG or WebP")
    assert db["sketches"].count == count
    Image.fromarray(frame).save(tmp_path / "lemon.png", format="PNG")
    [result] = store.import_sketches(db, data, [tmp_path / "lemon.png"])
    assert result.ok, result.reason


def test_a_new_sketch_names_the_tasks_designers_hold_whose_drawing_it_changes(loaded, tmp_path):
    """Outside probe 217: a sketch chosen mid-study changed the drawing of a task a designer
    held, and the admin's message said nothing of it (nor did the designer's page)."""
    db, data = loaded
    [(designer, _)] = create_annotators(db, 1, "designer")
    rng = np.random.default_rng(0)
    tasks = reserve(db, "coloring", designer["id"], rng, 3)
    base = get_concept(db, tasks[0].concept_key)["base"]
    assert store.held_tasks(db, base) == sum(get_concept(db, t.concept_key)["base"] == base for t in tasks)
    assert store.held_tasks(db, "tulip") == 0
    frame = np.full((400, 400), 255, np.uint8)
    frame[80:320, 80:88] = frame[80:320, 312:320] = frame[80:88, 80:320] = frame[312:320, 80:320] = 0
    Image.fromarray(frame).save(tmp_path / "drawing.png")
    [result] = store.import_sketches(db, data, [tmp_path / "drawing.png"], base=base, select=True)
    held = store.held_tasks(db, base)
    assert _import_outcome(result, db) == (
        f"imported as sketch {result.sketch_id}. Designers hold {held} task{'' if held == 1 else 's'} on "
        f"{base}: their pages show this drawing from their next load; unsaved work on the earlier "
        "drawing is not carried over to this one (their page says so) and comes back only if the concept "
        "goes back to that drawing."
    )
    assert _import_outcome(result) == f"imported as sketch {result.sketch_id}"
    assert work_item(db, tasks[0]).sketch["id"] == result.sketch_id
    finish = [t.id for t in tasks if get_concept(db, t.concept_key)["base"] == base]
    with transaction(db):
        update_rows(db, "tasks", {"id": finish[0]}, {"status": "expired"})
    assert store.held_tasks(db, base) == held - 1
