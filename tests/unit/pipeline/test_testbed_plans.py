"""The testbed's plan (pipeline/plans/testbed.py; issue 45): a testbed key that runs nothing is said on stderr
(``testbed.resamples`` without an experiment that has a ground truth), never ignored."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.pipeline.plans import testbed
from tests.helpers.paths import ROOT, SCHEMA


def _default() -> dict:
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate(config, str(SCHEMA), set_default=True)
    return config


def test_resamples_without_a_ground_truth_is_said_not_ignored() -> None:
    default = _default()
    assert default["testbed"]["resamples"] == 20 and testbed.testbed_notes(default) == []  # both models have a truth
    other = copy.deepcopy(default)
    other["vision"]["train"]["compiled"] = None  # a trained world model without planted circuits
    other["language"]["tasks"] = [t for t in other["language"]["tasks"] if t != "induction"]
    assert testbed.ground_truth_experiments(other) == {}
    assert testbed.testbed_notes(other) == [
        "testbed.resamples is 20, but no enabled experiment has a ground truth (the embedded world model with "
        "vision.train.compiled or planted_own, or the embedded language model with the induction task), so no stability jobs "
        "run; set testbed.resamples: 0 to say so in the config"]
    other["testbed"]["resamples"] = 0
    assert testbed.testbed_notes(other) == []
    one = copy.deepcopy(default)
    one["language"]["enabled"] = False  # the vision truth alone: its stability jobs run, nothing to say
    assert testbed.testbed_notes(one) == []


def test_the_equal_footing_keys_default_to_the_pre_registration_and_reach_the_stage() -> None:
    """testbed.equal_footing (issue 59): the schema's defaults are experiments/fair_testbed.yaml's equal_footing
    block (both halves), the stability jobs get them as options, the outer resamples and seed are testbed's own."""
    default = _default()
    registered = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())
    keys = ("inner_resamples", "inner_seed", "q", "z", "tie_seed")
    for half in ("language", "vision"):
        assert default["testbed"]["equal_footing"] == {k: registered[half]["equal_footing"][k] for k in keys}
    assert testbed.equal_footing_options(default["testbed"]) == (
        "--inner-resamples 20 --inner-seed 1 --consensus-q 0.9 --interval-z 1.96 --tie-seed 0")
    other = copy.deepcopy(default)
    other["testbed"]["equal_footing"].update(inner_resamples=7, inner_seed=5, q=0.95, z=2.5, tie_seed=3)
    assert testbed.equal_footing_options(other["testbed"]) == (
        "--inner-resamples 7 --inner-seed 5 --consensus-q 0.95 --interval-z 2.5 --tie-seed 3")


@pytest.mark.parametrize("key, value, words", [
    ("inner_resamples", 1, "an integer from 2 to 10000"),
    ("inner_resamples", 10001, "an integer from 2 to 10000"),
    ("q", 0.5, "a number in (0.5, 1]"),
    ("q", 1.01, "a number in (0.5, 1]"),
    ("z", 0, "a positive finite number"),
    ("z", float("inf"), "a positive finite number"),
])  # fmt: skip
def test_an_equal_footing_key_out_of_range_is_refused_by_name_and_range(key, value, words) -> None:
    """The schema refuses each (its bounds), and check_config's check names the key and its range in words for a
    config that reaches it unvalidated; the schema's bounds are the stage's (MAX_INNER_RESAMPLES)."""
    from snakemake.exceptions import WorkflowError

    from certified_circuits.analysis.equal_footing import MAX_INNER_RESAMPLES
    from certified_circuits.pipeline.config import check_equal_footing
    from certified_circuits.pipeline.config_errors import ConfigError

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["testbed"]["properties"]["equal_footing"]["properties"]
    assert schema["inner_resamples"]["maximum"] == MAX_INNER_RESAMPLES
    bad = yaml.safe_load((ROOT / "config.yaml").read_text())
    bad.setdefault("testbed", {})["equal_footing"] = {key: value}
    if value != float("inf"):  # infinity: require_finite's, before the schema's bounds matter
        with pytest.raises(WorkflowError, match=key):
            validate(bad, str(SCHEMA), set_default=True)
    with pytest.raises(ConfigError, match=rf"testbed\.equal_footing\.{key} = .* is invalid: {re.escape(words)}"):
        check_equal_footing({key: value})
    check_equal_footing({})  # every key left to the schema's defaults
