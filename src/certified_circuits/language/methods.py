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
  :func:`clean_activation` (gradient x activation, no corrupted baseline), or a :class:`ConductanceStep`
  (``CEAP``: each step's change of a_u along the path, paired with that step's gradient and summed, below);
* ``ranking``: how a dataset score ranks components (``absolute``: |mean score|, hannamw/EAP-IG's top-n
  with ``absolute=True``; core.discovery.RANKINGS).

To add a method: one entry in :data:`METHODS` (plus, if it needs new math, one function its entry
references); nothing else names it.

CEAP (conductance EAP; Wu, Tonin and Cevher, arXiv 2606.16920; code LIONS-EPFL/Circuit-Variance, ``CEAP/ceap/
attribute.py``, ``ig_style="ceap"``) is conductance on EAP's edges. With z(k) the run whose input is
x_k = x_corr + (k/m) (x_clean - x_corr) (z(0) the corrupted run, z(m) the clean one), z_u(k) node u's output in
run k (for the ``input`` node: x_k itself) and in_v v's input (the copy read only by v),

    CEAP_i(u -> v) = sum_{k=1..m} (z_u(k-1) - z_u(k)) . dM_i/d in_v |_{z(k)}

per example i, the dot product over positions and model dimensions, no 1/m (a conductance is a sum: the
steps' changes add up to z_u(0) - z_u(m) = a_u(corrupted) - a_u(clean)). Its factor is not one activation
term times an averaged gradient: each of the m steps pairs its own change of a_u with its own gradient, so
the entry's factor is a :class:`ConductanceStep`, applied to consecutive runs (``step(z(k), z(k-1))``), and
the m gradient points are k/m for k = 1..m (:func:`conductance_points`, the step's end, as the paper and
``range(1, steps + 1)``) under every integration. Sign: this project's term is z_u(k-1) - z_u(k), the
corrupted-ward direction of EAP's ``corrupted - clean``, so that CEAP with m = 1 *is* EAP ((a_u(corr) -
a_u(clean)) . dM/d in_v at the clean input) and CEAP and EAP-IG agree in sign as m grows (both tend to the
same path integral). Its edges into v from the ``input`` node move by the same (x_clean - x_corr)/m every
step, so they equal ``EAP-IG-inputs`` under ``endpoint`` exactly (tested). Node level is natural: a node's
score is its own output's step changes times the gradient at that output, sum_k (z_u(k-1) - z_u(k)) .
dM/d a_u |_{z(k)}, and since every in_v is a copy of the residual stream dM/d a_u is the sum over u's
children, so a node's score is the sum of its outgoing edges' (tested for every method).

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
  == "standard"``: GPT-2), through which autograd still reaches it. For ``CEAP``, whose reference code is
  LIONS-EPFL/Circuit-Variance's ``ceap`` (a fork of hannamw/EAP-IG's ``attribute.py``, the same Graph and
  hooks), ``"hannamw"`` is that code's number: its step term z_u(k) - z_u(k-1) (``activation_curr -
  activation_prev``: the clean-ward direction, every score negated), the same points k = 1..m and no 1/m;
  its ``scores /= total_items`` with a summed metric is the mean of our rows. It has no node-level code, so
  ``CEAP`` at node level under ``"hannamw"`` is refused. The attribution file records the step term
  (``conductance_term``).
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


#: CEAP's step terms (module docstring): this project's corrupted-ward change, LIONS-EPFL's clean-ward one
CONDUCTANCE_TERMS = ("z(k-1) - z(k)", "z(k) - z(k-1)")


@dataclass(frozen=True)
class ConductanceStep:
    """CEAP's activation term: the change of every node's output over one step of the input path.

    A factor like :func:`corrupted_minus_clean`, but applied to each pair of consecutive runs of the path
    (``step(z(k), z(k-1))``) and paired with that run's gradient, the products summed over k = 1..m (module
    docstring); :mod:`.hooked` and :mod:`.eap_ig` dispatch on this type.

    Attributes:
        term: ``"z(k-1) - z(k)"`` (this project: the direction of EAP's corrupted - clean) or ``"z(k) -
            z(k-1)"`` (LIONS-EPFL/Circuit-Variance's ``activation_curr - activation_prev``): one of
            :data:`CONDUCTANCE_TERMS`.
    """

    term: str = CONDUCTANCE_TERMS[0]

    def __post_init__(self) -> None:
        if self.term not in CONDUCTANCE_TERMS:
            raise ValueError(f"term must be one of {CONDUCTANCE_TERMS}, got {self.term!r}")

    def __call__(self, current: "torch.Tensor", previous: "torch.Tensor") -> "torch.Tensor":
        """The step's term.

        Args:
            current: z(k), node outputs of run k [..., n_up, P, d].
            previous: z(k-1), those of run k - 1 (the corrupted run for k = 1).

        Returns:
            ``previous - current`` or ``current - previous`` (:attr:`term`).
        """
        return previous - current if self.term == CONDUCTANCE_TERMS[0] else current - previous


#: CEAP's factor in this project's convention, and in LIONS-EPFL's (``integration="hannamw"``)
conductance_step = ConductanceStep()
lions_conductance_step = ConductanceStep(CONDUCTANCE_TERMS[1])


def _fixed(*alphas: float) -> Callable[..., list[float]]:
    def points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
        return list(alphas)
    return points


def _activation_points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
    """k/m for k = 1..m under every convention, as the reference's ``get_scores_ig_activations``."""
    integration_points(ig_steps, "endpoint")     # validates m
    return [k / ig_steps for k in range(1, ig_steps + 1)]


def conductance_points(ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
    """CEAP's gradient points: k/m for k = 1..m under every convention (module docstring).

    Args:
        ig_steps: m >= 1, the number of steps of the path from the corrupted input (alpha = 0, the run z(0)
            whose outputs only start the first step's change) to the clean one (alpha = 1).
        integration, level: validated only; the conductance of the paper and of LIONS-EPFL's code
            (``for step in range(1, steps+1)``) takes each step's gradient at its end.

    Returns:
        The m alphas, in increasing order.
    """
    integration_points(ig_steps, integration, level)     # validates all three
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
    . dM/d in_{m_l}); ``conductance_term``: a conductance method's step term (:class:`ConductanceStep`), None
    for the others.
    """

    integration: str
    points: tuple[float, ...]
    input_gradient: str
    mlp_node_gradient: str
    conductance_term: str | None = None     # CEAP's step term (CONDUCTANCE_TERMS); None for the other methods

    def attrs(self) -> dict[str, str]:
        """The convention as attribution-file attributes (strings: alphas with repr precision), with
        ``conductance_term`` for a conductance method (``CEAP``) only."""
        out = {"ig_points": ", ".join(repr(a) for a in self.points), "input_gradient": self.input_gradient,
               "mlp_node_gradient": self.mlp_node_gradient}
        if self.conductance_term is not None:
            out["conductance_term"] = self.conductance_term
        return out


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
    def conductance(self) -> bool:
        """Whether the activation term is a per-step change (:class:`ConductanceStep`: ``CEAP``), the products
        summed over the steps, instead of one term times the gradient averaged over the points."""
        return isinstance(self.factor, ConductanceStep)

    def factor_for(self, integration: str) -> Callable[[Any, Any], Any]:
        """The activation term a run under ``integration`` uses: :attr:`factor`, except a conductance under
        ``"hannamw"``, which takes LIONS-EPFL's clean-ward step term (module docstring)."""
        if self.conductance and integration == "hannamw":
            return lions_conductance_step
        return self.factor

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
            interpolates activations at edge level, the MLP gradient only at node level, and a
            conductance's step term (to LIONS-EPFL's).

        Raises:
            ValueError: a conductance at node level under ``"hannamw"`` (its reference code scores edges only).
        """
        integration_points(ig_steps, integration, level)               # validates all three
        hannamw = integration == "hannamw"
        if self.conductance and hannamw and level == "node":
            raise ValueError(f"method {self.name} has no node level under integration 'hannamw': its reference code "
                             f"(LIONS-EPFL/Circuit-Variance ceap) scores edges only; use 'reference' or 'endpoint'")
        constant_input = hannamw and self.interpolates == "activations" and level == "edge"
        step = self.factor_for(integration)
        return Convention(integration, tuple(self.points(ig_steps, integration, level)),
                          "trainable-position" if constant_input else "always",
                          "input" if hannamw and level == "node" else "output",
                          step.term if isinstance(step, ConductanceStep) else None)

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
    MethodSpec("CEAP", "conductance EAP: each of m steps from the corrupted to the clean input, the change of "
               "u's output x the gradient at in_v there, summed over k = 1..m (Wu, Tonin and Cevher; "
               "LIONS-EPFL/Circuit-Variance ceap)", "inputs", conductance_points, factor=conductance_step,
               uses_ig_steps=True),
)}


def method_spec(method: str) -> MethodSpec:
    """The registry entry of ``method`` (ValueError naming the registered methods otherwise)."""
    try:
        return METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"method must be one of {', '.join(METHODS)} (hannamw/EAP-IG's names, grad-x-act and "
                         f"CEAP), got {method!r}") from None


def check_method(method: str, level: str, ig_steps: int, integration: str) -> MethodSpec:
    """The method's entry, after refusing an unknown method or level or bad IG settings before any work."""
    spec = method_spec(method)
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if level not in spec.levels:
        raise ValueError(f"method {method} has no {level} level (levels: {', '.join(spec.levels)})")
    spec.convention(level, ig_steps, integration)     # validates the points, and what the method refuses
    return spec
