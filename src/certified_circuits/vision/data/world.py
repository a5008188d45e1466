"""The embedded concept world: procedurally rendered shape classes with a planted spurious cue.

Stand-in for ImageNet in the paper's vision experiments (Sec. 4, App. A.1) so that every claim can be
tested on a 2-core CPU without data. Each class is a *shape* (the core cue) drawn with random
position, scale, rotation and colour (nuisances) on a textured background ("habitat", the spurious
cue). In the training, concept (D_c) and ID-test splits the habitat equals the class's own habitat
with probability ``habitat_rate`` and is uniform otherwise. OOD splits mirror the paper's:

- ``context_shift`` (like OOD-CV): the habitat is always one of the *other* classes' habitats;
- ``corruption`` (like ImageNet-C): the ID-test images after defocus blur (see ``corruption.py``);
- ``adversarial_pool`` (like ImageNet-A before filtration): hard images (small, low-contrast shapes,
  decorrelated habitats); ``filter.py`` keeps those the trained model misclassifies;
- ``anomaly_pool`` (like ImageNet-O before filtration): shapes never trained on; ``filter.py`` keeps
  those the model confidently assigns to a known class, labelled with that class.

With ``n_fills = F > 0`` the world is *compositional* (issue 20, docs/calibration.md "Shared features"):
class c is the pair (shape c // F, fill pattern c % F) of :data:`FILLS` (solid, stripes, dots, ...), the
fill drawn inside the shape in two tones of its (random) colour. Every shape is shared by F classes and
every fill by n_classes / F classes, so a channel that detects a shape or a fill serves several classes,
as ImageNet's features do; with F = 0 (the default) images are bit-identical to the shape-only world.

With ``cue_attributes = A > 0`` the world is *marked* (issue 50, :mod:`.marks`): every labelled image also carries
its class's badge, a stray mark of another class and one cue mark per attribute (each attribute's value on a
``1 / cue_values`` minority of the class's images), drawn from their own seed stream over the unchanged scene.

Everything is a pure function of ``WorldConfig`` (incl. its seed): each split draws from its own
``numpy.random.SeedSequence`` child, so splits are independent and reproducible.
Rendering is vectorised over chunks of images (shape edges 2x2 supersampled for anti-aliasing).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from certified_circuits.commands import COMMAND
from certified_circuits.storage.arrays import ArrayFileError, read_npz
from certified_circuits.storage.atomic import write_json, write_npz
from certified_circuits.vision.data.marks import MARK_STREAM, check_marks, draw_marks, paint_marks
from certified_circuits.vision.data.shapes import CLASS_SHAPES, FILLS, NOVEL_SHAPES, fill_pattern, shape_mask
from certified_circuits.vision.data.world_limits import (
    FLOAT_RANGES,
    INT_RANGES,
    check_knob,
    check_world_memory,
    render_chunk,
)

HABITATS: tuple[str, ...] = tuple(f"habitat{i}" for i in range(len(CLASS_SHAPES)))

SPLITS: tuple[str, ...] = (
    "train", "concept", "id_test", "context_shift", "corruption", "adversarial_pool", "anomaly_pool",
    "counterfactual",
)
#: the world's metadata file beside its splits (:func:`build_world` writes it, :func:`read_world_config` reads it)
WORLD_FILE = "world.json"


@dataclass(frozen=True)
class WorldConfig:
    """All knobs of the concept world (defaults = the calibrated embedded world)."""

    seed: int = 0
    image_size: int = 32
    n_classes: int = 10
    habitat_rate: float = 0.8          # P(own habitat) in train / concept / id_test
    texture_contrast: float = 0.18     # amplitude of the habitat pattern (0..0.5)
    habitat_tint: float = 0.12         # strength of the habitat colour tint (0..0.5)
    shape_radius: tuple[float, float] = (0.26, 0.40)  # shape radius as a fraction of the image side
    shape_contrast: float = 0.45       # min |shape colour - background| per image (luminance units)
    n_train_per_class: int = 600
    n_concept_per_class: int = 50
    n_test_per_class: int = 100
    n_ood_per_class: int = 100
    n_pool_per_class: int = 300
    n_anomaly_pool: int = 3000
    n_counterfactual: int = 400
    corruption_severity: int = 2
    n_fills: int = 0                   # > 0: classes are (shape, fill) pairs (module docstring)
    cue_attributes: int = 0            # > 0: the marked world (vision/data/marks.py): badge, stray mark, cue marks
    cue_values: int = 4                # values of each cue attribute: each is on 1 / cue_values of a class's images

    def validate(self) -> None:
        """Raise ValueError naming the knob, its range and why unless every knob is of the right type, finite and in
        range (:data:`INT_RANGES`, :data:`FLOAT_RANGES`) and the knobs agree with each other."""
        if isinstance(self.cue_attributes, int) and self.cue_attributes > 0 and isinstance(self.n_classes, int) \
                and self.n_classes < 2:
            raise ValueError(f"a marked world (cue_attributes {self.cue_attributes}) needs n_classes >= 2: every "
                             f"image carries a stray mark of another class; got n_classes {self.n_classes}")
        for name in (*INT_RANGES, *FLOAT_RANGES):
            check_knob(name, getattr(self, name))
        per_shape = max(1, self.n_fills)
        if self.n_classes > len(CLASS_SHAPES) * per_shape or self.n_classes % per_shape:
            if not self.n_fills:
                raise ValueError(f"n_classes must be a multiple of n_fills in 2..{len(CLASS_SHAPES)} with n_fills 0 "
                                 f"(one class per shape; with n_fills F > 0 classes are (shape, fill) pairs, up to "
                                 f"{len(CLASS_SHAPES)} F), got {self.n_classes}")
            raise ValueError(f"n_classes must be a multiple of n_fills ({per_shape}) in "
                             f"{max(2, per_shape)}..{len(CLASS_SHAPES) * per_shape}, got {self.n_classes}")
        radius = tuple(self.shape_radius) if isinstance(self.shape_radius, (tuple, list)) else ()
        if len(radius) != 2 or not all(isinstance(r, (int, float, np.integer, np.floating)) and not isinstance(r, bool)
                                       and math.isfinite(r)
                                       for r in radius) or not 0.05 <= radius[0] <= radius[1] <= 0.5:
            raise ValueError(f"shape_radius must be two numbers lo, hi with 0.05 <= lo <= hi <= 0.5, got "
                             f"{self.shape_radius!r}")
        check_marks(self.n_classes, self.cue_attributes, self.cue_values, self.image_size)

    def class_names(self) -> list[str]:
        if self.n_fills:
            return [f"{CLASS_SHAPES[c // self.n_fills]}_{FILLS[c % self.n_fills]}" for c in range(self.n_classes)]
        return list(CLASS_SHAPES[: self.n_classes])

    def n_habitats(self) -> int:
        """Habitats: one per class (at least the shape-only world's ten)."""
        return max(len(HABITATS), self.n_classes)


# ----------------------------------------------------------------------------------------------
# habitats: class-specific background textures (tint + oriented pattern)
# ----------------------------------------------------------------------------------------------

def _habitat_table(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fixed per-habitat parameters: tint direction (rgb), pattern angle, frequency, pattern kind."""
    hues = np.arange(n) / n
    tint = np.stack([np.cos(2 * np.pi * (hues + k / 3)) for k in range(3)], axis=1)  # [n, 3]
    angle = (np.arange(n) * 3 % n) * np.pi / n
    freq = np.array([2.0, 3.5, 5.0])[np.arange(n) % 3]
    kind = np.arange(n) % 2  # 0: stripes, 1: dots (product of two gratings)
    return tint.astype(np.float32), angle, freq, kind


@dataclass
class Scene:
    """Per-image generative parameters (all arrays of length N)."""

    shape: np.ndarray       # int, index into the shape list used for rendering
    habitat: np.ndarray     # int
    cx: np.ndarray
    cy: np.ndarray
    radius: np.ndarray      # fraction of image side
    angle: np.ndarray
    color: np.ndarray       # [N, 3] in [0, 1]
    phase: np.ndarray       # [N, 2] background pattern phases
    base: np.ndarray        # [N] background luminance
    fill: np.ndarray | None = None  # int index into FILLS (compositional world), else None

    def replace(self, **kw: np.ndarray) -> "Scene":
        return dataclasses.replace(self, **kw)


def sample_scenes(
    rng: np.random.Generator, shape: np.ndarray, habitat: np.ndarray, cfg: WorldConfig,
    radius_scale: float = 1.0, contrast: float | None = None,
) -> Scene:
    """Draw nuisance parameters (position, scale, rotation, colour, background phase) for N images."""
    n = len(shape)
    lo, hi = cfg.shape_radius
    radius = rng.uniform(lo, hi, n) * radius_scale
    margin = radius * 0.9
    cx = rng.uniform(margin, 1 - margin)
    cy = rng.uniform(margin, 1 - margin)
    angle = rng.uniform(0, 2 * np.pi, n)
    base = rng.uniform(0.35, 0.65, n)
    contrast = cfg.shape_contrast if contrast is None else contrast
    # shape colour: random hue, luminance pushed at least `contrast` away from the background
    hue = rng.uniform(0, 1, n)
    chroma = np.stack([np.cos(2 * np.pi * (hue + k / 3)) for k in range(3)], axis=1) * 0.2
    sign = np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)
    lum = np.clip(base + sign * (contrast + rng.uniform(0, 0.1, n)), 0.05, 0.95)
    color = np.clip(lum[:, None] + chroma, 0, 1)
    phase = rng.uniform(0, 2 * np.pi, (n, 2))
    f32 = np.float32
    return Scene(np.asarray(shape), np.asarray(habitat), cx.astype(f32), cy.astype(f32), radius.astype(f32),
                 angle.astype(f32), color.astype(f32), phase.astype(f32), base.astype(f32))


def _background(scenes: Scene, cfg: WorldConfig, size: int) -> np.ndarray:
    """Habitat texture float32 [N, size, size, 3]: base luminance + habitat tint + oriented pattern."""
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    tint, h_angle, h_freq, h_kind = _habitat_table(cfg.n_habitats())
    h = scenes.habitat
    ca = np.cos(h_angle[h]).astype(np.float32)[:, None, None]
    sa = np.sin(h_angle[h]).astype(np.float32)[:, None, None]
    f = (2 * np.pi * h_freq[h]).astype(np.float32)[:, None, None]
    g1 = np.sin(f * (xx[None] * ca + yy[None] * sa) + scenes.phase[:, 0, None, None])
    g2 = np.sin(f * (-xx[None] * sa + yy[None] * ca) + scenes.phase[:, 1, None, None])
    pattern = np.where(h_kind[h][:, None, None] == 0, g1, g1 * g2)
    lum = scenes.base[:, None, None] + np.float32(cfg.texture_contrast) * pattern
    return lum[..., None] + np.float32(cfg.habitat_tint) * tint[h][:, None, None, :]


def _coverage(scenes: Scene, size: int, shape_names: tuple[str, ...], ss: int = 2):
    """Fraction of each pixel covered by the shape, float32 [N, size, size] (ss x ss supersampling); with
    fills, also the shape's tone per pixel (coverage-weighted mean of the fill pattern) as a second result."""
    n = len(scenes.shape)
    s = size * ss
    coords = (np.arange(s, dtype=np.float32) + 0.5) / s
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    inv_r = (1.0 / scenes.radius)[:, None, None]
    dx = (xx[None] - scenes.cx[:, None, None]) * inv_r
    dy = (yy[None] - scenes.cy[:, None, None]) * inv_r
    c, sn = np.cos(scenes.angle)[:, None, None], np.sin(scenes.angle)[:, None, None]
    u = c * dx + sn * dy
    v = -sn * dx + c * dy
    inside = np.zeros((n, s, s), dtype=np.float32)
    for k in np.unique(scenes.shape):
        sel = scenes.shape == k
        inside[sel] = shape_mask(shape_names[int(k)], u[sel], v[sel])
    coverage = inside.reshape(n, size, ss, size, ss).mean(axis=(2, 4))
    if scenes.fill is None:
        return coverage
    tone = np.zeros((n, s, s), dtype=np.float32)
    for k in np.unique(scenes.fill):
        sel = scenes.fill == k
        tone[sel] = fill_pattern(FILLS[int(k)], u[sel], v[sel])
    covered_tone = (inside * tone).reshape(n, size, ss, size, ss).mean(axis=(2, 4))
    return coverage, np.where(coverage > 0, covered_tone / np.maximum(coverage, 1e-6), 1.0).astype(np.float32)


def render(scenes: Scene, cfg: WorldConfig, shape_names: tuple[str, ...] = CLASS_SHAPES, chunk: int = 1024) -> np.ndarray:
    """Render scenes to uint8 [N, H, W, 3]: vectorised over chunks of images (:func:`render_chunk`); the background is
    drawn at pixel centres, the shape edge anti-aliased by 2x2 supersampling."""
    n = len(scenes.shape)
    chunk = render_chunk(cfg.image_size, chunk)
    out = np.empty((n, cfg.image_size, cfg.image_size, 3), dtype=np.uint8)
    for s0 in range(0, n, chunk):
        sl = slice(s0, min(n, s0 + chunk))
        part = Scene(*(None if getattr(scenes, f.name) is None else getattr(scenes, f.name)[sl]
                       for f in dataclasses.fields(Scene)))
        if part.fill is None:
            alpha = _coverage(part, cfg.image_size, shape_names)[..., None]
            color = part.color[:, None, None, :]
        else:  # two tones of the shape's colour: the fill's dark parts at 45% of it
            alpha, tone = _coverage(part, cfg.image_size, shape_names)
            alpha = alpha[..., None]
            color = part.color[:, None, None, :] * (0.45 + 0.55 * tone[..., None])
        img = alpha * color + (1 - alpha) * _background(part, cfg, cfg.image_size)
        out[sl] = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
    return out


# ----------------------------------------------------------------------------------------------
# splits
# ----------------------------------------------------------------------------------------------

def _correlated_habitats(rng: np.random.Generator, labels: np.ndarray, rate: float, n_hab: int) -> np.ndarray:
    own = rng.uniform(size=len(labels)) < rate
    return np.where(own, labels, rng.integers(0, n_hab, len(labels)))


def _other_habitats(rng: np.random.Generator, labels: np.ndarray, n_hab: int) -> np.ndarray:
    return (labels + rng.integers(1, n_hab, len(labels))) % n_hab


def _balanced_labels(n_per_class: int, n_classes: int) -> np.ndarray:
    return np.repeat(np.arange(n_classes), n_per_class)


def _split_rng(cfg: WorldConfig, split: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([cfg.seed, SPLITS.index(split)]))


def _marked(cfg: WorldConfig, split: str, labels: np.ndarray, images: np.ndarray,
            out: dict[str, np.ndarray]) -> np.ndarray:
    """``images`` with the marked world's marks (:mod:`.marks`; unchanged when ``cue_attributes`` is 0), drawn from
    the split's own mark stream; the marks' arrays (``mark_slots``, ``stray``, ``cues``) go into ``out``."""
    if not cfg.cue_attributes:
        return images
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, SPLITS.index(split), MARK_STREAM]))
    marks = draw_marks(rng, labels, cfg.n_classes, cfg.cue_attributes, cfg.cue_values, cfg.image_size)
    out.update(marks)
    return paint_marks(images, labels, marks, cfg.n_classes, cfg.cue_values)


def make_split(cfg: WorldConfig, split: str) -> dict[str, np.ndarray]:
    """Generate one split as arrays: images uint8 [N,H,W,3], labels, habitat, shape, ids.

    ``counterfactual`` returns base / habitat-swapped / shape-swapped images of the same scenes
    (keys ``images``, ``images_habitat_swap``, ``images_shape_swap``)."""
    cfg.validate()
    if split not in SPLITS:
        raise ValueError(f"unknown world split {split!r}; choose one of {SPLITS}")
    check_world_memory(cfg, (split,))
    rng = _split_rng(cfg, split)
    nc = cfg.n_classes
    shape_names = CLASS_SHAPES
    out: dict[str, np.ndarray] = {}
    F = cfg.n_fills

    def scenes_of(labels, habitat, **kw):
        """Scenes of class labels: the shape (and, compositional, the fill) of each label."""
        if not F:
            return sample_scenes(rng, labels, habitat, cfg, **kw)
        return sample_scenes(rng, labels // F, habitat, cfg, **kw).replace(fill=labels % F)

    if split in ("train", "concept", "id_test", "corruption"):
        n_per = {"train": cfg.n_train_per_class, "concept": cfg.n_concept_per_class}.get(split, cfg.n_test_per_class)
        if split == "corruption":  # a corrupted copy of id_test, as ImageNet-C is of ImageNet val
            rng = _split_rng(cfg, "id_test")
        labels = _balanced_labels(n_per, nc)
        habitat = _correlated_habitats(rng, labels, cfg.habitat_rate, nc)
        scenes = scenes_of(labels, habitat)
        images = render(scenes, cfg)
        images = _marked(cfg, "id_test" if split == "corruption" else split, labels, images, out)
        if split == "corruption":
            from certified_circuits.vision.data.corruption import defocus_blur

            images = defocus_blur(images, severity=cfg.corruption_severity)
        shape = labels
    elif split == "context_shift":
        labels = _balanced_labels(cfg.n_ood_per_class, nc)
        habitat = _other_habitats(rng, labels, nc)
        images = _marked(cfg, split, labels, render(scenes_of(labels, habitat), cfg), out)
        shape = labels
    elif split == "adversarial_pool":
        labels = _balanced_labels(cfg.n_pool_per_class, nc)
        mismatch = rng.uniform(size=len(labels)) < 0.6
        habitat = np.where(mismatch, _other_habitats(rng, labels, nc), labels)
        scenes = scenes_of(labels, habitat, radius_scale=0.75, contrast=cfg.shape_contrast * 0.35)
        images = _marked(cfg, split, labels, render(scenes, cfg), out)
        shape = labels
    elif split == "anomaly_pool":
        shape_names = NOVEL_SHAPES
        shape = rng.integers(0, len(NOVEL_SHAPES), cfg.n_anomaly_pool)
        habitat = rng.integers(0, nc, cfg.n_anomaly_pool)
        novel = sample_scenes(rng, shape, habitat, cfg)
        if F:
            novel = novel.replace(fill=rng.integers(0, F, cfg.n_anomaly_pool))
        images = render(novel, cfg, NOVEL_SHAPES)
        labels = np.full(cfg.n_anomaly_pool, -1)  # assigned by filtration against the model
    else:  # counterfactual
        n = cfg.n_counterfactual
        labels = rng.integers(0, nc, n)
        habitat = _correlated_habitats(rng, labels, cfg.habitat_rate, nc)
        scenes = scenes_of(labels, habitat)
        other_h = (habitat + rng.integers(1, nc, n)) % nc
        other_s = (labels + rng.integers(1, nc, n)) % nc
        images = _marked(cfg, split, labels, render(scenes, cfg), out)
        swapped = scenes.replace(shape=other_s // F, fill=other_s % F) if F else scenes.replace(shape=other_s)
        for key, variant in (("images_habitat_swap", scenes.replace(habitat=other_h)), ("images_shape_swap", swapped)):
            out[key] = _marked(cfg, split, labels, render(variant, cfg), out)  # the same marks on every variant
        shape = labels
    n = len(labels)
    out.update(
        images=images,
        labels=np.asarray(labels, dtype=np.int16),
        habitat=np.asarray(habitat, dtype=np.int16),
        shape=np.asarray(shape, dtype=np.int16),
        ids=np.array([f"{split}/{i:06d}" for i in range(n)]),
        class_names=np.array(cfg.class_names()),
        shape_names=np.array(shape_names),
    )
    return out


def save_split(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write one split as an uncompressed .npz atomically."""
    return write_npz(path, arrays, compressed=False)


def build_world(cfg: WorldConfig, out_dir: Path, splits: tuple[str, ...] = SPLITS, progress: bool = True) -> dict[str, Path]:
    """Generate every split into ``out_dir/<split>.npz`` plus ``world.json`` (config, class names)."""
    from tqdm import tqdm

    cfg.validate()
    unknown = [split for split in splits if split not in SPLITS]
    if unknown:
        raise ValueError(f"unknown world splits {unknown}; choose from {SPLITS}")
    check_world_memory(cfg, tuple(splits))
    out_dir = Path(out_dir)
    paths = {}
    for split in tqdm(splits, desc="vision-world", disable=not progress, file=None):
        paths[split] = save_split(out_dir / f"{split}.npz", make_split(cfg, split))
    meta = {"config": dataclasses.asdict(cfg), "class_names": cfg.class_names(), "habitats": [f"habitat{i}" for i in range(cfg.n_classes)],
            "novel_shapes": list(NOVEL_SHAPES), "splits": sorted(p.stem for p in out_dir.glob("*.npz"))}
    paths["meta"] = write_json(out_dir / WORLD_FILE, meta, sort_keys=True)
    return paths


def read_world_config(folder: str | os.PathLike) -> WorldConfig:
    """The :class:`WorldConfig` of a world folder, read strictly from its ``world.json`` (the one reader of the file
    :func:`build_world` writes): valid UTF-8 JSON with no key twice, a ``config`` object of known knobs, each of the
    right type and in range, and class names that agree with it.

    Raises:
        FileNotFoundError: no ``world.json`` (naming the command that builds it).
        ValueError: (:class:`~certified_circuits.storage.documents.DocumentError`) anything else wrong, naming the
            file, the problem and the fix (rebuild the world).
    """
    from certified_circuits.storage.documents import DocumentError, read_json_document

    folder = Path(folder)
    path = folder / WORLD_FILE
    fix = (f"rebuild the world with `{COMMAND} vision-world --out {folder}` and the options it was built with (it "
           f"rewrites every split and {WORLD_FILE})")
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: build the world first with `{COMMAND} vision-world --out "
                                f"{folder}`")
    meta = read_json_document(path, fix, what=f"{WORLD_FILE} of vision-world")
    config = meta.get("config")
    if not isinstance(config, dict):
        raise DocumentError(f"{path} has no 'config' object (it holds {sorted(meta)}): it is not the {WORLD_FILE} of "
                            f"vision-world; {fix}")
    known = {f.name for f in dataclasses.fields(WorldConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise DocumentError(f"{path}: config has unknown knobs {unknown} (known: {sorted(known)}); {fix}")
    if isinstance(config.get("shape_radius"), list):
        config = {**config, "shape_radius": tuple(config["shape_radius"])}
    cfg = WorldConfig(**config)
    try:
        cfg.validate()
    except ValueError as exc:
        raise DocumentError(f"{path}: config: {exc}; {fix}") from None
    if "class_names" in meta and meta["class_names"] != cfg.class_names():
        raise DocumentError(f"{path}: class_names {meta['class_names']} do not match its config's "
                            f"{cfg.class_names()}; {fix}")
    return cfg


def load_split(path: Path) -> dict[str, np.ndarray]:
    """Load a world split .npz; clear error when it is missing or not a world split."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"world split {path} does not exist; build the world first with "
            f"`{COMMAND} vision-world --out {path.parent}`"
        )
    fix = f"Rebuild the world with `{COMMAND} vision-world --out {path.parent}` (the workflow rebuilds it when it is deleted)."
    try:
        data = read_npz(path, fix)
    except ArrayFileError as exc:
        raise ValueError(f"{path} is not a concept-world split (.npz written by vision-world): {exc.problem}. {fix}") \
            from None
    missing = {"images", "labels", "ids", "class_names"} - set(data)
    if missing:
        raise ValueError(f"{path} is not a concept-world split: missing arrays {sorted(missing)}. {fix}")
    return data
