"""Where the circuit components of a network are: the outputs of its component modules (``layers: auto``, the
family's block outputs of :mod:`.families`, or module names), their widths and their channel axis, read from one
forward pass (:func:`describe_components`, :class:`Components`, :func:`channel_axis`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn


@dataclass(frozen=True)
class Components:
    """Where the circuit components of a network are (:func:`describe_components`).

    Attributes:
        hook_names: module paths whose outputs hold the components, in forward order.
        block_names: a name per module (the top-K groups; vertex names are ``{block}.{channel}``).
        widths: channels per module.
        channel_dim: 1 for ``[B, C, H, W]`` outputs, -1 for tokens-last ``[B, ..., C]`` outputs.
        expand_at: where multi-mask evaluation expands the batch (see :class:`VisionModel`).
    """

    hook_names: list[str]
    block_names: list[str]
    widths: list[int]
    channel_dim: int
    expand_at: tuple[str, Literal["input", "output"]]


def channel_axis(shape: tuple[int, ...], module: str) -> int:
    """The channel axis of a module output of a square image: ``[B, C, H, W]`` (H = W) -> 1; tokens-last
    ``[B, H, W, C]`` or ``[B, T, C]`` or ``[B, C]`` -> -1. ValueError when the shape cannot tell."""
    if len(shape) in (2, 3):
        return -1
    if len(shape) == 4:
        _, a, b, c = shape
        if b == c and a != b:
            return 1
        if a == b and c != b:
            return -1
        raise ValueError(f"cannot tell the channel axis of {module} from its output shape {list(shape)} (channels "
                         f"equal the spatial size, at two input sizes): set another vision.folders.image_size")
    raise ValueError(f"{module} outputs a {len(shape)}-d tensor {list(shape)}: a component module must output "
                     f"[B, C, H, W], [B, H, W, C], [B, T, C] or [B, C]")


def _output_shapes(net: nn.Module, names: list[str], image_size: int) -> dict[str, tuple[int, ...]]:
    """Output shape of each named module on one ``[1, 3, image_size, image_size]`` input (no gradients)."""
    modules = dict(net.named_modules())
    outputs: dict[str, tuple[int, ...]] = {}
    handles = [modules[name].register_forward_hook(lambda _m, _i, out, name=name: outputs.__setitem__(name, tuple(out.shape)))
               for name in names]
    param = next(net.parameters(), None)
    try:
        with torch.no_grad():
            net(torch.zeros(1, 3, image_size, image_size, device=param.device if param is not None else "cpu"))
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def describe_components(net: nn.Module, model_name: str, layers: str | list[str], image_size: int) -> Components:
    """The components of ``net``: the outputs of ``layers`` (``"auto"``: the family's block outputs,
    :mod:`certified_circuits.vision.networks.families`), their widths and channel axis read from one forward pass
    of a ``[1, 3, image_size, image_size]`` input (on the net's device; a meta-device net costs nothing).
    A ``[B, a, b, c]`` output is channels-first when ``b == c != a`` and tokens-last when ``a == b != c``;
    when all three are equal, a second pass at twice the size tells (the channel count does not change).

    Explicit layers expand the batch at the network input (always valid, everything runs per mask);
    the families expand after the first component module.

    Raises:
        ValueError: an unknown module name (the message lists close and top-level names), a family without
            automatic layers, outputs that mix channel axes, or an undecidable channel axis.
    """
    from certified_circuits.vision.networks.families import auto_layers

    modules = dict(net.named_modules())
    if layers == "auto":
        pairs, expand = auto_layers(net, model_name)
    else:
        import difflib

        unknown = [name for name in layers if name not in modules or name == ""]
        if unknown:
            hint = {name: difflib.get_close_matches(name, list(modules), n=3) for name in unknown}
            top = [name for name in modules if name and name.count(".") <= 1][:30]
            raise ValueError(f"{model_name} has no module {unknown} (close names: {hint}); its modules include {top}: "
                             f"vision.folders.layers takes names of net.named_modules()")
        pairs, expand = [(name, name) for name in layers], ("", "input")
    shapes = _output_shapes(net, [name for name, _ in pairs], image_size)
    axes = {}
    for name, _ in pairs:
        try:
            axes[name] = channel_axis(shapes[name], name)
        except ValueError:  # C == H == W: the channels are the axis that keeps its size at another input size
            other = _output_shapes(net, [name], 2 * image_size)[name]
            fixed = [axis for axis in (1, 3) if other[axis] == shapes[name][axis]]
            if len(other) != 4 or len(fixed) != 1:
                raise
            axes[name] = 1 if fixed[0] == 1 else -1
    if len(set(axes.values())) > 1:
        raise ValueError(f"the layers mix channels-first and tokens-last outputs ({axes}): choose modules of one kind")
    axis = next(iter(axes.values()))
    widths = [int(shapes[name][axis]) for name, _ in pairs]
    return Components([p for p, _ in pairs], [b for _, b in pairs], widths, axis, expand)
