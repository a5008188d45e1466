"""Issue 28, items 4 and 6: inputs that were accepted but wrong are refused before any work, naming the fix;
errors name the file and the real cause (one test per member of each class)."""

from __future__ import annotations

import argparse
import io
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import certified_circuits as cc
from certified_circuits.cli.main import _run_stage, check_inputs_not_empty, main, plain
from certified_circuits.cli.stages import InputError, check_circuit_files
from certified_circuits.core.certification import certify_votes
from certified_circuits.core.sampling import AlgorithmError, run_algorithm
from certified_circuits.core.setting import Setting
from certified_circuits.core.smoothing import compute_votes
from tests.helpers.paths import ROOT, SCHEMA

SMALL = Setting(p_del=0.5, n0=10, n=40, tau=0.6, alpha=0.2)


# ------------------------------------------------------------------------------ votes and certificates of one circuit


def _circuit(concept: str = "cat", scorer: str = "relevance", setting: Setting = SMALL, tau: float | None = None):
    rng = np.random.default_rng(0)
    votes = compute_votes(rng.normal(size=(8, 6)), np.zeros(6, dtype=np.int32), [0.5], setting.p_del, setting.n0,
                          setting.n, setting.seed, attrs={"concept": concept, "scorer": scorer})
    return votes, certify_votes(votes, tau or setting.tau, setting.alpha)


def test_votes_and_certificates_of_different_circuits_are_refused() -> None:
    votes, certificates = _circuit()
    check_circuit_files([(votes, "v.h5", certificates, "c.h5")], concept="cat")
    cases = [
        ([(votes, "v.h5", _circuit(concept="dog")[1], "dog.h5")], "dog.h5 was not certified from v.h5: concept is 'dog' "
                                                                  "in the certificates but 'cat' in the votes"),
        ([(votes, "v.h5", _circuit(scorer="taylor")[1], "t.h5")], "scorer is 'taylor' in the certificates but 'relevance'"),
        ([(votes, "v.h5", _circuit(setting=SMALL.replace(n=50))[1], "n.h5")], "n is 50 in the certificates but 40"),
        ([(votes, "v.h5", certificates, "c.h5")], "--concept 'dog' but v.h5 holds the circuits of 'cat'"),
        ([(votes, "v.h5", certificates, "c.h5"), (*_circuit(scorer="taylor", tau=0.7)[:1], "v2.h5",
                                                  _circuit(scorer="taylor", tau=0.7)[1], "c2.h5")],
         "c.h5 and c2.h5 are of different settings (tau 0.6 vs 0.7); one evaluation compares circuits of one setting"),
    ]
    for index, (pairs, message) in enumerate(cases):
        with pytest.raises(InputError) as caught:
            check_circuit_files(pairs, concept="dog" if index == 3 else "cat")
        assert message in str(caught.value)


# ------------------------------------------------------------------------------ one class


def test_a_class_index_of_one_class_is_refused(tmp_path: Path) -> None:
    from certified_circuits.vision.networks.loading import load_cached

    index = tmp_path / "classes.txt"
    index.write_text("cat\n")
    with pytest.raises(ValueError, match=rf"class index {index} lists 1 class: a classifier needs at least 2 classes"):
        load_cached("resnet18", None, tmp_path / "w.pt", index, "cpu")


def test_a_world_of_one_class_is_refused_at_parse_time() -> None:
    """Already refused by the schema (found fixed): the message names the key and the minimum."""
    import yaml
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["vision"]["world"] = {**config["vision"].get("world", {}), "n_classes": 1}
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(SCHEMA), set_default=True)
    assert "1 is less than the minimum of 2" in str(caught.value.args) and "n_classes" in str(caught.value.args)


def test_a_folders_source_of_one_class_is_refused_at_parse_time(tmp_path: Path) -> None:
    from certified_circuits.pipeline.config import check_folders
    from certified_circuits.pipeline.config_errors import ConfigError

    (tmp_path / "images" / "cat").mkdir(parents=True)
    (tmp_path / "classes.txt").write_text("cat\n")
    vision = {"source": "folders", "eval_sets": ["id"],
              "folders": {"class_index": str(tmp_path / "classes.txt"), "root": str(tmp_path / "images"),
                          "ood_roots": {}, "model": "resnet18", "weights": None, "layers": "auto"}}
    with pytest.raises(ConfigError, match=r"config key vision.folders.class_index = .* is invalid: it lists 1 class; a "
                                          r"classifier and its data sets need at least 2 classes"):
        check_folders(vision)
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    with pytest.raises(ConfigError, match=r"config key vision.folders.root = .* is invalid: it holds 1 class folder "
                                          r"\(\['cat'\]\); a classifier and its data sets need at least 2 classes"):
        check_folders(vision)


# ------------------------------------------------------------------------------ errors that name the cause


def test_a_whole_pickled_model_is_named_as_such(tmp_path: Path) -> None:
    import torch
    import torchvision

    from certified_circuits.vision.networks.loading import load_cached

    weights, index = tmp_path / "model.pt", tmp_path / "classes.txt"
    torch.save(torchvision.models.resnet18(num_classes=3), weights)
    index.write_text("a\nb\nc\n")
    with pytest.raises(ValueError) as caught:
        load_cached("resnet18", None, weights, index, "cpu")
    assert str(caught.value) == (f"{weights}: holds a pickled Python object of class torchvision.models.resnet.ResNet "
                                 f"(a whole model saved with torch.save(model)), not a state dict; the loader reads "
                                 f"weights only: save them with torch.save(model.state_dict(), PATH) and pass that file")
    assert "truncated" not in str(caught.value) and caught.value.__cause__ is not None  # torch's error kept
    from certified_circuits.vision.networks.checkpoints import load_weights

    with pytest.raises(ValueError) as direct:  # the one loader every path goes through says the same
        load_weights(weights)
    assert str(direct.value) == str(caught.value)


def test_control_sequences_are_removed_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture) -> None:
    assert plain("\x1b[1mdo this\x1b[0m only", io.StringIO()) == "do this only"
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    assert plain("\x1b[1mbold\x1b[0m", tty) == "\x1b[1mbold\x1b[0m"

    def fails(args: argparse.Namespace) -> int:
        raise ValueError("weights: \x1b[1mdo those steps only if you trust the source\x1b[0m")

    parser = argparse.ArgumentParser(prog="certified-circuits")
    with pytest.raises(SystemExit) as stopped:
        _run_stage(parser, argparse.Namespace(func=fails, verbose=False, command="stage"))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "error: weights: do those steps only if you trust the source" in err and "\x1b" not in err


def test_an_empty_input_table_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "tables.csv"
    empty.write_text("\n  \n")
    with pytest.raises(InputError, match=rf"{empty} \(--tables\) is empty: it holds no table or data; rerun the stage"):
        check_inputs_not_empty(argparse.Namespace(tables=[tmp_path / "x.py", empty], out=empty))
    check_inputs_not_empty(argparse.Namespace(out=empty))  # an output is not an input
    votes = tmp_path / "votes.h5"
    votes.write_bytes(b"")
    with pytest.raises(SystemExit):
        main(["certify", "--votes", str(votes), "--tau", "0.9", "--out", str(tmp_path / "c.h5")])
    assert f"certified-circuits certify: error: {votes} (--votes) is empty" in capsys.readouterr().err


def test_an_output_path_that_is_a_folder_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    votes, _ = _circuit()
    from certified_circuits.storage.store import write_votes

    write_votes(tmp_path / "votes.h5", votes)
    (tmp_path / "c.h5").mkdir()
    with pytest.raises(SystemExit):
        main(["certify", "--votes", str(tmp_path / "votes.h5"), "--tau", "0.6", "--out", str(tmp_path / "c.h5")])
    err = capsys.readouterr().err
    assert f"argument --out: {tmp_path / 'c.h5'}: is an existing folder, not a file name" in err and "Errno" not in err
    with pytest.raises(SystemExit):
        main(["certify", "--votes", str(tmp_path), "--tau", "0.6", "--out", str(tmp_path / "d.h5")])
    assert f"argument --votes: {tmp_path}: is a folder, not a file; give the file inside it" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the public API


def test_python_lists_are_accepted_as_scores_groups_and_k_grid() -> None:
    scores = np.random.default_rng(1).normal(size=(12, 6))
    setting = Setting(p_del=0.5, n0=20, n=100, tau=0.6, alpha=0.2)
    with pytest.warns(Warning):
        from_lists = cc.certify_scores(scores=scores.tolist(), groups=[0, 0, 0, 1, 1, 1], k_grid=[0.5], setting=setting)
        from_arrays = cc.certify_scores(scores=scores, groups=np.array([0, 0, 0, 1, 1, 1]), k_grid=np.array([0.5]),
                                        setting=setting)
    assert np.array_equal(from_lists.decision, from_arrays.decision)
    with pytest.raises(ValueError, match=r"scores must be a 2-D array of numbers \[n_examples, n_components\] \(a numpy "
                                         r"array, a torch tensor, or nested lists of equal lengths\)"):
        cc.certify_scores(scores=[[1.0, 2.0], [3.0]], groups=[0, 0], k_grid=[0.5], setting=setting)


def _in_first_half(kept: np.ndarray) -> np.ndarray:
    return np.isin(np.arange(4), kept)


def test_an_algorithm_that_cannot_be_pickled_for_workers_says_what_to_do() -> None:
    setting = Setting(p_del=0.5, n0=5, n=20, tau=0.6, alpha=0.3)
    with pytest.raises(ValueError) as caught, pytest.warns(Warning):
        cc.certify_algorithm(lambda kept: np.isin(np.arange(4), kept), 4, setting, workers=2, progress=False)
    message = str(caught.value)
    assert "workers=2 runs the algorithm " in message and "<lambda> in other processes, but it cannot be pickled" in message
    assert "define it as a module-level function" in message and "or pass workers=1" in message
    assert isinstance(caught.value.__cause__, (pickle.PicklingError, AttributeError, TypeError))


def test_an_algorithm_that_raises_is_named_with_its_sub_dataset() -> None:
    def algorithm(kept: np.ndarray) -> np.ndarray:
        if len(kept) < 4:
            raise KeyError("no such layer")
        return np.ones(4, dtype=bool)

    setting = Setting(p_del=0.5, n0=5, n=20, tau=0.6, alpha=0.3)
    with pytest.raises(AlgorithmError) as caught, pytest.warns(Warning):
        cc.certify_algorithm(algorithm, 4, setting, progress=False)
    assert f"algorithm {__name__}.test_an_algorithm_that_raises_is_named_with_its_sub_dataset.<locals>.algorithm " \
           f"failed on sub-dataset " in str(caught.value)
    assert "of selection (n0) (" in str(caught.value) and "of 4 examples kept): KeyError: 'no such layer'" in str(caught.value)
    assert isinstance(caught.value.__cause__, KeyError) and "\n" not in str(caught.value)


@pytest.fixture()
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_lab_plugins.py").write_text(
        "def broken_discovery(model, images, label, k_grid):\n    raise RuntimeError('CUDA out of memory')\n\n"
        "def broken_scorer(activations, gradients, channel_dim):\n    raise ZeroDivisionError('division by zero')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_lab_plugins", None)
    return "my_lab_plugins"


def test_a_discovery_plugin_that_raises_names_plugin_concept_and_sub_dataset(plugin_module: str) -> None:
    from certified_circuits.vision.scoring.plugins import ImageDiscovery

    algorithm = ImageDiscovery(f"{plugin_module}:broken_discovery", SimpleNamespace(n_vertices=4), np.zeros((6, 1)),
                               0, np.array([0.5]), concept="n01440764")
    with pytest.raises(AlgorithmError) as caught:
        run_algorithm(algorithm, np.array([0, 2, 5]), "sub-dataset 17 of certification (n)", 6)
    assert str(caught.value) == (f"plug-in {plugin_module}:broken_discovery failed on concept 'n01440764', sub-dataset "
                                 f"17 of certification (n) (3 of 6 examples kept): RuntimeError: CUDA out of memory")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_an_additive_plugin_that_raises_names_plugin_and_batch(plugin_module: str) -> None:
    import torch

    from certified_circuits.vision.scoring.plugins import additive_scores, load_plugin

    plugin = load_plugin(f"{plugin_module}:broken_scorer")
    with pytest.raises(AlgorithmError) as caught:
        additive_scores(plugin, [torch.zeros(2, 3, 4, 4)], [torch.zeros(2, 3, 4, 4)], 1, 3)
    assert str(caught.value) == (f"plug-in {plugin_module}:broken_scorer failed on a batch of 2 images: "
                                 f"ZeroDivisionError: division by zero")
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
