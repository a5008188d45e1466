"""Layer conductance, the opt-in built-in vision scorer (vision/scoring/scorers.py).

Parity: every component layer of a random-weight torchvision ResNet-18 (5 classes, 32 x 32), of the world ResNet and
of a tiny ViT equals Captum 0.9.0's ``LayerConductance(..., method="riemann_trapezoid")`` with the same baseline and
steps, summed over the channel's positions (space; the ViT's tokens), to 1e-5 absolute (measured at most 2.3e-7 on the
ResNets, scores up to 0.43, and 8.3e-7 on the ViT, scores up to 5.4: the float32 rounding of the scores). Then what
the definition implies and can fail: completeness as m grows, m = 1, a batch against one image at a time, and the
attribution file that ``vision-attribute --conductance`` writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from captum.attr import LayerConductance
from torchvision.models import resnet18
from torchvision.models.vision_transformer import VisionTransformer

from certified_circuits.vision.networks.models import VisionModel, resnet_model, world_model_from_net
from certified_circuits.vision.networks.world_resnet import world_resnet
from certified_circuits.vision.scoring.scorers import (
    Conductance,
    conductance_points,
    layer_conductance,
    score_batch,
)

ATOL = 1e-5  # absolute, on scores of order 0.1-1


def _randomise_batchnorm(net: torch.nn.Module) -> None:
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)


def resnet18_model() -> VisionModel:
    torch.manual_seed(0)
    net = resnet18(num_classes=5).eval()
    _randomise_batchnorm(net)
    return resnet_model(net, "resnet18", list("abcde"), 32, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def world_model() -> VisionModel:
    torch.manual_seed(0)
    net = world_resnet(4, widths=(4, 8, 8, 8)).eval()
    _randomise_batchnorm(net)
    return world_model_from_net(net, ["a", "b", "c", "d"], 32)


def vit_model() -> VisionModel:
    """A tiny torchvision ViT whose components are the MLP outputs ``[B, T, D]`` (channel_dim -1), as ViT-B/16's."""
    torch.manual_seed(0)
    net = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
                            num_classes=3).eval()
    torch.nn.init.normal_(net.heads.head.weight)  # torchvision zeroes the head: every gradient would be 0
    hooks = [f"encoder.layers.encoder_layer_{i}.mlp.3" for i in range(2)]
    return VisionModel(net=net, arch="vit_tiny", hook_names=hooks, block_names=[f"block{i}" for i in range(2)],
                       widths=[16, 16], channel_dim=-1, expand_at=("encoder.layers.encoder_layer_0", "input"),
                       class_names=["a", "b", "c"], image_size=32, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))


MODELS = {"resnet18": resnet18_model, "world": world_model, "vit": vit_model}


def captum_scores(model: VisionModel, x: torch.Tensor, target: int, baseline: torch.Tensor, steps: int) -> list:
    """Captum's LayerConductance of every component layer, summed over the channel's positions: [B, C_l] each."""
    out = []
    for name in model.hook_names:
        attribution = LayerConductance(model.net, model.net.get_submodule(name)).attribute(
            x, baselines=baseline, target=target, n_steps=steps, method="riemann_trapezoid")
        cd = model.channel_dim % attribution.ndim
        out.append(attribution.sum(dim=tuple(d for d in range(1, attribution.ndim) if d != cd)).detach())
    return out


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("baseline", ["zeros", "image"])
def test_conductance_equals_captums_layer_conductance_on_every_layer(family: str, baseline: str) -> None:
    model = MODELS[family]()
    torch.manual_seed(1)
    x = torch.randn(2, 3, 32, 32)
    image = torch.randn(3, 32, 32) * 0.5 if baseline == "image" else None
    steps, target = 8, 2
    spec = Conductance(steps) if image is None else Conductance(steps, image, "mean")
    ours = torch.split(score_batch(model, x, target, conductance=spec)[0]["conductance"], model.widths, dim=1)
    reference = captum_scores(model, x, target, torch.zeros_like(x) if image is None else image.expand_as(x), steps)
    for name, mine, theirs in zip(model.hook_names, ours, reference):
        assert mine.shape == theirs.shape
        assert theirs.abs().max() > 1e-3, f"{name}: a vacuous comparison"
        torch.testing.assert_close(mine, theirs, rtol=0, atol=ATOL, msg=lambda m, n=name: f"{family} {n}: {m}")


def test_the_path_points_are_captums_riemann_trapezoid_alphas() -> None:
    from captum.attr._utils.approximation_methods import approximation_parameters

    for steps in (1, 2, 16, 50):
        assert conductance_points(steps) == approximation_parameters("riemann_trapezoid")[1](steps + 1)
        assert conductance_points(steps)[0] == 0.0 and conductance_points(steps)[-1] == 1.0


def _in_double(model: VisionModel) -> VisionModel:
    model.net.double()
    return model


def _conductance(model: VisionModel, x: torch.Tensor, target: int, spec: Conductance) -> list[torch.Tensor]:
    from certified_circuits.vision.scoring.scorers import _activation_gradients_only  # noqa: PLC2701 (the test's)

    with _activation_gradients_only(model):
        return layer_conductance(model, x, target, spec)


def test_completeness_every_layer_sums_to_the_logit_difference_as_m_grows() -> None:
    """sum_j cond_j = F_c(x) - F_c(x') up to the path's O(1/m) error: in float64 on the world ResNet, relative to
    max |F_c(x) - F_c(x')| over the batch, at most 5% at m = 256 (measured 1.7%) and at most a third of the error at
    m = 16 (measured 7-12x smaller) for layer1..layer3; exact (1e-10) at every m for layer4, which the logit reads
    linearly (average pool and fc)."""
    model = _in_double(world_model())
    torch.manual_seed(2)
    x = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    target = 1
    with torch.no_grad():
        difference = model.net(x)[:, target] - model.net(torch.zeros_like(x))[:, target]
    scale = difference.abs().max()
    errors = {}
    for steps in (1, 16, 256):
        layers = _conductance(model, x, target, Conductance(steps))
        errors[steps] = [((c.sum(1) - difference).abs().max() / scale).item() for c in layers]
        assert errors[steps][3] < 1e-10, (steps, errors[steps])
    for layer in range(3):
        assert errors[256][layer] <= 0.05, errors
        assert errors[256][layer] <= errors[16][layer] / 3, errors
        assert errors[1][layer] > 0.1, "m = 1 should be far from complete on a ReLU network: the test can fail"


def test_m_1_is_the_activation_difference_times_the_gradient_at_the_baseline() -> None:
    """At m = 1 the path has one interval: cond_j = sum over positions (a_j(x) - a_j(x')) dF/da_j(x'), computed here
    with the model's own forward hooks (not the scorer's)."""
    model = world_model()
    torch.manual_seed(3)
    x, base = torch.randn(3, 3, 32, 32), torch.randn(3, 32, 32) * 0.3
    target = 2

    def block_outputs(images: torch.Tensor, grad: bool) -> tuple[list, list]:
        outs: list[torch.Tensor] = []
        handles = [model.net.get_submodule(n).register_forward_hook(lambda _m, _i, o: outs.append(o))
                   for n in model.hook_names]
        try:
            with torch.set_grad_enabled(grad):
                logit = model.net(images.requires_grad_(grad))[:, target].sum()
            grads = list(torch.autograd.grad(logit, outs)) if grad else [None] * len(outs)
        finally:
            for h in handles:
                h.remove()
        return [o.detach() for o in outs], grads

    at_x, _ = block_outputs(x.clone(), False)
    at_base, grads = block_outputs(base.expand_as(x).clone(), True)
    expected = torch.cat([((a - a0) * g).sum(dim=(2, 3)) for a, a0, g in zip(at_x, at_base, grads)], 1)
    got = score_batch(model, x, target, conductance=Conductance(1, base, "mean"))[0]["conductance"]
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    # and not the gradient at the image (the rule Captum's trapezoid points do not take)
    _, grads_at_x = block_outputs(x.clone(), True)
    other = torch.cat([((a - a0) * g).sum(dim=(2, 3)) for a, a0, g in zip(at_x, at_base, grads_at_x)], 1)
    assert (other - got).abs().max() > 1e-3


def test_a_batch_gives_the_rows_of_one_image_at_a_time() -> None:
    model = world_model()
    torch.manual_seed(4)
    x = torch.randn(5, 3, 32, 32)
    spec = Conductance(4)
    batch = score_batch(model, x, 0, conductance=spec)[0]["conductance"]
    single = torch.cat([score_batch(model, x[i : i + 1], 0, conductance=spec)[0]["conductance"] for i in range(5)])
    assert batch.shape == (5, model.n_vertices) and batch.dtype == torch.float32
    torch.testing.assert_close(batch, single, rtol=1e-5, atol=1e-6)


def test_without_conductance_score_batch_is_unchanged() -> None:
    model = world_model()
    x = torch.randn(2, 3, 32, 32)
    plain, logits = score_batch(model, x, 1)
    both, logits2 = score_batch(model, x, 1, conductance=Conductance(2))
    assert set(plain) == {"relevance", "activation", "rank"} and set(both) == set(plain) | {"conductance"}
    for key in plain:
        torch.testing.assert_close(plain[key], both[key], rtol=0, atol=0)
    torch.testing.assert_close(logits, logits2, rtol=0, atol=0)
    assert all(p.requires_grad for p in model.net.parameters())  # restored


def test_conductance_refuses_a_bad_spec() -> None:
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        Conductance(0)
    with pytest.raises(ValueError, match=r"one of \['zeros', 'mean'\]"):
        Conductance(4, torch.zeros(3, 2, 2), "black")
    with pytest.raises(ValueError, match="needs its image"):
        Conductance(4, None, "mean")
    with pytest.raises(ValueError, match="baseline is"):
        score_batch(world_model(), torch.zeros(1, 3, 32, 32), 0, conductance=Conductance(2, torch.zeros(3, 8, 8), "mean"))


# ------------------------------------------------------------------------------ vision-attribute


def _run(*argv: object) -> int:
    from certified_circuits.cli import vision as vcli

    p = argparse.ArgumentParser(prog="certified-circuits")
    vcli.STAGES.register(p.add_subparsers(dest="cmd"))
    args = p.parse_args([str(a) for a in argv])
    return args.func(args)


def _world_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A saved random world model and two tiny world splits (concept: 6 images, 3 of class b; train: 12)."""
    from certified_circuits.vision.networks.checkpoints import save_world_model

    model = world_model()
    checkpoint = save_world_model(tmp_path / "m.pt", model.net, model.class_names, (4, 8, 8, 8), (1, 1, 1, 1), 32, {})
    rng = np.random.default_rng(0)
    splits = []
    for name, n in (("concept", 6), ("train", 12)):
        path = tmp_path / f"{name}.npz"
        np.savez(path, images=rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                 labels=np.arange(n) % 2 + 1, ids=np.array([f"{name}/{i:06d}" for i in range(n)]),
                 class_names=np.array(model.class_names))
        splits.append(path)
    return checkpoint, splits[0], splits[1]


def test_vision_attribute_writes_scores_conductance_with_its_ranking(tmp_path: Path) -> None:
    from certified_circuits.storage.store import read_attributions
    from certified_circuits.vision.data.image_sets import open_set
    from certified_circuits.vision.networks.checkpoints import load_world_model
    from certified_circuits.vision.scoring.attribution import class_indices, conductance_baseline

    checkpoint, concept, train = _world_files(tmp_path)
    common = ["vision-attribute", "--model", "world", "--checkpoint", checkpoint, "--data", concept, "--concept", "b",
              "--batch-size", 2]
    assert _run(*common, "--out", tmp_path / "plain.h5") == 0
    assert _run(*common, "--out", tmp_path / "zeros.h5", "--conductance", "zeros", "--conductance-steps", 4,
                "--also", "train", train, tmp_path / "zeros_train.h5") == 0
    assert _run(*common, "--out", tmp_path / "mean.h5", "--conductance", "mean", "--conductance-steps", 3,
                "--conductance-reference", train, "--conductance-reference-size", 5, "--conductance-seed", 7) == 0

    plain = read_attributions(tmp_path / "plain.h5")
    assert set(plain.scores) == {"relevance", "activation", "rank"}  # nothing asked, nothing added
    assert "conductance_steps" not in plain.attrs
    model = load_world_model(checkpoint)
    images = open_set(concept).load(class_indices(open_set(concept), 1), model)
    mean_image = conductance_baseline(model, open_set(train), 5, 7)
    for name, spec in (("zeros", Conductance(4)), ("mean", Conductance(3, mean_image, "mean"))):
        att = read_attributions(tmp_path / f"{name}.h5")
        assert set(att.scores) == {"relevance", "activation", "rank", "conductance"}
        assert att.scores["conductance"].shape == (3, model.n_vertices)
        assert not att.absolute("conductance")
        with h5py.File(tmp_path / f"{name}.h5") as f:
            assert f["scores/conductance"].attrs["ranking"] == "signed"
            assert f["scores/conductance"].dtype == np.float32
        assert att.attrs["conductance_baseline"] == name and att.attrs["conductance_steps"] == spec.steps
        assert att.attrs["conductance_method"] == "riemann_trapezoid"
        expected = score_batch(model, images, 1, conductance=spec)[0]["conductance"].numpy()
        np.testing.assert_allclose(att.scores["conductance"], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(att.scores["relevance"], plain.scores["relevance"], rtol=0, atol=0)
    assert "conductance" in read_attributions(tmp_path / "zeros_train.h5").scores  # every --also split too
    # the mean baseline is the mean image of the sampled reference images (5 of 12, seed 7)
    pick = np.sort(np.random.default_rng(7).choice(12, size=5, replace=False))
    torch.testing.assert_close(mean_image, open_set(train).load(pick, model).mean(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("extra", "message"), [
    (["--conductance-steps", "4"], "--conductance-steps without --conductance"),
    (["--conductance", "mean"], "--conductance mean needs --conductance-reference"),
    (["--conductance", "zeros", "--conductance-reference", "TRAIN"], "read by --conductance mean only"),
])
def test_vision_attribute_refuses_conductance_options_that_would_be_ignored(tmp_path: Path, extra, message) -> None:
    from certified_circuits.cli.stages import InputError

    checkpoint, concept, train = _world_files(tmp_path)
    extra = [train if e == "TRAIN" else e for e in extra]
    with pytest.raises(InputError, match=message):
        _run("vision-attribute", "--model", "world", "--checkpoint", checkpoint, "--data", concept, "--concept", "b",
             "--out", tmp_path / "x.h5", *extra)
    assert not (tmp_path / "x.h5").exists()


def test_vision_attribute_refuses_an_unknown_baseline(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        _run("vision-attribute", "--data", tmp_path, "--concept", "b", "--out", tmp_path / "x.h5",
             "--conductance", "black")
    err = capsys.readouterr().err
    assert "--conductance: invalid choice: 'black'" in err and "zeros" in err and "mean" in err


# ------------------------------------------------------------------------------ config and workflow


ROOT = Path(__file__).resolve().parents[3]


def test_the_schema_offers_conductance_as_the_optional_built_in() -> None:
    import yaml

    from certified_circuits.vision.scoring.plugins import CONDUCTANCE_BASELINES, CONDUCTANCE_STEPS, OPTIONAL_SCORERS

    vision = yaml.safe_load((ROOT / "config.schema.yaml").read_text())["properties"]["vision"]["properties"]
    consts = [option["const"] for option in vision["scorers"]["items"]["anyOf"] if "const" in option]
    assert consts == list(OPTIONAL_SCORERS) and "conductance" not in vision["scorers"]["default"]
    keys = vision["conductance"]["properties"]
    assert keys["baseline"]["enum"] == list(CONDUCTANCE_BASELINES) and keys["baseline"]["default"] == "zeros"
    assert keys["steps"]["default"] == CONDUCTANCE_STEPS


def _config(**vision: object) -> dict:
    import yaml
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["vision"].update(vision)
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


def test_the_workflow_passes_conductance_only_when_it_is_a_scorer() -> None:
    from certified_circuits.pipeline.layout import Layout
    from certified_circuits.pipeline.plans.vision import vision_attribute_inputs, vision_attribute_invocation

    paths = Layout("R")
    default = _config()
    assert "conductance" not in vision_attribute_invocation(default, paths, "circle")
    assert not any("train.npz" in p for p in vision_attribute_inputs(default, paths))
    zeros = _config(scorers=["relevance", "conductance"], conductance={"steps": 8})
    assert "--conductance zeros --conductance-steps 8 " in vision_attribute_invocation(zeros, paths, "circle")
    assert "--conductance-reference" not in vision_attribute_invocation(zeros, paths, "circle")
    mean = _config(scorers=["relevance", "conductance"], conductance={"baseline": "mean"}, mean_reference_size=300)
    seed = mean["vision"]["certification"].get("seed", 0)
    assert (f"--conductance mean --conductance-steps 16 --conductance-reference R/vision/world/train.npz "
            f"--conductance-reference-size 300 --conductance-seed {seed}") in vision_attribute_invocation(mean, paths, "c")
    assert "R/vision/world/train.npz" in vision_attribute_inputs(mean, paths)


def test_the_config_check_names_the_key_and_the_allowed_values() -> None:
    from certified_circuits.pipeline.config import ConfigError, check_conductance
    from certified_circuits.pipeline.config_files import condense_schema_error
    from snakemake.exceptions import WorkflowError

    try:
        _config(scorers=["relevance", "conductance"], conductance={"baseline": "black"})
    except WorkflowError as error:
        message = condense_schema_error(str(error))
    else:
        raise AssertionError("the schema accepted baseline: black")
    assert "'black' is not one of ['zeros', 'mean']" in message and "vision.conductance.baseline" in message
    vision = {"scorers": ["relevance", "conductance"], "main_scorer": "relevance", "source": "embedded",
              "conductance": {"baseline": "black"}}
    with pytest.raises(ConfigError, match=r"vision.conductance.baseline = 'black' is invalid: use one of zeros, mean"):
        check_conductance(vision)
    with pytest.raises(ConfigError, match=r"vision.conductance.baseline = 'mean' .*embedded world's train split"):
        check_conductance({**vision, "source": "folders", "conductance": {"baseline": "mean"}})
    with pytest.raises(ConfigError, match=r"vision.main_scorer = 'conductance' .*radius_sweep.enabled: false"):
        check_conductance({**vision, "conductance": {}, "main_scorer": "conductance", "radius_sweep": {"enabled": True}})
    check_conductance({**vision, "conductance": {}, "main_scorer": "conductance"})  # accepted
    check_conductance({**vision, "scorers": ["relevance"], "source": "folders", "conductance": {"baseline": "mean"}})
