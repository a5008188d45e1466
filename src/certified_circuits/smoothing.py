"""Randomized deletion smoothing (RS-Del) and vote counting (paper Sec. 3.2, Algorithm 2 ``Sample``).

Deletion masks
    ``eps ~ Bernoulli(1 - p_del)^|D|``: ``eps_i = 1`` keeps example ``i``. Masks come from numpy's
    PCG64 generator seeded by a config seed. Algorithm 1 needs two *independent* streams, ``n0``
    selection masks and ``n`` certification masks; :func:`selection_and_certification_masks` spawns
    them as two children of one ``SeedSequence(seed)``, so both are reproducible from one seed and
    never share draws (reusing selection masks for certification would invalidate the test).

Vote counts, cached path
    For base algorithms that score a dataset by the mean of per-example scores ``S [|D|, U]``, the
    sub-dataset score of every mask is one matrix product ``eps @ S / |eps|``. Each sample's
    within-group rank of every component is computed once (stable sort: ties to the lower index) and
    reused for the whole K grid: component ``u`` is in the top-K circuit iff
    ``rank < k_count(K, |group(u)|)``. Because the counts are nondecreasing in K, the first K at which
    ``u`` enters is a ``searchsorted`` and the counts for all K are one ``bincount`` plus a cumulative
    sum. No Python loop runs over masks or components (only over sample chunks, to bound memory, and
    over the few top-K groups).

Vote counts, naive path
    :func:`vote_counts_naive` re-runs a supplied base-algorithm callable on every sub-dataset: the
    paper's "naive" column, and the reference the cached path is tested against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from .discovery import GroupIndex, count_table
from .validation import check_count, check_k_grid, check_p_del

if TYPE_CHECKING:  # pragma: no cover
    from .store import Votes

SeedLike = int | np.random.SeedSequence

#: Samples per chunk of the cached path; bounds memory at ~chunk * U * 8 bytes per temporary.
DEFAULT_CHUNK = 256


def _seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} is invalid: expected a non-negative integer")
    return np.random.SeedSequence(int(seed))


def deletion_masks(n_examples: int, n_samples: int, p_del: float, seed: SeedLike) -> np.ndarray:
    """Draw ``n_samples`` i.i.d. RS-Del deletion masks over ``n_examples`` examples.

    Returns:
        bool ``[n_samples, n_examples]``; ``True`` keeps the example (probability ``1 - p_del``).
    """
    n_examples = check_count("n_examples", n_examples, minimum=1)
    n_samples = check_count("n_samples", n_samples, minimum=1)
    p_del = check_p_del(p_del)
    rng = np.random.Generator(np.random.PCG64(_seed_sequence(seed)))
    return rng.random((n_samples, n_examples)) >= p_del


def selection_and_certification_masks(
    n_examples: int, n0: int, n: int, p_del: float, seed: SeedLike
) -> tuple[np.ndarray, np.ndarray]:
    """The two independent mask streams of Algorithm 1 from one seed.

    ``SeedSequence(seed).spawn(2)`` gives statistically independent child streams: the first draws
    the ``n0`` selection masks, the second the ``n`` certification masks. Changing ``n0`` never
    changes the certification masks and vice versa.
    """
    selection_seed, certification_seed = _seed_sequence(seed).spawn(2)
    return (
        deletion_masks(n_examples, n0, p_del, selection_seed),
        deletion_masks(n_examples, n, p_del, certification_seed),
    )


def _check_scores(scores: np.ndarray, groups: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = np.asarray(scores)
    groups = np.asarray(groups)
    masks = np.asarray(masks)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D [n_examples, n_components], got shape {scores.shape}")
    if groups.shape != (scores.shape[1],):
        raise ValueError(
            f"groups has shape {groups.shape} but scores has {scores.shape[1]} components: "
            "give one group id per component"
        )
    if masks.ndim != 2 or masks.shape[1] != scores.shape[0]:
        raise ValueError(
            f"masks have shape {masks.shape} but scores have {scores.shape[0]} examples: "
            "masks must be [n_samples, n_examples]"
        )
    if masks.dtype != bool:
        raise ValueError(f"masks must be boolean (True keeps an example), got dtype {masks.dtype}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain NaN or infinite values: recompute the attributions")
    return scores, groups, masks


def _descending_order(values: np.ndarray) -> np.ndarray:
    """Per-row order of ``values`` by (value descending, index ascending).

    A fast unstable sort does the work; rows that contain exact ties (common: dead channels score
    exactly 0) are then fixed by re-sorting a unique int64 key ``run_id * m + index``, which puts each
    run of equal values in index order. Equivalent to ``argsort(-values, kind="stable")`` at a fraction
    of the cost.
    """
    negated = -values
    order = np.argsort(negated, axis=1)
    ordered = np.take_along_axis(negated, order, axis=1)
    new_run = np.ones(ordered.shape, dtype=bool)
    new_run[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    tied_rows = np.flatnonzero(~new_run.all(axis=1))
    if tied_rows.size:
        width = values.shape[1]
        run_id = np.cumsum(new_run[tied_rows], axis=1, dtype=np.int64)
        key = run_id * width + order[tied_rows]
        order[tied_rows] = np.sort(key, axis=1) % width
    return order


def first_inclusion(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    masks: np.ndarray,
    absolute: bool = False,
) -> np.ndarray:
    """For every sample and component, the position in the *sorted* K grid where it enters.

    Returns:
        int64 ``[n_samples, U]`` with values in ``0..len(k_grid)``: the sample's circuit at the
        ``j``-th smallest K contains ``u`` iff ``result[s, u] <= j``; ``len(k_grid)`` means never
        (also for the empty sub-dataset, whose circuit is empty).
    """
    k_sorted = np.sort(check_k_grid(k_grid))
    index = GroupIndex.from_groups(groups)
    kept_per_group = count_table(k_sorted, index)  # [nK, G], nondecreasing along K
    n_kept = masks.sum(axis=1)
    sums = masks.astype(np.float64) @ np.asarray(scores, dtype=np.float64)
    dataset_scores = sums / np.maximum(n_kept, 1)[:, None]
    if absolute:
        np.abs(dataset_scores, out=dataset_scores)
    entry = np.empty(dataset_scores.shape, dtype=np.int64)
    rows = np.arange(dataset_scores.shape[0])[:, None]
    for g, members in enumerate(index.members):
        # rank r enters at the first sorted K whose count exceeds r
        entry_of_rank = np.searchsorted(kept_per_group[:, g], np.arange(members.size), side="right")
        order = _descending_order(dataset_scores[:, members])
        group_entry = np.empty(order.shape, dtype=np.int64)
        group_entry[rows, order] = entry_of_rank[None, :]
        entry[:, members] = group_entry
    entry[n_kept == 0] = k_sorted.size
    return entry


def vote_counts(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    masks: np.ndarray,
    absolute: bool = False,
    chunk_size: int = DEFAULT_CHUNK,
) -> np.ndarray:
    """Algorithm 2 (``Sample``), cached: inclusion counts of every component for every K.

    Args:
        scores: float ``[n_examples, U]`` cached per-example scores.
        groups: int ``[U]``; top-K is taken within each group (vision: per layer; edges: one group).
        k_grid: top-K fractions in (0, 1], any order.
        masks: bool ``[n_samples, n_examples]`` deletion masks.
        absolute: rank by ``|mean score|`` (EAP-IG's convention for signed edge scores).
        chunk_size: samples processed at once (memory bound only; results do not depend on it).

    Returns:
        int32 ``[len(k_grid), U]``: ``counts[k, u] = #{samples whose top-K circuit contains u}``, in the
        order of ``k_grid`` as given.
    """
    scores, groups, masks = _check_scores(scores, groups, masks)
    k_grid = check_k_grid(k_grid)
    chunk_size = check_count("chunk_size", chunk_size)
    n_k, n_components = k_grid.size, scores.shape[1]
    histogram = np.zeros(n_components * (n_k + 1), dtype=np.int64)
    offsets = np.arange(n_components, dtype=np.int64) * (n_k + 1)
    for start in range(0, masks.shape[0], chunk_size):
        entry = first_inclusion(scores, groups, k_grid, masks[start : start + chunk_size], absolute)
        histogram += np.bincount((entry + offsets[None, :]).ravel(), minlength=histogram.size)
    per_entry = histogram.reshape(n_components, n_k + 1)[:, :n_k]
    counts_sorted = np.cumsum(per_entry, axis=1).T  # [nK sorted, U]
    order = np.argsort(k_grid, kind="stable")
    counts = np.empty_like(counts_sorted)
    counts[order] = counts_sorted
    return counts.astype(np.int32)


def full_dataset_circuits(
    scores: np.ndarray, groups: np.ndarray, k_grid: np.ndarray, absolute: bool = False
) -> np.ndarray:
    """The baseline: A run once on the full dataset, bool ``[len(k_grid), U]``."""
    scores = np.asarray(scores)
    everything = np.ones((1, scores.shape[0]), dtype=bool)
    return vote_counts(scores, groups, k_grid, everything, absolute).astype(bool)


def vote_counts_naive(
    algorithm: Callable[[np.ndarray], np.ndarray],
    masks: np.ndarray,
    progress: bool = False,
) -> np.ndarray:
    """Algorithm 2 (``Sample``), naive: run the base algorithm on every sub-dataset.

    Args:
        algorithm: maps the int indices of the kept examples to a bool circuit ``[..., U]`` (for
            example :class:`certified_circuits.discovery.TopKDiscovery`, or a callable that re-runs a
            model's attribution pass on the sub-dataset).
        masks: bool ``[n_samples, n_examples]``.
        progress: show a tqdm bar on stderr.

    Returns:
        int32 counts with the algorithm's output shape.
    """
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2:
        raise ValueError(f"masks must be [n_samples, n_examples], got shape {masks.shape}")
    iterator = range(masks.shape[0])
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="naive sampling", unit="mask")
    counts = None
    for s in iterator:
        circuit = np.asarray(algorithm(np.flatnonzero(masks[s])), dtype=bool)
        counts = circuit.astype(np.int64) if counts is None else counts + circuit
    return counts.astype(np.int32)


def compute_votes(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    p_del: float,
    n0: int,
    n: int,
    seed: int,
    absolute: bool = False,
    attrs: dict | None = None,
) -> "Votes":
    """The votes stage: baseline circuits plus selection and certification counts (Algorithm 2, twice).

    The selection and certification masks are the two independent streams of
    :func:`selection_and_certification_masks`.
    """
    from .store import Votes

    k_grid = check_k_grid(k_grid)
    selection_masks, certification_masks = selection_and_certification_masks(scores.shape[0], n0, n, p_del, seed)
    return Votes(
        k_grid=k_grid,
        baseline=full_dataset_circuits(scores, groups, k_grid, absolute),
        selection_counts=vote_counts(scores, groups, k_grid, selection_masks, absolute),
        certification_counts=vote_counts(scores, groups, k_grid, certification_masks, absolute),
        groups=np.asarray(groups, dtype=np.int32),
        attrs={"p_del": float(p_del), "n0": int(n0), "n": int(n), "seed": int(seed),
               "n_examples": int(scores.shape[0]), "absolute": bool(absolute), **(attrs or {})},
    )
