"""Benchmark: circuit-restricted evaluation (``evaluate_edge_masks``) of the default's language model shape, the
patched forward before and after issue 51.

A random-weight GPT-2 of the noisy compiled induction model's shape (2 layers x 8 heads, d_model 552, n_inner 4,
vocab 369: 310 EAP edges; throughput does not depend on the weights), 100 prompts of 10-23 tokens (the induction
prompts' range), 70 random edge masks (the ~20 K x methods of one eval set), one thread:

* *before*: ``language/forward.py`` and ``language/patching.py`` as of commit 496b4c1 (read with ``git show``, so
  the checkout must be a git clone): every layer at every position for every (mask, prompt) pair, 64 prompts x 1
  mask a pass;
* *after*: the checkout's: layer 0 from its per-prompt head table, the last layer at the last positions only,
  masks first with a CPU pass of at most ``CPU_PASS_BYTES``.

Both give the same metrics (checked: per-example correctness equal, logit differences within 1e-5). Then the
peak memory allocated by one pass of 1 and of 4 prompts x 70 masks (torch's profiler) against ``patch_chunks``'
estimate ``e cache + e m pair``.

Figures go to stderr and stdout; the last line is a one-line summary.

    python benchmarks/bench_language_patched_eval.py [--prompts 100] [--masks 70] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

#: the last commit with the patched forward before issue 51
BEFORE = "496b4c1"
ROOT = Path(__file__).resolve().parents[1]


def noisy_shape_weights(seed: int = 0):
    """Random GPT-2 weights of the noisy compiled induction model's shape."""
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import build_model, tiny_config

    cfg = tiny_config(369, n_layer=2, n_head=8, n_embd=552, n_positions=64)
    cfg.n_inner = 4
    return GPT2Weights.from_hf(build_model(cfg, seed=seed))


def random_prompts(n: int, vocab: int, seed: int = 0):
    """``n`` right-padded prompt pairs of 10-23 tokens; the corrupted prompt differs from the clean one in 3 tokens."""
    from certified_circuits.language.tokenizer import EncodedBatch

    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, 24, n)
    clean = np.zeros((n, 23), dtype=np.int64)
    clean[np.arange(23)[None, :] < lengths[:, None]] = rng.integers(1, vocab, int(lengths.sum()))
    corrupted = clean.copy()
    rows = np.repeat(np.arange(n), 3)
    cols = (rng.random(3 * n) * np.repeat(lengths, 3)).astype(np.int64)
    corrupted[rows, cols] = rng.integers(1, vocab, 3 * n)
    answer, distractor = rng.integers(1, vocab, (2, n))
    return EncodedBatch(clean, corrupted, lengths.astype(np.int64), answer, distractor, [f"p{i}" for i in range(n)])


def module_before(name: str, path: str) -> types.ModuleType:
    """``path`` as of commit :data:`BEFORE`, imported as module ``name``."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"], capture_output=True, text=True,
                            check=True).stdout
    module = types.ModuleType(name)
    sys.modules[name] = module                                  # its dataclasses look their module up
    exec(compile(source, f"{BEFORE}:{path}", "exec"), module.__dict__)
    return module


def before_patching() -> types.ModuleType:
    """The evaluation of commit :data:`BEFORE`: its patching module running its own forward."""
    forward = module_before("forward_before", "src/certified_circuits/language/forward.py")
    patching = module_before("patching_before", "src/certified_circuits/language/patching.py")
    patching.run, patching.run_patched_groups = forward.run, forward.run_patched_groups
    return patching


def pass_peak(w, batch, masks: np.ndarray) -> tuple[float, float]:
    """Peak bytes allocated by one pass over every prompt and mask of the new path (its corrupted cache, layer-0 table
    and patched forward; torch's profiler's allocation events, summed in time order) and ``patch_chunks``' estimate
    ``e cache + e m pair``."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    from certified_circuits.language.patching import DecomposedGraphModel

    ops = DecomposedGraphModel(w)
    dense = torch.as_tensor(w.graph.dense_mask(masks), dtype=w.wte.dtype)
    lengths = torch.as_tensor(batch.lengths)
    clean, corrupted = torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, torch.no_grad():
        ops.patched_group_logits(clean, lengths, ops.corrupted_cache(corrupted, lengths), dense)
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(f"{tmp}/trace.json")
        with open(f"{tmp}/trace.json") as f:
            events = [x for x in json.load(f)["traceEvents"] if x.get("name") == "[memory]"]
    live = np.cumsum([x["args"]["Bytes"] for x in sorted(events, key=lambda x: x["ts"])])
    e, m, p = len(batch.ids), len(masks), clean.shape[1]
    return float(live.max()), float(e * ops.cache_bytes(p) + e * m * ops.pair_bytes(p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--masks", type=int, default=70)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from certified_circuits.language import patching as after

    before = before_patching()
    w = noisy_shape_weights()
    batch = random_prompts(args.prompts, 369)
    masks = np.random.default_rng(0).random((args.masks, w.graph.n_edges)) < np.linspace(0.05, 0.95, args.masks)[:, None]
    p = int(batch.lengths.max())
    print(f"model 2 x 8 heads, d_model 552, {w.graph.n_edges} edges; {args.prompts} prompts of "
          f"{batch.lengths.min()}-{p} tokens; {args.masks} masks; passes (prompts, masks): before "
          f"{before.patch_chunks(w, args.prompts, args.masks, p)}, after {after.patch_chunks(w, args.prompts, args.masks, p)}",
          file=sys.stderr)
    times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    results = {}
    for r in range(args.repeats):
        for name, module in (("before", before), ("after", after)):
            wall, cpu = time.perf_counter(), time.process_time()
            results[name] = module.evaluate_edge_masks(w, batch, masks, progress=False)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            print(f"repeat {r}: {name} {times[name][-1][0]:.2f} s wall, {times[name][-1][1]:.2f} s CPU", file=sys.stderr)
    med = {k: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for k, v in times.items()}
    same_correct = bool(np.array_equal(results["before"].correct, results["after"].correct))
    d_ld = float(np.abs(results["before"].logit_diff - results["after"].logit_diff).max())
    if not same_correct or d_ld > 1e-5:
        raise SystemExit(f"the two paths disagree: correctness equal {same_correct}, max |logit diff change| {d_ld:.2e}")
    peaks = [pass_peak(w, random_prompts(e, 369, seed=1), masks) for e in (1, 4)]
    for k, (wall, cpu) in med.items():
        print(f"{k}: median {wall:.2f} s wall, {cpu:.2f} s CPU")
    print(f"metrics: per-example correctness equal, max |logit diff change| {d_ld:.1e}")
    for e, (peak, estimate) in zip((1, 4), peaks):
        print(f"one pass of {e} prompts x {args.masks} masks: peak allocated {peak / 1e6:.1f} MB, estimate "
              f"{estimate / 1e6:.1f} MB")
    print(f"summary: evaluate_edge_masks {args.masks} masks x {args.prompts} prompts, noisy-model shape, 1 thread: "
          f"before {med['before'][1]:.1f} s CPU ({med['before'][0]:.1f} s wall), after {med['after'][1]:.1f} s CPU "
          f"({med['after'][0]:.1f} s wall), {med['before'][1] / med['after'][1]:.1f}x (CPU), "
          f"{med['before'][0] / med['after'][0]:.1f}x (wall); same metrics; pass peaks within the estimate: "
          f"{all(peak <= estimate for peak, estimate in peaks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
