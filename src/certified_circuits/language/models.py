"""Language models: the embedded tiny GPT-2, paper-scale GPT-2 Small, and any causal LM that
TransformerBridge boots from a local Hugging Face folder; all wrapped by TransformerBridge.

* Embedded default (the embedded default: README): an HF ``GPT2LMHeadModel`` with a tiny config over the
  word-level vocabulary, trained by :mod:`.train`; saved as an HF model directory plus ``vocab.json``.
* Paper scale (Appendix "Language Setup"): GPT-2 Small from a local HF directory or cache, offline.
* Your own model (``language.source: hf``, :func:`load_hf_model`): GPT-2, GPT-NeoX/Pythia, Llama, Qwen2,
  Gemma, Mistral, StableLM, Phi, Phi-3, Falcon-7B, ... from a local folder with its tokenizer
  (docs/language_families.md is the support table; :mod:`.families` refuses the others from config.json,
  before any weights load). Grouped-query and multi-query attention are *ungrouped* (each query head gets its
  own copy of its group's key/value projection, an exact rewrite of the same function; fused ``qkv_proj`` and
  Falcon's ``query_key_value`` included), as hannamw/EAP-IG requires: the EAP graph has one k and one v input
  per query head. :func:`check_bridge_logits` refuses a model whose bridge computes other logits than the
  Hugging Face model on the task's prompts (:data:`LOGITS_RTOL`); :func:`check_hook_points` and
  :func:`check_residual_sum` refuse a model whose hooks or residual stream do not support the EAP graph,
  naming what is missing.

:func:`wrap_bridge` wraps GPT-2 in TransformerLens 4's ``TransformerBridge`` with split q/k/v inputs,
per-head results and MLP-input hooks (the hook points EAP-IG uses); :class:`LanguageModel` bundles the
HF module, its bridge, the per-head weights of the GPT-2 decomposed forward (``None`` for other
families: they run through the bridge's hooks, :mod:`.hooked`) and the prompt tokenizer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from certified_circuits.commands import COMMAND
from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.graph import EAPGraph, build_graph
from certified_circuits.language.tokenizer import GPT2PromptTokenizer, HFPromptTokenizer, PromptTokenizer, WordTokenizer

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
    """An HF causal LM, its TransformerBridge, its GPT-2 per-head weights (or None) and its prompt tokenizer."""

    name: str
    hf: Any
    bridge: Any
    weights: GPT2Weights | None
    tokenizer: PromptTokenizer
    #: where the hook path reads an MLP's input (:attr:`~.graph.EAPGraph.mlp_input_hook`)
    mlp_input_hook: str = "ln2.hook_in"

    @property
    def n_positions(self) -> int:
        cfg = self.hf.config
        return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None) or 2048)

    @property
    def graph(self) -> EAPGraph:
        """The EAP graph: from the GPT-2 weights, else from the bridge's config (parallel attention included)."""
        if self.weights is not None:
            return self.weights.graph
        cfg = self.bridge.cfg
        return build_graph(int(cfg.n_layers), int(cfg.n_heads), bool(getattr(cfg, "parallel_attn_mlp", False)),
                           self.mlp_input_hook)

    def graph_cfg(self) -> dict:
        """The ``cfg`` block of hannamw/EAP-IG's Graph JSON (the keys its ``Graph.from_model`` reads)."""
        g = self.graph
        d_model = int(self.bridge.cfg.d_model) if self.bridge is not None else int(self.weights.d_model)
        return {"n_layers": g.n_layers, "n_heads": g.n_heads, "parallel_attn_mlp": g.parallel_attn_mlp,
                "d_model": d_model}


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
    """Save an embedded model (HF format) and its vocabulary into ``model_dir``; its files get the umask's mode like
    every other output (save_pretrained's safetensors writes the weights 0600 whatever the umask)."""
    from certified_circuits.storage.atomic import follow_umask

    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    tok.save(model_dir / VOCAB_FILE)
    return follow_umask(model_dir, itself=False)


def load_embedded(model_dir: str | os.PathLike, with_bridge: bool = True) -> LanguageModel:
    """Load the embedded model trained by ``certified-circuits language-train``."""
    from transformers import GPT2LMHeadModel

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file() or not (model_dir / VOCAB_FILE).is_file():
        raise FileNotFoundError(f"{model_dir} is not an embedded language model (needs config.json and "
                                f"{VOCAB_FILE}); train one with `{COMMAND} language-train --tasks-dir TASKS_DIR "
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


#: hook points the EAP graph needs, per layer l (hannamw/EAP-IG's node in/out hooks; the input node reads
#: ``blocks.0.hook_resid_pre``, see :mod:`.hooked`); the MLP's input is ``ln2.hook_in`` or, where attention
#: and MLP share one norm, ``ln1.hook_in`` (:func:`mlp_input_hook`)
LAYER_HOOKS = ("hook_q_input", "hook_k_input", "hook_v_input", "attn.hook_result", "ln2.hook_in", "hook_mlp_out")


def mlp_input_hook(bridge) -> str:
    """Where an MLP reads its own input: the input of its norm, ``ln2.hook_in``; in a parallel block whose
    attention and MLP share one norm (Phi, Falcon-7B: the bridge has no ``ln2``), ``ln1.hook_in``. With split q/k/v
    inputs the attention normalises its own per-head copies of the residual, so that norm's output feeds only the
    MLP and its input is the MLP's copy of the residual (tested: a patch there changes no head's result)."""
    names = bridge.hook_dict
    if ("blocks.0.ln2.hook_in" not in names and bool(getattr(bridge.cfg, "parallel_attn_mlp", False))
            and "blocks.0.ln1.hook_in" in names):
        return "ln1.hook_in"
    return "ln2.hook_in"


def check_hook_points(bridge, mlp_input: str = "ln2.hook_in") -> None:
    """Raise naming every hook point the EAP graph needs that the bridge does not expose."""
    n_layers = int(bridge.cfg.n_layers)
    names = set(bridge.hook_dict)
    need = ["blocks.0.hook_resid_pre", f"blocks.{n_layers - 1}.hook_resid_post"]
    layer_hooks = [mlp_input if h == "ln2.hook_in" else h for h in LAYER_HOOKS]
    need += [f"blocks.{l}.{h}" for l in range(n_layers) for h in layer_hooks]
    missing = [n for n in need if n not in names]
    if missing:
        raise ValueError(f"this architecture ({getattr(bridge.cfg, 'architecture', '?')}) lacks the hook points the "
                         f"EAP graph needs: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}; EAP-IG "
                         f"needs per-head q/k/v inputs, per-head results and MLP input/output hooks (TransformerBridge's "
                         f"use_split_qkv_input, use_attn_result, use_hook_mlp_in)")


def _kv_heads(cfg) -> int:
    """Key/value heads of a transformers config: ``num_key_value_heads`` (Llama, Qwen2, Phi-3, ...), Falcon's
    ``num_kv_heads`` (1 for its multi-query layout), else one per query head."""
    n_heads = int(getattr(cfg, "num_attention_heads", 0) or 0)
    if getattr(cfg, "model_type", None) == "falcon":
        if getattr(cfg, "new_decoder_architecture", False) or not getattr(cfg, "multi_query", True):
            return int(getattr(cfg, "num_kv_heads", None) or n_heads)
        return 1
    return int(getattr(cfg, "num_key_value_heads", None) or n_heads)


def _repeat_heads(t: torch.Tensor, n_kv: int, head_dim: int, rep: int) -> torch.Tensor:
    """Rows of ``n_kv`` heads (``[n_kv * head_dim, ...]``), each head repeated ``rep`` times in place."""
    return t.reshape(n_kv, head_dim, *t.shape[1:]).repeat_interleave(rep, 0).reshape(n_kv * rep * head_dim,
                                                                                     *t.shape[1:])


def _ungroup_fused(state: dict, cfg, n_heads: int, n_kv: int, head_dim: int) -> list[str]:
    """Ungroup a fused q/k/v projection in ``state`` (in place); returns the keys it rewrote.

    Phi-3 ``qkv_proj``: rows ``[q (H) | k (H_kv) | v (H_kv)]``; k and v heads are repeated as in
    :func:`_ungroup_gqa`. Falcon-7B ``query_key_value`` (multi-query): rows ``[q (H) | k | v]``, rewritten to
    the per-head ``[q_h | k | v]`` layout Falcon reads without ``multi_query`` (``view(H, 3, head_dim)``).
    """
    rep = n_heads // n_kv
    keys = [k for k in state if k.endswith(("qkv_proj.weight", "qkv_proj.bias", "query_key_value.weight",
                                            "query_key_value.bias"))]
    for k in keys:
        t = state[k]
        q, kk, v = torch.split(t, [n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], 0)
        kk, v = _repeat_heads(kk, n_kv, head_dim, rep), _repeat_heads(v, n_kv, head_dim, rep)
        if "query_key_value" in k:   # Falcon without multi_query: [q_0, k_0, v_0, q_1, ...]
            parts = [x.reshape(n_heads, head_dim, *t.shape[1:]) for x in (q, kk, v)]
            state[k] = torch.stack(parts, 1).reshape(3 * n_heads * head_dim, *t.shape[1:])
        else:
            state[k] = torch.cat([q, kk, v], 0)
    return keys


def _ungroup_gqa(hf_model):
    """The same function with one key/value head per query head (hannamw/EAP-IG's ungrouped GQA).

    HF's ``repeat_kv`` gives query head h the key/value head ``h // (H / H_kv)``; repeating each k/v
    projection's rows ``H / H_kv`` times (``repeat_interleave`` along the head axis) and setting
    ``num_key_value_heads = H`` computes exactly the same logits. Fused projections are ungrouped too: Phi-3's
    ``qkv_proj`` and Falcon-7B's multi-query ``query_key_value`` (:func:`_ungroup_fused`; Falcon's key/value
    head count is ``num_kv_heads``, or 1 with ``multi_query``). Returns the model unchanged without GQA.
    """
    cfg = hf_model.config
    n_heads = int(getattr(cfg, "num_attention_heads", 0) or 0)
    n_kv = _kv_heads(cfg)
    if not n_heads or n_kv == n_heads:
        return hf_model
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
    rep = n_heads // n_kv
    state = hf_model.state_dict()
    new_cfg = type(cfg).from_dict(cfg.to_dict())
    new_cfg._attn_implementation = "eager"
    keys = [k for k in state if k.endswith(("k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias"))]
    model_type = getattr(cfg, "model_type", None)
    fused_known = model_type == "phi3" or (model_type == "falcon" and not getattr(cfg, "new_decoder_architecture", False))
    if keys and all(state[k].shape[0] == n_kv * head_dim for k in keys):
        for k in keys:
            state[k] = _repeat_heads(state[k], n_kv, head_dim, rep)
        new_cfg.num_key_value_heads = n_heads
    elif fused_known and _ungroup_fused(state, cfg, n_heads, n_kv, head_dim):
        if model_type == "falcon":
            new_cfg.multi_query, new_cfg.num_kv_heads = False, n_heads
        else:
            new_cfg.num_key_value_heads = n_heads
    else:
        raise ValueError(f"{type(hf_model).__name__} has grouped-query attention ({n_heads} query heads, {n_kv} key/value "
                         f"heads) without separate k_proj/v_proj projections or a fused q/k/v projection of a known "
                         f"layout; EAP-IG needs one key/value input per query head (ungrouped GQA), which this loader "
                         f"builds from k_proj/v_proj, Phi-3's qkv_proj and Falcon-7B's multi-query query_key_value only")
    ungrouped = type(hf_model)(new_cfg)
    ungrouped.load_state_dict(state, strict=True)
    return ungrouped.eval()


def check_residual_sum(lm: "LanguageModel", n_tokens: int = 6, atol: float = 1e-3) -> float:
    """Raise unless the residual stream is the sum of the EAP graph's node outputs plus constants.

    EAP edges exist only when ``resid_post(L-1) = input + sum_heads a + sum_mlps m + c`` with c independent
    of the input (attention output biases): pre-norm residual models. Two seeded token sequences must
    leave the same remainder c; a post-norm or sandwich-norm block (whose output is renormalised) fails.

    Returns:
        The largest difference between the two remainders (relative to the residual's scale).
    """
    from certified_circuits.language.hooked import node_outputs

    g = lm.graph
    vocab = int(lm.bridge.cfg.d_vocab)
    gen = torch.Generator().manual_seed(0)
    toks = torch.randint(0, vocab, (2, min(n_tokens, lm.n_positions)), generator=gen)
    nodes, resid = node_outputs(lm.bridge, g, toks, with_resid_post=True)
    rest = resid - nodes.sum(1)                                     # [2, P, d]
    err = float((rest[0] - rest[1]).abs().max()) / max(1.0, float(resid.abs().max()))
    if not err <= atol:
        raise ValueError(f"the residual stream of this model is not the sum of its heads' and MLPs' outputs (remainder "
                         f"differs by {err:.3g} between inputs): a post-norm or sandwich-norm block; the EAP graph "
                         f"(hannamw/EAP-IG) is defined for pre-norm residual transformers only")
    return err


#: the bridge's logits must equal the Hugging Face model's to this tolerance, relative to the logits' scale:
#: ``max |bridge - hf| <= LOGITS_RTOL * max(1, max |hf|)`` in float32 (the families that agree measure 1e-7 to 1e-6
#: on the test fixtures, the falcon-40b layout 0.39)
LOGITS_RTOL = 1e-4
#: prompts are checked in batches of this many (memory: every position's logits of one batch)
LOGITS_BATCH = 8
#: every position of the first this-many sequences is compared, the last position (the one the metric reads) of
#: the others (the reference is kept in memory while the bridge is built: V floats a position)
LOGITS_FULL_SEQUENCES = 16


def _kept(index: int, n: int) -> slice:
    return slice(0, n) if index < LOGITS_FULL_SEQUENCES else slice(n - 1, n)


def logit_check_tokens(tokenizer: PromptTokenizer, prompts: Sequence[str] | None, vocab_size: int
                       ) -> list[list[int]]:
    """Token ids the logits check runs: the prompts (as the pipeline encodes them), or, without prompts, two
    seeded random sequences of 12 tokens (ids below ``vocab_size``)."""
    if prompts:
        return [tokenizer.encode(text) for text in dict.fromkeys(prompts)]
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab_size, (2, 12), generator=gen).tolist()


def _batches(tokens: list[list[int]], pad_id: int):
    for start in range(0, len(tokens), LOGITS_BATCH):
        chunk = tokens[start:start + LOGITS_BATCH]
        width = max(len(t) for t in chunk)
        ids = torch.full((len(chunk), width), int(pad_id), dtype=torch.long)
        for i, t in enumerate(chunk):
            ids[i, : len(t)] = torch.tensor(t, dtype=torch.long)
        yield ids, [len(t) for t in chunk]


def reference_logits(hf_model, tokens: list[list[int]], pad_id: int) -> list[torch.Tensor]:
    """The Hugging Face model's float32 logits of every token sequence (right padding never reaches a sequence's
    own positions under causal attention): every position of the first :data:`LOGITS_FULL_SEQUENCES`, the last of
    the others. Run before the bridge rewires the model."""
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for ids, lengths in _batches(tokens, pad_id):
            logits = hf_model(ids).logits.float()
            out += [logits[i, _kept(len(out), n)].clone() for i, n in enumerate(lengths)]
    return out


def check_bridge_logits(bridge, reference: list[torch.Tensor], tokens: list[list[int]], pad_id: int, *,
                        family: str = "this model", rtol: float = LOGITS_RTOL) -> float:
    """Raise unless the bridge computes the reference logits (:func:`reference_logits`) on the same tokens.

    EAP-IG certifies a circuit of the function the bridge computes; when the bridge is wrong for a family, the
    circuits would be of a function the model does not compute. Tolerance: ``max |bridge - hf| <= rtol *
    max(1, max |hf|)`` over the positions :func:`reference_logits` kept (float32; :data:`LOGITS_RTOL`).

    Returns:
        The largest absolute difference.

    Raises:
        ValueError: naming the family, the difference, the tolerance, the sequence and what to do.
    """
    worst, where, scale = 0.0, 0, 1.0
    agree = total = 0
    with torch.no_grad():
        index = 0
        for ids, lengths in _batches(tokens, pad_id):
            logits = bridge(ids).float()
            for i, n in enumerate(lengths):
                ref = reference[index]
                got = logits[i, _kept(index, n)].to(ref.device)
                diff = float((got - ref).abs().max())
                scale = max(scale, float(ref.abs().max()))
                agree += int((got.argmax(-1) == ref.argmax(-1)).sum())
                total += got.shape[0]
                if diff > worst:
                    worst, where = diff, index
                index += 1
    if not worst <= rtol * scale:
        raise ValueError(f"TransformerBridge computes other logits than the Hugging Face model for {family}: max |diff| "
                         f"{worst:.3g} (sequence {where} of {len(tokens)}; the logits reach {scale:.3g}; tolerance "
                         f"{rtol:g} x max(1, max |logit|) = {rtol * scale:.3g}, float32), the argmax agrees on "
                         f"{agree} of {total} positions. Circuits found through the bridge would be of a function the "
                         f"model does not compute: this family is not supported by TransformerLens' bridge as "
                         f"installed (docs/language_families.md); use a supported family")
    return worst


def load_hf_model(model_path: str | os.PathLike, with_bridge: bool = True, prompts: Sequence[str] | None = None
                  ) -> LanguageModel:
    """Any causal LM that TransformerBridge boots, from a local Hugging Face folder (never downloads).

    The folder holds ``config.json``, the weights and the tokenizer files. Before any weights are loaded the
    family is checked (:func:`~.families.check_family`: a refused family raises naming why). The model runs in
    float32 with eager attention; grouped-query attention is ungrouped (module docstring); the bridge gets the
    EAP hook points, whose presence, the residual-sum property and the bridge's logits (equal to the Hugging
    Face model's on ``prompts``, :func:`check_bridge_logits`) are checked before any work.

    Args:
        model_path: the local folder.
        with_bridge: build the TransformerBridge (always needed for scores and evaluation).
        prompts: the task's own prompts (clean and corrupted) for the logits check; None checks two seeded
            random token sequences.

    Returns:
        A :class:`LanguageModel` with ``weights=None`` (the hook path, :mod:`.hooked`), named after the
        folder.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from certified_circuits.language.families import check_family, read_config

    src = Path(model_path)
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src} is not a Hugging Face model folder (no config.json); save one with "
                                f"`model.save_pretrained(DIR)` and `tokenizer.save_pretrained(DIR)`")
    family = check_family(read_config(src), where=str(src))
    try:
        config = AutoConfig.from_pretrained(src, local_files_only=True)
        hf_tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
        hf = AutoModelForCausalLM.from_pretrained(src, local_files_only=True, attn_implementation="eager",
                                                  dtype=torch.float32)
    except Exception as err:  # transformers raises OSError, ValueError or its own types
        raise ValueError(f"{src}: the model or its tokenizer cannot be loaded offline ({type(err).__name__}: "
                         f"{str(err)[:300]}); the folder needs config.json, the weights and the tokenizer files "
                         f"(`tokenizer.save_pretrained(DIR)`)") from err
    arch = (config.architectures or [type(hf).__name__])[0]
    tok = HFPromptTokenizer(hf_tok)
    hf = hf.eval()
    for p in hf.parameters():
        p.requires_grad_(False)
    if not with_bridge:
        return LanguageModel(src.name, _ungroup_gqa(hf), None, None, tok)
    tokens = logit_check_tokens(tok, prompts, int(config.vocab_size))
    reference = reference_logits(hf, tokens, tok.pad_id)   # the model as saved, before ungrouping and the bridge
    hf = _ungroup_gqa(hf)
    for p in hf.parameters():
        p.requires_grad_(False)
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    try:
        bridge = build_bridge_from_module(hf, arch, hf_config=hf.config)
        bridge.set_use_split_qkv_input(True)
        bridge.set_use_attn_result(True)
        bridge.set_use_hook_mlp_in(True)
    except Exception as err:
        raise ValueError(f"TransformerBridge cannot wrap {arch} from {src} with the EAP hook points "
                         f"({type(err).__name__}: {str(err)[:300]})") from err
    where = f"{family.name} (model_type {family.model_type!r}, {arch}, attention {family.attention}) from {src}"
    check_bridge_logits(bridge, reference, tokens, tok.pad_id, family=where)
    mlp_input = mlp_input_hook(bridge)
    check_hook_points(bridge, mlp_input)
    lm = LanguageModel(src.name, hf, bridge, None, tok, mlp_input)
    check_residual_sum(lm)
    return lm


#: ``--model`` choices: the embedded tiny GPT-2, GPT-2 Small (decomposed fast path) and any HF causal LM
MODEL_KINDS = ("embedded", "gpt2", "hf")


def load_language_model(model: str, model_path: str | os.PathLike | None, with_bridge: bool = True,
                        prompts: Sequence[str] | None = None, device: Any = None) -> LanguageModel:
    """Load a language model, checked, for attribution or evaluation.

    Args:
        model: ``'embedded'`` (the trained tiny model at ``model_path``), ``'gpt2'`` (GPT-2 Small) or ``'hf'``
            (any causal LM folder, :func:`load_hf_model`).
        model_path: the folder (None: GPT-2 from the hub cache).
        with_bridge: also build the TransformerBridge (the hook path).
        prompts: the prompts an ``hf`` model's bridge logits are checked on against the HF model's; give the
            task's own clean and corrupted prompts. The embedded model and GPT-2 are checked against the
            decomposed forward.
        device: where to move the weights and the bridge (None: leave them on the CPU).

    Returns:
        The :class:`LanguageModel`.
    """
    if model == "hf":
        if model_path is None:
            raise ValueError("--model hf needs --model-path pointing at a local Hugging Face model folder")
        lm = load_hf_model(model_path, with_bridge, prompts)
    elif model == "embedded":
        if model_path is None:
            raise ValueError("--model embedded needs --model-path pointing at the trained model directory")
        lm = load_embedded(model_path, with_bridge)
    elif model == "gpt2":
        lm = load_gpt2(model_path, with_bridge)
    else:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODEL_KINDS)}")
    if device is not None:
        if lm.weights is not None:
            lm.weights = lm.weights.to(device)
        if lm.bridge is not None:
            lm.bridge.to(device)
    return lm
