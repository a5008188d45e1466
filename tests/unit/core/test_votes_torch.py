"""Vote counting in torch (CPU here, CUDA when present) equals the exact numpy path (Algorithm 2, cached).

Counts may differ only where two sub-dataset means lie within float rounding of each other (the BLAS
libraries sum the kept rows in different orders); :func:`near_tie_allowance` finds those places
explicitly, and every difference must be covered by one. Exact ties keep the lower-index rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certified_circuits.core.discovery import GroupIndex, TopKDiscovery, count_table
from certified_circuits.core.smoothing import (
    compute_votes,
    deletion_masks,
    full_dataset_circuits,
    selection_and_certification_masks,
    vote_counts,
    vote_counts_naive,
    vote_counts_torch,
    vote_device,
)

#: torch's path on the CPU (the string "cpu" selects numpy: core.devices.vote_device)
TORCH_CPU = torch.device("cpu")
RESNET_GROUPS = np.repeat(np.arange(4), [256, 512, 1024, 2048]).astype(np.int32)


def near_tie_allowance(scores: np.ndarray, groups: np.ndarray, k_grid: np.ndarray, masks: np.ndarray,
                       absolute: bool, rtol: float) -> np.ndarray:
    """int ``[nK, U]``: samples in which ``u`` sits at a K's cut within ``rtol`` of a near-tie.

    For sample ``s``, group ``g`` and K (``kept`` components): with ``d`` the group's dataset scores
    sorted descending, the cut is ambiguous when ``d[kept-1] - d[kept] <= tol`` (``tol = rtol * max|x|``
    of the row); then every component within ``2 tol`` of ``d[kept-1]`` may fall on either side.
    """
    masks = masks[masks.any(axis=1)]
    x = masks.astype(np.float64) @ scores.astype(np.float64) / masks.sum(axis=1, keepdims=True)
    if absolute:
        x = np.abs(x)
    tol = rtol * np.abs(x).max(axis=1, keepdims=True)  # [S, 1]
    allowance = np.zeros((k_grid.size, scores.shape[1]), dtype=np.int64)
    index = GroupIndex.from_groups(groups)
    kept = count_table(k_grid, index)
    for g, members in enumerate(index.members):
        local = x[:, members]
        d = -np.sort(-local, axis=1)
        for j in range(k_grid.size):
            c = kept[j, g]
            if c >= members.size:
                continue
            ambiguous_cut = (d[:, c - 1] - d[:, c]) <= tol[:, 0]
            near = np.abs(local - d[:, c - 1 : c]) <= 2 * tol
            allowance[j, members] += (near & ambiguous_cut[:, None]).sum(axis=0)
    return allowance


def assert_equal_up_to_near_ties(got: np.ndarray, expected: np.ndarray, scores, groups, k_grid, masks,
                                 absolute: bool = False, rtol: float = 1e-12) -> None:
    assert got.shape == expected.shape and got.dtype == np.int32
    diff = np.abs(got.astype(np.int64) - expected)
    if diff.any():
        allowance = near_tie_allowance(scores, groups, np.asarray(k_grid, dtype=np.float64), masks, absolute, rtol)
        unexplained = diff > allowance
        assert not unexplained.any(), (
            f"{int(unexplained.sum())} counts differ beyond near-ties, e.g. (K, u) = {np.argwhere(unexplained)[:5]}")


def _case(rng: np.random.Generator, n_examples: int, groups: np.ndarray, n_samples: int, p_del: float):
    scores = rng.normal(size=(n_examples, groups.size))
    k_grid = np.concatenate([rng.uniform(0.01, 1.0, size=5), [1.0, 0.5, 0.5]])  # unsorted, repeated
    masks = deletion_masks(n_examples, n_samples, p_del, int(rng.integers(1 << 30)))
    return scores, k_grid, masks


@pytest.mark.parametrize("absolute", [False, True])
def test_torch_cpu_equals_numpy_on_random_data(rng: np.random.Generator, absolute: bool) -> None:
    for _ in range(10):
        groups = rng.choice([-3, 2, 9], size=int(rng.integers(2, 200)))  # non-contiguous, interleaved labels
        scores, k_grid, masks = _case(rng, int(rng.integers(1, 30)), groups, 80, float(rng.uniform(0.2, 0.9)))
        expected = vote_counts(scores, groups, k_grid, masks, absolute)
        got = vote_counts(scores, groups, k_grid, masks, absolute, device=TORCH_CPU)
        assert_equal_up_to_near_ties(got, expected, scores, groups, k_grid, masks, absolute)


def test_torch_cpu_equals_numpy_on_resnet_shaped_groups(rng: np.random.Generator) -> None:
    scores = np.maximum(rng.normal(size=(50, RESNET_GROUPS.size)), 0).astype(np.float32)  # ReLU-like zeros
    k_grid = np.linspace(0.05, 1.0, 20)
    _, masks = selection_and_certification_masks(50, 10, 200, 0.6, seed=4)
    expected = vote_counts(scores, RESNET_GROUPS, k_grid, masks)
    got = vote_counts(scores, RESNET_GROUPS, k_grid, masks, device=TORCH_CPU)
    # float32 scores summed in float64 are exact here, so every order of summation gives the same means
    np.testing.assert_array_equal(got, expected)


def test_global_top_k_absolute_equals_numpy_and_naive(rng: np.random.Generator) -> None:
    groups = np.zeros(300, dtype=np.int32)  # one group: EAP-IG's global top-K over edges
    scores = np.round(4 * rng.normal(size=(20, 300))) / 4  # signed, dyadic: exact ties of |mean|
    k_grid = np.array([0.01, 0.1, 0.33, 1.0])
    masks = deletion_masks(20, 60, 0.6, seed=2)
    got = vote_counts(scores, groups, k_grid, masks, absolute=True, device=TORCH_CPU)
    np.testing.assert_array_equal(got, vote_counts(scores, groups, k_grid, masks, absolute=True))
    np.testing.assert_array_equal(got, vote_counts_naive(TopKDiscovery(scores, groups, k_grid, True), masks))


def test_float32_differs_only_at_near_ties(rng: np.random.Generator) -> None:
    groups = np.repeat([0, 1], [100, 300])
    scores, k_grid, masks = _case(rng, 40, groups, 200, 0.6)
    expected = vote_counts(scores, groups, k_grid, masks)
    got = vote_counts(scores, groups, k_grid, masks, device=TORCH_CPU, dtype=torch.float32)
    assert_equal_up_to_near_ties(got, expected, scores, groups, k_grid, masks, rtol=1e-5)


def test_near_tie_check_explains_a_float32_flip(rng: np.random.Generator) -> None:
    # column 1 exceeds column 0 by far less than float32 resolution: float64 ranks 1 first, float32 sees
    # a tie and keeps the lower index 0. The counts differ, and only where the near-tie check allows.
    scores = rng.uniform(1.0, 2.0, size=(10, 6))
    scores[:, 1] = scores[:, 0] + 1e-12
    scores[:, 0] += 5.0
    scores[:, 1] += 5.0
    groups = np.zeros(6, dtype=int)
    masks = deletion_masks(10, 50, 0.5, seed=6)
    expected = vote_counts(scores, groups, [1 / 6], masks)
    got = vote_counts(scores, groups, [1 / 6], masks, device=TORCH_CPU, dtype=torch.float32)
    assert (got != expected).any()
    assert_equal_up_to_near_ties(got, expected, scores, groups, np.array([1 / 6]), masks, rtol=1e-6)
    with pytest.raises(AssertionError, match="differ beyond near-ties"):
        assert_equal_up_to_near_ties(got, expected, scores, groups, np.array([1 / 6]), masks, rtol=0.0)


@pytest.mark.parametrize("absolute", [False, True])
def test_exact_ties_keep_the_lower_index_rule(rng: np.random.Generator, absolute: bool) -> None:
    for _ in range(10):
        n_examples, n_components = int(rng.integers(1, 16)), int(rng.integers(2, 70))
        groups = rng.choice([0, 5], size=n_components)
        scores = np.round(rng.normal(size=(n_examples, n_components)))  # exact dyadic sums
        scores[:, : n_components // 3] = 0.0  # dead channels
        k_grid = np.concatenate([rng.uniform(0.01, 1.0, size=4), [1.0]])
        masks = deletion_masks(n_examples, 64, float(rng.uniform(0.2, 0.9)), int(rng.integers(1 << 30)))
        got = vote_counts(scores, groups, k_grid, masks, absolute, device=TORCH_CPU, chunk_size=9)
        np.testing.assert_array_equal(got, vote_counts(scores, groups, k_grid, masks, absolute))
        np.testing.assert_array_equal(got, vote_counts_naive(TopKDiscovery(scores, groups, k_grid, absolute), masks))


def test_duplicated_columns_tie_exactly(rng: np.random.Generator) -> None:
    base = rng.normal(size=(30, 40)).astype(np.float32)
    scores = np.concatenate([base, base[:, ::-1], base[:, :10]], axis=1)  # every column has a twin
    groups = np.repeat([0, 1], [50, 40])
    k_grid = np.linspace(0.05, 1.0, 20)
    masks = deletion_masks(30, 100, 0.6, seed=8)
    got = vote_counts(scores, groups, k_grid, masks, device=TORCH_CPU)
    np.testing.assert_array_equal(got, vote_counts(scores, groups, k_grid, masks))
    np.testing.assert_array_equal(got, vote_counts_naive(TopKDiscovery(scores, groups, k_grid), masks))


def test_all_equal_scores_keep_the_lowest_indices() -> None:
    groups = np.repeat([0, 1], [10, 30])
    scores = np.full((6, 40), 0.37)
    k_grid = np.array([0.1, 0.5, 1.0])
    masks = deletion_masks(6, 50, 0.5, seed=1)
    got = vote_counts(scores, groups, k_grid, masks, device=TORCH_CPU)
    n_nonempty = int(masks.any(axis=1).sum())
    for j, (kept0, kept1) in enumerate([(1, 3), (5, 15), (10, 30)]):
        expected = np.zeros(40, dtype=np.int32)
        expected[:kept0] = n_nonempty
        expected[10 : 10 + kept1] = n_nonempty
        np.testing.assert_array_equal(got[j], expected)


def test_empty_sub_datasets_vote_for_nothing(rng: np.random.Generator) -> None:
    scores = rng.normal(size=(5, 12))
    groups = np.zeros(12, dtype=int)
    masks = deletion_masks(5, 200, 0.7, seed=3)
    masks[::4] = False  # plenty of all-deleted sub-datasets
    got = vote_counts(scores, groups, [1.0, 0.5], masks, device=TORCH_CPU)
    np.testing.assert_array_equal(got[0], np.full(12, masks.any(axis=1).sum()))
    np.testing.assert_array_equal(got, vote_counts(scores, groups, [1.0, 0.5], masks))
    nothing = np.zeros((7, 5), dtype=bool)
    np.testing.assert_array_equal(vote_counts(scores, groups, [0.5], nothing, device=TORCH_CPU), np.zeros((1, 12), np.int32))


def test_counts_do_not_depend_on_the_chunk(rng: np.random.Generator) -> None:
    groups = np.repeat([0, 1, 2], [7, 20, 13])
    scores, k_grid, masks = _case(rng, 12, groups, 90, 0.5)
    reference = vote_counts_torch(scores, groups, k_grid, masks, chunk_size=1000)
    for chunk in (1, 7, 89):
        np.testing.assert_array_equal(vote_counts_torch(scores, groups, k_grid, masks, chunk_size=chunk), reference)


def test_compute_votes_on_a_device_equals_numpy(rng: np.random.Generator) -> None:
    scores = np.maximum(rng.normal(size=(25, 60)), 0).astype(np.float32)
    groups = np.repeat([0, 1, 2], 20)
    k_grid = [0.1, 0.5, 0.9]
    reference = compute_votes(scores, groups, k_grid, 0.6, 20, 100, seed=5)
    for scores_in, device in ((scores, "cpu"), (scores, TORCH_CPU), (torch.from_numpy(scores), "cpu"),
                               (torch.from_numpy(scores), TORCH_CPU), (torch.from_numpy(scores), None)):
        votes = compute_votes(scores_in, groups, k_grid, 0.6, 20, 100, seed=5, device=device)
        np.testing.assert_array_equal(votes.baseline, reference.baseline)
        np.testing.assert_array_equal(votes.selection_counts, reference.selection_counts)
        np.testing.assert_array_equal(votes.certification_counts, reference.certification_counts)
        np.testing.assert_array_equal(votes.groups, reference.groups)
        assert votes.attrs == reference.attrs
    np.testing.assert_array_equal(full_dataset_circuits(torch.from_numpy(scores), groups, k_grid, device=TORCH_CPU),
                                  reference.baseline)


def test_vote_device_follows_the_data_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    scores = np.zeros((2, 3))
    assert vote_device(scores) is None  # numpy scores: the numpy path
    assert vote_device(torch.zeros(2, 3)) is None  # CPU tensors too
    assert vote_device(scores, "cpu") is None  # "cpu" is numpy, as the votes stage's --device cpu
    assert vote_device(torch.zeros(2, 3), "cpu") is None
    assert vote_device(scores, TORCH_CPU) == TORCH_CPU  # a torch.device: torch on exactly that device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert vote_device(scores, "auto") is None  # no CUDA: the exact numpy path
    with pytest.raises(ValueError, match="CUDA is not available"):
        vote_device(scores, "cuda")


def test_cpu_counts_a_gpu_tensor_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """compute_votes(device="cpu") moves the scores to the host once: a later call never follows them back."""
    import certified_circuits.core.smoothing as smoothing

    seen = []
    real = smoothing.vote_device
    monkeypatch.setattr(smoothing, "vote_device", lambda s, d=None: seen.append((type(s), d)) or real(s, d))
    compute_votes(torch.zeros(4, 3, dtype=torch.float64), np.zeros(3, dtype=int), [0.5], 0.5, 2, 3, seed=0,
                  device="cpu")
    assert seen[0] == (torch.Tensor, "cpu")
    assert all(kind is np.ndarray and device is None for kind, device in seen[1:])


def test_torch_path_rejects_bad_inputs() -> None:
    scores = np.zeros((4, 3))
    masks = np.ones((2, 4), dtype=bool)
    with pytest.raises(ValueError, match="groups"):
        vote_counts(scores, np.zeros(2, dtype=int), [0.5], masks, device=TORCH_CPU)
    with pytest.raises(ValueError, match="masks"):
        vote_counts(scores, np.zeros(3, dtype=int), [0.5], np.ones((2, 5), dtype=bool), device=TORCH_CPU)
    with pytest.raises(ValueError, match="boolean"):
        vote_counts(scores, np.zeros(3, dtype=int), [0.5], masks.astype(int), device=TORCH_CPU)
    with pytest.raises(ValueError, match="NaN"):
        vote_counts(np.full((4, 3), np.nan), np.zeros(3, dtype=int), [0.5], masks, device=TORCH_CPU)
    with pytest.raises(ValueError, match="float dtype"):
        vote_counts(scores, np.zeros(3, dtype=int), [0.5], masks, device=TORCH_CPU, dtype=torch.int64)
    with pytest.raises(ValueError, match="k_grid"):
        vote_counts(scores, np.zeros(3, dtype=int), [1.5], masks, device=TORCH_CPU)


@pytest.mark.gpu
@pytest.mark.parametrize("absolute", [False, True])
def test_cuda_equals_numpy(rng: np.random.Generator, absolute: bool) -> None:
    scores = rng.normal(size=(50, RESNET_GROUPS.size)).astype(np.float32)
    k_grid = np.linspace(0.05, 1.0, 20)
    selection, certification = selection_and_certification_masks(50, 100, 1000, 0.6, seed=0)
    on_gpu = torch.from_numpy(scores).cuda()
    for masks in (selection, certification):
        expected = vote_counts(scores, RESNET_GROUPS, k_grid, masks, absolute)
        got = vote_counts(on_gpu, RESNET_GROUPS, k_grid, masks, absolute)  # follows the data onto the GPU
        assert_equal_up_to_near_ties(got, expected, scores, RESNET_GROUPS, k_grid, masks, absolute)
        got32 = vote_counts(on_gpu, RESNET_GROUPS, k_grid, masks, absolute, dtype=torch.float32)
        assert_equal_up_to_near_ties(got32, expected, scores, RESNET_GROUPS, k_grid, masks, absolute, rtol=1e-5)


@pytest.mark.gpu
def test_cuda_exact_ties_and_empty_sub_datasets() -> None:
    groups = np.repeat([0, 1], [10, 30])
    scores = torch.full((6, 40), 0.37, device="cuda")
    masks = deletion_masks(6, 300, 0.8, seed=1)
    got = vote_counts(scores, groups, [0.1, 0.5, 1.0], masks)
    np.testing.assert_array_equal(got, vote_counts(scores.cpu().numpy(), groups, [0.1, 0.5, 1.0], masks))
