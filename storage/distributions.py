"""The one check and the one codec of a distribution over the 71 UW-71 bins.

A *distribution* is a float64 vector of length 71 in UW-71 ``color_index`` order whose
entries are finite, non-negative and sum to 1 (within `SUM_TOLERANCE`). In SQLite it is
a JSON array of 71 numbers in a text column named ``p`` (`encode` / `decode`), or NULL
where there is none.

*Masses* are the looser input the metrics accept: finite, non-negative, with a positive
total; `check_masses` normalises them. Both checks share one diagnosis, so every
message about a bad vector reads the same wherever it is raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Any

import numpy as np

#: Bins of the UW-71 palette.
N_BINS = 71
#: How far from 1 a stored distribution's total may be (float64 round-off of 71 terms is
#: far below this; a vector off by more was not normalised).
SUM_TOLERANCE = 1e-6
# A row of masses whose total is this close to 1 is used as given, so vectors that are
# already distributions reach the solvers bit for bit unchanged.
_EXACT_TOLERANCE = 1e-9


class InvalidDistribution(ValueError):
    """A vector is not a distribution (or not masses) over the 71 UW-71 bins."""


def _diagnose(P: np.ndarray, name: str, where: Callable[[np.ndarray], str]) -> None:
    """Raise the `InvalidDistribution` that says what is wrong with the 2-D masses `P`."""
    bad = ~np.isfinite(P).all(axis=1)
    if bad.any():
        raise InvalidDistribution(f"`{name}` must hold finite masses, got NaN or inf{where(bad)}")
    bad = (P < 0).any(axis=1)
    if bad.any():
        raise InvalidDistribution(f"`{name}` must hold non-negative masses, got {P[bad].min():g}{where(bad)}")
    bad = P.sum(axis=1) <= 0
    if bad.any():
        raise InvalidDistribution(f"`{name}` has zero total mass{where(bad)}")
    raise InvalidDistribution(f"`{name}` has a total mass that overflows float64")


def _rows(P, name: str) -> tuple[np.ndarray, bool, Callable[[np.ndarray], str]]:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim == 1:
        if P.shape != (N_BINS,):
            raise InvalidDistribution(f"`{name}` must have shape ({N_BINS},), got {P.shape}")
        return P[None], True, lambda bad: ""
    if P.ndim != 2 or P.shape[1] != N_BINS:
        raise InvalidDistribution(f"`{name}` must have shape ({N_BINS},) or (n, {N_BINS}), got {P.shape}")
    return P, False, lambda bad: f" in row {int(np.argmax(bad))}"


def check_masses(P, name: str = "P") -> np.ndarray:
    """Validate mass vectors over the UW-71 bins and normalise each to sum 1.

    Parameters
    ----------
    P : array_like, shape (71,) or (n, 71)
        Non-negative finite masses, each vector with a positive total.
    name : str
        The argument name used in error messages.

    Returns
    -------
    ndarray, same shape, float64
        Vectors summing to 1. One whose total is within 1e-9 of 1 is returned as given
        (the array may be `P` itself, so treat it as read-only).

    Raises
    ------
    InvalidDistribution
        On a wrong shape, NaN/inf, negative mass, or zero total mass; the message names
        the argument and, for 2-D input, the first bad row.
    """
    rows, single, where = _rows(P, name)
    if rows.size:
        totals = rows.sum(axis=1)
        if not (rows.min() >= 0 and np.isfinite(totals).all() and (totals > 0).all()):
            _diagnose(rows, name, where)
        off = np.abs(totals - 1.0) > _EXACT_TOLERANCE
        if off.any():
            rows = np.where(off[:, None], rows / totals[:, None], rows)
    return rows[0] if single else rows


def check_distribution(p, name: str = "p") -> np.ndarray:
    """Validate distributions over the UW-71 bins: masses that already sum to 1.

    Parameters
    ----------
    p : array_like, shape (71,) or (n, 71)
    name : str
        The argument name used in error messages.

    Returns
    -------
    ndarray, same shape, float64
        Each vector divided by its total (a change below `SUM_TOLERANCE`).

    Raises
    ------
    InvalidDistribution
        As `check_masses`, and when a total differs from 1 by more than `SUM_TOLERANCE`.
    """
    rows, single, where = _rows(p, name)
    totals = rows.sum(axis=1)
    checked = check_masses(rows, name)
    off = np.abs(totals - 1.0) > SUM_TOLERANCE
    if off.any():
        raise InvalidDistribution(
            f"`{name}` must sum to 1 (within {SUM_TOLERANCE:g}), got {totals[off][0]:.9g}{where(off)}"
        )
    return checked[0] if single else checked


def encode(p) -> str | None:
    """A distribution (checked) as the JSON text stored in a ``p`` column; None stays None."""
    if p is None:
        return None
    return json.dumps(check_distribution(p).tolist())


def decode(text: str | None) -> np.ndarray | None:
    """The (71,) float64 vector stored as JSON text in a ``p`` column; None stays None."""
    if text is None:
        return None
    return np.asarray(json.loads(text), dtype=np.float64)


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def encode_groups(groups) -> str:
    """The extraction groups behind a distribution (``evaluation.color.extraction.ColorGroup``
    objects or their dict form) as JSON text: one object per group with
    ``image_indices, lab, rgb, weights, p``; None or no groups as ``[]``."""
    return json.dumps([] if groups is None else _jsonable(groups))


def decode_groups(text: str | None):
    """The groups stored by `encode_groups`, as dicts (``rgb`` etc. as nested lists)."""
    return json.loads(text) if text else []
