"""The app served under a sub-path (docs/security.md: ``GRADIO_ROOT_PATH=/lab`` behind a
proxy that passes ``location /lab/`` on to it): the requests reach the app as the proxy
forwards them, ``/lab/...``, and everything the app answers by path answers there too.

Under ``/lab`` the page's POST of its session to ``/lab/cc_session`` was not found, so no
session cookie was set and every file and download was refused; ``/lab/healthz`` was not
found; ``/lab/config`` was the page's whole configuration, the page itself went out
unzipped and Gradio's page scripts without the app's fixes (`app.route_path`).
"""

from __future__ import annotations

import httpx
import pytest

from app.guard import COOKIE, TAB_COOKIE
from app.page_scripts import patched_scripts
from app.route_path import route_path
from app.weight import PAGE_ONLY
from bench.app_process import AppProcess
from tests.app_server import ADMIN_PASSWORD, make_config

SUB = "/lab"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The app with ``GRADIO_ROOT_PATH=/lab``; its address with the sub-path, ending in ``/``."""
    config = make_config(tmp_path_factory.mktemp("lab"))
    env = {
        "GRADIO_ROOT_PATH": SUB,
        "COLORCONCEPT_ADMIN_PASSWORD_FILE": str(config.admin_password_file),
        "COLORCONCEPT_WORKERS": "0",
    }
    with AppProcess(config.db_path, config.data_dir, env=env) as app:
        yield app.url.rstrip("/") + SUB + "/", config


@pytest.mark.parametrize(
    "path, root, rest",
    [
        ("/lab/cc_session", "/lab", "/cc_session"),
        ("/lab/", "/lab", "/"),
        ("/lab", "/lab", "/"),
        ("/laboratory/config", "/lab", "/laboratory/config"),  # not under it
        ("/healthz", "/lab", "/healthz"),  # a proxy that strips the sub-path
        ("/config", "", "/config"),
    ],
)
def test_the_route_path_is_the_path_inside_the_sub_path(path, root, rest):
    assert route_path({"path": path, "root_path": root}) == rest


def test_the_apps_own_answers_are_given_under_the_sub_path(lab):
    url, _ = lab
    assert httpx.get(f"{url}healthz").text == "ready"
    assert httpx.head(url).status_code == 200
    answer = httpx.post(f"{url}cc_session", content=b"abc", headers={"sec-fetch-site": "same-origin"})
    assert answer.headers["set-cookie"].startswith(f"{COOKIE}=abc; Path=/; HttpOnly")
    config = httpx.get(f"{url}config", timeout=60)
    assert config.status_code == 200 and not set(PAGE_ONLY) & set(config.json())
    page = httpx.get(url, headers={"accept-encoding": "gzip"}, timeout=60)
    assert page.headers["content-encoding"] == "gzip"
    scripts = patched_scripts()
    assert scripts  # the installed Gradio's scripts take the fixes (tests/app/test_page_scripts.py)
    for path, body in scripts.items():
        assert httpx.get(url.rstrip("/") + path).content == body, path


@pytest.mark.browser
def test_a_page_under_the_sub_path_sets_its_session_cookie_and_fetches_files(lab, module_chromium):
    url, config = lab
    sketch = next((config.data_dir / "sketches").rglob("*.png"))
    context = module_chromium.new_context()
    try:
        page = context.new_page()
        page.goto(url, timeout=120_000)
        page.fill("#start_password input", ADMIN_PASSWORD)
        page.get_by_role("button", name="Sign in as admin").click()
        page.locator("#start_status").filter(has_text="Signed in as admin.").wait_for()
        # The tab's mark, set with the session cookie (which no script can read).
        page.wait_for_function(f"() => document.cookie.split('; ').includes('{TAB_COOKIE}=' + window.ccTab)")
        [cookie] = [c for c in context.cookies() if c["name"] == COOKIE]
        assert cookie["httpOnly"] and cookie["path"] == "/"
        fetched = page.evaluate(
            "async (file) => { const r = await fetch('gradio_api/file=' + file);"
            " return [r.status, (await r.arrayBuffer()).byteLength]; }",
            str(sketch),
        )
        assert fetched == [200, sketch.stat().st_size]
    finally:
        context.close()
