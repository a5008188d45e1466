"""``certified-circuits <stage>``: every workflow stage runnable by hand.

Engine stages live here (``votes``, ``certify``); the vision and language halves register their own
subcommands (``vision-*``, ``language-*``) through ``register(subparsers)`` in their ``cli`` modules, and
the workflow's evaluation and reporting stages through :mod:`certified_circuits.report_cli`.
Every stage takes explicit input and output paths, checks its inputs before doing any work, writes
atomically and logs to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from pathlib import Path
from typing import Sequence

from . import __version__
from .tracking import add_metrics

log = logging.getLogger("certified_circuits")

PLUGIN_MODULES = (
    "certified_circuits.vision.cli",
    "certified_circuits.language.cli",
    "certified_circuits.report_cli",
)


def parse_k_grid(text: str) -> list[float]:
    """``"0.05,0.1,0.2"`` -> ``[0.05, 0.1, 0.2]`` (argparse type for K grids)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--k-grid {text!r}: expected comma-separated fractions in (0, 1]") from exc
    if not values or any(not (0.0 < v <= 1.0) for v in values):
        raise argparse.ArgumentTypeError(f"--k-grid {text!r}: every K must be a fraction in (0, 1]")
    return values


def existing_file(text: str) -> Path:
    """argparse type: a path that must exist (checked before any work starts)."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{path}: file not found")
    return path


def _cmd_votes(args: argparse.Namespace) -> int:
    from .smoothing import compute_votes
    from .store import read_attributions, write_votes

    attributions = read_attributions(args.attributions)
    if args.scorer not in attributions.scores:
        raise ValueError(f"{args.attributions} has no scorer '{args.scorer}'; it has {sorted(attributions.scores)}")
    scores = attributions.scores[args.scorer]
    start = time.perf_counter()
    votes = compute_votes(
        scores,
        attributions.groups,
        args.k_grid,
        p_del=args.p_del,
        n0=args.n0,
        n=args.n,
        seed=args.seed,
        absolute=args.absolute,
        attrs={
            "scorer": args.scorer,
            "concept": str(attributions.attrs.get("concept", "")),
            "model": str(attributions.attrs.get("model", "")),
            "source": str(args.attributions),
        },
    )
    votes.attrs["seconds"] = time.perf_counter() - start
    write_votes(args.out, votes)
    add_metrics({"votes_seconds": votes.attrs["seconds"], "n_components": scores.shape[1],
                 "n_examples": scores.shape[0]})
    log.info("votes: %d x %d components, n0=%d n=%d in %.2fs -> %s", len(args.k_grid), scores.shape[1],
             args.n0, args.n, votes.attrs["seconds"], args.out)
    return 0


def _cmd_certify(args: argparse.Namespace) -> int:
    from .certification import certify_votes
    from .store import read_votes, write_certificates

    votes = read_votes(args.votes)
    start = time.perf_counter()
    certificates = certify_votes(votes, args.tau, args.alpha, args.correction)
    certificates.attrs["seconds"] = time.perf_counter() - start
    write_certificates(args.out, certificates)
    decided = (certificates.decision >= 0).mean()
    add_metrics({"radius": certificates.attrs["radius"], "decided_fraction": decided,
                 "abstain_fraction": 1.0 - decided, "certify_seconds": certificates.attrs["seconds"]})
    log.info("certify: tau=%.3f alpha=%g (%s), radius %d, %.1f%% decided -> %s", args.tau, args.alpha,
             args.correction, certificates.attrs["radius"], 100 * decided, args.out)
    return 0


def _add_engine_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "votes",
        help="Algorithm 2: deletion masks and vote counts for a K grid (cached per-example scores)",
        description="Draw n0 selection and n certification deletion masks (independent streams of one "
        "seed), run the top-K base algorithm on every sub-dataset through the cached scores, and write "
        "the votes contract (baseline circuits, selection and certification counts).",
    )
    p.add_argument("--attributions", type=existing_file, required=True, help="attribution HDF5 (input)")
    p.add_argument("--scorer", required=True, help="score matrix to use, e.g. relevance or eap_ig")
    p.add_argument("--k-grid", type=parse_k_grid, required=True, help="comma-separated top-K fractions")
    p.add_argument("--p-del", type=float, required=True, help="deletion probability in (0, 1)")
    p.add_argument("--n0", type=int, default=100, help="selection samples (default 100)")
    p.add_argument("--n", type=int, default=1000, help="certification samples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of both mask streams")
    p.add_argument("--absolute", action="store_true", help="rank by |mean score| (EAP-IG edges)")
    p.add_argument("--out", type=Path, required=True, help="votes HDF5 (output)")
    p.set_defaults(func=_cmd_votes)

    p = subparsers.add_parser(
        "certify",
        help="Algorithm 1: certified in / out / abstain per component and K",
        description="Binomial test of each component's selected decision at threshold tau with "
        "family-wise error control over all components, plus the majority vote at identical compute.",
    )
    p.add_argument("--votes", type=existing_file, required=True, help="votes HDF5 (input)")
    p.add_argument("--tau", type=float, required=True, help="confidence threshold in [0.5, 1)")
    p.add_argument("--alpha", type=float, default=0.001, help="family-wise failure probability")
    p.add_argument("--correction", choices=("bonferroni", "holm"), default="bonferroni")
    p.add_argument("--out", type=Path, required=True, help="certificates HDF5 (output)")
    p.set_defaults(func=_cmd_certify)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="certified-circuits",
        description="Certified Circuits: provably stable circuit discovery (ICML 2026).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="<stage>", required=True)
    _add_engine_commands(subparsers)
    for name in PLUGIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # that half of the product is not installed in this checkout
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    from .store import StoreError

    start = time.perf_counter()
    try:
        status = int(args.func(args) or 0)
    except (ValueError, StoreError, FileNotFoundError) as exc:
        parser.exit(2, f"error: {exc}\n")
    if status == 0:
        _record_job(args, time.perf_counter() - start)
    return status


def _record_job(args: argparse.Namespace, seconds: float) -> None:
    """Leave a job record for MLflow (see :mod:`certified_circuits.tracking`); never fails the job.

    Arguments whose name starts with ``out`` are the job's outputs; all others are its parameters.
    """
    from .tracking import write_job_record

    values = {k: v for k, v in vars(args).items() if k not in ("func", "verbose")}
    outputs: list[str] = []
    for key, value in values.items():
        if key.startswith("out") and value:
            outputs.extend(map(str, value) if isinstance(value, (list, tuple)) else [str(value)])
    params = {k: (",".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in values.items()}
    try:
        write_job_record(args.command, params, outputs, seconds)
    except OSError as exc:  # pragma: no cover - tracking must never fail a finished job
        log.warning("could not write the MLflow job record: %s", exc)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
