"""Test-wide settings: no network, no analytics, no hub downloads."""

import os
import sys

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def db(tmp_path):
    """A fresh annotation database in a file under `tmp_path` (no concepts loaded)."""
    from storage import ensure_schema, open_db

    database = open_db(tmp_path / "a.sqlite")
    ensure_schema(database)
    yield database
    database.close()


@pytest.fixture(scope="module", autouse=True)
def _forget_static_paths(tmp_path_factory):
    """After each module, drop from Gradio's process-wide static paths the data folders its
    apps added (`app._blocks`): a process that serves one app adds five, but a test process
    builds a hundred, and Gradio checks every file of every answer against each path, with
    two ``realpath`` calls apiece (a tenth of a second for a gallery late in a run)."""
    yield
    classes = sys.modules.get("gradio.data_classes")
    if classes is None:
        return
    from app.guard import SERVED_FOLDERS

    base = tmp_path_factory.getbasetemp().resolve()
    classes._StaticFiles.all_paths = [
        path
        for path in classes._StaticFiles.all_paths
        if not (path.name in SERVED_FOLDERS and path.is_relative_to(base))
    ]


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tiny torch models on one thread: on a loaded 2-core machine torch's
    idle worker threads made them up to 40 times slower."""
    from evaluation.models.tiny import one_cpu_thread

    with one_cpu_thread():
        yield


@pytest.fixture(scope="module")
def module_chromium():
    """One headless Chromium for a module's ``page`` tests (`tests.browser`)."""
    from tests.browser import chromium_browser

    with chromium_browser() as browser:
        yield browser


# `--dist loadfile` hands modules to the two processes in queue order, one at a time as
# each process runs dry (test.sh passes --no-loadscope-reorder: xdist's default reorder puts
# modules with many tests first, which sent the 100 s single-test scenario out last while
# the other process idled). So the heaviest go first, in the order of their time in a full
# run (`./test.sh --durations=0`, summed per module, 2026-11-26); the rest keep their order
# and fill the gaps.
HEAVY_FIRST = (
    "tests/e2e/test_pilot.py",
    "tests/e2e/test_scenario.py",
    "tests/evaluation/pipeline/test_ray_node_loss.py",
    "tests/evaluation/pipeline/test_ray_executor.py",
    "tests/app/test_faults.py",
    "tests/e2e/test_crowd.py",
    "tests/bench/test_crowd.py",
    "tests/e2e/test_researcher.py",
    "tests/e2e/test_canvas.py",
    "tests/app/test_designer.py",
    "tests/app/test_bad_input.py",
    "tests/e2e/test_designer.py",
    "tests/e2e/test_refusals.py",
    "tests/e2e/test_explicit.py",
    "tests/app/test_served_files.py",
    "tests/e2e/test_landing.py",
    "tests/app/test_participant.py",
    "tests/app/test_admin.py",
    "tests/app/test_expert.py",
    "tests/e2e/test_expert.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    unknown = [name for name in HEAVY_FIRST if not (config.rootpath / name).is_file()]
    if unknown:  # a moved module would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py HEAVY_FIRST names no test module: {sorted(unknown)}")
    unmarked = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(config.rootpath / "tests" / "e2e")
        and not item.get_closest_marker("browser")
    ]
    if unmarked:  # `-m "not browser"` must leave out every Chromium walk
        raise pytest.UsageError(f"tests/e2e/ holds Chromium tests, each marked browser; unmarked: {unmarked}")
    items.sort(key=lambda item: rank.get(item.path.relative_to(config.rootpath).as_posix(), len(rank)))
