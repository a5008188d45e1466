"""Reporting stages (implementation): tables and figures of the paper from per-concept results.

Subcommands (registered into ``certified-circuits``):

``report-sufficiency``  Table 1 / Table 3 (peaks by cACC and by balanced accuracy, paired tests) and
                        the cACC-K, balanced-accuracy and false-positive curves (Fig. cACC-K).
``report-iou``          Fig. IoU: ID circuits vs circuits re-discovered on each OOD set, at the K that
                        maximises the certified-baseline gap.
``report-seeds``        App. Fig. variance: pairwise IoU of circuits certified with different seeds.
``report-radius``       App. D: abstention, effective size and cACC across radii and |D|.
``report-spurious``     Spurious index of certified-in vs abstained vs certified-out channels.
``report-theory``       App. C: radius vs p_del and minimum n vs tau.
``report-summary``      Headline numbers of a run (stderr and Markdown).

Per-concept sufficiency tables are located by the workflow's path layout
``.../{concept}/{scorer}/p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}_a{alpha}_{correction}.csv``; the scorer and
setting are read from it.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import evaluation, figures
from .certification import certified_radius, method_masks
from .store import atomic_path, read_attributions, read_certificates, read_votes
from .tracking import add_metrics

log = logging.getLogger(__name__)

SETTING_RE = re.compile(r"p(?P<p_del>[0-9.e\-]+)_n0(?P<n0>\d+)_n(?P<n>\d+)_s(?P<seed>\d+)")
DECISION_RE = re.compile(r"t(?P<tau>[0-9.e\-]+)_a(?P<alpha>[0-9.e\-]+)_(?P<correction>bonferroni|holm)")


def annotate_from_path(path: Path) -> dict[str, object]:
    """Scorer and certification setting of a per-concept result file from its path."""
    setting, decision, scorer = path.parent.name, path.stem, path.parent.parent.name
    s, d = SETTING_RE.fullmatch(setting), DECISION_RE.fullmatch(decision)
    if not (s and d):
        raise ValueError(
            f"{path}: not in the layout .../{{scorer}}/p{{p_del}}_n0{{n0}}_n{{n}}_s{{seed}}/t{{tau}}_a{{alpha}}_{{correction}}.csv"
        )
    p_del, tau = float(s["p_del"]), float(d["tau"])
    return {
        "scorer": scorer,
        "setting": f"{setting}/{decision}",
        "p_del": p_del,
        "tau": tau,
        "n": int(s["n"]),
        "seed": int(s["seed"]),
        "radius": certified_radius(tau, p_del),
    }


def load_annotated(paths: list[Path]) -> pd.DataFrame:
    frames = []
    for path in paths:
        frame = evaluation.read_sufficiency([path])
        frames.append(frame.assign(**annotate_from_path(Path(path))))
    return pd.concat(frames, ignore_index=True)


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


def _display_peaks(peaks: pd.DataFrame, label_columns: list[str]) -> pd.DataFrame:
    """Fold extra key columns (scorer, task, setting) into the display label of the table."""
    shown = peaks.copy()
    if label_columns:
        shown["eval_set"] = shown[label_columns + ["eval_set"]].astype(str).agg(" / ".join, axis=1)
    return figures.format_peak_table(shown)


def _cmd_sufficiency(args: argparse.Namespace) -> int:
    out = Path(args.out_dir)
    table = load_annotated([Path(p) for p in args.inputs])
    by = ["experiment", *args.by, "eval_set"]
    _write_csv(table, out / "sufficiency.csv")
    curves = evaluation.cacc_curves(table, by)
    _write_csv(curves, out / "curves.csv")
    metrics = ["accuracy"] + (["balanced_accuracy"] if "balanced_accuracy" in table.columns else [])
    headline = {}
    for metric in metrics:
        peaks = evaluation.peak_table(table, metric=metric, test=args.test, by=by)
        if args.best_setting:
            keys = [k for k in by if k != "setting"]
            peaks = evaluation.best_setting(peaks, keys)
        name = "cacc" if metric == "accuracy" else "balanced"
        _write_csv(peaks, out / f"peaks_{name}_raw.csv")
        labels = [k for k in args.by if k != "setting"]
        caption = (f"Peak {'cACC' if metric == 'accuracy' else 'balanced accuracy'} of certified vs baseline circuits "
                   f"({args.test} paired class-level test; Delta relative, in %).")
        figures.write_table(_display_peaks(peaks, labels), out / f"peaks_{name}", caption=caption)
        for _, row in peaks.iterrows():
            key = "_".join(str(row[k]) for k in [*labels, "eval_set"])
            headline[f"{name}_{key}_certified"] = row["certified"]
            headline[f"{name}_{key}_baseline"] = row["baseline"]
            headline[f"{name}_{key}_certified_k"] = row["certified_k"]
    add_metrics(headline)
    panels = curves.copy()
    if args.by:
        panels["experiment"] = panels[["experiment", *args.by]].astype(str).agg(" / ".join, axis=1)
    for metric in [m for m in ("cacc", "balanced_accuracy", "false_positive_rate") if m in panels.columns]:
        figures.plot_cacc_curves(panels, out / f"curves_{metric}", metric=metric, title=args.title)
    log.info("sufficiency report for %d rows -> %s", len(table), out)
    return 0


def _circuits(votes_path: str, certificates_path: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    votes, certificates = read_votes(votes_path), read_certificates(certificates_path)
    return method_masks(votes, certificates), votes.k_grid, votes.groups


def _k_index(k_grid: np.ndarray, k_target: float, where: str) -> int:
    matches = np.flatnonzero(np.isclose(k_grid, k_target))
    if matches.size == 0:
        raise ValueError(f"{where}: K = {k_target} is not in its K grid {k_grid.tolist()}")
    return int(matches[0])


def _read_curves(path: Path, scorer: str | None) -> pd.DataFrame:
    """cACC curves of one scorer: the operating K of a report must come from the scorer whose circuits
    it compares, never from an average over the scorers of Table 3."""
    curves = pd.read_csv(path)
    if "scorer" not in curves.columns:
        return curves
    available = sorted(curves["scorer"].unique())
    if scorer is None:
        if len(available) > 1:
            raise ValueError(f"{path} holds curves of scorers {available}: choose one with --scorer")
        return curves
    if scorer not in available:
        raise ValueError(f"{path} has no curves of scorer {scorer!r}; it has {available}")
    return curves[curves["scorer"] == scorer]


def _cmd_iou(args: argparse.Namespace) -> int:
    curves = _read_curves(args.curves, args.scorer)
    rows = []
    for concept, eval_set, id_votes, id_cert, ood_votes, ood_cert in args.item:
        k_target = evaluation.best_gap_k(curves, args.experiment, eval_set)
        id_masks, id_grid, _ = _circuits(id_votes, id_cert)
        ood_masks, ood_grid, _ = _circuits(ood_votes, ood_cert)
        i, j = _k_index(id_grid, k_target, id_votes), _k_index(ood_grid, k_target, ood_votes)
        for method in ("baseline", "certified"):
            rows.append(dict(experiment=args.experiment, concept=concept, eval_set=eval_set, method=method,
                             k_target=k_target, iou=float(evaluation.circuit_iou(id_masks[method][i], ood_masks[method][j]))))
    iou = pd.DataFrame(rows)
    out = Path(args.out_dir)
    _write_csv(iou, out / "iou.csv")
    figures.plot_iou(iou, out / "iou")
    means = iou.groupby("method")["iou"].mean()
    add_metrics({f"iou_mean_{m}": v for m, v in means.items()})
    return 0


def _cmd_seeds(args: argparse.Namespace) -> int:
    curves = _read_curves(args.curves, args.scorer)
    k_target = float(args.k) if args.k else evaluation.certified_peak_k(curves, args.eval_set)
    by_concept: dict[str, list[tuple[int, dict[str, np.ndarray], np.ndarray]]] = {}
    for concept, seed, votes_path, certificates_path in args.item:
        masks, grid, _ = _circuits(votes_path, certificates_path)
        by_concept.setdefault(concept, []).append((int(seed), masks, grid))
    frames = []
    for concept, runs in by_concept.items():
        seeds = [seed for seed, _, _ in runs]
        for method in ("certified", "majority"):
            stacked = np.stack([m[method][_k_index(g, k_target, concept)] for _, m, g in runs])
            frames.append(evaluation.pairwise_iou(stacked, seeds).assign(experiment=args.experiment, concept=concept,
                                                                          method=method, k_target=k_target))
    stability = pd.concat(frames, ignore_index=True)
    out = Path(args.out_dir)
    _write_csv(stability, out / "seed_stability.csv")
    figures.plot_seed_stability(stability, out / "seed_stability")
    add_metrics({f"seed_iou_mean_{m}": v for m, v in stability.groupby("method")["iou"].mean().items()})
    return 0


def _cmd_radius(args: argparse.Namespace) -> int:
    rows = []
    for concept, n_examples, votes_path, certificates_path, sufficiency_path in args.item:
        votes, certificates = read_votes(votes_path), read_certificates(certificates_path)
        summary = evaluation.abstention_summary(certificates.decision, votes.baseline, votes.groups)
        sufficiency = pd.read_csv(sufficiency_path)
        wanted = sufficiency[(sufficiency.eval_set == args.eval_set) & (sufficiency.method == "certified")]
        accuracy = wanted.set_index("k_target")["accuracy"]
        for index, k in enumerate(votes.k_grid):
            rows.append(dict(experiment=args.experiment, concept=concept, n_examples=int(n_examples),
                             p_del=float(votes.attrs["p_del"]), tau=float(certificates.attrs["tau"]),
                             radius=int(certificates.attrs["radius"]), k_target=float(k),
                             cacc=float(accuracy.get(k, np.nan)), **summary.iloc[index].to_dict()))
    per_k = pd.DataFrame(rows)
    keys = ["experiment", "n_examples", "p_del", "tau", "radius", "k_target"]
    mean = per_k.groupby(keys, as_index=False)[["cacc", "abstain_rate", "effective_k", "baseline_k"]].mean()
    fixed = mean[np.isclose(mean.k_target, args.k)].drop(columns="k_target")
    best = mean.sort_values(["cacc", "effective_k"], ascending=[False, True]).groupby(keys[:-1], as_index=False).head(1)
    out = Path(args.out_dir)
    _write_csv(per_k, out / "radius_sweep_per_concept.csv")
    _write_csv(fixed, out / "radius_sweep_fixed_k.csv")
    _write_csv(best.sort_values(keys[:-1]), out / "radius_sweep_best_k.csv")
    figures.plot_radius_sweep(fixed, out / f"radius_sweep_k{args.k:g}")
    figures.plot_radius_sweep(best.drop(columns="k_target"), out / "radius_sweep_best_k")
    return 0


def _cmd_spurious(args: argparse.Namespace) -> int:
    curves = _read_curves(args.curves, args.scorer)
    k_target = evaluation.certified_peak_k(curves, args.eval_set)
    frames = []
    for concept, attributions_path, votes_path, certificates_path in args.item:
        attributions = read_attributions(attributions_path)
        if "spurious_index" not in attributions.extras:
            raise ValueError(f"{attributions_path} has no extras/spurious_index (only the embedded world writes it)")
        votes, certificates = read_votes(votes_path), read_certificates(certificates_path)
        i = _k_index(votes.k_grid, k_target, votes_path)
        categories = evaluation.channel_categories(certificates.decision[i], votes.baseline[i])
        frames.append(pd.DataFrame({"concept": concept, "component": attributions.names, "category": categories,
                                    "spurious_index": attributions.extras["spurious_index"], "k_target": k_target}))
    channels = pd.concat(frames, ignore_index=True)
    channels = channels[channels.category != "other"]
    out = Path(args.out_dir)
    _write_csv(channels, out / "spurious_channels.csv")
    summary = channels.groupby("category")["spurious_index"].agg(["mean", "median", "count"]).reset_index()
    figures.write_table(summary, out / "spurious_summary", caption="Spurious index by certification category")
    figures.plot_spurious(channels, out / "spurious")
    add_metrics({f"spurious_mean_{r.category}": r["mean"] for _, r in summary.iterrows()})
    return 0


def _cmd_theory(args: argparse.Namespace) -> int:
    out = Path(args.out_dir)
    figures.plot_radius_curves(out / "radius_vs_pdel")
    figures.plot_sample_complexity(out / "samples_vs_tau", n_components=args.n_components)
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    lines = ["# certified-circuits run summary", ""]
    for path in map(Path, args.peaks):
        table = pd.read_csv(path)
        lines += [f"## {path.parent.name}: {path.stem}", "", table.to_csv(index=False), ""]
    lines += ["Tables and figures: " + ", ".join(sorted({str(Path(p).parent) for p in args.peaks}))]
    text = "\n".join(lines)
    with atomic_path(args.out) as tmp:
        tmp.write_text(text)
    print(text, file=sys.stderr)
    return 0


def _example_images(data: str, ids: list[str], size: int = 64) -> np.ndarray:
    """uint8 [len(ids), H, W, 3] for example ids of a world .npz split or an ImageNet-style folder."""
    path = Path(data)
    if path.suffix == ".npz":
        from .vision.world import load_split

        split = load_split(path)
        position = {str(i): n for n, i in enumerate(split["ids"].astype(str))}
        missing = [i for i in ids if i not in position]
        if missing:
            raise ValueError(f"{path} lacks example ids {missing[:3]}: were the attributions made from it?")
        return split["images"][[position[i] for i in ids]]
    from PIL import Image

    return np.stack([np.asarray(Image.open(path / i).convert("RGB").resize((size, size))) for i in ids])


def _cmd_features(args: argparse.Namespace) -> int:
    """Fig. 4: top-activating examples of certified-in, abstained (within the baseline) and
    certified-out channels of one class, at the certified ID peak K. Channels come from the deepest
    block (the most class-specific features); within each category the ones with the highest mean
    activation on the concept dataset are shown."""
    curves = _read_curves(args.curves, args.scorer)
    k_target = evaluation.certified_peak_k(curves, args.eval_set)
    attributions = read_attributions(args.attributions)
    for key in ("top_examples", "mean_activation"):
        if key not in attributions.extras:
            raise ValueError(f"{args.attributions} has no extras/{key}; rerun vision-attribute")
    votes, certificates = read_votes(args.votes), read_certificates(args.certificates)
    i = _k_index(votes.k_grid, k_target, str(args.votes))
    categories = evaluation.channel_categories(certificates.decision[i], votes.baseline[i])
    deepest = attributions.groups == attributions.groups.max()
    activation = attributions.extras["mean_activation"]
    top = attributions.extras["top_examples"][:, : args.examples]
    rows, labels = [], []
    for category in ("certified_in", "abstained", "certified_out"):
        candidates = np.flatnonzero((categories == category) & deepest)
        for channel in candidates[np.argsort(-activation[candidates], kind="stable")][: args.channels]:
            ids = [attributions.example_ids[j] for j in top[channel]]
            rows.append(_example_images(args.data, ids))
            labels.append(f"{category.replace('_', ' ')}: {attributions.names[channel]}")
    if not rows:
        raise ValueError("no channel in any category at this K; nothing to show")
    figures.plot_feature_grid(np.stack(rows), labels, args.out_stem,
                              title=f"{attributions.attrs.get('concept', '')} (K = {k_target:g})")
    return 0
