"""The marked world (issue 50): pixel marks a hand-set network reads exactly, and a minority cue per class.

With ``cue_attributes = A > 0`` (:class:`~certified_circuits.vision.data.world.WorldConfig`) every image of class c
carries, on top of the rendered scene, ``3 + A`` marks of 2 x 2 pixels at distinct random *slots* (the 64
positions ``(4 i + 2, 4 j + 2)``, ``i, j = 0..7``, of a 32 px image: even rows and columns, so a stride-2 stem reads
one mark whole at one position):

- the **badge**, two marks of the class's colour ``H_c`` (:func:`class_colours`): the class's evidence;
- a **stray mark**, one mark of another class's colour (uniform over the others): evidence for that class, which
  wins when class c's own evidence is removed;
- one **cue mark** per attribute ``a``: attribute a takes one of ``V = cue_values`` values on every image; value
  ``v`` is drawn as the code ``g = a V + v`` of :data:`CODES` in the class's colour. The values of a split's ``N_c``
  class-c images are dealt from a shuffled *deck* of ``max(N_c, DECK)`` cards holding each value on exactly ``1 / V``
  of them (:func:`balanced_values`): a split of ``DECK`` (1,000) class images or more (a population) carries each
  cue on exactly ``1 / V`` of them (within one image), a smaller one (D_c, 50 images) a hypergeometric count around
  it. So each value is a cue on a ``1 / V`` minority of the class, and a concept dataset holds it a random number of
  times.

A code is a 2 x 2 pattern (pixel order: top-left, top-right, bottom-left, bottom-right) of two pixels of the class's
colour and two of white ``W`` or black ``K``: 24 codes, so ``A V <= 24``. The class colours are saturated hues
``H_c = 0.5 + 0.5 u_c`` with ``u_c = (cos t_c, cos(t_c - 2 pi / 3), cos(t_c + 2 pi / 3))``, ``t_c = 2 pi c / n``,
as uint8: the scene's own colours are at most 0.2 (shape) and 0.12 (habitat tint) away from grey, so no scene
pixel projects onto ``u_c`` as a mark does (:func:`detector` and its margins).

Every draw comes from its own stream of the world's seed (``SeedSequence([seed, split, MARK_STREAM])``), so the
scene pixels under and around the marks are those of the unmarked world.
"""

from __future__ import annotations

import itertools

import numpy as np

#: the seed stream of the marks (the scenes use ``[seed, split]``)
MARK_STREAM = 1
#: the side of a mark in pixels
MARK_SIZE = 2
#: slot rows and columns of a 32 px image
SLOT_STEP = 4
SLOT_OFFSET = 2
#: the most classes whose colours stay apart (adjacent hues 30 degrees apart at 12)
MAX_MARKED_CLASSES = 12
#: the deck a split's cue values are dealt from (at least): a population of this many class images is balanced
DECK = 1000
#: the marks the world draws per image besides its cues: two badge marks, one stray mark
BADGE_MARKS = 2
#: a marked world's image side is a multiple of this: the compiled model's stride-2 stem and four stages halve it
#: down to one position (vision/networks/compiled.py's SIDE_MULTIPLE, which must equal it)
MARKED_SIDE_MULTIPLE = 16
#: pixel kinds of a code
HUE, WHITE, BLACK = "H", "W", "K"


def _codes() -> tuple[tuple[str, ...], ...]:
    """Every 2 x 2 pattern with two class-colour pixels and two white or black ones, in a fixed order."""
    codes = []
    for hue_at in itertools.combinations(range(4), 2):
        rest = [q for q in range(4) if q not in hue_at]
        for others in itertools.product((WHITE, BLACK), repeat=2):
            code = [HUE] * 4
            for q, kind in zip(rest, others):
                code[q] = kind
            codes.append(tuple(code))
    return tuple(codes)


#: the 2 x 2 codes of the cue marks (24)
CODES: tuple[tuple[str, ...], ...] = _codes()
#: the badge's pattern: four class-colour pixels
BADGE: tuple[str, str, str, str] = (HUE, HUE, HUE, HUE)
#: the pixel offsets (row, column) of a mark's four pixels, in code order
PIXELS: tuple[tuple[int, int], ...] = ((0, 0), (0, 1), (1, 0), (1, 1))


def hue_directions(n_classes: int) -> np.ndarray:
    """``u_c`` [n, 3]: the zero-sum unit-hue directions of the class colours (module docstring)."""
    t = 2 * np.pi * np.arange(n_classes) / n_classes
    return np.stack([np.cos(t), np.cos(t - 2 * np.pi / 3), np.cos(t + 2 * np.pi / 3)], axis=1)


def class_colours(n_classes: int) -> np.ndarray:
    """uint8 [n, 3]: ``round(255 (0.5 + 0.5 u_c))``, the colour of class c's marks."""
    return np.round(255 * (0.5 + 0.5 * hue_directions(n_classes))).astype(np.uint8)


def pattern_colours(pattern: tuple[str, ...], colour: np.ndarray) -> np.ndarray:
    """uint8 [4, 3]: the four pixels of a mark with ``pattern`` drawn in ``colour`` (uint8 [3])."""
    table = {HUE: np.asarray(colour, dtype=np.uint8), WHITE: np.full(3, 255, np.uint8), BLACK: np.zeros(3, np.uint8)}
    return np.stack([table[k] for k in pattern])


def slot_pixels(image_size: int) -> np.ndarray:
    """int [S, 2]: the top-left pixel (row, column) of every slot, row-major."""
    pos = np.arange(SLOT_OFFSET, image_size - MARK_SIZE + 1, SLOT_STEP)
    return np.stack(np.meshgrid(pos, pos, indexing="ij"), axis=-1).reshape(-1, 2)


def check_marks(n_classes: int, attributes: int, values: int, image_size: int) -> None:
    """Raise ValueError naming the knob unless the marked world can be drawn and read exactly."""
    if attributes < 0:
        raise ValueError(f"cue_attributes must be >= 0 (0: no marks), got {attributes}")
    if not attributes:
        return
    if n_classes < 2:
        raise ValueError(f"a marked world (cue_attributes {attributes}) needs n_classes >= 2: every image carries a "
                         f"stray mark of another class; got n_classes {n_classes}")
    if values < 2:
        raise ValueError(f"cue_values must be >= 2 (a cue on a 1 / cue_values minority of a class), got {values}")
    if attributes * values > len(CODES):
        raise ValueError(f"cue_attributes x cue_values = {attributes * values} cue codes, but {len(CODES)} exist: "
                         "lower cue_attributes or cue_values")
    if n_classes > MAX_MARKED_CLASSES:
        raise ValueError(f"a marked world has at most {MAX_MARKED_CLASSES} classes (their colours must stay apart), "
                         f"got {n_classes}: lower n_classes or set cue_attributes 0")
    if image_size < MARKED_SIDE_MULTIPLE or image_size % MARKED_SIDE_MULTIPLE:
        raise ValueError(f"a marked world's image_size must be a multiple of {MARKED_SIDE_MULTIPLE} (the compiled "
                         f"model's stages halve it down to one position), got {image_size}: use 16 or 32")
    slots = len(slot_pixels(image_size))
    if BADGE_MARKS + 1 + attributes > slots:
        raise ValueError(f"{BADGE_MARKS + 1 + attributes} marks per image do not fit the {slots} slots of a "
                         f"{image_size} px image: lower cue_attributes")


def balanced_values(rng: np.random.Generator, labels: np.ndarray, attributes: int, values: int,
                    deck: int = DECK) -> np.ndarray:
    """int [N, A]: each attribute's value per image. A class's ``N_c`` images take, in a random order, the first
    ``N_c`` cards of a shuffled deck of ``max(N_c, deck)`` cards ``0, 1, .., V - 1, 0, 1, ..``: so ``N_c >= deck``
    images hold each value ``floor`` or ``ceil(N_c / V)`` times, fewer a hypergeometric count (a random subset of
    the deck).

    Vectorized over images: one random key per image and attribute, ranked within its class; the loop runs over
    classes and attributes."""
    labels = np.asarray(labels, dtype=np.int64)
    n = len(labels)
    out = np.zeros((n, attributes), dtype=np.int64)
    if not n or not attributes:
        return out
    keys = rng.random((n, attributes))
    classes, sizes = np.unique(labels, return_counts=True)
    for a in range(attributes):
        order = np.lexsort((keys[:, a], labels))  # by class, then by a random key: each class a contiguous run
        cards = np.zeros(n, dtype=np.int64)
        for c, size in zip(classes, sizes):
            cards[labels[order] == c] = rng.permutation(np.arange(max(int(size), deck)) % values)[:size]
        out[order, a] = cards
    return out


def draw_marks(rng: np.random.Generator, labels: np.ndarray, n_classes: int, attributes: int, values: int,
               image_size: int) -> dict[str, np.ndarray]:
    """The marks of a labelled split (labels < 0, the anomaly pool's, get none).

    Returns:
        ``mark_slots`` int [N, 3 + A] (slot index of badge, badge, stray, cue 0..A-1; -1 for an unlabelled image),
        ``stray`` int [N] (the stray mark's class, -1 when none), ``cues`` int [N, A] (each attribute's value, -1
        when none).
    """
    labels = np.asarray(labels, dtype=np.int64)
    n = len(labels)
    n_slots = len(slot_pixels(image_size))
    marked = labels >= 0
    slots = np.argsort(rng.random((n, n_slots)), axis=1)[:, : BADGE_MARKS + 1 + attributes]
    stray = (labels + rng.integers(1, n_classes, n)) % n_classes
    cues = np.full((n, attributes), -1, dtype=np.int64)
    cues[marked] = balanced_values(rng, labels[marked], attributes, values)
    return {"mark_slots": np.where(marked[:, None], slots, -1), "stray": np.where(marked, stray, -1), "cues": cues}


def paint_marks(images: np.ndarray, labels: np.ndarray, marks: dict[str, np.ndarray], n_classes: int,
                values: int) -> np.ndarray:
    """Draw :func:`draw_marks`' marks onto uint8 images [N, H, W, 3] (a copy): vectorized over images, one
    assignment per mark and pixel."""
    out = np.array(images, copy=True)
    labels = np.asarray(labels, dtype=np.int64)
    rows = np.flatnonzero(labels >= 0)
    if not rows.size:
        return out
    colours = class_colours(n_classes)
    corner = slot_pixels(out.shape[1])
    slots = marks["mark_slots"][rows]
    own = colours[labels[rows]]
    white, black = np.full(3, 255, np.uint8), np.zeros(3, np.uint8)
    # (slot column, per-image colours of the four pixels [n, 4, 3])
    layers = [(0, np.repeat(own[:, None], 4, 1)), (1, np.repeat(own[:, None], 4, 1)),
              (2, np.repeat(colours[marks["stray"][rows]][:, None], 4, 1))]
    for a in range(marks["cues"].shape[1]):
        codes = np.asarray(CODES)[a * values + marks["cues"][rows, a]]  # [n, 4] pixel kinds
        pix = np.where((codes == HUE)[..., None], own[:, None], np.where((codes == WHITE)[..., None], white, black))
        layers.append((BADGE_MARKS + 1 + a, pix))
    for column, pix in layers:
        top = corner[slots[:, column]]
        for q, (dr, dc) in enumerate(PIXELS):
            out[rows, top[:, 0] + dr, top[:, 1] + dc] = pix[:, q]
    return out
