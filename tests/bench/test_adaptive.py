"""The adaptive-collection simulation: its truth, its designers and its report."""

import numpy as np
import pytest

from bench import bench_adaptive
from bench.__main__ import BENCHMARKS, TITLES


def test_the_truth_is_the_22_rated_concepts_of_table_9_as_distributions():
    truth = bench_adaptive.truths()
    assert len(truth) == 22
    assert all(p.shape == (71,) and p.sum() == pytest.approx(1.0) for p in truth.values())


def test_a_synthetic_coloring_paints_one_to_three_colors_of_the_truth():
    truth = np.zeros(71)
    truth[[3, 9, 40]] = [0.5, 0.3, 0.2]
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = bench_adaptive.coloring(truth, rng)
        assert p.sum() == pytest.approx(1.0) and set(np.flatnonzero(p)) <= {3, 9, 40}


def test_adaptive_stops_at_min_k_when_stable_and_at_the_cap_when_not():
    rng = np.random.default_rng(1)
    flat, sharp = np.full(71, 1 / 71), np.eye(71)[5]
    assert len(bench_adaptive.collect(sharp, rng, min_k=3, cap=6, threshold=0.5)) == 3
    assert len(bench_adaptive.collect(flat, rng, min_k=3, cap=6, threshold=0.5)) == 6
    assert len(bench_adaptive.collect(flat, rng, min_k=5, cap=5, threshold=None)) == 5


def test_the_report_compares_with_fixed_k_5_and_is_registered():
    f = bench_adaptive.run(2, fixed=(5,), adaptive=((4, 10, (20.0,)),))
    assert [r["mode"] for r in f["results"]] == ["fixed", "adaptive"]
    assert f["reference"]["colorings"] == 110.0
    text = bench_adaptive.markdown(f)
    assert text.startswith("| mode | min K | cap |") and "fixed K = 5's mean P_H error" in text
    assert "adaptive" in BENCHMARKS and TITLES["adaptive"] == "Adaptive collection"
