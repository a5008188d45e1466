"""Stability under bootstrap resampling (analysis/stability.py, the stability and report-stability stages): seeded
resamples, pairwise shares and Jaccards by hand, a huge-margin case that never changes, a near-tied one that does,
and the resamples' circuits equal to the public API's on the same data."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import certified_circuits as cc
from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
from certified_circuits.analysis.stability import (
    bootstrap_indices,
    flip_share,
    jaccard_to,
    label_change_share,
    pairwise_jaccard,
    resample_circuits,
    stability,
)
from certified_circuits.cli.main import main
from certified_circuits.storage.atomic import write_json
from certified_circuits.storage.store import write_attributions

#: |D| = 40, U = 12: IN and OUT certifiable (asserted below), votes in milliseconds
SETTING = cc.Setting(p_del=0.6, n0=50, n=200, seed=3, tau=0.9, alpha=0.01)
GROUPS = np.zeros(12, dtype=np.int32)
K_GRID = [0.25, 0.5]


def _scores(kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "margin":  # three components 20 standard deviations above the rest
        mean = np.r_[np.full(3, 10.0), np.full(9, -10.0)]
    else:  # near ties: neighbours 0.05 apart under unit noise
        mean = np.linspace(0.6, 0.0, 12)
    return mean + rng.normal(size=(40, 12))


def test_the_setting_certifies_in_and_out() -> None:
    the_plan = cc.plan(40, 12, SETTING)
    assert the_plan.can_certify_in and the_plan.can_certify_out and the_plan.verdict == "ok"


def test_bootstrap_resamples_are_seeded_and_with_replacement() -> None:
    a, b, c = bootstrap_indices(50, 20, 0), bootstrap_indices(50, 20, 0), bootstrap_indices(50, 20, 1)
    assert a.shape == (20, 50) and a.min() >= 0 and a.max() <= 49
    np.testing.assert_array_equal(a, b)  # same seed: the same resamples
    assert (a != c).any()  # another seed: other resamples
    assert len({tuple(row) for row in a}) == 20  # distinct resamples
    assert all(len(set(row)) < 50 for row in a)  # drawn with replacement: P(no repeat in 50 of 50) = 50!/50^50
    with pytest.raises(ValueError):
        bootstrap_indices(50, 1, 0)


def test_label_change_and_flip_shares_by_hand() -> None:
    # B = 3 resamples, U = 2: component 0 is in on all three, component 1 is in, out, abstain
    decision = np.array([[[1, 1]], [[1, 0]], [[1, -1]]], dtype=np.int8)  # [B, nK = 1, U]
    # 3 pairs; component 1 differs in all 3, component 0 in none: 3 / (3 pairs * 2 components) = 0.5
    assert label_change_share(decision)[0] == pytest.approx(0.5, abs=1e-12)
    # in <-> out only between resamples 0 and 1: 1 / 6
    assert flip_share(decision)[0] == pytest.approx(1 / 6, abs=1e-12)
    membership = np.array([[[True, False]], [[True, True]], [[True, True]]])
    # component 1 differs in 2 of 3 pairs: 2 / 6
    assert label_change_share(membership)[0] == pytest.approx(1 / 3, abs=1e-12)


def test_jaccards_by_hand() -> None:
    circuits = np.array([[[1, 1, 0]], [[1, 1, 0]], [[1, 0, 1]]], dtype=bool)  # {0,1}, {0,1}, {0,2}
    mean, both_empty = pairwise_jaccard(circuits)
    assert mean[0] == pytest.approx((1 + 1 / 3 + 1 / 3) / 3, abs=1e-12) and both_empty[0] == 0.0
    np.testing.assert_allclose(jaccard_to(circuits, np.array([[1, 1, 0]], dtype=bool))[:, 0], [1, 1, 1 / 3], atol=1e-12)
    empty = np.zeros((3, 1, 3), dtype=bool)
    mean, both_empty = pairwise_jaccard(empty)
    assert np.isnan(mean[0]) and both_empty[0] == 1.0  # nothing certified is not "perfectly stable"
    one = empty.copy()
    one[0, 0, 2] = True  # {2}, {}, {}: two pairs of Jaccard 0, one pair both empty
    mean, both_empty = pairwise_jaccard(one)
    assert mean[0] == 0.0 and both_empty[0] == pytest.approx(1 / 3, abs=1e-12)


def test_huge_margin_is_stable() -> None:
    truth = np.r_[np.ones(3, bool), np.zeros(9, bool)]
    result = stability(_scores("margin"), GROUPS, K_GRID, SETTING, 20, 0, truth=truth)
    columns = result.columns
    assert columns["baseline_jaccard_mean"][0] == 1.0 and columns["baseline_change_share"][0] == 0.0
    assert columns["certified_change_share"][0] == 0.0 and columns["certified_in_jaccard"][0] == 1.0
    assert (columns["certified_flip_share"] == 0.0).all()
    # at K = 0.25 (3 of 12) the three are certified in and the nine out, on every resample
    assert columns["certified_in_share"][0] == 0.25 and columns["certified_out_share"][0] == 0.75
    assert columns["baseline_precision_mean"][0] == 1.0 and columns["baseline_recall_mean"][0] == 1.0
    assert columns["certified_in_precision_mean"][0] == 1.0 and columns["certified_in_empty_share"][0] == 0.0
    rows = result.rows({"concept": "c"})
    assert len(rows) == 2 and rows[0]["k_target"] == 0.25 and rows[0]["resamples"] == 20


def test_near_ties_change_between_resamples() -> None:
    columns = stability(_scores("ties"), GROUPS, K_GRID, SETTING, 20, 0).columns
    assert (columns["baseline_jaccard_mean"] < 1.0).all() and (columns["baseline_change_share"] > 0).all()
    assert (columns["certified_change_share"] > 0).all()
    np.testing.assert_allclose(
        columns["certified_in_share"] + columns["certified_out_share"] + columns["abstain_share"], 1.0, atol=1e-12
    )


def test_the_precision_and_recall_columns_are_recoverys() -> None:
    """Stability's precision and recall are :func:`certified_circuits.analysis.recovery.rates` of each resample's
    circuits, averaged over resamples (an empty circuit's NaN precision left out)."""
    from certified_circuits.analysis.recovery import confusion, rates

    truth = np.r_[np.ones(4, bool), np.zeros(8, bool)]
    scores = _scores("ties", 4)
    columns = stability(scores, GROUPS, K_GRID, SETTING, 5, 2, truth=truth).columns
    baseline, decision = resample_circuits(scores, GROUPS, np.array(K_GRID), SETTING, bootstrap_indices(40, 5, 2))
    for name, circuits in (("baseline", baseline), ("certified_in", decision == cc.IN)):
        scored = rates(confusion(circuits, truth))
        np.testing.assert_allclose(columns[f"{name}_recall_mean"], scored["recall"].mean(axis=0), atol=1e-12)
        np.testing.assert_allclose(columns[f"{name}_empty_share"], scored["empty_circuit"].mean(axis=0), atol=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a K where every resample's circuit is empty
            expected = np.nanmean(scored["precision"], axis=0)
        np.testing.assert_allclose(columns[f"{name}_precision_mean"], expected, atol=1e-12, equal_nan=True)


def test_resample_circuits_are_the_apis_on_the_resampled_data() -> None:
    scores = _scores("ties", 1)
    indices = bootstrap_indices(40, 3, 7)
    baseline, decision = resample_circuits(scores, GROUPS, np.array(K_GRID), SETTING, indices)
    for b in range(3):
        certificate = cc.certify_scores(scores[indices[b]], GROUPS, K_GRID, SETTING, device="cpu")
        np.testing.assert_array_equal(decision[b], certificate.decision)
        np.testing.assert_array_equal(baseline[b], certificate.baseline)


def test_bootstrap_seed_changes_the_numbers_and_same_seed_repeats_them() -> None:
    scores = _scores("ties", 2)
    first = stability(scores, GROUPS, K_GRID, SETTING, 20, 0).columns
    again = stability(scores, GROUPS, K_GRID, SETTING, 20, 0).columns
    other = stability(scores, GROUPS, K_GRID, SETTING, 20, 1).columns
    np.testing.assert_array_equal(first["baseline_jaccard_mean"], again["baseline_jaccard_mean"])
    assert (first["baseline_jaccard_mean"] != other["baseline_jaccard_mean"]).any()


# ---------------------------------------------------------------------------------------------- the stages


def _attributions(root: Path, concept: str, kind: str, seed: int) -> Path:
    names = [f"layer1.{i}" for i in range(12)]
    return write_attributions(root / f"{concept}.h5", {"relevance": _scores(kind, seed)}, GROUPS, names,
                              [str(i) for i in range(40)], {"concept": concept, "experiment": "world",
                                                            "split": "concept"})  # fmt: skip


def _stage(path: Path, out: Path, *extra: str) -> list[str]:
    return ["stability", "--attributions", str(path), "--scorer", "relevance", "--k-grid", "0.25", "0.5",
            "--p-del", "0.6", "--n0", "50", "--n", "200", "--seed", "3", "--tau", "0.9", "--alpha", "0.01",
            "--resamples", "20", "--bootstrap-seed", "0", "--out", str(out), *extra]  # fmt: skip


def test_stability_stages_write_their_tables(tmp_path: Path) -> None:
    truth = write_json(tmp_path / "gt.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 12,
        "concepts": {c: {"components": ["layer1.0", "layer1.1", "layer1.2"], "verification": {"passed": True}}
                     for c in ("circle", "square")}})  # fmt: skip
    outs = []
    for concept, kind in (("circle", "margin"), ("square", "ties")):
        out = tmp_path / f"{concept}_stability.csv"
        assert main(_stage(_attributions(tmp_path, concept, kind, 0), out, "--ground-truth", str(truth))) == 0
        outs.append(out)
    circle = pd.read_csv(outs[0])
    assert circle.k_target.tolist() == [0.25, 0.5] and (circle.concept == "circle").all()
    assert circle.setting.iloc[0] == "p0.6_n050_n200_s3/t0.9_a0.01_bonferroni" and circle.radius.iloc[0] == 1
    assert circle.baseline_jaccard_mean.iloc[0] == 1.0 and circle.certified_flip_share.iloc[0] == 0.0
    assert circle.baseline_recall_mean.iloc[0] == 1.0 and circle.seconds.iloc[0] > 0
    assert main(["report-stability", "--inputs", *map(str, outs), "--k", "0.25", "--out-dir", str(tmp_path / "t")]) == 0
    combined = pd.read_csv(tmp_path / "t" / "stability.csv")
    assert len(combined) == 4 and set(combined.concept) == {"circle", "square"}
    summary = (tmp_path / "t" / "stability_summary.md").read_text()
    assert "mean of 2" in summary and "in<->out flips" in summary and "square" in summary


def test_stability_refuses_a_vacuous_setting(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _attributions(tmp_path, "circle", "margin", 0)
    args = _stage(path, tmp_path / "s.csv")
    args[args.index("--n") + 1] = "5"  # tau 0.9 needs n >= 68 at U = 12, alpha 0.01
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2 and "--allow-vacuous" in capsys.readouterr().err


def test_the_stability_stage_writes_the_circuits_at_the_truths_size(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """The truth is the 3 components 20 standard deviations above the rest: at the truth's size the baseline and
    the certified-IN circuit are those 3 (precision 1), and report-stability combines the tables (issue 50)."""
    truth = write_json(tmp_path / "gt.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 12,
        "concepts": {c: {"components": ["layer1.0", "layer1.1", "layer1.2"], "verification": {"passed": True}}
                     for c in ("circle", "square")}})  # fmt: skip
    sizes = []
    for concept, kind in (("circle", "margin"), ("square", "ties")):
        out, at = tmp_path / f"{concept}_s.csv", tmp_path / f"{concept}_t.csv"
        assert main(_stage(_attributions(tmp_path, concept, kind, 0), out, "--ground-truth", str(truth),
                           "--out-truth-size", str(at))) == 0
        sizes.append(at)
    circle = pd.read_csv(sizes[0]).set_index("method")
    assert circle.index.tolist() == ["baseline", "certified_in", "certified_in_abstain", "majority"]
    assert circle.loc["baseline", "size"] == 3 and circle.loc["baseline", "precision"] == 1.0
    assert circle.loc["certified_in", "size"] == 3 and circle.loc["certified_in", "baseline_precision"] == 1.0
    assert (circle["concept"] == "circle").all() and (circle["resamples"] == 20).all()
    assert circle.loc["baseline", "setting"] == "p0.6_n050_n200_s3/t0.9_a0.01_bonferroni"
    assert main(["report-stability", "--inputs", str(tmp_path / "circle_s.csv"), str(tmp_path / "square_s.csv"),
                 "--truth-size", *map(str, sizes), "--out-dir", str(tmp_path / "t")]) == 0
    combined = pd.read_csv(tmp_path / "t" / "truth_size.csv")
    assert len(combined) == 8 and set(combined.concept) == {"circle", "square"}
    assert "baseline's top-size precision" in (tmp_path / "t" / "truth_size_summary.md").read_text()
    with pytest.raises(SystemExit) as exc:
        main(_stage(_attributions(tmp_path, "circle", "margin", 0), tmp_path / "x.csv", "--out-truth-size",
                    str(tmp_path / "y.csv")))
    assert exc.value.code == 2 and "--out-truth-size needs --ground-truth" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    ({"precision": "lots"}, "column 'precision' holds 'lots' (row 2), not a number"),
    ({"method": None}, "row 2 has no 'method'"),
])  # fmt: skip
def test_a_bad_truth_size_table_is_refused_by_row_and_column(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             change, message) -> None:
    row = {"experiment": "world", "concept": "circle", "scorer": "relevance", "setting": "s", "method": "baseline",
           "size": 3, "precision": 1.0, "recall": 1.0, "baseline_precision": 1.0, "baseline_recall": 1.0, "n_true": 3,
           "n_grey": 0, "baseline_jaccard_mean": 1.0, "baseline_change_share": 0.0, "certified_change_share": 0.0,
           "certified_flip_share": 0.0, "abstain_share": 0.0, "can_certify_in": True}
    bad = tmp_path / "t.csv"
    pd.DataFrame([{**row, **change}]).to_csv(bad, index=False)
    stability = tmp_path / "s.csv"
    assert main(_stage(_attributions(tmp_path, "circle", "margin", 0), stability)) == 0
    with pytest.raises(SystemExit) as exc:
        main(["report-stability", "--inputs", str(stability), "--truth-size", str(bad), "--out-dir", str(tmp_path / "o")])
    assert exc.value.code == 2 and f"{bad} (--truth-size): " in (err := capsys.readouterr().err) and message in err
