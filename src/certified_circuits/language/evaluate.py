"""Sufficiency table of language circuits (paper, Section 5 "cACC" and Appendix C; docs/architecture.md, section 2).

For one task: every (method, K) circuit from the votes and certificates (baseline EAP-IG top-K, majority
vote at identical compute, certified-in edges) is evaluated on each eval set by interchange patching
(:mod:`.patching`); the unpatched model gives the ``full`` row. One batched pass per eval set evaluates
all masks. Output: tidy rows (experiment, concept, eval_set, method, k_target, k_effective, accuracy,
binary_accuracy, logit_diff, n_examples, per_example_correct: the exact-match outcome of every prompt as a 0/1
string for the per-example paired tests of :mod:`certified_circuits.analysis.paired_tests`; and faithfulness'
``m`` (the logit difference), ``m_empty`` (every edge patched: the corrupted run) and ``m_full`` (the full
model), :mod:`certified_circuits.analysis.faithfulness`; a circuit of every edge is the full model, so its
``m`` is ``m_full`` itself).

MIB's grid (``language.faithfulness.grid: mib``; docs/mib.md): :func:`mib_circuit_masks` builds, at each
fraction of :data:`~certified_circuits.analysis.mib_constants.MIB_FRACTIONS`, the baseline's top ``floor(p E)``
edges by signed score (for CPR) and by ``|score|`` (for CMD) and the certified circuit
(:func:`~certified_circuits.analysis.faithfulness.circuits_at_fractions`), each pruned as MIB's
``Graph.prune`` does; :func:`mib_table` evaluates them the same way as above (``k_target`` the fraction,
``k_effective`` the effective size: edges left after pruning over E).
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.language.patching import evaluate_edge_masks, full_model_metrics
from certified_circuits.language.tasks import read_jsonl
from certified_circuits.language.tokenizer import encode_examples
from certified_circuits.analysis.mib_constants import MIB_FRACTIONS
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, encode_outcomes

MIB_COLUMNS = ["experiment", "concept", "eval_set", "method", "ranking", "k_target", "n_edges_budget",
               "n_edges_effective", "k_effective", "k_certified", "truncated", "logit_diff", "n_examples",
               "m", "m_empty", "m_full"]
COLUMNS = ["experiment", "concept", "eval_set", "method", "k_target", "k_effective", "accuracy",
           "binary_accuracy", "logit_diff", "n_examples", OUTCOME_COLUMN, "m", "m_empty", "m_full"]


def edge_masks_of(graph, masks: np.ndarray) -> np.ndarray:
    """Edge masks [..., E] of circuits given as edges [..., E] or as heads and MLPs [..., n_up - 1]
    (node level: :meth:`~.graph.EAPGraph.node_edge_mask`); any other width is an error."""
    width = masks.shape[-1]
    if width == graph.n_edges:
        return masks
    if width == len(graph.upstream) - 1:
        return graph.node_edge_mask(masks)
    raise ValueError(f"circuits have {width} components but this model's graph has {graph.n_edges} edges and "
                     f"{len(graph.upstream) - 1} heads and MLPs: votes/certificates were made for another model")


def circuit_table(lm, task: str, masks: Mapping[str, np.ndarray], k_grid: np.ndarray,
                  eval_sets: Mapping[str, str | os.PathLike], *, experiment: str = "language",
                  device: str = "cpu", progress: bool = True, budget_floats: float | None = None) -> pd.DataFrame:
    """Evaluate bool [nK, U] masks per method (U edges, or heads and MLPs at node level) on every eval set
    (JSONL paths); returns the tidy table. ``k_effective`` is the kept fraction of the components."""
    from certified_circuits.core.discovery import effective_k

    g = lm.graph
    names = list(masks)
    for m in names:
        if masks[m].ndim != 2 or masks[m].shape[0] != len(k_grid):
            raise ValueError(f"{m} masks have shape {masks[m].shape}, expected ({len(k_grid)}, components)")
    stacked_units = np.concatenate([masks[m] for m in names], 0)
    k_eff = effective_k(stacked_units, np.zeros(stacked_units.shape[1], dtype=np.int32))
    stacked = edge_masks_of(g, stacked_units)
    every = stacked.all(1)                                            # the full model itself (f = 1 exactly)
    stacked = np.vstack([stacked, np.zeros((1, stacked.shape[1]), bool)])   # the empty circuit: m_empty
    rows = []
    for eval_set, (full, res) in _patched(lm, task, stacked, eval_sets, device=device, progress=progress,
                                          budget_floats=budget_floats):
        m_full, m_empty = float(full.logit_diff[0]), float(res.logit_diff[-1])
        faith = dict(m_empty=m_empty, m_full=m_full)
        rows.append(dict(experiment=experiment, concept=task, eval_set=eval_set, method="full", k_target=1.0,
                         k_effective=1.0, accuracy=full.accuracy[0], binary_accuracy=full.binary_accuracy[0],
                         logit_diff=full.logit_diff[0], n_examples=full.n_examples,
                         **{OUTCOME_COLUMN: encode_outcomes(full.correct)[0]}, m=m_full, **faith))
        outcomes = encode_outcomes(res.correct)
        for i in range(stacked.shape[0] - 1):
            m, k = names[i // len(k_grid)], float(k_grid[i % len(k_grid)])
            rows.append(dict(experiment=experiment, concept=task, eval_set=eval_set, method=m, k_target=k,
                             k_effective=float(k_eff[i]), accuracy=res.accuracy[i],
                             binary_accuracy=res.binary_accuracy[i], logit_diff=res.logit_diff[i],
                             n_examples=res.n_examples, **{OUTCOME_COLUMN: outcomes[i]},
                             m=m_full if every[i] else float(res.logit_diff[i]), **faith))
    return pd.DataFrame(rows, columns=COLUMNS)


def task_examples(path: str | os.PathLike, task: str) -> list:
    """The prompts of one eval set (JSONL), refused when any is of another task than ``task``."""
    examples = read_jsonl(path)
    bad = [e.id for e in examples if e.task != task]
    if bad:
        raise ValueError(f"{path} holds examples of another task than {task!r} ({bad[:3]})")
    return examples


def _patched(lm, task: str, stacked: np.ndarray, eval_sets: Mapping[str, str | os.PathLike], *, device: str,
             progress: bool, budget_floats: float | None):
    """Per eval set: ``(name, (full model metrics, metrics of every edge mask in stacked [M, E]))``, the one
    interchange-patched pass that :func:`circuit_table` and :func:`mib_table` share."""
    from certified_circuits.language.hooked import BridgeGraphModel

    model = lm.weights if lm.weights is not None else BridgeGraphModel(lm.bridge, lm.graph)
    for eval_set, path in eval_sets.items():
        batch = encode_examples(task_examples(path, task), lm.tokenizer, max_len=lm.n_positions)
        full = full_model_metrics(model, batch, device=device)
        yield eval_set, (full, evaluate_edge_masks(model, batch, stacked, device=device, progress=progress,
                                                   budget_floats=budget_floats))


def load_evaluation_model(model: str, model_path: str | os.PathLike | None, task: str,
                          eval_sets: Mapping[str, str | os.PathLike], device: str = "cpu"):
    """Load the language model for evaluating one task, on ``device``.

    The bridge-vs-Hugging-Face logits check of an ``hf`` model (:func:`~.models.load_language_model`'s
    ``prompts``) runs on the task's own eval prompts, clean and corrupted, of every eval set.

    Args:
        model, model_path: as :func:`~.models.load_language_model`.
        task: the task; every eval set must hold only its prompts.
        eval_sets: eval set name -> JSONL path.
        device: a torch device name.

    Returns:
        The :class:`~.models.LanguageModel`, its weights and bridge moved to ``device``.
    """
    from certified_circuits.language.models import load_language_model

    prompts = [t for path in eval_sets.values() for e in task_examples(path, task) for t in (e.clean, e.corrupted)]
    return load_language_model(model, model_path, prompts=prompts, device=device)


def evaluate_task(model: str, model_path: str | None, task: str, votes, certificates,
                  eval_sets: Mapping[str, str | os.PathLike], *, experiment: str = "language",
                  device: str = "cpu", budget_floats: float | None = None) -> pd.DataFrame:
    """Load the model (:func:`load_evaluation_model`: its logits check on the task's eval prompts) and evaluate
    the baseline / majority / certified circuits of ``votes``+``certificates``."""
    from certified_circuits.core.certification import method_masks

    lm = load_evaluation_model(model, model_path, task, eval_sets, device)
    masks = method_masks(votes, certificates)
    return circuit_table(lm, task, masks, np.asarray(votes.k_grid), eval_sets, experiment=experiment, device=device,
                         budget_floats=budget_floats)


def edge_endpoints(graph) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Node ids of every edge's ends, for :func:`~certified_circuits.analysis.faithfulness.prune_edges`.

    Args:
        graph: an :class:`~.graph.EAPGraph`.

    Returns:
        ``(parent [E], child [E], input id, logits id)``: upstream nodes keep their index (``input`` is 0); a
        downstream input is its node's (a head's q, k and v inputs are the head, through
        :func:`~.names.node_of`); ``logits`` is ``len(graph.upstream)``.
    """
    from certified_circuits.language import names

    up_index = {name: i for i, name in enumerate(graph.upstream)}
    logits = len(graph.upstream)
    down_node = np.array([logits if names.node_of(d) == names.LOGITS else up_index[names.node_of(d)]
                          for d in graph.downstream], dtype=np.int64)
    return (np.asarray(graph.edge_up, dtype=np.int64), down_node[np.asarray(graph.edge_down)],
            up_index[names.INPUT], logits)


def mib_circuit_masks(graph, scores: np.ndarray, decision: np.ndarray | None = None,
                      k_grid: Sequence[float] | None = None, rank_scores: np.ndarray | None = None,
                      fractions: Sequence[float] | None = None) -> list[dict]:
    """The circuits MIB evaluates at each fraction, pruned (module docstring).

    Args:
        graph: the model's :class:`~.graph.EAPGraph`.
        scores: float [E] signed edge scores (the mean EAP-IG score on the concept dataset).
        decision: int [nK, E] a certificate's decisions (None: baselines only).
        k_grid: the certificate's K grid.
        rank_scores: the votes' ranking (default ``|scores|``), for a certified circuit over its budget.
        fractions: default MIB's.

    Returns:
        One dict per circuit: ``method`` (``baseline`` or ``certified``), ``ranking`` (``signed``,
        ``absolute`` or ``binary``), ``fraction``, ``budget`` (``floor(p E)``), ``mask`` (bool [E], pruned),
        ``k_certified`` and ``truncated`` (certified circuits).
    """
    from certified_circuits.analysis import faithfulness as fa

    fractions = tuple(MIB_FRACTIONS if fractions is None else fractions)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (graph.n_edges,):
        raise ValueError(f"scores have shape {scores.shape}, the graph has {graph.n_edges} edges (MIB's grid is "
                         f"defined on edges: a node-level run has no edge scores)")
    parent, child, source, sink = edge_endpoints(graph)
    out = []
    for ranking in ("signed", "absolute"):
        for p in fractions:
            n = fa.mib_edge_count(p, graph.n_edges)
            mask = fa.prune_edges(fa.topn_mask(scores, n, ranking == "absolute"), parent, child, source, sink)
            out.append(dict(method="baseline", ranking=ranking, fraction=float(p), budget=n, mask=mask,
                            k_certified=np.nan, truncated=False))
    if decision is not None:
        ranks = np.abs(scores) if rank_scores is None else rank_scores
        for c in fa.circuits_at_fractions(decision, k_grid, ranks, fractions):
            mask = fa.prune_edges(c["in_graph"], parent, child, source, sink)
            out.append(dict(method="certified", ranking="binary", fraction=c["fraction"], budget=c["budget"],
                            mask=mask, k_certified=np.nan if c["k"] is None else c["k"], truncated=c["truncated"]))
    return out


def mib_table(lm, task: str, circuits: Sequence[dict], eval_sets: Mapping[str, str | os.PathLike], *,
              experiment: str = "language", device: str = "cpu", progress: bool = True,
              budget_floats: float | None = None) -> pd.DataFrame:
    """Evaluate :func:`mib_circuit_masks`' circuits on every eval set by interchange patching.

    Args:
        lm: the loaded language model.
        task: the task (concept) name.
        circuits: :func:`mib_circuit_masks`' list.
        eval_sets: eval set name -> JSONL path.
        experiment, device, progress, budget_floats: as :func:`circuit_table`.

    Returns:
        Tidy rows (:data:`MIB_COLUMNS`): faithfulness' ``m``, ``m_empty`` (every edge patched) and ``m_full``;
        a circuit of every edge is the full model (``m = m_full``).
    """
    g = lm.graph
    stacked = np.vstack([c["mask"] for c in circuits] + [np.zeros((1, g.n_edges), bool)])
    every = stacked.all(1)
    rows = []
    for eval_set, (full, res) in _patched(lm, task, stacked, eval_sets, device=device, progress=progress,
                                          budget_floats=budget_floats):
        m_full, m_empty = float(full.logit_diff[0]), float(res.logit_diff[-1])
        for i, c in enumerate(circuits):
            n_eff = int(c["mask"].sum())
            rows.append(dict(experiment=experiment, concept=task, eval_set=eval_set, method=c["method"],
                             ranking=c["ranking"], k_target=c["fraction"], n_edges_budget=c["budget"],
                             n_edges_effective=n_eff, k_effective=n_eff / g.n_edges, k_certified=c["k_certified"],
                             truncated=bool(c["truncated"]), logit_diff=float(res.logit_diff[i]),
                             n_examples=res.n_examples, m=m_full if every[i] else float(res.logit_diff[i]),
                             m_empty=m_empty, m_full=m_full))
    return pd.DataFrame(rows, columns=MIB_COLUMNS)
