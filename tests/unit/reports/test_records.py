"""Issue 45: the records the report stages read (plan records, the warning list, curves tables; reports/flags.py) are
read strictly by one reader per kind: the file's kind is checked, a record of the wrong shape is refused, and every
refusal names the file, what is wrong and the fix (exit status 2 from report-warnings, report-plan-warnings and
report-model-seeds). The strict JSON reader under them is tested in tests/unit/storage/test_documents.py, the
ground-truth reader in tests/unit/analysis/test_ground_truth_reader.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certified_circuits.cli.main import main
from certified_circuits.reports.flags import (
    FLAGS_FORMAT,
    PLAN_FORMAT,
    Flag,
    read_curves,
    read_flags,
    read_plan_records,
    write_flags,
)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ plan records and the warning list


def _plan_doc(tmp_path: Path, records: object) -> Path:
    return _write(tmp_path / "plan.json", json.dumps({"format": PLAN_FORMAT, "warnings": records}))


def test_a_warnings_list_is_not_plan_records(tmp_path: Path) -> None:
    path = write_flags(tmp_path / "warnings.json", [Flag("plan", "w", "m", "f")])
    with pytest.raises(ValueError, match=r"warnings.json is not a plan-warnings file: its format is "
                                         rf"'{FLAGS_FORMAT}', expected '{PLAN_FORMAT}'; pass the plan/warnings.json"):
        read_plan_records(path)


@pytest.mark.parametrize("records, problem", [
    ({"a": 1}, "warnings is a dict, expected a list of records"),
    ([{"where": "w"}], r"warnings\[0\] lacks \['key', 'radius', 'message', 'fix'\]"),
    (["text"], r"warnings\[0\] lacks"),
])
def test_plan_records_of_the_wrong_shape_are_refused(tmp_path: Path, records: object, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"plan.json: {problem}.*report-plan-warnings"):
        read_plan_records(_plan_doc(tmp_path, records))


def test_plan_records_are_not_a_warnings_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"plan.json is not a warnings list: .*pass the run's warnings.json"):
        read_flags(_plan_doc(tmp_path, []))


@pytest.mark.parametrize("flag, problem", [
    ({"code": "plan", "where": "w", "message": "m"}, r"field\(s\) \['fix'\] are missing"),
    ({"code": "nope", "where": "w", "message": "m", "fix": "f"}, "code 'nope' is unknown"),
    ({"code": "plan", "where": 3, "message": "m", "fix": "f"}, r"field\(s\) \['where'\] are missing, unknown or not strings"),
    ("plan", "a str, not an object"),
])
def test_flags_of_the_wrong_shape_are_refused(tmp_path: Path, flag: object, problem: str) -> None:
    path = _write(tmp_path / "warnings.json", json.dumps({"format": FLAGS_FORMAT, "flags": [flag]}))
    with pytest.raises(ValueError, match=rf"warnings.json: flags\[0\]: {problem}"):
        read_flags(path)


def test_a_written_warnings_list_reads_back(tmp_path: Path) -> None:
    flags = [Flag("plan", "w", "m", "f", experiment="e")]
    assert read_flags(write_flags(tmp_path / "warnings.json", flags)) == flags


# ------------------------------------------------------------------------------ curves tables


@pytest.mark.parametrize("text, problem", [
    ("concept,votes\n1,2\n", r"is not a curves table: it lacks column\(s\) \['method', 'k_target', 'k_effective', "
                             r"'cacc \(or accuracy\)'\]"),
    ("method,k_target,k_effective,cacc\n", r"holds no rows \(header only\)"),
    ("", "not a readable curves CSV"),
])
def test_a_file_that_is_not_a_curves_table_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"curves.csv \(--curves\).*{problem}"):
        read_curves(_write(tmp_path / "curves.csv", text))


def test_report_warnings_refuses_the_wrong_files_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    flags = write_flags(tmp_path / "warnings.json", [])
    wrong = _write(tmp_path / "curves.csv", "concept,votes\n1,2\n")
    for argv, named in (
        (["--plan-warnings", str(flags)], "is not a plan-warnings file"),
        (["--curves", str(wrong)], "(--curves) is not a curves table"),
    ):
        with pytest.raises(SystemExit) as caught:
            main(["report-warnings", *argv, "--out", str(tmp_path / "out.json")])
        err = capsys.readouterr().err
        assert caught.value.code == 2 and named in err and "Traceback" not in err
    assert not (tmp_path / "out.json").exists()


# ------------------------------------------------------------------------------ report-plan-warnings and report-model-seeds


@pytest.mark.parametrize("records, problem", [
    ('[{"where": "w", "key": "k", "radius": 1, "message": "m"}]', r"--records[0] lacks ['fix']"),
    ('{"where": "w"}', "--records is a dict, expected a list of records"),
    ('[{"where": "a", "where": "b"}]', "--records is not JSON (key 'where' is given more than once"),
])
def test_report_plan_warnings_checks_its_records_as_the_reader_does(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                   records: str, problem: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["report-plan-warnings", "--records", records, "--out", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and problem in err and "plan_records" in err
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("seed", ["010", "s1", "-1", "1.0"])
def test_report_model_seeds_takes_decimal_seeds(tmp_path: Path, capsys: pytest.CaptureFixture, seed: str) -> None:
    table = _write(tmp_path / "stability.csv", "a\n1\n")
    with pytest.raises(SystemExit) as caught:
        main(["report-model-seeds", "--run", seed, str(table), "--name", "n", "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and f"the seed {seed!r} is not a decimal integer without leading zeros" in err


def test_report_model_seeds_refuses_tables_of_different_kinds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "a").mkdir()
    stability = _write(tmp_path / "a" / "stability.csv", "a\n1\n")
    recovery = _write(tmp_path / "recovery.csv", "a\n1\n")
    with pytest.raises(SystemExit) as caught:
        main(["report-model-seeds", "--run", "0", str(stability), "--run", "1", str(recovery), "--name", "n",
              "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "--run tables of different kinds: ['recovery.csv', 'stability.csv']" in err


def test_report_model_seeds_reads_stability_tables_with_their_reader(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    table = _write(tmp_path / "stability.csv", "experiment,k_target\nworld,0.1\n")
    with pytest.raises(SystemExit) as caught:
        main(["report-model-seeds", "--run", "0", str(table), "--name", "n", "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "stability.csv (--run) is missing column(s) 'concept'" in err
