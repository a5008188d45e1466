"""The noise x dataset-size sweep of issue 42 (docs/noise_sweep.md): what a certificate buys as the data get noisier.

Two halves, each a section of the config (experiments/noise_sweep.yaml):

- **language**: the clean compiled induction model and the noisy one at each distractor scale, each model seed, each
  dataset size |D| (the first |D| training prompts), each method (EAP-IG, EAP) and each certification setting;
- **vision**: the planted world ResNet at each cross-class leak, each model seed, each class of ``concepts``, each
  |D_c| (the first |D_c| concept images of the class) and each scorer (signed and absolute relevance, activation).

Every cell is measured by :func:`cell_rows` at K = the verified truth's share:

- **recovery** (:func:`certified_circuits.analysis.recovery.recovery_rows`, full data): precision and recall of the
  baseline (the method on all of D), the certified-in circuit and certified in + abstain; the AUROC of each over the
  K grid (:func:`~certified_circuits.analysis.recovery.auroc_by_method`);
- **stability** (:func:`certified_circuits.analysis.stability.stability`, B bootstrap resamples of D): the baseline's
  mean Jaccard to its full-data circuit, the share of baseline memberships that change and of certified labels that
  flip in <-> out between resamples;
- **hypotheses** H1a, H2, H3 (:func:`noise_sweep_wilcoxon.hypothesis_table`, this experiment's own historical
  test, beside this file; pairs: concept x model seed x setting) per model, size and scorer. The pre-registered cell
  (``preregistered`` in the config; docs/embedded_default.md) is marked; the other cells are exploratory. The
  project's accepted test of H1-H3 is ``report-hypotheses`` (model seed as the unit, equal sizes:
  :func:`certified_circuits.analysis.seed_tests.seed_hypothesis_table`). H1b needs the workflow's held-out selection
  and is not computed here.

The truth of every model is verified first, as the ground-truth stages do: the whole circuit, then every component on
its own (:func:`certified_circuits.language.ground_truth.per_component_verification`, ``vision-ground-truth``); a
language model whose check fails is reported and left out of the tables.

Usage::

    PYTHONPATH=src .venv/bin/python experiments/noise_sweep.py experiments/noise_sweep.yaml --out results/noise_sweep \\
        [--half language|vision|both]

Writes ``<half>_rows.csv`` (one row per model, seed, size, scorer and setting; for vision per class),
``<half>_truth.csv``, ``<half>_hypotheses.csv`` and ``<half>_sweep.md`` (the docs' tables) under ``--out``, and the
vision half's world, models, ground truths and attributions under ``--out/vision`` (reused when present, so an
interrupted sweep resumes; ``--out/vision/built_from.json`` records the world, training, reference size and examples
they were built from, and a folder built from others is refused); progress goes to stderr, each stage's to its log
beside its files. Cost on 2 shared cores: about 50 s per language model and seed (10 min in all), about 6 minutes per
vision leak and seed (training 2-3 min).

Every refusal is one line on stderr, ``error: <file>: <key path>: <what is wrong>; <fix>``, exit 2, before any model
is built: the config is checked key by key by one checker (:class:`Section`: :func:`load_config`,
:func:`load_vision_config`), and a failed stage names its log and prints its last lines (:func:`run_stage`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.component_truth import effect_summary
from certified_circuits.analysis.recovery import auroc_by_method, recovery_rows
from certified_circuits.analysis.stability import stability
from certified_circuits.api import certify_scores
from certified_circuits.cli.stages import MAX_REFERENCE_SIZE, SEED_MAX  # vision-ground-truth's bound, the CLI's seeds
from certified_circuits.core.certification import certified_radius
from certified_circuits.core.planning import PlanWarning, plan
from certified_circuits.core.setting import Setting
from certified_circuits.storage.atomic import write_text

sys.path.insert(0, str(Path(__file__).parent))
from noise_sweep_wilcoxon import hypothesis_table  # noqa: E402  (the sweep's own historical test, beside this file)

ROOT = Path(__file__).resolve().parents[1]

#: the summary columns of the docs' tables, in order: (column of the rows, header)
TABLE_COLUMNS = (
    ("baseline_precision", "baseline P"), ("baseline_recall", "baseline R"),
    ("certified_in_precision", "cert. in P"), ("certified_in_recall", "cert. in R"),
    ("certified_in_abstain_recall", "in+abstain R"), ("baseline_auroc", "AUROC base"),
    ("certified_in_auroc", "AUROC cert."), ("baseline_jaccard_mean", "base Jaccard"),
    ("baseline_change_share", "base change"), ("certified_flip_share", "cert. flip"),
    ("abstain_share", "abstain"),
)  # fmt: skip


class ConfigError(ValueError):
    """A refusal of the command line, the config, a work folder or a failed stage: printed by :func:`main` as
    ``error: <file>: <key path>: <what is wrong>; <fix>`` with exit 2, no traceback."""


#: the config this script documents its keys in (the end of every refusal)
SEE = "see experiments/noise_sweep.yaml"
#: the most held-out prompts the truth is verified on, and the most training prompts |D| of a size (each is a forward
#: pass of every model; the sweep's are 100 and 200)
MAX_PROMPTS = 10_000
#: the most IG steps and training epochs a config may ask for
MAX_STEPS = 1000
#: the keys of each section, in the shipped config's order
LANGUAGE_KEYS = ("models", "sizes", "model_seeds", "task_seed", "held_out", "methods", "ig_steps", "settings",
                 "certification", "k_grid", "resamples", "bootstrap_seed", "preregistered")
#: the certification section's keys (the language half's settings give tau and p_del, the vision section its own)
CERTIFICATION_KEYS = ("alpha", "n0", "n", "correction", "seed")
VISION_KEYS = ("leaks", "model_seeds", "world", "train", "concepts", "sizes", "scorers", "certification", "k_grid",
               "reference_size", "resamples", "bootstrap_seed", "preregistered")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))


class Section:
    """One mapping of the config, read key by key with its type and range: the one checker of both halves (every
    refusal a :class:`ConfigError` ``"<file>: <key path>: <value>: <what is wrong>; <fix>"``).

    Args:
        path: the config file (for messages).
        where: the key path of the mapping (``"language"``, ``"vision.world"``).
        value: the mapping as loaded.
        keys: its keys: each required, no other accepted (a misspelt key would be silently ignored).
        optional: keys it may hold besides.
    """

    def __init__(self, path: Path, where: str, value: Any, keys: Sequence[str], optional: Sequence[str] = ()):
        self.path, self.where = path, where
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {where}: {value!r} is not a mapping; {SEE}")
        missing = [key for key in keys if key not in value]
        if missing:
            raise ConfigError(f"{path}: {where}.{missing[0]}: missing ({where} lacks {', '.join(missing)}); {SEE}")
        unknown = [key for key in value if key not in (*keys, *optional)]
        if unknown:
            raise ConfigError(f"{path}: {where}.{unknown[0]}: not a key of {where} (a misspelt key would be ignored); "
                              f"use {', '.join((*keys, *optional))}")
        self.value = value

    def fail(self, key: str, what: str, fix: str = SEE) -> ConfigError:
        """The refusal of ``key``: ``"<file>: <where>.<key>: <value>: <what>; <fix>"``."""
        shown = self.value.get(key, "missing") if isinstance(self.value, dict) else self.value
        return ConfigError(f"{self.path}: {self.where}.{key}: {shown!r}: {what}; {fix}")

    def integer(self, key: str, low: int, high: int) -> int:
        """An integer in ``[low, high]`` (a float, a bool or a string is refused, never rounded)."""
        value = self.value[key]
        if not _is_int(value) or not low <= value <= high:
            raise self.fail(key, f"must be an integer in [{low}, {high}]")
        return value

    def number(self, key: str, low: float, high: float, *, open_low: bool = False) -> float:
        """A finite number in ``[low, high]`` (``(low, high]`` with ``open_low``)."""
        value = self.value[key]
        if not _is_number(value) or not (low < value if open_low else low <= value) or value > high:
            raise self.fail(key, f"must be a number in {'(' if open_low else '['}{low:g}, {high:g}]")
        return float(value)

    def items(self, key: str, check: Any, what: str, *, increasing: bool = False, length: int | None = None,
              distinct: bool = True) -> list:
        """A non-empty list (of ``length`` items when given) whose items pass ``check`` (``what`` says what they must
        be), none given twice unless not ``distinct`` (a level, seed or size given twice would be counted as two
        cells), increasing when asked."""
        value = self.value[key]
        if (not isinstance(value, list) or not value or not all(check(v) for v in value)
                or (length is not None and len(value) != length)):
            raise self.fail(key, f"must be {f'{length} ' if length is not None else 'a non-empty list of '}{what}")
        if distinct and len(set(value)) != len(value):
            twice = next(v for i, v in enumerate(value) if v in value[:i])
            raise self.fail(key, f"gives {twice!r} twice: each value is one level of the sweep (a repeated one would "
                                 "be counted as two cells)")
        if increasing and sorted(value) != value:
            raise self.fail(key, f"{key} must be increasing (each extends the one before)")
        return value

    def section(self, key: str, keys: Sequence[str], optional: Sequence[str] = ()) -> "Section":
        """The mapping under ``key``, checked as a :class:`Section`."""
        return Section(self.path, f"{self.where}.{key}", self.value[key], keys, optional)


def certification(c: Section) -> dict[str, Any]:
    """The fixed certification values of a ``certification`` section (types and ranges; :class:`Setting` checks the
    rest)."""
    if c.value["correction"] not in ("bonferroni", "holm"):
        raise c.fail("correction", "must be bonferroni or holm")
    return {"n0": c.integer("n0", 1, 10**7), "n": c.integer("n", 1, 10**8), "seed": c.integer("seed", 0, SEED_MAX),
            "alpha": c.number("alpha", 0, 1, open_low=True), "correction": c.value["correction"]}


def _setting(s: Section, fixed: dict[str, Any]) -> Setting:
    """One setting: ``tau`` and ``p_del`` of ``s`` with the fixed certification values, refused by key."""
    tau, p_del = s.number("tau", 0, 1), s.number("p_del", 0, 1)
    try:
        return Setting(p_del=p_del, tau=tau, **fixed)
    except ValueError as exc:
        raise ConfigError(f"{s.path}: {s.where}: {exc}; {SEE}") from None


def read_config(path: Path) -> dict[str, Any]:
    """The config file as a mapping (``language`` and ``vision`` sections; no other key).

    Raises:
        ConfigError: the file is missing, not UTF-8 YAML, not a mapping, or holds another top-level key.
    """
    if not path.is_file():
        raise ConfigError(f"{path}: not found; pass experiments/noise_sweep.yaml or a copy of it")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML ({' '.join(str(exc).split())}); {SEE}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: {type(config).__name__} at the top: the config is a mapping of language and "
                          f"vision; {SEE}")
    unknown = [key for key in config if key not in ("language", "vision")]
    if unknown:
        raise ConfigError(f"{path}: {unknown[0]}: not a section (language, vision); {SEE}")
    return config


def load_config(path: Path) -> dict[str, Any]:
    """The sweep's ``language`` section, every key checked (:class:`Section`) before any model is compiled.

    Returns:
        A copy of the section with its settings as :class:`Setting` objects under ``"_settings"``.

    Raises:
        ConfigError: naming the file and the key path: a missing or unknown key; a model that is not a compiled
            model, a ``distractor_scale`` on the clean model, a model name or noise level given twice; sizes, seeds,
            methods or settings given twice; sizes not increasing or outside [2, 10000]; ``held_out`` outside [10,
            10000]; a method that is not decomposed; a bad setting; a K grid outside (0, 1]; resamples outside [2,
            1000]; a pre-registered cell that is not in the sweep.
    """
    from certified_circuits.analysis.stability import MAX_RESAMPLES
    from certified_circuits.language.graph import COMPILED_SHAPES
    from certified_circuits.language.methods import check_method

    lang = Section(path, "language", read_config(path).get("language"), LANGUAGE_KEYS)
    raw = lang.value["models"]
    if not isinstance(raw, list) or not raw:
        raise lang.fail("models", "must be a non-empty list of {name, compiled[, distractor_scale]}")
    levels: dict[tuple, str] = {}
    for i, item in enumerate(raw):
        model = Section(path, f"language.models[{i}]", item, ("name", "compiled"), ("distractor_scale",))
        if not isinstance(item["name"], str) or not item["name"].strip():
            raise model.fail("name", "must be a non-empty name (the tables' model column)")
        if item["compiled"] not in COMPILED_SHAPES:
            raise model.fail("compiled", f"is not a compiled model; choose one of {', '.join(COMPILED_SHAPES)}")
        if "distractor_scale" in item and item["compiled"] != "induction_noisy":
            raise model.fail("distractor_scale", f"only the noisy model has distractors; remove it from "
                                                 f"{item['compiled']!r} (it would be ignored)")
        scale = model.number("distractor_scale", 0, np.inf) if "distractor_scale" in item else None
        level = (item["compiled"], scale if scale is not None else (1.0 if item["compiled"] == "induction_noisy"
                                                                    else None))
        if item["name"] in levels.values() or level in levels:
            raise model.fail("name", "repeats a model of language.models (name or compiled model and scale): it "
                                     "would be counted as two")
        levels[level] = item["name"]
    sizes = lang.items("sizes", lambda v: _is_int(v) and 2 <= v <= MAX_PROMPTS,
                       f"integers in [2, {MAX_PROMPTS}], increasing (bootstrap resamples need 2)", increasing=True)
    lang.items("model_seeds", lambda v: _is_int(v) and 0 <= v <= SEED_MAX, f"distinct integers in [0, {SEED_MAX}]")
    lang.integer("task_seed", 0, SEED_MAX)
    lang.integer("held_out", 10, MAX_PROMPTS)
    lang.integer("ig_steps", 1, MAX_STEPS)
    for method in lang.items("methods", lambda v: isinstance(v, str), "distinct method names"):
        try:
            decomposed = check_method(method, "edge", lang.value["ig_steps"], "reference").decomposed
        except ValueError as exc:
            raise lang.fail("methods", str(exc)) from None
        if not decomposed:
            raise lang.fail("methods", f"{method} is not computed by the decomposed forward", "use EAP-IG-inputs or EAP")
    fixed = certification(lang.section("certification", CERTIFICATION_KEYS))
    raw = lang.value["settings"]
    if not isinstance(raw, list) or not raw:
        raise lang.fail("settings", "must be a non-empty list of {tau, p_del}")
    settings = [_setting(Section(path, f"language.settings[{i}]", s, ("tau", "p_del")), fixed) for i, s in
                enumerate(raw)]
    if len({s.tag for s in settings}) != len(settings):
        raise lang.fail("settings", "gives a setting twice: it would be counted as two pairs")

    lang.items("k_grid", lambda v: _is_number(v) and 0 < v <= 1, "K in (0, 1], increasing", increasing=True)
    lang.integer("resamples", 2, MAX_RESAMPLES)
    lang.integer("bootstrap_seed", 0, SEED_MAX)
    cell = lang.section("preregistered", ("model", "size"))
    if cell.value["model"] not in levels.values():
        raise cell.fail("model", f"is not a model of the sweep ({', '.join(levels.values())}): the pre-registered "
                                 "cell would mark nothing")
    if cell.value["size"] not in sizes or not _is_int(cell.value["size"]):
        raise cell.fail("size", f"is not a size of the sweep ({sizes}): the pre-registered cell would mark nothing")
    return {**lang.value, "_settings": settings}



def load_vision_config(section: Any, path: Path) -> dict[str, Any]:
    """The sweep's ``vision`` section, every key checked (:class:`Section`) before the world is built or any model
    trained.

    Returns:
        A copy of the section with its certification setting under ``"_setting"``.

    Raises:
        ConfigError: naming the file and the key path: a missing or unknown key; a world or planted model its own
            checks refuse (:class:`~certified_circuits.vision.data.world.WorldConfig`,
            :class:`~certified_circuits.vision.networks.planted.PlantedSpec`); leaks outside [0, MAX_LEAK], seeds,
            classes, sizes or scorers given twice; a class the world does not have; sizes not increasing or above
            the world's concept images per class; an unknown scorer or ranking; a bad setting; a reference size
            outside [1, 5000]; a pre-registered cell that is not in the sweep.
    """
    from certified_circuits.analysis.stability import MAX_RESAMPLES
    from certified_circuits.vision.data.world import WorldConfig
    from certified_circuits.vision.networks.planted import MAX_LEAK, PlantedSpec

    vision = Section(path, "vision", section, VISION_KEYS)
    w = vision.section("world", ("seed", "n_classes", "n_concept_per_class"))
    given = {"seed": w.integer("seed", 0, SEED_MAX), "n_classes": w.integer("n_classes", 2, 1000),
             "n_concept_per_class": w.integer("n_concept_per_class", 2, 5000)}
    try:
        world = WorldConfig(**given)
        world.validate()
    except ValueError as exc:
        raise ConfigError(f"{path}: vision.world: {exc}; {SEE}") from None
    leaks = vision.items("leaks", lambda v: _is_number(v) and 0 <= v <= MAX_LEAK,
                         f"leaks in [0, {MAX_LEAK}] (vision.leaks must be in [0, {MAX_LEAK}]: the planted model's "
                         "cross-class bound)")
    t = vision.section("train", ("epochs", "lr", "planted_own", "planted_shared"))
    t.integer("epochs", 1, MAX_STEPS)
    t.number("lr", 0, 10, open_low=True)
    own = t.items("planted_own", lambda v: _is_int(v) and v >= 1, "integers >= 1 (layer1..layer4)", length=4,
                  distinct=False)
    shared = t.items("planted_shared", lambda v: _is_int(v) and v >= 0, "integers >= 0 (layer1..layer4)", length=4,
                     distinct=False)
    try:
        PlantedSpec(n_classes=world.n_classes, own=tuple(own), shared=tuple(shared), leak=max(leaks))
    except ValueError as exc:
        raise ConfigError(f"{path}: vision.train: {exc}; {SEE}") from None
    vision.items("model_seeds", lambda v: _is_int(v) and 0 <= v <= SEED_MAX, f"distinct integers in [0, {SEED_MAX}]")
    classes = world.class_names()
    vision.items("concepts", lambda v: isinstance(v, str) and v in classes,
                 f"distinct classes of the world ({', '.join(classes)})")
    n_images = world.n_concept_per_class
    sizes = vision.items("sizes", lambda v: _is_int(v) and 2 <= v <= n_images,
                         f"integers, increasing, >= 2 and at most world.n_concept_per_class ({n_images}) (the first "
                         "|D_c| concept images of a class)", increasing=True)
    raw = vision.value["scorers"]
    if not isinstance(raw, list) or not raw:
        raise vision.fail("scorers", "must be a non-empty list of {name, scorer, ranking}")
    seen: set = set()
    for i, item in enumerate(raw):
        s = Section(path, f"vision.scorers[{i}]", item, ("name", "scorer", "ranking"))
        if s.value["scorer"] not in ("relevance", "activation"):
            raise s.fail("scorer", "is not a scorer; use scorer relevance or activation")
        if s.value["ranking"] not in ("signed", "absolute"):
            raise s.fail("ranking", "is not a ranking; use ranking signed or absolute")
        if not isinstance(s.value["name"], str) or {s.value["name"], (s.value["scorer"], s.value["ranking"])} & seen:
            raise s.fail("name", "repeats a scorer of vision.scorers (its name, or its scorer and ranking): it would "
                                 "be counted as two")
        seen |= {s.value["name"], (s.value["scorer"], s.value["ranking"])}
    cert = vision.section("certification", ("p_del", "tau", *CERTIFICATION_KEYS))
    setting = _setting(cert, certification(cert))
    vision.items("k_grid", lambda v: _is_number(v) and 0 < v <= 1, "K in (0, 1], increasing", increasing=True)
    vision.integer("reference_size", 1, MAX_REFERENCE_SIZE)
    vision.integer("resamples", 2, MAX_RESAMPLES)
    vision.integer("bootstrap_seed", 0, SEED_MAX)
    cell = vision.section("preregistered", ("leak", "size"))
    if not _is_number(cell.value["leak"]) or float(cell.value["leak"]) not in set(map(float, leaks)):
        raise cell.fail("leak", f"is not a leak of the sweep ({leaks}): the pre-registered cell would mark nothing")
    if not _is_int(cell.value["size"]) or cell.value["size"] not in sizes:
        raise cell.fail("size", f"is not a size of the sweep ({sizes}): the pre-registered cell would mark nothing")
    return {**vision.value, "_setting": setting}


def compiled_truth(compiled: str, seed: int, lang: dict[str, Any], distractor_scale: float = 1.0) -> tuple:
    """Compile one model, find its heads by their attention scores and verify its truth on ``lang``'s held-out
    prompts (:func:`certified_circuits.language.ground_truth.verified_truth`: whole circuit, every edge, and the
    whole-circuit checks on the kept edges).

    Returns:
        ``(hf_model, tokenizer, weights, planted_edges, kept_edges, verification)`` (``verification["per_component"]``
        the per-edge block).
    """
    from certified_circuits.language import ground_truth as gt
    from certified_circuits.language.compiled import compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import INDUCTION_SYMBOLS, generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    hf, tok, _ = compile_model(compiled, seed, distractor_scale=distractor_scale)
    weights = GPT2Weights.from_hf(hf)
    diag = gt.diagnose(hf, [tok.answer_id(x) for x in INDUCTION_SYMBOLS], seed=0)
    gt.check_heads(diag)
    planted = gt.circuit_edges(diag.previous_token_heads, diag.induction_heads)
    held_out = generate_splits("induction", int(lang["task_seed"]), int(lang["held_out"]))["id_test"]
    batch = encode_examples(held_out, tok, max_len=hf.config.n_positions)
    kept, verification = gt.verified_truth(weights, batch, planted)
    return hf, tok, weights, planted, kept, verification


def verified_model(model: dict[str, Any], seed: int, lang: dict[str, Any]) -> tuple[Any, list[str], dict, Any]:
    """Compile one model and verify its truth on the held-out prompts.

    Returns:
        ``(weights, truth_edges, truth_row, train)``: the GPT-2 weights, the kept true edges, a row describing the
        check (whole-circuit recovery, the per-component ``ratio``, the effects' min / median / max), and the first
        ``max(sizes)`` training prompts encoded for this model.
    """
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    hf, tok, weights, edges, kept, verification = compiled_truth(model["compiled"], seed, lang,
                                                                 float(model.get("distractor_scale", 1.0)))
    block = verification["per_component"]
    effects = effect_summary(block["effects"], kept)
    row = {"model": model["name"], "seed": seed, "n_edges": len(weights.graph.edge_names()),
           "n_planted": len(edges), "n_truth": len(kept), "whole_passed": bool(verification["passed"]),
           "per_component_passed": bool(block["passed"]), "recovery": verification["recovery"],
           "ratio": block["ratio"], **{f"truth_{k}": v for k, v in effects["truth"].items()},
           **{f"outside_{k}": v for k, v in effects["non_truth"].items()}}
    train = generate_splits("induction", int(lang["task_seed"]), max(lang["sizes"]))["train"]
    return weights, kept, row, encode_examples(train, tok, max_len=hf.config.n_positions)


def score_prompts(weights: Any, batch: Any, lang: dict[str, Any], method: str) -> np.ndarray:
    """Per-prompt edge scores ``[len(batch), E]`` (``eap_ig_scores`` with the method's points and factor)."""
    from certified_circuits.language.eap_ig import eap_ig_scores
    from certified_circuits.language.methods import check_method

    spec = check_method(method, "edge", int(lang["ig_steps"]), "reference")
    conv = spec.convention("edge", int(lang["ig_steps"]), "reference")
    return eap_ig_scores(weights, batch, ig_steps=int(lang["ig_steps"]), points=list(conv.points), progress=False,
                         factor=spec.factor)


def cell_rows(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, absolute: bool, setting: Setting,
              section: dict[str, Any], labels: dict[str, Any]) -> tuple[dict[str, Any], list[dict], dict[str, Any]]:
    """One (model, seed, size, scorer, setting) cell, at K = the truth's share ``|T| / U`` (added to the K grid; a
    top-K per group then keeps about ``|T|`` components in all, exactly ``|T|`` with one group).

    Args:
        scores: ``[|D|, U]`` per-example scores of this size.
        groups: int ``[U]`` top-K groups (one for edges, the layer for channels).
        truth: bool ``[U]``, the verified truth.
        absolute: rank by ``|mean|`` (EAP-IG's convention; the vision sweep's absolute relevance).
        setting: the certification setting.
        section: the config section (``k_grid``, ``resamples``, ``bootstrap_seed``).
        labels: the cell's labels (model, seed, size, scorer, setting).

    Returns:
        ``(row, recovery, stability_row)``: the summary row at K = the truth's size, the recovery rows at that K
        (every method, for the hypotheses), and the stability row.
    """
    n, n_edges = scores.shape
    k_truth = truth.sum() / truth.size
    k_grid = np.unique(np.append(np.asarray(section["k_grid"], dtype=float), k_truth))
    p = plan(n, n_edges, setting)
    cert = certify_scores(scores, groups, k_grid, setting, absolute=absolute, allow_vacuous=True)
    common = {**labels, "n_true": int(truth.sum()), "n_components": n_edges}
    recovery = [r for r in recovery_rows(cert, cert, truth, common) if np.isclose(r["k_target"], k_truth)]
    row: dict[str, Any] = {**labels, "radius": certified_radius(setting.tau, setting.p_del),
                           "can_certify_in": bool(p.can_certify_in), "n_true": int(truth.sum()), "k_truth": k_truth}
    for r in recovery:
        row[f"{r['method']}_precision"] = r["precision"]
        row[f"{r['method']}_recall"] = r["recall"]
        row[f"{r['method']}_size"] = r["size"]
    row.update({f"{m}_auroc": v for m, v in auroc_by_method(cert, cert, truth).items()})
    st = stability(scores, groups, [k_truth], setting, int(section["resamples"]), int(section["bootstrap_seed"]),
                   absolute=absolute, truth=truth, allow_vacuous=True)
    st_row = st.rows(common)[0]
    for key in ("baseline_jaccard_mean", "baseline_change_share", "certified_flip_share", "certified_change_share",
                "abstain_share", "baseline_precision_mean", "certified_in_precision_mean"):
        row[key] = st_row[key]
    return row, recovery, st_row


def run_language(lang: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every cell of the language sweep (module docstring).

    Returns:
        ``(rows, truth, hypotheses)`` as written to ``language_rows.csv``, ``language_truth.csv`` and
        ``language_hypotheses.csv``.
    """
    import torch

    from certified_circuits.language.methods import check_method

    torch.set_num_threads(1)
    # a setting that cannot certify IN at a size is in the tables ("can certify IN": no), not a warning per cell
    warnings.simplefilter("ignore", PlanWarning)
    settings = lang["_settings"]
    rows, truths, recoveries, stabilities = [], [], [], []
    for model in lang["models"]:
        for seed in lang["model_seeds"]:
            start = time.perf_counter()
            weights, kept, truth_row, train = verified_model(model, int(seed), lang)
            truths.append(truth_row)
            if not (truth_row["whole_passed"] and truth_row["per_component_passed"]):
                print(f"noise sweep: {model['name']} seed {seed}: the truth fails its check ({truth_row}); left out",
                      file=sys.stderr)
                continue
            truth = np.isin(weights.graph.edge_names(), kept)
            groups = np.zeros(truth.size, dtype=np.int64)  # one global top-K over edges
            for method in lang["methods"]:
                absolute = check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"
                all_scores = score_prompts(weights, train, lang, method)
                for size in lang["sizes"]:
                    for setting in settings:
                        labels = {"experiment": model["name"], "model": model["name"], "seed": int(seed),
                                  "n_examples": int(size), "scorer": method, "concept": "induction",
                                  "setting": setting.tag}  # fmt: skip
                        row, recovery, st_row = cell_rows(all_scores[:size], groups, truth, absolute, setting, lang,
                                                          labels)
                        rows.append(row)
                        recoveries.extend(recovery)
                        stabilities.append(st_row)
            print(f"noise sweep: {model['name']} seed {seed}: truth {len(kept)} edges, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return pd.DataFrame(rows), pd.DataFrame(truths), cell_hypotheses(recoveries, stabilities, lang["preregistered"])


def cell_hypotheses(recoveries: list[dict], stabilities: list[dict], preregistered: dict[str, Any]) -> pd.DataFrame:
    """H1a, H2, H3 per (model, |D|) cell and scorer: pairs over concept x model seed x setting
    (:func:`noise_sweep_wilcoxon.hypothesis_table`); ``preregistered`` marks the cell they were
    written down for."""
    recovery_df, stability_df = pd.DataFrame(recoveries), pd.DataFrame(stabilities)
    hypotheses = []
    for (model, size), part in recovery_df.groupby(["model", "n_examples"], sort=False):
        st = stability_df[(stability_df["model"] == model) & (stability_df["n_examples"] == size)]
        # every concept is read at its own truth's share (cell_rows keeps those rows only); one shared K label lets
        # hypothesis_table pair them, and the table's k column is then NaN ("each concept's own")
        table = hypothesis_table(part.assign(k_target=1.0), st.assign(k_target=1.0)).assign(k=float("nan"))
        first = model == preregistered["model"] and int(size) == int(preregistered["size"])
        hypotheses.append(table.assign(model=model, n_examples=int(size), preregistered=first))
    return pd.concat(hypotheses, ignore_index=True)


#: lines of a failed stage's log shown in its refusal
LOG_TAIL = 12


def run_stage(args: Sequence[str], log: Path) -> None:
    """One ``certified-circuits`` command (an argument list, no shell), its stderr kept in ``log``.

    Raises:
        ConfigError: the stage failed, in one line: ``"<log>: certified-circuits <stage> failed (exit N): <the last
            line it wrote>; ..."`` (the stage's own message, which names its input; the exception a traceback ends
            with, never the traceback).
    """
    with log.open("w") as err:
        done = subprocess.run([str(ROOT / "bin" / "certified-circuits"), *args], stderr=err, check=False)
    if done.returncode:
        raise ConfigError(f"{log}: certified-circuits {args[0]} failed (exit {done.returncode}): {last_said(log)}; fix "
                          f"what it names and rerun the same command (finished files are reused; the log holds its "
                          f"last {LOG_TAIL} lines and more)")


def last_said(log: Path) -> str:
    """The last line of a stage's log that says something: its own ``error:`` line, or the exception a traceback
    ends with (never the traceback, and not a progress bar)."""
    text = log.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    said = [line.strip() for line in text.splitlines()
            if line.strip() and "it/s]" not in line and "s/it]" not in line]
    return said[-1] if said else "(no output)"


#: the record of what a work folder's files were built from (:func:`work_record`)
RECORD = "built_from.json"


def work_record(folder: Path, built_from: dict[str, Any], option: str,
                products: dict[str, tuple[str, ...]] | None = None) -> None:
    """Record what a folder's reusable files (world, models, truths, attributions) are built from, or refuse a folder
    built from anything else: a reused file of another checkpoint or config would be read as this run's.

    Args:
        folder: the work folder.
        built_from: JSON values that determine its files (a checkpoint's path and sha256, the config's keys).
        option: the option that names the folder, for the fix (``"--work"``).
        products: optional ``{key: file patterns}``: the files each key builds. A key that differs refuses the
            folder only where such a file exists; otherwise nothing was built from it (a stage that failed writes no
            file) and the record is rewritten, so a failed command never blocks the corrected one. Without it, any
            difference refuses.

    Raises:
        ConfigError: ``"<folder>/built_from.json: <key>: the files here were built from X, this run gives Y; ..."``,
            an unreadable record, or a folder that holds files but no record (made before records were kept).
    """
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.documents import read_json_document

    path = folder / RECORD
    wanted = json.loads(json.dumps(built_from))
    fix = f"pass another {option} folder, or delete {folder} to rebuild it"
    if path.is_file():
        try:
            old = read_json_document(path, fix, what="work-folder record")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        changed = False
        for key, value in wanted.items():
            if old.get(key) == value:
                continue
            built = None if products is None or key not in products else sorted(
                f for pattern in products[key] for f in folder.glob(pattern))
            if built is None or built:
                first = f" ({len(built)} of them: {built[0].name}, ...)" if built else ""
                raise ConfigError(f"{path}: {key}: the files here{first} were built from {old.get(key)!r}, this run "
                                  f"gives {value!r}: they would be reused as this run's; {fix}")
            changed = True
        if changed:  # nothing was built from the keys that changed: the record follows this run
            write_json(path, {**old, **wanted})
        return
    if folder.is_dir() and any(folder.iterdir()):
        raise ConfigError(f"{path}: missing, but {folder} holds files (made before records were kept): what they were "
                          f"built from is unknown; {fix}")
    folder.mkdir(parents=True, exist_ok=True)
    write_json(path, wanted)


def vision_built_from(section: dict[str, Any]) -> dict[str, Any]:
    """What the vision half's reused files are built from: the world, the training, the truth's reference size and
    the examples each attribution file holds (leaks, seeds and classes name their own files)."""
    return {"world": section["world"], "train": section["train"], "reference_size": section["reference_size"],
            "attribution_examples": max(section["sizes"])}


#: the files each key of :func:`vision_built_from` builds (every later file depends on the world's)
VISION_PRODUCTS = {"world": ("world/world.json", "*.pt", "*_truth.json", "*.h5"), "train": ("*.pt", "*_truth.json",
                                                                                             "*.h5"),
                   "reference_size": ("*_truth.json",), "attribution_examples": ("*.h5",)}


def run_vision(section: dict[str, Any], work: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every cell of the vision sweep: per leak and model seed, train the planted world ResNet (``vision-train``),
    verify its truth per channel (``vision-ground-truth``), score the first ``max(sizes)`` concept images of each
    class (``vision-attribute``), then :func:`cell_rows` per class, size and scorer. Files are reused when present
    (an interrupted sweep resumes).

    Returns:
        ``(rows, truth, hypotheses)`` as written to ``vision_rows.csv``, ``vision_truth.csv``, ``vision_hypotheses.csv``.
    """
    from certified_circuits.analysis.recovery import read_ground_truth, truth_mask
    from certified_circuits.storage.store import read_attributions

    w, t = section["world"], section["train"]
    work_record(work, vision_built_from(section), "--out", VISION_PRODUCTS)
    # a setting that cannot certify IN at a size is in the tables ("can certify IN": no), not a warning per cell (as
    # the language half)
    warnings.simplefilter("ignore", PlanWarning)
    world = work / "world"
    if not (world / "world.json").is_file():
        run_stage(["vision-world", "--out", str(world), "--seed", str(w["seed"]), "--n-classes", str(w["n_classes"]),
             "--n-concept-per-class", str(w["n_concept_per_class"])], work / "world.log")
    setting = section["_setting"]
    rows, truths, recoveries, stabilities = [], [], [], []
    for leak in section["leaks"]:
        for seed in section["model_seeds"]:
            start = time.perf_counter()
            name = f"leak{float(leak):g}_s{seed}"
            model, gt_file = work / f"{name}.pt", work / f"{name}_truth.json"
            if not model.is_file():
                run_stage(["vision-train", "--world", str(world), "--seed", str(seed), "--epochs", str(t["epochs"]),
                     "--lr", str(t["lr"]), "--planted-own", *map(str, t["planted_own"]), "--planted-shared",
                     *map(str, t["planted_shared"]), *(["--planted-leak", str(leak)] if float(leak) else []),
                           "--threads", "1", "--out-model", str(model), "--out-metrics",
                           str(work / f"{name}_metrics.json")], work / f"{name}_train.log")
            if not gt_file.is_file():
                run_stage(["vision-ground-truth", "--checkpoint", str(model), "--world", str(world), "--out",
                           str(gt_file), "--reference-size", str(section["reference_size"]), "--seed", "0", "--threads",
                           "1"], work / f"{name}_truth.log")
            truth_file = _read(read_ground_truth, gt_file)
            label = f"leak {float(leak):g}"
            for concept in section["concepts"]:
                attributions = work / f"{name}_{concept}.h5"
                if not attributions.is_file():
                    run_stage(["vision-attribute", "--model", "world", "--checkpoint", str(model), "--threads", "1",
                               "--data", str(world / "concept.npz"), "--n-examples", str(max(section["sizes"])),
                               "--counterfactual", str(world / "counterfactual.npz"), "--concept", concept,
                               "--split", "concept", "--experiment", "world", "--out", str(attributions)],
                              work / f"{name}_{concept}_attribute.log")
                attr = _read(read_attributions, attributions)
                check_examples(attr, max(section["sizes"]), attributions)
                try:
                    truth = truth_mask(truth_file, concept, attr.names, str(attributions))
                except ValueError as exc:
                    raise ConfigError(f"{exc}; delete {attributions} and {gt_file} (they are rebuilt)") from None
                checks = truth_file.verification.get(concept, {})
                block = checks.get("per_component") or {}
                effects = effect_summary(block.get("effects", {}), list(truth_file.concepts[concept]))
                failed = failed_checks(truth_file, concept)
                truths.append({"model": label, "seed": int(seed), "concept": concept, "n_components": truth.size,
                               "n_truth": int(truth.sum()), "ratio": block.get("ratio", float("inf")),
                               "passed": truth_file.verified(concept), "failed_checks": " ".join(failed),
                               **{f"truth_{k}": v for k, v in effects["truth"].items()},
                               **{f"outside_{k}": v for k, v in effects["non_truth"].items()}})
                if not truth_file.verified(concept):  # nothing is scored against an unverified truth
                    print(f"noise sweep: vision {label} seed {seed} {concept}: the truth fails {failed}; left out",
                          file=sys.stderr)
                    continue
                for scorer in section["scorers"]:
                    for size in section["sizes"]:
                        labels = {"experiment": label, "model": label, "seed": int(seed), "n_examples": int(size),
                                  "scorer": scorer["name"], "concept": concept, "setting": setting.tag}
                        row, recovery, st_row = cell_rows(attr.scores[scorer["scorer"]][:size], attr.groups, truth,
                                                          scorer["ranking"] == "absolute", setting, section, labels)
                        rows.append(row)
                        recoveries.extend(recovery)
                        stabilities.append(st_row)
            print(f"noise sweep: vision {label} seed {seed}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    hypotheses = cell_hypotheses(recoveries, stabilities, {"model": f"leak {float(section['preregistered']['leak']):g}",
                                                           "size": section["preregistered"]["size"]})
    return pd.DataFrame(rows), pd.DataFrame(truths), hypotheses


def _read(reader: Any, path: Path) -> Any:
    """A reused file read by its reader; a file it refuses (truncated, another format) is one refusal naming it."""
    try:
        return reader(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: cannot be reused ({' '.join(str(exc).split())}); delete it (the stage that "
                          "writes it runs again)") from None


def failed_checks(truth: Any, concept: str) -> list[str]:
    """The checks a concept's truth failed (its ``verification`` block's ``check.<name>: false``), sorted."""
    checks = truth.verification.get(concept, {})
    return sorted(k.removeprefix("check.") for k, v in checks.items() if k.startswith("check.") and not v)


def check_examples(attr: Any, wanted: int, path: Path) -> None:
    """Refuse an attribution file that holds another number of examples than the run asked for (the world's class
    has fewer concept images, or the file is another run's): its first |D| rows would silently be fewer."""
    held = next(iter(attr.scores.values())).shape[0]
    if held != wanted:
        raise ConfigError(f"{path}: examples: holds {held} examples, the run asked for {wanted}: the world's class has "
                          f"fewer concept images, or the file is another run's; delete it (and rebuild the world with "
                          f"--n-concept-per-class >= {wanted} if needed)")


def language_truth_lines(truth: pd.DataFrame) -> list[str]:
    """The language truths' table: one row per model and seed."""
    out = ["### The truths (held-out prompts)", "",
           "| model | seed | edges | truth kept / planted | whole circuit recovery | weakest true effect / epsilon "
           "| truth effects min / median / max | non-truth effects median / max |", "|---|---|---|---|---|---|---|---|"]
    for r in truth.itertuples():
        out.append(f"| {r.model} | {r.seed} | {r.n_edges} | {r.n_truth} / {r.n_planted} | {r.recovery:.2f} "
                   f"| {_ratio(r.ratio)} | {r.truth_min:.3f} / {r.truth_median:.3f} / {r.truth_max:.3f} "
                   f"| {r.outside_median:.4f} / {r.outside_max:.4f} |")
    return out


def _ratio(value: float) -> str:
    """The weakest true effect over epsilon; a clean model's epsilon is 0 (its file writes the ratio as null)."""
    return "inf (epsilon 0)" if not np.isfinite(value) else f"{value:.2f}"


def vision_truth_lines(truth: pd.DataFrame) -> list[str]:
    """The vision truths' table: one row per leak and seed, over its classes."""
    left_out: list[str] = []
    out = ["### The truths (id_test images, one channel mean-ablated at a time; verified classes only)", "",
           "| leak | seed | true channels per class: mean [min, max] of U | weakest true effect / epsilon (min over "
           "classes) | truth effects min / median / max | non-truth effects median / max |", "|---|---|---|---|---|---|"]
    for (model, seed), g in truth.groupby(["model", "seed"], sort=False):
        failing = g[~g["passed"].astype(bool)]
        if len(failing):
            left_out.extend(f"{model}, seed {seed}, {r.concept} ({r.failed_checks})" for r in failing.itertuples())
        g = g[g["passed"].astype(bool)]
        out.append(f"| {model} | {seed} | {g['n_truth'].mean():.1f} [{g['n_truth'].min()}, {g['n_truth'].max()}] of "
                   f"{g['n_components'].iloc[0]} | {_ratio(g['ratio'].min())} | {g['truth_min'].min():.3f} / "
                   f"{g['truth_median'].median():.3f} / {g['truth_max'].max():.3f} | {g['outside_median'].median():.4f} "
                   f"/ {g['outside_max'].max():.4f} |")
    if left_out:
        out += ["", f"Left out (the truth failed a check, so nothing is scored against it): {'; '.join(left_out)}."]
    return out


def markdown_tables(rows: pd.DataFrame, truth_lines: list[str], hypotheses: pd.DataFrame,
                    over: str = "model seeds") -> str:
    """The docs' tables: the truths; per scorer and setting, the mean over model seeds (and classes) of every
    :data:`TABLE_COLUMNS` value per model and size; the hypotheses."""
    out = list(truth_lines)
    columns = [c for c, _ in TABLE_COLUMNS]
    for (method, setting), part in rows.groupby(["scorer", "setting"], sort=False):
        radius = int(part["radius"].iloc[0])
        out += ["", f"### {method}, setting {setting} (radius {radius}): mean over {over} at K = the truth's size",
                "", "| model | \\|D\\| | can certify IN | " + " | ".join(h for _, h in TABLE_COLUMNS) + " |",
                "|---|---|---|" + "---|" * len(TABLE_COLUMNS)]
        means = part.groupby(["model", "n_examples"], sort=False)[columns].mean()
        ok = part.groupby(["model", "n_examples"], sort=False)["can_certify_in"].all()
        for (model, size), values in means.iterrows():
            cells = " | ".join("-" if pd.isna(v) else f"{v:.3f}" for v in values)
            out.append(f"| {model} | {size} | {'yes' if ok[(model, size)] else 'no'} | {cells} |")
    out += ["", "### Hypotheses (one-sided paired Wilcoxon; alpha 0.05; **bold**: the "
            "pre-registered cell, the rest exploratory; pairs: concept x model seed x setting)", "",
            "| model | \\|D\\| | method | hypothesis | pairs | certified | baseline | mean difference | p | holds |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in hypotheses.itertuples():
        cell = f"**{r.model}**" if r.preregistered else r.model
        out.append(f"| {cell} | {r.n_examples} | {r.scorer} | {r.hypothesis} | {r.n_pairs} | {r.certified:.3f} "
                   f"| {r.baseline:.3f} | {r.mean_difference:+.3f} | {r.pvalue:.3g} | {'yes' if r.holds else 'no'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The sweep's command line. Every refusal (the config, ``--out``, a work folder of another config, a failed
    stage) is one ``error: <file>: <key path>: <what is wrong>; <fix>`` on stderr with exit 2, before any model is
    built where the config decides it."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path, help="the sweep's config (experiments/noise_sweep.yaml)")
    p.add_argument("--out", type=Path, required=True, help="folder for the tables (and the vision half's models)")
    p.add_argument("--half", choices=("language", "vision", "both"), default="both")
    args = p.parse_args(argv)
    try:
        lang = load_config(args.config) if args.half in ("language", "both") else None
        vision = (load_vision_config(read_config(args.config).get("vision"), args.config)
                  if args.half in ("vision", "both") else None)
        if args.out.exists() and not args.out.is_dir():
            raise ConfigError(f"{args.out}: --out: a file, not a folder; pass a folder for the tables")
        try:
            if vision is not None:  # before the language half's minutes: a vision folder of another config is refused
                work_record(args.out / "vision", vision_built_from(vision), "--out", VISION_PRODUCTS)
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{args.out}: --out: cannot be made a folder ({exc.strerror}); pass a folder you can "
                              "write") from None
        halves = []
        if lang is not None:
            rows, truth, hypotheses = run_language(lang)
            halves.append(("language", rows, truth, hypotheses, language_truth_lines(truth)))
        if vision is not None:
            rows, truth, hypotheses = run_vision(vision, args.out / "vision")
            halves.append(("vision", rows, truth, hypotheses, vision_truth_lines(truth)))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for half, rows, truth, hypotheses, truth_lines in halves:
        for name, table in (("rows", rows), ("truth", truth), ("hypotheses", hypotheses)):
            write_text(args.out / f"{half}_{name}.csv", table.to_csv(index=False))
        over = "model seeds and classes" if half == "vision" else "model seeds"
        write_text(args.out / f"{half}_sweep.md", markdown_tables(rows, truth_lines, hypotheses, over))
        print(f"noise sweep: {half}: wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
