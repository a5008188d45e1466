"""Naive vs cached certification (paper App. D, Table runtime).

Base algorithm A with a realistic cost: the embedded world ResNet (torchvision BasicBlock ResNet,
hooks at layer1..layer4) computes relevance (gradient x activation of the class logit) for the images
of a sub-dataset, averages it and keeps the top-K fraction per layer for a 20-value K grid.
|D| = 50 images of 32x32, p_del = 0.6, tau = 0.95, alpha = 0.001, n0 = n/10, 1 torch thread.
The measurement is :func:`certified_circuits.vision.runtime.measure_naive_vs_cached`, the same code
as the workflow's runtime table. Weights are random: the cost of a pass does not depend on them.

Targets: naive/cached speedup at n = 1000 >= 500x (paper: 416x); certified/baseline cost <= 1.10
(paper: 2.4).
"""

from __future__ import annotations

import numpy as np
import torch

from certified_circuits.reports.tables import format_runtime_table
from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet
from certified_circuits.vision.runtime import measure_naive_vs_cached


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = world_model_from_net(world_resnet(10).eval(), [f"c{i}" for i in range(10)], 32)
    pixels = np.random.default_rng(0).integers(0, 256, (50, 32, 32, 3), dtype=np.uint8)
    images = model.normalize(torch.from_numpy(pixels))
    table = format_runtime_table(measure_naive_vs_cached(model, images, 3, (100, 500, 1000), np.linspace(0.05, 1, 20)))
    print(f"vertices: {model.n_vertices}, |D| = 50, K values: 20, torch threads: 1")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    baseline = float(table.loc[table.paradigm == "baseline", "total_cached_s"].iloc[0])
    last = table[(table.paradigm == "certified")].iloc[-1]
    print(f"SUMMARY naive_vs_cached: n={int(last.n)} speedup {last.speedup:.0f}x (target >= 500x, paper 416x); "
          f"certified/baseline cost {last.total_cached_s / baseline:.2f} (target <= 1.10, paper 2.4)")


if __name__ == "__main__":
    main()
