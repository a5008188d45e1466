"""The cached vote counts against a plain computation written here: one loop per mask, per K and per group.

The fast path (sparse or dense mask product, keys partitioned or sorted by the K grid's cuts, one ``bincount``) must
give these integers exactly. The reference is the base algorithm as the paper states it: the dataset score of a mask
is the sum of its kept rows added in example order from ``0.0``, divided by how many were kept (``|.|`` for the
absolute ranking); each group keeps its ``min(m, max(1, floor(K m + 1/2)))`` best components (with the project's
1e-9 guard against representation error in ``K m``), larger values first and
equal values to the lower index (Python's stable ``sorted`` on ``-value``); the empty sub-dataset votes for nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from certified_circuits.core import smoothing as S


def reference_sum(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The kept rows of ``scores`` added one after the other in example order, from 0.0 (float64)."""
    total = np.zeros(scores.shape[1])
    for i in np.flatnonzero(mask):
        total = total + np.asarray(scores[i], dtype=np.float64)
    return total


def reference_counts(scores: np.ndarray, groups: np.ndarray, k_grid: np.ndarray, masks: np.ndarray,
                     absolute: bool) -> np.ndarray:  # fmt: skip
    """int64 ``[nK, U]``: per K, the number of masks whose top-K circuit holds each component."""
    counts = np.zeros((len(k_grid), scores.shape[1]), dtype=np.int64)
    for mask in masks:
        kept = int(mask.sum())
        if kept == 0:
            continue
        score = reference_sum(scores, mask) / kept
        if absolute:
            score = np.abs(score)
        for j, k in enumerate(k_grid):
            for group in np.unique(groups):
                members = [int(u) for u in np.flatnonzero(groups == group)]
                size = len(members)
                keep = min(size, max(1, math.floor(k * size + 0.5 + 1e-9)))
                ranked = sorted(members, key=lambda u: -score[u])  # stable: equal values keep the lower index first
                for u in ranked[:keep]:
                    counts[j, u] += 1
    return counts


def test_reference_counts_on_a_hand_checked_case() -> None:
    """The reference itself on 3 examples, 4 components, one group, K = 0.5 (2 kept): counted by hand."""
    scores = np.array([[4.0, 1.0, 2.0, 2.0], [0.0, 3.0, 2.0, 0.0], [1.0, 1.0, 1.0, 5.0]])
    masks = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    # means: [4,1,2,2] -> {0, 2 (tie with 3, lower index)}; [0,3,2,0] -> {1, 2}; [2,2,2,1] -> {0, 1} (three-way tie);
    # empty: nothing; [5/3,5/3,5/3,7/3] -> {3, 0}
    expected = np.array([[3, 2, 2, 1]])
    np.testing.assert_array_equal(reference_counts(scores, np.zeros(4, int), np.array([0.5]), masks, False), expected)
    np.testing.assert_array_equal(S.vote_counts(scores, np.zeros(4, int), np.array([0.5]), masks), expected)


CASES = {
    # float32 scores, few examples kept per mask (the sparse product), one group, geometric K grid (partitions)
    "sparse_edges": dict(n_examples=40, groups=np.zeros(300, int), p_del=0.93, k_grid=np.geomspace(0.01, 0.5, 8)),
    # half kept (the dense product), layers as groups, K up to 1 (the sort), dead channels (exact zeros)
    "dense_layers": dict(
        n_examples=20,
        groups=np.repeat([0, 1, 2], [16, 64, 128]),
        p_del=0.5,
        k_grid=np.linspace(0.05, 1.0, 20),
        dead=0.2,
    ),
    # interleaved groups, a K grid out of order with repeated counts
    "interleaved": dict(
        n_examples=15, groups=np.arange(90) % 4, p_del=0.6, k_grid=np.array([0.5, 0.1, 1.0, 0.12, 0.3])
    ),
}


@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_vote_counts_equal_the_plain_loop(name: str, absolute: bool) -> None:
    """Random float32 scores (signed: negative means as well), 150 masks: every count equals the loop's."""
    case = CASES[name]
    rng = np.random.default_rng(sorted(CASES).index(name))
    groups = case["groups"]
    scores = rng.normal(size=(case["n_examples"], groups.size)).astype(np.float32)
    if "dead" in case:
        scores[:, rng.random(groups.size) < case["dead"]] = 0.0
    masks = S.deletion_masks(case["n_examples"], 150, case["p_del"], seed=11)
    expected = reference_counts(scores, groups, case["k_grid"], masks, absolute)
    for chunk_size in (None, 7):
        counts = S.vote_counts(scores, groups, case["k_grid"], masks, absolute, chunk_size=chunk_size)
        assert counts.dtype == np.int32
        np.testing.assert_array_equal(counts, expected, err_msg=f"{name}, absolute={absolute}, chunk {chunk_size}")


@pytest.mark.parametrize("absolute", [False, True])
def test_vote_counts_equal_the_plain_loop_with_ties_and_tiny_values(absolute: bool) -> None:
    """Dyadic scores (every sum exact, so ties are exact), duplicated columns, zeros of both signs, and float64
    denormals that share the key bucket of 0.0 (so the shortcut that skips that bucket must be off)."""
    rng = np.random.default_rng(3)
    groups = np.repeat([0, 1], [33, 70])
    scores = rng.integers(-3, 4, size=(12, groups.size)).astype(np.float64) / 4
    scores[:, 40:50] = scores[:, 20:30]
    scores[:, 60:66] = -0.0
    tiny = 5e-324 * rng.integers(0, 4, size=(12, 8))  # 0 to 3 times the smallest denormal
    scores[:, 90:98] = np.where(rng.random((12, 8)) < 0.5, tiny, -tiny)
    k_grid = np.array([0.03, 0.2, 0.5, 0.8, 0.97, 1.0])
    masks = S.deletion_masks(12, 200, 0.5, seed=5)
    expected = reference_counts(scores, groups, k_grid, masks, absolute)
    np.testing.assert_array_equal(S.vote_counts(scores, groups, k_grid, masks, absolute), expected)


def test_sparse_and_dense_products_add_the_kept_rows_in_example_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both products of ``_sub_dataset_scores`` equal the loop's sums bit for bit (so which one runs changes no
    vote): random float32 scores, whose float64 sums depend on the order of addition."""
    rng = np.random.default_rng(8)
    scores = (rng.standard_t(3, size=(60, 500)) * 0.1).astype(np.float32)
    masks = S.deletion_masks(60, 40, 0.7, seed=2)
    expected = np.stack([reference_sum(scores, mask) / max(1, int(mask.sum())) for mask in masks])
    for keep in (0.0, 1.0):  # 0: always dense; 1: always sparse
        monkeypatch.setattr(S, "SPARSE_KEEP", keep)
        got = S._sub_dataset_scores(scores, masks, False)
        np.testing.assert_array_equal(got.view(np.uint64), expected.view(np.uint64), err_msg=f"SPARSE_KEEP={keep}")


@pytest.mark.parametrize("sort_cost", [0.0, 1e9])
def test_top_segments_hold_the_stable_ranking_between_cuts(sort_cost: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against ``argsort(-values, kind="stable")``: the set of components between consecutive cuts, for both
    arrangements (``_SORT_COST`` 0: a sort; 1e9: one partition per cut), on near-ties one ulp apart (keys that share a
    bucket across a cut), exact ties and zeros with and without the zero shortcut, and denormals beside zero."""
    monkeypatch.setattr(S, "_SORT_COST", sort_cost)
    rng = np.random.default_rng(6)
    for trial in range(500):
        b, m = int(rng.integers(1, 5)), int(rng.integers(2, 300))
        values = rng.normal(size=(b, m))
        kept = np.unique(rng.integers(1, m + 1, size=int(rng.integers(1, 6))))
        kind = trial % 5
        if kind == 1:  # few values, zeros of both signs
            values = rng.integers(-2, 3, size=(b, m)) * 0.5
            values[rng.random((b, m)) < 0.3] = -0.0
        elif kind == 2:  # runs of values one ulp apart
            values = np.repeat(rng.normal(size=(b, 1)), m, axis=1)
            steps = rng.integers(0, 4, size=(b, m))
            for step in range(3):
                values = np.where(steps > step, np.nextafter(values, np.inf), values)
        elif kind == 3:  # denormals next to zero: the zero bucket holds distinct values
            values = 5e-324 * rng.integers(0, 3, size=(b, m)).astype(float)
        elif kind == 4:  # distinct levels; at one cut c, ranks c - 1 and c are one ulp apart, the larger value at the
            # higher index: only that pair shares a bucket, and its index order is wrong across the cut
            cut = int(rng.integers(1, m))
            kept = np.unique(np.append(kept, cut))
            ranks = np.argsort(rng.random((b, m)), axis=1)
            first, second = np.sort(rng.choice(m, size=2, replace=False))
            for row in range(b):  # rank of each component: ``second`` at cut - 1, ``first`` at cut
                rest = [r for r in range(m) if r not in (cut - 1, cut)]
                ranks[row, [u for u in range(m) if u not in (first, second)]] = rng.permutation(rest)
                ranks[row, second], ranks[row, first] = cut - 1, cut
            values = 2.0 - ranks / m
            values[:, second] = np.nextafter(values[:, first], np.inf)
        expected = np.argsort(-values, axis=1, kind="stable")
        for zeros_apart in (None, False) if kind == 3 else (None, False, True):
            segments = S.top_segments(values, kept, zeros_apart)
            assert segments.shape == (b, int(kept[-1]))
            for start, stop in zip(np.concatenate([[0], kept[:-1]]), kept):
                np.testing.assert_array_equal(
                    np.sort(segments[:, start:stop], axis=1),
                    np.sort(expected[:, start:stop], axis=1),
                    err_msg=f"trial {trial}, kept {kept.tolist()}, zeros_apart {zeros_apart}",
                )
