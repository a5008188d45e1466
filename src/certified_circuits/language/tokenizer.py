"""Tokenizers for the language tasks and batch encoding of prompt pairs.

* :class:`WordTokenizer`: the embedded default's word-level vocabulary over the generators' words
  (names, places, objects, template words, every Greater-Than year as one token, digits 0-9 for
  scenario numbers). Saved beside the embedded model as JSON.
* :class:`GPT2PromptTokenizer`: GPT-2's BPE (paper scale, Appendix "Language Setup"); answers are the
  single token ``" " + word``, checked to be single tokens.

:func:`encode_examples` turns examples into right-padded id tensors; it raises when a clean and a
corrupted prompt tokenise to different lengths (EAP-IG patches position by position).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from certified_circuits.commands import COMMAND
from certified_circuits.storage.atomic import write_text
from certified_circuits.language.tasks import EVENTS, NAMES, OBJECTS, PLACES, Example, split_words, year_vocabulary

PAD = "<pad>"


class PromptTokenizer(Protocol):
    """What the language pipeline needs from a tokenizer."""

    pad_id: int
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def answer_id(self, word: str) -> int: ...


class WordTokenizer:
    """Word-level tokenizer: one id per word; numbers outside the vocabulary split into digits."""

    def __init__(self, vocab: Sequence[str]):
        if len(set(vocab)) != len(vocab):
            raise ValueError("word vocabulary has duplicate entries")
        if not vocab or vocab[0] != PAD:
            raise ValueError(f"word vocabulary must start with {PAD!r}")
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.pad_id = 0
        self.vocab_size = len(self.vocab)

    @classmethod
    def default(cls) -> "WordTokenizer":
        """Vocabulary covering every word the task generators can emit (sorted, deterministic)."""
        from certified_circuits.language.tasks import template_words

        words = set(template_words()) | set(NAMES) | set(PLACES) | set(OBJECTS) | set(EVENTS)
        words |= {str(d) for d in range(10)}
        years = year_vocabulary()
        words -= set(years)
        return cls([PAD] + sorted(words) + years)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for w in split_words(text):
            if w in self.index:
                ids.append(self.index[w])
            elif w.isdigit():
                ids.extend(self.index[c] for c in w)
            else:
                raise ValueError(f"word {w!r} is not in the word-level vocabulary ({self.vocab_size} words); "
                               f"the prompt {text!r} was not made by this package's generators")
        return ids

    def answer_id(self, word: str) -> int:
        if word not in self.index:
            raise ValueError(f"answer {word!r} is not a single token of the word-level vocabulary")
        return self.index[word]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.vocab[i] for i in ids)

    def save(self, path: str | os.PathLike) -> None:
        write_text(path, json.dumps({"type": "word", "vocab": self.vocab}))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "WordTokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"word vocabulary {path} is missing; train the embedded model with "
                                    f"`{COMMAND} language-train --tasks-dir TASKS_DIR --out-dir {path.parent} --metrics METRICS.json`")
        return cls(json.loads(path.read_text())["vocab"])


class GPT2PromptTokenizer:
    """GPT-2 BPE wrapper; answers are scored as the single token ``" " + word``.

    Prompts start with ``<|endoftext|>`` as BOS (TransformerLens' ``to_tokens`` default, used by the EAP-IG
    reference); padding also uses it (right padding never reaches the last prompt position).
    """

    def __init__(self, hf_tokenizer, prepend_bos: bool = True):
        self.hf = hf_tokenizer
        self.pad_id = int(hf_tokenizer.eos_token_id)
        self.vocab_size = int(len(hf_tokenizer))
        self.prepend_bos = prepend_bos

    def encode(self, text: str) -> list[int]:
        ids = list(self.hf.encode(text))
        return [self.pad_id] + ids if self.prepend_bos else ids

    def answer_id(self, word: str) -> int:
        ids = self.hf.encode(" " + word)
        if len(ids) != 1:
            raise ValueError(f"answer/distractor {word!r} is {len(ids)} GPT-2 tokens ({ids}); the tasks need "
                             f"single-token names and years: restrict the generator lists")
        return int(ids[0])

    def check_single_tokens(self, words: Sequence[str]) -> None:
        """Raise naming every word that is not one GPT-2 token (with its leading space)."""
        bad = [w for w in words if len(self.hf.encode(" " + w)) != 1]
        if bad:
            raise ValueError(f"{len(bad)} words are not single GPT-2 tokens: {bad[:20]}; remove them from "
                             f"the name/object/place lists for paper-scale runs")

    def equal_length(self, ex: Example) -> bool:
        """Generator filter: equal clean/corrupted lengths and single-token answer and distractor."""
        if len(self.encode(ex.clean)) != len(self.encode(ex.corrupted)):
            return False
        return all(len(self.hf.encode(" " + w)) == 1 for w in (ex.answer, ex.distractor))


class HFPromptTokenizer:
    """Any Hugging Face tokenizer, for task files (``language.source: hf``).

    Prompts get the tokenizer's BOS token first when it has one (TransformerLens' ``to_tokens`` default,
    as in hannamw/EAP-IG); answers and distractors are tokenised *exactly as written*, without special
    tokens (write ``" Mary"`` for a BPE token with a leading space), and must be one token. Padding uses
    the pad token, else EOS, else 0 (right padding never reaches the last prompt position).
    """

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        pad = hf_tokenizer.pad_token_id
        pad = hf_tokenizer.eos_token_id if pad is None else pad
        self.pad_id = int(pad) if pad is not None else 0
        self.vocab_size = int(len(hf_tokenizer))
        self.bos_id = hf_tokenizer.bos_token_id

    def encode(self, text: str) -> list[int]:
        ids = list(self.hf.encode(text, add_special_tokens=False))
        return ([int(self.bos_id)] if self.bos_id is not None else []) + ids

    @property
    def unknown_token(self) -> str | None:
        """The tokenizer's unknown token (``[UNK]``, ``<unk>``), or None when it has none (byte-level BPE)."""
        return self.hf.unk_token if self.hf.unk_token_id is not None else None

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` (as written, in order, without repeats) that the tokenizer maps to its unknown
        token; always empty for a tokenizer without one (byte-level BPE reads any text)."""
        unk = self.hf.unk_token_id
        if unk is None:
            return []
        try:
            enc = self.hf(text, add_special_tokens=False, return_offsets_mapping=True)
            spans = [text[a:b] for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]) if i == unk]
        except NotImplementedError:   # slow tokenizers have no offsets: look word by word
            spans = [w for w in text.split() if unk in self.hf.encode(w, add_special_tokens=False)]
        return list(dict.fromkeys(w.strip() or w for w in spans))

    def answer_id(self, word: str) -> int:
        ids = self.hf.encode(word, add_special_tokens=False)
        if len(ids) != 1:
            other = word[1:] if word.startswith(" ") else " " + word
            hint = (f"; {other!r} is one token" if len(self.hf.encode(other, add_special_tokens=False)) == 1
                    else "")
            raise ValueError(f"answer/distractor {word!r} is {len(ids)} tokens ({ids}) under this tokenizer, not one; "
                             f"it is tokenised exactly as written{hint}")
        return int(ids[0])


@dataclass
class EncodedBatch:
    """Right-padded token ids of clean and corrupted prompts plus answer/distractor ids."""

    clean: np.ndarray       # int64 [N, P]
    corrupted: np.ndarray   # int64 [N, P]
    lengths: np.ndarray     # int64 [N]; last prompt position = lengths - 1
    answer: np.ndarray      # int64 [N]
    distractor: np.ndarray  # int64 [N]
    ids: list[str]


def encode_examples(examples: Sequence[Example], tok: PromptTokenizer, max_len: int | None = None
                    ) -> EncodedBatch:
    """Tokenise clean/corrupted prompts (right padding); error when a pair differs in length."""
    if not examples:
        raise ValueError("no examples to encode")
    clean = [tok.encode(e.clean) for e in examples]
    corr = [tok.encode(e.corrupted) for e in examples]
    for e, c, k in zip(examples, clean, corr):
        if len(c) != len(k):
            raise ValueError(f"example {e.id}: clean prompt has {len(c)} tokens but corrupted has {len(k)}; "
                             f"EAP patching needs equal lengths (regenerate the tasks with this tokenizer)")
    lengths = np.array([len(c) for c in clean], dtype=np.int64)
    p = int(lengths.max())
    if max_len is not None and p > max_len:
        raise ValueError(f"longest prompt has {p} tokens but the model's context is {max_len}")
    cl = np.full((len(examples), p), tok.pad_id, dtype=np.int64)
    co = cl.copy()
    for i, (c, k) in enumerate(zip(clean, corr)):
        cl[i, : len(c)] = c
        co[i, : len(k)] = k
    ans = np.array([tok.answer_id(e.answer) for e in examples], dtype=np.int64)
    dis = np.array([tok.answer_id(e.distractor) for e in examples], dtype=np.int64)
    return EncodedBatch(cl, co, lengths, ans, dis, [e.id for e in examples])
