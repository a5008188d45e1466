"""The embedded world's network: a real torchvision ResNet (BasicBlock) with a 32 px stem and small widths
(:func:`world_resnet`), optional training-time channel dropout at its block outputs (:class:`WorldResNet`), and the
world's normalisation (:data:`WORLD_MEAN`, :data:`WORLD_STD`). Its :class:`~.models.VisionModel` is
:func:`~.models.world_model_from_net`; its checkpoint is written and read by :mod:`.checkpoints`."""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

from certified_circuits.vision.networks.architectures import WORLD_BLOCKS, WORLD_WIDTHS


WORLD_MEAN = (0.5, 0.5, 0.5)
WORLD_STD = (0.25, 0.25, 0.25)
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


def world_resnet(n_classes: int, widths: tuple[int, ...] = WORLD_WIDTHS, blocks: tuple[int, ...] = WORLD_BLOCKS,
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
