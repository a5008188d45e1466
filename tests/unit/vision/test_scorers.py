"""Scorer definitions on a hand-checkable toy network.

Toy: input x [B, 2, 2, 2] -> layer1 = identity (vertices: 2 channels) -> layer2 = 1x1 conv W2 (3x2)
(vertices: 3 channels) -> sum over space -> linear V (2x3) + bias. Then the class-c logit is
z_c = sum_k V[c,k] sum_hw (W2 x)_k, so d z_c / d layer2_k = V[c,k] at every position and
d z_c / d layer1_j = sum_k V[c,k] W2[k,j]: relevance = gradient x activation summed over space.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from certified_circuits.vision.networks.models import VisionModel
from certified_circuits.vision.scoring.scorers import block_rank, mean_activations, score_batch, spurious_index


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1 = nn.Identity()
        self.layer2 = nn.Conv2d(2, 3, 1, bias=False)
        self.fc = nn.Linear(3, 2)
        with torch.no_grad():
            self.layer2.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]]).view(3, 2, 1, 1))
            self.fc.weight.copy_(torch.tensor([[1.0, -1.0, 0.5], [0.0, 1.0, 2.0]]))
            self.fc.bias.copy_(torch.tensor([0.1, -0.2]))

    def forward(self, x):
        return self.fc(self.layer2(self.layer1(x)).sum(dim=(2, 3)))


def toy_model() -> VisionModel:
    return VisionModel(net=Toy().eval(), arch="toy", hook_names=["layer1", "layer2"], block_names=["layer1", "layer2"],
                       widths=[2, 3], channel_dim=1, expand_at=("layer1", "output"), class_names=["p", "q"],
                       image_size=2, mean=(0, 0, 0), std=(1, 1, 1))


def test_scores_by_hand():
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [-1.0, 2.0]]]])  # [1, 2, 2, 2]
    m = toy_model()
    s, logits = score_batch(m, x, target=1)
    # layer1 activations: channel sums 10 and 2, means 2.5 and 0.5
    # layer2 = W2 x: channel sums 10, 4, 8 -> means 2.5, 1.0, 2.0
    V1 = np.array([0.0, 1.0, 2.0])
    W2 = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]])
    g1 = V1 @ W2  # d z_1 / d layer1 = [2, 0]
    rel = np.concatenate([g1 * np.array([10.0, 2.0]), V1 * np.array([10.0, 4.0, 8.0])])
    np.testing.assert_allclose(s["relevance"][0].numpy(), rel)
    np.testing.assert_allclose(s["activation"][0].numpy(), [2.5, 0.5, 2.5, 1.0, 2.0])
    # rank within each block, 1 = most active: block1 [1, 0]; block2 means 2.5 > 2.0 > 1.0 -> [1, 0, 0.5]
    np.testing.assert_allclose(s["rank"][0].numpy(), [1.0, 0.0, 1.0, 0.0, 0.5])
    np.testing.assert_allclose(logits[0].numpy(), [10 - 4 + 4 + 0.1, 4 + 16 - 0.2], rtol=1e-6)
    # relevance sums to the logit minus bias for this bias-free linear path (completeness of grad x act)
    assert s["relevance"][0, 2:].sum().item() == pytest.approx(logits[0, 1].item() + 0.2)
    torch.testing.assert_close(mean_activations(m, x), s["activation"])
    assert all(p.requires_grad for p in m.net.parameters())  # restored


def test_scores_per_example_independent_of_batch():
    m = toy_model()
    x = torch.randn(4, 2, 2, 2, generator=torch.Generator().manual_seed(0))
    s_all, _ = score_batch(m, x, 0)
    for i in range(4):
        s_i, _ = score_batch(m, x[i : i + 1], 0)
        for k in s_all:
            torch.testing.assert_close(s_all[k][i], s_i[k][0])


def test_score_batch_needs_eval_mode():
    m = toy_model()
    m.net.train()
    with pytest.raises(ValueError, match="eval mode"):
        score_batch(m, torch.zeros(1, 2, 2, 2), 0)


def test_block_rank_ties_and_range():
    r = block_rank(torch.tensor([[3.0, 1.0, 3.0, 2.0]]))
    np.testing.assert_allclose(r[0].numpy(), [2 / 3, 0.0, 1.0, 1 / 3])


def test_spurious_index():
    base = torch.zeros(3, 2)
    hab = torch.tensor([[1.0, 0.0]] * 3)
    shp = torch.tensor([[0.0, 2.0]] * 3)
    np.testing.assert_allclose(spurious_index(base, hab, shp).numpy(), [1.0, 0.0])
    np.testing.assert_allclose(spurious_index(base, hab, hab).numpy(), [0.5, 0.0])


def test_the_schema_offers_exactly_the_built_in_scorers() -> None:
    """config.schema.yaml's built-in scorer names are vision/scoring/scorers.SCORERS (the schema's enum keeps the
    config check free of torch; this keeps the two from disagreeing), and its default runs every built-in."""
    from pathlib import Path

    import yaml

    from certified_circuits.vision.scoring.scorers import SCORERS

    schema = yaml.safe_load((Path(__file__).resolve().parents[3] / "config.schema.yaml").read_text())
    scorers = schema["properties"]["vision"]["properties"]["scorers"]
    enums = [option["enum"] for option in scorers["items"]["anyOf"] if "enum" in option]
    assert enums == [list(SCORERS)] and scorers["default"] == list(SCORERS)
    assert schema["properties"]["vision"]["properties"]["main_scorer"]["default"] in SCORERS
