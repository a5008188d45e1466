"""Certified circuits at the truth's size and the size-matched baseline (analysis/size_matched.py)."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.analysis.size_matched import (
    TruthSizeCertificate,
    certify_at_counts,
    resampled_labels,
    size_matched_rows,
    stability_shares,
)
from certified_circuits.analysis.stability import bootstrap_indices
from certified_circuits.api import certify_scores
from certified_circuits.core.discovery import k_count
from certified_circuits.core.planning import plan
from certified_circuits.core.setting import Setting

SETTING = Setting(p_del=0.9, n0=100, n=1000, seed=4, tau=0.9, alpha=0.001, correction="bonferroni")


def _scores(rng: np.random.Generator) -> np.ndarray:
    """60 examples x 30 components: 0-4 strong, 5-6 near the cut, the rest noise."""
    scores = rng.normal(scale=0.5, size=(60, 30))
    scores[:, :5] += 3.0
    scores[:, 5:7] += 0.4
    return scores


def test_certifying_at_the_counts_equals_the_k_grid_certificate_at_that_k():
    """One group, K = 6/30: the count path keeps round(0.2 * 30) = 6 per sample, as the engine's K path does, so the
    decisions, majority vote and baseline are the same arrays."""
    scores = _scores(np.random.default_rng(0))
    groups = np.zeros(30, dtype=int)
    assert plan(60, 30, SETTING).can_certify_in  # the fixture can decide something
    counts = k_count(0.2, np.array([30]))
    ours = certify_at_counts(scores, groups, counts, SETTING)
    engine = certify_scores(scores, groups, [0.2], SETTING)
    assert (ours.decision == engine.decision[0]).all() and (ours.majority == engine.majority[0]).all()
    assert (ours.baseline == engine.baseline[0]).all()
    assert (ours.decision == 1).sum() >= 5  # the strong five are certified IN: the check is not vacuous


def test_size_matched_baseline_is_the_top_m_of_the_full_data_ranking():
    """Mean scores rank 0 > 1 > 2 > 3 > 4 > 5; truth {0, 2, 5}; component 4 grey. Certified IN = {2} (m 1): the
    baseline's top-1 is {0}. IN + abstain = {2, 3, 5} (m 3): top-3 {0, 1, 2}."""
    scores = np.tile([6.0, 5.0, 4.0, 3.0, 2.0, 1.0], (4, 1))
    truth = np.array([True, False, True, False, False, True])
    grey = np.array([False, False, False, False, True, False])
    cert = TruthSizeCertificate(counts=np.array([3]), baseline=np.zeros(6, bool),
                                decision=np.array([0, 0, 1, -1, 0, -1], dtype=np.int8),
                                majority=np.array([1, 1, 0, 0, 1, 0], dtype=bool))
    rows = {r["method"]: r for r in size_matched_rows(scores, np.zeros(6, dtype=int), cert, truth, exclude=grey)}
    assert rows["certified_in"]["size"] == 1 and rows["certified_in"]["precision"] == 1.0
    assert rows["certified_in"]["baseline_precision"] == 1.0 and rows["certified_in"]["recall"] == pytest.approx(1 / 3)
    assert rows["certified_in_abstain"]["precision"] == pytest.approx(2 / 3)  # {2, 3, 5}: 2 true of 3
    assert rows["certified_in_abstain"]["baseline_precision"] == pytest.approx(2 / 3)  # {0, 1, 2}
    # majority {0, 1, 4}: 4 is grey, so 1 true of the 2 scored; its size-matched baseline {0, 1, 2}: 2 of 3
    assert rows["majority"]["precision"] == 0.5 and rows["majority"]["baseline_precision"] == pytest.approx(2 / 3)
    assert {r["n_grey"] for r in rows.values()} == {1} and {r["n_true"] for r in rows.values()} == {3}


def test_an_empty_certified_circuit_has_no_precision_and_no_matched_baseline():
    cert = TruthSizeCertificate(counts=np.array([1]), baseline=np.zeros(3, bool),
                                decision=np.array([-1, 0, 0], dtype=np.int8), majority=np.zeros(3, bool))
    rows = size_matched_rows(np.ones((2, 3)), np.zeros(3, dtype=int), cert, np.array([True, False, False]))
    first = rows[0]
    assert first["method"] == "certified_in" and first["size"] == 0
    assert np.isnan(first["precision"]) and np.isnan(first["baseline_precision"])


def test_every_resample_is_certified_with_the_same_masks_and_the_shares_count_pairs():
    scores = _scores(np.random.default_rng(1))
    groups = np.repeat([0, 1], 15)
    counts = np.array([4, 2])
    baseline, decision = resampled_labels(scores, groups, counts, SETTING, 5, seed=2)
    rows = bootstrap_indices(60, 5, 2)
    again = certify_at_counts(scores[rows[3]], groups, counts, SETTING)
    assert (decision[3] == again.decision).all() and (baseline[3] == again.baseline).all()
    assert baseline.sum(axis=1).tolist() == [6] * 5
    # shares by hand on three resamples of three components: labels (1, 1, 0), (1, -1, 0), (0, -1, 0)
    shares = stability_shares(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]], bool),
                              np.array([[1, 1, 0], [1, -1, 0], [0, -1, 0]], np.int8))
    # pairs (3): component 0 differs in 2 pairs, 1 in 2 (label) / 2 (membership), 2 in none: 4 / 9
    assert shares["certified_change_share"] == pytest.approx(4 / 9)
    assert shares["baseline_change_share"] == pytest.approx(4 / 9)
    assert shares["certified_flip_share"] == pytest.approx(2 / 9)  # component 0: in on two, out on one
    assert shares["certified_in_any"] and shares["abstain_share"] == pytest.approx(2 / 9)


def test_truth_size_rows_hold_the_baseline_every_method_and_the_stability_at_that_size():
    from certified_circuits.analysis.size_matched import TRUTH_SIZE_COLUMNS, truth_size_rows

    scores = _scores(np.random.default_rng(2))
    groups = np.repeat([0, 1], 15)
    truth = np.zeros(30, bool)
    truth[[0, 1, 2, 3, 4]] = True  # the strong five, all in group 0
    rows = truth_size_rows(scores, groups, truth, SETTING, n_resamples=4, bootstrap_seed=1)
    assert [r["method"] for r in rows] == ["baseline", "certified_in", "certified_in_abstain", "majority"]
    assert all(list(r) == list(TRUTH_SIZE_COLUMNS) for r in rows)
    assert rows[0]["size"] == 5 and rows[0]["precision"] == rows[0]["baseline_precision"]
    baseline, decision = resampled_labels(scores, groups, np.array([5, 0]), SETTING, 4, 1)
    expected = stability_shares(baseline, decision)
    assert {r["certified_change_share"] for r in rows} == {expected["certified_change_share"]}
    assert {r["resamples"] for r in rows} == {4} and {r["can_certify_in"] for r in rows} == {True}
    cert = certify_at_counts(scores, groups, np.array([5, 0]), SETTING)
    assert rows[1]["size"] == int((cert.decision == 1).sum()) == 5 and rows[1]["precision"] == 1.0
