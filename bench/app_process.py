"""The real app as a separate process: ``python app.py --db ... --data-dir ... --port ...``.

Load and fault scenarios (`bench.bench_load`, ``tests/app/test_faults.py``) talk to it only
through HTTP (`gradio_client`), as people's browsers do, and may SIGKILL it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.app_server import free_port

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 240.0
PAGE_CONFIG = "window.gradio_config = "


def page_config(url: str, timeout: float = 120.0) -> dict:
    """The configuration a browser's page at `url` runs on, as the page carries it inline
    (``window.gradio_config``, with every component's props); ``/config`` gives API clients
    only what they read (`app.weight.client_config`)."""
    text = httpx.get(url, timeout=timeout).raise_for_status().text
    start = text.index(PAGE_CONFIG) + len(PAGE_CONFIG)
    return json.loads(text[start : text.index(";</script>", start)])


@contextmanager
def affinity(cpus: Iterable[int] | None) -> Iterator[None]:
    """The calling thread restricted to `cpus` meanwhile (a process it starts inherits it)."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class AppProcess:
    """One ``python app.py`` process on a free local port; ``with`` stops it at the end.

    Parameters
    ----------
    db_path, data_dir : str or Path
        The app's ``--db`` and ``--data-dir``.
    auto_approve_practice : bool
        Pass ``--auto-approve-practice`` (the main task opens after the practice).
    log_path : str or Path, optional
        Where the process's output goes (default: discarded).
    root : str or Path
        The checkout whose ``app.py`` runs (default: this one; the benchmarks pass a
        worktree of an older commit to measure it in the same run).
    env : dict, optional
        Extra environment variables (``COLORCONCEPT_WORKERS`` for instance).
    cpus : iterable of int, optional
        CPU numbers the process may run on (Linux affinity, inherited by its coloring
        workers, whose default count is then one per CPU here); default: all.
    """

    def __init__(
        self,
        db_path: str | Path,
        data_dir: str | Path,
        *,
        auto_approve_practice: bool = True,
        log_path: str | Path | None = None,
        root: str | Path = ROOT,
        env: dict[str, str] | None = None,
        cpus: Iterable[int] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        argv = [
            sys.executable,
            "app.py",
            "--db",
            str(db_path),
            "--data-dir",
            str(data_dir),
            "--port",
            str(self.port),
        ]
        if auto_approve_practice:
            argv.append("--auto-approve-practice")
        # Load tests submit faster than people can: the per-designer rate limit is lifted
        # unless the caller set one.
        env = {
            "COLORCONCEPT_MAX_SUBMISSIONS_PER_MINUTE": "100000",
            **os.environ,
            **(env or {}),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
        }
        # Open for the process's lifetime; `stop` closes it.
        self._log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        self.started = time.perf_counter()
        with affinity(cpus):
            self.process = subprocess.Popen(
                argv, cwd=root, env=env, stdout=self._log, stderr=subprocess.STDOUT
            )
        self.ready_s = self._wait_ready()

    def _wait_ready(self) -> float:
        """Seconds from the start until ``/healthz`` says the app serves (its start-up work
        is done; an older app without it: until ``/config`` answers)."""
        self._ready_path = "healthz"
        deadline = self.started + START_TIMEOUT_S
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.process.returncode} at start")
            try:
                with urllib.request.urlopen(self.url + self._ready_path, timeout=5):
                    return time.perf_counter() - self.started
            except urllib.error.HTTPError as error:
                if error.code == 404:  # an app from before /healthz (a benchmark's baseline)
                    self._ready_path = "config"
                time.sleep(0.2)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"app.py did not answer at {self.url} within {START_TIMEOUT_S:.0f} s")

    def kill(self) -> None:
        """SIGKILL the process (no clean-up of any kind runs) and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """Terminate the process, SIGKILL if it does not exit within 20 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self) -> AppProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), children first; one that ends meanwhile is
    left out."""
    found, queue = [], [pid]
    while queue:
        for task in Path(f"/proc/{queue.pop()}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            queue += children
    return found
