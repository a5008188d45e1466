"""The workflow's planning functions (pipeline/plans/): which jobs exist, their options and paths.

Two kinds of tests: the functions called directly on the default config (config.yaml), the smoke config
(configs/smoke.yaml) and the paper config (configs/paper.yaml), asserting exact option strings and job
lists; and the dry run of the whole workflow, whose jobs (rule, wildcards, inputs, outputs, log, shell
command) must stay those recorded in tests/unit/data/dry_run_jobs/ before the functions moved out of
rules/common.smk. Regenerate a golden list (after a deliberate change) with
``python tests/unit/pipeline/test_pipeline_jobs.py``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from certified_circuits.pipeline.plans import certification, common, language, reports, testbed, vision, vision_reports
from certified_circuits.pipeline.config import check_config
from certified_circuits.pipeline.layout import Layout

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "dry_run_jobs"
#: golden list -> the config files of its dry run (none: config.yaml, the Snakefile's default); paper_fixture is
#: configs/paper.yaml with the fixture tree of tests/helpers/paper_fixtures.py (built in a temporary folder)
DRY_RUNS = {"default": (), "smoke": ("configs/smoke.yaml",), "paper_fixture": ("configs/paper.yaml",)}
#: per-job lines of `snakemake -n -p` that vary between runs (or with the machine) and are not planned
VOLATILE = ("jobid", "reason")
#: a job waiting for a checkpoint (the default config's vision_iou) has an input function that could not run yet;
#: its params then pair up the characters of the checkpoint's pending path ("--circuits / t --circuits m p ...")
PENDING_PAIRS = re.compile(r"(?: --(circuits|class) \S \S)+")


# ------------------------------------------------------------------------ the functions, on real configs


def load(name: str) -> dict:
    """A config file with the schema's defaults filled in, as the Snakefile validates it."""
    config = yaml.safe_load((ROOT / name).read_text())
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


@pytest.fixture
def default() -> dict:
    """config.yaml after the Snakefile's checks (check_config: ~ expanded, classes resolved)."""
    config = load("config.yaml")
    config["concepts"] = check_config(config).concepts
    return config


@pytest.fixture
def smoke() -> dict:
    config = load("configs/smoke.yaml")
    config["concepts"] = check_config(config).concepts
    return config


@pytest.fixture
def paper() -> dict:
    """configs/paper.yaml as validated (its /data folders do not exist here, so check_config is not run: ~ stays)."""
    return load("configs/paper.yaml")


P = Layout("R")


def test_shell_words_are_quoted_and_numbers_exact() -> None:
    assert common.q("a b") == "'a b'" and common.q(0.5) == "0.5" and common.q("x;rm") == "'x;rm'"
    assert common.words([0.25, 1e-05, 3, "a b"]) == "0.25 1e-05 3 'a b'"
    assert common.cli_options({"n_classes": 3, "widths": [8, 16], "flag": True, "off": False, "lr": 0.001, "name": "a b"}) == (
        "--n-classes 3 --widths 8 16 --flag --lr 0.001 --name 'a b'")
    assert common.item_options("--also", [("a", "b c"), ("d", 0.6000001)]) == "--also a 'b c' --also d 0.6000001"
    assert common.chunked("abcde", 2) == [["a", "b"], ["c", "d"], ["e"]] and common.chunked([], 3) == []
    prefix = common.job_env("votes")
    assert prefix({}) == "CC_RULE=votes CC_WILDCARDS='{}' OPENBLAS_NUM_THREADS=1"
    assert prefix({"concept": "circle", "split": "concept"}, threads=4) == (
        """CC_RULE=votes CC_WILDCARDS='{"concept": "circle", "split": "concept"}' OPENBLAS_NUM_THREADS=4""")
    assert common.log_path(P, "vision_world") == "R/logs/vision_world/job.log"
    assert common.benchmark_path(P, "votes", "{concept}") == "R/benchmarks/votes/{concept}.tsv"
    assert common.local_inputs(P, ["R/vision/world/concept.npz", "/data/imagenet/val", "Rx/a"]) == ["R/vision/world/concept.npz"]


def test_every_rule_runs_one_stage_with_its_job_environment_and_log() -> None:
    """common.stage_command is every rule's shell command: the job's environment (params.job), one
    `certified-circuits` stage, its stderr to the job's log; Snakemake formats it with the job's values."""
    from types import SimpleNamespace

    from snakemake.utils import format as snakemake_format

    command = common.stage_command("certify --votes {input.votes:q} --out {output:q}")
    assert command == "{params.job} certified-circuits certify --votes {input.votes:q} --out {output:q} 2> {log:q}"
    job = SimpleNamespace(job=common.job_env("certify")({"concept": "circle"}))
    assert snakemake_format(command, params=job, input=SimpleNamespace(votes="R/votes/a b.h5"), output="R/c.h5",
                            log="R/logs/certify/c.log") == (
        """CC_RULE=certify CC_WILDCARDS='{"concept": "circle"}' OPENBLAS_NUM_THREADS=1 certified-circuits certify """
        "--votes 'R/votes/a b.h5' --out R/c.h5 2> R/logs/certify/c.log")
    for path in sorted((ROOT / "rules").glob("*.smk")):  # each rule's one shell (`use rule` inherits its parent's)
        text = path.read_text()
        rules = re.findall(r"^\s*(?:rule|checkpoint)\b", text, flags=re.M)
        assert re.findall(r"\bshell:\s*(\w*)", text) == ["stage_command"] * len(rules), path.name
        # Snakemake evaluates the shell expression when the job runs, in the Snakefile's namespace: a rule made in a
        # loop would read the loop's last values there (the circuit reports once did). Only string literals, so
        # whatever differs between rules goes through params, which are evaluated per rule.
        arguments = re.findall(r"\bshell:\s*stage_command\((.*?)\)\s*$", text, flags=re.M | re.S)
        assert len(arguments) == len(rules), path.name
        for argument in arguments:
            assert re.fullmatch(r'(\s*"[^"]*")+\s*', argument), f"{path.name}: shell: stage_command({argument})"


def test_the_default_config_plans_the_embedded_world_and_tiny_gpt2(default: dict) -> None:
    concepts = default["concepts"]
    assert concepts == ["circle", "square", "triangle", "plus", "star", "ring", "hexagon", "crescent", "bar", "ell"]
    assert vision.embedded_vision(default) and language.embedded_language(default) and not language.hf_language(default)
    assert vision.vision_model_args(default, P) == "--model world --checkpoint R/vision/model.pt --device auto"
    assert language.language_model_args(default, P) == "--model embedded --model-path R/language/model --device auto"
    assert vision.vision_model_inputs(default, P) == ["R/vision/model.pt"]
    assert language.language_model_inputs(default, P) == ["R/language/model/config.json"]
    assert vision.vision_concept_size(default) == 50
    assert common.model_resources(True, "auto") == common.model_resources(True, "cpu") == (0, 4000, 60)
    # a device that names CUDA: the stage refuses to run without it, so even the embedded model's jobs ask for a GPU
    assert common.model_resources(True, "cuda") == common.model_resources(True, "cuda:1") == (1, 4000, 60)
    # votes run no model and ask for no GPU: never the config's cuda, which would stop them on a CPU node
    assert [common.vote_device_option(d) for d in ("auto", "cpu", "cuda", "cuda:1")] == ["auto", "cpu", "auto", "auto"]
    assert [vision.vision_eval_data(default, P, s) for s in ("id", "adversarial", "anomaly", "context_shift")] == [
        "R/vision/world/concept.npz", "R/vision/adversarial.npz", "R/vision/anomaly.npz", "R/vision/world/context_shift.npz"]
    assert vision.vision_attribute_invocation(default, P, "circle") == (
        "vision-attribute --model world --checkpoint R/vision/model.pt --device auto --threads 1 "
        "--data R/vision/world/concept.npz --n-examples 50 --counterfactual R/vision/world/counterfactual.npz "
        "--concept circle --split concept --experiment world --out R/attributions/world/concept/circle.h5  "
        "--also context_shift R/vision/world/context_shift.npz R/attributions/world/context_shift/circle.h5")
    assert vision.vision_attribute_outputs(default, P, "ell") == [
        f"R/attributions/world/{s}/ell.h5" for s in ("concept", "context_shift")]
    main = vision.vision_setting(default)
    assert certification.votes_options(main) == "--setting p0.6_n0100_n1000_s0"
    assert certification.decision_options(main) == "--setting t0.95_a0.001_bonferroni"
    assert vision.vision_scorers(default, "concept", main) == ["relevance", "activation"]
    assert vision.vision_scorers(default, "concept", main.replace(p_del=0.948)) == ["relevance"]
    assert vision.vision_scorers(default, "anomaly", main) == ["relevance"]
    assert vision.vision_evaluate_sets(default, "concept", main) == ["id", "id_test", "context_shift"]
    assert vision.vision_evaluate_sets(default, "concept_n200", main) == ["id"]
    assert vision.vision_evaluate_circuits(default, P, "concept", "star", main) == [
        f"R/{kind}/world/concept/star/{scorer}/p0.6_n0100_n1000_s0{tail}"
        for scorer in ("relevance", "activation")
        for kind, tail in (("votes", ".h5"), ("certificates", "/t0.95_a0.001_bonferroni.h5"))]
    # the default evaluates zero ablation only (mean ablation is the clean control's: configs/clean_testbed.yaml);
    # with both, one evaluate job runs both, and mean ablation reads the world's train split
    assert vision.vision_ablation_options(default, P) == "--ablation zero"
    assert vision.vision_ablation_inputs(default, P) == []
    both = copy.deepcopy(default)
    both["vision"]["ablations"] = ["zero", "mean"]
    assert vision.vision_ablation_options(both, P) == (
        "--ablation zero mean --reference R/vision/world/train.npz --reference-size 1000 --seed 0")
    assert vision.vision_ablation_inputs(both, P) == ["R/vision/world/train.npz"]
    assert certification.attack_options(default["vision"]["attack"], main, "relevance") == (
        "--scorer relevance --k-grid 0.25 0.5 0.75 --setting p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni "
        "--multiples 1 2 4 --trials 3 --attack-seed 0")
    assert common.cli_options(default["vision"]["world"]) == (
        "--seed 0 --n-classes 10 --image-size 16 --n-concept-per-class 50 --n-train-per-class 1000 --cue-attributes 2 "
        "--cue-values 4")
    assert vision.vision_model_command(default) == "vision-compile --seed 0"
    assert common.cli_options(default["language"]["train"]) == "--seed 0 --compiled induction_noisy"
    assert {t: [s.tag for s in language.language_settings(default, t)] for t in default["language"]["tasks"]} == {
        "induction": ["p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni", "p0.9_n0100_n1000_s0/t0.9_a0.001_bonferroni"]}
    assert language.language_eval_sets(default, "induction") == ["id_test", "ood_test", "validation"]
    rows = reports.explorer_circuits(default, P, concepts)
    # one row per scorer of each class (the explorer's scorer switch), the main scorer first
    assert [(r[0], r[1]) for r in rows] == [("world", c) for c in concepts for _ in range(2)] + [
        ("tiny_gpt2", "induction")] * 2
    assert rows[0] == ("world", "circle", "R/attributions/world/concept/circle.h5",
                       "R/votes/world/concept/circle/relevance/p0.6_n0100_n1000_s0.h5",
                       "R/certificates/world/concept/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.h5")
    assert [r[3] for r in rows[:2]] == [f"R/votes/world/concept/circle/{s}/p0.6_n0100_n1000_s0.h5"
                                        for s in ("relevance", "activation")]
    assert [r[3:] for r in rows[:2]] == [vision.vision_circuits(default, P, "concept", "circle", scorer=s)
                                         for s in vision.vision_scorers(default, "concept", main)]
    activation_first = copy.deepcopy(default)
    activation_first["vision"]["main_scorer"] = "activation"
    assert [r[3].split("/")[-2] for r in reports.explorer_circuits(activation_first, P, ["circle"])[:2]] == [
        "activation", "relevance"]
    assert rows[-1] == ("tiny_gpt2", "induction", "R/attributions/tiny_gpt2/train/induction.h5",
                        "R/votes/tiny_gpt2/train/induction/eap_ig/p0.9_n0100_n1000_s0.h5",
                        "R/certificates/tiny_gpt2/train/induction/eap_ig/p0.9_n0100_n1000_s0/t0.9_a0.001_bonferroni.h5")
    assert vision.vision_concepts(concepts) == concepts and vision.vision_concepts(concepts, ["star"]) == ["star"]
    # MIB's grid and export choose among every setting of a task (the held-out selection picks one at run time);
    # without a selection set, a task's first setting alone
    mib_rows = language.mib_circuits(default, P)
    assert [r[1:] for r in mib_rows] == [r[2:] for r in rows if r[0] == "tiny_gpt2"]
    assert [r[0] for r in mib_rows] == ["induction"] * 2
    unselected = copy.deepcopy(default)
    unselected["language"]["selection_set"] = None
    assert language.language_selected_table(unselected, P) is None
    assert language.mib_circuits(unselected, P) == [mib_rows[0]]
    # the testbed: both experiments have a ground truth; one stability job per class (main scorer and setting) and
    # per language setting, each with the setting's options and the configured resamples
    assert testbed.ground_truth_experiments(default) == {"world": "vision", "tiny_gpt2": "language"}
    stability = testbed.stability_jobs(default, P, concepts)
    assert [(j["experiment"], j["concept"]) for j in stability] == [("world", c) for c in concepts] + [
        ("tiny_gpt2", "induction")] * 2
    assert stability[0]["out"] == "R/stability/world/concept/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.csv"
    assert stability[0]["attributions"] == "R/attributions/world/concept/circle.h5"
    assert testbed.stability_options(stability[-1], default["testbed"]) == (
        "--scorer eap_ig --k-grid " + common.words(default["language"]["k_grid"]) + " --setting "
        "p0.9_n0100_n1000_s0/t0.9_a0.001_bonferroni --resamples 20 --bootstrap-seed 0 --inner-resamples 20 "
        "--inner-seed 1 --consensus-q 0.9 --interval-z 1.96 --tie-seed 0")  # testbed.equal_footing's defaults
    assert stability[0]["truth_size_equal"] == (
        "R/truth_size_equal/world/concept/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.csv")
    no_resamples = copy.deepcopy(default)
    no_resamples["testbed"]["resamples"] = 0
    assert testbed.stability_jobs(no_resamples, P, concepts) == []


def test_the_embedded_rediscovery_waits_for_the_filter_metrics_and_keeps_classes_with_enough_images(
        default: dict, tmp_path: Path) -> None:
    """vision_iou and vision_attack's inputs: (class, OOD set) pairs with >= rediscovery_min_images images, from the
    vision_filter_ood checkpoint's per-class counts (a set it did not filter: n_ood_per_class each)."""
    default = copy.deepcopy(default)  # the filtered sets as re-discovery sets too (the default keeps them as stress sets)
    default["vision"]["rediscovery_sets"] = ["context_shift", "corruption", "adversarial", "anomaly"]
    concepts = default["concepts"]
    metrics = tmp_path / "calibration.json"
    adversarial = [0, 12, 10, 19, 1, 2, 0, 17, 3, 16]  # per class of the world, in class order
    metrics.write_text(json.dumps({"per_class_adversarial": adversarial, "per_class_anomaly": [10] * 10}))
    assert default["vision"]["rediscovery_min_images"] == 10
    counts = vision.vision_images_per_class(default, P, concepts, "adversarial", lambda: str(metrics))
    assert counts == dict(zip(concepts, adversarial))
    assert vision.vision_images_per_class(default, P, concepts, "corruption", lambda: str(metrics)) == dict.fromkeys(concepts, 100)
    pairs = vision.vision_rediscovered(default, P, concepts, lambda: str(metrics))
    assert [c for c, e in pairs if e == "adversarial"] == ["square", "triangle", "plus", "crescent", "ell"]
    assert [e for _, e in pairs] == ["context_shift"] * 10 + ["corruption"] * 10 + ["adversarial"] * 5 + ["anomaly"] * 10
    iou = vision_reports.vision_iou_circuits(default, P, concepts, lambda: str(metrics))
    assert len(iou) == 4 * len(pairs)
    assert iou[:4] == ["R/votes/world/concept/circle/relevance/p0.6_n0100_n1000_s0.h5",
                       "R/certificates/world/concept/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.h5",
                       "R/votes/world/context_shift/circle/relevance/p0.6_n0100_n1000_s0.h5",
                       "R/certificates/world/context_shift/circle/relevance/p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni.h5"]
    attack = vision_reports.vision_attack_inputs(default, P, concepts, lambda: str(metrics))  # pool: context_shift, every class
    assert attack == [f for c in concepts for f in (f"R/attributions/world/concept/{c}.h5",
                                                     f"R/attributions/world/context_shift/{c}.h5")]

    def pending() -> str:
        raise LookupError("the checkpoint has not run")

    with pytest.raises(LookupError):  # Snakemake's IncompleteCheckpointException reaches the rule unchanged
        vision_reports.vision_iou_circuits(default, P, concepts, pending)


def test_the_smoke_config_plans_two_classes_one_task_and_small_settings(smoke: dict) -> None:
    assert smoke["concepts"] == ["circle", "square"]
    assert vision.vision_concept_size(smoke) == 12
    assert vision.vision_attribute_invocation(smoke, P, "square") == (
        "vision-attribute --model world --checkpoint R/vision/model.pt --device auto --threads 1 "
        "--data R/vision/world/concept.npz --n-examples 12 --counterfactual R/vision/world/counterfactual.npz "
        "--concept square --split concept --experiment world --out R/attributions/world/concept/square.h5  "
        "--also context_shift R/vision/world/context_shift.npz R/attributions/world/context_shift/square.h5")
    main = vision.vision_setting(smoke)
    assert certification.votes_options(main) == "--setting p0.6_n020_n100_s0"
    assert certification.decision_options(main) == "--setting t0.7_a0.05_bonferroni"
    assert vision.vision_scorers(smoke, "concept", main) == ["relevance", "activation"]
    assert vision.vision_evaluate_sets(smoke, "concept", main) == ["id", "id_test", "context_shift"]
    assert common.cli_options(smoke["vision"]["world"]) == (
        "--seed 0 --n-classes 3 --image-size 32 --n-concept-per-class 12 --n-train-per-class 60 --n-test-per-class 10 "
        "--n-ood-per-class 10 --n-pool-per-class 20 --n-anomaly-pool 60")
    assert common.cli_options(smoke["vision"]["train"]) == "--seed 0 --epochs 1 --widths 8 8 16 16"
    assert common.cli_options(smoke["language"]["train"]) == "--seed 0 --steps 20 --n-layer 1 --n-head 2 --n-embd 16"
    assert certification.attack_options(smoke["vision"]["attack"], main, "relevance") == (
        "--scorer relevance --k-grid 0.5 --setting p0.6_n020_n100_s0/t0.7_a0.05_bonferroni "
        "--multiples 1 2 --trials 1 --attack-seed 0")
    assert [s.tag for s in language.language_settings(smoke, "ioi")] == ["p0.6_n020_n100_s0/t0.7_a0.05_bonferroni"]
    rows = reports.explorer_circuits(smoke, P, smoke["concepts"])
    assert [(r[0], r[1], r[3].split("/")[-2]) for r in rows] == [
        ("world", "circle", "relevance"), ("world", "circle", "activation"), ("world", "square", "relevance"),
        ("world", "square", "activation"), ("tiny_gpt2", "ioi", "eap_ig")]
    assert rows[4][2:] == ("R/attributions/tiny_gpt2/train/ioi.h5", "R/votes/tiny_gpt2/train/ioi/eap_ig/p0.6_n020_n100_s0.h5",
                           "R/certificates/tiny_gpt2/train/ioi/eap_ig/p0.6_n020_n100_s0/t0.7_a0.05_bonferroni.h5")
    # the smoke run exercises MIB's grid and export, on the setting selected on the validation prompts
    assert smoke["language"]["faithfulness"]["grid"] == "mib" and smoke["language"]["mib"]["export"]
    assert language.language_selected_table(smoke, P) == "R/tables/tiny_gpt2/selected_cacc_raw.csv"
    assert language.mib_circuits(smoke, P) == [("ioi", *rows[4][2:])]
    assert language.mib_model_name(smoke) == "tiny-gpt2"


def test_the_paper_config_plans_torchvision_and_gpt2_small_with_every_setting(paper: dict) -> None:
    assert not vision.embedded_vision(paper) and not language.embedded_language(paper) and not language.hf_language(paper)
    model = ("--model resnet101 --class-index /data/imagenet/LOC_synset_mapping.txt "
             "--weights '~/.cache/torch/hub/checkpoints/resnet101-63fe2227.pth' --device auto")
    assert vision.vision_model_args(paper, P) == model  # an unexpanded ~ stays one quoted word
    assert language.language_model_args(paper, P) == "--model gpt2 --model-path /data/hf/gpt2 --device auto"
    assert vision.vision_model_inputs(paper, P) == [] and language.language_model_inputs(paper, P) == []
    assert vision.vision_concept_size(paper) == 50
    assert paper["device"] == "auto" and common.model_resources(False, paper["device"]) == (1, 16000, 120)
    assert common.model_resources(False, "cpu") == (0, 16000, 120)
    assert vision.vision_eval_data(paper, P, "id") == "/data/imagenet/val"
    assert vision.vision_eval_data(paper, P, "imagenet_c") == "/data/imagenet-c/defocus_blur/2"
    assert common.local_inputs(P, [vision.vision_eval_data(paper, P, s) for s in ["id", *vision.rediscovery_sets(paper)]]) == []
    assert vision.vision_attribute_invocation(paper, P, "n01440764") == (
        f"vision-attribute {model} --threads 1 --data /data/imagenet/val --n-examples 50  --concept n01440764 "
        "--split concept --experiment resnet101_imagenet --out R/attributions/resnet101_imagenet/concept/n01440764.h5  "
        "--also imagenet_a /data/imagenet-a R/attributions/resnet101_imagenet/imagenet_a/n01440764.h5 "
        "--also ood_cv /data/ood-cv/wnid R/attributions/resnet101_imagenet/ood_cv/n01440764.h5 "
        "--also imagenet_c /data/imagenet-c/defocus_blur/2 R/attributions/resnet101_imagenet/imagenet_c/n01440764.h5 "
        "--also imagenet_o /data/imagenet-o R/attributions/resnet101_imagenet/imagenet_o/n01440764.h5")
    # 100 classes, 50 per attribution job: two class-group rules, in config order
    wnids = [f"n{i:08d}" for i in range(100)]
    groups = common.chunked(vision.vision_concepts(wnids), paper["vision"]["classes_per_job"])
    assert [len(g) for g in groups] == [50, 50] and groups[1][0] == "n00000050"
    main = vision.vision_setting(paper)
    assert certification.setting_options(main) == "--setting p0.6_n0100_n1000_s0/t0.95_a0.001_bonferroni"
    assert vision.vision_evaluate_sets(paper, "concept", main) == ["id", "imagenet_a", "ood_cv", "imagenet_c", "imagenet_o"]
    # the paper's language grid: tau x p_del, 9 settings per task, tau-major
    expected = [f"p{p}_n0100_n1000_s0/t{t}_a0.001_bonferroni" for t in (0.85, 0.9, 0.95) for p in (0.85, 0.95, 0.99)]
    for task in ("ioi", "ioi_hard", "greater_than"):
        assert [s.tag for s in language.language_settings(paper, task)] == expected
    assert certification.attack_options(paper["language"]["attack"], language.language_settings(paper, "ioi")[0], "eap_ig") == (
        "--scorer eap_ig --k-grid 0.25 0.5 0.75 --setting p0.85_n0100_n1000_s0/t0.85_a0.001_bonferroni "
        "--multiples 1 2 4 --trials 3 --attack-seed 0")
    rows = reports.explorer_circuits(paper, P, wnids[:2])
    n_vision = 2 * len(vision.vision_scorers_all(paper))
    assert len(rows) == n_vision + 3 * 9 and rows[0][:2] == ("resnet101_imagenet", "n00000000")
    assert rows[n_vision][:2] == ("gpt2_small", "ioi")


def test_a_folders_model_passes_only_what_the_config_sets_and_plugins_by_kind(smoke: dict, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """vision.source folders (your own model and images) and vision.scorers plugins (docs/examples/my_scorers.py)."""
    monkeypatch.chdir(ROOT)  # plugins import from the working directory, as in the workflow
    config = copy.deepcopy(smoke)
    config["vision"]["source"] = "folders"
    config["vision"]["folders"] = {"model": "convnext_tiny", "weights": "my model.pth", "class_index": "classes.txt",
                                   "root": "data/train", "ood_roots": {"blur": "data/blur"}, "concept_size": 7,
                                   "n_classes": None, "layers": ["features.1", "features.3"], "image_size": 224,
                                   "mean": [0.5, 0.5, 0.5]}
    config["vision"]["rediscovery_sets"] = ["blur"]
    config["vision"]["scorers"] = ["relevance", "docs.examples.my_scorers:taylor", "docs.examples.my_scorers:median_activation"]
    config["vision"]["main_scorer"] = "docs.examples.my_scorers:taylor"
    config["device"] = "cpu"
    model = ("--model convnext_tiny --class-index classes.txt --weights 'my model.pth' --layers features.1 features.3 "
             "--image-size 224 --mean 0.5 0.5 0.5 --device cpu")
    assert vision.vision_model_args(config, P) == model
    assert vision.vision_concept_size(config) == 7 and vision.vision_model_inputs(config, P) == []
    assert vision.vision_eval_data(config, P, "id") == "data/train" and vision.vision_eval_data(config, P, "blur") == "data/blur"
    assert vision.vision_scorer_specs(config) == {"relevance": "relevance", "taylor": "docs.examples.my_scorers:taylor",
                                                "median_activation": "docs.examples.my_scorers:median_activation"}
    assert vision.vision_main_scorer(config) == "taylor"
    assert vision.vision_additive_plugins(config) == ["docs.examples.my_scorers:taylor"]
    assert vision.vision_discovery_scorers(config) == ["median_activation"]
    assert vision.vision_attribute_invocation(config, P, "cat") == (
        f"vision-attribute {model} --threads 1 --data data/train --n-examples 7  --concept cat --split concept "
        "--experiment world --out R/attributions/world/concept/cat.h5 --scorer docs.examples.my_scorers:taylor "
        "--also blur data/blur R/attributions/world/blur/cat.h5")
    assert vision.vision_circuits(config, P, "blur", "cat")[0] == "R/votes/world/blur/cat/taylor/p0.6_n020_n100_s0.h5"


def test_an_hf_task_file_without_ood_rows_is_evaluated_on_id_test_and_validation(smoke: dict, tmp_path: Path) -> None:
    config = copy.deepcopy(smoke)
    row = {"clean": "Then, Mary and John went home. John gave a drink to", "answer": " Mary", "distractor": " John",
           "corrupted": "Then, Anna and Paul went home. Paul gave a drink to"}
    for name, splits in (("mine", ["train", "validation", "id_test"]), ("shifted", ["train", "validation", "id_test", "ood_test"])):
        (tmp_path / f"{name}.jsonl").write_text("".join(  # distinct prompts: one prompt in two splits is refused
            json.dumps({**row, "clean": f"{row['clean']} {i}", "split": s}) + "\n" for i, s in enumerate(splits)))
    config["language"].update({"source": "hf", "model_path": "/models/my lm", "tasks": ["mine", "shifted"],
                               "task_files": {t: str(tmp_path / f"{t}.jsonl") for t in ("mine", "shifted")}})
    assert language.hf_language(config) and not language.embedded_language(config)
    assert language.language_eval_sets(config, "mine") == ["id_test", "validation"]
    assert language.language_eval_sets(config, "shifted") == ["id_test", "ood_test", "validation"]
    assert language.language_model_args(config, P) == "--model hf --model-path '/models/my lm' --device auto"
    assert language.language_model_inputs(config, P) == []


def dry_run(configs: tuple[str, ...], results: Path) -> str:
    """The stdout of `snakemake -n -p` for ``configs`` with ``results_dir`` set to ``results``."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [str(BIN / "snakemake"), "-n", "-p", "--cores", "1"]
    if configs:
        command += ["--configfile", *configs]
    command += ["--config", f"results_dir={results}"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return done.stdout


def job_lines(output: str, results: Path) -> list[str]:
    """One line per job of a dry run, sorted: its rule, then every planned field (`input: ...`, `output:
    ...`, `wildcards: ...`, `resources: ...`, `Shell command: ...`) in the dry run's order, joined by
    ' | '; the results folder reads RESULTS, and run-specific fields (jobid, reason, tmpdir) are left out."""
    jobs = []
    for block in re.split(r"\n\[[^\]\n]+\]\n", "\n" + output):
        head = re.match(r"(?:local)?(rule|checkpoint) (\w+):\n", block)
        if not head:
            continue
        fields = [f"{head[1]} {head[2]}"]
        for line in block.splitlines()[1:]:
            if not line.strip() or line.startswith("Job stats:"):  # the last job is followed by the run's summary
                break
            key = line.strip().split(":", 1)[0]
            if key in VOLATILE:
                continue
            if key == "resources":
                line = re.sub(r"tmpdir=[^,]*(, )?", "", line)
            fields.append(line.strip())
        job = PENDING_PAIRS.sub(lambda m: f" --{m[1]} <pending checkpoint>", " | ".join(fields))
        jobs.append(job.replace(str(results), "RESULTS"))
    return sorted(jobs)


def current_jobs(name: str) -> list[str]:
    """The job lines of the golden list ``name``'s dry run now (the fixture tree's folder reads TREE)."""
    with tempfile.TemporaryDirectory(prefix="cc_dry_run_") as tmp:
        results = Path(tmp) / "results"
        configs = DRY_RUNS[name]
        if name == "paper_fixture":
            from tests.helpers import paper_fixtures as fixtures

            tree = fixtures.build_paper_tree(Path(tmp) / "tree")
            configs += (str(fixtures.fixture_override(tree, results, Path(tmp) / "paper_fixture.yaml")),)
        lines = job_lines(dry_run(configs, results), results)
        return [line.replace(f"{tmp}/tree", "TREE") for line in lines]


@pytest.mark.parametrize("name", sorted(DRY_RUNS))
def test_the_dry_run_schedules_the_recorded_jobs_and_commands(name: str) -> None:
    """The jobs of `snakemake -n -p` (every field a rule plans, shell commands exactly) are the golden list."""
    expected = (GOLDEN / f"{name}.txt").read_text().splitlines()
    jobs = current_jobs(name)
    missing = [j for j in expected if j not in jobs]
    extra = [j for j in jobs if j not in expected]
    assert not missing and not extra, (
        f"the {name} dry run changed ({len(missing)} recorded jobs missing, {len(extra)} new); if deliberate, "
        f"regenerate with `python tests/unit/pipeline/test_pipeline_jobs.py {name}` and review the diff\n"
        f"missing: {missing[:3]}\nextra: {extra[:3]}")
    assert jobs == expected  # the same multiset (a job twice would be a different plan)


def test_a_cuda_device_sends_every_model_job_to_a_gpu_and_no_votes_job(tmp_path: Path) -> None:
    """``device: cuda`` on the embedded smoke run: every job that passes ``--device cuda`` asks for a GPU (the stage
    refuses to run without CUDA, so a CPU node would stop it), and the votes jobs, which ask for none, count with
    ``--device auto``. Before, the votes and every embedded model job were sent to CPU nodes with ``--device cuda``."""
    override = tmp_path / "cuda.yaml"
    override.write_text("device: cuda\n")
    jobs = job_lines(dry_run(("configs/smoke.yaml", str(override)), tmp_path / "results"), tmp_path / "results")
    cuda_jobs = [job for job in jobs if "--device cuda" in job]
    assert len(cuda_jobs) >= 10 and {job.split(" | ")[0] for job in cuda_jobs} >= {
        "rule vision_attribute", "rule vision_evaluate", "rule language_attribute", "rule language_evaluate"}
    assert all(re.search(r"\bgpu=1\b", job) for job in cuda_jobs), [j.split(" | ")[0] for j in cuda_jobs
                                                                     if not re.search(r"\bgpu=1\b", j)]
    votes = [job for job in jobs if job.startswith("rule votes ")]
    assert votes and all("--device auto" in job and "gpu=" not in job for job in votes)
    certify = [job for job in jobs if job.startswith("rule certify ")]
    assert certify and all("gpu=" not in job for job in certify)


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(DRY_RUNS):
        lines = current_jobs(name)
        (GOLDEN / f"{name}.txt").write_text("\n".join(lines) + "\n")
        print(f"{name}: {len(lines)} jobs -> {GOLDEN / f'{name}.txt'}")
