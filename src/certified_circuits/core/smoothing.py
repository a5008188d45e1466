"""Randomized deletion smoothing (RS-Del) and vote counting (paper Sec. 3.2, Algorithm 2 ``Sample``).

Deletion masks
    ``eps ~ Bernoulli(1 - p_del)^|D|``: ``eps_i = 1`` keeps example ``i``. Masks come from numpy's
    PCG64 generator seeded by a config seed. Algorithm 1 needs two *independent* streams, ``n0``
    selection masks and ``n`` certification masks; :func:`selection_and_certification_masks` spawns
    them as two children of one ``SeedSequence(seed)``, so both are reproducible from one seed and
    never share draws (reusing selection masks for certification would invalidate the test).

Vote counts, cached path
    For base algorithms that score a dataset by the mean of per-example scores ``S [|D|, U]``, the
    sub-dataset score of every mask is one matrix product ``eps @ S / |eps|`` (a sparse one when the masks keep few
    examples: the same floats, :func:`_sub_dataset_scores`). Each sample's scores are ranked once per group and
    reused for the whole K grid: top-K circuits are nested in K, so the component at position ``p`` of a sample's
    ranking (value descending, ties to the lower index) first enters at the first K whose count exceeds ``p``. Only
    which components fall between two consecutive counts matters, so the keys (the component's index in their low
    bits) are partitioned at the K grid's counts, or sorted where that is cheaper (:func:`top_segments`: exact, with
    the rare near-equal values at a cut checked); the counts for all K are then one ``bincount`` plus a cumulative
    sum. No Python loop runs over masks or components (only over sample chunks, to bound memory, over the few top-K
    groups and over the K grid's counts).

Vote counts on a device (torch)
    When the scores are a torch tensor on a GPU, or a ``device`` is asked for, the same counts are
    computed in torch on that device (:func:`vote_counts_torch`): the masks are still drawn by numpy
    from the seed (so results never depend on the device), moved to the device, and one matrix
    product in float64 gives every sample's dataset scores. Per group one *stable* descending sort
    orders each sample's scores (value descending, equal values by lower index: the tie rule); the
    component at sorted position ``p`` enters the top-K circuit at the first K with
    ``kept_j > p``, a position-only table ``E[p] = #{j : kept_j <= p}``, so one ``bincount`` of
    ``component * (nK + 1) + E[p]`` gives the same first-entry histogram as the numpy path. Counts
    equal the numpy path's exactly, except where two dataset means lie within float64 rounding of each
    other (the two BLAS libraries may sum the kept rows in different orders); exact ties are exact in
    both and keep the lower-index rule.

Vote counts, naive path
    :func:`vote_counts_naive` re-runs a supplied base-algorithm callable on every sub-dataset: the
    paper's "naive" column, and the reference the cached path is tested against.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from certified_circuits.core.devices import vote_device
from certified_circuits.core.discovery import GroupIndex, check_group_counts, count_table
from certified_circuits.core.validation import check_count, check_k_grid, check_p_del

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from certified_circuits.core.contracts import Votes

SeedLike = int | np.random.SeedSequence

#: Elements (samples x components) per block that the cached path ranks at once: keeps each float64 temporary at
#: 2 MB (cache-resident: measured fastest on ResNet- and GPT-2-shaped inputs) while keeping blocks large
#: enough that per-call overhead vanishes for small models.
CHUNK_ELEMENTS = 2**18

#: Elements per chunk of the mask product (32 MB of float64 scores, ranked in blocks of :data:`CHUNK_ELEMENTS`):
#: few, large products. The same CPU time as 2 MB chunks on one thread, but OpenBLAS's threads wait on a busy core
#: at every call: a ResNet class's certification votes took 700 ms in 17 products and 232 ms in one (wall, median of
#: 5, load 3.9 on this project's 2 cores).
PRODUCT_ELEMENTS = 2**22


def default_chunk(n_components: int) -> int:
    """Samples per chunk of the mask product for ``n_components`` components (at least 64)."""
    return max(64, PRODUCT_ELEMENTS // max(1, n_components))


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


def _is_tensor(value: Any) -> bool:
    """True for a torch tensor (without importing torch when nothing has)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _numpy(value: Any) -> np.ndarray:
    """A numpy array of ``value``; torch tensors are detached and copied to the host first."""
    if _is_tensor(value):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _check_scores(
    scores: np.ndarray, groups: np.ndarray, masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = _numpy(scores)
    groups = _numpy(groups)
    masks = _numpy(masks)
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


#: ``x -> key``: flipping every bit below the sign of a non-negative float64 (and none of a negative one) gives a uint64
#: that increases as the float decreases, so ascending keys are values descending (``-0.0`` is made ``+0.0`` first)
_MAGNITUDE_BITS = np.uint64(0x7FFF_FFFF_FFFF_FFFF)


def top_order(values: np.ndarray, depth: int) -> np.ndarray:
    """Each row's first ``depth`` components in top-K order: value descending, equal values by lower index.

    Args:
        values: float64 ``[b, m]`` finite dataset scores of one group for ``b`` samples.
        depth: how many leading positions are needed (1..m).

    Returns:
        intp ``[b, depth]``: ``order[s, p]`` is the component at position ``p`` of sample ``s``'s ranking, so the
        top-``k`` circuit of sample ``s`` is ``order[s, :k]``; exactly ``argsort(-values, kind="stable")[:, :depth]``.

    :func:`top_segments` with a cut at every position (each segment one position). Vote counting needs only the
    segments of its K grid; this whole order is the reference they are tested against. Its check costs ``O(m)`` per
    pair of neighbours that share a key bucket (exact ties included), so rows of many ties cost ``O(m^2)``.
    """
    return top_segments(values, np.arange(1, depth + 1))


def _index_keys(values: np.ndarray) -> tuple[np.ndarray, np.uint64, np.uint64]:
    """uint64 ``[b, m]`` keys ascending as the values descend, with each component's index in their low bits.

    Returns:
        ``(keys, shift, low)``: ``keys[s, u] = (key(values[s, u]) >> shift << shift) | u`` (:func:`_descending_keys`),
        ``shift = bit_length(m - 1)`` (at least 1) and ``low = 2^shift - 1``; ``keys >> shift`` is the value's key
        without its low bits (its *bucket*), ``keys & low`` the component.
    """
    m = values.shape[1]
    shift = np.uint64(max(1, int(m - 1).bit_length()))
    low = np.uint64((1 << int(shift)) - 1)
    index = np.arange(m, dtype=np.uint64)
    if values.view(np.int64).min() >= 0:  # no sign bit set: key = bits ^ 0x7FFF...F (its low bits all ones)
        keys = np.bitwise_or(values.view(np.uint64), low)
        keys ^= _MAGNITUDE_BITS ^ index  # (bits | low) ^ (0x7FFF...F ^ u) = (key >> shift << shift) | u
        return keys, shift, low
    keys = _descending_keys(values)
    keys |= low
    keys ^= low ^ index
    return keys, shift, low


#: How :func:`top_segments` arranges a row: a sort of the ``d`` leading keys costs about ``_SORT_COST * d * log2(d)``
#: element steps of a partition (numpy 2.4's AVX2 sort and partition of uint64 on this project's 2-core CPU: GPT-2's
#: 20 geometric K of 32,491 edges partition, a ResNet layer's 20 evenly spaced K sort). Speed only: both give the same
#: segments.
_SORT_COST = 0.5

#: Below these magnitudes a nonzero number could share the bucket of ``0.0`` (its key's high bits, for any
#: ``shift <= 63``): a dataset score below ``2^-1011``, or a per-example score below ``2^-900`` (see
#: :func:`_zeros_apart`).
_ZERO_GAP_VALUES = 2.0**-1011
_ZERO_GAP_SCORES = 2.0**-900


def _zeros_apart(array: np.ndarray, gap: float) -> bool:
    """True when every entry is zero or at least ``gap`` in magnitude.

    With ``gap = _ZERO_GAP_VALUES`` on dataset scores: the bucket of ``0.0`` (keys below ``2^shift`` above its key:
    the numbers in ``[0, 2^(shift - 1074))``) holds zeros only, so its members are equal and ordered by index rightly.
    With ``gap = _ZERO_GAP_SCORES`` on the per-example scores ``S`` it implies the same of every dataset score
    ``(eps @ S) / |eps|``: each score is a multiple of ``q = 2^-952``, so is every float64 sum of them (a rounded sum
    that is not exact is a multiple of its ulp, at least ``2q`` there), and a nonzero sum divided by ``|eps| < 2^31`` is
    at least ``2^-983``.
    """
    return bool(np.all((array == 0) | (np.abs(array) >= gap)))


def top_segments(values: np.ndarray, kept: np.ndarray, zeros_apart: bool | None = None) -> np.ndarray:
    """Each row's components at the positions of its top-K ranking, exact up to the order inside each K's segment.

    Vote counting needs only the first K at which each component enters: for the distinct counts ``c_1 < ... < c_J``
    of ``kept`` (and ``c_0 = 0``), which components a row ranks at positions ``c_{j-1} .. c_j - 1`` (value descending,
    equal values by lower index: :func:`top_order`), not their order there.

    Args:
        values: float64 ``[b, m]`` finite dataset scores of one group for ``b`` samples.
        kept: int ``[nK]`` counts kept (1..m, any order, repeats allowed); the depth is ``max(kept)``.
        zeros_apart: the caller's guarantee that no value is a nonzero number below ``2^-1011`` in magnitude
            (:func:`_zeros_apart`); ``None`` checks it on ``values``.

    Returns:
        intp ``[b, max(kept)]``: ``segments[s, p]`` is a component, and ``{segments[s, p] : c_{j-1} <= p < c_j}``
        equals ``{order[s, p] : c_{j-1} <= p < c_j}`` for the stable descending ``order`` of :func:`top_order`, for
        every ``j``.

    Method (no Python loop over samples or components): the keys of :func:`_index_keys` (bucket in the high bits, index
    in the low ones) are arranged by the cuts ``c_j < m``: one partition per cut, from the largest down, each on the
    part left of the one before (``m + c_J + ... + c_2`` element steps), or one partition at the depth and a sort
    (``_SORT_COST * d log2 d``), whichever costs less. Keys order the components rightly except inside one bucket,
    where distinct values within ``2^(shift - 52)`` relative of each other are ordered by index; a cut is therefore
    checked only where the largest key left of it and the smallest right of it share their bucket, and then on that
    bucket's values: the row is wrong iff a value right of the cut exceeds one left of it, and a wrong row is ranked
    again by a stable argsort. Exact ties are such buckets too (equal values: never wrong); the bucket of zero is
    skipped when ``zeros_apart`` says it holds zeros only (the dead channels of a ReLU network).
    """
    b, m = values.shape
    counts = np.unique(np.asarray(kept, dtype=np.int64))
    depth = int(counts[-1])
    cuts = counts[counts < m]  # where a segment ends and the next begins (the depth too, when below m)
    if cuts.size == 0:  # every K keeps the whole group: one segment, in any order
        return np.broadcast_to(np.arange(m, dtype=np.intp), (b, m)).copy()
    keys, shift, low = _index_keys(values)
    chain = m + int(cuts[1:].sum())
    if (m if depth < m else 0) + _SORT_COST * depth * depth.bit_length() < chain:
        if depth < m:
            keys.partition(depth, axis=1)
        keys[:, :depth].sort(axis=1)
        right, left = keys[:, cuts], keys[:, cuts - 1]
    else:
        right = np.empty((b, cuts.size), dtype=np.uint64)  # the smallest key right of each cut
        end = m
        for j in range(cuts.size - 1, -1, -1):  # the largest cut first, then within the part left of it
            keys[:, :end].partition(int(cuts[j]), axis=1)
            right[:, j] = keys[:, cuts[j]]
            end = int(cuts[j])
        starts = np.concatenate([[0], cuts[:-1]])  # the largest key left of cut j is in the segment ending there
        left = np.maximum.reduceat(keys[:, : cuts[-1]], starts, axis=1)
    bucket = right >> shift
    suspect = (left >> shift) == bucket
    if zeros_apart is None:
        zeros_apart = _zeros_apart(values, _ZERO_GAP_VALUES)
    if zeros_apart:
        suspect &= bucket != (_MAGNITUDE_BITS >> shift)
    rows, at = np.nonzero(suspect)
    wrong = (
        np.unique(rows[_misordered(values, keys, rows, cuts[at], bucket[rows, at], shift, low)]) if rows.size else rows
    )
    if np.dtype(np.intp).itemsize == 8:  # the components in place of the keys (no copy: the keys are not read again)
        segments = np.bitwise_and(keys[:, :depth], low, out=keys[:, :depth]).view(np.intp)
    else:
        segments = np.bitwise_and(keys[:, :depth], low).astype(np.intp)
    if wrong.size:
        segments[wrong] = np.argsort(-values[wrong], axis=1, kind="stable")[:, :depth]
    return segments


def _misordered(values: np.ndarray, keys: np.ndarray, rows: np.ndarray, cuts: np.ndarray, bucket: np.ndarray,
                shift: np.uint64, low: np.uint64) -> np.ndarray:  # fmt: skip
    """For each suspect cut (row ``rows[i]``, position ``cuts[i]``, shared bucket ``bucket[i]``): bool, whether a
    member of the bucket right of the cut has a larger value than one left of it (``max right > min left``; equal values
    are ordered by index, as the tie rule wants). Vectorized over the suspects, in blocks of bounded memory."""
    m = keys.shape[1]
    wrong = np.empty(rows.size, dtype=bool)
    step = max(1, CHUNK_ELEMENTS // m)
    for first in range(0, rows.size, step):
        part = slice(first, first + step)
        row_keys = keys[rows[part]]
        member = (row_keys >> shift) == bucket[part, None]
        left_of_cut = np.arange(m) < cuts[part, None]
        member_values = values[rows[part, None], (row_keys & low).astype(np.intp)]
        lowest_left = np.where(member & left_of_cut, member_values, np.inf).min(axis=1)
        highest_right = np.where(member & ~left_of_cut, member_values, -np.inf).max(axis=1)
        wrong[part] = highest_right > lowest_left
    return wrong


def _descending_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys, ascending as the float64 ``values`` descend, equal exactly where the values are equal.

    A non-negative float's bits below the sign are flipped (``bits ^ 0x7FFF...F``: larger values, smaller keys, all
    below ``2^63``), a negative float's bits are kept (more negative, larger keys, all from ``2^63``); ``-0.0`` is
    made ``+0.0`` first, so the two zeros are one value as they compare.
    """
    if not np.signbit(values).any():  # every value >= +0.0 (the usual case: |mean| scores, ReLU relevance)
        return np.bitwise_xor(values.view(np.uint64), _MAGNITUDE_BITS)
    keys = np.add(values, 0.0)  # a copy, with -0.0 made +0.0
    bits = keys.view(np.uint64)
    flip = bits >> np.uint64(63)
    flip ^= np.uint64(1)
    flip *= _MAGNITUDE_BITS
    bits ^= flip
    return bits


def entry_of_position(kept: np.ndarray, depth: int) -> np.ndarray:
    """``E [depth]``: the first position in the sorted K grid at which the component ranked ``p`` enters.

    Args:
        kept: int ``[nK]`` nondecreasing numbers of components kept at each sorted K.
        depth: positions needed (``kept.max()``).

    Returns:
        ``E[p] = #{j : kept_j <= p}`` (uint8, int16 for grids of 255+ values): position ``p`` is in the top-``kept_j``
        circuit iff ``p < kept_j``, so the component there first enters at ``E[p]``.
    """
    entry = np.searchsorted(kept, np.arange(depth), side="right")
    return entry.astype(np.uint8 if kept.size < 255 else np.int16)


def first_entry(values: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """First position in a sorted K grid at which each component enters its sample's top-K circuit.

    Args:
        values: float64 ``[b, m]`` dataset scores of one group for ``b`` samples.
        kept: int ``[nK]`` nondecreasing numbers of components kept at each sorted K.

    Returns:
        uint8 (int16 for grids of 255+ values) ``[b, m]`` with values in ``0..nK`` (``nK``: never): the component
        at position ``p`` of its sample's ranking (:func:`top_order`) enters at ``E[p]`` (:func:`entry_of_position`).
    """
    b, m = values.shape
    depth = int(min(m, kept.max()))
    entry_at = entry_of_position(kept, depth)
    entry = np.full((b, m), kept.size, dtype=entry_at.dtype)
    np.put_along_axis(entry, top_segments(values, np.minimum(kept, m)), entry_at[None, :], axis=1)
    return entry


#: Masks that keep at most this fraction of their entries are summed by a sparse product, which skips the deleted
#: rows (GPT-2's p_del = 0.95 keeps 5%); denser ones by the dense BLAS product. Speed only: both give the same floats.
SPARSE_KEEP = 0.1


def _sub_dataset_scores(scores: np.ndarray, masks: np.ndarray, absolute: bool) -> np.ndarray:
    """``A``'s dataset score for every mask: ``|eps @ S| / |eps|`` (float64, one matrix product).

    Args:
        scores: float ``[n_examples, U]`` (read as float64: pass float64 to skip the conversion).
        masks: bool ``[b, n_examples]``.
        absolute: take ``|.|`` of the mean.

    Returns:
        float64 ``[b, U]``. ``eps @ S`` adds a mask's kept rows of ``S`` one after the other in example order, from
        ``0.0``: OpenBLAS's dense kernel accumulates along the inner dimension in order (a deleted row adds ``0 * s``,
        which changes no sum), and scipy's CSR product adds the kept rows only, in the order of their indices. The two
        give the same floats (tested), so which one runs (:data:`SPARSE_KEEP`) changes no vote.
    """
    n_kept = masks.sum(axis=1)
    scores = np.asarray(scores, dtype=np.float64)
    if n_kept.sum() <= SPARSE_KEEP * masks.size:
        import scipy.sparse

        indptr = np.concatenate([[0], np.cumsum(n_kept)])
        kept = scipy.sparse.csr_matrix((np.ones(int(indptr[-1])), np.nonzero(masks)[1], indptr), shape=masks.shape)
        dataset_scores = np.asarray(kept @ scores)
    else:
        dataset_scores = masks.astype(np.float64) @ scores
    dataset_scores /= np.maximum(n_kept, 1)[:, None]
    if absolute:
        np.abs(dataset_scores, out=dataset_scores)
    return dataset_scores


def _entry_histogram(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    masks: np.ndarray,
    absolute: bool,
    chunk_size: int,
    weights: np.ndarray | None,
    kept_per_group: np.ndarray | None = None,
) -> np.ndarray:
    """``H [U, nK + 1]``: (weighted) number of samples in which ``u`` first enters at the j-th smallest K.

    Per chunk of samples: one matrix product gives every sample's dataset scores, :func:`top_segments` which
    components each sample ranks in each K's segment (in blocks of samples that fit the cache), and one ``bincount``
    of ``E[p] * m + component`` per group of ``m`` components (:func:`entry_of_position`) the histogram. A component
    ranked below every K's count never enters and is not counted: the last column (``nK``, "never") stays 0, and
    only the first ``nK`` columns are read. Empty
    sub-datasets give the empty circuit and contribute nothing. ``kept_per_group`` (int ``[nK, G]``,
    nondecreasing along K) replaces the counts of the sorted K grid (:func:`vote_counts_at_counts`).
    """
    index = GroupIndex.from_groups(groups)
    if kept_per_group is None:
        kept_per_group = count_table(np.sort(k_grid), index)  # [nK, G], nondecreasing along K
    n_k, n_components = kept_per_group.shape[0], scores.shape[1]
    # a nonzero float32 (or integer) is at least 2^-149 in magnitude: only float64 scores need the check
    low_precision = scores.dtype.kind in "biu" or (scores.dtype.kind == "f" and scores.dtype.itemsize <= 4)
    scores = np.asarray(scores, dtype=np.float64)  # once, not per chunk
    zeros_apart = low_precision or _zeros_apart(scores, _ZERO_GAP_SCORES)
    histogram = np.zeros((n_components, n_k + 1), dtype=np.float64 if weights is not None else np.int64)
    depths = [int(min(members.size, kept_per_group[:, g].max())) for g, members in enumerate(index.members)]
    # E[p] * m: the histogram is counted entry-major ([nK + 1, m] per group), so that the long runs of positions
    # with one entry (a K's segment of the ranking) add into one row of m counts, which stays in cache
    offsets = [
        entry_of_position(kept_per_group[:, g], depth).astype(np.intp) * members.size
        for g, (depth, members) in enumerate(zip(depths, index.members))
    ]
    # each group's columns: a slice where its members are consecutive (no copy), else its index array
    spans = [slice(int(mb[0]), int(mb[-1]) + 1) if mb[-1] - mb[0] + 1 == mb.size else mb for mb in index.members]
    counted = [np.zeros(mb.size * (n_k + 1), dtype=histogram.dtype) for mb in index.members]  # entry-major
    nonempty = np.flatnonzero(masks.any(axis=1))
    for start in range(0, nonempty.size, chunk_size):
        rows = nonempty[start : start + chunk_size]
        dataset_scores = _sub_dataset_scores(scores, masks[rows], absolute)
        for g, (members, columns) in enumerate(zip(index.members, spans)):
            local = dataset_scores[:, columns]  # a view for a group of consecutive components (vision layers)
            bins = np.empty((rows.size, depths[g]), dtype=np.intp)
            block = max(1, CHUNK_ELEMENTS // members.size)  # rankings of cache-sized blocks of samples
            for first in range(0, rows.size, block):  # [rows, depth]: positions past the largest K never enter
                segments = top_segments(local[first : first + block], kept_per_group[:, g], zeros_apart)
                np.add(segments, offsets[g][None, :], out=bins[first : first + block])  # E[p] * m + local component
            w = None if weights is None else np.repeat(weights[rows], depths[g])
            counted[g] += np.bincount(bins.ravel(), weights=w, minlength=counted[g].size)
    for g, columns in enumerate(spans):
        histogram[columns] = counted[g].reshape(n_k + 1, -1).T
    return histogram


def _counts_from_histogram(histogram: np.ndarray, k_grid: np.ndarray) -> np.ndarray:
    """Cumulate first-entry histograms into counts ``[nK, U]`` in the caller's K order."""
    n_k = k_grid.size
    counts_sorted = np.cumsum(histogram[:, :n_k], axis=1).T
    counts = np.empty_like(counts_sorted)
    counts[np.argsort(k_grid, kind="stable")] = counts_sorted
    return counts


def vote_counts(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    masks: np.ndarray,
    absolute: bool = False,
    chunk_size: int | None = None,
    *,
    device: "str | torch.device | None" = None,
    dtype: "torch.dtype | None" = None,
) -> np.ndarray:
    """Algorithm 2 (``Sample``), cached: inclusion counts of every component for every K.

    ``counts[k, u] = #{s : u in TopK_k(|eps_s @ S| / |eps_s|)}`` (per-group top-K, ties to the lower
    index, the empty sub-dataset voting for nothing).

    Args:
        scores: float ``[n_examples, U]`` cached per-example scores (numpy, or a torch tensor: on a GPU
            the counts are computed there).
        groups: int ``[U]``; top-K is taken within each group (vision: per layer; edges: one group).
        k_grid: top-K fractions in (0, 1], any order.
        masks: bool ``[n_samples, n_examples]`` deletion masks.
        absolute: rank by ``|mean score|`` (EAP-IG's convention for signed edge scores).
        chunk_size: samples processed at once (memory bound only; results do not depend on it);
            default :func:`default_chunk` (numpy) or as many as fit in device memory (torch).
        device: where to count and with which backend, see
            :func:`certified_circuits.core.devices.vote_device` (default: follow the scores; ``"cpu"``: numpy).
        dtype: torch path only: the dtype of the mask product (default float64, which matches the numpy
            path; float32 is faster on consumer GPUs and differs at near-ties within float32 rounding, or
            within TF32 rounding when ``torch.set_float32_matmul_precision`` allows TF32).

    Returns:
        int32 ``[len(k_grid), U]``: ``counts[k, u] = #{samples whose top-K circuit contains u}``, in the
        order of ``k_grid`` as given.
    """
    target = vote_device(scores, device)
    if target is not None:
        return vote_counts_torch(scores, groups, k_grid, masks, absolute, chunk_size, device=target, dtype=dtype)
    scores, groups, masks = _check_scores(scores, groups, masks)
    k_grid = check_k_grid(k_grid)
    chunk_size = default_chunk(scores.shape[1]) if chunk_size is None else check_count("chunk_size", chunk_size)
    histogram = _entry_histogram(scores, groups, k_grid, masks, absolute, chunk_size, None)
    return _counts_from_histogram(histogram, k_grid).astype(np.int32)


#: Peak bytes per (sample, component) of the torch path at float64: dataset scores, sorted values,
#: sort indices and histogram bins (8 bytes each) plus temporaries.
TORCH_BYTES_PER_ELEMENT = 48


def vote_counts_torch(scores: Any, groups: np.ndarray, k_grid: np.ndarray, masks: np.ndarray, absolute: bool = False,
                      chunk_size: int | None = None, *, device: "str | torch.device | None" = None,
                      dtype: "torch.dtype | None" = None) -> np.ndarray:  # fmt: skip
    """Algorithm 2 (``Sample``), cached, in torch on ``device``: the counts of :func:`vote_counts`.

    Per chunk of non-empty masks ``E`` (bool, drawn by numpy and moved to the device):
    ``X = (E @ S) / |E|`` (one matrix product in ``dtype``, default float64; ``|X|`` when
    ``absolute``); per group of ``m`` components a stable descending sort of each row gives the order
    (value descending, lower index first on ties); the component at position ``p`` enters at sorted
    K index ``E_g[p] = #{j : kept_j <= p}`` (``nK``: never); one ``bincount`` over
    ``component * (nK + 1) + E_g[p]`` accumulates the first-entry histogram ``H [U, nK + 1]``, and
    ``counts = cumsum(H[:, :nK])`` in the caller's K order.

    Args:
        scores: float ``[n_examples, U]``, numpy or torch (moved to ``device``).
        device: torch device (default: the scores' device, CPU for numpy scores).
        dtype: float dtype of the mask product (default ``torch.float64``).
        Others: as :func:`vote_counts`.

    Returns:
        int32 numpy ``[len(k_grid), U]``.
    """
    import torch

    from certified_circuits.core.devices import batch_from_memory

    if device is None:
        device = scores.device if _is_tensor(scores) else torch.device("cpu")
    device = torch.device(device)
    dtype = torch.float64 if dtype is None else dtype
    if not dtype.is_floating_point:
        raise ValueError(f"dtype={dtype} is invalid: the mask product needs a float dtype (torch.float64 or float32)")
    s = scores.detach() if _is_tensor(scores) else torch.as_tensor(np.asarray(scores))
    groups = _numpy(groups)
    masks = _numpy(masks)
    if s.ndim != 2:
        raise ValueError(f"scores must be 2-D [n_examples, n_components], got shape {tuple(s.shape)}")
    n_examples, n_components = s.shape
    if groups.shape != (n_components,):
        raise ValueError(
            f"groups has shape {groups.shape} but scores has {n_components} components: give one group id per component"
        )
    if masks.ndim != 2 or masks.shape[1] != n_examples:
        raise ValueError(
            f"masks have shape {masks.shape} but scores have {n_examples} examples: "
            "masks must be [n_samples, n_examples]"
        )
    if masks.dtype != bool:
        raise ValueError(f"masks must be boolean (True keeps an example), got dtype {masks.dtype}")
    k_grid = check_k_grid(k_grid)
    s = s.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(s).all()):
        raise ValueError("scores contain NaN or infinite values: recompute the attributions")

    k_sorted = np.sort(k_grid)
    n_k = k_sorted.size
    index = GroupIndex.from_groups(groups)
    kept = count_table(k_sorted, index)  # [nK, G], nondecreasing along K
    whole = len(index.members) == 1
    parts: list[
        tuple[torch.Tensor, torch.Tensor]
    ] = []  # per group: component ids [m] and the first-entry index of each sorted position [m]
    for g, members in enumerate(index.members):
        entry_at = np.searchsorted(kept[:, g], np.arange(members.size), side="right")  # #{j: kept_j <= p}
        parts.append((torch.as_tensor(members * (n_k + 1), device=device), torch.as_tensor(entry_at, device=device)))
    member_index = [torch.as_tensor(members, device=device) for members in index.members]

    rows = masks[masks.any(axis=1)]  # the empty sub-dataset gives the empty circuit: no votes
    histogram = torch.zeros(n_components * (n_k + 1), dtype=torch.int64, device=device)
    if rows.shape[0]:
        if chunk_size is None:
            chunk_size = batch_from_memory(
                device, TORCH_BYTES_PER_ELEMENT * n_components, cap=rows.shape[0], fraction=0.25
            )
        chunk_size = check_count("chunk_size", chunk_size)
        kept_masks = torch.as_tensor(rows, device=device)
        for start in range(0, rows.shape[0], chunk_size):
            chunk = kept_masks[start : start + chunk_size].to(dtype)
            dataset_scores = (chunk @ s) / chunk.sum(dim=1, keepdim=True)
            if absolute:
                dataset_scores.abs_()
            bins: list[torch.Tensor] = []
            for g, (offsets, entry_of_position) in enumerate(parts):
                local = dataset_scores if whole else dataset_scores.index_select(1, member_index[g])
                ranked = torch.sort(local, dim=1, descending=True, stable=True).indices
                bins.append((offsets[ranked] + entry_of_position).reshape(-1))
            histogram += torch.bincount(torch.cat(bins), minlength=histogram.numel())
    histogram_np = histogram.cpu().numpy().reshape(n_components, n_k + 1)
    return _counts_from_histogram(histogram_np, k_grid).astype(np.int32)


def vote_counts_at_counts(
    scores: np.ndarray, groups: np.ndarray, counts: np.ndarray, masks: np.ndarray, absolute: bool = False
) -> np.ndarray:
    """Algorithm 2 (``Sample``), cached, for a base algorithm with a size per group instead of a K fraction.

    ``votes[u] = #{s : u in Top_counts(|eps_s @ S| / |eps_s|)}`` where ``Top_counts`` keeps the top ``counts[g]``
    of each group (:func:`certified_circuits.core.discovery.top_count_circuit`; ties to the lower index, the empty
    sub-dataset voting for nothing). Used for circuits "at the truth's size" (issue 50): ``counts =
    group_counts(truth, index)`` gives exactly ``|T|`` components per sample. Any deterministic base algorithm can
    be certified (Theorem 1), so the certificate of these votes is as valid as the K grid's.

    Args:
        scores: float ``[n_examples, U]`` cached per-example scores.
        groups: int ``[U]`` top-K groups.
        counts: int ``[G]`` components kept per group, in sorted group-id order.
        masks: bool ``[n_samples, n_examples]`` deletion masks.
        absolute: rank by ``|mean score|``.

    Returns:
        int32 ``[U]``: the number of samples whose circuit contains each component.
    """
    scores, groups, masks = _check_scores(scores, groups, masks)
    index = GroupIndex.from_groups(groups)
    kept = check_group_counts(counts, index)
    # a group that keeps nothing gets a count of 1 in the histogram, and its votes are zeroed below
    one_row = np.maximum(kept, 1)[None, :]
    histogram = _entry_histogram(
        scores, groups, np.ones(1), masks, absolute, default_chunk(scores.shape[1]), None, one_row
    )
    votes = histogram[:, 0].astype(np.int32)
    for members, count in zip(index.members, kept):
        if count == 0:
            votes[members] = 0
    return votes


def inclusion_probabilities(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    masks: np.ndarray,
    weights: np.ndarray,
    absolute: bool = False,
) -> np.ndarray:
    """``sum_s weights[s] * A_u(D ⊙ eps_s)`` for every K: float64 ``[len(k_grid), U]``.

    With all ``2^|D|`` masks and ``weights = P(eps)`` this is the exact smoothed inclusion probability
    ``p_u(D)`` of Eq. (pv); used to verify Theorem 1 by enumeration on tiny datasets.
    """
    scores, groups, masks = _check_scores(scores, groups, masks)
    k_grid = check_k_grid(k_grid)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (masks.shape[0],):
        raise ValueError(f"weights has shape {weights.shape}, expected ({masks.shape[0]},): one weight per mask")
    histogram = _entry_histogram(scores, groups, k_grid, masks, absolute, default_chunk(scores.shape[1]), weights)
    return _counts_from_histogram(histogram, k_grid)


def full_dataset_circuits(
    scores: np.ndarray,
    groups: np.ndarray,
    k_grid: np.ndarray,
    absolute: bool = False,
    *,
    device: "str | torch.device | None" = None,
    dtype: "torch.dtype | None" = None,
) -> np.ndarray:
    """The baseline: A run once on the full dataset, bool ``[len(k_grid), U]`` (``device`` as :func:`vote_counts`)."""
    everything = np.ones((1, scores.shape[0]), dtype=bool)
    return vote_counts(scores, groups, k_grid, everything, absolute, device=device, dtype=dtype).astype(bool)


def vote_counts_naive(
    algorithm: Callable[[np.ndarray], np.ndarray], masks: np.ndarray, progress: bool = False
) -> np.ndarray:
    """Algorithm 2 (``Sample``), naive: run the base algorithm on every sub-dataset.

    Args:
        algorithm: maps the int indices of the kept examples to a bool circuit ``[..., U]`` (for
            example :class:`certified_circuits.core.discovery.TopKDiscovery`, or a callable that re-runs a
            model's attribution pass on the sub-dataset).
        masks: bool ``[n_samples, n_examples]``.
        progress: show a tqdm bar on stderr.

    Returns:
        int32 counts with the algorithm's output shape.
    """
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2 or masks.shape[0] == 0:
        raise ValueError(f"masks must be [n_samples >= 1, n_examples], got shape {masks.shape}")
    iterator = range(masks.shape[0])
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="naive sampling", unit="mask")
    counts: np.ndarray | None = None
    for s in iterator:
        circuit = np.asarray(algorithm(np.flatnonzero(masks[s])), dtype=bool)
        counts = circuit.astype(np.int64) if counts is None else counts + circuit
    assert counts is not None  # at least one mask (checked above)
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
    *,
    device: "str | torch.device | None" = None,
    dtype: "torch.dtype | None" = None,
) -> "Votes":
    """The votes stage: baseline circuits plus selection and certification counts (Algorithm 2, twice).

    The selection and certification masks are the two independent streams of
    :func:`selection_and_certification_masks`, drawn by numpy from ``seed`` whatever the device, so
    the votes do not depend on where they are counted. ``device``/``dtype``: see :func:`vote_counts`
    (default: follow the scores; ``"auto"`` counts on CUDA when available, ``"cpu"`` with numpy).
    """
    from certified_circuits.core.contracts import Votes

    k_grid = check_k_grid(k_grid)
    selection_masks, certification_masks = selection_and_certification_masks(scores.shape[0], n0, n, p_del, seed)
    on = vote_device(scores, device)
    if on is None:  # numpy counts ("cpu" included): on the host, so no later call follows a GPU tensor back
        scores = _numpy(scores)
    return Votes(
        k_grid=k_grid,
        baseline=full_dataset_circuits(scores, groups, k_grid, absolute, device=on, dtype=dtype),
        selection_counts=vote_counts(scores, groups, k_grid, selection_masks, absolute, device=on, dtype=dtype),
        certification_counts=vote_counts(scores, groups, k_grid, certification_masks, absolute, device=on, dtype=dtype),
        groups=_numpy(groups).astype(np.int32),
        attrs={
            "p_del": float(p_del),
            "n0": int(n0),
            "n": int(n),
            "seed": int(seed),
            "n_examples": int(scores.shape[0]),
            "absolute": bool(absolute),
            **(attrs or {}),
        },
    )


def mask_seed(seed: int, concept: str) -> int:
    """The seed of one concept's deletion masks: the first 64-bit word of ``SeedSequence([seed,
    h(concept)])``, with ``h`` the first 8 bytes of SHA-256 of the concept name.

    Every concept gets its own, independent mask draw from one config seed (reusing one draw for all
    classes would correlate their certificates), and the draw does not depend on which other concepts
    are certified or in what order. Its two children are the selection and certification streams.
    """
    import hashlib

    key = int.from_bytes(hashlib.sha256(concept.encode("utf-8")).digest()[:8], "little")
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1, dtype=np.uint64)[0])
