"""Per-example paired tests: exact McNemar by enumeration, the stratified bootstrap's calibration and
statistic, the 0/1 outcome strings, and the table columns they feed."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from certified_circuits.analysis.evaluation import peak_table, selected_table
from certified_circuits.analysis.paired_tests import (OUTCOME_COLUMN, decode_outcomes, encode_outcomes, mcnemar_exact,
                                             paired_bootstrap_balanced, paired_example_test)
from certified_circuits.reports.tables import format_peak_table


def _pairs(b: int, c: int, same: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes with b baseline-only, c certified-only and ``same`` concordant (both right) examples."""
    base = np.array([True] * b + [False] * c + [True] * same)
    cert = np.array([False] * b + [True] * c + [True] * same)
    return base, cert


@pytest.mark.parametrize("b, c, expected", [(0, 5, 2 / 32), (5, 0, 2 / 32), (1, 1, 1.0), (0, 0, 1.0),
                                            (1, 6, 2 * 8 / 128), (2, 10, 2 * (1 + 12 + 66) / 4096)])
def test_mcnemar_exact_by_enumeration(b: int, c: int, expected: float) -> None:
    result = mcnemar_exact(*_pairs(b, c))
    assert result.pvalue == pytest.approx(expected, rel=1e-12)
    assert result.discordant == b + c and result.n_examples == b + c + 3
    assert result.difference == pytest.approx((c - b) / (b + c + 3))


def test_mcnemar_equals_binomial_test_and_ignores_concordant_pairs() -> None:
    for b in range(0, 9):
        for c in range(0, 9):
            if b + c == 0:
                continue
            n = b + c
            enumerated = min(1.0, 2 * sum(comb(n, k) for k in range(min(b, c) + 1)) / 2**n)
            got = mcnemar_exact(*_pairs(b, c, same=0)).pvalue
            assert got == pytest.approx(enumerated, rel=1e-12)
            assert got == pytest.approx(stats.binomtest(b, n, 0.5).pvalue, rel=1e-9)
            # both-wrong and both-right pairs carry no information
            base, cert = _pairs(b, c, same=0)
            padded = mcnemar_exact(np.r_[base, True, False, False], np.r_[cert, True, False, False])
            assert padded.pvalue == got


@pytest.mark.parametrize("b, c", [(37, 263), (140, 160), (1000, 1130), (0, 1000), (3, 1000)])
def test_mcnemar_exact_on_many_discordant_pairs(b: int, c: int) -> None:
    """Hundreds to thousands of discordant pairs (pooled positives of ten classes, or a language task's prompts):
    ``2 sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c)``, summed exactly in integers, to 1e-13 relative."""
    n, k = b + c, min(b, c)
    exact = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)
    got = mcnemar_exact(*_pairs(b, c)).pvalue
    assert exact > 0 and got == pytest.approx(exact, rel=1e-13, abs=0)


def test_outcome_strings_round_trip_with_leading_zeros() -> None:
    rng = np.random.default_rng(0)
    correct = rng.uniform(size=(5, 37)) < 0.5
    correct[0, :3] = False
    text = encode_outcomes(correct)
    assert text[0].startswith("000") and all(len(t) == 37 for t in text)
    np.testing.assert_array_equal(np.stack([decode_outcomes(t) for t in text]), correct)
    assert decode_outcomes("").size == 0
    with pytest.raises(ValueError, match="0/1"):
        decode_outcomes("01x")


def test_bootstrap_no_difference_is_one_and_is_seeded() -> None:
    rng = np.random.default_rng(1)
    same = rng.uniform(size=40) < 0.6
    assert paired_bootstrap_balanced([(0, same, same), (0, ~same, ~same)]).pvalue == 1.0
    base = rng.uniform(size=40) < 0.6
    cert = rng.uniform(size=40) < 0.6
    strata = [(0, base[:20], cert[:20]), (0, base[20:], cert[20:])]
    a = paired_bootstrap_balanced(strata, n_resamples=500, seed=3)
    assert a == paired_bootstrap_balanced(strata, n_resamples=500, seed=3)
    assert a != paired_bootstrap_balanced(strata, n_resamples=500, seed=4)


def test_bootstrap_detects_a_large_difference_at_its_resolution() -> None:
    base = np.zeros(60, bool)
    cert = np.ones(60, bool)
    result = paired_bootstrap_balanced([(0, base[:30], cert[:30]), (0, base[30:], cert[30:])], n_resamples=999)
    assert result.pvalue == pytest.approx(1 / 1000)  # every resample keeps Δ = 1
    assert result.discordant == 60


def test_bootstrap_statistic_weights_concepts_and_strata_equally() -> None:
    """The observed statistic is mean over concepts of mean over strata: a concept whose negatives
    gain 10 of 10 must count as much as one whose positives gain 1 of 100."""
    # concept 0: no change on 100 positives, all 10 negatives fixed -> ΔBA_0 = (0 + 1) / 2
    # concept 1: unchanged -> ΔBA_1 = 0; mean Δ = 0.25; bootstrap distribution centred there
    strata = [(0, np.ones(100, bool), np.ones(100, bool)), (0, np.zeros(10, bool), np.ones(10, bool)),
              (1, np.ones(50, bool), np.ones(50, bool)), (1, np.zeros(50, bool), np.zeros(50, bool))]
    result = paired_bootstrap_balanced(strata, n_resamples=200)
    assert result.difference == pytest.approx(0.25, abs=1e-15)
    assert result.discordant == 10 and result.n_examples == 210
    # concept 1 alone moves nothing; concept 0 alone gives 0.5
    assert paired_bootstrap_balanced(strata[:2], n_resamples=10).difference == pytest.approx(0.5)
    assert paired_bootstrap_balanced(strata[2:], n_resamples=10).pvalue == 1.0


def test_bootstrap_is_calibrated_under_the_null() -> None:
    """Exchangeable outcomes (each example's two outcomes swapped by a fair coin): the rejection rate
    at 0.05 over 300 datasets must be near 0.05 (binomial 99.9% band for 300 draws: 0.013-0.107)."""
    rng = np.random.default_rng(7)
    pvalues = []
    for _ in range(300):
        a = rng.uniform(size=60) < 0.7
        b = rng.uniform(size=60) < 0.7
        swap = rng.uniform(size=60) < 0.5
        base, cert = np.where(swap, b, a), np.where(swap, a, b)
        strata = [(0, base[:30], cert[:30]), (0, base[30:], cert[30:])]
        pvalues.append(paired_bootstrap_balanced(strata, n_resamples=400, seed=int(rng.integers(1 << 30))).pvalue)
    rate = np.mean(np.asarray(pvalues) < 0.05)
    assert 0.013 <= rate <= 0.107, rate


def _rows(method: str, k: float, outcomes: dict[str, str], n_images: int | None) -> pd.DataFrame:
    rows = []
    for concept, text in outcomes.items():
        correct = decode_outcomes(text)
        n_pos = n_images if n_images is not None else len(text)
        acc = correct[:n_pos].mean()
        fpr = 1 - correct[n_pos:].mean() if n_pos < len(text) else np.nan
        row = dict(experiment="e", concept=concept, eval_set="test", method=method, k_target=k, k_effective=k,
                   accuracy=acc, **{OUTCOME_COLUMN: text})
        if n_images is not None:
            row.update(false_positive_rate=fpr, balanced_accuracy=(acc + 1 - fpr) / 2, n_images=n_pos,
                       n_negatives=len(text) - n_pos)
        rows.append(row)
    return pd.DataFrame(rows)


def test_paired_example_test_splits_positives_from_negatives() -> None:
    """Positives identical, negatives all fixed by the certified circuit: McNemar on accuracy sees
    nothing (p = 1), the balanced-accuracy bootstrap sees every negative (p at its resolution)."""
    base = _rows("baseline", 0.5, {"a": "1111" + "0000", "b": "1010" + "0000"}, n_images=4)
    cert = _rows("certified", 0.3, {"a": "1111" + "1111", "b": "1010" + "1111"}, n_images=4)
    accuracy = paired_example_test(base, cert, "accuracy")
    assert accuracy.test == "mcnemar" and accuracy.pvalue == 1.0 and accuracy.n_examples == 8
    balanced = paired_example_test(base, cert, "balanced_accuracy", n_resamples=99)
    assert balanced.test == "bootstrap" and balanced.pvalue == pytest.approx(1 / 100) and balanced.discordant == 8
    assert paired_example_test(base.drop(columns=OUTCOME_COLUMN), cert, "accuracy") is None
    with pytest.raises(ValueError, match="different examples"):
        paired_example_test(base, _rows("certified", 0.3, {"a": "111", "b": "101"}, n_images=3), "accuracy")


def test_one_concept_rows_get_an_informative_test() -> None:
    """The class-level test has one pair and returns 1; the per-example McNemar does not."""
    base = "1" * 40 + "0" * 60
    cert = "1" * 40 + "1" * 12 + "0" * 48  # 12 prompts fixed, none broken
    table = pd.concat([_rows("baseline", k, {"ioi": base}, None) for k in (0.1, 0.5)]
                      + [_rows("certified", k, {"ioi": cert}, None) for k in (0.1, 0.5)]
                      + [_rows("full", 1.0, {"ioi": cert}, None)], ignore_index=True)
    peaks = peak_table(table, by=("experiment", "concept", "eval_set"))
    row = peaks.iloc[0]
    assert row["pvalue"] == 1.0 and row["n_concepts"] == 1
    assert row["example_test"] == "mcnemar" and row["pvalue_examples"] == pytest.approx(2 / 2**12)
    assert row["n_discordant"] == 12 and row["n_paired_examples"] == 100
    shown = format_peak_table(peaks)
    assert shown.iloc[0]["Δ cACC (rel. %)"].endswith("**") and shown.iloc[0]["p (classes / examples)"] == "1 / 0.00049"


def test_selected_table_tests_the_selected_circuits() -> None:
    """The selected K's outcomes are the ones compared (other K values would give another p)."""
    val = {"a": "1100", "b": "1100"}
    table = pd.concat([
        _rows("baseline", 0.2, val, None).assign(eval_set="val"),
        _rows("baseline", 0.6, {"a": "1110", "b": "1110"}, None).assign(eval_set="val"),
        _rows("certified", 0.2, {"a": "1111", "b": "1111"}, None).assign(eval_set="val"),
        _rows("baseline", 0.2, {"a": "0000", "b": "0000"}, None),
        _rows("baseline", 0.6, {"a": "1100", "b": "1100"}, None),
        _rows("certified", 0.2, {"a": "1111", "b": "1111"}, None),
    ], ignore_index=True)
    row = selected_table(table, "val").iloc[0]
    assert row["baseline_k_target"] == 0.6 and row["certified_k_target"] == 0.2
    # baseline at 0.6 vs certified: 4 discordant pairs (two per concept), all for certified
    assert row["n_discordant"] == 4 and row["pvalue_examples"] == pytest.approx(2 / 16)
