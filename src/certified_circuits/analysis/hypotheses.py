"""The testbed's hypotheses H1-H3 (docs/embedded_default.md, "The noisy regime"), tested from the recovery and
stability tables of one run or of several model seeds.

Each hypothesis compares a certified circuit with the baseline on the same pairs (concept x model seed x setting),
with a one-sided paired Wilcoxon signed-rank test (:func:`~certified_circuits.analysis.evaluation.signed_rank_test`,
``zero_method="zsplit"``: a tie counts half for each side, so identical pairs weigh against neither):

- **H1a** certified-in precision > baseline precision at the truth's size (the grid K nearest the truth's share);
- **H1b** the same at the K the certified method's held-out selection chose (both circuits read at that K: the
  same K target, as H1 asks);
- **H2** between bootstrap resamples, the share of certified labels that flip in <-> out < the share of baseline
  memberships that change (``testbed/stability.csv``, at the truth's size);
- **H3** certified-in-plus-abstain recall >= baseline recall at the truth's size: tested against H0 "lower"
  (alternative ``less``); it holds when that test does not reject at alpha and the mean difference is >= 0.

An empty certified circuit has no precision: its pair is left out of H1 and counted in ``n_dropped``; so is a pair
of the recovery table that a hypothesis' other table lacks (no stability row, no selected K). ``seeds`` names the
model seeds whose pairs entered each test.

Refuse, never re-count (issue 53): every table is checked before any pair is formed (:func:`check_recovery`,
:func:`check_stability`, :func:`check_auroc`): an empty cell in a column a pair is formed on (it would drop the row
from every pair), a row given twice (it would be counted twice) and, in the recovery table, counts that contradict
each other (``n_true != tp + fn``, or a concept whose ``n_true`` or ``n_components`` differs between its rows: either
would move the truth's size, the K every pair is read at).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.evaluation import signed_rank_test
from certified_circuits.analysis.recovery import nearest_k, truth_size_k
from certified_circuits.storage.tables import require_columns

#: the one-sided level every hypothesis is tested at
ALPHA = 0.05
#: columns of :func:`hypothesis_table`
COLUMNS = ("hypothesis", "claim", "experiment", "scorer", "k", "n_pairs", "n_dropped", "seeds", "certified",
           "baseline", "mean_difference", "statistic", "pvalue", "alternative", "holds")
#: what identifies one pair
PAIR_KEYS = ("experiment", "scorer", "seed", "concept", "setting")
#: the columns each table is paired on (with ``seed``): an empty cell would drop its row, a repeated key count it twice
RECOVERY_KEYS = ("experiment", "scorer", "concept", "setting", "method", "k_target")
STABILITY_KEYS = ("experiment", "scorer", "concept", "setting", "k_target")
AUROC_KEYS = ("experiment", "scorer", "concept", "setting", "method", "at_selected_setting")
#: what to do when a table is refused
TABLE_FIX = "rerun the stage that wrote it (report-recovery, report-stability) rather than editing it"
CLAIMS = {
    "H1a": "certified-in precision > baseline precision at the truth's size",
    "H1b": "certified-in precision > baseline precision at the K certified selection chose on held-out data",
    "H2": "certified labels flip in<->out less often than baseline memberships change (bootstrap resamples)",
    "H3": "certified-in-plus-abstain recall >= baseline recall at the truth's size",
}


def _shown(value: object) -> str:
    """A cell for a message, as written (``0.5``, not ``np.float64(0.5)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _first_row(bad: np.ndarray) -> int:
    """The first flagged row as the file counts it (the header is row 1)."""
    return int(np.flatnonzero(bad)[0]) + 2


def check_filled(table: pd.DataFrame, columns: Sequence[str], where: str, fix: str = TABLE_FIX) -> None:
    """Refuse an empty cell in a column a pair is formed on (it would silently drop its row from every pair).

    Args:
        table: the table as read (rows in file order).
        columns: the columns every row must fill.
        where: the file (and option), for the message.
        fix: the end of the message.

    Raises:
        ValueError: ``"<where>: column 'k_target' is empty in row 3 (2 rows): ..."``, or a missing column.
    """
    require_columns(table, columns, where)
    for column in columns:
        empty = table[column].isna().to_numpy()
        if empty.any():
            raise ValueError(f"{where}: column {column!r} is empty in row {_first_row(empty)} ({int(empty.sum())} "
                             f"rows): every row is paired on {', '.join(columns)} and would drop out; {fix}")


def check_unique(table: pd.DataFrame, columns: Sequence[str], where: str, fix: str = TABLE_FIX) -> None:
    """Refuse two rows with one key (a row given twice would be counted as two pairs, or one silently kept).

    Raises:
        ValueError: ``"<where>: row 7 repeats row 2 (experiment 'w', ...): ..."``.
    """
    repeated = table.duplicated(subset=list(columns), keep=False).to_numpy()
    if repeated.any():
        first = int(np.flatnonzero(repeated)[0])
        key = table.iloc[first][list(columns)]
        again = np.flatnonzero(repeated & (table[list(columns)] == key).all(axis=1).to_numpy())[1]
        shown = ", ".join(f"{c} {_shown(v)}" for c, v in key.items())
        raise ValueError(f"{where}: row {int(again) + 2} repeats row {first + 2} ({shown}): each pair is counted "
                         f"once; {fix}")


def _integers(table: pd.DataFrame, column: str, where: str, fix: str) -> np.ndarray:
    """A count column as int64, refused where a cell is not a whole number >= 0."""
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~(np.isfinite(values) & (values >= 0) & (values == np.round(values)))
    if bad.any():
        raise ValueError(f"{where}: column {column!r} holds {_shown(table[column].iloc[_first_row(bad) - 2])} (row "
                         f"{_first_row(bad)}), not a count (a whole number >= 0); {fix}")
    return values.astype(np.int64)


def check_counts(recovery: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """Refuse counts that contradict each other: ``n_true`` above ``n_components``, ``n_true != tp + fn`` (where the
    table holds ``tp`` and ``fn``, as report-recovery writes them), or a concept (experiment, scorer, seed, concept)
    whose rows disagree on ``n_true`` or ``n_components``: each would move the truth's size ``n_true / n_components``,
    the K every pair is read at.

    Raises:
        ValueError: naming the file, the row, the column and both values.
    """
    n_true = _integers(recovery, "n_true", where, fix)
    n_components = _integers(recovery, "n_components", where, fix)
    above = n_true > n_components
    if above.any():
        row = _first_row(above)
        raise ValueError(f"{where}: row {row} has n_true {n_true[row - 2]} above n_components {n_components[row - 2]}"
                         f"; {fix}")
    if {"tp", "fn"} <= set(recovery.columns):
        found = _integers(recovery, "tp", where, fix) + _integers(recovery, "fn", where, fix)
        wrong = found != n_true
        if wrong.any():
            row = _first_row(wrong)
            raise ValueError(f"{where}: row {row} has n_true {n_true[row - 2]} but tp + fn = {found[row - 2]} (every "
                             f"true component is found or missed): the truth's size would move every pair's K; {fix}")
    concept = [recovery[c].to_numpy() for c in ("experiment", "scorer", "seed", "concept") if c in recovery.columns]
    for column, values in (("n_true", n_true), ("n_components", n_components)):
        first = pd.Series(values).groupby(concept, sort=False).transform("first").to_numpy()
        differs = values != first
        if differs.any():
            row = _first_row(differs)
            raise ValueError(f"{where}: the rows of concept {recovery['concept'].iloc[row - 2]!r} disagree on "
                             f"{column} (row {row}: {values[row - 2]}, its first row: {first[row - 2]}): one concept "
                             f"has one truth; {fix}")


def check_recovery(recovery: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """A recovery table's pairing columns filled, each (pair, method, K) once, its counts consistent
    (:func:`check_filled`, :func:`check_unique`, :func:`check_counts`)."""
    keys = [*RECOVERY_KEYS, *(["seed"] if "seed" in recovery.columns else [])]
    check_filled(recovery, keys, where, fix)
    check_unique(recovery, keys, where, fix)
    check_counts(recovery, where, fix)


def check_stability(stability: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """A stability table's pairing columns filled and each (pair, K) once."""
    keys = [*STABILITY_KEYS, *(["seed"] if "seed" in stability.columns else [])]
    check_filled(stability, keys, where, fix)
    check_unique(stability, keys, where, fix)


def check_auroc(auroc: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """A recovery AUROC table's pairing columns filled and each (pair, method) once (``k_target`` may be empty: a
    method with no selected K, whose H1b pair is counted dropped)."""
    keys = [*AUROC_KEYS, *(["seed"] if "seed" in auroc.columns else [])]
    check_filled(auroc, keys, where, fix)
    check_unique(auroc, [k for k in keys if k != "at_selected_setting"], where, fix)


def _on_units(pairs: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """``pairs`` over every pair of ``units`` (the recovery table's): a pair the other table lacks gets NaN values,
    so :func:`_row` counts it dropped rather than losing it."""
    return units.merge(pairs, on=list(PAIR_KEYS), how="outer")


def _pairs(table: pd.DataFrame, value: str, a: str, b: str, keys: Sequence[str]) -> pd.DataFrame:
    """Rows of method ``a`` and ``b`` joined on ``keys`` (columns ``a``, ``b`` hold ``value``)."""
    wide = table[table["method"].isin([a, b])].pivot_table(index=list(keys), columns="method", values=value,
                                                           aggfunc="first", dropna=False)
    return wide.reindex(columns=[a, b]).reset_index()


def _row(hypothesis: str, experiment: str, scorer: str, k: float, pairs: pd.DataFrame, a: str, b: str,
         alternative: str, non_inferior: bool = False) -> dict:
    """One hypothesis' row: ``a`` (certified) against ``b`` (baseline) over the pairs with both values. A
    superiority claim holds when the one-sided test rejects at :data:`ALPHA`; a non-inferiority claim (H3) when the
    test of "lower" does not reject and the mean difference is >= 0."""
    usable = pairs.dropna(subset=[a, b])
    statistic, pvalue = signed_rank_test(usable[a].to_numpy(), usable[b].to_numpy(), alternative)
    diff = float((usable[a] - usable[b]).mean()) if len(usable) else float("nan")
    if non_inferior:
        holds = bool(np.isfinite(pvalue) and pvalue >= ALPHA and diff >= 0)
    else:
        holds = bool(np.isfinite(pvalue) and pvalue < ALPHA)
    return {"hypothesis": hypothesis, "claim": CLAIMS[hypothesis], "experiment": experiment, "scorer": scorer,
            "k": k, "n_pairs": int(len(usable)), "n_dropped": int(len(pairs) - len(usable)),
            "seeds": " ".join(str(s) for s in sorted(set(usable["seed"].tolist()))) if "seed" in usable else "",
            "certified": float(usable[a].mean()) if len(usable) else float("nan"),
            "baseline": float(usable[b].mean()) if len(usable) else float("nan"), "mean_difference": diff,
            "statistic": statistic, "pvalue": pvalue, "alternative": alternative, "holds": holds}


def hypothesis_table(recovery: pd.DataFrame, stability: pd.DataFrame | None = None,
                     auroc: pd.DataFrame | None = None) -> pd.DataFrame:
    """H1a, H1b, H2 and H3 per experiment and scorer (module docstring), pairs over concept x seed x setting.

    Args:
        recovery: ``testbed/recovery.csv`` rows (every method and K), with a ``seed`` column when several model
            seeds are pooled (absent: one seed, 0).
        stability: ``testbed/stability.csv`` rows (likewise), or None (no H2).
        auroc: ``testbed/recovery_auroc.csv`` rows (each method's K chosen on held-out data), or None (no H1b).

    Returns:
        One row per hypothesis, experiment and scorer, columns :data:`COLUMNS`.

    Raises:
        ValueError: a table lacks the columns it needs, leaves a pairing column empty, repeats a row or holds counts
            that contradict each other (:func:`check_recovery`, :func:`check_stability`, :func:`check_auroc`; named).
    """
    recovery = recovery.assign(seed=recovery["seed"] if "seed" in recovery else 0)
    require_columns(recovery, ["experiment", "scorer", "concept", "setting", "method", "k_target", "precision",
                               "recall", "n_true", "n_components"], "the recovery table")
    check_recovery(recovery, "the recovery table")
    if stability is not None:
        stability = stability.assign(seed=stability["seed"] if "seed" in stability else 0)
        require_columns(stability, ["experiment", "scorer", "concept", "setting", "k_target", "baseline_change_share",
                                    "certified_flip_share"], "the stability table")
        check_stability(stability, "the stability table")
    if auroc is not None:
        auroc = auroc.assign(seed=auroc["seed"] if "seed" in auroc else 0)
        require_columns(auroc, ["experiment", "scorer", "concept", "setting", "method", "k_target",
                                "at_selected_setting"], "the recovery AUROC table")
        check_auroc(auroc, "the recovery AUROC table")
    rows = []
    for (experiment, scorer), part in recovery.groupby(["experiment", "scorer"], sort=False):
        k = truth_size_k(part["n_true"], part["n_components"], part["k_target"])
        at = part[np.isclose(part["k_target"], k)]
        units = part[list(PAIR_KEYS)].drop_duplicates()
        rows.append(_row("H1a", experiment, scorer, k, _pairs(at, "precision", "certified_in", "baseline", PAIR_KEYS),
                         "certified_in", "baseline", "greater"))
        if auroc is not None:
            rows.append(_h1b(part, auroc, experiment, scorer))
        if stability is not None:
            rows.append(_h2(stability, experiment, scorer, k, units))
        rows.append(_row("H3", experiment, scorer, k,
                         _pairs(at, "recall", "certified_in_abstain", "baseline", PAIR_KEYS),
                         "certified_in_abstain", "baseline", "less", non_inferior=True))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _h1b(part: pd.DataFrame, auroc: pd.DataFrame, experiment: str, scorer: str) -> dict:
    """H1b: both circuits at the K the certified-in selection chose (per concept, seed and setting); a pair with no
    chosen K, or whose chosen K has no recovery row, is counted dropped."""
    chosen = auroc[(auroc["experiment"] == experiment) & (auroc["scorer"] == scorer)
                   & (auroc["method"] == "certified_in") & auroc["at_selected_setting"].astype(bool)]
    units = chosen[list(PAIR_KEYS)].drop_duplicates()
    keys = ["seed", "concept", "setting"]
    picked = chosen[keys + ["k_target"]].rename(columns={"k_target": "chosen_k"}).dropna()
    merged = part.merge(picked, on=keys)  # the chosen K is a K of the grid (report-recovery reads it there)
    merged = merged[np.isclose(merged["k_target"], merged["chosen_k"])]
    ks = sorted(set(picked["chosen_k"].round(9)))
    return _row("H1b", experiment, scorer, float(ks[0]) if len(ks) == 1 else float("nan"),
                _on_units(_pairs(merged, "precision", "certified_in", "baseline", PAIR_KEYS), units), "certified_in",
                "baseline", "greater")


def _h2(stability: pd.DataFrame, experiment: str, scorer: str, k: float, units: pd.DataFrame) -> dict:
    """H2: in<->out flips of certified labels vs baseline membership changes, per pair, at the grid K nearest ``k``;
    a pair of the recovery table (of a setting the stability table holds) with no stability row is counted dropped."""
    part = stability[(stability["experiment"] == experiment) & (stability["scorer"] == scorer)]
    if part.empty:
        empty = pd.DataFrame(columns=["certified_flip_share", "baseline_change_share"])
        return _row("H2", experiment, scorer, k, empty, "certified_flip_share", "baseline_change_share", "less")
    at_k = nearest_k(part["k_target"].unique(), k)
    at = part[np.isclose(part["k_target"], at_k)][[*PAIR_KEYS, "certified_flip_share", "baseline_change_share"]]
    units = units[units["setting"].isin(set(part["setting"]))]  # stability runs at some settings only (vision: one)
    return _row("H2", experiment, scorer, at_k, _on_units(at, units), "certified_flip_share", "baseline_change_share",
                "less")
