"""The page's events: what Chromium's renderer spends on a signed-in admin's clicks (issue 28).

``python -m bench.bench_page_events [--rounds R] [--passes P]`` launches the app in this
process on a fresh database and, in each round, opens its page in headless Chromium twice:
once as served (Gradio's app-tree script with `app.page_scripts`' indexed lookup) and once
with Gradio's script as shipped (routed in by Playwright). Each time it loads the page,
signs in as the admin, then opens every tab the admin sees, `P` times over, waiting after
each click until no event is pending (`tests.browser.settled`). It reports the renderer's
CPU time over the whole walk (Chrome's ``ProcessTime``), the walk's wall time and the
number of clicks. The two walks of a round run one after the other under the same load, so
their ratio is the figure to quote; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import time

from app.page_scripts import CORE_GLOB
from bench.bench_idle_page import VARIANTS, renderer_clock, served_and_shipped
from tests.browser import expect, settled, sign_in_admin


def walk(context, url: str, passes: int) -> dict[str, float]:
    """Load the app at `url` in a page of `context`, sign in as the admin and open every tab
    `passes` times over, each click settled.

    Returns
    -------
    dict
        ``renderer CPU s`` (from before the page loads to the last settled click), ``seconds``
        (wall time of the same span) and ``clicks`` (tabs opened).
    """
    page = context.new_page()
    process_time = renderer_clock(context, page)
    before, start = process_time(), time.monotonic()
    page.goto(url)
    expect(page.locator("#start_status")).to_contain_text("You are not signed in.")
    sign_in_admin(page)
    expect(page.get_by_role("tab", name="Admin")).to_be_visible()  # the admin's tabs are shown
    settled(page)
    tabs = [name.strip() for name in page.get_by_role("tab").all_inner_texts() if name.strip()]
    clicks = 0
    for _ in range(passes):
        for name in tabs:
            page.get_by_role("tab", name=name, exact=True).click()
            settled(page)  # a tab that loads nothing on open starts no event
            clicks += 1
    return {
        "renderer CPU s": process_time() - before,
        "seconds": time.monotonic() - start,
        "clicks": clicks,
    }


def measure(rounds: int = 2, passes: int = 2) -> list[dict[str, dict[str, float]]]:
    """Per round, ``{variant: walk(...)}`` for each of `VARIANTS`, in that order."""
    return served_and_shipped(rounds, lambda context, url: walk(context, url, passes), glob=CORE_GLOB)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="served/shipped pairs (default 2)")
    parser.add_argument(
        "--passes", type=int, default=2, help="times every tab is opened per walk (default 2)"
    )
    args = parser.parse_args(argv)
    for n, result in enumerate(measure(args.rounds, args.passes), 1):
        print(f"round {n}, 1-minute load {os.getloadavg()[0]:.2f}")
        for name, figures in result.items():
            print(
                f"  {name:28s} renderer {figures['renderer CPU s']:.2f} CPU-s over {figures['clicks']} tab "
                f"clicks in {figures['seconds']:.1f} s"
            )
        served, shipped = (result[name]["renderer CPU s"] for name in VARIANTS)
        print(f"  served / shipped: {served / shipped:.2f}")


if __name__ == "__main__":
    main()
