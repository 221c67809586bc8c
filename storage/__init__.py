"""The storage floor under both libraries: the one place that knows how data is kept.

- `storage.db`: opening a database (`open_db`), the one transaction helper
  (`transaction`), the one timestamp format (`iso`, `parse_iso`, `utcnow`) and the
  default paths;
- `storage.schema`: every table of the project, annotation and evaluation alike, as one
  ordered list of forward migrations (`ensure_schema`);
- `storage.distributions`: the one check (`check_distribution`, `check_masses`) and
  the one codec (`encode`, `decode`) of a distribution over the 71 UW-71 bins.

`annotation/` and `evaluation/` both import it; it imports neither.
"""

from storage.db import (
    BUSY_TIMEOUT_MS,
    DEFAULT_DATA_DIR,
    DEFAULT_DB_PATH,
    ENV_DATA_DIR,
    ENV_DB,
    iso,
    open_db,
    parse_iso,
    transaction,
    utcnow,
)
from storage.schema import SchemaTooNew, ensure_schema, schema_version

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DEFAULT_DATA_DIR",
    "DEFAULT_DB_PATH",
    "ENV_DATA_DIR",
    "ENV_DB",
    "SchemaTooNew",
    "ensure_schema",
    "iso",
    "open_db",
    "parse_iso",
    "schema_version",
    "transaction",
    "utcnow",
]
