"""Per-example vertex scores of the three vision base algorithms (paper Sec. 4, App. D.1).

For a class c, one forward and one backward pass per batch give, for every example and vertex:

- ``relevance``: gradient of the class-c logit times the activation, summed over space (ResNet) or
  tokens (ViT) -- gradient x activation attribution;
- ``activation``: the activation averaged over space / tokens;
- ``rank``: the per-example rank of the vertex's mean activation within its block, normalised to
  [0, 1] (1 = most active channel of the block; ties broken by lower channel index ranking lower).

The base algorithm (``certified_circuits.core.discovery``) averages these over the concept dataset and keeps
the per-block top-K fraction.

One more built-in, written only when asked (``vision.scorers: [..., conductance]``, ``vision-attribute
--conductance BASELINE``), since it costs ``m`` forward and backward passes per batch instead of one:

- ``conductance``: layer conductance (Dhamdhere et al. 2018) of every channel for the class-c logit ``F_c``, from a
  baseline image ``x'`` along the straight path ``x_k = x' + alpha_k (x - x')``, ``alpha_k = k / m``::

      cond_j(x) = sum over the channel's positions of  sum_{k=0..m-1} (a_j(x_{k+1}) - a_j(x_k)) dF_c/da_j(x_k)

  This is Captum's ``LayerConductance(..., n_steps=m, method="riemann_trapezoid")`` exactly (its points are
  ``torch.linspace(0, 1, m + 1)`` and it takes each interval's gradient at the interval's start;
  ``tests/unit/vision/test_conductance.py`` checks every layer against Captum 0.9.0). It is the one Captum rule
  whose points run from the baseline to the image, so the activation differences telescope to ``a(x) - a(x')`` and
  the channels of one layer sum to ``F_c(x) - F_c(x')`` up to an O(1/m) path error (exactly, at any m, for a layer
  that the logit reads linearly, e.g. ``layer4`` of a ResNet); Captum's ``riemann_left/right/middle`` and
  ``gausslegendre`` points stop short of an endpoint. At m = 1 it is the activation difference times the gradient
  at the baseline. Signed ranking, as ``relevance`` (whose completeness is ``F_c(x)`` minus the path from 0).
  Baselines (``vision.conductance.baseline``): ``zeros``, the all-zero normalised input (the normalisation's mean
  colour, for the world models the mean grey image; the default), or ``mean``, the per-pixel mean of a fixed
  class-agnostic reference set (the world's train split, as mean ablation), never of the concept dataset itself: an
  example's score must not depend on the other examples, or the mean over a sub-dataset would not be the base
  algorithm run on that sub-dataset (the cached path of the votes, paper App. D).

Why built in rather than a plugin (:mod:`.plugins`): an additive plugin receives the activations and gradients of
one pass at the input, and conductance needs ``m`` gradient passes along a path from a baseline that the config
names; as a black-box discovery plugin it would re-run on all ``n0 + n`` sub-datasets instead of once per example.
Here it uses the same hooks (:func:`~certified_circuits.vision.networks.hooks.captured`), the same frozen
parameters and the model's ``channel_dim`` as the other scorers, so it works for every supported family (ResNets:
channels of ``[B, C, H, W]``, summed over space; ViT: the last axis of ``[B, T, D]``, summed over tokens), and
``vision-attribute`` writes it as ``scores/conductance`` (ranking ``signed``) with its baseline, steps and method in
the file's attributes.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from certified_circuits.vision.networks.hooks import captured
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.scoring.plugins import (
    CONDUCTANCE_BASELINES,
    CONDUCTANCE_METHOD,
    OPTIONAL_SCORERS,
    ScorerPlugin,
    additive_scores,
)

#: the built-in scorers every ``vision-attribute`` run writes (one forward and backward pass per batch)
SCORERS: tuple[str, ...] = ("relevance", "activation", "rank")
#: the built-ins written only when asked (``conductance``: m passes); their names are torch-free, in :mod:`.plugins`
BUILT_IN_SCORERS: tuple[str, ...] = SCORERS + OPTIONAL_SCORERS
__all__ = ["SCORERS", "OPTIONAL_SCORERS", "BUILT_IN_SCORERS", "CONDUCTANCE_BASELINES", "CONDUCTANCE_METHOD",
           "Conductance", "block_rank", "conductance_points", "layer_conductance", "score_batch", "mean_activations",
           "spurious_index"]


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


@dataclass(frozen=True)
class Conductance:
    """What ``score_batch`` needs to add ``scores/conductance``.

    Attributes:
        steps: m, the path's intervals (m + 1 points, m backward passes).
        baseline: the normalised baseline image ``[3, H, W]`` (or ``[1, 3, H, W]``), broadcast over the batch;
            None is ``zeros``, the all-zero normalised input.
        name: the baseline's name in :data:`CONDUCTANCE_BASELINES`, recorded in the attribution file.
    """

    steps: int = 16
    baseline: torch.Tensor | None = None
    name: str = "zeros"

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"conductance steps must be an integer >= 1, got {self.steps!r}")
        if self.name not in CONDUCTANCE_BASELINES:
            raise ValueError(f"conductance baseline must be one of {list(CONDUCTANCE_BASELINES)}, got {self.name!r}")
        if self.name == "zeros" and self.baseline is not None:
            raise ValueError("the zeros baseline is the all-zero normalised input: give no baseline image")
        if self.name != "zeros" and self.baseline is None:
            raise ValueError(f"the {self.name} baseline needs its image (a normalised [3, H, W] tensor)")

    def attrs(self) -> dict[str, object]:
        """The attribution file's record of the scorer: baseline, steps and the Captum method it equals."""
        return {"conductance_baseline": self.name, "conductance_steps": int(self.steps),
                "conductance_method": CONDUCTANCE_METHOD}


def conductance_points(steps: int) -> list[float]:
    """The path's points alpha_0..alpha_m: Captum's ``riemann_trapezoid`` alphas for ``n_steps = m``
    (``torch.linspace(0, 1, m + 1)``, the same floats), 0 at the baseline and 1 at the image."""
    return torch.linspace(0, 1, steps + 1).tolist()


@contextmanager
def _activation_gradients_only(model: VisionModel) -> Iterator[None]:
    """Eval mode is required; parameters get no gradients inside (only activations do), restored after."""
    net = model.net
    if net.training:
        raise ValueError("score_batch needs the network in eval mode (BatchNorm statistics frozen): call net.eval()")
    flags = [p.requires_grad for p in net.parameters()]
    for p in net.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(net.parameters(), flags):
            p.requires_grad_(f)


def _pass(model: VisionModel, x: torch.Tensor, target: int | None) -> tuple[torch.Tensor, list, list]:
    """One forward pass (and, with a target, one backward pass of the target logit): the logits, the block
    outputs (detached) and their gradients (None without a target)."""
    with torch.enable_grad() if target is not None else torch.no_grad(), captured(model, retain_grad=True) as acts:
        xin = x.detach().requires_grad_(target is not None)
        logits = model.net(xin)
        if target is not None:
            logits[:, target].sum().backward()
    grads = [a.grad for a in acts] if target is not None else [None] * len(acts)
    return logits.detach(), [a.detach() for a in acts], grads


def layer_conductance(model: VisionModel, x: torch.Tensor, target: int, conductance: Conductance,
                      at_image: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Layer conductance of every channel of every component layer for the class-``target`` logit (module
    docstring): one ``[B, C_l]`` tensor per block, in the activations' dtype.

    Vectorised over the batch and over every component layer: each of the m + 1 path points is one forward pass
    of the whole batch (and each of the first m one backward pass) through the :func:`captured` hooks; the running
    sum keeps one point's activations and gradients.

    Args:
        model: the model (eval mode; call inside :func:`_activation_gradients_only`, as :func:`score_batch` does,
            or parameters get gradients too).
        x: normalised images ``[B, 3, H, W]`` on the model's device.
        target: the class whose logit is differentiated.
        conductance: steps and baseline.
        at_image: the block outputs at ``x`` when the caller has them (the last point, alpha = 1): saves a pass.
    """
    x = x.detach()
    base = torch.zeros_like(x) if conductance.baseline is None else conductance.baseline.to(x.device, x.dtype)
    if base.ndim == 3:
        base = base.unsqueeze(0)
    if base.shape[1:] != x.shape[1:]:
        raise ValueError(f"the conductance baseline is {tuple(base.shape[1:])} but the images are {tuple(x.shape[1:])}")
    alphas = conductance_points(conductance.steps)
    totals: list[torch.Tensor] | None = None
    previous: tuple[list, list] | None = None
    for k, alpha in enumerate(alphas):
        last = k == len(alphas) - 1
        if last and at_image is not None:
            acts, grads = at_image, [None] * len(at_image)
        else:
            _, acts, grads = _pass(model, base + alpha * (x - base), None if last else target)
        if previous is not None:
            terms = [((a - a0) * g0).sum(dim=_reduce_dims(a, model.channel_dim)) for a, a0, g0 in zip(acts, *previous)]
            totals = terms if totals is None else [t + u for t, u in zip(totals, terms)]
        previous = (acts, grads)
    assert totals is not None  # m >= 1: at least two points
    return totals


def score_batch(model: VisionModel, x: torch.Tensor, target: int, plugins: Sequence[ScorerPlugin] = (),
                conductance: Conductance | None = None) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Scores {scorer: float32 [B, U]} for class ``target`` on images x, and the logits [B, n_classes].

    Args:
        model: the model (eval mode).
        x: normalised images ``[B, 3, H, W]`` on the model's device.
        target: the class whose logit is differentiated.
        plugins: additive scorer plugins (:mod:`certified_circuits.vision.scoring.plugins`), given the same
            activations and gradients as the built-in scorers; their scores are keyed by plugin name.
        conductance: also score ``conductance`` (:func:`layer_conductance`; m more passes), or None (default).

    Parameters get no gradients (only activations do), so the backward pass is as cheap as possible."""
    with _activation_gradients_only(model):
        logits, acts, grads = _pass(model, x, target)
        extra = {p.name: additive_scores(p, acts, grads, model.channel_dim, model.n_vertices) for p in plugins}
        if conductance is not None:
            extra["conductance"] = torch.cat(layer_conductance(model, x, target, conductance, acts), 1).float()
    rel, act, rank = [], [], []
    for a, g in zip(acts, grads):
        dims = _reduce_dims(a, model.channel_dim)
        rel.append((a * g).sum(dim=dims))
        m = a.mean(dim=dims)
        act.append(m)
        rank.append(block_rank(m))
    scores = {
        "relevance": torch.cat(rel, 1).float(),
        "activation": torch.cat(act, 1).float(),
        "rank": torch.cat(rank, 1).float(),
        **extra,
    }
    return scores, logits


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
