"""``certified-circuits vision-*`` stages (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-world``: build the embedded concept world (one ``.npz`` per split + ``world.json``);
- ``vision-train``: train the world ResNet, write the checkpoint and ID/OOD accuracies (JSON);
- ``vision-filter-ood``: build the adversarial and anomaly sets by filtration against a model, and
  write the full model's accuracy on every split (the calibration numbers);
- ``vision-attribute``: per-example scores of one class on one or more splits -> attribution HDF5 (the
  built-in scorers and any additive plugin, ``--scorer module:function``);
- ``vision-discover``: a black-box discovery plugin run on every sub-dataset -> votes HDF5;
- ``vision-evaluate``: sufficiency of one class's circuits (votes + certificates) -> tidy CSV;
- ``vision-runtime``: naive vs cached certification cost (App. D);
- ``vision-select-classes``, ``vision-imagenet-c``, ``vision-prepare-oodcv``: paper-scale data.

Every path is explicit so that a Snakemake rule can declare inputs and outputs.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from certified_circuits.core.devices import configure_torch
from certified_circuits.core.setting import Setting
from certified_circuits.vision.architectures import MODEL_CHOICES, WORLD_BLOCKS, WORLD_WIDTHS
from certified_circuits.cli.stages import (InputError, Stages, add_device, add_k_grid, add_votes_setting, check_circuit_files,
                                          existing_file, existing_path, named_path, output_file, positive_int)

log = logging.getLogger(__name__)
STAGES = Stages()


def model_name(text: str) -> str:
    """``--model``: ``world``, or a torchvision classification model name (checked when given)."""
    if text == "world" or text in MODEL_CHOICES:
        return text
    from certified_circuits.vision.models import check_model_name

    try:
        return check_model_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default="world", type=model_name, metavar="NAME",
                   help=f"'world' (needs --checkpoint), an ImageNet architecture of the paper ({', '.join(MODEL_CHOICES[1:])}; "
                        "weights default to the torch hub cache) or any torchvision classifier with --weights "
                        "(torchvision.models.list_models()) (default: world)")
    g.add_argument("--checkpoint", type=existing_file, help="world model checkpoint written by vision-train")
    g.add_argument("--weights", type=existing_file, help="the model's state dict (ImageNet architectures: default the "
                                                         "torch hub cache's IMAGENET1K_V1 file)")
    g.add_argument("--class-index", type=existing_file,
                   help="class names in logit order, one a line (LOC_synset_mapping.txt is read too)")
    g.add_argument("--layers", nargs="+", default=["auto"], metavar="MODULE",
                   help="modules whose outputs hold the components: auto (the family's block outputs, "
                        "certified_circuits/vision/families.py) or names of net.named_modules() (default: auto)")
    g.add_argument("--image-size", type=positive_int, help="crop size (default: the torchvision weights' transforms)")
    g.add_argument("--resize-size", type=positive_int, help="short side before the crop (default: the weights' ratio)")
    g.add_argument("--mean", type=float, nargs=3, metavar=("R", "G", "B"), help="normalisation mean (default: the weights')")
    g.add_argument("--std", type=float, nargs=3, metavar=("R", "G", "B"), help="normalisation std (default: the weights')")
    add_device(g)


def _load(args: argparse.Namespace):
    """The model on its device and the class index of image folders (None for the world), cached for the
    process (:func:`certified_circuits.vision.loading.load_cached`)."""
    from certified_circuits.core.devices import resolve_device
    from certified_circuits.vision.loading import load_cached

    device = resolve_device(args.device)
    configure_torch(args.threads)
    layers = "auto" if args.layers == ["auto"] else list(args.layers)
    preprocessing = None
    if any(v is not None for v in (args.image_size, args.resize_size, args.mean, args.std)):
        from certified_circuits.vision.models import preprocessing_of

        preprocessing = preprocessing_of(args.model, image_size=args.image_size, resize_size=args.resize_size,
                                         mean=args.mean, std=args.std)
    model, index, reused = load_cached(args.model, args.checkpoint, args.weights, args.class_index, device, layers,
                                       preprocessing)
    if reused:
        log.info("%s: model already loaded in this process (batch); reusing it", getattr(args, "command", "vision"))
    return model, index


_STARTED: list[float] = []  # the start-up of this process, once measured


def _log_startup(stage: str) -> None:
    """Log and record how long the job took before its first batch (imports, model build, weights);
    once per process: later invocations of a batch pay no start-up."""
    from certified_circuits import PROCESS_START
    from certified_circuits.pipeline.tracking import add_metrics

    if _STARTED:
        return
    seconds = time.perf_counter() - PROCESS_START
    _STARTED.append(seconds)
    add_metrics({"startup_seconds": seconds})
    log.info("%s: start-up %.2fs before the first batch (imports, model, data index)", stage, seconds)


def _label(model, concept: str) -> int:
    if concept in model.class_names:
        return model.class_names.index(concept)
    if concept.isdigit() and int(concept) < len(model.class_names):
        return int(concept)
    raise InputError(f"unknown concept {concept!r}: use a class name of the model, e.g. {model.class_names[:5]}, "
                     f"or a class index < {len(model.class_names)}")


# ---------------------------------------------------------------------------------------------- world


def _world_arguments(p: argparse.ArgumentParser) -> None:
    from certified_circuits.vision.world import SPLITS, WorldConfig

    d = WorldConfig()
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--image-size", type=int, default=d.image_size)
    p.add_argument("--n-classes", type=int, default=d.n_classes)
    p.add_argument("--n-fills", type=int, default=d.n_fills,
                   help="0: classes are shapes; F > 0: classes are (shape, fill) pairs, n-classes a multiple of F")
    p.add_argument("--habitat-rate", type=float, default=d.habitat_rate, help="P(class's own habitat) in ID splits")
    p.add_argument("--texture-contrast", type=float, default=d.texture_contrast)
    p.add_argument("--habitat-tint", type=float, default=d.habitat_tint)
    p.add_argument("--n-train-per-class", type=int, default=d.n_train_per_class)
    p.add_argument("--n-concept-per-class", type=int, default=d.n_concept_per_class, help="|D_c| (paper: 50; up to 1000)")
    p.add_argument("--n-test-per-class", type=int, default=d.n_test_per_class)
    p.add_argument("--n-ood-per-class", type=int, default=d.n_ood_per_class)
    p.add_argument("--n-pool-per-class", type=int, default=d.n_pool_per_class, help="adversarial pool before filtration")
    p.add_argument("--n-anomaly-pool", type=int, default=d.n_anomaly_pool, help="novel-shape pool before filtration")
    p.add_argument("--severity", type=int, default=d.corruption_severity, help="defocus blur severity (paper: 2)")
    p.add_argument("--splits", nargs="*", choices=SPLITS, help="only these splits (default: all)")


@STAGES.stage("vision-world", _world_arguments, help="build the embedded concept world")
def _cmd_world(args: argparse.Namespace) -> int:
    """Render the concept world (shape classes + class-correlated habitats) into OUT/<split>.npz and OUT/world.json.
    Deterministic in --seed.
    """

    from certified_circuits.vision.world import SPLITS, WorldConfig, build_world

    cfg = WorldConfig(
        seed=args.seed, image_size=args.image_size, n_classes=args.n_classes, habitat_rate=args.habitat_rate,
        texture_contrast=args.texture_contrast, habitat_tint=args.habitat_tint,
        n_train_per_class=args.n_train_per_class, n_concept_per_class=args.n_concept_per_class,
        n_test_per_class=args.n_test_per_class, n_ood_per_class=args.n_ood_per_class,
        n_pool_per_class=args.n_pool_per_class, n_anomaly_pool=args.n_anomaly_pool,
        corruption_severity=args.severity, n_fills=args.n_fills,
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
    p.add_argument("--channel-dropout", type=dropout_probability, default=0.0, metavar="P",
                   help="training-only channel dropout at every block output (layer1..layer4): makes sparse "
                        "channel circuits sufficient for the class; saved in the checkpoint, inactive at "
                        "evaluation (default 0: off; calibrated value in docs/calibration.md)")
    p.add_argument("--channel-dropout-mode", choices=("mask", "dropout2d"), default="mask",
                   help="mask: per image and block a drop rate r ~ U(0, P), channels zeroed with probability r, "
                        "no rescaling (as zero ablation does); dropout2d: torch Dropout2d(P), kept channels "
                        "scaled by 1/(1-P) (default: mask)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")


@STAGES.stage("vision-train", _train_arguments, help="train the embedded world ResNet")
def _cmd_train(args: argparse.Namespace) -> int:
    """Train a small torchvision ResNet on WORLD/train.npz; write the checkpoint and accuracies on id_test /
    context_shift / corruption (JSON).
    """

    from certified_circuits.vision.models import save_world_model
    from certified_circuits.vision.train import accuracy, train_world_model
    from certified_circuits.vision.world import load_split, write_json_atomic

    configure_torch(args.threads)
    tr = load_split(args.world / "train.npz")
    class_names = [str(c) for c in tr["class_names"]]
    model, train_log = train_world_model(tr["images"], tr["labels"], class_names, seed=args.seed, epochs=args.epochs,
                                         batch_size=args.batch_size, lr=args.lr, widths=tuple(args.widths),
                                         blocks=tuple(args.blocks), stem_stride=args.stem_stride,
                                         channel_dropout=args.channel_dropout,
                                         channel_dropout_mode=args.channel_dropout_mode)
    metrics = {"train_log": train_log}
    for split in ("id_test", "context_shift", "corruption"):
        p = args.world / f"{split}.npz"
        if p.is_file():
            d = load_split(p)
            metrics[f"accuracy_{split}"] = accuracy(model, d["images"], d["labels"].astype(np.int64))
    save_world_model(args.out_model, model.net, class_names, args.widths, args.blocks, int(tr["images"].shape[1]),
                     meta={"seed": args.seed, "world": str(args.world), "channel_dropout": args.channel_dropout,
                           "channel_dropout_mode": args.channel_dropout_mode})
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

    from certified_circuits.vision.models import load_world_model
    from certified_circuits.vision.train import accuracy, filter_adversarial, filter_anomaly
    from certified_circuits.vision.world import load_split, save_split, write_json_atomic

    configure_torch(args.threads)
    model = load_world_model(args.checkpoint)
    adv = filter_adversarial(model, load_split(args.world / "adversarial_pool.npz"), args.max_per_class)
    ano = filter_anomaly(model, load_split(args.world / "anomaly_pool.npz"), args.max_per_class, args.min_confidence)
    save_split(args.out_adversarial, adv)
    save_split(args.out_anomaly, ano)
    metrics: dict[str, object] = {}
    for name, d in [("concept", None), ("id_test", None), ("context_shift", None), ("corruption", None),
                    ("adversarial", adv), ("anomaly", ano)]:
        if d is None:
            p = args.world / f"{name}.npz"
            if not p.is_file():
                continue
            d = load_split(p)
        metrics[f"accuracy_{name}"] = accuracy(model, d["images"], d["labels"].astype(np.int64))
        metrics[f"n_{name}"] = int(len(d["labels"]))
        metrics[f"per_class_{name}"] = np.bincount(d["labels"].astype(np.int64), minlength=len(model.class_names)).tolist()
    write_json_atomic(args.out_metrics, metrics)
    _report_accuracies("vision-filter-ood", metrics)
    return 0


# ---------------------------------------------------------------------------------------------- attribute


def _attribute_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="world .npz split or ROOT/<wnid>/ image folder")
    p.add_argument("--concept", required=True, help="class name (world), wnid (ImageNet) or class index")
    p.add_argument("--split", default="concept", help="split name stored in the file's attrs")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--out", type=output_file, required=True, help="attribution .h5")
    p.add_argument("--n-examples", type=positive_int, default=None, help="first N images of the class (default: all)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--top-k", type=positive_int, default=9, help="top-activating examples stored per vertex")
    p.add_argument("--counterfactual", type=existing_file, help="world counterfactual.npz -> extras/spurious_index")
    p.add_argument("--also", nargs=3, action="append", default=[], metavar=("SPLIT", "DATA", "OUT"),
                   help="attribute the same class on another split in the same process (repeatable); a split "
                        "without images of the class gets a valid file with zero examples")
    p.add_argument("--attr", action="append", default=[], type=named_path, metavar="KEY=VALUE",
                   help="extra file attribute, e.g. config_digest=abc123 (repeatable)")
    p.add_argument("--scorer", action="append", default=[], type=additive_plugin, metavar="MODULE:FUNCTION",
                   help="an additive scorer plugin f(activations, gradients, channel_dim) -> [B, U], scored beside "
                        "the built-in scorers as scores/FUNCTION (repeatable; certified_circuits/vision/plugins.py)")


def plugin_of_kind(kind: str):
    """An argparse type: a ``module:function`` plugin of ``kind`` (imported and checked when parsed)."""

    def parse(text: str):
        from certified_circuits.vision.plugins import load_plugin

        try:
            plugin = load_plugin(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if plugin.kind != kind:
            other = "vision-discover" if plugin.kind == "discovery" else "vision-attribute --scorer"
            article = "an" if plugin.kind == "additive" else "a"
            raise argparse.ArgumentTypeError(f"{text} is {article} {plugin.kind} plugin, not {kind}: run it with {other}")
        return plugin

    return parse


additive_plugin = plugin_of_kind("additive")


@STAGES.stage("vision-attribute", _attribute_arguments, help="per-example scores of one class on one split -> HDF5")
def _cmd_attribute(args: argparse.Namespace) -> int:
    """Relevance, activation and rank scores of every vertex for the images of one class (one forward/backward per
    batch), in the attribution contract.
    """

    from certified_circuits.core.sampling import AlgorithmError
    from certified_circuits.vision.attribution import run_attribution, write_empty_attribution
    from certified_circuits.vision.data import open_set
    from certified_circuits.vision.world import load_split

    for split, data, _ in args.also:
        if not Path(data).exists():
            raise InputError(f"--also {split}: {data} does not exist")
    model, index = _load(args)
    label = _label(model, args.concept)
    wnids = [args.concept] if index is not None else None
    cf = load_split(args.counterfactual) if args.counterfactual else None
    extra = {key: str(value) for key, value in args.attr}
    # the main item, then every --also item: one process (one torch start-up) for all splits of a class
    items = [(args.split, args.data, args.out, cf, 1)] + [(split, Path(data), Path(out), None, 0) for split, data, out in args.also]
    for split, data, out, counterfactual, min_examples in items:
        t0 = time.perf_counter()
        attrs = {"experiment": args.experiment, "dataset": str(data), "split": split, "concept": args.concept, **extra}
        if min_examples == 0 and Path(data).is_dir() and not (Path(data) / args.concept).is_dir():
            # ImageNet-A/O hold 200 of the 1,000 classes: a class they lack has nothing to re-discover
            write_empty_attribution(model, out, attrs, args.scorer)
            log.info("vision-attribute: %s has no folder for %s; wrote an empty %s", data, args.concept, out)
            continue
        iset = open_set(data, index, names=wnids)
        if min_examples == 0 and not (iset.labels == label).any():
            write_empty_attribution(model, out, attrs, args.scorer)
            log.info("vision-attribute: %s holds no image of %s; wrote an empty %s", data, args.concept, out)
            continue
        if split == args.split:
            _log_startup("vision-attribute")
        try:
            run_attribution(model, iset, label, out, attrs=attrs, n_examples=args.n_examples,
                            batch_size=args.batch_size, top_k=args.top_k, counterfactual=counterfactual,
                            plugins=args.scorer)
        except AlgorithmError as exc:  # a plug-in scorer raised: name the concept and split too
            raise AlgorithmError(f"{exc} (concept {args.concept!r}, split {split}, {data})") from exc.__cause__
        log.info("vision-attribute: %s (%s) -> %s in %.1fs", args.concept, split, out, time.perf_counter() - t0)
    return 0


def _discover_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="world .npz split or ROOT/<class>/ image folder")
    p.add_argument("--concept", required=True, help="class name or class index")
    p.add_argument("--scorer", required=True, type=plugin_of_kind("discovery"), metavar="MODULE:FUNCTION",
                   help="a black-box discovery plugin f(model, images, label, k_grid) -> bool [nK, U]")
    p.add_argument("--n-examples", type=positive_int, default=None, help="first N images of the class (default: all)")
    add_k_grid(p)
    add_votes_setting(p)
    p.add_argument("--workers", type=positive_int, default=1, help="processes running the sub-datasets (default 1)")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--split", default="concept", help="split name stored in the file's attrs")
    p.add_argument("--out", type=output_file, required=True, help="votes HDF5 (the votes contract)")


@STAGES.stage("vision-discover", _discover_arguments,
              help="Algorithm 2 for a black-box discovery plugin: run it on every sub-dataset -> votes HDF5")
def _cmd_discover(args: argparse.Namespace) -> int:
    """Run a black-box discovery function on the class's concept images and on each of the n0 + n sub-datasets
    (the masks of the votes stage), in --workers processes, and write the votes contract.
    """

    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.pipeline.tracking import add_metrics
    from certified_circuits.storage.store import write_votes
    from certified_circuits.vision.attribution import class_indices
    from certified_circuits.vision.data import open_set
    from certified_circuits.vision.plugins import discovery_votes

    model, index = _load(args)
    label = _label(model, args.concept)
    iset = open_set(args.data, index, names=[args.concept] if index is not None else None)
    images = iset.load(class_indices(iset, label, args.n_examples), model).to(model.device)
    _log_startup("vision-discover")
    start = time.perf_counter()
    concept_seed = mask_seed(args.seed, args.concept)
    votes = discovery_votes(args.scorer.spec, model, images, label, args.k_grid, p_del=args.p_del, n0=args.n0, n=args.n,
                            seed=concept_seed, workers=args.workers,
                            attrs={"scorer": args.scorer.name, "plugin": args.scorer.spec, "concept": args.concept,
                                   "model": model.arch, "experiment": args.experiment, "split": args.split,
                                   "source": str(args.data)})
    votes.attrs.update(seed=int(args.seed), mask_seed=concept_seed, seconds=time.perf_counter() - start)
    write_votes(args.out, votes)
    add_metrics({"votes_seconds": votes.attrs["seconds"], "n_components": model.n_vertices,
                 "n_examples": int(images.shape[0])})
    log.info("vision-discover: %s, %d x %d components, n0=%d n=%d in %.1fs -> %s", args.scorer.name, len(args.k_grid),
             model.n_vertices, args.n0, args.n, votes.attrs["seconds"], args.out)
    return 0


# ---------------------------------------------------------------------------------------------- evaluate


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--circuits", nargs=2, action="append", required=True, type=existing_file, metavar=("VOTES", "CERTS"),
                   help="votes and certificates of one scorer of the class (repeatable: all are evaluated in one process)")
    p.add_argument("--concept", required=True)
    p.add_argument("--eval-set", action="append", required=True, type=named_path, metavar="NAME=PATH",
                   help="eval set (world .npz or wnid folder); repeat for several")
    p.add_argument("--out", type=output_file, required=True, help="tidy CSV: one row per (scorer, eval set, method, K)")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--methods", nargs="*", help="subset of baseline/majority/certified (default: all)")
    p.add_argument("--ablation", choices=("zero", "mean"), default="zero",
                   help="what removed channels carry: zero (the paper's sufficiency test) or their mean "
                        "activation over --reference images (mean ablation)")
    p.add_argument("--reference", type=existing_path, default=None,
                   help="class-agnostic reference images for --ablation mean (world .npz or ROOT/<wnid>/)")
    p.add_argument("--reference-size", type=positive_int, default=500, help="reference images sampled (seeded)")
    p.add_argument("--reference-per-class", type=positive_int, default=5, help="folder references: images per class")
    p.add_argument("--n-negatives", type=positive_int, default=100, help="seeded sample of other-class images for the FPR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batch", type=positive_int, default=None,
                   help="(mask, image) pairs per forward pass (default: chosen from free device memory)")
    p.add_argument("--limit-per-class", type=positive_int, default=None, help="images per class folder (paper scale)")


@STAGES.stage("vision-evaluate", _evaluate_arguments, help="sufficiency of one class's circuits -> tidy CSV")
def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Zero non-circuit channels at every block output and measure class accuracy, false-positive rate on other classes
    and balanced accuracy for all K x methods (batched), plus the unmasked model ('full'). Rows carry the scorer
    and setting of their circuits.
    """

    from certified_circuits.pipeline.tracking import add_metrics
    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.storage.store import read_certificates, read_votes
    from certified_circuits.vision.data import open_set
    from certified_circuits.vision.evaluate import evaluate_circuits, mean_ablation_fill

    sets = dict(args.eval_set)
    for name, path in sets.items():
        if not path.exists():
            raise InputError(f"eval set {name!r}: {path} does not exist")
    if args.ablation == "mean" and args.reference is None:
        raise InputError("--ablation mean needs --reference (images whose mean activations fill removed channels)")
    circuits = [(read_votes(v), read_certificates(c)) for v, c in args.circuits]
    check_circuit_files([(votes, v, certificates, c) for (votes, certificates), (v, c) in zip(circuits, args.circuits)],
                        concept=args.concept)
    model, index = _load(args)
    label = _label(model, args.concept)
    isets = {name: open_set(p, index, limit_per_class=args.limit_per_class) for name, p in sets.items()}
    fill = None
    if args.ablation == "mean":
        reference = open_set(args.reference, index, limit_per_class=args.reference_per_class)
        fill = mean_ablation_fill(model, reference, args.reference_size, args.seed)
    _log_startup("vision-evaluate")
    table = evaluate_circuits(model, isets, label, args.concept, circuits, experiment=args.experiment,
                              methods=args.methods, ablation=args.ablation, fill=fill, n_negatives=args.n_negatives,
                              seed=args.seed, max_batch=args.max_batch,
                              progress_log=lambda message: log.info("vision-evaluate: %s", message))
    write_csv(args.out, table)
    full = table[table.method == "full"].drop_duplicates("eval_set")
    add_metrics({f"full_accuracy_{r.eval_set}": r.accuracy for r in full.itertuples()})
    return 0


# ---------------------------------------------------------------------------------------------- runtime


def _runtime_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="concept data of the class (.npz or ROOT/<wnid>/)")
    p.add_argument("--concept", required=True)
    p.add_argument("--n-examples", type=positive_int, default=50)
    p.add_argument("--n", type=positive_int, nargs="+", default=[100, 500, 1000], help="certification sample sizes")
    add_k_grid(p, required=False, default=[float(k) for k in np.linspace(0.05, 1.0, 20)])
    default = Setting()  # the setting's defaults and its checks are the Setting's (core/setting.py)
    p.add_argument("--p-del", type=float, default=default.p_del, help=f"deletion probability (default {default.p_del})")
    p.add_argument("--tau", type=float, default=default.tau, help=f"confidence threshold (default {default.tau})")
    p.add_argument("--alpha", type=float, default=default.alpha, help=f"family-wise failure probability (default {default.alpha})")
    p.add_argument("--correction", choices=("bonferroni", "holm"), default=default.correction)
    p.add_argument("--seed", type=int, default=default.seed,
                   help="config seed; the masks are drawn from (seed, concept), as for votes")
    p.add_argument("--out-stem", type=Path, required=True, help="writes STEM.csv, STEM.md and STEM.tex")


@STAGES.stage("vision-runtime", _runtime_arguments, help="naive vs cached certification cost (App. D table)")
def _cmd_runtime(args: argparse.Namespace) -> int:
    """Time certification of one class with A re-run on every sub-dataset (naive) and from cached per-example relevance
    (cached).
    """

    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.reports.tables import format_runtime_table, write_table
    from certified_circuits.vision.attribution import class_indices
    from certified_circuits.vision.data import open_set
    from certified_circuits.vision.runtime import measure_naive_vs_cached

    try:  # refuse an invalid setting before the model loads
        setting = Setting(p_del=args.p_del, tau=args.tau, alpha=args.alpha, seed=args.seed, correction=args.correction)
    except ValueError as error:
        raise InputError(f"vision-runtime: {error}") from error
    model, index = _load(args)
    label = _label(model, args.concept)
    iset = open_set(args.data, index, names=[args.concept] if index is not None else None)
    images = iset.load(class_indices(iset, label, args.n_examples), model).to(model.device)
    table = format_runtime_table(measure_naive_vs_cached(
        model, images, label, args.n, np.asarray(args.k_grid), setting.p_del, setting.tau, setting.alpha,
        mask_seed(setting.seed, args.concept), correction=setting.correction))
    write_table(table, args.out_stem, caption="Runtime: naive (A re-run per mask) vs cached per-example scores",
                float_format="{:.4g}")
    log.info("vision-runtime:\n%s", table.to_string(index=False))
    return 0


# ---------------------------------------------------------------------------------------------- paper-scale data


def _select_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=existing_path, required=True, help="ImageNet val root (ROOT/<wnid>/)")
    p.add_argument("--n", type=positive_int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=output_file, required=True)


@STAGES.stage("vision-select-classes", _select_arguments, help="seeded random class selection (paper: 100 classes)")
def _cmd_select_classes(args: argparse.Namespace) -> int:
    """Draw N wnid folders of an ImageFolder tree by seed; write one wnid per line."""

    from certified_circuits.storage.atomic import write_text
    from certified_circuits.vision.imagenet import list_classes, select_classes

    chosen = select_classes(list_classes(args.data), args.n, args.seed)
    write_text(args.out, "\n".join(chosen) + "\n")
    log.info("vision-select-classes: %d classes -> %s", len(chosen), args.out)
    return 0


def _imagenet_c_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--val", type=existing_path, required=True, help="ImageNet val root (ROOT/<wnid>/)")
    p.add_argument("--classes", type=existing_file, required=True, help="wnid list (vision-select-classes output)")
    p.add_argument("--out", type=Path, required=True, help="ImageNet-C root")
    p.add_argument("--severity", type=int, default=2, choices=range(1, 6))


@STAGES.stage("vision-imagenet-c", _imagenet_c_arguments, help="generate ImageNet-C defocus blur from ImageNet val")
def _cmd_imagenet_c(args: argparse.Namespace) -> int:
    """Write OUT/defocus_blur/<severity>/<wnid>/*.png for the listed classes (resize 256, crop 224, reimplemented
    ImageNet-C defocus blur). Use when the official ImageNet-C files are absent.
    """

    from certified_circuits.vision.imagenet import generate_imagenet_c

    classes = [line.strip() for line in args.classes.read_text().splitlines() if line.strip()]
    out = generate_imagenet_c(args.val, args.out, classes, severity=args.severity)
    log.info("vision-imagenet-c: %s", out)
    return 0


def _oodcv_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=existing_path, required=True)
    p.add_argument("--mapping", type=existing_file, required=True, help="JSON object {category: wnid}")
    p.add_argument("--out", type=Path, required=True)


@STAGES.stage("vision-prepare-oodcv", _oodcv_arguments, help="sort an OOD-CV export into wnid folders")
def _cmd_prepare_oodcv(args: argparse.Namespace) -> int:
    """Copy SRC/<category>/<image> to OUT/<wnid>/<image> with an explicit JSON table {category: wnid} (only the
    categories shared with ImageNet-1k).
    """

    from certified_circuits.vision.imagenet import prepare_oodcv

    try:
        mapping = json.loads(args.mapping.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{args.mapping} is not valid JSON ({exc}): expected an object {{category: wnid}}") from exc
    prepare_oodcv(args.src, args.out, mapping)
    return 0
