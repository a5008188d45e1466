"""The language attribution methods: one frozen :class:`MethodSpec` per method, in :data:`METHODS`.

Every other place that names a method derives from this registry: the ``language-attribute`` stage's
``--method`` choices (:mod:`certified_circuits.cli.language`), the workflow's check of ``language.method``
(:func:`certified_circuits.pipeline.config_language.check_language_method`; ``config.schema.yaml`` does not repeat the
names), the dispatch of
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

Conventions (``integration``, config key ``language.ig_integration``; docs/reference_parity.md). Where
hannamw/EAP-IG's code and this project differ, :func:`convention` says which rule a run uses, and the
attribution file records it:

* ``"reference"`` (default) and ``"endpoint"``: this project's conventions, the same at every level. The
  IG points of ``EAP-IG-inputs`` are k/m for k = 0..m-1 (``reference``: the points of the reference's *edge*
  code, ``get_scores_eap_ig`` in ``attribute.py``, which computed the published circuits) or k = 1..m
  (``endpoint``: the right Riemann sum written in the EAP-IG paper, Hanna et al. 2024, and in IG, Sundararajan
  et al. 2017). One rule for both levels keeps a node's score the sum of its outgoing edges' scores.
  ``EAP-IG-activations``' interpolated input carries the gradient, as every other interpolated group does,
  and a node is scored with the gradient at its own output.
* ``"hannamw"``: exactly what the reference's code computes for the method and level, to reproduce a
  published number: k = 0..m-1 at edge level, k = 1..m at node level (``attribute_node.py``); at node level an
  MLP's activation difference (at its output) is multiplied by the gradient at its *input*
  (``make_hooks_and_matrices`` puts an MLP's backward hook on ``node.in_hook``); in ``EAP-IG-activations``
  (edge level, ``get_scores_ig_activations``) the input group's interpolation is a constant, so an input
  whose only parent is the ``input`` node receives no gradient in the input group's passes unless the model
  adds a trainable position embedding after the embedding (TransformerLens ``positional_embedding_type
  == "standard"``: GPT-2), through which autograd still reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    import torch

#: the conventions (module docstring): this project's two Riemann sums, and the reference's code per level
INTEGRATIONS = ("reference", "endpoint", "hannamw")
#: EAP-IG's ranking convention (hannamw/EAP-IG top-n): edges by |mean score|, never the mean of |scores|
RANKING = "absolute"

#: edge-level (every EAP edge a component) or node-level (every head and MLP) circuits
LEVELS = ("edge", "node")
#: where a method's points alpha apply
INTERPOLATIONS = ("none", "inputs", "activations")


def integration_points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
    """Interpolation coefficients alpha_k = k/m of ``EAP-IG-inputs``' Riemann sum (0 = corrupted, 1 = clean input).

    The score averages dM/d in_v at x_k = x_corr + alpha_k (x_clean - x_corr), an m-point Riemann sum of the
    path integral int_0^1 dM/d in_v(x(alpha)) d alpha (Hanna et al. 2024, EAP-IG; Sundararajan et al. 2017, IG).

    Args:
        ig_steps: m >= 1.
        integration: ``"reference"``: k = 0..m-1 at every level (hannamw/EAP-IG's edge code,
            ``get_scores_eap_ig``: ``for step in range(0, steps)``); ``"endpoint"``: k = 1..m at every level
            (the papers' right Riemann sum); ``"hannamw"``: the reference's code for ``level``, k = 0..m-1 at
            edge level and k = 1..m at node level (``attribute_node.py``: ``range(1, steps + 1)``).
        level: ``"edge"`` or ``"node"`` (read by ``"hannamw"`` only).

    Returns:
        The m alphas, in increasing order.
    """
    if isinstance(ig_steps, bool) or not isinstance(ig_steps, (int, np.integer)) or ig_steps < 1:
        raise ValueError(f"ig_steps must be an integer >= 1, got {ig_steps!r}")
    if integration not in INTEGRATIONS:
        raise ValueError(f"integration must be one of {INTEGRATIONS} ('reference': k = 0..m-1 at every level, the "
                         f"points of hannamw/EAP-IG's edge code; 'endpoint': k = 1..m at every level; 'hannamw': "
                         f"the reference's code per level, k = 0..m-1 for edges and 1..m for nodes), "
                         f"got {integration!r}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    right = integration == "endpoint" or (integration == "hannamw" and level == "node")
    ks = range(1, ig_steps + 1) if right else range(0, ig_steps)
    return [k / ig_steps for k in ks]


def corrupted_minus_clean(clean: "torch.Tensor", corrupted: "torch.Tensor") -> "torch.Tensor":
    """EAP's activation term a_u(corrupted) - a_u(clean) (the reference's ``activation_difference``)."""
    return corrupted - clean


def clean_activation(clean: "torch.Tensor", corrupted: "torch.Tensor | None") -> "torch.Tensor":
    """Gradient x activation's term: the clean activation a_u(clean) itself (no corrupted baseline)."""
    return clean


def _fixed(*alphas: float) -> Callable[..., list[float]]:
    def points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
        return list(alphas)
    return points


def _activation_points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
    """k/m for k = 1..m under every convention, as the reference's ``get_scores_ig_activations``."""
    integration_points(ig_steps, "endpoint")     # validates m
    return [k / ig_steps for k in range(1, ig_steps + 1)]


@dataclass(frozen=True)
class Convention:
    """The rules one run follows where hannamw/EAP-IG and this project differ (module docstring).

    ``points``: the alphas of the method (:attr:`MethodSpec.points` at this level and integration);
    ``input_gradient``: ``"always"``: an interpolated input carries the gradient (this project), or
    ``"trainable-position"``: the reference's constant interpolation in ``EAP-IG-activations``' input passes,
    where an input whose only parent is ``input`` gets a gradient only through a trainable position
    embedding; ``mlp_node_gradient``: where a node-level MLP score takes its gradient, ``"output"`` (this
    project: s(m_l) = (a(corr) - a(clean)) . dM/d a_{m_l}) or ``"input"`` (the reference's node code:
    . dM/d in_{m_l}).
    """

    integration: str
    points: tuple[float, ...]
    input_gradient: str
    mlp_node_gradient: str

    def attrs(self) -> dict[str, str]:
        """The convention as attribution-file attributes (strings: alphas with repr precision)."""
        return {"ig_points": ", ".join(repr(a) for a in self.points), "input_gradient": self.input_gradient,
                "mlp_node_gradient": self.mlp_node_gradient}


@dataclass(frozen=True)
class MethodSpec:
    """One attribution method (module docstring)."""

    name: str
    description: str
    interpolates: str                                       # INTERPOLATIONS
    points: Callable[..., list[float]]                      # (ig_steps, integration, level) -> alphas
    factor: Callable[[Any, Any], Any] = corrupted_minus_clean
    levels: tuple[str, ...] = LEVELS
    ranking: str = RANKING                                  # core.discovery.RANKINGS
    uses_ig_steps: bool = False                             # m (and for inputs the integration) changes the points

    @property
    def needs_corrupted(self) -> bool:
        """Whether the corrupted prompt's run is read (activation difference or an interpolation)."""
        return (self.factor is not clean_activation or self.interpolates == "activations"
                or self.points(1, "reference") != [1.0])

    def convention(self, level: str, ig_steps: int, integration: str) -> Convention:
        """What this method computes at ``level`` under ``integration`` (module docstring; docs/reference_parity.md).

        Args:
            level: ``"edge"`` or ``"node"``.
            ig_steps: m.
            integration: one of :data:`INTEGRATIONS`.

        Returns:
            The :class:`Convention`; ``"hannamw"`` changes the input gradient only where this method
            interpolates activations at edge level, and the MLP gradient only at node level.
        """
        integration_points(ig_steps, integration, level)               # validates all three
        hannamw = integration == "hannamw"
        constant_input = hannamw and self.interpolates == "activations" and level == "edge"
        return Convention(integration, tuple(self.points(ig_steps, integration, level)),
                          "trainable-position" if constant_input else "always",
                          "input" if hannamw and level == "node" else "output")

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
    integration_points(ig_steps, integration, level)
    return spec
