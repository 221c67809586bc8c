"""Shared set-up of the research tests: tiny models built once, stored runs with known colors.

`tiny_models` builds the engine's tiny random models (`evaluation.models.tiny.build_all`) once per
test session (once for all of pytest-xdist's processes: `built_once`); `install_tiny` copies
them where an app's data folder expects them; `tiny_grid_reference` is the in-process run of
the tiny grid that the Ray tests compare their runs with, made once per session as well.
`store_segmented_run` stores a run whose images and masks are drawn here (solid colors), then
extracts its distributions with the real pipeline.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evaluation.concepts import load_concepts
from evaluation.models.generation import build_prompt
from evaluation.models.tiny import build_all
from evaluation.pipeline import runs
from evaluation.pipeline.fileio import write_atomic
from evaluation.pipeline.stages import extract, pixel_summary

TINY_NAMES = ("tiny-random", "tiny-grounding-dino", "tiny-sam")


def session_folder(tmp_path_factory, name: str) -> Path:
    """``name`` under the session's temporary folder that every pytest-xdist process of this
    run shares (the parent of each process's own; the process's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def built_once(folder: Path, build: Callable[[Path], object]) -> Path:
    """`folder`, filled by ``build(folder)`` unless an earlier call (in any process of this
    session) finished it; a lock file beside it makes the other processes wait for it."""
    done = folder / ".built"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a process that died left half-built
            folder.mkdir(parents=True)
            build(folder)
            done.touch()
    return folder


def _build_tiny(root: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_all(root)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> Path:
    """Folder holding the three tiny models (built on first use in this session, ~5 CPU-s;
    read-only: copy them (`install_tiny`) where a test writes)."""
    return built_once(session_folder(tmp_path_factory, "research-tiny-models"), _build_tiny)


def tiny_paths(root: Path) -> dict[str, Path]:
    """The tiny models under `root` by name, as `evaluation.models.tiny.build_all` returns them."""
    return {name: root / name for name in TINY_NAMES}


def tiny_grid_argv(models: dict[str, Path], folder: Path) -> list[str]:
    """``python -m evaluation`` arguments (after the module) of the tiny grid the Ray tests run:
    2 concepts x 2 styles x 2 CFG x 2 seeds, one image per batch, into `folder`; the same
    run as `bench.bench_ray_node_loss.run_argv` without its executor."""
    from bench.bench_ray_node_loss import run_argv

    argv = run_argv(models, folder)
    assert argv[3] == "run" and argv[-2:] == ["--executor", "ray"]
    return argv[3:-2]


@pytest.fixture(scope="session")
def tiny_grid_reference(tiny_models, tmp_path_factory) -> Path:
    """A folder with ``db.sqlite`` and ``data/`` of the tiny grid run in-process (torch on one
    thread, as Ray's one-CPU workers run it, so the PNG bytes are theirs), made once per
    session from `tiny_models`; read-only."""
    from evaluation.__main__ import main as evaluation_main
    from evaluation.models.tiny import one_cpu_thread

    def run(folder: Path) -> None:
        with one_cpu_thread(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert evaluation_main(tiny_grid_argv(tiny_paths(tiny_models), folder)) == 0

    return built_once(session_folder(tmp_path_factory, "tiny-grid-in-process"), run)


def install_tiny(tiny_root: Path, data_dir: Path) -> None:
    """Copy the tiny models to ``data_dir/models`` (where the app builds them otherwise)."""
    for name in TINY_NAMES:
        shutil.copytree(tiny_root / name, data_dir / "models" / name, dirs_exist_ok=True)


def solid(rgb, size: int = 32) -> np.ndarray:
    """A (size, size, 3) uint8 image of one sRGB color."""
    return np.broadcast_to(np.asarray(rgb, dtype=np.uint8), (size, size, 3)).copy()


def centre_mask(size: int = 32, margin: int = 8) -> np.ndarray:
    """A (size, size) bool mask of the centre square."""
    mask = np.zeros((size, size), bool)
    mask[margin : size - margin, margin : size - margin] = True
    return mask


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def store_segmented_run(db, data_dir: Path, run: str, cells: dict) -> None:
    """Store a fully segmented run (images, masks, pixel summaries) and extract its distributions.

    Parameters
    ----------
    cells : dict
        ``{(model, concept, style, cfg): [rgb, rgb, ...]}``: one solid image per color,
        each masked by `centre_mask`; an rgb of None is an image the detector found
        nothing in (``no_detection``, excluded).
    """
    by_key = {c.key: c for c in load_concepts()}
    items = [
        {
            "model": m,
            "concept": c,
            "noun": by_key[c].base,
            "style": s,
            "cfg": cfg,
            "sample": i,
            "seed": 1000 + i,
            "prompt": build_prompt(by_key[c], s),
        }
        for (m, c, s, cfg), colors in cells.items()
        for i in range(len(colors))
    ]
    runs.create_run(db, run, items, {"test": run})
    ids = {
        (r["model"], r["concept"], r["style"], r["cfg"], r["sample"]): r["id"] for r in runs.items(db, run)
    }
    updates = []
    for (m, c, s, cfg), colors in cells.items():
        for i, rgb in enumerate(colors):
            key = ids[(m, c, s, float(cfg), i)]
            if rgb is None:
                updates.append(
                    {"id": key, "status": "segmented", "segment_status": "no_detection", "detected": 0}
                )
                continue
            image_path = f"runs/{run}/images/{m}-{c}-{s}-{cfg}-{i}.png"
            mask_path = f"runs/{run}/masks/{m}-{c}-{s}-{cfg}-{i}.png"
            summary_path = f"runs/{run}/pixels/{m}-{c}-{s}-{cfg}-{i}.npz"
            write_atomic(Path(data_dir) / image_path, _png(solid(rgb)))
            write_atomic(Path(data_dir) / mask_path, _png(centre_mask()))
            buffer = io.BytesIO()
            np.savez_compressed(buffer, **pixel_summary(solid(rgb), centre_mask()))
            write_atomic(Path(data_dir) / summary_path, buffer.getvalue())
            updates.append(
                {
                    "id": key,
                    "status": "segmented",
                    "segment_status": "ok",
                    "image_path": image_path,
                    "mask_path": mask_path,
                    "summary_path": summary_path,
                    "detected": 1,
                    "gen_seconds": 0.5,
                    "seg_seconds": 0.25,
                    "n_pixels": int(centre_mask().sum()),
                }
            )
    runs.record_items(db, updates)
    extract(db, run, data_dir)


def one_hot(index: int, weight: float = 1.0, rest: int | None = None) -> np.ndarray:
    """A UW-71 distribution with `weight` on bin `index` and the rest on bin `rest`."""
    p = np.zeros(71)
    p[index] = weight
    if rest is not None:
        p[rest] += 1.0 - weight
    return p


def sign_in(client, admin_password: str, *roles: str) -> dict[str, str]:
    """Session tokens by role: ``admin`` and one invited person per role in `roles`."""
    admin, _ = client.predict(admin_password, api_name="/login_admin")
    tokens = {"admin": admin}
    for role in roles:
        link = client.predict(admin, role, 1, "unknown", 7, api_name="/admin_create_invites")["data"][0][3]
        tokens[role] = client.predict(link, api_name="/login_invite")[0]
    return tokens


def snapshot(config) -> tuple[list[str], list[str]]:
    """The database dump and the sorted file list of the data folder, to show nothing was written."""
    from storage import open_db

    db = open_db(config.db_path)
    try:
        dump = list(db.conn.iterdump())
    finally:
        db.close()
    files = sorted(
        str(p.relative_to(config.data_dir)) for p in Path(config.data_dir).rglob("*") if p.is_file()
    )
    return dump, files


def assert_every_endpoint_refuses(client, config, prefix: str, calls: dict, tokens: dict) -> None:
    """Each named endpoint starting with `prefix` is in `calls` and refuses every token given."""
    from gradio_client.exceptions import AppError

    named = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert {name for name in named if name.startswith(prefix)} == set(calls)
    before = snapshot(config)
    for _who, token in tokens.items():
        for name, args in calls.items():
            with pytest.raises(AppError, match="needs the role researcher or admin|not signed in|not valid"):
                client.predict(token, *args, api_name=name)
    assert snapshot(config) == before


def _decoded(node):
    # plotly's JSON writes numeric arrays as {"dtype": "f8", "bdata": base64, "shape": "2, 3"}.
    if isinstance(node, dict) and set(node) >= {"dtype", "bdata"}:
        array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=np.dtype(node["dtype"]))
        shape = node.get("shape")
        return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    if isinstance(node, dict):
        return {key: _decoded(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_decoded(value) for value in node]
    return node


def figure(value):
    """The plotly Figure of a `gr.Plot` value returned by gradio_client, arrays decoded."""
    import plotly.graph_objects as go

    assert value["type"] == "plotly"
    return go.Figure(_decoded(json.loads(value["plot"])))


@pytest.fixture
def torch_one_thread():
    """Torch on one CPU thread during the test (see `evaluation.models.tiny.one_cpu_thread`)."""
    from evaluation.models.tiny import one_cpu_thread

    with one_cpu_thread():
        yield
