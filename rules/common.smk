# Shared by every rule: the result layout, the run's constants, and the planning functions of
# certified_circuits.pipeline.plans (which jobs exist, their options, inputs and outputs; one module per rules file:
# plans/vision.py for rules/vision.smk, ...; tested in tests/unit/pipeline/test_pipeline_jobs.py) bound to this run's config,
# PATHS and VCONCEPTS. The path layout itself lives in certified_circuits.pipeline.layout (one owner). The one function
# defined here is the thin wrapper of a Snakemake object (the filter checkpoint's output); a job's wildcards go to
# the plans' *_job_* functions.

import re
from functools import partial

from certified_circuits.pipeline.layout import SETTING_PATTERN, VOTES_PATTERN, WILDCARD_CONSTRAINTS, Layout
from certified_circuits.pipeline.plans import certification, common, language, language_reports, reports, tables
from certified_circuits.pipeline.plans import testbed, vision, vision_reports
from certified_circuits.pipeline.plans.common import (
    chunked,
    cli_options,
    input_dir,
    input_pairs,
    item_options,
    job_env,
    output_dir,
    output_stem,
    pair_options,
    q,
    stage_command,
    words,
)

RESULTS = config["results_dir"].rstrip("/")
PATHS = Layout(RESULTS)
VISION = config["vision"]
LANGUAGE = config["language"]
DEVICE = config["device"]
ENV = "../envs/certified-circuits.yaml"
EMBEDDED_VISION = vision.embedded_vision(config)
EMBEDDED_LANGUAGE = language.embedded_language(config)
HF_LANGUAGE = language.hf_language(config)
# Scorers by their name in result paths: a built-in name, or a plugin's function name (module:function).
VMAIN_SCORER = vision.vision_main_scorer(config)
# Additive plugins are scored by vision-attribute (cached path); discovery plugins run in vision-discover.
VDISCOVERY_SCORERS = vision.vision_discovery_scorers(config)
# Model jobs of the paper config ask the cluster for a GPU, more memory and time; the embedded default
# and a paper run with `device: cpu` ask for none, and any model job asks for one when `device` names CUDA
# (profiles/slurm routes gpu > 0 to the GPU partition). Votes jobs never need one (plans/common.py vote_device_option).
VISION_GPU, VISION_MEM_MB, VISION_RUNTIME = common.model_resources(EMBEDDED_VISION, DEVICE)
LANGUAGE_GPU, LANGUAGE_MEM_MB, LANGUAGE_RUNTIME = common.model_resources(EMBEDDED_LANGUAGE, DEVICE)
# what a job of each kind asks for: a model job of either half, a job on the embedded world (render, filter, truth)
VISION_MODEL_JOB = {"mem_mb": VISION_MEM_MB, "runtime": VISION_RUNTIME, "gpu": VISION_GPU}
LANGUAGE_MODEL_JOB = {"mem_mb": LANGUAGE_MEM_MB, "runtime": LANGUAGE_RUNTIME, "gpu": LANGUAGE_GPU}
WORLD_JOB = {"mem_mb": 4000, "runtime": 15}
VOTES_JOB = {"mem_mb": 2000, "runtime": 10}  # votes from cached scores (votes; stability, over resamples)
VX = VISION["experiment"]
LX = LANGUAGE["experiment"]
VDIR = vision.vision_dirs(PATHS)["dir"]
WORLD = vision.vision_dirs(PATHS)["world"]
LDIR = language.language_dirs(PATHS)["dir"]
# a task's certification settings, from their one builder (pipeline/plans/language.py; the vision setting's is
# pipeline/plans/vision.py, rules/vision.smk)
language_settings = partial(language.language_settings, config)
GROUND_TRUTHS = testbed.ground_truth_experiments(config)


wildcard_constraints:
    **WILDCARD_CONSTRAINTS,


# ------------------------------------------------------------------------ the run's planning functions

log_path = partial(common.log_path, PATHS)
benchmark_path = partial(common.benchmark_path, PATHS)
# a job's name under its rule's folder of logs and benchmarks, for the rules with one job per votes file, per
# certificate (votes and a decision setting) or per sufficiency table (a class or task, an eval split, a setting)
PER_VOTES = f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{VOTES_PATTERN}"
PER_CERTIFICATE = f"{{experiment}}/{{split}}/{{concept}}/{{scorer}}/{SETTING_PATTERN}"
PER_SUFFICIENCY = f"{{split}}/{{concept}}/{SETTING_PATTERN}"
local_inputs = partial(common.local_inputs, PATHS)
vision_concepts = partial(vision.vision_concepts, VCONCEPTS)
vision_eval_data = partial(vision.vision_eval_data, config, PATHS)
vision_model_args = partial(vision.vision_model_args, config, PATHS)
vision_model_inputs = partial(vision.vision_model_inputs, config, PATHS)
vision_circuits = partial(vision.vision_circuits, config, PATHS)
language_model_args = partial(language.language_model_args, config, PATHS)
language_model_inputs = partial(language.language_model_inputs, config, PATHS)


# ------------------------------------------------------------------------ the one wrapper of a Snakemake object


def filter_metrics():
    """The vision_filter_ood checkpoint's metrics file (Snakemake waits for the checkpoint until it has run)."""
    return checkpoints.vision_filter_ood.get().output.metrics


# the testbed's stability jobs (pipeline/plans/testbed.py stability_jobs), by output path; rules/testbed.smk binds them
STABILITY_JOBS = {job["out"]: job for job in testbed.stability_jobs(config, PATHS, VCONCEPTS)}
