"""Runs: schema, items, resumable stages, distributions, reference CSVs and scores (real SQLite, tiny models)."""

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from dataclasses import replace

import numpy as np
import pytest
import sqlite_utils

import storage
from evaluation.analysis import tables
from evaluation.analysis.reference import UW71_RATINGS_CSV, ReferenceError, load_reference_csv
from evaluation.color import metrics
from evaluation.color.extraction import concept_distribution, image_pixels
from evaluation.concepts import load_concepts
from evaluation.models.generation import item_seed
from evaluation.models.registry import load_registry, with_source
from evaluation.models.segmentation import load_detector, load_sam
from evaluation.models.tiny import build_all
from evaluation.pipeline import runs, scoring
from evaluation.pipeline.stages import (
    GenerationWork,
    SegmentationWork,
    extract,
    original_batches,
    plan_run,
    read_image,
    run_stage,
)
from storage import human as human_rows

TIMING_COLUMNS = {"gen_seconds", "seg_seconds", "updated_at"}
CONCEPTS = ("apple", "banana")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_all(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def segmenters(tiny):
    return load_detector(tiny["tiny-grounding-dino"], device="cpu"), load_sam(tiny["tiny-sam"], device="cpu")


@pytest.fixture
def db():
    database = sqlite_utils.Database(memory=True)
    storage.ensure_schema(database)
    return database


def _plan(tiny, concepts=CONCEPTS, cfgs=(2.0, 7.5), samples=2):
    spec = with_source(load_registry()["tiny-random"], tiny["tiny-random"])
    spec = replace(spec, cfg_scales=cfgs)
    chosen = [c for c in load_concepts() if c.key in concepts]
    return plan_run([spec], chosen, ["natural", "clipart"], samples)


def _generate(db, tiny, data_dir, name="r", *, progress=None, batch_size=4, executor=None):
    items, config = _plan(tiny)
    runs.create_run(db, name, items, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        work = GenerationWork.from_run(runs.run_config(db, name), data_dir, device="cpu")
        return run_stage(db, name, "generate", work, batch_size, executor=executor, progress=progress)


def _rows(db, name="r"):
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in runs.items(db, name)]


def test_schema_is_idempotent_and_exact(db):
    storage.ensure_schema(db)
    assert {"runs", "run_items", "model_distributions", "human_distributions"} <= set(db.table_names())
    assert "reference_distributions" not in db.table_names()
    assert db["model_distributions"].pks == ["run", "model", "concept", "style", "cfg"]
    assert db["human_distributions"].pks == ["source", "concept_key"]
    assert set(db["run_items"].columns_dict) == {
        "id",
        "run",
        "model",
        "concept",
        "noun",
        "style",
        "cfg",
        "sample",
        "seed",
        "prompt",
        "status",
        "image_path",
        "image_sha256",
        "mask_path",
        "mask_sha256",
        "summary_path",
        "detected",
        "segment_status",
        "n_pixels",
        "gen_seconds",
        "seg_seconds",
        "error",
        "updated_at",
    }


def test_plan_covers_the_grid_with_base_nouns_and_item_seeds(tiny):
    items, config = _plan(tiny, concepts=("apple", "rotten apple"))
    assert len(items) == 2 * 2 * 2 * 2
    rotten = [i for i in items if i["concept"] == "rotten apple"]
    assert {i["noun"] for i in rotten} == {"apple"}
    assert all(
        i["seed"] == item_seed("tiny-random", i["concept"], i["style"], i["cfg"], i["sample"]) for i in items
    )
    assert config["models"]["tiny-random"]["cfg_scales"] == [2.0, 7.5]
    assert config["concepts"] == ["apple", "rotten apple"] and config["samples"] == 2


def test_creating_a_run_again_keeps_its_items_and_a_changed_grid_is_refused(db, tiny):
    items, config = _plan(tiny)
    assert runs.create_run(db, "r", items, config) == 16
    assert runs.create_run(db, "r", items, config) == 16
    assert db["run_items"].count == 16
    _, other = _plan(tiny, cfgs=(3.0,))
    with pytest.raises(
        runs.RunError,
        match=r"^run 'r' exists with a different configuration \(models\.tiny-random\.cfg_scales: \[2\.0, 7\.5\] "
        r"→ \[3\.0\]\); choose another name, or resume it with --run alone$",
    ):
        runs.create_run(db, "r", items, other)
    # A run of the other kind under the name: said so, not as a diff (outside probe 182).
    with pytest.raises(runs.RunError) as clash:
        runs.create_run(db, "r", items, {**config, "mode": "explicit"})
    assert (
        str(clash.value)
        == "run 'r' is a concept run, so it cannot hold an explicit-color run: choose another name"
    )
    with pytest.raises(runs.RunError, match="`run` name must be 1-80 letters"):
        runs.create_run(db, "a/b", items, config)
    # A name apart from case and spacing: a second run no list told apart (outside probe 193).
    runs.create_run(db, "Probe Run", items, config)
    for near in ("probe run", "Probe  Run", "PROBE RUN "):
        with pytest.raises(
            runs.RunError,
            match=rf"^run '{near}' is run 'Probe Run' apart from case and spacing; resume 'Probe Run', or "
            "choose another name$",
        ):
            runs.create_run(db, near, items, config)
    assert db["runs"].count == 2 and db["run_items"].count == 32


def test_a_run_name_with_letters_or_digits_beyond_ascii_is_refused_saying_so(db, tiny):
    # It said "letters" and refused 'café': the names go into folder names and URLs.
    items, config = _plan(tiny)
    for name in ("café", "تقييم النسخة ١", "苹果", "run\n"):
        with pytest.raises(runs.RunError, match=r"\(ASCII letters a-z, A-Z and digits 0-9 only\)"):
            runs.create_run(db, name, items, config)
    assert db["runs"].count == 0 and db["run_items"].count == 0
    assert runs.check_run_name("Run 1.b_c-d") == "Run 1.b_c-d"


def test_a_run_keeps_one_masking_once_an_image_is_masked(db, tiny):
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    assert runs.run_masking(db, "r") is None
    paper = {"detector": "IDEA-Research/grounding-dino-base", "sam": "facebook/sam-vit-huge"}
    first = {**paper, "box_threshold": 0.35, "text_threshold": 0.25}
    looser = {**first, "box_threshold": 0.2}
    runs.claim_masking(db, "r", first)
    runs.claim_masking(db, "r", looser)  # nothing masked yet: the last one given is kept
    assert runs.run_masking(db, "r") == looser
    runs.record_items(db, [{"id": 1, "status": "segmented", "segment_status": "no_detection"}])
    runs.claim_masking(db, "r", looser)  # the same again: it goes on
    with pytest.raises(runs.RunError) as refused:
        runs.claim_masking(db, "r", first)
    assert str(refused.value) == (
        "run 'r' is masked with box_threshold=0.2, detector=IDEA-Research/grounding-dino-base, "
        "sam=facebook/sam-vit-huge, text_threshold=0.25; the masking given now differs in "
        "['box_threshold']: give the run's own masking to go on (one run's distributions come "
        "from one masking), or start another run"
    )
    with pytest.raises(runs.RunError, match=r"differs in \['detector', 'preset', 'sam'\]"):
        runs.claim_masking(db, "r", {"preset": "tiny-random", "box_threshold": 0.2, "text_threshold": 0.25})
    assert runs.run_masking(db, "r") == looser
    with pytest.raises(runs.RunError, match="no run named 'x'"):
        runs.claim_masking(db, "x", first)


def test_an_unknown_run_name_is_quoted_cut_and_the_newest_runs_listed(db):
    for i in range(runs.KNOWN_RUNS_LISTED + 2):
        runs.create_run(db, f"run-{i:02d}", [], {"n": i})
    with pytest.raises(runs.RunError) as refused:
        runs.run_config(db, "y" * 100_000)
    message = str(refused.value)
    assert message == (
        f"no run named '{'y' * 80}'… (100000 characters); known runs, newest first: "
        + ", ".join(f"run-{i:02d}" for i in range(11, 1, -1))
        + " and 2 older"
    )


def test_one_process_at_a_time_holds_a_run_and_a_dead_ones_lease_lapses(db, tiny):
    """An outside tester's second app server on the same database showed a running job as
    stopped and ran the run a second time beside the first."""
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    t0 = storage.utcnow()
    runs.claim_job(db, "r", "vm:1", now=t0)
    runs.claim_job(db, "r", "vm:1", now=t0)  # its own lease: renewed
    assert runs.job_elsewhere(db, "r", "vm:2", now=t0 + dt.timedelta(seconds=5)) == ("vm:1", 5.0)
    assert runs.job_elsewhere(db, "r", "vm:1", now=t0) is None
    with pytest.raises(runs.RunError) as refused:
        runs.claim_job(db, "r", "vm:2", now=t0 + dt.timedelta(seconds=5))
    assert str(refused.value) == (
        "run 'r' has a job running in another process (vm:1, last heard from 5 s ago): stop it "
        "there, or, if that process has died, wait 55 s"
    )
    runs.renew_job(db, "r", "vm:2", now=t0 + dt.timedelta(seconds=50))  # not the holder: nothing
    runs.renew_job(db, "r", "vm:1", now=t0 + dt.timedelta(seconds=50))
    assert runs.job_elsewhere(db, "r", "vm:2", now=t0 + dt.timedelta(seconds=100)) == ("vm:1", 50.0)
    # vm:1 died: its lease lapses LEASE_S after its last heartbeat, and vm:2 may take the run
    lapsed = t0 + dt.timedelta(seconds=50 + runs.LEASE_S)
    assert runs.job_elsewhere(db, "r", "vm:2", now=lapsed) is None
    runs.claim_job(db, "r", "vm:2", now=lapsed)
    runs.release_job(db, "r", "vm:1")  # not the holder: nothing
    assert runs.job_holder(db, "r")[0] == "vm:2"
    runs.release_job(db, "r", "vm:2")
    assert runs.job_holder(db, "r") == (None, None)
    with pytest.raises(runs.RunError, match="no run named 'x'"):
        runs.claim_job(db, "x", "vm:1")
    # A process of this machine that has ended (killed) holds nothing, whatever its heartbeat.
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    runs.claim_job(db, "r", f"{socket.gethostname()}:{int(ended.stdout)}")
    assert runs.job_elsewhere(db, "r", "vm:2") is None
    runs.claim_job(db, "r", f"{socket.gethostname()}:{os.getpid()}")  # this one runs
    assert runs.job_elsewhere(db, "r", "vm:2")[0] == f"{socket.gethostname()}:{os.getpid()}"


def test_a_job_lease_is_renewed_while_the_job_runs_and_released_after(tmp_path, tiny, monkeypatch):
    from evaluation.pipeline import jobs

    db = runs.connect(tmp_path / "db.sqlite")  # a file: the renewing thread opens its own connection
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    monkeypatch.setattr(runs, "LEASE_S", 0.2)  # renewed every 0.05 s
    with jobs.job_lease(db, "r") as owner:
        assert owner == jobs.process_owner() and runs.job_holder(db, "r")[0] == owner
        first = runs.job_holder(db, "r")[1]
        for _ in range(10_000):  # wait for a renewal (a condition, not a clock)
            if runs.job_holder(db, "r")[1] != first:
                break
            threading.Event().wait(0.01)
        assert runs.job_holder(db, "r")[1] > first
        with pytest.raises(runs.RunError, match="has a job running in another process"):
            runs.claim_job(db, "r", "elsewhere:1")
    assert runs.job_holder(db, "r") == (None, None)
    db.close()
    memory = sqlite_utils.Database(memory=True)  # no file for a renewing thread to open
    storage.ensure_schema(memory)
    runs.create_run(memory, "r", items, config)
    assert storage.db_path(memory) == ""
    with jobs.job_lease(memory, "r") as owner:
        assert runs.job_holder(memory, "r")[0] == owner
        with jobs.job_lease(memory, "r"):  # a stage inside the run's lease: nothing added
            pass
        assert runs.job_holder(memory, "r")[0] == owner  # still held after the inner one
    assert runs.job_holder(memory, "r") == (None, None)


def test_a_bad_item_update_writes_nothing(db, tiny):
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    before = runs.items(db, "r")
    with pytest.raises(ValueError, match=r"item status must be one of .*got 'done'"):
        runs.record_items(
            db, [{"id": 1, "status": "generated", "image_path": "x"}, {"id": 2, "status": "done"}]
        )
    assert runs.items(db, "r") == before


def test_progress_names_the_reason_most_failed_items_gave(db, tiny):
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    assert runs.run_progress(db, "r").failure == ""
    ids = [row["id"] for row in runs.items(db, "r")]
    overflow = "the pipeline returned non-finite pixels (NaN/inf)"
    runs.record_items(
        db,
        [
            *({"id": i, "status": "failed", "error": overflow} for i in ids[:3]),
            {"id": ids[3], "status": "failed", "error": "out of memory"},
            {"id": ids[4], "status": "failed", "error": "x" * 1000},
        ],
    )
    progress = runs.run_progress(db, "r")
    assert (progress.failed, progress.failure) == (5, f"3 × {overflow}")
    runs.record_items(db, [{"id": i, "status": "pending", "error": None} for i in ids[:4]])
    assert runs.run_progress(db, "r").failure == "1 × " + "x" * (runs.FAILURE_CHARS - 4)


def test_generation_writes_content_named_images_and_rows(db, tiny, tmp_path):
    assert _generate(db, tiny, tmp_path) == 16
    rows = runs.items(db, "r")
    assert {r["status"] for r in rows} == {"generated"}
    for row in rows:
        path = tmp_path / row["image_path"]
        assert path.name == f"{row['image_sha256']}.png" and path.is_file()
    assert not list(tmp_path.rglob("*.tmp"))
    assert runs.pending_items(db, "r", "generate") == []
    assert _generate(db, tiny, tmp_path) == 0


def test_a_lost_files_batch_is_the_one_the_stage_made_and_rows_come_back_by_id(db, tiny):
    """`original_batches` cuts the run as `run_stage` cut its pending items (grid order, then
    model and cfg), reading whole rows only for those batches; `items_by_id` keeps the order
    asked for across SQLite's parameter bound."""
    items, config = _plan(tiny, samples=80)  # 2 concepts x 2 cfgs x 2 styles x 80: 640 items
    runs.create_run(db, "r", items, config)
    made = list(runs.batches(runs.pending_items(db, "r", "generate"), 3))
    assert original_batches(db, "r", "generate", {row["id"] for batch in made for row in batch}, 3) == made
    lost = {made[5][1]["id"], made[-1][0]["id"]}
    assert original_batches(db, "r", "generate", lost, 3) == [made[5], made[-1]]
    assert original_batches(db, "r", "segment", lost, 3) == []  # no image yet: segment took none
    ids = [row["id"] for row in runs.items(db, "r")][::-1]
    assert len(ids) == 640
    assert [row["id"] for row in runs.items_by_id(db, [*ids, 10**9])] == ids


def test_a_run_killed_mid_way_resumes_to_the_same_rows(tiny, tmp_path):
    reference = sqlite_utils.Database(memory=True)
    storage.ensure_schema(reference)
    _generate(reference, tiny, tmp_path / "a")

    crashed = sqlite_utils.Database(memory=True)
    storage.ensure_schema(crashed)

    def crash_after_first_batch(done, total):
        raise KeyboardInterrupt(f"killed after {done} of {total}")

    with pytest.raises(KeyboardInterrupt, match="killed after 4 of 16"):
        _generate(crashed, tiny, tmp_path / "b", progress=crash_after_first_batch)
    statuses = [r["status"] for r in runs.items(crashed, "r")]
    assert statuses.count("generated") == 4 and statuses.count("pending") == 12
    assert _generate(crashed, tiny, tmp_path / "b") == 12
    assert _rows(crashed) == _rows(reference)


class ReversedExecutor:
    """Another executor: batches in reverse order, results handed back in that order."""

    def run(self, work, batches, on_result):
        for batch in reversed(list(batches)):
            on_result(work(batch))


def test_any_executor_with_the_same_interface_gives_the_same_rows(tiny, tmp_path):
    first, second = (sqlite_utils.Database(memory=True) for _ in range(2))
    for database in (first, second):
        storage.ensure_schema(database)
    _generate(first, tiny, tmp_path / "a")
    _generate(second, tiny, tmp_path / "b", executor=ReversedExecutor())
    assert _rows(first) == _rows(second)


def _segment_and_extract(db, segmenters, data_dir, threshold):
    work = SegmentationWork(*segmenters, data_dir, threshold, threshold)
    assert run_stage(db, "r", "segment", work, 8) == 16
    return extract(db, "r", data_dir)


def test_end_to_end_run_gives_distributions_and_scores(db, tiny, segmenters, tmp_path):
    _generate(db, tiny, tmp_path)
    assert _segment_and_extract(db, segmenters, tmp_path, 0.0) == 8
    rows = runs.items(db, "r")
    assert {(r["status"], r["segment_status"], r["detected"]) for r in rows} == {("segmented", "ok", 1)}
    for row in rows:
        mask = read_image(tmp_path, row["mask_path"])
        with np.load(tmp_path / row["summary_path"]) as summary:
            assert int(summary["n_pixels"]) == row["n_pixels"] == mask.sum() > 0
            np.testing.assert_array_equal(
                summary["pixels"], image_pixels(read_image(tmp_path, row["image_path"]), mask)
            )
    stored = runs.model_distributions(db, run="r")
    assert len(stored) == 8 and all(r["n_images"] == 2 and r["n_excluded"] == 0 for r in stored)
    first = stored[0]
    group = [
        r
        for r in rows
        if (r["concept"], r["style"], r["cfg"]) == (first["concept"], first["style"], first["cfg"])
    ]
    direct = concept_distribution(
        [read_image(tmp_path, r["image_path"]) for r in group],
        [read_image(tmp_path, r["mask_path"]) for r in group],
    )
    np.testing.assert_allclose(first["p"], direct.p, rtol=1e-12, atol=1e-15)
    assert sum(len(g["image_indices"]) for g in first["groups"]) == 2
    assert extract(db, "r", tmp_path) == 0

    human = load_reference_csv()
    long = scoring.score(stored, human, load_concepts())
    assert len(long) == 8 and set(long["concept"]) == set(CONCEPTS)
    expected = metrics.emd_rows(human[first["concept"]][None], first["p"][None])[0]
    match = long[
        (long.concept == first["concept"]) & (long["style"] == first["style"]) & (long.cfg == first["cfg"])
    ]
    np.testing.assert_allclose(match["emd"].iloc[0], expected, rtol=1e-9)
    assert long["pcc"].between(-1, 1).all() and (long["emd"] >= 0).all() and (long["ed"] >= 0).all()
    table = tables.table1(long, cfg=tables.POOL_CFG).values
    assert list(table.index) == ["tiny-random"]
    np.testing.assert_allclose(
        table[("original", "natural", "emd")].iloc[0],
        long[long["style"] == "natural"]["emd"].mean(),
        rtol=1e-9,
    )
    assert ("emotional", "clipart", "pcc") not in table.columns
    at_cfg = [r for r in stored if r["style"] == "clipart" and r["cfg"] == 2.0]
    human_rows, model_rows = (
        np.stack([human[r["concept"]] for r in at_cfg]),
        np.stack([r["p"] for r in at_cfg]),
    )
    table = tables.table2(long, cfg=2.0).values
    assert table[("original", "clipart", "dca")].iloc[0] == pytest.approx(metrics.dca(human_rows, model_rows))
    np.testing.assert_allclose(
        table[("original", "clipart", "hue_diff")].iloc[0],
        metrics.delta_hue(human_rows, model_rows),
        rtol=1e-12,
    )


def test_images_without_detection_are_recorded_excluded_and_counted(db, tiny, segmenters, tmp_path):
    _generate(db, tiny, tmp_path)
    assert _segment_and_extract(db, segmenters, tmp_path, 1.0) == 8
    rows = runs.items(db, "r")
    assert {(r["segment_status"], r["detected"], r["mask_path"]) for r in rows} == {("no_detection", 0, None)}
    assert runs.exclusion_counts(db, run="r") == [
        {"model": "tiny-random", "n_segmented": 16, "n_ok": 0, "n_no_detection": 16, "n_empty_mask": 0}
    ]
    stored = runs.model_distributions(db, run="r")
    assert all(r["p"] is None and (r["n_images"], r["n_excluded"]) == (0, 2) for r in stored)
    assert scoring.score(stored, load_reference_csv(), load_concepts()).empty
    # A run with explicit-color prompts is no concept run: `score`'s counts leave its images out.
    db["explicit_prompts"].insert(
        {
            "run": "r",
            "prompt_id": "p1",
            "task": "t",
            "level": 1,
            "system": "css",
            "text": "a red cup",
            "objects": '["cup"]',
            "targets": '["red"]',
            "notation": "name",
            "category": "c",
        }
    )
    assert runs.exclusion_counts(db, concepts_only=True) == []
    assert runs.exclusion_counts(db)[0]["n_segmented"] == 16


def test_shipped_uw71_ratings_load_as_normalised_rows():
    raw = np.genfromtxt(UW71_RATINGS_CSV, delimiter=",", skip_header=1, usecols=range(1, 72))
    names = [line.split(",")[0] for line in UW71_RATINGS_CSV.read_text().splitlines()[1:]]
    loaded = load_reference_csv()
    assert list(loaded) == names and len(loaded) == 70
    apple = raw[names.index("apple")]
    np.testing.assert_allclose(loaded["apple"], apple / apple.sum(), rtol=1e-12)
    assert all(p.shape == (71,) and abs(p.sum() - 1) < 1e-12 for p in loaded.values())


@pytest.mark.parametrize(
    "cells, message",
    [
        (["nan"] + ["1"] * 70, r"ratings.csv row 2 \('apple'\): color 0 is nan, expected a finite number"),
        (["1"] * 5 + ["-0.2"] + ["1"] * 65, r"row 2 \('apple'\): color 5 is negative \(-0.2\)"),
        (["0"] * 71, r"row 2 \('apple'\): all 71 values are zero"),
        # outside probe 121: two values of 1e308 overflowed the sum and read as "zero total mass"
        (["1e308", "1e308"] + ["0"] * 69, r"row 2 \('apple'\): the values sum past the largest number"),
        (["0.5"] * 71, r"row 2 \('apple'\): all 71 values are equal \(0.5\), so the row prefers no color"),
        (["1"] * 70, r"row 2 \('apple'\): expected 71 values after the concept, got 70"),
        (["x"] + ["1"] * 70, r"row 2 \('apple'\): color 0 is not a number, got 'x'"),
        # Python's float read "1_0" as 10 and other scripts' digits as numbers (outside probe 163)
        (["1_0"] + ["1"] * 70, r"row 2 \('apple'\): color 0 is not a number, got '1_0'"),
        (["1"] * 3 + ["\u0661"] + ["1"] * 67, r"row 2 \('apple'\): color 3 is not a number, got '\u0661'"),
    ],
)
def test_bad_reference_rows_are_rejected_naming_the_row(tmp_path, cells, message):
    path = tmp_path / "ratings.csv"
    path.write_text("," + ",".join(map(str, range(71))) + "\napple," + ",".join(cells) + "\n")
    with pytest.raises(ReferenceError, match=message):
        load_reference_csv(path)


def test_a_reference_saved_with_semicolons_is_refused_saying_so(tmp_path):
    """A German Excel's file (semicolons, decimal commas, a BOM, CRLF) was refused for its
    header, "got []", which did not say why."""
    path = tmp_path / "excel.csv"
    header = ";".join(["", *map(str, range(71))])
    path.write_bytes(("\ufeff" + header + "\r\napple;" + ";".join(["0,5"] * 70 + ["0,7"]) + "\r\n").encode())
    with pytest.raises(
        ReferenceError, match=r"^excel\.csv is separated by semicolons .*: save it with commas"
    ):
        load_reference_csv(path)


@pytest.mark.parametrize(
    "encoding, message",
    [
        (
            "latin-1",
            r"^lab\.csv is not UTF-8 text: line 3 holds the byte 0xc4, which UTF-8 does not read there ",
        ),
        (
            "utf-16",
            r"^lab\.csv is UTF-16 text \(as a spreadsheet's 'Unicode Text' saves it\): ",
        ),
        # Without a byte-order mark (outsider 102: "column 2 holds '\x000\x00'").
        (
            "utf-16-le",
            r"^lab\.csv is UTF-16 text without a byte-order mark \(zero bytes between its letters\): ",
        ),
    ],
)
def test_a_reference_in_another_encoding_is_refused_naming_the_file_and_line(tmp_path, encoding, message):
    """Outsider 100: a Latin-1 or UTF-16 file got the codec's bare words, naming no file or row."""
    path = _lab_csv(tmp_path, "apple", "\xc4pfel gr\xfcn")
    path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))
    with pytest.raises(ReferenceError, match=message + ".*save it as UTF-8 text"):
        load_reference_csv(path)


def test_empty_columns_after_the_last_are_dropped_and_a_wrong_header_names_its_column(tmp_path):
    """Outsider 100: two empty columns a spreadsheet left were refused as "got ['0', '1', '2',
    '3', '4']...", the five right cells."""
    path = _lab_csv(tmp_path, "apple", "\xc4pfel")
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("".join(f"{line},,\r\n" for line in lines) + ",,,\r\n", encoding="utf-8")
    assert list(load_reference_csv(path)) == ["apple", "\xc4pfel"]
    path.write_text(lines[0].replace(",41,", ",40,") + "\n" + lines[1] + "\n", encoding="utf-8")
    with pytest.raises(
        ReferenceError, match=r"after the first cell: column 43 holds '40' where '41' belongs$"
    ):
        load_reference_csv(path)
    path.write_text(lines[0] + ",71\n" + lines[1] + ",7\n", encoding="utf-8")
    with pytest.raises(
        ReferenceError, match=r"column 73 comes after color 70 and is not empty in every row$"
    ):
        load_reference_csv(path)


_KNOWN = frozenset(concept.key for concept in load_concepts())


def test_a_reference_with_a_zero_byte_in_one_name_is_refused_naming_its_line(tmp_path):
    """Outside probe 124: one NUL in a concept's name was called UTF-16 text without a byte-order mark."""
    path = _lab_csv(tmp_path, "apple", "ban\x00ana")
    with pytest.raises(
        ReferenceError, match=r"^lab\.csv holds a zero byte \(NUL\) on line 3, which no text holds"
    ):
        load_reference_csv(path)


def _lab_csv(tmp_path, *names: str):
    row = ",".join(["1"] * 70 + ["2"])
    path = tmp_path / "lab.csv"
    path.write_text("," + ",".join(map(str, range(71))) + "\n" + "".join(f"{name},{row}\n" for name in names))
    return path


@pytest.mark.parametrize(
    "names, message",
    [
        (
            ("robot", "Apple "),
            r"lab.csv row 3: no concept is named 'Apple '; write 'apple' (concept keys are written as in the concept list",
        ),
        (
            ("robot", "robots"),
            "lab.csv names no concept of the benchmark ('robot', 'robots'): name each row by a "
            "concept key, such as 'apple' or 'rotten apple'",
        ),
        (("robot", "rotten  apple"), "row 3: no concept is named 'rotten  apple'; write 'rotten apple'"),
        # Spelled otherwise in ways a reader cannot see (outsider 65): blanks around the key,
        # full-width letters, a zero-width space.
        (("robot", " apple"), "lab.csv row 3: no concept is named ' apple'; write 'apple'"),
        (("robot", "ａｐｐｌｅ"), "lab.csv row 3: no concept is named 'ａｐｐｌｅ'; write 'apple'"),
        (("robot", "apple\u200b"), "lab.csv row 3: no concept is named 'apple\\u200b'; write 'apple'"),
        # A name beyond the benchmark is stored as written, so blanks around it are refused, not
        # trimmed; one text twice in two Unicode forms is a repeat, shown so that they differ.
        (
            ("robot", "  padded name "),
            "lab.csv row 3: '  padded name ' has blanks before or after it; write 'padded name'",
        ),
        (
            ("cr\u00e8me", "cre\u0300me", "apple"),
            "lab.csv rows 2 and 3: 'cr\\xe8me' and 'cre\\u0300me' are one name, 'cre\u0300me', written with "
            "other Unicode characters (composed and combining accents); keep one row",
        ),
    ],
)
def test_a_lab_reference_naming_a_concept_in_other_capitals_or_none_of_them_is_refused(
    tmp_path, names, message
):
    """An outside lab's rows 'robot' and 'Apple ' were stored silently; scoring then failed
    without naming either, and the set's label was taken for good."""
    with pytest.raises(ReferenceError) as refused:
        load_reference_csv(_lab_csv(tmp_path, *names), _KNOWN)
    assert message in str(refused.value)


def test_a_lab_reference_keeps_its_names_beyond_the_benchmark(tmp_path):
    known = _KNOWN
    names = ["robot", "apple", "腐烂的苹果", "تفاحة فاسدة", "cre\u0300me br\u00fbl\u00e9e", "quoted, comma"]
    path = _lab_csv(tmp_path, *names[:-1], '"quoted, comma"')
    assert list(load_reference_csv(path, known)) == names  # ratings beyond the benchmark stay, as written
    shipped = load_reference_csv(known=known)  # it rates "angry" and "above" too
    assert len(shipped) == 70 and len(set(shipped) & known) == 22


def test_reference_distributions_round_trip_by_source(db):
    loaded = load_reference_csv()
    assert human_rows.store_reference(db, "uw71", loaded, "test provenance") == 70
    back = human_rows.vectors(db, "uw71")
    np.testing.assert_allclose(back["apple"], loaded["apple"], rtol=1e-15)
    assert human_rows.reference_sources(db) == ["uw71"]
    with pytest.raises(
        human_rows.UnknownSource, match=r"`source` must be one of \['designers', 'uw71'\], got 'lab'"
    ):
        human_rows.vectors(db, "lab")
    with pytest.raises(ValueError, match=r"x/apple: `p` must sum to 1 \(within 1e-06\), got 35.5"):
        human_rows.store_reference(db, "x", {"apple": np.full(71, 0.5)}, "")
    assert human_rows.reference_sources(db) == ["uw71"]


def test_groups_are_stored_as_json(db, tiny):
    items, config = _plan(tiny)
    runs.create_run(db, "r", items, config)
    p = np.full(71, 1 / 71)
    runs.store_model_distribution(
        db, "r", "tiny-random", "apple", "natural", 2.0, p, 2, 0, {"sizes": np.array([1, 1])}
    )
    row = db["model_distributions"].get(("r", "tiny-random", "apple", "natural", 2.0))
    assert json.loads(row["groups"]) == {"sizes": [1, 1]}


def test_a_resumed_stage_removes_the_temporaries_a_killed_write_left(tmp_path):
    from evaluation.pipeline.fileio import remove_temporaries, write_atomic

    folder = tmp_path / "runs" / "r" / "images"
    write_atomic(folder / "kept.png", b"whole")
    (folder / ".half.png.x1y2.tmp").write_bytes(b"ha")
    removed = remove_temporaries(tmp_path / "runs" / "r")
    assert [p.name for p in removed] == [".half.png.x1y2.tmp"]
    assert sorted(p.name for p in folder.iterdir()) == ["kept.png"]
    assert remove_temporaries(tmp_path / "runs" / "missing") == []


def test_a_run_whose_every_image_was_excluded_says_so_and_counts_why(db, tmp_path):
    """Scoring such a run blamed the human source (outside probe 148): `all_excluded` says
    what happened, with the counts; a run with one usable image, or none stored, is not it."""
    from tests.research_data import store_segmented_run

    assert runs.all_excluded(db) is None  # nothing stored
    store_segmented_run(
        db,
        tmp_path,
        "blind",
        {("m", "apple", "natural", 5.0): [None, None], ("m", "banana", "natural", 5.0): [None]},
    )
    expected = (
        "every image of {} was excluded by the masking (3 without a detection, 0 with an empty mask), so "
        "no model distribution has a color to score: segment again with a lower box threshold, or another segmenter"
    )
    assert runs.all_excluded(db, run="blind") == expected.format("run 'blind'")
    assert runs.all_excluded(db) == expected.format("the stored runs")
    store_segmented_run(db, tmp_path, "seen", {("m", "apple", "natural", 5.0): [None, (200, 20, 30)]})
    assert runs.all_excluded(db, run="seen") is None and runs.all_excluded(db) is None
    assert runs.all_excluded(db, run="blind") == expected.format("run 'blind'")
    # One model of a run blind, another seeing: the one asked for is what counts.
    store_segmented_run(
        db,
        tmp_path,
        "half",
        {("m", "apple", "natural", 5.0): [None], ("k", "apple", "natural", 5.0): [(9, 9, 9)]},
    )
    assert runs.all_excluded(db, run="half") is None and runs.all_excluded(db, run="half", model="k") is None
    assert runs.all_excluded(db, run="half", model="m") == (
        "every image of model 'm' in run 'half' was excluded by the masking (1 without a detection, 0 with an "
        "empty mask), so no model distribution has a color to score: segment again with a lower box threshold, "
        "or another segmenter"
    )
    assert [r["model"] for r in runs.exclusion_counts(db, run="half", model="m")] == ["m"]
