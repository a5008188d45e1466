"""The cost table's reader (benchmarks/bench_rule_costs.py) on a real Snakemake 9 log.

tests/unit/data/rule_costs holds what a miniature of the default's workflow (make_fixture.smk: the project's rule names,
log and benchmark paths, the vision stages' start-up line) left behind: its Snakemake log, job logs and benchmark
files. Every expected number below is read off those files by hand.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script
from tests.helpers.paths import UNIT_DATA

FIXTURE = UNIT_DATA / "rule_costs"
LOG = FIXTURE / "snakemake.log"


def load_bench():
    return load_script("benchmarks/bench_rule_costs.py")


bench = load_bench()


def test_parse_log_reads_every_job_its_clock_log_and_benchmark() -> None:
    jobs, elapsed = bench.parse_log(LOG.read_text())
    assert [(j.jobid, j.rule) for j in jobs] == [(4, "vision_train"), (6, "vision_attribute"), (3, "vision_attribute"),
                                                 (5, "vision_evaluate"), (2, "vision_evaluate"), (1, "vision_tables"),
                                                 (0, "all")]
    assert elapsed == pytest.approx(8.480467, abs=1e-9)  # "Elapsed time: 0:00:08.480467"
    tables = jobs[5]
    assert tables.started == datetime(2026, 11, 28, 0, 17, 19) and tables.finished == datetime(2026, 11, 28, 0, 17, 23)
    assert tables.logs == ["run/logs/vision_tables/job.log"] and tables.benchmark is None
    evaluate = jobs[3]  # square: started 00:17:17, finished 00:17:19
    assert evaluate.benchmark == ("run/benchmarks/vision_evaluate/concept/square/p0.6_n0100_n1000_s0/"
                                  "t0.95_a0.001_bonferroni.tsv")
    assert (evaluate.finished - evaluate.started).total_seconds() == 2
    assert jobs[6].logs == [] and jobs[6].benchmark is None  # the target rule has neither


def test_cost_table_takes_benchmark_seconds_and_splits_start_up() -> None:
    jobs, _ = bench.parse_log(LOG.read_text())
    costs, unfinished = bench.cost_table(jobs, FIXTURE)
    assert unfinished == []
    by_rule = {c.rule: c for c in costs}
    assert [c.rule for c in costs] == ["vision_evaluate", "vision_tables", "vision_attribute", "vision_train", "all"]
    evaluate = by_rule["vision_evaluate"]  # benchmark s: 2.20 (square) + 2.21 (circle); start-up 1.04 + 0.93
    assert (evaluate.jobs, evaluate.startup_jobs, evaluate.sources) == (2, 2, {"benchmark"})
    assert evaluate.seconds == pytest.approx(4.41, abs=1e-12) and evaluate.startup == pytest.approx(1.97, abs=1e-12)
    attribute = by_rule["vision_attribute"]  # 0.81 + 0.84; start-up 0.61 + 0.52
    assert attribute.seconds == pytest.approx(1.65, abs=1e-12) and attribute.startup == pytest.approx(1.13, abs=1e-12)
    tables = by_rule["vision_tables"]  # no benchmark file: the log's clock, 00:17:19 -> 00:17:23
    assert (tables.jobs, tables.seconds, tables.startup_jobs, tables.sources) == (1, 4.0, 0, {"log clock"})
    assert by_rule["vision_train"].seconds == pytest.approx(1.51, abs=1e-12) and by_rule["all"].seconds == 0.0


def test_report_prints_the_table_totals_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--log", str(LOG), "--root", str(FIXTURE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| vision_evaluate | 2 | 4.4 | 38.1% | 2.0 (2 jobs) | 2.4 | benchmark |" in lines  # 4.41 / 11.57 = 38.1%
    assert "| vision_tables | 1 | 4.0 | 34.6% |  |  | log clock |" in lines
    assert "total: 7 jobs of 5 rules, 11.6 job-seconds; start-up logged 3.1 s (26.8% of the job-seconds)" in lines
    assert "wall: 8.5 s; the jobs kept 1.36 cores busy on average" in lines  # 11.57 / 8.480467
    assert lines[-1] == ("SUMMARY rule_costs: 7 jobs, 11.6 job-seconds in 8.5 s wall (1.36 cores busy); "
                         "most: vision_evaluate 4.4 s (38%); start-up 3.1 s (27%)")


def test_a_killed_run_counts_only_finished_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The log of a run killed while vision_tables ran (the real log up to that job's start): its job is named as
    unfinished, not costed, and the wall is the log's clock (no Elapsed line): 00:17:15, its first clock line, to
    00:17:23, its last."""
    text = LOG.read_text()
    cut = tmp_path / ".snakemake" / "log" / "2026-11-28T001714.585805.snakemake.log"
    cut.parent.mkdir(parents=True)
    cut.write_text(text[: text.index("Finished jobid: 1 (Rule: vision_tables)")])
    shutil.copytree(FIXTURE / "run", tmp_path / "run")
    jobs, elapsed = bench.parse_log(cut.read_text())
    costs, unfinished = bench.cost_table(jobs, tmp_path)
    assert elapsed == 8.0 and [j.rule for j in unfinished] == ["vision_tables"]
    assert "vision_tables" not in {c.rule for c in costs}
    assert bench.main(["--log", str(cut)]) == 0  # the root is the folder holding .snakemake/
    out = capsys.readouterr().out
    assert "unfinished (not counted): 1 job of vision_tables" in out
    assert "wall: 8.0 s" in out


def test_make_bench_without_a_run_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench, "ROOT", tmp_path)  # a checkout that never ran the workflow
    assert bench.main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "SUMMARY rule_costs: skipped (no workflow run in this checkout)"
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    shutil.copy(LOG, tmp_path / ".snakemake" / "log" / "2026-11-28T001714.585805.snakemake.log")  # its files gone
    assert bench.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "holds none of the 11 job log and benchmark files" in out[0]
    assert out[-1] == "SUMMARY rule_costs: skipped (the newest workflow run's files are gone)"


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *message: str) -> str:
    """``main(argv)`` refuses: exit 2, one ``error:`` line on stderr holding every ``message``, no traceback, nothing
    on stdout."""
    assert bench.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(m in err for m in message), err
    assert out == ""
    return err


def _run(tmp_path: Path, text: str) -> Path:
    """A run folder in ``tmp_path``: the fixture's job files and ``text`` as its Snakemake log."""
    log = tmp_path / ".snakemake" / "log" / "2026-11-28T001714.585805.snakemake.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)
    if not (tmp_path / "run").exists():
        shutil.copytree(FIXTURE / "run", tmp_path / "run")
    return log


def test_bad_inputs_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["--log", str(tmp_path / "missing.log")], "missing.log: no such Snakemake log")
    empty = tmp_path / "dry.log"
    empty.write_text("Building DAG of jobs...\nNothing to be done (all requested files are present and up to date).\n")
    _refused(capsys, ["--log", str(empty)], f"--log {empty}: no job in this log")
    assert bench.newest_log(tmp_path) is None  # no .snakemake/log here: `make bench` skips the table
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    shutil.copy(empty, tmp_path / ".snakemake" / "log" / "2026-11-28T010000.000000.snakemake.log")
    shutil.copy(LOG, tmp_path / ".snakemake" / "log" / "2026-11-28T001714.585805.snakemake.log")
    assert bench.newest_log(tmp_path).name.startswith("2026-11-28T0017")  # the newest log that ran a job
    (tmp_path / "b.tsv").write_text("seconds\n1.0\n")
    with pytest.raises(ValueError, match="not a Snakemake benchmark file"):
        bench.benchmark_seconds(tmp_path / "b.tsv")


def _same_file_twice(tmp_path: Path) -> list[list[str]]:
    """Issue 61, class 2: one log passed twice, by the same path, another spelling, a symlink and a hard link."""
    log = _run(tmp_path, LOG.read_text())
    (tmp_path / "link.log").symlink_to(log)
    (tmp_path / "hard.log").hardlink_to(log)
    spelled = tmp_path / ".snakemake" / "log" / ".." / "log" / log.name
    return [[str(log), str(log)], [str(log), str(spelled)], [str(log), str(tmp_path / "link.log")],
            [str(log), str(tmp_path / "hard.log")]]


@pytest.mark.parametrize("case", range(4))
def test_one_log_given_twice_is_refused_by_file_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         case: int) -> None:
    first, second = _same_file_twice(tmp_path)[case]
    err = _refused(capsys, ["--log", first, "--log", second, "--root", str(tmp_path)], f"--log {second}: ",
                   "its jobs would be counted twice; pass each log once")
    assert ("given twice" if first == second else f"the same file as --log {first}") in err


def _shift(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


#: issue 61, class 5: logs that are not one run's, each refused by the log's name with the fix
BAD_LOGS = {
    # the vision_tables job (started 00:17:19) finishes at 00:17:18, before it starts (-0.17 cores busy before)
    "finishes before it starts": (lambda t: _shift(t, "[Sat Nov 28 00:17:23 2026]\nFinished jobid: 1",
                                                   "[Sat Nov 28 00:17:18 2026]\nFinished jobid: 1"),
                                  "the clock goes back from 2026-11-28 00:17:19 to 2026-11-28 00:17:18"),
    "clock goes backwards": (lambda t: _shift(t, "[Sat Nov 28 00:17:16 2026]\nFinished jobid: 4",
                                              "[Sat Nov 28 00:16:00 2026]\nFinished jobid: 4"),
                             "the clock goes back from 2026-11-28 00:17:15 to 2026-11-28 00:16:00"),
    "not a clock": (lambda t: _shift(t, "[Sat Nov 28 00:17:15 2026]", "[Sat Nov 99 00:17:15 2026]"),
                    "is not a Snakemake clock line"),
    "a job line without a clock": (lambda t: "localrule all:\n    jobid: 0\n", "not a Snakemake log"),
}


@pytest.mark.parametrize("name", BAD_LOGS)
def test_a_log_that_is_not_one_runs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    change, message = BAD_LOGS[name]
    log = _run(tmp_path, change(LOG.read_text()))
    _refused(capsys, ["--log", str(log)], f"error: --log {log}: line ", message)


@pytest.mark.parametrize("value", ["abc", "-1.5", "inf", "nan", ""])
def test_a_benchmark_file_whose_seconds_are_not_seconds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    value: str) -> None:
    log = _run(tmp_path, LOG.read_text())
    tsv = tmp_path / "run" / "benchmarks" / "vision_train" / "job.tsv"
    tsv.write_text(f"s\th:m:s\n{value}\t0:00:01\n")
    _refused(capsys, ["--log", str(log)], f"error: {tsv}: line 2: column s: ", "is not a finite number of seconds >= 0")


def test_a_root_that_is_not_the_runs_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _run(tmp_path, LOG.read_text())
    _refused(capsys, ["--log", str(log), "--root", str(tmp_path / "nowhere")],
             f"--root {tmp_path / 'nowhere'}: not a folder; pass the folder snakemake ran in")
    (tmp_path / "empty").mkdir()  # a folder, but none of the run's files: every start-up would read 0.0 s
    _refused(capsys, ["--log", str(log), "--root", str(tmp_path / "empty")],
             f"--root {tmp_path / 'empty'}: holds none of the 11 job log and benchmark files the log names")
    copied = tmp_path / "copied.log"  # a log outside .snakemake/log/: its run folder is unknown
    copied.write_text(LOG.read_text())
    _refused(capsys, ["--log", str(copied)], f"--log {copied}: not in a .snakemake/log/ folder", "pass --root")


def test_a_run_whose_jobs_took_0_s_is_costed_without_dividing_by_zero(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The target rule's job alone, started and finished in the same second: 0 job-seconds, shares shown as ``-``."""
    text = ("[Sat Nov 28 00:17:23 2026]\nlocalrule all:\n    jobid: 0\n    reason: Input files updated\n"
            "[Sat Nov 28 00:17:23 2026]\nFinished jobid: 0 (Rule: all)\n")
    log = _run(tmp_path, text)
    assert bench.main(["--log", str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "| all | 1 | 0.0 | - |  |  | log clock |" in out
    assert out[-1] == "SUMMARY rule_costs: 1 jobs, 0.0 job-seconds; most: all 0.0 s (-); start-up 0.0 s (-)"
