"""Benchmark of Table 3's pair bootstrap at the full study's size: time and peak memory.

Run ``python -m bench.bench_bootstrap`` (figures go to BENCHMARKS.md by hand).

A study of every concept (1,278) and seven models has 1,278 × 21 = 26,838 pairs. With six
votes a pair, `evaluation.analysis.judgments.metric_validation` resamples the pairs
`n_boot` times for each of the five metrics. The resampled indices are drawn in blocks of
`judgments._BOOT_BLOCK` (2 million); ``--one-draw`` draws each metric's `n_boot` × pairs
indices at once, as the code before the blocks did, to compare. Peak memory is what
``tracemalloc`` saw (NumPy reports its arrays to it), above what was held before the call.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from itertools import combinations

import numpy as np
import pandas as pd

from evaluation.analysis import judgments
from evaluation.analysis.judgments import MAX_BOOT, VOTE_COLUMNS, metric_validation

MODELS = ("sdxl", "sd3", "sd35", "flux-dev", "sana15", "qwen-image", "omnigen2")


def study(
    n_concepts: int, votes_per_pair: int, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Votes on every pair of `MODELS` for `n_concepts` concepts, driven by EMD, and the metrics."""
    n = n_concepts * len(MODELS)
    metrics = pd.DataFrame(
        {
            "concept": np.repeat([f"c{c}" for c in range(n_concepts)], len(MODELS)),
            "model": np.tile(MODELS, n_concepts),
            "pcc": rng.uniform(0.3, 0.9, n),
            "emd": rng.normal(30, 4, n),
            "ed": rng.uniform(0, 1, n),
            "dca": (rng.random(n) < 0.15).astype(float),
            "hue_diff": rng.uniform(0, 90, n),
        }
    )
    emd = metrics["emd"].to_numpy().reshape(n_concepts, len(MODELS))
    a, b = np.array(list(combinations(range(len(MODELS)), 2))).T
    p_a = 1.0 / (1.0 + np.exp(-(emd[:, b] - emd[:, a]) / 2.0))  # (concepts, pairs): lower EMD wins
    chose_a = rng.random((*p_a.shape, votes_per_pair)) < p_a[..., None]
    concept, pair, voter = np.indices(chose_a.shape).reshape(3, -1)
    names = np.array(MODELS)
    votes = pd.DataFrame(
        {
            "pair_id": [f"c{c}|{names[a[k]]}|{names[b[k]]}" for c, k in zip(concept, pair, strict=True)],
            "concept": [f"c{c}" for c in concept],
            "model_a": names[a[pair]],
            "model_b": names[b[pair]],
            "chosen": np.where(chose_a.reshape(-1), names[a[pair]], names[b[pair]]),
            "participant_id": [f"p{v}" for v in voter],
            "design_background": True,
            "attention_check": False,
            "attention_passed": None,
        }
    )
    return votes[list(VOTE_COLUMNS)], metrics


def run(n_concepts: int = 1278, n_boot: int = MAX_BOOT, one_draw: bool = False) -> dict:
    """Seconds and peak MB of `metric_validation` on the study `study` makes."""
    votes, metrics = study(n_concepts, 6, np.random.default_rng(0))
    if one_draw:
        judgments._BOOT_BLOCK = n_boot * n_concepts * 21
    tracemalloc.start()
    start = time.perf_counter()
    result = metric_validation(votes, metrics, rng=np.random.default_rng(1), n_boot=n_boot)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {
        "pairs": int(result["n_pairs"].max()),
        "n_boot": n_boot,
        "one_draw": one_draw,
        "seconds": round(seconds, 1),
        "peak_mb": round(peak),
        "emd_pearson_ci": (
            round(result.set_index("metric").loc["emd", "pearson_lo"], 4),
            round(result.set_index("metric").loc["emd", "pearson_hi"], 4),
        ),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concepts", type=int, default=1278)
    parser.add_argument("--n-boot", type=int, default=MAX_BOOT)
    parser.add_argument(
        "--one-draw", action="store_true", help="draw every resample at once (the earlier code)"
    )
    args = parser.parse_args()
    print(run(args.concepts, args.n_boot, args.one_draw))
