"""Resumption after a kill: SIGKILL a workflow, run the same command again, and get the uninterrupted run's artifacts
(the session's smoke run, tests/integration/conftest.py) without redoing finished jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from certified_circuits.storage.atomic import TEMP_MARK
from tests.helpers import workflow
from tests.helpers.artifacts import assert_identical_artifacts
from tests.helpers.paths import SMOKE
from tests.helpers.workflow import job_counts

pytestmark = pytest.mark.slow  # runs the workflow and kills it


#: what the killed-and-resumed run makes: one class's sufficiency table, so world, training, attribution, votes and
#: certificates of both scorers, and evaluation (8 jobs of the smoke DAG, 6 deep; the smoke run made the same files)
RESUME_TARGETS = ("sufficiency/world/concept/circle/p0.6_n020_n100_s0/t0.7_a0.05_bonferroni.csv",)


def test_killed_run_resumes_without_redoing_finished_jobs(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """SIGKILL the whole run (no cleanup handler runs), then the same command again: bin/workflow sees
    the stale Snakemake lock, removes it, and the run finishes without redoing finished jobs and without
    leaving temporary files. The interrupted, resumed run then holds exactly the artifacts of the
    uninterrupted smoke run: same seeds, same files, on one machine (issue 9). It runs the part of the smoke DAG
    that ends in one class's evaluation (:data:`RESUME_TARGETS`), from a private copy of the checkout
    (bin/workflow refuses to start beside another live run in its checkout, and other tests run in parallel). The smoke
    run is asked for only at the comparison, so the two can run at the same time on two workers (a file of its own:
pytest-xdist's ``--dist loadfile`` keeps a file's tests on one worker)."""
    checkout = workflow.private_checkout(tmp_path / "checkout")
    results = tmp_path / "results"
    targets = [str(results / target) for target in RESUME_TARGETS]
    no_mlflow = workflow.override(tmp_path, "no_mlflow", {"mlflow": {"enabled": False}})  # MLflow: test_workflow.py's
    command = [str(checkout / "bin" / "workflow"), "--cores", "2", "--rerun-incomplete", "--configfile",
               str(SMOKE), str(no_mlflow), "--config", f"results_dir={results}", "--", *targets]
    env = workflow.environment()
    process = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    model = results / "vision" / "model.pt"
    attribution_logs = results / "logs" / "vision_attribute"  # made when the first attribution job starts
    deadline = time.time() + 600
    while not attribution_logs.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
    # Snakemake starts an attribution only once training has finished, outputs and metadata: a kill right after the
    # model file appears (what this test waited for before) could leave training incomplete on a loaded machine, and
    # the resumed run then rightly trains again
    assert attribution_logs.exists() and model.exists(), "the model should have been trained before the kill"
    time.sleep(1)  # let the attribution jobs run a little
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not all(Path(t).exists() for t in targets), "the run finished before the kill: nothing was resumed"
    # a temporary file a killed writer would leave behind
    (results / "attributions").mkdir(parents=True, exist_ok=True)
    stale = results / "attributions" / f".x.abc{TEMP_MARK}.h5"
    stale.write_bytes(b"partial")
    before = {p: p.stat().st_mtime_ns for p in (results / "vision" / "world").glob("*.npz")}
    before[model] = model.stat().st_mtime_ns
    resumed = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "removing the stale lock of a run that was killed" in resumed.stderr
    assert "vision_train" not in job_counts(resumed.stderr + resumed.stdout)
    assert {p: p.stat().st_mtime_ns for p in before} == before, "finished outputs must not be redone"
    assert all(Path(t).exists() for t in targets) and not list(results.rglob(f"*{TEMP_MARK}*"))
    smoke_run = request.getfixturevalue("smoke_run")
    assert assert_identical_artifacts(smoke_run, results, subset=True) >= 15
