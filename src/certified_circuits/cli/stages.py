"""How a ``certified-circuits`` subcommand is declared: one convention for every half of the product.

Each CLI module (engine stages in :mod:`certified_circuits.cli.main`, ``vision-*`` in
:mod:`certified_circuits.cli.vision_data`, :mod:`~certified_circuits.cli.vision_circuits` and
:mod:`~certified_circuits.cli.vision_imagenet`, ``language-*`` in :mod:`certified_circuits.cli.language`,
``report-*`` in :mod:`certified_circuits.cli.report`) holds a :class:`Stages` list and declares each
stage as an *arguments* function followed directly by its handler::

    STAGES = Stages()

    def _votes_arguments(p): ...

    @STAGES.stage("votes", _votes_arguments, help="Algorithm 2: ...")
    def _cmd_votes(args): ...

Handlers raise :class:`InputError` (or ``ValueError``) for bad input with a message that names the
problem and the fix; :func:`certified_circuits.cli.main` turns it into ``error: ...`` and exit code 2.
Lists are always space-separated (``--k-grid 0.1 0.2``); heavy libraries are imported inside handlers,
so every stage starts fast. Outputs need no declaration: every file written through
:mod:`certified_circuits.storage.atomic` is recorded as an output of the job. A stage that runs Algorithm 1 or 2
declares its setting words with :func:`add_votes_setting` / :func:`add_decision_setting` and their one-tag
alternative with :func:`add_setting_tag`; :func:`resolve_setting` fills ``args.p_del`` ... ``args.correction``
from either before the stage runs.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from certified_circuits.commands import COMMAND, certify_command
from certified_circuits.storage.paths import file_identity

if TYPE_CHECKING:  # pragma: no cover
    from certified_circuits.core.setting import Setting


class InputError(ValueError):
    """Bad input to a stage (missing file, wrong layout, invalid value); the message says how to fix it."""


@dataclass(frozen=True)
class Stage:
    name: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]
    help: str
    description: str | None = None


#: a line of a handler's docstring that starts with the bare command (``Example: certified-circuits plan ...``)
EXAMPLE_COMMAND = re.compile(r"(?m)^(\s*(?:Example:\s*)?)certified-circuits (?=[a-z])")


class Stages(list):
    """The stages of one CLI module, registered into ``certified-circuits`` by :meth:`register`."""

    def stage(self, name: str, arguments: Callable[[argparse.ArgumentParser], None], help: str,
              description: str | None = None) -> Callable:
        """Register ``run`` as stage ``name``: its ``--help`` description is ``description``, else the
        handler's docstring, else ``help``."""

        def decorate(run: Callable[[argparse.Namespace], int | None]) -> Callable:
            text = description or (inspect.cleandoc(run.__doc__) if run.__doc__ else None)
            if text:  # an example in --help runs as printed from a fresh shell (certified_circuits.commands.COMMAND)
                text = EXAMPLE_COMMAND.sub(rf"\g<1>{COMMAND} ", text)
            self.append(Stage(name, arguments, run, help, text))
            return run

        return decorate

    def register(self, subparsers: argparse._SubParsersAction) -> None:
        for stage in self:
            parser = subparsers.add_parser(stage.name, help=stage.help, description=stage.description or stage.help)
            stage.arguments(parser)
            parser.set_defaults(func=stage.run)


# ------------------------------------------------------------------------------ argument types


def existing_file(text: str) -> Path:
    """argparse type: a file that must exist (checked before any work starts); ``~`` is expanded."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: is a folder, not a file; give the file inside it")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{path}: file not found")
    return path


def output_file(text: str) -> Path:
    """argparse type: a file to write; refused before any work when it is an existing folder (``~`` is expanded)."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: is an existing folder, not a file name; give a file path "
                                         f"(e.g. {path / ('out' + (path.suffix or '.h5'))}) or remove the folder")
    return path


def existing_path(text: str) -> Path:
    """argparse type: a file or folder that must exist; ``~`` is expanded."""
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{path}: no such file or folder")
    return path


def _finite(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; {what}") from exc
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not finite; {what}")
    return value


def k_fraction(text: str) -> float:
    """argparse type: a top-K fraction in (0, 1] (NaN and infinity rejected)."""
    value = _finite(text, "K values are fractions in (0, 1]")
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"K = {text} is outside (0, 1]")
    return value


def probability(text: str) -> float:
    """argparse type: a finite number strictly between 0 and 1."""
    value = _finite(text, "expected a number strictly between 0 and 1")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} must lie strictly between 0 and 1")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


#: most reference images of a mean-ablation fill (``--reference-size``, ``vision.mean_reference_size``): the fill
#: loads them as one batch (5000 images at 224 px are 3 GB of float32), and a mean over 1000 is already within about
#: 3% of a channel's standard deviation; config.schema.yaml's maximum is this number (tests/unit/cli/test_stages.py)
MAX_REFERENCE_SIZE = 5000


def reference_size(text: str) -> int:
    """argparse type: the images a mean-ablation fill averages, an integer in [1, :data:`MAX_REFERENCE_SIZE`]."""
    value = positive_int(text)
    if value > MAX_REFERENCE_SIZE:
        raise argparse.ArgumentTypeError(
            f"{value} is above {MAX_REFERENCE_SIZE}: the fill loads its reference images as one batch; "
            f"1000 (the default of vision.mean_reference_size) is enough for a mean")
    return value


#: seeds are integers in [0, SEED_MAX] (numpy accepts more; configs, paths and people need no more)
SEED_MAX = 2**32 - 1


def seed(text: str) -> int:
    """argparse type: a seed, an integer in [0, 2**32 - 1] (argparse names the option in its error)."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer seed") from exc
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text} is outside [0, 2**32 - 1]: seeds are non-negative 32-bit integers")
    return value


def named_path(text: str) -> tuple[str, Path]:
    """argparse type: ``NAME=PATH`` (e.g. ``--eval-set id=/data/val``)."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, Path(path).expanduser()


def add_k_grid(parser: argparse.ArgumentParser, required: bool = True, default: list[float] | None = None) -> None:
    parser.add_argument("--k-grid", type=k_fraction, nargs="+", required=required, default=default,
                        metavar="K", help="top-K fractions in (0, 1], space-separated")


def add_reference_size(parser: argparse.ArgumentParser, what: str) -> None:
    """--reference-size (default 500, at most :data:`MAX_REFERENCE_SIZE`): the images a mean-ablation fill averages,
    ``what`` saying which (every stage that computes a mean fill: ``vision-evaluate``, ``vision-ground-truth``)."""
    parser.add_argument("--reference-size", type=reference_size, default=500,
                        help=f"{what} sampled (seeded; at most {MAX_REFERENCE_SIZE})")


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (CUDA when available, else CPU), cpu, cuda or cuda:N (default auto)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch CPU threads (default 1: workflow jobs run side by side; raise it for a lone job)")


def setting_of_args(args: argparse.Namespace) -> "Setting":
    """The :class:`~certified_circuits.core.setting.Setting` of a command's ``--p-del --n0 --n --seed --tau --alpha
    --correction`` (the Setting checks every field: ValueError naming it): every command that takes a setting in
    words builds it here.

    Args:
        args: the parsed command line. A command without ``--seed`` (``plan``: what a setting can certify does not
            depend on which masks are drawn) gets seed 0.

    Returns:
        The Setting.
    """
    from certified_circuits.core.setting import Setting

    return Setting(p_del=args.p_del, n0=args.n0, n=args.n, seed=getattr(args, "seed", 0), tau=args.tau,
                   alpha=args.alpha, correction=args.correction)


# ------------------------------------------------------------------------------ the setting of a stage

#: the words of each part of a setting: the Setting's fields, in the order of its tag
VOTES_WORDS = ("p_del", "n0", "n", "seed")
DECISION_WORDS = ("tau", "alpha", "correction")

#: what a stage's ``--setting TAG`` is, by kind: the tag's parts (``Setting.votes_tag``, ``Setting.decision_tag`` or
#: both, ``Setting.tag``) and the words it stands for (vision-runtime's n0 and n come from its own --n list)
TAG_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "votes": (("votes",), VOTES_WORDS),
    "decision": (("decision",), DECISION_WORDS),
    "setting": (("votes", "decision"), VOTES_WORDS + DECISION_WORDS),
    "runtime": (("votes", "decision"), ("p_del", "seed") + DECISION_WORDS),
}

#: the attribute of a parsed stage that holds its :class:`SettingWords` until :func:`resolve_setting` fills the words
SETTING_WORDS = "setting_words"


@dataclass(frozen=True)
class SettingWords:
    """The setting words a stage declares (``--p-del ... --correction``) and what its ``--setting TAG`` stands for.

    Attributes:
        defaults: each word's default, ``None`` for a word the stage needs (given, or in ``--setting``). The
            words are declared with the argparse default ``None``, so :func:`resolve_setting` sees which were given.
        kind: the kind of :data:`TAG_KINDS` the stage's ``--setting`` takes; ``None``: the stage has no ``--setting``.
    """

    defaults: dict = field(default_factory=dict)
    kind: str | None = None


def option(word: str) -> str:
    """The option of a setting word: ``p_del`` -> ``--p-del``."""
    return "--" + word.replace("_", "-")


def _declare(parser: argparse.ArgumentParser, word: str, default, help: str, **kwargs) -> None:
    """One setting word: declared with the argparse default ``None``, its own default (``None``: needed) kept in
    the parser's :class:`SettingWords` for :func:`resolve_setting`; the help says the default."""
    from certified_circuits.core.setting import number

    shown = (" (required, or in --setting TAG)" if default is None
             else f" (default {default if isinstance(default, str) else number(default)})")
    parser.add_argument(option(word), default=None, help=help + shown, **kwargs)
    words = parser.get_default(SETTING_WORDS) or SettingWords()
    parser.set_defaults(**{SETTING_WORDS: SettingWords({**words.defaults, word: default}, words.kind)})


def add_votes_setting(parser: argparse.ArgumentParser, required: bool = True, words: tuple[str, ...] = VOTES_WORDS,
                      seed_help: str = "config seed; the masks are drawn from (seed, concept) so every concept has "
                                       "its own draw") -> None:
    """--p-del, --n0, --n and --seed: the votes' part of a Setting (paper Algorithm 2), for every stage that
    draws the deletion masks (``votes``, ``vision-discover``, ``stability``, ``report-attack``, ...).

    Args:
        parser: the stage's parser.
        required: ``--p-del`` is needed (given, or in ``--setting``); else it defaults to ``Setting().p_del``.
            n0, n and seed default to ``Setting()``'s (100, 1000, 0).
        words: the words to declare, of :data:`VOTES_WORDS` (``plan`` takes no seed, ``vision-runtime`` no n0, n).
        seed_help: what the seed seeds, for ``--help``.
    """
    from certified_circuits.core.setting import Setting

    default = Setting()
    declared = {
        "p_del": dict(type=probability, help="deletion probability in (0, 1)"),
        "n0": dict(type=positive_int, help="selection samples"),
        "n": dict(type=positive_int, help="certification samples"),
        "seed": dict(type=seed, help=seed_help),
    }
    for word in words:
        needed = required and word == "p_del"
        _declare(parser, word, None if needed else getattr(default, word), **declared[word])


def add_decision_setting(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """--tau, --alpha and --correction: the test's part of a Setting (paper Algorithm 1), for every stage that
    certifies (``certify``, ``plan``, ``stability``, ``report-attack``, ``certify-scores``, ``vision-runtime``).

    Args:
        parser: the stage's parser.
        required: ``--tau`` is needed (given, or in ``--setting``); else it defaults to ``Setting().tau``. alpha
            and correction default to ``Setting()``'s (0.001, bonferroni).
    """
    from certified_circuits.core.setting import Setting

    default = Setting()
    _declare(parser, "tau", None if required else default.tau, type=float, help="confidence threshold in [0.5, 1)")
    _declare(parser, "alpha", default.alpha, type=probability, help="family-wise failure probability")
    _declare(parser, "correction", default.correction, choices=("bonferroni", "holm"),
             help="multiple-testing correction")


def add_setting_tag(parser: argparse.ArgumentParser, kind: str) -> None:
    """``--setting TAG``: the stage's setting as one tag, instead of the words declared before it (the workflow
    passes it so; people may type either, not both: :func:`resolve_setting`).

    Args:
        parser: the stage's parser, whose setting words are declared (:func:`add_votes_setting`,
            :func:`add_decision_setting`).
        kind: a key of :data:`TAG_KINDS`: ``votes`` (``votes``, ``vision-discover``), ``decision`` (``certify``),
            ``setting`` (stages that run both algorithms) or ``runtime`` (``vision-runtime``: the whole tag, its n0
            and n unused).
    """
    from certified_circuits.core.setting import Setting

    parts, words = TAG_KINDS[kind]
    declared = parser.get_default(SETTING_WORDS) or SettingWords()
    if set(words) - set(declared.defaults):  # a declaration bug, seen by tests/unit/cli/test_stages.py
        raise TypeError(f"--setting of kind {kind!r} needs the words {sorted(words)} declared first")
    example = "/".join(getattr(Setting(), f"{part}_tag") for part in parts)
    written = {("votes",): "Setting.votes_tag", ("decision",): "Setting.decision_tag"}.get(parts, "Setting.tag")
    unused = "; its n0 and n are not used: the sample sizes are --n's" if kind == "runtime" else ""
    parser.add_argument("--setting", type=lambda text: _checked_tag(kind, text), default=None, metavar="TAG",
                        help=f"the setting as one tag ({written}, e.g. {example}) instead of "
                             f"{' '.join(map(option, words))}{unused}")
    parser.set_defaults(**{SETTING_WORDS: SettingWords(declared.defaults, kind)})


def tag_values(kind: str, tag: str) -> dict:
    """The words a ``--setting`` tag of ``kind`` gives, by field (a ValueError names the tag, its form and the
    bad field: :mod:`certified_circuits.core.setting`'s readers)."""
    from certified_circuits.core.setting import parse_tag

    parts, words = TAG_KINDS[kind]
    values = parse_tag(tag, parts)
    return {word: values[word] for word in words}


def _checked_tag(kind: str, text: str) -> str:
    """argparse type of ``--setting``: the tag, once read (refused at parse time, with its form)."""
    try:
        tag_values(kind, text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def resolve_setting(args: argparse.Namespace) -> argparse.Namespace:
    """Fill a parsed stage's setting words on ``args`` (``args.p_del`` ... ``args.correction``), from its
    ``--setting TAG`` or from the words given, the rest from their defaults; called once for every parsed
    invocation by :func:`certified_circuits.cli.main.main`, before any stage runs. A stage without setting words
    is returned as it is.

    Raises:
        InputError: ``--setting`` and a word it stands for both given (naming both and the fix), or a needed word
            given by neither (the argparse "required" message, naming ``--setting`` too).
    """
    words = vars(args).pop(SETTING_WORDS, None)
    if words is None:
        return args
    given = [word for word in words.defaults if getattr(args, word) is not None]
    tag = getattr(args, "setting", None) if words.kind else None
    if tag is not None:
        values = tag_values(words.kind, tag)
        both = [option(word) for word in given if word in values]
        if both:
            raise InputError(f"--setting {tag} and {' '.join(both)} both give the setting's "
                             f"{', '.join(word for word in given if word in values)}: pass --setting alone, or the words "
                             f"{' '.join(map(option, values))} without --setting")
        for word, value in values.items():
            setattr(args, word, value)
    missing = [option(word) for word, default in words.defaults.items()
               if default is None and getattr(args, word) is None]
    if missing:
        alternative = " (or --setting TAG instead)" if words.kind else ""
        raise InputError(f"the following arguments are required: {', '.join(missing)}{alternative}")
    for word, default in words.defaults.items():
        if getattr(args, word) is None:
            setattr(args, word, default)
    return args


# ------------------------------------------------------------------------------ input checks shared by stages

def check_distinct_inputs(given, what: str = "file") -> None:
    """Refuse one file given twice, by any spelling (a symlink or hard link to it too:
    :func:`~certified_circuits.storage.paths.file_identity`), before any work. ``given``: ``(option, path)`` pairs
    (``("--run 0", Path(...))``); ``what``: the kind, for the message.

    Raises:
        InputError: naming both paths and options, and the fix.
    """
    seen: dict[tuple, tuple[str, Path]] = {}
    for option_name, path in given:
        key = file_identity(path)
        if key in seen:
            first, first_path = seen[key]
            raise InputError(f"{path} ({option_name}) is the {what} also given as {first_path} ({first}), by another "
                             "spelling, a symlink or a hard link: its rows would be counted twice; pass each file once")
        seen[key] = (option_name, Path(path))


def check_distinct_outputs(args: argparse.Namespace, outputs: tuple[str, ...], inputs: tuple[str, ...] = ()) -> None:
    """Refuse one path given to two ``outputs`` options (``("--out", "--out-truth-size")``: one table would be
    written over the other) or an output that is one of the ``inputs`` options' files (by any spelling,
    :func:`~certified_circuits.storage.paths.file_identity`), before any work; options left unset are skipped.

    Raises:
        InputError: naming both options, the path and the fix.
    """
    def values(name: str) -> list[Path]:
        value = getattr(args, name.lstrip("-").replace("-", "_"), None)
        return [] if value is None else [Path(v) for v in (value if isinstance(value, (list, tuple)) else [value])]

    seen: dict[tuple, str] = {}
    for name in inputs:
        for path in values(name):
            seen.setdefault(file_identity(path), f"input {name}")
    for name in outputs:
        for path in values(name):
            key = file_identity(path)
            if key in seen:
                raise InputError(f"{name} {path} is also given as {seen[key]}: one output would be written over the "
                                 "other (or over the input); give each output its own path")
            seen[key] = name

def check_circuit_files(pairs, concept: str | None = None, what: str = "--concept") -> None:
    """Refuse votes and certificates that are not of one circuit, before any work.

    ``pairs`` holds ``(votes, votes_path, certificates, certificates_path)``. A certificates file must come
    from its votes file (same concept, scorer, model, split and votes setting, same K grid and component
    count); with ``concept``, every pair must be of it; and several pairs (one per scorer) must share one
    setting, so their rows compare like with like.

    Raises:
        InputError: naming both files, the attribute, both values and the fix.
    """
    from certified_circuits.core.certification import attr_value as value, check_certified_from

    settings: dict[tuple, Path] = {}
    for votes, votes_path, certificates, certificates_path in pairs:
        try:
            check_certified_from(votes, certificates, str(votes_path), str(certificates_path),
                                 certify_command(str(votes_path)))
        except ValueError as error:
            raise InputError(str(error)) from None
        found = value(votes.attrs, "concept")
        if concept is not None and found is not None and str(found) != concept:
            raise InputError(f"{what} {concept!r} but {votes_path} holds the circuits of {found!r}: pass that "
                             f"concept's files, or {what} {found}")
        setting = tuple(str(value(votes.attrs, k)) for k in ("p_del", "n0", "n", "seed")) + tuple(
            str(value(certificates.attrs, k)) for k in ("tau", "alpha", "correction"))
        settings.setdefault(setting, Path(certificates_path))
    if len(settings) > 1:
        (first, a), (second, b) = list(settings.items())[:2]
        names = ("p_del", "n0", "n", "seed", "tau", "alpha", "correction")
        diff = ", ".join(f"{n} {x} vs {y}" for n, x, y in zip(names, first, second) if x != y)
        raise InputError(f"{a} and {b} are of different settings ({diff}); one evaluation compares circuits of one "
                         f"setting: evaluate each setting separately")
