"""Tiny random-weight causal LMs of each family TransformerBridge boots, saved as local HF folders with a
word-level tokenizer made with ``tokenizers`` (nothing is downloaded). Shared by the language tests."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

NAMES = ["Mary", "John", "Anna", "Tom", "Lucy", "Paul", "Kate", "Mark"]
PLACES = ["garden", "store"]
OBJECTS = ["drink", "book"]


def ioi_prompt(a: str, b: str, s: str, place: str = "garden", obj: str = "drink") -> str:
    """An IOI-style prompt of the fixture: every name is one token with its leading space."""
    return f"Then, {a} and {b} went to the {place}. {s} gave a {obj} to"


@lru_cache(maxsize=1)
def bpe_tokenizer():
    """A byte-level BPE (GPT-2 / Llama-3 / Qwen2 style) trained with ``tokenizers`` on the fixture's
    prompts, so that every `` Name`` is one token; BOS, EOS and padding are ``<|endoftext|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = [ioi_prompt(a, b, s, p, o) + " " + a for a in NAMES for b in NAMES for s in (a, b) for p in PLACES
            for o in OBJECTS]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(text, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")


def family_config(family: str, vocab: int | None = None):
    """(HF config, model class) of a 2-layer, 4-head, d = 32 model of ``family``."""
    import transformers as tf

    vocab = vocab or len(bpe_tokenizer())
    common = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                             embd_pdrop=0.0, attn_pdrop=0.0), tf.GPT2LMHeadModel
    if family == "pythia":
        return tf.GPTNeoXConfig(**common, use_parallel_residual=True, rotary_pct=0.5), tf.GPTNeoXForCausalLM
    if family == "llama":
        return tf.LlamaConfig(**common, num_key_value_heads=2), tf.LlamaForCausalLM
    if family == "qwen2":
        return tf.Qwen2Config(**common, num_key_value_heads=2), tf.Qwen2ForCausalLM
    if family == "gemma":
        return tf.GemmaConfig(**common, num_key_value_heads=1, head_dim=8), tf.GemmaForCausalLM
    if family == "mistral":
        return tf.MistralConfig(**common, num_key_value_heads=2), tf.MistralForCausalLM
    if family == "stablelm":
        return tf.StableLmConfig(**common, num_key_value_heads=4), tf.StableLmForCausalLM
    if family == "phi":
        return tf.PhiConfig(**common), tf.PhiForCausalLM
    if family in ("phi3", "phi3-gqa"):   # Phi-3-mini layout (MHA); Phi-3-medium / Phi-4-mini layout (GQA)
        return tf.Phi3Config(**common, num_key_value_heads=4 if family == "phi3" else 2, pad_token_id=0), \
            tf.Phi3ForCausalLM
    falcon = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, bias=False,
                  max_position_embeddings=64)
    if family == "falcon-7b":    # multi-query, one norm shared by parallel attention and MLP
        return tf.FalconConfig(**falcon, multi_query=True, parallel_attn=True, new_decoder_architecture=False), \
            tf.FalconForCausalLM
    if family == "falcon-40b":   # new decoder architecture: two norms, q/k/v packed per key/value group
        return tf.FalconConfig(**{**falcon, "hidden_size": 64, "num_attention_heads": 8}, num_kv_heads=4,
                               multi_query=False, new_decoder_architecture=True), tf.FalconForCausalLM
    if family == "gemma2":       # sandwich norms: refused
        return tf.Gemma2Config(**common, num_key_value_heads=2, head_dim=8), tf.Gemma2ForCausalLM
    if family == "opt":
        return tf.OPTConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                            max_position_embeddings=64, word_embed_proj_dim=32), tf.OPTForCausalLM
    if family == "gpt-neo":
        return tf.GPTNeoConfig(vocab_size=vocab, hidden_size=32, num_layers=2, num_heads=4, window_size=8,
                               attention_types=[[["global", "local"], 1]], max_position_embeddings=64), \
            tf.GPTNeoForCausalLM
    raise ValueError(family)


#: the families test_hooked checks against the straightforward implementation (MLP input at ``ln2.hook_in``)
FAMILIES = ("gpt2", "pythia", "llama", "qwen2", "gemma")
#: every family of docs/language_families.md (test_families checks the table against them)
TABLE_FAMILIES = FAMILIES + ("mistral", "stablelm", "phi", "phi3", "phi3-gqa", "falcon-7b", "falcon-40b", "opt",
                             "gpt-neo", "gemma2")


def save_family(family: str, folder: Path, seed: int = 0) -> Path:
    """Save a random-weight ``family`` model and the fixture's tokenizer into ``folder``."""
    cfg, cls = family_config(family)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    with torch.no_grad():   # larger random weights than HF's init, so that attention is not uniform
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name and "wte" not in name and "wpe" not in name:
                p.mul_(4.0)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    bpe_tokenizer().save_pretrained(folder)
    return folder


def task_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` IOI-style task rows (``clean, corrupted, answer, distractor``): the answer is the name that did not give
    the object (one token with its space). Clean prompts are distinct: rows sharing one would go to one split."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    while len(rows) < n:
        a, b, c, d, e = rng.choice(NAMES, 5, replace=False)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        rows.append({"clean": ioi_prompt(a, b, b), "corrupted": ioi_prompt(c, d, e), "answer": f" {a}",
                     "distractor": f" {b}"})
    return rows
