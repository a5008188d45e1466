"""Weights files: a state dict read with tensors only (:func:`load_weights`, a whole pickled model named as such by
:func:`explain_weights_error`), checked against a network by key and shape before it loads
(:func:`check_state_dict`), and the embedded world model's checkpoint written by ``vision-train`` and read back
(:func:`save_world_model`, :func:`load_world_model`)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torchvision.models.resnet import ResNet

from certified_circuits.commands import COMMAND
from certified_circuits.vision.networks.models import VisionModel, resnet_model
from certified_circuits.vision.networks.world_resnet import WORLD_MEAN, WORLD_STD, world_resnet


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
    return resnet_model(net, "world_resnet", list(ck["class_names"]), int(ck["image_size"]), WORLD_MEAN, WORLD_STD, ck.get("meta", {}))
