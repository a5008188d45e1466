"""The language method registry (language/methods.py) and the methods it was extended with, grad-x-act and CEAP
(CEAP's own tests: test_ceap.py).

* every former list of method names derives from the registry: the CLI choices, the hooked dispatch and
  the workflow's config check (``pipeline/config.check_language_method``; config.schema.yaml does not repeat
  the names, so a new entry is a valid ``language.method`` with no other edit);
* grad-x-act, s_i(u -> v) = a_u(clean_i) . dM_i/d in_v |_clean, equals an independent computation: the
  clean activations from TransformerBridge's own ``run_with_cache``, and for every downstream input v a
  separate clean forward that adds a zero perturbation to v alone and differentiates the metric with
  respect to it (no corrupted prompt anywhere); on GPT-2 the decomposed fast path agrees with the hooks;
* the attribution file records the method and the entry's ranking.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from certified_circuits.core.discovery import RANKINGS
from certified_circuits.language import hooked, methods
from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import encode_examples

from tests.helpers.family_fixtures import ioi_prompt, save_family
from tests.helpers.independent_scores import straightforward_scores

pytestmark = pytest.mark.filterwarnings("ignore")
ATOL, RTOL = 2e-5, 1e-4
ROOT = Path(__file__).resolve().parents[3]


def test_cli_and_hooks_list_exactly_the_registry_and_the_schema_does_not_repeat_it() -> None:
    from certified_circuits.cli.language import METHOD_CHOICES

    schema = yaml.safe_load((ROOT / "config.schema.yaml").read_text())
    language = schema["properties"]["language"]["properties"]
    assert list(methods.METHODS) == list(METHOD_CHOICES) == list(hooked.METHODS)
    assert "enum" not in language["method"]  # the registry is the one list (checked by pipeline/config.py)
    assert language["method"]["default"] in methods.METHODS
    assert language["level"]["enum"] == list(methods.LEVELS)
    # the conventions (docs/reference_parity.md): the schema's ig_integration, the CLI's --integration
    from certified_circuits.cli.language import INTEGRATIONS as CLI_INTEGRATIONS

    assert language["ig_integration"]["enum"] == list(methods.INTEGRATIONS)
    assert list(CLI_INTEGRATIONS) == list(methods.INTEGRATIONS) == ["reference", "endpoint", "hannamw"]


def _language(method: str, level: str = "edge", ig_steps: int = 5) -> dict:
    return {"method": method, "level": level, "ig_steps": ig_steps, "ig_integration": "reference"}


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_the_config_check_accepts_every_registered_method(name) -> None:
    from certified_circuits.pipeline.config_language import check_language_method

    check_language_method(_language(name))


def test_the_config_check_refuses_an_unknown_method_naming_the_registry() -> None:
    from certified_circuits.pipeline.config_language import check_language_method
    from certified_circuits.pipeline.config_errors import ConfigError

    with pytest.raises(ConfigError, match=r"language\.method = 'EAP-IG'.*EAP, EAP-IG-inputs, EAP-IG-activations, "
                                          r"clean-corrupted, grad-x-act, CEAP"):
        check_language_method(_language("EAP-IG"))
    with pytest.raises(ConfigError, match="level must be one of"):
        check_language_method(_language("EAP", level="head"))
    with pytest.raises(ConfigError, match="ig_steps must be an integer >= 1"):
        check_language_method(_language("EAP-IG-inputs", ig_steps=0))


def test_a_new_registry_entry_is_a_valid_config_method_with_no_other_edit(monkeypatch) -> None:
    """What 'one entry' means for the workflow: the config check reads the registry itself."""
    from certified_circuits.pipeline.config_language import check_language_method
    from certified_circuits.pipeline.config_errors import ConfigError

    with pytest.raises(ConfigError):
        check_language_method(_language("input-x-grad"))
    entry = methods.MethodSpec("input-x-grad", "test entry", "none", methods.METHODS["grad-x-act"].points,
                               factor=methods.clean_activation)
    monkeypatch.setitem(methods.METHODS, entry.name, entry)
    check_language_method(_language("input-x-grad"))


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_every_entry_is_well_formed(name) -> None:
    spec = methods.METHODS[name]
    assert spec.name == name and spec.description
    assert spec.interpolates in methods.INTERPOLATIONS and spec.ranking in RANKINGS
    assert set(spec.levels) <= set(methods.LEVELS)
    points = spec.points(4, "reference")
    assert points and all(0.0 <= a <= 1.0 for a in points)
    assert (spec.points(3, "reference") != points) == spec.uses_ig_steps
    for level in spec.levels:
        for integration in methods.INTEGRATIONS:
            if spec.conductance and level == "node" and integration == "hannamw":   # no reference code: refused
                with pytest.raises(ValueError, match="LIONS-EPFL"):
                    methods.check_method(name, level, 4, integration)
                continue
            conv = spec.convention(level, 4, integration)
            assert list(conv.points) == spec.points(4, integration, level)
            assert (conv.conductance_term is not None) == spec.conductance
            assert ("conductance_term" in conv.attrs()) == spec.conductance


def test_registry_values() -> None:
    m = methods.METHODS
    assert m["EAP-IG-activations"].points(4, "reference") == [0.25, 0.5, 0.75, 1.0]
    assert list(m) == ["EAP", "EAP-IG-inputs", "EAP-IG-activations", "clean-corrupted", "grad-x-act", "CEAP"]
    assert [m[n].needs_corrupted for n in m] == [True, True, True, True, False, True]
    assert [m[n].decomposed for n in m] == [True, True, False, True, True, True]
    assert [m[n].conductance for n in m] == [False] * 5 + [True]
    assert {spec.ranking for spec in m.values()} == {"absolute"}
    # CEAP: gradient points k/m, k = 1..m, under every convention; the step term is the project's except hannamw
    ceap = m["CEAP"]
    for integration in methods.INTEGRATIONS:
        assert ceap.points(4, integration, "edge") == [0.25, 0.5, 0.75, 1.0]
    assert ceap.convention("edge", 4, "reference").conductance_term == "z(k-1) - z(k)"
    assert ceap.convention("node", 4, "endpoint").conductance_term == "z(k-1) - z(k)"
    assert ceap.convention("edge", 4, "hannamw").conductance_term == "z(k) - z(k-1)"
    assert ceap.factor_for("hannamw") is methods.lions_conductance_step
    assert ceap.factor_for("reference") is ceap.factor is methods.conductance_step
    with pytest.raises(ValueError, match="term must be one of"):
        methods.ConductanceStep("z(k) - z(0)")
    with pytest.raises(ValueError, match="grad-x-act"):
        methods.check_method("gradient", "edge", 5, "reference")


def _examples() -> list[Example]:
    return [
        Example("e0", "t", "train", ioi_prompt("Mary", "John", "John"), ioi_prompt("Anna", "Tom", "Lucy"), " Mary", " John"),
        Example("e1", "t", "train", ioi_prompt("Kate", "Paul", "Kate", "store", "book"),
                ioi_prompt("Mark", "Lucy", "Tom", "store", "book"), " Paul", " Kate"),
    ]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_grad_x_act_equals_an_independent_computation(tmp_path, family) -> None:
    from certified_circuits.language.models import load_hf_model

    lm = load_hf_model(save_family(family, tmp_path / family))
    g = lm.graph
    batch = encode_examples(_examples(), lm.tokenizer, max_len=lm.n_positions)
    got = hooked.attribution_scores(lm.bridge, g, batch, method="grad-x-act", progress=False)
    want = straightforward_scores(lm, batch, [1.0], factor="clean")  # the clean input, no corrupted term
    assert sorted(want) == sorted(g.edge_names())
    want_matrix = np.stack([want[name] for name in g.edge_names()], 1)
    assert np.abs(want_matrix).max() > 1e-3
    np.testing.assert_allclose(got, want_matrix, atol=ATOL, rtol=RTOL)
    # no corrupted baseline: another corrupted prompt changes nothing
    batch.corrupted[:] = 0
    np.testing.assert_array_equal(hooked.attribution_scores(lm.bridge, g, batch, method="grad-x-act", progress=False),
                                  got)


def test_grad_x_act_fast_path_equals_the_hooks(tiny_lm, ioi_batch) -> None:
    """On the tiny GPT-2 the decomposed forward (the registry's ``decomposed``) gives the hook path's scores."""
    from certified_circuits.language.attribution import score_examples, uses_fast_path

    assert uses_fast_path(tiny_lm, "grad-x-act", "edge")
    fast = score_examples(tiny_lm, ioi_batch, method="grad-x-act", progress=False)
    hooks = hooked.attribution_scores(tiny_lm.bridge, tiny_lm.graph, ioi_batch, method="grad-x-act", progress=False)
    assert np.abs(hooks).max() > 1e-3
    np.testing.assert_allclose(fast, hooks, atol=ATOL, rtol=RTOL)


def test_attribution_file_records_the_method_and_its_ranking(tmp_path, word_tok) -> None:
    from certified_circuits.language.attribution import attribute_task
    from certified_circuits.language.models import build_model, save_embedded, tiny_config
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.storage.store import read_attributions

    cfg = tiny_config(word_tok.vocab_size, n_layer=1, n_head=2, n_embd=16, n_positions=96)
    model_dir = save_embedded(build_model(cfg, seed=0), word_tok, tmp_path / "model")
    examples = generate_examples("ioi", "train", 3, seed=0)
    out = tmp_path / "a.h5"
    attribute_task(examples, task="ioi", split="train", model="embedded", model_path=model_dir, out=out,
                   experiment="x", device="cpu", ig_steps=2, integration="reference", batch_size=2,
                   method="grad-x-act", level="node")
    a = read_attributions(out)
    assert a.attrs["method"] == "grad-x-act" and a.attrs["level"] == "node"
    assert a.attrs["method_interpolates"] == "none"
    assert a.rankings == {"eap_ig": methods.METHODS["grad-x-act"].ranking}
    assert a.scores["eap_ig"].shape == (3, 2 * 1 + 1)
