"""Image-folder datasets of any classifier: ``ROOT/<class>/<image>`` trees and a class index.

The ``folders`` vision source (a user's own model and data) and its ImageNet preset read the same
layout:

- a **class index**: the class names in logit order, one a line. A ``LOC_synset_mapping.txt``
  (``n01440764 tench, Tinca tinca``) is read too: when every line starts with a WordNet id followed by
  a description, the id is the name. Names are unique; blank lines are skipped.
- **class folders**: ``ROOT/<class name>/*.{jpeg,jpg,png,bmp,webp}``, one folder per class of the
  index (a set may lack classes; a folder that the index lacks is an error, not a silent skip).

This module imports neither torch nor torchvision: the config check uses it before any job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png", ".bmp", ".webp")
_WNID_LINE = re.compile(r"^n\d{8}\s+\S")


class DatasetLayoutError(FileNotFoundError):
    """A dataset folder does not have the expected layout (the message says which and how to fix it)."""


def load_class_names(path: Path | str) -> list[str]:
    """Class names in logit order from a class-index file.

    Args:
        path: one name a line, or a ``LOC_synset_mapping.txt`` (its WordNet ids are the names).

    Returns:
        the names; line i (blank lines skipped) is the name of logit i.

    Raises:
        DatasetLayoutError: the file is missing, empty or names a class twice.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetLayoutError(f"class index {p} not found: write the class names in logit order, one a line")
    lines = [line.strip() for line in p.read_text().splitlines() if line.strip()]
    if not lines:
        raise DatasetLayoutError(f"class index {p} is empty: write the class names in logit order, one a line")
    names = [line.split()[0] for line in lines] if all(_WNID_LINE.match(line) for line in lines) else lines
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise DatasetLayoutError(
                f"class index {p} names {name!r} twice (lines {seen[name] + 1} and {i + 1}): "
                f"each logit needs its own name"
            )
        seen[name] = i
    return names


def list_class_folders(root: Path | str) -> list[str]:
    """Names of the class folders under ``root`` (sorted; hidden folders skipped).

    Raises:
        DatasetLayoutError: ``root`` is missing or holds no folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetLayoutError(f"dataset root {root} does not exist (expected ROOT/<class>/<image> folders)")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise DatasetLayoutError(f"{root} has no class folders: expected ROOT/<class>/<image>")
    return names


def list_class_images(root: Path | str, name: str, min_images: int = 1, limit: int | None = None) -> list[Path]:
    """Sorted image files of class ``name`` under ``root/<name>/``; errors name the missing folder or the
    shortfall."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetLayoutError(f"dataset root {root} does not exist (expected ROOT/<class>/<image> folders)")
    folder = root / name
    if not folder.is_dir():
        have = sorted(p.name for p in root.iterdir() if p.is_dir())[:5]
        raise DatasetLayoutError(
            f"class folder {folder} is missing: expected one folder per class under {root} "
            f"(found e.g. {have or 'no folders'}); is this the right root and class?"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if len(files) < min_images:
        raise DatasetLayoutError(f"{folder} holds {len(files)} images, fewer than the {min_images} required")
    return files[:limit] if limit else files


def count_class_images(root: Path | str, names: Sequence[str]) -> dict[str, int]:
    """{class: number of images under ``root/<class>/``}; 0 for a class the set lacks."""
    root = Path(root)
    return {n: len(list_class_images(root, n, min_images=0)) if (root / n).is_dir() else 0 for n in names}


def check_folders_in_index(
    root: Path | str, class_names: Iterable[str], class_index: Path | str, key: str
) -> list[str]:
    """The class folders of ``root``, each of which must be a class of the index.

    Args:
        root: a ``ROOT/<class>/`` tree.
        class_names: the names of the class index.
        class_index: its path (named in the error).
        key: the config key of ``root`` (named in the error).

    Returns:
        the folder names (sorted).

    Raises:
        DatasetLayoutError: a folder is not a class of the index.
    """
    known = set(class_names)
    folders = list_class_folders(root)
    unknown = [name for name in folders if name not in known]
    if unknown:
        raise DatasetLayoutError(
            f"{key}: class folders {unknown[:5]} under {root} are not in the class index {class_index}: "
            f"add them in logit order, or remove the folders (a folder is a class of the model)"
        )
    return folders
