"""Shared fixtures for the engine tests, and the process settings every test process shares."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.core.devices import pin_cpu_code_paths

ROOT = Path(__file__).resolve().parents[1]

pin_cpu_code_paths()  # before torch runs anything: the CLI's CPU code paths in the test process too


#: why a ``gpu`` test is skipped on a machine without CUDA
NO_CUDA_REASON = "needs a CUDA device (torch.cuda.is_available() is False)"


#: The test files that start the longest chains of work, longest first (measured: docs/testing.md). They are collected
#: first, so pytest-xdist (``--dist loadfile --no-loadscope-reorder``, the Makefile's) starts them first, one file per
#: worker, and the short files fill the workers around them; a long chain started last would end the suite alone.
FIRST = ("integration/test_workflow.py", "integration/test_paper_scale.py", "integration/test_slurm.py",
         "integration/test_custom_vision.py", "integration/test_testbed_workflow.py",
         "integration/test_workflow_resume.py", "integration/test_custom_language.py")


def _first_rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    return next((rank for rank, name in enumerate(FIRST) if path.endswith(name)), len(FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the long files first (:data:`FIRST`; the rest keeps its order), and skip the tests marked ``gpu``
    (pyproject.toml's markers) when this machine has no CUDA device.

    torch is imported only when a collected test carries the marker."""
    items.sort(key=_first_rank)  # stable: each file's tests, and every other file, keep their order
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=NO_CUDA_REASON)
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def multipletests(monkeypatch: pytest.MonkeyPatch):
    """statsmodels' ``multipletests``, the independent reference the Holm and Bonferroni corrections are checked
    against, without the ``gc.collect()`` its Holm branch runs on every call (statsmodels frees memory there): in a
    test process holding torch's objects that is 30-50 ms a call, and 30 s for a 100-call comparison in ``make test``.
    Only the collection is skipped; the numbers are statsmodels' own."""
    import gc

    from statsmodels.stats.multitest import multipletests as reference

    monkeypatch.setattr(gc, "collect", _no_collection)
    return reference


def _no_collection(generation: int = 2) -> int:
    return 0


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260521)


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A folder laid out like the checkout for bin/workflow's lock tests: bin/workflow, a Snakemake lock left in
    .snakemake/locks, a config.yaml (bin/workflow checks it strictly first) and a fake `snakemake` in fakebin/
    that only records that it ran."""
    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "bin" / "workflow", tmp_path / "bin" / "workflow")
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.input.lock").write_text("results/x\n")
    fake = tmp_path / "fakebin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho ran > \"$PWD/snakemake.ran\"\n")
    fake.chmod(0o755)
    (tmp_path / "config.yaml").write_text("results_dir: results\n")
    return tmp_path
