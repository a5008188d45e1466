"""The vision architectures the product certifies: one table, and the only place to add one.

Adding an architecture: one :class:`Architecture` entry in :data:`ARCHITECTURES`. The ``--model`` choices
of the vision stages (:data:`MODEL_CHOICES`), the config check of ``vision.imagenet.model`` and the model
builder (:func:`certified_circuits.vision.models.build_paper_model`) all read this table.

This module imports neither torch nor torchvision, so the config check can use it at parse time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Architecture:
    """One torchvision classifier and where its circuit vertices are.

    Attributes:
        name: the name in configs and on the command line.
        builder: the ``torchvision.models`` function that builds it.
        weights: the ``torchvision.models`` weights enum member of its IMAGENET1K_V1 weights
            (``"ResNet50_Weights.IMAGENET1K_V1"``): the file name the torch hub cache uses.
        layout: where the vertices are. ``resnet``: the channels at the outputs of ``layer1..layer4``
            (feature maps ``[B, C, H, W]``, channel axis 1); ``vit``: the outputs of every encoder block's
            MLP (``encoder.layers.encoder_layer_{i}.mlp.3``, tokens ``[B, T, D]``, channel axis -1).
    """

    name: str
    builder: str
    weights: str
    layout: Literal["resnet", "vit"]


#: every paper-scale architecture, by name (the embedded world's ResNet is ``world``, built by vision-train)
ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("resnet50", "resnet50", "ResNet50_Weights.IMAGENET1K_V1", "resnet"),
        Architecture("resnet101", "resnet101", "ResNet101_Weights.IMAGENET1K_V1", "resnet"),
        Architecture("vit_b_16", "vit_b_16", "ViT_B_16_Weights.IMAGENET1K_V1", "vit"),
    )
}

#: names of the paper-scale architectures (config ``vision.imagenet.model``)
ARCHITECTURE_NAMES: tuple[str, ...] = tuple(ARCHITECTURES)

#: ``--model`` choices of the vision stages: the embedded world model and every architecture above
MODEL_CHOICES: tuple[str, ...] = ("world", *ARCHITECTURE_NAMES)


def architecture(name: str) -> Architecture:
    """The table entry of ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown vision architecture {name!r}: choose one of {list(ARCHITECTURE_NAMES)} "
                         "(add one in certified_circuits/vision/architectures.py)")
    return ARCHITECTURES[name]
