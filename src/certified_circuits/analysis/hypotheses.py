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

An empty certified circuit has no precision: its pair is left out of H1 and counted in ``n_dropped``.
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
COLUMNS = ("hypothesis", "claim", "experiment", "scorer", "k", "n_pairs", "n_dropped", "certified", "baseline",
           "mean_difference", "statistic", "pvalue", "alternative", "holds")
#: what identifies one pair
PAIR_KEYS = ("experiment", "scorer", "seed", "concept", "setting")
CLAIMS = {
    "H1a": "certified-in precision > baseline precision at the truth's size",
    "H1b": "certified-in precision > baseline precision at the K certified selection chose on held-out data",
    "H2": "certified labels flip in<->out less often than baseline memberships change (bootstrap resamples)",
    "H3": "certified-in-plus-abstain recall >= baseline recall at the truth's size",
}


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
        ValueError: a table lacks the columns it needs (named).
    """
    recovery = recovery.assign(seed=recovery["seed"] if "seed" in recovery else 0)
    require_columns(recovery, ["experiment", "scorer", "concept", "setting", "method", "k_target", "precision",
                               "recall", "n_true", "n_components"], "the recovery table")
    rows = []
    for (experiment, scorer), part in recovery.groupby(["experiment", "scorer"], sort=False):
        k = truth_size_k(part["n_true"], part["n_components"], part["k_target"])
        at = part[np.isclose(part["k_target"], k)]
        rows.append(_row("H1a", experiment, scorer, k, _pairs(at, "precision", "certified_in", "baseline", PAIR_KEYS),
                         "certified_in", "baseline", "greater"))
        if auroc is not None:
            rows.append(_h1b(part, auroc, experiment, scorer))
        if stability is not None:
            rows.append(_h2(stability, experiment, scorer, k))
        rows.append(_row("H3", experiment, scorer, k,
                         _pairs(at, "recall", "certified_in_abstain", "baseline", PAIR_KEYS),
                         "certified_in_abstain", "baseline", "less", non_inferior=True))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _h1b(part: pd.DataFrame, auroc: pd.DataFrame, experiment: str, scorer: str) -> dict:
    """H1b: both circuits at the K the certified-in selection chose (per concept, seed and setting)."""
    auroc = auroc.assign(seed=auroc["seed"] if "seed" in auroc else 0)
    require_columns(auroc, ["experiment", "scorer", "concept", "setting", "method", "k_target",
                            "at_selected_setting"], "the recovery AUROC table")
    chosen = auroc[(auroc["experiment"] == experiment) & (auroc["scorer"] == scorer)
                   & (auroc["method"] == "certified_in") & auroc["at_selected_setting"].astype(bool)]
    keys = ["seed", "concept", "setting"]
    picked = chosen[keys + ["k_target"]].rename(columns={"k_target": "chosen_k"}).dropna()
    merged = part.merge(picked, on=keys)  # the chosen K is a K of the grid (report-recovery reads it there)
    merged = merged[np.isclose(merged["k_target"], merged["chosen_k"])]
    ks = sorted(set(picked["chosen_k"].round(9)))
    return _row("H1b", experiment, scorer, float(ks[0]) if len(ks) == 1 else float("nan"),
                _pairs(merged, "precision", "certified_in", "baseline", PAIR_KEYS), "certified_in", "baseline",
                "greater")


def _h2(stability: pd.DataFrame, experiment: str, scorer: str, k: float) -> dict:
    """H2: in<->out flips of certified labels vs baseline membership changes, per pair, at the grid K nearest ``k``."""
    stability = stability.assign(seed=stability["seed"] if "seed" in stability else 0)
    require_columns(stability, ["experiment", "scorer", "concept", "setting", "k_target", "baseline_change_share",
                                "certified_flip_share"], "the stability table")
    part = stability[(stability["experiment"] == experiment) & (stability["scorer"] == scorer)]
    if part.empty:
        empty = pd.DataFrame(columns=["certified_flip_share", "baseline_change_share"])
        return _row("H2", experiment, scorer, k, empty, "certified_flip_share", "baseline_change_share", "less")
    at_k = nearest_k(part["k_target"].unique(), k)
    at = part[np.isclose(part["k_target"], at_k)]
    return _row("H2", experiment, scorer, at_k, at, "certified_flip_share", "baseline_change_share", "less")
