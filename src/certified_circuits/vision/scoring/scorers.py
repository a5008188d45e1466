"""Per-example vertex scores of the three vision base algorithms (paper Sec. 4, App. D.1).

For a class c, one forward and one backward pass per batch give, for every example and vertex:

- ``relevance``: gradient of the class-c logit times the activation, summed over space (ResNet) or
  tokens (ViT) -- gradient x activation attribution;
- ``activation``: the activation averaged over space / tokens;
- ``rank``: the per-example rank of the vertex's mean activation within its block, normalised to
  [0, 1] (1 = most active channel of the block; ties broken by lower channel index ranking lower).

The base algorithm (``certified_circuits.core.discovery``) averages these over the concept dataset and keeps
the per-block top-K fraction.
"""

from __future__ import annotations

from typing import Sequence

import torch

from certified_circuits.vision.networks.hooks import captured
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.scoring.plugins import ScorerPlugin, additive_scores

SCORERS: tuple[str, ...] = ("relevance", "activation", "rank")


def _reduce_dims(t: torch.Tensor, channel_dim: int) -> tuple[int, ...]:
    cd = channel_dim % t.ndim
    return tuple(d for d in range(1, t.ndim) if d != cd)


def block_rank(act_mean: torch.Tensor) -> torch.Tensor:
    """Per-row rank of each entry normalised to [0, 1] (0 = smallest, 1 = largest; stable ties).

    ``rank[b, i] = #{j : x[b, j] < x[b, i] or (x[b, j] == x[b, i] and j < i)} / (C - 1)``, computed on the
    device of ``act_mean``."""
    c = act_mean.shape[1]
    order = torch.argsort(act_mean, dim=1, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(c, device=order.device).expand_as(order))
    return ranks.to(torch.float32) / max(c - 1, 1)


def score_batch(model: VisionModel, x: torch.Tensor, target: int, plugins: Sequence[ScorerPlugin] = ()
                ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Scores {scorer: float32 [B, U]} for class ``target`` on images x, and the logits [B, n_classes].

    Args:
        model: the model (eval mode).
        x: normalised images ``[B, 3, H, W]`` on the model's device.
        target: the class whose logit is differentiated.
        plugins: additive scorer plugins (:mod:`certified_circuits.vision.scoring.plugins`), given the same
            activations and gradients as the built-in scorers; their scores are keyed by plugin name.

    Parameters get no gradients (only activations do), so the backward pass is as cheap as possible."""
    net = model.net
    if net.training:
        raise ValueError("score_batch needs the network in eval mode (BatchNorm statistics frozen): call net.eval()")
    flags = [p.requires_grad for p in net.parameters()]
    for p in net.parameters():
        p.requires_grad_(False)
    try:
        with torch.enable_grad(), captured(model, retain_grad=True) as acts:
            xin = x.detach().requires_grad_(True)
            logits = net(xin)
            logits[:, target].sum().backward()
        rel, act, rank = [], [], []
        extra = {p.name: additive_scores(p, [a.detach() for a in acts], [a.grad for a in acts], model.channel_dim,
                                         model.n_vertices) for p in plugins}
        for a in acts:
            dims = _reduce_dims(a, model.channel_dim)
            g = a.grad
            rel.append((a.detach() * g).sum(dim=dims))
            m = a.detach().mean(dim=dims)
            act.append(m)
            rank.append(block_rank(m))
    finally:
        for p, f in zip(net.parameters(), flags):
            p.requires_grad_(f)
    scores = {
        "relevance": torch.cat(rel, 1).float(),
        "activation": torch.cat(act, 1).float(),
        "rank": torch.cat(rank, 1).float(),
        **extra,
    }
    return scores, logits.detach()


@torch.no_grad()
def mean_activations(model: VisionModel, x: torch.Tensor) -> torch.Tensor:
    """Spatial/token-mean activation of every vertex, float32 [B, U] (no gradients)."""
    with captured(model) as acts:
        model.net(x)
    return torch.cat([a.mean(dim=_reduce_dims(a, model.channel_dim)) for a in acts], 1).float()


def spurious_index(base: torch.Tensor, habitat_swap: torch.Tensor, shape_swap: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Per-vertex spurious-cue sensitivity from counterfactual pairs (beyond the paper).

    Inputs are mean activations [N, U] of the same scenes: original, with another habitat, and with
    another shape. Index = E|a_habitat - a| / (E|a_habitat - a| + E|a_shape - a|), in [0, 1]:
    1 = responds only to the background (spurious cue), 0 = only to the shape (core cue)."""
    dh = (habitat_swap - base).abs().mean(0)
    ds = (shape_swap - base).abs().mean(0)
    return (dh / (dh + ds + eps)).float()
