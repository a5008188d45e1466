"""The single-edge patching of language/ground_truth.py keeps its per-edge numbers (issue 52, item 2).

``tests/unit/language/data/ground_truth_edges.npz`` holds, for three models, the logit differences that
:func:`~certified_circuits.language.ground_truth.single_edge_logit_diffs` gave with language/ground_truth.py as of
commit a659760 (its own second forward, before the patching moved onto language/forward.py's forward and hooks),
on the 16 held-out induction prompts of ``generate_splits("induction", 0, 16)["id_test"]``:

* ``clean``: the compiled induction model, seed 0 (2 x 4 heads, 110 edges, MLPs off);
* ``noisy``: the noisy compiled induction model, seed 0, distractor scale 1 (2 x 8 heads, 310 edges, MLPs off);
* ``random``: a random 3-layer GPT-2 with 2 heads and MLPs on (``tiny_config(n_layer=3, n_head=2, n_embd=16)``,
  seed 0, every weight but the LayerNorms' times 8 so that effects reach 1e-2): the only one whose MLP edges and
  middle layer carry anything.

Per model: ``{name}_clean`` (float64 [n], ``LD_clean``), ``{name}_patched`` (float64 [n, E], ``LD_u`` with edge u
alone patched). The per-edge effect ``e_u = |mean LD_clean - mean LD_u|`` (:func:`~.ground_truth.edge_effects`
at unit 1) must stay within 1e-6 of the stored one. Written by ``python tests/unit/language/test_ground_truth_patching.py``
(do not rerun it to make the test pass: the file is the old code's answer).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from certified_circuits.language import ground_truth as gt
from certified_circuits.language.forward import GPT2Weights
from certified_circuits.language.tokenizer import EncodedBatch

DATA = Path(__file__).parent / "data" / "ground_truth_edges.npz"
MODELS = ("clean", "noisy", "random")
#: the held-out prompts and the prompts per pass (two passes, the second of 8: the batching is exercised)
N_PROMPTS, BATCH = 16, 8
#: the per-edge effects, in logit-difference units: the issue's bound
EFFECT_ATOL = 1e-6
#: each prompt's patched logit difference (float32 forward, |LD| <= 9): a few float32 roundings of 9
LD_ATOL = 1e-5


def model_and_prompts(name: str) -> tuple[GPT2Weights, EncodedBatch]:
    """One of :data:`MODELS` (module docstring) and its 16 held-out induction prompts."""
    from certified_circuits.language.compiled import compile_induction, compile_induction_noisy
    from certified_circuits.language.models import build_model, tiny_config
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import WordTokenizer, encode_examples

    if name == "clean":
        model, tok, _ = compile_induction(0)
    elif name == "noisy":
        model, tok, _ = compile_induction_noisy(0, distractor_scale=1.0)
    else:
        tok = WordTokenizer.default()
        model = build_model(tiny_config(tok.vocab_size, n_layer=3, n_head=2, n_embd=16, n_positions=64), seed=0)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if ".ln_" not in key:
                    p.mul_(8.0)
    prompts = generate_splits("induction", 0, N_PROMPTS)["id_test"]
    return GPT2Weights.from_hf(model), encode_examples(prompts, tok, max_len=model.config.n_positions)


@pytest.fixture(scope="module")
def stored() -> dict[str, np.ndarray]:
    with np.load(DATA) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("name", MODELS)
def test_single_edge_patching_keeps_the_stored_numbers(name, stored):
    torch.set_num_threads(1)
    w, batch = model_and_prompts(name)
    clean, patched = gt.single_edge_logit_diffs(w, batch, batch_size=BATCH)
    want_clean, want_patched = stored[f"{name}_clean"], stored[f"{name}_patched"]
    assert patched.shape == want_patched.shape == (N_PROMPTS, w.graph.n_edges)
    np.testing.assert_allclose(clean, want_clean, rtol=0, atol=LD_ATOL)
    np.testing.assert_allclose(patched, want_patched, rtol=0, atol=LD_ATOL)
    effects = gt.edge_effects(w, batch, 1.0, batch_size=BATCH)
    want = np.abs(want_clean.mean() - want_patched.mean(axis=0))
    np.testing.assert_allclose(effects, want, rtol=0, atol=EFFECT_ATOL)
    # the stored numbers are not trivial: some edges move the logit difference by a lot (in a compiled model, the
    # circuit's; most others by little)
    assert want.max() > {"clean": 10.0, "noisy": 5.0, "random": 1e-2}[name]
    assert name == "random" or np.median(want) < 0.01 * want.max()


def test_the_random_model_exercises_the_mlp_edges(stored):
    """The MLP inputs' edges of the random model change the logit difference (the compiled models' MLPs are off)."""
    w, _ = model_and_prompts("random")
    mlp_edges = np.array([e.split("->")[1] in ("m0", "m1", "m2") for e in w.graph.edge_names()])
    assert mlp_edges.sum() == 3 + 6 + 9  # into m_l: the input, then 2 heads and an MLP per earlier layer, 2 heads
    effects = np.abs(stored["random_clean"].mean() - stored["random_patched"].mean(axis=0))
    assert effects[mlp_edges].max() > 1e-3


def write_reference() -> None:
    """Write :data:`DATA` from the code as it stands (module docstring: once, before the refactor)."""
    from certified_circuits.core.devices import configure_torch
    from certified_circuits.storage.atomic import write_npz

    configure_torch(1)
    arrays = {}
    for name in MODELS:
        w, batch = model_and_prompts(name)
        arrays[f"{name}_clean"], arrays[f"{name}_patched"] = gt.single_edge_logit_diffs(w, batch, batch_size=BATCH)
        print(name, arrays[f"{name}_patched"].shape, file=sys.stderr)
    write_npz(DATA, arrays)


if __name__ == "__main__":
    write_reference()
