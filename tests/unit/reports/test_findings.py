"""The findings that open summary.md (reports/findings.py): each line's numbers are the tables' numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from certified_circuits.reports.findings import (
    MAX_FINDINGS,
    findings,
    findings_section,
    mean_ablation_finding,
    recovery_finding,
    stability_finding,
    truth_finding,
)


def _truth(tmp_path: Path) -> Path:
    head = {"metric": "class accuracy", "chance": 0.1}
    doc = {
        "format": "certified-circuits/ground-truth/1",
        "experiment": "world",
        "kind": "vision",
        "n_components": 150,
        "concepts": {
            "a": {
                "components": [f"layer1.{i}" for i in range(30)],
                "verification": {
                    "passed": True,
                    "headline": {**head, "full": 0.9, "circuit_only": 0.8, "circuit_removed": 0.0},
                },
            },
            "b": {
                "components": [f"layer2.{i}" for i in range(34)],
                "verification": {
                    "passed": False,
                    "headline": {**head, "full": 0.7, "circuit_only": 0.6, "circuit_removed": 0.2},
                },
            },
        },
    }
    path = tmp_path / "world.json"
    path.write_text(json.dumps(doc))
    return path


def _auroc(tmp_path: Path) -> Path:
    rows = []
    for concept, (p_base, p_cert, empty) in {"a": (0.5, 1.0, False), "b": (0.7, float("nan"), True)}.items():
        for scorer in ("relevance", "activation"):
            for method, precision, auroc in (
                ("baseline", p_base, 0.9),
                ("certified_in", p_cert, 0.8),
                ("certified_in_abstain", 0.6, 0.85),
                ("majority", 0.5, 0.9),
            ):
                rows.append(
                    dict(
                        experiment="world",
                        concept=concept,
                        scorer=scorer,
                        setting="s",
                        method=method,
                        auroc=auroc if scorer == "relevance" else 0.5,
                        k_target=0.1,
                        precision=precision,
                        recall=0.25,
                        fpr=0.05,
                        empty_circuit=empty and method == "certified_in",
                        at_selected_setting=True,
                        k_source="chosen by max balanced accuracy on id_test",
                    )
                )
    path = tmp_path / "testbed" / "recovery_auroc.csv"
    path.parent.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_truth_line_counts_passed_concepts_and_averages_the_check(tmp_path: Path) -> None:
    line = truth_finding(_truth(tmp_path))
    assert "32 of 150 components per concept" in line and "1 of 2 concepts" in line
    assert "class accuracy 0.80 with the full model, 0.70 with the true circuit alone, 0.10 with it removed" in line
    assert "(chance 0.10)" in line


def test_the_recovery_line_reads_the_main_scorer_and_counts_empty_circuits(tmp_path: Path) -> None:
    path = _auroc(tmp_path)
    line = recovery_finding(path, "relevance")
    assert "over the K grid (relevance; mean over 2 concepts): AUROC baseline 0.900, certified in 0.800" in line
    # at the held-out K: precision of the empty certified circuit is undefined, the mean is over the non-empty one
    assert "at the K chosen by max balanced accuracy on id_test (baseline 0.10, certified in 0.10" in line
    assert "baseline 0.60 / 0.25, certified in 1.00 / 0.25 (1 of 2 empty)" in line
    assert "truth's size" not in line  # circuits at the truth's size are truth_size_block's table
    assert "AUROC baseline 0.500" in recovery_finding(path, "activation")  # equal AUROCs, a selected K to show
    table = pd.read_csv(path)
    table.loc[table["scorer"] == "activation", "k_target"] = 1.0  # the whole model for every method
    table.to_csv(path, index=False)
    assert recovery_finding(path, "activation") == ""  # equal AUROCs and no K that discriminates: nothing to say


def test_the_stability_line_spans_the_k_grid_and_adds_the_nearest_k(tmp_path: Path) -> None:
    rows = [
        dict(
            experiment="world",
            scorer=scorer,
            concept=c,
            setting="s",
            resamples=20,
            k_target=k,
            baseline_jaccard_mean=j if scorer == "relevance" else 0.0,
            baseline_change_share=0.1 * k,
            certified_change_share=0.05 if k < 0.5 else 0.0,
            certified_flip_share=0.0,
        )
        for scorer in ("relevance", "activation")
        for c in "ab"
        for k, j in ((0.1, 0.6 if c == "a" else 0.8), (0.5, 0.9), (1.0, 1.0))
    ]
    path = tmp_path / "stability.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    line = stability_finding(path, 0.12, "relevance")
    # per K, the mean over the two concepts: Jaccard 0.70, 0.90, 1.00; memberships 1%, 5%, 10%; labels 5%, 0%, 0%
    assert "20 bootstrap resamples of each dataset, relevance, mean over 2 concepts), over the K grid 0.10-1.00" in line
    assert "Jaccard to the full-data circuit is 0.70-1.00" in line
    assert "1.0-10.0% of baseline memberships change, 0.0-5.0% of certified labels" in line and "0.00% flip" in line
    assert "at the truth's size (K 0.10): Jaccard 0.70, 1.0% / 5.0% / 0.00% changed" in line
    assert "Jaccard to the full-data circuit is 0.00" in stability_finding(path, None, "activation")
    assert "at the truth's size" not in stability_finding(path, None, "activation")


def test_the_mean_ablation_line_names_each_eval_set(tmp_path: Path) -> None:
    rows = [
        dict(
            experiment="world",
            scorer="relevance",
            eval_set=e,
            full=0.9,
            baseline=0.8,
            certified=0.75,
            baseline_k=0.1,
            certified_k=0.08,
            selected_on="id_test",
            pvalue_examples=0.25,
        )
        for e in ("context_shift", "corruption")
    ]
    path = tmp_path / "selected_balanced_raw.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    line = mean_ablation_finding(path, ["id_test", "context_shift"])
    assert "K chosen on id_test" in line and "corruption" not in line and "id_test:" not in line
    assert "context_shift: full 0.90, baseline 0.80 (K 10%), certified 0.75 (K 8%), p 0.250" in line


def test_the_block_is_short_and_absent_without_a_testbed(tmp_path: Path) -> None:
    lines = findings([_truth(tmp_path)] * 5, [_auroc(tmp_path)] * 5, [])
    assert len(lines) == MAX_FINDINGS and all(line.startswith("- ") for line in lines)
    assert findings_section(lines)[0] == "## What this run shows"
    assert findings_section(findings([], [], [])) == []


def test_a_selected_k_is_named_by_its_metric_and_its_held_out_set() -> None:
    from certified_circuits.reports.tables import selection_name

    assert selection_name({"metric": "balanced_accuracy", "selected_on": "id_test", "ablation": "mean"}) == (
        "chosen by max balanced accuracy (mean ablation) on id_test")
    assert selection_name(pd.Series({"metric": "cacc", "selected_on": "val", "ablation": "zero"})) == (
        "chosen by max cACC on val")
    assert selection_name({"selected_on": "val"}) == "chosen on val"
    assert selection_name({"metric": "cacc", "selected_on": float("nan")}) == "selected"


def test_a_number_read_at_the_whole_model_says_so_in_its_own_line(tmp_path: Path) -> None:
    rows = [dict(experiment="world", scorer="relevance", eval_set="context_shift", metric="balanced_accuracy",
                 selected_on="id_test", full=0.8, baseline=0.8, baseline_k=1.0, certified=0.8, certified_k=1.0,
                 pvalue_examples=1.0)]
    path = tmp_path / "selected_balanced_raw.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert mean_ablation_finding(path, ["context_shift"], "relevance") == ""  # p = 1 by construction: not shown
    rows[0].update(certified_k=0.08)  # one method at the whole model: shown, and said
    pd.DataFrame(rows).to_csv(path, index=False)
    line = mean_ablation_finding(path, ["context_shift"], "relevance")
    assert "K chosen by max balanced accuracy (mean ablation) on id_test" in line
    assert "K 100% for baseline is the whole model: these numbers compare the full model with itself" in line
    rows[0].update(baseline_k=0.1, certified_k=0.08)
    pd.DataFrame(rows).to_csv(path, index=False)
    assert "whole model" not in mean_ablation_finding(path, ["context_shift"], "relevance")


def _truth_size(tmp_path: Path) -> Path:
    """Two concepts, two settings: certified IN (2 of 4 true) beside the baseline's top 2 (1 of 2 true)."""
    rows = []
    for concept in ("a", "b"):
        for setting in ("p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni", "p0.9_n0100_n1000_s0/t0.9_a0.001_bonferroni"):
            for method, size, precision, recall, bp, br in (
                    ("baseline", 4, 0.75, 0.75, 0.75, 0.75), ("certified_in", 2, 1.0, 0.5, 0.5, 0.25),
                    ("certified_in_abstain", 5, 0.8, 1.0, 0.6, 0.75), ("majority", 4, 1.0, 1.0, 1.0, 1.0)):
                rows.append(dict(experiment="tiny", concept=concept, scorer="eap_ig", setting=setting, method=method,
                                 size=size, precision=precision, recall=recall, baseline_precision=bp,
                                 baseline_recall=br, n_true=4, n_grey=0, resamples=20, baseline_jaccard_mean=0.7,
                                 baseline_change_share=0.05, certified_change_share=0.02, certified_flip_share=0.0,
                                 can_certify_in=True))
    path = tmp_path / "testbed" / "truth_size.csv"
    path.parent.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_truth_size_table_puts_each_circuit_beside_the_baseline_of_its_size(tmp_path: Path) -> None:
    from certified_circuits.reports.findings import truth_size_block

    lines = truth_size_block(_truth_size(tmp_path), None)
    assert lines[0].startswith("**tiny** at the truth's size (eap_ig; mean over 2 concepts")
    assert "| baseline (top \\|T\\| of the full-data ranking) | (any) | 4.0 | 0.75 | 0.75 |  |" in lines
    assert "| certified IN | p_del 0.95, tau 0.9 | 2.0 | 1.00 | 0.50 | 0.50 / 0.25 |" in lines
    assert "| certified IN + abstain | p_del 0.9, tau 0.9 | 5.0 | 0.80 | 1.00 | 0.60 / 0.75 |" in lines
    assert not any(line.startswith("| majority vote") for line in lines)  # both perfect: not shown (issue 50)
    assert lines[-1] == (
        "- **tiny**: the truth has 4 components per concept (0 grey at most, neither hit nor miss); between 20 "
        "bootstrap resamples at this size (p_del 0.95, tau 0.9), the baseline's Jaccard to its full-data circuit is "
        "0.70, 5.0% of baseline memberships change, 2.0% of certified labels and 0.00% flip in<->out. Not shown: "
        "majority vote (p_del 0.95, tau 0.9, 4.0 components); majority vote (p_del 0.9, tau 0.9, 4.0 components): "
        "precision 1.00 and so is the baseline's circuit of that size, which tells the methods nothing apart.")
    stability = tmp_path / "testbed" / "stability.csv"
    pd.DataFrame([dict(experiment="tiny", scorer="eap_ig", concept="a", setting="s", resamples=20, k_target=0.1,
                       baseline_jaccard_mean=0.7, baseline_change_share=0.05, certified_change_share=0.02,
                       certified_flip_share=0.0)]).to_csv(stability, index=False)
    block = findings([], [], [stability])
    assert block[0] == lines[0] and sum(line.startswith("- ") for line in block) == 1  # the table's line only
