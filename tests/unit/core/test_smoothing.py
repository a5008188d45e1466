"""Deletion masks and vote counting: the cached path equals the naive re-run of A, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certified_circuits.core.discovery import TopKDiscovery
from certified_circuits.core.smoothing import (
    deletion_masks,
    full_dataset_circuits,
    inclusion_probabilities,
    selection_and_certification_masks,
    vote_counts,
    vote_counts_naive,
)


def test_masks_shape_dtype_and_keep_rate() -> None:
    masks = deletion_masks(50, 4000, p_del=0.6, seed=3)
    assert masks.shape == (4000, 50) and masks.dtype == bool
    # keep probability 1 - p_del = 0.4; 200,000 Bernoulli draws: sd = 0.0011
    assert abs(masks.mean() - 0.4) < 0.005


def test_masks_are_reproducible_from_the_seed() -> None:
    np.testing.assert_array_equal(deletion_masks(30, 100, 0.5, 7), deletion_masks(30, 100, 0.5, 7))
    assert not np.array_equal(deletion_masks(30, 100, 0.5, 7), deletion_masks(30, 100, 0.5, 8))


def test_selection_and_certification_streams_are_independent() -> None:
    selection, certification = selection_and_certification_masks(40, 500, 500, 0.5, seed=11)
    # not the same draws, not shifted copies of each other
    assert not np.array_equal(selection, certification)
    assert not any(np.array_equal(selection[1:], certification[:-1]) for _ in [0])
    # changing n0 leaves the certification stream untouched, and vice versa
    selection2, certification2 = selection_and_certification_masks(40, 100, 500, 0.5, seed=11)
    np.testing.assert_array_equal(certification, certification2)
    np.testing.assert_array_equal(selection[:100], selection2)
    # empirically uncorrelated: 20,000 paired bits, correlation sd ~ 0.007
    corr = np.corrcoef(selection.ravel().astype(float), certification.ravel().astype(float))[0, 1]
    assert abs(corr) < 0.035


def test_all_deleted_sub_dataset_stays_in_the_distribution_and_votes_for_nothing() -> None:
    # p_del = 0.99, |D| = 100: P[all deleted] = 0.99^100 = 0.366
    masks = deletion_masks(100, 3000, 0.99, seed=5)
    empty = ~masks.any(axis=1)
    assert abs(empty.mean() - 0.99**100) < 0.03  # sd = 0.0088
    scores = np.random.default_rng(0).normal(size=(100, 6))
    counts = vote_counts(scores, np.zeros(6, dtype=int), [1.0], masks)
    # at K = 1 every non-empty sub-dataset keeps every component, the empty one keeps none
    np.testing.assert_array_equal(counts[0], np.full(6, (~empty).sum()))


def _random_case(rng: np.random.Generator, ties: bool, absolute: bool):
    n_examples = int(rng.integers(1, 16))
    n_components = int(rng.integers(2, 70))
    groups = rng.choice([-3, 2, 9], size=n_components)  # arbitrary, non-contiguous labels
    scores = rng.normal(size=(n_examples, n_components))
    if ties:
        scores = np.round(scores)  # many exact ties, exact dyadic sums
        scores[:, : n_components // 3] = 0.0  # dead channels
    k_grid = np.concatenate([rng.uniform(0.01, 1.0, size=4), [1.0, 0.5, 0.5]])  # unsorted, repeated
    masks = deletion_masks(n_examples, 64, float(rng.uniform(0.2, 0.9)), int(rng.integers(1 << 30)))
    return scores, groups, k_grid, masks, absolute


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("absolute", [False, True])
def test_cached_counts_equal_naive_counts(rng: np.random.Generator, ties: bool, absolute: bool) -> None:
    for _ in range(25):
        scores, groups, k_grid, masks, absolute = _random_case(rng, ties, absolute)
        cached = vote_counts(scores, groups, k_grid, masks, absolute, chunk_size=9)
        naive = vote_counts_naive(TopKDiscovery(scores, groups, k_grid, absolute), masks)
        np.testing.assert_array_equal(cached, naive)
        assert cached.dtype == np.int32 and cached.shape == (k_grid.size, scores.shape[1])


def test_cached_counts_equal_naive_on_resnet_shaped_groups(rng: np.random.Generator) -> None:
    groups = np.repeat(np.arange(4), [256, 512, 1024, 2048]).astype(np.int32)  # ResNet-50/101
    scores = np.maximum(rng.normal(size=(12, groups.size)), 0).astype(np.float32)  # ReLU-like zeros
    k_grid = np.array([0.05, 0.2, 0.5, 0.9])
    masks = deletion_masks(12, 40, 0.6, seed=1)
    np.testing.assert_array_equal(
        vote_counts(scores, groups, k_grid, masks),
        vote_counts_naive(TopKDiscovery(scores, groups, k_grid), masks),
    )


def test_counts_do_not_depend_on_chunking(rng: np.random.Generator) -> None:
    scores, groups, k_grid, masks, _ = _random_case(rng, ties=True, absolute=False)
    reference = vote_counts(scores, groups, k_grid, masks, chunk_size=1000)
    for chunk in (1, 5, 63):
        np.testing.assert_array_equal(vote_counts(scores, groups, k_grid, masks, chunk_size=chunk), reference)


def test_counts_are_monotone_in_k(rng: np.random.Generator) -> None:
    scores, groups, _, masks, _ = _random_case(rng, ties=True, absolute=False)
    k_grid = np.linspace(0.05, 1.0, 20)
    counts = vote_counts(scores, groups, k_grid, masks)
    assert (np.diff(counts, axis=0) >= 0).all()
    np.testing.assert_array_equal(counts[-1], np.full(scores.shape[1], masks.any(axis=1).sum()))


def test_baseline_is_the_algorithm_on_the_full_dataset(rng: np.random.Generator) -> None:
    scores = rng.normal(size=(9, 30))
    groups = np.repeat([0, 1, 2], 10)
    k_grid = np.array([0.1, 0.3, 0.7])
    expected = TopKDiscovery(scores, groups, k_grid)(np.arange(9))
    np.testing.assert_array_equal(full_dataset_circuits(scores, groups, k_grid), expected)


def test_inclusion_probabilities_match_weighted_naive_enumeration(rng: np.random.Generator) -> None:
    scores = np.round(rng.normal(size=(5, 8)), 1)
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    k_grid = np.array([0.25, 0.5])
    masks = (np.arange(32)[:, None] >> np.arange(5)[None, :]) & 1 == 1
    p_del = 0.7
    weights = np.prod(np.where(masks, 1 - p_del, p_del), axis=1)
    algorithm = TopKDiscovery(scores, groups, k_grid)
    expected = sum(w * algorithm(np.flatnonzero(m)) for w, m in zip(weights, masks))
    np.testing.assert_allclose(inclusion_probabilities(scores, groups, k_grid, masks, weights), expected, atol=1e-12)


def test_bad_inputs_raise_clear_errors() -> None:
    scores = np.zeros((4, 3))
    masks = np.ones((2, 4), dtype=bool)
    with pytest.raises(ValueError, match="groups"):
        vote_counts(scores, np.zeros(2, dtype=int), [0.5], masks)
    with pytest.raises(ValueError, match="masks"):
        vote_counts(scores, np.zeros(3, dtype=int), [0.5], np.ones((2, 5), dtype=bool))
    with pytest.raises(ValueError, match="NaN"):
        vote_counts(np.full((4, 3), np.nan), np.zeros(3, dtype=int), [0.5], masks)
    with pytest.raises(ValueError, match="p_del"):
        deletion_masks(4, 2, 1.0, 0)
    with pytest.raises(ValueError, match="n_samples"):
        deletion_masks(4, 0, 0.5, 0)
    with pytest.raises(ValueError, match="seed"):
        deletion_masks(4, 2, 0.5, -1)


@settings(max_examples=40, deadline=None)
@given(
    n_examples=st.integers(1, 12),
    n_components=st.integers(1, 25),
    n_samples=st.integers(1, 30),
    p_del=st.floats(0.05, 0.95),
    seed=st.integers(0, 2**31),
    k=st.floats(0.01, 1.0),
)
def test_property_shapes_determinism_and_agreement(n_examples, n_components, n_samples, p_del, seed, k) -> None:
    masks = deletion_masks(n_examples, n_samples, p_del, seed)
    np.testing.assert_array_equal(masks, deletion_masks(n_examples, n_samples, p_del, seed))
    scores = np.random.default_rng(seed).integers(-3, 4, size=(n_examples, n_components)).astype(float)
    groups = np.arange(n_components) % 2
    counts = vote_counts(scores, groups, [k], masks)
    assert counts.shape == (1, n_components) and counts.dtype == np.int32
    assert counts.min() >= 0 and counts.max() <= n_samples
    np.testing.assert_array_equal(counts, vote_counts_naive(TopKDiscovery(scores, groups, np.array([k])), masks))


@pytest.mark.parametrize("absolute", [False, True])
def test_votes_at_counts_equal_naive_top_count_on_every_mask(rng: np.random.Generator, absolute: bool) -> None:
    """Per-group sizes (a circuit at the truth's size): the cached counts equal running ``top_count_circuit`` on
    every sub-dataset, ties (scores rounded to one decimal) and the empty sub-dataset included."""
    from certified_circuits.core.discovery import top_count_circuit
    from certified_circuits.core.smoothing import vote_counts_at_counts

    scores = rng.normal(size=(12, 30)).round(1)
    groups = np.repeat([0, 1, 2], 10)
    counts = np.array([3, 0, 7])
    masks = deletion_masks(12, 300, 0.7, 5)
    masks[0] = False  # the empty sub-dataset votes for nothing
    expected = np.zeros(30, dtype=np.int64)
    for m in masks[1:]:
        mean = scores[m].mean(axis=0) if m.any() else np.zeros(30)
        expected += top_count_circuit(np.abs(mean) if absolute else mean, groups, counts) * m.any()
    got = vote_counts_at_counts(scores, groups, counts, masks, absolute)
    assert got.dtype == np.int32 and got.tolist() == expected.tolist()
    assert got[10:20].sum() == 0  # group 1 keeps nothing


def test_votes_at_counts_equal_the_k_grid_votes_at_the_k_counts(rng: np.random.Generator) -> None:
    from certified_circuits.core.discovery import GroupIndex, k_count
    from certified_circuits.core.smoothing import vote_counts_at_counts

    scores = rng.normal(size=(20, 48))
    groups = np.repeat([4, 7, 9], [8, 16, 24])
    masks = deletion_masks(20, 200, 0.5, 1)
    counts = k_count(0.25, GroupIndex.from_groups(groups).sizes)
    assert counts.tolist() == [2, 4, 6]
    assert (vote_counts_at_counts(scores, groups, counts, masks) == vote_counts(scores, groups, [0.25], masks)[0]).all()
