"""A session's start: the server's work for each new visitor session (issue 28).

``python -m bench.bench_session_start [--calls N] [--rounds R]`` builds the app on a fresh
database and measures, for Gradio's own session state and for `app.session_state`'s
(which keeps no deep-link copy of the components' configuration):

- the CPU time of making one session's state for this app (``SessionState(demo)``), in ms,
  the mean over `N` of them, and the memory one holds (bytes, under `tracemalloc`): Gradio
  kept each for up to 10,000 sessions;
- `N` calls of the page's first step (``start_restore``, what every page open runs) through
  the HTTP API, each of which Gradio runs in a new session: the mean wall time per call and
  the CPU time of this process (the server and the HTTP client) per call, in ms.

The app runs in this process; the two variants are swapped in by `install`'s module
attribute, one after the other in each round and under the same load, so their ratio is the
figure to quote; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import httpx
from gradio import state_holder
from gradio.state_holder import SessionState

from app.session_state import LeanSessionState
from tests.app_server import make_config, running_app

VARIANTS = {"Gradio's session state": SessionState, "app.session_state": LeanSessionState}


def construction_ms(demo, kind: type, n: int) -> float:
    """Mean CPU ms to make one session's state of `kind` for `demo`."""
    start = time.process_time()
    for _ in range(n):
        kind(demo)
    return (time.process_time() - start) / n * 1000


def held_bytes(demo, kind: type, n: int) -> float:
    """Mean bytes one session's state of `kind` for `demo` holds (`n` of them kept at once)."""
    tracemalloc.start()
    try:
        kept = [kind(demo) for _ in range(n)]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return held / n


def call_ms(url: str, n: int) -> tuple[float, float]:
    """Mean (wall ms, this process's CPU ms) of one HTTP API call of ``start_restore``, each
    in a new session (Gradio draws one per ``/gradio_api/call`` request)."""
    with httpx.Client(base_url=url, timeout=120) as http:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            event = http.post("gradio_api/call/start_restore", json={"data": [""]}).json()["event_id"]
            text = http.get(f"gradio_api/call/start_restore/{event}").text
            if "event: complete" not in text:
                raise RuntimeError(f"start_restore did not complete: {text[-300:]}")
        return (time.perf_counter() - wall) / n * 1000, (time.process_time() - cpu) / n * 1000


def run(calls: int = 40, rounds: int = 2) -> dict:
    load = os.getloadavg()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="session-start-") as tmp,
        running_app(make_config(Path(tmp))) as (client, demo),
    ):
        call_ms(client.src, 3)  # warm the routes and the database
        try:
            for round_ in range(1, rounds + 1):
                for label, kind in VARIANTS.items():
                    state_holder.SessionState = kind
                    wall, cpu = call_ms(client.src, calls)
                    rows.append(
                        {
                            "round": round_,
                            "variant": label,
                            "state_cpu_ms": construction_ms(demo, kind, calls),
                            "state_bytes": held_bytes(demo, kind, calls),
                            "call_wall_ms": wall,
                            "call_cpu_ms": cpu,
                        }
                    )
        finally:
            state_holder.SessionState = LeanSessionState
        blocks = len(demo.blocks)
    return {
        "rows": rows,
        "blocks": blocks,
        "calls": calls,
        "load_before": load,
        "load_after": os.getloadavg(),
    }


def markdown(figures: dict) -> str:
    lines = [
        "| round | session state | one session's state (CPU ms) | (bytes held) | one `start_restore` call (wall ms) | (CPU ms) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for row in figures["rows"]:
        lines.append(
            f"| {row['round']} | {row['variant']} | {row['state_cpu_ms']:.1f} | {row['state_bytes']:,.0f} "
            f"| {row['call_wall_ms']:.1f} "
            f"| {row['call_cpu_ms']:.1f} |"
        )
    lines.append(
        f"\n{figures['blocks']} blocks; {figures['calls']} calls per row; load average (1 min) "
        f"{figures['load_before'][0]:.2f} before, {figures['load_after'][0]:.2f} after."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(markdown(run(args.calls, args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
