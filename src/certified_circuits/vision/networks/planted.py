"""The planted world ResNet: a world ResNet whose class circuits are known by construction (docs/embedded_default.md).

Stage ``l`` (``layer1..layer4``) has ``W_l = n_classes * own[l] + shared[l]`` channels, ordered as class 0's
``own[l]`` channels, class 1's, ..., then the ``shared[l]`` channels. Every convolution inside a stage (both
convolutions of every BasicBlock and the downsample convolution) carries a fixed 0/1 mask over
(out channel, in channel):

- an output channel of class c reads the input channels of class c and the shared channels;
- a shared output channel reads the shared channels only.

The stem (``conv1``/``bn1``) reads RGB in full and has ``W_1`` channels grouped like ``layer1``'s. The
classifier's logit c reads only class c's ``layer4`` channels, so ``shared[3]`` must be 0 (shared ``layer4``
channels would reach no logit). BatchNorm is per channel and the identity shortcuts keep channel positions,
so the groups hold through every block.

Ground truth of class c: its own channels in every stage plus every shared channel. These are exactly the
ancestors of logit c among the circuit vertices (the outputs of ``layer1..layer4``): the shared channels are
upstream of every logit, so they belong to every class's truth; another class's channels never reach logit
c, so the gradient of logit c with respect to them is exactly 0 and logit c does not change when they are
replaced by anything finite.

The masks are enforced by projection (``W <- W * mask`` at initialisation and after every optimiser step,
:func:`apply_masks`), so a trained planted model is a plain world ResNet checkpoint whose masked weights are
exact zeros.

**The noisy regime** (``leak`` > 0, issue 42). The masked entries are not zeroed but bounded: after every step
``|W_cross| <= leak * mean |W_allowed|`` of the same weight (its allowed entries' mean magnitude), so another
class's channels reach logit c with a small, data-dependent effect, and their gradient-based scores are no longer
exactly 0. The planted sets are then the *candidates* of the truth; which of them are the truth is decided per
component from each channel's own causal effect (:mod:`certified_circuits.analysis.component_truth`,
vision/ground_truth.py). ``leak = 0`` is the clean regime above, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

#: the stages whose outputs are the circuit vertices
STAGES: tuple[str, ...] = ("layer1", "layer2", "layer3", "layer4")


#: the largest cross-class bound of the noisy regime (a leak of half the allowed weights' size is no longer a
#: planted structure)
MAX_LEAK = 0.5

#: widest stage of a planted model (n_classes * own + shared channels): ResNet-50's widest; memory and time grow
#: with the square of a stage's width, and an unbounded one ran out of memory only in the training job
MAX_PLANTED_WIDTH = 2048


@dataclass(frozen=True)
class PlantedSpec:
    """Channels per class and shared channels of each of the four stages.

    Attributes:
        n_classes: logits of the classifier.
        own: channels of each class in stage l (4 ints >= 1).
        shared: channels read by every class in stage l (4 ints >= 0; the last must be 0).
        leak: the noisy regime's cross-class bound, a fraction of the allowed weights' mean magnitude in
            [0, MAX_LEAK] (0: the clean regime, masked weights exactly 0).
    """

    n_classes: int
    own: tuple[int, int, int, int]
    shared: tuple[int, int, int, int]
    leak: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "own", tuple(int(x) for x in self.own))
        object.__setattr__(self, "shared", tuple(int(x) for x in self.shared))
        if self.n_classes < 2:
            raise ValueError(f"a planted model needs at least 2 classes, got {self.n_classes}")
        if len(self.own) != 4 or len(self.shared) != 4:
            raise ValueError(
                f"planted own and shared need 4 values each (layer1..layer4), got {self.own}, {self.shared}"
            )
        if not 0.0 <= float(self.leak) <= MAX_LEAK:  # also refuses NaN
            raise ValueError(
                f"planted leak {self.leak} must be in [0, {MAX_LEAK}]: the cross-class weights' bound as a fraction "
                f"of the allowed weights' mean magnitude (0: the clean regime)"
            )
        object.__setattr__(self, "leak", float(self.leak))
        if min(self.own) < 1 or min(self.shared) < 0:
            raise ValueError(
                f"planted own channels must be >= 1 and shared >= 0, got own={self.own} shared={self.shared}"
            )
        widest = max(planted_widths(self))
        if widest > MAX_PLANTED_WIDTH:
            raise ValueError(
                f"the planted widths n_classes * own + shared are {list(planted_widths(self))} for {self.n_classes} "
                f"classes: a stage of {widest} channels is above the bound of {MAX_PLANTED_WIDTH} (the widest ResNet-50 "
                f"stage), where the world model's memory and time run out; lower planted_own / planted_shared"
            )
        if self.shared[3] != 0:
            raise ValueError(
                f"planted shared channels of layer4 must be 0, got {self.shared[3]}: the classifier's logit c reads only "
                f"class c's layer4 channels, so shared layer4 channels would reach no logit (dead components); "
                f"pass --planted-shared with a last value of 0"
            )

    def to_dict(self) -> dict:
        """The spec as JSON-able values (the checkpoint's ``meta['planted']``; ``leak`` only when nonzero, so a clean
        model's files are those of before the noisy regime)."""
        d = {"n_classes": self.n_classes, "own": list(self.own), "shared": list(self.shared)}
        return {**d, "leak": self.leak} if self.leak else d

    @classmethod
    def from_dict(cls, d: dict) -> "PlantedSpec":
        return cls(int(d["n_classes"]), tuple(d["own"]), tuple(d["shared"]), float(d.get("leak", 0.0)))


def planted_widths(spec: PlantedSpec) -> tuple[int, int, int, int]:
    """Stage widths ``W_l = n_classes * own[l] + shared[l]`` (the ``widths`` of the world ResNet)."""
    return tuple(spec.n_classes * o + s for o, s in zip(spec.own, spec.shared))  # type: ignore[return-value]


def channel_groups(spec: PlantedSpec, stage: int) -> np.ndarray:
    """Group of every channel of stage ``stage`` (0..3): int64 [W_l], the class index, or -1 for shared."""
    own, shared = spec.own[stage], spec.shared[stage]
    return np.concatenate([np.repeat(np.arange(spec.n_classes), own), np.full(shared, -1)]).astype(np.int64)


def connection_mask(out_groups: np.ndarray, in_groups: np.ndarray) -> np.ndarray:
    """bool [out, in]: output channel o may read input channel i iff ``g(i) == g(o)`` or ``g(i)`` is shared.

    A shared output (g = -1) thus reads shared inputs only."""
    out_g, in_g = out_groups[:, None], in_groups[None, :]
    return (in_g == out_g) | (in_g == -1)


def block_masks(spec: PlantedSpec, blocks: tuple[int, ...] = (1, 1, 1, 1)) -> dict[str, np.ndarray]:
    """The 0/1 masks of every constrained weight of a world ResNet with ``planted_widths(spec)``.

    Args:
        spec: the planted spec.
        blocks: BasicBlocks per stage (the world ResNet's ``blocks``).

    Returns:
        {state-dict name: bool mask} with shapes [out, in] for every conv inside ``layer1..layer4`` (the
        first block of stage l reads stage l-1, ``layer1`` reads the stem, grouped like ``layer1``) and
        [n_classes, W_4] for ``fc.weight`` (logit c reads class c's ``layer4`` channels). The stem, the
        BatchNorms and the biases are unconstrained.
    """
    if len(blocks) != 4:
        raise ValueError(f"blocks needs 4 values, got {blocks}")
    groups = [channel_groups(spec, i) for i in range(4)]
    masks: dict[str, np.ndarray] = {}
    for stage, n_blocks in enumerate(blocks):
        before = groups[max(stage - 1, 0)]  # the stem is grouped like layer1
        here = groups[stage]
        for b in range(n_blocks):
            prefix = f"{STAGES[stage]}.{b}"
            masks[f"{prefix}.conv1.weight"] = connection_mask(here, before if b == 0 else here)
            masks[f"{prefix}.conv2.weight"] = connection_mask(here, here)
            if b == 0 and stage > 0:  # stride 2: torchvision's first block of layer2..4 has a 1x1 downsample conv
                masks[f"{prefix}.downsample.0.weight"] = connection_mask(here, before)
    masks["fc.weight"] = np.arange(spec.n_classes)[:, None] == groups[3][None, :]
    return masks


def apply_masks(net: "nn.Module", spec: PlantedSpec, blocks: tuple[int, ...] = (1, 1, 1, 1)) -> None:
    """Project the weights onto the planted structure in place (no gradient recorded): ``W <- W * mask``, or in
    the noisy regime ``W <- W * mask + clip(W * (1 - mask), -b, b)`` with ``b = leak * mean |W[mask]|``.

    Called at initialisation and after every optimiser step; masked entries become exact zeros (``leak`` 0) or
    stay within the bound.

    Raises:
        ValueError: the net's shapes do not match the spec (naming the parameter).
    """
    import torch

    params = dict(net.named_parameters())
    with torch.no_grad():
        for name, mask in block_masks(spec, blocks).items():
            if name not in params:
                raise ValueError(
                    f"planted mask for {name}, but the network has no such parameter: build it with "
                    f"widths {planted_widths(spec)} and blocks {tuple(blocks)}"
                )
            w = params[name]
            if tuple(w.shape[:2]) != mask.shape:
                raise ValueError(
                    f"{name} has shape {tuple(w.shape)} but the planted spec needs [out, in] = {mask.shape}"
                )
            m = torch.as_tensor(mask, dtype=w.dtype, device=w.device).view(*mask.shape, *([1] * (w.ndim - 2)))
            if spec.leak:
                m = m.expand_as(w)
                bound = spec.leak * float(w[m.bool()].abs().mean())
                w.copy_(w * m + (w * (1 - m)).clamp(-bound, bound))
            else:
                w.mul_(m)


def masks_hold(net: "nn.Module", spec: PlantedSpec, blocks: tuple[int, ...] = (1, 1, 1, 1)) -> bool:
    """True iff every masked weight entry of the net is exactly zero, or in the noisy regime within its bound
    ``leak * mean |W[mask]|`` (relative slack 1e-6 for float32 rounding)."""
    params = dict(net.named_parameters())
    for name, mask in block_masks(spec, blocks).items():
        w = params[name].detach().cpu().numpy()
        on = np.broadcast_to(mask.reshape(*mask.shape, *([1] * (w.ndim - 2))), w.shape)
        bound = spec.leak * float(np.abs(w[on]).mean()) if spec.leak else 0.0
        if np.any(np.abs(w[~on]) > bound * (1 + 1e-6)):
            return False
    return True


def truth_components(spec: PlantedSpec, class_index: int) -> np.ndarray:
    """bool [U] over the vertices in vertex order (layer1 channels first): class ``class_index``'s own channels of
    every stage plus every shared channel (the ancestors of its logit)."""
    if not 0 <= class_index < spec.n_classes:
        raise ValueError(f"class index {class_index} is outside 0..{spec.n_classes - 1}")
    return np.concatenate([(g == class_index) | (g == -1) for g in (channel_groups(spec, i) for i in range(4))])


def vertex_names(spec: PlantedSpec) -> list[str]:
    """Vertex names ``'<block>.<channel>'`` in vertex order (as ``VisionModel.vertex_names``)."""
    return [f"{s}.{i}" for s, w in zip(STAGES, planted_widths(spec)) for i in range(w)]


def truth_names(spec: PlantedSpec, class_index: int) -> list[str]:
    """Names of the true components of class ``class_index``, in vertex order."""
    names = vertex_names(spec)
    return [names[i] for i in np.flatnonzero(truth_components(spec, class_index))]


def spec_of_meta(meta: dict | None) -> PlantedSpec | None:
    """The planted spec recorded in a checkpoint's meta (``meta['planted']``), None for an ordinary model."""
    if not meta or not meta.get("planted"):
        return None
    return PlantedSpec.from_dict(meta["planted"])


def gradient_outside_truth(
    net: "nn.Module", hook_names: list[str], x: "torch.Tensor", spec: PlantedSpec, class_index: int,
    truth: np.ndarray | None = None,
) -> float:
    """max |d logit_c / d a_u| over the non-truth vertices u (0.0 exactly for a planted model), on images x.

    ``truth``: bool [U], the planted set to measure outside of (default: ``truth_components(spec, class_index)``;
    another testbed model passes its own)."""
    import torch

    acts: list[torch.Tensor] = []
    handles = [net.get_submodule(h).register_forward_hook(lambda _m, _i, out: acts.append(out)) for h in hook_names]
    try:
        logits = net(x)
    finally:
        for h in handles:
            h.remove()
    grads = torch.autograd.grad(logits[:, class_index].sum(), acts)
    per_channel = torch.cat([g.abs().amax(dim=(0, 2, 3)) for g in grads])
    outside = torch.as_tensor(~(truth_components(spec, class_index) if truth is None else np.asarray(truth, bool)))
    return float(per_channel[outside].max()) if outside.any() else 0.0
