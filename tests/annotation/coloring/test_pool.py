"""The process pool of the submit path: same results as in the request thread, errors
that keep their type and message, and a worker's death costs no request."""

import os
import signal

import numpy as np
import pytest

from annotation.coloring import canvas
from annotation.coloring.fill import blank_color_layer, canvas_value, flood_fill, read_canvas
from annotation.coloring.pool import ENV_WORKERS, ColoringPool, default_workers
from annotation.errors import InvalidInput
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png

APPLE_FILE = str(SKETCH_DIR / "apple.png")


@pytest.fixture(scope="module")
def pool():
    pool = ColoringPool(2)
    pool.warm()
    yield pool
    pool.close()


def _apple_canvas(rgb=(208, 48, 48)):
    sketch = load_sketch_png(APPLE_FILE)
    layer = flood_fill(blank_color_layer(sketch.shape), sketch, (500, 600), rgb)
    return read_canvas(canvas_value("key", layer, 12.0))


def test_a_worker_prepares_exactly_what_the_request_thread_would(pool):
    raw = _apple_canvas()
    here = canvas.prepare_canvas(raw, APPLE_FILE, 0.005)
    there = pool.run(canvas.prepare_canvas, raw, APPLE_FILE, 0.005)
    assert there.image_png == here.image_png and there.mask_png == here.mask_png
    np.testing.assert_array_equal(there.p, here.p)
    np.testing.assert_array_equal(there.sample, here.sample)
    assert there.p.argmax() == here.p.argmax() and abs(there.p.sum() - 1) < 1e-9


def test_a_refusal_in_a_worker_arrives_as_the_same_refusal(pool):
    blank = read_canvas(canvas_value("key", None, 1.0))
    with pytest.raises(InvalidInput, match="Nothing is colored yet"):
        pool.run(canvas.prepare_canvas, blank, APPLE_FILE, 0.005)
    with pytest.raises(
        InvalidInput, match="`canvas` must be an 8-bit RGBA PNG .* got data that is not a PNG"
    ):
        pool.run(
            canvas.prepare_canvas, blank._replace(color_layer="data:image/png;base64,AAAA"), APPLE_FILE, 0.005
        )


def test_a_killed_worker_costs_no_request_and_the_pool_is_replaced(pool):
    before = pool.pids()
    assert len(before) == 2
    os.kill(before[0], signal.SIGKILL)
    raw = _apple_canvas((40, 90, 200))
    results = [pool.run(canvas.prepare_canvas, raw, APPLE_FILE, 0.005) for _ in range(3)]
    assert all(r.image_png == results[0].image_png for r in results)
    pool.warm()
    after = pool.pids()
    assert len(after) == 2 and not set(after) & set(before)


def test_a_worker_that_dies_while_the_pool_starts_gets_a_new_pool(pool, caplog):
    """Outside probe 107: a worker ended at a start on a busy machine, and the warm-up
    logged a BrokenProcessPool traceback; it now starts a new pool and says so in words."""
    pool.warm()
    before = pool.pids()
    os.kill(before[0], signal.SIGKILL)
    with caplog.at_level("WARNING", logger="annotation.coloring.pool"):
        pool.warm()
    after = pool.pids()
    assert len(after) == 2 and not set(after) & set(before)
    assert [r.getMessage() for r in caplog.records] == ["a coloring worker died; starting a new pool"]
    assert pool.run(os.getpid) in after


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_WORKERS, "3")
    assert default_workers() == 3
    monkeypatch.setenv(ENV_WORKERS, "two")
    with pytest.raises(ValueError, match=r"\$COLORCONCEPT_WORKERS must be a whole number"):
        default_workers()
    monkeypatch.delenv(ENV_WORKERS)
    assert default_workers() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="`workers` must be a whole number >= 1"):
        ColoringPool(0)


def test_a_ctrl_c_in_the_terminal_leaves_the_workers_to_the_app(pool):
    """A terminal's Ctrl-C reaches every process of the app's group: the workers ignore it
    (each printed a KeyboardInterrupt traceback and died), and the app closes them itself."""
    pool.warm()
    before = pool.pids()
    for pid in before:
        os.kill(pid, signal.SIGINT)
    ran_in = {pool.run(os.getpid) for _ in range(6)}
    assert ran_in <= set(before) and pool.pids() == before
