"""EAP-IG exactly as the reference (hannamw/EAP-IG, ``get_scores_eap_ig``) computes it (issue 9).

The reference's semantics, restated from its code (``src/eap/attribute.py``, ``utils.py``, ``graph.py``):

* nodes (forward side): ``input`` = ``hook_embed`` (token embedding; the position embedding is a constant of
  the residual, like the attention output bias), ``a{l}.h{h}`` = ``blocks.{l}.attn.hook_result`` (per head,
  without b_O), ``m{l}`` = ``blocks.{l}.hook_mlp_out``;
* inputs (backward side): ``blocks.{l}.hook_{q,k,v}_input`` (``use_split_qkv_input``: one copy of
  resid_pre per head and letter, read only by that head), ``blocks.{l}.hook_mlp_in`` (``use_hook_mlp_in``:
  a copy of resid_mid read only by ln_2 and the MLP; the residual continues from resid_mid) and
  ``blocks.{L-1}.hook_resid_post`` for ``logits``;
* score(u -> v) = sum over batch, positions and d_model of (a_u(corrupted) - a_u(clean)) * grad_v, the
  gradient of the metric at the input x_k = x_corr + (k/m)(x_clean - x_corr) of the ``input`` node, summed
  over k = 0..m-1 (``for step in range(0, steps)``), then divided by m and the number of examples.

Per example (a per-example, summed metric), that is the project's row. Tests here:

(a) :func:`test_project_matches_independent_reference` — an implementation written from scratch below (plain
    torch autograd on the HF module's parameters, one example at a time, no padding, explicit LayerNorm and
    tanh-GELU) against ``eap_ig_batch`` / ``eap_ig_scores`` for every edge, in float64, 3 layers (so
    MLP-bound edges from earlier layers exist), on mixed-length prompts. The test also checks that the
    bug of issue 9 (residual continuing from the MLP-input tensor: every u -> m_l also scoring u's edges into
    all later inputs) would be caught by orders of magnitude.
(b) :func:`test_bridge_hooks_match_project` — the reference algorithm run through TransformerLens'
    ``TransformerBridge`` hook points (forward hooks on ``hook_embed`` / ``attn.hook_result`` /
    ``hook_mlp_out``, the interpolation written into ``hook_embed`` as the reference does, backward hooks on
    ``hook_{q,k,v}_input`` / ``hook_mlp_in`` / ``hook_resid_post``): gradients at every input and every
    edge's score equal the project's. The bridge can do this (TransformerLens 4.3: ``hook_mlp_in`` is a
    forward-pre-hook on ln_2, so its output feeds only the MLP branch; the split q/k/v inputs are per-head
    forks of the pre-ln_1 residual).
(c) :func:`test_integration_conventions` — "reference" (k = 0..m-1, default) and "endpoint" (k = 1..m,
    the old behaviour) differ, each equals the independent implementation with its k range, and their
    difference is (S(clean end) - S(corrupted end)) / m; bad values raise ValueError.
(d) :func:`test_reference_one_step_matches_patching_at_corrupted_end` — with m = 1 the reference takes the
    gradient at the corrupted input: every MLP-bound edge's score equals minus the finite difference of
    patching that edge (the patched forward builds each input from node outputs, so it never had the bug).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from certified_circuits.language.eap_ig import eap_ig_batch, eap_ig_scores, integration_points, metric_per_example
from certified_circuits.language.forward import GPT2Weights, flat_inputs, run
from certified_circuits.language.graph import build_graph, edge_names
from certified_circuits.language.models import _bundle, build_model, tiny_config

N_LAYER, N_HEAD, N_EMBD = 3, 2, 16


def _model(word_tok, seed: int = 7):
    """Tiny random GPT-2 in float64 with weights spread wider than GPT-2's init (std 0.02 gives near-uniform
    attention and tiny MLP outputs, which would make every score small and the check weak)."""
    model = build_model(tiny_config(word_tok.vocab_size, n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD,
                                    n_positions=96), seed=seed).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            if ".ln_" in name or "ln_f" in name:
                p.copy_((1.0 + 0.1 * noise) if name.endswith("weight") else 0.1 * noise)
            elif p.dim() >= 2:
                p.copy_(0.3 * noise)
            else:
                p.copy_(0.1 * noise)
    return model


# ----------------------------------------------------------------------------------------------------------
# (a) an independent implementation of the reference's semantics
# ----------------------------------------------------------------------------------------------------------

def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def _gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class ReferenceEAPIG:
    """EAP-IG on one unpadded example, from the HF module's parameters (Conv1D weights are [in, out])."""

    def __init__(self, hf):
        cfg = hf.config
        assert cfg.activation_function == "gelu_new"
        self.L, self.H, self.d = cfg.n_layer, cfg.n_head, cfg.n_embd
        self.dh = self.d // self.H
        self.eps = cfg.layer_norm_epsilon
        t = hf.transformer
        self.wte, self.wpe = t.wte.weight.detach(), t.wpe.weight.detach()
        self.blocks = [{k: v.detach() for k, v in b.named_parameters()} for b in t.h]
        self.lnf_w, self.lnf_b = t.ln_f.weight.detach(), t.ln_f.bias.detach()
        self.unembed = hf.lm_head.weight.detach()                 # [V, d]

    # graph ------------------------------------------------------------------------------------------
    def heads(self, l):
        return [f"a{l}.h{h}" for h in range(self.H)]

    def edges(self) -> list[tuple[str, str]]:
        """(u, v) pairs: u is any node computed before v reads the residual stream."""
        out = []
        before = ["input"]
        for l in range(self.L):
            for name in self.heads(l):
                for letter in "qkv":
                    out += [(u, f"{name}<{letter}>") for u in before]
            before = before + self.heads(l)
            out += [(u, f"m{l}") for u in before]
            before = before + [f"m{l}"]
        out += [(u, "logits") for u in before]
        return out

    # forward ----------------------------------------------------------------------------------------
    def forward(self, embed: torch.Tensor):
        """From the ``input`` node (token embedding, [P, d]): logits [P, V], node outputs, input copies."""
        P, d, dh = embed.shape[0], self.d, self.dh
        acts = {"input": embed}
        inputs = {}
        resid = embed + self.wpe[:P]                               # hook_pos_embed: a constant, not a node
        future = torch.ones(P, P, dtype=torch.bool).triu(1)
        for l, p in enumerate(self.blocks):
            outs = []
            for h in range(self.H):
                proj = []
                for j, letter in enumerate("qkv"):
                    x = resid.clone()                              # hook_{letter}_input[:, :, h]: feeds this head only
                    inputs[f"a{l}.h{h}<{letter}>"] = x
                    cols = slice(j * d + h * dh, j * d + (h + 1) * dh)
                    xn = _layer_norm(x, p["ln_1.weight"], p["ln_1.bias"], self.eps)
                    proj.append(xn @ p["attn.c_attn.weight"][:, cols] + p["attn.c_attn.bias"][cols])
                q, k, v = proj
                s = (q @ k.T) / math.sqrt(dh)
                pattern = torch.softmax(s.masked_fill(future, float("-inf")), dim=-1)
                a = (pattern @ v) @ p["attn.c_proj.weight"][h * dh:(h + 1) * dh]   # hook_result, no b_O
                acts[f"a{l}.h{h}"] = a
                outs.append(a)
            resid_mid = resid + sum(outs) + p["attn.c_proj.bias"]
            x = resid_mid.clone()                                  # hook_mlp_in: feeds the MLP only
            inputs[f"m{l}"] = x
            hidden = _gelu_new(_layer_norm(x, p["ln_2.weight"], p["ln_2.bias"], self.eps) @ p["mlp.c_fc.weight"]
                               + p["mlp.c_fc.bias"])
            mlp = hidden @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]
            acts[f"m{l}"] = mlp
            resid = resid_mid + mlp                                # the residual carries on from resid_mid
        x = resid.clone()                                          # blocks.{L-1}.hook_resid_post
        inputs["logits"] = x
        logits = _layer_norm(x, self.lnf_w, self.lnf_b, self.eps) @ self.unembed.T
        return logits, acts, inputs

    # scores -----------------------------------------------------------------------------------------
    def gradients(self, clean, corrupted, answer, distractor, k: float):
        """d metric / d in_v for every input v at x = x_corr + k (x_clean - x_corr)."""
        e_clean, e_corr = self.wte[clean], self.wte[corrupted]
        e = (e_corr + k * (e_clean - e_corr)).detach().requires_grad_(True)
        logits, _, inputs = self.forward(e)
        metric = logits[-1, answer] - logits[-1, distractor]
        names = list(inputs)
        return dict(zip(names, torch.autograd.grad(metric, [inputs[n] for n in names])))

    def scores(self, clean, corrupted, answer, distractor, m: int, ks) -> dict[str, float]:
        """{edge name: (a_u(corr) - a_u(clean)) . (1/m) sum_{k in ks} grad_v(x_k)} for one example."""
        with torch.no_grad():
            _, a_clean, _ = self.forward(self.wte[clean])
            _, a_corr, _ = self.forward(self.wte[corrupted])
        total = None
        for k in ks:
            g = self.gradients(clean, corrupted, answer, distractor, k / m)
            total = g if total is None else {v: total[v] + g[v] for v in total}
        out = {}
        for u, v in self.edges():
            name = f"{u}->{v}"
            out[name] = float(((a_corr[u] - a_clean[u]) * total[v]).sum() / m)
        return out

    def score_matrix(self, batch, m: int, ks) -> tuple[list[str], np.ndarray]:
        names = [f"{u}->{v}" for u, v in self.edges()]
        rows = []
        for i in range(len(batch.ids)):
            n = int(batch.lengths[i])
            s = self.scores(torch.as_tensor(batch.clean[i, :n]), torch.as_tensor(batch.corrupted[i, :n]),
                            int(batch.answer[i]), int(batch.distractor[i]), m, ks)
            rows.append([s[e] for e in names])
        return names, np.array(rows)


def _reordered(names: list[str], mat: np.ndarray, L: int, H: int) -> np.ndarray:
    """Columns of ``mat`` (named ``names``) in the project's canonical edge order."""
    canonical = edge_names(L, H)
    assert sorted(names) == sorted(canonical) and len(set(names)) == len(names)
    col = {n: j for j, n in enumerate(names)}
    return mat[:, [col[n] for n in canonical]]


def _project(w, batch, m, integration="reference"):
    t = {k: torch.as_tensor(getattr(batch, k)) for k in ("clean", "corrupted", "lengths", "answer", "distractor")}
    return eap_ig_batch(w, t["clean"], t["corrupted"], t["lengths"], t["answer"], t["distractor"],
                        ig_steps=m, integration=integration).numpy()


@pytest.fixture(scope="module")
def ref_model(word_tok):
    hf = _model(word_tok)
    return ReferenceEAPIG(hf), GPT2Weights.from_hf(hf), hf


def _later_inputs_sum(scores: np.ndarray, L: int, H: int) -> np.ndarray:
    """The issue-9 bug's scores: u -> m_l plus u's edges into every input read after m_l."""
    names = edge_names(L, H)
    col = {n: j for j, n in enumerate(names)}
    later = {f"m{l}": [f"a{l2}.h{h}<{c}>" for l2 in range(l + 1, L) for h in range(H) for c in "qkv"]
             + [f"m{l2}" for l2 in range(l + 1, L)] + ["logits"] for l in range(L)}
    buggy = scores.copy()
    for j, n in enumerate(names):
        u, v = n.split("->")
        if v in later:
            buggy[:, j] += sum(scores[:, col[f"{u}->{w}"]] for w in later[v])
    return buggy


def test_independent_forward_is_gpt2(ref_model, mixed_batch):
    """The from-scratch forward reproduces HF's logits (so it is GPT-2 and not a copy of the project's)."""
    ref, _, hf = ref_model
    for i in range(len(mixed_batch.ids)):
        n = int(mixed_batch.lengths[i])
        toks = torch.as_tensor(mixed_batch.clean[i, :n])
        with torch.no_grad():
            ours, _, _ = ref.forward(ref.wte[toks])
            theirs = hf(toks[None]).logits[0]
        torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)


def test_project_matches_independent_reference(ref_model, mixed_batch):
    ref, w, _ = ref_model
    L, H, m = N_LAYER, N_HEAD, 3
    names, mat = ref.score_matrix(mixed_batch, m, range(0, m))
    expected = _reordered(names, mat, L, H)
    assert expected.shape == (len(mixed_batch.ids), build_graph(L, H).n_edges)
    scale = np.abs(expected).max()
    assert scale > 1e-2
    got = _project(w, mixed_batch, m)                             # float64, batched and right-padded
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11 * scale)
    # the stored float32 rows (default integration) agree to float32 precision, in batches of any size
    stored = eap_ig_scores(w, mixed_batch, ig_steps=m, batch_size=4, progress=False)
    assert stored.dtype == np.float32
    np.testing.assert_allclose(stored, expected, rtol=1e-5, atol=1e-6 * scale)
    # MLP-bound edges from earlier layers exist, and the issue-9 bug would move them far beyond tolerance
    mlp_cols = [j for j, n in enumerate(edge_names(L, H)) if n.split("->")[1].startswith("m")
                and n.split("->")[0] != "input" and int(n.split("->")[0][1]) < int(n.split("->")[1][1])]
    assert len(mlp_cols) > 0
    buggy = _later_inputs_sum(expected, L, H)
    assert np.abs(buggy - expected)[:, mlp_cols].max() > 1e-2 * scale


# ----------------------------------------------------------------------------------------------------------
# (b) the same through TransformerBridge hook points
# ----------------------------------------------------------------------------------------------------------

def _bridge_eap_ig(bridge, batch, L, H, m):
    """The reference algorithm on the bridge: per-example scores {edge: [B]} and summed input gradients."""
    clean, corr = torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted)
    lengths = torch.as_tensor(batch.lengths)
    ans, dis = torch.as_tensor(batch.answer), torch.as_tensor(batch.distractor)
    node_hooks = {"input": "hook_embed"}
    for l in range(L):
        for h in range(H):
            node_hooks[f"a{l}.h{h}"] = f"blocks.{l}.attn.hook_result"
        node_hooks[f"m{l}"] = f"blocks.{l}.hook_mlp_out"

    def activations(tokens):
        store = {}

        def keeper(name):                       # keyed by the name asked for (hook.name may be the alias target)
            def keep(act, hook):
                store[name] = act.detach().clone()
            return keep

        with torch.no_grad(), bridge.hooks(fwd_hooks=[(n, keeper(n)) for n in sorted(set(node_hooks.values()))]):
            bridge(tokens)
        return store

    a_clean, a_corr = activations(clean), activations(corr)

    def node_diff(u):                                                   # corrupted - clean, [B, P, d]
        hook = node_hooks[u]
        diff = a_corr[hook] - a_clean[hook]
        return diff[:, :, int(u.split(".h")[1])] if ".h" in u else diff

    input_hooks = {"logits": f"blocks.{L - 1}.hook_resid_post"}
    for l in range(L):
        for h in range(H):
            for c in "qkv":
                input_hooks[f"a{l}.h{h}<{c}>"] = (f"blocks.{l}.hook_{c}_input", h)
        input_hooks[f"m{l}"] = f"blocks.{l}.hook_mlp_in"
    grad_sum: dict[str, torch.Tensor] = {}

    def collector(name):
        def collect(grad, hook):
            g = grad.detach()
            grad_sum[name] = grad_sum[name] + g if name in grad_sum else g.clone()
        return collect

    bwd = sorted({h if isinstance(h, str) else h[0] for h in input_hooks.values()})
    e_clean, e_corr = a_clean["hook_embed"], a_corr["hook_embed"]
    for step in range(0, m):                                            # the reference's range(0, steps)
        def interpolate(act, hook, k=step):
            return (e_corr + (k / m) * (e_clean - e_corr)).requires_grad_(True)

        with bridge.hooks(fwd_hooks=[("hook_embed", interpolate)], bwd_hooks=[(n, collector(n)) for n in bwd]):
            logits = bridge(clean)
            metric_per_example(logits[torch.arange(len(lengths)), lengths - 1], ans, dis).sum().backward()

    def input_grad(v):
        spec = input_hooks[v]
        return grad_sum[spec[0]][:, :, spec[1]] if isinstance(spec, tuple) else grad_sum[spec]

    names = edge_names(L, H)
    scores = np.stack([torch.einsum("bpd,bpd->b", node_diff(n.split("->")[0]), input_grad(n.split("->")[1])).numpy()
                       for n in names], 1) / m
    return scores, {v: input_grad(v) for v in input_hooks}


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_bridge_hooks_match_project(word_tok, mixed_batch):
    hf = _model(word_tok, seed=11)
    lm = _bundle("ref", hf, word_tok, with_bridge=True)               # reads weights, then wraps in place
    assert lm.bridge.cfg.use_split_qkv_input and lm.bridge.cfg.use_hook_mlp_in and lm.bridge.cfg.use_attn_result
    w, L, H, m = lm.weights, N_LAYER, N_HEAD, 2
    bridge_scores, bridge_grads = _bridge_eap_ig(lm.bridge, mixed_batch, L, H, m)
    # the project's input gradients at the same points, summed over k = 0..m-1
    clean, corr = torch.as_tensor(mixed_batch.clean), torch.as_tensor(mixed_batch.corrupted)
    lengths = torch.as_tensor(mixed_batch.lengths)
    ans, dis = torch.as_tensor(mixed_batch.answer), torch.as_tensor(mixed_batch.distractor)
    total = 0
    for k in range(m):
        x = (w.embed(corr) + (k / m) * (w.embed(clean) - w.embed(corr))).requires_grad_(True)
        cache = run(w, x, lengths, keep_inputs=True)
        cache.inputs = list(torch.autograd.grad(metric_per_example(cache.logits_last, ans, dis).sum(), cache.inputs))
        total = total + flat_inputs(cache, H)                            # [B, n_down, P, d]
    downstream = build_graph(L, H).downstream
    gscale = max(float(g.abs().max()) for g in bridge_grads.values())
    for j, v in enumerate(downstream):
        torch.testing.assert_close(total[:, j], bridge_grads[v], rtol=1e-8, atol=1e-11 * gscale, msg=v)
    got = _project(w, mixed_batch, m)
    scale = np.abs(bridge_scores).max()
    np.testing.assert_allclose(got, bridge_scores, rtol=1e-8, atol=1e-11 * scale)


# ----------------------------------------------------------------------------------------------------------
# (c) the two integration conventions, (d) the k = 0 endpoint against patching
# ----------------------------------------------------------------------------------------------------------

def test_integration_conventions(ref_model, ioi_batch):
    ref, w, _ = ref_model
    L, H, m = N_LAYER, N_HEAD, 3
    assert integration_points(3) == [0.0, 1 / 3, 2 / 3]
    assert integration_points(3, "endpoint") == [1 / 3, 2 / 3, 1.0]
    reference = _project(w, ioi_batch, m)                                    # default
    endpoint = _project(w, ioi_batch, m, integration="endpoint")
    names, mat = ref.score_matrix(ioi_batch, m, range(1, m + 1))             # the old formula, k = 1..m
    old_formula = _reordered(names, mat, L, H)
    scale = np.abs(old_formula).max()
    np.testing.assert_allclose(endpoint, old_formula, rtol=1e-9, atol=1e-11 * scale)
    names, mat = ref.score_matrix(ioi_batch, m, range(0, m))
    np.testing.assert_allclose(reference, _reordered(names, mat, L, H), rtol=1e-9, atol=1e-11 * scale)
    assert np.abs(endpoint - reference).max() > 1e-3 * scale                # the conventions differ
    # endpoint - reference = (S at the clean end - S at the corrupted end) / m
    at_clean = _project(w, ioi_batch, 1, integration="endpoint")
    at_corr = _project(w, ioi_batch, 1, integration="reference")
    np.testing.assert_allclose(endpoint - reference, (at_clean - at_corr) / m, rtol=1e-8, atol=1e-11 * scale)
    for bad in ("Reference", "left", None, 1):
        with pytest.raises(ValueError, match="integration must be one of"):
            eap_ig_scores(w, ioi_batch, ig_steps=2, progress=False, integration=bad)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="ig_steps must be"):
            eap_ig_scores(w, ioi_batch, ig_steps=bad, progress=False)


def test_reference_one_step_matches_patching_at_corrupted_end(ref_model, ioi_batch):
    """m = 1, k = 0: score = (a(corr) - a(clean)) . grad at the corrupted input. Patching one edge of the
    corrupted run towards the clean run by eps moves in_v by eps (a_u(clean) - a_u(corr)), so the finite
    difference of the metric is minus the score; checked on every MLP-bound edge and a few others."""
    _, w, _ = ref_model
    g = w.graph
    scores = _project(w, ioi_batch, 1)
    clean, corr = torch.as_tensor(ioi_batch.clean), torch.as_tensor(ioi_batch.corrupted)
    lengths = torch.as_tensor(ioi_batch.lengths)
    ans, dis = torch.as_tensor(ioi_batch.answer), torch.as_tensor(ioi_batch.distractor)
    names = g.edge_names()
    picks = [j for j, n in enumerate(names) if n.split("->")[1].startswith("m")] + [0, 7, len(names) - 1]
    eps = 1e-6
    with torch.no_grad():
        clean_cache = run(w, w.embed(clean), lengths, keep_inputs=True)   # plays the "corrupted" side
        base = metric_per_example(run(w, w.embed(corr), lengths).logits_last, ans, dis)
        for j in picks:
            masks = torch.ones((len(lengths),) + g.valid.shape, dtype=torch.float64)
            masks[:, g.edge_up[j], g.edge_down[j]] = 1 - eps
            out = run(w, w.embed(corr), lengths, corrupted=clean_cache, masks=masks)
            fd = (metric_per_example(out.logits_last, ans, dis) - base) / eps
            np.testing.assert_allclose(-fd.numpy(), scores[:, j], rtol=1e-4, atol=1e-6 * np.abs(scores).max(),
                                       err_msg=names[j])
