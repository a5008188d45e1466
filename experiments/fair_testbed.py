"""The fair testbed of issue 50 (docs/embedded_default.md, "The fair testbed", pre-registered; numbers in
docs/fair_testbed.md): what a certificate buys, measured so that a referee accepts it.

Three stages, each reading the one before from ``--work`` (so an interrupted run resumes with the same command):

- ``score``: per model seed, build the model, verify its truth (the whole circuit on the scored truth, then every
  component on its own: true, null or grey), and score the population (the first ``population`` training prompts;
  D is its first ``size``) with every method. Cached as ``<half>/s<seed>.npz`` (+ ``.json``).
- ``conditions``: the baseline's conditions (a)-(c) at the truth's size over ``resamples`` bootstrap resamples of D
  (:func:`certified_circuits.analysis.baseline_conditions.baseline_conditions`). Computes no certified number.
- ``hypotheses``: certified circuits at the truth's size, the size-matched comparisons and H1 and H3 over the model
  seeds (:mod:`certified_circuits.analysis.size_matched`, :mod:`certified_circuits.analysis.seed_tests`). The old H2
  (three-valued labels against two-valued memberships) is withdrawn and no longer reported.
- ``equal``: the equal-footing comparisons (docs/embedded_default.md, "The fair testbed on equal footing"): the
  certificate against the matched cut, the bootstrap interval and consensus, which may abstain as much; shares over
  the live components; abstention as a detector of the population's contested set; H2a-H2c and H4
  (:mod:`certified_circuits.analysis.equal_footing`).

Usage::

    PYTHONPATH=src .venv/bin/python experiments/fair_testbed.py experiments/fair_testbed.yaml \\
        --work results/fair_testbed --half language --stage score

Every refusal is one line on stderr, ``error: <file>: <key>: <what is wrong>; <fix>``, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.baseline_conditions import MIN_POPULATION, MIN_RESAMPLES, baseline_conditions
from certified_circuits.core.setting import Setting
from certified_circuits.storage.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("score", "conditions", "hypotheses", "equal")
#: the vision scorers the mechanism's attribution files hold (experiments/vision_mechanism.py)
VISION_SCORERS = ("relevance", "activation", "conductance")


class ConfigError(ValueError):
    """A refusal of the command line or the config: printed as ``error: <message>`` with exit 2."""


def _setting(section: dict[str, Any], s: dict[str, Any], where: str) -> Setting:
    c = section["certification"]
    try:
        return Setting(p_del=float(s["p_del"]), n0=int(c["n0"]), n=int(c["n"]), seed=int(c["seed"]),
                       tau=float(s["tau"]), alpha=float(c["alpha"]), correction=str(c["correction"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}; see experiments/fair_testbed.yaml") from None


#: the ``equal_footing`` block of each half: key -> (type, lowest, highest) (the pre-registration's values in the yaml)
FOOTING_KEYS = {"inner_resamples": (int, 2, 10_000), "inner_seed": (int, 0, 2**32 - 1), "q": (float, 0.5, 1.0),
                "z": (float, 0.0, 10.0), "population_samples": (int, 10, 100_000),
                "population_seed": (int, 0, 2**32 - 1), "tie_seed": (int, 0, 2**32 - 1)}


def check_footing(section: dict[str, Any], where: str) -> None:
    """The ``equal_footing`` block: every key of :data:`FOOTING_KEYS`, of its type and in its range (q in (0.5, 1]).

    Raises:
        ConfigError: naming the file, the key and the allowed range.
    """
    block = section.get("equal_footing")
    if not isinstance(block, dict):
        raise ConfigError(f"{where}.equal_footing: missing or not a mapping; see experiments/fair_testbed.yaml")
    unknown = sorted(set(block) - set(FOOTING_KEYS))
    missing = sorted(set(FOOTING_KEYS) - set(block))
    if unknown or missing:
        raise ConfigError(f"{where}.equal_footing: {'unknown ' + ', '.join(unknown) if unknown else ''}"
                          f"{'; ' if unknown and missing else ''}{'lacks ' + ', '.join(missing) if missing else ''}; "
                          f"the keys are {', '.join(FOOTING_KEYS)}")
    for key, (kind, low, high) in FOOTING_KEYS.items():
        value = block[key]
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
              and (kind is float or isinstance(value, int)) and low <= value <= high and not (key == "q" and value == low))
        if not ok:
            span = f"({low}, {high}]" if key == "q" else f"[{low}, {high}]"
            raise ConfigError(f"{where}.equal_footing.{key}: {value!r} must be {'an integer' if kind is int else 'a number'} "
                              f"in {span}")


def footing_protocol(section: dict[str, Any]):
    """The half's :class:`~certified_circuits.analysis.equal_footing.FootingProtocol` (the outer resamples and their
    seed are the conditions' ``resamples`` and ``bootstrap_seed``)."""
    from certified_circuits.analysis.equal_footing import FootingProtocol

    b = section["equal_footing"]
    return FootingProtocol(n_resamples=int(section["resamples"]), bootstrap_seed=int(section["bootstrap_seed"]),
                           n_inner=int(b["inner_resamples"]), inner_seed=int(b["inner_seed"]), q=float(b["q"]),
                           z=float(b["z"]), n_population_samples=int(b["population_samples"]),
                           population_seed=int(b["population_seed"]), tie_seed=int(b["tie_seed"]))


def load_language(path: Path) -> dict[str, Any]:
    """The ``language`` section, checked before any model is built.

    Raises:
        ConfigError: naming the file and the key: a missing key, seeds repeated or not integers, sizes out of order
            or below the pre-registered floors, an unknown method or compiled model.
    """
    from certified_circuits.language.graph import COMPILED_SHAPES
    from certified_circuits.language.methods import check_method

    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML ({exc}); pass experiments/fair_testbed.yaml") from None
    lang = config.get("language") if isinstance(config, dict) else None
    if not isinstance(lang, dict):
        raise ConfigError(f"{path}: language: missing or not a mapping; see experiments/fair_testbed.yaml")
    needed = ("compiled", "distractor_scale", "model_seeds", "task_seed", "held_out", "size", "population",
              "methods", "ig_steps", "settings", "certification", "resamples", "bootstrap_seed")
    missing = [k for k in needed if k not in lang]
    if missing:
        raise ConfigError(f"{path}: language: lacks {', '.join(missing)}; see experiments/fair_testbed.yaml")
    if lang["compiled"] not in COMPILED_SHAPES:
        raise ConfigError(f"{path}: language.compiled: {lang['compiled']!r} is not a compiled model; choose one of "
                          f"{', '.join(COMPILED_SHAPES)}")
    if lang["compiled"] != "induction_noisy" and float(lang["distractor_scale"]) != 1.0:
        raise ConfigError(f"{path}: language.distractor_scale: only the noisy model has distractors; set it to 1.0 "
                          f"for {lang['compiled']!r}")
    seeds = lang["model_seeds"]
    if (not isinstance(seeds, list) or not seeds or len(set(map(str, seeds))) != len(seeds)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise ConfigError(f"{path}: language.model_seeds: {seeds!r} must be distinct non-negative integers (a seed "
                          "given twice would count as two pairs)")
    for key, floor in (("size", 2), ("held_out", 10), ("population", MIN_POPULATION), ("resamples", MIN_RESAMPLES),
                       ("ig_steps", 1)):
        value = lang[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < floor or value > 100_000:
            raise ConfigError(f"{path}: language.{key}: {value!r} must be an integer in [{floor}, 100000]")
    if lang["size"] > lang["population"]:
        raise ConfigError(f"{path}: language.size: {lang['size']} exceeds language.population "
                          f"({lang['population']}): D is the population's first |D| prompts")
    methods = lang["methods"]
    if not isinstance(methods, list) or not methods or len(set(methods)) != len(methods):
        raise ConfigError(f"{path}: language.methods: {methods!r} must be a list of distinct methods")
    for method in methods:
        try:
            spec = check_method(method, "edge", int(lang["ig_steps"]), "reference")
        except ValueError as exc:
            raise ConfigError(f"{path}: language.methods: {exc}") from None
        if not spec.decomposed:
            raise ConfigError(f"{path}: language.methods: {method} is not computed by the decomposed forward; "
                              "use EAP-IG-inputs or EAP")
    settings = lang["settings"]
    if not isinstance(settings, list) or not settings:
        raise ConfigError(f"{path}: language.settings: a non-empty list of {{tau, p_del}}")
    tags = [_setting(lang, s, f"{path}: language.settings[{i}]").tag for i, s in enumerate(settings)]
    if len(set(tags)) != len(tags):
        raise ConfigError(f"{path}: language.settings: a setting is given twice ({tags})")
    check_footing(lang, f"{path}: language")
    return lang


def load_vision(path: Path) -> dict[str, Any]:
    """The ``vision`` section (the hypotheses of the vision mechanism, read from experiments/vision_mechanism.py's
    work folder), checked before any work.

    Raises:
        ConfigError: naming the file and the key.
    """
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    vision = config.get("vision") if isinstance(config, dict) else None
    if not isinstance(vision, dict):
        raise ConfigError(f"{path}: vision: missing or not a mapping; see experiments/fair_testbed.yaml")
    needed = ("from", "model_seeds", "size", "scorers", "settings", "certification", "resamples", "bootstrap_seed")
    missing = [k for k in needed if k not in vision]
    if missing:
        raise ConfigError(f"{path}: vision: lacks {', '.join(missing)}; see experiments/fair_testbed.yaml")
    seeds = vision["model_seeds"]
    if (not isinstance(seeds, list) or not seeds or len(set(map(str, seeds))) != len(seeds)
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds)):
        raise ConfigError(f"{path}: vision.model_seeds: {seeds!r} must be distinct non-negative integers")
    for key, floor in (("size", 2), ("resamples", MIN_RESAMPLES)):
        value = vision[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < floor or value > 100_000:
            raise ConfigError(f"{path}: vision.{key}: {value!r} must be an integer in [{floor}, 100000]")
    scorers = vision["scorers"]
    if not isinstance(scorers, list) or not scorers or len({str(x) for x in scorers}) != len(scorers) or not all(
            isinstance(x, dict) and x.get("scorer") in VISION_SCORERS
            and x.get("ranking") in ("signed", "absolute") and x.get("name") for x in scorers) or len(
            {x["name"] for x in scorers}) != len(scorers):
        raise ConfigError(f"{path}: vision.scorers: {scorers!r} must be {{name, scorer: {'|'.join(VISION_SCORERS)}, "
                          "ranking: signed|absolute}, with distinct names")
    tags = [_setting(vision, x, f"{path}: vision.settings[{i}]").tag for i, x in enumerate(vision["settings"])]
    if len(set(tags)) != len(tags):
        raise ConfigError(f"{path}: vision.settings: a setting is given twice ({tags})")
    check_footing(vision, f"{path}: vision")
    return vision


def _language_seed(lang: dict[str, Any], seed: int) -> dict[str, Any]:
    """One model seed of the language half: the truth (whole circuit on the scored truth, then each edge) and every
    method's scores on the population prompts."""
    from certified_circuits.analysis.component_truth import effect_summary, grey_components
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    sys.path.insert(0, str(Path(__file__).parent))
    from noise_sweep import compiled_truth, score_prompts

    hf, tok, weights, planted, kept, scored = compiled_truth(lang["compiled"], seed, lang,
                                                             float(lang["distractor_scale"]))
    block = scored["per_component"]
    names = np.asarray(weights.graph.edge_names())
    grey = grey_components(block)
    effects = np.array([block["effects"][n] for n in names])
    train = generate_splits("induction", int(lang["task_seed"]), int(lang["population"]))["train"]
    batch = encode_examples(train, tok, max_len=hf.config.n_positions)
    scores = {m: score_prompts(weights, batch, lang, m) for m in lang["methods"]}
    summary = effect_summary(block["effects"], kept)
    row = {"seed": seed, "concept": "induction", "n_components": int(names.size), "n_planted": len(planted),
           "n_true": len(kept), "n_grey": len(grey), "delta": block["delta"], "epsilon": block["epsilon"],
           "ratio": block["ratio"], "per_component_passed": bool(block["passed"]),
           "whole_passed": bool(scored["passed"]), "recovery": scored["recovery"], "remaining": scored["remaining"],
           "passed": bool(block["passed"] and scored["passed"]),
           **{f"true_{k}": v for k, v in summary["truth"].items()},
           **{f"null_{k}": v for k, v in summary["non_truth"].items()}}
    arrays = {"names": names, "truth": np.isin(names, kept), "grey": np.isin(names, grey), "effects": effects,
              "groups": np.zeros(names.size, dtype=np.int64),
              **{f"scores/{m}": s for m, s in scores.items()}}
    return {"row": row, "arrays": arrays}


def _missing_scores(lang: dict[str, Any], seed: int, npz: Path, meta: Path) -> None:
    """Add the methods of ``lang`` that a cached seed lacks (its truth is kept: only the model is compiled again, and
    the same prompts are scored), so a method added to the config after the truths were verified costs only its own
    scores."""
    from certified_circuits.language.compiled import compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    sys.path.insert(0, str(Path(__file__).parent))
    from noise_sweep import score_prompts

    with np.load(npz, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    missing = [m for m in lang["methods"] if f"scores/{m}" not in arrays]
    if not missing:
        return
    start = time.perf_counter()
    hf, tok, _ = compile_model(lang["compiled"], seed, distractor_scale=float(lang["distractor_scale"]))
    weights = GPT2Weights.from_hf(hf)
    if list(np.asarray(weights.graph.edge_names())) != list(arrays["names"]):
        raise ConfigError(f"{npz}: its edges are not those of {lang['compiled']} seed {seed}; delete it and rerun "
                          "--stage score")
    train = generate_splits("induction", int(lang["task_seed"]), int(lang["population"]))["train"]
    batch = encode_examples(train, tok, max_len=hf.config.n_positions)
    for method in missing:
        arrays[f"scores/{method}"] = score_prompts(weights, batch, lang, method)
    tmp = npz.with_name(npz.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(npz)
    print(f"fair testbed: language seed {seed}: added {', '.join(missing)}; {time.perf_counter() - start:.0f} s",
          file=sys.stderr)


def stage_score(lang: dict[str, Any], work: Path) -> None:
    """Cache every seed's truth and scores (a cached seed only gets the methods it lacks)."""
    import torch

    torch.set_num_threads(1)
    (work / "language").mkdir(parents=True, exist_ok=True)
    for seed in lang["model_seeds"]:
        npz, meta = work / "language" / f"s{seed}.npz", work / "language" / f"s{seed}.json"
        if npz.is_file() and meta.is_file():
            _missing_scores(lang, int(seed), npz, meta)
            continue
        start = time.perf_counter()
        result = _language_seed(lang, int(seed))
        tmp = npz.with_name(npz.name + ".tmp.npz")
        np.savez(tmp, **result["arrays"])
        tmp.replace(npz)
        result["row"]["seconds"] = time.perf_counter() - start
        write_text(meta, json.dumps(result["row"], indent=1) + "\n")
        r = result["row"]
        print(f"fair testbed: language seed {seed}: truth {r['n_true']} of {r['n_planted']} planted, {r['n_grey']} "
              f"grey, ratio {r['ratio']}, passed {r['passed']}; {r['seconds']:.0f} s", file=sys.stderr)


def read_seed(work: Path, half: str, seed: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One cached seed: its truth row and arrays (``names``, ``truth``, ``grey``, ``groups``, ``scores/<method>``)."""
    npz, meta = work / half / f"s{seed}.npz", work / half / f"s{seed}.json"
    if not (npz.is_file() and meta.is_file()):
        raise ConfigError(f"{npz}: missing; run the score stage first (--stage score)")
    with np.load(npz, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return json.loads(meta.read_text(encoding="utf-8")), arrays


def stage_conditions(lang: dict[str, Any], work: Path) -> pd.DataFrame:
    """Conditions (a)-(c) per seed and method (baseline only: no certified number)."""
    from certified_circuits.language.methods import check_method

    rows = []
    for seed in lang["model_seeds"]:
        truth_row, arrays = read_seed(work, "language", int(seed))
        if not truth_row["passed"]:
            print(f"fair testbed: language seed {seed}: the truth fails its check; left out", file=sys.stderr)
            continue
        for method in lang["methods"]:
            absolute = check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"
            population = arrays[f"scores/{method}"]
            result = baseline_conditions(population[: int(lang["size"])], arrays["groups"], arrays["truth"],
                                         population, absolute=absolute, n_resamples=int(lang["resamples"]),
                                         seed=int(lang["bootstrap_seed"]), exclude=arrays["grey"])
            rows.append({"half": "language", "seed": int(seed), "concept": truth_row["concept"], "scorer": method,
                         "n_examples": int(lang["size"]), "n_population": int(population.shape[0]), **result.row()})
    table = pd.DataFrame(rows)
    write_text(work / "language_conditions.csv", table.to_csv(index=False))
    write_text(work / "language_conditions.md", conditions_markdown(table))
    return table


def conditions_markdown(table: pd.DataFrame) -> str:
    """Per scorer: each seed's (a)-(c) numbers, then the mean over seeds and how many seeds meet each."""
    out = []
    for scorer, part in table.groupby("scorer", sort=False):
        out += [f"#### {scorer}", "", "| seed | precision on D (resampled) / population | gap (a: >= 0.1) | true "
                "components in 20-80% (b) | Jaccard to full D (c: <= 0.85) | a / b / c |", "|---|---|---|---|---|---|"]
        seeds = part.groupby("seed", sort=True).agg(
            precision_resampled=("precision_resampled", "mean"), precision_population=("precision_population", "mean"),
            precision_gap=("precision_gap", "mean"), in_band=("in_band", "sum"), n_true=("n_true", "sum"),
            jaccard=("jaccard", "mean"), b=("b", "all"))
        for seed, r in seeds.iterrows():
            a, c = r.precision_gap >= 0.1, r.jaccard <= 0.85
            out.append(f"| {seed} | {r.precision_resampled:.3f} / {r.precision_population:.3f} | "
                       f"{r.precision_gap:+.3f} | {r.in_band} of {r.n_true} | {r.jaccard:.3f} | "
                       f"{'yes' if a else 'no'} / {'yes' if r.b else 'no'} / {'yes' if c else 'no'} |")
        n = len(seeds)
        out += [f"| mean over {n} seeds | {seeds.precision_resampled.mean():.3f} / "
                f"{seeds.precision_population.mean():.3f} | {seeds.precision_gap.mean():+.3f} | "
                f"{int((seeds.b).sum())} of {n} seeds | {seeds.jaccard.mean():.3f} | "
                f"{int((seeds.precision_gap >= 0.1).sum())} / {int(seeds.b.sum())} / "
                f"{int((seeds.jaccard <= 0.85).sum())} of {n} seeds |", ""]
    return "\n".join(out) + "\n"


def language_cases(lang: dict[str, Any], work: Path):
    """Every (seed, concept, scorer) of the language half whose truth passed: its scores on D and its truth."""
    from certified_circuits.language.methods import check_method

    for seed in lang["model_seeds"]:
        truth_row, arrays = read_seed(work, "language", int(seed))
        if not truth_row["passed"]:
            continue
        for method in lang["methods"]:
            yield {"seed": int(seed), "concept": truth_row["concept"], "scorer": method,
                   "scores": arrays[f"scores/{method}"][: int(lang["size"])], "groups": arrays["groups"],
                   "population": arrays[f"scores/{method}"],
                   "truth": arrays["truth"], "grey": arrays["grey"],
                   "absolute": check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"}


def vision_cases(vision: dict[str, Any]):
    """Every (seed, class, scorer) of the vision half whose truth passed, read from experiments/vision_mechanism.py's
    work folder (``vision.from``): ``s<seed>/ground_truth.json`` and ``s<seed>/dc_<class>.h5`` (D_c)."""
    from certified_circuits.analysis.recovery import grey_mask, read_ground_truth, truth_mask
    from certified_circuits.storage.store import read_attributions

    root = Path(vision["from"])
    for seed in vision["model_seeds"]:
        truth_file = root / f"s{seed}" / "ground_truth.json"
        if not truth_file.is_file():
            raise ConfigError(f"{truth_file}: missing; run experiments/vision_mechanism.py with --work {root} first")
        known = read_ground_truth(truth_file)
        for concept in known.concepts:
            if not known.verified(concept):
                print(f"fair testbed: vision seed {seed} {concept}: the truth fails its check; left out",
                      file=sys.stderr)
                continue
            attr = read_attributions(root / f"s{seed}" / f"dc_{concept}.h5")
            pop = read_attributions(root / f"s{seed}" / f"population_{concept}.h5")
            if list(pop.names) != list(attr.names):
                raise ConfigError(f"{root / f's{seed}'}: population_{concept}.h5 and dc_{concept}.h5 name other "
                                  "components; rerun experiments/vision_mechanism.py into a fresh --work")
            truth = truth_mask(known, concept, attr.names, str(truth_file))
            for scorer in vision["scorers"]:
                if scorer["scorer"] not in attr.scores or scorer["scorer"] not in pop.scores:
                    raise ConfigError(f"{root / f's{seed}'}: dc_{concept}.h5 or population_{concept}.h5 lacks scores "
                                      f"of {scorer['scorer']!r}; add it to experiments/vision_mechanism.yaml's "
                                      "scorers and rerun experiments/vision_mechanism.py")
                yield {"seed": int(seed), "concept": concept, "scorer": scorer["name"],
                       "scores": attr.scores[scorer["scorer"]][: int(vision["size"])], "groups": attr.groups,
                       "population": pop.scores[scorer["scorer"]],
                       "truth": truth, "grey": grey_mask(known, concept, attr.names),
                       "absolute": scorer["ranking"] == "absolute"}


def hypotheses(cases, settings: list[Setting], section: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                  pd.DataFrame]:
    """Certified circuits at the truth's size, the size-matched rows, the stability shares and H1-H3 over the
    section's model seeds (module docstring): ``(matched, stability, hypotheses)``."""
    from certified_circuits.analysis.seed_tests import seed_hypothesis_table
    from certified_circuits.analysis.size_matched import METHODS, truth_size_rows
    from certified_circuits.core.planning import PlanWarning
    from certified_circuits.core.smoothing import mask_seed

    warnings.simplefilter("ignore", PlanWarning)
    shared = ("can_certify_in", "baseline_change_share", "certified_change_share", "certified_flip_share",
              "certified_in_any", "abstain_share")  # a certificate's stability: the same on each of its rows
    matched, stability = [], []
    for case in cases:
        for setting in settings:
            labels = {"seed": case["seed"], "concept": case["concept"], "scorer": case["scorer"],
                      "setting": setting.tag}
            rows = truth_size_rows(case["scores"], case["groups"], case["truth"], setting, absolute=case["absolute"],
                                   exclude=case["grey"], mask_seed=mask_seed(setting.seed, case["concept"]),
                                   n_resamples=int(section["resamples"]),
                                   bootstrap_seed=int(section["bootstrap_seed"]))  # the workflow's stage's rows
            matched += [{**labels, **row} for row in rows if row["method"] in METHODS]
            stability.append({**labels, **{key: rows[0][key] for key in shared}})
    matched_df, stability_df = pd.DataFrame(matched), pd.DataFrame(stability)
    table = seed_hypothesis_table(matched_df, stability_df, [int(s) for s in section["model_seeds"]])
    # the old H2 set three-valued labels against two-valued memberships: withdrawn (H2a-H2c of the equal stage);
    # Holm runs within each hypothesis, so H1's and H3's p-values do not depend on it
    table = table[table["hypothesis"] != "H2"].reset_index(drop=True)
    return matched_df, stability_df, table


def stage_hypotheses(half: str, section: dict[str, Any], work: Path) -> pd.DataFrame:
    """The hypotheses stage of one half; refuses to run before its conditions were read (the pre-registration)."""
    conditions = work / "language_conditions.csv" if half == "language" else Path(section["from"]) / "conditions.csv"
    if not conditions.is_file():
        first = "--stage conditions" if half == "language" else "experiments/vision_mechanism.py"
        raise ConfigError(f"{conditions}: missing; run {first} first (the pre-registration reads the baseline's "
                          "conditions before any certified number)")
    settings = [_setting(section, s, f"{half}.settings") for s in section["settings"]]
    cases = language_cases(section, work) if half == "language" else vision_cases(section)
    matched_df, stability_df, table = hypotheses(cases, settings, section)
    for name, frame in (("matched", matched_df), ("stability", stability_df), ("hypotheses", table)):
        write_text(work / f"{half}_{name}.csv", frame.to_csv(index=False))
    write_text(work / f"{half}_hypotheses.md", hypotheses_markdown(matched_df, stability_df, table))
    return table


def hypotheses_markdown(matched: pd.DataFrame, stability: pd.DataFrame, table: pd.DataFrame) -> str:
    """The size-matched table (means over seeds of the per-seed means) and the hypotheses with Holm."""
    out = ["| scorer | method | size (mean) | precision | baseline's top-size precision | recall | baseline's "
           "recall | seeds with a non-empty circuit |", "|---|---|---|---|---|---|---|---|"]
    per_seed = matched.groupby(["scorer", "method", "seed"], sort=False)[
        ["size", "precision", "baseline_precision", "recall", "baseline_recall"]].mean()
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        n = int(part["precision"].notna().sum())
        out.append(f"| {scorer} | {method} | {part['size'].mean():.2f} | {part['precision'].mean():.3f} | "
                   f"{part['baseline_precision'].mean():.3f} | {part['recall'].mean():.3f} | "
                   f"{part['baseline_recall'].mean():.3f} | {n} of {len(part)} |")
    out += ["", "| hypothesis | scorer | method | seeds | certified | baseline | mean difference | p (exact) | p "
            "(Holm) | smallest p possible | result |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        out.append(f"| {r.hypothesis} | {r.scorer} | {r.method} | {r.n_seeds} (dropped {r.n_dropped}) | "
                   f"{r.certified:.4f} | {r.baseline:.4f} | {r.mean_difference:+.4f} | {r.pvalue:.4g} | "
                   f"{r.pvalue_holm:.4g} | {r.min_pvalue:.4g} | {r.status} |")
    return "\n".join(out) + "\n"


#: the equal-footing table's columns: (column, header, format)
EQUAL_TABLE = (("change_share_live", "labels changed (live)", "{:.2%}"), ("change_share_all", "(all)", "{:.2%}"),
               ("flip_share_live", "in <-> out flips (live)", "{:.3%}"), ("abstain_share_live", "abstained (live)",
                                                                        "{:.1%}"),
               ("in_precision_d", "IN precision on D", "{:.3f}"), ("in_precision_mean", "IN precision, resampled",
                                                                   "{:.3f}"),
               ("detector_precision", "contested: precision", "{:.2f}"), ("detector_recall", "recall", "{:.2f}"),
               ("detector_auroc", "AUROC", "{:.3f}"))
#: the two-valued table's columns
TWO_TABLE = (("size_d", "size on D", "{:.2f}"), ("change_share_live", "memberships changed (live)", "{:.2%}"),
             ("baseline_change_share_live", "baseline's top of that size (live)", "{:.2%}"),
             ("change_share_all", "(all)", "{:.2%}"), ("baseline_change_share_all", "baseline (all)", "{:.2%}"))


def _cells(frame: pd.DataFrame, columns) -> str:
    values = []
    for column, _, fmt in columns:
        value = frame[column].mean()
        values.append("n/a" if pd.isna(value) else fmt.format(value))
    return " | ".join(values)


def equal_markdown(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    """Per scorer: the three-valued methods (means over seeds of the per-seed means over concepts and settings), the
    two-valued circuits against the baseline's top of their size, then H2a-H2c and H4 with Holm."""
    from certified_circuits.analysis.equal_footing import THREE_VALUED, TWO_VALUED

    per_seed = rows.groupby(["scorer", "method", "seed"], sort=False).mean(numeric_only=True)
    out = ["| scorer | method | " + " | ".join(h for _, h, _ in EQUAL_TABLE) + " |",
           "|---|---|" + "---|" * len(EQUAL_TABLE)]
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        if method in THREE_VALUED:
            out.append(f"| {scorer} | {method} | {_cells(part, EQUAL_TABLE)} |")
    out += ["", "| scorer | circuit | " + " | ".join(h for _, h, _ in TWO_TABLE) + " |",
            "|---|---|" + "---|" * len(TWO_TABLE)]
    for (scorer, method), part in per_seed.groupby(level=[0, 1], sort=False):
        if method in TWO_VALUED:
            out.append(f"| {scorer} | {method} | {_cells(part, TWO_TABLE)} |")
    out += ["", "| hypothesis | scorer | against | seeds | certified | comparator | mean difference | p (exact) | "
            "p (Holm) | smallest p possible | result |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        out.append(f"| {r.hypothesis} | {r.scorer} | {r.method} | {r.n_seeds} (dropped {r.n_dropped}) | "
                   f"{r.certified:.4f} | {r.baseline:.4f} | {r.mean_difference:+.4f} | {r.pvalue:.4g} | "
                   f"{r.pvalue_holm:.4g} | {r.min_pvalue:.4g} | {r.status} |")
    return "\n".join(out) + "\n"


def stage_equal(half: str, section: dict[str, Any], work: Path) -> pd.DataFrame:
    """The equal-footing stage of one half (module docstring); like ``hypotheses``, it refuses to run before the
    half's conditions were written (the pre-registration reads them first)."""
    from certified_circuits.analysis.equal_footing import equal_footing_hypotheses, equal_footing_rows
    from certified_circuits.core.planning import PlanWarning
    from certified_circuits.core.smoothing import mask_seed

    conditions = work / "language_conditions.csv" if half == "language" else Path(section["from"]) / "conditions.csv"
    if not conditions.is_file():
        first = "--stage conditions" if half == "language" else "experiments/vision_mechanism.py"
        raise ConfigError(f"{conditions}: missing; run {first} first (the pre-registration reads the baseline's "
                          "conditions before any certified number)")
    warnings.simplefilter("ignore", PlanWarning)
    protocol = footing_protocol(section)
    settings = [_setting(section, s, f"{half}.settings") for s in section["settings"]]
    cases = language_cases(section, work) if half == "language" else vision_cases(section)
    rows, start = [], time.perf_counter()
    for case in cases:
        for setting in settings:
            labels = {"seed": case["seed"], "concept": case["concept"], "scorer": case["scorer"],
                      "setting": setting.tag}
            found = equal_footing_rows(case["scores"], case["groups"], case["truth"], setting, case["population"],
                                       absolute=case["absolute"], exclude=case["grey"],
                                       mask_seed=mask_seed(setting.seed, case["concept"]), protocol=protocol)
            rows += [{**labels, **row} for row in found]
        print(f"fair testbed: {half} equal footing: seed {case['seed']} {case['concept']} {case['scorer']} done "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    frame = pd.DataFrame(rows)
    table = equal_footing_hypotheses(frame, [int(s) for s in section["model_seeds"]])
    write_text(work / f"{half}_equal_rows.csv", frame.to_csv(index=False))
    write_text(work / f"{half}_equal_hypotheses.csv", table.to_csv(index=False))
    write_text(work / f"{half}_equal.md", equal_markdown(frame, table))
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path, help="the testbed's config (experiments/fair_testbed.yaml)")
    p.add_argument("--work", type=Path, required=True, help="folder of the cached seeds and the tables")
    p.add_argument("--half", choices=("language", "vision"), default="language",
                   help="vision: the hypotheses of the vision mechanism (its truths and conditions are "
                        "experiments/vision_mechanism.py's)")
    p.add_argument("--stage", choices=STAGES, required=True)
    args = p.parse_args(argv)
    try:
        if not args.config.is_file():
            raise ConfigError(f"{args.config}: not found; pass experiments/fair_testbed.yaml")
        section = load_language(args.config) if args.half == "language" else load_vision(args.config)
        if args.half == "vision" and args.stage not in ("hypotheses", "equal"):
            raise ConfigError(f"--stage {args.stage} --half vision: the vision truths and conditions are "
                              "experiments/vision_mechanism.py's; run it, then --stage hypotheses or --stage equal")
        args.work.mkdir(parents=True, exist_ok=True)
        warnings.simplefilter("ignore", UserWarning)
        if args.stage == "score":
            stage_score(section, args.work)
        elif args.stage == "conditions":
            print(stage_conditions(section, args.work).to_string(), file=sys.stderr)
        elif args.stage == "hypotheses":
            print(stage_hypotheses(args.half, section, args.work).to_string(), file=sys.stderr)
        else:
            print(stage_equal(args.half, section, args.work).to_string(), file=sys.stderr)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
