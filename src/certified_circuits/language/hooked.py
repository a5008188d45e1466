"""EAP, EAP-IG and circuit evaluation through TransformerBridge hooks, for any family it boots
(paper, Section 4 and Appendix "Circuit graph and metric"; hannamw/EAP-IG's ``attribute`` and ``evaluate_graph``).

Hook points (:func:`hook_names`; TransformerLens names, which the bridge resolves to its own):

* upstream node outputs a_u: ``blocks.0.hook_resid_pre`` (``input``), ``blocks.{l}.attn.hook_result``
  (every head ``a{l}.h{h}``), ``blocks.{l}.hook_mlp_out`` (``m{l}``);
* downstream inputs in_v: ``blocks.{l}.hook_{q,k,v}_input`` (one residual copy per head and letter),
  ``blocks.{l}.ln2.hook_in`` (the MLP's input) and ``blocks.{L-1}.hook_resid_post`` (``logits``).

Every in-hook returns a *copy* of its input, so the gradient with respect to it, and a patch added to
it, reach only the consumer after the hook point: TransformerLens' ``HookedTransformer`` makes these
copies (``use_split_qkv_input``, ``hook_mlp_in``) and the reference relies on them. The MLP's input is
taken at the input of its norm, ``ln2.hook_in`` (pre-norm blocks; for parallel blocks the norm of the block
input), which every family has; on the pinned TransformerBridge (4.3) a patch at ``hook_mlp_in`` changes the logits
exactly as one at ``ln2.hook_in`` does and the gradients at the two hooks are identical (forward.py and
tests/unit/language/test_eap_reference.py say the same).

The reference takes the input node at ``hook_embed``; ``blocks.0.hook_resid_pre`` adds the position
embedding (GPT-2) and the embedding scale (Gemma), which clean and corrupted prompts share, so every
activation difference, interpolation and score is the same and one hook serves every family.

Per-example scores. For example i, edge u -> v and the set A of points of the method,

    s_i(u -> v) = (a_u(corrupted_i) - a_u(clean_i)) . (1/|A|) sum_{alpha in A} dM_i/d in_v |_alpha,

the dot product over positions and model dimensions, M_i = logit(answer_i) - logit(distractor_i) at the
last prompt position, summed over the batch so that each row is one example's score (the reference's
``scores /= total_items`` makes its score the mean of our rows). The methods (``method``), as
``attribute(method=...)`` of the reference:

* ``EAP``: A = {clean input} (``get_scores_eap``);
* ``EAP-IG-inputs``: the input node interpolated, x = x_corr + alpha (x_clean - x_corr),
  alpha = k/m for k = 0..m-1 (``integration="reference"``, ``get_scores_eap_ig``) or 1..m (``"endpoint"``)
  at both levels; ``"hannamw"``: 0..m-1 for edges, 1..m for nodes, as the reference's two files
  (:func:`~.methods.integration_points`);
* ``clean-corrupted``: A = {clean, corrupted} (``get_scores_clean_corrupted``);
* ``EAP-IG-activations``: for each of the 2L+1 node groups (input, each layer's heads, each MLP) in
  turn, only that group's output is interpolated, alpha (clean) + (1 - alpha) (corrupted) for
  k = 1..m, and every pass adds its gradients (``get_scores_ig_activations``: |A| = (2L+1) m). As in the
  reference, the interpolated output replaces the group's output, so no gradient flows *into* the group
  (to its own inputs) in its own passes; the gradient flows *from* it to every later input. That includes
  the input group: its interpolated embedding is a point of the path like any other group's, so the
  inputs it feeds directly (the layer-0 heads', and with parallel blocks the layer-0 MLP's) get
  dM/d in_v in its passes too. The reference's edge code returns that interpolation as a constant tensor,
  so autograd reaches those inputs only through a trainable position embedding (GPT-2's ``W_pos``), and on
  rotary families (Llama, Qwen2, Gemma, Pythia) the input group's m passes add zero to them: its own node
  code adds ``activations * 0`` precisely "to cause a backwards pass". ``integration="hannamw"`` reproduces
  the reference (:class:`~.methods.Convention`, docs/reference_parity.md);
* ``grad-x-act`` (not in the reference): A = {clean input} and the clean activation a_u(clean_i) in place of
  the difference, s_i(u -> v) = a_u(clean_i) . dM_i/d in_v |_clean (no corrupted run).
* ``CEAP`` (conductance EAP; Wu, Tonin and Cevher; LIONS-EPFL/Circuit-Variance ``ceap``): the input
  interpolated at alpha = k/m, k = 1..m, as ``EAP-IG-inputs``, but each pass k records every node output z_u(k)
  (the input node's is the interpolated input itself) and pairs that step's change with that pass's gradient,
  s_i(u -> v) = sum_{k=1..m} (z_u(k-1) - z_u(k)) . dM_i/d in_v |_{z(k)}, z(0) the corrupted run, no 1/m
  (:mod:`.methods`' module docstring); ``integration="hannamw"`` takes LIONS-EPFL's term z_u(k) - z_u(k-1).
  At node level the gradient is at u's own output, as for the other methods.

Each method is one entry of :data:`~.methods.METHODS` (its points, where it interpolates, its activation
factor, levels and ranking); :func:`scores_batch` dispatches on the entry, never on a name.

Node level (``level="node"``): components are the heads and MLPs, scored with the gradient at their own
output, s_i(u) = (a_u(corrupted_i) - a_u(clean_i)) . mean_alpha dM_i/d a_u. Because every in_v is a copy of
the residual stream, dM/d a_u is the sum of dM/d in_v over u's children: a node's score is the sum of its
outgoing edges' scores (tested; it needs the same points at both levels, which ``reference`` and
``endpoint`` give). The reference's node-level code differentiates an MLP at its *input* hook while taking
the difference at its output, s_i(m_l) = (a_{m_l}(corrupted_i) - a_{m_l}(clean_i)) . mean_alpha dM_i/d in_{m_l}:
a product of a change at one tensor with the sensitivity of another, which is not the first-order effect
of that change. This module uses the output for every node; ``integration="hannamw"`` uses the MLP's input
(``blocks.{l}.ln2.hook_in``, the copy read only by the MLP), as the reference.

Evaluation (:func:`evaluate_edge_masks`): every downstream input is interchange-patched edge by edge,

    in_v = in_v(this run) - sum_u (1 - mask_uv) (a_u(this run) - a_u(corrupted run)),

the reference's ``evaluate_graph``, on (mask, example) pairs in one batched pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from certified_circuits.language.eap_ig import metric_per_example
from certified_circuits.language.forward import last_positions
from certified_circuits.language.graph import EAPGraph
from certified_circuits.language.methods import check_method, method_spec
from certified_circuits.language.methods import METHODS as METHOD_SPECS
from certified_circuits.language.tokenizer import EncodedBatch

#: the registered method names (:data:`~.methods.METHODS`: hannamw/EAP-IG's, grad-x-act and CEAP)
METHODS = tuple(METHOD_SPECS)
INPUT_HOOK = "blocks.0.hook_resid_pre"


def method_points(method: str, ig_steps: int, integration: str = "reference", level: str = "edge") -> list[float]:
    """The input-interpolation points alpha of an input method (0 = corrupted, 1 = clean).

    Args:
        method: a registered method (:mod:`.methods`): ``EAP`` ([1]), ``EAP-IG-inputs``
            (:func:`~.methods.integration_points`), ``clean-corrupted`` ([1, 0]), ``grad-x-act`` ([1]);
            ``EAP-IG-activations`` interpolates node outputs instead and raises here.
        ig_steps, integration, level: the IG points of ``EAP-IG-inputs`` (``"hannamw"`` reads the level).

    Returns:
        The list of alphas; the score averages the gradients over them.
    """
    spec = method_spec(method)
    if spec.interpolates == "activations":
        raise ValueError(f"{method} does not interpolate the input")
    return spec.points(ig_steps, integration, level)


def trainable_position_embedding(bridge) -> bool:
    """Whether the model adds a learned absolute position embedding to the token embedding before layer 0
    (TransformerLens ``positional_embedding_type == "standard"``: GPT-2; rotary families: False). In the
    reference's ``EAP-IG-activations`` this parameter is the only way autograd reaches the inputs fed by the
    constant interpolated embedding (module docstring)."""
    return getattr(bridge.cfg, "positional_embedding_type", None) == "standard"


def input_only_inputs(graph: EAPGraph) -> np.ndarray:
    """bool [n_down]: the downstream inputs whose only parent is the ``input`` node (every layer-0 head's
    q/k/v input; with parallel attention and MLP also the layer-0 MLP's)."""
    return graph.valid[0] & (graph.valid.sum(0) == 1)


def hook_names(graph: EAPGraph) -> tuple[list[str], list[str]]:
    """(out hooks, in hooks) of the graph, in forward order (module docstring).

    Returns:
        ``out``: the input hook, then per layer the attention result and MLP output hooks;
        ``in``: per layer the q, k, v input and MLP input hooks, then the logits' ``hook_resid_post``.
    """
    out, inp = [INPUT_HOOK], []
    for l in range(graph.n_layers):
        out += [f"blocks.{l}.attn.hook_result", f"blocks.{l}.hook_mlp_out"]
        inp += [f"blocks.{l}.hook_{x}_input" for x in "qkv"] + [f"blocks.{l}.{graph.mlp_input_hook}"]
    inp.append(f"blocks.{graph.n_layers - 1}.hook_resid_post")
    return out, inp


def _up_slot(graph: EAPGraph, hook_index: int) -> slice:
    """Upstream node indices written by out hook ``hook_index`` (input, then heads / MLP per layer)."""
    if hook_index == 0:
        return slice(0, 1)
    l, is_mlp = divmod(hook_index - 1, 2)
    base = 1 + l * (graph.n_heads + 1)
    return slice(base + graph.n_heads, base + graph.n_heads + 1) if is_mlp else slice(base, base + graph.n_heads)


def _as_nodes(x: torch.Tensor) -> torch.Tensor:
    """A hook activation as [B, n, P, d] upstream nodes ([B, P, H, d] heads or [B, P, d])."""
    return x.permute(0, 2, 1, 3) if x.dim() == 4 else x[:, None]


def _forward(bridge, tokens: torch.Tensor, hooks: list[tuple[str, Callable]]) -> torch.Tensor:
    with bridge.hooks(fwd_hooks=hooks):
        return bridge(tokens)


def node_outputs(bridge, graph: EAPGraph, tokens: torch.Tensor, *, with_resid_post: bool = False):
    """Upstream node outputs [B, n_up, P, d] of one plain run (and ``resid_post(L-1)`` [B, P, d] if asked)."""
    out_names, in_names = hook_names(graph)
    acts: list[torch.Tensor | None] = [None] * len(out_names)
    resid: list[torch.Tensor] = []

    def keep(i):
        def fn(x, hook):
            acts[i] = _as_nodes(x.detach())
            return x
        return fn

    hooks = [(n, keep(i)) for i, n in enumerate(out_names)]
    if with_resid_post:
        hooks.append((in_names[-1], lambda x, hook: resid.append(x.detach()) or x))
    with torch.no_grad():
        _forward(bridge, tokens, hooks)
    nodes = torch.cat(acts, 1)
    return (nodes, resid[0]) if with_resid_post else nodes


def _downstream(grads: Sequence[torch.Tensor], graph: EAPGraph) -> torch.Tensor:
    """In-hook gradients in the graph's downstream order [B, n_down, P, d] (per head: q, k, v; MLP; logits)."""
    parts = []
    for l in range(graph.n_layers):
        q, k, v = grads[4 * l: 4 * l + 3]                                           # [B, P, H, d] each
        qkv = torch.stack([q, k, v], 3)                                            # [B, P, H, 3, d]
        b, p, h, _, d = qkv.shape
        parts.append(qkv.permute(0, 2, 3, 1, 4).reshape(b, 3 * h, p, d))
        parts.append(grads[4 * l + 3][:, None])
    parts.append(grads[-1][:, None])
    return torch.cat(parts, 1)


def edge_scores(diff: torch.Tensor, grad: torch.Tensor, graph: EAPGraph) -> torch.Tensor:
    """Per-example edge scores [B, E] from activation differences [B, n_up, P, d] and downstream
    gradients [B, n_down, P, d]: the dot product over positions and dimensions, valid edges, canonical order."""
    eu = torch.as_tensor(graph.edge_up, device=diff.device)
    ed = torch.as_tensor(graph.edge_down, device=diff.device)
    dense = torch.einsum("bupd,bnpd->bun", diff, grad)
    return dense[:, eu, ed]


class _GradPass:
    """One forward with hooks that (optionally) replace some outputs and keep the tensors to differentiate."""

    def __init__(self, bridge, graph: EAPGraph, level: str, mlp_node_gradient: str = "output"):
        self.bridge, self.graph, self.level = bridge, graph, level
        self.out_names, self.in_names = hook_names(graph)
        # node level, the reference's MLP rule: the gradient at the MLP's input copy (module docstring)
        self.mlp_in = ({2 + 2 * l: f"blocks.{l}.ln2.hook_in" for l in range(graph.n_layers)}
                       if level == "node" and mlp_node_gradient == "input" else {})

    def grads(self, tokens: torch.Tensor, lengths: torch.Tensor, answer: torch.Tensor, distractor: torch.Tensor,
              replace: dict[str, torch.Tensor]) -> torch.Tensor:
        """dM/d(in hooks) [B, n_down, P, d] (edge level) or dM/d(out hooks) [B, n_up, P, d] (node level)."""
        return self.grads_and_nodes(tokens, lengths, answer, distractor, replace, keep_nodes=False)[0]

    def grads_and_nodes(self, tokens: torch.Tensor, lengths: torch.Tensor, answer: torch.Tensor,
                        distractor: torch.Tensor, replace: dict[str, torch.Tensor], *, keep_nodes: bool = True
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`grads`, and (``keep_nodes``) the node outputs [B, n_up, P, d] of the same forward, detached:
        what flows on from each out hook, so a replaced output (the interpolated input) is recorded as replaced."""
        kept: dict[str, torch.Tensor] = {}
        seen: list[torch.Tensor | None] = [None] * len(self.out_names)
        names = self.in_names if self.level == "edge" else self.out_names + list(self.mlp_in.values())
        record = {n: i for i, n in enumerate(self.out_names)} if keep_nodes else {}

        def hook(name):
            def fn(x, hook):
                if name in replace:
                    x = replace[name].clone().requires_grad_(True)
                if name in record:
                    seen[record[name]] = _as_nodes(x.detach())
                if name in names:
                    # a copy that feeds only what follows the hook point (module docstring)
                    x = x.clone() if x.requires_grad else x.detach().requires_grad_(True)
                    kept[name] = x
                return x
            return fn

        hooked = dict.fromkeys(list(replace) + names + list(record))
        with torch.enable_grad():
            logits = _forward(self.bridge, tokens, [(n, hook(n)) for n in hooked])
            metric = metric_per_example(last_positions(logits, lengths), answer, distractor).sum()
            grads = torch.autograd.grad(metric, [kept[n] for n in names], allow_unused=True)
        grads = [torch.zeros_like(kept[n]) if g is None else g for n, g in zip(names, grads)]
        nodes = torch.cat(seen, 1) if keep_nodes else None     # type: ignore[arg-type]
        if self.level == "edge":
            return _downstream(grads, self.graph), nodes
        by_name = dict(zip(names, grads))
        return torch.cat([_as_nodes(by_name[self.mlp_in.get(i, n)]) for i, n in enumerate(self.out_names)], 1), nodes


def scores_batch(bridge, graph: EAPGraph, clean: torch.Tensor, corrupted: torch.Tensor, lengths: torch.Tensor,
                 answer: torch.Tensor, distractor: torch.Tensor, *, method: str = "EAP-IG-inputs", level: str = "edge",
                 ig_steps: int = 5, integration: str = "reference") -> torch.Tensor:
    """Signed per-example scores of one batch: [B, E] edges or [B, n_up - 1] heads and MLPs (module docstring).

    Args:
        bridge: a TransformerBridge with the EAP hook points (:func:`~.models.check_hook_points`).
        graph: its EAP graph.
        clean, corrupted: token ids [B, P], right-padded, the two prompts of an example of equal length.
        lengths: real lengths [B]; the metric reads position ``lengths - 1``.
        answer, distractor: the metric's token ids [B].
        method, level, ig_steps: module docstring.
        integration: the convention (:class:`~.methods.Convention`): ``"reference"`` (default) or
            ``"endpoint"``, or ``"hannamw"`` for the reference's code (module docstring).

    Returns:
        float tensor [B, n_components] in canonical order.
    """
    spec = check_method(method, level, ig_steps, integration)
    conv = spec.convention(level, ig_steps, integration)
    clean_nodes = node_outputs(bridge, graph, clean)
    corr_nodes = node_outputs(bridge, graph, corrupted) if spec.needs_corrupted else None
    gp = _GradPass(bridge, graph, level, conv.mlp_node_gradient)
    if spec.conductance:
        return _conductance(gp, spec.factor_for(integration), conv.points, clean_nodes, corr_nodes, clean, lengths,
                            answer, distractor)
    diff = spec.factor(clean_nodes, corr_nodes)                                    # [B, n_up, P, d]
    grad_sum, n_points = None, 0

    def add(g):
        nonlocal grad_sum, n_points
        grad_sum = g if grad_sum is None else grad_sum + g
        n_points += 1

    if spec.interpolates == "activations":
        # the reference's constant input interpolation: no gradient at inputs fed only by it (module docstring)
        cut = (torch.as_tensor(input_only_inputs(graph), device=clean.device)
               if level == "edge" and conv.input_gradient == "trainable-position"
               and not trainable_position_embedding(bridge) else None)
        for i, name in enumerate(gp.out_names):
            sl = _up_slot(graph, i)
            c, k = clean_nodes[:, sl], corr_nodes[:, sl]                           # [B, n, P, d]
            for a in conv.points:
                mixed = a * c + (1 - a) * k
                act = mixed[:, 0] if i == 0 or (i % 2 == 0) else mixed.permute(0, 2, 1, 3)
                g = gp.grads(clean, lengths, answer, distractor, {name: act})
                if i == 0 and cut is not None:
                    g[:, cut] = 0
                add(g)
    elif corr_nodes is None:                   # no corrupted run: the clean input only (grad-x-act)
        for _ in conv.points:
            add(gp.grads(clean, lengths, answer, distractor, {}))
    else:
        x_clean, x_corr = clean_nodes[:, 0], corr_nodes[:, 0]
        for a in conv.points:
            add(gp.grads(clean, lengths, answer, distractor, {INPUT_HOOK: x_corr + a * (x_clean - x_corr)}))
    with torch.no_grad():
        grad_mean = grad_sum / n_points
        if level == "edge":
            return edge_scores(diff, grad_mean, graph)
        return torch.einsum("bupd,bupd->bu", diff, grad_mean)[:, 1:]


def _conductance(gp: _GradPass, step, points: Sequence[float], clean_nodes: torch.Tensor, corr_nodes: torch.Tensor,
                 clean: torch.Tensor, lengths: torch.Tensor, answer: torch.Tensor, distractor: torch.Tensor
                 ) -> torch.Tensor:
    """CEAP's scores (module docstring): sum over the points alpha_k of step(z(k), z(k-1)) . the gradient of pass k,
    [B, E] edges or [B, n_up - 1] nodes; z(0) = the corrupted run's node outputs."""
    x_clean, x_corr = clean_nodes[:, 0], corr_nodes[:, 0]
    previous, total = corr_nodes, None
    for a in points:
        g, current = gp.grads_and_nodes(clean, lengths, answer, distractor, {INPUT_HOOK: x_corr + a * (x_clean - x_corr)})
        with torch.no_grad():
            term = step(current, previous)
            s = (edge_scores(term, g, gp.graph) if gp.level == "edge"
                 else torch.einsum("bupd,bupd->bu", term, g)[:, 1:])
            total = s if total is None else total + s
            previous = current
    return total


def attribution_scores(bridge, graph: EAPGraph, batch: EncodedBatch, *, method: str = "EAP-IG-inputs",
                       level: str = "edge", ig_steps: int = 5, integration: str = "reference", batch_size: int = 16,
                       device: str | torch.device = "cpu", progress: bool = True) -> np.ndarray:
    """Per-example scores of every component, float32 [n_examples, n_components], in batches.

    Args:
        bridge, graph: the model and its EAP graph.
        batch: encoded prompts (:func:`~.tokenizer.encode_examples`).
        method, level, ig_steps, integration: :func:`scores_batch`.
        batch_size: examples per forward pass.
        device: where the bridge lives.
        progress: a tqdm bar on stderr.

    Returns:
        Signed scores; edges in canonical order, or heads and MLPs in forward order.
    """
    check_method(method, level, ig_steps, integration)
    n = len(batch.ids)
    width = graph.n_edges if level == "edge" else len(graph.upstream) - 1
    out = np.empty((n, width), dtype=np.float32)
    for s in tqdm(range(0, n, batch_size), desc=method, unit="batch", disable=not progress, file=sys.stderr):
        sl = slice(s, min(s + batch_size, n))
        lengths = torch.as_tensor(batch.lengths[sl], device=device)
        p = int(lengths.max())

        def t(a):
            return torch.as_tensor(a, device=device)

        out[sl] = scores_batch(bridge, graph, t(batch.clean[sl, :p]), t(batch.corrupted[sl, :p]), lengths,
                               t(batch.answer[sl]), t(batch.distractor[sl]), method=method, level=level,
                               ig_steps=ig_steps, integration=integration).float().cpu().numpy()
    return out


@dataclass
class _Patch:
    """State of one patched forward: node differences of this run against the corrupted run."""

    patched: torch.Tensor      # float [B, n_up, n_down]: 1 = edge outside the circuit (carries the corrupted run)
    corrupted: torch.Tensor    # [B, n_up, P, d]
    diff: torch.Tensor         # [B, n_up, P, d], filled as the forward proceeds


def patched_logits(bridge, graph: EAPGraph, tokens: torch.Tensor, lengths: torch.Tensor, corrupted_nodes: torch.Tensor,
                   masks: torch.Tensor) -> torch.Tensor:
    """Last-position logits [B, V] of circuits: edges with mask 0 carry the corrupted activation.

    Args:
        bridge, graph: the model and its EAP graph.
        tokens: clean token ids [B, P] (one row per (mask, example) pair).
        lengths: real lengths [B].
        corrupted_nodes: the corrupted run's node outputs [B, n_up, P, d], row-aligned with ``tokens``.
        masks: float [B, n_up, n_down] dense edge masks (invalid pairs ignored).

    Returns:
        Logits at position ``lengths - 1`` (module docstring's patching rule).
    """
    out_names, in_names = hook_names(graph)
    st = _Patch(1.0 - masks, corrupted_nodes, torch.zeros_like(corrupted_nodes))
    H = graph.n_heads

    def out_hook(i):
        sl = _up_slot(graph, i)

        def fn(x, hook):
            st.diff[:, sl] = _as_nodes(x) - st.corrupted[:, sl]
            return x
        return fn

    def in_hook(j):
        l, kind = divmod(j, 4)
        if j == len(in_names) - 1:
            cols, n_up = [st.patched.shape[2] - 1], len(graph.upstream)
        elif kind < 3:
            base = l * (3 * H + 1)
            cols, n_up = [base + 3 * h + kind for h in range(H)], 1 + l * (H + 1)
        else:
            cols = [l * (3 * H + 1) + 3 * H]
            n_up = 1 + l * (H + 1) + (0 if graph.parallel_attn_mlp else H)

        def fn(x, hook):   # a new tensor: the patch reaches only what follows the hook point
            off = torch.einsum("bun,bupd->bpnd", st.patched[:, :n_up, cols], st.diff[:, :n_up])   # [B, P, n, d]
            return x - (off if x.dim() == 4 else off[:, :, 0])
        return fn

    hooks = [(n, out_hook(i)) for i, n in enumerate(out_names)] + [(n, in_hook(j)) for j, n in enumerate(in_names)]
    with torch.no_grad():
        logits = _forward(bridge, tokens, hooks)
    return last_positions(logits, lengths)


def plain_logits(bridge, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Last-position logits [B, V] of the unpatched model."""
    with torch.no_grad():
        return last_positions(bridge(tokens), lengths)


class BridgeGraphModel:
    """The circuit-evaluation operations of :mod:`.patching` on a TransformerBridge (any family).

    The GPT-2 decomposed forward offers the same four operations (:class:`~.patching.DecomposedGraphModel`),
    so :func:`~.patching.evaluate_edge_masks` runs one batching loop for both.
    """

    def __init__(self, bridge, graph: EAPGraph):
        self.bridge, self.graph = bridge, graph
        self.device = next(iter(bridge.parameters())).device
        self.d_model = int(bridge.cfg.d_model)
        self.d_vocab = int(bridge.cfg.d_vocab)

    def plain_logits(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Last-position logits [B, V] of the unpatched model."""
        return plain_logits(self.bridge, tokens, lengths)

    def corrupted_cache(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The corrupted run's node outputs [e, n_up, P, d]."""
        return node_outputs(self.bridge, self.graph, tokens)

    def patched_group_logits(self, clean: torch.Tensor, lengths: torch.Tensor, cache: torch.Tensor,
                             masks: torch.Tensor) -> torch.Tensor:
        """Logits [m, e, V] of m dense masks [m, n_up, n_down] on the same e prompts."""
        m, e = masks.shape[0], clean.shape[0]
        rep = masks.repeat_interleave(e, 0)
        logits = patched_logits(self.bridge, self.graph, clean.repeat(m, 1), lengths.repeat(m),
                                cache.repeat(m, 1, 1, 1), rep)
        return logits.view(m, e, -1)

    def pair_bytes(self, n_positions: int) -> int:
        """Estimated peak bytes of one (mask, prompt) pair: node differences and their corrupted copy, the
        per-head q/k/v copies (and their patch terms), MLP hidden states and the logits of every position."""
        g, p, d = self.graph, int(n_positions), self.d_model
        elements = 3 * len(g.upstream) * p * d + 9 * g.n_heads * p * d + 8 * p * d + p * self.d_vocab
        return int(elements * 4)

    def cache_bytes(self, n_positions: int) -> int:
        """Bytes of one prompt's corrupted cache."""
        return int(len(self.graph.upstream) * int(n_positions) * self.d_model * 4)
