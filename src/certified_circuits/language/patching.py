"""Circuit-restricted evaluation by edge-level interchange patching (paper, Appendix "Circuit graph and metric").

Every edge outside the circuit carries the corrupted run's activation of its upstream node; circuit edges
carry the patched run's own activation:

    in_v = sum_u [mask_uv ? a_u(patched run) : a_u(corrupted run)] + biases

(EAP-IG's ``evaluate_graph``). Metrics at the last prompt position: exact next-token accuracy (argmax over
the whole vocabulary equals the answer token; the paper's cACC), binary accuracy (answer logit above the
distractor's) and the logit difference. Many masks (all K x methods) are evaluated in one batched pass:
the batch axis is (mask, example) pairs, chunked to fit in free device memory (or an explicit pair or
float budget); duplicate masks are evaluated once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.core.devices import batch_from_memory
from certified_circuits.language.eap_ig import metric_per_example
from certified_circuits.language.forward import GPT2Weights, run, run_patched_groups
from certified_circuits.language.tokenizer import EncodedBatch


@dataclass
class MaskMetrics:
    """Per-mask means over examples, each float64 [M], and the exact-match outcome of every example
    (``correct``: bool [M, n_examples], for the per-example paired tests)."""

    accuracy: np.ndarray
    binary_accuracy: np.ndarray
    logit_diff: np.ndarray
    n_examples: int
    correct: np.ndarray


def _score(logits: torch.Tensor, ans: torch.Tensor, dis: torch.Tensor) -> tuple[torch.Tensor, ...]:
    acc = (logits.argmax(-1) == ans).double()
    ld = metric_per_example(logits, ans, dis).double()
    return acc, (ld > 0).double(), ld


class DecomposedGraphModel:
    """The GPT-2 decomposed forward (:mod:`.forward`) behind the evaluation operations that
    :class:`~.hooked.BridgeGraphModel` offers for any family."""

    def __init__(self, w: GPT2Weights):
        self.w, self.graph, self.d_model = w, w.graph, w.d_model

    def plain_logits(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return run(self.w, self.w.embed(tokens), lengths).logits_last

    def corrupted_cache(self, tokens: torch.Tensor, lengths: torch.Tensor):
        return run(self.w, self.w.embed(tokens), lengths, keep_inputs=True)

    def patched_group_logits(self, clean: torch.Tensor, lengths: torch.Tensor, cache, masks: torch.Tensor):
        return run_patched_groups(self.w, self.w.embed(clean), lengths, cache, masks)

    def pair_bytes(self, n_positions: int) -> int:
        """Estimated peak bytes of one (mask, prompt) pair in :func:`run_patched_groups`.

        Per pair, in elements of the weights' dtype: the node-difference buffer ``n_up * P * d``; the
        patched q/k/v inputs and their LayerNorm (``3 x 3H * P * d``: the matmul result, the sum with the
        corrupted input, the normalised copy); attention scores ``H * P^2``; the MLP hidden layer
        ``P * d_mlp``, plus the MLP input and output (``2 P d``); the last-position logits ``V``.
        """
        w, g, p = self.w, self.graph, int(n_positions)
        d, h, d_mlp = w.d_model, w.n_heads, w.W_in.shape[-1]
        elements = g.valid.shape[0] * p * d + 9 * h * p * d + h * p * p + p * d_mlp + 2 * p * d + w.W_U.shape[-1]
        return int(elements * w.wte.element_size())

    def cache_bytes(self, n_positions: int) -> int:
        """Bytes of one prompt's corrupted-run cache (node outputs and every downstream input, ``keep_inputs``)."""
        g = self.graph
        return int((g.valid.shape[0] + g.valid.shape[1]) * int(n_positions) * self.w.d_model * self.w.wte.element_size())


def graph_model(model):
    """The evaluation operations of ``model``: GPT-2 weights (decomposed fast path) or an object that
    already offers them (:class:`~.hooked.BridgeGraphModel`)."""
    return DecomposedGraphModel(model) if isinstance(model, GPT2Weights) else model


def full_model_metrics(model, batch: EncodedBatch, *, batch_size: int = 64,
                       device: str | torch.device = "cpu") -> MaskMetrics:
    """Unpatched model on the clean prompts (the paper's "Full" row); ``model``: :func:`graph_model`'s input."""
    ops = graph_model(model)
    sums = np.zeros(3)
    n = len(batch.ids)
    correct = np.zeros((1, n), dtype=bool)
    with torch.no_grad():
        for s in range(0, n, batch_size):
            sl = slice(s, min(s + batch_size, n))
            lengths = torch.as_tensor(batch.lengths[sl], device=device)
            p = int(lengths.max())
            logits = ops.plain_logits(torch.as_tensor(batch.clean[sl, :p], device=device), lengths)
            parts = _score(logits, torch.as_tensor(batch.answer[sl], device=device),
                           torch.as_tensor(batch.distractor[sl], device=device))
            sums += [float(t.sum()) for t in parts]
            correct[0, sl] = parts[0].bool().cpu().numpy()
    m = sums / n
    return MaskMetrics(np.array([m[0]]), np.array([m[1]]), np.array([m[2]]), n, correct)


def patch_chunks(model, n_examples: int, n_masks: int, n_positions: int, *, max_batch: int | None = None,
                 budget_floats: float | None = None, device: str | torch.device = "cpu") -> tuple[int, int]:
    """(prompts, masks) per patched pass.

    ``max_batch`` (pairs) or ``budget_floats`` (the older float budget, ``2 n_up P d`` floats a pair) fix
    the number of (mask, prompt) pairs ``b``; otherwise it comes from free device memory:
    ``b = batch_from_memory(device, pair + cache)`` (conservative: each pair also pays a prompt cache),
    prompts ``e = min(n, b)``, then masks ``m = (b (pair + cache) - e cache) / (e pair)``: whatever
    the budget leaves after the ``e`` corrupted caches.
    """
    ops = graph_model(model)
    if max_batch is not None or budget_floats is not None:
        if max_batch is not None:
            b_max = int(max_batch)
        else:
            per_elem = ops.graph.valid.shape[0] * n_positions * ops.d_model * 2
            b_max = max(1, int(budget_floats // per_elem))
        if b_max < 1:
            raise ValueError(f"max_batch={max_batch!r} is invalid: expected a positive number of (mask, prompt) pairs")
        e_chunk = max(1, min(n_examples, b_max))
        return e_chunk, min(max(1, n_masks), max(1, b_max // e_chunk))
    pair = ops.pair_bytes(n_positions)
    cache = ops.cache_bytes(n_positions)
    b_max = batch_from_memory(device, pair + cache, cap=max(1, n_examples * n_masks))
    e_chunk = max(1, min(n_examples, b_max))
    m_chunk = (b_max * (pair + cache) - e_chunk * cache) // (e_chunk * pair)
    return e_chunk, int(min(n_masks, max(1, m_chunk)))


def evaluate_edge_masks(model, batch: EncodedBatch, edge_masks: np.ndarray, *,
                        max_batch: int | None = None, budget_floats: float | None = None,
                        device: str | torch.device = "cpu", progress: bool = True) -> MaskMetrics:
    """Interchange-patched metrics for every edge mask (bool [M, n_edges]) over all examples.

    ``model``: GPT-2 weights (decomposed fast path) or a :class:`~.hooked.BridgeGraphModel` (any family).
    Batches: ``max_batch`` (mask, prompt) pairs, or ``budget_floats`` floats, when given; by default
    as many as fit in free device memory (:func:`patch_chunks`)."""
    ops = graph_model(model)
    g = ops.graph
    edge_masks = np.asarray(edge_masks, dtype=bool)
    if edge_masks.ndim != 2 or edge_masks.shape[1] != g.n_edges:
        raise ValueError(f"edge masks must be [M, {g.n_edges}] for a {g.n_layers}x{g.n_heads} model, "
                         f"got {edge_masks.shape}")
    # identical masks (e.g. majority == baseline, or saturated K) are evaluated once
    edge_masks, inverse = np.unique(edge_masks, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    M, n = edge_masks.shape[0], len(batch.ids)
    dense = torch.as_tensor(g.dense_mask(edge_masks), dtype=torch.float32, device=device)  # [M, U, D]
    p_all = int(batch.lengths.max())
    e_chunk, m_chunk = patch_chunks(ops, n, M, p_all, max_batch=max_batch, budget_floats=budget_floats, device=device)
    sums = np.zeros((3, M))
    correct = np.zeros((M, n), dtype=bool)
    n_steps = -(-n // e_chunk) * -(-M // m_chunk)
    bar = tqdm(total=n_steps, desc="patched eval", unit="batch", disable=not progress, file=sys.stderr)
    with torch.no_grad():
        for s in range(0, n, e_chunk):
            sl = slice(s, min(s + e_chunk, n))
            e = sl.stop - sl.start
            lengths = torch.as_tensor(batch.lengths[sl], device=device)
            p = int(lengths.max())
            clean = torch.as_tensor(batch.clean[sl, :p], device=device)
            corr = ops.corrupted_cache(torch.as_tensor(batch.corrupted[sl, :p], device=device), lengths)
            ans = torch.as_tensor(batch.answer[sl], device=device)
            dis = torch.as_tensor(batch.distractor[sl], device=device)
            for m0 in range(0, M, m_chunk):
                mm = min(m_chunk, M - m0)
                logits = ops.patched_group_logits(clean, lengths, corr, dense[m0: m0 + mm])   # [mm, e, V]
                parts = _score(logits.reshape(mm * e, -1), ans.repeat(mm), dis.repeat(mm))
                for i, t in enumerate(parts):
                    sums[i, m0: m0 + mm] += t.view(mm, e).sum(1).cpu().numpy()
                correct[m0: m0 + mm, sl] = parts[0].view(mm, e).bool().cpu().numpy()
                bar.update(1)
    bar.close()
    mean = (sums / n)[:, inverse]
    return MaskMetrics(mean[0], mean[1], mean[2], n, correct[inverse])
