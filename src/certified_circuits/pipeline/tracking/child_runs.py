"""Child runs: the claim protocol that lets any number of flushers turn pending job records into MLflow
child runs exactly once, with the job's own times, parameters, metrics and artifacts.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Iterable

from certified_circuits.pipeline.tracking import common  # process_identity via the module: tests patch it there
from certified_circuits.pipeline.tracking.common import (
    CLAIM_STALE_SECONDS,
    MAX_ARTIFACT_BYTES,
    MAX_KEY,
    MAX_PARAM_VALUE,
    MAX_TAG_VALUE,
    SMALL_SUFFIXES,
    process_alive,
    records_dir,
    results_id,
    short_digest,
)
from certified_circuits.pipeline.tracking.store import find_experiment, log_batches, mlflow_client, retry
from certified_circuits.pipeline.tracking.store import search_all_runs, tracking_uri
from certified_circuits.pipeline.tracking import records  # sha256_of via the module: tests patch it there
from certified_circuits.pipeline.tracking.records import mlflow_key, mlflow_value, output_files, read_record

log = logging.getLogger("certified_circuits.pipeline.tracking")


def _log_record(client, experiment_id: str, record: dict, results_dir: Path) -> str:
    """Log one record as a complete child run; return its run id. Replaces earlier runs of its job."""
    scope = results_id(results_dir)
    key = record["job_key"]
    job_id = short_digest(scope, key)
    tags = {
        "kind": "job",
        "rule": record["rule"],
        "stage": record["stage"],
        "host": record.get("host", ""),
        "job_key": key[:MAX_TAG_VALUE],
        "job_id": job_id,
        "record_id": record["record_id"],
        "results_id": scope,
        "outputs": str(len(record.get("outputs", []))),
    }
    tags.update({f"wildcard.{mlflow_key(k)}": str(v)[:MAX_TAG_VALUE] for k, v in record["wildcards"].items()})
    if record.get("parent_run_id"):
        tags["mlflow.parentRunId"] = record["parent_run_id"]
    run = retry(
        lambda: client.create_run(
            experiment_id, start_time=int(record["started_ms"]), tags=tags, run_name=key[:MAX_KEY]
        )
    )
    run_id = run.info.run_id
    try:
        _fill_run(client, experiment_id, run, job_id, record)
    except Exception:
        try:
            if client.get_run(run_id).info.lifecycle_stage == "deleted":
                return run_id  # a concurrent flusher logged a newer run of this job and replaced this one
            client.delete_run(run_id)  # never leave a half-logged run behind (a retry logs the record again)
        except Exception:
            pass
        raise
    return run_id


def _fill_run(client, experiment_id: str, run, job_id: str, record: dict) -> None:
    from mlflow.entities import Metric, Param, RunTag

    run_id = run.info.run_id
    ended = int(record["ended_ms"])
    params = [Param(mlflow_key(k), mlflow_value(v, MAX_PARAM_VALUE)) for k, v in record.get("params", {}).items()]
    params = list({p.key: p for p in params}.values())
    metrics = []
    for name, value in record.get("metrics", {}).items():
        try:
            metrics.append(Metric(mlflow_key(name), float(value), ended, 0))
        except (TypeError, ValueError):
            continue
    metrics = list({m.key: m for m in metrics}.values())
    tags = [RunTag(mlflow_key(k), mlflow_value(v, MAX_TAG_VALUE)) for k, v in record.get("tags", {}).items()]
    log_batches(client, run_id, metrics=metrics, params=params, tags=tags)

    references = []
    for path, artifact in output_files(record.get("outputs", [])):
        size = path.stat().st_size
        if path.suffix.lower() in SMALL_SUFFIXES and size <= MAX_ARTIFACT_BYTES:
            folder = str(Path(artifact).parent.as_posix())
            retry(lambda: client.log_artifact(run_id, str(path), None if folder == "." else folder))
        else:
            references.append(
                {"path": str(path), "artifact": artifact, "bytes": size, "sha256": records.sha256_of(path)}
            )
    if references:
        retry(lambda: client.log_dict(run_id, {"references": references}, "references.json"))
    retry(lambda: client.set_terminated(run_id, "FINISHED", end_time=max(ended, int(record["started_ms"]))))
    _replace_others(client, experiment_id, run, job_id)


def _replace_others(client, experiment_id: str, run, job_id: str) -> None:
    """Leave one live run per job: delete every run of ``job_id`` but the newest.

    The survivor is the run with the latest (start time, record id); every flusher applies the same rule
    after creating (and completing) its own run, so concurrent flushers agree: the last search sees every
    run, and no search deletes the overall newest. A run with this run's record id is a
    half-logged leftover of a dead flusher and is deleted too.
    """
    from mlflow.entities import RunTag

    mine = run.info.run_id
    record = run.data.tags.get("record_id", "")
    others = [r for r in search_all_runs(client, experiment_id, f"tags.job_id = '{job_id}'") if r.info.run_id != mine]
    if not others:
        return
    rank = lambda r: (r.info.start_time or 0, r.data.tags.get("record_id", ""))  # noqa: E731
    candidates = [r for r in others if r.data.tags.get("record_id", "") != record] + [run]
    survivor = max(candidates, key=rank)
    for other in [*others, run]:
        if other.info.run_id == survivor.info.run_id:
            continue
        try:
            retry(lambda: client.log_batch(other.info.run_id, tags=[RunTag("cc.replaced_by", survivor.info.run_id)]))
            retry(lambda: client.delete_run(other.info.run_id))
        except Exception as exc:  # already deleted by a concurrent flusher
            log.debug("could not delete run %s (%s)", other.info.run_id, exc)


def _claim_dir(root: Path) -> Path:
    me = common.process_identity()
    return root / "claimed" / f"{me['host']}+{me['pid']}+{me['pid_start']}"


def dead_claims(root: Path) -> list[Path]:
    """Claim folders of flushers that are gone (not this process)."""
    claimed = root / "claimed"
    if not claimed.is_dir():
        return []
    mine = _claim_dir(root).name
    dead = []
    for folder in claimed.iterdir():
        if not folder.is_dir() or folder.name == mine:
            continue
        parts = folder.name.rsplit("+", 2)
        host, pid, start = parts if len(parts) == 3 else ("", "", "")
        try:
            seen = folder.stat().st_mtime
        except OSError:
            continue
        if host and process_alive(host, pid, start, seen, CLAIM_STALE_SECONDS):
            continue  # a live flusher's folder, even empty: it may be about to claim into it
        if not any(folder.iterdir()):
            try:  # a dead flusher's empty claim folder: nothing to retake
                folder.rmdir()
            except OSError:
                pass
            continue
        dead.append(folder)
    return dead


def _claimable(root: Path) -> list[Path]:
    """Records a flusher may claim: those of dead flushers, then the pending ones, oldest first."""
    sources = []
    for folder in dead_claims(root):
        sources.extend(sorted(folder.glob("*.json")))
    pending = root / "pending"
    if pending.is_dir():
        sources.extend(sorted(pending.glob("*.json")))
    return sources


def _claim(source: Path, mine: Path) -> Path | None:
    """Take one record by renaming it into our claim folder; ``None`` if another flusher got it first."""
    target = mine / source.name
    for _ in range(2):
        try:
            os.rename(source, target)  # atomic: exactly one flusher wins each record
            return target
        except FileNotFoundError:
            if not source.exists():
                return None  # another flusher took it
            mine.mkdir(parents=True, exist_ok=True)  # our folder went missing: make it again, retry once
    return None


def pending_records(results_dir: str | os.PathLike) -> list[Path]:
    pending = records_dir(results_dir) / "pending"
    return sorted(pending.glob("*.json")) if pending.is_dir() else []


def flush_job_records(results_dir: str | os.PathLike, progress: bool = True) -> int:
    """Log every pending job record as a child run; return how many were logged. Never raises.

    Safe to call from several processes at once on one results folder: each record is logged once.
    """
    results_dir = Path(results_dir)
    root = records_dir(results_dir)
    if not pending_records(results_dir) and not dead_claims(root):
        return 0
    try:
        client = mlflow_client(tracking_uri(results_dir))
        experiment_id = find_experiment(client, results_dir)
    except Exception as exc:  # tracking never fails the workflow
        log.warning("MLflow unavailable (%s); %d job records stay pending", exc, len(pending_records(results_dir)))
        return 0
    mine = _claim_dir(root)
    mine.mkdir(parents=True, exist_ok=True)
    sources = _claimable(root)
    logged, failed = root / "logged", root / "failed"
    count = 0
    iterator: Iterable[Path] = sources
    if progress and sources:
        try:
            from tqdm import tqdm

            iterator = tqdm(sources, desc="mlflow: logging job runs", unit="run", file=sys.stderr)
        except ImportError:  # pragma: no cover
            pass
    for source in iterator:  # one record at a time: concurrent flushers share the work
        path = _claim(source, mine)
        if path is None:
            continue
        try:
            record = read_record(path)
        except (OSError, ValueError, TypeError) as exc:
            log.warning("job record %s is unreadable (%s); moved to %s", path.name, exc, failed)
            failed.mkdir(parents=True, exist_ok=True)
            os.replace(path, failed / path.name)
            continue
        try:
            _log_record(client, experiment_id, record, results_dir)
        except Exception as exc:
            log.warning("could not log %s to MLflow (%s); it stays pending", path.name, exc)
            (root / "pending").mkdir(parents=True, exist_ok=True)
            os.replace(path, root / "pending" / path.name)
            continue
        logged.mkdir(parents=True, exist_ok=True)
        os.replace(path, logged / path.name)
        count += 1
    for folder in dead_claims(root):
        try:
            folder.rmdir()
        except OSError:
            pass
    try:
        _claim_dir(root).rmdir()
    except OSError:
        pass
    return count


# ----------------------------------------------------------------------------- parent runs
