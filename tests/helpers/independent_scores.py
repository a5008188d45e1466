"""An independent, straightforward implementation of edge and node attribution (the test oracle of test_hooked,
test_methods and test_reference_parity), written from the reference's semantics (hannamw/EAP-IG) without the
package's graph or hooks:

* the edges come from the residual-stream loop of the reference's ``Graph.from_model``;
* activations come from TransformerBridge's own ``run_with_cache``;
* for every downstream input v (or, at node level, every node output u), a separate forward adds a zero
  perturbation to v alone and differentiates the summed metric ``M = logit(answer) - logit(distractor)`` (last
  position) with respect to it, at each integration point ``alpha``: of the input embedding ``x0 + alpha (x1 -
  x0)`` (corrupted x0, clean x1), written into ``hook_embed`` as the reference does, or (EAP-IG-activations) of
  one node group's output in turn;
* the score of every edge u -> v, for every example, is ``factor(u) . mean over passes of dM/d in_v``; a node's
  is ``(a_u(corrupted) - a_u(clean)) . mean dM/d a_u`` (or the reference node code's MLP rule: the gradient at
  the MLP's input);
* the reference's autograd (``reference_autograd=True``): its backward hooks fire only on a tensor that
  requires grad, with every parameter trainable (HookedTransformer's default) and its interpolations returned as
  constants. The oracle emulates exactly that: it makes the parameters trainable for the call and gives an input
  no gradient in a pass where the tensor at its hook does not require grad.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import numpy as np
import torch


def reference_edges(n_layers: int, n_heads: int, parallel: bool) -> list[tuple[str, str, str | None]]:
    """(parent, child, letter) of every edge, built with the residual-stream loop of the reference's
    ``Graph.from_model`` (independent of certified_circuits.language.graph)."""
    edges, stream = [], ["input"]
    for l in range(n_layers):
        heads = [f"a{l}.h{h}" for h in range(n_heads)]
        for node in stream:
            edges += [(node, a, x) for a in heads for x in "qkv"]
        if parallel:
            edges += [(node, f"m{l}", None) for node in stream]
            stream = stream + heads + [f"m{l}"]
        else:
            stream = stream + heads
            edges += [(node, f"m{l}", None) for node in stream]
            stream = stream + [f"m{l}"]
    return edges + [(node, "logits", None) for node in stream]


def _act(cache, node: str) -> torch.Tensor:
    """Node output [B, P, d] from a ``run_with_cache`` cache."""
    if node == "input":
        return cache["blocks.0.hook_resid_pre"]
    if node.startswith("m"):
        return cache[f"blocks.{node[1:]}.hook_mlp_out"]
    l, h = node[1:].split(".h")
    return cache[f"blocks.{l}.attn.hook_result"][:, :, int(h)]


def _in_hook(child: str, letter: str | None, n_layers: int) -> tuple[str, int | None]:
    """(hook name, head or None) where the downstream input of ``child`` (and its q/k/v ``letter``) is read."""
    if child == "logits":
        return f"blocks.{n_layers - 1}.hook_resid_post", None
    if child.startswith("m"):
        return f"blocks.{child[1:]}.ln2.hook_in", None
    l, h = child[1:].split(".h")
    return f"blocks.{l}.hook_{letter}_input", int(h)


def _out_hook(node: str) -> tuple[str, int | None]:
    """(hook name, head or None) of a head's or MLP's output."""
    if node.startswith("m"):
        return f"blocks.{node[1:]}.hook_mlp_out", None
    l, h = node[1:].split(".h")
    return f"blocks.{l}.attn.hook_result", int(h)


@contextmanager
def _trainable(module):
    """Every parameter requires grad inside (HookedTransformer's default), as it was afterwards."""
    params = list(module.parameters())
    before = [q.requires_grad for q in params]
    try:
        for q in params:
            q.requires_grad_(True)
        yield
    finally:
        for q, b in zip(params, before):
            q.requires_grad_(b)


class _Oracle:
    """One model and batch: clean and corrupted caches, and dM/d(one tensor) under any replacement hooks."""

    def __init__(self, lm, batch):
        self.br, self.g, self.batch = lm.bridge, lm.graph, batch
        self.clean, corr = torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted)
        self.lengths = torch.as_tensor(batch.lengths)
        self.ar = torch.arange(len(self.lengths))
        with torch.no_grad():
            _, self.c_clean = self.br.run_with_cache(self.clean)
            _, self.c_corr = self.br.run_with_cache(corr)

    def embed_hook(self, alpha: float, constant: bool = False):
        """``hook_embed`` set to x0 + alpha (x1 - x0) (the reference's input node), a constant if asked."""
        x0, x1 = self.c_corr["hook_embed"], self.c_clean["hook_embed"]

        def fn(x, hook):
            new = x0 + alpha * (x1 - x0)
            return new if constant else new + 0 * x
        return ("hook_embed", fn)

    def grads(self, targets: list[tuple[str, int | None]], hooks: list, reference_autograd: bool = False
              ) -> dict[tuple[str, int | None], torch.Tensor]:
        """dM_i/d t for every example i and every target t (the tensor at hook ``name``, or its ``head`` slice),
        [B, P, d] each: a zero perturbation added at each target; the partial derivative with respect to one of
        them at zero is the gradient of M with respect to that tensor alone (the others add nothing). Zero when
        t is not on M's path (or, ``reference_autograd``, when t does not require grad, so that the reference's
        backward hook would not fire)."""
        shape = self.c_clean["blocks.0.hook_resid_pre"].shape
        deltas = {t: torch.zeros(shape, requires_grad=True) for t in targets}
        fired: dict[str, bool] = {}

        def add(name):
            def fn(x, hook):
                fired[name] = x.requires_grad
                x = x.clone()
                for (n, head), delta in deltas.items():
                    if n != name:
                        continue
                    if head is None:
                        x = x + delta
                    else:
                        x[:, :, head] = x[:, :, head] + delta
                return x
            return fn

        names = sorted({n for n, _ in targets})
        with torch.enable_grad(), self.br.hooks(fwd_hooks=hooks + [(n, add(n)) for n in names]):
            logits = self.br(self.clean)[self.ar, self.lengths - 1]
        metric = (logits[self.ar, torch.as_tensor(self.batch.answer)]
                  - logits[self.ar, torch.as_tensor(self.batch.distractor)]).sum()
        got = torch.autograd.grad(metric, list(deltas.values()), allow_unused=True)
        return {t: torch.zeros(shape) if g is None or (reference_autograd and not fired[t[0]]) else g
                for t, g in zip(deltas, got)}

    def mean_grads(self, targets, passes: list[list], reference_autograd: bool = False) -> dict:
        """:meth:`grads` averaged over passes (each a list of replacement hooks)."""
        total = None
        for hooks in passes:
            g = self.grads(targets, hooks, reference_autograd)
            total = g if total is None else {t: total[t] + g[t] for t in total}
        return {t: v / len(passes) for t, v in total.items()}


def straightforward_scores(lm, batch, alphas: list[float], factor: str = "difference") -> dict[str, np.ndarray]:
    """Per-example scores of every edge by the definition, edge by edge (module docstring).

    Args:
        lm: a loaded language model (``bridge`` and ``graph``).
        batch: encoded examples.
        alphas: integration points of the input embedding; ``[1.0]`` alone is the clean input (no hook).
        factor: ``"difference"``: ``a_u(corrupted) - a_u(clean)`` (EAP, EAP-IG); ``"clean"``: ``a_u(clean)``
            (gradient times activation).
    """
    o = _Oracle(lm, batch)
    L = o.g.n_layers
    edges = reference_edges(L, o.g.n_heads, o.g.parallel_attn_mlp)
    targets = list(dict.fromkeys(_in_hook(child, letter, L) for _, child, letter in edges))
    # alpha = 1 is the clean input itself (no hook)
    grads = o.mean_grads(targets, [[] if a == 1.0 else [o.embed_hook(a)] for a in alphas])
    out = {}
    for parent, child, letter in edges:
        term = _act(o.c_clean, parent) if factor == "clean" else _act(o.c_corr, parent) - _act(o.c_clean, parent)
        grad = grads[_in_hook(child, letter, L)]
        out[f"{parent}->{child}" + (f"<{letter}>" if letter else "")] = (term * grad).sum((1, 2)).numpy()
    return out


def activation_ig_scores(lm, batch, m: int, reference_autograd: bool = False) -> dict[str, np.ndarray]:
    """EAP-IG-activations' per-example edge scores by the definition (hannamw/EAP-IG ``get_scores_ig_activations``).

    For each node group G in turn (``input``, then per layer all heads, the MLP) and each k = 1..m, G's output
    alone is set to ``(k/m) a_G(clean) + (1 - k/m) a_G(corrupted)`` on the clean prompt; the gradient of every
    input v is averaged over all (2L + 1) m passes, and s_i(u -> v) = (a_u(corrupted) - a_u(clean)) . that mean.

    Args:
        lm, batch: as :func:`straightforward_scores`.
        m: ``ig_steps``.
        reference_autograd: the reference's autograd (module docstring): its interpolations are constants and an
            input whose tensor does not require grad in a pass gets no gradient there.

    Returns:
        {edge name: [B] scores}.
    """
    o = _Oracle(lm, batch)
    L = o.g.n_layers
    groups = [None] + [g for l in range(L) for g in (f"blocks.{l}.attn.hook_result", f"blocks.{l}.hook_mlp_out")]

    def group_hook(name, a):
        c, k = o.c_clean[name], o.c_corr[name]

        def fn(x, hook):
            new = a * c + (1 - a) * k
            return new if reference_autograd else new + 0 * x
        return (name, fn)

    passes = [[o.embed_hook(k / m, constant=reference_autograd)] if grp is None else [group_hook(grp, k / m)]
              for grp in groups for k in range(1, m + 1)]
    edges = reference_edges(L, o.g.n_heads, o.g.parallel_attn_mlp)
    targets = list(dict.fromkeys(_in_hook(child, letter, L) for _, child, letter in edges))
    with _trainable(o.br) if reference_autograd else nullcontext():
        grads = o.mean_grads(targets, passes, reference_autograd)
    out = {}
    for parent, child, letter in edges:
        term = _act(o.c_corr, parent) - _act(o.c_clean, parent)
        grad = grads[_in_hook(child, letter, L)]
        out[f"{parent}->{child}" + (f"<{letter}>" if letter else "")] = (term * grad).sum((1, 2)).numpy()
    return out


def straightforward_node_scores(lm, batch, alphas: list[float], mlp_gradient: str = "output") -> dict[str, np.ndarray]:
    """Per-example node scores of EAP-IG-inputs by the definition: s_i(u) = (a_u(corrupted) - a_u(clean)) .
    mean_alpha dM_i/d t_u, the input embedding interpolated at ``alphas``.

    Args:
        lm, batch: as :func:`straightforward_scores`.
        alphas: integration points of the input embedding.
        mlp_gradient: t_u for an MLP: ``"output"`` (its output, the node's own) or ``"input"`` (its input copy, as
            the reference's node code, ``attribute_node.py``, takes it).

    Returns:
        {node name (``a{l}.h{h}``, ``m{l}``): [B] scores}.
    """
    o = _Oracle(lm, batch)
    L, H = o.g.n_layers, o.g.n_heads
    nodes = [f"a{l}.h{h}" for l in range(L) for h in range(H)] + [f"m{l}" for l in range(L)]
    where = {u: _in_hook(u, None, L) if u.startswith("m") and mlp_gradient == "input" else _out_hook(u) for u in nodes}
    grads = o.mean_grads(list(where.values()), [[o.embed_hook(a)] for a in alphas])
    return {u: ((_act(o.c_corr, u) - _act(o.c_clean, u)) * grads[where[u]]).sum((1, 2)).numpy() for u in nodes}


def _node_outputs_at(o: _Oracle, hooks: list, nodes: list[str]) -> dict[str, torch.Tensor]:
    """Every node's output [B, P, d] in one forward of the clean prompt under ``hooks``, read at the node's own
    hook after those hooks ran (so the ``input`` node is the interpolated embedding plus the position embedding)."""
    names = ["blocks.0.hook_resid_pre"] + sorted({_out_hook(u)[0] for u in nodes if u != "input"})
    seen: dict[str, torch.Tensor] = {}

    def keep(name):
        def fn(x, hook):
            seen[name] = x.detach().clone()
            return x
        return fn

    with torch.no_grad(), o.br.hooks(fwd_hooks=hooks + [(n, keep(n)) for n in names]):
        o.br(o.clean)
    return {u: _act(seen, u) for u in nodes}


def conductance_scores(lm, batch, m: int, term: str = "corrupted-ward", level: str = "edge") -> dict[str, np.ndarray]:
    """CEAP's per-example scores by the formula (Wu, Tonin and Cevher; LIONS-EPFL/Circuit-Variance ``ceap``),
    written without the package's graph, hooks or method registry:

        CEAP_i(u -> v) = sum_{k=1..m} (z_u(k-1) - z_u(k)) . dM_i/d in_v |_{z(k)},

    z(k) the clean prompt's run with ``hook_embed`` set to x0 + (k/m)(x1 - x0) (corrupted x0, clean x1), z(0) the
    corrupted prompt's own run (``run_with_cache``), z_u(k) node u's output in run k read at u's hook in that run
    (recorded in its own forward, :func:`_node_outputs_at`), and dM/d in_v the gradient of the summed metric at
    v's input alone (:meth:`_Oracle.grads`, a zero perturbation at that input), one separate forward per k.

    Args:
        lm, batch: as :func:`straightforward_scores`.
        m: the number of steps.
        term: ``"corrupted-ward"``: z_u(k-1) - z_u(k) (this project's sign); ``"clean-ward"``: z_u(k) - z_u(k-1)
            (LIONS-EPFL's ``activation_curr - activation_prev``).
        level: ``"edge"``, or ``"node"``: s_i(u) = sum_k (z_u(k-1) - z_u(k)) . dM_i/d a_u |_{z(k)} (the gradient at
            u's own output).

    Returns:
        {edge name, or node name (``a{l}.h{h}``, ``m{l}``): [B] scores}.
    """
    o = _Oracle(lm, batch)
    L, H = o.g.n_layers, o.g.n_heads
    edges = reference_edges(L, H, o.g.parallel_attn_mlp)
    nodes = ["input"] + [f"a{l}.h{h}" for l in range(L) for h in range(H)] + [f"m{l}" for l in range(L)]
    if level == "edge":
        targets = list(dict.fromkeys(_in_hook(child, letter, L) for _, child, letter in edges))
    else:
        targets = [_out_hook(u) for u in nodes[1:]]
    sign = {"corrupted-ward": 1.0, "clean-ward": -1.0}[term]
    previous = {u: _act(o.c_corr, u) for u in nodes}                                    # z(0)
    totals: dict[str, torch.Tensor] = {}
    for k in range(1, m + 1):
        hooks = [o.embed_hook(k / m)]
        current = _node_outputs_at(o, hooks, nodes)                                     # z(k)
        grads = o.grads(targets, hooks)                                                 # at z(k)
        if level == "edge":
            parts = {f"{p}->{c}" + (f"<{x}>" if x else ""): (previous[p] - current[p]) * grads[_in_hook(c, x, L)]
                     for p, c, x in edges}
        else:
            parts = {u: (previous[u] - current[u]) * grads[_out_hook(u)] for u in nodes[1:]}
        for name, prod in parts.items():
            s = sign * prod.sum((1, 2))
            totals[name] = s if name not in totals else totals[name] + s
        previous = current
    return {name: v.numpy() for name, v in totals.items()}
