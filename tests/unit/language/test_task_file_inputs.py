"""Task files (language/task_files.py, language/tasks.py; issues 28 and 45): a duplicate row is dropped with a
warning and no prompt is in two splits, a prompt named in two splits is refused, rows that share a clean prompt stay in
one split, a path that is a folder says so, a very long field is valid CSV, and task examples that are not UTF-8 name
the file and the line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from certified_circuits.language.task_files import TaskFileError, assign_splits, load_task_file, read_task_file


HEADER = "clean,corrupted,answer,distractor"


def _rows(n: int) -> list[str]:
    return [f"When A{i} and B{i} went out B{i} gave it to,When A{i} and B{i} went out C{i} gave it to, A{i}, B{i}"
            for i in range(n)]


def test_duplicate_rows_are_dropped_with_a_warning_and_no_prompt_is_in_two_splits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = _rows(12)
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER, *rows, rows[0], rows[3], rows[0]]) + "\n")  # lines 14, 15, 16 repeat 2, 5, 2
    with caplog.at_level(logging.WARNING):
        read = read_task_file(path, "t")
    assert len(read) == 12
    assert f"task file {path}: dropped 3 duplicate row(s), so no prompt is in two splits: line 14 (repeats 2), " \
           f"15 (repeats 5), 16 (repeats 2)" in caplog.text
    for seed in range(30):
        splits = load_task_file(path, "t", seed=seed)
        where: dict[str, str] = {}
        for split, examples in splits.items():
            for example in examples:
                assert where.setdefault(example.clean, split) == split, (seed, example.clean)


def test_a_prompt_named_in_two_splits_is_refused(tmp_path: Path) -> None:
    rows = _rows(4)
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER + ",split", *(f"{r},{s}" for r, s in zip(rows, ("train", "validation", "id_test",
                                                                                      "train"))), f"{rows[0]},id_test"]))
    with pytest.raises(TaskFileError, match=rf"{path}:6: this row repeats row 2 but names split id_test where row 2 "
                                            r"names train: one prompt in two splits leaks"):
        read_task_file(path, "t")
    # one clean prompt with another corruption is a valid row, but not in another split than its first row
    clean, corrupted, answer, distractor = rows[1].split(",")
    other = f"{clean},{corrupted} again,{answer},{distractor}"
    path.write_text("\n".join([HEADER + ",split", *(f"{r},{s}" for r, s in zip(rows, ("train", "validation", "id_test",
                                                                                      "train"))), f"{other},id_test"]))
    with pytest.raises(TaskFileError, match=r"the clean prompt .* is in split validation \(row 3\) and id_test \(row 6\)"):
        load_task_file(path, "t", seed=0)


def test_rows_sharing_a_clean_prompt_stay_in_one_split_of_the_seeded_split(tmp_path: Path) -> None:
    """The unit of the seeded split is a clean prompt: 10 prompts, two of them with a second corruption, give
    splits of 6/2/2 prompts (round(0.6 m), round(0.2 m) of m = 10), whatever the seed; with distinct prompts the
    split is the 60/20/20 split of the rows."""
    path = tmp_path / "task.csv"
    rows = _rows(10)
    extra = [r.replace(" went out C", " went home C") for r in rows[2:4]]  # rows 2 and 3 again, another corruption
    path.write_text("\n".join([HEADER, *rows, *extra]))
    read = read_task_file(path, "t")
    assert len(read) == 12
    for seed in range(30):
        splits = assign_splits(read, "t", seed, path=path)
        prompts = {split: {e.clean for e in examples} for split, examples in splits.items()}
        assert [len(prompts[s]) for s in ("train", "validation", "id_test")] == [6, 2, 2]
        assert sum(len(v) for v in splits.values()) == 12
        for a in read[2:4]:
            assert sum(a.clean in v for v in prompts.values()) == 1
    distinct = tmp_path / "distinct.csv"
    distinct.write_text("\n".join([HEADER, *rows]))
    splits = load_task_file(distinct, "t", seed=3)
    assert [len(splits[s]) for s in ("train", "validation", "id_test")] == [6, 2, 2]


def test_rows_given_directly_keep_a_copied_prompt_in_one_split(tmp_path: Path) -> None:
    path = tmp_path / "task.csv"
    path.write_text("\n".join([HEADER, *_rows(6)]))
    rows = read_task_file(path, "t")
    copied = rows + [type(rows[0])(**{**rows[0].__dict__, "row": 99, "id": "copy"})]
    for seed in range(20):  # before, some seed split the copy from its original
        splits = assign_splits(copied, "t", seed, path=path)
        assert sum(rows[0].clean in {e.clean for e in v} for v in splits.values()) == 1


def test_a_task_file_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=rf"task file {tmp_path} \(task 't'\) is a folder, not a file: give the "
                                                r"\.csv or \.jsonl file inside it"):
        read_task_file(tmp_path, "t")


def test_a_very_long_csv_field_is_valid_csv(tmp_path: Path) -> None:
    long_prompt = "word " * 40_000  # 200,000 characters: more than csv's default field limit (131,072)
    path = tmp_path / "task.csv"
    path.write_text(HEADER + "\n" + "\n".join(f'"{long_prompt}{i}","{long_prompt}x{i}", a, b' for i in range(4)))
    assert len(read_task_file(path, "t")[0].clean) == len(long_prompt) + 1


def test_task_examples_that_are_not_utf8_name_the_file_and_line(tmp_path: Path) -> None:
    from certified_circuits.language.tasks import read_jsonl

    path = tmp_path / "id_test.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "\xff"}\n')
    with pytest.raises(ValueError, match=r"id_test.jsonl:2: not UTF-8 text \(byte 20.*write task files as UTF-8"):
        read_jsonl(path)
