"""What the ``vision-*`` stages share: the model options (``--model``, ``--checkpoint``, ``--layers``...), the
model's loading (cached for a batch process), the start-up metric and a class's label; and the layer-conductance
options of ``vision-attribute`` (``--conductance BASELINE``), checked before the model loads.

The stages are in :mod:`.vision_data` (the embedded world, training, OOD filtration),
:mod:`.vision_circuits` (attribution, discovery, evaluation, runtime) and :mod:`.vision_imagenet`
(paper-scale data); :mod:`.vision` lists them all.
"""

from __future__ import annotations

import argparse
import logging
import time


from certified_circuits.core.devices import configure_torch
from certified_circuits.vision.networks.architectures import MODEL_CHOICES
from certified_circuits.cli.stages import (
    InputError,
    add_device,
    existing_file,
    existing_path,
    positive_int,
    reference_size,
)
from certified_circuits.cli.stages import seed as seed_option

log = logging.getLogger(__name__)


def model_name(text: str) -> str:
    """``--model``: ``world``, or a torchvision classification model name (checked when given)."""
    if text == "world" or text in MODEL_CHOICES:
        return text
    from certified_circuits.vision.networks.classifiers import check_model_name

    try:
        return check_model_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        default="world",
        type=model_name,
        metavar="NAME",
        help=f"'world' (needs --checkpoint), an ImageNet architecture of the paper ({', '.join(MODEL_CHOICES[1:])}; "
        "weights default to the torch hub cache) or any torchvision classifier with --weights "
        "(torchvision.models.list_models()) (default: world)",
    )
    g.add_argument("--checkpoint", type=existing_file, help="world model checkpoint written by vision-train")
    g.add_argument(
        "--weights",
        type=existing_file,
        help="the model's state dict (ImageNet architectures: default the torch hub cache's IMAGENET1K_V1 file)",
    )
    g.add_argument(
        "--class-index",
        type=existing_file,
        help="class names in logit order, one a line (LOC_synset_mapping.txt is read too)",
    )
    g.add_argument(
        "--layers",
        nargs="+",
        default=["auto"],
        metavar="MODULE",
        help="modules whose outputs hold the components: auto (the family's block outputs, "
        "certified_circuits/vision/networks/families.py) or names of net.named_modules() (default: auto)",
    )
    g.add_argument("--image-size", type=positive_int, help="crop size (default: the torchvision weights' transforms)")
    g.add_argument("--resize-size", type=positive_int, help="short side before the crop (default: the weights' ratio)")
    g.add_argument(
        "--mean", type=float, nargs=3, metavar=("R", "G", "B"), help="normalisation mean (default: the weights')"
    )
    g.add_argument(
        "--std", type=float, nargs=3, metavar=("R", "G", "B"), help="normalisation std (default: the weights')"
    )
    add_device(g)


def load_model(args: argparse.Namespace):
    """The model on its device and the class index of image folders (None for the world), cached for the
    process (:func:`certified_circuits.vision.networks.loading.load_cached`)."""
    from certified_circuits.core.devices import resolve_device
    from certified_circuits.vision.networks.loading import load_cached

    device = resolve_device(args.device)
    configure_torch(args.threads)
    layers = "auto" if args.layers == ["auto"] else list(args.layers)
    preprocessing = None
    if any(v is not None for v in (args.image_size, args.resize_size, args.mean, args.std)):
        from certified_circuits.vision.networks.classifiers import preprocessing_of

        preprocessing = preprocessing_of(
            args.model, image_size=args.image_size, resize_size=args.resize_size, mean=args.mean, std=args.std
        )
    model, index, reused = load_cached(
        args.model, args.checkpoint, args.weights, args.class_index, device, layers, preprocessing
    )
    if reused:
        log.info("%s: model already loaded in this process (batch); reusing it", getattr(args, "command", "vision"))
    return model, index


_STARTED: list[float] = []  # the start-up of this process, once measured


def log_startup(stage: str) -> None:
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


def class_label(model, concept: str) -> int:
    if concept in model.class_names:
        return model.class_names.index(concept)
    if concept.isdigit() and int(concept) < len(model.class_names):
        return int(concept)
    raise InputError(
        f"unknown concept {concept!r}: use a class name of the model, e.g. {model.class_names[:5]}, "
        f"or a class index < {len(model.class_names)}"
    )


def conductance_arguments(p: argparse.ArgumentParser) -> None:
    """``vision-attribute``'s layer-conductance options (``vision.conductance``; scored only with ``--conductance``)."""
    from certified_circuits.vision.scoring.plugins import CONDUCTANCE_BASELINES, CONDUCTANCE_STEPS

    g = p.add_argument_group("layer conductance (scores/conductance; vision.conductance; off unless --conductance)")
    g.add_argument(
        "--conductance",
        choices=CONDUCTANCE_BASELINES,
        default=None,
        metavar="BASELINE",
        help="also score layer conductance (Captum's LayerConductance, riemann_trapezoid) from this baseline image: "
        "zeros (the all-zero normalised input) or mean (the mean image of --conductance-reference) "
        "(default: not scored)",
    )
    g.add_argument(
        "--conductance-steps",
        type=positive_int,
        default=None,
        metavar="M",
        help=f"path intervals m: m more forward and backward passes per batch (default {CONDUCTANCE_STEPS})",
    )
    g.add_argument(
        "--conductance-reference",
        type=existing_path,
        default=None,
        help="--conductance mean: class-agnostic reference images whose mean image is the baseline (world .npz "
        "or ROOT/<class>/)",
    )
    g.add_argument(
        "--conductance-reference-size",
        type=reference_size,
        default=1000,
        help="--conductance mean: reference images averaged (seeded sample; default 1000)",
    )
    g.add_argument(
        "--conductance-seed", type=seed_option, default=0, help="--conductance mean: the sample's seed (default 0)"
    )


def check_conductance_options(args: argparse.Namespace) -> None:
    """Refuse, before the model loads, a conductance option that would be ignored or lacks its reference."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("conductance_steps", "conductance_reference")
        if getattr(args, name) is not None
    ]
    if args.conductance is None and given:
        raise InputError(f"{' and '.join(given)} without --conductance: add --conductance zeros or mean")
    if args.conductance == "mean" and args.conductance_reference is None:
        raise InputError("--conductance mean needs --conductance-reference (images whose mean image is the baseline)")
    if args.conductance == "zeros" and args.conductance_reference is not None:
        raise InputError("--conductance-reference is read by --conductance mean only: drop it, or use mean")
    if args.conductance is not None and any(plugin.name == "conductance" for plugin in args.scorer):
        raise InputError(
            "--scorer names a plugin 'conductance' and --conductance scores the built-in one: rename "
            "the plugin function"
        )


def conductance_of(args: argparse.Namespace, model, index):
    """The :class:`~certified_circuits.vision.scoring.scorers.Conductance` of the options, or None."""
    if args.conductance is None:
        return None
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.scoring.attribution import conductance_baseline
    from certified_circuits.vision.scoring.plugins import CONDUCTANCE_STEPS
    from certified_circuits.vision.scoring.scorers import Conductance

    steps = args.conductance_steps or CONDUCTANCE_STEPS
    if args.conductance == "zeros":
        return Conductance(steps)
    reference = open_set(args.conductance_reference, index)
    baseline = conductance_baseline(model, reference, args.conductance_reference_size, args.conductance_seed)
    return Conductance(steps, baseline.to(model.device), "mean")
