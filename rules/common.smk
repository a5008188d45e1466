# Shared by every rule: the result layout, the run's constants, and the planning functions of
# certified_circuits.pipeline.jobs (which jobs exist, their options and paths; tested in
# tests/unit/test_pipeline_jobs.py) bound to this run's config, PATHS and VCONCEPTS. The path layout
# itself lives in certified_circuits.pipeline.layout (one owner). The one function defined here is the
# thin wrapper of a Snakemake object (the filter checkpoint's output); a job's wildcards go to pipeline/jobs.py.

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


# ------------------------------------------------------------------------ the one wrapper of a Snakemake object


def filter_metrics():
    """The vision_filter_ood checkpoint's metrics file (Snakemake waits for the checkpoint until it has run)."""
    return checkpoints.vision_filter_ood.get().output.metrics


# input and params functions of a job's wildcards (the figure inputs wait for the checkpoint)
votes_options = partial(jobs.votes_job_options, PATHS)
decision_options = partial(jobs.decision_job_options, PATHS)
vision_evaluate_circuits = partial(jobs.vision_evaluate_job_circuits, config, PATHS)
vision_evaluate_sets = partial(jobs.vision_evaluate_job_sets, config, PATHS)
vision_iou_circuits = partial(jobs.vision_figure_job_inputs, jobs.vision_iou_circuits, config, PATHS, VCONCEPTS, filter_metrics)
vision_attack_inputs = partial(jobs.vision_figure_job_inputs, jobs.vision_attack_inputs, config, PATHS, VCONCEPTS,
                               filter_metrics)

# the testbed's stability jobs (pipeline/jobs.py stability_jobs), by output path; rules/testbed.smk binds them
STABILITY_JOBS = {job["out"]: job for job in jobs.stability_jobs(config, PATHS, VCONCEPTS)}
stability_job = partial(jobs.stability_job, STABILITY_JOBS, PATHS)
