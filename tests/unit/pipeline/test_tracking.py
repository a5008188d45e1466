"""MLflow tracking: job records become child runs of the workflow's parent run, with artifacts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.pipeline import tracking
from certified_circuits.cli.main import main
from certified_circuits.storage.store import write_attributions


@pytest.mark.slow
def test_job_records_are_flushed_into_child_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    results = tmp_path / "results"
    parent = tracking.start_workflow_run(results, tags={"config": "test"})
    monkeypatch.setenv(tracking.ENV_PARENT, parent)
    monkeypatch.setenv(tracking.ENV_RECORDS, str(tracking.records_dir(results)))
    monkeypatch.setenv(tracking.ENV_RULE, "votes")
    monkeypatch.setenv(tracking.ENV_WILDCARDS, tracking.encode_wildcards({"experiment": "toy", "concept": "c1"}))
    attributions = write_attributions(results / "a.h5", {"relevance": np.random.default_rng(0).normal(size=(10, 6))},
                                      np.zeros(6, dtype=int), list("abcdef"), [str(i) for i in range(10)], {})
    main(["votes", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid", "0.5",
          "--p-del", "0.5", "--n0", "10", "--n", "20", "--out", str(results / "v.h5")])
    (results / "table.csv").write_text("a,b\n1,2\n")
    monkeypatch.setenv(tracking.ENV_RULE, "table")
    tracking.write_job_record("table", {"x": 1}, [results / "table.csv"], 0.5)

    assert tracking.flush_job_records(results) == 2
    assert tracking.flush_job_records(results) == 0  # nothing left pending
    tracking.finish_workflow_run(results, parent, success=True, summary={"jobs": 2})

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking.tracking_uri(results))
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT)
    children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    by_rule = {run.data.tags["rule"]: run for run in children}
    assert set(by_rule) == {"votes", "table"}
    votes_run = by_rule["votes"]
    assert votes_run.data.tags["wildcard.concept"] == "c1"
    assert votes_run.data.params["p_del"] == "0.5" and "votes_seconds" in votes_run.data.metrics
    references = json.loads(Path(client.download_artifacts(votes_run.info.run_id, "references.json", str(tmp_path))).read_text())
    assert references["references"][0]["path"].endswith("v.h5") and len(references["references"][0]["sha256"]) == 64
    artifacts = [a.path for a in client.list_artifacts(by_rule["table"].info.run_id)]
    assert artifacts == ["table.csv"]
    assert client.get_run(parent).info.status == "FINISHED"


def test_no_record_without_workflow_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracking.ENV_RECORDS, raising=False)
    assert tracking.write_job_record("x", {}, [], 0.1) is None


def test_retry_gives_up_on_non_transient_errors_and_retries_locks() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return "ok"

    assert tracking.retry(flaky, delay=0.001) == "ok" and len(calls) == 3
    with pytest.raises(ValueError):
        tracking.retry(lambda: (_ for _ in ()).throw(ValueError("bad")), delay=0.001)


def test_a_live_flushers_empty_claim_folder_is_left_alone(tmp_path) -> None:
    """The race behind a flaky concurrent-flush test: flusher B saw flusher A's claim folder empty
    (A had just made it) and removed it, so every claim of A failed. Only a dead flusher's empty
    folder may go; a flusher whose folder vanished makes it again."""
    import os
    import socket

    from certified_circuits.pipeline.tracking.child_runs import _claim, _claim_dir, dead_claims

    root = tmp_path / "tracking"
    live = root / "claimed" / f"{socket.gethostname()}+{os.getppid()}+"  # the parent process: alive
    dead = root / "claimed" / f"{socket.gethostname()}+999999999+"
    live.mkdir(parents=True)
    dead.mkdir(parents=True)
    assert dead_claims(root) == []
    assert live.is_dir() and not dead.exists()

    pending = root / "pending"
    pending.mkdir()
    (pending / "r.json").write_text("{}")
    mine = _claim_dir(root)  # never made: as if another flusher had removed it
    assert _claim(pending / "r.json", mine) == mine / "r.json" and (mine / "r.json").is_file()
    assert _claim(pending / "r.json", mine) is None  # gone: another flusher took it


def test_wildcards_travel_as_json_and_survive_separators() -> None:
    """A value holding the old separators (',' and '=') comes back whole; junk gives no wildcards."""
    wildcards = {"concept": "a,b=c", "experiment": "world", "split": "id"}
    assert tracking.decode_wildcards(tracking.encode_wildcards(wildcards)) == wildcards
    assert tracking.decode_wildcards("") == {} and tracking.decode_wildcards("concept=c1") == {}


def test_the_browse_hint_is_safe_to_paste(tmp_path, monkeypatch) -> None:
    """Issue 21: the closing `mlflow ui` hint printed an unquoted path; pasting it ran what the path held."""
    import shlex

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    results = tmp_path / "my results; touch PWNED"
    words = shlex.split(tracking.browse_command(results))
    assert words[1:] == ["ui", "--backend-store-uri", tracking.tracking_uri(results)]
    # issue 35: runnable as printed in a fresh shell (no environment activated): the environment's own mlflow
    assert words[0] == str(Path(sys.executable).parent / "mlflow") and Path(words[0]).is_file()
    assert words[-1].endswith("my results; touch PWNED/mlflow.db")
