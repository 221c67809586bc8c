"""The Gradio app: `build_app(config)` wires one module per tab.

A tab module in ``app/`` defines ``NAME`` (used in ``elem_id``s and ``api_name``s as
``<NAME>_<action>``), ``TITLE``, ``ROLES`` (who sees the tab; the admin sees every tab)
and ``build(ctx, session_token)``, which lays out the tab inside the current `gr.Tab` and
wires its events; it may define ``CSS``, a style sheet passed to ``launch`` (see
`launch_options`). Every handler takes ``session_token`` as its first input and checks the
role on the server (see `app.common.handler`).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from app import (admin, browser, designer, evaluate, expert, landing, leaderboard,
                 participant, sketches_admin, study)
from app.common import AppContext
from app.config import AppConfig

TAB_MODULES = (designer, expert, participant, study, evaluate, browser, leaderboard,
               sketches_admin, admin)
STORAGE_KEY = "colorconcept_session"


def build_app(config: AppConfig | None = None) -> gr.Blocks:
    """Prepare the database and build the app's Blocks (nothing is launched).

    Parameters
    ----------
    config : AppConfig, optional
        Default `AppConfig.from_env()`.
    """
    ctx = AppContext.prepare(AppConfig.from_env() if config is None else config)
    with gr.Blocks(title="ColorConcept Lab") as demo:
        session_token = gr.Textbox("", visible="hidden", label="session_token",
                                   elem_id="session_token")
        stored = gr.BrowserState("", storage_key=STORAGE_KEY, secret=ctx.browser_secret)
        with gr.Tabs():
            with gr.Tab(landing.TITLE, id=landing.NAME):
                start = landing.build(ctx, session_token)
            tabs = []
            for module in TAB_MODULES:
                with gr.Tab(module.TITLE, id=module.NAME, visible=False) as tab:
                    module.build(ctx, session_token)
                tabs.append((tab, module.ROLES))

        landing.wire(ctx, demo, session_token, stored, start, tabs)
    return demo


def launch_options(config: AppConfig) -> dict:
    """Keyword arguments `gr.Blocks.launch` needs for this config.

    Images in the data folder are served to the pages (``allowed_paths``); Gradio serves
    every file under an allowed path to anyone who names it, so the database (with its
    journal files) and the admin password file are blocked, wherever they lie: the
    default layout keeps the database inside the data folder. A tab module may define
    ``CSS``; Gradio 6 takes style sheets at launch.
    """
    db = Path(config.db_path).resolve()
    blocked = [str(db.with_name(db.name + suffix)) for suffix in ("", "-wal", "-shm", "-journal")]
    if config.admin_password_file is not None:
        blocked.append(str(Path(config.admin_password_file).resolve()))
    css = "\n".join(getattr(m, "CSS", "") for m in TAB_MODULES)
    return {"allowed_paths": [str(config.data_dir)], "blocked_paths": blocked, "css": css}
