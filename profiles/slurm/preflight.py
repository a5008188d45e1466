#!/usr/bin/env python3
"""Check the SLURM profile's site settings against the cluster, in plain words, before submitting.

    .venv/bin/python profiles/slurm/preflight.py            # on the login node, where you run snakemake

A wrong partition or account otherwise shows up only as raw sbatch text in the middle of a run
("sbatch: error: Batch job submission failed: Invalid partition name specified"). Checked:

1. SLURM's commands (sbatch, squeue, sinfo, scontrol) are on PATH and reach the controller.
2. Every partition of the partition file (slurm-partition-config, default partitions.yaml) exists and is
   up; a GPU partition (max_gpu > 0) has GPUs (GRES gpu) on its nodes; some partition takes CPU jobs.
3. The account (default-resources: slurm_account) is one of yours where the cluster keeps accounts.
4. Job status: the profile polls with squeue; where MinJobAge is below 3 x the first status-check delay
   the plugin switches to sacct, which never answers on a cluster without accounting (a silent hang).
5. MLflow: without MLFLOW_TRACKING_URI the jobs write results/mlflow.db (SQLite: unsafe on NFS).

Exit status: 0 when the settings fit (notes may be printed), 1 when something must be fixed first.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("preflight: PyYAML is missing; run this with the project's Python: .venv/bin/python " + sys.argv[0])

HERE = Path(__file__).resolve().parent


class Report:
    def __init__(self) -> None:
        self.problems = 0

    def ok(self, text: str) -> None:
        print(f"  ok    {text}")

    def note(self, text: str) -> None:
        print(f"  note  {text}")

    def problem(self, text: str, fix: str) -> None:
        self.problems += 1
        print(f"  FIX   {text}\n        -> {fix}")


def run(*command: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(command, 127, "", str(exc))


def load_profile(profile: Path) -> dict:
    config = yaml.safe_load((profile / "config.yaml").read_text()) or {}
    if not isinstance(config, dict):
        raise SystemExit(f"preflight: {profile / 'config.yaml'} is not a YAML mapping")
    return config


def check_commands(report: Report) -> bool:
    missing = [name for name in ("sbatch", "squeue", "sinfo", "scontrol") if shutil.which(name) is None]
    if missing:
        report.problem(f"SLURM commands not found on PATH: {', '.join(missing)}",
                       "run this (and snakemake) on a node that can submit jobs (a login node)")
        return False
    ping = run("scontrol", "ping")
    if ping.returncode != 0 or "UP" not in ping.stdout:
        report.problem(f"the SLURM controller does not answer: {(ping.stdout + ping.stderr).strip()}",
                       "check that SLURM works here: `sinfo` must list partitions")
        return False
    report.ok("sbatch, squeue, sinfo and scontrol reach the controller")
    return True


def cluster_partitions() -> dict[str, dict[str, str]]:
    """name -> {state, gres} of every partition (sinfo prints one line per partition and node state)."""
    done = run("sinfo", "-h", "-o", "%R|%a|%G")
    partitions: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        name, state, gres = (line.split("|") + ["", ""])[:3]
        entry = partitions.setdefault(name.strip(), {"state": state.strip(), "gres": ""})
        entry["gres"] += "," + gres.strip()
    return partitions


def check_partitions(report: Report, partition_file: Path) -> None:
    try:
        wanted = (yaml.safe_load(partition_file.read_text()) or {}).get("partitions") or {}
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        report.problem(f"cannot read the partition file {partition_file}: {exc}",
                       "see profiles/slurm/partitions.yaml for the format")
        return
    if not wanted:
        report.problem(f"{partition_file} lists no partitions", "name your CPU and GPU partitions there")
        return
    existing = cluster_partitions()
    listing = ", ".join(sorted(existing)) or "none"
    for name, limits in wanted.items():
        gpus = int((limits or {}).get("max_gpu", 0) or 0)
        if name not in existing:
            report.problem(f"partition '{name}' (in {partition_file.name}) does not exist on this cluster; "
                           f"it has: {listing}",
                           f"rename '{name}' in {partition_file} to one of your partitions (sinfo -s)")
            continue
        if existing[name]["state"] != "up":
            report.problem(f"partition '{name}' is {existing[name]['state']}", "pick a partition that is up")
            continue
        if gpus > 0 and "gpu" not in existing[name]["gres"]:
            report.problem(f"partition '{name}' has max_gpu {gpus} but its nodes offer no GPU (GRES gpu)",
                           "name your GPU partition here, or set max_gpu: 0 on a CPU-only cluster")
            continue
        report.ok(f"partition '{name}' exists and is up" + (f" (GPU jobs, up to {gpus} GPUs)" if gpus else " (CPU jobs)"))
    if all(int((limits or {}).get("max_gpu", 0) or 0) > 0 for limits in wanted.values()):
        report.note("every partition is a GPU partition: CPU jobs will run there too")
    if all(int((limits or {}).get("max_gpu", 0) or 0) == 0 for limits in wanted.values()):
        report.note("no GPU partition (max_gpu > 0): fine for the embedded runs (gpu=0); a paper run's "
                    "GPU jobs would find no partition")


def accounting_enabled() -> bool:
    done = run("scontrol", "show", "config")
    match = re.search(r"AccountingStorageType\s*=\s*(\S+)", done.stdout)
    return bool(match) and match[1] != "accounting_storage/none"


def check_account(report: Report, account: str, accounting: bool) -> None:
    if not account:
        report.ok("no account set (sbatch runs without -A; the plugin may guess your last one with sacct)")
        return
    if not accounting:
        report.ok(f"account '{account}' set; this cluster keeps no accounts, so it is not checked")
        return
    done = run("sacctmgr", "-n", "-s", "list", "user", getpass.getuser(), "format=account%256")
    mine = {line.strip().lower() for line in done.stdout.splitlines() if line.strip()}
    if done.returncode == 0 and mine and account.lower() not in mine:
        report.problem(f"account '{account}' is not one of yours ({', '.join(sorted(mine))})",
                       "set default-resources: slurm_account in profiles/slurm/config.yaml to one of them")
    else:
        report.ok(f"account '{account}'" + (" is one of yours" if mine else " set (sacctmgr lists none to compare)"))


def check_status_command(report: Report, config: dict, accounting: bool) -> None:
    command = config.get("slurm-status-command", "sacct (plugin default)")
    init = int(config.get("slurm-init-seconds-before-status-checks", 40))
    done = run("scontrol", "show", "config")
    match = re.search(r"MinJobAge\s*=\s*(\d+)", done.stdout)
    min_job_age = int(match[1]) if match else None
    uses_sacct = command != "squeue" or (min_job_age is not None and min_job_age < 3 * init
                                         and shutil.which("sacct") is not None)
    if uses_sacct and not accounting:
        report.problem(f"job status would be polled with sacct (status command {command}, MinJobAge "
                       f"{min_job_age} s), and this cluster has no accounting: snakemake would wait forever",
                       "keep `slurm-status-command: squeue` in profiles/slurm/config.yaml, and lower "
                       f"slurm-init-seconds-before-status-checks below MinJobAge/3 ({(min_job_age or 0) // 3} s)")
    elif min_job_age is not None and min_job_age < 180 and not uses_sacct:
        report.note(f"MinJobAge is {min_job_age} s: squeue forgets finished jobs sooner than the plugin's "
                    "longest status-check pause (180 s); ask your admins for MinJobAge >= 300")
    else:
        report.ok(f"job status via {'sacct' if uses_sacct else 'squeue'} "
                  f"({'with' if accounting else 'without'} accounting, MinJobAge {min_job_age} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=Path, default=HERE, help="profile folder (default: this one)")
    parser.add_argument("--partition-config", type=Path, help="partition file (default: the profile's)")
    parser.add_argument("--account", help="account (default: the profile's slurm_account)")
    args = parser.parse_args(argv)

    config = load_profile(args.profile)
    partition_file = args.partition_config or args.profile / str(config.get("slurm-partition-config", "partitions.yaml"))
    account = args.account if args.account is not None else str((config.get("default-resources") or {}).get("slurm_account", "") or "")

    report = Report()
    print(f"SLURM preflight for profile {args.profile}")
    if check_commands(report):
        accounting = accounting_enabled()
        report.ok(f"accounting daemon: {'yes' if accounting else 'no (sacct cannot answer; squeue is used)'}")
        check_partitions(report, partition_file)
        check_account(report, account, accounting)
        check_status_command(report, config, accounting)
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        report.note("MLFLOW_TRACKING_URI is unset: jobs log to results/mlflow.db (SQLite); on a shared "
                    "filesystem start `mlflow server` on this node and export MLFLOW_TRACKING_URI=http://...")
    if report.problems:
        print(f"{report.problems} problem(s) to fix before submitting (docs/slurm.md).")
        return 1
    print("The profile's site settings fit this cluster.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
