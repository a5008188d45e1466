"""Tables and the figure of the testbed: recovery of known circuits and stability under resampling (issue 34).

``recovery_report``   every (concept, setting) circuit pair scored against the ground truth
                      (:mod:`certified_circuits.analysis.recovery`): ``recovery.csv`` (tidy, one row per method and
                      K), ``recovery_auroc.csv`` (one row per concept, setting and method: AUROC over the K grid,
                      and precision, recall and FPR at the method's K: the K chosen on held-out data in a
                      ``selected_*`` table of ``report-sufficiency --select-on``, else a fixed ``k``),
                      ``recovery_summary.{csv,md,tex}`` (the same, for people, with a mean over concepts) and
                      ``recovery.{png,pdf}`` (TPR against FPR per method, mean over concepts, one panel per
                      scorer and setting).
``stability_report``  the per-concept stability tables (the ``stability`` stage's, computed by
                      :func:`certified_circuits.analysis.stability.concept_stability`) combined: ``stability.csv`` and
                      ``stability_summary.{csv,md,tex}`` (mean over concepts per K; with ``k``, also per concept at
                      that K).

Undefined numbers are shown, not hidden: an empty circuit's precision is NaN (``--`` in Markdown) and its row
says ``empty circuit`` in ``note``; a ground truth whose causal check did not pass is marked ``truth not
verified``. Every function returns its metrics (a flat dict of floats) for MLflow.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from certified_circuits.storage.tables import check_share_column, parse_k_column, read_csv_table, require_columns
from certified_circuits.analysis.recovery import (
    RECOVERY_METHODS,
    SELECTED_METHOD,
    GroundTruth,
    auroc_by_method,
    grey_mask,
    nearest_k,
    read_ground_truth,
    recovery_rows,
    truth_mask,
    truth_size_k,
)
from certified_circuits.core.contracts import setting_columns
from certified_circuits.core.discovery import k_index
from certified_circuits.reports import tables
from certified_circuits.reports.figures import METHOD_COLOR, save_figure
from certified_circuits.reports.paper import read_circuits
from certified_circuits.storage.atomic import write_csv

log = logging.getLogger(__name__)

#: colour and line style of each recovery method in recovery.png (the paper's colours where a method is the same)
RECOVERY_STYLE = {
    "baseline": (METHOD_COLOR["baseline"], "--"),
    "majority": (METHOD_COLOR["majority"], ":"),
    "certified_in": (METHOD_COLOR["certified"], "-"),
    "certified_in_abstain": ("#5aa0d8", "-."),
}
RECOVERY_LABEL = {
    "baseline": "Baseline",
    "majority": "Majority vote",
    "certified_in": "Certified in",
    "certified_in_abstain": "Certified in + abstain",
}
EMPTY_NOTE = "empty circuit: precision undefined"
UNVERIFIED_NOTE = "truth not verified"


# ------------------------------------------------------------------------------------------------ recovery


def selected_k(
    selected: pd.DataFrame, experiment: str, concept: str, scorer: str | None = None
) -> dict[str, tuple[float, str | None, str]]:
    """Each recovery method's K (and setting, when chosen) from a ``selected_*`` table of ``report-sufficiency``.

    The table has one row per row key and test eval set; the K of a method was chosen on ``selected_on`` and is
    the same on every test eval set, so the first row of the experiment (and of the concept, when the table has a
    ``concept`` column: language tasks) is taken.

    Returns:
        ``{method: (k_target, setting or None, source)}`` with ``source`` like ``"selected on val"``.

    Raises:
        ValueError: a column is missing, or no row is of this experiment (and concept).
    """
    require_columns(selected, [f"{m}_k_target" for m in set(SELECTED_METHOD.values())], "the selected table")
    rows = selected
    if "experiment" in rows.columns:
        rows = rows[rows["experiment"].astype(str) == experiment]
    if "concept" in rows.columns:
        rows = rows[rows["concept"].astype(str) == concept]
    if scorer is not None and "scorer" in rows.columns:  # vision: one K per scorer (report-sufficiency --by scorer)
        rows = rows[rows["scorer"].astype(str) == scorer]
    if rows.empty:
        raise ValueError(f"the selected table has no row of experiment {experiment!r}"
                         + (f" and concept {concept!r}" if "concept" in selected.columns else "")
                         + ": pass the selected_*_raw.csv of this experiment's report-sufficiency --select-on")  # fmt: skip
    row = rows.iloc[0]
    source = tables.selection_name(row)
    return {
        method: (float(row[f"{column}_k_target"]),
                 str(row[f"{column}_setting"]) if f"{column}_setting" in rows.columns else None, source)
        for method, column in SELECTED_METHOD.items()
    }  # fmt: skip


def _cell(table: pd.DataFrame, column: str, index: int) -> Any:
    """A cell as a plain Python value, for messages (``3``, not ``np.int64(3)``)."""
    value = table[column].iloc[index]
    return value.item() if hasattr(value, "item") else value


SELECTED_FIX = "pass the selected_*_raw.csv that report-sufficiency --select-on wrote, or --k instead"


def read_selected_table(path: str | Path) -> pd.DataFrame:
    """The ``--selected`` table of report-recovery (a ``selected_*_raw.csv`` of report-sufficiency), checked to be
    one: readable CSV with rows and a ``<method>_k_target`` column per method, every K a fraction in (0, 1].

    Args:
        path: the CSV.

    Returns:
        The table.

    Raises:
        ValueError: naming the file (and column and row), what is wrong and the fix.
    """
    where = f"{path} (--selected)"
    columns = [f"{m}_k_target" for m in dict.fromkeys(SELECTED_METHOD.values())]
    table = read_csv_table(path, where, columns, SELECTED_FIX)
    for column in columns:  # a word where a K belongs is refused; an empty cell stays allowed (no K)
        table = parse_k_column(table, column, where, SELECTED_FIX, allow_missing=True)
    return table


def recovery_tables(truth: GroundTruth, circuits: Sequence[tuple[Path, Path]], experiment: str,
                    selected: pd.DataFrame | None = None, k: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """``recovery`` (one row per circuit pair, method and K) and ``auroc`` (one per circuit pair and method).

    Args:
        truth: the experiment's ground truth.
        circuits: ``(votes, certificates)`` paths; the concept is the votes' ``concept`` attribute.
        experiment: the experiment's name (checked against the truth's).
        selected: a ``selected_*`` table: each method is read at its selected K (:func:`selected_k`).
        k: otherwise a fixed K of the grid for every method (None: AUROC only).

    Returns:
        The two tidy tables (module docstring of :mod:`certified_circuits.analysis.recovery` for the columns).

    Raises:
        ValueError: the truth is of another experiment, a concept is unknown to it, names do not match, K is not
            in a grid.
    """
    if truth.experiment != experiment:
        raise ValueError(f"{truth.path} is the ground truth of experiment {truth.experiment!r}, not {experiment!r}: "
                         "pass this experiment's ground truth, or --experiment " + truth.experiment)  # fmt: skip
    recovery, auroc = [], []
    for (votes_path, _), (votes, certificates) in zip(circuits, read_circuits(circuits)):
        concept = str(votes.attrs.get("concept", ""))
        if not concept:
            raise ValueError(f"{votes_path} records no concept: rerun the votes stage (it records the attribution "
                             "file's concept)")  # fmt: skip
        mask = truth_mask(truth, concept, votes.names, where=f"the votes {votes_path}")
        grey = grey_mask(truth, concept, votes.names)  # neither hit nor miss (issue 50)
        labels = {"experiment": experiment, "concept": concept, **setting_columns(votes, certificates),
                  "n_true": int(mask.sum()), "n_components": int(mask.size), "n_grey": int(grey.sum()),
                  "truth_verified": truth.verified(concept)}  # fmt: skip
        rows = recovery_rows(votes, certificates, mask, labels, exclude=grey)
        recovery.extend(rows)
        picks = selected_k(selected, experiment, concept, labels.get("scorer")) if selected is not None else None
        areas = auroc_by_method(votes, certificates, mask, exclude=grey)
        for method in RECOVERY_METHODS:
            row = {**labels, "method": method, "auroc": areas[method], "n_k": int(len(votes.k_grid))}
            at, pick_setting, source = picks[method] if picks else (k, None, "--k" if k is not None else "")
            row["k_source"], row["at_selected_setting"] = source, pick_setting in (None, labels["setting"])
            point = {}
            if at is not None:
                index = k_index(votes.k_grid, at, f"{votes_path} ({method}, {source})")
                point = next(r for r in rows if r["method"] == method and r["k_target"] == float(votes.k_grid[index]))
            for column in ("k_target", "tp", "fp", "fn", "tn", "precision", "recall", "fpr", "size"):
                row[column] = point.get(column, np.nan)
            row["empty_circuit"] = bool(point.get("empty_circuit", False))
            auroc.append(row)
    return pd.DataFrame(recovery), pd.DataFrame(auroc)


def _note(row: pd.Series) -> str:
    notes = [EMPTY_NOTE] if row.get("empty_circuit", False) else []
    if not row.get("truth_verified", True):
        notes.append(UNVERIFIED_NOTE)
    return "; ".join(notes)


def recovery_summary(auroc: pd.DataFrame) -> pd.DataFrame:
    """The people's table: per concept (and setting, when several) and method, AUROC and the point at the chosen
    K, then a ``mean`` row per method (precision over the non-empty circuits; ``note`` counts the empty ones).
    Rows of a setting that was not the selected one for that method are left out. Without a K (no ``--selected``
    and no ``--k``: AUROC only) the point's columns, empty, are left out too."""
    shown = auroc[auroc["at_selected_setting"].astype(bool)].copy()
    shown["note"] = [_note(row) for _, row in shown.iterrows()]
    several = bool(shown["setting"].nunique() > 1)
    keys = ["concept", "scorer"] + (["setting"] if several else [])
    point = ["k_target", "precision", "recall", "fpr", "size"] if shown["k_target"].notna().any() else []
    columns = [*keys, "method", "auroc", *point, "note"]
    table = shown[columns]
    means = []
    for key, part in shown.groupby([*keys[1:], "method"], sort=False):
        empty = int(part["empty_circuit"].sum())
        means.append({"concept": "mean", **dict(zip([*keys[1:], "method"], key)), "auroc": part["auroc"].mean(),
                      **{column: part[column].mean() for column in point},
                      "note": f"{empty} empty circuit(s) left out of precision" if empty else ""})  # fmt: skip
    return pd.concat([table, pd.DataFrame(means, columns=columns)], ignore_index=True)


def plot_recovery(recovery: pd.DataFrame, auroc: pd.DataFrame, stem: Path, title: str = "") -> list[Path]:
    """TPR against FPR per method, mean over concepts at each K, with (0, 0) and (1, 1); one panel per scorer and
    setting; the legend gives each method's mean AUROC (over concepts). Writes ``stem.png`` and ``stem.pdf``."""
    require_columns(recovery, ["scorer", "setting", "method", "k_target", "fpr", "recall"], "recovery table")
    panels = list(recovery.groupby(["scorer", "setting"], sort=False).groups)
    fig = Figure(figsize=(4.2 * len(panels), 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (scorer, setting) in zip(axes, panels):
        part = recovery[(recovery.scorer == scorer) & (recovery.setting == setting)]
        areas = auroc[(auroc.scorer == scorer) & (auroc.setting == setting)].groupby("method")["auroc"].mean()
        mean = part.groupby(["method", "k_target"], sort=False)[["fpr", "recall"]].mean().reset_index()
        for method in RECOVERY_METHODS:
            points = mean[mean.method == method].sort_values(["fpr", "recall"])
            if points.empty:
                continue
            x = np.concatenate([[0.0], points["fpr"].to_numpy(), [1.0]])
            y = np.concatenate([[0.0], points["recall"].to_numpy(), [1.0]])
            color, style = RECOVERY_STYLE[method]
            ax.plot(x, y, style, color=color, marker="o", markersize=3,
                    label=f"{RECOVERY_LABEL[method]} (AUROC {areas.get(method, np.nan):.3f})")  # fmt: skip
        ax.plot([0, 1], [0, 1], color="#bbbbbb", linewidth=0.8, zorder=0)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("false positive rate")
        ax.set_title(f"{scorer}\n{setting}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("true positive rate (recall)")
    fig.suptitle(title or "Recovery of the planted circuit (mean over concepts)", fontsize=10)
    return save_figure(fig, stem)


def recovery_report(ground_truth: Path, circuits: Sequence[tuple[Path, Path]], experiment: str, out_dir: Path,
                    selected: Path | None = None, k: float | None = None) -> dict[str, float]:  # fmt: skip
    """Write the recovery tables and figure of one experiment (module docstring) and return its metrics.

    Returns:
        ``recovery_auroc_<method>`` (mean over concepts and settings), ``recovery_precision_<method>`` and
        ``recovery_recall_<method>`` at the chosen K (mean over the circuits where defined),
        ``recovery_empty_<method>`` (empty circuits at the chosen K) and ``recovery_unverified`` (concepts whose
        truth did not pass its check).
    """
    truth = read_ground_truth(ground_truth)
    table = read_selected_table(selected) if selected is not None else None
    recovery, auroc = recovery_tables(truth, circuits, experiment, table, k)
    out_dir = Path(out_dir)
    write_csv(out_dir / "recovery.csv", recovery)
    write_csv(out_dir / "recovery_auroc.csv", auroc)
    summary = recovery_summary(auroc)
    source = ", ".join(sorted(set(auroc["k_source"]) - {""})) or "no K given: AUROC only"
    tables.write_table(summary, out_dir / "recovery_summary", caption=(
        f"Recovery of the planted circuits of {experiment} ({truth.how or 'ground truth'}): AUROC over the K grid "
        f"(points (FPR, TPR) per K plus (0,0) and (1,1), trapezoid, as InterpBench and MIB), and precision, recall "
        f"and FPR at each method's K ({source}). Precision of an empty circuit is undefined (--)."))  # fmt: skip
    plot_recovery(recovery, auroc, out_dir / "recovery", title=f"{experiment}: recovery of the planted circuit")
    chosen = auroc[auroc["at_selected_setting"]]
    metrics: dict[str, float] = {
        "recovery_unverified": float((~auroc.drop_duplicates("concept")["truth_verified"]).sum())
    }
    for method, part in chosen.groupby("method"):
        metrics[f"recovery_auroc_{method}"] = float(part["auroc"].mean())
        if part["k_target"].notna().any():
            metrics[f"recovery_precision_{method}"] = float(part["precision"].mean())
            metrics[f"recovery_recall_{method}"] = float(part["recall"].mean())
            metrics[f"recovery_empty_{method}"] = float(part["empty_circuit"].sum())
    log.info("report-recovery: %d circuits of %d concepts -> %s", len(circuits), auroc["concept"].nunique(), out_dir)
    return metrics


# ------------------------------------------------------------------------------------------------ stability


#: the stability columns of the summary table, with their display names
STABILITY_SHOWN = {
    "baseline_jaccard_mean": "J(baseline_b, baseline)",
    "baseline_jaccard_std": "sd",
    "baseline_pairwise_jaccard": "J baseline pairs",
    "certified_in_jaccard": "J certified-in pairs",
    "certified_in_both_empty_share": "both empty",
    "baseline_change_share": "baseline changed",
    "certified_change_share": "label changed",
    "certified_flip_share": "in<->out flips",
    "abstain_share": "abstain",
}


#: the columns that name a row of a stability table (one per concept, scorer, setting and K)
STABILITY_KEYS = ("experiment", "concept", "scorer", "setting", "k_target")
STABILITY_FIX = "pass the CSV the stability stage wrote (one per concept and setting), or rerun that stage"


def read_stability_table(path: str | Path, option: str = "--inputs",
                         columns: Sequence[str] = tuple(STABILITY_SHOWN)) -> pd.DataFrame:
    """One stability CSV (the ``stability`` stage's, or ``stability.csv`` of report-stability), checked to be one:
    readable UTF-8 CSV with rows, every key of :data:`STABILITY_KEYS` present and filled (a row without its scorer
    would drop out of the summary's mean), ``k_target`` in (0, 1] and every shown column numeric.

    Args:
        path: the CSV.
        option: the option that gave it, for messages.
        columns: the numeric columns the report reads (default the summary's, :data:`STABILITY_SHOWN`).

    Returns:
        The table (``concept``, ``scorer`` and ``setting`` read as text).

    Raises:
        ValueError: naming the file (and column or row), what is wrong and the fix.
    """
    where = f"{path} ({option})"
    table = read_csv_table(path, where, [*STABILITY_KEYS, *columns], STABILITY_FIX,
                           dtype={"concept": str, "scorer": str, "setting": str, "experiment": str})
    table = filled_and_numeric(table, where, STABILITY_KEYS, columns, STABILITY_FIX)
    return parse_k_column(table, "k_target", where, STABILITY_FIX)


def filled_and_numeric(table: pd.DataFrame, where: str, keys: Sequence[str], numbers: Sequence[str],
                       fix: str) -> pd.DataFrame:
    """``table`` with every ``keys`` cell filled (a row without its key would drop out of a mean) and every
    ``numbers`` column numeric (an empty cell stays NaN); the first bad cell is refused by row and column."""
    for column in keys:
        empty = table.index[table[column].isna()]
        if len(empty):
            raise ValueError(f"{where}: row {int(empty[0]) + 2} has no {column!r} ({len(empty)} rows lack it): every "
                             f"row is of one {', '.join(keys)}; {fix}")
    for column in numbers:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = table.index[values.isna() & table[column].notna()]
        if len(bad):
            raise ValueError(f"{where}: column {column!r} holds {_cell(table, column, bad[0])!r} (row {int(bad[0]) + 2}),"
                             f" not a number; {fix}")
        table[column] = values
    return table


def check_ranges(table: pd.DataFrame, where: str, shares: Sequence[str], counts: Sequence[str], fix: str, *,
                 empty: Sequence[str] = (), empty_why: str = "it has none there") -> pd.DataFrame:
    """Every ``shares`` cell a number in [0, 1] and every ``counts`` cell an integer >= 0 (finite), after
    :func:`filled_and_numeric`; an empty cell (NaN) only in the ``empty`` columns (the columns whose producer
    documents one). The first bad cell is refused by column and row (the header is row 1)."""
    for column in shares:
        check_share_column(table[column], column, where, fix, allow_empty=column in empty, empty_why=empty_why)
    for column in counts:
        values = table[column].to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        bad = ~missing & ~(np.isfinite(values) & (values >= 0) & (np.floor(values) == values))
        if column not in empty:
            bad |= missing
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            shown = "an empty cell" if missing[index] else repr(_cell(table, column, index))
            also = f" (or empty: {empty_why})" if column in empty else ""
            raise ValueError(f"{where}: column {column!r} holds {shown} (row {index + 2}), not a count (a whole "
                             f"number >= 0){also}; {fix}")
    return table


def _check_distinct(tables: Sequence[pd.DataFrame], inputs: Sequence[Path]) -> None:
    """Refuse one (experiment, concept, scorer, setting, K) row in two inputs (a table given twice would weigh
    its concept twice in the mean)."""
    seen: dict[tuple, Path] = {}
    for path, table in zip(inputs, tables):
        for key in set(map(tuple, table[list(STABILITY_KEYS)].astype(str).to_numpy())):
            if key in seen:
                raise ValueError(f"{seen[key]} and {path} (--inputs) both hold {dict(zip(STABILITY_KEYS, key))}: each "
                                 "concept, scorer, setting and K is counted once; pass each table once")
            seen[key] = path


def stability_report(inputs: Sequence[Path], out_dir: Path, k: float | None = None) -> dict[str, float]:
    """Combine per-concept stability tables: ``stability.csv`` and ``stability_summary.{csv,md,tex}``.

    The summary holds the mean over concepts per experiment, scorer, setting and K; with ``k`` (a K of the grid)
    the per-concept rows at that K follow.

    Returns:
        ``stability_<column>`` for the shown columns: the mean over concepts and K (and ``stability_concepts``).
    """
    frames = [read_stability_table(path) for path in inputs]
    _check_distinct(frames, inputs)
    table = pd.concat(frames, ignore_index=True)
    out_dir = Path(out_dir)
    write_csv(out_dir / "stability.csv", table)
    keys = ["experiment", "scorer", "setting", "k_target"]
    extra = [c for c in table.columns if c.endswith(("_precision_mean", "_recall_mean"))]
    columns = [*STABILITY_SHOWN, *extra]
    mean = table.groupby(keys, sort=False)[columns].mean().reset_index()
    mean.insert(1, "concept", "mean of " + table.groupby(keys, sort=False)["concept"].nunique().astype(str).to_numpy())
    parts = [mean]
    if k is not None:
        at = table[np.isclose(table["k_target"], k)]
        if at.empty:
            raise ValueError(f"K = {k} is in no stability table (their K: {sorted(set(table['k_target']))}): "
                             "pass a K of the grid")  # fmt: skip
        parts.append(at[["experiment", "concept", "scorer", "setting", "k_target", *columns]])
    summary = pd.concat(parts, ignore_index=True).rename(columns=STABILITY_SHOWN)
    resamples = ", ".join(str(v) for v in sorted(set(table["resamples"]))) if "resamples" in table else "?"
    tables.write_table(summary, out_dir / "stability_summary", caption=(
        f"Stability under {resamples} bootstrap resamples of each concept's dataset (Wu, Tonin and Cevher 2026). "
        "J: Jaccard; 'baseline changed', 'label changed' (in/out/abstain) and 'in<->out flips': mean over resample "
        "pairs of the share of components that differ. Certified-in Jaccard is over pairs not both empty "
        "('both empty': their share)."))  # fmt: skip
    metrics = {f"stability_{c}": float(table[c].mean()) for c in STABILITY_SHOWN}
    metrics["stability_concepts"] = float(table["concept"].nunique())
    log.info("report-stability: %d tables -> %s", len(frames), out_dir)
    return metrics


#: what identifies one row of a truth-size table, and the numbers the report reads (analysis/size_matched.py)
TRUTH_SIZE_KEYS = ("experiment", "concept", "scorer", "setting", "method")
TRUTH_SIZE_NUMBERS = ("size", "precision", "recall", "baseline_precision", "baseline_recall", "n_true", "n_grey",
                      "baseline_jaccard_mean", "baseline_change_share", "certified_change_share",
                      "certified_flip_share", "abstain_share")  # fmt: skip
#: its shares (in [0, 1]) and counts (integers >= 0); the size-matched numbers are empty where the circuit is empty
TRUTH_SIZE_SHARES = ("precision", "recall", "baseline_precision", "baseline_recall", "baseline_jaccard_mean",
                     "baseline_change_share", "certified_change_share", "certified_flip_share", "abstain_share")
TRUTH_SIZE_COUNTS = ("size", "n_true", "n_grey")
TRUTH_SIZE_EMPTY = ("precision", "recall", "baseline_precision", "baseline_recall")
TRUTH_SIZE_FIX = "rerun the stability stage with --out-truth-size (make reproduce reruns what is missing)"


def concat_once(frames: Sequence[pd.DataFrame], keys: Sequence[str], kind: str) -> pd.DataFrame:
    """The per-concept tables as one, refusing a concept given twice (its ``keys`` in two tables).

    Raises:
        ValueError: naming the row's keys and the ``kind`` of table.
    """
    table = pd.concat(frames, ignore_index=True)
    duplicated = table.duplicated(subset=list(keys))
    if duplicated.any():
        row = table[duplicated].iloc[0]
        raise ValueError(f"{', '.join(str(row[k]) for k in keys)} is in two {kind} tables: pass each concept's table "
                         "once")
    return table


def read_truth_size_table(path: str | Path, option: str = "--truth-size") -> pd.DataFrame:
    """One truth-size CSV (the ``stability`` stage's ``--out-truth-size``, or ``truth_size.csv``), checked: UTF-8 CSV
    with rows, every key filled, the numbers numeric (precision may be empty: an empty circuit has none).

    Raises:
        ValueError: naming the file, the column or row, and the fix.
    """
    where = f"{path} ({option})"
    table = read_csv_table(path, where, [*TRUTH_SIZE_KEYS, *TRUTH_SIZE_NUMBERS, "can_certify_in"], TRUTH_SIZE_FIX,
                           dtype={"concept": str, "scorer": str, "setting": str, "experiment": str, "method": str})
    table = filled_and_numeric(table, where, TRUTH_SIZE_KEYS, TRUTH_SIZE_NUMBERS, TRUTH_SIZE_FIX)
    return check_ranges(table, where, TRUTH_SIZE_SHARES, TRUTH_SIZE_COUNTS, TRUTH_SIZE_FIX, empty=TRUTH_SIZE_EMPTY,
                        empty_why="an empty circuit has none")


def truth_size_report(inputs: Sequence[Path], out_dir: Path) -> dict[str, float]:
    """Combine per-concept truth-size tables: ``truth_size.csv`` and ``truth_size_summary.{csv,md,tex}``, the mean
    over concepts per experiment, scorer, setting and method (precision over the concepts whose circuit is not
    empty: ``concepts with a circuit``).

    Returns:
        ``truth_size_<method>_precision`` and ``truth_size_<method>_baseline_precision`` (mean over the table).
    """
    table = concat_once([read_truth_size_table(path) for path in inputs], TRUTH_SIZE_KEYS, "truth-size")
    out_dir = Path(out_dir)
    write_csv(out_dir / "truth_size.csv", table)
    keys = ["experiment", "scorer", "setting", "method"]
    grouped = table.groupby(keys, sort=False)
    summary = grouped[["size", "precision", "baseline_precision", "recall", "baseline_recall", "n_true", "n_grey",
                       "baseline_change_share", "certified_change_share", "certified_flip_share"]].mean()
    summary.insert(0, "concepts with a circuit", grouped["precision"].count())
    summary = summary.reset_index().rename(columns={
        "size": "size", "baseline_precision": "baseline's top-size precision", "baseline_recall": "baseline's "
        "top-size recall", "baseline_change_share": "baseline changed", "certified_change_share": "label changed",
        "certified_flip_share": "in<->out flips"})  # fmt: skip
    tables.write_table(summary, out_dir / "truth_size_summary", caption=(
        "Circuits at the truth's size (the base algorithm keeps |T| components, as many per group as the truth), "
        "each compared with the baseline's circuit of its own size on the same data (issue 50); mean over concepts. "
        "Grey components are neither hits nor misses. Stability: the shares of memberships and labels that change "
        "between bootstrap resamples at that size."))  # fmt: skip
    metrics = {}
    for method, part in table.groupby("method", sort=False):
        metrics[f"truth_size_{method}_precision"] = float(part["precision"].mean())
        metrics[f"truth_size_{method}_baseline_precision"] = float(part["baseline_precision"].mean())
    log.info("report-stability: %d truth-size tables -> %s", len(inputs), out_dir)
    return metrics


#: the combined equal-footing table ``report-stability --truth-size-equal`` writes beside ``truth_size.csv`` (the
#: headline reads it there, :func:`join_truth_size_equal`)
TRUTH_SIZE_EQUAL_FILE = "truth_size_equal.csv"
#: what identifies one row of an equal-footing table, and the numbers its readers use (analysis/equal_footing.py)
TRUTH_SIZE_EQUAL_KEYS = ("experiment", "concept", "scorer", "setting", "method")
TRUTH_SIZE_EQUAL_NUMBERS = ("values", "change_share_live", "change_share_all", "flip_share_live", "flip_share_all",
                            "baseline_change_share_live", "baseline_change_share_all", "abstain_share_live",
                            "abstain_share_all", "size_d", "abstain_d", "in_precision_d", "in_precision_mean",
                            "n_live", "n_components", "n_true", "n_grey", "resamples", "inner_resamples")  # fmt: skip
#: its columns that may be empty (NaN where a number has no meaning: a three-valued row's baseline columns, a
#: two-valued row's flips and abstentions, the live shares without a live component); the rest are filled
TRUTH_SIZE_EQUAL_EMPTY = tuple(c for c in TRUTH_SIZE_EQUAL_NUMBERS if c not in ("values", "n_live", "n_components",
                                                                               "n_true", "n_grey", "resamples",
                                                                               "inner_resamples", "size_d"))
TRUTH_SIZE_EQUAL_FIX = ("rerun the stability stage with --out-truth-size-equal and report-stability with "
                        "--truth-size-equal (make reproduce reruns what is missing)")


def read_truth_size_equal_table(path: str | Path, option: str = "--truth-size-equal",
                                allow_empty: bool = False) -> pd.DataFrame:
    """One equal-footing CSV: a concept's (the ``stability`` stage's ``--out-truth-size-equal``,
    :func:`certified_circuits.cli.testbed.truth_size_tables`) or the combined
    ``truth_size_equal.csv`` (:func:`truth_size_equal_report`), checked: UTF-8 CSV with rows (unless
    ``allow_empty``), every key filled, the numbers numeric (a share may be empty: NaN where it has no meaning, e.g.
    the flips of a two-valued circuit, the live shares without a live component). The one reader of the format.

    Raises:
        ValueError: naming the file, the column or row, and the fix.
    """
    where = f"{path} ({option})"
    table = read_csv_table(path, where, [*TRUTH_SIZE_EQUAL_KEYS, *TRUTH_SIZE_EQUAL_NUMBERS], TRUTH_SIZE_EQUAL_FIX,
                           dtype={"concept": str, "scorer": str, "setting": str, "experiment": str, "method": str},
                           allow_empty=allow_empty)  # fmt: skip
    table = filled_and_numeric(table, where, TRUTH_SIZE_EQUAL_KEYS, TRUTH_SIZE_EQUAL_NUMBERS, TRUTH_SIZE_EQUAL_FIX)
    shares = [c for c in TRUTH_SIZE_EQUAL_NUMBERS if "share" in c or "precision" in c]
    counts = [c for c in TRUTH_SIZE_EQUAL_NUMBERS if c not in shares]
    return check_ranges(table, where, shares, counts, TRUTH_SIZE_EQUAL_FIX, empty=TRUTH_SIZE_EQUAL_EMPTY,
                        empty_why="NaN where the number has no meaning")


def join_truth_size_equal(table: pd.DataFrame, path: str | Path, methods: Sequence[str], columns: Sequence[str],
                          name: Any) -> pd.DataFrame:
    """Truth-size rows (``path``: a ``truth_size.csv``) with the numbers of ``truth_size_equal.csv`` beside it joined
    on by experiment, concept, scorer and setting: ``columns`` of each of ``methods``' rows, as ``name(method,
    column)`` (the headline's, reports/findings.py). The rows as they are where the run wrote no such table.

    Raises:
        ValueError: the equal-footing table is refused (:func:`read_truth_size_equal_table`).
    """
    equal_path = Path(path).with_name(TRUTH_SIZE_EQUAL_FILE)
    if not equal_path.is_file():
        return table
    equal = read_truth_size_equal_table(equal_path, option=f"beside {Path(path).name}", allow_empty=True)
    keys = ["experiment", "concept", "scorer", "setting"]
    wide = equal[equal["method"].isin(methods)].pivot(index=keys, columns="method", values=list(columns))
    wide.columns = [name(method, column) for column, method in wide.columns]  # keys unique: the writer refuses twins
    return table.merge(wide.reset_index(), on=keys, how="left") if len(wide) else table


#: the summary's columns of the equal-footing table: column -> header
TRUTH_SIZE_EQUAL_SHOWN = {"change_share_live": "label changed (live)", "flip_share_live": "in<->out flips (live)",
                          "abstain_share_live": "abstain (live)", "baseline_change_share_live":
                          "baseline's top-size changed (live)", "size_d": "IN on D", "abstain_d": "abstain on D",
                          "in_precision_d": "IN precision on D"}  # fmt: skip


def truth_size_equal_report(inputs: Sequence[Path], out_dir: Path) -> dict[str, float]:
    """Combine per-concept equal-footing tables: ``truth_size_equal.csv`` and ``truth_size_equal_summary.{csv,md,tex}``,
    the mean over concepts per experiment, scorer, setting and method (the certificate, then the comparators that
    abstain as much, then the two-valued circuits beside the baseline's circuit of their size).

    Returns:
        ``truth_size_equal_<method>_change_live`` and, for the three-valued, ``..._flips_live`` (mean over the table).
    """
    from certified_circuits.reports.words import FOOTING_WORDS

    table = concat_once([read_truth_size_equal_table(path) for path in inputs], TRUTH_SIZE_EQUAL_KEYS, "equal-footing")
    out_dir = Path(out_dir)
    write_csv(out_dir / TRUTH_SIZE_EQUAL_FILE, table)
    keys = ["experiment", "scorer", "setting", "method"]
    grouped = table.groupby(keys, sort=False)
    summary = grouped[list(TRUTH_SIZE_EQUAL_SHOWN)].mean()
    summary.insert(0, "concepts", grouped["concept"].nunique())
    summary = summary.reset_index()
    summary["method"] = summary["method"].map(lambda m: FOOTING_WORDS.get(m, m))
    resamples = ", ".join(str(int(v)) for v in sorted(set(table["resamples"])))
    inner = ", ".join(str(int(v)) for v in sorted(set(table["inner_resamples"])))
    tables.write_table(summary.rename(columns=TRUTH_SIZE_EQUAL_SHOWN), out_dir / "truth_size_equal_summary", caption=(
        f"The certificate at the truth's size beside the comparators that abstain as much, on the same {resamples} "
        f"bootstrap resamples (analysis/equal_footing.py): the matched cut (the baseline's ranking cut at the "
        f"certificate's per-group in and abstain counts), the bootstrap interval and consensus ({inner} inner "
        f"resamples each); mean over concepts. Shares over resample pairs, over the live components (a score non-zero "
        f"on some example); the two-valued circuits beside the baseline's top of their per-group sizes. No contested "
        f"set: the workflow has no population."))  # fmt: skip
    metrics = {}
    for method, part in table.groupby("method", sort=False):
        metrics[f"truth_size_equal_{method}_change_live"] = float(part["change_share_live"].mean())
        if (part["values"] == 3).all():
            metrics[f"truth_size_equal_{method}_flips_live"] = float(part["flip_share_live"].mean())
    log.info("report-stability: %d equal-footing tables -> %s", len(inputs), out_dir)
    return metrics


# ------------------------------------------------------------------------------------------------ across model seeds

#: the recovery methods in the across-seeds table, in order
SEED_METHODS = ("baseline", "majority", "certified_in", "certified_in_abstain")
#: the stability columns of the across-seeds table (means over concepts at the truth's size)
SEED_STABILITY = ("baseline_jaccard_mean", "baseline_change_share", "certified_change_share", "certified_flip_share",
                  "certified_in_jaccard", "abstain_share")  # fmt: skip


#: what to do when a recovery table read for its truth's size is refused
RECOVERY_FIX = "pass the recovery.csv that report-recovery wrote (its recovery_auroc.csv beside it)"


def read_recovery_beside(path: Path, option: str) -> pd.DataFrame:
    """``recovery.csv`` beside ``path`` (the K grid and the truth's size of a stability or recovery table), checked:
    readable CSV with rows, ``n_true``, ``n_components`` and ``k_target``, every K a share in (0, 1]
    (:func:`~certified_circuits.storage.tables.parse_k_column`).

    Args:
        path: a table of a ``testbed/`` folder.
        option: how it was given, for messages (``"beside --run 0 s0/stability.csv"``).

    Returns:
        The table.

    Raises:
        ValueError: naming the file (and row and column), what is wrong and the fix.
    """
    every_k = path.with_name("recovery.csv")
    where = f"{every_k} ({option})"
    table = read_csv_table(every_k, where, ["k_target", "n_true", "n_components"], RECOVERY_FIX)
    return parse_k_column(table, "k_target", where, RECOVERY_FIX)


def model_seeds_recovery(runs: dict[str, Sequence[Path]], out_dir: Path, name: str) -> dict[str, float]:
    """Recovery across model-training seeds: per seed and (experiment, scorer, setting, method) the mean over concepts
    of the AUROC and of precision and recall at the truth's size (from ``recovery.csv`` of each run, the K nearest
    n_true / n_components), then mean, min and max over seeds, and in how many seeds each method's AUROC is above the
    baseline's. Written as ``<name>_model_seeds_raw.csv`` and a display table.

    Args:
        runs: seed label -> that run's ``recovery.csv`` (its ``recovery_auroc.csv`` is read beside it).
        out_dir: where the tables go.
        name: output stem, e.g. ``world_recovery``.

    Returns:
        ``<name>_auroc_<method>``: the mean AUROC over seeds.
    """
    rows = []
    for seed, paths in runs.items():
        for path in map(Path, paths):
            where = f"{path} (--run {seed})"
            every_k = read_csv_table(path, where, ["method", "k_target", "precision", "recall", "n_true",
                                                   "n_components"], RECOVERY_FIX)
            every_k = parse_k_column(every_k, "k_target", where, RECOVERY_FIX)
            auroc = read_csv_table(path.with_name("recovery_auroc.csv"), f"{path.with_name('recovery_auroc.csv')} "
                                   f"(beside --run {seed} {path})", ["method", "auroc"], RECOVERY_FIX)
            k = truth_size_k(every_k["n_true"], every_k["n_components"], every_k["k_target"])
            at = every_k[np.isclose(every_k["k_target"], k)]
            keys = [c for c in ("experiment", "scorer", "setting") if c in every_k.columns]
            for key, part in at.groupby([*keys, "method"]):
                label = dict(zip([*keys, "method"], key))
                area = auroc.loc[(auroc[[*keys, "method"]] == pd.Series(label)).all(axis=1), "auroc"]
                rows.append({**label, "model_seed": seed, "k_truth": k, "auroc": float(area.mean()),
                             "precision": float(part["precision"].mean()), "recall": float(part["recall"].mean()),
                             "empty": int(part["empty_circuit"].astype(bool).sum()) if "empty_circuit" in part else 0})  # fmt: skip
    per_seed = pd.DataFrame(rows)
    keys = [c for c in ("experiment", "scorer", "setting") if c in per_seed.columns]
    summary = per_seed.groupby([*keys, "method"], sort=False)[["auroc", "precision", "recall"]].agg(
        ["mean", "min", "max"]
    )
    summary.columns = [f"{c}_{s}" for c, s in summary.columns]
    summary = summary.reset_index()
    base = per_seed[per_seed["method"] == "baseline"].set_index([*keys, "model_seed"])["auroc"]
    wins = []
    for _, row in summary.iterrows():
        mine = per_seed[(per_seed[[*keys, "method"]] == row[[*keys, "method"]]).all(axis=1)].set_index(
            [*keys, "model_seed"]
        )
        paired = mine["auroc"].align(base, join="inner")
        wins.append(int((paired[0] > paired[1]).sum()))
    summary["auroc_above_baseline_seeds"] = wins
    summary["n_seeds"] = per_seed["model_seed"].nunique()
    write_csv(out_dir / f"{name}_model_seeds_raw.csv", summary)
    shown = summary[[*keys, "method"]].copy()
    for column in ("auroc", "precision", "recall"):
        shown[column] = [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                         zip(summary[f"{column}_mean"], summary[f"{column}_min"], summary[f"{column}_max"])]  # fmt: skip
    shown["AUROC > baseline"] = [f"{w}/{n}" for w, n in zip(summary["auroc_above_baseline_seeds"], summary["n_seeds"])]
    tables.write_table(shown, out_dir / f"{name}_model_seeds", caption=(
        f"Recovery of the testbed's truth across {summary['n_seeds'].iloc[0]} model seeds: mean [min, max] over seeds "
        "of the per-seed mean over concepts; precision and recall at the truth's size (the K nearest n_true / U)."))  # fmt: skip
    return {f"{name}_auroc_{m}": float(summary.loc[summary.method == m, "auroc_mean"].mean()) for m in SEED_METHODS
            if (summary.method == m).any()}  # fmt: skip


def model_seeds_stability(runs: dict[str, Sequence[Path]], out_dir: Path, name: str) -> dict[str, float]:
    """Stability across model-training seeds: per seed the mean over concepts at the truth's size (the K nearest
    n_true / U of the run's ``recovery.csv`` beside it), then mean, min and max over seeds.

    Args:
        runs: seed label -> that run's ``stability.csv`` (report-stability).
        out_dir: where the tables go.
        name: output stem, e.g. ``world_stability``.

    Returns:
        ``<name>_<column>``: the mean over seeds of each shown column.
    """
    rows = []
    for seed, paths in runs.items():
        for path in map(Path, paths):
            table = read_stability_table(path, option="--run", columns=SEED_STABILITY)
            every_k = read_recovery_beside(path, f"beside --run {seed} {path}")
            k = truth_size_k(every_k["n_true"], every_k["n_components"], every_k["k_target"])
            at_k = nearest_k(table["k_target"], k)
            at = table[np.isclose(table["k_target"], at_k)]
            keys = [c for c in ("experiment", "scorer", "setting") if c in table.columns]
            for key, part in at.groupby(keys):
                rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), "model_seed": seed,
                             "k_target": at_k, **{c: float(part[c].mean()) for c in SEED_STABILITY}})  # fmt: skip
    per_seed = pd.DataFrame(rows)
    keys = [c for c in ("experiment", "scorer", "setting") if c in per_seed.columns]
    summary = per_seed.groupby(keys, sort=False)[list(SEED_STABILITY)].agg(["mean", "min", "max"])
    summary.columns = [f"{c}_{s}" for c, s in summary.columns]
    summary = summary.reset_index()
    summary["k_target"] = per_seed.groupby(keys, sort=False)["k_target"].first().to_numpy()
    summary["n_seeds"] = per_seed["model_seed"].nunique()
    write_csv(out_dir / f"{name}_model_seeds_raw.csv", summary)
    shown = summary[[*keys, "k_target"]].copy()
    for column in SEED_STABILITY:
        shown[column] = [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                         zip(summary[f"{column}_mean"], summary[f"{column}_min"], summary[f"{column}_max"])]  # fmt: skip
    tables.write_table(shown, out_dir / f"{name}_model_seeds", caption=(
        f"Stability under bootstrap resamples across {summary['n_seeds'].iloc[0]} model seeds, at the truth's size: "
        "mean [min, max] over seeds of the per-seed mean over concepts."))  # fmt: skip
    return {f"{name}_{c}": float(summary[f"{c}_mean"].mean()) for c in SEED_STABILITY}
