"""SCD plausibility of every coloring of many concepts at once, for the blind vote queue.

`annotation.qc.review.plausibility_scores` scores one concept through
`evaluation.color.plausibility.plausibility_ranking`; opening the whole queue at the full
study's size (1,278 concepts x 5 colorings) spent 2.7 s doing that concept by concept,
mostly in per-call overhead (a pandas frame, `np.unique` and `rgb2hsv` per coloring, one
smoothing of the prior per coloring). `scores_by_concept` computes the same numbers in
batches:

1. the stored pixel samples are read a batch of concepts at a time (one query each);
2. each coloring's distinct colors and their pixel counts come from one `np.unique` over
   the runs of equal pixels of the whole batch (a coloring is a few flat paints, so its
   sample is mostly long runs), and each distinct color's SCD bin from one
   `hs_bin_index` call, so each histogram is the one `hs_histogram` gives;
3. every leave-one-out prior of every concept is smoothed in one array operation (Eqs.
   1-5 of `evaluation.color.plausibility.bin_plausibility` with a leading axis);
4. a coloring's score is its histogram dotted with its prior's bin plausibility, as in
   `plausibility_ranking`.

The scores equal `plausibility_scores`' to within float rounding (the tests pin it).
"""

from __future__ import annotations

import zlib

import numpy as np
import sqlite_utils
from numpy.lib.stride_tricks import sliding_window_view

from evaluation.color.plausibility import SCD, SCDConfig, _window_weights, hs_bin_index
from storage import select

# Concepts' samples are decoded about this many colorings at a time (~30 kB each).
BATCH_COLORINGS = 1024


def scores_by_concept(
    db: sqlite_utils.Database, concepts: list[list[int]], *, config: SCDConfig = SCD
) -> list[dict[int, float]]:
    """Leave-one-out SCD plausibility of the colorings of each concept.

    Parameters
    ----------
    concepts : list of list of int
        Per concept, the ids of its colorings (those of one concept only), in id order.
    config : SCDConfig
        Binning and window.

    Returns
    -------
    list of dict
        Per concept, coloring id -> score in [0, 1] (`annotation.qc.review.plausibility_scores`);
        empty for a concept with fewer than two colorings.

    Raises
    ------
    LookupError
        If a coloring has no stored sample, or its sample holds no pixels (score such a
        concept with `plausibility_scores`, which says what it lacks).
    """
    out: list[dict[int, float]] = [{} for _ in concepts]
    batch: list[int] = []
    size = 0
    for index, ids in enumerate(concepts):
        if len(ids) >= 2:
            batch.append(index)
            size += len(ids)
        if batch and (index == len(concepts) - 1 or size >= BATCH_COLORINGS):
            for i, scores in zip(batch, _score_batch(db, [concepts[i] for i in batch], config)):
                out[i] = scores
            batch, size = [], 0
    return out


def _score_batch(
    db: sqlite_utils.Database, groups: list[list[int]], config: SCDConfig
) -> list[dict[int, float]]:
    ids = [i for group in groups for i in group]
    hists = _histograms(db, ids, config)
    priors, starts = [], 0
    for group in groups:
        block = hists[starts : starts + len(group)]
        # as `plausibility_ranking`: the mean of the other colorings' histograms
        priors.append((block.sum(axis=0) - block) / (len(group) - 1))
        starts += len(group)
    plausible = bin_plausibility_rows(np.concatenate(priors), config=config)
    scores = [float(h @ p) for h, p in zip(hists, plausible)]
    out, starts = [], 0
    for group in groups:
        out.append(dict(zip(group, scores[starts : starts + len(group)])))
        starts += len(group)
    return out


def _histograms(db: sqlite_utils.Database, ids: list[int], config: SCDConfig) -> np.ndarray:
    """`hs_histogram` of each coloring's stored sample, shape (len(ids), n_bins)."""
    found = {
        r["coloring_id"]: r
        for r in select(
            db,
            "select coloring_id, n_pixels, pixels from coloring_samples where coloring_id in "
            f"({', '.join('?' * len(ids))})",
            ids,
        )
    }
    missing = [i for i in ids if i not in found or not found[i]["n_pixels"]]
    if missing:
        raise LookupError(f"colorings {missing} have no stored pixel sample with pixels")
    sizes = np.array([found[i]["n_pixels"] for i in ids], dtype=np.int64)
    n = int(sizes.sum())
    # Every sample in one buffer with a spare byte at the end, so that pixel k's color is
    # the 4 bytes from 3k read as a little-endian uint32 and masked to its 3: one pass.
    buffer = b"".join([*(zlib.decompress(found[i]["pixels"]) for i in ids), b"\0"])
    if len(buffer) != 3 * n + 1:
        raise LookupError(f"the pixel samples of colorings {ids} do not hold the pixels they count")
    codes = np.ndarray((n,), np.dtype("<u4"), buffer, 0, (3,)) & np.uint32(0xFFFFFF)
    # Runs of one color, cut where a coloring ends; then each coloring's distinct colors
    # with their pixel counts (the pairs sort by coloring, then color).
    ends = np.cumsum(sizes)
    change = codes[1:] != codes[:-1]
    change[ends[:-1] - 1] = True
    starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    lengths = np.diff(np.append(starts, n))
    owner = np.searchsorted(ends, starts, side="right")
    pairs, where = np.unique((owner.astype(np.uint64) << np.uint64(24)) | codes[starts], return_inverse=True)
    counts = np.bincount(where.reshape(-1), weights=lengths, minlength=len(pairs))
    colors, color_of = np.unique(pairs & np.uint64(0xFFFFFF), return_inverse=True)
    rgb = np.stack([colors & 255, (colors >> np.uint64(8)) & 255, colors >> np.uint64(16)], axis=-1)
    bins = hs_bin_index(rgb.astype(np.uint8), config=config)[color_of.reshape(-1)]
    cells = (pairs >> np.uint64(24)).astype(np.int64) * config.n_bins + bins
    hists = np.bincount(cells, weights=counts, minlength=len(ids) * config.n_bins)
    return hists.reshape(len(ids), config.n_bins) / sizes[:, None]


def bin_plausibility_rows(priors: np.ndarray, *, config: SCDConfig = SCD) -> np.ndarray:
    """`evaluation.color.plausibility.bin_plausibility` of each row of `priors`.

    Parameters
    ----------
    priors : numpy.ndarray, shape (n, config.n_bins)
        Prior histograms, non-negative, each with positive mass.

    Returns
    -------
    numpy.ndarray, shape (n, config.n_bins)
        Per row, p = S / S_max per bin, in [0, 1].
    """
    f = np.asarray(priors, dtype=float)
    if f.ndim != 2 or f.shape[1] != config.n_bins or (len(f) and (f.min() < 0 or f.sum(axis=1).min() <= 0)):
        raise ValueError(
            f"`priors` must be non-negative rows with positive mass and shape (n, {config.n_bins}), "
            f"got shape {f.shape}"
        )
    n = len(f)
    grid = np.empty((n, config.n_rows, config.n_hue))
    grid[:, 0] = f[:, :1] / (config.achromatic_max_pct * 360.0)
    grid[:, 1:] = f[:, 1:].reshape(n, config.n_rows - 1, config.n_hue) / (
        config.sat_bin_pct * config.hue_bin_deg
    )
    weights = _window_weights(config)
    pad_s, pad_h = (weights.shape[0] - 1) // 2, (weights.shape[1] - 1) // 2
    padded = np.pad(grid, ((0, 0), (pad_s, pad_s), (0, 0)))
    padded = np.pad(padded, ((0, 0), (0, 0), (pad_h, pad_h)), mode="wrap")
    windows = sliding_window_view(padded, weights.shape, axis=(1, 2))
    smoothed = np.einsum("nrhij,ij->nrh", windows, weights)
    scores = np.concatenate(
        [smoothed[:, 0].mean(axis=1, keepdims=True), smoothed[:, 1:].reshape(n, -1)], axis=1
    )
    return scores / scores.max(axis=1, keepdims=True)
