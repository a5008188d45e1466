"""The concept world's knobs in range and its splits in memory: the one table of every knob's range that
:meth:`~certified_circuits.vision.data.world.WorldConfig.validate` and ``vision-world``'s argparse types read, and the
memory a split takes, estimated before any image is drawn."""

from __future__ import annotations

import math

import numpy as np

from certified_circuits.vision.data.marks import CODES
from certified_circuits.vision.data.shapes import CLASS_SHAPES, FILLS

#: the range (inclusive) of every integer knob of :class:`~certified_circuits.vision.data.world.WorldConfig`, and why:
#: ``validate`` and the argparse types of ``vision-world`` (cli/vision_data.py) read this one table (None: no bound
#: but memory, :func:`check_world_memory`)
INT_RANGES: dict[str, tuple[int, int | None, str]] = {
    "seed": (0, 2**32 - 1, "seeds are non-negative 32-bit integers"),
    "image_size": (16, 1024, "pixels per side; a marked world's must be a multiple of 16"),
    "n_classes": (2, len(CLASS_SHAPES) * len(FILLS), "a classifier needs two classes, and the counterfactual split's "
                  "shape swaps and a marked world's stray marks (cue_attributes) are of another class; at most 10 "
                  "shapes x n_fills"),
    "n_fills": (0, len(FILLS), "0: classes are shapes; F: classes are (shape, fill) pairs"),
    "n_train_per_class": (1, None, "every split holds images of every class"),
    "n_concept_per_class": (1, 5000, "|D_c|, images per class of the concept split"),
    "n_test_per_class": (1, None, "every split holds images of every class"),
    "n_ood_per_class": (1, None, "every split holds images of every class"),
    "n_pool_per_class": (1, None, "every split holds images of every class"),
    "n_anomaly_pool": (1, None, "the anomaly pool's novel-shape images"),
    "n_counterfactual": (1, None, "the counterfactual split's images"),
    "corruption_severity": (1, 5, "ImageNet-C's defocus severities"),
    "cue_attributes": (0, len(CODES), "0: no marks; A: one cue mark per attribute"),
    "cue_values": (1, len(CODES), "values of each cue attribute (a marked world needs >= 2)"),
}
#: the range (inclusive) of every real knob of :class:`~certified_circuits.vision.data.world.WorldConfig`, and why
FLOAT_RANGES: dict[str, tuple[float, float, str]] = {
    "habitat_rate": (0.0, 1.0, "a probability"),
    "texture_contrast": (0.0, 0.5, "the habitat pattern's amplitude in luminance units"),
    "habitat_tint": (0.0, 0.5, "the habitat tint's strength in luminance units"),
    "shape_contrast": (0.0, 0.5, "the shape's least distance from its background in luminance units"),
}
#: the most memory one split may take while it is built (its images, their working copies): larger worlds are
#: refused before any image is drawn (:func:`check_world_memory`)
WORLD_MEMORY_BYTES = 8 * 2**30
#: the most memory the renderer's temporaries of one chunk of images take (the chunk shrinks for large images)
RENDER_CHUNK_BYTES = 256 * 2**20


def _in_range(name: str, value: object, low: float, high: float | None, why: str, integer: bool) -> None:
    kind = "an integer" if integer else "a number"
    span = f"in {low}..{high}" if integer and high is not None else f">= {low}" if high is None else \
        f"in [{low:g}, {high:g}]"
    allowed: tuple[type, ...] = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise ValueError(f"{name} must be {kind} {span} ({why}), got {value!r}")
    number = float(value)  # type: ignore[arg-type]  # an int or a float (checked above)
    if not math.isfinite(number) or number < low or (high is not None and number > high):
        raise ValueError(f"{name} must be {kind} {span} ({why}), got {value}")


def check_knob(name: str, value: object) -> None:
    """Raise ValueError naming ``name``, its range and why unless ``value`` is a valid value of that knob
    (:data:`INT_RANGES`, :data:`FLOAT_RANGES`; right type, finite, in range)."""
    if name in INT_RANGES:
        _in_range(name, value, *INT_RANGES[name], integer=True)
    else:
        _in_range(name, value, *FLOAT_RANGES[name], integer=False)


def render_chunk(image_size: int, chunk: int = 1024) -> int:
    """Images rendered at once: ``chunk``, fewer for large images, so that the renderer's supersampled temporaries
    (some ten float32 arrays of ``(2 side)^2`` per image) stay within :data:`RENDER_CHUNK_BYTES`. The images do not
    depend on it (each is a pure function of its scene)."""
    return max(1, min(int(chunk), RENDER_CHUNK_BYTES // (40 * (2 * int(image_size)) ** 2)))


#: the knob that sets each split's images per class (or in all), and the working copies of its images a build holds
#: (the counterfactual split's three variants; the corruption split's float64 blur: input, padded copy, output)
SPLIT_SIZES: dict[str, tuple[str, int]] = {
    "train": ("n_train_per_class", 1), "concept": ("n_concept_per_class", 1), "id_test": ("n_test_per_class", 1),
    "corruption": ("n_test_per_class", 25), "context_shift": ("n_ood_per_class", 1),
    "adversarial_pool": ("n_pool_per_class", 1), "anomaly_pool": ("n_anomaly_pool", 1),
    "counterfactual": ("n_counterfactual", 3),
}


def split_bytes(cfg, split: str) -> int:
    """About the most memory building ``split`` takes: its images (uint8 ``side^2 x 3`` each) times the working copies
    of :data:`SPLIT_SIZES`, plus the renderer's chunk (:data:`RENDER_CHUNK_BYTES`)."""
    knob, copies = SPLIT_SIZES[split]
    per_class = knob not in ("n_anomaly_pool", "n_counterfactual")
    images = int(getattr(cfg, knob)) * (int(cfg.n_classes) if per_class else 1)
    return images * int(cfg.image_size) ** 2 * 3 * copies + RENDER_CHUNK_BYTES


def check_world_memory(cfg, splits: tuple[str, ...]) -> None:
    """Raise ValueError naming the split and the knobs that size it when building one of ``splits`` would take more
    than :data:`WORLD_MEMORY_BYTES` (estimated before any image is drawn)."""
    for split in splits:
        needed = split_bytes(cfg, split)
        if needed > WORLD_MEMORY_BYTES:
            knob = SPLIT_SIZES[split][0]
            raise ValueError(f"the {split} split ({knob} {getattr(cfg, knob)}, n_classes {cfg.n_classes}, image_size "
                             f"{cfg.image_size}) needs about {needed / 2**30:.1f} GiB (limit "
                             f"{WORLD_MEMORY_BYTES / 2**30:.0f} GiB): lower {knob} or image_size")
