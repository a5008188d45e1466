"""Code run in a fresh interpreter, for checks of what an import loads (a test process has loaded everything)."""

from __future__ import annotations

import subprocess
import sys


def fresh_output(code: str, timeout: int = 120) -> str:
    """Run ``code`` with this interpreter in a new process and return its stdout, stripped.

    Args:
        code: Python source (``python -c``).
        timeout: seconds before the run is killed.

    Returns:
        What it printed.

    Raises:
        AssertionError: it exited non-zero (its stderr is the message).
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
