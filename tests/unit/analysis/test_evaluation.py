"""Aggregations behind Table 1/3, the cACC curves, IoU and seed stability, on hand-made tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from certified_circuits.analysis.evaluation import (
    abstention_summary,
    best_gap_k,
    best_setting,
    cacc_curves,
    channel_categories,
    circuit_iou,
    pairwise_iou,
    peak_table,
    read_sufficiency,
)


def _table() -> pd.DataFrame:
    """Two concepts, two K targets; values chosen so every aggregate is checkable by hand."""
    rows = []
    acc = {  # (method, k_target) -> accuracies of concepts a, b ; k_effective
        ("baseline", 0.2): ([0.6, 0.8], 0.2),
        ("baseline", 0.5): ([0.7, 0.7], 0.5),
        ("certified", 0.2): ([0.9, 0.7], 0.1),
        ("certified", 0.5): ([0.95, 0.85], 0.3),
        ("majority", 0.2): ([0.6, 0.6], 0.2),
        ("majority", 0.5): ([0.8, 0.8], 0.45),
    }
    for (method, k), (values, k_eff) in acc.items():
        for concept, value in zip("ab", values):
            rows.append(dict(experiment="v", concept=concept, eval_set="id", method=method, k_target=k,
                             k_effective=k_eff, accuracy=value, false_positive_rate=0.1, balanced_accuracy=(value + 0.9) / 2))
    for concept, value in zip("ab", [0.5, 0.6]):
        rows.append(dict(experiment="v", concept=concept, eval_set="id", method="full", k_target=1.0,
                         k_effective=1.0, accuracy=value, false_positive_rate=0.5, balanced_accuracy=0.5))
    return pd.DataFrame(rows)


def test_cacc_curves_average_over_concepts() -> None:
    curves = cacc_curves(_table()).set_index(["method", "k_target"])
    assert curves.loc[("certified", 0.5), "cacc"] == pytest.approx(0.9)
    assert curves.loc[("baseline", 0.2), "cacc"] == pytest.approx(0.7)
    assert curves.loc[("full", 0.2), "cacc"] == pytest.approx(0.55)  # broadcast to every K
    assert curves.loc[("certified", 0.5), "n_concepts"] == 2


def test_peak_table_selects_peaks_and_computes_relative_deltas() -> None:
    peaks = peak_table(_table()).iloc[0]
    # baseline peaks tie at 0.7 (K 0.2 and 0.5): the smaller K wins
    assert peaks["baseline"] == pytest.approx(0.7) and peaks["baseline_k"] == pytest.approx(0.2)
    assert peaks["certified"] == pytest.approx(0.9) and peaks["certified_k"] == pytest.approx(0.3)
    assert peaks["full"] == pytest.approx(0.55)
    assert peaks["delta"] == pytest.approx((0.9 - 0.7) / 0.7)
    assert peaks["delta_k"] == pytest.approx((0.3 - 0.2) / 0.2)
    assert peaks["majority"] == pytest.approx(0.8) and peaks["n_concepts"] == 2
    # class-level pairs: certified(0.5) = [0.95, 0.85] vs baseline(0.2) = [0.6, 0.8]
    expected = stats.wilcoxon([0.95, 0.85], [0.6, 0.8], zero_method="zsplit").pvalue
    assert peaks["pvalue"] == pytest.approx(expected)
    ttest = peak_table(_table(), test="ttest").iloc[0]["pvalue"]
    assert ttest == pytest.approx(stats.ttest_rel([0.95, 0.85], [0.6, 0.8]).pvalue)


def test_peak_table_by_balanced_accuracy() -> None:
    peaks = peak_table(_table(), metric="balanced_accuracy").iloc[0]
    assert peaks["metric"] == "balanced_accuracy"
    assert peaks["certified"] == pytest.approx((0.9 + 0.9) / 2)


def test_best_gap_k() -> None:
    curves = cacc_curves(_table())
    # gaps: K 0.2 -> 0.8 - 0.7 = 0.1 ; K 0.5 -> 0.9 - 0.7 = 0.2
    assert best_gap_k(curves, "id") == 0.5


def test_iou_and_pairwise_iou() -> None:
    a = np.array([1, 1, 0, 0], bool)
    b = np.array([1, 0, 1, 0], bool)
    assert circuit_iou(a, b) == pytest.approx(1 / 3)
    assert circuit_iou(np.zeros(3, bool), np.zeros(3, bool)) == 1.0
    pairs = pairwise_iou(np.stack([a, b, a]), [0, 1, 2])
    assert pairs[["seed_a", "seed_b"]].values.tolist() == [[0, 1], [0, 2], [1, 2]]
    np.testing.assert_allclose(pairs["iou"], [1 / 3, 1.0, 1 / 3])


def test_abstention_summary_and_categories() -> None:
    decision = np.array([[1, -1, 0, -1]])
    baseline = np.array([[True, True, False, False]])
    summary = abstention_summary(decision, baseline, np.zeros(4, dtype=int)).iloc[0]
    assert summary["abstain_rate"] == 0.5 and summary["baseline_abstained"] == 0.5
    assert summary["effective_k"] == 0.25 and summary["baseline_k"] == 0.5
    assert channel_categories(decision[0], baseline[0]).tolist() == ["certified_in", "abstained", "certified_out", "other"]


def test_read_sufficiency_names_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    _table().drop(columns="k_effective").to_csv(path, index=False)
    with pytest.raises(ValueError, match="k_effective"):
        read_sufficiency([path])
    with pytest.raises(FileNotFoundError, match="evaluate stage"):
        read_sufficiency([tmp_path / "missing.csv"])


def test_peak_table_by_extra_keys_and_best_setting() -> None:
    table = pd.concat([_table().assign(setting="s1"), _table().assign(setting="s2")], ignore_index=True)
    better = (table.setting == "s2") & (table.method == "certified") & (table.k_target == 0.2)
    table.loc[better, "accuracy"] = 0.99  # s2's certified peak: 0.99 at K_eff 0.1
    peaks = peak_table(table, by=["experiment", "setting", "eval_set"])
    assert peaks["setting"].tolist() == ["s1", "s2"]
    assert peaks.set_index("setting").loc["s2", "certified"] == pytest.approx(0.99)
    best = best_setting(peaks, by=["experiment", "eval_set"])
    assert len(best) == 1 and best.iloc[0]["setting"] == "s2" and best.iloc[0]["certified_k"] == pytest.approx(0.1)


def test_read_sufficiency_keeps_the_rows_of_one_ablation(tmp_path: Path) -> None:
    rows = [dict(experiment="w", concept="c", eval_set="id", method="baseline", k_target=0.5, k_effective=0.5,
                 accuracy=acc, ablation=ablation) for ablation, acc in (("zero", 1.0), ("mean", 0.25))]
    path = tmp_path / "both.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    zero, mean = read_sufficiency([path]), read_sufficiency([path], "mean")
    assert list(zero["accuracy"]) == [1.0] and list(mean["accuracy"]) == [0.25]
    assert set(zero["ablation"]) == {"zero"} and set(mean["ablation"]) == {"mean"}
    pd.DataFrame(rows[:1]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"no rows of ablation 'mean' \(it has zero\).*--ablation mean"):
        read_sufficiency([path], "mean")
    pd.DataFrame(rows[:1]).drop(columns="ablation").to_csv(path, index=False)
    assert list(read_sufficiency([path])["accuracy"]) == [1.0]  # no column: the paper's zero ablation
    with pytest.raises(ValueError, match="no 'ablation' column"):
        read_sufficiency([path], "mean")


def test_peak_and_selected_tables_carry_each_methods_false_positive_rate() -> None:
    """cACC never stands alone: every method's FPR at its chosen K (mean over concepts), and the full model's."""
    from certified_circuits.analysis.evaluation import selected_table

    table = _table()
    # FPR by hand: concept a 0.1 + k_effective, concept b 0.3 + k_effective; the full model 0.5 and 0.7
    table["false_positive_rate"] = np.where(table["concept"] == "a", 0.1, 0.3) + table["k_effective"].where(
        table["method"] != "full", 0.4)
    peaks = peak_table(table).iloc[0]  # baseline at K 0.2 (k_eff 0.2), certified at K 0.5 (k_eff 0.3)
    assert peaks["baseline_fpr"] == pytest.approx((0.3 + 0.5) / 2)
    assert peaks["certified_fpr"] == pytest.approx((0.4 + 0.6) / 2)
    assert peaks["full_fpr"] == pytest.approx((0.5 + 0.7) / 2)
    held_out = pd.concat([table, table.assign(eval_set="test")], ignore_index=True)
    chosen = selected_table(held_out, "id").iloc[0]  # chosen on id, read on test: the same rows here
    assert chosen["eval_set"] == "test" and chosen["selected_on"] == "id"
    assert chosen["baseline_fpr"] == pytest.approx((0.3 + 0.5) / 2)
    assert chosen["certified_fpr"] == pytest.approx((0.4 + 0.6) / 2) and chosen["full_fpr"] == pytest.approx(0.6)
    without = peak_table(table.drop(columns="false_positive_rate")).iloc[0]
    assert "baseline_fpr" not in without.index  # language tables have no FPR: no column


def test_a_cacc_table_shows_the_false_positive_rates_beside_it() -> None:
    from certified_circuits.reports.tables import format_peak_table

    table = _table()
    shown = format_peak_table(peak_table(table)).iloc[0]
    assert shown["FPR % (full / baseline / certified)"] == "50.0 / 10.0 / 10.0"  # the fixture's FPRs (0.5 full)
    balanced = format_peak_table(peak_table(table, metric="balanced_accuracy"))
    assert "FPR % (full / baseline / certified)" not in balanced.columns  # balanced accuracy holds the FPR already
