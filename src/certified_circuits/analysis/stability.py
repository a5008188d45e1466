"""Stability of circuits under bootstrap resampling of the concept dataset (docs/embedded_default.md).

Wu, Tonin and Cevher (2026) show that EAP-IG circuits change when the prompt set is resampled, and measure it
with bootstrap resamples of D and the Jaccard similarity of the circuits. This module measures it the same way
for the baseline circuit and for the certified labels, so the two can be compared on one footing:

Resamples
    ``B`` bootstrap resamples of the ``|D|`` examples: ``indices[b]`` holds ``|D|`` example indices drawn
    uniformly with replacement by ``numpy.random.default_rng(seed)`` (:func:`bootstrap_indices`).
Circuits of a resample
    The resampled scores ``S_b = S[indices[b]]`` (a repeated example counts as often as it is drawn) go
    through the workflow's own path: :func:`certified_circuits.core.smoothing.compute_votes` (the baseline is
    the top-K of the mean score, ranking and tie rule of :mod:`certified_circuits.core.discovery`; the votes
    are the masked means of ``S_b``) and :func:`certified_circuits.core.certification.certify_votes` (the
    binomial test of Algorithm 1). The setting, and so the mask seed, is the same for every resample: only
    the data changes. The plan of ``(|D|, U, setting)`` is checked once before any work.
Per K, over the ``B`` resamples (``P = B (B - 1) / 2`` pairs ``b < c``):
    - ``baseline_jaccard``: ``J(A(S_b), A(S))``, the resampled baseline circuit against the full-data one
      (mean, standard deviation, 5% and 95% quantiles);
    - ``baseline_pairwise_jaccard``: mean over pairs of ``J(A(S_b), A(S_c))``, the reference for the next;
    - ``certified_in_jaccard``: mean over pairs of ``J(IN_b, IN_c)`` over the pairs where at least one set is
      non-empty (the Jaccard of two empty sets is undefined); ``certified_in_both_empty_share`` is the share of
      pairs where both are empty (NaN Jaccard when every pair is), so "nothing certified" is visible, not 1;
    - ``certified_change_share``: the mean over pairs of the fraction of components whose label
      (in / out / abstain) differs: ``sum_u [P - sum_l C(n_l(u), 2)] / (P U)`` with ``n_l(u)`` the number of
      resamples labelling ``u`` with ``l``;
    - ``certified_flip_share``: the same for in <-> out flips only, ``sum_u n_in(u) n_out(u) / (P U)``: what
      the certificate is about (an abstention is not a wrong label);
    - ``baseline_change_share``: the same for baseline membership, ``sum_u n(u) (B - n(u)) / (P U)``;
    - ``certified_in_share``, ``certified_out_share``, ``abstain_share``: mean label fractions over resamples.
With a ground truth (bool ``[U]``), per K: the mean over resamples of the baseline's and the certified-in
circuit's precision and recall (precision over the resamples whose circuit is non-empty;
``certified_in_empty_share`` says how many were empty).

Counts over pairs use the label histograms, so the pairwise shares cost ``O(B nK U)``; Jaccards over pairs are one
batched matrix product ``[nK, B, U] @ [nK, U, B]``. The only loop is over the ``B`` resamples' vote counts (each
one vectorized over masks, components and K, as the votes stage).

:func:`concept_stability` is the ``stability`` stage's result: one concept's attribution file through
:func:`stability`, labelled with its experiment, concept, scorer and setting (one row per K).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from certified_circuits.analysis.recovery import confusion, rates, read_ground_truth, truth_mask
from certified_circuits.core.certification import certified_radius, certify_votes_setting
from certified_circuits.core.contracts import ABSTAIN, IN, OUT
from certified_circuits.core.planning import check_plan, plan
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import compute_votes, full_dataset_circuits
from certified_circuits.core.validation import check_count, check_k_grid

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: fewest resamples the stage accepts (Wu, Tonin and Cevher use tens; pairwise shares need at least two)
MIN_RESAMPLES = 2
#: most resamples the stage and the config accept: each resample reruns the votes (time grows with B, the pairwise
#: shares with B squared); 50 times the protocol's 20
MAX_RESAMPLES = 1000


def bootstrap_indices(n_examples: int, n_resamples: int, seed: int) -> np.ndarray:
    """``B`` bootstrap resamples of ``|D|`` examples: int64 ``[B, |D|]`` drawn with replacement.

    Args:
        n_examples: ``|D|``.
        n_resamples: ``B``.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same resamples.

    Returns:
        ``indices[b, i]`` uniform on ``0..|D|-1``, all independent.
    """
    n_examples = check_count("n_examples", n_examples)
    n_resamples = check_count("n_resamples", n_resamples, minimum=MIN_RESAMPLES)
    return np.random.default_rng(seed).integers(0, n_examples, size=(n_resamples, n_examples), dtype=np.int64)


def resample_circuits(scores: np.ndarray, groups: np.ndarray, k_grid: np.ndarray, setting: Setting,
                      indices: np.ndarray, absolute: bool = False, device: Any = "cpu",
                      mask_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Baseline circuits and certified labels of every resample (module docstring).

    Args:
        scores: float ``[|D|, U]`` per-example scores.
        groups: int ``[U]`` top-K groups.
        k_grid: top-K fractions.
        setting: the certification setting.
        indices: int ``[B, |D|]`` resamples (:func:`bootstrap_indices`).
        absolute: rank by ``|mean|`` (the attribution file's ranking).
        device: where votes are counted (:func:`certified_circuits.core.smoothing.vote_counts`).
        mask_seed: the seed of every resample's masks (default ``setting.seed``).

    Returns:
        bool ``baseline [B, nK, U]`` and int8 ``decision [B, nK, U]`` (1 in, 0 out, -1 abstain).
    """
    scores = np.asarray(scores)
    seed = setting.seed if mask_seed is None else int(mask_seed)
    baselines, decisions = [], []
    for rows in np.asarray(indices):
        votes = compute_votes(scores[rows], groups, k_grid, setting.p_del, setting.n0, setting.n, seed,
                              absolute=absolute, device=device)  # fmt: skip
        baselines.append(votes.baseline)
        decisions.append(certify_votes_setting(votes, setting).decision)
    return np.stack(baselines).astype(bool), np.stack(decisions).astype(np.int8)


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def label_change_share(labels: np.ndarray) -> np.ndarray:
    """Mean over resample pairs of the fraction of components whose label differs, per K.

    Args:
        labels: int ``[B, nK, U]`` (any label values; bool memberships too).

    Returns:
        float64 ``[nK]``: ``sum_u [P - sum_l C(n_l(u), 2)] / (P U)``.
    """
    labels = np.asarray(labels)
    n_resamples, n_components = labels.shape[0], labels.shape[-1]
    agreeing = np.zeros(labels.shape[1:], dtype=np.int64)
    for value in np.unique(labels):  # at most three labels
        count = (labels == value).sum(axis=0, dtype=np.int64)
        agreeing += count * (count - 1) // 2
    pairs = _pairs(n_resamples)
    return (pairs - agreeing).sum(axis=-1) / (pairs * n_components)


def flip_share(decision: np.ndarray) -> np.ndarray:
    """Mean over resample pairs of the fraction of components certified in on one and out on the other, per K.

    Args:
        decision: int ``[B, nK, U]`` in {1, 0, -1}.

    Returns:
        float64 ``[nK]``: ``sum_u n_in(u) n_out(u) / (P U)``.
    """
    decision = np.asarray(decision)
    n_in = (decision == IN).sum(axis=0, dtype=np.int64)
    n_out = (decision == OUT).sum(axis=0, dtype=np.int64)
    return (n_in * n_out).sum(axis=-1) / (_pairs(decision.shape[0]) * decision.shape[-1])


def jaccard_to(circuits: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``|C_b ∩ R| / |C_b ∪ R|`` for every resample and K; NaN where both are empty.

    Args:
        circuits: bool ``[B, nK, U]``; reference: bool ``[nK, U]``.

    Returns:
        float64 ``[B, nK]``.
    """
    circuits = np.asarray(circuits, dtype=bool)
    reference = np.asarray(reference, dtype=bool)[None]
    inter = (circuits & reference).sum(axis=-1)
    union = (circuits | reference).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, np.nan)


def pairwise_jaccard(circuits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean Jaccard over resample pairs, per K, and the share of pairs where both circuits are empty.

    Args:
        circuits: bool ``[B, nK, U]``.

    Returns:
        float64 ``mean [nK]`` over the pairs with a non-empty union (NaN when there is none) and
        ``both_empty [nK]``, the share of pairs whose circuits are both empty.
    """
    x = np.ascontiguousarray(np.swapaxes(np.asarray(circuits, dtype=bool), 0, 1), dtype=np.float32)  # [nK, B, U]
    inter = np.rint(x @ np.swapaxes(x, 1, 2)).astype(np.int64)  # [nK, B, B]; exact: counts < 2^24
    sizes = np.diagonal(inter, axis1=1, axis2=2)  # [nK, B]
    union = sizes[:, :, None] + sizes[:, None, :] - inter
    upper = np.triu_indices(x.shape[1], k=1)
    inter, union = inter[:, upper[0], upper[1]], union[:, upper[0], upper[1]]  # [nK, P]
    defined = union > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(defined, inter / np.where(defined, union, 1), 0.0).sum(axis=-1)
        mean = np.where(defined.any(axis=-1), total / defined.sum(axis=-1), np.nan)
    return mean, 1.0 - defined.mean(axis=-1)


def _mean_defined(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mean over ``axis`` of the finite values; NaN where there is none (no RuntimeWarning)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@dataclass(frozen=True)
class Stability:
    """Per-K stability numbers of one concept (module docstring); every array is float64 ``[nK]``."""

    k_grid: np.ndarray
    columns: dict[str, np.ndarray]
    n_examples: int
    n_components: int
    n_resamples: int
    bootstrap_seed: int
    seconds: float

    def rows(self, labels: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Tidy rows, one per K: ``**labels, n_examples, n_components, resamples, bootstrap_seed, k_target`` and
        every column (``seconds``: the whole computation, on every row)."""
        head = {**(labels or {}), "n_examples": self.n_examples, "n_components": self.n_components,
                "resamples": self.n_resamples, "bootstrap_seed": self.bootstrap_seed}  # fmt: skip
        return [
            {**head, "k_target": float(k), **{name: float(values[i]) for name, values in self.columns.items()},
             "seconds": self.seconds}
            for i, k in enumerate(self.k_grid)
        ]  # fmt: skip


def stability(scores: np.ndarray, groups: np.ndarray, k_grid: Any, setting: Setting, n_resamples: int = 20,
              seed: int = 0, *, absolute: bool = False, truth: np.ndarray | None = None, device: Any = "cpu",
              allow_vacuous: bool = False, mask_seed: int | None = None) -> Stability:  # fmt: skip
    """Stability of the baseline circuit and the certified labels under bootstrap resampling (module docstring).

    Args:
        scores: float ``[|D|, U]`` per-example scores (the attribution file's matrix of one scorer).
        groups: int ``[U]`` top-K groups.
        k_grid: top-K fractions in (0, 1].
        setting: the certification setting (the same for every resample, mask seed included).
        n_resamples: ``B`` (>= 2; Wu, Tonin and Cevher's protocol: 20 or more).
        seed: the bootstrap seed (``numpy.random.default_rng(seed)``).
        absolute: rank by ``|mean|`` (the attribution file's ranking for this scorer).
        truth: optional bool ``[U]`` true components: adds per-resample precision and recall.
        device: where votes are counted (default numpy on the CPU).
        allow_vacuous: run even when the plan says the setting certifies nothing.
        mask_seed: the seed of the deletion masks of every resample (default ``setting.seed``; the workflow's votes
            stage draws them from ``mask_seed(config seed, concept)``, which may exceed a Setting's seed range).

    Returns:
        A :class:`Stability` with the per-K columns.

    Raises:
        VacuousSettingError: the setting can certify nothing (unless ``allow_vacuous``); ValueError for bad shapes.
    """
    start = time.perf_counter()
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or min(scores.shape) < 1:
        raise ValueError(f"scores must be a non-empty [n_examples, n_components] matrix, got shape {scores.shape}")
    n_examples, n_components = scores.shape
    k_grid = check_k_grid(k_grid)
    check_plan(plan(n_examples, n_components, setting), allow_vacuous=allow_vacuous)
    indices = bootstrap_indices(n_examples, n_resamples, seed)
    reference = full_dataset_circuits(scores, groups, k_grid, absolute, device=device)
    masks_from = setting.seed if mask_seed is None else int(mask_seed)
    baseline, decision = resample_circuits(scores, groups, k_grid, setting, indices, absolute, device, masks_from)
    certified_in = decision == IN

    to_full = jaccard_to(baseline, reference)  # [B, nK]
    columns: dict[str, np.ndarray] = {
        "baseline_jaccard_mean": to_full.mean(axis=0),
        "baseline_jaccard_std": to_full.std(axis=0),
        "baseline_jaccard_q05": np.quantile(to_full, 0.05, axis=0),
        "baseline_jaccard_q95": np.quantile(to_full, 0.95, axis=0),
        "baseline_pairwise_jaccard": pairwise_jaccard(baseline)[0],
        "baseline_change_share": label_change_share(baseline),
        "certified_change_share": label_change_share(decision),
        "certified_flip_share": flip_share(decision),
    }
    columns["certified_in_jaccard"], columns["certified_in_both_empty_share"] = pairwise_jaccard(certified_in)
    columns.update({
        "certified_in_share": (decision == IN).mean(axis=(0, 2)),
        "certified_out_share": (decision == OUT).mean(axis=(0, 2)),
        "abstain_share": (decision == ABSTAIN).mean(axis=(0, 2)),
    })  # fmt: skip
    if truth is not None:
        columns.update(_recovery_columns(baseline, certified_in, np.asarray(truth, dtype=bool)))
    return Stability(k_grid=k_grid, columns=columns, n_examples=n_examples, n_components=n_components,
                     n_resamples=int(indices.shape[0]), bootstrap_seed=int(seed),
                     seconds=time.perf_counter() - start)  # fmt: skip


def _recovery_columns(baseline: np.ndarray, certified_in: np.ndarray, truth: np.ndarray) -> dict[str, np.ndarray]:
    """Mean precision and recall over resamples of the baseline and certified-in circuits (``[B, nK, U]`` each),
    from :func:`~certified_circuits.analysis.recovery.confusion` and :func:`~certified_circuits.analysis.recovery.rates`
    (the one definition of both: an empty circuit's precision is NaN and left out of the mean)."""
    if truth.shape != (baseline.shape[-1],):
        raise ValueError(f"truth has shape {truth.shape}, expected ({baseline.shape[-1]},): one flag per component")
    if not truth.any():
        raise ValueError("the truth marks no component: recall is undefined; pass the concept's true components")
    columns = {}
    for name, circuits in (("baseline", baseline), ("certified_in", certified_in)):
        scored = rates(confusion(circuits, truth))
        columns[f"{name}_precision_mean"] = _mean_defined(scored["precision"])
        columns[f"{name}_recall_mean"] = scored["recall"].mean(axis=0)
        columns[f"{name}_empty_share"] = scored["empty_circuit"].mean(axis=0)
    return columns


def concept_inputs(attributions: Path, scorer: str, ground_truth: Path | None = None) -> tuple[Any, str, Any, Any]:
    """One concept's attribution file and, with ``ground_truth``, its truth, checked against each other: the inputs
    of the ``stability`` stage's two tables.

    Returns:
        ``(attributions, concept, ground truth or None, truth mask or None)``.

    Raises:
        ValueError: an unknown scorer, a truth of another experiment, names that do not match (named, with the fix).
    """
    from certified_circuits.storage.store import read_attributions

    attr = read_attributions(attributions)
    if scorer not in attr.scores:
        raise ValueError(f"{attributions} has no scorer {scorer!r}; it has {sorted(attr.scores)}")
    concept = str(attr.attrs.get("concept", ""))
    if ground_truth is None:
        return attr, concept, None, None
    known = read_ground_truth(ground_truth)
    experiment = str(attr.attrs.get("experiment", "") or "")
    if experiment and known.experiment != experiment:
        raise ValueError(f"{ground_truth} (--ground-truth) is the ground truth of experiment {known.experiment!r}, "
                         f"but {attributions} is of {experiment!r}: pass this experiment's ground truth")
    return attr, concept, known, truth_mask(known, concept, attr.names, where=f"the attributions {attributions}")


def concept_stability(attributions: Path, scorer: str, k_grid: Sequence[float], setting: Setting, mask_seed: int,
                      n_resamples: int = 20, bootstrap_seed: int = 0, ground_truth: Path | None = None,
                      device: Any = "cpu", allow_vacuous: bool = False) -> "pd.DataFrame":  # fmt: skip
    """One concept's stability table (:func:`stability`), labelled: the
    stability stage's result.

    Args:
        attributions: the concept's attribution file.
        scorer: its score matrix.
        k_grid, setting: as the votes and certify stages (``setting.seed`` is the config seed, as in their files).
        mask_seed: the seed the masks are drawn from (the votes stage's ``mask_seed(seed, concept)``).
        n_resamples, bootstrap_seed: the bootstrap.
        ground_truth: optional ground-truth file: adds the per-resample precision and recall columns.
        device: where votes are counted.
        allow_vacuous: run a setting that can certify nothing.

    Returns:
        One row per K: experiment, concept, the setting columns, ``mask_seed``, then the stability columns.

    Raises:
        ValueError: unknown scorer, or a ground truth that does not match the attribution file's names.
    """
    import pandas as pd


    attr, concept, _, truth = concept_inputs(attributions, scorer, ground_truth)
    result = stability(attr.scores[scorer], attr.groups, k_grid, setting, n_resamples, bootstrap_seed,
                       absolute=attr.absolute(scorer), truth=truth, device=device, allow_vacuous=allow_vacuous,
                       mask_seed=mask_seed)  # fmt: skip
    return pd.DataFrame(result.rows(stability_labels(attr.attrs, concept, scorer, setting, mask_seed)))


def stability_labels(attrs: Mapping[str, Any], concept: str, scorer: str, setting: Setting,
                     mask_seed: int) -> dict[str, Any]:  # fmt: skip
    """The columns that say what a stability row is of: experiment, concept, scorer, split, the setting's fields,
    its radius and the mask seed (``attrs``: the attribution file's attributes)."""
    return {"experiment": str(attrs.get("experiment", "")), "concept": concept, "scorer": scorer,
            "split": str(attrs.get("split", "")), "setting": setting.tag, "p_del": setting.p_del,
            "n0": setting.n0, "n": setting.n, "seed": setting.seed, "tau": setting.tau, "alpha": setting.alpha,
            "correction": setting.correction, "radius": certified_radius(setting.tau, setting.p_del),
            "mask_seed": int(mask_seed)}  # fmt: skip
