"""``report-sufficiency`` in seconds (issue 51, point 3): the same tables as before, from faster code.

The default's tables took 70-78 s, nearly all of it in two paired tests: scipy's Wilcoxon evaluated its statistic once
per sign flip in Python (its exact permutation branch, taken when the class-level differences hold a zero or a tie),
and the per-example bootstrap drew a multinomial count for every example of every resample. Here each fast path is
checked against the code it replaced, and the whole report against the tables the code at dbd3f82 wrote for a
generated table of the default's shape (tests/unit/data/sufficiency_reference).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from certified_circuits.analysis.evaluation import _average_ranks, signed_rank_test
from certified_circuits.analysis.faithfulness import curve_areas, curve_areas_by, faithfulness_table
from certified_circuits.analysis.paired_tests import paired_bootstrap_balanced
from tests.helpers.fresh import fresh_output
from tests.helpers.sufficiency_tables import write_default_tables
from tests.helpers.paths import UNIT_DATA

REFERENCE = UNIT_DATA / "sufficiency_reference"
#: bootstrap resamples of the report (analysis.paired_tests.paired_example_test's default)
RESAMPLES = 10_000
#: float columns: relative difference allowed (summation order only; every integer and text compares exactly)
FLOAT_RTOL = 1e-12


def bootstrap_tolerance(pvalue: np.ndarray, resamples: int) -> np.ndarray:
    """How far two bootstrap p-values of one bootstrap distribution, from different draws, may lie apart: 4 standard
    errors of a Monte Carlo proportion, sqrt(p (1 - p) / B), plus 2/B for the p-value's resolution."""
    return 4 * np.sqrt(pvalue * (1 - pvalue) / resamples) + 2 / resamples


def test_signed_rank_test_equals_scipy_wilcoxon_on_zeros_and_ties() -> None:
    """The vectorised permutation branch gives scipy's statistic and p-value exactly (the ranks are multiples of
    1/2, so every sum is exact), for 2-15 pairs (13 is the largest permuted n; above it scipy's own branches run)."""
    rng = np.random.default_rng(5)
    compared = permuted = 0
    sizes = [*rng.integers(2, 10, 60), 13, 14]  # scipy's own permutation test doubles its time with each pair
    for trial, n in enumerate(sizes):
        n = int(n)
        certified, baseline = rng.integers(0, 5, n) / 4, rng.integers(0, 5, n) / 4  # quarters: zeros and ties
        if not np.any(certified - baseline):
            continue
        alternative = ("two-sided", "greater", "less")[trial % 3]
        expected = stats.wilcoxon(certified - baseline, zero_method="zsplit", alternative=alternative)
        assert signed_rank_test(certified, baseline, alternative) == (float(expected.statistic), float(expected.pvalue))
        compared += 1
        permuted += n <= 13
    assert compared >= 55 and permuted >= 50


def test_signed_rank_test_equals_scipy_wilcoxon_without_zeros_or_ties() -> None:
    """Distinct non-zero differences: scipy's exact null distribution (n <= 13) is the same enumeration of sign flips,
    so statistic and p-value are equal exactly; 14-20 pairs go to scipy itself."""
    rng = np.random.default_rng(8)
    for trial, n in enumerate([*range(2, 14), *range(2, 14), 14, 20]):
        certified, baseline = rng.random(n), rng.random(n)  # continuous: no zero, no tie
        alternative = ("two-sided", "greater", "less")[trial % 3]
        expected = stats.wilcoxon(certified - baseline, zero_method="zsplit", alternative=alternative)
        assert signed_rank_test(certified, baseline, alternative) == (float(expected.statistic), float(expected.pvalue))


def test_signed_rank_test_by_hand() -> None:
    """Differences (1, 2, 3): r_plus = 6, the 8 sign flips give r_plus* in {0, 1, 2, 3, 3, 4, 5, 6}, so P[>= 6] = 1/8
    and the two-sided p = 2/8 (statistic min(6, 0) = 0). Differences (0, 1, -2): ranks 1, 2, 3, the zero's 1 split
    (z = 1/2), r_plus = 2.5, r_minus = 3.5; r_plus* = 0.5 + {0, 2, 3, 5}, each twice: P[<= 2.5] = 1/2, P[>= 2.5] =
    3/4, two-sided min(1, 2 * 1/2) = 1, one-sided ``less`` 1/2."""
    assert signed_rank_test(np.array([1.0, 2.0, 3.0]), np.zeros(3)) == (0.0, 0.25)
    assert signed_rank_test(np.array([1.0, 2.0, 3.0]), np.zeros(3), "greater") == (6.0, 0.125)
    assert signed_rank_test(np.array([0.0, 1.0, -2.0]), np.zeros(3)) == (2.5, 1.0)
    assert signed_rank_test(np.array([0.0, 1.0, -2.0]), np.zeros(3), "less") == (2.5, 0.5)
    assert signed_rank_test(np.array([0.0, 1.0, -2.0]), np.zeros(3), "greater") == (2.5, 0.75)
    with pytest.raises(ValueError, match="alternative='sideways' is invalid"):
        signed_rank_test(np.array([1.0, 2.0]), np.zeros(2), "sideways")


def test_average_ranks_share_the_mean_rank_of_a_tie() -> None:
    """(3, 1, 3, 2, 3): sorted 1, 2, 3, 3, 3, so the three 3s share (3 + 4 + 5) / 3 = 4."""
    np.testing.assert_array_equal(_average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])), [4.0, 1.0, 4.0, 2.0, 4.0])
    np.testing.assert_array_equal(_average_ranks(np.array([0.5, 0.5])), [1.5, 1.5])


def test_the_report_modules_run_their_tests_without_scipy_stats() -> None:
    """scipy.stats takes ~0.7 s of CPU to import, a seventh of report-sufficiency (issue 51): the report's modules do
    not import it, and neither do its class-level Wilcoxon test (<= 13 pairs), McNemar test and bootstrap."""
    loaded = fresh_output(
        "import sys, numpy as np\n"
        "from certified_circuits.reports import paper\n"
        "from certified_circuits.analysis.evaluation import paired_test\n"
        "from certified_circuits.analysis.paired_tests import mcnemar_exact, paired_bootstrap_balanced\n"
        "assert paired_test(np.array([0.5, 0.7, 0.9, 0.9]), np.array([0.5, 0.6, 0.7, 0.8])) == 0.25\n"
        "assert mcnemar_exact(np.array([1, 0, 0], bool), np.array([0, 1, 1], bool)).pvalue == 1.0\n"
        "paired_bootstrap_balanced([(0, np.array([1, 0], bool), np.array([1, 1], bool))], n_resamples=10)\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))")
    assert loaded == "[]"


def _multinomial_bootstrap(strata, n_resamples: int, seed: int) -> float:
    """The bootstrap as it was written before issue 51: every example's count, Multinomial(n_s, 1/n_s)."""
    rng = np.random.default_rng(seed)
    observed, boot = {}, {}
    for concept, base, cert in strata:
        diff = cert.astype(float) - base.astype(float)
        counts = rng.multinomial(diff.size, np.full(diff.size, 1.0 / diff.size), size=n_resamples)
        observed.setdefault(concept, []).append(diff.mean())
        boot.setdefault(concept, []).append(counts @ diff / diff.size)
    delta = np.mean([np.mean(v) for v in observed.values()])
    resampled = np.mean([np.mean(boot[c], axis=0) for c in sorted(boot)], axis=0)
    return float((1 + np.count_nonzero(np.abs(resampled - delta) >= abs(delta) - 1e-12)) / (1 + n_resamples))


@pytest.mark.parametrize("shift", [0.0, 0.08, 0.3])
def test_bootstrap_from_counts_has_the_multinomial_bootstrap_distribution(shift: float) -> None:
    """Drawing each stratum's gained and lost counts (a trinomial) is the multinomial bootstrap aggregated: both give
    the same p-value up to Monte Carlo error (here p = 0.28, 0.67 and 0.0004)."""
    rng = np.random.default_rng(11)
    strata = []
    for concept in range(6):
        for size in (int(rng.integers(10, 30)), 50):  # positives, negatives
            base = rng.random(size) < 0.7
            cert = np.where(rng.random(size) < 0.15, rng.random(size) < 0.7 + shift, base)
            strata.append((concept, base, cert))
    fast = paired_bootstrap_balanced(strata, n_resamples=RESAMPLES, seed=1).pvalue
    slow = _multinomial_bootstrap(strata, RESAMPLES, seed=2)
    assert abs(fast - slow) <= bootstrap_tolerance(slow, RESAMPLES), (fast, slow)


def test_bootstrap_depends_only_on_the_counts() -> None:
    """Two strata sets with the same sizes, gained and lost counts (other examples) give one result: what the
    report's peak and selected rows share when they pair the same circuits."""
    base = np.array([1, 1, 0, 0, 1, 0, 1, 1], bool)
    cert = np.array([1, 0, 1, 1, 1, 0, 1, 1], bool)  # gained 2, lost 1
    order = np.array([7, 6, 5, 4, 3, 2, 1, 0])
    one = paired_bootstrap_balanced([(0, base, cert), (1, ~base, ~base)], n_resamples=500, seed=4)
    other = paired_bootstrap_balanced([(0, base[order], cert[order]), (1, base, base)], n_resamples=500, seed=4)
    assert one == other and one.discordant == 3 and one.n_examples == 16
    assert one.difference == pytest.approx((2 - 1) / 8 / 2, abs=1e-15)  # concept 0: +1/8, concept 1: 0


def test_curve_areas_by_equals_trapezoids_curve_by_curve() -> None:
    """Many ragged curves at once equal np.trapezoid on each curve completed with (0, 0) and (1, 1)."""
    rng = np.random.default_rng(3)
    lengths = [1, 2, 5, 10, 3]
    ks = [np.sort(rng.choice(np.linspace(0, 1, 21), size=n, replace=False)) for n in lengths]
    fs = [rng.normal(0.6, 0.4, size=n) for n in lengths]
    fs[2][1] = np.nan  # a NaN point makes its curve's areas NaN
    curve = np.repeat(np.arange(len(lengths)), lengths)
    cpr, cmd = curve_areas_by(curve, np.concatenate(ks), np.concatenate(fs))
    for i, (k, f) in enumerate(zip(ks, fs)):
        if k[0] > 0:
            k, f = np.r_[0.0, k], np.r_[0.0, f]
        if k[-1] < 1:
            k, f = np.r_[k, 1.0], np.r_[f, 1.0]
        np.testing.assert_allclose([cpr[i], cmd[i]], [np.trapezoid(f, k), np.trapezoid(np.abs(1 - f), k)],
                                   rtol=FLOAT_RTOL, equal_nan=True)
    assert curve_areas([], []) == (0.5, 0.5)  # the empty circuit's curve: (0, 0) to (1, 1)
    assert np.isnan(cpr[2]) and np.isnan(cmd[2])


def test_faithfulness_table_keeps_the_first_appearance_order_and_first_point_at_k() -> None:
    """Curves in order of first appearance; m_full and m_empty of the curve's smallest K; f at a reported K is the
    first such point; a curve without it gets NaN."""
    rows = [dict(experiment="e", concept=c, eval_set="id", method=m, k_target=k, m=m_value, m_empty=0.0, m_full=2.0)
            for c, m in (("b", "certified"), ("a", "baseline")) for k, m_value in ((0.5, 1.0), (0.25, 0.5), (1.0, 2.0))]
    rows.append(dict(experiment="e", concept="c", eval_set="id", method="baseline", k_target=0.75, m=1.5, m_empty=0.0,
                     m_full=2.0))
    out = faithfulness_table(pd.DataFrame(rows), ["experiment", "eval_set"])
    assert list(out.concept) == ["b", "a", "c"] and list(out.n_k) == [3, 3, 1]
    # f = m / 2 at K 0.25, 0.5, 1: 0.25, 0.5, 1; with (0, 0): CPR = 0.25 * 0.125 + 0.25 * 0.375 + 0.5 * 0.75 = 0.5
    assert out.cpr.iloc[0] == pytest.approx(0.5, abs=1e-15) and out["f_k0.25"].iloc[0] == 0.25
    assert out["f_k0.5"].iloc[1] == 0.5 and np.isnan(out["f_k0.25"].iloc[2])


def test_report_equals_the_tables_written_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default's shape (10 classes x 2 scorers x 6 eval sets x 31 circuits = 3,720 rows of zero ablation, per-example
    outcomes included) through the report, against the tables the code at dbd3f82 wrote from the same CSVs: integers
    and text exactly, floats to FLOAT_RTOL, and the bootstrap's p-values (new draws of the same bootstrap distribution)
    within :func:`bootstrap_tolerance`. The figures are not compared (skipped here)."""
    from certified_circuits.reports import paper

    inputs = sorted(write_default_tables(tmp_path / "sufficiency", seed=0))  # the reference read them in name order
    recorded = dict(line.split()[::-1] for line in (REFERENCE / "inputs.sha256").read_text().splitlines())
    written = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs}
    assert written == recorded, ("tests/helpers/sufficiency_tables.py no longer writes the CSVs the reference tables "
                                 "were made from: write them again with the code at dbd3f82 (git archive dbd3f82 src) "
                                 "and update tests/unit/data/sufficiency_reference")
    monkeypatch.setattr(paper.figures, "plot_cacc_figures", lambda *args, **kwargs: {})
    out = tmp_path / "tables"
    paper.sufficiency_report(inputs, ["scorer"], "wilcoxon", False, "world", out, select_on="id_test", bootstrap_seed=0)
    expected_sum = (REFERENCE / "outputs.sha256").read_text().split()[0]
    assert hashlib.sha256((out / "sufficiency.csv").read_bytes()).hexdigest() == expected_sum
    bootstrap_rows = 0
    for reference in sorted(REFERENCE.glob("*.csv")):
        expected = pd.read_csv(reference)
        actual = pd.read_csv(out / reference.name)
        assert list(actual.columns) == list(expected.columns) and len(actual) == len(expected), reference.name
        for column in expected.columns:
            a, e = actual[column], expected[column]
            if not pd.api.types.is_float_dtype(e):
                pd.testing.assert_series_equal(a, e, check_dtype=True, obj=f"{reference.name}: {column}")
                continue
            free = np.zeros(len(e), bool)
            if column == "pvalue_examples":
                free = (expected["example_test"] == "bootstrap").to_numpy()
                assert (np.abs(a - e)[free] <= bootstrap_tolerance(e[free], RESAMPLES)).all(), (reference.name, a, e)
                bootstrap_rows += int(free.sum())
            np.testing.assert_allclose(a[~free], e[~free], rtol=FLOAT_RTOL, atol=0, equal_nan=True,
                                       err_msg=f"{reference.name}: {column}")
    assert bootstrap_rows == 22  # 12 peak rows + 10 selected rows of balanced accuracy
