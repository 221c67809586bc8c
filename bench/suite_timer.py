"""A pytest plugin for `bench.bench_suite_cpu`: when each test starts and ends, per process.

Loaded with ``-p bench.suite_timer``; does nothing unless ``SUITE_CPU_DIR`` names a folder,
where each pytest process (each xdist worker) writes ``tests-<pid>.jsonl``: one line
``["start" | "end", unix time, pid, node id]`` per test (its set-up and tear-down included).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_out = None


def _write(kind: str, nodeid: str) -> None:
    global _out
    folder = os.environ.get("SUITE_CPU_DIR")
    if not folder:
        return
    if _out is None:
        _out = (Path(folder) / f"tests-{os.getpid()}.jsonl").open("a", encoding="utf-8")
    _out.write(json.dumps([kind, time.time(), os.getpid(), nodeid]) + "\n")
    _out.flush()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # The process that runs the test (an xdist worker), not the controller, which reports it.
    _write("start", item.nodeid)
    try:
        return (yield)
    finally:
        _write("end", item.nodeid)
