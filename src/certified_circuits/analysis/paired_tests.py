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
"""

from __future__ import annotations

from dataclasses import dataclass
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
    from scipy import stats  # here, not at import: vision jobs import this module for the outcome strings

    b = int(np.sum(baseline & ~certified))
    c = int(np.sum(certified & ~baseline))
    p = 1.0 if b + c == 0 else min(1.0, 2.0 * float(stats.binom.cdf(min(b, c), b + c, 0.5)))
    return PairedResult("mcnemar", p, int(baseline.size), b + c, (c - b) / max(1, baseline.size))


def paired_bootstrap_balanced(strata: Sequence[tuple[int, np.ndarray, np.ndarray]], *, n_resamples: int = 10_000,
                              seed: int = 0) -> PairedResult:
    """Stratified paired bootstrap of the difference in mean balanced accuracy (module docstring).

    ``strata``: ``(concept_index, baseline_correct, certified_correct)`` per (concept, positive or
    negative) stratum, bool [n_s] each; a concept's balanced accuracy is the mean of its two strata
    means (a concept with one stratum uses that one). Resampling weights come from one generator
    seeded with ``seed``: every stratum draws ``Multinomial(n_s, 1/n_s)`` counts for all resamples
    at once, so there is no loop over resamples or examples.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    concepts = sorted({int(c) for c, _, _ in strata})
    per_concept_observed = {c: [] for c in concepts}
    per_concept_boot = {c: [] for c in concepts}
    n_examples = discordant = 0
    for concept, base, cert in strata:
        base, cert = np.asarray(base, bool), np.asarray(cert, bool)
        if base.shape != cert.shape or base.ndim != 1 or base.size == 0:
            raise ValueError(f"stratum of concept {concept}: paired outcomes must be two equal non-empty vectors")
        diff = cert.astype(float) - base.astype(float)
        counts = rng.multinomial(diff.size, np.full(diff.size, 1.0 / diff.size), size=n_resamples)
        per_concept_observed[int(concept)].append(diff.mean())
        per_concept_boot[int(concept)].append(counts @ diff / diff.size)
        n_examples += diff.size
        discordant += int(np.count_nonzero(diff))
    observed = float(np.mean([np.mean(v) for v in per_concept_observed.values()]))
    boot = np.mean([np.mean(per_concept_boot[c], axis=0) for c in concepts], axis=0)
    if discordant == 0:
        return PairedResult("bootstrap", 1.0, n_examples, 0, 0.0)
    extreme = np.count_nonzero(np.abs(boot - observed) >= abs(observed) - 1e-12)
    return PairedResult("bootstrap", float((1 + extreme) / (1 + n_resamples)), n_examples, discordant, observed)


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
    pairs = baseline.merge(certified, on="concept", suffixes=("_b", "_c"))
    if pairs[[f"{OUTCOME_COLUMN}_b", f"{OUTCOME_COLUMN}_c"]].isna().any(axis=None):
        return None
    strata = []
    for index, row in enumerate(pairs.itertuples(index=False)):  # one iteration per concept
        base = decode_outcomes(getattr(row, f"{OUTCOME_COLUMN}_b"))
        cert = decode_outcomes(getattr(row, f"{OUTCOME_COLUMN}_c"))
        if base.size != cert.size:
            raise ValueError(f"concept {row.concept}: the circuits were evaluated on different examples "
                             f"({base.size} vs {cert.size}); rerun the evaluation stage")
        n_pos = int(row.n_images_b) if "n_images_b" in pairs.columns else base.size
        strata.append((index, base[:n_pos], cert[:n_pos]))
        if metric == "balanced_accuracy" and n_pos < base.size:
            strata.append((index, base[n_pos:], cert[n_pos:]))
    if not strata:
        return None
    if metric == "accuracy":
        return mcnemar_exact(np.concatenate([s[1] for s in strata]), np.concatenate([s[2] for s in strata]))
    return paired_bootstrap_balanced([s for s in strata if s[1].size], n_resamples=n_resamples, seed=seed)
