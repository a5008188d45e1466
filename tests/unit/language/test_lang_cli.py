"""End to end through the CLI on a tiny budget: tasks -> train -> attribute -> votes/certify -> evaluate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from certified_circuits.cli.main import main
from certified_circuits.language.graph import build_graph, edge_names
from certified_circuits.language.tasks import TASKS
from certified_circuits.storage.store import read_attributions


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    d = tmp_path_factory.mktemp("lang")
    for t in TASKS:
        assert main(["language-tasks", "--task", t, "--out-dir", str(d / "tasks" / t), "--n-per-split", "8",
                     "--seed", "1"]) == 0
    assert main(["language-train", "--tasks-dir", str(d / "tasks"), "--out-dir", str(d / "model"),
                 "--metrics", str(d / "metrics.json"), "--steps", "15", "--n-layer", "2", "--n-embd", "32",
                 "--batch-per-task", "8"]) == 0
    task = "ioi"
    assert main(["language-attribute", "--model", "embedded", "--model-path", str(d / "model"), "--task", task,
                 "--split", "train", "--examples", str(d / "tasks" / task / "train.jsonl"),
                 "--out", str(d / "attr.h5"), "--ig-steps", "2", "--batch-size", "4"]) == 0
    assert main(["votes", "--attributions", str(d / "attr.h5"), "--scorer", "eap_ig", "--k-grid", "0.05", "0.3", "1.0",
                 "--p-del", "0.9", "--n0", "10", "--n", "50", "--seed", "0",
                 "--out", str(d / "votes.h5")]) == 0
    from certified_circuits.storage.store import read_votes

    assert read_votes(d / "votes.h5").attrs["absolute"]  # EAP-IG's |mean| ranking, read from the attribution file
    assert main(["certify", "--votes", str(d / "votes.h5"), "--tau", "0.6", "--alpha", "0.05",
                 "--out", str(d / "certs.h5")]) == 0
    assert main(["language-evaluate", "--model", "embedded", "--model-path", str(d / "model"), "--task", task,
                 "--votes", str(d / "votes.h5"), "--certificates", str(d / "certs.h5"),
                 "--eval-set", f"id_test={d / 'tasks' / task / 'id_test.jsonl'}",
                 "--eval-set", f"ood_test={d / 'tasks' / task / 'ood_test.jsonl'}",
                 "--out", str(d / "eval.csv")]) == 0
    return d


def test_metrics_json(pipeline):
    m = json.loads((pipeline / "metrics.json").read_text())
    assert set(m["accuracy"]) == set(TASKS)
    for t in TASKS:
        assert set(m["accuracy"][t]) == {"train", "id_test", "ood_test", "validation"}
        assert 0.0 <= m["accuracy"][t]["id_test"]["accuracy"] <= 1.0


def test_attribution_contract(pipeline):
    a = read_attributions(pipeline / "attr.h5")
    g = build_graph(2, 4)
    assert a.scores["eap_ig"].shape == (8, g.n_edges)
    assert a.names == edge_names(2, 4)
    assert (a.groups == 0).all()
    assert np.isfinite(a.scores["eap_ig"]).all() and np.abs(a.scores["eap_ig"]).max() > 0
    assert a.attrs["ig_steps"] == 2 and a.attrs["split"] == "train" and a.attrs["integration"] == "reference"


def test_evaluation_table(pipeline):
    df = pd.read_csv(pipeline / "eval.csv")
    # faithfulness' m is the logit difference; a circuit of every edge is the full model exactly
    circuits = df[df.method != "full"]
    full_ld = df[df.method == "full"].set_index("eval_set")["logit_diff"]
    assert (df["m_full"] == df["eval_set"].map(full_ld)).all()
    every = circuits[np.isclose(circuits.k_effective, 1.0)]
    assert (every["m"] == every["m_full"]).all()
    assert list(df.columns) == ["experiment", "concept", "eval_set", "method", "k_target", "k_effective",
                                "accuracy", "binary_accuracy", "logit_diff", "n_examples", "per_example_correct",
                                "m", "m_empty", "m_full",   # faithfulness: the circuit, the empty circuit, the model
                                # the setting the circuits came from, read from the votes and certificates
                                "scorer", "split", "setting", "p_del", "n0", "n", "seed", "tau", "alpha",
                                "correction", "radius"]
    assert (df.scorer == "eap_ig").all() and (df.tau == 0.6).all() and (df.alpha == 0.05).all()
    assert set(df.method) == {"full", "baseline", "majority", "certified"}
    assert set(df.eval_set) == {"id_test", "ood_test"}
    metrics = json.loads((pipeline / "metrics.json").read_text())["accuracy"]["ioi"]
    for es in ("id_test", "ood_test"):
        full = df[(df.eval_set == es) & (df.method == "full")].iloc[0]
        assert full.accuracy == pytest.approx(metrics[es]["accuracy"])
        # the baseline at K = 1 keeps every edge: identical to the unpatched model
        b1 = df[(df.eval_set == es) & (df.method == "baseline") & (df.k_target == 1.0)].iloc[0]
        assert b1.k_effective == 1.0
        assert b1.accuracy == pytest.approx(full.accuracy)
        assert b1.logit_diff == pytest.approx(full.logit_diff, abs=1e-4)
        outcomes = pd.read_csv(pipeline / "eval.csv", dtype={"per_example_correct": str})
        same = outcomes.loc[[b1.name, full.name], "per_example_correct"]
        assert same.iloc[0] == same.iloc[1] and len(same.iloc[0]) == full.n_examples
    base = df[df.method == "baseline"]
    assert np.allclose(base.k_effective, base.k_target, atol=1.0 / build_graph(2, 4).n_edges)


def test_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["language-attribute", "--model", "embedded", "--model-path", str(tmp_path / "nomodel"), "--task",
              "ioi", "--split", "train", "--examples", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "a.h5")])
    assert exc.value.code == 2 and "nomodel" in capsys.readouterr().err
    from certified_circuits.language.models import load_gpt2

    with pytest.raises(FileNotFoundError, match="huggingface-cli download gpt2"):
        load_gpt2(tmp_path / "no_gpt2_here")
