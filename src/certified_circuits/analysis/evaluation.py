"""Aggregate evaluations of the paper: cACC curves, peak tables, paired tests, IoU, stability.

Input is the tidy sufficiency table written per concept by ``vision-evaluate`` / ``language-evaluate``:
one row per (experiment, concept, eval_set, method, k_target) with ``k_effective`` and ``accuracy``
(plus ``false_positive_rate`` and ``balanced_accuracy`` for vision). ``method`` is one of
``baseline`` (A on the full concept dataset), ``majority`` (majority vote at identical compute),
``certified`` (certified-in components) and ``full`` (the unpruned model).

Definitions (paper Sec. 4-5):

cACC (Eq. cACC)
    ``cACC = mean over concepts of CA(C_c, D_c)`` at each K: :func:`cacc_curves`.
Peak
    For each (experiment, eval_set, method), the K of the grid with the highest mean metric; ties go
    to the smaller effective size. The reported size is the mean *effective* K over concepts (for
    certified circuits the fraction actually kept after abstention), as in Table 1.
Delta
    Relative change of certified over baseline on unrounded values, as Table 1 reports:
    ``(certified - baseline) / baseline`` for the metric and for K.
Paired test (Table 3)
    Class-level values of certified (at its peak K) and baseline (at its peak K), paired by concept:
    Wilcoxon signed-rank (default; two-sided, zero differences split) or paired t-test; with no
    non-zero difference the p-value is 1. Beside it, every table row carries a per-example paired test
    (:mod:`certified_circuits.analysis.paired_tests`), which has power with one concept per row.
IoU (Fig. IoU)
    ``|V ∩ V'| / |V ∪ V'|``; two empty circuits are identical (IoU 1).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from certified_circuits.core.contracts import ABSTAIN, IN, OUT
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, paired_example_test
from certified_circuits.storage.tables import read_k_table, require_columns

KEYS = ["experiment", "concept", "eval_set", "method", "k_target"]
METHODS = ("baseline", "majority", "certified")


#: the false-positive rate column of a vision sufficiency table: the peak and selected tables carry it beside every
#: method's metric as ``<method>_fpr`` (and ``full_fpr``), since zero ablation's cACC rewards class bias
FPR_COLUMN = "false_positive_rate"

#: the ablation a sufficiency table is read at when none is asked for: the paper's (zero ablation)
DEFAULT_ABLATION = "zero"


def read_sufficiency(paths: Sequence[str | Path], ablation: str = DEFAULT_ABLATION) -> pd.DataFrame:
    """Concatenate per-concept sufficiency CSVs, checking the contract.

    Args:
        paths: per-concept CSVs of an evaluate stage.
        ablation: the rows to keep when a CSV carries an ``ablation`` column (vision-evaluate writes one row
            set per ablation it was asked for: ``zero``, the paper's test, and ``mean``, non-circuit channels
            at their mean over the train split). A CSV without the column (language, older runs) is zero
            ablation or interchange patching, and is kept whole when ``ablation`` is the default.

    Returns:
        One table, the rows of ``ablation`` only (the column, now constant, is kept: tables say what they hold).

    Raises:
        ValueError: a CSV has no row of ``ablation`` (name the ablations it has and the option that adds it).
    """
    if not paths:
        raise ValueError("no sufficiency tables given")
    frames = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: sufficiency table not found; run the evaluate stage for it")
        frame = pd.read_csv(path, dtype={OUTCOME_COLUMN: str})  # keep leading zeros of the 0/1 strings
        require_columns(frame, KEYS + ["k_effective", "accuracy"], str(path))
        if "ablation" in frame.columns:
            present = sorted(set(frame["ablation"].astype(str)))
            frame = frame[frame["ablation"].astype(str) == ablation]
            if frame.empty:
                raise ValueError(f"{path}: no rows of ablation {ablation!r} (it has {', '.join(present)}); evaluate with "
                                 f"`vision-evaluate --ablation {ablation}` (workflow: vision.ablations)")
        elif ablation != DEFAULT_ABLATION:
            raise ValueError(f"{path}: no 'ablation' column, so only {DEFAULT_ABLATION!r} rows; evaluate with "
                             f"`vision-evaluate --ablation {ablation}` (workflow: vision.ablations)")
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    table["concept"] = table["concept"].astype(str)
    return table


def metric_columns(table: pd.DataFrame) -> list[str]:
    """The numeric metrics present (accuracy first)."""
    known = ["accuracy", "false_positive_rate", "balanced_accuracy", "binary_accuracy", "logit_diff"]
    return [c for c in known if c in table.columns]


def cacc_curves(table: pd.DataFrame, by: Sequence[str] = ("experiment", "eval_set")) -> pd.DataFrame:
    """Mean over concepts per (``by``..., method, k_target); ``accuracy`` becomes ``cacc``.

    ``full`` rows (one per concept and eval set) are broadcast to every K so a curve plot can draw the
    full model as a reference line.
    """
    by = list(by)
    require_columns(table, KEYS + ["k_effective", "accuracy", *by], "sufficiency table")
    metrics = metric_columns(table)
    pruned = table[table["method"] != "full"]
    keys = [*by, "method", "k_target"]
    grouped = pruned.groupby(keys)
    curves = grouped[["k_effective", *metrics]].mean()
    curves["n_concepts"] = grouped.size()
    curves = curves.reset_index()
    full = table[table["method"] == "full"].drop_duplicates([*by, "concept"])
    if not full.empty:
        full_grouped = full.groupby(by)
        full_mean = full_grouped[metrics].mean()
        full_mean["n_concepts"] = full_grouped.size()
        grid = curves[[*by, "k_target"]].drop_duplicates()
        full_rows = grid.merge(full_mean.reset_index(), on=by).assign(method="full", k_effective=1.0)
        curves = pd.concat([curves, full_rows[curves.columns]], ignore_index=True)
    return curves.rename(columns={"accuracy": "cacc"}).sort_values(keys).reset_index(drop=True)


def _peak_rows(curves: pd.DataFrame, metric: str, by: list[str]) -> pd.DataFrame:
    """Row of each (by..., method) curve with the highest metric (ties: smaller effective K)."""
    ranked = curves.sort_values([*by, "method", metric, "k_effective"], ascending=[True] * (len(by) + 1) + [False, True])
    return ranked.groupby([*by, "method"], as_index=False).head(1)


def signed_rank_test(certified: np.ndarray, baseline: np.ndarray,
                     alternative: str = "two-sided") -> tuple[float, float]:
    """The paired Wilcoxon signed-rank test of ``certified - baseline`` (``zero_method="zsplit"``: a tie counts half
    for each side), the one implementation behind the class-level test (:func:`paired_test`) and the testbed's
    one-sided hypotheses (:mod:`certified_circuits.analysis.hypotheses`).

    With at most :data:`PERMUTATION_MAX_PAIRS` finite differences the p-value is exact, from all ``2**n`` sign flips
    (:func:`_signed_rank_exact`), and equals ``scipy.stats.wilcoxon``'s (its exact branch without zeros and ties, its
    permutation branch with them); above, scipy (imported here: ~0.7 s a process, issue 51) runs its own branches.

    Args:
        certified, baseline: paired values (same length).
        alternative: ``two-sided``, ``greater`` (certified above) or ``less``.

    Returns:
        ``(statistic, pvalue)``; ``(nan, nan)`` with fewer than 2 pairs, ``(0, 1)`` when every difference is 0.
    """
    diff = np.asarray(certified, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    if diff.size < 2:
        return float("nan"), float("nan")
    if not np.any(diff):
        return 0.0, 1.0
    if diff.size <= PERMUTATION_MAX_PAIRS and np.isfinite(diff).all():
        return _signed_rank_exact(diff, alternative)
    from scipy import stats

    result = stats.wilcoxon(diff, zero_method="zsplit", alternative=alternative)
    return float(result.statistic), float(result.pvalue)


#: scipy's ``wilcoxon(method="auto")`` is exact for ``n <= 13`` pairs: its exact null distribution without zeros and
#: ties, an exact permutation test (all ``2**n`` sign flips) with them; :func:`signed_rank_test` computes both as one
#: enumeration of the sign flips, vectorised
PERMUTATION_MAX_PAIRS = 13


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of a 1-D array, ties sharing their mean rank (``scipy.stats.rankdata(method="average")``).

    Args:
        values: ``[n]``.

    Returns:
        float64 ``[n]``: a run of tied values at sorted positions ``s..e-1`` (0-based) gets ``(s + 1 + e) / 2``,
        a multiple of 1/2.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    run = np.cumsum(starts) - 1
    bounds = np.flatnonzero(np.r_[starts, True])  # where each run starts, then n
    ranks = np.empty(values.size)
    ranks[order] = (bounds[run] + 1 + bounds[run + 1]) / 2
    return ranks


def _signed_rank_exact(diff: np.ndarray, alternative: str) -> tuple[float, float]:
    """Exact Wilcoxon signed-rank test with zeros split, over all ``2**n`` sign flips of ``diff`` (vectorised).

    With ``r_i`` the average rank of ``|d_i|`` (:func:`_average_ranks`, zeros included) and ``z = sum_{d_i = 0} r_i / 2``,
    the statistic is ``r_plus = sum_{d_i > 0} r_i + z`` (``r_minus`` likewise over ``d_i < 0``). A sign flip keeps the
    ranks, so the null distribution is ``z + sum_{d_i != 0} r_i b_i`` over every ``b`` in ``{0, 1}^n`` (a zero's flip
    counts twice, as scipy's permutation test enumerates it). The p-values are counts over the ``2**n`` flips:
    ``less = #{null <= r_plus} / 2**n``, ``greater = #{null >= r_plus} / 2**n``, two-sided ``min(1, 2 min(less,
    greater))``: scipy's ``wilcoxon(zero_method="zsplit")`` for ``n <= 13`` (its exact distribution without zeros and
    ties, ``permutation_test`` with them), exactly (ranks are multiples of 1/2, so every sum is exact in float64).

    Args:
        diff: ``n <= PERMUTATION_MAX_PAIRS`` finite differences, not all zero.
        alternative: ``two-sided``, ``greater`` or ``less``.

    Returns:
        ``(statistic, pvalue)``: ``min(r_plus, r_minus)`` for ``two-sided``, else ``r_plus`` (as scipy reports it).

    Raises:
        ValueError: ``alternative`` is none of the three.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative={alternative!r} is invalid: choose 'two-sided', 'greater' or 'less'")
    ranks = _average_ranks(np.abs(diff))
    zero_half = float(np.sum(ranks[diff == 0])) / 2
    r_plus = float(np.sum(ranks[diff > 0])) + zero_half
    r_minus = float(np.sum(ranks[diff < 0])) + zero_half
    flips = (np.arange(2 ** diff.size)[:, None] >> np.arange(diff.size)) & 1  # [2**n, n]: every b
    null = zero_half + flips @ np.where(diff != 0, ranks, 0.0)
    less = np.count_nonzero(null <= r_plus) / null.size
    greater = np.count_nonzero(null >= r_plus) / null.size
    pvalue = {"less": less, "greater": greater, "two-sided": min(1.0, 2 * min(less, greater))}[alternative]
    statistic = min(r_plus, r_minus) if alternative == "two-sided" else r_plus
    return float(statistic), float(pvalue)


def paired_test(certified: np.ndarray, baseline: np.ndarray, test: str = "wilcoxon") -> float:
    """Two-sided p-value of a paired class-level comparison (1.0 when all differences are zero)."""
    certified, baseline = np.asarray(certified, float), np.asarray(baseline, float)
    if certified.shape != baseline.shape:
        raise ValueError("paired test needs one certified and one baseline value per concept")
    if test not in ("wilcoxon", "ttest"):
        raise ValueError(f"test={test!r} is invalid: choose 'wilcoxon' or 'ttest'")
    difference = certified - baseline
    if difference.size < 2 or np.allclose(difference, 0.0):
        return 1.0
    if test == "wilcoxon":
        return signed_rank_test(certified, baseline)[1]
    from scipy import stats  # here: the t-test only (scipy.stats takes ~0.7 s to import, issue 51)

    return float(stats.ttest_rel(certified, baseline).pvalue)


def paired_columns(baseline: pd.DataFrame, certified: pd.DataFrame, metric: str, test: str,
                   bootstrap_seed: int = 0) -> dict:
    """The significance columns of one table row, from the rows of each method's chosen circuits.

    ``pvalue`` / ``test`` / ``n_concepts``: the paper's class-level paired test (:func:`paired_test`)
    on per-concept values. ``pvalue_examples`` / ``example_test`` / ``n_paired_examples`` /
    ``n_discordant``: the per-example paired test of :mod:`certified_circuits.analysis.paired_tests` (McNemar for
    accuracy, stratified bootstrap for balanced accuracy, seeded with ``bootstrap_seed``); NaN / "none"
    where the rows carry no per-example outcomes.
    """
    paired = pd.concat({m: rows.groupby("concept")[metric].mean() for m, rows in
                        (("baseline", baseline), ("certified", certified))}, axis=1, join="inner")
    columns = {
        "pvalue": paired_test(paired["certified"].to_numpy(), paired["baseline"].to_numpy(), test),
        "test": test,
        "n_concepts": int(len(paired)),
    }
    result = paired_example_test(baseline, certified, metric, seed=bootstrap_seed)
    columns.update(
        pvalue_examples=result.pvalue if result else np.nan,
        example_test=result.test if result else "none",
        n_paired_examples=result.n_examples if result else 0,
        n_discordant=result.discordant if result else 0,
    )
    return columns


#: the columns a peak or selected row reads of the sufficiency rows it came from (besides its keys and metric)
ROW_COLUMNS = ("concept", "method", "k_target", "k_effective", "setting", FPR_COLUMN, OUTCOME_COLUMN, "n_images")


def _slim(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``table``'s ``columns`` (those it has, each once), text columns as Python objects.

    A table row filters and copies its sufficiency rows many times (a mask per method, a group per concept): numpy's
    object arrays take rows several times faster than pandas' Arrow-backed ``str`` columns, with the same values.

    Args:
        table: a sufficiency table.
        columns: the columns wanted, in order (repeats and absent ones skipped).

    Returns:
        A new frame of those columns.
    """
    slim = table[[c for c in dict.fromkeys(columns) if c in table.columns]]
    text = [c for c in slim.columns if pd.api.types.is_string_dtype(slim[c].dtype)]
    return slim.astype(dict.fromkeys(text, object)) if text else slim


def _rows_by(table: pd.DataFrame, by: Sequence[str], metric: str) -> dict[tuple, pd.DataFrame]:
    """The sufficiency rows of each ``by`` key, with only the columns a table row reads (:data:`ROW_COLUMNS`).

    One pass over the table: copying all of its columns (the per-example outcome strings included) once per table
    row was most of a table's time.

    Args:
        table: a sufficiency table.
        by: the row keys (may be empty: one key ``()`` holds every row).
        metric: the metric column the rows are compared on.

    Returns:
        ``{key tuple: rows}``, each in the table's order.
    """
    slim = _slim(table, [*by, *ROW_COLUMNS, metric])
    if not by:
        return {(): slim}
    return {key if isinstance(key, tuple) else (key,): slim.iloc[positions]
            for key, positions in slim.groupby(list(by), sort=False).indices.items()}


def peak_table(
    table: pd.DataFrame,
    metric: str = "accuracy",
    test: str = "wilcoxon",
    by: Sequence[str] = ("experiment", "eval_set"),
    bootstrap_seed: int = 0,
) -> pd.DataFrame:
    """Table 1 / Table 3: Full, Baseline, Certified (and majority) at their peaks, Delta, paired test.

    ``metric`` selects the peak (``accuracy`` = the paper's cACC, or ``balanced_accuracy``); ``by``
    lists the columns that define one table row (e.g. add ``scorer`` for Table 3, ``concept`` and
    ``setting`` for language tasks).
    """
    by = list(by)
    metric_in_curves = "cacc" if metric == "accuracy" else metric
    curves = cacc_curves(table, by)
    require_columns(curves, [metric_in_curves], "cACC curves")
    peaks = _peak_rows(curves[curves["method"] != "full"], metric_in_curves, by)
    full_curves = curves[curves["method"] == "full"].drop_duplicates(by).set_index(by)
    rows_of = _rows_by(table, by, metric)
    rows = []
    for key, group in peaks.groupby(by):
        key = key if isinstance(key, tuple) else (key,)
        by_method = group.set_index("method")
        if not {"baseline", "certified"} <= set(by_method.index):
            continue
        row = dict(zip(by, key))
        row["metric"] = metric_in_curves
        row["full"] = float(full_curves.loc[key, metric_in_curves]) if key in full_curves.index else np.nan
        if FPR_COLUMN in curves.columns:  # cACC never stands without its false-positive rate (class bias)
            row["full_fpr"] = float(full_curves.loc[key, FPR_COLUMN]) if key in full_curves.index else np.nan
        for method in METHODS:
            if method in by_method.index:
                row[method] = float(by_method.loc[method, metric_in_curves])
                row[f"{method}_k"] = float(by_method.loc[method, "k_effective"])
                row[f"{method}_k_target"] = float(by_method.loc[method, "k_target"])
                if FPR_COLUMN in by_method.columns:
                    row[f"{method}_fpr"] = float(by_method.loc[method, FPR_COLUMN])
        row["delta"] = (row["certified"] - row["baseline"]) / row["baseline"] if row["baseline"] else np.nan
        row["delta_k"] = (row["certified_k"] - row["baseline_k"]) / row["baseline_k"] if row["baseline_k"] else np.nan
        selected = rows_of[key]
        chosen = {
            method: selected[(selected.method == method) & np.isclose(selected.k_target, row[f"{method}_k_target"])]
            for method in ("baseline", "certified")
        }
        row.update(paired_columns(chosen["baseline"], chosen["certified"], metric, test, bootstrap_seed))
        rows.append(row)
    return pd.DataFrame(rows)


def selected_table(
    table: pd.DataFrame,
    select_on: str,
    metric: str = "accuracy",
    test: str = "wilcoxon",
    by: Sequence[str] = ("experiment", "eval_set"),
    choose_setting: bool = False,
    bootstrap_seed: int = 0,
) -> pd.DataFrame:
    """Table 1 with held-out selection: every method's K (and, with ``choose_setting``, its
    certification setting) is chosen on the eval set ``select_on`` and reported on every other eval set.

    The same procedure for every method (baseline, majority, certified): per row key without the eval
    set, the (setting, K) with the highest mean ``metric`` over concepts on ``select_on`` (ties: smaller
    effective K, then the first setting in sorted order). The reported value is the mean over concepts on
    the test eval set at that choice; the paired test compares certified and baseline per concept there.
    Unlike :func:`peak_table`, no number is chosen on the split it is reported on.
    """
    keys = [k for k in by if k not in ("eval_set", "setting")]
    curve_keys = [*keys, "eval_set"] + (["setting"] if choose_setting else [])
    if not choose_setting and "setting" in table.columns and table.groupby([*keys, "eval_set"])["setting"].nunique().max() > 1:
        raise ValueError("several settings per row: pass choose_setting=True (or --best-setting) to choose one")
    if select_on not in set(table.eval_set):
        raise ValueError(f"selection set {select_on!r} is not among the evaluated sets {sorted(set(table.eval_set))}")
    column = "cacc" if metric == "accuracy" else metric
    curves = cacc_curves(table, curve_keys)
    validation = curves[(curves.eval_set == select_on) & (curves.method != "full")]
    order = [*keys, "method", column, "k_effective"] + (["setting"] if choose_setting else [])
    ascending = [True] * (len(keys) + 1) + [False, True] + ([True] if choose_setting else [])
    chosen = validation.sort_values(order, ascending=ascending).groupby([*keys, "method"], as_index=False).head(1)
    chosen = chosen[[*keys, "method", "k_target"] + (["setting"] if choose_setting else [])]
    rows = []
    slim = _slim(table, [*keys, "eval_set", *ROW_COLUMNS, metric])
    for key, tested in slim[slim.eval_set != select_on].groupby([*keys, "eval_set"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        label = dict(zip([*keys, "eval_set"], key))
        mine = chosen
        for name in keys:
            mine = mine[mine[name] == label[name]]
        picks = mine.set_index("method")
        if not {"baseline", "certified"} <= set(picks.index):
            continue
        row = {**label, "metric": column, "selected_on": select_on}
        full = tested[tested.method == "full"].drop_duplicates("concept")
        row["full"] = float(full[metric].mean()) if len(full) else np.nan
        if FPR_COLUMN in tested.columns:  # cACC never stands without its false-positive rate (class bias)
            row["full_fpr"] = float(full[FPR_COLUMN].mean()) if len(full) else np.nan
        chosen_rows = {}
        for method in METHODS:
            if method not in picks.index:
                continue
            pick = picks.loc[method]
            rows_m = tested[(tested.method == method) & np.isclose(tested.k_target, pick["k_target"])]
            if choose_setting:
                rows_m = rows_m[rows_m.setting == pick["setting"]]
                row[f"{method}_setting"] = pick["setting"]
            chosen_rows[method] = rows_m
            row[method] = float(rows_m.groupby("concept")[metric].mean().mean())
            row[f"{method}_k"] = float(rows_m["k_effective"].mean())
            row[f"{method}_k_target"] = float(pick["k_target"])
            if FPR_COLUMN in rows_m.columns:
                row[f"{method}_fpr"] = float(rows_m.groupby("concept")[FPR_COLUMN].mean().mean())
        row["delta"] = (row["certified"] - row["baseline"]) / row["baseline"] if row["baseline"] else np.nan
        row["delta_k"] = (row["certified_k"] - row["baseline_k"]) / row["baseline_k"] if row["baseline_k"] else np.nan
        row.update(paired_columns(chosen_rows["baseline"], chosen_rows["certified"], metric, test, bootstrap_seed))
        rows.append(row)
    return pd.DataFrame(rows)


def best_setting(peaks: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per row key, the certification setting with the highest certified peak (ties: smaller
    certified K), as the paper reports language results (App. A.2)."""
    ranked = peaks.sort_values([*by, "certified", "certified_k"], ascending=[True] * len(by) + [False, True])
    return ranked.groupby(list(by), as_index=False).head(1).reset_index(drop=True)


def best_gap_k(curves: pd.DataFrame, eval_set: str, metric: str = "cacc") -> float:
    """The K target maximising certified minus baseline on ``eval_set`` (Fig. IoU's operating point);
    ties: smaller K."""
    selected = curves[curves.eval_set == eval_set]
    pivot = selected.pivot_table(index="k_target", columns="method", values=metric)
    if not {"baseline", "certified"} <= set(pivot.columns):
        raise ValueError(f"no baseline and certified curves for eval set {eval_set!r}")
    gap = (pivot["certified"] - pivot["baseline"]).sort_index()
    return float(gap.idxmax())


def certified_peak_k(curves: pd.DataFrame, eval_set: str, metric: str = "cacc") -> float:
    """The K target of the certified curve's peak on ``eval_set`` (ties: smaller effective K), the
    operating point of the seed-stability, spurious-index and feature-visualisation reports."""
    certified = curves[(curves.eval_set == eval_set) & (curves.method == "certified")]
    if certified.empty:
        raise ValueError(f"no certified curve for eval set {eval_set!r}")
    return float(certified.sort_values([metric, "k_effective"], ascending=[False, True]).iloc[0]["k_target"])


#: how each operating point is chosen (the ``criterion`` column of operating_points.csv)
OPERATING_CRITERIA = {
    "certified_peak": "K of the certified curve's peak cACC on selected_on (ties: smaller effective K)",
    "max_gap": "K maximising certified minus baseline cACC on selected_on (ties: smaller K)",
}


def operating_points(curves: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The operating-point table: for every group of ``keys`` (experiment, scorer or task/setting, eval
    set) the K each criterion of :data:`OPERATING_CRITERIA` chooses, and the split it was chosen on.

    Written once by report-sufficiency; every later report reads its K from here (:func:`operating_k`)
    instead of recomputing it, so all figures of a run share one choice.
    """
    rows = []
    group_keys = [k for k in keys if k != "eval_set"]
    for values, group in curves.groupby(list(keys), sort=True):
        values = values if isinstance(values, tuple) else (values,)
        label = dict(zip(keys, values))
        eval_set = label["eval_set"]
        choices = {"certified_peak": certified_peak_k(group, eval_set)}
        if {"baseline", "certified"} <= set(group.method):
            choices["max_gap"] = best_gap_k(group, eval_set)
        for criterion, k in choices.items():
            rows.append({**{k2: label[k2] for k2 in group_keys}, "eval_set": eval_set, "criterion": criterion,
                         "k_target": k, "selected_on": eval_set, "rule": OPERATING_CRITERIA[criterion]})
    return pd.DataFrame(rows)


#: columns every operating-points table holds (report-sufficiency writes them)
OPERATING_POINT_COLUMNS = ("eval_set", "criterion", "k_target")


def read_operating_points(path: str | Path) -> pd.DataFrame:
    """``operating_points.csv`` of report-sufficiency, checked before a report does any work.

    Raises:
        ValueError: the file is not readable as CSV, lacks :data:`OPERATING_POINT_COLUMNS`, or holds a ``k_target``
            outside (0, 1]; the message names the file (and row) and the fix.
    """
    fix = "pass the operating_points.csv that report-sufficiency wrote"
    return read_k_table(path, f"{path}", OPERATING_POINT_COLUMNS, fix, {"k_target": False},
                        kind="operating-points CSV")  # K through the one parser: a share in (0, 1], by row


def operating_k(points: pd.DataFrame, *, eval_set: str, criterion: str, scorer: str | None = None) -> float:
    """The K of one operating point; an error names what is missing.

    A ``scorer`` or ``eval_set`` that the table does not hold at all is refused with the values it holds (a
    report asked for a scorer the run did not compute), before the one-row check.
    """
    for column, value, option in (("scorer", scorer, "--scorer"), ("eval_set", eval_set, "--eval-set")):
        if value is not None and column in points.columns and value not in set(points[column].astype(str)):
            held = sorted(set(points[column].astype(str)))
            raise ValueError(f"the operating points hold no {column} {value!r}: they hold {held}; pass {option} one "
                             f"of them, or add {value!r} to the run and rerun report-sufficiency")
    chosen = points[(points.eval_set == eval_set) & (points.criterion == criterion)]
    if scorer is not None and "scorer" in points.columns:
        chosen = chosen[chosen.scorer == scorer]
    if len(chosen) != 1:
        raise ValueError(f"operating points hold {len(chosen)} rows for eval set {eval_set!r}, criterion "
                         f"{criterion!r}, scorer {scorer!r} (expected exactly 1); rerun report-sufficiency")
    return float(chosen.iloc[0]["k_target"])


def circuit_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a ∩ b| / |a ∪ b|`` over the last axis; 1.0 where both circuits are empty."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    union = (a | b).sum(axis=-1)
    intersection = (a & b).sum(axis=-1)
    return np.where(union == 0, 1.0, intersection / np.maximum(union, 1))


def pairwise_iou(circuits: np.ndarray, labels: Sequence[int | str]) -> pd.DataFrame:
    """IoU of every pair of circuits ``[n_runs, U]`` (App. Fig. variance: stability across seeds)."""
    circuits = np.asarray(circuits, bool)
    pairs = list(combinations(range(circuits.shape[0]), 2))
    if not pairs:
        return pd.DataFrame(columns=["seed_a", "seed_b", "iou"])
    first, second = map(np.array, zip(*pairs))
    return pd.DataFrame(
        {
            "seed_a": [labels[i] for i in first],
            "seed_b": [labels[i] for i in second],
            "iou": circuit_iou(circuits[first], circuits[second]),
        }
    )


def abstention_summary(decision: np.ndarray, baseline: np.ndarray, groups: np.ndarray) -> pd.DataFrame:
    """Per K: abstention rate (share of components abstained), share certified in/out, and the share of
    the baseline circuit that certification abstains on (App. D, larger radii)."""
    from certified_circuits.core.discovery import effective_k

    decision = np.asarray(decision)
    baseline = np.asarray(baseline, bool)
    return pd.DataFrame(
        {
            "abstain_rate": (decision == ABSTAIN).mean(axis=-1),
            "certified_in_rate": (decision == IN).mean(axis=-1),
            "certified_out_rate": (decision == 0).mean(axis=-1),
            "baseline_abstained": np.where(
                baseline.sum(-1) > 0, ((decision == ABSTAIN) & baseline).sum(-1) / np.maximum(baseline.sum(-1), 1), 0.0
            ),
            "effective_k": effective_k(decision == 1, groups),
            "baseline_k": effective_k(baseline, groups),
        }
    )


def channel_categories(decision: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Label each component for the feature-visualisation and spurious-index comparisons (Fig. 4):
    ``certified_in``, ``abstained`` (in the baseline circuit but abstained), ``certified_out``, or
    ``other`` (abstained outside the baseline)."""
    decision = np.asarray(decision)
    baseline = np.asarray(baseline, bool)
    labels = np.full(decision.shape, "other", dtype=object)
    labels[decision == IN] = "certified_in"
    labels[decision == OUT] = "certified_out"
    labels[(decision == ABSTAIN) & baseline] = "abstained"
    return labels
