"""Reporting stages (implementation): tables and figures of the paper from per-concept results.

The ``report-*`` stages (:mod:`certified_circuits.cli.report`) call these functions:

``sufficiency_report``  Table 1 / Table 3 (peaks by cACC and by balanced accuracy, paired tests), the
                        cACC-K, balanced-accuracy and false-positive curves (Fig. cACC-K), and
                        ``operating_points.csv``: the one table every later report takes its K from.
``iou_report``          Fig. IoU: ID circuits vs circuits re-discovered on each OOD set, at the K that
                        maximises the certified-baseline gap.
``seeds_report``        App. Fig. variance: pairwise IoU of circuits certified with different seeds.
``radius_report``       App. D: abstention, effective size and cACC across radii and |D|.
``spurious_report``     Spurious index of certified-in vs abstained vs certified-out channels.
``theory_report``       App. C: radius vs p_del and minimum n vs tau.
(``summary.md`` is :mod:`certified_circuits.reports.summary`; its warnings are :func:`certified_circuits.reports.flags.run_flags`.)

Nothing here parses a path: concept, split, scorer and setting of every input are read from its
attributes (HDF5) or columns (CSV), which the stages that made them wrote.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis import evaluation
from certified_circuits.reports import figures, tables
from certified_circuits.storage.atomic import write_csv
from certified_circuits.commands import certify_command
from certified_circuits.core.certification import check_certified_from, method_masks
from certified_circuits.core.discovery import k_index
from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.storage.tables import parse_k_column, read_csv_table, require_columns

log = logging.getLogger(__name__)


def _display_peaks(peaks: pd.DataFrame, label_columns: list[str]) -> pd.DataFrame:
    """Fold extra key columns (scorer, task, setting) into the display label of the table."""
    shown = peaks.copy()
    if label_columns:
        shown["eval_set"] = shown[label_columns + ["eval_set"]].astype(str).agg(" / ".join, axis=1)
    return tables.format_peak_table(shown)


def _settings_of(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The setting(s) each row of a peak table came from, so a table names its own provenance."""
    return table.groupby(keys, as_index=False)["setting"].agg(lambda s: ";".join(sorted(set(s))))


def _faithfulness_tables(table: pd.DataFrame, keys: Sequence[str], out_dir: Path) -> dict[str, float]:
    """``faithfulness.csv`` (CPR and CMD per circuit curve, :mod:`certified_circuits.analysis.faithfulness`) and
    ``faithfulness_mean.{csv,md,tex}`` (the mean over concepts); nothing when the sufficiency tables predate the
    m columns."""
    from certified_circuits.analysis.faithfulness import FAITH_COLUMNS, faithfulness_table

    if not set(FAITH_COLUMNS) <= set(table.columns) or table[list(FAITH_COLUMNS)].isna().all().all():
        return {}
    group = [k for k in dict.fromkeys([*keys, "scorer", "setting"]) if k in table.columns]
    faith = faithfulness_table(table, group)
    write_csv(out_dir / "faithfulness.csv", faith)
    shown = [k for k in group if k not in ("experiment",)]
    mean = faith.groupby([*shown, "method"], sort=False)[["cpr", "cmd", "f_k0.25", "f_k0.5"]].mean().reset_index()
    display = mean.rename(columns={"cpr": "CPR (higher better)", "cmd": "CMD (lower better)",
                                   "f_k0.25": "f at K=0.25", "f_k0.5": "f at K=0.5"})
    tables.write_table(display, out_dir / "faithfulness_mean",
                       caption="Faithfulness f = (m(C) - m(empty)) / (m(M) - m(empty)) over the K grid, mean over "
                               "concepts: CPR = area under f, CMD = area between f and 1 (MIB's circuit track).")
    return {f"faith_{m}_{key}": float(v) for m, part in faith.groupby("method")
            for key, v in (("cpr", part["cpr"].mean()), ("cmd", part["cmd"].mean()))}


def sufficiency_report(inputs: Sequence[Path], by: Sequence[str], test: str, best_setting: bool, title: str,
                       out_dir: Path, select_on: str | None = None, bootstrap_seed: int = 0,
                       ablation: str = evaluation.DEFAULT_ABLATION) -> dict[str, float]:
    """Table 1 / Table 3, curves and the operating points from per-concept sufficiency CSVs.

    ``ablation``: which rows of the CSVs (``zero``, the paper's; ``mean``: the class-bias-free evaluation,
    docs/embedded_default.md) the tables are made of (:func:`certified_circuits.analysis.evaluation.read_sufficiency`).

    ``peaks_*``: each method at its peak on each eval set (the paper's protocol: K, and the setting with
    ``best_setting``, are chosen on the split they are reported on). With ``select_on``, also
    ``selected_*``: K and setting chosen on that held-out eval set, the same way for every method, and
    reported on every other eval set (:func:`certified_circuits.analysis.evaluation.selected_table`).
    Every row carries the class-level test (``test``) and the per-example paired test
    (:mod:`certified_circuits.analysis.paired_tests`; the bootstrap is seeded with ``bootstrap_seed``); the
    markers of the display tables come from the per-example test.
    """
    table = evaluation.read_sufficiency(inputs, ablation)
    require_columns(table, ["scorer", "setting", "p_del", "tau", "radius"], "sufficiency tables "
                               "(rerun the evaluation stage: its CSVs carry their settings)")
    keys = ["experiment", *by, "eval_set"]
    write_csv(out_dir / "sufficiency.csv", table)
    headline_faith = _faithfulness_tables(table, keys, out_dir)
    curves = evaluation.cacc_curves(table, keys)
    write_csv(out_dir / "curves.csv", curves)
    write_csv(out_dir / "operating_points.csv", evaluation.operating_points(curves, keys))
    metrics = ["accuracy"] + (["balanced_accuracy"] if "balanced_accuracy" in table.columns else [])
    headline = dict(headline_faith)
    for metric in metrics:
        peaks = evaluation.peak_table(table, metric=metric, test=test, by=keys, bootstrap_seed=bootstrap_seed)
        if best_setting:
            peaks = evaluation.best_setting(peaks, [k for k in keys if k != "setting"])
        if "setting" not in peaks.columns:
            peaks = peaks.merge(_settings_of(table, keys), on=keys, how="left")
        name = "cacc" if metric == "accuracy" else "balanced"
        peaks["selected_on"] = "the reported eval set (paper protocol)"
        write_csv(out_dir / f"peaks_{name}_raw.csv", peaks)
        labels = [k for k in by if k != "setting"]
        shown = "cACC" if metric == "accuracy" else "balanced accuracy"
        example_test = "McNemar" if metric == "accuracy" else "paired bootstrap"
        tests_caption = (f"markers: per-example {example_test} test; p-values of the {test} class-level "
                         f"test and of the per-example test in the last column")
        caption = (f"Peak {shown} of certified vs baseline circuits ({tests_caption}; "
                   f"Delta relative to the baseline, in %).")
        tables.write_table(_display_peaks(peaks, labels), out_dir / f"peaks_{name}", caption=caption)
        for _, row in peaks.iterrows():
            key = "_".join(str(row[k]) for k in [*labels, "eval_set"])
            headline[f"{name}_{key}_certified"] = row["certified"]
            headline[f"{name}_{key}_baseline"] = row["baseline"]
            headline[f"{name}_{key}_certified_k"] = row["certified_k"]
        if select_on:
            selected = evaluation.selected_table(table, select_on, metric=metric, test=test, by=keys,
                                                 choose_setting=best_setting, bootstrap_seed=bootstrap_seed)
            write_csv(out_dir / f"selected_{name}_raw.csv", selected)
            tables.write_table(_display_peaks(selected, labels), out_dir / f"selected_{name}",
                               caption=f"{shown} of certified vs baseline circuits with K"
                                       f"{' and setting' if best_setting else ''} chosen on the held-out {select_on} "
                                       f"set, the same way for every method ({tests_caption}).")
            for _, row in selected.iterrows():
                key = "_".join(str(row[k]) for k in [*labels, "eval_set"])
                headline[f"selected_{name}_{key}_certified"] = row["certified"]
                headline[f"selected_{name}_{key}_baseline"] = row["baseline"]
    from certified_circuits.reports.words import tag_words

    panels = curves.copy()
    if by:  # legend entries in words: "tiny_gpt2 / ioi / tau 0.9, p_del 0.95, r = 9", never a path tag
        named = panels[["experiment", *by]].astype(str)
        if "setting" in named:
            named["setting"] = named["setting"].map(tag_words)
        panels["experiment"] = named.agg(" / ".join, axis=1)
    drawn = [m for m in ("cacc", "balanced_accuracy", "false_positive_rate") if m in panels.columns]
    if drawn:
        figures.plot_cacc_figures(panels, {m: out_dir / f"curves_{m}" for m in drawn}, title=title)
    log.info("sufficiency report for %d rows -> %s", len(table), out_dir)
    return headline


def read_circuits(pairs: Sequence[tuple[Path, Path]], scorer: str | None = None) -> list[tuple[Votes, Certificates]]:
    """(votes, certificates) pairs, checked to belong together (same concept, split, scorer, K grid).

    Args:
        pairs: ``(votes, certificates)`` file pairs.
        scorer: the scorer the report was asked for: every pair must hold its circuits (a report of another
            scorer's files would be silently mislabelled), checked before any work.

    Raises:
        ValueError: a pair does not belong together, or holds another scorer's circuits than ``scorer``.
    """
    from certified_circuits.storage.store import read_certificates, read_votes  # here: h5py, which report-sufficiency never needs

    circuits = []
    for votes_path, certificates_path in pairs:
        votes, certificates = read_votes(votes_path), read_certificates(certificates_path)
        held = votes.attrs.get("scorer")
        if scorer is not None and held is not None and str(held) != scorer:
            raise ValueError(f"{votes_path} holds the circuits of scorer {str(held)!r}, not {scorer!r} as asked: pass "
                             f"--scorer {str(held)} or the votes and certificates of {scorer!r}")
        check_certified_from(votes, certificates, str(votes_path), str(certificates_path), certify_command(str(votes_path)))
        circuits.append((votes, certificates))
    return circuits


def iou_report(operating_points: Path, scorer: str, pairs: Sequence[tuple[Path, Path]], out_dir: Path) -> dict[str, float]:
    """Fig. IoU: IoU of each class's ID circuit and its circuit re-discovered on an OOD set, at the K of
    the largest certified-baseline gap on that set (``max_gap`` in the operating points)."""
    points = evaluation.read_operating_points(operating_points)
    circuits = read_circuits(pairs, scorer)
    by_key = {(v.attrs["concept"], v.attrs["split"]): (v, c) for v, c in circuits}
    rows = []
    for (concept, split), (ood_votes, ood_certs) in sorted(by_key.items()):
        if split == "concept" or ood_votes.attrs.get("n_examples", 1) == 0:
            continue
        if (concept, "concept") not in by_key:
            raise ValueError(f"no ID circuit of {concept!r} among the inputs to compare with its {split} circuit")
        id_votes, id_certs = by_key[(concept, "concept")]
        k_target = evaluation.operating_k(points, scorer=scorer, eval_set=split, criterion="max_gap")
        id_masks, ood_masks = method_masks(id_votes, id_certs), method_masks(ood_votes, ood_certs)
        i, j = k_index(id_votes.k_grid, k_target, concept), k_index(ood_votes.k_grid, k_target, concept)
        for method in ("baseline", "certified"):
            rows.append(dict(experiment=id_votes.attrs.get("experiment", ""), concept=concept, eval_set=split,
                             method=method, k_target=k_target, scorer=scorer,
                             iou=float(evaluation.circuit_iou(id_masks[method][i], ood_masks[method][j]))))
    iou = pd.DataFrame(rows, columns=["experiment", "concept", "eval_set", "method", "k_target", "scorer", "iou"])
    write_csv(out_dir / "iou.csv", iou)
    if iou.empty:  # no class has enough images in any OOD set (e.g. ImageNet-O at ~10 per class)
        log.warning("report-iou: no class was re-discovered on an OOD set; writing an empty table")
        figures.plot_message(out_dir / "iou", "ID vs re-discovered circuits",
                             "No class was re-discovered: no OOD set holds enough images of any class\n"
                             "(vision.rediscovery_min_images).")
        return {}
    figures.plot_iou(iou, out_dir / "iou")
    return {f"iou_mean_{m}": float(v) for m, v in iou.groupby("method")["iou"].mean().items()}


def seeds_report(operating_points: Path, scorer: str, pairs: Sequence[tuple[Path, Path]], out_dir: Path,
                 eval_set: str = "id", k: float | None = None) -> dict[str, float]:
    """App. Fig. variance: pairwise IoU of one class's circuits certified with different mask seeds,
    at the certified peak K (``certified_peak``) unless ``k`` is given."""
    points = evaluation.read_operating_points(operating_points)
    k_target = float(k) if k else evaluation.operating_k(points, scorer=scorer, eval_set=eval_set, criterion="certified_peak")
    by_concept: dict[str, list[tuple[int, dict[str, np.ndarray], np.ndarray]]] = {}
    runs_attrs: dict[str, dict] = {}
    for votes, certificates in read_circuits(pairs, scorer):
        runs_attrs[str(votes.attrs["concept"])] = votes.attrs
        by_concept.setdefault(str(votes.attrs["concept"]), []).append(
            (int(votes.attrs["seed"]), method_masks(votes, certificates), votes.k_grid))
    frames = []
    for concept, runs in by_concept.items():
        seeds = [seed for seed, _, _ in runs]
        for method in ("certified", "majority"):
            stacked = np.stack([m[method][k_index(g, k_target, concept)] for _, m, g in runs])
            frames.append(evaluation.pairwise_iou(stacked, seeds).assign(
                experiment=str(runs_attrs[concept].get("experiment", "")), concept=concept, method=method,
                k_target=k_target, scorer=scorer))
    stability = pd.concat(frames, ignore_index=True)
    write_csv(out_dir / "seed_stability.csv", stability)
    figures.plot_seed_stability(stability, out_dir / "seed_stability")
    return {f"seed_iou_mean_{m}": float(v) for m, v in stability.groupby("method")["iou"].mean().items()}


def radius_report(pairs: Sequence[tuple[Path, Path]], sufficiency: Sequence[Path], k: float, out_dir: Path,
                  eval_set: str = "id", plan_warnings: Sequence[Mapping[str, Any]] = ()) -> None:
    """App. D: abstention rate, effective size and certified cACC per (|D|, p_del, radius), at a fixed K
    and at each setting's best K. ``plan_warnings``: the parse-time plan records (``plan/warnings.json``); those
    of the sweep's settings are written on both figures."""
    accuracy = evaluation.read_sufficiency(sufficiency)
    certified = accuracy[(accuracy.eval_set == eval_set) & (accuracy.method == "certified")]
    rows = []
    for votes, certificates in read_circuits(pairs):
        concept, split = str(votes.attrs["concept"]), str(votes.attrs["split"])
        tag = setting_tag(votes, certificates)
        mine = certified[(certified.concept == concept) & (certified.setting == tag) & (certified.split == split)
                         & (certified.scorer == votes.attrs["scorer"])]
        by_k = mine.set_index("k_target")["accuracy"]
        summary = evaluation.abstention_summary(certificates.decision, votes.baseline, votes.groups)
        for index, k_value in enumerate(votes.k_grid):
            rows.append(dict(experiment=str(votes.attrs.get("experiment", "")), concept=concept,
                             n_examples=int(votes.attrs["n_examples"]), p_del=float(votes.attrs["p_del"]),
                             tau=float(certificates.attrs["tau"]), radius=int(certificates.attrs["radius"]),
                             plan_verdict=str(certificates.attrs.get("plan_verdict", "ok")),
                             k_target=float(k_value), cacc=float(by_k.get(k_value, np.nan)), split=split,
                             **summary.iloc[index].to_dict()))
    per_k = pd.DataFrame(rows)
    keys = ["experiment", "n_examples", "p_del", "tau", "radius", "plan_verdict", "k_target"]
    mean = per_k.groupby(keys, as_index=False)[["cacc", "abstain_rate", "effective_k", "baseline_k"]].mean()
    fixed = mean[np.isclose(mean.k_target, k)].drop(columns="k_target")
    best = mean.sort_values(["cacc", "effective_k"], ascending=[False, True]).groupby(keys[:-1], as_index=False).head(1)
    write_csv(out_dir / "radius_sweep_per_concept.csv", per_k)
    write_csv(out_dir / "radius_sweep_fixed_k.csv", fixed)
    write_csv(out_dir / "radius_sweep_best_k.csv", best.sort_values(keys[:-1]))
    notes = [f"|D| = {r['n_examples']}, p_del {r['p_del']:g} (r = {r['radius']}): {r['message']}"
             for r in plan_warnings if "radius sweep" in str(r.get("where", ""))]
    figures.plot_radius_sweep(fixed, out_dir / f"radius_sweep_k{k:g}", notes)
    figures.plot_radius_sweep(best.drop(columns="k_target"), out_dir / "radius_sweep_best_k", notes)


def setting_tag(votes: Votes, certificates: Certificates) -> str:
    from certified_circuits.core.contracts import setting_columns

    return setting_columns(votes, certificates)["setting"]


#: what to do when a seed's table is refused
SEEDS_FIX = "pass the table report-sufficiency wrote in each seed's run (bin/model-seeds passes them)"
#: the K targets of a peaks_* or selected_* table, read by the one K parser where the table has them (shares in (0, 1];
#: an empty cell: no K): the effective K columns (``*_k``, the share kept: 0 for an empty certified circuit) are
#: measurements, not K targets
SEEDS_K_TARGETS = ("baseline_k_target", "majority_k_target", "certified_k_target")

#: Level at which a seed's per-example paired test counts as a significant win in the model-seeds tables.
SIGNIFICANCE = 0.05


def model_seeds_faithfulness(tables_by_seed: dict[str, Sequence[Path]], out_dir: Path, name: str) -> dict[str, float]:
    """Faithfulness across model-training seeds: per seed the mean CPR and CMD over the concepts of each
    (experiment, scorer, setting, eval set, method), then their mean, standard deviation, min and max over
    seeds, and in how many seeds the certified circuit's CMD is below (and its CPR above) the baseline's.
    Written as ``<name>_model_seeds_raw.csv`` and a display table."""
    frames = []
    for seed, paths in tables_by_seed.items():
        for path in paths:
            frame = read_csv_table(path, f"{path} (--run {seed}, a faithfulness.csv)", ["method", "eval_set", "cpr", "cmd"],
                                   SEEDS_FIX, {"concept": str})
            frames.append(frame.assign(model_seed=seed))
    table = pd.concat(frames, ignore_index=True)
    keys = [k for k in ("experiment", "scorer", "setting", "eval_set") if k in table.columns]
    per_seed = table.groupby([*keys, "method", "model_seed"])[["cpr", "cmd"]].mean().reset_index()
    summary = per_seed.groupby([*keys, "method"])[["cpr", "cmd"]].agg(["mean", "std", "min", "max"])
    summary.columns = [f"{column}_{stat}" for column, stat in summary.columns]
    summary = summary.reset_index()
    wide = per_seed.pivot_table(index=[*keys, "model_seed"], columns="method", values=["cpr", "cmd"]).reset_index()
    counts = []
    for key, part in wide.groupby(keys):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row["n_seeds"] = len(part)
        if ("cmd", "certified") in part and ("cmd", "baseline") in part:
            row["certified_lower_cmd"] = int((part[("cmd", "certified")] < part[("cmd", "baseline")]).sum())
            row["certified_higher_cpr"] = int((part[("cpr", "certified")] > part[("cpr", "baseline")]).sum())
        counts.append(row)
    summary = summary.merge(pd.DataFrame(counts), on=keys, how="left")
    write_csv(out_dir / f"{name}_model_seeds_raw.csv", summary)
    shown = summary[[*keys, "method"]].copy()
    for column in ("cpr", "cmd"):
        shown[column.upper()] = [f"{m:.3f} ± {sd:.3f}" for m, sd in zip(summary[f"{column}_mean"], summary[f"{column}_std"].fillna(0))]
    if "certified_lower_cmd" in summary:
        shown["certified CMD < baseline"] = [f"{w}/{n}" for w, n in zip(summary["certified_lower_cmd"], summary["n_seeds"])]
    tables.write_table(shown, out_dir / f"{name}_model_seeds",
                       caption=f"{name}: faithfulness CPR and CMD, mean over the concepts of a setting, mean ± sd over "
                               f"{summary['n_seeds'].max()} model-training seeds; seeds where the certified "
                               f"circuit's CMD is below the baseline's.")
    return {f"{name}_{r.method}_{r.eval_set}_cmd_mean": float(r.cmd_mean) for r in summary.itertuples()}


def model_seeds_report(tables_by_seed: dict[str, Sequence[Path]], out_dir: Path, name: str) -> dict[str, float]:
    """Conclusions across model-training seeds: the same table (peaks_* or selected_*) of runs whose
    models were trained with different seeds, as mean, standard deviation, min and max per row and
    method, with the number of seeds where certified beats the baseline.

    ``tables_by_seed`` maps a seed label to its table file(s). A claim in the docs must hold in every
    seed (``certified_wins == n_seeds``, or the reverse), not only in the mean.
    """
    frames = []
    for seed, paths in tables_by_seed.items():
        for path in paths:
            where = f"{path} (--run {seed}, a peaks_* or selected_* table of report-sufficiency)"
            frame = read_csv_table(path, where, ["eval_set", "baseline", "certified", "certified_k", "baseline_k"],
                                   SEEDS_FIX, {"concept": str})
            for column in SEEDS_K_TARGETS:
                if column in frame:
                    frame = parse_k_column(frame, column, where, SEEDS_FIX, allow_missing=True)
            frames.append(frame.assign(model_seed=seed))
    table = pd.concat(frames, ignore_index=True)
    keys = [k for k in ("experiment", "scorer", "concept", "eval_set") if k in table.columns]
    values = [c for c in ("full", "baseline", "majority", "certified", "baseline_k", "majority_k", "certified_k")
              if c in table.columns]
    grouped = table.groupby(keys)
    summary = grouped[values].agg(["mean", "std", "min", "max"])
    summary.columns = [f"{column}_{stat}" for column, stat in summary.columns]
    summary["n_seeds"] = grouped["model_seed"].nunique()
    summary["certified_wins"] = grouped.apply(lambda g: int((g["certified"] > g["baseline"]).sum()), include_groups=False)
    summary["baseline_wins"] = grouped.apply(lambda g: int((g["certified"] < g["baseline"]).sum()), include_groups=False)
    if "pvalue_examples" in table.columns:  # per-example paired test of each seed's run at 0.05
        significant = table["pvalue_examples"] < SIGNIFICANCE
        table = table.assign(certified_significant=significant & (table["certified"] > table["baseline"]),
                             baseline_significant=significant & (table["certified"] < table["baseline"]))
        grouped = table.groupby(keys)
        summary["certified_significant"] = grouped["certified_significant"].sum().astype(int)
        summary["baseline_significant"] = grouped["baseline_significant"].sum().astype(int)
    summary = summary.reset_index()
    write_csv(out_dir / f"{name}_model_seeds_raw.csv", summary)
    shown = summary[keys].copy()
    for column in ("full", "baseline", "certified", "baseline_k", "certified_k"):
        if f"{column}_mean" in summary:
            shown[column] = [f"{100 * m:.1f} ± {100 * s:.1f}" for m, s in zip(summary[f"{column}_mean"],
                                                                          summary[f"{column}_std"].fillna(0))]
    shown["certified > baseline"] = [f"{w}/{n}" for w, n in zip(summary["certified_wins"], summary["n_seeds"])]
    caption = (f"{name}: mean ± standard deviation (%) over {summary['n_seeds'].max()} model-training seeds, and in "
               f"how many seeds certified beats the baseline")
    if "certified_significant" in summary:
        shown["significant: certified / baseline"] = [
            f"{c}/{b}" for c, b in zip(summary["certified_significant"], summary["baseline_significant"])]
        caption += (f"; in how many seeds the per-example paired test (p < {SIGNIFICANCE}) finds certified, or the "
                    f"baseline, significantly better")
    tables.write_table(shown, out_dir / f"{name}_model_seeds", caption=caption)
    return {f"seeds_{name}_certified_wins_total": int(summary["certified_wins"].sum())}


def theory_report(out_dir: Path, n_components: int = 3840, n_examples: int | None = None, label: str = "") -> dict[str, float]:
    """App. C figures for the run's own sizes: ``samples_vs_tau`` (minimum n vs tau, Bonferroni over ``U =
    n_components``) and ``radius_vs_pdel`` (radius vs p_del; with ``n_examples = |D|``, where ``p_del^|D| >= 1 - tau``
    makes IN impossible is drawn dotted). Both titles state U and |D| (and ``label``, what they are of).

    One (U, |D|) per run: the workflow passes the vision experiment's main setting (every class shares its
    ``|D|`` and ``U``), or the first language setting's when vision is off (rules/reports.smk); the defaults are the
    paper's ResNet (U = 3,840) with no |D|.

    Returns:
        ``theory_n_components`` and ``theory_n_examples`` (0 when not given).
    """
    sizes = f"U = {n_components:,} components" + (f", |D| = {n_examples:,} examples" if n_examples else "")
    title = f"{label}: {sizes}" if label else sizes
    figures.plot_radius_curves(out_dir / "radius_vs_pdel", n_examples=n_examples, title=title)
    figures.plot_sample_complexity(out_dir / "samples_vs_tau", n_components=n_components, title=title)
    return {"theory_n_components": float(n_components), "theory_n_examples": float(n_examples or 0)}
