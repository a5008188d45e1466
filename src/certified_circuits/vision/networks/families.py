"""Where the circuit components of a torchvision classifier are: the ``layers: auto`` rules per family.

The components of a vision circuit are the channels at the outputs of a few modules (paper Sec. 4: the
block outputs of a ResNet, the MLP outputs of a ViT). For every torchvision family that is built of
blocks, :data:`FAMILIES` names those modules:

=====================  ============================  =============================================
family (net class)     torchvision models            modules whose outputs hold the components
=====================  ============================  =============================================
``ResNet``             resnet*, resnext*, wide_*     ``layer1`` .. ``layer4`` (stage outputs)
``RegNet``             regnet_x_*, regnet_y_*        ``trunk_output.block1`` .. ``block4``
``ConvNeXt``           convnext_*                    ``features.1``, ``.3``, ``.5``, ``.7`` (stages)
``EfficientNet``       efficientnet_b*, _v2_*        ``features.1`` .. ``features.{n-2}`` (MBConv stages)
``MobileNetV2``/``V3`` mobilenet_v2, _v3_*           ``features.1`` .. ``features.{n-2}`` (blocks)
``VisionTransformer``  vit_*                         ``encoder.layers.encoder_layer_{i}.mlp.3`` (the
                                                     paper's ViT vertices: each block's MLP output)
``SwinTransformer``    swin_t/s/b, swin_v2_*         ``features.1``, ``.3``, ``.5``, ``.7`` (stages)
=====================  ============================  =============================================

The stem, the downsampling layers between stages and the final 1x1 convolution are not components.
Any other model (DenseNet, VGG, your own ``nn.Module``) takes explicit module names.

Adding a family: one :class:`Family` entry here (tests/unit/vision/test_families.py checks each
entry against torchvision's module names). The channel axis is read from the modules' outputs
(:func:`certified_circuits.vision.networks.components.describe_components`), not written here.

This module imports torch only through the networks it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal


@dataclass(frozen=True)
class Family:
    """The automatic components of one torchvision family.

    Attributes:
        layers: ``net -> [(module path, block name)]``, in forward order.
        expand_at: where a batch of images becomes (masks x images) during multi-mask evaluation:
            ``"first_output"``, the output of the first component module (everything before it runs
            once per image; valid when the components are consecutive stages of one chain), or a
            ``(module path, "input" | "output")`` pair.
    """

    layers: Callable[[Any], list[tuple[str, str]]]
    expand_at: Literal["first_output"] | tuple[str, Literal["input", "output"]] = "first_output"


def _named(paths: list[str]) -> list[tuple[str, str]]:
    return [(p, p) for p in paths]


def _inner_features(net: Any) -> list[tuple[str, str]]:
    """``features.1`` .. ``features.{n-2}``: every block between the stem and the last 1x1 convolution."""
    return _named([f"features.{i}" for i in range(1, len(net.features) - 1)])


def _vit_mlps(net: Any) -> list[tuple[str, str]]:
    return [(f"encoder.layers.encoder_layer_{i}.mlp.3", f"block{i}_mlp_fc2") for i in range(len(net.encoder.layers))]


#: family (the network's class name) -> its automatic components
FAMILIES: dict[str, Family] = {
    "ResNet": Family(lambda net: _named([f"layer{i}" for i in range(1, 5)])),
    "RegNet": Family(lambda net: _named([f"trunk_output.{name}" for name, _ in net.trunk_output.named_children()])),
    "ConvNeXt": Family(lambda net: _named([f"features.{i}" for i in range(1, len(net.features), 2)])),
    "EfficientNet": Family(_inner_features),
    "MobileNetV2": Family(_inner_features),
    "MobileNetV3": Family(_inner_features),
    "VisionTransformer": Family(_vit_mlps, expand_at=("encoder.layers.encoder_layer_0", "input")),
    "SwinTransformer": Family(lambda net: _named([f"features.{i}" for i in range(1, len(net.features), 2)])),
}


def family_of(net: Any) -> Family | None:
    """The :class:`Family` of a network (by its class or a base class name), or None."""
    for cls in type(net).__mro__:
        if cls.__name__ in FAMILIES:
            return FAMILIES[cls.__name__]
    return None


def auto_layers(net: Any, model_name: str) -> tuple[list[tuple[str, str]], tuple[str, Literal["input", "output"]]]:
    """The automatic components of ``net`` and its expansion point.

    Args:
        net: a torchvision classifier.
        model_name: its name, for the error message.

    Returns:
        ``([(module path, block name)], (module path, "input" | "output"))``.

    Raises:
        ValueError: the family has no automatic components; the message lists candidate modules.
    """
    family = family_of(net)
    if family is None:
        children = [name for name, _ in net.named_children()]
        raise ValueError(
            f"{model_name} ({type(net).__name__}) has no automatic layers (families with blocks: "
            f"{', '.join(FAMILIES)}): list the module names whose outputs hold the components in "
            f"vision.folders.layers (--layers), e.g. modules under {children}"
        )
    layers = family.layers(net)
    expand = (layers[0][0], "output") if family.expand_at == "first_output" else family.expand_at
    return layers, expand
