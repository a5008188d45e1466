"""Shared fixtures for the vision tests: small, seeded, CPU-only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet
from certified_circuits.vision.data.world import WorldConfig

from certified_circuits.core.devices import configure_torch  # noqa: E402

configure_torch(1)  # the stages' settings: one thread, deterministic kernels


@pytest.fixture(scope="session")
def tiny_cfg() -> WorldConfig:
    return WorldConfig(seed=3, n_classes=4, n_train_per_class=12, n_concept_per_class=6, n_test_per_class=5,
                       n_ood_per_class=5, n_pool_per_class=8, n_anomaly_pool=40, n_counterfactual=16)


@pytest.fixture()
def tiny_model():
    """A random-weight world ResNet (eval mode) with 4 classes and widths 4/8/8/8."""
    torch.manual_seed(0)
    net = world_resnet(4, widths=(4, 8, 8, 8)).eval()
    # non-trivial BatchNorm statistics so that eval mode is not an identity
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return world_model_from_net(net, ["a", "b", "c", "d"], 32)


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
