"""MLflow tracking for workflow runs: one parent run per invocation, one child run per job.

Design (docs/architecture.md, section 5; modules: ``common``, ``store``, ``metrics``, ``records``, ``child_runs``, ``parent_runs``):

* The SQLite store migrates its schema on first use with no cross-process lock, so the database, the
  experiment and the parent run are created once, before any job starts (Snakefile ``onstart`` calls
  :func:`start_workflow_run`). The tracking URI is absolute (``sqlite:////abs/results/mlflow.db``)
  unless ``MLFLOW_TRACKING_URI`` overrides it (e.g. ``http://login-node:5000`` on a cluster, where
  SQLite on a shared filesystem is unsafe).
* The parent run id reaches jobs through the environment (``CC_MLFLOW_PARENT_RUN_ID``), never through
  rule ``params`` (that would rerun every job on every invocation). The parent holds the resolved config
  (flattened to dotted parameters, plus ``config.yaml``) and is tagged with the invoking process
  (``host``, ``pid``, ``pid_start``), so a later invocation can tell a killed parent from a live one.
* Importing MLflow and opening the store costs seconds; paying that in each of hundreds of short jobs
  would dominate the embedded workflow on 2 cores. So each job, on success, writes a small JSON *job
  record* (stage, rule, wildcards, parameters, metrics, outputs, start and end times in epoch
  milliseconds) atomically into ``<results>/.tracking/pending/`` (:func:`write_job_record`, called by
  the CLI), and :func:`flush_job_records` turns every pending record into a child run when the workflow
  ends (``onsuccess``/``onerror``; and at exit of a real invocation with nothing to do, where Snakemake
  calls neither hook). Records are durable: a killed run's records are logged by the next invocation.

Records layout (``<results>/.tracking/``)::

    pending/NAME.json           written by a job (atomic)
    claimed/HOST+PID+START/     a flusher claims a record by renaming it here before logging it
    logged/NAME.json            logged; moved here after its run is complete
    failed/NAME.json            unreadable records (never retried)
    parents/RUN_ID.json         one per open parent run: host, pid of the invocation (mtime: last job)

Guarantees:

* Idempotent, concurrency-safe flushing: a record is logged only by the flusher whose ``os.rename``
  into ``claimed/`` won; a claim of a dead flusher (same host, pid gone or reused; other host, older than
  an hour) is retaken. A run left half-logged by a dead flusher is deleted when its record is logged again.
* One live run per job: a job is keyed by rule + wildcards (:func:`job_key`), scoped to the results
  folder. After logging a run, every other live run of that key except the newest (by job start time,
  then record id) is deleted (tagged ``cc.replaced_by`` first), so a job re-executed after a kill or a
  change replaces its earlier run. Concurrent flushers converge on the same survivor.
* Real times: a child run starts and ends at the job's own start and end (``create_run(start_time=)``,
  ``set_terminated(end_time=)``), not at flush time.
* Killed parents: :func:`close_dead_parents` ends every parent of this results folder that is still
  RUNNING but whose invocation is dead as KILLED (end time: the last job it saw finish).
* Artifacts: exactly the job's own outputs. A file output is logged as itself; a directory output as
  its files; an output *stem* (no such file, e.g. ``tables/world/runtime``) as the files ``STEM.EXT``
  beside it. Small files (CSV, JSON, Markdown, LaTeX, PNG, PDF, text; under 50 MB) are copied; HDF5,
  model and data files are *references* (path, bytes, SHA-256) in ``references.json``.
* Every store call retries on "database is locked"; tracking never fails a job or a workflow: errors
  are logged as warnings and the record stays pending. Nothing here imports MLflow unless there is
  something to log or close (:func:`needs_recovery` is a few directory listings).
"""

from __future__ import annotations

from certified_circuits.pipeline.tracking.common import (  # noqa: F401
    ENV_PARENT,
    ENV_RECORDS,
    ENV_RULE,
    ENV_WILDCARDS,
    EXPERIMENT,
    SMALL_SUFFIXES,
    MAX_ARTIFACT_BYTES,
    PARENT_STALE_SECONDS,
    CLAIM_STALE_SECONDS,
    MAX_KEY,
    MAX_PARAM_VALUE,
    MAX_TAG_VALUE,
    BATCH,
    now_ms,
    process_start_time,
    process_identity,
    process_alive,
    records_dir,
    short_digest,
    results_id,
)
from certified_circuits.pipeline.tracking.store import (  # noqa: F401
    browse_command,
    tracking_uri,
    retry,
    mlflow_client,
    find_experiment,
    search_all_runs,
    log_batches,
)
from certified_circuits.pipeline.tracking.metrics import (  # noqa: F401
    add_metrics,
    add_tags,
    collected_metrics,
    collected_tags,
)
from certified_circuits.pipeline.tracking.records import (  # noqa: F401
    decode_wildcards,
    encode_wildcards,
    job_key,
    mlflow_key,
    mlflow_value,
    flatten_config,
    write_job_record,
    read_record,
    sha256_of,
    output_files,
)
from certified_circuits.pipeline.tracking.child_runs import (  # noqa: F401
    dead_claims,
    pending_records,
    flush_job_records,
)
from certified_circuits.pipeline.tracking.parent_runs import (  # noqa: F401
    needs_recovery,
    close_dead_parents,
    start_workflow_run,
    finish_workflow_run,
    recover,
    recover_at_exit,
)

__all__ = [
    "browse_command",
    "decode_wildcards",
    "encode_wildcards",
    "BATCH",
    "CLAIM_STALE_SECONDS",
    "ENV_PARENT",
    "ENV_RECORDS",
    "ENV_RULE",
    "ENV_WILDCARDS",
    "EXPERIMENT",
    "MAX_ARTIFACT_BYTES",
    "MAX_KEY",
    "MAX_PARAM_VALUE",
    "MAX_TAG_VALUE",
    "PARENT_STALE_SECONDS",
    "SMALL_SUFFIXES",
    "add_metrics",
    "close_dead_parents",
    "add_tags",
    "collected_metrics",
    "collected_tags",
    "dead_claims",
    "find_experiment",
    "finish_workflow_run",
    "flatten_config",
    "flush_job_records",
    "job_key",
    "log_batches",
    "mlflow_client",
    "mlflow_key",
    "mlflow_value",
    "needs_recovery",
    "now_ms",
    "output_files",
    "pending_records",
    "process_alive",
    "process_identity",
    "process_start_time",
    "read_record",
    "records_dir",
    "recover",
    "recover_at_exit",
    "results_id",
    "retry",
    "search_all_runs",
    "sha256_of",
    "short_digest",
    "start_workflow_run",
    "tracking_uri",
    "write_job_record",
]
