import numpy as np
import ot
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from evaluation.color import metrics
from evaluation.color.metrics import (
    EMDSolverError,
    dca,
    delta_hue,
    dominant_bins,
    emd,
    emd_rows,
    entropy,
    entropy_difference,
    hue_differences,
    pcc,
    shift,
)
from evaluation.color.palette import load_uw71
from storage.distributions import check_masses


def _point(k):
    p = np.zeros(71)
    p[k] = 1.0
    return p


def _sparse_random(rng, n, k=12):
    """Rows with k non-zero bins each, like real concept distributions."""
    P = np.zeros((n, 71))
    for i in range(n):
        P[i, rng.choice(71, k, replace=False)] = rng.dirichlet(np.full(k, 0.7))
    return P


def test_emd_of_point_masses_is_the_ground_distance():
    D = load_uw71().ground_distance
    for i, j in [(0, 1), (24, 28), (5, 60), (70, 0)]:
        assert_allclose(emd(_point(i), _point(j)), D[i, j], rtol=1e-12)
    assert_allclose(emd(_point(24), _point(28)), 100.0, rtol=1e-12)


def test_identical_distributions_have_emd_0_pcc_1_ed_0():
    p = _sparse_random(np.random.default_rng(0), 1)[0]
    assert emd(p, p) == 0.0
    assert_allclose(pcc(p, p), 1.0, rtol=1e-12)
    assert entropy_difference(p, p) == 0.0


def test_emd_splits_mass_to_nearest_bins():
    # half of the mass stays, the other half moves from black to white: 0.5 * 100 ΔE.
    p = 0.5 * _point(24) + 0.5 * _point(26)
    q = 0.5 * _point(28) + 0.5 * _point(26)
    assert_allclose(emd(p, q), 50.0, rtol=1e-12)


def test_emd_is_symmetric_and_satisfies_the_triangle_inequality():
    rng = np.random.default_rng(1)
    P, Q, R = (_sparse_random(rng, 200) for _ in range(3))
    pq, qp = emd_rows(P, Q), emd_rows(Q, P)
    assert_allclose(pq, qp, rtol=1e-10)
    assert np.all(pq <= emd_rows(P, R) + emd_rows(R, Q) + 1e-9)
    assert np.all(pq > 0)


def test_emd_rows_equals_a_loop_of_ot_emd2_exactly():
    rng = np.random.default_rng(2)
    P, Q = _sparse_random(rng, 300), _sparse_random(rng, 300, k=20)
    Q[:5] = P[:5]  # identical pairs
    D = load_uw71().ground_distance
    loop = np.array([ot.emd2(P[i], Q[i], D) for i in range(300)])
    assert_array_equal(emd_rows(P, Q), loop)
    assert_array_equal(emd_rows(P, Q, workers=2, min_rows_per_worker=1), loop)
    assert_array_equal(loop[:5], 0.0)


def test_emd_rows_normalises_rows_that_are_not_probability_vectors():
    rng = np.random.default_rng(3)
    P, Q = _sparse_random(rng, 50), _sparse_random(rng, 50)
    P, Q = 3.0 * P, 0.01 * Q
    D = load_uw71().ground_distance
    loop = np.array([ot.emd2(P[i] / P[i].sum(), Q[i] / Q[i].sum(), D) for i in range(50)])
    assert_array_equal(emd_rows(P, Q), loop)
    assert_allclose(emd_rows(P, Q), emd_rows(P / P.sum(1, keepdims=True), Q), rtol=1e-12)


def test_emd_and_shift_agree_with_emd_rows():
    rng = np.random.default_rng(4)
    P, Q = _sparse_random(rng, 3), _sparse_random(rng, 3)
    rows = emd_rows(P, Q)
    assert [emd(P[i], Q[i]) for i in range(3)] == list(rows)
    assert shift(P[0], Q[0]) == rows[0]


def test_emd_normalises_unnormalised_mass():
    p, q = 3 * _point(0), 0.25 * _point(1)
    assert_allclose(emd(p, q), load_uw71().ground_distance[0, 1], rtol=1e-12)


def test_emd_raises_when_the_solver_stops_early():
    rng = np.random.default_rng(5)
    P, Q = _sparse_random(rng, 4, k=40), _sparse_random(rng, 4, k=40)
    with pytest.raises(EMDSolverError, match="row 0: network simplex ended iteration limit"):
        emd_rows(P, Q, num_itermax=1)


def test_pcc_matches_numpy_corrcoef_and_is_nan_for_uniform():
    rng = np.random.default_rng(6)
    P, Q = _sparse_random(rng, 5), _sparse_random(rng, 5)
    expected = [np.corrcoef(P[i], Q[i])[0, 1] for i in range(5)]
    assert_allclose(pcc(P, Q), expected, rtol=1e-12)
    assert_allclose(pcc(P[0], -P[0] + 1), -1.0, rtol=1e-12)
    assert np.isnan(pcc(np.ones(71), P[0]))


def test_entropy_uses_natural_log_with_zero_log_zero_as_zero():
    assert entropy(_point(3)) == 0.0
    assert_allclose(entropy(np.ones(71)), np.log(71), rtol=1e-14)
    two = 0.5 * _point(0) + 0.5 * _point(1)
    assert_allclose(entropy_difference(two, _point(5)), np.log(2), rtol=1e-14)
    assert_allclose(
        entropy_difference(np.stack([two, two]), np.stack([_point(5), two])), [np.log(2), 0.0], atol=1e-15
    )


def test_dominant_bins_and_dca():
    P = np.stack([_point(0) + 0.1, _point(5), 0.5 * _point(7) + 0.5 * _point(3)])
    Q = np.stack([_point(0), _point(6), _point(3)])
    assert_array_equal(dominant_bins(P), [0, 5, 3])  # tie 3/7: the lower index wins
    assert_allclose(dca(P, Q), 2 / 3, rtol=1e-15)
    assert dca(P, P) == 1.0


def test_delta_hue_is_the_shortest_angle_and_skips_achromatic_concepts():
    hue = load_uw71().hue_deg
    # bins 0 (h 291.4) and 30 (h 3.0): the short way round is 360 - 288.4 = 71.6 degrees.
    expected = 360 - abs(hue[0] - hue[30])
    P = np.stack([_point(0), _point(24), _point(30), _point(26)])
    Q = np.stack([_point(30), _point(0), _point(30), _point(28)])
    d = hue_differences(P, Q)
    assert_allclose(d[[0, 2]], [expected, 0.0], atol=1e-12)
    assert np.isnan(d[1]) and np.isnan(d[3])
    assert_allclose(delta_hue(P, Q), expected / 2, rtol=1e-12)
    assert np.isnan(delta_hue(P[[1, 3]], Q[[1, 3]]))


@pytest.mark.parametrize(
    "p, message",
    [
        (np.ones(70), r"`p` must have shape \(71,\), got \(70,\)"),
        (np.r_[np.nan, np.ones(70)], "`p` must hold finite masses, got NaN"),
        (np.r_[-0.5, np.ones(70)], "`p` must hold non-negative masses, got -0.5"),
        (np.zeros(71), "`p` has zero total mass"),
    ],
)
def test_check_distribution_rejects_bad_mass(p, message):
    with pytest.raises(ValueError, match=message):
        check_masses(p, "p")
    with pytest.raises(ValueError, match=message):
        emd(p, np.ones(71))


@pytest.mark.parametrize("fn", [emd_rows, pcc, entropy_difference, dca, delta_hue])
def test_batched_metrics_name_the_bad_row_and_argument(fn):
    P, Q = np.ones((3, 71)), np.ones((3, 71))
    Q[2] = 0.0
    with pytest.raises(ValueError, match="`Q` has zero total mass in row 2|`q` has zero"):
        fn(P, Q)
    with pytest.raises(ValueError, match=r"must have shape \(71,\) or \(n, 71\), got \(3, 70\)"):
        fn(np.ones((3, 70)), P)
    with pytest.raises(ValueError, match="same shape"):
        fn(P, np.ones((2, 71)))


def test_a_vector_with_an_array_is_refused_in_either_order_naming_what_each_function_takes():
    """An outside tester's finding: `pcc(p, P)` broadcast while `pcc(P, p)` was refused, and
    `emd` of two arrays or `emd_rows` of two vectors failed deep inside ("too many values to
    unpack", an axis error) without naming the argument."""
    P = np.random.default_rng(0).dirichlet(np.ones(71), size=3)
    for fn in (pcc, entropy_difference):
        for p, q, shapes in (
            (P[0], P, r"`p` \(71,\) and `q` \(3, 71\)"),
            (P, P[0], r"`p` \(3, 71\) and `q` \(71,\)"),
        ):
            with pytest.raises(ValueError, match=shapes + " must have the same shape: two"):
                fn(p, q)
    with pytest.raises(
        ValueError, match=r"^`p` has shape \(3, 71\): `emd` takes two \(71,\) vectors; use `emd_rows`"
    ):
        emd(P, P)
    with pytest.raises(ValueError, match=r"^`q` has shape \(3, 71\): `emd` takes"):
        emd(P[0], P)
    with pytest.raises(ValueError, match=r"^`P` has shape \(71,\): `emd_rows` takes two \(n, 71\) arrays"):
        emd_rows(P[0], P[0])
    with pytest.raises(ValueError, match=r"^`p_modified` has shape \(3, 71\): `shift` takes"):
        shift(P[0], P)
    with pytest.raises(ValueError, match="no rows"):
        dca(np.zeros((0, 71)), np.zeros((0, 71)))
    assert emd(P[0], P[1]) == emd_rows(P[:1], P[1:2])[0] > 0


def test_shift_names_its_arguments():
    with pytest.raises(ValueError, match="`p_modified` has zero total mass"):
        shift(np.ones(71), np.zeros(71))


def test_metrics_module_uses_no_assert_for_validation():
    import inspect

    assert "assert " not in inspect.getsource(metrics)


def _unnormalised_random(rng, n):
    """Sparse rows scaled by random totals, so the one check at the edge normalises them."""
    return _sparse_random(rng, n) * rng.uniform(0.2, 5.0, (n, 1))


def test_concept_metrics_equals_the_public_metrics_bit_for_bit_on_random_rows():
    from evaluation.pipeline.scoring import concept_metrics

    rng = np.random.default_rng(20261126)
    P, Q = _unnormalised_random(rng, 40), _unnormalised_random(rng, 40)
    Q[3] = P[3]  # equal rows: emd 0, pcc 1
    Q[5] = np.full(71, 2.0)  # a uniform row: pcc NaN
    Q[7] = _point(26)  # an achromatic dominant bin: hue NaN
    got = concept_metrics(P, Q)
    expected = {
        "pcc": pcc(P, Q),
        "emd": emd_rows(P, Q),
        "ed": entropy_difference(P, Q),
        "dominant_human": dominant_bins(P),
        "dominant_model": dominant_bins(Q),
        "hue_diff": hue_differences(P, Q),
    }
    assert list(got) == list(expected)
    for name in expected:
        assert_array_equal(got[name], expected[name], strict=True, err_msg=name)
    assert_array_equal([emd(p, q) for p, q in zip(P, Q)], got["emd"], strict=True)
    assert_array_equal([shift(p, q) for p, q in zip(P, Q)], got["emd"], strict=True)


def test_public_metrics_equal_their_kernels_on_checked_input_bit_for_bit():
    rng = np.random.default_rng(7)
    P, Q = _unnormalised_random(rng, 25), _unnormalised_random(rng, 25)
    Pc, Qc = metrics.check_pair(P, Q)
    assert_array_equal(pcc(P, Q), metrics._pcc(Pc, Qc), strict=True)
    assert_array_equal(emd_rows(P, Q), metrics._emd_rows(Pc, Qc), strict=True)
    assert_array_equal(entropy_difference(P, Q), metrics._entropy_difference(Pc, Qc), strict=True)
    assert_array_equal(dominant_bins(P), metrics._dominant(Pc), strict=True)
    hue = metrics._hue_differences(metrics._dominant(Pc), metrics._dominant(Qc))
    assert_array_equal(hue_differences(P, Q), hue, strict=True)
    assert pcc(P[0], Q[0]) == float(metrics._pcc(Pc[0], Qc[0]))


def test_concept_metrics_checks_each_array_once_and_names_it(monkeypatch):
    from evaluation.pipeline import scoring

    calls = []
    real = metrics.check_masses
    monkeypatch.setattr(metrics, "check_masses", lambda p, name: calls.append(name) or real(p, name))
    rng = np.random.default_rng(1)
    scoring.concept_metrics(_sparse_random(rng, 4), _sparse_random(rng, 4))
    assert calls == ["human", "model"]
    bad = _sparse_random(rng, 4)
    bad[2] = 0.0
    with pytest.raises(ValueError, match="`model` has zero total mass in row 2"):
        scoring.concept_metrics(_sparse_random(rng, 4), bad)
    with pytest.raises(ValueError, match=r"`human` \(3, 71\) and `model` \(4, 71\) must have the same shape"):
        scoring.concept_metrics(_sparse_random(rng, 3), _sparse_random(rng, 4))


def test_shift_checks_each_argument_once(monkeypatch):
    calls = []
    real = metrics.check_masses
    monkeypatch.setattr(metrics, "check_masses", lambda p, name: calls.append(name) or real(p, name))
    shift(_point(3), _point(40))
    assert calls == ["p_base", "p_modified"]
