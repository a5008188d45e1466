"""The truth verified per component (issue 42): which planted components are in a concept's ground truth, decided
from each component's own causal effect, and the ``verification.per_component`` block of the ground-truth JSON.

A planted circuit is verified as a whole by keeping or removing it (vision/ground_truth.py,
language/ground_truth.py). That does not show that each of its components matters, nor that no component outside
it does. Here each component ``u`` is ablated alone and its effect ``e_u >= 0`` on the concept's own metric is
measured on held-out data (vision: the class logit under mean ablation of one channel; language: the logit
difference under interchange patching of one edge), in units of the whole circuit's effect so that the numbers
compare across concepts and models.

**The rule.** Given the candidates ``P`` (the planted components) and the effects, the truth is the largest set
``T = {u in P : e_u >= theta}`` whose weakest member is at least :data:`RATIO` times the strongest component
outside it::

    delta = min_{u in T} e_u,   epsilon = max_{u not in T} e_u,   delta >= RATIO * epsilon.

A planted component below ``theta`` fails its check and is not in the truth (it joins the non-truth, whose bound
``epsilon`` it then counts in). No ``theta`` works when a non-planted component is within a factor :data:`RATIO` of
the strongest planted one: the concept then fails (``passed`` false) and its truth is the planted set, flagged.
``delta`` and ``epsilon`` are measured, not chosen, so no threshold is tuned by hand; both are written into the
file with every component's effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the smallest separation delta / epsilon between the weakest true and the strongest non-true component (issue 42)
RATIO = 5.0
#: the keys of ``verification.per_component``
BLOCK_KEYS = ("metric", "ablation", "unit", "delta", "epsilon", "ratio", "required_ratio", "passed", "effects",
              "dropped")


@dataclass(frozen=True)
class TruthSplit:
    """The per-component decision of one concept.

    Attributes:
        kept: bool ``[U]``: the verified truth (planted and at least ``delta``).
        delta: the weakest kept effect (``min_{u in T} e_u``; NaN when nothing is kept).
        epsilon: the strongest effect outside the truth (``max_{u not in T} e_u``; 0 when every component is kept).
        passed: ``delta >= ratio * epsilon`` for a non-empty truth.
    """

    kept: np.ndarray
    delta: float
    epsilon: float
    passed: bool

    @property
    def ratio(self) -> float:
        """``delta / epsilon`` (inf when epsilon is 0, NaN when nothing is kept)."""
        if not np.isfinite(self.delta):
            return float("nan")
        return float("inf") if self.epsilon == 0 else self.delta / self.epsilon


def split_truth(effects: np.ndarray, planted: np.ndarray, ratio: float = RATIO) -> TruthSplit:
    """The verified truth of one concept: the largest top set of the planted components, by effect, whose weakest
    member is at least ``ratio`` times every other component's effect (module docstring).

    Vectorized: the planted effects sorted ascending give the candidate thresholds; for threshold ``theta_i`` the
    strongest component outside is the max of the non-planted maximum and the largest planted effect strictly
    below ``theta_i`` (ties at the threshold are kept together).

    Args:
        effects: float ``[U]``, each component's own effect (>= 0, finite).
        planted: bool ``[U]``, the planted components (at least one).
        ratio: the required ``delta / epsilon`` (:data:`RATIO`).

    Returns:
        :class:`TruthSplit`. When no threshold separates, ``kept`` is the planted set and ``passed`` is False.

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
    outside = float(effects[~planted].max()) if (~planted).any() else 0.0
    candidates = np.sort(effects[planted])  # ascending: theta_i = candidates[i] keeps every planted e >= theta_i
    epsilon = np.maximum(outside, _strict_below(candidates))  # the planted ones below theta_i join the outside
    valid = (candidates > 0) & (candidates >= ratio * epsilon)
    if not valid.any():
        return TruthSplit(planted.copy(), float(candidates.min()), float(max(outside, 0.0)), False)
    i = int(np.argmax(valid))  # the smallest valid threshold: the largest truth
    theta = candidates[i]
    return TruthSplit(planted & (effects >= theta), float(theta), float(epsilon[i]), True)


def _strict_below(sorted_values: np.ndarray) -> np.ndarray:
    """For each value of an ascending array, the largest value strictly below it (0.0 when none): ties at the
    threshold are kept together, so they never count against each other."""
    idx = np.searchsorted(sorted_values, sorted_values, side="left") - 1
    return np.where(idx >= 0, sorted_values[np.maximum(idx, 0)], 0.0)


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


def check_block(block: Any, components: Sequence[str], where: str) -> None:
    """Validate a ``verification.per_component`` block against its concept's ``components`` (the truth).

    Args:
        block: the parsed block.
        components: the concept's true component names.
        where: the file and concept, for messages.

    Raises:
        ValueError: naming the key and what is wrong: a missing or misspelt key, a non-boolean ``passed``, a
            non-finite or negative effect, a true component without an effect, a dropped component in the truth,
            or ``delta`` / ``epsilon`` that are not the truth's weakest effect and the strongest one outside it.
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
    for key in ("delta", "epsilon"):
        if not isinstance(block[key], (int, float)) or isinstance(block[key], bool):
            raise ValueError(f"{where}: verification.per_component.{key} is {block[key]!r}, expected a number")
    truth = set(components)
    inside = min(effects[c] for c in components)
    outside = max((v for n, v in effects.items() if n not in truth), default=0.0)
    if block["passed"] and not (np.isclose(block["delta"], inside) and np.isclose(block["epsilon"], outside)):
        raise ValueError(f"{where}: verification.per_component says delta {block['delta']} and epsilon "
                         f"{block['epsilon']}, but the truth's weakest effect is {inside} and the strongest outside "
                         f"it {outside}: the block does not describe this truth (rerun the ground-truth stage)")


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
