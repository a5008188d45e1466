"""Parent runs: one MLflow run per workflow invocation (started in ``onstart``, finished in ``onsuccess`` /
``onerror``), its liveness markers, and the recovery of runs and records a killed invocation left behind.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import logging
import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from certified_circuits.storage.atomic import write_json
from certified_circuits.pipeline.tracking import common  # process_identity via the module: tests patch it there
from certified_circuits.pipeline.tracking.common import (
    MAX_TAG_VALUE,
    PARENT_STALE_SECONDS,
    now_ms,
    process_alive,
    records_dir,
    results_id,
)
from certified_circuits.pipeline.tracking.store import (
    find_experiment,
    log_batches,
    mlflow_client,
    retry,
    search_all_runs,
    tracking_uri,
)
from certified_circuits.pipeline.tracking.records import flatten_config, mlflow_key
from certified_circuits.pipeline.tracking.child_runs import dead_claims, flush_job_records, pending_records

log = logging.getLogger("certified_circuits.pipeline.tracking")


def _marker(results_dir: str | os.PathLike, run_id: str) -> Path:
    return records_dir(results_dir) / "parents" / f"{run_id}.json"


def _dead_markers(results_dir: str | os.PathLike, stale_after: float = PARENT_STALE_SECONDS) -> list[tuple[Path, dict]]:
    folder = records_dir(results_dir) / "parents"
    if not folder.is_dir():
        return []
    dead = []
    for path in sorted(folder.glob("*.json")):
        try:
            marker = json.loads(path.read_text())
            seen = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if not process_alive(
            marker.get("host", ""), marker.get("pid", ""), marker.get("pid_start", ""), seen, stale_after
        ):
            dead.append((path, {**marker, "last_seen_ms": int(seen * 1000)}))
    return dead


def needs_recovery(results_dir: str | os.PathLike) -> bool:
    """Is there anything to log (pending records, records of a dead flusher) or close (a dead parent)?

    Directory listings only: callable at every invocation without importing MLflow."""
    root = records_dir(results_dir)
    if not root.is_dir():
        return False
    return bool(pending_records(results_dir) or dead_claims(root) or _dead_markers(results_dir))


def _end_killed(client, run, last_seen_ms: int | None, experiment_id: str) -> None:
    """End a RUNNING parent as KILLED at the last moment it was known to be alive."""
    end = max(run.info.start_time or 0, last_seen_ms or 0)
    children = retry(
        lambda: client.search_runs(
            [experiment_id],
            f"tags.mlflow.parentRunId = '{run.info.run_id}'",
            max_results=1,
            order_by=["attributes.end_time DESC"],
        )
    )
    if children and children[0].info.end_time:
        end = max(end, children[0].info.end_time)
    retry(lambda: client.set_terminated(run.info.run_id, "KILLED", end_time=end))


def close_dead_parents(
    results_dir: str | os.PathLike, client=None, stale_after: float = PARENT_STALE_SECONDS
) -> list[str]:
    """End as KILLED every parent run of this results folder still RUNNING whose invocation is dead.

    Dead: same host and the pid is gone (or reused); another host and no job finished for
    ``stale_after`` seconds. Returns the ids of the runs it ended."""
    results_dir = Path(results_dir)
    markers = _dead_markers(results_dir, stale_after)
    if client is None and not markers:
        return []
    client = client or mlflow_client(tracking_uri(results_dir))
    experiment_id = find_experiment(client, results_dir, create=False)
    closed: list[str] = []
    if experiment_id is None:
        return closed
    for path, marker in markers:
        try:
            run = retry(lambda: client.get_run(marker["run_id"]))
            if run.info.status == "RUNNING":
                _end_killed(client, run, marker["last_seen_ms"], experiment_id)
                closed.append(run.info.run_id)
        except Exception as exc:
            if getattr(exc, "error_code", "") != "RESOURCE_DOES_NOT_EXIST":  # else: not in this store
                log.warning("could not close parent run %s (%s)", marker.get("run_id"), exc)
                continue
        path.unlink(missing_ok=True)
    # parents without a marker (e.g. the marker folder was removed): judge them by their tags
    running = search_all_runs(
        client,
        experiment_id,
        f"tags.kind = 'workflow' and tags.results_id = '{results_id(results_dir)}' and attributes.status = 'RUNNING'",
    )
    for run in running:
        if run.info.run_id in closed or _marker(results_dir, run.info.run_id).exists():
            continue
        tags = run.data.tags
        if process_alive(
            tags.get("host", ""),
            tags.get("pid", ""),
            tags.get("pid_start", ""),
            (run.info.start_time or 0) / 1000,
            stale_after,
        ):
            continue
        try:
            _end_killed(client, run, None, experiment_id)
            closed.append(run.info.run_id)
        except Exception as exc:
            log.warning("could not close parent run %s (%s)", run.info.run_id, exc)
    return closed


def start_workflow_run(
    results_dir: str | os.PathLike, tags: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None
) -> str:
    """Create the store, experiment and parent run once (Snakefile ``onstart``); return the run id.

    Parents of this results folder left RUNNING by a killed invocation are ended as KILLED first. The
    parent is tagged with the invoking process (host, pid) and the results folder, and holds ``config``
    as parameters (dotted keys) and as the artifact ``config.yaml``."""
    from mlflow.entities import Param

    results_dir = Path(results_dir).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    client = mlflow_client(tracking_uri(results_dir))
    experiment_id = find_experiment(client, results_dir)
    try:
        for run_id in close_dead_parents(results_dir, client):
            log.warning("MLflow: parent run %s of a killed invocation ended as KILLED", run_id)
    except Exception as exc:
        log.warning("MLflow: could not close the runs of killed invocations (%s)", exc)
    identity = common.process_identity()
    all_tags = {
        "kind": "workflow",
        **identity,
        "results_dir": str(results_dir)[:MAX_TAG_VALUE],
        "results_id": results_id(results_dir),
        "cwd": os.getcwd()[:MAX_TAG_VALUE],
    }
    all_tags.update({k: str(v)[:MAX_TAG_VALUE] for k, v in (tags or {}).items()})
    started = now_ms()
    run = retry(
        lambda: client.create_run(
            experiment_id, start_time=started, tags=all_tags, run_name=f"workflow-{time.strftime('%Y%m%d-%H%M%S')}"
        )
    )
    run_id = run.info.run_id
    write_json(_marker(results_dir, run_id), {"run_id": run_id, **identity, "started_ms": started})
    if config is not None:
        import yaml

        try:
            plain = json.loads(json.dumps(dict(config), default=str))
            log_batches(client, run_id, params=[Param(k, v) for k, v in flatten_config(plain).items()])
            retry(lambda: client.log_text(run_id, yaml.safe_dump(plain, sort_keys=False), "config.yaml"))
        except Exception as exc:  # the parent exists and must still be closed: never raise from here on
            log.warning("MLflow: could not log the config to the parent run (%s)", exc)
    return run_id


def finish_workflow_run(
    results_dir: str | os.PathLike, run_id: str, success: bool, summary: Mapping[str, float] | None = None
) -> None:
    """Mark the parent run finished or failed, with optional headline metrics; a successful run's circuit
    explorer (``<results_dir>/explorer/``) becomes the parent's ``explorer/`` artifact and its ``explorer`` tag."""
    from mlflow.entities import Metric

    client = mlflow_client(tracking_uri(results_dir))
    now = now_ms()
    metrics = [Metric(mlflow_key(k), float(v), now, 0) for k, v in (summary or {}).items()]
    if metrics:
        log_batches(client, run_id, metrics=metrics)
    explorer = Path(results_dir) / "explorer"
    if success and (explorer / "index.html").is_file():  # the circuit explorer, browsable from the run's page
        try:
            retry(lambda: client.log_artifacts(run_id, str(explorer), "explorer"))
            retry(lambda: client.set_tag(run_id, "explorer", str((explorer / "index.html").resolve().as_uri())))
        except Exception as exc:  # never keep the parent open over an artifact
            log.warning("MLflow: could not attach the explorer to the parent run (%s)", exc)
    retry(lambda: client.set_terminated(run_id, "FINISHED" if success else "FAILED", end_time=now))
    _marker(results_dir, run_id).unlink(missing_ok=True)


# ----------------------------------------------------------------------------- workflow hooks


def recover(results_dir: str | os.PathLike) -> tuple[int, list[str]]:
    """Log pending records and close dead parents, if there are any; never raises.

    Costs a few directory listings when there is nothing to do (MLflow is imported only when needed).
    Returns (job runs logged, parent runs closed)."""
    if not needs_recovery(results_dir):
        return 0, []
    logged = flush_job_records(results_dir)
    try:
        closed = close_dead_parents(results_dir)
    except Exception as exc:
        log.warning("MLflow: could not close the runs of killed invocations (%s)", exc)
        closed = []
    return logged, closed


_registered: set[str] = set()


def recover_at_exit(results_dir: str | os.PathLike, should_run: Callable[[], bool]) -> None:
    """At exit of this process, :func:`recover` if ``should_run()`` (e.g. "this was a real run, not a
    dry run"). Snakemake calls neither ``onstart`` nor ``onsuccess`` when there is nothing to do, so the
    workflow registers this at parse time; when the hooks did run there is nothing left and it is cheap."""
    key = str(Path(results_dir).resolve())
    if key in _registered:
        return
    _registered.add(key)
    pid = os.getpid()

    def finish() -> None:
        if os.getpid() != pid:  # a forked child exiting
            return
        try:
            if not should_run():
                return
            logged, closed = recover(results_dir)
        except Exception as exc:  # pragma: no cover - never fail an exiting workflow
            log.warning("MLflow: recovery failed (%s)", exc)
            return
        if logged or closed:
            print(
                f"MLflow: {logged} pending job runs logged, {len(closed)} runs of killed invocations closed "
                f"({tracking_uri(results_dir)})",
                file=sys.stderr,
            )

    atexit.register(finish)
