"""A process that imports the app imports Gradio without its type-stub writer (`app.gradio_import`)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A component class defined in a module of its own (`folder`/mycomponent.py), as Gradio's own
# are: Gradio's stub writer writes mycomponent.pyi beside it when the class is made.
DEFINE = """
import importlib, json, sys
sys.path.insert(0, {folder!r})
{first}
import gradio.component_meta as meta
module = importlib.import_module("mycomponent")
print(json.dumps({{"writer": meta.create_or_modify_pyi.__module__, "textbox": gr.Textbox("x").value}}))
"""
COMPONENT = """
import gradio as gr

class MyComponent(gr.components.Textbox):
    EVENTS = []
"""


def _run(folder: Path, first: str) -> subprocess.Popen:
    (folder / "mycomponent.py").write_text(textwrap.dedent(COMPONENT), encoding="utf-8")
    code = DEFINE.format(folder=str(folder), first=first)
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_the_app_skips_gradios_stub_writer_and_gradio_alone_still_writes_stubs(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "gradio").mkdir()
    with_app = _run(tmp_path / "app", "import app\nimport gradio as gr")
    alone = _run(tmp_path / "gradio", "import gradio as gr")  # both at once: two cores
    answers = {}
    for name, child in (("app", with_app), ("gradio", alone)):
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-2000:]
        answers[name] = json.loads(out.strip().splitlines()[-1])
    assert answers["app"] == {"writer": "app.gradio_import", "textbox": "x"}
    assert not (tmp_path / "app" / "mycomponent.pyi").exists()
    # Gradio on its own still writes the stub: when this fails, Gradio stopped, and the module can go.
    assert answers["gradio"] == {"writer": "gradio.component_meta", "textbox": "x"}
    assert "class MyComponent" in (tmp_path / "gradio" / "mycomponent.pyi").read_text(encoding="utf-8")
