"""``bench.bench_page_open``: designers past consent open their invite links at once in
Chromium, and every page reaches a canvas ready to paint."""

import shutil

import pytest

from bench import bench_page_open


@pytest.mark.browser
def test_every_designer_opening_the_page_reaches_a_ready_canvas():
    if shutil.which(bench_page_open.CHROMIUM) is None:
        pytest.skip(f"no Chromium at {bench_page_open.CHROMIUM}: run scripts/ensure_chromium.sh")
    [figures] = bench_page_open.run(designers=2, rounds=1)
    assert figures["pages"] == 2
    for key in ("html", "load", "ready"):
        assert 0 < figures[f"{key}_p50_s"] <= figures[f"{key}_p95_s"]
    # The HTML arrives before the load event, and the canvas is ready after both.
    assert figures["html_p95_s"] <= figures["load_p95_s"] <= figures["ready_p95_s"]
