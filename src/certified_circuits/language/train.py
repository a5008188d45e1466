"""Training of the embedded tiny GPT-2 on the three tasks (the embedded default: README).

The paper analyses a pretrained GPT-2 Small; the embedded default trains a small GPT-2-architecture model
instead, on a mixture of the three tasks' *ID training distributions* (IOI, IOI-Hard, Greater-Than),
drawn fresh from a dedicated seeded stream that never overlaps the circuit-discovery and evaluation splits
(any prompt whose clean text occurs in a held-out split is dropped). Loss: cross-entropy of the answer
token at the last prompt position, on clean prompts. Position augmentation: a share of the prompts get
their position ids offset by a random amount so that every position embedding is trained (a pretrained model has seen
all positions; OOD prompts are longer than ID ones). No OOD template is ever used for training.

Options for a model whose circuit is known (:mod:`.ground_truth`): ``TrainConfig.tasks`` trains on the named tasks
only (e.g. ``("induction",)``), and ``attn_only`` makes the model attention-only *in GPT-2's architecture*: every
MLP's output projection ``c_proj`` (weight and bias) is set to 0 and every MLP parameter (``ln_2``, ``c_fc``,
``c_proj``) is frozen, so each MLP node outputs exactly 0 and the model is the sum of its attention heads,
while the HF ``GPT2LMHeadModel``, the TransformerBridge and the decomposed GPT-2 forward work unchanged. The
defaults (the three tasks, MLPs on) are the embedded default's training run, unchanged.
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
from certified_circuits.language.tasks import TASKS, TRAIN_MODEL_STREAM, TRAINING_LOSSES, Example, generate_examples
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
    #: the tasks whose ID training distributions are mixed (default: the embedded default's three)
    tasks: tuple[str, ...] = TASKS
    #: MLP outputs fixed at exactly 0 (module docstring)
    attn_only: bool = False
    #: "last": cross-entropy of the answer at the last prompt position (the default); "all": next-token
    #: cross-entropy at every position of the clean prompt followed by its answer (:func:`sequence_loss`)
    loss: str = "last"


#: hidden width of the switched-off MLPs of an attention-only model (any width gives output 0; 4 costs nothing)
ATTN_ONLY_D_MLP = 4
#: TrainConfig.loss values
LOSSES = TRAINING_LOSSES  # defined beside the tasks, so the CLI reads it without importing torch


def switch_off_mlps(model) -> None:
    """Make an HF ``GPT2LMHeadModel`` attention-only: every MLP outputs exactly 0, and stays so in training.

    Sets each block's ``mlp.c_proj`` weight and bias to 0 (MLP output ``gelu(ln_2(x) W_in + b_in) 0 + 0 = 0``)
    and freezes every parameter of the MLP and of ``ln_2`` (``requires_grad = False``: no gradient, no weight
    decay), so that they keep their values through training.

    Args:
        model: the HF GPT-2 (modified in place).
    """
    with torch.no_grad():
        for block in model.transformer.h:
            block.mlp.c_proj.weight.zero_()
            block.mlp.c_proj.bias.zero_()
            for p in list(block.mlp.parameters()) + list(block.ln_2.parameters()):
                p.requires_grad_(False)


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


def sequence_loss(model, ids: torch.Tensor, pos: torch.Tensor, last: torch.Tensor, ans: torch.Tensor
                  ) -> torch.Tensor:
    """Mean next-token cross-entropy over every position of ``prompt + answer`` (right-padded prompts).

    The sequence ``x`` of row b is its prompt ``ids[b, :last_b + 1]`` followed by ``ans[b]``; the loss is
    ``mean_{b, p <= last_b} -log softmax(f(x)_p)[x_{p+1}]`` (each row's positions weighted equally). On the induction
    task the first half's positions are unpredictable (a constant floor) and every second-half position is an
    induction target, so the repeat is learned from k+1 targets per prompt instead of one.

    Args:
        model: the HF GPT-2.
        ids: int64 [B, P] right-padded prompt ids.
        pos: int64 [B, P] position ids.
        last: int64 [B] last prompt positions.
        ans: int64 [B] answer ids.

    Returns:
        The scalar loss.
    """
    b = torch.arange(ids.shape[0])
    seq = torch.cat([ids, ids[:, :1]], 1)
    seq[b, last + 1] = ans
    p = torch.arange(seq.shape[1])[None, :]
    pos = torch.cat([pos, (pos[:, -1:] + 1).clamp(max=model.config.n_positions - 1)], 1)   # offsets as the prompt's
    keep = p[:, :-1] <= last[:, None]                                             # [B, P] predicting positions
    mask = (p <= last[:, None] + 1).long()
    logits = model(input_ids=seq, position_ids=pos, attention_mask=mask).logits[:, :-1]
    nll = F.cross_entropy(logits.transpose(1, 2), seq[:, 1:], reduction="none")   # [B, P]
    return ((nll * keep).sum(1) / keep.sum(1)).mean()


def last_logits(model, ids: torch.Tensor, last: torch.Tensor, position_ids: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Logits at positions ``last`` (one per row) of an HF GPT-2 on right-padded ids."""
    mask = (torch.arange(ids.shape[1], device=ids.device)[None, :] <= last[:, None]).long()  # right padding only
    h = model.transformer(input_ids=ids, position_ids=position_ids, attention_mask=mask).last_hidden_state
    return model.lm_head(h[torch.arange(ids.shape[0], device=h.device), last])


def train_embedded(cfg: TrainConfig, exclude_prompts: Iterable[str] = (), progress: bool = True):
    """Train the embedded model on ``cfg.tasks`` (attention-only when ``cfg.attn_only``).

    Args:
        cfg: the hyperparameters.
        exclude_prompts: clean prompts never to train on (the held-out splits).
        progress: show a progress bar on stderr.

    Returns:
        (model, tokenizer, training log dict).
    """
    tok = WordTokenizer.default()
    config = tiny_config(tok.vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_positions)
    if cfg.attn_only:
        config.n_inner = ATTN_ONLY_D_MLP   # the MLPs output 0 whatever their width: keep them cheap
    model = build_model(config, cfg.seed)
    if cfg.attn_only:
        switch_off_mlps(model)
    model.config._attn_implementation = "sdpa"  # faster on CPU for training; eager again afterwards
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (1 + np.cos(np.pi * min(s, cfg.steps) / cfg.steps)))
    rng = np.random.default_rng([cfg.seed, 99])
    exclude = set(exclude_prompts)
    pool_size = cfg.batch_per_task * 200
    tasks = tuple(cfg.tasks)
    if cfg.loss not in LOSSES:
        raise ValueError(f"TrainConfig.loss is {cfg.loss!r}; choose one of {', '.join(LOSSES)}")
    if not tasks:
        raise ValueError("TrainConfig.tasks is empty: name at least one task to train on")
    pools = {t: _pool(t, pool_size, cfg.seed, 0, exclude) for t in tasks}
    chunk, used = 0, 0
    t0 = time.time()
    losses: list[float] = []
    bar = tqdm(range(cfg.steps), desc="train embedded LM", unit="step", disable=not progress, file=sys.stderr)
    for step in bar:
        if used + cfg.batch_per_task > min(len(p) for p in pools.values()):
            chunk += 1
            pools = {t: _pool(t, pool_size, cfg.seed, chunk, exclude) for t in tasks}
            used = 0
        exs = [e for t in tasks for e in pools[t][used: used + cfg.batch_per_task]]
        used += cfg.batch_per_task
        ids, pos, last, ans = _batch(exs, tok, cfg.n_positions, rng, cfg.shift_prob)
        if cfg.loss == "all":
            loss = sequence_loss(model, ids, pos, last, ans)
        else:
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
           "examples_seen": len(losses) * cfg.batch_per_task * len(tasks)}
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

