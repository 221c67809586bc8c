"""`storage`'s write API: one statement each, only inside `storage.transaction`, names
checked before any SQL is built, values bound."""

import sqlite3

import pytest

from storage import (
    OutsideTransaction,
    delete_rows,
    insert_row,
    insert_rows,
    open_db,
    transaction,
    update_rows,
    upsert_row,
    upsert_rows,
)


@pytest.fixture
def db(tmp_path):
    database = open_db(tmp_path / "w.sqlite")
    database["things"].create({"id": int, "name": str, "size": float, "note": str}, pk="id")
    database["pairs"].create({"a": str, "b": str, "n": int, "note": str}, pk=("a", "b"))
    yield database
    database.close()


def _things(db):
    return [
        tuple(row) for row in db.execute("select id, name, size, note from things order by id").fetchall()
    ]


def test_every_write_refuses_to_run_outside_a_transaction_and_writes_nothing(db):
    writes = [
        lambda: insert_row(db, "things", {"name": "a"}),
        lambda: insert_rows(db, "things", [{"name": "a"}]),
        lambda: upsert_row(db, "pairs", {"a": "x", "b": "y", "n": 1}, pk=("a", "b")),
        lambda: upsert_rows(db, "pairs", [{"a": "x", "b": "y", "n": 1}], pk=("a", "b")),
        lambda: update_rows(db, "things", {"id": 1}, {"name": "b"}),
        lambda: delete_rows(db, "things", {"id": 1}),
    ]
    for write in writes:
        with pytest.raises(OutsideTransaction, match=r"inside `with storage.transaction\(db\):`"):
            write()
    # An implicit transaction of Python's sqlite3 is not the write lock either.
    db.conn.execute("insert into things (name) values ('opened by hand')")
    with pytest.raises(OutsideTransaction):
        insert_row(db, "things", {"name": "a"})
    db.conn.rollback()
    assert _things(db) == [] and list(db["pairs"].rows) == []


def test_rows_written_inside_a_transaction_are_those_asked_for_one_statement_each(db):
    statements = []
    db.conn.set_trace_callback(statements.append)
    with transaction(db):
        first = insert_row(db, "things", {"name": "apple", "size": 1.5})
        added = insert_rows(db, "things", [{"name": "pear", "note": "ripe"}, {"size": 2.0, "name": "plum"}])
        skipped = insert_rows(db, "things", [{"id": first, "name": "again"}], ignore=True)
        upsert_rows(
            db,
            "pairs",
            [{"a": "x", "b": "y", "n": 1, "note": "first"}, {"a": "x", "b": "z", "n": 5}],
            pk=("a", "b"),
        )
        upsert_row(db, "pairs", {"a": "x", "b": "y", "n": 2}, pk=("a", "b"))  # note kept
        changed = update_rows(db, "things", {"note": None, "size <=": 1.5}, {"note": "small"})
        removed = delete_rows(db, "things", {"name in": ["plum", "fig"]})
    db.conn.set_trace_callback(None)
    assert (first, added, skipped, changed, removed) == (1, 2, 0, 1, 1)
    assert _things(db) == [(1, "apple", 1.5, "small"), (2, "pear", None, "ripe")]
    assert sorted(tuple(r.values()) for r in db["pairs"].rows) == [
        ("x", "y", 2, "first"),
        ("x", "z", 5, None),
    ]
    assert statements[0] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT"
    # One execution per row (a batch runs one prepared statement per row): no schema
    # look-ups, no savepoints.
    assert len(statements) == 2 + 9, statements
    assert not [s for s in statements if "sqlite_master" in s or "PRAGMA" in s or "SAVEPOINT" in s]


def test_where_reads_operators_and_null(db):
    with transaction(db):
        insert_rows(db, "things", [{"name": n, "size": float(i)} for i, n in enumerate("abcde")])
        assert update_rows(db, "things", {"id !=": 1, "size <": 3.0}, {"note": "low"}) == 2
        assert update_rows(db, "things", {"note !=": None}, {"size": 9.0}) == 2
        assert update_rows(db, "things", {"name not in": ["a", "b", "c"]}, {"note": "high"}) == 2
        assert delete_rows(db, "things", {"size >=": 9.0, "name": "b"}) == 1
        assert update_rows(db, "things", {"name in": []}, {"note": "none"}) == 0
    assert _things(db) == [
        (1, "a", 0.0, None),
        (3, "c", 9.0, "low"),
        (4, "d", 3.0, "high"),
        (5, "e", 4.0, "high"),
    ]


@pytest.mark.parametrize(
    ("write", "error", "message"),
    [
        (
            lambda db: insert_row(db, 'things" (name) values (1); --', {"name": "a"}),
            ValueError,
            "plain identifiers",
        ),
        (lambda db: insert_row(db, "things", {"name) values (1); --": "a"}), ValueError, "plain identifiers"),
        (
            lambda db: update_rows(db, "things", {"id = 1 or 1": 1}, {"name": "b"}),
            ValueError,
            "operator must be one of",
        ),
        (
            lambda db: update_rows(db, "things", {"id; drop table things": 1}, {"name": "b"}),
            ValueError,
            "operator",
        ),
        (lambda db: delete_rows(db, "things", {}), ValueError, "at least one column"),
        (
            lambda db: insert_row(db, "things", {"note": {"a": 1}}),
            TypeError,
            "column 'note' of 'things' got a dict",
        ),
        (
            lambda db: insert_row(db, "things", {"nmae": "a"}),
            sqlite3.OperationalError,
            "has no column named nmae",
        ),
        (
            lambda db: update_rows(db, "thing", {"id": 1}, {"name": "b"}),
            sqlite3.OperationalError,
            "no such table",
        ),
    ],
)
def test_a_bad_name_or_value_is_refused_before_anything_is_written(db, write, error, message):
    with transaction(db):
        insert_row(db, "things", {"name": "kept"})
    with pytest.raises(error, match=message), transaction(db):
        write(db)
    assert _things(db) == [(1, "kept", None, None)]
    assert db.execute("select count(*) from sqlite_master where type = 'table'").fetchone()[0] == 2


def test_a_nested_transaction_writes_and_rolls_back_as_a_savepoint(db):
    with transaction(db):
        insert_row(db, "things", {"name": "outer"})
        with pytest.raises(RuntimeError), transaction(db):
            insert_row(db, "things", {"name": "inner"})
            raise RuntimeError("undo the inner block only")
        insert_row(db, "things", {"name": "after"})
    with pytest.raises(OutsideTransaction):
        insert_row(db, "things", {"name": "outside again"})
    assert [row[1] for row in _things(db)] == ["outer", "after"]


def test_a_setting_is_read_written_in_a_transaction_and_made_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from storage import ensure_schema
    from storage.settings import read_setting, setting_once, write_setting

    path = tmp_path / "s.sqlite"
    first = open_db(path)
    ensure_schema(first)
    assert read_setting(first, "k") is None
    with pytest.raises(OutsideTransaction):
        write_setting(first, "k", "v")
    assert read_setting(first, "k") is None
    with transaction(first):
        write_setting(first, "k", "v")
        write_setting(first, "k", "w")  # replaces
    assert read_setting(first, "k") == "w"
    first.close()
    # Eight connections ask for one value at once: one makes it, all get it.
    made = []

    def ask(n):
        own = open_db(path)
        try:
            return setting_once(own, "secret", lambda: made.append(n) or f"value-{n}")
        finally:
            own.close()

    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(ask, range(8)))
    assert len(made) == 1 and values == [f"value-{made[0]}"] * 8
