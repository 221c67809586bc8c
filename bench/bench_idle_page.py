"""An idle page: what Chromium spends on the app's page while nobody touches it (issue 28).

``python -m bench.bench_idle_page [--seconds S] [--rounds R]`` launches the app in this
process on a fresh database, opens its page in headless Chromium twice in each round, once
as served (Gradio's status-tracker script with `app.page_scripts`' teardown) and once with
Gradio's script as shipped (routed in by Playwright), and for each waits until the page has
loaded and no event is pending, then counts over `S` seconds: the status tracker's
animation-frame requests, the renderer's CPU time (Chrome's ``ProcessTime``) and the CPU
time of Chromium's GPU process (its own compositing and raster; from ``/proc``). The two
pages of a round run one after the other under the same load, so their ratio is the figure
to quote; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from app.page_scripts import ASSETS, TRACKER_GLOB
from bench.bench_cpu import process_cpu
from tests.app_server import make_config, running_app
from tests.browser import VIEWPORT, chromium_browser, expect, settled

#: Counts the requestAnimationFrame calls made from Gradio's status-tracker script
#: (``window.trackerFrames``); installed before the page's scripts run, so that the script's
#: own reference to the function is this one. ``window.originalFrame`` is the browser's.
COUNT_TRACKER_FRAMES = """
window.trackerFrames = 0;
const original = window.requestAnimationFrame.bind(window);
window.originalFrame = original;
window.requestAnimationFrame = (callback) => {
    if (/statustracker-/.test(new Error().stack)) window.trackerFrames += 1;
    return original(callback);
};
"""


def gpu_process_cpu() -> float:
    """CPU seconds (user + system) of every Chromium GPU process on this machine."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"--type=gpu-process" in Path(f"/proc/{pid}/cmdline").read_bytes():
                total += process_cpu(int(pid))
        except OSError:
            continue
    return total


def serve_script(context, name: str, body: bytes) -> None:
    """Make pages of `context` load `body` as Gradio's script `name` (a file name in `ASSETS`)
    instead of what the app serves (routed by Playwright)."""
    context.route(
        f"**/assets/{name}",
        lambda route: route.fulfill(status=200, body=body, content_type="application/javascript"),
    )


def serve_shipped(context, glob: str = TRACKER_GLOB) -> None:
    """Make pages of `context` load Gradio's script that `glob` names (default: the status
    tracker's) as shipped, without `app.page_scripts`' patch (the "before" of this
    benchmark, of `bench.bench_page_events` and of their tests)."""
    [path] = ASSETS.glob(glob)
    serve_script(context, path.name, path.read_bytes())


def renderer_clock(context, page) -> Callable[[], float]:
    """A function that reads the CPU seconds `page`'s renderer has used (Chrome's ``ProcessTime``)."""
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    return lambda: next(
        m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "ProcessTime"
    )


def open_idle_page(context, url: str):
    """A page of `context` on the app at `url`, loaded and with no event pending."""
    page = context.new_page()
    page.goto(url)
    expect(page.locator("#start_status")).to_contain_text("You are not signed in.")
    settled(page)
    return page


def idle(context, url: str, seconds: float) -> dict[str, float]:
    """Open the app's page in `context` (`open_idle_page`) and measure `seconds` of idling.

    Returns
    -------
    dict
        ``tracker frames`` (count), ``renderer CPU s`` and ``GPU process CPU s`` over the
        window, and ``seconds``, its length in s.
    """
    page = open_idle_page(context, url)
    process_time = renderer_clock(context, page)
    frames, renderer, gpu, start = (
        page.evaluate("() => window.trackerFrames"),
        process_time(),
        gpu_process_cpu(),
        time.monotonic(),
    )
    time.sleep(seconds)  # the window measured, not a wait for something
    return {
        "tracker frames": page.evaluate("() => window.trackerFrames") - frames,
        "renderer CPU s": process_time() - renderer,
        "GPU process CPU s": gpu_process_cpu() - gpu,
        "seconds": time.monotonic() - start,
    }


VARIANTS = ("served", "Gradio's script as shipped")


def served_and_shipped(
    rounds: int,
    run: Callable[[object, str], dict],
    *,
    glob: str = TRACKER_GLOB,
    init_script: str | None = None,
) -> list[dict[str, dict]]:
    """Launch the app in this process on a fresh database and, per round, call
    ``run(context, url)`` in a fresh Chromium context for each of `VARIANTS`, in that order:
    the page as served, then with Gradio's script that `glob` names as shipped
    (`serve_shipped`). `init_script` runs in every page before its own scripts.

    Returns
    -------
    list of dict
        Per round, ``{variant: run's result}``.
    """
    results = []
    with (
        tempfile.TemporaryDirectory() as folder,
        running_app(make_config(Path(folder))) as (client, _),
        chromium_browser() as browser,
    ):
        for _ in range(rounds):
            result = {}
            for name in VARIANTS:
                context = browser.new_context(viewport=VIEWPORT)
                if init_script:
                    context.add_init_script(init_script)
                if name != "served":
                    serve_shipped(context, glob)
                result[name] = run(context, client.src)
                context.close()
            results.append(result)
    return results


def measure(seconds: float = 10.0, rounds: int = 2) -> list[dict[str, dict[str, float]]]:
    """Per round, ``{"served": idle(...), "Gradio's script as shipped": idle(...)}``."""
    return served_and_shipped(
        rounds, lambda context, url: idle(context, url, seconds), init_script=COUNT_TRACKER_FRAMES
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle window per page (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="served/shipped pairs (default 2)")
    args = parser.parse_args(argv)
    for n, result in enumerate(measure(args.seconds, args.rounds), 1):
        print(f"round {n}, 1-minute load {os.getloadavg()[0]:.2f}")
        for name, figures in result.items():
            print(
                f"  {name:28s} {figures['tracker frames']:5.0f} tracker frames, renderer "
                f"{figures['renderer CPU s']:.2f} CPU-s, GPU process {figures['GPU process CPU s']:.2f} "
                f"CPU-s in {figures['seconds']:.1f} s"
            )


if __name__ == "__main__":
    main()
