"""What the two command lines (``python -m annotation``, ``python -m evaluation``) share."""

from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose refusal of an option is one line, exit status 2:
    ``<prog>: error: <why> (<prog> --help lists the options)``. Argparse printed its usage
    block first, 21 lines before the reason for ``run`` (outside probe 236); sub-parsers
    made by `add_subparsers` are of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")
