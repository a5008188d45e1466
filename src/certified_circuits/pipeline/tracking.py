"""MLflow tracking for workflow runs: one parent run per invocation, one child run per job.

Design (DESIGN.md section 7 pitfalls):

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

import atexit
import hashlib
import json
import logging
import os
import random
import re
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from certified_circuits.storage.atomic import TEMP_MARK, write_json

log = logging.getLogger(__name__)

ENV_PARENT = "CC_MLFLOW_PARENT_RUN_ID"
ENV_RECORDS = "CC_TRACKING_DIR"
ENV_RULE = "CC_RULE"
ENV_WILDCARDS = "CC_WILDCARDS"
EXPERIMENT = "certified-circuits"
SMALL_SUFFIXES = {".csv", ".json", ".md", ".tex", ".png", ".pdf", ".txt", ".tsv", ".yaml", ".svg", ".html", ".log"}
MAX_ARTIFACT_BYTES = 50 * 2**20
#: a parent run whose invocation ran on another host is presumed dead after this long without a job
PARENT_STALE_SECONDS = 48 * 3600
#: a claim of a flusher on another host is presumed dead after this long
CLAIM_STALE_SECONDS = 3600
#: MLflow's limits (mlflow.utils.validation)
MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
BATCH = 100

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


def _now_ms() -> int:
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------- process identity


def _process_start(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot (Linux ``/proc``), or "" where unknown.

    Together with host and pid it names a process unambiguously (pids are reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def process_identity() -> dict[str, str]:
    """``host``, ``pid`` and ``pid_start`` of this process (strings, ready to be tags)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": str(pid), "pid_start": _process_start(pid)}


def _alive(host: str, pid: str | int, pid_start: str, last_seen: float, stale_after: float) -> bool:
    """Is the process (host, pid, pid_start) still running? On another host: seen within ``stale_after`` s."""
    if host != socket.gethostname():
        return time.time() - last_seen < stale_after
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    current = _process_start(pid)
    return not (pid_start and current and current != pid_start)


# ----------------------------------------------------------------------------- keys and names


def records_dir(results_dir: str | os.PathLike) -> Path:
    return Path(results_dir) / ".tracking"


def _digest(*parts: str, length: int = 32) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:length]


def results_id(results_dir: str | os.PathLike) -> str:
    """Tag value naming one results folder (runs of several folders may share a tracking server)."""
    return _digest(str(Path(results_dir).resolve()), length=16)


def job_key(rule: str, wildcards: Mapping[str, str]) -> str:
    """A job's identity across invocations: ``rule[a=1,b=x]`` (wildcards sorted), or ``rule``."""
    if not wildcards:
        return rule
    return f"{rule}[{','.join(f'{k}={v}' for k, v in sorted(wildcards.items()))}]"


def _name(key: str) -> str:
    """A valid MLflow parameter/metric name: forbidden characters become ``_``, at most 250 characters."""
    clean = re.sub(r"[^/\w.\- :]", "_", str(key)).strip("/") or "_"
    clean = re.sub(r"/+", "/", clean)
    clean = "/".join(part if part not in (".", "..") else "_" for part in clean.split("/"))
    if len(clean) > MAX_KEY:
        clean = f"{clean[:MAX_KEY - 9]}~{_digest(key, length=8)}"
    return clean


def _value(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config as MLflow parameters: dotted keys, lists and scalars as JSON, values truncated."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, dotted + "."))
        else:
            flat[_name(dotted)] = _value(value, MAX_PARAM_VALUE)
    return flat


def _parse_wildcards(text: str) -> dict[str, str]:
    """Snakemake formats ``{wildcards}`` as ``a=1,b=x`` (values may not contain commas here)."""
    pairs = [item.split("=", 1) for item in text.split(",") if "=" in item]
    return {key.strip(): value.strip() for key, value in pairs}


# ----------------------------------------------------------------------------- job records


def write_job_record(
    stage: str,
    params: Mapping[str, Any],
    outputs: Iterable[str | os.PathLike],
    seconds: float,
    *,
    started_at: float | None = None,
    ended_at: float | None = None,
    metrics: Mapping[str, float] | None = None,
) -> Path | None:
    """Write this job's record if the workflow asked for tracking (``CC_TRACKING_DIR`` set).

    ``outputs``: every output of the job: files, directories (logged as their files) or stems (a path
    without its suffix: the files ``STEM.EXT`` that exist are logged). ``started_at``/``ended_at``:
    epoch seconds (``time.time()``) of the job's start and end; by default the end is now and the start
    ``seconds`` earlier. ``metrics`` are added to those reported through :func:`add_metrics`.
    Returns the record's path (``None`` outside a workflow).
    """
    directory = os.environ.get(ENV_RECORDS)
    if not directory:
        return None
    ended = time.time() if ended_at is None else float(ended_at)
    started = ended - float(seconds) if started_at is None else float(started_at)
    rule = os.environ.get(ENV_RULE) or stage
    wildcards = _parse_wildcards(os.environ.get(ENV_WILDCARDS, ""))
    values: dict[str, float] = {**collected_metrics(), "seconds": float(seconds)}
    for key, value in (metrics or {}).items():
        try:
            values[key] = float(value)
        except (TypeError, ValueError):
            log.debug("metric %s=%r is not numeric; skipped", key, value)
    record_id = uuid.uuid4().hex
    record = {
        "version": 2,
        "record_id": record_id,
        "stage": stage,
        "rule": rule,
        "wildcards": wildcards,
        "job_key": job_key(rule, wildcards),
        "parent_run_id": os.environ.get(ENV_PARENT, ""),
        "params": {str(k): (v if isinstance(v, (int, float, bool, str)) or v is None else str(v)) for k, v in params.items()},
        "metrics": values,
        "outputs": [str(Path(p).resolve()) for p in outputs],
        "started_ms": int(started * 1000),
        "ended_ms": int(ended * 1000),
        **process_identity(),
    }
    path = Path(directory) / "pending" / f"{record['ended_ms']:013d}-{os.getpid()}-{record_id[:8]}-{stage}.json"
    write_json(path, record)
    parent = record["parent_run_id"]
    if parent:  # heartbeat: the parent's marker remembers when its last job finished
        try:
            os.utime(Path(directory) / "parents" / f"{parent}.json")
        except OSError:
            pass
    return path


def _read_record(path: Path) -> dict:
    record = json.loads(path.read_text())
    if "ended_ms" not in record:  # records of the first format: "ended" in seconds, no start
        ended = float(record.get("ended", path.stat().st_mtime))
        seconds = float(record.get("metrics", {}).get("seconds", 0.0))
        record["ended_ms"] = int(ended * 1000)
        record["started_ms"] = int((ended - seconds) * 1000)
    record.setdefault("wildcards", {})
    record.setdefault("rule", record.get("stage", "job"))
    record.setdefault("job_key", job_key(record["rule"], record["wildcards"]))
    record.setdefault("record_id", _digest(path.name))
    return record


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_temporary(path: Path) -> bool:
    return TEMP_MARK in path.name


def output_files(outputs: Iterable[str | os.PathLike]) -> list[tuple[Path, str]]:
    """(file, artifact path) for every file of a job's outputs; see the module docstring.

    Artifact paths are relative to the deepest folder holding every output, so the outputs of a job
    in one folder keep their plain names and two outputs with one name do not collide.
    """
    found: list[tuple[Path, Path]] = []  # (file, the output's folder)
    for raw in outputs:
        output = Path(raw)
        if output.is_dir():
            if (output / ".tracking").exists() or (output / "mlflow.db").exists():
                log.warning("output %s is a whole results folder; not logged as artifacts", output)
                continue
            files = sorted(p for p in output.rglob("*") if p.is_file() and not _is_temporary(p))
        elif output.is_file():
            files = [output]
        elif output.parent.is_dir():  # a stem: STEM.csv, STEM.md, STEM.tex ...
            prefix = output.name + "."
            files = sorted(
                p for p in output.parent.iterdir()
                if p.name.startswith(prefix) and "." not in p.name[len(prefix):] and p.is_file()
                and not _is_temporary(p)
            )
        else:
            files = []
        if not files:
            log.warning("output %s does not exist; not logged", output)
        found.extend((path, output.parent) for path in files)
    if not found:
        return []
    anchor = Path(os.path.commonpath([str(folder) for _, folder in found]))
    unique = dict.fromkeys((path, path.relative_to(anchor).as_posix()) for path, _ in found)
    return list(unique)


# ----------------------------------------------------------------------------- store helpers


def _experiment_id(client, results_dir: Path, create: bool = True) -> str | None:
    experiment = retry(lambda: client.get_experiment_by_name(EXPERIMENT))
    if experiment is not None:
        return experiment.experiment_id
    if not create:
        return None
    artifacts = (Path(results_dir).resolve() / "mlflow-artifacts").as_uri()
    try:
        return retry(lambda: client.create_experiment(EXPERIMENT, artifact_location=artifacts))
    except Exception:  # created concurrently
        experiment = retry(lambda: client.get_experiment_by_name(EXPERIMENT))
        if experiment is None:
            raise
        return experiment.experiment_id


def _search_all(client, experiment_id: str, filter_string: str, order_by: list[str] | None = None) -> list:
    runs, token = [], None
    while True:
        page = retry(lambda: client.search_runs([experiment_id], filter_string, max_results=1000,
                                                order_by=order_by, page_token=token))
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _log_batches(client, run_id: str, metrics: list = (), params: list = (), tags: list = ()) -> None:
    """``log_batch`` within MLflow's limits: one call (one transaction) when everything fits."""
    if len(params) <= BATCH and len(tags) <= BATCH and len(params) + len(tags) + len(metrics) <= 1000:
        retry(lambda: client.log_batch(run_id, metrics=list(metrics), params=list(params), tags=list(tags)))
        return
    for start in range(0, max(len(params), len(tags)), BATCH):
        chunk_params, chunk_tags = list(params[start:start + BATCH]), list(tags[start:start + BATCH])
        retry(lambda: client.log_batch(run_id, params=chunk_params, tags=chunk_tags))
    for start in range(0, len(metrics), 1000):
        chunk = list(metrics[start:start + 1000])
        retry(lambda: client.log_batch(run_id, metrics=chunk))


# ----------------------------------------------------------------------------- child runs


def _log_record(client, experiment_id: str, record: dict, results_dir: Path) -> str:
    """Log one record as a complete child run; return its run id. Replaces earlier runs of its job."""
    scope = results_id(results_dir)
    key = record["job_key"]
    job_id = _digest(scope, key)
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
    tags.update({f"wildcard.{_name(k)}": str(v)[:MAX_TAG_VALUE] for k, v in record["wildcards"].items()})
    if record.get("parent_run_id"):
        tags["mlflow.parentRunId"] = record["parent_run_id"]
    run = retry(lambda: client.create_run(experiment_id, start_time=int(record["started_ms"]),
                                          tags=tags, run_name=key[:MAX_KEY]))
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
    from mlflow.entities import Metric, Param

    run_id = run.info.run_id
    ended = int(record["ended_ms"])
    params = [Param(_name(k), _value(v, MAX_PARAM_VALUE)) for k, v in record.get("params", {}).items()]
    params = list({p.key: p for p in params}.values())
    metrics = []
    for name, value in record.get("metrics", {}).items():
        try:
            metrics.append(Metric(_name(name), float(value), ended, 0))
        except (TypeError, ValueError):
            continue
    metrics = list({m.key: m for m in metrics}.values())
    _log_batches(client, run_id, metrics=metrics, params=params)

    references = []
    for path, artifact in output_files(record.get("outputs", [])):
        size = path.stat().st_size
        if path.suffix.lower() in SMALL_SUFFIXES and size <= MAX_ARTIFACT_BYTES:
            folder = str(Path(artifact).parent.as_posix())
            retry(lambda: client.log_artifact(run_id, str(path), None if folder == "." else folder))
        else:
            references.append({"path": str(path), "artifact": artifact, "bytes": size, "sha256": _sha256(path)})
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
    others = [r for r in _search_all(client, experiment_id, f"tags.job_id = '{job_id}'") if r.info.run_id != mine]
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
    me = process_identity()
    return root / "claimed" / f"{me['host']}+{me['pid']}+{me['pid_start']}"


def _dead_claims(root: Path) -> list[Path]:
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
        if host and _alive(host, pid, start, seen, CLAIM_STALE_SECONDS):
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
    for folder in _dead_claims(root):
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
    if not pending_records(results_dir) and not _dead_claims(root):
        return 0
    try:
        client = _client(tracking_uri(results_dir))
        experiment_id = _experiment_id(client, results_dir)
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
            record = _read_record(path)
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
    for folder in _dead_claims(root):
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
        if not _alive(marker.get("host", ""), marker.get("pid", ""), marker.get("pid_start", ""), seen, stale_after):
            dead.append((path, {**marker, "last_seen_ms": int(seen * 1000)}))
    return dead


def needs_recovery(results_dir: str | os.PathLike) -> bool:
    """Is there anything to log (pending records, records of a dead flusher) or close (a dead parent)?

    Directory listings only: callable at every invocation without importing MLflow."""
    root = records_dir(results_dir)
    if not root.is_dir():
        return False
    return bool(pending_records(results_dir) or _dead_claims(root) or _dead_markers(results_dir))


def _end_killed(client, run, last_seen_ms: int | None, experiment_id: str) -> None:
    """End a RUNNING parent as KILLED at the last moment it was known to be alive."""
    end = max(run.info.start_time or 0, last_seen_ms or 0)
    children = retry(lambda: client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'",
                                                max_results=1, order_by=["attributes.end_time DESC"]))
    if children and children[0].info.end_time:
        end = max(end, children[0].info.end_time)
    retry(lambda: client.set_terminated(run.info.run_id, "KILLED", end_time=end))


def close_dead_parents(results_dir: str | os.PathLike, client=None, stale_after: float = PARENT_STALE_SECONDS) -> list[str]:
    """End as KILLED every parent run of this results folder still RUNNING whose invocation is dead.

    Dead: same host and the pid is gone (or reused); another host and no job finished for
    ``stale_after`` seconds. Returns the ids of the runs it ended."""
    results_dir = Path(results_dir)
    markers = _dead_markers(results_dir, stale_after)
    if client is None and not markers:
        return []
    client = client or _client(tracking_uri(results_dir))
    experiment_id = _experiment_id(client, results_dir, create=False)
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
    running = _search_all(client, experiment_id,
                          f"tags.kind = 'workflow' and tags.results_id = '{results_id(results_dir)}' "
                          "and attributes.status = 'RUNNING'")
    for run in running:
        if run.info.run_id in closed or _marker(results_dir, run.info.run_id).exists():
            continue
        tags = run.data.tags
        if _alive(tags.get("host", ""), tags.get("pid", ""), tags.get("pid_start", ""),
                  (run.info.start_time or 0) / 1000, stale_after):
            continue
        try:
            _end_killed(client, run, None, experiment_id)
            closed.append(run.info.run_id)
        except Exception as exc:
            log.warning("could not close parent run %s (%s)", run.info.run_id, exc)
    return closed


def start_workflow_run(
    results_dir: str | os.PathLike,
    tags: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> str:
    """Create the store, experiment and parent run once (Snakefile ``onstart``); return the run id.

    Parents of this results folder left RUNNING by a killed invocation are ended as KILLED first. The
    parent is tagged with the invoking process (host, pid) and the results folder, and holds ``config``
    as parameters (dotted keys) and as the artifact ``config.yaml``."""
    from mlflow.entities import Param

    results_dir = Path(results_dir).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    client = _client(tracking_uri(results_dir))
    experiment_id = _experiment_id(client, results_dir)
    try:
        for run_id in close_dead_parents(results_dir, client):
            log.warning("MLflow: parent run %s of a killed invocation ended as KILLED", run_id)
    except Exception as exc:
        log.warning("MLflow: could not close the runs of killed invocations (%s)", exc)
    identity = process_identity()
    all_tags = {"kind": "workflow", **identity, "results_dir": str(results_dir)[:MAX_TAG_VALUE],
                "results_id": results_id(results_dir), "cwd": os.getcwd()[:MAX_TAG_VALUE]}
    all_tags.update({k: str(v)[:MAX_TAG_VALUE] for k, v in (tags or {}).items()})
    started = _now_ms()
    run = retry(lambda: client.create_run(experiment_id, start_time=started, tags=all_tags,
                                          run_name=f"workflow-{time.strftime('%Y%m%d-%H%M%S')}"))
    run_id = run.info.run_id
    write_json(_marker(results_dir, run_id), {"run_id": run_id, **identity, "started_ms": started})
    if config is not None:
        import yaml

        try:
            plain = json.loads(json.dumps(dict(config), default=str))
            _log_batches(client, run_id, params=[Param(k, v) for k, v in flatten_config(plain).items()])
            retry(lambda: client.log_text(run_id, yaml.safe_dump(plain, sort_keys=False), "config.yaml"))
        except Exception as exc:  # the parent exists and must still be closed: never raise from here on
            log.warning("MLflow: could not log the config to the parent run (%s)", exc)
    return run_id


def finish_workflow_run(results_dir: str | os.PathLike, run_id: str, success: bool, summary: Mapping[str, float] | None = None) -> None:
    """Mark the parent run finished or failed, with optional headline metrics."""
    from mlflow.entities import Metric

    client = _client(tracking_uri(results_dir))
    now = _now_ms()
    metrics = [Metric(_name(k), float(v), now, 0) for k, v in (summary or {}).items()]
    if metrics:
        _log_batches(client, run_id, metrics=metrics)
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
            print(f"MLflow: {logged} pending job runs logged, {len(closed)} runs of killed invocations closed "
                  f"({tracking_uri(results_dir)})", file=sys.stderr)

    atexit.register(finish)
