"""Shared fixtures: a tiny random GPT-2 over the word vocabulary and a few encoded task prompts."""

from __future__ import annotations

import pytest

from certified_circuits.language.models import build_model, tiny_config, LanguageModel, _bundle
from certified_circuits.language.tasks import generate_examples
from certified_circuits.language.tokenizer import WordTokenizer, encode_examples

from certified_circuits.core.devices import configure_torch  # noqa: E402

configure_torch(1)  # the stages' settings: one thread, deterministic kernels


@pytest.fixture(scope="session")
def word_tok() -> WordTokenizer:
    return WordTokenizer.default()


@pytest.fixture(scope="session")
def tiny_lm(word_tok) -> LanguageModel:
    cfg = tiny_config(word_tok.vocab_size, n_layer=2, n_head=4, n_embd=32, n_positions=96)
    return _bundle("tiny", build_model(cfg, seed=0), word_tok, with_bridge=True)


@pytest.fixture(scope="session")
def ioi_batch(word_tok):
    ex = generate_examples("ioi", "train", 6, seed=3)
    return encode_examples(ex, word_tok)


@pytest.fixture(scope="session")
def mixed_batch(word_tok):
    ex = (generate_examples("ioi", "ood_test", 2, seed=1) + generate_examples("greater_than", "id_test", 2, seed=1)
          + generate_examples("ioi_hard", "ood_test", 2, seed=1))
    return encode_examples(ex, word_tok)
