"""Start ColorConcept Lab: ``python app.py [--db PATH] [--data-dir DIR] [--host H] [--port P] [--seed N]``.

The app is imported inside the functions, not at the top: the coloring pool's workers are
spawned, and a spawned process runs this file again (as ``__mp_main__``) before it takes
work, so a top-level import of `app` loaded Gradio and every tab into each worker.
"""

from __future__ import annotations

import argparse
import errno
import faulthandler
import logging
import os
import signal
import socket
import sqlite3
import threading
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from app.config import ENV_DB, ENV_SEED
    from storage.commands import OneLineParser

    parser = OneLineParser(prog="python app.py", description="ColorConcept Lab web app")
    parser.add_argument("--db", help=f"SQLite file (default: ${ENV_DB} or data/colorconcept.sqlite)")
    parser.add_argument("--data-dir", help="folder for images and other written files")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=_port, default=7860, help="port to listen on (0-65535)")
    parser.add_argument("--public-url", help="address people open (default http://HOST:PORT)")
    parser.add_argument(
        "--auto-approve-practice",
        action="store_true",
        help="open the main task right after the practice colorings (each approval is recorded and kept)",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        help=f"seed of the app's random draws (assignments, vote queues, trial orders), a whole "
        f"number >= 0 (default: ${ENV_SEED}, else unseeded)",
    )
    return parser.parse_args(argv)


def _port(text: str) -> int:
    """``--port``: a whole number from 0 to 65535 (99999 ended in a traceback: outside probe 167)."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit() and int(stripped) <= 65535):
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 65535, got {text!r}")
    return int(stripped)


def _seed(text: str) -> int:
    from app.config import parse_seed

    try:
        return parse_seed(text, "--seed")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> None:
    from annotation.errors import AnnotationError
    from app import SecretServed, build_app, check_secrets, data_dir_refusal, launch_options, mark_ready
    from app.common import StartRefused
    from app.config import AppConfig
    from app.health import Health
    from storage import SchemaRefused, db_path_refusal, unwritable
    from storage.serving import LockRefused

    args = parse_args(argv)
    _log_with_times()
    print(f"{_now()} Starting ColorConcept Lab (pid {os.getpid()}) on {args.host}:{args.port}", flush=True)
    try:
        config = AppConfig.from_env(
            db_path=args.db,
            data_dir=args.data_dir,
            public_url=args.public_url or f"http://{args.host}:{args.port}",
            auto_approve_practice=args.auto_approve_practice or None,
            seed=args.seed,
        )
    except ValueError as error:
        raise SystemExit(f"Refusing to start: {error}.") from None
    try:
        check_secrets(config)  # before any start-up work: a refused start writes nothing
    except SecretServed as error:
        raise SystemExit(f"Refusing to start: {error}.") from None
    if refusal := db_path_refusal(config.db_path):
        raise SystemExit(f"Refusing to start: {refusal}.")
    if refusal := data_dir_refusal(config.data_dir):
        raise SystemExit(f"Refusing to start: {refusal}.")
    _check_port(args.host, args.port)
    try:
        demo = build_app(config)
    except (SchemaRefused, AnnotationError, LockRefused, StartRefused) as error:
        raise SystemExit(f"Refusing to start: {error}.") from None
    except sqlite3.OperationalError as error:
        raise SystemExit(f"Refusing to start: {unwritable(config.db_path, error)}.") from None
    options = launch_options(config, demo)
    demo.queue(default_concurrency_limit=8)
    try:
        demo.launch(server_name=args.host, server_port=args.port, prevent_thread_lock=True, **options)
    except (OSError, ValueError) as error:
        demo.close()
        raise SystemExit(f"Could not start on {args.host}:{args.port}: {error}") from None
    mark_ready(demo)
    # What /healthz answers now: a start on a nearly full disk said 200 and then answered 503.
    problem = Health(config.db_path, config.data_dir).problem()
    answer = f"503 for now (cannot take work: {problem})" if problem else "200"
    print(f"Ready: http://{args.host}:{args.port}/healthz answers {answer} ({_now()})", flush=True)
    # A supervisor's stop (SIGTERM) ends the app as Ctrl-C does: its coloring workers and
    # their semaphores are closed, not left to the resource tracker's warning. The signal
    # only sets `STOPPING`, which the main thread waits on: an exception raised by the handler
    # is lost when it lands in a finaliser the main thread happens to run (outside checks saw a
    # first SIGTERM do nothing, twice); a second signal stops at once.
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, _stop)
    try:
        while demo.is_running and not STOPPING.wait(0.5):
            pass
    finally:
        print(f"{_now()} Stopping (pid {os.getpid()})", flush=True)
        # Whatever would hang the stop (a thread that never ends) is dumped and the process
        # ends, rather than a supervisor waiting on it forever.
        faulthandler.dump_traceback_later(STOP_WAIT_S, exit=True)
        demo.close()  # the app's services too (`app.common.AppContext.close`)
        faulthandler.cancel_dump_traceback_later()
        print(f"{_now()} Stopped (pid {os.getpid()})", flush=True)


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def _log_with_times() -> None:
    """The app's warnings with the time (UTC): an operator reading the log weeks later could
    not tell when it started, stopped or found what a killed run left (an outside check)."""
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S UTC")
    formatter.converter = time.gmtime
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logging.getLogger().addHandler(handler)


STOPPING = threading.Event()
"""Set by the first SIGTERM or Ctrl-C (`_stop`)."""
STOP_WAIT_S = 120
"""How long the stop may take before the process dumps its threads' stacks and exits."""


def _stop(signum, frame) -> None:
    if not STOPPING.is_set():
        STOPPING.set()
        return
    # The second signal ends the process here: a SystemExit waited on the coloring workers'
    # joins at exit (2 minutes once) and ended with status 0 and no word (outside probe 167).
    print(
        f"{_now()} Stopped at once by a second signal (pid {os.getpid()}): the stop under way was not "
        "waited for; every acknowledged write is stored (an interrupted one is rolled back)",
        flush=True,
    )
    os._exit(128 + signum)


def _check_port(host: str, port: int) -> None:
    """Exit at once, naming the address, when it cannot be listened on (before the minute of
    start-up work that would otherwise come first)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        # The hint fits the cause (every failure asked "is another app on it?": outside probe 167)
        hint = {
            errno.EADDRINUSE: "is another app on it?",
            errno.EADDRNOTAVAIL: "--host must be an address of this machine, e.g. 127.0.0.1 or 0.0.0.0",
            errno.EACCES: "ports under 1024 need root; choose another --port",
        }.get(error.errno, "")
        if isinstance(error, socket.gaierror):
            hint = "no such host name: --host must be an address or name of this machine, e.g. 127.0.0.1 or 0.0.0.0"
        said = f"{error.strerror or error}" + (f" ({hint})" if hint else "")
        raise SystemExit(f"Could not start on {host}:{port}: {said}") from None


if __name__ == "__main__":
    main()
