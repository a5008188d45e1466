"""The vision mechanism of issue 50, measured on the BASELINE only: the compiled marked ResNet
(:mod:`certified_circuits.vision.networks.compiled`) on a marked world, per model seed: its truth verified channel by
channel (true, null, grey) and the baseline's conditions (a)-(c) per class
(:func:`certified_circuits.analysis.baseline_conditions.baseline_conditions`). No certified number is computed.

Per model seed ``s`` (``experiments/vision_mechanism.yaml``), through the project's stages:

1. ``vision-world --seed s --cue-attributes A ...``: the marked world (train: the population and the fills; concept:
   D_c; id_test: the truth's checks);
2. ``vision-compile --seed s``: the hand-set model;
3. ``vision-ground-truth``: every channel's own effect and the whole-circuit checks on the truth as written;
4. ``vision-attribute`` (one ``batch`` process): every class's D_c and population scores;
5. per class and scorer: :func:`baseline_conditions` at the truth's size over ``resamples`` bootstrap resamples.

Usage::

    PYTHONPATH=src .venv/bin/python experiments/vision_mechanism.py experiments/vision_mechanism.yaml \\
        --work results/vision_mechanism

Writes under ``--work``: ``conditions.csv`` (one row per seed, class and scorer), ``effects.csv`` (one row per seed
and class: the true, null and grey channels' effects), ``vision_mechanism.md`` (the tables) and per seed its world,
model, ground truth and attributions under ``s<seed>/`` (reused when present, so an interrupted run resumes).
Progress and each seed's wall time go to stderr.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.baseline_conditions import MIN_RESAMPLES, baseline_conditions
from certified_circuits.analysis.recovery import read_ground_truth, truth_mask
from certified_circuits.storage.atomic import write_text
from certified_circuits.storage.store import read_attributions

ROOT = Path(__file__).resolve().parents[1]
CLI = str(ROOT / "bin" / "certified-circuits")
KEYS = ("model_seeds", "world", "compile", "reference_size", "scorers", "resamples", "bootstrap_seed")


def load_config(path: Path) -> dict[str, Any]:
    """The experiment's config, checked before any work.

    Raises:
        ValueError: a missing or unknown key, fewer than 8 model seeds or 50 resamples, a seed given twice, a
            scorer that is not relevance/activation with a signed/absolute ranking, or a world without cues.
    """
    config = yaml.safe_load(Path(path).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a mapping with {list(KEYS)}")
    missing, unknown = [k for k in KEYS if k not in config], [k for k in config if k not in KEYS]
    if missing or unknown:
        raise ValueError(f"{path}: missing {missing}, unknown {unknown}; see experiments/vision_mechanism.yaml")
    seeds = [int(s) for s in config["model_seeds"]]
    if len(seeds) < 8 or len(set(seeds)) != len(seeds):
        raise ValueError(f"{path}: model_seeds must be >= 8 distinct seeds (the unit of the tests), got {seeds}")
    if int(config["resamples"]) < MIN_RESAMPLES:
        raise ValueError(f"{path}: resamples {config['resamples']} is below the conditions' {MIN_RESAMPLES}")
    for s in config["scorers"]:
        if s.get("scorer") not in ("relevance", "activation") or s.get("ranking") not in ("signed", "absolute"):
            raise ValueError(f"{path}: scorer {s} needs scorer relevance|activation and ranking signed|absolute")
    if int(config["world"].get("cue_attributes", 0)) < 1:
        raise ValueError(f"{path}: world.cue_attributes must be >= 1 (the compiled model reads the cue marks)")
    return config


def cli(*args: Any, log: Path) -> None:
    """Run ``certified-circuits ARGS``; its stderr goes to ``log`` (named in the error when it fails)."""
    with open(log, "a") as err:
        done = subprocess.run([CLI, *map(str, args)], stderr=err, stdout=err)
    if done.returncode:
        raise RuntimeError(f"certified-circuits {args[0]} failed (exit {done.returncode}); see {log}")


def options(section: dict[str, Any]) -> list[str]:
    """``{key: value}`` as command-line options ``--key value`` (lists spread, underscores as dashes)."""
    out: list[str] = []
    for key, value in section.items():
        out.append(f"--{key.replace('_', '-')}")
        out += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return out


def run_seed(config: dict[str, Any], seed: int, work: Path) -> tuple[list[dict], list[dict], float]:
    """Stages 1-5 of the module docstring for one model seed; files are reused when present.

    Returns:
        ``(condition rows, effect rows, wall seconds)``.
    """
    start = time.perf_counter()
    folder = work / f"s{seed}"
    world, model, gt = folder / "world", folder / "model.pt", folder / "ground_truth.json"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "stages.log"
    if not (world / "world.json").is_file():
        cli("vision-world", "--out", world, "--seed", seed, *options(config["world"]), "--splits", "train", "concept",
            "id_test", log=log)
    if not model.is_file():
        cli("vision-compile", "--world", world, "--seed", seed, "--out-model", model, "--out-metrics",
            folder / "compile.json", *options(config["compile"]), log=log)
    if not gt.is_file():
        cli("vision-ground-truth", "--checkpoint", model, "--world", world, "--out", gt, "--reference-size",
            config["reference_size"], "--seed", seed, log=log)
    truth = read_ground_truth(gt)
    files = {(c, part): folder / f"{part}_{c}.h5" for c in truth.concepts for part in ("dc", "population")}
    batch: list[str] = []
    for (concept, part), out in files.items():
        if not out.is_file():
            split = "concept" if part == "dc" else "train"
            batch += [*([] if not batch else ["::"]), "vision-attribute", "--model", "world", "--checkpoint",
                      str(model), "--threads", "1", "--data", str(world / f"{split}.npz"), "--concept", concept,
                      "--split", split, "--experiment", "vision_mechanism", "--batch-size", "250", "--out", str(out)]
    if batch:
        cli("batch", *batch, log=log)
    rows, effects = [], []
    for concept in truth.concepts:
        dc, pop = read_attributions(files[(concept, "dc")]), read_attributions(files[(concept, "population")])
        mask = truth_mask(truth, concept, dc.names, str(files[(concept, "dc")]))
        grey = np.isin(dc.names, truth.grey(concept))
        effects.append(effect_row(seed, concept, truth.verification[concept], mask, grey, dc.names))
        for s in config["scorers"]:
            bc = baseline_conditions(dc.scores[s["scorer"]], dc.groups, mask, pop.scores[s["scorer"]],
                                     absolute=s["ranking"] == "absolute", n_resamples=int(config["resamples"]),
                                     seed=int(config["bootstrap_seed"]), exclude=grey)
            rows.append({"seed": seed, "concept": concept, "scorer": s["name"], "n_dc": len(dc.scores[s["scorer"]]),
                         "n_population": len(pop.scores[s["scorer"]]), **bc.row()})
    return rows, effects, time.perf_counter() - start


def effect_row(seed: int, concept: str, verification: dict, truth: np.ndarray, grey: np.ndarray,
               names: np.ndarray) -> dict[str, Any]:
    """One class's per-channel effects (the ground truth's ``per_component`` block): the true, null (non-truth,
    non-grey) and grey channels' min / median / max, epsilon, delta and the weakest true over epsilon."""
    block = verification["per_component"]
    values = np.array([block["effects"][n] for n in names])
    null = ~truth & ~grey
    row = {"seed": seed, "concept": concept, "passed": bool(verification["passed"]), "n_true": int(truth.sum()),
           "n_grey": int(grey.sum()), "n_null": int(null.sum()), "epsilon": block["epsilon"], "delta": block["delta"],
           "ratio": values[truth].min() / block["epsilon"] if block["epsilon"] > 0 else np.inf}
    for side, sel in (("true", truth), ("null", null)):
        row.update({f"{side}_min": values[sel].min(), f"{side}_median": float(np.median(values[sel])),
                    f"{side}_max": values[sel].max()})
    checks = {k: v for k, v in verification.items() if k.startswith("id_test.mean_absent.")}
    row.update({"full_accuracy": verification["id_test.full.accuracy"],
                "keep_accuracy": checks["id_test.mean_absent.keep.accuracy"],
                "keep_balanced_accuracy": checks["id_test.mean_absent.keep.balanced_accuracy"],
                "ablated_accuracy": checks["id_test.mean_absent.ablated.accuracy"]})
    return row


def markdown(conditions: pd.DataFrame, effects: pd.DataFrame, walls: dict[int, float], headline: str) -> str:
    """The tables: per seed, the truth's effects and the headline scorer's conditions (all classes); the other
    scorers' conditions per seed beside; then every class of the headline scorer."""
    lines = ["## The truths (id_test, per seed over its classes)", "",
             "| seed | classes passed | true / grey / null per class | true effects min / median / max | null effects "
             "median / max | weakest true / epsilon (min over classes) | keep acc / bal. acc (min) | ablated acc (max) "
             "| wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for seed, e in effects.groupby("seed"):
        lines.append(f"| {seed} | {int(e.passed.sum())} / {len(e)} | {e.n_true.iloc[0]} / {e.n_grey.max()} / "
                     f"{e.n_null.iloc[0]} | {e.true_min.min():.4f} / {e.true_median.median():.4f} / "
                     f"{e.true_max.max():.4f} | {e.null_median.median():.5f} / {e.null_max.max():.5f} | "
                     f"{e.ratio.min():.1f} | {e.keep_accuracy.min():.3f} / {e.keep_balanced_accuracy.min():.3f} | "
                     f"{e.ablated_accuracy.max():.3f} | {walls.get(seed, float('nan')):.0f} |")
    for scorer, frame in conditions.groupby("scorer", sort=False):
        lines += ["", f"## Conditions, {scorer} (|D_c| 50, {int(frame.resamples.iloc[0])} bootstrap resamples): per "
                      "seed over its classes", "",
                  "| seed | precision population | precision resampled: mean (min gap over classes) | (a) classes | "
                  "(b) classes (true channels in 20-80%: min) | mean Jaccard (max over classes) | (c) classes |",
                  "|---|---|---|---|---|---|---|"]
        for seed, f in frame.groupby("seed"):
            lines.append(f"| {seed} | {f.precision_population.mean():.3f} | {f.precision_resampled.mean():.3f} "
                         f"({f.precision_gap.min():.3f}) | {int(f.a.sum())} / {len(f)} | {int(f.b.sum())} / {len(f)} "
                         f"({int(f.in_band.min())}) | {f.jaccard.mean():.3f} ({f.jaccard.max():.3f}) | "
                         f"{int(f.c.sum())} / {len(f)} |")
    head = conditions[conditions.scorer == headline]
    lines += ["", f"## Every class, {headline}", "",
              "| seed | class | precision population / D_c / resampled | gap | true channels in 20-80% | mean Jaccard | "
              "a / b / c |", "|---|---|---|---|---|---|---|"]
    for r in head.itertuples():
        lines.append(f"| {r.seed} | {r.concept} | {r.precision_population:.3f} / {r.precision_full:.3f} / "
                     f"{r.precision_resampled:.3f} | {r.precision_gap:.3f} | {r.in_band} / {r.n_true} | "
                     f"{r.jaccard:.3f} | {'yes' if r.a else 'NO'} / {'yes' if r.b else 'NO'} / "
                     f"{'yes' if r.c else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path)
    p.add_argument("--work", type=Path, required=True, help="folder of the seeds' files and the tables")
    args = p.parse_args(argv)
    try:
        config = load_config(args.config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    rows, effects, walls = [], [], {}
    for seed in config["model_seeds"]:
        r, e, walls[int(seed)] = run_seed(config, int(seed), args.work)
        rows += r
        effects += e
        name = config["scorers"][0]["name"]
        head = pd.DataFrame(r)
        head = head[head.scorer == name]
        print(f"vision mechanism: seed {seed}: {walls[int(seed)]:.0f} s; {name}: (a) "
              f"{int(head.a.sum())}/{len(head)}, (b) {int(head.b.sum())}/{len(head)}, (c) {int(head.c.sum())}/"
              f"{len(head)} classes; gap {head.precision_gap.mean():.3f}, Jaccard {head.jaccard.mean():.3f}",
              file=sys.stderr)
    conditions, effect_table = pd.DataFrame(rows), pd.DataFrame(effects)
    write_text(args.work / "conditions.csv", conditions.to_csv(index=False))
    write_text(args.work / "effects.csv", effect_table.to_csv(index=False))
    text = markdown(conditions, effect_table, walls, config["scorers"][0]["name"])
    write_text(args.work / "vision_mechanism.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
