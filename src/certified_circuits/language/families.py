"""What each causal-LM family is, and whether the EAP graph can be attributed on it: one owner per fact.

Read from a model folder's ``config.json`` alone (``model_type`` and the shape keys), so the workflow refuses an
unsupported family when the config is parsed, before any weights are loaded or any job runs
(``pipeline/config_language.py``), and :func:`~.models.load_hf_model` refuses it again before it loads weights.
``docs/language_families.md`` is the support table; ``tests/unit/language/test_families.py`` checks it
against a tiny random-weight model of every family.

A family is supported when TransformerLens 4.3's ``TransformerBridge`` boots it with the EAP hook points
(per-head q/k/v inputs, per-head results, MLP input and output), its residual stream is the sum of its heads'
and MLPs' outputs (pre-norm), and the bridge computes the Hugging Face model's logits (checked on the task's
own prompts by :func:`~.models.check_bridge_logits` when the model is loaded). Families outside
:data:`FAMILIES` are not refused here: the load-time checks (hook points, residual sum, logits) decide.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

#: TransformerBridge's attention bridge for these families has no hook before the q/k/v projections
_NO_SPLIT_QKV = (
    "TransformerLens 4.3's TransformerBridge has no per-head q/k/v input hooks for {name} (its "
    "attention bridge does not split the q/k/v inputs: use_split_qkv_input raises "
    "NotImplementedError), and EAP-IG needs one input per head and letter; use a family the bridge "
    "splits (GPT-2, Pythia, Llama, Qwen2, Mistral, Gemma, Phi, Phi-3, StableLM) or add split-qkv "
    "support for {name} to TransformerLens"
)
_SANDWICH = (
    "{name} renormalises every block's output (sandwich norm), so its residual stream is not the sum of "
    "its heads' and MLPs' outputs: the EAP graph (hannamw/EAP-IG) is defined for pre-norm residual "
    "transformers only; use a pre-norm family"
)


def _n_heads(cfg: Mapping[str, Any]) -> int:
    return int(cfg.get("num_attention_heads") or cfg.get("n_head") or cfg.get("num_heads") or 0)


def _n_kv(cfg: Mapping[str, Any]) -> int:
    """Key/value heads: ``num_key_value_heads`` (Llama, ...), ``num_kv_heads`` (Falcon), 1 for multi-query."""
    h = _n_heads(cfg)
    if cfg.get("model_type") == "falcon":
        if cfg.get("new_decoder_architecture"):
            return int(cfg.get("num_kv_heads") or h)
        return 1 if cfg.get("multi_query", True) else int(cfg.get("num_kv_heads") or h)
    if cfg.get("multi_query"):
        return 1
    return int(cfg.get("num_key_value_heads") or h)


def _grouping(cfg: Mapping[str, Any]) -> str:
    h, kv = _n_heads(cfg), _n_kv(cfg)
    return "MHA" if kv == h else "MQA" if kv == 1 else "GQA"


def _falcon_refusal(cfg: Mapping[str, Any]) -> str | None:
    if cfg.get("alibi"):
        return (
            "a Falcon with ALiBi positions (alibi: true) is not tested here; its bridge reimplements "
            "attention with ALiBi and has not been checked against Hugging Face's logits"
        )
    if cfg.get("new_decoder_architecture"):
        return (
            "Falcon's new decoder architecture (falcon-40b/180b layout: new_decoder_architecture, "
            f"{_n_kv(cfg)} key/value heads) packs query_key_value per key/value group, but TransformerLens 4.3 "
            "splits it as [all q | all k | all v], so the bridge computes other logits than Hugging Face "
            "(docs/language_families.md gives the measured difference) or fails to boot; use a Falcon-7B-layout model "
            "(multi_query, parallel_attn) or another family"
        )
    if not cfg.get("parallel_attn", True):
        return "a sequential Falcon (parallel_attn: false) is not tested here"
    return None


def _falcon_norm(cfg: Mapping[str, Any]) -> str:
    if cfg.get("new_decoder_architecture"):
        return "LayerNorm, one norm each for attention and MLP (ln_attn, ln_mlp)"
    if cfg.get("parallel_attn", True):
        return "LayerNorm, one norm shared by attention and MLP"
    return "LayerNorm, pre-norm"


@dataclass(frozen=True)
class Family:
    """Facts of one ``model_type``.

    Attributes:
        name: the family's name in messages and the docs' table.
        normalisation: the norm and where it sits (``LayerNorm``, ``RMSNorm``; ``parallel`` blocks read one
            residual with their attention and MLP); a callable reads it from the config.
        fused_qkv: q, k and v come out of one projection (ungrouped GQA/MQA must rewrite it).
        parallel: attention and MLP read the same block input (``parallel_attn_mlp``); a callable reads it
            from the config.
        refusal: why the family cannot be attributed (a format string with ``{name}``), or a function of the
            config that returns the reason or None; None when supported.
    """

    name: str
    normalisation: str | Callable[[Mapping[str, Any]], str]
    fused_qkv: bool = False
    parallel: bool | Callable[[Mapping[str, Any]], bool] = False
    refusal: str | Callable[[Mapping[str, Any]], str | None] | None = None


#: every family tried (docs/language_families.md), keyed by config.json's ``model_type``
FAMILIES: dict[str, Family] = {
    "gpt2": Family("GPT-2", "LayerNorm, pre-norm"),
    "gpt_neox": Family(
        "GPT-NeoX / Pythia",
        "LayerNorm, pre-norm (two norms when parallel)",
        fused_qkv=True,
        parallel=lambda c: bool(c.get("use_parallel_residual", True)),
    ),
    "llama": Family("Llama", "RMSNorm, pre-norm"),
    "mistral": Family("Mistral", "RMSNorm, pre-norm"),
    "qwen2": Family("Qwen2", "RMSNorm, pre-norm"),
    "gemma": Family("Gemma", "RMSNorm (1 + w), pre-norm"),
    "stablelm": Family("StableLM", "LayerNorm, pre-norm"),
    "phi": Family("Phi", "LayerNorm, one norm shared by attention and MLP", parallel=True),
    "phi3": Family("Phi-3", "RMSNorm, pre-norm", fused_qkv=True),
    "falcon": Family(
        "Falcon",
        _falcon_norm,
        fused_qkv=True,
        parallel=lambda c: bool(c.get("parallel_attn", True)),
        refusal=_falcon_refusal,
    ),
    "opt": Family("OPT", "LayerNorm, pre-norm", refusal=_NO_SPLIT_QKV),
    "gpt_neo": Family("GPT-Neo", "LayerNorm, pre-norm", refusal=_NO_SPLIT_QKV),
    "gemma2": Family("Gemma-2", "RMSNorm, sandwich (pre- and post-norm)", refusal=_SANDWICH),
    "gemma3_text": Family("Gemma-3", "RMSNorm, sandwich (pre- and post-norm)", refusal=_SANDWICH),
}


@dataclass(frozen=True)
class FamilyReport:
    """A model's family facts, read from its config (:func:`describe`).

    Attributes:
        model_type: config.json's ``model_type``.
        name: the family's name (the model_type itself when the family is not in :data:`FAMILIES`).
        attention: ``MHA``, ``GQA`` or ``MQA`` (key/value heads vs query heads), then ``fused qkv`` and
            ``parallel`` where they apply, e.g. ``"MQA, fused qkv, parallel"``.
        normalisation: as :attr:`Family.normalisation` (``?`` for an unknown family).
        refusal: why it cannot be attributed, or None.
        known: whether the family is in :data:`FAMILIES` (tested here).
    """

    model_type: str
    name: str
    attention: str
    normalisation: str
    refusal: str | None
    known: bool


def describe(config: Mapping[str, Any]) -> FamilyReport:
    """The family facts of a config (config.json's dict, or a transformers config's ``to_dict()``)."""
    model_type = str(config.get("model_type") or "?")
    fam = FAMILIES.get(model_type)
    kinds = [_grouping(config)] if _n_heads(config) else ["?"]
    if fam is None:
        return FamilyReport(model_type, model_type, kinds[0], "?", None, False)
    if fam.fused_qkv:
        kinds.append("fused qkv")
    if fam.parallel(config) if callable(fam.parallel) else fam.parallel:
        kinds.append("parallel")
    refusal = fam.refusal(config) if callable(fam.refusal) else fam.refusal
    if isinstance(refusal, str):
        refusal = refusal.format(name=fam.name)
    norm = fam.normalisation(config) if callable(fam.normalisation) else fam.normalisation
    return FamilyReport(model_type, fam.name, ", ".join(kinds), norm, refusal, True)


class UnsupportedFamilyError(ValueError):
    """The model's family cannot be attributed (the message names the family, the reason and the fix)."""


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    """config.json of a model folder, as a dict (raises FileNotFoundError / ValueError naming the file)."""
    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); save the model with save_pretrained(DIR)") from err


def check_family(config: Mapping[str, Any], where: str = "the model") -> FamilyReport:
    """Raise :class:`UnsupportedFamilyError` when the family is refused; else return its facts."""
    report = describe(config)
    if report.refusal is not None:
        raise UnsupportedFamilyError(
            f"{where} is a {report.name} model (model_type {report.model_type!r}, "
            f"attention {report.attention}), which cannot be attributed: {report.refusal}"
        )
    return report
