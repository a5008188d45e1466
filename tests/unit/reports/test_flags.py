"""Degenerate-result flags (reports/flags.py): hand-built tables whose flags are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certified_circuits.core.planning import plan
from certified_circuits.core.setting import Setting
from certified_circuits.pipeline.plans.setting_plans import plan_records
from certified_circuits.reports import flags as fl
from certified_circuits.reports.flags import Flag, certificate_flags, curve_flags, flag_tags

K = [0.1, 0.2, 0.3]


def curves(**overrides: dict) -> pd.DataFrame:
    """A healthy curves.csv of one (experiment, scorer, eval set): three methods that differ and vary with K,
    and the full model's reference line (constant by construction, well above chance)."""
    methods = {
        "baseline": dict(cacc=[0.5, 0.6, 0.7], balanced_accuracy=[0.6, 0.7, 0.8], false_positive_rate=[0.3, 0.2, 0.1],
                         k_effective=[0.1, 0.2, 0.3]),
        "majority": dict(cacc=[0.55, 0.65, 0.72], balanced_accuracy=[0.62, 0.71, 0.8], false_positive_rate=[0.3, 0.21, 0.1],
                         k_effective=[0.1, 0.2, 0.3]),
        "certified": dict(cacc=[0.6, 0.7, 0.8], balanced_accuracy=[0.7, 0.75, 0.85], false_positive_rate=[0.2, 0.2, 0.1],
                          k_effective=[0.05, 0.1, 0.2]),
        "full": dict(cacc=[0.9] * 3, balanced_accuracy=[0.9] * 3, false_positive_rate=[0.1] * 3, k_effective=[1.0] * 3),
    }
    for method, columns in overrides.items():
        methods[method] = {**methods[method], **columns}
    rows = [dict(experiment="world", scorer="grad", eval_set="id", method=method, k_target=k,
                 **{name: values[i] for name, values in columns.items()}, n_concepts=4)
            for method, columns in methods.items() for i, k in enumerate(K)]
    return pd.DataFrame(rows)


def codes(found: list[Flag]) -> list[str]:
    return [f.code for f in found]


def test_healthy_table_gives_no_flags():
    assert curve_flags(curves()) == []


def test_identical_curves_are_flagged_and_a_1e6_difference_is_not():
    same = curve_flags(curves(certified=dict(cacc=[0.5, 0.6, 0.7])), where="run")
    assert codes(same) == ["identical-curves"]
    assert same[0].where == "run / world / scorer grad / eval_set id"
    assert "baseline and certified" in same[0].message and "3 shared K" in same[0].message
    assert curve_flags(curves(certified=dict(cacc=[0.5, 0.6 + 1e-6, 0.7]))) == []


def test_identical_needs_two_shared_k():
    table = curves(certified=dict(cacc=[0.5, 0.6, 0.7]))
    table = table[(table.method != "certified") | (table.k_target == 0.1)]
    assert curve_flags(table) == []


def test_model_at_chance_binary_rule():
    # balanced accuracy 0.52 <= 0.5 + 0.05: at chance; 0.56 is not
    table = curves(full=dict(balanced_accuracy=[0.52] * 3))
    found = curve_flags(table)
    assert codes(found) == ["model-at-chance"]
    assert found[0].where == "world / scorer grad / eval_set id"
    assert "balanced_accuracy is 0.52" in found[0].message
    assert curve_flags(curves(full=dict(balanced_accuracy=[0.56] * 3))) == []


def test_model_at_chance_one_over_n_classes():
    table = curves(full=dict(cacc=[0.14] * 3)).drop(columns=["balanced_accuracy"])
    assert curve_flags(table) == []  # chance of the argmax accuracy unknown
    assert codes(curve_flags(table, n_classes=10)) == ["model-at-chance"]  # 0.14 <= 0.1 + 0.05
    assert curve_flags(curves(full=dict(cacc=[0.16] * 3)).drop(columns=["balanced_accuracy"]), n_classes=10) == []
    with_column = table.assign(n_classes=10)
    assert codes(curve_flags(with_column)) == ["model-at-chance"]


def test_empty_certified_circuit_is_flagged_once():
    # certified keeps nothing: its cACC is the empty model's at every K (constant, but not flagged twice)
    table = curves(certified=dict(k_effective=[0.0] * 3, cacc=[0.1] * 3, balanced_accuracy=[0.5] * 3,
                                  false_positive_rate=[0.0] * 3))
    found = curve_flags(table)
    assert codes(found) == ["empty-circuit"]
    assert found[0].where.endswith("method certified")
    assert "certified-circuits plan" in found[0].fix


def test_high_false_positive_rate():
    found = curve_flags(curves(baseline=dict(false_positive_rate=[0.96, 0.5, 0.2])))
    assert codes(found) == ["high-fpr"]
    assert "at 1 of 3 K" in found[0].message and "0.96" in found[0].message
    assert found[0].where.endswith("method baseline")
    assert curve_flags(curves(baseline=dict(false_positive_rate=[0.949, 0.5, 0.2]))) == []


def test_constant_quantity_names_its_value():
    found = curve_flags(curves(majority=dict(cacc=[0.9412] * 3)))
    assert codes(found) == ["constant-quantity"]
    assert found[0].message.startswith("cacc = 0.9412 at every K")
    # a range of 1e-6 is not constant
    assert curve_flags(curves(majority=dict(cacc=[0.9412, 0.9412 + 1e-6, 0.9412]))) == []


def test_sufficiency_table_groups_by_concept():
    table = curves().rename(columns={"cacc": "accuracy"})
    table = pd.concat([table.assign(concept="a"), table.assign(concept="b")], ignore_index=True)
    b_certified = (table.concept == "b") & (table.method == "certified")
    table.loc[b_certified, "accuracy"] = table.loc[(table.concept == "b") & (table.method == "baseline"), "accuracy"].to_numpy()
    found = curve_flags(table)
    assert codes(found) == ["identical-curves"]
    assert "concept b" in found[0].where and "accuracy" in found[0].message


def test_curve_table_needs_method_and_k():
    with pytest.raises(ValueError, match="method"):
        curve_flags(pd.DataFrame({"k_target": [0.1]}))


# ------------------------------------------------------------------------------------------ certificates

ATTRS = {"n_examples": 40, "p_del": 0.6, "tau": 0.95, "n": 1000, "alpha": 0.001}


def test_certificate_with_in_components_is_healthy():
    decision = np.array([[1, 0, -1, -1], [0, 0, -1, 1]], np.int8)
    assert certificate_flags(decision, {**ATTRS, "plan_verdict": "ok", "plan_warnings": ""}, "c") == []


def test_certified_nothing_every_abstain_and_some_out():
    abstain = certificate_flags(np.full((2, 4), -1, np.int8), ATTRS, "world / concept a")
    assert codes(abstain) == ["certified-nothing"]
    assert "every component abstained" in abstain[0].message and "of 2 K" in abstain[0].message
    assert "`bin/certified-circuits plan --examples 40 --components 4 --p-del 0.6 --tau 0.95 --alpha 0.001 --n 1000`" in abstain[0].fix
    some_out = certificate_flags(np.array([[0, -1, -1, 0], [-1, -1, -1, 0]], np.int8), ATTRS, "w")
    assert "2 of 4 components are certified OUT" in some_out[0].message
    one_d = certificate_flags(np.array([0, -1, 0], np.int8), {}, "w")
    assert codes(one_d) == ["certified-nothing"] and "of 1 K" in one_d[0].message


def test_plan_warnings_become_flags():
    the_plan = plan(100, 336, Setting(p_del=0.99, tau=0.9, n=1000))
    problems = the_plan.problems()
    assert problems and the_plan.verdict == "marginal"
    attrs = {**ATTRS, "plan_verdict": the_plan.verdict, "plan_warnings": "\n".join(problems)}
    found = certificate_flags(np.array([[0, 0, -1]], np.int8), attrs, "lang / ioi")
    assert codes(found) == ["plan"] * len(problems) + ["certified-nothing"]
    assert found[0].message.startswith("plan marginal: IN cannot be certified")
    assert "Fix:" not in found[0].message and found[0].fix.startswith("use at least")


# ---------------------------------------------------------------------------------------------- outputs


def test_line_is_one_markdown_safe_line():
    flag = Flag("plan", "a | b", "two\nlines", "do x")
    assert flag.line() == "a | b: two lines Fix: do x"
    assert Flag("plan", "", "m.", "f.").line() == "m. Fix: f."


def test_flag_tags_count_and_limit():
    found = [Flag("empty-circuit", "a", "m", "f"), Flag("empty-circuit", "b", "m", "f"), Flag("plan", "c", "m", "f")]
    assert flag_tags(found) == {"cc.flag.empty-circuit": "2: a; b", "cc.flag.plan": "1: c"}
    many = [Flag("plan", "x" * 100 + str(i), "m", "f") for i in range(200)]
    value = flag_tags(many)["cc.flag.plan"]
    assert len(value) <= fl.TAG_LIMIT and value.startswith("200: ") and value.endswith("more)")
    assert flag_tags([]) == {}


def test_a_stress_set_at_chance_is_flagged_as_expected_not_as_a_broken_model():
    table = curves(full=dict(balanced_accuracy=[0.5] * 3)).assign(eval_set="adversarial")
    found = curve_flags(table)
    assert codes(found) == ["model-at-chance"]
    assert found[0].where == "world / scorer grad / eval_set adversarial (stress set)"
    assert "as expected" in found[0].message and "filtered to the model's failures" in found[0].message
    healthy_set = curve_flags(table.assign(eval_set="context_shift"))
    assert "as expected" not in healthy_set[0].message and "train the model" in healthy_set[0].fix


# ------------------------------------------------------------------------------- the run's one list (issue 35)


def _config_plan(where: str, key: str, n_examples: int, p_del: float, tau: float):
    from certified_circuits.pipeline.plans.setting_plans import ConfigPlan

    return ConfigPlan(where, key, plan(n_examples, 180, Setting(p_del=p_del, tau=tau, n0=100, n=1000, alpha=0.001)))


def test_plan_records_carry_each_problem_with_its_setting_and_fix():
    sweep = _config_plan("vision world, radius sweep |D| = 50", "vision.radius_sweep (size 50, p_del 0.948)", 50, 0.948, 0.95)
    healthy = _config_plan("vision world, every class", "vision.certification", 50, 0.6, 0.95)
    assert healthy.plan.problems() == [] and sweep.plan.problems()  # the embedded default's sweep setting warns
    records = plan_records([healthy, sweep])
    assert len(records) == len(sweep.plan.problems())
    first = records[0]
    assert first["experiment"] == "world" and first["n_examples"] == 50 and first["p_del"] == 0.948
    assert first["radius"] == 11 and first["message"].startswith("IN cannot be certified: p_empty = p_del^|D| = 0.948^50")
    assert " Fix: " not in first["message"] and first["fix"]  # split at the fix


def test_the_run_list_keeps_a_plan_warning_once_and_round_trips(tmp_path):
    import json

    from certified_circuits.storage.store import write_certificates

    sweep = _config_plan("vision world, radius sweep |D| = 50", "vision.radius_sweep (size 50, p_del 0.948)", 50, 0.948, 0.95)
    main = _config_plan("vision world, every class", "vision.certification", 40, 0.6, 0.7)  # radius 0
    plans = tmp_path / "plan.json"
    plans.write_text(json.dumps({"format": fl.PLAN_FORMAT, "warnings": plan_records([main, sweep])}))
    # the main setting's certificate recorded its radius-0 warning itself: it is not repeated from the plan file
    from certified_circuits.core.contracts import Certificates

    attrs = {"experiment": "world", "concept": "circle", "scorer": "relevance", "tau": 0.7, "p_del": 0.6, "alpha": 0.001,
             "correction": "bonferroni", "radius": 0,
             "plan_verdict": "marginal", "plan_warnings": "\n".join(main.plan.problems())}
    cert = write_certificates(tmp_path / "cert.h5", Certificates(
        k_grid=np.array([0.5]), decision=np.array([[1, 0, -1]], np.int8), majority=np.zeros((1, 3), bool),
        pvalue=np.zeros((1, 3)), attrs=attrs))
    found = fl.run_flags(certificates=[cert], plan_warnings=plans)
    plan_flags = [f for f in found if f.code == "plan"]
    assert len(plan_flags) == len(main.plan.problems()) + len(sweep.plan.problems())
    assert [f.experiment for f in plan_flags] == ["world"] * len(plan_flags)
    assert plan_flags[0].concept == "circle" and "radius sweep |D| = 50" in plan_flags[-1].where
    fl.write_flags(tmp_path / "warnings.json", found)
    assert fl.read_flags(tmp_path / "warnings.json") == found
    doc = json.loads((tmp_path / "warnings.json").read_text())
    assert doc["counts"] == {"plan": len(plan_flags)}
    assert fl.counts_line(found) == f"Warnings: {len(plan_flags)} plan" and fl.counts_line([]) == "Warnings: none"


def test_one_line_per_kind_names_the_count_the_first_places_and_the_fix():
    found = [Flag("high-fpr", "a", "fpr 1.", "read balanced."),
             *[Flag("plan", f"class {i}", f"plan marginal: p_empty {i}.", "use more examples.") for i in range(5)]]
    lines = fl.grouped_markdown(found, "Details: the explorer.")
    assert lines[:2] == ["## Warnings", ""]
    assert lines[2] == ("- **plan** (5): class 0; class 1; class 2; and 2 more. plan marginal: p_empty 0. "
                        "Fix: use more examples.")  # most severe kind first
    assert lines[3] == "- **high-fpr** (1): a. fpr 1. Fix: read balanced."
    twice = fl.kind_line("identical-curves", [Flag("identical-curves", "id", "a and b.", "f."),
                                              Flag("identical-curves", "id", "a and c.", "f.")])
    assert twice == "**identical-curves** (2 in 1 place): id. a and b. Fix: f."
    assert lines[-2:] == ["Details: the explorer.", ""]
    assert fl.grouped_markdown([])[2].startswith("None: no degenerate result found")


def test_curve_flags_name_their_experiment_and_concept():
    table = curves(certified=dict(cacc=[0.5, 0.6, 0.7])).assign(concept="ioi")
    found = curve_flags(table)
    assert [(f.experiment, f.concept) for f in found] == [("world", "ioi")]
    assert [(f.experiment, f.concept) for f in curve_flags(curves(certified=dict(cacc=[0.5, 0.6, 0.7])))] == [("world", "")]


def test_a_selected_k_of_100_percent_is_flagged_once_per_method_and_group(tmp_path) -> None:
    import pandas as pd

    from certified_circuits.reports.flags import is_full_model, run_flags, selection_flags

    assert [is_full_model(k) for k in (1.0, 0.9999999999, 0.99, float("nan"), None, "x")] == [
        True, True, False, False, False, False]
    table = pd.DataFrame([
        dict(experiment="world", scorer=s, eval_set=e, metric="balanced_accuracy", selected_on="id_test",
             baseline_k_target=1.0 if s == "relevance" else 0.2, majority_k_target=1.0, certified_k_target=0.15)
        for s in ("relevance", "activation") for e in ("context_shift", "corruption")
    ])
    found = selection_flags(table, "mean ablation")
    # relevance: baseline and majority at 100%; activation: majority; the two eval sets share one K (no repeats)
    assert sorted(f.where for f in found) == [
        "mean ablation / world / scorer activation / method majority",
        "mean ablation / world / scorer relevance / method baseline",
        "mean ablation / world / scorer relevance / method majority",
    ]
    assert {f.code for f in found} == {"full-model-k"} and {f.experiment for f in found} == {"world"}
    assert "the K chosen by max balanced accuracy on id_test is 100%: the circuit is the whole model" in found[0].message
    path = tmp_path / "mean_ablation" / "selected_balanced_raw.csv"
    path.parent.mkdir()
    table.to_csv(path, index=False)
    assert sorted(f.where for f in run_flags(selected=[path])) == sorted(f.where for f in found)
    path.write_text("experiment,baseline_k_target\nworld,1.0\n")
    with pytest.raises(ValueError, match=r"selected_balanced_raw.csv \(--selected\) is missing column\(s\) "
                                         r"'majority_k_target', 'certified_k_target'"):
        run_flags(selected=[path])


def test_curves_at_the_full_models_value_at_every_k_are_one_saturated_flag_not_their_symptoms():
    """The compiled world: every method's cACC is the full model's 1.0 at every K, on every eval set. One flag per
    curve group without its eval set (the sets named), instead of 3 identical-curves and 3 constant-quantity per set;
    a curve that differs, or a full model that varies, is no saturation."""
    flat = {m: dict(cacc=[1.0] * 3) for m in ("baseline", "majority", "certified", "full")}
    table = pd.concat([curves(**flat).assign(eval_set=s) for s in ("id", "id_test")])
    found = curve_flags(table, where="mean ablation")
    assert codes(found) == ["saturated"]
    assert found[0].where == "mean ablation / world / scorer grad" and found[0].experiment == "world"
    assert "every method's cacc equals the full model's (1) at all 3 K on id, id_test" in found[0].message
    assert "testbed/truth_size.csv" in found[0].fix
    # the other quantities are still checked: a constant false-positive rate of a saturated group is flagged
    constant_fpr = curves(**{m: dict(cacc=[1.0] * 3, false_positive_rate=[0.2] * 3) for m in ("baseline", "certified")},
                          majority=dict(cacc=[1.0] * 3), full=dict(cacc=[1.0] * 3))
    assert codes(curve_flags(constant_fpr)) == ["saturated", "constant-quantity", "constant-quantity"]
    assert "false_positive_rate = 0.2" in curve_flags(constant_fpr)[1].message
    # one method below the model at one K: the curves can rank it, no saturation (and no other flag)
    almost = curves(**{**flat, "certified": dict(cacc=[0.9, 1.0, 1.0])})
    assert "saturated" not in codes(curve_flags(almost))
    assert codes(curve_flags(almost)) == ["identical-curves", "constant-quantity", "constant-quantity"]
