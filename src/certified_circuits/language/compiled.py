"""An induction circuit planted by construction: compiled (hand-set) weights of an attention-only GPT-2.

Training a tiny GPT-2 on the induction task does not form induction heads within a CPU budget, so this module
*compiles* one (issue 34 allows a circuit "planted by construction"). The result is an ordinary HF
``GPT2LMHeadModel`` over the embedded default's word vocabulary (:meth:`~.tokenizer.WordTokenizer.default`), 2
layers x 4 heads, MLPs switched off exactly as :func:`~.train.switch_off_mlps` does, untied ``lm_head``; every
language stage, the TransformerBridge and the decomposed GPT-2 forward run on it unchanged. A noisy variant
(``induction_noisy``, :func:`compile_induction_noisy`: 2 x 8 heads, two previous-token and two induction heads of
graded strengths among 12 distractors with small data-dependent effects) is built from the same blocks;
:func:`compile_model` picks one by name (:data:`~.graph.COMPILED_SHAPES`).

**Residual stream.** ``d_model`` splits into orthogonal blocks of coordinates (one-hot directions):

* ``TOK`` (68 dims): one per induction word (:data:`~.tasks.INDUCTION_SYMBOLS`); ``OTHER`` (:data:`OTHER_DIMS` dims):
  every other vocabulary word is a seeded random unit vector there (they share it; the circuit never reads it);
* ``POS`` (``n_positions`` dims): one per position;
* ``PREV`` (68 dims): the previous token's identity, written by the previous-token head;
* ``OUT`` (68 dims): the copied answer, written by the induction head and read by ``lm_head``.

Write ``C = I - 11^T / d`` (centring). Every embedding row and every head output is multiplied by ``C``, so the
residual stream is **exactly zero-mean across its d dims** and GPT-2's LayerNorm (weight 1, bias 0, kept exact)
only rescales: ``LN(x) = x sqrt(d) / ||x||`` (up to eps). A residual made of n unit blocks (token, position, ...)
is read with scale ``s_n = sqrt(d / n)`` on each of its one-hot coordinates. Centring leaves an inner product of
two different one-hots at ``-1/d``, the same for every key, which softmax ignores.

* ``wte[w] = C e_TOK(w)``, ``wpe[p] = C e_POS(p)``.
* **Layer 0, previous-token head P**: ``q_i = w_P e_{i-1}``, ``k_j = w_P e_j`` in head coordinates (POS read),
  so the score of key j is ``s_2^2 w_P^2 / sqrt(d_head) [j = i-1]``; ``w_P`` makes that margin
  :data:`PREV_MARGIN` (softmax over <= 64 keys puts > 0.99 on i-1). ``v_j = e_TOK(j)``; ``c_proj`` writes
  ``C e_PREV(tok_{j}) / s_2`` (a unit block).
* **Layer 1, induction head I**: ``q_i = w_I e_TOK(i)``, ``k_j = w_I e_PREV(j)`` so that the key after an earlier
  occurrence of the query word scores ``s_3^2 w_I^2 / sqrt(d_head) =`` :data:`INDUCTION_MARGIN` above the others.
  Position 0 (whose "previous token" P can only take from itself) is pushed down by a sink term: a constant query
  bias 1 on a spare head coordinate times ``-w_0 e_POS(0)`` in the key, worth ``-2`` margins. ``v_j = e_TOK(j)``,
  ``c_proj`` writes ``C e_OUT(tok_j) / s_3``.
* ``lm_head[w] = lambda e_OUT(w)`` for induction words, 0 otherwise; ``ln_f`` weight 1, bias 0; ``lambda`` makes the
  copied word's logit :data:`OUT_MARGIN` above the rest (final residual: 4 unit blocks, ``s_4``).

**Distractors and noise.** The other 3 heads of each layer get seeded Gaussian weights: attention scores of std
:data:`DISTRACTOR_SCORE_STD` (non-trivial patterns) and outputs of norm ~ :data:`DISTRACTOR_OUT` (a fraction of one
unit block, spread over all coordinates, OUT included, centred). Which head of layer 0 is P and which head of layer 1
is I is a seeded permutation. Finally seeded Gaussian noise is added to every embedding, attention and
unembedding weight and bias, of std :data:`NOISE_REL` times the matrix's root-mean-square entry (then embedding
rows and ``c_proj`` are re-centred, so zero-mean stays exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from certified_circuits.language import names
from certified_circuits.language.graph import COMPILED_N_HEAD, COMPILED_N_LAYER, COMPILED_SHAPES
from certified_circuits.language.models import build_model, tiny_config
from certified_circuits.language.tasks import INDUCTION_SYMBOLS
from certified_circuits.language.tokenizer import WordTokenizer

#: the clean control's shape (language-train --compiled induction)
N_LAYER = COMPILED_N_LAYER
N_HEAD = COMPILED_N_HEAD
#: positions: OOD prompts are at most 22 + 21 = 43 words; 64 leaves room
N_POSITIONS = 64
#: dims of the shared random subspace of the non-induction words
OTHER_DIMS = 8
#: attention-score margins (logit units) of the matching key over the others, for P and I
PREV_MARGIN = 10.0
INDUCTION_MARGIN = 10.0
#: logit margin of the copied word over the other words
OUT_MARGIN = 8.0
#: distractor heads: std of their attention scores and norm of their output (unit block = 1)
DISTRACTOR_SCORE_STD = 2.0
DISTRACTOR_OUT = 0.5
#: Gaussian noise added to every constructed weight matrix and bias: std NOISE_REL times the matrix's root mean
#: square entry (a unit row of an embedding gets noise of norm ~NOISE_REL)
NOISE_REL = 0.05


@dataclass(frozen=True)
class Layout:
    """Where the circuit sits: the previous-token head of layer 0, the induction head of layer 1, the blocks."""

    previous_token_head: int
    induction_head: int
    d_model: int
    tok: int  # first coordinate of each block
    other: int
    pos: int
    prev: int
    out: int

    @property
    def heads(self) -> tuple[str, str]:
        """Names ``(a0.h<P>, a1.h<I>)``."""
        return names.head(0, self.previous_token_head), names.head(1, self.induction_head)


def layout(seed: int, n_positions: int = N_POSITIONS) -> Layout:
    """The block layout and the seeded choice of P's and I's head indices.

    Args:
        seed: the model's seed (heads: ``rng([seed, 34]).permutation(4)[0]`` per layer).
        n_positions: context length (size of POS).

    Returns:
        :class:`Layout`; ``d_model = 3 * 68 + OTHER_DIMS + n_positions`` rounded up to a multiple of 4.
    """
    n_sym = len(INDUCTION_SYMBOLS)
    rng = np.random.default_rng([int(seed), 34])
    p_head, i_head = int(rng.permutation(N_HEAD)[0]), int(rng.permutation(N_HEAD)[0])
    used = 3 * n_sym + OTHER_DIMS + n_positions
    d = -(-used // N_HEAD) * N_HEAD
    if d // N_HEAD < max(n_positions, n_sym + 1):
        raise ValueError(f"head dim {d // N_HEAD} cannot hold {n_positions} positions and {n_sym} + 1 token dims")
    return Layout(
        p_head,
        i_head,
        d,
        0,
        n_sym,
        n_sym + OTHER_DIMS,
        n_sym + OTHER_DIMS + n_positions,
        2 * n_sym + OTHER_DIMS + n_positions,
    )


def _centre_rows(w: torch.Tensor) -> torch.Tensor:
    """``w C``: every row minus its mean (a row written into the residual becomes zero-mean)."""
    return w - w.mean(dim=-1, keepdim=True)


def _embeddings(tok: WordTokenizer, lay, d: int, n_positions: int, lam: float, gen: torch.Generator):
    """``wte`` (each induction word ``e_TOK(w)``, every other word a seeded unit vector in OTHER), ``wpe``
    (``e_POS(p)``) and ``lm_head`` (``lambda e_OUT(w)`` for induction words, 0 otherwise), before centring and noise.

    Returns:
        ``(wte [V, d], wpe [n_positions, d], lm [V, d])``.
    """
    n_sym = len(INDUCTION_SYMBOLS)
    sym_ids, t = torch.tensor([tok.answer_id(w) for w in INDUCTION_SYMBOLS]), torch.arange(n_sym)
    wte = torch.zeros(tok.vocab_size, d)
    other = torch.randn(tok.vocab_size, OTHER_DIMS, generator=gen)
    wte[:, lay.other: lay.other + OTHER_DIMS] = other / other.norm(dim=1, keepdim=True)
    wte[sym_ids] = 0.0
    wte[sym_ids, lay.tok + t] = 1.0
    wpe = torch.zeros(n_positions, d)
    wpe[torch.arange(n_positions), lay.pos + torch.arange(n_positions)] = 1.0
    lm = torch.zeros(tok.vocab_size, d)
    lm[sym_ids, lay.out + t] = lam
    return wte, wpe, lm


#: the longest context a compiled model is built for (GPT-2's; a head holds every position, so d_model grows with it)
MAX_POSITIONS, MAX_SEED = 1024, 2**32 - 1  # seeds: non-negative 32-bit integers, as every seed of the project


def check_compile_arguments(seed: object, n_positions: object, distractor_scale: object = 1.0) -> None:
    """Raise ValueError naming the argument, what it got and the range unless ``seed`` is an integer in [0, 2**32 -
    1], ``n_positions`` an integer in 2..:data:`MAX_POSITIONS` and ``distractor_scale`` a finite real number >= 0
    (a string or None is refused by name, not by numpy's TypeError)."""

    def integer_in(value: object, low: int, high: int) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and low <= int(value) <= high

    if not integer_in(seed, 0, MAX_SEED):
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}")
    if not integer_in(n_positions, 2, MAX_POSITIONS):
        raise ValueError(f"n_positions must be an integer in 2..{MAX_POSITIONS} (the context length: the sink at "
                         f"position 0 and the prompt), got {n_positions!r}")
    real = isinstance(distractor_scale, (int, float, np.integer, np.floating)) and not isinstance(distractor_scale, bool)
    if not real or not (math.isfinite(float(distractor_scale)) and float(distractor_scale) >= 0):  # type: ignore[arg-type]
        raise ValueError(f"distractor_scale must be a finite number >= 0 (1: the compiled noisy model, 0: silent "
                         f"distractors), got {distractor_scale!r}")


def compile_induction(seed: int, n_positions: int = N_POSITIONS):
    """The compiled induction model (module docstring), seeded.

    Args:
        seed: seed of the head layout, the distractor heads, the OTHER subspace and the noise.
        n_positions: context length.

    Returns:
        ``(model, tokenizer, layout)``: an eval-mode HF ``GPT2LMHeadModel`` (eager attention, MLPs off), the
        default :class:`~.tokenizer.WordTokenizer`, the :class:`Layout`.
    """
    check_compile_arguments(seed, n_positions)
    from certified_circuits.language.train import ATTN_ONLY_D_MLP, switch_off_mlps

    tok = WordTokenizer.default()
    lay = layout(seed, n_positions)
    d, n_sym = lay.d_model, len(INDUCTION_SYMBOLS)
    dh = d // N_HEAD
    config = tiny_config(tok.vocab_size, N_LAYER, N_HEAD, d, n_positions)
    config.n_inner = ATTN_ONLY_D_MLP
    config.tie_word_embeddings = False
    config.certified_circuits = {"compiled": "induction", "seed": int(seed)}  # saved in config.json
    model = build_model(config, seed)
    switch_off_mlps(model)
    gen = torch.Generator().manual_seed(int(seed) * 1000 + 34)
    s2, s3, s4 = (np.sqrt(d / n) for n in (2, 3, 4))
    w_p = float(np.sqrt(PREV_MARGIN * np.sqrt(dh)) / s2)
    w_i = float(np.sqrt(INDUCTION_MARGIN * np.sqrt(dh)) / s3)
    w_0 = float(2 * INDUCTION_MARGIN * np.sqrt(dh) / s3)
    lam = OUT_MARGIN / s4
    t = torch.arange(n_sym)

    wte, wpe, lm = _embeddings(tok, lay, d, n_positions, lam, gen)

    attn = []  # per layer: W_qkv [d, 3d], b_qkv [3d], W_O [d, d]
    for layer, (head, w) in enumerate(((lay.previous_token_head, w_p), (lay.induction_head, w_i))):
        wq, wk, wv, wo = (torch.zeros(d, d) for _ in range(4))
        bq = torch.zeros(d)
        c = head * dh
        if layer == 0:  # P: q_i -> coordinate i-1, k_j -> coordinate j; v = TOK; out -> PREV
            p = torch.arange(1, n_positions)
            wq[lay.pos + p, c + p - 1] = w
            wk[lay.pos + torch.arange(n_positions), c + torch.arange(n_positions)] = w
            wo[c + t, lay.prev + t] = 1.0 / s2
        else:  # I: q = TOK, k = PREV, sink at position 0; v = TOK; out -> OUT
            wq[lay.tok + t, c + t] = w
            wk[lay.prev + t, c + t] = w
            bq[c + n_sym] = 1.0
            wk[lay.pos, c + n_sym] = -w_0
            wo[c + t, lay.out + t] = 1.0 / s3
        wv[lay.tok + t, c + t] = 1.0
        for h in range(N_HEAD):  # distractors: seeded random reads, small centred writes
            if h == head:
                continue
            cols = slice(h * dh, (h + 1) * dh)
            sigma_qk = np.sqrt(DISTRACTOR_SCORE_STD / d)
            wq[:, cols] = sigma_qk * torch.randn(d, dh, generator=gen)
            wk[:, cols] = sigma_qk * torch.randn(d, dh, generator=gen)
            wv[:, cols] = torch.randn(d, dh, generator=gen) / np.sqrt(d)
            wo[cols, :] = DISTRACTOR_OUT / np.sqrt(d * dh) * torch.randn(dh, d, generator=gen)
        attn.append((torch.cat([wq, wk, wv], 1), torch.cat([bq, torch.zeros(2 * d)]), wo))

    _load_weights(model, wte, wpe, lm, attn, gen)
    return model, tok, lay


def compiled_config(seed: int, lay: Layout, n_positions: int = N_POSITIONS) -> dict:
    """What the metrics JSON records about a compiled model (its ``config`` block: weights compiled, not trained)."""
    return {
        "compiled": "induction",
        "trained": False,
        "seed": int(seed),
        "n_layer": N_LAYER,
        "n_head": N_HEAD,
        "n_embd": lay.d_model,
        "n_positions": n_positions,
        "attn_only": True,
        "tasks": ["induction"],
        "previous_token_head": lay.heads[0],
        "induction_head": lay.heads[1],
        "prev_margin": PREV_MARGIN,
        "induction_margin": INDUCTION_MARGIN,
        "out_margin": OUT_MARGIN,
        "distractor_score_std": DISTRACTOR_SCORE_STD,
        "distractor_out": DISTRACTOR_OUT,
        "noise_rel": NOISE_REL,
    }


# ------------------------------------------------------------------------------------------- the noisy variant
#: the noisy model's shape (language/graph.py: COMPILED_SHAPES["induction_noisy"]; 310 EAP edges)
NOISY_N_LAYER, NOISY_N_HEAD = COMPILED_SHAPES["induction_noisy"]
#: the share of PREV each previous-token head writes (P1, P2): graded, summing to 1
NOISY_PREV_GAINS = (0.95, 0.05)
#: the share of the copied answer's logit margin each induction head writes (I1, I2): graded, summing to 1
NOISY_OUT_SHARES = (0.65, 0.35)
#: attention-score margin of an induction head's matching key when both previous-token heads write it
NOISY_INDUCTION_MARGIN = 240.0
#: score of the induction heads' sink (position 0): above what one previous-token head alone gives a key
#: (``NOISY_PREV_GAINS[0] * NOISY_INDUCTION_MARGIN``), below what both give, so each P is needed (an AND)
NOISY_SINK_SCORE = 232.0
#: distractor heads: std of their attention scores, and the norm of what they write into OUT per attended token, per
#: layer (layer 0 small: its writes change the norm the induction heads' LayerNorm divides by)
NOISY_DISTRACTOR_SCORE_STD = 5.0
NOISY_DISTRACTOR_OUT = (0.05, 1.8)
#: weight noise (as :data:`NOISE_REL`): smaller, since it scales with the large induction weights and the sink gate
#: is a margin of a few logits out of hundreds
NOISY_NOISE_REL = 0.01
#: the constants above (tuned so that, with 3 model seeds, the truth passes its per-component check and the |D| = 100
#: baseline is unstable: docs/embedded_default.md, "The noisy language model"), as the metrics JSON records them
NOISY_CONSTANTS = ("NOISY_PREV_GAINS", "NOISY_OUT_SHARES", "NOISY_INDUCTION_MARGIN", "NOISY_SINK_SCORE",
                   "NOISY_DISTRACTOR_SCORE_STD", "NOISY_DISTRACTOR_OUT", "NOISY_NOISE_REL")


@dataclass(frozen=True)
class NoisyLayout:
    """Where the noisy model's circuit sits: its previous-token heads (layer 0), induction heads (layer 1), blocks."""

    previous_token_heads: tuple[int, ...]
    induction_heads: tuple[int, ...]
    d_model: int
    tok: int
    other: int
    pos: int
    prev: tuple[int, int]  # PREV_1 and PREV_2, one block per previous-token head
    out: int
    one: int  # a coordinate every position holds at 1 (the induction heads' sink reads it)

    @property
    def head_names(self) -> tuple[list[str], list[str]]:
        """``([a0.h<P1>, a0.h<P2>], [a1.h<I1>, a1.h<I2>])``, strongest first."""
        return ([names.head(0, h) for h in self.previous_token_heads],
                [names.head(1, h) for h in self.induction_heads])


def noisy_layout(seed: int, n_positions: int = N_POSITIONS) -> NoisyLayout:
    """The noisy model's blocks and the seeded choice of its circuit heads.

    Args:
        seed: the model's seed (heads: the first two of ``rng([seed, 42]).permutation(8)`` per layer).
        n_positions: context length.

    Returns:
        :class:`NoisyLayout`; ``d_model = 8 * max(ceil(used / 8), n_positions, 69)`` with ``used = 4 * 68 +
        OTHER_DIMS + n_positions + 1`` (TOK, PREV_1, PREV_2, OUT, ONE): a head must hold every position (P's
        query and key) and every word plus the sink coordinate (I's).
    """
    n_sym = len(INDUCTION_SYMBOLS)
    rng = np.random.default_rng([int(seed), 42])
    p_heads = tuple(int(h) for h in rng.permutation(NOISY_N_HEAD)[:2])
    i_heads = tuple(int(h) for h in rng.permutation(NOISY_N_HEAD)[:2])
    used = 4 * n_sym + OTHER_DIMS + n_positions + 1
    d = NOISY_N_HEAD * max(-(-used // NOISY_N_HEAD), n_positions, n_sym + 1)
    prev = n_sym + OTHER_DIMS + n_positions
    return NoisyLayout(p_heads, i_heads, d, 0, n_sym, n_sym + OTHER_DIMS, (prev, prev + n_sym), prev + 2 * n_sym,
                       prev + 3 * n_sym)


def compile_induction_noisy(seed: int, n_positions: int = N_POSITIONS, distractor_scale: float = 1.0):
    """The noisy compiled induction model (docs/embedded_default.md, "The noisy language model"), seeded.

    2 layers x 8 heads, the blocks of the clean model (module docstring), MLPs off, LayerNorm exact:

    * **P1, P2** (layer 0) attend to the previous position as P does and write ``g_i e_PREV_i(tok_{i-1})`` into a
      block of their own, ``(g_1, g_2) =`` :data:`NOISY_PREV_GAINS` (``g_1 + g_2 = 1``); the layer-1 residual is
      then ``TOK + POS + ONE + g_1 PREV_1 + g_2 PREV_2``, of squared norm ``n_1 = 3 + g_1^2 + g_2^2``, read at scale
      ``sqrt(d / n_1)`` (separate blocks keep that norm when one P is patched, so LayerNorm does not turn a patched
      key into a changed value).
    * **I1, I2** (layer 1): query ``TOK``, key ``PREV_1 + PREV_2``: the key after an earlier occurrence of the query
      word scores
      ``(g_1 + g_2) M``, ``M =`` :data:`NOISY_INDUCTION_MARGIN`, when both P heads wrote it and ``g_i M`` when only
      one did; position 0 is a sink scoring :data:`NOISY_SINK_SCORE` ``= S`` with ``g_1 M < S < M``, so a key
      written by one P alone loses to the sink: removing either P's edge sends the head to the sink (each edge
      carries its own effect). Every position holds a unit coordinate ONE (in ``wpe``); the sink is ONE in the query
      against position 0's POS coordinate in the key, read through LayerNorm as a match is, so ``S / M`` stays fixed
      however the distractors' writes change the residual's norm. ``I_j`` writes ``o_j e_OUT(tok)``,
      ``(o_1, o_2) =`` :data:`NOISY_OUT_SHARES`.
    * ``lm_head`` as the clean model's, at the final residual's scale ``sqrt(d / (n_1 + 1))``.
    * **12 distractors** (6 per layer): random query and key (scores of std :data:`NOISY_DISTRACTOR_SCORE_STD`,
      reading every block, so their attention depends on the prompt's words and positions), value the attended
      word ``e_TOK``, output ``NOISY_DISTRACTOR_OUT * G e_TOK`` into OUT with a seeded Gaussian ``G`` (68 x 68,
      unit-norm columns): each writes a small, prompt-dependent mix of answer directions, so its edges into the
      logits (and, in layer 1, its key edges from P1 and P2) have small, non-zero, data-dependent effects.
    * Weight noise as the clean model's, of :data:`NOISY_NOISE_REL`.

    Args:
        seed: seed of the head choice, the distractors, the OTHER subspace and the noise.
        n_positions: context length.
        distractor_scale: the noise strength ``s >= 0`` of the noise sweep (experiments/noise_sweep.py): the
            distractors write ``s * NOISY_DISTRACTOR_OUT``; 1 is the model as the workflow compiles it, 0 silences
            their writes (their reads, the graded circuit and the weight noise, relative to each matrix's size, stay;
            every random draw is the same at every ``s``).

    Returns:
        ``(model, tokenizer, layout)`` as :func:`compile_induction`, with a :class:`NoisyLayout`.

    Raises:
        ValueError: a ``distractor_scale`` that is not a finite number >= 0 (a string included), or a seed or
            ``n_positions`` out of range (:func:`check_compile_arguments`).
    """
    check_compile_arguments(seed, n_positions, distractor_scale)
    from certified_circuits.language.train import ATTN_ONLY_D_MLP, switch_off_mlps

    tok = WordTokenizer.default()
    lay = noisy_layout(seed, n_positions)
    d, n_sym, H = lay.d_model, len(INDUCTION_SYMBOLS), NOISY_N_HEAD
    dh = d // H
    config = tiny_config(tok.vocab_size, NOISY_N_LAYER, H, d, n_positions)
    config.n_inner = ATTN_ONLY_D_MLP
    config.tie_word_embeddings = False
    config.certified_circuits = {"compiled": "induction_noisy", "seed": int(seed)}
    model = build_model(config, seed)
    switch_off_mlps(model)
    gen = torch.Generator().manual_seed(int(seed) * 1000 + 42)
    g = NOISY_PREV_GAINS
    mass = 4  # unit blocks' total of the layer-1 residual before centring: TOK, POS, ONE, PREV_1 + PREV_2
    s2, s3, s4 = (np.sqrt(d / n) for n in (3, 3 + g[0] ** 2 + g[1] ** 2, 4 + g[0] ** 2 + g[1] ** 2))
    w_p = float(np.sqrt(PREV_MARGIN * np.sqrt(dh)) / s2)
    w_i = float(np.sqrt(NOISY_INDUCTION_MARGIN * np.sqrt(dh)) / s3)
    lam = OUT_MARGIN / s4
    t = torch.arange(n_sym)

    wte, wpe, lm = _embeddings(tok, lay, d, n_positions, lam, gen)
    wpe[:, lay.one] = 1.0

    attn = []
    for layer, (heads, scale) in enumerate(((lay.previous_token_heads, s2), (lay.induction_heads, s3))):
        wq, wk, wv, wo = (torch.zeros(d, d) for _ in range(4))
        bq = torch.zeros(d)
        for rank, head in enumerate(heads):
            c = head * dh
            if layer == 0:  # P_i: the previous position; writes g_i e_PREV
                p = torch.arange(1, n_positions)
                wq[lay.pos + p, c + p - 1] = w_p
                wk[lay.pos + torch.arange(n_positions), c + torch.arange(n_positions)] = w_p
                wo[c + t, lay.prev[rank] + t] = g[rank] / s2
            else:  # I_j: TOK against PREV_1 + PREV_2, sink at position 0; writes o_j e_OUT
                wq[lay.tok + t, c + t] = w_i
                wk[lay.prev[0] + t, c + t] = w_i
                wk[lay.prev[1] + t, c + t] = w_i
                # the sink: ONE in the query against position 0's key; a match multiplies a word coordinate by
                # g_1 + g_2 = 1 of PREV coordinates, each centred by -mass / d (2 of them), the sink only one
                wq[lay.one, c + n_sym] = w_i
                wk[lay.pos, c + n_sym] = w_i * NOISY_SINK_SCORE / NOISY_INDUCTION_MARGIN * (1 - mass / d)
                wo[c + t, lay.out + t] = NOISY_OUT_SHARES[rank] / s3
            wv[lay.tok + t, c + t] = 1.0
        for h in range(H):  # distractors: random reads, a small prompt-dependent write into OUT
            if h in heads:
                continue
            cols = slice(h * dh, (h + 1) * dh)
            sigma_qk = np.sqrt(NOISY_DISTRACTOR_SCORE_STD / d)
            wq[:, cols] = sigma_qk * torch.randn(d, dh, generator=gen)
            wk[:, cols] = sigma_qk * torch.randn(d, dh, generator=gen)
            wv[lay.tok + t, h * dh + t] = 1.0
            mix = torch.randn(n_sym, n_sym, generator=gen)
            gain = distractor_scale * NOISY_DISTRACTOR_OUT[layer] / scale
            wo[h * dh + t[:, None], lay.out + t[None, :]] = gain * mix / mix.norm(dim=1, keepdim=True)
        attn.append((torch.cat([wq, wk, wv], 1), torch.cat([bq, torch.zeros(2 * d)]), wo))
    _load_weights(model, wte, wpe, lm, attn, gen, NOISY_NOISE_REL)
    return model, tok, lay


def _load_weights(model, wte, wpe, lm, attn, gen, noise_rel: float = NOISE_REL) -> None:
    """Copy the constructed weights into ``model`` with ``noise_rel`` (:data:`NOISE_REL`) noise, re-centre what is written into the
    residual, set every LayerNorm to weight 1 and bias 0, and freeze the model in eval mode."""

    def noisy(x: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
        rms = float((x if like is None else like).square().mean().sqrt())
        return x + noise_rel * rms * torch.randn(x.shape, generator=gen)

    with torch.no_grad():
        tr = model.transformer
        tr.wte.weight.copy_(_centre_rows(noisy(wte)))
        tr.wpe.weight.copy_(_centre_rows(noisy(wpe)))
        model.lm_head.weight.copy_(noisy(lm))
        for block, (w_qkv, b_qkv, wo) in zip(tr.h, attn):
            block.attn.c_attn.weight.copy_(noisy(w_qkv))
            block.attn.c_attn.bias.copy_(noisy(b_qkv, w_qkv))
            block.attn.c_proj.weight.copy_(_centre_rows(noisy(wo)))
            block.attn.c_proj.bias.copy_(_centre_rows(noisy(torch.zeros(wo.shape[1]), wo)))
            for ln in (block.ln_1, block.ln_2):
                ln.weight.fill_(1.0)
                ln.bias.zero_()
        tr.ln_f.weight.fill_(1.0)
        tr.ln_f.bias.zero_()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)


def compile_model(name: str, seed: int, n_positions: int = N_POSITIONS, distractor_scale: float = 1.0):
    """The compiled model ``name`` (a key of :data:`~.graph.COMPILED_SHAPES`): ``induction`` (the clean control,
    :func:`compile_induction`) or ``induction_noisy`` (:func:`compile_induction_noisy`, its distractors' writes scaled
    by ``distractor_scale``).

    Returns:
        ``(model, tokenizer, layout)``.

    Raises:
        ValueError: an unknown name (naming the known ones), or a ``distractor_scale`` other than 1 for the clean
            model, which has no distractors.
    """
    builders = {"induction": compile_induction, "induction_noisy": compile_induction_noisy}
    if name not in builders:
        raise ValueError(f"no compiled model {name!r}: choose one of {', '.join(builders)}")
    check_compile_arguments(seed, n_positions, distractor_scale)
    if name == "induction_noisy":
        return compile_induction_noisy(seed, n_positions, distractor_scale=distractor_scale)
    if distractor_scale != 1.0:
        raise ValueError(f"distractor_scale {distractor_scale}: the compiled model {name!r} has no distractors")
    return builders[name](seed, n_positions)


def noisy_compiled_config(seed: int, lay: NoisyLayout, n_positions: int = N_POSITIONS) -> dict:
    """What the metrics JSON records about the noisy compiled model (as :func:`compiled_config`)."""
    p_heads, i_heads = lay.head_names
    constants = {name.lower().removeprefix("noisy_"): globals()[name] for name in NOISY_CONSTANTS}
    return {"compiled": "induction_noisy", "trained": False, "seed": int(seed), "n_layer": NOISY_N_LAYER,
            "n_head": NOISY_N_HEAD, "n_embd": lay.d_model, "n_positions": n_positions, "attn_only": True,
            "tasks": ["induction"], "previous_token_heads": p_heads, "induction_heads": i_heads,
            "prev_margin": PREV_MARGIN, "out_margin": OUT_MARGIN, **constants}
