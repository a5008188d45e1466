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

from certified_circuits.commands import COMMAND
from certified_circuits.vision.networks.architectures import ARCHITECTURES, WORLD_BLOCKS, WORLD_WIDTHS, Architecture, architecture

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


def explain_weights_error(exc: BaseException, path: Path | str | None) -> ValueError | None:
    """What a weights file that ``torch.load(weights_only=True)`` refused really holds, when it is a whole
    pickled model (``torch.save(model)``) rather than a truncated file: a ValueError that names the file, the
    class found and what to save instead; None for any other error (the caller keeps its own)."""
    import pickle
    import re

    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, pickle.UnpicklingError):
        cause = cause.__cause__ or cause.__context__
    found = re.search(r"GLOBAL ([\w.]+)", str(cause)) if cause is not None else None
    if found is None:
        return None
    return ValueError(
        f"{path}: holds a pickled Python object of class {found.group(1)} (a whole model saved with "
        f"torch.save(model)), not a state dict; the loader reads weights only: save them with "
        f"torch.save(model.state_dict(), PATH) and pass that file"
    )


def load_weights(path: Path) -> dict:
    """``torch.load`` of a weights file (tensors only). A whole pickled model (``torch.save(model)``) raises a
    ValueError naming the class found and what to save instead (:func:`explain_weights_error`); a truncated or
    corrupt file one naming the file."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as exc:
        explained = explain_weights_error(exc, path)
        if explained is not None:
            raise explained from exc
        raise ValueError(f"{path}: not a readable PyTorch weights file ({str(exc)[:200]}); it is truncated or "
                         f"corrupt: download or write it again") from exc


def load_world_model(path: Path) -> VisionModel:
    """Load a model written by ``vision-train``, in eval mode (its training-only ``channel_dropout`` is
    restored on the net for the record and is inactive in eval mode)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"world model checkpoint {path} does not exist; train it with "
                                f"`{COMMAND} vision-train --world WORLD_DIR --out-model {path} --out-metrics METRICS.json`")
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
    """torchvision ``arch`` (an entry of :data:`~certified_circuits.vision.networks.architectures.ARCHITECTURES`)
    with its circuit vertices: the ImageNet preset of :func:`build_classifier` (1,000 classes, the
    IMAGENET1K_V1 preprocessing, ``layers: auto``).

    pretrained=True loads IMAGENET1K_V1 weights from ``weights`` or the torch hub cache; pretrained=False
    keeps torchvision's random initialisation (tests). Nothing is ever downloaded."""
    entry = architecture(arch)
    wenum = _weights_enum(entry)
    path = None
    if pretrained:
        path = Path(weights) if weights else expected_weights_path(arch)
        if not path.is_file():
            raise FileNotFoundError(
                f"IMAGENET1K_V1 weights for {arch} not found at {path}. Download {wenum.url} on a machine with "
                f"internet (or run `python -c \"import torchvision; torchvision.models.{entry.builder}(weights='IMAGENET1K_V1')\"` "
                f"there) and copy the file to {expected_weights_path(arch)} or pass it with --weights PATH."
            )
    names = class_names or [str(i) for i in range(1000)]
    return build_classifier(entry.builder, names, weights=path, preprocessing=preprocessing_of(entry.builder, wenum),
                            display_name=arch)


# ----------------------------------------------------------------------------------------------
# any torchvision classifier (vision source "folders")
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preprocessing:
    """How a folder image becomes a model input: resize the short side to ``resize_size``, centre-crop
    ``image_size``, scale to [0, 1], normalise by ``mean`` and ``std`` (torchvision's
    ``ImageClassification`` transform)."""

    image_size: int
    resize_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


def classification_models() -> list[str]:
    """Every torchvision classification model name (``torchvision.models.list_models``)."""
    return sorted(tvm.list_models(module=tvm))


def check_model_name(name: str) -> str:
    """``name`` if torchvision builds a classifier of that name; ValueError naming close matches otherwise."""
    import difflib

    known = classification_models()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
        raise ValueError(f"{name!r} is not a torchvision classification model" + (f" (did you mean {close}?)" if close else "")
                         + f"; the {len(known)} names are those of torchvision.models.list_models()")
    return name


def preprocessing_of(model_name: str, weights_enum=None, image_size: int | None = None, resize_size: int | None = None,
                     mean: tuple[float, ...] | None = None, std: tuple[float, ...] | None = None) -> Preprocessing:
    """The preprocessing of a model: torchvision's transforms of its weights (``weights_enum``, default:
    the model's DEFAULT weights), each value replaced by the one given.

    A given ``image_size`` without ``resize_size`` keeps the weights' resize/crop ratio (224 -> 256 becomes
    32 -> 37). A model torchvision has no weights for needs ``image_size``, ``mean`` and ``std``.

    Returns:
        the :class:`Preprocessing`.

    Raises:
        ValueError: a value is missing and torchvision knows no weights of the model.
    """
    transforms = None
    try:
        transforms = (weights_enum or tvm.get_model_weights(model_name).DEFAULT).transforms()
    except (ValueError, KeyError, AttributeError):
        if image_size is None or mean is None or std is None:
            raise ValueError(f"torchvision knows no weights (hence no preprocessing) of {model_name}: set image_size, "
                             f"mean and std in vision.folders") from None
    crop = int(transforms.crop_size[0]) if transforms else int(image_size)  # type: ignore[arg-type]
    resize = int(transforms.resize_size[0]) if transforms else round(crop * 256 / 224)
    size = int(image_size or crop)
    return Preprocessing(
        image_size=size, resize_size=int(resize_size or (resize if size == crop else round(size * resize / crop))),
        mean=tuple(float(v) for v in (mean or transforms.mean)),  # type: ignore[union-attr,misc]
        std=tuple(float(v) for v in (std or transforms.std)),  # type: ignore[union-attr,misc]
    )


def build_network(model_name: str, n_classes: int, device: str = "cpu") -> nn.Module:
    """``torchvision.models.get_model(model_name, num_classes=n_classes)`` with random weights, in eval mode.

    ``device="meta"`` builds shapes without memory or compute (for checks before any job); a family whose
    constructor computes with tensors (RegNet) is built on the CPU and moved."""
    check_model_name(model_name)
    if device == "meta":
        try:
            with torch.device("meta"):
                return tvm.get_model(model_name, weights=None, num_classes=n_classes).eval()
        except (NotImplementedError, RuntimeError):
            return tvm.get_model(model_name, weights=None, num_classes=n_classes).to("meta").eval()
    return tvm.get_model(model_name, weights=None, num_classes=n_classes).eval()


def check_state_dict(net: nn.Module, state: dict, weights: Path | str, model_name: str, n_classes: int,
                     class_index: Path | str | None = None) -> None:
    """Raise ValueError unless ``state`` loads into ``net`` (checked by key and shape, no tensor is read).

    A head whose output count differs from the class count gets its own message: the class index must
    list the classes in logit order, one per output."""
    if not isinstance(state, dict):
        raise ValueError(f"{weights} does not hold a state dict (got {type(state).__name__}): save "
                         f"model.state_dict() with torch.save")
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    found = {k: tuple(getattr(v, "shape", ())) for k, v in state.items()}
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{weights} does not hold {model_name} weights: {len(missing)} keys missing (e.g. {missing[:3]}), "
                         f"{len(unexpected)} unexpected (e.g. {unexpected[:3]}); save the state_dict() of "
                         f"torchvision.models.{model_name}(num_classes=...)")
    for key in expected:
        if expected[key] != found[key]:
            file_classes, model_classes = found[key][0] if found[key] else None, expected[key][0]
            if model_classes == n_classes and file_classes is not None and file_classes != n_classes:
                raise ValueError(f"{weights}: the head {key} has {file_classes} outputs but the class index "
                                 f"{class_index or ''} lists {n_classes} classes; it must list the model's "
                                 f"{file_classes} classes, one a line in logit order")
            raise ValueError(f"{weights}: {key} is {list(found[key])} in the file but {list(expected[key])} in "
                             f"{model_name}: these are weights of another model or variant")


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


def build_classifier(model_name: str, class_names: list[str], weights: Path | str | None = None,
                     layers: str | list[str] = "auto", preprocessing: Preprocessing | None = None,
                     class_index: Path | str | None = None, display_name: str | None = None) -> VisionModel:
    """Any torchvision classifier with a user's weights, as a :class:`VisionModel`.

    Args:
        model_name: a ``torchvision.models.list_models()`` name (``convnext_tiny``).
        class_names: names in logit order; their number is the head's output count.
        weights: a state dict saved with ``torch.save(model.state_dict(), path)``; None keeps random weights.
        layers: ``"auto"`` or module names (:func:`describe_components`).
        preprocessing: default :func:`preprocessing_of` the model's torchvision weights.
        class_index: the class-index file, named in errors.
        display_name: the model's name in result files (default ``model_name``).

    Returns:
        the model in eval mode, on the CPU.

    Raises:
        ValueError: an unknown model, weights of another model, a head that does not match the class count,
            or a layer problem (see :func:`describe_components`).
    """
    net = build_network(model_name, len(class_names))
    if weights is not None:
        state = load_weights(Path(weights))
        check_state_dict(net, state, weights, model_name, len(class_names), class_index)
        net.load_state_dict(state)
    net.eval()
    prep = preprocessing or preprocessing_of(model_name)
    parts = describe_components(net, model_name, layers, prep.image_size)
    return VisionModel(net=net, arch=display_name or model_name, hook_names=parts.hook_names, block_names=parts.block_names,
                       widths=parts.widths, channel_dim=parts.channel_dim, expand_at=parts.expand_at,
                       class_names=list(class_names), image_size=prep.image_size, mean=prep.mean, std=prep.std,
                       resize_size=prep.resize_size)


def check_folders_model(model_name: str, weights: Path | str, class_names: list[str], layers: str | list[str] = "auto",
                        image_size: int | None = None, resize_size: int | None = None, mean=None, std=None,
                        class_index: Path | str | None = None) -> Components:
    """Check a user's model before any job, without computing: the name is a torchvision classifier, the
    weights file holds its state dict with a head of ``len(class_names)`` outputs, the layers exist and
    have a channel axis, the preprocessing is complete. The network is built on the meta device and the
    weights are read through a memory map (shapes only).

    Returns:
        the :class:`Components` the jobs will use.

    Raises:
        ValueError: naming the problem and the fix (see :func:`check_state_dict`, :func:`describe_components`).
    """
    net = build_network(model_name, len(class_names), device="meta")
    path = Path(weights)
    try:
        state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
    except Exception:  # not a zip-format file (mmap needs one): read it whole, with the same error as the jobs
        state = load_weights(path)
    check_state_dict(net, state, weights, model_name, len(class_names), class_index)
    prep = preprocessing_of(model_name, image_size=image_size, resize_size=resize_size,
                            mean=tuple(mean) if mean else None, std=tuple(std) if std else None)
    return describe_components(net, model_name, layers, prep.image_size)


def load_model(spec: str, checkpoint: Path | str | None = None, weights: Path | str | None = None,
               class_names: list[str] | None = None, layers: str | list[str] = "auto",
               preprocessing: Preprocessing | None = None, class_index: Path | str | None = None) -> VisionModel:
    """CLI entry: ``spec`` = ``"world"`` (needs ``checkpoint``), an ImageNet architecture of the paper
    (:func:`build_paper_model`: 1,000 classes, IMAGENET1K_V1 weights and preprocessing, automatic layers)
    or any torchvision classifier with the user's ``weights`` (:func:`build_classifier`). A paper
    architecture with another class count, explicit layers or a given preprocessing is a user's model
    (``class_index``: the file the names came from, named in errors)."""
    if spec == "world":
        if checkpoint is None:
            raise ValueError("--model world needs --checkpoint PATH (the file written by vision-train)")
        return load_world_model(Path(checkpoint))
    names = class_names or [str(i) for i in range(1000)]
    if spec in ARCHITECTURES and len(names) == 1000 and layers == "auto" and preprocessing is None:
        return build_paper_model(spec, weights=weights, pretrained=True, class_names=names)
    if weights is None:
        raise ValueError(f"--model {spec} needs --weights PATH: the state dict of your trained {spec} "
                         f"(torch.save(model.state_dict(), PATH))")
    if class_names is None:
        raise ValueError(f"--model {spec} needs --class-index FILE: the class names in logit order, one a line")
    return build_classifier(spec, names, weights=weights, layers=layers, preprocessing=preprocessing,
                            class_index=class_index)
