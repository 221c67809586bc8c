"""Who may fetch which file (issue 15.1-15.2), through raw HTTP as an attacker would.

A path is not a secret: every request for a file is checked against the session cookie
(`app.guard`). The database, its journals and the admin password file are never served,
whatever the configuration, and a configuration that would put a secret in a served
folder is refused at start.
"""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.designer import reference_example_files
from app.guard import COOKIE
from bench.app_process import ROOT, AppProcess, page_config
from bench.designer_client import TLS_CONTEXT
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, shared_app  # noqa: F401 (fixture)
from tests.qc_data import add_coloring
from tests.research_data import store_segmented_run


def _people(client, role: str, n: int = 1) -> list[tuple[int, str]]:
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    rows = client.predict(admin, role, n, "unknown", 7, api_name="/admin_create_invites")["data"]
    return [(row[0], client.predict(row[3], api_name="/login_invite")[0]) for row in rows]


def _get(client, path, token: str | None) -> httpx.Response:
    cookies = {} if token is None else {COOKIE: token}
    return httpx.get(f"{client.src}gradio_api/file={path}", cookies=cookies, verify=TLS_CONTEXT)


def test_the_reference_examples_are_not_in_the_page_nor_served_to_a_visitor(shared_app):
    """They came in every visitor's page: 1.7 kB of its 300 (issue 28), with the paths of
    Gradio's cache. A designer's page gets them at sign-in (tests/e2e/test_designer.py sees
    them load, exactly as drawn, in `_read_instructions`)."""
    client, _ = shared_app
    config = page_config(client.src)
    [gallery] = [c for c in config["components"] if c["props"].get("elem_id") == "designer_examples"]
    assert not gallery["props"].get("value")
    for path, _ in reference_example_files():
        assert _get(client, path, None).status_code == 403  # no session


def test_a_ranged_read_answers_the_files_bytes_and_none_of_the_requests_headers(shared_app):
    """Gradio built its answer to a ``Range`` request from the request's own headers: a
    session cookie, a bearer token, a header the caller made up, a cache policy for shared
    caches and a second content type came back in it. Now only the file's own headers."""
    client, config = shared_app
    [(owner, token)] = _people(client, "designer")
    db = open_db(config.db_path)
    try:
        coloring = add_coloring(db, config.data_dir, owner, "apple", (200, 30, 30))
        [relative] = db.execute("select image_path from colorings where id = ?", [coloring]).fetchone()
    finally:
        db.close()
    path = Path(config.data_dir) / relative
    echoed = {
        "Cookie": f"{COOKIE}={token}",
        "Authorization": "Bearer a-bearer-token",
        "X-Evil": "<script>alert(1)</script>",
        "Cache-Control": "public, max-age=31536000",
        "Content-Type": "text/html",
        "ETag": '"forged"',
        "Content-Security-Policy": "default-src *",
    }
    answer = httpx.get(
        f"{client.src}gradio_api/file={path}",
        headers={"Range": "bytes=0-9", **echoed},
        verify=TLS_CONTEXT,
    )
    assert answer.status_code == 206
    assert answer.content == path.read_bytes()[:10]
    assert answer.headers["content-range"] == f"bytes 0-9/{path.stat().st_size}"
    assert answer.headers.get_list("content-type") == ["image/png"]
    assert answer.headers.get_list("content-security-policy") == [
        "sandbox allow-scripts; frame-ancestors 'self' https://*.mturk.com"
    ]
    for name in ("cookie", "authorization", "x-evil", "cache-control", "etag"):
        assert name not in answer.headers, name


def test_a_coloring_is_served_to_its_designer_and_the_roles_that_review_it_only(shared_app):
    client, config = shared_app
    (owner, owner_token), (_, other_token) = _people(client, "designer", 2)
    [(_, expert)] = _people(client, "expert")
    [(_, participant)] = _people(client, "participant")
    [(_, researcher)] = _people(client, "researcher")
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    db = open_db(config.db_path)
    try:
        coloring = add_coloring(db, config.data_dir, owner, "forbidding castle", (90, 90, 95))
        image, mask = db.execute(
            "select image_path, mask_path from colorings where id = ?", [coloring]
        ).fetchone()
    finally:
        db.close()
    for relative in (image, mask):
        path = Path(config.data_dir) / relative
        expected = {
            None: 403,
            "nonsense": 403,
            other_token: 403,
            owner_token: 200,
            expert: 200,
            participant: 403,  # no trial of theirs shows it (tests/app/test_participant.py)
            researcher: 200,
            admin: 200,
        }
        got = {token: _get(client, path, token).status_code for token in expected}
        assert got == expected, relative
        # Naming the file another way (relative to the working folder, through "..")
        # reaches the same check.
        twisted = f"{path.parent}/../{path.parent.name}/{path.name}"
        assert _get(client, twisted, other_token).status_code == 403
    assert (
        _get(client, Path(config.data_dir) / image, owner_token).content
        == (Path(config.data_dir) / image).read_bytes()
    )
    # Withdrawn (its designer asked), it goes to its designer and the admin alone: the views
    # stopped showing it, and its address, learnt before, served it still (outside probe 221).
    withdrawn = client.predict(admin, owner, "asked in person", api_name="/admin_withdraw")
    assert withdrawn.startswith("Withdrew 1 coloring"), withdrawn
    # (Its mask, the same shape as other tests' colorings, is theirs too, and stays served.)
    got = {
        token: _get(client, Path(config.data_dir) / image, token).status_code
        for token in (owner_token, expert, researcher, admin)
    }
    assert got == {owner_token: 200, expert: 403, researcher: 403, admin: 200}


def test_model_images_go_to_researchers_and_participants_and_downloads_to_their_makers(shared_app):
    client, config = shared_app
    [(_, designer)] = _people(client, "designer")
    [(_, researcher)] = _people(client, "researcher")
    db = open_db(config.db_path)
    try:
        store_segmented_run(
            db, Path(config.data_dir), "served", {("m", "apple", "natural", 7.5): [(200, 30, 30)]}
        )
        [image] = [r["image_path"] for r in db["run_items"].rows_where("run = ?", ["served"])]
    finally:
        db.close()
    path = Path(config.data_dir) / image
    assert _get(client, path, designer).status_code == 403
    assert _get(client, path, researcher).status_code == 200
    # A backup (the whole database) is served in place, from the admin's downloads, to the
    # admin alone: not to researchers, who may read exports.
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    backup = Path(client.predict(admin, api_name="/admin_backup"))
    served = next((Path(config.data_dir) / "downloads" / "backups").rglob(backup.name))
    assert {
        token: _get(client, served, token).status_code for token in (None, designer, researcher, admin)
    } == {
        None: 403,
        designer: 403,
        researcher: 403,
        admin: 200,
    }


def test_a_password_file_in_the_data_folder_is_never_served(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    secret = data / "admin_password.txt"
    secret.write_text("a password nobody may read\n", encoding="utf-8")
    monkeypatch.setenv("COLORCONCEPT_ADMIN_PASSWORD_FILE", str(secret))
    with AppProcess(data / "colorconcept.sqlite", data) as app:
        admin = httpx.post(
            f"{app.url}gradio_api/call/login_admin", json={"data": ["a password nobody may read"]}
        ).json()["event_id"]
        token = httpx.get(f"{app.url}gradio_api/call/login_admin/{admin}").text
        assert "Signed in as" in token
        for path in (secret, data / "colorconcept.sqlite"):
            for cookies in ({}, {COOKIE: token.split('"')[1]}):
                response = httpx.get(f"{app.url}gradio_api/file={path}", cookies=cookies)
                assert response.status_code == 403 and b"nobody may read" not in response.content


@pytest.mark.parametrize("inside", ["colorings", "exports"])
def test_a_secret_inside_a_served_folder_refuses_the_start_and_says_why(tmp_path, inside):
    data = tmp_path / "data"
    (data / inside).mkdir(parents=True)
    secret = data / inside / "admin_password.txt"
    secret.write_text("hunter2 hunter2\n", encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        "COLORCONCEPT_ADMIN_PASSWORD_FILE": str(secret),
    }
    done = subprocess.run(
        [
            sys.executable,
            "app.py",
            "--db",
            str(tmp_path / "s.sqlite"),
            "--data-dir",
            str(data),
            "--port",
            "1",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    assert f"Refusing to start: {secret} lies inside {data.resolve() / inside}" in done.stderr
    assert not (tmp_path / "s.sqlite").exists(), "refused before any start-up work"


def test_gradio_monitoring_is_off_and_its_per_event_summary_is_not_recomputed(shared_app):
    client, _ = shared_app
    # The summary names every handler with its call count and timings, to anyone.
    assert httpx.get(f"{client.src}monitoring/summary").status_code == 403
    # Importing the app tells Gradio's queue not to rebuild that summary after each event.
    import gradio as gr

    import app  # noqa: F401

    with gr.Blocks() as blocks:
        gr.Markdown("x")
    assert blocks._queue.ANAYLTICS_CACHE_FREQUENCY >= 10**6
