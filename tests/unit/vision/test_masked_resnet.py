"""The pruned ResNet engine of the sufficiency evaluation (``evaluate.MaskedResNet``, issue 51) against a reference
that shares none of its code: one plain forward pass per circuit, with forward hooks that set every removed channel
of a block output to zero or to the mean fill. Logits agree within 1e-5 (float sums in another order), predicted
classes exactly; and ``vision-evaluate`` on the smoke config's setting gives every count of that reference exactly."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

from certified_circuits.vision.data.image_sets import ImageSet
from certified_circuits.vision.evaluate import (
    CPU_PASS_PAIRS,
    MaskedResNet,
    batch_pairs,
    class_margin,
    class_tables,
    logits_under_masks,
    outcomes_under_masks,
    predictions_under_masks,
    written_outputs,
)
from certified_circuits.vision.networks.models import resnet_model, world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet

#: Logits of the engine and of the reference: the same sums in another order (float32, logits of order 1-10).
LOGIT_ATOL = 1e-5


def with_statistics(net: nn.Module) -> nn.Module:
    """Non-trivial BatchNorm statistics and affine parameters (eval mode), seeded."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) * 0.4 - 0.2)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.rand(m.num_features, generator=g) * 0.2 - 0.1)
    return net.eval()


def world(widths=(4, 8, 8, 8)):
    """The world ResNet (BasicBlock, one block a layer, 32 px stem without max-pool)."""
    torch.manual_seed(0)
    return world_model_from_net(with_statistics(world_resnet(4, widths=widths)), ["a", "b", "c", "d"], 32)


def bottleneck():
    """torchvision's ResNet with Bottleneck blocks, two in layer2 (a first block with a downsampling shortcut, a last
    one with an identity shortcut), at 8, 16, 32, 64 planes: the vertices are 32 + 64 + 128 + 256 channels; 7x7
    stem with max-pool, as ResNet-50's."""
    torch.manual_seed(0)
    net = ResNet(Bottleneck, [1, 2, 1, 1], num_classes=5)
    net.inplanes = 8  # narrow everything: rebuild the stem and layers at 8, 16, 32, 64 planes
    net.conv1, net.bn1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8)
    net.layer1 = net._make_layer(Bottleneck, 8, 1)
    net.layer2 = net._make_layer(Bottleneck, 16, 2, stride=2)
    net.layer3 = net._make_layer(Bottleneck, 32, 1, stride=2)
    net.layer4 = net._make_layer(Bottleneck, 64, 1, stride=2)
    net.fc = nn.Linear(256, 5)
    return resnet_model(with_statistics(net), "bottleneck", list("vwxyz"), 48, (0.5,) * 3, (0.25,) * 3)


def identity_first():
    """A world ResNet whose layer2 starts with a stride-1 block without downsampling (identity shortcut: the engine
    densifies its input)."""
    torch.manual_seed(0)
    net = world_resnet(4, widths=(6, 6, 8, 8))
    net.layer2 = nn.Sequential(BasicBlock(6, 6))
    return world_model_from_net(with_statistics(net), ["a", "b", "c", "d"], 32)


MODELS = {"world": world, "bottleneck": bottleneck, "identity_first": identity_first}


def reference_logits(model, x: torch.Tensor, masks: np.ndarray, fill=None) -> torch.Tensor:
    """[M, B, C]: one plain forward pass per circuit; a hook on each block output sets the removed channels to 0
    (or to that block's fill map)."""
    out = []
    for mask in masks:
        handles = []
        for i, (name, keep) in enumerate(zip(model.hook_names, np.split(mask, np.cumsum(model.widths)[:-1]))):
            k = torch.as_tensor(keep, dtype=torch.float32).view(1, -1, 1, 1)
            f = torch.zeros(1) if fill is None else fill[i]

            def hook(_m, _i, o, k=k, f=f):
                return torch.where(k.bool(), o, f.expand_as(o))

            handles.append(model.net.get_submodule(name).register_forward_hook(hook))
        with torch.no_grad():
            out.append(model.net(x))
        for h in handles:
            h.remove()
    return torch.stack(out)


def random_fill(model, x: torch.Tensor) -> list[torch.Tensor]:
    """A mean fill: the block outputs' mean over some images, through plain hooks."""
    acts = []
    handles = [model.net.get_submodule(n).register_forward_hook(lambda _m, _i, o: acts.append(o.mean(0)))
               for n in model.hook_names]
    with torch.no_grad():
        model.net(x)
    for h in handles:
        h.remove()
    return acts


def circuits(model, rng: np.random.Generator, n: int = 9) -> np.ndarray:
    """Random circuits of several sizes plus the empty one and the full one."""
    masks = rng.uniform(size=(n, model.n_vertices)) < rng.uniform(0.02, 0.9, (n, 1))
    return np.vstack([masks, np.zeros(model.n_vertices, bool), np.ones(model.n_vertices, bool)])


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("ablation", ["zero", "mean"])
@pytest.mark.parametrize("per_pass", [1, 4])
def test_engine_logits_equal_a_plain_forward_per_circuit(name, ablation, per_pass, rng):
    model = MODELS[name]()
    engine = MaskedResNet.of(model)
    assert engine is not None
    x = torch.randn(5, 3, model.image_size, model.image_size, generator=torch.Generator().manual_seed(2))
    fill = random_fill(model, torch.randn(7, 3, model.image_size, model.image_size)) if ablation == "mean" else None
    masks = circuits(model, rng)
    expected = reference_logits(model, x, masks, fill)
    with torch.no_grad(), written_outputs():
        h = engine.prefix(x)
        got = torch.cat([engine.logits(h, torch.as_tensor(masks[i : i + per_pass]), fill)
                         for i in range(0, len(masks), per_pass)])
    assert got.shape == expected.shape == (len(masks), 5, len(model.class_names))
    torch.testing.assert_close(got, expected, rtol=0, atol=LOGIT_ATOL)
    np.testing.assert_array_equal(got.argmax(-1).numpy(), expected.argmax(-1).numpy())
    if ablation == "zero":  # the empty circuit: layer4 is zero, the logits are the classifier's bias
        torch.testing.assert_close(got[-2], model.net.fc.bias.expand(5, -1), rtol=0, atol=LOGIT_ATOL)


def synthetic_set():
    """The world model, 11 seeded random images as an image set (labels i mod 4) and the images themselves."""
    x = torch.randn(11, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    iset = ImageSet(labels=np.arange(11) % 4, ids=np.array([f"i{i}" for i in range(11)]),
                    loader=lambda idx, m: x[torch.as_tensor(idx)], source="synthetic")
    return world(), iset, x


def test_both_engines_give_the_same_predictions_and_margins_in_any_pass_size(rng):
    model, iset, _ = synthetic_set()
    masks = circuits(model, rng, 13)
    fill = random_fill(model, torch.randn(6, 3, 32, 32))
    idx = np.arange(11)
    ref_pred, ref_margin = predictions_under_masks(model, iset, idx, masks, 4096, fill=fill, label=2, engine="hooks")
    for max_batch in (None, 3, 11, 40, 4096):  # the CPU default, image batches, one circuit, several, all
        pred, margin = predictions_under_masks(model, iset, idx, masks, max_batch, fill=fill, label=2)
        np.testing.assert_array_equal(pred, ref_pred)
        np.testing.assert_allclose(margin, ref_margin, rtol=0, atol=LOGIT_ATOL)
    runs = outcomes_under_masks(model, iset, idx, [(masks[:5], None), (masks, fill)], label=None, max_batch=7)
    np.testing.assert_array_equal(runs[1][0], ref_pred)  # the second run, with the first in the same pass
    assert runs[0][1] is None and runs[0][0].shape == (5, 11)


def test_the_engine_serves_only_networks_it_can_slice():
    model = world()
    assert MaskedResNet.of(model) is not None
    model.net.train()
    assert MaskedResNet.of(model) is None  # BatchNorm would use the batch's statistics
    model.net.eval()
    handle = model.net.layer3.register_forward_hook(lambda _m, _i, o: o * 2)
    assert MaskedResNet.of(model) is None  # the hook would be skipped
    handle.remove()
    seq = nn.Sequential(nn.Conv2d(3, 3, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 2)).eval()
    from certified_circuits.vision.networks.models import VisionModel

    other = VisionModel(net=seq, arch="seq", hook_names=["0"], block_names=["0"], widths=[3], channel_dim=1,
                        expand_at=("0", "input"), class_names=["a", "b"], image_size=4, mean=(0, 0, 0), std=(1, 1, 1))
    assert MaskedResNet.of(other) is None  # any other network runs the hooks


def test_bad_engine_and_masks_are_refused_before_any_work(rng):
    model = world()
    iset = ImageSet(labels=np.zeros(2, int), ids=np.array(["a", "b"]), source="none",
                    loader=lambda idx, m: pytest.fail("no image may be loaded"))
    with pytest.raises(ValueError, match=r"engine='fast' is unknown: use one of \('auto', 'hooks'\)"):
        outcomes_under_masks(model, iset, np.arange(2), [(np.ones((1, model.n_vertices), bool), None)], engine="fast")
    with pytest.raises(ValueError, match="0 .remove. and 1 .keep. only"):
        predictions_under_masks(model, iset, np.arange(2), np.full((1, model.n_vertices), 0.5))
    with pytest.raises(ValueError, match="engine='fast'"):
        class_tables(model, {"id": iset}, 0, [({"baseline": np.ones((1, model.n_vertices), bool)}, np.ones(1),
                                              model.groups().numpy())], {"zero": None}, experiment="t", concept="a",
                     progress=False, engine="fast")


def test_cpu_passes_stay_cache_sized_and_the_fill_switch_is_restored():
    import torch.utils.deterministic as deterministic

    model = world()
    assert batch_pairs(model, 10) == 10 and batch_pairs(model, 10**6) == CPU_PASS_PAIRS == 256
    assert batch_pairs(model, 10**6, max_batch=5000) == 5000  # an explicit size wins
    before = deterministic.fill_uninitialized_memory
    with pytest.raises(RuntimeError), written_outputs():
        assert deterministic.fill_uninitialized_memory is False
        raise RuntimeError
    assert deterministic.fill_uninitialized_memory is before


# ------------------------------------------------------------------- the smoke config's setting, end to end


def run(*argv) -> int:
    from certified_circuits.cli import vision as vcli

    p = argparse.ArgumentParser(prog="certified-circuits")
    vcli.STAGES.register(p.add_subparsers(dest="cmd"))
    args = p.parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.fixture(scope="module")
def smoke_world(tmp_path_factory):
    """configs/smoke.yaml's world and model (3 classes, 32 px, 1 epoch at widths 8 8 16 16), both scorers' circuits
    of 'circle' at its setting (K 0.25 0.5 0.75, p_del 0.6, n0 20, n 100, tau 0.7, alpha 0.05, Bonferroni)."""
    from certified_circuits.core.certification import certify_votes
    from certified_circuits.core.smoothing import compute_votes
    from certified_circuits.storage.store import read_attributions, write_certificates, write_votes

    d = tmp_path_factory.mktemp("smoke_world")
    w = d / "world"
    assert run("vision-world", "--out", w, "--seed", 0, "--n-classes", 3, "--image-size", 32, "--n-concept-per-class",
               12, "--n-train-per-class", 60, "--n-test-per-class", 10, "--n-ood-per-class", 10, "--n-pool-per-class",
               20, "--n-anomaly-pool", 60) == 0
    assert run("vision-train", "--world", w, "--out-model", d / "m.pt", "--out-metrics", d / "t.json", "--seed", 0,
               "--epochs", 1, "--widths", 8, 8, 16, 16, "--threads", 1) == 0
    assert run("vision-attribute", "--model", "world", "--checkpoint", d / "m.pt", "--data", w / "concept.npz",
               "--concept", "circle", "--out", d / "a.h5", "--counterfactual", w / "counterfactual.npz") == 0
    att = read_attributions(d / "a.h5")
    pairs = []
    for scorer in ("relevance", "activation"):
        votes = compute_votes(att.scores[scorer], att.groups, np.array([0.25, 0.5, 0.75]), p_del=0.6, n0=20, n=100,
                              seed=0, attrs={"scorer": scorer, "concept": "circle"})
        write_votes(d / f"v_{scorer}.h5", votes)
        write_certificates(d / f"c_{scorer}.h5", certify_votes(votes, tau=0.7, alpha=0.05))
        pairs.append((d / f"v_{scorer}.h5", d / f"c_{scorer}.h5"))
    return d, w, pairs


def test_vision_evaluate_on_the_smoke_setting_counts_exactly_what_a_forward_per_circuit_counts(smoke_world):
    from certified_circuits.analysis.paired_tests import decode_outcomes
    from certified_circuits.core.certification import method_masks
    from certified_circuits.storage.store import read_certificates, read_votes
    from certified_circuits.vision.data.image_sets import npz_set
    from certified_circuits.vision.evaluate import negative_sample
    from certified_circuits.vision.networks.checkpoints import load_world_model

    d, w, pairs = smoke_world
    sets = {"id": w / "concept.npz", "id_test": w / "id_test.npz", "context_shift": w / "context_shift.npz"}
    out = d / "eval.csv"
    argv = ["vision-evaluate", "--model", "world", "--checkpoint", d / "m.pt", "--concept", "circle",
            "--ablation", "zero", "mean", "--reference", w / "train.npz", "--reference-size", 1000, "--out", out]
    for v, c in pairs:
        argv += ["--circuits", v, c]
    for name, path in sets.items():
        argv += ["--eval-set", f"{name}={path}"]
    assert run(*argv) == 0
    table = pd.read_csv(out, dtype={"per_example_correct": str})
    # ablation, then scorer, then eval set, then full + method x K: 2 x 2 x 3 x (1 + 3 x 3) rows
    assert len(table) == 120 and table.ablation.tolist() == ["zero"] * 60 + ["mean"] * 60
    assert table.scorer.tolist()[:60] == ["relevance"] * 30 + ["activation"] * 30

    model = load_world_model(d / "m.pt")
    label = model.class_names.index("circle")
    train = npz_set(w / "train.npz")
    fill = random_fill(model, train.load(np.arange(len(train.labels)), model))  # every train image (180 < 1000)
    checked = 0
    for name, path in sets.items():
        iset = npz_set(path)
        pos = np.flatnonzero(iset.labels == label)
        neg = negative_sample(iset.labels, label, 100, 0, name)
        x = iset.load(np.concatenate([pos, neg]), model)
        for ablation, f in (("zero", None), ("mean", fill)):
            for v, c in pairs:
                votes = read_votes(v)
                for method, masks in method_masks(votes, read_certificates(c)).items():
                    logits = reference_logits(model, x, masks, f)
                    hit = (logits.argmax(-1) == label).numpy()
                    own = logits[..., label]
                    margin = (own - (logits.sum(-1) - own) / (logits.shape[-1] - 1))[:, : len(pos)].double().mean(1)
                    rows = table[(table.ablation == ablation) & (table.scorer == votes.attrs["scorer"])
                                 & (table.eval_set == name) & (table.method == method)].sort_values("k_target")
                    assert len(rows) == 3 and (rows.n_images == len(pos)).all() and (rows.n_negatives == len(neg)).all()
                    # counts: exactly the reference's, image by image
                    assert np.rint(rows.accuracy * len(pos)).astype(int).tolist() == hit[:, : len(pos)].sum(1).tolist()
                    assert np.rint(rows.false_positive_rate * len(neg)).astype(int).tolist() == \
                        hit[:, len(pos) :].sum(1).tolist()
                    outcomes = np.stack([decode_outcomes(t) for t in rows.per_example_correct])
                    np.testing.assert_array_equal(outcomes, np.hstack([hit[:, : len(pos)], ~hit[:, len(pos) :]]))
                    np.testing.assert_allclose(rows.m, margin.numpy(), rtol=0, atol=LOGIT_ATOL)
                    checked += 3
    assert checked == 2 * 2 * 3 * 3 * 3  # every circuit row of the table


def grouped(width: int = 16, groups: int = 4):
    """A world ResNet with structural zeros: every conv connects channel i to channel o only when i = o mod ``groups``
    (``groups`` independent chains of 4 channels a layer), and logit 0 reads only the chain of channel 0. A change
    of one channel reaches 4 of a conv's 16 outputs: :meth:`MaskedResNet.ablations` carries it on those only. (At 16
    channels a conv of a tensor in another memory format than the trace's rounds differently: at 8 it did not.)"""
    model = world(widths=(width,) * 4)
    with torch.no_grad():
        for m in model.net.modules():
            if isinstance(m, nn.Conv2d) and m.in_channels == m.out_channels == width:
                o, i = torch.meshgrid(torch.arange(width), torch.arange(width), indexing="ij")
                m.weight.mul_(((o % groups) == (i % groups)).to(m.weight.dtype)[:, :, None, None])
        model.net.fc.weight[0].mul_((torch.arange(width) % groups == 0).to(model.net.fc.weight.dtype))
    return model


def single_vertex_masks(model, layer: int, channels) -> np.ndarray:
    """bool [M, U]: every vertex kept but channel c of ``layer``, one circuit per c."""
    start = int(np.sum(model.widths[:layer]))
    masks = np.ones((len(channels), model.n_vertices), bool)
    masks[np.arange(len(channels)), start + np.asarray(channels)] = False
    return masks


@pytest.mark.parametrize("name", sorted(MODELS) + ["grouped"])
@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_single_vertex_ablations_equal_a_plain_forward_per_circuit(name, ablation, monkeypatch):
    import certified_circuits.vision.evaluate as ev

    model = grouped() if name == "grouped" else MODELS[name]()
    engine = MaskedResNet.of(model)
    x = torch.randn(5, 3, model.image_size, model.image_size, generator=torch.Generator().manual_seed(2))
    fill = random_fill(model, torch.randn(7, 3, model.image_size, model.image_size)) if ablation == "mean" else None
    changes = []
    real = ev.Change.linear
    monkeypatch.setattr(ev.Change, "linear", lambda self, *a: changes.append(real(self, *a)) or changes[-1])

    def ablations(layer: int, channels: list[int]) -> torch.Tensor:
        """The engine's logits [M, B, C] (checked against a plain forward per circuit) and which convs it carried
        sparsely."""
        changes.clear()
        got = engine.ablations(trace, layer, torch.as_tensor(channels), None if fill is None else fill[layer])
        expected = reference_logits(model, x, single_vertex_masks(model, layer, channels), fill)
        torch.testing.assert_close(got, expected, rtol=0, atol=LOGIT_ATOL)
        np.testing.assert_array_equal(got.argmax(-1).numpy(), expected.argmax(-1).numpy())
        return got, [c.dense is None for c in changes]

    with torch.no_grad(), written_outputs():
        trace = engine.trace(engine.prefix(x))
        torch.testing.assert_close(trace.logits, model.net(x), rtol=0, atol=LOGIT_ATOL)
        for layer, width in enumerate(model.widths):
            if name != "grouped":  # dense weights: a change reaches every output, so every channel is computed
                _, sparse = ablations(layer, [0, width - 1, 1] if width > 2 else [0])  # a chunk, out of order
                assert not any(sparse) and (layer == 3 or sparse)
                continue
            # one chain (channels 4 and 0 of chain 0): a change reaches 4 of 16 outputs, carried on those only
            _, sparse = ablations(layer, [4, 0])
            assert all(sparse) and (layer == 3 or sparse)
            # off logit 0's chain, carried sparsely (chain 1) or densely (chains 1 to 3): logit 0 is the full
            # model's, bit for bit
            for channels, carried in (([1, 5], True), ([1, 2, 3], False)):
                got, sparse = ablations(layer, channels)
                assert torch.equal(got[..., 0], trace.logits[:, 0].expand(len(channels), -1))
                assert layer == 3 or sparse[0] == carried


def test_logits_under_masks_are_the_passes_logits(rng):
    model, iset, x = synthetic_set()
    masks = circuits(model, rng, 5)
    fill = random_fill(model, torch.randn(6, 3, 32, 32))
    idx = np.arange(2, 11)
    for max_batch in (None, 4):
        runs = logits_under_masks(model, iset, idx, [(masks, None), (masks[:3], fill)], max_batch)
        assert [r.shape for r in runs] == [(len(masks), 9, 4), (3, 9, 4)]
        torch.testing.assert_close(runs[0], reference_logits(model, x[2:], masks), rtol=0, atol=LOGIT_ATOL)
        torch.testing.assert_close(runs[1], reference_logits(model, x[2:], masks[:3], fill), rtol=0, atol=LOGIT_ATOL)
        pred, margin = outcomes_under_masks(model, iset, idx, [(masks[:3], fill)], 2, max_batch)[0]
        np.testing.assert_array_equal(pred, runs[1].argmax(-1).numpy())  # the same passes: the same logits
        np.testing.assert_array_equal(margin, class_margin(runs[1], 2).double().numpy())
