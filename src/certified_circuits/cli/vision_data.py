"""``certified-circuits vision-*`` stages of the embedded world (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-world``: build the embedded concept world (one ``.npz`` per split + ``world.json``);
- ``vision-train``: train the world ResNet, write the checkpoint and ID/OOD accuracies (JSON);
- ``vision-filter-ood``: build the adversarial and anomaly sets by filtration against a model, and
  write the full model's accuracy on every split (the calibration numbers).

Every path is explicit so that a Snakemake rule can declare inputs and outputs.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

from certified_circuits.core.devices import configure_torch
from certified_circuits.vision.networks.architectures import WORLD_BLOCKS, WORLD_WIDTHS
from certified_circuits.cli.stages import InputError, Stages, existing_file, positive_int

log = logging.getLogger(__name__)
STAGES = Stages()


# ---------------------------------------------------------------------------------------------- world


def _world_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.data.world import SPLITS, WorldConfig

    d = WorldConfig()
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--seed", type=int, default=d.seed)
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--widths", type=positive_int, nargs=4, default=list(WORLD_WIDTHS))
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
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage("vision-train", _train_arguments, help="train the embedded world ResNet")
def _cmd_train(args: argparse.Namespace) -> int:
    """Train a small torchvision ResNet on WORLD/train.npz; write the checkpoint and accuracies on id_test /
    context_shift / corruption (JSON).
    """

    from certified_circuits.vision.networks.models import save_world_model
    from certified_circuits.vision.train import accuracy, train_world_model
    from certified_circuits.vision.data.world import load_split, write_json_atomic

    configure_torch(args.threads)
    tr = load_split(args.world / "train.npz")
    class_names = [str(c) for c in tr["class_names"]]
    model, train_log = train_world_model(
        tr["images"],
        tr["labels"],
        class_names,
        seed=args.seed,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        widths=tuple(args.widths),
        blocks=tuple(args.blocks),
        stem_stride=args.stem_stride,
        channel_dropout=args.channel_dropout,
        channel_dropout_mode=args.channel_dropout_mode,
    )
    metrics = {"train_log": train_log}
    for split in ("id_test", "context_shift", "corruption"):
        p = args.world / f"{split}.npz"
        if p.is_file():
            d = load_split(p)
            metrics[f"accuracy_{split}"] = accuracy(model, d["images"], d["labels"].astype(np.int64))
    save_world_model(
        args.out_model,
        model.net,
        class_names,
        args.widths,
        args.blocks,
        int(tr["images"].shape[1]),
        meta={
            "seed": args.seed,
            "world": str(args.world),
            "channel_dropout": args.channel_dropout,
            "channel_dropout_mode": args.channel_dropout_mode,
        },
    )
    write_json_atomic(args.out_metrics, metrics)
    _report_accuracies("vision-train", metrics)
    return 0


def _report_accuracies(stage: str, metrics: dict) -> None:
    from certified_circuits.pipeline.tracking import add_metrics

    accuracies = {k: v for k, v in metrics.items() if k.startswith("accuracy")}
    add_metrics(accuracies)
    log.info("%s: %s", stage, ", ".join(f"{k}={v:.3f}" for k, v in accuracies.items()))


def _filter_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", type=Path, required=True)
    p.add_argument("--checkpoint", type=existing_file, required=True, help="filter model (vision-train output)")
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

    from certified_circuits.vision.networks.models import load_world_model
    from certified_circuits.vision.train import accuracy, filter_adversarial, filter_anomaly
    from certified_circuits.vision.data.world import load_split, save_split, write_json_atomic

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
    write_json_atomic(args.out_metrics, metrics)
    _report_accuracies("vision-filter-ood", metrics)
    return 0
