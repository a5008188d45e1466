"""Reporting stages end to end on small inputs laid out as the workflow lays them out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from certified_circuits.certification import certify_votes
from certified_circuits.cli import main
from certified_circuits.reporting import annotate_from_path
from certified_circuits.smoothing import compute_votes
from certified_circuits.store import write_attributions, write_certificates, write_votes

SETTING = "p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"


def _sufficiency(root: Path, concept: str, certified_boost: float) -> Path:
    rows = []
    for method, base in (("baseline", 0.6), ("majority", 0.65), ("certified", 0.6 + certified_boost)):
        for k, bump in ((0.2, 0.0), (0.5, 0.1)):
            rows.append(dict(experiment="world", concept=concept, eval_set="id", method=method, k_target=k,
                             k_effective=k * (0.5 if method == "certified" else 1), accuracy=base + bump,
                             false_positive_rate=0.2, balanced_accuracy=(base + bump + 0.8) / 2, n_images=50))
    rows.append(dict(experiment="world", concept=concept, eval_set="id", method="full", k_target=1.0, k_effective=1.0,
                     accuracy=0.5, false_positive_rate=0.3, balanced_accuracy=0.6, n_images=50))
    path = root / "sufficiency" / "world" / concept / "relevance" / f"{SETTING}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_annotation_from_path() -> None:
    info = annotate_from_path(Path(f"x/world/c1/relevance/{SETTING}.csv"))
    assert info["scorer"] == "relevance" and info["p_del"] == 0.6 and info["tau"] == 0.95 and info["radius"] == 1
    with pytest.raises(ValueError, match="layout"):
        annotate_from_path(Path("x/world/c1/relevance/whatever.csv"))


def test_report_sufficiency_writes_tables_and_figures(tmp_path: Path) -> None:
    inputs = [str(_sufficiency(tmp_path, f"c{i}", 0.1 + 0.05 * i)) for i in range(4)]
    out = tmp_path / "tables"
    assert main(["report-sufficiency", "--inputs", *inputs, "--by", "scorer", "--out-dir", str(out)]) == 0
    raw = pd.read_csv(out / "peaks_cacc_raw.csv").iloc[0]
    # certified peak at K 0.5: mean of 0.6 + [0.1, 0.15, 0.2, 0.25] + 0.1 = 0.875; baseline 0.7
    assert raw["certified"] == pytest.approx(0.875) and raw["baseline"] == pytest.approx(0.7)
    assert raw["delta"] == pytest.approx(0.875 / 0.7 - 1) and raw["n_concepts"] == 4
    markdown = (out / "peaks_cacc.md").read_text()
    assert "87.5 (25.0)" in markdown and "70.0 (50.0)" in markdown
    for name in ("curves_cacc.png", "curves_balanced_accuracy.pdf", "curves_false_positive_rate.png", "peaks_balanced.tex"):
        assert (out / name).stat().st_size > 0


def _votes_and_certificates(root: Path, name: str, seed: int, shift: float) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(seed)
    signal = np.zeros(20)
    signal[[0, 1, 10, 11]] = 3.0  # exactly the top 2 of each group at K = 0.2
    scores = signal + shift * rng.normal(size=20) + rng.normal(size=(40, 20))
    attributions = write_attributions(root / f"{name}.h5", {"relevance": scores}, np.repeat([0, 1], 10),
                                      [f"u{i}" for i in range(20)], [str(i) for i in range(40)], {},
                                      extras={"spurious_index": np.linspace(0, 1, 20)})
    votes = compute_votes(scores, np.repeat([0, 1], 10), [0.2, 0.5], 0.6, 50, 200, seed=seed)
    votes_path = write_votes(root / f"{name}_votes.h5", votes)
    cert_path = write_certificates(root / f"{name}_cert.h5", certify_votes(votes, 0.9, 0.01))
    return attributions, votes_path, cert_path


def test_iou_seeds_spurious_and_theory(tmp_path: Path) -> None:
    curves = pd.DataFrame(
        [dict(experiment="world", eval_set=e, method=m, k_target=k, k_effective=k, cacc=c)
         for e in ("id", "shift") for m, k, c in (("baseline", 0.2, 0.5), ("baseline", 0.5, 0.6),
                                                  ("certified", 0.2, 0.9), ("certified", 0.5, 0.7))]
    )
    curves_path = tmp_path / "curves.csv"
    curves.to_csv(curves_path, index=False)
    a_id, v_id, c_id = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    _, v_ood, c_ood = _votes_and_certificates(tmp_path, "ood", 1, 0.5)
    _, v_s1, c_s1 = _votes_and_certificates(tmp_path, "s1", 2, 0.0)
    out = tmp_path / "out"
    assert main(["report-iou", "--experiment", "world", "--curves", str(curves_path), "--item", "c0", "shift",
                 str(v_id), str(c_id), str(v_ood), str(c_ood), "--out-dir", str(out)]) == 0
    iou = pd.read_csv(out / "iou.csv")
    assert set(iou.method) == {"baseline", "certified"} and (iou.k_target == 0.2).all()  # gap 0.4 at K 0.2
    assert iou.iou.between(0, 1).all()
    assert main(["report-seeds", "--experiment", "world", "--curves", str(curves_path), "--item", "c0", "0", str(v_id),
                 str(c_id), "--item", "c0", "1", str(v_s1), str(c_s1), "--out-dir", str(out)]) == 0
    seeds = pd.read_csv(out / "seed_stability.csv")
    assert len(seeds) == 2 and seeds.k_target.iloc[0] == 0.2
    assert main(["report-spurious", "--curves", str(curves_path), "--item", "c0", str(a_id), str(v_id), str(c_id),
                 "--out-dir", str(out)]) == 0
    channels = pd.read_csv(out / "spurious_channels.csv")
    assert set(channels.category) <= {"certified_in", "abstained", "certified_out"}
    assert "certified_in" in set(channels.category)
    assert main(["report-theory", "--out-dir", str(out)]) == 0
    assert (out / "radius_vs_pdel.png").exists() and (out / "samples_vs_tau.pdf").exists()


def test_operating_k_comes_from_the_chosen_scorer(tmp_path: Path) -> None:
    # relevance peaks at K 0.2, activation at K 0.5: mixing the scorers would pick the wrong K
    rows = [dict(experiment="world", scorer=s, eval_set="id", method="certified", k_target=k, k_effective=k, cacc=c)
            for s, k, c in (("relevance", 0.2, 0.9), ("relevance", 0.5, 0.5), ("activation", 0.2, 0.1),
                            ("activation", 0.5, 0.95))]
    curves_path = tmp_path / "curves.csv"
    pd.DataFrame(rows).to_csv(curves_path, index=False)
    _, v, c = _votes_and_certificates(tmp_path, "id", 0, 0.0)
    out = tmp_path / "out"
    assert main(["report-seeds", "--experiment", "world", "--curves", str(curves_path), "--scorer", "relevance",
                 "--item", "c0", "0", str(v), str(c), "--item", "c0", "1", str(v), str(c), "--out-dir", str(out)]) == 0
    assert (pd.read_csv(out / "seed_stability.csv").k_target == 0.2).all()
    with pytest.raises(SystemExit):
        main(["report-seeds", "--experiment", "world", "--curves", str(curves_path), "--item", "c0", "0", str(v),
              str(c), "--out-dir", str(out)])
