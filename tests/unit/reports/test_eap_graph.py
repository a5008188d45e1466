"""EAP-IG Graph JSON (:mod:`certified_circuits.reports.eap_graph`).

The reference (hannamw/EAP-IG) is not on PyPI, so our files are loaded with a minimal reader written here
from the reference's ``Graph.from_model`` and ``Graph.from_json`` (``src/eap/graph.py``), independent of
the package's graph helpers: the residual-stream loop builds the reference's nodes and edges from ``cfg``,
and every node (except ``logits``) and edge of the file is looked up in them, as ``from_json`` does.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from certified_circuits.reports.eap_graph import (circuit_graph_json, decisions_sidecar, graph_cfg,
                                                  read_graph_json, write_graph_json)

# ------------------------------------------------------------------------- minimal reference reader


def reference_graph_names(cfg: dict) -> tuple[set[str], list[str]]:
    """Node names and edge names (in ``add_edge`` order) of the reference's ``Graph.from_model(cfg)``."""
    nodes, edges = {"input"}, []
    residual_stream = ["input"]
    for layer in range(cfg["n_layers"]):
        attn_nodes = [f"a{layer}.h{head}" for head in range(cfg["n_heads"])]
        mlp_node = f"m{layer}"
        nodes.update(attn_nodes)
        nodes.add(mlp_node)
        if cfg["parallel_attn_mlp"]:
            for node in residual_stream:
                for attn_node in attn_nodes:
                    for letter in "qkv":
                        edges.append(f"{node}->{attn_node}<{letter}>")
                edges.append(f"{node}->{mlp_node}")
            residual_stream += attn_nodes
            residual_stream.append(mlp_node)
        else:
            for node in residual_stream:
                for attn_node in attn_nodes:
                    for letter in "qkv":
                        edges.append(f"{node}->{attn_node}<{letter}>")
            residual_stream += attn_nodes
            for node in residual_stream:
                edges.append(f"{node}->{mlp_node}")
            residual_stream.append(mlp_node)
    for node in residual_stream:
        edges.append(f"{node}->logits")
    nodes.add("logits")
    return nodes, edges


def reference_from_json(path) -> dict[str, tuple[float, bool]]:
    """The reference's ``Graph.from_json``: keys asserted, graph rebuilt from cfg, every node except ``logits``
    and every edge looked up (a KeyError fails the test). Returns {edge: (score, in_graph)} of the file's edges."""
    with open(path) as f:
        d = json.load(f)
        assert all(k in d.keys() for k in ["cfg", "nodes", "edges"]), "Bad input JSON format - Missing keys"
    cfg = d["cfg"]
    node_names, edge_names = reference_graph_names(cfg)
    assert isinstance(cfg["d_model"], int) and cfg["d_model"] >= 0   # from_model(neuron_level=True) sizes by it
    graph_nodes = {name: {"in_graph": False, "score": math.nan} for name in node_names}
    graph_edges = {name: {"score": 0.0, "in_graph": False} for name in edge_names}
    for name, node_dict in d["nodes"].items():
        if name == "logits":
            continue
        graph_nodes[name]["in_graph"] = node_dict["in_graph"]
        if "score" in node_dict:
            graph_nodes[name]["score"] = node_dict["score"]
    for name, info in d["edges"].items():
        graph_edges[name]["score"] = info["score"]
        graph_edges[name]["in_graph"] = info["in_graph"]
    return {name: (info["score"], info["in_graph"]) for name, info in d["edges"].items()}


def closed_form(n_layers: int, n_heads: int, parallel: bool) -> int:
    """E = sum_l [3H(1 + l(H+1)) + (1 + l(H+1) + H)] + 1 + L(H+1), minus L H for parallel attention."""
    h = n_heads
    e = sum(3 * h * (1 + l * (h + 1)) + (1 + l * (h + 1) + h) for l in range(n_layers)) + 1 + n_layers * (h + 1)
    return e - n_layers * h if parallel else e


def cfg_of(n_layers: int, n_heads: int, parallel: bool) -> dict:
    return {"n_layers": n_layers, "n_heads": n_heads, "parallel_attn_mlp": parallel, "d_model": 8}


# ------------------------------------------------------------------------------------ the reference graph


def test_reference_edge_counts_match_the_closed_form() -> None:
    assert closed_form(12, 12, False) == 32491
    assert closed_form(12, 12, True) == 32491 - 144
    assert len(reference_graph_names(cfg_of(12, 12, False))[1]) == 32491
    assert len(reference_graph_names(cfg_of(12, 12, True))[1]) == 32347
    for n_layers, n_heads in [(1, 1), (2, 3), (3, 2), (4, 4)]:
        for parallel in (False, True):
            nodes, edges = reference_graph_names(cfg_of(n_layers, n_heads, parallel))
            assert len(edges) == len(set(edges)) == closed_form(n_layers, n_heads, parallel)
            assert len(nodes) == 2 + n_layers * (n_heads + 1)


def test_reference_edges_of_one_layer_one_head_listed_by_hand() -> None:
    by_hand = ["input->a0.h0<q>", "input->a0.h0<k>", "input->a0.h0<v>", "input->m0", "a0.h0->m0", "input->logits",
               "a0.h0->logits", "m0->logits"]
    nodes, edges = reference_graph_names(cfg_of(1, 1, False))
    assert sorted(edges) == sorted(by_hand) and len(edges) == 8
    assert nodes == {"input", "a0.h0", "m0", "logits"}
    parallel = [e for e in by_hand if e != "a0.h0->m0"]
    assert sorted(reference_graph_names(cfg_of(1, 1, True))[1]) == sorted(parallel) and len(parallel) == 7


@pytest.mark.parametrize("parallel", [False, True])
def test_package_edge_names_are_the_reference_edges(parallel) -> None:
    from certified_circuits.language.graph import edge_names

    assert sorted(edge_names(2, 3, parallel)) == sorted(reference_graph_names(cfg_of(2, 3, parallel))[1])


# ------------------------------------------------------------------------------------------ round trip


def expected_node_in_graph(edges, keep) -> dict[str, bool]:
    """The module's rule, written from the brief: a node is in iff an in-graph edge touches it."""
    out = {}
    for name, k in zip(edges, keep):
        parent, child = name.split("->")
        for node in (parent, child.split("<")[0]):
            out[node] = out.get(node, False) or bool(k)
    return out


@pytest.mark.parametrize("parallel", [False, True])
def test_edge_circuit_round_trips_through_the_reference_reader(tmp_path, parallel) -> None:
    _, names = reference_graph_names(cfg_of(2, 3, parallel))
    rng = np.random.default_rng(0)
    names = [names[i] for i in rng.permutation(len(names))]          # any order is kept
    scores = rng.normal(size=len(names)).astype(np.float32)
    keep = rng.uniform(size=len(names)) < 0.2
    keep[names.index("a1.h2->logits")] = True
    cfg = graph_cfg(2, 3, 16, parallel, model="tiny", k=0.1)
    path = write_graph_json(tmp_path / "sub" / "g.json", circuit_graph_json(cfg, names, scores, keep))
    assert [p.name for p in path.parent.iterdir()] == ["g.json"]     # atomic: no temporary left

    loaded = reference_from_json(path)
    assert list(loaded) == names
    for name, s, k in zip(names, scores, keep):
        assert loaded[name] == (float(s), bool(k))                    # JSON floats round-trip exactly
        assert type(loaded[name][1]) is bool

    d = read_graph_json(path)
    assert d["cfg"] == {"n_layers": 2, "n_heads": 3, "parallel_attn_mlp": parallel, "d_model": 16, "model": "tiny",
                        "k": 0.1}
    assert {n: v["in_graph"] for n, v in d["nodes"].items()} == expected_node_in_graph(names, keep)
    assert d["nodes"]["logits"]["in_graph"] and all("score" not in v for v in d["nodes"].values())
    assert list(d["nodes"]) == ["input", "a0.h0", "a0.h1", "a0.h2", "m0", "a1.h0", "a1.h1", "a1.h2", "m1", "logits"]


def test_nodes_and_logits_out_when_no_edge_is_in(tmp_path) -> None:
    _, names = reference_graph_names(cfg_of(2, 2, False))
    keep = np.array([n == "input->a1.h0<k>" for n in names])
    d = circuit_graph_json(graph_cfg(2, 2, 0, False), names, np.ones(len(names)), keep)
    assert {n for n, v in d["nodes"].items() if v["in_graph"]} == {"input", "a1.h0"}   # logits: no edge into it
    d = circuit_graph_json(graph_cfg(2, 2, 0, False), names, np.ones(len(names)), np.zeros(len(names), int))
    assert not any(v["in_graph"] for v in d["nodes"].values())
    reference_from_json(write_graph_json(tmp_path / "empty.json", d))                    # d_model 0 loads too


@pytest.mark.parametrize("parallel", [False, True])
def test_node_level_circuit(tmp_path, parallel) -> None:
    _, names = reference_graph_names(cfg_of(2, 3, parallel))
    components = ["a0.h0", "a0.h1", "a0.h2", "m0", "a1.h0", "a1.h1", "a1.h2", "m1"]
    rng = np.random.default_rng(1)
    node_scores = rng.normal(size=len(components)).astype(np.float32)
    node_in = np.array([True, False, True, False, True, True, False, True])
    d = circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, None, None, node_scores=node_scores,
                           node_names=components, node_in_graph=node_in)
    for name, s, k in zip(components, node_scores, node_in):
        assert d["nodes"][name] == {"in_graph": bool(k), "score": float(s)}
    assert d["nodes"]["input"] == {"in_graph": True} and d["nodes"]["logits"] == {"in_graph": True}
    member = {"input", "logits"} | {n for n, k in zip(components, node_in) if k}
    for name in names:
        parent, child = name.split("->")
        assert d["edges"][name] == {"score": 0.0, "in_graph": parent in member and child.split("<")[0] in member}
    loaded = reference_from_json(write_graph_json(tmp_path / "n.json", d))
    assert set(loaded) == set(names)
    # the same circuit with the edge arrays given explicitly (zeros and the node rule)
    rule = np.array([d["edges"][n]["in_graph"] for n in names])
    assert circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, np.zeros(len(names)), rule,
                              node_scores=node_scores, node_names=components, node_in_graph=node_in) == d
    with pytest.raises(ValueError, match="node rule"):
        circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, None, ~rule, node_scores=node_scores,
                           node_names=components, node_in_graph=node_in)
    with pytest.raises(ValueError, match="together"):
        circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, None, None, node_names=components,
                           node_in_graph=node_in)
    with pytest.raises(ValueError, match="'m1' has score nan"):
        circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, None, None, node_scores=np.r_[node_scores[:-1], np.nan],
                           node_names=components, node_in_graph=node_in)
    with pytest.raises(ValueError, match="a2.h0"):
        circuit_graph_json(graph_cfg(2, 3, 8, parallel), names, None, None, node_scores=[0.0], node_names=["a2.h0"],
                           node_in_graph=[True])


# ---------------------------------------------------------------------------------------------- errors


def test_bad_input_is_refused(tmp_path) -> None:
    cfg = graph_cfg(1, 1, 8, False)
    _, names = reference_graph_names(cfg)
    zeros, off = np.zeros(len(names)), np.zeros(len(names), bool)
    with pytest.raises(ValueError, match=r"'input->a0.h0<k>' has score nan.*finite"):
        circuit_graph_json(cfg, names, np.r_[0.0, np.nan, np.zeros(len(names) - 2)], off)
    with pytest.raises(ValueError, match="finite"):
        circuit_graph_json(cfg, names, np.r_[np.inf, np.zeros(len(names) - 1)], off)
    with pytest.raises(ValueError, match="one entry per edge"):
        circuit_graph_json(cfg, names, np.zeros(3), off)
    with pytest.raises(ValueError, match="one entry per edge"):
        circuit_graph_json(cfg, names, zeros, off[:-1])
    for bad in ["input=>m0", "input->a0.h0", "input->m0<q>", "a0.h0->a0.h0<q>", "m0->a0.h0<v>", "a1.h0->logits",
                "a0.h1->logits", "logits->m0", "input->a0.h0<x>", " input->m0", "a00.h0->logits"]:
        with pytest.raises(ValueError, match=bad.replace("<", ".").replace(">", ".").replace("=", ".").strip()):
            circuit_graph_json(cfg, [bad], np.zeros(1), np.zeros(1, bool))
    with pytest.raises(ValueError, match="parallel_attn_mlp=True"):
        circuit_graph_json(graph_cfg(1, 1, 8, True), ["a0.h0->m0"], np.zeros(1), np.zeros(1, bool))
    with pytest.raises(ValueError, match="more than once"):
        circuit_graph_json(cfg, ["input->m0", "input->m0"], np.zeros(2), np.zeros(2, bool))
    with pytest.raises(ValueError, match="decision == 1"):
        circuit_graph_json(cfg, names, zeros, np.r_[1, -1, np.zeros(len(names) - 2, int)])
    with pytest.raises(ValueError, match="cfg lacks"):
        circuit_graph_json({"n_layers": 1, "n_heads": 1}, names, zeros, off)
    with pytest.raises(ValueError, match="shadow"):
        graph_cfg(1, 1, 8, False, items=3)
    with pytest.raises(ValueError, match="n_layers >= 1"):
        graph_cfg(0, 1, 8, False)
    with pytest.raises(ValueError, match="NaN"):
        write_graph_json(tmp_path / "nan.json", {"cfg": graph_cfg(1, 1, 8, False, radius=float("nan")), "nodes": {},
                                                 "edges": {}})
    assert not list(tmp_path.iterdir())


def test_read_graph_json_names_the_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cfg": cfg_of(1, 1, False), "nodes": {}}))
    with pytest.raises(ValueError, match=r"bad\.json.*edges"):
        read_graph_json(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json is not JSON"):
        read_graph_json(bad)
    bad.write_text(json.dumps({"cfg": {"n_layers": 1}, "nodes": {}, "edges": {}}))
    with pytest.raises(ValueError, match=r"bad\.json: cfg lacks"):
        read_graph_json(bad)


BAD_EDGE_NAMES = ["input=>m0", "input->a0.h0", "input->m0<q>", "a0.h0->a0.h0<q>", "m0->a0.h0<v>", "a1.h0->logits",
                  "a0.h1->logits", "logits->m0", "input->a0.h0<x>", " input->m0", "a00.h0->logits"]


def _good_file(tmp_path, parallel: bool = False) -> tuple[dict, object]:
    cfg = graph_cfg(1, 1, 8, parallel)
    _, names = reference_graph_names(cfg)
    d = circuit_graph_json(cfg, names, np.linspace(-1, 1, len(names)), np.arange(len(names)) % 2 == 0)
    return d, write_graph_json(tmp_path / "good.json", d)


@pytest.mark.parametrize("bad", BAD_EDGE_NAMES)
def test_what_the_writer_refuses_the_reader_refuses_edge_names(tmp_path, bad) -> None:
    cfg = graph_cfg(1, 1, 8, False)
    with pytest.raises(ValueError):
        circuit_graph_json(cfg, [bad], np.zeros(1), np.zeros(1, bool))
    d, _ = _good_file(tmp_path)
    d["edges"][bad] = {"score": 0.5, "in_graph": False}
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"foreign\.json: .*" + re.escape(repr(bad))):
        read_graph_json(path)


def test_the_reader_accepts_what_the_writer_writes(tmp_path) -> None:
    for parallel in (False, True):
        d, path = _good_file(tmp_path, parallel)
        assert read_graph_json(path) == d


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["edges"]["input->m0"].pop("score"), r"'input->m0' has no score"),
    (lambda d: d["edges"]["input->m0"].update(score=None), r"'input->m0' has no score"),
    (lambda d: d["edges"]["input->m0"].update(score="0.5"), r"'input->m0' has score '0.5'.*finite number"),
    (lambda d: d["edges"]["input->m0"].update(score=True), r"'input->m0' has score True"),
    (lambda d: d["edges"]["input->m0"].update(in_graph=-1), r"'input->m0' has in_graph -1.*true or false"),
    (lambda d: d["edges"]["input->m0"].update(in_graph=1), r"'input->m0' has in_graph 1"),
    (lambda d: d["edges"]["input->m0"].update(in_graph="true"), r"'input->m0' has in_graph 'true'"),
    (lambda d: d["edges"]["input->m0"].pop("in_graph"), r"'input->m0' has in_graph None"),
    (lambda d: d["edges"].update({"input->m0": 0.5}), r"'input->m0': its entry must be an object"),
    (lambda d: d["edges"].update({"a0.h0->m0": {"score": 0.1, "in_graph": True}}) or d["cfg"].update(
        parallel_attn_mlp=True), r"'a0.h0->m0' is not an edge of the graph \(parallel_attn_mlp=True\)"),
    (lambda d: d["nodes"].update({"a3.h0": {"in_graph": True}}), r"node 'a3.h0' is not in a graph of 1 layers"),
    (lambda d: d["nodes"].update({"mlp0": {"in_graph": True}}), r"node 'mlp0' is not an EAP node name"),
    (lambda d: d["nodes"].update({"m0": True}), r"node 'm0': its entry must be an object"),
    (lambda d: d["nodes"].update({"m0": {"in_graph": True, "score": None}}), r"node 'm0' has score None"),
    (lambda d: d["cfg"].update(n_layers="1"), r"cfg\['n_layers'\] must be an integer"),
    (lambda d: d["cfg"].update(parallel_attn_mlp=0), r"cfg\['parallel_attn_mlp'\] must be true or false"),
    (lambda d: d["cfg"].update(d_model=-1), r"cfg\['d_model'\] must be an integer >= 0"),
])
def test_the_reader_refuses_each_bad_entry_naming_it(tmp_path, edit, message) -> None:
    d, _ = _good_file(tmp_path)
    edit(d)
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"foreign\.json: .*" + message):
        read_graph_json(path)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_the_reader_refuses_non_finite_scores_that_python_json_accepts(tmp_path, token) -> None:
    _, good = _good_file(tmp_path)
    text = good.read_text().replace('"input->m0": {"score": ', '"input->m0": {"score": ' + token + ", \"was\": ", 1)
    assert token in text
    path = tmp_path / "foreign.json"
    path.write_text(text)
    assert not math.isfinite(json.loads(text)["edges"]["input->m0"]["score"])   # Python's json takes it
    with pytest.raises(ValueError, match=r"foreign\.json: edge 'input->m0' has score -?(nan|inf)"):
        read_graph_json(path)


def test_the_reader_refuses_a_repeated_name_and_non_utf8_bytes(tmp_path) -> None:
    _, good = _good_file(tmp_path)
    text = good.read_text()
    repeated = text.replace('"edges": {', '"edges": {"input->m0": {"score": 9.0, "in_graph": true}, ', 1)
    path = tmp_path / "foreign.json"
    path.write_text(repeated)
    assert json.loads(repeated)["edges"]["input->m0"]["score"] != 9.0      # plain json keeps the last silently
    with pytest.raises(ValueError, match=r"foreign\.json: key 'input->m0' is given more than once"):
        read_graph_json(path)
    path.write_bytes(text.encode("utf-8").replace(b'"cfg"', b'"cfg\xff"', 1))
    with pytest.raises(ValueError, match=r"foreign\.json is not UTF-8 text \(byte \d+"):
        read_graph_json(path)


# --------------------------------------------------------------------------------------------- sidecar


def test_sidecar_lists_every_decision(tmp_path) -> None:
    names = ["input->m0", "a0.h0->m0", "input->logits", "a0.h0->logits", "m0->logits"]
    decision = np.array([1, -1, 0, 1, -1], dtype=np.int8)
    side = decisions_sidecar(names, decision, k=np.float64(0.5), setting={"tau": np.float32(0.75), "n": np.int64(64)})
    assert side == {"k": 0.5, "setting": {"tau": 0.75, "n": 64}, "in": ["input->m0", "a0.h0->logits"],
                    "out": ["input->logits"], "abstain": ["a0.h0->m0", "m0->logits"],
                    "counts": {"in": 2, "out": 1, "abstain": 2}}
    json.dumps(side, allow_nan=False)
    # the circuit file holds certified-in edges only; abstained and certified-out edges are both out
    d = circuit_graph_json(graph_cfg(1, 1, 8, False), names, np.ones(5), decision == 1)
    assert [n for n, e in d["edges"].items() if e["in_graph"]] == side["in"]
    with pytest.raises(ValueError, match="1 .in., 0 .out. or -1"):
        decisions_sidecar(names, np.array([1, 2, 0, 0, 0]), k=1, setting={})
    with pytest.raises(ValueError, match="one entry per name"):
        decisions_sidecar(names, decision[:3], k=1, setting={})


@pytest.mark.parametrize("parallel", [False, True])
def test_exactly_the_reference_edges_are_accepted(parallel) -> None:
    """Every candidate parent->child[<x>] over the reference's nodes: accepted iff the reference has the edge."""
    cfg = cfg_of(2, 2, parallel)
    nodes, edges = reference_graph_names(cfg)
    reference = set(edges)
    for parent in sorted(nodes):
        for child in sorted(nodes):
            for suffix in ("", "<q>", "<k>", "<v>"):
                name = f"{parent}->{child}{suffix}"
                try:
                    circuit_graph_json(cfg, [name], np.zeros(1), np.zeros(1, bool))
                    accepted = True
                except ValueError:
                    accepted = False
                assert accepted == (name in reference), name


def test_the_minimal_reader_refuses_a_name_the_reference_lacks(tmp_path) -> None:
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps({"cfg": cfg_of(1, 1, True), "nodes": {}, "edges": {"a0.h0->m0": {"score": 0.0,
                                                                                                "in_graph": True}}}))
    with pytest.raises(KeyError, match="a0.h0->m0"):
        reference_from_json(path)
    path.write_text(json.dumps({"cfg": cfg_of(1, 1, False), "nodes": {"a1.h0": {"in_graph": True}}, "edges": {}}))
    with pytest.raises(KeyError, match="a1.h0"):
        reference_from_json(path)
