"""The base algorithm A: K -> count mapping, ties, empty sub-datasets, effective K."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.core.discovery import TopKDiscovery, effective_k, k_count, top_k_circuit


@pytest.mark.parametrize(
    "k, m, expected",
    [
        (0.3, 10, 3),  # 3.0000000000000004 or 2.9999999999999996 must both give 3
        (0.25, 10, 3),  # 2.5 rounds half up
        (0.24, 10, 2),
        (0.01, 10, 1),  # at least one component
        (1.0, 7, 7),
        (0.05, 256, 13),  # 12.8
        (0.05, 2048, 102),  # 102.4
        (0.7, 3, 2),  # 2.1
    ],
)
def test_k_count_rounds_half_up_with_at_least_one(k: float, m: int, expected: int) -> None:
    assert int(k_count(k, m)) == expected


def test_top_k_breaks_ties_towards_lower_index() -> None:
    score = np.array([1.0, 5.0, 5.0, 5.0, 0.0, 5.0])
    circuit = top_k_circuit(score, np.zeros(6, dtype=int), k=0.5)  # keeps 3 of 6
    assert circuit.tolist() == [False, True, True, True, False, False]


def test_top_k_is_per_group() -> None:
    score = np.array([9.0, 8.0, 7.0, 1.0, 2.0, 3.0])
    groups = np.array([0, 0, 0, 1, 1, 1])
    circuit = top_k_circuit(score, groups, k=0.34)  # one per group
    assert circuit.tolist() == [True, False, False, False, False, True]


def test_empty_sub_dataset_gives_empty_circuit() -> None:
    algorithm = TopKDiscovery(np.ones((4, 5)), np.zeros(5, dtype=int), np.array([0.2, 1.0]))
    assert not algorithm(np.array([], dtype=int)).any()


def test_absolute_ranks_by_absolute_mean_not_mean_of_absolute() -> None:
    # component 0: rows +3, -3 -> mean 0 (mean of |.| would be 3); component 1: rows 1, 1 -> mean 1
    scores = np.array([[3.0, 1.0], [-3.0, 1.0]])
    algorithm = TopKDiscovery(scores, np.zeros(2, dtype=int), np.array([0.5]), absolute=True)
    assert algorithm(np.array([0, 1])).tolist() == [[False, True]]
    # a negative mean with large magnitude wins under absolute ranking
    algorithm = TopKDiscovery(np.array([[-4.0, 1.0]]), np.zeros(2, dtype=int), np.array([0.5]), absolute=True)
    assert algorithm(np.array([0])).tolist() == [[True, False]]


def test_effective_k_averages_fractions_over_groups() -> None:
    groups = np.array([0, 0, 1, 1, 1, 1])
    mask = np.array([[True, False, True, True, True, True], [False, False, True, False, False, False]])
    np.testing.assert_allclose(effective_k(mask, groups), [(0.5 + 1.0) / 2, (0.0 + 0.25) / 2])


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_invalid_k_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="K"):
        top_k_circuit(np.ones(3), np.zeros(3, dtype=int), bad)
