"""Job records: the small JSON file each successful job leaves in ``<results>/.tracking/pending/``
(stage, rule, wildcards, parameters, metrics, outputs, times), and the helpers that name and read them.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import logging
import hashlib
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from certified_circuits.storage.atomic import TEMP_MARK, write_json
from certified_circuits.pipeline.tracking import common  # process_identity via the module: tests patch it there
from certified_circuits.pipeline.tracking.common import (
    ENV_PARENT,
    ENV_RECORDS,
    ENV_RULE,
    ENV_WILDCARDS,
    MAX_KEY,
    MAX_PARAM_VALUE,
    short_digest,
)
from certified_circuits.pipeline.tracking.metrics import collected_metrics, collected_tags

log = logging.getLogger("certified_circuits.pipeline.tracking")


def job_key(rule: str, wildcards: Mapping[str, str]) -> str:
    """A job's identity across invocations: ``rule[a=1,b=x]`` (wildcards sorted), or ``rule``."""
    if not wildcards:
        return rule
    return f"{rule}[{','.join(f'{k}={v}' for k, v in sorted(wildcards.items()))}]"


def mlflow_key(key: str) -> str:
    """A valid MLflow parameter/metric name: forbidden characters become ``_``, at most 250 characters."""
    clean = re.sub(r"[^/\w.\- :]", "_", str(key)).strip("/") or "_"
    clean = re.sub(r"/+", "/", clean)
    clean = "/".join(part if part not in (".", "..") else "_" for part in clean.split("/"))
    if len(clean) > MAX_KEY:
        clean = f"{clean[: MAX_KEY - 9]}~{short_digest(key, length=8)}"
    return clean


def mlflow_value(value: Any, limit: int) -> str:
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
            flat[mlflow_key(dotted)] = mlflow_value(value, MAX_PARAM_VALUE)
    return flat


def encode_wildcards(wildcards: Mapping[str, Any]) -> str:
    """The job's wildcards as the rules pass them in ``CC_WILDCARDS``: a JSON object (sorted keys).

    One encoding, one decoding (:func:`decode_wildcards`), so no value is ever parsed out of a string
    that could hold the separator.
    """
    return json.dumps({str(k): str(v) for k, v in wildcards.items()}, sort_keys=True)


def decode_wildcards(text: str) -> dict[str, str]:
    """The inverse of :func:`encode_wildcards`; empty or malformed text gives no wildcards (a record is
    still written: tracking never fails a job)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        log.warning("%s is not the JSON object encode_wildcards writes: %r", ENV_WILDCARDS, text[:200])
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


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
    wildcards = decode_wildcards(os.environ.get(ENV_WILDCARDS, ""))
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
        "params": {
            str(k): (v if isinstance(v, (int, float, bool, str)) or v is None else str(v)) for k, v in params.items()
        },
        "metrics": values,
        "tags": collected_tags(),
        "outputs": [str(Path(p).resolve()) for p in outputs],
        "started_ms": int(started * 1000),
        "ended_ms": int(ended * 1000),
        **common.process_identity(),
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


def read_record(path: Path) -> dict:
    record = json.loads(path.read_text())
    if "ended_ms" not in record:  # records of the first format: "ended" in seconds, no start
        ended = float(record.get("ended", path.stat().st_mtime))
        seconds = float(record.get("metrics", {}).get("seconds", 0.0))
        record["ended_ms"] = int(ended * 1000)
        record["started_ms"] = int((ended - seconds) * 1000)
    record.setdefault("wildcards", {})
    record.setdefault("rule", record.get("stage", "job"))
    record.setdefault("job_key", job_key(record["rule"], record["wildcards"]))
    record.setdefault("record_id", short_digest(path.name))
    return record


def sha256_of(path: Path) -> str:
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
                p
                for p in output.parent.iterdir()
                if p.name.startswith(prefix)
                and "." not in p.name[len(prefix) :]
                and p.is_file()
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
