"""The integration tests' shared workflow runs: each starts once per session, whichever pytest-xdist worker asks first
(tests/helpers/shared.py), and every test that reads it reads the same folder. docs/testing.md lists what reads each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.paths import SMOKE
from tests.helpers.shared import shared_run
from tests.helpers.workflow import snakemake


def run_smoke(results: Path) -> None:
    """configs/smoke.yaml, every rule, into ``results``."""
    done = snakemake("--cores", "2", "--rerun-incomplete", "--configfile", SMOKE, "--config", f"results_dir={results}")
    assert done.returncode == 0, done.stderr[-6000:]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke run's results folder (configs/smoke.yaml, about 50 jobs): read by the golden, MLflow, explorer, MIB,
    report and rerun checks of test_workflow.py, and the reference that the killed-and-resumed run and the SLURM run
    must equal file for file. Tests only read it (dry runs and reports write nothing into it)."""
    folder = shared_run(tmp_path_factory, "smoke", lambda folder: run_smoke(folder / "results"))
    return folder / "results"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that reads the smoke run and names no xdist group of its own joins the group ``smoke``: with
    ``--dist loadgroup`` they queue on the worker that builds the run, and the other workers go on with the rest
    instead of waiting for the build."""
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group("smoke"))
