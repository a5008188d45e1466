"""Faithfulness (MIB's circuit track) on values worked out by hand, and f = 1 exactly for a circuit that keeps
every component, through the vision and language evaluation stages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certified_circuits.analysis.faithfulness import curve_areas, faithfulness, faithfulness_table


def test_faithfulness_by_hand() -> None:
    # m(empty) = 1, m(full) = 3: f = (m - 1) / 2
    np.testing.assert_allclose(faithfulness([1.0, 2.0, 3.0, 4.0], 1.0, 3.0), [0.0, 0.5, 1.0, 1.5])
    assert np.isnan(faithfulness([2.0], 1.0, 1.0)[0])       # model and empty circuit agree: undefined


def test_areas_by_hand() -> None:
    # K grid 0.5, 1.0 with f 0.5, 1.0; (0, 0) added. CPR = 0.5*(0+0.5)*0.5 + 0.5*(0.5+1)*0.5 = 0.125 + 0.375 = 0.5
    # |1-f|: 1, 0.5, 0 -> 0.5*(1+0.5)*0.5 + 0.5*(0.5+0)*0.5 = 0.375 + 0.125 = 0.5
    assert curve_areas([0.5, 1.0], [0.5, 1.0]) == pytest.approx((0.5, 0.5))
    # overshoot: f = 2 at K = 0.5 (grid lacks 1: (1, 1) added)
    # CPR = 0.5*(0+2)*0.5 + 0.5*(2+1)*0.5 = 0.5 + 0.75 = 1.25; CMD = 0.5*(1+1)*0.5 + 0.5*(1+0)*0.5 = 0.5 + 0.25 = 0.75
    assert curve_areas([0.5], [2.0]) == pytest.approx((1.25, 0.75))
    # unsorted input is sorted
    assert curve_areas([1.0, 0.25, 0.5], [1.0, 0.2, 0.6]) == curve_areas([0.25, 0.5, 1.0], [0.2, 0.6, 1.0])


def test_table_of_a_hand_made_model() -> None:
    """Two methods on a K grid {0.25, 0.5, 1}: m(empty) = 0, m(full) = 4."""
    rows = []
    for method, ms in (("baseline", [1.0, 2.0, 4.0]), ("certified", [2.0, 6.0, 4.0])):
        for k, m in zip([0.25, 0.5, 1.0], ms):
            rows.append(dict(experiment="e", concept="c", eval_set="id", method=method, k_target=k, m=m, m_empty=0.0,
                             m_full=4.0))
    rows.append(dict(experiment="e", concept="c", eval_set="id", method="full", k_target=1.0, m=4.0, m_empty=0.0,
                     m_full=4.0))
    out = faithfulness_table(pd.DataFrame(rows), ["experiment", "eval_set"]).set_index("method")
    # baseline f: 0.25, 0.5, 1 -> CPR = 0.5*0.25*0.25 + 0.5*(0.25+0.5)*0.25 + 0.5*(0.5+1)*0.5 = 0.03125+0.09375+0.375
    assert out.loc["baseline", "cpr"] == pytest.approx(0.5)
    # |1-f|: 1, 0.75, 0.5, 0 -> 0.5*(1.75)*0.25 + 0.5*(1.25)*0.25 + 0.5*0.5*0.5 = 0.21875 + 0.15625 + 0.125
    assert out.loc["baseline", "cmd"] == pytest.approx(0.5)
    # certified f: 0.5, 1.5, 1 -> CPR = 0.0625 + 0.25 + 0.625 = 0.9375; |1-f|: 1, .5, .5, 0 -> .1875+.125+.125 = .4375
    assert out.loc["certified", "cpr"] == pytest.approx(0.9375)
    assert out.loc["certified", "cmd"] == pytest.approx(0.4375)
    assert out.loc["certified", "f_k0.5"] == pytest.approx(1.5) and out.loc["baseline", "f_k0.25"] == pytest.approx(0.25)
    assert "full" not in out.index


@pytest.fixture()
def tiny_vision_model():
    """A random-weight world ResNet (4 classes, widths 4/8/8/8) and 12 noise images of classes 0-3."""
    import torch

    from certified_circuits.vision.data.image_sets import ImageSet
    from certified_circuits.vision.networks.models import world_model_from_net
    from certified_circuits.vision.networks.world_resnet import world_resnet

    torch.manual_seed(0)
    net = world_resnet(4, widths=(4, 8, 8, 8)).eval()
    x = torch.randn(12, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    iset = ImageSet(labels=np.arange(12) % 4, ids=np.array([f"i{i}" for i in range(12)]),
                    loader=lambda idx, model: x[torch.as_tensor(idx)], source="synthetic")
    return world_model_from_net(net, ["a", "b", "c", "d"], 32), iset


def test_vision_baseline_at_k1_is_the_full_model_exactly(tiny_vision_model) -> None:
    from certified_circuits.analysis.faithfulness import faithfulness_curves
    from certified_circuits.vision.evaluate import evaluate_class

    model, iset = tiny_vision_model
    u = model.n_vertices
    k_grid = np.array([0.5, 1.0])
    masks = {"baseline": np.array([np.arange(u) < u // 2, np.ones(u, bool)]),
             "certified": np.array([np.zeros(u, bool), np.arange(u) % 2 == 0])}
    df = evaluate_class(model, {"id": iset}, 1, masks, k_grid, np.zeros(u, np.int32), experiment="t", concept="one",
                        progress=False, max_batch=4)
    curves = faithfulness_curves(df)
    at1 = curves[(curves.method == "baseline") & (curves.k_target == 1.0)]
    assert at1["faithfulness"].tolist() == [1.0]              # exactly
    empty = curves[(curves.method == "certified") & (curves.k_target == 0.5)]
    assert empty["faithfulness"].tolist() == [0.0]            # the empty circuit: exactly 0
    assert df["m_full"].nunique() == 1 and df["m_empty"].iloc[0] != df["m_full"].iloc[0]


def test_faithfulness_across_model_seeds(tmp_path) -> None:
    """Two seeds, two concepts: per seed the mean over concepts, then mean ± sd over seeds, and in how many seeds
    the certified circuit's CMD is below the baseline's (seed 0: 0.2 < 0.4; seed 1: 0.5 > 0.3)."""
    from certified_circuits.reports.paper import model_seeds_faithfulness

    paths = {}
    for seed, (cert, base) in {"0": ((0.1, 0.3), (0.4, 0.4)), "1": ((0.5, 0.5), (0.2, 0.4))}.items():
        rows = [dict(experiment="w", eval_set="id", concept=c, method=m, cpr=1 - v, cmd=v)
                for m, values in (("certified", cert), ("baseline", base)) for c, v in zip("ab", values)]
        path = tmp_path / f"faithfulness_{seed}.csv"
        pd.DataFrame(rows).to_csv(path, index=False)
        paths[seed] = [path]
    model_seeds_faithfulness(paths, tmp_path, "w_faithfulness")
    out = pd.read_csv(tmp_path / "w_faithfulness_model_seeds_raw.csv").set_index("method")
    assert out.loc["certified", "cmd_mean"] == pytest.approx((0.2 + 0.5) / 2)
    assert out.loc["baseline", "cmd_mean"] == pytest.approx((0.4 + 0.3) / 2)
    assert out.loc["certified", "cmd_std"] == pytest.approx(np.std([0.2, 0.5], ddof=1))
    assert int(out.loc["certified", "certified_lower_cmd"]) == 1 and int(out.loc["certified", "n_seeds"]) == 2


def test_a_hand_made_vision_model_gives_the_values_worked_out_by_hand() -> None:
    """Logits = the three channel means of a constant image (identity 1x1 conv, average pool, identity fc).
    Class 0's images have channel means (2, 1, 0) and (4, 0, 2); m = logit_0 - mean(other logits):
    full 1.5 and 3 -> m(M) = 2.25; empty (every channel zeroed) -> 0. Keeping channel 0: m = 2, 4 -> 3, f = 4/3;
    channels 0 and 1: m = 1.5, 4 -> 2.75, f = 11/9; all: f = 1. Over K = 1/3, 2/3, 1 with (0, 0):
    CPR = (12 + 23 + 20) / 54 = 55/54, CMD = (12 + 5 + 2) / 54 = 19/54."""
    from collections import OrderedDict

    import torch
    from torch import nn

    from certified_circuits.vision.data.image_sets import ImageSet
    from certified_circuits.vision.evaluate import evaluate_class
    from certified_circuits.vision.networks.models import VisionModel

    conv, fc = nn.Conv2d(3, 3, 1, bias=False), nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
        fc.weight.copy_(torch.eye(3))
    net = nn.Sequential(OrderedDict(feat=conv, pool=nn.AdaptiveAvgPool2d(1), flat=nn.Flatten(), fc=fc)).eval()
    model = VisionModel(net=net, arch="hand", hook_names=["feat"], block_names=["feat"], widths=[3], channel_dim=1,
                        expand_at=("feat", "input"), class_names=["a", "b", "c"], image_size=2, mean=(0, 0, 0),
                        std=(1, 1, 1))
    means = torch.tensor([[2.0, 1.0, 0.0], [4.0, 0.0, 2.0], [0.0, 3.0, 0.0], [1.0, 2.0, 1.0]])
    x = means[:, :, None, None].expand(4, 3, 2, 2).contiguous()
    iset = ImageSet(labels=np.array([0, 0, 1, 1]), ids=np.array(["p0", "p1", "n0", "n1"]),
                    loader=lambda idx, m: x[torch.as_tensor(idx)], source="hand")
    k_grid = np.array([1 / 3, 2 / 3, 1.0])
    masks = {"baseline": np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], bool)}
    df = evaluate_class(model, {"id": iset}, 0, masks, k_grid, np.zeros(3, np.int32), experiment="hand",
                        concept="a", n_negatives=2, progress=False, max_batch=8)
    assert df["m_full"].iloc[0] == pytest.approx(2.25) and df["m_empty"].iloc[0] == pytest.approx(0.0)
    base = df[df.method == "baseline"].sort_values("k_target")
    assert base["m"].tolist() == pytest.approx([3.0, 2.75, 2.25])
    row = faithfulness_table(df, ["experiment", "eval_set"]).iloc[0]
    assert row["cpr"] == pytest.approx(55 / 54) and row["cmd"] == pytest.approx(19 / 54)
