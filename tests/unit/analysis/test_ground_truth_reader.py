"""The ground-truth file's one reader (analysis/recovery.read_ground_truth; issue 45), and the summary's truth finding
that reads through it: a string is not a boolean, a concept or component given twice is refused (fast on a large
file), text fields are strings, a misspelt field is refused (never dropped), a file that is not UTF-8 is named; a
valid file still reads. Every refusal names the file, what is wrong and the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT, read_ground_truth


def _truth(**concepts: object) -> dict:
    return {"format": GROUND_TRUTH_FORMAT, "experiment": "testbed", "kind": "vision", "n_components": 8,
            "concepts": concepts or {"circle": {"components": ["a", "b"], "verification": {"passed": True}}}}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


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
