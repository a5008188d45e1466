"""Runs that every test of a session shares, started once even when pytest-xdist spreads the tests over workers.

A shared run lives in the session's base temporary folder, which the workers share (each worker's own
``tmp_path_factory`` folder lies inside it). The first worker to need a run takes a file lock, builds it and marks it
done; a worker that needs it meanwhile waits on the lock, then reads the same folder. A failed build is recorded, so
every test that needs the run fails with the build's own message instead of building it again.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base temporary folder every worker of this pytest session shares (the worker's own one without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_run(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder of the session's run ``name``, built by ``build(folder)`` the first time any worker asks.

    Args:
        tmp_path_factory: pytest's session factory.
        name: the run's name, unique in the session (its folder is ``shared-NAME``).
        build: fills the (new, empty) folder; raises (an ``AssertionError`` with the run's output) when it fails.

    Returns:
        The folder, done.
    """
    root = session_folder(tmp_path_factory)
    folder, done, failed = root / f"shared-{name}", root / f"shared-{name}.done", root / f"shared-{name}.failed"
    with FileLock(str(root / f"shared-{name}.lock")):
        if failed.exists():
            pytest.fail(f"the shared run {name!r} failed (in this session, maybe in another worker):\n{failed.read_text()}",
                        pytrace=False)
        if not done.exists():
            folder.mkdir(parents=True, exist_ok=True)
            try:
                build(folder)
            except BaseException as error:
                failed.write_text("".join(traceback.format_exception(error))[-8000:])
                raise
            done.touch()
    return folder
