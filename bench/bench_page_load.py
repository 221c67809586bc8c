"""A page load: what Chromium's renderer spends opening the app, with and without the events map.

``python -m bench.bench_page_load [--rounds R] [--loads L]`` launches the app in this process
on a fresh database and, in each round, opens its page `L` times (each in a fresh Chromium
context, as a new visitor and each browser test do) for each of three versions of Gradio's
app-tree script (``core-*.js``): as served (`app.page_scripts`: the indexed lookup and the
map of attached events), without the events map (the indexed lookup only), and as Gradio
ships it; the two others are routed in by Playwright. A load is timed from before the page
is requested until its Start tab shows and no event is pending (`tests.browser.settled`).
It reports the renderer's mean CPU time per load (Chrome's ``ProcessTime``) and wall time.
The versions of a round run one after the other under the same load, so their ratios are
the figures to quote; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from app.page_scripts import ASSETS, CORE_GLOB, patch_lookup
from bench.bench_idle_page import renderer_clock, serve_script
from tests.app_server import make_config, running_app
from tests.browser import VIEWPORT, chromium_browser, expect, settled

#: The versions of Gradio's app-tree script compared, in the order each round loads them.
VERSIONS = ("served", "without the events map", "Gradio's script as shipped")


def core_scripts() -> tuple[str, dict[str, bytes | None]]:
    """The app-tree script's file name and ``{version: its bytes}`` (None: as the app serves it)."""
    [path] = ASSETS.glob(CORE_GLOB)
    shipped = path.read_text(encoding="utf-8")
    return path.name, {
        VERSIONS[0]: None,
        VERSIONS[1]: patch_lookup(shipped).encode("utf-8"),
        VERSIONS[2]: shipped.encode("utf-8"),
    }


def load(browser, url: str, name: str, body: bytes | None) -> dict[str, float]:
    """Open the app at `url` in a fresh context of `browser`, its script `name` answered with
    `body` (None: as served), until the Start tab shows and nothing is pending.

    Returns
    -------
    dict
        ``renderer CPU s`` and ``seconds`` (wall) of the load.
    """
    context = browser.new_context(viewport=VIEWPORT)
    try:
        if body is not None:
            serve_script(context, name, body)
        page = context.new_page()
        process_time = renderer_clock(context, page)
        before, start = process_time(), time.monotonic()
        page.goto(url)
        expect(page.locator("#start_status")).to_contain_text("You are not signed in.")
        settled(page)
        return {"renderer CPU s": process_time() - before, "seconds": time.monotonic() - start}
    finally:
        context.close()


def measure(rounds: int = 2, loads: int = 5) -> list[dict[str, dict[str, float]]]:
    """Per round, ``{version: mean of load(...) over `loads` loads}`` for each of `VERSIONS`,
    after one load that warms the browser (its first load compiles the scripts)."""
    name, bodies = core_scripts()
    results = []
    with (
        tempfile.TemporaryDirectory() as folder,
        running_app(make_config(Path(folder))) as (client, _),
        chromium_browser() as browser,
    ):
        load(browser, client.src, name, None)
        for _ in range(rounds):
            result = {}
            for version in VERSIONS:
                runs = [load(browser, client.src, name, bodies[version]) for _ in range(loads)]
                result[version] = {key: sum(run[key] for run in runs) / loads for key in runs[0]}
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three versions (default 2)")
    parser.add_argument("--loads", type=int, default=5, help="page loads per version and round (default 5)")
    args = parser.parse_args(argv)
    for n, result in enumerate(measure(args.rounds, args.loads), 1):
        print(f"round {n}, 1-minute load {os.getloadavg()[0]:.2f}")
        for version, figures in result.items():
            print(
                f"  {version:28s} renderer {figures['renderer CPU s']:.2f} CPU-s, "
                f"{figures['seconds']:.2f} s per load"
            )
        served, without, shipped = (result[version]["renderer CPU s"] for version in VERSIONS)
        print(f"  served / without the map: {served / without:.2f}; served / shipped: {served / shipped:.2f}")


if __name__ == "__main__":
    main()
