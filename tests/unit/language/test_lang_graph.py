"""EAP graph (docs/architecture.md, section 3, "Graph sizes"): edge counts, names, and the graph derived from GPT-2 Small's shape."""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.language.graph import build_graph, edge_names, n_edges_formula


@pytest.mark.parametrize("L,H", [(1, 1), (2, 4), (3, 4), (4, 8)])
def test_edge_count_formula(L, H):
    assert build_graph(L, H).n_edges == n_edges_formula(L, H)


def test_gpt2_small_graph_from_random_model():
    """GPT-2 Small's architecture with random weights (no download): 32,491 edges."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from certified_circuits.language.forward import GPT2Weights, run
    from certified_circuits.language.models import build_model

    cfg = GPT2Config()  # GPT-2 Small defaults: 12 layers, 12 heads, d_model 768, 50257 tokens
    with torch.device("meta"):  # full-size shapes without allocating or initialising 124M weights
        g = GPT2Weights.from_hf(GPT2LMHeadModel(cfg)).graph
    # the decomposed forward reproduces HF logits with GPT-2 Small's 12 x 12 head layout (narrower width)
    small = GPT2Config(n_embd=96, vocab_size=64, bos_token_id=0, eos_token_id=0)
    model = build_model(small, seed=0)
    w = GPT2Weights.from_hf(model)
    toks = torch.tensor([[1, 5, 3, 9, 2, 7]])
    with torch.no_grad():
        ours = run(w, w.embed(toks), torch.tensor([6])).logits_last
        ref = model(toks).logits[:, -1]
    assert torch.allclose(ours, ref, atol=1e-4)
    assert w.graph.n_edges == g.n_edges
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
