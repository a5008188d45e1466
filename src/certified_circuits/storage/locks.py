"""Run locks: one live workflow per results folder (:func:`lock_results`, :data:`RESULTS_LOCK`) and the live runs
of a checkout (:data:`CHECKOUT_LOCK`), each a non-blocking ``flock`` that records its holder (:func:`hold_lock`,
:func:`run_record`); a lock that is held names that process (:class:`RunLocked`, :func:`describe_holder`). The
kernel drops a lock when its process dies, however it dies, so no stale lock outlives a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: the lock file of a results folder: the workflow's main process holds a flock on it for its whole run
RESULTS_LOCK = ".certified-circuits.lock"
#: the lock file of a checkout (working folder): every live run started there holds a shared flock on it
CHECKOUT_LOCK = os.path.join(".snakemake", "certified-circuits.run.lock")


class RunLocked(RuntimeError):
    """Another live process holds the lock (its record names it: pid, host, start time, checkout)."""


def run_record() -> dict[str, Any]:
    """Who this process is, as a lock file records it."""
    import socket
    import sys
    import time

    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "checkout": os.getcwd(),
            "command": " ".join(sys.argv)}


def describe_holder(path: str | os.PathLike) -> str:
    """The record in a lock file, in words (or that it holds none)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "a process that left no record"
    return (f"pid {record.get('pid')} on host {record.get('host', '?')}, started {record.get('started', '?')} "
            f"from {record.get('checkout', '?')}")


def hold_lock(path: str | os.PathLike, shared: bool = False) -> Any:
    """Take a non-blocking flock on ``path`` (created if needed) and record this process in it.

    The kernel keeps the lock for as long as the returned file object is open, and drops it when the
    process dies, however it dies: a lock that can be taken proves that no live process holds it, so no
    command line or pid has to be guessed. Keep the returned object for as long as the lock must hold.

    Raises:
        RunLocked: another process holds it; the message names that process from its record.
    """
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the process ends
    except PermissionError:  # a colleague's lock file: a read-only descriptor locks all the same
        handle = open(path, encoding="utf-8")  # noqa: SIM115
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunLocked(describe_holder(path)) from None
    except OSError as exc:  # a file system without flock (some Lustre mounts): say so, do not stop the run
        import sys

        print(f"warning: cannot lock {path} ({exc}): this file system does not support flock, so nothing stops a "
              f"second workflow on the same folder; run one at a time", file=sys.stderr)
        return handle
    if handle.writable():
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(run_record()) + "\n")
        handle.flush()
    return handle


def lock_results(root: str | os.PathLike) -> Any:
    """Hold ``root``'s results lock for the rest of this process (see :func:`hold_lock`).

    Raises:
        RunLocked: another workflow uses ``root``; the message says which and what to do.
    """
    try:
        return hold_lock(Path(root) / RESULTS_LOCK)
    except RunLocked as held:
        raise RunLocked(f"results folder {root} is in use by another certified-circuits workflow ({held}); wait for "
                        f"it to finish or stop it, or give this run another results_dir") from None
