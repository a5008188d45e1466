"""The engine's hot paths after issue 51 (point 7): the same integers as before, from a faster ranking.

Vote counting ranks each sample's dataset scores by one integer sort of keys that carry the component's index in
their low bits (:func:`certified_circuits.core.smoothing.top_order`), and the decision looks its binomial tails up in a
table of every count. Checked here: the ranking against numpy's stable argsort (ties, zeros of both signs, values one
ulp apart, partial depths), the counts against the naive path (the base algorithm re-run on every sub-dataset) and
against the counts the code before this change gave (digests recorded at 96c0e6f on the benchmarks' shapes and on
tie-heavy ones), and the p-value table against the direct formula.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from certified_circuits.core import smoothing as S
from certified_circuits.core.certification import binomial_pvalue, binomial_tail
from certified_circuits.core.discovery import TopKDiscovery

#: sha256 (first 16 hex digits) of dtype, shape and bytes of each case's result, computed by the code at 96c0e6f
#: (the sort-free first-entry counting of before issue 51) with the cases of :func:`cases`
RECORDED = {
    "resnet_selection": "d8eb798796e2dd98",
    "resnet_certification": "5ff4cbc056de8481",
    "gpt2_selection": "2a26c97ef02480d5",
    "gpt2_certification": "0edd0cc53bcd4d96",
    "ties_abs0": "68cdbc76aa21eb6e",
    "ties_chunk7_abs0": "68cdbc76aa21eb6e",
    "ties_abs1": "dc54ff63ce2f94cb",
    "ties_chunk7_abs1": "dc54ff63ce2f94cb",
    "ties_weighted": "cc8c92983bb18332",
    "ties_at_counts": "d7f7519ba884f924",
    "ties_at_counts_abs": "30048916e97f2f7f",
    "first_entry_ties": "bbac16c9110a9e16",
    "first_entry_one_k": "da6602ba35e0a8b2",
    "near_ties": "81069f6072ba355d",
    "near_ties_abs": "31ed5f62b8eebb01",
    "interleaved": "57a95a33500ac543",
    "interleaved_abs": "cd3b14484802323c",
}


def digest(array: np.ndarray) -> str:
    array = np.ascontiguousarray(array)
    return hashlib.sha256(str(array.dtype).encode() + str(array.shape).encode() + array.tobytes()).hexdigest()[:16]


def cases() -> dict[str, str]:
    """Every case's digest: the benchmarks' ResNet class and GPT-2 edges, then tie-heavy and near-tie inputs."""
    out = {}
    rng = np.random.default_rng(0)  # benchmarks/bench_certify_resnet_class.py
    groups = np.repeat(np.arange(4), [256, 512, 1024, 2048])
    k_grid = np.linspace(0.05, 1.0, 20)
    scores = np.maximum(rng.normal(size=(50, groups.size)) + rng.normal(size=groups.size), 0).astype(np.float32)
    scores[:, rng.random(groups.size) < 0.1] = 0.0
    selection, certification = S.selection_and_certification_masks(50, 100, 1000, 0.6, seed=1)
    out["resnet_selection"] = digest(S.vote_counts(scores, groups, k_grid, selection))
    out["resnet_certification"] = digest(S.vote_counts(scores, groups, k_grid, certification))
    rng = np.random.default_rng(0)  # benchmarks/bench_certify_gpt2_edges.py
    edges = 32491
    scores = (rng.standard_t(3, size=(100, edges)) * 0.1 + rng.normal(size=edges) * 0.05).astype(np.float32)
    selection, certification = S.selection_and_certification_masks(100, 100, 1000, 0.95, seed=1)
    k_geo = np.geomspace(0.002, 0.5, 20)
    one_group = np.zeros(edges, np.int32)
    out["gpt2_selection"] = digest(S.vote_counts(scores, one_group, k_geo, selection, absolute=True))
    out["gpt2_certification"] = digest(S.vote_counts(scores, one_group, k_geo, certification, absolute=True))
    # ties everywhere: few distinct values, duplicated columns, zeros of both signs, a K grid out of order
    rng = np.random.default_rng(7)
    groups = np.repeat([3, 0, 9], [100, 301, 7])
    ties = rng.integers(-3, 4, size=(30, groups.size)).astype(np.float64) / 2
    ties[:, 50:80] = ties[:, 20:50]
    ties[:, 200:260] = -0.0
    k_odd = np.array([0.5, 0.01, 1.0, 0.2, 0.33, 0.05, 0.999, 0.75])
    masks = S.deletion_masks(30, 400, 0.5, seed=3)
    for absolute in (False, True):
        out[f"ties_abs{int(absolute)}"] = digest(S.vote_counts(ties, groups, k_odd, masks, absolute=absolute))
        out[f"ties_chunk7_abs{int(absolute)}"] = digest(
            S.vote_counts(ties, groups, k_odd, masks, absolute=absolute, chunk_size=7))
    weights = rng.random(400)
    out["ties_weighted"] = digest(S.inclusion_probabilities(ties, groups, k_odd, masks, weights))
    out["ties_at_counts"] = digest(S.vote_counts_at_counts(ties, groups, np.array([0, 5, 7]), masks))
    out["ties_at_counts_abs"] = digest(S.vote_counts_at_counts(ties, groups, np.array([300, 0, 1]), masks, absolute=True))
    values = S._sub_dataset_scores(ties, masks[:64], False)[:, :301]
    out["first_entry_ties"] = digest(S.first_entry(values, np.array([1, 3, 3, 60, 150, 301])))
    out["first_entry_one_k"] = digest(S.first_entry(values, np.array([17])))
    # near-ties: values that differ in their last bits (the truncated keys' collisions)
    base = rng.normal(size=(40, 513))
    near = base.copy()
    near[:, 1::2] = np.nextafter(base[:, ::2][:, :256], np.inf)
    masks = S.deletion_masks(40, 300, 0.3, seed=4)
    out["near_ties"] = digest(S.vote_counts(near, np.zeros(513, int), np.linspace(0.01, 1, 15), masks))
    out["near_ties_abs"] = digest(
        S.vote_counts(near, np.zeros(513, int), np.linspace(0.01, 0.5, 15), masks, absolute=True))
    # interleaved groups (members not consecutive: index arrays, not slices), signed scores with negative zeros
    rng = np.random.default_rng(9)
    groups = rng.integers(0, 3, size=257)
    mixed = rng.integers(-4, 5, size=(25, 257)).astype(np.float64) * 0.25
    mixed[:, ::5] = -0.0
    masks = S.deletion_masks(25, 300, 0.4, seed=8)
    out["interleaved"] = digest(S.vote_counts(mixed, groups, np.array([0.02, 0.3, 0.6, 1.0]), masks))
    out["interleaved_abs"] = digest(S.vote_counts(mixed, groups, np.array([0.02, 0.3, 0.6]), masks, absolute=True))
    return out


def test_counts_equal_the_recorded_counts_of_before() -> None:
    assert cases() == RECORDED


def _near_tie_rows(rng: np.random.Generator, b: int, m: int) -> np.ndarray:
    """Rows of values a few ulps apart in a random order (every truncated key collides), at a random scale."""
    values = np.repeat(rng.normal(size=(b, 1)) * 10.0 ** rng.integers(-300, 300), m, axis=1)
    steps = rng.integers(0, 6, size=(b, m))
    for _ in range(5):
        values = np.where(steps > 0, np.nextafter(values, np.inf), values)
        steps -= 1
    return values


def test_top_order_is_the_stable_descending_order() -> None:
    """Against ``argsort(-values, kind="stable")`` (value descending, ties to the lower index) at every depth, on
    normal values, few-valued rows with zeros of both signs, and rows of values one ulp apart (whose truncated keys
    collide, inside the kept part and across the partition's cut), alone and mixed with normal values."""
    rng = np.random.default_rng(1)
    for trial in range(1200):
        b, m = int(rng.integers(1, 6)), int(rng.integers(1, 70))
        depth = int(rng.integers(1, m + 1))
        kind = trial % 4
        if kind == 0:
            values = rng.normal(size=(b, m))
        elif kind == 1:
            values = rng.integers(-2, 3, size=(b, m)).astype(float) * 0.5
            values[rng.random((b, m)) < 0.2] = -0.0
        else:
            values = _near_tie_rows(rng, b, m)
            if kind == 3:
                values[:, ::3] = rng.normal(size=values[:, ::3].shape)
        expected = np.argsort(-values, axis=1, kind="stable")[:, :depth]
        np.testing.assert_array_equal(S.top_order(values, depth), expected, err_msg=f"trial {trial}")


def test_top_order_of_a_column_view_equals_that_of_a_copy() -> None:
    """The histogram ranks a group's columns as a view of the dataset scores (no copy)."""
    rng = np.random.default_rng(2)
    scores = np.round(rng.normal(size=(9, 40)), 1)  # many ties
    view = scores[:, 10:30]
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(S.top_order(view, 12), S.top_order(view.copy(), 12))
    np.testing.assert_array_equal(S.top_order(view, 12), np.argsort(-view, axis=1, kind="stable")[:, :12])


@pytest.mark.parametrize("absolute", [False, True])
def test_vote_counts_equal_the_naive_path_with_ties(absolute: bool) -> None:
    """Cached counts against TopKDiscovery re-run on every sub-dataset: consecutive and interleaved groups, duplicated
    columns, zeros, a K grid out of order, chunks of 5 samples."""
    rng = np.random.default_rng(4)
    for groups in (np.repeat([0, 1, 2], [13, 40, 6]), rng.integers(0, 3, size=59)):
        scores = rng.integers(-2, 3, size=(12, 59)).astype(np.float32)
        scores[:, 30:40] = scores[:, 0:10]
        k_grid = np.array([0.6, 0.05, 1.0, 0.3])
        masks = S.deletion_masks(12, 120, 0.5, seed=int(rng.integers(1 << 30)))
        naive = S.vote_counts_naive(TopKDiscovery(scores, groups, k_grid, absolute), masks)
        np.testing.assert_array_equal(S.vote_counts(scores, groups, k_grid, masks, absolute, chunk_size=5), naive)


def test_binomial_pvalue_table_equals_the_direct_tail() -> None:
    """The table of every count 0..n + 1 gives the direct formula's values exactly; counts outside it (or one n per
    count) take the direct formula."""
    rng = np.random.default_rng(5)
    for n in (7, 100, 1000):
        agreeing = rng.integers(0, n + 2, size=(20, 400))
        for tau in (0.5, 0.9, 0.95, 0.99):
            np.testing.assert_array_equal(binomial_pvalue(agreeing, n, tau), binomial_tail(agreeing, n, tau))
    edge = binomial_pvalue(np.array([0, 1000, 1001]), 1000, 0.95)  # P[X >= 0] = 1, P[X = n] = tau^n, P[X > n] = 0
    assert edge[0] == 1.0 and edge[1] == pytest.approx(0.95**1000, rel=1e-12) and edge[2] == 0.0
    per_count = binomial_pvalue(np.arange(5), np.arange(5) + 3, 0.9)  # the planner's one n per count
    np.testing.assert_array_equal(per_count, binomial_tail(np.arange(5), np.arange(5) + 3, 0.9))
