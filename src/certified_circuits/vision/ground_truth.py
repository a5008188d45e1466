"""Causal verification of a testbed model's class circuits, and the ground-truth file (docs/embedded_default.md).

Two testbed models have class circuits known by construction: the planted world ResNet
(:func:`~certified_circuits.vision.networks.planted.truth_components`) and the compiled marked ResNet
(:func:`~certified_circuits.vision.networks.compiled.truth_components`, issue 50). "Verify before you score"
measures that the truth is the circuit:

- **exactness** (structural): the gradient of logit c with respect to every non-truth vertex is exactly 0, and
  logit c is bit-identical when every non-truth vertex is replaced by random values;
- **sufficiency** (keep only the truth; every other vertex ablated at every block output): the class accuracy
  and the mean class margin stay close to the full model's, and the balanced accuracy
  ``(class accuracy + 1 - false-positive rate on the other classes' images) / 2`` stays high, so the kept
  circuit does not win by labelling everything c;
- **necessity** (ablate the truth, keep everything else): the class accuracy falls to chance and the mean
  class margin below 0.

Ablations (what a removed vertex carries):

- ``mean_absent`` (decides ``passed``): its mean activation over a seeded sample of the train images of the
  *other* classes (:func:`class_absent_fill`): what class c's circuit carries when no class-c object is in the
  image. The train-wide mean leaks class c's own images (1 / n_classes of it) into the ablated logit: with the
  truth ablated, logit c sits at its train mean E[z_c], above its typical value on other images, while the
  other logits on a class-c image sit at their low negative values, so a class-c image is still labelled c
  "by exclusion" (measured: up to 55% class accuracy for one class of a 10-class model with the truth ablated);
- ``mean``: the train-wide mean (``vision-evaluate --ablation mean``,
  :func:`~certified_circuits.vision.evaluate.mean_ablation_fill`), reported;
- ``zero``: reported; it removes the other classes' evidence, so a zero-ablated class circuit labels other
  classes' images c too (docs/embedded_default.md, "Why mean ablation, and why the paper's cACC stays beside it").

**Per component** (issue 42): each vertex u is mean-ablated alone (the deciding class-absent fill) on the held-out
images of class c, and its effect is ``mean |z_c(ablate u) - z_c|`` over them, in units of the same quantity with
the whole planted truth ablated (:func:`component_effects`). The truth written to the file is the planted
components whose effect is at least 5 times the strongest non-planted one's
(:func:`certified_circuits.analysis.component_truth.split_truth`); the effects and both thresholds go into
``verification.per_component``. **The whole-circuit checks above run on that truth**, the components written to the
file and scored (issue 50): kept alone it must keep the class, removed the class must fall to chance. (A planted
channel with no effect of its own is not written, so a truth that needed it jointly fails its check rather than
being scored as if it held.) The exactness checks measure the planted set: in the noisy regime (a planted ``leak``
> 0) and for the compiled model (whose distractors reach every logit by design) they are reported, not deciding;
the per-component check decides in their place.

Margins: ``margin = z_c - max_{k != c} z_k`` (> 0 iff the image is labelled c) and ``m`` = z_c minus the mean
of the other logits (:func:`~certified_circuits.vision.evaluate.class_margin`, faithfulness' margin).
"""

from __future__ import annotations

import os
import sys
from typing import Mapping, Sequence

import numpy as np
import torch

from certified_circuits.analysis.component_truth import per_component_block, split_truth
from certified_circuits.analysis.recovery import GroundTruth, write_ground_truth
from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.evaluate import (
    MaskedResNet,
    class_margin,
    logits_under_masks,
    plain_logits,
    written_outputs,
)
from certified_circuits.vision.networks.hooks import captured, masked_logits
from certified_circuits.vision.networks import compiled
from certified_circuits.vision.networks.compiled import CompiledSpec
from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.networks.planted import (
    PlantedSpec,
    gradient_outside_truth,
    planted_widths,
    truth_components,
)

#: a testbed model's spec: the planted world ResNet's or the compiled marked ResNet's
TestbedSpec = PlantedSpec | CompiledSpec

#: sufficiency: the truth alone keeps at least this share of the full model's class accuracy (the other logits
#: sit at their ablated values instead of their per-image values, which may cost a few borderline images)
KEEP_ACCURACY_RATIO = 0.9
#: sufficiency without class bias: balanced accuracy of the truth alone; 0.5 is a circuit that labels every image
#: c (or none), 1 a perfect one-vs-rest detector. Not higher: with the other logits frozen, logit c alone must
#: reject the other classes' images, which the full model does with their own logits (measured on the default
#: planted model: 0.75 to 1.0 per class)
KEEP_MIN_BALANCED_ACCURACY = 0.7
#: necessity: with the truth ablated the class accuracy is at most chance (1 / n_classes) plus this tolerance
CHANCE_TOLERANCE = 0.05
#: necessity: with the truth ablated the mean margin z_c - max_{k != c} z_k is at most this (the class loses)
ABLATED_MAX_MARGIN = 0.0
#: exactness: a planted model's gradient outside the truth and its logit change are exactly this
EXACT = 0.0

#: the ablations of :func:`verify_planted`, the first deciding ``passed``
ABLATIONS = ("mean_absent", "mean", "zero")
DECIDING = ABLATIONS[0]


def planted_set(spec: TestbedSpec, label: int) -> np.ndarray:
    """bool [U]: the candidates of class ``label``'s truth (vertex order) of either testbed model."""
    if isinstance(spec, CompiledSpec):
        return compiled.truth_components(spec, label)
    return truth_components(spec, label)


def exact(spec: TestbedSpec) -> bool:
    """Whether the exactness checks decide: only for a clean planted model (nothing outside the truth reaches the
    class logit); a leak or the compiled model's distractors reach it by design."""
    return isinstance(spec, PlantedSpec) and not spec.leak


def spec_widths(spec: TestbedSpec) -> tuple[int, ...]:
    """The stage widths a model of ``spec`` has."""
    return (spec.width,) * 4 if isinstance(spec, CompiledSpec) else planted_widths(spec)


def thresholds(n_classes: int) -> dict[str, float]:
    """The thresholds of :func:`verify_class`, as recorded in the ground-truth file."""
    return {
        "keep_accuracy_ratio": KEEP_ACCURACY_RATIO,
        "keep_min_balanced_accuracy": KEEP_MIN_BALANCED_ACCURACY,
        "ablated_max_accuracy": 1.0 / n_classes + CHANCE_TOLERANCE,
        "ablated_max_margin": ABLATED_MAX_MARGIN,
        "max_gradient_outside": EXACT,
        "max_logit_change": EXACT,
    }


def max_margin(logits: torch.Tensor, label: int) -> torch.Tensor:
    """``z_c - max_{k != c} z_k`` [...] from logits [..., C]: positive iff the argmax is c (ties aside)."""
    others = logits.clone()
    others[..., label] = -torch.inf
    return logits[..., label] - others.amax(-1)


#: a run of :func:`circuit_logits`: circuits bool [M, U] (1 keeps a vertex, 0 ablates it at its block output) and
#: what an ablated vertex carries (one map per block: mean ablation; None: zero ablation)
Run = tuple[np.ndarray, "list[torch.Tensor] | None"]


@torch.no_grad()
def circuit_logits(model: VisionModel, imageset: ImageSet, runs: Sequence[Run]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits of the full model [N, C] and under each run's circuits [M_r, N, C] on every image of ``imageset``.

    Every run is scored in one pass over the images by the sufficiency evaluation's engine
    (:func:`~certified_circuits.vision.evaluate.logits_under_masks`: for a ResNet
    :class:`~certified_circuits.vision.evaluate.MaskedResNet`, which computes only the channels a circuit keeps);
    the full model is the plain network (:func:`~certified_circuits.vision.evaluate.plain_logits`).

    Args:
        runs: ``[(masks bool [M_r, U], fill), ...]`` (:data:`Run`).

    Returns:
        ``(full [N, C], [logits [M_r, N, C] per run])``, float32 on the CPU.
    """
    idx = np.arange(len(imageset))
    full = torch.cat([z.cpu() for z in plain_logits(model, imageset, idx)])
    return full, logits_under_masks(model, imageset, idx, runs, desc=imageset.source)


def without_class(iset: ImageSet, label: int) -> ImageSet:
    """The images of ``iset`` of every class but ``label`` (a view: indices map onto the original set)."""
    keep = np.flatnonzero(iset.labels != label)
    return ImageSet(
        labels=iset.labels[keep],
        ids=iset.ids[keep],
        source=f"{iset.source} without class {label}",
        loader=lambda idx, model: iset.load(keep[np.asarray(idx, dtype=np.int64)], model),
    )


def class_absent_fill(model: VisionModel, reference: ImageSet, label: int, size: int, seed: int) -> list[torch.Tensor]:
    """Per-channel mean activations over a seeded sample of ``size`` reference images of the classes other than
    ``label`` (:func:`~certified_circuits.vision.evaluate.mean_ablation_fill` on :func:`without_class`): what a
    vertex carries when no class-``label`` object is in the image."""
    from certified_circuits.vision.evaluate import mean_ablation_fill

    return mean_ablation_fill(model, without_class(reference, label), size, seed)


def logit_change_outside_truth(model: VisionModel, x: torch.Tensor, spec: TestbedSpec, label: int, seed: int) -> float:
    """max |logit_c(replaced) - logit_c(x)| when every non-truth vertex carries random values (N(0, 1) * 3 + 1,
    a seeded draw per image and channel map): 0.0 exactly for a clean planted model."""
    keep = torch.as_tensor(planted_set(spec, label), dtype=torch.float32, device=model.device)
    with torch.no_grad(), captured(model) as acts:
        model.net(x)
    gen = torch.Generator().manual_seed(seed)
    fill = [(torch.randn(a.shape[1:], generator=gen) * 3 + 1).to(model.device) for a in acts]
    with torch.no_grad():
        base = model.net(x)[:, label]
        replaced = masked_logits(model, x, keep[None], fill)[0, :, label]
    return float((replaced - base).abs().max())


#: held-out images of a class the per-component effects are measured on, and ablations per forward pass (a chunk of
#: single-vertex ablations runs as one batch of chunk x images; with few of them the channels their changes reach stay
#: few in a network with structural zeros: on the default's compiled ResNet 8 and 16 took 0.15 s a class, 30 0.27 s,
#: a whole block of 98 1.8 s, where the changes reach every channel)
EFFECT_IMAGES = 64
EFFECT_CHUNK = 16


@torch.no_grad()
def component_effects(model: VisionModel, imageset: ImageSet, label: int, planted: np.ndarray,
                      fill: list[torch.Tensor] | None, max_images: int = EFFECT_IMAGES,
                      chunk: int = EFFECT_CHUNK) -> np.ndarray:
    """Each vertex's own effect on its class logit: ``e_u = mean_x |z_c(x; u ablated) - z_c(x)| /
    mean_x |z_c(x; planted truth ablated) - z_c(x)|`` over the first ``max_images`` images of class ``label``.

    Vectorized: a chunk of single-vertex ablations (one block's vertices) runs as one batch. For a ResNet the
    sufficiency evaluation's engine scores them from one forward pass of the full model
    (:meth:`~certified_circuits.vision.evaluate.MaskedResNet.ablations`: only the channels an ablated vertex reaches
    are recomputed, and a logit it does not reach keeps ``z_c(x)`` bit for bit, so that a vertex with no path to
    logit c has an effect of exactly 0); any other model runs the hooks
    (:func:`~certified_circuits.vision.networks.hooks.masked_logits`, every block masked).

    Args:
        model: the planted model.
        imageset: held-out images (``id_test``); class ``label``'s are used.
        label: the class (its logit c).
        planted: bool ``[U]``, the planted truth (the unit: its whole effect).
        fill: what an ablated vertex carries (the deciding class-absent mean), None for zero.
        max_images: images of the class to average over.
        chunk: single-vertex masks per forward pass.

    Returns:
        float ``[U]`` effects, >= 0, in units of the whole planted truth's effect.

    Raises:
        ValueError: the set has no image of the class, or ablating the whole truth does not move the logit.
    """
    pos = np.flatnonzero(imageset.labels == label)[:max_images]
    if not pos.size:
        raise ValueError(f"{imageset.source} has no image of class {label}: the per-component check needs some")
    x = imageset.load(pos, model).to(model.device)
    engine = MaskedResNet.of(model)
    u = int(model.n_vertices)
    ends = np.cumsum(model.widths)
    with written_outputs():
        if engine is not None:
            h = engine.prefix(x)
            trace = engine.trace(h)
            base = trace.logits[:, label]
            whole = engine.logits(h, torch.as_tensor(~planted[None], device=model.device), fill)[0, :, label]
        else:
            base = model.net(x)[:, label]
            whole = masked_logits(model, x, torch.as_tensor(~planted[None], dtype=torch.float32,
                                                            device=model.device), fill)[0, :, label]
        unit = float((whole - base).abs().mean())
        if not unit > 0:
            raise ValueError(f"ablating class {label}'s whole planted truth leaves its logit unchanged: no unit for "
                             "the per-component effects (is the model trained?)")
        effects = np.empty(u)
        for block, (start, end) in enumerate(zip(ends - np.asarray(model.widths), ends)):  # chunks within a block
            for s0 in range(int(start), int(end), chunk):
                rows = torch.arange(s0, min(int(end), s0 + chunk), device=model.device)
                if engine is not None:
                    z = engine.ablations(trace, block, rows - int(start), None if fill is None else fill[block])
                else:
                    masks = torch.ones(len(rows), u, device=model.device)
                    masks[torch.arange(len(rows)), rows] = 0  # row i: every vertex but s0 + i
                    z = masked_logits(model, x, masks, fill)
                effects[s0:s0 + len(rows)] = (z[..., label] - base[None]).abs().mean(dim=1).cpu().numpy() / unit
    return effects


def summarize(logits: torch.Tensor, labels: np.ndarray, label: int) -> dict[str, float]:
    """Class accuracy, false-positive rate, balanced accuracy and mean margins of logits [N, C] on a labelled set.

    Returns:
        {accuracy, false_positive_rate, balanced_accuracy, margin (mean z_c - max_{k != c} z_k over class c's
        images), m (mean :func:`class_margin` over them)}; NaN where a side has no images."""
    pos = torch.as_tensor(labels == label)
    hit = logits.argmax(-1) == label
    acc = float(hit[pos].float().mean()) if pos.any() else float("nan")
    fpr = float(hit[~pos].float().mean()) if (~pos).any() else float("nan")
    return {
        "accuracy": acc,
        "false_positive_rate": fpr,
        "balanced_accuracy": (acc + 1.0 - fpr) / 2.0,
        "margin": float(max_margin(logits[pos], label).mean()) if pos.any() else float("nan"),
        "m": float(class_margin(logits[pos], label).mean()) if pos.any() else float("nan"),
    }


def verify_class(
    model: VisionModel,
    spec: TestbedSpec,
    sets: Mapping[str, ImageSet],
    label: int,
    fills: Mapping[str, list[torch.Tensor] | None],
    primary: str = "id_test",
    seed: int = 0,
) -> dict:
    """Causal checks of class ``label``'s planted truth (module docstring): :func:`verify_classes` of one class.

    Args:
        sets: eval sets by name (every class's images: the false-positive rate needs the others); ``primary``
            among them decides ``passed``.
        fills: {ablation name: fill (None: zero ablation)}; ``"mean_absent"`` (:func:`class_absent_fill` of this
            class) is required and decides ``passed``.
        seed: the random replacement of the logit-invariance check.

    Returns:
        :func:`verify_classes`' verification of the class.
    """
    return verify_classes(model, spec, sets, {label: fills}, primary, seed)[label]


def verify_classes(
    model: VisionModel,
    spec: TestbedSpec,
    sets: Mapping[str, ImageSet],
    fills: Mapping[int, Mapping[str, list[torch.Tensor] | None]],
    primary: str = "id_test",
    seed: int = 0,
) -> dict[int, dict]:
    """Causal checks of several classes' planted truths (module docstring), every whole-circuit check of an eval set
    in one pass over its images (:func:`circuit_logits`: each class's truth kept and ablated under each of its
    fills).

    Args:
        sets: eval sets by name (every class's images: the false-positive rate needs the others); ``primary``
            among them decides ``passed``.
        fills: {class index: {ablation name: fill (None: zero ablation)}}; ``"mean_absent"``
            (:func:`class_absent_fill` of that class) is required and decides ``passed``.
        seed: the random replacement of the logit-invariance check.

    Returns:
        {class index: a flat dict}: ``n_truth`` (the verified truth), ``n_planted``, ``per_component`` (the block
        of :func:`~certified_circuits.analysis.component_truth.per_component_block`: the truth is its kept set),
        ``max_gradient_outside``, ``max_logit_change`` and for every set S, ablation A
        and circuit X in (full, keep, ablated) ``S.A.X.{accuracy,false_positive_rate,balanced_accuracy,margin,m}``
        (full is independent of A: ``S.full.*``), ``n_images.S``, the thresholds and ``passed`` (bool).

    Raises:
        ValueError: no ``primary`` set or a class without the deciding fill, before any forward pass.
    """
    if primary not in sets or any(DECIDING not in f for f in fills.values()):
        raise ValueError(f"verification needs the {primary!r} set and the {DECIDING!r} fill")
    first = sets[primary]
    out: dict[int, dict] = {}
    splits = {}
    for label, class_fills in fills.items():
        planted = planted_set(spec, label)
        effects = component_effects(model, first, label, planted, class_fills[DECIDING])
        split = splits[label] = split_truth(effects, planted)
        v = out[label] = {"n_truth": int(split.kept.sum()), "n_planted": int(planted.sum())}
        v["per_component"] = per_component_block(
            model.vertex_names(), effects, planted, split, metric="class logit", ablation=f"{DECIDING} (one vertex)",
            unit="mean |change of the class logit| with the whole planted truth ablated")
        pos = np.flatnonzero(first.labels == label)[:64]
        x = first.load(pos, model).to(model.device)
        v["max_gradient_outside"] = gradient_outside_truth(model.net, model.hook_names, x, spec, label, planted)
        v["max_logit_change"] = logit_change_outside_truth(model, x, spec, label, seed)
    # the whole-circuit checks run on the truth as written and scored (split.kept), not on the planted candidates
    runs = [(np.stack([splits[label].kept, ~splits[label].kept]), fill)
            for label, class_fills in fills.items() for fill in class_fills.values()]
    for name, iset in sets.items():
        full, masked = circuit_logits(model, iset, runs)
        scored = iter(masked)
        for label, class_fills in fills.items():
            v = out[label]
            v[f"n_images.{name}"] = int((iset.labels == label).sum())
            for abl in class_fills:
                kept = next(scored)
                for key, logits in (("full", full), ("keep", kept[0]), ("ablated", kept[1])):
                    prefix = f"{name}.full" if key == "full" else f"{name}.{abl}.{key}"
                    v.update({f"{prefix}.{q}": value for q, value in summarize(logits, iset.labels, label).items()})
    lim = thresholds(spec.n_classes)
    p = f"{primary}.{DECIDING}"
    deciding = exact(spec)  # a leak or the compiled model's distractors reach logit c: reported, not deciding
    for label, v in out.items():
        checks = {
            "exact_gradient": v["max_gradient_outside"] <= lim["max_gradient_outside"] or not deciding,
            "exact_logit": v["max_logit_change"] <= lim["max_logit_change"] or not deciding,
            "per_component": splits[label].passed,
            "keep_accuracy": v[f"{p}.keep.accuracy"] >= lim["keep_accuracy_ratio"] * v[f"{primary}.full.accuracy"],
            "keep_balanced_accuracy": v[f"{p}.keep.balanced_accuracy"] >= lim["keep_min_balanced_accuracy"],
            "ablated_accuracy": v[f"{p}.ablated.accuracy"] <= lim["ablated_max_accuracy"],
            "ablated_margin": v[f"{p}.ablated.margin"] <= lim["ablated_max_margin"],
        }
        v.update({f"threshold.{k}": value for k, value in lim.items()})
        v.update({f"check.{k}": bool(ok) for k, ok in checks.items()})
        v["passed"] = bool(all(checks.values()))
    return out


def verify_planted(
    model: VisionModel,
    spec: TestbedSpec,
    sets: Mapping[str, ImageSet],
    reference: ImageSet,
    reference_size: int = 500,
    primary: str = "id_test",
    seed: int = 0,
    log=None,
) -> dict[str, dict]:
    """:func:`verify_classes` of every class with the three :data:`ABLATIONS`.

    Args:
        sets: eval sets by name (``primary`` decides ``passed``).
        reference: the train split; fills are means over ``reference_size`` of its images drawn with ``seed``
            (``mean``: any class; ``mean_absent``: the other classes').
        log: ``log(message)`` gets one line a class.

    Returns:
        {class name: verification}.
    """
    from certified_circuits.vision.evaluate import mean_ablation_fill

    if spec.n_classes != len(model.class_names) or tuple(model.widths) != spec_widths(spec):
        raise ValueError(
            f"the model ({len(model.class_names)} classes, widths {model.widths}) does not match its "
            f"testbed spec (widths {spec_widths(spec)}, {spec.n_classes} classes)"
        )
    train_mean = mean_ablation_fill(model, reference, reference_size, seed)
    fills = {label: {"mean_absent": class_absent_fill(model, reference, label, reference_size, seed),
                     "mean": train_mean, "zero": None}
             for label in range(len(model.class_names))}
    verified = verify_classes(model, spec, sets, fills, primary, seed)
    result = {}
    for label, name in enumerate(model.class_names):
        v = result[name] = verified[label]
        if log is not None:
            p = f"{primary}.{DECIDING}"
            log(
                f"{name}: {'PASS' if v['passed'] else 'FAIL'} full acc {v[f'{primary}.full.accuracy']:.3f} "
                f"margin {v[f'{primary}.full.margin']:.2f} | keep acc {v[f'{p}.keep.accuracy']:.3f} "
                f"margin {v[f'{p}.keep.margin']:.2f} bal {v[f'{p}.keep.balanced_accuracy']:.3f} | ablated acc "
                f"{v[f'{p}.ablated.accuracy']:.3f} margin {v[f'{p}.ablated.margin']:.2f} | grad outside "
                f"{v['max_gradient_outside']:.1e}"
            )
    return result


def check_model_world(class_names: Sequence[str], world_names: Sequence[str], labels: np.ndarray, checkpoint: str,
                      split: str) -> None:
    """A planted model matches its world: the same class count and names in the same order (logit c is class c of
    the world), and every label of the split is one of the model's logits. A 3-class model on a 5-class world
    would otherwise "verify" the truth of classes it never saw.

    Args:
        class_names: the model's classes (logit order).
        world_names: the world split's ``class_names``.
        labels: the split's labels.
        checkpoint: the model file, for messages.
        split: the world split file, for messages.

    Raises:
        ValueError: naming both files, both class lists and the fix.
    """
    model, world = [str(c) for c in class_names], [str(c) for c in world_names]
    fix = "pass the world the model was trained on (vision-world with its config), or train the model on this world"
    if model != world:
        raise ValueError(f"{checkpoint} has {len(model)} classes {model[:8]} but the world {split} has {len(world)} "
                         f"classes {world[:8]}: the model does not match its world; {fix}")
    outside = labels[(labels < 0) | (labels >= len(model))] if labels.size else labels
    if outside.size:
        raise ValueError(f"{split} holds label {int(outside[0])}, not a logit of {checkpoint}'s {len(model)} "
                         f"classes; {fix}")


#: how the compiled marked ResNet's truth is known and checked (the ground-truth file's ``how``)
COMPILED_HOW = ("compiled: every weight is set by hand (vision/networks/compiled.py); class c's truth is its badge "
                "chain and its cue chains (gated: a cue chain fires only on the images carrying its cue), the "
                "distractors reach every logit with a near-constant map; the truth is the planted channels whose own "
                "effect on the class logit (one channel mean-ablated) is at least 5 times the strongest other "
                "channel's (per_component), verified as a whole by keeping / ablating it (class-absent mean "
                "ablation; train-mean and zero ablation reported)")


def _model_label(spec: TestbedSpec) -> str:
    if isinstance(spec, CompiledSpec):
        return (f"compiled_marked_resnet attributes={spec.attributes} values={spec.values} "
                f"distractors={spec.distractors} margins={list(spec.margins)} seed={spec.seed}")
    return (f"planted_world_resnet own={list(spec.own)} shared={list(spec.shared)}"
            + (f" leak={spec.leak}" if spec.leak else ""))


def _how(spec: TestbedSpec) -> str:
    """The ground-truth file's ``how``: how the model's truth is known and checked."""
    if isinstance(spec, CompiledSpec):
        return COMPILED_HOW
    if not spec.leak:
        return ("by construction: block-masked convolutions let logit c read only class c's own channels and the "
                "shared channels (its ancestors), verified by exact-zero gradients and by keeping / ablating them "
                "(class-absent mean ablation; train-mean and zero ablation reported)")
    return (f"planted, noisy regime: other classes' channels reach logit c through weights bounded by {spec.leak} x "
            "the allowed weights' mean magnitude; the truth is the planted channels whose own effect on the class "
            "logit (one channel mean-ablated) is at least 5 times the strongest non-planted channel's "
            "(per_component), verified as a whole by keeping / ablating it (class-absent mean ablation; train-mean "
            "and zero ablation reported)")


def write_class_truths(
    path: str | os.PathLike, model: VisionModel, spec: TestbedSpec, verification: Mapping[str, dict], experiment: str
) -> GroundTruth:
    """Write a testbed model's ground-truth file through the format's one writer
    (:func:`certified_circuits.analysis.recovery.write_ground_truth`, which validates it before the atomic write):
    per class its components as written and scored (:func:`kept_names`) and its verification; ``planted``: the
    model's spec (the planted or the compiled one).

    Args:
        path: the file to write.
        model: the testbed model (its vertex names are the components).
        spec: its planted or compiled spec.
        verification: class name -> :func:`verify_planted`'s result for it.
        experiment: the experiment's name.

    Returns:
        The ground truth as it will be read back.

    Raises:
        ValueError: the document is not a valid ground truth (nothing is written).
    """
    concepts = {
        name: {"components": kept_names(model, spec, label, verification[name]),
               "verification": dict(verification[name])}
        for label, name in enumerate(model.class_names)
    }
    return write_ground_truth(path, experiment=experiment, kind="vision", model=_model_label(spec), how=_how(spec),
                              names=model.vertex_names(), concepts=concepts, planted=spec.to_dict())


def kept_names(model: VisionModel, spec: TestbedSpec, label: int, verification: Mapping) -> list[str]:
    """The class's true components as written and scored: the planted ones its per-component check kept (all planted
    ones for a verification without the block, as before the check existed), in vertex order."""
    names = model.vertex_names()
    dropped = set(verification.get("per_component", {}).get("dropped", ()))
    return [names[i] for i in np.flatnonzero(planted_set(spec, label)) if names[i] not in dropped]


def log_line(message: str) -> None:
    """Default per-class log: one line on stderr."""
    print(f"vision-ground-truth: {message}", file=sys.stderr)
