"""The strict JSON reader (storage/documents.py; issue 45): a key given twice, NaN or Infinity, a file that is not
UTF-8, a JSON error and a top level that is not an object are each refused by name (the file, where and the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certified_circuits.storage.documents import DocumentError, read_json_document


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


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
