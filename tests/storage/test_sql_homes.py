"""Where SQL may live: none in `app/`, and rows written only through `storage`'s write API.

Both tests read the source (`ast`), so they see every file, called or not. Each exception
is named below with the reason it stays; a new one fails the test.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DB_METHODS = {"execute", "executemany", "executescript", "query"}
TABLE_WRITES = {"insert", "upsert", "update", "delete", "delete_where", "insert_all", "upsert_all"}
RAW_WRITE = re.compile(
    r"^\s*(insert\s+(or\s+\w+\s+)?into|replace\s+into|update\s+\S+\s+set|delete\s+from)\b", re.I
)

# Raw write statements outside storage/, each with why it is not the write API.
RAW_ALLOWED = {
    # a load benchmark resets the sketch selection of a whole copied database in one statement
    ("bench/bench_load.py", "update sketches set selected = 0"),
    # the pilot list is replaced whole: every row goes, in one statement
    ("annotation/pilot.py", "delete from pilot_concepts"),
}


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node of `tree` -> the name of the function that holds it ('' at module level)."""
    owner = {}

    def walk(node, name):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            owner[child] = inner
            walk(child, inner)

    walk(tree, "")
    return owner


def db_calls(path: Path) -> list[tuple[str, int, str]]:
    """``(function, line, what)`` of every database call in the file at `path`: a method of
    `DB_METHODS` on anything, or a sqlite-utils table write (``db[...]`` or ``.table(...)``)."""
    tree = ast.parse(path.read_text())
    owner = _functions(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, target = node.func.attr, node.func.value
        on_table = isinstance(target, ast.Subscript) or (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Attribute)
            and target.func.attr == "table"
        )
        if attr in DB_METHODS or (attr in TABLE_WRITES and on_table):
            found.append((owner.get(node, ""), node.lineno, attr))
    return found


def raw_writes(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal in `path` that starts a write statement."""
    found = []
    tree = ast.parse(path.read_text())
    pieces = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if id(node) in pieces:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if RAW_WRITE.match(text):
            found.append((node.lineno, " ".join(text.split())))
    return found


def _python_files(*roots: str):
    for root in roots:
        yield from sorted((ROOT / root).rglob("*.py"))


def test_no_handler_in_app_runs_sql_or_writes_a_table():
    calls = {
        (str(path.relative_to(ROOT)), function, line, what)
        for path in _python_files("app")
        for function, line, what in db_calls(path)
    }
    assert calls == set(), "move the query into annotation/ or evaluation/"


def test_rows_are_written_through_the_storage_write_api_only():
    found = {
        (str(path.relative_to(ROOT)), line, text)
        for path in _python_files("annotation", "evaluation", "app", "bench")
        for line, text in raw_writes(path)
    }
    left = {f for f in found if not any(f[0] == p and f[2].startswith(s) for p, s in RAW_ALLOWED)}
    assert left == set(), "write rows with storage.insert_row / update_rows / delete_rows"


def test_no_new_sqlite_utils_table_write_outside_storage():
    found = {
        (str(path.relative_to(ROOT)), function)
        for path in _python_files("annotation", "evaluation", "app", "bench")
        for function, _, what in db_calls(path)
        if what in TABLE_WRITES
    }
    assert found == set(), "write rows with storage.insert_row / update_rows / upsert_row"


def test_the_scans_see_what_they_look_for(tmp_path):
    source = tmp_path / "handler.py"
    source.write_text(
        "def handler(db, rows):\n"
        "    db.execute('select 1')\n"
        "    db['t'].insert({'a': 1})\n"
        "    db.table('t').upsert_all(rows, pk='a')\n"
        "    rows.insert(0, 'kept')\n"
        "    db.conn.executemany(f'INSERT INTO t (a) values (?)', rows)\n"
        "    return '''\n  update t set a = 1'''\n"
    )
    assert sorted(db_calls(source), key=lambda call: call[1]) == [
        ("handler", 2, "execute"),
        ("handler", 3, "insert"),
        ("handler", 4, "upsert_all"),
        ("handler", 6, "executemany"),
    ]
    assert sorted(raw_writes(source)) == [(6, "INSERT INTO t (a) values (?)"), (7, "update t set a = 1")]
