# MLflow: parent run per invocation, child run per job (certified_circuits.pipeline.tracking).
#
# onstart creates the parent run (tagged with this process's host and pid, holding the resolved config
# as parameters and config.yaml) after ending parents of killed invocations as KILLED; jobs leave JSON
# records; onsuccess/onerror log the pending records as child runs and close the parent; onstart also starts the
# progress lines and onsuccess ends with the end-of-run message (paths, findings, warning counts). Snakemake calls
# no hook at all when there is nothing to do, so a real (not dry) invocation also logs pending records
# and closes dead parents when it exits: a few directory listings, MLflow is imported only if needed.

import sys

MLFLOW_ENABLED = config["mlflow"]["enabled"]
MLFLOW_PARENT = {}
# What the including Snakefile may define (tests include this file from a minimal Snakefile too). RESULTS is required;
# RUN_LOCKS (flocks taken at parse time) and PLAN_TAGS (the parse-time plans as tags) are optional.
RUN_LOCKS = globals().setdefault("RUN_LOCKS", {})
PLAN_TAGS = globals().get("PLAN_TAGS", {})


def _real_run():
    """At exit: was this a real run (not a dry run, lint, report or listing) with hooks enabled?"""
    settings = workflow.execution_settings
    return workflow.executor_plugin is not None and not workflow.dryrun and not (settings and settings.no_hooks)


if MLFLOW_ENABLED and workflow.is_main_process:
    from certified_circuits.pipeline import tracking as _tracking

    _tracking.recover_at_exit(RESULTS, _real_run)


PROGRESS = {}  # the progress thread (pipeline/tracking/progress.py): stopped before the end-of-run message


def _end_of_run():
    """Stop the progress lines, then say where the results are (reports/findings.py end_message: at most 25 lines)."""
    if "thread" in PROGRESS:
        PROGRESS["thread"].stop()
    from certified_circuits.reports.findings import end_message

    print(*end_message(RESULTS), sep="\n", file=sys.stderr)


onstart:
    # Every running job's latest log line reaches the terminal at least once a minute (its stderr goes to its log).
    from certified_circuits.pipeline.tracking.progress import start_progress

    PROGRESS["thread"] = start_progress(workflow, RESULTS)
    # This process holds the results folder's flock now (taken at parse time, or here if that missed a real
    # run): no live writer of another run is there, so temporary files of writers killed earlier are stale.
    from certified_circuits.storage.atomic import remove_stale_temporaries
    from certified_circuits.storage.locks import RunLocked, lock_results

    if "results" not in RUN_LOCKS:
        try:
            RUN_LOCKS["results"] = lock_results(RESULTS)
        except RunLocked as held:
            raise WorkflowError(str(held)) from None
    if stale := remove_stale_temporaries(RESULTS):
        print(f"removed {stale} temporary files left by killed jobs under {RESULTS}", file=sys.stderr)
    if MLFLOW_ENABLED:
        from certified_circuits.pipeline import tracking

        try:
            run_id = tracking.start_workflow_run(
                RESULTS,
                tags={"configfiles": " ".join(map(str, workflow.configfiles)), **PLAN_TAGS},
                config=config,
            )
            MLFLOW_PARENT["run_id"] = run_id
            os.environ[tracking.ENV_PARENT] = run_id
            os.environ[tracking.ENV_RECORDS] = os.path.abspath(str(tracking.records_dir(RESULTS)))
            print(f"MLflow: parent run {run_id} at {tracking.tracking_uri(RESULTS)}", file=sys.stderr)
        except Exception as exc:  # tracking never blocks the science
            print(f"MLflow unavailable ({exc}); continuing without tracking", file=sys.stderr)


def _finish(success):
    if not MLFLOW_ENABLED:
        return
    from certified_circuits.pipeline import tracking

    logged = tracking.flush_job_records(RESULTS)
    run_id = MLFLOW_PARENT.get("run_id")
    if run_id:
        try:
            tracking.finish_workflow_run(RESULTS, run_id, success, {"jobs_logged": logged})
        except Exception as exc:
            print(f"MLflow: could not close the parent run ({exc})", file=sys.stderr)
    print(
        f"MLflow: {logged} job runs logged; browse with: {tracking.browse_command(RESULTS)}",
        file=sys.stderr,
    )


onsuccess:
    _finish(True)
    _end_of_run()


onerror:
    if "thread" in PROGRESS:
        PROGRESS["thread"].stop()
    _finish(False)
