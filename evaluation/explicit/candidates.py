"""Candidate sets: a target color plus its k perceptually nearest neighbours in its system.

GenColorBench scores a dominant color against the target *and* its k nearest neighbours in the
same color-naming system (§3.4), so that a perceptually indistinguishable shade of a broad name
is not penalized. The paper gives neither k nor the distance. Ours:

- ``K_NEIGHBOURS = 3``: the target and 3 neighbours. With k = 3 a render of the target itself
  is called correct in >= 95% of ISCC-NBS L2 and >= 90% of CSS3/X11 exposure-normalised
  renders, while a render of a color outside the set passes in well under 5%
  (``tests/evaluation/explicit/test_exposure_normalised.py`` prints the figures; ``BENCHMARKS.md``
  records them, with the validation renders of ``bench/bench_explicit_validation.py``).
- ``DISTANCE = "ciede2000"``: neighbours by CIEDE2000 between the systems' CIELAB centroids
  (D65, 2°), the same distance the scorer uses; ties (CSS3 has equal colors under two names,
  ``aqua`` and ``cyan``) keep table order.
- Neighbours of the target's own kind: a chromatic target (chroma C* >= ``NEUTRAL_CHROMA``)
  takes chromatic neighbours only, a neutral one neutral neighbours only, as many as its side
  has up to k (L1 and L2 have three neutral colors, so "gray" gets two). The hue test is gated
  off against a neutral color (:mod:`.scoring`), so a neutral neighbour made it vacuous: L1
  "pink" held white and gray among its 3 nearest, and a flat white or gray object passed as
  pink; a chromatic neighbour of "white" let a pink object pass as white through its hue
  (outside probe 121). A multi-object prompt's second color stays clear of both the first's
  candidate set and its plain nearest colors (:func:`nearest_indices`).
"""

from __future__ import annotations

import numpy as np

from evaluation.color.colorspace import delta_e_2000
from evaluation.color.systems import ColorSystem
from storage.shown import shown

K_NEIGHBOURS = 3
DISTANCE = "ciede2000"
NEUTRAL_CHROMA = 5.0
"""CIELAB chroma below which a color counts as neutral: every rule set's hue gate
(``Rules.hue_gate_chroma``; a test keeps them equal)."""


def _check_k(k: int, system: ColorSystem) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k < len(system):
        raise ValueError(f"`k` must be an integer in [0, {len(system) - 1}] for {system.key}, got {shown(k)}")


def _row_of(system: ColorSystem, target: str | int) -> int:
    if isinstance(target, str):
        try:
            return system.index(target)
        except KeyError as error:
            raise ValueError(f"`target`: {error.args[0]}") from None
    if isinstance(target, int | np.integer) and not isinstance(target, bool) and 0 <= target < len(system):
        return int(target)
    raise ValueError(f"`target` must be a color name or a row in [0, {len(system) - 1}], got {shown(target)}")


def _by_distance(system: ColorSystem, row: int) -> np.ndarray:
    """Every row of `system`, `row` first, then by increasing CIEDE2000 from it (ties in table order)."""
    distance = delta_e_2000(system.lab[row], system.lab)
    distance[row] = -1.0
    return np.argsort(distance, kind="stable")


def nearest_indices(system: ColorSystem, target: str | int, k: int = K_NEIGHBOURS) -> np.ndarray:
    """Rows of the target and its ``k`` nearest colors in ``system`` by CIEDE2000, of either
    kind (chromatic or neutral): what a prompt's second color must stay clear of.

    Returns
    -------
    ndarray, shape (k + 1,), int64
        The target's row first, then the others by increasing CIEDE2000 (ties in table order).

    Raises
    ------
    ValueError
        As :func:`candidate_indices`.

    Examples
    --------
    >>> from evaluation.color.systems import load_system
    >>> l1 = load_system("iscc-nbs-l1")
    >>> [l1.names[i] for i in nearest_indices(l1, "pink")]
    ['pink', 'gray', 'red', 'white']
    """
    _check_k(k, system)
    return _by_distance(system, _row_of(system, target))[: k + 1]


def candidate_indices(system: ColorSystem, target: str | int, k: int = K_NEIGHBOURS) -> np.ndarray:
    """Rows of the target and its ``k`` nearest neighbours of its own kind in ``system``.

    Parameters
    ----------
    system : ColorSystem
        From :func:`evaluation.color.systems.load_system`.
    target : str or int
        The target's color name (case-insensitive) or row.
    k : int
        Number of neighbours, 0 <= k < len(system).

    Returns
    -------
    ndarray, shape (m + 1,), int64
        The target's row first, then its neighbours by increasing CIEDE2000 (ties in table
        order): the m = min(k, others of its kind) nearest among the chromatic colors
        (C* >= ``NEUTRAL_CHROMA``) when the target is chromatic, among the neutral ones when
        it is neutral (module notes).

    Raises
    ------
    ValueError
        If ``target`` names no color of the system or its row is out of range, or ``k`` is out
        of range.

    Examples
    --------
    >>> from evaluation.color.systems import load_system
    >>> l1 = load_system("iscc-nbs-l1")
    >>> [l1.names[i] for i in candidate_indices(l1, "red", k=2)]
    ['red', 'brown', 'pink']
    >>> [l1.names[i] for i in candidate_indices(l1, "pink")]
    ['pink', 'red', 'purple', 'orange']
    >>> [l1.names[i] for i in candidate_indices(l1, "gray")]
    ['gray', 'white', 'black']
    """
    _check_k(k, system)
    row = _row_of(system, target)
    neutral = np.hypot(system.lab[:, 1], system.lab[:, 2]) < NEUTRAL_CHROMA
    order = _by_distance(system, row)
    return order[neutral[order] == neutral[row]][: k + 1]


def candidate_lab(system: ColorSystem, target: str | int, k: int = K_NEIGHBOURS) -> np.ndarray:
    """CIELAB colors of :func:`candidate_indices`, shape (m + 1, 3) with m <= k, the target first."""
    return system.lab[candidate_indices(system, target, k)]
