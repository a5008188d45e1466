"""Recovery of a known circuit (analysis/recovery.py, reports/testbed.py, report-recovery): counts, rates and AUROC
on hand-enumerable cases, the ground-truth reader's errors, and the stage's files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import certified_circuits as cc
from certified_circuits.analysis.recovery import (
    GROUND_TRUTH_FORMAT,
    confusion,
    method_circuits,
    parse_ground_truth,
    rates,
    read_ground_truth,
    roc_auc,
    truth_mask,
)
from certified_circuits.cli.main import main
from certified_circuits.core.certification import certify_votes
from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.storage.atomic import write_json
from certified_circuits.storage.store import write_certificates, write_votes

NAMES = [f"layer1.{i}" for i in range(6)]
TRUTH = np.array([True, True, False, False, False, False])  # components {0, 1} of 6


def _circuits(*sets: set[int], n: int = 6) -> np.ndarray:
    out = np.zeros((len(sets), n), dtype=bool)
    for row, members in enumerate(sets):
        out[row, sorted(members)] = True
    return out


def _truth_file(
    path: Path,
    components: dict[str, list[str]],
    n_components: int | None = 6,
    passed: bool = True,
    experiment: str = "world",
) -> Path:
    data = {
        "format": GROUND_TRUTH_FORMAT,
        "experiment": experiment,
        "kind": "vision",
        "model": "planted",
        "how": "by construction",
        "concepts": {c: {"components": names, "verification": {"passed": passed}} for c, names in components.items()},
    }
    if n_components is not None:
        data["n_components"] = n_components
    return write_json(path, data)


# ---------------------------------------------------------------------------------------------- counts and rates


def test_confusion_and_rates_by_hand() -> None:
    # K1 {0}, K2 {0, 2}, K3 {0, 1, 2, 3}; truth {0, 1}: P = 2, N = 4
    counts = confusion(_circuits({0}, {0, 2}, {0, 1, 2, 3}), TRUTH)
    assert counts["tp"].tolist() == [1, 1, 2]
    assert counts["fp"].tolist() == [0, 1, 2]
    assert counts["fn"].tolist() == [1, 1, 0]
    assert counts["tn"].tolist() == [4, 3, 2]
    measured = rates(counts)
    np.testing.assert_allclose(measured["precision"], [1.0, 0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(measured["recall"], [0.5, 0.5, 1.0], atol=1e-12)
    np.testing.assert_allclose(measured["fpr"], [0.0, 0.25, 0.5], atol=1e-12)
    assert not measured["empty_circuit"].any()


def test_empty_circuit_has_undefined_precision_and_a_flag() -> None:
    measured = rates(confusion(_circuits(set(), {0}), TRUTH))
    assert np.isnan(measured["precision"][0]) and measured["precision"][1] == 1.0
    assert measured["empty_circuit"].tolist() == [True, False]
    assert measured["recall"][0] == 0.0 and measured["fpr"][0] == 0.0


def test_auroc_by_hand() -> None:
    # {0, 2}: (FPR, TPR) = (0.25, 0.5); {0, 1, 2, 3}: (0.5, 1). With (0,0) and (1,1) the trapezoids are
    # 0.25 * (0 + 0.5) / 2 + 0.25 * (0.5 + 1) / 2 + 0.5 * (1 + 1) / 2 = 0.0625 + 0.1875 + 0.5 = 0.75
    measured = rates(confusion(_circuits({0, 2}, {0, 1, 2, 3}), TRUTH))
    assert roc_auc(measured["fpr"], measured["recall"]) == pytest.approx(0.75, abs=1e-12)
    # {0}, {0, 2}, {0, 1, 2, 3}: (0, 0.5), (0.25, 0.5), (0.5, 1): 0.125 + 0.1875 + 0.5 = 0.8125
    measured = rates(confusion(_circuits({0}, {0, 2}, {0, 1, 2, 3}), TRUTH))
    assert roc_auc(measured["fpr"], measured["recall"]) == pytest.approx(0.8125, abs=1e-12)


def test_auroc_is_one_for_a_perfect_ranking_and_half_on_the_diagonal() -> None:
    perfect = rates(confusion(_circuits({0}, {0, 1}, {0, 1, 2}), TRUTH))  # (0, .5), (0, 1), (.25, 1)
    assert roc_auc(perfect["fpr"], perfect["recall"]) == pytest.approx(1.0, abs=1e-12)
    # no better than chance: TPR = FPR at every K ({0, 2, 3}: 1/2 and 2/4; all six: 1 and 1), so the curve is the
    # diagonal from (0,0) to (1,1) and its area is 1/2
    chance = rates(confusion(_circuits({0, 2, 3}, set(range(6))), TRUTH))
    np.testing.assert_allclose(chance["fpr"], chance["recall"], atol=1e-12)
    assert roc_auc(chance["fpr"], chance["recall"]) == pytest.approx(0.5, abs=1e-12)


def test_auroc_sorts_points_and_vectorizes_over_leading_axes() -> None:
    fpr = np.array([[0.5, 0.25], [0.0, 0.0]])
    tpr = np.array([[1.0, 0.5], [1.0, 0.5]])
    np.testing.assert_allclose(roc_auc(fpr, tpr), [0.75, 1.0], atol=1e-12)  # the first row given out of order


def test_method_circuits_map_decisions() -> None:
    decision = np.array([[1, -1, 0, 0, 1, -1]], dtype=np.int8)
    votes = Votes(
        k_grid=np.array([0.5]),
        baseline=_circuits({0, 1, 2}),
        selection_counts=np.zeros((1, 6), np.int32),
        certification_counts=np.zeros((1, 6), np.int32),
        groups=np.zeros(6, np.int32),
    )
    certificates = Certificates(
        k_grid=np.array([0.5]), decision=decision, majority=_circuits({0, 4}), pvalue=np.zeros((1, 6))
    )
    circuits = method_circuits(votes, certificates)
    assert np.flatnonzero(circuits["baseline"][0]).tolist() == [0, 1, 2]
    assert np.flatnonzero(circuits["majority"][0]).tolist() == [0, 4]
    assert np.flatnonzero(circuits["certified_in"][0]).tolist() == [0, 4]
    assert np.flatnonzero(circuits["certified_in_abstain"][0]).tolist() == [0, 1, 4, 5]


def test_method_circuits_agree_with_method_masks() -> None:
    """The recovery tables' circuits are the paper's (:func:`method_masks`), renamed once (``METHOD_MASKS``), and
    refuse a mismatched pair the same way."""
    from certified_circuits.analysis.recovery import METHOD_MASKS, RECOVERY_METHODS
    from certified_circuits.core.certification import method_masks

    rng = np.random.default_rng(3)
    votes = compute_votes(rng.normal(size=(10, 8)), np.zeros(8, dtype=np.int32), [0.25, 0.5], 0.6, 20, 60, 0)
    certificates = certify_votes(votes, 0.7, 0.05)
    circuits, masks = method_circuits(votes, certificates), method_masks(votes, certificates)
    assert list(circuits) == list(RECOVERY_METHODS)
    assert set(METHOD_MASKS.values()) == set(masks)
    for method, name in METHOD_MASKS.items():
        np.testing.assert_array_equal(circuits[method], masks[name])
    np.testing.assert_array_equal(circuits["certified_in_abstain"], certificates.decision != cc.OUT)
    other = certify_votes(compute_votes(rng.normal(size=(10, 7)), np.zeros(7, dtype=np.int32), [0.25, 0.5], 0.6, 20,
                                        60, 0), 0.7, 0.05)
    with pytest.raises(ValueError) as recovery_error:
        method_circuits(votes, other)
    with pytest.raises(ValueError) as masks_error:
        method_masks(votes, other)
    assert str(recovery_error.value) == str(masks_error.value)


# ---------------------------------------------------------------------------------------------- ground truth


def test_ground_truth_reader_validates(tmp_path: Path) -> None:
    path = _truth_file(tmp_path / "gt.json", {"circle": ["layer1.0", "layer1.1"]})
    truth = read_ground_truth(path)
    assert truth.concepts == {"circle": ("layer1.0", "layer1.1")} and truth.verified("circle")
    assert truth_mask(truth, "circle", NAMES).tolist() == TRUTH.tolist()
    with pytest.raises(ValueError, match="format is 'other/1'"):
        parse_ground_truth({"format": "other/1", "experiment": "w", "kind": "vision", "concepts": {}})
    with pytest.raises(ValueError, match="'components'"):
        parse_ground_truth(
            {
                "format": GROUND_TRUTH_FORMAT,
                "experiment": "w",
                "kind": "vision",
                "concepts": {"circle": {"components": []}},
            }
        )
    with pytest.raises(ValueError, match="no ground truth for concept 'square'"):
        truth_mask(truth, "square", NAMES)
    with pytest.raises(ValueError, match="record no component names"):
        truth_mask(truth, "circle", None)
    with pytest.raises(ValueError, match="of 6 components but"):
        truth_mask(truth, "circle", NAMES[:5])


def test_unknown_component_is_named_with_the_fix(tmp_path: Path) -> None:
    truth = read_ground_truth(_truth_file(tmp_path / "gt.json", {"circle": ["layer1.0", "layer9.7"]}))
    with pytest.raises(ValueError) as error:
        truth_mask(truth, "circle", NAMES, where="the votes v.h5")
    message = str(error.value)
    assert "'layer9.7'" in message and "the votes v.h5" in message and "components/name" in message
    assert "'layer1.0'" not in message.split("do not have:")[1].split("(")[0]  # only the missing one is listed


# ---------------------------------------------------------------------------------------------- the stage

K_GRID = [1 / 6, 1 / 3, 0.5]


def _circuit_files(root: Path, concept: str, true: list[int], seed: int) -> tuple[Path, Path]:
    """A concept whose true components score far above the rest, and the rest 3 apart (a fixed ranking): the baseline
    at K = 1/3 is exactly the truth."""
    rng = np.random.default_rng(seed)
    mean = np.zeros(6)
    mean[true] = 5.0
    mean[[u for u in range(6) if u not in true]] = [-4.0, -7.0, -10.0, -13.0]
    scores = mean + rng.normal(size=(40, 6))
    setting = cc.Setting(p_del=0.6, n0=50, n=200, seed=seed, tau=0.9, alpha=0.01)
    the_plan = cc.plan(40, 6, setting)
    assert the_plan.can_certify_in and the_plan.can_certify_out  # sized so that the setting certifies
    votes = compute_votes(
        scores,
        np.zeros(6, np.int32),
        K_GRID,
        setting.p_del,
        setting.n0,
        setting.n,
        setting.seed,
        # masks of their own per concept, one config seed recorded (as the votes stage does)
        attrs={"concept": concept, "split": "concept", "experiment": "world", "scorer": "relevance", "seed": 0},
    )
    votes.names = tuple(NAMES)
    certificates = certify_votes(votes, setting.tau, setting.alpha)
    assert (certificates.decision == 1).any() and (certificates.decision == 0).any()
    return (
        write_votes(root / f"{concept}_votes.h5", votes),
        write_certificates(root / f"{concept}_certs.h5", certificates),
    )


def test_report_recovery_writes_tables_and_figure(tmp_path: Path) -> None:
    gt = _truth_file(tmp_path / "gt.json", {"circle": ["layer1.0", "layer1.1"], "square": ["layer1.4", "layer1.5"]})
    v1, c1 = _circuit_files(tmp_path, "circle", [0, 1], 0)
    v2, c2 = _circuit_files(tmp_path, "square", [4, 5], 1)
    out = tmp_path / "out"
    assert (
        main(
            [
                "report-recovery",
                "--ground-truth",
                str(gt),
                "--circuits",
                str(v1),
                str(c1),
                "--circuits",
                str(v2),
                str(c2),
                "--experiment",
                "world",
                "--k",
                str(1 / 6),
                "--out-dir",
                str(out),
            ]
        )
        == 0
    )
    recovery = pd.read_csv(out / "recovery.csv")
    assert len(recovery) == 2 * 4 * 3  # concepts x methods x K
    for column in (
        "experiment",
        "concept",
        "scorer",
        "setting",
        "tau",
        "method",
        "k_target",
        "tp",
        "fp",
        "fn",
        "tn",
        "precision",
        "recall",
        "fpr",
        "empty_circuit",
    ):
        assert column in recovery.columns
    first = recovery[(recovery.concept == "circle") & (recovery.method == "baseline")].sort_values("k_target")
    # top-1 (K 1/6 of 6 keeps 1), top-2, top-3 of a ranking that puts {0, 1} first
    assert first.tp.tolist() == [1, 2, 2] and first.fp.tolist() == [0, 0, 1] and first.tn.tolist() == [4, 4, 3]
    auroc = pd.read_csv(out / "recovery_auroc.csv")
    baseline = auroc[(auroc.concept == "circle") & (auroc.method == "baseline")].iloc[0]
    assert baseline.auroc == pytest.approx(1.0, abs=1e-12)  # (0, .5), (0, 1), (.25, 1)
    assert baseline.k_target == pytest.approx(1 / 6) and baseline.precision == 1.0 and baseline.recall == 0.5
    summary = (out / "recovery_summary.md").read_text()
    assert "certified_in_abstain" in summary and "mean" in summary
    assert (out / "recovery.png").stat().st_size > 0 and (out / "recovery.pdf").stat().st_size > 0


def test_report_recovery_takes_each_methods_selected_k(tmp_path: Path) -> None:
    gt = _truth_file(tmp_path / "gt.json", {"circle": ["layer1.0", "layer1.1"]}, passed=False)
    votes, certs = _circuit_files(tmp_path, "circle", [0, 1], 0)
    selected = tmp_path / "selected_cacc_raw.csv"
    pd.DataFrame(
        [
            dict(
                experiment="world",
                eval_set="test",
                selected_on="val",
                baseline_k_target=1 / 3,
                majority_k_target=0.5,
                certified_k_target=1 / 6,
            )
        ]
    ).to_csv(selected, index=False)
    out = tmp_path / "out"
    assert (
        main(
            [
                "report-recovery",
                "--ground-truth",
                str(gt),
                "--circuits",
                str(votes),
                str(certs),
                "--experiment",
                "world",
                "--selected",
                str(selected),
                "--out-dir",
                str(out),
            ]
        )
        == 0
    )
    auroc = pd.read_csv(out / "recovery_auroc.csv").set_index("method")
    assert auroc.loc["baseline", "k_target"] == pytest.approx(1 / 3) and auroc.loc["baseline", "tp"] == 2
    assert auroc.loc["majority", "k_target"] == pytest.approx(0.5) and auroc.loc["majority", "size"] == 3
    assert auroc.loc["certified_in", "k_target"] == pytest.approx(1 / 6)
    assert (auroc.k_source == "chosen on val").all()  # the table names no metric
    assert "truth not verified" in (out / "recovery_summary.md").read_text()


def _refused_report_recovery(tmp_path: Path, gt: Path, votes: Path, certs: Path) -> pytest.ExceptionInfo:
    """``report-recovery`` of experiment ``world`` on one circuit, which must exit (its SystemExit)."""
    command = ["report-recovery", "--ground-truth", str(gt), "--circuits", str(votes), str(certs)]
    with pytest.raises(SystemExit) as exc:
        main([*command, "--experiment", "world", "--out-dir", str(tmp_path / "out")])
    return exc


def test_report_recovery_names_an_unknown_component(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gt = _truth_file(tmp_path / "gt.json", {"circle": ["layer1.0", "layer4.2"]})
    votes, certs = _circuit_files(tmp_path, "circle", [0, 1], 0)
    exc = _refused_report_recovery(tmp_path, gt, votes, certs)
    assert exc.value.code == 2
    error = capsys.readouterr().err
    assert "'layer4.2'" in error and "components/name" in error


def test_report_recovery_refuses_another_experiments_truth(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gt = _truth_file(tmp_path / "gt.json", {"circle": ["layer1.0"]}, experiment="tiny_gpt2")
    votes, certs = _circuit_files(tmp_path, "circle", [0, 1], 0)
    _refused_report_recovery(tmp_path, gt, votes, certs)
    assert "ground truth of experiment 'tiny_gpt2'" in capsys.readouterr().err


def test_ground_truth_json_is_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "gt.json"
    path.write_text(
        json.dumps(
            {
                "format": GROUND_TRUTH_FORMAT,
                "experiment": "world",
                "kind": "vision",
                "concepts": {"circle": {"components": ["layer1.0"]}},
            }
        )
    )
    truth = read_ground_truth(path)
    assert truth.n_components is None and not truth.verified("circle")  # no verification: not verified
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_ground_truth(path)


def test_recovery_and_stability_across_model_seeds_are_read_at_the_truths_size(tmp_path: Path) -> None:
    import pandas as pd

    from certified_circuits.reports.testbed import model_seeds_recovery, model_seeds_stability

    runs_r, runs_s = {}, {}
    for seed, (auroc_base, auroc_cert) in {"0": (0.8, 0.9), "1": (0.7, 0.6)}.items():
        folder = tmp_path / seed
        folder.mkdir()
        every_k = pd.DataFrame([dict(experiment="w", scorer="r", setting="s", concept=c, method=m, k_target=k,
                                     n_true=2, n_components=10, precision=0.5 if k == 0.25 else 0.1, recall=0.4,
                                     empty_circuit=False)
                                for c in "ab" for m in ("baseline", "certified_in") for k in (0.1, 0.25, 0.5)])
        every_k.to_csv(folder / "recovery.csv", index=False)
        pd.DataFrame([dict(experiment="w", scorer="r", setting="s", concept=c, method=m, auroc=a)
                      for c in "ab" for m, a in (("baseline", auroc_base), ("certified_in", auroc_cert))]
                     ).to_csv(folder / "recovery_auroc.csv", index=False)
        pd.DataFrame([dict(experiment="w", scorer="r", setting="s", concept=c, k_target=k,
                           baseline_jaccard_mean=0.5 if k == 0.25 else 1.0, baseline_change_share=0.2,
                           certified_change_share=0.1, certified_flip_share=0.0, certified_in_jaccard=0.9,
                           abstain_share=0.3) for c in "ab" for k in (0.1, 0.25, 0.5)]
                     ).to_csv(folder / "stability.csv", index=False)
        runs_r[seed], runs_s[seed] = [folder / "recovery.csv"], [folder / "stability.csv"]
    metrics = model_seeds_recovery(runs_r, tmp_path, "w_recovery")
    raw = pd.read_csv(tmp_path / "w_recovery_model_seeds_raw.csv").set_index("method")
    assert raw.loc["baseline", "auroc_mean"] == pytest.approx(0.75) and raw.loc["certified_in", "auroc_min"] == 0.6
    assert raw.loc["baseline", "precision_mean"] == 0.5  # the truth's share 2/10 -> K 0.25 of the grid
    assert raw.loc["certified_in", "auroc_above_baseline_seeds"] == 1 and raw.loc["certified_in", "n_seeds"] == 2
    assert metrics["w_recovery_auroc_certified_in"] == pytest.approx(0.75)
    model_seeds_stability(runs_s, tmp_path, "w_stability")
    stab = pd.read_csv(tmp_path / "w_stability_model_seeds_raw.csv").iloc[0]
    assert stab["k_target"] == 0.25 and stab["baseline_jaccard_mean_mean"] == 0.5 and stab["n_seeds"] == 2
    assert (tmp_path / "w_stability_model_seeds.md").is_file()


def test_the_truths_size_is_the_grid_k_nearest_its_share_of_the_components() -> None:
    from certified_circuits.analysis.recovery import nearest_k, truth_size_k

    assert nearest_k([0.5, 0.1, 0.25, 0.25], 0.2) == 0.25 and nearest_k([0.25, 0.75], 0.5) == 0.25  # ties: smaller K
    assert truth_size_k([36, 36], [180, 180], [0.15, 0.2, 0.25]) == 0.2  # 36 / 180 = 0.2
    assert truth_size_k([3], [110], [0.02, 0.03, 0.05]) == 0.03  # 3 / 110 = 0.027


def test_grey_components_are_neither_hits_nor_misses_in_recovery_rows_and_auroc() -> None:
    """Truth {0, 4}; component 1 grey. The baseline {0, 1, 2} has precision 1/2 over its scored members {0, 2} (not
    1/3), and FPR 1/3 over the scored negatives {2, 3, 5} (not 1/4)."""
    from certified_circuits.analysis.recovery import auroc_by_method, recovery_rows

    votes = Votes(k_grid=np.array([0.5]), baseline=_circuits({0, 1, 2}),
                  selection_counts=np.zeros((1, 6), np.int32), certification_counts=np.zeros((1, 6), np.int32),
                  groups=np.zeros(6, np.int32))
    certificates = Certificates(k_grid=np.array([0.5]), decision=np.array([[1, -1, 0, 0, 1, -1]], dtype=np.int8),
                                majority=_circuits({0, 4}), pvalue=np.zeros((1, 6)))
    truth = np.array([True, False, False, False, True, False])
    grey = np.array([False, True, False, False, False, False])
    rows = {r["method"]: r for r in recovery_rows(votes, certificates, truth, exclude=grey)}
    assert (rows["baseline"]["tp"], rows["baseline"]["fp"], rows["baseline"]["tn"]) == (1, 1, 2)
    assert rows["baseline"]["precision"] == 0.5 and rows["baseline"]["fpr"] == pytest.approx(1 / 3)
    assert rows["baseline"]["size"] == 2  # the scored members
    plain = {r["method"]: r for r in recovery_rows(votes, certificates, truth)}
    assert plain["baseline"]["precision"] == pytest.approx(1 / 3)
    areas = auroc_by_method(votes, certificates, truth, exclude=grey)
    assert set(areas) == set(rows)


def test_the_ground_truth_names_its_grey_zone(tmp_path: Path) -> None:
    from certified_circuits.analysis.component_truth import per_component_block, split_truth
    from certified_circuits.analysis.recovery import grey_mask

    names = [f"layer1.{i}" for i in range(14)]
    effects = np.array([0.9] * 11 + [0.3, 0.05, 0.1])
    planted = np.array([True] * 13 + [False])
    split = split_truth(effects, planted)
    block = per_component_block(names, effects, planted, split, metric="m", ablation="a", unit="u")
    doc = {"format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 14,
           "concepts": {"circle": {"components": names[:11], "verification": {"passed": True,
                                                                             "per_component": block}}}}
    write_json(tmp_path / "gt.json", doc)
    truth = read_ground_truth(tmp_path / "gt.json")
    assert truth.grey("circle") == ("layer1.11",)  # 0.3 lies between epsilon 0.1 and delta 0.5; 0.05 is null
    assert np.flatnonzero(grey_mask(truth, "circle", names)).tolist() == [11]
