"""The equal-footing comparators and the contested-set detector (analysis/equal_footing.py; the pre-registration in
docs/embedded_default.md, "The fair testbed on equal footing"): every rule on cases small enough to enumerate by
hand, the shares over live components, the seeded streams, and H2a-H4 over fabricated seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.equal_footing import (
    COMPARATORS,
    EQUAL_FOOTING_COLUMNS,
    THREE_VALUED,
    TWO_VALUED,
    FootingProtocol,
    Labellings,
    consensus_rule,
    contested_share,
    contestedness,
    detector,
    equal_footing_hypotheses,
    equal_footing_rows,
    group_cuts,
    group_ranks,
    inner_resamples,
    interval_rule,
    labellings,
    live_share,
    matched_cut,
    multiplicities,
    per_group,
    share_columns,
)
from certified_circuits.analysis.size_matched import certify_at_counts, resampled_labels
from certified_circuits.analysis.stability import flip_share, label_change_share
from certified_circuits.core.certification import decide_setting
from certified_circuits.core.discovery import top_count_circuit
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import selection_and_certification_masks, vote_counts_at_counts

SETTING = Setting(p_del=0.9, n0=50, n=300, seed=3, tau=0.9, alpha=0.01, correction="bonferroni")
SMALL = FootingProtocol(n_resamples=4, n_inner=6, n_population_samples=30)


def _case(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A population of 300 x 12 (D its first 30): 0-2 strong, 3-5 near the cut, 6-9 noise around 1, 10-11 always zero; two
    groups (0-5 and 6-11); the truth 0-3 (three in group 0, one in group 1: component 6)."""
    rng = np.random.default_rng(seed)
    population = rng.normal(scale=1.0, size=(300, 12))
    population[:, :3] += 3.0
    population[:, 3:6] += 0.5
    population[:, 6:10] += 1.0  # above zero: the dead components never enter group 1's top-1
    population[:, 10:] = 0.0
    truth = np.zeros(12, dtype=bool)
    truth[[0, 1, 2, 6]] = True
    return population[:30], np.repeat([0, 1], 6), truth, population


# --- labels and shares, by hand --------------------------------------------------------------------------------------

#: 3 resamples x 4 components; component 3 never changes (as an always-zero component's label does not)
LABELS = np.array([[1, 0, -1, 0], [1, 1, -1, 0], [0, -1, 1, 0]], dtype=np.int8)


def test_change_and_flip_shares_over_live_components_equal_the_hand_count():
    # pairs (3 of them) that differ per component: 2 (1,1,0), 3 (0,1,-1), 2 (-1,-1,1), 0; in x out: 2, 1, 0, 0
    live = np.array([True, True, True, False])
    assert live_share(label_change_share, LABELS, live) == (7 / 9, 7 / 12)
    assert live_share(flip_share, LABELS, live) == (3 / 9, 3 / 12)
    # leaving out the one constant component multiplies the share by U / |live| = 4 / 3
    assert live_share(label_change_share, LABELS, live)[0] == pytest.approx(7 / 12 * 4 / 3, rel=1e-15)
    assert np.isnan(live_share(label_change_share, LABELS, np.zeros(4, dtype=bool))[0])


def test_in_precision_abstain_share_and_empty_resamples_by_hand():
    # row 0 is D: IN {0, 1}; resamples: IN {0} (1/1), IN {} (NaN, counted), IN {0, 1, 2} (2/3)
    labels = np.array([[1, 1, 0, -1], [1, 0, 0, 0], [0, 0, 0, -1], [1, 1, 1, 0]], dtype=np.int8)
    found = Labellings(three={"certified": labels}, two={}, baselines={}, scores={})
    truth, live = np.array([True, False, True, False]), np.ones(4, dtype=bool)
    row = share_columns(found, live, truth, np.zeros(4, dtype=bool))["certified"]
    assert row["in_precision_d"] == 0.5 and row["in_precision_mean"] == pytest.approx(5 / 6, rel=1e-15)
    assert row["in_empty_resamples"] == 1 and row["abstain_share_live"] == 1 / 12 and row["abstain_d"] == 1
    assert row["size_d"] == 2
    grey = np.array([False, True, False, False])  # component 1 grey: neither hit nor miss
    assert share_columns(found, live, truth, grey)["certified"]["in_precision_d"] == 1.0


# --- the rules on tiny cases ------------------------------------------------------------------------------------------

GROUPS = np.array([0, 0, 0, 0, 1, 1, 1])
RANKING = np.array([0.1, 0.9, 0.5, 0.7, 3.0, 1.0, 2.0])


def test_group_ranks_and_the_matched_cut_per_group():
    # group 0 by score: 1 (0.9), 3 (0.7), 2 (0.5), 0 (0.1); group 1: 4 (3), 6 (2), 5 (1)
    ranks = group_ranks(RANKING, GROUPS)
    assert ranks.tolist() == [4, 1, 3, 2, 1, 3, 2]
    # group 0: 1 in, 2 abstain; group 1: none in, 1 abstain
    labels = matched_cut(ranks, GROUPS, np.array([1, 0]), np.array([2, 1]))
    assert labels.tolist() == [0, 1, -1, -1, -1, 0, 0]
    assert group_ranks(np.ones(3), np.zeros(3, dtype=int)).tolist() == [1, 2, 3]  # a tie goes to the lower index
    assert per_group(labels == -1, GROUPS).tolist() == [2, 1]


def test_group_ranks_agree_with_the_base_algorithm_ties_included():
    rng = np.random.default_rng(5)
    for _ in range(20):
        values = rng.integers(0, 4, size=15).astype(float)  # many ties
        groups = rng.integers(0, 3, size=15)
        sizes = np.bincount(np.unique(groups, return_inverse=True)[1])
        counts = rng.integers(0, sizes + 1)
        if counts.sum() == 0:
            continue
        inverse = np.unique(groups, return_inverse=True)[1]
        assert (top_count_circuit(values, groups, counts) == (group_ranks(values, groups) <= counts[inverse])).all()


def test_the_cut_is_the_midpoint_at_the_truths_size_and_infinite_at_none_or_all():
    ranks = group_ranks(RANKING, GROUPS)
    cut = group_cuts(RANKING, ranks, GROUPS, np.array([2, 0]))  # group 0: (0.7 + 0.5) / 2; group 1 keeps none
    assert cut[:4] == pytest.approx([0.6] * 4, abs=1e-15) and (cut[4:] == np.inf).all()
    assert (group_cuts(RANKING, ranks, GROUPS, np.array([4, 3])) == -np.inf).all()


def test_the_interval_rule_on_means_and_standard_deviations_by_hand():
    # columns: values 1, 2, 3 (mean 2, sd 1 with ddof 1) against cuts 0, 1 and 4.5; a point mass 4 at cut 5; 5 at 5
    inner = np.array([[1, 1, 4, 5, 1], [2, 2, 4, 5, 2], [3, 3, 4, 5, 3]], dtype=float)
    cut = np.array([0.0, 1.0, 5.0, 5.0, 4.5])
    labels, mean, sd = interval_rule(inner, cut, 1.96)
    assert mean.tolist() == [2, 2, 4, 5, 2] and sd.tolist() == [1, 1, 0, 0, 1]
    assert labels.tolist() == [1, -1, 0, -1, 0]  # 2 - 1.96 > 0; 1 inside; 4 < 5; 5 = 5 abstains; 3.96 < 4.5
    score = contestedness("interval", mean=mean, sd=sd, cut=cut)
    assert score.tolist() == [-2.0, -1.0, -np.inf, 0.0, -2.5]  # -|r - c| / s; s = 0: -inf off the cut, 0 on it


def test_the_consensus_rule_reads_counts_so_two_of_twenty_is_out():
    kept = np.zeros((20, 4), dtype=bool)
    for u, n in enumerate((18, 2, 3, 17)):
        kept[:n, u] = True
    labels, share = consensus_rule(kept, 0.9)
    assert 2 / 20 > 1 - 0.9  # why the rule reads 1 - f >= q: in floating point 0.1 <= 1 - 0.9 is False
    assert labels.tolist() == [1, 0, -1, -1] and share.tolist() == [0.9, 0.1, 0.15, 0.85]
    assert contestedness("consensus", share=share) == pytest.approx([0.2, 0.2, 0.3, 0.3], abs=1e-15)


def test_certified_and_matched_cut_contestedness_by_hand():
    assert contestedness("certified", votes=np.array([1000, 500, 0, 900]), n=1000).tolist() == [0, 1, 0,
                                                                                                 pytest.approx(0.2)]
    # group 0: 1 in, 2 abstain -> boundary 1 + 3/2 = 2.5; group 1: 0 in, 1 abstain -> boundary 1
    ranks = group_ranks(RANKING, GROUPS)
    score = contestedness("matched_cut", ranks=ranks, groups=GROUPS, n_in=np.array([1, 0]),
                          n_abstain=np.array([2, 1]))
    assert score.tolist() == [-1.5, -1.5, -0.5, -0.5, 0.0, -2.0, -1.0]
    # its three highest are its abstain set {2, 3, 4}
    assert set(np.argsort(-score, kind="stable")[:3]) == {2, 3, 4}
    with pytest.raises(ValueError, match="choose one of"):
        contestedness("majority")


# --- the detector ----------------------------------------------------------------------------------------------------


def test_auroc_precision_and_recall_against_the_hand_enumeration():
    score = np.array([0.9, 0.4, 0.4, 0.1, 0.7])
    contested = np.array([True, True, False, False, False])
    # pairs (contested, other): 0.9 beats all 3; 0.4 ties 0.4 (1/2), beats 0.1, loses to 0.7: 4.5 of 6
    found = detector(score, contested, 2, tie_seed=0)  # top-2: 0.9 (contested), 0.7 (not)
    assert found == {"precision": 0.5, "recall": 0.5, "auroc": 0.75}
    empty = detector(score, contested, 0, tie_seed=0)
    assert np.isnan(empty["precision"]) and empty["recall"] == 0.0
    assert np.isnan(detector(score, np.zeros(5, dtype=bool), 2, 0)["auroc"])


def test_detector_ties_follow_the_seeded_permutation_not_the_index():
    score = np.array([0.9, 0.4, 0.4, 0.1, 0.7])
    contested = np.array([True, True, False, False, False])
    outcomes = set()
    for seed in range(12):  # the third place is a tie of 1 (contested) and 2: the permutation decides
        permutation = np.random.default_rng(seed).permutation(5)
        hits = detector(score, contested, 3, seed)["precision"] * 3
        assert hits == pytest.approx(2 if permutation[1] < permutation[2] else 1)
        outcomes.add(round(hits))
    assert outcomes == {1, 2}


def test_a_rule_that_abstains_on_everything_contested_ties_the_certificate():
    """One group of six ranked 0 > 1 > ... > 5; the certificate: 0, 1 in, 2, 3 abstain (votes near n/2), 4, 5 out;
    the contested set is {2, 3}. The matched cut then abstains on the same two, and as detectors at the
    certificate's count both flag exactly {2, 3}: the same precision, recall and AUROC (all 1)."""
    groups, ranking = np.zeros(6, dtype=int), np.array([6.0, 5, 4, 3, 2, 1])
    certificate = np.array([1, 1, -1, -1, 0, 0], dtype=np.int8)
    contested = np.array([False, False, True, True, False, False])
    ranks = group_ranks(ranking, groups)
    n_in, n_abstain = per_group(certificate == 1, groups), per_group(certificate == -1, groups)
    assert (matched_cut(ranks, groups, n_in, n_abstain) == certificate).all()
    count = int((certificate == -1).sum())
    certified = detector(contestedness("certified", votes=np.array([1000, 990, 500, 450, 5, 0]), n=1000), contested,
                         count, 0)
    cut = detector(contestedness("matched_cut", ranks=ranks, groups=groups, n_in=n_in, n_abstain=n_abstain),
                   contested, count, 0)
    assert certified == cut == {"precision": 1.0, "recall": 1.0, "auroc": 1.0}


def test_the_contested_share_is_a_of_population_samples():
    """Population: rows 0-49 score component 0 only, rows 50-99 component 1 only; |D| = 1, one kept: each sample
    keeps 0 or 1 as its one row falls in the first or second half, never component 2."""
    population = np.zeros((100, 3))
    population[:50, 0], population[50:, 1] = 1.0, 1.0
    share = contested_share(population, np.zeros(3, dtype=int), np.array([1]), 1, 40, seed=2)
    first = (np.random.default_rng(2).integers(0, 100, size=(40, 1)) < 50).mean()
    assert share.tolist() == [first, 1 - first, 0.0] and 0.2 <= first <= 0.8


# --- streams and the pipeline ----------------------------------------------------------------------------------------


def test_inner_streams_are_one_per_dataset_and_stable_in_the_number_of_resamples():
    draws = inner_resamples(10, 5, inner_seed=1, n_outer=4)
    assert draws.shape == (5, 5, 10)
    assert all(not np.array_equal(draws[b], draws[c]) for b in range(5) for c in range(b))  # no shared stream
    assert np.array_equal(inner_resamples(10, 5, 1, 2), draws[:3])  # spawned children: more resamples add streams
    assert not np.array_equal(inner_resamples(10, 5, 2, 4), draws)
    assert multiplicities(np.array([[0, 0, 2], [1, 2, 2]]), 3).tolist() == [[2, 0, 1], [0, 1, 2]]


def test_labellings_are_the_size_matched_certificates_and_the_rules_on_each_dataset():
    scores, groups, truth, _ = _case()
    counts = per_group(truth, groups)
    found = labellings(scores, groups, counts, SETTING, SMALL, mask_seed=11)
    _, decisions = resampled_labels(scores, groups, counts, SETTING, SMALL.n_resamples, SMALL.bootstrap_seed,
                                    mask_seed=11)
    assert np.array_equal(found.three["certified"][1:], decisions)  # the size-matched stage's resampled labels
    on_d = certify_at_counts(scores, groups, counts, SETTING, mask_seed=11)
    assert np.array_equal(found.three["certified"][0], on_d.decision)
    assert np.array_equal(found.two["majority"][0], on_d.majority)
    # the interval on D, recomputed slowly: each inner resample's mean by indexing
    inner = inner_resamples(30, SMALL.n_inner, SMALL.inner_seed, SMALL.n_resamples)[0]
    means = np.stack([scores[rows].mean(axis=0) for rows in inner])
    ranking = scores.mean(axis=0)
    cut = group_cuts(ranking, group_ranks(ranking, groups), groups, counts)
    assert np.array_equal(found.three["interval"][0], interval_rule(means, cut, SMALL.z)[0])
    # each size-matched baseline has its circuit's per-group sizes
    for name in TWO_VALUED:
        sizes = per_group(found.two[name][0], groups)
        assert (per_group(found.baselines[name][0], groups) == sizes).all()


def test_the_certified_score_reads_the_certificates_own_certification_votes():
    """Algorithm 1 on the votes the score is read from gives the certificate's labels on D (same masks, same seed)."""
    scores, groups, truth, _ = _case()
    counts = per_group(truth, groups)
    found = labellings(scores, groups, counts, SETTING, SMALL, mask_seed=11)
    selection, certification = selection_and_certification_masks(30, SETTING.n0, SETTING.n, SETTING.p_del, 11)
    votes = vote_counts_at_counts(scores, groups, counts, certification)
    decision = decide_setting(vote_counts_at_counts(scores, groups, counts, selection), votes, SETTING)[0]
    assert np.array_equal(decision, found.three["certified"][0]) and (decision == -1).any()
    assert np.array_equal(found.scores["certified"], 1 - np.abs(2 * votes / SETTING.n - 1))


@pytest.mark.parametrize("bad", [{"q": 0.5}, {"n_inner": 1}, {"n_resamples": 1}, {"z": 0.0}])
def test_the_protocol_refuses_what_the_rules_cannot_use(bad):
    with pytest.raises(ValueError):
        FootingProtocol(**bad)


def test_rows_are_deterministic_and_the_inner_seed_reaches_only_the_inner_rules():
    scores, groups, truth, population = _case()
    first = pd.DataFrame(equal_footing_rows(scores, groups, truth, SETTING, population, protocol=SMALL))
    again = pd.DataFrame(equal_footing_rows(scores, groups, truth, SETTING, population, protocol=SMALL))
    assert list(first.columns) == list(EQUAL_FOOTING_COLUMNS)
    assert list(first["method"]) == list(THREE_VALUED + TWO_VALUED)
    pd.testing.assert_frame_equal(first, again)
    counts = per_group(truth, groups)
    base = labellings(scores, groups, counts, SETTING, SMALL)
    other = labellings(scores, groups, counts, SETTING, FootingProtocol(n_resamples=4, n_inner=6, inner_seed=7))
    assert not np.array_equal(base.three["interval"], other.three["interval"])
    assert np.array_equal(base.three["certified"], other.three["certified"])
    assert np.array_equal(base.three["matched_cut"], other.three["matched_cut"])


def test_always_zero_components_leave_the_live_shares():
    scores, groups, truth, population = _case()
    rows = {r["method"]: r for r in equal_footing_rows(scores, groups, truth, SETTING, population, protocol=SMALL)}
    assert rows["certified"]["n_live"] == 10 and rows["certified"]["n_components"] == 12
    for method in ("certified", "matched_cut"):  # the dead two are out on every resample: only the divisor changes
        row = rows[method]
        assert row["change_share_all"] == pytest.approx(row["change_share_live"] * 10 / 12, rel=1e-12)
    assert rows["certified"]["detector_count"] == rows["certified"]["abstain_d"]  # no dead component abstains
    assert rows["matched_cut"]["abstain_d"] == rows["certified"]["abstain_d"]  # abstains exactly as much
    assert np.isnan(rows["majority"]["detector_auroc"]) and np.isnan(rows["certified"]["baseline_change_share_live"])


# --- hypotheses over seeds -------------------------------------------------------------------------------------------


def _fabricated(seeds, scorers=("s",), better=True, settings=("a", "b")) -> pd.DataFrame:
    """Rows where the certificate beats every comparator by the same margin in every cell (or loses)."""
    good, bad = (0.1, 0.2) if better else (0.2, 0.1)
    rows = []
    for seed in seeds:
        for scorer in scorers:
            for setting in settings:
                for concept in ("c1", "c2"):
                    cell = {"seed": seed, "scorer": scorer, "setting": setting, "concept": concept,
                            "can_certify_in": True, "certified_in_any": True}
                    for method in THREE_VALUED:
                        mine = method == "certified"
                        rows.append({**cell, "method": method, "change_share_live": good if mine else bad,
                                     "flip_share_live": good if mine else bad,
                                     "detector_auroc": (0.9 if better else 0.6) if mine else 0.75})
                    for method in TWO_VALUED:
                        rows.append({**cell, "method": method, "change_share_live": good,
                                     "baseline_change_share_live": bad})
    return pd.DataFrame(rows)


def test_eight_seeds_all_favouring_the_certificate_give_one_in_256_holm_over_the_family():
    table = equal_footing_hypotheses(_fabricated(range(8)), list(range(8)))
    assert list(table["hypothesis"]) == ["H2a"] * 3 + ["H2b"] * 2 + ["H2c"] * 3 + ["H4"] * 3
    assert list(table[table["hypothesis"] == "H2a"]["method"]) == list(COMPARATORS)
    assert (table["pvalue"] == 1 / 256).all() and (table["status"] == "holds").all()
    holm = {"H2a": 3 / 256, "H2b": 2 / 256, "H2c": 3 / 256, "H4": 3 / 256}
    assert table["pvalue_holm"].tolist() == pytest.approx([holm[h] for h in table["hypothesis"]], rel=1e-12)
    two = equal_footing_hypotheses(_fabricated(range(8), scorers=("s", "t")), list(range(8)))
    assert two[two["hypothesis"] == "H2a"]["pvalue_holm"].tolist() == pytest.approx([6 / 256] * 6, rel=1e-12)
    worse = equal_footing_hypotheses(_fabricated(range(8), better=False), list(range(8)))
    assert (worse["pvalue"] == 1.0).all() and (worse["status"] == "does not hold").all()


def test_few_seeds_are_untestable_and_cells_where_in_is_impossible_leave_h2_only():
    table = equal_footing_hypotheses(_fabricated(range(4)), list(range(8)))
    assert (table["status"] == "untestable at n=4").all() and (table["n_dropped"] == 4).all()
    rows = _fabricated(range(8))
    rows.loc[rows["seed"] == 0, "can_certify_in"] = False
    table = equal_footing_hypotheses(rows, list(range(8)))
    assert (table[table["hypothesis"] != "H4"]["n_seeds"] == 7).all()
    assert (table[table["hypothesis"] == "H4"]["n_seeds"] == 8).all()
    with pytest.raises(ValueError, match="repeat a seed"):
        equal_footing_hypotheses(rows, [1, 1])


def test_a_seed_is_the_mean_over_concepts_then_over_settings():
    """Setting a: concepts 0.0 and 0.2 (mean 0.1); setting b: only c1's pair is defined, 0.4. Mean of the means
    0.25 (a flat mean of the three cells would be 0.2)."""
    rows = _fabricated([3])
    certified = rows["method"] == "certified"
    for setting, concept, value in (("a", "c1", 0.0), ("a", "c2", 0.2), ("b", "c1", 0.4), ("b", "c2", np.nan)):
        rows.loc[certified & (rows["setting"] == setting) & (rows["concept"] == concept), "change_share_live"] = value
    table = equal_footing_hypotheses(rows, [3])
    assert table[table["hypothesis"] == "H2a"]["certified"].tolist() == pytest.approx([0.25] * 3, abs=1e-15)


# --- without a population: the workflow's stability stage -------------------------------------------------------------

DETECTOR = ("detector_count", "detector_precision", "detector_recall", "detector_auroc", "n_contested",
            "n_contested_all")  # fmt: skip


def test_without_a_population_the_detector_columns_are_nan_and_the_rest_unchanged():
    """population None (the workflow has only D): no contested set is drawn, so the detector columns and the
    contested counts are NaN and no population sample is counted; every other column is the same as with one."""
    scores, groups, truth, population = _case()
    with_population = pd.DataFrame(equal_footing_rows(scores, groups, truth, SETTING, population, protocol=SMALL))
    without = pd.DataFrame(equal_footing_rows(scores, groups, truth, SETTING, None, protocol=SMALL))
    assert list(without.columns) == list(EQUAL_FOOTING_COLUMNS)
    assert without[list(DETECTOR)].isna().all().all() and (without["population_samples"] == 0).all()
    assert with_population.loc[with_population["values"] == 3, "detector_auroc"].notna().all()  # the control
    rest = [c for c in EQUAL_FOOTING_COLUMNS if c not in DETECTOR and c != "population_samples"]
    pd.testing.assert_frame_equal(without[rest], with_population[rest])
    # labellings computed once and passed in give the same rows
    found = labellings(scores, groups, per_group(truth, groups), SETTING, SMALL)
    again = pd.DataFrame(equal_footing_rows(scores, groups, truth, SETTING, None, protocol=SMALL, found=found))
    pd.testing.assert_frame_equal(again, without)
    assert np.array_equal(found.kept[0], found.certificate.baseline) and found.kept.shape == (SMALL.n_resamples + 1, 12)


# --- the stability stage's third table ----------------------------------------------------------------------------------

#: |D| = 40, U = 12, one group: IN and OUT certifiable (the planner, asserted), votes in milliseconds
STAGE_SETTING = Setting(p_del=0.6, n0=50, n=200, seed=3, tau=0.9, alpha=0.01, correction="bonferroni")


def _stage_files(root):
    """A concept whose 3 true components sit 20 standard deviations above 9 others (one group of 12), and its
    verified ground truth."""
    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    rng = np.random.default_rng(0)
    scores = np.r_[np.full(3, 10.0), np.linspace(0.6, 0.0, 9)] + rng.normal(size=(40, 12))
    names = [f"layer1.{i}" for i in range(12)]
    attributions = write_attributions(root / "circle.h5", {"relevance": scores}, np.zeros(12, dtype=np.int32), names,
                                      [str(i) for i in range(40)], {"concept": "circle", "experiment": "world",
                                                                    "split": "concept"})  # fmt: skip
    truth = write_json(root / "gt.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 12,
        "concepts": {"circle": {"components": names[:3], "verification": {"passed": True}}}})  # fmt: skip
    return attributions, truth


def _stage_args(attributions, truth, out, *extra):
    return ["stability", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid", "0.25", "--p-del",
            "0.6", "--n0", "50", "--n", "200", "--seed", "3", "--tau", "0.9", "--alpha", "0.01", "--resamples", "6",
            "--bootstrap-seed", "2", "--ground-truth", str(truth), "--out", str(out), *extra]  # fmt: skip


def test_the_stability_stage_writes_the_equal_footing_beside_the_truth_size_table(tmp_path):
    """--out-truth-size-equal: one row per method with the stage's resamples and seed and the options' protocol; the
    truth-size table it shares its certificates with is byte-identical to the one written without it, and the
    certificate's label-change and flip shares over all components are that table's; report-stability combines it."""
    from certified_circuits.cli.main import main
    from certified_circuits.core.planning import plan

    the_plan = plan(40, 12, STAGE_SETTING)
    assert the_plan.can_certify_in and the_plan.can_certify_out  # the fixture certifies something
    attributions, truth = _stage_files(tmp_path)
    alone = tmp_path / "alone.csv"
    assert main(_stage_args(attributions, truth, tmp_path / "s0.csv", "--out-truth-size", str(alone))) == 0
    sizes, equal = tmp_path / "t.csv", tmp_path / "e.csv"
    assert main(_stage_args(attributions, truth, tmp_path / "s1.csv", "--out-truth-size", str(sizes),
                            "--out-truth-size-equal", str(equal), "--inner-resamples", "5", "--inner-seed", "4",
                            "--consensus-q", "0.8", "--interval-z", "1.5", "--tie-seed", "9")) == 0
    assert sizes.read_bytes() == alone.read_bytes()
    rows = pd.read_csv(equal).set_index("method")
    assert rows.index.tolist() == list(THREE_VALUED + TWO_VALUED)
    assert (rows["resamples"] == 6).all() and (rows["inner_resamples"] == 5).all() and (rows["bootstrap_seed"] == 2).all()
    assert (rows["inner_seed"] == 4).all() and (rows["q"] == 0.8).all() and (rows["z"] == 1.5).all()
    assert (rows["tie_seed"] == 9).all() and (rows["concept"] == "circle").all()
    assert rows[list(DETECTOR)].isna().all().all() and (rows["population_samples"] == 0).all()
    assert rows.loc["certified", "size_d"] >= 3 and rows.loc["certified", "in_precision_d"] == 1.0  # IN certified
    at_truth = pd.read_csv(sizes).iloc[0]
    assert rows.loc["certified", "change_share_all"] == pytest.approx(at_truth["certified_change_share"], abs=1e-12)
    assert rows.loc["certified", "flip_share_all"] == pytest.approx(at_truth["certified_flip_share"], abs=1e-12)
    assert main(["report-stability", "--inputs", str(tmp_path / "s1.csv"), "--truth-size", str(sizes),
                 "--truth-size-equal", str(equal), "--out-dir", str(tmp_path / "out")]) == 0
    combined = pd.read_csv(tmp_path / "out" / "truth_size_equal.csv")
    assert len(combined) == 7 and "matched cut" in (tmp_path / "out" / "truth_size_equal_summary.md").read_text()


@pytest.mark.parametrize("option, value, message", [
    ("--inner-resamples", "1", "--inner-resamples 1: 2 to 10000"),
    ("--consensus-q", "0.5", "--consensus-q 0.5: must lie in (0.5, 1]"),
    ("--interval-z", "0", "--interval-z 0.0: must be positive and finite"),
    ("--interval-z", "nan", "--interval-z nan: must be positive and finite"),
])  # fmt: skip
def test_the_stage_refuses_an_equal_footing_option_out_of_range(tmp_path, capsys, option, value, message):
    from certified_circuits.cli.main import main

    attributions, truth = _stage_files(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(_stage_args(attributions, truth, tmp_path / "s.csv", "--out-truth-size-equal", str(tmp_path / "e.csv"),
                         option, value))
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "e.csv").exists()
