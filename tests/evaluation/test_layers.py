"""evaluation/ imports point down its ranks, read from the source (no module is imported).

Each package of evaluation/ has a rank (`RANKS`, the table of docs/architecture.md). A
module may import its own package and packages ranked strictly below it; packages of one
rank are siblings (the products) and never import each other. Imports inside functions
count as well, so a late import cannot hide an arrow that runs up.
"""

import ast
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "evaluation"

#: Package (or top-level module) of evaluation/ -> rank; the same table as docs/architecture.md.
RANKS = {
    "concepts": 0,  # Table 9, the shared vocabulary (and where the shipped assets are)
    "color": 1,  # functions on arrays, color names, synthetic renders, the color wheel
    "models": 2,  # registry, generation, segmentation, tiny test models
    "pipeline": 3,  # runs, stages, executors, jobs; scoring a run's distributions
    "analysis": 4,  # ColorConceptBench tables and figures, and what the products share
    "explicit": 5,  # GenColorBench explicit colors (a product)
    "judges": 5,  # the VLM-judge audit (a product)
    "cli": 6,  # python -m evaluation
    "__main__": 6,
}


def _package(path: Path, root: Path) -> str:
    """The rank-table key of a file: its folder under `root`, or its stem at the top."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def _module(path: Path, root: Path) -> list[str]:
    parts = ["evaluation", *path.relative_to(root).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.Import | ast.ImportFrom, path: Path, root: Path) -> list[str]:
    """The modules an import statement names (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = _module(path, root)
        package = here if path.name == "__init__.py" else here[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def upward_imports(root: Path, ranks: dict[str, int]) -> list[str]:
    """``file:line importer (rank) -> imported (rank)`` for every import, in the package
    folder `root`, of a package ranked at or above the importer's (its own excepted), one
    entry per import statement and imported package."""
    found = []
    for path in sorted(root.rglob("*.py")):
        own = _package(path, root)
        if own == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {
                name.split(".")[1] for name in _imported(node, path, root) if name.startswith("evaluation.")
            }
            for target in sorted(targets - {own}):
                if ranks[target] >= ranks[own]:
                    relative = path.relative_to(root.parent)
                    found.append(
                        f"{relative}:{node.lineno} {own} ({ranks[own]}) -> {target} ({ranks[target]})"
                    )
    return found


def test_every_package_of_evaluation_has_a_rank():
    packages = {_package(path, FOLDER) for path in FOLDER.rglob("*.py")} - {"__init__"}
    assert packages - set(RANKS) == set(), "give each new package of evaluation/ a rank (and a line in docs)"
    assert set(RANKS) - packages == set(), "a ranked package no longer exists: drop it from RANKS and docs"


def test_no_import_runs_up_or_across_the_ranks_of_evaluation():
    assert upward_imports(FOLDER, RANKS) == []


def test_the_rank_table_in_docs_is_this_one():
    text = (FOLDER.parent / "docs" / "architecture.md").read_text()
    table = text[text.index("<!-- evaluation ranks -->") : text.index("<!-- /evaluation ranks -->")]
    documented = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for name in cells[1].replace("`", "").split(","):
                documented[name.strip().rstrip("/")] = int(cells[0])
    assert documented == RANKS


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from evaluation.explicit.synthetic import SHAPES\n", ["models (2) -> explicit (5)"]),
        ("def f():\n    from evaluation import judges\n", ["models (2) -> judges (5)"]),
        ("import evaluation.pipeline.jobs\n", ["models (2) -> pipeline (3)"]),
        ("from ..analysis import figures\n", ["models (2) -> analysis (4)"]),
        ("from evaluation.color import naming\nfrom . import registry\nimport numpy\n", []),
    ],
)
def test_the_check_finds_an_arrow_up_however_it_is_written(tmp_path, source, expected):
    root = _tree(tmp_path / "evaluation", {"models/__init__.py": "", "models/tiny.py": source})
    assert [entry.split(" ", 1)[1] for entry in upward_imports(root, RANKS)] == expected


def test_siblings_do_not_import_each_other_and_the_top_imports_all(tmp_path):
    files = {
        "judges/probes.py": "from evaluation.explicit import synthetic\n",
        "explicit/views.py": "from evaluation.analysis import robustness\n",
        "cli/explicit.py": "from evaluation.explicit import tables\nfrom evaluation.judges import report\n",
    }
    found = upward_imports(_tree(tmp_path / "evaluation", files), RANKS)
    assert found == ["evaluation/judges/probes.py:1 judges (5) -> explicit (5)"]
