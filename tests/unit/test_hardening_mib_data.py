"""Issue 45: MIB's data folders (Arrow, Parquet, JSON lines) are read by one reader that names the file and the line
or row of every refusal: a JSON error at its line in the file, a file that is not UTF-8, a damaged Arrow or Parquet
file, a row that is not an object, a key given twice, a row without MIB's columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
