"""Prompts with words the tokenizer maps to its unknown token are an error before any work (issue 29.1), naming
the task file's row, the column and the words; byte-level BPE (no unknown token) never triggers it."""

from __future__ import annotations

import pytest

from certified_circuits.language.task_files import TaskFileError, load_task_file
from certified_circuits.language.tokenizer import HFPromptTokenizer

from tests.helpers.family_fixtures import bpe_tokenizer, ioi_prompt

NAMES = ["Mary", "John", "Anna", "Tom", "Lucy", "Paul"]


def word_level_tokenizer() -> HFPromptTokenizer:
    """A word-level tokenizer with ``[UNK]`` over the fixture's IOI words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for a in NAMES for w in ioi_prompt(a, a, a).replace(",", " ,").replace(".", " .").split()})
    vocab = {w: i for i, w in enumerate(["[UNK]", "[BOS]", *words])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return HFPromptTokenizer(PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[UNK]"))


def _write(path, rows) -> None:
    lines = ["clean,corrupted,answer,distractor"]
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def _rows(prompt=ioi_prompt):
    pairs = [("Mary", "John"), ("Tom", "Lucy"), ("Anna", "Paul"), ("John", "Tom"), ("Lucy", "Anna")]
    return [
        (
            prompt(a, b, b).replace(",", " ,").replace(".", " ."),
            prompt(b, a, a).replace(",", " ,").replace(".", " ."),
            a,
            b,
        )
        for a, b in pairs
    ]


def test_unknown_words_are_an_error_naming_the_row_column_and_words(tmp_path) -> None:
    tok = word_level_tokenizer()
    assert tok.unknown_token == "[UNK]"
    rows = _rows()
    rows[2] = (rows[2][0].replace("garden", "zoo"), rows[2][1].replace("garden", "zoo"), rows[2][2], rows[2][3])
    rows[4] = (rows[4][0], rows[4][1], "Zed", rows[4][3])
    path = tmp_path / "task.csv"
    _write(path, rows)
    with pytest.raises(TaskFileError) as err:
        load_task_file(path, "t", seed=0, tokenizer=tok)
    text = str(err.value)
    assert "2 of 5 rows fail" in text
    assert f"{path}:4: the clean has word(s) the tokenizer maps to its unknown token '[UNK]': 'zoo'" in text
    assert "the corrupted has word(s)" in text  # both prompts of row 4
    assert f"{path}:6: the answer has word(s) the tokenizer maps to its unknown token '[UNK]': 'Zed'" in text
    assert "replace the words the tokenizer does not know" in text
    assert tok.unknown_words("Then , Mary met zoo and Zed and zoo") == ["met", "zoo", "Zed"]


def test_known_words_and_byte_level_bpe_pass(tmp_path) -> None:
    path = tmp_path / "task.csv"
    _write(path, _rows())
    splits = load_task_file(path, "t", seed=0, tokenizer=word_level_tokenizer())
    assert sum(len(v) for v in splits.values()) == 5
    bpe = HFPromptTokenizer(bpe_tokenizer())
    assert bpe.unknown_token is None and bpe.unknown_words("Then, Zorblax went to the zoo") == []
