"""The induction task, the attention-only switch, the head diagnostics and the ground-truth stage."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from certified_circuits.cli.main import main
from certified_circuits.language import ground_truth as gt
from certified_circuits.language.graph import build_graph
from certified_circuits.language.models import build_model, save_embedded, tiny_config
from certified_circuits.language.tasks import (
    INDUCTION_HALF,
    INDUCTION_OOD_HALF,
    INDUCTION_SYMBOLS,
    SPLITS,
    generate_examples,
    generate_splits,
    write_jsonl,
)
from certified_circuits.language.tokenizer import WordTokenizer, encode_examples
from certified_circuits.language.train import switch_off_mlps


def _structure(e):
    """(first half, second half, T, k) of an induction prompt, read from its words."""
    w = e.clean.split()
    # the second half s_m..s_k is a contiguous run of the first half ending at the query: find T from the end
    for t in range(len(w) // 2 + 1, len(w)):
        first, second = w[:t], w[t:]
        m = next((i for i in range(t - len(second) + 1) if first[i : i + len(second)] == second), None)
        if m is not None and m + len(second) < t:
            return first, second, t, m + len(second) - 1
    raise AssertionError(f"{e.clean!r} is not a repeated sequence")


@pytest.mark.parametrize("split", SPLITS)
def test_prompts_clean_corrupted_answer_distractor(split):
    exs = generate_examples("induction", split, 60, seed=3)
    lo, hi = INDUCTION_OOD_HALF if split == "ood_test" else INDUCTION_HALF
    for e in exs:
        first, second, t, k = _structure(e)
        assert lo <= t <= hi
        assert e.answer == first[k + 1] and second[-1] == first[k]
        if split == "ood_test":
            assert second == first[: k + 1]  # repeated from the start
        cw, kw = e.clean.split(), e.corrupted.split()
        assert len(cw) == len(kw) and cw[t:] == kw[t:]  # second half unchanged
        changed = [i for i in range(t) if cw[i] != kw[i]]
        assert len(changed) == 2 and k in changed  # s_k swapped with one s_j
        j = changed[0] if changed[1] == k else changed[1]
        assert kw[j] == first[k] and kw[k] == first[j] and abs(j - k) > 1
        assert e.distractor == kw[j + 1] == cw[j + 1]  # corrupted: the query precedes the distractor
        assert e.distractor not in (e.answer, first[k])
        assert cw[k + 1] == kw[k + 1] == e.answer  # the answer's own token is not changed


def test_tokenizer_maps_every_word_and_default_vocabulary_unchanged():
    tok = WordTokenizer.default()
    assert set(INDUCTION_SYMBOLS) <= set(tok.vocab) and len(INDUCTION_SYMBOLS) == 68
    exs = [e for s in SPLITS for e in generate_examples("induction", s, 30, seed=0)]
    batch = encode_examples(exs, tok)
    assert (batch.clean != batch.corrupted).any(axis=1).all()
    assert tok.vocab_size == 369  # the embedded default's vocabulary, as before


def test_seeds_reproducible_and_splits_disjoint():
    a, b, c = (generate_splits("induction", s, 100) for s in (4, 4, 5))
    assert a == b and [e.clean for e in a["train"]] != [e.clean for e in c["train"]]
    cleans = {s: {e.clean for e in ex} for s, ex in a.items()}
    for s1 in SPLITS:
        for s2 in SPLITS:
            if s1 < s2:
                assert not cleans[s1] & cleans[s2], (s1, s2)


def test_existing_tasks_unchanged():
    """The three tasks' prompts (seed 0, 20 per split) hash as they did before the induction task was added."""
    import hashlib
    from dataclasses import asdict

    from certified_circuits.language.tasks import TASKS

    assert TASKS == ("ioi", "ioi_hard", "greater_than")
    h = hashlib.sha256()
    for t in TASKS:
        for ex in generate_splits(t, 0, 20).values():
            h.update(json.dumps([asdict(e) for e in ex]).encode())
    assert h.hexdigest() == "b8d227f70b058f895b73ac33947542680f7809281bbb8fc242a5017907f68edc"


def test_attn_only_switch_zeroes_mlp_outputs():
    torch.manual_seed(0)
    tok = WordTokenizer.default()
    model = build_model(tiny_config(tok.vocab_size, 2, 2, 32, 32), seed=0)
    switch_off_mlps(model)
    x = torch.randn(3, 7, 32)
    for block in model.transformer.h:
        assert torch.equal(block.mlp(x), torch.zeros_like(x))
        assert not any(p.requires_grad for p in block.mlp.parameters())
        assert not any(p.requires_grad for p in block.ln_2.parameters())
    assert model.transformer.h[0].attn.c_attn.weight.requires_grad


def test_diagnostic_scores_on_hand_made_patterns():
    half, p = 5, 10
    att = torch.zeros(1, 3, p, p)
    i = torch.arange(1, p)
    att[0, 0, i, i - 1] = 1.0  # previous-token head
    att[0, 0, 0, 0] = 1.0
    att[0, 1] = torch.tril(torch.ones(p, p)) / torch.arange(1, p + 1)[:, None]  # uniform causal
    q = torch.arange(half, p)
    att[0, 2, q, q - half + 1] = 1.0  # induction head (second half only)
    att[0, 2, :half, 0] = 1.0
    prev = gt.previous_token_scores(att)
    ind = gt.induction_scores(att, half)
    assert prev[0] == pytest.approx(1.0)
    assert prev[2] == pytest.approx(1 / 9, abs=1e-6)  # of positions 1..9 only position 1 (-> 0) hits i - 1
    # uniform: mean over i = 1..9 of 1/(i+1)
    assert prev[1] == pytest.approx(np.mean([1 / (k + 1) for k in range(1, 10)]), abs=1e-6)
    assert ind[2] == pytest.approx(1.0) and ind[0] == pytest.approx(0.0)
    assert ind[1] == pytest.approx(np.mean([1 / (k + 1) for k in range(5, 10)]), abs=1e-6)
    scores = np.array([[0.9, 0.1], [0.2, 0.5]])
    assert gt.select_heads(scores, range(0, 1), 0.4) == ["a0.h0"]
    assert gt.select_heads(scores, range(1, 2), 0.4) == ["a1.h1"]


def test_repeated_random_tokens():
    toks = gt.repeated_random_tokens(range(10, 40), 8, 6, seed=1)
    assert toks.shape == (8, 12)
    assert torch.equal(toks[:, :6], toks[:, 6:])
    assert all(len(set(r[:6].tolist())) == 6 for r in toks)
    assert torch.equal(toks, gt.repeated_random_tokens(range(10, 40), 8, 6, seed=1))


def test_circuit_edges_are_graph_edges():
    edges = gt.circuit_edges(["a0.h1", "a0.h3"], ["a1.h2"])
    assert edges == ["input->a0.h1<v>", "input->a0.h3<v>", "a0.h1->a1.h2<k>", "a0.h3->a1.h2<k>", "a1.h2->logits"]
    assert set(edges) <= set(build_graph(2, 4).edge_names())


def test_cli_exits_2_without_heads(tmp_path, capsys):
    tok = WordTokenizer.default()
    model = build_model(tiny_config(tok.vocab_size, 2, 2, 32, 48), seed=0)  # untrained: no such heads
    switch_off_mlps(model)
    save_embedded(model, tok, tmp_path / "model")
    write_jsonl(tmp_path / "id_test.jsonl", generate_examples("induction", "id_test", 8, seed=0))
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "language-ground-truth",
                "--model-path",
                str(tmp_path / "model"),
                "--examples",
                str(tmp_path / "id_test.jsonl"),
                "--out",
                str(tmp_path / "gt.json"),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no previous-token head" in err and "--attn-only" in err
    assert not (tmp_path / "gt.json").exists()


def test_verify_circuit_full_and_empty(tmp_path):
    """The verification's reference runs: an all-edges circuit recovers 100%, an empty one 0% (on the compiled model,
    which does the task, so the check always runs)."""
    from certified_circuits.language.compiled import compile_induction
    from certified_circuits.language.forward import GPT2Weights

    model, tok, _ = compile_induction(1)
    w = GPT2Weights.from_hf(model)
    batch = encode_examples(generate_examples("induction", "id_test", 16, seed=0), tok)
    every = w.graph.edge_names()
    v = gt.verify_circuit(w, batch, every)
    assert v["recovery"] == pytest.approx(1.0, abs=1e-5) and v["remaining"] == pytest.approx(0.0, abs=1e-5)
    assert v["n_edges"] == len(every) == 110  # 2 layers x 4 heads: n_edges_formula(2, 4)
    assert v["headline"]["circuit_only"] == v["recovery"] and v["headline"]["chance"] == 0.0
    empty = gt.verify_circuit(w, batch, [])
    assert empty["recovery"] == pytest.approx(0.0, abs=1e-5) and empty["remaining"] == pytest.approx(1.0, abs=1e-5)
    assert not empty["passed"]
    with pytest.raises(ValueError, match="not in the model's EAP graph"):
        gt.verify_circuit(w, batch, ["a5.h0->logits"])
    assert json.dumps(v)
