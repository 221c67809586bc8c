"""Where the test suite's CPU goes: per test module, per kind of process (issue 28).

``python -m bench.bench_suite_cpu [PYTEST ARGS]`` runs ``./test.sh`` (the README's test
command, two xdist workers) with `bench.suite_timer` loaded, and meanwhile samples every
process's CPU time from ``/proc`` every 0.5 s. Each sample's CPU is charged to the test
running in the xdist worker the process descends from (the worker itself, the browser it
drives, the subprocesses it starts); processes that belong to no worker (a Ray cluster
started with ``ray start``) are charged to the Ray tests running at the time, anything else
is reported apart. Prints the totals per kind (the worker itself, Chromium, Ray, other
children), then the modules by CPU seconds with their wall time.

The suite is CPU-bound on two cores, so its length follows its CPU seconds; this says which
to cut. A process that lives less than one sample is partly missed (a few per cent).

``python -m bench.bench_suite_cpu --share 0.57 [PYTEST ARGS]`` runs the suite on that share
of the machine's cores (a Linux cgroup's CPU quota, v2 ``cpu.max`` or v1
``cpu.cfs_quota_us``; root only): a slow day on a fast one. The quota caps the CPU time of
all the suite's processes together, as fewer cores would, while each still runs at the
core's own speed; a slower core also slows single-threaded waits, so this is the lower
bound of a slow day, not its double.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.bench_core import cpu_model, machine_speed

ROOT = Path(__file__).resolve().parent.parent
WORKER_MARK = "exec(eval(sys.stdin.readline()))"  # how execnet starts an xdist worker
TICKS = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[float, int, str, str]]:
    """pid to (CPU seconds, parent pid, command line, start tick) of every process now."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        found[int(name)] = (cpu, int(fields[1]), f"{comm} {cmdline}", fields[19])
    return found


def _kind(command: str) -> str:
    if "chrom" in command:
        return "chromium"
    if "ray" in command or "raylet" in command or "gcs_server" in command:
        return "ray"
    return "child"


def sample(stop: threading.Event, every_s: float = 0.5) -> list[tuple[float, dict[str, float]]]:
    """Until `stop` is set: per sample, CPU seconds since the last one by ``"<worker pid>:<kind>"``
    (kind ``self`` for the worker itself) or ``"none:<kind>"``."""
    samples, before, first = [], {}, True
    while not stop.is_set():
        now = _processes()
        workers = {pid for pid, info in now.items() if WORKER_MARK in info[2]}
        spent: dict[str, float] = collections.Counter()
        seen = {}
        for pid, (cpu, _, command, started) in now.items():
            key = (pid, started)
            seen[key] = cpu
            delta = cpu - before.get(key, cpu if first else 0.0)
            if delta <= 0:
                continue
            ancestor, owner = pid, None
            for _ in range(16):
                if ancestor in workers:
                    owner = ancestor
                    break
                if ancestor not in now:
                    break
                ancestor = now[ancestor][1]
            kind = "self" if pid == owner else _kind(command)
            spent[f"{owner or 'none'}:{kind}"] += delta
        samples.append((time.time(), dict(spent)))
        before, first = seen, False
        stop.wait(every_s)
    return samples


def _intervals(folder: Path) -> dict[int, list[tuple[float, float, str]]]:
    """Per worker pid, its tests as (start, end, node id), from `bench.suite_timer`'s files."""
    runs = collections.defaultdict(list)
    for path in folder.glob("tests-*.jsonl"):
        started = {}
        for line in path.read_text().splitlines():
            kind, at, pid, nodeid = json.loads(line)
            if kind == "start":
                started[nodeid] = at
            else:
                runs[pid].append((started.pop(nodeid, at), at, nodeid))
    return {pid: sorted(tests) for pid, tests in runs.items()}


def charge(samples, intervals) -> tuple[dict[str, collections.Counter], collections.Counter]:
    """CPU seconds per module and kind, and what no test could be charged with."""
    modules: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    apart: collections.Counter = collections.Counter()
    for at, spent in samples:
        for key, seconds in spent.items():
            owner, kind = key.split(":")
            if owner == "none":
                running = [n for tests in intervals.values() for (a, b, n) in tests if a <= at <= b + 0.5]
                ray_tests = [n for n in running if "ray" in n.split("::")[0]]
                if kind == "ray" and ray_tests:
                    for nodeid in ray_tests:
                        modules[nodeid.split("::")[0]][kind] += seconds / len(ray_tests)
                else:
                    apart[kind] += seconds
                continue
            running = [n for (a, b, n) in intervals.get(int(owner), []) if a - 0.5 <= at <= b + 0.5]
            if running:
                modules[running[-1].split("::")[0]][kind] += seconds
            else:
                apart[f"worker between tests: {kind}"] += seconds
    return modules, apart


def busy_seconds() -> tuple[float, float]:
    """Seconds the machine's cores have been busy and idle since boot (``/proc/stat``)."""
    fields = [int(x) / TICKS for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, idle


CGROUP_V2, CGROUP_V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


@contextlib.contextmanager
def cpu_share(share: float) -> Iterator[Path]:
    """A new cgroup whose processes together get `share` of this machine's cores.

    Yields the cgroup's folder; a process joins it with `join` (its children then stay in
    it). The cgroup is removed at the end.

    Raises
    ------
    ValueError
        If `share` is not in (0, 1].
    PermissionError
        If no CPU cgroup can be made here (not root, or no cpu controller).
    """
    if not 0 < share <= 1:
        raise ValueError(f"--share must be a fraction of the machine's cores in (0, 1], got {share}")
    quota = max(1000, int(share * os.cpu_count() * PERIOD_US))
    v2 = "cpu" in _read(CGROUP_V2 / "cgroup.controllers").split()
    parent = CGROUP_V2 if v2 else CGROUP_V1
    if not (parent / "cgroup.procs").is_file() or not os.access(parent, os.W_OK):
        raise PermissionError(f"--share needs a writable CPU cgroup (run as root): {parent} is not one")
    group = parent / f"colorconcept-suite-{os.getpid()}"
    group.mkdir()
    try:
        if v2:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        yield group
    finally:
        for pid in _read(group / "cgroup.procs").split():  # leftovers back to the parent
            with contextlib.suppress(OSError):
                (parent / "cgroup.procs").write_text(pid)
        group.rmdir()


def join(group: Path) -> Callable[[], None]:
    """A ``preexec_fn`` that puts the starting process into the cgroup `group`."""
    return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    pytest_args = list(sys.argv[1:] if argv is None else argv)
    share = None
    if pytest_args[:1] == ["--share"]:
        try:
            share, pytest_args = float(pytest_args[1]), pytest_args[2:]
        except (IndexError, ValueError):
            raise SystemExit(
                f"--share needs a fraction of the machine's cores, got {pytest_args[1:2]}"
            ) from None
    with contextlib.ExitStack() as stack:
        try:
            group = stack.enter_context(cpu_share(share)) if share is not None else None
        except (ValueError, PermissionError) as exc:  # a bad share, or no cgroup here: one line
            raise SystemExit(str(exc)) from None
        return _run(pytest_args, share, group)


def _run(pytest_args: list[str], share: float | None, group: Path | None) -> int:
    speed = machine_speed()
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores; a plain ot.emd2 loop at {speed:,.0f} pairs/s "
        f"(bench.bench_core.machine_speed; issue 28's slow day: 2,200-2,500)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="suite-cpu") as folder:
        stop = threading.Event()
        collected: list = []
        sampler = threading.Thread(target=lambda: collected.extend(sample(stop)), daemon=True)
        load = os.getloadavg()[0]
        started = time.time()
        busy_before = busy_seconds()
        sampler.start()
        env = {**os.environ, "SUITE_CPU_DIR": folder, "PYTHONPATH": str(ROOT)}
        if group is not None:
            print(f"the suite runs on {share:.0%} of the cores (cgroup {group})", flush=True)
        rc = subprocess.call(
            [str(ROOT / "test.sh"), "-p", "bench.suite_timer", *pytest_args],
            env=env,
            preexec_fn=join(group) if group else None,
        )
        stop.set()
        sampler.join()
        wall = time.time() - started
        busy, idle = (after - before for after, before in zip(busy_seconds(), busy_before))
        intervals = _intervals(Path(folder))
    modules, apart = charge(collected, intervals)
    walls: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    for tests in intervals.values():
        for a, b, nodeid in tests:
            walls[nodeid.split("::")[0]] += b - a
    for counts in modules.values():
        kinds.update(counts)
    print(
        f"\n./test.sh exited {rc}; {wall:.0f} s in all (set-up and lint included); 1-min load at start {load:.2f}"
    )
    print(f"the cores were busy {busy / (busy + idle):.0%} of the run ({busy:.0f} CPU-s, every process)")
    print("CPU seconds charged to tests: " + ", ".join(f"{k} {v:.0f}" for k, v in kinds.most_common()))
    print("not charged to a test: " + (", ".join(f"{k} {v:.0f}" for k, v in apart.most_common()) or "none"))
    print(
        f"{'module':60s} {'CPU s':>6s} {'wall s':>6s} {'self':>6s} {'chromium':>8s} {'ray':>5s} {'child':>6s}"
    )
    for name, counts in sorted(modules.items(), key=lambda item: -sum(item[1].values()))[:40]:
        print(
            f"{name:60s} {sum(counts.values()):6.0f} {walls[name]:6.0f} {counts['self']:6.0f} "
            f"{counts['chromium']:8.0f} {counts['ray']:5.0f} {counts['child']:6.0f}"
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
