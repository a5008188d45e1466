"""Issue 61, classes 1 and 5: every number of ``vision-world`` and ``vision-compile`` is checked where it enters
(argparse types, WorldConfig.validate, CompiledSpec), and world.json is read by one strict reader beside its writer.
Each refusal is exit 2 and one line naming the option (or the file) and the range, with no traceback and nothing
written; the valid inputs at the edges of each range are still accepted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.cli.main import main
from certified_circuits.vision.data import marks
from certified_circuits.vision.data.world import (
    WORLD_FILE,
    WorldConfig,
    build_world,
    check_world_memory,
    read_world_config,
    render,
    render_chunk,
    sample_scenes,
)
from certified_circuits.vision.networks import compiled
from certified_circuits.vision.networks.compiled import CompiledSpec

#: a small marked world: 3 classes, 16 px, 2 attributes x 4 values
MARKED = dict(seed=5, n_classes=3, image_size=16, cue_attributes=2, cue_values=4, n_train_per_class=40,
              n_concept_per_class=5, n_test_per_class=4)


def _refused(capsys, argv: list[str], *words: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1, err
    for word in words:
        assert word in line[0], (word, line[0])
    return line[0]


# ---------------------------------------------------------------------------------------------- vision-world

WORLD_BAD = [
    (["--n-train-per-class", "0"], "argument --n-train-per-class: must be an integer >= 1"),
    (["--n-concept-per-class", "0"], "argument --n-concept-per-class: must be an integer in 1..5000"),
    (["--n-concept-per-class", "5001"], "argument --n-concept-per-class: must be an integer in 1..5000"),
    (["--n-test-per-class", "-3"], "argument --n-test-per-class: must be an integer >= 1"),
    (["--n-ood-per-class", "0"], "argument --n-ood-per-class"),
    (["--n-pool-per-class", "0"], "argument --n-pool-per-class"),
    (["--n-anomaly-pool", "0"], "argument --n-anomaly-pool"),
    (["--n-train-per-class", "2.5"], "argument --n-train-per-class: '2.5' is not an integer"),
    (["--image-size", "8"], "argument --image-size: must be an integer in 16..1024"),
    (["--image-size", "2000"], "argument --image-size: must be an integer in 16..1024"),
    (["--n-classes", "0"], "argument --n-classes: must be an integer in 2..60"),
    (["--n-classes", "1", "--cue-attributes", "2"], "argument --n-classes", "--cue-attributes", "another class"),
    (["--n-classes", "13"], "--n-classes must be a multiple of --n-fills in 2..10"),
    (["--n-classes", "7", "--n-fills", "3"], "--n-classes must be a multiple of --n-fills (3) in 3..30"),
    (["--n-fills", "7"], "argument --n-fills: must be an integer in 0..6"),
    (["--habitat-rate", "nan"], "argument --habitat-rate: must be a number in [0, 1]"),
    (["--habitat-rate", "1.5"], "argument --habitat-rate: must be a number in [0, 1]"),
    (["--texture-contrast", "inf"], "argument --texture-contrast: must be a number in [0, 0.5]"),
    (["--habitat-tint", "-0.1"], "argument --habitat-tint: must be a number in [0, 0.5]"),
    (["--habitat-tint", "abc"], "argument --habitat-tint: 'abc' is not a number"),
    (["--severity", "0"], "argument --severity: must be an integer in 1..5"),
    (["--seed", "-1"], "argument --seed: -1 is outside [0, 2**32 - 1]"),
    (["--cue-attributes", "-1"], "argument --cue-attributes: must be an integer in 0..24"),
    (["--cue-attributes", "2", "--cue-values", "1"], "--cue-values must be >= 2"),
    (["--cue-attributes", "7", "--cue-values", "4"], "--cue-attributes x --cue-values = 28 cue codes"),
    (["--cue-attributes", "2", "--n-classes", "14", "--n-fills", "2"], "a marked world has at most 12 classes"),
    (["--cue-attributes", "2", "--image-size", "24"], "a marked world's --image-size must be a multiple of 16"),
    (["--cue-attributes", "14", "--cue-values", "1", "--image-size", "16"], "--cue-values must be >= 2"),
    (["--image-size", "1024"], "needs about", "GiB (limit 8 GiB): lower --n-train-per-class or --image-size"),
    (["--splits", "train", "train"], "--splits names train more than once"),
]


@pytest.mark.parametrize("case", WORLD_BAD, ids=[" ".join(case[0]) for case in WORLD_BAD])
def test_a_bad_world_option_is_refused_by_name_before_any_image(case, tmp_path, capsys):
    argv, *words = case
    out = tmp_path / "w"
    _refused(capsys, ["vision-world", "--out", out, *argv], *words)
    assert not out.exists()


def test_the_edges_of_every_world_range_are_accepted(tmp_path):
    small = ["--n-classes", "2", "--image-size", "16", "--n-train-per-class", "1", "--n-concept-per-class", "1",
             "--n-test-per-class", "1", "--n-ood-per-class", "1", "--n-pool-per-class", "1", "--n-anomaly-pool", "1",
             "--habitat-rate", "1", "--texture-contrast", "0.5", "--habitat-tint", "0", "--severity", "5",
             "--seed", "4294967295"]
    assert main(["vision-world", "--out", str(tmp_path / "w"), *small]) == 0
    assert read_world_config(tmp_path / "w").n_train_per_class == 1
    assert main(["vision-world", "--out", str(tmp_path / "m"), *small, "--cue-attributes", "2", "--cue-values", "2",
                 "--splits", "train", "concept"]) == 0
    assert read_world_config(tmp_path / "m") == WorldConfig(
        n_classes=2, image_size=16, n_train_per_class=1, n_concept_per_class=1, n_test_per_class=1, n_ood_per_class=1,
        n_pool_per_class=1, n_anomaly_pool=1, habitat_rate=1.0, texture_contrast=0.5, habitat_tint=0.0,
        corruption_severity=5, seed=4294967295, cue_attributes=2, cue_values=2)


def test_the_library_refuses_what_the_command_refuses():
    for change, words in (({"n_train_per_class": 0}, "n_train_per_class must be an integer >= 1"),
                          ({"n_classes": 1, "cue_attributes": 2}, "a marked world (cue_attributes 2) needs n_classes"),
                          ({"n_classes": 1}, "n_classes must be an integer in 2..60"),
                          ({"habitat_rate": float("inf")}, "habitat_rate must be a number in [0, 1]"),
                          ({"n_classes": "3"}, "n_classes must be an integer in 2..60 (a classifier"),
                          ({"image_size": True}, "image_size must be an integer"),
                          ({"shape_radius": (0.3, float("nan"))}, "shape_radius must be two numbers"),
                          ({"n_counterfactual": 0}, "n_counterfactual must be an integer >= 1")):
        with pytest.raises(ValueError, match=re.escape(words)):
            WorldConfig(**change).validate()
    with pytest.raises(ValueError, match="needs n_classes >= 2"):
        marks.check_marks(1, 2, 4, 16)
    # memory: estimated per split asked for, before any image is drawn
    big = WorldConfig(image_size=1024, n_test_per_class=20)
    check_world_memory(big, ("id_test",))
    with pytest.raises(ValueError, match="the corruption split .* lower n_test_per_class or image_size"):
        check_world_memory(big, ("corruption",))
    with pytest.raises(ValueError, match="unknown world splits"):
        build_world(WorldConfig(), Path("/nonexistent"), ("trian",))


def test_the_renderer_chunk_shrinks_for_large_images_and_the_images_do_not_change():
    assert render_chunk(32) == 1024 and render_chunk(1024) == 1
    cfg = WorldConfig(image_size=16)
    scenes = sample_scenes(np.random.default_rng(0), np.arange(5) % 3, np.arange(5) % 3, cfg)
    np.testing.assert_array_equal(render(scenes, cfg), render(scenes, cfg, chunk=2))


def test_the_marked_world_side_is_the_compiled_models():
    assert marks.MARKED_SIDE_MULTIPLE == compiled.SIDE_MULTIPLE


# ---------------------------------------------------------------------------------------------- world.json


@pytest.fixture(scope="module")
def marked_world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("marked") / "world"
    build_world(WorldConfig(**MARKED), w, ("train", "id_test"), progress=False)
    return w


def _damaged(marked_world: Path, tmp_path: Path, how: str) -> Path:
    world = tmp_path / "world"
    world.mkdir()
    for split in ("train", "id_test"):
        (world / f"{split}.npz").symlink_to(marked_world / f"{split}.npz")
    text = (marked_world / WORLD_FILE).read_text()
    meta = json.loads(text)
    if how == "truncated":
        text = text[: len(text) // 2]
    elif how == "empty":
        text = ""
    elif how == "not-an-object":
        text = "[1, 2]"
    elif how == "no-config":
        text = json.dumps({"class_names": meta["class_names"]})
    elif how == "unknown-knob":
        meta["config"]["size"] = 3
        text = json.dumps(meta)
    elif how == "zero-train":
        meta["config"]["n_train_per_class"] = 0
        text = json.dumps(meta)
    elif how == "nan":
        text = text.replace('"habitat_rate": 0.8', '"habitat_rate": NaN')
    elif how == "key-twice":
        text = text.replace('"config": {', '"config": {"seed": 1, ', 1)
    else:
        assert how == "class-names"
        meta["class_names"] = ["a", "b", "c"]
        text = json.dumps(meta)
    (world / WORLD_FILE).write_text(text)
    return world


WORLD_JSON_BAD = [
    ("truncated", "is not valid JSON (line"),
    ("empty", "is not valid JSON (line 1, column 1"),
    ("not-an-object", "the top level is a JSON list"),
    ("no-config", "has no 'config' object"),
    ("unknown-knob", "config has unknown knobs ['size']"),
    ("zero-train", "config: n_train_per_class must be an integer >= 1"),
    ("nan", "NaN is not a JSON number"),
    ("key-twice", "key 'seed' is given more than once"),
    ("class-names", "class_names ['a', 'b', 'c'] do not match its config's"),
]


@pytest.mark.parametrize("how, words", WORLD_JSON_BAD, ids=[case[0] for case in WORLD_JSON_BAD])
def test_a_bad_world_json_is_refused_naming_the_file_and_the_fix(how, words, marked_world, tmp_path, capsys):
    world = _damaged(marked_world, tmp_path, how)
    model, metrics = tmp_path / "m.pt", tmp_path / "m.json"
    line = _refused(capsys, ["vision-compile", "--world", world, "--out-model", model, "--out-metrics", metrics],
                    str(world / WORLD_FILE), words, "rebuild the world with")
    assert "vision-world --out" in line
    assert not model.exists() and not metrics.exists()
    with pytest.raises(ValueError, match="rebuild the world"):
        read_world_config(world)


def test_a_missing_world_json_names_the_command_that_builds_it(tmp_path, capsys):
    _refused(capsys, ["vision-compile", "--world", tmp_path, "--out-model", tmp_path / "m.pt", "--out-metrics",
                      tmp_path / "m.json"], "world.json does not exist", "vision-world --out", "--cue-attributes")
    with pytest.raises(FileNotFoundError, match="vision-world --out"):
        read_world_config(tmp_path)


def test_a_train_split_without_every_class_is_refused(marked_world, tmp_path, capsys):
    world = tmp_path / "world"
    world.mkdir()
    (world / WORLD_FILE).symlink_to(marked_world / WORLD_FILE)
    with np.load(marked_world / "train.npz") as data:
        arrays = {k: data[k] for k in data.files}
    keep = arrays["labels"] != 1
    np.savez(world / "train.npz", **{k: (v[keep] if len(v) == len(keep) and k != "class_names" else v)
                                      for k, v in arrays.items()})
    _refused(capsys, ["vision-compile", "--world", world, "--out-model", tmp_path / "m.pt", "--out-metrics",
                      tmp_path / "m.json"], "train.npz holds [40, 0, 40] images per class", "--n-train-per-class")
    assert not (tmp_path / "m.pt").exists()


# ---------------------------------------------------------------------------------------------- vision-compile

COMPILE_BAD = [
    (["--badge-gain", "inf"], "argument --badge-gain: inf is outside [0.001, 1000]"),
    (["--cue-gain", "inf"], "argument --cue-gain: inf is outside [0.001, 1000]"),
    (["--badge-gain", "inf", "--cue-gain", "inf"], "argument --badge-gain: inf is outside"),
    (["--cue-gain", "nan"], "argument --cue-gain: nan is outside"),
    (["--cue-gain", "0"], "argument --cue-gain: 0 is outside [0.001, 1000] (a logit per mark: finite and positive)"),
    (["--badge-gain", "-1"], "argument --badge-gain: -1 is outside"),
    (["--badge-gain", "x"], "argument --badge-gain: 'x' is not a number"),
    (["--badge-gain", "0.5"], "gains need --badge-gain >= --cue-gain > 0"),
    (["--badge-gain", "200"], "--badge-gain / --cue-gain must be at most 100"),
    (["--margins", "0", "0.1", "0.1", "0.1"], "argument --margins: 0 is outside (0, 1)"),
    (["--margins", "0.1", "0.1", "0.1", "1"], "argument --margins: 1 is outside (0, 1)"),
    (["--jitter", "inf"], "argument --jitter: inf is outside [0, 0.9]"),
    (["--jitter", "-0.1"], "argument --jitter: -0.1 is outside [0, 0.9]"),
    (["--jitter-spread", "1"], "argument --jitter-spread: 1 is outside [0, 1)"),
    (["--cue-gain-spread", "-0.5"], "argument --cue-gain-spread: -0.5 is outside [0, 1)"),
    (["--cue-gain-spread", "nan"], "argument --cue-gain-spread: nan is outside [0, 1)"),
    (["--distractors", "0"], "argument --distractors: 0 must be at least 1"),
    (["--distractors", "17"], "--distractors 17 is outside 1..16"),
    (["--seed", "-2"], "argument --seed: -2 is outside [0, 2**32 - 1]"),
    (["--threads", "0"], "argument --threads: 0 must be at least 1"),
]


@pytest.mark.parametrize("argv, words", COMPILE_BAD, ids=[" ".join(case[0]) for case in COMPILE_BAD])
def test_a_bad_compile_option_is_refused_by_name_before_any_weight(argv, words, marked_world, tmp_path, capsys):
    model, metrics = tmp_path / "m.pt", tmp_path / "m.json"
    _refused(capsys, ["vision-compile", "--world", marked_world, "--out-model", model, "--out-metrics", metrics,
                      *argv], words)
    assert not model.exists() and not metrics.exists()


@pytest.mark.parametrize("argv", [["--badge-gain", "100"], ["--badge-gain", "0.001", "--cue-gain", "0.001"],
                                  ["--badge-gain", "1000", "--cue-gain", "1000"], ["--distractors", "16"],
                                  ["--jitter", "0.9", "--jitter-spread", "0", "--cue-gain-spread", "0"]])
def test_the_edges_of_every_compile_range_compile_a_model_that_reads_its_marks(argv, marked_world, tmp_path):
    metrics = tmp_path / "m.json"
    assert main(["vision-compile", "--world", str(marked_world), "--out-model", str(tmp_path / "m.pt"),
                 "--out-metrics", str(metrics), *argv]) == 0
    assert json.loads(metrics.read_text())["accuracy_id_test"] == 1.0


def test_the_spec_refuses_non_finite_and_mistyped_values():
    base = dict(n_classes=3, attributes=2, values=4, distractors=8, margins=(0.02, 0.08, 0.14, 0.2), jitter=0.3,
                badge_gain=1.0, cue_gain=1.0, luminance=0.5, image_size=16, seed=0)
    for change, words in (({"badge_gain": float("inf")}, "badge_gain must be a finite number"),
                          ({"badge_gain": float("inf"), "cue_gain": float("inf")}, "badge_gain must be a finite"),
                          ({"cue_gain": float("nan")}, "cue_gain must be a finite number"),
                          ({"badge_gain": 5e3, "cue_gain": 5e3}, r"badge_gain must be a finite number in \[0.001"),
                          ({"cue_gain": 1e-4, "badge_gain": 1e-3}, r"cue_gain must be a finite number in \[0.001"),
                          ({"badge_gain": 101.0}, "badge_gain / cue_gain must be at most 100"),
                          ({"luminance": float("nan")}, "luminance must be a finite number"),
                          ({"luminance": 1.5}, r"luminance \(the world's mean grey level\) must be in \[0, 1\]"),
                          ({"margins": (0.1, 0.1, 0.1, float("nan"))}, "margins must be 4 finite numbers"),
                          ({"jitter": "0.3"}, "jitter must be a finite number"),
                          ({"distractors": 8.0}, "distractors must be an integer"),
                          ({"seed": -1}, r"seed must be in \[0, 2\*\*32 - 1\]"),
                          ({"seed": 2**32}, r"seed must be in \[0, 2\*\*32 - 1\]")):
        with pytest.raises(ValueError, match=words):
            CompiledSpec(**{**base, **change})
    with pytest.raises(ValueError, match="badge_gain must be a finite number"):
        CompiledSpec.from_dict({**CompiledSpec(**base).to_dict(), "badge_gain": "inf"})
