"""Two vision base algorithms a user brings: one of each kind (docs/custom_vision.md).

Name them in vision.scorers as ``my_scorers:taylor`` and ``my_scorers:median_activation`` with this
file on PYTHONPATH or in the working directory.
"""

import numpy as np
import torch

import certified_circuits as cc
from certified_circuits.vision.scoring.scorers import mean_activations


def taylor(activations, gradients, channel_dim):
    """Additive: first-order Taylor importance |sum over positions of activation x gradient|, per example."""
    scores = []
    for a, g in zip(activations, gradients):
        positions = [d for d in range(1, a.ndim) if d != channel_dim % a.ndim]
        scores.append((a * g).sum(dim=positions).abs())
    return torch.cat(scores, dim=1)  # [B, U]


def median_activation(model, images, label, k_grid):
    """Black box: the top-K channels of each block by their median activation over the kept images."""
    score = mean_activations(model, images).median(dim=0).values.cpu().numpy()  # [U]: not a mean of per-example scores
    groups = model.groups().numpy()
    return np.stack([cc.top_k_circuit(score, groups, k) for k in k_grid])  # bool [nK, U]
