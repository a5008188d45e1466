"""MIB's own task data read from a local download (language/mib_data.py), on fixtures written in MIB's schema:
column names and nesting from hannamw/MIB-circuit-track ``MIB_circuit_track/dataset.py`` (``prompt``,
``metadata.indirect_object``/``subject``/``random_c``, ``s2_io_flip_counterfactual.prompt``, ``choices.label``,
``answerKey``, ``symbol_counterfactual``, ``label``, ``operator``, ``random_counterfactual``)."""

from __future__ import annotations

import json

import pytest

from certified_circuits.language.mib_data import (MIBDataError, available_splits, is_mib_dataset, load_mib_task,
                                                  mib_examples, read_split)
from certified_circuits.language.task_files import TaskFileError, load_task_file, task_file_has_ood
from certified_circuits.language.tokenizer import HFPromptTokenizer
from tests.helpers.family_fixtures import bpe_tokenizer, ioi_prompt


def ioi_row(a: str, b: str) -> dict:
    """One IOI row (``A`` the indirect object, ``B`` the subject), with the three counterfactuals MIB ships."""
    return {"prompt": ioi_prompt(a, b, b), "metadata": {"subject": b, "indirect_object": a, "random_c": "Tom"},
            "s2_io_flip_counterfactual": {"prompt": ioi_prompt(a, b, a), "choices": None},
            "s1_io_flip_counterfactual": {"prompt": ioi_prompt(b, a, b), "choices": None},
            "abc_counterfactual": {"prompt": ioi_prompt("Kate", "Mark", "Mark"), "choices": None}}


def mcqa_row(i: int) -> dict:
    """One MCQA row: answer ``choices.label[answerKey]``; the symbol counterfactual relabels the choices."""
    return {"prompt": f"The {i} is red. Answer: A. red B. blue Answer:", "choices": {"label": ["A", "B"],
            "text": ["red", "blue"]}, "answerKey": i % 2,
            "symbol_counterfactual": {"prompt": f"The {i} is red. Answer: B. red A. blue Answer:",
                                      "choices": {"label": ["B", "A"], "text": ["red", "blue"]}, "answerKey": i % 2}}


def arith_row(x: int, y: int, op: str, cf: bool = True) -> dict:
    value = x + y if op == "+" else x - y
    return {"prompt": f"Q: {x}{op}{y}=", "label": value, "operator": op,
            "random_counterfactual": ({"prompt": f"Q: {x + 1}{op}{y}=", "label": value + 1} if cf else None)}


def save_to_disk(folder, splits: dict[str, list[dict]]):
    """MIB's data as ``datasets.DatasetDict.save_to_disk`` writes it (Arrow IPC streams)."""
    import datasets

    datasets.DatasetDict({s: datasets.Dataset.from_list(rows) for s, rows in splits.items()}).save_to_disk(str(folder))
    return folder


def hub_parquet(folder, splits: dict[str, list[dict]], sub: str = "data"):
    """MIB's data as a hub download: ``<sub>/<split>-00000-of-00001.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / sub).mkdir(parents=True, exist_ok=True)
    for s, rows in splits.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / sub / f"{s}-00000-of-00001.parquet")
    return folder


@pytest.fixture(scope="module")
def tok():
    return HFPromptTokenizer(bpe_tokenizer())


def test_ioi_save_to_disk_reads_mibs_counterfactual_answer_and_splits(tmp_path, tok):
    rows = {"train": [ioi_row("Mary", "John"), ioi_row("Anna", "Paul")], "validation": [ioi_row("Lucy", "Tom")],
            "test": [ioi_row("Kate", "Mark"), ioi_row("John", "Mary"), ioi_row("Tom", "Anna")]}
    folder = save_to_disk(tmp_path / "ioi", rows)
    assert is_mib_dataset(folder) and available_splits(folder, "ioi") == ["train", "validation", "test"]
    splits = load_mib_task(folder, "ioi", tokenizer=tok)
    assert [len(splits[s]) for s in ("train", "validation", "id_test", "ood_test")] == [2, 1, 3, 0]
    ex = splits["train"][1]
    assert ex.id == "ioi-train-00001" and ex.split == "train" and ex.task == "ioi"
    assert ex.clean == ioi_prompt("Anna", "Paul", "Paul")
    assert ex.corrupted == ioi_prompt("Anna", "Paul", "Anna")  # s2_io_flip, not s1 or abc
    assert (ex.answer, ex.distractor) == (" Anna", " Paul")  # " " + indirect_object, " " + subject
    # the loader behind language.task_files and language-task-file takes a folder of MIB data
    assert load_task_file(folder, "ioi", seed=0, tokenizer=tok) == splits
    assert task_file_has_ood(folder) is False


def test_the_user_picks_the_split(tmp_path, tok):
    folder = save_to_disk(tmp_path / "ioi", {"train": [ioi_row("Mary", "John")],
                                             "validation": [ioi_row("Lucy", "Tom"), ioi_row("Tom", "Lucy")]})
    with pytest.raises(MIBDataError, match=r"no 'test' split; found \['train', 'validation'\]"):
        load_mib_task(folder, "ioi")
    splits = load_mib_task(folder, "ioi", splits={"id_test": "validation"})
    assert [e.id for e in splits["id_test"]] == ["ioi-validation-00000", "ioi-validation-00001"]
    assert [e.answer for e in mib_examples(folder, "ioi", "validation", tokenizer=tok)] == [" Lucy", " Tom"]


def test_mcqa_hub_parquet_in_its_config_folder_answers_letters(tmp_path, tok):
    rows = {s: [mcqa_row(i) for i in range(3)] for s in ("train", "validation", "test")}
    folder = hub_parquet(tmp_path / "mcqa", rows, sub="4_answer_choices")
    hub_parquet(folder, {"train": [mcqa_row(9)]}, sub="2_answer_choices")  # another config: not read
    splits = load_mib_task(folder, "mcqa", tokenizer=tok)
    assert len(splits["train"]) == 3
    # answerKey 0 -> label "A"; the counterfactual's answerKey 0 -> its label "B" (no leading space, as MIB)
    assert [(e.answer, e.distractor) for e in splits["train"]] == [("A", "B"), ("B", "A"), ("A", "B")]
    assert splits["train"][0].corrupted.startswith("The 0 is red. Answer: B. red")


def test_arc_reads_json_lines(tmp_path, tok):
    folder = tmp_path / "arc"
    folder.mkdir()
    for s in ("train", "validation", "test"):
        (folder / f"{s}.jsonl").write_text("\n".join(json.dumps(mcqa_row(i)) for i in range(2)) + "\n")
    splits = load_mib_task(folder, "arc_easy", tokenizer=tok)
    assert [(e.answer, e.distractor) for e in splits["id_test"]] == [("A", "B"), ("B", "A")]


def test_arithmetic_keeps_mibs_operator_rows_and_refuses_a_split_number(tmp_path, tok):
    train = [arith_row(3, 4, "+"), arith_row(2, 2, "-"), arith_row(1, 5, "+", cf=False), arith_row(2, 6, "+")]
    rows = {"train": train, "validation": [arith_row(1, 1, "+")], "test": [arith_row(1, 2, "+")]}
    folder = hub_parquet(tmp_path / "add", rows)
    splits = load_mib_task(folder, "arithmetic_addition")  # no tokenizer: the rows as MIB filters them
    assert [(e.id, e.answer, e.distractor) for e in splits["train"]] == [
        ("arithmetic_addition-train-00000", "7", "8"), ("arithmetic_addition-train-00003", "8", "9")]
    assert [e.answer for e in load_mib_task(folder, "arithmetic_subtraction", splits={
        "validation": "train", "id_test": "train"})["train"]] == ["0"]
    # "10" is two tokens of the fixture's BPE (MIB drops such a row; we refuse it, naming the row)
    rows["test"] = [arith_row(5, 5, "+")]
    folder = hub_parquet(tmp_path / "add2", rows)
    with pytest.raises(TaskFileError, match=r"id arithmetic_addition-test-00000\): answer '10' is not one token"):
        load_mib_task(folder, "arithmetic_addition", tokenizer=tok)


def test_wrong_task_and_missing_columns_are_named(tmp_path):
    folder = hub_parquet(tmp_path / "x", {"train": [{"prompt": "a", "label": 1}]})
    with pytest.raises(MIBDataError, match=r"task 'greater_than' is not one of MIB's tasks"):
        read_split(folder, "greater_than", "train")
    with pytest.raises(MIBDataError, match=r"no s2_io_flip_counterfactual.prompt .*columns are \['label', 'prompt'\]"):
        load_mib_task(folder, "ioi", splits={"validation": "train", "id_test": "train"})


def test_language_task_file_splits_a_mib_folder(tmp_path) -> None:
    from certified_circuits.cli.main import main
    from certified_circuits.language.tasks import read_jsonl
    from tests.helpers.family_fixtures import save_family

    model = save_family("gpt2", tmp_path / "model")
    rows = {"train": [ioi_row("Mary", "John")], "validation": [ioi_row("Lucy", "Tom")],
            "test": [ioi_row("Kate", "Mark"), ioi_row("Tom", "Anna")]}
    folder = hub_parquet(tmp_path / "ioi", rows)
    assert main(["language-task-file", "--task", "ioi", "--file", str(folder), "--model-path", str(model),
                 "--out-dir", str(tmp_path / "out")]) == 0
    assert [e.id for e in read_jsonl(tmp_path / "out" / "id_test.jsonl")] == ["ioi-test-00000", "ioi-test-00001"]
    assert read_jsonl(tmp_path / "out" / "ood_test.jsonl") == []


def test_a_data_folder_for_a_task_not_named_after_mibs_is_refused(tmp_path) -> None:
    folder = save_to_disk(tmp_path / "ioi", {"train": [ioi_row("Mary", "John")]})
    with pytest.raises(IsADirectoryError, match=r"is a folder, not a file: .*read for a task named after MIB's: ioi, mcqa"):
        load_task_file(folder, "my_task", seed=0)
