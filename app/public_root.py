"""Whether a page that came through a proxy names the address people open (``--public-url``).

Gradio writes the URL of every file on the page (each image, each download) from the request
that asked for the page: its ``Host`` header (or ``X-Forwarded-Host``), ``X-Forwarded-Proto``
and the sub-path. A proxy that passes a ``Host`` without the port people typed (nginx's
``$host``; outside probe 111, a proxy on port 8443) makes every image and download point at
port 443: the page opens, its sign-in works, and none of its files load. The app cannot tell
which address is the right one (a site may answer under two names), so it says what it sees
in the log, once per address, when a proxied page's address differs from
`app.config.AppConfig.public_url`.
"""

from __future__ import annotations

import logging
import urllib.parse

from gradio.route_utils import get_root_url
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.route_path import route_path
from storage.shown import shown

log = logging.getLogger(__name__)

PAGE_PATHS = ("/", "/config", "/config/")
"""The requests whose answer carries the page's address (``root``): the page, its configuration."""
PROXY_HEADERS = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host")
"""A request with any of these came through a proxy (a visit to the app's own port has none)."""
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_WARNED = 16
"""Distinct addresses warned about; the ``Host`` header is the client's to choose."""


def address(url: str) -> tuple[str, str, int | None, str]:
    """`url`'s scheme, host (lower case), port (``None`` for the scheme's default) and path
    without a trailing ``/``: two URLs that name one address compare equal."""
    parsed = urllib.parse.urlsplit(url)
    port = parsed.port  # ValueError for a port that is not one
    if port == DEFAULT_PORTS.get(parsed.scheme):
        port = None
    return parsed.scheme, (parsed.hostname or "").lower(), port, parsed.path.rstrip("/")


def mismatch(page_root: str, public_url: str) -> str | None:
    """What is wrong when Gradio's page address `page_root` is not `public_url`; None when
    they name one address."""
    if address(page_root) == address(public_url):
        return None
    return (
        f"a page that came through a proxy was served as {shown(page_root)}, but --public-url is "
        f"{shown(public_url)}: its images and downloads point at {shown(page_root)}. The proxy must "
        "pass on the address people open, port included (nginx: proxy_set_header Host $http_host; "
        "and X-Forwarded-Proto $scheme; docs/security.md), or --public-url name that address"
    )


class PublicRootCheck:
    """ASGI middleware: log `mismatch` for a proxied page request (module docstring).

    Looks only; every request goes on to the app unchanged.
    """

    def __init__(self, app: ASGIApp, public_url: str) -> None:
        self.app, self.public_url = app, public_url
        self.warned: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in ("GET", "HEAD")
            and len(self.warned) < MAX_WARNED
            and route_path(scope) in PAGE_PATHS
            and any(name in PROXY_HEADERS for name, _ in scope.get("headers", ()))
        ):
            self.check(Request(scope))
        await self.app(scope, receive, send)

    def check(self, request: Request) -> None:
        """Warn once about `request`'s page address when it is not the public one."""
        try:
            # As Gradio computes the page's ``root`` (gradio.routes, the page and /config).
            root = get_root_url(request, route_path(request.scope), request.scope.get("root_path") or None)
            if root in self.warned:
                return
            problem = mismatch(root, self.public_url)
        except Exception:  # a Host no URL can hold (httpx.InvalidURL, a bad port): Gradio answers it
            return
        if problem:
            self.warned.add(root)
            log.warning("The page's address is not --public-url: %s.", problem)
