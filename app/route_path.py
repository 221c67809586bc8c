"""The path a request names inside the app, as Gradio's router reads it.

Served under a sub-path (``GRADIO_ROOT_PATH=/lab`` behind a proxy that passes
``/lab/...`` on as it came, docs/security.md), every request's path starts with the sub-path;
Gradio's FastAPI app puts it in the ASGI scope's ``root_path`` and its router matches the
rest. The app's own middlewares (the guard's answers, the client configuration, the
compressed and the patched answers) compare paths too, and must compare the same rest: they
compared the whole path, so under ``/lab`` the session cookie was never set (every file and
download refused), ``/healthz`` was not found and the page's fixes were not served.
"""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    """`scope`'s path without the app's sub-path (``scope["root_path"]``), as Starlette's
    router takes it; ``"/"`` for the sub-path itself. A path outside the sub-path (a proxy
    that strips it) is returned as it is."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    rest = path[len(root) :]
    if not rest:
        return "/"
    return rest if rest.startswith("/") else path
