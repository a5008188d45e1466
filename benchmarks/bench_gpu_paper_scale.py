"""Paper scale on one GPU (docs/results.md, "GPU"; paper App. D, Table runtime; issue 8).

Vision: ResNet-101 and ViT-B/16 (torchvision, random weights: the cost of a pass does not depend on them),
|D| = 50 images at 224 px, n0 = 100, n = 1000, a 20-value K grid, p_del = 0.6, tau = 0.95, alpha = 0.001.
The measurement is :func:`certified_circuits.vision.runtime.measure_naive_vs_cached` (the workflow's runtime
table): naive = Algorithm 2 with A (relevance forward/backward + per-layer top-K) re-run on every
sub-dataset; cached = one relevance pass, then vote counts from the per-example scores on the device;
decision = Algorithm 1 on the counts. Printed: the App. D table, certified / baseline cost, naive / cached
speed-up (and the linear-cost bound (1 - p_del)(n0 + n)), vote counting alone on the device vs numpy, and
the share of counts equal to the numpy path's.

Votes alone: a ResNet-101-shaped class (50 x 3,840 scores, groups 256/512/1024/2048) and GPT-2-shaped
edges (100 x 32,491, global top-K of |mean|), n0 = 100, n = 1000, 20 K: numpy vs torch on the device.

Language: GPT-2 Small shape (12 layers, 12 heads, d 768, 50,257 tokens: 32,491 EAP edges), random
weights, 100 prompts of 16 tokens: EAP-IG per-example scores (5 IG steps) and interchange-patched
evaluation of 60 edge masks (20 K x 3 methods), batch sizes chosen from free device memory.

Targets on one GPU: ResNet-101 certified / baseline <= 1.5 and naive / cached >= 416; ViT-B/16
certified / baseline <= 2.5 (paper, RTX 4090: 2.4 and 416).

    python benchmarks/bench_gpu_paper_scale.py                    # needs CUDA (prints so and exits 0 without)
    python benchmarks/bench_gpu_paper_scale.py --device cpu --small   # CPU smoke test of every code path

The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

P_DEL, TAU, ALPHA = 0.6, 0.95, 0.001
K_GRID = np.linspace(0.05, 1.0, 20)
RESNET_GROUPS = np.repeat(np.arange(4), [256, 512, 1024, 2048]).astype(np.int32)


def _sizes(small: bool) -> dict:
    if small:  # CPU smoke test: every code path, minutes -> seconds
        return dict(n_images=3, n=5, resnet_px=64, n_prompts=6, n_tokens=8, repeats=1,
                    gpt2=dict(n_layer=2, n_head=4, n_embd=64, vocab_size=1000, bos_token_id=0, eos_token_id=0))
    return dict(n_images=50, n=1000, resnet_px=224, n_prompts=100, n_tokens=16, gpt2=dict(), repeats=2)


def _share_equal(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


def vision(arch: str, device: torch.device, sizes: dict) -> dict:
    """App. D table of one architecture, plus vote counting alone on the device vs numpy."""
    from certified_circuits.core.smoothing import selection_and_certification_masks, vote_counts
    from certified_circuits.reports.tables import format_runtime_table
    from certified_circuits.analysis.timing import best_of
    from certified_circuits.vision.networks.classifiers import build_paper_model
    from certified_circuits.vision.runtime import measure_naive_vs_cached
    from certified_circuits.vision.scoring.scorers import score_batch

    torch.manual_seed(0)
    model = build_paper_model(arch, pretrained=False)
    model.net.to(device)
    px = 224 if arch.startswith("vit") else sizes["resnet_px"]
    images = torch.randn(sizes["n_images"], 3, px, px, generator=torch.Generator().manual_seed(0)).to(device)
    n = sizes["n"]
    start = time.perf_counter()
    table = format_runtime_table(measure_naive_vs_cached(model, images, 0, [n], K_GRID, P_DEL, TAU, ALPHA, seed=0,
                                                         votes_device=device))
    elapsed = time.perf_counter() - start
    baseline = float(table.loc[table.paradigm == "baseline", "total_cached_s"].iloc[0])
    certified = table[table.paradigm == "certified"].iloc[-1]

    # vote counting alone, on the relevance scores of the class: device vs numpy, same masks
    scores = score_batch(model, images, 0)[0]["relevance"]
    host = scores.cpu().numpy()
    groups = model.groups().numpy()
    selection, certification = selection_and_certification_masks(images.shape[0], max(1, n // 10), n, P_DEL, 0)

    def on_device():
        return [vote_counts(scores, groups, K_GRID, m, device=device) for m in (selection, certification)]

    def on_numpy():
        return [vote_counts(host, groups, K_GRID, m) for m in (selection, certification)]

    equal = np.mean([_share_equal(a, b) for a, b in zip(on_device(), on_numpy())])
    print(f"\n== {arch}: {model.n_vertices} vertices, |D| = {images.shape[0]} at {px} px, n0 = {max(1, n // 10)}, "
          f"n = {n}, {K_GRID.size} K, device {device} ({elapsed:.0f} s)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    result = dict(arch=arch, certified_over_baseline=float(certified.total_cached_s) / baseline,
                  naive_over_cached=float(certified.speedup), bound=(1 - P_DEL) * (n + max(1, n // 10)),
                  votes_device_s=best_of(on_device, 3), votes_numpy_s=best_of(on_numpy, 3), votes_equal=float(equal),
                  votes_equal_table=float(certified.votes_equal_numpy))
    print(f"certified / baseline cost {result['certified_over_baseline']:.2f}; naive / cached "
          f"{result['naive_over_cached']:.0f}x (linear-cost bound (1 - p_del)(n0 + n) = {result['bound']:.0f}); "
          f"votes alone (selection + certification): {device} {result['votes_device_s'] * 1e3:.1f} ms vs numpy "
          f"{result['votes_numpy_s'] * 1e3:.1f} ms, equal counts {result['votes_equal']:.6f}")
    del model, images
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def votes_alone(device: torch.device) -> list[dict]:
    """Full-size vote counting (always paper size: cheap): ResNet-101 class and GPT-2 edges, device vs numpy."""
    from certified_circuits.core.smoothing import selection_and_certification_masks, vote_counts
    from certified_circuits.analysis.timing import best_of

    rng = np.random.default_rng(0)
    cases = [
        ("resnet101 class", np.maximum(rng.normal(size=(50, RESNET_GROUPS.size)) + rng.normal(size=RESNET_GROUPS.size),
                                       0).astype(np.float32), RESNET_GROUPS, False),
        ("gpt2 edges", rng.normal(size=(100, 32491)).astype(np.float32), np.zeros(32491, np.int32), True),
    ]
    out = []
    print(f"\n== vote counting alone (n0 = 100, n = 1000, {K_GRID.size} K): numpy vs torch on {device}")
    for name, scores, groups, absolute in cases:
        selection, certification = selection_and_certification_masks(scores.shape[0], 100, 1000, P_DEL, 1)
        on = torch.as_tensor(scores, device=device)

        def dev():
            return [vote_counts(on, groups, K_GRID, m, absolute, device=device) for m in (selection, certification)]

        def ref():
            return [vote_counts(scores, groups, K_GRID, m, absolute) for m in (selection, certification)]

        equal = np.mean([_share_equal(a, b) for a, b in zip(dev(), ref())])
        repeats = 3 if name.startswith("resnet") else 1
        row = dict(case=name, device_s=best_of(dev, repeats), numpy_s=best_of(ref, repeats), equal=float(equal))
        out.append(row)
        print(f"{name}: {scores.shape[0]} x {scores.shape[1]}: numpy {row['numpy_s'] * 1e3:.0f} ms, torch/{device} "
              f"{row['device_s'] * 1e3:.0f} ms ({row['numpy_s'] / row['device_s']:.1f}x), equal counts {equal:.6f}")
    return out


def language(device: torch.device, sizes: dict, eap_batch: int) -> dict:
    """EAP-IG scores and patched evaluation for the GPT-2 Small shape (random weights, random prompts)."""
    from transformers import GPT2Config

    from certified_circuits.language.eap_ig import eap_ig_scores
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import build_model
    from certified_circuits.language.patching import evaluate_edge_masks, patch_chunks
    from certified_circuits.language.tokenizer import EncodedBatch
    from certified_circuits.analysis.timing import best_of

    hf = build_model(GPT2Config(**sizes["gpt2"]), seed=0)
    w = GPT2Weights.from_hf(hf).to(device)
    g = w.graph
    n, p = sizes["n_prompts"], sizes["n_tokens"]
    rng = np.random.default_rng(0)
    clean = rng.integers(0, w.wte.shape[0], size=(n, p))
    corrupted = clean.copy()
    corrupted[:, p // 2] = rng.integers(0, w.wte.shape[0], size=n)  # one corrupted name position
    batch = EncodedBatch(clean=clean, corrupted=corrupted, lengths=np.full(n, p), answer=rng.integers(0, 1000, n),
                         distractor=rng.integers(0, 1000, n), ids=[str(i) for i in range(n)])
    masks = rng.random((60, g.n_edges)) < np.linspace(0.02, 1.0, 60)[:, None]
    repeats = sizes["repeats"]
    eap_s = best_of(lambda: eap_ig_scores(w, batch, ig_steps=5, batch_size=eap_batch, device=device, progress=False),
                    repeats)
    chunks = patch_chunks(w, n, 60, p, device=device)
    eval_s = best_of(lambda: evaluate_edge_masks(w, batch, masks, device=device, progress=False), repeats)
    print(f"\n== GPT-2 shape: {g.n_layers} layers x {g.n_heads} heads, {g.n_edges:,} edges, {n} prompts of {p} tokens, "
          f"device {device}")
    print(f"EAP-IG (5 IG steps, batch {eap_batch}): {eap_s:.2f} s; patched evaluation of 60 masks: {eval_s:.2f} s "
          f"({chunks[0]} prompts x {chunks[1]} masks per pass, from free device memory)")
    return dict(n_edges=g.n_edges, eap_ig_s=eap_s, patched_eval_s=eval_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    ap.add_argument("--small", action="store_true", help="reduced sizes: a CPU smoke test of every code path")
    ap.add_argument("--archs", nargs="*", default=["resnet101", "vit_b_16"], choices=["resnet50", "resnet101", "vit_b_16"])
    ap.add_argument("--skip-language", action="store_true")
    ap.add_argument("--eap-batch", type=int, default=16, help="prompts per EAP-IG batch (default 16, the CLI's)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args()
    from certified_circuits.core.devices import resolve_device

    device = resolve_device(args.device)
    if device.type != "cuda" and not args.small:
        print("bench_gpu_paper_scale needs CUDA (paper sizes on one GPU); none is available here. "
              "Run `--device cpu --small` for a CPU smoke test.")
        print("SUMMARY gpu-paper-scale: skipped (needs CUDA)")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = _sizes(args.small)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {device} ({name}); sizes: {'small (smoke test)' if args.small else 'paper'}")
    results = {arch: vision(arch, device, sizes) for arch in args.archs}
    alone = votes_alone(device)
    lang = None if args.skip_language else language(device, sizes, args.eap_batch)

    parts = [f"device={device.type}{' small' if args.small else ''}"]
    targets = {"resnet101": 1.5, "resnet50": 1.5, "vit_b_16": 2.5}
    for arch, r in results.items():
        part = f"{arch} cert/base {r['certified_over_baseline']:.2f} (<= {targets[arch]})"
        if arch.startswith("resnet"):
            part += f", naive/cached {r['naive_over_cached']:.0f}x (>= 416)"
        parts.append(part)
    parts.append(f"votes resnet101 {alone[0]['device_s'] * 1e3:.0f} vs numpy {alone[0]['numpy_s'] * 1e3:.0f} ms, "
                 f"equal {min([r['votes_equal'] for r in results.values()] + [a['equal'] for a in alone]):.6f}")
    if lang:
        parts.append(f"EAP-IG {lang['eap_ig_s']:.2f} s, patched eval {lang['patched_eval_s']:.2f} s")
    print("SUMMARY gpu-paper-scale: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
