"""An independent, straightforward implementation of edge attribution (the test oracle of test_hooked and
test_methods), written from the reference's semantics (hannamw/EAP-IG) without the package's graph or hooks:

* the edges come from the residual-stream loop of the reference's ``Graph.from_model``;
* activations come from TransformerBridge's own ``run_with_cache``;
* for every downstream input v, a separate forward adds a zero perturbation to v alone and differentiates the
  summed metric ``M = logit(answer) - logit(distractor)`` (last position) with respect to it, at each
  integration point ``alpha`` of the input embedding ``x0 + alpha (x1 - x0)`` (corrupted x0, clean x1);
* the score of every edge u -> v, for every example, is ``factor(u) . mean_alpha dM/d in_v``.
"""

from __future__ import annotations

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


def straightforward_scores(lm, batch, alphas: list[float], factor: str = "difference") -> dict[str, np.ndarray]:
    """Per-example scores of every edge by the definition, edge by edge (module docstring).

    Args:
        lm: a loaded language model (``bridge`` and ``graph``).
        batch: encoded examples.
        alphas: integration points of the input embedding; ``[1.0]`` alone is the clean input (no hook).
        factor: ``"difference"``: ``a_u(corrupted) - a_u(clean)`` (EAP, EAP-IG); ``"clean"``: ``a_u(clean)``
            (gradient times activation).
    """
    br, g = lm.bridge, lm.graph
    L, H = g.n_layers, g.n_heads
    clean, corr = torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted)
    lengths = torch.as_tensor(batch.lengths)
    ar = torch.arange(len(lengths))
    with torch.no_grad():
        _, c_clean = br.run_with_cache(clean)
        _, c_corr = br.run_with_cache(corr)

    def act(cache, node):
        if node == "input":
            return cache["blocks.0.hook_resid_pre"]
        if node.startswith("m"):
            return cache[f"blocks.{node[1:]}.hook_mlp_out"]
        l, h = node[1:].split(".h")
        return cache[f"blocks.{l}.attn.hook_result"][:, :, int(h)]

    def grad_at(child, letter, alpha):
        """dM_i/d in_child for every example i, averaged later over alpha: a zero perturbation added at v only."""
        x0, x1 = c_corr["blocks.0.hook_resid_pre"], c_clean["blocks.0.hook_resid_pre"]
        if child == "logits":
            name, head = f"blocks.{L - 1}.hook_resid_post", None
        elif child.startswith("m"):
            name, head = f"blocks.{child[1:]}.ln2.hook_in", None
        else:
            l, h = child[1:].split(".h")
            name, head = f"blocks.{l}.hook_{letter}_input", int(h)
        delta = torch.zeros_like(x1, requires_grad=True)

        def add(x, hook):
            if head is None:
                return x.clone() + delta
            x = x.clone()
            x[:, :, head] = x[:, :, head] + delta
            return x

        hooks = [(name, add)]
        if alpha != 1.0:  # alpha = 1 is the clean input itself
            hooks.insert(0, ("blocks.0.hook_resid_pre", lambda x, hook: x0 + alpha * (x1 - x0)))
        with br.hooks(fwd_hooks=hooks):
            logits = br(clean)[ar, lengths - 1]
        metric = (logits[ar, torch.as_tensor(batch.answer)] - logits[ar, torch.as_tensor(batch.distractor)]).sum()
        return torch.autograd.grad(metric, delta)[0]

    grads = {}
    out = {}
    for parent, child, letter in reference_edges(L, H, g.parallel_attn_mlp):
        key = (child, letter)
        if key not in grads:
            grads[key] = sum(grad_at(child, letter, a) for a in alphas) / len(alphas)
        term = act(c_clean, parent) if factor == "clean" else act(c_corr, parent) - act(c_clean, parent)
        name = f"{parent}->{child}" + (f"<{letter}>" if letter else "")
        out[name] = (term * grads[key]).sum((1, 2)).numpy()
    return out
