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


def test_top_count_circuit_keeps_the_counts_per_group_with_ties_to_the_lower_index():
    """A size per group: group 0 (ids 0, 2, 4) keeps 2, group 1 (ids 1, 3, 5) keeps 1; ids 2 and 4 tie at 0.5."""
    from certified_circuits.core.discovery import GroupIndex, group_counts, top_count_circuit

    score = np.array([0.9, 0.1, 0.5, 0.7, 0.5, 0.2])
    groups = np.array([0, 1, 0, 1, 0, 1])
    circuit = top_count_circuit(score, groups, np.array([2, 1]))
    assert circuit.tolist() == [True, False, True, True, False, False]
    assert group_counts(circuit, GroupIndex.from_groups(groups)).tolist() == [2, 1]


def test_top_count_circuit_equals_top_k_at_the_k_counts():
    from certified_circuits.core.discovery import GroupIndex, top_count_circuit

    rng = np.random.default_rng(3)
    groups = rng.integers(0, 4, size=40)
    index = GroupIndex.from_groups(groups)
    for k in (0.05, 0.2, 0.5, 1.0):
        score = rng.normal(size=40).round(1)  # rounding makes ties
        expected = top_k_circuit(score, groups, k)
        assert (top_count_circuit(score, groups, k_count(k, index.sizes)) == expected).all()


@pytest.mark.parametrize("counts", [[1], [1, 2, 3], [4, 0], [-1, 1], [0, 0], [1.0, 1.0]])
def test_top_count_circuit_refuses_counts_a_group_cannot_hold(counts):
    from certified_circuits.core.discovery import top_count_circuit

    with pytest.raises(ValueError, match="counts"):
        top_count_circuit(np.ones(5), np.array([0, 0, 0, 1, 1]), np.array(counts))
