"""What the page and the API clients are sent: each what it reads, no more (issue 28.1).

Where Gradio sends more than its reader uses:

- **The components' API schemas** (`lean_config`): Gradio puts three copies of every
  component's schema in the configuration (``api_info``, ``api_info_as_input``,
  ``api_info_as_output``, mostly equal), an example value and ``skip_api``. The page reads
  none of them, so its configuration has none; `gradio_client` reads ``skip_api`` and
  ``api_info`` (to know which inputs are files it must upload), so ``/config`` keeps those,
  ``api_info`` only where the value holds a file.
- **The buttons API endpoints hang on** (`app.common.api_button`: every `wire` twin and the
  endpoints for API clients alone, ~80 hidden buttons and their events, ~80 kB): the page
  never shows or clicks them, so its configuration leaves them out (`page_config`); the
  server keeps them, and ``/config`` lists them for clients.
- **What the page's script never reads** (`page_config`; read in Gradio 6's bundled script):
  the gradio class hash of every built-in component (the script loads a built-in by its
  type when the hash is absent), ``preserved_by_key`` and a null ``key`` (used only by
  ``gr.render``, which the app does not use), and the event fields it never reads or reads
  only as "set or not", where they hold the value they have when absent (`EVENT_DEFAULTS`).
  ~120 kB of ~410. (The top-level ``layout`` is a copy of ``page[""]``'s, which is the one
  the script reads, but Gradio's page route writes it into each page afresh.)
- **The page's copy of the API description.** Gradio writes the whole of
  ``/gradio_api/info`` (every endpoint's parameters and code snippets, ~310 kB) into every
  page, for its script's client, which calls the page's own events by index and needs none
  of it. The page gets an empty description; the *Use via API* view fetches
  ``/gradio_api/info`` itself when opened, and that answer is whole.
- **``/config``** is what API clients read (`gradio_client`, `bench.designer_client`); the
  page never fetches it, since its configuration is written into the page itself
  (``window.gradio_config``; Gradio's script fetches ``/config`` only in its dev mode).
  `ClientConfig` answers it with what a client reads (`client_config` of the whole
  configuration): each component's id, type and file schema, each event's id, name,
  visibility, inputs, outputs and cancels; none of the props, layout or page script.
  Whoever needs what a page runs on reads the page (`bench.app_process.page_config`).

And what the page does per event: no event keeps a loading status on a layout block
(`progress_on_components`), since Gradio's script copies the state of everything inside one
at each status change of any later event.

And the text answers (page, configuration, API description) go out compressed
(`CompressText`) to browsers that accept gzip, which all do.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import gradio as gr
from gradio_client import utils as client_utils
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.common import API_BUTTON
from app.route_path import route_path

#: What Gradio puts in each component's configuration for API clients; the page reads none.
_API_ONLY = ("api_info", "api_info_as_input", "api_info_as_output", "example_inputs", "skip_api")

#: The page's own copy of the API description: no endpoint (module docstring).
PAGE_API_INFO = {"named_endpoints": {}, "unnamed_endpoints": {}}

#: What `gradio_client.Client` reads of a component and of an event in ``/config``.
CLIENT_COMPONENT_KEYS = ("id", "type", "skip_api", "api_info")
CLIENT_EVENT_KEYS = (
    "id",
    "api_name",
    "api_visibility",
    "show_api",
    "inputs",
    "outputs",
    "backend_fn",
    "cancels",
)
#: Top-level fields of the configuration that describe the page's layout, not the API.
PAGE_ONLY = ("layout", "page", "css", "js", "head", "theme", "stylesheets", "body_css", "i18n_translations")

#: Component fields the page's script never reads (``preserved_by_key`` serves ``gr.render``
#: on the server).
UNREAD_PROPS = ("preserved_by_key",)
#: Component props the script reads only as true or false (``props._selectable && …``, or handed
#: to a child as ``selectable``, whose default is false), with the value that means the same as
#: no prop: left out where they hold it (~9 kB of the page, one per component).
PROP_DEFAULTS = {"_selectable": False}
#: Gradio's default ``latex_delimiters`` of a Markdown or a Dataframe (``$$ … $$``): the page gets
#: none instead, so that no text is read as LaTeX (the app writes none, and free text a person
#: typed, a consent or a note, stays as typed), and the page is 8 kB lighter (issue 28.1).
GRADIO_LATEX = [{"left": "$$", "right": "$$", "display": True}]
#: Event fields the page's script never reads, whatever their value.
UNREAD_EVENT_FIELDS = ("collects_event_data", "max_batch_size")
#: Event fields the script reads as "set or not" (``x || []``, ``x ? … : …``, ``x?.length``)
#: or not at all, with the value that means the same as no field: left out where they hold
#: it. (``trigger_after`` is not here: the script tells null from absent.)
EVENT_DEFAULTS = {
    "trigger_only_on_success": False,
    "trigger_only_on_failure": False,
    "component_prop_inputs": [],
    "js_implementation": None,
    "show_progress_on": None,
    "api_description": None,
    "event_specific_args": None,
    "time_limit": None,
    "render_id": None,
    "rendered_in": None,
}

#: Paths whose answers `CompressText` gzips: the page, its configuration, the API description.
COMPRESSED_PATHS = frozenset({"/", "/config", "/config/", "/gradio_api/info", "/gradio_api/info/"})


def progress_on_components(demo: gr.Blocks) -> None:
    """Make every event of `demo` show its progress on its output components only, never on a
    layout block (a tab, the tab set, a column, an accordion) it shows or hides.

    Gradio's script keeps the loading status of every output of every event that has run,
    and at each status change of any event (pending, then done: two or more per event) it
    re-reads the state of each of them and, for a layout block, of everything inside it,
    copying each component's properties (``structuredClone``). The sign-in events output
    the tab set and every tab, so from the first sign-in on every event copied the whole
    page several times: most of the browser's time in a walk through the app. An event's
    ``show_progress_on`` names what its loading status is kept for; its outputs are set as
    before. An event whose outputs are all layout blocks keeps no loading status.
    """
    for fn in demo.fns.values():
        if fn.show_progress_on is None and any(_is_layout(block) for block in fn.outputs):
            fn.show_progress_on = [block for block in fn.outputs if not _is_layout(block)]


def _is_layout(block) -> bool:
    return isinstance(block, gr.blocks.BlockContext) and not isinstance(block, gr.components.Component)


def lean_config(demo: gr.Blocks) -> None:
    """Give the page a configuration without API schemas and an empty API description, and
    keep the whole configuration for API clients (module docstring).

    The API description (``/gradio_api/info``) and ``/config`` (`ClientConfig`, through
    ``demo.colorconcept_client_config``) are computed from the whole configuration behind
    the latest page one, and are unchanged for clients. Replaces `demo`'s
    ``get_config_file`` and ``get_api_info`` on this instance only.
    """
    if getattr(demo, "colorconcept_lean", False):
        return
    whole_config = demo.get_config_file
    # The whole configuration behind the latest page one, and what clients get of it
    # (computed here, once per configuration, not on every ``/config`` request).
    latest: list[dict] = []

    def get_config_file():
        whole = whole_config()
        latest[:] = [whole, client_config(whole)]
        return page_config(whole)

    def whole() -> dict:
        return latest[0] if latest else whole_config()

    def get_api_info(all_endpoints: bool = False, page: str | None = None):
        # Gradio asks with ``page=""`` for the copy it writes into the page (the app has one
        # page); ``/gradio_api/info`` and ``gradio_client`` ask with no page.
        if page == "":
            return {key: dict(value) for key, value in PAGE_API_INFO.items()}
        return gr.Blocks.get_api_info(_WholeConfig(demo, whole()), all_endpoints=all_endpoints, page=page)

    demo.get_config_file, demo.get_api_info = get_config_file, get_api_info
    demo.colorconcept_client_config = lambda: latest[1] if latest else client_config(whole_config())
    demo.colorconcept_lean = True


def page_config(config: dict) -> dict:
    """`config` (a whole Blocks configuration) as the page needs it.

    Without the components' API fields (`_API_ONLY`), without the buttons that exist only
    for API clients (``elem_id`` starting with `app.common.API_BUTTON`: hidden, never
    clicked on the page), their places in the layout and their events, and without what
    the page's script never reads (module docstring): built-in components' class hashes,
    `UNREAD_PROPS`, props at their `PROP_DEFAULTS`, null keys, `UNREAD_EVENT_FIELDS` and event fields at their
    `EVENT_DEFAULTS`; Gradio's default LaTeX delimiters are none (`GRADIO_LATEX`).

    Parameters
    ----------
    config : dict
        ``components``, ``dependencies``, ``layout`` and ``page`` (Gradio's page map) and
        top-level fields.

    Returns
    -------
    dict
        A new dict; `config` is not changed.
    """
    api_only = {
        component["id"]
        for component in config["components"]
        if str(component.get("props", {}).get("elem_id") or "").startswith(API_BUTTON)
    }
    events = [
        event
        for event in config["dependencies"]
        if not (event["targets"] and all(target in api_only for target, _ in event["targets"]))
    ]
    page = dict(config)
    page["layout"] = _without(config["layout"], api_only)
    page["components"] = [
        _lean_component(component) for component in config["components"] if component["id"] not in api_only
    ]
    page["dependencies"] = [_lean_event(event) for event in events]
    kept = {event["id"] for event in events}
    page["page"] = {
        name: {
            **section,
            "layout": _without(section["layout"], api_only),
            "components": [i for i in section["components"] if i not in api_only],
            "dependencies": [i for i in section["dependencies"] if i in kept],
        }
        for name, section in config.get("page", {}).items()
    }
    return page


def _lean_component(component: dict) -> dict:
    """`component`'s configuration without what the page's script does not read."""
    lean = {
        key: value
        for key, value in component.items()
        if key not in _API_ONLY
        and not (key == "key" and value is None)
        and not (key == "component_class_id" and value in _builtin_class_ids())
    }
    if "props" in component:
        lean["props"] = {
            key: value
            for key, value in component["props"].items()
            if key not in UNREAD_PROPS and not (key in PROP_DEFAULTS and value == PROP_DEFAULTS[key])
        }
        if lean["props"].get("latex_delimiters") == GRADIO_LATEX:
            lean["props"]["latex_delimiters"] = []
    return lean


def _lean_event(event: dict) -> dict:
    """`event`'s configuration without the fields the page's script reads as absent."""
    return {
        key: value
        for key, value in event.items()
        if key not in UNREAD_EVENT_FIELDS and not (key in EVENT_DEFAULTS and value == EVENT_DEFAULTS[key])
    }


@functools.cache
def _builtin_class_ids() -> frozenset[str]:
    """Gradio's class hashes of its own blocks: the page's script finds those by type."""
    found, todo = set(), [gr.blocks.Block]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] == "gradio":
            found.add(cls.get_component_class_id())
    return frozenset(found)


def _without(layout: dict, ids: set[int]) -> dict:
    """A copy of the layout tree `layout` without the nodes whose ``id`` is in `ids`."""
    if "children" not in layout:
        return dict(layout)
    return {
        **layout,
        "children": [_without(child, ids) for child in layout["children"] if child["id"] not in ids],
    }


class _WholeConfig:
    """`demo` seen with its whole configuration (every schema), for `Blocks.get_api_info`."""

    def __init__(self, demo: gr.Blocks, config: dict):
        self._demo, self.config = demo, config

    def __getattr__(self, name: str):
        return getattr(self._demo, name)


def client_config(config: dict) -> dict:
    """`config` (a Blocks configuration as Gradio serves it) with what an API client reads.

    Parameters
    ----------
    config : dict
        The configuration: ``components`` and ``dependencies`` lists and top-level fields.

    Returns
    -------
    dict
        A new dict: the top-level fields but `PAGE_ONLY`, each component with its
        `CLIENT_COMPONENT_KEYS` (``api_info`` only where the value holds a file) and each
        event with its `CLIENT_EVENT_KEYS`, where present.
    """
    lean = {key: value for key, value in config.items() if key not in PAGE_ONLY}
    lean["components"] = [
        {
            key: component[key]
            for key in CLIENT_COMPONENT_KEYS
            if key in component and (key != "api_info" or client_utils.value_is_file(component[key]))
        }
        for component in config.get("components", [])
    ]
    lean["dependencies"] = [
        {key: event[key] for key in CLIENT_EVENT_KEYS if key in event}
        for event in config.get("dependencies", [])
    ]
    return lean


class ClientConfig:
    """ASGI middleware: ``GET /config`` answers with what API clients read.

    Gradio's answer gives the fields of this request (``root``, ``username`` and the other
    top-level ones, less `PAGE_ONLY`); `client` (``demo.colorconcept_client_config``, set by
    `lean_config`) gives the components and events, from the whole configuration.
    """

    def __init__(self, app: ASGIApp, client: Callable[[], dict]) -> None:
        self.app, self.client = app, client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or route_path(scope) not in ("/config", "/config/")
            or scope["method"] != "GET"
        ):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def collect(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    await self._send(send, start, b"".join(body))

        await self.app(scope, receive, collect)

    async def _send(self, send: Send, start: Message | None, body: bytes) -> None:
        """Send Gradio's answer (`start`, `body`) made the client's configuration when it is
        the configuration (a 200 JSON answer); anything else goes out as it came."""
        assert start is not None
        headers = Headers(raw=start["headers"])
        if start["status"] == 200 and headers.get("content-type", "").startswith("application/json"):
            answer = {key: value for key, value in json.loads(body).items() if key not in PAGE_ONLY}
            client = self.client()
            answer.update(components=client["components"], dependencies=client["dependencies"])
            body = json.dumps(answer, separators=(",", ":")).encode()
            lean_headers = MutableHeaders(raw=list(start["headers"]))
            lean_headers["content-length"] = str(len(body))
            start = {**start, "headers": lean_headers.raw}
        await send(start)
        await send({"type": "http.response.body", "body": body})


class CompressText:
    """ASGI middleware: gzip the answers of `COMPRESSED_PATHS` for clients that accept it.

    Only those: the images, zips and Gradio's own scripts are either compressed already or
    cached by the browser, and compressing them would spend the server's two cores for
    little; the event streams must not be buffered.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024, compresslevel=6)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and route_path(scope) in COMPRESSED_PATHS:
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)
