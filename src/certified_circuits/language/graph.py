"""The EAP computational graph of a GPT-2-style model (paper, Appendix "Circuit graph and metric").

Upstream nodes (forward order): ``input`` (token + position embedding), every head output ``a{l}.h{h}``
(the head's z @ W_O, without the attention output bias) and every MLP output ``m{l}`` (with its bias).
Downstream inputs: each head's q, k and v input ``a{l}.h{h}<q|k|v>`` (the residual stream before ln_1,
one copy per head and letter), each MLP input ``m{l}`` (the residual before ln_2) and ``logits`` (the
residual before ln_f); their grammar is :mod:`.names`. An edge u -> v exists when u is computed before
v is read; an MLP reads the heads of its own layer, except in parallel-attention blocks (``parallel_attn_mlp``: GPT-NeoX/Pythia, GPT-J),
whose MLP reads the block's input as its heads do (hannamw/EAP-IG's ``Graph.from_model``). For L layers
and H heads (docs/architecture.md, section 3):

    E = sum_l [3H (1 + l (H+1)) + (1 + l (H+1) + H)] + 1 + L (H+1)      (GPT-2 Small: 32,491)

minus L H for parallel attention.

Canonical edge order (= attribution column order): upstream-major, i.e. ``np.nonzero(valid)`` of the
[n_upstream, n_downstream] validity matrix, both axes in forward order; downstream order per layer is
``a{l}.h0<q>, a{l}.h0<k>, a{l}.h0<v>, a{l}.h1<q>, ..., m{l}``, then ``logits`` last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from certified_circuits.language import names
from certified_circuits.language.names import QKV

#: the embedded tiny GPT-2's shape (``language-train``'s defaults; the plan check reads it at parse time)
EMBEDDED_N_LAYER = 3
EMBEDDED_N_HEAD = 4
#: shape of the compiled induction model (language/compiled.py), known at parse time without building it
COMPILED_N_LAYER = 2
COMPILED_N_HEAD = 4
#: (layers, heads) of each compiled model (``language.train.compiled``): the clean induction control and the noisy
#: variant (two previous-token and two induction heads among 12 distractors: 310 edges)
COMPILED_SHAPES = {"induction": (COMPILED_N_LAYER, COMPILED_N_HEAD), "induction_noisy": (2, 8)}
#: the task whose circuit each compiled model holds (its only task: the config check refuses any other)
COMPILED_TASK = {"induction": "induction", "induction_noisy": "induction"}


def n_edges_formula(n_layers: int, n_heads: int, parallel_attn_mlp: bool = False) -> int:
    """Edge count from docs/architecture.md, section 3 (independent of the graph construction, for checks)."""
    h = n_heads
    e = sum(3 * h * (1 + l * (h + 1)) + (1 + l * (h + 1) + h) for l in range(n_layers)) + 1 + n_layers * (h + 1)
    return e - n_layers * h if parallel_attn_mlp else e


def n_components(n_layers: int, n_heads: int, level: str = "edge", parallel_attn_mlp: bool = False) -> int:
    """The components a circuit is chosen from: every edge (``level: edge``) or every head and MLP (``node``)."""
    if level == "node":
        return n_layers * (n_heads + 1)
    return n_edges_formula(n_layers, n_heads, parallel_attn_mlp)


def upstream_index(layer: int, head: int | None, n_heads: int) -> int:
    """Index of head ``a{layer}.h{head}`` (or MLP ``m{layer}`` when head is None) among upstream nodes."""
    base = 1 + layer * (n_heads + 1)
    return base + (n_heads if head is None else head)


@dataclass(frozen=True)
class EAPGraph:
    """Nodes, validity matrix and canonical edge list of the EAP graph."""

    n_layers: int
    n_heads: int
    parallel_attn_mlp: bool
    upstream: tuple[str, ...]
    downstream: tuple[str, ...]
    valid: np.ndarray = field(repr=False)  # bool [n_up, n_down]
    edge_up: np.ndarray = field(repr=False)  # int64 [E]
    edge_down: np.ndarray = field(repr=False)  # int64 [E]
    #: the hook point (in block l, TransformerLens name) of an MLP's own input: the input of its norm
    #: ``ln2.hook_in``, or ``ln1.hook_in`` where attention and MLP share one norm (Phi, Falcon-7B: with split
    #: q/k/v inputs the attention reads its own copies, so that norm feeds only the MLP)
    mlp_input_hook: str = "ln2.hook_in"

    @property
    def n_edges(self) -> int:
        return int(self.edge_up.size)

    def edge_names(self) -> list[str]:
        return [names.edge(self.upstream[u], self.downstream[d]) for u, d in zip(self.edge_up, self.edge_down)]

    def node_names(self) -> list[str]:
        """Components of a node-level circuit: every head and MLP, forward order (``input`` excluded: it is
        always in the circuit)."""
        return list(self.upstream[1:])

    def node_edge_mask(self, node_mask: np.ndarray) -> np.ndarray:
        """Edge masks [..., E] of node circuits [..., n_up - 1]: edge u -> v is kept iff u is (``input`` always).

        A node outside the circuit has every outgoing edge patched, as hannamw/EAP-IG's node-level
        ``evaluate_graph`` ablates the node's output.
        """
        node_mask = np.asarray(node_mask, dtype=bool)
        if node_mask.shape[-1] != len(self.upstream) - 1:
            raise ValueError(f"node mask has {node_mask.shape[-1]} columns but the graph has "
                             f"{len(self.upstream) - 1} heads and MLPs")
        up = np.concatenate([np.ones(node_mask.shape[:-1] + (1,), dtype=bool), node_mask], -1)
        return up[..., self.edge_up]

    def dense_mask(self, edge_mask: np.ndarray) -> np.ndarray:
        """Scatter bool [..., E] edge masks into dense [..., n_up, n_down] matrices (invalid pairs False)."""
        edge_mask = np.asarray(edge_mask, dtype=bool)
        if edge_mask.shape[-1] != self.n_edges:
            raise ValueError(f"edge mask has {edge_mask.shape[-1]} columns but the graph has {self.n_edges} edges")
        out = np.zeros(edge_mask.shape[:-1] + self.valid.shape, dtype=bool)
        out[..., self.edge_up, self.edge_down] = edge_mask
        return out


@lru_cache(maxsize=16)
def build_graph(n_layers: int, n_heads: int, parallel_attn_mlp: bool = False,
                mlp_input_hook: str = "ln2.hook_in") -> EAPGraph:
    """Build the EAP graph for ``n_layers`` x ``n_heads`` (cached; treat the result as read-only).

    Args:
        n_layers, n_heads: the model's shape (query heads; grouped-query attention is ungrouped).
        parallel_attn_mlp: parallel attention and MLP (the MLP does not read its own layer's heads).
        mlp_input_hook: where the hook path reads an MLP's input (:attr:`EAPGraph.mlp_input_hook`).

    Returns:
        The :class:`EAPGraph`, edges in the canonical order (module docstring).
    """
    if n_layers < 1 or n_heads < 1:
        raise ValueError(f"need n_layers >= 1 and n_heads >= 1, got {n_layers}, {n_heads}")
    L, H = n_layers, n_heads
    up = [names.INPUT]
    up_layer = [-1]   # last layer index whose *attention* cannot read it (input: none)
    up_is_mlp = [False]
    for l in range(L):
        for h in range(H):
            up.append(names.head(l, h))
            up_layer.append(l)
            up_is_mlp.append(False)
        up.append(names.mlp(l))
        up_layer.append(l)
        up_is_mlp.append(True)
    down, down_layer, down_is_mlp = [], [], []
    for l in range(L):
        for h in range(H):
            for q in QKV:
                down.append(names.head_input(l, h, q))
                down_layer.append(l)
                down_is_mlp.append(False)
        down.append(names.mlp(l))
        down_layer.append(l)
        down_is_mlp.append(True)
    down.append(names.LOGITS)
    down_layer.append(L)
    down_is_mlp.append(False)
    ul = np.array(up_layer)[:, None]
    dl = np.array(down_layer)[None, :]
    u_head = (~np.array(up_is_mlp))[:, None] & (ul >= 0)
    d_mlp = np.array(down_is_mlp)[None, :]
    # strictly earlier layer always readable; same-layer head -> same-layer MLP also readable (sequential blocks)
    valid = (ul < dl) | ((ul == dl) & u_head & d_mlp & (not parallel_attn_mlp))
    eu, ed = np.nonzero(valid)
    return EAPGraph(L, H, bool(parallel_attn_mlp), tuple(up), tuple(down), valid, eu.astype(np.int64),
                    ed.astype(np.int64), mlp_input_hook)


def edge_names(n_layers: int, n_heads: int, parallel_attn_mlp: bool = False) -> list[str]:
    """Edge names in canonical order (the attribution column order), e.g. ``a3.h2->m7``."""
    return build_graph(n_layers, n_heads, parallel_attn_mlp).edge_names()
