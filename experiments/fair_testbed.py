"""The fair testbed of issue 50 (docs/embedded_default.md, "The fair testbed", pre-registered; numbers in
docs/fair_testbed.md): what a certificate buys, measured so that a referee accepts it.

Three stages, each reading the one before from ``--work`` (so an interrupted run resumes with the same command):

- ``score``: per model seed, build the model, verify its truth (the whole circuit on the scored truth, then every
  component on its own: true, null or grey), and score the population (the first ``population`` training prompts;
  D is its first ``size``) with every method. Cached as ``<half>/s<seed>.npz`` (+ ``.json``).
- ``conditions``: the baseline's conditions (a)-(c) at the truth's size over ``resamples`` bootstrap resamples of D
  (:func:`certified_circuits.analysis.baseline_conditions.baseline_conditions`). Computes no certified number.
- ``hypotheses``: certified circuits at the truth's size, the size-matched comparisons and H1 and H3 over the model
  seeds (:mod:`certified_circuits.analysis.size_matched`, :mod:`certified_circuits.analysis.seed_tests`). The old H2
  (three-valued labels against two-valued memberships) is withdrawn and no longer reported.
- ``equal``: the equal-footing comparisons (docs/embedded_default.md, "The fair testbed on equal footing"): the
  certificate against the matched cut, the bootstrap interval and consensus, which may abstain as much; shares over
  the live components; abstention as a detector of the population's contested set; H2a-H2c and H4
  (:mod:`certified_circuits.analysis.equal_footing`).

Usage::

    PYTHONPATH=src .venv/bin/python experiments/fair_testbed.py experiments/fair_testbed.yaml \\
        --work results/fair_testbed --half language --stage score

Every refusal is one line on stderr, ``error: <file>: <key>: <what is wrong>; <fix>``, exit 2, and leaves nothing
behind: every number of the config is checked when it loads (type, finite, range; the range in the message). The
score stage records what its cache is built from (``<work>/language/built_from.json``: the compiled model, its
distractor scale, the prompts' seed, the held-out and population sizes, the IG steps and each method's convention),
and every stage refuses, by key, a cache built from another config (``--include-other-build`` includes it, with a
warning). A cache made before the record existed is checked when first read: each cached seed's edges and its first
prompts' scores, computed again from this config, must match (then the record is written; a mismatch is refused by
seed and method). The vision half reads experiments/vision_mechanism.py's work folder (it must hold that script's
``built_from.json``) and refuses a ``size`` larger than a class's D_c in its attribution files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.baseline_conditions import MIN_POPULATION, MIN_RESAMPLES, baseline_conditions
from certified_circuits.core.setting import Setting
from certified_circuits.storage.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("score", "conditions", "hypotheses", "equal")
#: the vision scorers the mechanism's attribution files hold (experiments/vision_mechanism.py)
VISION_SCORERS = ("relevance", "activation", "conductance")


class ConfigError(ValueError):
    """A refusal of the command line or the config: printed as ``error: <message>`` with exit 2."""


#: the certification block's keys: (kind, lowest, highest); alpha in (0, 1], correction by name
CERTIFICATION = {"n0": (int, 1, 10**7), "n": (int, 1, 10**7), "seed": (int, 0, 2**32 - 1), "alpha": (float, 0.0, 1.0)}
CORRECTIONS = ("bonferroni", "holm")


def _number(value: Any, kind: type, low: float, high: float, where: str, *, open_low: bool = False) -> Any:
    """``value`` checked where it enters: an integer (``kind`` int: no float, bool or string) or a finite number in
    ``[low, high]`` (``(low, high]`` with ``open_low``).

    Raises:
        ConfigError: ``"<where>: <value>: must be an integer in [low, high]"`` (or a number).
    """
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
          and (kind is float or isinstance(value, int)) and (low < value if open_low else low <= value) and value <= high)
    if not ok:
        span = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise ConfigError(f"{where}: {value!r}: must be {'an integer' if kind is int else 'a finite number'} in {span}")
    return value


def check_settings(section: dict[str, Any], where: str) -> None:
    """The ``certification`` block (its keys, each number's type and range) and the ``settings`` list (a non-empty
    list of ``{tau, p_del}`` in [0, 1], none given twice, each a valid :class:`Setting`).

    Raises:
        ConfigError: naming the file and the key path.
    """
    c = section["certification"]
    if not isinstance(c, dict) or set(c) != {*CERTIFICATION, "correction"}:
        raise ConfigError(f"{where}.certification: {c!r} must be a mapping of exactly "
                          f"{', '.join([*CERTIFICATION, 'correction'])}; see experiments/fair_testbed.yaml")
    for key, (kind, low, high) in CERTIFICATION.items():
        _number(c[key], kind, low, high, f"{where}.certification.{key}", open_low=key == "alpha")
    if c["correction"] not in CORRECTIONS:
        raise ConfigError(f"{where}.certification.correction: {c['correction']!r}: must be bonferroni or holm")
    settings = section["settings"]
    if not isinstance(settings, list) or not settings:
        raise ConfigError(f"{where}.settings: {settings!r}: must be a non-empty list of {{tau, p_del}}")
    for i, s in enumerate(settings):
        if not isinstance(s, dict) or set(s) != {"tau", "p_del"}:
            raise ConfigError(f"{where}.settings[{i}]: {s!r}: must be a mapping of exactly tau and p_del")
        for key in ("tau", "p_del"):
            _number(s[key], float, 0.0, 1.0, f"{where}.settings[{i}].{key}")
    tags = [_setting(section, s, f"{where}.settings[{i}]").tag for i, s in enumerate(settings)]
    if len(set(tags)) != len(tags):
        raise ConfigError(f"{where}.settings: a setting is given twice ({tags})")


def _setting(section: dict[str, Any], s: dict[str, Any], where: str) -> Setting:
    """One setting of a section whose numbers :func:`check_settings` checked."""
    c = section["certification"]
    try:
        return Setting(p_del=float(s["p_del"]), n0=int(c["n0"]), n=int(c["n"]), seed=int(c["seed"]),
                       tau=float(s["tau"]), alpha=float(c["alpha"]), correction=str(c["correction"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}; see experiments/fair_testbed.yaml") from None


def _seeds(value: Any, where: str, minimum: int = 1) -> list[int]:
    """Distinct integers in [0, 2**32) (a seed given twice would count as two pairs)."""
    if (not isinstance(value, list) or len(value) < minimum or len(set(map(str, value))) != len(value)
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**32 for s in value)):
        raise ConfigError(f"{where}: {value!r} must be distinct non-negative integers below 2**32 (a seed given twice "
                          "would count as two pairs)")
    return value


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML ({' '.join(str(exc).split())}); pass "
                          "experiments/fair_testbed.yaml") from None


#: the ``equal_footing`` block of each half: key -> (type, lowest, highest) (the pre-registration's values in the yaml)
FOOTING_KEYS = {"inner_resamples": (int, 2, 10_000), "inner_seed": (int, 0, 2**32 - 1), "q": (float, 0.5, 1.0),
                "z": (float, 0.0, 10.0), "population_samples": (int, 10, 100_000),
                "population_seed": (int, 0, 2**32 - 1), "tie_seed": (int, 0, 2**32 - 1)}


def check_footing(section: dict[str, Any], where: str) -> None:
    """The ``equal_footing`` block: every key of :data:`FOOTING_KEYS`, of its type and in its range (q in (0.5, 1]).

    Raises:
        ConfigError: naming the file, the key and the allowed range.
    """
    block = section.get("equal_footing")
    if not isinstance(block, dict):
        raise ConfigError(f"{where}.equal_footing: missing or not a mapping; see experiments/fair_testbed.yaml")
    unknown = sorted(set(block) - set(FOOTING_KEYS))
    missing = sorted(set(FOOTING_KEYS) - set(block))
    if unknown or missing:
        raise ConfigError(f"{where}.equal_footing: {'unknown ' + ', '.join(unknown) if unknown else ''}"
                          f"{'; ' if unknown and missing else ''}{'lacks ' + ', '.join(missing) if missing else ''}; "
                          f"the keys are {', '.join(FOOTING_KEYS)}")
    for key, (kind, low, high) in FOOTING_KEYS.items():
        value = block[key]
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
              and (kind is float or isinstance(value, int)) and low <= value <= high and not (key == "q" and value == low))
        if not ok:
            span = f"({low}, {high}]" if key == "q" else f"[{low}, {high}]"
            raise ConfigError(f"{where}.equal_footing.{key}: {value!r} must be {'an integer' if kind is int else 'a number'} "
                              f"in {span}")
    try:  # the protocol's own rules are the last word (z > 0, n_inner's ceiling): one owner of what it accepts
        footing_protocol(section)
    except ValueError as exc:
        raise ConfigError(f"{where}.equal_footing: {exc}; see experiments/fair_testbed.yaml") from None


def footing_protocol(section: dict[str, Any]):
    """The half's :class:`~certified_circuits.analysis.equal_footing.FootingProtocol` (the outer resamples and their
    seed are the conditions' ``resamples`` and ``bootstrap_seed``)."""
    from certified_circuits.analysis.equal_footing import FootingProtocol

    b = section["equal_footing"]
    return FootingProtocol(n_resamples=int(section["resamples"]), bootstrap_seed=int(section["bootstrap_seed"]),
                           n_inner=int(b["inner_resamples"]), inner_seed=int(b["inner_seed"]), q=float(b["q"]),
                           z=float(b["z"]), n_population_samples=int(b["population_samples"]),
                           population_seed=int(b["population_seed"]), tie_seed=int(b["tie_seed"]))


def load_language(path: Path) -> dict[str, Any]:
    """The ``language`` section, checked before any model is built.

    Raises:
        ConfigError: naming the file and the key: a missing key, seeds repeated or not integers, sizes out of order
            or below the pre-registered floors, an unknown method or compiled model.
    """
    from certified_circuits.language.graph import COMPILED_SHAPES
    from certified_circuits.language.methods import check_method

    config = _read_yaml(path)
    lang = config.get("language") if isinstance(config, dict) else None
    if not isinstance(lang, dict):
        raise ConfigError(f"{path}: language: missing or not a mapping; see experiments/fair_testbed.yaml")
    needed = ("compiled", "distractor_scale", "model_seeds", "task_seed", "held_out", "size", "population",
              "methods", "ig_steps", "settings", "certification", "resamples", "bootstrap_seed", "equal_footing")
    missing, unknown = [k for k in needed if k not in lang], [k for k in lang if k not in needed]
    if missing:
        raise ConfigError(f"{path}: language: lacks {', '.join(missing)}; see experiments/fair_testbed.yaml")
    if unknown:
        raise ConfigError(f"{path}: language.{unknown[0]}: not a key of language (a misspelt key would be ignored); "
                          f"the keys are {', '.join(needed)}")
    if not isinstance(lang["compiled"], str) or lang["compiled"] not in COMPILED_SHAPES:
        raise ConfigError(f"{path}: language.compiled: {lang['compiled']!r} is not a compiled model; choose one of "
                          f"{', '.join(COMPILED_SHAPES)}")
    scale = _number(lang["distractor_scale"], float, 0.0, 1e6, f"{path}: language.distractor_scale")
    if lang["compiled"] != "induction_noisy" and float(scale) != 1.0:
        raise ConfigError(f"{path}: language.distractor_scale: only the noisy model has distractors; set it to 1.0 "
                          f"for {lang['compiled']!r}")
    _seeds(lang["model_seeds"], f"{path}: language.model_seeds")
    for key, floor in (("size", 2), ("held_out", 10), ("population", MIN_POPULATION), ("resamples", MIN_RESAMPLES),
                       ("ig_steps", 1)):
        value = lang[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < floor or value > 100_000:
            raise ConfigError(f"{path}: language.{key}: {value!r} must be an integer in [{floor}, 100000]")
    for key in ("task_seed", "bootstrap_seed"):
        _number(lang[key], int, 0, 2**32 - 1, f"{path}: language.{key}")
    if lang["size"] > lang["population"]:
        raise ConfigError(f"{path}: language.size: {lang['size']} exceeds language.population "
                          f"({lang['population']}): D is the population's first |D| prompts")
    methods = lang["methods"]
    if (not isinstance(methods, list) or not methods or not all(isinstance(m, str) for m in methods)
            or len(set(methods)) != len(methods)):
        raise ConfigError(f"{path}: language.methods: {methods!r} must be a list of distinct methods")
    for method in methods:
        try:
            spec = check_method(method, "edge", int(lang["ig_steps"]), "reference")
        except ValueError as exc:
            raise ConfigError(f"{path}: language.methods: {exc}") from None
        if not spec.decomposed:
            raise ConfigError(f"{path}: language.methods: {method} is not computed by the decomposed forward; "
                              "use EAP-IG-inputs or EAP")
    check_settings(lang, f"{path}: language")
    check_footing(lang, f"{path}: language")
    return lang


def load_vision(path: Path) -> dict[str, Any]:
    """The ``vision`` section (the hypotheses of the vision mechanism, read from experiments/vision_mechanism.py's
    work folder), checked before any work.

    Raises:
        ConfigError: naming the file and the key.
    """
    config = _read_yaml(path)
    vision = config.get("vision") if isinstance(config, dict) else None
    if not isinstance(vision, dict):
        raise ConfigError(f"{path}: vision: missing or not a mapping; see experiments/fair_testbed.yaml")
    needed = ("from", "model_seeds", "size", "scorers", "settings", "certification", "resamples", "bootstrap_seed",
              "equal_footing")
    missing, unknown = [k for k in needed if k not in vision], [k for k in vision if k not in needed]
    if missing:
        raise ConfigError(f"{path}: vision: lacks {', '.join(missing)}; see experiments/fair_testbed.yaml")
    if unknown:
        raise ConfigError(f"{path}: vision.{unknown[0]}: not a key of vision (a misspelt key would be ignored); the "
                          f"keys are {', '.join(needed)}")
    if not isinstance(vision["from"], str) or not vision["from"].strip():
        raise ConfigError(f"{path}: vision.from: {vision['from']!r} must be the path of experiments/"
                          "vision_mechanism.py's --work folder")
    _seeds(vision["model_seeds"], f"{path}: vision.model_seeds")
    for key, floor in (("size", 2), ("resamples", MIN_RESAMPLES)):
        value = vision[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < floor or value > 100_000:
            raise ConfigError(f"{path}: vision.{key}: {value!r} must be an integer in [{floor}, 100000]")
    _number(vision["bootstrap_seed"], int, 0, 2**32 - 1, f"{path}: vision.bootstrap_seed")
    scorers = vision["scorers"]
    if not isinstance(scorers, list) or not scorers or len({str(x) for x in scorers}) != len(scorers) or not all(
            isinstance(x, dict) and set(x) == {"name", "scorer", "ranking"} and x.get("scorer") in VISION_SCORERS
            and x.get("ranking") in ("signed", "absolute") and isinstance(x.get("name"), str) and x["name"]
            for x in scorers) or len({x["name"] for x in scorers}) != len(scorers) or len(
            {(x["scorer"], x["ranking"]) for x in scorers}) != len(scorers):
        raise ConfigError(f"{path}: vision.scorers: {scorers!r} must be {{name, scorer: {'|'.join(VISION_SCORERS)}, "
                          "ranking: signed|absolute}, with distinct names and no (scorer, ranking) twice")
    check_settings(vision, f"{path}: vision")
    check_footing(vision, f"{path}: vision")
    return vision


def _language_seed(lang: dict[str, Any], seed: int) -> dict[str, Any]:
    """One model seed of the language half: the truth (whole circuit on the scored truth, then each edge) and every
    method's scores on the population prompts."""
    from certified_circuits.analysis.component_truth import effect_summary, grey_components
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    sys.path.insert(0, str(Path(__file__).parent))
    from noise_sweep import compiled_truth, score_prompts

    hf, tok, weights, planted, kept, scored = compiled_truth(lang["compiled"], seed, lang,
                                                             float(lang["distractor_scale"]))
    block = scored["per_component"]
    names = np.asarray(weights.graph.edge_names())
    grey = grey_components(block)
    effects = np.array([block["effects"][n] for n in names])
    train = generate_splits("induction", int(lang["task_seed"]), int(lang["population"]))["train"]
    batch = encode_examples(train, tok, max_len=hf.config.n_positions)
    scores = {m: score_prompts(weights, batch, lang, m) for m in lang["methods"]}
    summary = effect_summary(block["effects"], kept)
    row = {"seed": seed, "concept": "induction", "n_components": int(names.size), "n_planted": len(planted),
           "n_true": len(kept), "n_grey": len(grey), "delta": block["delta"], "epsilon": block["epsilon"],
           "ratio": block["ratio"], "per_component_passed": bool(block["passed"]),
           "whole_passed": bool(scored["passed"]), "recovery": scored["recovery"], "remaining": scored["remaining"],
           "passed": bool(block["passed"] and scored["passed"]),
           **{f"true_{k}": v for k, v in summary["truth"].items()},
           **{f"null_{k}": v for k, v in summary["non_truth"].items()}}
    arrays = {"names": names, "truth": np.isin(names, kept), "grey": np.isin(names, grey), "effects": effects,
              "groups": np.zeros(names.size, dtype=np.int64),
              **{f"scores/{m}": s for m, s in scores.items()}}
    return {"row": row, "arrays": arrays}


def _missing_scores(lang: dict[str, Any], seed: int, npz: Path, meta: Path) -> None:
    """Add the methods of ``lang`` that a cached seed lacks (its truth is kept: only the model is compiled again, and
    the same prompts are scored), so a method added to the config after the truths were verified costs only its own
    scores."""
    from certified_circuits.language.compiled import compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    sys.path.insert(0, str(Path(__file__).parent))
    from noise_sweep import score_prompts

    with np.load(npz, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    missing = [m for m in lang["methods"] if f"scores/{m}" not in arrays]
    if not missing:
        return
    start = time.perf_counter()
    hf, tok, _ = compile_model(lang["compiled"], seed, distractor_scale=float(lang["distractor_scale"]))
    weights = GPT2Weights.from_hf(hf)
    if list(np.asarray(weights.graph.edge_names())) != list(arrays["names"]):
        raise ConfigError(f"{npz}: its edges are not those of {lang['compiled']} seed {seed}; delete it and rerun "
                          "--stage score")
    train = generate_splits("induction", int(lang["task_seed"]), int(lang["population"]))["train"]
    batch = encode_examples(train, tok, max_len=hf.config.n_positions)
    for method in missing:
        arrays[f"scores/{method}"] = score_prompts(weights, batch, lang, method)
    tmp = npz.with_name(npz.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(npz)
    print(f"fair testbed: language seed {seed}: added {', '.join(missing)}; {time.perf_counter() - start:.0f} s",
          file=sys.stderr)


#: the record of what the language cache is built from (under ``<work>/language``), its format, and the keys of the
#: config that build it (``size`` only cuts D from the cached population, so it is not among them)
RECORD = "built_from.json"
RECORD_FORMAT = "experiments/fair_testbed/language/1"
BUILT_FROM = ("compiled", "distractor_scale", "task_seed", "held_out", "population", "ig_steps")
#: the prompts a cache made before the record existed is scored on again, per seed and method, to adopt it
SPOT_PROMPTS = 4


def method_convention(method: str, ig_steps: int) -> dict[str, Any]:
    """What a method's cached scores were computed with: its convention (points, gradients), factor and ranking."""
    import dataclasses

    from certified_circuits.language.methods import check_method

    spec = check_method(method, "edge", ig_steps, "reference")
    convention = dataclasses.asdict(spec.convention("edge", ig_steps, "reference"))
    factor = getattr(spec.factor, "__name__", type(spec.factor).__name__)
    return json.loads(json.dumps({**convention, "factor": factor, "ranking": spec.ranking,
                                  "interpolates": spec.interpolates}, default=str))


def language_built_from(lang: dict[str, Any]) -> dict[str, Any]:
    """The record of a language cache built from ``lang`` (:data:`BUILT_FROM` and each method's convention)."""
    return {"format": RECORD_FORMAT, **{k: lang[k] for k in BUILT_FROM},
            "distractor_scale": float(lang["distractor_scale"]),
            "methods": {m: method_convention(m, int(lang["ig_steps"])) for m in lang["methods"]}}


def cached_seeds(folder: Path) -> list[int]:
    """The seeds cached in a language folder (both their ``.npz`` and ``.json``)."""
    seeds = []
    for npz in folder.glob("s*.npz"):
        if npz.stem[1:].isdigit() and npz.with_suffix(".json").is_file():
            seeds.append(int(npz.stem[1:]))
    return sorted(seeds)


def check_language_work(lang: dict[str, Any], work: Path, path: Path, include_other: bool = False) -> None:
    """Refuse a language cache built from another config than ``lang`` (every stage calls it first), and record
    what a cache is built from (:func:`language_built_from`) when it is new or was made before the record existed.

    - A record that differs from this config in a key of :data:`BUILT_FROM` or in a method's convention refuses the
      folder when it holds cached seeds (they were built from the recorded values); with no seed cached, the record
      is replaced (a failed score stage never blocks the corrected one).
    - A cache without a record (made before it existed) is checked seed by seed against this config: its edges must
      be those of the compiled model, its population as long, and its first :data:`SPOT_PROMPTS` prompts' scores of
      each method the same when computed again (within 1e-4); then the record is written.

    Raises:
        ConfigError: naming the record or the seed's file, the key, both values and the fix (unless
            ``include_other``: then the difference is printed as a warning and the folder used as it is).
    """
    folder = work / "language"
    record = folder / RECORD
    wanted = language_built_from(lang)
    cached = cached_seeds(folder) if folder.is_dir() else []
    fix = (f"pass a new --work folder (or delete {folder}: the score stage rebuilds it), or --include-other-build to "
           "use it anyway")

    def refuse(message: str) -> None:
        if not include_other:
            raise ConfigError(message)
        print(f"fair testbed: warning: --include-other-build: {message}", file=sys.stderr)

    if record.is_file():
        try:
            old = json.loads(record.read_text(encoding="utf-8"))
            if not isinstance(old, dict) or old.get("format") != RECORD_FORMAT:
                raise ValueError(f"format is not {RECORD_FORMAT!r}")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{record}: cannot be read as the cache's record ({exc}); delete it and run --stage "
                              "score (it adds only what is missing)") from None
        if not cached:
            return
        for key in BUILT_FROM:
            if old.get(key) != wanted[key]:
                return refuse(f"{record}: {key}: the {len(cached)} cached seeds were built from {old.get(key)!r}, "
                              f"{path} gives language.{key} {wanted[key]!r}: another config's truths and scores; {fix}")
        for method, convention in wanted["methods"].items():
            if method in old.get("methods", {}) and old["methods"][method] != convention:
                return refuse(f"{record}: methods.{method}: the cached scores were computed with "
                              f"{old['methods'][method]}, {path} gives {convention}; {fix}")
        return
    if not cached:
        return
    from certified_circuits.language.compiled import compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    sys.path.insert(0, str(Path(__file__).parent))
    from noise_sweep import score_prompts

    start = time.perf_counter()
    train = generate_splits("induction", int(lang["task_seed"]), int(lang["population"]))["train"][:SPOT_PROMPTS]
    checked = []
    for seed in cached:
        npz = folder / f"s{seed}.npz"
        with np.load(npz, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        hf, tok, _ = compile_model(lang["compiled"], seed, distractor_scale=float(lang["distractor_scale"]))
        weights = GPT2Weights.from_hf(hf)
        made = f"made before {record.name} was kept, so it was checked against {path}"
        if list(np.asarray(weights.graph.edge_names())) != list(arrays.get("names", [])):
            return refuse(f"{npz}: names: its edges are not those of language.compiled {lang['compiled']!r} seed "
                          f"{seed} ({made}): another compiled model's cache; {fix}")
        batch = encode_examples(train, tok, max_len=hf.config.n_positions)
        for method in lang["methods"]:
            if f"scores/{method}" not in arrays:
                continue  # the score stage adds it
            cached_scores = arrays[f"scores/{method}"]
            if cached_scores.shape[0] != int(lang["population"]):
                return refuse(f"{npz}: scores/{method}: holds {cached_scores.shape[0]} prompts, language.population "
                              f"is {lang['population']} ({made}); {fix}")
            again = score_prompts(weights, batch, lang, method)
            scale = float(np.abs(cached_scores[:SPOT_PROMPTS]).max()) or 1.0
            if not np.allclose(again, cached_scores[:SPOT_PROMPTS], rtol=1e-4, atol=1e-6 * scale):
                return refuse(f"{npz}: scores/{method}: its first {SPOT_PROMPTS} prompts' scores differ from "
                              f"{lang['compiled']!r} seed {seed}'s at distractor_scale {lang['distractor_scale']}, "
                              f"task_seed {lang['task_seed']}, ig_steps {lang['ig_steps']} (largest difference "
                              f"{float(np.abs(again - cached_scores[:SPOT_PROMPTS]).max()):.3g}; {made}): another "
                              f"config's cache; {fix}")
        checked.append(seed)
    write_text(record, json.dumps(wanted, indent=1) + "\n")
    print(f"fair testbed: {folder}: no {RECORD} (made before it was kept); seeds {checked} match {path} (their edges, "
          f"population and first {SPOT_PROMPTS} prompts' scores, computed again; held_out cannot be checked so): "
          f"recorded; {time.perf_counter() - start:.0f} s", file=sys.stderr)


def stage_score(lang: dict[str, Any], work: Path) -> None:
    """Cache every seed's truth and scores (a cached seed only gets the methods it lacks); the record
    (:func:`language_built_from`) is written first, with the methods recorded before kept."""
    import torch

    torch.set_num_threads(1)
    record = work / "language" / RECORD
    wanted = language_built_from(lang)
    if record.is_file():
        old = json.loads(record.read_text(encoding="utf-8"))
        wanted["methods"] = {**old.get("methods", {}), **wanted["methods"]}
    write_text(record, json.dumps(wanted, indent=1) + "\n")
    for seed in lang["model_seeds"]:
        npz, meta = work / "language" / f"s{seed}.npz", work / "language" / f"s{seed}.json"
        if npz.is_file() and meta.is_file():
            _missing_scores(lang, int(seed), npz, meta)
            continue
        start = time.perf_counter()
        result = _language_seed(lang, int(seed))
        tmp = npz.with_name(npz.name + ".tmp.npz")
        np.savez(tmp, **result["arrays"])
        tmp.replace(npz)
        result["row"]["seconds"] = time.perf_counter() - start
        write_text(meta, json.dumps(result["row"], indent=1) + "\n")
        r = result["row"]
        print(f"fair testbed: language seed {seed}: truth {r['n_true']} of {r['n_planted']} planted, {r['n_grey']} "
              f"grey, ratio {r['ratio']}, passed {r['passed']}; {r['seconds']:.0f} s", file=sys.stderr)


def read_seed(work: Path, half: str, seed: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One cached seed: its truth row and arrays (``names``, ``truth``, ``grey``, ``groups``, ``scores/<method>``)."""
    npz, meta = work / half / f"s{seed}.npz", work / half / f"s{seed}.json"
    if not (npz.is_file() and meta.is_file()):
        raise ConfigError(f"{npz}: missing; run the score stage first (--stage score)")
    try:
        with np.load(npz, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        row = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"{npz}: cannot be read ({exc}); delete it and its .json, and run --stage score") from None
    return row, arrays


def language_seed(lang: dict[str, Any], work: Path, seed: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A cached language seed with a score of every method of ``lang`` (else refused: run the score stage)."""
    row, arrays = read_seed(work, "language", seed)
    lacking = [m for m in lang["methods"] if f"scores/{m}" not in arrays]
    if lacking:
        raise ConfigError(f"{work / 'language' / f's{seed}.npz'}: lacks the scores of {', '.join(lacking)} "
                          "(language.methods); run --stage score (it adds only the missing methods)")
    return row, arrays


def stage_conditions(lang: dict[str, Any], work: Path) -> pd.DataFrame:
    """Conditions (a)-(c) per seed and method (baseline only: no certified number)."""
    from certified_circuits.language.methods import check_method

    rows, left_out = [], []
    for seed in lang["model_seeds"]:
        truth_row, arrays = language_seed(lang, work, int(seed))
        if not truth_row["passed"]:
            print(f"fair testbed: language seed {seed}: the truth fails its check; left out", file=sys.stderr)
            left_out.append(int(seed))
            continue
        for method in lang["methods"]:
            absolute = check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"
            population = arrays[f"scores/{method}"]
            result = baseline_conditions(population[: int(lang["size"])], arrays["groups"], arrays["truth"],
                                         population, absolute=absolute, n_resamples=int(lang["resamples"]),
                                         seed=int(lang["bootstrap_seed"]), exclude=arrays["grey"])
            rows.append({"half": "language", "seed": int(seed), "concept": truth_row["concept"], "scorer": method,
                         "n_examples": int(lang["size"]), "n_population": int(population.shape[0]), **result.row()})
    table = pd.DataFrame(rows)
    write_text(work / "language_conditions.csv", table.to_csv(index=False))
    write_text(work / "language_conditions.md", conditions_markdown(table, left_out))
    return table


def conditions_markdown(table: pd.DataFrame, left_out: list[int] = ()) -> str:
    """Per scorer: each seed's (a)-(c) numbers, then the mean over seeds and how many seeds meet each; the seeds whose
    truth failed have no conditions, are in no count, and are named last."""
    out = []
    for scorer, part in (table.groupby("scorer", sort=False) if len(table) else ()):
        out += [f"#### {scorer}", "", "| seed | precision on D (resampled) / population | gap (a: >= 0.1) | true "
                "components in 20-80% (b) | Jaccard to full D (c: <= 0.85) | a / b / c |", "|---|---|---|---|---|---|"]
        seeds = part.groupby("seed", sort=True).agg(
            precision_resampled=("precision_resampled", "mean"), precision_population=("precision_population", "mean"),
            precision_gap=("precision_gap", "mean"), in_band=("in_band", "sum"), n_true=("n_true", "sum"),
            jaccard=("jaccard", "mean"), b=("b", "all"))
        for seed, r in seeds.iterrows():
            a, c = r.precision_gap >= 0.1, r.jaccard <= 0.85
            out.append(f"| {seed} | {r.precision_resampled:.3f} / {r.precision_population:.3f} | "
                       f"{r.precision_gap:+.3f} | {r.in_band} of {r.n_true} | {r.jaccard:.3f} | "
                       f"{'yes' if a else 'no'} / {'yes' if r.b else 'no'} / {'yes' if c else 'no'} |")
        n = len(seeds)
        out += [f"| mean over {n} seeds | {seeds.precision_resampled.mean():.3f} / "
                f"{seeds.precision_population.mean():.3f} | {seeds.precision_gap.mean():+.3f} | "
                f"{int((seeds.b).sum())} of {n} seeds | {seeds.jaccard.mean():.3f} | "
                f"{int((seeds.precision_gap >= 0.1).sum())} / {int(seeds.b.sum())} / "
                f"{int((seeds.jaccard <= 0.85).sum())} of {n} seeds |", ""]
    if left_out:
        out.append(f"Left out (the truth failed its check, so no condition is reported and they are in no count): "
                   f"seeds {', '.join(map(str, left_out))}.")
    elif not len(table):
        out.append("No seed: no condition is reported.")
    return "\n".join(out) + "\n"


def language_cases(lang: dict[str, Any], work: Path):
    """Every (seed, concept, scorer) of the language half whose truth passed: its scores on D and its truth."""
    from certified_circuits.language.methods import check_method

    for seed in lang["model_seeds"]:
        truth_row, arrays = language_seed(lang, work, int(seed))
        if not truth_row["passed"]:
            continue
        for method in lang["methods"]:
            yield {"seed": int(seed), "concept": truth_row["concept"], "scorer": method,
                   "scores": arrays[f"scores/{method}"][: int(lang["size"])], "groups": arrays["groups"],
                   "population": arrays[f"scores/{method}"],
                   "truth": arrays["truth"], "grey": arrays["grey"],
                   "absolute": check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"}


#: the record of experiments/vision_mechanism.py's --work folder (its config, or its record format)
MECHANISM_RECORD_FORMAT = "experiments/vision_mechanism/2"


def _examples(path: Path) -> int:
    """The examples an attribution file holds (``examples/id``), read without its scores."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            return int(handle["examples/id"].shape[0])
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read as an attribution file ({exc}); rerun experiments/"
                          "vision_mechanism.py (it scores what is missing)") from None


def passed_concepts(vision: dict[str, Any], quiet: bool = False):
    """``(seed, ground truth, its file, concept)`` for every concept of the vision half's seeds whose truth passed its
    check (read from ``vision.from``); a failed one is left out, and said on stderr unless ``quiet``.

    Raises:
        ConfigError: a seed's ground truth missing or unreadable, naming the file and the command that makes it.
    """
    from certified_circuits.analysis.recovery import read_ground_truth

    root = Path(vision["from"])
    run = f"run experiments/vision_mechanism.py experiments/vision_mechanism.yaml --work {root}"
    for seed in vision["model_seeds"]:
        truth_file = root / f"s{seed}" / "ground_truth.json"
        if not truth_file.is_file():
            raise ConfigError(f"{truth_file}: missing; {run} with model seed {seed} first")
        try:
            known = read_ground_truth(truth_file)
        except ValueError as exc:
            raise ConfigError(f"{exc}; {run}") from None
        for concept in known.concepts:
            if known.verified(concept):
                yield seed, known, truth_file, concept
            elif not quiet:
                print(f"fair testbed: vision seed {seed} {concept}: the truth fails its check; left out",
                      file=sys.stderr)


def check_vision_from(vision: dict[str, Any], path: Path) -> None:
    """Before the vision half's stage: ``vision.from`` is experiments/vision_mechanism.py's work folder (its
    ``built_from.json``), every seed's truth is there, and each class whose truth passed holds at least ``size``
    concept images in its D_c file and in its population (the first |D_c| would silently be fewer).

    Raises:
        ConfigError: naming ``vision.from`` or the file, and the fix.
    """

    root = Path(vision["from"])
    record = root / "built_from.json"
    run = f"run experiments/vision_mechanism.py experiments/vision_mechanism.yaml --work {root}"
    if not root.is_dir():
        raise ConfigError(f"{path}: vision.from: {root}: not a folder; {run} first")
    try:
        made = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: vision.from: {record}: cannot be read ({type(exc).__name__}): not a work folder of "
                          f"experiments/vision_mechanism.py; {run}") from None
    if not isinstance(made, dict) or not (made.get("format") == MECHANISM_RECORD_FORMAT or "model_seeds" in made):
        raise ConfigError(f"{path}: vision.from: {record}: not the record of experiments/vision_mechanism.py; {run}")
    size = int(vision["size"])
    for seed, _, _, concept in passed_concepts(vision, quiet=True):
        for part in ("dc", "population"):
            file = root / f"s{seed}" / f"{part}_{concept}.h5"
            if not file.is_file():
                raise ConfigError(f"{file}: missing; {run} (it scores what is missing)")
            held = _examples(file)
            if held < size:
                raise ConfigError(f"{path}: vision.size: {size} exceeds the {held} examples of {file} "
                                  f"({'D_c' if part == 'dc' else 'the population'}): the first {size} would "
                                  f"silently be {held}; lower vision.size to at most {held}, or rebuild the "
                                  "mechanism with a larger world.n_concept_per_class")


def vision_cases(vision: dict[str, Any]):
    """Every (seed, class, scorer) of the vision half whose truth passed, read from experiments/vision_mechanism.py's
    work folder (``vision.from``): ``s<seed>/ground_truth.json`` and ``s<seed>/dc_<class>.h5`` (D_c)."""
    from certified_circuits.analysis.recovery import grey_mask, truth_mask
    from certified_circuits.storage.store import read_attributions

    root = Path(vision["from"])
    for seed, known, truth_file, concept in passed_concepts(vision):
        try:
            attr = read_attributions(root / f"s{seed}" / f"dc_{concept}.h5")
            pop = read_attributions(root / f"s{seed}" / f"population_{concept}.h5")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{exc}; rerun experiments/vision_mechanism.py (it scores what is missing)") from None
        if list(pop.names) != list(attr.names):
            raise ConfigError(f"{root / f's{seed}'}: population_{concept}.h5 and dc_{concept}.h5 name other "
                              "components; rerun experiments/vision_mechanism.py into a fresh --work")
        truth = truth_mask(known, concept, attr.names, str(truth_file))
        for scorer in vision["scorers"]:
            if scorer["scorer"] not in attr.scores or scorer["scorer"] not in pop.scores:
                raise ConfigError(f"{root / f's{seed}'}: dc_{concept}.h5 or population_{concept}.h5 lacks scores "
                                  f"of {scorer['scorer']!r}; add it to experiments/vision_mechanism.yaml's "
                                  "scorers and rerun experiments/vision_mechanism.py")
            yield {"seed": int(seed), "concept": concept, "scorer": scorer["name"],
                   "scores": attr.scores[scorer["scorer"]][: int(vision["size"])], "groups": attr.groups,
                   "population": pop.scores[scorer["scorer"]],
                   "truth": truth, "grey": grey_mask(known, concept, attr.names),
                   "absolute": scorer["ranking"] == "absolute"}


def hypotheses(cases, settings: list[Setting], section: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                  pd.DataFrame]:
    """Certified circuits at the truth's size, the size-matched rows, the stability shares and H1-H3 over the
    section's model seeds (module docstring): ``(matched, stability, hypotheses)``."""
    from certified_circuits.analysis.seed_tests import seed_hypothesis_table
    from certified_circuits.analysis.size_matched import METHODS, truth_size_rows
    from certified_circuits.core.planning import PlanWarning
    from certified_circuits.core.smoothing import mask_seed

    warnings.simplefilter("ignore", PlanWarning)
    shared = ("can_certify_in", "baseline_change_share", "certified_change_share", "certified_flip_share",
              "certified_in_any", "abstain_share")  # a certificate's stability: the same on each of its rows
    matched, stability = [], []
    for case in cases:
        for setting in settings:
            labels = {"seed": case["seed"], "concept": case["concept"], "scorer": case["scorer"],
                      "setting": setting.tag}
            rows = truth_size_rows(case["scores"], case["groups"], case["truth"], setting, absolute=case["absolute"],
                                   exclude=case["grey"], mask_seed=mask_seed(setting.seed, case["concept"]),
                                   n_resamples=int(section["resamples"]),
                                   bootstrap_seed=int(section["bootstrap_seed"]))  # the workflow's stage's rows
            matched += [{**labels, **row} for row in rows if row["method"] in METHODS]
            stability.append({**labels, **{key: rows[0][key] for key in shared}})
    matched_df, stability_df = pd.DataFrame(matched), pd.DataFrame(stability)
    table = seed_hypothesis_table(matched_df, stability_df, [int(s) for s in section["model_seeds"]])
    # the old H2 set three-valued labels against two-valued memberships: withdrawn (H2a-H2c of the equal stage);
    # Holm runs within each hypothesis, so H1's and H3's p-values do not depend on it
    table = table[table["hypothesis"] != "H2"].reset_index(drop=True)
    return matched_df, stability_df, table


def stage_hypotheses(half: str, section: dict[str, Any], work: Path) -> pd.DataFrame:
    """The hypotheses stage of one half; refuses to run before its conditions were read (the pre-registration)."""
    conditions = work / "language_conditions.csv" if half == "language" else Path(section["from"]) / "conditions.csv"
    if not conditions.is_file():
        first = "--stage conditions" if half == "language" else "experiments/vision_mechanism.py"
        raise ConfigError(f"{conditions}: missing; run {first} first (the pre-registration reads the baseline's "
                          "conditions before any certified number)")
    settings = [_setting(section, s, f"{half}.settings") for s in section["settings"]]
    cases = language_cases(section, work) if half == "language" else vision_cases(section)
    matched_df, stability_df, table = hypotheses(cases, settings, section)
    for name, frame in (("matched", matched_df), ("stability", stability_df), ("hypotheses", table)):
        write_text(work / f"{half}_{name}.csv", frame.to_csv(index=False))
    write_text(work / f"{half}_hypotheses.md", hypotheses_markdown(matched_df, stability_df, table))
    return table


def hypotheses_markdown(matched: pd.DataFrame, stability: pd.DataFrame, table: pd.DataFrame) -> str:
    """The size-matched table (means over seeds of the per-seed means) and the hypotheses with Holm."""
    out = ["| scorer | method | size (mean) | precision | baseline's top-size precision | recall | baseline's "
           "recall | seeds with a non-empty circuit |", "|---|---|---|---|---|---|---|---|"]
    per_seed = matched.groupby(["scorer", "method", "seed"], sort=False)[
        ["size", "precision", "baseline_precision", "recall", "baseline_recall"]].mean()
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        n = int(part["precision"].notna().sum())
        out.append(f"| {scorer} | {method} | {part['size'].mean():.2f} | {part['precision'].mean():.3f} | "
                   f"{part['baseline_precision'].mean():.3f} | {part['recall'].mean():.3f} | "
                   f"{part['baseline_recall'].mean():.3f} | {n} of {len(part)} |")
    out += ["", *hypothesis_lines(table, "method", "baseline")]
    return "\n".join(out) + "\n"


def hypothesis_lines(table: pd.DataFrame, method: str, other: str) -> list[str]:
    """The hypothesis rows of :mod:`~certified_circuits.analysis.seed_tests`' table as Markdown lines, the method and
    its comparator's columns headed ``method`` and ``other``."""
    out = [f"| hypothesis | scorer | {method} | seeds | certified | {other} | mean difference | p (exact) | p (Holm) | "
           "smallest p possible | result |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        out.append(f"| {r.hypothesis} | {r.scorer} | {r.method} | {r.n_seeds} (dropped {r.n_dropped}) | "
                   f"{r.certified:.4f} | {r.baseline:.4f} | {r.mean_difference:+.4f} | {r.pvalue:.4g} | "
                   f"{r.pvalue_holm:.4g} | {r.min_pvalue:.4g} | {r.status} |")
    return out


#: the equal-footing table's columns: (column, header, format)
EQUAL_TABLE = (("change_share_live", "labels changed (live)", "{:.2%}"), ("change_share_all", "(all)", "{:.2%}"),
               ("flip_share_live", "in <-> out flips (live)", "{:.3%}"), ("abstain_share_live", "abstained (live)",
                                                                        "{:.1%}"),
               ("in_precision_d", "IN precision on D", "{:.3f}"), ("in_precision_mean", "IN precision, resampled",
                                                                   "{:.3f}"),
               ("detector_precision", "contested: precision", "{:.2f}"), ("detector_recall", "recall", "{:.2f}"),
               ("detector_auroc", "AUROC", "{:.3f}"))
#: the two-valued table's columns
TWO_TABLE = (("size_d", "size on D", "{:.2f}"), ("change_share_live", "memberships changed (live)", "{:.2%}"),
             ("baseline_change_share_live", "baseline's top of that size (live)", "{:.2%}"),
             ("change_share_all", "(all)", "{:.2%}"), ("baseline_change_share_all", "baseline (all)", "{:.2%}"))


def _cells(frame: pd.DataFrame, columns) -> str:
    values = []
    for column, _, fmt in columns:
        value = frame[column].mean()
        values.append("n/a" if pd.isna(value) else fmt.format(value))
    return " | ".join(values)


def equal_markdown(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    """Per scorer: the three-valued methods (means over seeds of the per-seed means over concepts and settings), the
    two-valued circuits against the baseline's top of their size, then H2a-H2c and H4 with Holm."""
    from certified_circuits.analysis.equal_footing import THREE_VALUED, TWO_VALUED

    per_seed = rows.groupby(["scorer", "method", "seed"], sort=False).mean(numeric_only=True)
    out = ["| scorer | method | " + " | ".join(h for _, h, _ in EQUAL_TABLE) + " |",
           "|---|---|" + "---|" * len(EQUAL_TABLE)]
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        if method in THREE_VALUED:
            out.append(f"| {scorer} | {method} | {_cells(part, EQUAL_TABLE)} |")
    out += ["", "| scorer | circuit | " + " | ".join(h for _, h, _ in TWO_TABLE) + " |",
            "|---|---|" + "---|" * len(TWO_TABLE)]
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        if method in TWO_VALUED:
            out.append(f"| {scorer} | {method} | {_cells(part, TWO_TABLE)} |")
    out += ["", *hypothesis_lines(table, "against", "comparator")]
    return "\n".join(out) + "\n"


def stage_equal(half: str, section: dict[str, Any], work: Path) -> pd.DataFrame:
    """The equal-footing stage of one half (module docstring); like ``hypotheses``, it refuses to run before the
    half's conditions were written (the pre-registration reads them first)."""
    from certified_circuits.analysis.equal_footing import equal_footing_hypotheses, equal_footing_rows
    from certified_circuits.core.planning import PlanWarning
    from certified_circuits.core.smoothing import mask_seed

    conditions = work / "language_conditions.csv" if half == "language" else Path(section["from"]) / "conditions.csv"
    if not conditions.is_file():
        first = "--stage conditions" if half == "language" else "experiments/vision_mechanism.py"
        raise ConfigError(f"{conditions}: missing; run {first} first (the pre-registration reads the baseline's "
                          "conditions before any certified number)")
    warnings.simplefilter("ignore", PlanWarning)
    protocol = footing_protocol(section)
    settings = [_setting(section, s, f"{half}.settings") for s in section["settings"]]
    cases = language_cases(section, work) if half == "language" else vision_cases(section)
    rows, start = [], time.perf_counter()
    for case in cases:
        for setting in settings:
            labels = {"seed": case["seed"], "concept": case["concept"], "scorer": case["scorer"],
                      "setting": setting.tag}
            found = equal_footing_rows(case["scores"], case["groups"], case["truth"], setting, case["population"],
                                       absolute=case["absolute"], exclude=case["grey"],
                                       mask_seed=mask_seed(setting.seed, case["concept"]), protocol=protocol)
            rows += [{**labels, **row} for row in found]
        print(f"fair testbed: {half} equal footing: seed {case['seed']} {case['concept']} {case['scorer']} done "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    frame = pd.DataFrame(rows)
    table = equal_footing_hypotheses(frame, [int(s) for s in section["model_seeds"]])
    write_text(work / f"{half}_equal_rows.csv", frame.to_csv(index=False))
    write_text(work / f"{half}_equal_hypotheses.csv", table.to_csv(index=False))
    write_text(work / f"{half}_equal.md", equal_markdown(frame, table))
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path, help="the testbed's config (experiments/fair_testbed.yaml)")
    p.add_argument("--work", type=Path, required=True, help="folder of the cached seeds and the tables")
    p.add_argument("--half", choices=("language", "vision"), default="language",
                   help="vision: the hypotheses of the vision mechanism (its truths and conditions are "
                        "experiments/vision_mechanism.py's)")
    p.add_argument("--stage", choices=STAGES, required=True)
    p.add_argument("--include-other-build", action="store_true",
                   help="read a language cache built from another config than this one (its record differs): a "
                        "warning instead of the refusal; never with --stage score, which adds to the cache")
    args = p.parse_args(argv)
    try:
        if not args.config.is_file():
            raise ConfigError(f"{args.config}: not found; pass experiments/fair_testbed.yaml")
        section = load_language(args.config) if args.half == "language" else load_vision(args.config)
        if args.half == "vision" and args.stage not in ("hypotheses", "equal"):
            raise ConfigError(f"--stage {args.stage} --half vision: the vision truths and conditions are "
                              "experiments/vision_mechanism.py's; run it, then --stage hypotheses or --stage equal")
        if args.include_other_build and (args.stage == "score" or args.half == "vision"):
            raise ConfigError(f"--include-other-build: only the language half's reading stages include another "
                              f"config's cache (--stage {args.stage} --half {args.half} would add to it or has none); "
                              "drop it")
        if args.work.exists() and not args.work.is_dir():
            raise ConfigError(f"{args.work}: --work: a file, not a folder; pass a folder")
        warnings.simplefilter("ignore", UserWarning)
        if args.half == "language":
            check_language_work(section, args.work, args.config, args.include_other_build)
        else:
            check_vision_from(section, args.config)
        if args.stage == "score":
            stage_score(section, args.work)
        elif args.stage == "conditions":
            print(stage_conditions(section, args.work).to_string(), file=sys.stderr)
        elif args.stage == "hypotheses":
            print(stage_hypotheses(args.half, section, args.work).to_string(), file=sys.stderr)
        else:
            print(stage_equal(args.half, section, args.work).to_string(), file=sys.stderr)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:  # a reader or an analysis refusing its input: its message, one line
        print(f"error: {args.config}: --stage {args.stage} --half {args.half}: {' '.join(str(exc).split())}; fix what "
              f"it names and rerun", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
