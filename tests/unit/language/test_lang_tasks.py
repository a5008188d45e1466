"""Task-generator invariants (paper, Appendix A.2 prompt table)."""

from __future__ import annotations

import pytest

from certified_circuits.language.tasks import (GT_SHIFT, SPLITS, TASKS, generate_examples, generate_splits,
                                               read_jsonl, write_jsonl)
from certified_circuits.language.tokenizer import WordTokenizer, encode_examples, split_words


@pytest.mark.parametrize("task", TASKS)
def test_splits_sizes_determinism_and_disjoint_streams(task):
    a = generate_splits(task, seed=5, n_per_split=20)
    b = generate_splits(task, seed=5, n_per_split=20)
    assert list(a) == list(SPLITS) and all(len(v) == 20 for v in a.values())
    assert a == b
    c = generate_splits(task, seed=6, n_per_split=20)
    assert [e.clean for e in c["train"]] != [e.clean for e in a["train"]]
    assert [e.clean for e in a["train"]] != [e.clean for e in a["id_test"]]
    # OOD prompts are longer (distractor clauses / detours / pre-answer insertion)
    tok = WordTokenizer.default()
    id_len = max(len(tok.encode(e.clean)) for e in a["id_test"])
    ood_len = min(len(tok.encode(e.clean)) for e in a["ood_test"])
    assert ood_len > id_len


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("split", SPLITS)
def test_roles_and_equal_lengths(task, split):
    tok = WordTokenizer.default()
    exs = generate_examples(task, split, 30, seed=11)
    batch = encode_examples(exs, tok)  # raises on unequal clean/corrupted lengths
    assert (batch.clean != batch.corrupted).any(axis=1).all()
    for e in exs:
        assert e.answer != e.distractor
        assert len(split_words(e.clean)) == len(split_words(e.corrupted))
        cw, kw = split_words(e.clean), split_words(e.corrupted)
        if task == "greater_than":
            start = int(cw[cw.index("year") + 1])
            assert int(e.answer) == start + 1                      # immediate successor
            assert int(e.distractor) == start + 1 + GT_SHIFT
            cstart = int(kw[kw.index("year") + 1])
            assert cstart + 1 == int(e.distractor)                 # corruption makes the distractor natural
            assert e.clean.endswith("to the year") == (split != "ood_test")
        else:
            # answer = indirect object (named once among the introduced pair, not the giver);
            # distractor = the subject who gives; corrupted prompt contains neither name
            assert cw[-5] == e.distractor and cw[-4] == "gave"
            assert e.answer in cw and e.distractor in cw
            assert e.answer not in kw and e.distractor not in kw
            intro = cw[cw.index("and") - 1], cw[cw.index("and") + 1]
            assert set(intro) == {e.answer, e.distractor}
            if split == "ood_test" and task == "ioi":
                assert "While" in cw and "talked" in cw
            if split == "ood_test" and task == "ioi_hard":
                assert "repeatedly" in cw and "answered" in cw


def test_jsonl_roundtrip_and_errors(tmp_path):
    exs = generate_examples("ioi", "train", 5, seed=0)
    p = write_jsonl(tmp_path / "t.jsonl", exs)
    assert read_jsonl(p) == exs
    with pytest.raises(FileNotFoundError, match="language-tasks"):
        read_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown task"):
        generate_examples("nope", "train", 1, 0)


def test_unequal_lengths_raise():
    tok = WordTokenizer.default()
    e = generate_examples("greater_than", "train", 1, seed=0)[0]
    bad = type(e)(**{**e.__dict__, "corrupted": e.corrupted + " the"})
    with pytest.raises(ValueError, match="equal lengths"):
        encode_examples([bad], tok)


def test_length_check_rejects_and_raises():
    calls = []

    def never(ex):
        calls.append(ex)
        return False

    with pytest.raises(ValueError, match="tokenizer check"):
        generate_examples("ioi", "train", 1, seed=0, length_check=never, max_tries=3)
    assert len(calls) == 3


def test_word_tokenizer_years_single_tokens():
    tok = WordTokenizer.default()
    for e in generate_examples("greater_than", "ood_test", 10, seed=2):
        assert tok.answer_id(e.answer) != tok.answer_id(e.distractor)
    with pytest.raises(ValueError, match="vocabulary"):
        tok.encode("Then, Zorblax went")


class _FakeBPE:
    """Stands in for GPT-2's tokenizer: splits 4-digit numbers ending in 7 into two tokens."""

    eos_token_id = 0

    def __len__(self):
        return 100

    def encode(self, text):
        out = []
        for w in text.split():
            out.extend([1, 2] if (w.isdigit() and w.endswith("7")) else [3])
        return out


def test_gpt2_style_filter_redraws_multi_token_years():
    from certified_circuits.language.tokenizer import GPT2PromptTokenizer

    tok = GPT2PromptTokenizer(_FakeBPE())
    exs = generate_examples("greater_than", "id_test", 40, seed=4, length_check=tok.equal_length)
    assert all(not e.answer.endswith("7") and not e.distractor.endswith("7") for e in exs)
    with pytest.raises(ValueError, match="single GPT-2 tokens"):
        tok.check_single_tokens(["Anna", "1777"])
