"""Start-up: time to ready and to the first page, quiet and beside a CPU hog (issue 28.1).

``python -m bench.bench_startup [--hogs N]`` starts ``app.py`` on a fresh database twice: on
the machine as it is, then beside `N` busy-loop processes (default twice the cores), and
prints, for each start, the seconds until ``/healthz`` answers 200 (`bench.app_process`) and
the CPU seconds the server process had spent by then (its coloring workers apart), the
seconds and bytes of the first ``GET /`` and ``GET /config``, the CPU seconds and memory
(RSS) of each coloring worker once its start is over (`annotation.coloring.pool`; one per
core), and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil

from bench.app_process import AppProcess


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """`n` processes spinning on a core each while the block runs (a CPU hog)."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


def one_start(root: Path) -> dict[str, float]:
    """Start the app on a fresh database under `root`; its start-up figures (s, bytes)."""
    root.mkdir(parents=True)
    password = root / "admin_password.txt"
    password.write_text("bench startup password\n", encoding="utf-8")
    env = {"COLORCONCEPT_ADMIN_PASSWORD_FILE": str(password)}
    with AppProcess(root / "study.sqlite", root / "data", env=env) as app:
        times = psutil.Process(app.process.pid).cpu_times()
        figures = {
            "ready_s": app.ready_s,
            "server_cpu_s": times.user + times.system,
            "load_1min": os.getloadavg()[0],
        }
        for name, path in (("page", ""), ("config", "config")):
            start = time.perf_counter()
            response = httpx.get(app.url + path, timeout=300)
            figures[f"{name}_s"] = time.perf_counter() - start
            figures[f"{name}_bytes"] = len(response.content)
        workers = _started_workers(app.process.pid)
        figures["worker_cpu_s"] = max((cpu for cpu, _ in workers), default=0.0)
        figures["worker_rss_mib"] = max((rss for _, rss in workers), default=0.0)
    return figures


def _started_workers(pid: int, timeout_s: float = 120.0) -> list[tuple[float, float]]:
    """(CPU seconds, RSS in MiB) of each spawned child of `pid` that imports Python (the
    coloring workers; not `multiprocessing`'s resource tracker), once their CPU time has
    stopped growing for a second: their start is over."""

    def workers() -> list[tuple[float, float]]:
        found = []
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if "spawn_main" in " ".join(child.cmdline()):
                    times = child.cpu_times()
                    found.append((times.user + times.system, child.memory_info().rss / 2**20))
        return found

    deadline = time.monotonic() + timeout_s
    before = workers()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = workers()
        if now and [cpu for cpu, _ in now] == [cpu for cpu, _ in before]:
            return now
        before = now
    return before


def run(hogs: int) -> dict[str, dict[str, float]]:
    """`one_start` quiet, then beside `hogs` busy loops."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["quiet"] = one_start(Path(tmp) / "quiet")
        with busy_loops(hogs):
            results[f"beside {hogs} busy loops"] = one_start(Path(tmp) / "busy")
    return results


def markdown(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "| start | ready (s) | the server's CPU until ready (s) | first page (s) | page (kB) | /config (s) "
        "| /config (kB) | a coloring worker's start (CPU s) | its memory (MiB) | load (1 min) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in results.items():
        lines.append(
            f"| {name} | {f['ready_s']:.1f} | {f['server_cpu_s']:.1f} | {f['page_s']:.2f} | "
            f"{f['page_bytes'] / 1000:.0f} | "
            f"{f['config_s']:.2f} | {f['config_bytes'] / 1000:.0f} | {f['worker_cpu_s']:.1f} | "
            f"{f['worker_rss_mib']:.0f} | {f['load_1min']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1))
    print(markdown(run(parser.parse_args().hogs)))


if __name__ == "__main__":
    main()
