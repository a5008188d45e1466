"""Builders of a user's own vision setup, small and random: what `configs/custom.yaml` reads.

:func:`build_custom_tree` writes, under one root:

- ``model.pth``: ``torchvision.models.get_model(MODEL, num_classes=len(CLASSES)).state_dict()`` under a
  fixed seed (random weights; nothing is downloaded);
- ``classes.txt``: the class names in logit order, one a line;
- ``data/train/<class>/*.png``: noise images (the concept datasets);
- ``data/blur/<class>/*.png``: a shifted eval set lacking one class;
- ``my_scorers.py``: docs/examples/my_scorers.py (an additive and a black-box plugin).

Run as a script to build a tree for a manual run:

    python tests/helpers/custom_fixtures.py custom_fixture_data convnext_tiny
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
CUSTOM_CONFIG = ROOT / "configs" / "custom.yaml"
CLASSES = ("cat", "dog", "fox")
#: eval set -> {class: images}; the blurred set lacks "fox" (a set may lack classes)
OOD_SETS = {"blur": {"cat": 2, "dog": 3}}
SEED = 0


def write_images(folder: Path, n: int, size: int, rng: np.random.Generator) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (size + 8, size + 12, 3), dtype=np.uint8)).save(folder / f"img{i:03d}.png")


def write_weights(path: Path, model: str, n_classes: int, seed: int = SEED) -> Path:
    import torch
    from torchvision import models as tvm

    torch.manual_seed(seed)
    torch.save(tvm.get_model(model, weights=None, num_classes=n_classes).state_dict(), path)
    return path


def build_custom_tree(root: Path, model: str = "convnext_tiny", n_per_class: int = 4, image_size: int = 32) -> dict:
    """Write the tree under ``root``; returns its paths (keys: root, model, weights, class_index, data_root,
    ood_roots, plugins_dir, classes, image_size)."""
    root = Path(root)
    rng = np.random.default_rng(SEED)
    root.mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    for name in CLASSES:
        write_images(root / "data" / "train" / name, n_per_class, image_size, rng)
    for eval_set, counts in OOD_SETS.items():
        for name, n in counts.items():
            write_images(root / "data" / eval_set / name, n, image_size, rng)
    write_weights(root / "model.pth", model, len(CLASSES))
    shutil.copy(ROOT / "docs" / "examples" / "my_scorers.py", root / "my_scorers.py")
    return {"root": str(root), "model": model, "weights": str(root / "model.pth"), "class_index": str(root / "classes.txt"),
            "data_root": str(root / "data" / "train"), "ood_roots": {e: str(root / "data" / e) for e in OOD_SETS},
            "plugins_dir": str(root), "classes": list(CLASSES), "image_size": image_size}


def custom_override(tree: dict, results: Path, out: Path, **vision: object) -> Path:
    """A second --configfile after configs/custom.yaml that points it at ``tree`` and keeps it small;
    ``vision`` entries replace keys of its vision block."""
    config = {
        "results_dir": str(results),
        "mlflow": {"enabled": False},
        "vision": {
            "folders": {"model": tree["model"], "weights": tree["weights"], "class_index": tree["class_index"],
                        "root": tree["data_root"], "ood_roots": tree["ood_roots"], "concept_size": 4,
                        "image_size": tree["image_size"]},
            "k_grid": [0.5, 1.0],
            # n0 10, n 50: IN and OUT both possible (`certified-circuits plan --examples 4 --components 1440
            # --p-del 0.3 --tau 0.7 --n 50 --n0 10`, ConvNeXt-Tiny's 1,440 channels); each mask is one call of a
            # black-box scorer (vision-discover), so the masks are the ConvNeXt run's largest cost (issue 51)
            "certification": {"n0": 10, "n": 50, "tau": 0.7, "p_del": 0.3},
            "discovery_workers": 1,
            **vision,
        },
    }
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python tests/helpers/custom_fixtures.py ROOT [MODEL]")
    print(json.dumps(build_custom_tree(Path(sys.argv[1]), *sys.argv[2:3]), indent=2))
