"""The EAP name grammar (language/names.py): every name the graph builder writes parses back to its parts,
malformed names are refused naming them, and the reference's node order is the builder's upstream order."""

from __future__ import annotations

import pytest

from certified_circuits.language import names
from certified_circuits.language.graph import build_graph


@pytest.mark.parametrize("parallel", [False, True])
def test_every_built_name_parses_back(parallel) -> None:
    g = build_graph(3, 2, parallel)
    for name in g.upstream:
        node = names.parse_node(name)
        assert names.is_node(name)
        rebuilt = {"input": names.INPUT, "logits": names.LOGITS}.get(node.kind) or (
            names.head(node.layer, node.head) if node.kind == "head" else names.mlp(node.layer))
        assert rebuilt == name
    for name in g.downstream:
        node, letter = names.split_input(name)
        assert names.is_node(node) and (letter is not None) == (names.parse_node(node).kind == "head")
    for name, u, d in zip(g.edge_names(), g.edge_up, g.edge_down):
        edge = names.parse_edge(name)
        assert names.is_edge(name) and edge.parent == g.upstream[u]
        assert names.edge(edge.parent, edge.child + (f"<{edge.letter}>" if edge.letter else "")) == name
        assert names.edge_nodes(name) == (edge.parent, edge.child) == (g.upstream[u], names.node_of(g.downstream[d]))
    assert sorted(g.upstream, key=lambda n: names.node_order(n, 3)) == list(g.upstream)
    assert not any(names.is_edge(n) for n in g.node_names())


def test_parts_and_depths() -> None:
    assert names.parse_node("a12.h3") == names.Node("head", 12, 3)
    assert names.parse_node("m0") == names.Node("mlp", 0)
    assert [names.parse_node(n).depth(4) for n in ("input", "a1.h0", "m3", "logits")] == [-1, 1, 3, 4]
    assert names.parse_edge("input->a1.h0<q>") == names.Edge("input", "a1.h0", "q")
    assert names.parse_edge("a0.h1->logits") == ("a0.h1", "logits", None)
    assert names.head_input(2, 1, "v") == "a2.h1<v>" and names.node_of("a2.h1<v>") == "a2.h1"
    assert names.is_head_or_mlp("m4") and not names.is_head_or_mlp("input") and not names.is_head_or_mlp(3)


@pytest.mark.parametrize("bad", ["a00.h0", "mlp0", "a0h1", "m", "input ", "a0.h0<q>", "", "logits\n"])
def test_malformed_nodes_are_refused(bad) -> None:
    assert not names.is_node(bad)
    with pytest.raises(ValueError, match="not an EAP node name"):
        names.parse_node(bad)


@pytest.mark.parametrize("bad", ["input=>m0", "input->a0.h0<x>", " input->m0", "a00.h0->logits", "input->m0\n",
                                 "input", "a0.h0->"])
def test_malformed_edges_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="not an EAP edge name"):
        names.parse_edge(bad)
    with pytest.raises(ValueError):
        names.head_input(0, 0, "x")
