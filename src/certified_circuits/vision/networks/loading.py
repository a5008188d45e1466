"""Loading a vision model (:func:`load_model`, the one dispatch of a ``--model`` value), once per process: the
network on its device and, for image folders, the class index that maps class folders to logits.

``certified-circuits batch`` runs several vision stages in one process; they share the model through
this cache, so the network is built and its weights read once. Every stage leaves the model as it found
it (hooks removed on exit, the network in eval mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from certified_circuits.vision.networks.architectures import ARCHITECTURES
from certified_circuits.vision.networks.checkpoints import load_world_model
from certified_circuits.vision.networks.classifiers import Preprocessing, build_classifier, build_paper_model
from certified_circuits.vision.networks.models import VisionModel

#: Models this process has loaded, by (model, checkpoint, weights, class index, device).
LOADED: dict[tuple[str, ...], tuple[Any, dict[str, int] | None]] = {}


def load_cached(model: str, checkpoint: Path | None, weights: Path | None, class_index: Path | None,
                device: Any, layers: str | list[str] = "auto", preprocessing: Any = None) -> tuple[Any, dict[str, int] | None, bool]:
    """The model on ``device`` and its class index (None for the world model), built once per process.

    Args:
        model: ``world``, an ImageNet architecture of :mod:`certified_circuits.vision.networks.architectures`, or
            any torchvision classifier (:func:`load_model`).
        checkpoint: the world model's checkpoint (``vision-train``).
        weights: a state dict (default for an ImageNet architecture: the torch hub cache).
        class_index: class names in logit order (:func:`certified_circuits.vision.data.folders.load_class_names`;
            a ``LOC_synset_mapping.txt`` for ImageNet).
        device: a torch device.
        layers: ``"auto"`` or the module names whose outputs hold the components.
        preprocessing: a :class:`~certified_circuits.vision.networks.classifiers.Preprocessing`, or None for the model's own.

    Returns:
        ``(VisionModel, {class name: logit} or None, reused)``; ``reused`` says it came from the cache.

    Raises:
        ValueError: a torchvision model without ``class_index``, or what the loader raises.
    """
    key = tuple(str(v) for v in (model, checkpoint, weights, class_index, device, layers, preprocessing))
    if key in LOADED:
        return (*LOADED[key], True)
    from certified_circuits.vision.data.folders import load_class_names

    names = load_class_names(class_index) if class_index else None
    if model != "world" and names is None:
        raise ValueError(f"--model {model} needs --class-index FILE (class names in logit order; "
                         f"LOC_synset_mapping.txt for ImageNet) to map class folders to logits")
    if names is not None and len(names) < 2:
        raise ValueError(f"class index {class_index} lists {len(names)} class: a classifier needs at least 2 classes "
                         f"(a concept is certified against the other classes); list every class of the model's head")
    network = load_model(model, checkpoint=checkpoint, weights=weights, class_names=names, layers=layers,
                         preprocessing=preprocessing, class_index=class_index)  # load_weights names a pickled model
    network.net.to(device)
    index = {name: i for i, name in enumerate(names)} if names else None
    LOADED[key] = (network, index)
    return network, index, False


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
