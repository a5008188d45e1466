# Shared by every rule: the result layout, the run's constants, and the planning functions of
# certified_circuits.pipeline.jobs (which jobs exist, their options and paths; tested in
# tests/unit/test_pipeline_jobs.py) bound to this run's config, PATHS and VCONCEPTS. The path layout
# itself lives in certified_circuits.pipeline.layout (one owner). The only functions defined here are
# thin wrappers that turn Snakemake objects (wildcards, a checkpoint's output) into plain values.

import re
from functools import partial

from certified_circuits.pipeline import jobs
from certified_circuits.pipeline.jobs import attack_options, chunked, cli_options, item_options, job_env, q, words
from certified_circuits.pipeline.layout import SETTING_PATTERN, VOTES_PATTERN, WILDCARD_CONSTRAINTS, Layout, Setting

RESULTS = config["results_dir"].rstrip("/")
PATHS = Layout(RESULTS)
VISION = config["vision"]
LANGUAGE = config["language"]
DEVICE = config["device"]
ENV = "../envs/certified-circuits.yaml"
EMBEDDED_VISION = jobs.embedded_vision(config)
EMBEDDED_LANGUAGE = jobs.embedded_language(config)
HF_LANGUAGE = jobs.hf_language(config)
# Scorers by their name in result paths: a built-in name, or a plugin's function name (module:function).
VSCORER_SPECS = jobs.vision_scorer_specs(config)
VMAIN_SCORER = jobs.vision_main_scorer(config)
# Additive plugins are scored by vision-attribute (cached path); discovery plugins run in vision-discover.
VDISCOVERY_SCORERS = jobs.vision_discovery_scorers(config)
# Model jobs of the paper config ask the cluster for a GPU, more memory and time; the embedded default
# and a paper run with `device: cpu` ask for none (profiles/slurm routes gpu > 0 to the GPU partition).
VISION_GPU, VISION_MEM_MB, VISION_RUNTIME = jobs.model_resources(config, "vision")
LANGUAGE_GPU, LANGUAGE_MEM_MB, LANGUAGE_RUNTIME = jobs.model_resources(config, "language")
VX = VISION["experiment"]
LX = LANGUAGE["experiment"]
VDIR = jobs.vision_dirs(PATHS)["dir"]
WORLD = jobs.vision_dirs(PATHS)["world"]
LDIR = jobs.language_dirs(PATHS)["dir"]
FIGURES = f"{RESULTS}/figures"


wildcard_constraints:
    **WILDCARD_CONSTRAINTS,


# ------------------------------------------------------------------------ the run's planning functions

log_path = partial(jobs.log_path, PATHS)
benchmark_path = partial(jobs.benchmark_path, PATHS)
local_inputs = partial(jobs.local_inputs, PATHS)
vision_concepts = partial(jobs.vision_concepts, VCONCEPTS)
vision_eval_data = partial(jobs.vision_eval_data, config, PATHS)
vision_concept_size = partial(jobs.vision_concept_size, config)
vision_model_args = partial(jobs.vision_model_args, config, PATHS)
vision_model_inputs = partial(jobs.vision_model_inputs, config, PATHS)
vision_attribute_invocation = partial(jobs.vision_attribute_invocation, config, PATHS)
vision_attribute_outputs = partial(jobs.vision_attribute_outputs, config, PATHS)
vision_scorers = partial(jobs.vision_scorers, config)
vision_circuits = partial(jobs.vision_circuits, config, PATHS)
language_model_args = partial(jobs.language_model_args, config, PATHS)
language_eval_sets = partial(jobs.language_eval_sets, config)
language_model_inputs = partial(jobs.language_model_inputs, config, PATHS)
language_settings = partial(jobs.language_settings, config)
explorer_circuits = partial(jobs.explorer_circuits, config, PATHS, VCONCEPTS)


# ------------------------------------------------------------------------ wrappers of Snakemake objects


def filter_metrics():
    """The vision_filter_ood checkpoint's metrics file (Snakemake waits for the checkpoint until it has run)."""
    return checkpoints.vision_filter_ood.get().output.metrics


def votes_options(wildcards):
    """--p-del, --n0, --n, --seed of the configured setting a votes job serves."""
    return jobs.votes_options(PATHS.setting_of(wildcards, votes_only=True))


def decision_options(wildcards):
    """--tau, --alpha, --correction of the configured setting a certify job serves."""
    return jobs.decision_options(PATHS.setting_of(wildcards))


def vision_evaluate_circuits(wildcards):
    """(votes, certificates) of every scorer a vision_evaluate job evaluates."""
    return jobs.vision_evaluate_circuits(config, PATHS, wildcards.split, wildcards.concept, PATHS.setting_of(wildcards))


def vision_evaluate_sets(wildcards):
    """Eval sets of a vision_evaluate job."""
    return jobs.vision_evaluate_sets(config, wildcards.split, PATHS.setting_of(wildcards))


def vision_iou_circuits(wildcards):
    """ID and re-discovered circuits of Fig. IoU (waits for the checkpoint)."""
    return jobs.vision_iou_circuits(config, PATHS, VCONCEPTS, filter_metrics)


def vision_attack_inputs(wildcards):
    """(concept attributions, pool attributions) per class of the attack (waits for the checkpoint)."""
    return jobs.vision_attack_inputs(config, PATHS, VCONCEPTS, filter_metrics)


# the testbed's stability jobs (pipeline/jobs.py stability_jobs), by output path; rules/testbed.smk binds them
STABILITY_JOBS = {job["out"]: job for job in jobs.stability_jobs(config, PATHS, VCONCEPTS)}


def stability_job(wildcards):
    """The planned stability job whose output these wildcards name."""
    return STABILITY_JOBS[PATHS.stability().format(**dict(wildcards.items()))]
