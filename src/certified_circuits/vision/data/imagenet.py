"""Paper-scale image data: ImageNet val, ImageNet-A, ImageNet-O, ImageNet-C, OOD-CV (paper App. A.1).

All sets are read as ImageFolder-style trees with one folder per WordNet id (wnid)::

    ROOT/<wnid>/<image>.{JPEG,jpg,png}

- ImageNet val: the official validation images sorted into wnid folders (e.g. with the common
  ``valprep.sh``); the class index of a wnid comes from ``LOC_synset_mapping.txt`` (the Kaggle
  ImageNet release: 1,000 lines "n01440764 tench, Tinca tinca" in index order), found in the
  ImageNet root or passed explicitly; no mapping is shipped or downloaded.
- ImageNet-A / ImageNet-O: the official archives already use this layout (200 wnid folders each);
  labels are mapped to the 1k indices through the same wnid mapping.
- ImageNet-C: ``ROOT/defocus_blur/<severity>/<wnid>/``; when absent, :func:`generate_imagenet_c`
  writes it from ImageNet val with the reimplemented defocus blur (resize 256, centre crop 224 as
  the official generation script, then blur, PNG).
- OOD-CV: :func:`prepare_oodcv` copies a category-per-folder OOD-CV export into wnid folders given an
  explicit category -> wnid table (the paper evaluates the 6 classes OOD-CV shares with ImageNet).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from certified_circuits.storage.atomic import atomic_dir, write_json
from certified_circuits.vision.data.folders import IMAGE_SUFFIXES, DatasetLayoutError, list_class_images
from certified_circuits.vision.data.images import read_rgb, resize_crop

SYNSET_FILE = "LOC_synset_mapping.txt"


def load_wnid_index(path: Path | str) -> dict[str, int]:
    """wnid -> ImageNet-1k class index from a ``LOC_synset_mapping.txt``-style file (or a folder holding
    one). Line i is "<wnid> <names...>" for class i."""
    p = Path(path)
    if p.is_dir():
        p = p / SYNSET_FILE
    if not p.is_file():
        raise DatasetLayoutError(
            f"WordNet-id mapping {p} not found. It ships with the Kaggle ImageNet release as {SYNSET_FILE} "
            f"(1,000 lines 'n01440764 tench, Tinca tinca' in class-index order); put it in the ImageNet root "
            f"or pass its path with --class-index."
        )
    wnids = []
    for line in p.read_text().splitlines():
        line = line.strip()
        if line:
            wnids.append(line.split()[0])
    if len(set(wnids)) != len(wnids) or not all(w.startswith("n") and w[1:].isdigit() for w in wnids):
        raise DatasetLayoutError(f"{p} is not a wnid mapping: expected one unique 'nXXXXXXXX ...' entry per line")
    return {w: i for i, w in enumerate(wnids)}


def list_classes(root: Path | str) -> list[str]:
    """wnid folders under ``root`` (sorted); error when there are none."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetLayoutError(f"dataset root {root} does not exist (expected ROOT/<wnid>/<image> folders)")
    wnids = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("n") and p.name[1:].isdigit())
    if not wnids:
        raise DatasetLayoutError(f"{root} has no WordNet-id folders (nXXXXXXXX/); expected ROOT/<wnid>/<image>")
    return wnids


def select_classes(wnids: Sequence[str], n: int = 100, seed: int = 0) -> list[str]:
    """The paper's class selection: ``n`` classes drawn uniformly without replacement by seed
    (returned in sorted order)."""
    wnids = sorted(wnids)
    if n > len(wnids):
        raise ValueError(f"cannot select {n} classes from {len(wnids)} available")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 100]))
    return sorted(np.asarray(wnids)[rng.choice(len(wnids), size=n, replace=False)].tolist())


def imagenet_c_dir(root: Path | str, severity: int = 2, corruption: str = "defocus_blur") -> Path:
    return Path(root) / corruption / str(severity)


def generate_imagenet_c(val_root: Path | str, out_root: Path | str, wnids: Sequence[str], severity: int = 2,
                        progress: bool = True) -> Path:
    """Write ``out_root/defocus_blur/<severity>/<wnid>/*.png`` from ImageNet val (resize 256, centre
    crop 224, defocus blur with the ImageNet-C parameters). Existing class folders are kept."""
    from PIL import Image
    from tqdm import tqdm

    from certified_circuits.vision.data.corruption import defocus_blur

    out = imagenet_c_dir(out_root, severity)
    for wnid in tqdm(list(wnids), desc="imagenet-c", disable=not progress):
        dst = out / wnid
        if dst.is_dir():
            continue
        files = list_class_images(val_root, wnid)
        with atomic_dir(dst) as tmp:
            for f in files:
                img = np.asarray(resize_crop(read_rgb(f), 256, 224))
                Image.fromarray(defocus_blur(img, severity, scale="imagenet")).save(tmp / (f.stem + ".png"))
    return out


def prepare_oodcv(src_root: Path | str, out_root: Path | str, category_to_wnid: Mapping[str, str]) -> Path:
    """Copy an OOD-CV export laid out as ``SRC/<category>/<image>`` (e.g. the nuisance splits merged
    per category) into ``OUT/<wnid>/<image>`` using an explicit category -> wnid table (a JSON file in
    the CLI). Categories absent from the table are skipped; a table entry without a folder is an error."""
    src_root, out_root = Path(src_root), Path(out_root)
    for cat in category_to_wnid:
        if not (src_root / cat).is_dir():
            raise DatasetLayoutError(f"OOD-CV category folder {src_root / cat} missing (expected SRC/<category>/<image>)")
    out_root.mkdir(parents=True, exist_ok=True)
    for cat, wnid in category_to_wnid.items():
        with atomic_dir(out_root / wnid) as tmp:
            for f in sorted((src_root / cat).iterdir()):
                if f.suffix.lower() in IMAGE_SUFFIXES:
                    shutil.copy2(f, tmp / f.name)
    write_json(out_root / "oodcv_mapping.json", dict(category_to_wnid))
    return out_root
