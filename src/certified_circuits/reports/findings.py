""" "What this run shows": the findings that open ``summary.md``, computed from the testbed's result tables.

The testbed (docs/embedded_default.md) is where a circuit has a known right answer: the planted class circuits of
the world model and the verified induction circuit of the language model. Its tables say what a certificate buys,
so the summary leads with them, each finding one line of numbers read from a table (never template prose that
could contradict it), and the table it comes from:

- the ground truth and its causal check (``ground_truth/<experiment>.json``);
- recovery of the truth per method (``tables/<experiment>/testbed/recovery_auroc.csv`` and ``recovery.csv``): the
  AUROC over the K grid, precision and recall at the truth's size (R-precision: no selection involved) and at the K
  chosen on held-out data;
- stability under bootstrap resamples of each concept dataset at the truth's size (``testbed/stability.csv``);
- vision only: balanced accuracy under mean ablation at the K chosen on held-out images
  (``tables/<experiment>/mean_ablation/selected_balanced_raw.csv``), the evaluation a class-biased circuit cannot
  win (zero ablation's cACC rewards it; it stays as the paper's table with its false-positive rate beside it).

A finding never cites a degenerate number as if it meant something: an empty circuit is said to be empty, a truth
that failed its check is said to have failed, and a row that :mod:`certified_circuits.reports.flags` flags is named
as flagged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.recovery import nearest_k
from certified_circuits.analysis.recovery import truth_size_k as truth_size_k_of
from certified_circuits.reports.flags import is_full_model
from certified_circuits.reports.tables import selection_name
from certified_circuits.storage.tables import parse_k_column, read_csv_table

__all__ = [
    "END_LINES",
    "MAX_FINDINGS",
    "end_message",
    "summary_findings",
    "findings",
    "truth_finding",
    "recovery_finding",
    "stability_finding",
    "mean_ablation_finding",
    "hypotheses_finding",
]

#: at most this many lines open the summary (a person reads them in a minute)
MAX_FINDINGS = 10
#: the recovery methods, in the order a finding names them, with their words
METHOD_WORDS = {
    "baseline": "baseline",
    "certified_in": "certified in",
    "certified_in_abstain": "certified in + abstain",
}


#: said in the same line as a number read at a selected K of 100% (flags.is_full_model; the full-model-k flag)
FULL_MODEL_CAVEAT = ("K 100% for {who} is the whole model: these numbers compare the full model with itself and "
                     "cannot tell methods apart; read the AUROC and the truth's size instead")


def _pct(value: float) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{100 * value:.0f}%"


def _num(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


#: the columns each finding reads, by table (a table without them is refused by name, never half-read)
AUROC_COLUMNS = ("experiment", "scorer", "setting", "concept", "method", "auroc", "at_selected_setting", "k_target")
CURVE_COLUMNS = ("scorer", "setting", "method", "k_target", "n_true", "n_components", "precision", "recall")
STABILITY_COLUMNS = ("experiment", "scorer", "concept", "k_target", "baseline_jaccard_mean", "baseline_change_share",
                     "certified_change_share", "certified_flip_share")
MEAN_ABLATION_COLUMNS = ("experiment", "eval_set", "full", "baseline", "baseline_k", "certified", "certified_k")


#: the K columns of each table (shares of the components), with whether an empty cell (no K) is allowed: a recovery
#: row of a run given no K, a method with no selected K
AUROC_K = {"k_target": True}
CURVE_K = {"k_target": False}
STABILITY_K = {"k_target": False}
MEAN_ABLATION_K = {"baseline_k": True, "certified_k": True}
#: what to do when a table a finding reads is refused
READ_FIX = "rerun the report stage that writes it (make reproduce reruns only what is missing)"


def _read(path: Path, columns: Sequence[str], k_columns: Mapping[str, bool], allow_empty: bool = False) -> pd.DataFrame:
    """A table a finding reads (:func:`~certified_circuits.storage.tables.read_csv_table`: UTF-8 CSV with
    ``columns``, no ragged row; concepts as text), each K column of ``k_columns`` a share in (0, 1]
    (:func:`~certified_circuits.storage.tables.parse_k_column`; ``{column: empty cell allowed}``)."""
    table = read_csv_table(path, str(path), columns, READ_FIX, {"concept": str}, allow_empty=allow_empty)
    for column, allow_missing in k_columns.items():
        table = parse_k_column(table, column, str(path), READ_FIX, allow_missing=allow_missing)
    return table


def truth_finding(path: Path) -> str:
    """One line on an experiment's ground truth: how many concepts passed their causal check, and its numbers.

    Args:
        path: a ground-truth JSON (format ``certified-circuits/ground-truth/1``), read and validated by
            :func:`certified_circuits.analysis.recovery.read_ground_truth`. Its ``verification`` blocks carry
            ``passed`` and, where the stage wrote them, a ``headline`` mapping of the check's numbers
            (``full``, ``circuit_only``, ``circuit_removed``, ``chance``, ``metric``).

    Returns:
        ``"world: the true circuits (22% of 150 components per concept, mean) passed their causal check for 10 of 10
        concepts: ..."``.

    Raises:
        ValueError: the file is not a valid ground truth (the reader's message: the file, the field and the fix).
    """
    from certified_circuits.analysis.recovery import read_ground_truth

    truth = read_ground_truth(path)  # validated: no concept twice, `passed` a JSON boolean
    passed = sum(truth.verified(concept) for concept in truth.concepts)
    sizes = [len(components) for components in truth.concepts.values()]
    n = int(truth.n_components or 0)
    share = f"{np.mean(sizes):.0f} of {n} components" if n else f"{np.mean(sizes):.0f} components"
    line = (
        f"**{truth.experiment}**: the true circuits ({share} per concept, mean) passed their causal "
        f"check for {passed} of {len(truth.concepts)} concepts"
    )
    heads = [checks["headline"] for checks in truth.verification.values() if "headline" in checks]
    if heads:
        metric = heads[0].get("metric", "metric")
        mean = {k: float(np.mean([h[k] for h in heads])) for k in ("full", "circuit_only", "circuit_removed")}
        chance = heads[0].get("chance")
        line += (
            f": {metric} {_num(mean['full'])} with the full model, {_num(mean['circuit_only'])} with the true "
            f"circuit alone, {_num(mean['circuit_removed'])} with it removed"
            + (f" (chance {_num(float(chance))})" if chance is not None else "")
        )
    return line + f" (`{Path(path).name}`)."


def _main_rows(auroc: pd.DataFrame, scorer: str | None) -> pd.DataFrame:
    rows = auroc[auroc["at_selected_setting"].astype(bool)]
    if scorer is not None and "scorer" in rows and (rows["scorer"] == scorer).any():
        rows = rows[rows["scorer"] == scorer]
    elif "scorer" in rows and rows["scorer"].nunique() > 1:
        rows = rows[rows["scorer"] == rows["scorer"].iloc[0]]
    return rows


def truth_size_k(rows: pd.DataFrame) -> float | None:
    """The K of the grid nearest the truth's share of the components (mean over concepts of ``n_true / n_components``):
    where a circuit has the truth's size, so precision equals recall there (R-precision, a selection-free point)."""
    if rows.empty or "n_true" not in rows or "k_target" not in rows:
        return None
    return truth_size_k_of(rows["n_true"], rows["n_components"], rows["k_target"])


def _point(part: pd.DataFrame) -> str:
    empty = int(part["empty_circuit"].astype(bool).sum()) if "empty_circuit" in part else 0
    text = f"{_num(part['precision'].mean())} / {_num(part['recall'].mean())}"
    return text + (f" ({empty} of {len(part)} empty)" if empty else "")


def recovery_finding(path: Path, scorer: str | None = None) -> str:
    """One line: how each method recovers the truth: AUROC over the K grid, precision / recall at the truth's size
    (:func:`truth_size_k`, read from ``recovery.csv`` beside ``path``) and at each method's held-out-selected K.

    Args:
        path: ``recovery_auroc.csv`` of ``report-recovery``.
        scorer: the scorer to report (vision's main scorer); default the table's first.

    Returns:
        ``"world recovery of the truth (relevance; mean over 10 concepts): AUROC baseline 0.53, certified in 0.49,
        ...; precision / recall at the truth's size (K 0.2): baseline 0.51 / 0.51, ...; at the K chosen on id_test
        (baseline 1.0, certified in 1.0): ..."``; precision is averaged over the non-empty circuits, the empty ones
        are counted.
    """
    table = _read(path, (*AUROC_COLUMNS, "k_source"), AUROC_K)  # where each K came from, named in the line
    rows = _main_rows(table, scorer)
    if rows.empty:
        return f"{path}: no recovery row at a selected setting."
    experiment, used = rows["experiment"].iloc[0], rows["scorer"].iloc[0]
    methods = [(m, w) for m, w in METHOD_WORDS.items() if (rows["method"] == m).any()]
    areas = ", ".join(f"{w} {_num(rows[rows.method == m]['auroc'].mean(), 3)}" for m, w in methods)
    line = f"**{experiment}** recovery of the truth ({used}; mean over {rows['concept'].nunique()} concepts): AUROC {areas}"
    every_k = Path(path).with_name("recovery.csv")
    if every_k.is_file():
        curve = _read(every_k, CURVE_COLUMNS, CURVE_K)
        curve = curve[(curve["scorer"] == used) & curve["setting"].isin(set(rows["setting"]))]
        k = truth_size_k(curve)
        if k is not None:
            at = curve[np.isclose(curve["k_target"], k)]
            line += f"; precision / recall at the truth's size (K {_num(k)}): " + ", ".join(
                f"{w} {_point(at[at.method == m])}" for m, w in methods if (at.method == m).any()
            )
    source = sorted(set(rows["k_source"].dropna().astype(str)) - {""})
    if source:
        picked = ", ".join(f"{w} {_num(rows[rows.method == m]['k_target'].mean())}" for m, w in methods)
        line += f"; at the K {', '.join(source)} ({picked}): " + ", ".join(
            f"{w} {_point(rows[rows.method == m])}" for m, w in methods
        )
        full = [w for m, w in methods if rows.loc[rows.method == m, "k_target"].map(is_full_model).all()]
        if full:
            line += f" ({FULL_MODEL_CAVEAT.format(who=', '.join(full))})"
    return line + f" (`{Path(path).parent.name}/`)."


def _span(values: pd.Series, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
    """``"0.82-1.00"`` (or one number when the range is one value), each value times ``scale``."""
    low, high = float(values.min()) * scale, float(values.max()) * scale
    return f"{low:.{digits}f}{unit}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else \
        f"{low:.{digits}f}-{high:.{digits}f}{unit}"


def stability_finding(path: Path, k: float | None, scorer: str | None = None) -> str:
    """One line: how the circuits move under bootstrap resamples of the concept datasets, over the whole K grid (the
    range of each mean, so that no single favourable K stands for the grid), then at K ``k``.

    Args:
        path: ``stability.csv`` of ``report-stability`` (every concept and K).
        k: the K to report besides the range (the truth's size: :func:`truth_size_k`); the grid's nearest K is used.
            None: the range alone.
        scorer: the scorer to report (vision's main scorer); default the table's first. One setting (the table's
            first) is reported.

    Returns:
        ``"world stability (20 bootstrap resamples of each dataset, relevance, mean over 10 concepts), over the K grid
        0.05-0.5: the baseline circuit's Jaccard to the full-data circuit is 0.82-1.00; between resamples 0.0-5.0% of
        baseline memberships change, 0.0-3.1% of certified labels (in/out/abstain) and 0.00-0.10% flip in<->out; at
        the truth's size (K 0.20): 0.91, 3.1%, 1.2%, 0.00% (`testbed/stability.csv`)."``
    """
    table = _read(path, STABILITY_COLUMNS, STABILITY_K, allow_empty=True)
    if table.empty:
        return f"{path}: no stability rows."
    used = scorer if scorer is not None and (table["scorer"] == scorer).any() else table["scorer"].iloc[0]
    rows = table[table["scorer"] == used]
    if "setting" in rows and rows["setting"].nunique() > 1:
        rows = rows[rows["setting"] == rows["setting"].iloc[0]]
    resamples = int(rows["resamples"].iloc[0]) if "resamples" in rows else 0
    columns = ["baseline_jaccard_mean", "baseline_change_share", "certified_change_share", "certified_flip_share"]
    per_k = rows.groupby("k_target", sort=True)[columns].mean()  # mean over concepts, one row per K
    grid = per_k.index.to_numpy(dtype=float)
    line = (
        f"**{rows['experiment'].iloc[0]}** stability ({resamples} bootstrap resamples of each dataset, {used}, mean "
        f"over {rows['concept'].nunique()} concepts), over the K grid {_num(grid.min())}-{_num(grid.max())}: the "
        f"baseline circuit's Jaccard to the full-data circuit is {_span(per_k[columns[0]])}; between resamples "
        f"{_span(per_k[columns[1]], 100, 1, '%')} of baseline memberships change, "
        f"{_span(per_k[columns[2]], 100, 1, '%')} of certified labels (in/out/abstain) and "
        f"{_span(per_k[columns[3]], 100, 2, '%')} flip in<->out"
    )
    if k is not None and np.isfinite(k):
        at = nearest_k(grid, k)
        point = per_k.loc[per_k.index[np.isclose(grid, at)][0]]
        line += (
            f"; at the truth's size (K {_num(at)}): Jaccard {_num(point[columns[0]])}, "
            f"{100 * point[columns[1]]:.1f}% / {100 * point[columns[2]]:.1f}% / {100 * point[columns[3]]:.2f}% changed"
        )
    return line + f" (`testbed/{Path(path).name}`)."


def hypotheses_finding(path: Path, scorer: str | None = None) -> str:
    """One line: H1-H3 of docs/embedded_default.md on this run's pairs (concepts x settings; the three-seed tests
    are ``report-hypotheses`` of ``bin/model-seeds``), read from ``recovery.csv``, ``recovery_auroc.csv`` and
    ``stability.csv`` of one ``testbed/`` folder (:func:`certified_circuits.analysis.hypotheses.hypothesis_table`).

    Args:
        path: ``recovery_auroc.csv`` of ``report-recovery`` (its folder holds the other two).
        scorer: the scorer to report; default the table's first.

    Returns:
        ``"world hypotheses (relevance; one-sided paired Wilcoxon, alpha 0.05; docs/embedded_default.md): H1a
        certified-in precision 0.55 vs baseline 0.47 at K 0.20, p 0.030 (10 pairs): holds; ..."``, or "" without
        the recovery table.
    """
    from certified_circuits.analysis.hypotheses import ALPHA, hypothesis_table

    every_k = Path(path).with_name("recovery.csv")
    if not every_k.is_file():
        return ""
    stability = Path(path).with_name("stability.csv")
    table = hypothesis_table(_read(every_k, CURVE_COLUMNS + ("experiment", "concept"), CURVE_K),
                             _read(stability, STABILITY_COLUMNS, STABILITY_K) if stability.is_file() else None,
                             _read(path, AUROC_COLUMNS, AUROC_K))
    if table.empty:
        return ""
    used = scorer if scorer is not None and (table["scorer"] == scorer).any() else table["scorer"].iloc[0]
    rows = table[table["scorer"] == used]
    words = {"H1a": "certified-in precision {c} vs baseline {b} at K {k}",
             "H1b": "the same at the K certified selection chose ({k}): {c} vs {b}",
             "H2": "in<->out flips {c} vs baseline changes {b}",
             "H3": "certified-in+abstain recall {c} vs baseline {b}"}
    parts = []
    for _, r in rows.iterrows():
        if not r["n_pairs"]:  # e.g. no stability table for this scorer
            continue
        if is_full_model(r["k"]):  # a K of 100% compares the whole model with itself
            parts.append(f"{r['hypothesis']} untestable: the K certified selection chose is 100% (the whole model)")
            continue
        scale, unit = (100, "%") if r["hypothesis"] == "H2" else (1, "")
        text = words[r["hypothesis"]].format(c=f"{_num(r['certified'] * scale)}{unit}",
                                             b=f"{_num(r['baseline'] * scale)}{unit}", k=_num(r["k"]))
        verdict = "holds" if r["holds"] else "does not hold"
        parts.append(f"{r['hypothesis']} {text}, p {_num(r['pvalue'], 3)} ({int(r['n_pairs'])} pairs): {verdict}")
    return (f"**{rows['experiment'].iloc[0]}** hypotheses ({used}; one-sided paired Wilcoxon, alpha {ALPHA}; "
            f"docs/embedded_default.md): " + "; ".join(parts) + f" (`{Path(path).parent.name}/`).")


def mean_ablation_finding(path: Path, eval_sets: Sequence[str], scorer: str | None = None) -> str:
    """One line: balanced accuracy under mean ablation at the K chosen on held-out images, per method.

    Args:
        path: ``mean_ablation/selected_balanced_raw.csv`` of ``report-sufficiency --ablation mean --select-on``.
        eval_sets: the eval sets to name (the selection set itself is not in the table).
        scorer: the scorer to report; default the table's first.

    Returns:
        ``"world, mean ablation, relevance, K chosen on id_test: balanced accuracy on context_shift: full 0.80,
        baseline 0.78 (K 10%), certified 0.77 (K 8%), p 0.4; ..."``.
    """
    table = _read(path, MEAN_ABLATION_COLUMNS, MEAN_ABLATION_K, allow_empty=True)
    if "scorer" in table and len(table):
        table = table[table["scorer"] == (scorer if scorer in set(table["scorer"]) else table["scorer"].iloc[0])]
    parts, full = [], set()
    for eval_set in eval_sets:
        row = table[table["eval_set"] == eval_set]
        if row.empty:
            continue
        r = row.iloc[0]
        p = r.get("pvalue_examples", r.get("pvalue", np.nan))
        parts.append(
            f"{eval_set}: full {_num(r['full'])}, baseline {_num(r['baseline'])} (K {_pct(r['baseline_k'])}), "
            f"certified {_num(r['certified'])} (K {_pct(r['certified_k'])})"
            + (f", p {_num(float(p), 3)}" if np.isfinite(float(p)) else "")
        )
        full |= {w for w in ("baseline", "certified") if is_full_model(r[f"{w}_k"])}
    if not parts:
        return f"{path}: none of {list(eval_sets)} in the table."
    chosen = selection_name({"ablation": "mean", **table.iloc[0].to_dict()})
    line = (
        f"**{table['experiment'].iloc[0]}** balanced accuracy under mean ablation "
        f"({table['scorer'].iloc[0] if 'scorer' in table else 'the one scorer'}, K {chosen}): " + "; ".join(parts)
    )
    if full == {"baseline", "certified"}:  # the full model against itself: p = 1 by construction
        line += f" ({FULL_MODEL_CAVEAT.format(who='baseline and certified')}; p = 1 by construction)"
    elif full:
        line += f" ({FULL_MODEL_CAVEAT.format(who=', '.join(sorted(full)))})"
    return line + " (`mean_ablation/selected_balanced.md`)."


def findings(
    ground_truths: Sequence[Path],
    recovery: Sequence[Path],
    stability: Sequence[Path],
    mean_ablation: Sequence[Path] = (),
    main_scorer: str | None = None,
    eval_sets: Sequence[str] = ("id_test", "context_shift", "corruption"),
) -> list[str]:
    """The findings block: at most :data:`MAX_FINDINGS` lines, experiment by experiment.

    Args:
        ground_truths: ground-truth JSONs (one per experiment).
        recovery: ``recovery_auroc.csv`` per experiment (the folder's experiment is the table's).
        stability: ``stability.csv`` per experiment.
        mean_ablation: ``mean_ablation/selected_balanced_raw.csv`` per vision experiment.
        main_scorer: vision's main scorer (the one recovery and mean ablation report).
        eval_sets: the vision eval sets the mean-ablation line names.

    Returns:
        Markdown list items (``- ...``), truth first, then recovery, stability and mean ablation per experiment.
    """
    lines = [truth_finding(Path(p)) for p in ground_truths]
    at_k: dict[str, float] = {}  # stability is read where circuits have the truth's size (contested membership)
    for path in map(Path, recovery):
        table = _read(path, AUROC_COLUMNS, AUROC_K)
        scorers = list(dict.fromkeys(table["scorer"].astype(str))) if "scorer" in table else [None]
        if main_scorer in scorers:  # the main scorer first, then every other scorer of the experiment
            scorers = [main_scorer] + [s for s in scorers if s != main_scorer]
        lines += [recovery_finding(path, scorer) for scorer in scorers]
        rows = _main_rows(table, main_scorer)
        every_k = path.with_name("recovery.csv")
        k = truth_size_k(_read(every_k, CURVE_COLUMNS, CURVE_K)) if every_k.is_file() else None
        if len(rows) and k is not None:
            at_k[str(rows["experiment"].iloc[0])] = k
    lines += [line for line in (hypotheses_finding(Path(p), main_scorer) for p in recovery) if line]
    for path in map(Path, stability):
        table = _read(path, STABILITY_COLUMNS, STABILITY_K, allow_empty=True)
        experiment = str(table["experiment"].iloc[0]) if len(table) else ""
        lines.append(stability_finding(path, at_k.get(experiment), main_scorer))
    lines += [mean_ablation_finding(Path(p), eval_sets, main_scorer) for p in mean_ablation]
    return [f"- {line}" for line in lines[:MAX_FINDINGS]]


def findings_section(lines: Sequence[str]) -> list[str]:
    """The summary's opening section (Markdown lines), or nothing when the run has no testbed."""
    if not lines:
        return []
    return [
        "## What this run shows",
        "",
        "The testbed's models have a known right answer (docs/embedded_default.md); every number below is read "
        "from the table named after it.",
        "",
        *lines,
        "",
    ]


#: the most lines the end of a run prints (issue 35)
END_LINES = 25


def summary_findings(summary: str | Path) -> list[str]:
    """The finding lines of a ``summary.md`` (the bullets of its "What this run shows"), Markdown bold removed;
    [] when it has none."""
    text = Path(summary).read_text() if Path(summary).is_file() else ""
    if "## What this run shows" not in text:
        return []
    block = text.split("## What this run shows", 1)[1].split("\n## ", 1)[0]
    return [line.replace("**", "") for line in block.splitlines() if line.startswith("- ")]


def end_message(results: str | Path) -> list[str]:
    """What the terminal shows when a run ends (at most :data:`END_LINES` lines): the path of ``summary.md`` and of
    the explorer, the findings block (:func:`summary_findings`) and one line of warning counts by kind from the run's
    one list (``warnings.json``, :func:`certified_circuits.reports.flags.counts_line`).

    Args:
        results: the results folder.

    Returns:
        The lines.
    """
    from certified_circuits.reports.flags import counts_line, read_flags

    results = Path(results)
    summary, explorer, warnings = results / "summary.md", results / "explorer" / "index.html", results / "warnings.json"
    lines = ["", "=" * 40 + " certified-circuits: done " + "=" * 40]
    lines.append(f"Summary:  {summary}" + ("" if summary.is_file() else " (not written by this run)"))
    lines.append(f"Explorer: {explorer}" + (" (open it in a browser)" if explorer.is_file() else " (not written by this run)"))
    found = summary_findings(summary)
    if found:
        lines += ["What this run shows:", *found[:MAX_FINDINGS]]
    if warnings.is_file():
        lines.append(counts_line(read_flags(warnings)) + " (each with its places and fix: summary.md, the explorer)")
    return lines[:END_LINES]
