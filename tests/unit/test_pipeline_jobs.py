"""The workflow's planning functions (pipeline/jobs.py): which jobs exist, their options and paths.

Two kinds of tests: the functions called directly on the default config (config.yaml), the smoke config
(configs/smoke.yaml) and the paper config (configs/paper.yaml), asserting exact option strings and job
lists; and the dry run of the whole workflow, whose jobs (rule, wildcards, inputs, outputs, log, shell
command) must stay those recorded in tests/unit/data/dry_run_jobs/ before the functions moved out of
rules/common.smk. Regenerate a golden list (after a deliberate change) with
``python tests/unit/test_pipeline_jobs.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GOLDEN = Path(__file__).resolve().parent / "data" / "dry_run_jobs"
#: golden list -> the config files of its dry run (none: config.yaml, the Snakefile's default); paper_fixture is
#: configs/paper.yaml with the fixture tree of tests/integration/paper_fixtures.py (built in a temporary folder)
DRY_RUNS = {"default": (), "smoke": ("configs/smoke.yaml",), "paper_fixture": ("configs/paper.yaml",)}
#: per-job lines of `snakemake -n -p` that vary between runs (or with the machine) and are not planned
VOLATILE = ("jobid", "reason")
#: a job waiting for a checkpoint (the default config's vision_iou) has an input function that could not run yet;
#: its params then pair up the characters of the checkpoint's pending path ("--circuits / t --circuits m p ...")
PENDING_PAIRS = re.compile(r"(?: --(circuits|class) \S \S)+")


def dry_run(configs: tuple[str, ...], results: Path) -> str:
    """The stdout of `snakemake -n -p` for ``configs`` with ``results_dir`` set to ``results``."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [str(BIN / "snakemake"), "-n", "-p", "--cores", "1"]
    if configs:
        command += ["--configfile", *configs]
    command += ["--config", f"results_dir={results}"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return done.stdout


def job_lines(output: str, results: Path) -> list[str]:
    """One line per job of a dry run, sorted: its rule, then every planned field (`input: ...`, `output:
    ...`, `wildcards: ...`, `resources: ...`, `Shell command: ...`) in the dry run's order, joined by
    ' | '; the results folder reads RESULTS, and run-specific fields (jobid, reason, tmpdir) are left out."""
    jobs = []
    for block in re.split(r"\n\[[^\]\n]+\]\n", "\n" + output):
        head = re.match(r"(?:local)?(rule|checkpoint) (\w+):\n", block)
        if not head:
            continue
        fields = [f"{head[1]} {head[2]}"]
        for line in block.splitlines()[1:]:
            if not line.strip():
                break
            key = line.strip().split(":", 1)[0]
            if key in VOLATILE:
                continue
            if key == "resources":
                line = re.sub(r"tmpdir=[^,]*(, )?", "", line)
            fields.append(line.strip())
        job = PENDING_PAIRS.sub(lambda m: f" --{m[1]} <pending checkpoint>", " | ".join(fields))
        jobs.append(job.replace(str(results), "RESULTS"))
    return sorted(jobs)


def paper_fixtures():
    """tests/integration/paper_fixtures.py as a module (it is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_fixtures", ROOT / "tests" / "integration" / "paper_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def current_jobs(name: str) -> list[str]:
    """The job lines of the golden list ``name``'s dry run now (the fixture tree's folder reads TREE)."""
    with tempfile.TemporaryDirectory(prefix="cc_dry_run_") as tmp:
        results = Path(tmp) / "results"
        configs = DRY_RUNS[name]
        if name == "paper_fixture":
            fixtures = paper_fixtures()
            tree = fixtures.build_paper_tree(Path(tmp) / "tree")
            configs += (str(fixtures.fixture_override(tree, results, Path(tmp) / "paper_fixture.yaml")),)
        lines = job_lines(dry_run(configs, results), results)
        return [line.replace(f"{tmp}/tree", "TREE") for line in lines]


@pytest.mark.parametrize("name", sorted(DRY_RUNS))
def test_the_dry_run_schedules_the_recorded_jobs_and_commands(name: str) -> None:
    """The jobs of `snakemake -n -p` (every field a rule plans, shell commands exactly) are the golden list."""
    expected = (GOLDEN / f"{name}.txt").read_text().splitlines()
    jobs = current_jobs(name)
    missing = [j for j in expected if j not in jobs]
    extra = [j for j in jobs if j not in expected]
    assert not missing and not extra, f"missing: {missing[:3]}\nextra: {extra[:3]}"
    assert jobs == expected  # the same multiset (a job twice would be a different plan)


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(DRY_RUNS):
        lines = current_jobs(name)
        (GOLDEN / f"{name}.txt").write_text("\n".join(lines) + "\n")
        print(f"{name}: {len(lines)} jobs -> {GOLDEN / f'{name}.txt'}")
