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

from certified_circuits.vision.data.images import read_rgb, resize_crop
from certified_circuits.vision.data.folders import check_folders_in_index, list_class_images
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.data.world import load_split


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


def folder_set(root: Path | str, class_index: dict[str, int], names: list[str] | None = None,
               limit_per_class: int | None = None, min_images: int = 1) -> ImageSet:
    """Image-folder tree ROOT/<class>/<image> (:mod:`certified_circuits.vision.data.folders`); labels are the
    logits of the folder names in ``class_index`` (name -> logit; ImageNet: wnid -> 1k index).

    Images are resized (short side to the model's ``resize_size``, default ``image_size * 256 / 224``)
    and centre-cropped to ``image_size`` unless they already have it.

    Args:
        root: the tree.
        class_index: class name -> logit.
        names: the classes to read (default: every folder, each of which must be in ``class_index``).
        limit_per_class: first N images of each class (sorted by file name).
        min_images: fewer images in a named class folder is an error.
    """
    if names is None:
        names = check_folders_in_index(root, class_index, "given with --class-index", "image folder")
    files, labels = [], []
    for name in names:
        if name not in class_index:
            raise ValueError(f"class folder {name} under {root} is not in the class index: add it in logit order or "
                             f"remove the folder")
        fs = list_class_images(root, name, min_images=min_images, limit=limit_per_class)
        files += fs
        labels += [class_index[name]] * len(fs)

    def loader(idx: np.ndarray, model: VisionModel) -> torch.Tensor:
        resize = model.resize_size or round(model.image_size * 256 / 224)
        arrs = []
        for i in idx:
            img = read_rgb(files[i])
            if img.size != (model.image_size, model.image_size):
                img = resize_crop(img, resize, model.image_size)
            arrs.append(np.asarray(img, dtype=np.uint8))
        return model.normalize(torch.from_numpy(np.stack(arrs)))

    ids = np.array([f"{f.parent.name}/{f.name}" for f in files])
    return ImageSet(labels=np.asarray(labels, dtype=np.int64), ids=ids, loader=loader, source=str(root))


def open_set(path: Path | str, class_index: dict[str, int] | None = None, names: list[str] | None = None,
             limit_per_class: int | None = None) -> ImageSet:
    """A ``.npz`` world split or a class-folder tree (which needs ``class_index``: name -> logit)."""
    p = Path(path)
    if p.suffix == ".npz":
        return npz_set(p)
    if p.is_dir():
        if class_index is None:
            raise ValueError(f"{p} is an image folder: pass the class index (--class-index FILE)")
        return folder_set(p, class_index, names, limit_per_class)
    raise FileNotFoundError(f"eval/concept data {p} not found: give a concept-world .npz split or a ROOT/<class>/ folder")
