"""CPU seconds one designer submission costs, by process: the app's main process (which
holds the GIL), its coloring workers, and the load-generating client.

    python -m bench.bench_cpu [--submissions 30] [--workers 2] [--light-clients]

One designer (invite, consent, practice, then main colorings of 512² sketches) submits
through `gradio_client` one coloring after another against a real ``python app.py``; the CPU
time of each process is read from ``/proc`` before and after. On a 2-core machine, the sum
bounds the burst throughput whatever the server does: 2 cores / (CPU per submission).
With ``--light-clients`` the designer is a light client (`bench.designer_client.HttpClient`,
color layers encoded before the measurement, see `bench.bench_load.light_during_burst`).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from bench import bench_load
from bench.app_process import ROOT, AppProcess, descendants


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` so far; 0.0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_submission(submissions: int = 30, workers: int = 2, side: int = 512, light: bool = False) -> dict:
    """Milliseconds of CPU per acknowledged submission: ``main``, ``workers``, ``client``
    (a light client if `light`)."""
    with tempfile.TemporaryDirectory() as tmp:
        study, _, _ = bench_load._prepare_light_study(ROOT, Path(tmp), 1, bench_load._pool_size(1), side)
        options = {"transport": "http", "prepared": bench_load.prepare_values(study)} if light else {}
        env = {"COLORCONCEPT_WORKERS": str(workers)}
        with AppProcess(study.db_path, study.data_dir, env=env) as app:
            time.sleep(5.0)  # the pool warms beside the start
            pids = [app.process.pid, *descendants(app.process.pid)]
            before = {pid: process_cpu(pid) for pid in pids}
            me = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            acks = bench_load.concurrent_designers(app.url, study, submissions, seed=0, **options)
            wall = time.perf_counter() - start
            after = {pid: process_cpu(pid) for pid in pids}
            done = resource.getrusage(resource.RUSAGE_SELF)
    n = len(acks)
    main = app.process.pid
    return {
        "workers": workers,
        "client": "light" if light else "gradio_client",
        "acks": n,
        "per_s": n / wall,
        "main_ms": 1e3 * (after[main] - before[main]) / n,
        "workers_ms": 1e3 * sum(after[p] - before[p] for p in pids if p != main) / n,
        "client_ms": 1e3 * (done.ru_utime + done.ru_stime - me.ru_utime - me.ru_stime) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=30)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--light-clients", action="store_true", help="HTTP client, values encoded before")
    args = parser.parse_args()
    for workers in args.workers:
        f = cpu_per_submission(args.submissions, workers, light=args.light_clients)
        print(
            f"workers={f['workers']}, client {f['client']}: {f['acks']} acks, {f['per_s']:.1f}/s one at a time; CPU ms per "
            f"submission: app main {f['main_ms']:.0f}, coloring workers {f['workers_ms']:.0f}, "
            f"client {f['client_ms']:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
