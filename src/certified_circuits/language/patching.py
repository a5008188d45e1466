"""Circuit-restricted evaluation by edge-level interchange patching (paper, Appendix "Circuit graph and metric").

Every edge outside the circuit carries the corrupted run's activation of its upstream node; circuit edges
carry the patched run's own activation:

    in_v = sum_u [mask_uv ? a_u(patched run) : a_u(corrupted run)] + biases

(EAP-IG's ``evaluate_graph``). Metrics at the last prompt position: exact next-token accuracy (argmax over
the whole vocabulary equals the answer token; the paper's cACC), binary accuracy (answer logit above the
distractor's) and the logit difference. Many masks (all K x methods) are evaluated in one batched pass:
the batch axis is (mask, example) pairs, chunked to fit in free device memory (or an explicit pair or
float budget), masks first and, on a CPU, at most :data:`CPU_PASS_BYTES` a pass; duplicate masks are evaluated once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.core.devices import batch_from_memory
from certified_circuits.language.eap_ig import metric_per_example
from certified_circuits.language.forward import GPT2Weights, first_layer_table, run, run_patched_groups
from certified_circuits.language.tokenizer import EncodedBatch

#: Bytes one patched pass may work in on a CPU (:func:`patch_chunks`): beyond a few tens of MB the pass's tensors
#: leave the caches and every (mask, prompt) pair costs more. Measured with the decomposed forward on the noisy
#: induction GPT-2 (2 x 8 heads, d_model 552; 70 masks x 100 prompts, one thread, CPU seconds on the 2-core
#: machine): 2 pairs a pass 12 s, 8 pairs 6.7 s, 16-24 pairs 5.6-6.5 s, 70 pairs 8.8 s.
CPU_PASS_BYTES = 32 << 20


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
        self._first_layer: tuple | None = None    # (corrupted cache, clean tokens, their layer-0 head table)

    def plain_logits(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return run(self.w, self.w.embed(tokens), lengths).logits_last

    def corrupted_cache(self, tokens: torch.Tensor, lengths: torch.Tensor):
        return run(self.w, self.w.embed(tokens), lengths, keep_inputs=True)

    def patched_group_logits(self, clean: torch.Tensor, lengths: torch.Tensor, cache, masks: torch.Tensor):
        """Logits [m, e, V] of m dense masks [m, n_up, n_down] on the same e prompts (:func:`~.forward.run_patched_groups`).

        Layer 0's head table of these prompts (:func:`~.forward.first_layer_table`) is computed at the first call
        with this ``cache`` and ``clean`` and reused by the calls that follow with the same two tensors: every mask
        chunk of a prompt chunk in :func:`evaluate_edge_masks`.
        """
        x = self.w.embed(clean)
        memo = self._first_layer
        if memo is None or memo[0] is not cache or memo[1] is not clean:
            self._first_layer = None                      # the previous prompts' table is freed before this one
            table = first_layer_table(self.w, x, cache) if self.w.n_layers > 1 else None
            self._first_layer = memo = (cache, clean, table)
        return run_patched_groups(self.w, x, lengths, cache, masks, first_layer=memo[2])

    def pair_bytes(self, n_positions: int) -> int:
        """Estimated peak bytes of one (mask, prompt) pair in :func:`~.forward.run_patched_groups`.

        In elements of the weights' dtype, with U = 1 + (L - 1)(H + 1) the nodes before the last layer: the
        node-difference buffer ``U P d``, plus the largest of the stages that follow one another:

        * a layer before the last one computed per pair (layers 1 .. L - 2): its patched q/k/v inputs, their
          LayerNorm and the heads (``9 H P d``) and the attention scores (``3 H P^2``);
        * layer 0 gathered from its head table (the masks are 0/1, as :func:`evaluate_edge_masks` passes them):
          ``2 H P d``;
        * an MLP: its input, LayerNorm, output and difference ``4 P d`` and the hidden layer ``3 P d_mlp``;
        * the last layer: its k and v inputs, one LayerNorm of them and its copy per head (``4 H P d``), keys and
          values ``2 H P d_head`` and the scores ``H P``;

        and the last-position tensors: node differences ``2 n_up d``, queries ``3 H d``, logits ``V``. (Checked
        against the measured peak: benchmarks/bench_language_patched_eval.py.)
        """
        w, g, p = self.w, self.graph, int(n_positions)
        d, h, d_mlp, L = w.d_model, w.n_heads, w.W_in.shape[-1], w.n_layers
        stages = [2 * h * p * d, 4 * p * d + 3 * p * d_mlp, 4 * h * p * d + 2 * h * p * w.d_head + h * p]
        if L > 2:
            stages.append(9 * h * p * d + 3 * h * p * p)
        elements = (1 + (L - 1) * (h + 1)) * p * d + max(stages) + 2 * g.valid.shape[0] * d + 3 * h * d \
            + w.W_U.shape[-1]
        return int(elements * w.wte.element_size())

    def cache_bytes(self, n_positions: int) -> int:
        """Estimated bytes of one prompt in a patched pass: its corrupted-run cache (node outputs and every downstream
        input, ``keep_inputs``: ``(n_up + n_down) P d``) and, with two layers or more, layer 0's head table of
        :func:`~.forward.first_layer_table` (8 bit combinations x H heads: heads ``P d``, q/k/v, ``z`` and the
        attention ``4 P d_head + 3 P^2`` each; both inputs, their LayerNorm and projections ``6 P d + 6 H P
        d_head``)."""
        w, g, p = self.w, self.graph, int(n_positions)
        d, h, dh = w.d_model, w.n_heads, w.d_head
        table = 8 * h * (p * d + 4 * p * dh + 3 * p * p) + 6 * p * d + 6 * h * p * dh if w.n_layers > 1 else 0
        return int(((g.valid.shape[0] + g.valid.shape[1]) * p * d + table) * w.wte.element_size())


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
    """(prompts, masks) per patched pass: as many masks as fit beside one prompt, then as many prompts as fit.

    Masks first: what a pass computes once per prompt (the decomposed forward's layer-0 head table,
    :func:`~.forward.first_layer_table`) is then shared by as many masks as possible. ``max_batch``
    (pairs) or ``budget_floats`` (the older float budget, ``2 n_up P d`` floats a pair) fix the number of (mask,
    prompt) pairs ``b``: ``m = min(M, b)``, ``e = min(n, b // m)``. Otherwise the pass fits the budget of
    ``b = batch_from_memory(device, pair + cache)`` pairs, ``T = b (pair + cache)`` bytes: ``m = min(M, (T - cache)
    // pair)`` masks beside one prompt's cache, then ``e = min(n, T // (cache + m pair))`` prompts, so that ``e
    cache + e m pair <= T``; on a CPU ``T`` is at most :data:`CPU_PASS_BYTES`. Masks first also pads each
    pass to the longest of fewer prompts.
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
        m_chunk = max(1, min(n_masks, b_max))
        return max(1, min(n_examples, b_max // m_chunk)), m_chunk
    pair = ops.pair_bytes(n_positions)
    cache = ops.cache_bytes(n_positions)
    total = batch_from_memory(device, pair + cache, cap=max(1, n_examples * n_masks)) * (pair + cache)
    if torch.device(device).type == "cpu":
        total = min(total, max(CPU_PASS_BYTES, pair + cache))
    m_chunk = int(max(1, min(n_masks, (total - cache) // pair)))
    return int(max(1, min(n_examples, total // (cache + m_chunk * pair)))), m_chunk


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
