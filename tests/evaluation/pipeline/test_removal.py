"""Deleting a run (`evaluation.pipeline.removal`): every row and file of it, nothing of another
run or of a way back, and nothing at all when it is refused (outside probe 234: a run started
by mistake, 1,000,000 items, could not be taken back)."""

import contextlib
import getpass
import hashlib
import json
import shutil
import socket

import numpy as np
import pytest

from annotation.study import design as study
from evaluation.__main__ import main as evaluation_main
from evaluation.concepts import load_concepts
from evaluation.models.registry import load_registry
from evaluation.pipeline import removal, runs
from evaluation.pipeline.jobs import JobError, JobManager, run_pipeline, segmenter_preset
from evaluation.pipeline.planning import ConceptQuery, EvaluationRequest, plan_request
from evaluation.pipeline.scoring import score_every_source
from storage import ensure_schema, open_db, transaction
from storage.human import store_reference
from storage.schema import change_count
from tests.research_data import install_tiny, tiny_models, torch_one_thread  # noqa: F401 - fixture
from tests.study_data import RUN as STUDY_RUN
from tests.study_data import populate, sources, truth_source

CONCEPTS = load_concepts()
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.usefixtures("torch_one_thread"),
]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_models):  # noqa: F811
    """Runs ``keep`` and ``gone`` generated, masked, extracted and scored against a reference
    set with the tiny models; copied fresh for each test (``_fresh``)."""
    folder = tmp_path_factory.mktemp("two-runs")
    data_dir = folder / "data"
    install_tiny(tiny_models, data_dir)
    db = open_db(folder / "db.sqlite")
    ensure_schema(db)
    for name, concepts in (("keep", ("apple",)), ("gone", ("apple", "banana"))):
        request = EvaluationRequest(("tiny-random",), ConceptQuery(keys=concepts), ("natural",), (7.5,), 1)
        items, config = plan_request(request, load_registry(), CONCEPTS)
        runs.create_run(db, name, items, config)
        run_pipeline(
            db, name, data_dir, segmenter_preset("tiny-random", data_dir / "models", 0.0, 0.0), device="cpu"
        )
    flat = np.full(71, 1 / 71)
    store_reference(db, "flat", {"apple": flat, "banana": flat}, "a test set")
    score_every_source(db, CONCEPTS)
    db.close()
    return folder


@pytest.fixture
def fresh(two_runs, tmp_path):
    """(db, data_dir) of a copy of `two_runs`."""
    shutil.copytree(two_runs, tmp_path / "study")
    db = open_db(tmp_path / "study" / "db.sqlite")
    yield db, tmp_path / "study" / "data"
    db.close()


def _files(data_dir):
    """Relative path -> SHA-256 of every file under `data_dir`."""
    return {
        p.relative_to(data_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


def _rows(db, run):
    """Every row of run `run`, per table of `runs.RUN_TABLES`."""
    return {
        table: db.execute(
            f"select * from {table} where {'name' if table == 'runs' else 'run'} = ?", [run]
        ).fetchall()
        for table in runs.RUN_TABLES
    }


def test_deleting_a_run_removes_every_row_and_file_of_it_and_nothing_of_another_run(fresh):
    db, data_dir = fresh
    kept_rows, files_before = _rows(db, "keep"), _files(data_dir)
    held = removal.footprint(db, "gone", data_dir)
    assert held.rows["run_items"] == 2 and held.rows["model_distributions"] == 2 and held.rows["scores"] == 2
    gone_files = {path for path in files_before if path.startswith("runs/gone/")}
    assert held.files == len(gone_files) > 0
    counter = change_count(db)

    rows, files = removal.delete_run(db, "gone", data_dir)

    assert rows == {**held.rows, "runs": 1}
    assert not any(_rows(db, "gone").values())
    assert (files.removed, files.kept, files.failed) == (len(gone_files), 0, ())
    assert not (data_dir / "runs" / "gone").exists()
    assert _files(data_dir) == {p: h for p, h in files_before.items() if p not in gone_files}
    assert _rows(db, "keep") == kept_rows
    assert change_count(db) > counter  # the research views recompute without its distributions
    assert [r["name"] for r in runs.list_runs(db)] == ["keep"]
    with pytest.raises(runs.RunError, match="no run named 'gone'; known runs, newest first: keep"):
        removal.delete_run(db, "gone", data_dir)


def test_files_a_database_kept_beside_it_names_stay_until_that_copy_is_gone(fresh, tmp_path):
    db, data_dir = fresh
    copy = tmp_path / "study" / "db.sqlite.before-restore-20261207T000000Z"
    shutil.copyfile(tmp_path / "study" / "db.sqlite", copy)
    held = removal.footprint(db, "gone", data_dir)

    rows, files = removal.delete_run(db, "gone", data_dir)

    assert rows["run_items"] == 2 and (files.removed, files.kept) == (0, held.files)
    assert "kept, named by a database kept beside this one" in files.sentence()
    # The rows are gone; the way back still finds its images.
    assert len(list((data_dir / "runs" / "gone").rglob("*.png"))) == 4
    copy.unlink()
    again = removal.delete_files(db, "gone", data_dir)
    assert (again.removed, again.kept) == (held.files, 0) and not (data_dir / "runs" / "gone").exists()


def _connections(path):
    """A job manager's `connect`: a new connection to the database at `path` each time."""

    @contextlib.contextmanager
    def connect():
        connection = open_db(path)
        try:
            yield connection
        finally:
            connection.close()

    return connect


def _item(db, run):
    """A grid cell of `run`'s first item, as `runs.create_run` takes it, with another seed."""
    item = runs.items(db, run)[0]
    return {k: item[k] for k in ("model", "concept", "noun", "style", "cfg", "sample", "prompt")} | {
        "seed": 7
    }


def _state(db, data_dir):
    return list(db.conn.iterdump()), _files(data_dir)


@pytest.mark.parametrize(
    "case, message",
    [
        ("unknown", "no run named 'missing'; known runs, newest first: gone, keep"),
        ("queued here", "run 'gone' is queued on this server: Cancel it, and delete it once it has stopped"),
        ("lease elsewhere", r"run 'gone' has a job running in otherhost:12 \(last heard from 0 s ago\)"),
    ],
)
def test_a_refused_deletion_changes_no_row_and_no_file(fresh, case, message):
    db, data_dir = fresh
    if case == "lease elsewhere":
        runs.claim_job(db, "gone", "otherhost:12")
    before = _state(db, data_dir)
    with pytest.raises(runs.RunError, match=message):
        removal.delete_run(
            db, "missing" if case == "unknown" else "gone", data_dir, busy="queued" * (case == "queued here")
        )
    assert _state(db, data_dir) == before


def test_a_run_a_study_shows_is_kept(db, tmp_path):
    data_dir = tmp_path / "data"
    truths, _ = populate(db, data_dir, 30, np.random.default_rng(0))
    study.create_study(db, "pilot", sources(), truth_source(data_dir, truths), seed=1, n_concepts=10)
    before = _state(db, data_dir)
    with pytest.raises(runs.RunError, match=r"run 'study-run' is shown in study 'pilot' \(draft\).*is kept"):
        removal.delete_run(db, STUDY_RUN, data_dir)
    assert _state(db, data_dir) == before


def test_rows_are_deleted_only_inside_a_transaction(fresh):
    db, _ = fresh
    with pytest.raises(RuntimeError, match="inside storage.transaction"):
        removal.delete_rows(db, "gone")
    with transaction(db):
        assert removal.delete_rows(db, "gone")["run_items"] == 2


def test_a_job_manager_refuses_a_job_of_a_run_being_deleted_and_forgets_a_deleted_runs_job(fresh, tmp_path):
    _, data_dir = fresh

    manager = JobManager(_connections(tmp_path / "study" / "db.sqlite"), data_dir, device="cpu")
    segmenter = segmenter_preset("tiny-random", data_dir / "models", 0.0, 0.0)
    manager.submit("keep", segmenter)
    assert manager.wait_idle(600) and manager.state("keep").state == "finished"
    with manager.deleting("keep") as busy:
        assert busy == ""
        with pytest.raises(JobError, match="run 'keep' is being deleted"):
            manager.submit("keep", segmenter)
    assert manager.state("keep").state == "finished"  # a deletion refused forgets nothing
    manager.forget("keep")
    assert manager.state("keep").state == "idle"


def test_the_command_says_what_a_run_holds_and_deletes_it_only_with_yes(fresh, tmp_path, capsys):
    db, data_dir = fresh
    options = ["--run", "gone", "--db", str(tmp_path / "study" / "db.sqlite"), "--data-dir", str(data_dir)]
    before = _state(db, data_dir)
    assert evaluation_main(["delete-run", *options]) == 0
    said = capsys.readouterr().out
    assert "run 'gone' holds 2 items, 2 distributions, 2 score rows and 6 files (" in said
    assert "nothing deleted" in said and "delete-run --run gone --yes --db " in said
    assert _state(db, data_dir) == before

    assert evaluation_main(["delete-run", *options, "--yes"]) == 0
    assert "run 'gone' deleted: 2 items, 2 distributions, 2 score rows; 6 files (" in capsys.readouterr().out
    assert not any(_rows(db, "gone").values()) and not (data_dir / "runs" / "gone").exists()

    assert evaluation_main(["delete-run", *options, "--yes"]) == 2
    assert "error: no run named 'gone'; known runs, newest first: keep" in capsys.readouterr().err


def test_a_deletion_described_for_one_run_does_not_delete_a_later_run_of_its_name(fresh):
    """Outside probe 237: the second press of *Delete run* deleted whatever run had the name
    by then, one the first press never described."""
    db, data_dir = fresh
    described = removal.footprint(db, "gone", data_dir)
    removal.delete_run(db, "gone", data_dir)  # elsewhere: another tab, the command line
    runs.create_run(db, "gone", [_item(db, "keep")], {"made": "again"})
    before = _state(db, data_dir)
    with pytest.raises(
        runs.RunError, match=r"run 'gone' is not the run described before: it was deleted and made again"
    ):
        removal.delete_run(db, "gone", data_dir, created=described.created)
    assert _state(db, data_dir) == before
    again = removal.footprint(db, "gone", data_dir)
    assert again.created != described.created and again.rows["run_items"] == 1
    assert removal.delete_run(db, "gone", data_dir, created=again.created)[0]["run_items"] == 1


def test_the_command_line_records_who_deleted_a_run_in_the_audit_trail(fresh, tmp_path, capsys):
    db, data_dir = fresh
    options = ["--run", "gone", "--db", str(tmp_path / "study" / "db.sqlite"), "--data-dir", str(data_dir)]
    assert evaluation_main(["delete-run", *options, "--yes"]) == 0
    [row] = db["audit"].rows_where("action = 'delete_evaluation_run'")
    details = json.loads(row["details"])
    assert (row["actor"], row["object_id"]) == ("command line", "gone")
    assert details["run_items"] == 2 and details["by"] == f"{getpass.getuser()}@{socket.gethostname()}"


def test_a_job_queued_for_a_run_deleted_and_made_again_elsewhere_does_not_run_the_new_one(fresh, tmp_path):
    """Outside probe 237: the command line cannot see the app's queue; the queued job then
    failed on the deleted run, and its failure showed on a new run of the name."""
    db, data_dir = fresh

    manager = JobManager(_connections(tmp_path / "study" / "db.sqlite"), data_dir, device="cpu")
    segmenter = segmenter_preset("tiny-random", data_dir / "models", 0.0, 0.0)
    first = _item(db, "gone")
    # The write lock held here keeps the first job waiting to claim its run, so the second
    # stays queued while its run is deleted and made again on this connection.
    db.execute("BEGIN IMMEDIATE")
    try:
        manager.submit("keep", segmenter)
        manager.submit("gone", segmenter)
        assert manager.state("gone").state == "queued"
        removal.delete_run(db, "gone", data_dir)
        runs.create_run(db, "gone", [first], {"made": "again"})
    finally:
        db.execute("COMMIT")
    assert manager.wait_idle(600)
    old = manager.state("gone")
    assert (old.state, old.message) == (
        "cancelled",
        "the run was deleted and made again (resume the new one to run it) before its job started",
    )
    assert manager.state("gone", runs.run_created(db, "gone")).state == "idle"  # not the new run's
    assert [item["status"] for item in runs.items(db, "gone")] == ["pending"]  # left alone
