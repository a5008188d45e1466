# certified-circuits workflow: attribution -> votes -> certificates -> evaluation -> tables/figures.
#
#   snakemake --cores all                                   # embedded default (config.yaml)
#   snakemake --cores all --configfile configs/paper.yaml   # the paper's setup on real data
#   snakemake --profile profiles/slurm --configfile configs/paper.yaml
#
# Rules are thin: each calls one `certified-circuits <stage>` with explicit inputs and outputs.

import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


# HDF5 file locking breaks on NFS/Lustre; each output has exactly one writer, so it is not needed.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")


validate(config, "config.schema.yaml")


include: "rules/common.smk"
include: "rules/checks.smk"
include: "rules/vision.smk"
include: "rules/language.smk"
include: "rules/certification.smk"
include: "rules/reports.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True


onstart:
    if config.get("mlflow", {}).get("enabled", True):
        from certified_circuits import tracking

        try:
            run_id = tracking.start_workflow_run(RESULTS, tags={"configfiles": " ".join(map(str, workflow.configfiles))})
            os.environ[tracking.ENV_PARENT] = run_id
            os.environ[tracking.ENV_RECORDS] = os.path.abspath(str(tracking.records_dir(RESULTS)))
            print(f"MLflow: parent run {run_id} at {tracking.tracking_uri(RESULTS)}", file=sys.stderr)
        except Exception as exc:  # tracking never blocks the science
            print(f"MLflow unavailable ({exc}); continuing without tracking", file=sys.stderr)


def _finish(success):
    if not config.get("mlflow", {}).get("enabled", True):
        return
    from certified_circuits import tracking

    logged = tracking.flush_job_records(RESULTS)
    run_id = os.environ.get(tracking.ENV_PARENT)
    if run_id:
        try:
            tracking.finish_workflow_run(RESULTS, run_id, success, {"jobs_logged": logged})
        except Exception as exc:
            print(f"MLflow: could not close the parent run ({exc})", file=sys.stderr)
    print(f"MLflow: {logged} job runs logged; browse with: mlflow ui --backend-store-uri {tracking.tracking_uri(RESULTS)}",
          file=sys.stderr)


onsuccess:
    _finish(True)
    summary = f"{RESULTS}/summary.md"
    if os.path.exists(summary):
        print(open(summary).read(), file=sys.stderr)


onerror:
    _finish(False)
