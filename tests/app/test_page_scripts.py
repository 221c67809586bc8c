"""Two of Gradio's page scripts are served patched (`app.page_scripts`): the status tracker
with a teardown for its timer loop (an idle page runs no animation-frame loop once the page
has loaded), and the app tree with an indexed lookup of a component's node (the same node
as Gradio's search, for every id, before and after the tree changes) and a map of the events
attached to each component (the same events, in the same order, as Gradio's filter)."""

import gzip
import re

import httpx
import pytest

from app.page_scripts import (
    _ATTACHED,
    _FIND,
    ASSETS,
    ATTACHED_NAME,
    CORE_GLOB,
    LOOKUP_NAMES,
    TRACKER_GLOB,
    attached_events_method,
    indexed_lookup,
    patch_attached_events,
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


def test_the_app_tree_script_gets_the_indexed_lookup_and_the_events_map_and_nothing_else():
    [script] = sorted(ASSETS.glob(CORE_GLOB))
    shipped = script.read_text(encoding="utf-8")
    fixed = patched_scripts()[f"/assets/{script.name}"].decode("utf-8")
    [found] = _FIND.finditer(shipped)
    lookup = indexed_lookup(found.group("find"), renamed_search(found, LOOKUP_NAMES[1]))
    assert fixed.count(lookup) == 1
    # Gradio's find_attached_events replaced by the map's, whole.
    [attached] = _ATTACHED.finditer(shipped)
    assert fixed.count(attached_events_method()) == 1 and attached.group(0) not in fixed
    fixed = fixed.replace(attached_events_method(), attached.group(0))
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


def test_a_script_without_gradios_attached_events_filter_or_with_two_or_with_our_name_is_not_patched():
    shipped = next(ASSETS.glob(CORE_GLOB)).read_text(encoding="utf-8")
    assert patch_attached_events("class A{find_attached_events(e,t){return e}}") is None
    assert patch_attached_events(shipped + ";" + shipped) is None
    assert patch_attached_events(shipped + f";var {ATTACHED_NAME}=1") is None
    assert patch_attached_events(patch_attached_events(shipped)) is None  # never patched twice


def test_a_patch_that_does_not_apply_is_left_out_and_logged_and_the_others_still_apply(tmp_path, caplog):
    [core] = ASSETS.glob(CORE_GLOB)
    shipped = core.read_text(encoding="utf-8")
    [attached] = _ATTACHED.finditer(shipped)
    # A build whose filter is written otherwise: the lookup still applies, the events map not.
    (tmp_path / core.name).write_text(
        shipped.replace(attached.group(0), "find_attached_events(e,t){return e}")
    )
    (tmp_path / "statustracker-X.js").write_text("console.log('no tracker here')")  # no patch applies
    with caplog.at_level("WARNING", logger="app.page_scripts"):
        scripts = patched_scripts(tmp_path)
    assert list(scripts) == [f"/assets/{core.name}"]
    assert scripts[f"/assets/{core.name}"].decode("utf-8") == patch_lookup(
        (tmp_path / core.name).read_text(encoding="utf-8")
    )
    logged = "\n".join(caplog.messages)
    assert f"Gradio's {core.name} is not of the shape patch_attached_events knows" in logged
    assert "Gradio's statustracker-X.js is not of the shape patch_tracker knows" in logged


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


# Random dependencies ``{targets: [[id, event], ...]}`` (ids repeated within a dependency and
# across them, events that are null or empty) and nodes ``{id, props: {shared_props: {}}}``,
# one per id plus ids no dependency targets: the nodes on which Gradio's filter (as shipped)
# and the map (as patched) attach different events, within one pass and in later passes.
COMPARE_ATTACHED = """async () => {
    let seed = 11;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const events = ["click", "change", "submit", "select", null, "", "input"];
    const deps = (n, ids) => Array.from({length: n}, () => {
        const targets = [];
        for (let k = 1 + Math.floor(random() * 4); k > 0; k--) {  // a third repeat an id of theirs
            const id = targets.length && random() < 0.35 ? targets[0][0] : Math.floor(random() * ids);
            targets.push([id, events[Math.floor(random() * events.length)]]);
        }
        return {targets};
    });
    const node = (id) => ({id, props: {shared_props: {}}});
    const attached = (tree, id, t) => tree.find_attached_events(node(id), t).props.shared_props.attached_events;
    const differ = (t, ids) => {
        let n = 0;
        for (let id = -1; id <= ids; id++) {
            const a = attached(shipped, id, t), b = attached(patched, id, t);
            if (JSON.stringify(a) !== JSON.stringify(b)) n++;
        }
        return n;
    };
    const result = {};
    const first = deps(150, 300);
    result.attachedNodes = [...Array(300).keys()].filter((id) => attached(shipped, id, first).length).length;
    result.repeated = first.filter((d) => new Set(d.targets.map(([i]) => i)).size < d.targets.length).length;
    result.fresh = differ(first, 300);
    // Each node gets its own array: changing one node's events changes no other node's.
    const some = [...Array(300).keys()].find((id) => attached(shipped, id, first).length);
    patched.find_attached_events(node(some), first).props.shared_props.attached_events.push("mine");
    result.shared = differ(first, 300);
    // Another dependency list in the same pass (``reload`` gets a new one): its own map.
    result.other = differ(deps(40, 80), 80);
    // The same list changed in place, in a later task: the map of the earlier pass is gone.
    first.push(...deps(30, 300));
    await Promise.resolve();
    result.changed = differ(first, 300);
    result.kept = patched.__cc_attached !== null && patched.__cc_attached !== undefined;
    await Promise.resolve();
    result.dropped = patched.__cc_attached === null;
    return result;
}"""


@pytest.mark.browser
def test_the_events_map_attaches_what_gradios_filter_attaches_in_each_pass(module_chromium):
    [found] = _ATTACHED.finditer(next(ASSETS.glob(CORE_GLOB)).read_text(encoding="utf-8"))
    context = module_chromium.new_context()
    try:
        page = context.new_page()
        page.add_script_tag(
            content=f"var shipped={{{found.group(0)}}};var patched={{{attached_events_method()}}};"
        )
        result = page.evaluate(COMPARE_ATTACHED)
    finally:
        context.close()
    assert result["attachedNodes"] > 100 and result["repeated"] > 10, result  # the cases are there
    assert result["fresh"] == result["shared"] == result["other"] == result["changed"] == 0, result
    assert result["kept"] and result["dropped"], result  # kept within a pass, dropped after it
