"""EAP-IG Graph JSON: our files load with a minimal reader written from hannamw/EAP-IG's ``Graph.from_model``
and ``Graph.from_json`` (the reference is not on PyPI); edge counts against the closed form and a case
listed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certified_circuits.language.graph import edge_names, n_edges_formula
from certified_circuits.reports.eap_graph import (circuit_graph_json, decisions_sidecar, graph_cfg,
                                                  read_graph_json, write_graph_json)


def reference_graph_names(cfg: dict) -> tuple[set[str], list[str]]:
    """Nodes and edges of the reference's ``Graph.from_model(cfg)``: the residual-stream loop."""
    nodes, edges, stream = {"input", "logits"}, [], ["input"]
    for l in range(cfg["n_layers"]):
        heads = [f"a{l}.h{h}" for h in range(cfg["n_heads"])]
        nodes |= set(heads) | {f"m{l}"}
        if cfg["parallel_attn_mlp"]:
            for node in stream:
                edges += [f"{node}->{a}<{x}>" for a in heads for x in "qkv"] + [f"{node}->m{l}"]
            stream += heads + [f"m{l}"]
        else:
            for node in stream:
                edges += [f"{node}->{a}<{x}>" for a in heads for x in "qkv"]
            stream += heads
            edges += [f"{node}->m{l}" for node in stream]
            stream.append(f"m{l}")
    return nodes, edges + [f"{node}->logits" for node in stream]


def reference_from_json(path) -> dict:
    """The reference's ``from_json``: keys checked, graph rebuilt from cfg, every node and edge looked up."""
    d = json.loads(open(path).read())
    assert all(k in d for k in ("cfg", "nodes", "edges"))
    nodes, edges = reference_graph_names(d["cfg"])
    for name in d["nodes"]:
        assert name in nodes, name
    for name in d["edges"]:
        assert name in set(edges), name
    return {name: (info["score"], info["in_graph"]) for name, info in d["edges"].items()}


def test_edge_counts_match_the_closed_form_and_a_case_listed_by_hand() -> None:
    _, e = reference_graph_names({"n_layers": 12, "n_heads": 12, "parallel_attn_mlp": False})
    assert len(e) == n_edges_formula(12, 12) == 32491
    _, e = reference_graph_names({"n_layers": 12, "n_heads": 12, "parallel_attn_mlp": True})
    assert len(e) == n_edges_formula(12, 12, True) == 32491 - 144
    by_hand = ["input->a0.h0<q>", "input->a0.h0<k>", "input->a0.h0<v>", "input->m0", "a0.h0->m0", "input->logits",
               "a0.h0->logits", "m0->logits"]
    assert sorted(reference_graph_names({"n_layers": 1, "n_heads": 1, "parallel_attn_mlp": False})[1]) == sorted(by_hand)
    assert sorted(reference_graph_names({"n_layers": 1, "n_heads": 1, "parallel_attn_mlp": True})[1]) == \
        sorted(n for n in by_hand if n != "a0.h0->m0")


@pytest.mark.parametrize("parallel", [False, True])
def test_our_graph_and_file_load_with_the_reference_reader(tmp_path, parallel) -> None:
    names = edge_names(2, 3, parallel)
    assert sorted(names) == sorted(reference_graph_names({"n_layers": 2, "n_heads": 3, "parallel_attn_mlp": parallel})[1])
    rng = np.random.default_rng(0)
    scores = rng.normal(size=len(names)).astype(np.float32)
    keep = rng.uniform(size=len(names)) < 0.2
    cfg = graph_cfg(2, 3, 16, parallel, model="tiny")
    path = write_graph_json(tmp_path / "g.json", circuit_graph_json(cfg, names, scores, keep))
    loaded = reference_from_json(path)
    assert set(loaded) == set(names)
    for name, s, k in zip(names, scores, keep):
        assert loaded[name] == (float(s), bool(k))       # JSON floats round-trip exactly
    d = read_graph_json(path)
    in_nodes = {n for n, v in d["nodes"].items() if v["in_graph"]}
    touched = {part.split("<")[0] for n, k in zip(names, keep) if k for part in n.split("->")}
    assert in_nodes == touched


def test_node_level_circuit_keeps_node_scores(tmp_path) -> None:
    names = edge_names(1, 2)
    node_names = ["a0.h0", "a0.h1", "m0"]
    d = circuit_graph_json(graph_cfg(1, 2, 8, False), names, np.zeros(len(names)), np.zeros(len(names), bool),
                           node_scores=np.array([0.5, -1.0, 2.0]), node_names=node_names,
                           node_in_graph=np.array([True, False, True]))
    assert d["nodes"]["a0.h1"] == {"in_graph": False, "score": -1.0}
    assert d["nodes"]["m0"] == {"in_graph": True, "score": 2.0} and d["nodes"]["input"]["in_graph"]
    reference_from_json(write_graph_json(tmp_path / "n.json", d))


def test_bad_input_is_refused() -> None:
    names = edge_names(1, 1)
    cfg = graph_cfg(1, 1, 8, False)
    with pytest.raises(ValueError, match="finite"):
        circuit_graph_json(cfg, names, np.r_[np.nan, np.zeros(len(names) - 1)], np.zeros(len(names), bool))
    with pytest.raises(ValueError, match="one entry per edge"):
        circuit_graph_json(cfg, names, np.zeros(3), np.zeros(len(names), bool))
    with pytest.raises(ValueError, match="not an EAP edge name"):
        circuit_graph_json(cfg, ["input=>m0"], np.zeros(1), np.zeros(1, bool))


def test_sidecar_lists_every_decision() -> None:
    side = decisions_sidecar(["e0", "e1", "e2", "e3"], np.array([1, -1, 0, 1]), k=0.5, setting={"tau": 0.9})
    assert side["in"] == ["e0", "e3"] and side["abstain"] == ["e1"] and side["out"] == ["e2"]
    assert side["counts"] == {"in": 2, "out": 1, "abstain": 1} and side["k"] == 0.5
