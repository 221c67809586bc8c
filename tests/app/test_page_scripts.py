"""Two of Gradio's page scripts are served patched (`app.page_scripts`): the status tracker
with a teardown for its timer loop (an idle page runs no animation-frame loop once the page
has loaded), and the app tree with an indexed lookup of a component's node (the same node
as Gradio's search, for every id, before and after the tree changes)."""

import gzip
import re

import httpx
import pytest

from app.page_scripts import (
    _FIND,
    ASSETS,
    CORE_GLOB,
    LOOKUP_NAMES,
    TRACKER_GLOB,
    indexed_lookup,
    patch_lookup,
    patch_tracker,
    patched_scripts,
    renamed_search,
)
from bench.bench_idle_page import COUNT_TRACKER_FRAMES, open_idle_page, serve_shipped
from tests.app_server import shared_app  # noqa: F401  (fixture)


def test_the_installed_gradio_has_one_tracker_script_and_the_patch_applies_to_it():
    scripts = sorted(ASSETS.glob(TRACKER_GLOB))
    assert len(scripts) == 1
    served = patched_scripts()
    assert f"/assets/{scripts[0].name}" in served
    shipped = scripts[0].read_text(encoding="utf-8")
    fixed = served[f"/assets/{scripts[0].name}"].decode("utf-8")
    # One statement added, nothing else changed: an effect whose teardown clears the loop's flag.
    start = next(i for i, (a, b) in enumerate(zip(shipped, fixed)) if a != b)
    added = fixed[start : start + len(fixed) - len(shipped)]
    assert fixed[:start] + fixed[start + len(added) :] == shipped
    assert re.fullmatch(r"[\w$]+\(\(\)=>\(\)=>\{[\w$]+=!1\}\);", added), added


def test_a_script_without_the_loop_or_with_two_is_not_patched():
    assert patch_tracker("console.log('no tracker here')") is None
    shipped = next(ASSETS.glob(TRACKER_GLOB)).read_text(encoding="utf-8")
    assert patch_tracker(shipped) is not None
    assert patch_tracker(shipped + ";" + shipped) is None  # twice: which one is the tracker's is unclear


def test_the_app_tree_script_gets_the_indexed_lookup_and_nothing_else():
    [script] = sorted(ASSETS.glob(CORE_GLOB))
    shipped = script.read_text(encoding="utf-8")
    fixed = patched_scripts()[f"/assets/{script.name}"].decode("utf-8")
    [found] = _FIND.finditer(shipped)
    lookup = indexed_lookup(found.group("find"), renamed_search(found, LOOKUP_NAMES[1]))
    assert fixed.count(lookup) == 1
    # The search replaced by the indexed lookup, and one statement added to ``rerender``:
    # dropping the indexes right after it replaces a subtree.
    restored = fixed.replace(lookup, found.group(0))
    drop = f"{LOOKUP_NAMES[0]}=new WeakMap,"
    assert restored.count(drop) == 1
    at = restored.index(drop)
    assert restored[:at].endswith(".children,") and "Rerender failed" in restored[at - 200 : at]
    assert restored.replace(drop, "") == shipped


def test_a_script_without_the_search_or_with_two_or_with_our_names_is_not_patched():
    shipped = next(ASSETS.glob(CORE_GLOB)).read_text(encoding="utf-8")
    assert patch_lookup("function f(e,t){return null}") is None
    assert patch_lookup(shipped + ";" + shipped) is None
    assert patch_lookup(shipped.replace("Rerender failed", "Re-render failed")) is None  # no drop point
    assert patch_lookup(shipped + ";var __cc_ids=1") is None  # a name of ours already taken
    assert patch_lookup(patch_lookup(shipped)) is None  # never patched twice


def test_the_app_serves_the_patched_script_plain_and_gzipped_and_head(shared_app):  # noqa: F811
    client, _ = shared_app
    scripts = patched_scripts()
    assert len(scripts) == 2  # the status tracker's and the app tree's
    etags = {_served_as_patched(client.src.rstrip("/") + path, body) for path, body in scripts.items()}
    # Every other Gradio script is Gradio's own answer.
    other = httpx.get(client.src + "assets/" + next(p.name for p in ASSETS.glob("index-*.js")))
    assert other.status_code == 200 and "etag" in other.headers and other.headers["etag"] not in etags


def _served_as_patched(url: str, body: bytes) -> str:
    """Check the answers for `url`, served as `body` (plain, gzipped, 304, HEAD); its ETag."""
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
    return plain.headers["etag"]


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
        serve_shipped(context)
        assert _tracker_frames_while_idle(context, client.src) >= 59
    finally:
        context.close()


# Random trees of nodes ``{id, children}`` (some ids repeated, as the search's first match is
# what counts), and every id looked up, plus ids in no node: the number of lookups in which
# the indexed lookup and Gradio's search disagree, after each way the tree changes.
COMPARE_LOOKUPS = """() => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const tree = (depth, next) => {
        const node = {id: random() < 0.05 ? 1 : next.id++};
        if (depth > 0 && random() < 0.8) {
            node.children = Array.from({length: 1 + Math.floor(random() * 5)}, () => tree(depth - 1, next));
        }
        return node;
    };
    const ids = (root) => { const all = [-1, 1e9]; const walk = (n) => { all.push(n.id); (n.children || []).forEach(walk); }; walk(root); return all; };
    const differ = (root) => ids(root).filter((id) => indexed(root, id) !== shipped(root, id)).length;
    const counter = {id: 2};
    const root = tree(7, counter);
    const result = {nodes: ids(root).length - 2, fresh: differ(root), again: differ(root)};
    // A node added in place (Gradio adds none, but a miss must find it): searched, then indexed.
    const parent = root.children.find((c) => c.children) || root;
    parent.children.push({id: counter.id++});
    result.added = differ(root);
    // A subtree replaced, as ``rerender`` does: ids kept, new nodes.
    const replace = () => { const target = root.children.find((c) => c.children && c.children.length); const copy = JSON.parse(JSON.stringify(target)); target.children = copy.children; };
    replace();
    result.replacedKept = differ(root);  // without dropping the indexes: stale nodes
    __cc_index = new WeakMap;  // what the patched ``rerender`` does after replacing
    result.replaced = differ(root);
    result.newRoot = differ(JSON.parse(JSON.stringify(root)));  // ``reload``: another root
    return result;
}"""


@pytest.mark.browser
def test_the_indexed_lookup_finds_what_gradios_search_finds_before_and_after_the_tree_changes(
    module_chromium,
):
    [found] = _FIND.finditer(next(ASSETS.glob(CORE_GLOB)).read_text(encoding="utf-8"))
    search = renamed_search(found, LOOKUP_NAMES[1])
    context = module_chromium.new_context()
    try:
        page = context.new_page()
        page.add_script_tag(
            content=renamed_search(found, "shipped") + ";" + indexed_lookup("indexed", search)
        )
        result = page.evaluate(COMPARE_LOOKUPS)
    finally:
        context.close()
    assert result["nodes"] > 200, result
    assert result["fresh"] == result["again"] == result["added"] == 0
    assert result["replaced"] == result["newRoot"] == 0
    assert result["replacedKept"] > 0  # the drop in ``rerender`` is needed: the check can fail
