"""MIB's data folders (language/mib_data.py). Issue 45: Arrow, Parquet and JSON lines are read by one reader that
names the file and the line or row of every refusal: a JSON error at its line in the file, a file that is not UTF-8,
a damaged Arrow or Parquet file, a row that is not an object, a key given twice, a row without MIB's columns.
Issue 53: an MCQA/ARC ``answerKey`` that is not a 0-based index of ``choices.label`` (a letter, -1, an index past the
labels) is refused with the file, the row and the key and what is accepted (it gave ``invalid literal for int()``
naming nothing, and -1 was read as the last label), by the reader and by ``language-task-file`` (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certified_circuits.cli.main import main
from certified_circuits.language.mib_data import MIBDataError, load_mib_task, read_split, split_rows

ROW = {"prompt": "When Mary and John went, John gave it to", "metadata": {"subject": "John", "indirect_object": "Mary"},
       "s2_io_flip_counterfactual": {"prompt": "When Mary and John went, Mary gave it to"}}


def _jsonl(folder: Path, split: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_jsonl_error_names_the_file_and_its_line(tmp_path: Path) -> None:
    good = json.dumps(ROW)
    path = _jsonl(tmp_path / "ioi", "validation", [good, "", good, '{"prompt": "x",'])
    with pytest.raises(MIBDataError, match=rf"{path}:4: not a JSON line \(.*each line of a JSON-lines file is one "
                                           r"row object; download the split again"):
        read_split(tmp_path / "ioi", "ioi", "validation")


def test_a_jsonl_row_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "ioi", "validation", [json.dumps(ROW), "[1, 2]"])
    with pytest.raises(MIBDataError, match=rf"{path}:2: a row is a JSON list, not an object with MIB's columns"):
        read_split(tmp_path / "ioi", "ioi", "validation")


def test_a_jsonl_row_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "ioi", "validation", ['{"prompt": "a", "prompt": "b"}'])
    with pytest.raises(MIBDataError, match=rf"{path}:1: key 'prompt' is given more than once"):
        read_split(tmp_path / "ioi", "ioi", "validation")


def test_a_mib_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "ioi"
    folder.mkdir()
    path = folder / "validation.jsonl"
    path.write_bytes(json.dumps(ROW).encode("utf-16"))
    with pytest.raises(MIBDataError, match=rf"{path} is not UTF-8 text \(byte 0"):
        read_split(folder, "ioi", "validation")


def test_a_json_array_error_names_the_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "ioi"
    folder.mkdir()
    path = folder / "validation.json"
    path.write_text("[\n" + json.dumps(ROW) + ",\n]\n")
    with pytest.raises(MIBDataError, match=rf"{path}:3: not valid JSON"):
        read_split(folder, "ioi", "validation")


@pytest.mark.parametrize("suffix, kind", [(".parquet", "Parquet"), (".arrow", "Arrow")])
def test_a_damaged_table_file_is_named(tmp_path: Path, suffix: str, kind: str) -> None:
    folder = tmp_path / "ioi" / "data"
    folder.mkdir(parents=True)
    path = folder / f"validation-00000-of-00001{suffix}"
    path.write_bytes(b"PAR1 this is not a table")
    with pytest.raises(MIBDataError, match=rf"{path} is not a readable {kind} file .*download the split again"):
        read_split(tmp_path / "ioi", "ioi", "validation")


def test_a_row_without_mibs_columns_names_its_file_and_line(tmp_path: Path) -> None:
    broken = {k: v for k, v in ROW.items() if k != "metadata"}
    path = _jsonl(tmp_path / "ioi", "validation", [json.dumps(ROW), json.dumps(broken)])
    _jsonl(tmp_path / "ioi", "test", [json.dumps(ROW)])
    _jsonl(tmp_path / "ioi", "train", [json.dumps(ROW)])
    with pytest.raises(MIBDataError, match=rf"{path}:2 \(validation split\): no metadata.indirect_object"):
        load_mib_task(tmp_path / "ioi", "ioi")


def test_rows_keep_their_places(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "ioi", "validation", [json.dumps(ROW), "", json.dumps(ROW)])
    assert [place for place, _ in split_rows(tmp_path / "ioi", "ioi", "validation")] == [f"{path}:1", f"{path}:3"]


def _row(i: int, key: object = None, cf_key: object = None) -> dict:
    """One MCQA row in MIB's schema (tests/unit/language/test_mib_data.py's): labels A, B; counterfactual B, A."""
    return {"prompt": f"The {i} is red. Answer: A. red B. blue Answer:",
            "choices": {"label": ["A", "B"], "text": ["red", "blue"]}, "answerKey": i % 2 if key is None else key,
            "symbol_counterfactual": {"prompt": f"The {i} is red. Answer: B. red A. blue Answer:",
                                      "choices": {"label": ["B", "A"], "text": ["red", "blue"]},
                                      "answerKey": i % 2 if cf_key is None else cf_key}}


def _folder(tmp_path: Path, validation: list[dict]) -> Path:
    folder = tmp_path / "mcqa"
    folder.mkdir()
    for split, rows in (("train", [_row(0), _row(1)]), ("validation", validation), ("test", [_row(2)])):
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


# ------------------------------------------------------------------------------ answerKey


@pytest.mark.parametrize("key, cf_key, shown", [
    ("A", None, "answerKey is 'A'"),
    (-1, None, "answerKey is -1"),
    ("-1", None, "answerKey is '-1'"),
    (2, None, "answerKey is 2"),
    (1.0, None, "answerKey is 1.0"),
    (True, None, "answerKey is True"),
    (None, "B", "symbol_counterfactual.answerKey is 'B'"),
])
def test_an_answer_key_that_is_not_an_index_of_the_labels_is_refused_by_file_row_and_key(
        tmp_path: Path, key: object, cf_key: object, shown: str) -> None:
    folder = _folder(tmp_path, [_row(0), _row(1, key, cf_key)])
    labels = "['B', 'A']" if shown.startswith("symbol") else "['A', 'B']"
    prefix = "symbol_counterfactual." if shown.startswith("symbol") else ""
    with pytest.raises(MIBDataError) as caught:
        load_mib_task(folder, "mcqa")
    assert str(caught.value) == (
        f"{folder / 'validation.jsonl'}:2 (validation split): {shown}; MIB reads it as the 0-based index of the "
        f"answer in {prefix}choices.label {labels}, so it is an integer from 0 to 1: is this MIB's dataset of the "
        "task (ARC's original files give a letter)? download MIB's split again")


def test_a_valid_answer_key_reads_its_label_as_an_integer_or_its_digits(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_row(0, 1, 0), _row(1, "0", " 1 ")])
    examples = load_mib_task(folder, "mcqa")["validation"]
    assert [(e.answer, e.distractor) for e in examples] == [("B", "B"), ("A", "A")]


def test_labels_that_are_not_a_list_are_named(tmp_path: Path) -> None:
    row = _row(0)
    row["choices"]["label"] = "AB"
    folder = _folder(tmp_path, [row])
    with pytest.raises(MIBDataError, match=r"validation.jsonl:1 \(validation split\): choices.label is 'AB', not a "
                                           r"list of the choices' labels"):
        load_mib_task(folder, "mcqa")


def test_language_task_file_refuses_a_letter_answer_key_with_exit_2(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    from tests.helpers.family_fixtures import save_family

    model = save_family("gpt2", tmp_path / "model")
    folder = _folder(tmp_path, [_row(0, "A")])
    with pytest.raises(SystemExit) as caught:
        main(["language-task-file", "--task", "mcqa", "--file", str(folder), "--model-path", str(model),
              "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err and "invalid literal" not in err
    assert f"{folder / 'validation.jsonl'}:1 (validation split): answerKey is 'A'; MIB reads it as the 0-based" in err
    assert not (tmp_path / "out").exists()
