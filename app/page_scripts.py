"""Gradio's status-tracker script, served with its timer stopped when a tracker goes away.

Gradio 6's status tracker (``js/statustracker/static/index.svelte``) counts the seconds of a
pending event with a ``requestAnimationFrame`` loop that only a status change ends; it has no
teardown. A tracker removed while pending keeps its loop for the life of the page: the one
Gradio shows while the page loads is removed pending, so every page of every Gradio 6.31 app
asks for an animation frame 60 times a second for as long as it is open (measured: a bare
``gr.Blocks`` page too). Our page then cost Chromium ~0.1 CPU-s per second doing nothing
(BENCHMARKS.md, "An idle page"), on the designer's laptop as in the browser tests.

`StatusTrackerFix` serves that script with one statement added inside the component: an
effect with no dependencies whose teardown, run when the tracker is destroyed, clears the
loop's flag. The statement is built from the names the script itself uses, found by their
shape (`patch`); when the shape is not there (another Gradio build) the script is served as
Gradio ships it and `patched_scripts` says so in the log.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
from pathlib import Path

import gradio
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

#: Where Gradio's built page scripts are, and the status tracker's among them.
ASSETS = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
TRACKER_GLOB = "statustracker-*.js"

# The timer loop: ``function run(){raf(()=>{timer_diff=(performance.now()-start)/1e3,_timer&&run()})}``
# minified (``$.set(timer_diff, …)``), and the effect that starts it:
# ``effect(()=>{status==="pending"?start_timer():untrack(()=>{stop_timer()})})``.
_LOOP = re.compile(
    r"function (?P<run>[\w$]+)\(\)\{[\w$]+\(\(\)=>\{[\w$]+\([\w$]+,\(performance\.now\(\)-[\w$]+\([\w$]+\)\)/1e3\),"
    r"(?P<flag>[\w$]+)&&(?P=run)\(\)\}\)\}"
)
_START = re.compile(
    r"(?P<effect>[\w$]+)\(\(\)=>\{[\w$]+\.status===`pending`\?[\w$]+\(\):[\w$]+\(\(\)=>\{[\w$]+\(\)\}\)\}\)"
)


def patch(script: str) -> str | None:
    """The status-tracker `script` with a teardown that ends its timer loop, or None when
    the script does not have the loop and its effect exactly once each (not this build)."""
    loops, starts = list(_LOOP.finditer(script)), list(_START.finditer(script))
    if len(loops) != 1 or len(starts) != 1:
        return None
    loop, effect = loops[0], starts[0].group("effect")
    teardown = f"{effect}(()=>()=>{{{loop.group('flag')}=!1}});"
    return script[: loop.end()] + teardown + script[loop.end() :]


def patched_scripts(assets: Path = ASSETS) -> dict[str, bytes]:
    """``{URL path: patched script}`` for each status-tracker script of the installed Gradio
    that `patch` applies to; a script it does not apply to is logged and left out."""
    scripts = {}
    for path in sorted(assets.glob(TRACKER_GLOB)):
        fixed = patch(path.read_text(encoding="utf-8"))
        if fixed is None:
            log.warning("Gradio's %s has no timer loop of the known shape; served as shipped", path.name)
            continue
        scripts[f"/assets/{path.name}"] = fixed.encode("utf-8")
    return scripts


class StatusTrackerFix:
    """ASGI middleware: answer ``GET``/``HEAD`` of a patched status-tracker script
    (`patched_scripts`) with the patched bytes, gzipped for clients that accept it, or 304
    when the client's copy has its ETag; every other request goes on to Gradio."""

    def __init__(self, app: ASGIApp, scripts: dict[str, bytes] | None = None) -> None:
        self.app = app
        scripts = patched_scripts() if scripts is None else scripts
        self.answers = {
            path: (body, gzip.compress(body, compresslevel=9), f'"{hashlib.sha256(body).hexdigest()[:32]}"')
            for path, body in scripts.items()
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self.answers.get(scope.get("path", "")) if scope["type"] == "http" else None
        if answer is None or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        plain, zipped, etag = answer
        request = dict(scope["headers"])
        if request.get(b"if-none-match", b"").decode("latin-1") == etag:
            await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", etag.encode())]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = zipped if b"gzip" in request.get(b"accept-encoding", b"") else plain
        headers = [
            (b"content-type", b"application/javascript"),
            (b"content-length", str(len(body)).encode()),
            (b"etag", etag.encode()),
            (b"vary", b"Accept-Encoding"),
        ]
        if body is zipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
