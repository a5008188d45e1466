"""experiments/fair_testbed.py (issue 50): its config is refused by name before any model is built, and its
conditions and hypotheses stages run on cached seeds whose answers are counted here by hand (synthetic scores: a
gated true edge that swaps with a distractor when its cue is rare)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.helpers.scripts import load_script
from tests.helpers.paths import ROOT


def _load():
    return load_script("experiments/fair_testbed.py")


@pytest.fixture(scope="module")
def fair():
    return _load()


#: the record experiments/vision_mechanism.py leaves in its --work folder (its config, as the code before wrote it)
MECHANISM = yaml.safe_load((ROOT / "experiments" / "vision_mechanism.yaml").read_text())
#: the pre-registered equal_footing block (experiments/fair_testbed.yaml)
FOOTING = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())["language"]["equal_footing"]


def _config(tmp_path: Path, **changes) -> Path:
    config = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())
    config["language"].update(changes)
    path = tmp_path / "fair.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("changes, message", [
    ({"model_seeds": [3, 3, 4]}, "language.model_seeds: [3, 3, 4] must be distinct"),
    ({"model_seeds": "3"}, "language.model_seeds: '3' must be distinct non-negative integers"),
    ({"population": 500}, "language.population: 500 must be an integer in [1000, 100000]"),
    ({"resamples": 20}, "language.resamples: 20 must be an integer in [50, 100000]"),
    ({"size": 2000, "population": 1000}, "language.size: 2000 exceeds language.population"),
    ({"methods": ["EAP", "EAP"]}, "language.methods: ['EAP', 'EAP'] must be a list of distinct methods"),
    ({"methods": ["nope"]}, "language.methods: "),
    ({"compiled": "nope"}, "language.compiled: 'nope' is not a compiled model"),
    ({"compiled": "induction", "distractor_scale": 0.5}, "language.distractor_scale: only the noisy model"),
    ({"settings": [{"tau": 0.9, "p_del": 0.95}, {"tau": 0.9, "p_del": 0.95}]}, "a setting is given twice"),
    ({"settings": [{"tau": 2.0, "p_del": 0.95}]}, "language.settings[0].tau: 2.0: must be a finite number in [0, 1]"),
    ({"held_out": 1e9}, "language.held_out: 1000000000.0 must be an integer"),
    ({"equal_footing": None}, "language.equal_footing: missing or not a mapping"),
    ({"equal_footing": {"q": 0.9}}, "language.equal_footing: lacks "),
    ({"equal_footing": {**FOOTING, "extra": 1}}, "language.equal_footing: unknown extra"),
    ({"equal_footing": {**FOOTING, "q": 0.5}}, "language.equal_footing.q: 0.5 must be a number in (0.5, 1.0]"),
    ({"equal_footing": {**FOOTING, "q": float("nan")}}, "language.equal_footing.q: nan must be a number"),
    ({"equal_footing": {**FOOTING, "inner_resamples": 1}}, "language.equal_footing.inner_resamples: 1 must be an "
                                                           "integer in [2, 10000]"),
    ({"equal_footing": {**FOOTING, "population_samples": 20.5}}, "language.equal_footing.population_samples: 20.5 "
                                                                 "must be an integer"),
    ({"equal_footing": {**FOOTING, "inner_seed": True}}, "language.equal_footing.inner_seed: True must be"),
    ({"equal_footing": {**FOOTING, "z": 0.0}}, "language.equal_footing: q=0.9 must lie in (0.5, 1] and z=0.0 be "
                                              "positive and finite"),  # the protocol's own rule, at load
])  # fmt: skip
def test_a_bad_config_is_one_error_line_naming_the_file_and_key(fair, tmp_path, capsys, changes, message):
    path = _config(tmp_path, **changes)
    assert fair.main([str(path), "--work", str(tmp_path / "w"), "--stage", "score"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "w" / "language").exists()  # refused before any model


def test_a_missing_config_and_a_missing_section_are_named(fair, tmp_path, capsys):
    assert fair.main([str(tmp_path / "none.yaml"), "--work", str(tmp_path), "--stage", "score"]) == 2
    assert "none.yaml: not found" in capsys.readouterr().err
    (tmp_path / "empty.yaml").write_text("vision: {}\n")
    assert fair.main([str(tmp_path / "empty.yaml"), "--work", str(tmp_path), "--stage", "score"]) == 2
    assert "empty.yaml: language: missing or not a mapping" in capsys.readouterr().err


def _cache(work: Path, seed: int, n: int = 1000, record: dict | None = None) -> np.ndarray:
    """A cached seed: 5 edges, truth {0, 1}; edge 1 fires on a quarter of the prompts (its cue), edge 2 is a constant
    distractor just below the quarter. Returns the cue."""
    rng = np.random.default_rng(seed)
    cue = rng.random(n) < 0.25
    scores = np.zeros((n, 5))
    scores[:, 0] = 1.0
    scores[:, 1] = cue
    scores[:, 2] = 0.245
    scores[:, 3:] = rng.normal(scale=0.01, size=(n, 2))
    names = np.array([f"e{i}" for i in range(5)])
    (work / "language").mkdir(parents=True, exist_ok=True)
    np.savez(work / "language" / f"s{seed}.npz", names=names, truth=np.array([1, 1, 0, 0, 0], bool),
             grey=np.zeros(5, bool), effects=np.array([1.0, 0.3, 0.01, 0, 0]), groups=np.zeros(5, np.int64),
             **{"scores/EAP": scores})
    (work / "language" / f"s{seed}.json").write_text(json.dumps({"seed": seed, "concept": "induction",
                                                                  "passed": True}))
    if record is not None:  # the record the score stage writes (these scores are not a model's: no legacy check)
        (work / "language" / "built_from.json").write_text(json.dumps(record))
    return cue


def test_the_conditions_and_hypotheses_stages_on_cached_seeds(fair, tmp_path, capsys):
    from certified_circuits.analysis.stability import bootstrap_indices

    work = tmp_path / "work"
    seeds = [3, 4, 5, 6, 7, 8, 9, 10]
    path = _config(tmp_path, methods=["EAP"], model_seeds=seeds)
    record = fair.language_built_from(fair.load_language(path))
    cues = {seed: _cache(work, seed, record=record) for seed in seeds}
    assert fair.main([str(path), "--work", str(work), "--stage", "hypotheses"]) == 2  # the conditions come first
    assert "run --stage conditions first" in capsys.readouterr().err
    assert fair.main([str(path), "--work", str(work), "--stage", "conditions"]) == 0
    conditions = pd.read_csv(work / "language_conditions.csv")
    assert conditions["seed"].tolist() == seeds and set(conditions["resamples"]) == {50}
    for seed in seeds:  # each seed's resampled precision, counted here: 1 when edge 1 beats the distractor, else 1/2
        kept = cues[seed][:100][bootstrap_indices(100, 50, 0)].mean(axis=1) > 0.245
        row = conditions[conditions["seed"] == seed].iloc[0]
        assert row["precision_resampled"] == pytest.approx(np.where(kept, 1.0, 0.5).mean(), abs=1e-12)
    assert "mean over 8 seeds" in (work / "language_conditions.md").read_text()

    assert fair.main([str(path), "--work", str(work), "--stage", "hypotheses"]) == 0
    table = pd.read_csv(work / "language_hypotheses.csv")
    # the old H2 (three-valued labels against two-valued memberships) is withdrawn: H2a-H2c of the equal stage
    assert set(table["hypothesis"]) == {"H1", "H3"} and set(table["n_seeds"]) <= {8}
    matched = pd.read_csv(work / "language_matched.csv")
    assert len(matched) == 8 * 2 * 3  # seeds x settings x methods: one row each, averaged within the seed later
    assert (matched.loc[matched["method"] == "certified_in", "size"] >= 1).all()  # something is certified IN
    text = (work / "language_hypotheses.md").read_text()
    assert "| H1 | EAP | certified_in | 8 (dropped 0) |" in text and "baseline memberships changed" not in text

    assert fair.main([str(path), "--work", str(work), "--stage", "equal"]) == 0
    rows = pd.read_csv(work / "language_equal_rows.csv")
    assert len(rows) == 8 * 2 * 7  # seeds x settings x (4 three-valued + 3 two-valued methods)
    assert set(rows["n_live"]) == {5} and set(rows["n_components"]) == {5}  # every edge is non-zero somewhere
    three = rows[rows["values"] == 3].set_index(["seed", "setting", "method"])
    for _, cell in three.groupby(level=[0, 1]):
        cell = cell.droplevel([0, 1])  # the matched cut abstains exactly as much as the certificate, on D
        assert cell.loc["matched_cut", "abstain_d"] == cell.loc["certified", "abstain_d"]
        assert cell.loc["matched_cut", "size_d"] == cell.loc["certified", "size_d"]
    # edge 0 (always 1.0) is certified IN on D in every cell: IN precision on D is 1 (edge 0 is true)
    assert (three.xs("certified", level="method")["in_precision_d"] == 1.0).all()
    hypotheses = pd.read_csv(work / "language_equal_hypotheses.csv")
    assert set(hypotheses["hypothesis"]) == {"H2a", "H2b", "H2c", "H4"}
    assert set(hypotheses.loc[hypotheses["hypothesis"] == "H2a", "method"]) == {"matched_cut", "interval",
                                                                                 "consensus"}
    assert "| H2a | EAP | matched_cut |" in (work / "language_equal.md").read_text()


def test_the_vision_half_reads_the_mechanisms_work_folder(fair, tmp_path, capsys):
    """Eight seeds of one class: the truth is the 3 strongest of 12 channels (one group of 6 per layer); the vision
    hypotheses run on experiments/vision_mechanism.py's files and refuse to run before its conditions exist."""
    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    root = tmp_path / "mechanism"
    names = [f"layer{1 + i // 6}.{i % 6}" for i in range(12)]
    groups = np.repeat([0, 1], 6).astype(np.int32)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        scores = rng.normal(size=(50, 12))
        scores[:, [0, 1, 6]] += 4.0
        write_attributions(root / f"s{seed}" / "dc_circle.h5", {"relevance": scores, "conductance": scores + 1.0},
                           groups, names, [str(i) for i in range(50)], {"concept": "circle", "experiment": "world"})
        population = rng.normal(size=(1000, 12))
        population[:, [0, 1, 6]] += 4.0
        write_attributions(root / f"s{seed}" / "population_circle.h5", {"relevance": population,
                                                                        "conductance": population + 1.0},
                           groups, names, [str(i) for i in range(1000)], {"concept": "circle", "experiment": "world"})
        write_json(root / f"s{seed}" / "ground_truth.json", {
            "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 12,
            "concepts": {"circle": {"components": ["layer1.0", "layer1.1", "layer2.0"],
                                    "verification": {"passed": True}}}})
    path = tmp_path / "fair.yaml"
    config = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())
    config["vision"]["from"] = str(root)
    path.write_text(yaml.safe_dump(config))
    work = tmp_path / "work"
    args = [str(path), "--work", str(work), "--half", "vision", "--stage"]
    assert fair.main([*args, "score"]) == 2 and "experiments/vision_mechanism.py" in capsys.readouterr().err
    assert fair.main([*args, "hypotheses"]) == 2  # not a folder the mechanism made: refused by its record
    assert f"vision.from: {root / 'built_from.json'}: cannot be read" in capsys.readouterr().err
    (root / "built_from.json").write_text(json.dumps(MECHANISM))
    assert fair.main([*args, "hypotheses"]) == 2 and "conditions.csv: missing" in capsys.readouterr().err
    (root / "conditions.csv").write_text("seed\n0\n")
    assert fair.main([*args, "hypotheses"]) == 0
    matched = pd.read_csv(work / "vision_matched.csv")
    assert len(matched) == 8 * 2 * 3  # seeds x scorers x methods (one setting)
    certified = matched[matched["method"] == "certified_in"]
    assert (certified["size"] == 3).all() and (certified["precision"] == 1.0).all()  # the strong three, certified
    table = pd.read_csv(work / "vision_hypotheses.csv")
    assert set(table["scorer"]) == {"relevance (signed)", "conductance"}
    assert set(table["n_seeds"]) == {8}
    assert fair.main([*args, "equal"]) == 0
    rows = pd.read_csv(work / "vision_equal_rows.csv")
    assert len(rows) == 8 * 2 * 7
    # the strong three are far above the rest: no comparator and no resample leaves them, nothing is contested
    assert (rows.loc[rows["values"] == 3, "change_share_all"] == 0.0).all()
    assert (rows["n_contested"] == 0).all()
    # H4 cannot be computed without a contested component: every H4 row drops every seed
    h4 = pd.read_csv(work / "vision_equal_hypotheses.csv").query("hypothesis == 'H4'")
    assert len(h4) == 2 * 3 and (h4["n_dropped"] == 8).all()


def test_the_vision_equal_stage_refuses_attribution_files_without_the_scorer(fair, tmp_path, capsys):
    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    root = tmp_path / "mechanism"
    names = [f"layer1.{i}" for i in range(4)]
    for part in ("dc", "population"):
        write_attributions(root / "s0" / f"{part}_circle.h5", {"relevance": np.ones((50, 4))},
                           np.zeros(4, np.int32), names, [str(i) for i in range(50)], {"concept": "circle"})
    write_json(root / "s0" / "ground_truth.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 4,
        "concepts": {"circle": {"components": ["layer1.0"], "verification": {"passed": True}}}})
    (root / "conditions.csv").write_text("seed\n0\n")
    (root / "built_from.json").write_text(json.dumps(MECHANISM))
    config = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())
    config["vision"].update({"from": str(root), "model_seeds": [0]})
    path = tmp_path / "fair.yaml"
    path.write_text(yaml.safe_dump(config))
    assert fair.main([str(path), "--work", str(tmp_path / "w"), "--half", "vision", "--stage", "equal"]) == 2
    err = capsys.readouterr().err
    assert "lacks scores of 'conductance'" in err and "experiments/vision_mechanism.yaml" in err


# ------------------------------------------------------------------ issue 61: numbers where they enter, one line


def _vision_config(tmp_path: Path, **changes) -> Path:
    config = yaml.safe_load((ROOT / "experiments" / "fair_testbed.yaml").read_text())
    config["vision"].update(changes)
    path = tmp_path / "fair.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


CERT = {"alpha": 0.001, "n0": 100, "n": 1000, "correction": "bonferroni", "seed": 0}


@pytest.mark.parametrize("half, changes, message", [
    ("language", {"distractor_scale": "abc"}, "language.distractor_scale: 'abc': must be a finite number in [0, 1e+06]"),
    ("language", {"distractor_scale": -1}, "language.distractor_scale: -1: must be a finite number"),
    ("language", {"distractor_scale": float("inf")}, "language.distractor_scale: inf: must be a finite number"),
    ("language", {"task_seed": "0"}, "language.task_seed: '0': must be an integer in [0, 4.29497e+09]"),
    ("language", {"bootstrap_seed": 1.5}, "language.bootstrap_seed: 1.5: must be an integer"),
    ("language", {"model_seeds": [2**40]}, "language.model_seeds: [1099511627776] must be distinct non-negative "
                                           "integers below 2**32"),
    ("language", {"methods": [1]}, "language.methods: [1] must be a list of distinct methods"),
    ("language", {"sise": 100}, "language.sise: not a key of language"),
    ("language", {"certification": {**CERT, "n0": "100"}}, "language.certification.n0: '100': must be an integer in "
                                                          "[1, 1e+07]"),
    ("language", {"certification": {**CERT, "n": 10**9}}, "language.certification.n: 1000000000: must be an integer "
                                                         "in [1, 1e+07]"),
    ("language", {"certification": {**CERT, "alpha": 0}}, "language.certification.alpha: 0: must be a finite number "
                                                         "in (0, 1]"),
    ("language", {"certification": {**CERT, "alpha": float("nan")}}, "language.certification.alpha: nan: "),
    ("language", {"certification": {**CERT, "seed": -1}}, "language.certification.seed: -1: must be an integer"),
    ("language", {"certification": {**CERT, "correction": "sidak"}}, "language.certification.correction: 'sidak': "
                                                                     "must be bonferroni or holm"),
    ("language", {"certification": {"alpha": 0.001}}, "language.certification: {'alpha': 0.001} must be a mapping "
                                                      "of exactly n0, n, seed, alpha, correction"),
    ("language", {"settings": []}, "language.settings: []: must be a non-empty list of {tau, p_del}"),
    ("language", {"settings": "x"}, "language.settings: 'x': must be a non-empty list"),
    ("language", {"settings": [{"tau": 0.9}]}, "language.settings[0]: {'tau': 0.9}: must be a mapping of exactly tau "
                                               "and p_del"),
    ("language", {"settings": [{"tau": "0.9", "p_del": 0.95}]}, "language.settings[0].tau: '0.9': must be a finite "
                                                                "number in [0, 1]"),
    ("language", {"settings": [{"tau": 0.9, "p_del": True}]}, "language.settings[0].p_del: True: "),
    ("vision", {"from": 5}, "vision.from: 5 must be the path of experiments/vision_mechanism.py's --work folder"),
    ("vision", {"settings": []}, "vision.settings: []: must be a non-empty list of {tau, p_del}"),
    ("vision", {"size": "50"}, "vision.size: '50' must be an integer in [2, 100000]"),
    ("vision", {"bootstrap_seed": -2}, "vision.bootstrap_seed: -2: must be an integer"),
    ("vision", {"sizes": 50}, "vision.sizes: not a key of vision"),
    ("vision", {"scorers": [{"name": "a", "scorer": "relevance", "ranking": "signed"},
                            {"name": "a", "scorer": "conductance", "ranking": "signed"}]}, "with distinct names"),
    ("vision", {"scorers": [{"name": "a", "scorer": "relevance", "ranking": "signed"},
                            {"name": "b", "scorer": "relevance", "ranking": "signed"}]}, "no (scorer, ranking) twice"),
])  # fmt: skip
def test_every_number_and_key_is_checked_where_it_enters(fair, tmp_path, capsys, half, changes, message):
    path = _config(tmp_path, **changes) if half == "language" else _vision_config(tmp_path, **changes)
    stage = "score" if half == "language" else "hypotheses"
    work = tmp_path / "w"
    assert fair.main([str(path), "--work", str(work), "--half", half, "--stage", stage]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not work.exists()  # nothing left behind


def test_an_unreadable_config_is_one_line_for_either_half(fair, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("vision: [1\n")
    for half in ("language", "vision"):
        assert fair.main([str(bad), "--work", str(tmp_path / "w"), "--half", half, "--stage", "equal"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {bad}: cannot be read as YAML") and err.count("\n") == 1
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------ issue 61, class 3: the cache's provenance


def test_a_cache_built_from_another_config_is_refused_by_every_stage(fair, tmp_path, capsys):
    """The issue's example: a --work folder scored for induction_noisy, read with compiled: induction."""
    work = tmp_path / "work"
    seeds = [3, 4, 5, 6, 7, 8, 9, 10]
    noisy = _config(tmp_path, methods=["EAP"], model_seeds=seeds)
    for seed in seeds:
        _cache(work, seed, record=fair.language_built_from(fair.load_language(noisy)))
    (tmp_path / "clean").mkdir()
    clean = _config(tmp_path / "clean", methods=["EAP"], model_seeds=seeds, compiled="induction")
    record = work / "language" / "built_from.json"
    for stage in ("score", "conditions", "hypotheses", "equal"):
        assert fair.main([str(clean), "--work", str(work), "--stage", stage]) == 2
        err = capsys.readouterr().err
        assert err == (f"error: {record}: compiled: the 8 cached seeds were built from 'induction_noisy', {clean} "
                       "gives language.compiled 'induction': another config's truths and scores; pass a new --work "
                       f"folder (or delete {work / 'language'}: the score stage rebuilds it), or "
                       "--include-other-build to use it anyway\n")
    assert not (work / "language_conditions.csv").exists()
    half = _config(tmp_path / "clean", methods=["EAP"], model_seeds=seeds, distractor_scale=0.5)
    assert fair.main([str(half), "--work", str(work), "--stage", "conditions"]) == 2
    assert "distractor_scale: the 8 cached seeds were built from 1.0" in capsys.readouterr().err
    steps = _config(tmp_path / "clean", methods=["EAP"], model_seeds=seeds, ig_steps=7)
    assert fair.main([str(steps), "--work", str(work), "--stage", "conditions"]) == 2
    assert "ig_steps: the 8 cached seeds were built from 5" in capsys.readouterr().err
    # the explicit option includes it, with a warning; never for the stage that adds to the cache
    assert fair.main([str(clean), "--work", str(work), "--stage", "conditions", "--include-other-build"]) == 0
    assert "fair testbed: warning: --include-other-build: " in capsys.readouterr().err
    assert fair.main([str(clean), "--work", str(work), "--stage", "score", "--include-other-build"]) == 2
    assert "error: --include-other-build: only the language half's reading stages" in capsys.readouterr().err
    # a method the cache lacks: named, with the stage that adds it
    both = _config(tmp_path / "clean", methods=["EAP", "EAP-IG-inputs"], model_seeds=seeds)
    assert fair.main([str(both), "--work", str(work), "--stage", "conditions"]) == 2
    assert "s3.npz: lacks the scores of EAP-IG-inputs (language.methods); run --stage score (it adds only the " \
           "missing methods)" in capsys.readouterr().err


def test_a_record_without_cached_seeds_does_not_block_the_corrected_run(fair, tmp_path, capsys):
    """A score stage that failed before its first seed leaves only its record: another config is not refused."""
    work = tmp_path / "work"
    lang = fair.load_language(_config(tmp_path, compiled="induction"))
    (work / "language").mkdir(parents=True)
    (work / "language" / "built_from.json").write_text(json.dumps(fair.language_built_from(lang)))
    path = _config(tmp_path)
    fair.check_language_work(fair.load_language(path), work, path)  # no seed cached: nothing was built from it


@pytest.mark.slow
def test_a_cache_made_before_the_record_is_checked_against_the_model(fair, tmp_path, capsys):
    """A cache without built_from.json (results/fair_testbed was made so): its edges and its first prompts' scores
    are computed again from the config; matching, it is adopted (the record written), else refused by seed and
    method. One seed, whose first prompts hold the noisy model's real EAP scores."""
    import torch

    from noise_sweep import score_prompts  # beside fair_testbed, on the path since the fixture loaded it

    from certified_circuits.language.compiled import compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    torch.set_num_threads(1)
    path = _config(tmp_path, methods=["EAP"], model_seeds=[3])
    lang = fair.load_language(path)
    hf, tok, _ = compile_model("induction_noisy", 3, distractor_scale=1.0)
    weights = GPT2Weights.from_hf(hf)
    train = generate_splits("induction", 0, 1000)["train"][: fair.SPOT_PROMPTS]
    scores = np.zeros((1000, len(weights.graph.edge_names())))
    scores[: fair.SPOT_PROMPTS] = score_prompts(weights, encode_examples(train, tok, max_len=hf.config.n_positions),
                                               lang, "EAP")
    work = tmp_path / "work"
    (work / "language").mkdir(parents=True)
    names = np.asarray(weights.graph.edge_names())
    np.savez(work / "language" / "s3.npz", names=names, **{"scores/EAP": scores})
    (work / "language" / "s3.json").write_text(json.dumps({"seed": 3, "passed": True}))
    (tmp_path / "c").mkdir()
    other = _config(tmp_path / "c", methods=["EAP"], model_seeds=[3], distractor_scale=0.5)
    with pytest.raises(fair.ConfigError, match=r"s3.npz: scores/EAP: its first 4 prompts' scores differ from "
                                               r"'induction_noisy' seed 3's at distractor_scale 0.5"):
        fair.check_language_work(fair.load_language(other), work, other)
    clean = _config(tmp_path / "c", methods=["EAP"], model_seeds=[3], compiled="induction")
    with pytest.raises(fair.ConfigError, match="s3.npz: names: its edges are not those of language.compiled "
                                               "'induction' seed 3"):
        fair.check_language_work(fair.load_language(clean), work, clean)
    assert not (work / "language" / "built_from.json").exists()  # refused: nothing written
    fair.check_language_work(lang, work, path)
    assert json.loads((work / "language" / "built_from.json").read_text()) == fair.language_built_from(lang)
    assert "seeds [3] match" in capsys.readouterr().err


def test_a_vision_size_larger_than_dc_is_refused_before_the_stage(fair, tmp_path, capsys):
    """vision.size 1000 with 50 concept images gave the same tables as 50: refused, naming the file."""
    from certified_circuits.analysis.recovery import GROUND_TRUTH_FORMAT
    from certified_circuits.storage.atomic import write_json
    from certified_circuits.storage.store import write_attributions

    root = tmp_path / "mechanism"
    names = [f"layer1.{i}" for i in range(4)]
    for part, n in (("dc", 10), ("population", 1000)):
        write_attributions(root / "s0" / f"{part}_circle.h5", {"relevance": np.ones((n, 4))},
                           np.zeros(4, np.int32), names, [str(i) for i in range(n)], {"concept": "circle"})
    write_json(root / "s0" / "ground_truth.json", {
        "format": GROUND_TRUTH_FORMAT, "experiment": "world", "kind": "vision", "n_components": 4,
        "concepts": {"circle": {"components": ["layer1.0"], "verification": {"passed": True}}}})
    (root / "conditions.csv").write_text("seed\n0\n")
    (root / "built_from.json").write_text(json.dumps(MECHANISM))
    path = _vision_config(tmp_path, **{"from": str(root), "model_seeds": [0], "size": 1000})
    work = tmp_path / "w"
    assert fair.main([str(path), "--work", str(work), "--half", "vision", "--stage", "equal"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: vision.size: 1000 exceeds the 10 examples of {root / 's0' / 'dc_circle.h5'} (D_c): "
                   "the first 1000 would silently be 10; lower vision.size to at most 10, or rebuild the mechanism "
                   "with a larger world.n_concept_per_class\n")
    assert not work.exists()


def test_the_shipped_config_is_accepted(fair):
    path = ROOT / "experiments" / "fair_testbed.yaml"
    lang, vision = fair.load_language(path), fair.load_vision(path)
    assert lang["compiled"] == "induction_noisy" and vision["size"] == 50
    record = fair.language_built_from(lang)
    assert list(record["methods"]) == ["EAP-IG-inputs", "CEAP"] and record["distractor_scale"] == 1.0
