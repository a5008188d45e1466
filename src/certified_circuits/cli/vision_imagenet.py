"""``certified-circuits vision-*`` stages of paper-scale data (declared with :mod:`certified_circuits.cli.stages`).

- ``vision-select-classes``: a seeded random selection of ImageNet classes;
- ``vision-imagenet-c``: ImageNet-C defocus blur generated from ImageNet val;
- ``vision-prepare-oodcv``: an OOD-CV export sorted into wnid folders.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path


from certified_circuits.cli.stages import InputError, Stages, existing_file, existing_path, output_file, positive_int
from certified_circuits.cli.stages import seed as seed_option

log = logging.getLogger(__name__)
STAGES = Stages()


# ---------------------------------------------------------------------------------------------- paper-scale data


def _select_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=existing_path, required=True, help="ImageNet val root (ROOT/<wnid>/)")
    p.add_argument("--n", type=positive_int, default=100)
    p.add_argument("--seed", type=seed_option, default=0)
    p.add_argument("--out", type=output_file, required=True)


@STAGES.stage("vision-select-classes", _select_arguments, help="seeded random class selection (paper: 100 classes)")
def _cmd_select_classes(args: argparse.Namespace) -> int:
    """Draw N wnid folders of an ImageFolder tree by seed; write one wnid per line."""

    from certified_circuits.storage.atomic import write_text
    from certified_circuits.vision.data.imagenet import list_classes, select_classes

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

    from certified_circuits.vision.data.imagenet import generate_imagenet_c

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

    from certified_circuits.vision.data.imagenet import prepare_oodcv

    try:
        mapping = json.loads(args.mapping.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{args.mapping} is not valid JSON ({exc}): expected an object {{category: wnid}}") from exc
    prepare_oodcv(args.src, args.out, mapping)
    return 0
