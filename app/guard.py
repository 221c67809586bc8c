"""The one guard in front of everything the app serves: an allow-list, deny by default.

Every HTTP request passes `Guard` before Gradio sees it. The guard finds the route the
request reaches exactly as the router will (each route's own ``matches``, on the decoded
path), looks the route's path template up in `ROUTES` and acts on its kind:

``page``      the page shell, its configuration and Gradio's queue and API endpoints:
              served to anyone (the functions they run check roles themselves, see
              `app.common.access` and `audit_functions`);
``package``   Gradio's own front-end files (``/assets``, ``/static``, ``/svelte``): served
              to anyone, never a path that climbs out (``..``) or is absolute;
``file``      a file named by its path (every shape Gradio has: ``/file=PATH``,
              ``/file/PATH``): `FilePolicy` decides, from the session cookie, by `DATA_RULES`;
              the files the page's scripts fetch (`shipped_files`) are served to anyone;
``upload``    signed-in roles that upload something (`UPLOAD_ROLES`), under Gradio's
              ``max_file_size`` (`app.launch_options`); what arrives is issued to its uploader;
              a file or an upload asked for by a page of another origin (``Sec-Fetch-Site``
              same-site or cross-site: the browser sends the cookie to another port of the
              host) is refused;
``progress``  the progress stream of an upload (``/upload_progress``): the roles that upload,
              refused like an upload from a page of another origin;
anything else refused (403), including every route a new Gradio adds until it is
              classified here, and a path with a NUL byte (400).

The guard answers two requests itself: `HEALTH` (``/healthz``: 200 once the app serves and can
take work, 503 before, and while its disk is full or its database takes no write:
`app.health`) and `SET_COOKIE` (the page's POST of its session token, which sets the
``HttpOnly`` cookie); and a request for a session's results stream
(`QUEUE_DATA`) while nothing of that session is waiting (404). It refuses a join of the queue, or a call
(`EVENT_CALLS`), that names an event index the app has none of (422: Gradio's refusal logged a traceback per call),
and a served file's answer carries the file's own headers only (`FILE_ANSWER_HEADERS`: Gradio
copied every header of a ``Range`` request into its answer).

Files in Gradio's own cache (what a handler returned as an image or file that does not
lie in a served folder) are served only to the person they were issued to: `Issued`
records, for every answer a function gives, the cache files in it and who asked
(`issue_outputs`); the instruction examples are among them, handed to designers at sign-in.
The files the page's configuration names are public (none is, now), and so are the files its scripts fetch (`shipped_files`: the coloring canvas's script and color
names table), each by its exact path, nothing else in their folder.

`role_table_markdown` renders `DATA_RULES` for docs/security.md, whose table a test
compares with it, so the code and the page cannot disagree.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import math
import re
import secrets
import shutil
import threading
import time
import urllib.parse
import zipfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import anyio
import gradio as gr
from gradio.data_classes import PredictBody
from gradio.utils import get_type_hints
from gradio_client import utils as client_utils

from annotation.coloring.fill import MAX_CANVAS_VALUE_CHARS
from annotation.coloring.store import owns_coloring_file, withdrawn_files
from annotation.errors import AnnotationError
from annotation.people.accounts import MAX_TOKEN_LENGTH, Actor, require
from app.coloring_canvas import served_files
from app.health import Health
from app.route_path import route_path
from storage import DatabaseMissing, private_folder
from storage.shown import shown

COOKIE = "cc_session"
SET_COOKIE = "/cc_session"
"""Answered by the guard itself (`session_cookie_answer`): a POST from the page's own origin
whose body is the tab's session token sets `COOKIE` (an empty body clears it). The cookie is
``HttpOnly``: no script reads it, not the page's, nor a page another program serves on
another port of the same host (cookies are the host's, whatever the port: outside probe 105
read an admin's cookie from a page on the next port and fetched the admin's downloads)."""
TAB_COOKIE = "cc_tab"
FRAMED_HEADER = "cc-framed"
"""Sent with the page's POST to `SET_COOKIE` when a page of another origin frames it."""
# The page keeps the cookie in step with its session: set on sign-in, cleared on sign-out.
# The cookie is the browser's, the session the tab's: a sign-in in another tab of the same
# browser replaced it, and this tab's downloads were refused (403) while its page still
# acted for its own session. So each tab puts its own session back as it is used (focus,
# a press of a key or pointer, before the link it follows) when the readable `TAB_COOKIE`
# (a random number naming the tab, no secret) says another tab put its own. The request
# is synchronous so that the cookie is set before the images and links that follow ask.
#
# Inside another site's frame (an MTurk HIT) a SameSite=Strict cookie is neither stored nor
# sent (outside probe 107: every image of a framed worker's trials was refused), so there the
# page asks (`FRAMED_HEADER`) for a cookie the browser keeps for this frame under that site
# only: ``SameSite=None; Secure; Partitioned`` (CHIPS).
COOKIE_JS = f"""(token) => {{
    const put = (value) => {{
        const x = new XMLHttpRequest();
        x.open('POST', '{SET_COOKIE[1:]}', false);
        if (window.ccFramed) x.setRequestHeader('{FRAMED_HEADER}', '1');
        try {{ x.send(value || ''); }} catch (e) {{ return; }}  // the server is away: the next use tries again
        document.cookie = '{TAB_COOKIE}=' + window.ccTab + '; path=/; '
            + (window.ccFramed ? 'SameSite=None; Secure; Partitioned' : 'SameSite=Strict');
    }};
    window.ccTab ||= Math.random();
    // A page of another origin above this one: reading its address throws.
    window.ccFramed ??= (() => {{ try {{ return window.top !== window && !window.top.location.href; }} catch (e) {{ return true; }} }})();
    window.ccSession = token;
    put(token);
    if (!window.ccSessionKept) {{
        window.ccSessionKept = true;
        const keep = () => document.cookie.split('; ').includes('{TAB_COOKIE}=' + window.ccTab) || put(window.ccSession);
        window.addEventListener('focus', keep);
        document.addEventListener('visibilitychange', () => {{ if (!document.hidden) keep(); }});
        document.addEventListener('pointerdown', keep, true);
        document.addEventListener('keydown', keep, true);
    }}
    return [];
}}"""
_TOKEN_TEXT = re.compile(rb"[A-Za-z0-9_-]{0,%d}" % MAX_TOKEN_LENGTH)


def session_cookie_answer(
    method: str, fetch_site: str | None, secure: bool, body: bytes, framed: bool = False
) -> tuple[int, str, list]:
    """The guard's answer to a request for `SET_COOKIE`: ``(status, text, headers)``.

    Only a POST from the page itself (a browser's ``Sec-Fetch-Site: same-origin``; a
    client that sends no such header is not a browser, and sets its cookies as it likes)
    whose body is a session token's text (URL-safe base64, at most `MAX_TOKEN_LENGTH`
    characters) or nothing sets the cookie; the token is checked where the cookie is read.

    The cookie is ``SameSite=Strict``; for a page in another site's frame (`framed`, the
    page's `FRAMED_HEADER`) ``SameSite=None; Secure; Partitioned``: kept for that frame under
    that top site only, and only over HTTPS (or on the machine's own address, which a
    browser counts as secure). Only the page's own sites may frame it (``frame-ancestors``).
    """
    if method != "POST":
        return 405, "Send the session token with POST.", []
    if fetch_site not in (None, "same-origin"):
        return 403, "Not allowed: only this app's own page sets its session cookie.", []
    if not _TOKEN_TEXT.fullmatch(body):
        return (
            400,
            f"The body must be a session token (at most {MAX_TOKEN_LENGTH} letters, digits, '-' or '_') "
            "or nothing.",
            [],
        )
    if framed:
        attributes = "; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
    else:
        attributes = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    value = f"{COOKIE}={body.decode()}" if body else f"{COOKIE}=; Max-Age=0"
    return 200, "", [(b"set-cookie", (value + attributes).encode()), (b"cache-control", b"no-store")]


@dataclass(frozen=True)
class DataRule:
    """Who may read the files under one folder of the data folder.

    Attributes
    ----------
    roles : frozenset of str
        Roles that may (the admin always may).
    owner : bool
        Whether the designer who made a coloring may read its files as well.
    shown : frozenset of str
        Roles that may read only the files the app handed to them in a page's answer (a
        participant: the colorings and model images of their trials; `FilePolicy.issue`).
    what : str
        What the folder holds, for the docs.
    """

    roles: frozenset[str]
    what: str
    suffixes: frozenset[str]
    owner: bool = False
    shown: frozenset[str] = frozenset()


ADMIN_ONLY = frozenset()
_PNG = frozenset({".png"})
DATA_RULES: dict[str, DataRule] = {
    "colorings": DataRule(
        frozenset({"expert", "researcher"}),
        "colorings and their masks (participants judge against them)",
        _PNG,
        owner=True,
        shown=frozenset({"participant"}),
    ),
    "sketches": DataRule(frozenset({"designer", "expert", "researcher"}), "line art", _PNG),
    "runs": DataRule(
        frozenset({"researcher"}), "model images, masks and pixel summaries", frozenset({".png", ".npz"})
    ),
    # A run's path names the run, often after its model: a participant's trial shows copies
    # named by their content alone (`annotation.files.neutral_copy`; outside probe 171).
    "trials": DataRule(
        ADMIN_ONLY,
        "model images under names of their content alone, as participants' trials show them",
        _PNG,
        shown=frozenset({"participant"}),
    ),
    "exports": DataRule(
        frozenset({"researcher"}),
        "exports, tables and figures",
        # No zip: the Admin tab's export zip (every table) goes among the admin's downloads,
        # and one older code left here is served to nobody.
        frozenset({".csv", ".json", ".parquet", ".txt", ".md", ".html", ".svg", ".png"}),
    ),
    "downloads/backups": DataRule(ADMIN_ONLY, "backup zips (the whole database)", frozenset({".zip"})),
    "downloads/exports": DataRule(
        ADMIN_ONLY,
        "the Admin tab's export zips (every table less the settings, the token hashes and the pixel samples; platform ids when asked)",
        frozenset({".zip"}),
    ),
    "downloads/invites": DataRule(ADMIN_ONLY, "invite links as CSV", frozenset({".csv"})),
}
"""Folder (relative to the data folder) → who may read it, and the kinds of file (suffixes,
lower case) the app writes there; a file of any other kind is served to nobody (a file put
there by hand or by a crafted backup: an HTML page would run on the app's origin).
Anything else under the data folder (the database, the password file, model weights,
imports) is served to nobody."""

SERVED_FOLDERS = tuple(sorted({rule.split("/")[0] for rule in DATA_RULES}))
"""The data folder's folders given to Gradio as static paths (files in them are served in
place, not copied to Gradio's cache, so the guard knows what each one is)."""

DOWNLOADS = "downloads"
DOWNLOAD_KEEP_S = 3600.0
"""Seconds a download (backup zip, export zip, invites CSV) stays on disk before the next one
of its kind removes it."""
UPLOAD_ROLES = frozenset({"researcher"})
"""Who may upload (besides the admin): researchers import model images as a zip."""
EVENT_BODY_BYTES = 1 << 20
"""The largest body of a page event's call (a queue join) from anyone: every text field is
bounded far below it. Read into memory before anything checks it, an unbounded body let a
visitor with no session make the server hold gigabytes (outside probe 120)."""
CANVAS_BODY_BYTES = MAX_CANVAS_VALUE_CHARS + EVENT_BODY_BYTES
"""The largest body from a signed-in designer or the admin, who submit a coloring's canvas
(`annotation.coloring.fill.MAX_CANVAS_VALUE_CHARS`; a flat-colored sketch's is tens of kB)."""
CANVAS_ROLES = frozenset({"designer"})

PAGE, PACKAGE, FILE, UPLOAD, PROGRESS = "page", "package", "file", "upload", "progress"
HEALTH = "/healthz"
"""Answered by the guard itself: 200 "ready" once the app serves (`app.mark_ready`) and can take
work (`app.health.Health`), else 503 "starting" or "cannot take work: <why>"."""
_API = "/gradio_api"
QUEUE_JOIN = _API + "/queue/join"
"""The route a page's events join Gradio's queue by, naming the event by its index."""
QUEUE_DATA = _API + "/queue/data"
"""The stream of a session's results: answered 404 by the guard while nothing of the session is
waiting (Gradio's own 404 came after its stream had started, with a 6 kB traceback in the log
per request, no session needed: outside probe 96)."""
EVENT_CALLS = frozenset(
    {
        QUEUE_JOIN,
        *(
            _API + path
            for path in (
                "/run/{api_name}",
                "/run/{api_name}/",
                "/api/{api_name}",
                "/api/{api_name}/",
                "/call/{api_name}",
                "/call/{api_name}/",
                "/call/v2/{api_name}",
                "/call/v2/{api_name}/",
            )
        ),
    }
)
"""The routes whose body may name an event by its index (`Guard` refuses an index no event has)."""
CALL_V2 = _API + "/call/v2/"
EVENT_STREAMS = frozenset({_API + "/call/{api_name}/{event_id}", _API + "/call/v2/{api_name}/{event_id}"})
"""The routes that stream one event's results (`Guard` answers 404 where nothing of it waits)."""
ROUTES: dict[str, str] = {
    "/": PAGE,
    "/config": PAGE,
    "/config/": PAGE,
    "/theme.css": PAGE,
    "/favicon.ico": PAGE,
    "/manifest.json": PAGE,
    "/robots.txt": PAGE,
    "/pwa_icon": PAGE,
    "/pwa_icon/{size}": PAGE,
    "/assets/{path:path}": PACKAGE,
    "/static/{path:path}": PACKAGE,
    "/svelte/{path:path}": PACKAGE,
    **{
        _API + path: PAGE
        for path in (
            "/info",
            "/info/",
            "/app_id",
            "/app_id/",
            "/theme.css",
            "/startup-events",
            "/heartbeat/{session_hash}",
            "/queue/join",
            "/queue/data",
            "/queue/status",
            "/cancel",
            "/call/{api_name}",
            "/call/{api_name}/",
            "/call/{api_name}/{event_id}",
            "/call/v2/{api_name}",
            "/call/v2/{api_name}/",
            "/call/v2/{api_name}/{event_id}",
            "/run/{api_name}",
            "/run/{api_name}/",
            "/api/{api_name}",
            "/api/{api_name}/",
        )
    },
    _API + "/file={path_or_url:path}": FILE,
    _API + "/file/{path:path}": FILE,
    _API + "/upload": UPLOAD,
    _API + "/upload_progress": PROGRESS,
}
"""Every route the app answers, by its path template. A route not named here is refused:
Gradio's login, monitoring, proxy, streams, custom components, component server, run
history, recording and vibe-editing routes, and whatever a later Gradio adds."""


def app_routes(app) -> list:
    """Every route of a Starlette/FastAPI `app`, included routers flattened, in order."""
    found: list = []

    def walk(routes: Iterable) -> None:
        for route in routes:
            if hasattr(route, "effective_candidates"):  # FastAPI's included router
                walk(route.effective_candidates())
                walk(route.effective_low_priority_routes())
            else:
                found.append(route)

    walk(app.router.routes)
    return found


def route_of(app, scope) -> tuple[object | None, dict]:
    """The route a request reaches and its path parameters, as the router decides (the
    first full match; else the first partial one, e.g. a wrong method); ``(None, {})``."""
    from starlette.routing import Match

    partial = None
    for route in app_routes(app):
        match, child = route.matches(scope)
        if match == Match.FULL:
            return route, child.get("path_params", {})
        if match == Match.PARTIAL and partial is None:
            partial = (route, child.get("path_params", {}))
    return partial or (None, {})


def unclassified(app) -> list[str]:
    """The path templates of `app`'s routes that `ROUTES` does not name (refused)."""
    return sorted({route.path for route in app_routes(app) if getattr(route, "path", None) not in ROUTES})


class Issued:
    """Which files in Gradio's cache were handed to whom (``viewer`` keys), the most recent
    `capacity` (file, viewer) pairs; a file not here is served to nobody.

    Each pair is kept as a 16-byte digest (about 150 bytes a pair, 31 MB at capacity): as
    paths and sets of viewers they took 1.5 kB a pair, 307 MB at capacity, a store that
    grew with every file shown for as long as the app ran.
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._pairs: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(path: Path, viewer: str) -> bytes:
        return hashlib.blake2b(f"{viewer}\0{path}".encode(errors="surrogatepass"), digest_size=16).digest()

    def add(self, path: Path, viewer: str) -> None:
        key = self._key(path, viewer)
        with self._lock:
            self._pairs[key] = None
            self._pairs.move_to_end(key)
            while len(self._pairs) > self.capacity:
                self._pairs.popitem(last=False)

    def holds(self, path: Path, viewer: str) -> bool:
        key = self._key(path, viewer)
        with self._lock:
            return key in self._pairs

    def __len__(self) -> int:
        return len(self._pairs)


def file_paths(value) -> Iterator[str]:
    """Every ``"path"`` of a file in `value` (Gradio's FileData dicts, at any depth): in a
    function's answer, or in the inputs of a call."""
    if isinstance(value, dict):
        if isinstance(value.get("path"), str):
            yield value["path"]
        for item in value.values():
            yield from file_paths(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from file_paths(item)


class FilePolicy:
    """Decides, for the holder of a session token (or nobody), whether a file may be served.

    Parameters
    ----------
    ctx : app.common.AppContext
    gradio_folders : iterable of path
        Gradio's cache and upload folders.
    public : iterable of Path
        Files the page is built with (resolved), served to anyone.
    """

    def __init__(self, ctx, *, gradio_folders: Iterable[str | Path], public: Iterable[Path] = ()) -> None:
        self.ctx = ctx
        self.data_dir = Path(ctx.config.data_dir).resolve()
        self.gradio_folders = [Path(f).resolve() for f in gradio_folders]
        self.public = set(public)
        self.issued = Issued()

    def actor(self, token: str | None) -> Actor | None:
        """The person of a session token, checked now (a revoked session is nobody)."""
        if not token:
            return None
        try:
            with self.ctx.db() as db:
                return require(db, token)
        except (AnnotationError, ValueError, DatabaseMissing):  # nobody: nothing is served
            return None

    def allows(self, file: str, token: str | None) -> bool:
        """Whether the holder of session `token` may fetch `file` (as the route names it)."""
        path = resolved(file)
        if path is None:
            return False
        if path in shipped_files():
            return True
        if path.is_relative_to(self.data_dir):
            return self._data_file(path.relative_to(self.data_dir), self.actor(token))
        if self.in_gradio_folders(path):
            if path in self.public:
                return True
            actor = self.actor(token)
            return actor is not None and self.issued.holds(path, viewer(actor))
        return False

    def unreadable_input(self, inputs: list, token: str | None) -> int | None:
        """The position of the first of a call's `inputs` that names a file (a dict with a
        ``"path"``, at any depth) the holder of session `token` may not fetch, or None."""
        for position, value in enumerate(inputs or []):
            if any(not self.allows(file, token) for file in file_paths(value)):
                return position
        return None

    def in_gradio_folders(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.gradio_folders)

    def issue(self, paths: Iterable[str], actor: Actor | None) -> None:
        """Record that the files at `paths` went to `actor`: those in Gradio's folders, and
        those of the data folder whose rule serves a role of `actor` only what was shown."""
        if actor is None:
            return
        for file in paths:
            path = resolved(file)
            if path is not None and (self.in_gradio_folders(path) or self._shown_only(path, actor)):
                self.issued.add(path, viewer(actor))

    def _shown_only(self, path: Path, actor: Actor) -> bool:
        rule = data_rule(path.relative_to(self.data_dir)) if path.is_relative_to(self.data_dir) else None
        return rule is not None and bool(actor.roles & rule.shown)

    def _data_file(self, relative: Path, actor: Actor | None) -> bool:
        rule = data_rule(relative)
        if actor is None or rule is None or relative.suffix.lower() not in rule.suffixes:
            return False
        if not (
            actor.is_admin
            or actor.roles & rule.roles
            or rule.owner
            and "designer" in actor.roles
            and self._own_coloring_file(actor, relative.as_posix())
            # A participant's trials show a few colorings and model images: those, not every
            # file whose name one learns (a path is not a secret).
            or actor.roles & rule.shown
            and self.issued.holds(self.data_dir / relative, viewer(actor))
        ):
            return False
        if rule.owner and not actor.is_admin and self._withdrawn_to(actor, relative.as_posix()):
            return False
        return content_matches(self.data_dir / relative)

    def _own_coloring_file(self, actor: Actor, relative: str) -> bool:
        with self.ctx.db() as db:
            return owns_coloring_file(db, actor.annotator_id, relative)

    def _withdrawn_to(self, actor: Actor, relative: str) -> bool:
        """Whether a coloring file is withdrawn for `actor`: withdrawn (its designer asked),
        and not theirs. The views stopped showing such a coloring; its address, learnt
        before, served it still (the admin, who withdrew it, sees it)."""
        with self.ctx.db() as db:
            return relative in withdrawn_files(db, [relative]) and not (
                "designer" in actor.roles and owns_coloring_file(db, actor.annotator_id, relative)
            )


# What the app's files of each kind start with; a text kind holds no NUL byte.
_MAGIC = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".zip": (b"PK\x03\x04", b"PK\x05\x06"),
    ".npz": (b"PK\x03\x04", b"PK\x05\x06"),
    ".parquet": (b"PAR1",),
}
_SNIFF_BYTES = 8192


def content_matches(path: Path) -> bool:
    """Whether the file at `path` is what its suffix says, as the app writes that kind: the
    signature of a PNG or Parquet file; a zip of ``.npy`` arrays alone for ``.npz``; no NUL byte in the first 8 kB of a
    text kind (CSV, JSON, HTML, SVG, Markdown, text). A database or another binary file
    renamed to a served kind is then served to nobody; an unreadable file neither."""
    try:
        with open(path, "rb") as file:
            head = file.read(_SNIFF_BYTES)
    except OSError:
        return False
    suffix = path.suffix.lower()
    signatures = _MAGIC.get(suffix)
    if signatures is None:
        return b"\x00" not in head
    if suffix == ".npz":  # numpy's zip of arrays: every entry an .npy (an export zip has CSVs)
        return head.startswith(signatures) and _arrays_only(path)
    return head.startswith(signatures)


def _arrays_only(path: Path) -> bool:
    """Whether the zip at `path` holds ``.npy`` entries alone (at least one)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return bool(names) and all(name.endswith(".npy") for name in names)


def data_rule(relative: Path | PurePosixPath) -> DataRule | None:
    """The rule of the deepest `DATA_RULES` folder holding `relative` (a file's path under
    the data folder), or None: served to nobody."""
    parts = PurePosixPath(Path(relative).as_posix()).parts
    for depth in range(len(parts) - 1, 0, -1):
        rule = DATA_RULES.get("/".join(parts[:depth]))
        if rule is not None:
            return rule
    return None


def exports_folder(data_dir: str | Path, *parts: str) -> Path:
    """The folder `parts` under the data folder's ``exports/``, which is kept readable by the
    server's account alone (0700, `storage.private_folder`): the crowd payment files there
    name every worker's platform id. The folder `parts` names is not made here."""
    return private_folder(Path(data_dir) / "exports").joinpath(*parts)


#: The kinds of download (`download_path`): ``backups``, ``exports``, ``invites``.
DOWNLOAD_KINDS = tuple(k.split("/")[1] for k in DATA_RULES if k.startswith(f"{DOWNLOADS}/"))


def prune_downloads(
    data_dir: str | Path, kinds: tuple[str, ...] = DOWNLOAD_KINDS, *, now: float | None = None
) -> int:
    """Remove the download folders of `kinds` older than `DOWNLOAD_KEEP_S` (a backup holds
    every hash, an invite list working links: neither stays for long); how many. Called
    when the next of a kind is made and at the app's start."""
    now = time.time() if now is None else now
    removed = 0
    for kind in kinds:
        root = Path(data_dir) / DOWNLOADS / kind
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            if folder.is_dir() and now - folder.stat().st_mtime > DOWNLOAD_KEEP_S:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
    return removed


def download_path(data_dir: str | Path, kind: str, name: str, *, now: float | None = None) -> Path:
    """Where a download of `kind` (``"backups"``, ``"exports"`` or ``"invites"``) named `name`
    is written.

    Under ``downloads/<kind>/<random>/`` in the data folder (each folder mode 0700), served
    in place to whom `DATA_RULES` names (the admin); folders of that kind older than
    `DOWNLOAD_KEEP_S` are removed first, so nothing piles up.
    """
    if f"{DOWNLOADS}/{kind}" not in DATA_RULES:
        raise ValueError(
            f"`kind` must be one of {[k.split('/')[1] for k in DATA_RULES if '/' in k]}, got {shown(kind)}"
        )
    root = Path(data_dir) / DOWNLOADS / kind
    prune_downloads(data_dir, (kind,), now=now)
    folder = root / secrets.token_hex(16)
    # Readable by the server's account alone, as the database is: a backup holds every
    # hash, an invite list working links (folders made by older code are closed too).
    for made in (root.parent, root, folder):
        private_folder(made)
    return folder / name


@contextlib.contextmanager
def removed_if_refused(folder: Path) -> Iterator[Path]:
    """`folder`, a new one the block writes in; when the block raises (a full disk), the
    folder and what it holds are removed again, so a refused download leaves nothing."""
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


@contextlib.contextmanager
def new_download(data_dir: str | Path, kind: str, name: str) -> Iterator[Path]:
    """`download_path` for a file the block writes, its new folder `removed_if_refused`."""
    path = download_path(data_dir, kind, name)
    with removed_if_refused(path.parent):
        yield path


def viewer(actor: Actor) -> str:
    """The key a cache file is issued under: the person (any of their sessions)."""
    return "admin" if actor.is_admin else f"annotator:{actor.annotator_id}"


def resolved(file: str) -> Path | None:
    """`file` as an absolute, resolved path, or None when it cannot name a file here."""
    if not file or "\x00" in file:
        return None
    path = Path(file)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        return path.resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def shipped_files() -> frozenset[Path]:
    """The fixed, public files the page's scripts fetch, resolved: the coloring canvas's
    script and color names table, content-hashed (`app.coloring_canvas.served_files`, which
    writes one again if it was removed)."""
    return frozenset(served_files().values())


def page_files(config: dict) -> set[Path]:
    """Every file path in a Blocks config: the files the page is built with."""
    return {p for p in (resolved(f) for f in file_paths(config.get("components", []))) if p is not None}


class Guard:
    """ASGI middleware: every request is classified by `ROUTES` and checked, else refused.

    Parameters
    ----------
    app : ASGI app
        The rest of the middleware stack.
    policy : FilePolicy
    """

    def __init__(
        self, app, policy: FilePolicy, ready: threading.Event | None = None, health: Health | None = None
    ) -> None:
        self.app = app
        self.policy = policy
        self.ready = ready or threading.Event()
        self.health = health

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            # No route of the app takes a websocket: refuse every one, unclassified as it is.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        if "\x00" in scope.get("path", ""):
            await _answer(send, 400, "A path with a NUL byte names no file.")
            return
        if problem := address_problem(scope):
            await _answer(send, 414 if "long" in problem else 400, f"Not answered: {problem}.")
            return
        path = route_path(scope)
        if path == HEALTH:
            if not self.ready.is_set():
                await _answer(send, 503, "starting")
                return
            problem = self.health and await anyio.to_thread.run_sync(self.health.problem)
            await _answer(
                send, 503 if problem else 200, f"cannot take work: {problem}" if problem else "ready"
            )
            return
        if path == SET_COOKIE:
            _, body = await _request_body(receive, limit=1024)
            status, text, headers = session_cookie_answer(
                scope.get("method", ""),
                _header(scope, b"sec-fetch-site"),
                scope.get("scheme") == "https",
                body,
                framed=_header(scope, FRAMED_HEADER.encode()) == "1",
            )
            await _answer(send, status, text, headers)
            return
        route, params = route_of(scope["app"], scope)
        kind = ROUTES.get(getattr(route, "path", None)) if route is not None else None
        sessions = _session_values(scope)
        token = one_session(sessions)
        if len(sessions) > 1:
            # Another page of this host added a cookie of the app's name: nobody is signed in
            # by it, and the answer removes it (`one_session`).
            raw = scope.get("raw_path") or scope.get("path", "/").encode()
            send = _with_headers(send, shadow_expiries(raw.decode("latin-1")))
        if len(sessions) > 1 and kind in (FILE, UPLOAD, PROGRESS):
            await _answer(
                send,
                403,
                "Not allowed: this request carried two session cookies, one of them set by another page "
                "of this host; it is removed now: reload the page (or clear this site's cookies).",
            )
        elif kind == PAGE and scope.get("method") not in ("GET", "HEAD"):
            await self._page_call(scope, receive, send, token, route.path, params.get("api_name"))
        elif kind == PAGE and route.path == QUEUE_DATA and not _waiting(scope):
            await _answer(send, 404, "Nothing of this session is waiting: join the queue first.")
        elif (
            kind == PAGE
            and route.path in EVENT_STREAMS
            and not _event_waiting(scope, params.get("event_id", ""))
        ):
            # Gradio's 404 came after its stream had started: a 6 kB traceback per request (outside probe 134).
            await _answer(
                send, 404, "Nothing of this event is waiting: its result was read, or it never ran."
            )
        elif kind == PAGE or kind == PACKAGE and _inside(params):
            await self.app(scope, receive, send)
        elif kind in (FILE, UPLOAD, PROGRESS) and _header(scope, b"sec-fetch-site") in (
            "same-site",
            "cross-site",
        ):
            # A page of another origin (another port of this host is the same site) has the
            # browser send the cookie along: neither its files nor uploads are for it.
            await _answer(send, 403, "Not allowed: only this app's own page fetches its files and uploads.")
        elif kind == FILE:
            file = next(iter(params.values()), "")
            if await anyio.to_thread.run_sync(self.policy.allows, file, token):
                await self.app(scope, receive, _file_headers_only(_with_headers(send, FILE_HEADERS), scope))
            else:
                # One answer whether the file is there or not (a missing one would tell who may
                # not see it that it exists); it names both (outside probe 219: the admin's pruned
                # backup read as a role they lacked).
                await _answer(send, 403, FILE_REFUSED)
        elif kind in (UPLOAD, PROGRESS):
            actor = await anyio.to_thread.run_sync(self.policy.actor, token)
            if actor is not None and (actor.is_admin or actor.roles & UPLOAD_ROLES):
                await self.app(scope, receive, self._issuing(send, actor) if kind == UPLOAD else send)
            else:
                await _answer(
                    send, 403, "Not allowed: only signed-in researchers and the admin upload files."
                )
        elif route is None:
            await _answer(send, 404, "Not found.")
        else:
            await _answer(send, 403, "Not allowed: this address is switched off in this app.")

    async def _page_call(
        self, scope, receive, send, token: str | None, path: str, api_name: str | None
    ) -> None:
        """Pass a call of the page's routes with a body (a join of Gradio's queue, a call, a
        cancel) on, its body read here and handed on as it came; answer one over
        `EVENT_BODY_BYTES` (`CANVAS_BODY_BYTES` from a designer or the admin) with 413, having
        read no more of it than that, and without the app (whose refusal was a 500 and a
        traceback in the log per call) one naming an event index the app has no event of, or
        an `api_name` no endpoint has, with 422."""
        declared = _header(scope, b"content-length")
        size = int(declared) if declared is not None and declared.isdigit() else None
        limit = EVENT_BODY_BYTES
        if size is None or size > limit:
            actor = await anyio.to_thread.run_sync(self.policy.actor, token)
            if actor is not None and (actor.is_admin or actor.roles & CANVAS_ROLES):
                limit = CANVAS_BODY_BYTES
        if size is not None and size > limit:
            await _answer(send, 413, _too_large(limit))
            return
        messages, body = await _request_body(receive, limit=limit)
        if len(body) > limit:
            await _answer(send, 413, _too_large(limit))
            return
        fns = scope["app"].get_blocks().fns
        call, not_finite = read_call(body)
        index = event_index(call)
        if path in EVENT_CALLS and index is not None and index is not UNREADABLE and index not in fns:
            await _answer(send, 422, f"No event {index} on this page; nothing was run.")
            return
        # Gradio finds the function by name where the body names no index; /call/v2 always
        # does, among the API's named endpoints.
        v2 = path.startswith(CALL_V2)
        by_name = v2 or index is None or index is UNREADABLE
        if api_name is not None and by_name and not names_endpoint(api_name, fns, public=v2):
            await _answer(send, 422, f"No endpoint named {shown(api_name)} on this page; nothing was run.")
            return
        # Gradio answered these with a 500 and a traceback in the log per call (outside probes 129, 134).
        if not_finite is not None:
            await _answer(send, 422, f"Not run: the body holds {shown(not_finite)}, which is no JSON number.")
            return
        # A call Gradio reads (an index not UNREADABLE) is a JSON object.
        if path == QUEUE_JOIN and index is not UNREADABLE:
            problem = session_hash_problem(call.get("session_hash"))
        elif path in EVENT_CALLS and index is not UNREADABLE and call.get("session_hash") is not None:
            # /call and /run mint a session where the body names none; one named must be one.
            problem = session_hash_problem(call["session_hash"])
        elif v2:
            problem = await anyio.to_thread.run_sync(_keywords_problem, scope["app"], api_name, call)
        else:
            problem = None
        if problem:
            await _answer(send, 422, f"{problem}; nothing was run.")
            return
        await self.app(scope, _replaying(messages, receive), send)

    def _issuing(self, send, actor: Actor):
        """`send`, recording the uploaded files (the JSON list Gradio answers) as the uploader's."""
        body = bytearray()

        async def sending(message) -> None:
            if message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError):  # not Gradio's list of paths: nothing to issue
                        self.policy.issue(uploaded_paths(json.loads(bytes(body))), actor)
            await send(message)

        return sending


SECURITY_HEADERS = (
    # A file is what its content type says: a browser never runs a served file as a page.
    (b"x-content-type-options", b"nosniff"),
    # Framed by the app itself and by MTurk's HIT pages (docs/crowd.md), nowhere else: no
    # other site can lay the admin's buttons under its own.
    (b"content-security-policy", b"frame-ancestors 'self' https://*.mturk.com"),
    # A link out (a crowd platform's return page) never carries this app's address.
    (b"referrer-policy", b"same-origin"),
)
"""Headers on every answer of the app (`Guard`)."""

FILE_REFUSED = (
    "Not allowed, or no such file: a file is served only to the people whose role allows it, and a "
    "download (a backup, an export, invite links) is removed an hour after it is made: make it again."
)
"""The answer to a file request the guard does not serve, whether the file exists or not."""

FILE_HEADERS = (
    # A served file opened as a page (an SVG or an HTML figure in exports/) runs in an origin
    # of its own: its scripts (a Plotly figure's) run, but cannot read this app's cookie or
    # storage, nor call it as the person who opened it. An image shown in the page ignores it.
    (b"content-security-policy", b"sandbox allow-scripts; frame-ancestors 'self' https://*.mturk.com"),
)
"""What every served file's answer says instead of `SECURITY_HEADERS`' policy."""


def _with_headers(send, headers=SECURITY_HEADERS):
    """`send`, adding `headers` (``(name, value)`` byte pairs) to the start of each answer
    where it does not name them already."""

    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            named = {key.lower() for key, _ in message.get("headers", ())}
            extra = [(key, value) for key, value in headers if key not in named]
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


def install_origin_rule() -> None:
    """Let Gradio's CORS middleware (outside the guard) allow a page of this app's own
    origin alone to read its answers (the whole process; idempotent).

    Gradio's rule allowed any page on ``localhost`` when the app runs there, whatever its
    port, and any page at all when it runs under another host name; a page of the same
    *site* (another port of the host, a sibling subdomain) has the browser send the
    ``SameSite=Strict`` cookie along, and could then read the files it fetched with it.
    """
    from gradio.route_utils import CustomCORSMiddleware

    def is_valid_origin(self, request_headers) -> bool:
        return same_origin(request_headers["origin"], request_headers.get("host", ""))

    CustomCORSMiddleware.is_valid_origin = is_valid_origin


def same_origin(origin: str, host: str) -> bool:
    """Whether a request's ``Origin`` header names the host and port of its ``Host``
    header (the scheme's default port where either names none); ``null`` names none."""
    try:
        named, asked = urllib.parse.urlsplit(origin), urllib.parse.urlsplit("//" + host)
        default = {"http": 80, "https": 443}.get(named.scheme)
        return bool(named.hostname) and (named.hostname, named.port or default) == (
            asked.hostname,
            asked.port or default,
        )
    except ValueError:  # a port out of range
        return False


FILE_ANSWER_HEADERS = frozenset(
    {
        b"content-type",
        b"content-length",
        b"content-range",
        b"accept-ranges",
        b"etag",
        b"last-modified",
        b"content-disposition",
    }
)
"""The headers a served file's answer may carry from Gradio (`_file_headers_only`); the
guard's own (`SECURITY_HEADERS`, `FILE_HEADERS`) are added after."""

# Names an answer has and a request never does: one the request carried with the same value
# is its echo, not the file's.
_ANSWER_ONLY = frozenset({b"etag", b"last-modified", b"accept-ranges"})


def _file_headers_only(send, scope):
    """`send`, keeping of each answer's headers only those in `FILE_ANSWER_HEADERS`, the
    last of each name, and none that echoes a header of the request in `scope`.

    Gradio answers a ``Range`` request for a file with every header of the request copied
    into the answer (its cookie, an ``Authorization``, a ``Cache-Control: public`` that a
    shared cache would obey, any header made up), and the request's content type before
    the file's own."""
    asked = {(key.lower(), value) for key, value in scope.get("headers", ()) if key.lower() in _ANSWER_ONLY}

    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            kept: dict[bytes, bytes] = {}
            for key, value in message.get("headers", ()):
                name = key.lower()
                if name in FILE_ANSWER_HEADERS and (name, value) not in asked:
                    kept[name] = value
            message = {**message, "headers": list(kept.items())}
        await send(message)

    return sending


def _too_large(limit: int) -> str:
    return (
        f"Too large: a call of this page's events carries at most {limit >> 20} MB"
        + ("" if limit > EVENT_BODY_BYTES else " (a coloring's canvas, from a signed-in designer, more)")
        + "; nothing was run."
    )


async def _request_body(receive, limit: int | None = None) -> tuple[list[dict], bytes]:
    """The request's messages read up to the end of its body (or a disconnect, or more than
    `limit` bytes read), with the body they carry."""
    messages, size = [], 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if (
            message["type"] != "http.request"
            or not message.get("more_body")
            or limit is not None
            and size > limit
        ):
            break
    return messages, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")


def _replaying(messages: list[dict], receive):
    """`receive`, handing out `messages` (read already) first."""
    pending = list(messages)

    async def receiving():
        return pending.pop(0) if pending else await receive()

    return receiving


UNREADABLE = object()
"""What `read_call` gives for a body that is no JSON, and `event_index` for a body Gradio cannot
read as a call (not JSON, no ``data``)."""


def read_call(body: bytes) -> tuple[object, str | None]:
    """A call's `body` read once for every check (it may be a designer's 33 MB canvas): its
    JSON value (`UNREADABLE` where it is no JSON), and the first ``NaN``, ``Infinity`` or number
    beyond float's range in it, as written, or None (Gradio's refusal quoted such a number and
    then failed to write it: a 500 and a 6.6 kB traceback per call, outside probe 134)."""
    found: list[str] = []

    def constant(text: str) -> float:
        found.append(text)
        return float(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            found.append(text)
        return value

    try:
        value = json.loads(body, parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError):
        return UNREADABLE, None
    return value, (found[0] if found else None)


def event_index(call: object) -> int | None | object:
    """The event index a call (its JSON value, `read_call`) names, None where it names none,
    or `UNREADABLE`.

    The call is read as Gradio reads it (its ``PredictBody``: ``"99999"`` is 99999); one it
    cannot read is left to Gradio's own refusal (422)."""
    if call is UNREADABLE:
        return UNREADABLE
    try:
        return PredictBody.model_validate(call).fn_index
    except (ValueError, RecursionError):  # not a join (pydantic's ValidationError)
        return UNREADABLE


#: What a page (10-11 letters and digits) or `gradio_client` (a UUID) names its session by.
SESSION_HASH = re.compile(r"[A-Za-z0-9_-]{1,128}")


def address_problem(scope) -> str | None:
    """Why Gradio cannot make the page's address of this request (`X-Forwarded-Host` or
    `X-Gradio-Server` not a host, or a URL longer than `URL_BYTES`), which made every page
    request with it a 500 and a 7 kB traceback (outside probe 134), or None."""
    raw = scope.get("raw_path") or scope.get("path", "").encode()
    if len(raw) + len(scope.get("query_string", b"")) > URL_BYTES:
        return f"this address is over {URL_BYTES // 1024} kB long"
    for header, form in ((b"x-forwarded-host", HOST), (b"x-gradio-server", SERVER)):
        value = _header(scope, header)
        # Gradio reads the first of a list, and makes an address of it (an httpx URL).
        if value and (first := value.split(",")[0].strip()) and not _address(form.fullmatch(first)):
            return f"`{header.decode().title()}` {shown(first)} is not an address"
    return None


def _address(match: re.Match | None) -> bool:
    """Whether `match` (of `HOST` or `SERVER`) is an address an httpx URL takes: a port up to
    65535, an IPv6 address in brackets and a host of digits and dots valid as written."""
    if match is None:
        return False
    host, port = match.group("host"), match.group("port")
    if port is not None and int(port) > 65535:
        return False
    try:
        if host.startswith("["):
            ipaddress.IPv6Address(host[1:-1])
        elif re.fullmatch(r"[0-9.]+", host):
            ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


#: A host and optional port, as `X-Forwarded-Host` gives it: a name or an IPv4 address, or an
#: IPv6 address in brackets.
HOST = re.compile(
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::(?P<port>\d{1,5}))?"
)
#: An address as `X-Gradio-Server` gives it.
SERVER = re.compile(rf"https?://{HOST.pattern}(?:/[!-~]*)?")


#: The longest address (path and query) the app answers, in bytes: its links are short.
URL_BYTES = 16 * 1024


def session_hash_problem(value) -> str | None:
    """Why `value` cannot name a session in a join of Gradio's queue (an empty one made
    Gradio's queue fail with a ``KeyError``), or None."""
    if isinstance(value, str) and SESSION_HASH.fullmatch(value):
        return None
    return f"`session_hash` must be 1 to 128 letters, digits, '-' or '_', got {shown(value)}"


def _keywords_problem(app, api_name: str, given: object) -> str | None:
    """Why `given` (a call's JSON value, `read_call`) is no call of the endpoint `api_name` by
    ``/call/v2`` (a JSON object of its parameters by name, each without a default given), or
    None."""
    info = app.api_info or app.get_blocks().get_api_info()
    parameters = info["named_endpoints"]["/" + api_name.strip("/")]["parameters"]
    names = [p.get("parameter_name") for p in parameters]
    if not isinstance(given, dict):
        return (
            f"/call/v2/{api_name} takes a JSON object of its parameters by name: {', '.join(map(str, names))}"
        )
    unknown = [key for key in given if key not in names and key != "oauth_token"]
    if unknown:
        return f"{shown(unknown[0])} is not a parameter of {api_name}; its parameters: {', '.join(map(str, names))}"
    required = [p.get("parameter_name") for p in parameters if not p.get("parameter_has_default")]
    if missing := [name for name in required if name not in given]:
        return f"`{missing[0]}` of {api_name} is missing; its parameters: {', '.join(map(str, names))}"
    return None


def names_endpoint(api_name: str, fns: dict, *, public: bool = False) -> bool:
    """Whether one of `fns` (the app's ``BlockFunction``s by index) is named `api_name`
    (`public`: among the API's named endpoints alone, as ``/call/v2`` looks them up)."""
    name = api_name.strip("/")
    return any(
        fn.api_name == name and (not public or getattr(fn, "api_visibility", "public") == "public")
        for fn in fns.values()
    )


def uploaded_paths(answer) -> list[str]:
    """The paths in Gradio's answer to an upload (a JSON list of paths), else none."""
    return [p for p in answer if isinstance(p, str)] if isinstance(answer, list) else []


def _inside(params: dict) -> bool:
    """Whether every path parameter stays inside its folder (relative, no ``..``)."""
    return all(
        not PurePosixPath(str(v)).is_absolute()
        and ".." not in PurePosixPath(str(v)).parts
        # A name longer than any file system takes made the file route raise (outside probe 134).
        and all(len(part.encode()) <= NAME_BYTES for part in PurePosixPath(str(v)).parts)
        for v in params.values()
    )


#: The longest file name a file system takes, in bytes.
NAME_BYTES = 255


def _event_waiting(scope, event_id: str) -> bool:
    """Whether the results stream of ``/call/{name}/{event_id}`` has anything waiting: its
    session found as Gradio finds it (the running event's, else the one whose finished events
    hold the id, else the id itself)."""
    queue = scope["app"].get_blocks()._queue
    event = queue.event_ids_to_events.get(event_id)
    session = (
        event.session_hash
        if event is not None
        else next((s for s, ids in queue.pending_event_ids_session.items() if event_id in ids), event_id)
    )
    return session in queue.pending_messages_per_session


def _waiting(scope) -> bool:
    """Whether the ``session_hash`` of a request for the results stream has any waiting."""
    hashes = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash", [])
    pending = scope["app"].get_blocks()._queue.pending_messages_per_session
    return len(hashes) == 1 and hashes[0] in pending


async def _answer(send, status: int, text: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Answer the request here, with `status`, plain `text` and `headers`, without the app."""
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope, name: bytes) -> str | None:
    """The request's header `name` (lower case), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def cookie_values(headers: Iterable[str], name: str = COOKIE) -> list[str]:
    """Every value the ``Cookie`` header(s) `headers` give `name`: a browser sends one per
    cookie of that name whose path the request's path lies under."""
    found = []
    for header in headers:
        for part in header.split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                found.append(urllib.parse.unquote(value))
    return found


def one_session(values: list[str]) -> str | None:
    """The session token of a request's `COOKIE` values (`cookie_values`), or None (nobody)
    where there are none or more than one.

    The app's cookie lies at ``/`` and no script may overwrite it (``HttpOnly``), but a page
    of another port of the host may add one of the same name at a longer path (outside probe
    106: ``path=/gradio_api``), which the browser sends first: the first one read as the
    session gave the admin's downloads and uploads to whoever planted theirs.
    """
    return values[0] or None if len(values) == 1 else None


def shadow_expiries(path: str) -> list[tuple[bytes, bytes]]:
    """``Set-Cookie`` headers that remove a `COOKIE` at each path a request for `path` was
    sent a cookie from, but ``/`` (the app's own): every prefix of `path` that ends at a
    ``/``, with and without it."""
    parts = path.split("/")[1:]
    paths = {"/" + "/".join(parts[:n]) + tail for n in range(1, len(parts) + 1) for tail in ("", "/")} - {"/"}
    return [
        (b"set-cookie", f"{COOKIE}=; Path={p}; Max-Age=0; SameSite=Strict".encode())
        for p in sorted(paths)
        if _COOKIE_PATH.fullmatch(p)  # never an attribute of its own from a crafted path
    ]


# Printable ASCII but space, '"', ',', ';' and backslash.
_COOKIE_PATH = re.compile(r"[!#-+\--:<-\[\]-~]+")


def _session_values(scope) -> list[str]:
    return cookie_values(
        value.decode("latin-1") for key, value in scope.get("headers", ()) if key == b"cookie"
    )


def unstorable_input(inputs: list) -> tuple[int, str] | None:
    """The position of the first of a call's `inputs` holding text that UTF-8 cannot encode
    (a lone surrogate, at any depth), with that character; or None."""
    for position, value in enumerate(inputs or []):
        char = _unencodable(value)
        if char is not None:
            return position, char
    return None


def unreadable_event_data(fn, event_data) -> str | None:
    """The kind of event (``select``) whose data a call of `fn` sent in a form that event
    never sends, or None. `event_data` is Gradio's ``EventData`` of the call, holding the
    body's ``event_data`` as it came; a function that takes the event's data (a
    ``gr.SelectData``) has it read before it runs, and Gradio's own reading of ``null`` or
    ``{}`` logged a traceback per call and answered an empty "Error", to any visitor
    (outside probe 178)."""
    if fn is None or fn.fn is None or not fn.collects_event_data:
        return None
    data = getattr(event_data, "_data", None)  # what Gradio itself reads (`gradio.helpers.special_args`)
    for hint in get_type_hints(fn.fn).values():
        if isinstance(hint, type) and issubclass(hint, gr.EventData):
            try:
                hint(None, data)
            except (TypeError, KeyError, AttributeError, IndexError, ValueError):
                return hint.__name__.removesuffix("Data").lower()
    return None


def misshapen_input(fn, inputs: list) -> int | None:
    """The position of the first of a call's `inputs` that its component's data model (a
    table's, a file's) does not take, or that is not of the kind its component takes
    (`takes_kind`), or None. Gradio checks the data model before the function, and its role
    check, runs, and logs a traceback per call that fails it; this is the same check of the
    shape, without the file checks Gradio adds. The kinds Gradio passes on as they came."""
    prop_inputs = set(getattr(fn, "component_prop_inputs", ()) or ())
    for position, (block, value) in enumerate(zip(getattr(fn, "inputs", None) or [], inputs or [])):
        if position not in prop_inputs and not takes_kind(block, value):
            return position
        model = getattr(block, "data_model", None)
        if model is None or value is None or getattr(block, "stateful", False) or position in prop_inputs:
            continue
        try:
            model.model_validate(value)
        except ValueError:  # pydantic's ValidationError
            return position
    return None


def takes_kind(block, value) -> bool:
    """Whether `value` is of the kind `block`'s component takes from a call: a Checkbox a
    boolean (never nothing: a page always sends one), a Textbox a text (or a number, as API
    clients send a seed), an HTML block a text, a list of choices a list, any but a Checkbox
    nothing (None).
    Gradio's reading passes other values through to the function: "apple" where a list of
    concepts goes reached it as five letters, "yes" or nothing for a Checkbox counted as
    unticked (an export was built)."""
    if isinstance(block, gr.Checkbox):
        return isinstance(value, bool)
    if value is None:
        return True
    if isinstance(block, gr.Textbox):
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if isinstance(block, gr.HTML):  # the coloring canvas's value is JSON text, never an object
        return isinstance(value, str)
    if isinstance(block, gr.CheckboxGroup) or (
        isinstance(block, gr.Dropdown) and getattr(block, "multiselect", False)
    ):
        return isinstance(value, list)
    return True


def mistyped_file(fn, inputs: list) -> tuple[int, str] | None:
    """The position and name of the first file of a call's `inputs` whose name is not of the
    types its File component takes (``file_types``), or None. Gradio refuses it itself, but
    naming no input, and logs a traceback per call."""
    for position, (block, value) in enumerate(zip(getattr(fn, "inputs", None) or [], inputs or [])):
        types = getattr(block, "file_types", None) if isinstance(block, gr.File) else None
        for path in file_paths(value) if types else ():
            if not client_utils.is_valid_file(path, types):
                return position, PurePosixPath(path).name
    return None


#: Components whose reading of a value checks it against their choices (or bounds): Gradio
#: refuses one outside them quoting the whole value, and logs a traceback, per call.
CHECKED_CHOICES = (gr.Radio, gr.Dropdown, gr.CheckboxGroup, gr.Number, gr.Slider)


def session_block(block, state):
    """`block` as this session holds it: a handler's update (new choices, say) makes Gradio
    keep a copy in the session's `state`, and read the session's inputs with that copy."""
    return state[block._id] if state is not None and block._id in state else block


def unchosen_input(fn, inputs: list, state=None) -> int | None:
    """The position of the first of a call's `inputs` outside its component's choices (or a
    number outside its bounds), or None: the component's own reading of it (its
    ``preprocess``, pure for these kinds, instance-patched ones too) is run here first.

    Gradio ran it before the function's role check, and its refusal quoted the value whole,
    to the caller and with a traceback to the log: an outside check grew the log by 5 MB
    with one call of a visitor. `state` is the session's (`session_block`): a dropdown whose
    choices a handler changed takes them."""
    if not getattr(fn, "preprocess", True):
        return None
    prop_inputs = set(getattr(fn, "component_prop_inputs", ()) or ())
    for position, (block, value) in enumerate(zip(getattr(fn, "inputs", None) or [], inputs or [])):
        if not isinstance(block, CHECKED_CHOICES) or position in prop_inputs:
            continue
        try:
            session_block(block, state).preprocess(value)
        except (gr.Error, TypeError, ValueError):
            return position
    return None


#: Choices a refusal lists; a longer list is counted, not listed.
LISTED_CHOICES = 12


def unchosen_refusal(fn, position: int, value, state=None) -> str:
    """What a caller is told of input `position` of `fn` that `unchosen_input` refused: the
    input's name, what it takes (the choices, or the number's bounds, as this session holds
    them) and what arrived, cut (`storage.shown.shown`)."""
    block = session_block(fn.inputs[position], state)
    name = input_name(fn, position)
    if isinstance(block, (gr.Number, gr.Slider)):
        low = "-inf" if block.minimum is None else f"{block.minimum:g}"
        high = "inf" if block.maximum is None else f"{block.maximum:g}"
        return f"{name} must be a number in [{low}, {high}], got {shown(value)}; nothing was changed."
    values = [choice[1] if isinstance(choice, (list, tuple)) else choice for choice in block.choices or ()]
    takes = (
        f"one of {', '.join(shown(v) for v in values)}"
        if len(values) <= LISTED_CHOICES
        else f"one of its {len(values):,} choices"
    )
    if isinstance(block, gr.CheckboxGroup) or getattr(block, "multiselect", False):
        takes = f"a list of choices, each {takes}"
    return f"{name} must be {takes}, got {shown(value)}; nothing was changed."


def _unencodable(value) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            return value[error.start]
        return None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, (list, tuple))
        else ()
    )
    for key, item in items:
        found = _unencodable(key) if isinstance(key, str) else None
        found = found or _unencodable(item)
        if found is not None:
            return found
    return None


def input_name(fn, position: int) -> str:
    """How a refusal names input `position` of Gradio function `fn` (a ``BlockFunction``):
    its component's label, else its element id, else its kind and position."""
    blocks = getattr(fn, "inputs", None) or []
    block = blocks[position] if position < len(blocks) else None
    name = getattr(block, "label", None) or getattr(block, "elem_id", None)
    return f"`{name}`" if name else f"input {position + 1} ({type(block).__name__ if block else 'unknown'})"


def request_cookie(request) -> str | None:
    """The session cookie of a Gradio request (a `gr.Request`, or a list of them): None for
    none, or more than one (`one_session`)."""
    if isinstance(request, list):
        request = request[0] if request else None
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    found = headers.getlist("cookie") if hasattr(headers, "getlist") else [headers.get("cookie") or ""]
    return one_session(cookie_values(found))


def role_table_markdown() -> str:
    """`DATA_RULES` as the Markdown table docs/security.md shows."""
    lines = [
        "| Folder under the data folder | What it holds | Files served | Who may fetch it |",
        "|---|---|---|---|",
    ]
    for folder, rule in DATA_RULES.items():
        who = sorted(rule.roles) + [f"{role} (what their page shows)" for role in sorted(rule.shown)]
        if rule.owner:
            who.insert(0, "the designer who made it")
        kinds = ", ".join(f"`{suffix}`" for suffix in sorted(rule.suffixes))
        lines.append(f"| `{folder}/` | {rule.what} | {kinds} | {', '.join([*who, 'admin'])} |")
    lines.append("| anything else | the database, password file, weights, imports | none | nobody |")
    return "\n".join(lines)
