"""Attribution extraction for one class and one split (paper Sec. 4; docs/architecture.md, section 2 contract).

Runs the three scorers of ``scorers.py`` over the class's images (one forward + backward per batch)
and writes ``scores/{relevance,activation,rank}`` [n_examples, U], ``components/group`` (block index)
and ``examples/id`` with :func:`certified_circuits.storage.store.write_attributions`; with a
:class:`~.scorers.Conductance` also ``scores/conductance`` (ranking ``signed``; m more passes per batch; its
baseline, steps and Captum method in the file's attributes, :meth:`~.scorers.Conductance.attrs`), plus extras:

- ``mean_activation`` float32 [U]: mean over the examples of each vertex's spatial-mean activation;
- ``top_examples`` int32 [U, k]: indices (into ``examples/id``) of the k most activating examples of
  every vertex, for feature visualisation (App. "feature visualisation");
- ``correct`` bool [n_examples]: whether the full model classifies the example as the class;
- ``spurious_index`` float32 [U] (concept world only): habitat- vs shape-sensitivity of each vertex
  from the counterfactual pairs, see :func:`scorers.spurious_index`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from tqdm import tqdm

from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.scoring.plugins import ScorerPlugin
from certified_circuits.vision.scoring.scorers import (
    SCORERS,
    Conductance,
    mean_activations,
    score_batch,
    spurious_index,
)


def class_indices(imageset: ImageSet, label: int, n_examples: int | None = None, min_examples: int = 1) -> np.ndarray:
    """Indices of the images labelled ``label`` (first ``n_examples`` of them, in set order)."""
    idx = np.flatnonzero(imageset.labels == label)
    if len(idx) < min_examples:
        raise ValueError(f"{imageset.source} holds {len(idx)} images of class {label}, fewer than the {min_examples} required")
    return idx[:n_examples] if n_examples else idx


def _scorer_names(plugins: Sequence[ScorerPlugin], conductance: Conductance | None) -> tuple[str, ...]:
    return (*SCORERS, *(["conductance"] if conductance is not None else []), *(p.name for p in plugins))


def _rankings(plugins: Sequence[ScorerPlugin], conductance: Conductance | None) -> dict[str, str]:
    return {**({"conductance": "signed"} if conductance is not None else {}), **{p.name: p.ranking for p in plugins}}


def extract_scores(model: VisionModel, imageset: ImageSet, idx: np.ndarray, label: int, batch_size: int = 64,
                   progress: bool = True, plugins: Sequence[ScorerPlugin] = (),
                   conductance: Conductance | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Scores {scorer: float32 [len(idx), U]} (the built-in scorers, ``conductance`` when given, and every additive
    plugin) and the full model's predictions [len(idx)]."""
    parts: dict[str, list[np.ndarray]] = {s: [] for s in _scorer_names(plugins, conductance)}
    preds = []
    for s0 in tqdm(range(0, len(idx), batch_size), desc="vision-attribute", disable=not progress):
        x = imageset.load(idx[s0 : s0 + batch_size], model).to(model.device)
        scores, logits = score_batch(model, x, label, plugins, conductance)
        for k, v in scores.items():
            parts[k].append(v.cpu().numpy())
        preds.append(logits.argmax(1).cpu().numpy())
    return {k: np.concatenate(v) for k, v in parts.items()}, np.concatenate(preds)


def counterfactual_spurious_index(model: VisionModel, counterfactual: Mapping[str, np.ndarray], batch_size: int = 256) -> np.ndarray:
    """Spurious index [U] from a world ``counterfactual`` split (base / habitat swap / shape swap)."""
    outs = []
    for key in ("images", "images_habitat_swap", "images_shape_swap"):
        if key not in counterfactual:
            raise ValueError(f"counterfactual split lacks '{key}': rebuild it with vision-world")
        imgs = counterfactual[key]
        acts = [mean_activations(model, model.normalize(torch.from_numpy(np.ascontiguousarray(imgs[s : s + batch_size])))
                                 .to(model.device)) for s in range(0, len(imgs), batch_size)]
        outs.append(torch.cat(acts).cpu())
    return spurious_index(*outs).numpy()


def conductance_baseline(model: VisionModel, reference: ImageSet, size: int, seed: int,
                         batch_size: int = 256) -> torch.Tensor:
    """The ``mean`` conductance baseline: the per-pixel mean normalised image ``[3, H, W]`` of a seeded sample of
    ``size`` reference images (every one when ``size`` is larger), drawn as the mean-ablation reference is
    (:func:`certified_circuits.vision.evaluate.mean_ablation_fill`: without replacement, in index order), so one
    config's ``mean`` baseline and mean-ablation fill come from the same images. Fixed before any example is scored
    (never the concept dataset's own mean: :mod:`.scorers`)."""
    if len(reference) == 0:
        raise ValueError(f"{reference.source} holds no image: the mean conductance baseline needs reference images")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(reference), size=min(len(reference), size), replace=False))
    total: torch.Tensor | None = None
    for s0 in range(0, len(pick), batch_size):
        part = reference.load(pick[s0 : s0 + batch_size], model).to(torch.float64).sum(0)
        total = part if total is None else total + part
    assert total is not None
    return (total / len(pick)).to(torch.float32)


def write_empty_attribution(model: VisionModel, out: Path, attrs: Mapping[str, object],
                            plugins: Sequence[ScorerPlugin] = (), conductance: Conductance | None = None) -> Path:
    """A valid attribution file with zero examples, for a split that holds no image of the class (a
    filtered OOD set can lack some classes); downstream stages skip it by its example count."""
    from certified_circuits.storage.store import write_attributions

    n = model.n_vertices
    cond_attrs = conductance.attrs() if conductance is not None else {}
    return write_attributions(
        out, {s: np.zeros((0, n), np.float32) for s in _scorer_names(plugins, conductance)}, groups=model.groups().numpy(),
        names=model.vertex_names(), example_ids=[],
        attrs={"model": model.arch, **attrs, **cond_attrs, "n_examples": 0},
        extras={"mean_activation": np.zeros(n, np.float32), "top_examples": np.zeros((n, 0), np.int32)},
        rankings=_rankings(plugins, conductance),
    )


def run_attribution(model: VisionModel, imageset: ImageSet, label: int, out: Path, attrs: Mapping[str, object],
                    n_examples: int | None = None, batch_size: int = 64, top_k: int = 9,
                    counterfactual: Mapping[str, np.ndarray] | None = None, progress: bool = True,
                    plugins: Sequence[ScorerPlugin] = (), conductance: Conductance | None = None) -> Path:
    """Extract and write the attribution file for class ``label``; returns its path. Additive ``plugins``
    add ``scores/{plugin name}`` with their ranking; ``conductance`` adds ``scores/conductance`` (signed) and its
    attributes (:meth:`~.scorers.Conductance.attrs`)."""
    from certified_circuits.storage.store import write_attributions

    idx = class_indices(imageset, label, n_examples)
    scores, preds = extract_scores(model, imageset, idx, label, batch_size, progress, plugins, conductance)
    act = scores["activation"]
    k = min(top_k, len(idx))
    top = np.argsort(-act, axis=0, kind="stable")[:k].T.astype(np.int32)  # [U, k]
    extras: dict[str, np.ndarray] = {
        "mean_activation": act.mean(0).astype(np.float32),
        "top_examples": top,
        "correct": preds == label,
    }
    if counterfactual is not None:
        extras["spurious_index"] = counterfactual_spurious_index(model, counterfactual).astype(np.float32)
    return write_attributions(
        out, scores, groups=model.groups().numpy(), names=model.vertex_names(),
        example_ids=[str(i) for i in imageset.ids[idx]],
        attrs={"model": model.arch, "source": imageset.source, "class_index": int(label),
               "full_model_accuracy": float((preds == label).mean()), **attrs,
               **(conductance.attrs() if conductance is not None else {})},
        extras=extras, rankings=_rankings(plugins, conductance),
    )
