"""The hooks of language/forward.py that the single-edge patching of language/ground_truth.py runs on (issue 52,
item 2): :func:`~certified_circuits.language.forward.resume` (the plain forward from any layer),
:func:`~certified_circuits.language.forward.head_attention` of some heads or of the last positions, and
:func:`~certified_circuits.language.forward.run_input_deltas` (one downstream input changed), each checked against
the forward's own runs in float64 on a random 3-layer GPT-2 with MLPs (tests/unit/language/test_ground_truth_patching.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certified_circuits.language.forward import head_attention, resume, run, run_input_deltas, run_patched_groups
from tests.unit.language.test_ground_truth_patching import model_and_prompts


@pytest.fixture(scope="module")
def random64():
    """The random model in float64, its prompts and the clean and corrupted runs (the patching's inputs)."""
    w, batch, _ = model_and_prompts("random")
    w = w.to(dtype=torch.float64)
    lengths = torch.as_tensor(batch.lengths)
    clean = run(w, w.embed(torch.as_tensor(batch.clean)), lengths, keep_inputs=True)
    corrupted = run(w, w.embed(torch.as_tensor(batch.corrupted)), lengths, keep_inputs=True)
    return w, batch, lengths, clean, corrupted


def test_resume_continues_the_plain_run_from_any_layer(random64):
    w, _, lengths, clean, _ = random64
    L = w.n_layers
    for layer in range(L):
        resid_pre = clean.inputs[2 * layer][:, 0, 0]  # head 0's q input: a copy of resid_pre(layer)
        np.testing.assert_allclose(resume(w, resid_pre, lengths, layer), clean.logits_last, rtol=0, atol=1e-10)
        np.testing.assert_allclose(resume(w, clean.inputs[2 * layer + 1], lengths, layer, after_heads=True),
                                   clean.logits_last, rtol=0, atol=1e-10)
    np.testing.assert_allclose(resume(w, clean.inputs[-1], lengths, L), clean.logits_last, rtol=0, atol=1e-10)
    for layer, after in ((L, True), (L + 1, False), (-1, False)):
        with pytest.raises(ValueError, match=f"resume at layer {layer}.*layers 0 .. {L - 1}"):
            resume(w, clean.inputs[-1], lengths, layer, after_heads=after)


def test_head_attention_of_some_heads_and_of_the_last_positions(random64):
    w, _, lengths, clean, _ = random64
    x = clean.inputs[2]                                                       # layer 1's q/k/v inputs [B, 2, 3, P, d]
    p = x.shape[3]
    causal = torch.ones(p, p, dtype=torch.bool).tril()
    full = head_attention(w, 1, x, causal)                                    # [B, 2, P, d]
    ar = torch.arange(x.shape[0])
    np.testing.assert_allclose(full, clean.nodes[:, 4:6], rtol=0, atol=1e-12)  # heads a1.h0, a1.h1 of the run
    np.testing.assert_allclose(head_attention(w, 1, x[:, [1]], causal, heads=[1]), full[:, [1]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(head_attention(w, 1, x, causal, lengths=lengths), full[ar, :, lengths - 1],
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(head_attention(w, 1, x[:, :1], causal, heads=[0], lengths=lengths),
                               full[ar, :1, lengths - 1], rtol=0, atol=1e-12)


def test_the_input_hook_is_interchange_patching_of_one_edge(random64):
    """``run_input_deltas`` with ``a_u(corrupted) - a_u(clean)`` at ``in_v`` gives the logits of the mask "every edge
    but u -> v" (:func:`run_patched_groups`), for a layer-0 head's k input, a middle MLP, a last-layer head's v input
    and the logits; a zero change gives the clean run."""
    w, batch, lengths, clean, corrupted = random64
    g = w.graph
    tokens = torch.as_tensor(batch.clean)
    names_ = g.edge_names()
    for v_name in ("a0.h1<k>", "m1", "a2.h0<v>", "logits"):
        v = g.downstream.index(v_name)
        into = np.nonzero(g.edge_down == v)[0]
        assert into.size == {"a0.h1<k>": 1, "m1": 6, "a2.h0<v>": 7, "logits": 10}[v_name]
        deltas = (corrupted.nodes - clean.nodes)[:, torch.as_tensor(g.edge_up[into])].transpose(0, 1)
        got = run_input_deltas(w, clean, lengths, v, deltas)                  # [k, B, V]
        masks = ~np.eye(g.n_edges, dtype=bool)[into]
        want = run_patched_groups(w, w.embed(tokens), lengths, corrupted,
                                  torch.as_tensor(g.dense_mask(masks), dtype=torch.float64))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10, err_msg=str([names_[i] for i in into]))
        same = run_input_deltas(w, clean, lengths, v, torch.zeros_like(deltas[:1]))[0]
        np.testing.assert_allclose(same, clean.logits_last, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="downstream input 22 is not one of the model's 22"):
        run_input_deltas(w, clean, lengths, len(g.downstream), deltas)
