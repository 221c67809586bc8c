"""Settings of one running app; everything a handler needs besides the request."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from annotation.coloring.pool import default_workers
from storage import DEFAULT_DATA_DIR, DEFAULT_DB_PATH, ENV_DATA_DIR, ENV_DB
from storage.shown import shown

ENV_MAX_SUBMISSIONS = "COLORCONCEPT_MAX_SUBMISSIONS_PER_MINUTE"
ENV_SWATCHES = "COLORCONCEPT_SWATCHES"
ENV_SUBMIT_CONCURRENCY = "COLORCONCEPT_SUBMIT_CONCURRENCY"
ENV_SEED = "COLORCONCEPT_SEED"

# Concepts of the three practice sketches (Appendix B.3 says three, not which): one
# original, one visual-state and one emotional variant, all with simple line art.
PRACTICE_CONCEPTS = ("banana", "rotten apple", "cozy cabin")


@dataclass(frozen=True)
class AppConfig:
    """Settings of the app; defaults follow the paper where it gives a number.

    Attributes
    ----------
    db_path : Path
        The SQLite file (env `ENV_DB`, flag ``--db``).
    data_dir : Path
        Where images and other written files go (env `ENV_DATA_DIR`, flag ``--data-dir``).
    public_url : str
        The address people open; invite links start with it.
    colorings_per_concept : int
        K, colorings per concept variant from K different designers (paper: 5).
    batch_size : int
        Colorization tasks handed out at once (issue: 40-50).
    votes_per_review : int
        Expert votes per coloring under review (paper: 3).
    votes_per_pair : int
        Participant votes per pair in the pairwise study (paper: 6).
    reservation_minutes : float
        How long a handed-out task stays reserved before it returns to the pool.
    auto_approve_practice : bool
        Open the main task right after the practice colorings, without an admin; each
        approval is recorded (`annotation.people.onboarding.AUTO_APPROVER`) and kept.
    practice_concepts : tuple of str
        Concept keys of the practice colorings.
    invite_days, session_days : float
        Lifetimes of invite links and of sign-ins.
    admin_password_file : Path or None
        A file whose first line is the admin password (see `annotation.people.passwords`).
    max_upload_pixels, max_upload_bytes : int
        Limits on uploaded images.
    max_file_upload_bytes : int
        The largest file anyone may upload at all (Gradio's ``max_file_size``; a zip of
        model images to import is the largest the page takes). Only signed-in researchers
        and the admin upload (`app.guard`).
    min_painted_fraction : float
        Share of a sketch's non-line pixels a designer must paint before submitting.
    max_submissions_per_minute : int
        The most colorings one designer may submit in any minute (env
        `ENV_MAX_SUBMISSIONS`); a person needs far longer for one, so more is a script.
    workers : int
        Processes that decode, check and extract submitted colorings
        (`annotation.coloring.pool`; env ``COLORCONCEPT_WORKERS``, default one per core);
        0 does that work in the request's thread.
    submit_concurrency : int
        Designer submissions handled at once (env ``COLORCONCEPT_SUBMIT_CONCURRENCY``); the
        others wait their turn in Gradio's queue, and sign-in, task views, experts and
        participants have queues of their own. Two keep the coloring workers busy while
        one submission writes; more only make the writer wait for the GIL behind the
        others (`BENCHMARKS.md`, "Submissions at once").
    swatches : tuple of str
        Preset colors ``"#rrggbb"`` the designers' picker offers (env `ENV_SWATCHES`,
        comma-separated). None by default: a preset palette steers the colors the study
        measures (README, "Preset swatches").
    seed : int or None
        Seed of the app's one random generator (`app.common.AppContext.rng`), from which
        every assignment, vote queue and trial order is drawn (env `ENV_SEED`, flag
        ``--seed``); a whole number >= 0. None (the default) draws fresh entropy; with a
        seed, the same calls in the same order over the same database give the same draws.
    """

    db_path: Path = DEFAULT_DB_PATH
    data_dir: Path = DEFAULT_DATA_DIR
    public_url: str = "http://127.0.0.1:7860"
    colorings_per_concept: int = 5
    batch_size: int = 40
    votes_per_review: int = 3
    votes_per_pair: int = 6
    reservation_minutes: float = 120.0
    auto_approve_practice: bool = False
    practice_concepts: tuple[str, ...] = PRACTICE_CONCEPTS
    invite_days: float = 30.0
    session_days: float = 14.0
    admin_password_file: Path | None = None
    max_upload_pixels: int = 4096 * 4096
    max_upload_bytes: int = 32 * 1024 * 1024
    max_file_upload_bytes: int = 1024**3
    min_painted_fraction: float = 0.005
    max_submissions_per_minute: int = 20
    workers: int = 0
    submit_concurrency: int = 2
    swatches: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "colorings_per_concept",
            "batch_size",
            "votes_per_review",
            "votes_per_pair",
            "max_upload_pixels",
            "max_upload_bytes",
            "max_file_upload_bytes",
            "max_submissions_per_minute",
            "submit_concurrency",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive whole number, got {shown(value)}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"`workers` must be a whole number >= 0, got {shown(self.workers)}")
        for name in ("reservation_minutes", "invite_days", "session_days"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"`{name}` must be a positive number, got {shown(value)}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise ValueError(f"`seed` must be a whole number >= 0, got {shown(self.seed)}")
        swatches = tuple(self.swatches)
        for swatch in swatches:
            if not isinstance(swatch, str) or not re.fullmatch(r"#[0-9a-fA-F]{6}", swatch):
                raise ValueError(f"`swatches` must be colors such as '#d62828', got {shown(swatch)}")
        object.__setattr__(self, "swatches", tuple(s.lower() for s in swatches))
        object.__setattr__(self, "db_path", Path(self.db_path))
        object.__setattr__(self, "data_dir", Path(self.data_dir))

    @classmethod
    def from_env(cls, **overrides) -> AppConfig:
        """Defaults, then environment variables, then `overrides` (None values ignored).

        Unlike the bare defaults (used by tests), `workers` defaults to one per core here.
        """
        values: dict = {"workers": default_workers()}
        if os.environ.get(ENV_DB):
            values["db_path"] = Path(os.environ[ENV_DB])
        if os.environ.get(ENV_DATA_DIR):
            values["data_dir"] = Path(os.environ[ENV_DATA_DIR])
        for name, field in (
            (ENV_MAX_SUBMISSIONS, "max_submissions_per_minute"),
            (ENV_SUBMIT_CONCURRENCY, "submit_concurrency"),
        ):
            if os.environ.get(name):
                values[field] = _positive_whole(os.environ[name], name)
        if os.environ.get(ENV_SEED):
            values["seed"] = parse_seed(os.environ[ENV_SEED], ENV_SEED)
        if os.environ.get(ENV_SWATCHES):
            values["swatches"] = tuple(s.strip() for s in os.environ[ENV_SWATCHES].split(",") if s.strip())
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def replace(self, **changes) -> AppConfig:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)


def _positive_whole(text: str, name: str) -> int:
    """The whole number >= 1 that the environment variable `name` holds as `text` (its
    refusal named the field, not the variable: outside probe 167)."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit() and int(stripped) >= 1):
        raise ValueError(f"${name} must be a whole number >= 1, got {shown(text)}")
    return int(stripped)


def parse_seed(text: str, source: str = "seed") -> int:
    """The seed written in `text` (from the environment or the command line).

    Parameters
    ----------
    text : str
        Decimal digits, e.g. ``"42"``; surrounding spaces are ignored.
    source : str
        Where `text` came from, named in the message (``"COLORCONCEPT_SEED"``, ``"--seed"``).

    Raises
    ------
    ValueError
        If `text` is not a whole number >= 0.
    """
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit():
        raise ValueError(f"`seed` ({source}) must be a whole number >= 0, got {shown(text)}")
    return int(stripped)
