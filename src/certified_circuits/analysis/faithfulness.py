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

Two grids (``language.faithfulness.grid``; docs/mib.md):

* ``paper`` (default): the curve at the run's K grid, with (0, 0) and (1, 1) added, as above.
* ``mib``: MIB's circuit-track protocol (hannamw/MIB-circuit-track, ``MIB_circuit_track/evaluation.py``
  ``evaluate_area_under_curve`` and ``print_results.py``, with hannamw/EAP-IG's ``Graph.apply_topn`` and
  ``Graph.prune``). At each fraction p of :data:`~certified_circuits.analysis.mib_constants.MIB_FRACTIONS` the
  circuit is the top ``n = floor(p E)`` edges of E (:func:`mib_edge_count`, :func:`topn_mask`), then pruned
  (:func:`prune_edges`: nodes without an incoming or an outgoing edge leave, with their edges, until nothing
  changes); its *effective size* is the edges left after pruning to that fixed point, over E (MIB records
  ``weighted_edge_count()`` after one prune pass at EAP-IG 7af394a, which can count a few edges more than the
  circuit it then evaluates: docs/mib.md). CPR ranks edges
  by their signed score (MIB's ``abs-False`` run) and CMD by ``|score|`` (``abs-True``); both integrate over the
  nominal fractions p, linearly, without added end points (:func:`mib_curve_areas`)::

      CPR = sum_i (p_{i+1} - p_i) (f_i + f_{i+1}) / 2,   CMD = sum_i (p_{i+1} - p_i) (|1 - f_i| + |1 - f_{i+1}|) / 2.

  A binary circuit (a certified one) has no ranking: both areas come from the same circuits
  (:func:`circuits_at_fractions` picks them).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from certified_circuits.analysis.mib_constants import MIB_FRACTIONS

#: per-row columns of the sufficiency tables: the circuit's metric, the empty circuit's and the full model's
FAITH_COLUMNS = ("m", "m_empty", "m_full")
#: K values at which faithfulness.csv also reports f (the issue's decision rule reads 0.25 and 0.5)
REPORTED_K = (0.25, 0.5)
#: which edge ranking each MIB area is computed from (``print_results.py``: CPR reads the abs-False run, CMD abs-True)
MIB_RANKING = {"cpr": "signed", "cmd": "absolute"}


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
        The two areas, with (0, 0) and (1, 1) added where ``k`` lacks 0 or 1 (:func:`curve_areas_by`, one curve).
    """
    k, f = np.asarray(k, dtype=np.float64), np.asarray(f, dtype=np.float64)
    if k.size == 0:  # the empty curve: from (0, 0) straight to (1, 1)
        k, f = np.zeros(1), np.zeros(1)
    order = np.argsort(k, kind="stable")
    cpr, cmd = curve_areas_by(np.zeros(k.size, dtype=np.int64), k[order], f[order])
    return float(cpr[0]), float(cmd[0])


def curve_areas_by(curve: np.ndarray, k: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(CPR, CMD) of many curves at once: trapezoid areas of f and of |1 - f| over K in [0, 1].

    Each curve is completed with (0, 0) where its smallest K is above 0 and with (1, 1) where its largest K is
    below 1; then, over its consecutive points ``(K_i, f_i)``,

        CPR = sum_i (K_{i+1} - K_i) (f_i + f_{i+1}) / 2,   CMD = sum_i (K_{i+1} - K_i) (|1 - f_i| + |1 - f_{i+1}|) / 2

    (``np.trapezoid``'s terms, summed in another order: equal to within 1e-15 relative). A NaN f gives NaN areas.

    Args:
        curve: int [R] the curve of each point, ``0 .. C - 1``, non-decreasing (points grouped by curve).
        k: float [R] K of each point, increasing within a curve.
        f: float [R] faithfulness of each point.

    Returns:
        ``(cpr, cmd)``, float [C] each.
    """
    curve, k, f = np.asarray(curve), np.asarray(k, dtype=np.float64), np.asarray(f, dtype=np.float64)
    n_curves = int(curve[-1]) + 1 if curve.size else 0
    gap = np.abs(1.0 - f)
    inner = curve[1:] == curve[:-1]  # consecutive points of one curve
    step = np.diff(k)[inner]
    starts = np.flatnonzero(np.r_[True, ~inner])
    ends = np.r_[starts[1:] - 1, curve.size - 1]
    left = np.where(k[starts] > 0, k[starts], 0.0)  # the segment from (0, 0); 0 wide where the curve starts at 0
    right = np.where(k[ends] < 1, 1.0 - k[ends], 0.0)  # the segment to (1, 1)

    def areas(y: np.ndarray, at_zero: float, at_one: float) -> np.ndarray:
        terms = np.concatenate([step * (y[:-1][inner] + y[1:][inner]) / 2.0,
                                left * (at_zero + y[starts]) / 2.0, right * (y[ends] + at_one) / 2.0])
        owner = np.concatenate([curve[:-1][inner], curve[starts], curve[ends]])
        return np.bincount(owner, weights=terms, minlength=n_curves)

    return areas(f, 0.0, 1.0), areas(gap, 1.0, 0.0)


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
    codes = curves.groupby(group, sort=False).ngroup().to_numpy()  # curves in order of first appearance
    kept = np.flatnonzero(codes >= 0)  # a row with a missing key belongs to no curve
    k, f = curves["k_target"].to_numpy(np.float64)[kept], curves["faithfulness"].to_numpy(np.float64)[kept]
    order = np.lexsort((k, codes[kept]))  # by curve, then K (stable: equal K keep the table's order)
    curve, k, f = codes[kept][order], k[order], f[order]
    cpr, cmd = curve_areas_by(curve, k, f)
    first = np.flatnonzero(np.r_[True, curve[1:] != curve[:-1]])  # each curve's smallest K
    out = curves[group].iloc[kept[np.unique(codes[kept], return_index=True)[1]]].reset_index(drop=True)
    out["cpr"], out["cmd"] = cpr, cmd
    out["n_k"] = np.bincount(curve)
    for column in ("m_full", "m_empty"):
        out[column] = curves[column].to_numpy(np.float64)[kept][order][first]
    for target in REPORTED_K:
        hit = np.isclose(k, target)
        at = np.full(len(out), np.nan)
        hit_curve, hit_first = np.unique(curve[hit], return_index=True)  # the first point of a curve at that K
        at[hit_curve] = f[hit][hit_first]
        out[f"f_k{target:g}"] = at
    return out


# ------------------------------------------------------------------------------------------ MIB's grid


def mib_edge_count(fraction: float, n_edges: int) -> int:
    """MIB's edge budget at one fraction: ``int(fraction * n_edges)`` (floor; ``evaluate_area_under_curve``).

    Args:
        fraction: p in (0, 1].
        n_edges: E, every edge of the graph (``len(graph.edges)``).

    Returns:
        ``floor(p E)``: e.g. 32 at p = 0.001 for GPT-2 Small's 32,491 edges.
    """
    if not 0 < float(fraction) <= 1:
        raise ValueError(f"an edge fraction is in (0, 1], got {fraction}")
    return int(float(fraction) * int(n_edges))


def topn_mask(scores: np.ndarray, n: int, absolute: bool) -> np.ndarray:
    """The top ``n`` edges by score: MIB's ``Graph.apply_topn(n, absolute)`` before pruning.

    Args:
        scores: float [E] edge scores (signed).
        n: how many edges to keep (0..E).
        absolute: rank by ``|score|`` (MIB's abs = True, CMD) or by the signed score (abs = False, CPR).

    Returns:
        bool [E]. Equal scores go to the lower edge index (this package's tie rule; MIB's
        ``torch.argsort`` leaves ties unspecified).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if not 0 <= int(n) <= scores.size:
        raise ValueError(f"n = {n} edges requested of a graph of {scores.size}")
    key = np.abs(scores) if absolute else scores
    order = np.argsort(-key, kind="stable")
    mask = np.zeros(scores.size, dtype=bool)
    mask[order[: int(n)]] = True
    return mask


def prune_edges(mask: np.ndarray, parent: np.ndarray, child: np.ndarray, input_node: int,
                logits_node: int) -> np.ndarray:
    """MIB's ``Graph.prune`` on an edge mask: the circuit MIB evaluates and counts.

    Repeatedly, a node other than ``logits`` stays iff it has an in-circuit outgoing edge and an in-circuit
    incoming edge (``input`` counts as having one), and an edge stays iff its parent stays and its child
    stays or is ``logits``; until nothing changes.

    Args:
        mask: bool [E] the circuit's edges.
        parent, child: int [E] node ids of each edge's ends (a head's q, k and v inputs are the head's node).
        input_node: the id of ``input``.
        logits_node: the id of ``logits``.

    Returns:
        bool [E], a subset of ``mask``; its sum is the effective size of the circuit MIB evaluates (the pruning's
        fixed point; MIB's recorded ``weighted_edge_count`` after one pass can be larger: docs/mib.md).
    """
    keep = np.asarray(mask, dtype=bool).copy()
    parent, child = np.asarray(parent), np.asarray(child)
    n_nodes = int(max(parent.max(initial=0), child.max(initial=0), input_node, logits_node)) + 1
    while True:
        outgoing = np.zeros(n_nodes, dtype=bool)
        incoming = np.zeros(n_nodes, dtype=bool)
        outgoing[parent[keep]] = True
        incoming[child[keep]] = True
        incoming[input_node] = True
        alive = outgoing & incoming
        alive[logits_node] = True
        new = keep & alive[parent] & alive[child]
        if np.array_equal(new, keep):
            return new
        keep = new


def mib_curve_areas(fractions: Sequence[float], f: Sequence[float]) -> tuple[float, float]:
    """(CPR, CMD) as MIB integrates them: trapezoids over the nominal fractions, no end points added.

    Args:
        fractions: the fractions p of the curve (sorted here; MIB's run covers 0.001..1).
        f: faithfulness at each fraction.

    Returns:
        ``(sum (p2 - p1)(f1 + f2)/2, sum (p2 - p1)(|1 - f1| + |1 - f2|)/2)`` (``area_under``, ``area_from_1``).
    """
    p, f = np.asarray(fractions, dtype=np.float64), np.asarray(f, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    p, f = p[order], f[order]
    return float(np.trapezoid(f, p)), float(np.trapezoid(np.abs(1.0 - f), p))


def circuits_at_fractions(decision: np.ndarray, k_grid: Sequence[float], rank_scores: np.ndarray,
                          fractions: Sequence[float] = MIB_FRACTIONS) -> list[dict]:
    """The certified circuit submitted at each MIB fraction (MIB: "no more than" ``floor(p E)`` edges).

    At fraction p: the certified-in edges at the largest K of the grid with K <= p (a 1e-9 tolerance); when
    more of them are certified in than the budget ``floor(p E)``, the budget's best by ``rank_scores`` are
    kept (``truncated``); with no K <= p in the grid, the empty circuit (``k`` None).

    Args:
        decision: int [nK, E] in {1 in, 0 out, -1 abstain}.
        k_grid: the nK values of K.
        rank_scores: float [E] the ranking of the votes (EAP-IG: ``|mean|``), higher first, ties to the lower index.
        fractions: the fractions p.

    Returns:
        Per fraction: ``{"fraction", "k", "k_index", "budget", "in_graph" (bool [E]), "truncated", "n_in"}``.
    """
    decision = np.asarray(decision)
    k_grid = np.asarray(k_grid, dtype=np.float64)
    if decision.ndim != 2 or decision.shape[0] != k_grid.size:
        raise ValueError(f"decision has shape {decision.shape}, expected ({k_grid.size}, edges)")
    n_edges = decision.shape[1]
    order = np.argsort(-np.asarray(rank_scores, dtype=np.float64), kind="stable")
    out = []
    for p in fractions:
        budget = mib_edge_count(p, n_edges)
        below = np.flatnonzero(k_grid <= float(p) + 1e-9)
        mask = np.zeros(n_edges, dtype=bool)
        k = index = None
        truncated = False
        if below.size:
            index = int(below[np.argmax(k_grid[below])])
            k = float(k_grid[index])
            mask = decision[index] == 1
            if mask.sum() > budget:
                ranked_in = order[mask[order]]
                mask = np.zeros(n_edges, dtype=bool)
                mask[ranked_in[:budget]] = True
                truncated = True
        out.append(dict(fraction=float(p), k=k, k_index=index, budget=budget, in_graph=mask,
                        truncated=truncated, n_in=int(mask.sum())))
    return out


def mib_faithfulness_table(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """CPR and CMD on MIB's grid per (keys, concept, circuit family), from rows of the MIB evaluation.

    Rows carry ``method`` (``baseline`` or ``certified``), ``ranking`` (``signed``, ``absolute`` or ``binary``),
    ``k_target`` (the fraction p) and :data:`FAITH_COLUMNS`. CPR comes from the ``signed`` rows and CMD from the
    ``absolute`` rows (:data:`MIB_RANKING`); a ``binary`` family (certified circuits) gives both.

    Args:
        table: the MIB evaluation rows.
        keys: row keys besides ``concept`` and ``method``.

    Returns:
        One row per (keys, concept, method): ``cpr``, ``cmd``, ``cpr_ranking``, ``cmd_ranking``, ``n_k``.
    """
    curves = faithfulness_curves(table)
    group = [k for k in dict.fromkeys([*keys, "concept", "method"]) if k in curves.columns]
    out = []
    for key, part in curves.groupby(group, sort=False):
        row = dict(zip(group, key if isinstance(key, tuple) else (key,)))
        for area, ranking in MIB_RANKING.items():
            rows = part[part["ranking"] == ranking]
            if rows.empty:
                rows, ranking = part[part["ranking"] == "binary"], "binary"
            cpr, cmd = mib_curve_areas(rows["k_target"], rows["faithfulness"])
            row[area] = cpr if area == "cpr" else cmd
            row[f"{area}_ranking"] = ranking
            row["n_k"] = len(rows)
        out.append(row)
    return pd.DataFrame(out)
