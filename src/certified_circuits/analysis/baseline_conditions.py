"""The conditions a testbed's baseline must meet before certification is tested on it (issue 50; the pre-registration
in docs/embedded_default.md, "The fair testbed").

A certificate can only buy something where the base algorithm's circuit depends on the sample. So, before any
certified number of a testbed model is computed, its baseline (the base algorithm on D) is measured at the truth's
size over ``B`` bootstrap resamples ``D_b`` of D (:func:`~certified_circuits.analysis.stability.bootstrap_indices`):

- **(a)** ``mean_b precision(A(D_b)) <= precision(A(P)) - PRECISION_GAP``: the baseline on a sample is worse than on
  the population ``P`` (>= 1,000 examples) by at least :data:`PRECISION_GAP`: its errors come from the sample;
- **(b)** some true component ``u`` has ``MEMBERSHIP_BAND[0] <= mean_b [u in A(D_b)] <= MEMBERSHIP_BAND[1]``: its
  membership is a coin the sample tosses;
- **(c)** ``mean_b J(A(D_b), A(D)) <= MAX_JACCARD``: the circuit moves with the sample.

``A`` is the base algorithm at the truth's size: the top ``|T ∩ g|`` components of each top-K group ``g`` by the mean
score (``|mean|`` for an absolute ranking), :func:`certified_circuits.core.discovery.top_count_circuit`, so every
circuit has exactly ``|T|`` components. A resample's mean score weights each example by how often it is drawn.
Components in ``exclude`` (a truth's grey zone) are neither hits nor misses: they are left out of precision and of
the membership band (they still take a place in the circuit, as they do for the method).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certified_circuits.analysis.recovery import confusion, rates, scored_only
from certified_circuits.analysis.stability import bootstrap_indices, jaccard_to
from certified_circuits.core.discovery import GroupIndex, group_counts, top_count_circuit, top_count_rows

#: (a): the least drop of the baseline's precision from the population to a sample of the paper's size
PRECISION_GAP = 0.1
#: (b): the share of resampled baseline circuits a true component must sit in, for at least one true component
MEMBERSHIP_BAND = (0.2, 0.8)
#: (c): the largest mean Jaccard of a resampled baseline circuit to the full-data one
MAX_JACCARD = 0.85
#: the fewest bootstrap resamples the conditions are read over (the pre-registration's 50)
MIN_RESAMPLES = 50
#: the fewest population examples (a) compares with
MIN_POPULATION = 1000


def dataset_scores(scores: np.ndarray, weights: np.ndarray, absolute: bool) -> np.ndarray:
    """Weighted mean scores of several (re)samples: ``W S / W 1`` (``|.|`` when ``absolute``).

    Args:
        scores: float ``[|D|, U]``.
        weights: ``[B, |D|]`` non-negative counts (a bootstrap resample's multiplicities; all ones for D).
        absolute: rank by ``|mean|``.

    Returns:
        float64 ``[B, U]``.
    """
    weights = np.asarray(weights, dtype=np.float64)
    means = weights @ np.asarray(scores, dtype=np.float64) / weights.sum(axis=1, keepdims=True)
    return np.abs(means) if absolute else means


def resample_weights(n_examples: int, n_resamples: int, seed: int) -> np.ndarray:
    """int64 ``[B, |D|]``: how often each example is drawn in each bootstrap resample
    (:func:`~certified_circuits.analysis.stability.bootstrap_indices`, the same draws as the stability stage)."""
    indices = bootstrap_indices(n_examples, n_resamples, seed)
    offsets = (np.arange(n_resamples) * n_examples)[:, None]
    flat = np.bincount((indices + offsets).ravel(), minlength=n_resamples * n_examples)
    return flat.reshape(n_resamples, n_examples)


@dataclass(frozen=True)
class BaselineConditions:
    """Conditions (a)-(c) of one concept (module docstring).

    Attributes:
        precision_resampled: mean over resamples of the baseline's precision at the truth's size.
        precision_population: the baseline's precision on the population.
        membership: float ``[|T|]``, the share of resampled circuits holding each true component (truth order).
        jaccard: mean Jaccard of the resampled circuits to the full-D circuit.
        precision_full: the baseline's precision on D itself.
        n_resamples: ``B``.
    """

    precision_resampled: float
    precision_population: float
    membership: np.ndarray
    jaccard: float
    precision_full: float
    n_resamples: int

    @property
    def gap(self) -> float:
        """``precision_population - precision_resampled`` ((a) asks for at least :data:`PRECISION_GAP`)."""
        return self.precision_population - self.precision_resampled

    @property
    def a(self) -> bool:
        return bool(self.gap >= PRECISION_GAP - 1e-12)

    @property
    def b(self) -> bool:
        low, high = MEMBERSHIP_BAND
        return bool(((self.membership >= low) & (self.membership <= high)).any())

    @property
    def c(self) -> bool:
        return bool(self.jaccard <= MAX_JACCARD)

    def row(self) -> dict[str, Any]:
        """A flat table row: the numbers and ``a``, ``b``, ``c``, ``in_band`` (true components in the band)."""
        low, high = MEMBERSHIP_BAND
        return {"precision_resampled": self.precision_resampled, "precision_population": self.precision_population,
                "precision_full": self.precision_full, "precision_gap": self.gap, "jaccard": self.jaccard,
                "in_band": int(((self.membership >= low) & (self.membership <= high)).sum()),
                "n_true": int(self.membership.size), "resamples": self.n_resamples,
                "a": self.a, "b": self.b, "c": self.c}  # fmt: skip


def baseline_conditions(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, population: np.ndarray, *,
                        absolute: bool = False, n_resamples: int = MIN_RESAMPLES, seed: int = 0,
                        exclude: np.ndarray | None = None,
                        min_resamples: int = MIN_RESAMPLES,
                        min_population: int = MIN_POPULATION) -> BaselineConditions:  # fmt: skip
    """Conditions (a)-(c) of one concept's baseline at the truth's size (module docstring).

    Args:
        scores: float ``[|D|, U]`` per-example scores of the concept dataset D.
        groups: int ``[U]`` top-K groups.
        truth: bool ``[U]`` the verified truth (at least one component).
        population: float ``[N, U]`` per-example scores of the population (N >= ``min_population``).
        absolute: rank by ``|mean|``.
        n_resamples: ``B`` (>= ``min_resamples``).
        seed: the bootstrap seed.
        exclude: optional bool ``[U]``, components neither true nor null (a grey zone): left out of precision.
        min_resamples, min_population: the pre-registered floors (lower them only in a test of the arithmetic).

    Returns:
        :class:`BaselineConditions`.

    Raises:
        ValueError: shapes that differ, an empty truth, a truth that overlaps ``exclude``, too few resamples or
            population examples (each named with the fix).
    """
    scores = np.asarray(scores, dtype=np.float64)
    population = np.asarray(population, dtype=np.float64)
    truth = np.asarray(truth, dtype=bool)
    exclude = np.zeros_like(truth) if exclude is None else np.asarray(exclude, dtype=bool)
    if scores.ndim != 2 or population.ndim != 2 or scores.shape[1] != population.shape[1]:
        raise ValueError(f"scores {scores.shape} and population {population.shape} must be [examples, U] with the "
                         "same U: score the population with the same model and scorer")  # fmt: skip
    if truth.shape != (scores.shape[1],) or exclude.shape != truth.shape:
        raise ValueError(f"truth {truth.shape} and exclude {exclude.shape} must be one flag per component "
                         f"({scores.shape[1]})")  # fmt: skip
    if not truth.any() or (truth & exclude).any():
        raise ValueError("the truth must mark at least one component and none of the excluded (grey) ones")
    if n_resamples < min_resamples:
        raise ValueError(f"n_resamples is {n_resamples}; the conditions are read over at least {min_resamples} "
                         "bootstrap resamples (the pre-registration): raise it")  # fmt: skip
    if population.shape[0] < min_population:
        raise ValueError(f"the population has {population.shape[0]} examples; condition (a) compares with at least "
                         f"{min_population}: score more population examples")  # fmt: skip
    counts = group_counts(truth, GroupIndex.from_groups(groups))
    def precision(circuits: np.ndarray) -> np.ndarray:
        return rates(confusion(*scored_only(circuits, truth, exclude)))["precision"]

    full = top_count_circuit(dataset_scores(scores, np.ones((1, scores.shape[0])), absolute)[0], groups, counts)
    pop = top_count_circuit(dataset_scores(population, np.ones((1, population.shape[0])), absolute)[0], groups,
                            counts)  # fmt: skip
    weights = resample_weights(scores.shape[0], n_resamples, seed)
    resampled = top_count_rows(dataset_scores(scores, weights, absolute), groups, counts)  # [B, U]
    return BaselineConditions(
        precision_resampled=float(np.nanmean(precision(resampled))),
        precision_population=float(precision(pop)),
        membership=resampled[:, truth].mean(axis=0),
        jaccard=float(jaccard_to(resampled[:, None, :], full[None, :])[:, 0].mean()),
        precision_full=float(precision(full)),
        n_resamples=int(n_resamples),
    )
