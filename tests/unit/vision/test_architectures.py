"""The table of vision architectures is the one place to add one: CLI choices, config check and builder
all follow it."""

from __future__ import annotations

import argparse

import pytest
import torch

from certified_circuits.cli import vision as vision_cli
from certified_circuits.vision.networks import architectures
from certified_circuits.vision.networks.architectures import ARCHITECTURE_NAMES, Architecture
from certified_circuits.vision.networks.classifiers import build_paper_model


def test_cli_models_and_the_config_check_come_from_the_table():
    """--model takes world, the table's ImageNet presets and any torchvision classifier (checked by name);
    the imagenet source's config check takes the table only."""
    assert ARCHITECTURE_NAMES == ("resnet50", "resnet101", "vit_b_16")
    assert [vision_cli.model_name(m) for m in ("world", *ARCHITECTURE_NAMES, "convnext_tiny")] == [
        "world", *ARCHITECTURE_NAMES, "convnext_tiny"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"'convnext_tinny' is not a torchvision.*convnext_tiny"):
        vision_cli.model_name("convnext_tinny")
    from certified_circuits.pipeline.config import check_vision
    from certified_circuits.pipeline.config_errors import ConfigError

    with pytest.raises((ConfigError, ValueError), match="resnet18.*architectures.py"):
        check_vision({"main_scorer": "relevance", "scorers": ["relevance"], "selection_set": None, "eval_sets": ["id"],
                      "rediscovery_sets": [], "source": "imagenet",
                      "imagenet": {"model": "resnet18", "class_index": "x", "val_root": "y", "ood_roots": {}}})


def test_an_unknown_architecture_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown vision architecture 'lenet'.*resnet50"):
        build_paper_model("lenet", pretrained=False)


def test_one_entry_adds_an_architecture(monkeypatch):
    """A new table entry (here ResNet-18) builds with its vertices, without touching any other module."""
    monkeypatch.setitem(architectures.ARCHITECTURES, "resnet18",
                        Architecture("resnet18", "resnet18", "ResNet18_Weights.IMAGENET1K_V1", 960))
    model = build_paper_model("resnet18", pretrained=False)
    assert model.widths == [64, 128, 256, 512] and model.n_vertices == 960 and model.channel_dim == 1
    assert model.hook_names == ["layer1", "layer2", "layer3", "layer4"]
    with torch.no_grad():
        assert model.net(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)


def test_the_imagenet_preset_needs_the_full_class_index(tmp_path):
    """A LOC_synset_mapping.txt of fewer than 1,000 lines cannot map the ImageNet head's logits: refused by
    the config check, before any job (a job would stop on the head's size)."""
    from certified_circuits.pipeline.config import check_vision
    from certified_circuits.pipeline.config_errors import ConfigError

    index = tmp_path / "LOC_synset_mapping.txt"
    index.write_text("n01440764 tench\nn01443537 goldfish\n")
    (tmp_path / "val" / "n01440764").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"vision.imagenet: class index .* lists 2 classes, but the ImageNet models have 1,000"):
        check_vision({"main_scorer": "relevance", "scorers": ["relevance"], "selection_set": None, "eval_sets": ["id"],
                      "rediscovery_sets": [], "source": "imagenet",
                      "imagenet": {"model": "resnet50", "class_index": str(index), "val_root": str(tmp_path / "val"),
                                   "ood_roots": {}, "concept_size": 2, "n_classes": 1, "class_seed": 0}})


@pytest.mark.parametrize("name", ARCHITECTURE_NAMES)
def test_each_architectures_component_count_is_what_the_built_model_has(name):
    """The table's n_components (read by the workflow's plan check at parse time, without building the model)
    equals the vertices of the model built with automatic layers, on the meta device."""
    from certified_circuits.vision.networks.classifiers import build_network
    from certified_circuits.vision.networks.components import describe_components

    net = build_network(name, 1000, device="meta")
    assert sum(describe_components(net, name, "auto", 224).widths) == architectures.ARCHITECTURES[name].n_components
