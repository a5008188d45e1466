"""Issue 45's last surfaces: the one CSV reader (storage/tables.py) under every table a report or stage reads, the
bound on a mean-ablation fill's reference images, and a testbed key that runs nothing said on stderr."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.cli.stages import MAX_REFERENCE_SIZE
from certified_circuits.pipeline.plans import testbed
from certified_circuits.storage.tables import read_csv_table, require_columns
from tests.helpers.paths import ROOT, SCHEMA

FIX = "rerun the stage that writes it"


@pytest.mark.parametrize("content, problem", [
    (b"", "t.csv (--x): not a readable CSV table (No columns to parse from file); " + FIX),
    ("concept,k\n\xe9t\xe9,1\n".encode("latin-1"), "t.csv (--x): not a readable CSV table (not UTF-8 text: line 2: "
                                                   "invalid continuation byte); " + FIX),
    (b'concept,k\n"a,1\n', "t.csv (--x): not a readable CSV table (Error tokenizing data."),
    (b"concept,j\na,1\n", "t.csv (--x) is missing column(s) 'k'; it has 'concept', 'j'; " + FIX),
    (b"concept,k\n", "t.csv (--x) holds no rows (header only); " + FIX),
])
def test_read_csv_table_refuses_each_kind_of_bad_file_by_name(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        read_csv_table(path, f"{path} (--x)", ["concept", "k"], FIX)
    assert str(caught.value).startswith(f"{tmp_path}/") and problem in str(caught.value)


def test_read_csv_table_names_a_missing_file_and_keeps_text_columns_as_text(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope.csv \(--x\) does not exist; " + FIX):
        read_csv_table(tmp_path / "nope.csv", f"{tmp_path / 'nope.csv'} (--x)", [], FIX)
    path = tmp_path / "t.csv"
    path.write_text("concept,k\n007,0.5\n010,1\n")
    table = read_csv_table(path, "t", ["concept", "k"], FIX, {"concept": str})
    assert table["concept"].tolist() == ["007", "010"] and table["k"].tolist() == [0.5, 1.0]
    path.write_text("concept,k\n")
    assert len(read_csv_table(path, "t", ["k"], FIX, allow_empty=True)) == 0  # the caller says what empty means
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="t.csv: not a readable curves CSV"):
        read_csv_table(path, "t.csv", [], FIX, kind="curves CSV")


def test_require_columns_names_every_missing_column_and_refuses_a_non_table() -> None:
    table = pd.DataFrame({"a": [1], "b": [2]})
    require_columns(table, ["a"], "the table")  # present: no error
    with pytest.raises(ValueError, match=r"the table is missing column\(s\) 'c', 'd'; it has 'a', 'b'"):
        require_columns(table, ["a", "c", "d"], "the table")
    with pytest.raises(TypeError, match="the table must be a pandas DataFrame, got dict"):
        require_columns({"a": [1]}, ["a"], "the table")


def test_report_graphs_refuses_a_selected_table_that_is_not_one_before_reading_any_circuit(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

    selected = tmp_path / "selected.csv"
    selected.write_text("concept,baseline_setting\ninduction,s\n")
    missing = str(tmp_path / "missing.h5")  # never opened: the table is refused first
    with pytest.raises(SystemExit) as caught:
        main(["report-graphs", "--circuit", "x", "induction", missing, missing, missing, "--selected", str(selected),
              "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert (f"{selected} (--selected) is missing column(s) 'baseline_k_target', 'majority_setting', "
            f"'majority_k_target', 'certified_setting', 'certified_k_target'") in err
    assert "report-sufficiency --select-on" in err and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ the reference images of a mean fill


@pytest.mark.parametrize("stage", ["vision-ground-truth", "vision-evaluate"])
def test_reference_size_is_bounded_where_the_fill_would_load_too_many_images(
        stage: str, capsys: pytest.CaptureFixture) -> None:
    from certified_circuits.cli.main import main

    with pytest.raises(SystemExit) as caught:
        main([stage, "--reference-size", str(MAX_REFERENCE_SIZE + 1)])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert f"--reference-size: {MAX_REFERENCE_SIZE + 1} is above {MAX_REFERENCE_SIZE}" in err
    assert "loads its reference images as one batch" in err


def test_the_schema_bounds_mean_reference_size_by_the_same_number() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    bound = schema["properties"]["vision"]["properties"]["mean_reference_size"]
    assert (bound["minimum"], bound["maximum"]) == (1, MAX_REFERENCE_SIZE) == (1, 5000)
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["vision"]["mean_reference_size"] = MAX_REFERENCE_SIZE + 1
    with pytest.raises(Exception, match="5001 is greater than the maximum of 5000"):
        validate(config, str(SCHEMA), set_default=True)


# ------------------------------------------------------------------------ a testbed key that runs nothing


def _default() -> dict:
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate(config, str(SCHEMA), set_default=True)
    return config


def test_resamples_without_a_ground_truth_is_said_not_ignored() -> None:
    default = _default()
    assert default["testbed"]["resamples"] == 20 and testbed.testbed_notes(default) == []  # both models have a truth
    other = copy.deepcopy(default)
    other["vision"]["train"]["compiled"] = None  # a trained world model without planted circuits
    other["language"]["tasks"] = [t for t in other["language"]["tasks"] if t != "induction"]
    assert testbed.ground_truth_experiments(other) == {}
    assert testbed.testbed_notes(other) == [
        "testbed.resamples is 20, but no enabled experiment has a ground truth (the embedded world model with "
        "vision.train.compiled or planted_own, or the embedded language model with the induction task), so no stability jobs "
        "run; set testbed.resamples: 0 to say so in the config"]
    other["testbed"]["resamples"] = 0
    assert testbed.testbed_notes(other) == []
    one = copy.deepcopy(default)
    one["language"]["enabled"] = False  # the vision truth alone: its stability jobs run, nothing to say
    assert testbed.testbed_notes(one) == []
