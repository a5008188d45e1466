"""Cost of the paper path on the fixture tree: `snakemake --cores 2` with configs/paper.yaml and the
configs/paper_fixture.yaml override (the same run as tests/integration/test_paper_scale.py).

It builds the fixture tree (random ResNet-50 and GPT-2 weights, ImageNet-shaped folders) in a temporary
folder and measures wall time and CPU time (user + system of snakemake and every job it starts; the CPU
time does not depend on what else the machine runs). The budget is 3 minutes of 2 cores (360 CPU-s).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BUDGET_CPU_SECONDS = 2 * 180


def load_fixtures():
    spec = importlib.util.spec_from_file_location("paper_fixtures", ROOT / "tests" / "helpers" / "paper_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    fixtures = load_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        tree = fixtures.build_paper_tree(Path(tmp) / "tree")
        override = fixtures.fixture_override(tree, Path(tmp) / "results", Path(tmp) / "paper_fixture.yaml")
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        env.pop("MLFLOW_TRACKING_URI", None)
        command = [str(BIN / "snakemake"), "--cores", "2", "--configfile", str(ROOT / "configs" / "paper.yaml"), str(override)]
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the paper fixture run failed:\n{(done.stdout + done.stderr)[-4000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s (user {after.ru_utime - before.ru_utime:.0f} s)")
    print(f"SUMMARY paper_fixture_run: {cpu:.0f} CPU-s = {cpu / BUDGET_CPU_SECONDS:.2f} of the budget "
          f"({BUDGET_CPU_SECONDS} CPU-s, 3 minutes of 2 cores); wall {wall:.0f} s")


if __name__ == "__main__":
    main()
