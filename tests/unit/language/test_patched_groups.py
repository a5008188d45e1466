"""The grouped patched forward (:func:`~certified_circuits.language.forward.run_patched_groups`, issue 51) against
the per-element patched forward ``run(..., corrupted=, masks=)``: layer 0 from its head table
(:func:`~certified_circuits.language.forward.first_layer_table`), the last layer at the last positions only, masks
whose layer-0 bits differ per head and per q/k/v, prompts of different lengths in one batch; and the pass sizes of
:func:`~certified_circuits.language.patching.patch_chunks`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certified_circuits.language.eap_ig import metric_per_example
from certified_circuits.language.forward import GPT2Weights, first_layer_table, run, run_patched_groups
from certified_circuits.language.models import build_model, tiny_config
from certified_circuits.language.patching import DecomposedGraphModel, evaluate_edge_masks, patch_chunks

#: float64: the two forwards differ by rounding only (measured 2e-15 on logits of size 2.6)
ATOL64 = 1e-9
#: float32: rounding of ~1e-7 relative along the ~10^2 operations of a path (measured 1.2e-6 on logits of size 2.6)
ATOL32 = 1e-5


def random_model(word_tok, n_layer: int = 3, dtype: torch.dtype = torch.float64) -> GPT2Weights:
    """A random GPT-2 with MLPs (3 heads, d_model 24), every weight but the LayerNorms' times 8 so that patching
    moves the logits by far more than rounding."""
    model = build_model(tiny_config(word_tok.vocab_size, n_layer=n_layer, n_head=3, n_embd=24, n_positions=96), seed=1)
    with torch.no_grad():
        for key, p in model.named_parameters():
            if ".ln_" not in key:
                p.mul_(8.0)
    return GPT2Weights.from_hf(model).to(dtype=dtype)


def masks_with_every_layer0_pattern(w: GPT2Weights, seed: int = 0) -> np.ndarray:
    """bool [10, E]: 8 random masks (densities 0.2 .. 0.9) whose layer-0 bits are set so that head h of mask j has
    the q/k/v bits of (j + 3 h) mod 8 (each head a different pattern, every pattern in every head), then all edges
    and no edge."""
    g = w.graph
    rng = np.random.default_rng(seed)
    masks = rng.random((10, g.n_edges)) < np.r_[np.linspace(0.2, 0.9, 8), 2.0, -1.0][:, None]
    names = g.edge_names()
    for j in range(8):
        for h in range(w.n_heads):
            for c, letter in enumerate("qkv"):
                masks[j, names.index(f"input->a0.h{h}<{letter}>")] = bool(((j + 3 * h) % 8 >> (2 - c)) & 1)
    return masks


def reference_logits(w: GPT2Weights, x: torch.Tensor, lengths: torch.Tensor, corrupted, dense: torch.Tensor):
    """[M, e, V]: the per-element patched forward, one mask at a time."""
    return torch.stack([run(w, x, lengths, corrupted=corrupted, masks=dense[i].expand(len(lengths), -1, -1)).logits_last
                        for i in range(dense.shape[0])])


def prepared(w: GPT2Weights, batch, masks: np.ndarray):
    lengths = torch.as_tensor(batch.lengths)
    x = w.embed(torch.as_tensor(batch.clean))
    corrupted = run(w, w.embed(torch.as_tensor(batch.corrupted)), lengths, keep_inputs=True)
    dense = torch.as_tensor(w.graph.dense_mask(masks), dtype=w.wte.dtype)
    return x, lengths, corrupted, dense


@pytest.mark.parametrize(("dtype", "atol"), [(torch.float64, ATOL64), (torch.float32, ATOL32)])
def test_grouped_patching_equals_the_per_element_forward(word_tok, mixed_batch, dtype, atol):
    w = random_model(word_tok, dtype=dtype)
    assert len(set(mixed_batch.lengths.tolist())) >= 3                       # prompts of different lengths, padded
    masks = masks_with_every_layer0_pattern(w)
    x, lengths, corrupted, dense = prepared(w, mixed_batch, masks)
    want = reference_logits(w, x, lengths, corrupted, dense)
    got = run_patched_groups(w, x, lengths, corrupted, dense)              # layer-0 table computed inside
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    # the table shared by calls on the same prompts (the evaluation's mask chunks) gives the same logits
    table = first_layer_table(w, x, corrupted)
    parts = [run_patched_groups(w, x, lengths, corrupted, dense[s], first_layer=table) for s in (slice(0, 3), slice(3, 10))]
    np.testing.assert_allclose(torch.cat(parts), want, rtol=0, atol=atol)
    # not vacuous: the masks move the logits far beyond the tolerance, and all/no edges are the clean/corrupted runs
    assert float((want[:8] - want[8]).abs().amax()) > 0.5
    np.testing.assert_allclose(want[8], run(w, x, lengths).logits_last, rtol=0, atol=atol)
    np.testing.assert_allclose(want[9], corrupted.logits_last, rtol=0, atol=atol)


def test_first_layer_table_rows_are_the_runs_heads(word_tok, mixed_batch):
    """Row 7 (q, k, v all clean) is the clean run's layer-0 heads minus the corrupted run's, row 0 is zero, and row
    4 (only q clean) is the head recomputed by hand from the two runs' inputs."""
    w = random_model(word_tok)
    H = w.n_heads
    x, lengths, corrupted, _ = prepared(w, mixed_batch, np.zeros((1, w.graph.n_edges), bool))
    clean = run(w, x, lengths, keep_inputs=True)
    table = first_layer_table(w, x, corrupted)
    assert table.shape == (8, len(lengths), H) + tuple(x.shape[1:])
    np.testing.assert_allclose(table[7], clean.nodes[:, 1: 1 + H] - corrupted.nodes[:, 1: 1 + H], rtol=0, atol=1e-12)
    np.testing.assert_allclose(table[0], torch.zeros_like(table[0]), rtol=0, atol=1e-12)
    from certified_circuits.language.forward import head_attention

    p = x.shape[1]
    mixed = torch.stack([clean.inputs[0][:, :, 0], corrupted.inputs[0][:, :, 1], corrupted.inputs[0][:, :, 2]], 2)
    by_hand = head_attention(w, 0, mixed, torch.ones(p, p, dtype=torch.bool).tril()) - corrupted.nodes[:, 1: 1 + H]
    np.testing.assert_allclose(table[4], by_hand, rtol=0, atol=1e-12)
    assert float(table[4].abs().amax()) > 0.1


def test_masks_other_than_zero_one_and_a_one_layer_model(word_tok, mixed_batch):
    """Fractional layer-0 entries take the per-pair path (no table); a one-layer model's only layer is its last."""
    w = random_model(word_tok)
    masks = masks_with_every_layer0_pattern(w, seed=1)
    x, lengths, corrupted, dense = prepared(w, mixed_batch, masks)
    frac = dense * torch.as_tensor(np.random.default_rng(2).uniform(0.1, 1.0, dense.shape))
    np.testing.assert_allclose(run_patched_groups(w, x, lengths, corrupted, frac),
                               reference_logits(w, x, lengths, corrupted, frac), rtol=0, atol=ATOL64)
    w1 = random_model(word_tok, n_layer=1)
    masks = np.random.default_rng(3).random((4, w1.graph.n_edges)) < 0.5
    x, lengths, corrupted, dense = prepared(w1, mixed_batch, masks)
    np.testing.assert_allclose(run_patched_groups(w1, x, lengths, corrupted, dense),
                               reference_logits(w1, x, lengths, corrupted, dense), rtol=0, atol=ATOL64)


def test_evaluation_in_many_passes_equals_the_per_element_metrics(word_tok, mixed_batch):
    """evaluate_edge_masks with 2 (mask, prompt) pairs a pass (2 masks beside one prompt: 5 mask chunks share each
    prompt's layer-0 table) against the metrics of the per-element forward's logits."""
    w = random_model(word_tok)
    masks = masks_with_every_layer0_pattern(w)
    x, lengths, corrupted, dense = prepared(w, mixed_batch, masks)
    want = reference_logits(w, x, lengths, corrupted, dense)                 # [10, e, V]
    ans, dis = torch.as_tensor(mixed_batch.answer), torch.as_tensor(mixed_batch.distractor)
    assert patch_chunks(w, len(lengths), 10, int(lengths.max()), max_batch=2) == (1, 2)
    got = evaluate_edge_masks(w, mixed_batch, masks, max_batch=2, progress=False)
    np.testing.assert_array_equal(got.correct, (want.argmax(-1) == ans).numpy())
    ld = torch.stack([metric_per_example(want[i], ans, dis) for i in range(10)])
    np.testing.assert_allclose(got.logit_diff, ld.mean(1).numpy(), rtol=0, atol=ATOL64)
    np.testing.assert_allclose(got.binary_accuracy, (ld > 0).double().mean(1).numpy(), rtol=0, atol=1e-12)
    assert np.ptp(got.logit_diff) > 0.1                                     # the masks' metrics differ


def test_cpu_passes_stay_within_the_cpu_pass_budget(word_tok, monkeypatch: pytest.MonkeyPatch):
    """On a CPU a pass holds at most CPU_PASS_BYTES: with room for 3 pairs and one prompt, 3 masks beside 1 prompt
    (the memory budget alone would take all 10 masks x 6 prompts)."""
    from certified_circuits.core import devices
    from certified_circuits.language import patching

    w = random_model(word_tok, dtype=torch.float32)
    ops = DecomposedGraphModel(w)
    pair, cache = ops.pair_bytes(20), ops.cache_bytes(20)
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 64 << 30)
    assert patch_chunks(w, 6, 10, 20) == (6, 10)
    monkeypatch.setattr(patching, "CPU_PASS_BYTES", 3 * pair + cache)
    assert patch_chunks(w, 6, 10, 20) == (1, 3)
    monkeypatch.setattr(patching, "CPU_PASS_BYTES", 1)                      # never below one pair and one prompt
    assert patch_chunks(w, 6, 10, 20) == (1, 1)


def test_noisy_induction_model_metrics_equal_the_per_element_forward():
    """The default's model (the noisy compiled induction GPT-2, 2 x 8 heads, d_model 552, float32) on 12 held-out
    prompts: per-example accuracy identical to the per-element forward's, logit differences within ATOL32."""
    from certified_circuits.language.compiled import compile_induction_noisy
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    torch.set_num_threads(1)
    model, tok, _ = compile_induction_noisy(0)
    w = GPT2Weights.from_hf(model)
    batch = encode_examples(generate_splits("induction", 0, 12)["id_test"], tok, max_len=model.config.n_positions)
    masks = masks_with_every_layer0_pattern(w)
    x, lengths, corrupted, dense = prepared(w, batch, masks)
    want = reference_logits(w, x, lengths, corrupted, dense)
    ans, dis = torch.as_tensor(batch.answer), torch.as_tensor(batch.distractor)
    got = evaluate_edge_masks(w, batch, masks, progress=False)
    right = (want.argmax(-1) == ans).numpy()
    np.testing.assert_array_equal(got.correct, right)
    assert 0 < right.mean() < 1                                              # some masks keep the answer, some lose it
    ld = torch.stack([metric_per_example(want[i], ans, dis) for i in range(len(masks))]).mean(1)
    np.testing.assert_allclose(got.logit_diff, ld.numpy(), rtol=0, atol=ATOL32)
