"""Load and faults at test size: concurrent designers and a SIGKILLed app through the real
endpoint, a killed evaluation run, the orphan sweep.

The same scenarios as ``bench/bench_load.py`` (which measures them at full size): a real
``python app.py`` process, designers talking to it through `gradio_client`. Here only
correctness is asserted, never timings.
"""

import hashlib
import json
import os
import re
from collections import Counter

import numpy as np
import pytest

from annotation import overview
from annotation.assignment import reserve
from annotation.coloring.store import store_coloring
from annotation.coloring.tasks import RESERVE_AHEAD
from annotation.concepts import sync_concepts
from annotation.files import resolve, store_png
from annotation.integrity import orphaned_files, sweep_orphans
from annotation.people.accounts import create_annotators
from bench.app_process import AppProcess
from bench.bench_load import _pool_size, concurrent_designers, kill_app, prepare_study
from bench.client_processes import ClientProcesses
from bench.designer_client import Ack
from bench.run_resume import kill_and_resume_run
from bench.store_checks import check_store
from storage import open_db
from storage.data_folder import QUARANTINE
from tests.research_data import tiny_models  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(600)


def test_concurrent_designers_through_the_endpoint_store_each_submission_once_within_quotas(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 6, 1, side=128)
    # Five people away from their desks hold 125 of the pool's slots for the whole test:
    # 30 stay free for 6 designers who want 8 each, so they compete for the last ones.
    db = open_db(study.db_path)
    try:
        for away, _ in create_annotators(db, 5, "designer"):
            reserve(db, "coloring", away["id"], np.random.default_rng(away["id"]), 25, minutes=10**6)
        supply = overview.coloring_slots(db, study.k)["free"]
    finally:
        db.close()
    assert supply == len(study.concepts) * study.k - 125 == 30
    with AppProcess(study.db_path, study.data_dir, log_path=tmp_path / "app.log") as app:
        acks = concurrent_designers(app.url, study, 8, seed=1)
    assert check_store(study.db_path, study.data_dir, acks, k=study.k) == []
    assert len({a.coloring_id for a in acks}) == len(acks)
    practice = Counter(a.designer for a in acks if a.practice)
    main = {d: sum(a.designer == d and not a.practice for a in acks) for d, _ in study.designers}
    assert practice == {d: 3 for d, _ in study.designers}
    assert sum(main.values()) <= supply and min(main.values()) < 8, "the pool runs dry: designers compete"
    # Only a few tasks are reserved ahead, so the pool is used up to those reservations.
    assert sum(main.values()) >= supply - 6 * RESERVE_AHEAD


def test_designers_spread_over_client_processes_are_stored_once_in_order_with_the_app_pinned(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 3, _pool_size(3), side=128)
    first, last = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))
    with (
        AppProcess(study.db_path, study.data_dir, log_path=tmp_path / "app.log", cpus=[first]) as app,
        ClientProcesses(2, cpus=[last]) as clients,
    ):
        assert os.sched_getaffinity(app.process.pid) == {first}
        acks = concurrent_designers(app.url, study, 2, seed=1, clients=clients)
    assert check_store(study.db_path, study.data_dir, acks, k=study.k) == []
    assert [a.designer for a in acks] == [d for d, _ in study.designers for _ in range(3 + 2)]
    assert os.sched_getaffinity(0) >= {first, last}, "the caller's own affinity is restored"


def test_app_sigkilled_inside_a_write_keeps_every_acknowledged_coloring_and_sweeps_its_files(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 4, 1, side=128)
    result = kill_app(study, 6, 8, seed=2, log_path=tmp_path / "app.log")
    assert len(result.acks) >= 8 and len(result.acks_after_restart) >= 2
    assert result.problems == []
    assert result.interrupted_files and set(result.interrupted_files) <= set(result.swept)
    assert all((study.data_dir / QUARANTINE / path).is_file() for path in result.swept)
    # The restart says so in its log, with the time (it said nothing of the crash).
    log = (tmp_path / "app.log").read_text()
    assert re.search(
        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC WARNING app.common: moved {len(result.swept)} files? no row "
        rf"names into {QUARANTINE}/ \(files over 5 min old; a younger one waits for a later start, so they may "
        rf"date from before the last run\): a write stopped part-way .*, the database was restored from a backup "
        r"older than them .*, or they are a deleted run's that a database kept beside this one named",
        log,
    ), log[-3000:]
    assert re.search(r"Ready: http://\S+ answers 200 \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", log)
    stored = {r["id"] for r in _rows(study.db_path, "colorings")}
    assert {a.coloring_id for a in result.acks + result.acks_after_restart} <= stored
    assert all(r["status"] in ("reserved", "submitted", "expired") for r in _rows(study.db_path, "tasks"))


def test_app_sigkilled_while_its_coloring_workers_run_loses_nothing_and_leaves_no_process(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 4, 1, side=512)
    result = kill_app(study, 6, 4, seed=3, log_path=tmp_path / "app.log", moment="pool")
    assert len(result.acks) >= 4 and len(result.acks_after_restart) >= 2
    assert result.problems == []
    assert result.stray_workers == []
    stored = {r["id"] for r in _rows(study.db_path, "colorings")}
    assert {a.coloring_id for a in result.acks + result.acks_after_restart} <= stored


def _rows(db_path, table):
    db = open_db(db_path)
    try:
        return list(db[table].rows)
    finally:
        db.close()


@pytest.fixture(scope="module")
def tiny_model(tiny_models):
    return tiny_models / "tiny-random"  # built once per test session (tests.research_data)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_evaluation_run_killed_and_resumed_ends_as_an_uninterrupted_run(tmp_path, tiny_model):
    result = kill_and_resume_run(
        tmp_path,
        tiny_model,
        concepts=("apple", "banana"),
        styles=("natural",),
        samples=2,
        cfg=(2.0, 7.5),
        batch_size=1,
        kill_after=2,
    )
    assert result.total == 8
    assert 2 <= result.generated_at_kill < result.total
    assert [row["status"] for row in result.rows] == ["generated"] * 8
    assert result.rows == result.reference_rows
    assert result.files == result.reference_files
    assert result.orphans == []


def _hash_named(folder, text):
    path = folder / f"{hashlib.sha256(text.encode()).hexdigest()}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_orphaned_files_are_unnamed_hash_and_temporary_files_outside_skipped_folders(tmp_path, db):
    data = tmp_path / "data"
    sync_concepts(db)
    named = store_png(data, np.zeros((4, 4), dtype=np.uint8))
    db["sketches"].insert(
        {
            "base": "apple",
            "path": named.path,
            "sha256": named.sha256,
            "source": "test",
            "selected": 1,
            "created": "2025-01-01",
        }
    )
    orphan = _hash_named(data / "colorings" / "ab", "orphan")
    temporary = data / "runs" / "r" / "images" / ".x.png.1234.tmp"
    temporary.parent.mkdir(parents=True)
    temporary.write_text("half")
    for kept in (data / "exports", data / "models" / "blobs", data / "orphans"):
        _hash_named(kept, "kept")
    (data / "colorconcept.sqlite").write_text("not a content-hash name")
    assert orphaned_files(db, data) == sorted(
        [orphan.relative_to(data).as_posix(), temporary.relative_to(data).as_posix()]
    )
    assert orphaned_files(db, tmp_path / "missing") == []


def test_sweep_moves_orphans_aside_once_and_audits_it(tmp_path, db):
    data = tmp_path / "data"
    orphan = _hash_named(data / "colorings" / "cd", "orphan")
    relative = orphan.relative_to(data).as_posix()
    assert sweep_orphans(db, data) == [relative]
    assert not orphan.exists() and (data / "orphans" / relative).read_text() == "orphan"
    [row] = db["audit"].rows
    assert (row["actor"], row["action"], json.loads(row["details"])) == (
        "system",
        "sweep_orphans",
        {"n": 1, "paths": [relative]},
    )
    assert sweep_orphans(db, data) == [] and db["audit"].count == 1


def test_min_age_leaves_files_that_may_still_be_committing(tmp_path, db):
    data = tmp_path / "data"
    fresh = _hash_named(data / "images" / "ef", "fresh")
    old = _hash_named(data / "images" / "01", "old")
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - 3600))
    assert orphaned_files(db, data, min_age_s=60) == [old.relative_to(data).as_posix()]
    assert fresh.relative_to(data).as_posix() in orphaned_files(db, data)
    with pytest.raises(ValueError, match="`min_age_s` must be a number >= 0, got -1"):
        orphaned_files(db, data, min_age_s=-1)


def _library_submissions(study, n_designers):
    """One coloring per designer through the library: reserve, then store."""
    rng = np.random.default_rng(3)
    db = open_db(study.db_path)
    try:
        acks = []
        for designer, _ in study.designers[:n_designers]:
            [task] = reserve(db, "coloring", designer, rng, 1, k=study.k)
            image = np.full((16, 16, 3), 255, dtype=np.uint8)
            image[:8] = rng.integers(0, 256, size=3)
            mask = np.zeros((16, 16), dtype=bool)
            mask[:8] = True
            coloring_id = store_coloring(
                db,
                study.data_dir,
                designer,
                task.concept_key,
                image,
                mask,
                task_id=task.id,
                seconds_spent=60.0,
                k=study.k,
            )
            acks.append(Ack(designer, task.id, coloring_id, task.concept_key, 0.0))
        return acks
    finally:
        db.close()


def test_files_that_vanish_while_listed_are_not_orphans_and_do_not_stop_the_check(tmp_path, db):
    data = tmp_path / "data"
    orphan = _hash_named(data / "colorings" / "ab", "orphan")
    gone = data / "colorings" / "cd" / ("c" * 64 + ".png")
    gone.parent.mkdir(parents=True)
    gone.symlink_to(tmp_path / "renamed-meanwhile.png")  # listed, then stat finds nothing
    assert orphaned_files(db, data) == [orphan.relative_to(data).as_posix()]
    assert orphaned_files(db, data, min_age_s=60) == []


def test_check_store_names_each_kind_of_damage(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 2, 1, side=64)
    acks = _library_submissions(study, 1)
    assert check_store(study.db_path, study.data_dir, acks, k=study.k) == []
    store = open_db(study.db_path)
    try:
        first = store["colorings"].get(acks[0].coloring_id)
        resolve(study.data_dir, first["mask_path"]).write_bytes(b"changed")
        resolve(study.data_dir, first["image_path"]).unlink()
        other = next(d for d, _ in study.designers if d != first["annotator_id"])
        store["colorings"].insert({**first, "id": None, "annotator_id": other})
    finally:
        store.close()
    lost = Ack(other, 999, 999, first["concept_key"], 0.1)
    _hash_named(study.data_dir / "colorings" / "00", "stray")
    problems = check_store(study.db_path, study.data_dir, [*acks, lost], k=1)
    assert "acknowledged coloring 999 (task 999) is missing" in problems
    assert any(p.startswith(f"concept {first['concept_key']!r} has 2 designers") for p in problems)
    assert any("has no submitted task" in p for p in problems)
    assert any(p.endswith("has no distribution") for p in problems)
    assert f"coloring {first['id']}: image {first['image_path']} is missing" in problems
    assert f"coloring {first['id']}: mask file does not match its hash" in problems
    assert any(p.startswith("orphaned file colorings/00/") for p in problems)
    wrong = Ack(other, acks[0].task_id, acks[0].coloring_id, first["concept_key"], 0.1)
    assert (
        f"acknowledged coloring {first['id']} is stored as another designer's or concept's"
    ) in check_store(study.db_path, study.data_dir, [wrong], k=study.k)
