"""Command line: ``python -m annotation export DIR``, ``backup DIR``, ``restore DIR``,
``set-admin-password``, ``check-distributions [--repair]``, ``erase-platform-ids WHO`` and
``close-study ID``.

The database is ``--db PATH``, else ``$COLORCONCEPT_DB``, else ``data/colorconcept.sqlite``;
the data folder is ``--data-dir``, else ``$COLORCONCEPT_DATA_DIR``, else ``data/``.

Every command but ``restore`` holds the database's shared lock while it runs
(`storage.serving`), so a restore waits for none of them and never runs under them;
``restore`` refuses while the app, an evaluation run or another command holds it.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sqlite3
import sys
from pathlib import Path

from annotation import backup
from annotation.coloring import ground_truth
from annotation.errors import AnnotationError
from annotation.export import export
from annotation.people.accounts import Actor
from annotation.people.passwords import set_admin_password
from annotation.study import crowd
from annotation.study import design as study_design
from storage import (
    DEFAULT_DATA_DIR,
    DEFAULT_DB_PATH,
    ENV_DATA_DIR,
    ENV_DB,
    SchemaRefused,
    db_path_refusal,
    ensure_schema,
    open_db,
    ownership,
    serving,
    unwritable,
)
from storage.commands import OneLineParser
from storage.files import file_in_the_way
from storage.schema import MIGRATIONS
from storage.shown import counted, shown

#: Who the audit log names for what a command does.
COMMAND_LINE = Actor(None, "admin (command line)", frozenset({"admin"}))


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m annotation", description="ColorConcept Lab annotation store")
    parser.add_argument(
        "--db",
        default=os.environ.get(ENV_DB) or str(DEFAULT_DB_PATH),
        help="SQLite file (default: $COLORCONCEPT_DB or data/colorconcept.sqlite)",
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get(ENV_DATA_DIR) or str(DEFAULT_DATA_DIR),
        help="data folder holding the images (default: $COLORCONCEPT_DATA_DIR or data/)",
    )
    # Taken after the command's name too (`backup --db X OUT`: an operator's first try was
    # refused); given there, they win over the ones before it.
    storage_options = argparse.ArgumentParser(add_help=False)
    storage_options.add_argument("--db", default=argparse.SUPPRESS, help="as before the command")
    storage_options.add_argument("--data-dir", default=argparse.SUPPRESS, help="as before the command")
    commands = parser.add_subparsers(dest="command", required=True)
    shared = {"parents": [storage_options]}
    out = commands.add_parser("export", help="CSV + Parquet of every table, images.zip", **shared)
    out.add_argument("folder", help="a new or empty folder to write to")
    out.add_argument(
        "--external-ids",
        action="store_true",
        help="add the table crowd_external_ids: crowd participants' platform ids (personal data)",
    )
    password = commands.add_parser(
        "set-admin-password", help="choose a new admin password (read from the terminal)", **shared
    )
    password.add_argument("--stdin", action="store_true", help="read it from standard input")
    check = commands.add_parser(
        "check-distributions",
        help="recompute every designers' P_H from the coloring images and report differences",
        **shared,
    )
    check.add_argument(
        "--repair", action="store_true", help="also rewrite the stored samples and P_H from the images"
    )
    erase = commands.add_parser(
        "erase-platform-ids",
        help="at a crowd participant's request: erase their platform ids and close their account",
        description="Erase a crowd participant's platform ids (their id, the platform's study and "
        "session ids, the address) and close their account, in one transaction; their votes stay "
        "under their pseudonym. Earlier exports, backups and payment files are not changed.",
        **shared,
    )
    erase.add_argument("who", help="their pseudonym (P0016) or their platform id")
    erase.add_argument(
        "--link", type=_an_id, default=None, help="the study link, when the id joined more than one"
    )
    erase.add_argument("--why", required=True, help="whose request this is (goes to the audit log)")
    which = erase.add_mutually_exclusive_group()
    which.add_argument(
        "--pseudonym", action="store_const", const="pseudonym", dest="by", help="WHO is a pseudonym"
    )
    which.add_argument(
        "--platform-id", action="store_const", const="platform id", dest="by", help="WHO is a platform id"
    )
    close = commands.add_parser(
        "close-study",
        help="close an open pairwise study for good: nobody is handed its trials any more, its open "
        "links close (its judgments stay); a closed study is not opened again",
        **shared,
    )
    close.add_argument("study", type=_an_id, help="the study's id (the Study tab's list)")
    close.add_argument("--why", required=True, help="why it is closed (goes to the audit log)")
    save = commands.add_parser(
        "backup",
        help="consistent copy of the database and its files, with a manifest of hashes (safe while serving)",
        **shared,
    )
    save.add_argument("folder", help="a new or empty folder to write to")
    save.add_argument(
        "--allow-missing",
        action="store_true",
        help="back up even where files the database names are missing from the data folder (listed in "
        "the manifest and said; a restore accepts exactly those as absent); without it such a backup is "
        "refused, naming them",
    )
    load = commands.add_parser(
        "restore",
        help="verify a backup's hashes, then make it the database and files; refused while the app "
        "or an evaluation run uses the database (stop them first)",
        description="Restore a backup as the database named by --db and the data folder named by "
        "--data-dir (python -m annotation restore --db FILE --data-dir DIR BACKUP); the database it "
        "replaces is kept beside it as <name>.before-restore-<time>.",
        **shared,
    )
    load.add_argument("folder", help="a folder written by `backup`, or the Admin tab's backup zip")
    return parser


def _pseudonym(db, annotator_id: int) -> str:
    return db["annotators"].get(annotator_id)["pseudonym"]


def _check_distributions(db, data_dir: str, repair: bool) -> int:
    found = ground_truth.check(db, data_dir, repair=repair)
    for difference in found:
        print(f"{difference.concept}: {difference.problem}")
    n = db.execute(
        "select count(*) from human_distributions where source = ?", [ground_truth.rows.DESIGNERS]
    ).fetchone()[0]
    verb = "repaired" if repair else "found"
    print(f"{len(found)} differences {verb}; {n} stored designers' distributions")
    return 1 if found and not repair else 0


def _restore(args: argparse.Namespace) -> int:
    try:
        done = backup.restore(args.folder, args.db, args.data_dir)
    except AnnotationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2 if not os.path.lexists(args.folder) else 1  # a path that cannot be right
    kept = (
        f"previous database kept as {done['previous']}"
        if done["previous"]
        else "there was no previous database"
    )
    older = (
        f"; this code's schema is {len(MIGRATIONS)}: the next start of the app or of a command "
        "migrates it, keeping a copy as it was"
        if done["schema_version"] < len(MIGRATIONS)
        else ""
    )
    print(
        f"restored schema version {done['schema_version']} with {len(done['files'])} "
        f"files ({done['copied']} copied); {kept}{older}"
    )
    if done.get("missing"):
        print(f"warning: {_missing(done['missing'])} when the backup was made: the restored study lacks them")
    for line in done["kept"]:  # denials made after the backup (`annotation.denials`)
        print(f"kept from the replaced database and the copies earlier restores kept: {line}")
    if done["other_study"]:  # by design (a study moved whole), but said (outside probe 210)
        replaced, restored = done["other_study"]
        print(
            f"note: the backup is of another study ({restored}) than the database it replaced "
            f"({replaced}): that study is not carried over; it stays whole in {done['previous']}"
        )
    if done["previous"]:  # the kept lines name denials only (outside probe 145)
        print(_dropped(done["dropped"], done["previous"], other_study=bool(done["other_study"])))
        if done["changed"]:
            print(
                "changed after the backup, not kept: rows of the replaced database that the backup holds "
                f"otherwise, in {', '.join(done['changed'])}; they stay in {done['previous']}"
            )
    return 0


def _dropped(dropped: dict[str, tuple[int, int]] | None, previous, *, other_study: bool = False) -> str:
    """What a restore took back, in words (`backup.fewer_rows`); `other_study`: the backup is
    of another study, whose accounts were never the replaced one's."""
    if dropped is None:
        return f"the replaced database could not be read to say what the restore took back; it is kept as {previous}"
    if not dropped:
        return "no table of the replaced database held more rows than the backup"
    tables = ", ".join(f"{name} {before} (now {after})" for name, (before, after) in dropped.items())
    line = (
        f"not kept: the replaced database held more rows than the backup in {tables}; they stay in {previous}"
    )
    if {"annotators", "invites"} & set(dropped) and other_study:
        line += (
            "\nthe replaced study's accounts and invite links are gone with it: its people's links read as "
            "mistyped (and count as failed sign-ins) until it is restored again"
        )
    elif {"annotators", "invites"} & set(dropped):
        line += (
            "\naccounts and invite links made after the backup are gone: give anyone sent one since a new "
            "link (theirs reads as mistyped, and counts as a failed sign-in)"
        )
    return line


def _missing(paths) -> str:
    """A backup's missing files in words: how many, and the first."""
    more = f" and {len(paths) - 1} other(s)" if len(paths) > 1 else ""
    return f"{len(paths)} file(s) the database names were missing from the data folder ({paths[0]!r}{more})"


def _inside_data_folder(folder: str, data_dir: str) -> str | None:
    """Why `folder` may not receive a backup or an export, or None: it lies inside the data
    folder, parts of which the app serves to signed-in people (a backup holds every hash and
    account; an export, the study's rows)."""
    target, data = Path(folder).resolve(), Path(data_dir).resolve()
    if target.is_relative_to(data):
        return (
            f"the folder {str(target)!r} lies inside the data folder {str(data)!r}, parts of which the "
            "app serves to signed-in people (colorings/, sketches/, runs/, exports/, downloads/); "
            "write it outside the data folder"
        )
    return None


def _an_id(text: str) -> int:
    """An id typed on the command line: a whole number of at most 18 digits, as the app takes
    ids (a 23-digit one ended in SQLite's OverflowError traceback: outside probe 200)."""
    if not re.fullmatch(r"\s*\+?\d{1,18}\s*", text, re.ASCII):
        raise argparse.ArgumentTypeError(f"must be a whole number of at most 18 digits, got {shown(text)}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except KeyboardInterrupt:  # Ctrl-C at a prompt or in a long export, backup or restore
        at_prompt = args.command == "set-admin-password" and not args.stdin
        print(
            ("\n" if at_prompt else "")
            + f"error: interrupted; {args.command} stopped, leaving nothing half-written (a command's "
            "changes are committed whole or not at all, an export or backup folder is made whole or "
            "not at all), so the same command again starts it over",
            file=sys.stderr,
        )
        return 130


#: The commands that read the data folder's files as the database's.
_ON_THE_DATA_FOLDER = ("export", "backup", "check-distributions")


def _command(args: argparse.Namespace) -> int:
    if args.command in ("export", "backup", "check-distributions", "restore") and (
        in_the_way := file_in_the_way(args.data_dir)
    ):
        # An export onto such a folder reported every image missing, unsaid.
        print(f"error: --data-dir {args.data_dir!r} {in_the_way}; give the data folder", file=sys.stderr)
        return 2
    if args.command == "restore":
        return _restore(args)
    if args.command in ("export", "backup") and (why := _inside_data_folder(args.folder, args.data_dir)):
        print(f"error: {why}", file=sys.stderr)
        return 2
    if (
        args.command in ("export", "check-distributions", "backup", "erase-platform-ids", "close-study")
        and not Path(args.db).is_file()
    ):
        print(f"error: no database at {args.db!r} (give --db PATH)", file=sys.stderr)
        return 2
    if refusal := db_path_refusal(args.db):
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    if args.command == "set-admin-password" and not Path(args.db).is_file():
        # It made a new database and said the password was changed (outside probe 200)
        print(f"error: no database at {args.db!r} (give --db PATH)", file=sys.stderr)
        return 2
    if args.command in _ON_THE_DATA_FOLDER and not Path(args.data_dir).is_dir():
        # An export wrote its folder with every image missing (outside probe 200)
        print(
            f"error: --data-dir {args.data_dir!r} does not exist; give the study's data folder (the app's --data-dir)",
            file=sys.stderr,
        )
        return 2
    if args.command in _ON_THE_DATA_FOLDER and (
        refusal := ownership.foreign_refusal(args.db, args.data_dir, args.command)
    ):
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    try:
        with serving.shared(args.db):
            return _run(args)
    except serving.LockRefused as error:  # a restore runs, or the folder takes no file
        print(f"error: {error}", file=sys.stderr)
        return 1
    except sqlite3.OperationalError as error:  # opening it writes (its -shm, the journal mode)
        print(f"error: {unwritable(args.db, error)}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    db = open_db(args.db)
    try:
        ensure_schema(db)
        if args.command == "backup":
            summary = backup.backup(db, args.data_dir, args.folder, allow_missing=args.allow_missing)
            print(
                f"backed up schema version {summary.schema_version} and {summary.files} files "
                f"({summary.bytes:,} bytes) to {summary.folder}"
            )
            if summary.missing:
                print(f"warning: {_missing(summary.missing)} not in this backup", file=sys.stderr)
            return 0
        if args.command == "check-distributions":
            return _check_distributions(db, args.data_dir, args.repair)
        if args.command == "erase-platform-ids":
            person = crowd.erase_platform_ids(
                db, args.who, COMMAND_LINE, args.why, link_id=args.link, by=args.by
            )
            payments = Path(args.data_dir) / "exports" / f"crowd-{person['link_id']}"
            # It named that folder when no payment file was ever written (outside probe 225).
            held = f"the payment files in {payments}/ and " if payments.exists() else ""
            print(
                f"erased the platform ids of annotator {person['annotator_id']} "
                f"({_pseudonym(db, person['annotator_id'])}, link {person['link_id']}, "
                f"status {person['status']}); their account is closed. Check {held}any export or backup "
                "made before: they still hold them; delete or amend those by hand"
            )
            return 0
        if args.command == "close-study":
            released = study_design.close_study(db, args.study, COMMAND_LINE, args.why)
            print(
                f"closed study {args.study} for good: its trials are handed to nobody any more ({released} held by "
                "participants released); its judgments stay, its open study links are closed, and the "
                "people of its links still judging end as study_closed"
            )
            return 0
        if args.command == "export":
            summary = export(db, args.data_dir, args.folder, external_ids=args.external_ids)
            # It printed the references as a dict ("images {'ok': 546}") for 314 files.
            refs, lacking = summary.images, []
            if refs.get("missing"):
                lacking.append(f"{refs['missing']:,} missing")
            if refs.get("sha256_mismatch"):
                lacking.append(f"{refs['sha256_mismatch']:,} with another sha256")
            print(
                f"exported {counted(len(summary.rows), 'table')} ({sum(summary.rows.values()):,} rows) and "
                f"{counted(summary.files, 'file')} in images.zip to {summary.folder}; its manifest.csv lists "
                f"the tables' {sum(refs.values()):,} references to files"
                + (f" ({', '.join(lacking)}: not in the zip)" if lacking else "")
            )
        else:
            if args.stdin:
                # A pipe may give it twice, as the prompt asks; a second line that differed
                # was ignored (outside probe 188). A terminal's first line ends it.
                lines = (
                    [sys.stdin.readline().rstrip("\n")]
                    if sys.stdin.isatty()
                    else sys.stdin.read().split("\n")
                )
                while len(lines) > 1 and not lines[-1]:
                    lines.pop()
                password = lines[0]
                if any(line != password for line in lines[1:]):
                    print(
                        f"error: --stdin takes the password on one line (or the same twice); the {len(lines)} "
                        "lines that came differ; the admin password was not changed",
                        file=sys.stderr,
                    )
                    return 1
            else:
                try:
                    password = getpass.getpass("New admin password: ")
                    again = getpass.getpass("The same again: ")
                except EOFError:  # no terminal, nothing piped in
                    print(
                        "error: no password was typed (no terminal?); pipe it in with --stdin; "
                        "the admin password was not changed",
                        file=sys.stderr,
                    )
                    return 1
                if again != password:
                    print(
                        "error: the two passwords differ; the admin password was not changed", file=sys.stderr
                    )
                    return 1
            set_admin_password(db, password, source="command line")
            print("admin password changed")
    except (AnnotationError, SchemaRefused) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
