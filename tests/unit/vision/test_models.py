"""Real torchvision architectures: vertex counts, hook placement, exact no-op masking, weight errors."""

from __future__ import annotations

import pytest
import torch

from certified_circuits.vision.networks.hooks import captured, masked, masked_logits
from certified_circuits.vision.networks.classifiers import build_paper_model, expected_weights_path
from certified_circuits.vision.networks.loading import load_model


@pytest.fixture(scope="module")
def resnet50():
    torch.manual_seed(0)
    return build_paper_model("resnet50", pretrained=False)


@pytest.fixture(scope="module")
def vit():
    torch.manual_seed(0)
    m = build_paper_model("vit_b_16", pretrained=False)
    torch.nn.init.normal_(m.net.heads.head.weight, std=0.02)  # torchvision zero-initialises the head
    return m


def test_resnet_vertices_and_hooks(resnet50):
    assert resnet50.widths == [256, 512, 1024, 2048] and resnet50.n_vertices == 3840
    assert resnet50.groups().tolist().count(3) == 2048
    assert resnet50.vertex_names()[256] == "layer2.0"
    x = torch.randn(1, 3, 112, 112)
    with torch.no_grad(), captured(resnet50) as acts:
        logits = resnet50.net(x)
    assert [a.shape[1] for a in acts] == [256, 512, 1024, 2048]
    # the last hook is the input of avgpool -> fc: the logits follow from it exactly
    ref = resnet50.net.fc(torch.flatten(resnet50.net.avgpool(acts[3]), 1))
    torch.testing.assert_close(ref, logits)


def test_resnet101_vertex_count():
    m = build_paper_model("resnet101", pretrained=False)
    assert m.n_vertices == 3840 and len(m.net.layer3) == 23


def test_resnet_mask_nothing_is_exact_and_zero_layer4_gives_bias(resnet50):
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref = resnet50.net(x)
    out = masked_logits(resnet50, x, torch.ones(1, 3840))[0]
    assert torch.equal(out, ref)
    m = torch.ones(1, 3840)
    m[0, 1792:] = 0  # all of layer4
    out = masked_logits(resnet50, x, m)[0]
    torch.testing.assert_close(out, resnet50.net.fc.bias.expand(2, -1))


@pytest.mark.slow
def test_vit_vertices_hooks_and_exact_noop(vit):
    assert vit.n_vertices == 9216 and vit.widths == [768] * 12
    assert vit.hook_names[3] == "encoder.layers.encoder_layer_3.mlp.3"
    assert vit.net.get_submodule(vit.hook_names[3]) is vit.net.encoder.layers[3].mlp[3]
    assert vit.block_names[0] == "block0_mlp_fc2"
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), captured(vit) as acts:
        ref = vit.net(x)
    assert [tuple(a.shape) for a in acts] == [(1, 197, 768)] * 12
    out = masked_logits(vit, x, torch.ones(1, 9216))[0]
    assert torch.equal(out, ref)
    # two masks at once: all-ones and a masked one; rows are independent
    m = torch.ones(2, 9216)
    m[1, 5000:6000] = 0
    out2 = masked_logits(vit, x, m)
    torch.testing.assert_close(out2[0], ref, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(out2[1], ref)


def test_world_model_multi_mask_equals_loop(tiny_model):
    x = torch.randn(5, 3, 32, 32)
    g = torch.Generator().manual_seed(1)
    masks = (torch.rand(7, tiny_model.n_vertices, generator=g) < 0.6).float()
    batched = masked_logits(tiny_model, x, masks)
    for i in range(7):
        torch.testing.assert_close(batched[i], masked_logits(tiny_model, x, masks[i : i + 1])[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"masks must be \[M, 28\]"):
        with masked(tiny_model, torch.ones(2, 5)):
            pass


def test_missing_weights_error_names_file_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    expected = expected_weights_path("resnet101")
    assert expected.name.startswith("resnet101-") and str(tmp_path) in str(expected)
    with pytest.raises(FileNotFoundError) as e:
        build_paper_model("resnet101")
    msg = str(e.value)
    assert str(expected) in msg and "download.pytorch.org" in msg and "--weights" in msg
    with pytest.raises(FileNotFoundError, match="nope.pth"):
        build_paper_model("resnet50", weights=tmp_path / "nope.pth")
    with pytest.raises(ValueError, match="unknown vision architecture"):
        build_paper_model("alexnet")
    with pytest.raises(ValueError, match="--checkpoint"):
        load_model("world")


def test_weights_roundtrip_from_file(tmp_path):
    torch.manual_seed(0)
    m = build_paper_model("resnet50", pretrained=False)
    f = tmp_path / "w.pth"
    torch.save(m.net.state_dict(), f)
    m2 = build_paper_model("resnet50", weights=f)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(m.net(x), m2.net(x))


@pytest.mark.slow
def test_vit_scores_reduce_over_tokens(vit):
    from certified_circuits.vision.networks.hooks import captured
    from certified_circuits.vision.scoring.scorers import score_batch

    x = torch.randn(1, 3, 224, 224)
    s, logits = score_batch(vit, x, target=7)
    assert {k: tuple(v.shape) for k, v in s.items()} == {k: (1, 9216) for k in ("relevance", "activation", "rank")}
    with torch.no_grad(), captured(vit) as acts:
        vit.net(x)
    torch.testing.assert_close(s["activation"][0, 768:1536], acts[1][0].mean(0), rtol=1e-5, atol=1e-6)
    # rank is a permutation of 0..767 / 767 within every block
    r = s["rank"][0, :768].sort().values
    torch.testing.assert_close(r, torch.arange(768) / 767.0)


def test_normalize_and_predict_stay_on_the_models_device(tiny_model):
    """No CPU constant meets a device tensor: on the meta device (a stand-in for CUDA that needs no
    GPU) normalisation keeps the device, and predict returns host probabilities equal to softmax."""
    import numpy as np

    from certified_circuits.vision.train import predict

    images = torch.zeros(2, 8, 8, 3, dtype=torch.uint8, device="meta")
    assert tiny_model.normalize(images).device.type == "meta"
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, size=(5, 32, 32, 3), dtype=np.uint8)
    probabilities = predict(tiny_model, host, batch_size=2)
    with torch.no_grad():
        expected = torch.softmax(tiny_model.net(tiny_model.normalize(torch.from_numpy(host))), 1).numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-6)
    assert probabilities.dtype == np.float32
