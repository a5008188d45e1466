# Shared helpers of every rule: the result layout, quoting, job environment. The only .smk file
# with functions; the path layout itself lives in certified_circuits.pipeline.layout (one owner).

import re
import shlex

from certified_circuits.language.task_files import task_file_has_ood
from certified_circuits.pipeline.config import vision_source
from certified_circuits.pipeline.tracking.records import encode_wildcards
from certified_circuits.vision.plugins import is_plugin, load_plugin, plugin_name
from certified_circuits.vision.world import WorldConfig
from certified_circuits.pipeline.layout import SETTING_PATTERN, VOTES_PATTERN, WILDCARD_CONSTRAINTS, Layout, Setting, number

RESULTS = config["results_dir"].rstrip("/")
PATHS = Layout(RESULTS)
VISION = config["vision"]
LANGUAGE = config["language"]
DEVICE = config["device"]
ENV = "../envs/certified-circuits.yaml"
EMBEDDED_VISION = VISION["enabled"] and VISION["source"] == "embedded"
EMBEDDED_LANGUAGE = LANGUAGE["enabled"] and LANGUAGE["source"] == "embedded"
HF_LANGUAGE = LANGUAGE["enabled"] and LANGUAGE["source"] == "hf"
# The world's defaults are the vision-world command's (WorldConfig), read here, never repeated.
WORLD_CONFIG = WorldConfig(**VISION["world"]) if EMBEDDED_VISION else None
# A torchvision source (imagenet, or folders: your own model and images), as one mapping.
VSOURCE = vision_source(VISION) if VISION["enabled"] and not EMBEDDED_VISION else None
# Scorers by their name in result paths: a built-in name, or a plugin's function name (module:function).
VSCORER_SPECS = {plugin_name(s) if is_plugin(s) else s: s for s in VISION.get("scorers", [])} if VISION["enabled"] else {}
VSCORERS = list(VSCORER_SPECS)
VMAIN_SCORER = plugin_name(VISION["main_scorer"]) if VISION["enabled"] and is_plugin(VISION["main_scorer"]) else VISION.get("main_scorer")
# Additive plugins are scored by vision-attribute (cached path); discovery plugins run in vision-discover.
VPLUGIN_KINDS = {name: load_plugin(spec).kind for name, spec in VSCORER_SPECS.items() if is_plugin(spec)}
VADDITIVE_PLUGINS = [VSCORER_SPECS[n] for n, kind in VPLUGIN_KINDS.items() if kind == "additive"]
VDISCOVERY_SCORERS = [n for n, kind in VPLUGIN_KINDS.items() if kind == "discovery"]
# Model jobs of the paper config ask the cluster for a GPU, more memory and time; the embedded default
# and a paper run with `device: cpu` ask for none (profiles/slurm routes gpu > 0 to the GPU partition).
VISION_GPU = 0 if EMBEDDED_VISION or DEVICE == "cpu" else 1
LANGUAGE_GPU = 0 if EMBEDDED_LANGUAGE or DEVICE == "cpu" else 1
VISION_MEM_MB, VISION_RUNTIME = (4000, 60) if EMBEDDED_VISION else (16000, 120)
LANGUAGE_MEM_MB, LANGUAGE_RUNTIME = (4000, 60) if EMBEDDED_LANGUAGE else (16000, 120)
VX = VISION["experiment"]
LX = LANGUAGE["experiment"]
VDIR = PATHS.data("vision")
WORLD = f"{VDIR}/world"
VMODEL = f"{VDIR}/model.pt"
LDIR = PATHS.data("language")
LMODEL = f"{LDIR}/model"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"


wildcard_constraints:
    **WILDCARD_CONSTRAINTS,


def q(value):
    """One shell word: every config string that reaches a command goes through here (or ``:q``)."""
    return shlex.quote(str(value))


def words(values):
    """A list as quoted shell words (the CLI's one list format: space-separated)."""
    return " ".join(q(number(v) if isinstance(v, float) else v) for v in values)


def cli_options(options):
    """A config mapping as quoted options: {n_classes: 3, widths: [8, 16]} -> '--n-classes 3 --widths 8 16'."""
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


def job_env(rule_name):
    """Environment prefix that tells `certified-circuits` which rule and wildcards it serves, so the
    job's MLflow record is tagged with them (the parent run id itself comes from the environment)."""

    def prefix(wildcards):
        return f"CC_RULE={q(rule_name)} CC_WILDCARDS={q(encode_wildcards(dict(wildcards.items())))}"

    return prefix


def log_path(rule_name, pattern=""):
    return PATHS.log(rule_name, pattern or "job")


def benchmark_path(rule_name, pattern=""):
    return PATHS.benchmark(rule_name, pattern or "job")


def local_inputs(paths):
    """Only files the workflow builds are inputs; user folders (ImageNet) are checked at parse time."""
    return [p for p in paths if str(p).startswith(f"{RESULTS}/")]


def chunked(values, size):
    """Consecutive groups of ``size`` values (the last may be shorter), in order."""
    values = list(values)
    return [values[i : i + size] for i in range(0, len(values), size)]


def item_options(flag, rows):
    """Repeated table rows as options: [('a', 'b')] -> "--flag a b" (quoted)."""
    return " ".join(f"{flag} {words(row)}" for row in rows)


# ------------------------------------------------------------------------ vision data and model


def vision_concepts(selection="all"):
    """Class names (embedded) or WordNet ids (paper) to certify, in config order."""
    if selection != "all":
        return list(selection)
    return list(VCONCEPTS)


def vision_eval_data(name):
    """Data file or folder of an eval set."""
    if EMBEDDED_VISION:
        built = {"id": f"{WORLD}/concept.npz", "adversarial": f"{VDIR}/adversarial.npz", "anomaly": f"{VDIR}/anomaly.npz"}
        return built.get(name, f"{WORLD}/{name}.npz")
    return VSOURCE["root"] if name == "id" else VSOURCE["ood_roots"][name]


def vision_concept_size():
    """|D_c|: images per class of the concept datasets."""
    return WORLD_CONFIG.n_concept_per_class if EMBEDDED_VISION else VSOURCE["concept_size"]


def vision_model_args():
    """The model options of every vision job: the world checkpoint, or a torchvision model with its class
    index, weights, layers and preprocessing (only what the config sets; the rest is the model's own)."""
    if EMBEDDED_VISION:
        return f"--model world --checkpoint {q(VMODEL)} --device {q(DEVICE)}"
    options = {"model": VSOURCE["model"], "class_index": VSOURCE["class_index"], "weights": VSOURCE.get("weights")}
    if VSOURCE["layers"] != "auto":
        options["layers"] = VSOURCE["layers"]
    options.update({key: VSOURCE[key] for key in ("image_size", "resize_size", "mean", "std") if VSOURCE.get(key) is not None})
    options["device"] = DEVICE
    return cli_options({key: value for key, value in options.items() if value is not None})


def vision_attribute_invocation(concept):
    """The ``vision-attribute`` arguments of one class: its concept set, then every OOD re-discovery
    set (``--also``), all quoted. The per-class rule and the class-group rules run exactly these."""
    also = item_options("--also", [(s, vision_eval_data(s), PATHS.attributions(VX, s, concept)) for s in REDISCOVERY])
    counterfactual = f"--counterfactual {q(f'{WORLD}/counterfactual.npz')}" if EMBEDDED_VISION else ""
    plugins = item_options("--scorer", [(spec,) for spec in VADDITIVE_PLUGINS])
    return (f"vision-attribute {vision_model_args()} --threads 1 --data {q(vision_eval_data('id'))} "
            f"--n-examples {vision_concept_size()} {counterfactual} --concept {q(concept)} --split concept "
            f"--experiment {q(VX)} --out {q(PATHS.attributions(VX, 'concept', concept))} {plugins} {also}")


def vision_attribute_outputs(concept):
    return [PATHS.attributions(VX, split, concept) for split in ["concept"] + REDISCOVERY]


def vision_model_inputs():
    return [VMODEL] if EMBEDDED_VISION else []


def vision_scorers(split, setting):
    """Scorers evaluated for a (split, setting): all of them at the main setting on the concept sets
    (Table 3), the main scorer elsewhere (radius sweep)."""
    return list(VSCORERS) if split == "concept" and setting == VSETTING else [VMAIN_SCORER]


def setting_of(wildcards):
    """The configured Setting a job serves (the layout's parse-time table, looked up by its tag)."""
    return PATHS.setting_of(wildcards)


def vision_circuits(split, concept, setting=None, scorer=None):
    """(votes, certificates) of one class, split and setting (default: the main setting and scorer)."""
    setting, scorer = setting or VSETTING, scorer or VMAIN_SCORER
    return (PATHS.votes(VX, split, concept, scorer, setting), PATHS.certificates(VX, split, concept, scorer, setting))


def vision_rediscovered():
    """(concept, eval set) pairs re-discovered on an OOD set: classes with at least
    `rediscovery_min_images` images there (filtered sets can lack some; waits for the checkpoint)."""
    pairs = []
    for eval_set in VISION["rediscovery_sets"]:
        available = vision_images_per_class(eval_set)
        pairs += [(c, eval_set) for c in VCONCEPTS if available.get(c, 0) >= VISION["rediscovery_min_images"]]
    return pairs


def vision_images_per_class(eval_set):
    """{concept: number of images} of an eval set."""
    if EMBEDDED_VISION:
        import json

        with open(checkpoints.vision_filter_ood.get().output.metrics) as handle:
            counts = json.load(handle).get(f"per_class_{eval_set}")
        if counts is None:
            return {c: WORLD_CONFIG.n_ood_per_class for c in VCONCEPTS}
        return dict(zip(WORLD_CONFIG.class_names(), counts))
    from certified_circuits.vision.folders import count_class_images

    return count_class_images(vision_eval_data(eval_set), VCONCEPTS)


def vision_iou_circuits(wildcards):
    """ID and re-discovered circuits of every (class, OOD set) pair of Fig. IoU."""
    return [f for c, e in vision_rediscovered() for split in ("concept", e) for f in vision_circuits(split, c)]


def vision_evaluate_circuits(wildcards):
    """(votes, certificates) of every scorer the job evaluates."""
    setting = setting_of(wildcards)
    return [f for scorer in vision_scorers(wildcards.split, setting)
            for f in (PATHS.votes(VX, wildcards.split, wildcards.concept, scorer, setting),
                      PATHS.certificates(VX, wildcards.split, wildcards.concept, scorer, setting))]


def vision_evaluate_sets(wildcards):
    """Eval sets of a job: every set for the concept datasets at the main setting (Tables 1 and 3), ID
    only for the radius sweep (other |D| or p_del: App. D reports ID cACC and sizes)."""
    main = wildcards.split == "concept" and setting_of(wildcards) == VSETTING
    return VISION["eval_sets"] if main else ["id"]


def vision_attack_inputs(wildcards):
    """(concept attributions, pool attributions) per class: the pool is the class's images in the first
    re-discovery set, for classes with enough of them (waits for the checkpoint)."""
    pool_set = VISION["rediscovery_sets"][0]
    return [f for c, e in vision_rediscovered() if e == pool_set
            for f in (PATHS.attributions(VX, "concept", c), PATHS.attributions(VX, e, c))]


def attack_options(attack, setting, scorer):
    """report-attack options from an attack config block and the certification setting it re-runs."""
    return (f"--scorer {q(scorer)} --k-grid {words(attack['k_grid'])} --p-del {number(setting.p_del)} "
            f"--n0 {setting.n0} --n {setting.n} --seed {setting.seed} --tau {number(setting.tau)} "
            f"--alpha {number(setting.alpha)} --correction {setting.correction} --multiples {words(attack['multiples'])} "
            f"--trials {attack['trials']} --attack-seed {attack['seed']}")



# ------------------------------------------------------------------------ certification


def votes_options(wildcards):
    """--p-del, --n0, --n, --seed of the configured setting a votes job serves."""
    s = PATHS.setting_of(wildcards, votes_only=True)
    return f"--p-del {number(s.p_del)} --n0 {s.n0} --n {s.n} --seed {s.seed}"


def decision_options(wildcards):
    """--tau, --alpha, --correction of the configured setting a certify job serves."""
    s = PATHS.setting_of(wildcards)
    return f"--tau {number(s.tau)} --alpha {number(s.alpha)} --correction {s.correction}"



# ------------------------------------------------------------------------ language


def language_model_args():
    if EMBEDDED_LANGUAGE:
        return f"--model embedded --model-path {q(LMODEL)} --device {q(DEVICE)}"
    kind = "hf" if HF_LANGUAGE else "gpt2"
    return f"--model {kind} --model-path {q(LANGUAGE['model_path'])} --device {q(DEVICE)}"


def language_eval_sets(task):
    """Eval sets of a task: id_test, ood_test (a task file may have none) and validation."""
    if HF_LANGUAGE and not task_file_has_ood(LANGUAGE["task_files"][task]):
        return ["id_test", "validation"]
    return ["id_test", "ood_test", "validation"]


def language_model_inputs():
    return [f"{LDIR}/model/config.json"] if EMBEDDED_LANGUAGE else []


def language_settings(task):
    """Certification settings of a task: one per {tau, p_del} entry of the config, else certification's tau and p_del."""
    cert = LANGUAGE["certification"]
    entries = LANGUAGE["settings"].get(task) or [{"tau": cert["tau"], "p_del": cert["p_del"]}]
    return [Setting.from_config(cert, **setting) for setting in entries]


# ------------------------------------------------------------------------ explorer


def explorer_circuits():
    """(experiment, concept, attributions, votes, certificates) of every circuit the explorer shows: each vision
    class at the main scorer and setting, each language task at every setting."""
    rows = []
    if VISION["enabled"]:
        rows += [(VX, c, PATHS.attributions(VX, "concept", c), *vision_circuits("concept", c)) for c in VCONCEPTS]
    if LANGUAGE["enabled"]:
        rows += [(LX, task, PATHS.attributions(LX, "train", task), PATHS.votes(LX, "train", task, "eap_ig", setting),
                  PATHS.certificates(LX, "train", task, "eap_ig", setting))
                 for task in LANGUAGE["tasks"] for setting in language_settings(task)]
    return rows
