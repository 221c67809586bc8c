"""`bench.bench_suite_cpu` charges each sample's CPU to the test that was running, by worker."""

import contextlib
import json
import subprocess
import sys
import time

import pytest

from bench.bench_suite_cpu import TICKS, _intervals, _kind, busy_seconds, charge, cpu_share, join


def test_cpu_goes_to_the_test_running_in_the_worker_and_ray_to_the_ray_tests(tmp_path):
    lines = [
        ["start", 0.0, 100, "tests/a.py::t1"],
        ["end", 10.0, 100, "tests/a.py::t1"],
        ["start", 10.0, 100, "tests/b.py::t"],
        ["end", 20.0, 100, "tests/b.py::t"],
        ["start", 0.0, 200, "tests/evaluation/pipeline/test_ray_x.py::t"],
        ["end", 12.0, 200, "tests/evaluation/pipeline/test_ray_x.py::t"],
    ]
    (tmp_path / "tests-100.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines if x[2] == 100))
    (tmp_path / "tests-200.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines if x[2] == 200))
    intervals = _intervals(tmp_path)
    assert intervals[100] == [(0.0, 10.0, "tests/a.py::t1"), (10.0, 20.0, "tests/b.py::t")]
    samples = [
        (5.0, {"100:self": 1.0, "100:chromium": 2.0, "200:self": 0.25}),
        (11.0, {"none:ray": 1.5}),  # a `ray start` cluster: the Ray test running then
        (15.0, {"100:self": 0.5, "none:ray": 1.0}),  # no Ray test running: apart
        (25.0, {"100:child": 0.3}),  # the worker between tests
    ]
    modules, apart = charge(samples, intervals)
    assert dict(modules["tests/a.py"]) == {"self": 1.0, "chromium": 2.0}
    assert dict(modules["tests/b.py"]) == {"self": 0.5}
    assert dict(modules["tests/evaluation/pipeline/test_ray_x.py"]) == {"self": 0.25, "ray": 1.5}
    assert dict(apart) == {"ray": 1.0, "worker between tests: child": 0.3}


def test_processes_are_told_apart_by_their_command_line():
    assert _kind("chromium /usr/lib/chromium/chromium --type=renderer") == "chromium"
    assert _kind("raylet /tmp/rn/session/raylet") == "ray"
    assert _kind("python app.py --db x.sqlite") == "child"


def test_the_machine_busy_time_covers_the_cpu_this_process_spends():
    before_busy, _ = busy_seconds()
    before_cpu = time.process_time()
    total = 0
    while time.process_time() - before_cpu < 0.3:
        total += sum(range(1000))
    spent = time.process_time() - before_cpu
    after_busy, _ = busy_seconds()
    assert after_busy - before_busy >= spent - 2 / TICKS  # /proc/stat counts in ticks


def test_a_cpu_share_throttles_the_processes_that_join_it_and_is_removed_after():
    with contextlib.ExitStack() as stack:
        try:
            group = stack.enter_context(cpu_share(0.05))
        except PermissionError as exc:  # not root, or no CPU cgroup on this machine
            pytest.skip(str(exc))
        code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
        assert subprocess.run([sys.executable, "-c", code], preexec_fn=join(group)).returncode == 0
        stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
        assert int(stat["nr_throttled"]) > 0  # 0.5 CPU-s against 5 % of the cores: held back
    assert not group.exists()


def test_a_share_outside_0_to_1_is_refused_naming_the_option():
    with pytest.raises(ValueError, match=r"--share must be .* got 1.5"), cpu_share(1.5):
        pass
