"""Scores of a dominant color against a candidate set: ΔChroma, CIEDE2000 and gated hue error.

GenColorBench §3.4: three complementary metrics, each the *minimum* over the candidate set
(so the three minima may come from different candidates, as the paper words it), each passed
when strictly below its threshold; the object is *correct* when all three pass.

- ΔChroma: Euclidean distance in the (a*, b*) plane, CIELAB units.
- CIEDE2000: ΔE00 through scikit-image (:func:`evaluation.color.colorspace.delta_e_2000`).
- Hue error: the absolute difference of the hue angles h = atan2(b*, a*), in degrees in
  [0, 180]; with chroma gating: it counts as 0 when either color's chroma is below
  ``rules.hue_gate_chroma`` (hue is undefined on the neutral axis). For one dominant color per
  object the paper's "MAE (Hue)" is this absolute error; averaging over objects is left to the
  tables.

Thresholds come from :mod:`evaluation.explicit.rules`: the paper's (JND 5 for all three) or the
released code's (hue passes below 30°).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.color.colorspace import _lab_as_float, delta_e_2000
from evaluation.explicit.rules import Rules, get_rules


def delta_chroma(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """Euclidean distance between chromaticities (a*, b*), ignoring L*.

    Parameters
    ----------
    lab1, lab2 : array_like, shape (..., 3)
        CIELAB colors; the leading shapes must broadcast.

    Returns
    -------
    ndarray, shape (...), float64
        Distance in CIELAB units, >= 0.

    Examples
    --------
    >>> float(delta_chroma([50.0, 3.0, 4.0], [10.0, 0.0, 0.0]))
    5.0
    """
    lab1, lab2 = _lab_as_float(lab1, "lab1"), _lab_as_float(lab2, "lab2")
    return np.hypot(lab1[..., 1] - lab2[..., 1], lab1[..., 2] - lab2[..., 2])


def hue_difference(lab1: np.ndarray, lab2: np.ndarray, gate_chroma: float = 5.0) -> np.ndarray:
    """Absolute CIELAB hue-angle difference with chroma gating.

    Parameters
    ----------
    lab1, lab2 : array_like, shape (..., 3)
        CIELAB colors; the leading shapes must broadcast.
    gate_chroma : float
        Where either color's chroma C* = hypot(a*, b*) is below this, the difference is 0.

    Returns
    -------
    ndarray, shape (...), float64
        Degrees in [0, 180].

    Examples
    --------
    >>> float(hue_difference([50.0, 10.0, 0.0], [50.0, 0.0, 10.0]))
    90.0
    >>> float(hue_difference([50.0, 1.0, 0.0], [50.0, 0.0, 10.0]))
    0.0
    """
    lab1, lab2 = _lab_as_float(lab1, "lab1"), _lab_as_float(lab2, "lab2")
    hue1 = np.degrees(np.arctan2(lab1[..., 2], lab1[..., 1]))
    hue2 = np.degrees(np.arctan2(lab2[..., 2], lab2[..., 1]))
    difference = np.abs((hue1 - hue2 + 180.0) % 360.0 - 180.0)
    chroma = np.minimum(np.hypot(lab1[..., 1], lab1[..., 2]), np.hypot(lab2[..., 1], lab2[..., 2]))
    return np.where(chroma < gate_chroma, 0.0, difference)


@dataclass(frozen=True)
class Score:
    """The verdict on one object.

    Attributes
    ----------
    delta_chroma, delta_e00 : float
        Minimum over the candidates, CIELAB units.
    hue_error : float
        Minimum over the candidates, degrees (0 where gated).
    chroma_pass, e00_pass, hue_pass : bool
        Each metric strictly below its threshold.
    correct : bool
        All three pass.
    """

    delta_chroma: float
    delta_e00: float
    hue_error: float
    chroma_pass: bool
    e00_pass: bool
    hue_pass: bool
    correct: bool


def score(dominant: np.ndarray, candidates: np.ndarray, *, scoring: str | Rules = "paper") -> Score:
    """Score one dominant color against a candidate set.

    Parameters
    ----------
    dominant : array_like, shape (3,)
        The object's dominant color, CIELAB (D65, 2°).
    candidates : array_like, shape (K, 3)
        The target and its neighbours, CIELAB; K >= 1.
    scoring : {"paper", "paper-mean", "released", "released-closest"} or Rules
        Thresholds (:mod:`evaluation.explicit.rules`).

    Returns
    -------
    Score

    Raises
    ------
    ValueError
        If the shapes are wrong, a value is not finite, or ``scoring`` is unknown.

    Examples
    --------
    >>> s = score([50.0, 20.0, 20.0], [[80.0, 0.0, 0.0], [51.0, 22.0, 19.0]])
    >>> s.correct, round(s.delta_chroma, 3)
    (True, 2.236)
    """
    rules = get_rules(scoring)
    dominant, candidates = _lab_as_float(dominant, "dominant"), _lab_as_float(candidates, "candidates")
    if dominant.shape != (3,):
        raise ValueError(f"`dominant` must be one CIELAB color of shape (3,), got {dominant.shape}")
    if candidates.ndim != 2 or len(candidates) == 0:
        raise ValueError(f"`candidates` must have shape (K, 3) with K >= 1, got {candidates.shape}")
    chroma = float(delta_chroma(dominant, candidates).min())
    e00 = float(delta_e_2000(dominant, candidates).min())
    hue = float(hue_difference(dominant, candidates, rules.hue_gate_chroma).min())
    passes = (chroma < rules.jnd, e00 < rules.jnd, hue < rules.hue_threshold)
    return Score(chroma, e00, hue, *passes, correct=all(passes))
