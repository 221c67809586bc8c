"""The shape of the Gradio layer, read from its source (issue 29, item 1).

``python -m bench.ui_shape [FOLDER]`` parses every ``*.py`` file under `FOLDER` (default
``app/``) with `ast`, runs nothing, and prints per module and in total:

lines
    Lines of the file.
tuple returns
    Functions (``def``, ``async def`` or ``lambda``, nested ones too) that hand back
    positional updates: a ``return`` (or a lambda's body) that is a tuple literal of 3 or
    more elements, or a return annotation that is the bare name ``tuple``. A function
    counts once however many such returns it has; ``return a, b`` and ``-> tuple[int, str]``
    do not count.
closure factories
    Module-level functions with a parameter named ``ctx`` whose body defines a function and
    returns it by name (``def make(ctx): def fn(...): ...; return fn``).
twin sites
    Calls of ``wire(...)`` (a bare name or an attribute ``….wire``) with an ``api_name=``
    keyword that is not the literal None: each registers the page event and its API twin.
    A call inside a loop counts once (a count of source sites, not of endpoints). A row
    of a tab's event table, ``On(...)`` (`app.tabs`), with a `note` and an `api_name` (by
    position, the 5th and 6th arguments, or by keyword) that are not the literal None,
    counts as well: `app.tabs.wire_events` registers it through ``wire``.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass, fields
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"


@dataclass(frozen=True)
class Shape:
    """What `measure` counts in one module (see the module docstring for each rule)."""

    lines: int = 0
    tuple_returns: int = 0
    closure_factories: int = 0
    twin_sites: int = 0

    def __add__(self, other: Shape) -> Shape:
        return Shape(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Shape)))


def measure(source: str) -> Shape:
    """Count the shape of one module's `source` (Python text); nothing is run."""
    tree = ast.parse(source)
    return Shape(
        lines=len(source.splitlines()),
        tuple_returns=sum(_returns_positional(node) for node in ast.walk(tree)),
        closure_factories=sum(_is_closure_factory(node) for node in tree.body),
        twin_sites=sum(_is_twin_site(node) for node in ast.walk(tree)),
    )


def _is_long_tuple(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) >= 3


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef):
    """The ``return`` statements of `function` itself, not of functions nested in it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _returns_positional(node: ast.AST) -> bool:
    if isinstance(node, ast.Lambda):
        return _is_long_tuple(node.body)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if isinstance(node.returns, ast.Name) and node.returns.id == "tuple":
        return True
    return any(_is_long_tuple(r.value) for r in _own_returns(node))


def _is_closure_factory(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = node.args
    if "ctx" not in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
        return False
    inner = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return any(isinstance(r.value, ast.Name) and r.value.id in inner for r in _own_returns(node))


def _is_twin_site(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    if name == "wire":
        return _given(node, "api_name", None)
    return name == "On" and _given(node, "note", 4) and _given(node, "api_name", 5)


def _given(call: ast.Call, keyword: str, position: int | None) -> bool:
    """Whether `call` passes `keyword` (or the argument at `position`) as something other
    than the literal None."""
    values = [k.value for k in call.keywords if k.arg == keyword]
    if position is not None and len(call.args) > position:
        values.append(call.args[position])
    return any(not (isinstance(v, ast.Constant) and v.value is None) for v in values)


def measure_folder(folder: Path) -> dict[str, Shape]:
    """`measure` of every ``*.py`` file under `folder`, by path relative to it."""
    return {
        str(path.relative_to(folder)): measure(path.read_text(encoding="utf-8"))
        for path in sorted(folder.rglob("*.py"))
    }


def table(shapes: dict[str, Shape]) -> str:
    """`shapes` (and their total) as a fixed-width text table."""
    names = [f.name for f in fields(Shape)]
    width = max(len("total"), *map(len, shapes))
    rows = [f"{'module':<{width}}  " + "  ".join(f"{n:>17}" for n in names)]
    total = sum(shapes.values(), Shape())
    for module, shape in [*shapes.items(), ("total", total)]:
        rows.append(f"{module:<{width}}  " + "  ".join(f"{getattr(shape, n):>17}" for n in names))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=APP, help="default: app/")
    print(table(measure_folder(parser.parse_args(argv).folder)))


if __name__ == "__main__":
    main()
