"""The compiled (hand-set) marked ResNet (issue 50): a world ResNet whose every weight is set by hand, so each class's
circuit, each channel's effect and each channel's gradient x activation are known in closed form.

It reads the marked world (:mod:`certified_circuits.vision.data.marks`): every image of class c carries two badge
marks of c's colour, a stray mark of another class's colour and one cue mark per attribute, whose value is on a
``p = 1 / V`` minority of the class's images. The network is a plain :func:`~.world_resnet.world_resnet` (one
BasicBlock per stage, stride-2 stem), so its checkpoint is a world checkpoint (``load_model('world', ...)``) and its
circuit vertices are the channels of ``layer1..layer4``. Each stage has ``W = n (1 + G) + D`` channels (``G = A V`` cue
codes per class, ``D`` distractors), a seeded permutation of these logical channels:

- **badge chain of class c** (true): the stem detects a badge mark of c's colour (``relu(kappa (s - theta))``, 1 at a
  mark's stem position, exactly 0 at every other mark and scene position, :func:`detector`), and each stage carries
  it on. Logit c reads ``B`` per badge mark (``2 B`` on its own images); a stray mark of c on another class's image
  gives ``B`` there, so with class c's badge chain removed its images go to their stray mark's class;
- **cue chain (c, g)** (true, gated): detects class c's cue mark with code g; logit c reads ``A_g = A (1 + sigma_c g
  / G)`` per mark (g = 0..G-1, ``sigma_c`` the spec's ``cue_gain_spread`` in [0, 1): each code its own gain, every
  ``A_g >= A``, so no cue chain is weaker than with the one gain ``A`` of the models before it). Its gradient x
  activation is ``A_g`` on the images with the cue and 0 on the others: zero-inflated, and its mean over D_c is ``A_g
  k / |D_c|`` with ``k`` the cue's (hypergeometric) count in D_c;
- **distractor i** (null; shared by every class): a near-constant map ``1 + s_i jitter (l(x) - lbar)`` (``l`` the
  image's grey level, the mean of its pixels over colours) read by every logit with weight 1, with its own signed
  jitter magnitude ``s_i = (-1)^i (1 - sigma i / D)`` (``sigma`` the spec's ``jitter_spread`` in [0, 1); i = 0..D-1:
  ``+1, -(1 - sigma / D), +(1 - 2 sigma / D), ..``, every ``|s_i|`` in ``(1 - sigma, 1]``, so the map stays positive
  under the same :data:`MAX_JITTER`). The grey level is class-neutral: the habitat tints and the marks' colours are
  zero-sum over colours, and a shape is as often lighter as darker than its background. Its gradient x activation
  for class c is its level, ``R_l = (1 - m_l) p A`` at stage l (a BatchNorm shift per stage sets it), just below a
  cue chain's smallest mean on the population (``p A = p A_0``), plus its jitter ``R_1 jitter s_i (l(x) - lbar)``;
  its own effect under mean ablation is ``jitter |s_i| R_1 E |l - lbar|``, about a thousandth of the truth's effect
  (the largest, distractor 0's, is the same for every ``sigma``).

Every stage after the stem sums each channel over 2 x 2 positions (the stride-2 ``conv1`` with four unit taps; the
downsample branch is zero), so a mark's mass reaches ``layer4`` whatever its position, and along a chain every
stage's gradient x activation equals the chain's contribution to the logit (Euler: the chain is linear and
non-negative). So at stage l, for class c and any D: badge ``2 B``; cue (c, g) ``A_g k_g / |D|``; distractor
``R_l + R_1 jitter s_i (lbar_D - lbar)`` (``lbar_D`` the mean grey level of D); every other class's channels
exactly 0. The circuit "at the truth's size" keeps the badge and the ``G`` largest of the cue chains and distractors
per stage: the population's keeps every cue chain (``p A_g >= p A > R_l``), a sample whose count of cue g falls below
``(1 - m_l) p |D| A / A_g`` swaps it for a distractor.

**No ties among the distractors** (issue 59): two distractors i != j differ on D by ``R_1 jitter (s_i - s_j)
(lbar_D - lbar)``, which is non-zero whenever ``sigma > 0`` and ``lbar_D != lbar``, since the ``s_i`` are distinct.
Which distractor a sample swaps in is then the sample's own choice, not the top-K's index order (ties go to the
lower component index): a D lighter than the world (``lbar_D > lbar``) ranks them by ``s_i`` (distractor 0 first,
distractor 1, the most negative, last), a darker one in the reverse order (distractor 1 first). With ``sigma = 0``
(``s_i = +1, -1, +1, ..``: the model before issue 59, and every checkpoint whose meta lacks ``jitter_spread``) the
distractors of each sign tie exactly on every D, and the lowest-index one of a tie is kept.

**No ties among the cue chains** (issue 59): with one gain ``A`` (``sigma_c = 0``: the model before the cue gains,
and every checkpoint whose meta lacks ``cue_gain_spread``) two cue chains of a class whose cues have the same count
k in D tie exactly (``A k / |D|`` both) and the top-K keeps the lower-index one. With ``sigma_c > 0`` cue chains (g, k)
and (g', k') tie iff ``(1 + sigma_c g / G) k = (1 + sigma_c g' / G) k'``. For an irrational ``sigma_c`` that has no
solution with g != g' and k, k' > 0 (it gives ``k - k' = sigma_c (g' k' - g k) / G``, an integer equal to an
irrational multiple of an integer, so ``k = k'`` and ``g k = g' k'``, i.e. g = g'); a rational spacing such as 0.05
does tie (``G = 8``: ``160 x 33 = 165 x 32``). The default :data:`DEFAULT_CUE_GAIN_SPREAD` = 0.0715 is a float, so the
claim is checked exhaustively on the gains as built (tests/unit/vision/test_compiled_ties.py): for every ``G`` in 2..24
and ``k, k' <= 1000`` no two ``A_g k`` coincide exactly (float64 and float32 gains), and for ``k, k' <= 50`` (the
testbed's ``|D_c|``) any two differ by more than 1e-5 relative, some 80 float32 ulps (2^-23), so no rounding of the
mean merges them. The one tie no gain can undo is two cues both absent from a resample (both score exactly 0). A cue
chain never ties the badge: ``A_g k / |D| <= A_g < 2 A <= 2 B`` (``sigma_c < 1``); nor, but by a measure-zero
coincidence, a distractor, whose mean moves continuously with ``lbar_D`` (the test checks it on D_c and its resamples).

Per-component effects (mean ablation over the other classes' images, in units of the whole truth's effect ``2 B -
B / (n - 1) + p sum_g A_g = 2 B - B / (n - 1) + A A_attr (1 + sigma_c (G - 1) / (2 G))``): a badge channel ``(2 - 1 /
(n - 1)) B``, a cue channel ``p A_g`` (its fill is 0: the cue never appears on another class), a distractor ``jitter
|s_i| R_1 E |l - lbar|`` (the same at every stage; at most distractor 0's ``jitter R_1 E |l - lbar|``), any other
class's channel exactly 0 (no weight reaches logit c). The spec refuses margins outside (0, 1), which would put a cue
chain below a distractor on the population.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from certified_circuits.vision.data.marks import BADGE, BLACK, CODES, HUE, PIXELS, WHITE, class_colours, \
    hue_directions, pattern_colours
from certified_circuits.vision.networks.planted import STAGES

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

#: the key of a compiled model's spec in its checkpoint's meta
META_KEY = "compiled"
#: the architecture: one BasicBlock per stage, stride-2 stem (the world ResNet's)
BLOCKS = (1, 1, 1, 1)
STEM_STRIDE = 2
#: an image side must be a multiple of this: every stage halves the stem's grid down to layer4 (16 px: 8 x 8, 4 x 4,
#: 2 x 2, 1 x 1 positions)
SIDE_MULTIPLE = 16
#: the most distractors a model may have per cue code of a class (more only add null channels)
MAX_DISTRACTORS_PER_CODE = 2
#: the default per-stage margins m_l (layer1..layer4): a distractor sits 2% to 20% below a cue chain's population
#: mean, so each stage swaps cue chains for distractors at another cue count of D_c (issue 50's conditions (b), (c))
DEFAULT_MARGINS = (0.02, 0.08, 0.14, 0.2)
#: the largest stem error of a detector on its marks or elsewhere that is float rounding (its marks give 1)
DETECTOR_TOLERANCE = 1e-4
#: the largest jitter: the distractor map stays positive (``1 + jitter s_i (l - lbar) > 0`` for any l, lbar in
#: [0, 1], as ``|s_i| <= 1``)
MAX_JITTER = 0.9
#: the default spread ``sigma`` of the distractors' jitter magnitudes ``|s_i| = 1 - sigma i / D`` (issue 59: 1 down
#: to 0.5625 for D = 8; distinct, so no two distractors tie on a sample)
DEFAULT_JITTER_SPREAD = 0.5
#: the spread of a checkpoint whose meta lacks ``jitter_spread`` (written before issue 59): ``s_i = +1, -1, ..``
LEGACY_JITTER_SPREAD = 0.0
#: the default spread ``sigma_c`` of the cue gains ``A_g = A (1 + sigma_c g / G)`` (issue 59: 1 up to 1.0626 A for G =
#: 8). Not a round number: a rational spacing of small denominator ties two cue chains (0.05: ``160 x 33 = 165 x 32``);
#: this one gives no exact coincidence ``A_g k = A_g' k'`` for G <= 24, k, k' <= 1000, and a relative gap > 1e-5 at
#: k, k' <= 50 (module docstring)
DEFAULT_CUE_GAIN_SPREAD = 0.0715
#: the spread of a checkpoint whose meta lacks ``cue_gain_spread``: every cue code the one gain ``A``
LEGACY_CUE_GAIN_SPREAD = 0.0
#: the range of a logit gain (``badge_gain`` B, ``cue_gain`` A): finite and positive, within six orders of magnitude
MIN_GAIN, MAX_GAIN = 1e-3, 1e3
#: the largest ``B / A``: a cue chain's share of the logit (``A / 2 B``; its gains' spread ``A sigma_c / G`` less still)
#: stays some thousand float32 ulps above rounding
MAX_GAIN_RATIO = 100.0
#: seeds of the channel permutation are non-negative 32-bit integers, as every seed of the project
MAX_SEED = 2**32 - 1


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and bool(np.isfinite(value))


@dataclass(frozen=True)
class CompiledSpec:
    """The compiled marked ResNet's constants (module docstring).

    Attributes:
        n_classes: logits (the marked world's classes).
        attributes: cue attributes ``A_attr`` of the world; ``values``: their values ``V`` (cue rate ``p = 1 / V``).
        distractors: ``D``, the shared distractor channels per stage.
        margins: ``m_l`` per stage: a distractor's level is ``(1 - m_l) p A``; each in (0, 1).
        jitter: the distractors' relative dependence on the image's grey level, in [0, MAX_JITTER].
        jitter_spread: ``sigma`` in [0, 1): distractor i's signed jitter magnitude is ``s_i = (-1)^i (1 - sigma i /
            D)`` (:meth:`jitter_signs`), its map ``1 + s_i jitter (l - lbar)``. With ``sigma > 0`` every ``s_i`` is
            distinct, so two distractors' means on a sample D differ by ``R_1 jitter (s_i - s_j) (lbar_D - lbar)``
            and never tie unless ``lbar_D = lbar``; ``sigma = 0`` is the model before issue 59 (``+1, -1, ..``: the
            distractors of a sign tie exactly), and what :meth:`from_dict` gives a meta without the key. Default
            :data:`DEFAULT_JITTER_SPREAD`.
        badge_gain: ``B``, logit per badge mark; ``cue_gain``: ``A``, the base logit per cue mark (``B >= A``: the
            badge chain outranks every cue chain); cue code g's gain is ``A_g`` (``cue_gain_spread``).
        luminance: the world's mean grey level ``lbar`` (measured on its train split).
        image_size: the world's image side in pixels (a multiple of :data:`SIDE_MULTIPLE`).
        seed: the channel permutation of every stage.
        layout: ``layout[l][i]``: the physical channel of logical channel i at stage l (filled by :func:`compile_spec`).
        cue_gain_spread: ``sigma_c`` in [0, 1): cue code g's logit gain is ``A_g = A (1 + sigma_c g / G)``
            (:meth:`cue_gains`), from ``A`` up to below ``2 A``, so a cue chain's mean on D is ``A_g k / |D|`` and two
            cue chains with the same count k no longer tie (module docstring: no ``(g, k) != (g', k')`` gives the same
            value); every ``A_g >= A`` keeps each cue chain above the distractors' level ``(1 - m_l) p A`` on the
            population, and ``A_g < 2 A <= 2 B`` below the badge. ``sigma_c = 0`` is the model before the cue gains
            (one gain ``A``: cue chains of equal count tie exactly) and what :meth:`from_dict` gives a meta without the
            key. Default :data:`DEFAULT_CUE_GAIN_SPREAD`.
    """

    n_classes: int
    attributes: int
    values: int
    distractors: int
    margins: tuple[float, float, float, float]
    jitter: float
    badge_gain: float
    cue_gain: float
    luminance: float
    image_size: int
    seed: int
    layout: tuple[tuple[int, ...], ...] = field(default=())
    jitter_spread: float = DEFAULT_JITTER_SPREAD
    cue_gain_spread: float = DEFAULT_CUE_GAIN_SPREAD

    def __post_init__(self) -> None:
        self._check_types()
        object.__setattr__(self, "margins", tuple(float(m) for m in self.margins))
        object.__setattr__(self, "luminance", float(self.luminance))
        object.__setattr__(self, "jitter_spread", float(self.jitter_spread))
        object.__setattr__(self, "cue_gain_spread", float(self.cue_gain_spread))
        object.__setattr__(self, "layout", tuple(tuple(int(i) for i in row) for row in self.layout))
        if self.n_classes < 2 or self.attributes < 1 or self.values < 2:
            raise ValueError(f"a compiled model needs >= 2 classes, >= 1 cue attribute and >= 2 values per attribute, "
                             f"got {self.n_classes}, {self.attributes}, {self.values}: build the world with "
                             "--cue-attributes >= 1")
        if len(self.margins) != 4 or not all(0 < m < 1 for m in self.margins):
            raise ValueError(f"margins must be 4 values in (0, 1) (a distractor's level (1 - m) p A stays below the "
                             f"cue chains' population mean p A), got {self.margins}")
        if not 1 <= self.distractors <= MAX_DISTRACTORS_PER_CODE * self.codes:
            raise ValueError(f"distractors must be in 1..{MAX_DISTRACTORS_PER_CODE * self.codes} (a stage holds "
                             f"{self.codes} cue chains per class), got {self.distractors}")
        if not 0 <= self.jitter <= MAX_JITTER:
            raise ValueError(f"jitter must be in [0, {MAX_JITTER}] (the distractor map stays positive), got "
                             f"{self.jitter}")
        if not 0 <= self.jitter_spread < 1:
            raise ValueError(f"jitter_spread must be in [0, 1) (distractor i's jitter magnitude 1 - spread i / D stays "
                             f"positive; 0 gives the tied +1, -1, .. of the model before issue 59), got "
                             f"{self.jitter_spread}")
        if not 0 <= self.cue_gain_spread < 1:
            raise ValueError(f"cue_gain_spread must be in [0, 1) (cue code g's gain A (1 + spread g / G) stays >= A, "
                             f"above the distractors, and < 2 A, below the badge; 0 gives the one gain A, whose cue "
                             f"chains of equal count tie), got {self.cue_gain_spread}")
        for name in ("badge_gain", "cue_gain"):
            if not MIN_GAIN <= getattr(self, name) <= MAX_GAIN:
                raise ValueError(f"{name} must be a finite number in [{MIN_GAIN:g}, {MAX_GAIN:g}] (a logit per mark), "
                                 f"got {getattr(self, name)}")
        if not (self.badge_gain >= self.cue_gain > 0):
            raise ValueError(f"gains need badge_gain >= cue_gain > 0 (the badge chain outranks the cue chains), got "
                             f"{self.badge_gain}, {self.cue_gain}")
        if self.badge_gain > MAX_GAIN_RATIO * self.cue_gain:
            raise ValueError(f"badge_gain / cue_gain must be at most {MAX_GAIN_RATIO:g} (the cue chains' share of a "
                             f"logit stays above float32 rounding), got {self.badge_gain} / {self.cue_gain}")
        if not 0.0 <= self.luminance <= 1.0:
            raise ValueError(f"luminance (the world's mean grey level) must be in [0, 1], got {self.luminance}: "
                             "measure it on a non-empty train split")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be in [0, 2**32 - 1] (seeds are non-negative 32-bit integers), got {self.seed}")
        if self.image_size < SIDE_MULTIPLE or self.image_size % SIDE_MULTIPLE:
            raise ValueError(f"image_size must be a positive multiple of {SIDE_MULTIPLE} (each stage halves the stem's "
                             f"grid), got {self.image_size}: build the world with --image-size 16 or 32")
        if self.layout and (len(self.layout) != 4 or any(sorted(r) != list(range(self.width)) for r in self.layout)):
            raise ValueError(f"layout must be 4 permutations of 0..{self.width - 1}")

    def _check_types(self) -> None:
        """Raise ValueError naming the field unless every count is an integer and every real value a finite number
        (``inf`` passes every comparison with a bound: a gain of inf compiled a model at chance)."""
        for name in ("n_classes", "attributes", "values", "distractors", "image_size", "seed"):
            if not _is_int(getattr(self, name)):
                raise ValueError(f"{name} must be an integer, got {getattr(self, name)!r}")
        for name in ("jitter", "badge_gain", "cue_gain", "luminance", "jitter_spread", "cue_gain_spread"):
            if not _is_real(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)!r}")
        margins = self.margins
        if not isinstance(margins, (tuple, list)) or not all(_is_real(m) for m in margins):
            raise ValueError(f"margins must be 4 finite numbers in (0, 1), got {margins!r}")

    @property
    def codes(self) -> int:
        """``G = A_attr V``: cue codes (and cue chains) per class."""
        return self.attributes * self.values

    @property
    def rate(self) -> float:
        """``p = 1 / V``: the share of a class's images carrying one cue code."""
        return 1.0 / self.values

    @property
    def width(self) -> int:
        """Channels per stage: ``n (1 + G) + D``."""
        return stage_width(self.n_classes, self.codes, self.distractors)

    def positions(self) -> tuple[int, int, int, int]:
        """Spatial positions of each stage's output: ``(side / 2^(l+1))^2`` for l = 0..3."""
        return tuple((self.image_size // 2 ** (stage + 1)) ** 2 for stage in range(4))  # type: ignore[return-value]

    def levels(self) -> np.ndarray:
        """float [4]: the distractors' gradient x activation per stage, ``(1 - m_l) p A``."""
        return (1.0 - np.asarray(self.margins)) * self.rate * self.cue_gain

    def jitter_signs(self) -> np.ndarray:
        """float [D]: each distractor's signed jitter magnitude ``s_i = (-1)^i (1 - jitter_spread i / D)``."""
        i = np.arange(self.distractors)
        return np.where(i % 2 == 0, 1.0, -1.0) * (1.0 - self.jitter_spread * i / self.distractors)

    def cue_gains(self) -> np.ndarray:
        """float [G]: each cue code's logit gain ``A_g = A (1 + cue_gain_spread g / G)`` (all ``A`` at spread 0)."""
        return self.cue_gain * (1.0 + self.cue_gain_spread * np.arange(self.codes) / self.codes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able values (the checkpoint's ``meta['compiled']``)."""
        return {"n_classes": self.n_classes, "attributes": self.attributes, "values": self.values,
                "distractors": self.distractors, "margins": list(self.margins), "jitter": self.jitter,
                "jitter_spread": self.jitter_spread, "cue_gain_spread": self.cue_gain_spread,
                "badge_gain": self.badge_gain, "cue_gain": self.cue_gain, "luminance": self.luminance,
                "image_size": self.image_size, "seed": self.seed, "layout": [list(r) for r in self.layout]}

    @classmethod
    def from_dict(cls, d: dict) -> "CompiledSpec":
        """The spec of :meth:`to_dict`'s values; a dict without ``jitter_spread`` or ``cue_gain_spread`` (a
        checkpoint written before issue 59 or before the cue gains) gets :data:`LEGACY_JITTER_SPREAD` or
        :data:`LEGACY_CUE_GAIN_SPREAD`, 0, which rebuilds that checkpoint's model."""
        return cls(int(d["n_classes"]), int(d["attributes"]), int(d["values"]), int(d["distractors"]),
                   tuple(d["margins"]), float(d["jitter"]), float(d["badge_gain"]), float(d["cue_gain"]),
                   float(d["luminance"]), int(d["image_size"]), int(d["seed"]), tuple(tuple(r) for r in d.get("layout", ())),
                   jitter_spread=float(d.get("jitter_spread", LEGACY_JITTER_SPREAD)),
                   cue_gain_spread=float(d.get("cue_gain_spread", LEGACY_CUE_GAIN_SPREAD)))


def stage_width(n_classes: int, codes: int, distractors: int | None = None) -> int:
    """Channels per stage of the compiled model: ``n (1 + G) + D`` (a badge chain and ``G`` cue chains per class, ``D``
    shared distractors; ``D`` defaults to ``G``, as ``vision-compile`` sets it).

    Args:
        n_classes: ``n``.
        codes: ``G = A_attr V``, the cue codes per class.
        distractors: ``D`` (default ``G``).

    Returns:
        The width: 98 for the default's 10 classes, 2 attributes x 4 values.
    """
    return n_classes * (1 + codes) + (codes if distractors is None else distractors)


def compile_spec(spec: CompiledSpec) -> CompiledSpec:
    """``spec`` with its layout: a permutation of the logical channels per stage from ``numpy.random.default_rng(
    seed)`` (the physical order is stored in the checkpoint, so a later numpy cannot change a model's truth)."""
    rng = np.random.default_rng(spec.seed)
    layout = tuple(tuple(int(i) for i in rng.permutation(spec.width)) for _ in STAGES)
    return replace(spec, layout=layout)


def logical_roles(spec: CompiledSpec) -> list[tuple[str, int, int]]:
    """(role, class, index) of each logical channel: ``("badge", c, 0)``, ``("cue", c, g)``, ``("distractor", -1,
    i)``; classes first (badge, then its G cue chains), then the distractors."""
    roles = [(kind, c, g) for c in range(spec.n_classes)
             for kind, g in [("badge", 0)] + [("cue", g) for g in range(spec.codes)]]
    return roles + [("distractor", -1, i) for i in range(spec.distractors)]


def channel_roles(spec: CompiledSpec) -> list[str]:
    """The role of every vertex in vertex order (``layer1`` channels first): ``'badge c'``, ``'cue c g'``,
    ``'distractor i'``."""
    names = [f"{kind} {c} {g}" if kind == "cue" else (f"badge {c}" if kind == "badge" else f"distractor {g}")
             for kind, c, g in logical_roles(spec)]
    out = []
    for row in spec.layout:
        physical = [""] * spec.width
        for logical, p in enumerate(row):
            physical[p] = names[logical]
        out += physical
    return out


def truth_components(spec: CompiledSpec, class_index: int) -> np.ndarray:
    """bool [U] in vertex order: class ``class_index``'s badge and cue chains at every stage (its planted circuit)."""
    if not 0 <= class_index < spec.n_classes:
        raise ValueError(f"class index {class_index} is outside 0..{spec.n_classes - 1}")
    mine = np.array([c == class_index and kind != "distractor" for kind, c, _ in logical_roles(spec)])
    out = np.zeros((4, spec.width), dtype=bool)
    for stage, row in enumerate(spec.layout):
        out[stage, np.asarray(row)] = mine
    return out.ravel()


def spec_of_meta(meta: dict | None) -> CompiledSpec | None:
    """The compiled spec of a checkpoint's meta (``meta['compiled']``), None for any other model."""
    if not meta or not meta.get(META_KEY):
        return None
    return CompiledSpec.from_dict(meta[META_KEY])


def detector(pattern: tuple[str, ...], hue: np.ndarray) -> tuple[np.ndarray, float]:
    """The linear score ``s(P) = sum_q w_q . P_q + const`` of a mark pattern over a 2 x 2 cell of pixels P in [0, 1].

    A class-colour pixel scores ``u_c . P`` (0.75 at ``H_c``, ``0.75 cos(2 pi / n)`` at the next class's colour, 0 at
    white, black and any grey); a white one ``mean(P)``; a black one ``1 - mean(P)``.

    Returns:
        ``(w [4, 3], const)``.
    """
    w = np.zeros((4, 3))
    const = 0.0
    for q, kind in enumerate(pattern):
        if kind == HUE:
            w[q] = hue
        elif kind == WHITE:
            w[q] = 1.0 / 3
        elif kind == BLACK:
            w[q] = -1.0 / 3
            const += 1.0
    return w, const


def all_marks(n_classes: int, codes: int) -> list[np.ndarray]:
    """Every mark the world draws, as float [4, 3] pixels in [0, 1] (uint8 / 255): each class's badge and codes."""
    colours = class_colours(n_classes)
    return [pattern_colours(p, colours[c]) / 255.0 for c in range(n_classes) for p in (BADGE, *CODES[:codes])]


def thresholds(spec: CompiledSpec) -> dict[tuple[int, int], tuple[np.ndarray, float, float, float]]:
    """Each detector's score, threshold and gain: ``{(class, code or -1 for the badge): (w, const, theta, kappa)}``.

    ``theta`` is halfway between the score of its own mark and the best score of any other mark of the world;
    ``kappa = 1 / (s* - theta)``, so the detector ``relu(kappa (s - theta))`` is 1 on its mark and 0 on every other.

    Raises:
        ValueError: two marks the detector cannot tell apart (no margin).
    """
    hues = hue_directions(spec.n_classes)
    colours = class_colours(spec.n_classes)
    marks = all_marks(spec.n_classes, spec.codes)
    out = {}
    for c in range(spec.n_classes):
        for g, pattern in [(-1, BADGE)] + list(enumerate(CODES[:spec.codes])):
            w, const = detector(pattern, hues[c])
            own = pattern_colours(pattern, colours[c]) / 255.0
            target = float((w * own).sum() + const)
            rival = max(float((w * m).sum() + const) for m in marks if not np.array_equal(m, own))
            if not target > rival:
                raise ValueError(f"the detector of class {c} mark {pattern} cannot tell it from another mark "
                                 f"(score {target:.3f} vs {rival:.3f})")
            theta = (target + rival) / 2
            out[(c, g)] = (w, const, theta, 1.0 / (target - theta))
    return out


def _set_bn(bn: "nn.BatchNorm2d", scale: np.ndarray, shift: np.ndarray) -> None:
    """Eval-mode BatchNorm that computes ``scale * x + shift`` (running mean 0, variance 1, eps folded into the
    weight)."""
    import torch

    bn.running_mean.zero_()
    bn.running_var.fill_(1.0)
    bn.weight.copy_(torch.as_tensor(np.asarray(scale) * np.sqrt(1.0 + bn.eps), dtype=torch.float32))
    bn.bias.copy_(torch.as_tensor(shift, dtype=torch.float32))


def compile_marked_resnet(spec: CompiledSpec) -> "nn.Module":
    """The hand-set world ResNet of ``spec`` (module docstring), in eval mode.

    The stem reads the world's normalized pixels ``x = (P - MEAN) / STD`` (0.5 and 0.25 in every colour): a
    detector's conv weight is ``STD kappa w`` at the four taps of its cell (kernel rows and columns 1..2: the stem
    position's own 2 x 2 pixels) and its BatchNorm shift ``kappa (MEAN sum w + const - theta)``. Stages 2..4 sum
    2 x 2 positions per channel and add the distractors' level steps; ``layer1`` is the identity (its residual
    branch is zero).

    Raises:
        ValueError: a spec without a layout (call :func:`compile_spec`), or detectors without a margin.
    """
    import torch

    from certified_circuits.vision.networks.world_resnet import WORLD_MEAN, WORLD_STD, world_resnet

    if not spec.layout:
        raise ValueError("the spec has no channel layout: pass it through compile_spec first")
    w_total = spec.width
    net = world_resnet(spec.n_classes, (w_total,) * 4, BLOCKS, STEM_STRIDE)
    roles = logical_roles(spec)
    detectors = thresholds(spec)
    levels = spec.levels()
    lay = [np.asarray(r) for r in spec.layout]
    positions = spec.positions()
    signs = spec.jitter_signs()
    MEAN, STD = WORLD_MEAN[0], WORLD_STD[0]  # noqa: N806 (the same in every colour)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        stem = np.zeros((w_total, 3, 3, 3))
        shift = np.zeros(w_total)
        for logical, (kind, c, g) in enumerate(roles):
            o = lay[0][logical]
            if kind == "distractor":
                sign = float(signs[g])  # s_g: its own signed jitter magnitude
                beta = levels[0] / positions[0]  # the stem map's mass is the stage-1 level
                for dr, dc in PIXELS:  # the cell's grey level: the mean of its 4 pixels x 3 colours
                    stem[o, :, 1 + dr, 1 + dc] = beta * spec.jitter * sign * STD / 12
                shift[o] = beta * (1 + spec.jitter * sign * (MEAN - spec.luminance))
                continue
            w, const, theta, kappa = detectors[(c, -1 if kind == "badge" else g)]
            for q, (dr, dc) in enumerate(PIXELS):
                stem[o, :, 1 + dr, 1 + dc] = STD * kappa * w[q]
            shift[o] = kappa * (MEAN * w.sum() + const - theta)
        net.conv1.weight.copy_(torch.as_tensor(stem, dtype=torch.float32))
        _set_bn(net.bn1, np.ones(w_total), shift)
        # layer1: identity (residual branch zero: bn2 scale 0)
        block = net.layer1[0]
        _set_bn(block.bn1, np.ones(w_total), np.zeros(w_total))
        _set_bn(block.bn2, np.zeros(w_total), np.zeros(w_total))
        is_distractor = np.array([kind == "distractor" for kind, _, _ in roles])
        for stage in (1, 2, 3):
            block = getattr(net, STAGES[stage])[0]
            before, here = lay[stage - 1], lay[stage]
            conv1 = torch.zeros_like(block.conv1.weight)
            conv1[here, before, 1:3, 1:3] = 1.0  # sum of the 2 x 2 positions of the same logical channel
            block.conv1.weight.copy_(conv1)
            conv2 = torch.zeros_like(block.conv2.weight)
            conv2[here, here, 1, 1] = 1.0
            block.conv2.weight.copy_(conv2)
            step = np.zeros(w_total)
            step[here[is_distractor]] = (levels[stage] - levels[stage - 1]) / positions[stage]
            _set_bn(block.bn1, np.ones(w_total), np.zeros(w_total))
            _set_bn(block.bn2, np.ones(w_total), step)
            _set_bn(block.downsample[1], np.zeros(w_total), np.zeros(w_total))
        fc = np.zeros((spec.n_classes, w_total))
        cue_gains = spec.cue_gains()
        for logical, (kind, c, g) in enumerate(roles):
            o = lay[3][logical]
            # cue code g: its own A_g
            gain = spec.badge_gain if kind == "badge" else float(cue_gains[g]) if kind == "cue" else 1.0
            rows = slice(None) if kind == "distractor" else c
            fc[rows, o] = positions[3] * gain  # the average pool divides the 2 x 2 mass by 4
        net.fc.weight.copy_(torch.as_tensor(fc, dtype=torch.float32))
        net.fc.bias.fill_(-float(spec.distractors * levels[3]))  # centres the logits (the same for every class)
    net.eval()
    return net


def expected_stem(spec: CompiledSpec, labels: np.ndarray, marks: dict[str, np.ndarray]) -> np.ndarray:
    """float32 [N, W, S/2, S/2]: what the stem (``layer1``'s output) of the detectors must hold on a marked split: 1 at
    each mark's stem position in its detector's channel (badge marks and stray marks in the badge channel of their
    class, a cue mark in its cue channel), 0 everywhere else; the distractor channels are NaN (not detectors).

    Args:
        labels: int [N]; ``marks``: the split's ``mark_slots``, ``stray``, ``cues`` (:func:`~certified_circuits.vision.
            data.marks.draw_marks`).
    """
    from certified_circuits.vision.data.marks import BADGE_MARKS, slot_pixels

    labels = np.asarray(labels, dtype=np.int64)
    n, side = len(labels), spec.image_size // 2
    out = np.zeros((n, spec.width, side, side), dtype=np.float32)
    lay = np.asarray(spec.layout[0])
    out[:, lay[spec.n_classes * (1 + spec.codes):]] = np.nan
    rows = np.flatnonzero(labels >= 0)
    cell = slot_pixels(spec.image_size)[marks["mark_slots"][rows]] // 2  # [n, marks, 2]
    badge = labels[rows] * (1 + spec.codes)
    logical = [badge, badge, marks["stray"][rows] * (1 + spec.codes)]
    logical += [badge + 1 + a * spec.values + marks["cues"][rows, a] for a in range(marks["cues"].shape[1])]
    for column, channel in enumerate(logical[: BADGE_MARKS + 1 + spec.attributes]):
        out[rows, lay[channel], cell[:, column, 0], cell[:, column, 1]] += 1.0
    return out


def detector_error(net: "nn.Module", spec: CompiledSpec, images: np.ndarray, labels: np.ndarray,
                   marks: dict[str, np.ndarray], batch_size: int = 256) -> float:
    """max |stem response - :func:`expected_stem`| over the detector channels of every image of a marked split (0 up
    to float rounding when each detector fires on its marks only).

    Raises:
        ValueError: a world whose marks the spec does not read (fewer attributes, another image size).
    """
    import torch

    from certified_circuits.vision.networks.world_resnet import WORLD_MEAN, WORLD_STD

    if images.shape[1] != spec.image_size or marks["cues"].shape[1] < spec.attributes:
        raise ValueError(f"the split's images ({images.shape[1]} px, {marks['cues'].shape[1]} cue attributes) are "
                         f"not the marked world the model reads ({spec.image_size} px, {spec.attributes} attributes)")
    worst = 0.0
    for s0 in range(0, len(images), batch_size):
        sl = slice(s0, s0 + batch_size)
        x = (torch.from_numpy(np.ascontiguousarray(images[sl])).permute(0, 3, 1, 2).float() / 255 - WORLD_MEAN[0]) / \
            WORLD_STD[0]
        with torch.no_grad():
            stem = net.layer1(net.relu(net.bn1(net.conv1(x))))
        want = torch.from_numpy(expected_stem(spec, labels[sl], {k: v[sl] for k, v in marks.items()}))
        known = ~torch.isnan(want)
        worst = max(worst, float((stem - want)[known].abs().max()))
    return worst
