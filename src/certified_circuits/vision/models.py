"""Vision models and their circuit vertices (paper Sec. 4 "Datasets and architectures", App. A.1).

A :class:`VisionModel` bundles a torchvision network with its hook points, i.e. the modules whose
outputs carry the circuit vertices:

- ResNets (the embedded world model, ResNet-50, ResNet-101): the channels at the outputs of
  ``layer1..layer4`` (ResNet-50/101: 256 + 512 + 1024 + 2048 = 3,840 vertices);
- ViT-B/16: the 768 channels of ``encoder.layers[i].mlp[3]`` (the MLP's second linear layer, before
  dropout and the residual add) for the 12 blocks: 9,216 vertices; tokens are not separate vertices.

Pretrained IMAGENET1K_V1 weights are read from a given file or the local torch hub cache (never
downloaded); a missing file raises an error naming the expected path and how to obtain it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from torch import nn
from torchvision import models as tvm
from torchvision.models.resnet import BasicBlock, ResNet

from certified_circuits.vision.architectures import Architecture, architecture

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
WORLD_MEAN = (0.5, 0.5, 0.5)
WORLD_STD = (0.25, 0.25, 0.25)



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


# ----------------------------------------------------------------------------------------------
# embedded world model: a real torchvision ResNet with a 32 px stem and small widths
# ----------------------------------------------------------------------------------------------

CHANNEL_DROPOUT_MODES = ("mask", "dropout2d")


class WorldResNet(ResNet):
    """torchvision ``ResNet`` with optional structured channel dropout at the block outputs.

    With ``channel_dropout`` = P > 0 the outputs of ``layer1..layer4`` (the circuit vertices) lose whole
    channels in training mode only, so that the network learns to classify from sub-sets of each
    block's channels -- the operation the sufficiency test applies at evaluation:

    - ``mask`` (default): per image and block a drop rate r ~ U(0, P) is drawn and every channel is
      zeroed with probability r; kept channels are *not* rescaled, exactly as in zero ablation;
    - ``dropout2d``: ``torch.nn.functional.dropout2d`` with probability P (kept channels scaled by
      1 / (1 - P)).

    In eval mode the forward pass is exactly torchvision's, and the hook points are unchanged."""

    channel_dropout: float = 0.0
    channel_dropout_mode: str = "mask"

    def set_channel_dropout(self, p: float, mode: str = "mask") -> None:
        p = float(p)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"channel_dropout must be in [0, 1), got {p}")
        if mode not in CHANNEL_DROPOUT_MODES:
            raise ValueError(f"channel_dropout_mode must be one of {CHANNEL_DROPOUT_MODES}, got {mode!r}")
        self.channel_dropout, self.channel_dropout_mode = p, mode

    def drop_channels(self, x: torch.Tensor) -> torch.Tensor:
        """The training-time channel dropout of one block output [B, C, H, W] (identity in eval mode)."""
        p = self.channel_dropout
        if not self.training or p <= 0:
            return x
        if self.channel_dropout_mode == "dropout2d":
            return nn.functional.dropout2d(x, p, training=True)
        rate = torch.rand(x.shape[0], 1, device=x.device) * p
        keep = (torch.rand(x.shape[0], x.shape[1], device=x.device) >= rate).to(x.dtype)
        return x * keep[:, :, None, None]

    def _forward_impl(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = self.drop_channels(layer(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def world_resnet(n_classes: int, widths: tuple[int, ...] = (16, 32, 64, 128), blocks: tuple[int, ...] = (1, 1, 1, 1),
                 stem_stride: int = 2, channel_dropout: float = 0.0, channel_dropout_mode: str = "mask") -> WorldResNet:
    """A torchvision ``ResNet`` (BasicBlock) for small images: 3x3 stem (stride ``stem_stride``), no max-pool,
    stages of the given widths (strides 1, 2, 2, 2). Same ``layer1..layer4`` hook points as ResNet-50.

    ``channel_dropout`` / ``channel_dropout_mode``: training-time channel dropout at every block output
    (see :class:`WorldResNet`); 0 gives torchvision's forward pass in both modes."""
    if len(widths) != 4 or len(blocks) != 4:
        raise ValueError(f"world_resnet needs 4 widths and 4 block counts, got {widths}, {blocks}")
    net = WorldResNet(BasicBlock, [1, 1, 1, 1], num_classes=n_classes)
    net.set_channel_dropout(channel_dropout, channel_dropout_mode)
    net.inplanes = widths[0]
    net.conv1 = nn.Conv2d(3, widths[0], kernel_size=3, stride=stem_stride, padding=1, bias=False)
    net.bn1 = nn.BatchNorm2d(widths[0])
    net.maxpool = nn.Identity()
    net.layer1 = net._make_layer(BasicBlock, widths[0], blocks[0])
    net.layer2 = net._make_layer(BasicBlock, widths[1], blocks[1], stride=2)
    net.layer3 = net._make_layer(BasicBlock, widths[2], blocks[2], stride=2)
    net.layer4 = net._make_layer(BasicBlock, widths[3], blocks[3], stride=2)
    net.fc = nn.Linear(widths[3], n_classes)
    for m in net.modules():  # same init as torchvision's ResNet.__init__
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)
    return net


def _resnet_model(net: nn.Module, arch: str, class_names: list[str], image_size: int, mean, std, meta=None) -> VisionModel:
    widths = [net.get_submodule(f"layer{i}")[-1].conv2.out_channels if isinstance(net.get_submodule(f"layer{i}")[-1], BasicBlock)
              else net.get_submodule(f"layer{i}")[-1].conv3.out_channels for i in range(1, 5)]
    return VisionModel(
        net=net, arch=arch, hook_names=[f"layer{i}" for i in range(1, 5)], block_names=[f"layer{i}" for i in range(1, 5)],
        widths=widths, channel_dim=1, expand_at=("layer1", "output"), class_names=class_names,
        image_size=image_size, mean=mean, std=std, meta=meta or {},
    )


def save_world_model(path: Path, net: ResNet, class_names: list[str], widths, blocks, image_size: int, meta: dict) -> Path:
    """Save the trained world model (state dict + architecture) atomically."""
    from certified_circuits.storage.atomic import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save({"state_dict": net.state_dict(), "class_names": list(class_names), "widths": list(widths),
                    "blocks": list(blocks), "stem_stride": int(net.conv1.stride[0]), "image_size": int(image_size),
                    "channel_dropout": float(getattr(net, "channel_dropout", 0.0)),
                    "channel_dropout_mode": str(getattr(net, "channel_dropout_mode", "mask")), "meta": meta}, tmp)
    return path


def load_weights(path: Path) -> dict:
    """``torch.load`` of a weights file (tensors only); a truncated or corrupt file raises ValueError naming it."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable PyTorch weights file ({str(exc)[:200]}); it is truncated or "
                         f"corrupt: download or write it again") from exc


def load_world_model(path: Path) -> VisionModel:
    """Load a model written by ``vision-train``, in eval mode (its training-only ``channel_dropout`` is
    restored on the net for the record and is inactive in eval mode)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"world model checkpoint {path} does not exist; train it with "
                                f"`certified-circuits vision-train --world WORLD_DIR --out-model {path}`")
    ck = load_weights(path)
    if not isinstance(ck, dict) or "state_dict" not in ck or "widths" not in ck:
        raise ValueError(f"{path} is not a world model checkpoint written by vision-train")
    # channel_dropout is a training-only setting (absent from checkpoints written before it existed)
    net = world_resnet(len(ck["class_names"]), tuple(ck["widths"]), tuple(ck["blocks"]), int(ck.get("stem_stride", 2)),
                       float(ck.get("channel_dropout", 0.0)), str(ck.get("channel_dropout_mode", "mask")))
    net.load_state_dict(ck["state_dict"])
    net.eval()
    return _resnet_model(net, "world_resnet", list(ck["class_names"]), int(ck["image_size"]), WORLD_MEAN, WORLD_STD, ck.get("meta", {}))


def world_model_from_net(net: ResNet, class_names: list[str], image_size: int) -> VisionModel:
    return _resnet_model(net, "world_resnet", list(class_names), image_size, WORLD_MEAN, WORLD_STD)


# ----------------------------------------------------------------------------------------------
# paper-scale torchvision models
# ----------------------------------------------------------------------------------------------

def _weights_enum(arch: Architecture):
    """The torchvision weights enum member named by the table (``ResNet50_Weights.IMAGENET1K_V1``)."""
    enum_name, member = arch.weights.split(".")
    return getattr(getattr(tvm, enum_name), member)


def expected_weights_path(arch: str) -> Path:
    """Where torchvision caches IMAGENET1K_V1 weights of ``arch`` (``$TORCH_HOME/hub/checkpoints``)."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(_weights_enum(architecture(arch)).url)


def build_paper_model(arch: str, weights: Path | str | None = None, pretrained: bool = True,
                      class_names: list[str] | None = None) -> VisionModel:
    """torchvision ``arch`` (an entry of :data:`~certified_circuits.vision.architectures.ARCHITECTURES`)
    with its circuit vertices.

    pretrained=True loads IMAGENET1K_V1 weights from ``weights`` or the torch hub cache; pretrained=False
    keeps torchvision's random initialisation (tests). Nothing is ever downloaded."""
    entry = architecture(arch)
    wenum = _weights_enum(entry)
    net = getattr(tvm, entry.builder)(weights=None)
    if pretrained:
        path = Path(weights) if weights else expected_weights_path(arch)
        if not path.is_file():
            raise FileNotFoundError(
                f"IMAGENET1K_V1 weights for {arch} not found at {path}. Download {wenum.url} on a machine with "
                f"internet (or run `python -c \"import torchvision; torchvision.models.{entry.builder}(weights='IMAGENET1K_V1')\"` "
                f"there) and copy the file to {expected_weights_path(arch)} or pass it with --weights PATH."
            )
        state = load_weights(path)
        try:
            net.load_state_dict(state)
        except (RuntimeError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path} does not hold {arch} weights ({str(exc)[:200]}); pass the IMAGENET1K_V1 file "
                             f"of {arch} with --weights") from exc
    net.eval()
    names = class_names or [str(i) for i in range(1000)]
    if entry.layout == "vit":
        return _vit_model(net, arch, names)
    return _resnet_model(net, arch, names, 224, IMAGENET_MEAN, IMAGENET_STD)


def _vit_model(net: nn.Module, arch: str, class_names: list[str]) -> VisionModel:
    """A torchvision VisionTransformer: the vertices are the outputs of every block's MLP (tokens last)."""
    n_layers = len(net.encoder.layers)
    hooks = [f"encoder.layers.encoder_layer_{i}.mlp.3" for i in range(n_layers)]
    widths = [net.get_submodule(h).out_features for h in hooks]
    return VisionModel(
        net=net, arch=arch, hook_names=hooks, block_names=[f"block{i}_mlp_fc2" for i in range(n_layers)],
        widths=widths, channel_dim=-1, expand_at=("encoder.layers.encoder_layer_0", "input"),
        class_names=class_names, image_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD,
    )


def load_model(spec: str, checkpoint: Path | str | None = None, weights: Path | str | None = None,
               class_names: list[str] | None = None) -> VisionModel:
    """CLI entry: ``spec`` = "world" (needs ``checkpoint``) or a paper-scale architecture."""
    if spec == "world":
        if checkpoint is None:
            raise ValueError("--model world needs --checkpoint PATH (the file written by vision-train)")
        return load_world_model(Path(checkpoint))
    return build_paper_model(spec, weights=weights, pretrained=True, class_names=class_names)
