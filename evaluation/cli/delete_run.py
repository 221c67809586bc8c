"""Delete a run: its rows (items, model distributions, scores, explicit prompts and verdicts)
and its files under --data-dir/runs/<run>/.

Without --yes it only says what the run holds. Refused while a job runs it (in the app or
another command) and while a study shows it. Files that a database kept beside this one names
(the way back from a restore or an upgrade) stay. An audit row says it was deleted from
the command line, by whom (user@host), and the rows deleted per table.

Example:
  python -m evaluation delete-run --run demo          # say what it holds
  python -m evaluation delete-run --run demo --yes    # delete it
"""

from __future__ import annotations

import argparse
import getpass
import shlex
import socket

from evaluation.cli import add_storage_arguments, default_data_dir, open_db

HELP = "delete a run with its rows and files (without --yes: say what it holds)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `delete-run`."""
    parser.add_argument("--run", required=True, help="run name")
    parser.add_argument("--yes", action="store_true", help="delete it (without: only say what it holds)")
    add_storage_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Say what the run holds; with --yes, delete it."""
    from evaluation.pipeline import removal, runs

    db = open_db(args)
    held = removal.footprint(db, args.run, args.data_dir)
    removal.refuse_deletion(db, args.run)
    if not args.yes:
        command = ["python", "-m", "evaluation", "delete-run", "--run", args.run, "--yes"]
        if args.db:
            command += ["--db", str(args.db)]
        if args.data_dir != default_data_dir():
            command += ["--data-dir", str(args.data_dir)]
        print(
            f"run {args.run!r} holds {held.sentence()}; nothing deleted. To delete it for good:\n  {shlex.join(command)}"
        )
        return 0
    # Who, as the audit trail of the app's deletions says it: the command line, and where.
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    record = removal.audited(runs.COMMAND_LINE, args.run, by=by)
    rows, files = removal.delete_run(db, args.run, args.data_dir, record=record)
    print(f"run {args.run!r} deleted: {removal.rows_sentence(rows)}; {files.sentence()}")
    return 0
