"""The equal-footing comparators of the certificate and the contested-set detector (issue 59; the pre-registration
in docs/embedded_default.md, "The fair testbed on equal footing: comparators that abstain as much").

Every method works at the truth's size: ``A_T`` keeps the top ``t_g = |T ∩ g|`` components of each group ``g`` by the
ranking score ``r_u(D')`` (the mean over D', ``|mean|`` when ``absolute``; ties to the lower index,
:func:`certified_circuits.core.discovery.top_count_circuit`). On D and on each outer bootstrap resample ``D'_b``
(:func:`~certified_circuits.analysis.stability.bootstrap_indices`, the same draws as the size-matched stage):

certified
    Algorithm 1 on ``A_T``'s votes, :func:`certified_circuits.analysis.size_matched.certify_at_counts`.
matched cut
    ``rho_u`` the rank of ``u`` in its group on D' (1 = top, :func:`group_ranks`); with the certificate's
    ``a_g = |IN ∩ g|`` and ``m_g = |abstain ∩ g|`` on D': in if ``rho <= a_g``, abstain if ``rho <= a_g + m_g``,
    out otherwise (:func:`matched_cut`): it abstains exactly as much as the certificate.
bootstrap interval (the Technion MIB entry, arXiv 2510.25786, cut at the truth's size)
    ``B_in`` inner bootstrap resamples of D'; ``r̄_u``, ``s_u`` the mean and standard deviation (``ddof = 1``, the
    bootstrap standard error of Efron and Tibshirani) of ``r_u`` over them; ``c_g`` the midpoint of the
    ``t_g``-th and ``(t_g + 1)``-th ranking scores of group ``g`` on D' (``+inf`` when ``t_g = 0``, ``-inf`` when
    ``t_g = |g|``: ``A_T`` keeps none, or all, of the group); in if ``r̄ - z s > c_g``, out if ``r̄ + z s < c_g``,
    abstain otherwise (:func:`interval_rule`).
consensus (CIRCUS's core / contingent / noise, arXiv 2603.00523)
    ``A_T`` on the same ``B_in`` inner resamples; ``f_u`` the share that keeps ``u``; in if ``f >= q``, out if
    ``1 - f >= q`` (``f <= 1 - q`` read on the counts, so 2 of 20 is out at q = 0.9 whatever ``1 - 0.9`` rounds to),
    abstain otherwise (:func:`consensus_rule`).
two values
    certified IN, IN + abstain and the majority vote, each beside the baseline's top of the same per-group sizes on
    the same D' (the ranks above).

**Inner streams.** ``SeedSequence(inner_seed).spawn(B + 1)``: child 0 draws D's ``B_in`` inner resamples, child
``1 + b`` those of ``D'_b``, each ``default_rng(child).integers(0, |D|, (B_in, |D|))``, positions into D' (a repeated
example of D' stays repeated). No two datasets share a stream, and the interval and consensus of one dataset share
its draws (:func:`inner_resamples`). Resample means are one product of a multiplicity matrix with the scores.

**Shares** (:func:`share_columns`). A component is live when its score is non-zero in some example of D. Over the
``B`` outer resamples (``B (B - 1) / 2`` pairs): the label-change share and in <-> out flip share of each
three-valued labelling and the membership-change share of each two-valued circuit and of its size-matched baseline
(:func:`~certified_circuits.analysis.stability.label_change_share`, :func:`~certified_circuits.analysis.stability.flip_share`),
over the live components and over all; the abstain share; the IN precision on D and its mean over the resamples
whose IN is non-empty (the empty ones counted), over the scored (non-grey) components.

**Contested set** (:func:`contested_share`). ``A_T`` on ``n_pop`` samples of ``|D|`` examples drawn with
replacement from the population (``default_rng(population_seed).integers(0, N, (n_pop, |D|))``); contested when
kept in a share within :data:`~certified_circuits.analysis.baseline_conditions.MEMBERSHIP_BAND` (0.2-0.8,
inclusive); without one (the workflow's ``stability`` stage: ``cli/testbed.py``) the detector columns are NaN.
Each three-valued method's contestedness score on D (:func:`contestedness`): certified ``1 - |2 v/n - 1|`` of its
``v`` certification votes of ``n``; interval ``-|r̄ - c_g| / s`` (``0`` when
``r̄ = c_g``, ``-inf`` when ``s = 0`` and ``r̄ != c_g``: a point mass off the cut is uncontested); consensus
``1 - |2 f - 1|``; matched cut ``-|rho - (a_g + (m_g + 1) / 2)|``, the distance in ranks from the middle of its
group's abstain window, i.e. its in/out boundary (``a_g + 1/2`` when ``m_g = 0``), so its abstain set in a group is
the ``m_g`` highest scores there. The detector (:func:`detector`) at the certificate's count ``k = |abstain_cert ∩
live|`` on D takes the top-``k`` live components by the score, ties broken by one seeded random permutation of the
live components (``default_rng(tie_seed)``, the same for every method, never by index); precision and recall of that
set against the live contested set, and the AUROC of the score, ``U / (n_1 n_0)`` of
:func:`scipy.stats.mannwhitneyu` (ties count one half).

**In the workflow** the ``stability`` stage writes one concept's rows without a population (``truth_size_equal/``;
``cli/testbed.py``, which reuses :func:`labellings` for the truth-size table) and the headline shows them.

**Hypotheses** (:func:`equal_footing_hypotheses`): H2a, H2b, H2c and H4 over model seeds with
:mod:`certified_circuits.analysis.seed_tests`' exact sign-flip test, Holm within each hypothesis and "untestable at
n"; per seed the mean over concepts, then over settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.baseline_conditions import MEMBERSHIP_BAND, dataset_scores
from certified_circuits.analysis.recovery import confusion, rates, scored_only
from certified_circuits.analysis.seed_tests import COLUMNS, finish_family, hypothesis_row, seed_values
from certified_circuits.analysis.size_matched import certify_at_counts
from certified_circuits.analysis.stability import bootstrap_indices, flip_share, label_change_share
from certified_circuits.core.contracts import ABSTAIN, IN, OUT
from certified_circuits.core.discovery import GroupIndex, group_counts, top_count_rows
from certified_circuits.core.setting import Setting

#: the three-valued labellings (in / out / abstain), the certificate first
THREE_VALUED = ("certified", "matched_cut", "interval", "consensus")
#: the certificate's comparators in H2a, H2c and H4
COMPARATORS = THREE_VALUED[1:]
#: the two-valued circuits, each beside the baseline's top of its per-group sizes
TWO_VALUED = ("certified_in", "certified_in_abstain", "majority")
#: the columns of :func:`equal_footing_rows` (three-valued rows leave the baseline columns NaN, two-valued rows the
#: flip, abstain, IN-precision and detector columns)
EQUAL_FOOTING_COLUMNS = ("method", "values", "change_share_live", "change_share_all", "flip_share_live",
                         "flip_share_all", "baseline_change_share_live", "baseline_change_share_all",
                         "abstain_share_live", "abstain_share_all", "size_d", "abstain_d", "in_precision_d",
                         "in_precision_mean", "in_empty_resamples", "detector_count", "detector_precision",
                         "detector_recall", "detector_auroc", "n_contested", "n_contested_all", "n_live",
                         "n_components", "n_true", "n_grey", "resamples", "inner_resamples", "population_samples",
                         "can_certify_in", "certified_in_any")  # fmt: skip
#: most inner resamples of each D' (``FootingProtocol.n_inner``; ``testbed.equal_footing.inner_resamples``'s bound)
MAX_INNER_RESAMPLES = 10_000
#: slack of the consensus rule's comparisons of a count with ``q B_in`` (counts are integers)
_COUNT_GUARD = 1e-9


@dataclass(frozen=True)
class FootingProtocol:
    """The pre-registered constants (defaults: the pre-registration's).

    Attributes:
        n_resamples, bootstrap_seed: ``B`` outer resamples of D and their seed (those of the size-matched stage).
        n_inner, inner_seed: ``B_in`` inner resamples of each D' (>= 2, a standard deviation needs two) and the
            seed their streams are spawned from (module docstring).
        q: the consensus threshold, in (0.5, 1].
        z: the interval's normal quantile.
        n_population_samples, population_seed: the contested set's samples of the population and their seed.
        tie_seed: the seed of the detector's tie-breaking permutation.
    """

    n_resamples: int = 50
    bootstrap_seed: int = 0
    n_inner: int = 20
    inner_seed: int = 1
    q: float = 0.9
    z: float = 1.96
    n_population_samples: int = 200
    population_seed: int = 2
    tie_seed: int = 0

    def __post_init__(self) -> None:
        if self.n_resamples < 2 or not 2 <= self.n_inner <= MAX_INNER_RESAMPLES or self.n_population_samples < 1:
            raise ValueError(f"{self}: n_resamples must be >= 2 (pairs), n_inner in [2, {MAX_INNER_RESAMPLES}] (a "
                             "standard deviation needs two), n_population_samples >= 1")  # fmt: skip
        if not 0.5 < self.q <= 1 or not 0 < self.z < np.inf:
            raise ValueError(f"q={self.q} must lie in (0.5, 1] and z={self.z} be positive and finite")


def _inverse(groups: np.ndarray) -> tuple[np.ndarray, int]:
    labels, inverse = np.unique(np.asarray(groups), return_inverse=True)
    return inverse, labels.size


def per_group(mask: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """int64 ``[G]``: how many components of a bool ``[U]`` mask lie in each group (sorted group-id order), as
    :func:`~certified_circuits.core.discovery.group_counts`, by one ``bincount``."""
    inverse, n_groups = _inverse(groups)
    return np.bincount(inverse, weights=np.asarray(mask, dtype=np.float64), minlength=n_groups).astype(np.int64)


def group_ranks(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """int64 ``[U]``: the rank of each component within its group by descending value, 1 the top, ties to the lower
    index (``A_T``'s order: ``rank <= t_g`` is ``top_count_circuit(values, groups, t)``)."""
    values = np.asarray(values, dtype=np.float64)
    inverse, n_groups = _inverse(groups)
    order = np.lexsort((np.arange(values.size), -values, inverse))
    starts = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=n_groups))[:-1]])
    ranks = np.empty(values.size, dtype=np.int64)
    ranks[order] = np.arange(values.size) - starts[inverse[order]] + 1
    return ranks


def matched_cut(ranks: np.ndarray, groups: np.ndarray, n_in: np.ndarray, n_abstain: np.ndarray) -> np.ndarray:
    """The matched cut (module docstring): int8 ``[U]``, in where ``rank <= a_g``, abstain where ``rank <= a_g +
    m_g``, out otherwise; ``ranks`` of :func:`group_ranks`, ``n_in = a``, ``n_abstain = m`` int ``[G]``."""
    inverse, _ = _inverse(groups)
    a, m = np.asarray(n_in)[inverse], np.asarray(n_abstain)[inverse]
    return np.where(ranks <= a, IN, np.where(ranks <= a + m, ABSTAIN, OUT)).astype(np.int8)


def group_cuts(ranking: np.ndarray, ranks: np.ndarray, groups: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """float64 ``[U]``: each component's ``c_g``, the midpoint of its group's ``t_g``-th and ``(t_g + 1)``-th
    ranking scores (``+inf`` for ``t_g = 0``, ``-inf`` for ``t_g = |g|``); ``ranks`` of :func:`group_ranks`."""
    inverse, n_groups = _inverse(groups)
    counts, sizes = np.asarray(counts, dtype=np.int64), np.bincount(inverse, minlength=n_groups)
    upper, lower = np.zeros(n_groups), np.zeros(n_groups)
    at = ranks == counts[inverse]
    upper[inverse[at]] = np.asarray(ranking, dtype=np.float64)[at]
    below = ranks == counts[inverse] + 1
    lower[inverse[below]] = np.asarray(ranking, dtype=np.float64)[below]
    cut = np.where(counts == 0, np.inf, np.where(counts == sizes, -np.inf, (upper + lower) / 2))
    return cut[inverse]


def interval_rule(inner_rankings: np.ndarray, cut: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bootstrap interval (module docstring).

    Args:
        inner_rankings: float ``[B_in, U]``, the ranking score on each inner resample.
        cut: float ``[U]``, each component's ``c_g`` (:func:`group_cuts` on D').
        z: the normal quantile.

    Returns:
        ``(labels int8 [U], mean r̄ [U], sd s [U])``: in if ``r̄ - z s > c``, out if ``r̄ + z s < c``, else abstain.
    """
    inner = np.asarray(inner_rankings, dtype=np.float64)
    mean, sd = inner.mean(axis=0), inner.std(axis=0, ddof=1)
    labels = np.where(mean - z * sd > cut, IN, np.where(mean + z * sd < cut, OUT, ABSTAIN)).astype(np.int8)
    return labels, mean, sd


def consensus_rule(kept: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """The consensus labels (module docstring): ``kept`` bool ``[B_in, U]`` (``A_T`` on each inner resample).

    Returns:
        ``(labels int8 [U], f [U])``: in if ``#kept >= q B_in``, out if ``B_in - #kept >= q B_in``, else abstain.
    """
    kept = np.asarray(kept, dtype=bool)
    n, count = kept.shape[0], kept.sum(axis=0)
    need = q * n - _COUNT_GUARD
    labels = np.where(count >= need, IN, np.where(n - count >= need, OUT, ABSTAIN)).astype(np.int8)
    return labels, count / n


def contestedness(method: str, **values: np.ndarray) -> np.ndarray:
    """A three-valued method's contestedness score on D (module docstring), float64 ``[U]``, higher = more contested.

    Args:
        method: one of :data:`THREE_VALUED`.
        values: certified ``votes``, ``n``; interval ``mean``, ``sd``, ``cut``; consensus ``share``; matched cut
            ``ranks``, ``groups``, ``n_in``, ``n_abstain``.
    """
    if method == "certified":
        return 1.0 - np.abs(2.0 * np.asarray(values["votes"], dtype=np.float64) / values["n"] - 1.0)
    if method == "consensus":
        return 1.0 - np.abs(2.0 * np.asarray(values["share"], dtype=np.float64) - 1.0)
    if method == "interval":
        gap, sd = np.abs(values["mean"] - values["cut"]), values["sd"]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(gap == 0, 0.0, np.where(sd > 0, -gap / np.where(sd > 0, sd, 1.0), -np.inf))
    if method == "matched_cut":
        inverse, _ = _inverse(values["groups"])
        boundary = np.asarray(values["n_in"])[inverse] + (np.asarray(values["n_abstain"])[inverse] + 1) / 2
        return -np.abs(values["ranks"] - boundary)
    raise ValueError(f"method {method!r}: choose one of {THREE_VALUED}")


def detector(score: np.ndarray, contested: np.ndarray, count: int, tie_seed: int) -> dict[str, float]:
    """A contestedness score as a detector of the contested set (module docstring), over the components given.

    Args:
        score: float ``[U']``; contested: bool ``[U']``; count: ``k``, how many the detector flags.
        tie_seed: seed of the permutation that orders equal scores.

    Returns:
        ``precision`` (NaN for ``k = 0``), ``recall`` (NaN without a contested component) of the top-``k`` and
        ``auroc`` of the score (NaN unless both classes occur).
    """
    from scipy.stats import mannwhitneyu  # here: scipy.stats costs 0.4 s to import, and only the detector needs it

    score, contested = np.asarray(score, dtype=np.float64), np.asarray(contested, dtype=bool)
    permutation = np.random.default_rng(tie_seed).permutation(score.size)
    top = np.lexsort((permutation, -score))[:count]
    hits, n1, n0 = int(contested[top].sum()), int(contested.sum()), int((~contested).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        auroc = (mannwhitneyu(score[contested], score[~contested], method="asymptotic").statistic / (n1 * n0)
                 if n1 and n0 else np.nan)  # fmt: skip
    return {"precision": hits / count if count else np.nan, "recall": hits / n1 if n1 else np.nan,
            "auroc": float(auroc)}  # fmt: skip


def multiplicities(indices: np.ndarray, n_examples: int) -> np.ndarray:
    """int64 ``[R, n_examples]``: how often each example is drawn in each row of ``indices [R, m]``."""
    indices = np.asarray(indices, dtype=np.int64)
    offsets = (np.arange(indices.shape[0]) * n_examples)[:, None]
    flat = np.bincount((indices + offsets).ravel(), minlength=indices.shape[0] * n_examples)
    return flat.reshape(indices.shape[0], n_examples)


def inner_resamples(n_examples: int, n_inner: int, inner_seed: int, n_outer: int) -> np.ndarray:
    """int64 ``[n_outer + 1, B_in, |D|]``: row 0 D's inner resamples, row ``1 + b`` those of outer resample ``b``,
    each from its own child of ``SeedSequence(inner_seed).spawn(n_outer + 1)`` (positions into that dataset)."""
    children = np.random.SeedSequence(int(inner_seed)).spawn(n_outer + 1)
    return np.stack([np.random.default_rng(c).integers(0, n_examples, size=(n_inner, n_examples)) for c in children])


def contested_share(population: np.ndarray, groups: np.ndarray, counts: np.ndarray, n_examples: int, n_samples: int,
                    seed: int, absolute: bool = False) -> np.ndarray:  # fmt: skip
    """float64 ``[U]``: the share of ``n_samples`` population samples of ``n_examples`` (drawn with replacement,
    ``default_rng(seed)``) whose ``A_T`` keeps each component; contested where it lies in ``MEMBERSHIP_BAND``."""
    population = np.asarray(population, dtype=np.float64)
    draws = np.random.default_rng(seed).integers(0, population.shape[0], size=(n_samples, n_examples))
    weights = multiplicities(draws, population.shape[0])
    return top_count_rows(dataset_scores(population, weights, absolute), groups, counts).mean(axis=0)


@dataclass(frozen=True)
class Labellings:
    """Every method on D (row 0) and on the ``B`` outer resamples (rows 1..B).

    Attributes:
        three: method of :data:`THREE_VALUED` -> int8 ``[B + 1, U]``.
        two: method of :data:`TWO_VALUED` -> bool ``[B + 1, U]``; baselines: the same keys, the baseline's top of
            its per-group sizes.
        scores: method of :data:`THREE_VALUED` -> its contestedness score on D, float64 ``[U]``.
        kept, certificate: bool ``[B + 1, U]`` ``A_T`` itself on each row; the ``TruthSizeCertificate`` on D.
    """

    three: dict[str, np.ndarray]
    two: dict[str, np.ndarray]
    baselines: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    kept: np.ndarray | None = None
    certificate: Any = None


def labellings(scores: np.ndarray, groups: np.ndarray, counts: np.ndarray, setting: Setting,
               protocol: FootingProtocol, *, absolute: bool = False, mask_seed: int | None = None) -> Labellings:  # fmt: skip
    """Every method of the module docstring on D and on each outer resample.

    Args:
        scores: float ``[|D|, U]``; groups: int ``[U]``; counts: int ``[G]`` the truth's per-group sizes.
        setting: the certification setting; mask_seed: its masks' seed (default ``setting.seed``).
        protocol: the resamples, seeds and thresholds.
        absolute: rank by ``|mean|``.

    Returns:
        :class:`Labellings`.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n_examples = scores.shape[0]
    rows = np.concatenate([np.arange(n_examples)[None],
                           bootstrap_indices(n_examples, protocol.n_resamples, protocol.bootstrap_seed)])
    inner = inner_resamples(n_examples, protocol.n_inner, protocol.inner_seed, protocol.n_resamples)
    three: dict[str, list] = {m: [] for m in THREE_VALUED}
    two: dict[str, list] = {m: [] for m in TWO_VALUED}
    base: dict[str, list] = {m: [] for m in TWO_VALUED}
    kept: list[np.ndarray] = []
    inverse, _ = _inverse(groups)
    for b, picked in enumerate(rows):
        sub = scores[picked]
        cert = certify_at_counts(sub, groups, counts, setting, absolute=absolute, mask_seed=mask_seed)
        kept.append(cert.baseline)
        ranking = dataset_scores(sub, np.ones((1, n_examples)), absolute)[0]
        ranks = group_ranks(ranking, groups)
        n_in, n_abstain = per_group(cert.decision == IN, groups), per_group(cert.decision == ABSTAIN, groups)
        inner_rankings = dataset_scores(sub, multiplicities(inner[b], n_examples), absolute)  # [B_in, U]
        cut = group_cuts(ranking, ranks, groups, counts)
        interval, mean, sd = interval_rule(inner_rankings, cut, protocol.z)
        consensus, share = consensus_rule(top_count_rows(inner_rankings, groups, counts), protocol.q)
        for name, labels in zip(THREE_VALUED, (cert.decision, matched_cut(ranks, groups, n_in, n_abstain), interval,
                                               consensus)):  # fmt: skip
            three[name].append(labels)
        for name, circuit in cert.circuits().items():
            two[name].append(circuit)
            base[name].append(ranks <= per_group(circuit, groups)[inverse])
        if b == 0:
            on_d_certificate, votes = cert, cert.certified_votes
            on_d = {"certified": contestedness("certified", votes=votes, n=setting.n),
                    "matched_cut": contestedness("matched_cut", ranks=ranks, groups=groups, n_in=n_in,
                                                 n_abstain=n_abstain),
                    "interval": contestedness("interval", mean=mean, sd=sd, cut=cut),
                    "consensus": contestedness("consensus", share=share)}  # fmt: skip
    return Labellings(three={m: np.stack(v) for m, v in three.items()}, two={m: np.stack(v) for m, v in two.items()},
                      baselines={m: np.stack(v) for m, v in base.items()}, scores=on_d, kept=np.stack(kept),
                      certificate=on_d_certificate)  # fmt: skip


def live_share(share: Any, labels: np.ndarray, live: np.ndarray) -> tuple[float, float]:
    """``(share over the live components, share over all)`` of a per-resample-pair share function
    (:func:`~certified_circuits.analysis.stability.label_change_share` or ``flip_share``) of ``labels [B, U]``; NaN
    over the live components when there is none."""
    labels = np.asarray(labels)[:, None, :]
    live = np.asarray(live, dtype=bool)
    on_live = float(share(labels[:, :, live])[0]) if live.any() else float("nan")
    return on_live, float(share(labels)[0])


def _precision(circuits: np.ndarray, truth: np.ndarray, grey: np.ndarray) -> np.ndarray:
    return rates(confusion(*scored_only(circuits, truth, grey)))["precision"]


def share_columns(found: Labellings, live: np.ndarray, truth: np.ndarray, grey: np.ndarray) -> dict[str, dict]:
    """Per method, the share columns of :data:`EQUAL_FOOTING_COLUMNS` (module docstring): the changes over the
    outer resamples (rows 1..B of ``found``), the sizes and IN precision on D (row 0)."""
    live = np.asarray(live, dtype=bool)
    out: dict[str, dict] = {}
    for method, labels in found.three.items():
        resampled, in_circuits = labels[1:], labels == IN
        precision = _precision(in_circuits[1:], truth, grey)
        change, flips = live_share(label_change_share, resampled, live), live_share(flip_share, resampled, live)
        abstain = resampled == ABSTAIN
        out[method] = {"values": 3, "change_share_live": change[0], "change_share_all": change[1],
                       "flip_share_live": flips[0], "flip_share_all": flips[1],
                       "abstain_share_live": float(abstain[:, live].mean()) if live.any() else float("nan"),
                       "abstain_share_all": float(abstain.mean()), "size_d": int(in_circuits[0].sum()),
                       "abstain_d": int((labels[0] == ABSTAIN).sum()),
                       "in_precision_d": float(_precision(in_circuits[0], truth, grey)),
                       "in_precision_mean": float(np.nanmean(precision)) if np.isfinite(precision).any() else np.nan,
                       "in_empty_resamples": int((~in_circuits[1:].any(axis=1)).sum())}  # fmt: skip
    for method, circuits in found.two.items():
        change = live_share(label_change_share, circuits[1:], live)
        base = live_share(label_change_share, found.baselines[method][1:], live)
        out[method] = {"values": 2, "change_share_live": change[0], "change_share_all": change[1],
                       "baseline_change_share_live": base[0], "baseline_change_share_all": base[1],
                       "size_d": int(circuits[0].sum())}  # fmt: skip
    return out


def equal_footing_rows(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, setting: Setting,
                       population: np.ndarray | None, *, absolute: bool = False, exclude: np.ndarray | None = None,
                       mask_seed: int | None = None, protocol: FootingProtocol = FootingProtocol(),
                       found: Labellings | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One (seed, concept, scorer, setting) cell of the equal-footing testbed (module docstring).

    Args:
        scores: float ``[|D|, U]`` per-example scores of D.
        groups: int ``[U]``; truth: bool ``[U]`` the verified truth (its per-group sizes are ``t``).
        setting: the certification setting; mask_seed: the masks' seed (the votes stage's).
        population: float ``[N, U]`` the population's scores (the contested set), or None (the workflow has none):
            then ``detector_*``, ``n_contested`` and ``n_contested_all`` are NaN and ``population_samples`` is 0.
        absolute: rank by ``|mean|``; exclude: bool ``[U]`` grey components (left out of precision only).
        protocol: :class:`FootingProtocol`.
        found: :func:`labellings` of these arguments where the caller has them (else computed here).

    Returns:
        One row per method of :data:`THREE_VALUED` then :data:`TWO_VALUED`, columns :data:`EQUAL_FOOTING_COLUMNS`
        (the caller adds seed, concept, scorer and setting). ``can_certify_in`` is the plan's; ``certified_in_any``
        whether the certificate has IN on some outer resample (H2a-H2c read only such cells).
    """
    from certified_circuits.core.planning import plan

    scores, truth = np.asarray(scores, dtype=np.float64), np.asarray(truth, dtype=bool)
    grey = np.zeros_like(truth) if exclude is None else np.asarray(exclude, dtype=bool)
    counts = group_counts(truth, GroupIndex.from_groups(groups))
    live = (scores != 0).any(axis=0)
    if found is None:
        found = labellings(scores, groups, counts, setting, protocol, absolute=absolute, mask_seed=mask_seed)
    columns = share_columns(found, live, truth, grey)
    common: dict[str, Any] = {"n_contested": np.nan, "n_contested_all": np.nan, "population_samples": 0}
    if population is not None:
        contested = contested_share(population, groups, counts, scores.shape[0], protocol.n_population_samples,
                                    protocol.population_seed, absolute)  # fmt: skip
        contested = (contested >= MEMBERSHIP_BAND[0]) & (contested <= MEMBERSHIP_BAND[1])
        count = int(((found.three["certified"][0] == ABSTAIN) & live).sum())
        for method, score in found.scores.items():
            found_d = detector(score[live], contested[live], count, protocol.tie_seed)
            columns[method].update({"detector_count": count, **{f"detector_{k}": v for k, v in found_d.items()}})
        common = {"n_contested": int((contested & live).sum()), "n_contested_all": int(contested.sum()),
                  "population_samples": protocol.n_population_samples}  # fmt: skip
    common.update({"n_live": int(live.sum()), "n_components": int(truth.size), "n_true": int(truth[~grey].sum()),
                   "n_grey": int(grey.sum()), "resamples": protocol.n_resamples, "inner_resamples": protocol.n_inner,
                   "can_certify_in": bool(plan(scores.shape[0], scores.shape[1], setting).can_certify_in),
                   "certified_in_any": bool((found.three["certified"][1:] == IN).any())})  # fmt: skip
    return [{key: {**columns[m], **common, "method": m}.get(key, np.nan) for key in EQUAL_FOOTING_COLUMNS}
            for m in THREE_VALUED + TWO_VALUED]  # fmt: skip


#: the tests: (hypothesis, claim, certified method, its column, comparator method, its column, alternative)
TESTS = tuple(
    [("H2a", f"certified labels change less often than {c}'s (live components)", "certified", "change_share_live",
      c, "change_share_live", "less") for c in COMPARATORS]
    + [("H2b", f"{m}'s memberships change less often than the baseline's top-|{m}| per group (live components)", m,
        "change_share_live", m, "baseline_change_share_live", "less") for m in TWO_VALUED[:2]]
    + [("H2c", f"certified labels flip in <-> out less often than {c}'s (live components)", "certified",
        "flip_share_live", c, "flip_share_live", "less") for c in COMPARATORS]
    + [("H4", f"the certificate's contestedness detects the contested set better (AUROC) than {c}'s", "certified",
        "detector_auroc", c, "detector_auroc", "greater") for c in COMPARATORS])  # fmt: skip
#: the hypotheses that read only the cells where IN is possible (the replaced H2's rule)
WHERE_IN_POSSIBLE = ("H2a", "H2b", "H2c")
_CELL = ["seed", "concept", "scorer", "setting"]


def paired_cells(rows: pd.DataFrame, method: str, column: str, other: str, other_column: str) -> pd.DataFrame:
    """One row per (seed, setting): the mean over its concepts of ``method``'s ``column`` (``certified``) and
    ``other``'s ``other_column`` (``baseline``), over the cells where both are defined."""
    mine = rows[rows["method"] == method][_CELL + [column]].rename(columns={column: "certified"})
    theirs = rows[rows["method"] == other][_CELL + [other_column]].rename(columns={other_column: "baseline"})
    pairs = mine.merge(theirs, on=_CELL).dropna(subset=["certified", "baseline"])
    return pairs.groupby(["seed", "setting"], sort=True)[["certified", "baseline"]].mean().reset_index()


def equal_footing_hypotheses(rows: pd.DataFrame, seeds: Sequence[int]) -> pd.DataFrame:
    """H2a, H2b, H2c and H4 over model seeds (module docstring; :data:`TESTS`), Holm within each hypothesis over
    scorers x comparators (:func:`~certified_circuits.analysis.seed_tests.finish_family`).

    Args:
        rows: :func:`equal_footing_rows` with ``seed``, ``concept``, ``scorer`` and ``setting`` added.
        seeds: the pre-registered seeds (one missing from the usable rows is counted in ``n_dropped``).

    Returns:
        One row per hypothesis, scorer and comparison, columns :data:`~certified_circuits.analysis.seed_tests.COLUMNS`
        (``method`` the comparator, or the two-valued circuit of H2b; ``baseline`` the comparator's value).

    Raises:
        ValueError: a seed repeated in ``seeds``.
    """
    if len(set(seeds)) != len(list(seeds)):
        raise ValueError(f"seeds {list(seeds)} repeat a seed: each model seed is one pair")
    out: list[dict[str, Any]] = []
    for hypothesis in dict.fromkeys(t[0] for t in TESTS):
        family = []
        for name, claim, method, column, other, other_column, alternative in TESTS:
            if name != hypothesis:
                continue
            for scorer in dict.fromkeys(rows["scorer"]):
                part = rows[rows["scorer"] == scorer]
                if hypothesis in WHERE_IN_POSSIBLE:
                    part = part[part["can_certify_in"].astype(bool) & part["certified_in_any"].astype(bool)]
                per_seed, dropped = seed_values(paired_cells(part, method, column, other, other_column),
                                                "certified", "baseline", seeds)  # fmt: skip
                family.append(hypothesis_row(hypothesis, claim, scorer, other, alternative, per_seed, dropped))
        out.extend(finish_family(family))
    return pd.DataFrame(out, columns=list(COLUMNS))
