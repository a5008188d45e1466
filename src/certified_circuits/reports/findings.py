""" "What this run shows": the findings that open ``summary.md``, computed from the testbed's result tables.

The testbed (docs/embedded_default.md) is where a circuit has a known right answer: the planted class circuits of
the world model and the verified induction circuit of the language model. Its tables say what a certificate buys,
so the summary leads with them, each finding one line of numbers read from a table (never template prose that
could contradict it), and the table it comes from:

- per experiment, one short table (issue 50): the circuits at the truth's size (``testbed/truth_size.csv``: the
  baseline keeps exactly ``|T|`` components; certified IN, IN + abstain and majority vote each beside the baseline's
  circuit of their own size, so that no method wins by being smaller), under it one line with the truth and its
  causal check (``ground_truth/<experiment>.json``) and the stability at that size;
- then at most :data:`MAX_FINDINGS` lines of prose: recovery of the truth per method over the K grid (AUROC,
  ``testbed/recovery_auroc.csv``; at the K chosen on held-out data only where that K is not the whole model);
- vision only: balanced accuracy under mean ablation at the K chosen on held-out images
  (``tables/<experiment>/mean_ablation/selected_balanced_raw.csv``), the evaluation a class-biased circuit cannot
  win (zero ablation's cACC rewards it; it stays as the paper's table with its false-positive rate beside it).

A finding never cites a degenerate number as if it meant something: an empty circuit is said to be empty, a truth
that failed its check is said to have failed, and a number that cannot tell methods apart (a K of 100% chosen for
every method, p = 1 by construction, two perfect scores) is not shown: its flag stays in the warning list
(:mod:`certified_circuits.reports.flags`). The hypotheses tests are not on this page: one run's concepts and settings
share a model, so they are not independent pairs; the tests over model seeds are ``experiments/fair_testbed.py``'s
(docs/fair_testbed.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.recovery import nearest_k
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
    "truth_size_block",
]

#: at most this many lines of prose follow the tables that open the summary (a person reads them in a minute)
MAX_FINDINGS = 5
#: the recovery methods, in the order a finding names them, with their words
METHOD_WORDS = {
    "baseline": "baseline",
    "certified_in": "certified in",
    "certified_in_abstain": "certified in + abstain",
}


#: said in the same line as a number read at a selected K of 100% (flags.is_full_model; the full-model-k flag)
FULL_MODEL_CAVEAT = ("K 100% for {who} is the whole model: these numbers compare the full model with itself and "
                     "cannot tell methods apart; read the AUROC and the truth's size instead")


def _k_percent(value: float) -> str:
    """A K share as a whole percentage with its sign (``0.1 -> '10%'``); :func:`certified_circuits.reports.tables.pct`
    is the tables' one-decimal number without it."""
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
#: the K columns that hold an effective K (the share a circuit keeps), 0 for an empty circuit
EFFECTIVE_K = ("baseline_k", "certified_k")
#: what to do when a table a finding reads is refused
READ_FIX = "rerun the report stage that writes it (make reproduce reruns only what is missing)"


def _read(path: Path, columns: Sequence[str], k_columns: Mapping[str, bool], allow_empty: bool = False) -> pd.DataFrame:
    """A table a finding reads (:func:`~certified_circuits.storage.tables.read_csv_table`: UTF-8 CSV with
    ``columns``, no ragged row; concepts as text), each K column of ``k_columns`` a share in (0, 1]
    (:func:`~certified_circuits.storage.tables.parse_k_column`; ``{column: empty cell allowed}``)."""
    table = read_csv_table(path, str(path), columns, READ_FIX, {"concept": str}, allow_empty=allow_empty)
    for column, allow_missing in k_columns.items():  # an effective K (``*_k``) is 0 for an empty circuit
        table = parse_k_column(table, column, str(path), READ_FIX, allow_missing=allow_missing,
                               allow_zero=column in EFFECTIVE_K)
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


def _point(part: pd.DataFrame) -> str:
    empty = int(part["empty_circuit"].astype(bool).sum()) if "empty_circuit" in part else 0
    text = f"{_num(part['precision'].mean())} / {_num(part['recall'].mean())}"
    return text + (f" ({empty} of {len(part)} empty)" if empty else "")


def recovery_finding(path: Path, scorer: str | None = None) -> str:
    """One line: how each method recovers the truth over the K grid (AUROC: no size or selection involved), then
    precision / recall at each method's held-out-selected K unless that K is the whole model for some method (it
    would compare the full model with itself: the full-model-k flag says so in the warning list). The circuits at
    the truth's size are :func:`truth_size_block`'s table.

    Args:
        path: ``recovery_auroc.csv`` of ``report-recovery``.
        scorer: the scorer to report (vision's main scorer); default the table's first.

    Returns:
        ``"world recovery of the truth over the K grid (relevance; mean over 10 concepts): AUROC baseline 0.53,
        certified in 0.49, ...; at the K chosen on id_test (...): ..."``, or "" when every method has the same AUROC
        and no selected K can be shown (nothing tells the methods apart); precision is averaged over the non-empty
        circuits, the empty ones are counted.
    """
    table = _read(path, (*AUROC_COLUMNS, "k_source"), AUROC_K)  # where each K came from, named in the line
    rows = _main_rows(table, scorer)
    if rows.empty:
        return f"{path}: no recovery row at a selected setting."
    experiment, used = rows["experiment"].iloc[0], rows["scorer"].iloc[0]
    methods = [(m, w) for m, w in METHOD_WORDS.items() if (rows["method"] == m).any()]
    means = {m: rows[rows.method == m]["auroc"].mean() for m, _ in methods}
    areas = ", ".join(f"{w} {_num(means[m], 3)}" for m, w in methods)
    line = (f"**{experiment}** recovery of the truth over the K grid ({used}; mean over {rows['concept'].nunique()} "
            f"concepts): AUROC {areas}")
    source = sorted(set(rows["k_source"].dropna().astype(str)) - {""})
    full = [w for m, w in methods if rows.loc[rows.method == m, "k_target"].map(is_full_model).all()]
    if source and not full:
        picked = ", ".join(f"{w} {_num(rows[rows.method == m]['k_target'].mean())}" for m, w in methods)
        line += f"; at the K {', '.join(source)} ({picked}): " + ", ".join(
            f"{w} {_point(rows[rows.method == m])}" for m, w in methods
        )
    elif len(means) > 1 and len({round(float(v), 3) for v in means.values()}) == 1:
        return ""  # one AUROC for every method and no selected K to show: nothing discriminates
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
        k: the K to report besides the range (the truth's size:
            :func:`certified_circuits.analysis.recovery.truth_size_k`); the grid's nearest K is used.
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


def mean_ablation_finding(path: Path, eval_sets: Sequence[str], scorer: str | None = None) -> str:
    """One line: balanced accuracy under mean ablation at the K chosen on held-out images, per method.

    Args:
        path: ``mean_ablation/selected_balanced_raw.csv`` of ``report-sufficiency --ablation mean --select-on``.
        eval_sets: the eval sets to name (the selection set itself is not in the table).
        scorer: the scorer to report; default the table's first.

    Returns:
        ``"world, mean ablation, relevance, K chosen on id_test: balanced accuracy on context_shift: full 0.80,
        baseline 0.78 (K 10%), certified 0.77 (K 8%), p 0.4; ..."``, or "" when both methods' K is 100% (the whole
        model against itself: the full-model-k flag says so in the warning list).
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
            f"{eval_set}: full {_num(r['full'])}, baseline {_num(r['baseline'])} (K {_k_percent(r['baseline_k'])}), "
            f"certified {_num(r['certified'])} (K {_k_percent(r['certified_k'])})"
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
    if full == {"baseline", "certified"}:  # the full model against itself, p = 1 by construction: not shown
        return ""
    if full:
        line += f" ({FULL_MODEL_CAVEAT.format(who=', '.join(sorted(full)))})"
    return line + " (`mean_ablation/selected_balanced.md`)."


#: the truth-size table's rows: method -> words
TRUTH_SIZE_WORDS = {"baseline": "baseline (top \\|T\\| of the full-data ranking)", "certified_in": "certified IN",
                    "certified_in_abstain": "certified IN + abstain", "majority": "majority vote"}
TRUTH_SIZE_COLUMNS = ("experiment", "concept", "scorer", "setting", "method", "size", "precision", "recall",
                      "baseline_precision", "baseline_recall", "n_true", "n_grey", "resamples",
                      "baseline_jaccard_mean", "baseline_change_share", "certified_change_share",
                      "certified_flip_share")  # fmt: skip


def _words_setting(setting: str) -> str:
    """``p0.95_n0100_n1000_s0/t0.9_a0.001_bonferroni`` -> ``p_del 0.95, tau 0.9``."""
    votes, _, decision = str(setting).partition("/")
    p_del = votes.split("_", 1)[0].removeprefix("p")
    tau = decision.split("_", 1)[0].removeprefix("t")
    return f"p_del {p_del}, tau {tau}" if p_del and tau else str(setting)


def truth_size_block(path: Path, ground_truth: Path | None, scorer: str | None = None) -> list[str]:
    """One experiment's table at the truth's size (issue 50), mean over concepts, and one line under it.

    Rows: the baseline at exactly ``|T|`` components, then certified IN, IN + abstain and majority vote, each with
    the baseline's circuit of its own size beside it (``testbed/truth_size.csv``, the stability stage's second
    table: analysis/size_matched.py). A row where both precisions are 1 is not shown (two perfect scores tell nothing
    apart: issue 50); the line under the table names it. That line: the truth (its size, grey components, the causal
    check of ``ground_truth``) and the stability at that size between bootstrap resamples.

    Args:
        path: ``testbed/truth_size.csv`` of ``report-stability --truth-size``.
        ground_truth: the experiment's ground-truth JSON (None: the line names no check).
        scorer: the scorer to report (vision's main scorer); default the table's first.

    Returns:
        Markdown lines: a heading line, the table, a blank line, a ``- `` line.
    """
    table = _read(path, TRUTH_SIZE_COLUMNS, {}, allow_empty=True)
    if table.empty:
        return []
    used = scorer if scorer is not None and (table["scorer"] == scorer).any() else table["scorer"].iloc[0]
    rows = table[table["scorer"] == used]
    experiment, n_concepts = str(rows["experiment"].iloc[0]), rows["concept"].nunique()
    settings = list(dict.fromkeys(rows["setting"]))
    out = [f"**{experiment}** at the truth's size ({used}; mean over {n_concepts} concept"
           f"{'s' if n_concepts > 1 else ''}; `testbed/{Path(path).name}`):", "",
           "| circuit | setting | size | precision | recall | the baseline's circuit of that size: precision / "
           "recall |", "|---|---|---:|---:|---:|---:|"]
    blind: list[str] = []  # circuits whose precision and the baseline's at their size are both 1
    for method, words in TRUTH_SIZE_WORDS.items():
        for setting in settings if method != "baseline" else settings[:1]:
            part = rows[(rows["method"] == method) & (rows["setting"] == setting)]
            if part.empty:
                continue
            empty = int(part["precision"].isna().sum())
            precision, base = part["precision"].mean(), part["baseline_precision"].mean()
            shown_setting = _words_setting(setting) if method != "baseline" else "(any)"
            if method != "baseline" and np.isclose(precision, 1.0) and np.isclose(base, 1.0):
                blind.append(f"{words} ({shown_setting}, {_num(part['size'].mean(), 1)} components)")
                continue
            beside = "" if method == "baseline" else f"{_num(base)} / {_num(part['baseline_recall'].mean())}"
            cells = (f"{_num(part['size'].mean(), 1)} | {_num(precision)}"
                     f"{f' ({empty} empty)' if empty else ''} | {_num(part['recall'].mean())} | {beside}")
            out.append(f"| {words} | {shown_setting} | {cells} |")
    first = rows[rows["setting"] == settings[0]]
    line = (f"- **{experiment}**: the truth has {_num(first['n_true'].mean(), 0)} components per concept "
            f"({int(first['n_grey'].max())} grey at most, neither hit nor miss)")
    if ground_truth is not None:
        from certified_circuits.analysis.recovery import read_ground_truth

        truth = read_ground_truth(ground_truth)
        passed = sum(truth.verified(c) for c in truth.concepts)
        line += f"; its causal check passed for {passed} of {len(truth.concepts)} concepts (`{Path(ground_truth).name}`)"
    stable = first.groupby("concept").first()
    line += (f"; between {int(stable['resamples'].iloc[0])} bootstrap resamples at this size "
             f"({_words_setting(settings[0])}), the baseline's Jaccard to its full-data circuit is "
             f"{_num(stable['baseline_jaccard_mean'].mean())}, {100 * stable['baseline_change_share'].mean():.1f}% "
             f"of baseline memberships change, {100 * stable['certified_change_share'].mean():.1f}% of certified "
             f"labels and {100 * stable['certified_flip_share'].mean():.2f}% flip in<->out.")
    if blind:
        line += (f" Not shown: {'; '.join(blind)}: precision 1.00 and so is the baseline's circuit of that size, "
                 "which tells the methods nothing apart.")
    return [*out, "", line]


def findings(
    ground_truths: Sequence[Path],
    recovery: Sequence[Path],
    stability: Sequence[Path],
    mean_ablation: Sequence[Path] = (),
    main_scorer: str | None = None,
    eval_sets: Sequence[str] = ("id_test", "context_shift", "corruption"),
) -> list[str]:
    """The findings block: per experiment the table at the truth's size (:func:`truth_size_block`, read from the
    ``truth_size.csv`` beside each ``stability.csv``), then at most :data:`MAX_FINDINGS` lines of prose.

    Args:
        ground_truths: ground-truth JSONs (one per experiment).
        recovery: ``recovery_auroc.csv`` per experiment (the folder's experiment is the table's).
        stability: ``stability.csv`` per experiment (``truth_size.csv`` beside it).
        mean_ablation: ``mean_ablation/selected_balanced_raw.csv`` per vision experiment.
        main_scorer: vision's main scorer (the one recovery and mean ablation report).
        eval_sets: the vision eval sets the mean-ablation line names.

    Returns:
        Markdown lines: tables and ``- `` items (an experiment without a truth-size table gets its truth line).
    """
    from certified_circuits.analysis.recovery import read_ground_truth

    truths = {read_ground_truth(p).experiment: Path(p) for p in ground_truths}
    blocks: list[str] = []
    for path in map(Path, stability):
        at_size = path.with_name("truth_size.csv")
        table = _read(path, STABILITY_COLUMNS, STABILITY_K, allow_empty=True)
        experiment = str(table["experiment"].iloc[0]) if len(table) else ""
        block = truth_size_block(at_size, truths.get(experiment), main_scorer) if at_size.is_file() else []
        if block:
            truths.pop(experiment, None)
            blocks += [*block, ""]
    prose = [truth_finding(p) for p in truths.values()]  # experiments without a table at the truth's size
    for path in map(Path, recovery):
        table = _read(path, AUROC_COLUMNS, AUROC_K)
        scorers = list(dict.fromkeys(table["scorer"].astype(str))) if "scorer" in table else [None]
        if main_scorer in scorers:  # the main scorer only: the others are in the recovery tables
            scorers = [main_scorer]
        prose += [line for line in (recovery_finding(path, s) for s in scorers[:1]) if line]
    # stability over the K grid stays in the Results section's table; the table at the truth's size says it at |T|
    prose += [line for line in (mean_ablation_finding(Path(p), eval_sets, main_scorer) for p in mean_ablation)
              if line]
    return blocks + [f"- {line}" for line in prose[:MAX_FINDINGS]]


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
#: the most finding lines it shows: each experiment's line under its table, then the prose (:data:`MAX_FINDINGS`)
END_FINDINGS = 8


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
        lines += ["What this run shows:", *found[:END_FINDINGS]]
    if warnings.is_file():
        lines.append(counts_line(read_flags(warnings)) + " (each with its places and fix: summary.md, the explorer)")
    return lines[:END_LINES]
