"""Timings of the designer path: start-up sketch sync, submitting a coloring, the task view.

Run: ``python -m bench.bench_designer [--submits 6]``. Prints seconds per operation:
loading the shipped sketches into a fresh store and again (each start-up), and through the
running app with ``gradio_client`` on this machine: ``/designer_submit`` of a 1024²
two-fill coloring (decode, paint check, files, extraction, rows, then the next task's
view with its sketch) and ``/designer_state`` (the view after a reload).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from annotation.coloring.fill import canvas_value
from annotation.concepts import sync_concepts
from annotation.sketches.library import sync_shipped_sketches
from storage import ensure_schema, open_db
from tests.app.test_designer import PAIRS, Study, finish_practice, paint
from tests.app_server import make_config, running_app


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def bench_sync(folder: Path) -> dict[str, float]:
    db = open_db(folder / "sync.sqlite")
    try:
        ensure_schema(db)
        sync_concepts(db)
        first, _ = _timed(sync_shipped_sketches, db, folder / "data")
        again, _ = _timed(sync_shipped_sketches, db, folder / "data")
    finally:
        db.close()
    return {"sync shipped sketches, fresh store": first, "sync shipped sketches, again": again}


def bench_app(folder: Path, submits: int) -> dict[str, float]:
    folder.mkdir(parents=True, exist_ok=True)
    config = make_config(folder, auto_approve_practice=True, batch_size=submits)
    with running_app(config) as (client, _):
        study = Study(client, config)
        _, token = study.person()
        view = finish_practice(study, token, study.onboarded(token))
        submit_times, state_times = [], []
        for i in range(submits):
            task = json.loads(view["task"])
            value = canvas_value(task["canvas_key"], paint(study.sketch(task), PAIRS[i % 3]), 30.0)
            seconds, result = _timed(client.predict, token, value, api_name="/designer_submit")
            submit_times.append(seconds)
            view = dict(zip(("notice", "header", "previous", "canvas", "task", "message"), result))
            state_times.append(_timed(client.predict, token, api_name="/designer_state")[0])
    return {
        "/designer_submit round trip (median)": statistics.median(submit_times),
        "/designer_state round trip (median)": statistics.median(state_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submits", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = {**bench_sync(Path(tmp)), **bench_app(Path(tmp) / "app", args.submits)}
    for name, seconds in figures.items():
        print(f"{name:45s} {seconds:8.3f} s")


if __name__ == "__main__":
    main()
