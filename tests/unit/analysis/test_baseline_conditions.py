"""Conditions (a)-(c) on the baseline (analysis/baseline_conditions.py): each checked against a count done by hand."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.analysis.baseline_conditions import (
    MAX_JACCARD,
    baseline_conditions,
    dataset_scores,
    resample_weights,
)
from certified_circuits.analysis.stability import bootstrap_indices
from certified_circuits.core.discovery import top_count_circuit, top_count_rows


def test_resample_weights_count_the_bootstrap_draws_and_dataset_scores_average_them():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(30, 7))
    weights = resample_weights(30, 5, seed=4)
    indices = bootstrap_indices(30, 5, 4)
    assert weights.sum(axis=1).tolist() == [30] * 5
    assert weights[2, indices[2, 0]] == (indices[2] == indices[2, 0]).sum()
    expected = np.stack([scores[rows].mean(axis=0) for rows in indices])
    np.testing.assert_allclose(dataset_scores(scores, weights, absolute=False), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dataset_scores(scores, weights, absolute=True), np.abs(expected), rtol=0, atol=1e-12)


def test_top_count_rows_equal_a_sort_written_here_row_by_row_with_ties():
    """The reference: per row and group, the members sorted by (value descending, index ascending), the first
    ``count`` kept (plain Python, not the code under test)."""
    rng = np.random.default_rng(1)
    values = rng.normal(size=(40, 12)).round(1)  # rounding makes ties
    groups = np.repeat([0, 1, 2], 4)
    counts = {0: 1, 1: 0, 2: 3}
    got = top_count_rows(values, groups, np.array([1, 0, 3]))
    for row, circuit in zip(values, got):
        expected = set()
        for g, count in counts.items():
            members = [u for u in range(12) if groups[u] == g]
            expected |= set(sorted(members, key=lambda u: (-row[u], u))[:count])
        assert set(np.flatnonzero(circuit).tolist()) == expected
        assert (top_count_circuit(row, groups, np.array([1, 0, 3])) == circuit).all()
    assert got.sum(axis=1).tolist() == [4] * 40


def _gated_world(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Component 0 always 1; 1 fires only with the cue (1 or 0), on exactly a quarter of the examples; 2 a constant
    distractor 0.245; 3 zero."""
    cue = rng.permutation(np.arange(n) < n // 4)
    scores = np.zeros((n, 4))
    scores[:, 0] = 1.0
    scores[:, 1] = cue
    scores[:, 2] = 0.245
    return scores, cue


def test_a_gated_true_component_swaps_with_a_distractor_exactly_when_its_cue_is_rare():
    """Truth {0, 1}; |T| = 2. A resample keeps component 1 iff its cue share is above 0.245 (else 2, the distractor),
    so its precision is 1 or 0.5: the expected numbers are counted from the draws, not from the code under test."""
    rng = np.random.default_rng(7)
    scores, cue = _gated_world(100, rng)
    population = np.zeros((1000, 4))
    population[:, 0], population[:250, 1], population[:, 2] = 1.0, 1.0, 0.245  # exactly a quarter cued
    truth = np.array([True, True, False, False])
    result = baseline_conditions(scores, np.zeros(4, dtype=int), truth, population, n_resamples=60, seed=3)

    indices = bootstrap_indices(100, 60, 3)
    share = cue[indices].mean(axis=1)
    kept = share > 0.245  # component 1 beats the distractor
    assert result.precision_population == 1.0
    np.testing.assert_allclose(result.precision_resampled, np.where(kept, 1.0, 0.5).mean(), atol=1e-12)
    np.testing.assert_allclose(result.membership, [1.0, kept.mean()], atol=1e-12)
    full_kept = cue.mean() > 0.245
    jaccards = np.where(kept == full_kept, 1.0, 1 / 3)  # {0,1} vs {0,2}: 1 of 3
    np.testing.assert_allclose(result.jaccard, jaccards.mean(), atol=1e-12)
    assert 0.2 <= kept.mean() <= 0.8, "the fixture must put the gated component in the band"
    assert result.b and result.a == (result.gap >= 0.1) and result.c == (result.jaccard <= MAX_JACCARD)
    assert result.row()["in_band"] == 1


def test_a_stable_baseline_meets_none_of_the_conditions():
    rng = np.random.default_rng(2)
    scores = np.tile([3.0, 2.0, 0.1, 0.0], (100, 1)) + rng.normal(scale=0.01, size=(100, 4))
    truth = np.array([True, True, False, False])
    result = baseline_conditions(scores, np.zeros(4, dtype=int), truth, np.tile(scores, (10, 1)), seed=0)
    assert (result.a, result.b, result.c) == (False, False, False)
    assert result.jaccard == 1.0 and result.precision_resampled == 1.0 and result.gap == 0.0


def test_grey_components_are_neither_hits_nor_misses():
    """Component 2 is grey: a circuit {0, 2} has precision 1 (0 is true, 2 not scored), not 0.5."""
    scores = np.tile([1.0, 0.0, 0.5, 0.0], (100, 1))
    population = np.tile(scores[0], (1000, 1))
    truth = np.array([True, True, False, False])
    exclude = np.array([False, False, True, False])
    plain = baseline_conditions(scores, np.zeros(4, dtype=int), truth, population)
    grey = baseline_conditions(scores, np.zeros(4, dtype=int), truth, population, exclude=exclude)
    assert plain.precision_full == 0.5 and grey.precision_full == 1.0


@pytest.mark.parametrize("kwargs, message", [
    ({"n_resamples": 20}, "at least 50 bootstrap resamples"),
    ({"population": np.zeros((999, 4))}, "at least 1000"),
    ({"truth": np.zeros(4, dtype=bool)}, "at least one component"),
    ({"exclude": np.array([True, False, False, False])}, "none of the excluded"),
    ({"population": np.zeros((1000, 5))}, "same U"),
])  # fmt: skip
def test_bad_input_is_refused_by_name(kwargs, message):
    args = {"scores": np.zeros((100, 4)), "groups": np.zeros(4, dtype=int),
            "truth": np.array([True, False, False, False]), "population": np.zeros((1000, 4))}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        baseline_conditions(**args)
