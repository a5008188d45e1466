"""Loading a vision model once per process: the network on its device and, for ImageNet folders, the
wnid index that maps class folders to logits.

``certified-circuits batch`` runs several vision stages in one process; they share the model through
this cache, so the network is built and its weights read once. Every stage leaves the model as it found
it (hooks removed on exit, the network in eval mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Models this process has loaded, by (model, checkpoint, weights, class index, device).
LOADED: dict[tuple[str, ...], tuple[Any, dict[str, int] | None]] = {}


def load_cached(model: str, checkpoint: Path | None, weights: Path | None, class_index: Path | None,
                device: Any) -> tuple[Any, dict[str, int] | None, bool]:
    """The model on ``device`` and its wnid index (None for the world model), built once per process.

    Args:
        model: ``world`` or an architecture of :mod:`certified_circuits.vision.architectures`.
        checkpoint: the world model's checkpoint (``vision-train``).
        weights: an IMAGENET1K_V1 weights file (default: the torch hub cache).
        class_index: ``LOC_synset_mapping.txt`` (needed by every ImageNet architecture).
        device: a torch device.

    Returns:
        ``(VisionModel, wnid index or None, reused)``; ``reused`` says it came from the cache.

    Raises:
        ValueError: an ImageNet architecture without ``class_index``, or what the loader raises.
    """
    key = tuple(str(v) for v in (model, checkpoint, weights, class_index, device))
    if key in LOADED:
        return (*LOADED[key], True)
    from certified_circuits.vision.imagenet import class_names_from_index, load_wnid_index
    from certified_circuits.vision.models import load_model

    index = load_wnid_index(class_index) if class_index else None
    if model != "world" and index is None:
        raise ValueError(f"--model {model} needs --class-index LOC_synset_mapping.txt to map wnid folders to classes")
    names = class_names_from_index(index) if index else None
    network = load_model(model, checkpoint=checkpoint, weights=weights, class_names=names)
    network.net.to(device)
    LOADED[key] = (network, index)
    return network, index, False
