"""MLflow tracking for workflow runs: one parent run per invocation, one child run per job.

Design (DESIGN.md section 7 pitfalls):

* The SQLite store migrates its schema on first use with no cross-process lock, so the database, the
  experiment and the parent run are created once, before any job starts (Snakefile ``onstart`` calls
  :func:`start_workflow_run`). The tracking URI is absolute (``sqlite:////abs/results/mlflow.db``)
  unless ``MLFLOW_TRACKING_URI`` overrides it (e.g. ``http://login-node:5000`` on a cluster, where
  SQLite on a shared filesystem is unsafe).
* The parent run id reaches jobs through the environment (``CC_MLFLOW_PARENT_RUN_ID``), never through
  rule ``params`` (that would rerun every job on every invocation).
* Importing MLflow and opening the store costs seconds; paying that in each of hundreds of short jobs
  would dominate the embedded workflow on 2 cores. So each job, on success, writes a small JSON *job
  record* (stage, rule, wildcards, parameters, metrics, outputs, timings) atomically into
  ``<results>/.tracking/pending/`` (:func:`write_job_record`, called by the CLI), and
  :func:`flush_job_records` turns every pending record into a child run (tagged with rule and
  wildcards, with parameters, metrics and artifacts) when the workflow ends (``onsuccess`` and
  ``onerror``), then moves it to ``logged/``. Records are durable: a killed run's records are logged by
  the next invocation.
* Artifacts: small outputs (CSV, JSON, Markdown, LaTeX, PNG, PDF, text; under 50 MB) are copied into
  the run's artifact store; HDF5 and model files are logged as *references* (path, size in bytes,
  SHA-256) in ``references.json``, to keep the store small.
* Every store call retries on "database is locked" with exponential backoff; tracking never fails a job
  or a workflow that succeeded: errors are logged as warnings and the record stays pending.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from .store import atomic_path

log = logging.getLogger(__name__)

ENV_PARENT = "CC_MLFLOW_PARENT_RUN_ID"
ENV_RECORDS = "CC_TRACKING_DIR"
ENV_RULE = "CC_RULE"
ENV_WILDCARDS = "CC_WILDCARDS"
EXPERIMENT = "certified-circuits"
SMALL_SUFFIXES = {".csv", ".json", ".md", ".tex", ".png", ".pdf", ".txt", ".tsv", ".yaml"}
MAX_ARTIFACT_BYTES = 50 * 2**20

T = TypeVar("T")

_metrics: dict[str, float] = {}


def add_metrics(metrics: Mapping[str, float]) -> None:
    """Stage handlers report key metrics (peaks, K, abstention, radius, timings) for the job record."""
    for key, value in metrics.items():
        try:
            _metrics[key] = float(value)
        except (TypeError, ValueError):
            log.debug("metric %s=%r is not numeric; skipped", key, value)


def collected_metrics() -> dict[str, float]:
    return dict(_metrics)


def tracking_uri(results_dir: str | os.PathLike) -> str:
    """``MLFLOW_TRACKING_URI`` if set, else an absolute SQLite URI in ``results_dir``."""
    override = os.environ.get("MLFLOW_TRACKING_URI")
    if override:
        return override
    return f"sqlite:///{Path(results_dir).resolve() / 'mlflow.db'}"


def retry(call: Callable[[], T], attempts: int = 10, delay: float = 0.2) -> T:
    """Run ``call``, retrying on SQLite lock/contention errors with jittered exponential backoff."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:  # MLflow wraps sqlite3.OperationalError in several exception types
            message = str(exc).lower()
            transient = "locked" in message or "busy" in message or "unique constraint" in message
            if not transient or attempt == attempts - 1:
                raise
            time.sleep(delay * (2**attempt) * (0.5 + random.random()))
    raise RuntimeError("unreachable")


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def start_workflow_run(results_dir: str | os.PathLike, tags: Mapping[str, str] | None = None) -> str:
    """Create the store, experiment and parent run once (Snakefile ``onstart``); return the run id."""
    results_dir = Path(results_dir).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    uri = tracking_uri(results_dir)
    client = _client(uri)
    experiment = retry(lambda: client.get_experiment_by_name(EXPERIMENT))
    if experiment is None:
        artifacts = (results_dir / "mlflow-artifacts").as_uri()
        experiment_id = retry(lambda: client.create_experiment(EXPERIMENT, artifact_location=artifacts))
    else:
        experiment_id = experiment.experiment_id
    run = retry(
        lambda: client.create_run(
            experiment_id,
            run_name=f"workflow-{time.strftime('%Y%m%d-%H%M%S')}",
            tags={"kind": "workflow", "host": socket.gethostname(), **(tags or {})},
        )
    )
    return run.info.run_id


def finish_workflow_run(results_dir: str | os.PathLike, run_id: str, success: bool, summary: Mapping[str, float] | None = None) -> None:
    """Mark the parent run finished or failed, with optional headline metrics."""
    client = _client(tracking_uri(results_dir))
    for key, value in (summary or {}).items():
        retry(lambda: client.log_metric(run_id, key, float(value)))
    retry(lambda: client.set_terminated(run_id, "FINISHED" if success else "FAILED"))


def records_dir(results_dir: str | os.PathLike) -> Path:
    return Path(results_dir) / ".tracking"


def _parse_wildcards(text: str) -> dict[str, str]:
    """Snakemake formats ``{wildcards}`` as ``a=1,b=x`` (values may not contain commas here)."""
    pairs = [item.split("=", 1) for item in text.split(",") if "=" in item]
    return {key.strip(): value.strip() for key, value in pairs}


def write_job_record(stage: str, params: Mapping[str, Any], outputs: Iterable[str | os.PathLike], seconds: float) -> Path | None:
    """Write this job's record if the workflow asked for tracking (``CC_TRACKING_DIR`` set)."""
    directory = os.environ.get(ENV_RECORDS)
    if not directory:
        return None
    record = {
        "stage": stage,
        "rule": os.environ.get(ENV_RULE, stage),
        "wildcards": _parse_wildcards(os.environ.get(ENV_WILDCARDS, "")),
        "parent_run_id": os.environ.get(ENV_PARENT, ""),
        "params": {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in params.items()},
        "metrics": {**collected_metrics(), "seconds": seconds},
        "outputs": [str(Path(p).resolve()) for p in outputs],
        "ended": time.time(),
        "host": socket.gethostname(),
    }
    pending = Path(directory) / "pending"
    pending.mkdir(parents=True, exist_ok=True)
    name = f"{record['ended']:.6f}-{os.getpid()}-{stage}.json"
    with atomic_path(pending / name) as tmp:
        tmp.write_text(json.dumps(record, indent=1))
    return pending / name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _log_record(client, experiment_id: str, record: dict) -> str:
    from mlflow.entities import Metric, Param, RunTag

    tags = {"rule": record["rule"], "stage": record["stage"], "host": record.get("host", "")}
    tags.update({f"wildcard.{k}": v for k, v in record["wildcards"].items()})
    if record.get("parent_run_id"):
        tags["mlflow.parentRunId"] = record["parent_run_id"]
    name = record["rule"] + ("[" + ",".join(f"{k}={v}" for k, v in record["wildcards"].items()) + "]" if record["wildcards"] else "")
    run = retry(lambda: client.create_run(experiment_id, run_name=name[:250], tags=tags))
    run_id = run.info.run_id
    now = int(record["ended"] * 1000)
    params = [Param(k, str(v)[:6000]) for k, v in record["params"].items()]
    metrics = [Metric(k, float(v), now, 0) for k, v in record["metrics"].items()]
    retry(lambda: client.log_batch(run_id, metrics=metrics, params=params, tags=[RunTag("outputs", str(len(record["outputs"])))]))
    references = []
    for output in map(Path, record["outputs"]):
        targets = sorted(p for p in output.rglob("*") if p.is_file()) if output.is_dir() else [output]
        for path in targets:
            if not path.is_file():
                continue
            size = path.stat().st_size
            if path.suffix.lower() in SMALL_SUFFIXES and size <= MAX_ARTIFACT_BYTES:
                retry(lambda: client.log_artifact(run_id, str(path)))
            else:
                references.append({"path": str(path), "bytes": size, "sha256": _sha256(path)})
    if references:
        retry(lambda: client.log_dict(run_id, {"references": references}, "references.json"))
    retry(lambda: client.set_terminated(run_id, "FINISHED"))
    return run_id


def flush_job_records(results_dir: str | os.PathLike) -> int:
    """Log every pending job record as a child run; return how many were logged. Never raises."""
    pending = records_dir(results_dir) / "pending"
    logged = records_dir(results_dir) / "logged"
    files = sorted(pending.glob("*.json")) if pending.is_dir() else []
    if not files:
        return 0
    try:
        client = _client(tracking_uri(results_dir))
        experiment = retry(lambda: client.get_experiment_by_name(EXPERIMENT))
        if experiment is None:
            log.warning("MLflow experiment %s missing; run the workflow (onstart creates it)", EXPERIMENT)
            return 0
    except Exception as exc:  # tracking never fails the workflow
        log.warning("MLflow unavailable (%s); %d job records stay pending", exc, len(files))
        return 0
    logged.mkdir(parents=True, exist_ok=True)
    count = 0
    try:
        from tqdm import tqdm

        iterator = tqdm(files, desc="mlflow: logging job runs", unit="run")
    except ImportError:  # pragma: no cover
        iterator = files
    for path in iterator:
        try:
            record = json.loads(path.read_text())
            _log_record(client, experiment.experiment_id, record)
            shutil.move(str(path), logged / path.name)
            count += 1
        except Exception as exc:
            log.warning("could not log %s to MLflow (%s); it stays pending", path.name, exc)
    return count
