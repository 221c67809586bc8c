import sqlite3
import stat

import pytest

import storage
import storage.db as annotation_db
import storage.schema as schema_module
from storage import (
    SchemaTooNew,
    ensure_schema,
    insert_row,
    iso,
    open_db,
    parse_iso,
    schema_version,
    select,
    transaction,
    upsert_row,
    utcnow,
)
from storage.schema import MIGRATIONS

EXPECTED_SCHEMA = {
    "schema_version": (["version", "name", "applied"], []),
    "settings": (["key", "value"], []),
    "concepts": (["key", "base", "base_id", "category", "modifier_type", "modifier"], []),
    "sketches": (
        ["id", "base", "path", "sha256", "source", "selected", "width", "height", "meta", "created"],
        [("base", "concepts", "key")],
    ),
    "annotators": (
        [
            "id",
            "pseudonym",
            "roles",
            "design_background",
            "status",
            "created",
            "created_by",
            "instructions_read",
            "practice_approved",
            "practice_approved_by",
        ],
        [],
    ),
    "invites": (
        [
            "token_hash",
            "annotator_id",
            "role",
            "created",
            "expires",
            "first_used",
            "last_used",
            "uses",
            "revoked",
        ],
        [("annotator_id", "annotators", "id")],
    ),
    "sessions": (
        [
            "token_hash",
            "annotator_id",
            "roles",
            "created",
            "expires",
            "last_seen",
            "revoked",
            "invite_hash",
            "end_reason",
        ],
        [("annotator_id", "annotators", "id")],
    ),
    "consents": (
        ["id", "annotator_id", "form_sha256", "agreed", "created"],
        [("annotator_id", "annotators", "id")],
    ),
    "studies": (["id", "name", "votes_per_pair", "frozen", "meta", "created"], []),
    "study_pairs": (
        ["id", "study_id", "concept_key", "a", "b", "meta"],
        [("concept_key", "concepts", "key"), ("study_id", "studies", "id")],
    ),
    "colorings": (
        [
            "id",
            "annotator_id",
            "concept_key",
            "sketch_id",
            "image_path",
            "image_sha256",
            "mask_path",
            "mask_sha256",
            "practice",
            "round",
            "status",
            "seconds_spent",
            "created",
        ],
        [
            ("annotator_id", "annotators", "id"),
            ("concept_key", "concepts", "key"),
            ("sketch_id", "sketches", "id"),
        ],
    ),
    "coloring_distributions": (
        ["coloring_id", "p", "method", "created"],
        [("coloring_id", "colorings", "id")],
    ),
    "reviews": (
        ["coloring_id", "reason", "votes_needed", "status", "created", "plausibility"],
        [("coloring_id", "colorings", "id")],
    ),
    "qc_votes": (
        ["id", "coloring_id", "expert_id", "vote", "comment", "created"],
        [("coloring_id", "colorings", "id"), ("expert_id", "annotators", "id")],
    ),
    "judgments": (
        ["id", "pair_id", "participant_id", "left_item", "choice", "winner", "seconds_spent", "created"],
        [("pair_id", "study_pairs", "id"), ("participant_id", "annotators", "id")],
    ),
    "tasks": (
        [
            "id",
            "kind",
            "annotator_id",
            "concept_key",
            "coloring_id",
            "pair_id",
            "left_item",
            "practice",
            "status",
            "created",
            "expires",
            "finished",
            "result_id",
            "shown",
        ],
        [
            ("annotator_id", "annotators", "id"),
            ("coloring_id", "colorings", "id"),
            ("concept_key", "concepts", "key"),
            ("pair_id", "study_pairs", "id"),
        ],
    ),
    "audit": (["id", "created", "actor", "action", "object_type", "object_id", "why", "details"], []),
    "batches": (["annotator_id", "created", "size"], [("annotator_id", "annotators", "id")]),
    "crowd_links": (
        [
            "id",
            "token_hash",
            "study_id",
            "label",
            "quota",
            "minutes",
            "ends",
            "closed",
            "completion_code",
            "screenout_code",
            "id_param",
            "return_url",
            "max_failed_checks",
            "joins_per_address",
            "created",
            "created_by",
            "consent_text",
        ],
        [("study_id", "studies", "id")],
    ),
    "crowd_participants": (
        [
            "annotator_id",
            "link_id",
            "external_id",
            "platform_study_id",
            "platform_session_id",
            "address",
            "started",
            "finished",
            "status",
            "consented",
        ],
        [("annotator_id", "annotators", "id"), ("link_id", "crowd_links", "id")],
    ),
}


def _annotation_schema(db):
    return {
        t.name: (
            [c.name for c in t.columns],
            sorted((f.column, f.other_table, f.other_column) for f in t.foreign_keys),
        )
        for t in db.tables
        if t.name in EXPECTED_SCHEMA
    }


def _sql_master(db):
    return db.execute("select type, name, sql from sqlite_master order by name").fetchall()


def test_ensure_schema_creates_the_whole_schema(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    assert ensure_schema(db) == len(MIGRATIONS)
    assert _annotation_schema(db) == EXPECTED_SCHEMA
    versions = [(r["version"], r["name"]) for r in db["schema_version"].rows]
    assert versions == [(i + 1, name) for i, (name, _) in enumerate(MIGRATIONS)]


def test_ensure_schema_twice_changes_nothing(tmp_path):
    path = tmp_path / "a.sqlite"
    db = open_db(path)
    ensure_schema(db)
    before = _sql_master(db)
    rows_before = list(db["schema_version"].rows)
    db.close()
    db = open_db(path)
    assert ensure_schema(db) == len(MIGRATIONS)
    assert _sql_master(db) == before
    assert list(db["schema_version"].rows) == rows_before


def _add_note_column(database):
    database["annotators"].add_column("note", str)


def _add_label_column(database):
    database["annotators"].add_column("label", str)


def test_new_migration_is_applied_once_to_an_existing_database(tmp_path, monkeypatch):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    calls = []

    def add_note_column(database):
        calls.append(1)
        _add_note_column(database)

    monkeypatch.setattr(schema_module, "MIGRATIONS", MIGRATIONS + (("note", add_note_column),))
    assert ensure_schema(db) == len(MIGRATIONS) + 1
    assert ensure_schema(db) == len(MIGRATIONS) + 1
    assert calls == [1]
    assert "note" in db["annotators"].columns_dict


@pytest.mark.parametrize(
    "error, refusal",
    [
        (RuntimeError("migration bug"), "migration bug"),  # a bug: its own traceback
        (  # the disk: said in one line (the generic "could not be opened or written" said less)
            sqlite3.OperationalError("database or disk is full"),
            rf"the database '.*a\.sqlite' is at schema version {len(MIGRATIONS) + 1} and could not be migrated to "
            rf"{len(MIGRATIONS) + 3} \(database or disk is full\); nothing was migrated and the copy made for it "
            "was removed: free some space",
        ),
    ],
)
def test_failed_migration_leaves_schema_at_previous_version(tmp_path, monkeypatch, error, refusal):
    """All the migrations a start applies, or none: one failing after another succeeded (an
    outside check's disk filled by the migration) left the database at a version between,
    and the copy kept before the upgrade beside a second one at that version."""
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    monkeypatch.setattr(schema_module, "MIGRATIONS", MIGRATIONS + (("note", _add_note_column),))
    ensure_schema(db)  # one version ahead of the code below, so that an upgrade keeps a copy
    before = _sql_master(db)

    def broken(database):
        database["extra"].create({"id": int}, pk="id")
        raise error

    upgraded = MIGRATIONS + (("note", _add_note_column), ("label", _add_label_column), ("broken", broken))
    monkeypatch.setattr(schema_module, "MIGRATIONS", upgraded)
    with pytest.raises(
        type(error) if isinstance(error, RuntimeError) else storage.MigrationFailed, match=refusal
    ):
        ensure_schema(db)
    assert schema_version(db) == len(MIGRATIONS) + 1
    assert _sql_master(db) == before and "label" not in db["annotators"].columns_dict
    # The copy of the upgrade to 19 stays; the one of this failed start went (the database is it).
    assert [p.name.split("-")[2] for p in tmp_path.glob("a.sqlite.before-schema-*")] == [
        str(len(MIGRATIONS) + 1)
    ]


def test_database_from_newer_code_is_refused(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    db["schema_version"].insert({"version": 99, "name": "future", "applied": iso()})
    with pytest.raises(SchemaTooNew, match="99"):
        ensure_schema(db)


def test_open_db_sets_wal_foreign_keys_and_busy_timeout(tmp_path):
    db = open_db(tmp_path / "sub" / "a.sqlite")
    assert db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert db.execute("pragma foreign_keys").fetchone()[0] == 1
    assert db.execute("pragma busy_timeout").fetchone()[0] == annotation_db.BUSY_TIMEOUT_MS
    ensure_schema(db)
    with pytest.raises(sqlite3.IntegrityError):
        db["invites"].insert(
            {
                "token_hash": "x",
                "annotator_id": 12345,
                "role": "designer",
                "created": iso(),
                "expires": iso(),
                "uses": 0,
            }
        )


def test_transaction_rolls_back_every_write_on_error(tmp_path):
    db = open_db(tmp_path / "a.sqlite")
    ensure_schema(db)
    with pytest.raises(RuntimeError), transaction(db):
        db["settings"].insert({"key": "a", "value": "1"})
        db.execute("insert into settings (key, value) values ('b', '2')")
        raise RuntimeError("boom")
    assert list(db["settings"].rows) == []
    with transaction(db):
        db["settings"].insert({"key": "a", "value": "1"})
        with transaction(db):
            db["settings"].insert({"key": "b", "value": "2"})
    assert [r["key"] for r in db["settings"].rows] == ["a", "b"]


def test_iso_timestamps_sort_as_time_and_round_trip():
    now = utcnow()
    assert parse_iso(iso(now)) == now
    assert iso(now) < iso(now.replace(year=now.year + 1))
    with pytest.raises(ValueError, match="time-zone aware"):
        iso(now.replace(tzinfo=None))


def test_one_statement_writes_and_reads_match_what_sqlite_utils_stores(tmp_path):
    db = open_db(tmp_path / "s.sqlite")
    db["things"].create({"id": int, "name": str, "size": float, "blob": bytes}, pk="id")
    db["pairs"].create({"a": str, "b": str, "n": int, "note": str}, pk=("a", "b"))
    statements = []
    db.conn.set_trace_callback(statements.append)
    with transaction(db):
        first = insert_row(db, "things", {"name": "apple", "size": 1.5, "blob": b"\x00\x01"})
        second = insert_row(db, "things", {"name": 'it\'s "quoted"', "size": None})
        upsert_row(db, "pairs", {"a": "x", "b": "y", "n": 1, "note": "first"}, pk=("a", "b"))
        upsert_row(db, "pairs", {"a": "x", "b": "y", "n": 2}, pk=("a", "b"))  # note kept
        read = select(db, "select * from things where id >= ? order by id", [first])
    db.conn.set_trace_callback(None)
    assert (first, second) == (1, 2)
    assert (
        read
        == list(db.query("select * from things order by id"))
        == [
            {"id": 1, "name": "apple", "size": 1.5, "blob": b"\x00\x01"},
            {"id": 2, "name": 'it\'s "quoted"', "size": None, "blob": None},
        ]
    )
    assert list(db["pairs"].rows) == [{"a": "x", "b": "y", "n": 2, "note": "first"}]
    # One statement each between BEGIN and COMMIT: no schema look-ups, no savepoints.
    assert len(statements) == 1 + 5 + 1
    assert select(db, "select * from things where id = ?", [99]) == []
    db.close()


def test_a_new_database_and_its_journals_are_readable_by_their_owner_alone(tmp_path):
    """On a shared server other local accounts must not read the accounts, hashes and
    votes: a new database (and a new folder for it) is private; an existing one keeps its mode."""
    path = tmp_path / "new" / "db.sqlite"
    db = open_db(path)
    try:
        with transaction(db):
            db.execute("create table t (x)")
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    finally:
        db.close()
    assert modes == {"db.sqlite": 0o600, "db.sqlite-wal": 0o600, "db.sqlite-shm": 0o600}
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    shared = tmp_path / "shared.sqlite"
    shared.touch(mode=0o640)
    shared.chmod(0o640)  # chosen by its operator (a group that reads it)
    open_db(shared).close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640
