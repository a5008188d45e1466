"""Training of the embedded tiny GPT-2 on the three tasks (the embedded default: README).

The paper analyses a pretrained GPT-2 Small; the embedded default trains a small GPT-2-architecture model
instead, on a mixture of the three tasks' *ID training distributions* (IOI, IOI-Hard, Greater-Than),
drawn fresh from a dedicated seeded stream that never overlaps the circuit-discovery and evaluation splits
(any prompt whose clean text occurs in a held-out split is dropped). Loss: cross-entropy of the answer
token at the last prompt position, on clean prompts. Position augmentation: a share of the prompts get
their position ids offset by a random amount so that every position embedding is trained (a pretrained model has seen
all positions; OOD prompts are longer than ID ones). No OOD template is ever used for training.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from certified_circuits.language.graph import EMBEDDED_N_HEAD, EMBEDDED_N_LAYER
from certified_circuits.language.models import build_model, tiny_config
from certified_circuits.language.tasks import TASKS, TRAIN_MODEL_STREAM, Example, generate_examples
from certified_circuits.language.tokenizer import WordTokenizer


@dataclass
class TrainConfig:
    """Hyperparameters of the embedded model and its training run."""

    n_layer: int = EMBEDDED_N_LAYER
    n_head: int = EMBEDDED_N_HEAD
    n_embd: int = 64
    n_positions: int = 80
    steps: int = 900
    batch_per_task: int = 24
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 100
    shift_prob: float = 0.3
    seed: int = 0
    time_limit_s: float | None = None


def _pool(task: str, n: int, seed: int, chunk: int, exclude: set[str]) -> list[Example]:
    ex = generate_examples(task, "train", n, seed, stream=TRAIN_MODEL_STREAM + 10 * chunk)
    return [e for e in ex if e.clean not in exclude]


def _batch(examples: Sequence[Example], tok: WordTokenizer, n_positions: int, rng: np.random.Generator,
           shift_prob: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, position ids (randomly offset rows), last positions and answer ids."""
    seqs = [tok.encode(e.clean) for e in examples]
    p = max(len(s) for s in seqs)
    ids = np.full((len(seqs), p), tok.pad_id, dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    lens = np.array([len(s) for s in seqs])
    shift = np.where(rng.random(len(seqs)) < shift_prob,
                     np.floor(rng.random(len(seqs)) * (n_positions - lens + 1)).astype(np.int64), 0)
    pos = np.minimum(np.arange(p)[None, :] + shift[:, None], n_positions - 1)
    ans = np.array([tok.answer_id(e.answer) for e in examples])
    return torch.as_tensor(ids), torch.as_tensor(pos), torch.as_tensor(lens - 1), torch.as_tensor(ans)


def last_logits(model, ids: torch.Tensor, last: torch.Tensor, position_ids: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Logits at positions ``last`` (one per row) of an HF GPT-2 on right-padded ids."""
    mask = (torch.arange(ids.shape[1], device=ids.device)[None, :] <= last[:, None]).long()  # right padding only
    h = model.transformer(input_ids=ids, position_ids=position_ids, attention_mask=mask).last_hidden_state
    return model.lm_head(h[torch.arange(ids.shape[0], device=h.device), last])


def train_embedded(cfg: TrainConfig, exclude_prompts: Iterable[str] = (), progress: bool = True):
    """Train the embedded model; returns (model, tokenizer, training log dict)."""
    tok = WordTokenizer.default()
    model = build_model(tiny_config(tok.vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_positions), cfg.seed)
    model.config._attn_implementation = "sdpa"  # faster on CPU for training; eager again afterwards
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (1 + np.cos(np.pi * min(s, cfg.steps) / cfg.steps)))
    rng = np.random.default_rng([cfg.seed, 99])
    exclude = set(exclude_prompts)
    pool_size = cfg.batch_per_task * 200
    pools = {t: _pool(t, pool_size, cfg.seed, 0, exclude) for t in TASKS}
    chunk, used = 0, 0
    t0 = time.time()
    losses: list[float] = []
    bar = tqdm(range(cfg.steps), desc="train embedded LM", unit="step", disable=not progress, file=sys.stderr)
    for step in bar:
        if used + cfg.batch_per_task > min(len(p) for p in pools.values()):
            chunk += 1
            pools = {t: _pool(t, pool_size, cfg.seed, chunk, exclude) for t in TASKS}
            used = 0
        exs = [e for t in TASKS for e in pools[t][used: used + cfg.batch_per_task]]
        used += cfg.batch_per_task
        ids, pos, last, ans = _batch(exs, tok, cfg.n_positions, rng, cfg.shift_prob)
        loss = F.cross_entropy(last_logits(model, ids, last, pos), ans)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % 50 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
        if cfg.time_limit_s is not None and time.time() - t0 > cfg.time_limit_s:
            print(f"train embedded LM: time limit {cfg.time_limit_s}s reached at step {step + 1}", file=sys.stderr)
            break
    bar.close()
    model.config._attn_implementation = "eager"
    model.eval()
    log = {"steps_run": len(losses), "final_loss": float(np.mean(losses[-50:])), "train_seconds": time.time() - t0,
           "examples_seen": len(losses) * cfg.batch_per_task * len(TASKS)}
    return model, tok, log


def held_out_accuracy(model, tokenizer, held_out: dict[str, dict[str, list[Example]]], max_len: int) -> dict:
    """The trained model's accuracy on every held-out task and split (the full model: nothing patched).

    Args:
        model: the trained HF ``GPT2LMHeadModel``.
        tokenizer: its tokenizer.
        held_out: task -> split -> prompts (never seen in training).
        max_len: the model's context length.

    Returns:
        task -> split -> ``{"accuracy", "binary_accuracy", "logit_diff", "n_examples"}`` (next-token
        accuracy, answer-vs-distractor accuracy, mean logit difference).
    """
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.patching import full_model_metrics
    from certified_circuits.language.tokenizer import encode_examples

    weights = GPT2Weights.from_hf(model)
    accuracy: dict = {}
    for task, splits in held_out.items():
        accuracy[task] = {}
        for split, examples in splits.items():
            r = full_model_metrics(weights, encode_examples(examples, tokenizer, max_len=max_len))
            accuracy[task][split] = {"accuracy": float(r.accuracy[0]), "binary_accuracy": float(r.binary_accuracy[0]),
                                     "logit_diff": float(r.logit_diff[0]), "n_examples": r.n_examples}
    return accuracy

