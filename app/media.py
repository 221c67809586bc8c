"""Who may fetch which file: a role check in front of Gradio's file route.

Gradio serves a file to anyone who names its path (``/gradio_api/file=PATH``) when the
path lies under an allowed folder or Gradio's own cache and upload folders. Paths are
not secrets, so every such request passes `FileGuard` first: it reads the session from
the ``cc_session`` cookie (set by the page when the person signs in, cleared on sign-out)
and answers 403 unless the person's role may see that file:

==============  ===========================================================
``colorings/``  the designer who made it; experts, researchers, participants (who
                judge against designers' colorings) and the admin
``sketches/``   anyone signed in (line art, nobody's work)
``runs/``       researchers, participants (they judge model images), the admin
``exports/``    researchers and the admin
anything else   under the data folder: nobody (database, password file, model
                weights, imports, backups)
Gradio's cache  the admin and researchers (downloads and uploads), and anyone for the
and uploads     files the page itself was built with (the instruction examples)
anything else   nobody
==============  ===========================================================

Only `SERVED_FOLDERS` of the data folder are given to Gradio (as static paths, served in
place so that the guard sees what each file is), so a secret elsewhere under the data
folder is refused by Gradio itself too.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import anyio

from annotation.errors import AnnotationError
from annotation.people.accounts import Actor, require
from app.common import AppContext

COOKIE = "cc_session"
SERVED_FOLDERS = ("colorings", "sketches", "runs", "exports")
_ROLES_FOR = {
    "colorings": {"expert", "researcher", "participant"},
    "sketches": {"designer", "expert", "researcher", "participant"},
    "runs": {"researcher", "participant"},
    "exports": {"researcher"},
}
_CACHE_ROLES = {"researcher"}
_ACTOR_TTL_S = 5.0
# The page keeps the cookie in step with its session: set on sign-in, cleared on sign-out.
COOKIE_JS = f"""(token) => {{
    const secure = location.protocol === 'https:' ? '; Secure' : '';
    document.cookie = token
        ? '{COOKIE}=' + encodeURIComponent(token) + '; path=/; SameSite=Strict' + secure
        : '{COOKIE}=; path=/; max-age=0; SameSite=Strict' + secure;
    return [];
}}"""


def file_of(url_path: str) -> str | None:
    """The file a Gradio file-route path names (``.../file=PATH``), else None."""
    marker = "/file="
    at = url_path.find(marker)
    if at < 0 or not (url_path[:at] == "" or url_path[:at].endswith("/gradio_api")):
        return None
    return url_path[at + len(marker) :]


def page_files(config: dict) -> set[Path]:
    """Every file path in a Blocks config: the files the page is built with."""
    found: set[Path] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("path"), str):
                found.add(Path(value["path"]).resolve())
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(config.get("components", []))
    return found


class FilePolicy:
    """Decides, for a signed-in person (or nobody), whether a file may be served."""

    def __init__(
        self, ctx: AppContext, *, gradio_folders: Iterable[str | Path], public: Iterable[Path] = ()
    ) -> None:
        self.ctx = ctx
        self.data_dir = Path(ctx.config.data_dir).resolve()
        self.gradio_folders = [Path(f).resolve() for f in gradio_folders]
        self.public = set(public)
        self._actors: dict[str, tuple[float, Actor | None]] = {}

    def actor(self, token: str | None) -> Actor | None:
        """The person of a session token (cached a few seconds), or None."""
        if not token:
            return None
        cached = self._actors.get(token)
        if cached is not None and time.monotonic() - cached[0] < _ACTOR_TTL_S:
            return cached[1]
        try:
            with self.ctx.db() as db:
                actor = require(db, token)
        except AnnotationError:
            actor = None
        if len(self._actors) > 10_000:
            self._actors.clear()
        self._actors[token] = (time.monotonic(), actor)
        return actor

    def allows(self, file: str, token: str | None) -> bool:
        """Whether the person holding session `token` may fetch `file` (as the URL names it)."""
        path = Path(file)
        if not path.is_absolute():
            path = Path.cwd() / path
        path = path.resolve()
        if path.is_relative_to(self.data_dir):
            return self._data_file(path.relative_to(self.data_dir), self.actor(token))
        if any(path.is_relative_to(folder) for folder in self.gradio_folders):
            if path in self.public:
                return True
            actor = self.actor(token)
            return actor is not None and (actor.is_admin or bool(actor.roles & _CACHE_ROLES))
        return False

    def _data_file(self, relative: Path, actor: Actor | None) -> bool:
        parts = PurePosixPath(relative.as_posix()).parts
        if actor is None or not parts or parts[0] not in SERVED_FOLDERS:
            return False
        if actor.is_admin:
            return True
        if actor.roles & _ROLES_FOR[parts[0]]:
            return True
        if parts[0] == "colorings" and "designer" in actor.roles:
            return self._own_coloring_file(actor, relative.as_posix())
        return False

    def _own_coloring_file(self, actor: Actor, relative: str) -> bool:
        with self.ctx.db() as db:
            rows = db.execute(
                "select 1 from colorings where annotator_id = ? and "
                "(image_path = ? or mask_path = ?) limit 1",
                [actor.annotator_id, relative, relative],
            ).fetchall()
        return bool(rows)


class FileGuard:
    """ASGI middleware: `FilePolicy` in front of every request to Gradio's file route."""

    def __init__(self, app, policy: FilePolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send) -> None:
        file = file_of(scope.get("path", "")) if scope["type"] == "http" else None
        if file is not None:
            token = _cookie(scope, COOKIE)
            allowed = await anyio.to_thread.run_sync(self.policy.allows, file, token)
            if not allowed:
                body = (
                    b"Not allowed: sign in with a role that may see this file "
                    b"(images are shown only to the people whose role allows it)."
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _cookie(scope, name: str) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return urllib.parse.unquote(v) or None
    return None
