"""A simulated designer talking to a running app through `gradio_client`, as the page does.

`designer_session` signs in with an invite link, agrees to the consent, reads the
instructions, colors the three practice sketches and then its batch through
``/designer_submit``, one canvas value per task: bucket fills
(`annotation.coloring.fill.flood_fill`) of the sketch the task names, in the value format the
canvas sends (`annotation.coloring.fill.canvas_value`). Each submission that the server
answers with a coloring id is an `Ack`; a submission the server does not answer (it was
killed) is not.

A *light* client costs the load generator a fraction of the CPU: `HttpClient` speaks
Gradio's queue protocol itself instead of through `gradio_client` (``transport="http"``),
and `PreparedValues` holds color layers encoded before anything is timed, so a
submission only wraps one in the canvas value's JSON.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import certifi
import httpx
import numpy as np
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import SKIP_COMPONENTS
from skimage.measure import label, regionprops

from annotation.coloring.fill import (
    blank_color_layer,
    canvas_text,
    canvas_value,
    color_layer_to_png,
    flood_fill,
    line_mask,
)
from annotation.sketches.importing import png_data_url
from annotation.sketches.library import get_sketch, load_sketch
from storage import open_db

VIEW = ("notice", "header", "previous", "canvas", "task", "message")
_SAVED = re.compile(r"\(#(\d+)\)")
# gradio_client opens a new httpx client for every request, and httpx builds a new TLS
# context for each from certifi's bundle (12-30 ms of CPU on the 2-core VM, two per
# predict), even for a plain-http address. One context serves them all, verifying as each
# new one would.
TLS_CONTEXT = ssl.create_default_context(cafile=certifi.where())
CLIENT_TIMEOUT_S = 120.0
"""Seconds a client's plain HTTP calls may wait (gradio_client's default, 5 s, is too short
for 30 clients fetching ``/config`` at once from a server on 2 cores)."""
TRANSPORTS = ("gradio_client", "http")
"""The clients `new_client` makes: a `gradio_client.Client`, or an `HttpClient`."""


@dataclass(frozen=True)
class Ack:
    """One acknowledged submission: the server answered with the coloring's id."""

    designer: int
    task_id: int
    coloring_id: int
    concept_key: str
    seconds: float
    practice: bool = False


class PreparedValues:
    """Color layers encoded ahead of time (the PNG data URL of a canvas value), by sketch
    id; each is handed out once, from any thread.

    `take` answers None when a sketch's values have run out (or it had none); the caller
    then encodes one on the spot, and `fallbacks` counts how often that happened.

    Parameters
    ----------
    by_sketch : mapping of int to sequence of str
        Distinct data URLs per sketch id (`SketchLayers.prepare`).
    """

    def __init__(self, by_sketch: Mapping[int, Sequence[str]]):
        self._left = {int(sketch): deque(urls) for sketch, urls in by_sketch.items()}
        self._lock = threading.Lock()
        self.prepared = sum(len(urls) for urls in self._left.values())
        self.fallbacks = 0

    def take(self, sketch_id: int) -> str | None:
        """One unused data URL of the sketch, or None (counted in `fallbacks`)."""
        with self._lock:
            left = self._left.get(sketch_id)
            if left:
                return left.popleft()
            self.fallbacks += 1
            return None

    def share_out(self, sizes: Sequence[int]) -> list[dict[int, list[str]]]:
        """Every value still unused, in disjoint shares proportional to `sizes` (designers
        per client process), each sketch's split the same way; none is left here."""
        cuts = np.cumsum(sizes)[:-1] / max(1, sum(sizes))
        shares: list[dict[int, list[str]]] = [{} for _ in sizes]
        with self._lock:
            for sketch, left in self._left.items():
                urls = list(left)
                left.clear()
                bounds = [0, *np.round(cuts * len(urls)).astype(int), len(urls)]
                for share, lo, hi in zip(shares, bounds[:-1], bounds[1:], strict=True):
                    share[sketch] = urls[lo:hi]
        return shares


class SketchLayers:
    """Canvas values for tasks: bucket fills of the task's sketch in colors of one's own.

    The regions a fill covers are computed once per sketch (`annotation.coloring.fill.flood_fill`
    at the centres of its largest regions) and shared by every designer thread; each value
    then paints 1 to 3 of them in random colors, so no two colorings share their files.
    Given `prepared`, a value takes its color layer from there (encoded before the clock)
    and encodes one only when the sketch's prepared layers have run out.
    """

    def __init__(self, db_path: str | Path, data_dir: str | Path, prepared: PreparedValues | None = None):
        self.db_path, self.data_dir = Path(db_path), Path(data_dir)
        self.prepared = prepared
        self._regions: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def value(self, canvas_key: str, sketch_id: int, rng: np.random.Generator, elapsed_s: float) -> str:
        """The canvas value (`annotation.coloring.fill.canvas_value`) for the task `canvas_key`."""
        url = self.prepared.take(sketch_id) if self.prepared is not None else None
        if url is None:
            return canvas_value(canvas_key, self.painted(sketch_id, rng), elapsed_s)
        return canvas_text(canvas_key, url, elapsed_s)

    def painted(self, sketch_id: int, rng: np.random.Generator) -> np.ndarray:
        """A color layer (H, W, 4) of the sketch: 1 to 3 of its regions in random colors."""
        regions = self.regions(sketch_id)
        layer = blank_color_layer(regions[0].shape)
        for region in regions[: int(rng.integers(1, len(regions) + 1))]:
            layer[region] = (*rng.integers(0, 256, 3), 255)
        return layer

    def prepare(self, counts: Mapping[int, int], seed: int = 0) -> PreparedValues:
        """`counts[sketch id]` distinct encoded color layers per sketch, to hand out once."""
        rng = np.random.default_rng(seed)
        by_sketch: dict[int, list[str]] = {}
        for sketch, count in counts.items():
            urls: dict[str, None] = {}  # ordered and distinct
            while len(urls) < count:
                urls[png_data_url(color_layer_to_png(self.painted(sketch, rng)))] = None
            by_sketch[sketch] = list(urls)
        return PreparedValues(by_sketch)

    def regions(self, sketch_id: int) -> list[np.ndarray]:
        """Boolean masks (H, W) of what a bucket fill covers in the sketch's largest regions."""
        with self._lock:
            cached = self._regions.get(sketch_id)
        if cached is not None:
            return cached
        db = open_db(self.db_path)
        try:
            sketch = load_sketch(self.data_dir, get_sketch(db, sketch_id))
        finally:
            db.close()
        blank = blank_color_layer(sketch.shape)
        masks = [flood_fill(blank, sketch, point, (0, 0, 0))[..., 3] > 0 for point in region_seeds(sketch)]
        with self._lock:
            self._regions[sketch_id] = masks
        return masks


def region_seeds(sketch: np.ndarray, n: int = 3) -> list[tuple[int, int]]:
    """Up to `n` points (x, y) inside the largest regions between the lines, largest first."""
    regions = regionprops(label(~line_mask(sketch), connectivity=1))
    regions.sort(key=lambda r: -r.area)
    return [(int(r.coords[len(r.coords) // 2][1]), int(r.coords[len(r.coords) // 2][0])) for r in regions[:n]]


def layer_counts(db_path: str | Path, designers: int, k: int, practice: Sequence[str]) -> dict[int, int]:
    """Color layers enough for every submission a store can take, by selected sketch id: K
    per concept drawn on the sketch, and one per designer per practice concept on it."""
    db = open_db(db_path)
    try:
        rows = db.execute(
            "select s.id, count(*), sum(c.key in (select value from json_each(?))) from sketches s "
            "join concepts c on c.base = s.base where s.selected = 1 group by s.id",
            [json.dumps(list(practice))],
        ).fetchall()
    finally:
        db.close()
    return {sketch: k * concepts + designers * practised for sketch, concepts, practised in rows}


@dataclass(frozen=True)
class _Endpoint:
    """What `HttpClient` needs of one named endpoint of the app's ``/config``."""

    fn_index: int
    states: tuple[int, ...]
    """Input positions of ``gr.State`` components (the client sends None there)."""
    shown: tuple[int, ...]
    """Output positions `gradio_client` returns (not layout blocks, states, buttons)."""

    def outputs(self, data: list):
        """`data` as `gradio_client` returns it: one value, or a tuple of several."""
        kept = tuple(data[i] for i in self.shown)
        return kept[0] if len(self.shown) == 1 else kept


_ENDPOINTS: dict[str, dict[str, _Endpoint]] = {}
_ENDPOINTS_LOCK = threading.Lock()


def _endpoints(http: httpx.Client, url: str) -> dict[str, _Endpoint]:
    """The app's named endpoints (``"/name"``), read once per app (``/config`` is 1 MB and
    costs the server most of a second) and kept by its ``app_id``, unique per launch."""
    app_id = str(http.get(f"{url}gradio_api/app_id").raise_for_status().json()["app_id"])
    with _ENDPOINTS_LOCK:  # the other clients of the same app wait for the first's fetch
        if app_id not in _ENDPOINTS:
            _ENDPOINTS[app_id] = _read_endpoints(http.get(f"{url}config").raise_for_status().json())
        return _ENDPOINTS[app_id]


def _read_endpoints(config: dict) -> dict[str, _Endpoint]:
    """`_Endpoint` by ``"/name"`` of an app ``/config``, as `gradio_client.Client` reads it."""
    components = {c["id"]: c for c in config["components"]}

    def skipped(component_id: int) -> bool:
        component = components[component_id]
        return component.get("skip_api", component["type"] in SKIP_COMPONENTS)

    return {
        f"/{dep['api_name']}": _Endpoint(
            dep.get("id", i),
            tuple(j for j, c in enumerate(dep["inputs"]) if components[c]["type"] == "state"),
            tuple(j for j, c in enumerate(dep["outputs"]) if not skipped(c)),
        )
        for i, dep in enumerate(config["dependencies"])
        if dep.get("api_name") and dep.get("api_visibility") != "private"
    }


class HttpClient:
    """A client of the app at `url` with `gradio_client.Client.predict`'s contract, speaking
    Gradio's queue protocol itself over one keep-alive connection (a light load generator).

    A call posts ``{"data", "fn_index", "session_hash"}`` to ``gradio_api/queue/join`` and
    reads the session's server-sent events (``gradio_api/queue/data``) until its
    ``process_completed`` message, as the page and `gradio_client` do (so the server does
    the work a designer's page makes it do, not that of the ``gradio_api/call`` route).
    Unlike `gradio_client`, files in outputs are not downloaded: they come back as the
    server's file dicts. One call at a time per client.

    Parameters
    ----------
    url : str
        The app's address, ending in ``/``.
    timeout : float
        Seconds any read may wait.
    """

    def __init__(self, url: str, *, timeout: float = CLIENT_TIMEOUT_S):
        self.url = url
        self.session_hash = uuid.uuid4().hex
        self._http = httpx.Client(timeout=timeout)
        self._endpoints = _endpoints(self._http, url)

    def predict(self, *args, api_name: str):
        """The endpoint's outputs as `gradio_client` returns them (one value, or a tuple).

        Raises
        ------
        gradio_client.exceptions.AppError
            With the server's message, when the endpoint raised ``gr.Error``.
        """
        endpoint = self._endpoints[api_name]
        data = list(args)
        for i in endpoint.states:
            data.insert(i, None)
        body = {"data": data, "fn_index": endpoint.fn_index, "session_hash": self.session_hash}
        joined = self._http.post(f"{self.url}gradio_api/queue/join", json=body).raise_for_status().json()
        completed = self._completed(joined["event_id"])
        if not completed.get("success"):
            raise _app_error(completed["output"])
        return endpoint.outputs(completed["output"]["data"])

    def _completed(self, event_id: str) -> dict:
        """The event's ``process_completed`` message. The stream is read to its end (the
        server closes it once the session has nothing pending), so the connection is kept."""
        completed = None
        params = {"session_hash": self.session_hash}
        with self._http.stream("GET", f"{self.url}gradio_api/queue/data", params=params) as stream:
            for line in stream.raise_for_status().iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message["msg"] == "process_completed" and message.get("event_id") == event_id:
                    completed = message
                elif message["msg"] in ("unexpected_error", "server_stopped"):
                    raise ConnectionError(f"{self.url}: {message.get('message', message['msg'])}")
        if completed is None:
            raise ConnectionError(f"{self.url}: the event stream ended without an answer")
        return completed

    def close(self) -> None:
        """Close the connection."""
        self._http.close()


def _app_error(output: dict) -> AppError:
    """The `AppError` `gradio_client` raises for a failed event's `output`."""
    known = {k: output[k] for k in ("duration", "visible", "title") if k in output}
    return AppError(output.get("error") or "Error raised.", **known)


def view(client: Client | HttpClient, api_name: str, *args) -> dict:
    """One designer endpoint's answer as a dict of `VIEW` parts."""
    return dict(zip(VIEW, client.predict(*args, api_name=api_name)))


def new_client(url: str, transport: str = "gradio_client") -> Client | HttpClient:
    """A client of the app at `url`, waiting up to `CLIENT_TIMEOUT_S`: a
    `gradio_client.Client`, or an `HttpClient` for ``transport="http"`` (see `TRANSPORTS`)."""
    if transport == "http":
        return HttpClient(url)
    if transport != "gradio_client":
        raise ValueError(f"`transport` must be one of {TRANSPORTS}, got {transport!r}")
    return Client(url, verbose=False, httpx_kwargs={"timeout": CLIENT_TIMEOUT_S}, ssl_verify=TLS_CONTEXT)


def sign_in(url: str, invite: str, transport: str = "gradio_client") -> tuple[Client | HttpClient, str]:
    """A client of the app at `url` (`new_client`) and the session token its invite link gives."""
    client = new_client(url, transport)
    token, _ = client.predict(invite, api_name="/login_invite")
    return client, token


def designer_session(
    url: str,
    designer: int,
    invite: str,
    layers: SketchLayers,
    count: int,
    *,
    seed: int = 0,
    onboard: bool = True,
    retry_every: int = 4,
    on_ack=None,
    stop: threading.Event | None = None,
    pace: tuple[float, float] | None = None,
    until: float | None = None,
    transport: str = "gradio_client",
) -> list[Ack]:
    """One designer from the invite link to `count` main-task submissions (or a dry pool).

    Every `retry_every`-th submission is sent a second time, as a client retrying after
    a lost answer would; the server must refuse it. A submission that fails because the
    server is gone after `stop` was set ends the session (the acknowledgements so far are
    returned); any other failure is raised.

    Parameters
    ----------
    url : str
        The app's address.
    designer, invite : int, str
        The designer's annotator id and invite token.
    layers : SketchLayers
        Shared painted layers (and the layers prepared before, if any).
    count : int
        Main-task submissions wanted (the three practice ones come first).
    seed : int
        Seeds the colors painted.
    onboard : bool
        Agree to the consent and read the instructions first; False for a designer who
        did that before (the session starts from ``/designer_state``).
    on_ack : callable, optional
        Called with each `Ack` as it arrives.
    stop : threading.Event, optional
        Set to end the session before its next submission.
    pace : (float, float), optional
        Seconds of coloring before each submission, drawn uniformly from this range (a
        designer at a working pace); default none (submit as fast as answers come).
    until : float, optional
        `time.perf_counter` time after which no submission is started.
    transport : str
        ``"gradio_client"`` or ``"http"`` (`HttpClient`), see `new_client`.
    """
    acks: list[Ack] = []
    rng = np.random.default_rng(seed)
    try:
        client, token = sign_in(url, invite, transport)
        if onboard:
            view(client, "/designer_consent", token, True)
            state = view(client, "/designer_instructions_read", token)
        else:
            state = view(client, "/designer_state", token)
        while sum(not a.practice for a in acks) < count and not (stop and stop.is_set()):
            if not state["task"]:
                if "is done" not in state["notice"]:
                    break  # no concept is waiting: the pool is dry
                state = view(client, "/designer_continue", token)
                if not state["task"]:
                    break
            if pace is not None:
                time.sleep(float(rng.uniform(*pace)))
            if until is not None and time.perf_counter() >= until:
                break
            task = json.loads(state["task"])
            value = layers.value(task["canvas_key"], task["sketch_id"], rng, float(rng.uniform(30, 600)))
            start = time.perf_counter()
            state = view(client, "/designer_submit", token, value)
            ack = Ack(
                designer,
                task["task_id"],
                int(_SAVED.search(state["message"])[1]),
                task["concept"],
                time.perf_counter() - start,
                task["kind"] == "practice",
            )
            acks.append(ack)
            if on_ack is not None:
                on_ack(ack)
            if retry_every and len(acks) % retry_every == 0:
                _check_retry_refused(client, token, value, task["task_id"])
    except Exception:  # after `stop`, the server may be gone mid-call: that ends the session
        if stop is None or not stop.is_set():
            raise
    return acks


def designers_in_threads(
    url: str,
    designers: Sequence[tuple[int, str]],
    seeds: Sequence[int],
    layers: SketchLayers,
    count: int,
    **options,
) -> list[Ack]:
    """`designer_session` for each ``(annotator id, invite token)`` of `designers` at once,
    one thread and client each, seeded by `seeds` (one per designer); their acks in the
    order of `designers`. `options` go to every `designer_session`."""
    with ThreadPoolExecutor(max_workers=max(1, len(designers))) as pool:
        futures = [
            pool.submit(designer_session, url, designer, invite, layers, count, seed=seed, **options)
            for (designer, invite), seed in zip(designers, seeds, strict=True)
        ]
        return [ack for future in futures for ack in future.result()]


def _check_retry_refused(client: Client | HttpClient, token: str, value: str, task_id: int) -> None:
    try:
        client.predict(token, value, api_name="/designer_submit")
    except AppError as error:
        if "this concept was already submitted" in str(error):
            return
        raise
    raise AssertionError(f"task {task_id} was accepted twice")
