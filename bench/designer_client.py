"""A simulated designer talking to a running app through `gradio_client`, as the page does.

`designer_session` signs in with an invite link, agrees to the consent, reads the
instructions, colors the three practice sketches and then its batch through
``/designer_submit``, one canvas value per task: bucket fills
(`annotation.coloring.fill.flood_fill`) of the sketch the task names, in the value format the
canvas sends (`annotation.coloring.fill.canvas_value`). Each submission that the server
answers with a coloring id is an `Ack`; a submission the server does not answer (it was
killed) is not.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gradio_client import Client
from gradio_client.exceptions import AppError
from skimage.measure import label, regionprops

from annotation.coloring.fill import blank_color_layer, canvas_value, flood_fill, line_mask
from annotation.sketches.library import get_sketch, load_sketch
from storage import open_db

VIEW = ("notice", "header", "previous", "canvas", "task", "message")
_SAVED = re.compile(r"\(#(\d+)\)")
CLIENT_TIMEOUT_S = 120.0
"""Seconds a client's plain HTTP calls may wait (gradio_client's default, 5 s, is too short
for 30 clients fetching ``/config`` at once from a server on 2 cores)."""


@dataclass(frozen=True)
class Ack:
    """One acknowledged submission: the server answered with the coloring's id."""

    designer: int
    task_id: int
    coloring_id: int
    concept_key: str
    seconds: float
    practice: bool = False


class SketchLayers:
    """Canvas values for tasks: bucket fills of the task's sketch in colors of one's own.

    The regions a fill covers are computed once per sketch (`annotation.coloring.fill.flood_fill`
    at the centres of its largest regions) and shared by every designer thread; each value
    then paints 1 to 3 of them in random colors, so no two colorings share their files.
    """

    def __init__(self, db_path: str | Path, data_dir: str | Path):
        self.db_path, self.data_dir = Path(db_path), Path(data_dir)
        self._regions: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def value(self, canvas_key: str, sketch_id: int, rng: np.random.Generator, elapsed_s: float) -> str:
        """The canvas value (`annotation.coloring.fill.canvas_value`) for the task `canvas_key`."""
        regions = self.regions(sketch_id)
        layer = blank_color_layer(regions[0].shape)
        for region in regions[: int(rng.integers(1, len(regions) + 1))]:
            layer[region] = (*rng.integers(0, 256, 3), 255)
        return canvas_value(canvas_key, layer, elapsed_s)

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


def view(client: Client, api_name: str, *args) -> dict:
    """One designer endpoint's answer as a dict of `VIEW` parts."""
    return dict(zip(VIEW, client.predict(*args, api_name=api_name)))


def new_client(url: str) -> Client:
    """A `gradio_client.Client` of the app at `url`, waiting up to `CLIENT_TIMEOUT_S`."""
    return Client(url, verbose=False, httpx_kwargs={"timeout": CLIENT_TIMEOUT_S})


def sign_in(url: str, invite: str) -> tuple[Client, str]:
    """A client of the app at `url` and the session token its invite link gives."""
    client = new_client(url)
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
        Shared painted layers.
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
    """
    acks: list[Ack] = []
    rng = np.random.default_rng(seed)
    try:
        client, token = sign_in(url, invite)
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


def _check_retry_refused(client: Client, token: str, value: str, task_id: int) -> None:
    try:
        client.predict(token, value, api_name="/designer_submit")
    except AppError as error:
        if f"task {task_id} was already submitted" in str(error):
            return
        raise
    raise AssertionError(f"task {task_id} was accepted twice")
