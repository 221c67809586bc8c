"""Write a judge audit: its tables as CSV and a self-contained HTML report.

Files written to a folder (created if missing; files of the same names replaced):

=========================  ===============================================================
``pairs.csv``              the pairs frame of every judge (`evaluation.judges.accuracy`)
``summary.csv``            accuracy per judge and split (`evaluation.judges.accuracy.summary`)
``failures-<judge>.csv``   per judge: the true term x foil term failure matrix
                           (replacement foils), ``<judge>`` made file-safe
``report.html``            the summary table and one failure heatmap per judge, opening
                           offline (plotly.js inline once)
=========================  ===============================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evaluation.analysis.figures import judge_failure_heatmap
from evaluation.judges.accuracy import failure_matrix, run_audit, summary
from evaluation.judges.judges import load_judge, parse_judge
from evaluation.judges.probes import ProbeItem
from storage.spreadsheet import write_csv


@dataclass(frozen=True)
class AuditReport:
    """What `audit` found and wrote.

    Attributes
    ----------
    summary : pandas.DataFrame
        `evaluation.judges.accuracy.summary` of every judge.
    matrices : dict of str to pandas.DataFrame
        Judge name -> its failure matrix (replacement foils), in the order judged.
    paths : list of Path
        The files written (`write_audit`).
    """

    summary: pd.DataFrame
    matrices: dict[str, pd.DataFrame]
    paths: list[Path]


def audit(
    specs: Sequence[str],
    items: Sequence[ProbeItem],
    folder: str | Path,
    *,
    rng: np.random.Generator,
    device: str = "cpu",
    dtype=None,
    progress: Callable[[str], tuple[Callable[[int, int], None], Callable[[], None]]] | None = None,
    sources: Mapping[str, str] | None = None,
) -> AuditReport:
    """Audit the judges `specs` on `items` and write the report to `folder`.

    Parameters
    ----------
    specs : sequence of str
        Judge specifications (`evaluation.judges.judges.load_judge`); all are checked
        before any model loads.
    items : sequence of ProbeItem
    folder : str or Path
        See `write_audit`.
    rng : numpy.random.Generator
        The random judge's draws.
    device, dtype
        For the model judges.
    progress : callable, optional
        ``progress(judge name) -> (update(done, total), close())``, e.g.
        `evaluation.cli.progress_bar`.
    sources : mapping of str to str, optional
        Where a spec's model loads from, by spec, when not from its own name (the app's
        folders, `evaluation.models.availability.served_judge_source`); the judge keeps the
        spec as its name.

    Raises
    ------
    ValueError
        If there are no specs or items, or a spec is malformed.
    """
    # 1. Check the inputs before loading anything.
    if not specs:
        raise ValueError("`specs` is empty: name at least one judge")
    if not items:
        raise ValueError("`items` is empty")
    for spec in specs:
        parse_judge(spec)
    # 2. Load each judge and run it over the items.
    frames, chance = [], {}
    for spec in specs:
        judge = load_judge(spec, rng=rng, device=device, dtype=dtype, source=(sources or {}).get(spec))
        update, close = progress(judge.name) if progress else (None, None)
        try:
            frames.append(run_audit(judge, items, progress=update))
        finally:
            if close:
                close()
        chance[judge.name] = judge.chance
    # 3. Write the tables and the report.
    pairs = pd.concat(frames, ignore_index=True)
    paths = write_audit(pairs, folder, chance=chance)
    matrices = {name: failure_matrix(part) for name, part in pairs.groupby("judge", sort=False)}
    return AuditReport(summary(pairs, chance), matrices, paths)


def file_safe(name: str) -> str:
    """`name` with every run of characters other than letters, digits, ``.`` ``_`` ``-`` as ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "judge"


def write_audit(
    pairs: pd.DataFrame, folder: str | Path, *, chance: dict[str, float] | None = None
) -> list[Path]:
    """Write the audit of one or more judges to `folder` (see the module docstring).

    Parameters
    ----------
    pairs : pandas.DataFrame
        Pairs frames of `evaluation.judges.accuracy.run_audit`, concatenated.
    folder : str or Path
    chance : dict, optional
        Judge name -> chance pair-wise accuracy, for the summary's ``chance`` column.

    Returns
    -------
    list of Path
        ``pairs.csv``, ``summary.csv``, the failure CSVs in judge order, ``report.html``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table = summary(pairs, chance)
    paths = [folder / "pairs.csv", folder / "summary.csv"]
    write_csv(pairs, paths[0], index=False)
    write_csv(table, paths[1], index=False)
    sections = []
    for i, (judge, part) in enumerate(pairs.groupby("judge", sort=False)):
        matrix = failure_matrix(part)
        path = folder / f"failures-{file_safe(str(judge))}.csv"
        write_csv(matrix, path)
        paths.append(path)
        fig = judge_failure_heatmap(matrix, title=f"{judge}: failure rate of replacement foils")
        sections.append(fig.to_html(include_plotlyjs=i == 0, full_html=False, div_id=f"judge-{i}"))
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Color judge audit</title></head><body>"
        "<h1>Color judge audit</h1><p>Pair-wise accuracy: the match accepted and the foil rejected. "
        "~ adjacent, &#9889; complementary on the color wheel.</p>"
        f"{table.to_html(index=False, float_format=lambda v: f'{v:.3f}', escape=True)}"
        f"{''.join(sections)}</body></html>"
    )
    paths.append(folder / "report.html")
    paths[-1].write_text(page, encoding="utf-8")
    return paths


def describe(table: pd.DataFrame) -> str:
    """The summary table as plain text for a terminal."""
    return table.to_string(index=False, float_format=lambda v: f"{v:.3f}")
