"""Your own vision base algorithm: ``vision.scorers`` entries written as ``package.module:function``.

Two kinds, told apart by the function's parameter names (checked before any job runs):

- **additive scorer** ``f(activations, gradients, channel_dim) -> Tensor [B, U]``: per-example scores
  of every component from the recorded block outputs (one tensor per component module, e.g.
  ``[B, C, H, W]``) and their gradients with respect to the class logit; ``channel_dim`` is the
  channel axis of those tensors (1 or -1). The base algorithm keeps the top-K per block of the mean
  score over the concept dataset, so the votes come from the cached scores (paper App. D: one
  attribution pass for all ``n0 + n`` sub-datasets). An attribute ``f.ranking = "absolute"`` ranks by
  ``|mean|`` (default ``"signed"``).
- **black-box discovery function** ``f(model, images, label, k_grid) -> bool [nK, U]``: the circuit
  at every K of the grid found on ``images`` (the examples a sub-dataset keeps, normalised
  ``[n, 3, H, W]``) of class ``label`` of ``model`` (a :class:`~certified_circuits.vision.networks.models.VisionModel`).
  It runs on the full dataset and on every one of the ``n0 + n`` sub-datasets
  (:func:`certified_circuits.api.sample_votes`, in parallel processes); an empty sub-dataset gives the
  empty circuit without calling it (docs/architecture.md, section 3).

The name in result paths is the function's name (``my_lab.scores:taylor`` -> ``taylor``). A module is
imported from the installed packages, ``PYTHONPATH`` or the working directory.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

#: built-in scorers that ``vision-attribute`` writes only when asked (:mod:`.scorers`; named here, without torch, for
#: the CLI's choices and the config check): ``conductance`` (``--conductance BASELINE``, m passes per batch)
OPTIONAL_SCORERS: tuple[str, ...] = ("conductance",)
#: conductance's baselines (``vision.conductance.baseline``): the all-zero normalised input, or the mean image of a
#: fixed class-agnostic reference set (:mod:`.scorers` says why never the concept dataset's own)
CONDUCTANCE_BASELINES: tuple[str, ...] = ("zeros", "mean")
#: the Captum method conductance equals (``LayerConductance.attribute(method=...)``)
CONDUCTANCE_METHOD = "riemann_trapezoid"
#: conductance's default m (``vision.conductance.steps``, ``vision-attribute --conductance-steps``)
CONDUCTANCE_STEPS = 16

ADDITIVE_PARAMETERS = ("activations", "gradients", "channel_dim")
DISCOVERY_PARAMETERS = ("model", "images", "label", "k_grid")
SIGNATURES = (
    "an additive scorer is f(activations, gradients, channel_dim) -> Tensor [B, U]; a black-box discovery "
    "function is f(model, images, label, k_grid) -> bool [nK, U] (docs/custom_vision.md)"
)


@dataclass(frozen=True)
class ScorerPlugin:
    """A user's base algorithm.

    Attributes:
        spec: ``package.module:function``.
        name: the function's name: the scorer's name in attribution files and result paths.
        kind: ``additive`` (per-example scores, cached path) or ``discovery`` (black box, naive path).
        function: the callable.
        ranking: ``signed`` or ``absolute`` (additive scorers; ``function.ranking``, default signed).
    """

    spec: str
    name: str
    kind: Literal["additive", "discovery"]
    function: Callable[..., Any]
    ranking: str = "signed"


def is_plugin(spec: str) -> bool:
    """Whether a ``vision.scorers`` entry names a plugin (``module:function``) rather than a built-in scorer."""
    return ":" in spec


def plugin_name(spec: str) -> str:
    """The result-path name of a plugin entry (its function name), without importing it."""
    return spec.rsplit(":", 1)[1]


def load_plugin(spec: str) -> ScorerPlugin:
    """Import and check a ``package.module:function`` entry.

    Returns:
        the :class:`ScorerPlugin`.

    Raises:
        ValueError: the entry is malformed, the module cannot be imported, the function is missing or not
            callable, its parameters match neither kind, or its ``ranking`` is unknown.
    """
    module_name, _, function_name = spec.rpartition(":")
    if not module_name or not function_name.isidentifier():
        raise ValueError(f"vision.scorers entry {spec!r}: write a plugin as package.module:function")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time error of the user's module
        raise ValueError(
            f"vision.scorers entry {spec!r}: cannot import {module_name} ({type(exc).__name__}: {exc}); "
            f"install it, or put it on PYTHONPATH or in the working directory"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"vision.scorers entry {spec!r}: {module_name} has no function {function_name}")
    parameters = tuple(inspect.signature(function).parameters)
    if parameters[: len(ADDITIVE_PARAMETERS)] == ADDITIVE_PARAMETERS:
        kind: Literal["additive", "discovery"] = "additive"
    elif parameters[: len(DISCOVERY_PARAMETERS)] == DISCOVERY_PARAMETERS:
        kind = "discovery"
    else:
        raise ValueError(
            f"vision.scorers entry {spec!r}: {function_name}{tuple(parameters)} has the wrong signature: {SIGNATURES}"
        )
    ranking = str(getattr(function, "ranking", "signed"))
    if ranking not in ("signed", "absolute"):
        raise ValueError(
            f"vision.scorers entry {spec!r}: {function_name}.ranking is {ranking!r}; use 'signed' or 'absolute'"
        )
    return ScorerPlugin(spec, function_name, kind, function, ranking)


def additive_scores(plugin: ScorerPlugin, activations: list, gradients: list, channel_dim: int, n_components: int):
    """Run an additive scorer on one batch and check its output.

    Returns:
        float32 ``[B, U]`` tensor.

    Raises:
        ValueError: the output is not a ``[B, n_components]`` tensor of finite values.
    """
    import torch

    from certified_circuits.core.sampling import AlgorithmError

    batch = activations[0].shape[0]
    try:
        out = plugin.function(activations=activations, gradients=gradients, channel_dim=channel_dim)
    except Exception as exc:
        raise AlgorithmError(
            f"plug-in {plugin.spec} failed on a batch of {batch} images: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (batch, n_components):
        shape = tuple(out.shape) if hasattr(out, "shape") else type(out).__name__
        raise ValueError(
            f"scorer {plugin.spec} returned {shape}; it must return a Tensor [B, U] = [{batch}, {n_components}]"
        )
    out = out.detach().float()
    if not torch.isfinite(out).all():
        raise ValueError(f"scorer {plugin.spec} returned non-finite scores")
    return out


class ImageDiscovery:
    """``A(kept_indices) -> bool [nK, U]`` of a black-box discovery plugin on one concept dataset (picklable:
    :func:`certified_circuits.api.sample_votes` runs it in worker processes)."""

    def __init__(self, spec: str, model: Any, images: Any, label: int, k_grid: np.ndarray, concept: str = "") -> None:
        self.spec, self.model, self.images, self.label, self.concept = spec, model, images, int(label), concept
        self.k_grid = np.asarray(k_grid, dtype=np.float64)
        self._function: Callable[..., Any] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_function": None}  # the function is imported again in the worker

    def __call__(self, kept: np.ndarray) -> np.ndarray:
        shape = (len(self.k_grid), self.model.n_vertices)
        if len(kept) == 0:
            return np.zeros(shape, dtype=bool)
        if self._function is None:
            self._function = load_plugin(self.spec).function
        out = np.asarray(
            self._function(model=self.model, images=self.images[kept], label=self.label, k_grid=self.k_grid)
        )
        if out.shape != shape or out.dtype != bool:
            raise ValueError(
                f"discovery function {self.spec} returned {out.dtype} {out.shape}; it must return bool "
                f"[nK, U] = {list(shape)}"
            )
        return out


def discovery_votes(
    spec: str,
    model: Any,
    images: Any,
    label: int,
    k_grid: Any,
    *,
    p_del: float,
    n0: int,
    n: int,
    seed: int,
    workers: int = 1,
    progress: bool = True,
    attrs: dict | None = None,
):
    """Algorithm 2 for a black-box discovery plugin: the votes contract of one concept dataset.

    The masks are :func:`certified_circuits.core.smoothing.selection_and_certification_masks` of
    ``seed`` (the two independent streams, as in the cached ``votes`` stage); the plugin runs on the full
    dataset (the baseline) and on every sub-dataset (:func:`certified_circuits.core.sampling.sample_votes`).

    Args:
        spec: the plugin entry (``module:function``, a discovery function).
        model: the :class:`~certified_circuits.vision.networks.models.VisionModel`.
        images: normalised ``[|D|, 3, H, W]`` concept images.
        label: the class's logit.
        k_grid: the K grid.
        p_del, n0, n, seed: the votes' setting (``seed``: the concept's mask seed).
        workers: processes (spawned; the model and images are sent to each).
        progress: progress bars on stderr.
        attrs: labels of the votes file.

    Returns:
        a :class:`~certified_circuits.core.contracts.Votes` with ``absolute`` False (the plugin decides).
    """
    from certified_circuits.core.contracts import Votes
    from certified_circuits.core.sampling import run_algorithm, sample_votes
    from certified_circuits.core.smoothing import selection_and_certification_masks
    from certified_circuits.core.validation import check_k_grid

    k_grid = check_k_grid(k_grid)
    algorithm = ImageDiscovery(spec, model, images, label, k_grid, str((attrs or {}).get("concept", "")))
    n_examples = int(images.shape[0])
    selection_masks, certification_masks = selection_and_certification_masks(n_examples, n0, n, p_del, seed)
    baseline = run_algorithm(algorithm, np.arange(n_examples), "the full dataset", n_examples)
    shape = baseline.shape
    selection = sample_votes(
        algorithm, selection_masks, shape, workers=workers, progress=progress, desc="selection (n0)"
    )
    certification = sample_votes(
        algorithm, certification_masks, shape, workers=workers, progress=progress, desc="certification (n)"
    )
    return Votes(
        k_grid=k_grid,
        baseline=baseline,
        selection_counts=selection,
        certification_counts=certification,
        groups=model.groups().numpy().astype(np.int32),
        names=tuple(model.vertex_names()),
        attrs={
            "p_del": float(p_del),
            "n0": int(n0),
            "n": int(n),
            "seed": int(seed),
            "n_examples": n_examples,
            "absolute": False,
            **(attrs or {}),
        },
    )
