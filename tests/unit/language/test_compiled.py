"""The compiled induction model: its construction's exact facts, its verification and language-train --compiled."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from certified_circuits.cli.main import main
from certified_circuits.language import ground_truth as gt
from certified_circuits.language.compiled import N_POSITIONS, compile_induction, layout
from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.models import load_embedded
from certified_circuits.language.tasks import INDUCTION_SYMBOLS, generate_examples
from certified_circuits.language.tokenizer import encode_examples


@pytest.fixture(scope="module")
def compiled():
    torch.set_num_threads(1)
    return compile_induction(0)


def _pool(tok):
    return [tok.answer_id(w) for w in INDUCTION_SYMBOLS]


def test_mlps_output_zero_and_residual_zero_mean(compiled):
    model, tok, lay = compiled
    outs = []
    hooks = [b.mlp.register_forward_hook(lambda m, i, o: outs.append(o)) for b in model.transformer.h]
    ids = gt.repeated_random_tokens(_pool(tok), 4, 10, seed=5)
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    for h in hooks:
        h.remove()
    assert len(outs) == 2 and all(float(o.abs().max()) == 0.0 for o in outs)
    tr = model.transformer
    for rows in (tr.wte.weight, tr.wpe.weight, *(b.attn.c_proj.weight for b in tr.h)):
        assert float(rows.mean(dim=1).abs().max()) < 1e-6  # every row written into the residual is zero-mean
    for b in tr.h:
        assert abs(float(b.attn.c_proj.bias.mean())) < 1e-6
    assert all(float(x.mean(-1).abs().max()) < 1e-5 for x in hidden)  # so LayerNorm only rescales
    for ln in (tr.ln_f, *(b.ln_1 for b in tr.h)):
        assert torch.equal(ln.weight, torch.ones_like(ln.weight)) and float(ln.bias.abs().max()) == 0.0
    assert lay.d_model == 276 and model.config.n_positions == N_POSITIONS == 64
    assert not model.config.tie_word_embeddings
    assert not torch.equal(model.lm_head.weight, tr.wte.weight)


def test_planted_heads_attend_as_built(compiled):
    model, tok, lay = compiled
    half = 12
    ids = gt.repeated_random_tokens(_pool(tok), 50, half, seed=7)
    att = gt.attention_patterns(model, ids)  # [L, B, H, P, P]
    i = torch.arange(1, 2 * half)
    prev = att[0, :, lay.previous_token_head][:, i, i - 1]
    assert float(prev.min()) > 0.95  # P: every position, every sequence
    j = torch.arange(half, 2 * half)
    ind = att[1, :, lay.induction_head][:, j, j - half + 1]
    assert float(ind.min()) > 0.95  # I: the token after the previous occurrence
    assert float(ind.mean()) < 1 - 1e-6  # not saturated to machine precision
    other = [h for h in range(4) if h != lay.induction_head]
    assert float(att[1, :, other][..., j, j - half + 1].mean()) < 0.2  # distractors do not do the job


def test_seeds_give_different_layouts_and_diagnostics_find_them():
    heads = {s: layout(s).heads for s in (0, 1, 2)}
    assert len(set(heads.values())) == 3
    for s in (1, 2):
        model, tok, lay = compile_induction(s)
        diag = gt.diagnose(model, _pool(tok), seed=s, n=60)
        assert (diag.previous_token_heads, diag.induction_heads) == ([lay.heads[0]], [lay.heads[1]])
        assert diag.previous_token.max() > 0.99 and diag.induction.max() > 0.99


def test_ground_truth_verification_passes(compiled):
    model, tok, lay = compiled
    diag = gt.diagnose(model, _pool(tok), seed=0, n=60)
    edges = gt.circuit_edges(diag.previous_token_heads, diag.induction_heads)
    p, i = lay.heads
    assert edges == [f"input->{p}<v>", f"{p}->{i}<k>", f"{i}->logits"]
    batch = encode_examples(generate_examples("induction", "id_test", 60, seed=0), tok, max_len=N_POSITIONS)
    v = gt.verify_circuit(GPT2Weights.from_hf(model), batch, edges)
    assert v["passed"]
    assert v["recovery"] >= gt.MIN_RECOVERY and v["recovery"] == pytest.approx(1.0, abs=0.05)
    assert v["remaining"] <= gt.MAX_REMAINING and v["remaining"] == pytest.approx(0.0, abs=0.05)
    assert v["binary_accuracy_removed"] <= 0.05 and v["binary_accuracy_clean"] >= 0.95
    assert v["logit_diff_clean"] > 5.0 and v["logit_diff_corrupted"] < -5.0
    assert v["headline"] == {
        "metric": "logit difference recovered",
        "full": 1.0,
        "circuit_only": v["recovery"],
        "circuit_removed": v["remaining"],
        "chance": 0.0,
    }


def test_language_train_compiled_writes_a_loadable_model(tmp_path):
    main(
        [
            "language-tasks",
            "--task",
            "induction",
            "--out-dir",
            str(tmp_path / "tasks" / "induction"),
            "--n-per-split",
            "100",
            "--seed",
            "0",
        ]
    )
    main(
        [
            "language-train",
            "--compiled",
            "induction",
            "--seed",
            "0",
            "--tasks-dir",
            str(tmp_path / "tasks"),
            "--out-dir",
            str(tmp_path / "model"),
            "--metrics",
            str(tmp_path / "metrics.json"),
        ]
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["config"]["compiled"] == "induction" and metrics["config"]["trained"] is False
    assert metrics["training"]["steps_run"] == 0
    acc = metrics["accuracy"]["induction"]
    assert set(acc) == {"train", "id_test", "ood_test", "validation"}
    # repeated words make some prompts ambiguous: below the ceiling, far above chance (1/68 exact, 1/2 binary)
    assert 0.85 <= acc["id_test"]["accuracy"] < 0.98 and acc["id_test"]["binary_accuracy"] >= 0.95
    assert acc["ood_test"]["accuracy"] >= 0.7 and acc["ood_test"]["binary_accuracy"] >= 0.95
    lm = load_embedded(tmp_path / "model", with_bridge=True)
    assert lm.hf.config.certified_circuits["compiled"] == "induction"
    ids = torch.as_tensor([lm.tokenizer.encode(generate_examples("induction", "ood_test", 1, seed=1)[0].clean)])
    with torch.no_grad():
        bridge, hf = lm.bridge(ids), lm.hf(input_ids=ids).logits
    np.testing.assert_allclose(bridge.numpy(), hf.numpy(), atol=1e-4)


@pytest.mark.parametrize("name", ["induction", pytest.param("induction_noisy", marks=pytest.mark.slow)])
def test_language_ground_truth_writes_the_per_component_block(tmp_path, name):
    """language-train --compiled NAME, then language-ground-truth: the concept's components are the edges kept by the
    per-component rule and the one reader (analysis/recovery.read_ground_truth) validates the block."""
    from certified_circuits.analysis.recovery import read_ground_truth
    from certified_circuits.language.tasks import write_jsonl

    tasks = tmp_path / "tasks" / "induction"
    for split in ("train", "id_test", "ood_test", "validation"):
        write_jsonl(tasks / f"{split}.jsonl", generate_examples("induction", split, 100, seed=0))
    main(["language-train", "--compiled", name, "--seed", "0", "--tasks-dir", str(tmp_path / "tasks"),
          "--out-dir", str(tmp_path / "model"), "--metrics", str(tmp_path / "metrics.json")])
    assert json.loads((tmp_path / "metrics.json").read_text())["config"]["compiled"] == name
    main(["language-ground-truth", "--model-path", str(tmp_path / "model"), "--examples",
          str(tasks / "id_test.jsonl"), "--out", str(tmp_path / "gt.json")])
    doc = json.loads((tmp_path / "gt.json").read_text())
    concept = doc["concepts"]["induction"]
    block = concept["verification"]["per_component"]
    assert len(block["effects"]) == doc["n_components"] == {"induction": 110, "induction_noisy": 310}[name]
    assert block["passed"] and sorted(concept["components"]) == sorted(
        e for e in block["effects"] if e not in block["dropped"] and block["effects"][e] >= block["delta"])
    assert len(concept["components"]) == {"induction": 3, "induction_noisy": 8}[name]
    truth = read_ground_truth(tmp_path / "gt.json")
    assert truth is not None


def test_the_whole_circuit_checks_run_on_the_scored_truth(tmp_path, monkeypatch):
    """A planted edge with no effect (an edge out of an MLP, which the compiled model switches off) is dropped by the
    per-component rule; the whole-circuit checks written to the file are then those of the 3 kept edges, not of the
    4 planted ones (issue 50)."""
    from certified_circuits.language import ground_truth as gt
    from certified_circuits.language.tasks import write_jsonl

    tasks = tmp_path / "tasks" / "induction"
    for split in ("train", "id_test", "ood_test", "validation"):
        write_jsonl(tasks / f"{split}.jsonl", generate_examples("induction", split, 100, seed=0))
    main(["language-train", "--compiled", "induction", "--seed", "0", "--tasks-dir", str(tmp_path / "tasks"),
          "--out-dir", str(tmp_path / "model"), "--metrics", str(tmp_path / "metrics.json")])
    real_edges, real_verify = gt.circuit_edges, gt.verify_circuit
    checked: list[list[str]] = []

    def with_a_dead_edge(prev, induction):
        return [*real_edges(prev, induction), "m0->logits"]

    def recording(weights, batch, edges, **kw):
        checked.append(list(edges))
        return real_verify(weights, batch, edges, **kw)

    monkeypatch.setattr(gt, "circuit_edges", with_a_dead_edge)
    monkeypatch.setattr(gt, "verify_circuit", recording)
    main(["language-ground-truth", "--model-path", str(tmp_path / "model"), "--examples",
          str(tasks / "id_test.jsonl"), "--out", str(tmp_path / "gt.json")])
    doc = json.loads((tmp_path / "gt.json").read_text())
    concept = doc["concepts"]["induction"]
    assert concept["verification"]["per_component"]["dropped"] == ["m0->logits"]
    assert len(checked) == 2 and len(checked[0]) == 4 and checked[1] == concept["components"]
    assert len(concept["components"]) == 3 and concept["verification"]["passed"]


def test_compile_model_passes_the_distractor_scale_and_refuses_it_for_the_clean_model():
    from certified_circuits.language.compiled import compile_model

    with pytest.raises(ValueError, match="has no distractors"):
        compile_model("induction", 0, distractor_scale=0.5)
    quiet, _, _ = compile_model("induction_noisy", 0, distractor_scale=0.0)
    loud, _, _ = compile_model("induction_noisy", 0)
    assert any(not torch.equal(a, b) for a, b in zip(quiet.state_dict().values(), loud.state_dict().values()))
