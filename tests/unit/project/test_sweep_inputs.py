"""Issue 53: experiments/noise_sweep.py and experiments/vision_regime.py are command-line tools like the others.
Every refusal is one ``error: <file>: <key path>: <what is wrong>; <fix>`` on stderr with exit 2 and no traceback,
before any model is built: the sweep's config is checked key by key by one checker (types and ranges; sizes, seeds,
leaks and other levels given twice; ``distractor_scale`` on the clean model; a pre-registered cell outside the sweep;
``held_out`` bounded), a work folder records what it was built from and refuses another checkpoint or config, a failed
stage names its log and shows its last lines, ``--n-examples`` that the world cannot honour is refused, and a class
whose truth failed is left out of "condition met". No sweep is run: every config here is refused, or its work is
cached."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.scripts import load_script
from tests.helpers.paths import ROOT

SHIPPED = yaml.safe_load((ROOT / "experiments" / "noise_sweep.yaml").read_text())


def _load(name: str):
    return load_script(f"experiments/{name}.py")


@pytest.fixture(scope="module")
def sweep():
    return _load("noise_sweep")


@pytest.fixture(scope="module")
def regime():
    return _load("vision_regime")


def _config(tmp_path: Path, half: str, **changes) -> Path:
    config = copy.deepcopy(SHIPPED)
    for key, value in changes.items():
        section = config[half]
        *parents, last = key.split(".")
        for parent in parents:
            section = section[parent]
        if value is DELETE:
            del section[last]
        else:
            section[last] = value
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


DELETE = object()


@pytest.fixture
def guarded(sweep, monkeypatch):
    """The sweep with its halves and stages replaced by a failure: a config the checker wrongly passed would
    otherwise start the real sweep (minutes of training)."""
    def ran(*args, **kwargs):
        raise AssertionError("the config was accepted and the sweep started")

    for name in ("run_language", "run_vision", "run_stage"):
        monkeypatch.setattr(sweep, name, ran)
    return sweep


def _refused(sweep, capsys, path: Path, out: Path, half: str, where: str, message: str) -> None:
    assert sweep.main([str(path), "--out", str(out), "--half", half]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {where}: ") and message in err, err
    assert "Traceback" not in err and err.count("\n") == 1  # one line
    assert not out.exists()  # refused before any folder, world or model


# ------------------------------------------------------------------------------ the sweep's config: language


@pytest.mark.parametrize("changes, where, message", [
    ({"resamples": DELETE}, "language.resamples", "missing (language lacks resamples)"),
    ({"resample": 20}, "language.resample", "not a key of language (a misspelt key would be ignored)"),
    ({"models": "clean"}, "language.models", "must be a non-empty list of {name, compiled[, distractor_scale]}"),
    ({"models": [{"name": "clean", "compiled": "nope"}]}, "language.models[0].compiled",
     "'nope': is not a compiled model; choose one of induction, induction_noisy"),
    ({"models": [{"name": "clean", "compiled": "induction", "distractor_scale": 0.5}]},
     "language.models[0].distractor_scale", "only the noisy model has distractors"),
    ({"models": [{"name": "n", "compiled": "induction_noisy", "distractor_scale": -1}]},
     "language.models[0].distractor_scale", "-1: must be a number in [0, inf]"),
    ({"models": [{"name": "n", "compiled": "induction_noisy", "distractor_scale": "1"}]},
     "language.models[0].distractor_scale", "'1': must be a number"),
    ({"models": [{"name": "a", "compiled": "induction"}, {"name": "a", "compiled": "induction_noisy"}]},
     "language.models[1].name", "repeats a model of language.models"),
    ({"models": [{"name": "a", "compiled": "induction_noisy"},
                 {"name": "b", "compiled": "induction_noisy", "distractor_scale": 1.0}]},
     "language.models[1].name", "repeats a model of language.models (name or compiled model and scale)"),
    ({"models": [{"name": "a", "compiled": "induction", "scale": 1}]}, "language.models[0].scale", "not a key of"),
    ({"sizes": [20, 50, 50]}, "language.sizes", "gives 50 twice: each value is one level of the sweep"),
    ({"sizes": [50, 20]}, "language.sizes", "sizes must be increasing"),
    ({"sizes": [1, 20]}, "language.sizes", "must be a non-empty list of integers in [2, 10000]"),
    ({"sizes": [20.5]}, "language.sizes", "must be a non-empty list of integers in [2, 10000]"),
    ({"sizes": []}, "language.sizes", "must be a non-empty list"),
    ({"model_seeds": [0, 1, 1]}, "language.model_seeds", "gives 1 twice"),
    ({"model_seeds": [0, -1]}, "language.model_seeds", "must be a non-empty list of distinct integers in [0, "),
    ({"model_seeds": [True]}, "language.model_seeds", "must be a non-empty list of distinct integers"),
    ({"task_seed": "0"}, "language.task_seed", "'0': must be an integer in [0, 4294967295]"),
    ({"held_out": 1e9}, "language.held_out", "1000000000.0: must be an integer in [10, 10000]"),
    ({"held_out": 10001}, "language.held_out", "10001: must be an integer in [10, 10000]"),
    ({"held_out": 5}, "language.held_out", "5: must be an integer in [10, 10000]"),
    ({"ig_steps": 0}, "language.ig_steps", "0: must be an integer in [1, 1000]"),
    ({"methods": ["EAP", "EAP"]}, "language.methods", "gives 'EAP' twice"),
    ({"methods": ["nope"]}, "language.methods", "['nope']: "),
    ({"settings": [{"tau": 0.9, "p_del": 0.95}, {"tau": 0.9, "p_del": 0.95}]}, "language.settings",
     "gives a setting twice"),
    ({"settings": [{"tau": 1.5, "p_del": 0.95}]}, "language.settings[0].tau", "1.5: must be a number in [0, 1]"),
    ({"settings": [{"tau": 0.2, "p_del": 0.95}]}, "language.settings[0]", "tau"),
    ({"settings": [{"tau": 0.9}]}, "language.settings[0].p_del", "missing (language.settings[0] lacks p_del)"),
    ({"certification.n0": "100"}, "language.certification.n0", "'100': must be an integer in [1, 10000000]"),
    ({"certification.correction": "sidak"}, "language.certification.correction", "must be bonferroni or holm"),
    ({"certification.alpha": 0}, "language.certification.alpha", "0: must be a number in (0, 1]"),
    ({"k_grid": [0.1, 1.5]}, "language.k_grid", "must be a non-empty list of K in (0, 1], increasing"),
    ({"k_grid": [0.1, 0.1]}, "language.k_grid", "gives 0.1 twice"),
    ({"resamples": 1}, "language.resamples", "1: must be an integer in [2, 1000]"),
    ({"resamples": 10**6}, "language.resamples", "must be an integer in [2, 1000]"),
    ({"bootstrap_seed": -1}, "language.bootstrap_seed", "-1: must be an integer in [0, 4294967295]"),
    ({"preregistered": {"model": "noisy s=2", "size": 100}}, "language.preregistered.model",
     "'noisy s=2': is not a model of the sweep (clean, noisy s=0, noisy s=0.5, noisy s=1): the pre-registered cell "
     "would mark nothing"),
    ({"preregistered": {"model": "noisy s=1", "size": 150}}, "language.preregistered.size",
     "150: is not a size of the sweep ([20, 50, 100, 200])"),
    ({"preregistered": {"model": "noisy s=1"}}, "language.preregistered.size", "missing"),
])  # fmt: skip
def test_a_bad_language_config_is_one_error_line_naming_the_file_and_key(sweep, guarded, tmp_path, capsys, changes, where,
                                                                         message):
    path = _config(tmp_path, "language", **changes)
    _refused(sweep, capsys, path, tmp_path / "out", "language", where, message)


# ------------------------------------------------------------------------------ the sweep's config: vision


@pytest.mark.parametrize("changes, where, message", [
    ({"k_grid": DELETE}, "vision.k_grid", "missing (vision lacks k_grid)"),
    ({"leaks": [0.0, 0.9]}, "vision.leaks", "vision.leaks must be in [0, 0.5]"),
    ({"leaks": [0.0, 0.02, 0.0]}, "vision.leaks", "gives 0.0 twice"),
    ({"leaks": ["0.02"]}, "vision.leaks", "must be a non-empty list of leaks"),
    ({"model_seeds": [0, 0]}, "vision.model_seeds", "gives 0 twice"),
    ({"world.n_concept_per_class": 6000}, "vision.world.n_concept_per_class", "must be an integer in [2, 5000]"),
    ({"world.n_classes": 30}, "vision.world", "n_classes must be a multiple of n_fills"),
    ({"world.size": 32}, "vision.world.size", "not a key of vision.world"),
    ({"train.planted_own": [1, 3, 6]}, "vision.train.planted_own", "must be 4 integers >= 1"),
    ({"train.planted_shared": [6, 6, 8, 2]}, "vision.train", "planted shared channels of layer4 must be 0"),
    ({"train.epochs": 0}, "vision.train.epochs", "0: must be an integer in [1, 1000]"),
    ({"train.lr": -0.1}, "vision.train.lr", "-0.1: must be a number in (0, 10]"),
    ({"concepts": ["circle", "dragon"]}, "vision.concepts", "must be a non-empty list of distinct classes of the world"),
    ({"concepts": ["circle", "circle"]}, "vision.concepts", "gives 'circle' twice"),
    ({"sizes": [20, 500]}, "vision.sizes", "at most world.n_concept_per_class (100)"),
    ({"sizes": [20, 20, 50]}, "vision.sizes", "gives 20 twice"),
    ({"scorers": [{"name": "x", "scorer": "relevance", "ranking": "abs"}]}, "vision.scorers[0].ranking",
     "is not a ranking; use ranking signed or absolute"),
    ({"scorers": [{"name": "x", "scorer": "grad", "ranking": "signed"}]}, "vision.scorers[0].scorer", "not a scorer"),
    ({"scorers": [{"name": "x", "scorer": "relevance", "ranking": "signed"},
                  {"name": "y", "scorer": "relevance", "ranking": "signed"}]}, "vision.scorers[1].name",
     "repeats a scorer of vision.scorers"),
    ({"certification.p_del": 1.5}, "vision.certification.p_del", "1.5: must be a number in [0, 1]"),
    ({"reference_size": 10**6}, "vision.reference_size", "must be an integer in [1, 5000]"),
    ({"preregistered": {"leak": 0.1, "size": 50}}, "vision.preregistered.leak", "0.1: is not a leak of the sweep"),
    ({"preregistered": {"leak": 0.05, "size": 70}}, "vision.preregistered.size", "70: is not a size of the sweep"),
])  # fmt: skip
def test_a_bad_vision_config_is_one_error_line_naming_the_file_and_key(sweep, guarded, tmp_path, capsys, changes, where,
                                                                       message):
    path = _config(tmp_path, "vision", **changes)
    _refused(sweep, capsys, path, tmp_path / "out", "vision", where, message)


def test_both_halves_are_checked_before_either_runs(sweep, guarded, tmp_path, capsys):
    path = _config(tmp_path, "vision", leaks=[0.02, 0.02])  # a valid language half is not run first
    _refused(sweep, capsys, path, tmp_path / "out", "both", "vision.leaks", "gives 0.02 twice")


@pytest.mark.parametrize("text, message", [
    ("language: [1, 2\n", "cannot be read as YAML"),
    ("- 1\n", "list at the top: the config is a mapping of language and vision"),
    ("language: {}\nextra: 1\n", "extra: not a section (language, vision)"),
    ("vision: {}\n", "language: None is not a mapping"),
])
def test_a_config_that_is_not_a_sweep_config_is_named(sweep, guarded, tmp_path, capsys, text, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    assert sweep.main([str(path), "--out", str(tmp_path / "out"), "--half", "language"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and message in err and "Traceback" not in err
    assert sweep.main([str(tmp_path / "none.yaml"), "--out", str(tmp_path / "out")]) == 2
    assert "none.yaml: not found; pass experiments/noise_sweep.yaml" in capsys.readouterr().err


def test_the_shipped_config_passes_and_out_must_be_a_folder(sweep, guarded, tmp_path, capsys):
    path = ROOT / "experiments" / "noise_sweep.yaml"
    lang = sweep.load_config(path)
    assert [s.tag for s in lang["_settings"]] == [s.tag for s in sweep.load_config(path)["_settings"]]
    assert [(s.tau, s.p_del) for s in lang["_settings"]] == [(0.9, 0.95), (0.9, 0.9)]
    vision = sweep.load_vision_config(SHIPPED["vision"], path)
    assert (vision["_setting"].p_del, vision["_setting"].tau) == (0.6, 0.95) and "_setting" not in SHIPPED["vision"]
    (tmp_path / "file").write_text("x")
    assert sweep.main([str(path), "--out", str(tmp_path / "file"), "--half", "language"]) == 2
    assert f"error: {tmp_path / 'file'}: --out: a file, not a folder" in capsys.readouterr().err


# ------------------------------------------------------------------------------ work folders, stages, examples


def test_a_work_folder_records_what_it_was_built_from_and_refuses_anything_else(sweep, tmp_path):
    work = tmp_path / "work"
    built = {"checkpoint": "/a/model.pt", "checkpoint_sha256": "ab", "config": {"epochs": 10}}
    sweep.work_record(work, built, "--work")
    assert json.loads((work / "built_from.json").read_text()) == built
    sweep.work_record(work, dict(built), "--work")  # the same inputs: the folder is reused
    with pytest.raises(sweep.ConfigError) as caught:
        sweep.work_record(work, {**built, "checkpoint_sha256": "cd"}, "--work")
    assert str(caught.value) == (f"{work / 'built_from.json'}: checkpoint_sha256: the files here were built from 'ab', "
                                 f"this run gives 'cd': they would be reused as this run's; pass another --work folder, "
                                 f"or delete {work} to rebuild it")
    with pytest.raises(sweep.ConfigError, match=r"config: the files here were built from \{'epochs': 10\}"):
        sweep.work_record(work, {**built, "config": {"epochs": 20}}, "--work")
    old = tmp_path / "old"
    old.mkdir()
    (old / "circle_n50.h5").write_text("x")
    with pytest.raises(sweep.ConfigError, match=r"built_from.json: missing, but .*old holds files \(made before "
                                                r"records were kept\)"):
        sweep.work_record(old, built, "--work")


def test_the_sweeps_vision_folder_of_another_config_is_refused_before_the_language_half(sweep, guarded, tmp_path, capsys):
    out = tmp_path / "out"
    path = _config(tmp_path, "vision")
    sweep.work_record(out / "vision", sweep.vision_built_from({**SHIPPED["vision"], "train": {
        **SHIPPED["vision"]["train"], "epochs": 5}}), "--out")
    (out / "vision" / "leak0_s0.pt").write_bytes(b"a model trained for 5 epochs")
    assert sweep.main([str(path), "--out", str(out), "--half", "both"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / 'vision' / 'built_from.json'}: train: the files here (1 of them: "
                          "leak0_s0.pt, ...) were built from ")
    assert "'epochs': 5" in err and "'epochs': 10" in err and "Traceback" not in err
    assert not (out / "language_rows.csv").exists()


def test_a_failed_vision_stage_does_not_block_the_corrected_rerun(sweep, tmp_path):
    """Issue 61: a stage that failed wrote no file, so its key's new value is recorded, not refused; a key whose
    files exist still refuses."""
    work = tmp_path / "vision"
    first = sweep.vision_built_from({**SHIPPED["vision"], "train": {**SHIPPED["vision"]["train"], "epochs": 5}})
    sweep.work_record(work, first, "--out", sweep.VISION_PRODUCTS)
    (work / "world").mkdir()
    (work / "world" / "world.json").write_text("{}")  # the world was built; training then failed
    (work / "leak0_s0_train.log").write_text("error: ...\n")
    corrected = sweep.vision_built_from(SHIPPED["vision"])
    sweep.work_record(work, corrected, "--out", sweep.VISION_PRODUCTS)
    assert json.loads((work / "built_from.json").read_text()) == json.loads(json.dumps(corrected))
    with pytest.raises(sweep.ConfigError, match=r"world: the files here \(1 of them: world.json, ...\) were built"):
        sweep.work_record(work, {**corrected, "world": {**corrected["world"], "seed": 1}}, "--out",
                          sweep.VISION_PRODUCTS)


def test_the_vision_half_prints_no_warning_and_refuses_an_unreadable_reused_file(sweep, tmp_path, capsys):
    """Every stage's file is there (so nothing runs), and the setting cannot certify IN at |D_c| 20: the tables say
    so ("can certify IN": no), as the language half does, with no PlanWarning (its file and source line) on stderr.
    A truncated reused truth is then one line naming it."""
    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    vision = {**copy.deepcopy(SHIPPED["vision"]), "leaks": [0.0], "model_seeds": [0], "concepts": ["circle"],
              "sizes": [20], "scorers": [SHIPPED["vision"]["scorers"][0]], "resamples": 2, "k_grid": [0.5, 1.0],
              "world": {"seed": 0, "n_classes": 10, "n_concept_per_class": 20},
              "preregistered": {"leak": 0.0, "size": 20},
              "certification": {**SHIPPED["vision"]["certification"], "n0": 10, "n": 20}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"vision": vision}))
    out = tmp_path / "out"
    work = out / "vision"
    sweep.work_record(work, sweep.vision_built_from(vision), "--out", sweep.VISION_PRODUCTS)
    (work / "world").mkdir()
    (work / "world" / "world.json").write_text("{}")
    (work / "leak0_s0.pt").write_bytes(b"a model")
    names = [f"layer1.{i}" for i in range(6)]
    effects = {n: (1.0 if i < 2 else 0.01) for i, n in enumerate(names)}
    write_json(work / "leak0_s0_truth.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 6,
        "concepts": {"circle": {"components": names[:2], "verification": {"passed": True, "per_component": {
            "metric": "class logit", "ablation": "mean", "unit": "u", "delta": 0.05, "epsilon": 0.01, "ratio": 100.0,
            "required_ratio": 5.0, "passed": True, "effects": effects, "dropped": []}}}}})
    scores = np.tile(np.array([1.0, 0.9, 0.1, 0.0, 0.0, 0.2]), (20, 1))
    write_attributions(work / "leak0_s0_circle.h5", {"relevance": scores}, np.zeros(6, np.int64), names,
                       [f"i{i}" for i in range(20)], {"concept": "circle"})
    with warnings.catch_warnings(record=True) as shown:  # what python prints outside pytest
        warnings.simplefilter("always")
        assert sweep.main([str(path), "--out", str(out), "--half", "vision"]) == 0
    assert not [w for w in shown if issubclass(w.category, sweep.PlanWarning)]
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert "| leak 0 | 20 | no |" in (out / "vision_sweep.md").read_text()
    (work / "leak0_s0_truth.json").write_text('{"format": ')
    assert sweep.main([str(path), "--out", str(out), "--half", "vision"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {work / 'leak0_s0_truth.json'}: cannot be reused (") and err.count("\n") == 1
    assert "delete it (the stage that writes it runs again)" in err and "Traceback" not in err


def test_a_failed_stage_is_one_line_naming_its_log_and_its_last_line(sweep, tmp_path):
    log = tmp_path / "stage.log"
    with pytest.raises(sweep.ConfigError) as caught:
        sweep.run_stage(["vision-world", "--out", str(tmp_path / "w"), "--n-classes", "0"], log)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{log}: certified-circuits vision-world failed (exit 2): ")
    last = log.read_text().strip().splitlines()[-1].strip()
    assert f"(exit 2): {last}; fix what it names and rerun the same command (finished files are reused" in message
    assert "n-classes" in last or "n_classes" in last


def test_a_stage_that_ends_in_a_traceback_shows_only_its_exception(sweep, tmp_path):
    log = tmp_path / "stage.log"
    log.write_text("vision-train:  50%|#####     | 1/2 [00:01<00:01,  1.00s/it]\rTraceback (most recent call last):\n"
                   '  File "x.py", line 1, in <module>\nValueError: lr must be positive\n')
    assert sweep.last_said(log) == "ValueError: lr must be positive"
    log.write_text("")
    assert sweep.last_said(log) == "(no output)"


def test_an_attribution_file_with_other_examples_is_refused(sweep, tmp_path):
    class Attributions:
        scores = {"relevance": np.zeros((10, 3))}

    sweep.check_examples(Attributions(), 10, tmp_path / "a.h5")
    with pytest.raises(sweep.ConfigError, match=r"a.h5: examples: holds 10 examples, the run asked for 50: the world's "
                                                r"class has fewer concept images, or the file is another run's"):
        sweep.check_examples(Attributions(), 50, tmp_path / "a.h5")


# ------------------------------------------------------------------------------ vision_regime.py


def _world(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A world of 3 classes (5 concept images of circle and square, 3 of triangle), a checkpoint, and a ground truth
    of circle (verified: c0, c1) and square (failed its check)."""
    from certified_circuits.storage.atomic import write_json

    world = tmp_path / "world"
    world.mkdir()
    labels = np.array([0] * 5 + [1] * 5 + [2] * 3)
    np.savez(world / "concept.npz", images=np.zeros((13, 1), np.float32), labels=labels,
             ids=np.array([f"i{i}" for i in range(13)]), class_names=np.array(["circle", "square", "triangle"]))
    np.savez(world / "counterfactual.npz", images=np.zeros((1, 1), np.float32))
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"not a model")
    truth = write_json(tmp_path / "truth.json", {
        "format": "certified-circuits/ground-truth/1", "experiment": "world", "kind": "vision", "model": "planted",
        "how": "by construction", "n_components": 6,
        "concepts": {"circle": {"components": ["c0", "c1"], "verification": {"passed": True}},
                     "square": {"components": ["c2"], "verification": {"passed": False, "check.recovery": False}}}})
    return world, checkpoint, truth


def _regime_args(tmp_path: Path, world: Path, checkpoint: Path, truth: Path, *extra: str) -> list[str]:
    return ["--checkpoint", str(checkpoint), "--world", str(world), "--ground-truth", str(truth), "--work",
            str(tmp_path / "work"), "--out", str(tmp_path / "regime.json"), "--n-examples", "4", *extra]


@pytest.mark.parametrize("extra, message", [
    (["--n-examples", "6"], "concept.npz: --n-examples: 6 exceeds the 5 concept images of class 'circle' (2 classes "
                            "have fewer): |D_c| would silently be 5; pass --n-examples 5 or rebuild the world with "
                            "--n-concept-per-class 6"),
    (["--n-examples", "1"], "--n-examples: 1: must be at least 2"),
    (["--resamples", "1"], "--resamples: 1: must be in [2, 1000]"),
    (["--seed", "-1"], "--seed: -1: must be in [0, 2**32 - 1]"),
    (["--k-grid", "0", "0.5"], "--k-grid: [0.0, 0.5]: each K must be in (0, 1] and given once"),
    (["--k-grid", "0.5", "0.5"], "--k-grid: [0.5, 0.5]: each K must be in (0, 1] and given once"),
])  # fmt: skip
def test_vision_regime_refuses_an_option_it_cannot_honour(regime, tmp_path, capsys, extra, message):
    world, checkpoint, truth = _world(tmp_path)
    assert regime.main(_regime_args(tmp_path, world, checkpoint, truth, *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "work").exists() and not (tmp_path / "regime.json").exists()


def test_vision_regime_refuses_inputs_it_cannot_read(regime, tmp_path, capsys):
    world, checkpoint, truth = _world(tmp_path)
    cases = [
        (tmp_path / "none.pt", world, truth, f"error: {tmp_path / 'none.pt'}: --checkpoint: not found"),
        (checkpoint, tmp_path, truth, f"error: {tmp_path / 'concept.npz'}: --world: not found"),
        (checkpoint, world, checkpoint, f"error: {checkpoint}"),
    ]
    for ckpt, folder, gt, message in cases:
        assert regime.main(_regime_args(tmp_path, folder, ckpt, gt)) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and "Traceback" not in err, err
    other = json.loads(truth.read_text())
    other["concepts"]["hexagon"] = other["concepts"].pop("square")
    truth.write_text(json.dumps(other))
    assert regime.main(_regime_args(tmp_path, world, checkpoint, truth)) == 2
    assert f"error: {truth}: concepts: ['hexagon'] are not classes of the world" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_vision_regime_leaves_failed_classes_out_and_refuses_another_checkpoint(regime, tmp_path, capsys):
    from certified_circuits.storage.store import write_attributions

    world, checkpoint, truth = _world(tmp_path)
    args = _regime_args(tmp_path, world, checkpoint, truth, "--resamples", "3")
    # the checkpoint is not a model: vision-attribute fails, its log is named and its last lines shown
    assert regime.main(args) == 2
    err = capsys.readouterr().err
    log = tmp_path / "work" / "circle_n4.log"
    assert err.startswith("vision regime: square: the truth fails ['recovery']; left out\n")
    assert f"\nerror: {log}: certified-circuits vision-attribute failed (exit " in err and err.endswith("\n")
    assert "Traceback" not in err and "\n  | " not in err  # one line: the stage's last line, not its log
    assert not (tmp_path / "work" / "square_n4.log").exists()  # the failed class is never attributed
    # the circle's attributions (4 identical examples): relevance ranks c0, c2 (signed) and c3, c0 (absolute);
    # activation ranks c0, c1; the truth {c0, c1} of 6 is K 0.3 on the grid (2 components)
    row = {"relevance": [1.0, 0.1, 0.5, -2.0, 0.0, 0.2], "activation": [1.0, 0.9, 0.1, 0.0, 0.0, 0.2]}
    write_attributions(tmp_path / "work" / "circle_n4.h5", {s: np.tile(np.array(v, np.float32), (4, 1)) for s, v in
                                                           row.items()}, np.zeros(6, np.int64),
                       [f"c{i}" for i in range(6)], [f"i{i}" for i in range(4)], {"concept": "circle"})
    assert regime.main(args) == 0
    err = capsys.readouterr().err
    assert "vision regime: square: the truth fails ['recovery']; left out" in err
    assert ("relevance (signed): baseline Jaccard to the full-data circuit 1.000, precision 0.500 (resampled 0.500) "
            "over 1 verified classes; condition NOT met") in err
    result = json.loads((tmp_path / "regime.json").read_text())
    assert result["left_out"] == {"square": ["recovery"]} and list(result["per_class"]) == ["circle"]
    assert result["per_class"]["circle"]["k"] == 0.3 and result["per_class"]["circle"]["n_true"] == 2
    assert {label: m["precision"] for label, m in result["mean"].items()} == {
        "relevance (signed)": 0.5, "relevance (absolute)": 0.5, "activation": 1.0}
    # another checkpoint (same path, other bytes; or another path) with this --work: refused, nothing reused
    checkpoint.write_bytes(b"another model")
    assert regime.main(args) == 2
    assert f"error: {tmp_path / 'work' / 'built_from.json'}: checkpoint_sha256: the files here were built from " \
           in capsys.readouterr().err
    other = tmp_path / "other.pt"
    other.write_bytes(b"not a model")
    assert regime.main(_regime_args(tmp_path, world, other, truth)) == 2
    assert f"checkpoint: the files here were built from '{checkpoint.resolve()}', this run gives " \
           f"'{other.resolve()}'" in capsys.readouterr().err
