"""Importing Gradio without its type-stub writer: ~40 % of ``import gradio`` (issue 28).

Gradio 6's `gradio.component_meta.ComponentMeta` calls ``create_or_modify_pyi`` for every
component class it creates, its own ~80 at ``import gradio`` included: each call reads the
class's module, parses it (``ast.parse``) and cuts out the class's source, then rewrites the
``.pyi`` type stub beside it if it changed. The stubs are for editors and type checkers,
Gradio's wheel ships them, and nothing at run time reads them. On this project's 2-core VM
a bare ``import gradio`` took 4.6-4.9 CPU-s with it and 2.8-2.9 without (BENCHMARKS.md
"Gradio's import"), paid by every process that imports the app: the app's own start, and
each app process the tests launch.

Importing this module calls `skip_stub_writing`, which installs an import hook that
replaces ``create_or_modify_pyi`` with a function that does nothing, as soon as
`gradio.component_meta` has loaded and before any component class is made. It must run
before Gradio is first imported, so ``app/__init__.py`` imports this module first; if Gradio
is already imported it does nothing. If a Gradio release has no ``create_or_modify_pyi``,
nothing is replaced (`tests/app/test_gradio_import.py` fails then, the signal to remove this
module).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

MODULE = "gradio.component_meta"
WRITER = "create_or_modify_pyi"


def _no_stub(component_class, class_name, events) -> None:
    """Gradio's stub writer, doing nothing (module docstring)."""


class _SkipStubWriting(importlib.abc.MetaPathFinder):
    """Finds `MODULE` as Python would, and has its loader replace `WRITER` once the module has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            if hasattr(module, WRITER):
                setattr(module, WRITER, _no_stub)

        spec.loader.exec_module = exec_module
        return spec


def skip_stub_writing() -> None:
    """Make the coming ``import gradio`` skip Gradio's stub writer (nothing if Gradio is
    already imported). Idempotent."""
    if MODULE not in sys.modules and not any(isinstance(f, _SkipStubWriting) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipStubWriting())


skip_stub_writing()
