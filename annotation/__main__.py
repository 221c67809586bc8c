"""Command line: ``python -m annotation export DIR`` and ``set-admin-password``.

The database is ``--db PATH``, else ``$COLORCONCEPT_DB``, else ``data/colorconcept.sqlite``;
the data folder is ``--data-dir``, else ``$COLORCONCEPT_DATA_DIR``, else ``data/``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from annotation.db import (DEFAULT_DATA_DIR, DEFAULT_DB_PATH, ENV_DATA_DIR, ENV_DB,
                           ensure_schema, open_db)
from annotation.errors import AnnotationError
from annotation.export import export
from annotation.passwords import set_admin_password


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m annotation",
                                     description="ColorConcept Lab annotation store")
    parser.add_argument("--db", default=os.environ.get(ENV_DB) or str(DEFAULT_DB_PATH),
                        help="SQLite file (default: $COLORCONCEPT_DB or data/colorconcept.sqlite)")
    parser.add_argument("--data-dir", default=os.environ.get(ENV_DATA_DIR) or str(DEFAULT_DATA_DIR),
                        help="data folder holding the images (default: data/)")
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="CSV + Parquet of every table, images.zip")
    out.add_argument("folder", help="a new or empty folder to write to")
    password = commands.add_parser("set-admin-password",
                                   help="choose a new admin password (read from the terminal)")
    password.add_argument("--stdin", action="store_true", help="read it from standard input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "export" and not Path(args.db).is_file():
        print(f"error: no database at {args.db!r} (give --db PATH)", file=sys.stderr)
        return 2
    db = open_db(args.db)
    try:
        ensure_schema(db)
        if args.command == "export":
            summary = export(db, args.data_dir, args.folder)
            print(f"exported {len(summary.rows)} tables ({sum(summary.rows.values())} rows) "
                  f"and images {summary.images} to {summary.folder}")
        else:
            password = sys.stdin.readline().rstrip("\n") if args.stdin else getpass.getpass(
                "New admin password: ")
            set_admin_password(db, password, source="command line")
            print("admin password changed")
    except AnnotationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
