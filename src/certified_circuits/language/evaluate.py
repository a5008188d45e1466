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
"""

from __future__ import annotations

import os
from typing import Mapping

import numpy as np
import pandas as pd

from certified_circuits.language.patching import evaluate_edge_masks, full_model_metrics
from certified_circuits.language.tasks import read_jsonl
from certified_circuits.language.tokenizer import encode_examples
from certified_circuits.analysis.paired_tests import OUTCOME_COLUMN, encode_outcomes

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
    from certified_circuits.language.hooked import BridgeGraphModel

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
    model = lm.weights if lm.weights is not None else BridgeGraphModel(lm.bridge, g)
    rows = []
    for eval_set, path in eval_sets.items():
        examples = read_jsonl(path)
        bad = [e.id for e in examples if e.task != task]
        if bad:
            raise ValueError(f"{path} holds examples of another task than {task!r} ({bad[:3]})")
        batch = encode_examples(examples, lm.tokenizer, max_len=lm.n_positions)
        full = full_model_metrics(model, batch, device=device)
        res = evaluate_edge_masks(model, batch, stacked, device=device, progress=progress,
                                  budget_floats=budget_floats)
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


def evaluate_task(model: str, model_path: str | None, task: str, votes, certificates,
                  eval_sets: Mapping[str, str | os.PathLike], *, experiment: str = "language",
                  device: str = "cpu", budget_floats: float | None = None) -> pd.DataFrame:
    """Load the model and evaluate the baseline / majority / certified circuits of ``votes``+``certificates``."""
    from certified_circuits.core.certification import method_masks
    from certified_circuits.language.models import load_language_model

    lm = load_language_model(model, model_path)
    if lm.weights is not None:
        lm.weights = lm.weights.to(device)
    if lm.bridge is not None:
        lm.bridge.to(device)
    masks = method_masks(votes, certificates)
    return circuit_table(lm, task, masks, np.asarray(votes.k_grid), eval_sets, experiment=experiment, device=device,
                         budget_floats=budget_floats)
