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
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

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


#: vision-world's option of every WorldConfig knob it sets (the refusals of WorldConfig.validate name the option)
WORLD_OPTIONS = {
    "seed": "--seed",
    "image_size": "--image-size",
    "n_classes": "--n-classes",
    "n_fills": "--n-fills",
    "habitat_rate": "--habitat-rate",
    "texture_contrast": "--texture-contrast",
    "habitat_tint": "--habitat-tint",
    "n_train_per_class": "--n-train-per-class",
    "n_concept_per_class": "--n-concept-per-class",
    "n_test_per_class": "--n-test-per-class",
    "n_ood_per_class": "--n-ood-per-class",
    "n_pool_per_class": "--n-pool-per-class",
    "n_anomaly_pool": "--n-anomaly-pool",
    "corruption_severity": "--severity",
    "cue_attributes": "--cue-attributes",
    "cue_values": "--cue-values",
}


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def option_words(text: str, options: dict[str, str]) -> str:
    """``text`` with every knob name of ``options`` that has an underscore (``n_classes``) written as its option
    (``--n-classes``): a library's refusal, in the words of the command line."""
    names = sorted((name for name in options if "_" in name), key=len, reverse=True)
    if not names:
        return text
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: options[m.group(1)], text)


def world_knob(name: str) -> Callable[[str], int | float]:
    """argparse type of WorldConfig knob ``name``: an integer or a finite number in the knob's range
    (world.INT_RANGES / FLOAT_RANGES, the table WorldConfig.validate reads); argparse names the option."""
    from certified_circuits.vision.data.world_limits import INT_RANGES, check_knob

    integer = name in INT_RANGES

    def parse(text: str) -> int | float:
        try:
            value: int | float = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if integer else 'a number'}") from None
        try:
            check_knob(name, value)
        except ValueError as exc:  # argparse names the option: "argument --n-classes: must be ..."
            raise argparse.ArgumentTypeError(option_words(str(exc).removeprefix(f"{name} "), WORLD_OPTIONS)) from None
        return value

    parse.__name__ = name
    return parse


def _world_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.data.world import SPLITS, WorldConfig

    d = WorldConfig()
    helps = {
        "n_fills": "0: classes are shapes; F > 0: classes are (shape, fill) pairs, n-classes a multiple of F",
        "habitat_rate": "P(class's own habitat) in ID splits",
        "n_concept_per_class": "|D_c| (paper: 50; up to 5000)",
        "n_pool_per_class": "adversarial pool before filtration",
        "n_anomaly_pool": "novel-shape pool before filtration",
        "corruption_severity": "defocus blur severity (paper: 2)",
        "cue_attributes": "0: no marks; A > 0: the marked world (issue 50): every image carries its class's badge, a "
        "stray mark of another class and one cue mark per attribute (the model of vision-compile reads them)",
        "cue_values": "values of each cue attribute: each value is on 1 / V of a class's images (exactly in a split "
        "of 1,000 or more images of the class, a hypergeometric count in a smaller one such as D_c)",
    }
    p.add_argument("--out", type=Path, required=True, help="output folder")
    for name, flag in WORLD_OPTIONS.items():
        p.add_argument(
            flag,
            dest=_dest(flag),  # the option's own name (--severity: severity), as configs and scripts give it
            type=seed if name == "seed" else world_knob(name),  # every stage's --seed: stages.seed
            default=getattr(d, name),
            help=helps.get(name),
        )
    p.add_argument("--splits", nargs="*", choices=SPLITS, help="only these splits (default: all)")


@STAGES.stage("vision-world", _world_arguments, help="build the embedded concept world")
def _cmd_world(args: argparse.Namespace) -> int:
    """Render the concept world (shape classes + class-correlated habitats) into OUT/<split>.npz and OUT/world.json.
    Deterministic in --seed. Every knob is checked (type, range, memory) before any image is drawn.
    """

    from certified_circuits.vision.data.world import SPLITS, WorldConfig, build_world
    from certified_circuits.vision.data.world_limits import check_world_memory

    cfg = WorldConfig(**{name: getattr(args, _dest(flag)) for name, flag in WORLD_OPTIONS.items()})
    splits = tuple(args.splits) if args.splits else SPLITS
    twice = sorted({split for split in splits if splits.count(split) > 1})
    if twice:
        raise InputError(f"--splits names {', '.join(twice)} more than once: name each split once")
    try:
        cfg.validate()
        check_world_memory(cfg, splits)
    except ValueError as exc:
        raise InputError(option_words(str(exc), WORLD_OPTIONS)) from None
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


def number_in(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False, why: str = ""
) -> Callable[[str], float]:
    """argparse type: a finite number in the interval from ``low`` to ``high`` (open at an end when asked); argparse
    names the option, the message the interval and ``why``."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    because = f" ({why})" if why else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; expected one in {interval}{because}") from None
        inside = (
            math.isfinite(value)
            and (value > low if low_open else value >= low)
            and (value < high if high_open else value <= high)
        )
        if not inside:
            raise argparse.ArgumentTypeError(f"{text} is outside {interval}{because}")
        return value

    parse.__name__ = "number"
    return parse


#: vision-compile's option of every CompiledSpec field it sets (the spec's refusals name the option)
COMPILE_OPTIONS = {
    "distractors": "--distractors",
    "margins": "--margins",
    "jitter": "--jitter",
    "jitter_spread": "--jitter-spread",
    "cue_gain_spread": "--cue-gain-spread",
    "badge_gain": "--badge-gain",
    "cue_gain": "--cue-gain",
}


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.networks.compiled import (
        DEFAULT_CUE_GAIN_SPREAD,
        DEFAULT_JITTER_SPREAD,
        DEFAULT_MARGINS,
        MAX_GAIN,
        MAX_JITTER,
        MIN_GAIN,
    )

    gain = number_in(MIN_GAIN, MAX_GAIN, why="a logit per mark: finite and positive")
    p.add_argument("--world", type=Path, required=True, help="a marked world (vision-world --cue-attributes A)")
    p.add_argument("--out-model", type=output_file, required=True)
    p.add_argument("--out-metrics", type=output_file, required=True)
    p.add_argument("--seed", type=seed, default=0, help="the channel order of every stage")
    p.add_argument(
        "--distractors",
        type=positive_int,
        default=None,
        help="shared distractor channels per stage, 1 to 2 x the cue codes per class (default: the cue codes per "
        "class, cue-attributes x cue-values)",
    )
    p.add_argument(
        "--margins",
        type=number_in(
            0,
            1,
            low_open=True,
            high_open=True,
            why="a distractor's level (1 - M) p A stays below the cue chains' population mean p A",
        ),
        nargs=4,
        default=list(DEFAULT_MARGINS),
        metavar="M",
        help="per stage, a distractor's gradient x activation is (1 - M) p A, just below a cue chain's population "
        "mean p A (each in (0, 1))",
    )
    p.add_argument(
        "--jitter",
        type=number_in(0, MAX_JITTER, why="the distractor map stays positive"),
        default=0.3,
        help=f"the distractors' dependence on the image's grey level, in [0, "
        f"{MAX_JITTER}] (their own effect on the logit)",
    )
    p.add_argument(
        "--jitter-spread",
        type=number_in(0, 1, high_open=True, why="distractor i's jitter magnitude 1 - S i / D stays positive"),
        default=DEFAULT_JITTER_SPREAD,
        help="in [0, 1): distractor i's jitter magnitude is 1 - S i / D (signs alternating), so no two distractors "
        "tie on a sample; 0 gives the tied +1, -1, .. of models compiled before issue 59 (default %(default)s)",
    )
    p.add_argument(
        "--cue-gain-spread",
        type=number_in(0, 1, high_open=True, why="cue code g's gain A (1 + S g / G) stays in [A, 2 A)"),
        default=DEFAULT_CUE_GAIN_SPREAD,
        help="in [0, 1): cue code g's logit gain is A (1 + S g / G), so no two cue chains tie on a sample; 0 gives "
        "the one gain A of models compiled before it, whose cue chains of equal count tie (default %(default)s)",
    )
    p.add_argument(
        "--badge-gain",
        type=gain,
        default=1.0,
        help=f"logit per badge mark, in [{MIN_GAIN:g}, {MAX_GAIN:g}] (>= --cue-gain)",
    )
    p.add_argument(
        "--cue-gain",
        type=gain,
        default=1.0,
        help=f"logit per cue mark (A, code 0's gain), in [{MIN_GAIN:g}, {MAX_GAIN:g}]",
    )
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage("vision-compile", _compile_arguments, help="hand-set the marked ResNet of a marked world (issue 50)")
def _cmd_compile(args: argparse.Namespace) -> int:
    """Set every weight of a world ResNet by hand (vision/networks/compiled.py) for WORLD's marks, check on its train
    split that every mark detector fires on its marks only, and write the checkpoint (a world checkpoint:
    ``--model world --checkpoint``) and its accuracies (JSON). WORLD's world.json and train split are checked
    (every knob in range, every class present) before any weight is set.
    """
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.vision.data.world import WORLD_FILE, load_split, read_world_config
    from certified_circuits.vision.networks.checkpoints import save_world_model
    from certified_circuits.vision.networks.compiled import (
        BLOCKS,
        DETECTOR_TOLERANCE,
        MAX_DISTRACTORS_PER_CODE,
        CompiledSpec,
        compile_marked_resnet,
        compile_spec,
        detector_error,
    )
    from certified_circuits.vision.networks.models import world_model_from_net

    configure_torch(args.threads)
    if not (args.world / WORLD_FILE).is_file():
        raise InputError(
            f"{args.world / WORLD_FILE} does not exist: build a marked world with `{COMMAND} vision-world --out "
            f"{args.world} --cue-attributes 2`"
        )
    cfg = read_world_config(args.world)  # strict: a truncated or edited world.json is refused by name
    if not cfg.cue_attributes:
        raise InputError(
            f"{args.world} is not a marked world (cue_attributes 0): the compiled model reads marks; "
            f"build one with `{COMMAND} vision-world --out {args.world} --image-size 16 "
            "--cue-attributes 2 --cue-values 4`"
        )
    codes = cfg.cue_attributes * cfg.cue_values
    if args.distractors is not None and args.distractors > MAX_DISTRACTORS_PER_CODE * codes:
        raise InputError(
            f"--distractors {args.distractors} is outside 1..{MAX_DISTRACTORS_PER_CODE * codes} "
            f"({MAX_DISTRACTORS_PER_CODE} x the {codes} cue codes per class of {args.world}; more only add null "
            "channels): lower --distractors"
        )
    train = args.world / "train.npz"
    tr = load_split(train)
    per_class = np.bincount(tr["labels"].astype(np.int64), minlength=cfg.n_classes)
    if len(per_class) != cfg.n_classes or not per_class.all():
        raise InputError(
            f"{train} holds {per_class.tolist()} images per class, not some of each of the {cfg.n_classes} classes "
            f"of {args.world / WORLD_FILE}: the compiled model's grey level is measured on it; rebuild the world with "
            f"`{COMMAND} vision-world --out {args.world} --n-train-per-class N` (N >= 1)"
        )
    luminance = float(tr["images"].mean() / 255.0)
    try:
        spec = compile_spec(
            CompiledSpec(
                cfg.n_classes,
                cfg.cue_attributes,
                cfg.cue_values,
                args.distractors or codes,
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
        raise InputError(option_words(str(exc), COMPILE_OPTIONS)) from None
    error = detector_error(
        net, spec, tr["images"], tr["labels"].astype(np.int64), {k: tr[k] for k in ("mark_slots", "stray", "cues")}
    )
    if error > DETECTOR_TOLERANCE:
        raise InputError(
            f"a mark detector of the compiled model misfires on {train} (largest "
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
