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

**The events attached to each component.** When a page loads, the app tree's
``postprocess`` sets each node's ``attached_events`` with ``find_attached_events``, which
filters every dependency of the page for each node: 627 nodes times 121 dependencies, read
through reactive proxies, an eighth to a fifth of the renderer's CPU for a page load
(BENCHMARKS.md, "A page load's attached events"). `patch_attached_events` builds a map of
target id to event names once per pass of the tree and answers each node from it, with the
same events in the same order; the map is dropped in the next microtask, so a later pass
(``reload``) builds its own from the dependencies it is given.

Each patch is built from the names the script itself uses, found by their shape; when the
shape is not there exactly once (another Gradio build) that patch is left out, and the
script goes out as Gradio ships it when no patch applies; `patched_scripts` says so in the
log. `PatchedScripts` serves the patched scripts.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
from pathlib import Path

import gradio
from starlette.types import ASGIApp, Receive, Scope, Send

from app.route_path import route_path

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


# ``find_attached_events(node,deps){let events=deps.filter(dep=>dep.targets.find(([id])=>
# id===node.id)).map(dep=>{let target=dep.targets.find(([id])=>id===node.id);return target?
# target[1]:null}).filter(Boolean);return node.props.shared_props.attached_events=events,node}``
# minified (a method of the app tree's class: its name and the props' are kept).
_ATTACHED = re.compile(
    r"find_attached_events\((?P<node>[\w$]+),(?P<deps>[\w$]+)\)\{let (?P<events>[\w$]+)=(?P=deps)\.filter\("
    r"(?P<d1>[\w$]+)=>(?P=d1)\.targets\.find\(\(\[(?P<i1>[\w$]+)\]\)=>(?P=i1)===(?P=node)\.id\)\)"
    r"\.map\((?P<d2>[\w$]+)=>\{let (?P<t>[\w$]+)=(?P=d2)\.targets\.find\(\(\[(?P<i2>[\w$]+)\]\)=>"
    r"(?P=i2)===(?P=node)\.id\);return (?P=t)\?(?P=t)\[1\]:null\}\)\.filter\(Boolean\);"
    r"return (?P=node)\.props\.shared_props\.attached_events=(?P=events),(?P=node)\}"
)
#: The property the attached-events patch keeps its map in, on the app tree (absent from the
#: script, or no patch).
ATTACHED_NAME = "__cc_attached"


def attached_events_method() -> str:
    """JavaScript of the app tree's ``find_attached_events(node, deps)`` method answered from
    a map of target id to event names, built from `deps` at the first call of a pass over the
    tree (the map of the last call is reused while its `deps` is the same array, and dropped
    in the next microtask): per dependency in order, the event of its first target on the
    node's id, where that event is named, as Gradio's filter finds them."""
    keep = f"this.{ATTACHED_NAME}"
    return (
        f"find_attached_events(e,t){{let c={keep};if(!c||c.t!==t){{let m=new Map;"
        f"for(let d of t){{let s=new Set;for(let[i,v]of d.targets){{if(s.has(i))continue;s.add(i);"
        f"if(v){{let a=m.get(i);a?a.push(v):m.set(i,[v])}}}}}}"
        f"c={keep}={{t,m}};queueMicrotask(()=>{{{keep}=null}})}}"
        f"return e.props.shared_props.attached_events=(c.m.get(e.id)||[]).slice(),e}}"
    )


def patch_attached_events(script: str) -> str | None:
    """The app-tree `script` with `attached_events_method` in place of Gradio's
    ``find_attached_events``, or None when the script does not have that method exactly
    once or already uses `ATTACHED_NAME`."""
    found = list(_ATTACHED.finditer(script))
    if len(found) != 1 or ATTACHED_NAME in script:
        return None
    return script[: found[0].start()] + attached_events_method() + script[found[0].end() :]


#: What is patched: the scripts a glob names in `ASSETS`, and the patches of each, in order.
PATCHES = ((TRACKER_GLOB, (patch_tracker,)), (CORE_GLOB, (patch_lookup, patch_attached_events)))


def patched_scripts(assets: Path = ASSETS) -> dict[str, bytes]:
    """``{URL path: patched script}`` for each script of the installed Gradio that a patch of
    its own (`PATCHES`) applies to, with every such patch applied; a patch that does not
    apply is logged and left out, and a script no patch applies to is left out too."""
    scripts = {}
    for glob, patches in PATCHES:
        for path in sorted(assets.glob(glob)):
            script = shipped = path.read_text(encoding="utf-8")
            for patch in patches:
                fixed = patch(script)
                if fixed is None:
                    log.warning(
                        "Gradio's %s is not of the shape %s knows; not patched by it",
                        path.name,
                        patch.__name__,
                    )
                    continue
                script = fixed
            if script != shipped:
                scripts[f"/assets/{path.name}"] = script.encode("utf-8")
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
        answer = self.answers.get(route_path(scope)) if scope["type"] == "http" else None
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
