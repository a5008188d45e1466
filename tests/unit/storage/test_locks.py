"""Issue 28, item 2: a lock is never taken from a live run, and one results folder serves one live workflow.

The owner of a lock is decided by the kernel (a flock that can be taken has no live holder), never by a
command line: a `python -u .venv/bin/snakemake ...` owner is respected like any other.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from certified_circuits.pipeline.snakemake_args import snakemake_runs_jobs
from certified_circuits.storage.atomic import TEMP_MARK
from certified_circuits.storage.locks import CHECKOUT_LOCK, RESULTS_LOCK, RunLocked, hold_lock, lock_results
from tests.helpers.paths import ROOT

BIN = Path(sys.executable).parent

HOLDER = """
import sys, time
from certified_circuits.storage.locks import hold_lock
handle = hold_lock(sys.argv[1], shared=sys.argv[2] == "shared")
print("held", flush=True)
time.sleep(120)
"""


def start_holder(lock: Path, cwd: Path, shared: bool = False, argv0: Path | None = None) -> subprocess.Popen:
    """A live process holding a flock on ``lock``; with ``argv0`` its command line is
    ``python -u argv0 ...`` (how `python -u .venv/bin/snakemake` looks in /proc)."""
    script = argv0 or (cwd / "holder.py")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(HOLDER)
    process = subprocess.Popen([sys.executable, "-u", str(script), str(lock), "shared" if shared else "exclusive"],
                               cwd=cwd, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)  # no cleanup runs: the kernel alone drops the lock
    process.wait()


def test_a_held_results_folder_is_refused_naming_its_holder(tmp_path: Path) -> None:
    results = tmp_path / "results"
    holder = start_holder(results / RESULTS_LOCK, cwd=tmp_path)
    try:
        with pytest.raises(RunLocked) as caught:
            lock_results(results)
        message = str(caught.value)
        assert f"results folder {results} is in use by another certified-circuits workflow" in message
        assert f"pid {holder.pid} on host {socket.gethostname()}" in message
        assert f"from {tmp_path}" in message and "started 20" in message
    finally:
        stop(holder)
    handle = lock_results(results)  # the holder was killed: its lock is free, and now records this process
    record = json.loads((results / RESULTS_LOCK).read_text())
    assert record["pid"] == os.getpid() and record["checkout"] == os.getcwd()
    handle.close()


def test_shared_checkout_locks_coexist_but_exclude_an_exclusive_taker(tmp_path: Path) -> None:
    lock = tmp_path / CHECKOUT_LOCK
    first = hold_lock(lock, shared=True)
    second = hold_lock(lock, shared=True)
    with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
        hold_lock(lock)
    first.close()
    second.close()
    hold_lock(lock).close()


@pytest.mark.parametrize("argv, runs", [
    (["--cores", "2"], True), (["-c", "1", "--configfile", "x.yaml"], True), (["--touch"], True),
    (["-n"], False), (["-np"], False), (["--dry-run"], False), (["--dryrun"], False), (["--unlock"], False),
    (["--lint"], False), (["--list-rules"], False), (["--report", "r.html"], False), (["--summary"], False),
    (["--cores", "1", "--config", "results_dir=-n"], True),
])
def test_which_snakemake_command_lines_take_the_results_lock(argv: list[str], runs: bool) -> None:
    assert snakemake_runs_jobs(argv) is runs


# ------------------------------------------------------------------------------ bin/workflow


def run_wrapper(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{checkout / 'fakebin'}:{BIN}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(checkout / "bin" / "workflow"), *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_live_python_u_snakemake_owner_is_respected_and_its_stale_lock_removed_once_killed(checkout: Path) -> None:
    """The owner runs as `python -u .venv/bin/snakemake` (argv[0] is python, argv[1] a path): the old
    command-line match missed it. Its flock names it; once it is killed, the same lock is stale."""
    snakemake_lock = checkout / ".snakemake" / "locks" / "0.input.lock"
    owner = start_holder(checkout / CHECKOUT_LOCK, cwd=checkout, shared=True,
                         argv0=checkout / ".venv" / "bin" / "snakemake")
    try:
        for args in (("--cores", "1"), ("-n",)):
            done = run_wrapper(checkout, *args)
            assert done.returncode == 1, done.stderr
            assert f"a snakemake run in {checkout.resolve()} is live (pid {owner.pid} on host " in done.stderr
            assert snakemake_lock.exists() and not (checkout / "snakemake.ran").exists()
    finally:
        stop(owner)
    done = run_wrapper(checkout, "-n")
    assert done.returncode == 0 and "left in place for a dry run" in done.stderr and snakemake_lock.exists()
    done = run_wrapper(checkout, "--cores", "1")
    assert done.returncode == 0, done.stderr
    assert "removing the stale lock of a run that was killed" in done.stderr
    assert not snakemake_lock.exists() and (checkout / "snakemake.ran").read_text() == "ran\n"


def test_a_process_named_snakemake_without_the_flock_is_not_an_owner(checkout: Path) -> None:
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "snakemake"], cwd=checkout)
    try:
        done = run_wrapper(checkout, "--cores", "1")
        assert done.returncode == 0 and "removing the stale lock" in done.stderr
    finally:
        stop(decoy)


# ------------------------------------------------------------------------------ the Snakefile itself


def snakemake(workdir: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [str(BIN / "snakemake"), "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(ROOT / "configs" / "smoke.yaml"), "--config", f"results_dir={results}", *args]
    return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_second_workflow_on_a_results_folder_is_refused_from_another_checkout(tmp_path: Path) -> None:
    """Checkout A runs on RESULTS (a process holds its lock, with a live temporary file); a real run from
    checkout B is refused before any job and before the clean-up of temporary files; a dry run is not."""
    results, a, b = tmp_path / "results", tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    live_tmp = results / "votes" / f".x.abc{TEMP_MARK}.h5"
    live_tmp.parent.mkdir(parents=True)
    live_tmp.write_bytes(b"being written")
    holder = start_holder(results / RESULTS_LOCK, cwd=a)
    try:
        done = snakemake(b, results, "--cores", "1")
        assert done.returncode != 0
        assert (f"results folder {results} is in use by another certified-circuits workflow (pid {holder.pid} "
                f"on host {socket.gethostname()}") in done.stderr and f"from {a}" in done.stderr
        assert live_tmp.exists() and not (results / "world").exists()
        dry = snakemake(b, results, "-n", "--quiet")
        assert dry.returncode == 0, dry.stderr[-2000:]
    finally:
        stop(holder)
    time.sleep(0.1)
    assert json.loads((results / RESULTS_LOCK).read_text())["pid"] == holder.pid  # a dry run records nothing


def test_a_file_system_without_flock_warns_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    import errno
    import fcntl

    def no_flock(handle: object, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    lock_results(tmp_path).close()
    assert "does not support flock, so nothing stops a second workflow" in capsys.readouterr().err
