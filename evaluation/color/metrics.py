"""The ColorConceptBench metrics between color distributions over the UW-71 bins.

``p``, ``q`` are length-71 mass vectors in ``color_index`` order (one concept); ``P``,
``Q`` are ``(n, 71)`` arrays, row ``i`` of ``P`` compared with row ``i`` of ``Q`` (n
concepts). Masses must be finite and non-negative with a positive total; every metric
normalises them to sum 1 first (see `storage.distributions.check_masses`). Paper §4.3, equations
(1)-(5); §5.1 for `shift`.

Validation happens once, at the edge: each public function checks its arrays
(`check_pair`) and calls a private kernel (`_pcc`, `_emd_rows`, `_entropy_difference`,
`_dominant`, `_hue_differences`) that trusts its input: float64 masses already checked
and normalised. Callers inside `evaluation/` that compute several metrics of one pair
(`evaluation.pipeline.scoring.concept_metrics`) check once and call the kernels.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np

# POT imports torch for a backend when torch is installed (1.6 s and a few hundred MB in
# every process that scores: the app, its coloring workers, the CLI); this module hands
# it numpy arrays only. An earlier import of POT elsewhere keeps its own choice.
os.environ.setdefault("POT_BACKEND_DISABLE_PYTORCH", "1")
from ot.lp.emd_wrap import emd_c
from scipy.special import entr

from evaluation.color.palette import load_uw71
from storage.distributions import check_masses

__all__ = [
    "EMDSolverError",
    "check_pair",
    "pcc",
    "emd",
    "emd_rows",
    "entropy",
    "entropy_difference",
    "dominant_bins",
    "dca",
    "hue_differences",
    "delta_hue",
    "shift",
]

# POT's network-simplex status codes (ot/lp/EMD.h); only OPTIMAL is a result.
_SOLVER_STATUS = {0: "infeasible", 1: "optimal", 2: "unbounded", 3: "iteration limit reached"}


class EMDSolverError(RuntimeError):
    """POT's network simplex ended without an optimal solution (POT only warns)."""


def check_pair(p, q, names=("p", "q")) -> tuple[np.ndarray, np.ndarray]:
    """Validate a pair given either as two (71,) vectors or two (n, 71) arrays.

    Parameters
    ----------
    p, q : array_like, shape (71,) or (n, 71)
        Mass vectors (`storage.distributions.check_masses`).
    names : tuple of str
        The arguments' names in error messages.

    Returns
    -------
    p, q : ndarray, float64
        Normalised to sum 1 per row: the input every kernel of this module trusts.

    Raises
    ------
    ValueError
        On invalid masses or different shapes (a vector with an array too: in one order
        it broadcast, in the other it was refused).
    """
    P, Q = check_masses(p, names[0]), check_masses(q, names[1])
    if P.shape != Q.shape:
        raise ValueError(
            f"`{names[0]}` {P.shape} and `{names[1]}` {Q.shape} must have the same shape: "
            "two (71,) vectors, or two (n, 71) arrays compared row by row"
        )
    return P, Q


def _require_ndim(P: np.ndarray, name: str, ndim: int, function: str) -> None:
    """Refuse checked masses `P` that are not one (71,) vector (`ndim` 1) or (n, 71) rows (2)."""
    if P.ndim != ndim:
        takes, other = (
            ("two (71,) vectors", "`emd_rows` for (n, 71) arrays")
            if ndim == 1
            else ("two (n, 71) arrays, one pair per row", "`emd` for two (71,) vectors")
        )
        raise ValueError(f"`{name}` has shape {P.shape}: `{function}` takes {takes}; use {other}")


def pcc(p: np.ndarray, q: np.ndarray) -> float | np.ndarray:
    """Pearson correlation coefficient between distributions over the 71 bins (eq. 1).

    Parameters
    ----------
    p, q : array_like, shape (71,) or (n, 71)
        Mass vectors; with 2-D input, row i of `p` is compared with row i of `q`.

    Returns
    -------
    float or ndarray, shape (n,)
        In [-1, 1]; NaN where a distribution is uniform (zero variance, PCC undefined).
    """
    r = _pcc(*check_pair(p, q))
    return float(r) if r.ndim == 0 else r


def _pcc(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    pc = p - p.mean(axis=-1, keepdims=True)
    qc = q - q.mean(axis=-1, keepdims=True)
    den = np.sqrt(_rowdot(pc, pc) * _rowdot(qc, qc))
    constant = (np.ptp(p, axis=-1) == 0) | (np.ptp(q, axis=-1) == 0)
    return np.where(constant, np.nan, _rowdot(pc, qc) / np.where(constant, 1.0, den))


def emd_rows(
    P: np.ndarray,
    Q: np.ndarray,
    *,
    num_itermax: int = 100_000,
    workers: int | None = None,
    min_rows_per_worker: int = 4096,
) -> np.ndarray:
    r"""Exact EMD between row i of `P` and row i of `Q` (eq. 2), batched.

    The ground distance is the CIELAB Euclidean distance between UW-71 bins, so the
    result is in ΔE*ab units. Each pair is solved by POT's network simplex (the C core
    behind `ot.emd2`) on the submatrix of the bins with mass, exactly as `ot.emd2` does,
    so values equal ``ot.emd2(p, q, ground_distance)`` bit for bit on rows that are
    probability vectors (see `storage.distributions.check_masses` for other rows).

    .. math::
        \mathrm{EMD}(p, q) = \min_{f \ge 0} \sum_{k_1, k_2} f_{k_1 k_2} d_{k_1 k_2}
        \quad \text{s.t.}\ f \mathbf{1} = p,\ f^\top \mathbf{1} = q

    Parameters
    ----------
    P, Q : array_like, shape (n, 71)
        Mass vectors (normalised to sum 1 per row).
    num_itermax : int
        Network-simplex iteration limit per pair (POT's default).
    workers : int, optional
        Processes to use; defaults to the CPUs this process may run on. A caller that
        runs other threads (the web app) always solves in its own process, since
        forking a threaded process can deadlock the child.
    min_rows_per_worker : int
        Each extra process gets at least this many rows, so small batches stay in
        this process (starting a process costs about as much as a few thousand pairs).

    Returns
    -------
    ndarray, shape (n,), float64
        EMD >= 0 in ΔE units.

    Raises
    ------
    ValueError
        On invalid distributions (see `storage.distributions.check_masses`) or mismatched shapes.
    EMDSolverError
        If the solver reports anything but an optimal solution for some pair.
    """
    P, Q = check_pair(P, Q, ("P", "Q"))
    _require_ndim(P, "P", 2, "emd_rows")
    return _emd_rows(P, Q, num_itermax=num_itermax, workers=workers, min_rows_per_worker=min_rows_per_worker)


def _emd_rows(
    P: np.ndarray,
    Q: np.ndarray,
    *,
    num_itermax: int = 100_000,
    workers: int | None = None,
    min_rows_per_worker: int = 4096,
) -> np.ndarray:
    """The kernel of `emd_rows`, on checked (n, 71) rows; same options."""
    return _emd_support_rows(
        P,
        Q,
        load_uw71().ground_distance,
        num_itermax=num_itermax,
        workers=workers,
        min_rows_per_worker=min_rows_per_worker,
    )


def emd(p: np.ndarray, q: np.ndarray, *, num_itermax: int = 100_000) -> float:
    """Exact EMD between two distributions (eq. 2), in ΔE*ab units; see `emd_rows`.

    Parameters
    ----------
    p, q : array_like, shape (71,)
        Mass vectors (normalised to sum 1).
    num_itermax : int
        Network-simplex iteration limit.

    Returns
    -------
    float
        EMD >= 0.

    Raises
    ------
    ValueError
        On invalid distributions.
    EMDSolverError
        If the solver does not reach an optimal solution.
    """
    p, q = check_masses(p, "p"), check_masses(q, "q")
    _require_ndim(p, "p", 1, "emd")
    _require_ndim(q, "q", 1, "emd")
    return float(_emd_rows(p[None], q[None], num_itermax=num_itermax, workers=1)[0])


def shift(p_base: np.ndarray, p_modified: np.ndarray) -> float:
    """Shift intensity of a modifier (§5.1): EMD from the base concept's distribution
    to the modified concept's, in ΔE units. Same arguments as `emd`."""
    p_base = check_masses(p_base, "p_base")
    p_modified = check_masses(p_modified, "p_modified")
    _require_ndim(p_base, "p_base", 1, "shift")
    _require_ndim(p_modified, "p_modified", 1, "shift")
    return float(_emd_rows(p_base[None], p_modified[None], workers=1)[0])


def entropy(p: np.ndarray) -> float | np.ndarray:
    """Shannon entropy in nats with 0·log 0 = 0.

    Parameters
    ----------
    p : array_like, shape (71,) or (n, 71)

    Returns
    -------
    float or ndarray, shape (n,)
        In [0, log 71].
    """
    p = check_masses(p, "p" if np.asarray(p).ndim == 1 else "P")
    h = _entropy(p)
    return float(h) if h.ndim == 0 else h


def _entropy(p: np.ndarray) -> np.ndarray:
    return entr(p).sum(axis=-1)  # entr(x) = -x log x, and 0 at x = 0


def _rowdot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", x, y)


def entropy_difference(p: np.ndarray, q: np.ndarray) -> float | np.ndarray:
    """Absolute difference of Shannon entropies (eq. 3), natural log, 0·log 0 = 0.

    Parameters
    ----------
    p, q : array_like, shape (71,) or (n, 71)

    Returns
    -------
    float or ndarray, shape (n,)
        In [0, log 71] nats.
    """
    d = _entropy_difference(*check_pair(p, q))
    return float(d) if np.ndim(d) == 0 else d


def _entropy_difference(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.abs(_entropy(p) - _entropy(q))


def dominant_bins(P: np.ndarray) -> np.ndarray:
    """Index of the bin with the most mass per distribution (ties: lowest index).

    Parameters
    ----------
    P : array_like, shape (71,) or (n, 71)

    Returns
    -------
    ndarray of int64, shape () or (n,)
    """
    return _dominant(check_masses(P, "p" if np.asarray(P).ndim == 1 else "P"))


def _dominant(P: np.ndarray) -> np.ndarray:
    return np.argmax(P, axis=-1)


def dca(P: np.ndarray, Q: np.ndarray) -> float:
    """Dominant color accuracy (eq. 4): share of concepts whose dominant bins agree.

    Parameters
    ----------
    P, Q : array_like, shape (n, 71)
        Human and model distributions, one row per concept.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        On invalid rows, different shapes, or no rows at all (no share to give).
    """
    P, Q = check_pair(np.atleast_2d(P), np.atleast_2d(Q), ("P", "Q"))
    if not len(P):
        raise ValueError("`P` and `Q` have no rows: the dominant color accuracy needs one concept at least")
    return float(np.mean(_dominant(P) == _dominant(Q)))


def hue_differences(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Per-concept shortest angular distance between the hues of the dominant bins.

    Hue angles are the CIELAB hue angles h_ab of the UW-71 bins. A grey bin (chroma 0,
    ``color_index`` 24-29) has no hue angle, so a concept whose human or model dominant
    bin is grey gets NaN: it is left out of `delta_hue`'s mean, and the number left out
    is ``np.isnan(hue_differences(P, Q)).sum()``.

    Parameters
    ----------
    P, Q : array_like, shape (n, 71)

    Returns
    -------
    ndarray, shape (n,), float64
        Degrees in [0, 180], NaN where either dominant bin is achromatic.
    """
    P, Q = check_pair(np.atleast_2d(P), np.atleast_2d(Q), ("P", "Q"))
    return _hue_differences(_dominant(P), _dominant(Q))


def _hue_differences(dominant_p: np.ndarray, dominant_q: np.ndarray) -> np.ndarray:
    """The kernel of `hue_differences`, on the dominant bins of checked rows."""
    hue = load_uw71().hue_deg
    diff = np.abs(hue[dominant_p] - hue[dominant_q])
    return np.minimum(diff, 360.0 - diff)


def delta_hue(P: np.ndarray, Q: np.ndarray) -> float:
    """Mean hue angular difference of the dominant bins (eq. 5), in degrees.

    Concepts whose human or model dominant bin is achromatic are excluded from the mean
    (see `hue_differences`, which also tells how many).

    Parameters
    ----------
    P, Q : array_like, shape (n, 71)

    Returns
    -------
    float
        Degrees in [0, 180]; NaN when every concept is excluded.
    """
    d = hue_differences(P, Q)
    kept = d[~np.isnan(d)]
    return float(kept.mean()) if kept.size else float("nan")


def _csr(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pointers, column indices and values of the non-zero entries of P."""
    rows, cols = np.nonzero(P)
    ptr = np.zeros(len(P) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=len(P)), out=ptr[1:])
    return ptr, cols, P[rows, cols]


def _solve_csr(a, b, ground: np.ndarray, num_itermax: int, first_row: int) -> np.ndarray:
    """EMD per row on the supports; `a`, `b` are `_csr` triples covering the same rows."""
    (a_ptr, a_idx, a_val), (b_ptr, b_idx, b_val) = a, b
    a_ptr, b_ptr = a_ptr.tolist(), b_ptr.tolist()  # Python ints slice faster in the loop
    out = np.empty(len(a_ptr) - 1)
    for i in range(len(out)):
        a0, a1, b0, b1 = a_ptr[i], a_ptr[i + 1], b_ptr[i], b_ptr[i + 1]
        sub = ground.take(a_idx[a0:a1], axis=0).take(b_idx[b0:b1], axis=1)
        cost, status = emd_c(a_val[a0:a1], b_val[b0:b1], sub, num_itermax, 1)[1::3]
        if status != 1:
            raise EMDSolverError(
                f"EMD of row {first_row + i}: network simplex ended {_SOLVER_STATUS.get(status, status)}"
            )
        out[i] = cost
    return out


def _slice_csr(csr, start: int, stop: int):
    ptr, idx, val = csr
    lo, hi = ptr[start], ptr[stop]
    return ptr[start : stop + 1] - lo, idx[lo:hi], val[lo:hi]


def _pool_context():
    # fork starts workers in milliseconds; elsewhere use the platform default.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _emd_support_rows(
    P: np.ndarray,
    Q: np.ndarray,
    ground: np.ndarray,
    *,
    num_itermax: int,
    workers: int | None = None,
    min_rows_per_worker: int = 4096,
) -> np.ndarray:
    """Solve validated, normalised rows; reproduces `ot.emd2`'s own preprocessing."""
    Q = Q * P.sum(axis=1, keepdims=True) / Q.sum(axis=1, keepdims=True)
    a, b = _csr(P), _csr(Q)
    n = len(P)
    workers = min(workers or _usable_cpus(), max(1, n // max(1, min_rows_per_worker)))
    if threading.active_count() > 1:
        # Forking a process that runs other threads (a Gradio server, torch) can leave a
        # child stuck on a lock held at fork time: such callers solve in-process.
        workers = 1
    if workers <= 1:
        return _solve_csr(a, b, ground, num_itermax, 0)
    bounds = np.linspace(0, n, 4 * workers + 1).astype(int)
    with ProcessPoolExecutor(workers, mp_context=_pool_context()) as pool:
        parts = [
            pool.submit(_solve_csr, _slice_csr(a, lo, hi), _slice_csr(b, lo, hi), ground, num_itermax, lo)
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]
        return np.concatenate([part.result() for part in parts])
