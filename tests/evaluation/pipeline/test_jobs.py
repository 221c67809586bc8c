import contextlib

import numpy as np
import pytest
from PIL import Image

from evaluation.concepts import load_concepts
from evaluation.models.registry import load_registry
from evaluation.pipeline import runs
from evaluation.pipeline.imports import import_images
from evaluation.pipeline.jobs import (
    Cancelled,
    JobError,
    JobManager,
    SegmenterSpec,
    masking_of,
    run_pipeline,
    segmenter_of_masking,
    segmenter_preset,
)
from evaluation.pipeline.planning import ConceptQuery, EvaluationRequest, plan_request
from evaluation.pipeline.runs import run_progress
from storage import ensure_schema, open_db
from tests.disks import fill, tmpfs
from tests.research_data import install_tiny, solid, tiny_models, torch_one_thread  # noqa: F401 - fixture

CONCEPTS = load_concepts()
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.usefixtures("torch_one_thread"),
]


@pytest.fixture
def setup(tmp_path, tiny_models):  # noqa: F811
    data_dir = tmp_path / "data"
    install_tiny(tiny_models, data_dir)
    path = tmp_path / "db.sqlite"
    db = open_db(path)
    ensure_schema(db)

    @contextlib.contextmanager
    def connect():
        connection = open_db(path)
        try:
            yield connection
        finally:
            connection.close()

    yield db, data_dir, connect
    db.close()


def _store(db, data_dir, name, concepts=("apple",), seeds=2):
    request = EvaluationRequest(("tiny-random",), ConceptQuery(keys=concepts), ("natural",), (7.5,), seeds)
    items, config = plan_request(request, load_registry(), CONCEPTS)
    runs.create_run(db, name, items, config)


def _segmenter(data_dir):
    return segmenter_preset("tiny-random", data_dir / "models", 0.0, 0.0)


def test_a_job_generates_masks_and_extracts_every_cell_in_the_background(setup):
    db, data_dir, connect = setup
    _store(db, data_dir, "bg", concepts=("apple", "banana"), seeds=1)
    manager = JobManager(connect, data_dir, device="cpu")
    assert manager.submit("bg", _segmenter(data_dir)).state == "queued"
    with pytest.raises(JobError, match="run 'bg' is already"):
        manager.submit("bg", _segmenter(data_dir))
    assert manager.wait_idle(600)
    assert manager.state("bg").state == "finished"
    progress = run_progress(db, "bg")
    assert (progress.items, progress.generated, progress.segmented, progress.groups, progress.extracted) == (
        2,
        2,
        2,
        2,
        2,
    )
    assert progress.complete and progress.fraction == 1.0
    stored = runs.model_distributions(db, run="bg")
    assert [(r["concept"], r["n_images"] + r["n_excluded"]) for r in stored] == [("apple", 1), ("banana", 1)]
    for row in stored:
        assert row["p"] is None or np.isclose(row["p"].sum(), 1.0)
    with pytest.raises(JobError, match="no queued or running job"):
        manager.cancel("bg")


def test_a_cancelled_pipeline_keeps_its_work_and_resuming_gives_the_uninterrupted_result(setup):
    db, data_dir, _ = setup
    _store(db, data_dir, "straight")
    _store(db, data_dir, "stopped")
    run_pipeline(db, "straight", data_dir, _segmenter(data_dir), device="cpu")
    stages = []
    with pytest.raises(Cancelled, match="run 'stopped' cancelled"):
        run_pipeline(
            db,
            "stopped",
            data_dir,
            _segmenter(data_dir),
            device="cpu",
            should_stop=lambda: True,
            on_stage=stages.append,
        )
    assert stages == ["generate"]
    halfway = run_progress(db, "stopped")
    assert (halfway.generated, halfway.segmented, halfway.extracted) == (1, 0, 0)
    run_pipeline(db, "stopped", data_dir, _segmenter(data_dir), device="cpu", on_stage=stages.append)
    assert stages == ["generate", "generate", "segment", "extract"]
    resumed, straight = runs.items(db, "stopped"), runs.items(db, "straight")
    assert [r["image_sha256"] for r in resumed] == [r["image_sha256"] for r in straight]
    assert [r["mask_sha256"] for r in resumed] == [r["mask_sha256"] for r in straight]
    (a,), (b,) = runs.model_distributions(db, run="stopped"), runs.model_distributions(db, run="straight")
    assert (a["n_images"], a["n_excluded"]) == (b["n_images"], b["n_excluded"])
    if a["p"] is not None:
        np.testing.assert_allclose(a["p"], b["p"], atol=1e-12)


def test_a_failing_job_reports_its_error_and_leaves_the_run_resumable(setup, tmp_path, caplog):
    db, data_dir, connect = setup
    folder = tmp_path / "imports" / "x"
    folder.mkdir(parents=True)
    Image.fromarray(solid((200, 10, 10))).save(folder / "m__apple__natural__7.5__1.png")
    import_images(db, "imp", folder, data_dir, CONCEPTS, allowed_roots=[tmp_path / "imports"])
    manager = JobManager(connect, data_dir, device="cpu")
    manager.submit("imp", SegmenterSpec(detector=str(tmp_path / "no-detector"), sam=str(tmp_path / "no-sam")))
    assert manager.wait_idle(300)
    state = manager.state("imp")
    assert state.state == "failed" and "no-detector" in state.message
    # The log says so too (README, "The log": outsider 102 found no line for a job).
    assert [r.getMessage() for r in caplog.records if r.name == "evaluation.pipeline.jobs"] == [
        f"the evaluation job of run 'imp' failed: {state.message}"
    ]
    assert run_progress(db, "imp").generated == 1 and run_progress(db, "imp").segmented == 0
    manager.submit("imp", _segmenter(data_dir))
    assert manager.wait_idle(300) and manager.state("imp").state == "finished"
    assert run_progress(db, "imp").complete


def test_a_job_that_fills_its_disk_says_so_and_resumes_once_there_is_room(tmp_path, tiny_models):  # noqa: F811
    """The Evaluate tab shows a job's message: a full disk is named as such, with what to do
    (it was "OperationalError: database or disk is full")."""
    with tmpfs(tmp_path / "disk", "32m") as disk:
        data_dir, path = disk / "data", disk / "db.sqlite"
        install_tiny(tiny_models, data_dir)
        with contextlib.closing(open_db(path)) as db:
            ensure_schema(db)
            _store(db, data_dir, "full", concepts=("apple", "banana"), seeds=2)

        @contextlib.contextmanager
        def connect():
            with contextlib.closing(open_db(path)) as connection:
                yield connection

        filler = fill(disk, leave=100_000)
        manager = JobManager(connect, data_dir, device="cpu")
        manager.submit("full", _segmenter(data_dir))
        assert manager.wait_idle(300)
        state = manager.state("full")
        assert state.state == "failed" and state.message == (
            "a disk it writes to is full (database or disk is full); what was recorded stays: free some "
            "space beside the database and the data folder, then resume"
        )
        filler.unlink()
        manager.submit("full", _segmenter(data_dir))
        assert manager.wait_idle(300) and manager.state("full").state == "finished"
        with contextlib.closing(open_db(path)) as db:
            assert run_progress(db, "full").complete


@pytest.mark.parametrize(
    "segmenter",
    [
        SegmenterSpec(),
        SegmenterSpec("/m/dino", "/m/sam", 0.2, 0.3),
        SegmenterSpec("/m/dino", box_threshold=0.1, sam_checkpoint="/m/sam_vit_b.pth", sam_type="vit_b"),
        "tiny",
    ],
)
def test_a_recorded_masking_gives_back_the_segmenter_it_records(tmp_path, segmenter):
    """A resume given no masking option masks with the run's recorded one."""
    if segmenter == "tiny":
        segmenter = segmenter_preset("tiny-random", tmp_path, 0.0, 0.25)
    again = segmenter_of_masking(masking_of(segmenter), tmp_path)
    assert again == segmenter and masking_of(again) == masking_of(segmenter)


def test_segmenter_presets_check_their_thresholds(tmp_path):
    assert segmenter_preset("paper", tmp_path) == SegmenterSpec()
    tiny = segmenter_preset("tiny-random", tmp_path, 0.1, 0.2)
    assert tiny.detector == str((tmp_path / "tiny-grounding-dino").resolve()) and tiny.box_threshold == 0.1
    with pytest.raises(ValueError, match="`segmenter` must be one of"):
        segmenter_preset("sam2", tmp_path)
    with pytest.raises(ValueError, match=r"`box_threshold` must be in \[0, 1\]"):
        segmenter_preset("paper", tmp_path, 1.5)


def test_cancelling_a_run_with_no_job_says_none_ran_here_not_that_it_is_idle(tmp_path):
    """Outside probe 94: "(it is idle)" read as if the run had work left."""
    manager = JobManager(lambda: contextlib.nullcontext(None), tmp_path, device="cpu")
    with pytest.raises(
        JobError,
        match=r"^run 'old' has no queued or running job to cancel \(no job of it has run since this server started\)$",
    ):
        manager.cancel("old")
    manager.close(0)
