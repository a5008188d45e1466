"""Exact verification of Theorem 1 (Certified Circuit Robustness) by enumeration on tiny datasets.

For a real top-K base algorithm over random per-example scores, the smoothed inclusion probability
``p_u(D)`` (Eq. pv) is computed exactly by enumerating all ``2^|D|`` deletion patterns. For every dataset
``D'`` within edit distance ``r = certified_radius(tau, p_del)`` (insertions, deletions and substitutions,
new examples drawn from a small pool), each component with ``p_u(D) > tau`` must keep ``p_u(D') > 1/2``
and each with ``1 - p_u(D) > tau`` must keep ``p_u(D') < 1/2``.

The base algorithm depends on the dataset only through the mean of its rows, so it is invariant to the
order of examples; a dataset within edit distance ``r`` is then, as a multiset, ``D`` minus ``i`` examples
plus ``j`` pool examples with ``max(i, j) <= r`` (pair up removals and additions as substitutions).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from certified_circuits.core.certification import certified_radius
from certified_circuits.core.discovery import TopKDiscovery
from certified_circuits.core.smoothing import inclusion_probabilities


def all_masks(n_examples: int) -> np.ndarray:
    return ((np.arange(2**n_examples)[:, None] >> np.arange(n_examples)[None, :]) & 1).astype(bool)


def exact_inclusion(scores: np.ndarray, groups: np.ndarray, k: float, p_del: float, absolute: bool) -> np.ndarray:
    masks = all_masks(scores.shape[0])
    weights = np.prod(np.where(masks, 1.0 - p_del, p_del), axis=1)
    return inclusion_probabilities(scores, groups, [k], masks, weights, absolute)[0]


def edited_datasets(dataset: np.ndarray, pool: np.ndarray, radius: int):
    n = dataset.shape[0]
    for n_removed in range(radius + 1):
        for removed in itertools.combinations(range(n), n_removed):
            kept = np.delete(dataset, removed, axis=0)
            for n_added in range(radius + 1):
                for added in itertools.combinations_with_replacement(range(pool.shape[0]), n_added):
                    yield np.concatenate([kept, pool[list(added)]], axis=0)


@pytest.mark.parametrize(
    "tau, p_del, n_examples, absolute, seed, expect_in",
    [
        (0.9, 0.6, 7, False, 0, True),  # r = 1, on the boundary p_del^r == 1.5 - tau
        (0.95, 0.6, 7, True, 1, True),  # r = 1, the paper's vision setting; EAP-IG |mean| ranking
        (0.9, 0.78, 10, False, 2, True),  # r = 2
        # r = 1; P[empty sub-dataset] = 0.9^7 = 0.48 caps p_u below tau: only "out" is certifiable
        (0.6, 0.9, 7, False, 3, False),
    ],
)
def test_certified_decisions_survive_every_edit_within_the_radius(
    tau: float, p_del: float, n_examples: int, absolute: bool, seed: int, expect_in: bool
) -> None:
    radius = certified_radius(tau, p_del)
    assert radius >= 1
    rng = np.random.default_rng(seed)
    n_components = 6
    groups = np.array([0, 0, 0, 1, 1, 1])
    # a few strong components make confident decisions likely; the rest are noise
    center = np.array([3.0, 0.0, 0.0, 0.0, 2.5, 0.0]) * (1 if not absolute else rng.choice([-1, 1], 6))
    dataset = center + rng.normal(scale=0.8, size=(n_examples, n_components))
    pool = np.concatenate([center + rng.normal(scale=0.8, size=(2, n_components)),
                           -center[None, :],  # an adversarial example
                           dataset[:1]])  # a duplicate
    k = 1 / 3  # one component per group
    p = exact_inclusion(dataset, groups, k, p_del, absolute)
    certified_in, certified_out = p > tau, 1 - p > tau
    assert certified_out.any() and certified_in.any() == expect_in, "the case must exercise the decisions"
    checked = 0
    for edited in edited_datasets(dataset, pool, radius):
        p_edited = exact_inclusion(edited, groups, k, p_del, absolute)
        assert (p_edited[certified_in] > 0.5).all()
        assert (p_edited[certified_out] < 0.5).all()
        checked += 1
    assert checked > 20


def test_exact_inclusion_matches_direct_enumeration_with_the_reference_algorithm() -> None:
    rng = np.random.default_rng(7)
    dataset = rng.normal(size=(5, 6))
    groups = np.array([0, 0, 0, 1, 1, 1])
    p_del = 0.8
    algorithm = TopKDiscovery(dataset, groups, np.array([1 / 3]))
    expected = np.zeros(6)
    for mask in all_masks(5):
        probability = np.prod(np.where(mask, 1 - p_del, p_del))
        expected += probability * algorithm(np.flatnonzero(mask))[0]
    np.testing.assert_allclose(exact_inclusion(dataset, groups, 1 / 3, p_del, False), expected, atol=1e-12)


def test_guarantee_can_fail_beyond_the_radius() -> None:
    """The check above has teeth: with a radius far larger than certified, some decision does flip."""
    rng = np.random.default_rng(0)
    groups = np.zeros(4, dtype=int)
    dataset = np.array([3.0, 0.0, 0.0, 0.0]) + rng.normal(scale=0.3, size=(5, 4))
    pool = np.array([[0.0, 9.0, 0.0, 0.0]])  # examples that promote component 1
    p_del, tau = 0.6, 0.6
    p = exact_inclusion(dataset, groups, 0.25, p_del, False)
    assert p[0] > tau
    flipped = False
    for edited in edited_datasets(dataset, pool, radius=5):
        if exact_inclusion(edited, groups, 0.25, p_del, False)[0] < 0.5:
            flipped = True
            break
    assert flipped
