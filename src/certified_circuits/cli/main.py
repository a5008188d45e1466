"""``certified-circuits <stage>``: every workflow stage runnable by hand.

Engine stages live here (``votes``, ``certify``); the vision and language halves and the reports
declare theirs the same way (:mod:`certified_circuits.cli.stages`) in ``vision/cli.py``,
``language/cli.py`` and ``report_cli.py``. Every stage takes explicit input and output paths, checks
its inputs before doing any work, writes atomically and logs to stderr. There is one error path: bad
input ends in ``error: <what is wrong and how to fix it>`` and exit code 2, never a traceback.
"""

from __future__ import annotations

import time

#: when this process started running our code (start-up is measured from here: imports, model, data)
from certified_circuits import PROCESS_START

import argparse  # noqa: E402  (stdlib, after the clock: milliseconds)
import importlib  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from dataclasses import replace  # noqa: E402
from typing import Sequence  # noqa: E402

from certified_circuits import __version__  # noqa: E402
from certified_circuits.core.devices import pin_cpu_code_paths  # noqa: E402

pin_cpu_code_paths()  # before any stage module imports torch: the same CPU kernels on every machine
from certified_circuits.cli.stages import (  # noqa: E402
    InputError,
    Stages,
    add_decision_setting,
    add_k_grid,
    add_setting_tag,
    add_votes_setting,
    existing_file, output_file,
    positive_int,
    resolve_setting,
    setting_of_args,
)
from certified_circuits.pipeline.tracking import add_metrics  # noqa: E402

log = logging.getLogger("certified_circuits")

PLUGIN_MODULES = (
    "certified_circuits.cli.vision_data",
    "certified_circuits.cli.vision_circuits",
    "certified_circuits.cli.vision_imagenet",
    "certified_circuits.cli.language",
    "certified_circuits.cli.report",
    "certified_circuits.cli.attack",
    "certified_circuits.cli.scores",
    "certified_circuits.cli.mib",
    "certified_circuits.cli.testbed",
)

STAGES = Stages()

#: largest number of deletion masks one votes job may draw (memory is estimated before allocating)
VOTES_MEMORY_BYTES = 8 * 2**30


def masks_fix(args: argparse.Namespace) -> str:
    """The fix of a vote count too large for memory, in the words the command was given: ``--n`` and ``--n0``, or
    the n and n0 of its ``--setting`` tag."""
    tag = getattr(args, "setting", None)
    return f"lower n (or n0) in --setting {tag}" if tag else "lower --n (or --n0)"


def check_votes_memory(n_masks: int, n_examples: int, n_components: int, fix: str = "lower --n (or --n0)") -> None:
    """Refuse, before any mask is drawn, a vote count whose masks and sub-dataset scores (float64, ``n_masks x
    (|D| + U)``) would take more than :data:`VOTES_MEMORY_BYTES`: the one estimate of every stage that draws masks
    (``votes``, ``certify-scores``).

    Raises:
        InputError: naming the sizes, the memory needed and ``fix`` (the option that sets n).
    """
    needed = n_masks * (n_examples + n_components) * 8
    if needed > VOTES_MEMORY_BYTES:
        raise InputError(f"n0 + n = {n_masks} masks over {n_examples} examples and {n_components} components need "
                         f"about {needed / 2**30:.1f} GiB (limit {VOTES_MEMORY_BYTES / 2**30:.0f} GiB): {fix}")


def _votes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attributions", type=existing_file, required=True, help="attribution HDF5 (input)")
    p.add_argument("--scorer", required=True, help="score matrix to use, e.g. relevance or eap_ig")
    add_k_grid(p)
    add_votes_setting(p)
    add_setting_tag(p, "votes")
    p.add_argument("--device", default="auto",
                   help="where votes are counted: auto (torch on CUDA when available, else numpy), cpu (numpy), "
                   "cuda or cuda:N (torch on that device); see core.devices.vote_device")
    p.add_argument("--out", type=output_file, required=True, help="votes HDF5 (output)")


@STAGES.stage(
    "votes", _votes_arguments,
    help="Algorithm 2: deletion masks and vote counts for a K grid (cached per-example scores)",
)
def _cmd_votes(args: argparse.Namespace) -> int:
    """Draw n0 selection and n certification deletion masks (independent streams of one seed), run the top-K base
    algorithm on every sub-dataset through the cached scores, and write the votes contract (baseline circuits,
    selection and certification counts).
    """

    from certified_circuits.core.smoothing import compute_votes, mask_seed
    from certified_circuits.storage.store import read_attributions, write_votes

    attributions = read_attributions(args.attributions)
    if args.scorer not in attributions.scores:
        raise InputError(f"{args.attributions} has no scorer '{args.scorer}'; it has {sorted(attributions.scores)}")
    scores = attributions.scores[args.scorer]
    n_examples, n_components = scores.shape
    check_votes_memory(args.n0 + args.n, n_examples, n_components, masks_fix(args))
    concept = str(attributions.attrs.get("concept", ""))
    start = time.perf_counter()
    votes = compute_votes(
        scores,
        attributions.groups,
        args.k_grid,
        p_del=args.p_del,
        n0=args.n0,
        n=args.n,
        seed=mask_seed(args.seed, concept),
        absolute=attributions.absolute(args.scorer),  # the convention the attribution file records
        device=args.device,  # core.devices.vote_device: auto, cpu (numpy), cuda, cuda:N
        attrs={
            "scorer": args.scorer,
            **{key: str(attributions.attrs.get(key, "")) for key in ("concept", "model", "experiment", "split")},
            "source": str(args.attributions),
            "seed": int(args.seed),  # the config seed; the masks come from mask_seed(seed, concept)
            "mask_seed": mask_seed(args.seed, concept),
        },
    )
    votes.attrs["seconds"] = time.perf_counter() - start
    votes.names = tuple(attributions.names)  # the certificate certified from these votes names its components
    write_votes(args.out, votes)
    add_metrics({"votes_seconds": votes.attrs["seconds"], "n_components": n_components, "n_examples": n_examples})
    log.info("votes: %d x %d components, n0=%d n=%d in %.2fs -> %s", len(args.k_grid), n_components,
             args.n0, args.n, votes.attrs["seconds"], args.out)
    return 0


def _certify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--votes", type=existing_file, required=True, help="votes HDF5 (input)")
    add_decision_setting(p)
    add_setting_tag(p, "decision")
    p.add_argument("--allow-vacuous", action="store_true",
                   help="certify even when the plan says no component can be certified (every one would abstain)")
    p.add_argument("--out", type=output_file, required=True, help="certificates HDF5 (output)")


@STAGES.stage("certify", _certify_arguments, help="Algorithm 1: certified in / out / abstain per component and K")
def _cmd_certify(args: argparse.Namespace) -> int:
    """Binomial test of each component's selected decision at threshold tau with family-wise error control over all
    components, plus the majority vote at identical compute.
    """

    from certified_circuits.api import certify_votes
    from certified_circuits.core.planning import PlanWarning, VacuousSettingError
    from certified_circuits.core.setting import number
    from certified_circuits.pipeline.tracking import add_tags
    from certified_circuits.storage.store import read_votes

    votes = read_votes(args.votes)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # logged and tagged below, from what the certificate records
            warnings.simplefilter("ignore", PlanWarning)
            certificate = certify_votes(votes, args.tau, args.alpha, args.correction,
                                        allow_vacuous=args.allow_vacuous)
    except VacuousSettingError as exc:
        raise InputError(f"{exc}\nChange the setting as suggested, or pass --allow-vacuous to certify anyway.") from exc
    seconds = time.perf_counter() - start
    problems = [line for line in certificate.attrs["plan_warnings"].split("\n") if line]
    for problem in problems:
        log.warning("plan (%s, tau %s): %s", votes.attrs.get("concept", ""), number(args.tau), problem)
    add_tags({"cc.plan.verdict": certificate.attrs["plan_verdict"],
              **({"cc.plan.warning": " | ".join(problems)} if problems else {})})
    # the whole certificate (votes, decisions, setting): a workflow certificates file and a Certificate.load file
    replace(certificate, attrs={**certificate.attrs, "seconds": seconds}).save(args.out)
    decided = (certificate.decision >= 0).mean()
    add_metrics({"radius": certificate.radius, "decided_fraction": decided,
                 "abstain_fraction": 1.0 - decided, "certify_seconds": seconds})
    log.info("certify: tau=%s alpha=%s (%s), radius %d, %.1f%% decided -> %s", number(args.tau), number(args.alpha),
             args.correction, certificate.radius, 100 * decided, args.out)
    return 0


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--examples", type=positive_int, required=True, help="|D|: examples in the concept dataset")
    p.add_argument("--components", type=positive_int, required=True,
                   help="U: components tested (channels, heads or edges; per K of the grid)")
    add_votes_setting(p, required=False, words=("p_del", "n0", "n"))
    add_decision_setting(p, required=False)
    p.add_argument("--radius", type=int, default=None,
                   help="also list settings (p_del, tau, n) that reach this radius with IN and OUT certifiable")


@STAGES.stage("plan", _plan_arguments, help="will a setting certify anything? the exact plan, before any work")
def _cmd_plan(args: argparse.Namespace) -> int:
    """Print the exact certification plan of a setting for |D| examples and U components (certified_circuits.plan):
    radius, p_empty = p_del^|D|, min_samples, max_tau, whether IN and OUT can be certified and their best-case power,
    the verdict (ok, marginal, vacuous) with each problem's fix, and settings that reach the radius.

    Example: certified-circuits plan --examples 100 --components 32491 --p-del 0.99 --tau 0.9 --radius 9
    """
    from certified_circuits.core.planning import plan

    result = plan(args.examples, args.components, setting_of_args(args))
    print(result)
    if args.radius is not None:
        suggestions = result.suggest(radius=args.radius)
        print(f"settings that reach radius {args.radius} with IN and OUT at |D| = {args.examples}, U = {args.components}:")
        for suggestion in suggestions:
            print(f"  {suggestion}")
        if not suggestions:
            need = result.examples_needed(args.radius)
            print("  none" + (f": radius {args.radius} needs at least {need} examples" if need else ""))
    return 0


def _check_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configs", nargs="+", type=existing_file, metavar="CONFIG", help="workflow config files (YAML)")


@STAGES.stage("check-config", _check_config_arguments, help="read workflow config files strictly (syntax, duplicate keys)")
def _cmd_check_config(args: argparse.Namespace) -> int:
    """Read each config file as the workflow will, but strictly: a YAML syntax error or a duplicate key is
    reported with its file and line (Snakemake reports neither). bin/workflow runs this first.
    """
    from certified_circuits.pipeline.config_files import check_config_files

    check_config_files(args.configs)
    log.info("check-config: %d file(s) read", len(args.configs))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="certified-circuits",
        description="Certified Circuits: provably stable circuit discovery (ICML 2026).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="<stage>", required=True)
    STAGES.register(subparsers)
    for name in PLUGIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # that half of the product is not installed in this checkout
            raise
        module.STAGES.register(subparsers)
    return parser


def input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (a message for the user), as opposed to a bug (a traceback)."""
    from certified_circuits.core.sampling import AlgorithmError
    from certified_circuits.storage.store import StoreError

    errors: list[type[BaseException]] = [ValueError, StoreError, AlgorithmError, FileNotFoundError, IsADirectoryError,
                                         NotADirectoryError, PermissionError, MemoryError]
    try:
        from PIL import UnidentifiedImageError

        errors.append(UnidentifiedImageError)
    except ImportError:  # pragma: no cover - Pillow comes with torchvision
        pass
    return tuple(errors)


#: ``certified-circuits batch STAGE ARGS :: STAGE ARGS ...`` runs several stage invocations in one process.
BATCH = "batch"
SEPARATOR = "::"


def split_batch(argv: Sequence[str]) -> list[list[str]]:
    """The stage invocations of a ``batch`` command line (the arguments after ``batch``), split at ``::``.

    Raises ValueError for an empty invocation (``batch``, ``a :: :: b``, a trailing ``::``)."""
    parts: list[list[str]] = [[]]
    for token in argv:
        if token == SEPARATOR:
            parts.append([])
        else:
            parts[-1].append(token)
    if any(not part for part in parts):
        raise ValueError(f"'{BATCH}' needs one or more stage invocations separated by '{SEPARATOR}', "
                         f"e.g. {BATCH} vision-attribute ARGS {SEPARATOR} vision-attribute ARGS")
    if any(part[0] == BATCH for part in parts):
        raise ValueError(f"'{BATCH}' cannot be nested")
    return parts


#: terminal control sequences (colours, bold, cursor moves) that libraries put in their messages (torch.load's)
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def plain(text: str, stream=None) -> str:
    """``text`` without terminal control sequences unless ``stream`` (stderr) is a terminal: a log file or a
    pipe gets the words, not ``\\x1b[1m``."""
    stream = sys.stderr if stream is None else stream
    return text if getattr(stream, "isatty", lambda: False)() else ANSI.sub("", text)


class _PlainFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return plain(super().format(record))


#: inputs that hold a table or a results file when not empty: read empty, a library says e.g. "No columns to
#: parse" (an empty .jsonl is a valid empty split, e.g. ood_test, so it is not among them)
_TABLE_SUFFIXES = (".csv", ".tsv", ".h5", ".hdf5", ".npz", ".pt", ".pth")


def _input_paths(value) -> list:
    from pathlib import Path

    if isinstance(value, Path):
        return [value]
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in _input_paths(item)]
    return []


def check_inputs_not_empty(args: argparse.Namespace) -> None:
    """Refuse an empty (or blank) input file by name before any work (outputs, ``--out*``, are not inputs)."""
    for name, value in vars(args).items():
        if name.startswith("out") or name == "func":
            continue
        for path in _input_paths(value):
            if path.suffix.lower() in _TABLE_SUFFIXES and path.is_file() and path.stat().st_size < 4096:
                if not path.read_bytes().strip():
                    raise InputError(f"{path} (--{name.replace('_', '-')}) is empty: it holds no table or data; "
                                     f"rerun the stage that writes it, or pass the right file")


def _run_stage(parser: argparse.ArgumentParser, args: argparse.Namespace, prefix: str = "") -> int:
    """One stage with the one error path: bad input -> ``error: ...`` on stderr and exit 2 (control sequences
    removed when stderr is not a terminal)."""
    try:
        check_inputs_not_empty(args)
        return int(args.func(args) or 0)
    except input_errors() as exc:
        if args.verbose:
            log.exception("%s failed", args.command)
        parser.exit(2, plain(f"certified-circuits {prefix}{args.command}: error: {exc}\n"))
    except OSError as exc:  # e.g. a truncated image or weights file: name the file when the error does
        if args.verbose:
            log.exception("%s failed", args.command)
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        parser.exit(2, plain(f"certified-circuits {prefix}{args.command}: error: {exc}{where}\n"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one stage, or with ``batch`` several stages in one process.

    A batch pays the start-up (imports of torch and torchvision, the model build and its weights, which
    the vision stages keep for the process: :func:`certified_circuits.vision.networks.loading.load_cached`) once for
    every invocation, e.g. the attributions of 25 ImageNet classes in one GPU job. Every invocation is
    parsed, and its setting filled (:func:`certified_circuits.cli.stages.resolve_setting`: from ``--setting TAG`` or
    the words), before the first runs, so a typo in the last stops the batch before any work; they then
    run in order and the batch stops at the first failure (exit 2, naming the invocation). A batch
    leaves one MLflow job record holding every file its invocations wrote.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == [BATCH]:
        try:
            parts = split_batch(argv[1:])
        except ValueError as exc:
            parser.exit(2, f"certified-circuits {BATCH}: error: {exc}\n")
        invocations = [parser.parse_args(part) for part in parts]
    else:
        invocations = [parser.parse_args(argv)]
    for index, args in enumerate(invocations):  # every setting filled (or refused) before any stage runs
        try:
            resolve_setting(args)
        except ValueError as exc:
            parser.exit(2, f"certified-circuits {_prefix(index, invocations)}{args.command}: error: {exc}\n")
    before = list(logging.getLogger().handlers)
    logging.basicConfig(
        level=logging.DEBUG if any(args.verbose for args in invocations) else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    for handler in set(logging.getLogger().handlers) - set(before):  # every library's messages, in plain words
        handler.setFormatter(_PlainFormatter(handler.formatter._fmt if handler.formatter else None))
    from certified_circuits.storage.atomic import forget_written

    forget_written()
    started = time.time() - (time.perf_counter() - PROCESS_START)  # the job's start, imports included
    for index, args in enumerate(invocations):
        status = _run_stage(parser, args, _prefix(index, invocations))
        if status != 0:
            return status
    _record_job(invocations, started, time.time())
    return 0


def _prefix(index: int, invocations: Sequence[argparse.Namespace]) -> str:
    """How a message names invocation ``index`` of a batch (``batch [2/3] ``); nothing for a single stage."""
    return f"{BATCH} [{index + 1}/{len(invocations)}] " if len(invocations) > 1 else ""


def _params(args: argparse.Namespace) -> dict[str, object]:
    values = {k: v for k, v in vars(args).items() if k not in ("func", "verbose")}
    return {k: (" ".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in values.items()}


def _record_job(invocations: Sequence[argparse.Namespace], started: float, ended: float) -> None:
    """Leave a job record for MLflow (see :mod:`certified_circuits.pipeline.tracking`); never fails the job.

    The job's outputs are exactly the files it wrote atomically (:func:`certified_circuits.storage.atomic.written_paths`);
    its parameters are its arguments. For a batch, the stage is ``batch`` and parameters that differ
    between invocations are joined with `` :: `` in invocation order.
    """
    from certified_circuits.storage.atomic import written_paths
    from certified_circuits.pipeline.tracking import write_job_record

    if len(invocations) == 1:
        stage, params = invocations[0].command, _params(invocations[0])
    else:
        each = [_params(args) for args in invocations]
        keys = list(dict.fromkeys(k for p in each for k in p))
        params = {k: (each[0].get(k) if all(p.get(k) == each[0].get(k) for p in each)
                      else f" {SEPARATOR} ".join(str(p.get(k, "")) for p in each)) for k in keys}
        stage = BATCH
    try:
        write_job_record(stage, params, [str(p) for p in written_paths()], ended - started,
                         started_at=started, ended_at=ended)
    except OSError as exc:  # pragma: no cover - tracking must never fail a finished job
        log.warning("could not write the MLflow job record: %s", exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
