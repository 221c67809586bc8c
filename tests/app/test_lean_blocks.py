"""The app's Blocks gets no web app before launch, and the one it serves is whole (`app.lean_blocks`).

That a launched app serves the web app its launch built, with every route the guard
classifies, is checked where an app is launched already: `tests/app/test_guard.py`'s
route test."""

import gradio as gr
from fastapi import FastAPI
from fastapi.testclient import TestClient
from gradio.routes import App

from app import build_app, lean_blocks
from app.lean_blocks import AppBlocks
from tests.app_server import make_config


def test_the_built_app_has_no_web_app_and_gradios_whole_configuration(tmp_path):
    demo = build_app(make_config(tmp_path))
    try:
        assert isinstance(demo, AppBlocks) and demo.app is None  # no throwaway build at exit
        demo.queue(default_concurrency_limit=8)  # as app.py does
        assert demo.app is None
        # What the app reads before launch (the guard's public files) is the configuration
        # Gradio's own `with` exit computed: the whole one. (Its events have changed since:
        # the app sets their progress display after the exit, `app.weight`.)
        whole = gr.Blocks.get_config_file(demo)
        assert len(whole["components"]) > 700
        assert (demo.config["components"], demo.config["layout"]) == (whole["components"], whole["layout"])
    finally:
        demo.close()


def test_other_blocks_and_a_mounted_app_blocks_are_built_as_gradio_builds_them():
    lean_blocks.install()
    lean_blocks.install()  # idempotent: Gradio's function behind one wrapper
    shipped = App.create_app.colorconcept_shipped
    assert getattr(shipped, "colorconcept_shipped", None) is None
    with gr.Blocks() as plain:
        gr.Textbox("plain")
    assert isinstance(plain.app, App)  # Gradio's own build at exit, untouched
    with AppBlocks() as mounted:
        gr.Textbox("mounted")
    assert mounted.app is None
    server = gr.mount_gradio_app(FastAPI(), mounted, path="/ui")
    with TestClient(server) as http:
        config = http.get("/ui/config").json()
    assert [c["props"].get("value") for c in config["components"] if c["type"] == "textbox"] == ["mounted"]
