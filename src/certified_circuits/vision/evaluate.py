"""Circuit sufficiency with a specificity control (paper Sec. 4 "Sufficiency", Eq. cACC).

For one class c and every circuit (all K x methods baseline / majority / certified), the model runs
with every non-circuit vertex zeroed at each block output:

- ``accuracy`` (the paper's CA(C_c, D)): share of the eval set's class-c images predicted as c
  (argmax over all classes);
- ``false_positive_rate`` (beyond the paper): share of a fixed, seeded sample of the same eval set's
  *other* classes' images that the circuit labels c -- a circuit that labels everything c would
  otherwise score accuracy 1;
- ``balanced_accuracy`` = (accuracy + 1 - false_positive_rate) / 2;
- ``per_example_correct``: the outcome of every evaluated image as a 0/1 string, the class's images
  first (1 = labelled c), then the negative sample (1 = not labelled c), for the per-example paired
  tests of :mod:`certified_circuits.analysis.paired_tests`;
- ``m``, ``m_empty``, ``m_full`` (faithfulness, :mod:`certified_circuits.analysis.faithfulness`): the mean
  over the class's images of the class logit minus the mean of the other logits, for the circuit, for
  the empty circuit (every vertex ablated) and for the full model. A circuit that keeps every vertex is
  the full model, so its ``m`` is ``m_full`` itself (f = 1 exactly).

All distinct circuits of a class -- every scorer's, every method's, every K's -- are evaluated together, for
every ablation, in one pass over each eval set's images: the images are loaded once, and what lies upstream
of the first masked layer (and the unmasked model, method ``full``) is computed once. Two engines score the
circuits, with equal results (predictions exactly, logits within float rounding: tested):

- a torchvision ResNet (the world model, ResNet-18/50/101) runs :class:`MaskedResNet`: ``layer1``'s output
  is computed once per image; per pass of circuits, each layer computes only the output channels some circuit
  of the pass keeps, and the next layer reads only those channels (a removed channel is zero, or under mean
  ablation its fill, whose contribution is one map per layer, computed once). Its cost falls with the circuits'
  size;
- any other model (ViT) runs the generic hooks (``hooks.masked``): masks are a batch dimension after the
  shared prefix, every channel is computed and then masked.

The ground truth's per-vertex check (``vision.ground_truth.component_effects``: every circuit of all vertices but
one) runs :meth:`MaskedResNet.ablations`, which carries only the change from the full model's activations
(:class:`Trace`, :class:`Change`), and its whole-circuit checks keep every logit (:func:`logits_under_masks`).

A circuit that keeps every vertex is the full model itself and is not run again. Passes hold as many
(mask, image) pairs as fit in free device memory, at most :data:`CPU_PASS_PAIRS` on a CPU, unless
``max_batch`` is given.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from certified_circuits.core.devices import batch_from_memory
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, encode_outcomes
from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.networks.hooks import masked_logits
from certified_circuits.vision.networks.models import VisionModel

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

COLUMNS = ["experiment", "concept", "eval_set", "method", "k_target", "k_effective", "accuracy",
           "false_positive_rate", "balanced_accuracy", "n_images", "n_negatives", OUTCOME_COLUMN,
           "m", "m_empty", "m_full"]


def class_margin(logits: torch.Tensor, label: int) -> torch.Tensor:
    """Class logit minus the mean of the other logits, [...] from logits [..., C] (faithfulness' vision m)."""
    own = logits[..., label]
    return own - (logits.sum(-1) - own) / (logits.shape[-1] - 1)


#: Live tensors of the largest layer output per (mask, image) pair at peak during a masked forward pass:
#: the layer's input and output, a residual branch's identity and the masked copy of a block output.
PAIR_SAFETY = 4


@torch.no_grad()
def bytes_per_pair(model: VisionModel) -> int:
    """Estimated peak bytes of one (mask, image) pair in a masked forward pass (no gradients).

    One probe forward of a single image at the model's resolution on its device records the bytes of
    every leaf module's output; the estimate is ``PAIR_SAFETY x`` the largest (for ResNet-101 at 224 px
    4 x 3.2 MB, for ViT-B/16 4 x the 2.4 MB MLP hidden layer).
    """
    largest = [0]

    def record(_module: torch.nn.Module, _inputs: object, out: object) -> None:
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        size = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
        largest[0] = max(largest[0], size)

    net = model.net
    leaves = [m for m in net.modules() if next(m.children(), None) is None]
    handles = [m.register_forward_hook(record) for m in leaves]
    dtype = next(net.parameters()).dtype
    was_training = net.training
    net.eval()  # the probe must not move BatchNorm statistics
    try:
        net(torch.zeros(1, 3, model.image_size, model.image_size, dtype=dtype, device=model.device))
    finally:
        net.train(was_training)
        for h in handles:
            h.remove()
    return PAIR_SAFETY * max(largest[0], 1)


#: (mask, image) pairs per forward pass on a CPU when ``max_batch`` is None (measured on the 2-core machine, the
#: default's world ResNet): the hooks ran one pass of every pair of an eval set (31 circuits x 150 images, which
#: memory allows) 2x slower than passes of 248-496 pairs, whose activations stay in the cache; and
#: :class:`MaskedResNet`, whose pruning is per pass, ran 150-image eval sets 1.6x faster with one circuit a
#: pass than with three (it takes ``256 // images`` circuits a pass). The benchmark
#: (benchmarks/bench_vision_masked_eval.py) compares pass sizes.
CPU_PASS_PAIRS = 256


def batch_pairs(model: VisionModel, n_pairs: int, max_batch: int | None = None, per_pair: int | None = None) -> int:
    """(mask, image) pairs per forward pass: ``max_batch`` when given, else what fits in free device memory.

    ``batch_from_memory(device, per_pair, cap=n_pairs)`` with ``per_pair`` = :func:`bytes_per_pair` unless
    given: half the free GPU memory, or on the CPU half of ``min(CPU_BUDGET_BYTES, available RAM)``
    (:mod:`certified_circuits.core.devices`), and on the CPU at most :data:`CPU_PASS_PAIRS`.
    """
    if max_batch is not None:
        if isinstance(max_batch, bool) or int(max_batch) != max_batch or max_batch < 1:
            raise ValueError(f"max_batch={max_batch!r} is invalid: expected a positive number of (mask, image) pairs "
                             f"per pass, or None to choose it from free device memory")
        return int(max_batch)
    per_pair = bytes_per_pair(model) if per_pair is None else per_pair
    cap = max(1, int(n_pairs))
    if model.device.type == "cpu":
        cap = min(cap, CPU_PASS_PAIRS)
    return batch_from_memory(model.device, per_pair, cap=cap)


@dataclass(frozen=True)
class FoldedConv:
    """A ResNet convolution with the eval-mode BatchNorm after it folded in: ``bn(conv(x)) = conv_{s W}(x) + t``
    with ``s = gamma / sqrt(running_var + eps)``, ``t = beta - running_mean s`` (plus ``s b`` for a conv bias)."""

    weight: torch.Tensor
    bias: torch.Tensor
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int = 1

    @classmethod
    @torch.no_grad()
    def of(cls, conv: nn.Conv2d, bn: nn.BatchNorm2d) -> "FoldedConv":
        scale = bn.running_var.add(bn.eps).rsqrt()
        if bn.weight is not None:
            scale = scale * bn.weight
        shift = -bn.running_mean * scale
        if bn.bias is not None:
            shift = shift + bn.bias
        if conv.bias is not None:
            shift = shift + conv.bias * scale
        return cls(conv.weight * scale[:, None, None, None], shift, conv.stride, conv.padding, conv.dilation,
                   conv.groups)

    def __call__(self, x: torch.Tensor, inputs: torch.Tensor | None = None, outputs: torch.Tensor | None = None,
                 constant: torch.Tensor | None = None) -> torch.Tensor:
        """The output channels ``outputs`` (all when None) of the folded conv of ``x`` [N, I', H, W], which holds
        the input channels ``inputs`` (all when None; the others are zero), plus ``constant`` [1, O, H', W']
        (sliced to ``outputs`` here) when given."""
        weight, bias = self.weight, self.bias
        if outputs is not None:
            weight, bias = weight.index_select(0, outputs), bias.index_select(0, outputs)
        y = self.conv(x, weight if inputs is None else weight.index_select(1, inputs), bias)
        if constant is not None:
            y += constant if outputs is None else constant.index_select(1, outputs)
        return y

    def conv(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """``conv2d`` with this conv's geometry, also for a weight without input or output channels (which
        ``conv2d`` refuses: the map is then the bias, or empty)."""
        if weight.shape[0] and weight.shape[1]:
            return F.conv2d(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        size = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
                zip(x.shape[2:], weight.shape[2:], self.stride, self.padding, self.dilation)]
        y = x.new_zeros((x.shape[0], weight.shape[0], *size))
        return y if bias is None else y + bias.view(1, -1, 1, 1)


@dataclass(frozen=True)
class FoldedBlock:
    """A torchvision ``BasicBlock`` (two convs) or ``Bottleneck`` (three): ``relu(convs(x) + shortcut(x))``."""

    convs: tuple[FoldedConv, ...]
    down: FoldedConv | None

    def __call__(self, x: torch.Tensor, inputs: torch.Tensor | None = None, outputs: torch.Tensor | None = None,
                 constants: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The output channels ``outputs`` (all when None) of the block on ``x``, which holds the input channels
        ``inputs`` (the others zero; a block with an identity shortcut needs them all); ``constants``: what the
        first conv and the downsampling shortcut add (:meth:`FoldedConv.__call__`)."""
        first, down = constants if constants is not None else (None, None)
        h, last = x, len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            h = conv(h, inputs, None, first) if i == 0 else conv(h, outputs=outputs if i == last else None)
            if i < last:
                h = h.relu_()
        if self.down is not None:
            shortcut = self.down(x, inputs, outputs, down)
        else:
            shortcut = x if outputs is None else x.index_select(1, outputs)
        return h.add_(shortcut).relu_()

    def trace(self, x: torch.Tensor) -> "BlockTrace":
        """The block on every channel of ``x`` with every intermediate kept (:meth:`__call__`'s arithmetic)."""
        pre, post, h = [], [], x
        for i, conv in enumerate(self.convs):
            pre.append(conv(h))
            if i < len(self.convs) - 1:
                h = pre[-1].relu()
                post.append(h)
        shortcut = x if self.down is None else self.down(x)
        return BlockTrace(x, tuple(pre), tuple(post), shortcut, (pre[-1] + shortcut).relu_())


@dataclass(frozen=True)
class BlockTrace:
    """A block's activations on the full network ([B, C, H, W] each): its input, every conv's output (folded BatchNorm
    included), the ReLU of every conv's output but the last, the shortcut and the block's output."""

    x: torch.Tensor
    pre: tuple[torch.Tensor, ...]
    post: tuple[torch.Tensor, ...]
    shortcut: torch.Tensor
    out: torch.Tensor


@dataclass(frozen=True)
class Trace:
    """The full network's activations on B images (:meth:`MaskedResNet.trace`): ``outputs`` the outputs of
    ``layer1..layer4`` [B, C_l, H_l, W_l], ``blocks`` each block of ``layer2..layer4`` (:class:`BlockTrace`),
    ``logits`` [B, n_classes]."""

    outputs: tuple[torch.Tensor, ...]
    blocks: tuple[tuple[BlockTrace, ...], ...]
    logits: torch.Tensor


#: :meth:`MaskedResNet.ablations` carries a change on the channels it reaches (through nonzero weights) while fewer
#: than 1 / DENSE_SHARE of a conv's outputs are reached; from there on every channel is computed
DENSE_SHARE = 2


def tiled(t: torch.Tensor, m: int) -> torch.Tensor:
    """``t`` [B, C, H, W] repeated for M circuits, [M*B, C, H, W] (mask-major), channels-last as the :class:`Trace`
    is: a conv of it then runs the trace's kernel, so that a channel no change reaches keeps its value bit for bit."""
    out = torch.empty((m * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device,
                      memory_format=torch.channels_last)
    out.unflatten(0, (m, t.shape[0])).copy_(t)
    return out


@dataclass(frozen=True)
class Change:
    """M circuits' activations [M*B, ...] (mask-major) at one point of the network against its :class:`Trace` value
    ``base`` [B, ...]: either ``dense`` (the whole tensor) or, when the circuits change few channels, ``idx`` (the
    changed channels, int [r]) and ``delta`` [M*B, r, H, W] (the change on them; every other channel is the base's,
    bit for bit)."""

    m: int
    dense: torch.Tensor | None = None
    idx: torch.Tensor | None = None
    delta: torch.Tensor | None = None

    def on(self, base: torch.Tensor) -> torch.Tensor:
        """The whole tensor [M*B, C, H, W] given the base [B, C, H, W] it changes."""
        if self.dense is not None:
            return self.dense
        return tiled(base, self.m).index_add_(1, self.idx, self.delta)

    def linear(self, conv: FoldedConv, reach: torch.Tensor, base_out: torch.Tensor) -> "Change":
        """The change of ``conv``'s output (``base_out``): ``conv(x + delta) = conv(x) + conv_{W[:, idx]}(delta)``
        (the bias cancels) on the outputs ``reach`` (bool [O, I], a nonzero weight) lets the changed channels reach;
        every output when that is at least 1 / :data:`DENSE_SHARE` of them."""
        if self.dense is not None:
            return Change(self.m, dense=conv(self.dense))
        weight = conv.weight.index_select(1, self.idx)
        out = torch.nonzero(reach.index_select(1, self.idx).any(1)).flatten()
        if DENSE_SHARE * len(out) < len(reach):
            return Change(self.m, idx=out, delta=conv.conv(self.delta, weight.index_select(0, out), None))
        return Change(self.m, dense=tiled(base_out, self.m).add_(conv.conv(self.delta, weight, None)))

    def relu(self, base_pre: torch.Tensor, base_post: torch.Tensor) -> "Change":
        """The change of ``relu`` (``base_post = relu(base_pre)``)."""
        if self.dense is not None:
            return Change(self.m, dense=self.dense.relu())
        pre, post = (t.index_select(1, self.idx).repeat(self.m, 1, 1, 1) for t in (base_pre, base_post))
        return Change(self.m, idx=self.idx, delta=pre.add_(self.delta).relu_().sub_(post))

    def add_relu(self, other: "Change", base: torch.Tensor, base_other: torch.Tensor,
                 base_out: torch.Tensor) -> "Change":
        """The change of ``relu(self + other)`` (``base_out``)."""
        if self.dense is not None or other.dense is not None:
            return Change(self.m, dense=self.on(base).add_(other.on(base_other)).relu_())
        idx = torch.unique(torch.cat([self.idx, other.idx]))  # sorted
        new = [t.index_select(1, idx).repeat(self.m, 1, 1, 1).index_add_(1, torch.searchsorted(idx, c.idx), c.delta)
               for t, c in ((base, self), (base_other, other))]
        out = base_out.index_select(1, idx).repeat(self.m, 1, 1, 1)
        return Change(self.m, idx=idx, delta=new[0].add_(new[1]).relu_().sub_(out))


class MaskedResNet:
    """Circuits of a torchvision ResNet (vertices: the channels of ``layer1..layer4``'s outputs) scored by pruning.

    A circuit keeps a channel set ``S_l`` at each layer output ``y_l``; a removed channel carries ``f_l``: zero
    (zero ablation) or its mean activation map (mean ablation). Written as the deviation from the fill,
    the masked output is ``f_l + d_l`` with ``d_l = m_l (y_l - f_l)``, zero off ``S_l``, and a conv reading it is
    ``conv(d_l) + conv(f_l)``: the second term is one map per layer and ablation, computed once. For a pass of
    circuits, ``d_l`` is zero outside ``U_l``, the union of their ``S_l``: each layer computes only its output
    channels ``U_l`` (last conv and shortcut sliced), and the next layer's first conv and shortcut read only
    ``U_l``. The classifier reads ``mean_hw(f_4)`` (a constant) plus ``mean_hw(d_4)`` on ``U_4``. Everything before
    ``layer1``'s output does not depend on the circuit: :meth:`prefix` runs it once per image. BatchNorm is folded
    into its conv (eval mode), and the activations are channels-last (faster on the CPU for narrow slices).

    The logits equal ``hooks.masked``'s up to the order of float sums (tested: within 1e-5, predictions equal).
    The convolutions' cost scales with the kept channels (one circuit per pass: with ``|S_l|``).
    """

    def __init__(self, model: VisionModel, layers: list[list[FoldedBlock]]):
        self.net, self.widths, self.layers = model.net, list(model.widths), layers
        self.fc_weight, self.fc_bias = model.net.fc.weight, model.net.fc.bias
        self._fills: dict[int, tuple[Sequence[torch.Tensor], list, torch.Tensor]] = {}
        self._reach: dict[int, torch.Tensor] = {}

    @classmethod
    @torch.no_grad()
    def of(cls, model: VisionModel) -> "MaskedResNet | None":
        """The engine of a model it serves, else None: a torchvision ResNet in eval mode with its own forward pass,
        no hooks, vertices at ``layer1..layer4`` (batch expanded at ``layer1``'s output), torchvision's
        ``BasicBlock``/``Bottleneck`` whose first and last convs are ungrouped, and an average pool and linear head."""
        from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

        from certified_circuits.vision.networks.world_resnet import WorldResNet

        net = model.net
        if not (isinstance(net, ResNet) and type(net).forward is ResNet.forward
                and type(net)._forward_impl in (ResNet._forward_impl, WorldResNet._forward_impl)):
            return None
        if (model.hook_names != ["layer1", "layer2", "layer3", "layer4"] or tuple(model.expand_at) != ("layer1", "output")
                or model.channel_dim != 1):
            return None
        if any(m.training or m._forward_hooks or m._forward_pre_hooks for m in net.modules()):
            return None
        if not (isinstance(net.avgpool, nn.AdaptiveAvgPool2d) and net.avgpool.output_size in (1, (1, 1))
                and isinstance(net.fc, nn.Linear)):
            return None
        layers = []
        for name in model.hook_names[1:]:
            blocks = []
            for block in net.get_submodule(name):
                names = {BasicBlock: ("1", "2"), Bottleneck: ("1", "2", "3")}.get(type(block))
                if names is None:
                    return None
                pairs = [(getattr(block, f"conv{i}"), getattr(block, f"bn{i}")) for i in names]
                down = block.downsample
                if down is not None:
                    if not (isinstance(down, nn.Sequential) and len(down) == 2 and isinstance(down[0], nn.Conv2d)
                            and isinstance(down[1], nn.BatchNorm2d)):
                        return None
                    pairs.append((down[0], down[1]))
                if any(bn.running_var is None or conv.groups != 1 or isinstance(conv.padding, str)
                       for conv, bn in (pairs[0], pairs[len(names) - 1], pairs[-1])):
                    return None  # grouped or 'same'-padded ends cannot be sliced; no running statistics
                folded = [FoldedConv.of(conv, bn) for conv, bn in pairs]
                blocks.append(FoldedBlock(tuple(folded[: len(names)]), folded[-1] if down is not None else None))
            layers.append(blocks)
        return cls(model, layers)

    def prefix(self, x: torch.Tensor) -> torch.Tensor:
        """``layer1``'s output of images x (torchvision's forward up to there), channel-major [C_1, B, H, W]: a
        pass reads a few of its channels, and whole rows gather fast."""
        net = self.net
        return net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x))))).transpose(0, 1).contiguous()

    def fill_terms(self, fill: Sequence[torch.Tensor]) -> tuple[list, torch.Tensor]:
        """What the fill contributes whatever the circuit: per layer 2..4 ``(conv1(f), shortcut(f))`` of the input
        fill without bias (None where the block has an identity shortcut), and the logits' ``W mean_hw(f_4)``.
        Computed once per fill (kept while the fill is)."""
        key = id(fill)
        if key not in self._fills:
            terms = []
            for i, blocks in enumerate(self.layers):
                f = fill[i].unsqueeze(0)
                block = blocks[0]
                terms.append(None if block.down is None else
                             (block.convs[0].conv(f, block.convs[0].weight, None), block.down.conv(f, block.down.weight, None)))
            head = F.linear(fill[-1].mean((1, 2)), self.fc_weight)
            self._fills[key] = (fill, terms, head)
        return self._fills[key][1], self._fills[key][2]

    def logits(self, h: torch.Tensor, masks: torch.Tensor, fill: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """The network's logits under each circuit of a pass.

        Args:
            h: :meth:`prefix` of B images, [C_1, B, H, W].
            masks: bool [M, U] (1 keep), the pass's circuits over the model's vertices.
            fill: None zeroes removed channels; one [C_l, H_l, W_l] map per layer
                (:func:`~certified_circuits.vision.networks.hooks.reference_activations`) is what they carry.

        Returns:
            float [M, B, n_classes], mask-major; ``fc(mean_hw(f_4 + d_4))`` with ``d`` as in the class docstring.
        """
        m, b = masks.shape[0], h.shape[1]
        keep = torch.split(masks.to(torch.bool), self.widths, dim=1)
        union = [torch.nonzero(k.any(0)).flatten() for k in keep]
        terms, head = self.fill_terms(fill) if fill is not None else ([None] * len(self.layers), None)

        def deviation(y: torch.Tensor, layer: int) -> torch.Tensor:
            """``d = m (y - f)`` on the channels ``union[layer]`` of y [M*B, |U|, H, W] (mask-major)."""
            if fill is not None:
                y = y - fill[layer].index_select(0, union[layer]).to(y.dtype)
            if m == 1:  # one circuit: it keeps every channel of its union
                return y
            k = keep[layer].index_select(1, union[layer]).to(y.dtype).repeat_interleave(b, dim=0)
            return y.mul_(k[:, :, None, None])  # y is this pass's own tensor

        first = h.index_select(0, union[0]).transpose(0, 1).contiguous(memory_format=torch.channels_last)
        d = deviation(first.repeat(m, 1, 1, 1) if m > 1 else first, 0)
        for i, blocks in enumerate(self.layers, start=1):
            for j, block in enumerate(blocks):
                outputs = union[i] if j == len(blocks) - 1 else None
                if j == 0 and block.down is None:  # an identity shortcut reads every input channel: densify
                    x = d.new_zeros((d.shape[0], self.widths[i - 1], *d.shape[2:]))
                    x.index_copy_(1, union[i - 1], d)
                    d = block(x if fill is None else x + fill[i - 1].to(x.dtype), outputs=outputs)
                elif j == 0:
                    d = block(d, union[i - 1], outputs, terms[i - 1])
                else:
                    d = block(d, outputs=outputs)
            d = deviation(d, i)
        logits = F.linear(pooled(d), self.fc_weight.index_select(1, union[-1]), self.fc_bias)
        if head is not None:
            logits += head
        return logits.reshape(m, b, -1)

    def trace(self, h: torch.Tensor) -> Trace:
        """The full network's activations on the images of :meth:`prefix` ``h`` (:class:`Trace`), the base of
        :meth:`ablations`."""
        y = h.transpose(0, 1).contiguous(memory_format=torch.channels_last)
        outputs, blocks = [y], []
        for layer in self.layers:
            traced = []
            for block in layer:
                traced.append(block.trace(y))
                y = traced[-1].out
            blocks.append(tuple(traced))
            outputs.append(y)
        return Trace(tuple(outputs), tuple(blocks), F.linear(pooled(y), self.fc_weight, self.fc_bias))

    def ablations(self, trace: Trace, layer: int, channels: torch.Tensor,
                  fill: torch.Tensor | None = None) -> torch.Tensor:
        """The logits with each of ``channels`` of the output of ``layer`` (0 for ``layer1``) removed alone: the
        circuits of every vertex but one (``vision.ground_truth.component_effects``).

        From the full network's :class:`Trace`, only the change is computed: at ``layer`` it is ``f - y`` on the
        removed channel, and a conv passes it on to the output channels a nonzero weight connects it to (by
        linearity: ``conv(y + delta) = conv(y) + conv(delta)``), a ReLU or a residual sum to the same channels
        (:class:`Change`). In a network with structural zeros (the testbed's planted and compiled ResNets) a
        channel reaches few others and each circuit costs a sliver of a forward pass; where the change reaches
        half of a conv's outputs, every channel is computed from there on. A channel that no change reaches keeps
        the base's value bit for bit, so a vertex with no path to a logit leaves it exactly unchanged.

        Args:
            trace: :meth:`trace` of B images.
            layer: the vertex layer (0..3 for ``layer1..layer4``).
            channels: int [M], the channels removed (one a circuit).
            fill: [C, H, W], what a removed channel carries (mean ablation), None for zero.

        Returns:
            float [M, B, n_classes], mask-major.
        """
        y = trace.outputs[layer]
        m, b = len(channels), y.shape[0]
        idx, pos = torch.unique(channels, return_inverse=True)
        removed = y.index_select(1, channels).transpose(0, 1)  # [M, B, H, W]: y of circuit i's own channel
        carried = torch.zeros_like(removed) if fill is None else fill.index_select(0, channels)[:, None].to(y.dtype)
        delta = y.new_zeros((m, b, len(idx), *y.shape[2:]))
        delta[torch.arange(m), :, pos] = carried - removed
        change = Change(m, idx=idx, delta=delta.flatten(0, 1).contiguous(memory_format=torch.channels_last))
        for blocks, traced in zip(self.layers[layer:], trace.blocks[layer:]):
            for block, t in zip(blocks, traced):
                inner = change
                for i, conv in enumerate(block.convs):
                    inner = inner.linear(conv, self.reach(conv), t.pre[i])
                    if i < len(block.convs) - 1:
                        inner = inner.relu(t.pre[i], t.post[i])
                shortcut = change if block.down is None else change.linear(block.down, self.reach(block.down),
                                                                           t.shortcut)
                change = inner.add_relu(shortcut, t.pre[-1], t.shortcut, t.out)
        if change.dense is not None:
            logits = F.linear(pooled(change.dense), self.fc_weight, self.fc_bias)
        else:
            cut = F.linear(pooled(change.delta), self.fc_weight.index_select(1, change.idx))
            logits = trace.logits.repeat(m, 1).add_(cut)  # a logit no change reaches: the trace's, bit for bit
        return logits.reshape(m, b, -1)

    def reach(self, conv: FoldedConv) -> torch.Tensor:
        """bool [O, I]: which input channels a conv's nonzero weights connect to which outputs (kept per conv)."""
        key = id(conv)
        if key not in self._reach:
            self._reach[key] = conv.weight.ne(0).flatten(2).any(2)
        return self._reach[key]


def pooled(x: torch.Tensor) -> torch.Tensor:
    """The spatial mean [N, C] of x [N, C, H, W], reduced along the contiguous axis of a channels-last tensor."""
    n, c, hh, ww = x.shape
    return x.permute(0, 2, 3, 1).reshape(n, hh * ww, c).mean(1)


@contextmanager
def written_outputs() -> Iterator[None]:
    """Within the context, new tensors are not first filled with NaN.

    The stages run with ``torch.use_deterministic_algorithms`` (:func:`~certified_circuits.core.devices.configure_torch`),
    which by default fills every new tensor so that a read of unwritten memory shows (``torch.utils.deterministic.
    fill_uninitialized_memory``). Every op of a masked forward pass writes its whole output, so the fill is pure
    cost: on the world ResNet it took 15% of :meth:`MaskedResNet.logits` (measured). Restored on exit."""
    import torch.utils.deterministic as deterministic

    previous = deterministic.fill_uninitialized_memory
    deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        deterministic.fill_uninitialized_memory = previous


#: The masked-evaluation engines: ``auto`` (:class:`MaskedResNet` where it serves the model, else the hooks) and
#: ``hooks`` (``hooks.masked_logits`` for every model).
ENGINES = ("auto", "hooks")


@torch.no_grad()
def masked_passes(model: VisionModel, imageset: ImageSet, idx: np.ndarray,
                  runs: Sequence[tuple[np.ndarray, Sequence[torch.Tensor] | None]], max_batch: int | None = None,
                  per_pair: int | None = None, progress: bool = False, desc: str = "masks",
                  engine: str = "auto") -> Iterator[tuple[int, np.ndarray, slice, torch.Tensor]]:
    """The logits of the images ``idx`` under every mask of each run ``(masks bool [M_r, U], fill)``, pass by pass:
    the one masked-forward loop of :func:`outcomes_under_masks` and :func:`logits_under_masks`.

    The images are loaded, and what precedes the masked layers computed, once per image batch for every run.
    Engine: :class:`MaskedResNet` where it serves the model (images per pass ``b = min(N, P)``, circuits per pass
    ``P // b``, circuits sorted by size so that a pass's union stays small), else ``hooks.masked_logits``
    (``mc = min(M, P)`` masks by ``P // mc`` images), with ``P`` = :func:`batch_pairs`.

    Args:
        model, imageset, idx: the model and the images to score (indices into the set), N of them.
        runs: ``[(masks bool [M_r, U], fill or None), ...]``: the circuits of each ablation.
        max_batch, per_pair: pairs per pass, or its memory estimate (:func:`batch_pairs`).
        progress, desc: a progress bar on stderr, and its label.
        engine: :data:`ENGINES`; ``"hooks"`` runs the hooks for every model (the reference the benchmark and the
            tests compare with).

    Yields:
        ``(run, rows, images, logits)``: the run's index, the rows of its masks in this pass (int [m]), the slice of
        ``idx`` imaged (b of them) and their logits float [m, b, n_classes] (mask-major), until every (mask, image)
        pair of every run has been yielded once.

    Raises:
        ValueError: an unknown engine, before any image is loaded.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is unknown: use one of {ENGINES}")
    engine = MaskedResNet.of(model) if engine == "auto" else None
    n = len(idx)
    sizes = [len(masks) for masks, _ in runs]
    pairs = batch_pairs(model, max(1, sum(sizes) * n), max_batch, per_pair)
    if engine is not None:
        b = max(1, min(n, pairs))
        mc = max(1, pairs // b)
    else:
        mc = max(1, min(max(sizes, default=1), pairs))
        b = max(1, pairs // mc)
    ordered = []
    for masks, fill in runs:
        masks = np.asarray(masks)
        order = np.argsort(masks.sum(1), kind="stable") if engine is not None else np.arange(len(masks))
        ordered.append((order, torch.as_tensor(masks[order], device=model.device), fill))
    with written_outputs():
        for s0 in tqdm(range(0, n, b), desc=desc, disable=not progress, leave=False):
            sl = slice(s0, min(n, s0 + b))
            x = imageset.load(idx[sl], model).to(model.device)
            h = engine.prefix(x) if engine is not None else x
            for r, (order, masks_t, fill) in enumerate(ordered):
                for m0 in range(0, len(order), mc):
                    chunk = masks_t[m0 : m0 + mc]
                    logits = (engine.logits(h, chunk, fill) if engine is not None
                              else masked_logits(model, x, chunk.to(torch.float32), fill))
                    yield r, order[m0 : m0 + mc], sl, logits


@torch.no_grad()
def outcomes_under_masks(model: VisionModel, imageset: ImageSet, idx: np.ndarray,
                         runs: Sequence[tuple[np.ndarray, Sequence[torch.Tensor] | None]], label: int | None = None,
                         max_batch: int | None = None, per_pair: int | None = None, progress: bool = False,
                         desc: str = "masks", engine: str = "auto") -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Predicted class int64 [M_r, N] (and with ``label`` the class margin float64 [M_r, N], :func:`class_margin`)
    of the images ``idx`` under every mask of each run ``(masks bool [M_r, U], fill)``, from the passes of
    :func:`masked_passes` (its arguments).

    Args:
        label: the class whose margin is returned (None: predictions only).

    Returns:
        One ``(predictions, margins or None)`` per run, rows in the run's mask order.

    Raises:
        ValueError: an unknown engine, before any image is loaded.
    """
    n = len(idx)
    results = [(np.empty((len(masks), n), np.int64), np.empty((len(masks), n), np.float64) if label is not None
                else None) for masks, _ in runs]
    for r, rows, sl, logits in masked_passes(model, imageset, idx, runs, max_batch, per_pair, progress, desc, engine):
        pred, margin = results[r]
        pred[rows, sl] = logits.argmax(-1).cpu().numpy()
        if margin is not None:
            margin[rows, sl] = class_margin(logits, label).double().cpu().numpy()
    return results


@torch.no_grad()
def logits_under_masks(model: VisionModel, imageset: ImageSet, idx: np.ndarray,
                       runs: Sequence[tuple[np.ndarray, Sequence[torch.Tensor] | None]], max_batch: int | None = None,
                       progress: bool = False, desc: str = "masks", engine: str = "auto") -> list[torch.Tensor]:
    """The logits float32 [M_r, N, n_classes] (on the CPU) of the images ``idx`` under every mask of each run
    ``(masks bool [M_r, U], fill)``: the passes of :func:`masked_passes` (its arguments), kept whole.

    Raises:
        ValueError: an unknown engine, before any image is loaded.
    """
    n, c = len(idx), len(model.class_names)
    results = [torch.empty((len(masks), n, c), dtype=torch.float32) for masks, _ in runs]
    for r, rows, sl, logits in masked_passes(model, imageset, idx, runs, max_batch, None, progress, desc, engine):
        results[r][torch.as_tensor(rows), sl] = logits.float().cpu()
    return results


def predictions_under_masks(model: VisionModel, imageset: ImageSet, idx: np.ndarray, masks: np.ndarray,
                            max_batch: int | None = None, progress: bool = False, desc: str = "masks",
                            fill: list[torch.Tensor] | None = None, label: int | None = None, engine: str = "auto"):
    """Predicted class int64 [M, len(idx)] of every image under every mask (masks bool or 0/1 [M, U], 1 keeps);
    with ``label``, also the class margin float64 [M, len(idx)] (:func:`class_margin`) as a second result. One
    run of :func:`outcomes_under_masks` (``engine``: :data:`ENGINES`)."""
    masks = np.asarray(masks)
    if not np.isin(masks, (0, 1)).all():
        raise ValueError("masks must hold 0 (remove) and 1 (keep) only: pass bool circuits [M, U]")
    pred, margin = outcomes_under_masks(model, imageset, idx, [(masks != 0, fill)], label, max_batch,
                                        progress=progress, desc=desc, engine=engine)[0]
    return pred if label is None else (pred, margin)


@torch.no_grad()
def plain_logits(model: VisionModel, imageset: ImageSet, idx: np.ndarray, batch_size: int = 256) -> list[torch.Tensor]:
    """Logits of the unmasked model on the images ``idx``, one [b, n_classes] tensor per batch of ``batch_size``."""
    return [model.net(imageset.load(idx[s : s + batch_size], model).to(model.device))
            for s in range(0, len(idx), batch_size)]


@torch.no_grad()
def plain_predictions(model: VisionModel, imageset: ImageSet, idx: np.ndarray, batch_size: int = 256,
                      label: int | None = None):
    """Predicted class of the unmasked model [len(idx)]; with ``label``, also its class margin."""
    logits = plain_logits(model, imageset, idx, batch_size)
    pred = np.concatenate([x.argmax(1).cpu().numpy() for x in logits]) if logits else np.zeros(0, np.int64)
    if label is None:
        return pred
    margin = (np.concatenate([class_margin(x, label).double().cpu().numpy() for x in logits]) if logits
              else np.zeros(0))
    return pred, margin


def negative_sample(labels: np.ndarray, label: int, n: int, seed: int, eval_set: str) -> np.ndarray:
    """Fixed seeded sample (sorted indices) of up to ``n`` images of classes other than ``label``."""
    others = np.flatnonzero(labels != label)
    rng = np.random.default_rng(np.random.SeedSequence([seed, int(label), zlib.crc32(eval_set.encode())]))
    if len(others) <= n:
        return others
    return np.sort(rng.choice(others, size=n, replace=False))


#: One scorer's circuits of a class: ({method: bool [nK, U]}, k_grid [nK], groups [U]).
ClassCircuits = tuple[Mapping[str, np.ndarray], np.ndarray, np.ndarray]


def class_tables(model: VisionModel, sets: Mapping[str, ImageSet], label: int, circuits: Sequence[ClassCircuits],
                 ablations: Mapping[str, Sequence[torch.Tensor] | None], *, experiment: str, concept: str,
                 n_negatives: int = 200, seed: int = 0, max_batch: int | None = None, progress: bool = True,
                 progress_log: Callable[[str], None] | None = None,
                 engine: str = "auto") -> dict[tuple[str, int], "pd.DataFrame"]:
    """The tables of :func:`evaluate_class` for several scorers' circuits and ablations of one class, in one pass.

    Per eval set the images are loaded once, the unmasked model runs once, and the distinct circuits of every
    scorer (with the empty circuit, for ``m_empty``) run once per ablation (:func:`outcomes_under_masks`); a
    circuit of every vertex is the full model (its predictions and ``m = m_full`` are the full model's, f = 1).

    Args:
        model, sets, label: the model, the eval sets and the class's logit index.
        circuits: ``[(masks {method: bool [nK, U]}, k_grid [nK], groups [U]), ...]``, one per scorer.
        ablations: ``{name: fill}``: ``None`` zeroes removed channels (the paper), block-mean tensors
            (:func:`mean_ablation_fill`) give mean ablation.
        experiment, concept, n_negatives, seed, max_batch, progress: as for :func:`evaluate_class`.
        progress_log: ``callable(message)`` called after each eval set.
        engine: :data:`ENGINES` (:func:`outcomes_under_masks`).

    Returns:
        ``{(ablation, i): table}``: the table of ``circuits[i]`` under that ablation, as :func:`evaluate_class`.

    Raises:
        ValueError: masks whose width is not the model's vertex count, before any evaluation.
    """
    import sys
    import time

    from certified_circuits.core.discovery import effective_k

    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is unknown: use one of {ENGINES}")
    blocks = [np.asarray(masks[mth], dtype=bool) for masks, _, _ in circuits for mth in masks]
    stacked = np.concatenate(blocks) if blocks else np.zeros((0, model.n_vertices), bool)  # [sum nM*nK, U]
    if stacked.ndim != 2 or stacked.shape[1] != model.n_vertices:
        raise ValueError(f"masks have {stacked.shape[-1]} components but {model.arch} has {model.n_vertices} "
                         f"vertices: were the votes computed from this model's attributions?")
    # the empty circuit (every vertex ablated) is evaluated with the others: m_empty of faithfulness
    uniq, inverse = np.unique(np.vstack([stacked, np.zeros((1, stacked.shape[1]), bool)]), axis=0,
                              return_inverse=True)
    inverse = inverse.reshape(-1)
    empty_u = inverse[-1]
    every_u = np.flatnonzero(uniq.all(1))  # a circuit of every vertex is the full model (f = 1 exactly)
    run_u = np.flatnonzero(~uniq.all(1))
    offsets = np.cumsum([0] + [sum(len(masks[mth]) for mth in masks) for masks, _, _ in circuits])
    keff = [{mth: effective_k(np.asarray(masks[mth], dtype=bool), np.asarray(groups)) for mth in masks}
            for masks, _, groups in circuits]
    per_pair = bytes_per_pair(model) if max_batch is None else None  # one probe for every eval set
    rows: dict[tuple[str, int], list] = {(a, i): [] for a in ablations for i in range(len(circuits))}
    for name, iset in tqdm(list(sets.items()), desc="vision-evaluate", disable=not progress):
        start = time.perf_counter()
        pos = np.flatnonzero(iset.labels == label)
        if len(pos) == 0:
            print(f"vision-evaluate: eval set {name!r} has no images of class {concept}; skipped", file=sys.stderr)
            continue
        neg = negative_sample(iset.labels, label, n_negatives, seed, name)
        idx = np.concatenate([pos, neg])
        full_pred, full_margin = plain_predictions(model, iset, idx, label=label)
        full = full_pred == label
        m_full = float(full_margin[: len(pos)].mean())
        full_fpr = full[len(pos) :].mean() if len(neg) else np.nan
        positive = np.arange(len(idx)) < len(pos)
        runs = [(uniq[run_u], fill) for fill in ablations.values()]
        scored = outcomes_under_masks(model, iset, idx, runs, label, max_batch, per_pair, progress, name, engine)
        for ablation, (pred_r, margin_r) in zip(ablations, scored):
            hit = np.empty((len(uniq), len(idx)), bool)  # [Mu, N]
            hit[run_u], hit[every_u] = pred_r == label, full
            m_u = np.empty(len(uniq))
            m_u[run_u], m_u[every_u] = margin_r[:, : len(pos)].mean(1), m_full
            acc_u = hit[:, : len(pos)].mean(1)
            fpr_u = hit[:, len(pos) :].mean(1) if len(neg) else np.full(len(uniq), np.nan)
            m_empty = float(m_u[empty_u])
            outcomes = encode_outcomes(np.vstack([full, hit]) == positive)  # correct: c on positives, not c on negatives
            for i, (masks, k_grid, _) in enumerate(circuits):
                table = rows[(ablation, i)]
                table.append((experiment, concept, name, "full", 1.0, 1.0, full[: len(pos)].mean(), full_fpr, len(pos),
                              len(neg), outcomes[0], m_full, m_empty, m_full))
                nk = len(k_grid)
                for j, mth in enumerate(masks):
                    for k in range(nk):
                        u = inverse[offsets[i] + j * nk + k]
                        table.append((experiment, concept, name, mth, float(k_grid[k]), float(keff[i][mth][k]), acc_u[u],
                                      fpr_u[u], len(pos), len(neg), outcomes[1 + u], float(m_u[u]), m_empty, m_full))
        if progress_log:
            progress_log(f"{concept} {name}: {len(uniq)} distinct circuits x {len(idx)} images x {len(ablations)} "
                         f"ablation(s) in {time.perf_counter() - start:.1f}s")
    return {key: _table(table) for key, table in rows.items()}


def _table(rows: list) -> "pd.DataFrame":
    """The tidy frame (:data:`COLUMNS`) of rows without ``balanced_accuracy``: that column is
    ``(accuracy + 1 - false_positive_rate) / 2``."""
    import pandas as pd  # only now: a vision job reaches its first batch without pandas (start-up, issue 8)

    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "balanced_accuracy"])
    df = df.astype({"m": float, "m_empty": float, "m_full": float})
    df["accuracy"] = df["accuracy"].astype(float)
    df["false_positive_rate"] = df["false_positive_rate"].astype(float)
    df["balanced_accuracy"] = (df["accuracy"] + 1.0 - df["false_positive_rate"]) / 2.0
    return df[COLUMNS]


def evaluate_class(model: VisionModel, sets: Mapping[str, ImageSet], label: int, masks: Mapping[str, np.ndarray],
                   k_grid: np.ndarray, groups: np.ndarray, *, experiment: str, concept: str, n_negatives: int = 200,
                   seed: int = 0, max_batch: int | None = None, progress: bool = True,
                   fill: list[torch.Tensor] | None = None) -> "pd.DataFrame":
    """Tidy table of accuracy / FPR / balanced accuracy for every (eval set, method, K) + ``full``.

    ``fill``: None zeroes removed channels (the paper); block-mean tensors give mean ablation.
    ``max_batch``: (mask, image) pairs per forward pass; None chooses it from free device memory
    (:func:`batch_pairs`).

    masks: {method: bool [nK, U]}; eval sets without images of the class are skipped (warned on stderr).
    One scorer and one ablation of :func:`class_tables`."""
    return class_tables(model, sets, label, [(masks, k_grid, groups)], {"": fill}, experiment=experiment,
                        concept=concept, n_negatives=n_negatives, seed=seed, max_batch=max_batch,
                        progress=progress)[("", 0)]


def mean_ablation_fill(model: VisionModel, reference: ImageSet, size: int, seed: int) -> list[torch.Tensor]:
    """Per-channel mean activations over a seeded sample of ``size`` reference images: what removed
    channels carry under ``--ablation mean`` (zero ablation, the paper's test, needs none).

    Args:
        model: the model whose circuit vertices are filled.
        reference: the reference images (the world's train split).
        size: images to average; a size above ``len(reference)`` uses every reference image (the CLI bounds it by
            :data:`certified_circuits.cli.stages.MAX_REFERENCE_SIZE`, since the images load as one batch).
        seed: the seed of the sample (drawn without replacement, in index order).

    Returns:
        One tensor of per-channel means per circuit vertex.
    """
    from certified_circuits.vision.networks.hooks import reference_activations

    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(reference), size=min(len(reference), size), replace=False))
    return reference_activations(model, reference.load(pick, model).to(model.device))


def evaluate_circuits(model: VisionModel, sets: Mapping[str, ImageSet], label: int, concept: str,
                      circuits: list, *, experiment: str, methods: list[str] | None = None,
                      ablations: Mapping[str, Sequence[torch.Tensor] | None] | None = None, n_negatives: int = 100,
                      seed: int = 0, max_batch: int | None = None, progress_log=None):
    """Sufficiency of every (votes, certificates) pair of one class under every ablation: one tidy table.

    For each pair, the baseline, majority and certified circuits of every K (``method_masks``), or the
    ``methods`` asked for, are evaluated on every eval set, all pairs and ablations in one pass per eval set
    (:func:`class_tables`); rows carry the ablation and the setting of their circuits
    (:func:`~certified_circuits.core.contracts.setting_columns`).

    Args:
        model, sets, label: the model, the eval sets and the class's logit index.
        concept: the class name; every pair must have been certified for it (``attrs["concept"]``).
        circuits: ``[(Votes, Certificates), ...]``.
        experiment, n_negatives, seed, max_batch: as for :func:`evaluate_class`.
        methods: a subset of ``baseline``/``majority``/``certified`` (default: all).
        ablations: ``{name: fill}`` in row order: ``zero`` with ``None``, ``mean`` with the fill of
            :func:`mean_ablation_fill` (default: ``{"zero": None}``).
        progress_log: ``callable(message)`` called after each eval set (the CLI logs it).

    Returns:
        A pandas DataFrame, one row per (ablation, scorer, eval set, method, K) plus the unmasked ``full`` rows, in
        that order (ablation first).

    Raises:
        ValueError: a pair certified for another concept, an unknown method or no ablation; before any evaluation.
    """
    from certified_circuits.core.certification import method_masks
    from certified_circuits.core.contracts import setting_columns

    ablations = {"zero": None} if ablations is None else dict(ablations)
    if not ablations:
        raise ValueError("ablations is empty: pass {'zero': None} (the paper's test) and/or {'mean': fill}")
    for votes, _ in circuits:
        certified_for = str(votes.attrs.get("concept", ""))
        if certified_for and certified_for != concept:
            raise ValueError(f"--concept {concept!r} but the circuits of {votes.attrs.get('source', 'a votes file')} "
                             f"were certified for {certified_for!r}: pass that class's votes and certificates")
    all_masks = [method_masks(votes, certificates) for votes, certificates in circuits]
    if methods:
        unknown = set(methods) - set(all_masks[0])
        if unknown:
            raise ValueError(f"unknown methods {sorted(unknown)}; available: {sorted(all_masks[0])}")
        all_masks = [{m: masks[m] for m in methods} for masks in all_masks]
    tables = class_tables(model, sets, label,
                          [(masks, np.asarray(votes.k_grid), np.asarray(votes.groups))
                           for (votes, _), masks in zip(circuits, all_masks)],
                          ablations, experiment=experiment, concept=concept, n_negatives=n_negatives, seed=seed,
                          max_batch=max_batch, progress_log=progress_log)
    import pandas as pd  # after the batches: the start-up before the first batch stays free of it

    return pd.concat([tables[(ablation, i)].assign(ablation=ablation, **setting_columns(votes, certificates))
                      for ablation in ablations for i, (votes, certificates) in enumerate(circuits)],
                     ignore_index=True)
