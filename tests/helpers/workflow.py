"""Workflow runs for the tests: ``snakemake`` from the checkout, ``bin/workflow`` from a private copy of it, and the
parsing of a dry run's output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.paths import BIN, ROOT

#: what a private checkout copies: everything the workflow and bin/workflow read
CHECKOUT_PARTS = ("bin", "rules", "report", "envs", "profiles", "configs", "Snakefile", "config.yaml", "config.schema.yaml")


def environment(**extra: str) -> dict[str, str]:
    """This process's environment with the interpreter's folder first on PATH (``snakemake``, ``certified-circuits``)
    and no MLflow server inherited from the caller."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def snakemake(*args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None,
              timeout: int = 900) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``cwd`` (the checkout), its output captured as text."""
    command = [str(BIN / "snakemake"), *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env or environment(), capture_output=True, text=True, timeout=timeout)


def override(tmp: Path, name: str, patch: dict[str, Any]) -> Path:
    """``patch`` written as ``tmp/NAME.yaml``, a config layer for ``--configfile``."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(patch))
    return path


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Rule -> number of jobs from the 'Job stats' table of a run or dry run ({} when nothing to do)."""
    counts: dict[str, int] = {}
    if "Job stats:" not in dry_run_output:
        return counts
    table = dry_run_output.split("Job stats:", 1)[1].splitlines()
    for line in table[3:]:
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if not match or match[1] == "total":
            break
        counts[match[1]] = int(match[2])
    return counts


def dry_run_jobs(output: str) -> list[dict]:
    """One {rule, group_rule, wildcards, shell} per job of a `snakemake -n --printshellcmds` output."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", "\n" + output):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        jobs.append({
            "rule": re.sub(r"_group\d+$", "", head[1]),  # class-group rules (vision.classes_per_job) by kind
            "group_rule": head[1] if re.search(r"_group\d+$", head[1]) else None,
            "wildcards": dict(kv.split("=", 1) for kv in wildcards[1].split(", ")) if wildcards else {},
            "shell": shell[1] if shell else "",
        })
    return jobs


def private_checkout(folder: Path) -> Path:
    """A copy of the checkout's workflow files in ``folder`` (with ``.venv`` linked to this environment) for the tests
    that run ``bin/workflow``: the wrapper refuses to start while any snakemake run is live in its checkout, so tests
    that run in parallel (pytest-xdist) each take their own.

    Returns:
        The copy's root: run ``bin/workflow`` there.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for part in CHECKOUT_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, folder / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, folder / part)
    (folder / ".venv").symlink_to(BIN.parent)
    return folder
