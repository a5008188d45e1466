"""The truth verified per component (issue 42): which planted components are in a concept's ground truth, decided
from each component's own causal effect, and the ``verification.per_component`` block of the ground-truth JSON.

A planted circuit is verified as a whole by keeping or removing it (vision/ground_truth.py,
language/ground_truth.py). That does not show that each of its components matters, nor that no component outside
it does. Here each component ``u`` is ablated alone and its effect ``e_u >= 0`` on the concept's own metric is
measured on held-out data (vision: the class logit under mean ablation of one channel; language: the logit
difference under interchange patching of one edge), in units of the whole circuit's effect so that the numbers
compare across concepts and models.

**The rule.** Given the candidates ``P`` (the planted components) and the effects, ``epsilon`` is the strongest
effect of a component outside ``P`` and ``delta = RATIO * epsilon`` (:data:`RATIO` = 5)::

    epsilon = max_{u not in P} e_u,   delta = RATIO * epsilon,   truth = {u in P : e_u >= delta}.

So every true component moves the concept's metric at least 5 times more than any non-planted one. A planted
component below ``delta`` fails its own check and is not in the truth: it is listed in ``dropped`` and scored as
not true (a method that selects it selects a component whose effect is too weak to call), and the file keeps its
effect. In the clean regime ``epsilon`` is 0 (effects below :data:`EFFECT_FLOOR` are float rounding and count as 0)
and ``delta`` is the smallest positive planted effect, so every planted component with an effect is kept (a dead
planted channel, with no effect, is dropped). The concept fails (``passed`` false, truth = the planted
set, flagged) when nothing planted reaches ``delta``. ``delta`` and ``epsilon`` are measured, never tuned by hand;
both are written into the file with every component's effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the smallest separation delta / epsilon between the weakest true and the strongest non-true component (issue 42)
RATIO = 5.0
#: the most grey components (planted, strictly between epsilon and delta) a passed truth may have, as a share of the
#: truth's size (issue 50): they are neither true nor null, so they are left out of precision, recall and AUROC
MAX_GREY_SHARE = 0.1
#: effects below this (in units of the whole truth's effect) are float rounding of a batched forward pass, not an
#: effect: a structurally disconnected channel measures about 1e-8; they count as 0
EFFECT_FLOOR = 1e-6
#: the keys of ``verification.per_component``
BLOCK_KEYS = ("metric", "ablation", "unit", "delta", "epsilon", "ratio", "required_ratio", "passed", "effects",
              "dropped")


@dataclass(frozen=True)
class TruthSplit:
    """The per-component decision of one concept.

    Attributes:
        kept: bool ``[U]``: the verified truth (planted and at least ``delta``).
        delta: the threshold a true component's effect reaches (``RATIO * epsilon``).
        epsilon: the strongest effect of a non-planted component (0 when every component is planted).
        weakest: the weakest effect in the truth (NaN when nothing planted reaches ``delta``).
        passed: some planted component reaches ``delta`` and the grey zone is at most :data:`MAX_GREY_SHARE` of the
            truth's size.
        grey: bool ``[U]``: the planted components whose effect lies strictly between ``epsilon`` and ``delta``
            (neither true nor null: issue 50 scores them as neither hit nor miss).
    """

    kept: np.ndarray
    delta: float
    epsilon: float
    weakest: float
    passed: bool
    grey: np.ndarray

    @property
    def ratio(self) -> float:
        """``weakest / epsilon``, at least :data:`RATIO` for a passed split (inf when epsilon is 0, NaN when
        nothing is kept)."""
        if not self.passed:
            return float("nan")
        return float("inf") if self.epsilon == 0 else self.weakest / self.epsilon


def above_rounding(effects: Any) -> np.ndarray:
    """``effects`` with every value below :data:`EFFECT_FLOOR` (float rounding) set to 0: the one place the floor is
    applied, by :func:`split_truth` when it splits and by :func:`check_block` when it reads a block back."""
    effects = np.asarray(effects, dtype=np.float64)
    return np.where(effects < EFFECT_FLOOR, 0.0, effects)


def split_truth(effects: np.ndarray, planted: np.ndarray, ratio: float = RATIO) -> TruthSplit:
    """The verified truth of one concept: the planted components whose own effect is at least ``ratio`` times the
    strongest non-planted one (module docstring).

    Args:
        effects: float ``[U]``, each component's own effect (>= 0, finite).
        planted: bool ``[U]``, the planted components (at least one).
        ratio: the required ``delta / epsilon`` (:data:`RATIO`).

    Returns:
        :class:`TruthSplit` with ``delta = ratio * epsilon`` (the smallest positive planted effect when epsilon is
        0). When no planted component reaches ``delta``, ``kept`` is the planted set and ``passed`` is False; when
        more than :data:`MAX_GREY_SHARE` of ``|kept|`` planted components lie strictly between ``epsilon`` and
        ``delta`` (the grey zone), ``passed`` is False too.

    Raises:
        ValueError: shapes differ, an effect is negative or not finite, nothing is planted, or ``ratio < 1``.
    """
    effects = np.asarray(effects, dtype=np.float64)
    planted = np.asarray(planted, dtype=bool)
    if effects.shape != planted.shape or effects.ndim != 1:
        raise ValueError(f"effects {effects.shape} and planted {planted.shape} must be the same 1-D shape [U]")
    if not np.isfinite(effects).all() or (effects < 0).any():
        raise ValueError("effects must be finite and >= 0 (the size of each component's own effect)")
    if not planted.any():
        raise ValueError("no planted component: there is no truth to verify")
    if ratio < 1:
        raise ValueError(f"ratio {ratio} must be >= 1 (delta >= ratio * epsilon)")
    effects = above_rounding(effects)
    epsilon = float(effects[~planted].max()) if (~planted).any() else 0.0
    positive = effects[planted & (effects > 0)]
    delta = ratio * epsilon if epsilon > 0 else (float(positive.min()) if positive.size else float("inf"))
    kept = planted & (effects >= delta) & (effects > 0)
    grey = planted & ~kept & (effects > epsilon)
    if not kept.any():
        return TruthSplit(planted.copy(), delta, epsilon, float("nan"), False, grey)
    passed = bool(grey.sum() <= MAX_GREY_SHARE * kept.sum())
    return TruthSplit(kept, delta, epsilon, float(effects[kept].min()), passed, grey)


def per_component_block(names: Sequence[str], effects: np.ndarray, planted: np.ndarray, split: TruthSplit, *,
                        metric: str, ablation: str, unit: str) -> dict[str, Any]:
    """The ``verification.per_component`` block of one concept (docs/outputs.md).

    Args:
        names: the ``[U]`` component names (the attribution files').
        effects: float ``[U]``, each component's own effect.
        planted: bool ``[U]``, the planted candidates.
        split: :func:`split_truth` of them.
        metric: the concept's own metric (``"class logit"``, ``"logit difference"``).
        ablation: how one component is removed (``"mean"``, ``"interchange patching"``).
        unit: what an effect of 1 is (``"the whole truth's effect"``).

    Returns:
        ``{"metric", "ablation", "unit", "delta", "epsilon", "ratio", "required_ratio", "passed", "effects":
        {name: effect}, "dropped": [planted names not kept]}`` (JSON-able; an infinite ratio is written as null).
    """
    ratio = split.ratio
    return {
        "metric": metric,
        "ablation": ablation,
        "unit": unit,
        "delta": split.delta,
        "epsilon": split.epsilon,
        "ratio": ratio if np.isfinite(ratio) else None,
        "required_ratio": RATIO,
        "passed": bool(split.passed),
        "effects": {str(n): float(e) for n, e in zip(names, effects)},
        "dropped": [str(n) for n, p, k in zip(names, planted, split.kept) if p and not k],
    }


def _number(block: Mapping, key: str, where: str) -> float:
    """``block[key]`` as a finite number >= 0, or a ValueError naming the key."""
    value = block[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{where}: verification.per_component.{key} is {value!r}, expected a finite number >= 0")
    return float(value)


def check_block(block: Any, components: Sequence[str], where: str, concept_passed: bool | None = None) -> None:
    """Validate a ``verification.per_component`` block against its concept's ``components`` (the truth) and against
    the rule it states (module docstring), so that a file cannot claim a truth its own numbers contradict.

    Checked always: the keys; ``passed`` a boolean; every effect finite and >= 0; ``delta`` and ``epsilon`` finite
    and >= 0; ``required_ratio`` at least :data:`RATIO`; every true component has an effect; no dropped component is
    in the truth; a block that fails while its concept's ``passed`` (``concept_passed``) says true. Checked for a
    passed block (the rule): ``epsilon`` is the strongest non-planted effect; ``delta = required_ratio * epsilon``
    (the smallest positive true effect when epsilon is 0, and then delta > 0); every true effect is >= delta and
    > 0; every dropped component is below delta; the grey zone (dropped components above epsilon) is at most
    :data:`MAX_GREY_SHARE` of the truth's size.

    Args:
        block: the parsed block.
        components: the concept's true component names.
        where: the file and concept, for messages.
        concept_passed: the concept's ``verification.passed``, when the file has one.

    Raises:
        ValueError: naming the key, the values and what is wrong.
    """
    if not isinstance(block, Mapping):
        raise ValueError(f"{where}: verification.per_component must be an object with {list(BLOCK_KEYS)}")
    missing = [k for k in BLOCK_KEYS if k not in block]
    unknown = [k for k in block if k not in BLOCK_KEYS]
    if missing or unknown:
        raise ValueError(f"{where}: verification.per_component lacks {missing} / has unknown {unknown}; it holds "
                         f"exactly {list(BLOCK_KEYS)}")
    if not isinstance(block["passed"], bool):
        raise ValueError(f"{where}: verification.per_component.passed is {block['passed']!r}, expected true or false")
    effects = block["effects"]
    if not isinstance(effects, Mapping) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
            for v in effects.values()):
        raise ValueError(f"{where}: verification.per_component.effects must map every component to a finite "
                         "effect >= 0")
    absent = [c for c in components if c not in effects]
    if absent:
        raise ValueError(f"{where}: true component(s) {absent[:5]} have no effect in verification.per_component")
    dropped = block["dropped"]
    if not isinstance(dropped, list) or set(dropped) & set(components):
        raise ValueError(f"{where}: verification.per_component.dropped must list planted components left out of "
                         f"the truth, but it lists true ones: {sorted(set(dropped) & set(components))[:5]}")
    delta, epsilon = _number(block, "delta", where), _number(block, "epsilon", where)
    required = _number(block, "required_ratio", where)
    if required < RATIO:
        raise ValueError(f"{where}: verification.per_component.required_ratio is {required}; the truth rule needs "
                         f"delta >= {RATIO} x epsilon (rerun the ground-truth stage)")
    if concept_passed and not block["passed"]:
        raise ValueError(f"{where}: verification.passed is true but verification.per_component.passed is false: "
                         "a concept whose components fail their own check is not verified (rerun the ground-truth "
                         "stage)")
    if not block["passed"]:
        return
    truth, weak = set(components), set(dropped)
    true_effects = [float(above_rounding(effects[c])) for c in components]
    outside = max((v for n, v in effects.items() if n not in truth and n not in weak), default=0.0)
    outside = float(above_rounding(outside))  # as split_truth reads it
    expected_delta = required * epsilon if epsilon > 0 else min(true_effects)
    grey = [n for n in dropped if float(above_rounding(effects.get(n, 0.0))) > epsilon]
    problems = []
    if not np.isclose(epsilon, outside):
        problems.append(f"epsilon {epsilon} is not the strongest non-planted effect {outside}")
    if not np.isclose(delta, expected_delta) or delta <= 0:
        problems.append(f"delta {delta} is not required_ratio x epsilon = {expected_delta}" if epsilon > 0
                        else f"delta {delta} is not the weakest true effect {expected_delta} (epsilon 0)")
    if min(true_effects) < delta * (1 - 1e-9) or min(true_effects) <= 0:
        weakest = components[int(np.argmin(true_effects))]
        problems.append(f"true component {weakest!r} has effect {min(true_effects)}, below delta {delta}")
    if any(effects.get(n, 0.0) >= delta for n in weak):
        problems.append("a dropped component reaches delta")
    if len(grey) > MAX_GREY_SHARE * len(components):
        problems.append(f"{len(grey)} grey components (planted, between epsilon and delta) exceed "
                        f"{MAX_GREY_SHARE:.0%} of the truth's {len(components)}")
    if problems:
        raise ValueError(f"{where}: verification.per_component says passed, but {'; '.join(problems)}: the block "
                         "does not describe this truth (rerun the ground-truth stage)")


def grey_components(block: Mapping[str, Any]) -> list[str]:
    """The grey zone of a (checked) ``verification.per_component`` block: the dropped planted components whose
    effect is above ``epsilon`` (below ``delta``): neither true nor null, left out of precision, recall and AUROC."""
    epsilon = float(block["epsilon"])
    return [n for n in block["dropped"] if float(above_rounding(block["effects"].get(n, 0.0))) > epsilon]


def effect_summary(effects: Mapping[str, float], truth: Sequence[str]) -> dict[str, dict[str, float]]:
    """Min, median and max of the true and the non-true components' effects (the closing note's distributions).

    Args:
        effects: component name -> its effect.
        truth: the true component names.

    Returns:
        ``{"truth": {"min", "median", "max", "n"}, "non_truth": {...}}`` (NaN statistics for an empty side).
    """
    inside = set(truth)
    groups = {"truth": [v for n, v in effects.items() if n in inside],
              "non_truth": [v for n, v in effects.items() if n not in inside]}

    def stats(values: list[float]) -> dict[str, float]:
        a = np.asarray(values, dtype=np.float64)
        if not a.size:
            return {"min": float("nan"), "median": float("nan"), "max": float("nan"), "n": 0}
        return {"min": float(a.min()), "median": float(np.median(a)), "max": float(a.max()), "n": int(a.size)}

    return {name: stats(values) for name, values in groups.items()}
