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
#: the scores a scorer entry may read; conductance (layer conductance, vision-attribute --conductance) is scored
#: only when an entry names it, from the zeros baseline (the world's mean grey image) with 16 steps, the defaults
#: of vision.conductance (docs/custom_vision.md, "The built-in scorers")
SCORERS = ("relevance", "activation", "conductance")
CONDUCTANCE = ("--conductance", "zeros", "--conductance-steps", "16")


class ConfigError(ValueError):
    """A refusal of the command line or the config: one ``error: <file>: <key>: <what>; <fix>`` line, exit 2."""


def _int(config: dict[str, Any], key: str, path: Path, minimum: int, maximum: int = 100_000) -> int:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ConfigError(f"{path}: {key}: {value!r} must be an integer in [{minimum}, {maximum}]")
    return value


def load_config(path: Path) -> dict[str, Any]:
    """The experiment's config, checked before any work.

    Raises:
        ConfigError: naming the file and the key: an unreadable file, a missing or unknown key, fewer than 8 model
            seeds or a seed that is not a distinct non-negative integer, resamples below the conditions' 50, a
            scorer that is not relevance/activation/conductance with a signed/absolute ranking (or given twice), a
            world or compile section that is not a mapping, or a world without cues.
    """
    try:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML ({exc}); pass experiments/vision_mechanism.yaml") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping with {list(KEYS)}; see experiments/vision_mechanism.yaml")
    missing, unknown = [k for k in KEYS if k not in config], [k for k in config if k not in KEYS]
    if missing or unknown:
        raise ConfigError(f"{path}: missing {missing}, unknown {unknown}; see experiments/vision_mechanism.yaml")
    seeds = config["model_seeds"]
    if (not isinstance(seeds, list) or len(seeds) < 8 or len(set(map(str, seeds))) != len(seeds)
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**32 for x in seeds)):
        raise ConfigError(f"{path}: model_seeds: {seeds!r} must be at least 8 distinct non-negative integers (the "
                          "unit of the tests; a seed given twice would count twice)")
    _int(config, "resamples", path, MIN_RESAMPLES)
    _int(config, "reference_size", path, 1, 5000)
    _int(config, "bootstrap_seed", path, 0, 2**32 - 1)
    scorers = config["scorers"]
    if not isinstance(scorers, list) or not scorers or len({str(x) for x in scorers}) != len(scorers) or not all(
            isinstance(x, dict) and x.get("name") and x.get("scorer") in SCORERS
            and x.get("ranking") in ("signed", "absolute") for x in scorers):
        raise ConfigError(f"{path}: scorers: {scorers!r} must be distinct {{name, scorer: {'|'.join(SCORERS)}, "
                          "ranking: signed|absolute}")
    for key in ("world", "compile"):
        if not isinstance(config[key], dict):
            raise ConfigError(f"{path}: {key}: {config[key]!r} must be a mapping; see experiments/vision_mechanism.yaml")
    cues = config["world"].get("cue_attributes", 0)
    if not isinstance(cues, int) or isinstance(cues, bool) or cues < 1:
        raise ConfigError(f"{path}: world.cue_attributes: {cues!r} must be an integer >= 1 (the compiled model reads "
                          "the cue marks)")
    return config


def check_work(work: Path, config: dict[str, Any], path: Path) -> None:
    """Record what ``work`` is built from (``built_from.json``: the config), and refuse a folder built from another
    config, or one with files and no record: its models and attributions would be reused for the wrong setting.

    Raises:
        ConfigError: naming the folder and the fix.
    """
    import json

    record = work / "built_from.json"
    wanted = json.dumps(config, sort_keys=True)
    if record.is_file():
        if record.read_text(encoding="utf-8").strip() != wanted:
            raise ConfigError(f"{work}: built from another config than {path} (built_from.json differs); pass a new "
                              "--work folder, or delete this one")
        return
    if work.is_dir() and any(work.iterdir()):
        raise ConfigError(f"{work}: holds files but no built_from.json, so what built them is unknown; pass a new "
                          "--work folder, or delete this one")
    work.mkdir(parents=True, exist_ok=True)
    write_text(record, wanted + "\n")


def cli(*args: Any, log: Path) -> None:
    """Run ``certified-circuits ARGS``; its stderr goes to ``log`` (named in the error when it fails)."""
    with open(log, "a") as err:
        done = subprocess.run([CLI, *map(str, args)], stderr=err, stdout=err)
    if done.returncode:
        tail = "".join(Path(log).read_text(errors="replace").splitlines(keepends=True)[-12:])
        raise RuntimeError(f"certified-circuits {args[0]} failed (exit {done.returncode}); see {log}, which ends:\n{tail}")


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
    conductance = CONDUCTANCE if any(s["scorer"] == "conductance" for s in config["scorers"]) else ()
    for (concept, part), out in files.items():
        if not out.is_file():
            split = "concept" if part == "dc" else "train"
            batch += [*([] if not batch else ["::"]), "vision-attribute", "--model", "world", "--checkpoint",
                      str(model), "--threads", "1", "--data", str(world / f"{split}.npz"), "--concept", concept,
                      "--split", split, "--experiment", "vision_mechanism", "--batch-size", "250", "--out", str(out),
                      *conductance]
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
        check_work(args.work, config, args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows, effects, walls = [], [], {}
    for seed in config["model_seeds"]:
        try:
            r, e, walls[int(seed)] = run_seed(config, int(seed), args.work)
        except RuntimeError as exc:  # a stage failed: its message and the end of its log, no traceback
            print(f"error: seed {seed}: {exc}", file=sys.stderr)
            return 2
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
