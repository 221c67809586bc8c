"""The app's services belong to its `AppContext`: started by `build_app`, stopped by
``demo.close()``, never shared between two apps in one process (issue 29, item 2)."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading

import httpx
import pytest

from annotation.research import views
from app import build_app
from evaluation.concepts import load_concepts
from evaluation.pipeline.jobs import JobError, SegmenterSpec
from storage import human as human_rows
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app, wait_for
from tests.research_data import one_hot, sign_in, store_segmented_run

SERVICE_THREADS = {"refresh-leaderboards", "warm-coloring-pool"}
HUMAN = {"apple": one_hot(0, 0.5, 40), "rotten apple": one_hot(60, 0.7, 30)}


def _close_client(client) -> None:
    """End the test's own client threads (its heartbeat and three executors), so that every
    thread still alive after the app's close is the app's."""
    client.close()
    for executor in (client.executor, client.helper_executor, client.stream_executor):
        executor.shutdown(wait=True)


def _store(config) -> str:
    db = open_db(config.db_path)
    try:
        human_rows.store_reference(db, "lab", HUMAN, "test ratings")
        cells = {("m-red", c, "natural", 5.0): [(200, 30, 30)] for c in HUMAN}
        store_segmented_run(db, config.data_dir, "served", cells)
        return views.db_path(db)
    finally:
        db.close()


def test_two_apps_built_launched_and_closed_in_one_process_leave_no_thread_and_share_nothing(tmp_path):
    before = set(threading.enumerate())
    children = set(multiprocessing.active_children())
    contexts = []
    for n in range(2):
        (tmp_path / f"app{n}").mkdir()
        config = make_config(tmp_path / f"app{n}", workers=1)
        with running_app(config) as (client, demo):
            ctx = demo.colorconcept_ctx
            assert {t.name for t in ctx.threads} == SERVICE_THREADS
            assert httpx.get(f"{demo.local_url}healthz").text == "ready"
            # A researcher's view is kept in this app's cache, not in the library's default.
            path = _store(config)
            researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
            client.predict(
                researcher,
                "lab",
                "recommended",
                "ratio_of_means",
                "50",
                "0",
                "0",
                api_name="/leaderboard_show",
            )
            assert ctx.leaderboards.kept(path) == 1 and views.DEFAULT_CACHE.kept(path) == 0
            refresher = next(t for t in ctx.threads if t.name == "refresh-leaderboards")
            assert refresher.is_alive()
            contexts.append(ctx)
        _close_client(client)

        def left() -> list[str]:
            return sorted(t.name for t in set(threading.enumerate()) - before if t.is_alive())

        assert wait_for(lambda: not left()), f"threads left after closing app {n}: {left()}"
        assert not any(t.is_alive() for t in ctx.threads)
        assert set(multiprocessing.active_children()) <= children  # the coloring workers ended
        with pytest.raises(JobError, match="shutting down"):
            ctx.jobs.submit("late", SegmenterSpec())
    first, second = contexts
    assert first.leaderboards is not second.leaderboards and second.leaderboards.kept(path) == 1
    assert first.jobs is not second.jobs and first.pool is not second.pool


def test_closing_an_app_never_launched_stops_its_refresher_inside_its_wait(tmp_path):
    """The refresher looks every 5 s (`views.REFRESH_PERIOD_S`) and, with a leaderboard kept,
    has work at each look; closing ends it in its wait, not at the end of the process."""
    config = make_config(tmp_path)
    demo = build_app(config)
    ctx = demo.colorconcept_ctx
    path = _store(config)
    with ctx.db() as db:
        ctx.leaderboards.analyses(db, load_concepts(), "lab", resampling=None)
    assert ctx.leaderboards.kept(path) == 1
    [refresher] = ctx.threads
    assert refresher.is_alive()
    demo.close()  # Gradio's own close does nothing for an app that never ran
    assert not refresher.is_alive()
    demo.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        ctx.start()


def test_closing_while_pages_heartbeats_end_on_the_servers_loop_raises_nothing(tmp_path):
    """Gradio's close set the server's stop event from the closing thread while the loop
    dropped the waits of heartbeats that ended (pages closing): "deque mutated during
    iteration" at a test's close in CI. 50,000 such waits end here during the close."""
    with running_app(make_config(tmp_path, workers=1)) as (client, demo):
        loop = demo.server.servers[0].get_loop()
        event = demo.app.stop_event
        waiting = threading.Event()

        async def heartbeats_ending() -> int:
            waits = [asyncio.create_task(event.wait()) for _ in range(50_000)]
            await asyncio.sleep(0)
            waiting.set()
            for n, wait in enumerate(waits):
                wait.cancel()
                if n % 20 == 0:
                    await asyncio.sleep(0)
            return len(waits)

        ending = asyncio.run_coroutine_threadsafe(heartbeats_ending(), loop)
        assert waiting.wait(timeout=60)
        demo.close()
        assert event.is_set() and not demo.is_running
        assert ending.result(timeout=60) == 50_000
        _close_client(client)
