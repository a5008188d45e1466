"""Progress where the user looks (pipeline/tracking/progress.py, issue 35): each running job's latest log line."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace

from certified_circuits.pipeline.tracking.progress import INTERVAL, Progress, latest_line, running_logs, start_progress


def test_the_latest_line_is_a_progress_bars_current_state(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("starting\nvision-train:  10%|#  | 47/470\rvision-train:  20%|## | 94/470\r\n\n")
    assert latest_line(log) == "vision-train:  20%|## | 94/470"
    assert latest_line(tmp_path / "missing.log") == "" and latest_line(_empty(tmp_path)) == ""
    log.write_text("2026-11-26 01:37:23,243 certified_circuits.cli.vision_data INFO vision-train: accuracy 0.9\n")
    assert latest_line(log) == "vision-train: accuracy 0.9"  # the line says when; the logger is noise
    log.write_text("2026-11-26 01:37:23,243 certified_circuits WARNING plan marginal\n")
    assert latest_line(log) == "2026-11-26 01:37:23,243 certified_circuits WARNING plan marginal"  # kept: a warning


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.log"
    path.write_text("")
    return path


def test_running_jobs_come_from_the_scheduler_with_their_wildcards(tmp_path: Path) -> None:
    log = tmp_path / "votes.log"
    job = SimpleNamespace(rule=SimpleNamespace(name="votes"), wildcards_dict={"concept": "circle"}, log=[str(log)])
    workflow = SimpleNamespace(scheduler=SimpleNamespace(running=[job]))
    assert running_logs(workflow, tmp_path, 0.0) == [("votes (concept=circle)", log)]
    # no scheduler (another Snakemake): the logs under results/logs written since the last report
    old, new = tmp_path / "logs" / "a" / "job.log", tmp_path / "logs" / "b" / "job.log"
    for path in (old, new):
        path.parent.mkdir(parents=True)
        path.write_text("x\n")
    cut = time.time()
    import os

    os.utime(old, (cut - 100, cut - 100))
    assert running_logs(SimpleNamespace(), tmp_path, cut - 10) == [("b", new)]


def test_every_running_job_gets_a_line_each_interval(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("epoch 1/3\r")
    stream = io.StringIO()
    job = SimpleNamespace(rule=SimpleNamespace(name="vision_train"), wildcards_dict={}, log=[str(log)])
    progress = start_progress(SimpleNamespace(scheduler=SimpleNamespace(running=[job])), tmp_path, interval=0.2,
                              stream=stream)
    time.sleep(0.5)
    log.write_text("epoch 1/3\repoch 2/3 loss=0.4\r")
    time.sleep(0.4)
    progress.stop()
    progress.thread.join(timeout=2)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and all(" vision_train, 0 min: epoch " in line for line in lines)
    assert lines[0].endswith("epoch 1/3") and lines[-1].endswith("epoch 2/3 loss=0.4")
    assert not progress.thread.is_alive()
    assert INTERVAL <= 60  # at least one line a minute
    silent = Progress(lambda since: [("idle", tmp_path / "none.log")], 1.0, io.StringIO())
    assert silent.report(0.0) == []  # a job without a log line prints nothing
