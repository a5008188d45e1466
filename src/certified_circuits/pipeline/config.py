"""Checks of a workflow config that need more than its schema, run when the workflow is parsed.

``config.schema.yaml`` checks types, ranges, patterns, defaults and conditional requiredness. What is
here needs more than one key, the file system, or the list of classes: NaN and infinity (which JSON
Schema's comparisons let through), scorers and eval sets that must agree, paths that must exist, and
the classes to certify, resolved and checked *before* any job (an unknown class must not wait for
world generation and training to fail). Every error names the key, the value and what is expected.
:func:`check_workflow_config` is the one entry point (the Snakefile's): the config files read strictly and the
schema's error condensed (``config_files``), the input paths (``config_paths``), then the checks here and the
language half's (``config_language``).

Light on purpose: it runs on every ``snakemake`` invocation, dry runs included (numpy only; the
``folders`` source also imports torch to check the model on the meta device, about a second).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from certified_circuits.commands import COMMAND
from certified_circuits.pipeline.config_errors import ConfigError, config_error
from certified_circuits.pipeline.config_files import check_before_schema, check_config_files, condense_schema_error
from certified_circuits.pipeline.config_language import check_language, check_mib_shape
from certified_circuits.pipeline.config_paths import check_paths, expand_user_paths, vision_source
from certified_circuits.pipeline.plans.setting_plans import ConfigPlan, PlanConfigError, check_config_plans, config_plans


def require_finite(value, key="config"):
    """JSON Schema's number checks let NaN and infinity through (every comparison with NaN is false)."""
    if isinstance(value, float) and not math.isfinite(value):
        config_error(key, value, "must be a finite number")
    if isinstance(value, dict):
        for name, item in value.items():
            require_finite(item, f"{key}.{name}" if key != "config" else name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            require_finite(item, f"{key}[{index}]")


def resolve_vision_concepts(vision):
    """The classes to certify: checked against the world's classes or the class folders now, so an
    unknown class stops the run before world generation and training (after :func:`check_vision`, which refuses
    mean ablation without the embedded world)."""
    if vision["source"] == "embedded":
        from certified_circuits.vision.data.world import WorldConfig

        known = WorldConfig(**vision["world"]).class_names()
        where = f"the embedded world's classes (vision.world.n_classes = {len(known)})"
    else:
        from certified_circuits.vision.data.folders import list_class_folders
        from certified_circuits.vision.data.imagenet import list_classes, select_classes

        source = vision_source(vision)
        known = list_classes(source["root"]) if vision["source"] == "imagenet" else list_class_folders(source["root"])
        where = f"the class folders of {source['root']}"
        if vision["concepts"] == "all" and source["n_classes"] is not None:
            if source["n_classes"] > len(known):
                config_error(f"vision.{vision['source']}.n_classes", source["n_classes"],
                             f"{source['root']} holds {len(known)} class folders: certify at most that many")
            return select_classes(known, source["n_classes"], source["class_seed"])
    if vision["concepts"] == "all":
        return known
    unknown = [c for c in vision["concepts"] if c not in known]
    if unknown:
        config_error("vision.concepts", unknown, f"every class must be one of {where}: {known[:12]}")
    return list(vision["concepts"])


def check_listed_classes(vision, concepts):
    for key, listed in (("vision.feature_concepts", vision["feature_concepts"]),
                        ("vision.seed_stability.concepts", vision["seed_stability"]["concepts"]),
                        ("vision.radius_sweep.concepts", vision["radius_sweep"]["concepts"]),
                        ("vision.runtime.concept", [vision["runtime"]["concept"]] if "concept" in vision["runtime"] else "all")):
        unknown = [] if listed == "all" else [c for c in listed if c not in concepts]
        if unknown:
            config_error(key, unknown, f"every class listed must be certified, i.e. one of {concepts}")


def check_scorers(vision) -> None:
    """Every plugin of ``vision.scorers`` imports and has one of the two signatures; names are unique
    result-path names; the main scorer is one of them and can be re-run from cached scores."""
    from certified_circuits.pipeline.layout import WILDCARD_CONSTRAINTS
    from certified_circuits.vision.scoring.plugins import is_plugin, load_plugin, plugin_name

    names = [plugin_name(s) if is_plugin(s) else s for s in vision["scorers"]]
    for entry, name in zip(vision["scorers"], names):
        if names.count(name) > 1:
            config_error("vision.scorers", vision["scorers"], f"two entries are named {name!r} in result paths: rename a function")
        if is_plugin(entry):
            if not re.fullmatch(WILDCARD_CONSTRAINTS["scorer"], name):
                config_error("vision.scorers", entry, "the function name names result files: use lower-case letters, digits and _")
            try:
                plugin = load_plugin(entry)
            except ValueError as exc:
                raise ConfigError(f"config key vision.scorers: {exc}") from None
            if entry == vision["main_scorer"] and plugin.kind == "discovery":
                config_error("vision.main_scorer", entry, "a black-box discovery plugin cannot be the main scorer (the radius "
                                                          "sweep, IoU and attack re-run it from cached scores): choose a "
                                                          "built-in or additive scorer")
    if vision["main_scorer"] not in vision["scorers"]:
        config_error("vision.main_scorer", vision["main_scorer"], f"must be one of vision.scorers {vision['scorers']}")


def check_conductance(vision) -> None:
    """``vision.conductance`` (read when ``conductance`` is in ``vision.scorers``): a baseline of
    :data:`~certified_circuits.vision.scoring.plugins.CONDUCTANCE_BASELINES` (the schema's enum too; this names the
    key and the values for a config that skipped the schema's defaults), ``mean`` only where the workflow has its
    reference images (the embedded world's train split), an integer ``steps`` >= 1, and not the main scorer of the
    radius sweep (whose ``vision_attribute_sized`` jobs score the built-in scorers only)."""
    from certified_circuits.vision.scoring.plugins import CONDUCTANCE_BASELINES, CONDUCTANCE_STEPS

    settings = vision.get("conductance", {})
    baseline, steps = settings.get("baseline", "zeros"), settings.get("steps", CONDUCTANCE_STEPS)
    if baseline not in CONDUCTANCE_BASELINES:
        config_error("vision.conductance.baseline", baseline, f"use one of {', '.join(CONDUCTANCE_BASELINES)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        config_error("vision.conductance.steps", steps, "use an integer >= 1 (m, the path's intervals)")
    if "conductance" not in vision["scorers"]:
        return
    if baseline == "mean" and vision["source"] != "embedded":
        config_error("vision.conductance.baseline", baseline,
                     "the mean baseline in the workflow is the mean image of the embedded world's train split; for your "
                     f"own data use zeros, or run `{COMMAND} vision-attribute ... --conductance mean "
                     "--conductance-reference ROOT` by hand (allowed: zeros, mean)")
    if vision["main_scorer"] == "conductance" and vision.get("radius_sweep", {}).get("enabled"):
        config_error("vision.main_scorer", "conductance",
                     "the radius sweep's attributions (vision_attribute_sized) score the built-in relevance, activation "
                     "and rank only: keep conductance in vision.scorers with another main scorer, or set "
                     "vision.radius_sweep.enabled: false")


def check_folders(vision) -> int | None:
    """The folders source (and the imagenet preset's paths), whose files :func:`check_paths` has found to exist
    (:func:`check_config` runs it first, listing every missing one): every class folder is a class of the
    index, every certified class holds ``concept_size`` images, and (folders) the weights fit the model and
    class count and the layers exist: all before any job. The model check builds the network on the meta
    device (shapes only) and reads the weights' shapes through a memory map.

    Returns:
        the folders model's component count (the plan check's ``U``); None for the imagenet preset, whose
        architectures' counts are in their table."""
    source_name = vision["source"]
    source = vision_source(vision)
    key = f"vision.{source_name}"
    from certified_circuits.vision.data.folders import DatasetLayoutError, check_folders_in_index, load_class_names

    missing = [e for e in vision["eval_sets"] if e != "id" and e not in source["ood_roots"]]
    if missing:
        config_error("vision.eval_sets", missing, f"each OOD set needs a folder in {key}.ood_roots {sorted(source['ood_roots'])}")
    try:
        names = load_class_names(source["class_index"])
        if source_name == "imagenet":  # the preset's model has the 1,000-output ImageNet head
            if len(names) != 1000:
                raise DatasetLayoutError(f"class index {source['class_index']} lists {len(names)} classes, but the "
                                         f"ImageNet models have 1,000 outputs: give the full LOC_synset_mapping.txt")
            return None
        if len(names) < 2:
            config_error(f"{key}.class_index", source["class_index"], f"it lists {len(names)} class; {ONE_CLASS}")
        for root_key, root in [("root", source["root"]), *((f"ood_roots.{n}", r) for n, r in source["ood_roots"].items())]:
            folders = check_folders_in_index(root, names, source["class_index"], f"{key}.{root_key}")
            if len(folders) < 2:
                config_error(f"{key}.{root_key}", root, f"it holds {len(folders)} class folder ({folders}); {ONE_CLASS}")
    except DatasetLayoutError as exc:
        raise ConfigError(f"config key {key}: {exc}") from None
    from certified_circuits.vision.networks.classifiers import check_folders_model

    try:
        components = check_folders_model(source["model"], source["weights"], names, source["layers"],
                                         source.get("image_size"), source.get("resize_size"), source.get("mean"),
                                         source.get("std"), source["class_index"])
    except ValueError as exc:  # load_weights names a whole pickled model and what to save instead
        raise ConfigError(f"config key {key}: {exc}") from None
    return int(sum(components.widths))


#: why one class cannot work (class accuracy against the other classes is undefined: the summary said nan%)
ONE_CLASS = ("a classifier and its data sets need at least 2 classes (a concept is certified against the other "
             "classes: with one class its accuracy on them is undefined); add classes")


def check_concept_sizes(vision, concepts) -> None:
    """Every certified class folder of the folders source holds at least ``concept_size`` images."""
    from certified_circuits.pipeline.layout import WILDCARD_CONSTRAINTS
    from certified_circuits.vision.data.folders import count_class_images

    source = vision["folders"]
    counts = count_class_images(source["root"], concepts)
    short = {c: n for c, n in counts.items() if n < source["concept_size"]}
    if short:
        config_error("vision.folders.concept_size", source["concept_size"],
                     f"class folders under {source['root']} hold fewer images: {short}; add images or lower concept_size")
    unusable = [c for c in concepts if not re.fullmatch(WILDCARD_CONSTRAINTS["concept"], c)]
    if unusable:
        config_error("vision.concepts", unusable, "class names name result files: rename these folders and their "
                                                  "class-index lines to letters, digits, _ and -")


def check_vision(vision) -> int | None:
    """Scorers, eval sets, the world or the model and data; returns the folders model's component count."""
    check_scorers(vision)
    check_conductance(vision)
    if vision["selection_set"] and vision["selection_set"] not in vision["eval_sets"]:
        config_error("vision.selection_set", vision["selection_set"], f"must be one of vision.eval_sets {vision['eval_sets']}")
    unknown = set(vision["rediscovery_sets"]) - set(vision["eval_sets"])
    if unknown:
        config_error("vision.rediscovery_sets", sorted(unknown), f"each must also be in vision.eval_sets {vision['eval_sets']}")
    if "mean" in vision.get("ablations", ["zero"]) and vision["source"] != "embedded":
        config_error("vision.ablations", vision["ablations"],
                     "mean ablation in the workflow takes its reference images from the embedded world's train split; for "
                     f"your own data run `{COMMAND} vision-evaluate ... --ablation zero mean --reference ROOT` by hand, "
                     "or set vision.ablations: [zero]")
    if vision["source"] == "embedded":
        from certified_circuits.vision.data.world import WorldConfig

        try:
            WorldConfig(**vision["world"]).validate()
        except ValueError as exc:
            config_error("vision.world", vision["world"], str(exc))
        train = vision.get("train", {})
        check_compiled_vision(vision["world"], train)
        if ("planted_own" in train) != ("planted_shared" in train):
            config_error("vision.train", train, "planted_own and planted_shared go together (4 values each: a class's "
                                                "channels and the shared channels of layer1..layer4), or neither")
        if "planted_leak" in train and "planted_own" not in train:
            config_error("vision.train.planted_leak", train["planted_leak"], "the leak bounds the cross-class weights "
                         "of a planted model: set planted_own and planted_shared too, or remove planted_leak")
        if "planted_own" in train:
            from certified_circuits.vision.networks.planted import PlantedSpec

            if "widths" in train:
                config_error("vision.train.widths", train["widths"], "the planted model's widths are n_classes * "
                                                                     "planted_own + planted_shared: remove widths")
            try:
                PlantedSpec(int(WorldConfig(**vision["world"]).n_classes), tuple(train["planted_own"]),
                            tuple(train["planted_shared"]))
            except ValueError as exc:
                config_error("vision.train.planted_own / planted_shared", [train["planted_own"], train["planted_shared"]],
                             str(exc))
        known = {"id", "id_test", "context_shift", "corruption", "adversarial", "anomaly"}
        unknown = [e for e in vision["eval_sets"] if e not in known]
        if unknown:
            config_error("vision.eval_sets", unknown, f"the embedded world has eval sets {sorted(known)}")
        return None
    if vision["source"] == "imagenet":
        from certified_circuits.vision.networks.architectures import ARCHITECTURE_NAMES

        if vision["imagenet"]["model"] not in ARCHITECTURE_NAMES:
            config_error("vision.imagenet.model", vision["imagenet"]["model"],
                         f"one of {list(ARCHITECTURE_NAMES)} (add an architecture in certified_circuits/vision/networks/architectures.py, "
                         "or use source: folders for any torchvision classifier)")
    return check_folders(vision)


#: the vision.train keys a compiled model reads (vision-compile's options); every other one trains a model
COMPILED_VISION_KEYS = ("seed", "compiled", "margins", "jitter", "badge_gain", "cue_gain")


def refuse_training_options(half: str, train: dict[str, Any], allowed: tuple[str, ...], made: str, fix: str) -> None:
    """A compiled model (``<half>.train.compiled``) is not trained: a ``train`` key outside ``allowed`` would be
    ignored, so it is refused (both halves' one check).

    Args:
        half: ``vision`` or ``language``.
        train: ``<half>.train`` (``compiled`` set).
        allowed: the keys the compiled model reads.
        made: how its weights are set (``by hand``, ``by construction``).
        fix: the other way out, after "remove them, or".

    Raises:
        ConfigError: naming the first ignored key, every ignored key and the fix.
    """
    ignored = [k for k in train if k not in allowed]
    if ignored:
        config_error(f"{half}.train.{ignored[0]}", train[ignored[0]],
                     f"the compiled model ({half}.train.compiled: {train['compiled']}) is set {made}, not trained, so "
                     f"{', '.join(ignored)} would be ignored: remove them, or {fix}")


def check_compiled_vision(world: dict[str, Any], train: dict[str, Any]) -> None:
    """``vision.train.compiled: marked`` (the hand-set marked ResNet, ``vision-compile``) reads a marked world and
    takes no training option; the compile options go with it only.

    Args:
        world: ``vision.world`` (schema-validated).
        train: ``vision.train``.

    Raises:
        ConfigError: a compiled model on an unmarked world, a training option beside it, or a compile option without it.
    """
    compiled = train.get("compiled")
    if compiled:
        if not world.get("cue_attributes"):
            config_error("vision.world.cue_attributes", world.get("cue_attributes", 0),
                         "the compiled model (vision.train.compiled: marked) reads each image's badge and cue marks: "
                         "set vision.world.cue_attributes: 2 (and image_size: 16), or set vision.train.compiled: null "
                         "to train a model")
        refuse_training_options("vision", train, COMPILED_VISION_KEYS, "by hand",
                                "set vision.train.compiled: null to train a model")
        return
    stray = [k for k in COMPILED_VISION_KEYS[2:] if k in train]
    if stray:
        config_error(f"vision.train.{stray[0]}", train[stray[0]],
                     "an option of the compiled model (vision-compile), but vision.train.compiled is not set: remove "
                     f"{', '.join(stray)}, or set vision.train.compiled: marked")


@dataclass(frozen=True)
class CheckedConfig:
    """What the config check found: the vision classes to certify ([] when vision is off) and the exact plan of
    every setting (:mod:`certified_circuits.pipeline.plans.setting_plans`; the marginal ones carry warnings)."""

    concepts: list[str]
    plans: list[ConfigPlan]


#: the testbed options of each half and the model source they apply to (elsewhere they would be ignored)
TESTBED_OPTIONS = {"vision": ("embedded", ("planted_own", "planted_shared", "planted_leak", "compiled")),
                   "language": ("embedded", ("compiled",))}


def check_equal_footing(block: dict[str, Any]) -> None:
    """``testbed.equal_footing`` (the stability stage's comparators, analysis/equal_footing.py), each key in the range
    the stage accepts: ``inner_resamples`` 2 to MAX_INNER_RESAMPLES, ``q`` in (0.5, 1], ``z`` positive and finite
    (the seeds are the schema's 32-bit seeds; a key left out is the schema's default).

    Raises:
        ConfigError: naming the key, the value and its range.
    """
    from certified_circuits.analysis.equal_footing import MAX_INNER_RESAMPLES

    key = "testbed.equal_footing"
    inner = block.get("inner_resamples", 20)
    if isinstance(inner, bool) or not isinstance(inner, int) or not 2 <= inner <= MAX_INNER_RESAMPLES:
        config_error(f"{key}.inner_resamples", inner, f"an integer from 2 to {MAX_INNER_RESAMPLES} (a standard "
                                                      "deviation needs two; the pre-registration uses 20)")
    q_value = block.get("q", 0.9)
    if isinstance(q_value, bool) or not isinstance(q_value, (int, float)) or not 0.5 < q_value <= 1:
        config_error(f"{key}.q", q_value, "a number in (0.5, 1]: in where at least q of the inner circuits keep a "
                                          "component, out where at most 1 - q do (the pre-registration uses 0.9)")
    z_value = block.get("z", 1.96)
    if isinstance(z_value, bool) or not isinstance(z_value, (int, float)) or not 0 < z_value < float("inf"):
        config_error(f"{key}.z", z_value, "a positive finite number, the interval's normal quantile (1.96: 95%)")


def check_testbed(config: dict[str, Any]) -> None:
    """The testbed's keys, before any job: ``testbed.resamples`` is 0 (no stability jobs) or within
    [MIN_RESAMPLES, MAX_RESAMPLES]; a testbed option (``vision.train.planted_own``/``planted_shared``,
    ``language.train.compiled``) is set only where it applies (the embedded source), and a compiled model takes no
    training option; the enabled experiments have distinct names (their result paths and rules would clash).

    Args:
        config: the schema-validated config.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    from certified_circuits.analysis.stability import MAX_RESAMPLES, MIN_RESAMPLES

    resamples = config.get("testbed", {}).get("resamples", 0)
    if resamples and not MIN_RESAMPLES <= resamples <= MAX_RESAMPLES:
        config_error("testbed.resamples", resamples, f"0 (no stability jobs) or {MIN_RESAMPLES} to {MAX_RESAMPLES} "
                                                     f"bootstrap resamples (the pairwise shares need two; the protocol "
                                                     f"uses 20): set testbed.resamples: 20")
    check_equal_footing(config.get("testbed", {}).get("equal_footing", {}))
    for half, (source, keys) in TESTBED_OPTIONS.items():
        block = config[half]
        if not block["enabled"] or block["source"] == source:
            continue
        present = [k for k in keys if (block.get("train") or {}).get(k) is not None]  # compiled: null trains
        if present:
            config_error(f"{half}.train.{present[0]}", block["train"][present[0]],
                         f"{', '.join(present)} shape the {source} model only, but {half}.source is "
                         f"{block['source']!r}, whose model is not built here: remove {half}.train.{present[0]} "
                         f"(a layered config.yaml sets it: start from a config without it)")
    language_train = config["language"].get("train") or {}
    if config["language"]["enabled"] and language_train.get("compiled"):
        refuse_training_options("language", language_train, ("seed", "compiled"), "by construction",
                                "drop train.compiled to train a model")
    names = {half: config[half]["experiment"] for half in ("vision", "language") if config[half]["enabled"]}
    if len(set(names.values())) < len(names):
        config_error("language.experiment", names["language"], "vision.experiment has the same name, and an "
                                                               "experiment's name is its results folder: rename one")


def check_config(config: dict[str, Any]) -> CheckedConfig:
    """Expand ``~`` in paths and check a schema-validated config, then plan every setting it certifies.

    Raises:
        ConfigError: a value that cannot work, or a setting that can certify nothing (with its plan and fix).
    """
    expand_user_paths(config)
    require_finite(config)
    check_paths(config)
    check_testbed(config)
    concepts: list[str] = []
    folders_components = None
    train_sizes = None
    if config["vision"]["enabled"]:
        folders_components = check_vision(config["vision"])
        concepts = resolve_vision_concepts(config["vision"])
        if config["vision"]["source"] == "folders":
            check_concept_sizes(config["vision"], concepts)
        check_listed_classes(config["vision"], concepts)
    if config["language"]["enabled"]:
        train_sizes = check_language(config["language"])
        check_mib_shape(config["language"])  # the configured model against MIB's (its shape known from the config)
    try:
        plans = check_config_plans(config_plans(config, folders_components, train_sizes))
    except PlanConfigError as exc:
        raise ConfigError(str(exc)) from None
    return CheckedConfig(concepts, plans)


def check_workflow_config(config: dict[str, Any], config_files, schema_file: str | os.PathLike) -> CheckedConfig:
    """Everything the Snakefile checks at parse time, in its order, before any job: each config file strictly
    (:func:`check_config_files`), the unclear schema cases (:func:`check_before_schema`), the schema itself (defaults
    set in ``config``, its error condensed by :func:`condense_schema_error`) and :func:`check_config`.

    The Snakefile calls this once; tests call it in-process on a merged config to test a rejection without starting
    ``snakemake`` (a parse costs seconds).

    Args:
        config: the merged config Snakemake built (config files in order, then ``--config``); defaults are set in it.
        config_files: the files it was read from (``config.yaml`` when no ``--configfile`` was given).
        schema_file: ``config.schema.yaml``.

    Returns:
        :class:`CheckedConfig`: the classes to certify and the plan of every setting.

    Raises:
        ConfigError: the first problem found, in one line that names the file and line or the key, and the fix.
    """
    import yaml
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    check_config_files(config_files)
    with open(schema_file) as handle:
        check_before_schema(config, yaml.safe_load(handle)["properties"])
    try:
        validate(config, str(schema_file), set_default=True)
    except WorkflowError as error:
        raise ConfigError(condense_schema_error(str(error))) from None
    return check_config(config)
