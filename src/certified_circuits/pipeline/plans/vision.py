"""The vision half's jobs (``rules/vision.smk``): the config's vision setting (its one builder), the embedded world
or the torchvision data, the model, the scorers, and the attribution and evaluation jobs' options, inputs and outputs.

Functions of the checked config, the result layout and the classes the config certifies; the ``*_job_*`` ones take a
job's wildcards (bound with :func:`functools.partial` in ``rules/common.smk``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from certified_circuits.core.setting import Setting
from certified_circuits.pipeline.config_paths import vision_source
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans.common import Config, cli_options, item_options, local_inputs, q, words

__all__ = [
    "embedded_vision", "vision_setting", "rediscovery_sets", "vision_dirs", "world_config", "vision_scorer_specs",
    "vision_scorers_all", "vision_main_scorer", "vision_additive_plugins", "vision_discovery_scorers",
    "vision_discover_job_spec", "vision_model_command", "vision_concepts", "vision_eval_data", "vision_concept_size",
    "vision_model_args", "vision_model_inputs", "vision_attribute_invocation", "vision_attribute_outputs",
    "vision_attribute_inputs", "vision_attribute_job_invocation", "vision_id_job_data", "vision_sized_job_data",
    "vision_scorers", "vision_conductance_options",
    "vision_circuits", "vision_evaluate_circuits", "vision_evaluate_sets", "vision_evaluate_job_circuits",
    "vision_evaluate_job_sets", "vision_evaluate_job_data", "vision_evaluate_job_set_options",
    "vision_ablation_options", "vision_ablation_inputs", "vision_images_per_class", "vision_rediscovered",
]


# ------------------------------------------------------------------------ config facts


def embedded_vision(config: Config) -> bool:
    """Is the vision half enabled with the embedded concept world (rather than torchvision folders)?"""
    return bool(config["vision"]["enabled"] and config["vision"]["source"] == "embedded")


def vision_setting(config: Config) -> Setting:
    """The main vision certification setting: the one place that builds it from a config.

    Args:
        config: the run's config.

    Returns:
        ``Setting.from_config(vision.certification)`` (p_del, n0, n, seed, tau, alpha, correction; checked when built).
    """
    return Setting.from_config(config["vision"]["certification"])


def rediscovery_sets(config: Config) -> list[str]:
    """The OOD eval sets the vision classes are re-discovered on (``vision.rediscovery_sets``), in order."""
    return list(config["vision"]["rediscovery_sets"])


def vision_dirs(paths: Layout) -> dict[str, str]:
    """The vision data the workflow builds: ``dir`` (RESULTS/vision), ``world`` (its world folder), ``model``
    (the world checkpoint) and ``large`` (the large concept set of the radius sweep)."""
    vdir = paths.data("vision")
    return {"dir": vdir, "world": f"{vdir}/world", "model": f"{vdir}/model.pt", "large": f"{vdir}/world_large/concept.npz"}


def world_config(config: Config):
    """The embedded world's :class:`~certified_circuits.vision.data.world.WorldConfig` (its defaults are the
    vision-world command's, never repeated here); ``None`` for a torchvision source."""
    if not embedded_vision(config):
        return None
    from certified_circuits.vision.data.world import WorldConfig

    return WorldConfig(**config["vision"]["world"])


def _source(config: Config) -> dict[str, Any]:
    return vision_source(config["vision"])


def vision_scorer_specs(config: Config) -> dict[str, str]:
    """Scorers by their name in result paths: a built-in name, or a plugin's function name (``module:function``
    -> ``function``), mapped to the configured spec; empty when vision is off."""
    from certified_circuits.vision.scoring.plugins import is_plugin, plugin_name

    if not config["vision"]["enabled"]:
        return {}
    return {plugin_name(s) if is_plugin(s) else s: s for s in config["vision"].get("scorers", [])}


def vision_scorers_all(config: Config) -> list[str]:
    """Every scorer's name in result paths, in config order."""
    return list(vision_scorer_specs(config))


def vision_main_scorer(config: Config) -> str | None:
    """The main scorer's name in result paths (a plugin by its function name)."""
    from certified_circuits.vision.scoring.plugins import is_plugin, plugin_name

    vision = config["vision"]
    if vision["enabled"] and is_plugin(vision["main_scorer"]):
        return plugin_name(vision["main_scorer"])
    return vision.get("main_scorer")


def _plugin_kinds(config: Config) -> dict[str, str]:
    from certified_circuits.vision.scoring.plugins import is_plugin, load_plugin

    return {name: load_plugin(spec).kind for name, spec in vision_scorer_specs(config).items() if is_plugin(spec)}


def vision_additive_plugins(config: Config) -> list[str]:
    """Specs of the additive plugins, scored by ``vision-attribute`` (cached path)."""
    specs = vision_scorer_specs(config)
    return [specs[n] for n, kind in _plugin_kinds(config).items() if kind == "additive"]


def vision_discovery_scorers(config: Config) -> list[str]:
    """Names of the discovery (black-box) plugins, whose votes ``vision-discover`` computes."""
    return [n for n, kind in _plugin_kinds(config).items() if kind == "discovery"]


def vision_discover_job_spec(config: Config, wildcards: Any) -> str:
    """The ``module:function`` spec of the discovery plugin that a vision_discover job's ``scorer`` wildcard names.

    Args:
        config: the run's config.
        wildcards: the job's ``scorer`` (a plugin's function name, :func:`vision_scorer_specs`).

    Returns:
        The configured spec (``my_module:my_scorer``).
    """
    return vision_scorer_specs(config)[wildcards.scorer]


def vision_model_command(config: Config) -> str:
    """The stage that builds the embedded world model, with its config options (the ``vision_train`` rule).

    ``vision.train.compiled: marked`` sets every weight by hand (``vision-compile``: no training, the testbed's noisy
    vision model); otherwise ``vision-train`` trains one (planted or plain). Either writes the same checkpoint and
    metrics files, so every later rule is the same.

    Args:
        config: the run's checked config.

    Returns:
        ``"vision-compile --seed 0 ..."`` or ``"vision-train --seed 0 --epochs 10 ..."`` (without ``--world``, the
        outputs and ``--threads``, which the rule adds).
    """
    train = dict(config["vision"]["train"])
    compiled = train.pop("compiled", None)
    return f"{'vision-compile' if compiled else 'vision-train'} {cli_options(train)}".strip()


# ------------------------------------------------------------------------ data and model


def vision_concepts(concepts: Sequence[str], selection: str | Sequence[str] = "all") -> list[str]:
    """Class names (embedded) or WordNet ids (paper) to certify, in config order.

    Args:
        concepts: every class the config certifies (``check_config(config).concepts``).
        selection: ``"all"`` or a list of classes (``feature_concepts``, ``seed_stability.concepts``, ...).

    Returns:
        ``concepts`` for ``"all"``, else the selection as a list.
    """
    if selection != "all":
        return list(selection)
    return list(concepts)


def vision_eval_data(config: Config, paths: Layout, name: str) -> str:
    """The data file or folder of an eval set.

    Args:
        config: the run's config.
        paths: the run's layout.
        name: ``id`` or an OOD eval set.

    Returns:
        Embedded: the world's ``.npz`` (``id``: concept.npz; the filtered ``adversarial`` and ``anomaly``
        sets beside the model); torchvision: the val root for ``id``, else the set's configured folder.
    """
    if embedded_vision(config):
        dirs = vision_dirs(paths)
        world = dirs["world"]
        built = {"id": f"{world}/concept.npz", "adversarial": f"{dirs['dir']}/adversarial.npz",
                 "anomaly": f"{dirs['dir']}/anomaly.npz"}
        return built.get(name, f"{world}/{name}.npz")
    source = _source(config)
    return source["root"] if name == "id" else source["ood_roots"][name]


def vision_concept_size(config: Config) -> int:
    """|D_c|: images per class of the concept datasets (the world's ``n_concept_per_class`` or ``concept_size``)."""
    if embedded_vision(config):
        return world_config(config).n_concept_per_class
    return _source(config)["concept_size"]


def vision_model_args(config: Config, paths: Layout) -> str:
    """The model options of every vision job.

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        Embedded: ``--model world --checkpoint <model.pt> --device <device>``; torchvision: ``--model``,
        ``--class-index``, ``--weights``, ``--layers`` (unless ``auto``) and the preprocessing, only what the
        config sets (the rest is the model's own), then ``--device``.
    """
    device = config["device"]
    if embedded_vision(config):
        return f"--model world --checkpoint {q(vision_dirs(paths)['model'])} --device {q(device)}"
    source = _source(config)
    options = {"model": source["model"], "class_index": source["class_index"], "weights": source.get("weights")}
    if source["layers"] != "auto":
        options["layers"] = source["layers"]
    options.update({key: source[key] for key in ("image_size", "resize_size", "mean", "std") if source.get(key) is not None})
    options["device"] = device
    return cli_options({key: value for key, value in options.items() if value is not None})


def vision_model_inputs(config: Config, paths: Layout) -> list[str]:
    """The model file a vision job needs as input: the world checkpoint (embedded), else none."""
    return [vision_dirs(paths)["model"]] if embedded_vision(config) else []


# ------------------------------------------------------------------------ attribution


def _conductance_reference(config: Config, paths: Layout) -> str | None:
    """The train split whose mean image is the ``mean`` conductance baseline, when conductance runs with it."""
    vision = config["vision"]
    if "conductance" not in vision_scorer_specs(config) or vision.get("conductance", {}).get("baseline") != "mean":
        return None
    return vision_dirs(paths)["world"] + "/train.npz"


def vision_conductance_options(config: Config, paths: Layout) -> str:
    """vision-attribute's layer-conductance options (``vision.conductance``), only when ``conductance`` is in
    ``vision.scorers`` (else "": the default's jobs are unchanged): ``--conductance zeros --conductance-steps 16``;
    the ``mean`` baseline adds mean ablation's reference (the world's train split, ``mean_reference_size`` images,
    the certification seed): ``--conductance-reference R/vision/world/train.npz --conductance-reference-size 1000
    --conductance-seed 0``."""
    if "conductance" not in vision_scorer_specs(config):
        return ""
    vision, reference = config["vision"], _conductance_reference(config, paths)
    settings = {"baseline": "zeros", "steps": 16, **vision.get("conductance", {})}  # the schema's defaults
    options = f"--conductance {q(settings['baseline'])} --conductance-steps {int(settings['steps'])}"
    if reference is not None:
        options += (f" --conductance-reference {q(reference)} --conductance-reference-size "
                    f"{int(vision['mean_reference_size'])} --conductance-seed {int(vision_setting(config).seed)}")
    return options


def vision_attribute_invocation(config: Config, paths: Layout, concept: str) -> str:
    """The ``vision-attribute`` arguments of one class: its concept set, then every OOD re-discovery set
    (``--also``), all quoted. The per-class rule and the class-group rules run exactly these.

    Args:
        config: the run's config.
        paths: the run's layout.
        concept: the class.

    Returns:
        ``vision-attribute <model options> --threads 1 --data ... --out <concept attributions> [--scorer <additive
        plugin>]... [<conductance options>] [--also <set> <data> <attributions>]...``
        (:func:`vision_conductance_options`).
    """
    vx = config["vision"]["experiment"]
    also = item_options("--also", [(s, vision_eval_data(config, paths, s), paths.attributions(vx, s, concept))
                                   for s in rediscovery_sets(config)])
    world = vision_dirs(paths)["world"]
    counterfactual = f"--counterfactual {q(f'{world}/counterfactual.npz')}" if embedded_vision(config) else ""
    plugins = item_options("--scorer", [(spec,) for spec in vision_additive_plugins(config)])
    plugins = " ".join(part for part in (plugins, vision_conductance_options(config, paths)) if part)
    return (f"vision-attribute {vision_model_args(config, paths)} --threads 1 --data {q(vision_eval_data(config, paths, 'id'))} "
            f"--n-examples {vision_concept_size(config)} {counterfactual} --concept {q(concept)} --split concept "
            f"--experiment {q(vx)} --out {q(paths.attributions(vx, 'concept', concept))} {plugins} {also}")


def vision_attribute_outputs(config: Config, paths: Layout, concept: str) -> list[str]:
    """The attribution files of one class: its concept set, then each re-discovery set."""
    vx = config["vision"]["experiment"]
    return [paths.attributions(vx, split, concept) for split in ["concept"] + rediscovery_sets(config)]


def vision_attribute_inputs(config: Config, paths: Layout) -> list[str]:
    """What every vision_attribute job reads that the workflow builds: the model, the concept and re-discovery
    sets, and the embedded world's counterfactual images.

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        :func:`vision_model_inputs`, then the local data of ``id`` and each re-discovery set, then
        ``R/vision/world/counterfactual.npz`` (embedded only), then the train split of the ``mean`` conductance
        baseline (when conductance runs with it).
    """
    world = vision_dirs(paths)["world"]
    reference = _conductance_reference(config, paths)
    return (vision_model_inputs(config, paths)
            + local_inputs(paths, (vision_eval_data(config, paths, s) for s in ["id"] + rediscovery_sets(config)))
            + ([f"{world}/counterfactual.npz"] if embedded_vision(config) else [])
            + ([reference] if reference is not None else []))


def vision_attribute_job_invocation(config: Config, paths: Layout, wildcards: Any) -> str:
    """:func:`vision_attribute_invocation` of the class that a vision_attribute job's ``concept`` wildcard names."""
    return vision_attribute_invocation(config, paths, wildcards.concept)


def vision_id_job_data(config: Config, paths: Layout, wildcards: Any) -> str:
    """The concept sets' images (:func:`vision_eval_data` of ``id``) as a params function of a job's wildcards (a
    path that is also an input of the embedded world's jobs is passed by a function, as Snakemake's linter asks).

    Args:
        config: the run's config.
        paths: the run's layout.
        wildcards: the job's (unused: every class reads the same data).

    Returns:
        ``R/vision/world/concept.npz`` (embedded) or the ``id`` root of the folders.
    """
    return vision_eval_data(config, paths, "id")


def vision_sized_job_data(config: Config, paths: Layout, wildcards: Any) -> str:
    """The images the radius sweep's larger concept datasets are drawn from (vision_attribute_sized), as a params
    function of the job's wildcards (as :func:`vision_id_job_data`).

    Args:
        config: the run's config.
        paths: the run's layout.
        wildcards: the job's ``size`` and ``concept`` (unused: every size reads the same data).

    Returns:
        The embedded world's large concept set (``R/vision/world_large/concept.npz``), else the ``id`` data.
    """
    return vision_dirs(paths)["large"] if embedded_vision(config) else vision_eval_data(config, paths, "id")


# ------------------------------------------------------------------------ evaluation


def vision_scorers(config: Config, split: str, setting: Setting) -> list[str]:
    """Scorers evaluated for a (split, setting): every scorer at the main setting on the concept sets (Table 3),
    the main scorer elsewhere (radius sweep)."""
    if split == "concept" and setting == vision_setting(config):
        return vision_scorers_all(config)
    return [vision_main_scorer(config)]


def vision_circuits(config: Config, paths: Layout, split: str, concept: str, setting: Setting | None = None,
                    scorer: str | None = None) -> tuple[str, str]:
    """(votes, certificates) of one class, split and setting.

    Args:
        config: the run's config.
        paths: the run's layout (records ``setting`` in its table of settings).
        split: ``concept``, an OOD set or ``concept_n<size>``.
        concept: the class.
        setting: default: the main setting.
        scorer: default: the main scorer.
    """
    setting, scorer = setting or vision_setting(config), scorer or vision_main_scorer(config)
    vx = config["vision"]["experiment"]
    return (paths.votes(vx, split, concept, scorer, setting), paths.certificates(vx, split, concept, scorer, setting))


def vision_evaluate_circuits(config: Config, paths: Layout, split: str, concept: str, setting: Setting) -> list[str]:
    """(votes, certificates) of every scorer a vision_evaluate job evaluates (:func:`vision_scorers`), flattened."""
    vx = config["vision"]["experiment"]
    return [f for scorer in vision_scorers(config, split, setting)
            for f in (paths.votes(vx, split, concept, scorer, setting), paths.certificates(vx, split, concept, scorer, setting))]


def vision_evaluate_sets(config: Config, split: str, setting: Setting) -> list[str]:
    """Eval sets of a vision_evaluate job: every set for the concept datasets at the main setting (Tables 1 and 3),
    ID only for the radius sweep (other |D| or p_del: App. D reports ID cACC and sizes)."""
    main = split == "concept" and setting == vision_setting(config)
    return config["vision"]["eval_sets"] if main else ["id"]


def vision_evaluate_job_circuits(config: Config, paths: Layout, wildcards: Any) -> list[str]:
    """:func:`vision_evaluate_circuits` of the vision_evaluate job that these wildcards name."""
    return vision_evaluate_circuits(config, paths, wildcards.split, wildcards.concept, paths.setting_of(wildcards))


def vision_evaluate_job_sets(config: Config, paths: Layout, wildcards: Any) -> list[str]:
    """:func:`vision_evaluate_sets` of the vision_evaluate job that these wildcards name."""
    return vision_evaluate_sets(config, wildcards.split, paths.setting_of(wildcards))


def vision_evaluate_job_data(config: Config, paths: Layout, wildcards: Any) -> list[str]:
    """The eval sets' files that a vision_evaluate job reads and the workflow builds (:func:`vision_evaluate_job_sets`;
    a user's folders are checked at parse time instead)."""
    return local_inputs(paths, (vision_eval_data(config, paths, name)
                                for name in vision_evaluate_job_sets(config, paths, wildcards)))


def vision_evaluate_job_set_options(config: Config, paths: Layout, wildcards: Any) -> str:
    """The ``--eval-set NAME=DATA`` options of a vision_evaluate job, one per set of :func:`vision_evaluate_job_sets`.

    Args:
        config: the run's config.
        paths: the run's layout.
        wildcards: the job's ``split`` and setting.

    Returns:
        ``"--eval-set id=R/vision/world/concept.npz --eval-set ..."`` (each quoted).
    """
    return item_options("--eval-set", [(f"{name}={vision_eval_data(config, paths, name)}",)
                                       for name in vision_evaluate_job_sets(config, paths, wildcards)])


def vision_ablation_options(config: Config, paths: Layout) -> str:
    """vision-evaluate's ablation options: every ablation of ``vision.ablations`` in one process.

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        ``--ablation zero`` alone (the paper's test) or, with ``mean``, the ablations and the reference images
        whose mean activations fill removed channels (the embedded world's train split, ``mean_reference_size``
        of them, sampled with the certification seed): ``--ablation zero mean --reference R/vision/world/train.npz
        --reference-size 1000 --seed 0``.
    """
    vision = config["vision"]
    ablations = list(vision.get("ablations", ["zero"]))
    options = f"--ablation {words(ablations)}"
    if "mean" in ablations:
        options += (f" --reference {q(vision_dirs(paths)['world'] + '/train.npz')} "
                    f"--reference-size {int(vision['mean_reference_size'])} --seed {int(vision_setting(config).seed)}")
    return options


def vision_ablation_inputs(config: Config, paths: Layout) -> list[str]:
    """The reference images a vision_evaluate job reads for mean ablation (none for zero ablation alone)."""
    return [vision_dirs(paths)["world"] + "/train.npz"] if "mean" in config["vision"].get("ablations", ["zero"]) else []


# ------------------------------------------------------------------------ OOD re-discovery (filtered sets)


def vision_images_per_class(config: Config, paths: Layout, concepts: Sequence[str], eval_set: str,
                            filter_metrics: Callable[[], str] | None = None) -> dict[str, int]:
    """{class: number of images} of an eval set.

    Args:
        config: the run's config.
        paths: the run's layout.
        concepts: the classes the config certifies.
        eval_set: an OOD eval set.
        filter_metrics: embedded only: returns the path of the vision_filter_ood checkpoint's metrics (called only
            then; the workflow's wrapper raises Snakemake's IncompleteCheckpointException until it has run).

    Returns:
        Embedded: the filtered set's per-class counts from the metrics (``n_ood_per_class`` for every class of an
        unfiltered set); torchvision: the images in each class folder of the set.
    """
    if embedded_vision(config):
        with open(filter_metrics()) as handle:
            counts = json.load(handle).get(f"per_class_{eval_set}")
        world = world_config(config)
        if counts is None:
            return {c: world.n_ood_per_class for c in concepts}
        return dict(zip(world.class_names(), counts))
    from certified_circuits.vision.data.folders import count_class_images

    return count_class_images(vision_eval_data(config, paths, eval_set), concepts)


def vision_rediscovered(config: Config, paths: Layout, concepts: Sequence[str],
                        filter_metrics: Callable[[], str] | None = None) -> list[tuple[str, str]]:
    """(class, eval set) pairs re-discovered on an OOD set: classes with at least ``rediscovery_min_images``
    images there (filtered sets can lack some). Arguments as :func:`vision_images_per_class`.

    Returns:
        The pairs, by eval set (config order), then class (config order).
    """
    pairs = []
    for eval_set in config["vision"]["rediscovery_sets"]:
        available = vision_images_per_class(config, paths, concepts, eval_set, filter_metrics)
        pairs += [(c, eval_set) for c in concepts if available.get(c, 0) >= config["vision"]["rediscovery_min_images"]]
    return pairs
