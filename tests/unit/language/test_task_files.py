"""Tasks from files (``language.task_files``): reading, splits, token checks and their error messages."""

from __future__ import annotations

import csv
import json
import re

import pytest

from certified_circuits.language.task_files import (TaskFileError, assign_splits, check_tokens, load_task_file,
                                                    load_task_files, read_task_file, split_counts)
from certified_circuits.language.tasks import SPLITS

HEADER = ["clean", "corrupted", "answer", "distractor"]


class FakeBPE:
    """GPT-2-like toy tokenizer: one token per space-separated word; answers are one token only as
    ``" " + word`` (leading space, no inner space)."""

    pad_id = 0

    def __init__(self):
        self.index: dict[str, int] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.index) + 1

    def _id(self, w: str) -> int:
        return self.index.setdefault(w, len(self.index) + 1)

    def encode(self, text: str) -> list[int]:
        return [self._id(w) for w in text.split()]

    def answer_id(self, word: str) -> int:
        if not word.startswith(" ") or len(word) < 2 or any(c.isspace() for c in word[1:]):
            raise ValueError(f"{word!r} is not one token")
        return self._id(word)


def _pair(i: int) -> list[str]:
    """A valid row: equal word counts, single-token (leading-space) answer and distractor."""
    return [f"Then A{i} and B{i} went home. B{i} gave it to", f"Then C{i} and D{i} went home. D{i} gave it to",
            f" A{i}", f" B{i}"]


def write_csv(path, rows, header=HEADER):
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def write_jsonl(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def csv_file(tmp_path, n, name="t.csv"):
    return write_csv(tmp_path / name, [_pair(i) for i in range(n)])


def ids(splits):
    return {s: [e.id for e in v] for s, v in splits.items()}


# ---------------------------------------------------------------------------------------------- reading
def test_csv_keeps_values_exactly_and_rows_are_line_numbers(tmp_path):
    p = tmp_path / "ioi.csv"
    p.write_text('clean,corrupted,answer,distractor,notes\n'
                 '"Then, Mary and John left. John gave it to","Then, Anna and Paul left. Paul gave it to", Mary, John,x\n'
                 '\n'
                 'a b c,d e f,Mary ,John,\n', encoding="utf-8")
    rows = read_task_file(p, "ioi")
    assert [r.row for r in rows] == [2, 4]
    assert [r.id for r in rows] == ["ioi-00002", "ioi-00004"]
    assert rows[0].clean == "Then, Mary and John left. John gave it to"
    assert (rows[0].answer, rows[0].distractor) == (" Mary", " John")  # the leading space is kept
    assert (rows[1].answer, rows[1].distractor) == ("Mary ", "John")  # trailing too
    assert rows[0].split is None


def test_csv_answer_with_leading_space_passes_the_token_check(tmp_path):
    p = write_csv(tmp_path / "t.csv", [_pair(i) for i in range(5)])
    out = load_task_file(p, "t", seed=0, tokenizer=FakeBPE())
    assert all(e.answer.startswith(" ") for s in SPLITS for e in out[s])


def test_jsonl_rows_ids_and_blank_lines(tmp_path):
    objs = [dict(zip(HEADER, _pair(i)), split=s, id=k)
            for i, (s, k) in enumerate([("train", "a"), ("validation", 7), ("id_test", "c"), ("ood_test", "")])]
    p = tmp_path / "t.jsonl"
    lines = [json.dumps(o) for o in objs]
    p.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n", encoding="utf-8")
    rows = read_task_file(p, "t")
    assert [r.row for r in rows] == [1, 3, 4, 5]
    assert [r.id for r in rows] == ["a", "7", "c", "t-00005"]  # an empty id falls back to the default
    out = load_task_file(p, "t", seed=0, tokenizer=FakeBPE())
    assert ids(out) == {"train": ["a"], "validation": ["7"], "id_test": ["c"], "ood_test": ["t-00005"]}
    assert out["ood_test"][0].split == "ood_test" and out["ood_test"][0].task == "t"


# ---------------------------------------------------------------------------------------------- splits
def test_split_column_is_honoured_exactly(tmp_path):
    names = ["train", "ood_test", "validation", "train", "id_test", "ood_test", " train ", "id_test"]
    p = write_csv(tmp_path / "s.csv", [_pair(i) + [s] for i, s in enumerate(names)], HEADER + ["split"])
    out = load_task_file(p, "s", seed=123)
    assert list(out) == list(SPLITS)
    assert ids(out) == {"train": ["s-00002", "s-00005", "s-00008"], "ood_test": ["s-00003", "s-00007"],
                        "validation": ["s-00004"], "id_test": ["s-00006", "s-00009"]}
    assert all(e.split == s for s in SPLITS for e in out[s])
    assert out == load_task_file(p, "s", seed=999)  # the seed does not matter with a split column


@pytest.mark.parametrize("n,expected", [(10, (6, 2, 2)), (7, (4, 1, 2)), (4, (2, 1, 1)), (5, (3, 1, 1)),
                                        (50, (30, 10, 10)), (13, (8, 3, 2))])
def test_seeded_split_counts(tmp_path, n, expected):
    # n_train = round(0.6 n), n_validation = round(0.2 n), n_id_test = the rest; no ood_test
    assert split_counts(n) == expected
    out = load_task_file(csv_file(tmp_path, n), "t", seed=1)
    assert (len(out["train"]), len(out["validation"]), len(out["id_test"])) == expected
    assert out["ood_test"] == []
    all_ids = [e.id for s in SPLITS for e in out[s]]
    assert len(all_ids) == len(set(all_ids)) == n
    assert set(all_ids) == {f"t-{i + 2:05d}" for i in range(n)}
    for s in SPLITS:  # file order within each split
        assert [e.id for e in out[s]] == sorted(e.id for e in out[s])
        assert all(e.split == s and e.task == "t" for e in out[s])


def test_seeded_split_is_deterministic_and_depends_on_seed_and_task(tmp_path):
    p = csv_file(tmp_path, 50)
    a = load_task_file(p, "t", seed=3)
    assert ids(a) == ids(load_task_file(p, "t", seed=3))
    assert ids(a) != ids(load_task_file(p, "t", seed=4))
    rows = read_task_file(p, "t")
    b = assign_splits(rows, "other", seed=3)
    assert [e.clean for e in b["train"]] != [e.clean for e in a["train"]]  # the task name is part of the seed


def test_ids_do_not_depend_on_the_split(tmp_path):
    p = csv_file(tmp_path, 20)
    by_row = {r.id: r for r in read_task_file(p, "t")}
    for seed in (0, 1):
        for exs in load_task_file(p, "t", seed=seed).values():
            for e in exs:
                assert by_row[e.id].clean == e.clean and by_row[e.id].answer == e.answer


# ---------------------------------------------------------------------------------------------- read errors
def test_missing_file(tmp_path):
    p = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError, match=r"nope\.csv.*does not exist.*language\.task_files"):
        load_task_file(p, "t", seed=0)


@pytest.mark.parametrize("name", ["t.json", "t.txt", "t"])
def test_unknown_suffix(tmp_path, name):
    p = tmp_path / name
    p.write_text('{"clean": "a"}\n')
    with pytest.raises(TaskFileError, match=rf"{re.escape(name)}.*suffix.*\.csv, \.jsonl"):
        read_task_file(p, "t")


@pytest.mark.parametrize("name,text,msg", [("e.csv", "", r"e\.csv is empty.*header"),
                                           ("h.csv", "clean,corrupted,answer,distractor\n", r"h\.csv has no rows"),
                                           ("e.jsonl", "\n  \n", r"e\.jsonl has no rows")])
def test_empty_files(tmp_path, name, text, msg):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(TaskFileError, match=msg):
        read_task_file(p, "t")


def test_csv_missing_column_names_missing_and_found(tmp_path):
    p = write_csv(tmp_path / "m.csv", [_pair(0)[:3]], ["clean", "corrupted", "answer"])
    with pytest.raises(TaskFileError, match=r"m\.csv:1 \(header\): missing column\(s\) \['distractor'\]; "
                                            r"found \['clean', 'corrupted', 'answer'\]\. Fix the header"):
        read_task_file(p, "t")


def test_csv_semicolon_header_hint(tmp_path):
    p = tmp_path / "semi.csv"
    p.write_text("clean;corrupted;answer;distractor\na;b; x; y\n")
    with pytest.raises(TaskFileError, match=r"semi\.csv:1 .*separate the columns with commas"):
        read_task_file(p, "t")


@pytest.mark.parametrize("bad", ["", "   "])
def test_csv_empty_value_names_row_and_column(tmp_path, bad):
    rows = [_pair(0), _pair(1)]
    rows[1][2] = bad
    p = write_csv(tmp_path / "v.csv", rows)
    with pytest.raises(TaskFileError, match=r"v\.csv:3: column 'answer' is empty.*fill it in or delete the row"):
        read_task_file(p, "t")


def test_csv_unquoted_comma(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("clean,corrupted,answer,distractor\nThen, A went,Then, B went, A, B\n")
    with pytest.raises(TaskFileError, match=r"q\.csv:2: the row has 6 values but the header has 4 columns.*"
                                            r"quote values that hold commas"):
        read_task_file(p, "t")


def test_jsonl_line_not_an_object_or_not_json(tmp_path):
    p = tmp_path / "j.jsonl"
    p.write_text(json.dumps(dict(zip(HEADER, _pair(0)))) + "\n" + '["a", "b"]\n')
    with pytest.raises(TaskFileError, match=r"j\.jsonl:2: the line is a JSON list, not an object.*one JSON object "
                                            r"a line"):
        read_task_file(p, "t")
    p.write_text(json.dumps(dict(zip(HEADER, _pair(0)))) + "\n\n" + "{'clean': 1}\n")
    with pytest.raises(TaskFileError, match=r"j\.jsonl:3: not valid JSON.*one JSON object a line"):
        read_task_file(p, "t")


def test_jsonl_missing_key_and_non_string_value(tmp_path):
    obj = dict(zip(HEADER, _pair(0)))
    p = write_jsonl(tmp_path / "k.jsonl", [obj, {k: v for k, v in obj.items() if k != "corrupted"}])
    with pytest.raises(TaskFileError, match=r"k\.jsonl:2: missing key\(s\) \['corrupted'\].*the keys clean, "
                                            r"corrupted, answer, distractor \(optional: split, id\)"):
        read_task_file(p, "t")
    p = write_jsonl(tmp_path / "n.jsonl", [obj, dict(obj, answer=1800)])
    with pytest.raises(TaskFileError, match=r"n\.jsonl:2: column 'answer' is 1800, not text.*JSON string"):
        read_task_file(p, "t")


@pytest.mark.parametrize("value,hint", [("test", "write one of"), ("id-test", "did you mean 'id_test'")])
def test_unknown_split_value(tmp_path, value, hint):
    p = write_csv(tmp_path / "sp.csv", [_pair(0) + ["train"], _pair(1) + [value]], HEADER + ["split"])
    with pytest.raises(TaskFileError) as err:
        read_task_file(p, "t")
    msg = str(err.value)
    assert "sp.csv:3" in msg and repr(value) in msg and hint in msg
    assert "train, id_test, ood_test, validation" in msg


def test_duplicate_ids_name_both_rows(tmp_path):
    p = write_csv(tmp_path / "d.csv", [_pair(0) + ["x"], _pair(1) + ["y"], _pair(2) + ["x"]], HEADER + ["id"])
    with pytest.raises(TaskFileError, match=r"d\.csv:4: id 'x' is also the id of row 2; ids must be unique"):
        read_task_file(p, "t")


# ---------------------------------------------------------------------------------------------- split errors
def test_partial_split_column_names_first_row_without_one(tmp_path):
    p = write_csv(tmp_path / "ps.csv", [_pair(0) + ["train"], _pair(1) + ["validation"], _pair(2) + [""],
                                        _pair(3) + ["id_test"]], HEADER + ["split"])
    with pytest.raises(TaskFileError, match=r"ps\.csv:4: the split column is empty on this row but 3 of 4 rows "
                                            r"name a split; give every row a split"):
        load_task_file(p, "t", seed=0)


def test_all_empty_split_column_means_seeded_split(tmp_path):
    p = write_csv(tmp_path / "es.csv", [_pair(i) + [""] for i in range(10)], HEADER + ["split"])
    out = load_task_file(p, "t", seed=0)
    assert [len(out[s]) for s in ("train", "validation", "id_test", "ood_test")] == [6, 2, 2, 0]


def test_split_column_with_empty_required_split(tmp_path):
    p = write_csv(tmp_path / "nv.csv", [_pair(i) + [s] for i, s in enumerate(["train", "train", "id_test",
                                                                               "ood_test"])], HEADER + ["split"])
    with pytest.raises(TaskFileError, match=r"nv\.csv: split 'validation' is empty under the split column "
                                            r"\(train=2, validation=0, id_test=1, ood_test=1\).*"
                                            r"add rows with split=validation"):
        load_task_file(p, "t", seed=0)


@pytest.mark.parametrize("n,counts", [(3, "train=2, validation=1, id_test=0"), (2, "train=1, validation=0"),
                                      (1, "train=1, validation=0")])
def test_too_few_rows_without_split_column(tmp_path, n, counts):
    p = csv_file(tmp_path, n, name="few.csv")
    with pytest.raises(TaskFileError, match=rf"few\.csv: split '\w+' is empty under the seeded 60/20/20 split of "
                                            rf"{n} rows \({counts}.*add rows .* from 4 rows on.* or add a split"):
        load_task_file(p, "t", seed=0)


def test_negative_seed(tmp_path):
    with pytest.raises(ValueError, match="non-negative integer"):
        load_task_file(csv_file(tmp_path, 5), "t", seed=-1)


# ---------------------------------------------------------------------------------------------- token checks
def test_multi_token_answer_names_row_text_and_space_fix(tmp_path):
    rows = [_pair(i) for i in range(6)]
    rows[2][2] = "A2"  # no leading space: not one token for a GPT-2-like tokenizer
    rows[4][3] = " B4 C4"
    p = write_csv(tmp_path / "tok.csv", rows)
    with pytest.raises(TaskFileError) as err:
        load_task_file(p, "t", seed=0, tokenizer=FakeBPE())
    msg = str(err.value)
    assert "tok.csv: 2 of 6 rows fail the tokenizer check" in msg
    assert "tok.csv:4: answer 'A2' is not one token; ' A2' is one token" in msg
    assert "tok.csv:6: distractor ' B4 C4' is not one token (" in msg
    assert "tokenised exactly as written: add or remove the leading space" in msg


def test_unequal_prompt_lengths(tmp_path):
    rows = [_pair(i) for i in range(5)]
    rows[3][1] = rows[3][1] + " now"
    p = write_csv(tmp_path / "len.csv", rows)
    with pytest.raises(TaskFileError, match=r"(?s)len\.csv:5: clean has 10 tokens but corrupted has 11.*"
                                            r"EAP-IG patches activations position by position"):
        load_task_file(p, "t", seed=0, tokenizer=FakeBPE())


def test_at_most_five_rows_are_listed_in_file_order(tmp_path):
    rows = [_pair(i) for i in range(10)]
    for i in (1, 2, 3, 5, 6, 8, 9):
        rows[i][2] = rows[i][2].strip()
    p = write_csv(tmp_path / "many.csv", rows)
    with pytest.raises(TaskFileError) as err:
        load_task_file(p, "t", seed=5, tokenizer=FakeBPE())
    msg = str(err.value)
    assert "7 of 10 rows fail the tokenizer check, the first 5 listed" in msg
    listed = [int(m) for m in re.findall(r"many\.csv:(\d+):", msg)]
    assert listed == [3, 4, 5, 7, 8]


def test_same_answer_and_distractor_and_max_len(tmp_path):
    rows = [_pair(i) for i in range(5)]
    rows[0][3] = rows[0][2]
    p = write_csv(tmp_path / "same.csv", rows)
    with pytest.raises(TaskFileError, match=r"same\.csv:2: answer ' A0' and distractor ' A0' are the same token"):
        load_task_file(p, "t", seed=0, tokenizer=FakeBPE())
    p = csv_file(tmp_path, 5, name="long.csv")
    with pytest.raises(TaskFileError, match=r"(?s)5 of 5 rows.*long\.csv:2: the prompt has 10 tokens, more than the "
                                            r"model's context of 8.*shorten the prompts to at most 8 tokens"):
        load_task_file(p, "t", seed=0, tokenizer=FakeBPE(), max_len=8)
    assert load_task_file(p, "t", seed=0, tokenizer=FakeBPE(), max_len=10)["train"]


def test_check_tokens_without_row_map_names_ids(tmp_path):
    p = csv_file(tmp_path, 5)
    exs = [e for s in SPLITS for e in load_task_file(p, "t", seed=0)[s]]
    check_tokens(exs, FakeBPE(), p)
    bad = [exs[0].__class__(**{**exs[0].__dict__, "answer": "X"})]
    with pytest.raises(TaskFileError, match=rf"t\.csv \(id {exs[0].id}\): answer 'X' is not one token"):
        check_tokens(bad, FakeBPE(), p)


def test_real_byte_level_bpe(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    from certified_circuits.language.tokenizer import HFPromptTokenizer

    tk = tokenizers.Tokenizer(tokenizers.models.BPE())
    tk.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = tokenizers.decoders.ByteLevel()
    corpus = (["Then, Mary and John went home. John gave a drink to Mary"] * 20
              + ["Then, Anna and Paul went home. Paul gave a drink to Anna"] * 20)
    tk.train_from_iterator(corpus, tokenizers.trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"], show_progress=False))
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>",
                                              eos_token="<|endoftext|>")
    tok = HFPromptTokenizer(hf)
    assert len(hf.encode(" Mary", add_special_tokens=False)) == 1 < len(hf.encode("Mary", add_special_tokens=False))
    clean, corr = "Then, Mary and John went home. John gave a drink to", "Then, Anna and Paul went home. Paul gave a drink to"
    p = tmp_path / "bpe.csv"
    # five different prompts (issue 28: a repeated prompt is dropped, so it cannot land in two splits)
    p.write_text("clean,corrupted,answer,distractor\n"
                 + "".join(f'"{clean.replace("home", f"home {i}")}","{corr.replace("home", f"home {i}")}", Mary, John\n'
                         for i in range(4))
                 + f'"{clean.replace("home", "home 4")}","{corr.replace("home", "home 4")}",Mary, John\n', encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"bpe\.csv:6: answer 'Mary' is not one token; ' Mary' is one token"):
        load_task_file(p, "ioi", seed=0, tokenizer=tok)
    p.write_text(p.read_text().replace(",Mary, John", ", Mary, John"), encoding="utf-8")
    out = load_task_file(p, "ioi", seed=0, tokenizer=tok)
    assert [len(out[s]) for s in ("train", "validation", "id_test")] == [3, 1, 1]
    assert {tok.answer_id(e.answer) for s in SPLITS for e in out[s]} == {tok.answer_id(" Mary")}


def test_load_task_files_reports_every_file(tmp_path):
    good = csv_file(tmp_path, 5, name="good.csv")
    bad = write_csv(tmp_path / "bad.csv", [_pair(0)[:3]], HEADER[:3])
    assert set(load_task_files({"a": good, "b": good}, seed=0)) == {"a", "b"}
    with pytest.raises(TaskFileError) as err:
        load_task_files({"a": good, "b": bad, "c": tmp_path / "missing.jsonl"}, seed=0, tokenizer=FakeBPE())
    msg = str(err.value)
    assert msg.startswith("2 of 3 language.task_files cannot be used")
    assert "task 'b': " in msg and "bad.csv:1 (header): missing column(s) ['distractor']" in msg
    assert "task 'c': " in msg and "missing.jsonl" in msg
