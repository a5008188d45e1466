"""The noise sweep's own hypothesis test (issue 42; docs/noise_sweep.md): historical, kept so that its recorded
tables can be reproduced. It is not the project's test of H1-H3.

**The accepted test** is the workflow's ``report-hypotheses``:
:func:`certified_circuits.analysis.hypotheses.truth_size_hypotheses`, which runs
:func:`certified_circuits.analysis.seed_tests.seed_hypothesis_table` on the truth-size tables (the model seed is the
unit, certified and baseline circuits of equal size, the exact sign-flip test, Holm within each hypothesis). This
module is what the noise sweep (experiments/noise_sweep.py, :func:`cell_hypotheses` there) recorded before that:
pairs over concept x model seed x setting (settings counted as pairs), certified circuits beside baseline circuits
of another size (docs/embedded_default.md, "How they came out", and docs/fair_testbed.md say why that was
superseded). It moved here from ``analysis/hypotheses.py`` (issue 52: the library keeps one hypothesis test); its
numbers are those of the library's former ``hypothesis_table``, bit for bit.

The test: a one-sided paired Wilcoxon signed-rank test
(:func:`certified_circuits.analysis.evaluation.signed_rank_test`, ``zero_method="zsplit"``: a tie counts half for each
side, so identical pairs weigh against neither), at :data:`ALPHA`, per experiment and scorer:

- **H1a** certified-in precision > baseline precision at the truth's size (the grid K nearest the truth's share
  ``n_true / n_components``, :func:`certified_circuits.analysis.recovery.truth_size_k`);
- **H2** between bootstrap resamples, the share of certified labels that flip in <-> out < the share of baseline
  memberships that change (the stability rows, at the grid K of the stability table nearest that K);
- **H3** certified-in-plus-abstain recall >= baseline recall at the truth's size: tested against H0 "lower"
  (alternative ``less``); it holds when that test does not reject at alpha and the mean difference is >= 0.

An empty certified circuit has no precision: its pair is left out of H1a and counted in ``n_dropped``; so is a pair
of the recovery table that the stability table lacks. ``seeds`` names the model seeds whose pairs entered each test.
Every table is checked before any pair is formed, by the library's checks
(:func:`certified_circuits.analysis.hypotheses.check_filled`, ``check_unique``, ``check_counts``): an empty pairing
cell, a row given twice and counts that contradict each other are refused, never re-counted (issue 53).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.evaluation import signed_rank_test
from certified_circuits.analysis.hypotheses import TABLE_FIX, check_counts, check_filled, check_unique
from certified_circuits.analysis.recovery import nearest_k, truth_size_k
from certified_circuits.storage.tables import require_columns

#: the one-sided level every hypothesis was tested at (the recorded tables' level; fixed here so they reproduce)
ALPHA = 0.05
#: columns of :func:`hypothesis_table`
COLUMNS = ("hypothesis", "claim", "experiment", "scorer", "k", "n_pairs", "n_dropped", "seeds", "certified",
           "baseline", "mean_difference", "statistic", "pvalue", "alternative", "holds")
#: what identifies one pair
PAIR_KEYS = ("experiment", "scorer", "seed", "concept", "setting")
#: the columns each table is paired on (with ``seed``): an empty cell would drop its row, a repeated key count it twice
RECOVERY_KEYS = ("experiment", "scorer", "concept", "setting", "method", "k_target")
STABILITY_KEYS = ("experiment", "scorer", "concept", "setting", "k_target")
CLAIMS = {
    "H1a": "certified-in precision > baseline precision at the truth's size",
    "H2": "certified labels flip in<->out less often than baseline memberships change (bootstrap resamples)",
    "H3": "certified-in-plus-abstain recall >= baseline recall at the truth's size",
}


def check_recovery(recovery: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """A recovery table's pairing columns filled, each (pair, method, K) once, its counts consistent.

    Args:
        recovery: recovery rows (every method and K), with or without a ``seed`` column.
        where: the table's name, for messages.
        fix: the end of every message.

    Raises:
        ValueError: from :func:`~certified_circuits.analysis.hypotheses.check_filled`, ``check_unique`` or
            ``check_counts``, naming ``where``, the row and the column.
    """
    keys = [*RECOVERY_KEYS, *(["seed"] if "seed" in recovery.columns else [])]
    check_filled(recovery, keys, where, fix)
    check_unique(recovery, keys, where, fix)
    check_counts(recovery, where, fix)


def check_stability(stability: pd.DataFrame, where: str, fix: str = TABLE_FIX) -> None:
    """A stability table's pairing columns filled and each (pair, K) once.

    Args:
        stability: stability rows, with or without a ``seed`` column.
        where: the table's name, for messages.
        fix: the end of every message.

    Raises:
        ValueError: an empty pairing cell or a repeated row, naming ``where`` and the row.
    """
    keys = [*STABILITY_KEYS, *(["seed"] if "seed" in stability.columns else [])]
    check_filled(stability, keys, where, fix)
    check_unique(stability, keys, where, fix)


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
    superiority claim holds when the one-sided test rejects at :data:`ALPHA` (``p < ALPHA``); a non-inferiority claim
    (H3) when the test of "lower" does not reject (``p >= ALPHA``) and the mean difference ``mean(a - b)`` is >= 0."""
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


def hypothesis_table(recovery: pd.DataFrame, stability: pd.DataFrame | None = None) -> pd.DataFrame:
    """H1a, H2 and H3 per experiment and scorer (module docstring), pairs over concept x seed x setting: the noise
    sweep's historical test (the accepted one is
    :func:`certified_circuits.analysis.hypotheses.truth_size_hypotheses`).

    Args:
        recovery: recovery rows (every method and K; columns experiment, scorer, concept, setting, method, k_target,
            precision, recall, n_true, n_components), with a ``seed`` column when several model seeds are pooled
            (absent: one seed, 0).
        stability: stability rows (likewise; baseline_change_share, certified_flip_share), or None (no H2).

    Returns:
        One row per hypothesis, experiment and scorer, columns :data:`COLUMNS`: ``k`` the K read, ``n_pairs`` the
        pairs with both values, ``certified`` and ``baseline`` their means, ``mean_difference`` the mean of
        certified - baseline, ``statistic`` and ``pvalue`` the signed-rank test's, ``holds`` the claim's verdict.

    Raises:
        ValueError: a table lacks the columns it needs, leaves a pairing column empty, repeats a row or holds counts
            that contradict each other (:func:`check_recovery`, :func:`check_stability`; named).
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
    rows = []
    for (experiment, scorer), part in recovery.groupby(["experiment", "scorer"], sort=False):
        k = truth_size_k(part["n_true"], part["n_components"], part["k_target"])
        at = part[np.isclose(part["k_target"], k)]
        units = part[list(PAIR_KEYS)].drop_duplicates()
        rows.append(_row("H1a", experiment, scorer, k, _pairs(at, "precision", "certified_in", "baseline", PAIR_KEYS),
                         "certified_in", "baseline", "greater"))
        if stability is not None:
            rows.append(_h2(stability, experiment, scorer, k, units))
        rows.append(_row("H3", experiment, scorer, k,
                         _pairs(at, "recall", "certified_in_abstain", "baseline", PAIR_KEYS),
                         "certified_in_abstain", "baseline", "less", non_inferior=True))
    return pd.DataFrame(rows, columns=list(COLUMNS))


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
