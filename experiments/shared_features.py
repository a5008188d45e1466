"""Issue 20's experiment: does a world whose classes share features give sparse, specific baseline circuits?

For the shape-only embedded world (10 classes) and the compositional world (36 classes = 6 shapes x 6 fill
patterns, ``WorldConfig(n_fills=6)``: every shape channel serves 6 classes, every fill channel 6), and for
each model seed, this trains the world ResNet exactly as ``vision-train`` does (10 epochs, the same number
of training images: 600 x 10 = 167 x 36), then for every class takes the *baseline* circuit (relevance
top-K per block on the class's concept set D_c, the workflow's base algorithm) and evaluates it under
zero ablation on the concept set (the workflow's ``id``) and on held-out ``id_test`` images:

* full-model accuracy on id_test and context_shift (the calibration targets: >= 0.90 and 0.30-0.70);
* balanced accuracy (class accuracy and the false-positive rate on 200 other-class images) at K = 0.25, 0.5;
* faithfulness f at K = 0.25, 0.5 and CMD / CPR over the workflow's K grid
  (:mod:`certified_circuits.analysis.faithfulness`).

Decision rule (issue 20): adopt the compositional world as the embedded default if the baseline's ID
balanced accuracy is >= 0.75 at K = 0.5 in every seed *and* the default run stays within 15 minutes on
2 cores. Results are recorded in docs/calibration.md ("Shared features").

    python experiments/shared_features.py [--seeds 0 1 2] [--worlds shapes compositional] [--out FILE.csv]

Prints one line per (world, seed) and a summary last; writes the per-class rows to ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd
import torch

WORLDS = {"shapes": dict(n_classes=10), "compositional": dict(n_classes=36, n_fills=6)}
K_GRID = np.round(np.arange(1, 21) * 0.05, 2)


def image_set(split: dict, name: str):
    from certified_circuits.vision.data.image_sets import ImageSet

    images = split["images"]

    def loader(idx, model):
        return model.normalize(torch.from_numpy(np.ascontiguousarray(images[idx])))

    return ImageSet(labels=split["labels"].astype(np.int64), ids=split["ids"].astype(str), loader=loader, source=name)


def run(world: str, seed: int, n_negatives: int = 200) -> pd.DataFrame:
    from certified_circuits.analysis.faithfulness import faithfulness_table
    from certified_circuits.core.discovery import top_k_circuit
    from certified_circuits.vision.scoring.attribution import extract_scores
    from certified_circuits.vision.evaluate import evaluate_class
    from certified_circuits.vision.train import accuracy, train_world_model
    from certified_circuits.vision.data.world import WorldConfig, make_split

    knobs = WORLDS[world]
    per_class_train = int(round(600 * 10 / knobs["n_classes"]))
    cfg = WorldConfig(seed=0, n_train_per_class=per_class_train, **knobs)   # one world; the model seed varies
    t0 = time.perf_counter()
    splits = {s: make_split(cfg, s) for s in ("train", "concept", "id_test", "context_shift")}
    t_world = time.perf_counter() - t0
    names = cfg.class_names()
    model, log = train_world_model(splits["train"]["images"], splits["train"]["labels"].astype(np.int64), names,
                                   seed=seed, epochs=10, progress=False)
    acc = {s: accuracy(model, splits[s]["images"], splits[s]["labels"]) for s in ("id_test", "context_shift")}
    sets = {"id": image_set(splits["concept"], "concept"), "id_test": image_set(splits["id_test"], "id_test")}
    groups = np.repeat(np.arange(len(model.widths)), model.widths).astype(np.int32)
    t1 = time.perf_counter()
    tables = []
    for label, concept in enumerate(names):
        idx = np.flatnonzero(sets["id"].labels == label)
        scores, _ = extract_scores(model, sets["id"], idx, label, progress=False)
        dataset_score = scores["relevance"].mean(0)
        masks = np.stack([top_k_circuit(dataset_score, groups, float(k)) for k in K_GRID])
        tables.append(evaluate_class(model, sets, label, {"baseline": masks}, K_GRID, groups, experiment=world,
                                     concept=concept, n_negatives=n_negatives, seed=0, progress=False))
    table = pd.concat(tables, ignore_index=True)
    faith = faithfulness_table(table, ["experiment", "eval_set"])
    rows = table[table.method == "baseline"].merge(faith[["concept", "eval_set", "cpr", "cmd"]],
                                                  on=["concept", "eval_set"])
    rows = rows.assign(seed=seed, id_test_accuracy=acc["id_test"], context_shift_accuracy=acc["context_shift"],
                       train_seconds=log["train_seconds"], world_seconds=t_world,
                       eval_seconds=time.perf_counter() - t1, n_classes=len(names))
    return rows


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (world, seed, eval set): mean over classes at K = 0.25 and 0.5, with CMD and CPR."""
    from certified_circuits.analysis.faithfulness import faithfulness

    rows = rows.assign(f=faithfulness(rows["m"], rows["m_empty"], rows["m_full"]))
    out = []
    for (world, seed, eval_set), part in rows.groupby(["experiment", "seed", "eval_set"], sort=False):
        row = dict(world=world, seed=seed, eval_set=eval_set, classes=int(part["n_classes"].iloc[0]),
                   id_test_acc=part["id_test_accuracy"].iloc[0], context_shift_acc=part["context_shift_accuracy"].iloc[0])
        for k in (0.25, 0.5):
            at = part[np.isclose(part.k_target, k)]
            row[f"bal_acc_k{k:g}"] = at["balanced_accuracy"].mean()
            row[f"fpr_k{k:g}"] = at["false_positive_rate"].mean()
            row[f"f_k{k:g}"] = at["f"].mean()
            row[f"abs_1_minus_f_k{k:g}"] = (1 - at["f"]).abs().mean()
        per_class = part.drop_duplicates("concept")
        row.update(cmd=per_class["cmd"].mean(), cpr=per_class["cpr"].mean(),
                   train_s=part["train_seconds"].iloc[0], eval_s=part["eval_seconds"].iloc[0])
        out.append(row)
    return pd.DataFrame(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--worlds", nargs="+", choices=sorted(WORLDS), default=["shapes", "compositional"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="shared_features.csv")
    args = ap.parse_args()
    from certified_circuits.core.devices import configure_torch

    configure_torch(args.threads)
    all_rows = []
    for world in args.worlds:
        for seed in args.seeds:
            rows = run(world, seed)
            all_rows.append(rows)
            s = summary(rows)
            print(s.to_string(index=False, float_format=lambda v: f"{v:.3f}"), flush=True)
    rows = pd.concat(all_rows, ignore_index=True)
    rows.drop(columns=["per_example_correct"]).to_csv(args.out, index=False)
    s = summary(rows)
    ident = s[s.eval_set == "id"]
    verdict = {w: bool((part["bal_acc_k0.5"] >= 0.75).all()) for w, part in ident.groupby("world")}
    print("summary: " + "; ".join(
        f"{w}: ID balanced accuracy at K=0.5 {', '.join(f'{v:.3f}' for v in ident[ident.world == w]['bal_acc_k0.5'])}"
        f" (>= 0.75 in every seed: {verdict[w]}), CMD {', '.join(f'{v:.3f}' for v in ident[ident.world == w]['cmd'])}"
        for w in verdict), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
