"""The research views in Chromium at the full study's size: what a researcher waits for.

``python -m bench.bench_research_views --db DB --data-dir DIR [--concepts apple,bird,dog]
[--repeats 3] [--wait-s 0]`` opens a database that ``python -m bench.bench_scale --fractions 1.0 --keep
FOLDER`` kept (its printed ``app.py`` line names both paths) in a separate app process
(`bench.app_process.AppProcess`), signs a researcher in by an invite made with the library,
and times in headless Chromium, from the click until no Gradio event is pending
(`tests.browser.settled`):

- the Concept browser's *Show* for each concept, and beside it the library call its handler
  makes (`annotation.research.views.concept_view`), in this process on the same database:
  the difference is the page's round trip (the queue, the answer's plots and their drawing);
- the Leaderboards tab opened: until Table 1 shows (the first look's point estimates), and
  until every event has finished (the bootstrap intervals and the figures); then opened
  again after another tab (its kept result). With ``--wait-s 45`` the first open comes after
  the app has computed the view the tab opens on in the background.

`bench_scale`'s figures are the library calls alone; these are what a person sees.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from annotation.people.accounts import create_annotators, invite_url
from annotation.research.views import concept_view
from bench.app_process import AppProcess
from evaluation.concepts import load_concepts
from storage import open_db
from storage.human import DESIGNERS
from tests.browser import chromium_browser, expect, search, settled


def _researcher_link(db_path: Path, url: str) -> str:
    db = open_db(db_path)
    try:
        [(_, token)] = create_annotators(db, 1, "researcher")
    finally:
        db.close()
    return invite_url(url.rstrip("/"), token)


def _clicked(page, action) -> float:
    """Seconds from `action` (a click) until the events it started have finished."""
    start = time.perf_counter()
    settled(page, action)
    return time.perf_counter() - start


def _library_s(db_path: Path, data_dir: Path, concept: str) -> float:
    db = open_db(db_path)
    try:
        start = time.perf_counter()
        concept_view(db, data_dir, load_concepts(), concept, DESIGNERS, "natural")
        return time.perf_counter() - start
    finally:
        db.close()


def measure(
    db_path: Path, data_dir: Path, concepts: list[str], repeats: int, wait_s: float = 0.0
) -> list[tuple[str, float, str]]:
    """``(view, seconds, note)`` rows: each browser timing, and the library call beside it;
    the Leaderboards are first opened `wait_s` seconds after the researcher signed in."""
    rows = []
    with AppProcess(db_path, data_dir) as app, chromium_browser() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(_researcher_link(db_path, app.url))
        expect(page.locator("#start_status")).to_contain_text("Signed in as")
        settled(page)
        page.wait_for_timeout(wait_s * 1000)
        table = page.locator("#leaderboard_table1 table")
        start = time.perf_counter()
        page.get_by_role("tab", name="Leaderboards").click()
        expect(table).to_be_visible(timeout=600_000)
        rows.append(
            ("Leaderboards, first open: Table 1 shown", time.perf_counter() - start, "point estimates")
        )
        settled(page)
        rows.append(
            ("Leaderboards, first open: settled", time.perf_counter() - start, "intervals and figures too")
        )
        page.get_by_role("tab", name="Concept browser").click()
        settled(page)
        rows.append(
            ("Leaderboards, kept", _clicked(page, page.get_by_role("tab", name="Leaderboards").click), "")
        )
        page.get_by_role("tab", name="Concept browser").click()
        settled(page)
        for concept in concepts:
            search(page, "browser_concept", concept)
            browser_s = [_clicked(page, page.locator("#browser_show").click) for _ in range(repeats)]
            library_s = [_library_s(db_path, data_dir, concept) for _ in range(repeats)]
            rows.append((f"Concept browser, {concept}", statistics.median(browser_s), f"{repeats} runs"))
            rows.append(("  its library call", statistics.median(library_s), f"{repeats} runs"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a kept bench_scale database")
    parser.add_argument("--data-dir", type=Path, required=True, help="its data folder")
    parser.add_argument("--concepts", default="apple,bird,dog", help="comma-separated concepts to show")
    parser.add_argument(
        "--repeats", type=int, default=3, help="times each concept is shown (the median is kept)"
    )
    parser.add_argument(
        "--wait-s",
        type=float,
        default=0.0,
        help="seconds between the sign-in and the first open of the Leaderboards (the app computes "
        "the view the tab opens on once the data has been quiet 15 s: "
        "annotation.research.views.warm_first_leaderboard)",
    )
    args = parser.parse_args(argv)
    if not args.db.is_file():
        parser.error(f"--db {args.db} is not a file: give the database bench_scale --keep printed")
    if args.repeats < 1:
        parser.error(f"--repeats must be 1 or more, got {args.repeats}")
    if not 0 <= args.wait_s <= 3600:
        parser.error(f"--wait-s must be from 0 to 3600 seconds, got {args.wait_s}")
    concepts = [c.strip() for c in args.concepts.split(",") if c.strip()]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| view | seconds | |\n|---|---:|---|")
    for view, seconds, note in measure(args.db, args.data_dir, concepts, args.repeats, args.wait_s):
        print(f"| {view} | {seconds:.2f} | {note} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
