"""The world the bad-input table acts in: a server's people, their tasks, bad files and values.

`build_world` sets up, through the public API where it can, everyone the rows of
``tests/app/test_bad_input.py`` act as; `snapshot` dumps every table and the data folder so
a row can check that nothing stored changed. The bad uploads, canvas values and sketch
files are built here, each wrong in one way.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gradio_client import handle_file
from PIL import Image

from annotation.coloring.fill import blank_color_layer, line_mask
from annotation.people.accounts import create_annotators, login_with_invite
from annotation.sketches.library import get_sketch, load_sketch, selected_sketch
from storage import open_db, utcnow
from tests.app_server import ADMIN_PASSWORD
from tests.png_modes import raw_png

SCRIPT = "<script>alert('x')</script>"
IMG = '<img src=x onerror="alert(1)">'
FORGED = "f" * 43


@dataclass
class World:
    """The module's server and the people in it."""

    config: object
    client: object
    admin: str
    tokens: dict[str, str]
    links: dict[str, str]
    files: dict[str, str]
    designer: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One bad input: call `api_name` with `args(world)`; expect a message matching `message`."""

    id: str
    api_name: str
    args: Callable[[World], tuple]
    message: str
    known_defect: str = ""


def as_role(who: str, *inputs) -> Callable[[World], tuple]:
    return lambda w: (w.tokens[who], *inputs)


def upload_args(name: str) -> Callable[[World], tuple]:
    """``/evaluate_import`` of the prepared upload `name` as a researcher."""
    return lambda w: (w.tokens["researcher"], "", handle_file(w.files[name]), "", "tiny-random", 0.3, 0.25)


IMPORT_NAME = "tiny-random__apple__natural__7.5__0.png"


def bomb_png(side: int = 40_000) -> bytes:
    """A 1-bit PNG of `side` x `side` black pixels: about 200 kB that decode to 200 MB."""
    raw = zlib.compressobj(9)
    row = b"\x00" * (side // 8 + 1)
    data = b"".join(raw.compress(row) for _ in range(side)) + raw.flush()
    return raw_png(side, side, 1, 0, data)


def _zip(path: Path, entries: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return str(path)


def bad_uploads(folder: Path) -> dict[str, str]:
    """Upload files, each wrong in one way, by name."""
    png = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 40)).save(png, format="PNG")
    (folder / "corrupt.zip").write_bytes(b"PK\x03\x04 this is not really a zip" * 10)
    (folder / "empty.zip").write_bytes(b"")
    return {
        "corrupt.zip": str(folder / "corrupt.zip"),
        "empty.zip": str(folder / "empty.zip"),
        "text.zip": _zip(folder / "text.zip", {IMPORT_NAME: b"just some text, not a PNG"}),
        "truncated.zip": _zip(folder / "truncated.zip", {IMPORT_NAME: png.getvalue()[:60]}),
        "bomb.zip": _zip(folder / "bomb.zip", {IMPORT_NAME: bomb_png()}),
        "oversized.zip": _zip(
            folder / "oversized.zip", {IMPORT_NAME: png.getvalue() + bytes(33 * 2**20 - len(png.getvalue()))}
        ),
        "slip.zip": _zip(folder / "slip.zip", {"../../" + IMPORT_NAME: png.getvalue()}),
    }


def snapshot(config) -> tuple[list[str], dict[str, str]]:
    """Every table's rows (SQL dump) and every file under the data folder by content hash."""
    db = open_db(config.db_path)
    try:
        dump = list(db.conn.iterdump())
    finally:
        db.close()
    root = Path(config.data_dir)
    files = (
        {
            p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
        if root.is_dir()
        else {}
    )
    return dump, files


def _people(client, admin) -> dict[str, str]:
    links = {}
    for role in ("designer", "expert", "participant", "researcher"):
        links[role] = client.predict(admin, role, 1, "unknown", 7, api_name="/admin_create_invites")["data"][
            0
        ][3]
    return links


def build_world(config, client, uploads: Path) -> World:
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    links = _people(client, admin)
    tokens = {role: client.predict(link, api_name="/login_invite")[0] for role, link in links.items()}
    tokens["admin"] = admin
    closed = client.predict(admin, "designer", 1, "unknown", 7, api_name="/admin_create_invites")["data"][0]
    links["closed"] = closed[3]
    tokens["closed"] = client.predict(closed[3], api_name="/login_invite")[0]
    client.predict(admin, closed[0], "left the study", api_name="/admin_revoke")
    tokens["signed_out"] = client.predict(links["expert"], api_name="/login_invite")[0]
    client.predict(tokens["signed_out"], api_name="/start_logout")
    # Expired invite and session: made in the past through the library (no waiting).
    past = utcnow() - dt.timedelta(days=3)
    db = open_db(config.db_path)
    try:
        [(_, expired_invite)] = create_annotators(db, 1, "designer", expires_days=1, now=past)
        [(_, stale_invite)] = create_annotators(db, 1, "designer", expires_days=30, now=past)
        tokens["expired"] = login_with_invite(db, stale_invite, session_days=1, now=past).token
    finally:
        db.close()
    links["expired"] = f"{config.public_url}/?invite={expired_invite}"
    judge = client.predict(admin, "participant", 1, "unknown", 7, api_name="/admin_create_invites")["data"][
        0
    ][3]
    tokens["judge"] = client.predict(judge, api_name="/login_invite")[0]
    client.predict(tokens["judge"], "no", api_name="/participant_set_background")
    second = client.predict(admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")["data"][0][3]
    tokens["designer2"] = client.predict(second, api_name="/login_invite")[0]
    # A good sketch next to the data folder, outside every folder the server may read.
    outside = Path(config.data_dir).parent / "outside.png"
    outside.write_bytes(
        (Path(__file__).resolve().parent.parent / "assets" / "sketches" / "apple.png").read_bytes()
    )
    files = {**bad_uploads(uploads), **bad_sketch_files(uploads), "sketch-outside": str(outside)}
    designer = _designer_tasks(client, config, tokens)
    _ended_sessions(client, admin, tokens, links)
    return World(config, client, admin, tokens, links, files, designer)


def _ended_sessions(client, admin: str, tokens: dict[str, str], links: dict[str, str]) -> None:
    """``replaced``: a session of a link the admin replaced with a new one (and that link);
    ``crowded``: the oldest of 6 sessions of one link, ended by the cap of 5."""
    replaced = client.predict(admin, "designer", 1, "unknown", 7, api_name="/admin_create_invites")["data"][0]
    links["replaced"] = replaced[3]
    tokens["replaced"] = client.predict(replaced[3], api_name="/login_invite")[0]
    client.predict(admin, replaced[0], 7, api_name="/admin_new_invite")
    crowded = client.predict(admin, "expert", 1, "unknown", 7, api_name="/admin_create_invites")["data"][0]
    sessions = [client.predict(crowded[3], api_name="/login_invite")[0] for _ in range(6)]
    tokens["crowded"] = sessions[0]


def _designer_tasks(client, config, tokens: dict[str, str]) -> dict:
    """Both designers agree and read the instructions: each holds a practice task.

    Returns the first designer's task (``key``, ``task_id``, ``sketch_id``, ``sketch``
    pixels), the second's canvas key (``theirs``), this database's ``instance`` name and
    the id of a sketch of another base concept (``other_sketch``).
    """
    tasks = {}
    for who in ("designer", "designer2"):
        client.predict(tokens[who], True, api_name="/designer_consent")
        tasks[who] = json.loads(client.predict(tokens[who], api_name="/designer_instructions_read")[4])
    mine = tasks["designer"]
    db = open_db(config.db_path)
    try:
        sketch = load_sketch(config.data_dir, get_sketch(db, mine["sketch_id"]))
        base = get_sketch(db, mine["sketch_id"])["base"]
        other = selected_sketch(db, "apple" if base != "apple" else "banana")["id"]
    finally:
        db.close()
    return {
        "key": mine["canvas_key"],
        "task_id": mine["task_id"],
        "sketch_id": mine["sketch_id"],
        "sketch": sketch,
        "base": base,
        "theirs": tasks["designer2"]["canvas_key"],
        "instance": mine["canvas_key"].split(":")[0],
        "other_sketch": other,
    }


def painted_layer(sketch: np.ndarray, pixels: int | None = None) -> np.ndarray:
    """A color layer painting every non-line pixel of `sketch`, or only the first `pixels`."""
    layer = blank_color_layer(sketch.shape)
    rows, cols = np.nonzero(~line_mask(sketch))
    layer[rows[:pixels], cols[:pixels]] = (208, 48, 48, 255)
    return layer


def value_with_png(key: str, png: bytes, *, prefix: str = "data:image/png;base64,") -> str:
    """A canvas value whose color layer is `png` (any bytes) under the data-URL `prefix`."""
    return json.dumps(
        {"task_id": key, "color_layer": prefix + base64.b64encode(png).decode(), "elapsed_s": 5.0}
    )


def designer_submit(value: Callable[[dict], str], who: str = "designer") -> Callable[[World], tuple]:
    """``/designer_submit`` arguments: `who`'s session and the canvas value `value(task)`."""
    return lambda w: (w.tokens[who], value(w.designer))


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def bad_sketch_files(folder: Path) -> dict[str, str]:
    """Sketch files for ``/sketches_import``, each wrong in one way, by case name."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, 256, dtype=np.uint8)
    photo = np.stack(
        [np.add.outer(ramp, ramp) // 2, np.tile(ramp, (256, 1)), np.tile(ramp[:, None], (1, 256))], axis=2
    ).astype(np.uint8)
    photo = np.clip(photo + rng.normal(0, 12, photo.shape), 0, 255).astype(np.uint8)
    outline = '<circle cx="100" cy="100" r="80" fill="none" stroke="black" stroke-width="4"/>'
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
        ' width="200" height="200">' + outline + "{}</svg>"
    )
    server_image = Path(__file__).resolve().parent.parent / "assets" / "sketches" / "apple.png"
    line_art = server_image.read_bytes()
    contents = {
        "photo": ("apple.png", _png(photo)),
        "truncated": ("apple.png", line_art[: len(line_art) // 2]),
        "corrupt": ("apple.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
        "non-image": ("apple.png", b"name,color\napple,red\n"),
        "bomb": ("apple.png", bomb_png()),
        "svg-image": (
            "apple.svg",
            svg.format(f'<image href="{server_image}" width="200" height="200"/>').encode(),
        ),
        "svg-script": ("apple.svg", svg.format("<script>alert('x')</script>").encode()),
        "svg-external-use": ("apple.svg", svg.format('<use xlink:href="file:///etc/passwd#x"/>').encode()),
        "svg-entity": (
            "apple.svg",
            b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM '
            b'"file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg">&x;</svg>',
        ),
        "svg-malformed": ("apple.svg", svg.format("<g>").encode()),
    }
    paths = {}
    for case, (name, data) in contents.items():
        (folder / case).mkdir()
        (folder / case / name).write_bytes(data)
        paths[f"sketch-{case}"] = str(folder / case / name)
    return paths
