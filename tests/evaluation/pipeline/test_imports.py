import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import sqlite_utils
from PIL import Image

import storage
from evaluation.concepts import load_concepts
from evaluation.pipeline import runs
from evaluation.pipeline.imports import MAX_IMAGE_BYTES, ImportSourceError, import_images, open_source
from evaluation.pipeline.stages import read_image
from tests.research_data import solid

CONCEPTS = load_concepts()


@pytest.fixture
def db():
    database = sqlite_utils.Database(memory=True)
    storage.ensure_schema(database)
    return database


def _png(rgb) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(solid(rgb, 16)).save(buffer, format="PNG")
    return buffer.getvalue()


def _folder(root, files: dict):
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _zip(path, entries) -> Path:
    """A zip at `path` holding `entries`, ``(name, text or bytes)`` in order."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return path


def test_a_named_folder_becomes_generated_items_and_a_corrupt_image_is_reported_by_name(db, tmp_path):
    imports = tmp_path / "imports"
    source = _folder(
        imports / "batch",
        {
            "dalle3__apple__natural__7.5__3.png": _png((200, 20, 20)),
            "dalle3__apple__natural__7.5__1.png": _png((190, 30, 20)),
            "dalle3__rotten apple__clipart__2__9.png": _png((90, 70, 20)),
            "dalle3__banana__natural__7.5__5.png": _png((230, 210, 40))[:40],
            "notes.txt": b"made with a script",
        },
    )
    report = import_images(db, "ext", source, tmp_path / "data", CONCEPTS, allowed_roots=[imports])
    assert report.imported == 3
    assert [name for name, _ in report.rejected] == ["dalle3__banana__natural__7.5__5.png", "notes.txt"]
    assert (
        report.rejected[0][1] == "the file is not an image file (PNG, JPEG or WebP expected)"
    )  # cut in its header
    rows = runs.items(db, "ext")
    assert [
        (r["model"], r["concept"], r["noun"], r["style"], r["cfg"], r["sample"], r["seed"], r["status"])
        for r in rows
    ] == [
        ("dalle3", "apple", "apple", "natural", 7.5, 0, 1, "generated"),
        ("dalle3", "apple", "apple", "natural", 7.5, 1, 3, "generated"),
        ("dalle3", "rotten apple", "apple", "clipart", 2.0, 0, 9, "generated"),
    ]
    first = read_image(tmp_path / "data", rows[0]["image_path"])
    assert first.shape == (16, 16, 3) and tuple(first[0, 0]) == (190, 30, 20)
    assert runs.run_config(db, "ext")["imported"] == {"source": "batch", "files": 5}
    assert sorted(r["id"] for r in runs.pending_items(db, "ext", "segment")) == [r["id"] for r in rows]


def test_a_zip_with_a_manifest_is_labelled_by_it(db, tmp_path):
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    manifest = (
        "file,model,concept,style,cfg,seed\n"
        "out/a.png,mj,lonely cabin,natural,5,11\n"
        "out/b.png,mj,sky,clipart,5,12\n"
        "out/c.png,mj,unicorn castle,natural,5,13\n"
        "out/e.png,mj,Lonely Cabin,natural,5,14\n"
        "out/f.png,mj,ｓｋｙ,natural,5,15\n"
    )
    images = [(f"out/{n}.png", _png((10, 20, 200))) for n in "abcdef"]
    archive = _zip(uploads / "images.zip", [("manifest.csv", manifest), *images])
    report = import_images(db, "mj-run", archive, tmp_path / "data", CONCEPTS, allowed_roots=[uploads])
    assert report.imported == 2
    assert dict(report.rejected) == {
        "out/c.png": "concept 'unicorn castle' is not in the concept list",
        "out/d.png": "not listed in manifest.csv",
        # the key meant, as the reference CSV names it (outsider 67)
        "out/e.png": "concept 'Lonely Cabin' is not in the concept list; write 'lonely cabin'",
        "out/f.png": "concept 'ｓｋｙ' is not in the concept list; write 'sky'",
    }
    assert [(r["concept"], r["style"], r["seed"]) for r in runs.items(db, "mj-run")] == [
        ("lonely cabin", "natural", 11),
        ("sky", "clipart", 12),
    ]


def test_a_zip_entry_that_leaves_the_archive_refuses_the_whole_zip(db, tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("dalle3__apple__natural__7.5__1.png", _png((1, 2, 3)))
        z.writestr("../../dalle3__apple__natural__7.5__2.png", _png((1, 2, 3)))
    with pytest.raises(
        ImportSourceError, match=r"zip entry '../../dalle3__apple__natural__7.5__2.png' would leave"
    ):
        import_images(db, "evil", archive, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["runs"].count == 0 and db["run_items"].count == 0
    assert not (tmp_path / "data").exists()


def test_a_folder_outside_the_allowed_roots_is_refused(db, tmp_path):
    inside = _folder(tmp_path / "imports" / "ok", {"dalle3__apple__natural__7.5__1.png": _png((1, 2, 3))})
    outside = _folder(tmp_path / "elsewhere", {"dalle3__apple__natural__7.5__1.png": _png((1, 2, 3))})
    (tmp_path / "imports" / "link").symlink_to(outside)
    for source in (outside, tmp_path / "imports" / ".." / "elsewhere", tmp_path / "imports" / "link"):
        with pytest.raises(ImportSourceError, match="is outside the allowed import folders"):
            open_source(source, [tmp_path / "imports"])
    assert [name for name, _ in open_source(inside, [tmp_path / "imports"])] == [
        "dalle3__apple__natural__7.5__1.png"
    ]
    with pytest.raises(ImportSourceError, match="must be an existing folder or .zip"):
        open_source(tmp_path / "imports" / "missing", [tmp_path / "imports"])


def test_a_file_linked_out_of_the_folder_is_left_out_saying_so(db, tmp_path):
    """Its reason began "corrupt or unreadable image:" (outside probe 163)."""
    folder = _folder(tmp_path / "imports" / "ok", {"dalle3__apple__natural__7.5__1.png": _png((1, 2, 3))})
    secret = _folder(tmp_path / "elsewhere", {"secret.png": _png((4, 5, 6))}) / "secret.png"
    (folder / "dalle3__apple__natural__7.5__2.png").symlink_to(secret)
    report = import_images(db, "r", folder, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path / "imports"])
    assert report.imported == 1
    assert list(report.rejected) == [
        (
            "dalle3__apple__natural__7.5__2.png",
            "the file is a link to a file outside the import folder, which is not read",
        )
    ]


@pytest.mark.parametrize(
    "source, shown",
    [
        ("imports/../elsewhere", "'imports/../elsewhere' is outside the allowed import folders (imports/)"),
        ("imports/link", "'imports/link' is outside the allowed import folders (imports/)"),
        ("imports/missing", "'imports/missing' must be an existing folder or .zip file"),
        ("/etc", "'/etc' is outside the allowed import folders (imports/)"),
    ],
)
def test_refusals_name_the_source_from_the_import_folder_on(tmp_path, source, shown):
    _folder(tmp_path / "elsewhere", {"dalle3__apple__natural__7.5__1.png": _png((1, 2, 3))})
    (tmp_path / "imports").mkdir()
    (tmp_path / "imports" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ImportSourceError) as raised:
        open_source(tmp_path / source, [tmp_path / "imports"])
    assert str(raised.value) == shown


@pytest.mark.parametrize(
    "name, reason",
    [
        ("dalle3__apple__natural__7.5.png", "name must be model__concept__style__cfg__seed"),
        ("dalle3__apple__oil__7.5__1.png", "style 'oil' must be one of"),
        ("dalle3__apple__natural__high__1.png", "must be a number"),
        ("dalle3__apple__natural__-1__1.png", "cfg must be in (0, 100]"),
        ("dalle3__apple__natural__1e308__1.png", "cfg must be in (0, 100]"),
        ("dall e__apple__natural__7.5__1.png", "model 'dall e' must be 1 to 80 letters"),
        (f"{'m' * 81}__apple__natural__7.5__1.png", "… (81 characters) must be 1 to 80 letters"),
        # SQLite's INTEGER ends at 2**63 - 1: the item's row would have failed after its file was stored.
        (
            f"m__apple__natural__7.5__{2**63}.png",
            "seed must be in [0, 2**63 - 1], got '9223372036854775808'",
        ),
        (f"m__apple__natural__7.5__{'9' * 300}.png", "seed must be in [0, 2**63 - 1], got '99999"),
        # Each field is named alone: "cfg '7.5' must be a number and seed '1.5' a whole number" named both.
        ("m__apple__natural__7.5__1.5.png", "seed '1.5' must be a whole number"),
        # Python's int and float read these as 15, 3 and 7.5 (outside probe 163)
        ("m__apple__natural__7.5__1_5.png", "seed '1_5' must be a whole number"),
        ("m__apple__natural__7.5__\u0663.png", "seed '\u0663' must be a whole number"),
        ("m__apple__natural__\uff17.\uff15__2.png", "cfg '\uff17.\uff15' must be a number"),
        (f"m__apple__natural__{'x' * 300}__1.png", "(300 characters) must be a number"),
    ],
)
def test_mislabelled_files_are_reported_with_the_reason(db, tmp_path, name, reason):
    source = tmp_path / "in.zip"  # a zip: file names may be longer than a folder's allow
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr(name, _png((1, 2, 3)))
        archive.writestr("m__apple__natural__7.5__1.png", _png((1, 2, 3)))
    report = import_images(db, "r", source, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert report.imported == 1 and report.rejected[0][0] == name and reason in report.rejected[0][1]
    assert len(report.rejected[0][1]) < 300  # a long field is quoted cut


def test_an_image_over_the_pixel_cap_is_said_too_large_not_corrupt(db, tmp_path):
    """A PNG whose header says 30,000 x 30,000: refused unread, in the cap's words (it was
    called "corrupt or unreadable")."""
    small = bytearray(_png((1, 2, 3)))
    small[16:24] = struct.pack(">II", 30_000, 30_000)  # IHDR's width and height
    small[29:33] = struct.pack(">I", zlib.crc32(bytes(small[12:29])))  # its CRC
    source = _folder(
        tmp_path / "in",
        {"m__apple__natural__7.5__1.png": bytes(small), "m__apple__natural__7.5__2.png": _png((1, 2, 3))},
    )
    report = import_images(db, "r", source, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert report.imported == 1
    [(name, why)] = report.rejected
    assert name == "m__apple__natural__7.5__1.png"
    assert why.startswith("the file has 900,000,000 pixels; at most ") and "corrupt" not in why


def test_an_import_whose_rows_fail_leaves_no_file(db, tmp_path):
    db.execute(
        "create trigger refuse before insert on run_items begin select raise(abort, 'disk I/O error'); end"
    )
    source = _folder(
        tmp_path / "in",
        {"m__apple__natural__7.5__1.png": _png((1, 2, 3)), "m__apple__natural__7.5__2.png": _png((4, 5, 6))},
    )
    with pytest.raises(sqlite_utils.db.sqlite3.IntegrityError, match="disk I/O error"):
        import_images(db, "r", source, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["runs"].count == 0 and db["run_items"].count == 0
    assert [p for p in (tmp_path / "data").rglob("*") if p.is_file()] == []


def test_nothing_usable_or_a_taken_name_stores_nothing(db, tmp_path):
    bad = _folder(tmp_path / "bad", {"m__apple__natural__7.5__1.png": b"not a png"})
    with pytest.raises(
        ImportSourceError,
        match="no usable image in 'bad': m__apple__natural__7.5__1.png: the file is not an image file",
    ):
        import_images(db, "r", bad, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["runs"].count == 0
    good = _folder(tmp_path / "good", {"m__apple__natural__7.5__1.png": _png((1, 2, 3))})
    import_images(db, "r", good, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    with pytest.raises(runs.RunError, match="run 'r' exists already"):
        import_images(db, "r", good, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    files = sorted((tmp_path / "data").rglob("*"))
    with pytest.raises(runs.RunError, match="^run 'R' is run 'r' apart from case and spacing"):
        import_images(db, "R", good, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert sorted((tmp_path / "data").rglob("*")) == files
    with pytest.raises(ValueError, match="`run` name"):
        import_images(db, "../r", good, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["run_items"].count == 1


def test_files_that_share_a_label_are_all_left_out(db, tmp_path):
    """Which of them is the model's image cannot be known (the first was kept: of a red and a
    blue apple, the one that sorted first made the run's distribution)."""
    source = _folder(
        tmp_path / "in",
        {
            "a/m__apple__natural__7.5__1.png": _png((9, 9, 9)),
            "b/m__apple__natural__7.5__1.jpg": _png((200, 9, 9)),
            "b/m__apple__natural__7.5__2.png": _png((20, 200, 9)),
        },
    )
    report = import_images(db, "r", source, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert report.imported == 1
    assert report.rejected == (
        (
            "a/m__apple__natural__7.5__1.png",
            "'b/m__apple__natural__7.5__1.jpg' has the same model, concept, style, cfg and seed; "
            "none of them is imported",
        ),
        (
            "b/m__apple__natural__7.5__1.jpg",
            "'a/m__apple__natural__7.5__1.png' has the same model, concept, style, cfg and seed; "
            "none of them is imported",
        ),
    )
    [item] = runs.items(db, "r")
    assert item["seed"] == 2
    np.testing.assert_array_equal(read_image(tmp_path / "data", item["image_path"])[0, 0], [20, 200, 9])


@pytest.mark.filterwarnings("ignore:Duplicate name")  # zipfile warns as it writes the second
def test_manifest_rows_that_repeat_a_file_or_name_none_are_listed_not_applied(db, tmp_path):
    manifest = (
        "file,model,concept,style,cfg,seed\n"
        "a.png,mj,apple,natural,5,1\n"
        "a.png,mj,banana,natural,5,1\n"  # the last row used to relabel a.png silently
        "b.png,mj,sky,natural,5,2\n"
        "zzz.png,mj,sky,natural,5,3\n"
        "../../etc/passwd,mj,sky,natural,5,4\n"
    )
    images = [("a.png", _png((1, 2, 3))), ("b.png", _png((1, 2, 3)))]
    # Two entries of one name: which is meant?
    twins = [("c/d.png", _png((1, 2, 3))), ("c/d.png", _png((9, 9, 9)))]
    archive = _zip(tmp_path / "in.zip", [("manifest.csv", manifest), *images, *twins])
    report = import_images(db, "r", archive, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert report.imported == 1
    assert dict(report.rejected) == {
        "a.png": "listed 2 times in manifest.csv; list it once",
        "c/d.png": "the source holds 2 files of this name; none of them is imported",
        "manifest.csv: '../../etc/passwd'": "listed, but the source holds no image of this name",
        "manifest.csv: 'zzz.png'": "listed, but the source holds no image of this name",
    }


def test_manifest_rows_of_more_or_fewer_cells_than_columns_are_listed_not_applied(db, tmp_path):
    """A row of more cells was cut to fit the columns: an unquoted comma in a concept
    labelled the image by the words before it, silently (outside probe 138)."""
    manifest = (
        "file,model,concept,style,cfg,seed\n"
        "a.png,mj,rotten, apple,natural,5,1\n"  # the comma unquoted
        'b.png,mj,"rotten apple",natural,5,1\n'
        "c.png,mj,sky,natural\n"  # cfg and seed left off
        "d.png,mj,sky,natural,5,2,\n"  # a trailing comma adds an empty cell: read as it is
    )
    images = [(f"{n}.png", _png((1, 2, 3))) for n in "abcd"]
    archive = _zip(tmp_path / "in.zip", [("manifest.csv", manifest), *images])
    report = import_images(db, "r", archive, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert dict(report.rejected) == {
        "a.png": "line 2 of manifest.csv has 7 cells for its 6 columns (a value holding a comma must be in "
        "double quotes); it is not imported",
        "c.png": "line 4 of manifest.csv has 4 cells for its 6 columns, none for ['cfg', 'seed']; it is not "
        "imported",
    }
    assert sorted((i["concept"], i["seed"]) for i in runs.items(db, "r")) == [("rotten apple", 1), ("sky", 2)]


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda path: path.write_bytes(b"not a zip"),
            r"^'x\.zip' cannot be read as a zip file: File is not a zip",
        ),
        (
            lambda path: _zip_with(path, "manifest.csv", "file,model\nà.png,m\n".encode("latin-1")),
            r"^manifest\.csv is not UTF-8 text: line 2 holds the byte 0xe0, which UTF-8 does not read there "
            r"\(a file saved as Latin-1 or Windows-1252 does this\); save it as UTF-8 text",
        ),
        (
            lambda path: _zip_with(path, "manifest.csv", b" " * (MAX_IMAGE_BYTES + 1)),
            rf"^manifest\.csv is too large: the file is {MAX_IMAGE_BYTES + 1:,} bytes; at most {MAX_IMAGE_BYTES:,} are read$",
        ),
    ],
    ids=["not-a-zip", "latin-1-manifest", "huge-manifest"],
)
def test_a_source_that_cannot_be_read_is_refused_by_name_and_stores_nothing(db, tmp_path, make, message):
    make(tmp_path / "x.zip")
    with pytest.raises(ImportSourceError, match=message):
        import_images(db, "r", tmp_path / "x.zip", tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["runs"].count == 0 and not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "manifest, message",
    [
        (
            "\ufefffile;model;concept;style;cfg;seed\r\nm.png;m;apple;natural;7,5;1\r\n",
            r"^manifest\.csv is separated by semicolons \(as a spreadsheet set to a language with decimal commas",
        ),
        (
            "file,model,concept,style,cfg\nm.png,m,apple,natural,7.5\n",
            r"^manifest\.csv must have the columns \[.*\] and at least one row: it lacks \['seed'\] \(its first "
            r"row: \['file', 'model', 'concept', 'style', 'cfg'\]\)$",
        ),
        (
            "file,model,concept,style,cfg,seed,File\nm.png,m,apple,natural,7.5,1,x\n",
            r": it names \['file'\] twice$",
        ),
        ("file,model,concept,style,cfg,seed\n,,,,,\n", r": it has no row after the column names$"),
        (
            "file\tmodel\tconcept\tstyle\tcfg\tseed\nm.png\tm\tapple\tnatural\t7.5\t1\n",
            r"^manifest\.csv is separated by tabs \(a spreadsheet's tab-delimited text\): save it with commas",
        ),
    ],
    ids=["semicolons", "missing-column", "column-twice", "no-row", "tabs"],
)
def test_a_manifest_that_cannot_be_read_says_what_to_change(db, tmp_path, manifest, message):
    """Outsider 100: a German spreadsheet's manifest, or one lacking a column, got the same
    "must have the columns" without saying which or why."""
    _zip_with(tmp_path / "x.zip", "manifest.csv", manifest.encode())
    with pytest.raises(ImportSourceError, match=message):
        import_images(db, "r", tmp_path / "x.zip", tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert db["runs"].count == 0 and not (tmp_path / "data").exists()


def test_manifest_column_names_are_read_in_any_case_and_spacing_and_every_refusal_is_kept(db, tmp_path):
    name = "m__apple__natural__7.5__1.png"
    manifest = f"File, Model ,CONCEPT,Style,CFG,Seed,,\r\n{name},m,apple,natural,7.5,3,,\r\n,,,,,,,\r\n"
    _zip_with(tmp_path / "x.zip", "manifest.csv", manifest.encode())
    report = import_images(db, "r", tmp_path / "x.zip", tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert (report.imported, report.rejected) == (1, ())
    assert [item["seed"] for item in runs.items(db, "r")] == [3]  # the manifest's, not the name's
    names = [f"u{n}.png" for n in range(8)]
    rows = "".join(f"{name},m,unicorn{n},natural,7.5,1\n" for n, name in enumerate(names))
    _zip(
        tmp_path / "y.zip",
        [("manifest.csv", "file,model,concept,style,cfg,seed\n" + rows)]
        + [(n, _png((1, 2, 3))) for n in names],
    )
    with pytest.raises(
        ImportSourceError, match=r"u4\.png: concept 'unicorn4' is not in the concept list; and 3 more$"
    ) as refused:
        import_images(db, "s", tmp_path / "y.zip", tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert [name for name, _ in refused.value.rejected] == names


def test_a_manifest_in_a_sub_folder_is_named_as_such(db, tmp_path):
    """Outsider 102 zipped a folder (`zip -r x.zip top`): its manifest was "not an image file"."""
    manifest = "file,model,concept,style,cfg,seed\na.png,m,apple,natural,7.5,1\n"
    _zip(tmp_path / "x.zip", [("top/manifest.csv", manifest), ("top/a.png", _png((1, 2, 3)))])
    with pytest.raises(ImportSourceError) as refused:
        import_images(db, "r", tmp_path / "x.zip", tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    assert dict(refused.value.rejected)["top/manifest.csv"] == (
        "a manifest.csv is read at the top level of the source only, not in 'top/' (zip the "
        "folder's contents, not the folder)"
    )


def _zip_with(path, name: str, data: bytes) -> None:
    _zip(path, [(name, data), ("m__apple__natural__7.5__1.png", _png((1, 2, 3)))])


@pytest.mark.parametrize(
    "name, reason",
    [("a" * 3000, "File name too long"), ("ok\x00", "embedded null byte")],
    ids=["long", "nul"],
)
def test_a_folder_name_the_system_cannot_open_is_refused_in_one_line(tmp_path, name, reason):
    (tmp_path / "imports").mkdir()
    with pytest.raises(
        ImportSourceError,
        match=rf"^the source (…'.{{70,90}}' \(\d+ characters\)|'.*') cannot be opened: {reason}$",
    ):
        open_source(tmp_path / "imports" / name, [tmp_path / "imports"])


def test_a_transparent_background_is_imported_as_white(db, tmp_path):
    rgba = np.zeros((16, 16, 4), np.uint8)  # transparent black
    rgba[4:12, 4:12] = (200, 30, 30, 255)  # an opaque red square
    buffer = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buffer, format="PNG")
    source = _folder(tmp_path / "in", {"m__apple__natural__7.5__1.png": buffer.getvalue()})
    import_images(db, "r", source, tmp_path / "data", CONCEPTS, allowed_roots=[tmp_path])
    image = read_image(tmp_path / "data", runs.items(db, "r")[0]["image_path"])
    np.testing.assert_array_equal(image[0, 0], [255, 255, 255])
    np.testing.assert_array_equal(image[8, 8], [200, 30, 30])
