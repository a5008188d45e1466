"""Faithfulness of circuits as the MIB benchmark's circuit-localization track measures it (Mueller et al.
2025), beside the paper's cACC.

For a circuit C of a model M and a task metric m,

    f(C) = (m(C) - m(empty)) / (m(M) - m(empty)),

where m(empty) is the model with every component ablated the same way as C's complement (zero ablation
of every channel for vision, every edge patched to the corrupted run for language) and m(M) the full
model. m is, per eval set:

* vision: the class logit minus the mean of the other logits, averaged over the eval set's images of
  the class (the circuit's class);
* language: the logit difference of answer and distractor at the last position, averaged over prompts.

Over the K grid, with K = 0 as the empty circuit (f = 0) and K = 1 as the full model (f = 1) added where
the grid lacks them, the trapezoid areas are

    CPR = integral_0^1 f(K) dK                (higher is better; MIB's "circuit performance ratio")
    CMD = integral_0^1 |1 - f(K)| dK          (lower is better; MIB's "circuit-model difference").

Unlike cACC, f rewards a circuit for reproducing the model's *margin*, not for the argmax: a circuit that
removes every other class's evidence can reach cACC 1 while its margin, and so f, overshoots 1; CMD
counts the overshoot as a difference from the model. A circuit that keeps every component *is* the full
model, so the evaluation stages give it m(M) itself: the baseline at K = 1 has f = 1 exactly.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

#: per-row columns of the sufficiency tables: the circuit's metric, the empty circuit's and the full model's
FAITH_COLUMNS = ("m", "m_empty", "m_full")
#: K values at which faithfulness.csv also reports f (the issue's decision rule reads 0.25 and 0.5)
REPORTED_K = (0.25, 0.5)


def faithfulness(m: np.ndarray, m_empty: np.ndarray, m_full: np.ndarray) -> np.ndarray:
    """f = (m - m_empty) / (m_full - m_empty), elementwise; NaN where the model and the empty circuit agree.

    Args:
        m, m_empty, m_full: the circuit's, the empty circuit's and the full model's metric.

    Returns:
        float64 array of f.
    """
    m, m_empty, m_full = (np.asarray(a, dtype=np.float64) for a in (m, m_empty, m_full))
    span = m_full - m_empty
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(span != 0, (m - m_empty) / span, np.nan)


def curve_areas(k: Sequence[float], f: Sequence[float]) -> tuple[float, float]:
    """(CPR, CMD): trapezoid areas of f and of |1 - f| over K in [0, 1].

    Args:
        k: K values of the curve (any order, in [0, 1]).
        f: faithfulness at each K.

    Returns:
        The two areas, with (0, 0) and (1, 1) added where ``k`` lacks 0 or 1.
    """
    k, f = np.asarray(k, dtype=np.float64), np.asarray(f, dtype=np.float64)
    order = np.argsort(k, kind="stable")
    k, f = k[order], f[order]
    if k.size == 0 or k[0] > 0:
        k, f = np.r_[0.0, k], np.r_[0.0, f]
    if k[-1] < 1:
        k, f = np.r_[k, 1.0], np.r_[f, 1.0]
    return float(np.trapezoid(f, k)), float(np.trapezoid(np.abs(1.0 - f), k))


def faithfulness_curves(table: pd.DataFrame) -> pd.DataFrame:
    """The circuit rows of a sufficiency table with their f (column ``faithfulness``); the ``full`` rows dropped."""
    rows = table[table["method"] != "full"].copy()
    rows["faithfulness"] = faithfulness(rows["m"], rows["m_empty"], rows["m_full"])
    return rows


def faithfulness_table(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """CPR and CMD per (keys, concept, method), with f at :data:`REPORTED_K`.

    Args:
        table: a sufficiency table with :data:`FAITH_COLUMNS` (one row per circuit and K).
        keys: row keys besides ``concept`` and ``method`` (experiment, scorer, setting, eval_set).

    Returns:
        One row per curve: keys, concept, method, ``cpr``, ``cmd``, ``f_k0.25``, ``f_k0.5``, ``m_full``,
        ``m_empty``, ``n_k``.
    """
    curves = faithfulness_curves(table)
    group = [k for k in dict.fromkeys([*keys, "concept", "method"]) if k in curves.columns]
    out = []
    for key, part in curves.groupby(group, sort=False):
        part = part.sort_values("k_target")
        cpr, cmd = curve_areas(part["k_target"], part["faithfulness"])
        row = dict(zip(group, key if isinstance(key, tuple) else (key,)))
        row.update(cpr=cpr, cmd=cmd, n_k=len(part), m_full=float(part["m_full"].iloc[0]),
                   m_empty=float(part["m_empty"].iloc[0]))
        for k in REPORTED_K:
            hit = part[np.isclose(part["k_target"], k)]
            row[f"f_k{k:g}"] = float(hit["faithfulness"].iloc[0]) if len(hit) else np.nan
        out.append(row)
    return pd.DataFrame(out)
