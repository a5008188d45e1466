"""``certified-circuits vision-*`` stages of the embedded world (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-world``: build the embedded concept world (one ``.npz`` per split + ``world.json``);
- ``vision-train``: train the world ResNet, write the checkpoint and ID/OOD accuracies (JSON);
- ``vision-filter-ood``: build the adversarial and anomaly sets by filtration against a model, and
  write the full model's accuracy on every split (the calibration numbers);
- ``vision-compile``: the hand-set marked ResNet of a marked world (``vision-world --cue-attributes A``; issue 50),
  written as a world checkpoint;
- ``vision-ground-truth``: the class circuits of a testbed model (``vision-train --planted-own ...`` or
  ``vision-compile``), causally verified, as a ground-truth JSON.

Every path is explicit so that a Snakemake rule can declare inputs and outputs.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from certified_circuits.commands import COMMAND
from certified_circuits.core.devices import configure_torch
from certified_circuits.vision.networks.architectures import WORLD_BLOCKS, WORLD_WIDTHS
from certified_circuits.cli.stages import InputError, Stages, existing_file, output_file, positive_int, seed

if TYPE_CHECKING:  # pragma: no cover
    from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.cli.stages import add_reference_size

log = logging.getLogger(__name__)
STAGES = Stages()


# ---------------------------------------------------------------------------------------------- world


def _world_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.data.world import SPLITS, WorldConfig

    d = WorldConfig()
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--seed", type=seed, default=d.seed)
    p.add_argument("--image-size", type=int, default=d.image_size)
    p.add_argument("--n-classes", type=int, default=d.n_classes)
    p.add_argument(
        "--n-fills",
        type=int,
        default=d.n_fills,
        help="0: classes are shapes; F > 0: classes are (shape, fill) pairs, n-classes a multiple of F",
    )
    p.add_argument("--habitat-rate", type=float, default=d.habitat_rate, help="P(class's own habitat) in ID splits")
    p.add_argument("--texture-contrast", type=float, default=d.texture_contrast)
    p.add_argument("--habitat-tint", type=float, default=d.habitat_tint)
    p.add_argument("--n-train-per-class", type=int, default=d.n_train_per_class)
    p.add_argument(
        "--n-concept-per-class", type=int, default=d.n_concept_per_class, help="|D_c| (paper: 50; up to 1000)"
    )
    p.add_argument("--n-test-per-class", type=int, default=d.n_test_per_class)
    p.add_argument("--n-ood-per-class", type=int, default=d.n_ood_per_class)
    p.add_argument(
        "--n-pool-per-class", type=int, default=d.n_pool_per_class, help="adversarial pool before filtration"
    )
    p.add_argument("--n-anomaly-pool", type=int, default=d.n_anomaly_pool, help="novel-shape pool before filtration")
    p.add_argument("--severity", type=int, default=d.corruption_severity, help="defocus blur severity (paper: 2)")
    p.add_argument(
        "--cue-attributes",
        type=int,
        default=d.cue_attributes,
        help="0: no marks; A > 0: the marked world (issue 50): every image carries its class's badge, a stray mark of "
        "another class and one cue mark per attribute (the model of vision-compile reads them)",
    )
    p.add_argument(
        "--cue-values",
        type=int,
        default=d.cue_values,
        help="values of each cue attribute: each value is on 1 / V of a class's images (exactly in a split of 1,000 "
        "or more images of the class, a hypergeometric count in a smaller one such as D_c)",
    )
    p.add_argument("--splits", nargs="*", choices=SPLITS, help="only these splits (default: all)")


@STAGES.stage("vision-world", _world_arguments, help="build the embedded concept world")
def _cmd_world(args: argparse.Namespace) -> int:
    """Render the concept world (shape classes + class-correlated habitats) into OUT/<split>.npz and OUT/world.json.
    Deterministic in --seed.
    """

    from certified_circuits.vision.data.world import SPLITS, WorldConfig, build_world

    cfg = WorldConfig(
        seed=args.seed,
        image_size=args.image_size,
        n_classes=args.n_classes,
        habitat_rate=args.habitat_rate,
        texture_contrast=args.texture_contrast,
        habitat_tint=args.habitat_tint,
        n_train_per_class=args.n_train_per_class,
        n_concept_per_class=args.n_concept_per_class,
        n_test_per_class=args.n_test_per_class,
        n_ood_per_class=args.n_ood_per_class,
        n_pool_per_class=args.n_pool_per_class,
        n_anomaly_pool=args.n_anomaly_pool,
        corruption_severity=args.severity,
        n_fills=args.n_fills,
        cue_attributes=args.cue_attributes,
        cue_values=args.cue_values,
    )
    try:
        cfg.validate()
    except ValueError as exc:
        raise InputError(str(exc)) from None
    splits = tuple(args.splits) if args.splits else SPLITS
    t0 = time.perf_counter()
    build_world(cfg, args.out, splits)
    log.info("vision-world: wrote %d splits to %s in %.1fs", len(splits), args.out, time.perf_counter() - t0)
    return 0


# ---------------------------------------------------------------------------------------------- train


def _train_arguments(p: argparse.ArgumentParser) -> None:
    def dropout_probability(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text!r}") from None
        if not 0.0 <= value < 1.0:  # also rejects nan
            raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text!r}")
        return value

    p.add_argument("--world", type=Path, required=True, help="folder written by vision-world")
    p.add_argument("--out-model", type=Path, required=True)
    p.add_argument("--out-metrics", type=Path, required=True)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument(
        "--widths",
        type=positive_int,
        nargs=4,
        default=None,
        help=f"stage widths (default {' '.join(map(str, WORLD_WIDTHS))}; with --planted-own: derived)",
    )
    p.add_argument("--blocks", type=positive_int, nargs=4, default=list(WORLD_BLOCKS))
    p.add_argument("--stem-stride", type=int, default=2, choices=[1, 2], help="stride of the 3x3 stem convolution")
    p.add_argument(
        "--channel-dropout",
        type=dropout_probability,
        default=0.0,
        metavar="P",
        help="training-only channel dropout at every block output (layer1..layer4): makes sparse "
        "channel circuits sufficient for the class; saved in the checkpoint, inactive at "
        "evaluation (default 0: off; calibrated value in docs/calibration.md)",
    )
    p.add_argument(
        "--channel-dropout-mode",
        choices=("mask", "dropout2d"),
        default="mask",
        help="mask: per image and block a drop rate r ~ U(0, P), channels zeroed with probability r, "
        "no rescaling (as zero ablation does); dropout2d: torch Dropout2d(P), kept channels "
        "scaled by 1/(1-P) (default: mask)",
    )
    p.add_argument(
        "--planted-own",
        type=positive_int,
        nargs=4,
        default=None,
        metavar="N",
        help="planted world ResNet (class circuits known by construction): channels of each class in layer1..layer4; "
        "needs --planted-shared; widths become n_classes * own + shared",
    )
    p.add_argument(
        "--planted-shared",
        type=int,
        nargs=4,
        default=None,
        metavar="N",
        help="planted world ResNet: channels shared by every class in layer1..layer4 (the last must be 0)",
    )
    p.add_argument(
        "--planted-leak",
        type=float,
        default=0.0,
        metavar="F",
        help="planted world ResNet, the noisy regime (issue 42): other classes' channels reach a class through "
        "weights bounded by F times the allowed weights' mean magnitude, in [0, 0.5] (default 0: the clean regime)",
    )
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


def planted_spec_of(args: argparse.Namespace, n_classes: int):
    """The planted spec of ``--planted-own/--planted-shared`` (None without them) and the stage widths.

    Raises:
        InputError: one flag without the other, an invalid spec, or ``--widths`` that contradict it.
    """
    from certified_circuits.vision.networks.planted import PlantedSpec, planted_widths

    if (args.planted_own is None) != (args.planted_shared is None):
        raise InputError("--planted-own and --planted-shared go together: pass both (4 values each) or neither")
    if args.planted_own is None:
        if args.planted_leak:
            raise InputError(
                "--planted-leak bounds the cross-class weights of a planted model: pass it with "
                "--planted-own and --planted-shared, or drop it"
            )
        return None, tuple(args.widths or WORLD_WIDTHS)
    try:
        spec = PlantedSpec(n_classes, tuple(args.planted_own), tuple(args.planted_shared), args.planted_leak)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    widths = planted_widths(spec)
    if args.widths is not None and tuple(args.widths) != widths:
        raise InputError(
            f"--widths {' '.join(map(str, args.widths))} contradict the planted spec, which needs "
            f"{' '.join(map(str, widths))} ({n_classes} classes x own + shared): drop --widths"
        )
    return spec, widths


@STAGES.stage("vision-train", _train_arguments, help="train the embedded world ResNet")
def _cmd_train(args: argparse.Namespace) -> int:
    """Train a small torchvision ResNet on WORLD/train.npz; write the checkpoint and accuracies on id_test /
    context_shift / corruption (JSON).
    """

    from certified_circuits.vision.networks.checkpoints import save_world_model
    from certified_circuits.vision.train import train_world_model
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.vision.data.world import load_split

    configure_torch(args.threads)
    tr = load_split(args.world / "train.npz")
    class_names = [str(c) for c in tr["class_names"]]
    planted, widths = planted_spec_of(args, len(class_names))
    model, train_log = train_world_model(
        tr["images"],
        tr["labels"],
        class_names,
        seed=args.seed,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        widths=widths,
        blocks=tuple(args.blocks),
        stem_stride=args.stem_stride,
        channel_dropout=args.channel_dropout,
        channel_dropout_mode=args.channel_dropout_mode,
        planted=planted,
    )
    metrics = {"train_log": train_log}
    metrics.update(split_accuracies(model, args.world))
    save_world_model(
        args.out_model,
        model.net,
        class_names,
        widths,
        args.blocks,
        int(tr["images"].shape[1]),
        meta={
            "seed": args.seed,
            "world": str(args.world),
            "channel_dropout": args.channel_dropout,
            "channel_dropout_mode": args.channel_dropout_mode,
            **({"planted": planted.to_dict()} if planted is not None else {}),
        },
    )
    write_json(args.out_metrics, metrics, sort_keys=True)
    _report_accuracies("vision-train", metrics)
    return 0


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.networks.compiled import (
        DEFAULT_CUE_GAIN_SPREAD,
        DEFAULT_JITTER_SPREAD,
        DEFAULT_MARGINS,
        MAX_JITTER,
    )

    p.add_argument("--world", type=Path, required=True, help="a marked world (vision-world --cue-attributes A)")
    p.add_argument("--out-model", type=output_file, required=True)
    p.add_argument("--out-metrics", type=output_file, required=True)
    p.add_argument("--seed", type=seed, default=0, help="the channel order of every stage")
    p.add_argument(
        "--distractors",
        type=positive_int,
        default=None,
        help="shared distractor channels per stage (default: the cue codes per class, cue-attributes x cue-values)",
    )
    p.add_argument(
        "--margins",
        type=float,
        nargs=4,
        default=list(DEFAULT_MARGINS),
        metavar="M",
        help="per stage, a distractor's gradient x activation is (1 - M) p A, just below a cue chain's population "
        "mean p A (each in (0, 1))",
    )
    p.add_argument(
        "--jitter",
        type=float,
        default=0.3,
        help=f"the distractors' dependence on the image's grey level, in [0, "
        f"{MAX_JITTER}] (their own effect on the logit)",
    )
    p.add_argument(
        "--jitter-spread",
        type=float,
        default=DEFAULT_JITTER_SPREAD,
        help="in [0, 1): distractor i's jitter magnitude is 1 - S i / D (signs alternating), so no two distractors "
        "tie on a sample; 0 gives the tied +1, -1, .. of models compiled before issue 59 (default %(default)s)",
    )
    p.add_argument(
        "--cue-gain-spread",
        type=float,
        default=DEFAULT_CUE_GAIN_SPREAD,
        help="in [0, 1): cue code g's logit gain is A (1 + S g / G), so no two cue chains tie on a sample; 0 gives "
        "the one gain A of models compiled before it, whose cue chains of equal count tie (default %(default)s)",
    )
    p.add_argument("--badge-gain", type=float, default=1.0, help="logit per badge mark (>= --cue-gain)")
    p.add_argument("--cue-gain", type=float, default=1.0, help="logit per cue mark (A, code 0's gain)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage("vision-compile", _compile_arguments, help="hand-set the marked ResNet of a marked world (issue 50)")
def _cmd_compile(args: argparse.Namespace) -> int:
    """Set every weight of a world ResNet by hand (vision/networks/compiled.py) for WORLD's marks, check on its train
    split that every mark detector fires on its marks only, and write the checkpoint (a world checkpoint:
    ``--model world --checkpoint``) and its accuracies (JSON).
    """
    import json

    from certified_circuits.storage.atomic import write_json
    from certified_circuits.vision.data.world import WorldConfig, load_split
    from certified_circuits.vision.networks.checkpoints import save_world_model
    from certified_circuits.vision.networks.compiled import (
        BLOCKS,
        DETECTOR_TOLERANCE,
        CompiledSpec,
        compile_marked_resnet,
        compile_spec,
        detector_error,
    )
    from certified_circuits.vision.networks.models import world_model_from_net

    configure_torch(args.threads)
    meta_path = args.world / "world.json"
    if not meta_path.is_file():
        raise InputError(
            f"{meta_path} does not exist: build a marked world with `{COMMAND} vision-world --out "
            f"{args.world} --cue-attributes 2`"
        )
    cfg = WorldConfig(**json.loads(meta_path.read_text())["config"])
    if not cfg.cue_attributes:
        raise InputError(
            f"{args.world} is not a marked world (cue_attributes 0): the compiled model reads marks; "
            f"build one with `{COMMAND} vision-world --out {args.world} --image-size 16 "
            "--cue-attributes 2 --cue-values 4`"
        )
    tr = load_split(args.world / "train.npz")
    luminance = float(tr["images"].mean() / 255.0)
    try:
        spec = compile_spec(
            CompiledSpec(
                cfg.n_classes,
                cfg.cue_attributes,
                cfg.cue_values,
                args.distractors or cfg.cue_attributes * cfg.cue_values,
                tuple(args.margins),
                args.jitter,
                args.badge_gain,
                args.cue_gain,
                luminance,
                cfg.image_size,
                args.seed,
                jitter_spread=args.jitter_spread,
                cue_gain_spread=args.cue_gain_spread,
            )
        )
        net = compile_marked_resnet(spec)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    error = detector_error(
        net, spec, tr["images"], tr["labels"].astype(np.int64), {k: tr[k] for k in ("mark_slots", "stray", "cues")}
    )
    if error > DETECTOR_TOLERANCE:
        raise InputError(
            f"a mark detector of the compiled model misfires on {args.world / 'train.npz'} (largest "
            f"error {error:.3g}): the world's scenes reach a mark's score; report this world's config"
        )
    model = world_model_from_net(net, cfg.class_names(), cfg.image_size)
    metrics: dict[str, object] = {"compiled": spec.to_dict(), "detector_error_train": error}
    metrics.update(split_accuracies(model, args.world))
    save_world_model(
        args.out_model,
        net,
        cfg.class_names(),
        (spec.width,) * 4,
        BLOCKS,
        cfg.image_size,
        meta={"seed": args.seed, "world": str(args.world), "compiled": spec.to_dict()},
    )
    write_json(args.out_metrics, metrics, sort_keys=True)
    _report_accuracies("vision-compile", metrics)
    return 0


def split_accuracies(model: "VisionModel", world: Path) -> dict[str, float]:
    """``accuracy_<split>`` of a world model on the world's id_test, context_shift and corruption splits (those that
    exist): the training and compile stages' metrics."""
    from certified_circuits.vision.data.world import load_split
    from certified_circuits.vision.train import accuracy

    out = {}
    for split in ("id_test", "context_shift", "corruption"):
        path = world / f"{split}.npz"
        if path.is_file():
            data = load_split(path)
            out[f"accuracy_{split}"] = accuracy(model, data["images"], data["labels"].astype(np.int64))
    return out


def _report_accuracies(stage: str, metrics: dict) -> None:
    from certified_circuits.pipeline.tracking import add_metrics

    accuracies = {k: v for k, v in metrics.items() if k.startswith("accuracy")}
    add_metrics(accuracies)
    log.info("%s: %s", stage, ", ".join(f"{k}={v:.3f}" for k, v in accuracies.items()))


def _world_model_arguments(p: argparse.ArgumentParser, model: str, world: str | None = None) -> None:
    """--world (the folder vision-world wrote) and --checkpoint (a world model vision-train wrote), both required."""
    p.add_argument("--world", type=Path, required=True, help=world)
    p.add_argument("--checkpoint", type=existing_file, required=True, help=model)


def _filter_arguments(p: argparse.ArgumentParser) -> None:
    _world_model_arguments(p, "filter model (vision-train output)")
    p.add_argument("--out-adversarial", type=Path, required=True)
    p.add_argument("--out-anomaly", type=Path, required=True)
    p.add_argument("--out-metrics", type=Path, required=True)
    p.add_argument("--max-per-class", type=positive_int, default=50)
    p.add_argument("--min-confidence", type=float, default=0.7)
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage("vision-filter-ood", _filter_arguments, help="filter the adversarial / anomaly OOD sets against a model")
def _cmd_filter(args: argparse.Namespace) -> int:
    """ImageNet-A-style filtration (keep misclassified hard images) and ImageNet-O-style filtration (keep novel shapes
    confidently labelled as a known class, labelled with it); also writes the model's accuracy per split.
    """

    from certified_circuits.vision.networks.checkpoints import load_world_model
    from certified_circuits.vision.train import accuracy, filter_adversarial, filter_anomaly
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.vision.data.world import load_split, save_split

    configure_torch(args.threads)
    model = load_world_model(args.checkpoint)
    adv = filter_adversarial(model, load_split(args.world / "adversarial_pool.npz"), args.max_per_class)
    ano = filter_anomaly(model, load_split(args.world / "anomaly_pool.npz"), args.max_per_class, args.min_confidence)
    save_split(args.out_adversarial, adv)
    save_split(args.out_anomaly, ano)
    metrics: dict[str, object] = {}
    for name, d in [
        ("concept", None),
        ("id_test", None),
        ("context_shift", None),
        ("corruption", None),
        ("adversarial", adv),
        ("anomaly", ano),
    ]:
        if d is None:
            p = args.world / f"{name}.npz"
            if not p.is_file():
                continue
            d = load_split(p)
        metrics[f"accuracy_{name}"] = accuracy(model, d["images"], d["labels"].astype(np.int64))
        metrics[f"n_{name}"] = int(len(d["labels"]))
        metrics[f"per_class_{name}"] = np.bincount(
            d["labels"].astype(np.int64), minlength=len(model.class_names)
        ).tolist()
    write_json(args.out_metrics, metrics, sort_keys=True)
    _report_accuracies("vision-filter-ood", metrics)
    return 0


# ---------------------------------------------------------------------------------------------- ground truth


def _ground_truth_arguments(p: argparse.ArgumentParser) -> None:
    _world_model_arguments(
        p,
        "testbed model: a planted world model (vision-train --planted-own ... --planted-shared ...) or a compiled "
        "one (vision-compile)",
        "folder written by vision-world (train, id_test; concept too when present)",
    )
    p.add_argument("--out", type=output_file, required=True, help="ground-truth JSON")
    p.add_argument("--experiment", default="world")
    add_reference_size(p, "train images for each mean-ablation fill")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage(
    "vision-ground-truth",
    _ground_truth_arguments,
    help="a testbed model's class circuits (planted or compiled), causally verified -> ground-truth JSON",
)
def _cmd_ground_truth(args: argparse.Namespace) -> int:
    """Write every class's true components (the planted model's own + shared channels, or the compiled model's badge
    and cue chains, each kept by its own effect) with the causal checks of :mod:`certified_circuits.vision.
    ground_truth` (class-absent mean, train mean and zero ablation on id_test and the concept split, run on the
    components written); 'passed' per class. Exit 2 when the checkpoint is neither a planted nor a compiled model.
    """

    from certified_circuits.pipeline.tracking import add_metrics
    from certified_circuits.vision.data.image_sets import npz_set
    from certified_circuits.vision.ground_truth import log_line, verify_planted, write_class_truths
    from certified_circuits.vision.networks.checkpoints import load_world_model
    from certified_circuits.vision.networks import compiled, planted

    configure_torch(args.threads)
    for split in ("train", "id_test"):
        if not (args.world / f"{split}.npz").is_file():
            raise InputError(
                f"{args.world / (split + '.npz')} does not exist: build the world with "
                f"`{COMMAND} vision-world --out {args.world}`"
            )
    model = load_world_model(args.checkpoint)
    spec = planted.spec_of_meta(model.meta) or compiled.spec_of_meta(model.meta)
    if spec is None:
        raise InputError(
            f"{args.checkpoint} is not a planted world model (its meta has no 'planted' spec) nor a compiled one (no "
            f"'compiled' spec), so its class circuits are unknown: train one with `{COMMAND} vision-train "
            f"--planted-own 2 3 4 4 --planted-shared 6 6 8 0 ...` or compile one with `{COMMAND} vision-compile "
            "--world MARKED_WORLD ...`"
        )
    from certified_circuits.vision.data.world import load_split
    from certified_circuits.vision.ground_truth import check_model_world

    for split in ("train", "id_test", "concept"):
        path = args.world / f"{split}.npz"
        if path.is_file():
            data = load_split(path)
            check_model_world(model.class_names, data["class_names"], data["labels"], str(args.checkpoint), str(path))
    sets = {
        name: npz_set(args.world / f"{name}.npz")
        for name in ("id_test", "concept")
        if (args.world / f"{name}.npz").is_file()
    }
    start = time.perf_counter()
    verification = verify_planted(
        model, spec, sets, npz_set(args.world / "train.npz"), args.reference_size, seed=args.seed, log=log_line
    )
    write_class_truths(args.out, model, spec, verification, args.experiment)  # validated, then written
    passed = sum(v["passed"] for v in verification.values())
    add_metrics({"ground_truth_classes_passed": passed, "ground_truth_classes": len(verification)})
    log.info(
        "vision-ground-truth: %d/%d classes passed in %.1fs; wrote %s",
        passed,
        len(verification),
        time.perf_counter() - start,
        args.out,
    )
    return 0
