"""Test-wide settings: no network, no analytics, no hub downloads."""

import os

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
    "test_browser_pilot.py",
    "test_browser_scenario.py",
    "test_ray_node_loss.py",
    "test_ray_executor.py",
    "test_faults.py",
    "test_browser_crowd.py",
    "test_crowd_bench.py",
    "test_browser_researcher.py",
    "test_browser_canvas.py",
    "test_app_designer.py",
    "test_bad_input.py",
    "test_browser_designer.py",
    "test_browser_refusals.py",
    "test_browser_explicit.py",
    "test_served_files.py",
    "test_app_landing.py",
    "test_app_participant.py",
    "test_app_admin.py",
    "test_app_expert.py",
    "test_browser_expert.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
