"""CEAP equals LIONS-EPFL/Circuit-Variance's own code (docs/reference_parity.md, "CEAP"), in CI, without its venv.

``tests/unit/data/ceap_reference/reference.json`` holds the reference side's output of
``benchmarks/ceap_reference_check.py`` (their ``attribute(..., ig_style="ceap", integration_steps=m)`` run in a
TransformerLens 2.15 venv): the dataset-mean edge scores for each m, the token and label ids their side fed the
model, the ``device='cuda'`` -> ``'cpu'`` substitution record, the prompts and the fixture's weight fingerprint.
The model is not stored: the benchmark's ``fixture`` rebuilds it from its seed, here as there, and the first
test checks that the rebuilt weights and token ids are the ones the reference ran on (refresh the data with
the three commands of the benchmark's docstring if they are not).

Then, for each stored m and both paths (TransformerBridge hooks and the decomposed GPT-2 forward):
``integration="hannamw"`` (their sign) equals their scores to 1e-5, absolute and relative to the largest
|score| (measured: 3.4e-8 and 1.8e-6); the default equals minus theirs as closely; and a control, EAP-IG-inputs
(``endpoint``, the same m gradient points), does not match beyond m = 1 (measured 5e-4), so the check can fail.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from certified_circuits.language.attribution import score_examples
from tests.helpers.paths import UNIT_DATA
from tests.helpers.scripts import load_script

STORED = UNIT_DATA / "ceap_reference" / "reference.json"
TOL = 1e-5
REFRESH = ("refresh tests/unit/data/ceap_reference with the three commands of benchmarks/ceap_reference_check.py's "
           "docstring (docs/reference_parity.md, section 3)")


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads(STORED.read_text())


@pytest.fixture(scope="module")
def check():
    return load_script("benchmarks/ceap_reference_check.py")


@pytest.fixture(scope="module")
def rebuilt(check, tmp_path_factory):
    """``(hooks, decomposed, batch, rows, model_dir)``: the benchmark's inputs, rebuilt from code."""
    model_dir = tmp_path_factory.mktemp("ceap_reference") / "model"
    return (*check.fixture(model_dir), model_dir)


def _gap(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    d = float(np.abs(got - want).max())
    return d, d / float(np.abs(want).max())


def test_inputs_are_those_the_reference_ran_on(check, stored, rebuilt):
    hooks, _, batch, rows, model_dir = rebuilt
    assert rows == stored["prompts"], f"the benchmark's prompts changed since the reference ran; {REFRESH}"
    got = check.tokens(batch)
    assert got["clean_tokens"] == stored["clean_tokens"], (
        f"the fixture's tokenizer (or its prompts) now gives other token ids than the reference was fed: "
        f"{got['clean_tokens']} != {stored['clean_tokens']}; {REFRESH}")
    assert [list(x) for x in zip(got["answer"], got["distractor"])] == stored["labels"], (
        f"answer/distractor ids differ from the reference's; {REFRESH}")
    weights = check.weights_fingerprint(model_dir)
    assert sorted(weights) == sorted(stored["weights"]), f"the fixture's tensors changed; {REFRESH}"
    for name, want in stored["weights"].items():
        w = weights[name]
        assert w["shape"] == want["shape"], f"{name}: shape {w['shape']} != {want['shape']}; {REFRESH}"
        assert np.allclose([w["l2"], *w["first"]], [want["l2"], *want["first"]], rtol=1e-6, atol=1e-8), (
            f"{name}: the rebuilt fixture's weights differ from those the reference ran on (a changed init in "
            f"torch or transformers?); {REFRESH}")
    assert sorted(hooks.graph.edge_names()) == sorted(stored["scores"][str(stored["steps"][0])])
    assert stored["device_substitution"] and all("device='cuda'" in d["before"] and "device='cpu'" in d["after"]
                                                   for d in stored["device_substitution"])


@pytest.mark.parametrize("path", ["hooks", "decomposed"])
def test_ceap_equals_lions_epfl(stored, rebuilt, path):
    hooks, fast, batch, *_ = rebuilt
    lm = hooks if path == "hooks" else fast
    edges = hooks.graph.edge_names()
    for m in stored["steps"]:
        want = np.array([stored["scores"][str(m)][e] for e in edges])
        for integration, sign in (("hannamw", 1.0), ("reference", -1.0)):   # the default: minus their sign
            got = sign * score_examples(lm, batch, method="CEAP", ig_steps=m, integration=integration, batch_size=3,
                                        progress=False).astype(np.float64).mean(0)
            d, rel = _gap(got, want)
            assert d < TOL and rel < TOL, f"m = {m}, {path}, {integration}: max |diff| {d:.2e}, relative {rel:.2e}"


def test_control_eap_ig_inputs_does_not_match(stored, rebuilt):
    hooks, fast, batch, *_ = rebuilt
    edges = hooks.graph.edge_names()
    for m in stored["steps"]:
        want = np.array([stored["scores"][str(m)][e] for e in edges])
        got = -score_examples(fast, batch, method="EAP-IG-inputs", ig_steps=m, integration="endpoint",
                              progress=False).astype(np.float64).mean(0)
        d, rel = _gap(got, want)
        if m == 1:   # CEAP with one step is EAP, and so is EAP-IG-inputs at its clean end point
            assert d < TOL and rel < TOL, f"m = 1: {d:.2e}"
        else:        # measured 5e-4 absolute (2.7e-2 relative): the parity check above can fail
            assert rel > 100 * TOL, f"m = {m}: EAP-IG-inputs matches CEAP to {rel:.2e}; the check could not fail"
