"""torchvision classifiers as :class:`~.models.VisionModel`: any classification model of torchvision with a user's
weights (the ``folders`` source: :func:`build_classifier`, checked before any job by :func:`check_folders_model`),
its preprocessing (:class:`Preprocessing`, :func:`preprocessing_of`), and the paper's ImageNet presets
(:func:`build_paper_model`: IMAGENET1K_V1 weights read from a given file or the local torch hub cache, never
downloaded; a missing file raises an error naming the expected path and how to obtain it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torchvision import models as tvm

from certified_circuits.vision.networks.architectures import Architecture, architecture
from certified_circuits.vision.networks.checkpoints import check_state_dict, load_weights
from certified_circuits.vision.networks.components import Components, describe_components
from certified_circuits.vision.networks.models import VisionModel


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
