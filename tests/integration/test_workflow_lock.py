"""bin/workflow removes a Snakemake lock only when its owner is gone, and never in a dry run (issue 21:
it removed the lock of a live `snakemake` started by hand in the same checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the workflow or a real process tree

ROOT = Path(__file__).resolve().parents[2]


def _run(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    # the fake snakemake first, then this interpreter's certified-circuits (bin/workflow's config check)
    env = {**os.environ, "PATH": f"{checkout / 'fakebin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(checkout / "bin" / "workflow"), *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60)


def _lock(checkout: Path) -> Path:
    return checkout / ".snakemake" / "locks" / "0.input.lock"


def test_a_live_snakemakes_lock_is_kept(checkout: Path) -> None:
    # a live workflow's main process holds the checkout's flock (the Snakefile takes it; issue 28: the owner
    # is decided by the flock, not by its command line)
    script = checkout / "snakemake"
    script.write_text("import time\nfrom certified_circuits.storage.locks import CHECKOUT_LOCK, hold_lock\n"
                      "handle = hold_lock(CHECKOUT_LOCK, shared=True)\ntime.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, str(script)], cwd=checkout)
    try:
        time.sleep(1.0)
        for args in ((), ("-n",), ("--cores", "1")):
            done = _run(checkout, *args)
            assert done.returncode == 1, done.stderr
            assert f"is live (pid {owner.pid} on host" in done.stderr
            assert _lock(checkout).exists() and not (checkout / "snakemake.ran").exists()
    finally:
        owner.kill()
        owner.wait()


def test_a_dead_runs_lock_is_removed_but_not_in_a_dry_run(checkout: Path) -> None:
    # another process in the checkout that is not snakemake does not own the lock
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "snakemake"], cwd=checkout)
    try:
        _check_dead_owner(checkout)
    finally:
        decoy.kill()
        decoy.wait()


def _check_dead_owner(checkout: Path) -> None:
    for dry in (("-n",), ("-np",), ("--dry-run",)):
        done = _run(checkout, *dry)
        assert done.returncode == 0, done.stderr
        assert "left in place for a dry run" in done.stderr and _lock(checkout).exists()
    done = _run(checkout, "--cores", "1")
    assert done.returncode == 0, done.stderr
    assert "removing the stale lock" in done.stderr
    assert not _lock(checkout).exists() and (checkout / "snakemake.ran").read_text() == "ran\n"


def test_a_live_wrappers_flock_refuses_a_second_wrapper(checkout: Path) -> None:
    holder = subprocess.Popen(["flock", str(checkout / ".snakemake" / "workflow.flock"), "sleep", "30"])
    try:
        time.sleep(0.2)
        done = _run(checkout, "--cores", "1")
        assert done.returncode == 1 and "another certified-circuits workflow is running" in done.stderr
        assert _lock(checkout).exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_config_syntax_error_is_named_before_snakemake_runs(checkout: Path) -> None:
    """Issue 21: snakemake reports a YAML syntax error without file or line; bin/workflow checks first."""
    (checkout / "bad.yaml").write_text("vision:\n  enabled: true\n   oops: [\n")
    done = _run(checkout, "--cores", "1", "--configfile", str(checkout / "bad.yaml"))
    assert done.returncode == 2 and not (checkout / "snakemake.ran").exists()
    assert f"{checkout / 'bad.yaml'}:3:" in done.stderr

