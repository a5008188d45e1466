"""Uniform access to evaluation / concept images: concept-world ``.npz`` splits or wnid folders.

An :class:`ImageSet` exposes labels, example ids and ``load(indices, model)`` returning a normalised
float batch for that model, so attribution and evaluation code is the same at both scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from certified_circuits.vision.images import read_rgb, resize_crop
from certified_circuits.vision.imagenet import list_class_images, list_classes
from certified_circuits.vision.models import VisionModel
from certified_circuits.vision.world import load_split


@dataclass
class ImageSet:
    """Images of one eval set: ``labels`` int64 [N], ``ids`` [N], and a loader for index arrays."""

    labels: np.ndarray
    ids: np.ndarray
    loader: Callable[[np.ndarray, VisionModel], torch.Tensor]
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    def load(self, idx: np.ndarray, model: VisionModel) -> torch.Tensor:
        return self.loader(np.asarray(idx, dtype=np.int64), model)


def npz_set(path: Path | str) -> ImageSet:
    data = load_split(Path(path))
    images = data["images"]

    def loader(idx: np.ndarray, model: VisionModel) -> torch.Tensor:
        if images.shape[1] != model.image_size:
            raise ValueError(f"{path}: images are {images.shape[1]} px but the model expects {model.image_size} px")
        return model.normalize(torch.from_numpy(np.ascontiguousarray(images[idx])))

    labels = data["labels"].astype(np.int64)
    return ImageSet(labels=labels, ids=data["ids"].astype(str), loader=loader, source=str(path))


def folder_set(root: Path | str, wnid_index: dict[str, int], wnids: list[str] | None = None,
               limit_per_class: int | None = None, min_images: int = 1) -> ImageSet:
    """ImageFolder-style tree ROOT/<wnid>/<image>; labels are ImageNet-1k indices via ``wnid_index``.
    Images are resized (256) and centre-cropped to the model's size unless they already have it."""
    wnids = wnids if wnids is not None else list_classes(root)
    files, labels = [], []
    for w in wnids:
        if w not in wnid_index:
            raise ValueError(f"class folder {w} under {root} is not in the wnid mapping (not an ImageNet-1k class)")
        fs = list_class_images(root, w, min_images=min_images, limit=limit_per_class)
        files += fs
        labels += [wnid_index[w]] * len(fs)

    def loader(idx: np.ndarray, model: VisionModel) -> torch.Tensor:

        arrs = []
        for i in idx:
            img = read_rgb(files[i])
            if img.size != (model.image_size, model.image_size):
                img = resize_crop(img, round(model.image_size * 256 / 224), model.image_size)
            arrs.append(np.asarray(img, dtype=np.uint8))
        return model.normalize(torch.from_numpy(np.stack(arrs)))

    ids = np.array([f"{f.parent.name}/{f.name}" for f in files])
    return ImageSet(labels=np.asarray(labels, dtype=np.int64), ids=ids, loader=loader, source=str(root))


def open_set(path: Path | str, wnid_index: dict[str, int] | None = None, wnids: list[str] | None = None,
             limit_per_class: int | None = None) -> ImageSet:
    """A ``.npz`` world split or a wnid folder tree (which needs ``wnid_index``)."""
    p = Path(path)
    if p.suffix == ".npz":
        return npz_set(p)
    if p.is_dir():
        if wnid_index is None:
            raise ValueError(f"{p} is an image folder: pass the wnid mapping (--class-index LOC_synset_mapping.txt)")
        return folder_set(p, wnid_index, wnids, limit_per_class)
    raise FileNotFoundError(f"eval/concept data {p} not found: give a concept-world .npz split or a ROOT/<wnid>/ folder")
