"""The package's one binomial tail, ``core.certification.binomial_tail`` (certificates' p-values, the planner's power,
the reports' McNemar test), against the exact sum ``sum_{i >= k} C(n, i) p^i (1 - p)^(n - i)`` in rationals.

``p`` is taken as the exact rational of its float64, so the reference carries no rounding at all. Tolerance: 2e-13
relative (measured: at most 1.1e-13; ``scipy.special.bdtrc``, used before, is off by up to 1.5e-12, which the large
cases below catch).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from certified_circuits.core.certification import binomial_pvalue, binomial_tail


def exact_tail(k: int, n: int, p: float) -> float:
    """``P[Bin(n, p) >= k]`` summed in rationals, rounded once to float64."""
    if k <= 0:
        return 1.0
    q = Fraction(p)
    return float(sum(comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k, n + 1)))


@pytest.mark.parametrize("p", [0.0, 0.01, 0.3, 0.4999, 0.5, 0.6, 0.75, 0.95, 0.99, 1.0])
def test_every_count_of_small_n_equals_the_exact_sum(p: float) -> None:
    """All (k, n) with n <= 12 and k in -1..n + 1, enumerated."""
    tolerance = 2e-13
    for n in range(13):
        ks = np.arange(-1, n + 2)
        got = binomial_tail(ks, n, p)
        expected = np.array([exact_tail(int(k), n, p) for k in ks])
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=0)
        assert got[0] == got[1] == 1.0 and got[-1] == 0.0  # k <= 0: certain; k > n: impossible


@pytest.mark.parametrize("k, n, p", [
    (1130, 2130, 0.5),   # McNemar with 1,000 and 1,130 discordant pairs: bdtrc was off by 1.5e-12
    (1000, 1000, 0.95),  # a certificate with every sample agreeing: tau^n
    (980, 1000, 0.95), (955, 1000, 0.95), (90, 100, 0.9), (1000, 1100, 0.9), (60, 100, 0.6),
    (300, 1000, 0.25), (40, 400, 0.05),
])
def test_large_counts_equal_the_exact_sum(k: int, n: int, p: float) -> None:
    expected = exact_tail(k, n, p)
    assert expected > 0
    assert float(binomial_tail(k, n, p)) == pytest.approx(expected, rel=2e-13, abs=0)


def test_the_certificates_pvalue_is_the_tail_and_broadcasts() -> None:
    """binomial_pvalue (Algorithm 1's BinPValue) is the tail at tau, through its lookup table (one n for many
    counts) and directly (one n per count, the planner's), with the same bits either way."""
    rng = np.random.default_rng(3)
    agreeing = rng.integers(0, 102, size=500)
    table = binomial_pvalue(agreeing, 100, 0.9)  # 500 counts > n + 2: the table path
    np.testing.assert_array_equal(table, binomial_tail(agreeing, 100, 0.9))
    assert table[agreeing == 100][0] == pytest.approx(0.9**100, rel=2e-13)
    per_count = binomial_pvalue(np.array([0, 3, 5, 9]), np.array([4, 4, 8, 8]), 0.75)
    np.testing.assert_allclose(per_count, [1.0, exact_tail(3, 4, 0.75), exact_tail(5, 8, 0.75), 0.0], rtol=2e-13)
