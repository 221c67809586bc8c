"""Deny by default (issue 25), from the outside: every route the launched app has, and every
function of its page, called as a visitor with no session, a forged or revoked one, and each
role, through raw HTTP as an attacker would.

The server runs in its own process with Gradio's upload folder and the temp folder of its
own, so that the check "nothing was written" covers every folder it could write to.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import pathlib
import re
import socket
import tracemalloc
import urllib.parse
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import httpx
import pytest
from gradio.routes import App

from annotation.people.accounts import MAX_TOKEN_LENGTH
from app import guard
from app.common import OWN_SESSION, PUBLIC, ROLE, UI, Access
from app.guard import (
    COOKIE,
    DATA_RULES,
    FILE,
    ROUTES,
    app_routes,
    role_table_markdown,
    same_origin,
    unclassified,
)
from bench.app_process import AppProcess, page_config
from bench.designer_client import TLS_CONTEXT
from storage import open_db
from storage.shown import shown
from tests.app_server import ADMIN_PASSWORD, make_config, wait_for
from tests.qc_data import add_coloring

ROLES = ("designer", "expert", "participant", "researcher")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


@dataclass(frozen=True)
class Page:
    """A launched page's functions: Gradio's ``fns`` by index, ``/config``'s dependencies, each
    component's starting value and name (label, else element id) by id, the session box's id."""

    fns: dict
    dependencies: list[dict]
    values: dict[int, object]
    names: dict[int, str | None]
    token_box: int


class World:
    """A running app (own process and folders) with one person of each role and one file of
    each kind: a coloring, a sketch, an export and a backup."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = make_config(root)
        self.folders = [root / "data", root / "gradio-temp", root / "tmp"]
        for folder in self.folders[1:]:
            folder.mkdir()
        self.log = root / "app.log"
        self.process = AppProcess(
            self.config.db_path,
            self.config.data_dir,
            log_path=self.log,
            env={
                "COLORCONCEPT_ADMIN_PASSWORD_FILE": str(self.config.admin_password_file),
                "GRADIO_TEMP_DIR": str(self.folders[1]),
                "TMPDIR": str(self.folders[2]),
                "COLORCONCEPT_WORKERS": "0",
            },
        )

    def __enter__(self) -> World:
        self.process.__enter__()
        self.url = self.process.url
        self.http = httpx.Client(base_url=self.url, timeout=120)
        self.admin = self.call("login_admin", ADMIN_PASSWORD)[0]
        self.tokens = {role: self._person(role) for role in ROLES}
        self.revoked = self._person("designer")
        self.call("start_logout", self.revoked)
        db = open_db(self.config.db_path)
        try:
            designer_id = db.execute(
                "select annotator_id from sessions where revoked is null and roles like '%designer%' limit 1"
            ).fetchone()[0]
            coloring = add_coloring(db, self.config.data_dir, designer_id, "forbidding castle", (90, 90, 95))
            image = db.execute("select image_path from colorings where id = ?", [coloring]).fetchone()[0]
        finally:
            db.close()
        data = Path(self.config.data_dir)
        self.files = {
            "coloring": data / image,
            "sketch": next((data / "sketches").rglob("*.png")),
            "export": Path(self.call("admin_export", self.admin)[0]["path"]),
            "backup": Path(self.call("admin_backup", self.admin)[0]["path"]),
        }
        return self

    def __exit__(self, *exc) -> None:
        self.http.close()
        self.process.__exit__(*exc)

    @functools.cached_property
    def page(self) -> Page:
        """The launched page's functions and starting values (the app built once more, in
        this process, for each function's `fn`)."""
        from app import build_app

        demo = build_app(self.config)
        # The values the page starts with, for every event of the app (``/config``: the page's
        # configuration leaves out the API buttons' events, which a caller can still run).
        components = page_config(self.url)["components"]
        props = {c["id"]: c.get("props", {}) for c in components}
        return Page(
            fns=demo.fns,
            dependencies=httpx.get(f"{self.url}config").json()["dependencies"],
            values={i: p.get("value") for i, p in props.items()},
            names={i: p.get("label") or p.get("elem_id") for i, p in props.items()},
            token_box=next(i for i, p in props.items() if p.get("elem_id") == "session_token"),
        )

    def fetch(self, path: str | Path, token: str | None) -> int:
        """The status of a GET of the file at `path` through ``/gradio_api/file=``, with the
        session cookie of `token` (none for None)."""
        headers = {"cookie": f"{COOKIE}={token}"} if token else {}
        return self.http.get(f"gradio_api/file={path}", headers=headers).status_code

    def _person(self, role: str) -> str:
        rows = self.call("admin_create_invites", self.admin, role, 1, "unknown", 7)[0]["data"]
        return self.call("login_invite", rows[0][3])[0]

    def call(self, api_name: str, *data, token: str | None = None) -> list:
        """Call a named endpoint through the plain HTTP API; its output list (raises on refusal)."""
        cookies = {COOKIE: token or (data[0] if data and isinstance(data[0], str) else "")}
        with httpx.Client(base_url=self.url, cookies=cookies, timeout=120) as http:
            event = http.post(f"gradio_api/call/{api_name}", json={"data": list(data)}).json()["event_id"]
            text = http.get(f"gradio_api/call/{api_name}/{event}").text
        kind, payload = re.findall(r"event: (\w+)\ndata: (.*)", text)[-1]
        assert kind == "complete", (api_name, text[-300:])
        return json.loads(payload)

    def run(self, fn_index: int, calls: list[tuple[list, str | None]]) -> list[str]:
        """Run the page's function `fn_index` as the page would (Gradio's queue), once per
        ``(data, session cookie)`` in `calls`, all joined before any answer is read; the
        kind of each call's last message (``process_completed`` …)."""
        return [message.get("msg", "lost") for message in self.answers(fn_index, calls)]

    def answers(self, fn_index: int, calls: list[tuple[list, str | None]], event_data=None) -> list[dict]:
        """As `run`, but each call's last message itself (``{}`` for one that never ended);
        each call's body carries `event_data`."""
        session = uuid.uuid4().hex
        events = []
        for data, token in calls:
            body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": event_data}
            joined = self.http.post(
                "gradio_api/queue/join",
                content=json.dumps(body),  # ASCII with escapes: it carries a lone surrogate as JSON does
                headers={"content-type": "application/json"}
                | ({"cookie": f"{COOKIE}={token}"} if token else {}),
            )
            assert joined.status_code == 200, joined.text
            events.append(joined.json()["event_id"])
        done: dict[str, dict] = {}
        with self.http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") in ("process_completed", "unexpected_error"):
                        done[message.get("event_id")] = message
                        if len(done) == len(events):
                            break
        return [done.get(event, {}) for event in events]

    def state(self) -> tuple[dict, dict]:
        """Every table's rows, and every file (size, modification time) in the app's folders."""
        db = open_db(self.config.db_path)
        try:
            tables = {t: sorted(map(repr, db[t].rows)) for t in db.table_names()}
        finally:
            db.close()
        files = {}
        for folder in self.folders:
            for path in folder.rglob("*"):
                if path.is_file() and not path.name.endswith(("-wal", "-shm")):
                    stat = path.stat()
                    files[str(path)] = (stat.st_size, stat.st_mtime_ns)
        return tables, files


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with World(tmp_path_factory.mktemp("guard")) as running:
        yield running


def _expected(folder: str, who: str) -> int:
    """What the role table answers `who` (a role, or admin) for a file under `folder`."""
    return 200 if who == "admin" or who in DATA_RULES[folder].roles else 403


def test_a_removed_download_is_answered_as_gone_or_not_allowed_alike(world):
    """Outside probe 219: the admin's backup link, pruned after an hour, answered "sign in with a
    role that may see this file". The answer names both, for a file there or not (a missing
    file answered otherwise would tell who may not see it that one exists)."""
    backup = pathlib.Path(world.files["backup"])
    answers = {
        (who, name): httpx.get(
            f"{world.url.rstrip('/')}/gradio_api/file={backup.with_name(name)}",
            cookies={COOKIE: token},
            verify=TLS_CONTEXT,
        )
        for who, token in (("admin", world.admin), ("researcher", world.tokens["researcher"]))
        for name in ("gone.zip", backup.name)
    }
    assert answers["admin", backup.name].status_code == 200
    for key in (("admin", "gone.zip"), ("researcher", "gone.zip"), ("researcher", backup.name)):
        assert (answers[key].status_code, answers[key].text) == (403, guard.FILE_REFUSED), key
    assert "removed an hour after it is made" in guard.FILE_REFUSED


def test_every_file_route_answers_exactly_the_role_table(world):
    """Each route that serves a file by its path, every shape of it, for every caller."""
    callers = {
        "nobody": None,
        "forged": "not-a-session",
        "revoked": world.revoked,
        "admin": world.admin,
        **world.tokens,
    }
    folders = {
        "coloring": "colorings",
        "sketch": "sketches",
        "export": "downloads/exports",
        "backup": "downloads/backups",
    }
    file_routes = [path for path, kind in ROUTES.items() if kind == FILE]
    assert {"/gradio_api/file={path_or_url:path}", "/gradio_api/file/{path:path}"} <= set(file_routes)
    for template in file_routes:
        for kind, path in world.files.items():
            url = re.sub(r"\{[^}]+\}", str(path), template)
            want = {
                who: 403 if who in ("nobody", "forged", "revoked") else _expected(folders[kind], who)
                for who in callers
            }
            # The designer who made the coloring may see it; the one signed in here did.
            if kind == "coloring":
                want["designer"] = 200
            got = {
                who: httpx.get(
                    world.url.rstrip("/") + url, cookies={COOKIE: t} if t else {}, verify=TLS_CONTEXT
                ).status_code
                for who, t in callers.items()
            }
            assert got == want, (template, kind)
            ok = httpx.get(world.url.rstrip("/") + url, cookies={COOKIE: world.admin}, verify=TLS_CONTEXT)
            assert ok.content == path.read_bytes()


def test_a_file_of_a_kind_the_app_never_writes_there_is_served_to_nobody(world):
    """An HTML page in the sketches folder (put there by hand, or by a crafted backup)
    would run on the app's origin: refused to the admin too, through every file route; the
    folder's own kind beside it is served."""
    data = Path(world.config.data_dir)
    page = data / "sketches" / "zz" / "x.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("<script>alert(document.cookie)</script>")
    upper = data / "exports" / "x.HTML"  # an export folder's kinds are its own, not the sketches'
    wrong = data / "runs" / "x.csv"
    for path, text in ((upper, "<p>ok</p>"), (wrong, "a,b")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    try:
        for template in (path for path, kind in ROUTES.items() if kind == FILE):
            for path, status in ((page, 403), (wrong, 403), (upper, 200), (world.files["sketch"], 200)):
                url = world.url.rstrip("/") + re.sub(r"\{[^}]+\}", str(path), template)
                got = httpx.get(url, cookies={COOKIE: world.admin}, verify=TLS_CONTEXT)
                assert got.status_code == status, (template, path.name)
    finally:
        for path in (page, upper, wrong):
            path.unlink()


def test_a_file_whose_bytes_are_not_its_kind_is_served_to_nobody(world):
    """The database copied to a served folder under a served kind's name, or an HTML page
    named ``.png``, is refused to the admin too; the app's own files of those kinds pass."""
    data = Path(world.config.data_dir)
    database = Path(world.config.db_path).read_bytes()
    planted = {
        data / "colorings" / "zz" / "copy.png": database,
        data / "colorings" / "zz" / "page.png": b"<html><script>alert(1)</script>",
        data / "exports" / "zz" / "copy.csv": database,
        data / "runs" / "zz" / "copy.npz": database,
        data / "runs" / "zz" / "export.npz": _zip_of({"annotators.csv": b"id,pseudonym\n1,D0001\n"}),
    }
    for path, content in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    try:
        for template in (path for path, kind in ROUTES.items() if kind == FILE):
            for path in [*planted, world.files["coloring"], world.files["sketch"]]:
                url = world.url.rstrip("/") + re.sub(r"\{[^}]+\}", str(path), template)
                got = httpx.get(url, cookies={COOKIE: world.admin}, verify=TLS_CONTEXT).status_code
                assert got == (403 if path in planted else 200), (template, path.name)
    finally:
        for path in planted:
            path.unlink()


def test_every_answer_carries_the_security_headers(world):
    """The page, a served file, a refusal and /healthz: no sniffing, no framing by another
    site, no address sent out with a link; a served file opened as a page runs sandboxed."""
    base = world.url.rstrip("/")
    coloring = f"{base}/gradio_api/file={world.files['coloring']}"
    page_policy = "frame-ancestors 'self' https://*.mturk.com"
    for url, cookies, status, policy in (
        (f"{base}/", {}, 200, page_policy),
        (coloring, {COOKIE: world.admin}, 200, f"sandbox allow-scripts; {page_policy}"),
        (coloring, {}, 403, page_policy),
        (f"{base}/healthz", {}, 200, page_policy),
        (f"{base}/no-such-page", {}, 404, page_policy),
    ):
        got = httpx.get(url, cookies=cookies, verify=TLS_CONTEXT)
        assert got.status_code == status, url
        assert got.headers["x-content-type-options"] == "nosniff", url
        assert got.headers.get_list("content-security-policy") == [policy], url
        assert got.headers["referrer-policy"] == "same-origin", url


@pytest.mark.browser
def test_a_script_in_a_served_svg_cannot_read_the_session(world, module_chromium):
    """An SVG with a script put among the exports (by hand: the app writes none) is served
    to a researcher, but runs in an origin of its own: no cookie, no local storage."""
    svg = Path(world.config.data_dir) / "exports" / "zz" / "planted.svg"
    svg.parent.mkdir(parents=True, exist_ok=True)
    svg.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><script>'
        "let seen; try { seen = document.cookie + '|' + localStorage.length } catch (e) { seen = 'denied' }"
        "document.title = 'seen:' + seen</script></svg>"
    )
    context = module_chromium.new_context(ignore_https_errors=True)
    try:
        host = urllib.parse.urlsplit(world.url).hostname
        context.add_cookies(
            [{"name": COOKIE, "value": world.tokens["researcher"], "domain": host, "path": "/"}]
        )
        page = context.new_page()
        answer = page.goto(f"{world.url.rstrip('/')}/gradio_api/file={svg}")
        assert answer.status == 200
        page.wait_for_function("document.title.startsWith('seen:')")
        assert page.title() in ("seen:denied", "seen:|0"), page.title()
        assert world.tokens["researcher"] not in page.title()
    finally:
        context.close()
        svg.unlink()


def test_the_session_cookie_is_set_by_the_server_for_the_apps_own_page_only(world):
    """The cookie is ``HttpOnly`` (no script reads it), set by the guard for a POST of the
    page itself; another page, a GET, or text that is no token sets nothing."""
    url = world.url.rstrip("/") + guard.SET_COOKIE
    post = functools.partial(httpx.post, url, verify=TLS_CONTEXT)
    answer = post(content=world.admin, headers={"sec-fetch-site": "same-origin"})
    assert answer.status_code == 200
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={world.admin}; Path=/; HttpOnly; SameSite=Strict")
    assert cookie.endswith("; Secure") == world.url.startswith("https:")
    assert "Max-Age=0" in post(content=b"").headers["set-cookie"]  # signed out: cleared
    # The page in another site's frame (an MTurk HIT) asks for the cookie that frame keeps.
    framed = post(content=world.admin, headers={"sec-fetch-site": "same-origin", guard.FRAMED_HEADER: "1"})
    assert framed.headers["set-cookie"] == (
        f"{COOKIE}={world.admin}; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
    )
    assert (
        post(content=world.admin, headers={guard.FRAMED_HEADER: "yes"})
        .headers["set-cookie"]
        .endswith("SameSite=Strict" + ("; Secure" if world.url.startswith("https:") else ""))
    )
    assert post(content=b"a" * MAX_TOKEN_LENGTH).status_code == 200  # token-shaped: checked when read
    for refused, status in (
        (post(content=world.admin, headers={"sec-fetch-site": "same-site"}), 403),  # another port
        (post(content=world.admin, headers={"sec-fetch-site": "cross-site"}), 403),
        (post(content=world.admin, headers={"sec-fetch-site": "cross-site", guard.FRAMED_HEADER: "1"}), 403),
        (post(content=b"<script>"), 400),
        (post(content=b"a" * (MAX_TOKEN_LENGTH + 1)), 400),
        (post(content=b"ok; Domain=example.org"), 400),
        (httpx.get(url, verify=TLS_CONTEXT), 405),
    ):
        assert refused.status_code == status and "set-cookie" not in refused.headers, refused.text


def test_another_origin_on_this_host_neither_fetches_files_nor_reads_answers(world):
    """A page another program serves on another port of this host is the same *site*: the
    browser sends it the cookie. Its files and uploads are refused, and Gradio's CORS
    answer that let any ``localhost`` page read the answers is taken off."""
    base = urllib.parse.urlsplit(world.url)
    other = f"{base.scheme}://{base.hostname}:{(base.port or 443) + 1}"
    backup = f"{world.url.rstrip('/')}/gradio_api/file={world.files['backup']}"
    cookies = {COOKIE: world.admin}

    def get(url, **headers):
        return httpx.get(url, cookies=cookies, headers=headers, verify=TLS_CONTEXT)

    assert get(backup, **{"sec-fetch-site": "same-origin"}).status_code == 200
    assert get(backup).status_code == 200  # no such header: not a browser
    for site in ("same-site", "cross-site"):
        assert get(backup, **{"sec-fetch-site": site, "origin": other}).status_code == 403
        upload = httpx.post(
            f"{world.url.rstrip('/')}/gradio_api/upload",
            cookies=cookies,
            headers={"sec-fetch-site": site},
            files={"files": ("a.txt", b"a")},
            verify=TLS_CONTEXT,
        )
        assert upload.status_code == 403
    config = f"{world.url.rstrip('/')}/config"
    for origin in (other, f"{base.scheme}://localhost:{base.port}", "https://evil.example", "null"):
        preflight = httpx.options(
            config, headers={"origin": origin, "access-control-request-method": "GET"}, verify=TLS_CONTEXT
        )
        for answer in (get(config, origin=origin), get(backup, origin=origin), preflight):
            assert "access-control-allow-origin" not in answer.headers, origin
    own = f"{base.scheme}://{base.netloc}"
    assert get(config, origin=own).headers["access-control-allow-origin"] == own
    assert same_origin(own, base.netloc) and not same_origin(other, base.netloc)


def test_a_second_session_cookie_planted_at_a_longer_path_signs_nobody_in_and_is_removed(world):
    """Outside probe 106: a page of another port set ``cc_session`` at ``/gradio_api``, sent
    before the app's own; read as the session, it took the admin's downloads and uploads."""
    backup = f"{world.url.rstrip('/')}/gradio_api/file={world.files['backup']}"
    own, planted = world.admin, world.tokens["researcher"]
    for pair in ((planted, own), (own, planted)):
        answer = httpx.get(
            backup,
            headers={"cookie": f"{COOKIE}={pair[0]}; cc_tab=1; {COOKIE}={pair[1]}"},
            verify=TLS_CONTEXT,
        )
        assert answer.status_code == 403 and "two session cookies" in answer.text
        removed = [
            c for c in answer.headers.get_list("set-cookie") if c.startswith(f"{COOKIE}=; Path=/gradio_api")
        ]
        assert f"{COOKIE}=; Path=/gradio_api; Max-Age=0; SameSite=Strict" in removed
        assert not any("Path=/;" in c for c in answer.headers.get_list("set-cookie"))  # the app's own stays
    upload = httpx.post(
        f"{world.url.rstrip('/')}/gradio_api/upload",
        headers={"cookie": f"{COOKIE}={planted}; {COOKIE}={own}"},
        files={"files": ("a.txt", b"a")},
        verify=TLS_CONTEXT,
    )
    assert upload.status_code == 403
    assert guard.one_session(guard.cookie_values([f"{COOKIE}=a; cc_tab=2"])) == "a"
    assert guard.one_session(guard.cookie_values([f"{COOKIE}=a; {COOKIE}=b"])) is None
    assert all(";" not in c[1].decode().split("; ")[1] for c in guard.shadow_expiries("/a;Domain=x/b"))


_IMAGE_LOADS = """(url) => new Promise((done) => {
    const image = new Image();
    image.onload = () => done('load');
    image.onerror = () => done('error');
    image.src = url;
})"""


@pytest.mark.browser
def test_a_page_on_another_port_cannot_read_the_admins_cookie_or_downloads(world, module_chromium):
    """Outside probe 105: the admin signed in, then opened a page served on the next port of
    the same host; it read ``document.cookie`` and fetched the admin's invite list."""
    base = urllib.parse.urlsplit(world.url)
    other = f"{base.scheme}://{base.hostname}:{(base.port or 443) + 1}/"
    backup = f"{world.url.rstrip('/')}/gradio_api/file={world.files['backup']}"
    coloring = f"{world.url.rstrip('/')}/gradio_api/file={world.files['coloring']}"
    context = module_chromium.new_context(ignore_https_errors=True)
    try:
        context.route(
            other + "**", lambda route: route.fulfill(body="<p>another app</p>", content_type="text/html")
        )
        page = context.new_page()
        page.goto(world.url.rstrip("/") + guard.HEALTH)  # the app's origin, as its page would
        page.evaluate(
            "(token) => { const x = new XMLHttpRequest(); x.open('POST', 'cc_session', false); x.send(token); }",
            world.admin,
        )
        assert page.evaluate("(url) => fetch(url).then((r) => r.status)", backup) == 200
        assert world.admin not in page.evaluate("document.cookie")
        page.goto(other)
        assert world.admin not in page.evaluate("document.cookie")
        got = page.evaluate(
            "(url) => fetch(url, {credentials: 'include'}).then((r) => 'read ' + r.status, (e) => 'refused')",
            backup,
        )
        assert got == "refused"  # no CORS answer for it
        # An image needs no CORS: the browser sent the cookie along, and the guard refused.
        assert page.evaluate(_IMAGE_LOADS, coloring) == "error"
        # The page plants its own session at a longer path (outside probe 106): the app's
        # page is refused once, the planted cookie removed, and then served as before.
        page.evaluate(f"document.cookie = '{COOKIE}={world.tokens['researcher']}; path=/gradio_api'")
        page.goto(world.url.rstrip("/") + guard.HEALTH)
        assert page.evaluate("(url) => fetch(url).then((r) => r.status)", backup) == 403
        assert [c["path"] for c in context.cookies() if c["name"] == COOKIE] == ["/"]
        assert page.evaluate("(url) => fetch(url).then((r) => r.status)", backup) == 200
        assert page.evaluate(_IMAGE_LOADS, coloring) == "load"
    finally:
        context.close()


def test_a_call_with_too_few_or_too_many_inputs_is_refused_without_logging_them(world):
    """Gradio's own refusal prints every input it received, the caller's session token
    first, to the server's log."""
    with httpx.Client(base_url=world.url, cookies={COOKIE: world.admin}, timeout=120) as http:
        event = http.post("gradio_api/call/admin_revoke", json={"data": [world.admin]}).json()["event_id"]
        text = http.get(f"gradio_api/call/admin_revoke/{event}").text
    assert "This call sent 1 input(s) where the function takes 3; nothing was changed." in text
    with httpx.Client(base_url=world.url, cookies={COOKIE: world.admin}, timeout=120) as http:
        # Too many were taken, the rest unread (outsider 76: a sixth value made an invite).
        sent = [world.admin, "nobody", "left", "extra"]
        event = http.post("gradio_api/call/admin_revoke", json={"data": sent}).json()["event_id"]
        text = http.get(f"gradio_api/call/admin_revoke/{event}").text
    assert "This call sent 4 input(s) where the function takes 3; nothing was changed." in text
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    assert world.admin not in world.log.read_text()


def test_a_caller_without_the_role_is_refused_for_it_before_any_input_is_judged(world):
    """An outside tester with a participant's session called the invite form: it answered
    "`Role` must be one of 'designer', 'expert', …", and for an expert "`Design/art background`
    must be one of …": a refusal of an input, telling the admin form's choices, before the
    role check. Each is refused for its role now, nothing written; the admin is still told."""
    before = world.state()

    def refusal(*data) -> str:
        with httpx.Client(base_url=world.url, cookies={COOKIE: data[0]}, timeout=120) as http:
            event = http.post("gradio_api/call/admin_create_invites", json={"data": list(data)}).json()
            return http.get(f"gradio_api/call/admin_create_invites/{event['event_id']}").text

    for role, data in (("participant", ("admin", 1, "", 7)), ("expert", ("expert", 1, "", 7))):
        text = refusal(world.tokens[role], *data)
        assert (
            "this action needs the role admin; you are signed in as " in text and "must be one of" not in text
        )
    assert "too many" not in refusal(world.tokens["designer"], "expert", 1, "unknown", 7, "extra")
    assert "this action needs the role admin" in refusal(
        world.tokens["designer"], "expert", 1, "unknown", 7, "x"
    )
    assert "`Role` must be one of 'designer', 'expert'" in refusal(world.admin, "admin", 1, "", 7)
    assert world.state() == before


def test_every_route_of_the_launched_app_is_classified_or_refused(world, tmp_path):
    """A route the guard does not know is refused, whatever it would serve; and no route
    hands a coloring's bytes to a visitor with no session, however the path is written."""
    from app import build_app

    demo = build_app(make_config(tmp_path))
    # No start-up check of the page (3 s at most), as in `app.launch_options`.
    demo.launch(prevent_thread_lock=True, quiet=True, _frontend=False)
    try:
        # The web app launch() built is the one served (`app.lean_blocks` skips only the
        # throwaway builds before it); the world's app process serves its page and /healthz.
        assert isinstance(demo.app, App) and demo.server_app is demo.app
        routes = app_routes(demo.server_app)
        paths = {route.path for route in routes}
    finally:
        demo.close()
    assert set(ROUTES) - paths == set(), "ROUTES names routes this Gradio does not have"
    secret = world.files["coloring"]
    body = secret.read_bytes()
    for template in sorted(paths):
        for shape in (str(secret), str(secret).lstrip("/"), str(secret).replace("/", "%2F")):
            url = re.sub(r"\{[^}]+\}", shape, template)
            for method in ("GET", "POST"):
                response = httpx.request(
                    method, world.url.rstrip("/") + url, params={"path": str(secret)}, verify=TLS_CONTEXT
                )
                assert body not in response.content, (template, method, shape)
                if template not in ROUTES:
                    assert response.status_code in (403, 404), (template, method, response.status_code)


def test_a_route_added_later_is_refused_until_classified(world, tmp_path):
    """What a future Gradio might add: a new route that serves any file it is named."""
    from fastapi.responses import FileResponse

    from app import build_app, launch_options

    config = make_config(tmp_path)
    demo = build_app(config)
    try:
        demo.launch(prevent_thread_lock=True, quiet=True, **launch_options(config, demo))
        app = demo.server_app if hasattr(demo, "server_app") else demo.app
        app.add_api_route(
            "/gradio_api/new_files/{anything:path}", lambda anything: FileResponse("/" + anything)
        )
        assert "/gradio_api/new_files/{anything:path}" in unclassified(app)
        response = httpx.get(f"{demo.local_url}gradio_api/new_files{world.files['backup']}")
        assert response.status_code == 403 and b"PK" not in response.content[:2]
    finally:
        demo.close()


def test_a_nul_byte_or_a_climb_out_of_gradios_assets_is_refused_not_an_error(world):
    assert httpx.get(f"{world.url}gradio_api/file=/etc/passwd%00.png").status_code == 400
    assert httpx.get(f"{world.url}assets/%2E%2E/%2E%2E/app.py").status_code in (403, 404)
    assert httpx.get(world.url).status_code == 200  # still serving


def test_uploads_are_for_signed_in_researchers_and_the_admin_only(world):
    files = {"files": ("a.zip", b"PK\x05\x06" + bytes(18), "application/zip")}
    before = world.state()[1]
    for token in (None, "forged", world.revoked, world.tokens["designer"], world.tokens["participant"]):
        response = httpx.post(
            f"{world.url}gradio_api/upload", files=files, cookies={COOKIE: token} if token else {}
        )
        assert response.status_code == 403
    assert world.state()[1] == before, "a refused upload left a file"
    [stored] = httpx.post(
        f"{world.url}gradio_api/upload", files=files, cookies={COOKIE: world.tokens["researcher"]}
    ).json()
    # What was uploaded is served back to its uploader only.
    assert world.fetch(stored, world.tokens["researcher"]) == 200
    assert world.fetch(stored, world.tokens["expert"]) == 403


def _new_tracebacks(world, since: int) -> int:
    """How many tracebacks the app's log gained after its first `since` bytes."""
    return world.log.read_bytes()[since:].count(b"Traceback")


def test_an_upload_form_with_a_plain_field_for_a_file_is_refused_and_leaves_no_file(world):
    """Gradio took every part of `files` as a file: a plain part was a 500, a traceback in
    the log and the form's other files left in its upload folder for good."""
    before, since = world.state()[1], world.log.stat().st_size
    response = httpx.post(
        f"{world.url}gradio_api/upload",
        data={"files": "no file here"},
        files={"files": ("a.csv", b"model,concept\n", "text/csv")},
        cookies={COOKIE: world.tokens["researcher"]},
        timeout=120,
    )
    assert (response.status_code, response.text) == (
        400,
        "Not stored: every part of the upload's field `files` must be a file (a part with a "
        "filename); part 1 is a plain field. Nothing was kept.",
    )
    assert world.state()[1] == before, "the refused form's file was left behind"
    assert _new_tracebacks(world, since) == 0
    assert world.call("admin_coverage", world.admin)  # the app serves on


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            [
                ("files", ("a.csv", b"model,concept\n", "text/csv")),
                ("extra", ("b.zip", b"PK", "application/zip")),
            ],
            "Not stored: the upload form has a part named 'extra'; files are taken only from the "
            "field `files`. Nothing was kept.",
        ),
        (
            [("files", ("a.csv", b"x", "text/csv")), ("files", ("..", b"y", "text/plain"))],
            "Not stored: file 2 is named '..', which is not a plain file name (not empty, no `/`, "
            "no control character, not `.` or `..`). Nothing was kept.",
        ),
        (
            [("files", ("../../etc/cron.d/x", b"y", "text/plain"))],
            "Not stored: file 1 is named '../../etc/cron.d/x', which is not a plain file name (not "
            "empty, no `/`, no control character, not `.` or `..`). Nothing was kept.",
        ),
        (
            [("files", ("red\x1b[31m.csv", b"y", "text/csv"))],
            "Not stored: file 1 is named 'red\\x1b[31m.csv', which is not a plain file name (not "
            "empty, no `/`, no control character, not `.` or `..`). Nothing was kept.",
        ),
    ],
    ids=["file-in-another-field", "dot-dot", "a-path", "an-escape"],
)
def test_an_upload_form_with_a_file_gradio_would_not_take_is_refused_and_leaves_no_file(
    world, files, message
):
    """A file outside the field `files` was answered `200 []` and one named `..` with Gradio's
    "Invalid file name" 400: either way its temporary file stayed in the upload folder for
    good (outside probe 135); a path for a name was renamed without a word."""
    before, since = world.state()[1], world.log.stat().st_size
    response = httpx.post(
        f"{world.url}gradio_api/upload",
        files=files,
        cookies={COOKIE: world.tokens["researcher"]},
        timeout=120,
    )
    assert (response.status_code, response.text) == (400, message)
    assert world.state()[1] == before, "the refused form's files were left behind"
    assert _new_tracebacks(world, since) == 0


def test_an_upload_of_a_file_with_an_empty_name_is_refused_and_leaves_no_file(world):
    """``filename=""`` was stored under a name Gradio made up (outside probe 140)."""
    before = world.state()[1]
    body = (
        b'--XyZbound\r\nContent-Disposition: form-data; name="files"; filename=""\r\n\r\nx\r\n'
        b"--XyZbound--\r\n"
    )
    response = httpx.post(
        f"{world.url}gradio_api/upload",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=XyZbound"},
        cookies={COOKIE: world.tokens["researcher"]},
        timeout=120,
    )
    assert (response.status_code, response.text) == (
        400,
        "Not stored: file 1 is named '', which is not a plain file name (not empty, no `/`, no "
        "control character, not `.` or `..`). Nothing was kept.",
    )
    assert world.state()[1] == before


def test_a_call_with_a_file_field_leaves_no_file_in_gradios_folder(world):
    """Gradio made an empty temporary file in its cache for each call with a file field, and
    never removed it: one more per press (outside probe 135)."""
    researcher = world.tokens["researcher"]
    [uploaded] = httpx.post(
        f"{world.url}gradio_api/upload",
        files={"files": ("images.zip", b"PK\x05\x06" + bytes(18), "application/zip")},
        cookies={COOKIE: researcher},
        timeout=120,
    ).json()
    before = world.state()[1]
    file = {"path": uploaded, "meta": {"_type": "gradio.FileData"}}
    with httpx.Client(base_url=world.url, cookies={COOKIE: researcher}, timeout=120) as http:
        for _ in range(3):  # refused for its run name, after Gradio read the file field
            data = [researcher, "<b>", file, "", "tiny-random", 0.3, 0.25, "in-process", ""]
            event = http.post("gradio_api/call/evaluate_import", json={"data": data}).json()["event_id"]
            assert "`run` name must be" in http.get(f"gradio_api/call/evaluate_import/{event}").text
    assert world.state()[1] == before


def test_an_uploads_progress_answers_only_the_roles_that_upload(world):
    """The stream of an upload's file names and sizes, by its id, answered anyone."""
    url = f"{world.url}gradio_api/upload_progress?upload_id=someone-elses"
    for who in (None, "designer", "expert"):
        cookies = {} if who is None else {COOKIE: world.tokens[who]}
        response = httpx.get(url, cookies=cookies, timeout=120)
        assert (response.status_code, response.text) == (
            403,
            "Not allowed: only signed-in researchers and the admin upload files.",
        ), who
    # a researcher reaches Gradio's stream, which finds no upload of that id
    assert httpx.get(url, cookies={COOKIE: world.tokens["researcher"]}, timeout=120).status_code != 403


def test_an_upload_abandoned_midway_leaves_no_file_and_no_traceback(world):
    """A sender gone before the form's end (a closed tab): Gradio's clean-up did not cover it."""
    before, since = world.state()[1], world.log.stat().st_size
    boundary = b"b0undary"
    part = (
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="files"; filename="a.zip"\r\n'
        b"Content-Type: application/zip\r\n\r\n" + b"PK" * 40_000
    )
    url = httpx.URL(world.url)
    with socket.create_connection((url.host, url.port), timeout=120) as raw:
        raw.sendall(
            b"POST /gradio_api/upload?upload_id=gone-away HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: multipart/form-data; boundary=" + boundary + b"\r\n"
            b"Content-Length: 10000000\r\n"
            + f"Cookie: {COOKIE}={world.tokens['researcher']}\r\n\r\n".encode()
            + part
        )
        # The part's temporary file is made as its bytes arrive: wait for it, then go away.
        assert wait_for(lambda: len(world.state()[1]) > len(before)), "no upload began"
    assert wait_for(lambda: world.state()[1] == before), "the abandoned upload's file was left behind"
    assert _new_tracebacks(world, since) == 0
    assert world.call("admin_coverage", world.admin)
    # Its progress stream ends at once instead of reporting an upload that will never finish.
    assert _first_progress(world, "gone-away") == {"msg": "done"}


def _first_progress(world, upload_id: str) -> dict:
    """The first message of Gradio's progress stream of the upload `upload_id`."""
    with httpx.stream(
        "GET",
        f"{world.url}gradio_api/upload_progress",
        params={"upload_id": upload_id},
        cookies={COOKIE: world.tokens["researcher"]},
        timeout=120,
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                return json.loads(line.removeprefix("data: "))
    raise AssertionError("the progress stream sent no message")


def test_an_upload_form_cut_short_is_refused_and_leaves_no_file(world):
    """A form whose closing boundary never came, though every byte its sender announced did,
    was answered `200 []` with its parts unchecked and its last file kept (outside probe 138)."""
    before, since = world.state()[1], world.log.stat().st_size
    boundary = b"b0undary"
    for parts in (
        [(b"files", b"a.zip")],  # one part, cut
        [(b"files", b"a.zip"), (b"extra", b"b.zip")],  # a field the form may not have, cut
    ):
        body = b"".join(
            b"--"
            + boundary
            + b'\r\nContent-Disposition: form-data; name="'
            + name
            + b'"; filename="'
            + filename
            + b'"\r\nContent-Type: application/zip\r\n\r\n'
            + b"PK" * 2_000
            + b"\r\n"
            for name, filename in parts
        )
        response = httpx.post(
            f"{world.url}gradio_api/upload",
            params={"upload_id": "cut-short"},
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=" + boundary.decode()},
            cookies={COOKIE: world.tokens["researcher"]},
            timeout=120,
        )
        assert (response.status_code, response.text) == (
            400,
            "Not stored: the upload form ended without its closing boundary, so its last part "
            "may be cut short. Nothing was kept.",
        )
        assert world.state()[1] == before, "the cut form's file was left behind"
    assert _first_progress(world, "cut-short") == {"msg": "done"}
    assert _new_tracebacks(world, since) == 0


def test_no_page_function_takes_or_hands_back_a_file_its_caller_may_not_fetch(world):
    """A call that names, in any input, a file of Gradio's folders its caller may not fetch
    (someone else's upload, another app's file) is refused before it runs, naming the input,
    for every function of the page; so a function that echoes its inputs (the Evaluate form
    saved in the browser) cannot issue that file to whoever named it."""
    upload = {"files": ("mine.csv", b"model,concept\n", "text/csv")}
    [uploaded] = world.http.post(
        "gradio_api/upload", files=upload, headers={"cookie": f"{COOKIE}={world.tokens['researcher']}"}
    ).json()
    stray = world.folders[1] / "another-app" / "secret.txt"  # Gradio's upload folder, shared
    stray.parent.mkdir()
    stray.write_text("another app's file")
    foreign = [{"path": p, "meta": {"_type": "gradio.FileData"}} for p in (uploaded, str(stray))]
    page = world.page
    before = world.state()
    checked = 0
    for index, dependency in enumerate(page.dependencies):
        inputs, fn = dependency["inputs"], page.fns[index]
        if fn.fn is None or not inputs:
            continue
        others = list(range(1 if fn.fn.cc_access.kind == ROLE else 0, len(inputs)))
        if not others:
            continue
        callers = [world.tokens["participant"], world.tokens["designer"]]
        if (allowed := _allowed(world, fn)) is not None:
            callers.append(allowed)  # the others may be refused by role first
        for file in foreign:
            data = [page.values.get(i) for i in inputs]
            data[others[0]] = file
            for token in callers:
                [answer] = world.answers(index, [(_as(fn, data, token), token)])
                assert answer.get("success") is False, (index, answer)
                error = answer["output"]["error"]
                if allowed is not None and token != allowed and "this action needs the role" in error:
                    continue
                assert (
                    error.startswith("Not allowed: ") and "names a file this session may not fetch" in error
                )
                name = page.names.get(inputs[others[0]])
                assert (f"`{name}`" if name else f"input {others[0] + 1} (") in error, (index, error)
        checked += 1
    assert checked > 100
    for who in ("participant", "designer", "expert"):
        for file in foreign:
            assert world.fetch(file["path"], world.tokens[who]) == 403, (who, file["path"])
    assert world.state()[0] == before[0]  # no row changed
    # The Evaluate form is saved by the browser alone (`app.evaluate.EvaluateTab.wire`): it
    # was a server function that handed its inputs back, so it could have issued a named
    # file to whoever sent it. A call of that event runs nothing.
    [save] = [i for i, fn in page.fns.items() if fn.fn is None and "Object.fromEntries" in (fn.js or "")]
    form = [page.values.get(i) for i in page.dependencies[save]["inputs"]]
    [answer] = world.answers(save, [([foreign[0]] + form[1:], world.tokens["researcher"])])
    assert answer.get("success") is False and "runs in the browser only" in answer["output"]["error"]
    assert world.fetch(uploaded, world.tokens["participant"]) == 403


def test_no_page_function_takes_text_that_cannot_be_stored(world):
    """A lone UTF-16 surrogate (valid JSON, which no browser sends) in any input of any page
    function is refused before the function runs, naming the input; nothing changes."""
    page = world.page
    before = world.state()
    checked = 0
    for index, dependency in enumerate(page.dependencies):
        inputs, fn = dependency["inputs"], page.fns[index]
        last = len(inputs) - 1  # after the session token, where a function has one
        if fn.fn is None or not inputs or (last == 0 and fn.fn.cc_access.kind == ROLE):
            continue
        token = _allowed(world, fn) or world.tokens["participant"]
        data = [page.values.get(i) for i in inputs[:last]] + [["fine", {"note": "a\ud800b"}]]
        [answer] = world.answers(index, [(_as(fn, data, token), token)])
        assert answer.get("success") is False, (index, answer)
        error = answer["output"]["error"]
        assert "holds a character that cannot be stored as text (U+D800, half of a UTF-16 pair)" in error
        name = page.names.get(inputs[last])
        assert (f"`{name}`" if name else f"input {last + 1} (") in error, (index, error)
        checked += 1
    assert checked > 100
    assert world.state() == before


NOT_SIGNED_IN = "you are not signed in: open your invite link"


def _allowed(world, fn) -> str | None:
    """A session `fn` lets in (for a role-checked function), else None."""
    access: Access = fn.fn.cc_access
    if access.kind != ROLE:
        return None
    return world.admin if "admin" in access.roles else world.tokens[access.roles[0]]


def _as(fn, data: list, token: str | None) -> list:
    """`data` with `token` as its first input where `fn` checks a role (`app.common.role`: the
    session box, or an API endpoint's own token input)."""
    return [token, *data[1:]] if fn.fn.cc_access.kind == ROLE else data


def test_an_input_its_component_cannot_read_is_refused_by_name_without_a_traceback(world):
    """A visitor's text where a table goes (or a null) failed in Gradio's reading of the
    input, before the function and its role check ran: an empty "Error" to the caller and a
    traceback in the log per call (an outside check left 61). Now a refusal naming the input
    to a caller the function lets in, and the role check's to one it does not."""
    page = world.page
    before = world.state()
    checked = 0
    for index, dependency in enumerate(page.dependencies):
        inputs = dependency["inputs"]
        fn = page.fns[index]
        tables = [i for i, block in enumerate(fn.inputs) if type(block).__name__ == "Dataframe"]
        if fn.fn is None or not tables:
            continue
        data = [page.values.get(i) for i in inputs]
        data[tables[0]] = "not a table"
        token = _allowed(world, fn)
        [answer, visitor] = world.answers(index, [(_as(fn, data, token), token), (data, None)])
        assert answer.get("success") is False, (index, answer)
        error = answer["output"]["error"] or ""
        assert error.endswith("is not a value the Dataframe input takes; nothing was changed."), (
            fn.name,
            error,
        )
        if token is not None:
            assert NOT_SIGNED_IN in (visitor["output"]["error"] or ""), (fn.name, visitor)
        checked += 1
    assert checked >= 1
    # And every function with a null in each input: refused with words, or run (a null is a
    # value of many components), never an empty "Error".
    for index, dependency in enumerate(page.dependencies):
        if page.fns[index].fn is None or not dependency["inputs"]:
            continue
        [answer] = world.answers(index, [([None] * len(dependency["inputs"]), None)])
        assert answer.get("success") is not False or answer["output"].get("error"), (
            page.fns[index].name,
            answer,
        )
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    assert "Traceback" not in world.log.read_text()
    assert world.state() == before


def test_a_value_outside_its_components_choices_is_refused_by_name_not_quoted_or_logged(world):
    """A visitor's 200 kB where a choice goes: Gradio's reading of it refused it quoting the
    whole value, to the caller and with a traceback in the log, before the role check (an
    outside check grew the log by 5 MB with one call). Now a short refusal naming the input,
    to a caller the function lets in; one it does not is told that alone (an outside tester
    with a participant's session was told the invite form's roles)."""
    page = world.page
    before = world.state()
    log_before = world.log.stat().st_size
    huge = "B" * 200_000
    worded = 0
    for index, dependency in enumerate(page.dependencies):
        fn = page.fns[index]
        choices = [
            i
            for i, block in enumerate(fn.inputs)
            if type(block).__name__ in ("Radio", "Dropdown", "CheckboxGroup")
        ]
        if fn.fn is None or not choices:
            continue
        for position in choices:
            data = [page.values.get(i) for i in dependency["inputs"]]
            data[position] = [huge] if type(fn.inputs[position]).__name__ == "CheckboxGroup" else huge
            [answer] = world.answers(index, [(data, None)])
            error = answer["output"].get("error") or ""
            assert len(error) < 1000, (fn.name, error[:300])
            token = _allowed(world, fn)
            if token is not None:
                if guard.unchosen_input(fn, data) is None:
                    continue  # it takes any text there: it runs, and refuses by role (in its note)
                assert answer.get("success") is False and NOT_SIGNED_IN in error, (fn.name, error[:300])
                [answer] = world.answers(index, [(_as(fn, data, token), token)])
                error = answer["output"].get("error") or ""
            worded += answer.get("success") is False and bool(
                re.search(
                    r" must be (a list of choices, each )?one of .*, got .*BBBB.*\(2000\d\d characters\); nothing was changed\.$",
                    error,
                )
            )
    # The others take any text (a concept typed in) and refuse by role, in their note
    assert worded >= 10
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    grown = world.log.read_text()[log_before:]
    assert "Traceback" not in grown and huge[:1000] not in grown and len(grown) < 100_000
    assert world.state() == before


def test_event_data_a_select_never_sends_is_refused_in_one_line_without_a_traceback(world):
    """A visitor's join of the expert grid's picture click (a ``gr.SelectData`` function)
    with ``null`` or ``{}`` as its event data logged a traceback per call and answered an
    empty "Error" (outside probe 178); the data a click sends still runs it."""
    page = world.page
    log_before = world.log.stat().st_size
    selects = [i for i, fn in page.fns.items() if fn.fn is not None and fn.collects_event_data]
    assert selects
    for index in selects:
        data = [page.values.get(i) for i in page.dependencies[index]["inputs"]]
        for sent in (None, {}, {"index": 0}, {"value": None}, "x", []):
            [answer] = world.answers(index, [(data, None)], event_data=sent)
            assert (answer.get("success"), answer["output"].get("error")) == (
                False,
                "This call's event data is not what a select event sends; nothing was run.",
            ), (index, sent)
        [answer] = world.answers(index, [(data, None)], event_data={"index": 0, "value": None})
        assert answer.get("success") is True, (index, answer)
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    assert "Traceback" not in world.log.read_text()[log_before:]


def test_a_join_of_an_event_the_server_does_not_run_is_refused_in_one_line_without_a_traceback(world):
    """A visitor's join of a browser-only event (no server method), or of an index no event
    has, logged a whole traceback per call (~1.6 kB: "function has no backend method", a
    ``KeyError``), the second with a 500. Now a one-line refusal, and nothing logged."""
    page = world.page
    log_before = world.log.stat().st_size
    browser_only = [i for i, fn in page.fns.items() if fn.fn is None]
    assert browser_only
    for index in browser_only:
        data = [page.values.get(i) for i in page.dependencies[index]["inputs"]]
        answers = world.answers(index, [(data, None), ([], None), ([*data, "one more"], None)])
        assert [(a.get("success"), a["output"].get("error")) for a in answers] == [
            (False, "This event runs in the browser only; nothing was run.")
        ] * 3, index
    # each takes a body naming an event's index
    routes = ("queue/join", "run/predict", "api/predict", "call/admin_coverage", "call/v2/admin_coverage")
    for (index, named), route in itertools.product(((99999, 99999), (-1, -1), ("99999", 99999)), routes):
        assert named not in page.fns  # Gradio reads "99999" as 99999
        joined = httpx.post(
            f"{world.url}gradio_api/{route}",
            json={"data": [], "fn_index": index, "session_hash": "aaaaaaaaaaa"},
        )
        assert (joined.status_code, joined.text) == (
            422,
            f"No event {named} on this page; nothing was run.",
        ), route
    # A call of a name no endpoint has: a 500 and a 5.5 kB traceback per call, no session
    # needed (outside probe 122); a private function is no endpoint of /call/v2.
    private = next(fn.api_name for fn in page.fns.values() if fn.api_name and fn.api_visibility == "private")
    for route in ("call/predict", "call/v2/predict", "run/predict", "api/predict", f"call/v2/{private}"):
        called = httpx.post(f"{world.url}gradio_api/{route}", json={"data": []})
        name = route.rsplit("/", 1)[1]
        assert (called.status_code, called.text) == (
            422,
            f"No endpoint named '{name}' on this page; nothing was run.",
        ), route
    # /call/v2 takes any JSON object and looks the name up whatever the body says.
    called = httpx.post(f"{world.url}gradio_api/call/v2/predict", json={"x": 1})
    assert (called.status_code, called.text) == (
        422,
        "No endpoint named 'predict' on this page; nothing was run.",
    )
    # A join with an empty session, and a /call/v2 body that is not the endpoint's parameters
    # by name: a 500 and a 5-7 kB traceback per call, no session needed (outside probe 129).
    for session in ("", "a b", "x" * 129, None):
        joined = httpx.post(
            f"{world.url}gradio_api/queue/join",
            json={"data": [None], "fn_index": min(page.fns), "session_hash": session},
        )
        assert (joined.status_code, joined.text) == (
            422,
            "`session_hash` must be 1 to 128 letters, digits, '-' or '_', "
            f"got {shown(session)}; nothing was run.",
        ), session
    refusals = {
        '{"data": ["x"]}': "'data' is not a parameter of admin_coverage; its parameters: session_token",
        '["x"]': "/call/v2/admin_coverage takes a JSON object of its parameters by name: session_token",
    }
    for body, refusal in refusals.items():
        called = httpx.post(
            f"{world.url}gradio_api/call/v2/admin_coverage",
            content=body.encode(),
            headers={"content-type": "application/json"},
        )
        assert (called.status_code, called.text) == (422, f"{refusal}; nothing was run."), body
    called = httpx.post(f"{world.url}gradio_api/call/v2/admin_coverage", json={"session_token": world.admin})
    assert called.status_code == 200 and called.json()["event_id"]
    # A parameter without a default left out, and a /call naming an empty session (outside probe 133).
    called = httpx.post(f"{world.url}gradio_api/call/v2/login_admin", json={})
    assert (called.status_code, called.text) == (
        422,
        "`password` of login_admin is missing; its parameters: password; nothing was run.",
    )
    for session in ("", "a/b"):
        called = httpx.post(
            f"{world.url}gradio_api/call/admin_coverage",
            json={"data": [world.admin], "session_hash": session},
        )
        assert (called.status_code, called.text) == (
            422,
            "`session_hash` must be 1 to 128 letters, digits, '-' or '_', "
            f"got {shown(session)}; nothing was run.",
        ), session
    # Gradio's direct routes run no queued event: a role refusal there was a 500, and a
    # designer's submissions ran past their concurrency limit (outside probe 129).
    before = world.state()
    for route in ("run", "api"):
        direct = httpx.post(f"{world.url}gradio_api/{route}/admin_backup", json={"data": [world.admin]})
        assert direct.status_code == 404 and "Please join the queue" in direct.text, route
    assert world.state() == before
    # What is not a join Gradio reads passes on, to Gradio's own refusal.
    assert httpx.post(f"{world.url}gradio_api/queue/join", content=b"{not json").status_code == 422
    # A results stream of a session with nothing waiting: Gradio's 404 came after its stream had
    # started, and logged a 6 kB traceback per request, no session needed (outside probe 96).
    for query in ("session_hash=nosuch1", "", "session_hash=a&session_hash=b"):
        stream = httpx.get(f"{world.url}gradio_api/queue/data?{query}")
        assert (stream.status_code, stream.text) == (
            404,
            "Nothing of this session is waiting: join the queue first.",
        ), query
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    assert "Traceback" not in world.log.read_bytes()[log_before:].decode("utf-8", "replace")


def test_malformed_requests_from_anyone_are_refused_in_one_line_without_a_traceback(world):
    """Each was a 500 (or a broken stream) and a 6-10 kB traceback in the log per request of
    under 100 bytes, no session needed (outside probe 134): a disk filler."""
    log_before = world.log.stat().st_size
    for route, body in (
        ("queue/join", '{"data": [""], "fn_index": NaN, "session_hash": "abcd1234"}'),
        ("queue/join", '{"data": [""], "fn_index": 2, "session_hash": "abcd1234", "trigger_id": 1e999}'),
        ("call/login_admin", '{"data": -Infinity}'),
        ("cancel", '{"session_hash": "abcd", "fn_index": NaN, "event_id": "x"}'),
    ):
        answer = httpx.post(
            f"{world.url}gradio_api/{route}",
            content=body.encode(),
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422 and answer.text.startswith("Not run: the body holds '"), (
            route,
            answer.text,
        )
        assert answer.text.endswith("which is no JSON number."), answer.text
    # A result stream of an event that never ran (or was read already).
    for path in ("call/login_admin/0123456789abcdef", "call/v2/designer_state/abc"):
        stream = httpx.get(f"{world.url}gradio_api/{path}")
        assert (stream.status_code, stream.text) == (
            404,
            "Nothing of this event is waiting: its result was read, or it never ran.",
        ), path
    # ... while one that ran streams its result once.
    event = httpx.post(f"{world.url}gradio_api/call/v2/admin_coverage", json={"session_token": world.admin})
    stream = httpx.get(
        f"{world.url}gradio_api/call/v2/admin_coverage/{event.json()['event_id']}", timeout=120
    )
    assert stream.status_code == 200 and "event: complete" in stream.text
    # An address Gradio cannot make the page's from, and a name no file system takes.
    for header, value in (
        ("x-forwarded-host", "a:b:c"),
        ("x-forwarded-host", "[::1"),
        ("x-gradio-server", "::"),
    ):
        for path in ("", "config"):
            answer = httpx.get(f"{world.url}{path}", headers={header: value})
            assert (answer.status_code, answer.text) == (
                400,
                f"Not answered: `{header.title()}` {shown(value)} is not an address.",
            ), (header, value, path)
    answer = httpx.get(f"{world.url}config?x={'a' * 20_000}")
    assert (answer.status_code, answer.text) == (414, "Not answered: this address is over 16 kB long.")
    for folder in ("assets", "static"):
        assert httpx.get(f"{world.url}{folder}/{'a' * 256}").status_code == 403
    assert httpx.get(f"{world.url}", headers={"x-forwarded-host": "example.org:8443"}).status_code == 200
    assert world.call("admin_coverage", world.admin)  # the app serves on; its log is written by now
    assert "Traceback" not in world.log.read_bytes()[log_before:].decode("utf-8", "replace")


def test_a_page_call_over_its_bound_is_refused_before_its_body_is_read(world):
    """A visitor with no session sent a 300 MB join of Gradio's queue: the guard read it all
    into memory, and the app held 1.3 GB after it (outside probe 120). Now a body over 1 MB
    (33 MB from a designer, whose coloring's canvas is one) is refused with 413, unread."""
    big = {"data": ["A" * (2 << 20)], "fn_index": 99999, "session_hash": "aaaaaaaaaaa"}
    for route in ("queue/join", "run/predict", "call/admin_coverage", "call/v2/admin_coverage", "cancel"):
        for token in (None, world.tokens["participant"], world.tokens["researcher"]):
            answer = httpx.post(
                f"{world.url}gradio_api/{route}",
                json=big,
                headers={"cookie": f"{COOKIE}={token}"} if token else {},
                timeout=120,
            )
            assert (answer.status_code, answer.text) == (
                413,
                "Too large: a call of this page's events carries at most 1 MB (a coloring's canvas, "
                "from a signed-in designer, more); nothing was run.",
            ), (route, token)
    # From a designer and the admin the same body is read, and the join refused for its index.
    for token in (world.tokens["designer"], world.admin):
        answer = httpx.post(
            f"{world.url}gradio_api/queue/join",
            json=big,
            headers={"cookie": f"{COOKIE}={token}"},
            timeout=120,
        )
        assert (answer.status_code, answer.text) == (422, "No event 99999 on this page; nothing was run.")
    # A declared length over the bound is answered before one byte of the body is sent.
    host, port = httpx.URL(world.url).host, httpx.URL(world.url).port
    with socket.create_connection((host, port), timeout=120) as raw:
        raw.sendall(
            b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 300000000\r\n\r\n"
        )
        head = raw.recv(4096)
    assert head.startswith(b"HTTP/1.1 413 ")
    assert world.call("admin_coverage", world.admin)  # the app serves on


def test_a_choice_a_handler_gave_this_session_is_taken_and_others_are_not():
    """Gradio reads a session's input with the component as the session's handlers updated
    it (new choices); the guard's own check of the choices must too."""
    from gradio.state_holder import SessionState

    with gr.Blocks() as demo:
        picker = gr.Dropdown(["a"], value="a", label="Run")
        picker.change(lambda v: v, picker, gr.Textbox())
    fn = demo.fns[0]
    state = SessionState(demo)
    assert guard.unchosen_input(fn, ["b"], state) == 0
    state[picker._id] = gr.Dropdown(["a", "b"], label="Run")  # as Gradio keeps a handler's update
    assert guard.unchosen_input(fn, ["b"], state) is None
    assert guard.unchosen_input(fn, ["b"], SessionState(demo)) == 0  # another session's
    assert guard.unchosen_input(fn, ["c"], state) == 0
    assert guard.unchosen_refusal(fn, 0, "c", state).startswith("`Run` must be one of 'a', 'b', got 'c'")


def test_the_page_config_carries_no_secret(world):
    config = httpx.get(world.url).text + httpx.get(f"{world.url}config").text
    db = open_db(world.config.db_path)
    try:
        secrets = [row[0] for row in db.execute("select value from settings")]
    finally:
        db.close()
    assert secrets and not any(len(s) >= 16 and s in config for s in secrets)
    assert ADMIN_PASSWORD not in config


def test_every_page_function_refuses_callers_without_its_role_and_writes_nothing(world):
    """Every dependency of the page by index, named or private, with no session and each
    wrong role: no row and no file changes, nobody is signed out; a sign-in function may only
    record the refused sign-in (an audit row), as it must."""
    page = world.page
    assert len(page.dependencies) == len(page.fns) > 100
    before = world.state()
    checked = 0
    for index, dependency in enumerate(page.dependencies):
        fn = page.fns[index].fn
        if fn is None:
            continue
        access: Access = fn.cc_access
        if access.kind == ROLE:
            callers = [None, "forged", world.revoked] + [
                world.tokens[r] for r in ROLES if r not in access.roles
            ]
        elif access.kind == PUBLIC:
            callers = [None]
        else:
            assert access.kind in (OWN_SESSION, UI)
            callers = [None, world.tokens["participant"]]
        calls = [
            ([token if i == page.token_box else page.values.get(i) for i in dependency["inputs"]], token)
            for token in callers
        ]
        assert "lost" not in world.run(index, calls)
        tables, files = world.state()
        name = (index, getattr(fn, "__qualname__", fn))
        if access.kind == PUBLIC:
            added = set(tables["audit"]) - set(before[0]["audit"])
            assert all("sign_in_failed" in row for row in added), name
            before = ({**before[0], "audit": tables["audit"]}, before[1])
        assert tables == before[0], name
        assert files == before[1], name
        checked += 1
    assert checked > 100  # the sessions table is part of every comparison: nobody was signed out


def test_the_page_names_no_file_so_none_is_served_to_anyone_for_being_in_it(world):
    """docs/security.md says so: the instruction examples, once in the page and so served to
    every visitor, are handed to designers at sign-in (outside probe 235 found the docs still
    calling them public)."""
    assert guard.page_files(page_config(world.url)) == set()


def test_docs_show_the_role_table_the_code_enforces():
    assert role_table_markdown() in DOCS.read_text(encoding="utf-8")


def test_a_page_function_without_an_access_mark_refuses_the_build(tmp_path):
    import gradio as gr

    from app.common import UnguardedFunction, audit_functions

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.change(lambda text: text.upper(), box, box, api_visibility="private")
    with pytest.raises(UnguardedFunction, match="lambda"):
        audit_functions(demo)


def _zip_of(entries: dict[str, bytes]) -> bytes:
    """A zip holding `entries` (name to bytes), as bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_the_record_of_issued_files_serves_each_file_to_its_viewer_and_stays_small():
    issued = guard.Issued(capacity=3)
    files = [Path(f"/tmp/gradio/{n:064x}/image.png") for n in range(4)]
    issued.add(files[0], "annotator:1")
    assert issued.holds(files[0], "annotator:1")
    assert not issued.holds(files[0], "annotator:2") and not issued.holds(files[1], "annotator:1")
    for file in files[1:3]:
        issued.add(file, "annotator:1")
    issued.add(files[0], "annotator:1")  # shown again: now the most recent
    issued.add(files[3], "annotator:1")  # over capacity: the oldest pair (files[1]) goes
    assert [issued.holds(f, "annotator:1") for f in files] == [True, False, True, True]
    assert len(issued) == 3

    # At the full capacity the record stays a bounded, small part of the app's memory
    # (as paths with sets of viewers it took 1.5 kB a pair: 307 MB at 200,000). Counted are
    # the blocks still held that were allocated in app/guard.py, in pathlib (a path kept
    # whole) or here: tracemalloc traces every thread, and the module's app server allocated
    # 18 MB beside the loop once (942 bytes "a pair").
    many = guard.Issued(capacity=20_000)
    tracemalloc.start()
    try:
        for n in range(30_000):
            many.add(Path(f"/tmp/gradio/{n:064x}/image.png"), f"annotator:{n % 50}")
        ours = [tracemalloc.Filter(True, name) for name in (guard.__file__, pathlib.__file__, __file__)]
        snapshot = tracemalloc.take_snapshot().filter_traces(ours)
    finally:
        tracemalloc.stop()
    held = sum(stat.size for stat in snapshot.statistics("filename"))
    assert len(many) == 20_000
    assert held / 20_000 < 300, f"{held / 20_000:.0f} bytes a pair"
