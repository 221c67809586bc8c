"""The in-browser coloring tool as a reusable Gradio component.

`coloring_canvas` returns a ``gr.HTML`` that hosts ``assets/web/coloring.html``,
``coloring.css`` and ``coloring.js``: a canvas with bucket fill (the same algorithm as
`annotation.coloring.fill.fill_region`), brush, eraser, a color picker (hue bar,
saturation/value square, hex and RGB fields, eyedropper, recent colors and optional
preset swatches), undo/redo, reset and zoom/pan, all on the client. The current color is
named beside its swatch and every swatch names its color on hover ("moderate olive brown ·
brown"): the page looks colors up in `evaluation.color.naming`'s lookup table
(`color_names`), so the names are the ones the charts and exports use, to the table's
precision.

The component's ``js_on_load`` is a small loader (``coloring_loader.js``, `_loader`): the
canvas's script and the names table (86 kB together) are files the page fetches once, when a
canvas first loads (`served_files`), not part of the page's configuration, which every
visitor receives. The settings read once (tolerance, swatches) travel in the loader's source,
not as props: a ``gr.HTML`` hidden when the page loads (the Coloring tab's task box) is
mounted when it is first shown, and its script then gets the props of the update that showed
it, not those it was built with.

Its value is the JSON text that `annotation.coloring.fill.parse_canvas_value` reads: task
id, the color layer as a PNG data URL (lossless) and seconds spent. Work in progress stays
in the browser's localStorage under the task id until the server moves the canvas to
another task. A new task opens with the bucket fill chosen and the page scrolled to its
top, where the whole tool fits the window.

Handlers move the canvas to a task with `canvas_update`. Task ids must be unique per
coloring round, since they key the saved work in progress. The canvas writes its value a
moment after each edit, so an event that sends it must run `flush_js` first (``js=``),
or a click right after an edit sends the coloring without that edit.

``python -m app.coloring_canvas [--sketch apple]`` launches a demo with only the canvas
and a button that shows what the server receives.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import re
from pathlib import Path

import gradio as gr
import numpy as np
from gradio.utils import get_upload_folder

from annotation.coloring.fill import (
    DEFAULT_TOLERANCE,
    EDGE_GROW,
    LINE_THRESHOLD,
    canvas_value,
    composite,
    painted_color_counts,
    parse_canvas_value,
)
from annotation.sketches.importing import load_manifest, load_sketch_png, png_data_url
from app.common import compact_css, compact_js, compact_markup
from evaluation.color import naming
from storage.files import write_atomic
from storage.shown import shown

WEB_DIR = Path(__file__).resolve().parent.parent / "assets" / "web"
SERVED_FOLDER = "colorconcept-canvas"
"""The folder, under Gradio's upload folder (``GRADIO_TEMP_DIR``), of `served_files`."""


def coloring_canvas(
    *,
    task_id: str = "",
    sketch_src: str = "",
    value: str = "",
    tolerance: int = DEFAULT_TOLERANCE,
    swatches: tuple[str, ...] = (),
    elem_id: str | None = None,
    **kwargs,
) -> gr.HTML:
    """Build the coloring canvas component.

    Parameters
    ----------
    task_id : str
        The coloring task shown first ("" for none yet).
    sketch_src : str
        The sketch as a PNG data URL (`annotation.sketches.importing.png_data_url`) or a URL the
        browser can load.
    value : str
        A canvas value (`annotation.coloring.fill.canvas_value`) to show, e.g. a coloring
        under review; "" starts from the work in progress saved in the browser, if any.
    tolerance : int
        Initial bucket tolerance, luminance levels in [0, 127].
    swatches : tuple of str
        Preset colors ``"#rrggbb"`` the picker offers beside the person's recent colors;
        none by default (a preset palette steers the colors a study measures: README).
    elem_id : str, optional
        DOM id of the component.
    **kwargs
        Passed to ``gr.HTML`` (``visible``, ``render``, ``key``...).

    Returns
    -------
    gr.HTML
        Its value (str) is the canvas value JSON; it emits ``change`` after each edit.
    """
    if not 0 <= tolerance <= 127:
        raise ValueError(f"`tolerance` must be in [0, 127], got {tolerance}")
    return gr.HTML(
        value=value,
        html_template=compact_markup((WEB_DIR / "coloring.html").read_text(encoding="utf-8")),
        css_template=compact_css((WEB_DIR / "coloring.css").read_text(encoding="utf-8")),
        js_on_load=_loader(tolerance, swatches),
        apply_default_css=False,
        elem_id=elem_id,
        **_task_props(task_id, sketch_src),
        **kwargs,
    )


def canvas_update(task_id: str, sketch_src: str, value: str = "", *, forget_task_id: str = "") -> dict:
    """A handler's output that moves the canvas to another task (or reloads this one).

    Parameters
    ----------
    task_id, sketch_src, value
        As in `coloring_canvas`; ``value=""`` restores the browser's saved work for
        `task_id`, if any, else a blank layer.
    forget_task_id : str
        A task whose work in progress the browser should drop, e.g. the one just
        submitted ("" for none).
    """
    return gr.update(value=value, forget_task_id=forget_task_id, **_task_props(task_id, sketch_src))


def flush_js(elem_id: str, position: int, n_inputs: int) -> str:
    """A ``js=`` preprocessor for an event whose inputs include the canvas.

    The canvas writes its value ``COMMIT_DELAY_MS`` (``coloring.js``) after the last
    edit, to keep undo and redo bursts cheap; a button clicked within that window would
    send the value without the last fill or stroke. This function, run in the browser
    before the event is sent, writes the value at once and sends it in place of the
    canvas's input. API clients send their value themselves and are not affected.

    Parameters
    ----------
    elem_id : str
        The canvas's ``elem_id`` (letters, digits, ``_`` and ``-``).
    position : int
        Index of the canvas among the event's inputs, in [0, `n_inputs`).
    n_inputs : int
        Number of the event's inputs (the script also receives the outputs' values and
        drops them).

    Returns
    -------
    str
        JavaScript source of an arrow function, for the event's ``js=``.
    """
    if not isinstance(elem_id, str) or not re.fullmatch(r"[A-Za-z][\w-]*", elem_id):
        raise ValueError(f"`elem_id` must be letters, digits, _ or - (a letter first), got {shown(elem_id)}")
    if not 0 <= position < n_inputs:
        raise ValueError(f"`position` must be in [0, {n_inputs}), got {shown(position)}")
    return (
        "(...args) => {\n"
        f"  const values = args.slice(0, {int(n_inputs)});\n"
        f"  const root = document.querySelector({json.dumps(f'#{elem_id} .cc-root')});\n"
        "  const api = root && root.parentElement.coloringCanvas;\n"
        f"  if (api) values[{int(position)}] = api.flush();\n"
        "  return values;\n"
        "}"
    )


@functools.cache
def color_names() -> dict:
    """`evaluation.color.naming`'s lookup table for the page (``SETTINGS.color_names``).

    Returns
    -------
    dict
        ``bits`` (`naming.LOOKUP_BITS`), ``table`` (base64 of `naming.lookup_table_bytes`,
        zlib-compressed little-endian uint16: the level 3 row of each cell, indexed as
        `naming.lookup_cell`), ``grey``: the level 3 row of each of the 256 sRGB greys, named
        exactly (`naming.name_srgb`: a grey cell of the table holds four greys, and those at a
        border between two neutrals were named as the cell's centre), and ``l3`` and
        ``basic``: the level 3 names and their basic terms by level 3 row (the page shows these
        two; level 1 is left out to keep it light). Built once per process; the page fetches it
        as JSON (`served_files`).
    """
    l3, _, basic = naming.level3_names()
    levels = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
    return {
        "bits": naming.LOOKUP_BITS,
        "table": base64.b64encode(naming.lookup_table_bytes()).decode("ascii"),
        "grey": naming.name_srgb(levels).l3_index.tolist(),
        "l3": list(l3),
        "basic": list(basic),
    }


def served_files() -> dict[str, Path]:
    """The files a canvas's loader fetches when it first loads.

    ``coloring.<hash>.js`` is ``assets/web/coloring.js`` as it is; ``color-names.<hash>.json``
    is `color_names` as JSON. Each is named by the first 16 hex digits of its sha256, so a
    browser's cached copy cannot be stale after an upgrade, and lies in `SERVED_FOLDER` under
    Gradio's upload folder. Both are Gradio static files (served in place, inline, with
    their media type, by ``/gradio_api/file=``); `app.guard` serves them, and nothing else
    in their folder, to anyone: they hold no secret. Written at the first call, and again
    by a later call that finds one gone (a cleaner of temporary folders may remove it
    while the app runs for weeks; `app.guard` calls this for every file request).

    Returns
    -------
    dict
        ``script`` and ``color_names``: the resolved path of each file.
    """
    files = {}
    for key, (path, data) in _served_contents().items():
        if not path.is_file():
            write_atomic(path, data)
        files[key] = path
    return files


@functools.cache
def _served_contents() -> dict[str, tuple[Path, bytes]]:
    """`served_files`'s paths and bytes, written once per process (and made Gradio static files)."""
    folder = Path(get_upload_folder()).resolve() / SERVED_FOLDER
    contents = {
        "script": ("coloring", ".js", (WEB_DIR / "coloring.js").read_bytes()),
        "color_names": ("color-names", ".json", json.dumps(color_names(), separators=(",", ":")).encode()),
    }
    files = {}
    for key, (stem, suffix, data) in contents.items():
        path = folder / f"{stem}.{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
        if not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
        files[key] = (path, data)
    gr.set_static_paths([path for path, _ in files.values()])
    return files


def _loader(tolerance: int, swatches: tuple[str, ...]) -> str:
    """``coloring_loader.js`` behind ``const CANVAS = {...};``: what the loader reads.

    The loader comes from the page's config whatever the updates, whereas a canvas first
    shown by an update gets only that update's props (module docstring). ``CANVAS``:
    ``settings`` (``tolerance``, ``swatches``), and ``script`` and ``color_names``, the
    paths of `served_files`.
    """
    files = {key: str(path) for key, path in served_files().items()}
    spec = {"settings": {"tolerance": tolerance, "swatches": list(swatches)}, **files}
    source = (WEB_DIR / "coloring_loader.js").read_text(encoding="utf-8")
    return f"const CANVAS = {json.dumps(spec)};\n{compact_js(source)}"


def _task_props(task_id: str, sketch_src: str) -> dict:
    """The props the script reads for a task; an update resends the fill constants too."""
    return {
        "task_id": task_id,
        "sketch_src": sketch_src,
        "line_threshold": LINE_THRESHOLD,
        "edge_grow": EDGE_GROW,
    }


def inspect_canvas_value(sketch: np.ndarray, value: str) -> tuple[str, np.ndarray]:
    """What the server makes of a canvas value (the demo's handler).

    Parameters
    ----------
    sketch : ndarray, shape (H, W), uint8
        The sketch the canvas shows.
    value : str
        The canvas value.

    Returns
    -------
    report : str
        JSON: ``task_id``, ``elapsed_s``, ``painted_px``, ``colors`` (hex -> pixels) and
        ``color_layer`` (the decoded layer re-encoded as a PNG data URL).
    composite : ndarray, shape (H, W, 3), uint8
        The colored sketch as the server renders it.
    """
    try:
        parsed = parse_canvas_value(value, sketch.shape)
    except ValueError as exc:
        raise gr.Error(str(exc)) from None
    colors = painted_color_counts(parsed.color_layer, sketch)
    value = json.loads(canvas_value(parsed.task_id, parsed.color_layer, parsed.elapsed_s))
    report = {
        "task_id": parsed.task_id,
        "elapsed_s": parsed.elapsed_s,
        "painted_px": sum(colors.values()),
        "colors": colors,
        "color_layer": value["color_layer"],
    }
    return json.dumps(report), composite(parsed.color_layer, sketch)


def build_demo(slug: str = "apple") -> gr.Blocks:
    """A page with only the coloring canvas on the shipped sketches, for trying the tool.

    Parameters
    ----------
    slug : str
        The sketch shown first, from ``assets/sketches/manifest.csv``.
    """
    entries = {e.slug: e for e in load_manifest()}
    if slug not in entries:
        raise ValueError(f"`slug` must be one of {sorted(entries)}, got {shown(slug)}")
    urls = {s: png_data_url(e.png.read_bytes()) for s, e in entries.items()}
    sketches = {s: load_sketch_png(e.png) for s, e in entries.items()}
    with gr.Blocks(title="Coloring canvas demo") as demo:
        gr.Markdown("### Coloring canvas demo: color the sketch as you associate its colors")
        choice = gr.Dropdown(sorted(entries), value=slug, label="Sketch", elem_id="demo_sketch")
        canvas = coloring_canvas(task_id=f"demo-{slug}", sketch_src=urls[slug], elem_id="demo_canvas")
        check = gr.Button("Show what the server receives", elem_id="demo_check")
        with gr.Row():
            report = gr.Textbox(label="Server view", elem_id="demo_report", lines=8, max_lines=8)
            preview = gr.Image(
                label="Composite computed on the server", elem_id="demo_preview", type="numpy", format="png"
            )
        choice.change(
            lambda s: canvas_update(f"demo-{s}", urls[s]), inputs=choice, outputs=canvas, api_name="demo_show"
        )
        check.click(
            lambda s, v: inspect_canvas_value(sketches[s], v),
            inputs=[choice, canvas],
            outputs=[report, preview],
            api_name="demo_check",
            js=flush_js("demo_canvas", 1, 2),
        )
    return demo


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sketch", default="apple", help="slug in assets/sketches/manifest.csv")
    parser.add_argument("--port", type=int, default=7861)
    args = parser.parse_args()
    build_demo(args.sketch).launch(server_port=args.port)


if __name__ == "__main__":
    _main()
