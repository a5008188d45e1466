# certified-circuits workflow: attribution -> votes -> certificates -> evaluation -> tables/figures.
#
#   snakemake --cores all                                   # embedded default (config.yaml)
#   snakemake --cores all --configfile configs/paper.yaml   # the paper's setup on real data
#   snakemake --profile profiles/slurm --configfile configs/paper.yaml
#
# Rules are thin: each calls one `certified-circuits <stage>` with explicit inputs and outputs, through
# stage_command (pipeline/plans/common.py: the job's environment in front, the stage's stderr to the job's log).
# Config: config.yaml (the embedded default) is read only when no --configfile is given, so a paper
# run never inherits an embedded choice; every other default lives in config.schema.yaml. Layer
# overrides after a full config: --configfile configs/paper.yaml my_paths.yaml.

import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from certified_circuits.pipeline.config import check_workflow_config
from certified_circuits.pipeline.config_errors import ConfigError
from certified_circuits.pipeline.snakemake_args import snakemake_runs_jobs
from certified_circuits.pipeline.plans.setting_plans import plan_records, plan_tags
from certified_circuits.storage.locks import CHECKOUT_LOCK, RunLocked, hold_lock, lock_results

min_version("9.0")


if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


SCHEMA = os.path.join(workflow.basedir, "config.schema.yaml")
# HDF5 file locking breaks on NFS/Lustre; each output has exactly one writer, so it is not needed.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")
try:  # each file strictly, the schema (defaults set), then pipeline/config.py's checks and every setting's plan
    CONFIG_FILES = workflow.overwrite_configfiles or [os.path.join(workflow.basedir, "config.yaml")]
    CHECKED = check_workflow_config(config, CONFIG_FILES, SCHEMA)
    if workflow.is_main_process:  # CC_PROGRESS_SECONDS, checked before any job (its thread runs only here)
        from certified_circuits.pipeline.tracking.progress import progress_interval

        progress_interval()
except (ConfigError, ValueError) as error:  # the project's own message alone: no Snakemake frame around it
    print(error, file=sys.stderr)
    sys.exit(2)
VCONCEPTS = CHECKED.concepts

# One live workflow per results folder, whatever checkout it starts from, and a proof of life per checkout.
# The main process (not a job, not a cluster submission) holds kernel locks (flock) until it exits, however it
# exits: a shared one on the checkout's .snakemake/certified-circuits.run.lock (bin/workflow removes a Snakemake
# lock only when no process holds it) and, for a run that may write (not -n, --unlock, --lint, listings), an
# exclusive one on RESULTS/.certified-circuits.lock, recorded with pid, host, start time and checkout. onstart
# takes it if this check missed the run, and clears temporary files only while holding it.
RUN_LOCKS = {}
if workflow.is_main_process:
    try:
        RUN_LOCKS["checkout"] = hold_lock(CHECKOUT_LOCK, shared=True)
        if snakemake_runs_jobs(sys.argv[1:]):
            RUN_LOCKS["results"] = lock_results(config["results_dir"].rstrip("/"))
    except RunLocked as held:
        raise WorkflowError(str(held)) from None
# Marginal settings (one side impossible, frequent empty sub-datasets): said now, before any job, tagged on the
# MLflow parent run, and written into the results (plan/warnings.json), whence the run's warning list, summary.md,
# the explorer and the radius-sweep figure show them.
PLAN_WARNINGS = [line for p in CHECKED.plans for line in p.lines()]
PLAN_TAGS = plan_tags(CHECKED.plans)  # the MLflow parent run's cc.plan.* tags (rules/tracking.smk)
PLAN_RECORDS = plan_records(CHECKED.plans)  # written into the results: RESULTS/plan/warnings.json (rules/reports.smk)
if PLAN_WARNINGS and workflow.is_main_process:
    print("Certification plan warnings (bin/certified-circuits plan --help; README 'Will my setting certify anything?'):",
          *(f"  - {line}" for line in PLAN_WARNINGS), sep="\n", file=sys.stderr)


# One rules file per domain; the planning functions of each are pipeline/plans/<same name>.py.
include: "rules/common.smk"


if VISION["enabled"]:

    include: "rules/vision.smk"
    include: "rules/vision_reports.smk"


if LANGUAGE["enabled"]:

    include: "rules/language.smk"
    include: "rules/language_reports.smk"


include: "rules/certification.smk"
include: "rules/testbed.smk"
include: "rules/reports.smk"


# Every result of the run, by domain (pipeline/plans/: each domain's report rules and what they write).
rule all:
    input:
        reports.theory_targets(PATHS),
        vision_reports.vision_targets(config, PATHS, VCONCEPTS),
        language_reports.language_targets(config, PATHS),
        testbed.testbed_targets(config, PATHS, VCONCEPTS),
        reports.run_targets(PATHS),
    default_target: True


include: "rules/tracking.smk"
