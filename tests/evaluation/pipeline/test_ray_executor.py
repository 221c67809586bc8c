"""The Ray executor on a local two-CPU Ray cluster: a killed worker retried, a killed head
resumed on Ray to the same rows and files as in-process, and clear messages without a cluster.

One local cluster serves the module (`ray.init(num_cpus=2)` through
`evaluation.pipeline.ray_executor.connect`) and is shut down at its end. Every run is the same
tiny-model grid (2 concepts x 2 styles x 2 CFG x 2 seeds) through ``python -m evaluation
run``; torch uses one thread in this process, as Ray's one-CPU workers do, so the CPU
arithmetic and hence the PNG bytes are the same.
"""

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from app.evaluate import _worker_lines  # noqa: E402
from evaluation.__main__ import build_parser  # noqa: E402
from evaluation.__main__ import main as evaluation_main  # noqa: E402
from evaluation.cli import generate, open_db  # noqa: E402
from evaluation.pipeline import runs  # noqa: E402
from evaluation.pipeline.jobs import SegmenterSpec, run_pipeline  # noqa: E402
from evaluation.pipeline.ray_executor import RayExecutor, RayUnavailable, connect, shutdown  # noqa: E402
from evaluation.pipeline.stages import GenerationWork, run_stage  # noqa: E402
from storage import read_only  # noqa: E402
from tests.research_data import tiny_grid_argv, tiny_grid_reference, tiny_models, tiny_paths  # noqa: E402, F401

ROOT = Path(__file__).resolve().parents[3]
RUN = "grid"
VOLATILE = {"gen_seconds", "seg_seconds", "updated_at"}
pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


@pytest.fixture(scope="module")
def cluster():
    info = connect("local", num_cpus=2)
    yield info
    shutdown()


@pytest.fixture(scope="module")
def models(tiny_models):
    return tiny_paths(tiny_models)


def _argv(models, folder: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--run",
        RUN,
        "--model",
        "tiny-random",
        "--source",
        str(models["tiny-random"]),
        "--concepts",
        "apple,banana",
        "--styles",
        "natural,clipart",
        "--cfg",
        "2,7.5",
        "--samples",
        "2",
        "--batch-size",
        "1",
        "--detector",
        str(models["tiny-grounding-dino"]),
        "--sam",
        str(models["tiny-sam"]),
        "--box-threshold",
        "0",
        "--text-threshold",
        "0",
        "--device",
        "cpu",
        "--db",
        str(folder / "db.sqlite"),
        "--data-dir",
        str(folder / "data"),
        *extra,
    ]


def _outcome(folder: Path) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Item rows (without timings), distributions, and sha256 of every file under runs/."""
    db = runs.connect(folder / "db.sqlite")
    try:
        items = [{k: v for k, v in row.items() if k not in VOLATILE} for row in runs.items(db, RUN)]
        stored = runs.model_distributions(db, run=RUN)
    finally:
        db.close()
    files = {
        p.relative_to(folder / "data").as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((folder / "data" / "runs").rglob("*"))
        if p.is_file()
    }
    return items, stored, files


def _assert_same(outcome, reference) -> None:
    (items, stored, files), (ref_items, ref_stored, ref_files) = outcome, reference
    assert items == ref_items
    assert files == ref_files
    assert len(stored) == len(ref_stored) == 8
    for row, ref in zip(stored, ref_stored):
        assert {k: v for k, v in row.items() if k not in ("p", "created_at")} == {
            k: v for k, v in ref.items() if k not in ("p", "created_at")
        }
        assert np.array_equal(row["p"], ref["p"])


@pytest.fixture(scope="module")
def reference(models, tiny_grid_reference):
    # The in-process run of this grid, made once per test session (tests.research_data):
    # tests/evaluation/pipeline/test_ray_node_loss.py compares its run with the same one.
    assert tiny_grid_argv(models, Path("X")) == _argv(models, Path("X"))
    outcome = _outcome(tiny_grid_reference)
    assert {(r["status"], r["segment_status"]) for r in outcome[0]} == {("segmented", "ok")}
    return outcome


def _created_run(models, folder: Path):
    args = build_parser().parse_args(_argv(models, folder))
    db = open_db(args, create=True)
    generate.create_or_resume(db, args)
    return db, SegmenterSpec(args.detector, args.sam, 0.0, 0.0)


def test_a_worker_killed_mid_run_is_retried_and_the_result_is_identical(cluster, models, reference, tmp_path):
    db, segmenter = _created_run(models, tmp_path)
    executor, killed = RayExecutor(2), []
    folder = (
        tmp_path / "data"
    ).as_uri()  # the run folder named as pyarrow's file:// URI, as an s3:// one would be

    def kill_worker_once(done: int, total: int) -> None:
        worker = executor.progress().get("worker 0")
        if not killed and worker is not None:  # worker 0 has its next batch in flight
            killed.append(worker.pids[-1])
            os.kill(worker.pids[-1], signal.SIGKILL)

    work = GenerationWork.from_run(runs.run_config(db, RUN), folder, device="auto")
    assert (
        run_stage(db, RUN, "generate", work, 1, executor=executor, progress=kill_worker_once, data_dir=folder)
        == 16
    )
    worker = executor.progress()["worker 0"]
    assert killed and worker.pids[0] == killed[0] and worker.restarts >= 1
    assert sum(p.items for p in executor.progress().values()) == 16
    # its batch in flight was lost with it and redone; the Evaluate tab's line says so
    assert worker.lost_batches >= 1 and executor.redone_batches == sum(
        p.lost_batches for p in executor.progress().values()
    )
    line = _worker_lines({"worker 0": worker})
    assert f"{worker.lost_batches} batch" in line and "lost with it and redone" in line
    run_pipeline(db, RUN, folder, segmenter, device="cpu")  # masks and distributions in-process
    db.close()
    _assert_same(_outcome(tmp_path), reference)


def _recorded(db_path: Path) -> int:
    try:
        with read_only(db_path) as conn:
            return conn.execute("SELECT count(*) FROM run_items WHERE status != 'pending'").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_a_head_killed_mid_run_resumes_on_ray_to_the_in_process_rows_and_files(
    cluster, models, reference, tmp_path, capsys
):
    # One Ray run serves both claims (a run on Ray equals the in-process one; a head killed
    # mid-run resumes to it): each Ray run starts a worker per CPU per stage, several CPU-s
    # each, so the head that is killed at its first item starts one.
    assert cluster.nodes == 1 and cluster.cpus == 2 and cluster.gpus == 0
    argv = [
        sys.executable,
        "-m",
        "evaluation",
        *_argv(models, tmp_path, "--executor", "ray", "--ray-address", cluster.address, "--workers", "1"),
    ]
    head = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while head.poll() is None and _recorded(tmp_path / "db.sqlite") == 0:
        time.sleep(0.05)
    head.kill()
    head.wait()
    at_kill = _outcome(tmp_path)
    assert sum(r["status"] != "pending" for r in at_kill[0]) > 0 and len(at_kill[1]) < 8
    capsys.readouterr()
    assert evaluation_main(_argv(models, tmp_path, "--executor", "ray")) == 0
    _assert_same(_outcome(tmp_path), reference)
    out = capsys.readouterr().out
    assert "segment on Ray:" in out and "extract on Ray:" in out
    # generation is reported on Ray when the killed head had left images to make
    left = any(r["status"] == "pending" for r in at_kill[0])
    assert ("generate on Ray:\n  worker 0 on" in out) == left


def test_a_run_on_ray_stopped_by_sigterm_says_so_in_one_line_and_exits_143(cluster, models, tmp_path):
    """The command's stop holds on Ray too: ``ray.init`` replaced its SIGTERM handler with
    ``sys.exit`` and Ray's crash handler took the signal, so the run printed a stack dump and
    ended in glibc's abort (status -6) instead (an outside check)."""
    argv = _argv(models, tmp_path, "--executor", "ray", "--ray-address", cluster.address, "--workers", "1")
    head = subprocess.Popen(
        [sys.executable, "-m", "evaluation", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while head.poll() is None and _recorded(tmp_path / "db.sqlite") == 0:
            time.sleep(0.05)
        head.send_signal(signal.SIGTERM)
        err = head.communicate(timeout=300)[1]
    finally:
        head.kill()
    assert head.returncode == 143, err[-2000:]
    assert "SIGTERM received" not in err and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "python -m evaluation run: stopped (SIGTERM); what was recorded stays: the same command again "
        "resumes a run"
    )


def test_no_reachable_cluster_or_no_ray_is_said_clearly_and_writes_nothing(
    cluster, models, tmp_path, capsys, monkeypatch
):
    with socket_bound() as port:
        with pytest.raises(
            RayUnavailable, match=rf"no Ray cluster reachable at '127.0.0.1:{port}'.*ray start --head"
        ):
            connect(f"127.0.0.1:{port}")
        code = evaluation_main(
            _argv(models, tmp_path, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}")
        )
    assert code == 2
    assert "error: no Ray cluster reachable at" in capsys.readouterr().err
    assert not (tmp_path / "data" / "runs").exists() and not (tmp_path / "db.sqlite").exists()
    with pytest.raises(RayUnavailable, match=r"`ray_address` must be host:port .* got 'nowhere'"):
        connect("nowhere")
    # A port that answers something else (a web server, a service that never replies) is
    # refused at once: Ray's own client retried it for minutes (outside probe 147).
    with (
        http_served() as port,
        pytest.raises(
            RayUnavailable,
            match=rf"^'127.0.0.1:{port}' answers but is no Ray cluster's head \(no gRPC within 1 s\): give the GCS port",
        ),
    ):
        connect(f"127.0.0.1:{port}", timeout_s=1)
    with (
        socket_listening() as port,
        pytest.raises(RayUnavailable, match="answers but is no Ray cluster's head"),
    ):
        connect(f"127.0.0.1:{port}", timeout_s=1)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(
        RayUnavailable, match=r"needs Ray, which is not installed: pip install 'ray\[default\]"
    ):
        connect()
    assert cluster.address  # the module's cluster is untouched by the refusals


class socket_bound:
    """A local port that is bound but not listening: connecting to it is refused."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.sock.close()


class socket_listening(socket_bound):
    """A local port that takes connections and never says a word."""

    def __enter__(self) -> int:
        port = super().__enter__()
        self.sock.listen()
        return port


@contextlib.contextmanager
def http_served() -> Iterator[int]:
    """The port of a plain HTTP server in this process."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_worker_counts_follow_the_cluster_and_bad_settings_are_refused(cluster):
    # Actors of earlier tests give their CPUs back asynchronously: wait until none is held,
    # so that what is free does not change between the two reads.
    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0) < cluster.cpus and time.monotonic() < deadline:
        time.sleep(0.2)
    free_cpus = int(ray.available_resources().get("CPU", 0))
    assert RayExecutor.for_stage("generate", cluster)._worker_count() == max(free_cpus, 1)
    assert RayExecutor.for_stage("segment", cluster, workers=1)._worker_count() == 1
    gpu_cluster = replace(cluster, gpus=8.0)
    assert [
        RayExecutor.for_stage(stage, gpu_cluster).gpus for stage in ("generate", "segment", "extract")
    ] == [1.0, 0.5, 0.0]
    assert RayExecutor.for_stage("generate", cluster).gpus == 0.0  # no GPU: one CPU per worker
    with pytest.raises(ValueError, match="`workers` must be a positive integer, got 0"):
        RayExecutor(0)
    with pytest.raises(ValueError, match="`capacity_wait_s` must be >= 0 seconds, got nan"):
        RayExecutor(1, capacity_wait_s=float("nan"))  # a stage without a node waited for ever
    with pytest.raises(ValueError, match="`stage` must be one of"):
        RayExecutor.for_stage("score", cluster)


def _wait_for_job(client, token, run: str) -> str:
    """The run's progress row once its job has ended (polled like the page's timer)."""
    import re

    while True:
        page = client.predict(token, api_name="/evaluate_progress")
        row = re.search(rf"<tr><td>{re.escape(run)}</td>.*?</tr>", page).group(0)
        if re.search(r"data-state='(queued|running|cancelling)'", row) is None:
            return row
        time.sleep(0.5)


def test_the_evaluate_tab_shows_the_cluster_runs_on_it_and_works_without_ray(
    cluster, models, tmp_path, monkeypatch
):
    from gradio_client.exceptions import AppError

    from tests.app_server import ADMIN_PASSWORD, make_config, running_app
    from tests.research_data import install_tiny, sign_in

    config = make_config(tmp_path)
    install_tiny(models["tiny-random"].parent, config.data_dir)
    # One image per run: a Ray run starts a worker per batch and stage (up to one per CPU),
    # each several CPU-s of imports and model loading.
    selection = [["tiny-random"], ["apple"], [], [], "", 0, 0, ["natural"], "7.5", 1]
    with running_app(config) as (client, _), socket_bound() as port:
        token = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        shown = client.predict(token, "ray", cluster.address, api_name="/evaluate_cluster")
        assert shown == f"Ray cluster: 1 node(s), 2 CPU(s), 0 GPU(s) at {cluster.address}."
        with pytest.raises(AppError, match=rf"no Ray cluster reachable at '127.0.0.1:{port}'"):
            client.predict(token, "ray", f"127.0.0.1:{port}", api_name="/evaluate_cluster")
        own = f"127.0.0.1:{urlsplit(client.src).port}"  # the app itself: a web server, no Ray head
        with pytest.raises(AppError, match=rf"'{own}' answers but is no Ray cluster's head"):
            client.predict(token, "ray", own, api_name="/evaluate_cluster")
        with pytest.raises(AppError, match="no Ray cluster reachable"):
            client.predict(
                token,
                "nowhere",
                *selection,
                "tiny-random",
                0,
                0,
                "ray",
                f"127.0.0.1:{port}",
                api_name="/evaluate_start",
            )
        message, _ = client.predict(
            token,
            "on-ray",
            *selection,
            "tiny-random",
            0,
            0,
            "ray",
            cluster.address,
            api_name="/evaluate_start",
        )
        assert message == f"Run **on-ray**: 1 image, job queued. Ray cluster: {cluster.describe()}."
        row = _wait_for_job(client, token, "on-ray")
        assert "data-state='complete'" in row and "1/1 images, 1 masked" in row and " pid " in row

        monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
        with pytest.raises(AppError, match="the Ray executor needs Ray, which is not installed"):
            client.predict(token, "ray", "", api_name="/evaluate_cluster")
        message, _ = client.predict(
            token, "here", *selection, "tiny-random", 0, 0, api_name="/evaluate_start"
        )
        assert message == "Run **here**: 1 image, job queued."
        assert "data-state='complete'" in _wait_for_job(client, token, "here")
    db = runs.connect(config.db_path)
    try:
        assert [r[0] for r in db.execute("SELECT name FROM runs ORDER BY name")] == ["here", "on-ray"]
        ray_rows, local_rows = runs.items(db, "on-ray"), runs.items(db, "here")
    finally:
        db.close()
    assert [r["image_sha256"] for r in ray_rows] == [r["image_sha256"] for r in local_rows]
