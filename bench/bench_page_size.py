"""Page size: bytes of the page, its configuration and the API description (issue 28.1).

``python -m bench.bench_page_size [--renders N]`` builds the app in this process on a fresh
database with the shipped concept list (all 1,278 concepts, as a real study has), launches
it, and reports the bytes of ``/`` (the page, its configuration and API description
inline), ``/config`` (what API clients read) and ``/gradio_api/info``, the bytes of the
page and of ``/config`` on the wire to a browser (gzip), the seconds of the first ``GET /``
and the median of `N` more (a quiet machine's first render), the 1-minute load average, and
what makes the page's configuration large: the largest components and dependencies and the
bytes per field.
``python -m bench --only page-size`` prints the same figures (no section is rewritten).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.app_process import page_config
from tests.app_server import make_config, running_app

PATHS = {"page": "", "config": "config", "info": "gradio_api/info"}


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def breakdown(config: dict, top: int = 8) -> dict[str, list[tuple[str, int]]]:
    """What makes `config` (a Blocks config as the page carries it) large, in bytes of JSON.

    Returns the `top` largest components (``type#elem_id``) and dependencies (``api_name``),
    and the bytes per component field and per dependency field over the whole config.
    """
    components = sorted(
        ((f"{c['type']}#{c['props'].get('elem_id') or c['id']}", _size(c)) for c in config["components"]),
        key=lambda item: -item[1],
    )
    dependencies = sorted(
        ((str(d.get("api_name") or d["id"]), _size(d)) for d in config["dependencies"]),
        key=lambda item: -item[1],
    )
    fields: collections.Counter = collections.Counter()
    for component in config["components"]:
        for key, value in component.items():
            if key == "props":
                for prop, prop_value in value.items():
                    fields[f"props.{prop}"] += _size(prop_value)
            else:
                fields[key] += _size(value)
    dependency_fields: collections.Counter = collections.Counter()
    for dependency in config["dependencies"]:
        for key, value in dependency.items():
            dependency_fields[key] += _size(value)
    return {
        "components": components[:top],
        "dependencies": dependencies[:top],
        "component_fields": fields.most_common(top),
        "dependency_fields": dependency_fields.most_common(top),
        "sections": sorted(((k, _size(v)) for k, v in config.items()), key=lambda item: -item[1])[:top],
    }


def wire_bytes(url: str) -> int:
    """Bytes of the answer to ``GET url`` as they travel to a browser that accepts gzip."""
    with (
        httpx.Client(timeout=300) as http,
        http.stream("GET", url, headers={"accept-encoding": "gzip"}) as answer,
    ):
        return sum(len(chunk) for chunk in answer.iter_raw())


def run(renders: int = 5) -> dict:
    """Build and launch the app on a fresh database; its page sizes and render times."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_app(make_config(Path(tmp), workers=0)) as (client, demo),
    ):
        url = client.src
        figures: dict = {"load_1min": os.getloadavg()[0], "components": len(demo.config["components"])}
        figures["dependencies"] = len(demo.config["dependencies"])
        times = []
        for _ in range(1 + renders):
            start = time.perf_counter()
            page = httpx.get(url, timeout=300)
            times.append(time.perf_counter() - start)
        figures["first_render_s"], figures["render_median_s"] = times[0], statistics.median(times[1:])
        figures["page_bytes"] = len(page.content)
        for name, path in PATHS.items():
            if name != "page":
                figures[f"{name}_bytes"] = len(httpx.get(url + path, timeout=300).content)
            figures[f"{name}_wire_bytes"] = wire_bytes(url + path)
        figures["breakdown"] = breakdown(page_config(url, timeout=300))
    return figures


def markdown(figures: dict) -> str:
    lines = [
        "| page (kB) | /config (kB) | /gradio_api/info (kB) | page, gzip (kB) | /config, gzip (kB) "
        "| first render (s) | median of the next (s) | load (1 min) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {figures['page_bytes'] / 1000:.0f} | {figures['config_bytes'] / 1000:.0f} | "
        f"{figures['info_bytes'] / 1000:.0f} | {figures['page_wire_bytes'] / 1000:.0f} | "
        f"{figures['config_wire_bytes'] / 1000:.0f} | {figures['first_render_s']:.3f} | "
        f"{figures['render_median_s']:.3f} | {figures['load_1min']:.1f} |",
        "",
        f"{figures['components']} components, {figures['dependencies']} dependencies. Largest in the page's "
        "configuration (bytes):",
    ]
    for title, items in figures["breakdown"].items():
        lines.append(f"- {title}: " + ", ".join(f"{name} {size:,}" for name, size in items))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=5, help="renders of / after the first (median)")
    print(markdown(run(parser.parse_args(argv).renders)))


if __name__ == "__main__":
    main()
