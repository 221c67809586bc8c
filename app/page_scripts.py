"""Two of Gradio's page scripts, served with fixes for what they cost the browser.

**The status tracker's timer.** Gradio 6's status tracker
(``js/statustracker/static/index.svelte``) counts the seconds of a pending event with a
``requestAnimationFrame`` loop that only a status change ends; it has no teardown. A tracker
removed while pending keeps its loop for the life of the page: the one Gradio shows while
the page loads is removed pending, so every page of every Gradio 6.31 app asks for an
animation frame 60 times a second for as long as it is open (measured: a bare ``gr.Blocks``
page too). Our page then cost Chromium ~0.1 CPU-s per second doing nothing (BENCHMARKS.md,
"An idle page"), on the designer's laptop as in the browser tests. `patch_tracker` adds one
statement inside the component: an effect with no dependencies whose teardown, run when the
tracker is destroyed, clears the loop's flag.

**The page's lookup of a component by id.** Gradio 6's app tree (``js/core/src/init.svelte.ts``,
built into ``core-*.js``) finds a component's node with ``find_node_by_id``, a depth-first
search from the root, at every ``update_state``: for each output of each event, several
times (its loading status, then its value). Our page has 706 components behind reactive
proxies, so each lookup walks hundreds of proxied nodes; in the pilot walk that search and
the proxies' ``get`` were a fifth of the renderer's profile (BENCHMARKS.md, "The
page's lookups"). `patch_lookup` keeps the search and puts an index in front of it: an
id-to-node map per root, built on first use, answered from when it holds the id and
rebuilt when a search finds a node it lacked; ``rerender`` (``gr.render``, the one place
that replaces a subtree of a root in place) drops every map. A new root (``reload``, the
first ``postprocess``) has no map.

Each patch is built from the names the script itself uses, found by their shape; when the
shape is not there exactly once (another Gradio build) the script is served as Gradio ships
it and `patched_scripts` says so in the log. `PatchedScripts` serves the patched scripts.
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

#: Where Gradio's built page scripts are, and the two patched among them.
ASSETS = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
TRACKER_GLOB = "statustracker-*.js"
CORE_GLOB = "core-*.js"

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


def patch_tracker(script: str) -> str | None:
    """The status-tracker `script` with a teardown that ends its timer loop, or None when
    the script does not have the loop and its effect exactly once each (not this build)."""
    loops, starts = list(_LOOP.finditer(script)), list(_START.finditer(script))
    if len(loops) != 1 or len(starts) != 1:
        return None
    loop, effect = loops[0], starts[0].group("effect")
    teardown = f"{effect}(()=>()=>{{{loop.group('flag')}=!1}});"
    return script[: loop.end()] + teardown + script[loop.end() :]


# ``function find_node_by_id(node,id){if(node.id===id)return node;if(node.children)for(let
# child of node.children){let node=find_node_by_id(child,id);if(node)return node}return null}``
# minified, and ``rerender``'s replacement of a subtree, right after its one error message.
_FIND = re.compile(
    r"function (?P<find>[\w$]+)\((?P<node>[\w$]+),(?P<id>[\w$]+)\)\{if\((?P=node)\.id===(?P=id)\)return (?P=node);"
    r"if\((?P=node)\.children\)for\(let (?P<child>[\w$]+) of (?P=node)\.children\)\{let (?P=node)="
    r"(?P=find)\((?P=child),(?P=id)\);if\((?P=node)\)return (?P=node)\}return null\}"
)
_REPLACE = re.compile(
    r"(?<=`Rerender failed: root node not found in current tree`\);)[\w$]+\.children=[\w$]+\.children,"
)
#: The names the lookup patch adds to the script (absent from it, or no patch).
LOOKUP_NAMES = ("__cc_index", "__cc_search", "__cc_ids")


def renamed_search(found: re.Match, name: str) -> str:
    """Gradio's search as `found` by `_FIND` matched it, called `name` (its recursion too)."""
    return re.sub(rf"(?<![\w$]){re.escape(found.group('find'))}\(", f"{name}(", found.group(0))


def indexed_lookup(find: str, search: str) -> str:
    """JavaScript that defines `find` (``find(root, id)``: the node of `id` in the tree
    under `root`, or null) as an indexed lookup in front of `search`, Gradio's depth-first
    search renamed to ``LOOKUP_NAMES[1]`` (`renamed_search`), and the other names of
    `LOOKUP_NAMES` (module docstring). ``__cc_index=new WeakMap`` drops every map."""
    index, search_name, ids = LOOKUP_NAMES
    return (
        f"var {index}=new WeakMap;{search}"
        f"function {ids}(e){{let m=new Map,w=n=>{{m.has(n.id)||m.set(n.id,n);"
        f"if(n.children)for(let c of n.children)w(c)}};w(e);{index}.set(e,m);return m}}"
        f"function {find}(e,t){{let r=({index}.get(e)||{ids}(e)).get(t);"
        f"if(r!==void 0)return r;r={search_name}(e,t);if(r)({ids}(e));return r}}"
    )


def patch_lookup(script: str) -> str | None:
    """The app-tree `script` with its node lookup indexed (`indexed_lookup`, in front of
    Gradio's own search) and its subtree replacement dropping the indexes, or None when the
    script does not have the search and the replacement exactly once each, or already uses
    a name of ours."""
    finds, replaces = list(_FIND.finditer(script)), list(_REPLACE.finditer(script))
    if len(finds) != 1 or len(replaces) != 1 or any(name in script for name in LOOKUP_NAMES):
        return None
    find, replace = finds[0], replaces[0]
    lookup = indexed_lookup(find.group("find"), renamed_search(find, LOOKUP_NAMES[1]))
    edits = sorted(
        [
            (find.start(), find.end(), lookup),
            (replace.end(), replace.end(), f"{LOOKUP_NAMES[0]}=new WeakMap,"),
        ],
        reverse=True,
    )
    for start, end, text in edits:
        script = script[:start] + text + script[end:]
    return script


#: What is patched: the scripts a glob names in `ASSETS`, and the patch of each.
PATCHES = ((TRACKER_GLOB, patch_tracker), (CORE_GLOB, patch_lookup))


def patched_scripts(assets: Path = ASSETS) -> dict[str, bytes]:
    """``{URL path: patched script}`` for each script of the installed Gradio that its patch
    (`PATCHES`) applies to; a script it does not apply to is logged and left out."""
    scripts = {}
    for glob, patch in PATCHES:
        for path in sorted(assets.glob(glob)):
            fixed = patch(path.read_text(encoding="utf-8"))
            if fixed is None:
                log.warning(
                    "Gradio's %s is not of the shape %s knows; served as shipped", path.name, patch.__name__
                )
                continue
            scripts[f"/assets/{path.name}"] = fixed.encode("utf-8")
    return scripts


class PatchedScripts:
    """ASGI middleware: answer ``GET``/``HEAD`` of a patched script (`patched_scripts`) with
    the patched bytes, gzipped for clients that accept it, or 304 when the client's copy has
    its ETag; every other request goes on to Gradio."""

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
