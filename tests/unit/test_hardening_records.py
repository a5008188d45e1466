"""Issue 45: the files the new stages read (ground truth, plan records, the warning list, curves tables) are read
strictly by one reader per kind: a string is not a boolean, a key given twice is an error, the file's kind is
checked, and every refusal names the file, what is wrong and the fix (exit status 2 from the CLI)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT, read_ground_truth
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
from certified_circuits.storage.documents import DocumentError, read_json_document


def _truth(**concepts: object) -> dict:
    return {"format": GROUND_TRUTH_FORMAT, "experiment": "testbed", "kind": "vision", "n_components": 8,
            "concepts": concepts or {"circle": {"components": ["a", "b"], "verification": {"passed": True}}}}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ the strict JSON reader


def test_a_key_given_twice_is_refused_by_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.json", '{"a": 1, "a": 2}')
    with pytest.raises(DocumentError, match=r"doc.json: key 'a' is given more than once.*: rerun it"):
        read_json_document(path, "rerun it")


def test_nan_and_infinity_are_not_json_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.json", '{"a": NaN}')
    with pytest.raises(DocumentError, match="NaN is not a JSON number"):
        read_json_document(path, "rerun it")


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(DocumentError, match=r"doc.json is not UTF-8 text \(byte 7.*: rerun it"):
        read_json_document(path, "rerun it")


def test_a_json_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.json", '{\n"a": 1,\n}')
    with pytest.raises(DocumentError, match=r"doc.json is not valid JSON \(line 3, column 1"):
        read_json_document(path, "rerun it")


def test_a_list_at_the_top_level_is_not_a_document(tmp_path: Path) -> None:
    path = _write(tmp_path / "doc.json", "[]")
    with pytest.raises(DocumentError, match="the top level is a JSON list, not an object: it is not a thing"):
        read_json_document(path, "rerun it", what="thing")


# ------------------------------------------------------------------------------ ground truth


def test_passed_as_a_string_does_not_mark_the_truth_verified(tmp_path: Path) -> None:
    data = _truth(circle={"components": ["a"], "verification": {"passed": "false"}})
    path = _write(tmp_path / "gt.json", json.dumps(data))
    with pytest.raises(ValueError, match=r"gt.json: concept 'circle': verification.passed is 'false' \(str\), "
                                         r"expected JSON true or false.*rerun the stage"):
        read_ground_truth(path)


@pytest.mark.parametrize("passed", [1, 0, None, "true"])
def test_passed_must_be_a_json_boolean(tmp_path: Path, passed: object) -> None:
    path = _write(tmp_path / "gt.json", json.dumps(_truth(c={"components": ["a"], "verification": {"passed": passed}})))
    with pytest.raises(ValueError, match="verification.passed is .* expected JSON true or false"):
        read_ground_truth(path)


def test_a_concept_given_twice_is_refused_not_kept_once(tmp_path: Path) -> None:
    text = json.dumps(_truth())[:-2] + ', "circle": {"components": ["c"]}}}'
    path = _write(tmp_path / "gt.json", text)
    with pytest.raises(ValueError, match=r"gt.json: key 'circle' is given more than once.*vision-ground-truth"):
        read_ground_truth(path)


def test_a_large_ground_truth_with_a_duplicate_is_refused_fast(tmp_path: Path) -> None:
    names = [f"c{i}" for i in range(200_000)] + ["c7"]
    path = _write(tmp_path / "gt.json", json.dumps(_truth(big={"components": names})))
    with pytest.raises(ValueError, match=r"concept 'big' lists \['c7'\] more than once"):
        read_ground_truth(path)


@pytest.mark.parametrize("key, value", [("experiment", 3), ("experiment", ""), ("model", ["m"]), ("how", 1.5)])
def test_text_fields_must_be_strings(tmp_path: Path, key: str, value: object) -> None:
    path = _write(tmp_path / "gt.json", json.dumps({**_truth(), key: value}))
    with pytest.raises(ValueError, match=rf"gt.json: field '{key}' is .*expected a non-empty string"):
        read_ground_truth(path)


def test_a_ground_truth_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "gt.json"
    path.write_bytes(json.dumps(_truth()).encode("utf-16"))
    with pytest.raises(ValueError, match=r"gt.json is not UTF-8 text .*language-ground-truth"):
        read_ground_truth(path)


def test_a_valid_ground_truth_still_reads(tmp_path: Path) -> None:
    truth = read_ground_truth(_write(tmp_path / "gt.json", json.dumps(_truth())))
    assert truth.verified("circle") and truth.concepts == {"circle": ("a", "b")}


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


# ------------------------------------------------------------------------------ one reader per kind: findings, task examples


def test_the_summarys_truth_finding_reads_ground_truth_with_its_reader(tmp_path: Path) -> None:
    from certified_circuits.reports.findings import truth_finding

    data = _truth(circle={"components": ["a"], "verification": {"passed": "false"}})
    with pytest.raises(ValueError, match=r"verification.passed is 'false' \(str\), expected JSON true or false"):
        truth_finding(_write(tmp_path / "gt.json", json.dumps(data)))  # the validating reader: "false" is no boolean
    line = truth_finding(_write(tmp_path / "gt.json", json.dumps(_truth())))
    assert "passed their causal check for 1 of 1 concepts" in line
    with pytest.raises(ValueError, match="gt.json: key 'circle' is given more than once"):
        truth_finding(_write(tmp_path / "gt.json", json.dumps(_truth())[:-2] + ', "circle": {"components": []}}}'))
    with pytest.raises(ValueError, match="is not a ground-truth file: its format is"):
        truth_finding(_write(tmp_path / "gt.json", '{"format": "certified-circuits/warnings/1"}'))


def test_task_examples_that_are_not_utf8_name_the_file_and_line(tmp_path: Path) -> None:
    from certified_circuits.language.tasks import read_jsonl

    path = tmp_path / "id_test.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "\xff"}\n')
    with pytest.raises(ValueError, match=r"id_test.jsonl:2: not UTF-8 text \(byte 20.*write task files as UTF-8"):
        read_jsonl(path)


@pytest.mark.parametrize("change, problem", [
    (lambda d: d.update(n_component=d.pop("n_components")), "key 'n_component' is not a field; did you mean 'n_components'?"),
    (lambda d: d["concepts"]["circle"].update(verification={"pased": True}),
     "concept 'circle': key 'pased' is not a field; did you mean 'passed'?"),
    (lambda d: d["concepts"]["circle"].update(verificaton=d["concepts"]["circle"].pop("verification")),
     "concept 'circle': key 'verificaton' is not a field; did you mean 'verification'?"),
])
def test_a_misspelt_ground_truth_field_is_refused_not_dropped(tmp_path: Path, change, problem: str) -> None:
    data = _truth()
    change(data)
    with pytest.raises(ValueError, match=re.escape(problem)):
        read_ground_truth(_write(tmp_path / "gt.json", json.dumps(data)))
