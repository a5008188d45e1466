"""Hypotheses tested over model seeds (issue 50; the pre-registration in docs/embedded_default.md, "The fair
testbed").

The unit of replication is the model seed: concepts and settings are averaged within a seed (they share the model,
the scores and the bootstrap draw, so they are not independent pairs), and each hypothesis compares one value per
seed of a certified circuit with one of the baseline.

**The test.** An exact paired sign-flip (Fisher randomization) test of the mean difference ``d_i = c_i - b_i`` over
the ``n`` seeds: under H0 each difference is as likely to have either sign, so the null distribution of the mean is
that of ``mean(s_i |d_i|)`` over all ``2^n`` sign vectors ``s``, enumerated exactly::

    p_greater = #{s : mean(s |d|) >= mean(d)} / 2^n,   p_less = #{s : mean(s |d|) <= mean(d)} / 2^n.

A zero difference takes either sign with the same value, so the smallest attainable one-sided p is
``2^-(number of non-zero differences)`` (:func:`min_pvalue`); with 8 seeds it is 1/256. A test whose smallest
attainable p is at least ``alpha`` cannot reject whatever the data: it is reported **untestable at n = ...**, not
"does not hold".

**Multiple tests.** Holm's step-down adjustment within each hypothesis, across its scorers and methods
(:func:`holm_adjust`: ``p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j))`` in increasing order): rejecting where the
adjusted p is below ``alpha`` is Holm's procedure, the same rule as
:func:`certified_circuits.core.certification.reject` with ``correction="holm"`` (tested).

**Claims.** A superiority claim (H1, H2) holds when its Holm-adjusted p is below ``alpha``. A non-inferiority claim
(H3) tests H0 "lower" (alternative ``less``) and holds when that is not rejected after Holm and the mean difference is
>= 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np
import pandas as pd

#: the family-wise level of every hypothesis
ALPHA = 0.05
#: the most seeds the exact enumeration takes (2^20 sign vectors)
MAX_SEEDS = 20
#: the columns of :func:`seed_hypothesis_table`
COLUMNS = ("hypothesis", "claim", "scorer", "method", "alternative", "n_seeds", "seeds", "n_dropped", "certified",
           "baseline", "mean_difference", "pvalue", "pvalue_holm", "min_pvalue", "status")


def min_pvalue(differences: Sequence[float]) -> float:
    """The smallest one-sided p the sign-flip test can give: ``2^-(number of non-zero differences)`` (1 for none)."""
    d = np.asarray(differences, dtype=np.float64)
    return float(2.0 ** -int(np.count_nonzero(d)))


def sign_flip_test(differences: Sequence[float], alternative: str = "greater") -> tuple[float, float]:
    """The exact paired sign-flip test of the mean difference (module docstring).

    Args:
        differences: the per-seed differences ``c_i - b_i`` (finite; 1 to :data:`MAX_SEEDS` of them).
        alternative: ``"greater"`` (the certified value is higher) or ``"less"``.

    Returns:
        ``(mean difference, exact one-sided p)``.

    Raises:
        ValueError: no differences, a non-finite one, more than :data:`MAX_SEEDS`, or an unknown alternative.
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0 or not np.isfinite(d).all():
        raise ValueError(f"differences must be a non-empty list of finite numbers, got {d.tolist()}")
    if d.size > MAX_SEEDS:
        raise ValueError(f"{d.size} differences: the exact test enumerates 2^n sign vectors, n <= {MAX_SEEDS}")
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative {alternative!r}: choose 'greater' or 'less'")
    signs = np.array(list(product((1.0, -1.0), repeat=d.size)))  # [2^n, n]
    null = signs @ np.abs(d) / d.size
    observed = float(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    hits = null >= observed - tol if alternative == "greater" else null <= observed + tol
    return observed, float(hits.mean())


def holm_adjust(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (module docstring); NaN entries stay NaN and do not count in the family.

    Args:
        pvalues: the family's raw p-values.

    Returns:
        float64, the same order: ``max_{j <= i} min(1, (m - j + 1) p_(j))`` for the i-th smallest of the ``m``.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]
    m = order.size
    adjusted = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adjusted) if m else adjusted
    return out


def seed_values(rows: pd.DataFrame, certified: str, baseline: str, seeds: Sequence[int]) -> tuple[pd.DataFrame, int]:
    """One value per seed: the mean over its concepts and settings of the rows where both values are defined.

    Args:
        rows: one row per (seed, concept, setting) with columns ``seed``, ``certified`` and ``baseline``.
        certified, baseline: the two columns compared.
        seeds: the seeds that should be there (a seed with no usable row is dropped and counted).

    Returns:
        ``(per_seed, n_dropped)``: columns ``seed``, ``certified``, ``baseline``; the seeds left out.
    """
    usable = rows.dropna(subset=[certified, baseline])
    per_seed = usable.groupby("seed", sort=True)[[certified, baseline]].mean().reset_index()
    per_seed.columns = ["seed", "certified", "baseline"]
    return per_seed, len(set(seeds) - set(per_seed["seed"]))


def _test_row(hypothesis: str, claim: str, scorer: str, method: str, alternative: str, per_seed: pd.DataFrame,
              n_dropped: int) -> dict[str, Any]:
    d = (per_seed["certified"] - per_seed["baseline"]).to_numpy()
    if d.size:
        diff, p = sign_flip_test(d, alternative)
    else:
        diff, p = float("nan"), float("nan")
    return {"hypothesis": hypothesis, "claim": claim, "scorer": scorer, "method": method,
            "alternative": alternative, "n_seeds": int(d.size),
            "seeds": " ".join(str(int(s)) for s in per_seed["seed"]), "n_dropped": n_dropped,
            "certified": float(per_seed["certified"].mean()) if d.size else float("nan"),
            "baseline": float(per_seed["baseline"].mean()) if d.size else float("nan"),
            "mean_difference": diff, "pvalue": p, "min_pvalue": min_pvalue(d) if d.size else 1.0}  # fmt: skip


def hypothesis_row(hypothesis: str, claim: str, scorer: str, method: str, alternative: str, per_seed: pd.DataFrame,
                   n_dropped: int) -> dict[str, Any]:  # fmt: skip
    """One test of a hypothesis family before :func:`finish_family` (the row :func:`seed_hypothesis_table` builds):
    the exact sign-flip test of ``per_seed``'s ``certified - baseline`` (columns of :func:`seed_values`), with the
    columns of :data:`COLUMNS` but ``pvalue_holm`` and ``status``. Public for the other families of tests over seeds
    (:mod:`certified_circuits.analysis.equal_footing`)."""
    return _test_row(hypothesis, claim, scorer, method, alternative, per_seed, n_dropped)


def finish_family(rows: list[dict[str, Any]], non_inferior: bool = False) -> list[dict[str, Any]]:
    """Holm within one hypothesis' rows, then each row's status: ``holds``, ``does not hold`` or ``untestable at
    n=<n_seeds>`` (its smallest attainable p is >= :data:`ALPHA`)."""
    adjusted = holm_adjust([r["pvalue"] for r in rows])
    for row, p_holm in zip(rows, adjusted):
        row["pvalue_holm"] = float(p_holm)
        if row["min_pvalue"] >= ALPHA:
            row["status"] = f"untestable at n={row['n_seeds']}"
        elif non_inferior:
            row["status"] = "holds" if p_holm >= ALPHA and row["mean_difference"] >= 0 else "does not hold"
        else:
            row["status"] = "holds" if p_holm < ALPHA else "does not hold"
    return rows


#: H1-H3 of the pre-registration: (hypothesis, claim, method, certified column, baseline column, alternative)
TESTS = (
    ("H1", "certified IN's precision > the baseline's top-|IN|", "certified_in", "precision", "baseline_precision",
     "greater"),
    ("H1", "certified IN + abstain's precision > the baseline's top-|IN + abstain|", "certified_in_abstain",
     "precision", "baseline_precision", "greater"),
    ("H2", "certified labels change less often than baseline memberships between resamples (settings that can "
     "certify IN)", "certified_labels", "certified_change_share", "baseline_change_share", "less"),
    ("H3", "certified IN + abstain's recall is not lower than the baseline's top-|IN + abstain|",
     "certified_in_abstain", "recall", "baseline_recall", "less"),
)  # fmt: skip


def seed_hypothesis_table(matched: pd.DataFrame, stability: pd.DataFrame, seeds: Sequence[int]) -> pd.DataFrame:
    """H1-H3 over model seeds with Holm within each hypothesis (module docstring).

    Args:
        matched: size-matched rows (:func:`certified_circuits.analysis.size_matched.size_matched_rows`) with columns
            ``seed``, ``scorer``, ``method``, ``precision``, ``baseline_precision``, ``recall``, ``baseline_recall``
            (one row per seed, concept, setting, scorer and method).
        stability: rows with ``seed``, ``scorer``, ``certified_change_share``, ``baseline_change_share``,
            ``can_certify_in`` and ``certified_in_any`` (one per seed, concept, setting and scorer); H2 reads only
            the rows whose plan can certify IN and where something is certified IN on some resample.
        seeds: the pre-registered seeds (a seed missing from the rows is counted in ``n_dropped``).

    Returns:
        One row per hypothesis, scorer and method, columns :data:`COLUMNS`, scorers in the order met.

    Raises:
        ValueError: a seed repeated in ``seeds``.
    """
    if len(set(seeds)) != len(list(seeds)):
        raise ValueError(f"seeds {list(seeds)} repeat a seed: each model seed is one pair")
    out: list[dict[str, Any]] = []
    scorers = list(dict.fromkeys(list(matched["scorer"]) + list(stability["scorer"])))
    for hypothesis in ("H1", "H2", "H3"):
        family = []
        for name, claim, method, cert, base, alternative in TESTS:
            if name != hypothesis:
                continue
            for scorer in scorers:
                if hypothesis == "H2":
                    part = stability[(stability["scorer"] == scorer) & stability["can_certify_in"].astype(bool)
                                     & stability["certified_in_any"].astype(bool)]
                else:
                    part = matched[(matched["scorer"] == scorer) & (matched["method"] == method)]
                per_seed, dropped = seed_values(part, cert, base, seeds)
                family.append(_test_row(hypothesis, claim, scorer, method, alternative, per_seed, dropped))
        out.extend(finish_family(family, non_inferior=hypothesis == "H3"))
    return pd.DataFrame(out, columns=list(COLUMNS))
