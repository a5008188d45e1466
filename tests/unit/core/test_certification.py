"""Decision rule, p-values, FWER control, radius and sample complexity (Algorithm 1, App. C)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from certified_circuits.core.certification import (
    binomial_pvalue,
    certified_radius,
    certify,
    decide,
    majority_vote,
    max_certifiable_tau,
    min_samples,
    pvalues,
    reject,
    selected_decision,
)


@pytest.mark.parametrize(
    "tau, p_del, radius",
    [(0.95, 0.60, 1), (0.90, 0.95, 9), (0.85, 0.99, 42), (0.90, 0.99, 50), (0.85, 0.95, 8), (0.95, 0.99, 59)],
)
def test_radius_table(tau: float, p_del: float, radius: int) -> None:
    assert certified_radius(tau, p_del) == radius


def test_radius_boundary_is_inclusive_and_zero_at_half() -> None:
    # p_del^1 == 1.5 - tau exactly (0.9): radius 1, although log(0.9)/log(0.9) may round below 1
    assert certified_radius(0.6, 0.9) == 1
    assert certified_radius(0.75, 0.5) == 0  # 0.5^1 < 1.5 - 0.75
    assert certified_radius(0.5, 0.99) == 0  # log(1) = 0
    for tau in np.linspace(0.5, 0.99, 50):
        for p_del in (0.3, 0.6, 0.95, 0.99):
            r = certified_radius(tau, p_del)
            assert p_del**r >= 1.5 - tau - 1e-15 and (r == 0 or p_del ** (r + 1) < 1.5 - tau)


def test_largest_certifiable_tau_at_paper_settings() -> None:
    tau_star = max_certifiable_tau(1000, 0.001, 3840)
    assert tau_star == pytest.approx(0.98495, abs=5e-6)
    # cross-check against the decision rule itself: perfect agreement over 3,840 components
    counts = np.full((1, 3840), 1000)
    assert (certify(np.full((1, 3840), 100), counts, 100, 1000, tau_star - 1e-6, 0.001) == 1).all()
    assert (certify(np.full((1, 3840), 100), counts, 100, 1000, tau_star + 1e-4, 0.001) == -1).all()


@pytest.mark.parametrize("tau, alpha, n_components", [(0.7, 0.001, 3840), (0.9, 0.001, 3840), (0.95, 0.01, 1), (0.99, 1e-4, 100)])
def test_min_samples_is_the_exact_minimum(tau: float, alpha: float, n_components: int) -> None:
    n = min_samples(tau, alpha, n_components)
    level = alpha / n_components
    assert tau**n <= level < tau ** (n - 1)
    assert max_certifiable_tau(n, alpha, n_components) >= tau > max_certifiable_tau(n - 1, alpha, n_components)


def test_correction_costs_about_twice_the_samples() -> None:
    # App. C.2: "the union bound costs just ~2x over uncorrected per-vertex certification"
    for tau in (0.7, 0.8, 0.9):
        ratio = min_samples(tau, 0.001, 3840) / min_samples(tau, 0.001, 1)
        assert 1.8 < ratio < 2.5


def _exact_tail(k: int, n: int, tau: Fraction) -> Fraction:
    return sum(Fraction(math.comb(n, j)) * tau**j * (1 - tau) ** (n - j) for j in range(k, n + 1))


def test_pvalue_is_the_exact_upper_binomial_tail() -> None:
    tau = Fraction(3, 4)
    for n in (1, 5, 12):
        for k in range(0, n + 1):
            assert binomial_pvalue(np.array(k), n, 0.75) == pytest.approx(float(_exact_tail(k, n, tau)), rel=1e-12)
    # perfect agreement: tau^n
    assert binomial_pvalue(np.array(20), 20, 0.9) == pytest.approx(0.9**20, rel=1e-12)


def test_decision_rule_on_a_hand_checked_case() -> None:
    # n0 = 10, n = 20, tau = 0.75, alpha = 0.05 over 4 components -> reject iff p <= 0.0125
    selection = np.array([10, 0, 9, 5])  # guesses: in, out, in, out (5/10 is a tie -> out)
    certification = np.array([20, 1, 16, 10])  # agreeing: 20, 19, 16, 10
    decision, pvalue, _ = decide(selection, certification, 10, 20, 0.75, 0.05)
    expected_p = [float(_exact_tail(k, 20, Fraction(3, 4))) for k in (20, 19, 16, 10)]
    np.testing.assert_allclose(pvalue, expected_p, rtol=1e-12)
    # 0.75^20 = 0.00317 and P[>=19] = 0.0243: only the first is certified at 0.0125
    assert decision.tolist() == [1, -1, -1, -1]
    # uncorrected (alpha/1 on each) would also certify the second: the correction matters
    assert certify(selection[1:2], certification[1:2], 10, 20, 0.75, 0.05).tolist() == [0]
    assert decision.dtype == np.int8


def test_selection_tie_goes_to_out() -> None:
    assert selected_decision(np.array([3, 4, 5]), 8).tolist() == [0, 0, 1]


def test_correction_runs_per_k_over_components() -> None:
    # two K rows; the Bonferroni divisor is the number of components (3), never 6
    selection = np.array([[10, 10, 10], [10, 0, 0]])
    certification = np.array([[20, 20, 20], [20, 0, 0]])
    d = certify(selection, certification, 10, 20, 0.75, alpha=3 * 0.0032)  # alpha/3 = 0.0032 >= 0.75^20
    assert (d == np.array([[1, 1, 1], [1, 0, 0]])).all()
    d = certify(selection, certification, 10, 20, 0.75, alpha=6 * 0.0031)  # alpha/3 = 0.0062, alpha/6 would fail
    assert (d != -1).all()


@pytest.mark.slow
def test_holm_matches_statsmodels_and_is_a_superset_of_bonferroni(rng: np.random.Generator, multipletests) -> None:
    pvalues = rng.uniform(0, 0.02, size=(50, 40)) ** 2
    holm = reject(pvalues, 0.01, "holm")
    bonferroni = reject(pvalues, 0.01, "bonferroni")
    for row in range(50):
        np.testing.assert_array_equal(holm[row], multipletests(pvalues[row], 0.01, method="holm")[0])
        np.testing.assert_array_equal(bonferroni[row], multipletests(pvalues[row], 0.01, method="bonferroni")[0])
    assert (holm >= bonferroni).all() and holm.sum() > bonferroni.sum()


def test_majority_vote_pools_both_streams() -> None:
    assert majority_vote(np.array([0, 10, 5]), np.array([60, 46, 50]), 10, 100).tolist() == [True, True, False]  # 60, 56, 55 of 110


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(tau=1.0), "tau"),
        (dict(tau=0.49), "tau"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=1.0), "alpha"),
        (dict(n=0), "n"),
        (dict(n0=0), "n0"),
        (dict(correction="sidak"), "correction"),
    ],
)
def test_invalid_parameters_raise(kwargs: dict, match: str) -> None:
    args = dict(selection_counts=np.array([1]), certification_counts=np.array([0]), n0=2, n=2, tau=0.9, alpha=0.01)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        certify(**args)


def test_shape_mismatch_and_out_of_range_counts_raise() -> None:
    with pytest.raises(ValueError, match="same shape"):
        certify(np.zeros((2, 3), int), np.zeros((2, 4), int), 5, 5, 0.9, 0.01)
    with pytest.raises(ValueError, match=r"\[0, 5\]"):
        certify(np.zeros(3, int), np.array([0, 6, 1]), 5, 5, 0.9, 0.01)
    with pytest.raises(ValueError, match="p_del"):
        certified_radius(0.9, 1.0)


def _simulate_family_errors(correction: str | None, tau: float, alpha: float, reps: int, seed: int) -> int:
    """Base algorithm with known inclusion probabilities at the worst case for the test (p = tau, 1 - tau).

    An error is a certified decision on the wrong side of margin tau: certified in while p <= tau, or
    certified out while 1 - p <= tau. Returns the number of repetitions with at least one error.
    """
    rng = np.random.default_rng(seed)
    p_true = np.array([tau] * 10 + [1 - tau] * 10 + [0.5] * 5 + [0.99] * 5)
    n0, n = 20, 100
    selection = rng.binomial(n0, p_true, size=(reps, p_true.size))
    certification = rng.binomial(n, p_true, size=(reps, p_true.size))
    if correction is None:  # per-component test at level alpha: what a missing correction does
        guess, pvalue = pvalues(selection, certification, n0, n, tau)
        decision = np.where(pvalue <= alpha, guess, -1)
    else:
        decision = certify(selection, certification, n0, n, tau, alpha, correction)
    wrong_in = (decision == 1) & (p_true <= tau)
    wrong_out = (decision == 0) & (1 - p_true <= tau)
    return int((wrong_in | wrong_out).any(axis=1).sum())


@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
def test_family_wise_error_stays_within_alpha(correction: str) -> None:
    tau, alpha, reps = 0.7, 0.1, 4000
    errors = _simulate_family_errors(correction, tau, alpha, reps, seed=1)
    # the number of failing families is Binomial(reps, FWER <= alpha): allow its 99.9% quantile
    assert errors <= binom.ppf(0.999, reps, alpha)


def test_family_wise_error_simulation_detects_a_missing_correction() -> None:
    tau, alpha, reps = 0.7, 0.1, 4000
    errors = _simulate_family_errors(None, tau, alpha, reps, seed=1)
    assert errors > binom.ppf(0.999, reps, alpha) * 2  # uncorrected FWER is far above alpha


@settings(max_examples=60, deadline=None)
@given(
    n0=st.integers(1, 50),
    n=st.integers(1, 200),
    tau_pair=st.tuples(st.floats(0.5, 0.99), st.floats(0.5, 0.99)),
    alpha_pair=st.tuples(st.floats(1e-6, 0.5), st.floats(1e-6, 0.5)),
    seed=st.integers(0, 2**31),
    correction=st.sampled_from(["bonferroni", "holm"]),
)
def test_property_monotone_in_tau_and_alpha(n0, n, tau_pair, alpha_pair, seed, correction) -> None:
    rng = np.random.default_rng(seed)
    selection = rng.integers(0, n0 + 1, size=(3, 17))
    certification = rng.integers(0, n + 1, size=(3, 17))
    lo_tau, hi_tau = sorted(tau_pair)
    lo_alpha, hi_alpha = sorted(alpha_pair)
    strict = certify(selection, certification, n0, n, hi_tau, lo_alpha, correction)
    loose_tau = certify(selection, certification, n0, n, lo_tau, lo_alpha, correction)
    loose_alpha = certify(selection, certification, n0, n, hi_tau, hi_alpha, correction)
    for loose in (loose_tau, loose_alpha):
        decided = strict != -1
        assert (loose[decided] == strict[decided]).all()  # a decision never flips, it can only appear
    assert strict.shape == selection.shape and strict.dtype == np.int8
    assert set(np.unique(strict)) <= {-1, 0, 1}
