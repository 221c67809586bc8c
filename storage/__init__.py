"""The storage floor under both libraries: the one place that knows how data is kept.

- `storage.db`: opening a database (`open_db`), the one transaction helper
  (`transaction`), the one write API (`insert_row`, `insert_rows`, `upsert_row`,
  `upsert_rows`, `update_rows`, `delete_rows`: one statement each, only inside
  `transaction`, else `OutsideTransaction`; names checked as identifiers, values bound) and
  `select` (a read without sqlite-utils' savepoint), the one timestamp format (`iso`,
  `parse_iso`, `utcnow`) and the default paths;
- `storage.schema`: every table of the project, annotation and evaluation alike, as one
  ordered list of forward migrations (`ensure_schema`);
- `storage.distributions`: the one check (`check_distribution`, `check_masses`) and
  the one codec (`encode`, `decode`) of a distribution over the 71 UW-71 bins;
- `storage.serving`: the lock beside the database that the app and the commands share
  and a restore takes alone (`hold_shared`, `shared`, `exclusive`);
- `storage.files`: the one content-addressed file store (`put_bytes`, `put_png`, the one
  PNG encoder `png_bytes`, the defensive `open_image`, `write_atomic`, `resolve`);
- `storage.spreadsheet`: the one CSV writer (`write_csv`, `csv_text`), safe to open in a
  spreadsheet.

`annotation/` and `evaluation/` both import it; it imports neither.
"""

from storage.db import (
    BUSY_TIMEOUT_MS,
    DEFAULT_DATA_DIR,
    DEFAULT_DB_PATH,
    ENV_DATA_DIR,
    ENV_DB,
    OPERATOR_WORDS,
    DatabaseMissing,
    OutsideTransaction,
    create_private,
    db_path,
    db_path_refusal,
    delete_rows,
    file_stamp,
    insert_row,
    insert_rows,
    iso,
    not_sqlite,
    open_db,
    parse_iso,
    private_folder,
    read_only,
    read_only_uri,
    select,
    shown_time,
    storage_condition,
    transaction,
    unused_path,
    unwritable,
    update_rows,
    upsert_row,
    upsert_rows,
    utcnow,
)
from storage.schema import (
    CopyBeforeUpgradeFailed,
    MigrationFailed,
    MigrationRefused,
    SchemaRefused,
    SchemaTooNew,
    ensure_schema,
    schema_version,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DEFAULT_DATA_DIR",
    "DEFAULT_DB_PATH",
    "ENV_DATA_DIR",
    "ENV_DB",
    "OutsideTransaction",
    "OPERATOR_WORDS",
    "DatabaseMissing",
    "SchemaTooNew",
    "SchemaRefused",
    "CopyBeforeUpgradeFailed",
    "MigrationFailed",
    "MigrationRefused",
    "create_private",
    "private_folder",
    "shown_time",
    "delete_rows",
    "ensure_schema",
    "insert_row",
    "insert_rows",
    "iso",
    "db_path_refusal",
    "read_only",
    "read_only_uri",
    "not_sqlite",
    "unwritable",
    "storage_condition",
    "unused_path",
    "file_stamp",
    "db_path",
    "open_db",
    "parse_iso",
    "schema_version",
    "select",
    "transaction",
    "update_rows",
    "upsert_row",
    "upsert_rows",
    "utcnow",
]
