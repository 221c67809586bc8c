"""The browser's work per event: what the page's script does after each click (issue 28).

``python -m bench.bench_page_work [--events N]`` builds the app in this process on a fresh
database with the shipped concept list, launches it, and walks it in headless Chromium as an
admin: the page loads, the admin signs in, opens the Admin tab and clicks "Refresh lists"
`N` times. For each step it reports the renderer's main-thread busy time (Chrome's
``Performance.getMetrics`` ``TaskDuration``, CPU seconds of the page's own thread) and the
values the page's script copied (calls of ``structuredClone``, which Svelte's
``$state.snapshot`` makes for each value it copies when Gradio's script re-reads a
component's state), then the median of the `N` refreshes. Copies are a count, the same on
any machine; seconds depend on the machine and its load (printed with the load average).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from tests.app_server import make_config, running_app
from tests.browser import VIEWPORT, chromium_browser, open_tab, settled, sign_in_admin

#: Counts the values copied on the page (`module docstring`); read and reset by `_step`.
COUNT_COPIES = """window.__copies = 0;
const copy = window.structuredClone;
window.structuredClone = (value, options) => { window.__copies += 1; return copy(value, options); };"""


def _step(page, cdp, action) -> tuple[float, int]:
    """Run `action` on `page` and wait until the page settles; (busy seconds, values copied)."""

    def busy() -> float:
        metrics = cdp.send("Performance.getMetrics")["metrics"]
        return next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    page.evaluate("() => { window.__copies = 0; }")
    before = busy()
    action()
    settled(page)
    return busy() - before, page.evaluate("() => window.__copies")


def measure(events: int = 5) -> dict[str, tuple[float, int]]:
    """Walk the app as described in the module docstring.

    Returns
    -------
    dict
        Step name to (renderer busy time in s, values copied); ``refresh (median)`` is the
        median of the `events` refreshes.
    """
    steps: dict[str, tuple[float, int]] = {}
    with (
        tempfile.TemporaryDirectory() as folder,
        running_app(make_config(Path(folder))) as (client, _),
        chromium_browser() as browser,
    ):
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(COUNT_COPIES)
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        steps["page load"] = _step(page, cdp, lambda: page.goto(client.src))
        steps["admin sign-in"] = _step(page, cdp, lambda: sign_in_admin(page))
        steps["open the Admin tab"] = _step(page, cdp, lambda: open_tab(page, "Admin"))
        refresh = page.get_by_role("button", name="Refresh lists")
        runs = [_step(page, cdp, lambda: settled(page, refresh.click)) for _ in range(events)]
        steps["refresh (median)"] = (
            statistics.median(r[0] for r in runs),
            int(statistics.median(r[1] for r in runs)),
        )
        context.close()
    return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5, help="refreshes after sign-in (default 5)")
    args = parser.parse_args(argv)
    if args.events < 1:
        parser.error(f"--events must be at least 1, got {args.events}")
    load = os.getloadavg()[0]
    steps = measure(args.events)
    print(f"load average (1 min) before the walk: {load:.2f}")
    print(f"{'step':24s} {'renderer busy (s)':>18s} {'values copied':>14s}")
    for name, (seconds, copies) in steps.items():
        print(f"{name:24s} {seconds:18.3f} {copies:14,d}")


if __name__ == "__main__":
    main()
