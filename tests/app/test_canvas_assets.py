"""The coloring canvas's script and color names table leave the page's configuration (issue
28.1): the page fetches them when a canvas first loads, through the guard, from files the
code writes; the configuration every visitor receives carries a small loader only.

The browser side (the canvas loads, fills and names colors through the guarded app) is
tests/e2e/test_designer.py's; the canvas alone, tests/e2e/test_canvas.py's.
"""

import base64
import hashlib
import json
import uuid
import zlib
from pathlib import Path

import httpx
import numpy as np

from app.coloring_canvas import SERVED_FOLDER, WEB_DIR, color_names, served_files
from app.guard import COOKIE
from bench.app_process import AppProcess, page_config
from evaluation.color.naming import LOOKUP_BITS, level3_names, lookup_table
from tests.app_server import ADMIN_PASSWORD, make_config, shared_app  # noqa: F401 (fixture)

# What the script and the table hold, and the configuration must not: a line of coloring.js
# and a level 3 name of the table.
SCRIPT_LINE = "const MAX_SAVED_UNDO_BYTES = 48e6;"
COLOR_NAME = "moderate olive brown"


def test_the_page_and_its_configuration_carry_neither_the_canvas_script_nor_the_names_table(shared_app):
    client, _ = shared_app
    assert SCRIPT_LINE in (WEB_DIR / "coloring.js").read_text(encoding="utf-8")
    assert COLOR_NAME in level3_names()[0]
    page = httpx.get(client.src, timeout=60).text
    config = httpx.get(f"{client.src}config", timeout=60).text
    for text in (page, config):
        assert SCRIPT_LINE not in text and COLOR_NAME not in text
    [canvas] = [
        c for c in page_config(client.src)["components"] if c["props"].get("elem_id") == "designer_canvas"
    ]
    # The template (4 kB), the style sheet (6 kB) and the loader (2 kB); it was 96 kB.
    assert len(json.dumps(canvas["props"])) < 16_000
    assert len(canvas["props"]["js_on_load"]) < 3_000


def _canvas(url: str) -> dict:
    """The designer canvas's component in the configuration of the page at `url`."""
    [canvas] = [c for c in page_config(url)["components"] if c["props"].get("elem_id") == "designer_canvas"]
    return canvas


def _fetch(client, path: Path, token: str | None = None) -> httpx.Response:
    cookies = {} if token is None else {COOKIE: token}
    return httpx.get(f"{client.src}gradio_api/file={path}", cookies=cookies, timeout=60)


def test_the_served_files_are_what_the_code_generates_and_anyone_may_fetch_them(shared_app):
    client, _ = shared_app
    files = served_files()
    script, names = _fetch(client, files["script"]), _fetch(client, files["color_names"])
    assert (script.status_code, names.status_code) == (200, 200)
    assert script.content == (WEB_DIR / "coloring.js").read_bytes()
    assert json.loads(names.content) == color_names()
    assert script.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
    assert names.headers["content-type"] == "application/json"
    assert all(r.headers["content-disposition"].startswith("inline") for r in (script, names))
    # Named by their content, so a browser's copy from before an upgrade is never used after it.
    for response, path in ((script, files["script"]), (names, files["color_names"])):
        _, digest, _ = path.name.split(".")
        assert len(digest) == 16 and hashlib.sha256(response.content).hexdigest().startswith(digest)


def test_the_guard_refuses_every_path_beside_the_served_files(shared_app):
    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    folder = served_files()["script"].parent
    beside = folder / f"coloring.{uuid.uuid4().hex[:16]}.js"  # an older version's name, say
    beside.write_text("alert('not shipped')", encoding="utf-8")
    try:
        for path in (
            beside,
            folder,
            folder / ".." / folder.name / beside.name,
            Path(config.db_path),
        ):
            for token in (None, admin):
                response = _fetch(client, path, token)
                assert response.status_code == 403, (path, token is None, response.status_code)
                assert b"not shipped" not in response.content
    finally:
        beside.unlink()
    assert _fetch(client, served_files()["script"]).status_code == 200


def test_the_served_names_table_is_namings_lookup_table_within_the_page_budget():
    names = served_files()["color_names"].read_bytes()
    spec = json.loads(names)
    table = np.frombuffer(zlib.decompress(base64.b64decode(spec["table"])), dtype="<u2")
    assert (table == lookup_table()).all()
    l3, _, basic = level3_names()
    grey = spec["grey"]  # test_the_page_names_each_grey_exactly_where_the_table_names_its_cell
    assert spec == {
        "bits": LOOKUP_BITS,
        "table": spec["table"],
        "grey": grey,
        "l3": list(l3),
        "basic": list(basic),
    }
    assert len(grey) == 256 and len(names) < 50_000


def test_a_served_file_removed_while_the_app_runs_is_written_again(tmp_path):
    """A cleaner of temporary folders may remove the files of an app that runs for weeks."""
    config = make_config(tmp_path)
    temp = tmp_path / "gradio-temp"
    temp.mkdir()
    env = {
        "COLORCONCEPT_ADMIN_PASSWORD_FILE": str(config.admin_password_file),
        "GRADIO_TEMP_DIR": str(temp),
        "COLORCONCEPT_WORKERS": "0",
    }
    with AppProcess(config.db_path, config.data_dir, env=env) as app:
        loader = _canvas(app.url)["props"]["js_on_load"].split("\n", 1)[0]
        spec = json.loads(loader.removeprefix("const CANVAS = ").removesuffix(";"))
        script = Path(spec["script"])
        assert script.parent == temp.resolve() / SERVED_FOLDER
        script.unlink()
        response = httpx.get(f"{app.url}gradio_api/file={script}", timeout=60)
        assert response.status_code == 200
        assert response.content == script.read_bytes() == (WEB_DIR / "coloring.js").read_bytes()


def test_the_page_names_each_grey_exactly_where_the_table_names_its_cell():
    """A grey cell of the 6-bit table holds four greys; at a border between two neutrals the
    page named all four as the cell's centre (#404040 "dark gray" where exact naming says
    "black": outsider 84). The 256 greys' own names come with the table."""
    names = color_names()
    l3 = names["l3"]
    table = lookup_table()
    levels = np.arange(256)
    cells = table[(levels >> 2 << 12) | (levels >> 2 << 6) | (levels >> 2)]
    differ = {
        f"#{v:02x}{v:02x}{v:02x}": (l3[cells[v]], l3[names["grey"][v]])
        for v in levels
        if cells[v] != names["grey"][v]
    }
    assert differ == {
        "#404040": ("dark gray", "black"),
        "#6f6f6f": ("dark gray", "medium gray"),
        "#9f9f9f": ("medium gray", "light gray"),
        "#cccccc": ("white", "light gray"),
    }
    # Lightness orders the greys' names: one run of levels per neutral, black to white.
    runs = [l3[row] for i, row in enumerate(names["grey"]) if i == 0 or row != names["grey"][i - 1]]
    assert runs == ["black", "dark gray", "medium gray", "light gray", "white"]
