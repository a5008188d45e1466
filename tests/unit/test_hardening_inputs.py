"""Issue 28, items 4 and 6: inputs that were accepted but wrong are refused before any work, naming the fix;
errors name the file and the real cause (one test per member of each class)."""

from __future__ import annotations

import argparse
import io
import logging
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
from certified_circuits.core.setting import Setting, SettingTypeError
from certified_circuits.core.smoothing import compute_votes
from certified_circuits.language.task_files import TaskFileError, assign_splits, load_task_file, read_task_file

SMALL = Setting(p_del=0.5, n0=10, n=40, tau=0.6, alpha=0.2)


# ------------------------------------------------------------------------------ Setting field types


@pytest.mark.parametrize("field, value, message", [
    ("tau", "0.9", "tau='0.9' is invalid: expected a number (int, float or numpy number), got str; write tau=0.9"),
    ("p_del", "0.5", "p_del='0.5' is invalid: expected a number"),
    ("n", "100", "n='100' is invalid: expected an integer (int or numpy integer), got str; write n=100"),
    ("n", True, "n=True is invalid: expected an integer (int or numpy integer), got bool"),
    ("seed", False, "seed=False is invalid"),
    ("alpha", True, "alpha=True is invalid: expected a number"),
    ("n0", 10.0, "n0=10.0 is invalid: expected an integer"),
    ("correction", 1, "correction=1 is invalid: expected a string"),
])
def test_setting_fields_of_the_wrong_type_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(SettingTypeError) as caught:
        Setting(**{field: value})
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


def test_numpy_numbers_stay_accepted_as_plain_python_numbers() -> None:
    setting = Setting(p_del=np.float64(0.6), n0=np.int32(100), n=np.int64(1000), seed=np.uint8(3), tau=np.float32(0.75))
    assert setting == Setting(p_del=0.6, n0=100, n=1000, seed=3, tau=float(np.float32(0.75)))
    assert type(setting.n) is int and type(setting.p_del) is float and setting.tag.startswith("p0.6_n0100_n1000_s3/")


# ------------------------------------------------------------------------------ task files


HEADER = "clean,corrupted,answer,distractor"


def _rows(n: int) -> list[str]:
    return [f"When A{i} and B{i} went out B{i} gave it to,When A{i} and B{i} went out C{i} gave it to, A{i}, B{i}"
            for i in range(n)]


def test_duplicate_rows_are_dropped_with_a_warning_and_no_prompt_is_in_two_splits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = _rows(12)
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER, *rows, rows[0], rows[3], rows[0]]) + "\n")  # lines 14, 15, 16 repeat 2, 5, 2
    with caplog.at_level(logging.WARNING):
        read = read_task_file(path, "t")
    assert len(read) == 12
    assert f"task file {path}: dropped 3 duplicate row(s), so no prompt is in two splits: line 14 (repeats 2), " \
           f"15 (repeats 5), 16 (repeats 2)" in caplog.text
    for seed in range(30):
        splits = load_task_file(path, "t", seed=seed)
        where: dict[str, str] = {}
        for split, examples in splits.items():
            for example in examples:
                assert where.setdefault(example.clean, split) == split, (seed, example.clean)


def test_a_prompt_named_in_two_splits_is_refused(tmp_path: Path) -> None:
    rows = _rows(4)
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER + ",split", *(f"{r},{s}" for r, s in zip(rows, ("train", "validation", "id_test",
                                                                                      "train"))), f"{rows[0]},id_test"]))
    with pytest.raises(TaskFileError, match=rf"{path}:6: this row repeats row 2 but names split id_test where row 2 "
                                            r"names train: one prompt in two splits leaks"):
        read_task_file(path, "t")
    # one clean prompt with another corruption is a valid row, but not in another split than its first row
    clean, corrupted, answer, distractor = rows[1].split(",")
    other = f"{clean},{corrupted} again,{answer},{distractor}"
    path.write_text("\n".join([HEADER + ",split", *(f"{r},{s}" for r, s in zip(rows, ("train", "validation", "id_test",
                                                                                      "train"))), f"{other},id_test"]))
    with pytest.raises(TaskFileError, match=r"the clean prompt .* is in split validation \(row 3\) and id_test \(row 6\)"):
        load_task_file(path, "t", seed=0)


def test_rows_sharing_a_clean_prompt_stay_in_one_split_of_the_seeded_split(tmp_path: Path) -> None:
    """The unit of the seeded split is a clean prompt: 10 prompts, two of them with a second corruption, give
    splits of 6/2/2 prompts (round(0.6 m), round(0.2 m) of m = 10), whatever the seed; with distinct prompts the
    split is the 60/20/20 split of the rows."""
    path = tmp_path / "task.csv"
    rows = _rows(10)
    extra = [r.replace(" went out C", " went home C") for r in rows[2:4]]  # rows 2 and 3 again, another corruption
    path.write_text("\n".join([HEADER, *rows, *extra]))
    read = read_task_file(path, "t")
    assert len(read) == 12
    for seed in range(30):
        splits = assign_splits(read, "t", seed, path=path)
        prompts = {split: {e.clean for e in examples} for split, examples in splits.items()}
        assert [len(prompts[s]) for s in ("train", "validation", "id_test")] == [6, 2, 2]
        assert sum(len(v) for v in splits.values()) == 12
        for a in read[2:4]:
            assert sum(a.clean in v for v in prompts.values()) == 1
    distinct = tmp_path / "distinct.csv"
    distinct.write_text("\n".join([HEADER, *rows]))
    splits = load_task_file(distinct, "t", seed=3)
    assert [len(splits[s]) for s in ("train", "validation", "id_test")] == [6, 2, 2]


def test_rows_given_directly_keep_a_copied_prompt_in_one_split(tmp_path: Path) -> None:
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER, *_rows(6)]))
    rows = read_task_file(path, "t")
    copied = rows + [type(rows[0])(**{**rows[0].__dict__, "row": 99, "id": "copy"})]
    for seed in range(20):  # before, some seed split the copy from its original
        splits = assign_splits(copied, "t", seed, path=path)
        assert sum(rows[0].clean in {e.clean for e in v} for v in splits.values()) == 1


def test_a_task_file_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=rf"task file {tmp_path} \(task 't'\) is a folder, not a file: give the "
                                                r"\.csv or \.jsonl file inside it"):
        read_task_file(tmp_path, "t")


def test_a_very_long_csv_field_is_valid_csv(tmp_path: Path) -> None:
    long_prompt = "word " * 40_000  # 200,000 characters: more than csv's default field limit (131,072)
    path = tmp_path / "task.csv"
    path.write_text(HEADER + "\n" + "\n".join(f'"{long_prompt}{i}","{long_prompt}x{i}", a, b' for i in range(4)))
    assert len(read_task_file(path, "t")[0].clean) == len(long_prompt) + 1


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

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["vision"]["world"] = {**config["vision"].get("world", {}), "n_classes": 1}
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(root / "config.schema.yaml"), set_default=True)
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
