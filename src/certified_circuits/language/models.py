"""Language models: the embedded tiny GPT-2 and paper-scale GPT-2 Small, both wrapped by TransformerBridge.

* Embedded default (the embedded default: README): an HF ``GPT2LMHeadModel`` with a tiny config over the
  word-level vocabulary, trained by :mod:`.train`; saved as an HF model directory plus ``vocab.json``.
* Paper scale (Appendix "Language Setup"): GPT-2 Small from a local HF directory or cache, offline.

:func:`wrap_bridge` wraps either in TransformerLens 4's ``TransformerBridge`` with split q/k/v inputs,
per-head results and MLP-input hooks (the hook points EAP-IG uses); :class:`LanguageModel` bundles the
HF module, its bridge, the per-head weights of the decomposed forward and the prompt tokenizer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.tokenizer import GPT2PromptTokenizer, PromptTokenizer, WordTokenizer

VOCAB_FILE = "vocab.json"


def tiny_config(vocab_size: int, n_layer: int = 3, n_head: int = 4, n_embd: int = 64, n_positions: int = 80):
    """HF ``GPT2Config`` of the embedded model (no dropout: training is short and deterministic)."""
    from transformers import GPT2Config

    if n_embd % n_head:
        raise ValueError(f"n_embd ({n_embd}) must be divisible by n_head ({n_head})")
    return GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                      n_head=n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      activation_function="gelu_new", bos_token_id=0, eos_token_id=0, pad_token_id=0)


def build_model(config, seed: int):
    """Randomly initialised ``GPT2LMHeadModel`` from ``config`` (seeded), eager attention, eval mode."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(int(seed))
    config._attn_implementation = "eager"
    return GPT2LMHeadModel(config).eval()


def wrap_bridge(hf_model) -> Any:
    """TransformerLens 4 ``TransformerBridge`` around ``hf_model`` with the EAP hook points enabled.

    Exposes ``blocks.{l}.hook_{q,k,v}_input`` (per head), ``blocks.{l}.attn.hook_result`` (per head) and
    ``blocks.{l}.hook_mlp_in``. The bridge replaces submodules of ``hf_model`` in place; logits are
    unchanged (tested).
    """
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    bridge = build_bridge_from_module(hf_model, "GPT2LMHeadModel", hf_config=hf_model.config)
    bridge.set_use_split_qkv_input(True)
    bridge.set_use_attn_result(True)
    bridge.set_use_hook_mlp_in(True)
    return bridge


@dataclass
class LanguageModel:
    """An HF GPT-2, its TransformerBridge, its per-head weights and its prompt tokenizer."""

    name: str
    hf: Any
    bridge: Any
    weights: GPT2Weights
    tokenizer: PromptTokenizer

    @property
    def n_positions(self) -> int:
        return int(self.hf.config.n_positions)


def check_bridge_agrees(bridge, weights: GPT2Weights, n_tokens: int = 8, atol: float = 1e-3) -> float:
    """Run a short seeded token sequence through the bridge and the decomposed forward; raise on mismatch."""
    from certified_circuits.language.forward import run

    gen = torch.Generator().manual_seed(0)
    toks = torch.randint(0, weights.wte.shape[0], (1, min(n_tokens, weights.wpe.shape[0])), generator=gen)
    with torch.no_grad():
        ref = bridge(toks)[0, -1].to(weights.wte.device)
        ours = run(weights, weights.embed(toks.to(weights.wte.device)), torch.tensor([toks.shape[1]])).logits_last[0]
    err = float((ref - ours).abs().max())
    if not err <= atol * max(1.0, float(ref.abs().max())):
        raise RuntimeError(f"the decomposed forward disagrees with the TransformerBridge by {err:.3g} in the logits; "
                           f"the model is not a standard GPT-2 (check its config)")
    return err


def _bundle(name: str, hf_model, tok: PromptTokenizer, with_bridge: bool) -> LanguageModel:
    hf_model.eval()
    for p in hf_model.parameters():
        p.requires_grad_(False)
    weights = GPT2Weights.from_hf(hf_model)  # read before the bridge rewires submodules
    bridge = None
    if with_bridge:
        bridge = wrap_bridge(hf_model)
        check_bridge_agrees(bridge, weights)
    return LanguageModel(name, hf_model, bridge, weights, tok)


def save_embedded(model, tok: WordTokenizer, model_dir: str | os.PathLike) -> Path:
    """Save an embedded model (HF format) and its vocabulary into ``model_dir``."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    tok.save(model_dir / VOCAB_FILE)
    return model_dir


def load_embedded(model_dir: str | os.PathLike, with_bridge: bool = True) -> LanguageModel:
    """Load the embedded model trained by ``certified-circuits language-train``."""
    from transformers import GPT2LMHeadModel

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file() or not (model_dir / VOCAB_FILE).is_file():
        raise FileNotFoundError(f"{model_dir} is not an embedded language model (needs config.json and "
                                f"{VOCAB_FILE}); train one with `certified-circuits language-train "
                                f"--out-dir {model_dir} --metrics METRICS.json`")
    tok = WordTokenizer.load(model_dir / VOCAB_FILE)
    try:
        hf = GPT2LMHeadModel.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager")
    except Exception as exc:  # safetensors / torch raise their own types for a damaged weights file
        raise ValueError(f"{model_dir}: the model weights cannot be read ({type(exc).__name__}: {str(exc)[:200]}); "
                         f"they are truncated or corrupt: rerun language-train") from exc
    return _bundle("embedded", hf, tok, with_bridge)


def load_gpt2(model_path: str | os.PathLike | None = "gpt2", with_bridge: bool = True) -> LanguageModel:
    """GPT-2 Small from a local HF directory or the local HF cache (never downloads)."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    src = str(model_path) if model_path is not None else "gpt2"
    try:
        hf = GPT2LMHeadModel.from_pretrained(src, local_files_only=True, attn_implementation="eager")
        hf_tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    except Exception as err:  # missing files (OSError) or damaged ones (safetensors' own error types)
        raise FileNotFoundError(
            f"GPT-2 Small was not found at {src!r} (offline, local_files_only=True): {err}. Obtain it on a "
            f"machine with internet via `huggingface-cli download gpt2 --local-dir DIR` (or "
            f"`GPT2LMHeadModel.from_pretrained('gpt2').save_pretrained(DIR)` plus the tokenizer) and pass "
            f"`--model-path DIR`, or set HF_HOME to a cache that holds `gpt2`.") from err
    return _bundle("gpt2", hf, GPT2PromptTokenizer(hf_tok), with_bridge)


def load_language_model(model: str, model_path: str | os.PathLike | None, with_bridge: bool = True
                        ) -> LanguageModel:
    """``model='embedded'`` loads the trained tiny model from ``model_path``; ``'gpt2'`` loads GPT-2 Small."""
    if model == "embedded":
        if model_path is None:
            raise ValueError("--model embedded needs --model-path pointing at the trained model directory")
        return load_embedded(model_path, with_bridge)
    if model == "gpt2":
        return load_gpt2(model_path, with_bridge)
    raise ValueError(f"unknown model {model!r}; choose 'embedded' or 'gpt2'")
