"""Every CSV the project writes, safe to open in a spreadsheet.

A spreadsheet (Excel, LibreOffice Calc, Google Sheets) runs a cell as a formula when its
text starts with ``=``, ``+``, ``-`` or ``@``, and some also after a leading tab or
carriage return: an expert's note ``=HYPERLINK("http://…"&A1,"click")`` in an export
would run on the researcher's machine. As OWASP recommends ("CSV Injection"), such a
text cell is written with a single quote ``'`` in front, which spreadsheets read as
"this is text" and do not show. Only text is touched: numbers (a negative score) stay
numbers, and column names and index labels follow the same rule as cells.

Lines end with CRLF, as RFC 4180 says: Python's CSV writer quotes a cell only for the
characters of the line ending, so with pandas' ``\n`` a carriage return inside a cell
stayed bare, and every reader split the row there.

All CSV writers go through `write_csv` or `csv_text` (a test scans the source for any
other); Parquet files keep the raw values, since their types say what is text.

CSV files people bring (a reference set, an import's manifest) come from spreadsheets too:
`decoded_csv` reads their text and names another encoding and the line it fails on,
`separator_refusal` names a semicolon- or tab-separated file, and `number_cell` and
`whole_cell` read a number only as a person writes one (Python's ``float`` and ``int`` also
take ``1_0`` as 10 and other scripts' digits, ``٣`` as 3).

References
----------
.. [1] OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection
.. [2] RFC 4180, "Common Format and MIME Type for CSV Files", section 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"
LINE_END = "\r\n"


def safe_cell(value):
    """`value`, with a leading ``'`` if it is text a spreadsheet would run as a formula.

    Parameters
    ----------
    value : object
        A cell. Only `str` values that start with one of `FORMULA_STARTS` change;
        numbers, None and everything else are returned as they are.

    Examples
    --------
    >>> safe_cell('=HYPERLINK("http://x","click")')
    '\\'=HYPERLINK("http://x","click")'
    >>> safe_cell(-1.5), safe_cell("-1.5"), safe_cell("apple")
    (-1.5, "'-1.5", 'apple')
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return TEXT_MARK + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` with `safe_cell` applied to every text cell, column name and label."""
    safe = frame.copy()
    for position in range(safe.shape[1]):
        column = safe.iloc[:, position]
        if isinstance(column.dtype, (pd.StringDtype, pd.CategoricalDtype)) or column.dtype == object:
            safe.isetitem(position, column.map(safe_cell, na_action="ignore"))
    safe.columns = _safe_labels(safe.columns)
    safe.index = _safe_labels(safe.index)
    return safe


def _safe_labels(labels: pd.Index) -> pd.Index:
    if isinstance(labels, pd.MultiIndex):
        return pd.MultiIndex.from_tuples(
            [tuple(safe_cell(v) for v in label) for label in labels], names=labels.names
        )
    return labels.map(safe_cell)


def csv_text(frame: pd.DataFrame, **to_csv) -> str:
    """`frame` as CSV text, text cells made safe (`safe_frame`).

    Parameters
    ----------
    frame : pandas.DataFrame
        The table; it is not changed.
    **to_csv
        Passed to `pandas.DataFrame.to_csv` (``index``, ``float_format``, ...); lines
        always end with `LINE_END`.
    """
    return safe_frame(frame).to_csv(**to_csv, lineterminator=LINE_END)


def write_csv(frame: pd.DataFrame, path: str | Path, **to_csv) -> Path:
    """Write `frame` as a CSV file at `path`, text cells made safe (`safe_frame`); the path.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table; it is not changed.
    path : str or Path
        The file to write (its folder must exist).
    **to_csv
        Passed to `pandas.DataFrame.to_csv` (``index``, ``float_format``, ...); lines
        always end with `LINE_END`.
    """
    safe_frame(frame).to_csv(path, **to_csv, lineterminator=LINE_END)
    return Path(path)


# Reading: CSV files as spreadsheets and other tools save them.

_WIDE_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
SAVE_AS = "save it as UTF-8 text (a spreadsheet's 'CSV UTF-8')"


def decoded_csv(data: bytes, name: str) -> str:
    """The text of the CSV file `name` holding `data`: UTF-8, with or without a byte-order mark.

    Raises
    ------
    ValueError
        Naming the file, and for a byte UTF-8 cannot read, its line: UTF-16 (with or without
        a byte-order mark) or UTF-32 (a spreadsheet's "Unicode Text"), Latin-1 or Windows-1252 (a spreadsheet's plain "CSV"
        in many languages) are refused with what to do, not with the codec's words.
    """
    for bom, encoding in _WIDE_BOMS.items():
        if data.startswith(bom):
            raise ValueError(
                f"{name} is {encoding} text (as a spreadsheet's 'Unicode Text' saves it): {SAVE_AS}"
            )
    head = data[:4096]
    # No text file holds a NUL; UTF-16's ASCII letters each do, one in two bytes.
    if head and head.count(b"\x00") * 4 >= len(head):
        raise ValueError(
            f"{name} is UTF-16 text without a byte-order mark (zero bytes between its letters): {SAVE_AS}"
        )
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ValueError(f"{name} holds a zero byte (NUL) on line {line}, which no text holds: remove it")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{name} is not UTF-8 text: line {line} holds the byte 0x{data[error.start]:02x}, which UTF-8 "
            f"does not read there (a file saved as Latin-1 or Windows-1252 does this); {SAVE_AS}"
        ) from None


def separator_refusal(header: list[str], name: str) -> str | None:
    """Why the CSV file `name` whose first row is `header` cannot be read, when another
    separator than the comma holds it together: semicolons (a spreadsheet set to a language
    with decimal commas) or tabs (a spreadsheet's tab-delimited text); else None."""
    if len(header) == 1 and ";" in header[0]:
        return (
            f"{name} is separated by semicolons (as a spreadsheet set to a language with decimal "
            "commas saves it): save it with commas between the values and points in the numbers"
        )
    if len(header) == 1 and "\t" in header[0]:
        return f"{name} is separated by tabs (a spreadsheet's tab-delimited text): save it with commas between the values"
    return None


_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*", re.ASCII)
_WORDS = re.compile(r"\s*[+-]?(?:nan|inf|infinity)\s*", re.ASCII | re.IGNORECASE)


def number_cell(text: str) -> float:
    """`text` as a float when it is a number written with ASCII digits, an optional sign,
    point and exponent (``nan`` and ``inf`` as well, for the caller to refuse by name), and
    blanks around it; else a ValueError, as ``float`` raises.

    Examples
    --------
    >>> number_cell(" 0.5 "), number_cell("1e-3")
    (0.5, 0.001)
    >>> number_cell("1_0")
    Traceback (most recent call last):
    ValueError: not a number written with ASCII digits: '1_0'
    """
    if not isinstance(text, str) or not (_NUMBER.fullmatch(text) or _WORDS.fullmatch(text)):
        raise ValueError(f"not a number written with ASCII digits: {text!r}")
    return float(text)


def whole_cell(text: str) -> int:
    """`text` as an int when it is a whole number written with ASCII digits (a sign and
    blanks around it allowed); else a ValueError, as ``int`` raises.

    Examples
    --------
    >>> whole_cell(" 12 ")
    12
    >>> whole_cell("\u0663")
    Traceback (most recent call last):
    ValueError: not a whole number written with ASCII digits: '٣'
    """
    if not isinstance(text, str) or not re.fullmatch(r"\s*[+-]?\d+\s*", text, re.ASCII):
        raise ValueError(f"not a whole number written with ASCII digits: {text!r}")
    return int(text)
