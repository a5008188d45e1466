"""The ImageNet architectures of the paper's preset (``vision.source: imagenet``): one table, and the only
place to add one.

Adding an architecture: one :class:`Architecture` entry in :data:`ARCHITECTURES`. The config check of
``vision.imagenet.model``, the ``--model`` help and the preset builder
(:func:`certified_circuits.vision.networks.classifiers.build_paper_model`) read this table. Where the components are
is the family's (:mod:`certified_circuits.vision.networks.families`); any other torchvision classifier runs
through the ``folders`` source.

This module imports neither torch nor torchvision, so the config check can use it at parse time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Architecture:
    """One ImageNet classifier of torchvision with its pretrained weights.

    Attributes:
        name: the name in configs and on the command line.
        builder: the ``torchvision.models`` function that builds it.
        weights: the ``torchvision.models`` weights enum member of its IMAGENET1K_V1 weights
            (``"ResNet50_Weights.IMAGENET1K_V1"``): the hub cache's file name and the preprocessing.
        n_components: its vertices with ``layers: auto`` (the family's component modules), known without
            building it so the workflow's plan check runs at parse time (a test builds each and compares).
    """

    name: str
    builder: str
    weights: str
    n_components: int


#: every paper-scale architecture, by name (the embedded world's ResNet is ``world``, built by vision-train)
ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("resnet50", "resnet50", "ResNet50_Weights.IMAGENET1K_V1", 256 + 512 + 1024 + 2048),
        Architecture("resnet101", "resnet101", "ResNet101_Weights.IMAGENET1K_V1", 256 + 512 + 1024 + 2048),
        Architecture("vit_b_16", "vit_b_16", "ViT_B_16_Weights.IMAGENET1K_V1", 12 * 768),
    )
}

#: the embedded world ResNet's default stage widths and blocks (``vision-train``; its channels are the components)
WORLD_WIDTHS: tuple[int, int, int, int] = (16, 32, 64, 128)
WORLD_BLOCKS: tuple[int, int, int, int] = (1, 1, 1, 1)

#: names of the paper-scale architectures (config ``vision.imagenet.model``)
ARCHITECTURE_NAMES: tuple[str, ...] = tuple(ARCHITECTURES)

#: ``--model`` names that need no weights file: the embedded world model and every architecture above
MODEL_CHOICES: tuple[str, ...] = ("world", *ARCHITECTURE_NAMES)


def architecture(name: str) -> Architecture:
    """The table entry of ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown vision architecture {name!r}: choose one of {list(ARCHITECTURE_NAMES)} "
                         "(add one in certified_circuits/vision/networks/architectures.py)")
    return ARCHITECTURES[name]
