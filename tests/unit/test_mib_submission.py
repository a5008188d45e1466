"""The MIB submission formats read back the way MIB's evaluator reads them (its reading reimplemented in
tests/helpers/mib_reference.py).

This file reimplements, independently of the package, what hannamw/MIB-circuit-track (b759df3) does with a
submitted file: EAP-IG's (7af394a) ``Graph.from_model`` (the edge matrix: forward nodes ``input``, then per layer
the heads and the MLP; backward nodes per layer the heads' q, k, v inputs and the MLP, then ``logits``; an edge
from every earlier node, a head feeding its own layer's MLP), ``Graph.from_json`` (every edge's ``score`` and
``in_graph``), ``apply_topn(n, absolute)`` (reset, scores of non-edges -inf, ``argsort`` descending, the first n in)
and ``Graph.prune`` (a node stays with an incoming edge, ``input`` always, and an outgoing one; an edge with both
ends, ``logits`` always; repeated until the nodes do not change), driven as ``evaluate_area_under_curve`` drives
it: ``n = int(pct * len(graph.edges))``. Ties in ``argsort`` are left open by torch, so every selection is made
with ties broken both ways.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.analysis.mib_constants import SUBMISSION_FRACTIONS
from certified_circuits.core import planning
from certified_circuits.core.setting import Setting
from certified_circuits.language.graph import build_graph
from certified_circuits.reports import mib
from certified_circuits.storage.store import read_attributions, read_certificates, write_attributions

from tests.helpers.mib_reference import BINARY_PCTS, PERCENTAGES, MIBGraph, check_as_mib_evaluates  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A certificate of a 3-layer, 4-head graph on MIB's 9 fractions, sized by the planner, exported."""
    root = tmp_path_factory.mktemp("mib")
    g = build_graph(3, 4)
    names = g.edge_names()
    n_examples = 40
    rng = np.random.default_rng(7)
    # strong edges: paths input -> ... -> logits first (so that pruned circuits are not empty), then every other
    # edge among the same nodes, then 10 random edges
    alive = ("input", "a0.h1", "m0", "a1.h2", "m1", "a2.h3", "m2", "logits")
    paths = ["input->a0.h1<v>", "a0.h1->logits", "input->m0", "m0->logits", "a0.h1->a1.h2<k>", "a1.h2->logits",
             "m0->m1", "m1->m2", "m2->logits"]
    among = [n for n in names if n not in paths and all(any(part.startswith(a) for a in alive)
                                                         for part in n.replace("<", "->").split("->")[:2])]
    others = [n for n in names if n not in paths and n not in among]
    strong = paths + among + list(rng.choice(others, 10, replace=False))
    signal = np.zeros(g.n_edges)
    signal[[names.index(n) for n in strong]] = np.linspace(8.0, 2.0, len(strong))
    scores = signal + rng.normal(size=(n_examples, g.n_edges))
    setting = Setting(p_del=0.9, n0=50, n=400, tau=0.8, alpha=0.05)
    assert planning.plan(n_examples, g.n_edges, setting).verdict == "ok"
    attr = write_attributions(root / "attr.h5", {"eap_ig": scores}, np.zeros(g.n_edges, int), names,
                              [f"x{i}" for i in range(n_examples)],
                              {"n_layers": 3, "n_heads": 4, "d_model": 32, "level": "edge",
                               "model_path": "/home/me/secret/model"}, rankings={"eap_ig": "absolute"})
    cert = cc.certify_scores(scores, np.zeros(g.n_edges, int), list(SUBMISSION_FRACTIONS), setting,
                             absolute=True, attrs={"scorer": "eap_ig"}).save(root / "cert.h5")
    written = mib.write_submission(root / "out", "ioi", "gpt2", "certified-EAP-IG-inputs", attr, cert, cert)
    stored = read_attributions(attr).scores["eap_ig"].mean(0).astype(np.float64)  # the float32 file's mean
    return root / "out", names, read_certificates(cert).decision, np.abs(stored), written


def test_nine_binary_files_one_importance_file_and_notes(exported, caplog) -> None:
    out, names, decision, _, written = exported
    pair = "ioi_gpt2"
    binary = out / "multiple_circuits" / "certified-EAP-IG-inputs_patching_edge" / pair
    assert sorted(p.name for p in binary.iterdir()) == sorted(
        ["circuit_0.1pct.json", "circuit_0.2pct.json", "circuit_0.5pct.json", "circuit_1pct.json",
         "circuit_2pct.json", "circuit_5pct.json", "circuit_10pct.json", "circuit_20pct.json", "circuit_50pct.json"])
    importance = out / "importances" / "certified-EAP-IG-inputs_patching_edge" / pair
    assert [p.name for p in importance.iterdir()] == ["importances.json"]
    assert len(written) == 11
    for path in [*binary.iterdir(), importance / "importances.json"]:
        d = json.loads(path.read_text())
        assert set(d) == {"cfg", "nodes", "edges"}  # nothing MIB's loader reads holds the certificate
        assert d["cfg"]["model"] == "gpt2-small" and "secret" not in path.read_text()
    notes = json.loads((out / "notes" / f"{pair}.json").read_text())
    assert notes["submittable"] is False and "has 3 layers and 4 heads but MIB's gpt2" in notes["not_submittable_because"]
    assert notes["setting"]["tau"] == 0.8 and notes["setting"]["p_del"] == 0.9
    assert [n["k"] for n in notes["fractions"]] == list(BINARY_PCTS)
    for i, n in enumerate(notes["fractions"]):
        assert n["abstain"] == [e for e, x in zip(names, decision[i]) if x == -1]
        assert n["counts"] == {"in": int((decision[i] == 1).sum()), "out": int((decision[i] == 0).sum()),
                               "abstain": int((decision[i] == -1).sum())}
    # the planner-sized certificate certifies edges in at 4 of the 9 fractions (this fixture's numbers)
    assert [int((decision[i] == 1).sum()) for i in range(9)] == [0, 0, 0, 0, 0, 6, 22, 45, 56]
    assert [n["keeps_membership"] for n in notes["fractions"]] == [True] * 9
    assert check_as_mib_evaluates(out, pair) == 4  # 4 non-empty circuits, each exactly what MIB evaluates
    assert mib.check_submission(out) == {
        f"importances/certified-EAP-IG-inputs_patching_edge/{pair}": 1,
        f"multiple_circuits/certified-EAP-IG-inputs_patching_edge/{pair}": 9}


@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize("reverse_ties", [False, True])
def test_mib_evaluates_exactly_the_certified_circuit_of_each_binary_file(exported, absolute, reverse_ties) -> None:
    out, names, decision, _, _ = exported
    folder = out / "multiple_circuits" / "certified-EAP-IG-inputs_patching_edge" / "ioi_gpt2"
    non_empty = 0
    for i, pct in enumerate(BINARY_PCTS):
        g = MIBGraph.from_json(folder / f"circuit_{pct * 100:g}pct.json")
        n = int(pct * len(g.index))
        certified = g.mask(names, decision[i] == 1)  # K = pct is on the grid: the certificate's own circuit
        assert certified.sum() <= n
        evaluated = g.apply_topn(n, absolute, reverse_ties)
        assert np.array_equal(evaluated, g.prune(certified)), pct
        assert np.array_equal(g.in_graph, certified)
        non_empty += bool(evaluated.any())
    assert non_empty >= 3  # the check is not about empty circuits only


@pytest.mark.parametrize("absolute", [False, True])
def test_the_importance_file_ranks_certified_edges_first(exported, absolute) -> None:
    out, names, decision, votes_rank, _ = exported
    g = MIBGraph.from_json(out / "importances" / "certified-EAP-IG-inputs_patching_edge" / "ioi_gpt2" /
                           "importances.json")
    n_k = decision.shape[0]
    first_in = [next((k for k in range(n_k) if decision[k, e] == 1), n_k) for e in range(len(names))]
    abstains = [bool((decision[:, e] == -1).any()) for e in range(len(names))]
    expected = sorted(range(len(names)), key=lambda e: (first_in[e], first_in[e] == n_k and not abstains[e],
                                                       -votes_rank[e], e))
    nested = all(set(np.flatnonzero(decision[k] == 1)) <= set(np.flatnonzero(decision[k + 1] == 1))
                 for k in range(n_k - 1))
    for pct in PERCENTAGES:
        n = int(pct * len(names))
        for reverse in (False, True):  # distinct scores: no tie to break
            assert np.array_equal(g.apply_topn(n, absolute, reverse), g.prune(g.mask([names[e] for e in expected[:n]],
                                                                                 [True] * n)))
        if pct < 1 and nested:
            k = BINARY_PCTS.index(pct)
            certified = set(np.flatnonzero(decision[k] == 1).tolist())
            if len(certified) <= n:
                assert certified <= set(expected[:n])


def test_dead_edges_by_hand() -> None:
    g = build_graph(1, 1)
    names = g.edge_names()
    assert names == ["input->a0.h0<q>", "input->a0.h0<k>", "input->a0.h0<v>", "input->m0", "input->logits",
                     "a0.h0->m0", "a0.h0->logits", "m0->logits"]
    # C = the edges into logits: a0.h0 and m0 reach logits but input does not reach them, so a0.h0->m0 is dead
    c = np.array([n.endswith("logits") for n in names])
    scores, keeps = mib.binary_scores(names, c, n=4)
    assert keeps and scores.tolist() == [0, 0, 0, 0, 1, 0.5, 1, 1]
    assert not mib.binary_scores(names, c, n=5)[1]  # 2 dead edges needed, 1 there
    # C = input->m0: neither a0.h0 nor m0 reaches logits in C, so the edges into them are dead
    c = np.array([n == "input->m0" for n in names])
    scores, keeps = mib.binary_scores(names, c, n=5)
    assert keeps and scores.tolist() == [0.5, 0.5, 0.5, 1, 0, 0.5, 0, 0]
    # C = a path through every node: no edge is dead, and MIB's top n > |C| would add a live edge
    c = np.array([n in ("input->a0.h0<q>", "a0.h0->m0", "m0->logits") for n in names])
    scores, keeps = mib.binary_scores(names, c, n=4)
    assert not keeps and scores.tolist() == [1, 0, 0, 0, 0, 1, 0, 1]


def test_a_tampered_score_is_refused(exported, tmp_path) -> None:
    import shutil

    out = exported[0]
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    path = copy / "multiple_circuits" / "certified-EAP-IG-inputs_patching_edge" / "ioi_gpt2" / "circuit_50pct.json"
    d = json.loads(path.read_text())
    first_out = next(k for k, v in d["edges"].items() if not v["in_graph"])
    d["edges"][first_out]["score"] = 3.0
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="MIB's apply_topn would evaluate another circuit"):
        mib.check_submission(copy)


def test_an_unevaluated_pair_warns_and_is_marked(tmp_path, exported, caplog) -> None:
    root = exported[0].parent
    with caplog.at_level(logging.WARNING, logger="certified_circuits"):
        mib.write_submission(tmp_path, "greater_than", "mymodel", "m", root / "attr.h5", root / "cert.h5",
                             root / "cert.h5")
    notes = json.loads((tmp_path / "notes" / "greater-than_mymodel.json").read_text())
    assert notes["submittable"] is False and "MIB does not evaluate greater-than_mymodel" in \
        notes["not_submittable_because"] and "arc-challenge_llama3" in notes["not_submittable_because"]
    assert "not submittable to MIB" in caplog.text
    d = json.loads((tmp_path / "importances" / "m_patching_edge" / "greater-than_mymodel" / "importances.json")
                   .read_text())
    assert d["cfg"]["model"] == "mymodel"


def test_report_mib_writes_both_formats_and_checks_them(exported, tmp_path) -> None:
    from certified_circuits.cli.main import main

    root = exported[0].parent
    files = [str(root / "attr.h5"), str(root / "cert.h5"), str(root / "cert.h5")]
    assert main(["report-mib", "--model-name", "llama3", "--circuit", "mcqa", *files, "--circuit", "ioi", *files,
                 "--out-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["ioi_llama3.json", "mcqa_llama3.json"]
    assert len(list((tmp_path / "multiple_circuits").rglob("*.json"))) == 18
    assert len(list((tmp_path / "importances").rglob("importances.json"))) == 2
