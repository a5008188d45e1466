"""``certified-circuits vision-*`` stages of a class's circuits (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-attribute``: per-example scores of one class on one or more splits -> attribution HDF5 (the
  built-in scorers, layer conductance with ``--conductance BASELINE``, and any additive plugin, ``--scorer
  module:function``);
- ``vision-discover``: a black-box discovery plugin run on every sub-dataset -> votes HDF5;
- ``vision-evaluate``: sufficiency of one class's circuits (votes + certificates) -> tidy CSV;
- ``vision-runtime``: naive vs cached certification cost (App. D).

The model options and loading are :mod:`.vision_common`'s. Every path is explicit so that a Snakemake rule can
declare inputs and outputs.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

from certified_circuits.core.setting import Setting
from certified_circuits.cli.stages import (
    InputError,
    Stages,
    add_k_grid,
    add_decision_setting,
    add_reference_size,
    add_setting_tag,
    add_votes_setting,
    check_circuit_files,
    existing_file,
    existing_path,
    named_path,
    output_file,
    positive_int,
)
from certified_circuits.cli.stages import seed as seed_option
from certified_circuits.cli.vision_common import (
    check_conductance_options,
    class_label,
    conductance_arguments,
    conductance_of,
    load_model,
    log_startup,
    model_arguments,
)

log = logging.getLogger(__name__)
STAGES = Stages()


# ---------------------------------------------------------------------------------------------- attribute


def _attribute_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="world .npz split or ROOT/<wnid>/ image folder")
    p.add_argument("--concept", required=True, help="class name (world), wnid (ImageNet) or class index")
    p.add_argument("--split", default="concept", help="split name stored in the file's attrs")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--out", type=output_file, required=True, help="attribution .h5")
    p.add_argument("--n-examples", type=positive_int, default=None, help="first N images of the class (default: all)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--top-k", type=positive_int, default=9, help="top-activating examples stored per vertex")
    p.add_argument("--counterfactual", type=existing_file, help="world counterfactual.npz -> extras/spurious_index")
    p.add_argument(
        "--also",
        nargs=3,
        action="append",
        default=[],
        metavar=("SPLIT", "DATA", "OUT"),
        help="attribute the same class on another split in the same process (repeatable); a split "
        "without images of the class gets a valid file with zero examples",
    )
    p.add_argument(
        "--attr",
        action="append",
        default=[],
        type=named_path,
        metavar="KEY=VALUE",
        help="extra file attribute, e.g. config_digest=abc123 (repeatable)",
    )
    p.add_argument(
        "--scorer",
        action="append",
        default=[],
        type=additive_plugin,
        metavar="MODULE:FUNCTION",
        help="an additive scorer plugin f(activations, gradients, channel_dim) -> [B, U], scored beside "
        "the built-in scorers as scores/FUNCTION (repeatable; certified_circuits/vision/scoring/plugins.py)",
    )
    conductance_arguments(p)


def plugin_of_kind(kind: str):
    """An argparse type: a ``module:function`` plugin of ``kind`` (imported and checked when parsed)."""

    def parse(text: str):
        from certified_circuits.vision.scoring.plugins import load_plugin

        try:
            plugin = load_plugin(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if plugin.kind != kind:
            other = "vision-discover" if plugin.kind == "discovery" else "vision-attribute --scorer"
            article = "an" if plugin.kind == "additive" else "a"
            raise argparse.ArgumentTypeError(
                f"{text} is {article} {plugin.kind} plugin, not {kind}: run it with {other}"
            )
        return plugin

    return parse


additive_plugin = plugin_of_kind("additive")


@STAGES.stage("vision-attribute", _attribute_arguments, help="per-example scores of one class on one split -> HDF5")
def _cmd_attribute(args: argparse.Namespace) -> int:
    """Relevance, activation and rank scores of every vertex for the images of one class (one forward/backward per
    batch), and layer conductance with ``--conductance`` (m more forward/backward passes per batch), in the
    attribution contract.
    """

    from certified_circuits.core.sampling import AlgorithmError
    from certified_circuits.vision.scoring.attribution import run_attribution, write_empty_attribution
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.data.world import load_split

    for split, data, _ in args.also:
        if not Path(data).exists():
            raise InputError(f"--also {split}: {data} does not exist")
    check_conductance_options(args)
    model, index = load_model(args)
    label = class_label(model, args.concept)
    conductance = conductance_of(args, model, index)
    wnids = [args.concept] if index is not None else None
    cf = load_split(args.counterfactual) if args.counterfactual else None
    extra = {key: str(value) for key, value in args.attr}
    # the main item, then every --also item: one process (one torch start-up) for all splits of a class
    items = [(args.split, args.data, args.out, cf, 1)] + [
        (split, Path(data), Path(out), None, 0) for split, data, out in args.also
    ]
    for split, data, out, counterfactual, min_examples in items:
        t0 = time.perf_counter()
        attrs = {"experiment": args.experiment, "dataset": str(data), "split": split, "concept": args.concept, **extra}
        if min_examples == 0 and Path(data).is_dir() and not (Path(data) / args.concept).is_dir():
            # ImageNet-A/O hold 200 of the 1,000 classes: a class they lack has nothing to re-discover
            write_empty_attribution(model, out, attrs, args.scorer, conductance)
            log.info("vision-attribute: %s has no folder for %s; wrote an empty %s", data, args.concept, out)
            continue
        iset = open_set(data, index, names=wnids)
        if min_examples == 0 and not (iset.labels == label).any():
            write_empty_attribution(model, out, attrs, args.scorer, conductance)
            log.info("vision-attribute: %s holds no image of %s; wrote an empty %s", data, args.concept, out)
            continue
        if split == args.split:
            log_startup("vision-attribute")
        try:
            run_attribution(
                model,
                iset,
                label,
                out,
                attrs=attrs,
                n_examples=args.n_examples,
                batch_size=args.batch_size,
                top_k=args.top_k,
                counterfactual=counterfactual,
                plugins=args.scorer,
                conductance=conductance,
            )
        except AlgorithmError as exc:  # a plug-in scorer raised: name the concept and split too
            raise AlgorithmError(f"{exc} (concept {args.concept!r}, split {split}, {data})") from exc.__cause__
        log.info("vision-attribute: %s (%s) -> %s in %.1fs", args.concept, split, out, time.perf_counter() - t0)
    return 0


def _discover_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="world .npz split or ROOT/<class>/ image folder")
    p.add_argument("--concept", required=True, help="class name or class index")
    p.add_argument(
        "--scorer",
        required=True,
        type=plugin_of_kind("discovery"),
        metavar="MODULE:FUNCTION",
        help="a black-box discovery plugin f(model, images, label, k_grid) -> bool [nK, U]",
    )
    p.add_argument("--n-examples", type=positive_int, default=None, help="first N images of the class (default: all)")
    add_k_grid(p)
    add_votes_setting(p)
    add_setting_tag(p, "votes")
    p.add_argument("--workers", type=positive_int, default=1, help="processes running the sub-datasets (default 1)")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--split", default="concept", help="split name stored in the file's attrs")
    p.add_argument("--out", type=output_file, required=True, help="votes HDF5 (the votes contract)")


@STAGES.stage(
    "vision-discover",
    _discover_arguments,
    help="Algorithm 2 for a black-box discovery plugin: run it on every sub-dataset -> votes HDF5",
)
def _cmd_discover(args: argparse.Namespace) -> int:
    """Run a black-box discovery function on the class's concept images and on each of the n0 + n sub-datasets
    (the masks of the votes stage), in --workers processes, and write the votes contract.
    """

    from certified_circuits.cli.main import check_votes_memory, masks_fix  # the votes stage's one estimate
    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.pipeline.tracking import add_metrics
    from certified_circuits.storage.store import write_votes
    from certified_circuits.vision.scoring.attribution import class_indices
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.scoring.plugins import discovery_votes

    model, index = load_model(args)
    label = class_label(model, args.concept)
    iset = open_set(args.data, index, names=[args.concept] if index is not None else None)
    images = iset.load(class_indices(iset, label, args.n_examples), model).to(model.device)
    check_votes_memory(args.n0 + args.n, int(images.shape[0]), model.n_vertices, masks_fix(args))
    log_startup("vision-discover")
    start = time.perf_counter()
    concept_seed = mask_seed(args.seed, args.concept)
    votes = discovery_votes(
        args.scorer.spec,
        model,
        images,
        label,
        args.k_grid,
        p_del=args.p_del,
        n0=args.n0,
        n=args.n,
        seed=concept_seed,
        workers=args.workers,
        attrs={
            "scorer": args.scorer.name,
            "plugin": args.scorer.spec,
            "concept": args.concept,
            "model": model.arch,
            "experiment": args.experiment,
            "split": args.split,
            "source": str(args.data),
        },
    )
    votes.attrs.update(seed=int(args.seed), mask_seed=concept_seed, seconds=time.perf_counter() - start)
    write_votes(args.out, votes)
    add_metrics(
        {"votes_seconds": votes.attrs["seconds"], "n_components": model.n_vertices, "n_examples": int(images.shape[0])}
    )
    log.info(
        "vision-discover: %s, %d x %d components, n0=%d n=%d in %.1fs -> %s",
        args.scorer.name,
        len(args.k_grid),
        model.n_vertices,
        args.n0,
        args.n,
        votes.attrs["seconds"],
        args.out,
    )
    return 0


# ---------------------------------------------------------------------------------------------- evaluate


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument(
        "--circuits",
        nargs=2,
        action="append",
        required=True,
        type=existing_file,
        metavar=("VOTES", "CERTS"),
        help="votes and certificates of one scorer of the class (repeatable: all are evaluated in one process)",
    )
    p.add_argument("--concept", required=True)
    p.add_argument(
        "--eval-set",
        action="append",
        required=True,
        type=named_path,
        metavar="NAME=PATH",
        help="eval set (world .npz or wnid folder); repeat for several",
    )
    p.add_argument("--out", type=output_file, required=True, help="tidy CSV: one row per (scorer, eval set, method, K)")
    p.add_argument("--experiment", default="vision")
    p.add_argument("--methods", nargs="*", help="subset of baseline/majority/certified (default: all)")
    p.add_argument(
        "--ablation",
        choices=("zero", "mean"),
        nargs="+",
        default=["zero"],
        help="what removed channels carry: zero (the paper's sufficiency test) or their mean "
        "activation over --reference images (mean ablation); several (--ablation zero mean) write rows "
        "for each, in that order, with the mean fill computed once",
    )
    p.add_argument(
        "--reference",
        type=existing_path,
        default=None,
        help="class-agnostic reference images for --ablation mean (world .npz or ROOT/<wnid>/)",
    )
    add_reference_size(p, "reference images (at most the reference set)")
    p.add_argument("--reference-per-class", type=positive_int, default=5, help="folder references: images per class")
    p.add_argument(
        "--n-negatives", type=positive_int, default=100, help="seeded sample of other-class images for the FPR"
    )
    p.add_argument("--seed", type=seed_option, default=0)
    p.add_argument(
        "--max-batch",
        type=positive_int,
        default=None,
        help="(mask, image) pairs per forward pass (default: chosen from free device memory)",
    )
    p.add_argument("--limit-per-class", type=positive_int, default=None, help="images per class folder (paper scale)")


@STAGES.stage("vision-evaluate", _evaluate_arguments, help="sufficiency of one class's circuits -> tidy CSV")
def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Ablate non-circuit channels at every block output (zero and/or mean ablation: rows for each) and measure class
    accuracy, false-positive rate on other classes and balanced accuracy for all K x methods (batched), plus the
    unmasked model ('full'). Rows carry the scorer, the ablation and the setting of their circuits. Every scorer and
    ablation runs in this one process, in one pass over each eval set (``evaluate.class_tables``).
    """

    from certified_circuits.pipeline.tracking import add_metrics
    from certified_circuits.storage.atomic import write_csv
    from certified_circuits.storage.store import read_certificates, read_votes
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.evaluate import evaluate_circuits, mean_ablation_fill

    sets = dict(args.eval_set)
    for name, path in sets.items():
        if not path.exists():
            raise InputError(f"eval set {name!r}: {path} does not exist")
    ablations = list(dict.fromkeys(args.ablation))  # in the given order, each once
    if "mean" in ablations and args.reference is None:
        raise InputError("--ablation mean needs --reference (images whose mean activations fill removed channels)")
    circuits = [(read_votes(v), read_certificates(c)) for v, c in args.circuits]
    check_circuit_files(
        [(votes, v, certificates, c) for (votes, certificates), (v, c) in zip(circuits, args.circuits)],
        concept=args.concept,
    )
    model, index = load_model(args)
    label = class_label(model, args.concept)
    isets = {name: open_set(p, index, limit_per_class=args.limit_per_class) for name, p in sets.items()}
    fills = {"zero": None}
    if "mean" in ablations:
        reference = open_set(args.reference, index, limit_per_class=args.reference_per_class)
        fills["mean"] = mean_ablation_fill(model, reference, args.reference_size, args.seed)
    log_startup("vision-evaluate")
    table = evaluate_circuits(
        model,
        isets,
        label,
        args.concept,
        circuits,
        experiment=args.experiment,
        methods=args.methods,
        ablations={ablation: fills[ablation] for ablation in ablations},
        n_negatives=args.n_negatives,
        seed=args.seed,
        max_batch=args.max_batch,
        progress_log=lambda message: log.info("vision-evaluate: %s", message),
    )
    write_csv(args.out, table)
    full = table[table.method == "full"].drop_duplicates("eval_set")
    add_metrics({f"full_accuracy_{r.eval_set}": r.accuracy for r in full.itertuples()})
    return 0


# ---------------------------------------------------------------------------------------------- runtime


def _runtime_arguments(p: argparse.ArgumentParser) -> None:
    model_arguments(p)
    p.add_argument("--data", type=existing_path, required=True, help="concept data of the class (.npz or ROOT/<wnid>/)")
    p.add_argument("--concept", required=True)
    p.add_argument("--n-examples", type=positive_int, default=50)
    p.add_argument("--n", type=positive_int, nargs="+", default=[100, 500, 1000], help="certification sample sizes")
    add_k_grid(p, required=False, default=[float(k) for k in np.linspace(0.05, 1.0, 20)])
    # the setting's defaults and its checks are the Setting's (core/setting.py); n0 and n are --n's
    add_votes_setting(
        p,
        required=False,
        words=("p_del", "seed"),
        seed_help="config seed; the masks are drawn from (seed, concept), as for votes",
    )
    add_decision_setting(p, required=False)
    add_setting_tag(p, "runtime")
    p.add_argument("--out-stem", type=Path, required=True, help="writes STEM.csv, STEM.md and STEM.tex")


@STAGES.stage("vision-runtime", _runtime_arguments, help="naive vs cached certification cost (App. D table)")
def _cmd_runtime(args: argparse.Namespace) -> int:
    """Time certification of one class with A re-run on every sub-dataset (naive) and from cached per-example relevance
    (cached).
    """

    from certified_circuits.cli.main import check_votes_memory  # the votes stage's one estimate
    from certified_circuits.core.smoothing import mask_seed
    from certified_circuits.reports.tables import format_runtime_table, write_table
    from certified_circuits.vision.scoring.attribution import class_indices
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.runtime import measure_naive_vs_cached

    try:  # refuse an invalid setting before the model loads
        setting = Setting(p_del=args.p_del, tau=args.tau, alpha=args.alpha, seed=args.seed, correction=args.correction)
    except ValueError as error:
        raise InputError(f"vision-runtime: {error}") from error
    model, index = load_model(args)
    label = class_label(model, args.concept)
    iset = open_set(args.data, index, names=[args.concept] if index is not None else None)
    images = iset.load(class_indices(iset, label, args.n_examples), model).to(model.device)
    check_votes_memory(max(args.n), int(images.shape[0]), model.n_vertices, "lower --n")
    table = format_runtime_table(
        measure_naive_vs_cached(
            model,
            images,
            label,
            args.n,
            np.asarray(args.k_grid),
            setting.p_del,
            setting.tau,
            setting.alpha,
            mask_seed(setting.seed, args.concept),
            correction=setting.correction,
        )
    )
    write_table(
        table,
        args.out_stem,
        caption="Runtime: naive (A re-run per mask) vs cached per-example scores",
        float_format="{:.4g}",
    )
    log.info("vision-runtime:\n%s", table.to_string(index=False))
    return 0
