"""A user's own vision base algorithm: additive scorers and black-box discovery functions."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from certified_circuits.core.smoothing import compute_votes
from certified_circuits.vision.scoring.plugins import ImageDiscovery, discovery_votes, is_plugin, load_plugin, plugin_name
from certified_circuits.vision.scoring.scorers import mean_activations, score_batch

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[2] / "docs" / "examples"


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_entries_are_told_apart_by_their_parameters():
    assert is_plugin("my_scorers:taylor") and not is_plugin("relevance") and plugin_name("a.b.c:taylor") == "taylor"
    taylor, median = load_plugin("my_scorers:taylor"), load_plugin("my_scorers:median_activation")
    assert (taylor.kind, taylor.name, taylor.ranking) == ("additive", "taylor", "signed")
    assert (median.kind, median.name) == ("discovery", "median_activation")
    assert load_plugin("plugin_fixtures:absolute_activation").ranking == "absolute"


@pytest.mark.parametrize("spec,message", [
    ("no_such_module_xyz:f", r"cannot import no_such_module_xyz \(ModuleNotFoundError.*PYTHONPATH"),
    ("my_scorers:nothing", "my_scorers has no function nothing"),
    ("plugin_fixtures:two_arguments", r"two_arguments\('x', 'y'\) has the wrong signature: an additive scorer is "
                                      r"f\(activations, gradients, channel_dim\)"),
    ("plugin_fixtures:bad_ranking", "ranking is 'descending'"),
    (":taylor", "write a plugin as package.module:function"),
])
def test_a_bad_plugin_is_named_with_the_fix(spec, message):
    with pytest.raises(ValueError, match=message):
        load_plugin(spec)


def test_the_additive_example_is_the_absolute_relevance(tiny_model):
    """docs/examples/my_scorers.py's Taylor score is |sum activation x gradient|: the built-in relevance
    (computed in the same pass) in absolute value, per example and component."""
    x = torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    scores, _ = score_batch(tiny_model, x, 2, [load_plugin("my_scorers:taylor")])
    assert scores["taylor"].shape == (5, tiny_model.n_vertices)
    torch.testing.assert_close(scores["taylor"], scores["relevance"].abs(), rtol=1e-6, atol=1e-7)


def test_an_additive_plugin_with_a_wrong_output_is_refused(tiny_model):
    wrong = dataclasses.replace(load_plugin("plugin_fixtures:absolute_activation"), function=lambda **k: torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"returned \(2, 3\); it must return a Tensor \[B, U\] = \[2, 28\]"):
        score_batch(tiny_model, torch.zeros(2, 3, 32, 32), 0, [wrong])


# two worker processes cost about 20 s of start-up: that case runs in make test, not make test-fast
@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_black_box_votes_equal_the_cached_votes_of_the_same_algorithm(tiny_model, workers):
    """A black box that is the activation scorer's top-K gets, through the naive path (the plugin re-run on
    every sub-dataset, in worker processes), exactly the votes the cached path counts from the per-example
    activation scores: same masks (both streams of one seed), same base algorithm."""
    images = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    k_grid = np.array([0.25, 0.5, 1.0])
    setting = {"p_del": 0.4, "n0": 10, "n": 30, "seed": 1234}
    naive = discovery_votes("plugin_fixtures:mean_activation_topk", tiny_model, images, 1, k_grid, workers=workers,
                            progress=False, **setting)
    cached = compute_votes(mean_activations(tiny_model, images).double().numpy(), tiny_model.groups().numpy(), k_grid,
                           **setting)
    for field in ("baseline", "selection_counts", "certification_counts", "groups"):
        np.testing.assert_array_equal(getattr(naive, field), getattr(cached, field), err_msg=field)
    assert naive.selection_counts.max() <= 10 and naive.certification_counts.max() <= 30
    assert naive.attrs["n_examples"] == 6 and naive.attrs["seed"] == 1234


def test_the_empty_sub_dataset_gives_the_empty_circuit_and_outputs_are_checked(tiny_model):
    images = torch.zeros(3, 3, 32, 32)
    black_box = ImageDiscovery("plugin_fixtures:wrong_shape", tiny_model, images, 0, np.array([0.5]))
    empty = black_box(np.array([], dtype=np.int64))  # the plugin is not called
    assert empty.shape == (1, tiny_model.n_vertices) and not empty.any()
    with pytest.raises(ValueError, match=r"returned bool \(2, 28\); it must return bool \[nK, U\] = \[1, 28\]"):
        black_box(np.array([0, 1]))


def test_the_cli_sends_each_kind_to_its_stage(capsys):
    from certified_circuits.cli import vision as vcli

    parser = argparse.ArgumentParser(prog="certified-circuits")
    vcli.STAGES.register(parser.add_subparsers(dest="cmd"))
    with pytest.raises(SystemExit):
        parser.parse_args(["vision-attribute", "--data", str(HERE), "--concept", "a", "--out", "x.h5",
                           "--scorer", "my_scorers:median_activation"])
    assert "is a discovery plugin, not additive: run it with vision-discover" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["vision-discover", "--data", str(HERE), "--concept", "a", "--out", "x.h5", "--k-grid", "0.5",
                           "--p-del", "0.5", "--scorer", "my_scorers:taylor"])
    assert "is an additive plugin, not discovery: run it with vision-attribute --scorer" in capsys.readouterr().err
    assert sys.modules["my_scorers"].__file__.startswith(str(EXAMPLES))
