"""Issue 45: the testbed's stages, options and environment refuse bad input at their boundary, before any work, with
the file or option named, what is wrong and the fix (exit status 2 from the CLI and from bin/model-seeds)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from certified_circuits.cli.main import main
from certified_circuits.pipeline.tracking.progress import INTERVAL, progress_interval
from certified_circuits.reports.testbed import STABILITY_KEYS, STABILITY_SHOWN, read_stability_table, stability_report
from tests.helpers.paths import ROOT


# ------------------------------------------------------------------------------ bin/model-seeds


def _model_seeds(tmp_path: Path, *args: str, cores: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MODEL_SEEDS_DIR": str(tmp_path / "runs")}
    if cores is not None:
        env["CORES"] = cores
    return subprocess.run(["bash", str(ROOT / "bin" / "model-seeds"), "config.yaml", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("seeds, message", [
    (["010"], "seed '010' has a leading zero (YAML would read it as octal, another seed): write 10"),
    (["0", "abc"], "seed 'abc' is not a non-negative decimal integer: give seeds as 0 1 2"),
    (["-1"], "seed '-1' is not a non-negative decimal integer"),
    (["1e3"], "seed '1e3' is not a non-negative decimal integer"),
    (["4294967296"], "seed 4294967296 is above 4294967295"),
    (["1", "2", "1"], "seed 1 is given twice: give each seed once"),
])
def test_model_seeds_checks_every_seed_before_any_run(tmp_path: Path, seeds: list[str], message: str) -> None:
    done = _model_seeds(tmp_path, *seeds)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_model_seeds_checks_cores_before_any_run(tmp_path: Path) -> None:
    done = _model_seeds(tmp_path, "0", cores="0")
    assert done.returncode == 2 and "CORES=0 is not 'all' or a positive integer: set CORES=all" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_model_seeds_names_a_missing_config(tmp_path: Path) -> None:
    env = {**os.environ, "MODEL_SEEDS_DIR": str(tmp_path / "runs")}
    done = subprocess.run(["bash", str(ROOT / "bin" / "model-seeds"), str(tmp_path / "nope.yaml"), "0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "nope.yaml not found: give the config file" in done.stderr


# ------------------------------------------------------------------------------ CC_PROGRESS_SECONDS


@pytest.mark.parametrize("value, problem", [
    ("nan", "CC_PROGRESS_SECONDS=nan is outside [1, 60] seconds"),
    ("inf", "CC_PROGRESS_SECONDS=inf is outside [1, 60] seconds"),
    ("0", "CC_PROGRESS_SECONDS=0 is outside [1, 60] seconds"),
    ("-1", "CC_PROGRESS_SECONDS=-1 is outside [1, 60] seconds"),
    ("600", "CC_PROGRESS_SECONDS=600 is outside [1, 60] seconds"),
    ("ten", "CC_PROGRESS_SECONDS='ten' is not a number"),
])
def test_a_progress_interval_outside_its_domain_is_refused(value: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        progress_interval({"CC_PROGRESS_SECONDS": value})
    assert problem in str(caught.value) and "set CC_PROGRESS_SECONDS to a number of seconds from 1 to 60" in str(
        caught.value)


def test_a_valid_or_unset_progress_interval_is_used() -> None:
    assert progress_interval({"CC_PROGRESS_SECONDS": "5"}) == 5.0
    assert progress_interval({}) == INTERVAL == progress_interval({"CC_PROGRESS_SECONDS": " "})


def test_the_snakefile_checks_the_progress_interval_at_parse_time() -> None:
    text = (ROOT / "Snakefile").read_text()
    assert "progress_interval()" in text.split("VCONCEPTS = CHECKED.concepts")[0]


# ------------------------------------------------------------------------------ stability tables


def _stability(**change: object) -> pd.DataFrame:
    row = {"experiment": "testbed", "concept": "circle", "scorer": "relevance", "setting": "p0.6_n0100_n1000_s0",
           "k_target": 0.1, "resamples": 20, **{c: 0.5 for c in STABILITY_SHOWN}}
    return pd.DataFrame([{**row, **change}, {**row, "k_target": 0.2}])


def _csv(tmp_path: Path, frame: pd.DataFrame, name: str = "stab.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("column", STABILITY_KEYS)
def test_a_stability_row_without_a_key_is_refused(tmp_path: Path, column: str) -> None:
    path = _csv(tmp_path, _stability(**{column: None}))
    with pytest.raises(ValueError, match=rf"stab.csv \(--inputs\): row 2 has no '{column}' \(1 rows lack it\).*"
                                         "pass the CSV the stability stage wrote"):
        read_stability_table(path)


def test_a_stability_table_without_its_scorer_column_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, _stability().drop(columns="scorer"))
    with pytest.raises(ValueError, match=r"stab.csv \(--inputs\) is missing column\(s\) 'scorer'.*stability stage"):
        read_stability_table(path)


def test_a_header_only_stability_table_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, _stability().iloc[:0])
    with pytest.raises(ValueError, match=r"stab.csv \(--inputs\) holds no rows \(header only\)"):
        read_stability_table(path)


def test_a_text_valued_stability_column_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, _stability(certified_flip_share="lots"))
    with pytest.raises(ValueError, match=r"column 'certified_flip_share' holds 'lots' \(row 2\), not a number"):
        read_stability_table(path)


def test_a_stability_k_outside_the_unit_interval_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"column 'k_target' holds 1.5 \(row 2\), not a K in \(0, 1\]"):
        read_stability_table(_csv(tmp_path, _stability(k_target=1.5)))


def test_stability_files_that_are_not_csv_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "stab.csv"
    empty.write_bytes(b"\xff\xfe\x00a")
    with pytest.raises(ValueError, match=r"stab.csv \(--inputs\): not a readable CSV table"):
        read_stability_table(empty)


def test_one_stability_table_given_twice_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, _stability())
    with pytest.raises(ValueError, match="both hold .*'concept': 'circle'.* pass each table once"):
        stability_report([path, path], tmp_path / "out")


def test_report_stability_refuses_a_bad_table_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _csv(tmp_path, _stability().iloc[:0])
    with pytest.raises(SystemExit) as caught:
        main(["report-stability", "--inputs", str(path), "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "stab.csv (--inputs) holds no rows" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_valid_stability_table_still_reports(tmp_path: Path) -> None:
    metrics = stability_report([_csv(tmp_path, _stability())], tmp_path / "out")
    assert metrics["stability_concepts"] == 1.0 and (tmp_path / "out" / "stability_summary.csv").is_file()


# ------------------------------------------------------------------------------ the config, at parse time


def _config(*names: str) -> dict:
    """The config files ``names`` layered as ``--configfile`` layers them and validated; none: the clean testbed
    (config.yaml with configs/clean_testbed.yaml: the trained planted ResNet and the clean induction model), whose
    training options these checks exercise."""
    from snakemake.utils import validate

    from tests.helpers.config import merged_config

    config = merged_config(*[ROOT / n for n in names or ("config.yaml", "configs/clean_testbed.yaml")])
    validate(config, str(ROOT / "config.schema.yaml"), set_default=True)
    return config


@pytest.mark.parametrize("resamples, problem", [
    (1, "testbed.resamples = 1 is invalid: 0 (no stability jobs) or 2 to 1000 bootstrap resamples"),
    (1001, "testbed.resamples = 1001 is invalid: 0 (no stability jobs) or 2 to 1000"),
])
def test_resamples_outside_their_domain_are_refused_at_parse_time(resamples: int, problem: str) -> None:
    from certified_circuits.pipeline.config import check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["testbed"]["resamples"] = resamples
    with pytest.raises(ConfigError, match="set testbed.resamples: 20") as caught:
        check_testbed(config)
    assert problem in str(caught.value)


def test_planted_widths_above_the_memory_bound_are_refused_at_parse_time() -> None:
    from certified_circuits.pipeline.config import check_config
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["vision"]["train"]["planted_own"] = [100000, 1, 1, 1]
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    text = str(caught.value)
    assert "config key vision.train.planted_own / planted_shared" in text
    assert "above the bound of 2048" in text and "lower planted_own / planted_shared" in text


@pytest.mark.parametrize("source", ["folders", "imagenet"])
def test_planted_options_are_refused_where_the_model_is_not_built(source: str) -> None:
    from certified_circuits.pipeline.config import check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["vision"]["source"] = source
    with pytest.raises(ConfigError, match=rf"vision.train.planted_own = \[1, 3, 6, 6\] is invalid: planted_own, "
                                          rf"planted_shared shape the embedded model only, but vision.source is "
                                          rf"'{source}'.*remove vision.train.planted_own"):
        check_testbed(config)


def test_a_compiled_model_is_refused_for_another_source() -> None:
    from certified_circuits.pipeline.config import check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["language"]["source"] = "hf"
    with pytest.raises(ConfigError, match="language.train.compiled = 'induction' is invalid: compiled shape the "
                                          "embedded model only, but language.source is 'hf'"):
        check_testbed(config)


def test_two_experiments_sharing_a_name_are_refused() -> None:
    from certified_circuits.pipeline.config import check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["language"]["experiment"] = config["vision"]["experiment"]
    with pytest.raises(ConfigError, match="language.experiment = 'world' is invalid: vision.experiment has the same "
                                          "name.*rename one"):
        check_testbed(config)
    config["vision"]["enabled"] = False
    check_testbed(config)  # one experiment: no clash


def test_a_compiled_model_with_a_task_it_has_no_circuit_for_is_refused() -> None:
    from certified_circuits.pipeline.config_language import check_compiled_tasks
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["language"]["tasks"] = ["induction", "ioi"]
    with pytest.raises(ConfigError, match=r"has the induction circuit only, none for \['ioi'\]: set language.tasks: "
                                          r"\[induction\], or drop train.compiled"):
        check_compiled_tasks(config["language"])


def test_a_mib_submission_of_a_model_not_shaped_like_mibs_is_refused_at_parse_time() -> None:
    from certified_circuits.pipeline.config_language import check_mib_shape
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config("configs/smoke.yaml")
    config["language"]["mib"].update(model="gpt2", submission=True, export=True)
    with pytest.raises(ConfigError, match=r"language.mib.submission = True is invalid: the configured model has \d+ "
                                          r"layers and \d+ heads but MIB's gpt2 \(gpt2-small\) has 12 and 12.*"
                                          r"or set submission: false"):
        check_mib_shape(config["language"])
    config["language"]["mib"]["submission"] = False
    check_mib_shape(config["language"])


def test_the_shipped_testbed_configs_pass_the_new_checks() -> None:
    from certified_circuits.pipeline.config import check_testbed

    for name in ("config.yaml", "configs/testbed_smoke.yaml", "configs/smoke.yaml"):
        check_testbed(_config(name))


# ------------------------------------------------------------------------------ the stability stage's options


def _stability_argv(tmp_path: Path, *extra: str) -> list[str]:
    attributions = tmp_path / "attr.h5"
    attributions.write_bytes(b"not read: the options are checked first")
    return ["stability", "--attributions", str(attributions), "--scorer", "relevance", "--k-grid", "0.1",
            "--p-del", "0.5", "--tau", "0.9", "--out", str(tmp_path / "out.csv"), *extra]


@pytest.mark.parametrize("extra, message", [
    (["--resamples", "5000"], "--resamples 5000 is above 1000"),
    (["--resamples", "1"], "--resamples 1: the pairwise shares need at least 2 resamples"),
    (["--bootstrap-seed", "-1"], "argument --bootstrap-seed: -1 is outside [0, 2**32 - 1]"),
    (["--bootstrap-seed", "0x10"], "argument --bootstrap-seed: '0x10' is not an integer seed"),
])
def test_stability_options_outside_their_domain_are_refused_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(_stability_argv(tmp_path, *extra))
    err = capsys.readouterr().err
    assert caught.value.code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "out.csv").exists()


# ------------------------------------------------------------------------------ seeds are decimal 32-bit integers


@pytest.mark.parametrize("stage, option", [
    ("stability", "--bootstrap-seed"), ("report-sufficiency", "--bootstrap-seed"), ("language-tasks", "--seed"),
    ("language-train", "--seed"), ("language-task-file", "--seed"), ("language-ground-truth", "--seed"),
    ("vision-world", "--seed"), ("vision-train", "--seed"), ("vision-ground-truth", "--seed"),
    ("report-attack", "--attack-seed"), ("report-attack", "--seed"),
])
@pytest.mark.parametrize("value, problem", [("-1", "-1 is outside [0, 2**32 - 1]"),
                                            ("1.5", "'1.5' is not an integer seed")])
def test_a_seed_option_names_itself_when_refused(capsys: pytest.CaptureFixture, stage: str, option: str, value: str,
                                                 problem: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main([stage, option, value])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and f"argument {option}: {problem}" in err


# ------------------------------------------------------------------------------ report-recovery's --selected


@pytest.mark.parametrize("text, problem", [
    ("experiment,baseline_k_target\nworld,0.1\n", r"is missing column\(s\) 'majority_k_target', 'certified_k_target'"),
    ("baseline_k_target,majority_k_target,certified_k_target\n", r"holds no rows \(header only\)"),
    ("baseline_k_target,majority_k_target,certified_k_target\n0.1,high,0.2\n",
     r"column 'majority_k_target' holds 'high' \(row 2\), not a K in \(0, 1\]"),
    ("baseline_k_target,majority_k_target,certified_k_target\n0.1,0.2,3\n",
     r"column 'certified_k_target' holds 3 \(row 2\), not a K in \(0, 1\]"),
    ("", "not a readable CSV table"),
])
def test_a_selected_table_that_is_not_one_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    from certified_circuits.reports.testbed import read_selected_table

    path = tmp_path / "selected.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"selected.csv \(--selected\).*{problem}.*report-sufficiency --select-on"):
        read_selected_table(path)


# ------------------------------------------------------------------------------ the compiled model takes no training option


def test_the_config_refuses_training_options_for_a_compiled_model() -> None:
    from certified_circuits.pipeline.config import check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["language"]["train"]["steps"] = 2000
    with pytest.raises(ConfigError, match=r"language.train.steps = 2000 is invalid: the compiled model \(language."
                                          r"train.compiled: induction\) is set by construction, not trained, so steps "
                                          r"would be ignored: remove them, or drop train.compiled"):
        check_testbed(config)


@pytest.mark.parametrize("extra, shown", [(["--steps", "5"], "--steps"),
                                          (["--tasks", "ioi", "--attn-only"], "--tasks, --attn-only")])
def test_language_train_refuses_training_options_with_compiled(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                               extra: list[str], shown: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["language-train", "--tasks-dir", str(tmp_path), "--out-dir", str(tmp_path / "m"), "--metrics",
              str(tmp_path / "m.json"), "--compiled", "induction", *extra])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and f"--compiled induction sets the weights by construction, so {shown} would be " \
                                      f"ignored: leave {shown} out, or drop --compiled" in err
    assert not (tmp_path / "m").exists()


def test_model_seeds_recovery_reads_its_tables_with_their_reader(tmp_path: Path) -> None:
    from certified_circuits.reports.testbed import model_seeds_recovery

    (tmp_path / "0").mkdir()
    recovery = tmp_path / "0" / "recovery.csv"
    recovery.write_text("method,k_target,precision,recall,n_true,n_components\nbaseline,0.1,1,1,2,10\n")
    with pytest.raises(ValueError, match=r"recovery_auroc.csv \(beside --run 0 .*recovery.csv\) does not exist.*report-recovery"):
        model_seeds_recovery({"0": [recovery]}, tmp_path / "out", "w")
    recovery.write_text("method,k_target\n")
    with pytest.raises(ValueError, match=r"recovery.csv \(--run 0\) is missing column\(s\) 'precision'.*report-recovery"):
        model_seeds_recovery({"0": [recovery]}, tmp_path / "out", "w")


def test_a_planted_spec_above_the_width_bound_is_refused_wherever_it_is_built() -> None:
    from certified_circuits.vision.networks.planted import MAX_PLANTED_WIDTH, PlantedSpec

    with pytest.raises(ValueError, match=rf"the planted widths n_classes \* own \+ shared are \[300000, 3, 3, 3\] for 3 "
                                         rf"classes: a stage of 300000 channels is above the bound of {MAX_PLANTED_WIDTH}"):
        PlantedSpec(3, (100000, 1, 1, 1), (0, 0, 0, 0))
    assert PlantedSpec(4, (512, 1, 1, 1), (0, 0, 0, 0)).own[0] == 512  # 2048 channels: the bound itself is allowed


def test_stability_refuses_the_ground_truth_of_another_experiment(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import json

    import numpy as np

    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.store import write_attributions

    names = [f"layer1.{i}" for i in range(12)]
    scores = np.random.default_rng(0).normal(size=(40, 12))
    attributions = write_attributions(tmp_path / "circle.h5", {"relevance": scores}, np.zeros(12, int), names,
                                      [str(i) for i in range(40)], {"concept": "circle", "experiment": "world"})
    truth = tmp_path / "gt.json"
    truth.write_text(json.dumps({"format": GROUND_TRUTH_FORMAT, "experiment": "other", "kind": "vision",
                                 "concepts": {"circle": {"components": ["layer1.0"]}}}))
    argv = _stability_argv(tmp_path, "--ground-truth", str(truth))
    argv[argv.index("--attributions") + 1] = str(attributions)
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "gt.json (--ground-truth) is the ground truth of experiment 'other', but" in err
    assert "circle.h5 is of 'world': pass this experiment's ground truth" in err
    assert not (tmp_path / "out.csv").exists()


def test_the_leak_of_the_noisy_regime_is_checked_at_parse_time() -> None:
    from certified_circuits.pipeline.config import check_config, check_testbed
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config()
    config["vision"]["train"]["planted_leak"] = 0.05
    check_testbed(config)  # the embedded planted model: it applies
    def leak_without_planted(source: str) -> dict:
        leaky = _config()
        leaky["vision"]["source"] = source
        leaky["vision"]["train"] = {k: v for k, v in leaky["vision"]["train"].items() if not k.startswith("planted_")}
        leaky["vision"]["train"]["planted_leak"] = 0.05
        return leaky

    with pytest.raises(ConfigError, match=r"vision.train.planted_leak = 0.05 is invalid: the leak bounds the "
                                          r"cross-class weights of a planted model"):
        check_config(leak_without_planted("embedded"))
    with pytest.raises(ConfigError, match=r"vision.train.planted_leak = 0.05 is invalid: planted_leak shape the "
                                          r"embedded model only"):
        check_testbed(leak_without_planted("folders"))
    import yaml
    from snakemake.utils import validate

    schema = ROOT / "config.schema.yaml"
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["vision"]["train"]["planted_leak"] = 0.7
    with pytest.raises(Exception, match="0.7 is greater than the maximum of 0.5"):
        validate(raw, str(schema), set_default=True)


def test_the_noisy_compiled_model_is_planned_with_its_own_shape_and_task() -> None:
    from certified_circuits.language.graph import n_edges_formula
    from certified_circuits.pipeline.config_language import check_compiled_tasks
    from certified_circuits.pipeline.config_errors import ConfigError
    from certified_circuits.pipeline.plans.language import language_shape
    from tests.helpers.config import check

    noisy = {"source": "embedded", "train": {"compiled": "induction_noisy"}, "tasks": ["induction"]}
    assert language_shape(noisy) == (2, 8) and n_edges_formula(2, 8) == 310
    assert language_shape({**noisy, "train": {"compiled": "induction"}}) == (2, 4)
    check_compiled_tasks(noisy)  # its circuit is the induction task's
    with pytest.raises(ConfigError, match=r"language.train.compiled: induction_noisy\) has the induction circuit "
                                          r"only, none for \['ioi'\]: set language.tasks: \[induction\]"):
        check_compiled_tasks({**noisy, "tasks": ["induction", "ioi"]})
    checked = check(overrides={"language": {"train": {"compiled": "induction_noisy"}}})  # the whole parse-time check
    assert checked.concepts and checked.plans


def test_the_noisy_compiled_model_trains_on_the_induction_prompts() -> None:
    """Its training job reads the induction task's prompt files (the workflow once asked for tasks/induction_noisy/,
    which no rule writes, so a run with configs/noisy_language.yaml failed to build its DAG)."""
    from certified_circuits.language.tasks import TASKS
    from certified_circuits.pipeline.plans.language import language_train_tasks
    from tests.helpers.config import check

    assert language_train_tasks({"train": {"compiled": "induction_noisy"}}) == ["induction"]
    assert language_train_tasks({"train": {"compiled": "induction"}}) == ["induction"]
    assert language_train_tasks({"train": {"tasks": ["ioi"], "seed": 0}}) == ["ioi"]
    assert language_train_tasks({"train": {"seed": 0}}) == list(TASKS) and len(TASKS) >= 2
    overlay = check(ROOT / "config.yaml", ROOT / "configs" / "noisy_language.yaml")  # the shipped overlay is valid
    assert len(overlay.plans) == 2 and all(p.plan.can_certify_in and "induction" in p.where for p in overlay.plans)
    assert {p.plan.n_components for p in overlay.plans} == {310}  # the noisy model's edges


def test_model_seeds_names_a_missing_overlay(tmp_path: Path) -> None:
    env = {**os.environ, "MODEL_SEEDS_DIR": str(tmp_path / "runs")}
    done = subprocess.run(["bash", str(ROOT / "bin" / "model-seeds"), "config.yaml", str(tmp_path / "extra.yaml"),
                           "0"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "extra.yaml not found: give the config file(s)" in done.stderr
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------ the compiled vision model (issue 50)


def test_the_default_is_the_noisy_testbed_in_both_halves() -> None:
    """config.yaml compiles the marked ResNet on a marked world and the noisy induction GPT-2, and both have a
    truth; the clean overlay trains the planted ResNet and compiles the clean induction model."""
    from certified_circuits.pipeline.config import check_config
    from certified_circuits.pipeline.plans import testbed, vision

    default = _config("config.yaml")
    check_config(default)
    assert default["vision"]["train"]["compiled"] == "marked" and default["vision"]["world"]["cue_attributes"] == 2
    assert default["language"]["train"]["compiled"] == "induction_noisy"
    assert testbed.ground_truth_experiments(default) == {"world": "vision", "tiny_gpt2": "language"}
    assert vision.vision_model_command(default) == "vision-compile --seed 0"
    clean = _config()
    check_config(clean)
    assert clean["language"]["train"]["compiled"] == "induction"
    assert testbed.ground_truth_experiments(clean) == {"world": "vision", "tiny_gpt2": "language"}
    assert vision.vision_model_command(clean) == ("vision-train --seed 0 --epochs 10 --lr 0.01 --planted-own 1 3 6 6 "
                                                "--planted-shared 6 6 8 0")


@pytest.mark.parametrize("layers, section, key, value, message", [
    (("config.yaml",), "world", "cue_attributes", 0,
     r"vision.world.cue_attributes = 0 is invalid: the compiled model \(vision.train.compiled: marked\) reads each "
     r"image's badge and cue marks: set vision.world.cue_attributes: 2"),
    (("config.yaml",), "train", "epochs", 10,
     r"vision.train.epochs = 10 is invalid: the compiled model \(vision.train.compiled: marked\) is set by hand, not "
     r"trained, so epochs would be ignored: remove them, or set vision.train.compiled: null"),
    ((), "train", "margins", [0.1, 0.1, 0.1, 0.1],
     r"vision.train.margins = \[0.1, 0.1, 0.1, 0.1\] is invalid: an option of the compiled model \(vision-compile\), "
     r"but vision.train.compiled is not set: remove margins, or set vision.train.compiled: marked"),
])
def test_the_compiled_vision_model_is_checked_at_parse_time(layers: tuple, section: str, key: str, value: object,
                                                            message: str) -> None:
    from certified_circuits.pipeline.config import check_config
    from certified_circuits.pipeline.config_errors import ConfigError

    config = _config(*layers)
    config["vision"][section][key] = value
    with pytest.raises(ConfigError, match=message):
        check_config(config)


def test_the_compile_options_go_with_the_compiled_model() -> None:
    from certified_circuits.pipeline.config import check_config
    from certified_circuits.pipeline.plans import vision

    tuned = _config("config.yaml")
    tuned["vision"]["train"].update(margins=[0.02, 0.08, 0.14, 0.2], jitter=0.3)
    check_config(tuned)
    assert vision.vision_model_command(tuned) == "vision-compile --seed 0 --margins 0.02 0.08 0.14 0.2 --jitter 0.3"
