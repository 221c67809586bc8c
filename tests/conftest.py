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
