"""Sub-commands of ``python -m evaluation`` and the options they share."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable

from storage import DEFAULT_DATA_DIR, DEFAULT_DB_PATH, ENV_DB


def default_db() -> Path:
    """``$COLORCONCEPT_DB``, else ``data/colorconcept.sqlite`` under the project root."""
    return Path(os.environ.get(ENV_DB, DEFAULT_DB_PATH))


def add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--data-dir``."""
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default: $COLORCONCEPT_DB or data/colorconcept.sqlite)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder for runs/ and models/ (default: data/)")


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device``."""
    parser.add_argument("--device", default="auto", help="cuda, cuda:N, cpu, or auto (cuda if available; default)")


def open_db(args: argparse.Namespace):
    """The run database named by ``--db``, with the evaluation schema ensured."""
    from evaluation.pipeline.runs import connect

    return connect(args.db or default_db())


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; other names unchanged."""
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def progress_bar(description: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A tqdm bar (with rate and ETA) as a ``progress(done, total)`` callback, and its close."""
    from tqdm import tqdm

    bar = tqdm(desc=description, unit="item", dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        bar.update(done - bar.n)

    return update, bar.close
