"""What the workflow plans: which jobs exist, their command-line options and their paths.

Pure functions of the config (as the Snakefile sees it: validated, schema defaults filled in, checked by
:func:`certified_circuits.pipeline.config.check_config`), of the result layout (:class:`Layout`) and of the
classes the config certifies (``check_config(config).concepts``). ``rules/common.smk`` binds them to the
run's ``config``, ``PATHS`` and ``VCONCEPTS``; a rule's input or params function takes the job's ``wildcards``
(``*_job_*``: read here, bound with :func:`functools.partial`), and the one Snakemake object left, the filter
checkpoint's output, is a thin wrapper in ``rules/common.smk`` passed here as ``filter_metrics``. tests/unit/test_pipeline_jobs.py
calls them on the default, smoke and paper configs and compares the whole dry run with recorded job lists.

Every config string that reaches a shell goes through :func:`q` (``shlex.quote``); numbers are written
exactly (:func:`certified_circuits.core.setting.number`).
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Callable, Iterable, Mapping, Sequence

from certified_circuits.core.setting import Setting, number
from certified_circuits.pipeline.config_paths import vision_source
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.tracking.records import encode_wildcards

__all__ = [
    "q", "words", "cli_options", "item_options", "chunked", "job_env", "log_path", "benchmark_path", "local_inputs",
    "model_resources",
    "embedded_vision", "vision_setting", "rediscovery_sets", "vision_dirs", "world_config", "vision_scorer_specs",
    "vision_scorers_all", "vision_main_scorer", "vision_additive_plugins", "vision_discovery_scorers",
    "vision_concepts", "vision_eval_data", "vision_concept_size", "vision_model_args", "vision_model_inputs",
    "vision_attribute_invocation", "vision_attribute_outputs", "vision_scorers", "vision_circuits",
    "vision_images_per_class", "vision_rediscovered", "vision_iou_circuits", "vision_evaluate_circuits",
    "vision_evaluate_sets", "vision_evaluate_job_circuits", "vision_evaluate_job_sets", "vision_ablation_options", "vision_ablation_inputs",
    "vision_attack_inputs", "vision_figure_job_inputs", "attack_options", "votes_options", "decision_options",
    "votes_job_options", "decision_job_options",
    "embedded_language", "hf_language", "language_dirs", "language_model_args", "language_eval_sets",
    "language_model_inputs", "language_settings", "explorer_circuits", "language_selected_table",
    "mib_model_name", "mib_circuits", "ground_truth_experiments", "testbed_notes", "stability_jobs", "stability_options",
    "stability_job",
]

Config = Mapping[str, Any]


# ------------------------------------------------------------------------ shell words and paths


def q(value: Any) -> str:
    """One shell word: every config string that reaches a command goes through here (or Snakemake's ``:q``).

    Args:
        value: any value; it is converted with ``str``.

    Returns:
        ``shlex.quote(str(value))``: ``"a b"`` -> ``"'a b'"``, ``0.5`` -> ``"0.5"``.
    """
    return shlex.quote(str(value))


def words(values: Iterable[Any]) -> str:
    """A list as quoted shell words, the CLI's one list format (space-separated).

    Args:
        values: strings or numbers; floats are written exactly (``number``: ``1e-05``, never ``%g``).

    Returns:
        The quoted words joined by spaces: ``[0.25, "a b"]`` -> ``"0.25 'a b'"``.
    """
    return " ".join(q(number(v) if isinstance(v, float) else v) for v in values)


def cli_options(options: Mapping[str, Any]) -> str:
    """A config mapping as quoted options of a ``certified-circuits`` stage.

    Args:
        options: option name -> value; ``_`` in a name becomes ``-``; ``True`` is a bare flag and ``False``
            leaves the option out; a list is the flag followed by :func:`words`.

    Returns:
        The options in the mapping's order: ``{"n_classes": 3, "widths": [8, 16]}`` -> ``"--n-classes 3 --widths 8 16"``.
    """
    parts = []
    for key, value in options.items():
        flag = f"--{key.replace('_', '-')}"
        if isinstance(value, bool):
            parts.append(flag if value else "")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{flag} {words(value)}")
        else:
            parts.append(f"{flag} {q(number(value) if isinstance(value, float) else value)}")
    return " ".join(p for p in parts if p)


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


def item_options(flag: str, rows: Iterable[Sequence[Any]]) -> str:
    """Repeated table rows as options.

    Args:
        flag: the option, e.g. ``--circuits``.
        rows: one sequence of values per repetition.

    Returns:
        ``flag`` and the row's :func:`words` per row: ``("--also", [("a", "b c")])`` -> ``"--also a 'b c'"``.
    """
    return " ".join(f"{flag} {words(row)}" for row in rows)


def chunked(values: Iterable[Any], size: int) -> list[list[Any]]:
    """Consecutive groups of ``size`` values (the last may be shorter), in order.

    Args:
        values: any iterable.
        size: the group size (>= 1).

    Returns:
        The groups: ``chunked("abcde", 2)`` -> ``[["a", "b"], ["c", "d"], ["e"]]``.
    """
    values = list(values)
    return [values[i : i + size] for i in range(0, len(values), size)]


def job_env(rule_name: str) -> Callable[[Any], str]:
    """The environment prefix of a rule's command, which tells ``certified-circuits`` the rule and wildcards it
    serves, so that the job's MLflow record is tagged with them (the parent run id comes from the environment).

    Args:
        rule_name: the rule's name (class-group rules give their kind, ``vision_attribute``).

    Returns:
        A params function of the job's wildcards (anything with ``items()``: Snakemake's ``Wildcards``, a dict)
        that returns ``CC_RULE=<rule> CC_WILDCARDS=<JSON of the wildcards>``, both quoted.
    """

    def prefix(wildcards: Any) -> str:
        return f"CC_RULE={q(rule_name)} CC_WILDCARDS={q(encode_wildcards(dict(wildcards.items())))}"

    return prefix


def log_path(paths: Layout, rule_name: str, pattern: str = "") -> str:
    """The log file of a rule's job.

    Args:
        paths: the run's layout.
        rule_name: the rule.
        pattern: the job's name under the rule's folder (wildcards allowed); empty for a rule with one job.

    Returns:
        ``RESULTS/logs/<rule>/<pattern or "job">.log``.
    """
    return paths.log(rule_name, pattern or "job")


def benchmark_path(paths: Layout, rule_name: str, pattern: str = "") -> str:
    """The benchmark file of a rule's job: ``RESULTS/benchmarks/<rule>/<pattern or "job">.tsv`` (as :func:`log_path`)."""
    return paths.benchmark(rule_name, pattern or "job")


def local_inputs(paths: Layout, candidates: Iterable[Any]) -> list[Any]:
    """Only files the workflow builds are inputs; user folders (ImageNet) are checked at parse time.

    Args:
        paths: the run's layout.
        candidates: data paths of a job.

    Returns:
        Those under the results folder, in order.
    """
    return [p for p in candidates if str(p).startswith(f"{paths.root}/")]


def model_resources(config: Config, half: str) -> tuple[int, int, int]:
    """What a model job of one half asks the cluster for (profiles/slurm routes gpu > 0 to the GPU partition).

    Args:
        config: the run's config.
        half: ``vision`` or ``language``.

    Returns:
        ``(gpu, mem_mb, runtime)``: the embedded models ask for no GPU, 4000 MB and 60 minutes; a torchvision or
        Hugging Face model for 16000 MB and 120 minutes, and one GPU unless ``device: cpu``.
    """
    embedded = embedded_vision(config) if half == "vision" else embedded_language(config)
    gpu = 0 if embedded or config["device"] == "cpu" else 1
    return (gpu, 4000, 60) if embedded else (gpu, 16000, 120)


# ------------------------------------------------------------------------ vision: config facts


def embedded_vision(config: Config) -> bool:
    """Is the vision half enabled with the embedded concept world (rather than torchvision folders)?"""
    return bool(config["vision"]["enabled"] and config["vision"]["source"] == "embedded")


def vision_setting(config: Config) -> Setting:
    """The main vision certification setting (``vision.certification``)."""
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


# ------------------------------------------------------------------------ vision data and model


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


def vision_attribute_invocation(config: Config, paths: Layout, concept: str) -> str:
    """The ``vision-attribute`` arguments of one class: its concept set, then every OOD re-discovery set
    (``--also``), all quoted. The per-class rule and the class-group rules run exactly these.

    Args:
        config: the run's config.
        paths: the run's layout.
        concept: the class.

    Returns:
        ``vision-attribute <model options> --threads 1 --data ... --out <concept attributions> [--scorer <additive
        plugin>]... [--also <set> <data> <attributions>]...``.
    """
    vx = config["vision"]["experiment"]
    also = item_options("--also", [(s, vision_eval_data(config, paths, s), paths.attributions(vx, s, concept))
                                   for s in rediscovery_sets(config)])
    world = vision_dirs(paths)["world"]
    counterfactual = f"--counterfactual {q(f'{world}/counterfactual.npz')}" if embedded_vision(config) else ""
    plugins = item_options("--scorer", [(spec,) for spec in vision_additive_plugins(config)])
    return (f"vision-attribute {vision_model_args(config, paths)} --threads 1 --data {q(vision_eval_data(config, paths, 'id'))} "
            f"--n-examples {vision_concept_size(config)} {counterfactual} --concept {q(concept)} --split concept "
            f"--experiment {q(vx)} --out {q(paths.attributions(vx, 'concept', concept))} {plugins} {also}")


def vision_attribute_outputs(config: Config, paths: Layout, concept: str) -> list[str]:
    """The attribution files of one class: its concept set, then each re-discovery set."""
    vx = config["vision"]["experiment"]
    return [paths.attributions(vx, split, concept) for split in ["concept"] + rediscovery_sets(config)]


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


def vision_iou_circuits(config: Config, paths: Layout, concepts: Sequence[str],
                        filter_metrics: Callable[[], str] | None = None) -> list[str]:
    """ID and re-discovered circuits (votes, certificates) of every (class, OOD set) pair of Fig. IoU, in pairs
    order: the class's concept circuit, then its circuit on the set. Arguments as :func:`vision_images_per_class`."""
    return [f for c, e in vision_rediscovered(config, paths, concepts, filter_metrics)
            for split in ("concept", e) for f in vision_circuits(config, paths, split, c)]


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


def vision_attack_inputs(config: Config, paths: Layout, concepts: Sequence[str],
                         filter_metrics: Callable[[], str] | None = None) -> list[str]:
    """(concept attributions, pool attributions) per class of the attack: the pool is the class's images in the
    first re-discovery set, for classes with enough of them. Arguments as :func:`vision_images_per_class`."""
    vx = config["vision"]["experiment"]
    pool_set = config["vision"]["rediscovery_sets"][0]
    return [f for c, e in vision_rediscovered(config, paths, concepts, filter_metrics) if e == pool_set
            for f in (paths.attributions(vx, "concept", c), paths.attributions(vx, e, c))]


def vision_figure_job_inputs(inputs: Callable[..., list[str]], config: Config, paths: Layout, concepts: Sequence[str],
                            filter_metrics: Callable[[], str], wildcards: Any = None) -> list[str]:
    """A rule's input function over the re-discovered classes (``inputs``: :func:`vision_iou_circuits` or
    :func:`vision_attack_inputs`, with the filter checkpoint's ``filter_metrics``); the wildcards name no class."""
    return inputs(config, paths, concepts, filter_metrics)


def attack_options(attack: Mapping[str, Any], setting: Setting, scorer: str) -> str:
    """report-attack options.

    Args:
        attack: a ``vision.attack`` or ``language.attack`` config block (``k_grid``, ``multiples``, ``trials``, ``seed``).
        setting: the certification setting the attack re-runs.
        scorer: the scorer whose certificates it attacks.

    Returns:
        ``--scorer ... --k-grid ... --p-del ... --n0 ... --n ... --seed ... --tau ... --alpha ... --correction ...
        --multiples ... --trials ... --attack-seed ...``.
    """
    return (f"--scorer {q(scorer)} --k-grid {words(attack['k_grid'])} --p-del {number(setting.p_del)} "
            f"--n0 {setting.n0} --n {setting.n} --seed {setting.seed} --tau {number(setting.tau)} "
            f"--alpha {number(setting.alpha)} --correction {setting.correction} --multiples {words(attack['multiples'])} "
            f"--trials {attack['trials']} --attack-seed {attack['seed']}")


# ------------------------------------------------------------------------ certification


def votes_options(setting: Setting) -> str:
    """``--p-del --n0 --n --seed`` of the setting a votes job serves (numbers exact)."""
    return f"--p-del {number(setting.p_del)} --n0 {setting.n0} --n {setting.n} --seed {setting.seed}"


def decision_options(setting: Setting) -> str:
    """``--tau --alpha --correction`` of the setting a certify job serves (numbers exact)."""
    return f"--tau {number(setting.tau)} --alpha {number(setting.alpha)} --correction {setting.correction}"


def votes_job_options(paths: Layout, wildcards: Any) -> str:
    """:func:`votes_options` of the configured setting that a votes job's wildcards name."""
    return votes_options(paths.setting_of(wildcards, votes_only=True))


def decision_job_options(paths: Layout, wildcards: Any) -> str:
    """:func:`decision_options` of the configured setting that a certify job's wildcards name."""
    return decision_options(paths.setting_of(wildcards))


# ------------------------------------------------------------------------ language


def embedded_language(config: Config) -> bool:
    """Is the language half enabled with the embedded tiny GPT-2?"""
    return bool(config["language"]["enabled"] and config["language"]["source"] == "embedded")


def hf_language(config: Config) -> bool:
    """Is the language half enabled with your own model and task files (``source: hf``)?"""
    return bool(config["language"]["enabled"] and config["language"]["source"] == "hf")


def language_dirs(paths: Layout) -> dict[str, str]:
    """The language data the workflow builds: ``dir`` (RESULTS/language) and ``model`` (the embedded model's folder)."""
    ldir = paths.data("language")
    return {"dir": ldir, "model": f"{ldir}/model"}


def language_model_args(config: Config, paths: Layout) -> str:
    """The model options of every language job: ``--model embedded|hf|gpt2 --model-path ... --device ...`` (quoted)."""
    device = config["device"]
    if embedded_language(config):
        return f"--model embedded --model-path {q(language_dirs(paths)['model'])} --device {q(device)}"
    kind = "hf" if hf_language(config) else "gpt2"
    return f"--model {kind} --model-path {q(config['language']['model_path'])} --device {q(device)}"


def language_eval_sets(config: Config, task: str) -> list[str]:
    """Eval sets of a task: ``id_test``, ``ood_test`` (a task file may have none: then left out) and ``validation``."""
    from certified_circuits.language.task_files import task_file_has_ood

    if hf_language(config) and not task_file_has_ood(config["language"]["task_files"][task]):
        return ["id_test", "validation"]
    return ["id_test", "ood_test", "validation"]


def language_model_inputs(config: Config, paths: Layout) -> list[str]:
    """The model file a language job needs as input: the embedded model's config.json, else none."""
    return [f"{language_dirs(paths)['model']}/config.json"] if embedded_language(config) else []


def language_settings(config: Config, task: str) -> list[Setting]:
    """Certification settings of a task.

    Args:
        config: the run's config.
        task: a language task.

    Returns:
        One :class:`Setting` per ``{tau, p_del}`` entry of ``language.settings[task]`` (the other fields from
        ``language.certification``), in config order; without entries, ``language.certification`` itself.
    """
    cert = config["language"]["certification"]
    entries = config["language"]["settings"].get(task) or [{"tau": cert["tau"], "p_del": cert["p_del"]}]
    return [Setting.from_config(cert, **setting) for setting in entries]


# ------------------------------------------------------------------------ explorer


def explorer_circuits(config: Config, paths: Layout, concepts: Sequence[str]) -> list[tuple[str, ...]]:
    """Every circuit the explorer shows.

    Args:
        config: the run's config.
        paths: the run's layout.
        concepts: the vision classes the config certifies.

    Returns:
        ``(experiment, concept, attributions, votes, certificates)`` rows (``report-explorer --circuit``): each
        vision class at the main setting once per scorer of ``vision.scorers``, the main scorer first (the explorer
        groups a class's rows by scorer and shows a switch between them; the first is the main scorer), then the
        others in config order; then each language task at every setting (``eap_ig``, train split).
    """
    rows: list[tuple[str, ...]] = []
    if config["vision"]["enabled"]:
        vx = config["vision"]["experiment"]
        main = vision_main_scorer(config)
        scorers = [main] + [s for s in vision_scorers_all(config) if s != main]
        rows += [(vx, c, paths.attributions(vx, "concept", c), *vision_circuits(config, paths, "concept", c, scorer=s))
                 for c in concepts for s in scorers]
    if config["language"]["enabled"]:
        lx = config["language"]["experiment"]
        rows += [(lx, task, paths.attributions(lx, "train", task), paths.votes(lx, "train", task, "eap_ig", setting),
                  paths.certificates(lx, "train", task, "eap_ig", setting))
                 for task in config["language"]["tasks"] for setting in language_settings(config, task)]
    return rows


# ------------------------------------------------------------------------ MIB (docs/mib.md)


def mib_model_name(config: Config) -> str:
    """MIB's short model name of the language model (the folder ``<task>_<model>``).

    Args:
        config: the run's config.

    Returns:
        ``language.mib.model`` (MIB's model), else ``language.mib.model_name``; else ``gpt2`` for source gpt2
        (MIB's name of GPT-2 Small); else the experiment name with ``-`` for ``_`` (MIB's folder joins task and
        model with ``_``).
    """
    language = config["language"]
    if language["mib"].get("model"):
        return str(language["mib"]["model"])
    if language["mib"].get("model_name"):
        return str(language["mib"]["model_name"])
    if language["source"] == "gpt2":
        return "gpt2"
    return str(language["experiment"]).replace("_", "-")


def language_selected_table(config: Config, paths: Layout) -> str | None:
    """The table of the language settings and K chosen on held-out prompts (``report-sufficiency --select-on``,
    written by the language_tables rule), or None without ``language.selection_set``."""
    if not config["language"]["selection_set"]:
        return None
    return f"{paths.tables(config['language']['experiment'])}/selected_cacc_raw.csv"


def mib_circuits(config: Config, paths: Layout) -> list[tuple[str, str, str, str]]:
    """The certified circuits MIB's grid and export choose from: one per task, chosen at run time.

    Which one: the task's certified setting selected on held-out prompts, the ``certified_setting`` of
    :func:`language_selected_table` (``reports.mib_submission.select_circuit``; the same table, and the same procedure for
    every method, as the language_graphs rule and the explorer). The task's first setting is not taken as such: in
    the embedded config it can certify nothing in (a vacuous or marginal plan). The choice is made by the jobs,
    which get every setting's files and the table; without ``language.selection_set`` there is no held-out
    choice and each task's first setting is the one (alone in the rows).

    Args:
        config: the run's config.
        paths: the run's layout.

    Returns:
        ``(task, attributions, votes, certificates)`` rows (``eap_ig``, train split), by task (config order), then
        setting (config order): every setting with a selection set, else the first only.
    """
    lx = config["language"]["experiment"]
    rows = []
    for task in config["language"]["tasks"]:
        settings = language_settings(config, task)
        for setting in settings if language_selected_table(config, paths) else settings[:1]:
            rows.append((task, paths.attributions(lx, "train", task), paths.votes(lx, "train", task, "eap_ig", setting),
                         paths.certificates(lx, "train", task, "eap_ig", setting)))
    return rows


# ------------------------------------------------------------------------ testbed (circuits with a known answer)

#: the language task whose circuit the embedded model's ground truth names (language/ground_truth.py)
GROUND_TRUTH_TASK = "induction"


def ground_truth_experiments(config: Config) -> dict[str, str]:
    """The experiments whose model has a ground truth, and the stage that writes it.

    Args:
        config: the run's config.

    Returns:
        experiment name -> ``vision`` (the embedded world model compiled by hand, ``vision.train.compiled``, or
        trained with ``vision.train.planted_own``: its class circuits are set by construction) or ``language`` (the embedded model, when ``induction`` is among its
        tasks: the circuit is found by diagnostics and verified by patching). Empty for every other source.
    """
    found = {}
    vision, language = config["vision"], config["language"]
    if vision["enabled"] and embedded_vision(config) and (vision["train"].get("planted_own")
                                                          or vision["train"].get("compiled")):
        found[vision["experiment"]] = "vision"
    if language["enabled"] and embedded_language(config) and GROUND_TRUTH_TASK in language["tasks"]:
        found[language["experiment"]] = "language"
    return found


def testbed_notes(config: Config) -> list[str]:
    """What the ``testbed`` block asks for that this run will not do, in words, for the run's stderr.

    ``testbed.resamples`` > 0 with no experiment that has a ground truth (:func:`ground_truth_experiments`: the
    paper's models, a user's own) is not a config error: ``config.yaml`` sets it for the embedded default and every
    layered config inherits it. It runs no job, and the run says so instead of ignoring it in silence.

    Args:
        config: the run's checked config.

    Returns:
        One line per note ([] when every testbed key applies).
    """
    resamples = int(config.get("testbed", {}).get("resamples", 0))
    if resamples and not ground_truth_experiments(config):
        return [f"testbed.resamples is {resamples}, but no enabled experiment has a ground truth (the embedded world "
                f"model with vision.train.compiled or planted_own, or the embedded language model with the {GROUND_TRUTH_TASK} "
                f"task), so no stability jobs run; set testbed.resamples: 0 to say so in the config"]
    return []


def stability_jobs(config: Config, paths: Layout, concepts: Sequence[str]) -> list[dict[str, Any]]:
    """One stability job per concept and setting of each experiment with a ground truth (``testbed.resamples`` > 0).

    Args:
        config: the run's config.
        paths: the run's layout.
        concepts: the vision classes the config certifies.

    Returns:
        Dicts with ``experiment``, ``concept``, ``scorer``, ``setting``, ``attributions``, ``out``, ``truth_size``
        (the stage's second table, at the truth's size) and ``k_grid``: vision, every class at the main scorer and
        setting; language, the ground-truth task at every setting of it (the held-out selection picks among them).
    """
    if not int(config["testbed"]["resamples"]):
        return []
    rows = []
    for experiment, kind in ground_truth_experiments(config).items():
        if kind == "vision":
            setting, scorer, split = vision_setting(config), vision_main_scorer(config), "concept"
            pairs = [(c, setting) for c in concepts]
            grid = config["vision"]["k_grid"]
        else:
            scorer, split, grid = "eap_ig", "train", config["language"]["k_grid"]
            pairs = [(GROUND_TRUTH_TASK, s) for s in language_settings(config, GROUND_TRUTH_TASK)]
        for concept, setting in pairs:
            rows.append({"experiment": experiment, "concept": concept, "scorer": scorer, "setting": setting,
                         "k_grid": grid, "attributions": paths.attributions(experiment, split, concept),
                         "out": paths.stability(experiment, split, concept, scorer, setting),
                         "truth_size": paths.truth_size(experiment, split, concept, scorer, setting)})
    return rows


def stability_options(job: Mapping[str, Any], testbed: Mapping[str, Any]) -> str:
    """The ``stability`` stage's options of one job of :func:`stability_jobs`.

    Args:
        job: a row of :func:`stability_jobs`.
        testbed: the config's ``testbed`` block (``resamples``, ``seed``).

    Returns:
        ``--scorer S --k-grid ... --p-del --n0 --n --seed --tau --alpha --correction --resamples B --bootstrap-seed s``.
    """
    setting = job["setting"]
    return (f"--scorer {q(job['scorer'])} --k-grid {words(job['k_grid'])} {votes_options(setting)} "
            f"{decision_options(setting)} --resamples {int(testbed['resamples'])} --bootstrap-seed {int(testbed['seed'])}")


def stability_job(planned: Mapping[str, Mapping[str, Any]], paths: Layout, wildcards: Any) -> Mapping[str, Any]:
    """The planned stability job (``planned``: :func:`stability_jobs` by output path) whose output these wildcards
    name."""
    return planned[paths.stability().format(**dict(wildcards.items()))]
