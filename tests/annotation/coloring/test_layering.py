"""annotation/coloring imports in one direction, read from the source (no module is imported).

A cycle inside the package, or an import inside a function (the usual patch for one),
fails here with the modules named.
"""

import ast
from pathlib import Path

PACKAGE = "annotation.coloring"
FOLDER = Path(__file__).resolve().parents[3] / "annotation" / "coloring"


def _modules() -> dict[str, ast.Module]:
    return {f"{PACKAGE}.{p.stem}": ast.parse(p.read_text(), str(p)) for p in sorted(FOLDER.glob("*.py"))}


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _graph(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    return {
        name: {
            target
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for target in _imported(node)
            if target in modules and target != name
        }
        for name, tree in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per cycle found by a depth-first walk, each starting at its smallest name."""
    found, state = set(), dict.fromkeys(graph, 0)  # 0 unseen, 1 on the path, 2 done

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state[target] == 1:
                cycle = path[path.index(target) :]
                start = cycle.index(min(cycle))
                found.add(tuple(cycle[start:] + cycle[:start]))
            elif state[target] == 0:
                walk(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if state[name] == 0:
            walk(name, [name])
    return sorted(list(cycle) for cycle in found)


def _function_level_imports(modules: dict[str, ast.Module]) -> list[str]:
    return sorted(
        f"{name}:{node.lineno} in {function.name}"
        for name, tree in modules.items()
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def test_the_cycle_finder_finds_a_cycle_and_a_function_level_import():
    source = {
        f"{PACKAGE}.a": "from annotation.coloring import b\n",
        f"{PACKAGE}.b": "def f():\n    from annotation.coloring.a import x\n",
        f"{PACKAGE}.c": "import annotation.coloring.a\n",
    }
    modules = {name: ast.parse(text) for name, text in source.items()}
    assert _cycles(_graph(modules)) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]
    assert _function_level_imports(modules) == [f"{PACKAGE}.b:2 in f"]


def test_annotation_coloring_has_no_import_cycle():
    modules = _modules()
    assert len(modules) >= 6, sorted(modules)
    assert _cycles(_graph(modules)) == []


def test_annotation_coloring_has_no_function_level_import():
    assert _function_level_imports(_modules()) == []
