"""Self-consistency of the decomposed forward, the bridge hooks and edge patching (paper, Appendix C.2)."""

from __future__ import annotations

import numpy as np
import torch

from certified_circuits.language.eap_ig import eap_ig_scores, metric_per_example
from certified_circuits.language.forward import run, run_patched_groups
from certified_circuits.language.graph import upstream_index
from certified_circuits.language.patching import evaluate_edge_masks


def _tensors(batch):
    lengths = torch.as_tensor(batch.lengths)
    return torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted), lengths


def test_decomposed_forward_matches_hf_and_bridge_hooks(tiny_lm, mixed_batch):
    w = tiny_lm.weights
    clean, _, lengths = _tensors(mixed_batch)
    with torch.no_grad():
        cache = run(w, w.embed(clean), lengths, keep_inputs=True)
        hf_logits = tiny_lm.hf(clean).logits[torch.arange(len(lengths)), lengths - 1]
        _, bc = tiny_lm.bridge.run_with_cache(clean)
    assert torch.allclose(cache.logits_last, hf_logits, atol=1e-4)
    H = w.n_heads
    for l in range(w.n_layers):
        heads = cache.nodes[:, upstream_index(l, 0, H): upstream_index(l, 0, H) + H]
        assert torch.allclose(heads, bc[f"blocks.{l}.attn.hook_result"].permute(0, 2, 1, 3), atol=1e-5)
        assert torch.allclose(cache.nodes[:, upstream_index(l, None, H)], bc[f"blocks.{l}.hook_mlp_out"], atol=1e-5)
        for j, letter in enumerate("qkv"):
            hooked = bc[f"blocks.{l}.hook_{letter}_input"].permute(0, 2, 1, 3)
            assert torch.allclose(cache.inputs[2 * l][:, :, j], hooked, atol=1e-5)
        assert torch.allclose(cache.inputs[2 * l + 1], bc[f"blocks.{l}.hook_mlp_in"], atol=1e-5)
    # residual stream = sum of node outputs + attention output biases
    resid = cache.nodes.sum(1) + w.b_O.sum(0)
    assert torch.allclose(resid, bc["ln_final.hook_in"], atol=1e-5)
    assert torch.allclose(resid, cache.inputs[-1], atol=1e-5)


def test_patching_none_and_all_edges(tiny_lm, mixed_batch):
    w = tiny_lm.weights
    g = w.graph
    clean, corr, lengths = _tensors(mixed_batch)
    with torch.no_grad():
        c_logits = run(w, w.embed(clean), lengths).logits_last
        k_logits = run(w, w.embed(corr), lengths).logits_last
        ccache = run(w, w.embed(corr), lengths, keep_inputs=True)
        dense = torch.as_tensor(g.dense_mask(np.ones((1, g.n_edges), bool)), dtype=torch.float32)
        keep_all = run(w, w.embed(clean), lengths, corrupted=ccache, masks=dense.expand(len(lengths), -1, -1))
        patch_all = run(w, w.embed(clean), lengths, corrupted=ccache, masks=torch.zeros_like(dense).expand(len(lengths), -1, -1))
    assert torch.allclose(keep_all.logits_last, c_logits, atol=1e-4)
    assert torch.allclose(patch_all.logits_last, k_logits, atol=1e-4)
    assert not torch.allclose(c_logits, k_logits, atol=1e-3)
    # batched evaluation over several masks agrees with the metrics of those runs
    masks = np.zeros((3, g.n_edges), bool)
    masks[0] = True
    masks[2, ::2] = True
    res = evaluate_edge_masks(w, mixed_batch, masks, max_batch=4, progress=False)
    ans, dis = torch.as_tensor(mixed_batch.answer), torch.as_tensor(mixed_batch.distractor)
    np.testing.assert_allclose(res.logit_diff[0], metric_per_example(c_logits, ans, dis).mean(), atol=1e-4)
    np.testing.assert_allclose(res.logit_diff[1], metric_per_example(k_logits, ans, dis).mean(), atol=1e-4)
    np.testing.assert_allclose(res.accuracy[0], (c_logits.argmax(-1) == ans).double().mean(), atol=1e-9)
    np.testing.assert_array_equal(res.correct[0], (c_logits.argmax(-1) == ans).numpy())
    np.testing.assert_array_equal(res.correct[1], (k_logits.argmax(-1) == ans).numpy())
    np.testing.assert_allclose(res.correct.mean(1), res.accuracy, atol=1e-12)
    # the grouped fast path equals the per-element patched forward for an arbitrary mask
    half = torch.as_tensor(g.dense_mask(masks[2:3]), dtype=torch.float32)
    with torch.no_grad():
        ref = run(w, w.embed(clean), lengths, corrupted=ccache, masks=half.expand(len(lengths), -1, -1)).logits_last
        fast = run_patched_groups(w, w.embed(clean), lengths, ccache, torch.cat([half, dense]))
    assert torch.allclose(fast[0], ref, atol=1e-4)
    assert torch.allclose(fast[1], c_logits, atol=1e-4)
    np.testing.assert_allclose(res.logit_diff[2], metric_per_example(ref, ans, dis).mean(), atol=1e-4)


def test_eap_scores_match_finite_differences(tiny_lm, ioi_batch):
    """EAP-IG with one step at the clean end (integration="endpoint": k = m = 1) = (a(corr) - a(clean)) .
    grad at clean; check several edges against finite differences of patching the edge by a fraction eps
    (in_v moves by eps * (a_u(corr) - a_u(clean))). The reference default (k = 0) takes the gradient at the
    corrupted end instead: tests/unit/language/test_eap_reference.py checks that one."""
    w = tiny_lm.weights
    w64 = type(w)(**{k: (v.double() if torch.is_tensor(v) else v) for k, v in w.__dict__.items()})
    g = w64.graph
    scores = eap_ig_scores(w64, ioi_batch, ig_steps=1, batch_size=3, progress=False, integration="endpoint")
    assert scores.shape == (len(ioi_batch.ids), g.n_edges)
    clean, corr, lengths = _tensors(ioi_batch)
    ans, dis = torch.as_tensor(ioi_batch.answer), torch.as_tensor(ioi_batch.distractor)
    rng = np.random.default_rng(0)
    picks = list(rng.choice(g.n_edges, 6, replace=False)) + [g.n_edges - 1, 0]
    eps = 1e-4
    with torch.no_grad():
        ccache = run(w64, w64.embed(corr), lengths, keep_inputs=True)
        base = metric_per_example(run(w64, w64.embed(clean), lengths).logits_last, ans, dis)
        for e in picks:
            m = torch.ones((len(lengths),) + g.valid.shape, dtype=torch.float64)
            m[:, g.edge_up[e], g.edge_down[e]] = 1 - eps
            out = run(w64, w64.embed(clean), lengths, corrupted=ccache, masks=m)
            fd = (metric_per_example(out.logits_last, ans, dis) - base) / eps
            np.testing.assert_allclose(scores[:, e], fd.numpy(), rtol=1e-3, atol=1e-5)
    # per-example rows: the summed metric makes rows independent of batching
    again = eap_ig_scores(w64, ioi_batch, ig_steps=1, batch_size=6, progress=False, integration="endpoint")
    np.testing.assert_allclose(scores, again, rtol=1e-6, atol=1e-8)
