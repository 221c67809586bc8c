"""Kill an evaluation run with SIGKILL and resume it: the same rows and files as a run
that was never interrupted.

Both runs go through the engine's command line (``python -m evaluation generate``) on
the tiny random model (``python -m evaluation build-tiny``), on the CPU unless told
otherwise, each in its own database and data folder. The killed run is a separate
process; the uninterrupted run and the resumption run in this one.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from annotation.integrity import orphaned_files
from evaluation.__main__ import main as evaluation_main
from storage import read_only

ROOT = Path(__file__).resolve().parent.parent
RUN = "resume"
# Columns that record when or how fast, not what: they differ between any two runs.
VOLATILE_COLUMNS = ("id", "gen_seconds", "seg_seconds", "updated_at")


@dataclass(frozen=True)
class ResumeResult:
    """An interrupted-then-resumed run next to an uninterrupted one.

    Attributes
    ----------
    total : int
        Items of the run.
    generated_at_kill : int
        Items recorded as generated when the process was killed.
    rows, reference_rows : list of dict
        ``run_items`` of the resumed and of the uninterrupted run, without
        `VOLATILE_COLUMNS`, in item-key order.
    files, reference_files : dict
        Relative path -> sha256 of every file under each data folder's ``runs/``.
    orphans : list of str
        Files of the resumed run that no row names (`annotation.integrity`).
    """

    total: int
    generated_at_kill: int
    rows: list[dict]
    reference_rows: list[dict]
    files: dict[str, str]
    reference_files: dict[str, str]
    orphans: list[str]


def build_tiny_models(models_dir: str | Path) -> Path:
    """Build the engine's tiny random models into `models_dir`; the diffusion model's folder."""
    _in_process(["python", "-m", "evaluation", "build-tiny", "--models-dir", str(models_dir)])
    return Path(models_dir) / "tiny-random"


def generate_argv(
    model_dir: Path,
    db: Path,
    data_dir: Path,
    *,
    concepts: tuple[str, ...],
    styles: tuple[str, ...],
    samples: int,
    cfg: tuple[float, ...],
    batch_size: int,
    device: str,
) -> list[str]:
    """The ``python -m evaluation generate`` command of the test run."""
    return [
        sys.executable,
        "-m",
        "evaluation",
        "generate",
        "--run",
        RUN,
        "--model",
        "tiny-random",
        "--source",
        str(model_dir),
        "--concepts",
        ",".join(concepts),
        "--styles",
        ",".join(styles),
        "--cfg",
        ",".join(map(str, cfg)),
        "--samples",
        str(samples),
        "--batch-size",
        str(batch_size),
        "--device",
        device,
        "--db",
        str(db),
        "--data-dir",
        str(data_dir),
    ]


def kill_and_resume_run(
    workdir: str | Path,
    model_dir: str | Path,
    *,
    concepts: tuple[str, ...] = ("apple", "banana", "lemon"),
    styles: tuple[str, ...] = ("natural", "clipart"),
    samples: int = 2,
    cfg: tuple[float, ...] = (2.0, 7.5),
    batch_size: int = 2,
    kill_after: int = 2,
    device: str = "cpu",
) -> ResumeResult:
    """Run once without interruption; run again, SIGKILL it after `kill_after` items, resume.

    Parameters
    ----------
    workdir : str or Path
        Gets ``reference/`` and ``resumed/``, each with a database and a data folder.
    model_dir : str or Path
        The tiny diffusion model (`build_tiny_models`).
    kill_after : int
        Kill once at least this many items are recorded as generated (>= 1).
    """
    workdir, model_dir = Path(workdir), Path(model_dir)
    argv = {
        name: generate_argv(
            model_dir,
            workdir / name / "db.sqlite",
            workdir / name / "data",
            concepts=concepts,
            styles=styles,
            samples=samples,
            cfg=cfg,
            batch_size=batch_size,
            device=device,
        )
        for name in ("reference", "resumed")
    }
    _in_process(argv["reference"])
    killed = subprocess.Popen(argv["resumed"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    generated = _wait_for(workdir / "resumed" / "db.sqlite", kill_after, killed)
    killed.kill()
    killed.wait()
    _in_process(argv["resumed"])
    return ResumeResult(
        total=len(_rows(workdir / "reference" / "db.sqlite")),
        generated_at_kill=generated,
        rows=_rows(workdir / "resumed" / "db.sqlite"),
        reference_rows=_rows(workdir / "reference" / "db.sqlite"),
        files=_files(workdir / "resumed" / "data"),
        reference_files=_files(workdir / "reference" / "data"),
        orphans=_orphans(workdir / "resumed" / "db.sqlite", workdir / "resumed" / "data"),
    )


def _in_process(argv: list[str]) -> None:
    """Run ``python -m evaluation ...`` `argv` in this process (torch is imported once)."""
    code = evaluation_main(argv[3:])
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[1:])} exited with {code}")


def _generated(db_path: Path) -> int:
    try:
        with read_only(db_path) as conn:
            return conn.execute("select count(*) from run_items where status = 'generated'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _wait_for(db_path: Path, kill_after: int, proc: subprocess.Popen) -> int:
    """Poll until `kill_after` items are generated or the process ends; the count then."""
    while proc.poll() is None:
        generated = _generated(db_path)
        if generated >= kill_after:
            return generated
        time.sleep(0.05)
    return _generated(db_path)


def _rows(db_path: Path) -> list[dict]:
    with sqlite3.connect(db_path) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("select * from run_items order by model, concept, style, cfg, sample").fetchall()
    return [{k: row[k] for k in row.keys() if k not in VOLATILE_COLUMNS} for row in rows]  # noqa: SIM118 (sqlite3.Row: `in` tests values)


def _files(data_dir: Path) -> dict[str, str]:
    root = data_dir / "runs"
    return {
        p.relative_to(data_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _orphans(db_path: Path, data_dir: Path) -> list[str]:
    db = sqlite_utils.Database(str(db_path))
    try:
        return orphaned_files(db, data_dir)
    finally:
        db.close()
