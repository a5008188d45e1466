"""Per-example paired tests of certified vs baseline circuits (beyond the paper's class-level test).

The paper compares certified and baseline circuits with a paired test over classes (Table 3). With
one concept per row (every language task) that test has one pair and returns p = 1 by construction;
with ten classes it has little power. The tests here pair the two circuits on the *same examples*:
every evaluated image or prompt is scored correct or not under both circuits.

Per-example outcomes travel in the sufficiency CSVs as the column ``per_example_correct``: one
character per evaluated example, ``1`` correct and ``0`` wrong, in the order the evaluation stage
evaluated them (vision: the class's images, then the seeded sample of other-class images, for which
"correct" means "not labelled as the class"; language: the prompts of the eval set).

Tests
-----
McNemar (exact), for ``accuracy`` (cACC):
    over the pooled (concept, example) pairs of the positives, ``b`` = baseline right and certified
    wrong, ``c`` = certified right and baseline wrong. Under H0 (both circuits equally often right on
    the discordant pairs) ``b ~ Binomial(b + c, 1/2)``; the two-sided exact p-value is
    ``min(1, 2 * P[X <= min(b, c)])``, and 1 when ``b + c = 0``. Pooling over concepts weights each
    concept by its number of examples (equal up to a few images in the embedded world; one task per
    row for language).
Paired bootstrap, for ``balanced_accuracy``:
    the statistic is the reported one, ``Δ = mean_c BA_c(certified) - mean_c BA_c(baseline)`` with
    ``BA_c = (acc_c + 1 - FPR_c) / 2``. Examples are resampled with replacement within each (concept,
    positive/negative) stratum, the same indices for both circuits (paired). The p-value tests H0: Δ = 0
    by centring the bootstrap distribution on the null (Efron & Tibshirani 1993, Sec. 16.4):
    ``p = (1 + #{|Δ* - Δ| >= |Δ|}) / (1 + B)``; with every difference zero, p = 1.
    A stratum's resampled difference depends only on how many draws land on its gained (+1) and lost (-1)
    examples, so it is drawn as those two counts (a trinomial: the multinomial of the n_s examples, aggregated),
    not as n_s counts: the same bootstrap distribution at 1/n_s of the draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

OUTCOME_COLUMN = "per_example_correct"


def encode_outcomes(correct: np.ndarray) -> list[str]:
    """Rows of a bool [R, N] array as strings of ``0``/``1`` (one per example), vectorised."""
    correct = np.atleast_2d(np.asarray(correct, dtype=bool))
    chars = (correct.astype(np.uint8) + ord("0")).astype(np.uint8)
    return [row.tobytes().decode("ascii") for row in chars]


def decode_outcomes(text: str) -> np.ndarray:
    """Inverse of :func:`encode_outcomes` for one row: bool [N]."""
    if not isinstance(text, str) or (text and set(text) - {"0", "1"}):
        raise ValueError(f"{OUTCOME_COLUMN} must be a string of 0/1 characters, got {str(text)[:40]!r}; "
                         f"rerun the evaluation stage")
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord("1")


@dataclass(frozen=True)
class PairedResult:
    """Outcome of one per-example paired test."""

    test: str            # "mcnemar" | "bootstrap"
    pvalue: float
    n_examples: int      # paired examples (pooled over concepts)
    discordant: int      # examples where exactly one circuit is right
    difference: float    # observed certified - baseline (McNemar: pooled accuracy; bootstrap: mean BA)


def mcnemar_exact(baseline: np.ndarray, certified: np.ndarray) -> PairedResult:
    """Exact two-sided McNemar test on paired bool outcomes (see module docstring)."""
    baseline, certified = np.asarray(baseline, bool), np.asarray(certified, bool)
    if baseline.shape != certified.shape:
        raise ValueError(f"paired outcomes differ in shape: {baseline.shape} vs {certified.shape}")
    # P[X <= k] = P[X >= m - k] for X ~ Binomial(m, 1/2): the engine's one binomial tail (core.certification
    # binomial_tail, scipy.special.betainc), within 2e-15 of the exact sum_{i <= k} C(m, i) / 2^m
    # (scipy.stats.binom.cdf: 1e-13), and light to import (scipy.stats takes ~0.7 s, issue 51)
    from certified_circuits.core.certification import binomial_tail

    b = int(np.sum(baseline & ~certified))
    c = int(np.sum(certified & ~baseline))
    k, m = min(b, c), b + c
    p = 1.0 if m == 0 else min(1.0, 2.0 * float(binomial_tail(m - k, m, 0.5)))
    return PairedResult("mcnemar", p, int(baseline.size), b + c, (c - b) / max(1, baseline.size))


def paired_bootstrap_balanced(strata: Sequence[tuple[int, np.ndarray, np.ndarray]], *, n_resamples: int = 10_000,
                              seed: int = 0) -> PairedResult:
    """Stratified paired bootstrap of the difference in mean balanced accuracy (module docstring).

    A stratum of ``n_s`` examples has per-example differences ``d_i = cert_i - base_i`` in {-1, 0, 1}, ``g`` of them
    +1 (gained) and ``l`` of them -1 (lost). A resample draws ``Multinomial(n_s, 1/n_s)`` counts ``c_i`` of the
    examples and its mean difference is ``sum_i c_i d_i / n_s = (G - L) / n_s``, where ``G``, ``L`` are the counts
    landing on gained and lost examples. By the multinomial's aggregation property ``(G, L, n_s - G - L) ~
    Multinomial(n_s; g/n_s, l/n_s, 1 - (g + l)/n_s)``, drawn as ``G ~ Binomial(n_s, g/n_s)`` and ``L | G ~
    Binomial(n_s - G, l/(n_s - g))``: the same distribution as the examples' counts, with 2 draws a resample
    instead of n_s (a stratum without a discordant example draws nothing: its resamples all have difference 0).

    Args:
        strata: ``(concept_index, baseline_correct, certified_correct)`` per (concept, positive or negative)
            stratum, bool [n_s] each; a concept's balanced accuracy is the mean of its two strata means (a concept
            with one stratum uses that one).
        n_resamples: B, the bootstrap resamples (>= 1).
        seed: the seed of the one generator of every draw: ``G`` of every stratum with a discordant example, then
            ``L`` of each (arrays [strata, B]: no loop over resamples or examples).

    Returns:
        The :class:`PairedResult`: ``difference`` is ``Δ = mean_c mean_{s of c} (g_s - l_s) / n_s`` and
        ``pvalue = (1 + #{|Δ* - Δ| >= |Δ|}) / (1 + B)`` (1 when no example is discordant).

    Raises:
        ValueError: ``n_resamples < 1``, or a stratum's two outcome vectors are not equal non-empty vectors.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    sizes, gained, lost, concept_of = [], [], [], []
    for concept, base, cert in strata:  # one iteration per stratum: counts only
        base, cert = np.asarray(base, bool), np.asarray(cert, bool)
        if base.shape != cert.shape or base.ndim != 1 or base.size == 0:
            raise ValueError(f"stratum of concept {concept}: paired outcomes must be two equal non-empty vectors")
        sizes.append(base.size)
        gained.append(np.count_nonzero(cert & ~base))
        lost.append(np.count_nonzero(base & ~cert))
        concept_of.append(int(concept))
    return _bootstrap_from_counts(tuple(sizes), tuple(map(int, gained)), tuple(map(int, lost)), tuple(concept_of),
                                  n_resamples, seed)


@lru_cache(maxsize=256)
def _bootstrap_from_counts(sizes: tuple[int, ...], gained: tuple[int, ...], lost: tuple[int, ...],
                           concept_of: tuple[int, ...], n_resamples: int, seed: int) -> PairedResult:
    """:func:`paired_bootstrap_balanced` from each stratum's size, gained and lost counts and concept: all its result
    depends on, so a table's rows that pair the same circuits (a peak and a selected row at the same K) share one
    computation.

    Args:
        sizes, gained, lost, concept_of: per stratum, ``n_s``, ``g_s``, ``l_s`` and its concept.
        n_resamples, seed: as for :func:`paired_bootstrap_balanced`.

    Returns:
        Its :class:`PairedResult`.
    """
    sizes, gained, lost = (np.asarray(a, dtype=np.int64) for a in (sizes, gained, lost))
    discordant = int(gained.sum() + lost.sum())
    if discordant == 0:
        return PairedResult("bootstrap", 1.0, int(sizes.sum()), 0, 0.0)
    concepts, column = np.unique(concept_of, return_inverse=True)
    # [concepts, strata]: each concept's mean over its strata as a weighted row
    weights = np.zeros((concepts.size, sizes.size))
    weights[column, np.arange(sizes.size)] = 1.0
    weights /= weights.sum(axis=1, keepdims=True)
    observed = float(np.mean(weights @ ((gained - lost) / sizes)))
    active = np.flatnonzero(gained + lost)
    rng = np.random.default_rng(seed)
    n = sizes[active, None]
    up = rng.binomial(n, (gained / sizes)[active, None], size=(active.size, n_resamples))
    undecided = (sizes - gained)[active]  # > 0 wherever a stratum lost an example
    p_lost = np.divide(lost[active], undecided, out=np.zeros(active.size), where=undecided > 0)
    down = rng.binomial(n - up, p_lost[:, None])
    # Δ* = mean_c mean_{s of c} (G_s - L_s) / n_s = sum_s w_s (G_s - L_s) / n_s, w_s = mean over concepts of weights[:, s];
    # strata without a discordant example add 0: one product over the active strata, no [strata, B] float array
    boot = (weights.mean(axis=0)[active] / sizes[active]) @ (up - down)
    extreme = np.count_nonzero(np.abs(boot - observed) >= abs(observed) - 1e-12)
    return PairedResult("bootstrap", float((1 + extreme) / (1 + n_resamples)), int(sizes.sum()), discordant, observed)


def paired_example_test(baseline, certified, metric: str, *, n_resamples: int = 10_000,
                        seed: int = 0) -> PairedResult | None:
    """The per-example test of ``metric`` between two sets of sufficiency rows (pandas DataFrames,
    one row per concept: each method at its chosen K and setting on one eval set).

    ``accuracy`` -> :func:`mcnemar_exact` on the pooled positives; ``balanced_accuracy`` ->
    :func:`paired_bootstrap_balanced` over (concept, positive/negative) strata. The first
    ``n_images`` characters of a vision row are its class's images (the positives); language rows
    (no ``n_images``) are all positives. Returns None when the rows carry no per-example outcomes
    (CSVs written before they existed) or the metric has no per-example test.
    """
    if metric not in ("accuracy", "balanced_accuracy"):
        return None
    if OUTCOME_COLUMN not in baseline.columns or OUTCOME_COLUMN not in certified.columns:
        return None
    for name, rows in (("baseline", baseline), ("certified", certified)):
        if rows["concept"].duplicated().any():
            raise ValueError(f"{name} rows hold several rows per concept; a paired test needs one circuit per concept")
    # the concepts of both, in the baseline rows' order (an inner join on concept, without copying the rows)
    base_paired = baseline["concept"].isin(certified["concept"]).to_numpy()
    cert_paired = certified["concept"].isin(baseline["concept"]).to_numpy()
    if baseline[OUTCOME_COLUMN][base_paired].isna().any() or certified[OUTCOME_COLUMN][cert_paired].isna().any():
        return None
    certified_text = dict(zip(certified["concept"][cert_paired].tolist(), certified[OUTCOME_COLUMN][cert_paired].tolist()))
    concepts = baseline["concept"][base_paired].tolist()
    baseline_text = baseline[OUTCOME_COLUMN][base_paired].tolist()
    with_sizes = "n_images" in baseline.columns and "n_images" in certified.columns  # else all are positives
    positives = baseline["n_images"][base_paired].tolist() if with_sizes else [None] * len(concepts)
    strata = []
    for index, (concept, text, n_pos) in enumerate(zip(concepts, baseline_text, positives)):  # one per concept
        base, cert = decode_outcomes(text), decode_outcomes(certified_text[concept])
        if base.size != cert.size:
            raise ValueError(f"concept {concept}: the circuits were evaluated on different examples "
                             f"({base.size} vs {cert.size}); rerun the evaluation stage")
        n_pos = base.size if n_pos is None else int(n_pos)
        strata.append((index, base[:n_pos], cert[:n_pos]))
        if metric == "balanced_accuracy" and n_pos < base.size:
            strata.append((index, base[n_pos:], cert[n_pos:]))
    if not strata:
        return None
    if metric == "accuracy":
        return mcnemar_exact(np.concatenate([s[1] for s in strata]), np.concatenate([s[2] for s in strata]))
    return paired_bootstrap_balanced([s for s in strata if s[1].size], n_resamples=n_resamples, seed=seed)
