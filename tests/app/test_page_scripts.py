"""Gradio's status tracker is served with a teardown for its timer loop (`app.page_scripts`):
an idle page runs no animation-frame loop once the page has loaded."""

import gzip
import re

import httpx
import pytest

from app.page_scripts import ASSETS, TRACKER_GLOB, patch, patched_scripts
from bench.bench_idle_page import COUNT_TRACKER_FRAMES, open_idle_page, serve_shipped_tracker
from tests.app_server import shared_app  # noqa: F401  (fixture)


def test_the_installed_gradio_has_one_tracker_script_and_the_patch_applies_to_it():
    scripts = sorted(ASSETS.glob(TRACKER_GLOB))
    assert len(scripts) == 1
    served = patched_scripts()
    assert list(served) == [f"/assets/{scripts[0].name}"]
    shipped = scripts[0].read_text(encoding="utf-8")
    fixed = served[f"/assets/{scripts[0].name}"].decode("utf-8")
    # One statement added, nothing else changed: an effect whose teardown clears the loop's flag.
    start = next(i for i, (a, b) in enumerate(zip(shipped, fixed)) if a != b)
    added = fixed[start : start + len(fixed) - len(shipped)]
    assert fixed[:start] + fixed[start + len(added) :] == shipped
    assert re.fullmatch(r"[\w$]+\(\(\)=>\(\)=>\{[\w$]+=!1\}\);", added), added


def test_a_script_without_the_loop_or_with_two_is_not_patched():
    assert patch("console.log('no tracker here')") is None
    shipped = next(ASSETS.glob(TRACKER_GLOB)).read_text(encoding="utf-8")
    assert patch(shipped) is not None
    assert patch(shipped + ";" + shipped) is None  # twice: which one is the tracker's is unclear


def test_the_app_serves_the_patched_script_plain_and_gzipped_and_head(shared_app):  # noqa: F811
    client, _ = shared_app
    [(path, body)] = patched_scripts().items()
    url = client.src.rstrip("/") + path
    plain = httpx.get(url, headers={"accept-encoding": "identity"})
    assert plain.status_code == 200 and plain.content == body
    assert (
        plain.headers["content-type"] == "application/javascript" and "content-encoding" not in plain.headers
    )
    zipped = httpx.get(url, headers={"accept-encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == body  # httpx decodes
    with httpx.stream("GET", url, headers={"accept-encoding": "gzip"}) as stream:
        assert gzip.decompress(b"".join(stream.iter_raw())) == body
    cached = httpx.get(url, headers={"if-none-match": plain.headers["etag"]})
    assert cached.status_code == 304 and cached.content == b""
    assert httpx.get(url, headers={"if-none-match": '"other"'}).content == body
    head = httpx.head(url)
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == plain.headers["etag"]
    # Every other Gradio script is Gradio's own answer.
    other = httpx.get(client.src + "assets/" + next(p.name for p in ASSETS.glob("index-*.js")))
    assert (
        other.status_code == 200
        and "etag" in other.headers
        and other.headers["etag"] != plain.headers["etag"]
    )


def _tracker_frames_while_idle(context, url: str, frames: int = 60) -> int:
    """The status tracker's animation-frame requests over `frames` frames of the browser,
    on the app's page at `url` once loaded with no event pending."""
    context.add_init_script(COUNT_TRACKER_FRAMES)
    page = open_idle_page(context, url)
    return page.evaluate(
        """(frames) => new Promise((done) => {
            const before = window.trackerFrames;
            let left = frames;
            const step = () => { if (--left > 0) window.originalFrame(step); else done(window.trackerFrames - before); };
            window.originalFrame(step);
        })""",
        frames,
    )


@pytest.mark.browser
def test_an_idle_page_runs_no_frame_loop_and_with_gradios_own_script_it_did(shared_app, module_chromium):  # noqa: F811
    client, _ = shared_app
    context = module_chromium.new_context()
    try:
        # No loop. A one-off request may fall in the window: the tracker's screen-reader
        # line announces the end of the page's first event up to 5 s after it (one frame).
        assert _tracker_frames_while_idle(context, client.src) <= 2
    finally:
        context.close()
    # The same page with Gradio's script as shipped: the loader's tracker, removed while
    # pending, asks for a frame at every frame for as long as the page is open.
    context = module_chromium.new_context()
    try:
        serve_shipped_tracker(context)
        assert _tracker_frames_while_idle(context, client.src) >= 59
    finally:
        context.close()
