"""EAP / EAP-IG through TransformerBridge hooks on random-weight models of five families (GPT-2,
Pythia/GPT-NeoX with parallel attention, Llama and Qwen2 with grouped-query attention, Gemma), each
saved as a local Hugging Face folder with a byte-level BPE made with ``tokenizers``.

Checked against:
* an independent, straightforward implementation of the reference's semantics (hannamw/EAP-IG): the
  activations from TransformerLens' own ``run_with_cache``, and for every downstream input v a separate
  forward that adds a zero perturbation to v alone and differentiates the metric with respect to it; the
  score of every edge is then the dot product, edge by edge, for every example;
* on GPT-2, the decomposed forward of :mod:`certified_circuits.language.forward` (scores and patching);
* the identity "node score = sum of its outgoing edges' scores" (every in-hook is a copy of the residual);
* exact rewrites: ungrouped GQA computes the original logits; a circuit of every edge is the full model and
  a circuit of no edge is the corrupted run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from certified_circuits.language import hooked
from certified_circuits.language.graph import n_edges_formula
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import encode_examples

from tests.helpers.family_fixtures import FAMILIES, ioi_prompt, save_family
from tests.helpers.independent_scores import straightforward_scores

pytestmark = pytest.mark.filterwarnings("ignore")
#: float32 scores of order 0.1-1: agreement to 2e-5 absolute (or 1e-4 relative)
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def family_models(tmp_path_factory) -> dict:
    from certified_circuits.language.models import load_hf_model

    root = tmp_path_factory.mktemp("families")
    return {f: load_hf_model(save_family(f, root / f)) for f in FAMILIES}


def _examples() -> list[Example]:
    return [
        Example("e0", "t", "train", ioi_prompt("Mary", "John", "John"), ioi_prompt("Anna", "Tom", "Lucy"), " Mary", " John"),
        Example("e1", "t", "train", ioi_prompt("Kate", "Paul", "Kate", "store", "book"),
                ioi_prompt("Mark", "Lucy", "Tom", "store", "book"), " Paul", " Kate"),
        Example("e2", "t", "train", ioi_prompt("Tom", "Lucy", "Lucy"), ioi_prompt("John", "Kate", "Mark"), " Tom", " Lucy"),
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_edge_scores_equal_a_straightforward_implementation(family_models, family) -> None:
    lm = family_models[family]
    g = lm.graph
    assert g.n_edges == n_edges_formula(2, 4, g.parallel_attn_mlp) == (110 - 8 if family == "pythia" else 110)
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    got = hooked.attribution_scores(lm.bridge, g, batch, method="EAP-IG-inputs", ig_steps=3, batch_size=2,
                                    progress=False)
    want = straightforward_scores(lm, batch, [0.0, 1 / 3, 2 / 3])
    assert sorted(want) == sorted(g.edge_names())           # the reference's edge set, GQA and parallel included
    want_matrix = np.stack([want[name] for name in g.edge_names()], 1)
    assert np.abs(want_matrix).max() > 1e-3                  # the scores are not trivially zero
    np.testing.assert_allclose(got, want_matrix, atol=ATOL, rtol=RTOL)


def test_family_flags(family_models) -> None:
    assert family_models["pythia"].graph.parallel_attn_mlp
    assert not family_models["llama"].graph.parallel_attn_mlp
    for family in ("llama", "qwen2", "gemma"):   # grouped-query attention was ungrouped
        cfg = family_models[family].hf.config
        assert cfg.num_key_value_heads == cfg.num_attention_heads == 4


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_ungrouped_gqa_computes_the_original_logits(tmp_path, family) -> None:
    from transformers import AutoModelForCausalLM

    from certified_circuits.language.models import _ungroup_gqa

    folder = save_family(family, tmp_path / family)
    original = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert original.config.num_key_value_heads < original.config.num_attention_heads
    ungrouped = _ungroup_gqa(original)
    tokens = torch.randint(1, 300, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        np.testing.assert_allclose(ungrouped(tokens).logits.numpy(), original(tokens).logits.numpy(), atol=1e-5)


@pytest.mark.parametrize("method", hooked.METHODS)
@pytest.mark.parametrize("family", ["gpt2", "pythia", "qwen2"])
def test_node_score_is_the_sum_of_its_outgoing_edges(family_models, family, method) -> None:
    lm = family_models[family]
    g = lm.graph
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    edges = hooked.attribution_scores(lm.bridge, g, batch, method=method, ig_steps=2, progress=False)
    nodes = hooked.attribution_scores(lm.bridge, g, batch, method=method, level="node", ig_steps=2, progress=False)
    assert nodes.shape == (3, 2 * 5)
    dense = np.zeros((3, len(g.upstream), g.valid.shape[1]))
    dense[:, g.edge_up, g.edge_down] = edges
    np.testing.assert_allclose(nodes, dense.sum(2)[:, 1:], atol=ATOL, rtol=RTOL)


def test_method_points_follow_the_reference() -> None:
    assert hooked.method_points("EAP", 5) == [1.0]
    assert hooked.method_points("clean-corrupted", 5) == [1.0, 0.0]
    assert hooked.method_points("EAP-IG-inputs", 4) == [0.0, 0.25, 0.5, 0.75]
    assert hooked.method_points("EAP-IG-inputs", 4, "endpoint") == [0.25, 0.5, 0.75, 1.0]
    # hannamw/EAP-IG's node code (attribute_node.py) integrates at k = 1..m, its edge code at 0..m-1
    assert hooked.method_points("EAP-IG-inputs", 4, "hannamw", "node") == [0.25, 0.5, 0.75, 1.0]
    assert hooked.method_points("EAP-IG-inputs", 4, "hannamw", "edge") == [0.0, 0.25, 0.5, 0.75]
    with pytest.raises(ValueError, match="EAP-IG-inputs"):
        hooked.check_method("EAP-IG", "edge", 5, "reference")
    with pytest.raises(ValueError, match="level"):
        hooked.check_method("EAP", "neuron", 5, "reference")


def test_activations_method_freezes_each_group_as_the_reference(family_models) -> None:
    """EAP-IG-activations with m = 1 sets each node group to its clean value (alpha = 1) in turn: the
    reference's hook returns ``alpha clean + (1 - alpha) corrupted``, so no gradient flows into the frozen
    group (it still flows from it: test_reference_parity.py). The logits' input lies after every group, so
    edges into the logits score exactly as EAP; an edge into a layer-0 head loses the paths through the
    frozen groups."""
    lm = family_models["llama"]
    g = lm.graph
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    eap = hooked.attribution_scores(lm.bridge, g, batch, method="EAP", progress=False)
    act = hooked.attribution_scores(lm.bridge, g, batch, method="EAP-IG-activations", ig_steps=1, progress=False)
    into_logits = np.array([n.endswith("->logits") for n in g.edge_names()])
    np.testing.assert_allclose(act[:, into_logits], eap[:, into_logits], atol=ATOL, rtol=RTOL)
    assert np.abs(act[:, ~into_logits] - eap[:, ~into_logits]).max() > 1e-3


def test_gpt2_hook_path_equals_the_decomposed_fast_path(tmp_path) -> None:
    """On GPT-2 the hook path (any family) and the decomposed forward give the same scores and circuits."""
    from certified_circuits.language.attribution import score_examples
    from certified_circuits.language.models import LanguageModel, load_hf_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.hooked import BridgeGraphModel
    from certified_circuits.language.patching import evaluate_edge_masks

    lm = load_hf_model(save_family("gpt2", tmp_path / "gpt2"))
    fast = LanguageModel("gpt2", lm.hf, lm.bridge, GPT2Weights.from_hf(lm.hf), lm.tokenizer)
    assert fast.graph.edge_names() == lm.graph.edge_names()
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    for method in ("EAP", "EAP-IG-inputs", "clean-corrupted"):
        a = score_examples(lm, batch, method=method, ig_steps=3, progress=False)
        b = score_examples(fast, batch, method=method, ig_steps=3, progress=False)
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=RTOL)
    rng = np.random.default_rng(0)
    masks = rng.uniform(size=(4, lm.graph.n_edges)) < np.array([0.0, 0.3, 0.7, 1.0])[:, None]
    got = evaluate_edge_masks(BridgeGraphModel(lm.bridge, lm.graph), batch, masks, max_batch=5, progress=False)
    want = evaluate_edge_masks(fast.weights, batch, masks, max_batch=5, progress=False)
    np.testing.assert_allclose(got.logit_diff, want.logit_diff, atol=1e-4)
    np.testing.assert_array_equal(got.correct, want.correct)


@pytest.mark.parametrize("family", ["pythia", "llama"])
def test_patching_every_edge_is_the_full_model_and_no_edge_the_corrupted_run(family_models, family) -> None:
    lm = family_models[family]
    g = lm.graph
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    clean, corr = torch.as_tensor(batch.clean), torch.as_tensor(batch.corrupted)
    lengths = torch.as_tensor(batch.lengths)
    cache = hooked.node_outputs(lm.bridge, g, corr)
    ones = torch.ones((3,) + g.valid.shape)
    full = hooked.plain_logits(lm.bridge, clean, lengths)
    np.testing.assert_allclose(hooked.patched_logits(lm.bridge, g, clean, lengths, cache, ones).numpy(),
                               full.numpy(), atol=1e-4)
    corrupted = hooked.plain_logits(lm.bridge, corr, lengths)
    np.testing.assert_allclose(hooked.patched_logits(lm.bridge, g, clean, lengths, cache, 0 * ones).numpy(),
                               corrupted.numpy(), atol=1e-4)
    assert float((full - corrupted).abs().max()) > 1e-2      # the two runs differ, so both checks bite


def test_node_circuits_patch_every_outgoing_edge(family_models) -> None:
    g = family_models["gpt2"].graph
    node_mask = np.zeros(len(g.upstream) - 1, dtype=bool)
    node_mask[g.upstream.index("a1.h2") - 1] = True
    edges = g.node_edge_mask(node_mask)
    kept = {name for name, k in zip(g.edge_names(), edges) if k}
    assert kept == {n for n in g.edge_names() if n.startswith(("input->", "a1.h2->"))}


def test_a_post_norm_model_is_refused(tmp_path) -> None:
    """Gemma-2's sandwich norms renormalise each block's output: no EAP graph; the error says so."""
    import transformers as tf

    from certified_circuits.language.models import load_hf_model

    from tests.helpers.family_fixtures import bpe_tokenizer

    tok = bpe_tokenizer()
    cfg = tf.Gemma2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    tf.Gemma2ForCausalLM(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="pre-norm residual"):
        load_hf_model(tmp_path)


def test_missing_hook_points_are_named() -> None:
    from types import SimpleNamespace

    from certified_circuits.language.models import check_hook_points

    names = {"blocks.0.hook_resid_pre": 0, "blocks.0.hook_resid_post": 0, "blocks.0.hook_q_input": 0}
    bridge = SimpleNamespace(cfg=SimpleNamespace(n_layers=1, architecture="ToyForCausalLM"), hook_dict=names)
    with pytest.raises(ValueError, match=r"ToyForCausalLM.*blocks\.0\.hook_k_input.*blocks\.0\.ln2\.hook_in"):
        check_hook_points(bridge)


def test_a_folder_without_config_is_refused(tmp_path: Path) -> None:
    from certified_circuits.language.models import load_hf_model

    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        load_hf_model(tmp_path)
