"""The noise x dataset-size sweep of issue 42 (docs/noise_sweep.md): what a certificate buys as the data get noisier.

Two halves, each a section of the config (experiments/noise_sweep.yaml):

- **language**: the clean compiled induction model and the noisy one at each distractor scale, each model seed, each
  dataset size |D| (the first |D| training prompts), each method (EAP-IG, EAP) and each certification setting;
- **vision**: the planted world ResNet at each cross-class leak, each model seed, each class of ``concepts``, each
  |D_c| (the first |D_c| concept images of the class) and each scorer (signed and absolute relevance, activation).

Every cell is measured by :func:`cell_rows` at K = the verified truth's share:

- **recovery** (:func:`certified_circuits.analysis.recovery.recovery_rows`, full data): precision and recall of the
  baseline (the method on all of D), the certified-in circuit and certified in + abstain; the AUROC of each over the
  K grid (:func:`~certified_circuits.analysis.recovery.auroc_by_method`);
- **stability** (:func:`certified_circuits.analysis.stability.stability`, B bootstrap resamples of D): the baseline's
  mean Jaccard to its full-data circuit, the share of baseline memberships that change and of certified labels that
  flip in <-> out between resamples;
- **hypotheses** H1a, H2, H3 (:func:`certified_circuits.analysis.hypotheses.hypothesis_table`; pairs: concept x model
  seed x setting) per model, size and scorer. The pre-registered cell (``preregistered`` in the config;
  docs/embedded_default.md) is marked; the other cells are exploratory. H1b needs the workflow's held-out selection
  and is not computed here.

The truth of every model is verified first, as the ground-truth stages do: the whole circuit, then every component on
its own (:func:`certified_circuits.language.ground_truth.per_component_verification`, ``vision-ground-truth``); a
language model whose check fails is reported and left out of the tables.

Usage::

    PYTHONPATH=src .venv/bin/python experiments/noise_sweep.py experiments/noise_sweep.yaml --out results/noise_sweep \\
        [--half language|vision|both]

Writes ``<half>_rows.csv`` (one row per model, seed, size, scorer and setting; for vision per class),
``<half>_truth.csv``, ``<half>_hypotheses.csv`` and ``<half>_sweep.md`` (the docs' tables) under ``--out``, and the
vision half's world, models, ground truths and attributions under ``--out/vision`` (reused when present, so an
interrupted sweep resumes); progress goes to stderr. Cost on 2 shared cores: about 50 s per language model and seed
(10 min in all), about 6 minutes per vision leak and seed (training 2-3 min).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from certified_circuits.analysis.component_truth import effect_summary
from certified_circuits.analysis.hypotheses import hypothesis_table
from certified_circuits.analysis.recovery import auroc_by_method, recovery_rows
from certified_circuits.analysis.stability import stability
from certified_circuits.api import certify_scores
from certified_circuits.core.certification import certified_radius
from certified_circuits.core.planning import PlanWarning, plan
from certified_circuits.core.setting import Setting
from certified_circuits.storage.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]

#: the summary columns of the docs' tables, in order: (column of the rows, header)
TABLE_COLUMNS = (
    ("baseline_precision", "baseline P"), ("baseline_recall", "baseline R"),
    ("certified_in_precision", "cert. in P"), ("certified_in_recall", "cert. in R"),
    ("certified_in_abstain_recall", "in+abstain R"), ("baseline_auroc", "AUROC base"),
    ("certified_in_auroc", "AUROC cert."), ("baseline_jaccard_mean", "base Jaccard"),
    ("baseline_change_share", "base change"), ("certified_flip_share", "cert. flip"),
    ("abstain_share", "abstain"),
)  # fmt: skip


def load_config(path: Path) -> dict[str, Any]:
    """The sweep's config (``language`` section), checked before any model is compiled.

    Raises:
        ValueError: a missing key, a size below 2, a method that is not decomposed, an unknown compiled model.
    """
    from certified_circuits.language.graph import COMPILED_SHAPES
    from certified_circuits.language.methods import check_method

    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    lang = config.get("language") if isinstance(config, dict) else None
    if not isinstance(lang, dict):
        raise ValueError(f"{path}: no 'language' section (see experiments/noise_sweep.yaml)")
    needed = ("models", "sizes", "model_seeds", "task_seed", "held_out", "methods", "ig_steps", "settings",
              "certification", "k_grid", "resamples", "bootstrap_seed", "preregistered")
    missing = [key for key in needed if key not in lang]
    if missing:
        raise ValueError(f"{path}: language lacks {', '.join(missing)} (see experiments/noise_sweep.yaml)")
    for model in lang["models"]:
        if model.get("compiled") not in COMPILED_SHAPES:
            raise ValueError(f"{path}: model {model.get('name')!r} has compiled {model.get('compiled')!r}; choose one "
                             f"of {', '.join(COMPILED_SHAPES)}")
    if min(lang["sizes"]) < 2 or sorted(lang["sizes"]) != list(lang["sizes"]):
        raise ValueError(f"{path}: sizes must be increasing and >= 2 (bootstrap resamples), got {lang['sizes']}")
    for method in lang["methods"]:
        if not check_method(method, "edge", lang["ig_steps"], "reference").decomposed:
            raise ValueError(f"{path}: method {method} is not computed by the decomposed forward")
    for s in lang["settings"]:
        _setting(lang, s)  # refuses a bad tau / p_del now
    return lang


def _setting(lang: dict[str, Any], s: dict[str, float]) -> Setting:
    c = lang["certification"]
    return Setting(p_del=float(s["p_del"]), n0=int(c["n0"]), n=int(c["n"]), seed=int(c["seed"]), tau=float(s["tau"]),
                   alpha=float(c["alpha"]), correction=str(c["correction"]))


def verified_model(model: dict[str, Any], seed: int, lang: dict[str, Any]) -> tuple[Any, list[str], dict, Any]:
    """Compile one model and verify its truth on the held-out prompts.

    Returns:
        ``(weights, truth_edges, truth_row, train)``: the GPT-2 weights, the kept true edges, a row describing the
        check (whole-circuit recovery, the per-component ``ratio``, the effects' min / median / max), and the first
        ``max(sizes)`` training prompts encoded for this model.
    """
    from certified_circuits.language import ground_truth as gt
    from certified_circuits.language.compiled import compile_induction_noisy, compile_model
    from certified_circuits.language.forward import GPT2Weights
    from certified_circuits.language.tasks import INDUCTION_SYMBOLS, generate_splits
    from certified_circuits.language.tokenizer import encode_examples

    if model["compiled"] == "induction_noisy":
        hf, tok, _ = compile_induction_noisy(seed, distractor_scale=float(model.get("distractor_scale", 1.0)))
    else:
        hf, tok, _ = compile_model(model["compiled"], seed)
    weights = GPT2Weights.from_hf(hf)
    diag = gt.diagnose(hf, [tok.answer_id(x) for x in INDUCTION_SYMBOLS], seed=0)
    gt.check_heads(diag)
    edges = gt.circuit_edges(diag.previous_token_heads, diag.induction_heads)
    held_out = generate_splits("induction", int(lang["task_seed"]), int(lang["held_out"]))["id_test"]
    batch = encode_examples(held_out, tok, max_len=hf.config.n_positions)
    verification = gt.verify_circuit(weights, batch, edges)
    kept, block = gt.per_component_verification(weights, batch, edges, verification)
    effects = effect_summary(block["effects"], kept)
    row = {"model": model["name"], "seed": seed, "n_edges": len(weights.graph.edge_names()),
           "n_planted": len(edges), "n_truth": len(kept), "whole_passed": bool(verification["passed"]),
           "per_component_passed": bool(block["passed"]), "recovery": verification["recovery"],
           "ratio": block["ratio"], **{f"truth_{k}": v for k, v in effects["truth"].items()},
           **{f"outside_{k}": v for k, v in effects["non_truth"].items()}}
    train = generate_splits("induction", int(lang["task_seed"]), max(lang["sizes"]))["train"]
    return weights, kept, row, encode_examples(train, tok, max_len=hf.config.n_positions)


def score_prompts(weights: Any, batch: Any, lang: dict[str, Any], method: str) -> np.ndarray:
    """Per-prompt edge scores ``[len(batch), E]`` (``eap_ig_scores`` with the method's points and factor)."""
    from certified_circuits.language.eap_ig import eap_ig_scores
    from certified_circuits.language.methods import check_method

    spec = check_method(method, "edge", int(lang["ig_steps"]), "reference")
    conv = spec.convention("edge", int(lang["ig_steps"]), "reference")
    return eap_ig_scores(weights, batch, ig_steps=int(lang["ig_steps"]), points=list(conv.points), progress=False,
                         factor=spec.factor)


def cell_rows(scores: np.ndarray, groups: np.ndarray, truth: np.ndarray, absolute: bool, setting: Setting,
              section: dict[str, Any], labels: dict[str, Any]) -> tuple[dict[str, Any], list[dict], dict[str, Any]]:
    """One (model, seed, size, scorer, setting) cell, at K = the truth's share ``|T| / U`` (added to the K grid; a
    top-K per group then keeps about ``|T|`` components in all, exactly ``|T|`` with one group).

    Args:
        scores: ``[|D|, U]`` per-example scores of this size.
        groups: int ``[U]`` top-K groups (one for edges, the layer for channels).
        truth: bool ``[U]``, the verified truth.
        absolute: rank by ``|mean|`` (EAP-IG's convention; the vision sweep's absolute relevance).
        setting: the certification setting.
        section: the config section (``k_grid``, ``resamples``, ``bootstrap_seed``).
        labels: the cell's labels (model, seed, size, scorer, setting).

    Returns:
        ``(row, recovery, stability_row)``: the summary row at K = the truth's size, the recovery rows at that K
        (every method, for the hypotheses), and the stability row.
    """
    n, n_edges = scores.shape
    k_truth = truth.sum() / truth.size
    k_grid = np.unique(np.append(np.asarray(section["k_grid"], dtype=float), k_truth))
    p = plan(n, n_edges, setting)
    cert = certify_scores(scores, groups, k_grid, setting, absolute=absolute, allow_vacuous=True)
    common = {**labels, "n_true": int(truth.sum()), "n_components": n_edges}
    recovery = [r for r in recovery_rows(cert, cert, truth, common) if np.isclose(r["k_target"], k_truth)]
    row: dict[str, Any] = {**labels, "radius": certified_radius(setting.tau, setting.p_del),
                           "can_certify_in": bool(p.can_certify_in), "n_true": int(truth.sum()), "k_truth": k_truth}
    for r in recovery:
        row[f"{r['method']}_precision"] = r["precision"]
        row[f"{r['method']}_recall"] = r["recall"]
        row[f"{r['method']}_size"] = r["size"]
    row.update({f"{m}_auroc": v for m, v in auroc_by_method(cert, cert, truth).items()})
    st = stability(scores, groups, [k_truth], setting, int(section["resamples"]), int(section["bootstrap_seed"]),
                   absolute=absolute, truth=truth, allow_vacuous=True)
    st_row = st.rows(common)[0]
    for key in ("baseline_jaccard_mean", "baseline_change_share", "certified_flip_share", "certified_change_share",
                "abstain_share", "baseline_precision_mean", "certified_in_precision_mean"):
        row[key] = st_row[key]
    return row, recovery, st_row


def run_language(lang: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every cell of the language sweep (module docstring).

    Returns:
        ``(rows, truth, hypotheses)`` as written to ``language_rows.csv``, ``language_truth.csv`` and
        ``language_hypotheses.csv``.
    """
    import torch

    from certified_circuits.language.methods import check_method

    torch.set_num_threads(1)
    # a setting that cannot certify IN at a size is in the tables ("can certify IN": no), not a warning per cell
    warnings.simplefilter("ignore", PlanWarning)
    settings = [_setting(lang, s) for s in lang["settings"]]
    rows, truths, recoveries, stabilities = [], [], [], []
    for model in lang["models"]:
        for seed in lang["model_seeds"]:
            start = time.perf_counter()
            weights, kept, truth_row, train = verified_model(model, int(seed), lang)
            truths.append(truth_row)
            if not (truth_row["whole_passed"] and truth_row["per_component_passed"]):
                print(f"noise sweep: {model['name']} seed {seed}: the truth fails its check ({truth_row}); left out",
                      file=sys.stderr)
                continue
            truth = np.isin(weights.graph.edge_names(), kept)
            groups = np.zeros(truth.size, dtype=np.int64)  # one global top-K over edges
            for method in lang["methods"]:
                absolute = check_method(method, "edge", int(lang["ig_steps"]), "reference").ranking == "absolute"
                all_scores = score_prompts(weights, train, lang, method)
                for size in lang["sizes"]:
                    for setting in settings:
                        labels = {"experiment": model["name"], "model": model["name"], "seed": int(seed),
                                  "n_examples": int(size), "scorer": method, "concept": "induction",
                                  "setting": setting.tag}  # fmt: skip
                        row, recovery, st_row = cell_rows(all_scores[:size], groups, truth, absolute, setting, lang,
                                                          labels)
                        rows.append(row)
                        recoveries.extend(recovery)
                        stabilities.append(st_row)
            print(f"noise sweep: {model['name']} seed {seed}: truth {len(kept)} edges, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return pd.DataFrame(rows), pd.DataFrame(truths), cell_hypotheses(recoveries, stabilities, lang["preregistered"])


def cell_hypotheses(recoveries: list[dict], stabilities: list[dict], preregistered: dict[str, Any]) -> pd.DataFrame:
    """H1a, H2, H3 per (model, |D|) cell and scorer: pairs over concept x model seed x setting
    (:func:`~certified_circuits.analysis.hypotheses.hypothesis_table`); ``preregistered`` marks the cell they were
    written down for."""
    recovery_df, stability_df = pd.DataFrame(recoveries), pd.DataFrame(stabilities)
    hypotheses = []
    for (model, size), part in recovery_df.groupby(["model", "n_examples"], sort=False):
        st = stability_df[(stability_df["model"] == model) & (stability_df["n_examples"] == size)]
        # every concept is read at its own truth's share (cell_rows keeps those rows only); one shared K label lets
        # hypothesis_table pair them, and the table's k column is then NaN ("each concept's own")
        table = hypothesis_table(part.assign(k_target=1.0), st.assign(k_target=1.0)).assign(k=float("nan"))
        first = model == preregistered["model"] and int(size) == int(preregistered["size"])
        hypotheses.append(table.assign(model=model, n_examples=int(size), preregistered=first))
    return pd.concat(hypotheses, ignore_index=True)


def load_vision_config(section: dict[str, Any], path: Path) -> dict[str, Any]:
    """The sweep's ``vision`` section, checked before any model is trained.

    Raises:
        ValueError: a missing key, a leak outside the planted model's range, sizes not increasing or above the
            world's concept images per class, an unknown scorer or ranking.
    """
    from certified_circuits.vision.networks.planted import MAX_LEAK

    needed = ("world", "train", "leaks", "model_seeds", "concepts", "sizes", "scorers", "certification", "k_grid",
              "reference_size", "resamples", "bootstrap_seed", "preregistered")
    missing = [key for key in needed if key not in section]
    if missing:
        raise ValueError(f"{path}: vision lacks {', '.join(missing)} (see experiments/noise_sweep.yaml)")
    if not all(0 <= float(x) <= MAX_LEAK for x in section["leaks"]):
        raise ValueError(f"{path}: vision.leaks must be in [0, {MAX_LEAK}], got {section['leaks']}")
    sizes = list(section["sizes"])
    if min(sizes) < 2 or sorted(sizes) != sizes or max(sizes) > int(section["world"]["n_concept_per_class"]):
        raise ValueError(f"{path}: vision.sizes must be increasing, >= 2 and at most world.n_concept_per_class "
                         f"({section['world']['n_concept_per_class']}), got {sizes}")
    for s in section["scorers"]:
        if s.get("scorer") not in ("relevance", "activation") or s.get("ranking") not in ("signed", "absolute"):
            raise ValueError(f"{path}: vision scorer {s} needs scorer relevance|activation and ranking signed|absolute")
    _setting(section, section["certification"])
    return section


def _cli(*args: str, log: Path) -> None:
    """One ``certified-circuits`` command (an argument list, no shell), its stderr to ``log``; a failure names it."""
    with log.open("w") as err:
        done = subprocess.run([str(ROOT / "bin" / "certified-circuits"), *args], stderr=err, check=False)
    if done.returncode:
        raise RuntimeError(f"certified-circuits {args[0]} failed (exit {done.returncode}); see {log}")


def run_vision(section: dict[str, Any], work: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every cell of the vision sweep: per leak and model seed, train the planted world ResNet (``vision-train``),
    verify its truth per channel (``vision-ground-truth``), score the first ``max(sizes)`` concept images of each
    class (``vision-attribute``), then :func:`cell_rows` per class, size and scorer. Files are reused when present
    (an interrupted sweep resumes).

    Returns:
        ``(rows, truth, hypotheses)`` as written to ``vision_rows.csv``, ``vision_truth.csv``, ``vision_hypotheses.csv``.
    """
    from certified_circuits.analysis.recovery import read_ground_truth, truth_mask
    from certified_circuits.storage.store import read_attributions

    w, t = section["world"], section["train"]
    world = work / "world"
    if not (world / "world.json").is_file():
        _cli("vision-world", "--out", str(world), "--seed", str(w["seed"]), "--n-classes", str(w["n_classes"]),
             "--n-concept-per-class", str(w["n_concept_per_class"]), log=work / "world.log")
    setting = _setting(section, section["certification"])
    rows, truths, recoveries, stabilities = [], [], [], []
    for leak in section["leaks"]:
        for seed in section["model_seeds"]:
            start = time.perf_counter()
            name = f"leak{float(leak):g}_s{seed}"
            model, gt_file = work / f"{name}.pt", work / f"{name}_truth.json"
            if not model.is_file():
                _cli("vision-train", "--world", str(world), "--seed", str(seed), "--epochs", str(t["epochs"]),
                     "--lr", str(t["lr"]), "--planted-own", *map(str, t["planted_own"]), "--planted-shared",
                     *map(str, t["planted_shared"]), *(["--planted-leak", str(leak)] if float(leak) else []),
                     "--threads", "1", "--out-model", str(model), "--out-metrics", str(work / f"{name}_metrics.json"),
                     log=work / f"{name}_train.log")
            if not gt_file.is_file():
                _cli("vision-ground-truth", "--checkpoint", str(model), "--world", str(world), "--out", str(gt_file),
                     "--reference-size", str(section["reference_size"]), "--seed", "0", "--threads", "1",
                     log=work / f"{name}_truth.log")
            truth_file = read_ground_truth(gt_file)
            label = f"leak {float(leak):g}"
            for concept in section["concepts"]:
                attributions = work / f"{name}_{concept}.h5"
                if not attributions.is_file():
                    _cli("vision-attribute", "--model", "world", "--checkpoint", str(model), "--threads", "1",
                         "--data", str(world / "concept.npz"), "--n-examples", str(max(section["sizes"])),
                         "--counterfactual", str(world / "counterfactual.npz"), "--concept", concept,
                         "--split", "concept", "--experiment", "world", "--out", str(attributions),
                         log=work / f"{name}_{concept}_attribute.log")
                attr = read_attributions(attributions)
                truth = truth_mask(truth_file, concept, attr.names, str(attributions))
                checks = truth_file.verification.get(concept, {})
                block = checks.get("per_component") or {}
                effects = effect_summary(block.get("effects", {}), list(truth_file.concepts[concept]))
                failed = sorted(k.removeprefix("check.") for k, v in checks.items() if k.startswith("check.") and not v)
                truths.append({"model": label, "seed": int(seed), "concept": concept, "n_components": truth.size,
                               "n_truth": int(truth.sum()), "ratio": block.get("ratio", float("inf")),
                               "passed": truth_file.verified(concept), "failed_checks": " ".join(failed),
                               **{f"truth_{k}": v for k, v in effects["truth"].items()},
                               **{f"outside_{k}": v for k, v in effects["non_truth"].items()}})
                if not truth_file.verified(concept):  # nothing is scored against an unverified truth
                    print(f"noise sweep: vision {label} seed {seed} {concept}: the truth fails {failed}; left out",
                          file=sys.stderr)
                    continue
                for scorer in section["scorers"]:
                    for size in section["sizes"]:
                        labels = {"experiment": label, "model": label, "seed": int(seed), "n_examples": int(size),
                                  "scorer": scorer["name"], "concept": concept, "setting": setting.tag}
                        row, recovery, st_row = cell_rows(attr.scores[scorer["scorer"]][:size], attr.groups, truth,
                                                          scorer["ranking"] == "absolute", setting, section, labels)
                        rows.append(row)
                        recoveries.extend(recovery)
                        stabilities.append(st_row)
            print(f"noise sweep: vision {label} seed {seed}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    hypotheses = cell_hypotheses(recoveries, stabilities, {"model": f"leak {float(section['preregistered']['leak']):g}",
                                                           "size": section["preregistered"]["size"]})
    return pd.DataFrame(rows), pd.DataFrame(truths), hypotheses


def language_truth_lines(truth: pd.DataFrame) -> list[str]:
    """The language truths' table: one row per model and seed."""
    out = ["### The truths (held-out prompts)", "",
           "| model | seed | edges | truth kept / planted | whole circuit recovery | weakest true effect / epsilon "
           "| truth effects min / median / max | non-truth effects median / max |", "|---|---|---|---|---|---|---|---|"]
    for r in truth.itertuples():
        out.append(f"| {r.model} | {r.seed} | {r.n_edges} | {r.n_truth} / {r.n_planted} | {r.recovery:.2f} "
                   f"| {_ratio(r.ratio)} | {r.truth_min:.3f} / {r.truth_median:.3f} / {r.truth_max:.3f} "
                   f"| {r.outside_median:.4f} / {r.outside_max:.4f} |")
    return out


def _ratio(value: float) -> str:
    """The weakest true effect over epsilon; a clean model's epsilon is 0 (its file writes the ratio as null)."""
    return "inf (epsilon 0)" if not np.isfinite(value) else f"{value:.2f}"


def vision_truth_lines(truth: pd.DataFrame) -> list[str]:
    """The vision truths' table: one row per leak and seed, over its classes."""
    left_out: list[str] = []
    out = ["### The truths (id_test images, one channel mean-ablated at a time; verified classes only)", "",
           "| leak | seed | true channels per class: mean [min, max] of U | weakest true effect / epsilon (min over "
           "classes) | truth effects min / median / max | non-truth effects median / max |", "|---|---|---|---|---|---|"]
    for (model, seed), g in truth.groupby(["model", "seed"], sort=False):
        failing = g[~g["passed"].astype(bool)]
        if len(failing):
            left_out.extend(f"{model}, seed {seed}, {r.concept} ({r.failed_checks})" for r in failing.itertuples())
        g = g[g["passed"].astype(bool)]
        out.append(f"| {model} | {seed} | {g['n_truth'].mean():.1f} [{g['n_truth'].min()}, {g['n_truth'].max()}] of "
                   f"{g['n_components'].iloc[0]} | {_ratio(g['ratio'].min())} | {g['truth_min'].min():.3f} / "
                   f"{g['truth_median'].median():.3f} / {g['truth_max'].max():.3f} | {g['outside_median'].median():.4f} "
                   f"/ {g['outside_max'].max():.4f} |")
    if left_out:
        out += ["", f"Left out (the truth failed a check, so nothing is scored against it): {'; '.join(left_out)}."]
    return out


def markdown_tables(rows: pd.DataFrame, truth_lines: list[str], hypotheses: pd.DataFrame,
                    over: str = "model seeds") -> str:
    """The docs' tables: the truths; per scorer and setting, the mean over model seeds (and classes) of every
    :data:`TABLE_COLUMNS` value per model and size; the hypotheses."""
    out = list(truth_lines)
    columns = [c for c, _ in TABLE_COLUMNS]
    for (method, setting), part in rows.groupby(["scorer", "setting"], sort=False):
        radius = int(part["radius"].iloc[0])
        out += ["", f"### {method}, setting {setting} (radius {radius}): mean over {over} at K = the truth's size",
                "", "| model | \\|D\\| | can certify IN | " + " | ".join(h for _, h in TABLE_COLUMNS) + " |",
                "|---|---|---|" + "---|" * len(TABLE_COLUMNS)]
        means = part.groupby(["model", "n_examples"], sort=False)[columns].mean()
        ok = part.groupby(["model", "n_examples"], sort=False)["can_certify_in"].all()
        for (model, size), values in means.iterrows():
            cells = " | ".join("-" if pd.isna(v) else f"{v:.3f}" for v in values)
            out.append(f"| {model} | {size} | {'yes' if ok[(model, size)] else 'no'} | {cells} |")
    out += ["", "### Hypotheses (one-sided paired Wilcoxon; alpha 0.05; **bold**: the "
            "pre-registered cell, the rest exploratory; pairs: concept x model seed x setting)", "",
            "| model | \\|D\\| | method | hypothesis | pairs | certified | baseline | mean difference | p | holds |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in hypotheses.itertuples():
        cell = f"**{r.model}**" if r.preregistered else r.model
        out.append(f"| {cell} | {r.n_examples} | {r.scorer} | {r.hypothesis} | {r.n_pairs} | {r.certified:.3f} "
                   f"| {r.baseline:.3f} | {r.mean_difference:+.3f} | {r.pvalue:.3g} | {'yes' if r.holds else 'no'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", type=Path, help="the sweep's config (experiments/noise_sweep.yaml)")
    p.add_argument("--out", type=Path, required=True, help="folder for the tables (and the vision half's models)")
    p.add_argument("--half", choices=("language", "vision", "both"), default="both")
    args = p.parse_args(argv)
    lang = load_config(args.config) if args.half in ("language", "both") else None
    vision = None
    if args.half in ("vision", "both"):
        config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
        vision = load_vision_config(config.get("vision") or {}, args.config)
    args.out.mkdir(parents=True, exist_ok=True)
    halves = []
    if lang is not None:
        rows, truth, hypotheses = run_language(lang)
        halves.append(("language", rows, truth, hypotheses, language_truth_lines(truth)))
    if vision is not None:
        (args.out / "vision").mkdir(exist_ok=True)
        rows, truth, hypotheses = run_vision(vision, args.out / "vision")
        halves.append(("vision", rows, truth, hypotheses, vision_truth_lines(truth)))
    for half, rows, truth, hypotheses, truth_lines in halves:
        for name, table in (("rows", rows), ("truth", truth), ("hypotheses", hypotheses)):
            write_text(args.out / f"{half}_{name}.csv", table.to_csv(index=False))
        over = "model seeds and classes" if half == "vision" else "model seeds"
        write_text(args.out / f"{half}_sweep.md", markdown_tables(rows, truth_lines, hypotheses, over))
        print(f"noise sweep: {half}: wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
