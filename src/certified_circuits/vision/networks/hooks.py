"""Forward hooks on the circuit vertices: capture, and channel masking with masks as a batch dimension.

Sufficiency (paper Sec. 4 "Sufficiency"): a class circuit keeps only its channels; every non-circuit
channel is zeroed at each block output. To evaluate many circuits at once the image batch is expanded
to (masks x images) at ``VisionModel.expand_at`` (for ResNets the output of ``layer1``, for ViT the
input of the first encoder block) so that the computation before that point runs once per image,
and each block output is multiplied by its mask slice, broadcast over the image axis.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

from certified_circuits.vision.networks.models import VisionModel


def _channel_view(mask_b: torch.Tensor, out_ndim: int, channel_dim: int) -> torch.Tensor:
    """Reshape a [M, C] mask slice to broadcast against a block output viewed as [M, B, ...]."""
    shape = [mask_b.shape[0], 1] + [1] * (out_ndim - 1)
    cd = 1 + (channel_dim % out_ndim)
    shape[cd] = mask_b.shape[1]
    return mask_b.reshape(shape)


@contextmanager
def masked(model: VisionModel, masks: torch.Tensor, fill: list[torch.Tensor] | None = None) -> Iterator[None]:
    """Within the context, a forward pass on B images returns M*B logits (mask-major: row m*B + b is
    image b under mask m). masks: float or bool [M, U] over the model's vertices (1 keep, 0 remove).

    ``fill`` chooses what a removed channel carries: ``None`` zeroes it (the paper's sufficiency
    test); a list with one tensor per block, shaped like one image's block output ([C, H, W] or
    [T, D]), replaces it by that value (mean ablation, see :func:`reference_activations`)."""
    if masks.ndim != 2 or masks.shape[1] != model.n_vertices:
        raise ValueError(f"masks must be [M, {model.n_vertices}] for {model.arch}, got {tuple(masks.shape)}")
    m = masks.shape[0]
    masks = masks.to(torch.float32)
    slices = torch.split(masks, model.widths, dim=1)
    handles = []
    state: dict[str, int] = {}

    def expand(t: torch.Tensor) -> torch.Tensor:
        state["b"] = t.shape[0]
        return t.unsqueeze(0).expand(m, *t.shape).reshape(m * t.shape[0], *t.shape[1:])

    name, where = model.expand_at
    mod = model.net.get_submodule(name)
    if where == "output":
        handles.append(mod.register_forward_hook(lambda _m, _i, out: expand(out)))
    else:
        handles.append(mod.register_forward_pre_hook(lambda _m, args: (expand(args[0]),) + tuple(args[1:])))

    def make_hook(mask_b: torch.Tensor, fill_b: torch.Tensor | None):
        def hook(_m, _i, out: torch.Tensor) -> torch.Tensor:
            b = state["b"]
            view = out.reshape(m, b, *out.shape[1:])
            keep = _channel_view(mask_b, out.ndim, model.channel_dim).to(out.dtype)
            if fill_b is None:
                return (view * keep).reshape(out.shape)
            return (view * keep + (1 - keep) * fill_b.to(out.dtype)).reshape(out.shape)
        return hook

    if fill is not None and len(fill) != len(model.hook_names):
        raise ValueError(f"fill needs one tensor per block ({len(model.hook_names)}), got {len(fill)}")
    try:
        for i, (hname, mask_b) in enumerate(zip(model.hook_names, slices)):
            fill_b = None if fill is None else fill[i]
            handles.append(model.net.get_submodule(hname).register_forward_hook(make_hook(mask_b, fill_b)))
        yield
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def masked_logits(model: VisionModel, x: torch.Tensor, masks: torch.Tensor,
                  fill: list[torch.Tensor] | None = None) -> torch.Tensor:
    """Logits [M, B, n_classes] of the model on images x [B, 3, H, W] under each of the M masks."""
    with masked(model, masks, fill):
        out = model.net(x)
    return out.reshape(masks.shape[0], x.shape[0], -1)


@contextmanager
def captured(model: VisionModel, retain_grad: bool = False) -> Iterator[list[torch.Tensor]]:
    """Collect the block outputs (one tensor per hook point, in block order) of the next forward pass."""
    acts: list[torch.Tensor | None] = [None] * len(model.hook_names)
    handles = []

    def make_hook(i: int):
        def hook(_m, _i, out: torch.Tensor) -> None:
            if retain_grad and out.requires_grad:
                out.retain_grad()
            acts[i] = out
        return hook

    try:
        for i, hname in enumerate(model.hook_names):
            handles.append(model.net.get_submodule(hname).register_forward_hook(make_hook(i)))
        yield acts  # type: ignore[misc]
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def reference_activations(model: VisionModel, images: torch.Tensor, batch_size: int = 256) -> list[torch.Tensor]:
    """Mean block outputs over reference images (one [C, H, W] or [T, D] tensor per block).

    The fill of mean ablation: a removed channel carries its average activation map over a
    class-agnostic reference set instead of zero, which keeps downstream layers in distribution (zero
    ablation pushes a class circuit to label every image as its class; the false-positive rate of the
    specificity control exposes that)."""
    sums: list[torch.Tensor] | None = None
    for s0 in range(0, images.shape[0], batch_size):
        with captured(model) as acts:
            model.net(images[s0 : s0 + batch_size])
        batch = [a.sum(0) for a in acts]
        sums = batch if sums is None else [t + b for t, b in zip(sums, batch)]
    if sums is None:
        raise ValueError("reference_activations needs at least one image")
    return [t / images.shape[0] for t in sums]
