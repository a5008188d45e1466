"""The testbed's plan (pipeline/plans/testbed.py; issue 45): a testbed key that runs nothing is said on stderr
(``testbed.resamples`` without an experiment that has a ground truth), never ignored."""

from __future__ import annotations

import copy

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
