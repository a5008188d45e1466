"""Reference parity (issue 29, item 4): where this project and hannamw/EAP-IG's code differ, both conventions
are computed, and each equals the independent oracle (tests/helpers/independent_scores.py).

* EAP-IG-activations (edge level): the project's interpolated input carries the gradient, as every other
  interpolated group; the reference's ``get_scores_ig_activations`` returns it as a constant, so with every
  parameter trainable (HookedTransformer's default) autograd reaches an input fed only by the ``input`` node
  only through a trainable position embedding. The oracle emulates the reference's autograd mechanically
  (``reference_autograd=True``: parameters trainable, a backward hook fires only on a tensor that requires
  grad); ``integration="hannamw"`` must equal it. On rotary families (Llama; Pythia, whose parallel layer-0
  MLP also reads only the input) the two differ exactly on those edges; on GPT-2 (``W_pos``) they agree.
* Node level: ``reference`` and ``endpoint`` use one Riemann sum at both levels and a node's own output
  gradient; ``hannamw`` is the reference's ``attribute_node.py``: k = 1..m and an MLP differentiated at its
  input. Each equals the oracle's node scores with those points and that MLP rule.
* The attribution file records the convention a run resolved to.
"""

from __future__ import annotations

import numpy as np
import pytest

from certified_circuits.language import hooked, methods
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import encode_examples

from tests.helpers.family_fixtures import ioi_prompt, save_family
from tests.helpers.independent_scores import activation_ig_scores, straightforward_node_scores

pytestmark = pytest.mark.filterwarnings("ignore")
#: float32 scores of order 0.1-1 (as test_hooked): 2e-5 absolute or 1e-4 relative
ATOL, RTOL = 2e-5, 1e-4
FAMILIES = ("gpt2", "pythia", "llama")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    from certified_circuits.language.models import load_hf_model

    root = tmp_path_factory.mktemp("parity")
    return {f: load_hf_model(save_family(f, root / f)) for f in FAMILIES}


def _batch(lm):
    ex = [Example("e0", "t", "train", ioi_prompt("Mary", "John", "John"), ioi_prompt("Anna", "Tom", "Lucy"), " Mary", " John"),
          Example("e1", "t", "train", ioi_prompt("Kate", "Paul", "Kate", "store", "book"),
                  ioi_prompt("Mark", "Lucy", "Tom", "store", "book"), " Paul", " Kate")]
    return encode_examples(ex, lm.tokenizer, max_len=lm.n_positions)


def _matrix(scores: dict, names: list[str]) -> np.ndarray:
    assert sorted(scores) == sorted(names)
    return np.stack([scores[n] for n in names], 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_activations_conventions_equal_the_oracle(models, family) -> None:
    lm = models[family]
    g, batch, m = lm.graph, _batch(models[family]), 2
    names = g.edge_names()
    ours = hooked.attribution_scores(lm.bridge, g, batch, method="EAP-IG-activations", ig_steps=m, progress=False)
    ref = hooked.attribution_scores(lm.bridge, g, batch, method="EAP-IG-activations", ig_steps=m,
                                    integration="hannamw", progress=False)
    want_ours = _matrix(activation_ig_scores(lm, batch, m), names)
    want_ref = _matrix(activation_ig_scores(lm, batch, m, reference_autograd=True), names)
    assert np.abs(want_ours).max() > 1e-2
    np.testing.assert_allclose(ours, want_ours, atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(ref, want_ref, atol=ATOL, rtol=RTOL)
    # where they differ: the edges into inputs that read only the input node (by name, not from the graph)
    fed_by_input_only = np.array([n.startswith("input->a0.") or (g.parallel_attn_mlp and n == "input->m0")
                                  for n in names])
    np.testing.assert_allclose(ref[:, ~fed_by_input_only], ours[:, ~fed_by_input_only], atol=ATOL, rtol=RTOL)
    if family == "gpt2":     # W_pos is trainable: the reference's autograd reaches layer 0 through it
        np.testing.assert_allclose(ref, ours, atol=ATOL, rtol=RTOL)
    else:                    # rotary: the input group's m of (2L+1) m passes add nothing there
        a, b = ours[:, fed_by_input_only], ref[:, fed_by_input_only]
        assert np.linalg.norm(a - b) > 0.05 * np.linalg.norm(b)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_node_conventions_equal_the_oracle(models, family) -> None:
    lm = models[family]
    g, batch, m = lm.graph, _batch(models[family]), 3
    nodes = g.node_names()
    got = {integ: hooked.attribution_scores(lm.bridge, g, batch, method="EAP-IG-inputs", level="node", ig_steps=m,
                                            integration=integ, progress=False)
           for integ in methods.INTEGRATIONS}
    left, right = [k / m for k in range(m)], [k / m for k in range(1, m + 1)]
    for integ, alphas, mlp in (("reference", left, "output"), ("endpoint", right, "output"),
                               ("hannamw", right, "input")):
        want = _matrix(straightforward_node_scores(lm, batch, alphas, mlp_gradient=mlp), nodes)
        assert np.abs(want).max() > 1e-2
        np.testing.assert_allclose(got[integ], want, atol=ATOL, rtol=RTOL, err_msg=integ)
    heads = np.array([n.startswith("a") for n in nodes])
    # the reference's node heads are the endpoint sum; its MLPs are not (gradient at the input)
    np.testing.assert_allclose(got["hannamw"][:, heads], got["endpoint"][:, heads], atol=ATOL, rtol=RTOL)
    assert np.abs(got["hannamw"][:, ~heads] - got["endpoint"][:, ~heads]).max() > 1e-3
    assert np.linalg.norm(got["reference"][:, heads] - got["endpoint"][:, heads]) > 0.01 * np.linalg.norm(
        got["endpoint"][:, heads])


def test_hannamw_edge_inputs_are_the_reference_points(tiny_lm, ioi_batch) -> None:
    """At edge level the reference's EAP-IG-inputs is k = 0..m-1, the project's default: the same scores, on the
    GPT-2 fast path as through the hooks."""
    from certified_circuits.language.attribution import score_examples, uses_fast_path

    assert uses_fast_path(tiny_lm, "EAP-IG-inputs", "edge")
    ref = score_examples(tiny_lm, ioi_batch, ig_steps=3, progress=False)
    np.testing.assert_array_equal(score_examples(tiny_lm, ioi_batch, ig_steps=3, integration="hannamw",
                                                 progress=False), ref)
    hooks = hooked.attribution_scores(tiny_lm.bridge, tiny_lm.graph, ioi_batch, ig_steps=3, integration="hannamw",
                                      progress=False)
    np.testing.assert_allclose(hooks, ref, atol=ATOL, rtol=RTOL)


def test_conventions_of_the_registry() -> None:
    act, inputs = methods.METHODS["EAP-IG-activations"], methods.METHODS["EAP-IG-inputs"]
    assert methods.integration_points(4, "hannamw", "edge") == [0.0, 0.25, 0.5, 0.75]
    assert methods.integration_points(4, "hannamw", "node") == [0.25, 0.5, 0.75, 1.0]
    for level in methods.LEVELS:     # this project's conventions: one rule at both levels
        assert methods.integration_points(4, "reference", level) == [0.0, 0.25, 0.5, 0.75]
        assert methods.integration_points(4, "endpoint", level) == [0.25, 0.5, 0.75, 1.0]
    c = inputs.convention("node", 4, "hannamw")
    assert (c.points, c.input_gradient, c.mlp_node_gradient) == ((0.25, 0.5, 0.75, 1.0), "always", "input")
    c = act.convention("edge", 2, "hannamw")
    assert (c.points, c.input_gradient, c.mlp_node_gradient) == ((0.5, 1.0), "trainable-position", "output")
    assert act.convention("node", 2, "hannamw").input_gradient == "always"   # attribute_node.py: "+ activations * 0"
    for name, spec in methods.METHODS.items():
        for level in spec.levels:
            for integ in ("reference", "endpoint"):
                c = spec.convention(level, 3, integ)
                assert (c.input_gradient, c.mlp_node_gradient) == ("always", "output"), (name, level, integ)
    assert act.convention("edge", 2, "reference").attrs() == {
        "ig_points": "0.5, 1.0", "input_gradient": "always", "mlp_node_gradient": "output"}
    with pytest.raises(ValueError, match="hannamw"):
        methods.check_method("EAP-IG-inputs", "node", 3, "reference-node")


def test_attribution_file_records_the_convention(tmp_path, word_tok) -> None:
    from certified_circuits.language.attribution import attribute_task
    from certified_circuits.language.models import build_model, save_embedded, tiny_config
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.storage.store import read_attributions

    cfg = tiny_config(word_tok.vocab_size, n_layer=1, n_head=2, n_embd=16, n_positions=96)
    model_dir = save_embedded(build_model(cfg, seed=0), word_tok, tmp_path / "model")
    examples = generate_examples("ioi", "train", 2, seed=0)
    for integ, points, mlp in (("hannamw", "0.5, 1.0", "input"), ("reference", "0.0, 0.5", "output")):
        out = tmp_path / f"{integ}.h5"
        attribute_task(examples, task="ioi", split="train", model="embedded", model_path=model_dir, out=out,
                       experiment="x", device="cpu", ig_steps=2, integration=integ, batch_size=2,
                       method="EAP-IG-inputs", level="node")
        a = read_attributions(out)
        assert (a.attrs["integration"], a.attrs["ig_points"], a.attrs["mlp_node_gradient"]) == (integ, points, mlp)
        assert a.attrs["input_gradient"] == "always"
