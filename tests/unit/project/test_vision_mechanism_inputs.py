"""experiments/vision_mechanism.py refuses bad input as the other experiment scripts do (issue 53): one
``error: <file>: <key>: ...`` line, exit 2, no traceback, before any world or model is built; its --work folder
records the config it was built from."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers.scripts import load_script
from tests.helpers.paths import ROOT


@pytest.fixture(scope="module")
def mech():
    return load_script("experiments/vision_mechanism.py")


def _config(tmp_path: Path, **changes) -> Path:
    config = yaml.safe_load((ROOT / "experiments" / "vision_mechanism.yaml").read_text())
    config.update(changes)
    path = tmp_path / "mech.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("changes, message", [
    ({"model_seeds": [0, 1, 2, 3, 4, 5, 6]}, "model_seeds: [0, 1, 2, 3, 4, 5, 6] must be at least 8 distinct"),
    ({"model_seeds": [0, 0, 1, 2, 3, 4, 5, 6]}, "a seed given twice would count twice"),
    ({"model_seeds": ["a"] * 8}, "model_seeds: ['a', 'a'"),
    ({"resamples": 20}, "resamples: 20 must be an integer in [50, 100000]"),
    ({"resamples": "many"}, "resamples: 'many' must be an integer"),
    ({"reference_size": 1e9}, "reference_size: 1000000000.0 must be an integer in [1, 5000]"),
    ({"scorers": [{"name": "x", "scorer": "gradient", "ranking": "signed"}]}, "scorers: "),
    ({"world": [1, 2]}, "world: [1, 2] must be a mapping"),
    ({"world": {"cue_attributes": 0}}, "world.cue_attributes: 0 must be an integer >= 1"),
    ({"extra": 1}, "unknown ['extra']"),
])  # fmt: skip
def test_a_bad_config_is_one_error_line(mech, tmp_path, capsys, changes, message):
    path = _config(tmp_path, **changes)
    assert mech.main([str(path), "--work", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "w").exists()  # refused before any work


def test_an_unreadable_config_is_named(mech, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_seeds: [1\n")
    assert mech.main([str(bad), "--work", str(tmp_path / "w")]) == 2
    assert "bad.yaml: cannot be read as YAML" in capsys.readouterr().err
    assert mech.main([str(tmp_path / "none.yaml"), "--work", str(tmp_path / "w")]) == 2
    assert "none.yaml: cannot be read as YAML" in capsys.readouterr().err


def test_the_work_folder_records_its_config_and_refuses_another(mech, tmp_path):
    path = _config(tmp_path)
    config = mech.load_config(path)
    work = tmp_path / "work"
    mech.check_work(work, config, path)  # a new folder: recorded
    assert (work / "built_from.json").is_file()
    mech.check_work(work, config, path)  # the same config: resumes
    other = {**config, "resamples": 300}
    with pytest.raises(mech.ConfigError, match="built from another config"):
        mech.check_work(work, other, path)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "s0").mkdir()
    with pytest.raises(mech.ConfigError, match="holds files but no built_from.json"):
        mech.check_work(tmp_path / "old", config, path)
