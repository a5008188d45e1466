"""The truth verified per component (analysis/component_truth.py): the split rule against a brute force over every
threshold, on hand-made and random effects, and the ground-truth block it writes, read back by the one reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from certified_circuits.analysis.component_truth import (
    RATIO,
    check_block,
    effect_summary,
    per_component_block,
    split_truth,
)
from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT, read_ground_truth


def reference_split(effects: list[float], planted: list[bool], ratio: float) -> tuple[set[int], bool, float]:
    """Independent reference of the rule, with plain loops: epsilon over the non-planted, delta = ratio * epsilon."""
    outside = [e for e, p in zip(effects, planted) if not p]
    epsilon = max(outside) if outside else 0.0
    if epsilon > 0:
        delta = ratio * epsilon
    else:
        positive = [e for e, p in zip(effects, planted) if p and e > 0]
        delta = min(positive) if positive else float("inf")
    kept = {i for i, (e, p) in enumerate(zip(effects, planted)) if p and e >= delta and e > 0}
    if not kept:
        return {i for i, p in enumerate(planted) if p}, False, delta
    grey = [i for i, (e, p) in enumerate(zip(effects, planted)) if p and i not in kept and e > epsilon]
    return kept, len(grey) <= 0.1 * len(kept), delta


def test_a_hand_made_concept_keeps_the_strong_planted_components_and_drops_the_weak_one() -> None:
    # planted: 0.9, 0.6, 0.5, 0.02 (weak); outside: 0.08, 0.1, 0.0 -> epsilon 0.1, delta 0.5
    effects = np.array([0.9, 0.6, 0.5, 0.02, 0.08, 0.1, 0.0])
    planted = np.array([True, True, True, True, False, False, False])
    split = split_truth(effects, planted)
    assert split.kept.tolist() == [True, True, True, False, False, False, False]
    assert split.delta == pytest.approx(0.5) and split.epsilon == 0.1 and split.passed
    assert split.weakest == 0.5 and split.ratio == pytest.approx(5.0)
    # a stronger outsider (0.2): delta 1.0, and no planted component reaches it
    effects[5] = 0.2
    failed = split_truth(effects, planted)
    assert not failed.passed and failed.kept.tolist() == planted.tolist() and failed.epsilon == pytest.approx(0.2)
    assert np.isnan(failed.ratio)


def test_the_clean_regime_keeps_every_planted_component_with_an_effect() -> None:
    split = split_truth(np.array([0.5, 0.5, 0.05, 0.0]), np.array([True, True, True, False]))
    assert split.kept.tolist() == [True, True, True, False] and split.epsilon == 0.0 and split.delta == 0.05
    assert split.ratio == float("inf")
    zero = split_truth(np.array([0.4, 0.0, 0.0]), np.array([True, True, False]))
    assert zero.kept.tolist() == [True, False, False]  # a planted component with no effect is not true
    nothing = split_truth(np.array([0.0, 0.0]), np.array([True, False]))
    assert not nothing.passed  # an effect of 0 is no evidence


@pytest.mark.parametrize("seed", range(40))
def test_the_rule_equals_the_reference_on_random_concepts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    u = int(rng.integers(2, 12))
    effects = np.round(rng.exponential(size=u) * rng.choice([0.0, 0.01, 1.0], size=u), 3)  # zeros and ties happen
    planted = rng.random(u) < 0.5
    planted[int(rng.integers(u))] = True
    ratio = float(rng.choice([1.0, 2.0, RATIO]))
    kept, passed, delta = reference_split(effects.tolist(), planted.tolist(), ratio)
    split = split_truth(effects, planted, ratio)
    assert set(np.flatnonzero(split.kept).tolist()) == kept and split.passed == passed
    assert split.delta == pytest.approx(delta)
    if passed:
        assert split.weakest >= ratio * split.epsilon


def test_bad_effects_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        split_truth(np.array([0.1, -0.2]), np.array([True, False]))
    with pytest.raises(ValueError, match="no planted component"):
        split_truth(np.array([0.1, 0.2]), np.array([False, False]))
    with pytest.raises(ValueError, match="same 1-D shape"):
        split_truth(np.array([0.1, 0.2]), np.array([True]))


def _truth_file(tmp_path: Path, block: dict, components: list[str]) -> Path:
    doc = {"format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 4,
           "concepts": {"circle": {"components": components, "verification": {"passed": True,
                                                                               "per_component": block}}}}
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_block_is_written_and_read_back_by_the_one_reader(tmp_path: Path) -> None:
    names = ["layer1.0", "layer1.1", "layer2.0", "layer2.1"]
    effects = np.array([0.8, 0.01, 0.4, 0.05])
    planted = np.array([True, True, True, False])
    split = split_truth(effects, planted)
    block = per_component_block(names, effects, planted, split, metric="class logit", ablation="mean",
                                unit="the whole truth's effect")
    assert block["dropped"] == ["layer1.1"] and block["delta"] == pytest.approx(0.25) and block["epsilon"] == 0.05
    assert block["ratio"] == pytest.approx(8.0) and block["passed"] is True  # the weakest true effect 0.4 / 0.05
    truth = read_ground_truth(_truth_file(tmp_path, block, ["layer1.0", "layer2.0"]))
    assert truth.concepts["circle"] == ("layer1.0", "layer2.0")
    assert truth.verification["circle"]["per_component"]["effects"]["layer1.1"] == 0.01
    assert effect_summary(block["effects"], truth.concepts["circle"]) == {
        "truth": {"min": 0.4, "median": pytest.approx(0.6), "max": 0.8, "n": 2},
        "non_truth": {"min": 0.01, "median": pytest.approx(0.03), "max": 0.05, "n": 2}}


@pytest.mark.parametrize("change, problem", [
    (lambda b: b.pop("epsilon"), "lacks ['epsilon']"),
    (lambda b: b.update(passed="true"), "per_component.passed is 'true', expected true or false"),
    (lambda b: b["effects"].update({"layer1.0": -0.1}), "finite effect >= 0"),
    (lambda b: b["effects"].pop("layer2.0"), "have no effect"),
    (lambda b: b.update(dropped=["layer1.0"]), "but it lists true ones: ['layer1.0']"),
    (lambda b: b.update(delta=0.7), "does not describe this truth"),
    (lambda b: b.update(epsilon=0.01), "does not describe this truth"),
    # the rule the block states, checked on read (issue 53): delta below epsilon, a negative delta, a ratio of 1, a
    # true component with no effect, a failed block under a passed concept
    (lambda b: b.update(epsilon=0.05, delta=0.02), "delta 0.02 is not required_ratio x epsilon = 0.25"),
    (lambda b: b.update(delta=-0.25), "per_component.delta is -0.25, expected a finite number >= 0"),
    (lambda b: b.update(required_ratio=1), "required_ratio is 1.0; the truth rule needs delta >= 5.0 x epsilon"),
    (lambda b: b["effects"].update({"layer2.0": 0.0}), "true component 'layer2.0' has effect 0.0, below delta 0.25"),
    (lambda b: b.update(epsilon="0.05"), "per_component.epsilon is '0.05', expected a finite number >= 0"),
])
def test_a_block_that_does_not_describe_its_truth_is_refused(tmp_path: Path, change, problem: str) -> None:
    names = ["layer1.0", "layer1.1", "layer2.0", "layer2.1"]
    effects = np.array([0.8, 0.01, 0.4, 0.05])
    planted = np.array([True, True, True, False])
    block = per_component_block(names, effects, planted, split_truth(effects, planted), metric="class logit",
                                ablation="mean", unit="u")
    change(block)
    with pytest.raises(ValueError, match=r"gt.json: concept 'circle'.*" + problem.replace("[", r"\[").replace(
            "]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        read_ground_truth(_truth_file(tmp_path, json.loads(json.dumps(block, allow_nan=True)),
                                      ["layer1.0", "layer2.0"]))
    with pytest.raises(ValueError):
        check_block(block, ["layer1.0", "layer2.0"], "here")


def test_a_clean_truth_with_float_rounding_outside_reads_back(tmp_path: Path) -> None:
    """A clean planted model's non-planted channels can move the logit by float rounding (7.2e-08 measured on a
    seed-0 model of the noise sweep's world): split_truth counts effects below EFFECT_FLOOR (1e-6) as 0, so epsilon
    is 0, and the reader's check must agree (it once compared epsilon 0 with the raw 7.2e-08 and refused the file).
    Above the floor, an epsilon of 0 is still refused."""
    names = ["layer1.0", "layer1.1", "layer2.0", "layer2.1"]
    planted = np.array([True, True, True, False])
    effects = np.array([0.8, 0.01, 0.4, 7.2e-08])
    split = split_truth(effects, planted)
    assert split.epsilon == 0.0 and split.kept.tolist() == [True, True, True, False]
    block = per_component_block(names, effects, planted, split, metric="class logit", ablation="mean", unit="u")
    truth = read_ground_truth(_truth_file(tmp_path, block, ["layer1.0", "layer1.1", "layer2.0"]))
    assert truth.concepts["circle"] == ("layer1.0", "layer1.1", "layer2.0")
    block["effects"]["layer2.1"] = 2e-6  # above the floor: no longer rounding, and epsilon 0 does not describe it
    with pytest.raises(ValueError, match="does not describe this truth"):
        check_block(block, ["layer1.0", "layer1.1", "layer2.0"], "here")


def test_the_grey_zone_is_named_and_more_than_a_tenth_of_the_truth_fails_the_concept() -> None:
    """epsilon 0.1, delta 0.5: planted 0.3 lies between (grey), planted 0.05 below epsilon (null)."""
    planted = np.array([True] * 11 + [True, True, False])
    effects = np.array([0.9] * 11 + [0.3, 0.05, 0.1])
    split = split_truth(effects, planted)
    assert split.kept.sum() == 11 and np.flatnonzero(split.grey).tolist() == [11]
    assert split.passed  # 1 grey of 11 true: within 10%
    effects[:2] = 0.2  # two true components become grey: 3 grey of 9 true
    split = split_truth(effects, planted)
    assert split.kept.sum() == 9 and split.grey.sum() == 3 and not split.passed
    from certified_circuits.analysis.component_truth import grey_components

    names = [f"c{i}" for i in range(14)]
    block = per_component_block(names, effects, planted, split, metric="m", ablation="a", unit="u")
    assert grey_components(block) == ["c0", "c1", "c11"]


def test_a_failed_block_under_a_passed_concept_is_refused(tmp_path: Path) -> None:
    names = ["layer1.0", "layer1.1", "layer2.0", "layer2.1"]
    effects = np.array([0.8, 0.01, 0.4, 0.05])
    planted = np.array([True, True, True, False])
    block = per_component_block(names, effects, planted, split_truth(effects, planted), metric="class logit",
                                ablation="mean", unit="u")
    block["passed"] = False
    check_block(block, ["layer1.0", "layer2.0"], "here")  # alone, a failed block is a valid (failed) record
    with pytest.raises(ValueError, match="gt.json: concept 'circle': verification.passed is true but "
                                         "verification.per_component.passed is false"):
        read_ground_truth(_truth_file(tmp_path, block, ["layer1.0", "layer2.0"]))
