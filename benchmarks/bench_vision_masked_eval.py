"""Benchmark: masked evaluation of many circuits (paper Sec. 4 sufficiency), the engines and one default job.

Two parts, on the embedded world ResNet with random weights and BatchNorm statistics (throughput does not
depend on the weights), one thread:

1. Throughput of ``evaluate.predictions_under_masks`` on random masks: (image, mask) pairs per second of the
   hooks engine (masks as a batch dimension) at several pass sizes, of :class:`evaluate.MaskedResNet` (the
   ``auto`` engine), of a naive loop (one masked forward per mask), against the plain unmasked model.
2. One ``vision_evaluate`` job of the default config (config.yaml): the planted model's widths, its 10 K, 2
   scorers x 3 methods, zero and mean ablation, 6 eval sets of the default's sizes; circuits from real votes and
   certificates (``compute_votes`` / ``certify_votes`` on random per-example scores). *Before*: what the stage
   did until issue 51 -- one pass over the eval sets per (ablation, scorer), the hooks engine, every pair of an
   eval set in one forward pass (the CPU default then). *After*: ``class_tables`` as the stage runs it now.
   Both give the same tables (checked here: integers equal, floats within 1e-5). The figure is
   milliseconds per circuit and eval set: job seconds / (circuit rows x eval sets), a circuit row being one
   (ablation, scorer, method, K), as issue 51 counted.

Figures go to stdout; the last line is a one-line summary.

    python benchmarks/bench_vision_masked_eval.py [--images 256] [--masks 61] [--threads 1] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from certified_circuits.core.certification import certify_votes, method_masks
from certified_circuits.core.devices import CPU_BUDGET_BYTES, configure_torch
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.evaluate import bytes_per_pair, class_tables, predictions_under_masks
from certified_circuits.vision.networks.hooks import masked_logits, reference_activations
from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet

#: The default config's vision job (config.yaml): planted widths n_classes x own + shared, its K grid, its
#: certification setting, and per eval set (class images, other-class images the negative sample can draw).
DEFAULT_WIDTHS = (10 * 1 + 6, 10 * 3 + 6, 10 * 6 + 8, 10 * 6 + 0)
DEFAULT_K = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)
DEFAULT_SETS = {"id": 50, "id_test": 100, "context_shift": 100, "corruption": 100, "adversarial": 30, "anomaly": 30}
N_NEGATIVES = 100  # vision-evaluate's default


def random_model(widths: tuple[int, ...], n_classes: int = 10):
    """A world ResNet with random weights and non-trivial BatchNorm statistics, in eval mode."""
    torch.manual_seed(0)
    net = world_resnet(n_classes, widths).eval()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return world_model_from_net(net, [str(i) for i in range(n_classes)], 32)


def image_set(n: int, labels: np.ndarray, seed: int) -> ImageSet:
    """Random uint8 images, loaded as the world's sets are (normalised per batch)."""
    images = np.random.default_rng(seed).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    return ImageSet(labels=labels, ids=np.arange(n).astype(str),
                    loader=lambda idx, m: m.normalize(torch.from_numpy(images[idx])), source="bench")


def best_of(fn, repeats: int) -> float:
    """The fastest of ``repeats`` runs, wall-clock seconds."""
    return timed(fn, repeats)[0]


def timed(fn, repeats: int):
    """(wall, CPU) seconds of the fastest of ``repeats`` runs, and the last run's result; CPU time is this
    process's (other jobs on a shared machine slow the wall clock, much less the CPU time)."""
    runs = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return (*min(runs), result)


def throughput(args: argparse.Namespace) -> dict[str, float]:
    """Part 1: pairs per second of each engine on random masks."""
    model = random_model(tuple(args.widths))
    rng = np.random.default_rng(0)
    iset = image_set(args.images, np.zeros(args.images, np.int64), 1)
    masks = rng.uniform(size=(args.masks, model.n_vertices)) < rng.uniform(0.05, 1.0, (args.masks, 1))
    idx = np.arange(args.images)
    x = iset.load(idx, model)
    with torch.no_grad():
        t_plain = best_of(lambda: [model.net(x[s : s + 256]) for s in range(0, len(x), 256)], args.repeats)
    plain = args.images / t_plain
    print(f"plain inference: {plain:,.0f} images/s ({args.images} images, widths {tuple(args.widths)}, "
          f"{args.threads} thread(s))")
    rates = {"plain": plain}
    pairs = args.images * args.masks
    for mb in args.max_batch:
        t = best_of(lambda: predictions_under_masks(model, iset, idx, masks, max_batch=mb, engine="hooks"), args.repeats)
        rates[f"hooks@{mb}"] = pairs / t
        print(f"hooks engine (max_batch={mb}): {pairs / t:,.0f} image-masks/s = {pairs / t / plain:.2f}x plain")
    t = best_of(lambda: predictions_under_masks(model, iset, idx, masks), args.repeats)
    rates["auto"] = pairs / t
    print(f"MaskedResNet (auto, CPU default passes): {pairs / t:,.0f} image-masks/s = {pairs / t / plain:.2f}x plain "
          f"(random masks keep {masks.mean():.2f} of the channels)")
    sub = idx[:64]
    xs = iset.load(sub, model)
    t_loop = best_of(lambda: [masked_logits(model, xs, torch.as_tensor(m[None], dtype=torch.float32)) for m in masks],
                     args.repeats)
    rates["loop"] = len(sub) * args.masks / t_loop
    print(f"naive loop (one forward per mask, 64 images): {rates['loop']:,.0f} image-masks/s = "
          f"{rates['loop'] / plain:.2f}x plain")
    return rates


def default_job(repeats: int):
    """Part 2: the default's evaluate job, before and after; returns (ms before, ms after, circuit rows, sets)."""
    model = random_model(DEFAULT_WIDTHS)
    n_classes, label = len(model.class_names), 3
    groups = model.groups().numpy()
    k_grid = np.array(DEFAULT_K)
    circuits = []
    for s, seed in enumerate((11, 12)):  # two scorers: per-example scores with a per-component signal
        rng = np.random.default_rng(seed)
        scores = rng.normal(size=model.n_vertices) + rng.normal(size=(50, model.n_vertices))
        votes = compute_votes(scores.astype(np.float32), groups, k_grid, p_del=0.6, n0=100, n=1000, seed=s)
        circuits.append((method_masks(votes, certify_votes(votes, tau=0.95, alpha=0.001)), k_grid, groups))
    sets = {}
    for i, (name, n_pos) in enumerate(DEFAULT_SETS.items()):
        labels = np.concatenate([np.full(n_pos, label), np.arange(2 * N_NEGATIVES) % (n_classes - 1)])
        labels[n_pos:] += labels[n_pos:] >= label  # other classes only
        sets[name] = image_set(len(labels), labels, 100 + i)
    reference = image_set(1000, np.zeros(1000, np.int64), 7)
    fill = reference_activations(model, reference.load(np.arange(1000), model))
    ablations = {"zero": None, "mean": fill}
    common = dict(experiment="world", concept=str(label), n_negatives=N_NEGATIVES, seed=0, progress=False)
    # before: one pass per (ablation, scorer), hooks engine, passes as large as memory allowed: the old CPU default,
    # half of CPU_BUDGET_BYTES over bytes_per_pair (every pair of an eval set in one pass)
    before_pairs = CPU_BUDGET_BYTES // 2 // bytes_per_pair(model)

    def before():
        return {(a, i): class_tables(model, sets, label, [c], {a: f}, max_batch=before_pairs, engine="hooks",
                                     **common)[(a, 0)]
                for a, f in ablations.items() for i, c in enumerate(circuits)}

    def after():
        return class_tables(model, sets, label, circuits, ablations, **common)

    t_before, c_before, old = timed(before, 1)  # 5x slower: one run
    t_after, c_after, new = timed(after, repeats)
    for key, table in new.items():
        ref = old[key]
        ints = ["n_images", "n_negatives"]
        assert (table[ints].to_numpy() == ref[ints].to_numpy()).all()
        assert (table["per_example_correct"] == ref["per_example_correct"]).all(), key
        floats = ["accuracy", "false_positive_rate", "balanced_accuracy", "m", "m_empty", "m_full"]
        np.testing.assert_allclose(table[floats].to_numpy(), ref[floats].to_numpy(), rtol=0, atol=1e-5)
    rows = len(ablations) * sum(len(m) * len(k) for m, k, _ in circuits)
    stacked = np.concatenate([m[x] for m, _, _ in circuits for x in m])
    distinct = len(np.unique(np.vstack([stacked, np.zeros((1, model.n_vertices), bool)]), axis=0))
    n_sets = len(DEFAULT_SETS)
    images = sum(n + N_NEGATIVES for n in DEFAULT_SETS.values())
    print(f"default job: {rows} circuit rows ({len(ablations)} ablations x 2 scorers x 3 methods x {len(k_grid)} K; "
          f"{distinct} distinct circuits, mean kept share {stacked.mean():.2f}) x {n_sets} eval sets ({images} images)")
    per = 1e3 / (rows * n_sets)
    print(f"  before (pass per ablation and scorer, hooks, one pass a set): {t_before:.2f} s = "
          f"{per * t_before:.1f} ms per circuit and eval set (CPU time {per * c_before:.1f} ms)")
    print(f"  after (class_tables, one pass, MaskedResNet):                 {t_after:.2f} s = "
          f"{per * t_after:.1f} ms per circuit and eval set (CPU time {per * c_after:.1f} ms); tables equal (atol 1e-5)")
    return per * t_before, per * t_after, per * c_after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--masks", type=int, default=61, help="20 K x 3 methods + the full model")
    ap.add_argument("--widths", type=int, nargs=4, default=list(DEFAULT_WIDTHS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-batch", type=int, nargs="*", default=[512, 4096])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    configure_torch(args.threads)  # the stages' settings
    rates = throughput(args)
    ms_before, ms_after, cpu_after = default_job(args.repeats)
    hooks_best = max(v for k, v in rates.items() if k.startswith("hooks@"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"SUMMARY masked-eval: default job {ms_after:.1f} ms per circuit and eval set (CPU time {cpu_after:.1f}; "
          f"before {ms_before:.1f}, {ms_before / ms_after:.1f}x); random masks: MaskedResNet "
          f"{rates['auto'] / hooks_best:.2f}x the best hooks pass, {rates['auto'] / rates['plain']:.2f}x plain; "
          f"load average {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
