"""Certified circuits at the truth's size, compared with the baseline at the same size (issue 50; the
pre-registration in docs/embedded_default.md, "The fair testbed").

A smaller circuit of well-ranked components has a higher precision whatever made it small, so a certified circuit
is only compared with a baseline circuit **of its own size**:

Certified at the truth's size
    The base algorithm ``A_T`` keeps the top ``|T ∩ g|`` components of each top-K group ``g`` by the mean score
    (:func:`certified_circuits.core.discovery.top_count_circuit`: exactly ``|T|`` components). Its votes are
    Algorithm 2 for ``A_T`` over the setting's two mask streams
    (:func:`certified_circuits.core.smoothing.vote_counts_at_counts`,
    :func:`~certified_circuits.core.smoothing.selection_and_certification_masks`) and its labels Algorithm 1
    (:func:`certified_circuits.core.certification.decide_setting`): the certificate of a deterministic base
    algorithm, as valid as the K grid's (Theorem 1).
Size-matched comparison (:func:`size_matched_rows`)
    For a method's circuit ``M`` (certified IN; IN + abstain; majority vote) with ``m_g = |M ∩ g|`` components per
    group, the baseline's circuit of the same size is ``top_count_circuit(s_D, groups, m)``, the top ``m_g`` of
    each group by the full-D score ``s_D`` (the baseline's own ranking). Both are scored against the truth:
    ``precision = TP / |C|``, ``recall = TP / |T|`` over the scored components (a grey component, ``exclude``, is
    neither hit nor miss). An empty ``M`` has no precision (NaN) and no size-matched baseline.
Stability at the truth's size (:func:`resampled_labels`, :func:`stability_shares`)
    The same bootstrap resamples as the conditions (:func:`~certified_circuits.analysis.stability.bootstrap_indices`)
    through ``A_T`` and its certificate with the same masks: the share of baseline memberships and of certified
    labels (in / out / abstain) that change between resamples, and the in <-> out flips
    (:func:`~certified_circuits.analysis.stability.label_change_share`,
    :func:`~certified_circuits.analysis.stability.flip_share`).
The equal footing (:func:`certified_circuits.cli.testbed.truth_size_tables`)
    The ``stability`` stage also writes the certificate beside the comparators that abstain as much (the matched
    cut, the bootstrap interval, consensus) on the same resamples, one pass of the certificate serving both tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from certified_circuits.analysis.baseline_conditions import dataset_scores
from certified_circuits.analysis.recovery import confusion, rates, scored_only
from certified_circuits.analysis.stability import bootstrap_indices, flip_share, label_change_share
from certified_circuits.core.certification import decide_setting
from certified_circuits.core.contracts import IN, OUT
from certified_circuits.core.discovery import GroupIndex, group_counts, top_count_circuit
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import selection_and_certification_masks, vote_counts_at_counts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: the circuits compared with the baseline at their own size, in table order
METHODS = ("certified_in", "certified_in_abstain", "majority")


@dataclass(frozen=True)
class TruthSizeCertificate:
    """One concept's circuits at the truth's size on D.

    Attributes:
        counts: int ``[G]`` components kept per group (the truth's).
        baseline: bool ``[U]``, ``A_T(D)``.
        decision: int8 ``[U]`` in {1 in, 0 out, -1 abstain}.
        majority: bool ``[U]``, the majority vote at identical compute.
        certified_votes: int ``[U]``, the votes over the ``n`` certification masks the labels were decided on
            (None where not kept; the equal-footing stage's contestedness reads them).
    """

    counts: np.ndarray
    baseline: np.ndarray
    decision: np.ndarray
    majority: np.ndarray
    certified_votes: np.ndarray | None = None

    def circuits(self) -> dict[str, np.ndarray]:
        """The circuits of :data:`METHODS`: certified IN, IN + abstain (everything not OUT), majority vote."""
        return {"certified_in": self.decision == IN, "certified_in_abstain": self.decision != OUT,
                "majority": self.majority.astype(bool)}  # fmt: skip


def certify_at_counts(scores: np.ndarray, groups: np.ndarray, counts: np.ndarray, setting: Setting, *,
                      absolute: bool = False, mask_seed: int | None = None) -> TruthSizeCertificate:  # fmt: skip
    """Certify the base algorithm that keeps ``counts[g]`` components of each group (module docstring).

    Args:
        scores: float ``[|D|, U]`` per-example scores.
        groups: int ``[U]`` top-K groups.
        counts: int ``[G]`` kept per group (:func:`~certified_circuits.core.discovery.group_counts` of the truth).
        setting: the certification setting.
        absolute: rank by ``|mean|``.
        mask_seed: the masks' seed (default ``setting.seed``).

    Returns:
        :class:`TruthSizeCertificate`.
    """
    scores = np.asarray(scores, dtype=np.float64)
    seed = setting.seed if mask_seed is None else int(mask_seed)
    selection, certification = selection_and_certification_masks(scores.shape[0], setting.n0, setting.n,
                                                                  setting.p_del, seed)  # fmt: skip
    selected = vote_counts_at_counts(scores, groups, counts, selection, absolute)
    certified = vote_counts_at_counts(scores, groups, counts, certification, absolute)
    decision, _, majority = decide_setting(selected, certified, setting)
    full = dataset_scores(scores, np.ones((1, scores.shape[0])), absolute)[0]
    return TruthSizeCertificate(counts=np.asarray(counts, dtype=np.int64), baseline=top_count_circuit(full, groups,
                                counts), decision=decision.astype(np.int8), majority=majority.astype(bool),
                                certified_votes=certified)  # fmt: skip


def _scored(circuit: np.ndarray, truth: np.ndarray, exclude: np.ndarray) -> tuple[float, float]:
    """Precision and recall of one circuit over the scored components (``exclude``: grey, left out)."""
    r = rates(confusion(*scored_only(circuit, truth, exclude)))
    return float(r["precision"]), float(r["recall"])


def size_matched_rows(scores: np.ndarray, groups: np.ndarray, certificate: TruthSizeCertificate, truth: np.ndarray,
                      *, absolute: bool = False, exclude: np.ndarray | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every method of :data:`METHODS` against the baseline's circuit of its own size (module docstring).

    Args:
        scores: float ``[|D|, U]`` (the baseline's ranking is their mean on all of D).
        groups: int ``[U]``.
        certificate: :func:`certify_at_counts` of the same scores.
        truth: bool ``[U]`` the verified truth.
        absolute: rank by ``|mean|``.
        exclude: optional bool ``[U]`` grey components, scored as neither hit nor miss.

    Returns:
        One row per method: ``method``, ``size`` (``|M|``), ``precision``, ``recall`` (the method's; NaN precision
        when empty), ``baseline_precision``, ``baseline_recall`` (the baseline's top-``|M|``, per group; NaN when
        ``M`` is empty), ``n_true``, ``n_grey``.
    """
    truth = np.asarray(truth, dtype=bool)
    grey = np.zeros_like(truth) if exclude is None else np.asarray(exclude, dtype=bool)
    index = GroupIndex.from_groups(groups)
    ranking = dataset_scores(np.asarray(scores, dtype=np.float64), np.ones((1, np.shape(scores)[0])), absolute)[0]
    rows = []
    for method, circuit in certificate.circuits().items():
        sizes = group_counts(circuit, index)
        precision, recall = _scored(circuit, truth, grey)
        if sizes.sum():
            matched = top_count_circuit(ranking, groups, sizes)
            base_precision, base_recall = _scored(matched, truth, grey)
        else:
            base_precision = base_recall = float("nan")
        rows.append({"method": method, "size": int(circuit.sum()), "precision": precision, "recall": recall,
                     "baseline_precision": base_precision, "baseline_recall": base_recall,
                     "n_true": int(truth[~grey].sum()), "n_grey": int(grey.sum())})  # fmt: skip
    return rows


def resampled_labels(scores: np.ndarray, groups: np.ndarray, counts: np.ndarray, setting: Setting, n_resamples: int,
                     seed: int, *, absolute: bool = False,
                     mask_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``A_T`` and its certified labels on every bootstrap resample of D (the same masks for every resample).

    Args:
        scores: float ``[|D|, U]``.
        groups, counts: the base algorithm at the truth's size.
        setting: the certification setting.
        n_resamples, seed: the bootstrap (:func:`~certified_circuits.analysis.stability.bootstrap_indices`).
        absolute: rank by ``|mean|``.
        mask_seed: the masks' seed (default ``setting.seed``).

    Returns:
        bool ``baseline [B, U]`` and int8 ``decision [B, U]``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    baselines, decisions = [], []
    for rows in bootstrap_indices(scores.shape[0], n_resamples, seed):
        cert = certify_at_counts(scores[rows], groups, counts, setting, absolute=absolute, mask_seed=mask_seed)
        baselines.append(cert.baseline)
        decisions.append(cert.decision)
    return np.stack(baselines), np.stack(decisions)


def stability_shares(baseline: np.ndarray, decision: np.ndarray) -> dict[str, float]:
    """H2's numbers from :func:`resampled_labels`: ``baseline_change_share`` (memberships that change between
    resamples), ``certified_change_share`` (labels in / out / abstain that change), ``certified_flip_share`` (in <->
    out), ``certified_in_any`` (whether anything is certified IN on some resample) and ``abstain_share``."""
    baseline, decision = np.asarray(baseline)[:, None, :], np.asarray(decision)[:, None, :]
    return {"baseline_change_share": float(label_change_share(baseline)[0]),
            "certified_change_share": float(label_change_share(decision)[0]),
            "certified_flip_share": float(flip_share(decision)[0]),
            "certified_in_any": bool((decision == IN).any()),
            "abstain_share": float((decision == -1).mean())}  # fmt: skip


#: the columns of :func:`truth_size_rows` after the caller's labels
TRUTH_SIZE_COLUMNS = ("method", "size", "precision", "recall", "baseline_precision", "baseline_recall", "n_true",
                      "n_grey", "n_components", "can_certify_in", "resamples", "baseline_jaccard_mean",
                      "baseline_change_share", "certified_change_share", "certified_flip_share", "certified_in_any",
                      "abstain_share")  # fmt: skip


def truth_size_rows(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, setting: Setting, *,
                    absolute: bool = False, exclude: np.ndarray | None = None, mask_seed: int | None = None,
                    n_resamples: int = 20, bootstrap_seed: int = 0, certificate: TruthSizeCertificate | None = None,
                    resampled: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One concept's circuits at the truth's size, compared at equal size, with their stability (module docstring):
    the rows the ``stability`` stage writes beside its per-K table (``truth_size/...csv``).

    Args:
        scores: float ``[|D|, U]``.
        groups: int ``[U]``.
        truth: bool ``[U]`` the verified truth.
        setting: the certification setting.
        absolute: rank by ``|mean|``.
        exclude: bool ``[U]`` grey components (neither hit nor miss).
        mask_seed: the masks' seed (the votes stage's).
        n_resamples, bootstrap_seed: the bootstrap of the stability columns.
        certificate, resampled: :func:`certify_at_counts` on D and :func:`resampled_labels` of these arguments,
            when the caller has them (the ``stability`` stage: the equal-footing labellings' rows 0 and 1..B,
            :func:`certified_circuits.cli.testbed.truth_size_tables`); computed here otherwise.

    Returns:
        One row per method: ``baseline`` (``A_T`` on D: ``|T|`` components; its ``baseline_*`` columns are itself)
        and each of :data:`METHODS` against the baseline's top-``|M|``; every row carries the concept's stability at
        the truth's size (``baseline_jaccard_mean``: resampled ``A_T`` against ``A_T(D)``, and
        :func:`stability_shares`) and the plan's ``can_certify_in``. Columns :data:`TRUTH_SIZE_COLUMNS`.
    """
    from certified_circuits.analysis.stability import jaccard_to
    from certified_circuits.core.planning import plan

    scores = np.asarray(scores, dtype=np.float64)
    truth = np.asarray(truth, dtype=bool)
    grey = np.zeros_like(truth) if exclude is None else np.asarray(exclude, dtype=bool)
    counts = group_counts(truth, GroupIndex.from_groups(groups))
    cert = (certify_at_counts(scores, groups, counts, setting, absolute=absolute, mask_seed=mask_seed)
            if certificate is None else certificate)
    baseline, decision = (resampled_labels(scores, groups, counts, setting, n_resamples, bootstrap_seed,
                                           absolute=absolute, mask_seed=mask_seed)
                          if resampled is None else resampled)  # fmt: skip
    common = {"n_true": int(truth[~grey].sum()), "n_grey": int(grey.sum()), "n_components": int(truth.size),
              "can_certify_in": bool(plan(scores.shape[0], scores.shape[1], setting).can_certify_in),
              "resamples": int(n_resamples),
              "baseline_jaccard_mean": float(jaccard_to(baseline[:, None, :], cert.baseline[None, :])[:, 0].mean()),
              **stability_shares(baseline, decision)}  # fmt: skip
    precision, recall = _scored(cert.baseline, truth, grey)
    rows = [{"method": "baseline", "size": int(cert.baseline.sum()), "precision": precision, "recall": recall,
             "baseline_precision": precision, "baseline_recall": recall}]  # fmt: skip
    rows += size_matched_rows(scores, groups, cert, truth, absolute=absolute, exclude=grey)
    return [{**{k: v for k, v in row.items() if k not in common}, **common} for row in rows]


def concept_truth_size(attributions: Path, scorer: str, setting: Setting, mask_seed: int, ground_truth: Path,
                       n_resamples: int = 20, bootstrap_seed: int = 0) -> "pd.DataFrame":  # fmt: skip
    """One concept's :func:`truth_size_rows` from its attribution file and the experiment's ground truth, labelled
    as the stability table is (:func:`~certified_circuits.analysis.stability.stability_labels`): the ``stability``
    stage's second table.

    Raises:
        ValueError: an unknown scorer, a truth of another experiment, names that do not match (named).
    """
    import pandas as pd

    from certified_circuits.analysis.recovery import grey_mask
    from certified_circuits.analysis.stability import concept_inputs, stability_labels

    attr, concept, known, truth = concept_inputs(attributions, scorer, ground_truth)
    rows = truth_size_rows(attr.scores[scorer], attr.groups, truth, setting, absolute=attr.absolute(scorer),
                           exclude=grey_mask(known, concept, attr.names), mask_seed=mask_seed,
                           n_resamples=n_resamples, bootstrap_seed=bootstrap_seed)  # fmt: skip
    labels = {**stability_labels(attr.attrs, concept, scorer, setting, mask_seed),
              "truth_verified": known.verified(concept), "n_examples": int(attr.scores[scorer].shape[0])}
    return pd.DataFrame([{**labels, **row} for row in rows])
