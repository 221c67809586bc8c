"""Files reached by path through raw HTTP: what `gradio_client` never sends but anyone can.

The client uploads every local file it is given, so these requests are made by hand:
a file argument naming a server path (outside every allowed folder, through ``..``, or
inside the data folder), an upload whose file name climbs out of its folder, and direct
downloads of the database, which the default layout keeps inside the data folder.
"""

from pathlib import Path

import httpx
import pytest

from app.guard import COOKIE
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.bad_input_world import snapshot

SKETCH = Path(__file__).resolve().parents[2] / "assets" / "sketches" / "apple.png"


@pytest.fixture
def server(tmp_path):
    config = make_config(tmp_path).replace(db_path=tmp_path / "data" / "colorconcept.sqlite")
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        yield config, client.src, admin


def _call(url: str, api_name: str, data: list, token: str | None = None) -> str:
    """The event stream of a raw ``/gradio_api/call`` request, as text (with the session
    cookie of `token`, as an API client that uploads sends it)."""
    headers = {"cookie": f"{COOKIE}={token}"} if token else {}
    event = httpx.post(f"{url}gradio_api/call/{api_name}", json={"data": data}, headers=headers).json()
    return httpx.get(f"{url}gradio_api/call/{api_name}/{event['event_id']}", timeout=60).text


def _import(url: str, admin: str, path: str) -> str:
    file = {"path": path, "meta": {"_type": "gradio.FileData"}}
    return _call(url, "sketches_import", [admin, [file], "apple", False], token=admin)


def test_a_file_argument_naming_a_server_path_is_refused_and_stores_nothing(server):
    config, url, admin = server
    outside = Path(config.data_dir).parent / "outside.png"
    outside.write_bytes(SKETCH.read_bytes())
    inside = next((Path(config.data_dir) / "sketches").rglob("*.png"))
    before = snapshot(config)
    for path in (str(outside), f"{config.data_dir}/../outside.png", str(inside), "/etc/passwd"):
        assert _import(url, admin, path).startswith("event: error"), path
    assert snapshot(config) == before
    assert _call(url, "sketches_missing", [admin]).startswith("event: complete")


def test_an_upload_named_with_a_path_is_refused_and_nothing_escapes(server, tmp_path):
    """A browser sends a file's own name; a path for a name is refused (Gradio renamed it)."""
    config, url, admin = server
    name = "../../../escaped/apple.png"
    response = httpx.post(
        f"{url}gradio_api/upload",
        files={"files": (name, SKETCH.read_bytes(), "image/png")},
        cookies={COOKIE: admin},
    )
    assert response.status_code == 400 and f"file 1 is named {name!r}" in response.text
    [stored] = httpx.post(
        f"{url}gradio_api/upload",
        files={"files": ("apple.png", SKETCH.read_bytes(), "image/png")},
        cookies={COOKIE: admin},
    ).json()
    # Every folder the name could have climbed to (its folder and the three above it); a
    # search of the shared temp folder instead races with other programs' temp folders.
    assert not any((folder / "escaped").exists() for folder in Path(stored).parents[:4])
    events = _import(url, admin, stored)
    assert "event: complete" in events and '"apple.png", "apple", "imported as sketch' in events


def test_the_database_and_password_file_are_never_served_sketches_only_to_people(server):
    config, url, admin = server
    db = Path(config.db_path)
    assert db.is_file() and db.parent == Path(config.data_dir)
    for cookie in ({}, {COOKIE: admin}):
        for path in (db, db.with_name(db.name + "-wal"), Path(config.admin_password_file)):
            response = httpx.get(f"{url}gradio_api/file={path}", cookies=cookie)
            assert response.status_code == 403, path
            assert b"SQLite" not in response.content
    sketch = next((Path(config.data_dir) / "sketches").rglob("*.png"))
    assert httpx.get(f"{url}gradio_api/file={sketch}").status_code == 403
    response = httpx.get(f"{url}gradio_api/file={sketch}", cookies={COOKIE: admin})
    assert response.status_code == 200 and response.content == sketch.read_bytes()
