"""EAP graph (DESIGN.md section 1): edge counts, names, and the graph derived from GPT-2 Small's shape."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.language.graph import build_graph, edge_names, n_edges_formula


@pytest.mark.parametrize("L,H", [(1, 1), (2, 4), (3, 4), (4, 8)])
def test_edge_count_formula(L, H):
    assert build_graph(L, H).n_edges == n_edges_formula(L, H)


def test_gpt2_small_graph_from_random_model():
    """GPT-2 Small's architecture with random weights (no download): 32,491 edges."""
    from transformers import GPT2Config

    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import build_model

    cfg = GPT2Config()  # GPT-2 Small defaults: 12 layers, 12 heads, d_model 768
    cfg.vocab_size = 16  # keep the random model small; the graph depends only on layers and heads
    w = GPT2Weights.from_hf(build_model(cfg, seed=0))
    g = w.graph
    assert (g.n_layers, g.n_heads) == (12, 12)
    assert g.n_edges == 32491
    names = edge_names(12, 12)
    assert len(names) == len(set(names)) == 32491
    for n in ["a3.h2->m7", "m1->a4.h0<q>", "input->logits", "a3.h2->m3", "m11->logits", "input->a0.h5<v>"]:
        assert n in names
    for n in ["m3->m3", "a3.h2->a3.h1<q>", "m3->a3.h0<k>", "logits->m1"]:
        assert n not in names


def test_canonical_order_and_dense_mask():
    g = build_graph(2, 3)
    names = g.edge_names()
    assert names == edge_names(2, 3)
    assert names[0] == "input->a0.h0<q>" and names[-1] == "m1->logits"
    mask = np.zeros(g.n_edges, bool)
    mask[[0, 5, g.n_edges - 1]] = True
    dense = g.dense_mask(mask)
    assert dense.sum() == 3 and not (dense & ~g.valid).any()
    assert dense[g.edge_up[5], g.edge_down[5]]
    with pytest.raises(ValueError, match="edges"):
        g.dense_mask(np.zeros(3, bool))
