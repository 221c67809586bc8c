"""Write a judge audit: its tables as CSV and a self-contained HTML report.

Files written to a folder (created if missing; files of the same names replaced):

=========================  ===============================================================
``pairs.csv``              the pairs frame of every judge (`evaluation.judges.audit`)
``summary.csv``            accuracy per judge and split (`evaluation.judges.audit.summary`)
``failures-<judge>.csv``   per judge: the true term x foil term failure matrix
                           (replacement foils), ``<judge>`` made file-safe
``report.html``            the summary table and one failure heatmap per judge, opening
                           offline (plotly.js inline once)
=========================  ===============================================================
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from evaluation.analysis.figures import judge_failure_heatmap
from evaluation.judges.audit import failure_matrix, summary


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
        Pairs frames of `evaluation.judges.audit.run_audit`, concatenated.
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
    pairs.to_csv(paths[0], index=False)
    table.to_csv(paths[1], index=False)
    sections = []
    for i, (judge, part) in enumerate(pairs.groupby("judge", sort=False)):
        matrix = failure_matrix(part)
        path = folder / f"failures-{file_safe(str(judge))}.csv"
        matrix.to_csv(path)
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
