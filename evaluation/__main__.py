"""``python -m evaluation <command>``: the evaluation engine's command line.

Each command is one module of `evaluation.cli` with ``HELP``, ``add_arguments(parser)``
and ``main(args) -> int``; to add a command, add its module and one line to `COMMANDS`.
Modules import heavy libraries (torch, diffusers) inside ``main`` so that ``--help`` and
``score`` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sqlite3
import sys
import threading
from pathlib import Path

from evaluation.pipeline.ray_storage import refuse_file_in_the_way
from storage import OPERATOR_WORDS, SchemaRefused, serving, storage_condition
from storage.commands import OneLineParser
from storage.serving import LockRefused

COMMANDS = {
    "generate": "evaluation.cli.generate",
    "segment": "evaluation.cli.segment",
    "extract": "evaluation.cli.extract",
    "run": "evaluation.cli.run",
    "explicit": "evaluation.cli.explicit",
    "score": "evaluation.cli.score",
    "build-tiny": "evaluation.cli.build_tiny",
    "judgments": "evaluation.cli.judgments",
    "judge-audit": "evaluation.cli.judge_audit",
    "robustness": "evaluation.cli.robustness",
    "delete-run": "evaluation.cli.delete_run",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-parser per entry of `COMMANDS`."""
    parser = OneLineParser(prog="python -m evaluation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(handler=module.main)
    return parser


_BOOKKEEPING = ("schema_version", "change_counters")
"""The tables a new database has rows in before anything is stored (`storage.ensure_schema`)."""


def forget_made_database(args: argparse.Namespace | None) -> None:
    """Remove the database this command made (`evaluation.cli.open_db` with `create`, which
    records it as ``args.made_database``: ``--db`` named no file; a link's target, never the
    link), with its lock file and the folders above it if the command made those too, when
    the command was refused before it stored a run: a refused command writes nothing
    (outside probe 208: a run refused for its size or its masking left a new, empty database
    and its lock file)."""
    made = getattr(args, "made_database", None)
    if made is None:
        return
    db, real, lock_made, folders = made
    if any(db[table].count for table in db.table_names() if table not in _BOOKKEEPING):
        return  # a run was stored after all, or something else wrote there meanwhile: it stays
    db.close()
    for made_file in (f"{real}-wal", f"{real}-shm", real):  # SQLite's files beside it, then it
        Path(made_file).unlink(missing_ok=True)
    serving.let_go(real)
    if lock_made:
        serving.lock_path(real).unlink(missing_ok=True)
    for folder in folders:  # deepest first, each only while empty
        with contextlib.suppress(OSError):
            folder.rmdir()


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` and run the command; a ValueError, a file it cannot read or write, a
    database newer than this code, a full disk or a database locked too long becomes a
    one-line error and exit code 2; Ctrl-C one line and exit code 130, SIGTERM the same line
    and 143."""
    main_thread = threading.current_thread() is threading.main_thread()
    # A stop (SIGTERM) ends a command as Ctrl-C does, with the shell's status for it (143, not
    # Ctrl-C's 130), from the first moment (building the parser imports for a second or
    # more); the caller's handler comes back after.
    stopped: list[int] = []

    def stop(signum, frame):
        stopped.append(signum)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, stop) if main_thread else None
    prefix = "python -m evaluation"
    args = None
    try:
        args = build_parser().parse_args(argv)
        prefix = f"python -m evaluation {args.command}"
        if getattr(args, "data_dir", None) is not None:
            refuse_file_in_the_way(args.data_dir)
        return args.handler(args)
    except (ValueError, SchemaRefused, LockRefused) as exc:
        forget_made_database(args)
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.OperationalError) as exc:
        condition = storage_condition(exc)
        if condition is None and not isinstance(exc, OSError):
            raise
        text = getattr(exc, "strerror", None) or exc
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        if condition is None:  # a file named on the command line is missing, a folder, or taken
            print(f"{prefix}: error: {text}{where}", file=sys.stderr)
        else:  # what was committed stays; a run resumes where it stopped
            what, then = OPERATOR_WORDS[condition]
            print(
                f"{prefix}: error: {what} ({text}{where}); what was recorded stays: {then}, "
                "then the same command again goes on where it stopped",
                file=sys.stderr,
            )
        return 2
    except KeyboardInterrupt:
        print(
            f"{prefix}: {'stopped (SIGTERM)' if stopped else 'interrupted'}; what was recorded stays: "
            "the same command again resumes a run",
            file=sys.stderr,
        )
        return 128 + signal.SIGTERM if stopped else 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
