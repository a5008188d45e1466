"""Base circuit-discovery algorithms A: D -> {0,1}^|U| (paper Eq. circdisc).

Both base algorithms of the paper are *top-K over a dataset score*:

* vision (node level): per-layer top-K fraction of channels, the score of a channel on a dataset being
  the mean of its per-example scores (relevance, activation or rank);
* language (edge level, EAP-IG): global top-K fraction of edges ranked by ``|mean_i s_i(e)|``, the
  absolute value of the dataset's mean signed edge score (EAP-IG's top-n convention; never the mean of
  absolute values).

Because the dataset score is a mean of cached per-example rows ``S[i, u]``, the score of any
sub-dataset ``D ⊙ eps`` is ``eps @ S / |eps|``; this module holds the definition of A on one score
vector (the reference used by the naive path) and the conventions that make it deterministic:

K -> count per group
    A group of ``m`` components keeps ``k_count(K, m) = min(m, max(1, floor(K * m + 1/2)))``
    components: round half up, at least one, at most all. (``K * m`` is computed in float64, and a
    1e-9 guard absorbs representation error, so that K = 0.3 of 10 keeps 3, not 2.)
Ties
    Components with equal scores are ordered by index: the lower index wins.
Empty sub-dataset
    ``A(empty) = empty circuit``: no component is included. It stays in the smoothing distribution
    (probability ``p_del^|D|``) and is never resampled away.
Effective K
    The paper reports the *effective* size of a circuit as the fraction of components kept, averaged
    over groups (layers): :func:`effective_k`.
Ranking convention
    Every base algorithm names how it ranks a dataset score (:data:`RANKINGS`): ``signed`` (the mean
    score itself: the vision scorers) or ``absolute`` (``|mean|``: EAP-IG). The attribution file
    records it per score matrix (:func:`certified_circuits.storage.store.write_attributions`), and the
    votes stage reads it from there, so no rule or flag special-cases a scorer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certified_circuits.core.validation import check_k_grid

#: how a base algorithm ranks a component's dataset score: by its value, or by its absolute value
RANKINGS: tuple[str, ...] = ("signed", "absolute")


def check_ranking(ranking: str, where: str = "ranking") -> str:
    """A ranking convention, one of :data:`RANKINGS` (``ValueError`` naming ``where`` otherwise)."""
    if ranking not in RANKINGS:
        raise ValueError(
            f"{where}={ranking!r} is invalid: a base algorithm ranks 'signed' (mean score) or "
            "'absolute' (|mean score|, EAP-IG)"
        )
    return ranking


_ROUND_GUARD = 1e-9


@dataclass(frozen=True)
class GroupIndex:
    """Components partitioned into top-K groups.

    ``labels`` are the distinct group ids (sorted), ``members[g]`` the component indices of group
    ``labels[g]`` in increasing order, ``sizes[g]`` their number.
    """

    labels: np.ndarray
    members: tuple[np.ndarray, ...]
    sizes: np.ndarray

    @classmethod
    def from_groups(cls, groups: np.ndarray) -> "GroupIndex":
        groups = np.asarray(groups)
        if groups.ndim != 1 or groups.size == 0:
            raise ValueError(f"groups must be a non-empty 1-D array of group ids, got shape {groups.shape}")
        if not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(f"groups must hold integer group ids, got dtype {groups.dtype}")
        labels, inverse = np.unique(groups, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        sizes = np.bincount(inverse, minlength=labels.size)
        members = tuple(np.split(order, np.cumsum(sizes)[:-1]))
        return cls(labels=labels, members=members, sizes=sizes)


def k_index(k_grid: np.ndarray, k_target: float, where: str) -> int:
    """Position of ``k_target`` in ``k_grid`` (compared with ``np.isclose``: grids come from files and configs).

    Raises:
        ValueError: ``k_target`` is not in the grid; the message names ``where`` and the grid.
    """
    matches = np.flatnonzero(np.isclose(np.asarray(k_grid, dtype=np.float64), k_target))
    if matches.size == 0:
        raise ValueError(f"{where}: K = {k_target} is not in its K grid {np.asarray(k_grid).tolist()}")
    return int(matches[0])


def k_count(k: float | np.ndarray, group_size: int | np.ndarray) -> np.ndarray:
    """Number of components a group of ``group_size`` keeps at top-K fraction ``k``.

    ``min(m, max(1, floor(k * m + 1/2)))``, elementwise with broadcasting.
    """
    k = np.asarray(k, dtype=np.float64)
    m = np.asarray(group_size, dtype=np.int64)
    counts = np.floor(k * m + 0.5 + _ROUND_GUARD).astype(np.int64)
    return np.minimum(m, np.maximum(1, counts))


def count_table(k_grid: np.ndarray, index: GroupIndex) -> np.ndarray:
    """``int64 [len(k_grid), n_groups]``: components kept per group for every K of the grid."""
    k = check_k_grid(k_grid)
    return k_count(k[:, None], index.sizes[None, :])


def group_counts(mask: np.ndarray, index: GroupIndex) -> np.ndarray:
    """``int64 [G]``: how many components of a bool ``[U]`` mask lie in each group (``index.labels`` order).

    The per-group size of a circuit, e.g. of a ground truth: :func:`top_count_circuit` with these counts keeps exactly
    ``mask.sum()`` components, as many per group as ``mask`` has there ("a circuit at the truth's size").
    """
    mask = np.asarray(mask, dtype=bool)
    total = int(sum(m.size for m in index.members))
    if mask.shape != (total,):
        raise ValueError(f"mask has shape {mask.shape}, expected ({total},): one entry per component")
    return np.array([int(mask[members].sum()) for members in index.members], dtype=np.int64)


def check_group_counts(counts: np.ndarray, index: GroupIndex) -> np.ndarray:
    """``counts`` as int64 ``[G]`` with ``0 <= counts[g] <= |group g|`` and at least one component in all.

    Raises:
        ValueError: a wrong shape, a non-integer, a negative count, more than a group holds, or all zero.
    """
    raw = np.asarray(counts)
    if raw.shape != index.sizes.shape or not np.issubdtype(raw.dtype, np.integer):
        raise ValueError(
            f"counts must be {index.sizes.size} integers (one per top-K group, in sorted group-id order), got "
            f"shape {raw.shape} dtype {raw.dtype}"
        )
    counts = raw.astype(np.int64)
    if (counts < 0).any() or (counts > index.sizes).any() or counts.sum() == 0:
        raise ValueError(
            f"counts {counts.tolist()} must lie in 0..{index.sizes.tolist()} per group and keep at least one component"
        )
    return counts


def top_count_circuit(dataset_score: np.ndarray, groups: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The base algorithm with a size per group: the top ``counts[g]`` components of each group ``g``.

    :func:`top_k_circuit` is this with ``counts = k_count(k, |group|)``; a circuit "at the truth's size" (issue 50)
    uses ``counts = group_counts(truth, index)``, so it has exactly ``|T|`` components and as many per group as the
    truth (the top-K groups of the vision base algorithm are layers).

    Args:
        dataset_score: float ``[U]``, the dataset-level score of each component (already made absolute where the
            ranking is absolute).
        groups: int ``[U]`` group id per component.
        counts: int ``[G]`` components kept per group, in sorted group-id order (:func:`group_counts`).

    Returns:
        bool ``[U]``: the circuit. Ties go to the lower component index.
    """
    return top_count_rows(np.asarray(dataset_score, dtype=np.float64)[None, :], groups, counts)[0]


def top_count_rows(values: np.ndarray, groups: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`top_count_circuit` of every row of ``values`` at once (bootstrap resamples, samples).

    Args:
        values: float ``[B, U]`` dataset scores.
        groups: int ``[U]``.
        counts: int ``[G]`` kept per group (sorted group-id order).

    Returns:
        bool ``[B, U]``; ties go to the lower component index.
    """
    values = np.asarray(values, dtype=np.float64)
    index = GroupIndex.from_groups(groups)
    kept = check_group_counts(counts, index)
    circuits = np.zeros(values.shape, dtype=bool)
    rows = np.arange(values.shape[0])[:, None]
    for members, count in zip(index.members, kept):
        if count:
            order = np.argsort(-values[:, members], axis=1, kind="stable")[:, :count]
            circuits[rows, members[order]] = True
    return circuits


def top_k_circuit(dataset_score: np.ndarray, groups: np.ndarray, k: float) -> np.ndarray:
    """Reference base algorithm: top-K fraction per group of one score vector.

    Args:
        dataset_score: float ``[U]``, the dataset-level score of each component (already averaged, and
            already made absolute for EAP-IG edges).
        groups: int ``[U]`` group id per component (all equal for a global top-K).
        k: fraction in (0, 1].

    Returns:
        bool ``[U]``: the circuit. Ties go to the lower component index.
    """
    index = GroupIndex.from_groups(groups)
    return top_count_circuit(dataset_score, groups, k_count(check_k_grid([k])[0], index.sizes))


@dataclass(frozen=True)
class TopKDiscovery:
    """The paper's base algorithm A as a callable over a sub-dataset, for the naive path.

    ``TopKDiscovery(scores, groups, k_grid, absolute)(kept)`` averages the rows ``scores[kept]``
    (``kept``: int indices of the examples the deletion mask keeps), optionally takes the absolute
    value, and returns bool ``[len(k_grid), U]``: the top-K circuit for every K. The empty
    sub-dataset gives the empty circuit.
    """

    scores: np.ndarray
    groups: np.ndarray
    k_grid: np.ndarray
    absolute: bool = False

    def __call__(self, kept: np.ndarray) -> np.ndarray:
        k_grid = check_k_grid(self.k_grid)
        n_components = self.scores.shape[1]
        if len(kept) == 0:
            return np.zeros((k_grid.size, n_components), dtype=bool)
        subset = np.asarray(self.scores, dtype=np.float64)[kept]
        dataset_score = subset.sum(axis=0) / len(kept)
        if self.absolute:
            dataset_score = np.abs(dataset_score)
        return np.stack([top_k_circuit(dataset_score, self.groups, k) for k in k_grid])


def effective_k(masks: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Effective K of circuits: the fraction of components kept, averaged over groups (layers).

    Args:
        masks: bool ``[..., U]`` circuits.
        groups: int ``[U]``.

    Returns:
        float64 ``[...]``. With one group this is the plain kept fraction.
    """
    masks = np.asarray(masks, dtype=bool)
    index = GroupIndex.from_groups(groups)
    if masks.shape[-1] != groups.shape[0]:
        raise ValueError(f"masks have {masks.shape[-1]} components but groups has {groups.shape[0]}")
    fractions = [masks[..., members].mean(axis=-1) for members in index.members]
    return np.mean(np.stack(fractions, axis=-1), axis=-1)
