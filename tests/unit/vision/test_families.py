"""Components of any torchvision classifier (issue "Certify your own vision model").

The expected module names, widths and channel axes below are facts of torchvision's architectures
(written out here, not computed by the code under test); shapes come from the meta device, so no
weights are allocated.
"""

from __future__ import annotations

import pytest
import torch
from torchvision import models as tvm

from certified_circuits.vision.networks.families import FAMILIES
from certified_circuits.vision.networks.hooks import masked_logits
from certified_circuits.vision.networks.checkpoints import check_state_dict
from certified_circuits.vision.networks.classifiers import (build_classifier, build_network, check_folders_model,
                                                            preprocessing_of)
from certified_circuits.vision.networks.components import channel_axis, describe_components

# model -> (component modules, widths, channel axis); EfficientNet/MobileNet: every block between stem and head conv
EXPECTED = {
    "resnet18": (["layer1", "layer2", "layer3", "layer4"], [64, 128, 256, 512], 1),
    "resnext50_32x4d": (["layer1", "layer2", "layer3", "layer4"], [256, 512, 1024, 2048], 1),
    "wide_resnet50_2": (["layer1", "layer2", "layer3", "layer4"], [256, 512, 1024, 2048], 1),
    "regnet_y_400mf": ([f"trunk_output.block{i}" for i in range(1, 5)], [48, 104, 208, 440], 1),
    "convnext_tiny": (["features.1", "features.3", "features.5", "features.7"], [96, 192, 384, 768], 1),
    "efficientnet_b0": ([f"features.{i}" for i in range(1, 8)], [16, 24, 40, 80, 112, 192, 320], 1),
    "mobilenet_v2": ([f"features.{i}" for i in range(1, 18)],
                     [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320], 1),
    "mobilenet_v3_small": ([f"features.{i}" for i in range(1, 12)], [16, 24, 24, 40, 40, 40, 48, 48, 96, 96, 96], 1),
    "swin_t": (["features.1", "features.3", "features.5", "features.7"], [96, 192, 384, 768], -1),
    "vit_b_16": ([f"encoder.layers.encoder_layer_{i}.mlp.3" for i in range(12)], [768] * 12, -1),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_auto_layers_per_family(name):
    net = build_network(name, 7, device="meta")
    size = 224 if name == "vit_b_16" else 64
    parts = describe_components(net, name, "auto", size)
    hooks, widths, axis = EXPECTED[name]
    assert parts.hook_names == hooks and parts.widths == widths and parts.channel_dim == axis
    assert set(hooks) <= {n for n, _ in net.named_modules()}  # real module names of the family
    if name == "vit_b_16":  # the paper's ViT vertices and names, unchanged
        assert parts.block_names[0] == "block0_mlp_fc2"
        assert parts.expand_at == ("encoder.layers.encoder_layer_0", "input")
    else:
        assert parts.expand_at == (hooks[0], "output")


def test_every_family_in_the_table_is_tested():
    families = {type(build_network(name, 2, device="meta")).__name__ for name in EXPECTED}
    assert set(FAMILIES) <= families


def test_models_without_blocks_need_explicit_layers():
    net = build_network("densenet121", 3, device="meta")
    with pytest.raises(ValueError, match=r"densenet121 \(DenseNet\) has no automatic layers.*vision.folders.layers"):
        describe_components(net, "densenet121", "auto", 64)
    parts = describe_components(net, "densenet121", ["features.denseblock2", "features.denseblock4"], 64)
    assert parts.widths == [512, 1024] and parts.channel_dim == 1 and parts.expand_at == ("", "input")


def test_a_wrong_layer_name_lists_close_names():
    net = build_network("convnext_tiny", 3, device="meta")
    with pytest.raises(ValueError, match=r"no module \['features\.9'\].*features\.1"):
        describe_components(net, "convnext_tiny", ["features.3", "features.9"], 64)


def test_channel_axis_from_the_output_shape():
    assert channel_axis((2, 96, 8, 8), "m") == 1
    assert channel_axis((2, 8, 8, 96), "m") == -1
    assert channel_axis((2, 197, 768), "m") == -1
    with pytest.raises(ValueError, match="cannot tell the channel axis.*image_size"):
        channel_axis((2, 8, 8, 8), "m")
    with pytest.raises(ValueError, match="the layers mix"):
        describe_components(build_network("swin_t", 3, device="meta"), "swin_t", ["features.0.0", "features.1"], 64)
    # C == H == W at 32 px (EfficientNet-B0's features.1: 16 channels of 16 x 16): a second size tells
    parts = describe_components(build_network("efficientnet_b0", 3, device="meta"), "efficientnet_b0", "auto", 32)
    assert parts.channel_dim == 1 and parts.widths[0] == 16


def test_preprocessing_from_the_weights_transforms():
    convnext = preprocessing_of("convnext_tiny")  # ConvNeXt_Tiny_Weights.IMAGENET1K_V1: resize 236, crop 224
    assert (convnext.image_size, convnext.resize_size) == (224, 236)
    assert convnext.mean == pytest.approx((0.485, 0.456, 0.406)) and convnext.std == pytest.approx((0.229, 0.224, 0.225))
    small = preprocessing_of("convnext_tiny", image_size=32, mean=(0.5, 0.5, 0.5))
    assert (small.image_size, small.resize_size) == (32, round(32 * 236 / 224)) and small.mean == (0.5, 0.5, 0.5)
    assert preprocessing_of("efficientnet_v2_s").image_size == 384


def _manual_zero(net, module, channels, axis):
    """Independent zero ablation: a forward hook that writes zeros into the listed channels."""

    def hook(_m, _i, out):
        out = out.clone()
        index = [slice(None)] * out.ndim
        index[axis % out.ndim] = channels
        out[tuple(index)] = 0
        return out

    return net.get_submodule(module).register_forward_hook(hook)


@pytest.mark.parametrize("name,layers", [("convnext_tiny", "auto"), ("swin_t", "auto"), ("efficientnet_b0", "auto"),
                                         ("convnext_tiny", ["features.3", "features.5"])])
def test_zero_ablation_applies_exactly_at_the_component_outputs(name, layers):
    torch.manual_seed(0)
    model = build_classifier(name, ["a", "b", "c"], layers=layers, preprocessing=preprocessing_of(name, image_size=32))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        full = model.net(x)
    masks = torch.ones(2, model.n_vertices)
    block, offset = 1, sum(model.widths[:1])
    drop = torch.tensor([0, 3, 5])
    masks[1, offset + drop] = 0  # mask 1 removes three channels of the second component module
    logits = masked_logits(model, x, masks)
    scale = float(full.abs().max())  # random EfficientNet logits are ~1e-14: tolerances relative to them
    torch.testing.assert_close(logits[0], full, rtol=1e-4, atol=1e-5 * scale)
    handle = _manual_zero(model.net, model.hook_names[block], drop, model.channel_dim)
    try:
        with torch.no_grad():
            expected = model.net(x)
    finally:
        handle.remove()
    torch.testing.assert_close(logits[1], expected, rtol=1e-4, atol=1e-5 * scale)
    assert float((expected - full).abs().max()) > 1e-3 * scale  # the ablation changed the output


def test_weights_are_checked_against_model_and_class_count(tmp_path):
    torch.manual_seed(0)
    weights = tmp_path / "m.pth"
    torch.save(tvm.get_model("efficientnet_b0", weights=None, num_classes=5).state_dict(), weights)
    parts = check_folders_model("efficientnet_b0", weights, list("abcde"), image_size=32)
    assert parts.widths == [16, 24, 40, 80, 112, 192, 320]
    with pytest.raises(ValueError, match=r"head classifier\.1\.weight has 5 outputs but the class index c\.txt lists 3"):
        check_folders_model("efficientnet_b0", weights, list("abc"), class_index="c.txt")
    with pytest.raises(ValueError, match=r"does not hold convnext_tiny weights: \d+ keys missing"):
        check_folders_model("convnext_tiny", weights, list("abcde"))
    with pytest.raises(ValueError, match="not a torchvision classification model.*efficientnet_b0"):
        check_folders_model("efficientnet_b00", weights, list("abcde"))
    state = torch.load(weights)
    state["features.0.0.weight"] = torch.zeros(32, 3, 5, 5)
    with pytest.raises(ValueError, match=r"features\.0\.0\.weight is \[32, 3, 5, 5\] in the file but \[32, 3, 3, 3\]"):
        check_state_dict(build_network("efficientnet_b0", 5, device="meta"), state, "w.pth", "efficientnet_b0", 5)
    # the weights are really loaded: the built model computes with them
    model = build_classifier("efficientnet_b0", list("abcde"), weights=weights)
    torch.testing.assert_close(model.net.state_dict()["classifier.1.weight"], state["classifier.1.weight"])
