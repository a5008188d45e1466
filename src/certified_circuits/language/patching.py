"""Circuit-restricted evaluation by edge-level interchange patching (paper, Appendix "Circuit graph and metric").

Every edge outside the circuit carries the corrupted run's activation of its upstream node; circuit edges
carry the patched run's own activation:

    in_v = sum_u [mask_uv ? a_u(patched run) : a_u(corrupted run)] + biases

(EAP-IG's ``evaluate_graph``). Metrics at the last prompt position: exact next-token accuracy (argmax over
the whole vocabulary equals the answer token; the paper's cACC), binary accuracy (answer logit above the
distractor's) and the logit difference. Many masks (all K x methods) are evaluated in one batched pass:
the batch axis is (mask, example) pairs, chunked to bound memory; duplicate masks are evaluated once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.language.eap_ig import metric_per_example
from certified_circuits.language.forward import GPT2Weights, run, run_patched_groups
from certified_circuits.language.tokenizer import EncodedBatch


@dataclass
class MaskMetrics:
    """Per-mask means over examples, each float64 [M]."""

    accuracy: np.ndarray
    binary_accuracy: np.ndarray
    logit_diff: np.ndarray
    n_examples: int


def _score(logits: torch.Tensor, ans: torch.Tensor, dis: torch.Tensor) -> tuple[torch.Tensor, ...]:
    acc = (logits.argmax(-1) == ans).double()
    ld = metric_per_example(logits, ans, dis).double()
    return acc, (ld > 0).double(), ld


def full_model_metrics(w: GPT2Weights, batch: EncodedBatch, *, batch_size: int = 64,
                       device: str | torch.device = "cpu") -> MaskMetrics:
    """Unpatched model on the clean prompts (the paper's "Full" row)."""
    sums = np.zeros(3)
    n = len(batch.ids)
    with torch.no_grad():
        for s in range(0, n, batch_size):
            sl = slice(s, min(s + batch_size, n))
            lengths = torch.as_tensor(batch.lengths[sl], device=device)
            p = int(lengths.max())
            x = w.embed(torch.as_tensor(batch.clean[sl, :p], device=device))
            logits = run(w, x, lengths).logits_last
            parts = _score(logits, torch.as_tensor(batch.answer[sl], device=device),
                           torch.as_tensor(batch.distractor[sl], device=device))
            sums += [float(t.sum()) for t in parts]
    m = sums / n
    return MaskMetrics(np.array([m[0]]), np.array([m[1]]), np.array([m[2]]), n)


def evaluate_edge_masks(w: GPT2Weights, batch: EncodedBatch, edge_masks: np.ndarray, *,
                        max_batch: int | None = None, budget_floats: float = 4e7,
                        device: str | torch.device = "cpu", progress: bool = True) -> MaskMetrics:
    """Interchange-patched metrics for every edge mask (bool [M, n_edges]) over all examples."""
    g = w.graph
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
    per_elem = g.valid.shape[0] * p_all * w.d_model * 2
    b_max = max(1, int(budget_floats // per_elem)) if max_batch is None else int(max_batch)
    e_chunk = min(n, b_max)
    m_chunk = max(1, b_max // e_chunk)
    sums = np.zeros((3, M))
    n_steps = -(-n // e_chunk) * -(-M // m_chunk)
    bar = tqdm(total=n_steps, desc="patched eval", unit="batch", disable=not progress, file=sys.stderr)
    with torch.no_grad():
        for s in range(0, n, e_chunk):
            sl = slice(s, min(s + e_chunk, n))
            e = sl.stop - sl.start
            lengths = torch.as_tensor(batch.lengths[sl], device=device)
            p = int(lengths.max())
            x_clean = w.embed(torch.as_tensor(batch.clean[sl, :p], device=device))
            corr = run(w, w.embed(torch.as_tensor(batch.corrupted[sl, :p], device=device)), lengths,
                       keep_inputs=True)
            ans = torch.as_tensor(batch.answer[sl], device=device)
            dis = torch.as_tensor(batch.distractor[sl], device=device)
            for m0 in range(0, M, m_chunk):
                mm = min(m_chunk, M - m0)
                logits = run_patched_groups(w, x_clean, lengths, corr, dense[m0: m0 + mm])   # [mm, e, V]
                parts = _score(logits.reshape(mm * e, -1), ans.repeat(mm), dis.repeat(mm))
                for i, t in enumerate(parts):
                    sums[i, m0: m0 + mm] += t.view(mm, e).sum(1).cpu().numpy()
                bar.update(1)
    bar.close()
    mean = (sums / n)[:, inverse]
    return MaskMetrics(mean[0], mean[1], mean[2], n)
