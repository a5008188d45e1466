"""The workflow's targets and the input and params functions of its rules (pipeline/plans/), called as Snakemake
calls them: ``rule all``'s targets by domain against the recorded dry runs (tests/unit/data/dry_run_jobs/), and each
named function that replaced a rule's lambda on the default, smoke and testbed configs with its exact value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.core.setting import Setting
from certified_circuits.pipeline.config import check_config
from certified_circuits.pipeline.layout import Layout
from certified_circuits.pipeline.plans import (
    certification,
    common,
    language,
    language_reports,
    reports,
    tables,
    testbed,
    vision,
    vision_reports,
)
from certified_circuits.pipeline.plans.setting_plans import config_plans

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "unit" / "data" / "dry_run_jobs"
P = Layout("R")
CIRCLE_VOTES = "R/votes/world/concept/circle/relevance/p0.6_n0100_n1000_s0.h5"
CIRCLE_CERTIFICATES = "R/certificates/world/concept/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.h5"


class Wildcards(dict):
    """A job's wildcards as Snakemake gives them: by name (``w.concept``) and as a mapping (``w["p_del"]``)."""

    def __getattr__(self, name: str) -> str:
        return self[name]


class Input(list):
    """A job's inputs as Snakemake gives them: a list of every file, and each named input by name."""

    def __init__(self, files: list[str], **named: list[str]) -> None:
        super().__init__(files)
        self.__dict__.update(named)


def load(*names: str) -> dict:
    """Config files layered as the Snakefile layers them, validated with the schema's defaults and checked."""
    config: dict = {}
    for name in names:
        _merge(config, yaml.safe_load((ROOT / name).read_text()))
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    config["concepts"] = check_config(config).concepts
    return config


def _merge(base: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


@pytest.fixture(scope="module")
def default() -> dict:
    return load("config.yaml")


@pytest.fixture(scope="module")
def smoke() -> dict:
    return load("configs/smoke.yaml")


def golden_inputs(name: str, rule: str) -> list[str]:
    """The inputs of a rule's one job in a recorded dry run, in order."""
    line = next(line for line in (GOLDEN / f"{name}.txt").read_text().splitlines() if line.startswith(f"rule {rule} |"))
    return line.split(" | ")[1].removeprefix("input: ").split(", ")


# ------------------------------------------------------------------------ rule all's targets, by domain


@pytest.mark.parametrize("name, files", [("default", ("config.yaml",)), ("smoke", ("configs/smoke.yaml",))])
def test_rule_all_asks_for_the_recorded_targets_by_domain(name: str, files: tuple[str, ...]) -> None:
    """The Snakefile's rule all (theory, vision, language, testbed, run reports) asks for what the recorded dry run's
    ``rule all`` asked for, in the same order; the summary and the explorer read every target before them."""
    config, paths = load(*files), Layout("RESULTS")
    concepts = config["concepts"]
    targets = (reports.theory_targets(paths) + vision_reports.vision_targets(config, paths, concepts)
               + language_reports.language_targets(config, paths) + testbed.testbed_targets(config, paths, concepts)
               + reports.run_targets(paths))
    assert targets == golden_inputs(name, "all")
    assert targets[-4:] == ["RESULTS/warnings.json", "RESULTS/summary.md", "RESULTS/findings.json",
                            "RESULTS/explorer/index.html"]
    assert reports.summary_targets(config, paths, concepts) == targets[:-3]
    assert reports.explorer_targets(config, paths, concepts) == targets[:-1]
    assert golden_inputs(name, "summary")[:len(targets) - 3] == targets[:-3]


def test_the_default_targets_by_domain(default: dict) -> None:
    concepts = default["concepts"]
    assert reports.theory_targets(P) == ["R/figures/theory/radius_vs_pdel.png", "R/figures/theory/samples_vs_tau.png"]
    vision_rules = vision_reports.vision_report_outputs(default, P, concepts)
    assert list(vision_rules) == ["vision_iou", "vision_attack", "vision_seed_stability", "vision_radius_sweep",
                                  "vision_features", "vision_runtime", "vision_spurious"]
    assert vision_rules["vision_features"] == {"figures": ["R/figures/world/features_circle.png",
                                                           "R/figures/world/features_star.png"]}
    vision_targets = vision_reports.vision_targets(default, P, concepts)
    assert len(vision_targets) == 6 + 2 + 3 + 2 + 3 + 2 + 1 + 2  # one table (6 files, no selection), then 7 rules
    assert vision_targets[:2] == ["R/tables/world/peaks_cacc_raw.csv", "R/tables/world/peaks_balanced_raw.csv"]
    assert language_reports.language_targets(default, P) == [
        "R/tables/tiny_gpt2/peaks_cacc_raw.csv", "R/tables/tiny_gpt2/curves.csv", "R/tables/tiny_gpt2/operating_points.csv",
        "R/tables/tiny_gpt2/curves_cacc.png", "R/tables/tiny_gpt2/selected_cacc_raw.csv", "R/graphs/tiny_gpt2",
        "R/tables/tiny_gpt2/attack/attack_raw.csv", "R/tables/tiny_gpt2/attack/attack.md",
        "R/tables/tiny_gpt2/attack/attack.png"]
    assert list(testbed.testbed_outputs(default, P, concepts)) == ["recovery_vision", "stability_vision",
                                                                   "recovery_language", "stability_language"]
    assert testbed.testbed_targets(default, P, concepts)[:4] == [
        f"R/tables/world/testbed/{f}" for f in ("recovery.csv", "recovery_auroc.csv", "recovery_summary.md", "recovery.png")]
    off = copy.deepcopy(default)
    off["vision"]["enabled"] = off["language"]["enabled"] = False
    assert vision_reports.vision_targets(off, P, []) == language_reports.language_targets(off, P) == []
    assert testbed.testbed_targets(off, P, []) == []


def test_rule_files_flattens_rule_outputs_in_order() -> None:
    assert common.rule_files({"r": {"a": "x", "b": ["y", "z"], "c": []}, "s": {"d": "w"}}) == ["x", "y", "z", "w"]
    assert common.rule_files({}) == []


# ------------------------------------------------------------------------ the report-sufficiency jobs


def test_the_sufficiency_tables_of_the_default(default: dict) -> None:
    # the default selects no vision K and runs no mean ablation (both cannot discriminate on the compiled model: they
    # run on the clean control, configs/clean_testbed.yaml); with both, the vision half gets its mean-ablation job
    jobs = tables.sufficiency_tables(default, P, default["concepts"])
    assert list(jobs) == ["vision_tables", "language_tables"]
    assert jobs["vision_tables"].options == "--by scorer --test wilcoxon --bootstrap-seed 0  --title world"
    assert jobs["vision_tables"].outputs["selected"] == []
    control = copy.deepcopy(default)
    control["vision"].update(ablations=["zero", "mean"], selection_set="id_test")
    jobs = tables.sufficiency_tables(control, P, default["concepts"])
    assert list(jobs) == ["vision_tables", "vision_tables_mean", "language_tables"]
    main, mean, lang = jobs.values()
    assert main.options == "--by scorer --test wilcoxon --bootstrap-seed 0 --select-on id_test --title world"
    assert mean.options == ("--by scorer --ablation mean --test wilcoxon --bootstrap-seed 0 --select-on id_test "
                            "--title 'world (mean ablation)'")
    assert lang.options == ("--by concept setting --best-setting --test wilcoxon --bootstrap-seed 0 --select-on "
                            "validation --title tiny_gpt2")
    assert main.inputs == mean.inputs == [f"R/sufficiency/world/concept/{c}/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.csv"
                                          for c in default["concepts"]]
    assert lang.inputs == [f"R/sufficiency/tiny_gpt2/train/induction/p{p}_n0100_n1000_s0/t0.9_a0.001_bonferroni.csv"
                           for p in ("0.95", "0.9")]
    assert list(main.outputs) == ["peaks", "balanced", "curves", "operating_points", "curves_figure", "balanced_figure",
                                  "selected"]
    assert mean.outputs["selected"] == ["R/tables/world/mean_ablation/selected_cacc_raw.csv",
                                        "R/tables/world/mean_ablation/selected_balanced_raw.csv"]
    assert list(lang.outputs) == ["peaks", "curves", "operating_points", "curves_figure", "selected"]
    assert main.captions == {"peaks": "../report/peaks.rst", "balanced": "../report/peaks.rst",
                             "curves_figure": "../report/curves.rst", "balanced_figure": "../report/balanced.rst"}
    assert all((ROOT / "rules" / caption).is_file() for job in jobs.values() for caption in job.captions.values())
    no_selection = copy.deepcopy(default)
    no_selection["language"]["selection_set"] = None
    no_selection["vision"]["ablations"] = ["zero"]
    jobs = tables.sufficiency_tables(no_selection, P, default["concepts"])
    assert list(jobs) == ["vision_tables", "language_tables"] and jobs["language_tables"].outputs["selected"] == []
    assert "--select-on" not in jobs["language_tables"].options and "  --title" in jobs["language_tables"].options


# ------------------------------------------------------------------------ the rules' input and params functions


def test_the_shared_params_functions() -> None:
    assert common.output_dir({}, ["R/tables/world/iou.csv", "R/tables/world/iou.png"]) == "R/tables/world"
    files = ["v1.h5", "c 1.h5", "v2.h5", "c2.h5"]
    assert common.pair_options("--circuits", files) == "--circuits v1.h5 'c 1.h5' --circuits v2.h5 c2.h5"
    assert common.input_pairs("--circuits", "circuits")({}, Input(["x"], circuits=files)) == (
        "--circuits v1.h5 'c 1.h5' --circuits v2.h5 c2.h5")
    assert common.input_pairs("--class")({}, Input(["a.h5", "b.h5"])) == "--class a.h5 b.h5"
    assert common.model_resources(False, "cuda:1") == (1, 16000, 120)
    assert common.output_stem({}, ["R/tables/world/runtime.csv"]) == "R/tables/world/runtime"
    tasks = Input(["R/language/tasks/ioi/train.jsonl"], model=["R/language/model/config.json"])
    assert common.input_dir()({}, tasks) == "R/language/tasks/ioi"
    assert common.input_dir(up=2)({}, tasks) == "R/language/tasks"
    assert common.input_dir("model")({}, tasks) == "R/language/model"


def test_the_certification_jobs_options(default: dict) -> None:
    paths = Layout("R")
    main = vision.vision_setting(default)
    paths.votes("world", setting=main)  # the parse-time table of the settings the workflow's paths name
    wildcards = Wildcards(experiment="world", p_del="0.6", n0="100", n="1000", seed="0", tau="0.95", alpha="0.001",
                          correction="bonferroni")
    # the configured Setting's tags (one name per part), never the wildcards' text
    assert certification.votes_job_options(paths, wildcards) == "--setting p0.6_n0100_n1000_s0"
    assert certification.decision_job_options(paths, wildcards) == "--setting t0.95_a0.001_bonferroni"
    assert certification.setting_options(main) == "--setting p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"
    assert certification.runtime_options(main) == certification.setting_options(main)
    assert certification.votes_job_k_grid(default, wildcards) == "0.05 0.1 0.15 0.2 0.25 0.3 0.4 0.5 0.75 1"  # 1.0 exact
    assert certification.votes_job_k_grid(default, Wildcards(experiment="tiny_gpt2")).startswith("0.002 0.005 0.01 ")
    with pytest.raises(KeyError, match="no enabled experiment is named 'other'; known: \\['tiny_gpt2', 'world'\\]"):
        certification.votes_job_k_grid(default, Wildcards(experiment="other"))
    with pytest.raises(KeyError, match="no configured setting is named"):  # a setting no path of the run names
        certification.decision_job_options(paths, {**wildcards, "tau": "0.9"})


def test_the_vision_jobs_functions(default: dict) -> None:
    concepts = default["concepts"]
    assert vision.vision_attribute_inputs(default, P) == [
        "R/vision/model.pt", "R/vision/world/concept.npz", "R/vision/world/context_shift.npz",
        "R/vision/world/counterfactual.npz"]
    assert vision.vision_attribute_job_invocation(default, P, Wildcards(concept="star")) == (
        vision.vision_attribute_invocation(default, P, "star"))
    assert vision.vision_sized_job_data(default, P, Wildcards(size="200", concept="star")) == (
        "R/vision/world_large/concept.npz")
    assert vision.vision_id_job_data(default, P, Wildcards()) == "R/vision/world/concept.npz"
    evaluate = Wildcards(split="concept", concept="star", p_del="0.6", n0="100", n="1000", seed="0", tau="0.95",
                         alpha="0.001", correction="bonferroni")
    paths = Layout("R")
    paths.votes("world", setting=vision.vision_setting(default))
    assert vision.vision_evaluate_job_data(default, paths, evaluate) == [
        "R/vision/world/concept.npz", "R/vision/world/id_test.npz", "R/vision/world/context_shift.npz"]
    assert vision.vision_evaluate_job_set_options(default, paths, evaluate) == (
        "--eval-set id=R/vision/world/concept.npz --eval-set id_test=R/vision/world/id_test.npz "
        "--eval-set context_shift=R/vision/world/context_shift.npz")
    assert vision.vision_evaluate_job_circuits(default, paths, evaluate)[:2] == [
        CIRCLE_VOTES.replace("circle", "star"), CIRCLE_CERTIFICATES.replace("circle", "star")]
    plugins = copy.deepcopy(default)
    plugins["vision"]["scorers"] = ["relevance", "docs.examples.my_scorers:median_activation"]
    assert vision.vision_discover_job_spec(plugins, Wildcards(scorer="median_activation")) == (
        "docs.examples.my_scorers:median_activation")
    assert vision_reports.features_job_stem(P, "world", Wildcards(concept="star")) == "R/figures/world/features_star"
    seeds = vision_reports.seed_stability_circuits(default, P, concepts)
    assert seeds[:4] == [CIRCLE_VOTES, CIRCLE_CERTIFICATES, CIRCLE_VOTES.replace("_s0", "_s1"),
                         CIRCLE_CERTIFICATES.replace("_s0", "_s1")]
    assert len(seeds) == 2 * 2 * 2  # circle and square, seeds 0 and 1, votes and certificates
    sweep = vision_reports.radius_sweep_inputs(default, P, concepts)
    assert sweep["sufficiency"] == [f"R/sufficiency/world/{split}/circle/p{p}_n0100_n1000_s0/t0.95_a0.001_bonferroni.csv"
                                    for split in ("concept", "concept_n200") for p in ("0.6", "0.92")]
    assert sweep["circuits"][:2] == [CIRCLE_VOTES, CIRCLE_CERTIFICATES] and len(sweep["circuits"]) == 8
    spurious = vision_reports.spurious_inputs(default, P, concepts)
    assert spurious["attributions"][0] == "R/attributions/world/concept/circle.h5"
    assert spurious["circuits"][:2] == [CIRCLE_VOTES, CIRCLE_CERTIFICATES] and len(spurious["circuits"]) == 20


def test_the_language_jobs_functions(smoke: dict, tmp_path: Path) -> None:
    task = Wildcards(task="ioi", concept="ioi")
    assert language.language_task_job_dir(P, task) == "R/language/tasks/ioi"
    assert language.language_eval_job_files(smoke, P, task) == [
        f"R/language/tasks/ioi/{s}.jsonl" for s in ("id_test", "ood_test", "validation")]
    assert language.language_eval_job_options(smoke, P, task) == (
        "--eval-set id_test=R/language/tasks/ioi/id_test.jsonl --eval-set ood_test=R/language/tasks/ioi/ood_test.jsonl "
        "--eval-set validation=R/language/tasks/ioi/validation.jsonl")
    inputs, params = language.language_eval_job_inputs(smoke, P), language.language_eval_job_params(smoke, P)
    assert list(inputs) == ["eval_sets", "model"] and list(params) == ["model", "eval_sets", "experiment"]
    assert inputs["eval_sets"](task) == language.language_eval_job_files(smoke, P, task)
    assert inputs["model"] == ["R/language/model/config.json"]
    assert params["eval_sets"](task) == language.language_eval_job_options(smoke, P, task)
    assert params["model"] == "--model embedded --model-path R/language/model --device auto"
    assert params["experiment"] == "tiny_gpt2"
    hf = copy.deepcopy(smoke)
    hf["language"]["task_files"] = {"mine": "/data/my tasks/mine.jsonl"}
    assert language.language_task_job_file(hf, Wildcards(task="mine")) == "/data/my tasks/mine.jsonl"
    circuits = language.mib_task_circuits(smoke, P)
    votes = "R/votes/tiny_gpt2/train/ioi/eap_ig/p0.6_n020_n100_s0.h5"
    certificates = "R/certificates/tiny_gpt2/train/ioi/eap_ig/p0.6_n020_n100_s0/t0.7_a0.05_bonferroni.h5"
    assert circuits == {"ioi": ("R/attributions/tiny_gpt2/train/ioi.h5", [(votes, certificates)])}
    assert language.mib_job_attributions(circuits, task) == "R/attributions/tiny_gpt2/train/ioi.h5"
    assert language.mib_job_circuit_files(circuits, task) == [votes, certificates]
    assert language.mib_job_circuit_options(circuits, task) == f"--circuits {votes} {certificates}"
    assert language_reports.language_circuits(smoke, P) == [
        ("tiny_gpt2", "ioi", "R/attributions/tiny_gpt2/train/ioi.h5", votes, certificates)]
    assert language_reports.language_attack_inputs(smoke, P) == [
        "R/attributions/tiny_gpt2/train/ioi.h5", "R/attributions/tiny_gpt2/ood_test/ioi.h5"]


def test_the_testbed_jobs_functions(default: dict) -> None:
    concepts = default["concepts"]
    planned = {job["out"]: job for job in testbed.stability_jobs(default, P, concepts)}
    star = Wildcards(experiment="world", split="concept", concept="star", scorer="relevance", p_del="0.6", n0="100",
                     n="1000", seed="0", tau="0.95", alpha="0.001", correction="bonferroni")
    assert testbed.stability_job_attributions(planned, P, star) == "R/attributions/world/concept/star.h5"
    assert testbed.stability_job_options(planned, P, default["testbed"], star) == (
        "--scorer relevance --k-grid 0.05 0.1 0.15 0.2 0.25 0.3 0.4 0.5 0.75 1 "
        "--setting p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni --resamples 20 --bootstrap-seed 0 "
        "--inner-resamples 20 --inner-seed 1 --consensus-q 0.9 --interval-z 1.96 --tie-seed 0")  # testbed.equal_footing
    assert testbed.ground_truth_job_path(P, star) == "R/ground_truth/world.json"
    recovery = testbed.recovery_inputs(default, P, concepts, "world")
    assert recovery["truth"] == "R/ground_truth/world.json"
    assert recovery["selected"] == []  # no vision K selected on held-out data: AUROC (and the truth's size) only
    control = copy.deepcopy(default)
    control["vision"].update(ablations=["zero", "mean"], selection_set="id_test")
    assert testbed.recovery_inputs(control, P, concepts, "world")["selected"] == [
        "R/tables/world/mean_ablation/selected_balanced_raw.csv"]
    assert recovery["circuits"][:4] == [CIRCLE_VOTES, CIRCLE_CERTIFICATES, CIRCLE_VOTES.replace("relevance", "activation"),
                                        CIRCLE_CERTIFICATES.replace("relevance", "activation")]
    assert len(recovery["circuits"]) == 10 * 2 * 2  # classes x scorers x (votes, certificates)
    language_recovery = testbed.recovery_inputs(default, P, concepts, "tiny_gpt2")
    assert language_recovery["selected"] == ["R/tables/tiny_gpt2/selected_cacc_raw.csv"]
    assert len(language_recovery["circuits"]) == 2 * 2  # two settings of the induction task
    stability = testbed.stability_table_inputs(default, P, concepts, "tiny_gpt2")
    assert stability["tables"] == [f"R/stability/tiny_gpt2/train/induction/eap_ig/p{p}_n0100_n1000_s0/"
                                   "t0.9_a0.001_bonferroni.csv" for p in ("0.95", "0.9")]
    assert stability["truth_size"][0].startswith("R/truth_size/tiny_gpt2/train/induction/eap_ig/p0.95_")
    assert stability["truth_size_equal"] == [p.replace("R/truth_size/", "R/truth_size_equal/")
                                             for p in stability["truth_size"]]
    assert testbed.testbed_outputs(default, P, concepts)["stability_language"]["truth_size_equal"] == (
        "R/tables/tiny_gpt2/testbed/truth_size_equal.csv")
    none = copy.deepcopy(default)
    none["testbed"]["resamples"] = 0
    assert list(testbed.testbed_outputs(none, P, concepts)) == ["recovery_vision", "recovery_language"]


def test_the_run_reports_inputs(default: dict, smoke: dict) -> None:
    concepts = default["concepts"]
    warnings = reports.warnings_inputs(default, P, concepts)
    assert warnings["curves"] == ["R/tables/world/curves.csv", "R/tables/tiny_gpt2/curves.csv"]
    assert warnings["selected"] == ["R/tables/tiny_gpt2/selected_cacc_raw.csv"]
    assert warnings["certificates"][0] == CIRCLE_CERTIFICATES and len(warnings["certificates"]) == 10 * 2 + 2
    summary = reports.summary_inputs(default, P, concepts)
    assert summary == {
        "ground_truths": ["R/ground_truth/world.json", "R/ground_truth/tiny_gpt2.json"],
        "truth_size": ["R/tables/world/testbed/truth_size.csv", "R/tables/tiny_gpt2/testbed/truth_size.csv"]}
    job = Input([], ground_truths=summary["ground_truths"], truth_size=summary["truth_size"][:1])
    assert reports.summary_testbed_options(default, {}, job) == (
        "--ground-truth R/ground_truth/world.json R/ground_truth/tiny_gpt2.json --truth-size "
        "R/tables/world/testbed/truth_size.csv --main-scorer relevance")
    assert reports.run_outputs(P)["summary"] == {"page": "R/summary.md", "findings": "R/findings.json"}
    language_only = copy.deepcopy(default)
    language_only["vision"]["enabled"] = False
    assert reports.summary_testbed_options(language_only, {}, Input([], ground_truths=[], truth_size=[])) == ""
    assert reports.explorer_truth_option({}, Input([], ground_truths=["R/ground_truth/world.json"])) == (
        "--ground-truth R/ground_truth/world.json")
    assert reports.explorer_truth_option({}, Input([], ground_truths=[])) == ""
    assert reports.experiment_tables(default, P) == [("vision", "world", "R/tables/world"),
                                                     ("language", "tiny_gpt2", "R/tables/tiny_gpt2")]
    assert reports.explorer_features(smoke, P, smoke["concepts"]) == [
        ("world", "circle", "R/figures/world/features_circle.png")]
    # the theory figures are drawn for the vision experiment's |D| and U (the parse-time plan of its main setting)
    plans = config_plans(smoke)
    assert reports.theory_options(plans) == "--n-components 48 --n-examples 12 --label 'vision world'"
    assert reports.theory_options([p for p in plans if p.key.startswith("language.")]) == (
        "--n-components 13 --n-examples 12 --label 'language tiny_gpt2'")  # 1 layer x 2 heads: 13 edges
    assert reports.theory_options([]) == ""


def test_the_attack_jobs_of_both_halves(default: dict, tmp_path: Path) -> None:
    """One report-attack rule per half (the rules/reports.smk loop): the vision one waits for the filter checkpoint,
    the language one certifies every task at the first task's first setting."""
    metrics = tmp_path / "calibration.json"
    metrics.write_text("{}")  # no filtered set among the re-discovery sets: n_ood_per_class images each
    jobs = reports.attack_jobs(default, P, default["concepts"], lambda: str(metrics))
    assert list(jobs) == ["vision_attack", "language_attack"]
    vision_job, language_job = jobs["vision_attack"], jobs["language_attack"]
    assert vision_job["inputs"](Wildcards())[:2] == ["R/attributions/world/concept/circle.h5",
                                                    "R/attributions/world/context_shift/circle.h5"]
    assert vision_job["options"] == (
        "--scorer relevance --k-grid 0.25 0.5 0.75 --setting p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni "
        "--multiples 1 2 4 --trials 3 --attack-seed 0")
    assert vision_job["outputs"] == {"table": "R/tables/world/attack/attack_raw.csv",
                                     "summary": "R/tables/world/attack/attack.md", "figure": "R/tables/world/attack/attack.png"}
    assert language_job["inputs"] == ["R/attributions/tiny_gpt2/train/induction.h5",
                                      "R/attributions/tiny_gpt2/ood_test/induction.h5"]
    assert language_job["options"].startswith("--scorer eap_ig --k-grid 0.25 0.5 0.75 --setting p0.95_n0100_n1000_s0/")
    assert (vision_job["category"], language_job["category"]) == ("Vision", "Language")
    off = copy.deepcopy(default)
    off["vision"]["attack"]["enabled"] = off["language"]["attack"]["enabled"] = False
    assert reports.attack_jobs(off, P, default["concepts"], lambda: str(metrics)) == {}


def test_every_setting_of_the_workflow_comes_from_its_domain_builder(default: dict) -> None:
    """vision_setting and language_settings build the workflow's settings (every other place asks them)."""
    assert vision.vision_setting(default) == Setting(p_del=0.6, n0=100, n=1000, seed=0, tau=0.95, alpha=0.001)
    assert language.language_settings(default, "induction") == [
        Setting(p_del=p, n0=100, n=1000, seed=0, tau=0.9, alpha=0.001) for p in (0.95, 0.9)]
