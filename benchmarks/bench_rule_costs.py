"""Job-seconds per rule of a finished workflow run: the cost table of issue 51 (point 1).

Reads the run's Snakemake log (``.snakemake/log/*.snakemake.log`` of the checkout, the newest unless ``--log``): each
job's rule, its log and benchmark files, and the times it started and finished. A job's seconds are the wall seconds
of its benchmark file (column ``s``, for the rules that declare ``benchmark:``; every repeat summed), or else the log's
clock (finish minus start, whole seconds). Where a job's log holds the vision stages' line ``start-up X s`` (imports,
model and data index before the first batch: ``cli.vision_common.log_startup``), its seconds are split into start-up
and work. Paths in the log are relative to the folder snakemake ran in: the one that holds ``.snakemake/``.

    python benchmarks/bench_rule_costs.py                     # the newest run of this checkout (none: skipped)
    python benchmarks/bench_rule_costs.py --log RUN/.snakemake/log/2026-...snakemake.log   # another run
    python benchmarks/bench_rule_costs.py --log first.log --log resumed.log                # a run resumed once

Prints a Markdown table (rule, jobs, job-seconds, share of all, start-up, work, where the seconds come from) sorted by
job-seconds, the run's wall time and how many cores its jobs kept busy (job-seconds / wall). The last line is a
one-line summary.

Every refusal is one line on stderr, ``error: <file or option>: <what is wrong>; <fix>``, exit 2, and nothing is
written: a log given twice (by another path, a symlink or a hard link included: logs are told apart by file identity),
a ``--root`` that is not a folder or holds none of the files the log names, a log that is not a Snakemake log, a job
that finishes before it starts or a run whose clock goes backwards, a benchmark file whose seconds are not a finite
number >= 0.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]


class BenchError(ValueError):
    """A refusal: printed by :func:`main` as ``error: <file or option>: <what is wrong>; <fix>`` with exit 2."""

#: ``[Sat Nov 28 00:16:11 2026]``: the clock line snakemake writes before a job starts and before it finishes
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
#: ``localrule vision_evaluate:`` (local execution) or ``rule vision_evaluate:`` (cluster) or ``checkpoint ...:``
JOB_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
#: ``    log: results/logs/...log`` and the job's other fields, indented under its rule line
FIELD = re.compile(r"^\s+(\w+): (.*)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")
ELAPSED = re.compile(r"^Elapsed time: (\d+):(\d\d):(\d\d(?:\.\d+)?)$")
#: the vision stages' start-up line (cli/vision_common.log_startup): ``vision-evaluate: start-up 6.61s before ...``
STARTUP = re.compile(r"start-up ([0-9.]+)s\b")


@dataclass
class Job:
    """One job of a Snakemake log."""

    jobid: int
    rule: str
    started: datetime
    finished: datetime | None = None
    logs: list[str] = field(default_factory=list)
    benchmark: str | None = None


@dataclass
class RuleCost:
    """A rule's finished jobs: their seconds, and the start-up their logs report."""

    rule: str
    jobs: int = 0
    seconds: float = 0.0
    startup: float = 0.0
    startup_jobs: int = 0  # jobs whose log holds a start-up line
    startup_job_seconds: float = 0.0  # the seconds of those jobs (their work is this minus ``startup``)
    sources: set[str] = field(default_factory=set)  # "benchmark" and/or "log clock"


def parse_log(text: str) -> tuple[list[Job], float]:
    """The jobs of one Snakemake log, in the order they started, and the run's ``Elapsed time``.

    Args:
        text: a ``.snakemake/log/*.snakemake.log`` file's text (Snakemake 8-9).

    Returns:
        ``(jobs, wall)``: each job with its rule, jobid, start and finish clock (None while unfinished), log paths
        and benchmark path; ``wall``, the run's seconds: its ``Elapsed time`` line, or for a run that did not end
        (killed) its last clock line minus its first.

    Raises:
        ValueError: a job line without the clock line before it (not a Snakemake log), a job that finishes before it
            starts, or a clock line earlier than the one before (not one run's log, or its clock was set back).
    """
    jobs: list[Job] = []
    running: dict[int, Job] = {}
    stamp: datetime | None = None
    current: Job | None = None
    elapsed = None
    first = None
    for number, line in enumerate(text.splitlines(), 1):
        if found := STAMP.match(line):
            try:
                clock = datetime.strptime(found[1], "%a %b %d %H:%M:%S %Y")
            except ValueError:
                raise ValueError(f"line {number}: {line!r} is not a Snakemake clock line") from None
            if stamp is not None and clock < stamp:
                raise ValueError(f"line {number}: the clock goes back from {stamp} to {clock}: not one run's log, or "
                                 "its clock was set back")
            stamp, current = clock, None
            first = first or stamp
        elif found := JOB_START.match(line):
            if stamp is None:
                raise ValueError(f"line {number}: {line!r} without the [clock] line before it: not a Snakemake log")
            current = Job(jobid=-1, rule=found[1], started=stamp)
            jobs.append(current)
        elif current is not None and (found := FIELD.match(line)):
            name, value = found[1], found[2]
            if name == "jobid":
                current.jobid = int(value)
                running[current.jobid] = current
            elif name == "log":
                current.logs = [part.split(" (")[0] for part in value.split(", ")]  # "path (check ...)" in some versions
            elif name == "benchmark":
                current.benchmark = value
        elif found := FINISHED.match(line):
            job = running.pop(int(found[1]), None)
            if job is not None and stamp is not None:
                if stamp < job.started:
                    raise ValueError(f"line {number}: job {job.jobid} ({job.rule}) finishes at {stamp}, before it "
                                     f"started ({job.started}): not one run's log, or its clock was set back")
                job.finished = stamp
            current = None
        elif found := ELAPSED.match(line):
            elapsed = int(found[1]) * 3600 + int(found[2]) * 60 + float(found[3])
        elif not line.startswith((" ", "\t")):
            current = None
    if elapsed is None:
        elapsed = (stamp - first).total_seconds() if first is not None else 0.0
    return jobs, elapsed


def benchmark_seconds(path: Path) -> float | None:
    """Wall seconds in a Snakemake benchmark file (column ``s``; the sum of its rows when the rule repeats).

    Args:
        path: the ``.tsv`` file.

    Returns:
        The seconds, or None when the file is missing or holds no row.

    Raises:
        ValueError: the file has no ``s`` column (not a benchmark file), or a row whose seconds are not a finite
            number >= 0.
    """
    if not path.is_file():
        return None
    lines = [line.split("\t") for line in path.read_text(errors="replace").splitlines() if line.strip()]
    if not lines or "s" not in lines[0]:
        raise ValueError(f"{path}: no 's' column: not a Snakemake benchmark file")
    column = lines[0].index("s")
    total = 0.0
    for number, row in enumerate(lines[1:], 2):
        try:
            value = float(row[column])
        except (IndexError, ValueError):
            value = float("nan")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{path}: line {number}: column s: {row[column] if column < len(row) else 'missing'!r} "
                             "is not a finite number of seconds >= 0: not a Snakemake benchmark file")
        total += value
    return total if len(lines) > 1 else None


def startup_seconds(paths: Sequence[Path]) -> float | None:
    """The start-up a job's logs report (the ``start-up X s`` lines, summed), or None when none holds one."""
    found = [float(m[1]) for path in paths if path.is_file() for m in STARTUP.finditer(path.read_text(errors="replace"))]
    return sum(found) if found else None


def cost_table(jobs: Sequence[Job], root: Path) -> tuple[list[RuleCost], list[Job]]:
    """Job-seconds, jobs and start-up per rule.

    Args:
        jobs: the jobs of one or more logs (:func:`parse_log`).
        root: the folder the log's relative paths start from.

    Returns:
        ``(costs, unfinished)``: one :class:`RuleCost` per rule with a finished job, most job-seconds first (ties: by
        name); the jobs that never finished (not counted).
    """
    costs: dict[str, RuleCost] = {}
    unfinished = []
    for job in jobs:
        if job.finished is None:
            unfinished.append(job)
            continue
        cost = costs.setdefault(job.rule, RuleCost(job.rule))
        measured = benchmark_seconds(root / job.benchmark) if job.benchmark else None
        seconds = measured if measured is not None else (job.finished - job.started).total_seconds()
        cost.sources.add("benchmark" if measured is not None else "log clock")
        cost.jobs += 1
        cost.seconds += seconds
        startup = startup_seconds([root / log for log in job.logs])
        if startup is not None:
            cost.startup += startup
            cost.startup_jobs += 1
            cost.startup_job_seconds += seconds
    return sorted(costs.values(), key=lambda c: (-c.seconds, c.rule)), unfinished


def newest_log(root: Path) -> Path | None:
    """The newest ``.snakemake/log/*.snakemake.log`` under ``root`` that ran a job (snakemake names them by start time;
    a run that found nothing to do leaves a log without jobs), or None."""
    for log in sorted((root / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True):
        if any(JOB_START.match(line) for line in log.read_text(errors="replace").splitlines()):
            return log
    return None


def _share(part: float, total: float, digits: int = 1) -> str:
    """``part / total`` as a percentage; ``-`` when no job took a second (nothing to share)."""
    return f"{part / total:.{digits}%}" if total > 0 else "-"


def render(costs: Sequence[RuleCost], unfinished: Sequence[Job], wall: float | None) -> list[str]:
    """The report's lines: the Markdown table, the totals, and the summary line last. A run whose jobs took 0 s in
    all (the log's clock counts whole seconds) shows its shares as ``-``."""
    total = sum(c.seconds for c in costs)
    startup = sum(c.startup for c in costs)
    lines = ["| rule | jobs | job-seconds | share | start-up s | work s | seconds from |", "|---|---:|---:|---:|---:|---:|---|"]
    for c in costs:
        split = (f"{c.startup:.1f} ({c.startup_jobs} jobs)", f"{c.startup_job_seconds - c.startup:.1f}") if c.startup_jobs else ("", "")
        lines.append(f"| {c.rule} | {c.jobs} | {c.seconds:.1f} | {_share(c.seconds, total)} | {split[0]} | {split[1]} | "
                     f"{' + '.join(sorted(c.sources))} |")
    jobs = sum(c.jobs for c in costs)
    lines.append(f"total: {jobs} jobs of {len(costs)} rules, {total:.1f} job-seconds; start-up logged {startup:.1f} s "
                 f"({_share(startup, total)} of the job-seconds)")
    if wall:
        lines.append(f"wall: {wall:.1f} s; the jobs kept {total / wall:.2f} cores busy on average")
    if unfinished:
        names = sorted({job.rule for job in unfinished})
        lines.append(f"unfinished (not counted): {len(unfinished)} job{'s' * (len(unfinished) != 1)} of {', '.join(names)}")
    top = costs[0]
    lines.append(f"SUMMARY rule_costs: {jobs} jobs, {total:.1f} job-seconds" +
                 (f" in {wall:.1f} s wall ({total / wall:.2f} cores busy)" if wall else "") +
                 f"; most: {top.rule} {top.seconds:.1f} s ({_share(top.seconds, total, 0)}); start-up {startup:.1f} s "
                 f"({_share(startup, total, 0)})")
    return lines


def check_logs(logs: Sequence[Path]) -> list[Path]:
    """The ``--log`` files, each a readable file given once: told apart by file identity (device and inode), so the
    same log by another path, a symlink or a hard link is refused rather than counted twice.

    Raises:
        BenchError: naming the option, the file and the fix.
    """
    seen: dict[tuple[int, int], Path] = {}
    for log in logs:
        if not log.is_file():
            raise BenchError(f"--log {log}: no such Snakemake log; pass a run's .snakemake/log/*.snakemake.log")
        try:
            info = os.stat(log)
        except OSError as exc:
            raise BenchError(f"--log {log}: cannot be read ({exc.strerror}); pass a readable Snakemake log") from None
        key = (info.st_dev, info.st_ino)
        if key in seen:
            same = "given twice" if seen[key] == log else f"the same file as --log {seen[key]}"
            raise BenchError(f"--log {log}: {same} (resolved: {log.resolve()}): its jobs would be counted twice; "
                             "pass each log once (a resumed run: one --log per invocation)")
        seen[key] = log
    return list(logs)


def check_root(root: Path, jobs: Sequence[Job], option: str) -> None:
    """Refuse a root that is not a folder, or that holds none of the log and benchmark files the finished jobs name
    (every job would fall back to the log's clock with a start-up of 0 s: the wrong folder).

    Raises:
        BenchError: naming ``option`` (``--root`` or the log whose folder was taken) and the fix.
    """
    if not root.is_dir():
        raise BenchError(f"{option} {root}: not a folder; pass the folder snakemake ran in (the one holding "
                         ".snakemake/)")
    named = [name for job in jobs if job.finished is not None for name in (*job.logs, *filter(None, [job.benchmark]))]
    if named and not any((root / name).is_file() for name in named):
        raise BenchError(f"{option} {root}: holds none of the {len(named)} job log and benchmark files the log names "
                         f"(the first: {named[0]}); pass --root the folder snakemake ran in (the one holding "
                         ".snakemake/)")


def main(argv: Sequence[str] | None = None) -> int:
    """The cost table's command line: every refusal one ``error: ...`` line on stderr, exit 2 (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", action="append", type=Path, default=[],
                    help="a Snakemake log of the run (repeat for a resumed run); default: the newest of this checkout")
    ap.add_argument("--root", type=Path, default=None,
                    help="the folder snakemake ran in (default: the one holding the first log's .snakemake/)")
    args = ap.parse_args(argv)
    try:
        return report(args.log, args.root)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def report(logs: list[Path], root: Path | None) -> int:
    """Print the cost table of ``logs`` (the newest run of this checkout when empty) read under ``root``."""
    if not logs:
        newest = newest_log(ROOT)
        if newest is None:  # `make bench` in a checkout that has not run the workflow
            print(f"no Snakemake log of a run under {ROOT / '.snakemake' / 'log'}: run the workflow first (make reproduce), "
                  f"or pass --log PATH of a run's .snakemake/log/*.snakemake.log")
            print("SUMMARY rule_costs: skipped (no workflow run in this checkout)")
            return 0
        logs = [newest]
        try:  # `make bench`: a run whose files were deleted since is skipped, as a checkout without a run is
            check_root(newest.resolve().parents[2], parse_log(newest.read_text(errors="replace"))[0], "its run folder")
        except (BenchError, ValueError) as exc:
            print(f"the newest Snakemake log of this checkout, {newest}, cannot be costed ({exc}); pass --log and "
                  "--root of a run whose files are there")
            print("SUMMARY rule_costs: skipped (the newest workflow run's files are gone)")
            return 0
    logs = check_logs(logs)
    if root is not None and not root.is_dir():
        raise BenchError(f"--root {root}: not a folder; pass the folder snakemake ran in (the one holding .snakemake/)")
    jobs, wall = [], 0.0
    for log in logs:  # a resumed run: the wall of each invocation, summed
        try:
            found, seconds = parse_log(log.read_text(errors="replace"))
        except OSError as exc:
            raise BenchError(f"--log {log}: cannot be read ({exc.strerror}); pass a readable Snakemake log") from None
        except ValueError as exc:
            raise BenchError(f"--log {log}: {exc}; pass a run's .snakemake/log/*.snakemake.log") from None
        if not found:
            raise BenchError(f"--log {log}: no job in this log (a dry run, or a run that found nothing to do); pass a "
                             "run that ran jobs")
        jobs += found
        wall += seconds
    if root is None:
        where = logs[0].resolve()
        if where.parent.name != "log" or where.parent.parent.name != ".snakemake":
            raise BenchError(f"--log {logs[0]}: not in a .snakemake/log/ folder, so the folder snakemake ran in is "
                             "unknown; pass --root that folder")
        check_root(where.parents[2], jobs, f"--log {logs[0]}: its run folder")
        root = where.parents[2]
    else:
        check_root(root, jobs, "--root")
    try:
        costs, unfinished = cost_table(jobs, root)
    except ValueError as exc:  # a benchmark file that is not one (benchmark_seconds names it)
        raise BenchError(f"{exc}; pass --root the folder snakemake ran in, or delete the file") from None
    if not costs:
        raise BenchError(f"--log {', '.join(map(str, logs))}: no job finished: nothing to cost; pass a run whose jobs "
                         "finished")
    print(f"{len(logs)} Snakemake log(s): {', '.join(map(str, logs))}; files read under {root}")
    print("\n".join(render(costs, unfinished, wall)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
