"""Designers opening the page at once: seconds from navigation to a ready canvas (issue 28).

``python -m bench.bench_page_open [--designers 30] [--rounds 2]`` prepares a fresh study
(every designer has agreed to the consent text and read the instructions, so their next view
is a practice sketch), starts ``app.py`` (`bench.app_process`), and has one headless
Chromium (Debian's, as the browser tests use) open each designer's invite link in a browser
context of its own, all at once. For each page it times, from the start of the navigation:
the HTML's arrival (``responseEnd``), the page's ``load`` event and the coloring canvas
ready to paint (``#designer_canvas .cc-root[data-ready=true]``: the sketch drawn, the
tools live). Rounds after the first find Chromium's cache warm, as returning designers do.

Chromium renders 30 pages on the same cores as the server, so these are the times of a
machine that serves and renders; a real designer renders only their own page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from annotation.concepts import sync_concepts
from annotation.people import onboarding
from annotation.people.accounts import create_annotators
from annotation.sketches.library import sync_shipped_sketches
from bench.app_process import AppProcess
from storage import ensure_schema, open_db

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
READY = "#designer_canvas .cc-root[data-ready=true]"
#: A ceiling on waiting for one page on a busy machine, not a time anything is expected to take.
PAGE_TIMEOUT_MS = 300_000


def prepare(db_path: Path, data_dir: Path, designers: int) -> list[str]:
    """A fresh study whose `designers` are past consent and instructions; their invite tokens."""
    db = open_db(db_path)
    try:
        ensure_schema(db)
        sync_concepts(db)
        sync_shipped_sketches(db, data_dir)
        _, consent_sha = onboarding.read_text(onboarding.CONSENT_FILE)
        tokens = []
        for row, token in create_annotators(db, designers, "designer"):
            onboarding.record_consent(db, row["id"], consent_sha, True)
            onboarding.mark_instructions_read(db, row["id"])
            tokens.append(token)
        return tokens
    finally:
        db.close()


async def _open(browser, url: str) -> dict[str, float]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = await context.new_page()
        start = time.perf_counter()
        await page.goto(url, wait_until="commit", timeout=PAGE_TIMEOUT_MS)
        await page.wait_for_selector(READY, timeout=PAGE_TIMEOUT_MS)
        ready_s = time.perf_counter() - start
        timing = await page.evaluate(
            "() => { const t = performance.getEntriesByType('navigation')[0];"
            " return [t.responseEnd / 1000, t.loadEventEnd / 1000]; }"
        )
        return {"html_s": timing[0], "load_s": timing[1], "ready_s": ready_s}
    finally:
        await context.close()


async def _round(browser, urls: list[str]) -> list[dict[str, float]]:
    return list(await asyncio.gather(*(_open(browser, url) for url in urls)))


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def summarise(pages: list[dict[str, float]]) -> dict[str, float]:
    """p50 and p95 (s) of each timing over `pages`."""
    figures = {"pages": len(pages)}
    for key in ("html_s", "load_s", "ready_s"):
        values = [p[key] for p in pages]
        figures[f"{key[:-2]}_p50_s"] = statistics.median(values)
        figures[f"{key[:-2]}_p95_s"] = _p95(values)
    return figures


async def _measure(url: str, tokens: list[str], rounds: int) -> list[dict[str, float]]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        try:
            results = []
            for _ in range(rounds):
                load_before = os.getloadavg()[0]
                pages = await _round(browser, [f"{url}?invite={token}" for token in tokens])
                results.append(
                    summarise(pages) | {"load_before": load_before, "load_after": os.getloadavg()[0]}
                )
            return results
        finally:
            await browser.close()


def run(designers: int = 30, rounds: int = 2) -> list[dict[str, float]]:
    """Prepare, start the app, and open `designers` pages at once `rounds` times."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        tokens = prepare(root / "study.sqlite", root / "data", designers)
        password = root / "admin_password.txt"
        password.write_text("bench page open password\n", encoding="utf-8")
        env = {"COLORCONCEPT_ADMIN_PASSWORD_FILE": str(password)}
        with AppProcess(root / "study.sqlite", root / "data", env=env) as app:
            return asyncio.run(_measure(app.url, tokens, rounds))


def describe(round_: int, f: dict[str, float]) -> str:
    """One line of a round's figures."""
    return (
        f"round {round_}: {f['pages']} pages at once: HTML p50/p95 {f['html_p50_s']:.2f}/"
        f"{f['html_p95_s']:.2f} s, load event {f['load_p50_s']:.2f}/{f['load_p95_s']:.2f} s, "
        f"ready canvas {f['ready_p50_s']:.2f}/{f['ready_p95_s']:.2f} s "
        f"(load average {f['load_before']:.1f} before, {f['load_after']:.1f} after)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designers", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for n, figures in enumerate(run(args.designers, args.rounds), 1):
        print(describe(n, figures), flush=True)


if __name__ == "__main__":
    main()
