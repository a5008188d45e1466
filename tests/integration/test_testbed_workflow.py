"""The testbed end to end (configs/testbed_smoke.yaml): a 3-class planted world ResNet and the compiled induction
GPT-2, their causally verified ground truths, recovery of the truth per method, bootstrap stability, and the findings
that open summary.md and the explorer's recovery line. Tiny data: the numbers checked are the ones that hold by
construction (the truth's size, the induction circuit's verification, the baseline recovering the 3 true edges), the
rest are checked for shape and range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the workflow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONFIG = ROOT / "configs" / "testbed_smoke.yaml"
METHODS = {"baseline", "majority", "certified_in", "certified_in_abstain"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("testbed") / "results"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    command = [str(BIN / "snakemake"), "--cores", "2", "--configfile", str(CONFIG), "--config", f"results_dir={results}"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-6000:]
    return results


def test_the_ground_truths_name_the_planted_components_and_pass_their_checks(run: Path) -> None:
    vision = json.loads((run / "ground_truth" / "world.json").read_text())
    assert vision["format"] == "certified-circuits/ground-truth/1" and vision["kind"] == "vision"
    # widths 3 * own + shared = 5, 8, 8, 6 (27 channels); a class's truth: its own 1 + 2 + 2 + 2 and the 2 + 2 + 2 shared
    assert vision["n_components"] == 27 and sorted(vision["concepts"]) == ["circle", "square", "triangle"]
    assert {len(c["components"]) for c in vision["concepts"].values()} == {13}
    assert all("passed" in c["verification"] for c in vision["concepts"].values())
    language = json.loads((run / "ground_truth" / "tiny_gpt2.json").read_text())
    truth = language["concepts"]["induction"]
    assert len(truth["components"]) == 3 and truth["verification"]["passed"] is True
    head = truth["verification"]["headline"]
    assert head["circuit_only"] >= 0.9 and head["circuit_removed"] <= 0.1  # the thresholds, on 20 prompts


def test_recovery_scores_every_method_at_every_k_against_the_truth(run: Path) -> None:
    import pandas as pd

    for experiment, concepts, n_k in (("world", 3, 3), ("tiny_gpt2", 1, 3)):
        recovery = pd.read_csv(run / "tables" / experiment / "testbed" / "recovery.csv")
        assert set(recovery["method"]) == METHODS and recovery["concept"].nunique() == concepts
        assert len(recovery) == concepts * len(METHODS) * n_k
        assert ((recovery.tp + recovery.fn) == recovery.n_true).all()
        assert ((recovery.tp + recovery.fp + recovery.fn + recovery.tn) == recovery.n_components).all()
        auroc = pd.read_csv(run / "tables" / experiment / "testbed" / "recovery_auroc.csv")
        assert auroc["auroc"].between(0, 1).all() and set(auroc["k_source"]) == {"selected on " + (
            "id_test" if experiment == "world" else "validation")}
    language = pd.read_csv(run / "tables" / "tiny_gpt2" / "testbed" / "recovery.csv")
    # EAP-IG ranks the compiled circuit's 3 edges first: the baseline's 6-edge circuit (K 0.05 of 110) holds all 3
    at = language[(language.method == "baseline") & (language.k_target == 0.05)]
    assert at["tp"].tolist() == [3] and at["fp"].tolist() == [3]


def test_stability_resamples_each_dataset_twenty_times(run: Path) -> None:
    import pandas as pd

    stability = pd.read_csv(run / "tables" / "world" / "testbed" / "stability.csv")
    assert set(stability["resamples"]) == {20} and stability["concept"].nunique() == 3
    for column in ("baseline_change_share", "certified_change_share", "certified_flip_share", "baseline_jaccard_mean"):
        assert stability[column].between(0, 1).all(), column
    assert (run / "tables" / "tiny_gpt2" / "testbed" / "stability_summary.md").is_file()


def test_the_summary_opens_with_findings_and_the_explorer_shows_recovery(run: Path) -> None:
    summary = (run / "summary.md").read_text()
    assert summary.index("## What this run shows") < summary.index("## Warnings")
    findings = summary.split("## What this run shows", 1)[1].split("## Warnings", 1)[0]
    bullets = [line for line in findings.splitlines() if line.startswith("- ")]
    assert 4 <= len(bullets) <= 8
    assert any("recovery of the truth" in b and "AUROC baseline" in b and "certified in" in b for b in bullets)
    assert any("bootstrap resamples" in b for b in bullets)
    assert any("balanced accuracy under mean ablation" in b for b in bullets)
    index = (run / "explorer" / "index.html").read_text()
    assert "Recovery of the known circuit" in index and "recovery.png" in index
    assert (run / "tables" / "world" / "mean_ablation" / "selected_balanced_raw.csv").is_file()
