"""hannamw/EAP-IG's Graph JSON: the circuit format that its ``Graph.from_json`` loads and MIB's circuit
track reads.

Layout (the reference's ``Graph.to_json``)::

    {"cfg": {"n_layers": L, "n_heads": H, "parallel_attn_mlp": bool, "d_model": d, ...},
     "nodes": {"input": {"in_graph": bool[, "score": float]}, "a0.h0": {...}, "m0": {...}, ..., "logits": {...}},
     "edges": {"input->a0.h0<q>": {"score": float, "in_graph": bool}, "a0.h0->m0": {...}, ...}}

The reference's ``from_json`` rebuilds the graph with ``Graph.from_model(d["cfg"])``, which reads only
``n_layers``, ``n_heads``, ``parallel_attn_mlp`` and ``d_model`` (extra keys such as the model path are
kept in the file and ignored), then looks up every node (except ``logits``) and every edge of the file:
every name must be one of the reference graph's. Scores must be finite (``allow_nan=False``).

Node ``in_graph``: a node is in the circuit iff it is the parent or the child of an in-graph edge
(``logits`` iff an edge into it is), the state the reference's ``prune`` leaves for a connected circuit.
For node-level circuits the caller gives the nodes' own scores and membership instead.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from certified_circuits.storage.atomic import write_text

_NODE = r"(input|logits|a\d+\.h\d+|m\d+)"
_EDGE = re.compile(rf"^{_NODE}->{_NODE}(<[qkv]>)?$")


def graph_cfg(n_layers: int, n_heads: int, d_model: int, parallel_attn_mlp: bool, **extra: Any) -> dict:
    """The ``cfg`` block: the four keys ``Graph.from_model`` reads, then ``extra`` (model, task, method...).

    Args:
        n_layers, n_heads, d_model: the model's shape (query heads).
        parallel_attn_mlp: parallel attention and MLP (GPT-NeoX, GPT-J).
        extra: labels kept in the file.

    Returns:
        The dict written as ``cfg``.
    """
    return {"n_layers": int(n_layers), "n_heads": int(n_heads), "parallel_attn_mlp": bool(parallel_attn_mlp),
            "d_model": int(d_model), **extra}


def _endpoints(name: str) -> tuple[str, str]:
    match = _EDGE.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not an EAP edge name (parent->child, e.g. 'a0.h1->m2' or 'input->a1.h0<q>')")
    return match.group(1), match.group(2)


def circuit_graph_json(cfg: Mapping[str, Any], edge_names: Sequence[str], scores: np.ndarray, in_graph: np.ndarray, *,
                       node_scores: np.ndarray | None = None, node_names: Sequence[str] | None = None,
                       node_in_graph: np.ndarray | None = None) -> dict:
    """The Graph JSON dict of one circuit.

    Args:
        cfg: :func:`graph_cfg`.
        edge_names: every edge of the graph, ``parent->child[<q|k|v>]``.
        scores: float [E] edge scores (finite).
        in_graph: bool [E] the circuit's edges.
        node_scores, node_names, node_in_graph: a node-level circuit: scores and membership of the named
            nodes (heads and MLPs); ``input`` and ``logits`` are always in it.

    Returns:
        ``{"cfg", "nodes", "edges"}`` (module docstring).
    """
    scores = np.asarray(scores, dtype=np.float64)
    in_graph = np.asarray(in_graph, dtype=bool)
    if not (len(edge_names) == scores.shape[0] == in_graph.shape[0]):
        raise ValueError(f"{len(edge_names)} edge names, {scores.shape[0]} scores and {in_graph.shape[0]} in_graph "
                         f"flags: they must have one entry per edge")
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        raise ValueError(f"edge {edge_names[bad[0]]!r} has score {scores[bad[0]]}: Graph JSON needs finite scores")
    ends = [_endpoints(n) for n in edge_names]
    order: dict[str, None] = {}
    for parent, child in ends:
        order.setdefault(parent)
        order.setdefault(child)
    nodes = {n: {"in_graph": False} for n in order if n != "logits"}
    nodes["logits"] = {"in_graph": False}
    if node_names is not None:
        node_in = np.asarray(node_in_graph, dtype=bool)
        for name, score, keep in zip(node_names, np.asarray(node_scores, dtype=np.float64), node_in):
            if not math.isfinite(score):
                raise ValueError(f"node {name!r} has score {score}: Graph JSON needs finite scores")
            nodes[name] = {"in_graph": bool(keep), "score": float(score)}
        nodes["input"]["in_graph"] = nodes["logits"]["in_graph"] = True
    else:
        for (parent, child), keep in zip(ends, in_graph):
            if keep:
                nodes[parent]["in_graph"] = nodes[child]["in_graph"] = True
    edges = {name: {"score": float(s), "in_graph": bool(k)} for name, s, k in zip(edge_names, scores, in_graph)}
    return {"cfg": dict(cfg), "nodes": nodes, "edges": edges}


def write_graph_json(path: str | os.PathLike, graph: Mapping[str, Any]) -> Path:
    """Write a Graph JSON dict atomically (no NaN allowed); returns the path."""
    return write_text(path, json.dumps(graph, allow_nan=False))


def read_graph_json(path: str | os.PathLike) -> dict:
    """Read a Graph JSON file, checking its three blocks."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [k for k in ("cfg", "nodes", "edges") if k not in d]
    if missing:
        raise ValueError(f"{path} is not an EAP-IG Graph JSON: missing {missing} (needs cfg, nodes, edges)")
    return d


def decisions_sidecar(names: Sequence[str], decision: np.ndarray, *, k: float, setting: Mapping[str, Any]) -> dict:
    """The certificate beside a certified circuit's Graph JSON (which shows only in or not in).

    Args:
        names: component names (edges, or heads and MLPs).
        decision: int [U] in {1 in, 0 out, -1 abstain}.
        k: the circuit size K.
        setting: the certification setting (p_del, n0, n, seed, tau, alpha, correction, radius, ...).

    Returns:
        ``{"k", "setting", "in", "out", "abstain", "counts"}``.
    """
    decision = np.asarray(decision)
    groups = {label: [n for n, d in zip(names, decision) if d == value]
              for label, value in (("in", 1), ("out", 0), ("abstain", -1))}
    return {"k": float(k), "setting": {key: (v.item() if hasattr(v, "item") else v) for key, v in setting.items()},
            **groups, "counts": {label: len(v) for label, v in groups.items()}}
