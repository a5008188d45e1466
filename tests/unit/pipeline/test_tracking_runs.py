"""MLflow as the record (issue 11), checked through MLflow's own client on a SQLite store in tmp_path:
one live run per job key after reruns, real job times, a parent with the config, killed parents ended,
concurrent flushers logging each record once, stems, directories and HDF5 references."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import shutil

import pytest
import yaml

from certified_circuits.pipeline import tracking


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty SQLite store: creating one costs seconds, copying it costs nothing."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_store: Path) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in (tracking.ENV_PARENT, tracking.ENV_RULE, tracking.ENV_WILDCARDS):
        monkeypatch.delenv(name, raising=False)
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(empty_store, results / "mlflow.db")
    monkeypatch.setenv(tracking.ENV_RECORDS, str(tracking.records_dir(results)))
    return results


def client_for(results: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking.tracking_uri(results))
    return client, client.get_experiment_by_name(tracking.EXPERIMENT).experiment_id


def job_runs(results: Path, key: str | None = None, deleted: bool = False) -> list:
    from mlflow.entities import ViewType

    client, experiment = client_for(results)
    query = "tags.kind = 'job'" + (f" and tags.job_key = '{key}'" if key else "")
    return client.search_runs([experiment], query, run_view_type=ViewType.ALL if deleted else ViewType.ACTIVE_ONLY,
                              max_results=1000)


def record(monkeypatch: pytest.MonkeyPatch, rule: str, wildcards: str, outputs: list, started: float, ended: float,
           **kwargs) -> Path:
    monkeypatch.setenv(tracking.ENV_RULE, rule)
    pairs = dict(item.split("=", 1) for item in wildcards.split(",") if item)
    monkeypatch.setenv(tracking.ENV_WILDCARDS, tracking.encode_wildcards(pairs))
    path = tracking.write_job_record(rule, {"x": 1}, outputs, ended - started, started_at=started, ended_at=ended, **kwargs)
    assert path is not None
    return path


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_rerun_replaces_the_earlier_run_and_times_are_the_jobs_own(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tracking.start_workflow_run(results)
    monkeypatch.setenv(tracking.ENV_PARENT, parent)
    out = results / "v.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("a\n1\n")
    t0 = 1_700_000_000.0
    record(monkeypatch, "votes", "experiment=toy,concept=c1", [out], t0, t0 + 12.5)
    assert tracking.flush_job_records(results) == 1
    # the job runs again (after a kill, or a changed input), wildcards in another order
    record(monkeypatch, "votes", "concept=c1,experiment=toy", [out], t0 + 100, t0 + 130.25, metrics={"peak": 0.75})
    # a record of an older execution of the same job, found pending late: must not win
    record(monkeypatch, "votes", "experiment=toy,concept=c1", [out], t0 + 50, t0 + 60)
    assert tracking.flush_job_records(results) == 2

    key = "votes[concept=c1,experiment=toy]"
    live = job_runs(results, key)
    assert len(live) == 1
    run = live[0]
    assert run.info.start_time == int((t0 + 100) * 1000) and run.info.end_time == int((t0 + 130.25) * 1000)
    assert run.info.status == "FINISHED" and run.data.metrics["peak"] == 0.75
    assert run.data.tags["mlflow.parentRunId"] == parent and run.data.tags["wildcard.concept"] == "c1"
    everything = job_runs(results, key, deleted=True)
    assert len(everything) == 3
    replaced = [r for r in everything if r.info.run_id != run.info.run_id]
    assert all(r.info.lifecycle_stage == "deleted" and "cc.replaced_by" in r.data.tags for r in replaced)
    assert len(list((tracking.records_dir(results) / "logged").glob("*.json"))) == 3


def test_parent_holds_the_config_and_the_invoking_process(results: Path) -> None:
    config = {"results_dir": str(results), "mlflow": {"enabled": True},
              "vision": {"k_grid": [0.1, 0.2], "certification": {"p_del": 0.6, "tau": 0.95}, "concepts": "all"},
              "notes": "x" * 7000, "odd key!": None}
    parent = tracking.start_workflow_run(results, tags={"configfiles": "a.yaml b.yaml"}, config=config)
    client, _ = client_for(results)
    run = client.get_run(parent)
    params = run.data.params
    assert params["vision.certification.p_del"] == "0.6" and params["vision.k_grid"] == "[0.1, 0.2]"
    assert params["vision.concepts"] == "all" and params["mlflow.enabled"] == "true"
    assert len(params["notes"]) == tracking.MAX_PARAM_VALUE and params["odd key_"] == "null"
    tags = run.data.tags
    assert tags["kind"] == "workflow" and tags["host"] == socket.gethostname() and tags["pid"] == str(os.getpid())
    assert tags["configfiles"] == "a.yaml b.yaml" and tags["results_dir"] == str(results.resolve())
    saved = yaml.safe_load(Path(client.download_artifacts(parent, "config.yaml", str(results.parent))).read_text())
    assert saved == config
    tracking.finish_workflow_run(results, parent, success=True, summary={"jobs": 0})
    assert client.get_run(parent).info.status == "FINISHED"
    assert not list((tracking.records_dir(results) / "parents").glob("*.json"))


def test_killed_parent_is_ended_on_the_next_start(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = socket.gethostname()
    alive = tracking.process_identity

    def identity_of(host: str, pid: int):
        monkeypatch.setattr(tracking.common, "process_identity", lambda: {"host": host, "pid": str(pid), "pid_start": ""})

    identity_of(here, dead_pid())
    killed = tracking.start_workflow_run(results)  # its invocation then died (SIGKILL: no hook ran)
    monkeypatch.setenv(tracking.ENV_PARENT, killed)
    (results / "a.csv").write_text("a\n")
    now = time.time()
    record(monkeypatch, "table", "", [results / "a.csv"], now - 2, now - 1)
    identity_of(here, dead_pid())
    unmarked = tracking.start_workflow_run(results)  # killed too, and its marker is gone
    (tracking.records_dir(results) / "parents" / f"{unmarked}.json").unlink()
    identity_of("elsewhere", 12345)
    remote = tracking.start_workflow_run(results)  # another host, recently active: presumed alive
    monkeypatch.setattr(tracking.common, "process_identity", alive)
    assert tracking.needs_recovery(results)  # a pending record and a dead parent

    current = tracking.start_workflow_run(results)
    client, _ = client_for(results)
    status = {run_id: client.get_run(run_id).info for run_id in (killed, unmarked, remote, current)}
    assert status[killed].status == "KILLED" and status[unmarked].status == "KILLED"
    assert status[killed].end_time >= status[killed].start_time
    assert status[remote].status == "RUNNING" and status[current].status == "RUNNING"
    # the killed invocation's record is still logged, under its own parent
    assert tracking.flush_job_records(results) == 1
    assert job_runs(results, "table")[0].data.tags["mlflow.parentRunId"] == killed
    # another host's parent is dead once nothing was heard from it for longer than the limit
    assert tracking.close_dead_parents(results, stale_after=0) == [remote]
    assert client.get_run(remote).info.status == "KILLED"
    tracking.finish_workflow_run(results, current, success=False)
    assert client.get_run(current).info.status == "FAILED"
    assert not tracking.needs_recovery(results)


def _flusher(results: str, barrier, counts) -> None:
    barrier.wait(timeout=120)
    counts.put(tracking.flush_job_records(results, progress=False))


@pytest.mark.slow
def test_concurrent_flushers_log_each_record_exactly_once(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the store is created once, in another process, as onstart does (this process never opens it before
    # forking, so the children share no database connection)
    made = subprocess.run([sys.executable, "-c", "import sys; from certified_circuits.pipeline import tracking; "
                           "print(tracking.start_workflow_run(sys.argv[1]))", str(results)],
                          capture_output=True, text=True, env={**os.environ})
    assert made.returncode == 0, made.stderr[-2000:]
    monkeypatch.setenv(tracking.ENV_PARENT, made.stdout.split()[-1])
    (results / "t.csv").write_text("a\n")
    t0 = 1_700_000_000.0
    for i in range(30):
        record(monkeypatch, "certify", f"concept=c{i}", [results / "t.csv"], t0 + i, t0 + i + 1)
    for i in range(10):  # ten jobs ran twice: the later execution must be the one live run
        record(monkeypatch, "certify", f"concept=c{i}", [results / "t.csv"], t0 + 1000 + i, t0 + 1001 + i)

    context = multiprocessing.get_context("fork")
    barrier, counts = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_flusher, args=(str(results), barrier, counts)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=240)
        assert worker.exitcode == 0
    assert counts.get(timeout=5) + counts.get(timeout=5) == 40

    assert len(job_runs(results, deleted=True)) == 40  # each record logged exactly once
    live = job_runs(results)
    assert len(live) == 30 and len({r.data.tags["job_key"] for r in live}) == 30
    for run in live:
        i = int(run.data.tags["wildcard.concept"][1:])
        assert run.info.start_time == int((t0 + (1000 + i if i < 10 else i)) * 1000)
    root = tracking.records_dir(results)
    assert not list(root.glob("pending/*.json")) and not list(root.glob("claimed/*/*.json"))
    assert len(list(root.glob("logged/*.json"))) == 40


def test_stale_claims_are_retaken_and_half_logged_runs_replaced(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracking.start_workflow_run(results)
    (results / "t.csv").write_text("a\n")
    path = record(monkeypatch, "summary", "", [results / "t.csv"], 1_700_000_000.0, 1_700_000_001.0)
    data = json.loads(path.read_text())
    # a flusher claimed it, created its run, and was killed before finishing it
    client, experiment = client_for(results)
    job_id = hashlib.sha256(f"{tracking.results_id(results)}\0summary".encode()).hexdigest()[:32]
    client.create_run(experiment, start_time=data["started_ms"], tags={
        "kind": "job", "job_key": "summary", "job_id": job_id, "record_id": data["record_id"]})
    dead = tracking.records_dir(results) / "claimed" / f"{socket.gethostname()}+{dead_pid()}+"
    dead.mkdir(parents=True)
    path.rename(dead / path.name)
    # a live flusher's claim (our parent process) is left alone
    live = tracking.records_dir(results) / "claimed" / f"{socket.gethostname()}+{os.getppid()}+"
    live.mkdir()
    other = record(monkeypatch, "other", "", [results / "t.csv"], 1_700_000_000.0, 1_700_000_001.0)
    other.rename(live / other.name)

    assert tracking.needs_recovery(results)
    assert tracking.flush_job_records(results) == 1
    runs = job_runs(results, "summary")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert len(job_runs(results, "summary", deleted=True)) == 2
    assert not dead.exists() and (live / other.name).exists()


def test_each_run_holds_exactly_its_own_outputs(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import h5py
    import numpy as np

    tracking.start_workflow_run(results)
    tables = results / "tables" / "world"
    tables.mkdir(parents=True)
    for suffix in ("csv", "md", "tex"):
        (tables / f"runtime.{suffix}").write_text(f"runtime {suffix}\n")
    (tables / "runtime_other.csv").write_text("another job's table\n")
    (tables / "curves.png").write_bytes(b"\x89PNG another job's figure")
    (tables / ".runtime.x.cc-tmp.csv").write_text("a killed writer's temporary\n")
    model = results / "data" / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "config.json").write_text("{}\n")
    (model / "tokenizer" / "vocab.json").write_text("{}\n")
    (model / "weights.safetensors").write_bytes(b"\0" * 1000)
    votes = results / "votes" / "c1.h5"
    votes.parent.mkdir(parents=True)
    with h5py.File(votes, "w") as handle:
        handle["counts"] = np.arange(10)

    record(monkeypatch, "runtime_table", "experiment=world", [tables / "runtime"], 1e9, 1e9 + 1)
    record(monkeypatch, "language_train", "", [model], 1e9, 1e9 + 1)
    record(monkeypatch, "votes", "concept=c1", [votes, tables / "missing.csv"], 1e9, 1e9 + 1)
    assert tracking.flush_job_records(results) == 3

    client, _ = client_for(results)

    def artifacts(rule: str, path: str = "") -> list[str]:
        run_id = job_runs(results, rule if rule != "runtime_table" else "runtime_table[experiment=world]")[0].info.run_id
        return sorted(a.path for a in client.list_artifacts(run_id, path))

    assert artifacts("runtime_table") == ["runtime.csv", "runtime.md", "runtime.tex"]
    assert artifacts("language_train") == ["model", "references.json"]
    assert artifacts("language_train", "model") == ["model/config.json", "model/tokenizer"]
    votes_run = job_runs(results, "votes[concept=c1]")[0]
    assert artifacts("votes[concept=c1]") == ["references.json"]  # HDF5: a reference, never a copy
    folder = Path(client.download_artifacts(votes_run.info.run_id, "references.json", str(results.parent)))
    reference = json.loads(folder.read_text())["references"]
    digest = hashlib.sha256(votes.read_bytes()).hexdigest()
    assert reference == [{"path": str(votes.resolve()), "artifact": "c1.h5", "bytes": votes.stat().st_size, "sha256": digest}]
    store = results / "mlflow-artifacts"
    assert not list(store.rglob("*.h5")) and not list(store.rglob("*.safetensors")) and not list(store.rglob("curves.png"))


def test_metrics_reach_the_run_and_bad_names_are_cleaned(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracking.start_workflow_run(results)
    tracking.add_metrics({"full_accuracy_id": 0.9})
    (results / "e.csv").write_text("a\n")
    record(monkeypatch, "vision_evaluate", "concept=c1", [results / "e.csv"], 1e9, 1e9 + 3,
           metrics={"peak acc (cACC)": 0.8, "not a number": "n/a"})
    assert tracking.flush_job_records(results) == 1
    metrics = job_runs(results, "vision_evaluate[concept=c1]")[0].data.metrics
    assert metrics["full_accuracy_id"] == 0.9 and metrics["peak acc _cACC_"] == 0.8 and metrics["seconds"] == 3
    assert "not a number" not in metrics


def test_records_of_the_first_format_are_still_logged(results: Path) -> None:
    tracking.start_workflow_run(results)
    pending = tracking.records_dir(results) / "pending"
    pending.mkdir(parents=True, exist_ok=True)
    (pending / "old.json").write_text(json.dumps({
        "stage": "votes", "rule": "votes", "wildcards": {"concept": "c1"}, "parent_run_id": "", "params": {"n": 5},
        "metrics": {"seconds": 2.0}, "outputs": [], "ended": 1_700_000_010.0, "host": "h"}))
    (pending / "broken.json").write_text("{not json")
    assert tracking.flush_job_records(results) == 1
    run = job_runs(results, "votes[concept=c1]")[0]
    assert run.info.start_time == 1_700_000_008_000 and run.info.end_time == 1_700_000_010_000
    assert (tracking.records_dir(results) / "failed" / "broken.json").exists()


def test_nothing_to_recover_costs_no_mlflow_import(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (tracking.records_dir(results) / "logged").mkdir(parents=True)
    code = ("import sys; from certified_circuits.pipeline import tracking; "
            "assert tracking.recover(sys.argv[1]) == (0, []); "
            "assert not [m for m in sys.modules if m.startswith(('mlflow', 'h5py'))], 'imported'")
    done = subprocess.run([sys.executable, "-c", code, str(results)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_record_that_fails_to_log_stays_pending_and_leaves_no_run(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracking.start_workflow_run(results)
    (results / "v.h5").write_bytes(b"\0" * 10)
    record(monkeypatch, "votes", "concept=c1", [results / "v.h5"], 1e9, 1e9 + 1)

    def unreadable(path: Path) -> str:
        raise PermissionError(f"cannot read {path}")

    original = tracking.records.sha256_of
    monkeypatch.setattr(tracking.records, "sha256_of", unreadable)
    assert tracking.flush_job_records(results) == 0
    assert len(tracking.pending_records(results)) == 1 and job_runs(results) == []
    monkeypatch.setattr(tracking.records, "sha256_of", original)
    assert tracking.flush_job_records(results) == 1
    assert len(job_runs(results)) == 1 and not tracking.pending_records(results)
