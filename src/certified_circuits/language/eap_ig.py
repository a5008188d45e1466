"""Per-example EAP-IG edge scores (paper, Section 4 / Appendix "Circuit graph and metric").

For edge u -> v and example i (Hanna et al. 2024, EAP-IG; Syed et al. 2023, EAP), exactly as the
reference implementation's ``get_scores_eap_ig`` (hannamw/EAP-IG, ``src/eap/attribute.py``) computes it:

    s_i(u -> v) = (a_u(corrupted_i) - a_u(clean_i)) . (1/m) sum_{k in K} dM_i/d in_v |_{x = x_k},
    x_k = x_corr + (k/m) (x_clean - x_corr),

with m = ``ig_steps`` and

* ``integration="reference"`` (default): K = {0, ..., m-1}, the reference code's ``for step in range(0,
  steps)``: the corrupted end is included, the clean end is not. This is what the published circuits
  were computed with, so it is the default here.
* ``integration="endpoint"``: K = {1, ..., m}, the right Riemann sum written in the EAP-IG paper (and
  this module's behaviour before issue 9): the clean end is included, the corrupted end is not.
* ``integration="hannamw"`` (the reference's code per level, :func:`~.methods.integration_points`): at edge
  level, the only level this module computes, K = {0, ..., m-1}, the same as ``"reference"``.

Both are m-point Riemann sums of the same path integral; "endpoint" minus "reference" is
(a_u(corrupted) - a_u(clean)) . (dM/d in_v at x_clean - dM/d in_v at x_corr) / m for every edge, which
vanishes only as m grows (tested in tests/unit/language/test_eap_reference.py).

* x is the ``input`` node activation. The reference interpolates ``hook_embed`` (token embedding only)
  and adds the position embedding afterwards; since clean and corrupted prompts share positions, the
  interpolated ``input`` (token + position embedding) here and the input-node difference are the same.
* a_u is node u's output (``hook_embed``, ``attn.hook_result`` per head, ``hook_mlp_out``); in_v is the
  downstream input (``hook_{q,k,v}_input`` per head, ``hook_mlp_in``, ``blocks.{L-1}.hook_resid_post``
  for the logits), each a copy that feeds only v (see :mod:`.forward`), so the gradient holds only v's paths.
* The activation difference is corrupted - clean: the reference's ``activation_difference`` adds the
  corrupted run's activations and subtracts the clean run's. The sign of the score is therefore the sign
  of the metric: here M_i = logit(answer_i) - logit(distractor_i) at the last prompt position (the
  reference's ``logit_diff(loss=False)``). The reference's demos pass ``loss=True`` (M -> -M), which
  flips every score; circuits are chosen by |mean score| (ranking ``absolute``, recorded in the attribution
  file; the reference's ``absolute=True``),
  so the sign never changes a circuit.
* The metric is summed over the batch (never averaged), so each row is exactly that example's score and
  the mean of rows is the dataset score (docs/architecture.md, section 5). The reference divides by the number of
  examples (``scores /= total_items``) and by m (``scores /= total_steps``): its score is the mean of our
  rows (times 1/batch size more when its metric averages over the batch, ``mean=True``: a constant).
* The dot product runs over positions and model dimensions (the reference's einsum over ``batch pos
  hidden``); the contraction is one einsum of upstream activation differences [B, n_up, P, d] with
  downstream input gradients [B, n_down, P, d], restricted to the graph's valid edges in canonical order.
  Rows are returned signed.

CEAP (a :class:`~.methods.ConductanceStep` factor; :mod:`.methods`' module docstring; Wu, Tonin and Cevher,
arXiv 2606.16920) runs the same m forward and backward passes at the points alpha_k = k/m, k = 1..m, but pairs
each pass's gradient with that step's change of every node output, and sums:

    CEAP_i(u -> v) = sum_{k=1..m} (z_u(k-1) - z_u(k)) . dM_i/d in_v |_{x = x_k},

z(k) the run at x_k (the input node's output is x_k itself) and z(0) the corrupted run; no 1/m. That is m
contractions [B, n_up, P, d] x [B, n_down, P, d] instead of one, and no clean run (z(m) is it). With the factor
``lions_conductance_step`` every term is z_u(k) - z_u(k-1), LIONS-EPFL/Circuit-Variance's sign.
"""

from __future__ import annotations

import sys
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.language.forward import GPT2Weights, flat_inputs, run
from certified_circuits.language.methods import INTEGRATIONS, RANKING, integration_points  # noqa: F401 (re-exported)
from certified_circuits.language.methods import ConductanceStep
from certified_circuits.language.tokenizer import EncodedBatch


def metric_per_example(logits_last: torch.Tensor, answer: torch.Tensor, distractor: torch.Tensor) -> torch.Tensor:
    """logit(answer) - logit(distractor) per example, [B]."""
    return logits_last.gather(1, answer[:, None])[:, 0] - logits_last.gather(1, distractor[:, None])[:, 0]


def _to(x: np.ndarray, device: str | torch.device) -> torch.Tensor:
    return torch.as_tensor(x, device=device)


def eap_ig_batch(w: GPT2Weights, clean_tok: torch.Tensor, corr_tok: torch.Tensor, lengths: torch.Tensor,
                 answer: torch.Tensor, distractor: torch.Tensor, *, ig_steps: int = 5,
                 integration: str = "reference", points: list[float] | None = None,
                 factor: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Signed EAP-IG scores of one batch, [B, n_edges] in the weights' dtype (module docstring).

    Token ids [B, P] (right-padded; clean and corrupted prompts of one example have the same length),
    ``lengths`` [B] the real lengths, ``answer``/``distractor`` [B] the metric's token ids. Padding never
    matters: attention is causal and the metric reads position ``lengths - 1``, so gradients at later
    positions are zero. ``points`` overrides the IG points (``EAP``: [1]; ``clean-corrupted``: [1, 0];
    :func:`~.hooked.method_points`); the gradients are averaged over them. ``factor(clean, corrupted)``
    overrides the activation term corrupted - clean (``grad-x-act``: the clean nodes; :mod:`.methods`). A
    :class:`~.methods.ConductanceStep` factor (``CEAP``) makes it a conductance over ``points`` (increasing,
    the path starting at the corrupted input alpha = 0): :func:`conductance_batch`.
    """
    alphas = integration_points(ig_steps, integration) if points is None else list(points)
    if isinstance(factor, ConductanceStep):
        return conductance_batch(w, clean_tok, corr_tok, lengths, answer, distractor, alphas, factor)
    g = w.graph
    eu = torch.as_tensor(g.edge_up, device=clean_tok.device)
    ed = torch.as_tensor(g.edge_down, device=clean_tok.device)
    x_clean, x_corr = w.embed(clean_tok), w.embed(corr_tok)
    with torch.no_grad():
        if factor is None:
            diff = run(w, x_corr, lengths).nodes - run(w, x_clean, lengths).nodes   # [B, n_up, P, d]
        else:
            diff = factor(run(w, x_clean, lengths).nodes, run(w, x_corr, lengths).nodes)
    grad_sum = None
    for alpha in alphas:
        x = (x_corr + alpha * (x_clean - x_corr)).detach().requires_grad_(True)
        cache = run(w, x, lengths, keep_inputs=True)
        metric = metric_per_example(cache.logits_last, answer, distractor).sum()
        cache.inputs = list(torch.autograd.grad(metric, cache.inputs))
        flat = flat_inputs(cache, w.n_heads)                                        # [B, n_down, P, d]
        grad_sum = flat if grad_sum is None else grad_sum + flat
    with torch.no_grad():
        dense = torch.einsum("bupd,bnpd->bun", diff, grad_sum / len(alphas))
        return dense[:, eu, ed]


def conductance_batch(w: GPT2Weights, clean_tok: torch.Tensor, corr_tok: torch.Tensor, lengths: torch.Tensor,
                      answer: torch.Tensor, distractor: torch.Tensor, alphas: list[float],
                      step: ConductanceStep) -> torch.Tensor:
    """Signed CEAP scores of one batch, [B, n_edges] in the weights' dtype (module docstring).

    Args:
        w: the GPT-2 weights.
        clean_tok, corr_tok, lengths, answer, distractor: as :func:`eap_ig_batch`.
        alphas: the path's points after its start, increasing (``CEAP``: k/m for k = 1..m); the start is the
            corrupted input, alpha = 0.
        step: the step term (:class:`~.methods.ConductanceStep`): z(k-1) - z(k) (this project) or z(k) - z(k-1)
            (LIONS-EPFL).

    Returns:
        sum over k of step(z(k), z(k-1)) . dM/d in_v at x_k, per example and edge (no 1/m).
    """
    g = w.graph
    eu = torch.as_tensor(g.edge_up, device=clean_tok.device)
    ed = torch.as_tensor(g.edge_down, device=clean_tok.device)
    x_clean, x_corr = w.embed(clean_tok), w.embed(corr_tok)
    with torch.no_grad():
        previous = run(w, x_corr, lengths).nodes                                    # z(0): the corrupted run
    dense = None
    for alpha in alphas:
        x = (x_corr + alpha * (x_clean - x_corr)).detach().requires_grad_(True)
        cache = run(w, x, lengths, keep_inputs=True)                              # z(k); nodes[:, 0] is x_k
        metric = metric_per_example(cache.logits_last, answer, distractor).sum()
        cache.inputs = list(torch.autograd.grad(metric, cache.inputs))
        with torch.no_grad():
            current = cache.nodes.detach()
            term = torch.einsum("bupd,bnpd->bun", step(current, previous), flat_inputs(cache, w.n_heads))
            dense = term if dense is None else dense + term
            previous = current
    return dense[:, eu, ed]


def eap_ig_scores(w: GPT2Weights, batch: EncodedBatch, *, ig_steps: int = 5, batch_size: int = 16,
                  device: str | torch.device = "cpu", progress: bool = True,
                  integration: str = "reference", points: list[float] | None = None,
                  desc: str = "EAP-IG", factor: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
                  ) -> np.ndarray:
    """Signed per-example EAP-IG scores, float32 [n_examples, n_edges] in canonical edge order.

    ``integration`` picks the IG points (module docstring): ``"reference"`` (default, k = 0..m-1, as the
    reference code) or ``"endpoint"`` (k = 1..m); ``points`` and ``factor`` as :func:`eap_ig_batch` (a
    :class:`~.methods.ConductanceStep` factor with ``CEAP``'s points computes ``CEAP``).
    """
    integration_points(ig_steps, integration)   # validate before any work
    n = len(batch.ids)
    out = np.empty((n, w.graph.n_edges), dtype=np.float32)
    starts = range(0, n, batch_size)
    for s in tqdm(starts, desc=desc, unit="batch", disable=not progress, file=sys.stderr):
        sl = slice(s, min(s + batch_size, n))
        lengths = _to(batch.lengths[sl], device)
        p = int(lengths.max())
        scores = eap_ig_batch(w, _to(batch.clean[sl, :p], device), _to(batch.corrupted[sl, :p], device), lengths,
                              _to(batch.answer[sl], device), _to(batch.distractor[sl], device),
                              ig_steps=ig_steps, integration=integration, points=points, factor=factor)
        out[sl] = scores.float().cpu().numpy()
    return out
