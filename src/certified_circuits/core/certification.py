"""The decision rule of Certified Circuits (Algorithm 1 ``CertifyCircuit``, Theorem 1, App. C).

For each component ``u``:

1. selection: ``c_u`` is the more frequent outcome among the ``n0`` selection samples
   ("top index in cnts0"): in (1) if ``selection_count > n0 / 2``, else out (0). An exact tie goes to
   *out*, the first index of ``(out, in)``, as ``argmax`` does in SegCertify.
2. certification: ``n_u`` is the number of the ``n`` fresh certification samples that agree with
   ``c_u``; the p-value of ``H0: P[A_u(D ⊙ eps) = c_u] <= tau`` is ``P[Bin(n, tau) >= n_u]``
   (``BinPValue(n_u, n, <=, tau)``).
3. family-wise error control over all ``|U|`` tested components, fixed before looking at the data:
   Bonferroni (the paper's: reject iff ``p <= alpha / |U|``) or Holm's step-down (same FWER <= alpha,
   never fewer rejections).
4. rejected -> certified ``c_u``; otherwise abstain (-1).

The certified radius (Eq. r) is ``r = floor(log(1.5 - tau) / log p_del)``: the largest ``r`` with
``p_del^r >= 1.5 - tau``, so that any component with smoothed confidence ``mu > tau`` keeps its
decision for every dataset within ``r`` insertions, deletions or substitutions (RS-Del, Thm. 7).

Sample complexity (App. C.2): under perfect agreement (``n_u = n``) the p-value is ``tau^n``, so a
decision is certifiable iff ``tau^n <= alpha / N`` with ``N`` the number of corrected components
(``N = 1``: no correction).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import betainc

from certified_circuits.core.contracts import ABSTAIN, IN, Certificates, Votes
from certified_circuits.core.validation import check_alpha, check_correction, check_count, check_p_del, check_tau

if TYPE_CHECKING:
    from certified_circuits.core.setting import Setting

#: votes attributes copied into certificates (the settings that produced them)
VOTES_SETTING_KEYS = ("p_del", "n0", "n", "seed", "n_examples", "scorer", "concept", "model", "experiment", "split")


def attr_value(attrs: dict, key: str) -> Any:
    """An HDF5 attribute as a plain Python value (numpy scalars unwrapped; None when absent)."""
    item = attrs.get(key)
    return item.item() if isinstance(item, np.generic) else item


def check_certified_from(
    votes: Votes, certificates: Certificates, votes_name: str, certificates_name: str, remake: str | None = None
) -> None:
    """Refuse certificates that were not certified from these votes: the one check of a (votes, certificates)
    pair, used by every stage and report that reads one.

    ``certify_votes`` copies the votes' :data:`VOTES_SETTING_KEYS` into the certificates, so every one of them
    the certificates hold must equal the votes' (a key the votes lack counts as different); the K grid and the
    number of components must match too.

    Args:
        votes, certificates: the two files' contents.
        votes_name, certificates_name: how the message names them (their paths).
        remake: how to make the right certificates, in parentheses after the fix (the CLI and the reports pass
            :func:`certified_circuits.commands.certify_command`), or None.

    Raises:
        ValueError: naming both files, the attribute and both values, and the fix.
    """
    for key in VOTES_SETTING_KEYS:
        if key not in certificates.attrs:
            continue
        v, c = attr_value(votes.attrs, key), attr_value(certificates.attrs, key)
        if str(v) != str(c):
            raise ValueError(
                f"{certificates_name} was not certified from {votes_name}: {key} is {c!r} in the "
                f"certificates but {v!r} in the votes; pass the certificates made from these votes"
                + (f" ({remake})" if remake else "")
            )
    if (
        not np.array_equal(np.asarray(votes.k_grid, float), np.asarray(certificates.k_grid, float))
        or votes.selection_counts.shape[-1] != certificates.decision.shape[-1]
    ):
        raise ValueError(
            f"{certificates_name} was not certified from {votes_name}: their K grids or component "
            f"counts differ; pass the certificates made from these votes"
        )


def _check_counts(counts: np.ndarray, total: int, name: str) -> np.ndarray:
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"{name} must be integer vote counts, got dtype {counts.dtype}")
    if counts.size and (counts.min() < 0 or counts.max() > total):
        raise ValueError(f"{name} must lie in [0, {total}] (the number of samples drawn)")
    return counts.astype(np.int64)


def selected_decision(selection_counts: np.ndarray, n0: int) -> np.ndarray:
    """``c_u``: 1 where the selection samples include ``u`` more often than not, else 0 (int8)."""
    n0 = check_count("n0", n0)
    selection_counts = _check_counts(selection_counts, n0, "selection_counts")
    return (2 * selection_counts > n0).astype(np.int8)


def binomial_tail(k: np.ndarray | int, n: np.ndarray | int, p: float) -> np.ndarray:
    """``P[Bin(n, p) >= k]`` elementwise (float64): the one binomial tail of the package (the certificates'
    p-values, the planner's power, the reports' exact McNemar test).

    ``k`` and ``n`` broadcast; ``k <= 0`` gives 1 and ``k > n`` gives 0. Computed as the regularised incomplete
    beta function ``I_p(k, n - k + 1)`` (``scipy.special.betainc``: accurate in the far tail, light to import).

    Against the exact sum ``sum_{i >= k} C(n, i) p^i (1 - p)^(n - i)`` in rationals (``p`` as its float64's exact
    rational), at n <= 2,130 and tails above 1e-290: within 1.1e-13 relative, 2e-15 at McNemar's ``p = 1/2``.
    ``scipy.special.bdtrc(k - 1, n, p)``, used before, was off by up to 1.5e-12; ``betaincc(n - k + 1, k, 1 - p)``
    is closer still for ``p >= 1/2`` (2e-16) but ten times slower (1.7 ms for a table of 1,000 counts) on the
    certificates' path (tests/unit/core/test_binomial_tail.py).

    Args:
        k: int, the least number of successes counted.
        n: int >= 0, the number of trials.
        p: the success probability, a float in [0, 1].

    Returns:
        float64 array of the broadcast shape of ``k`` and ``n``.
    """
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    inside = (k >= 1) & (k <= n)
    k_in, n_in = np.where(inside, k, 1), np.where(inside, n, 1)  # in-range arguments everywhere (no warning)
    tail = betainc(k_in, n_in - k_in + 1, p)
    return np.where(k <= 0, 1.0, np.where(inside, tail, 0.0))


def binomial_pvalue(agreeing: np.ndarray | int, n: np.ndarray | int, tau: float) -> np.ndarray:
    """``P[Bin(n, tau) >= agreeing]``, the one-sided p-value of ``H0: p <= tau`` (float64).

    ``agreeing`` and ``n`` broadcast (the planner passes one ``n`` per count); a count above ``n`` gives 0.

    Computed by :func:`binomial_tail` (the regularised incomplete beta function, accurate in the far tail, and
    light to import); ``agreeing = 0`` gives 1. With one ``n`` for many counts (a K grid of a ResNet class: 76,800),
    the tail is computed once for every count ``0..n + 1`` and looked up: the same values, from ``n + 2``
    evaluations instead of one per count.
    """
    agreeing = np.asarray(agreeing, dtype=np.int64)
    if (
        np.ndim(n) == 0
        and agreeing.size > int(n) + 2
        and agreeing.min(initial=0) >= 0
        and agreeing.max(initial=0) <= n + 1
    ):
        return binomial_tail(np.arange(int(n) + 2), n, tau)[agreeing]
    return binomial_tail(agreeing, n, tau)


def pvalues(
    selection_counts: np.ndarray, certification_counts: np.ndarray, n0: int, n: int, tau: float
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2 of Algorithm 1: the guessed decisions ``c_u`` and their p-values.

    Args:
        selection_counts: int ``[..., U]`` votes of the ``n0`` selection sub-datasets.
        certification_counts: int ``[..., U]`` votes of the ``n`` certification sub-datasets.
        n0, n: the numbers of selection and certification sub-datasets.
        tau: the confidence threshold, checked here (a raw float).

    Returns:
        ``(guess, pvalue)``: int8 ``c_u`` (1 in, 0 out) and float64 ``P[Bin(n, tau) >= n_u]``, of the counts' shape.
    """
    return _pvalues(selection_counts, certification_counts, n0, n, check_tau(tau))


def _pvalues(
    selection_counts: np.ndarray, certification_counts: np.ndarray, n0: int, n: int, tau: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pvalues` of a tau already checked (a :class:`~certified_circuits.core.setting.Setting`'s, or
    :func:`pvalues`' own): the counts are checked here, tau is not."""
    n = check_count("n", n)
    selection_counts = np.asarray(selection_counts)
    certification_counts = _check_counts(certification_counts, n, "certification_counts")
    if selection_counts.shape != certification_counts.shape:
        raise ValueError(
            f"selection_counts {selection_counts.shape} and certification_counts "
            f"{certification_counts.shape} must have the same shape"
        )
    guess = selected_decision(selection_counts, n0)
    agreeing = np.where(guess == IN, certification_counts, n - certification_counts)
    return guess, binomial_pvalue(agreeing, n, tau)


def reject(pvalue: np.ndarray, alpha: float, correction: str = "bonferroni") -> np.ndarray:
    """FWER-controlled rejections over the last axis (the components), per leading index.

    Bonferroni rejects ``p <= alpha / m``. Holm sorts the ``m`` p-values and rejects the smallest
    ``p_(1..j)`` while ``p_(i) <= alpha / (m - i + 1)``; it controls the FWER at ``alpha`` under any
    dependence, like Bonferroni, and rejects a superset of Bonferroni's.
    """
    alpha = check_alpha(alpha)
    correction = check_correction(correction)
    pvalue = np.asarray(pvalue, dtype=np.float64)
    m = pvalue.shape[-1]
    if correction == "bonferroni":
        return pvalue <= alpha / m
    order = np.argsort(pvalue, axis=-1, kind="stable")
    ordered = np.take_along_axis(pvalue, order, axis=-1)
    thresholds = alpha / (m - np.arange(m))
    passed = np.cumprod(ordered <= thresholds, axis=-1).astype(bool)
    rejected = np.empty_like(passed)
    np.put_along_axis(rejected, order, passed, axis=-1)
    return rejected


def certify(selection_counts: np.ndarray, certification_counts: np.ndarray, n0: int, n: int, tau: float, alpha: float,
            correction: str = "bonferroni") -> np.ndarray:  # fmt: skip
    """Algorithm 1 (``CertifyCircuit``) on vote counts.

    Args:
        selection_counts: int ``[..., U]`` inclusion counts from the ``n0`` selection samples.
        certification_counts: int ``[..., U]`` inclusion counts from ``n`` independent samples.
        n0, n: numbers of selection and certification samples.
        tau: confidence threshold in [0.5, 1).
        alpha: family-wise failure probability in (0, 1).
        correction: ``"bonferroni"`` (paper) or ``"holm"``; runs over the last axis separately for
            each leading index (each K of a grid).

    Returns:
        int8 array of the counts' shape: 1 certified in, 0 certified out, -1 abstain.
    """
    return decide(selection_counts, certification_counts, n0, n, tau, alpha, correction)[0]


def majority_vote(selection_counts: np.ndarray, certification_counts: np.ndarray, n0: int, n: int) -> np.ndarray:
    """Vanilla majority vote at identical compute (App. D): no tau, no test.

    Pools all ``n0 + n`` samples the certified pipeline drew and keeps ``u`` iff more than half of
    them include it (bool, counts' shape).
    """
    n0, n = check_count("n0", n0), check_count("n", n)
    total = _check_counts(selection_counts, n0, "selection_counts") + _check_counts(
        certification_counts, n, "certification_counts"
    )
    return 2 * total > n0 + n


def certified_radius(tau: float, p_del: float) -> int:
    """Eq. (r): ``floor(log(1.5 - tau) / log p_del)``, the certified edit distance.

    Computed as the largest integer ``r >= 0`` with ``p_del^r >= 1.5 - tau`` (the exact condition the
    floor expresses), so floating-point error in the log ratio can never round a boundary case the
    wrong way.

    Args:
        tau: the confidence threshold, checked here (a raw float).
        p_del: the deletion probability, checked here.

    Returns:
        The radius ``r >= 0`` (:func:`radius_of`).
    """
    return radius_of(check_tau(tau), check_p_del(p_del))


def radius_of(tau: float, p_del: float) -> int:
    """Eq. (r) of a tau and p_del already checked (a :class:`~certified_circuits.core.setting.Setting`'s fields):
    the computation behind :func:`certified_radius`, for callers that hold a validated setting.

    Args:
        tau: a valid confidence threshold (``0.5 <= tau < 1``; not checked again).
        p_del: a valid deletion probability (``0 < p_del < 1``; not checked again).

    Returns:
        The largest integer ``r >= 0`` with ``p_del^r >= 1.5 - tau``.
    """
    target = 1.5 - tau
    radius = max(0, math.floor(math.log(target) / math.log(p_del)))
    while p_del ** (radius + 1) >= target:
        radius += 1
    while radius > 0 and p_del**radius < target:
        radius -= 1
    return radius


def min_samples(tau: float, alpha: float, n_components: int = 1) -> int:
    """Smallest ``n`` certifying ``tau`` under perfect agreement: ``tau^n <= alpha / n_components``.

    ``n_components = 1`` is the per-component (uncorrected) requirement; ``|U|`` gives the
    Bonferroni-corrected, circuit-level one (App. C.2, Fig. n-vs-tau).

    Args:
        tau: the confidence threshold, checked here (a raw float).
        alpha: the family-wise failure probability, checked here.
        n_components: the number of corrected components (>= 1).

    Returns:
        The smallest ``n`` (:func:`samples_for`).
    """
    return samples_for(check_tau(tau), check_alpha(alpha), check_count("n_components", n_components))


def samples_for(tau: float, alpha: float, n_components: int) -> int:
    """:func:`min_samples` of a tau, alpha and component count already checked (a
    :class:`~certified_circuits.core.setting.Setting`'s fields), for callers that hold a validated setting.

    Args:
        tau: a valid confidence threshold (not checked again).
        alpha: a valid failure probability (not checked again).
        n_components: an integer >= 1 (not checked again).

    Returns:
        The smallest ``n >= 1`` with ``tau^n <= alpha / n_components``.
    """
    level = alpha / n_components
    n = max(1, math.ceil(math.log(level) / math.log(tau)))
    while n > 1 and tau ** (n - 1) <= level:
        n -= 1
    while tau**n > level:
        n += 1
    return n


def max_certifiable_tau(n: int, alpha: float, n_components: int = 1) -> float:
    """Largest tau certifiable with ``n`` samples under perfect agreement: ``(alpha / N)^(1/n)``.

    Any ``tau`` at most this value is certifiable; e.g. ``n = 1000``, ``alpha = 0.001``,
    ``N = 3840`` gives 0.98495 (the paper's tau* = 0.985).
    """
    n = check_count("n", n)
    alpha = check_alpha(alpha)
    n_components = check_count("n_components", n_components)
    return float((alpha / n_components) ** (1.0 / n))


def method_masks(votes: Votes, certificates: Certificates) -> dict[str, np.ndarray]:
    """The three circuits compared throughout the paper, bool ``[nK, U]`` each: the one place they are read off a
    votes and certificates pair (the shape check included).

    Args:
        votes: the vote counts (``baseline``: A on the full dataset).
        certificates: their decisions and majority vote.

    Returns:
        ``baseline``: A on the full dataset; ``majority``: majority vote at identical compute;
        ``certified``: certified-in components (abstentions dropped).

    Raises:
        ValueError: the votes and certificates are of different shapes.
    """
    if votes.baseline.shape != certificates.decision.shape:
        raise ValueError(
            f"votes ({votes.baseline.shape}) and certificates ({certificates.decision.shape}) do not match: "
            "were they produced from the same attributions and K grid?"
        )
    return {
        "baseline": votes.baseline.astype(bool),
        "majority": certificates.majority.astype(bool),
        "certified": certificates.decision == IN,
    }


#: what the decision rule returns: ``(decision, pvalue, majority)`` (:func:`decide`)
Decisions = tuple[np.ndarray, np.ndarray, np.ndarray]


def decide(
    selection_counts: np.ndarray,
    certification_counts: np.ndarray,
    n0: int,
    n: int,
    tau: float,
    alpha: float,
    correction: str = "bonferroni",
) -> Decisions:
    """The one path from vote counts to decisions: Algorithm 1 plus the majority vote at identical compute.

    Every certificate of the package comes from this rule: the public API (:func:`certified_circuits.certify_scores`,
    :func:`certified_circuits.certify_algorithm`, :func:`certified_circuits.certify_votes`, through
    :func:`decide_setting` and :func:`certify_votes_setting`, which take a validated Setting), the workflow's
    ``certify`` stage (through ``certify_votes``) and the attack (:func:`certify_votes` below). ``tau`` is checked
    here (a raw float); the Setting variants skip the check, their setting was checked when it was built.

    Args:
        selection_counts: int ``[..., U]`` votes of the ``n0`` selection sub-datasets.
        certification_counts: int ``[..., U]`` votes of the ``n`` certification sub-datasets.
        n0, n: the numbers of selection and certification sub-datasets.
        tau, alpha, correction: the test (see :func:`certify`).

    Returns:
        ``(decision, pvalue, majority)``: int8 in {1, 0, -1}, float64 p-values before correction, and
        bool majority circuits, each of the counts' shape.
    """
    return _decide(selection_counts, certification_counts, n0, n, check_tau(tau), alpha, correction)


def decide_setting(selection_counts: np.ndarray, certification_counts: np.ndarray, setting: Setting) -> Decisions:
    """:func:`decide` under a validated :class:`~certified_circuits.core.setting.Setting` (its n0, n, tau, alpha and
    correction): the setting was checked when it was built, so its tau is not checked again.

    Args:
        selection_counts: int ``[..., U]`` votes of the ``setting.n0`` selection sub-datasets.
        certification_counts: int ``[..., U]`` votes of the ``setting.n`` certification sub-datasets.
        setting: the setting the votes were counted with.

    Returns:
        ``(decision, pvalue, majority)`` as :func:`decide`.
    """
    return _decide(selection_counts, certification_counts, setting.n0, setting.n, setting.tau, setting.alpha,
                   setting.correction)  # fmt: skip


def _decide(
    selection: np.ndarray, certification: np.ndarray, n0: int, n: int, tau: float, alpha: float, correction: str
) -> Decisions:
    """:func:`decide` of a tau already checked (by :func:`decide`, or a Setting's), on the selection and
    certification vote counts."""
    guess, pvalue = _pvalues(selection, certification, n0, n, tau)
    decision = np.where(reject(pvalue, alpha, correction), guess, np.int8(ABSTAIN)).astype(np.int8)
    return decision, pvalue, majority_vote(selection, certification, n0, n)


def certify_votes(votes: Votes, tau: float, alpha: float, correction: str = "bonferroni") -> Certificates:
    """Algorithm 1 for every K of a votes record (:func:`decide`), as the decisions record of the workflow.

    The decisions carry their votes' settings (p_del, n0, n, seed, scorer, concept, ...) beside their own
    (tau, alpha, correction, radius), so every downstream table is labelled from the file. The public
    :func:`certified_circuits.certify_votes` wraps this with the plan check and returns a
    :class:`~certified_circuits.api.Certificate`.

    Args:
        votes: the vote counts (``attrs`` give ``p_del``, ``n0``, ``n``).
        tau, alpha, correction: the test; tau and the votes' p_del are checked here (raw values).

    Returns:
        The decisions record, ``[nK, U]``.
    """
    return _certify_votes(votes, check_tau(tau), check_p_del(float(votes.attrs["p_del"])), alpha, correction)


def certify_votes_setting(votes: Votes, setting: Setting) -> Certificates:
    """:func:`certify_votes` under a validated :class:`~certified_circuits.core.setting.Setting`, the one the votes
    were counted with (its p_del, n0 and n are the votes'): its tau is not checked again.

    Args:
        votes: the vote counts.
        setting: the setting (p_del, n0, n of the votes; tau, alpha and correction of the test).

    Returns:
        The decisions record, ``[nK, U]``.
    """
    return _certify_votes(votes, setting.tau, setting.p_del, setting.alpha, setting.correction)


def _certify_votes(votes: Votes, tau: float, p_del: float, alpha: float, correction: str) -> Certificates:
    """:func:`certify_votes` of a tau and p_del already checked."""
    n0, n = int(votes.attrs["n0"]), int(votes.attrs["n"])
    decision, pvalue, majority = _decide(
        votes.selection_counts, votes.certification_counts, n0, n, tau, alpha, correction
    )
    radius = radius_of(tau, p_del)
    return Certificates(
        k_grid=np.asarray(votes.k_grid, dtype=np.float64),
        decision=decision,
        majority=majority,
        pvalue=pvalue,
        attrs={
            **{k: v for k, v in votes.attrs.items() if k in VOTES_SETTING_KEYS},
            "tau": float(tau),
            "alpha": float(alpha),
            "correction": correction,
            "radius": radius,
            "n_components_tested": int(decision.shape[-1]),
        },
    )
