"""The workflow's MLflow hooks (rules/tracking.smk) on a two-rule Snakefile: a parent per real run with
the config, a rerun replacing its job's run, and, when there is nothing to do (Snakemake then calls no
hook), pending records still logged and killed parents still ended; a dry run changes nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from certified_circuits.pipeline import tracking

pytestmark = pytest.mark.slow  # runs the workflow or a real process tree

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SNAKEFILE = """
import os, sys

RESULTS = config["results_dir"]


rule all:
    input:
        f"{{RESULTS}}/tables/runtime.csv",


rule table:
    output:
        f"{{RESULTS}}/tables/runtime.csv",
    shell:
        "CC_RULE=table CC_WILDCARDS='{{{{\\"experiment\\": \\"toy\\"}}}}' {{sys.executable}} job.py {{RESULTS}}/tables/runtime"


include: {tracking!r}
"""

JOB = """
import sys, time
from pathlib import Path
from certified_circuits.pipeline import tracking

started = time.time()
stem = Path(sys.argv[1])
stem.parent.mkdir(parents=True, exist_ok=True)
for suffix in ("csv", "md"):
    stem.with_name(stem.name + "." + suffix).write_text("k,acc\\n0.1,0.9\\n")
time.sleep(0.3)
tracking.write_job_record("table", {"k": 0.1}, [stem], time.time() - started, started_at=started, metrics={"peak": 0.9})
"""


def snakemake(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for name in ("MLFLOW_TRACKING_URI", tracking.ENV_PARENT, tracking.ENV_RECORDS, tracking.ENV_RULE, tracking.ENV_WILDCARDS):
        env.pop(name, None)
    command = [str(BIN / "snakemake"), "--cores", "1", "--configfile", "config.yaml", *args]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def test_workflow_hooks_keep_one_run_per_job_and_recover_when_nothing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    results = tmp_path / "results"
    config = {"results_dir": str(results), "mlflow": {"enabled": True}, "vision": {"certification": {"p_del": 0.6}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "Snakefile").write_text(textwrap.dedent(SNAKEFILE.format(tracking=str(ROOT / "rules" / "tracking.smk"))))
    (tmp_path / "job.py").write_text(JOB)

    before = int(time.time() * 1000)
    snakemake(tmp_path)
    client = MlflowClient(tracking.tracking_uri(results))
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT).experiment_id

    def runs(query: str) -> list:
        return client.search_runs([experiment], query, max_results=1000)

    (parent,) = runs("tags.kind = 'workflow'")
    assert parent.info.status == "FINISHED" and parent.data.params["vision.certification.p_del"] == "0.6"
    assert parent.data.tags["configfiles"].endswith("config.yaml") and parent.data.tags["host"] == socket.gethostname()
    assert [a.path for a in client.list_artifacts(parent.info.run_id)] == ["config.yaml"]
    (job,) = runs("tags.kind = 'job'")
    assert job.data.tags["job_key"] == "table[experiment=toy]" and job.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert sorted(a.path for a in client.list_artifacts(job.info.run_id)) == ["runtime.csv", "runtime.md"]
    assert before <= job.info.start_time and job.info.end_time - job.info.start_time >= 300  # the job's own times
    assert job.info.end_time <= parent.info.end_time and job.data.metrics["peak"] == 0.9

    # a killed invocation left a RUNNING parent and a record of a job that finished before the kill
    monkeypatch.setenv(tracking.ENV_RECORDS, str(tracking.records_dir(results)))
    monkeypatch.setenv(tracking.ENV_RULE, "late")
    monkeypatch.delenv(tracking.ENV_WILDCARDS, raising=False)
    gone = subprocess.Popen(["true"])
    gone.wait()
    monkeypatch.setattr(tracking.common, "process_identity",
                        lambda: {"host": socket.gethostname(), "pid": str(gone.pid), "pid_start": ""})
    killed = tracking.start_workflow_run(results)
    monkeypatch.setenv(tracking.ENV_PARENT, killed)
    tracking.write_job_record("late", {}, [results / "tables" / "runtime.csv"], 0.1)

    snakemake(tmp_path, "-n")  # a dry run logs nothing and closes nothing
    assert tracking.pending_records(results) and client.get_run(killed).info.status == "RUNNING"

    done = snakemake(tmp_path)  # nothing to do: Snakemake calls no hook, the exit handler recovers
    assert "Nothing to be done" in done.stdout + done.stderr
    assert not tracking.pending_records(results) and client.get_run(killed).info.status == "KILLED"
    assert len(runs("tags.kind = 'workflow'")) == 2  # no parent for an invocation that ran nothing
    (late,) = runs("tags.job_key = 'late'")
    assert late.data.tags["mlflow.parentRunId"] == killed

    snakemake(tmp_path, "--forceall")  # the job runs again: its new run replaces the old one
    (rerun,) = runs("tags.job_key = 'table[experiment=toy]'")
    assert rerun.info.run_id != job.info.run_id and rerun.info.start_time > job.info.end_time
    assert client.get_run(job.info.run_id).info.lifecycle_stage == "deleted"
    statuses = sorted(run.info.status for run in runs("tags.kind = 'workflow'"))
    assert statuses == ["FINISHED", "FINISHED", "KILLED"]
