"""Certified language circuits in the field's format: hannamw/EAP-IG Graph JSON, the file MIB's circuit
track reads (one importance file per task and model).

For every task, at the K and setting chosen on held-out prompts for each method (the ``selected_cacc``
table of ``report-sufficiency --select-on validation``), :func:`write_task_graphs` writes into
``OUT/<task>/``:

* ``<method>_K<k>.json`` for ``baseline``, ``majority`` and ``certified``: every edge with its score and
  ``in_graph``: the method's circuit at its selected K. For ``certified`` only certified-in edges are
  in the graph; abstained and certified-out edges are not;
* ``certified_K<k>.decisions.json``: the sidecar that keeps the certificate: which edges are in, out or
  abstain, the setting and the certified radius;
* ``scores.json``: the scores alone (every ``in_graph`` false), for tools that choose their own circuit
  (MIB's circuit track sweeps its own sizes over the scores).

The score of an edge is its EAP-IG score on the concept dataset D: the mean of the per-example rows of
the attribution file (the reference's ``scores /= total_items``), signed. A node-level attribution file
(components are heads and MLPs) gives node scores; edges are then in the graph when both ends are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from certified_circuits.core.certification import method_masks
from certified_circuits.core.contracts import setting_columns
from certified_circuits.language import names as grammar
from certified_circuits.reports.eap_graph import circuit_graph_json, decisions_sidecar, graph_cfg, write_graph_json
from certified_circuits.storage.store import read_attributions, read_certificates, read_votes
from certified_circuits.storage.atomic import write_json
from certified_circuits.storage.tables import parse_k_column

METHODS = ("baseline", "majority", "certified")


def _k_label(k: float) -> str:
    return f"{float(k):g}"


def _node_edges(edge_names: Sequence[str], node_names: Sequence[str], node_in: np.ndarray) -> np.ndarray:
    """Edges whose parent and child are both in a node circuit (``input`` and ``logits`` always are)."""
    keep = {grammar.INPUT, grammar.LOGITS} | {n for n, k in zip(node_names, node_in) if k}
    out = np.zeros(len(edge_names), dtype=bool)
    for i, name in enumerate(edge_names):
        parent, child = grammar.edge_nodes(name)
        out[i] = parent in keep and child in keep
    return out


def graph_dict(cfg: Mapping, names: Sequence[str], scores: np.ndarray, in_circuit: np.ndarray) -> dict:
    """Graph JSON of a circuit over edges, or over heads and MLPs (node level: names without ``->``)."""
    if names and grammar.is_edge(names[0]):
        return circuit_graph_json(cfg, names, scores, in_circuit)
    edges = _edge_names_of(cfg)
    return circuit_graph_json(cfg, edges, np.zeros(len(edges)), _node_edges(edges, names, in_circuit),
                              node_scores=scores, node_names=names, node_in_graph=in_circuit)


def node_to_edge_view(cfg: Mapping, names: Sequence[str], *per_node: np.ndarray) -> tuple[list[str], ...]:
    """Edge names and per-edge copies of per-node arrays, for drawing a node-level circuit: an edge takes its
    parent's value, or its child's when the parent is ``input`` (always in the circuit; ``logits``: 0)."""
    edges = _edge_names_of(cfg)
    index = {n: i for i, n in enumerate(names)}
    pick = []
    for e in edges:
        parent, child = grammar.edge_nodes(e)
        node = parent if parent != grammar.INPUT else child
        pick.append(index.get(node, -1))
    pick = np.asarray(pick)
    out = []
    for values in per_node:
        values = np.asarray(values)
        padded = np.concatenate([values, np.zeros(1, dtype=values.dtype)])
        out.append(padded[pick])
    return (edges, *out)


#: what to do when the selected table is refused
GRAPHS_FIX = "pass the selected_cacc_raw.csv that report-sufficiency --select-on wrote"


def write_task_graphs(out_dir: str | os.PathLike, task: str, attributions: str | os.PathLike,
                      circuits: Sequence[tuple[str | os.PathLike, str | os.PathLike]],
                      selected: pd.DataFrame, where: str = "the selected table (--selected)") -> list[Path]:
    """Write one task's Graph JSON files (module docstring).

    Args:
        out_dir: the graphs folder; files go to ``out_dir/<task>/``.
        task: the task (concept) name.
        attributions: the task's train attribution file (scores, component names, model shape).
        circuits: ``(votes, certificates)`` paths of every setting of the task.
        selected: the ``selected_cacc_raw.csv`` table (rows of every task and eval set), as read (rows in file
            order).
        where: the table's file and option, for messages.

    Returns:
        The files written.

    Raises:
        ValueError: a method's ``<method>_k_target`` outside (0, 1] in any row (the one K parser,
            :func:`~certified_circuits.storage.tables.parse_k_column`: file, row and column), or empty in the task's
            row; no row of the task; a selected setting among no certificates given.
    """
    for method in METHODS:  # every row checked, its number the file's; an empty cell is refused for this task below
        selected = parse_k_column(selected, f"{method}_k_target", where, GRAPHS_FIX, allow_missing=True)
    rows = selected[selected.concept == task]
    if rows.empty:
        raise ValueError(f"the selected table has no row for task {task!r}: was it made with --select-on?")
    row = rows.iloc[0]
    empty = [m for m in METHODS if np.isnan(row[f"{m}_k_target"])]
    if empty:
        raise ValueError(f"{where}: task {task!r} (row {selected.index.get_loc(rows.index[0]) + 2}) has no "
                         f"{empty[0]}_k_target: the selection chose no K for it; {GRAPHS_FIX}")
    attr = read_attributions(attributions)
    scores = attr.scores["eap_ig"].mean(0).astype(np.float64)
    names = list(attr.names)
    level = str(attr.attrs.get("level", "edge"))
    cfg = graph_cfg(int(attr.attrs["n_layers"]), int(attr.attrs["n_heads"]), int(attr.attrs.get("d_model", 0)),
                    bool(int(attr.attrs.get("parallel_attn_mlp", 0))), model=str(attr.attrs.get("model_path", "")),
                    task=task, method=str(attr.attrs.get("method", "EAP-IG-inputs")), level=level)
    by_setting = {}
    for votes_path, cert_path in circuits:
        votes, certs = read_votes(votes_path), read_certificates(cert_path)
        by_setting[setting_columns(votes, certs)["setting"]] = (votes, certs)
    folder = Path(out_dir) / task
    written = []
    for method in METHODS:
        setting, k = str(row[f"{method}_setting"]), float(row[f"{method}_k_target"])
        if setting not in by_setting:
            raise ValueError(f"{task}: the selected {method} setting {setting} is not among the certificates given "
                             f"({sorted(by_setting)})")
        votes, certs = by_setting[setting]
        k_index = int(np.argmin(np.abs(np.asarray(votes.k_grid) - k)))
        mask = method_masks(votes, certs)[method][k_index]
        graph = graph_dict(cfg, names, scores, mask)
        path = folder / f"{method}_K{_k_label(k)}.json"
        written.append(write_graph_json(path, graph))
        if method == "certified":
            side = decisions_sidecar(names, certs.decision[k_index], k=k,
                                     setting={**setting_columns(votes, certs), "level": level})
            written.append(write_json(folder / f"certified_K{_k_label(k)}.decisions.json", side))
    written.append(write_graph_json(folder / "scores.json", graph_dict(cfg, names, scores,
                                                                        np.zeros(len(names), dtype=bool))))
    return written


def _edge_names_of(cfg: Mapping) -> list[str]:
    from certified_circuits.language.graph import edge_names

    return edge_names(int(cfg["n_layers"]), int(cfg["n_heads"]), bool(cfg["parallel_attn_mlp"]))
