"""Node-decomposed GPT-2 forward pass over the EAP graph (paper, Appendix "Circuit graph and metric").

The residual stream of GPT-2 is a sum of node outputs plus the attention output biases:

    resid_pre(l) = input + sum_{l' < l} (sum_h a_{l',h} + b_O(l') + m_{l'})

This module runs the model *from that decomposition*: every downstream input (each head's q/k/v input,
each MLP input, the logits input) is assembled from the upstream node outputs, optionally with edge-level
interchange patching

    in_v = sum_u [mask_uv ? a_u(this run) : a_u(corrupted run)] + biases
         = in_v(corrupted run) + sum_u mask_uv (a_u(this run) - a_u(corrupted run)),

which is exactly what EAP-IG's circuit evaluation does with hooks.

Downstream inputs are *copies* that feed only their consumer, as the hook points of TransformerLens
(``use_split_qkv_input``, ``use_hook_mlp_in``) and hence the reference EAP-IG (hannamw/EAP-IG) define them:

* ``blocks.{l}.hook_{q,k,v}_input`` is one copy of ``resid_pre(l)`` per head and letter, read only by that
  head's LayerNorm and q/k/v projection;
* ``blocks.{l}.hook_mlp_in`` is a copy of ``resid_mid(l) = resid_pre(l) + sum_h a_{l,h} + b_O(l)`` read
  only by ``ln_2`` and the MLP; the residual stream carries on from ``resid_mid(l)`` itself:
  ``resid_pre(l + 1) = resid_mid(l) + m_l``;
* the logits input is ``resid_post(L - 1)``, read only by ``ln_final`` and the unembedding.

So ``d metric / d in_v`` holds only the paths through v. (Continuing the residual from the MLP-input
tensor instead would add the residual bypass to that gradient, and every edge u -> m_l would score the
sum of u's edges into all later inputs.)

Why a decomposed forward instead of TransformerBridge hooks: many edge masks (all K x methods) are
evaluated in one batched pass with per-batch-element masks, and the per-head, per-letter input gradients
come from one ``torch.autograd.grad`` call; the weights are read from the same HF module that the
``TransformerBridge`` wraps, and the tests check every node and input against the bridge's hooks
(``hook_result``, ``hook_mlp_out``, ``hook_{q,k,v}_input``, ``hook_mlp_in``) and the logits against HF.

One downstream input changed alone (the single-edge patching of :mod:`.ground_truth`, one batch per input) is the
hook :func:`run_input_deltas`: that input's node recomputed, then the plain forward continued by :func:`resume`
(the last layer at the last positions only), built from the same :func:`head_attention`, :func:`mlp` and
:func:`unembed` as :func:`run`.

Many masks on the same prompts (circuit evaluation) are :func:`run_patched_groups`: the same patched forward with
layer 0 gathered from a per-prompt table of its heads under the 8 combinations of q/k/v bits
(:func:`first_layer_table`) and the last layer at the last positions only (:func:`last_query_attention`, also
:func:`head_attention`'s ``lengths`` mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from certified_circuits.language.graph import EAPGraph, build_graph


@dataclass
class GPT2Weights:
    """GPT-2 parameters in per-head form (read-only views of an HF ``GPT2LMHeadModel``)."""

    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    eps: float
    wte: torch.Tensor   # [V, d]
    wpe: torch.Tensor   # [P_max, d]
    ln1_w: torch.Tensor  # [L, d]
    ln1_b: torch.Tensor
    W_Q: torch.Tensor   # [L, H, d, dh]
    W_K: torch.Tensor
    W_V: torch.Tensor
    b_Q: torch.Tensor   # [L, H, dh]
    b_K: torch.Tensor
    b_V: torch.Tensor
    W_O: torch.Tensor   # [L, H, dh, d]
    b_O: torch.Tensor   # [L, d]
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    W_in: torch.Tensor  # [L, d, d_mlp]
    b_in: torch.Tensor
    W_out: torch.Tensor  # [L, d_mlp, d]
    b_out: torch.Tensor  # [L, d]
    lnf_w: torch.Tensor  # [d]
    lnf_b: torch.Tensor
    W_U: torch.Tensor   # [d, V]
    act: str

    @property
    def graph(self) -> EAPGraph:
        return build_graph(self.n_layers, self.n_heads)

    @classmethod
    def from_hf(cls, model) -> "GPT2Weights":
        """Extract per-head weights from an HF ``GPT2LMHeadModel`` (no copies where avoidable)."""
        cfg = model.config
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False) or getattr(cfg, "reorder_and_upcast_attn", False):
            raise ValueError("GPT2 configs with scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are "
                             "not supported by the decomposed forward")
        if cfg.activation_function not in ("gelu_new", "gelu_pytorch_tanh", "gelu"):
            raise ValueError(f"unsupported activation {cfg.activation_function!r}")
        tr = model.transformer
        L, H, d = cfg.n_layer, cfg.n_head, cfg.n_embd
        dh = d // H

        def st(fn):
            return torch.stack([fn(b).detach() for b in tr.h])

        c_attn_w = st(lambda b: b.attn.c_attn.weight)          # [L, d, 3d]
        c_attn_b = st(lambda b: b.attn.c_attn.bias)            # [L, 3d]
        wq, wk, wv = c_attn_w.split(d, dim=2)
        bq, bk, bv = c_attn_b.split(d, dim=1)

        def heads_w(w):  # [L, d, H*dh] -> [L, H, d, dh]
            return w.reshape(L, d, H, dh).permute(0, 2, 1, 3).contiguous()

        def heads_b(b):
            return b.reshape(L, H, dh).contiguous()

        W_O = st(lambda b: b.attn.c_proj.weight).reshape(L, H, dh, d)
        lm = model.lm_head.weight.detach()
        return cls(
            n_layers=L, n_heads=H, d_model=d, d_head=dh, eps=float(cfg.layer_norm_epsilon),
            wte=tr.wte.weight.detach(), wpe=tr.wpe.weight.detach(),
            ln1_w=st(lambda b: b.ln_1.weight), ln1_b=st(lambda b: b.ln_1.bias),
            W_Q=heads_w(wq), W_K=heads_w(wk), W_V=heads_w(wv), b_Q=heads_b(bq), b_K=heads_b(bk), b_V=heads_b(bv),
            W_O=W_O, b_O=st(lambda b: b.attn.c_proj.bias),
            ln2_w=st(lambda b: b.ln_2.weight), ln2_b=st(lambda b: b.ln_2.bias),
            W_in=st(lambda b: b.mlp.c_fc.weight), b_in=st(lambda b: b.mlp.c_fc.bias),
            W_out=st(lambda b: b.mlp.c_proj.weight), b_out=st(lambda b: b.mlp.c_proj.bias),
            lnf_w=tr.ln_f.weight.detach(), lnf_b=tr.ln_f.bias.detach(), W_U=lm.T,
            act=cfg.activation_function,
        )

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> "GPT2Weights":
        """A copy with every tensor moved to ``device`` / cast to ``dtype``."""
        return type(self)(**{k: (v.to(device=device, dtype=dtype) if torch.is_tensor(v) else v)
                             for k, v in self.__dict__.items()})

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Activation of the ``input`` node: token + position embedding, [B, P, d]."""
        p = tokens.shape[1]
        if p > self.wpe.shape[0]:
            raise ValueError(f"prompt of {p} tokens exceeds the model's {self.wpe.shape[0]} positions")
        return self.wte[tokens] + self.wpe[:p]


def _ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def gelu(x: torch.Tensor, act: str) -> torch.Tensor:
    return F.gelu(x) if act == "gelu" else F.gelu(x, approximate="tanh")


def mlp(w: GPT2Weights, l: int, x: torch.Tensor) -> torch.Tensor:
    """Output of the MLP of layer ``l`` on its input.

    Args:
        w: the weights.
        l: the layer.
        x: the MLP input ``hook_mlp_in`` [..., d].

    Returns:
        ``m_l = gelu(ln_2(x) W_in + b_in) W_out + b_out``, [..., d].
    """
    return gelu(_ln(x, w.ln2_w[l], w.ln2_b[l], w.eps) @ w.W_in[l] + w.b_in[l], w.act) @ w.W_out[l] + w.b_out[l]


def unembed(w: GPT2Weights, x: torch.Tensor) -> torch.Tensor:
    """Logits ``ln_f(x) W_U`` [..., V] of the logits input ``x`` [..., d] (the residual after the last layer)."""
    return _ln(x, w.lnf_w, w.lnf_b, w.eps) @ w.W_U


@dataclass
class RunCache:
    """Everything one run leaves behind: node outputs and the downstream inputs it saw."""

    nodes: torch.Tensor          # [B, n_up, P, d] upstream node outputs, forward order
    inputs: list[torch.Tensor]   # per layer: qkv [B, H, 3, P, d], then mlp [B, P, d]; finally logits [B, P, d]
    logits_last: torch.Tensor    # [B, V] logits at the last prompt position


def last_positions(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Rows x[b, lengths[b] - 1] of a [B, P, ...] tensor."""
    return x[torch.arange(x.shape[0], device=x.device), lengths - 1]


def run(w: GPT2Weights, input_act: torch.Tensor, lengths: torch.Tensor, *,
        corrupted: RunCache | None = None, masks: torch.Tensor | None = None,
        keep_inputs: bool = False) -> RunCache:
    """Decomposed forward from the ``input`` node's activation [B, P, d].

    With ``corrupted`` (a cache of the corrupted run, batch-aligned) and ``masks`` (float [B, n_up, n_down],
    1 = edge in the circuit, 0 = edge carries the corrupted activation) every downstream input is
    interchange-patched edge by edge; invalid (u, v) pairs are ignored. Without them this is the plain
    forward pass. ``keep_inputs`` keeps the per-head q/k/v, MLP and logits inputs (needed for gradients);
    each is a separate tensor in the autograd graph that feeds only its consumer (module docstring), so
    ``torch.autograd.grad`` with respect to it is the gradient through that consumer alone.
    """
    L, H = w.n_layers, w.n_heads
    B, P, d = input_act.shape
    patch = corrupted is not None
    if patch and masks is None:
        raise ValueError("patching needs masks")
    g = w.graph
    nodes: list[torch.Tensor] = [input_act]
    inputs: list[torch.Tensor] = []
    causal = torch.ones(P, P, dtype=torch.bool, device=input_act.device).tril()
    resid = input_act
    diff = None
    for l in range(L):
        n_up = 1 + l * (H + 1)
        col = l * (3 * H + 1)
        if patch:
            diff = torch.stack(nodes, 1) - corrupted.nodes[:, :n_up]            # [B, U, P, d]
            m = masks[:, :n_up, col: col + 3 * H]                                # [B, U, 3H]
            x = corrupted.inputs[2 * l] + torch.einsum("bun,bupd->bnpd", m, diff).view(B, H, 3, P, d)
        else:
            x = resid[:, None, None].expand(B, H, 3, P, d)
            if keep_inputs:
                x = x.clone()
        if keep_inputs or patch:
            inputs.append(x)
        heads = head_attention(w, l, x, causal)                                     # [B, H, P, d]
        nodes.extend(heads.unbind(1))
        if patch:
            diff = torch.stack(nodes, 1) - corrupted.nodes[:, : n_up + H]
            xm = corrupted.inputs[2 * l + 1] + torch.einsum("bu,bupd->bpd", masks[:, : n_up + H, col + 3 * H], diff)
        else:
            resid_mid = resid + heads.sum(1) + w.b_O[l]
            # hook_mlp_in is a copy that feeds only the MLP; the residual carries on from resid_mid
            xm = resid_mid.clone() if keep_inputs else resid_mid
        if keep_inputs or patch:
            inputs.append(xm)
        out = mlp(w, l, xm)
        nodes.append(out)
        if not patch:
            resid = resid_mid + out   # never from xm: its gradient must hold only the MLP's path
    if patch:
        diff = torch.stack(nodes, 1) - corrupted.nodes
        xf = corrupted.inputs[2 * L] + torch.einsum("bu,bupd->bpd", masks[:, :, g.valid.shape[1] - 1], diff)
    else:
        xf = resid.clone() if keep_inputs else resid
    if keep_inputs or patch:
        inputs.append(xf)
    last = last_positions(xf, lengths)
    logits = unembed(w, last)
    return RunCache(torch.stack(nodes, 1), inputs, logits)


def flat_inputs(cache: RunCache, n_heads: int) -> torch.Tensor:
    """Downstream inputs stacked in graph order: [B, n_down, P, d] (q/k/v per head, MLP, ..., logits)."""
    parts = []
    n_layers = (len(cache.inputs) - 1) // 2
    for l in range(n_layers):
        x = cache.inputs[2 * l]
        B, H, _, P, d = x.shape
        parts.append(x.reshape(B, 3 * H, P, d))
        parts.append(cache.inputs[2 * l + 1][:, None])
    parts.append(cache.inputs[-1][:, None])
    return torch.cat(parts, 1)


def qkv_projections(w: GPT2Weights, l: int, x: torch.Tensor, *,
                    heads: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of layer ``l``'s heads from their q/k/v inputs.

    Args:
        w: the weights.
        l: the layer.
        x: the q/k/v inputs ``hook_{q,k,v}_input`` [B, H', 3, P, d], one per head (H' heads) or one that every
            head reads (H' = 1, broadcast).
        heads: the heads' indices (default: all H heads of the layer).

    Returns:
        ``(q, k, v)_h = ln_1(x_{q,k,v}) W_{Q,K,V}^h + b_{Q,K,V}^h``, each [B, H, P, d_head] (H = ``len(heads)``
        when given).
    """
    pick = slice(None) if heads is None else torch.as_tensor(list(heads), device=x.device)
    xn = _ln(x, w.ln1_w[l], w.ln1_b[l], w.eps)
    return tuple(torch.einsum("bhpd,hde->bhpe", xn[:, :, c], W[l][pick]) + b[l][pick][None, :, None]
                 for c, (W, b) in enumerate(((w.W_Q, w.b_Q), (w.W_K, w.b_K), (w.W_V, w.b_V))))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, W_O: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    """Causal attention of per-head queries, keys and values, each head's output through its ``W_O``.

    Args:
        q, k, v: [B, H, P, d_head] (:func:`qkv_projections`).
        W_O: [H, d_head, d], each head's output projection.
        causal: bool [P, P], True where position i may attend to position j (j <= i).

    Returns:
        ``a_h = softmax(q_h k_h^T / sqrt(d_head), causal) v_h W_O^h`` [B, H, P, d].
    """
    att = torch.einsum("bhpe,bhqe->bhpq", q, k) / (q.shape[-1] ** 0.5)
    att = att.masked_fill(~causal, torch.finfo(att.dtype).min).softmax(-1)
    z = torch.einsum("bhpq,bhqe->bhpe", att, v)
    return torch.einsum("bhpe,hed->bhpd", z, W_O)


def last_query_attention(w: GPT2Weights, l: int, xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor,
                         lengths: torch.Tensor, *, heads: Sequence[int] | None = None) -> torch.Tensor:
    """Head outputs of layer ``l`` at each prompt's last position only (all that the last layer gives the logits).

    :func:`attend`'s row at position ``lengths - 1``: the query there attends to the keys and values of positions
    ``0 .. lengths - 1``.

    Args:
        w: the weights.
        l: the layer.
        xq: the q inputs at the last positions [B, H', d].
        xk, xv: the k and v inputs [B, H', P, d] (H' = 1: one input that every head reads, broadcast).
        lengths: int [B], the prompts' lengths.
        heads: the heads' indices (default: all H heads of the layer).

    Returns:
        [B, H, d]: ``a_h = softmax(q_h k_h^T / sqrt(d_head)) v_h W_O^h`` at positions ``lengths - 1`` (H =
        ``len(heads)`` when given), with ``(q, k, v)_h = ln_1(x_{q,k,v}) W_{Q,K,V}^h + b_{Q,K,V}^h``.
    """
    pick = slice(None) if heads is None else torch.as_tensor(list(heads), device=xq.device)
    W_Q, W_K, W_V, W_O = (m[l][pick] for m in (w.W_Q, w.W_K, w.W_V, w.W_O))
    b_Q, b_K, b_V = (b[l][pick][None, :, None] for b in (w.b_Q, w.b_K, w.b_V))
    q = torch.einsum("bhd,hde->bhe", _ln(xq, w.ln1_w[l], w.ln1_b[l], w.eps), W_Q) + b_Q[:, :, 0]
    k = torch.einsum("bhpd,hde->bhpe", _ln(xk, w.ln1_w[l], w.ln1_b[l], w.eps), W_K) + b_K
    v = torch.einsum("bhpd,hde->bhpe", _ln(xv, w.ln1_w[l], w.ln1_b[l], w.eps), W_V) + b_V
    att = torch.einsum("bhe,bhpe->bhp", q, k) / (w.d_head ** 0.5)
    after = torch.arange(k.shape[2], device=xq.device)[None, :] >= lengths[:, None]   # [B, P]
    att = att.masked_fill(after[:, None], torch.finfo(att.dtype).min).softmax(-1)
    return torch.einsum("bhe,hed->bhd", torch.einsum("bhp,bhpe->bhe", att, v), W_O)


def head_attention(w: GPT2Weights, l: int, x: torch.Tensor, causal: torch.Tensor, *,
                   heads: Sequence[int] | None = None, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """Head outputs of layer ``l`` from per-head q/k/v inputs.

    Args:
        w: the weights.
        l: the layer.
        x: the q/k/v inputs ``hook_{q,k,v}_input`` [B, H', 3, P, d], one per head (H' heads) or one that every
            head reads (H' = 1, broadcast).
        causal: bool [P, P], True where position i may attend to position j (j <= i).
        heads: the heads' indices (default: all H heads of the layer).
        lengths: int [B]; when given, only the query at each prompt's last position ``lengths - 1`` (all that the
            last-position logits read of the last layer; :func:`last_query_attention`).

    Returns:
        ``a_h = softmax(q_h k_h^T / sqrt(d_head), causal) v_h W_O^h`` per head, with ``(q, k, v)_h =
        ln_1(x_{q,k,v}) W_{Q,K,V}^h + b_{Q,K,V}^h``: [B, H, P, d], or [B, H, d] at the last positions with ``lengths``
        (H = ``len(heads)`` when given).
    """
    if lengths is not None:  # each letter normalised on its own: no copy where x[:, :, c] is contiguous or broadcast
        xq = x[torch.arange(x.shape[0], device=x.device), :, 0, lengths - 1]               # [B, H', d]
        return last_query_attention(w, l, xq, x[:, :, 1], x[:, :, 2], lengths, heads=heads)
    pick = slice(None) if heads is None else torch.as_tensor(list(heads), device=x.device)
    return attend(*qkv_projections(w, l, x, heads=heads), w.W_O[l][pick], causal)


def resume(w: GPT2Weights, resid: torch.Tensor, lengths: torch.Tensor, layer: int, *,
           after_heads: bool = False) -> torch.Tensor:
    """Last-position logits of the plain forward continued from the residual stream at ``layer``.

    From there the forward of :func:`run` without patching: each layer ``l`` adds its heads,
    ``resid_mid(l) = resid_pre(l) + sum_h a_{l,h} + b_O(l)``, then its MLP, ``resid_pre(l + 1) = resid_mid(l) +
    m_l(resid_mid(l))``; the logits are ``ln_f(resid_post(L - 1)) W_U`` at each prompt's last position. The last
    layer is computed at the last positions only (:func:`head_attention` with ``lengths``): the logits read
    nothing else.

    Args:
        w: the weights.
        resid: [N, P, d]: ``resid_pre(layer)``, or ``resid_mid(layer)`` with ``after_heads`` (the layer's MLP next);
            ``layer = L`` takes ``resid_post(L - 1)`` (the unembedding only).
        lengths: int [N], the prompts' lengths.
        layer: 0 .. L.
        after_heads: whether ``layer``'s heads are already in ``resid``.

    Returns:
        float [N, V]: :func:`run`'s ``logits_last`` for the run whose residual stream at ``layer`` is ``resid``.
    """
    L = w.n_layers
    if not 0 <= layer <= L or (after_heads and layer == L):
        raise ValueError(f"resume at layer {layer}{' after its heads' if after_heads else ''}: the model has layers "
                         f"0 .. {L - 1} (layer {L}: after the last one, without after_heads)")
    p = resid.shape[1]
    causal = torch.ones(p, p, dtype=torch.bool, device=resid.device).tril()
    x = resid if layer < L else last_positions(resid, lengths)
    for l in range(layer, L):
        last = l == L - 1
        if not (l == layer and after_heads):
            heads = head_attention(w, l, x[:, None, None].expand(-1, -1, 3, -1, -1), causal,
                                   lengths=lengths if last else None).sum(1)
            x = (last_positions(x, lengths) if last else x) + heads + w.b_O[l]
        elif last:
            x = last_positions(x, lengths)
        x = x + mlp(w, l, x)
    return unembed(w, x)


@torch.no_grad()
def run_input_deltas(w: GPT2Weights, clean: RunCache, lengths: torch.Tensor, v: int,
                     deltas: torch.Tensor) -> torch.Tensor:
    """Last-position logits of the plain run with one downstream input changed: the hook ``in_v -> in_v + delta``.

    Downstream input ``v`` feeds only node v (module docstring), so with ``in_v + delta_j`` only v's output changes
    and the rest of the model sees the changed residual stream:

    * the logits input: ``ln_f(resid_post(L - 1) + delta_j) W_U``;
    * the MLP of layer l: ``resid_pre(l + 1) + m_l(in + delta_j) - m_l(in)``, then :func:`resume` at ``l + 1``;
    * the q, k or v input of head h of layer l: that head alone recomputed (:func:`head_attention` with
      ``heads=[h]``), ``resid_mid(l) + a'_h - a_h``, then :func:`resume` after layer l's heads (the last layer: at
      the last positions only).

    Exact (no linearisation). With ``delta_j = a_u(corrupted) - a_u(clean)`` it is the interchange patching of the
    edge u -> v alone (:func:`run_patched_groups` with the mask "every edge but u -> v").

    Args:
        w: the weights.
        clean: the run to change, from :func:`run` with ``keep_inputs=True`` ([B, ...]).
        lengths: int [B], the prompts' lengths.
        v: the downstream input's index in graph order (per layer: q, k, v of each head, then the MLP; the logits
            last).
        deltas: [k, B, P, d], k changes of ``in_v``.

    Returns:
        float [k, B, V]: the last-position logits of each changed run.
    """
    g, H, L = w.graph, w.n_heads, w.n_layers
    k, b, p = deltas.shape[:3]
    kl = lengths.repeat(k)
    if not 0 <= v < len(g.downstream):
        raise ValueError(f"downstream input {v} is not one of the model's {len(g.downstream)}")
    if v == len(g.downstream) - 1:  # the logits input
        last = last_positions(clean.inputs[-1], lengths)[None] + deltas[:, torch.arange(b), lengths - 1]
        return unembed(w, last)
    l, rest = divmod(v, 3 * H + 1)
    mid = clean.inputs[2 * l + 1]                                            # resid_mid(l) [B, P, d]
    if rest == 3 * H:  # the MLP of layer l: its input changed, the residual from resid_mid(l) not
        node = clean.nodes[:, 1 + l * (H + 1) + H]
        resid = (mid + node)[None] + mlp(w, l, mid[None] + deltas) - node[None]
        return resume(w, resid.reshape(k * b, p, -1), kl, l + 1).view(k, b, -1)
    h, letter = divmod(rest, 3)
    letters = torch.empty((3, k, b, p, deltas.shape[-1]), dtype=deltas.dtype, device=deltas.device)
    letters.copy_(clean.inputs[2 * l][:, h].transpose(0, 1)[:, None])       # [3, k, B, P, d]: each letter contiguous
    letters[letter] += deltas
    x = letters.view(3, k * b, 1, p, -1).permute(1, 2, 0, 3, 4)               # [kB, 1, 3, P, d]
    node = clean.nodes[:, 1 + l * (H + 1) + h]
    causal = torch.ones(p, p, dtype=torch.bool, device=deltas.device).tril()
    if l == L - 1:  # only the last positions reach the logits
        change = head_attention(w, l, x, causal, heads=[h], lengths=kl)[:, 0] \
            - last_positions(node, lengths).repeat(k, 1)
        out = last_positions(mid, lengths).repeat(k, 1) + change
        return unembed(w, out + mlp(w, l, out)).view(k, b, -1)
    change = head_attention(w, l, x, causal, heads=[h])[:, 0] - node.repeat(k, 1, 1)
    return resume(w, mid.repeat(k, 1, 1) + change, kl, l, after_heads=True).view(k, b, -1)


def first_layer_bits(bits: torch.Tensor, n_heads: int) -> torch.Tensor | None:
    """Each mask's q/k/v bits of every layer-0 head as one number, or None where a layer-0 mask entry is not 0 or 1.

    Args:
        bits: [m, 3 H], the mask entries of the edges input -> q/k/v input ``3 h + c`` of layer 0.
        n_heads: H.

    Returns:
        int [m, H]: ``4 b_q + 2 b_k + b_v`` of head h, the row of :func:`first_layer_table` that the mask reads.
    """
    if not bool(((bits == 0) | (bits == 1)).all()):
        return None
    b = bits.reshape(-1, n_heads, 3).long()
    return b[..., 0] * 4 + b[..., 1] * 2 + b[..., 2]


@torch.no_grad()
def first_layer_table(w: GPT2Weights, input_act: torch.Tensor, corrupted: RunCache) -> torch.Tensor:
    """Layer 0's head outputs minus the corrupted run's for the 8 combinations of q/k/v bits: what every 0/1 mask
    reads of layer 0.

    Layer 0's q/k/v inputs have one upstream node, the input: the corrupted run's is ``x0 = a_input(corr)``
    (``resid_pre(0)``), and input ``c`` of head ``h`` under a mask is ``x0 + b (a_input(clean) - x0)`` with its mask
    bit ``b`` in {0, 1}. So ``ln_1`` and the projections run once per prompt for both inputs and the attention 8
    times per prompt, instead of all of it once per (mask, prompt) pair; a mask gathers its heads' rows
    (:func:`first_layer_bits`).

    Args:
        w: the weights.
        input_act: [e, P, d], the clean run's ``input`` node.
        corrupted: the corrupted run (:func:`run` with ``keep_inputs``) on the same e prompts.

    Returns:
        [8, e, H, P, d]: row ``4 b_q + 2 b_k + b_v`` holds ``a_{0,h}(b_q, b_k, b_v) - a_{0,h}(corr)``.
    """
    H = w.n_heads
    x0 = corrupted.nodes[:, 0]
    e, P, d = x0.shape
    both = torch.stack([x0, x0 + (input_act - x0)])                          # bit 0, bit 1: x0 + 1 (clean - x0)
    q, k, v = (t.view(2, e, H, P, -1) for t in
               qkv_projections(w, 0, both.view(2 * e, 1, 1, P, d).expand(-1, -1, 3, -1, -1)))
    bits = torch.arange(8, device=x0.device)
    q, k, v = (t[(bits >> shift) & 1].view(8 * e, H, P, -1) for t, shift in ((q, 2), (k, 1), (v, 0)))
    causal = torch.ones(P, P, dtype=torch.bool, device=x0.device).tril()
    return attend(q, k, v, w.W_O[0], causal).view(8, e, H, P, d).sub_(corrupted.nodes[:, 1: 1 + H])


@torch.no_grad()
def run_patched_groups(w: GPT2Weights, input_act: torch.Tensor, lengths: torch.Tensor, corrupted: RunCache,
                       masks: torch.Tensor, *, first_layer: torch.Tensor | None = None) -> torch.Tensor:
    """Last-position logits of m edge masks on the same e prompts: ``run(..., corrupted=, masks=)`` on every
    (mask, prompt) pair, without copying the corrupted cache per mask.

    Node differences ``D_u = a_u(patched) - a_u(corr)`` of the nodes before the last layer live in one buffer
    [m, e, U, P, d], and each downstream input is ``in_v(corr) + sum_u mask_uv D_u``: one batched matmul of mask
    columns with that buffer. Only what the last-position logits read is computed:

    * layer 0 (when it is not the last layer and its masks are 0/1): gathered from :func:`first_layer_table`, computed
      once per prompt (``first_layer``: computed once for calls on the same prompts);
    * the last layer: keys and values at every position, the query, the heads, the MLP and the logits input at
      each prompt's last position only (:func:`last_query_attention`).

    Args:
        w: the weights.
        input_act: [e, P, d], the clean run's ``input`` node.
        lengths: int [e], the prompts' lengths.
        corrupted: the corrupted run (:func:`run` with ``keep_inputs``) on the same e prompts.
        masks: float [m, n_up, n_down] (1: the edge carries the patched run's activation, 0: the corrupted one);
            invalid (u, v) pairs must be 0.
        first_layer: [8, e, H, P, d], :func:`first_layer_table` of these prompts, or None (computed here).

    Returns:
        float [m, e, V]: the logits at each prompt's last position under each mask.
    """
    L, H = w.n_layers, w.n_heads
    e, P, d = input_act.shape
    m = masks.shape[0]
    masks = masks.to(input_act.dtype)
    dev = input_act.device
    causal = torch.ones(P, P, dtype=torch.bool, device=dev).tril()
    ar = torch.arange(e, device=dev)
    U = 1 + (L - 1) * (H + 1)                              # the nodes before the last layer, at every position
    D = torch.empty(m, e, U, P, d, dtype=input_act.dtype, device=dev)
    D[:, :, 0] = input_act - corrupted.nodes[:, 0]

    def patched(cols: torch.Tensor, u: int) -> torch.Tensor:   # [m, u, k] mask columns -> [m, e, k, P * d]
        return torch.matmul(cols.transpose(1, 2)[:, None], D[:, :, :u].reshape(m, e, u, P * d))

    for l in range(L - 1):
        u, col = 1 + l * (H + 1), l * (3 * H + 1)
        cols = masks[:, :u, col: col + 3 * H]
        bits = first_layer_bits(cols[:, 0], H) if l == 0 else None
        if bits is not None:
            if first_layer is None:
                first_layer = first_layer_table(w, input_act, corrupted)
            D[:, :, 1: 1 + H] = first_layer[bits[:, None], ar[None, :, None], torch.arange(H, device=dev)]
        else:
            x = patched(cols, u).view(m, e, H, 3, P, d).add_(corrupted.inputs[2 * l])
            heads = head_attention(w, l, x.view(m * e, H, 3, P, d), causal)
            D[:, :, u: u + H] = heads.view(m, e, H, P, d) - corrupted.nodes[:, u: u + H]
        xm = patched(masks[:, : u + H, col + 3 * H, None], u + H).view(m, e, P, d).add_(corrupted.inputs[2 * l + 1])
        D[:, :, u + H] = mlp(w, l, xm) - corrupted.nodes[:, u + H]
    col = (L - 1) * (3 * H + 1)
    cols = masks[:, :U, col: col + 3 * H].view(m, U, H, 3)
    ins = corrupted.inputs[2 * (L - 1)]                                       # [e, H, 3, P, d]
    at_last = D.transpose(2, 3)[:, ar, lengths - 1]                          # [m, e, U, d]
    xq = torch.matmul(cols[..., 0].transpose(1, 2)[:, None], at_last).add_(ins[ar, :, 0, lengths - 1])
    xk, xv = (patched(cols[..., c], U).view(m, e, H, P, d).add_(ins[:, :, c]) for c in (1, 2))
    heads = last_query_attention(w, L - 1, xq.view(m * e, H, d), xk.view(m * e, H, P, d), xv.view(m * e, H, P, d),
                                 lengths.repeat(m)).view(m, e, H, d)
    c_last = corrupted.nodes[ar, :, lengths - 1]                              # [e, n_up, d]
    at_last = torch.cat([at_last, heads - c_last[:, U: U + H]], 2)           # [m, e, U + H, d]
    xm = torch.matmul(masks[:, None, None, : U + H, col + 3 * H], at_last)[:, :, 0]
    xm += last_positions(corrupted.inputs[2 * L - 1], lengths)
    at_last = torch.cat([at_last, (mlp(w, L - 1, xm) - c_last[:, U + H])[:, :, None]], 2)   # [m, e, n_up, d]
    xf = torch.matmul(masks[:, None, None, :, -1], at_last)[:, :, 0] + last_positions(corrupted.inputs[-1], lengths)
    return unembed(w, xf)
