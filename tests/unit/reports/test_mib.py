"""MIB's circuit-track conventions (Mueller et al. 2025): the edge-fraction grid, top-n, pruning, CPR/CMD, the
certified circuit per fraction and the submission layout.

Facts checked here, and where they come from (hannamw/MIB-circuit-track at b759df3, with its EAP-IG submodule
hannamw/EAP-IG at 7af394a):

* ``MIB_circuit_track/evaluation.py`` ``evaluate_area_under_curve``: ``percentages = (.001, .002, .005, .01, .02,
  .05, .1, .2, .5, 1)``, ``curr_num_items = int(pct * n_scored_items)`` with ``n_scored_items = len(graph.edges)``,
  ``graph.apply_topn(n, absolute, prune=True)``, the areas ``area_under`` (CPR) and ``area_from_1`` (CMD) as
  trapezoids over ``percentages`` with ``log_scale=False``;
* ``print_results.py``: CPR reads the ``abs-False`` results, CMD the ``abs-True`` ones;
* EAP-IG ``src/eap/graph.py`` ``Graph.prune``: a node stays with an incoming (``input`` always has one) and an
  outgoing edge, an edge with its parent and child (``logits`` always present), until nothing changes;
  ``weighted_edge_count`` = edges left;
* ``README.md`` "Submitting to the MIB Leaderboard": one folder per task/model named task and model joined by an
  underscore (``ioi_gpt2``, ``arc-easy_llama3``), holding one importance file or 9 circuits, each with no more
  than its percentage of edges (0.1% .. 50%); ``run_evaluation.py`` reads ``.../importances.json``; and
  ``run_attribution.py``: ``{circuit_dir}/{method}_{ablation}_{level}/{task.replace('_', '-')}_{model}/``;
* EAP-IG ``Graph.from_json`` reads ``cfg``, ``nodes`` and ``edges`` (a ``score`` and ``in_graph`` per edge) only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis import faithfulness as fa
from certified_circuits.analysis.mib_constants import MIB_FRACTIONS
from certified_circuits.language.evaluate import edge_endpoints, mib_circuit_masks
from certified_circuits.language.graph import build_graph
from certified_circuits.reports import mib_submission as mib
from certified_circuits.reports.mib_faithfulness import mib_faithfulness_report
from certified_circuits.reports.eap_graph import graph_cfg, read_graph_json, write_graph_json

MIB_PERCENTAGES = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)  # evaluation.py, verbatim


def test_the_grid_is_mibs_and_budgets_floor() -> None:
    assert MIB_FRACTIONS == MIB_PERCENTAGES
    assert [mib.percent_label(p) for p in MIB_FRACTIONS] == ["0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50",
                                                               "100"]
    # GPT-2 Small's 32,491 edges: int(pct * n)
    assert [fa.mib_edge_count(p, 32491) for p in MIB_FRACTIONS] == [32, 64, 162, 324, 649, 1624, 3249, 6498,
                                                                       16245, 32491]
    assert fa.MIB_RANKING == {"cpr": "signed", "cmd": "absolute"}


def test_topn_signed_and_absolute() -> None:
    scores = np.array([0.5, -3.0, 2.0, -0.1, 2.0])
    assert fa.topn_mask(scores, 2, absolute=False).tolist() == [False, False, True, False, True]
    assert fa.topn_mask(scores, 2, absolute=True).tolist() == [False, True, True, False, False]  # tie: lower index
    assert not fa.topn_mask(scores, 0, absolute=True).any()


def test_prune_on_a_one_layer_one_head_graph() -> None:
    g = build_graph(1, 1)
    names = g.edge_names()
    parent, child, source, sink = edge_endpoints(g)

    def pruned(kept: set[str]) -> set[str]:
        mask = np.array([n in kept for n in names])
        return {n for n, k in zip(names, fa.prune_edges(mask, parent, child, source, sink)) if k}

    # a head with no input edge is dropped with its outgoing edge; so is an MLP that feeds nothing
    assert pruned({"a0.h0->m0"}) == set()
    assert pruned({"input->m0"}) == set()
    # a path input -> head -> MLP -> logits survives whole; the dangling input->a0.h0<k> too (the head stays)
    path = {"input->a0.h0<q>", "a0.h0->m0", "m0->logits"}
    assert pruned(path | {"input->a0.h0<k>"}) == path | {"input->a0.h0<k>"}
    # cutting the MLP's way out removes the chain back to the input
    assert pruned({"input->a0.h0<q>", "a0.h0->m0"}) == set()


def test_mib_areas_by_hand() -> None:
    f = np.array([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.1, 1.0, 1.0, 1.0])
    p = MIB_PERCENTAGES
    cpr = sum((p[i + 1] - p[i]) * (f[i] + f[i + 1]) / 2 for i in range(9))
    cmd = sum((p[i + 1] - p[i]) * (abs(1 - f[i]) + abs(1 - f[i + 1])) / 2 for i in range(9))
    got = fa.mib_curve_areas(p[::-1], f[::-1])  # any order
    assert got == pytest.approx((cpr, cmd), abs=1e-15)
    # by hand: widths .001 .003 .005 .01 .03 .05 .1 .3 .5 times the mean of neighbouring f (|1 - f|)
    # CPR = .00005 + .0006 + .002 + .006 + .024 + .05 + .105 + .3 + .5
    # CMD = .00095 + .0024 + .003 + .004 + .006 + .005 + .005
    assert got == pytest.approx((0.98765, 0.02635), abs=1e-12)
    # spot check of one trapezoid: (0.5 - 0.2) * (1.0 + 1.0) / 2 = 0.3 of CPR, 0 of CMD
    assert fa.mib_curve_areas([0.2, 0.5], [1.0, 1.0]) == pytest.approx((0.3, 0.0))


def test_mib_table_takes_cpr_from_signed_and_cmd_from_absolute() -> None:
    p = list(MIB_PERCENTAGES)
    rows = []
    for method, ranking, f in (("baseline", "signed", 1.0), ("baseline", "absolute", 0.5), ("certified", "binary", 0.25)):
        for k in p:
            rows.append(dict(concept="ioi", eval_set="id_test", method=method, ranking=ranking, k_target=k,
                             m=f * 4.0 + 1.0, m_empty=1.0, m_full=5.0))
    table = fa.mib_faithfulness_table(pd.DataFrame(rows), ["eval_set"]).set_index("method")
    span = 1 - 0.001
    assert table.loc["baseline", "cpr"] == pytest.approx(1.0 * span)   # signed curve, f = 1
    assert table.loc["baseline", "cmd"] == pytest.approx(0.5 * span)   # absolute curve, |1 - 0.5|
    assert table.loc["certified", "cpr"] == pytest.approx(0.25 * span)
    assert table.loc["certified", "cmd"] == pytest.approx(0.75 * span)
    assert table.loc["baseline", "cpr_ranking"] == "signed" and table.loc["baseline", "cmd_ranking"] == "absolute"
    assert table.loc["certified", "cmd_ranking"] == "binary"


def test_certified_circuit_per_fraction() -> None:
    k_grid = [0.002, 0.01, 0.5, 1.0]
    n_edges = 1000
    decision = np.full((4, n_edges), -1, dtype=np.int8)
    decision[0, :3] = 1          # K = 0.002: 3 in, budget at 0.2% is 2 -> truncated to the 2 best ranked
    decision[1, :8] = 1          # K = 0.01: 8 in
    decision[2, :300] = 1
    decision[3, :] = 1
    rank = np.zeros(n_edges)
    rank[:3] = [1.0, 3.0, 2.0]
    got = {c["fraction"]: c for c in fa.circuits_at_fractions(decision, k_grid, rank)}
    assert got[0.001]["k"] is None and got[0.001]["n_in"] == 0 and got[0.001]["budget"] == 1
    assert got[0.002]["k"] == 0.002 and got[0.002]["truncated"]
    assert np.flatnonzero(got[0.002]["in_graph"]).tolist() == [1, 2]
    assert got[0.005]["k"] == 0.002 and got[0.005]["n_in"] == 3 and not got[0.005]["truncated"]
    assert got[0.05]["k"] == 0.01 and got[0.05]["n_in"] == 8
    assert got[0.5]["n_in"] == 300 and got[1.0]["n_in"] == n_edges
    for c in got.values():
        assert c["n_in"] <= c["budget"]


def test_baseline_masks_are_pruned_top_n() -> None:
    g = build_graph(2, 2)
    rng = np.random.default_rng(0)
    scores = rng.normal(size=g.n_edges)
    circuits = mib_circuit_masks(g, scores)
    assert len(circuits) == 2 * len(MIB_PERCENTAGES)
    parent, child, source, sink = edge_endpoints(g)
    for c in circuits:
        n = int(c["fraction"] * g.n_edges)
        top = fa.topn_mask(scores, n, c["ranking"] == "absolute")
        assert c["budget"] == n
        assert np.array_equal(c["mask"], fa.prune_edges(top, parent, child, source, sink))
        assert not (c["mask"] & ~top).any()
    full = [c for c in circuits if c["fraction"] == 1.0]
    assert all(c["mask"].all() for c in full)


def _write_task(root, task: str, model: str = "gpt2"):
    g = build_graph(2, 2)
    names = g.edge_names()
    rng = np.random.default_rng(1)
    scores = rng.normal(size=g.n_edges)
    k_grid = [0.01, 0.05, 0.2, 0.5, 1.0]
    decision = np.full((len(k_grid), g.n_edges), 0, dtype=np.int8)
    order = np.argsort(-np.abs(scores), kind="stable")
    for i, k in enumerate(k_grid):
        n = int(round(k * g.n_edges))
        decision[i, order[:n]] = 1
        decision[i, order[n: n + 3]] = -1
    cfg = graph_cfg(2, 2, 0, False, task=task)
    files = mib.submission_files(cfg, names, decision, k_grid, setting={"tau": 0.9, "p_del": np.float64(0.95)},
                                 rank_scores=np.abs(scores))
    folder = root / mib.MULTIPLE / mib.method_folder("certified-EAP-IG-inputs") / mib.task_folder(task, model)
    written = [write_graph_json(folder / mib.circuit_file(fraction), graph) for fraction, graph in files["binary"]]
    importance = root / mib.IMPORTANCES / mib.method_folder("certified-EAP-IG-inputs") / mib.task_folder(task, model)
    write_graph_json(importance / mib.IMPORTANCE_FILE, files["importances"])
    return written, names, decision, k_grid, files["notes"]


def test_submission_layout_matches_mibs_description(tmp_path) -> None:
    written, names, decision, k_grid, notes = _write_task(tmp_path, "arc_easy", "llama3")
    _write_task(tmp_path, "ioi")
    method = tmp_path / mib.MULTIPLE / "certified-EAP-IG-inputs_patching_edge"      # {method}_{ablation}_{level}
    assert sorted(p.name for p in method.iterdir()) == ["arc-easy_llama3", "ioi_gpt2"]  # task '_' -> '-'
    assert [p.name for p in written] == ["circuit_0.1pct.json", "circuit_0.2pct.json", "circuit_0.5pct.json",
                                         "circuit_1pct.json", "circuit_2pct.json", "circuit_5pct.json",
                                         "circuit_10pct.json", "circuit_20pct.json", "circuit_50pct.json"]
    assert mib.check_submission(tmp_path) == {
        "importances/certified-EAP-IG-inputs_patching_edge/arc-easy_llama3": 1,
        "importances/certified-EAP-IG-inputs_patching_edge/ioi_gpt2": 1,
        "multiple_circuits/certified-EAP-IG-inputs_patching_edge/arc-easy_llama3": 9,
        "multiple_circuits/certified-EAP-IG-inputs_patching_edge/ioi_gpt2": 9}
    e = len(names)
    for path, p, note in zip(written, MIB_PERCENTAGES, notes["fractions"]):
        d = json.loads(path.read_text())
        assert set(d) == {"cfg", "nodes", "edges"}  # the certificate is in the notes, beside the files
        read_graph_json(path)
        n_in = sum(v["in_graph"] for v in d["edges"].values())
        assert n_in <= int(p * e)
        assert note["budget"] == int(p * e) and note["n_in"] == n_in and note["file"] == path.name
        if note["k"] is not None:
            i = k_grid.index(note["k"])
            assert note["abstain"] == [n for n, x in zip(names, decision[i]) if x == -1]
            assert note["counts"]["abstain"] == min(3, e - int(round(note["k"] * e)))
    assert notes["setting"]["p_del"] == 0.95 and notes["nested"] is True
    # 0.1% and 0.2% of 66 edges allow 0 edges: those circuits are empty
    assert json.loads(written[0].read_text())["nodes"]["logits"]["in_graph"] is False


def test_layout_refusals(tmp_path) -> None:
    with pytest.raises(ValueError, match="'_' joins"):
        mib.task_folder("ioi", "tiny_gpt2")
    written, *_ = _write_task(tmp_path, "ioi")
    d = json.loads(written[3].read_text())
    for info in d["edges"].values():
        info["in_graph"] = True
    written[3].write_text(json.dumps(d))
    with pytest.raises(ValueError, match="over MIB's 1%"):
        mib.check_submission(tmp_path)
    written[0].unlink()
    with pytest.raises(ValueError, match="one circuit per fraction"):
        mib.check_submission(tmp_path)
    (tmp_path / mib.IMPORTANCES / "certified-EAP-IG-inputs_patching_edge" / "ioi_gpt2" / "extra.json").write_text("{}")
    with pytest.raises(ValueError, match="one importance file"):
        mib.check_submission(tmp_path)


def test_mib_faithfulness_report_caption_states_the_abs_convention(tmp_path) -> None:
    rows = [dict(experiment="x", concept="ioi", eval_set="id_test", setting="s", method=m, ranking=r, k_target=k,
                 m=2.0, m_empty=0.0, m_full=2.0)
            for m, r in (("baseline", "signed"), ("baseline", "absolute"), ("certified", "binary"))
            for k in MIB_PERCENTAGES]
    pd.DataFrame(rows).to_csv(tmp_path / "ioi.csv", index=False)
    metrics = mib_faithfulness_report([tmp_path / "ioi.csv"], tmp_path / "tables")
    assert metrics["mib_baseline_cpr"] == pytest.approx(0.999) and metrics["mib_certified_cmd"] == pytest.approx(0.0)
    md = (tmp_path / "tables" / "faithfulness_mib_mean.md").read_text()
    assert "abs = False" in md and "abs = True" in md


@pytest.mark.parametrize("stage", ["report-mib", "language-faithfulness-mib", "report-mib-faithfulness"])
def test_cli_help(stage, capsys) -> None:
    from certified_circuits.cli.main import main

    with pytest.raises(SystemExit) as done:
        main([stage, "--help"])
    assert done.value.code == 0
    assert "Example" in capsys.readouterr().out


def test_the_selected_setting_is_the_circuit_exported(tmp_path) -> None:
    """MIB's files and grid use each task's certified setting chosen on held-out prompts (selected_cacc_raw.csv's
    certified_setting), whichever order the settings come in; without the table, one circuit per task."""
    import certified_circuits as cc
    from certified_circuits.core.setting import Setting

    scores = np.random.default_rng(0).normal(size=(20, 6))
    paths = {}
    for tau in (0.7, 0.8):
        setting = Setting(p_del=0.8, n0=20, n=100, tau=tau, alpha=0.05)
        path = cc.certify_scores(scores, np.zeros(6, int), [0.5, 1.0], setting).save(tmp_path / f"t{tau}.h5")
        paths[setting.tag] = (path, path)
    tags = list(paths)
    selected = pd.DataFrame({"concept": ["ioi", "ioi", "other"], "eval_set": ["id_test", "ood_test", "id_test"],
                             "certified_setting": [tags[1], tags[1], tags[0]]})
    for order in (tags, tags[::-1]):
        votes, certs, votes_path, _ = mib.select_circuit("ioi", [paths[t] for t in order], selected)
        assert votes_path == paths[tags[1]][0] and certs.attrs["tau"] == 0.8
    assert mib.select_circuit("ioi", [paths[tags[0]]], None)[1].attrs["tau"] == 0.7
    with pytest.raises(ValueError, match="no selected table to choose one"):
        mib.select_circuit("ioi", list(paths.values()), None)
    with pytest.raises(ValueError, match="not among the circuits given"):
        mib.select_circuit("ioi", [paths[tags[0]]], selected)
    with pytest.raises(ValueError, match="no certified setting for task 'mine'"):
        mib.select_circuit("mine", list(paths.values()), selected)


def test_the_evaluation_model_is_checked_on_the_task_s_own_prompts(tmp_path, monkeypatch) -> None:
    """language-evaluate and language-faithfulness-mib load the model with every eval set's clean and corrupted
    prompts (load_language_model's prompts=: the hf bridge-vs-HF logits check runs on them)."""
    from types import SimpleNamespace

    from certified_circuits.language import evaluate, models

    sets = {}
    for name in ("id_test", "validation"):
        rows = [dict(id=f"{name}{i}", task="ioi", split=name, clean=f"c {name} {i}", corrupted=f"x {name} {i}",
                     answer=" A", distractor=" B") for i in range(2)]
        sets[name] = tmp_path / f"{name}.jsonl"
        sets[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = {}

    def fake(model, model_path, with_bridge=True, prompts=None, device=None):
        seen.update(model=model, prompts=prompts, device=device)
        return SimpleNamespace(weights=None, bridge=None)

    monkeypatch.setattr(models, "load_language_model", fake)
    evaluate.load_evaluation_model("hf", tmp_path, "ioi", sets, "cpu")
    assert seen == {"model": "hf", "device": "cpu",
                    "prompts": ["c id_test 0", "x id_test 0", "c id_test 1", "x id_test 1",
                                "c validation 0", "x validation 0", "c validation 1", "x validation 1"]}
    with pytest.raises(ValueError, match="another task"):
        evaluate.load_evaluation_model("hf", tmp_path, "greater_than", sets, "cpu")
