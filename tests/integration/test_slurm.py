"""The SLURM profile (profiles/slurm) on a real, private, single-node SLURM cluster (issue 11).

tests/helpers/slurm_cluster.py starts MUNGE (a generated key), slurmctld and slurmd (a generated slurm.conf) in
a temporary folder, on localhost and free ports, with a CPU and a GPU partition and *no accounting
daemon* (so `sacct` answers only "accounting storage is disabled", the case that made the old profile
hang). The daemons run as root and are stopped, and every job cancelled, when the module finishes.

Only the site settings of the profile are overridden, the way docs/slurm.md says: the partition file
(profiles/slurm/partitions.yaml with its partitions renamed to this cluster's) and the account (none:
a cluster without accounting cannot validate one). Everything else is the committed profile.

* A three-rule workflow: a job with gpu=1 goes to the GPU partition with a GPU request; jobs with gpu=0
  or no gpu resource go to the CPU partition with none.
* Part of the smoke config's DAG through the profile (one class's evaluation: world, training, attribution, votes,
  certificates, 8 jobs 6 deep): every job went through sbatch (the cluster's job list, one COMPLETED job per
  Snakemake job, none asking for a GPU, all in the CPU partition), every artifact it wrote (models, attributions,
  votes, certificates, the sufficiency table) equals the one of the session's local smoke run
  (tests/integration/conftest.py) file for file, and MLflow holds one child run of the workflow's parent run per
  job, with the same rules.
* profiles/slurm/preflight.py passes on the cluster and names a wrong partition in plain words.

Skipped, with the reason, where the SLURM/MUNGE binaries are missing (.ci/slurm-setup.sh installs them)
or the test does not run as root.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import workflow
from tests.helpers.artifacts import assert_identical_artifacts
from tests.helpers.paths import BIN, ROOT, SMOKE
from tests.helpers.slurm_cluster import SlurmCluster, unavailable_reason

PROFILE = ROOT / "profiles" / "slurm"
CPU_PARTITION, GPU_PARTITION = "cc_cpu", "cc_gpu"  # not the profile's names: the edit is exercised
ACCOUNT = "ccproject"

#: what the SLURM run makes: one class's sufficiency table of the smoke config (8 jobs, 6 deep); the session's smoke
#: run made the same files locally
TARGET = "sufficiency/world/concept/circle/p0.6_n020_n100_s0/t0.7_a0.05_bonferroni.csv"
SLURM_JOBS = {"vision_world": 1, "vision_train": 1, "vision_attribute": 1, "votes": 2, "certify": 2, "vision_evaluate": 1}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cluster():
    slurm = SlurmCluster(partitions=(CPU_PARTITION, GPU_PARTITION))
    slurm.start()
    try:
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture(scope="module")
def site_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of profiles/slurm with only its site settings edited, where docs/slurm.md says: the
    partitions of partitions.yaml renamed to this cluster's, and slurm_account set in config.yaml."""
    profile = tmp_path_factory.mktemp("site") / "slurm"
    shutil.copytree(PROFILE, profile, ignore=shutil.ignore_patterns("__pycache__"))
    site = yaml.safe_load((PROFILE / "partitions.yaml").read_text())
    renamed = {GPU_PARTITION if limits.get("max_gpu", 0) > 0 else CPU_PARTITION: limits
               for limits in site["partitions"].values()}
    assert set(renamed) == {CPU_PARTITION, GPU_PARTITION}, site
    (profile / "partitions.yaml").write_text(yaml.safe_dump({"partitions": renamed}))
    config = (profile / "config.yaml").read_text()
    account_line = re.compile(r'^(\s+slurm_account:\s*)""', re.MULTILINE)
    assert len(account_line.findall(config)) == 1, "config.yaml must hold one slurm_account: \"\" line"
    (profile / "config.yaml").write_text(account_line.sub(rf'\g<1>"{ACCOUNT}"', config))
    return profile


def environment(cluster: SlurmCluster) -> dict[str, str]:
    return cluster.env(workflow.environment())


def snakemake_on_slurm(cluster: SlurmCluster, profile: Path, *args: str, cwd: Path = ROOT,
                       timeout: int = 600) -> subprocess.CompletedProcess:
    """`snakemake --profile <profiles/slurm with the site settings edited> ...`."""
    command = [str(BIN / "snakemake"), "--profile", str(profile), *args]
    return subprocess.run(command, cwd=cwd, env=environment(cluster), capture_output=True, text=True,
                          timeout=timeout)


def failure(done: subprocess.CompletedProcess, cluster: SlurmCluster, cwd: Path = ROOT) -> str:
    logs = sorted((cwd / ".snakemake" / "slurm_logs").rglob("*.log"), key=lambda p: p.stat().st_mtime)[-3:]
    return "\n".join([(done.stdout + done.stderr)[-8000:], *(f"== {p}\n{p.read_text()[-3000:]}" for p in logs),
                      cluster.log_tail(20), str(cluster.jobs())])


def run_id_of(output: str) -> str:
    match = re.search(r"SLURM run ID: (\S+)", output)
    assert match, output[-3000:]
    return match[1]


def rule_of(comment: str) -> str:
    """The plugin's job comment is rule_<rule> or rule_<rule>_wildcards_<wildcards>."""
    assert comment.startswith("rule_"), comment
    return comment[len("rule_"):].split("_wildcards_", 1)[0]


# ------------------------------------------------------------------------------- GPU routing


def test_gpu_jobs_go_to_the_gpu_partition_and_cpu_jobs_ask_for_no_gpu(cluster, site_profile, tmp_path):
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "cpu.txt", "gpu.txt", "plain.txt"\n\n'
        'rule with_gpu:\n    output: "gpu.txt"\n    resources: gpu=1\n    shell: "echo $SLURM_JOB_PARTITION > {output}"\n\n'
        'rule without_gpu:\n    output: "cpu.txt"\n    resources: gpu=0\n    shell: "echo $SLURM_JOB_PARTITION > {output}"\n\n'
        'rule no_gpu_resource:\n    output: "plain.txt"\n    shell: "echo $SLURM_JOB_PARTITION > {output}"\n'
    )
    done = snakemake_on_slurm(cluster, site_profile, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, failure(done, cluster, tmp_path)
    run_id = run_id_of(done.stdout + done.stderr)
    jobs = {rule_of(job["comment"]): job for job in cluster.jobs() if job["name"] == run_id}
    assert set(jobs) == {"with_gpu", "without_gpu", "no_gpu_resource"}, jobs
    assert {job["account"] for job in jobs.values()} == {ACCOUNT}, jobs
    assert jobs["with_gpu"]["partition"] == GPU_PARTITION and "gpu:1" in jobs["with_gpu"]["tres_per_job"], jobs
    for rule in ("without_gpu", "no_gpu_resource"):
        assert jobs[rule]["partition"] == CPU_PARTITION, jobs
        assert "gpu" not in jobs[rule]["tres_per_job"] + jobs[rule]["tres_per_node"], jobs
    assert all(job["state"] == "COMPLETED" for job in jobs.values()), jobs
    assert (tmp_path / "gpu.txt").read_text().strip() == GPU_PARTITION  # ran there, inside SLURM
    assert (tmp_path / "cpu.txt").read_text().strip() == CPU_PARTITION


# ------------------------------------------------------------------------------- the workflow


@pytest.fixture(scope="module")
def runs(cluster, site_profile, tmp_path_factory: pytest.TempPathFactory):
    """:data:`TARGET` of the smoke config through the profile. Returns (SLURM results, SLURM run id, snakemake
    output)."""
    results = tmp_path_factory.mktemp("slurm-workflow") / "results"
    started = time.monotonic()
    done = snakemake_on_slurm(cluster, site_profile, "--configfile", str(SMOKE), "--config", f"results_dir={results}",
                              "--", str(results / TARGET))
    assert done.returncode == 0, failure(done, cluster)
    print(f"SLURM workflow: {time.monotonic() - started:.0f} s")
    return results, run_id_of(done.stdout + done.stderr), done.stdout + done.stderr


def test_every_job_went_through_sbatch_to_the_cpu_partition(cluster, runs):
    results, run_id, output = runs
    jobs = [job for job in cluster.jobs() if job["name"] == run_id]
    finished = re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", output)
    local = set(re.findall(r"^localrule (\w+):", output, re.MULTILINE))
    assert local <= {"all"}, f"jobs run on the submit node instead of through sbatch: {local - {'all'}}"
    ran = collections.Counter(rule for rule in finished if rule not in local)  # `all` has no command
    assert ran == collections.Counter(SLURM_JOBS), output[-3000:]
    assert collections.Counter(rule_of(job["comment"]) for job in jobs) == ran, (jobs, ran)
    assert all(job["state"] == "COMPLETED" for job in jobs), jobs
    # embedded runs declare gpu=0: no job may ask for a GPU (the old profile's set-resources did)
    assert {job["partition"] for job in jobs} == {CPU_PARTITION}, jobs
    assert {job["account"] for job in jobs} == {ACCOUNT}, jobs
    assert not [job for job in jobs if "gpu" in job["tres_per_job"] + job["tres_per_node"]], jobs
    # the job status came from squeue: this cluster has no accounting, sacct cannot answer
    sacct = subprocess.run(["sacct", "-n"], env=cluster.env(), capture_output=True, text=True)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr.lower(), sacct


def test_slurm_results_equal_the_local_run(smoke_run, runs):
    """Every artifact of the SLURM run (the models, attributions, votes, certificates and the sufficiency table of
    its 8 jobs) equals the session's local smoke run's, content for content."""
    results, _, _ = runs
    assert (results / TARGET).is_file()
    assert assert_identical_artifacts(smoke_run, results, subset=True) >= 15


def test_mlflow_holds_one_child_run_per_slurm_job(cluster, runs):
    from mlflow.tracking import MlflowClient

    results, run_id, _ = runs
    jobs = [job for job in cluster.jobs() if job["name"] == run_id]
    client = MlflowClient(f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("certified-circuits")
    parents = client.search_runs([experiment.experiment_id], "tags.kind = 'workflow'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", parents
    children = client.search_runs([experiment.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'", max_results=1000)
    assert len(children) == len(jobs), (len(children), len(jobs))
    assert collections.Counter(run.data.tags["rule"] for run in children) == collections.Counter(
        rule_of(job["comment"]) for job in jobs)
    assert not list((results / ".tracking" / "pending").glob("*.json")), "every job record was logged"


# ------------------------------------------------------------------------------- preflight


def test_preflight_accepts_the_site_settings_and_names_a_wrong_partition(cluster, site_profile, tmp_path):
    preflight = [sys.executable, str(site_profile / "preflight.py")]
    good = subprocess.run(preflight, env=environment(cluster), capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "FIX" not in good.stdout and "without accounting" in good.stdout, good.stdout
    wrong = tmp_path / "partitions.yaml"
    wrong.write_text(yaml.safe_dump({"partitions": {"nosuch": {"max_gpu": 0}, GPU_PARTITION: {"max_gpu": 1}}}))
    bad = subprocess.run([*preflight, "--partition-config", str(wrong)], env=environment(cluster),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "partition 'nosuch'" in bad.stdout and CPU_PARTITION in bad.stdout, bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr
    # the plugin's default status command would hang on this cluster: preflight says so
    config = site_profile / "config.yaml"
    sacct_profile = tmp_path / "sacct"
    shutil.copytree(site_profile, sacct_profile)
    (sacct_profile / "config.yaml").write_text(config.read_text().replace("slurm-status-command: squeue", ""))
    hang = subprocess.run([sys.executable, str(sacct_profile / "preflight.py")], env=environment(cluster),
                          capture_output=True, text=True, timeout=120)
    assert hang.returncode == 1 and "wait forever" in hang.stdout, hang.stdout
