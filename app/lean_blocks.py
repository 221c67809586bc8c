"""The app's Blocks: Gradio's, without the web apps it builds before launch and throws away.

Gradio 6 builds a whole FastAPI app (``App.create_app``: every route, the middleware, and
the configuration of every block, computed once more) each time a Blocks is created, each
time its ``with`` block ends and each time ``queue()`` is called, and keeps each one only
until the next: ``launch()`` builds the app that serves. For this app's 706 blocks those
throwaway builds cost about a third of a CPU-second each, two or three per start
(``app.py`` calls ``queue()``), paid by every start of the app and every app the tests
launch (BENCHMARKS.md "The whole suite by module, and the app's throwaway builds").

`AppBlocks` is Gradio's Blocks; once `install` has run, ``App.create_app`` builds nothing
for an `AppBlocks` when called as Gradio's constructor, ``with`` exit and ``queue()`` call
it (the Blocks alone and ``mcp_server=False``): ``demo.app`` stays None until ``launch()``
(or ``gr.mount_gradio_app``, which calls it with its own arguments) builds the one that
serves. The configuration the ``with`` exit computes (``demo.config``, which the app reads
before launch) is Gradio's own; only the copy that the throwaway build would compute again is
not made. Any other Blocks, and any other call, goes to Gradio's ``create_app`` unchanged.
"""

from __future__ import annotations

import functools

import gradio as gr
from gradio.routes import App

#: The arguments, after the Blocks, of Gradio's throwaway builds (``Blocks.__exit__`` and
#: ``Blocks.queue``); ``launch`` and ``mount_gradio_app`` pass more.
THROWAWAY = ((), {"mcp_server": False})


class AppBlocks(gr.Blocks):
    """`gr.Blocks` whose throwaway web apps are not built (module docstring; needs `install`)."""


def install() -> None:
    """Make ``App.create_app`` skip the throwaway builds of every `AppBlocks` (the whole
    process). Idempotent."""
    shipped = App.create_app
    if getattr(shipped, "colorconcept_shipped", None) is not None:
        return

    @functools.wraps(shipped)
    def create_app(blocks, *args, **kwargs):
        if isinstance(blocks, AppBlocks) and (args, kwargs) == THROWAWAY:
            return None
        return shipped(blocks, *args, **kwargs)

    create_app.colorconcept_shipped = shipped
    App.create_app = staticmethod(create_app)
