"""``certified-circuits vision-*`` subcommands (registered by ``certified_circuits.cli``).

- ``vision-world``: build the embedded concept world (one ``.npz`` per split + ``world.json``);
- ``vision-train``: train the world ResNet, write the checkpoint and ID/OOD accuracies (JSON);
- ``vision-filter-ood``: build the adversarial and anomaly sets by filtration against a model, and
  write the full model's accuracy on every split (the calibration numbers);
- ``vision-attribute``: per-example scores of one class on one split -> attribution HDF5;
- ``vision-evaluate``: sufficiency of one class's circuits (votes + certificates) -> tidy CSV.

Every path is explicit so that a Snakemake rule can declare inputs and outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def _threads(args: argparse.Namespace) -> None:
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)


def _model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default="world", choices=["world", "resnet50", "resnet101", "vit_b_16"],
                   help="'world' (needs --checkpoint) or a torchvision ImageNet model (default: world)")
    g.add_argument("--checkpoint", type=Path, help="world model checkpoint written by vision-train")
    g.add_argument("--weights", type=Path, help="IMAGENET1K_V1 weights file (default: the torch hub cache)")
    g.add_argument("--class-index", type=Path,
                   help="LOC_synset_mapping.txt (wnid per line in class order) for ImageNet folders")
    g.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: workflow jobs run side by side; raise it for a lone job)")
    g.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default cpu)")


def _load(args: argparse.Namespace):
    from .imagenet import class_names_from_index, load_wnid_index
    from .models import load_model

    index = load_wnid_index(args.class_index) if args.class_index else None
    if args.model != "world" and index is None:
        raise SystemExit(f"--model {args.model} needs --class-index LOC_synset_mapping.txt to map wnid folders to classes")
    names = class_names_from_index(index) if index else None
    model = load_model(args.model, checkpoint=args.checkpoint, weights=args.weights, class_names=names)
    import torch

    if args.device != "cpu" and args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available on this machine; use --device cpu")
    model.net.to(args.device)
    return model, index


def _label(model, concept: str) -> int:
    if concept in model.class_names:
        return model.class_names.index(concept)
    if concept.isdigit() and int(concept) < len(model.class_names):
        return int(concept)
    raise SystemExit(f"unknown concept {concept!r}: use a class name of the model, e.g. {model.class_names[:5]}, "
                     f"or a class index < {len(model.class_names)}")


# ---------------------------------------------------------------------------------------------- world

def cmd_world(args: argparse.Namespace) -> int:
    from .world import SPLITS, WorldConfig, build_world

    cfg = WorldConfig(
        seed=args.seed, image_size=args.image_size, n_classes=args.n_classes, habitat_rate=args.habitat_rate,
        texture_contrast=args.texture_contrast, habitat_tint=args.habitat_tint,
        n_train_per_class=args.n_train_per_class, n_concept_per_class=args.n_concept_per_class,
        n_test_per_class=args.n_test_per_class, n_ood_per_class=args.n_ood_per_class,
        n_pool_per_class=args.n_pool_per_class, n_anomaly_pool=args.n_anomaly_pool,
        corruption_severity=args.severity,
    )
    try:
        cfg.validate()
    except ValueError as e:
        raise SystemExit(f"vision-world: {e}")
    splits = tuple(args.splits) if args.splits else SPLITS
    t0 = time.perf_counter()
    build_world(cfg, args.out, splits)
    print(f"vision-world: wrote {len(splits)} splits to {args.out} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- train

def cmd_train(args: argparse.Namespace) -> int:
    from .models import save_world_model
    from .train import accuracy, train_world_model
    from .world import load_split, write_json_atomic

    _threads(args)
    tr = load_split(args.world / "train.npz")
    class_names = [str(c) for c in tr["class_names"]]
    model, log = train_world_model(tr["images"], tr["labels"], class_names, seed=args.seed, epochs=args.epochs,
                                   batch_size=args.batch_size, lr=args.lr, widths=tuple(args.widths),
                                   blocks=tuple(args.blocks), stem_stride=args.stem_stride)
    metrics = {"train_log": log}
    for split in ("id_test", "context_shift", "corruption"):
        p = args.world / f"{split}.npz"
        if p.is_file():
            d = load_split(p)
            metrics[f"accuracy_{split}"] = accuracy(model, d["images"], d["labels"].astype(np.int64))
    save_world_model(args.out_model, model.net, class_names, args.widths, args.blocks, int(tr["images"].shape[1]),
                     meta={"seed": args.seed, "world": str(args.world)})
    write_json_atomic(args.out_metrics, metrics)
    print("vision-train: " + ", ".join(f"{k}={v:.3f}" for k, v in metrics.items() if k.startswith("accuracy")), file=sys.stderr)
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    from .models import load_world_model
    from .train import accuracy, filter_adversarial, filter_anomaly
    from .world import load_split, save_split, write_json_atomic

    _threads(args)
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
    print("vision-filter-ood: " + ", ".join(f"{k}={v:.3f}" for k, v in metrics.items() if k.startswith("accuracy")), file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- attribute

def cmd_attribute(args: argparse.Namespace) -> int:
    from .attribution import run_attribution, write_empty_attribution
    from .data import open_set
    from .world import load_split

    _threads(args)
    model, index = _load(args)
    label = _label(model, args.concept)
    wnids = [args.concept] if index is not None else None
    cf = load_split(args.counterfactual) if args.counterfactual else None
    extra = {k: str(v) for k, v in _parse_sets(args.attr, "--attr", "KEY=VALUE").items()}
    # the main item, then every --also item: one process (one torch start-up) for all splits of a class
    items = [(args.split, args.data, args.out, cf, 1)] + [(split, Path(data), Path(out), None, 0) for split, data, out in args.also]
    for split, data, out, counterfactual, min_examples in items:
        t0 = time.perf_counter()
        attrs = {"experiment": args.experiment, "dataset": str(data), "split": split, "concept": args.concept, **extra}
        if min_examples == 0 and Path(data).is_dir() and not (Path(data) / args.concept).is_dir():
            # ImageNet-A/O hold 200 of the 1,000 classes: a class they lack has nothing to re-discover
            write_empty_attribution(model, out, attrs)
            print(f"vision-attribute: {data} has no folder for {args.concept}; wrote an empty {out}", file=sys.stderr)
            continue
        iset = open_set(data, index, wnids=wnids)
        if min_examples == 0 and not (iset.labels == label).any():
            write_empty_attribution(model, out, attrs)
            print(f"vision-attribute: {data} holds no image of {args.concept}; wrote an empty {out}", file=sys.stderr)
            continue
        run_attribution(model, iset, label, out, attrs=attrs, n_examples=args.n_examples,
                        batch_size=args.batch_size, top_k=args.top_k, counterfactual=counterfactual)
        print(f"vision-attribute: {args.concept} ({split}) -> {out} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- evaluate

def _parse_sets(items: list[str], flag: str = "--eval-set", form: str = "NAME=PATH") -> dict[str, Path]:
    out = {}
    for it in items:
        if "=" not in it:
            raise SystemExit(f"{flag} expects {form}, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = Path(v)
    return out


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..certification import method_masks
    from ..store import read_certificates, read_votes
    from .data import open_set
    from .evaluate import evaluate_class, write_table

    _threads(args)
    sets = _parse_sets(args.eval_set)
    for name, p in sets.items():
        if not p.exists():
            raise SystemExit(f"vision-evaluate: eval set {name!r}: {p} does not exist")
    circuits = [(args.votes, args.certificates, args.out)] if args.votes else []
    circuits += [tuple(map(Path, item)) for item in args.circuits]
    if not circuits or (args.votes is None) != (args.certificates is None) or (args.votes is None) != (args.out is None):
        raise SystemExit("vision-evaluate: give --votes, --certificates and --out together, and/or --circuits VOTES CERTS OUT")
    for item in circuits:
        for path in item[:2]:
            if not Path(path).is_file():
                raise SystemExit(f"vision-evaluate: {path} does not exist")
    model, index = _load(args)
    label = _label(model, args.concept)
    isets = {name: open_set(p, index, limit_per_class=args.limit_per_class) for name, p in sets.items()}
    max_batch = args.max_batch or (1024 if model.image_size <= 64 else 64)
    fill = None
    if args.ablation == "mean":
        from .hooks import reference_activations

        if args.reference is None:
            raise SystemExit("vision-evaluate: --ablation mean needs --reference (images whose mean activations fill removed channels)")
        reference = open_set(args.reference, index, limit_per_class=args.reference_per_class)
        rng = np.random.default_rng(args.seed)
        pick = np.sort(rng.choice(len(reference), size=min(len(reference), args.reference_size), replace=False))
        fill = reference_activations(model, reference.load(pick, model).to(model.device))
    for votes_path, certificates_path, out in circuits:  # one process (one torch start-up) for all items
        t0 = time.perf_counter()
        votes = read_votes(votes_path)
        masks = method_masks(votes, read_certificates(certificates_path))
        if args.methods:
            unknown = set(args.methods) - set(masks)
            if unknown:
                raise SystemExit(f"unknown methods {sorted(unknown)}; available: {sorted(masks)}")
            masks = {m: masks[m] for m in args.methods}
        df = evaluate_class(model, isets, label, masks, np.asarray(votes.k_grid), np.asarray(votes.groups),
                            experiment=args.experiment, concept=args.concept, n_negatives=args.n_negatives,
                            seed=args.seed, max_batch=max_batch, fill=fill)
        df["ablation"] = args.ablation
        write_table(df, out)
        print(f"vision-evaluate: {args.concept}: {len(df)} rows -> {out} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


def cmd_runtime(args: argparse.Namespace) -> int:
    from ..figures import format_runtime_table, write_table
    from .attribution import class_indices
    from .data import open_set
    from .runtime import measure_naive_vs_cached

    _threads(args)
    model, index = _load(args)
    label = _label(model, args.concept)
    iset = open_set(args.data, index, wnids=[args.concept] if index is not None else None)
    images = iset.load(class_indices(iset, label, args.n_examples), model).to(model.device)
    table = format_runtime_table(measure_naive_vs_cached(model, images, label, args.n, np.asarray(args.k_grid),
                                                         args.p_del, args.tau, args.alpha, args.seed))
    write_table(table, args.out_stem, caption="Runtime: naive (A re-run per mask) vs cached per-example scores",
                float_format="{:.4g}")
    print(table.to_string(index=False), file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- paper-scale data

def cmd_select_classes(args: argparse.Namespace) -> int:
    from .imagenet import list_classes, select_classes

    chosen = select_classes(list_classes(args.data), args.n, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text("\n".join(chosen) + "\n")
    tmp.replace(args.out)
    print(f"vision-select-classes: {len(chosen)} classes -> {args.out}", file=sys.stderr)
    return 0


def _read_classes(path: Path) -> list[str]:
    if not path.is_file():
        raise SystemExit(f"class list {path} not found (one wnid per line; see vision-select-classes)")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def cmd_imagenet_c(args: argparse.Namespace) -> int:
    from .imagenet import generate_imagenet_c

    out = generate_imagenet_c(args.val, args.out, _read_classes(args.classes), severity=args.severity)
    print(f"vision-imagenet-c: {out}", file=sys.stderr)
    return 0


def cmd_prepare_oodcv(args: argparse.Namespace) -> int:
    from .imagenet import prepare_oodcv

    if not args.mapping.is_file():
        raise SystemExit(f"OOD-CV mapping {args.mapping} not found: a JSON object {{category: wnid}}")
    prepare_oodcv(args.src, args.out, json.loads(args.mapping.read_text()))
    return 0


# ---------------------------------------------------------------------------------------------- register

def register(subparsers) -> None:
    """Add the vision subcommands to the top-level ``certified-circuits`` parser."""
    from .world import SPLITS, WorldConfig

    d = WorldConfig()
    p = subparsers.add_parser("vision-world", help="build the embedded concept world",
                              description="Render the concept world (shape classes + class-correlated habitats) "
                                          "into OUT/<split>.npz and OUT/world.json. Deterministic in --seed.")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--image-size", type=int, default=d.image_size)
    p.add_argument("--n-classes", type=int, default=d.n_classes)
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
    p.set_defaults(func=cmd_world)

    p = subparsers.add_parser("vision-train", help="train the embedded world ResNet",
                              description="Train a small torchvision ResNet on WORLD/train.npz; write the checkpoint "
                                          "and accuracies on id_test / context_shift / corruption (JSON).")
    p.add_argument("--world", type=Path, required=True, help="folder written by vision-world")
    p.add_argument("--out-model", type=Path, required=True)
    p.add_argument("--out-metrics", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--widths", type=int, nargs=4, default=[16, 32, 64, 128])
    p.add_argument("--blocks", type=int, nargs=4, default=[1, 1, 1, 1])
    p.add_argument("--stem-stride", type=int, default=2, choices=[1, 2], help="stride of the 3x3 stem convolution")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser("vision-filter-ood", help="filter the adversarial / anomaly OOD sets against a model",
                              description="ImageNet-A-style filtration (keep misclassified hard images) and "
                                          "ImageNet-O-style filtration (keep novel shapes confidently labelled as a "
                                          "known class, labelled with it); also writes the model's accuracy per split.")
    p.add_argument("--world", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True, help="filter model (vision-train output)")
    p.add_argument("--out-adversarial", type=Path, required=True)
    p.add_argument("--out-anomaly", type=Path, required=True)
    p.add_argument("--out-metrics", type=Path, required=True)
    p.add_argument("--max-per-class", type=int, default=50)
    p.add_argument("--min-confidence", type=float, default=0.7)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=cmd_filter)

    p = subparsers.add_parser("vision-attribute", help="per-example scores of one class on one split -> HDF5",
                              description="Relevance, activation and rank scores of every vertex for the images of "
                                          "one class (one forward/backward per batch), in the attribution contract.")
    _model_args(p)
    p.add_argument("--data", type=Path, required=True, help="world .npz split or ROOT/<wnid>/ image folder")
    p.add_argument("--concept", required=True, help="class name (world), wnid (ImageNet) or class index")
    p.add_argument("--split", default="concept", help="split name stored in the file's attrs")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--out", type=Path, required=True, help="attribution .h5")
    p.add_argument("--n-examples", type=int, default=None, help="first N images of the class (default: all)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--top-k", type=int, default=9, help="top-activating examples stored per vertex")
    p.add_argument("--counterfactual", type=Path, help="world counterfactual.npz -> extras/spurious_index")
    p.add_argument("--also", nargs=3, action="append", default=[], metavar=("SPLIT", "DATA", "OUT"),
                   help="attribute the same class on another split in the same process (repeatable); a split "
                        "without images of the class gets a valid file with zero examples")
    p.add_argument("--attr", action="append", default=[], metavar="KEY=VALUE",
                   help="extra file attribute, e.g. config_digest=abc123 (repeatable)")
    p.set_defaults(func=cmd_attribute)

    p = subparsers.add_parser("vision-runtime", help="naive vs cached certification cost (App. D table)",
                              description="Time certification of one class with A re-run on every sub-dataset "
                                          "(naive) and from cached per-example relevance (cached).")
    _model_args(p)
    p.add_argument("--data", type=Path, required=True, help="concept data of the class (.npz or ROOT/<wnid>/)")
    p.add_argument("--concept", required=True)
    p.add_argument("--n-examples", type=int, default=50)
    p.add_argument("--n", type=int, nargs="+", default=[100, 500, 1000], help="certification sample sizes")
    p.add_argument("--k-grid", type=float, nargs="+", default=list(np.linspace(0.05, 1.0, 20)))
    p.add_argument("--p-del", type=float, default=0.6)
    p.add_argument("--tau", type=float, default=0.95)
    p.add_argument("--alpha", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-stem", type=Path, required=True, help="writes STEM.csv, STEM.md and STEM.tex")
    p.set_defaults(func=cmd_runtime)

    p = subparsers.add_parser("vision-evaluate", help="sufficiency of one class's circuits -> tidy CSV",
                              description="Zero non-circuit channels at every block output and measure class accuracy, "
                                          "false-positive rate on other classes and balanced accuracy for all K x "
                                          "methods (batched), plus the unmasked model ('full').")
    _model_args(p)
    p.add_argument("--votes", type=Path, default=None)
    p.add_argument("--certificates", type=Path, default=None)
    p.add_argument("--circuits", nargs=3, action="append", default=[], metavar=("VOTES", "CERTS", "OUT"),
                   help="more (votes, certificates, CSV) triples of the same class, evaluated in the same process")
    p.add_argument("--concept", required=True)
    p.add_argument("--eval-set", action="append", required=True, metavar="NAME=PATH",
                   help="eval set (world .npz or wnid folder); repeat for several")
    p.add_argument("--out", type=Path, default=None, help="tidy CSV (with --votes and --certificates)")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--methods", nargs="*", help="subset of baseline/majority/certified (default: all)")
    p.add_argument("--ablation", choices=("zero", "mean"), default="zero",
                   help="what removed channels carry: zero (the paper's sufficiency test) or their mean "
                        "activation over --reference images (mean ablation)")
    p.add_argument("--reference", type=Path, default=None,
                   help="class-agnostic reference images for --ablation mean (world .npz or ROOT/<wnid>/)")
    p.add_argument("--reference-size", type=int, default=500, help="reference images sampled (seeded)")
    p.add_argument("--reference-per-class", type=int, default=5, help="folder references: images per class")
    p.add_argument("--n-negatives", type=int, default=100, help="seeded sample of other-class images for the FPR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batch", type=int, default=None,
                   help="(mask, image) pairs per forward pass (default: 1024 for the world model, 64 at 224 px)")
    p.add_argument("--limit-per-class", type=int, default=None, help="images per class folder (paper scale)")
    p.set_defaults(func=cmd_evaluate)

    p = subparsers.add_parser("vision-select-classes", help="seeded random class selection (paper: 100 classes)",
                              description="Draw N wnid folders of an ImageFolder tree by seed; write one wnid per line.")
    p.add_argument("--data", type=Path, required=True, help="ImageNet val root (ROOT/<wnid>/)")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_select_classes)

    p = subparsers.add_parser("vision-imagenet-c", help="generate ImageNet-C defocus blur from ImageNet val",
                              description="Write OUT/defocus_blur/<severity>/<wnid>/*.png for the listed classes "
                                          "(resize 256, crop 224, reimplemented ImageNet-C defocus blur). Use when the "
                                          "official ImageNet-C files are absent.")
    p.add_argument("--val", type=Path, required=True, help="ImageNet val root (ROOT/<wnid>/)")
    p.add_argument("--classes", type=Path, required=True, help="wnid list (vision-select-classes output)")
    p.add_argument("--out", type=Path, required=True, help="ImageNet-C root")
    p.add_argument("--severity", type=int, default=2)
    p.set_defaults(func=cmd_imagenet_c)

    p = subparsers.add_parser("vision-prepare-oodcv", help="sort an OOD-CV export into wnid folders",
                              description="Copy SRC/<category>/<image> to OUT/<wnid>/<image> with an explicit JSON "
                                          "table {category: wnid} (only the categories shared with ImageNet-1k).")
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--mapping", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_prepare_oodcv)
