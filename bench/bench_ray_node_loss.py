"""A node lost mid-run: the tiny-model run on a two-node local Ray cluster, with and without
SIGKILL of the second node's raylet during the generate stage.

Both nodes run on this machine (`LocalCluster`: ``ray start --head --num-cpus=1`` and a
second ``ray start --address=... --num-cpus=1``, each with its own temporary folder), so
the run has one worker per node. The run goes through ``python -m evaluation run
--executor ray`` in a child process, as an operator would start it; in the killed case the
second node's raylet is SIGKILLed once the first image is recorded. Reported per case:
items recorded, batches and items sent again (the head's count), the CLI's exit code and
its per-worker lines (restarts from Ray's actor table), and the wall time of the command.
Both cases must give the same rows (checked).

    python -m bench.bench_ray_node_loss [--samples 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _processes_under(marker: str) -> list[int]:
    """Pids of processes whose command line names `marker` (this cluster's temp folders)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return [pid for pid in found if pid != os.getpid()]


#: A command run after this in a mount namespace of its own (its mounts are not seen outside).
PRIVATE_MOUNTS = ("unshare", "--mount", "--propagation", "private")


def can_hide_folders() -> bool:
    """Whether this process may start a node in a mount namespace of its own (`LocalCluster.add_node`'s `without`)."""
    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        script = f"mount -t tmpfs none {shlex.quote(folder)}"
        probe = subprocess.run([*PRIVATE_MOUNTS, "sh", "-c", script], capture_output=True)
    return probe.returncode == 0


class LocalCluster:
    """A Ray cluster of `nodes` nodes on this machine, each with its own temp folder.

    Started with ``ray start`` and Ray 2.60's token authentication, as docs/scale-out.md
    describes it: every node and every client has ``RAY_AUTH_MODE=token`` and the same
    token (here a file of this cluster's, named by ``RAY_AUTH_TOKEN_PATH``); `client_env`
    is the environment a CLI or app process needs. `stop` kills every process whose
    command line names one of its temp folders (never other clusters on the machine). Use
    as a context manager.

    Parameters
    ----------
    nodes : int
        Nodes started by `start`: the head, then ``nodes - 1`` joining nodes.
    cpus : int
        CPUs of each node; `head_cpus` for the head (default: `cpus`).
    """

    def __init__(
        self, nodes: int = 2, *, cpus: int = 1, head_cpus: int | None = None, root: Path | None = None
    ):
        self.root = Path(tempfile.mkdtemp(prefix="rn", dir=root or "/tmp"))  # short: Ray's socket paths
        self.port, self.cpus = _free_port(), cpus
        self.head_cpus = cpus if head_cpus is None else head_cpus
        self.address = f"127.0.0.1:{self.port}"
        self.n_nodes = nodes
        self.temp_dirs: list[Path] = []
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(16))
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}

    def client_env(self, auth: bool = True) -> dict:
        """The environment of a process that uses the cluster (without `auth`: no token settings)."""
        return {**self.env, **(self.auth if auth else {}), "PYTHONPATH": str(ROOT)}

    def _start(self, *args: str, cpus: int, env: dict | None = None, prefix: tuple[str, ...] = ()) -> None:
        temp = self.root / f"n{len(self.temp_dirs)}"
        self.temp_dirs.append(temp)
        started = subprocess.run(
            [
                *prefix,
                str(RAY),
                "start",
                *args,
                f"--num-cpus={cpus}",
                "--num-gpus=0",
                f"--temp-dir={temp}",
                "--disable-usage-stats",
            ],
            env={**self.env, **self.auth, **(env or {})},
            capture_output=True,
            text=True,
        )
        if started.returncode != 0:
            raise RuntimeError(
                f"`ray start {' '.join(args)}` failed: {(started.stderr or started.stdout)[-2000:]}"
            )

    def start(self) -> LocalCluster:
        self._start(
            "--head",
            f"--port={self.port}",
            "--node-ip-address=127.0.0.1",
            "--include-dashboard=false",
            cpus=self.head_cpus,
        )
        for _ in range(self.n_nodes - 1):
            self.add_node()
        return self

    def add_node(self, env: dict | None = None, *, without: Path | None = None) -> None:
        """Join one more node (its own temp folder, `env` added to its environment).

        With `without` (an existing folder), the node runs in a mount namespace of its own
        in which an empty tmpfs covers that folder: a machine whose shared mount is missing
        sees a local folder of the same path (needs ``unshare -m``, i.e. root; see
        `can_hide_folders`)."""
        prefix: tuple[str, ...] = ()
        if without is not None:
            folder = shlex.quote(str(Path(without).resolve()))
            script = f'mount -t tmpfs -o size=64m none {folder} && exec "$@"'
            prefix = (*PRIVATE_MOUNTS, "sh", "-c", script, "sh")
        self._start(
            f"--address={self.address}", "--node-ip-address=127.0.0.1", cpus=self.cpus, env=env, prefix=prefix
        )

    def raylet_pid(self, node: int) -> int:
        """The pid of node `node`'s raylet (0: the head)."""
        import psutil

        for pid in _processes_under(str(self.temp_dirs[node])):
            try:
                if Path(psutil.Process(pid).cmdline()[0]).name == "raylet":
                    return pid
            except (psutil.NoSuchProcess, IndexError):
                continue
        raise LookupError(f"no raylet of node {node} under {self.temp_dirs[node]}")

    def has_stage_worker(self, node: int) -> bool:
        """Whether a stage's worker (a ``ray::_StageWorker`` actor) runs on node `node`."""
        import psutil

        try:
            children = psutil.Process(self.raylet_pid(node)).children(recursive=True)
        except (psutil.NoSuchProcess, LookupError):
            return False
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                if any("_StageWorker" in part for part in child.cmdline()):
                    return True
        return False

    def kill_node(self, node: int) -> None:
        """SIGKILL node `node`'s raylet and the worker processes it started, at once, as when
        its machine goes away. (A worker outlives a killed raylet for a while and answers
        the calls already sent to it, so killing the raylet alone may go unseen by a run.)"""
        import psutil

        raylet = psutil.Process(self.raylet_pid(node))
        for proc in [raylet, *raylet.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()

    def stop(self) -> None:
        """Kill every process of this cluster (by its temp folders), then remove them."""
        import shutil

        import psutil

        for _ in range(3):
            pids = _processes_under(str(self.root))
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            psutil.wait_procs([p for p in map(_process, pids) if p is not None], timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def _process(pid: int):
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def run_argv(models: dict, folder: Path, *extra: str, samples: int = 2) -> list[str]:
    """``python -m evaluation run`` of the tiny grid (2 concepts x 2 styles x 2 CFG x `samples`)
    into `folder`, one image per batch, on the Ray executor."""
    return [
        sys.executable, "-m", "evaluation", "run", "--run", "grid",
        "--model", "tiny-random", "--source", str(models["tiny-random"]),
        "--concepts", "apple,banana", "--styles", "natural,clipart", "--cfg", "2,7.5",
        "--samples", str(samples), "--batch-size", "1",
        "--detector", str(models["tiny-grounding-dino"]), "--sam", str(models["tiny-sam"]),
        "--box-threshold", "0", "--text-threshold", "0", "--device", "cpu",
        "--db", str(folder / "db.sqlite"), "--data-dir", str(folder / "data"),
        "--executor", "ray", *extra,
    ]  # fmt: skip


def recorded(db_path: Path) -> int:
    """Items of the run with an image recorded (0 before the database exists)."""
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM run_items WHERE status != 'pending'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def run_cli(
    cluster: LocalCluster, argv: list[str], *, kill_node: int | None = None, auth: bool = True
) -> dict:
    """Run `argv` against `cluster`; with `kill_node`, kill that node (`LocalCluster.kill_node`)
    once the first image is recorded and a stage's worker runs there. Returns the exit code, stdout, stderr, wall seconds and
    whether the kill happened while images were still pending."""
    db_path = Path(argv[argv.index("--db") + 1])
    out = cluster.root / f"cli-{time.monotonic_ns()}"
    start = time.monotonic()
    with open(f"{out}.out", "w") as stdout, open(f"{out}.err", "w") as stderr:
        child = subprocess.Popen(
            [*argv, "--ray-address", cluster.address],
            cwd=ROOT,
            env=cluster.client_env(auth),
            stdout=stdout,
            stderr=stderr,
        )
        killed_at = None
        try:
            if kill_node is not None:
                while child.poll() is None and not (
                    recorded(db_path) > 0 and cluster.has_stage_worker(kill_node)
                ):
                    time.sleep(0.05)
                if child.poll() is None:
                    killed_at = recorded(db_path)
                    cluster.kill_node(kill_node)
            child.wait(timeout=900)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    wall = time.monotonic() - start
    return {
        "rc": child.returncode,
        "stdout": Path(f"{out}.out").read_text(),
        "stderr": Path(f"{out}.err").read_text(),
        "wall_s": wall,
        "killed_at": killed_at,
    }


def outcome(folder: Path) -> tuple[list[dict], list[tuple]]:
    """The run's item rows (without timings) and its distributions' keys and values."""
    from evaluation.pipeline import runs

    volatile = {"gen_seconds", "seg_seconds", "updated_at"}
    db = runs.connect(folder / "db.sqlite")
    try:
        items = [{k: v for k, v in row.items() if k not in volatile} for row in runs.items(db, "grid")]
        stored = [
            (r["model"], r["concept"], r["style"], r["cfg"], [round(float(x), 12) for x in r["p"]])
            for r in runs.model_distributions(db, run="grid")
        ]
    finally:
        db.close()
    return items, stored


def redone(stdout: str) -> tuple[int, int]:
    """(batches, items) sent again, summed over the stages of the CLI's summary."""
    import re

    found = re.findall(r"(\d+) batch\(es\), (\d+) item\(s\), sent again", stdout)
    return sum(int(b) for b, _ in found), sum(int(i) for _, i in found)


def run(samples: int = 4) -> dict:
    """The tiny run on a two-node local cluster without and with a node killed; figures as a dict."""
    from evaluation.models.tiny import build_all

    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="node-loss-") as tmp, LocalCluster(2) as cluster:
        root = Path(tmp)
        models = build_all(root / "models")
        cases = {}
        for label, kill in (("intact", None), ("node killed", 1)):
            folder = root / label.replace(" ", "-")
            result = run_cli(cluster, run_argv(models, folder, samples=samples), kill_node=kill)
            if result["rc"] != 0:
                raise RuntimeError(f"{label}: rc {result['rc']}: {result['stderr'][-2000:]}")
            items, stored = outcome(folder)
            batches, items_redone = redone(result["stdout"])
            cases[label] = {
                "rc": result["rc"],
                "items": len(items),
                "items_done": sum(r["status"] == "segmented" for r in items),
                "redone_batches": batches,
                "redone_items": items_redone,
                "wall_s": round(result["wall_s"], 1),
                "killed_at": result["killed_at"],
                "workers": [
                    line.strip()
                    for line in result["stdout"].splitlines()
                    if line.startswith(("  worker ", "  task "))
                    or line.endswith(" on Ray:")
                    or "sent again" in line
                ],
                "events": [line for line in result["stderr"].splitlines() if line.startswith("Ray: ")],
                "outcome": (items, stored),
            }
        same = cases["intact"].pop("outcome") == cases["node killed"].pop("outcome")
    return {
        "samples": samples,
        "same_rows": same,
        "cases": cases,
        "load": os.getloadavg(),
        "load_before": load,
    }


def markdown(figures: dict) -> str:
    """The table of BENCHMARKS.md's node-loss part (between its ``ray-node-loss`` markers)."""
    lines = [
        "| case | items done | batches / items sent again | CLI exit | wall s (whole `run` command) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, case in figures["cases"].items():
        lines.append(
            f"| {label} | {case['items_done']} / {case['items']} | {case['redone_batches']} / "
            f"{case['redone_items']} | {case['rc']} | {case['wall_s']:.1f} |"
        )
    killed = figures["cases"]["node killed"]
    lines += [
        "",
        f"Killed when {killed['killed_at']} of {killed['items']} images were recorded. "
        f"Same rows, files' hashes and distributions in both cases: {'yes' if figures['same_rows'] else 'NO'}. "
        f"Load average (1 min) {figures['load_before'][0]:.1f} before, {figures['load'][0]:.1f} after.",
        "",
        "Per-worker lines of the killed case (CLI summary):",
        "",
        "```",
        *killed["workers"],
        *killed["events"],
        "```",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args(argv)
    figures = run(args.samples)
    print(json.dumps(figures, indent=1))
    print(markdown(figures))
    return 0 if figures["same_rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
