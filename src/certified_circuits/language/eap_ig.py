"""Per-example EAP-IG edge scores (paper, Section 4 / Appendix "Circuit graph and metric").

For edge u -> v and example i (Hanna et al. 2024, EAP-IG; Syed et al. 2023, EAP):

    s_i(u -> v) = (a_u(corrupted_i) - a_u(clean_i)) . (1/m) sum_{k=1..m} dM_i/d in_v |_{x = x_corr + k/m (x_clean - x_corr)}

where x is the ``input`` node activation (token + position embedding), m = ``ig_steps`` and the metric is
M_i = logit(answer_i) - logit(distractor_i) at the last prompt position. The metric is summed over the
batch (never averaged), so each row is exactly that example's score and the mean of rows is the dataset
score (DESIGN.md section 7). The dot product runs over positions and model dimensions; the contraction is
one einsum of upstream activation differences [B, n_up, P, d] with downstream input gradients
[B, n_down, P, d], restricted to the graph's valid edges in canonical order. Rows are returned signed.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.language.forward import GPT2Weights, flat_inputs, run
from certified_circuits.language.tokenizer import EncodedBatch


def metric_per_example(logits_last: torch.Tensor, answer: torch.Tensor, distractor: torch.Tensor) -> torch.Tensor:
    """logit(answer) - logit(distractor) per example, [B]."""
    return logits_last.gather(1, answer[:, None])[:, 0] - logits_last.gather(1, distractor[:, None])[:, 0]


def _to(x: np.ndarray, device: str | torch.device) -> torch.Tensor:
    return torch.as_tensor(x, device=device)


def eap_ig_scores(w: GPT2Weights, batch: EncodedBatch, *, ig_steps: int = 5, batch_size: int = 16,
                  device: str | torch.device = "cpu", progress: bool = True) -> np.ndarray:
    """Signed per-example EAP-IG scores, float32 [n_examples, n_edges] in canonical edge order."""
    if ig_steps < 1:
        raise ValueError(f"ig_steps must be >= 1, got {ig_steps}")
    g = w.graph
    eu = torch.as_tensor(g.edge_up, device=device)
    ed = torch.as_tensor(g.edge_down, device=device)
    n = len(batch.ids)
    out = np.empty((n, g.n_edges), dtype=np.float32)
    starts = range(0, n, batch_size)
    for s in tqdm(starts, desc="EAP-IG", unit="batch", disable=not progress, file=sys.stderr):
        sl = slice(s, min(s + batch_size, n))
        lengths = _to(batch.lengths[sl], device)
        p = int(lengths.max())
        clean_tok = _to(batch.clean[sl, :p], device)
        corr_tok = _to(batch.corrupted[sl, :p], device)
        ans, dis = _to(batch.answer[sl], device), _to(batch.distractor[sl], device)
        x_clean, x_corr = w.embed(clean_tok), w.embed(corr_tok)
        with torch.no_grad():
            diff = run(w, x_corr, lengths).nodes - run(w, x_clean, lengths).nodes   # [B, n_up, P, d]
        grad_sum = None
        for k in range(1, ig_steps + 1):
            x = (x_corr + (k / ig_steps) * (x_clean - x_corr)).detach().requires_grad_(True)
            cache = run(w, x, lengths, keep_inputs=True)
            metric = metric_per_example(cache.logits_last, ans, dis).sum()
            grads = torch.autograd.grad(metric, cache.inputs)
            cache.inputs = list(grads)
            flat = flat_inputs(cache, w.n_heads)                                        # [B, n_down, P, d]
            grad_sum = flat if grad_sum is None else grad_sum + flat
        with torch.no_grad():
            dense = torch.einsum("bupd,bnpd->bun", diff, grad_sum / ig_steps)
            out[sl] = dense[:, eu, ed].float().cpu().numpy()
    return out
