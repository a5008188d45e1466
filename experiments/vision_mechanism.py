"""The vision mechanism of issue 50, measured on the BASELINE only: the compiled marked ResNet
(:mod:`certified_circuits.vision.networks.compiled`) on a marked world, per model seed: its truth verified channel by
channel (true, null, grey) and the baseline's conditions (a)-(c) per class
(:func:`certified_circuits.analysis.baseline_conditions.baseline_conditions`). No certified number is computed.

Per model seed ``s`` (``experiments/vision_mechanism.yaml``), through the project's stages:

1. ``vision-world --seed s --cue-attributes A ...``: the marked world (train: the population and the fills; concept:
   D_c; id_test: the truth's checks);
2. ``vision-compile --seed s``: the hand-set model;
3. ``vision-ground-truth``: every channel's own effect and the whole-circuit checks on the truth as written;
4. ``vision-attribute`` (one ``batch`` process): every class's D_c and population scores;
5. per class and scorer: :func:`baseline_conditions` at the truth's size over ``resamples`` bootstrap resamples.

Usage::

    PYTHONPATH=src .venv/bin/python experiments/vision_mechanism.py experiments/vision_mechanism.yaml \\
        --work results/vision_mechanism

Writes under ``--work``: ``conditions.csv`` (one row per seed, class and scorer), ``effects.csv`` (one row per seed
and class: the true, null and grey channels' effects), ``vision_mechanism.md`` (the tables) and per seed its world,
model, ground truth and attributions under ``s<seed>/`` (reused when present, so an interrupted run resumes).
Progress and each seed's wall time go to stderr. A class whose truth fails its check is scored against nothing: it
has no conditions, is left out of every count of classes, and is named under the tables.

Every refusal is one line on stderr, ``error: <file or folder>: <key>: <what is wrong>; <fix>``, exit 2, and the
config's refusals come before any world or model is built: the ``world`` and ``compile`` sections are read as the
options of ``vision-world`` and ``vision-compile`` (each value parsed by the option's own type; the keys this script
sets per model seed, such as ``seed``, refused), the world must hold what the later stages need (a population of at
least ``MIN_POPULATION`` train images per class, ``reference_size`` at most the other classes' train images), and
scorers may not repeat a name or a (scorer, ranking). ``--work/built_from.json`` records the config and the
*effective* options of both stages (their defaults included), and every reused file is read back before the first
stage: a world whose ``world.json``, or a model whose checkpoint meta, differs from what this run's options give (an
older default, say) is refused by name, as is a reused file that depends on a recorded key this run changes. A key no
reused file depends on (resamples, the scorers' names) only changes the tables, which are recomputed.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.baseline_conditions import MIN_POPULATION, MIN_RESAMPLES, baseline_conditions
from certified_circuits.analysis.recovery import read_ground_truth, truth_mask
from certified_circuits.storage.atomic import write_text
from certified_circuits.storage.store import read_attributions

ROOT = Path(__file__).resolve().parents[1]
CLI = str(ROOT / "bin" / "certified-circuits")
KEYS = ("model_seeds", "world", "compile", "reference_size", "scorers", "resamples", "bootstrap_seed")
#: the scores a scorer entry may read; conductance (layer conductance, vision-attribute --conductance) is scored
#: only when an entry names it, from the zeros baseline (the world's mean grey image) with 16 steps, the defaults
#: of vision.conductance (docs/custom_vision.md, "The built-in scorers")
SCORERS = ("relevance", "activation", "conductance")
CONDUCTANCE = ("--conductance", "zeros", "--conductance-steps", "16")


#: the options of each stage that this script sets per model seed (or per file): a config key for one would be
#: overridden, or would override the seed, silently
PER_SEED = {"world": ("seed", "out", "splits"), "compile": ("seed", "world", "out_model", "out_metrics")}
#: vision-world's option names that are not WorldConfig's field names
WORLD_FIELDS = {"severity": "corruption_severity"}
#: the checkpoint meta keys of the compiled spec that the compile options set (``distractors`` and ``seed`` apart)
COMPILE_SPEC = ("margins", "jitter", "jitter_spread", "cue_gain_spread", "badge_gain", "cue_gain")
#: the record of what --work was built from, and the reused files each recorded key builds: a changed key refuses the
#: folder only where such a file exists (a failed stage leaves none, so the corrected rerun is never blocked)
RECORD = "built_from.json"
RECORD_FORMAT = "experiments/vision_mechanism/2"
DEPENDS = (("world", "world/world.json"), ("compile", "model.pt"), ("reference_size", "ground_truth.json"),
           ("conductance", "*.h5"))


class ConfigError(ValueError):
    """A refusal of the command line, the config, the work folder or a stage: one ``error: <file>: <key>: <what>;
    <fix>`` line, exit 2."""


def _int(config: dict[str, Any], key: str, path: Path, minimum: int, maximum: int = 100_000) -> int:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ConfigError(f"{path}: {key}: {value!r} must be an integer in [{minimum}, {maximum}]")
    return value


def stage_parser(stage: str) -> argparse.ArgumentParser:
    """``vision-world``'s or ``vision-compile``'s own argument parser (its options, types and defaults)."""
    from certified_circuits.cli.vision_data import _compile_arguments, _world_arguments

    parser = argparse.ArgumentParser(prog=f"certified-circuits vision-{stage}", add_help=False)
    (_world_arguments if stage == "world" else _compile_arguments)(parser)
    return parser


def stage_options(section: dict[str, Any], stage: str, path: Path) -> dict[str, Any]:
    """The effective options of ``vision-<stage>`` (its defaults, then the config's keys), every key of ``section``
    parsed by the option's own type, before any work.

    Returns:
        ``{option dest: value}`` of every option but the per-seed ones and ``threads`` (which changes no number).

    Raises:
        ConfigError: naming the file and ``<stage>.<key>``: a key this script sets per seed, a key that is not an
            option of the stage, a bool, a non-finite number, a value the option's type refuses (a float for an
            integer option included), a list where one value is taken or a list of the wrong length.
    """
    parser = stage_parser(stage)
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    known = [d for d in actions if d not in PER_SEED[stage]]
    options = {d: actions[d].default for d in known if d != "threads"}
    for key, value in section.items():
        where = f"{path}: {stage}.{key}"
        if key in PER_SEED[stage]:
            raise ConfigError(f"{where}: set per model seed by this script (vision-{stage} --{key.replace('_', '-')} "
                              f"of each seed's own files); remove it from {stage} (model_seeds sets the seeds)")
        if key not in actions:
            raise ConfigError(f"{where}: not an option of vision-{stage}; use one of {', '.join(known)}")
        action = actions[key]
        many = action.nargs not in (None, "?")
        values = value if isinstance(value, list) else [value]
        if many != isinstance(value, list) or (isinstance(action.nargs, int) and len(values) != action.nargs):
            count = f"a list of {action.nargs}" if isinstance(action.nargs, int) else "a list" if many else "one value"
            raise ConfigError(f"{where}: {value!r} must be {count} (vision-{stage} --{key.replace('_', '-')})")
        parsed = []
        for item in values:
            if isinstance(item, bool) or item is None or isinstance(item, (dict, list)) or (
                    isinstance(item, float) and not math.isfinite(item)):
                raise ConfigError(f"{where}: {value!r} must be {'finite numbers' if many else 'a finite number'} or "
                                  f"the option's value (vision-{stage} --{key.replace('_', '-')})")
            try:
                converted = action.type(str(item)) if action.type else str(item)
            except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
                raise ConfigError(f"{where}: {value!r}: {exc or 'not of the type of the option'} (vision-{stage} "
                                  f"--{key.replace('_', '-')})") from None
            if isinstance(converted, float) and not math.isfinite(converted):
                raise ConfigError(f"{where}: {value!r} must be a finite number")
            if action.choices is not None and converted not in action.choices:
                raise ConfigError(f"{where}: {value!r} must be one of {list(action.choices)}")
            parsed.append(converted)
        if key != "threads":
            options[key] = parsed if many else parsed[0]
    return options


def check_world(world: dict[str, Any], reference_size: int, path: Path) -> None:
    """The effective world, as ``vision-world`` checks it, and what the later stages need of it.

    Raises:
        ConfigError: the world's own check (:meth:`WorldConfig.validate`); no cues; a population (a class's train
            images) below ``MIN_POPULATION``; fewer than 2 concept images (a bootstrap resample needs 2) or no test
            image; ``reference_size`` above the other classes' train images (a fill would silently average fewer).
    """
    from certified_circuits.vision.data.world import WorldConfig

    fields = {WORLD_FIELDS.get(k, k): v for k, v in world.items()}
    try:
        WorldConfig(seed=0, **fields).validate()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: world: {exc}; see vision-world --help") from None
    if world["cue_attributes"] < 1:
        raise ConfigError(f"{path}: world.cue_attributes: {world['cue_attributes']!r} must be an integer >= 1 (the "
                          "compiled model reads the cue marks)")
    if world["n_train_per_class"] < MIN_POPULATION:
        raise ConfigError(f"{path}: world.n_train_per_class: {world['n_train_per_class']} must be at least "
                          f"{MIN_POPULATION}: a class's train images are the population condition (a) compares with "
                          f"(MIN_POPULATION); raise it")
    if world["n_concept_per_class"] < 2:
        raise ConfigError(f"{path}: world.n_concept_per_class: {world['n_concept_per_class']} must be at least 2 "
                          "(D_c, resampled with replacement)")
    if world["n_test_per_class"] < 1:
        raise ConfigError(f"{path}: world.n_test_per_class: {world['n_test_per_class']} must be at least 1 (id_test: "
                          "the truth's checks)")
    others = world["n_train_per_class"] * (world["n_classes"] - 1)
    if reference_size > others:
        raise ConfigError(f"{path}: reference_size: {reference_size} exceeds the {others} train images of the other "
                          f"classes (world.n_train_per_class x (n_classes - 1)) a class-absent fill averages: it would "
                          f"silently average {others}; lower it or raise world.n_train_per_class")


def check_compile(options: dict[str, Any], world: dict[str, Any], path: Path) -> None:
    """The effective compile options, as the compiled model checks them (:class:`CompiledSpec`), on the world.

    Raises:
        ConfigError: naming ``compile`` and what the spec refuses.
    """
    from certified_circuits.vision.networks.compiled import CompiledSpec

    codes = world["cue_attributes"] * world["cue_values"]
    try:
        CompiledSpec(world["n_classes"], world["cue_attributes"], world["cue_values"], options["distractors"] or codes,
                     tuple(options["margins"]), options["jitter"], options["badge_gain"], options["cue_gain"], 0.5,
                     world["image_size"], 0, jitter_spread=options["jitter_spread"],
                     cue_gain_spread=options["cue_gain_spread"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: compile: {exc}; see vision-compile --help") from None


def check_scorers(scorers: Any, path: Path) -> None:
    """A non-empty list of ``{name, scorer, ranking}``, no name and no (scorer, ranking) given twice (two entries of
    one name would be merged in every table; two of one scorer and ranking are one measurement counted twice).

    Raises:
        ConfigError: naming ``scorers[i]`` and the key.
    """
    shape = f"{{name, scorer: {'|'.join(SCORERS)}, ranking: signed|absolute}}"
    if not isinstance(scorers, list) or not scorers:
        raise ConfigError(f"{path}: scorers: {scorers!r} must be a non-empty list of {shape}")
    names: dict[str, int] = {}
    kinds: dict[tuple, int] = {}
    for i, entry in enumerate(scorers):
        where = f"{path}: scorers[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "scorer", "ranking"}:
            raise ConfigError(f"{where}: {entry!r} must be {shape}")
        if not isinstance(entry["name"], str) or not entry["name"].strip():
            raise ConfigError(f"{where}.name: {entry['name']!r} must be a non-empty name")
        if entry["scorer"] not in SCORERS:
            raise ConfigError(f"{where}.scorer: {entry['scorer']!r} must be one of {', '.join(SCORERS)}")
        if entry["ranking"] not in ("signed", "absolute"):
            raise ConfigError(f"{where}.ranking: {entry['ranking']!r} must be signed or absolute")
        if entry["name"] in names:
            raise ConfigError(f"{where}.name: {entry['name']!r} is the name of scorers[{names[entry['name']]}] too: "
                              "the two would be merged in every table; give each scorer its own name")
        kind = (entry["scorer"], entry["ranking"])
        if kind in kinds:
            raise ConfigError(f"{where}: {entry['scorer']} {entry['ranking']} is scorers[{kinds[kind]}] again: one "
                              "measurement counted twice; give each (scorer, ranking) once")
        names[entry["name"]], kinds[kind] = i, i


def load_config(path: Path) -> dict[str, Any]:
    """The experiment's config, checked before any work.

    Returns:
        The config, with the effective options of both stages under ``"_world"`` and ``"_compile"``
        (:func:`stage_options`).

    Raises:
        ConfigError: naming the file and the key: an unreadable file, a missing or unknown key, fewer than 8 model
            seeds or a seed that is not a distinct integer in [0, 2**32), resamples below the conditions' 50, a bad
            scorer (:func:`check_scorers`), a world or compile section that is not a mapping, holds a per-seed key or
            a value its stage refuses (:func:`stage_options`, :func:`check_world`, :func:`check_compile`).
    """
    try:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML ({' '.join(str(exc).split())}); pass "
                          "experiments/vision_mechanism.yaml") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping with {list(KEYS)}; see experiments/vision_mechanism.yaml")
    missing, unknown = [k for k in KEYS if k not in config], [k for k in config if k not in KEYS]
    if missing or unknown:
        raise ConfigError(f"{path}: missing {missing}, unknown {unknown}; see experiments/vision_mechanism.yaml")
    seeds = config["model_seeds"]
    if (not isinstance(seeds, list) or len(seeds) < 8 or len(set(map(str, seeds))) != len(seeds)
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**32 for x in seeds)):
        raise ConfigError(f"{path}: model_seeds: {seeds!r} must be at least 8 distinct integers in [0, 2**32) (the "
                          "unit of the tests; a seed given twice would count twice)")
    _int(config, "resamples", path, MIN_RESAMPLES)
    _int(config, "reference_size", path, 1, 5000)
    _int(config, "bootstrap_seed", path, 0, 2**32 - 1)
    check_scorers(config["scorers"], path)
    for key in ("world", "compile"):
        if not isinstance(config[key], dict):
            raise ConfigError(f"{path}: {key}: {config[key]!r} must be a mapping; see experiments/vision_mechanism.yaml")
    world = stage_options(config["world"], "world", path)
    check_world(world, config["reference_size"], path)
    compiled = stage_options(config["compile"], "compile", path)
    check_compile(compiled, world, path)
    return {**config, "_world": world, "_compile": compiled}


def needs_conductance(config: dict[str, Any]) -> bool:
    """Whether a scorer reads layer conductance (the attribution files then hold it)."""
    return any(s["scorer"] == "conductance" for s in config["scorers"])


def built_from(config: dict[str, Any]) -> dict[str, Any]:
    """The record of ``--work`` (:data:`RECORD`): the config as given, and both stages' effective options."""
    given = {k: v for k, v in config.items() if not k.startswith("_")}
    return json.loads(json.dumps({"format": RECORD_FORMAT, "config": given, "world": config["_world"],
                                  "compile": config["_compile"], "reference_size": config["reference_size"],
                                  "conductance": needs_conductance(config)}))


def _recorded(old: dict[str, Any]) -> dict[str, Any]:
    """A record as :func:`built_from` writes it; one written before the effective options were kept (the config
    alone) gives what it can: its reference size and conductance (its world and compile files are read back)."""
    if old.get("format") == RECORD_FORMAT:
        return old
    if not isinstance(old, dict) or not set(KEYS) <= set(old):
        raise ValueError("neither a record of this script nor a config")
    return {"config": old, "reference_size": old["reference_size"],
            "conductance": any(isinstance(s, dict) and s.get("scorer") == "conductance" for s in old["scorers"])}


def check_work(work: Path, config: dict[str, Any], path: Path) -> None:
    """Refuse a ``--work`` folder whose reused files were built from another config or other stage options, then
    record this run's (:func:`built_from`). Nothing is written when it refuses.

    A recorded key that this run changes refuses the folder only where a file built from it exists
    (:data:`DEPENDS`); every reused world and model is read back besides (:func:`check_products`), so a folder
    recorded before the effective options were (its models' meta says what built them) is checked as well.

    Raises:
        ConfigError: naming the record or the file, the key, both values and the fix.
    """
    record = work / RECORD
    wanted = built_from(config)
    fix = f"pass a new --work folder, or delete {work} to rebuild it"
    if work.exists() and not work.is_dir():
        raise ConfigError(f"{work}: --work: a file, not a folder; pass a folder")
    if record.is_file():
        try:
            old = _recorded(json.loads(record.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{record}: cannot be read as this script's record ({exc}); {fix}") from None
        for key, product in DEPENDS:
            if key not in old or old[key] == wanted[key]:
                continue
            if isinstance(wanted[key], dict) and isinstance(old[key], dict) and all(
                    old[key][k] == v for k, v in wanted[key].items() if k in old[key]):
                continue  # an option added or renamed since: the files themselves are read back (check_products)
            built = sorted(work.glob(f"s*/{product}"))
            if key == "conductance" and old[key]:
                continue  # files with conductance scores serve a run without it
            if built:
                changed = ({k: (old[key][k], v) for k, v in wanted[key].items() if k in old[key] and old[key][k] != v}
                           if isinstance(wanted[key], dict) else (old[key], wanted[key]))
                raise ConfigError(f"{record}: {key}: the {len(built)} {product} file(s) here (the first: {built[0]}) "
                                  f"were built from another {key} (recorded, this run: {changed}): they would be "
                                  f"reused as this run's; {fix}")
    elif work.is_dir() and any(work.iterdir()):
        raise ConfigError(f"{work}: holds files but no {RECORD}, so what built them is unknown; {fix}")
    check_products(work, config)
    work.mkdir(parents=True, exist_ok=True)
    write_text(record, json.dumps(wanted, sort_keys=True) + "\n")


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return not math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a != b


def check_products(work: Path, config: dict[str, Any]) -> None:
    """Read back every reused world and model of the config's seeds: ``world/world.json``'s config against this
    run's world options and seed, the checkpoint's ``meta['compiled']`` against its compile options and seed (a
    checkpoint without ``jitter_spread`` or ``cue_gain_spread``, written before they existed, has 0 there), and a
    ground truth's ``planted`` spec against the model it is reused with.

    Raises:
        ConfigError: naming the file, the key, what built it and what this run gives.
    """
    from certified_circuits.vision.data.world import WorldConfig

    world, options = config["_world"], config["_compile"]
    for seed in config["model_seeds"]:
        folder = work / f"s{seed}"
        fix = f"delete {folder} (it is rebuilt with this run's options), or pass a new --work folder"
        meta = folder / "world" / "world.json"
        if meta.is_file():
            try:
                built = json.loads(meta.read_text(encoding="utf-8"))["config"]
            except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{meta}: cannot be read as a world's record ({exc!r}); {fix}") from None
            defaults = WorldConfig()
            for key, value in {**world, "seed": seed}.items():
                field = WORLD_FIELDS.get(key, key)
                if field not in built and hasattr(defaults, field):  # a world built before the field existed
                    built = {**built, field: getattr(defaults, field)}
                if _differs(built.get(field), value):
                    raise ConfigError(f"{meta}: config.{field}: the world was built with {built.get(field)!r}, this "
                                      f"run's vision-world gives {value!r}; {fix}")
        checkpoint = folder / "model.pt"
        if checkpoint.is_file():
            spec = compiled_meta(checkpoint, fix)
            codes = world["cue_attributes"] * world["cue_values"]
            wanted = {**{k: options[k] for k in COMPILE_SPEC}, "distractors": options["distractors"] or codes,
                      "seed": seed}
            legacy = {"jitter_spread": 0.0, "cue_gain_spread": 0.0}  # CompiledSpec.from_dict's LEGACY_* values
            for key, value in wanted.items():
                if _differs(spec.get(key, legacy.get(key)), value):
                    raise ConfigError(f"{checkpoint}: meta.compiled.{key}: the model was compiled with "
                                      f"{spec.get(key, legacy.get(key))!r}, this run's vision-compile gives {value!r} "
                                      f"(a default of an older version?); {fix}")
            truth = folder / "ground_truth.json"
            if truth.is_file():
                try:
                    planted = json.loads(truth.read_text(encoding="utf-8")).get("planted")
                except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
                    raise ConfigError(f"{truth}: cannot be read ({exc}); {fix}") from None
                if isinstance(planted, dict) and any(_differs(planted.get(k, legacy.get(k)), spec.get(k, legacy.get(k)))
                                                     for k in (*COMPILE_SPEC, "layout", "seed")):
                    raise ConfigError(f"{truth}: planted: the truth was verified on another model than {checkpoint}; "
                                      f"delete {truth} (it is verified again)")


def compiled_meta(checkpoint: Path, fix: str) -> dict[str, Any]:
    """The compiled spec a checkpoint carries (``meta['compiled']``, written by vision-compile)."""
    from certified_circuits.vision.networks.checkpoints import load_weights

    try:
        spec = load_weights(checkpoint).get("meta", {}).get("compiled")
    except (ValueError, AttributeError) as exc:
        raise ConfigError(f"{checkpoint}: cannot be read as a checkpoint ({exc}); {fix}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{checkpoint}: meta.compiled: missing: not a model of vision-compile; {fix}")
    return spec


def log_line(log: Path) -> str:
    """The last line of a stage's log that says something (not a progress bar): its own error, or the exception a
    traceback ends with."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").replace("\r", "\n").splitlines()]
    except OSError:
        return "(no log)"
    said = [line for line in lines if line and "it/s]" not in line and "s/it]" not in line]
    return said[-1] if said else "(no output)"


def cli(*args: Any, log: Path) -> None:
    """Run ``certified-circuits ARGS``; its stderr goes to ``log``.

    Raises:
        RuntimeError: one line: the log, the stage, its exit status and the last line it wrote (its own error).
    """
    with open(log, "a") as err:
        done = subprocess.run([CLI, *map(str, args)], stderr=err, stdout=err)
    if done.returncode:
        raise RuntimeError(f"{log}: certified-circuits {args[0]} failed (exit {done.returncode}): {log_line(log)}; fix "
                           "what it names and rerun the same command (finished files are reused)")


def options(section: dict[str, Any]) -> list[str]:
    """``{key: value}`` as command-line options ``--key value`` (lists spread, underscores as dashes)."""
    out: list[str] = []
    for key, value in section.items():
        out.append(f"--{key.replace('_', '-')}")
        out += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return out


def read_scores(path: Path, scorers: list[str], n_examples: int, what: str):
    """An attribution file of a seed, checked against this run: readable, holding every scorer it needs and
    ``n_examples`` examples (the world's |D_c| or population)."""
    fix = f"delete {path} (it is scored again) or pass a new --work folder"
    try:
        attr = read_attributions(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: cannot be read as attributions ({exc}); {fix}") from None
    lacking = [s for s in scorers if s not in attr.scores]
    if lacking:
        raise ConfigError(f"{path}: scores: lacks {lacking} (scored without them); {fix}")
    held = len(next(iter(attr.scores.values())))
    if held != n_examples:
        raise ConfigError(f"{path}: examples: holds {held}, this run's world gives {what} {n_examples}; {fix}")
    return attr


def run_seed(config: dict[str, Any], seed: int, work: Path) -> tuple[list[dict], list[dict], float]:
    """Stages 1-5 of the module docstring for one model seed; files are reused when present. A class whose truth
    fails its check is neither attributed nor given conditions (its effect row says ``passed`` False).

    Returns:
        ``(condition rows, effect rows, wall seconds)``.

    Raises:
        RuntimeError: a stage failed (its log named); ConfigError: a reused file this run cannot use, or conditions
            the data cannot give (both named).
    """
    start = time.perf_counter()
    folder = work / f"s{seed}"
    world, model, gt = folder / "world", folder / "model.pt", folder / "ground_truth.json"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "stages.log"
    if not (world / "world.json").is_file():
        cli("vision-world", "--out", world, "--seed", seed, *options(config["world"]), "--splits", "train", "concept",
            "id_test", log=log)
    if not model.is_file():
        cli("vision-compile", "--world", world, "--seed", seed, "--out-model", model, "--out-metrics",
            folder / "compile.json", *options(config["compile"]), log=log)
    if not gt.is_file():
        cli("vision-ground-truth", "--checkpoint", model, "--world", world, "--out", gt, "--reference-size",
            config["reference_size"], "--seed", seed, log=log)
    try:
        truth = read_ground_truth(gt)
    except ValueError as exc:
        raise ConfigError(f"{exc} (delete {gt}: it is verified again)") from None
    passed = [c for c in truth.concepts if truth.verified(c)]
    files = {(c, part): folder / f"{part}_{c}.h5" for c in passed for part in ("dc", "population")}
    batch: list[str] = []
    conductance = CONDUCTANCE if needs_conductance(config) else ()
    for (concept, part), out in files.items():
        if not out.is_file():
            split = "concept" if part == "dc" else "train"
            batch += [*([] if not batch else ["::"]), "vision-attribute", "--model", "world", "--checkpoint",
                      str(model), "--threads", "1", "--data", str(world / f"{split}.npz"), "--concept", concept,
                      "--split", split, "--experiment", "vision_mechanism", "--batch-size", "250", "--out", str(out),
                      *conductance]
    if batch:
        cli("batch", *batch, log=log)
    rows, effects = [], []
    needed = sorted({s["scorer"] for s in config["scorers"]})
    sizes = {"dc": ("|D_c| (world.n_concept_per_class)", config["_world"]["n_concept_per_class"]),
             "population": ("population (world.n_train_per_class)", config["_world"]["n_train_per_class"])}
    for concept in truth.concepts:
        if concept not in passed:
            effects.append(effect_row(seed, concept, truth.verification[concept], None, None, None))
            continue
        dc, pop = (read_scores(files[(concept, part)], needed, sizes[part][1], sizes[part][0])
                   for part in ("dc", "population"))
        if list(dc.names) != list(pop.names):
            raise ConfigError(f"{files[(concept, 'population')]}: names: not the components of "
                              f"{files[(concept, 'dc')]}; delete both (they are scored again)")
        try:
            mask = truth_mask(truth, concept, dc.names, str(files[(concept, "dc")]))
        except ValueError as exc:
            raise ConfigError(f"{exc} (delete {gt} and {folder}/*_{concept}.h5: they are rebuilt)") from None
        grey = np.isin(dc.names, truth.grey(concept))
        effects.append(effect_row(seed, concept, truth.verification[concept], mask, grey, dc.names))
        for s in config["scorers"]:
            try:
                bc = baseline_conditions(dc.scores[s["scorer"]], dc.groups, mask, pop.scores[s["scorer"]],
                                         absolute=s["ranking"] == "absolute", n_resamples=int(config["resamples"]),
                                         seed=int(config["bootstrap_seed"]), exclude=grey)
            except ValueError as exc:
                raise ConfigError(f"{files[(concept, 'dc')]}: conditions of {s['name']!r}: {exc}") from None
            rows.append({"seed": seed, "concept": concept, "scorer": s["name"], "n_dc": len(dc.scores[s["scorer"]]),
                         "n_population": len(pop.scores[s["scorer"]]), **bc.row()})
    return rows, effects, time.perf_counter() - start


def effect_row(seed: int, concept: str, verification: dict, truth: np.ndarray | None, grey: np.ndarray | None,
               names: np.ndarray | None) -> dict[str, Any]:
    """One class's per-channel effects (the ground truth's ``per_component`` block): the true, null (non-truth,
    non-grey) and grey channels' min / median / max, epsilon, delta and the weakest true over epsilon. A class
    whose truth failed (``truth`` None: it was not attributed) gets its ``passed`` False, the checks it failed and
    NaN for the rest."""
    failed = " ".join(sorted(k.removeprefix("check.") for k, v in verification.items()
                             if k.startswith("check.") and v is False))
    row: dict[str, Any] = {"seed": seed, "concept": concept, "passed": bool(verification.get("passed", False)),
                           "failed_checks": failed}
    block = verification.get("per_component")
    if truth is None or not isinstance(block, dict) or not truth.any():
        return row
    values = np.array([block["effects"][n] for n in names])
    null = ~truth & ~grey
    row.update({"n_true": int(truth.sum()), "n_grey": int(grey.sum()), "n_null": int(null.sum()),
                "epsilon": block["epsilon"], "delta": block["delta"],
                "ratio": values[truth].min() / block["epsilon"] if block["epsilon"] > 0 else np.inf})
    for side, sel in (("true", truth), ("null", null)):
        if sel.any():
            row.update({f"{side}_min": values[sel].min(), f"{side}_median": float(np.median(values[sel])),
                        f"{side}_max": values[sel].max()})
    for key, name in (("id_test.full.accuracy", "full_accuracy"),
                      ("id_test.mean_absent.keep.accuracy", "keep_accuracy"),
                      ("id_test.mean_absent.keep.balanced_accuracy", "keep_balanced_accuracy"),
                      ("id_test.mean_absent.ablated.accuracy", "ablated_accuracy")):
        row[name] = verification.get(key, np.nan)
    return row


#: the columns every effect and condition table has (so an empty one still writes its header)
EFFECT_COLUMNS = ("seed", "concept", "passed", "failed_checks", "n_true", "n_grey", "n_null", "epsilon", "delta",
                  "ratio", "true_min", "true_median", "true_max", "null_min", "null_median", "null_max",
                  "full_accuracy", "keep_accuracy", "keep_balanced_accuracy", "ablated_accuracy")


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None or pd.isna(value) else format(value, fmt)


def markdown(conditions: pd.DataFrame, effects: pd.DataFrame, walls: dict[int, float], headline: str) -> str:
    """The tables: per seed, the truth's effects (over the classes whose truth passed) and the headline scorer's
    conditions (over those classes only: a failed class has none); the other scorers' conditions per seed beside;
    then every class of the headline scorer; then the classes left out."""
    lines = ["## The truths (id_test, per seed over its classes whose truth passed)", "",
             "| seed | classes passed | true / grey / null per class | true effects min / median / max | null effects "
             "median / max | weakest true / epsilon (min over classes) | keep acc / bal. acc (min) | ablated acc (max) "
             "| wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for seed, everything in effects.groupby("seed"):
        e = everything[everything.passed.astype(bool)]
        if e.empty:
            lines.append(f"| {seed} | 0 / {len(everything)} | - | - | - | - | - | - | "
                         f"{_cell(walls.get(seed), '.0f')} |")
            continue
        lines.append(f"| {seed} | {len(e)} / {len(everything)} | {_cell(e.n_true.iloc[0], '.0f')} / "
                     f"{_cell(e.n_grey.max(), '.0f')} / {_cell(e.n_null.iloc[0], '.0f')} | "
                     f"{_cell(e.true_min.min(), '.4f')} / {_cell(e.true_median.median(), '.4f')} / "
                     f"{_cell(e.true_max.max(), '.4f')} | {_cell(e.null_median.median(), '.5f')} / "
                     f"{_cell(e.null_max.max(), '.5f')} | {_cell(e.ratio.min(), '.1f')} | "
                     f"{_cell(e.keep_accuracy.min(), '.3f')} / {_cell(e.keep_balanced_accuracy.min(), '.3f')} | "
                     f"{_cell(e.ablated_accuracy.max(), '.3f')} | {_cell(walls.get(seed), '.0f')} |")
    for scorer, frame in (conditions.groupby("scorer", sort=False) if len(conditions) else ()):
        sizes = "/".join(str(n) for n in sorted(set(frame.n_dc)))
        lines += ["", f"## Conditions, {scorer} (|D_c| {sizes}, {int(frame.resamples.iloc[0])} bootstrap resamples): "
                      "per seed over its classes whose truth passed", "",
                  "| seed | precision population | precision resampled: mean (min gap over classes) | (a) classes | "
                  "(b) classes (true channels in 20-80%: min) | mean Jaccard (max over classes) | (c) classes |",
                  "|---|---|---|---|---|---|---|"]
        for seed, f in frame.groupby("seed"):
            lines.append(f"| {seed} | {f.precision_population.mean():.3f} | {f.precision_resampled.mean():.3f} "
                         f"({f.precision_gap.min():.3f}) | {int(f.a.sum())} / {len(f)} | {int(f.b.sum())} / {len(f)} "
                         f"({int(f.in_band.min())}) | {f.jaccard.mean():.3f} ({f.jaccard.max():.3f}) | "
                         f"{int(f.c.sum())} / {len(f)} |")
    head = conditions[conditions.scorer == headline] if len(conditions) else conditions
    lines += ["", f"## Every class whose truth passed, {headline}", "",
              "| seed | class | precision population / D_c / resampled | gap | true channels in 20-80% | mean Jaccard | "
              "a / b / c |", "|---|---|---|---|---|---|---|"]
    for r in head.itertuples():
        lines.append(f"| {r.seed} | {r.concept} | {r.precision_population:.3f} / {r.precision_full:.3f} / "
                     f"{r.precision_resampled:.3f} | {r.precision_gap:.3f} | {r.in_band} / {r.n_true} | "
                     f"{r.jaccard:.3f} | {'yes' if r.a else 'NO'} / {'yes' if r.b else 'NO'} / "
                     f"{'yes' if r.c else 'NO'} |")
    failed = effects[~effects.passed.astype(bool)]
    if len(failed):
        named = "; ".join(f"seed {r.seed} {r.concept} ({r.failed_checks or 'passed: false'})"
                          for r in failed.itertuples())
        lines += ["", f"Left out (the truth failed its check, so no condition is reported for the class and it is in "
                      f"no count of classes): {len(failed)} of {len(effects)} classes: {named}."]
    return "\n".join(lines) + "\n"


def seed_line(seed: int, wall: float, rows: list[dict], effects: list[dict], name: str) -> str:
    """The progress line of one seed: the headline scorer's conditions over the classes whose truth passed, and how
    many were left out."""
    left = [e["concept"] for e in effects if not e["passed"]]
    out = f" ({len(left)} left out: the truth failed: {', '.join(left)})" if left else ""
    head = [r for r in rows if r["scorer"] == name]
    if not head:
        return (f"vision mechanism: seed {seed}: {wall:.0f} s; no class passed its truth check{out}: no conditions "
                "reported")
    n = len(head)
    mean = {k: float(np.mean([r[k] for r in head])) for k in ("precision_gap", "jaccard")}
    return (f"vision mechanism: seed {seed}: {wall:.0f} s; {name}: (a) {sum(bool(r['a']) for r in head)}/{n}, (b) "
            f"{sum(bool(r['b']) for r in head)}/{n}, (c) {sum(bool(r['c']) for r in head)}/{n} classes whose truth "
            f"passed{out}; gap {mean['precision_gap']:.3f}, Jaccard {mean['jaccard']:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path)
    p.add_argument("--work", type=Path, required=True, help="folder of the seeds' files and the tables")
    args = p.parse_args(argv)
    try:
        config = load_config(args.config)
        check_work(args.work, config, args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows, effects, walls = [], [], {}
    name = config["scorers"][0]["name"]
    for seed in config["model_seeds"]:
        try:
            r, e, walls[int(seed)] = run_seed(config, int(seed), args.work)
        except (RuntimeError, ConfigError) as exc:  # a stage failed or a reused file is refused: one line
            print(f"error: seed {seed}: {exc}", file=sys.stderr)
            return 2
        except (ValueError, OSError) as exc:  # a reader refusing a file: its message (which names it), one line
            print(f"error: seed {seed}: {args.work / f's{seed}'}: {' '.join(str(exc).split())}; fix what it names, or "
                  "delete the file (it is rebuilt), and rerun", file=sys.stderr)
            return 2
        rows += r
        effects += e
        print(seed_line(int(seed), walls[int(seed)], r, e, name), file=sys.stderr)
    conditions = pd.DataFrame(rows)
    effect_table = pd.DataFrame(effects).reindex(columns=list(EFFECT_COLUMNS))
    write_text(args.work / "conditions.csv", conditions.to_csv(index=False))
    write_text(args.work / "effects.csv", effect_table.to_csv(index=False))
    text = markdown(conditions, effect_table, walls, name)
    write_text(args.work / "vision_mechanism.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
