"""experiments/vision_mechanism.py refuses bad input as the other experiment scripts do (issues 53 and 61): one
``error: <file>: <key>: ...`` line, exit 2, no traceback, before any world or model is built; the world and compile
sections are read as their stages' options (no per-seed key, each value by the option's own type, what the later
stages need checked first); its --work folder records the config and the effective options it was built from and
reads every reused world and model back; a class whose truth failed has no conditions and is in no count.

No stage is run: a seed's files are written here (a world's record, a checkpoint that holds only its meta, a ground
truth and attribution files), so the script reuses them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.scripts import load_script
from tests.helpers.paths import ROOT

SHIPPED = yaml.safe_load((ROOT / "experiments" / "vision_mechanism.yaml").read_text())
#: today's results, made by the code before the record held the effective options (read, never written)


@pytest.fixture(scope="module")
def mech():
    return load_script("experiments/vision_mechanism.py")


def _config(tmp_path: Path, **changes) -> Path:
    """The shipped config with ``changes`` (``"world.seed"`` sets a key of a section)."""
    config = copy.deepcopy(SHIPPED)
    for key, value in changes.items():
        section, *rest = key.split(".")
        if rest:
            config[section][rest[0]] = value
        else:
            config[section] = value
    path = tmp_path / "mech.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _refused(mech, capsys, path: Path, work: Path, *message: str) -> str:
    assert mech.main([str(path), "--work", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(m in err for m in message), err
    return err


@pytest.mark.parametrize("changes, message", [
    ({"model_seeds": [0, 1, 2, 3, 4, 5, 6]}, "model_seeds: [0, 1, 2, 3, 4, 5, 6] must be at least 8 distinct"),
    ({"model_seeds": [0, 0, 1, 2, 3, 4, 5, 6]}, "a seed given twice would count twice"),
    ({"model_seeds": ["a"] * 8}, "model_seeds: ['a', 'a'"),
    ({"resamples": 20}, "resamples: 20 must be an integer in [50, 100000]"),
    ({"resamples": "many"}, "resamples: 'many' must be an integer"),
    ({"reference_size": 1e9}, "reference_size: 1000000000.0 must be an integer in [1, 5000]"),
    ({"scorers": [{"name": "x", "scorer": "gradient", "ranking": "signed"}]},
     "scorers[0].scorer: 'gradient' must be one of relevance, activation, conductance"),
    ({"scorers": []}, "scorers: [] must be a non-empty list of {name, scorer"),
    ({"world": [1, 2]}, "world: [1, 2] must be a mapping"),
    ({"world.cue_attributes": 0}, "world.cue_attributes: 0 must be an integer >= 1"),
    ({"extra": 1}, "unknown ['extra']"),
])  # fmt: skip
def test_a_bad_config_is_one_error_line(mech, tmp_path, capsys, changes, message):
    path = _config(tmp_path, **changes)
    err = _refused(mech, capsys, path, tmp_path / "w", f"error: {path}: ", message)
    assert not (tmp_path / "w").exists(), err  # refused before any work


# ------------------------------------------------------------------ class 4: a config that would be half-applied


@pytest.mark.parametrize("changes, message", [
    # keys the script sets per model seed (a world: {seed: 5} made every seed share one world)
    ({"world.seed": 5}, "world.seed: set per model seed by this script (vision-world --seed"),
    ({"compile.seed": 3}, "compile.seed: set per model seed by this script (vision-compile --seed"),
    ({"world.out": "/tmp/x"}, "world.out: set per model seed"),
    ({"world.splits": ["train"]}, "world.splits: set per model seed"),
    ({"compile.world": "/tmp/w"}, "compile.world: set per model seed"),
    ({"compile.out_model": "m.pt"}, "compile.out_model: set per model seed"),
    # two scorers of one name were merged in every table; one measurement twice counted twice
    ({"scorers": [{"name": "a", "scorer": "relevance", "ranking": "signed"},
                  {"name": "a", "scorer": "activation", "ranking": "signed"}]},
     "scorers[1].name: 'a' is the name of scorers[0] too: the two would be merged"),
    ({"scorers": [{"name": "a", "scorer": "relevance", "ranking": "signed"},
                  {"name": "b", "scorer": "relevance", "ranking": "signed"}]},
     "scorers[1]: relevance signed is scorers[0] again"),
    ({"scorers": [{"name": "a", "scorer": "relevance", "ranking": "signed", "k": 1}]}, "scorers[0]: "),
    # what the later stages need, checked before the first: the population of condition (a), D_c, the fills
    ({"world.n_train_per_class": 500}, "world.n_train_per_class: 500 must be at least 1000: a class's train images "
                                       "are the population condition (a) compares with (MIN_POPULATION)"),
    ({"world.n_concept_per_class": 1}, "world.n_concept_per_class: 1 must be at least 2"),
    ({"reference_size": 5000, "world.n_classes": 5}, "reference_size: 5000 exceeds the 4000 train images of the "
                                                     "other classes"),
    # each value by its option's type and range, finite
    ({"world.n_classes": 2.5}, "world.n_classes: 2.5: "),
    ({"world.n_classes": True}, "world.n_classes: True must be a finite number"),
    ({"world.n_classes": 1}, "n_classes"),  # the option's type or the world's check
    ({"world.image_size": 8}, "image_size"),
    ({"world.n_class": 10}, "world.n_class: not an option of vision-world; use one of"),
    ({"compile.badge_gain": float("inf")}, "compile.badge_gain: inf must be a finite number"),
    ({"compile.cue_gain": "abc"}, "compile.cue_gain: 'abc': "),
    ({"compile.jitter": None}, "compile.jitter: None must be a finite number"),
    ({"compile.margins": [0.1, 0.2]}, "compile.margins: [0.1, 0.2] must be a list of 4"),
    ({"compile.margins": 0.1}, "compile.margins: 0.1 must be a list of 4"),
    ({"compile.jitter": [0.3]}, "compile.jitter: [0.3] must be one value"),
    ({"compile.jitter_spread": 1.5}, "jitter_spread"),
    ({"compile.cue_gain": 2.0}, "compile: gains need badge_gain >= cue_gain > 0"),
    ({"compile.margin": [0.1] * 4}, "compile.margin: not an option of vision-compile"),
])  # fmt: skip
def test_a_half_applied_config_is_refused_before_any_stage(mech, tmp_path, capsys, changes, message):
    path = _config(tmp_path, **changes)
    _refused(mech, capsys, path, tmp_path / "w", f"error: {path}: ", message)
    assert not (tmp_path / "w").exists()  # nothing left behind: the corrected command runs


def test_the_shipped_config_passes_with_its_effective_options(mech):
    config = mech.load_config(ROOT / "experiments" / "vision_mechanism.yaml")
    # the defaults of vision-compile that the config does not set are recorded too (issue 59's spreads)
    assert config["_compile"]["jitter_spread"] == 0.5 and config["_compile"]["cue_gain_spread"] == 0.0715
    assert config["_world"]["n_train_per_class"] == 1000 and "seed" not in config["_world"]
    record = mech.built_from(config)
    assert record["format"] == mech.RECORD_FORMAT and record["config"] == SHIPPED and record["conductance"] is True


# ------------------------------------------------------------------ a seed's files, written by hand


def _seed(mech, config: dict, work: Path, seed: int, concepts: dict[str, bool], *, meta: dict | None = None) -> None:
    """Seed ``seed``'s files: the world's record and a checkpoint meta as this run's stages would write them
    (``meta`` overrides the compiled spec), a ground truth whose classes pass or fail as ``concepts`` says, and for
    each passing class its attribution files (12 channels in 2 layers; channels 0, 1 and 6 strong: the truth)."""
    import torch

    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    folder = work / f"s{seed}"
    (folder / "world").mkdir(parents=True, exist_ok=True)
    fields = {mech.WORLD_FIELDS.get(k, k): v for k, v in config["_world"].items()}
    (folder / "world" / "world.json").write_text(json.dumps({"config": {**fields, "seed": seed}}))
    w, c = config["_world"], config["_compile"]
    spec = {**{k: c[k] for k in mech.COMPILE_SPEC}, "distractors": w["cue_attributes"] * w["cue_values"],
            "seed": seed, "layout": [[0, 1]] * 4, **(meta or {})}
    spec = {k: v for k, v in spec.items() if v is not None}
    torch.save({"meta": {"seed": seed, "compiled": spec}}, folder / "model.pt")
    names = [f"layer{1 + i // 6}.{i % 6}" for i in range(12)]
    write_json(folder / "ground_truth.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 12, "planted": spec,
        "concepts": {name: {"components": ["layer1.0", "layer1.1", "layer2.0"],
                            "verification": {"passed": ok, **({} if ok else {"check.keep_accuracy": False})}}
                     for name, ok in concepts.items()}})
    groups = np.repeat([0, 1], 6).astype(np.int32)
    rng = np.random.default_rng(seed)
    for name, ok in concepts.items():
        if not ok:
            continue
        for part, n in (("dc", w["n_concept_per_class"]), ("population", w["n_train_per_class"])):
            scores = rng.normal(size=(n, 12))
            scores[:, [0, 1, 6]] += 4.0
            write_attributions(folder / f"{part}_{name}.h5", {"relevance": scores, "conductance": scores + 1.0},
                               groups, names, [str(i) for i in range(n)], {"concept": name, "experiment": "world"})


def _run(mech, capsys, path: Path, work: Path) -> tuple[str, str]:
    assert mech.main([str(path), "--work", str(work)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out, err


# ------------------------------------------------------------------ class 3: failed truths report no conditions


def test_a_world_where_every_truth_fails_reports_no_conditions(mech, tmp_path, capsys):
    path = _config(tmp_path)
    config = mech.load_config(path)
    work = tmp_path / "work"
    mech.check_work(work, config, path)  # the folder as the script starts it
    for seed in SHIPPED["model_seeds"]:
        _seed(mech, config, work, seed, {"circle": False, "square": False})
    out, err = _run(mech, capsys, path, work)
    # before: "classes passed 0 / 2" beside "(a) 2/2, (b) 2/2, (c) 2/2 classes"
    assert "(a)" not in err and err.count("no class passed its truth check (2 left out: the truth failed: circle, "
                                          "square): no conditions reported") == 8
    assert "| 0 | 0 / 2 | - |" in out and "## Conditions" not in out
    assert ("Left out (the truth failed its check, so no condition is reported for the class and it is in no count of "
            "classes): 16 of 16 classes: seed 0 circle (keep_accuracy)") in out
    assert (work / "conditions.csv").read_text().strip() == ""
    assert not list(work.glob("s*/*.h5"))  # a failed class is not even attributed


def test_a_failed_class_is_left_out_of_every_count(mech, tmp_path, capsys):
    import pandas as pd

    path = _config(tmp_path)
    config = mech.load_config(path)
    work = tmp_path / "work"
    mech.check_work(work, config, path)
    for seed in SHIPPED["model_seeds"]:
        _seed(mech, config, work, seed, {"circle": True, "square": seed != 0})
    out, err = _run(mech, capsys, path, work)
    # the strong three are kept by every resample: no gap, so (a) fails; over the one class that passed
    assert ("(a) 0/1, (b) 0/1, (c) 0/1 classes whose truth passed (1 left out: the truth failed: square); gap 0.000"
            in err)
    assert "seed 1: 0 s; relevance (signed): (a) 0/2, " in err or "relevance (signed): (a) 0/2, (b) 0/2" in err
    conditions = pd.read_csv(work / "conditions.csv")
    assert len(conditions) == (1 + 7 * 2) * 2 and not ((conditions.seed == 0) & (conditions.concept == "square")).any()
    assert "| 0 | 1 / 2 |" in out and "(|D_c| 50, 200 bootstrap resamples)" in out
    assert "1 of 16 classes: seed 0 square (keep_accuracy)." in out


# ------------------------------------------------------------------ class 3: what --work was built from


def test_the_work_folder_records_its_effective_options_and_refuses_reused_files_of_others(mech, tmp_path, capsys):
    path = _config(tmp_path)
    config = mech.load_config(path)
    work = tmp_path / "work"
    mech.check_work(work, config, path)  # a new folder: recorded
    assert json.loads((work / "built_from.json").read_text()) == mech.built_from(config)
    mech.check_work(work, config, path)  # the same config: resumes
    for seed in SHIPPED["model_seeds"]:
        _seed(mech, config, work, seed, {"circle": True})
    # a key no reused file depends on: the tables are recomputed, the record follows
    mech.check_work(work, {**config, "resamples": 300}, path)
    assert json.loads((work / "built_from.json").read_text())["config"]["resamples"] == 300
    # a compile option with the models there: refused by name, nothing written
    other = mech.load_config(_config(tmp_path, **{"compile.jitter": 0.2}))
    before = (work / "built_from.json").read_text()
    with pytest.raises(mech.ConfigError, match=r"built_from.json: compile: the 8 model.pt file\(s\) here .* were "
                                               r"built from another compile .*'jitter': \(0.3, 0.2\)"):
        mech.check_work(work, other, path)
    assert (work / "built_from.json").read_text() == before
    with pytest.raises(mech.ConfigError, match="reference_size: the 8 ground_truth.json file"):
        mech.check_work(work, {**config, "reference_size": 400}, path)
    with pytest.raises(mech.ConfigError, match="world: the 8 world/world.json file"):
        mech.check_work(work, mech.load_config(_config(tmp_path, **{"world.cue_values": 2})), path)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "s0").mkdir()
    with pytest.raises(mech.ConfigError, match="holds files but no built_from.json"):
        mech.check_work(tmp_path / "old", config, path)


def test_a_model_of_an_older_default_is_refused_by_its_meta(mech, tmp_path, capsys):
    """Issue 61: vision-compile's --jitter-spread 0.5 and --cue-gain-spread 0.0715 are today's defaults; a model
    compiled before them (its meta lacks both: 0) is refused, though the config as written did not change."""
    path = _config(tmp_path)
    config = mech.load_config(path)
    work = tmp_path / "work"
    for seed in SHIPPED["model_seeds"]:
        _seed(mech, config, work, seed, {"circle": True}, meta={"jitter_spread": None, "cue_gain_spread": None}
              if seed == 3 else None)
    (work / "built_from.json").write_text(json.dumps(SHIPPED))  # the record of the code before: the config alone
    _refused(mech, capsys, path, work, f"error: {work / 's3' / 'model.pt'}: meta.compiled.jitter_spread: the model "
                                       "was compiled with 0.0, this run's vision-compile gives 0.5",
             f"delete {work / 's3'}")
    _seed(mech, config, work, 3, {"circle": True}, meta={"cue_gain_spread": 0.05})
    _refused(mech, capsys, path, work, "meta.compiled.cue_gain_spread: the model was compiled with 0.05")
    _seed(mech, config, work, 3, {"circle": True})
    world = json.loads((work / "s5" / "world" / "world.json").read_text())
    (work / "s5" / "world" / "world.json").write_text(json.dumps({"config": {**world["config"], "seed": 4}}))
    _refused(mech, capsys, path, work, "s5/world/world.json: config.seed: the world was built with 4, this run's "
                                       "vision-world gives 5")
    _seed(mech, config, work, 5, {"circle": True})
    _run(mech, capsys, path, work)  # every file as this run builds it: reused, old record upgraded
    assert json.loads((work / "built_from.json").read_text())["format"] == mech.RECORD_FORMAT


def test_a_failed_stage_is_one_line_and_does_not_block_the_corrected_rerun(mech, tmp_path, capsys, monkeypatch):
    path = _config(tmp_path)
    work = tmp_path / "work"
    log = work / "s0" / "stages.log"

    def run(args, **kwargs):  # vision-world writes its world; vision-compile fails with a traceback in its log
        if args[1] == "vision-world":
            (work / "s0" / "world").mkdir(parents=True, exist_ok=True)
            (work / "s0" / "world" / "world.json").write_text(json.dumps({"config": {}}))
            return mech.subprocess.CompletedProcess(args, 0)
        with open(log, "a") as err:
            err.write("vision-compile:  50%|##   | 1/2 [00:01<00:01,  1.0s/it]\nTraceback (most recent call last):\n"
                      '  File "x.py", line 1, in <module>\nValueError: margins must be 4 values in (0, 1)\n')
        return mech.subprocess.CompletedProcess(args, 1)

    monkeypatch.setattr(mech.subprocess, "run", run)
    monkeypatch.setattr(mech, "check_products", lambda work, config: None)  # the world here is a stand-in
    _refused(mech, capsys, path, work, f"error: seed 0: {log}: certified-circuits vision-compile failed (exit 1): "
                                       "ValueError: margins must be 4 values in (0, 1); fix what it names and rerun")
    assert not (work / "s0" / "model.pt").exists()
    # the corrected command (another compile option) is not refused: no model was built from the first one
    config = mech.load_config(_config(tmp_path, **{"compile.jitter": 0.2}))
    mech.check_work(work, config, path)
