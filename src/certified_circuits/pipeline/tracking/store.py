"""The MLflow store: the tracking URI of a results folder, retries on a locked SQLite store, the client,
the experiment, run searches and batched logging. MLflow is imported inside the functions that need it, never at import time.

See :mod:`certified_circuits.pipeline.tracking` for the design and the guarantees.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Callable, TypeVar

from certified_circuits.pipeline.tracking.common import BATCH, EXPERIMENT


T = TypeVar("T")


def tracking_uri(results_dir: str | os.PathLike) -> str:
    """``MLFLOW_TRACKING_URI`` if set, else an absolute SQLite URI in ``results_dir``."""
    override = os.environ.get("MLFLOW_TRACKING_URI")
    if override:
        return override
    return f"sqlite:///{Path(results_dir).resolve() / 'mlflow.db'}"


def browse_command(results_dir: str | os.PathLike) -> str:
    """The shell command that opens this results folder's runs in the MLflow UI, safe to paste and runnable as
    printed in a fresh shell: the ``mlflow`` executable is named by its absolute path (the one beside this
    interpreter, the environment ``make`` installed, else the one on ``PATH``), and both it and the URI are quoted
    (``shlex.quote``), so a path holding spaces or ``;`` stays one argument."""
    import shlex
    import shutil
    import sys

    beside = Path(sys.executable).parent / "mlflow"
    executable = str(beside) if beside.is_file() else shutil.which("mlflow") or "mlflow"
    return f"{shlex.quote(executable)} ui --backend-store-uri {shlex.quote(tracking_uri(results_dir))}"


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


def mlflow_client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def find_experiment(client, results_dir: Path, create: bool = True) -> str | None:
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


def search_all_runs(client, experiment_id: str, filter_string: str, order_by: list[str] | None = None) -> list:
    runs, token = [], None
    while True:
        page = retry(
            lambda: client.search_runs(
                [experiment_id], filter_string, max_results=1000, order_by=order_by, page_token=token
            )
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def log_batches(client, run_id: str, metrics: list = (), params: list = (), tags: list = ()) -> None:
    """``log_batch`` within MLflow's limits: one call (one transaction) when everything fits."""
    if len(params) <= BATCH and len(tags) <= BATCH and len(params) + len(tags) + len(metrics) <= 1000:
        retry(lambda: client.log_batch(run_id, metrics=list(metrics), params=list(params), tags=list(tags)))
        return
    for start in range(0, max(len(params), len(tags)), BATCH):
        chunk_params, chunk_tags = list(params[start : start + BATCH]), list(tags[start : start + BATCH])
        retry(lambda: client.log_batch(run_id, params=chunk_params, tags=chunk_tags))
    for start in range(0, len(metrics), 1000):
        chunk = list(metrics[start : start + 1000])
        retry(lambda: client.log_batch(run_id, metrics=chunk))


# ----------------------------------------------------------------------------- child runs
