"""Plugins for tests/unit/vision/test_plugins.py (imported by name, also in spawned worker processes)."""

import numpy as np

import certified_circuits as cc
from certified_circuits.vision.scoring.scorers import mean_activations


def mean_activation_topk(model, images, label, k_grid):
    """A black box that is the activation scorer's base algorithm: top-K per block of the mean activation."""
    score = mean_activations(model, images).mean(dim=0).double().cpu().numpy()
    groups = model.groups().numpy()
    return np.stack([cc.top_k_circuit(score, groups, k) for k in k_grid])


def wrong_shape(model, images, label, k_grid):
    return np.ones((len(k_grid) + 1, model.n_vertices), dtype=bool)


def two_arguments(x, y):
    return x


def absolute_activation(activations, gradients, channel_dim):
    import torch

    return torch.cat([a.mean(dim=(2, 3)) for a in activations], dim=1)


absolute_activation.ranking = "absolute"


def bad_ranking(activations, gradients, channel_dim):
    return None


bad_ranking.ranking = "descending"
