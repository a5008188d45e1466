"""Progress where the user looks: the latest line of each running job's log, on the workflow's stderr (issue 35).

Every rule sends its job's stderr (progress bars, stage logs) to its log file, so a 30-minute ``vision_train``
shows nothing in the terminal. :func:`start_progress` starts a daemon thread in the main Snakemake process that,
every ``interval`` seconds (:data:`INTERVAL`, at most 60; ``CC_PROGRESS_SECONDS`` sets it), prints one line per
running job: its rule, how long it has run and the latest line of its log (a progress bar's last state: the text
after its last carriage return). Running jobs are Snakemake's scheduler's (``workflow.scheduler.running``);
where that is not available, the logs under ``<results>/logs`` written to since the last tick. The thread only
reads; it stops with :meth:`Progress.stop` (the workflow's end hooks) or with the process.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TextIO

__all__ = ["INTERVAL", "Progress", "latest_line", "progress_interval", "running_logs", "start_progress"]

#: seconds between two progress reports (at most a minute: issue 35)
INTERVAL = 60.0
#: bytes read from the end of a log to find its latest line
TAIL_BYTES = 8192
#: longest progress line printed (the rest of a log line is cut)
WIDTH = 160
#: the stage logs' prefix (date, time, logger, level), left out of a progress line: the line says when
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:,.]+ \S+ (?:INFO|DEBUG) ")


def latest_line(path: str | os.PathLike) -> str:
    """The latest non-empty line of a log: the text after its last newline or carriage return (a progress bar's
    current state), whitespace-trimmed, without a stage log's date, logger and INFO level; "" for a missing or empty
    log."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.replace("\r", "\n").split("\n")]
    return LOG_PREFIX.sub("", next((line for line in reversed(lines) if line), ""))


def running_logs(workflow: Any, results: str | os.PathLike, since: float) -> list[tuple[str, Path]]:
    """(job label, log path) of each running job: Snakemake's scheduler's running jobs and their log files
    (label: rule and wildcards); without a scheduler, the logs under ``<results>/logs`` modified after ``since``
    (label: the log's folder)."""
    scheduler = getattr(workflow, "scheduler", None)
    running = getattr(scheduler, "running", None)
    if running is not None:
        for _ in range(3):  # the scheduler's thread may change the set while it is copied
            try:
                jobs = list(running)
                break
            except RuntimeError:
                continue
        else:
            jobs = []
        found = []
        for job in jobs:
            wildcards = ", ".join(f"{k}={v}" for k, v in dict(getattr(job, "wildcards_dict", {}) or {}).items())
            label = getattr(getattr(job, "rule", None), "name", "job") + (f" ({wildcards})" if wildcards else "")
            found += [(label, Path(str(log))) for log in (getattr(job, "log", None) or [])]
        return found
    root = Path(results) / "logs"
    if not root.is_dir():
        return []
    return [(str(p.parent.relative_to(root)), p) for p in sorted(root.rglob("*.log")) if p.stat().st_mtime > since]


class Progress:
    """The reporting thread (:func:`start_progress`)."""

    def __init__(self, logs: Callable[[float], Iterable[tuple[str, Path]]], interval: float, stream: TextIO):
        self.logs = logs
        self.interval = interval
        self.stream = stream
        self.started: dict[str, float] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="certified-circuits-progress", daemon=True)

    def report(self, since: float) -> list[str]:
        """One line per running job with a log line: ``[HH:MM:SS] rule (wildcards), 3 min: <latest line>``;
        printed on the stream and returned."""
        now = time.time()
        lines = []
        for label, path in self.logs(since):
            line = latest_line(path)
            if not line:
                continue
            minutes = (now - self.started.setdefault(str(path), now)) / 60
            text = f"[{time.strftime('%H:%M:%S')}] {label}, {minutes:.0f} min: {line}"
            lines.append(text if len(text) <= WIDTH else text[: WIDTH - 3] + "...")
        if lines:
            print(*lines, sep="\n", file=self.stream, flush=True)
        return lines

    def _run(self) -> None:
        since = time.time()
        while not self._stop.wait(self.interval):
            tick = time.time()
            try:
                self.report(since)
            except Exception:  # progress never stops the workflow  # noqa: BLE001
                pass
            since = tick

    def stop(self) -> None:
        """Stop reporting (before the end-of-run message)."""
        self._stop.set()


#: the environment variable that sets the interval, and its domain (seconds)
INTERVAL_VARIABLE = "CC_PROGRESS_SECONDS"
INTERVAL_RANGE = (1.0, INTERVAL)


def progress_interval(environ: Mapping[str, str] | None = None) -> float:
    """The progress interval of :data:`INTERVAL_VARIABLE`, checked (the Snakefile calls it at parse time, before
    any job): a finite number of seconds in :data:`INTERVAL_RANGE`. NaN once printed a line per loop turn, and 0,
    -1 or 600 were clamped without a word.

    Args:
        environ: the environment (default ``os.environ``).

    Returns:
        The interval in seconds (:data:`INTERVAL` when the variable is unset or empty).

    Raises:
        ValueError: naming the variable, its value, the domain and the fix.
    """
    text = (os.environ if environ is None else environ).get(INTERVAL_VARIABLE, "").strip()
    if not text:
        return INTERVAL
    low, high = INTERVAL_RANGE
    fix = f"set {INTERVAL_VARIABLE} to a number of seconds from {low:g} to {high:g} (e.g. 10), or unset it for {INTERVAL:g}"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{INTERVAL_VARIABLE}={text!r} is not a number: {fix}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{INTERVAL_VARIABLE}={text} is outside [{low:g}, {high:g}] seconds: {fix}")
    return value


def start_progress(
    workflow: Any, results: str | os.PathLike, interval: float | None = None, stream: TextIO | None = None
) -> Progress:
    """Start the progress thread of a workflow run.

    Args:
        workflow: Snakemake's ``workflow`` object (its ``scheduler.running`` jobs are reported).
        results: the results folder (its ``logs/`` are the fallback).
        interval: seconds between reports; default :func:`progress_interval` (``CC_PROGRESS_SECONDS`` or
            :data:`INTERVAL`), at most 60.
        stream: where to print (default stderr).

    Returns:
        The running :class:`Progress` (call ``stop()`` at the end of the run).
    """
    if interval is None:
        interval = progress_interval()
    progress = Progress(
        lambda since: running_logs(workflow, results, since), min(max(interval, 0.1), INTERVAL), stream or sys.stderr
    )
    progress.thread.start()
    return progress
