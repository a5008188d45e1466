"""Issue 45: the ground-truth stages refuse a model that does not match its world and a task the model has no truth
for, before any work, naming the files or the option and the fix (exit status 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.vision.ground_truth import check_model_world


def _stage(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str]:
    with pytest.raises(SystemExit) as caught:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return int(caught.value.code), err


# ------------------------------------------------------------------------------ vision-ground-truth


def test_a_model_with_fewer_classes_than_its_world_is_refused() -> None:
    with pytest.raises(ValueError, match=r"m.pt has 3 classes \['a', 'b', 'c'\] but the world w/train.npz has 5 "
                                         r"classes.*does not match its world; pass the world the model was trained on"):
        check_model_world(["a", "b", "c"], ["a", "b", "c", "d", "e"], np.arange(5), "m.pt", "w/train.npz")


def test_a_model_whose_class_names_differ_from_its_world_is_refused() -> None:
    with pytest.raises(ValueError, match=r"m.pt has 2 classes \['a', 'b'\] but the world w.npz has 2 classes "
                                         r"\['b', 'a'\]"):
        check_model_world(["a", "b"], ["b", "a"], np.array([0, 1]), "m.pt", "w.npz")


def test_a_label_outside_the_models_logits_is_refused() -> None:
    with pytest.raises(ValueError, match="w.npz holds label 7, not a logit of m.pt's 2 classes"):
        check_model_world(["a", "b"], ["a", "b"], np.array([0, 7]), "m.pt", "w.npz")


def test_a_matching_model_and_world_pass() -> None:
    check_model_world(["a", "b"], np.array(["a", "b"]), np.array([0, 1, 1]), "m.pt", "w.npz")


def _world(tmp_path: Path, name: str, classes: int) -> Path:
    out = tmp_path / name
    assert main(["vision-world", "--out", str(out), "--seed", "1", "--n-classes", str(classes), "--image-size", "16",
                 "--n-train-per-class", "4", "--n-concept-per-class", "2", "--n-test-per-class", "2",
                 "--splits", "train", "concept", "id_test"]) == 0
    return out


def test_vision_ground_truth_refuses_a_3_class_model_on_a_5_class_world(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    small, large = _world(tmp_path, "w3", 3), _world(tmp_path, "w5", 5)
    model = tmp_path / "m.pt"
    assert main(["vision-train", "--world", str(small), "--out-model", str(model), "--out-metrics",
                 str(tmp_path / "t.json"), "--epochs", "1", "--batch-size", "4", "--planted-own", "1", "1", "1", "1",
                 "--planted-shared", "1", "1", "1", "0"]) == 0
    capsys.readouterr()
    code, err = _stage(capsys, "vision-ground-truth", "--checkpoint", model, "--world", large, "--out",
                       tmp_path / "gt.json")
    assert code == 2 and "has 3 classes" in err and "w5/train.npz has 5 classes" in err
    assert "pass the world the model was trained on" in err and not (tmp_path / "gt.json").exists()


# ------------------------------------------------------------------------------ language-ground-truth


@pytest.mark.parametrize("task", ["ioi", "greater_than", "anything"])
def test_language_ground_truth_refuses_a_task_it_has_no_truth_for(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                   task: str) -> None:
    examples = tmp_path / "id_test.jsonl"
    examples.write_text("{}\n")
    code, err = _stage(capsys, "language-ground-truth", "--model-path", tmp_path, "--task", task, "--examples",
                       examples, "--out", tmp_path / "gt.json")
    assert code == 2 and f"--task {task}: this stage finds and verifies the induction circuit only" in err
    assert "pass --task induction, or leave --task out" in err and not (tmp_path / "gt.json").exists()


def test_language_ground_truth_seed_is_a_seed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    examples = tmp_path / "id_test.jsonl"
    examples.write_text("{}\n")
    code, err = _stage(capsys, "language-ground-truth", "--model-path", tmp_path, "--examples", examples, "--out",
                       tmp_path / "gt.json", "--seed", "-3")
    assert code == 2 and "argument --seed: -3 is outside [0, 2**32 - 1]" in err
