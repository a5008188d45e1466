# MLflow: parent run per invocation, child run per job (certified_circuits.tracking).

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
