"""``report-sufficiency`` on the embedded default's tables: 3,720 rows in <= 5 s (issue 51, point 3).

The default's ``vision_tables`` job (and ``vision_tables_mean``, the same on the mean-ablation rows) runs
``certified-circuits report-sufficiency --by scorer --select-on id_test`` on 10 per-class sufficiency CSVs: 10 classes
x 2 scorers x 6 eval sets x (3 methods x 10 K + the full model) = 3,720 rows of one ablation. This benchmark writes
CSVs of exactly that shape, seeded (``tests/helpers/sufficiency_tables.py``: every metric computed from its row's
per-example outcomes), runs the stage as the rule does (a fresh process: imports included), best of ``--repeats``,
and splits one in-process run into its parts (reading, peak and selected tables with their paired tests,
faithfulness, figures). With ``--before REV`` it also runs the stage of commit REV (``git archive REV src``, put first
on ``PYTHONPATH``) on the same files, once, and prints the ratio.

    python benchmarks/bench_report_sufficiency.py                    # the stage now, and its parts
    python benchmarks/bench_report_sufficiency.py --before dbd3f82   # and the stage before issue 51 (about a minute)

The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 5.0
STAGE = "from certified_circuits.cli.main import main; raise SystemExit(main())"


def load_tables_helper():
    spec = importlib.util.spec_from_file_location("sufficiency_tables", ROOT / "tests" / "helpers" / "sufficiency_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stage_arguments(inputs: list[Path], out: Path, ablation: str) -> list[str]:
    """The rule's command (rules/reports.smk, ``vision_tables``) with the default config's values."""
    return ["report-sufficiency", "--inputs", *map(str, inputs), "--by", "scorer", "--ablation", ablation, "--test",
            "wilcoxon", "--bootstrap-seed", "0", "--select-on", "id_test", "--title", "world", "--out-dir", str(out)]


def run_stage(arguments: list[str], source: Path | None) -> tuple[float, float]:
    """One stage process: (wall seconds, CPU seconds of the process, all threads). ``source``: a ``src`` folder put
    first on ``PYTHONPATH`` (another commit's package), or None for the installed one."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", STAGE, *arguments], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"report-sufficiency failed ({'the installed package' if source is None else source}):\n"
                 f"{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def parts(inputs: list[Path], out: Path, ablation: str) -> dict[str, float]:
    """CPU seconds of each part of one in-process ``sufficiency_report`` (its module-level calls, timed in place:
    CPU time, since a shared machine's wall clock counts the other processes too)."""
    start = time.process_time()
    from certified_circuits.analysis import evaluation
    from certified_circuits.reports import paper

    spent = {"report imports": time.process_time() - start}

    def timed(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args, **kwargs):
            begin = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - begin

        setattr(owner, name, wrapper)

    for owner, name, label in ((evaluation, "read_sufficiency", "read"), (evaluation, "peak_table", "peak tables"),
                               (evaluation, "selected_table", "selected tables"),
                               (paper, "_faithfulness_tables", "faithfulness"),
                               (paper.figures, "plot_cacc_figures", "figures")):
        timed(owner, name, label)
    begin = time.process_time()
    paper.sufficiency_report(inputs, ["scorer"], "wilcoxon", False, "world", out, select_on="id_test",
                             bootstrap_seed=0, ablation=ablation)
    total = time.process_time() - begin
    spent["other (curves, writing)"] = total - sum(v for k, v in spent.items() if k != "report imports")
    return spent


def archive_source(revision: str, folder: Path) -> Path:
    """``src`` of ``revision`` (``git archive``) extracted under ``folder``."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as archive:
        archive.extractall(folder, filter="data")
    return folder / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", metavar="REV", help="also time the stage of this commit (e.g. dbd3f82, before issue 51)")
    ap.add_argument("--ablation", choices=("zero", "mean"), default="zero", help="the rows of the tables (both jobs: same shape)")
    ap.add_argument("--repeats", type=int, default=3, help="stage runs of the current code (best is reported)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated tables")
    args = ap.parse_args()
    helper = load_tables_helper()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = helper.write_default_tables(root / "sufficiency", seed=args.seed)
        runs = [run_stage(stage_arguments(inputs, root / f"now{i}", args.ablation), None) for i in range(args.repeats)]
        wall, cpu = min(runs)
        split = parts(inputs, root / "parts", args.ablation)
        before = None
        if args.before:
            source = archive_source(args.before, root / "before")
            before = run_stage(stage_arguments(inputs, root / "before_out", args.ablation), source)
    n_rows = len(helper.CONCEPTS) * len(helper.SCORERS) * len(helper.EVAL_SETS) * (len(helper.METHODS) * len(helper.K_GRID) + 1)
    load = os.getloadavg()[0]
    print(f"{n_rows:,} rows ({args.ablation} ablation) in {len(inputs)} CSVs; load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"stage now: {wall:.2f} s wall (best of {args.repeats}; CPU {cpu:.2f} s), target <= {TARGET_SECONDS:.0f} s "
          f"(ratio to target {wall / TARGET_SECONDS:.2f})")
    print("CPU seconds of one in-process run: " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    summary = f"SUMMARY report_sufficiency: {n_rows:,} rows in {wall:.2f} s"
    if before:
        print(f"stage at {args.before}: {before[0]:.2f} s wall (CPU {before[1]:.2f} s): {before[0] / wall:.1f}x the time now")
        summary += f" (at {args.before}: {before[0]:.1f} s, {before[0] / wall:.1f}x)"
    print(f"{summary}, {'meets' if wall <= TARGET_SECONDS else 'misses'} the <= {TARGET_SECONDS:.0f} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
