"""Training-time channel dropout of the world ResNet (docs/calibration.md): active only in training,
exact in eval mode, recorded in the checkpoint, and old checkpoints without it still load."""

from __future__ import annotations

import argparse
import copy

import pytest
import torch
from torchvision.models.resnet import ResNet

from certified_circuits.cli.vision import STAGES
from certified_circuits.vision.networks.hooks import captured
from certified_circuits.vision.networks.checkpoints import load_world_model, save_world_model
from certified_circuits.vision.networks.models import world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet
from certified_circuits.vision.train import train_world_model
from certified_circuits.vision.data.world import make_split

WIDTHS = (4, 8, 8, 8)


def _net(p: float, mode: str = "mask"):
    torch.manual_seed(0)
    net = world_resnet(3, WIDTHS, channel_dropout=p, channel_dropout_mode=mode)
    for m in net.modules():  # non-trivial BatchNorm statistics so that eval mode is not an identity
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return net


def _torchvision_forward(net: ResNet, x: torch.Tensor) -> torch.Tensor:
    """torchvision's own ResNet forward (no channel dropout) on the same modules."""
    return ResNet._forward_impl(net, x)


@pytest.mark.parametrize("mode", ["mask", "dropout2d"])
def test_eval_mode_is_exactly_torchvision(mode):
    net = _net(0.8, mode).eval()
    x = torch.randn(5, 3, 32, 32)
    assert torch.equal(net(x), _torchvision_forward(net, x))
    assert torch.equal(net(x), net(x))  # deterministic


def test_zero_dropout_is_torchvision_in_train_mode_too():
    net = _net(0.0).train()
    x = torch.randn(6, 3, 32, 32)
    ref = copy.deepcopy(net)
    assert torch.equal(net(x), _torchvision_forward(ref, x))


@pytest.mark.parametrize("mode", ["mask", "dropout2d"])
def test_train_mode_drops_whole_channels_at_every_block(mode):
    net = _net(0.9, mode).train()
    model = world_model_from_net(net, ["a", "b", "c"], 32)
    x = torch.randn(16, 3, 32, 32)
    torch.manual_seed(1)
    # the dropout acts on the block outputs (the circuit vertices): compare each block output as the
    # next block receives it with the block's own output
    inputs = []
    handles = [net.get_submodule(f"layer{i}").register_forward_pre_hook(lambda _m, a: inputs.append(a[0]))
               for i in range(2, 5)]
    handles.append(net.avgpool.register_forward_pre_hook(lambda _m, a: inputs.append(a[0])))
    with captured(model) as acts:
        net(x)
    for h in handles:
        h.remove()
    for out, seen in zip(acts, inputs):
        per_channel_zero = (seen == 0).flatten(2).all(2)       # [B, C] channels zeroed as a whole
        was_zero = (out == 0).flatten(2).all(2)
        assert (per_channel_zero & ~was_zero).any()             # some live channels were dropped
        live = ~per_channel_zero
        ratio = seen.flatten(2)[live] / out.flatten(2)[live].where(out.flatten(2)[live] != 0, torch.ones(()))
        nz = out.flatten(2)[live] != 0
        expected = 1.0 if mode == "mask" else 1.0 / (1.0 - 0.9)  # mask: never rescaled, as zero ablation
        assert torch.allclose(ratio[nz], torch.full_like(ratio[nz], expected), rtol=1e-5)


def test_mask_mode_keeps_the_channels_at_the_drawn_rate():
    net = _net(0.6).train()
    torch.manual_seed(0)
    out = torch.ones(4000, 32, 1, 1)
    kept = net.drop_channels(out).mean().item()
    assert abs(kept - (1 - 0.6 / 2)) < 0.01  # r ~ U(0, P): mean drop rate P / 2


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="channel_dropout"):
        world_resnet(3, WIDTHS, channel_dropout=1.0)
    with pytest.raises(ValueError, match="channel_dropout_mode"):
        world_resnet(3, WIDTHS, channel_dropout=0.5, channel_dropout_mode="spatial")


def test_checkpoint_round_trip(tmp_path):
    net = _net(0.7, "dropout2d").eval()
    path = save_world_model(tmp_path / "m.pt", net, ["a", "b", "c"], WIDTHS, (1, 1, 1, 1), 32, meta={"seed": 0})
    ck = torch.load(path, weights_only=True)
    assert ck["channel_dropout"] == pytest.approx(0.7) and ck["channel_dropout_mode"] == "dropout2d"
    model = load_world_model(path)
    assert model.net.channel_dropout == pytest.approx(0.7) and model.net.channel_dropout_mode == "dropout2d"
    assert not model.net.training
    assert set(model.net.state_dict()) == set(net.state_dict())  # dropout adds no parameters or buffers
    x = torch.randn(3, 3, 32, 32)
    assert torch.equal(model.net(x), net(x))


def test_old_checkpoint_without_the_key_still_loads(tmp_path):
    net = _net(0.0).eval()
    path = tmp_path / "old.pt"
    torch.save({"state_dict": net.state_dict(), "class_names": ["a", "b", "c"], "widths": list(WIDTHS),
                "blocks": [1, 1, 1, 1], "stem_stride": 2, "image_size": 32, "meta": {}}, path)
    model = load_world_model(path)
    assert model.net.channel_dropout == 0.0
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(model.net(x), net(x))


def test_training_with_channel_dropout_is_seeded_and_logged(tiny_cfg):
    tr = make_split(tiny_cfg, "train")
    kw = dict(epochs=1, batch_size=16, widths=(4, 4, 4, 4), progress=False, channel_dropout=0.5)
    a, log_a = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=5, **kw)
    b, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=5, **kw)
    plain, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), seed=5,
                                 **{**kw, "channel_dropout": 0.0})
    sa, sb, sp = a.net.state_dict(), b.net.state_dict(), plain.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sp[k]) for k in sa)
    assert log_a["channel_dropout"] == 0.5 and log_a["channel_dropout_mode"] == "mask"
    assert not a.net.training


def test_cli_option():
    parser = argparse.ArgumentParser()
    STAGES.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["vision-train", "--world", "w", "--out-model", "m.pt", "--out-metrics", "m.json"])
    assert args.channel_dropout == 0.0 and args.channel_dropout_mode == "mask"
    args = parser.parse_args(["vision-train", "--world", "w", "--out-model", "m.pt", "--out-metrics", "m.json",
                              "--channel-dropout", "0.9"])
    assert args.channel_dropout == 0.9
    for bad in ("1", "-0.1", "nan", "x"):
        with pytest.raises(SystemExit):
            parser.parse_args(["vision-train", "--world", "w", "--out-model", "m", "--out-metrics", "j",
                               "--channel-dropout", bad])


def test_nonneg_classifier_keeps_the_classifier_weights_non_negative(tiny_cfg):
    tr = make_split(tiny_cfg, "train")
    # lr high enough that, without the projection after every step, some weights do turn negative
    kw = dict(epochs=8, lr=0.03, batch_size=16, widths=(4, 4, 4, 8), progress=False, seed=3)
    m, log = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), nonneg_classifier=True, **kw)
    plain, plain_log = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), **kw)
    w = m.net.fc.weight.detach()
    assert (w >= 0).all() and (w > 0).any()           # projected onto W >= 0, not collapsed to 0
    assert (plain.net.fc.weight < 0).any()            # the unconstrained classifier does use negative weights
    assert log["nonneg_classifier"] is True and plain_log["nonneg_classifier"] is False
    assert set(m.net.state_dict()) == set(plain.net.state_dict())  # same architecture / checkpoint layout
    again, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), nonneg_classifier=True, **kw)
    assert all(torch.equal(a, b) for a, b in zip(m.net.state_dict().values(), again.net.state_dict().values()))


def test_nonneg_classifier_makes_layer4_ablation_monotone(tiny_cfg):
    """With W >= 0, zeroing layer4 channels (the zero ablation of the circuit test) never raises a logit."""
    tr = make_split(tiny_cfg, "train")
    m, _ = train_world_model(tr["images"], tr["labels"], tiny_cfg.class_names(), epochs=1, batch_size=16,
                             widths=(4, 4, 4, 8), progress=False, nonneg_classifier=True)
    x = m.normalize(torch.from_numpy(tr["images"][:12]))
    torch.manual_seed(0)
    keep = (torch.rand(5, 8) < 0.5).float()  # 5 random layer4 circuits
    with torch.no_grad():
        full = m.net(x)
        for k in keep:
            h = m.net.layer4.register_forward_hook(lambda _m, _i, out: out * k[None, :, None, None])
            ablated = m.net(x)
            h.remove()
            assert (ablated <= full + 1e-5).all()
