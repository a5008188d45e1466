"""Names, limits and process identity shared by the tracking modules: environment variables, artifact
limits, the results folder's id, and whether the process that wrote a record or opened a run is alive.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path


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


def now_ms() -> int:
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------- process identity


def process_start_time(pid: int) -> str:
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
    return {"host": socket.gethostname(), "pid": str(pid), "pid_start": process_start_time(pid)}


def process_alive(host: str, pid: str | int, pid_start: str, last_seen: float, stale_after: float) -> bool:
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
    current = process_start_time(pid)
    return not (pid_start and current and current != pid_start)


# ----------------------------------------------------------------------------- keys and names


def records_dir(results_dir: str | os.PathLike) -> Path:
    return Path(results_dir) / ".tracking"


def short_digest(*parts: str, length: int = 32) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:length]


def results_id(results_dir: str | os.PathLike) -> str:
    """Tag value naming one results folder (runs of several folders may share a tracking server)."""
    return short_digest(str(Path(results_dir).resolve()), length=16)
