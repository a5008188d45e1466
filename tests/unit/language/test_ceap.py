"""CEAP, conductance on EAP's edges (Wu, Tonin and Cevher, arXiv 2606.16920; LIONS-EPFL/Circuit-Variance ``ceap``):

    CEAP_i(u -> v) = sum_{k=1..m} (z_u(k-1) - z_u(k)) . dM_i/d in_v |_{z(k)}    (language/methods.py)

Checked against:

* the formula, computed independently (tests/helpers/independent_scores.py ``conductance_scores``: TransformerBridge
  runs with the embedding interpolated, each node output read at its hook, each input's gradient by a zero
  perturbation), per example, at edge and node level, on random GPT-2 and Llama (the hook path);
* the GPT-2 decomposed path (``eap_ig_scores``, as experiments/noise_sweep.py ``score_prompts`` calls it) against
  the hook path;
* exact identities that a wrong step index or a stale activation buffer breaks: m = 1 is EAP; an edge out of the
  ``input`` node (whose output moves by (x_clean - x_corr)/m every step) is EAP-IG-inputs with k = 1..m
  (``endpoint``), and not with k = 0..m-1;
* completeness through the logits' input: the sum of the edges into ``logits`` tends to M(corrupted) - M(clean)
  at rate 1/m (a Riemann-Stieltjes sum of dM along the path);
* LIONS-EPFL's convention (``integration="hannamw"``): every score negated, node level refused, and the
  attribution file records the step term. Parity with LIONS-EPFL's own code: benchmarks/ceap_reference_check.py
  (docs/reference_parity.md).

Tolerances: float32 scores of order 0.05-0.6 on these fixtures; the package and the oracle agree to 2.4e-7 (measured),
so 2e-6 absolute or 1e-5 relative; the two package paths run the same arithmetic in another order (2e-8 measured).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certified_circuits.language import hooked, methods
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import encode_examples

from tests.helpers.family_fixtures import ioi_prompt, save_family
from tests.helpers.independent_scores import conductance_scores

pytestmark = pytest.mark.filterwarnings("ignore")
ATOL, RTOL = 2e-6, 1e-5


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.models import LanguageModel, load_hf_model

    root = tmp_path_factory.mktemp("ceap")
    out = {f: load_hf_model(save_family(f, root / f)) for f in ("gpt2", "llama")}
    g = out["gpt2"]   # the same GPT-2 with the decomposed forward (attribution.uses_fast_path)
    out["gpt2-fast"] = LanguageModel("gpt2", g.hf, g.bridge, GPT2Weights.from_hf(g.hf), g.tokenizer)
    return out


def _batch(lm):
    ex = [Example("e0", "t", "train", ioi_prompt("Mary", "John", "John"), ioi_prompt("Anna", "Tom", "Lucy"), " Mary",
                  " John"),
          Example("e1", "t", "train", ioi_prompt("Kate", "Paul", "Kate", "store", "book"),
                  ioi_prompt("Mark", "Lucy", "Tom", "store", "book"), " Paul", " Kate"),
          Example("e2", "t", "train", ioi_prompt("Tom", "Lucy", "Lucy"), ioi_prompt("John", "Kate", "Mark"), " Tom",
                  " Lucy")]
    return encode_examples(ex, lm.tokenizer, max_len=lm.n_positions)


def _matrix(scores: dict, names: list[str]) -> np.ndarray:
    assert sorted(scores) == sorted(names)
    return np.stack([scores[n] for n in names], 1)


def _hooks(lm, batch, m, **kw) -> np.ndarray:
    return hooked.attribution_scores(lm.bridge, lm.graph, batch, method="CEAP", ig_steps=m, progress=False, **kw)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_ceap_equals_the_formula_per_example(models, family) -> None:
    lm = models[family]
    batch, names = _batch(lm), lm.graph.edge_names()
    want = _matrix(conductance_scores(lm, batch, 3), names)
    assert np.abs(want).max() > 1e-2                                   # not trivially zero
    got = _hooks(lm, batch, 3, batch_size=2)                           # two batches: rows are examples
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=RTOL)
    # LIONS-EPFL's sign, z(k) - z(k-1), against the oracle's clean-ward term
    lions = _matrix(conductance_scores(lm, batch, 3, term="clean-ward"), names)
    np.testing.assert_allclose(_hooks(lm, batch, 3, integration="hannamw"), lions, atol=ATOL, rtol=RTOL)


def test_node_level_equals_the_formula(models) -> None:
    lm = models["llama"]
    batch = _batch(lm)
    want = _matrix(conductance_scores(lm, batch, 3, level="node"), lm.graph.node_names())
    np.testing.assert_allclose(_hooks(lm, batch, 3, level="node"), want, atol=ATOL, rtol=RTOL)
    with pytest.raises(ValueError, match="LIONS-EPFL"):                 # no node code in the reference
        _hooks(lm, batch, 3, level="node", integration="hannamw")


def test_decomposed_path_equals_the_hooks(models) -> None:
    from certified_circuits.language.attribution import score_examples, uses_fast_path
    from certified_circuits.language.eap_ig import eap_ig_scores

    lm, fast = models["gpt2"], models["gpt2-fast"]
    assert uses_fast_path(fast, "CEAP", "edge") and not uses_fast_path(lm, "CEAP", "edge")
    batch = _batch(lm)
    for integration in ("reference", "hannamw"):
        hooks = score_examples(lm, batch, method="CEAP", ig_steps=4, integration=integration, progress=False)
        got = score_examples(fast, batch, method="CEAP", ig_steps=4, integration=integration, batch_size=2,
                             progress=False)
        np.testing.assert_allclose(got, hooks, atol=ATOL, rtol=RTOL)
    # as experiments/noise_sweep.py score_prompts calls it: the entry's points and factor, nothing else
    spec = methods.METHODS["CEAP"]
    conv = spec.convention("edge", 4, "reference")
    direct = eap_ig_scores(fast.weights, batch, ig_steps=4, points=list(conv.points), factor=spec.factor,
                           progress=False)
    np.testing.assert_array_equal(direct, score_examples(fast, batch, method="CEAP", ig_steps=4, progress=False))


@pytest.mark.parametrize("which", ["gpt2-fast", "llama"])
def test_one_step_is_eap(models, which) -> None:
    """m = 1: (z_u(0) - z_u(1)) . dM/d in_v at z(1) = (a_u(corr) - a_u(clean)) . dM/d in_v at the clean input."""
    from certified_circuits.language.attribution import score_examples

    lm = models[which]
    batch = _batch(lm)
    eap = score_examples(lm, batch, method="EAP", progress=False)
    np.testing.assert_allclose(score_examples(lm, batch, method="CEAP", ig_steps=1, progress=False), eap,
                               atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("which", ["gpt2-fast", "llama"])
def test_input_edges_are_eap_ig_with_the_clean_end(models, which) -> None:
    """The input node moves by (x_clean - x_corr)/m every step, so CEAP(input -> v) = (x_corr - x_clean) . (1/m)
    sum_{k=1..m} dM/d in_v(x_k): EAP-IG-inputs under ``endpoint``, exactly; not its k = 0..m-1 (``reference``),
    and on every other edge CEAP is not EAP-IG (each step's change is not the m-th of the total)."""
    from certified_circuits.language.attribution import score_examples

    lm, m = models[which], 4
    batch = _batch(lm)
    inp = np.array([n.startswith("input->") for n in lm.graph.edge_names()])
    ceap = score_examples(lm, batch, method="CEAP", ig_steps=m, progress=False)
    right = score_examples(lm, batch, method="EAP-IG-inputs", ig_steps=m, integration="endpoint", progress=False)
    left = score_examples(lm, batch, method="EAP-IG-inputs", ig_steps=m, integration="reference", progress=False)
    np.testing.assert_allclose(ceap[:, inp], right[:, inp], atol=ATOL, rtol=RTOL)
    scale = np.abs(right).max()
    assert np.abs(ceap[:, inp] - left[:, inp]).max() > 100 * ATOL + 1e-3 * scale
    assert np.abs(ceap[:, ~inp] - right[:, ~inp]).max() > 100 * ATOL + 1e-3 * scale


def test_completeness_through_the_logits_input(models) -> None:
    """sum_u CEAP(u -> logits) = sum_k (R(k-1) - R(k)) . dM/dR(k), R the logits' input (the sum of every node's
    output and constant biases): a right Riemann-Stieltjes sum of dM along R's path, so it tends to M(corrupted) -
    M(clean) with an error that halves as m doubles (measured on this GPT-2: 2.5e-3, 1.3e-3, 6.3e-4, 3.2e-4 at m =
    4..32, |M(corrupted) - M(clean)| 1e-2 to 2e-2)."""
    from certified_circuits.language.attribution import score_examples

    lm = models["gpt2-fast"]
    batch = _batch(lm)
    ar, last = torch.arange(len(batch.lengths)), torch.as_tensor(batch.lengths) - 1

    def metric(tokens):
        with torch.no_grad():
            logits = lm.hf(torch.as_tensor(tokens)).logits[ar, last]
        return (logits[ar, torch.as_tensor(batch.answer)] - logits[ar, torch.as_tensor(batch.distractor)]).numpy()

    total = metric(batch.corrupted) - metric(batch.clean)
    into = np.array([n.endswith("->logits") for n in lm.graph.edge_names()])
    gaps = [np.abs(score_examples(lm, batch, method="CEAP", ig_steps=m, progress=False)[:, into].sum(1) - total).max()
            for m in (4, 8, 16, 32)]
    assert gaps[0] < 0.5 * np.abs(total).max()
    for a, b in zip(gaps, gaps[1:]):
        assert 0.4 < b / a < 0.6, gaps


def test_attribution_file_records_the_convention(tmp_path, word_tok) -> None:
    from certified_circuits.language.attribution import attribute_task
    from certified_circuits.language.models import build_model, save_embedded, tiny_config
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.storage.store import read_attributions

    cfg = tiny_config(word_tok.vocab_size, n_layer=1, n_head=2, n_embd=16, n_positions=96)
    model_dir = save_embedded(build_model(cfg, seed=0), word_tok, tmp_path / "model")
    examples = generate_examples("ioi", "train", 3, seed=0)
    files = {}
    for integ, level in (("reference", "edge"), ("hannamw", "edge"), ("endpoint", "node")):
        out = tmp_path / f"{integ}-{level}.h5"
        attribute_task(examples, task="ioi", split="train", model="embedded", model_path=model_dir, out=out,
                       experiment="x", device="cpu", ig_steps=2, integration=integ, batch_size=2, method="CEAP",
                       level=level)
        files[integ] = a = read_attributions(out)
        assert (a.attrs["method"], a.attrs["level"], a.attrs["integration"]) == ("CEAP", level, integ)
        assert (a.attrs["ig_points"], a.attrs["method_interpolates"]) == ("0.5, 1.0", "inputs")
        assert a.attrs["conductance_term"] == ("z(k) - z(k-1)" if integ == "hannamw" else "z(k-1) - z(k)")
        assert a.rankings == {"eap_ig": "absolute"}
    np.testing.assert_array_equal(files["hannamw"].scores["eap_ig"], -files["reference"].scores["eap_ig"])
    assert np.abs(files["reference"].scores["eap_ig"]).max() > 0
