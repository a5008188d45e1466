"""The language attribution methods: one frozen :class:`MethodSpec` per method, in :data:`METHODS`.

Every other place that names a method derives from this registry: the ``language-attribute`` stage's
``--method`` choices (:mod:`certified_circuits.cli.language`), ``config.schema.yaml``'s
``language.method`` enum (a test checks it equals the registry's keys), the dispatch of
:func:`~.hooked.scores_batch` and :func:`~.attribution.score_examples` (which points, which activation
factor, hook path or the GPT-2 decomposed path) and the method and ranking recorded in the attribution
file (:func:`~.attribution.attribute_task`).

Every method scores example i's edge u -> v as

    s_i(u -> v) = factor(a_u(clean_i), a_u(corrupted_i)) . (1/|A|) sum_{alpha in A} dM_i/d in_v |_alpha

(and a node u as the same product with the gradient at u's own output), with M_i = logit(answer_i) -
logit(distractor_i) at the last prompt position (:mod:`.hooked`'s module docstring). A method is therefore:

* ``interpolates``: where the points alpha of A apply: ``"inputs"`` (the ``input`` node, x = x_corr +
  alpha (x_clean - x_corr); ``"none"`` is the same with fixed points), or ``"activations"`` (each node
  group's output in turn, hannamw/EAP-IG's ``get_scores_ig_activations``);
* ``points(m, integration)``: the alphas (0 = corrupted, 1 = clean), m = ``ig_steps``;
* ``factor``: the activation term, :func:`corrupted_minus_clean` (EAP's activation difference) or
  :func:`clean_activation` (gradient x activation, no corrupted baseline);
* ``ranking``: how a dataset score ranks components (``absolute``: |mean score|, hannamw/EAP-IG's top-n
  with ``absolute=True``; core.discovery.RANKINGS).

To add a method: one entry in :data:`METHODS` (plus, if it needs new math, one function its entry
references); nothing else names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    import torch

INTEGRATIONS = ("reference", "endpoint")
#: EAP-IG's ranking convention (hannamw/EAP-IG top-n): edges by |mean score|, never the mean of |scores|
RANKING = "absolute"

#: edge-level (every EAP edge a component) or node-level (every head and MLP) circuits
LEVELS = ("edge", "node")
#: where a method's points alpha apply
INTERPOLATIONS = ("none", "inputs", "activations")


def integration_points(ig_steps: int, integration: str = "reference") -> list[float]:
    """Interpolation coefficients k/m of the IG Riemann sum (0 = corrupted input, 1 = clean input).

    ``"reference"``: k = 0..m-1 (hannamw/EAP-IG ``get_scores_eap_ig``); ``"endpoint"``: k = 1..m.
    """
    if isinstance(ig_steps, bool) or not isinstance(ig_steps, (int, np.integer)) or ig_steps < 1:
        raise ValueError(f"ig_steps must be an integer >= 1, got {ig_steps!r}")
    if integration == "reference":
        ks = range(0, ig_steps)
    elif integration == "endpoint":
        ks = range(1, ig_steps + 1)
    else:
        raise ValueError(f"integration must be one of {INTEGRATIONS} ('reference': k = 0..m-1 as in "
                         f"hannamw/EAP-IG; 'endpoint': k = 1..m), got {integration!r}")
    return [k / ig_steps for k in ks]


def corrupted_minus_clean(clean: "torch.Tensor", corrupted: "torch.Tensor") -> "torch.Tensor":
    """EAP's activation term a_u(corrupted) - a_u(clean) (the reference's ``activation_difference``)."""
    return corrupted - clean


def clean_activation(clean: "torch.Tensor", corrupted: "torch.Tensor | None") -> "torch.Tensor":
    """Gradient x activation's term: the clean activation a_u(clean) itself (no corrupted baseline)."""
    return clean


def _fixed(*alphas: float) -> Callable[[int, str], list[float]]:
    def points(ig_steps: int, integration: str = "reference") -> list[float]:
        return list(alphas)
    return points


def _activation_points(ig_steps: int, integration: str = "reference") -> list[float]:
    """k/m for k = 1..m, as the reference's ``get_scores_ig_activations`` (``integration`` is not read)."""
    integration_points(ig_steps, "endpoint")     # validates m
    return [k / ig_steps for k in range(1, ig_steps + 1)]


@dataclass(frozen=True)
class MethodSpec:
    """One attribution method (module docstring)."""

    name: str
    description: str
    interpolates: str                                       # INTERPOLATIONS
    points: Callable[[int, str], list[float]]               # (ig_steps, integration) -> alphas
    factor: Callable[[Any, Any], Any] = corrupted_minus_clean
    levels: tuple[str, ...] = LEVELS
    ranking: str = RANKING                                  # core.discovery.RANKINGS
    uses_ig_steps: bool = False                             # m (and for inputs the integration) changes the points

    @property
    def needs_corrupted(self) -> bool:
        """Whether the corrupted prompt's run is read (activation difference or an interpolation)."""
        return (self.factor is not clean_activation or self.interpolates == "activations"
                or self.points(1, "reference") != [1.0])

    @property
    def decomposed(self) -> bool:
        """Whether GPT-2's decomposed forward (:mod:`.eap_ig`) computes it: input or no interpolation."""
        return self.interpolates in ("none", "inputs")


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("EAP", "edge attribution patching: activation difference x gradient at the clean input "
               "(hannamw/EAP-IG get_scores_eap)", "none", _fixed(1.0)),
    MethodSpec("EAP-IG-inputs", "EAP with integrated gradients: the gradient averaged over m inputs between "
               "corrupted and clean (get_scores_eap_ig; integration reference k = 0..m-1 or endpoint 1..m)",
               "inputs", integration_points, uses_ig_steps=True),
    MethodSpec("EAP-IG-activations", "EAP with integrated gradients over each node group's output in turn, "
               "k/m for k = 1..m (get_scores_ig_activations)", "activations", _activation_points,
               uses_ig_steps=True),
    MethodSpec("clean-corrupted", "activation difference x the gradient averaged at the clean and the "
               "corrupted input (get_scores_clean_corrupted)", "none", _fixed(1.0, 0.0)),
    MethodSpec("grad-x-act", "gradient x activation: clean activation x gradient at the clean input, no "
               "corrupted baseline", "none", _fixed(1.0), factor=clean_activation),
)}


def method_spec(method: str) -> MethodSpec:
    """The registry entry of ``method`` (ValueError naming the registered methods otherwise)."""
    try:
        return METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"method must be one of {', '.join(METHODS)} (hannamw/EAP-IG's names and grad-x-act), "
                         f"got {method!r}") from None


def check_method(method: str, level: str, ig_steps: int, integration: str) -> MethodSpec:
    """The method's entry, after refusing an unknown method or level or bad IG settings before any work."""
    spec = method_spec(method)
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if level not in spec.levels:
        raise ValueError(f"method {method} has no {level} level (levels: {', '.join(spec.levels)})")
    integration_points(ig_steps, integration)
    return spec
