"""The workflow plans every setting of a config exactly at parse time (pipeline/plans/setting_plans.py, issue 26)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

import certified_circuits as cc
from certified_circuits.language.graph import n_edges_formula
from certified_circuits.pipeline.plans.setting_plans import PlanConfigError, check_config_plans, config_plans, plan_command, plan_tags
from tests.helpers.config import merged_config

ROOT = Path(__file__).resolve().parents[3]


def load(name: str, **changes) -> dict:
    """A config file with the schema's defaults filled in, as the Snakefile sees it."""
    config = yaml.safe_load((ROOT / name).read_text())
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


def by_key(plans):
    return {p.key: p for p in plans}


def test_the_embedded_default_plans_every_setting_ok_and_the_clean_controls_sweep_shows_where_it_stops():
    """The testbed's main comparison and its radius sweep (radius 1 and 7) can certify both ways: the default runs
    no setting that is vacuous on its own data; the clean control's sweep explores where certification stops."""
    config = load("config.yaml")
    plans = by_key(check_config_plans(config_plans(config)))
    vision = plans["vision.certification"].plan
    # the compiled marked ResNet: 4 stages of 10 classes x (1 badge + 2 x 4 cue chains) + 8 distractors = 98 channels
    # (the checkpoint vision-compile writes has them: tests/unit/vision/test_compiled.py)
    assert (vision.n_examples, vision.n_components) == (50, 4 * (10 * (1 + 2 * 4) + 2 * 4)) == (50, 392)
    assert vision.verdict == "ok" and vision.radius == 1 and vision.can_certify_in and vision.can_certify_out
    clean_config = merged_config(ROOT / "config.yaml", ROOT / "configs" / "clean_testbed.yaml")
    validate(clean_config, str(ROOT / "config.schema.yaml"), set_default=True)
    clean = by_key(check_config_plans(config_plans(clean_config)))
    # the clean control's planted world ResNet: widths 10 * own + shared = 16, 36, 68, 60
    assert clean["vision.certification"].plan.n_components == 16 + 36 + 68 + 60
    language_u = n_edges_formula(2, 8)  # the noisy compiled induction model: 2 layers x 8 heads
    assert language_u == 310
    for key, radius in (("language.settings.induction[0]", 9), ("language.settings.induction[1]", 4)):
        p = plans[key].plan
        assert (p.n_examples, p.n_components, p.radius) == (100, language_u, radius)
        assert p.verdict == "ok" and p.can_certify_in and p.can_certify_out
    assert [k for k, p in plans.items() if p.plan.verdict != "ok"] == []
    assert plans["vision.radius_sweep (size 50, p_del 0.92)"].plan.radius == 7
    assert plans["vision.radius_sweep (size 50, p_del 0.92)"].plan.can_certify_in
    tags = plan_tags(list(plans.values()))
    assert tags["cc.plan.verdict"] == "ok" and not any(k.startswith("cc.plan.warning.") for k in tags)
    # the clean control's sweep at |D| = 50 and p_del 0.948: 0.948^50 = 0.069 > 1 - tau = 0.05, IN impossible
    marginal = sorted(k for k, p in clean.items() if p.plan.verdict != "ok")
    assert marginal == ["vision.radius_sweep (size 50, p_del 0.948)"]
    sweep = clean["vision.radius_sweep (size 50, p_del 0.948)"].plan
    assert not sweep.can_certify_in and sweep.radius == 11


def test_the_paper_setting_plans_with_the_architectures_and_gpt2_small(tmp_path):
    config = load("configs/paper.yaml")
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 12, "n_head": 12, "model_type": "gpt2"}))
    config["language"]["model_path"] = str(tmp_path)
    plans = config_plans(config)
    vision = by_key(plans)["vision.certification"].plan
    assert (vision.n_examples, vision.n_components) == (50, 3840) and vision.verdict == "ok"
    language = [p.plan for p in plans if p.key.startswith("language.settings.ioi[")]
    assert {p.n_components for p in language} == {32491}
    assert len(language) == 9
    # p_del 0.99 with 100 prompts: IN impossible at every tau of the grid; 0.85 and 0.95 possible
    assert sorted({p.setting.p_del for p in language if not p.can_certify_in}) == [0.99]


def test_a_config_that_certifies_nothing_is_refused_with_the_key_the_numbers_and_a_command():
    config = load("configs/smoke.yaml")
    bad = copy.deepcopy(config)
    bad["vision"]["certification"]["n"] = 5  # tau 0.7 needs n >= min_samples over 48 channels
    with pytest.raises(PlanConfigError) as error:
        check_config_plans(config_plans(bad))
    text = str(error.value)
    p = cc.plan(12, 48, cc.Setting.from_config(bad["vision"]["certification"]))
    assert p.vacuous
    assert f"min_samples = {p.min_samples}" in text and "vision.certification" in text
    assert plan_command(p) in text
    check_config_plans(config_plans(config))  # the smoke config itself certifies


def test_plan_command_prints_the_same_plan(capsys):
    from certified_circuits.cli.main import main

    p = cc.plan(100, 149, cc.Setting(p_del=0.99, tau=0.9))
    argv = plan_command(p).split()[1:]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert str(p) in out
    assert "settings that reach radius 50" in out


def test_hf_task_files_train_sizes_set_the_plans_examples(tmp_path):
    config = load("configs/custom.yaml")
    config["vision"]["enabled"] = False
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4}))
    config["language"].update(enabled=True, model_path=str(tmp_path), tasks=["mine"], settings={}, task_files={"mine": "x.csv"})
    config["language"]["certification"].update(tau=0.9, p_del=0.95)
    [planned] = config_plans(config, train_sizes={"mine": 38})
    assert planned.plan.n_examples == 38 and planned.plan.n_components == n_edges_formula(2, 4)
    assert not planned.plan.can_certify_in  # 0.95^38 = 0.142 > 1 - tau
    assert "upper bound" in planned.note
