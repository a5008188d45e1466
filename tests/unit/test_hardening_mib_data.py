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


# ------------------------------------------------------------------------------ report-mib checks every option first


def _report_mib(tmp_path: Path, capsys: pytest.CaptureFixture, *argv: str) -> str:
    from certified_circuits.cli.main import main

    with pytest.raises(SystemExit) as caught:
        main(["report-mib", *argv, "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written
    return err


def _files(tmp_path: Path) -> list[str]:
    files = []
    for name in ("attr.h5", "votes.h5", "certs.h5"):
        (tmp_path / name).write_bytes(b"x" * 8)
        files.append(str(tmp_path / name))
    return files


@pytest.mark.parametrize("option, value", [("--model-name", "my_model"), ("--method", "my_method")])
def test_report_mib_refuses_a_name_with_an_underscore(tmp_path: Path, capsys: pytest.CaptureFixture, option: str,
                                                       value: str) -> None:
    argv = ["--model-name", "gpt2", "--circuit", "ioi", *_files(tmp_path)]
    argv += [option, value]
    err = _report_mib(tmp_path, capsys, *argv)
    assert f"{option} {value!r}: MIB's folders are" in err and "use '-'" in err


def test_report_mib_refuses_a_bad_task_name_by_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "io i", *_files(tmp_path))
    assert "--circuit io i: task name 'io i' may hold only letters, digits, _ and -" in err


def test_report_mib_checks_the_last_tasks_files_before_writing_the_first(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    import numpy as np

    import certified_circuits as cc
    from certified_circuits.core.setting import Setting

    scores = np.random.default_rng(0).normal(size=(20, 6))
    setting = Setting(p_del=0.8, n0=20, n=100, tau=0.7, alpha=0.05)
    certificate = str(cc.certify_scores(scores, np.zeros(6, int), [0.5, 1.0], setting).save(tmp_path / "c.h5"))
    attr = _files(tmp_path)[0]
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "ioi", attr, certificate, certificate,
                      "--circuit", "mcqa", str(tmp_path / "missing.h5"), certificate, certificate)
    assert "--circuit mcqa: " in err and "missing.h5 does not exist" in err


@pytest.mark.parametrize("text, problem", [
    ("concept,k\nioi,0.1\n", " is missing column(s) 'certified_setting'"),
    ("concept,certified_setting\n", " holds no rows (header only)"),
    ("concept,certified_setting\n\xe9t\xe9,x\n", ": not a readable selected table (not UTF-8 text: line 2: "),
])
def test_report_mib_refuses_a_selected_table_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             text: str, problem: str) -> None:
    selected = tmp_path / "selected.csv"
    selected.write_bytes(text.encode("latin-1"))
    err = _report_mib(tmp_path, capsys, "--model-name", "gpt2", "--circuit", "ioi", *_files(tmp_path),
                      "--selected", str(selected))
    assert f"selected.csv (--selected){problem}" in err and "report-sufficiency --select-on" in err
