"""The dataset-edit engine: edit the concept dataset and watch the certificates (Theorem 1).

Its report (summary table, figure, files) is :mod:`certified_circuits.reports.attack`.

Theorem 1 (Certified Circuit Robustness) says: with confidence at least ``1 - alpha``, every component
``u`` that Algorithm 1 certifies on ``D`` (``Ã^τ_u(D) ∈ {0, 1}``) keeps that label for *every* dataset
``D'`` within edit distance ``r = floor(log(1.5 - tau) / log p_del)`` of ``D`` (insertions, deletions and
substitutions of examples). This module makes such ``D'`` and re-runs the whole pipeline on them.

Edits (on the cached per-example scores ``S [|D|, U]``; a row is an example)
    * ``insert``: append ``r`` rows of a *pool* of candidate examples of the same concept (their scores
      for the same class/task, e.g. an OOD re-discovery split's attribution file);
    * ``delete``: remove ``r`` rows (the others keep their order);
    * ``substitute``: replace ``r`` rows in place by pool rows.
    Random edits (:func:`edit_dataset`) draw positions and pool rows uniformly without replacement
    (insertions draw with replacement only when the pool has fewer than ``r`` rows: inserting the same
    example twice is a legitimate edit). Adversarial edits (:func:`adversarial_edit`) are greedy.

Greedy adversary (:func:`adversarial_edit`)
    It attacks the *baseline* circuit ``A(D)`` (the base algorithm on the full dataset, per-group top-K
    of the mean score, :func:`certified_circuits.core.smoothing.full_dataset_circuits`). The dataset score is
    a mean, so every candidate edit is a rank-one update of the current sum ``s = sum_i S_i`` over the
    current ``m`` rows: deleting row ``i`` gives ``(s - S_i) / (m - 1)``, inserting pool row ``c`` gives
    ``(s + P_c) / (m + 1)``. All candidates of a step form one matrix ``[n_candidates, U]``; its top-K
    circuits come from the same vectorised top-K code as the vote counts
    (:func:`certified_circuits.core.smoothing.first_entry`, with the K -> count rule of
    :func:`certified_circuits.core.discovery.count_table`; ties to the lower index), so no Python loop runs
    over candidates or components, only over the greedy steps and the top-K groups. The step takes the
    candidate that maximises the number of components whose membership differs from ``A(D)``; ties
    (e.g. when no single edit flips anything yet) go to the smallest *boundary gap*
    ``sum_g [min_{u ∈ A_g(D)} v_u - max_{u ∈ g \\ A_g(D)} v_u]`` (``v`` the candidate's dataset score:
    how close the weakest original member is to being overtaken), then to the lower candidate index. A
    substitution step is a greedy deletion followed by a greedy insertion at the freed position (the
    joint choice over all (row, pool row) pairs would cost ``|D| * |pool| * U`` memory).

Re-running the pipeline on ``D'``
    The edited dataset is certified exactly as the workflow certifies a dataset: the same ``k_grid``,
    ``p_del``, ``n0``, ``n``, mask ``seed``, ``tau``, ``alpha``, correction and ``absolute``
    (:func:`~certified_circuits.core.smoothing.compute_votes` then
    :func:`~certified_circuits.core.certification.certify_votes`). Insertions and deletions change ``|D|``;
    the masks of ``D'`` are drawn from the same seed for the new ``|D'|`` (a ``[n, |D'|]`` draw), which is
    what re-running the pipeline on the edited dataset does. Theorem 1 is about the smoothed
    probabilities, not about one mask draw, so the guarantee does not depend on this choice.

What is reported, per K, edit, mode and multiple of ``r`` (:func:`attack_rows`)
    * ``baseline_flip_share``: share of all components whose baseline membership flips (in <-> out);
    * ``certified_flip_share``: share of the components certified on ``D`` (in or out) that are
      certified with the *opposite* label on ``D'``. Moving to abstain is not a flip;
    * ``abstain_share``: share of the components certified on ``D`` that abstain on ``D'``.

What Theorem 1 bounds
    Within ``r`` edits a certified flip needs a failed test: if the certification of ``D`` is right
    (probability ``>= 1 - alpha``, family-wise), the true smoothed label of ``u`` on ``D'`` is still
    ``c_u`` (RS-Del), i.e. ``p_{u, 1 - c_u}(D') < 1/2 <= tau``, so certifying ``1 - c_u`` on ``D'`` is a
    false rejection of the test on ``D'`` (probability ``<= alpha``). Hence, per run,
    ``P[any certified flip] <= 2 alpha`` (each of the two Monte Carlo certifications fails with
    probability at most ``alpha``), and the expected number of flipped components is at most ``2 alpha``
    (Bonferroni: ``alpha / |U|`` per component and run). In practice a flip needs a *gross* test error
    (a label certified at ``tau`` whose true probability is below one half), so within ``r`` the
    observed share is 0 and stays far below ``alpha``. Beyond ``r`` nothing is guaranteed and the
    tables show how fast (or slowly) the certificates degrade, against the baseline circuit.

Radius 0
    When ``r = 0`` (e.g. ``tau`` too small for ``p_del``), the multiples are multiples of one edit
    instead, and the ``unit`` column says so; no row is then within the radius.
"""

from __future__ import annotations

import logging
import zlib
from typing import Sequence

import numpy as np

from certified_circuits.core.certification import certified_radius, certify_votes
from certified_circuits.core.discovery import GroupIndex, count_table
from certified_circuits.core.smoothing import compute_votes, first_entry, full_dataset_circuits
from certified_circuits.core.validation import check_alpha, check_count, check_k_grid

log = logging.getLogger(__name__)

KINDS = ("insert", "delete", "substitute")
MODES = ("random", "adversarial")

#: keys of the rows of :func:`attack_rows`, in table order
COLUMNS = (
    "edit",
    "mode",
    "trial",
    "r_multiple",
    "radius",
    "unit",
    "r_edits",
    "within_radius",
    "k_target",
    "n_examples",
    "n_examples_edited",
    "n_components",
    "baseline_flips",
    "baseline_flip_share",
    "n_certified",
    "certified_flips",
    "certified_flip_share",
    "abstained",
    "abstain_share",
    "any_certified_flip",
)


# --------------------------------------------------------------------------------------------------
# checks


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"edit kind {kind!r} is invalid: choose one of {KINDS}")
    return kind


def _check_inputs(
    scores: np.ndarray, pool: np.ndarray, groups: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    scores, pool = np.asarray(scores), np.asarray(pool)
    if scores.ndim != 2 or scores.shape[0] < 1:
        raise ValueError(f"scores must be a non-empty 2-D [n_examples, n_components] array, got shape {scores.shape}")
    if pool.ndim != 2 or pool.shape[1] != scores.shape[1]:
        raise ValueError(
            f"pool has shape {pool.shape} but scores have {scores.shape[1]} components: the pool must be scored "
            "for the same components (an attribution file of the same concept and model)"
        )
    if groups is not None and np.shape(groups) != (scores.shape[1],):
        raise ValueError(f"groups has shape {np.shape(groups)}, expected ({scores.shape[1]},)")
    for name, value in (("scores", scores), ("pool", pool)):
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name} contain NaN or infinite values: recompute the attributions")
    return scores, pool


def _check_feasible(kind: str, r: int, n_examples: int, n_pool: int) -> None:
    if kind == "delete" and r >= n_examples:
        raise ValueError(f"cannot delete {r} of {n_examples} examples: at least one example must remain")
    if kind == "substitute" and r > n_examples:
        raise ValueError(f"cannot substitute {r} of {n_examples} examples: at most |D| positions can change")
    if kind in ("insert", "substitute") and r > 0 and n_pool == 0:
        raise ValueError(f"{kind} needs candidate examples, but the pool is empty")


def feasible(kind: str, r: int, n_examples: int, n_pool: int) -> bool:
    """Whether ``r`` edits of ``kind`` can be made to a dataset of ``n_examples`` rows with this pool."""
    try:
        _check_feasible(kind, r, n_examples, n_pool)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# random edits


def edit_dataset(scores: np.ndarray, pool: np.ndarray, kind: str, r: int, rng: np.random.Generator) -> np.ndarray:
    """``r`` random edits of one kind: the edited score matrix.

    Args:
        scores: ``[|D|, U]`` per-example scores of the concept dataset.
        pool: ``[P, U]`` scores of candidate examples (same components, same class/task).
        kind: ``"insert"`` (append ``r`` pool rows, drawn without replacement when ``P >= r``, else with
            replacement), ``"delete"`` (remove ``r`` distinct rows; the others keep their order; ``r <
            |D|``) or ``"substitute"`` (replace ``r`` distinct rows in place by ``r`` pool rows drawn as
            for insertion; ``r <= |D|``).
        r: number of edits (edit distance of the result to ``D``: at most ``r``).
        rng: numpy Generator (seeded by the caller).

    Returns:
        ``[|D| + r, U]``, ``[|D| - r, U]`` or ``[|D|, U]`` (a copy; ``r = 0`` gives ``scores`` unchanged).
    """
    scores, pool = _check_inputs(scores, pool)
    kind = _check_kind(kind)
    r = check_count("r", r, minimum=0)
    n_examples, n_pool = scores.shape[0], pool.shape[0]
    _check_feasible(kind, r, n_examples, n_pool)
    dtype = np.result_type(scores, pool)
    edited = scores.astype(dtype, copy=True)
    if r == 0:
        return edited
    if kind == "delete":
        removed = rng.choice(n_examples, size=r, replace=False)
        return np.delete(edited, removed, axis=0)
    drawn = pool[rng.choice(n_pool, size=r, replace=r > n_pool)]
    if kind == "insert":
        return np.concatenate([edited, drawn.astype(dtype)], axis=0)
    positions = rng.choice(n_examples, size=r, replace=False)
    edited[positions] = drawn
    return edited


# --------------------------------------------------------------------------------------------------
# greedy adversary


def top_k_rows(values: np.ndarray, index: GroupIndex, kept: np.ndarray) -> np.ndarray:
    """Per-group top-K circuit of every row of ``values`` ([C, U] dataset scores), bool ``[C, U]``.

    The vote-counting code's top-K (:func:`certified_circuits.core.smoothing.first_entry` with one K: entry
    0 means "in"), so ties and the K -> count rule are exactly those of the pipeline.
    """
    circuits = np.empty(values.shape, dtype=bool)
    for g, members in enumerate(index.members):
        local = np.ascontiguousarray(values[:, members])
        circuits[:, members] = first_entry(local, kept[g : g + 1]) == 0
    return circuits


def _boundary_gap(values: np.ndarray, base: np.ndarray, index: GroupIndex) -> np.ndarray:
    """``sum_g [min over A_g(D) of v - max over the rest of g of v]`` per row (groups all in or all out: 0)."""
    gap = np.zeros(values.shape[0], dtype=np.float64)
    for members in index.members:
        inside = base[members]
        if inside.all() or not inside.any():
            continue
        local = values[:, members]
        gap += local[:, inside].min(axis=1) - local[:, ~inside].max(axis=1)
    return gap


class _Greedy:
    """Greedy edits against the baseline circuit at one K; the dataset is an index array into ``[S; P]``."""

    def __init__(self, scores: np.ndarray, pool: np.ndarray, groups: np.ndarray, k: float, absolute: bool):
        self.n_examples = scores.shape[0]
        self.pool = np.asarray(pool, dtype=np.float64)
        self.stacked = np.concatenate([np.asarray(scores, dtype=np.float64), self.pool], axis=0)
        self.index = GroupIndex.from_groups(np.asarray(groups))
        self.kept = count_table(check_k_grid([k]), self.index)[0]
        self.absolute = absolute
        self.base = full_dataset_circuits(scores, groups, np.array([k]), absolute)[0]

    def _best(self, values: np.ndarray) -> int:
        """Candidate (row of ``values``, its dataset means) with the most flips, then the smallest gap."""
        if self.absolute:
            values = np.abs(values)
        flips = (top_k_rows(values, self.index, self.kept) != self.base[None, :]).sum(axis=1)
        gap = _boundary_gap(values, self.base, self.index)
        return int(np.lexsort((np.arange(values.shape[0]), gap, -flips))[0])

    def best_deletion(self, source: np.ndarray) -> int:
        rows = self.stacked[source]
        total = rows.sum(axis=0)
        return self._best((total[None, :] - rows) / (source.size - 1))

    def best_insertion(self, source: np.ndarray) -> int:
        total = self.stacked[source].sum(axis=0)
        return self._best((total[None, :] + self.pool) / (source.size + 1))

    def path(self, kind: str, steps: int) -> list[np.ndarray]:
        """The dataset (as indices into ``[S; P]``) after 0, 1, ..., ``steps`` greedy edits."""
        source = np.arange(self.n_examples)
        path = [source]
        for _ in range(steps):
            if kind == "delete":
                source = np.delete(source, self.best_deletion(source))
            elif kind == "insert":
                source = np.append(source, self.n_examples + self.best_insertion(source))
            else:  # substitute: greedy deletion, then greedy insertion at the freed position
                position = self.best_deletion(source)
                rest = np.delete(source, position)
                source = np.insert(rest, position, self.n_examples + self.best_insertion(rest))
            path.append(source)
        return path

    def rows(self, source: np.ndarray, dtype) -> np.ndarray:
        return self.stacked[source].astype(dtype)


def adversarial_edit(
    scores: np.ndarray, pool: np.ndarray, groups: np.ndarray, k: float, r: int, kind: str, absolute: bool = False
) -> np.ndarray:
    """``r`` greedy edits of one kind that change the baseline circuit ``A(D)`` at top-K fraction ``k`` most.

    Each step evaluates every candidate at once (every current row for a deletion, every pool row for
    an insertion; the new mean is a rank-one update of the current sum) and keeps the one whose
    baseline circuit differs from ``A(D)`` in the most components (ties: smallest boundary gap, then
    lower index; see the module docstring). ``absolute`` ranks by ``|mean|`` as the base algorithm does.
    A substitution step is a greedy deletion then a greedy insertion at the same position. Insertions
    may use a pool row more than once. Returns the edited ``[|D'|, U]`` score matrix.
    """
    scores, pool = _check_inputs(scores, pool, groups)
    kind = _check_kind(kind)
    r = check_count("r", r, minimum=0)
    _check_feasible(kind, r, scores.shape[0], pool.shape[0])
    greedy = _Greedy(scores, pool, groups, k, absolute)
    return greedy.rows(greedy.path(kind, r)[-1], np.result_type(scores, pool))


# --------------------------------------------------------------------------------------------------
# the attack table


def _certify(scores, groups, k_grid, *, p_del, n0, n, seed, tau, alpha, correction, absolute):
    """Baseline circuits ``[nK, U]`` and certified decisions ``[nK, U]`` of one dataset (the pipeline)."""
    votes = compute_votes(np.asarray(scores), groups, k_grid, p_del, n0, n, seed, absolute=absolute)
    return votes.baseline, certify_votes(votes, tau, alpha, correction).decision


def _compare(base0: np.ndarray, dec0: np.ndarray, base1: np.ndarray, dec1: np.ndarray) -> dict:
    """Flip counts and shares between the pipeline's outputs on ``D`` (0) and ``D'`` (1) at one K."""
    certified = dec0 >= 0
    flipped = certified & (dec1 >= 0) & (dec1 != dec0)
    abstained = certified & (dec1 < 0)
    n_certified = int(certified.sum())
    baseline_flips = int((base0 != base1).sum())
    return {
        "n_components": int(base0.size),
        "baseline_flips": baseline_flips,
        "baseline_flip_share": baseline_flips / base0.size,
        "n_certified": n_certified,
        "certified_flips": int(flipped.sum()),
        "certified_flip_share": flipped.sum() / n_certified if n_certified else np.nan,
        "abstained": int(abstained.sum()),
        "abstain_share": abstained.sum() / n_certified if n_certified else np.nan,
        "any_certified_flip": bool(flipped.any()),
    }


def _edit_seed(attack_seed: int, kind: str, multiple: int, trial: int) -> np.random.Generator:
    """The random-edit generator of one (kind, multiple, trial): independent of which others are run."""
    return np.random.default_rng([int(attack_seed), zlib.crc32(kind.encode()), int(multiple), int(trial)])


def attack_rows(
    scores: np.ndarray,
    pool: np.ndarray,
    groups: np.ndarray,
    k_grid: Sequence[float],
    *,
    p_del: float,
    n0: int,
    n: int,
    seed: int,
    tau: float,
    alpha: float,
    correction: str = "bonferroni",
    absolute: bool = False,
    multiples: Sequence[int] = (1, 2, 4),
    kinds: Sequence[str] = KINDS,
    modes: Sequence[str] = MODES,
    n_trials: int = 1,
    attack_seed: int = 0,
) -> list[dict]:
    """Edit ``D`` by multiples of the certified radius and compare the pipeline's outputs (Theorem 1).

    ``D`` is certified once (``compute_votes`` with mask ``seed``, then ``certify_votes``). For every
    edit kind and multiple ``j`` of ``r = certified_radius(tau, p_del)`` (of one edit when ``r = 0``),
    the edited dataset ``D'`` is certified with the same settings and seed and compared with ``D`` at
    every K:

    * random mode: ``n_trials`` independent draws of :func:`edit_dataset` (generator seeded from
      ``(attack_seed, kind, j, trial)``); one ``D'`` serves the whole K grid;
    * adversarial mode: :func:`adversarial_edit` against the baseline circuit at each K (one ``D'`` per
      K, deterministic: ``trial`` 0). The greedy path is computed once up to the largest multiple.

    Edits that cannot be made (deleting ``|D|`` or more rows, substituting more than ``|D|``) are skipped
    with a warning in the log.

    Returns:
        tidy rows (dicts), one per (edit, mode, trial, r_multiple, k_target), keys :data:`COLUMNS`:
        ``radius`` (r), ``unit`` (``"r"``, or ``"1 edit (r = 0)"``), ``r_edits`` (edits made),
        ``within_radius`` (``r_edits <= r``), the dataset sizes, and the flip counts and shares
        (``certified_flip_share`` and ``abstain_share`` are over the components certified on ``D``,
        NaN when none is).
    """
    scores, pool = _check_inputs(scores, pool, groups)
    groups = np.asarray(groups)
    grid = check_k_grid(k_grid)
    alpha = check_alpha(alpha)
    n_trials = check_count("n_trials", n_trials)
    multiples = [check_count("r_multiple", j) for j in multiples]
    kinds = [_check_kind(kind) for kind in kinds]
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is invalid: choose from {MODES}")
    if not multiples or not kinds or not modes:
        raise ValueError("give at least one multiple, one edit kind and one mode")
    settings = dict(p_del=p_del, n0=n0, n=n, seed=seed, tau=tau, alpha=alpha, correction=correction, absolute=absolute)
    radius = certified_radius(tau, p_del)
    unit_edits, unit = (radius, "r") if radius > 0 else (1, "1 edit (r = 0)")
    n_examples, n_pool = scores.shape[0], pool.shape[0]
    dtype = np.result_type(scores, pool)
    base0, dec0 = _certify(scores, groups, grid, **settings)

    rows: list[dict] = []

    def record(kind, mode, trial, multiple, edited, j, base1, dec1):
        """One row at K = grid[j]; ``base1``/``dec1`` are the edited dataset's outputs at that K."""
        rows.append(
            {
                "edit": kind,
                "mode": mode,
                "trial": trial,
                "r_multiple": multiple,
                "radius": radius,
                "unit": unit,
                "r_edits": multiple * unit_edits,
                "within_radius": multiple * unit_edits <= radius,
                "k_target": float(grid[j]),
                "n_examples": n_examples,
                "n_examples_edited": int(edited.shape[0]),
                **_compare(base0[j], dec0[j], base1, dec1),
            }
        )

    for kind in kinds:
        possible = [j for j in multiples if feasible(kind, j * unit_edits, n_examples, n_pool)]
        for j in sorted(set(multiples) - set(possible)):
            log.warning(
                "skipping %d %s edits (%d x %s): |D| = %d, pool = %d", j * unit_edits, kind, j, unit, n_examples, n_pool
            )
        if not possible:
            continue
        if "random" in modes:
            for multiple in possible:
                for trial in range(n_trials):
                    rng = _edit_seed(attack_seed, kind, multiple, trial)
                    edited = edit_dataset(scores, pool, kind, multiple * unit_edits, rng)
                    base1, dec1 = _certify(edited, groups, grid, **settings)
                    for j in range(grid.size):
                        record(kind, "random", trial, multiple, edited, j, base1[j], dec1[j])
        if "adversarial" in modes:
            for j, k in enumerate(grid):
                greedy = _Greedy(scores, pool, groups, float(k), absolute)
                path = greedy.path(kind, max(possible) * unit_edits)
                for multiple in possible:
                    edited = greedy.rows(path[multiple * unit_edits], dtype)
                    # votes and decisions at one K do not depend on the rest of the grid (same masks,
                    # correction over the components of that K): certify this K only
                    base1, dec1 = _certify(edited, groups, [k], **settings)
                    record(kind, "adversarial", 0, multiple, edited, j, base1[0], dec1[0])
    return rows
