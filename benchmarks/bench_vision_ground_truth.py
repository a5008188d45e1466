"""``vision-ground-truth`` on the default's compiled marked ResNet, before and after issue 51, in one run.

The default's model: the marked world at 16 px, 10 classes, 2 cue attributes x 4 values, 1,000 train and 50 concept
images a class (``vision-world``), compiled with seed 0 (``vision-compile``: 98 channels a stage). Both are built with
the stage commands into ``--work`` (a temporary folder unless given; reused when present). Then the stage runs in a
fresh process (imports included, one torch thread, the stage's default) twice on the same files: *before*, the
package of commit ``--before`` (``git archive REV src``, put first on ``PYTHONPATH``; the default is the commit
before issue 51's change: every check one masked forward per class, set and ablation, the single-vertex effects
through hooks), and *after*, this checkout's (every class's checks in one pass per eval set through
``evaluate.MaskedResNet``, the effects from one traced forward per class, ``MaskedResNet.ablations``).

Reported: each run's wall and CPU seconds (the child process's user + system time: a shared machine's wall clock
counts the other processes too), the load average around each run, and the two ground-truth files compared
field by field: every integer, boolean and string (``passed``, the components, the dropped channels, the counts)
must be equal; a float must agree within ``--rtol`` (1e-5) relative or, for quantities near zero that are
differences of float32 logits (a distractor's effect, an ablated circuit's mean margin), ``--atol`` (1e-6)
absolute; the floats outside both are listed. (The per-vertex effects are closer to a float64 forward after than
before: ``tests/unit/vision/test_planted.py`` checks them against one within 1e-5 relative.)

    python benchmarks/bench_vision_ground_truth.py [--work /tmp/gt] [--before aca6608]

The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the commit before issue 51's change to vision-ground-truth
BEFORE = "aca6608"
#: the issue's target for the stage on one thread
TARGET_SECONDS = 30.0
#: the default's world and compiled model (the commands of issue 51)
WORLD = ["--seed", "0", "--image-size", "16", "--n-classes", "10", "--cue-attributes", "2", "--cue-values", "4",
         "--n-train-per-class", "1000", "--n-concept-per-class", "50"]


def report_benchmark():
    """``benchmarks/bench_report_sufficiency.py``: its stage runner (a fresh process, wall and CPU seconds) and its
    ``git archive`` of another commit's package."""
    spec = importlib.util.spec_from_file_location("bench_report_sufficiency", ROOT / "benchmarks" /
                                                  "bench_report_sufficiency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stage(runner, arguments: list[str], source: Path | None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, load average before it) of one stage process; exits naming the stage on failure."""
    load = os.getloadavg()[0]
    try:
        wall, cpu = runner.run_stage(arguments, source)
    except SystemExit as failed:
        sys.exit(f"{arguments[0]} ({'this checkout' if source is None else source}) failed: {failed}")
    return wall, cpu, load


def flatten(doc, path: str = "") -> dict[str, object]:
    """Every leaf of a JSON document by its path (``a.b[2]``); a dict's key order is part of its ``keys`` leaf."""
    if isinstance(doc, dict):
        out = {f"{path}.keys": list(doc)}
        for key, value in doc.items():
            out.update(flatten(value, f"{path}.{key}"))
        return out
    if isinstance(doc, list):
        out = {f"{path}.len": len(doc)}
        for i, value in enumerate(doc):
            out.update(flatten(value, f"{path}[{i}]"))
        return out
    return {path: doc}


def compare(before: dict, after: dict, rtol: float, atol: float) -> dict:
    """Field-by-field comparison of two ground-truth documents.

    Returns:
        ``exact`` (fields compared for equality: integers, booleans, strings, key lists, lengths), ``unequal``
        (paths among them that differ or are missing), ``floats``, ``within_rtol`` (``|a - b| <= rtol max(|a|,
        |b|)``), ``within_atol`` (the others with ``|a - b| <= atol``), ``outside`` (``[(path, a, b, relative
        difference)]``, the rest), ``worst`` (the largest relative difference and its path).
    """
    a, b = flatten(before), flatten(after)
    out = {"exact": 0, "unequal": sorted(set(a) ^ set(b)), "floats": 0, "within_rtol": 0, "within_atol": 0,
           "outside": [], "worst": (0.0, "")}
    for path in sorted(set(a) & set(b)):
        x, y = a[path], b[path]
        if isinstance(x, float) and isinstance(y, float):
            out["floats"] += 1
            if x == y or (math.isnan(x) and math.isnan(y)):
                out["within_rtol"] += 1
                continue
            rel = abs(x - y) / max(abs(x), abs(y))
            out["worst"] = max(out["worst"], (rel, path))
            if rel <= rtol:
                out["within_rtol"] += 1
            elif abs(x - y) <= atol:
                out["within_atol"] += 1
            else:
                out["outside"].append((path, x, y, rel))
        else:
            out["exact"] += 1
            if x != y or type(x) is not type(y):
                out["unequal"].append(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="folder for the world, the model and the two ground truths (reused)")
    ap.add_argument("--before", default=BEFORE, metavar="REV", help=f"the commit timed as before (default {BEFORE})")
    ap.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance of the floats (default 1e-5)")
    ap.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance of the near-zero floats (1e-6)")
    args = ap.parse_args()
    runner = report_benchmark()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        world, model = work / "world", work / "model.pt"
        if not (world / "train.npz").is_file():
            stage(runner, ["vision-world", "--out", str(world), *WORLD], None)
        if not model.is_file():
            stage(runner, ["vision-compile", "--world", str(world), "--seed", "0", "--out-model", str(model),
                           "--out-metrics", str(work / "compile.json")], None)
        truth = ["vision-ground-truth", "--checkpoint", str(model), "--world", str(world), "--seed", "0",
                 "--threads", "1", "--out"]
        source = runner.archive_source(args.before, Path(tmp) / "before")
        before = stage(runner, [*truth, str(work / "gt_before.json")], source)
        after = stage(runner, [*truth, str(work / "gt_after.json")], None)
        result = compare(*(json.loads((work / f"gt_{w}.json").read_text()) for w in ("before", "after")),
                         args.rtol, args.atol)
    load = os.getloadavg()[0]
    print(f"vision-ground-truth, default compiled marked ResNet (10 classes, 98 channels a stage, 16 px), 1 thread, "
          f"{os.cpu_count()} CPUs")
    for name, (wall, cpu, start) in (("before (" + args.before + ")", before), ("after (this checkout)", after)):
        print(f"  {name:24s} {wall:6.1f} s wall, {cpu:6.1f} s CPU (load average {start:.1f} at its start)")
    print(f"  ratio: {before[0] / after[0]:.1f}x wall, {before[1] / after[1]:.1f}x CPU; load average now {load:.1f}")
    print(f"  JSON: {result['exact']} exact fields, {len(result['unequal'])} unequal {result['unequal'][:5]}; "
          f"{result['floats']} floats: {result['within_rtol']} within {args.rtol:g} relative, "
          f"{result['within_atol']} more within {args.atol:g} absolute, {len(result['outside'])} outside; worst "
          f"relative difference {result['worst'][0]:.2e} ({result['worst'][1]})")
    for path, x, y, rel in result["outside"]:
        print(f"    outside: {path}: {x!r} -> {y!r} ({rel:.2e} relative)")
    cpu_after = after[1]
    verdict = "meets" if cpu_after <= TARGET_SECONDS else "misses"
    print(f"SUMMARY vision-ground-truth: {after[0]:.1f} s wall / {cpu_after:.1f} s CPU after, {before[0]:.1f} s / "
          f"{before[1]:.1f} s before ({before[1] / cpu_after:.1f}x CPU); {verdict} the <= {TARGET_SECONDS:.0f} s "
          f"target (CPU); JSON {len(result['unequal'])} unequal exact fields, {len(result['outside'])} floats outside "
          f"{args.rtol:g} rel / {args.atol:g} abs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
