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


def test_bad_inputs_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no such Snakemake log"):
        bench.main(["--log", str(tmp_path / "missing.log")])
    empty = tmp_path / "dry.log"
    empty.write_text("Building DAG of jobs...\nNothing to be done (all requested files are present and up to date).\n")
    with pytest.raises(SystemExit, match="no job in this log"):
        bench.main(["--log", str(empty)])
    assert bench.newest_log(tmp_path) is None  # no .snakemake/log here: `make bench` skips the table
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    shutil.copy(empty, tmp_path / ".snakemake" / "log" / "2026-11-28T010000.000000.snakemake.log")
    shutil.copy(LOG, tmp_path / ".snakemake" / "log" / "2026-11-28T001714.585805.snakemake.log")
    assert bench.newest_log(tmp_path).name.startswith("2026-11-28T0017")  # the newest log that ran a job
    (tmp_path / "b.tsv").write_text("seconds\n1.0\n")
    with pytest.raises(ValueError, match="not a Snakemake benchmark file"):
        bench.benchmark_seconds(tmp_path / "b.tsv")
