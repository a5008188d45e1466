"""Vision models and their circuit vertices (paper Sec. 4 "Datasets and architectures", App. A.1).

A :class:`VisionModel` bundles a torchvision network with its hook points, i.e. the modules whose
outputs carry the circuit vertices:

- ResNets (the embedded world model, ResNet-50, ResNet-101): the channels at the outputs of
  ``layer1..layer4`` (ResNet-50/101: 256 + 512 + 1024 + 2048 = 3,840 vertices; :func:`resnet_model`);
- ViT-B/16: the 768 channels of ``encoder.layers[i].mlp[3]`` (the MLP's second linear layer, before
  dropout and the residual add) for the 12 blocks: 9,216 vertices; tokens are not separate vertices.

The networks are built elsewhere, one module a job: the embedded world's ResNet in :mod:`.world_resnet`, its
checkpoint and any weights file in :mod:`.checkpoints`, the torchvision classifiers and their preprocessing in
:mod:`.classifiers`, where a network's components are in :mod:`.components`, and the CLI's one loader
(``load_model``) in :mod:`.loading`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

# vision/train.py imports world_resnet from here (its owner is .world_resnet)
from certified_circuits.vision.networks.world_resnet import WORLD_MEAN, WORLD_STD, world_resnet  # noqa: F401


@dataclass
class VisionModel:
    """A network plus the description of its circuit vertices.

    hook_names: module paths (``net.get_submodule``) whose outputs hold the vertices, one per block;
    widths: channels per block; channel_dim: 1 for CNN feature maps [B, C, H, W], -1 for ViT tokens
    [B, T, D]; expand_at: (module path, "input" | "output"), the point where a batch of images is
    expanded to (masks x images) during multi-mask evaluation (everything before it is shared).
    """

    net: nn.Module
    arch: str
    hook_names: list[str]
    block_names: list[str]
    widths: list[int]
    channel_dim: int
    expand_at: tuple[str, Literal["input", "output"]]
    class_names: list[str]
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    meta: dict = field(default_factory=dict)
    #: folder images: short side resized to this before the centre crop (None: image_size * 256 / 224)
    resize_size: int | None = None

    @property
    def device(self) -> torch.device:
        p = next(self.net.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    @property
    def n_vertices(self) -> int:
        return int(sum(self.widths))

    def groups(self) -> "torch.Tensor":
        """Block index of every vertex (int32 [U]): the top-K groups of the vision base algorithm."""
        return torch.repeat_interleave(torch.arange(len(self.widths), dtype=torch.int32), torch.tensor(self.widths))

    def vertex_names(self) -> list[str]:
        return [f"{b}.{i}" for b, w in zip(self.block_names, self.widths) for i in range(w)]

    def normalize(self, images_uint8: torch.Tensor) -> torch.Tensor:
        """uint8 [N, H, W, 3] (or float [N, 3, H, W] in [0, 1]) -> normalised float [N, 3, H, W]."""
        x = images_uint8
        if x.dtype == torch.uint8:
            x = x.permute(0, 3, 1, 2).float().div_(255.0)
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        return (x - mean) / std


def resnet_model(net: nn.Module, arch: str, class_names: list[str], image_size: int, mean, std, meta=None) -> VisionModel:
    """The :class:`VisionModel` of a torchvision ResNet: its components are the outputs of ``layer1..layer4``."""
    widths = [net.get_submodule(f"layer{i}")[-1].conv2.out_channels if isinstance(net.get_submodule(f"layer{i}")[-1], BasicBlock)
              else net.get_submodule(f"layer{i}")[-1].conv3.out_channels for i in range(1, 5)]
    return VisionModel(
        net=net, arch=arch, hook_names=[f"layer{i}" for i in range(1, 5)], block_names=[f"layer{i}" for i in range(1, 5)],
        widths=widths, channel_dim=1, expand_at=("layer1", "output"), class_names=class_names,
        image_size=image_size, mean=mean, std=std, meta=meta or {},
    )


def world_model_from_net(net: ResNet, class_names: list[str], image_size: int) -> VisionModel:
    """The :class:`VisionModel` of a world ResNet (:func:`~.world_resnet.world_resnet`) with the world's normalisation."""
    return resnet_model(net, "world_resnet", list(class_names), image_size, WORLD_MEAN, WORLD_STD)
