"""Benchmark: batched multi-mask evaluation vs plain inference (paper Sec. 4 sufficiency sweeps).

Measures (image, mask) pairs per second of ``evaluate.predictions_under_masks`` (masks as a batch
dimension, computation before the first masked block shared) against images per second of the plain
unmasked model and of a naive loop (one masked forward per mask), on the embedded world ResNet with
random weights (throughput does not depend on the weights). Figures go to stdout; the last line is a
one-line summary.

    python benchmarks/bench_vision_masked_eval.py [--images 256] [--masks 61] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.evaluate import predictions_under_masks
from certified_circuits.vision.networks.hooks import masked_logits
from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--masks", type=int, default=61, help="20 K x 3 methods + the full model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-batch", type=int, nargs="*", default=[512, 1024, 4096])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = world_model_from_net(world_resnet(10).eval(), [str(i) for i in range(10)], 32)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    iset = ImageSet(labels=np.zeros(args.images, np.int64), ids=np.arange(args.images).astype(str),
                    loader=lambda idx, m: m.normalize(torch.from_numpy(images[idx])), source="bench")
    masks = rng.uniform(size=(args.masks, model.n_vertices)) < rng.uniform(0.05, 1.0, (args.masks, 1))
    idx = np.arange(args.images)

    def best(fn) -> float:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    x = iset.load(idx, model)
    with torch.no_grad():
        t_plain = best(lambda: [model.net(x[s : s + 256]) for s in range(0, len(x), 256)])
    plain = args.images / t_plain
    print(f"plain inference: {plain:,.0f} images/s ({args.images} images, {args.threads} thread(s))")
    results = {}
    for mb in args.max_batch:
        t = best(lambda: predictions_under_masks(model, iset, idx, masks, max_batch=mb))
        results[mb] = args.images * args.masks / t
        print(f"batched masks (max_batch={mb}): {results[mb]:,.0f} image-masks/s = {results[mb] / plain:.2f}x plain")
    sub = idx[:64]
    xs = iset.load(sub, model)
    t_loop = best(lambda: [masked_logits(model, xs, torch.as_tensor(m[None], dtype=torch.float32)) for m in masks])
    loop = len(sub) * args.masks / t_loop
    print(f"naive loop (one forward per mask, 64 images): {loop:,.0f} image-masks/s = {loop / plain:.2f}x plain")
    mb_best = max(results, key=results.get)
    print(f"SUMMARY masked-eval: {results[mb_best]:,.0f} image-masks/s (max_batch={mb_best}) vs plain {plain:,.0f} images/s "
          f"= {results[mb_best] / plain:.2f}x; vs per-mask loop {results[mb_best] / loop:.2f}x")


if __name__ == "__main__":
    main()
